//! NodeResourcesBalancedAllocation: prefer nodes whose utilization becomes more even.
//!
//! v1.36 scores the change in balance the pod causes:
//! `50 + (50 + balance_with_pod - balance_without_pod) / 2`, so no change scores 75.

use serde::Deserialize;
use smallvec::{SmallVec, smallvec};

use crate::framework::{PluginState, ScorePlugin};
use crate::node_info::NodeInfo;
use crate::pod_info::PodInfo;
use crate::snapshot::Snapshot;
use crate::status::Status;

use super::ArgsError;
use super::resource_allocation::{ResourceSpec, balance_score, node_amounts, pod_request};

/// Plugin name.
pub const NAME: &str = "NodeResourcesBalancedAllocation";

/// `NodeResourcesBalancedAllocationArgs`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BalancedAllocationArgs {
    /// Resources compared (cpu and memory by default); every weight must be 1.
    #[serde(default)]
    pub resources: Vec<ResourceSpec>,
}

/// The NodeResourcesBalancedAllocation score.
#[derive(Debug, Clone)]
pub struct BalancedAllocation {
    resources: Vec<String>,
}

impl Default for BalancedAllocation {
    fn default() -> Self {
        BalancedAllocation { resources: vec!["cpu".into(), "memory".into()] }
    }
}

impl BalancedAllocation {
    /// Builds the plugin, validating its args.
    pub fn new(args: &BalancedAllocationArgs) -> Result<Self, ArgsError> {
        if args.resources.is_empty() {
            return Ok(Self::default());
        }
        let mut resources: Vec<String> = Vec::new();
        for r in &args.resources {
            if r.weight != 0 && r.weight != 1 {
                return Err(ArgsError::new(NAME, format!("resource {} weight {} must be 1", r.name, r.weight)));
            }
            if resources.contains(&r.name) {
                return Err(ArgsError::new(NAME, format!("resource {} is listed twice", r.name)));
            }
            resources.push(r.name.clone());
        }
        Ok(BalancedAllocation { resources })
    }
}

struct PodRequestVector(Vec<i64>);

impl ScorePlugin for BalancedAllocation {
    fn name(&self) -> &'static str {
        NAME
    }

    fn node_local(&self) -> bool {
        true
    }

    fn pre_score(&self, pod: &PodInfo, _: &Snapshot, _: &[usize]) -> Result<PluginState, Status> {
        let v: Vec<i64> = self.resources.iter().map(|r| pod_request(pod, r, false)).collect();
        if v.iter().all(|x| *x == 0) {
            return Err(Status::skip());
        }
        Ok(PluginState::new(PodRequestVector(v)))
    }

    fn score(&self, state: &PluginState, _: &PodInfo, node: &NodeInfo, _: &Snapshot) -> i64 {
        let Some(pod_req) = state.get::<PodRequestVector>() else { return 0 };
        let n = self.resources.len();
        // Inline for the usual handful of resources: no allocation per node.
        let mut with: SmallVec<[i64; 4]> = smallvec![0; n];
        let mut without: SmallVec<[i64; 4]> = smallvec![0; n];
        let mut alloc: SmallVec<[i64; 4]> = smallvec![0; n];
        for (i, r) in self.resources.iter().enumerate() {
            let p = pod_req.0.get(i).copied().unwrap_or(0);
            let (a, used) = node_amounts(node, r, p, true);
            if a != 0 {
                alloc[i] = a;
                with[i] = used + p;
                without[i] = used;
            }
        }
        let after = balance_score(&with, &alloc);
        let before = balance_score(&without, &alloc);
        50 + (50 + after - before) / 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::{NodeBuilder, PodBuilder, score_all, snapshot};
    use k8s_openapi::api::core::v1 as core;

    fn node(name: &str, cpu: &str, mem: &str) -> NodeBuilder {
        NodeBuilder::new(name).capacity(cpu, mem, "110")
    }

    fn on(n: &str, name: &str, containers: &[(&str, &str)]) -> core::Pod {
        let mut b = PodBuilder::new(name).no_containers().node_name(n);
        for (c, m) in containers {
            b = b.container(c, m);
        }
        b.build()
    }

    fn two() -> PodBuilder {
        PodBuilder::new("p").no_containers().container("1000m", "2000").container("2000m", "3000")
    }

    #[test]
    fn best_effort_pods_are_skipped() {
        let snap = snapshot(&[node("n1", "4000m", "10000").build()], &[]);
        let info = PodBuilder::new("p").no_containers().container("", "").info();
        assert!(BalancedAllocation::default().pre_score(&info, &snap, &[0]).is_err());
    }

    #[test]
    fn v1_36_change_in_balance_table() {
        let plugin = BalancedAllocation::default();
        let cases: Vec<(&str, PodBuilder, Vec<core::Node>, Vec<core::Pod>, Vec<i64>)> = vec![
            (
                "requested, nothing scheduled",
                two(),
                vec![node("n1", "4000m", "10000").build(), node("n2", "6000m", "10000").build()],
                vec![],
                vec![68, 75],
            ),
            (
                "requested, pods scheduled",
                two(),
                vec![node("n1", "10000m", "20000").build(), node("n2", "10000m", "20000").build()],
                vec![
                    on("n1", "a", &[("1000m", ""), ("2000m", "")]),
                    on("n2", "b", &[("1000m", "2000"), ("2000m", "3000")]),
                ],
                vec![73, 74],
            ),
            (
                "differently sized nodes",
                two(),
                vec![node("n1", "10000m", "20000").build(), node("n2", "10000m", "50000").build()],
                vec![
                    on("n1", "a", &[("1000m", ""), ("2000m", "")]),
                    on("n2", "b", &[("1000m", "2000"), ("2000m", "3000")]),
                ],
                vec![73, 70],
            ),
            (
                "memory only pod on a cpu-loaded node evens it out",
                PodBuilder::new("p").no_containers().container("", "2000").container("", "3000"),
                vec![node("n1", "3000m", "5000").build(), node("n2", "3000m", "5000").build()],
                vec![on("n1", "a", &[("3000m", "")])],
                vec![100, 50],
            ),
        ];
        for (name, pod, nodes, existing, want) in cases {
            assert_eq!(score_all(&plugin, &pod.build(), &snapshot(&nodes, &existing)), want, "{name}");
        }
    }

    #[test]
    fn extended_resources_count_only_when_requested() {
        let args: BalancedAllocationArgs = serde_json::from_value(serde_json::json!({"resources": [
            {"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}, {"name": "nvidia.com/gpu", "weight": 1}
        ]}))
        .unwrap();
        let plugin = BalancedAllocation::new(&args).unwrap();
        let nodes = vec![
            node("n1", "3500m", "40000").resource("nvidia.com/gpu", "8").build(),
            node("n2", "3500m", "40000").build(),
        ];
        assert_eq!(score_all(&plugin, &two().build(), &snapshot(&nodes, &[])), vec![56, 56]);
    }

    #[test]
    fn weights_other_than_one_are_rejected() {
        let args: BalancedAllocationArgs =
            serde_json::from_value(serde_json::json!({"resources": [{"name": "cpu", "weight": 2}]})).unwrap();
        assert!(BalancedAllocation::new(&args).is_err());
    }
}
