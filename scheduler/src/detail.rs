//! What a report shows beyond the summary: each node's use before and after a run, and
//! which plugin turned each pending pod away from the most nodes.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use algorithms::framework::filter_nodes;
use algorithms::owners::Usage;
use algorithms::plugins::registry::OWNERS;
use algorithms::{NodeInfo, PodInfo, Profile, Snapshot};

/// The label whose value groups nodes into zones.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// Failing pods whose rejecting plugins are worked out; the rest are listed without.
pub const MAX_PODS_DIAGNOSED: usize = 2000;

/// One node's capacity and requests, per resource of [`RunDetail::resources`].
#[derive(Debug, Clone, PartialEq)]
pub struct NodeUse {
    /// Node name.
    pub name: String,
    /// Its zone (or its value of the label the run groups nodes by), or empty.
    pub zone: String,
    /// Allocatable per resource.
    pub allocatable: Vec<i64>,
    /// Requested before the measured pods were scheduled.
    pub before: Vec<i64>,
    /// Requested afterwards.
    pub after: Vec<i64>,
}

impl NodeUse {
    /// Share of `resource` requested `after` (or before), 0 where nothing is allocatable.
    pub fn share(&self, resource: usize, after: bool) -> f64 {
        let used = if after { self.after[resource] } else { self.before[resource] };
        match self.allocatable[resource] {
            a if a > 0 => used as f64 / a as f64,
            _ => 0.0,
        }
    }
}

/// A pod that fit nowhere.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingPod {
    /// `namespace/name`.
    pub pod: String,
    /// kube-scheduler's FailedScheduling message.
    pub message: String,
    /// The plugin that rejected the most nodes, and how many (when worked out).
    pub top_plugin: Option<(String, usize)>,
}

/// Per-node and per-pod detail of a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunDetail {
    /// Resource names: cpu (millicores), memory (bytes), pods, then every extended or
    /// other scalar resource some node has.
    pub resources: Vec<String>,
    /// Nodes in cluster order.
    pub nodes: Vec<NodeUse>,
    /// Pods that fit nowhere, by key.
    pub pending: Vec<PendingPod>,
    /// Profiles: scheduler name, filter plugins, score plugins with weights.
    pub profiles: Vec<ProfileSummary>,
    /// The node label the nodes are grouped by: the zone, or the topology key the run's
    /// PodGroups are held to.
    pub group_label: String,
}

/// The configuration a profile ran with.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProfileSummary {
    /// `schedulerName`.
    pub scheduler_name: String,
    /// Filter plugins in order.
    pub filters: Vec<String>,
    /// Score plugins and weights.
    pub scores: Vec<(String, i64)>,
    /// `percentageOfNodesToScore`, when set.
    pub percentage_of_nodes_to_score: Option<u32>,
    /// PostFilter plugins in order.
    pub post_filters: Vec<String>,
    /// Reserve, Permit and PreBind plugins, each list in order.
    pub binding: [Vec<String>; 3],
}

impl ProfileSummary {
    /// The summary of `p`.
    pub fn of(p: &Profile) -> Self {
        ProfileSummary {
            scheduler_name: p.scheduler_name.clone(),
            filters: p.filters.iter().map(|f| f.name().to_string()).collect(),
            scores: p.scores.iter().map(|s| (s.plugin.name().to_string(), s.weight)).collect(),
            percentage_of_nodes_to_score: p.percentage_of_nodes_to_score,
            post_filters: p.post_filters.iter().map(|f| f.name().to_string()).collect(),
            binding: [
                p.reserves.iter().map(|f| f.name().to_string()).collect(),
                p.permits.iter().map(|f| f.name().to_string()).collect(),
                p.pre_binds.iter().map(|f| f.name().to_string()).collect(),
            ],
        }
    }
}

/// The resource columns for the snapshot's nodes: cpu, memory, pods, every scalar resource
/// some node advertises, then the columns of the objects plugins own that some node has
/// (every DeviceClass some node has devices of: the devices the node reaches, and how
/// many claims hold).
pub fn resources(snapshot: &Snapshot) -> Vec<String> {
    let mut scalar: Vec<String> = Vec::new();
    for n in &snapshot.nodes {
        for (name, v) in &n.allocatable.scalar {
            if *v > 0 && !scalar.contains(name) {
                scalar.push(name.clone());
            }
        }
    }
    scalar.sort();
    let mut out = vec!["cpu".to_string(), "memory".to_string(), "pods".to_string()];
    out.extend(scalar);
    for owner in OWNERS {
        out.extend(owner.usage_columns(&snapshot.objects, &snapshot.nodes));
    }
    out
}

/// The owners' figures of their columns (`None` for the nodes' own resources).
fn owned_columns<'a>(snapshot: &'a Snapshot, resources: &[String]) -> Vec<Option<Usage<'a>>> {
    resources.iter().map(|r| OWNERS.iter().find_map(|o| o.usage(&snapshot.objects, r))).collect()
}

fn amounts(n: &NodeInfo, resources: &[String], columns: &[Option<Usage<'_>>], requested: bool) -> Vec<i64> {
    let r = if requested { &n.requested } else { &n.allocatable };
    resources
        .iter()
        .zip(columns)
        .map(|(name, owned)| match (name.as_str(), owned) {
            (_, Some(usage)) => {
                let (total, held) = usage(n);
                if requested { held } else { total }
            }
            ("cpu", _) => r.milli_cpu,
            ("memory", _) => r.memory,
            ("pods", _) if requested => n.pods.len() as i64,
            ("pods", _) => r.allowed_pod_number,
            (other, _) => r.scalar.iter().find(|(k, _)| k == other).map_or(0, |(_, v)| *v),
        })
        .collect()
}

/// Requests per node of `snapshot`, by node name, for the columns `resources`.
pub fn requested(snapshot: &Snapshot, resources: &[String]) -> HashMap<String, Vec<i64>> {
    let columns = owned_columns(snapshot, resources);
    snapshot.nodes.iter().map(|n| (n.name.clone(), amounts(n, resources, &columns, true))).collect()
}

/// The detail of a finished run: `before` as [`requested`] gave it before the measured
/// pods, `snapshot` the cluster afterwards, `failures` the pods that fit nowhere.
pub fn collect(
    profiles: &[Profile],
    snapshot: &Snapshot,
    before: &HashMap<String, Vec<i64>>,
    resources: Vec<String>,
    failures: &BTreeMap<String, String>,
    pods: &HashMap<String, Arc<PodInfo>>,
    group_by: Option<&str>,
) -> RunDetail {
    let label = group_by.unwrap_or(ZONE_LABEL);
    let columns = owned_columns(snapshot, &resources);
    let nodes = snapshot
        .nodes
        .iter()
        .map(|n| {
            let after = amounts(n, &resources, &columns, true);
            NodeUse {
                name: n.name.clone(),
                zone: n.labels.get(label).cloned().unwrap_or_default(),
                allocatable: amounts(n, &resources, &columns, false),
                before: before.get(&n.name).cloned().unwrap_or_else(|| vec![0; resources.len()]),
                after,
            }
        })
        .collect();
    let pending = failures
        .iter()
        .enumerate()
        .map(|(i, (key, message))| {
            let top_plugin =
                pods.get(key).filter(|_| i < MAX_PODS_DIAGNOSED).and_then(|pod| top_plugin(profiles, pod, snapshot));
            PendingPod { pod: key.clone(), message: message.clone(), top_plugin }
        })
        .collect();
    let profiles = profiles.iter().map(ProfileSummary::of).collect();
    RunDetail { resources, nodes, pending, profiles, group_label: label.to_string() }
}

/// The filter plugin that rejects `pod` on the most nodes of `snapshot`.
fn top_plugin(profiles: &[Profile], pod: &PodInfo, snapshot: &Snapshot) -> Option<(String, usize)> {
    let profile = profiles.iter().find(|p| p.scheduler_name == pod.scheduler_name).or(profiles.first())?;
    let ev = filter_nodes(profile, pod, snapshot);
    if let Some(st) = &ev.prefilter_rejection {
        return Some((st.plugin.to_string(), ev.num_nodes));
    }
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for (_, st) in ev.rejected.iter() {
        *counts.entry(st.plugin.to_string()).or_default() += 1;
    }
    counts.into_iter().max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
}
