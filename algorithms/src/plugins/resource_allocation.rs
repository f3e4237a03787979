//! Shared arithmetic of the resource scores (NodeResourcesFit strategies, BalancedAllocation).

use serde::Deserialize;

use crate::framework::MAX_NODE_SCORE;
use crate::node_info::NodeInfo;
use crate::pod_info::PodInfo;
use crate::resource::{CPU, EPHEMERAL_STORAGE, MEMORY, is_scalar_resource_name};

/// A resource and its weight in a score.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceSpec {
    /// Resource name.
    pub name: String,
    /// Weight (defaults to 1).
    #[serde(default)]
    pub weight: i64,
}

/// The default scored resources: cpu and memory, weight 1 each.
pub fn default_resources() -> Vec<ResourceSpec> {
    vec![ResourceSpec { name: CPU.into(), weight: 1 }, ResourceSpec { name: MEMORY.into(), weight: 1 }]
}

/// The pod's request of one resource; with `non_zero`, CPU and memory count the scoring defaults.
pub fn pod_request(pod: &PodInfo, name: &str, non_zero: bool) -> i64 {
    match name {
        CPU if non_zero => pod.requests.non_zero_milli_cpu,
        MEMORY if non_zero => pod.requests.non_zero_memory,
        _ => pod.requests.requests.get(name),
    }
}

/// (allocatable, requested by the node's pods) for one resource, or (0, 0) when it is not scored:
/// scalar resources the pod does not request, and resources the node does not have.
pub fn node_amounts(node: &NodeInfo, name: &str, pod_req: i64, use_requested: bool) -> (i64, i64) {
    if pod_req == 0 && is_scalar_resource_name(name) {
        return (0, 0);
    }
    match name {
        CPU => {
            (node.allocatable.milli_cpu, if use_requested { node.requested.milli_cpu } else { node.non_zero_milli_cpu })
        }
        MEMORY => (node.allocatable.memory, if use_requested { node.requested.memory } else { node.non_zero_memory }),
        EPHEMERAL_STORAGE => (node.allocatable.ephemeral_storage, node.requested.ephemeral_storage),
        _ => match node.allocatable.scalar_value(name) {
            Some(a) => (a, node.requested.get(name)),
            None => (0, 0),
        },
    }
}

/// LeastAllocated: the weighted share of each resource left free.
pub fn least_allocated(requested: &[i64], allocatable: &[i64], weights: &[i64]) -> i64 {
    weighted(requested, allocatable, weights, |req, cap| if req > cap { 0 } else { (cap - req) * MAX_NODE_SCORE / cap })
}

/// MostAllocated: the weighted share of each resource in use (clamped to capacity).
pub fn most_allocated(requested: &[i64], allocatable: &[i64], weights: &[i64]) -> i64 {
    weighted(requested, allocatable, weights, |req, cap| req.min(cap) * MAX_NODE_SCORE / cap)
}

fn weighted(requested: &[i64], allocatable: &[i64], weights: &[i64], f: impl Fn(i64, i64) -> i64) -> i64 {
    let (mut score, mut weight_sum) = (0i64, 0i64);
    for ((&req, &cap), &w) in requested.iter().zip(allocatable).zip(weights) {
        if cap == 0 {
            continue;
        }
        score += f(req, cap) * w;
        weight_sum += w;
    }
    if weight_sum == 0 { 0 } else { score / weight_sum }
}

/// A point of a RequestedToCapacityRatio shape (score already scaled to 0..=100).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShapePoint {
    /// Utilization 0..=100.
    pub utilization: i64,
    /// Score 0..=100.
    pub score: i64,
}

/// A piecewise linear function through the shape points, flat outside them.
pub fn broken_linear(shape: &[ShapePoint], p: i64) -> i64 {
    for (i, pt) in shape.iter().enumerate() {
        if p <= pt.utilization {
            let Some(prev) = i.checked_sub(1).and_then(|j| shape.get(j)) else { return pt.score };
            return prev.score + (pt.score - prev.score) * (p - prev.utilization) / (pt.utilization - prev.utilization);
        }
    }
    shape.last().map(|p| p.score).unwrap_or(0)
}

/// RequestedToCapacityRatio: the shape applied to each resource's utilization, weighted,
/// leaving resources that score zero out of the weight sum, rounded.
pub fn requested_to_capacity_ratio(
    shape: &[ShapePoint],
    requested: &[i64],
    allocatable: &[i64],
    weights: &[i64],
) -> i64 {
    let (mut score, mut weight_sum) = (0i64, 0i64);
    for ((&req, &cap), &w) in requested.iter().zip(allocatable).zip(weights) {
        if cap == 0 {
            continue;
        }
        let util = if req > cap { 100 } else { (i128::from(req) * 100 / i128::from(cap)) as i64 };
        let s = broken_linear(shape, util);
        if s > 0 {
            score += s * w;
            weight_sum += w;
        }
    }
    if weight_sum == 0 { 0 } else { (score as f64 / weight_sum as f64).round() as i64 }
}

/// How balanced the utilization fractions are: 100 * (1 - standard deviation), truncated.
/// Resources with zero allocatable are left out.
pub fn balance_score(requested: &[i64], allocatable: &[i64]) -> i64 {
    let fractions = || {
        requested.iter().zip(allocatable).filter(|(_, cap)| **cap != 0).map(|(&r, &c)| (r as f64 / c as f64).min(1.0))
    };
    let (n, total) = fractions().fold((0usize, 0f64), |(n, t), f| (n + 1, t + f));
    let std = match n {
        0 | 1 => 0.0,
        2 => {
            let mut it = fractions();
            let (a, b) = (it.next().unwrap_or(0.0), it.next().unwrap_or(0.0));
            ((a - b) / 2.0).abs()
        }
        _ => {
            let mean = total / n as f64;
            (fractions().map(|f| (f - mean) * (f - mean)).sum::<f64>() / n as f64).sqrt()
        }
    };
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(points: &[(i64, i64)]) -> Vec<ShapePoint> {
        points.iter().map(|&(u, s)| ShapePoint { utilization: u, score: s }).collect()
    }

    #[test]
    fn broken_linear_table() {
        let s = shape(&[(10, 1), (90, 9)]);
        for (p, want) in [(-10, 1), (0, 1), (9, 1), (10, 1), (15, 1), (20, 2), (89, 8), (90, 9), (99, 9), (110, 9)] {
            assert_eq!(broken_linear(&s, p), want, "p={p}");
        }
        let s = shape(&[(0, 2), (40, 10), (100, 0)]);
        for (p, want) in [(-10, 2), (0, 2), (20, 6), (30, 8), (40, 10), (70, 5), (100, 0), (110, 0)] {
            assert_eq!(broken_linear(&s, p), want, "p={p}");
        }
    }

    #[test]
    fn least_and_most_allocated_weigh_resources() {
        assert_eq!(least_allocated(&[3000, 5000], &[4000, 10000], &[1, 1]), 37);
        assert_eq!(least_allocated(&[3000, 5000], &[4000, 10000], &[1, 2]), 41);
        assert_eq!(least_allocated(&[5000, 5000], &[4000, 10000], &[1, 1]), 25);
        assert_eq!(most_allocated(&[3000, 5000], &[4000, 10000], &[1, 1]), 62);
        assert_eq!(most_allocated(&[5000, 9000], &[4000, 10000], &[1, 1]), 95);
        assert_eq!(least_allocated(&[1, 1], &[0, 0], &[1, 1]), 0);
    }

    #[test]
    fn requested_to_capacity_ratio_rounds_and_skips_zero_scores() {
        let s = shape(&[(0, 100), (100, 0)]);
        assert_eq!(requested_to_capacity_ratio(&s, &[3000, 5000], &[4000, 10000], &[1, 1]), 38);
        let up = shape(&[(0, 0), (100, 10)]);
        assert_eq!(requested_to_capacity_ratio(&up, &[2, 2], &[8, 4], &[3, 5]), 4);
        assert_eq!(requested_to_capacity_ratio(&up, &[2, 2], &[4, 8], &[3, 5]), 3);
    }

    #[test]
    fn balance_score_uses_half_the_difference_for_two_resources() {
        assert_eq!(balance_score(&[3000, 5000], &[4000, 10000]), 87);
        assert_eq!(balance_score(&[0, 0], &[4000, 10000]), 100);
        assert_eq!(balance_score(&[1, 0, 0], &[1, 1, 1]), 52);
    }
}
