//! DevicePacking: place device requests (GPUs and other extended resources) so that whole
//! nodes stay free for large requests.
//!
//! Not a kube-scheduler plugin: it is off in the default profile and enabled by name
//! (see the `gpu` profile in the deploy examples). For a pod that requests some of the
//! configured resources, each node scores by best fit: the fewer devices the pod would
//! leave idle on the node, relative to the node's devices, the higher, so a 1-GPU pod
//! goes to the node with one GPU left before it breaks into a whole 8-GPU node, and a
//! 4-GPU pod prefers a 4-GPU node to half of an 8-GPU one. A pod that requests none of
//! them scores 100 on nodes without any of the devices and 0 on nodes with some, so
//! CPU work does not take the CPU and memory device pods need there.
//!
//! Devices from a DRA driver count too: on a node that does not advertise a configured
//! resource, its devices are those of the DeviceClass serving it (its
//! `extendedResourceName`) that the node reaches, the free ones those no claim holds, and
//! the pod asks for the resource in its containers or for the class's devices in its
//! unallocated claims (ExactCount requests, their first choice).

use crate::dra::DraObjects;
use serde::Deserialize;

use crate::dra::{DraState, Mode, extended};
use crate::framework::{PluginState, ScorePlugin};
use crate::node_info::NodeInfo;
use crate::plugins::dynamic_resources::pod_claims;
use crate::pod_info::PodInfo;
use crate::resource::is_scalar_resource_name;
use crate::snapshot::Snapshot;

use super::ArgsError;
use super::resource_allocation::ResourceSpec;

/// Plugin name.
pub const NAME: &str = "DevicePacking";

/// The highest score.
const MAX: i64 = 100;

/// `DevicePackingArgs`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DevicePackingArgs {
    /// Device resources packed, with weights (default: `nvidia.com/gpu`, weight 1).
    #[serde(default)]
    pub resources: Vec<ResourceSpec>,
}

/// The DevicePacking score.
#[derive(Debug, Clone)]
pub struct DevicePacking {
    resources: Vec<(String, i64)>,
}

impl Default for DevicePacking {
    fn default() -> Self {
        DevicePacking { resources: vec![("nvidia.com/gpu".into(), 1)] }
    }
}

impl DevicePacking {
    /// Builds the plugin, validating its args: extended (or other scalar) resources, each
    /// once, weights 1 to 100 (0 counts as 1).
    pub fn new(args: &DevicePackingArgs) -> Result<Self, ArgsError> {
        if args.resources.is_empty() {
            return Ok(Self::default());
        }
        let mut resources: Vec<(String, i64)> = Vec::new();
        for r in &args.resources {
            if r.name.is_empty() || !is_scalar_resource_name(&r.name) {
                return Err(ArgsError::new(NAME, format!("resource {:?} is not an extended resource", r.name)));
            }
            let weight = if r.weight == 0 { 1 } else { r.weight };
            if !(1..=100).contains(&weight) {
                return Err(ArgsError::new(
                    NAME,
                    format!("resource {} weight {} must be in 1..=100", r.name, r.weight),
                ));
            }
            if resources.iter().any(|(n, _)| *n == r.name) {
                return Err(ArgsError::new(NAME, format!("resource {} is listed twice", r.name)));
            }
            resources.push((r.name.clone(), weight));
        }
        Ok(DevicePacking { resources })
    }

    /// The plugin for exactly these resources, weight 1 each (the extender's managed ones).
    pub fn for_resources(names: &[String]) -> Self {
        DevicePacking { resources: names.iter().map(|n| (n.clone(), 1)).collect() }
    }

    /// The score of `node` for `pod`, 0..=100, counting only devices in allocatable.
    pub fn node_score(&self, pod: &PodInfo, node: &NodeInfo) -> i64 {
        self.score_with(pod, node, None)
    }

    /// The score of `node` for `pod`, 0..=100, with DRA devices from `dra` when given.
    pub fn score_with(&self, pod: &PodInfo, node: &NodeInfo, dra: Option<&DraState>) -> i64 {
        let mut total = 0;
        let mut weights = 0;
        let mut has_devices = false;
        for (name, weight) in &self.resources {
            let (want, devices, free) = amounts(pod, node, name, dra);
            has_devices |= devices > 0;
            if want > 0 {
                total += best_fit(devices, free, want) * weight;
                weights += weight;
            }
        }
        if weights > 0 {
            return total / weights;
        }
        if has_devices { 0 } else { MAX }
    }
}

/// What the pod wants of a resource, the node's devices of it and how many are free: from
/// allocatable when the node advertises it, else from the devices of the class serving it.
fn amounts(pod: &PodInfo, node: &NodeInfo, name: &str, dra: Option<&DraState>) -> (i64, i64, i64) {
    let asked = pod.requests.requests.get(name);
    let advertised = node.allocatable.get(name);
    if advertised > 0 {
        return (asked, advertised, advertised.saturating_sub(node.requested.get(name)));
    }
    let Some((dra, class)) = dra.and_then(|d| Some((d, extended::class_for(d, name)?))) else { return (asked, 0, 0) };
    let claimed: i64 = pod_claims(pod, dra)
        .unwrap_or_default()
        .iter()
        .filter(|c| c.allocation().is_none())
        .flat_map(|c| c.requests.iter().filter_map(|r| r.alternatives.first()))
        .filter(|a| a.class == class.name)
        .map(|a| match a.mode {
            Mode::Count(n) => i64::from(n),
            Mode::All => 0,
        })
        .sum();
    let (devices, held) = extended::class_devices(dra, &node.name, &node.labels, &class.name, true);
    (asked + claimed, devices, devices - held)
}

/// Best fit of `want` devices of `resource` on `node`, 0..=100: 100 when the pod takes
/// every free device, less the more it leaves idle relative to the node's devices, 0 when
/// they do not fit or the node has none.
pub fn fit(node: &NodeInfo, resource: &str, want: i64) -> i64 {
    let total = node.allocatable.get(resource);
    best_fit(total, total.saturating_sub(node.requested.get(resource)), want)
}

/// Best fit of `want` devices where `free` of `total` are free.
fn best_fit(total: i64, free: i64, want: i64) -> i64 {
    if total <= 0 {
        return 0;
    }
    if want > free {
        return 0;
    }
    let idle = free - want;
    // i128: allocatable comes from the API and may be anything up to i64::MAX.
    (MAX as i128 * (total - idle) as i128 / total as i128) as i64
}

impl ScorePlugin for DevicePacking {
    fn name(&self) -> &'static str {
        NAME
    }

    fn score(&self, _state: &PluginState, pod: &PodInfo, node: &NodeInfo, snapshot: &Snapshot) -> i64 {
        self.score_with(pod, node, Some(snapshot.objects.dra()))
    }

    fn node_local(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::builders::{NodeBuilder, PodBuilder};

    const GPU: &str = "nvidia.com/gpu";

    fn node(name: &str, gpus: &str, used: &str) -> NodeInfo {
        let mut b = NodeBuilder::new(name);
        if gpus != "0" {
            b = b.resource(GPU, gpus);
        }
        let mut n = NodeInfo::from_node(&b.build()).unwrap();
        if used != "0" {
            n.add_pod(Arc::new(PodBuilder::new("used").req_list(&[(GPU, used)]).node_name(name).info()));
        }
        n
    }

    fn pod(gpus: &str) -> PodInfo {
        let mut reqs = vec![("cpu", "100m")];
        if gpus != "0" {
            reqs.push((GPU, gpus));
        }
        PodBuilder::new("p").req_list(&reqs).info()
    }

    #[test]
    fn best_fit_keeps_whole_nodes_free() {
        let plugin = DevicePacking::default();
        // (node GPUs, used, pod GPUs, score)
        let table = [
            ("8", "7", "1", 100), // takes the last free GPU
            ("8", "4", "1", 62),  // leaves 3 of 8 idle
            ("8", "0", "1", 12),  // breaks into a whole node
            ("8", "0", "8", 100), // a whole node for a whole-node pod
            ("4", "0", "4", 100), // a 4-GPU node for a 4-GPU pod...
            ("8", "0", "4", 50),  // ...before half of an 8-GPU one
            ("8", "7", "2", 0),   // does not fit
            ("0", "0", "1", 0),   // no GPUs at all
        ];
        for (gpus, used, want, score) in table {
            let n = node("n", gpus, used);
            assert_eq!(plugin.node_score(&pod(want), &n), score, "{gpus} GPUs, {used} used, pod {want}");
        }
    }

    #[test]
    fn pods_without_devices_keep_off_device_nodes() {
        let plugin = DevicePacking::default();
        assert_eq!(plugin.node_score(&pod("0"), &node("cpu", "0", "0")), 100);
        assert_eq!(plugin.node_score(&pod("0"), &node("gpu", "8", "0")), 0);
    }

    #[test]
    fn several_resources_are_weighted() {
        let args: DevicePackingArgs = serde_json::from_value(serde_json::json!({
            "resources": [{"name": GPU, "weight": 3}, {"name": "example.com/fpga", "weight": 1}]
        }))
        .unwrap();
        let plugin = DevicePacking::new(&args).unwrap();
        let n =
            NodeInfo::from_node(&NodeBuilder::new("n").resource(GPU, "8").resource("example.com/fpga", "2").build())
                .unwrap();
        let p = PodBuilder::new("p").req_list(&[(GPU, "8"), ("example.com/fpga", "1")]).info();
        // GPU 100 (weight 3), FPGA 50 (weight 1).
        assert_eq!(plugin.node_score(&p, &n), (300 + 50) / 4);
    }

    #[test]
    fn bad_args_are_refused() {
        let bad = |v: serde_json::Value| {
            let args: DevicePackingArgs = serde_json::from_value(v).unwrap();
            DevicePacking::new(&args).unwrap_err().to_string()
        };
        assert!(bad(serde_json::json!({"resources": [{"name": "cpu"}]})).contains("not an extended resource"));
        assert!(bad(serde_json::json!({"resources": [{"name": GPU, "weight": 101}]})).contains("1..=100"));
        assert!(bad(serde_json::json!({"resources": [{"name": GPU}, {"name": GPU}]})).contains("twice"));
        assert!(serde_json::from_value::<DevicePackingArgs>(serde_json::json!({"shape": []})).is_err());
    }

    #[test]
    fn huge_allocatable_does_not_overflow() {
        let n = NodeInfo::from_node(&NodeBuilder::new("n").resource(GPU, "9223372036854775807").build()).unwrap();
        let s = fit(&n, GPU, 1);
        assert!((0..=100).contains(&s), "{s}");
    }
}
