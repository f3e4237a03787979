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

use rand::Rng;

use super::run::{
    EvaluateOptions, Evaluation, filter_list, finish_scores, nodes_to_find, outside_allowed, pre_filter_all,
    pre_score_all, raw_scores, run_filters, select_host,
};
use super::{PluginState, Profile, StatusTable, map_nodes};
use crate::pod_info::PodInfo;
use crate::snapshot::Snapshot;
use crate::status::Status;

/// How many pod signatures one profile keeps results for.
const SIGNATURES: usize = 8;

/// Per-profile cache of node-local results for the most recent pod signatures.
#[derive(Default)]
pub struct EquivalenceCache {
    slots: Vec<Slot>,
    tick: u64,
}

/// Node-local filter verdicts and raw scores of one pod signature, kept as flat
/// arrays by node index (struct of arrays: the per-pod scan touches only what it needs).
#[derive(Default)]
struct Slot {
    used: u64,
    signature: Option<u64>,
    epoch: u64,
    /// Each node's generation when its entry was computed (0: never).
    generations: Vec<u64>,
    /// Per node: 0 when every node-local filter passes, else 1 + the index of the first
    /// failing one's status in `statuses`.
    verdicts: Vec<u32>,
    /// Distinct statuses of the node-local filters.
    statuses: StatusTable,
    /// Raw scores by score plugin, then node: `raw[p][i]`.
    raw: Vec<Vec<i64>>,
}

impl EquivalenceCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The slot for a signature: its own, else a free or the least recently used one.
    fn slot(&mut self, signature: u64) -> &mut Slot {
        self.tick += 1;
        let i =
            crate::lru::slot_index(&mut self.slots, SIGNATURES, signature, |s| s.signature.unwrap_or(0), |s| s.used);
        let slot = &mut self.slots[i];
        slot.used = self.tick;
        slot
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
    if nodes_to_find(profile.percentage_of_nodes_to_score, n) < n || profile.scores.len() > 16 {
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

    let plugins = profile.scores.len();
    let cache = cache.slot(pod.signature);
    if cache.signature != Some(pod.signature)
        || cache.epoch != snapshot.epoch
        || cache.generations.len() != n
        || cache.raw.len() != plugins
        // Statuses with details are never shared; start over before they pile up.
        || cache.statuses.len() > 2 * n + 64
    {
        cache.signature = Some(pod.signature);
        cache.epoch = snapshot.epoch;
        cache.generations = vec![0; n];
        cache.verdicts = vec![0; n];
        cache.statuses = StatusTable::default();
        cache.raw = vec![vec![0; n]; plugins];
    }
    let stale: Vec<usize> = cache
        .generations
        .iter()
        .zip(&snapshot.generations)
        .enumerate()
        .filter(|(_, (c, s))| c != s)
        .map(|(i, _)| i)
        .collect();
    let prefix = &fstates[..local_filters];
    let fresh = map_nodes(stale.len(), |k| {
        let node = &snapshot.nodes[stale[k]];
        let st = run_filters_prefix(profile, prefix, pod, node, stale[k]);
        let mut raw = [0i64; 16];
        if st.is_none() {
            for &p in local_scores.iter().filter(|&&p| p < 16) {
                if let Some(Some(state)) = &local_states[p] {
                    raw[p] = profile.scores[p].plugin.score_at(state, pod, node, snapshot, stale[k]);
                }
            }
        }
        (node.generation, st, raw)
    });
    for (k, (generation, st, raw)) in fresh.into_iter().enumerate() {
        let i = stale[k];
        cache.generations[i] = generation;
        cache.verdicts[i] = st.map_or(0, |st| cache.statuses.intern(st) + 1);
        for (p, column) in cache.raw.iter_mut().enumerate() {
            column[i] = raw[p];
        }
    }

    // Filter: cached verdicts, then the remaining filters for nodes that passed them.
    let rest_active = fstates[local_filters..].iter().any(Option::is_some);
    let mut passed: Vec<usize> = Vec::with_capacity(n);
    // The slot's status k is this attempt's status `mapped[k]` once a node used it.
    let mut mapped = vec![u32::MAX; cache.statuses.len()];
    for (i, &verdict) in cache.verdicts.iter().enumerate() {
        if allowed.is_some()
            && let Some(st) = outside_allowed(&allowed, &snapshot.nodes[i])
        {
            ev.rejected.push(i, st);
        } else if verdict == 0 {
            passed.push(i);
        } else {
            let k = verdict - 1;
            if mapped[k as usize] == u32::MAX
                && let Some(st) = cache.statuses.get(k)
            {
                mapped[k as usize] = ev.rejected.intern(st.clone());
            }
            ev.rejected.push_interned(i, mapped[k as usize]);
        }
    }
    if rest_active {
        let found = filter_list(passed.len(), &|k| passed[k], &|i| {
            run_filters_suffix(profile, &fstates, local_filters, pod, &snapshot.nodes[i], i)
        });
        if let Some(e) = found.error {
            ev.error = Some(e);
            return ev;
        }
        ev.feasible = found.feasible;
        ev.rejected.append(found.rejected);
        ev.rejected.sort_by_node();
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
            let column = &cache.raw[p];
            raw[p] =
                if ev.feasible.len() == n { column.clone() } else { ev.feasible.iter().map(|&i| column[i]).collect() };
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
    index: usize,
) -> Option<Status> {
    let st = run_filters(&profile.filters, states, pod, node, index);
    (!st.is_success()).then_some(st)
}

fn run_filters_suffix(
    profile: &Profile,
    states: &[Option<PluginState>],
    from: usize,
    pod: &PodInfo,
    node: &crate::node_info::NodeInfo,
    index: usize,
) -> Status {
    run_filters(&profile.filters[from..], &states[from..], pod, node, index)
}
