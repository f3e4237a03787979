//! PodTopologySpread: hard constraints filter by skew; soft ones (and the system defaults) score.

mod cache;
mod filtering;
mod hints;
mod scoring;
#[cfg(test)]
mod tests;

use k8s_openapi::api::core::v1 as core;
use serde::Deserialize;

use crate::labels::LabelSelector;
use crate::node_info::NodeInfo;
use crate::pod_info::{PodInfo, SpreadConstraint, Unsatisfiable};
use crate::snapshot::Snapshot;
use crate::taints::{Effect, find_untolerated};

use super::ArgsError;
use super::node_affinity::matches_required;

/// Plugin name.
pub const NAME: &str = "PodTopologySpread";
/// Reason when placing the pod would exceed `maxSkew`.
pub const ERR_REASON_CONSTRAINTS_NOT_MATCH: &str = "node(s) didn't match pod topology spread constraints";
/// Reason when the node lacks a constraint's topology key.
pub const ERR_REASON_NODE_LABEL_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";

const HOSTNAME: &str = "kubernetes.io/hostname";
const ZONE: &str = "topology.kubernetes.io/zone";

/// `PodTopologySpreadArgs`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodTopologySpreadArgs {
    /// Constraints for pods without their own (with `defaultingType: List`).
    #[serde(default)]
    pub default_constraints: Vec<core::TopologySpreadConstraint>,
    /// `System` (default) or `List`.
    #[serde(default)]
    pub defaulting_type: Option<String>,
}

/// The PodTopologySpread filter and score.
#[derive(Debug, Clone)]
pub struct PodTopologySpread {
    defaults: Vec<SpreadConstraint>,
    system_defaulted: bool,
    cache: std::sync::Arc<std::sync::Mutex<cache::SpreadCache>>,
}

impl Default for PodTopologySpread {
    fn default() -> Self {
        PodTopologySpread { defaults: system_defaults(), system_defaulted: true, cache: Default::default() }
    }
}

fn soft(key: &str, max_skew: i64) -> SpreadConstraint {
    SpreadConstraint {
        max_skew,
        topology_key: key.into(),
        when_unsatisfiable: Unsatisfiable::ScheduleAnyway,
        selector: None,
        min_domains: 1,
        honor_node_affinity: true,
        honor_node_taints: false,
    }
}

fn system_defaults() -> Vec<SpreadConstraint> {
    vec![soft(HOSTNAME, 3), soft(ZONE, 5)]
}

impl PodTopologySpread {
    /// Builds the plugin, validating its args.
    pub fn new(args: &PodTopologySpreadArgs) -> Result<Self, ArgsError> {
        match args.defaulting_type.as_deref().unwrap_or("System") {
            "System" => {
                if !args.default_constraints.is_empty() {
                    return Err(ArgsError::new(NAME, "defaultConstraints must be empty when defaultingType is System"));
                }
                Ok(Self::default())
            }
            "List" => {
                let mut defaults = Vec::new();
                for c in &args.default_constraints {
                    if c.label_selector.is_some() {
                        return Err(ArgsError::new(NAME, "default constraints must not set labelSelector"));
                    }
                    if c.max_skew <= 0 {
                        return Err(ArgsError::new(NAME, "default constraints need maxSkew > 0"));
                    }
                    if c.topology_key.is_empty() {
                        return Err(ArgsError::new(NAME, "default constraints need a topologyKey"));
                    }
                    let when = match c.when_unsatisfiable.as_str() {
                        "DoNotSchedule" => Unsatisfiable::DoNotSchedule,
                        "ScheduleAnyway" => Unsatisfiable::ScheduleAnyway,
                        other => {
                            return Err(ArgsError::new(NAME, format!("whenUnsatisfiable {other:?} is not supported")));
                        }
                    };
                    let mut sc = soft(&c.topology_key, i64::from(c.max_skew));
                    sc.when_unsatisfiable = when;
                    sc.min_domains = c.min_domains.map(i64::from).unwrap_or(1);
                    sc.honor_node_affinity = c.node_affinity_policy.as_deref() != Some("Ignore");
                    sc.honor_node_taints = c.node_taints_policy.as_deref() == Some("Honor");
                    defaults.push(sc);
                }
                Ok(PodTopologySpread { defaults, system_defaulted: false, cache: Default::default() })
            }
            other => Err(ArgsError::new(NAME, format!("defaultingType {other:?} must be System or List"))),
        }
    }

    /// The pod's constraints of one kind: its own, or the defaults with a selector
    /// derived from the Services and controllers selecting it.
    fn constraints(&self, pod: &PodInfo, snapshot: &Snapshot, kind: Unsatisfiable) -> Vec<SpreadConstraint> {
        if !pod.spread_constraints.is_empty() {
            return pod.spread_constraints.iter().filter(|c| c.when_unsatisfiable == kind).cloned().collect();
        }
        let wanted: Vec<&SpreadConstraint> = self.defaults.iter().filter(|c| c.when_unsatisfiable == kind).collect();
        if wanted.is_empty() {
            return Vec::new();
        }
        let selector = default_selector(pod, snapshot);
        if selector.is_empty() {
            return Vec::new();
        }
        wanted.into_iter().map(|c| SpreadConstraint { selector: Some(selector.clone()), ..c.clone() }).collect()
    }
}

/// kube-scheduler's `DefaultSelector`: labels of matching Services, plus the
/// controller's selector (ReplicationController, ReplicaSet, StatefulSet).
pub fn default_selector(pod: &PodInfo, snapshot: &Snapshot) -> LabelSelector {
    let w = &snapshot.workloads;
    let mut set = crate::labels::Labels::new();
    for ((ns, _), sel) in &w.services {
        if *ns == pod.namespace && !sel.is_empty() && sel.iter().all(|(k, v)| pod.labels.get(k) == Some(v)) {
            set.extend(sel.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    let Some((kind, name)) = &pod.controller else { return LabelSelector::from_labels(&set) };
    match kind.as_str() {
        "ReplicationController" => {
            if let Some(sel) = w.replication_controllers.get(&(pod.namespace.clone(), name.clone())) {
                set.extend(sel.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
            LabelSelector::from_labels(&set)
        }
        "ReplicaSet" | "StatefulSet" => {
            let mut selector = LabelSelector::from_labels(&set);
            if let Some(sel) = w.sets.get(&(kind.clone(), pod.namespace.clone(), name.clone())) {
                selector.requirements.extend(sel.requirements.iter().cloned());
            }
            selector
        }
        _ => LabelSelector::from_labels(&set),
    }
}

/// Whether the node counts toward the constraint's domains under its inclusion policies.
fn node_included(c: &SpreadConstraint, pod: &PodInfo, node: &NodeInfo) -> bool {
    if c.honor_node_affinity && !matches_required(pod, node) {
        return false;
    }
    if c.honor_node_taints {
        let hard = |t: &crate::taints::Taint| matches!(t.effect, Effect::NoSchedule | Effect::NoExecute);
        if find_untolerated(&node.taints, &pod.tolerations, hard).is_some() {
            return false;
        }
    }
    true
}

/// Pods on the node in `namespace`, not terminating, selected by a non-empty selector.
fn count_matching(node: &NodeInfo, selector: &Option<LabelSelector>, namespace: &str) -> i64 {
    let Some(sel) = selector.as_ref().filter(|s| !s.is_empty()) else { return 0 };
    node.pods.iter().filter(|p| !p.terminating && p.namespace == namespace && sel.matches(&p.labels)).count() as i64
}

fn has_all_keys(node: &NodeInfo, constraints: &[SpreadConstraint]) -> bool {
    constraints.iter().all(|c| node.labels.contains_key(&c.topology_key))
}
