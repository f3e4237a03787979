//! InterPodAffinity: required pod affinity / anti-affinity (both directions) filter; preferred terms score.

mod cache;
mod filtering;
mod hints;
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
    cache: std::sync::Arc<std::sync::Mutex<cache::AffinityCache>>,
    score_cache: std::sync::Arc<std::sync::Mutex<cache::ScoreCache>>,
}

impl InterPodAffinity {
    /// Builds the plugin, validating its args.
    pub fn new(args: &InterPodAffinityArgs) -> Result<Self, ArgsError> {
        if !(0..=100).contains(&args.hard_pod_affinity_weight) {
            return Err(ArgsError::new(NAME, "hardPodAffinityWeight must be within 0..=100"));
        }
        Ok(InterPodAffinity { args: args.clone(), cache: Default::default(), score_cache: Default::default() })
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
