//! NodeResourcesFit: the node must have room for the pod's requests; scores by a strategy.

use crate::dra::DraObjects;
use std::borrow::Cow;

use serde::Deserialize;

use crate::events::{ClusterEvent, QueueingHint};
use crate::framework::node_hint;
use crate::framework::{FilterPlugin, PluginState, PreFilterOutcome, ScorePlugin};
use crate::node_info::NodeInfo;
use crate::pod_info::PodInfo;
use crate::resource::{CPU, EPHEMERAL_STORAGE, MEMORY, format_amount, is_extended_resource_name};
use crate::snapshot::Snapshot;
use crate::status::{Code, Status};

use super::ArgsError;
use super::resource_allocation::{
    ResourceSpec, ShapePoint, default_resources, least_allocated, most_allocated, node_amounts, pod_request,
    requested_to_capacity_ratio,
};

/// Plugin name.
pub const NAME: &str = "NodeResourcesFit";
/// Reason when the node's pod slots are full.
pub const ERR_REASON_TOO_MANY_PODS: &str = "Too many pods";

/// `NodeResourcesFitArgs`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeResourcesFitArgs {
    /// Extended resources the filter does not check.
    #[serde(default)]
    pub ignored_resources: Vec<String>,
    /// Extended resource groups (the part before `/`) the filter does not check.
    #[serde(default)]
    pub ignored_resource_groups: Vec<String>,
    /// How nodes are scored.
    #[serde(default)]
    pub scoring_strategy: Option<ScoringStrategy>,
}

/// `ScoringStrategy`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScoringStrategy {
    /// LeastAllocated (default), MostAllocated or RequestedToCapacityRatio.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    /// Scored resources and weights (cpu and memory by default).
    #[serde(default)]
    pub resources: Vec<ResourceSpec>,
    /// The shape for RequestedToCapacityRatio.
    #[serde(default)]
    pub requested_to_capacity_ratio: Option<RequestedToCapacityRatioParam>,
}

/// `RequestedToCapacityRatioParam`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RequestedToCapacityRatioParam {
    /// Points (utilization 0-100, score 0-10), utilization strictly increasing.
    pub shape: Vec<UtilizationShapePoint>,
}

/// One shape point as configured.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UtilizationShapePoint {
    /// Utilization 0-100.
    pub utilization: i64,
    /// Score 0-10.
    pub score: i64,
}

#[derive(Debug, Clone)]
enum Strategy {
    Least,
    Most,
    Ratio(Vec<ShapePoint>),
}

/// The NodeResourcesFit filter and score.
#[derive(Debug, Clone)]
pub struct NodeResourcesFit {
    ignored: Vec<String>,
    ignored_groups: Vec<String>,
    strategy: Strategy,
    resources: Vec<ResourceSpec>,
    weights: Vec<i64>,
    /// `DRAExtendedResource`: requests of resources a DeviceClass serves are left to
    /// DynamicResources on nodes that do not advertise them.
    dra_extended: bool,
}

/// The pod's requests that DynamicResources meets on nodes not advertising them.
struct Deferred(Vec<String>);

impl Default for NodeResourcesFit {
    fn default() -> Self {
        NodeResourcesFit {
            ignored: vec![],
            ignored_groups: vec![],
            strategy: Strategy::Least,
            resources: default_resources(),
            weights: vec![1, 1],
            dra_extended: true,
        }
    }
}

/// Validates and defaults a resource list: weight 0 becomes 1, weights must be 1..=100.
pub fn checked_resources(mut resources: Vec<ResourceSpec>, field: &str) -> Result<Vec<ResourceSpec>, ArgsError> {
    if resources.is_empty() {
        resources = default_resources();
    }
    for r in &mut resources {
        if r.weight == 0 {
            r.weight = 1;
        }
        if !(1..=100).contains(&r.weight) {
            return Err(ArgsError::new(
                NAME,
                format!("{field}: resource {} weight {} must be in 1..=100", r.name, r.weight),
            ));
        }
    }
    Ok(resources)
}

impl NodeResourcesFit {
    /// Builds the plugin, validating its args.
    pub fn new(args: &NodeResourcesFitArgs) -> Result<Self, ArgsError> {
        let strategy_args = args.scoring_strategy.clone().unwrap_or_default();
        let resources = checked_resources(strategy_args.resources, "scoringStrategy.resources")?;
        let strategy = match strategy_args.kind.as_deref().unwrap_or("LeastAllocated") {
            "LeastAllocated" => Strategy::Least,
            "MostAllocated" => Strategy::Most,
            "RequestedToCapacityRatio" => {
                let Some(param) = strategy_args.requested_to_capacity_ratio else {
                    return Err(ArgsError::new(
                        NAME,
                        "requestedToCapacityRatio is required for RequestedToCapacityRatio",
                    ));
                };
                Strategy::Ratio(checked_shape(&param.shape)?)
            }
            other => return Err(ArgsError::new(NAME, format!("scoringStrategy.type {other:?} is not supported"))),
        };
        Ok(NodeResourcesFit {
            ignored: args.ignored_resources.clone(),
            ignored_groups: args.ignored_resource_groups.clone(),
            strategy,
            weights: resources.iter().map(|r| r.weight).collect(),
            resources,
            dra_extended: true,
        })
    }

    /// The plugin with `DRAExtendedResource` on or off.
    pub fn with_dra_extended(mut self, on: bool) -> Self {
        self.dra_extended = on;
        self
    }

    fn ignored(&self, name: &str) -> bool {
        is_extended_resource_name(name)
            && (self.ignored.iter().any(|i| i == name)
                || name.split_once('/').is_some_and(|(group, _)| self.ignored_groups.iter().any(|g| g == group)))
    }
}

fn checked_shape(shape: &[UtilizationShapePoint]) -> Result<Vec<ShapePoint>, ArgsError> {
    if shape.is_empty() {
        return Err(ArgsError::new(NAME, "requestedToCapacityRatio.shape must not be empty"));
    }
    let mut prev = -1;
    for p in shape {
        if !(0..=100).contains(&p.utilization) || p.utilization <= prev {
            return Err(ArgsError::new(NAME, "shape utilization must be within 0..=100 and strictly increasing"));
        }
        if !(0..=10).contains(&p.score) {
            return Err(ArgsError::new(NAME, "shape score must be within 0..=10"));
        }
        prev = p.utilization;
    }
    Ok(shape.iter().map(|p| ShapePoint { utilization: p.utilization, score: p.score * 10 }).collect())
}

/// One resource the node lacks.
struct Shortfall {
    reason: Cow<'static, str>,
    detail: String,
    unresolvable: bool,
}

/// "Insufficient <resource>", without allocating for the common resources.
fn insufficient(name: &str) -> Cow<'static, str> {
    match name {
        "cpu" => Cow::Borrowed("Insufficient cpu"),
        "memory" => Cow::Borrowed("Insufficient memory"),
        "ephemeral-storage" => Cow::Borrowed("Insufficient ephemeral-storage"),
        "pods" => Cow::Borrowed("Insufficient pods"),
        _ => Cow::Owned(format!("Insufficient {name}")),
    }
}

fn shortfall(name: &str, want: i64, alloc: i64, used: i64) -> Option<Shortfall> {
    (want > 0 && want > alloc - used).then(|| Shortfall {
        reason: insufficient(name),
        detail: if crate::status::details_enabled() {
            format!(
                "{name}: requested {}, {} free of {} allocatable",
                format_amount(name, want),
                format_amount(name, (alloc - used).max(0)),
                format_amount(name, alloc)
            )
        } else {
            String::new()
        },
        unresolvable: want > alloc,
    })
}

impl FilterPlugin for NodeResourcesFit {
    fn name(&self) -> &'static str {
        NAME
    }

    fn node_local(&self) -> bool {
        true
    }

    fn pre_filter(&self, pod: &PodInfo, snapshot: &Snapshot) -> PreFilterOutcome {
        if !self.dra_extended || pod.device_asks.is_empty() {
            return PreFilterOutcome::run(PluginState::none());
        }
        let dra = snapshot.objects.dra();
        let served = crate::dra::extended::served(&pod.device_asks, dra);
        PreFilterOutcome::run(PluginState::new(Deferred(served.into_iter().map(|(n, _)| n).collect())))
    }

    fn filter(&self, state: &PluginState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let deferred = state.get::<Deferred>().map_or(&[][..], |d| &d.0[..]);
        let req = &pod.requests.requests;
        let mut short: Vec<Shortfall> = Vec::new();
        let pods = node.pods.len() as i64;
        if pods + 1 > node.allocatable.allowed_pod_number {
            short.push(Shortfall {
                reason: ERR_REASON_TOO_MANY_PODS.into(),
                detail: format!("pods: {pods} of {} in use", node.allocatable.allowed_pod_number),
                unresolvable: false,
            });
        }
        if !req.is_zero() {
            let (a, u) = (&node.allocatable, &node.requested);
            short.extend(shortfall(CPU, req.milli_cpu, a.milli_cpu, u.milli_cpu));
            short.extend(shortfall(MEMORY, req.memory, a.memory, u.memory));
            short.extend(shortfall(EPHEMERAL_STORAGE, req.ephemeral_storage, a.ephemeral_storage, u.ephemeral_storage));
            for (name, want) in &req.scalar {
                if *want == 0 || self.ignored(name) {
                    continue;
                }
                if a.get(name) == 0 && deferred.iter().any(|d| d == name) {
                    // No device plugin advertises it here: DynamicResources allocates it.
                    continue;
                }
                short.extend(shortfall(name, *want, a.get(name), u.get(name)));
            }
        }
        if short.is_empty() {
            return Status::success();
        }
        let code =
            if short.iter().any(|s| s.unresolvable) { Code::UnschedulableAndUnresolvable } else { Code::Unschedulable };
        let detail = crate::status::details_enabled()
            .then(|| short.iter().map(|s| s.detail.as_str()).collect::<Vec<_>>().join("; "));
        Status { code, reasons: short.into_iter().map(|s| s.reason).collect(), detail, plugin: NAME }
    }

    /// A node with room for the pod, any placed pod going away (it frees a pod slot and
    /// its requests), or a placed pod resized down in a resource the pod asks for.
    fn queueing_hint(&self, pod: &PodInfo, event: &ClusterEvent) -> QueueingHint {
        if let Some(hint) = node_hint(self, pod, event) {
            return hint;
        }
        match event {
            ClusterEvent::PodDeleted(_) => QueueingHint::Queue,
            ClusterEvent::Object(e) if e.kind == crate::dra::kinds::DEVICE_CLASS => {
                // A class may now serve what the pod asks for.
                QueueingHint::from_bool(self.dra_extended && !pod.device_asks.is_empty())
            }
            ClusterEvent::PodUpdated { old, new } if old.node_name.is_some() => {
                QueueingHint::from_bool(frees_what_pod_asks(&old.requests.requests, &new.requests.requests, pod))
            }
            _ => QueueingHint::Skip,
        }
    }
}

/// Whether a placed pod's requests went from `old` to `new` giving back some of a resource
/// `pod` asks for (any resource, when it asks for none).
fn frees_what_pod_asks(old: &crate::resource::Resource, new: &crate::resource::Resource, pod: &PodInfo) -> bool {
    let want = &pod.requests.requests;
    let asks_nothing = want.milli_cpu == 0 && want.memory == 0 && want.ephemeral_storage == 0 && want.scalar.is_empty();
    let shrank = |asked: i64, before: i64, after: i64| (asks_nothing || asked > 0) && after < before;
    shrank(want.milli_cpu, old.milli_cpu, new.milli_cpu)
        || shrank(want.memory, old.memory, new.memory)
        || shrank(want.ephemeral_storage, old.ephemeral_storage, new.ephemeral_storage)
        || old.scalar.iter().any(|(name, before)| {
            let asked = want.scalar.iter().find(|(n, _)| n == name).map_or(0, |(_, v)| *v);
            let after = new.scalar.iter().find(|(n, _)| n == name).map_or(0, |(_, v)| *v);
            shrank(asked, *before, after)
        })
}

/// The pod's request per scored resource, computed once per cycle, with the DeviceClass
/// serving each resource the pod asks for (`DRAExtendedResource`).
struct PodRequestVector(Vec<i64>, Vec<Option<String>>);

impl ScorePlugin for NodeResourcesFit {
    fn name(&self) -> &'static str {
        NAME
    }

    fn node_local(&self) -> bool {
        true
    }

    fn pre_score(&self, pod: &PodInfo, snapshot: &Snapshot, _: &[usize]) -> Result<PluginState, Status> {
        let v: Vec<i64> = self.resources.iter().map(|r| pod_request(pod, &r.name, true)).collect();
        let dra = snapshot.objects.dra();
        let classes = self
            .resources
            .iter()
            .zip(&v)
            .map(|(r, &want)| {
                let served = self.dra_extended && want > 0 && crate::device_asks::is_dra_name(&r.name);
                served.then(|| crate::dra::extended::class_for(dra, &r.name).map(|c| c.name.clone())).flatten()
            })
            .collect();
        Ok(PluginState::new(PodRequestVector(v, classes)))
    }

    fn score(&self, state: &PluginState, pod: &PodInfo, node: &NodeInfo, snapshot: &Snapshot) -> i64 {
        let n = self.resources.len();
        let mut requested = [0i64; 8];
        let mut allocatable = [0i64; 8];
        let mut heap_req;
        let mut heap_alloc;
        let (req, alloc): (&mut [i64], &mut [i64]) = if n <= 8 {
            (&mut requested[..n], &mut allocatable[..n])
        } else {
            heap_req = vec![0; n];
            heap_alloc = vec![0; n];
            (&mut heap_req, &mut heap_alloc)
        };
        for (i, r) in self.resources.iter().enumerate() {
            let pod_req = match state.get::<PodRequestVector>() {
                Some(v) => v.0.get(i).copied().unwrap_or(0),
                None => pod_request(pod, &r.name, true),
            };
            let class = state.get::<PodRequestVector>().and_then(|v| v.1.get(i).cloned().flatten());
            let (a, used) = match class.filter(|_| node.allocatable.get(&r.name) == 0) {
                // Served by DRA here: the node's devices of the class, and those held.
                Some(class) => {
                    crate::dra::extended::class_devices(snapshot.objects.dra(), &node.name, &node.labels, &class, true)
                }
                None => node_amounts(node, &r.name, pod_req, false),
            };
            if a != 0 {
                alloc[i] = a;
                req[i] = used + pod_req;
            }
        }
        match &self.strategy {
            Strategy::Least => least_allocated(req, alloc, &self.weights),
            Strategy::Most => most_allocated(req, alloc, &self.weights),
            Strategy::Ratio(shape) => requested_to_capacity_ratio(shape, req, alloc, &self.weights),
        }
    }
}

#[cfg(test)]
#[path = "node_resources_fit_tests.rs"]
mod tests;
