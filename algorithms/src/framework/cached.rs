//! Reuse of node-local work across pods with the same scheduling-relevant spec.
//!
//! Pods of one ReplicaSet are identical to the scheduler, and between two of them
//! usually only the node that received the first one changed. For plugins marked
//! `node_local`, the filter verdict and the raw score of a node depend only on the
//! pod's signature and the node, so they are kept per node with the node's
//! generation and recomputed only for nodes that changed. Plugins that look at
//! other nodes (topology spread, inter-pod affinity) still run every time, and
//! normalization and selection always run over fresh totals, so the result is the
//! one the plain path computes.

use std::sync::Arc;

use rand::Rng;

use super::run::{
    EvaluateOptions, Evaluation, finish_scores, nodes_to_find, outside_allowed, pre_filter_all, pre_score_all,
    raw_scores, run_filters, select_host,
};
use super::{PluginState, Profile, map_nodes};
use crate::pod_info::PodInfo;
use crate::snapshot::Snapshot;
use crate::status::{Code, Status};

/// What is kept for one node.
#[derive(Clone, Default)]
struct Entry {
    /// The node's generation when computed (0: never).
    generation: u64,
    /// The first failing node-local filter, or None when they all pass.
    status: Option<Arc<Status>>,
    /// Raw scores of the node-local score plugins, by profile score index.
    raw: Vec<i64>,
}

/// Per-profile cache of node-local filter verdicts and raw scores.
#[derive(Default)]
pub struct EquivalenceCache {
    signature: Option<u64>,
    epoch: u64,
    entries: Vec<Entry>,
    /// Nodes recomputed by the last attempt (for tests and metrics).
    pub last_recomputed: usize,
}

impl EquivalenceCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }
}

/// Like [`super::evaluate`], reusing node-local results from `cache`. Falls back to the
/// plain path when only a share of nodes is to be scored.
pub fn evaluate_cached(
    profile: &Profile,
    pod: &PodInfo,
    snapshot: &Snapshot,
    rng: &mut impl Rng,
    opts: EvaluateOptions,
    cache: &mut EquivalenceCache,
) -> Evaluation {
    let n = snapshot.nodes.len();
    if nodes_to_find(profile.percentage_of_nodes_to_score, n) < n {
        return super::evaluate(profile, pod, snapshot, rng, opts);
    }
    let mut ev = Evaluation { num_nodes: n, ..Default::default() };
    let Some((fstates, allowed)) = pre_filter_all(profile, pod, snapshot, &mut ev, n, &|k| k) else { return ev };

    // Node-local filters form the leading run of the profile; the rest always run.
    let local_filters = profile.filters.iter().take_while(|f| f.node_local()).count();
    let local_scores: Vec<usize> =
        (0..profile.scores.len()).filter(|&p| profile.scores[p].plugin.node_local()).collect();
    // PreScore of node-local plugins depends only on the pod, so it can run before filtering.
    let mut local_states: Vec<Option<Option<PluginState>>> = Vec::with_capacity(profile.scores.len());
    for (p, ws) in profile.scores.iter().enumerate() {
        if !local_scores.contains(&p) {
            local_states.push(None);
            continue;
        }
        match ws.plugin.pre_score(pod, snapshot, &[]) {
            Ok(s) => local_states.push(Some(Some(s))),
            Err(st) if st.is_skip() => local_states.push(Some(None)),
            Err(mut st) => {
                st.plugin = ws.plugin.name();
                ev.error = Some(st);
                return ev;
            }
        }
    }

    if cache.signature != Some(pod.signature) || cache.epoch != snapshot.epoch || cache.entries.len() != n {
        cache.signature = Some(pod.signature);
        cache.epoch = snapshot.epoch;
        cache.entries = vec![Entry::default(); n];
    }
    let stale: Vec<usize> = (0..n).filter(|&i| cache.entries[i].generation != snapshot.nodes[i].generation).collect();
    cache.last_recomputed = stale.len();
    let prefix = &fstates[..local_filters];
    let fresh = map_nodes(stale.len(), |k| {
        let node = &snapshot.nodes[stale[k]];
        let st = run_filters_prefix(profile, prefix, pod, node);
        let mut raw = vec![0i64; profile.scores.len()];
        if st.is_none() {
            for &p in &local_scores {
                if let Some(Some(state)) = &local_states[p] {
                    raw[p] = profile.scores[p].plugin.score(state, pod, node, snapshot);
                }
            }
        }
        Entry { generation: node.generation, status: st.map(Arc::new), raw }
    });
    for (k, e) in fresh.into_iter().enumerate() {
        cache.entries[stale[k]] = e;
    }

    // Filter: cached verdicts, then the remaining filters for nodes that passed them.
    let rest_active = fstates[local_filters..].iter().any(Option::is_some);
    let mut passed: Vec<usize> = Vec::with_capacity(n);
    for (i, e) in cache.entries.iter().enumerate() {
        if let Some(st) = outside_allowed(&allowed, &snapshot.nodes[i]) {
            ev.rejected.push((i, Arc::new(st)));
        } else if let Some(st) = &e.status {
            ev.rejected.push((i, st.clone()));
        } else {
            passed.push(i);
        }
    }
    if rest_active {
        let statuses = map_nodes(passed.len(), |k| {
            run_filters_suffix(profile, &fstates, local_filters, pod, &snapshot.nodes[passed[k]])
        });
        for (k, st) in statuses.into_iter().enumerate() {
            match st.code {
                Code::Success => ev.feasible.push(passed[k]),
                Code::Error => {
                    ev.error = Some(st);
                    return ev;
                }
                _ => ev.rejected.push((passed[k], Arc::new(st))),
            }
        }
        ev.rejected.sort_by_key(|(i, _)| *i);
    } else {
        ev.feasible = passed;
    }
    if ev.feasible.is_empty() {
        return ev;
    }
    if ev.feasible.len() == 1 && !opts.always_score {
        ev.selected = ev.feasible.first().copied();
        return ev;
    }

    // Score: cached raw scores for node-local plugins, fresh ones for the others.
    let mut reuse = |p: usize| local_states[p].take();
    let Ok(states) = pre_score_all(profile, pod, snapshot, &mut ev, &mut reuse) else { return ev };
    let others: Vec<usize> = (0..states.len()).filter(|&p| states[p].is_some() && !local_scores.contains(&p)).collect();
    let mut raw = raw_scores(profile, pod, snapshot, &ev.feasible, &states, &others);
    for &p in &local_scores {
        if states[p].is_some() {
            raw[p] = ev.feasible.iter().map(|&i| cache.entries[i].raw.get(p).copied().unwrap_or(0)).collect();
        }
    }
    finish_scores(profile, &states, raw, &mut ev);
    ev.selected = select_host(&ev.feasible, &ev.totals, rng);
    ev
}

fn run_filters_prefix(
    profile: &Profile,
    states: &[Option<PluginState>],
    pod: &PodInfo,
    node: &crate::node_info::NodeInfo,
) -> Option<Status> {
    let st = run_filters(profile, states, pod, node);
    (!st.is_success()).then_some(st)
}

fn run_filters_suffix(
    profile: &Profile,
    states: &[Option<PluginState>],
    from: usize,
    pod: &PodInfo,
    node: &crate::node_info::NodeInfo,
) -> Status {
    for (plugin, state) in profile.filters.iter().zip(states).skip(from) {
        let Some(state) = state else { continue };
        let mut st = plugin.filter(state, pod, node);
        if !st.is_success() {
            st.plugin = plugin.name();
            return st;
        }
    }
    Status::success()
}
