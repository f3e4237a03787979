//! Placement of managed device resources (GPUs and the like) that kube-scheduler ignores.
//!
//! The score prefers the node the pod fills best: devices left idle on a node that
//! the pod starts using are fragments that a later large request cannot use, so
//! the fewer left over relative to the node's devices, the higher the score.

use algorithms::{NodeInfo, PodInfo};

use crate::types::MAX_EXTENDER_PRIORITY;

/// The managed resources the pod requests, with amounts.
pub fn requested(pod: &PodInfo, managed: &[String]) -> Vec<(String, i64)> {
    managed
        .iter()
        .filter_map(|r| {
            let v = pod.requests.requests.get(r);
            (v > 0).then(|| (r.clone(), v))
        })
        .collect()
}

/// Best-fit score of one resource on one node, 0..=10: 10 when the pod uses up the
/// node's free devices exactly, lower the more devices it leaves idle; 0 when it does not fit.
pub fn packing_score(node: &NodeInfo, resource: &str, want: i64) -> i64 {
    let total = node.allocatable.get(resource);
    if total <= 0 {
        return 0;
    }
    let free = total - node.requested.get(resource);
    if want > free {
        return 0;
    }
    let left = free - want;
    MAX_EXTENDER_PRIORITY * (total - left) / total
}

/// The average best-fit score over the requested managed resources.
pub fn score(node: &NodeInfo, wants: &[(String, i64)]) -> i64 {
    if wants.is_empty() {
        return 0;
    }
    wants.iter().map(|(r, w)| packing_score(node, r, *w)).sum::<i64>() / wants.len() as i64
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use algorithms::testing::{NodeBuilder, PodBuilder};

    fn node_with_used(total: &str, used: &str) -> NodeInfo {
        let mut n = NodeInfo::from_node(&NodeBuilder::new("n").resource("nvidia.com/gpu", total).build()).unwrap();
        if used != "0" {
            n.add_pod(Arc::new(PodBuilder::new("u").req_list(&[("nvidia.com/gpu", used)]).node_name("n").info()));
        }
        n
    }

    #[test]
    fn best_fit_prefers_partially_used_nodes() {
        let fresh = node_with_used("8", "0");
        let half = node_with_used("8", "4");
        let nearly = node_with_used("8", "7");
        assert_eq!(packing_score(&nearly, "nvidia.com/gpu", 1), 10);
        assert_eq!(packing_score(&half, "nvidia.com/gpu", 1), 6);
        assert_eq!(packing_score(&fresh, "nvidia.com/gpu", 1), 1);
        assert_eq!(packing_score(&fresh, "nvidia.com/gpu", 8), 10);
        assert_eq!(packing_score(&nearly, "nvidia.com/gpu", 2), 0);
        assert_eq!(packing_score(&node_with_used("0", "0"), "nvidia.com/gpu", 1), 0);
    }
}
