//! PreScore, Score and NormalizeScore of PodTopologySpread.

use std::sync::Arc;

use super::cache::{MISSING, SpreadCache};
use super::*;
use crate::framework::{MAX_NODE_SCORE, PluginState, ScorePlugin};
use crate::status::Status;

/// Raw score of nodes left out of scoring; normalized to zero.
const IGNORED: i64 = -1;

struct ScoreState {
    constraints: Vec<SpreadConstraint>,
    /// By node index: feasible nodes left out for lacking a key.
    ignored: Vec<bool>,
    /// Per constraint (non-hostname keys): matching pods per domain value id.
    sums: Vec<Vec<i64>>,
    weights: Vec<f64>,
    values: Arc<Vec<u32>>,
    counts: Arc<Vec<i64>>,
    index: Arc<std::collections::HashMap<String, usize>>,
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
        let per = constraints.len();
        let n = snapshot.nodes.len();
        let state = SpreadCache::with_facts(&self.cache, &constraints, pod, snapshot, |f| {
            // Nodes without a key count in the "" domain when not every key is required.
            let empty: Vec<u32> = (0..per).map(|c| f.intern(c, "")).collect();
            let value = |f: &cache::NodeFacts, i: usize, c: usize| -> Option<u32> {
                match f.values[i * per + c] {
                    MISSING if require_all => None,
                    MISSING => Some(empty[c]),
                    id => Some(id),
                }
            };
            let mut ignored = vec![false; n];
            let mut present: Vec<Vec<bool>> = f.names.iter().map(|v| vec![false; v.len()]).collect();
            let mut scored = 0usize;
            for &i in feasible {
                if require_all && !f.has_all[i] {
                    ignored[i] = true;
                    continue;
                }
                scored += 1;
                for (c, con) in constraints.iter().enumerate() {
                    if con.topology_key != HOSTNAME
                        && let Some(id) = value(f, i, c)
                    {
                        present[c][id as usize] = true;
                    }
                }
            }
            let weights = constraints
                .iter()
                .zip(&present)
                .map(|(con, p)| {
                    let size = if con.topology_key == HOSTNAME { scored } else { p.iter().filter(|x| **x).count() };
                    (size as f64 + 2.0).ln()
                })
                .collect();
            let mut sums: Vec<Vec<i64>> = present.iter().map(|p| vec![0; p.len()]).collect();
            for i in 0..n {
                if require_all && !f.has_all[i] {
                    continue;
                }
                for (c, con) in constraints.iter().enumerate() {
                    if con.topology_key == HOSTNAME || !f.included[i * per + c] {
                        continue;
                    }
                    if let Some(id) = value(f, i, c)
                        && present[c][id as usize]
                    {
                        sums[c][id as usize] += f.counts[i * per + c];
                    }
                }
            }
            ScoreState {
                constraints: constraints.clone(),
                ignored,
                sums,
                weights,
                values: f.values.clone(),
                counts: f.counts.clone(),
                index: snapshot.index.clone(),
            }
        });
        Ok(PluginState::new(state))
    }

    fn score(&self, state: &PluginState, pod: &PodInfo, node: &NodeInfo, snapshot: &Snapshot) -> i64 {
        let Some(i) = state.get::<ScoreState>().and_then(|s| s.index.get(&node.name).copied()) else { return 0 };
        self.score_at(state, pod, node, snapshot, i)
    }

    fn score_at(&self, state: &PluginState, _: &PodInfo, _: &NodeInfo, _: &Snapshot, i: usize) -> i64 {
        let Some(s) = state.get::<ScoreState>() else { return 0 };
        if s.ignored.get(i).copied().unwrap_or(false) {
            return IGNORED;
        }
        let per = s.constraints.len();
        let mut score = 0f64;
        for (c, con) in s.constraints.iter().enumerate() {
            let id = s.values.get(i * per + c).copied().unwrap_or(MISSING);
            if id == MISSING {
                continue;
            }
            let count = if con.topology_key == HOSTNAME {
                s.counts[i * per + c]
            } else {
                s.sums[c].get(id as usize).copied().unwrap_or(0)
            };
            score += count as f64 * s.weights[c] + (con.max_skew - 1) as f64;
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
