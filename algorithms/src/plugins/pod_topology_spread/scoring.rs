//! PreScore, Score and NormalizeScore of PodTopologySpread.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use super::*;
use crate::framework::{MAX_NODE_SCORE, PluginState, ScorePlugin};
use crate::status::Status;

/// Raw score of nodes left out of scoring; normalized to zero.
const IGNORED: i64 = -1;

struct ScoreState {
    constraints: Vec<SpreadConstraint>,
    ignored: HashSet<String>,
    /// Per constraint (non-hostname keys): matching pods per domain value.
    counts: Vec<HashMap<String, i64>>,
    weights: Vec<f64>,
}

impl ScorePlugin for PodTopologySpread {
    fn name(&self) -> &'static str {
        NAME
    }

    fn pre_score(&self, pod: &PodInfo, snapshot: &Snapshot, feasible: &[usize]) -> Result<PluginState, Status> {
        if snapshot.nodes.is_empty() {
            return Err(Status::skip());
        }
        let constraints = self.constraints(pod, snapshot, Unsatisfiable::ScheduleAnyway);
        if constraints.is_empty() {
            return Err(Status::skip());
        }
        let require_all = !pod.spread_constraints.is_empty() || !self.system_defaulted;
        let mut ignored = HashSet::default();
        let mut counts: Vec<HashMap<String, i64>> = vec![HashMap::default(); constraints.len()];
        for &i in feasible {
            let node = &snapshot.nodes[i];
            if require_all && !has_all_keys(node, &constraints) {
                ignored.insert(node.name.clone());
                continue;
            }
            for (c, domain) in constraints.iter().zip(counts.iter_mut()) {
                if c.topology_key != HOSTNAME {
                    let value = node.labels.get(&c.topology_key).map(String::as_str).unwrap_or("");
                    if !domain.contains_key(value) {
                        domain.insert(value.to_string(), 0);
                    }
                }
            }
        }
        let scored = (feasible.len() - ignored.len()) as f64;
        let weights = constraints
            .iter()
            .zip(&counts)
            .map(|(c, d)| {
                let size = if c.topology_key == HOSTNAME { scored } else { d.len() as f64 };
                (size + 2.0).ln()
            })
            .collect();
        for node in &snapshot.nodes {
            if require_all && !has_all_keys(node, &constraints) {
                continue;
            }
            for (c, domain) in constraints.iter().zip(counts.iter_mut()) {
                if c.topology_key == HOSTNAME || !node_included(c, pod, node) {
                    continue;
                }
                let value = node.labels.get(&c.topology_key).map(String::as_str).unwrap_or("");
                if let Some(n) = domain.get_mut(value) {
                    *n += count_matching(node, &c.selector, &pod.namespace);
                }
            }
        }
        Ok(PluginState::new(ScoreState { constraints, ignored, counts, weights }))
    }

    fn score(&self, state: &PluginState, pod: &PodInfo, node: &NodeInfo, _: &Snapshot) -> i64 {
        let Some(s) = state.get::<ScoreState>() else { return 0 };
        if s.ignored.contains(&node.name) {
            return IGNORED;
        }
        let mut score = 0f64;
        for (i, c) in s.constraints.iter().enumerate() {
            let Some(value) = node.labels.get(&c.topology_key) else { continue };
            let count = if c.topology_key == HOSTNAME {
                count_matching(node, &c.selector, &pod.namespace)
            } else {
                s.counts[i].get(value).copied().unwrap_or(0)
            };
            score += count as f64 * s.weights[i] + (c.max_skew - 1) as f64;
        }
        score.round() as i64
    }

    fn normalize(&self, _: &PluginState, scores: &mut [i64]) {
        let valid = || scores.iter().copied().filter(|s| *s != IGNORED);
        let min = valid().min().unwrap_or(0);
        let max = valid().max().unwrap_or(0).max(0);
        for s in scores.iter_mut() {
            *s = if *s == IGNORED {
                0
            } else if max == 0 {
                MAX_NODE_SCORE
            } else {
                MAX_NODE_SCORE * (max + min - *s) / max
            };
        }
    }
}
