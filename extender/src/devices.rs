//! Placement of managed device resources (GPUs and the like) that kube-scheduler ignores:
//! the DevicePacking score plugin's best fit, on the extender's 0..=10 scale.

use algorithms::plugins::device_packing::DevicePacking;
use algorithms::{NodeInfo, PodInfo};

use crate::types::MAX_EXTENDER_PRIORITY;

/// Whether the pod requests any of the managed resources.
pub fn requests_any(pod: &PodInfo, managed: &[String]) -> bool {
    managed.iter().any(|r| pod.requests.requests.get(r) > 0)
}

/// DevicePacking's score of `node` for `pod`, 0..=100, scaled to 0..=10.
pub fn score(packing: &DevicePacking, pod: &PodInfo, node: &NodeInfo) -> i64 {
    MAX_EXTENDER_PRIORITY * packing.node_score(pod, node) / 100
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use algorithms::builders::{NodeBuilder, PodBuilder};

    fn node_with_used(total: &str, used: &str) -> NodeInfo {
        let mut n = NodeInfo::from_node(&NodeBuilder::new("n").resource("nvidia.com/gpu", total).build()).unwrap();
        if used != "0" {
            n.add_pod(Arc::new(PodBuilder::new("u").req_list(&[("nvidia.com/gpu", used)]).node_name("n").info()));
        }
        n
    }

    #[test]
    fn best_fit_prefers_partially_used_nodes() {
        let packing = DevicePacking::for_resources(&["nvidia.com/gpu".to_string()]);
        let pod = |n: &str| PodBuilder::new("p").req_list(&[("nvidia.com/gpu", n)]).info();
        assert!(requests_any(&pod("1"), &["nvidia.com/gpu".to_string()]));
        assert!(!requests_any(&pod("1"), &["example.com/fpga".to_string()]));
        let fresh = node_with_used("8", "0");
        let half = node_with_used("8", "4");
        let nearly = node_with_used("8", "7");
        assert_eq!(score(&packing, &pod("1"), &nearly), 10);
        assert_eq!(score(&packing, &pod("1"), &half), 6);
        assert_eq!(score(&packing, &pod("1"), &fresh), 1);
        assert_eq!(score(&packing, &pod("8"), &fresh), 10);
        assert_eq!(score(&packing, &pod("2"), &nearly), 0);
        assert_eq!(score(&packing, &pod("1"), &node_with_used("0", "0")), 0);
    }
}
