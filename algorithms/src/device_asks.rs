//! What a pod's containers ask for that a DeviceClass may serve (extended resources
//! backed by DRA), read once when the pod is parsed.

use k8s_openapi::api::core::v1 as core;

/// The implicit extended resource name of every DeviceClass: this prefix and its name.
pub const CLASS_PREFIX: &str = "deviceclass.resource.kubernetes.io/";

/// Whether DRA may serve a resource name: an extended resource, or a class's implicit name.
pub fn is_dra_name(name: &str) -> bool {
    crate::resource::is_extended_resource_name(name) || name.starts_with(CLASS_PREFIX)
}

/// One container's requests, as far as the extended resource claim is concerned.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContainerAsk {
    /// The container's name.
    pub container: String,
    /// Its index among the init containers followed by the containers.
    pub index: usize,
    /// An init container that is not a sidecar: it runs before the long-lived ones.
    pub short_lived: bool,
    /// Every resource name it requests, in name order (requests are named after a
    /// resource's position here).
    pub keys: Vec<String>,
    /// Its whole-number requests of resources DRA may serve (fractional ones left out).
    pub amounts: Vec<(String, i64)>,
}

impl ContainerAsk {
    /// How much of a resource it asks for (0: none).
    pub fn amount(&self, name: &str) -> i64 {
        self.amounts.iter().find(|(n, _)| n == name).map_or(0, |(_, q)| *q)
    }
}

/// The containers' asks of a pod spec; empty when no container requests a resource DRA
/// may serve.
pub fn container_asks(spec: &core::PodSpec) -> Vec<ContainerAsk> {
    let init = spec.init_containers.iter().flatten().map(|c| (c, c.restart_policy.as_deref() != Some("Always")));
    let all = init.chain(spec.containers.iter().map(|c| (c, false)));
    let mut out = Vec::new();
    for (index, (c, short_lived)) in all.enumerate() {
        let Some(requests) = c.resources.as_ref().and_then(|r| r.requests.as_ref()) else { continue };
        let amounts: Vec<(String, i64)> = requests
            .iter()
            .filter(|(name, _)| is_dra_name(name))
            .filter_map(|(name, q)| {
                let nanos = crate::quantity::Quantity::parse(&q.0).ok()?.nanos();
                let whole = (nanos > 0 && nanos % 1_000_000_000 == 0).then(|| i64::try_from(nanos / 1_000_000_000))?;
                Some((name.clone(), whole.ok()?))
            })
            .collect();
        if amounts.is_empty() {
            continue;
        }
        // The map is ordered by name already.
        let keys = requests.keys().cloned().collect();
        out.push(ContainerAsk { container: c.name.clone(), index, short_lived, keys, amounts });
    }
    out
}
