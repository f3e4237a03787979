//! InterPodAffinity: required pod affinity / anti-affinity (both directions) filter; preferred terms score.

mod filtering;
mod scoring;
#[cfg(test)]
mod tests;

use serde::Deserialize;

use crate::labels::Labels;
use crate::node_info::NodeInfo;
use crate::pod_info::AffinityTerm;
use crate::snapshot::Snapshot;

use super::ArgsError;

/// Plugin name.
pub const NAME: &str = "InterPodAffinity";
/// Reason when an existing pod's required anti-affinity rejects the pod.
pub const ERR_REASON_EXISTING_ANTI_AFFINITY: &str = "node(s) didn't satisfy existing pods anti-affinity rules";
/// Reason when the pod's required affinity is not met.
pub const ERR_REASON_AFFINITY: &str = "node(s) didn't match pod affinity rules";
/// Reason when the pod's required anti-affinity is violated.
pub const ERR_REASON_ANTI_AFFINITY: &str = "node(s) didn't match pod anti-affinity rules";

/// `InterPodAffinityArgs`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InterPodAffinityArgs {
    /// Score existing pods' required affinity terms contribute when they select the incoming pod.
    #[serde(default = "default_hard_weight")]
    pub hard_pod_affinity_weight: i64,
    /// Leave existing pods' preferred terms out of scoring.
    #[serde(default)]
    pub ignore_preferred_terms_of_existing_pods: bool,
}

fn default_hard_weight() -> i64 {
    1
}

impl Default for InterPodAffinityArgs {
    fn default() -> Self {
        InterPodAffinityArgs { hard_pod_affinity_weight: 1, ignore_preferred_terms_of_existing_pods: false }
    }
}

/// The InterPodAffinity filter and score.
#[derive(Debug, Clone, Default)]
pub struct InterPodAffinity {
    args: InterPodAffinityArgs,
}

impl InterPodAffinity {
    /// Builds the plugin, validating its args.
    pub fn new(args: &InterPodAffinityArgs) -> Result<Self, ArgsError> {
        if !(0..=100).contains(&args.hard_pod_affinity_weight) {
            return Err(ArgsError::new(NAME, "hardPodAffinityWeight must be within 0..=100"));
        }
        Ok(InterPodAffinity { args: args.clone() })
    }
}

/// Counts per topology key, then per value (looked up by `&str`, no allocation).
#[derive(Debug, Default)]
pub(crate) struct TopologyCounts(rustc_hash::FxHashMap<String, rustc_hash::FxHashMap<String, i64>>);

impl TopologyCounts {
    pub(crate) fn is_empty(&self) -> bool {
        self.0.values().all(|m| m.values().all(|c| *c == 0))
    }

    /// The count for the node's value of `key`; None when the node lacks the key.
    pub(crate) fn at(&self, key: &str, node: &NodeInfo) -> Option<i64> {
        let v = node.labels.get(key)?;
        Some(self.0.get(key).and_then(|m| m.get(v.as_str())).copied().unwrap_or(0))
    }

    /// Whether any of the node's labels has a positive count.
    pub(crate) fn any_label_positive<'a>(&'a self, node: &'a NodeInfo) -> Option<(&'a str, &'a str)> {
        for (k, values) in &self.0 {
            if let Some(v) = node.labels.get(k)
                && values.get(v.as_str()).is_some_and(|c| *c > 0)
            {
                return Some((k.as_str(), v.as_str()));
            }
        }
        None
    }
}

fn add_pair(counts: &mut TopologyCounts, key: &str, node: &NodeInfo, delta: i64) {
    if let Some(v) = node.labels.get(key) {
        let values = match counts.0.get_mut(key) {
            Some(m) => m,
            None => counts.0.entry(key.to_string()).or_default(),
        };
        match values.get_mut(v.as_str()) {
            Some(c) => *c += delta,
            None => {
                values.insert(v.clone(), delta);
            }
        }
    }
}

/// The incoming pod's terms with namespace selectors resolved into namespace names,
/// so that they are matched without namespace labels (as kube-scheduler merges them).
fn resolve_namespaces(terms: &[AffinityTerm], snapshot: &Snapshot) -> Vec<AffinityTerm> {
    terms
        .iter()
        .map(|t| {
            let mut t = t.clone();
            if let Some(sel) = &t.namespace_selector
                && !sel.is_empty()
            {
                for (ns, labels) in snapshot.namespaces.iter() {
                    if sel.matches(labels) && !t.namespaces.contains(ns) {
                        t.namespaces.push(ns.clone());
                    }
                }
                t.namespace_selector = None;
            }
            t
        })
        .collect()
}

static NO_LABELS: std::sync::LazyLock<Labels> = std::sync::LazyLock::new(Labels::new);
