//! Placement scores: how the candidate domains of a topology-constrained pod group (its
//! placements: the nodes of one rack, block or NVLink domain, and the members each takes)
//! are ranked, by the profile's `placementScore` plugins.
//!
//! - `TightestFit` (this scheduler's, on by default): the placement that leaves its domain the
//!   least free of the group's dominant resource scores highest, so that large domains
//!   stay whole for large groups. The amount left is scaled between the least and the
//!   most any candidate domain would have left with every member placed.
//! - `NodeResourcesFit` (kube-scheduler's name): MostAllocated over the placement's nodes
//!   taken together, the placed members' requests added to what their pods hold, with the
//!   resources and weights of NodeResourcesFit's `scoringStrategy.resources`.
//! - `PodGroupPodsCount` (kube-scheduler's name, on by default): the group's pods already scheduled plus
//!   those the placement takes, scaled to the highest count among the scored placements.
//!
//! Each plugin's score is 0-100; a placement's total is their weighted sum.

use crate::framework::MAX_NODE_SCORE;
use crate::node_info::NodeInfo;
use crate::plugins::resource_allocation::{most_allocated, node_amounts, pod_request};
use crate::pod_info::PodInfo;
use crate::resource::{CPU, MEMORY};

pub use crate::framework::placement_score::*;

/// One placement to score: the domain's nodes as they were before the group, and the
/// members the placement takes.
#[derive(Debug, Clone)]
pub struct Placement<'a> {
    /// The domain's nodes, without the group's members.
    pub nodes: Vec<&'a NodeInfo>,
    /// The members placed in it.
    pub pods: Vec<&'a PodInfo>,
}

/// What the scores need to know of the group and of all the candidate domains.
#[derive(Debug, Clone, Default)]
pub struct GroupFacts {
    /// The group's dominant resource (CPU in millicores, else a resource name).
    pub dominant: String,
    /// The group's pods already scheduled.
    pub scheduled: usize,
    /// The least and the most of the dominant resource any candidate domain would have
    /// left with every member placed in it.
    pub left_range: (i64, i64),
}

/// A placement's scores: per plugin (0-100, before weighting) and the weighted total.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlacementScores {
    /// (plugin, score), in the profile's order.
    pub plugins: Vec<(&'static str, i64)>,
    /// The weighted sum.
    pub total: i64,
}

/// A group's dominant resource: the first extended resource (by name) its pods ask for
/// that some node of `nodes` offers, else CPU.
pub fn dominant<'a>(nodes: &[std::sync::Arc<NodeInfo>], pods: impl IntoIterator<Item = &'a PodInfo>) -> String {
    let mut asked: Vec<&str> =
        pods.into_iter().flat_map(|p| p.requests.requests.scalar.iter().map(|(n, _)| n.as_str())).collect();
    asked.sort_unstable();
    asked.dedup();
    asked.into_iter().find(|r| nodes.iter().any(|n| n.allocatable.get(r) > 0)).unwrap_or(CPU).to_string()
}

/// What a pod asks of a resource (CPU in millicores).
pub fn request(pod: &PodInfo, resource: &str) -> i64 {
    let r = &pod.requests.requests;
    match resource {
        CPU => r.milli_cpu,
        MEMORY => r.memory,
        other => r.get(other),
    }
}

/// What a node has free of a resource (CPU in millicores).
pub fn free_on(node: &NodeInfo, resource: &str) -> i64 {
    let (a, u) = (&node.allocatable, &node.requested);
    match resource {
        CPU => a.milli_cpu - u.milli_cpu,
        MEMORY => a.memory - u.memory,
        other => a.get(other) - u.get(other),
    }
}

/// What a placement leaves free of `resource` in its domain.
pub fn left_after(placement: &Placement<'_>, resource: &str) -> i64 {
    let free: i64 = placement.nodes.iter().map(|n| free_on(n, resource)).sum();
    free - placement.pods.iter().map(|p| request(p, resource)).sum::<i64>()
}

/// MostAllocated over the placement's nodes taken together, with the members' requests
/// added (CPU and memory with the scoring defaults, as NodeResourcesFit counts them).
fn bin_packing(resources: &[(String, i64)], placement: &Placement<'_>) -> i64 {
    let mut requested = Vec::with_capacity(resources.len());
    let mut allocatable = Vec::with_capacity(resources.len());
    for (name, _) in resources {
        let asked: i64 = placement.pods.iter().map(|p| pod_request(p, name, true)).sum();
        let (mut alloc, mut used) = (0, 0);
        for node in &placement.nodes {
            let (a, u) = node_amounts(node, name, asked, false);
            alloc += a;
            used += u;
        }
        allocatable.push(alloc);
        requested.push(if alloc == 0 { 0 } else { used + asked });
    }
    let weights: Vec<i64> = resources.iter().map(|(_, w)| *w).collect();
    most_allocated(&requested, &allocatable, &weights)
}

/// Scales `left` between the range's least (100) and most (0).
fn tightness(left: i64, (least, most): (i64, i64)) -> i64 {
    if left <= least {
        MAX_NODE_SCORE
    } else if left >= most {
        0
    } else {
        (most - left) * MAX_NODE_SCORE / (most - least)
    }
}

/// Scores `placements` together (`PodGroupPodsCount` scales to the highest count among
/// them), aligned with them.
pub fn score_placements(
    scores: &[WeightedPlacementScore],
    facts: &GroupFacts,
    placements: &[Placement<'_>],
) -> Vec<PlacementScores> {
    let most_pods = placements.iter().map(|p| facts.scheduled + p.pods.len()).max().unwrap_or(0) as i64;
    placements
        .iter()
        .map(|placement| {
            let mut out = PlacementScores::default();
            for ws in scores {
                let score = match &ws.scorer {
                    PlacementScorer::TightestFit => tightness(left_after(placement, &facts.dominant), facts.left_range),
                    PlacementScorer::NodeResourcesFit(resources) => bin_packing(resources, placement),
                    PlacementScorer::PodGroupPodsCount if most_pods == 0 => 0,
                    PlacementScorer::PodGroupPodsCount => {
                        (facts.scheduled + placement.pods.len()) as i64 * MAX_NODE_SCORE / most_pods
                    }
                };
                out.plugins.push((ws.scorer.name(), score));
                out.total += score * ws.weight;
            }
            out
        })
        .collect()
}

#[cfg(test)]
#[path = "placement_tests.rs"]
mod tests;
