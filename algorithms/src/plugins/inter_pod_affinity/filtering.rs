//! PreFilter and Filter of InterPodAffinity.

use std::sync::Arc;

use super::cache::{AffinityCache, MISSING, Sums};
use super::*;
use crate::framework::{FilterPlugin, PluginState, PreFilterOutcome};
use crate::pod_info::PodInfo;
use crate::status::Status;

/// What PreFilter found for one pod: the cache's sums by topology domain.
struct FilterState {
    sums: Arc<Sums>,
    affinity_keys: Vec<u32>,
    anti_keys: Vec<u32>,
    /// Whether the pod matches every one of its own affinity terms.
    self_match: bool,
    /// `values[k][i]` as in the cache.
    values: Arc<Vec<Vec<u32>>>,
    keys: Vec<String>,
    index: Arc<std::collections::HashMap<String, usize>>,
}

impl FilterPlugin for InterPodAffinity {
    fn name(&self) -> &'static str {
        NAME
    }

    fn pre_filter(&self, pod: &PodInfo, snapshot: &Snapshot) -> PreFilterOutcome {
        let affinity_terms = resolve_namespaces(&pod.required_affinity, snapshot);
        let anti_terms = resolve_namespaces(&pod.required_anti_affinity, snapshot);
        if affinity_terms.is_empty() && anti_terms.is_empty() && snapshot.with_required_anti_affinity.is_empty() {
            return PreFilterOutcome::skip();
        }
        let state =
            AffinityCache::with_facts(&self.cache, pod, snapshot, &affinity_terms, &anti_terms, |f| FilterState {
                sums: f.sums.clone(),
                affinity_keys: f.affinity_keys.clone(),
                anti_keys: f.anti_keys.clone(),
                self_match: !affinity_terms.is_empty() && affinity_terms.iter().all(|t| t.matches(pod, &NO_LABELS)),
                values: f.topology.values.clone(),
                keys: f.topology.keys.clone(),
                index: snapshot.index.clone(),
            });
        if state.sums.existing_total == 0 && affinity_terms.is_empty() && anti_terms.is_empty() {
            return PreFilterOutcome::skip();
        }
        PreFilterOutcome::run(PluginState::new(state))
    }

    fn queueing_hint(&self, pod: &PodInfo, event: &crate::events::ClusterEvent) -> crate::events::QueueingHint {
        super::hints::queueing_hint(pod, event)
    }

    fn filter(&self, state: &PluginState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(i) = state.get::<FilterState>().and_then(|s| s.index.get(&node.name).copied()) else {
            return Status::error("InterPodAffinity state is missing");
        };
        self.filter_at(state, pod, node, i)
    }

    fn filter_at(&self, state: &PluginState, _: &PodInfo, node: &NodeInfo, i: usize) -> Status {
        let Some(s) = state.get::<FilterState>() else { return Status::error("InterPodAffinity state is missing") };
        let value = |k: u32| s.values.get(k as usize).and_then(|col| col.get(i)).copied().unwrap_or(MISSING);
        // 1. The pod's own required affinity.
        let mut pods_exist = true;
        for (t, &k) in s.affinity_keys.iter().enumerate() {
            let v = value(k);
            if v == MISSING {
                let key = &s.keys[k as usize];
                return Status::unresolvable(ERR_REASON_AFFINITY)
                    .with_detail_fn(|| format!("node has no {key:?} label"));
            }
            if s.sums.affinity[t].get(v as usize).copied().unwrap_or(0) <= 0 {
                pods_exist = false;
            }
        }
        // With no pod matching anywhere, the first pod of a self-affine group may go anywhere.
        let first_of_group = s.sums.affinity_total == 0 && s.self_match;
        if !pods_exist && !first_of_group {
            return Status::unresolvable(ERR_REASON_AFFINITY)
                .with_detail_fn(|| "no pod matching every affinity term runs in this node's topology domain".into());
        }
        // 2. The pod's own required anti-affinity.
        if s.sums.anti_total > 0 {
            for (t, &k) in s.anti_keys.iter().enumerate() {
                let v = value(k);
                if v != MISSING && s.sums.anti[t].get(v as usize).copied().unwrap_or(0) > 0 {
                    let key = &s.keys[k as usize];
                    return Status::unschedulable(ERR_REASON_ANTI_AFFINITY).with_detail_fn(|| {
                        let val = node.labels.get(key).map(String::as_str).unwrap_or("");
                        format!("a pod matching an anti-affinity term runs in {key}={val}")
                    });
                }
            }
        }
        // 3. Existing pods' required anti-affinity.
        if s.sums.existing_total > 0 {
            for (k, counts) in s.sums.existing.iter().enumerate() {
                let v = value(k as u32);
                if v != MISSING && counts.get(v as usize).copied().unwrap_or(0) > 0 {
                    let key = &s.keys[k];
                    return Status::unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY).with_detail_fn(|| {
                        let val = node.labels.get(key).map(String::as_str).unwrap_or("");
                        format!("an existing pod's anti-affinity excludes {key}={val}")
                    });
                }
            }
        }
        Status::success()
    }
}
