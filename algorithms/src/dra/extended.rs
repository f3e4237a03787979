//! Extended resources backed by DRA (`DRAExtendedResource`): a container asking for an
//! extended resource (`nvidia.com/gpu: 2`, or `deviceclass.resource.kubernetes.io/<class>`)
//! that its node does not advertise gets devices of the DeviceClass serving that
//! resource, through one ResourceClaim the scheduler makes for the pod (the pod's
//! "extended resource claim"), as kube-scheduler does.
//!
//! Requests are named `container-<i>-request-<j>`: `i` indexes the init containers then
//! the containers, `j` the resource among all the container's requests in name order.
//! Long-lived containers (regular ones and sidecars) each get a request of their own; an
//! init container that is not a sidecar first uses the requests of the long-lived
//! containers after it (they are not running yet) and asks only for the rest, and of the
//! init containers' own requests only the largest is kept (they run one after another).

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::resource::v1 as api;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

pub use crate::device_asks::{CLASS_PREFIX, ContainerAsk, container_asks, is_dra_name};

use super::{DeviceClass, DraState};

/// The annotation (value `"true"`) marking a pod's extended resource claim.
pub const ANNOTATION: &str = "resource.kubernetes.io/extended-resource-claim";
/// The claim's name until PreBind creates it (not a valid object name, so never a real claim's).
pub const IN_MEMORY_NAME: &str = "<extended-resources>";

/// The DeviceClass serving an extended resource: for an implicit name the class it
/// names; else, of the classes declaring it in `extendedResourceName`, the newest (the
/// first by name among equally new ones).
pub fn class_for<'a>(dra: &'a DraState, name: &str) -> Option<&'a Arc<DeviceClass>> {
    if let Some(class) = name.strip_prefix(CLASS_PREFIX) {
        return dra.class(class);
    }
    dra.classes()
        .filter(|c| c.extended_resource_name.as_deref() == Some(name))
        .max_by(|a, b| a.created_nanos.cmp(&b.created_nanos).then_with(|| b.name.cmp(&a.name)))
}

/// The resources a pod asks for that some DeviceClass serves, in name order, with the
/// class serving each.
pub fn served(asks: &[ContainerAsk], dra: &DraState) -> Vec<(String, Arc<DeviceClass>)> {
    let names: BTreeSet<&str> = asks.iter().flat_map(|a| a.amounts.iter().map(|(n, _)| n.as_str())).collect();
    names.into_iter().filter_map(|n| Some((n.to_string(), class_for(dra, n)?.clone()))).collect()
}

/// One request of the extended resource claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecialRequest {
    /// `container-<i>-request-<j>`.
    pub name: String,
    /// The DeviceClass.
    pub class: String,
    /// How many devices (ExactCount).
    pub count: i64,
}

/// One entry of the pod's `status.extendedResourceClaimStatus.requestMappings`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// The container.
    pub container: String,
    /// The extended resource.
    pub resource: String,
    /// The claim's request serving it.
    pub request: String,
}

/// The claim's requests (by name) and the containers' mappings to them, for the
/// resources `names` (with their classes) that the node leaves to DRA.
pub fn requests_and_mappings(
    asks: &[ContainerAsk],
    names: &[(String, Arc<DeviceClass>)],
) -> (Vec<SpecialRequest>, Vec<Mapping>) {
    let mut requests = Vec::new();
    let mut mappings = Vec::new();
    for (resource, class) in names {
        let own = |a: &ContainerAsk, count: i64| {
            let j = a.keys.iter().position(|k| k == resource).unwrap_or(0);
            let name = format!("container-{}-request-{j}", a.index);
            let mapping = Mapping { container: a.container.clone(), resource: resource.clone(), request: name.clone() };
            (SpecialRequest { name, class: class.name.clone(), count }, mapping)
        };
        // Long-lived containers' requests, by position in `asks`.
        let mut long: Vec<Option<SpecialRequest>> = vec![None; asks.len()];
        for (k, a) in asks.iter().enumerate().filter(|(_, a)| !a.short_lived) {
            let want = a.amount(resource);
            if want > 0 {
                let (r, m) = own(a, want);
                long[k] = Some(r);
                mappings.push(m);
            }
        }
        let mut short_mappings: Vec<Mapping> = Vec::new();
        let mut short_names: BTreeSet<String> = BTreeSet::new();
        let mut largest: Option<SpecialRequest> = None;
        for (k, a) in asks.iter().enumerate().filter(|(_, a)| a.short_lived) {
            let want = a.amount(resource);
            if want == 0 {
                continue;
            }
            let mut covered = 0;
            for r in long[k..].iter().flatten() {
                covered += r.count;
                short_mappings.push(Mapping {
                    container: a.container.clone(),
                    resource: resource.clone(),
                    request: r.name.clone(),
                });
                if covered >= want {
                    break;
                }
            }
            if covered >= want {
                continue;
            }
            let (r, m) = own(a, want - covered);
            short_mappings.push(m);
            short_names.insert(r.name.clone());
            if largest.as_ref().is_none_or(|l| l.count < r.count) {
                largest = Some(r);
            }
        }
        if let Some(l) = &largest {
            for m in short_mappings.iter_mut().filter(|m| short_names.contains(&m.request)) {
                m.request = l.name.clone();
            }
        }
        mappings.extend(short_mappings);
        requests.extend(largest);
        requests.extend(long.into_iter().flatten());
    }
    requests.sort_by(|a, b| a.name.cmp(&b.name));
    (requests, mappings)
}

/// A pod's extended resource claim as the scheduler creates it: named `name` in the
/// pod's namespace, annotated, controlled by the pod (`namespace/pod`, UID `uid`), asking
/// for `requests`.
pub fn claim_object(
    namespace: &str,
    pod: &str,
    uid: &str,
    name: &str,
    requests: &[SpecialRequest],
) -> api::ResourceClaim {
    let requests = requests
        .iter()
        .map(|r| api::DeviceRequest {
            name: r.name.clone(),
            exactly: Some(api::ExactDeviceRequest {
                device_class_name: r.class.clone(),
                allocation_mode: Some("ExactCount".into()),
                count: Some(r.count),
                ..Default::default()
            }),
            ..Default::default()
        })
        .collect();
    api::ResourceClaim {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            annotations: Some([(ANNOTATION.to_string(), "true".to_string())].into()),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: pod.to_string(),
                uid: uid.to_string(),
                controller: Some(true),
                ..Default::default()
            }]),
            ..Default::default()
        },
        spec: api::ResourceClaimSpec {
            devices: Some(api::DeviceClaim { requests: Some(requests), ..Default::default() }),
        },
        status: None,
    }
}

/// A name for a pod's extended resource claim, as the API server generates one from
/// `<pod>-extended-resources-` (the base cut to 58 characters, five random characters
/// after it).
pub fn claim_name(pod: &str) -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut base = format!("{pod}-extended-resources-");
    base.truncate(58);
    let mut rng = rand::rng();
    base.extend((0..5).map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())])));
    base
}

/// Whether a claim is the extended resource claim of the pod with this name and UID.
pub fn is_special_for(claim: &api::ResourceClaim, pod: &str, uid: &str) -> bool {
    let meta = &claim.metadata;
    meta.annotations.as_ref().and_then(|a| a.get(ANNOTATION)).is_some_and(|v| v == "true")
        && meta.owner_references.iter().flatten().any(|o| o.name == pod && o.uid == uid && o.controller == Some(true))
}

/// A node's devices of a class, as scoring counts them: how many the node reaches in
/// complete, valid pools, and how many of those claims hold (whole or shared).
pub fn class_devices(
    state: &DraState,
    node: &str,
    labels: &crate::labels::Labels,
    class: &str,
    partitionable: bool,
) -> (i64, i64) {
    let prepared = super::selectors::prepare_class(state, class);
    devices_selected(state, node, labels, &prepared, partitionable)
}

/// [`class_devices`] with the class's selectors compiled once by the caller
/// ([`super::prepare_class`]).
pub fn devices_selected(
    state: &DraState,
    node: &str,
    labels: &crate::labels::Labels,
    prepared: &super::Prepared,
    partitionable: bool,
) -> (i64, i64) {
    let reach = super::pools::node_devices(state, node, labels, partitionable);
    let (mut total, mut held) = (0i64, 0i64);
    for d in &reach.devices {
        let pool = &reach.pools[d.pool];
        if pool.incomplete || pool.invalid.is_some() || !super::selectors::matches(prepared, d).unwrap_or(false) {
            continue;
        }
        total += 1;
        if state.holders(&d.device.id) > 0 || state.shares(&d.device.id).is_some() {
            held += 1;
        }
    }
    (total, held)
}
