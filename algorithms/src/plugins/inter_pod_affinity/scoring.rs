//! PreScore, Score and NormalizeScore of InterPodAffinity.

use std::collections::HashMap;

use super::*;
use crate::framework::{MAX_NODE_SCORE, PluginState, ScorePlugin};
use crate::pod_info::{PodInfo, WeightedAffinityTerm};
use crate::status::Status;

struct ScoreState {
    topology: super::cache::TopologyScores,
    index: std::sync::Arc<HashMap<String, usize>>,
}

fn resolve_weighted(terms: &[WeightedAffinityTerm], snapshot: &Snapshot) -> Vec<WeightedAffinityTerm> {
    let plain: Vec<AffinityTerm> = terms.iter().map(|w| w.term.clone()).collect();
    resolve_namespaces(&plain, snapshot)
        .into_iter()
        .zip(terms)
        .map(|(term, w)| WeightedAffinityTerm { weight: w.weight, term })
        .collect()
}

impl ScorePlugin for InterPodAffinity {
    fn name(&self) -> &'static str {
        NAME
    }

    fn pre_score(&self, pod: &PodInfo, snapshot: &Snapshot, _: &[usize]) -> Result<PluginState, Status> {
        let has_own = !pod.preferred_affinity.is_empty() || !pod.preferred_anti_affinity.is_empty();
        if !has_own && (self.args.ignore_preferred_terms_of_existing_pods || snapshot.with_affinity.is_empty()) {
            // Nothing can contribute: the pod has no terms and no existing pod has any.
            return Err(Status::skip());
        }
        let affinity = resolve_weighted(&pod.preferred_affinity, snapshot);
        let anti = resolve_weighted(&pod.preferred_anti_affinity, snapshot);
        let ns_labels = snapshot.namespace_labels(&pod.namespace);
        let hard = self.args.hard_pod_affinity_weight;
        // What one node contributes, per topology key (the node's own value of that key).
        let contribution = |node: &NodeInfo| -> Vec<(String, i64)> {
            let mut out: Vec<(String, i64)> = Vec::new();
            if node.labels.is_empty() {
                return out;
            }
            let mut add = |key: &str, delta: i64| {
                if delta == 0 || !node.labels.contains_key(key) {
                    return;
                }
                match out.iter_mut().find(|(k, _)| k == key) {
                    Some((_, d)) => *d += delta,
                    None => out.push((key.to_string(), delta)),
                }
            };
            let pods = if has_own { &node.pods } else { &node.pods_with_affinity };
            for ep in pods {
                for w in &affinity {
                    if w.term.matches(ep, &NO_LABELS) {
                        add(&w.term.topology_key, w.weight);
                    }
                }
                for w in &anti {
                    if w.term.matches(ep, &NO_LABELS) {
                        add(&w.term.topology_key, -w.weight);
                    }
                }
                if hard > 0 {
                    for t in &ep.required_affinity {
                        if t.matches(pod, ns_labels) {
                            add(&t.topology_key, hard);
                        }
                    }
                }
                for w in &ep.preferred_affinity {
                    if w.term.matches(pod, ns_labels) {
                        add(&w.term.topology_key, w.weight);
                    }
                }
                for w in &ep.preferred_anti_affinity {
                    if w.term.matches(pod, ns_labels) {
                        add(&w.term.topology_key, -w.weight);
                    }
                }
            }
            out
        };
        let key = super::cache::ScoreKey {
            has_own,
            hard,
            namespace: pod.namespace.clone(),
            labels: pod.labels.clone(),
            ns_labels: ns_labels.clone(),
            affinity: affinity.clone(),
            anti: anti.clone(),
        };
        let topology =
            self.score_cache.lock().unwrap_or_else(|e| e.into_inner()).aggregate(key, snapshot, contribution);
        if !topology.any {
            return Err(Status::skip());
        }
        Ok(PluginState::new(ScoreState { topology, index: snapshot.index.clone() }))
    }

    fn score(&self, state: &PluginState, pod: &PodInfo, node: &NodeInfo, snapshot: &Snapshot) -> i64 {
        let Some(i) = state.get::<ScoreState>().and_then(|s| s.index.get(&node.name).copied()) else { return 0 };
        self.score_at(state, pod, node, snapshot, i)
    }

    fn score_at(&self, state: &PluginState, _: &PodInfo, _: &NodeInfo, _: &Snapshot, i: usize) -> i64 {
        state.get::<ScoreState>().map_or(0, |s| s.topology.score(i))
    }

    fn normalize(&self, state: &PluginState, scores: &mut [i64]) {
        if state.get::<ScoreState>().is_none_or(|s| !s.topology.any) {
            return;
        }
        let min = scores.iter().copied().min().unwrap_or(0);
        let max = scores.iter().copied().max().unwrap_or(0);
        let diff = max - min;
        for s in scores.iter_mut() {
            // kube-scheduler computes 100 * ((s - min) / (max - min)) in floating point.
            *s = if diff > 0 { (MAX_NODE_SCORE as f64 * ((*s - min) as f64 / diff as f64)) as i64 } else { 0 };
        }
    }
}
