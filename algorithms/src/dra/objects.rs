//! The DRA objects the scheduler reads (`resource.k8s.io/v1`), parsed once when they
//! arrive: ResourceSlices with their devices, DeviceClasses and ResourceClaims.
//!
//! One file though long: the three kinds share their parsed parts (attributes, capacity
//! amounts, selectors, node scopes), each read by the parsers of more than one kind.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock, RwLock};

use k8s_openapi::api::resource::v1 as api;

use crate::labels::NodeSelector;
use crate::quantity::Quantity;

/// A device attribute's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Attribute {
    /// `int`.
    Int(i64),
    /// `bool`.
    Bool(bool),
    /// `string`.
    Str(String),
    /// `version` (semantic version text).
    Version(String),
}

impl Attribute {
    fn from_api(a: &api::DeviceAttribute) -> Option<Self> {
        if let Some(i) = a.int {
            Some(Attribute::Int(i))
        } else if let Some(b) = a.bool {
            Some(Attribute::Bool(b))
        } else if let Some(s) = &a.string {
            Some(Attribute::Str(s.clone()))
        } else {
            a.version.as_ref().map(|v| Attribute::Version(v.clone()))
        }
    }
}

/// Which nodes can reach a slice's (or a device's) devices.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeScope {
    /// One node, by name.
    Node(String),
    /// The nodes a selector matches (parsed, and as published).
    Selector(NodeSelector, Arc<k8s_openapi::api::core::v1::NodeSelector>),
    /// Every node.
    All,
    /// Each device says (`perDeviceNodeSelection`).
    PerDevice,
}

impl NodeScope {
    fn from_parts(
        node_name: Option<&String>,
        selector: Option<&k8s_openapi::api::core::v1::NodeSelector>,
        all: Option<bool>,
        per_device: Option<bool>,
    ) -> Option<Self> {
        if let Some(n) = node_name.filter(|n| !n.is_empty()) {
            Some(NodeScope::Node(n.clone()))
        } else if let Some(s) = selector {
            Some(NodeScope::Selector(NodeSelector::parse(s), Arc::new(s.clone())))
        } else if all == Some(true) {
            Some(NodeScope::All)
        } else if per_device == Some(true) {
            Some(NodeScope::PerDevice)
        } else {
            None
        }
    }

    /// Whether a node (name and labels) can reach the devices.
    pub fn reaches(&self, node: &str, labels: &crate::labels::Labels) -> bool {
        match self {
            NodeScope::Node(n) => n == node,
            NodeScope::Selector(s, _) => s.matches(node, labels),
            NodeScope::All => true,
            NodeScope::PerDevice => false,
        }
    }
}

/// One device a driver published.
#[derive(Debug)]
pub struct Device {
    /// Its name, unique in its pool.
    pub name: String,
    /// Driver, pool and name.
    pub id: super::DeviceId,
    /// Attributes by fully qualified name (`domain/id`; unqualified names get the driver's domain).
    pub attributes: BTreeMap<String, Attribute>,
    /// Capacities by fully qualified name.
    pub capacity: BTreeMap<String, Quantity>,
    /// Where the device can be used, when the slice selects per device.
    pub scope: Option<NodeScope>,
    /// The device declares binding conditions (the allocation waits for the driver).
    pub binding_conditions: Vec<String>,
    /// Binding failure conditions.
    pub binding_failure_conditions: Vec<String>,
    /// `bindsToNode`: an allocation of it is usable on the node it was made for only.
    pub binds_to_node: bool,
    /// The shared counters it consumes while allocated (partitionable devices).
    pub consumes: Vec<CounterUse>,
    /// Its taints with effect NoSchedule or NoExecute (a `None` taint only informs).
    pub taints: Vec<DeviceTaint>,
    /// `allowMultipleAllocations`: several claims may share it while its capacity lasts.
    pub multi: bool,
    /// Its capacities as published (names as the slice spells them), with their request
    /// policies (consumable capacity).
    pub capacities: Vec<Capacity>,
    /// Its CEL value, built when a selector first reads it.
    cel: OnceLock<Result<Box<dyn cel::common::value::Val>, String>>,
    /// Selector verdicts by selector set (see `selectors`).
    pub(super) verdicts: RwLock<rustc_hash::FxHashMap<u64, bool>>,
}

impl Device {
    /// Its CEL `device` value (built once).
    pub fn cel_value(&self, driver: &str) -> &Result<Box<dyn cel::common::value::Val>, String> {
        self.cel.get_or_init(|| super::selectors::device_value(driver, self))
    }
}

/// `domain/id` for an attribute or capacity name as published by `driver`.
pub fn qualify(driver: &str, name: &str) -> String {
    if name.contains('/') { name.to_string() } else { format!("{driver}/{name}") }
}

/// A ResourceSlice.
#[derive(Debug, Clone)]
pub struct Slice {
    /// Its name.
    pub name: String,
    /// The driver publishing it.
    pub driver: String,
    /// The pool it belongs to.
    pub pool: String,
    /// The pool's generation this slice belongs to.
    pub generation: i64,
    /// How many slices the pool's generation has.
    pub slice_count: i64,
    /// Which nodes can reach its devices.
    pub scope: NodeScope,
    /// Its devices, in published order.
    pub devices: Vec<Arc<Device>>,
    /// The counter sets it publishes (partitionable devices; such a slice has no devices).
    pub counter_sets: Vec<CounterSet>,
    /// A number the state gives each slice object it stores, never reused: caches of
    /// per-device results key on it.
    pub version: u64,
}

impl Slice {
    /// Parses a ResourceSlice.
    pub fn from_api(s: &api::ResourceSlice) -> Result<Self, String> {
        let name = s.metadata.name.clone().ok_or("resourceslice has no metadata.name")?;
        let spec = &s.spec;
        let scope = NodeScope::from_parts(
            spec.node_name.as_ref(),
            spec.node_selector.as_ref(),
            spec.all_nodes,
            spec.per_device_node_selection,
        )
        .ok_or_else(|| {
            format!("resourceslice {name}: one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection is required")
        })?;
        let driver = spec.driver.clone();
        let mut devices = Vec::new();
        for d in spec.devices.iter().flatten() {
            let at = |e: String| format!("resourceslice {name}: device {}: {e}", d.name);
            let attributes =
                d.attributes.iter().flatten().filter_map(|(k, v)| Some((qualify(&driver, k), Attribute::from_api(v)?)));
            let mut capacity = BTreeMap::new();
            let mut capacities = Vec::new();
            for (k, c) in d.capacity.iter().flatten() {
                let q = Quantity::parse(&c.value.0)
                    .map_err(|e| format!("resourceslice {name}: device {}: capacity {k}: {e}", d.name))?;
                capacity.insert(qualify(&driver, k), q);
                let policy = c
                    .request_policy
                    .as_ref()
                    .map(CapacityPolicy::from_api)
                    .transpose()
                    .map_err(|e| format!("resourceslice {name}: device {}: capacity {k}: {e}", d.name))?;
                capacities.push(Capacity { name: k.clone(), value: Amount::of(q, &c.value.0), policy });
            }
            let device_scope = if scope == NodeScope::PerDevice {
                Some(
                    NodeScope::from_parts(d.node_name.as_ref(), d.node_selector.as_ref(), d.all_nodes, None)
                        .ok_or_else(|| format!("resourceslice {name}: device {} selects no node", d.name))?,
                )
            } else {
                None
            };
            devices.push(Arc::new(Device {
                id: super::DeviceId::new(&driver, &spec.pool.name, &d.name),
                consumes: d
                    .consumes_counters
                    .iter()
                    .flatten()
                    .map(|c| {
                        Ok(CounterUse { set: c.counter_set.clone(), counters: counters(&c.counters).map_err(&at)? })
                    })
                    .collect::<Result<_, String>>()?,
                taints: d
                    .taints
                    .iter()
                    .flatten()
                    .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
                    .map(|t| DeviceTaint {
                        key: t.key.clone(),
                        value: t.value.clone().unwrap_or_default(),
                        effect: t.effect.clone(),
                    })
                    .collect(),
                name: d.name.clone(),
                multi: d.allow_multiple_allocations == Some(true),
                capacities,
                cel: OnceLock::new(),
                verdicts: RwLock::default(),
                attributes: attributes.collect(),
                capacity,
                scope: device_scope,
                binding_conditions: d.binding_conditions.clone().unwrap_or_default(),
                binding_failure_conditions: d.binding_failure_conditions.clone().unwrap_or_default(),
                binds_to_node: d.binds_to_node == Some(true),
            }));
        }
        let counter_sets = spec
            .shared_counters
            .iter()
            .flatten()
            .map(|c| {
                let counters =
                    counters(&c.counters).map_err(|e| format!("resourceslice {name}: counter set {}: {e}", c.name))?;
                Ok(CounterSet { name: c.name.clone(), counters })
            })
            .collect::<Result<_, String>>()?;
        Ok(Slice {
            name,
            driver,
            pool: spec.pool.name.clone(),
            generation: spec.pool.generation,
            slice_count: spec.pool.resource_slice_count,
            scope,
            devices,
            counter_sets,
            version: 0,
        })
    }
}

/// A quantity as published (its text) with its exact value in nano units.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Amount {
    /// The value in nano units.
    pub nanos: i128,
    /// `Value()`: whole units, rounded up.
    pub value: i64,
    /// The text, as published or as computed.
    pub text: String,
}

impl Amount {
    fn of(q: Quantity, text: &str) -> Self {
        Amount { nanos: q.nanos(), value: q.value(), text: text.to_string() }
    }

    /// Parses a quantity.
    pub fn parse(text: &str) -> Result<Self, String> {
        Quantity::parse(text).map(|q| Amount::of(q, text)).map_err(|e| e.to_string())
    }

    /// A whole number, written as Kubernetes writes a binary-SI quantity (`2`, `4Ki`).
    pub fn whole(value: i64) -> Self {
        let mut mantissa = value;
        let mut exponent = 0;
        while exponent < 6 && mantissa != 0 && mantissa % 1024 == 0 {
            mantissa /= 1024;
            exponent += 1;
        }
        let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][exponent];
        Amount { nanos: i128::from(value) * 1_000_000_000, value, text: format!("{mantissa}{suffix}") }
    }
}

/// A device capacity.
#[derive(Debug, Clone, PartialEq)]
pub struct Capacity {
    /// Its name, as the slice spells it.
    pub name: String,
    /// Its value.
    pub value: Amount,
    /// How requests for it are rounded and bounded.
    pub policy: Option<CapacityPolicy>,
}

/// A capacity's `requestPolicy`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CapacityPolicy {
    /// What a request that does not name the capacity consumes.
    pub default: Option<Amount>,
    /// `validValues`, in order.
    pub valid_values: Vec<Amount>,
    /// `validRange` is set.
    pub range: bool,
    /// Its `min`.
    pub min: Option<Amount>,
    /// Its `max`.
    pub max: Option<Amount>,
    /// Its `step`.
    pub step: Option<Amount>,
}

impl CapacityPolicy {
    fn from_api(p: &api::CapacityRequestPolicy) -> Result<Self, String> {
        let parse = |q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity| Amount::parse(&q.0);
        let range = p.valid_range.as_ref();
        Ok(CapacityPolicy {
            default: p.default.as_ref().map(parse).transpose()?,
            valid_values: p.valid_values.iter().flatten().map(parse).collect::<Result<_, _>>()?,
            range: range.is_some(),
            min: range.map(|r| parse(&r.min)).transpose()?,
            max: range.and_then(|r| r.max.as_ref()).map(parse).transpose()?,
            step: range.and_then(|r| r.step.as_ref()).map(parse).transpose()?,
        })
    }
}

fn capacity_requests(c: Option<&api::CapacityRequirements>) -> Result<Vec<(String, Amount)>, String> {
    c.and_then(|c| c.requests.as_ref())
        .into_iter()
        .flatten()
        .map(|(k, q)| Ok((k.clone(), Amount::parse(&q.0).map_err(|e| format!("capacity {k}: {e}"))?)))
        .collect()
}

/// Counters by name, each in nano units (exact for every Kubernetes quantity).
pub type Counters = BTreeMap<String, i128>;

fn counters(list: &BTreeMap<String, api::Counter>) -> Result<Counters, String> {
    list.iter()
        .map(|(k, c)| {
            let q = Quantity::parse(&c.value.0).map_err(|e| format!("counter {k}: {e}"))?;
            Ok((k.clone(), q.nanos()))
        })
        .collect()
}

/// A counter set a slice publishes: what the devices consuming from it share.
#[derive(Debug, Clone, PartialEq)]
pub struct CounterSet {
    /// Its name, unique in the pool.
    pub name: String,
    /// Its counters.
    pub counters: Counters,
}

/// What a device consumes from one counter set while it is allocated.
#[derive(Debug, Clone, PartialEq)]
pub struct CounterUse {
    /// The counter set's name.
    pub set: String,
    /// The amounts.
    pub counters: Counters,
}

/// A DeviceClass.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceClass {
    /// Its name.
    pub name: String,
    /// CEL selectors, all of which a device must satisfy.
    pub selectors: Vec<String>,
    /// Its opaque configuration, copied into allocations.
    pub config: Vec<api::DeviceClassConfiguration>,
    /// `spec.extendedResourceName`: the extended resource its devices serve.
    pub extended_resource_name: Option<String>,
    /// Creation time in nanoseconds since the epoch (0 when unset): of two classes
    /// serving one extended resource, the newer wins.
    pub created_nanos: i128,
}

impl DeviceClass {
    /// Parses a DeviceClass.
    pub fn from_api(c: &api::DeviceClass) -> Result<Self, String> {
        let name = c.metadata.name.clone().ok_or("deviceclass has no metadata.name")?;
        Ok(DeviceClass {
            selectors: selectors(c.spec.selectors.as_deref()),
            config: c.spec.config.clone().unwrap_or_default(),
            extended_resource_name: c.spec.extended_resource_name.clone().filter(|n| !n.is_empty()),
            created_nanos: c.metadata.creation_timestamp.as_ref().map_or(0, |t| t.0.as_nanosecond()),
            name,
        })
    }
}

fn selectors(s: Option<&[api::DeviceSelector]>) -> Vec<String> {
    s.unwrap_or_default().iter().filter_map(|s| s.cel.as_ref().map(|c| c.expression.clone())).collect()
}

/// How many devices a request takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Exactly this many.
    Count(u32),
    /// Every matching device the node can reach.
    All,
}

/// One way to satisfy a request: a class, selectors and a count.
#[derive(Debug, Clone, PartialEq)]
pub struct Alternative {
    /// The name in allocation results: `request` or `request/subrequest`.
    pub name: String,
    /// The DeviceClass.
    pub class: String,
    /// The request's own CEL selectors.
    pub selectors: Vec<String>,
    /// How many devices.
    pub mode: Mode,
    /// Admin access: the devices are not consumed and may be in use.
    pub admin_access: bool,
    /// The device taints it tolerates.
    pub tolerations: Vec<DeviceToleration>,
    /// Capacity it asks of a device, by the capacity's name (consumable capacity).
    pub capacity: Vec<(String, Amount)>,
}

/// A device's taint (`DRADeviceTaints`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceTaint {
    /// Key.
    pub key: String,
    /// Value (empty when unset).
    pub value: String,
    /// NoSchedule or NoExecute.
    pub effect: String,
}

/// A request's toleration of device taints, as the claim writes it (allocation results
/// carry it as it is).
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceToleration(pub api::DeviceToleration);

impl DeviceToleration {
    /// Whether it tolerates `taint`, as Kubernetes' `ToleratesTaint` for devices: an empty
    /// effect or key matches every one, an empty operator is `Equal`.
    pub fn tolerates(&self, taint: &DeviceTaint) -> bool {
        let t = &self.0;
        let (key, effect) = (t.key.as_deref().unwrap_or_default(), t.effect.as_deref().unwrap_or_default());
        if !effect.is_empty() && effect != taint.effect {
            return false;
        }
        if !key.is_empty() && key != taint.key {
            return false;
        }
        match t.operator.as_deref().unwrap_or_default() {
            "" | "Equal" => t.value.as_deref().unwrap_or_default() == taint.value,
            "Exists" => true,
            _ => false,
        }
    }
}

impl Alternative {
    /// Whether every taint of `device` is tolerated.
    pub fn tolerates_all(&self, device: &Device) -> bool {
        device.taints.iter().all(|t| self.tolerations.iter().any(|tol| tol.tolerates(t)))
    }
}

fn tolerations(list: Option<&[api::DeviceToleration]>) -> Vec<DeviceToleration> {
    list.unwrap_or_default().iter().cloned().map(DeviceToleration).collect()
}

/// A request of a claim: exactly one alternative, or `firstAvailable` sub-requests in
/// order of preference.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The request's name.
    pub name: String,
    /// Its alternatives (one unless it has `firstAvailable`).
    pub alternatives: Vec<Alternative>,
    /// Whether it came from `firstAvailable`.
    pub prioritized: bool,
}

/// A `matchAttribute` or `distinctAttribute` constraint.
#[derive(Debug, Clone, PartialEq)]
pub struct Constraint {
    /// The requests it covers (all when empty).
    pub requests: Vec<String>,
    /// The fully qualified attribute that must be equal (or, `distinct`, differ).
    pub attribute: String,
    /// `distinctAttribute`: every device must differ in the attribute.
    pub distinct: bool,
}

impl Constraint {
    /// Whether the constraint covers a request (`name` may be `request/subrequest`).
    pub fn covers(&self, name: &str) -> bool {
        let parent = name.split('/').next().unwrap_or(name);
        self.requests.is_empty() || self.requests.iter().any(|r| r == name || r == parent)
    }
}

/// Who a claim is reserved for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consumer {
    /// The resource (`pods` for pods).
    pub resource: String,
    /// Name.
    pub name: String,
    /// UID.
    pub uid: String,
}

/// A ResourceClaim, parsed, with the API object it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID.
    pub uid: String,
    /// Resource version.
    pub resource_version: String,
    /// The controlling owner's (kind, name, uid), if any.
    pub owner: Option<(String, String, String)>,
    /// The claim has a deletion timestamp.
    pub deleting: bool,
    /// Requests, in order.
    pub requests: Vec<Request>,
    /// Constraints.
    pub constraints: Vec<Constraint>,
    /// `status.reservedFor`.
    pub reserved_for: Vec<Consumer>,
    /// The API object (its status as assumed, when assumed).
    pub api: Arc<api::ResourceClaim>,
}

/// The most consumers one claim may be reserved for.
pub const MAX_CONSUMERS: usize = 256;

impl Claim {
    /// Parses a ResourceClaim.
    pub fn from_api(c: &api::ResourceClaim) -> Result<Self, String> {
        let meta = &c.metadata;
        let name = meta.name.clone().ok_or("resourceclaim has no metadata.name")?;
        let namespace = meta.namespace.clone().unwrap_or_else(|| "default".into());
        let mut requests = Vec::new();
        for r in c.spec.devices.iter().flat_map(|d| d.requests.iter().flatten()) {
            let alternatives = if let Some(e) = &r.exactly {
                let mode = mode(e.allocation_mode.as_deref(), e.count)
                    .map_err(|m| format!("resourceclaim {namespace}/{name}: request {}: {m}", r.name))?;
                vec![Alternative {
                    name: r.name.clone(),
                    class: e.device_class_name.clone(),
                    selectors: selectors(e.selectors.as_deref()),
                    mode,
                    admin_access: e.admin_access == Some(true),
                    tolerations: tolerations(e.tolerations.as_deref()),
                    capacity: capacity_requests(e.capacity.as_ref())
                        .map_err(|m| format!("resourceclaim {namespace}/{name}: request {}: {m}", r.name))?,
                }]
            } else {
                let mut alts = Vec::new();
                for s in r.first_available.iter().flatten() {
                    let mode = mode(s.allocation_mode.as_deref(), s.count)
                        .map_err(|m| format!("resourceclaim {namespace}/{name}: request {}/{}: {m}", r.name, s.name))?;
                    alts.push(Alternative {
                        name: format!("{}/{}", r.name, s.name),
                        class: s.device_class_name.clone(),
                        selectors: selectors(s.selectors.as_deref()),
                        mode,
                        admin_access: false,
                        tolerations: tolerations(s.tolerations.as_deref()),
                        capacity: capacity_requests(s.capacity.as_ref()).map_err(|m| {
                            format!("resourceclaim {namespace}/{name}: request {}/{}: {m}", r.name, s.name)
                        })?,
                    });
                }
                if alts.is_empty() {
                    return Err(format!(
                        "resourceclaim {namespace}/{name}: request {}: neither exactly nor firstAvailable",
                        r.name
                    ));
                }
                alts
            };
            requests.push(Request { name: r.name.clone(), prioritized: r.exactly.is_none(), alternatives });
        }
        let constraints = c
            .spec
            .devices
            .iter()
            .flat_map(|d| d.constraints.iter().flatten())
            .filter_map(|k| {
                let (attribute, distinct) = match (&k.match_attribute, &k.distinct_attribute) {
                    (Some(a), _) => (a.clone(), false),
                    (None, Some(a)) => (a.clone(), true),
                    (None, None) => return None,
                };
                Some(Constraint { requests: k.requests.clone().unwrap_or_default(), attribute, distinct })
            })
            .collect();
        let status = c.status.as_ref();
        Ok(Claim {
            uid: meta.uid.clone().unwrap_or_default(),
            resource_version: meta.resource_version.clone().unwrap_or_default(),
            owner: meta
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.controller == Some(true))
                .map(|o| (o.kind.clone(), o.name.clone(), o.uid.clone())),
            deleting: meta.deletion_timestamp.is_some(),
            requests,
            constraints,
            reserved_for: status
                .and_then(|s| s.reserved_for.as_ref())
                .into_iter()
                .flatten()
                .map(|r| Consumer { resource: r.resource.clone(), name: r.name.clone(), uid: r.uid.clone() })
                .collect(),
            api: Arc::new(c.clone()),
            namespace,
            name,
        })
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The allocation, if the claim is allocated.
    pub fn allocation(&self) -> Option<&api::AllocationResult> {
        self.api.status.as_ref().and_then(|s| s.allocation.as_ref())
    }

    /// Whether it is reserved for the pod with this UID.
    pub fn reserved_for_pod(&self, uid: &str) -> bool {
        self.reserved_for.iter().any(|c| c.resource == "pods" && c.uid == uid)
    }

    /// The claim as it is once deallocated: no allocation, no consumers, no device
    /// status (what the resourceclaim controller and DynamicResources' PostFilter write).
    pub fn deallocated(&self) -> Claim {
        let mut object = (*self.api).clone();
        if let Some(status) = object.status.as_mut() {
            status.allocation = None;
            status.reserved_for = None;
            status.devices = None;
        }
        Claim { reserved_for: Vec::new(), api: Arc::new(object), ..self.clone() }
    }
}

fn mode(allocation_mode: Option<&str>, count: Option<i64>) -> Result<Mode, String> {
    match allocation_mode.unwrap_or("ExactCount") {
        "ExactCount" => {
            let n = count.unwrap_or(1);
            u32::try_from(n).ok().filter(|n| *n > 0).map(Mode::Count).ok_or_else(|| format!("invalid count {n}"))
        }
        "All" => Ok(Mode::All),
        other => Err(format!("unknown allocationMode {other:?}")),
    }
}

/// The finalizer that keeps an allocated claim from being deleted while in use.
pub const FINALIZER: &str = "resource.kubernetes.io/delete-protection";

/// One claim as the scheduler writes it before binding a pod.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimWrite {
    /// The claim as assumed: its API object carries the new status (and finalizer) and
    /// the resource version it was assumed over.
    pub claim: Arc<Claim>,
    /// The finalizer is to be added first.
    pub add_finalizer: bool,
    /// The scheduler allocated the claim (it was not allocated before).
    pub allocated: bool,
}
