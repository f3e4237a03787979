//! NodeAffinity: `nodeSelector` and required node affinity filter; preferred terms score.

use std::collections::HashSet;

use serde::Deserialize;

use crate::events::{ClusterEvent, QueueingHint};
use crate::framework::node_hint;
use crate::framework::{FilterPlugin, PluginState, PreFilterOutcome, ScorePlugin, default_normalize};
use crate::labels::{NodeSelector, NodeSelectorTerm, Operator, parse_term};
use crate::node_info::NodeInfo;
use crate::pod_info::PodInfo;
use crate::snapshot::Snapshot;
use crate::status::Status;

/// Plugin name.
pub const NAME: &str = "NodeAffinity";
/// Reason when the pod's own selector or affinity does not match.
pub const ERR_REASON_POD: &str = "node(s) didn't match Pod's node affinity/selector";
/// Reason when the scheduler's `addedAffinity` does not match.
pub const ERR_REASON_ENFORCED: &str = "node(s) didn't match scheduler-enforced node affinity";
/// Reason when `metadata.name` field terms leave no node.
pub const ERR_REASON_CONFLICT: &str = "pod affinity terms conflict";

/// `NodeAffinityArgs`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeAffinityArgs {
    /// Affinity applied to every pod of the profile.
    #[serde(default)]
    pub added_affinity: Option<k8s_openapi::api::core::v1::NodeAffinity>,
}

/// The NodeAffinity filter and score.
#[derive(Debug, Default)]
pub struct NodeAffinity {
    added_required: Option<NodeSelector>,
    added_preferred: Vec<(i64, NodeSelectorTerm)>,
}

impl NodeAffinity {
    /// Builds the plugin from its args.
    pub fn new(args: &NodeAffinityArgs) -> Self {
        let Some(added) = &args.added_affinity else { return Self::default() };
        NodeAffinity {
            added_required: added.required_during_scheduling_ignored_during_execution.as_ref().map(NodeSelector::parse),
            added_preferred: added
                .preferred_during_scheduling_ignored_during_execution
                .iter()
                .flatten()
                .filter(|p| p.weight != 0)
                .filter_map(|p| Some((i64::from(p.weight), parse_term(&p.preference).ok()?)))
                .collect(),
        }
    }
}

/// Whether the node satisfies the pod's `nodeSelector` and required node affinity.
pub fn matches_required(pod: &PodInfo, node: &NodeInfo) -> bool {
    pod.node_selector.iter().all(|(k, v)| node.labels.get(k) == Some(v))
        && pod.required_node_affinity.as_ref().is_none_or(|s| s.matches(&node.name, &node.labels))
}

/// Node names the pod's `metadata.name` field terms allow, when every term has one.
fn node_names(sel: &NodeSelector) -> Option<HashSet<String>> {
    if sel.terms.is_empty() {
        return None;
    }
    let mut all: HashSet<String> = HashSet::new();
    for term in &sel.terms {
        let mut names: Option<HashSet<String>> = None;
        for r in term.fields.iter().filter(|r| r.op == Operator::In) {
            let set: HashSet<String> = r.values.iter().cloned().collect();
            names = Some(match names {
                None => set,
                Some(prev) => prev.intersection(&set).cloned().collect(),
            });
        }
        all.extend(names?);
    }
    Some(all)
}

impl FilterPlugin for NodeAffinity {
    fn name(&self) -> &'static str {
        NAME
    }

    fn node_local(&self) -> bool {
        true
    }

    fn pre_filter(&self, pod: &PodInfo, _: &Snapshot) -> PreFilterOutcome {
        if pod.required_node_affinity.is_none() && self.added_required.is_none() && pod.node_selector.is_empty() {
            return PreFilterOutcome::skip();
        }
        let mut out = PreFilterOutcome::run(PluginState::none());
        if let Some(names) = pod.required_node_affinity.as_ref().and_then(node_names) {
            if names.is_empty() {
                return PreFilterOutcome::reject(Status::unresolvable(ERR_REASON_CONFLICT));
            }
            out.node_names = Some(names);
        }
        out
    }

    fn filter(&self, _: &PluginState, pod: &PodInfo, node: &NodeInfo) -> Status {
        if let Some(added) = &self.added_required
            && !added.matches(&node.name, &node.labels)
        {
            return Status::unresolvable(ERR_REASON_ENFORCED);
        }
        if matches_required(pod, node) {
            return Status::success();
        }
        Status::unresolvable(ERR_REASON_POD).with_detail_fn(|| {
            match pod.node_selector.iter().find(|(k, v)| node.labels.get(*k) != Some(*v)) {
                Some((k, v)) => format!("nodeSelector {k}={v} does not match"),
                None => "no required node affinity term matches".to_string(),
            }
        })
    }

    /// A node whose labels the pod's selector and required affinity now accept.
    fn queueing_hint(&self, pod: &PodInfo, event: &ClusterEvent) -> QueueingHint {
        node_hint(self, pod, event).unwrap_or(QueueingHint::Skip)
    }
}

impl ScorePlugin for NodeAffinity {
    fn name(&self) -> &'static str {
        NAME
    }

    fn node_local(&self) -> bool {
        true
    }

    fn pre_score(&self, pod: &PodInfo, _: &Snapshot, _: &[usize]) -> Result<PluginState, Status> {
        if pod.preferred_node_affinity.is_empty() && self.added_preferred.is_empty() {
            return Err(Status::skip());
        }
        Ok(PluginState::none())
    }

    fn score(&self, _: &PluginState, pod: &PodInfo, node: &NodeInfo, _: &Snapshot) -> i64 {
        let added: i64 =
            self.added_preferred.iter().filter(|(_, t)| t.matches(&node.name, &node.labels)).map(|(w, _)| w).sum();
        let own: i64 = pod
            .preferred_node_affinity
            .iter()
            .filter(|p| p.weight != 0)
            .filter(|p| p.term.as_ref().is_some_and(|t| t.matches(&node.name, &node.labels)))
            .map(|p| p.weight)
            .sum();
        added + own
    }

    fn normalize(&self, _: &PluginState, scores: &mut [i64]) {
        default_normalize(false, scores);
    }
}

#[cfg(test)]
mod tests;
