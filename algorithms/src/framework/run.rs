//! One scheduling attempt: PreFilter, Filter, PreScore, Score, NormalizeScore, select.
//!
//! One file though long: the steps build one `Evaluation` in turn, each reading what the
//! steps before it recorded (PreFilter's states and rejection, the feasible nodes, the
//! raw scores).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use rand::Rng;

use super::{PluginState, Profile, Rejections, fold_chunks};
use crate::node_info::NodeInfo;
use crate::pod_info::PodInfo;
use crate::snapshot::Snapshot;
use crate::status::{Code, Status};

/// Reason given to nodes that a PreFilter's node set leaves out.
pub const FILTERED_BY_PREFILTER: &str = "node(s) didn't satisfy plugin(s) [{}]";

/// The normalized scores of one score plugin, aligned with `Evaluation::feasible`.
#[derive(Debug, Clone)]
pub struct PluginScores {
    /// Plugin name.
    pub name: &'static str,
    /// Weight in the total.
    pub weight: i64,
    /// Normalized 0..=100 scores (zero when the plugin skipped this pod).
    pub scores: Vec<i64>,
    /// Whether PreScore skipped the plugin.
    pub skipped: bool,
}

/// Everything one attempt found.
#[derive(Debug, Clone, Default)]
pub struct Evaluation {
    /// Nodes in the snapshot.
    pub num_nodes: usize,
    /// A PreFilter that rejected the pod on every node.
    pub prefilter_rejection: Option<Status>,
    /// Rejected nodes (index into the snapshot) with their first failing filter's status.
    pub rejected: Rejections,
    /// Feasible nodes (indexes into the snapshot).
    pub feasible: Vec<usize>,
    /// Per-plugin scores over the feasible nodes.
    pub scores: Vec<PluginScores>,
    /// Weighted totals, aligned with `feasible`.
    pub totals: Vec<i64>,
    /// The chosen node (index into the snapshot).
    pub selected: Option<usize>,
    /// An internal error that stopped the attempt.
    pub error: Option<Status>,
    /// How long PreFilter took, in seconds.
    pub pre_filter_seconds: f64,
    /// The limits PreFilters put on what the pod may be given, for Reserve.
    pub limits: Option<super::Limits>,
}

/// Options for one attempt.
#[derive(Debug, Clone, Default)]
pub struct EvaluateOptions {
    /// Only these nodes (indexes into the snapshot) are judged and may be chosen (a
    /// topology-constrained gang tried one domain at a time); PreFilter still sees the
    /// whole cluster, so pods everywhere count for spreading and affinity.
    pub within: Option<Arc<Vec<usize>>>,
    /// Score even when only one node is feasible (kube-scheduler skips it; `explain` wants it).
    pub always_score: bool,
    /// Where the search starts when only a share of the nodes is to be found: kube-scheduler
    /// moves it on by the nodes each attempt judged, so that successive pods look at
    /// different nodes first. Ignored when every node is evaluated.
    pub start: usize,
}

/// kube-scheduler's FitError histogram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FitSummary {
    /// Nodes in the cluster.
    pub num_nodes: usize,
    /// Reason to number of nodes rejected for it.
    pub reasons: BTreeMap<String, usize>,
    /// A PreFilter's message, which replaces the per-node reasons.
    pub prefilter_message: Option<String>,
}

impl FitSummary {
    /// "0/N nodes are available: 1 reason, 2 other reason."
    pub fn message(&self) -> String {
        let mut msg = format!("0/{} nodes are available:", self.num_nodes);
        if let Some(pre) = &self.prefilter_message {
            msg.push_str(&format!(" {pre}."));
            return msg;
        }
        let mut parts: Vec<String> = self.reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
        parts.sort();
        if !parts.is_empty() {
            msg.push_str(&format!(" {}.", parts.join(", ")));
        }
        msg
    }
}

impl Evaluation {
    /// The summary of why the pod fits nowhere, when it does.
    pub fn fit_summary(&self) -> Option<FitSummary> {
        if self.selected.is_some() || self.error.is_some() {
            return None;
        }
        let mut reasons = BTreeMap::new();
        for (_, st) in self.rejected.iter() {
            for r in &st.reasons {
                *reasons.entry(r.to_string()).or_insert(0) += 1;
            }
        }
        Some(FitSummary {
            num_nodes: self.num_nodes,
            reasons,
            prefilter_message: self.prefilter_rejection.as_ref().map(Status::message),
        })
    }

    /// kube-scheduler's FailedScheduling message, when the pod fits nowhere or a plugin
    /// failed (its error as the framework worded it).
    pub fn failure_message(&self) -> Option<String> {
        if let Some(e) = &self.error {
            return Some(e.message());
        }
        self.fit_summary().map(|s| s.message())
    }

    /// The total score of a node, if it was scored.
    pub fn total_of(&self, node: usize) -> Option<i64> {
        let k = self.feasible.iter().position(|&n| n == node)?;
        self.totals.get(k).copied()
    }
}

/// How many feasible nodes to look for, as kube-scheduler's `numFeasibleNodesToFind`.
pub fn nodes_to_find(percentage: Option<u32>, all: usize) -> usize {
    const MIN_NODES: usize = 100;
    // 0 is kube-scheduler's "the scheduler's default", which here is every node (it is
    // what kube-scheduler writes into its own configuration file, so that file must not
    // turn sampling on).
    let Some(pct) = percentage.filter(|p| *p > 0 && *p < 100) else { return all };
    if all < MIN_NODES {
        return all;
    }
    (all * pct as usize / 100).max(MIN_NODES)
}

/// An error status of a plugin worded as kube-scheduler's framework wraps it at its
/// extension point (`wording` gets the plugin's name and the error); other statuses as
/// they are.
pub(crate) fn wrap_error(st: Status, wording: impl FnOnce(&str, &str) -> String) -> Status {
    if st.code != Code::Error {
        return st;
    }
    let mut out = Status::error(wording(st.plugin, &st.message()));
    out.plugin = st.plugin;
    out.detail = st.detail;
    out
}

/// A PreScore plugin's error, as kube-scheduler words it.
pub(crate) fn pre_score_error(st: Status) -> Status {
    wrap_error(st, |p, m| format!("running PreScore plugin {p:?}: {m}"))
}

/// Runs the filters on one node; the first failing one's status, named (an error worded
/// as kube-scheduler's framework words it). Detail strings are built only when
/// `details` is on.
pub(crate) fn run_filters(
    filters: &[Arc<dyn super::FilterPlugin>],
    states: &[Option<PluginState>],
    pod: &PodInfo,
    node: &NodeInfo,
    index: usize,
    details: bool,
) -> Status {
    crate::status::with_details(details, || {
        for (plugin, state) in filters.iter().zip(states) {
            let Some(state) = state else { continue };
            let mut st = plugin.filter_at(state, pod, node, index);
            if !st.is_success() {
                st.plugin = plugin.name();
                return wrap_error(st, |p, m| format!("running {p:?} filter plugin: {m}"));
            }
        }
        Status::success()
    })
}

/// kube-scheduler's two-pass filter: with the pods nominated to the node that have at
/// least the pod's priority added (so room freed by preemption is not taken by a less
/// important pod), then without them; both must pass. Nodes without such nominated pods
/// are filtered once.
pub(crate) fn filter_with_nominated(
    filters: &[Arc<dyn super::FilterPlugin>],
    states: &[Option<PluginState>],
    pod: &PodInfo,
    node: &NodeInfo,
    (index, snapshot): (usize, &Snapshot),
    details: bool,
) -> Status {
    if let Some(with) = with_nominated(pod, node, snapshot) {
        let st = first_pass(filters, states, pod, with, (index, snapshot), details);
        if !st.is_success() {
            return st;
        }
    }
    run_filters(filters, states, pod, node, index, details)
}

/// The first of the two passes: node-local filters judge the node with the nominated
/// pods; filters that look across nodes (spreading, inter-pod affinity) get their
/// PreFilter state again over a snapshot in which the node holds those pods, as
/// kube-scheduler adds them to its cycle state.
pub(crate) fn first_pass(
    filters: &[Arc<dyn super::FilterPlugin>],
    states: &[Option<PluginState>],
    pod: &PodInfo,
    mut with: NodeInfo,
    (index, snapshot): (usize, &Snapshot),
    details: bool,
) -> Status {
    let global = filters.iter().zip(states).any(|(f, st)| st.is_some() && !f.node_local());
    if !global {
        return run_filters(filters, states, pod, &with, index, details);
    }
    with.generation = crate::node_info::next_generation();
    let with = Arc::new(with);
    let mut changed = snapshot.clone();
    changed.replace_node(index, with.clone());
    changed.set_pod_flags(index);
    let mut fresh: Vec<Option<PluginState>> = Vec::with_capacity(filters.len());
    for (f, st) in filters.iter().zip(states) {
        if st.is_none() || f.node_local() {
            fresh.push(None);
            continue;
        }
        let mut out = f.pre_filter(pod, &changed);
        out.status.plugin = f.name();
        match out.status.code {
            Code::Success => fresh.push(Some(out.state)),
            Code::Skip => fresh.push(None),
            _ => return out.status,
        }
    }
    crate::status::with_details(details, || {
        for ((f, st), new) in filters.iter().zip(states).zip(&fresh) {
            let state = if f.node_local() { st.as_ref() } else { new.as_ref() };
            let Some(state) = state else { continue };
            let mut status = f.filter_at(state, pod, &with, index);
            if !status.is_success() {
                status.plugin = f.name();
                return status;
            }
        }
        Status::success()
    })
}

/// Which node indexes have pods nominated to them; `None` when no pod is nominated.
pub(crate) fn nominated_mask(snapshot: &Snapshot) -> Option<Vec<bool>> {
    if snapshot.nominated.is_empty() {
        return None;
    }
    let mut mask = vec![false; snapshot.nodes.len()];
    for name in snapshot.nominated.keys() {
        if let Some(&i) = snapshot.index.get(name) {
            mask[i] = true;
        }
    }
    Some(mask)
}

/// The node with the pods nominated to it that `pod` must leave room for, if any.
pub(crate) fn with_nominated(pod: &PodInfo, node: &NodeInfo, snapshot: &Snapshot) -> Option<NodeInfo> {
    if snapshot.nominated.is_empty() {
        return None;
    }
    let list = snapshot.nominated.get(&node.name)?;
    let mut extra = list
        .iter()
        .filter(|p| p.priority >= pod.priority && !(p.namespace == pod.namespace && p.name == pod.name))
        .peekable();
    extra.peek()?;
    let mut with = node.clone();
    for p in extra {
        with.add_pod(p.clone());
    }
    Some(with)
}

/// Node names a PreFilter restricted the pod to, with the plugin that did.
pub(crate) type Allowed = Option<(HashSet<String>, &'static str)>;

/// Runs every PreFilter. Returns None when the attempt ends here (a PreFilter rejected
/// the pod on all `n` candidates, or failed), with `ev` filled accordingly.
pub(crate) fn pre_filter_all(
    profile: &Profile,
    pod: &PodInfo,
    snapshot: &Snapshot,
    ev: &mut Evaluation,
    n: usize,
    node_at: &dyn Fn(usize) -> usize,
) -> Option<(Vec<Option<PluginState>>, Allowed)> {
    crate::status::with_details(profile.details, || {
        let mut states: Vec<Option<PluginState>> = Vec::with_capacity(profile.filters.len());
        let mut allowed: Allowed = None;
        for plugin in &profile.filters {
            let mut out = plugin.pre_filter(pod, snapshot);
            out.status.plugin = plugin.name();
            match out.status.code {
                Code::Success => states.push(Some(out.state)),
                Code::Skip => states.push(None),
                Code::Error => {
                    ev.error = Some(wrap_error(out.status, |p, m| format!("running PreFilter plugin {p:?}: {m}")));
                    return None;
                }
                Code::Unschedulable | Code::UnschedulableAndUnresolvable => {
                    ev.rejected = Rejections::all((0..n).map(node_at), out.status.clone());
                    ev.prefilter_rejection = Some(out.status);
                    return None;
                }
            }
            if let Some(names) = out.node_names {
                allowed = Some(match allowed {
                    None => (names, plugin.name()),
                    Some((prev, p)) => (prev.intersection(&names).cloned().collect(), p),
                });
            }
            if let Some(limits) = out.limits {
                ev.limits = Some(match ev.limits.take() {
                    None => limits,
                    Some(before) => before.and(limits),
                });
            }
        }
        if let Some(limits) = &ev.limits {
            for (plugin, state) in profile.filters.iter().zip(states.iter_mut()) {
                if let Some(state) = state {
                    plugin.limit(state, limits);
                }
            }
        }
        Some((states, allowed))
    })
}

/// The status of a node a PreFilter's node set leaves out.
pub(crate) fn outside_allowed(allowed: &Allowed, node: &NodeInfo) -> Option<Status> {
    let (names, plugin) = allowed.as_ref()?;
    if names.contains(&node.name) {
        return None;
    }
    let mut st = Status::unresolvable(FILTERED_BY_PREFILTER.replace("{}", plugin));
    st.plugin = plugin;
    Some(st)
}

/// What filtering a list of nodes found.
#[derive(Default)]
pub(crate) struct Filtered {
    /// Nodes that passed, in list order.
    pub feasible: Vec<usize>,
    /// Nodes that were rejected.
    pub rejected: Rejections,
    /// The first internal error.
    pub error: Option<Status>,
}

/// Judges `count` nodes, the k-th being `node_at(k)`, with `check` in parallel chunks.
/// Only rejections produce a status: a passing node costs one index.
pub(crate) fn filter_list(
    count: usize,
    node_at: &(dyn Fn(usize) -> usize + Sync),
    check: &(dyn Fn(usize) -> Status + Sync),
) -> Filtered {
    let chunks = fold_chunks(count, Filtered::default, |acc, k| {
        let i = node_at(k);
        let st = check(i);
        match st.code {
            Code::Success => acc.feasible.push(i),
            Code::Error => {
                if acc.error.is_none() {
                    acc.error = Some(st);
                }
            }
            _ => acc.rejected.push(i, st),
        }
    });
    let mut out = Filtered::default();
    for c in chunks {
        if out.error.is_none() {
            out.error = c.error;
        }
        out.feasible.extend(c.feasible);
        out.rejected.append(c.rejected);
    }
    out
}

/// Runs PreFilter and Filter over every node: fills `rejected`, `feasible`, `prefilter_rejection` and `error`.
pub fn filter_nodes(profile: &Profile, pod: &PodInfo, snapshot: &Snapshot) -> Evaluation {
    filter_candidates(profile, pod, snapshot, None)
}

/// Like [`filter_nodes`], judging only the `candidates` (indexes into the snapshot) while
/// PreFilter still sees the whole snapshot (existing pods everywhere count).
pub fn filter_candidates(
    profile: &Profile,
    pod: &PodInfo,
    snapshot: &Snapshot,
    candidates: Option<&[usize]>,
) -> Evaluation {
    filter_from(profile, pod, snapshot, candidates, &EvaluateOptions::default())
}

/// Filters the candidates (all nodes when None), starting the search at candidate
/// `opts.start` when only a share of them is to be found, among `opts.within` only.
fn filter_from(
    profile: &Profile,
    pod: &PodInfo,
    snapshot: &Snapshot,
    candidates: Option<&[usize]>,
    opts: &EvaluateOptions,
) -> Evaluation {
    let start = opts.start;
    let n = candidates.map_or(snapshot.nodes.len(), <[usize]>::len);
    let limit = nodes_to_find(profile.percentage_of_nodes_to_score, n);
    let offset = if limit < n { start % n } else { 0 };
    let node_at = |k: usize| {
        let k = (offset + k) % n;
        candidates.map_or(k, |c| c[k])
    };
    let mut ev = Evaluation { num_nodes: n, ..Default::default() };
    let t0 = std::time::Instant::now();
    let pre = pre_filter_all(profile, pod, snapshot, &mut ev, n, &node_at);
    ev.pre_filter_seconds = t0.elapsed().as_secs_f64();
    let Some((states, allowed)) = pre else { return ev };

    // Nodes with nominated pods, looked up by name once per attempt rather than per node.
    let nominated = nominated_mask(snapshot);
    let check = |i: usize| -> Status {
        let node = &snapshot.nodes[i];
        if let Some(st) = outside_allowed(&allowed, node) {
            return st;
        }
        if nominated.as_ref().is_some_and(|m| m[i]) {
            filter_with_nominated(&profile.filters, &states, pod, node, (i, snapshot), profile.details)
        } else {
            run_filters(&profile.filters, &states, pod, node, i, profile.details)
        }
    };
    let mut from = 0;
    while from < n && ev.feasible.len() < limit {
        let end = if limit >= n { n } else { (from + (limit - ev.feasible.len()).max(64)).min(n) };
        let found = filter_list(end - from, &|k| node_at(from + k), &check);
        if let Some(e) = found.error {
            ev.error = Some(e);
            return ev;
        }
        let room = limit - ev.feasible.len();
        ev.feasible.extend(found.feasible.into_iter().take(room));
        ev.rejected.append(found.rejected);
        from = end;
    }
    ev
}

/// Runs one scheduling attempt of `pod` over `snapshot`.
pub fn evaluate(
    profile: &Profile,
    pod: &PodInfo,
    snapshot: &Snapshot,
    rng: &mut impl Rng,
    opts: EvaluateOptions,
) -> Evaluation {
    let mut ev = filter_from(profile, pod, snapshot, opts.within.as_deref().map(Vec::as_slice), &opts);
    if let Some(x) = &profile.extenders
        && ev.error.is_none()
        && !ev.feasible.is_empty()
    {
        x.filter(pod, snapshot, &mut ev);
    }
    if ev.feasible.is_empty() || ev.error.is_some() {
        return ev;
    }
    if ev.feasible.len() == 1 && !opts.always_score {
        ev.selected = ev.feasible.first().copied();
        return ev;
    }
    score_nodes(profile, pod, snapshot, &mut ev);
    if let Some(x) = &profile.extenders
        && ev.error.is_none()
    {
        for (t, extra) in ev.totals.iter_mut().zip(x.score(pod, snapshot, &ev.feasible)) {
            *t += extra;
        }
    }
    if ev.error.is_none() {
        ev.selected = select_host(&ev.feasible, &ev.totals, rng);
    }
    ev
}

/// Runs PreScore, Score and NormalizeScore over `ev.feasible`, filling `scores` and `totals`.
pub fn score_nodes(profile: &Profile, pod: &PodInfo, snapshot: &Snapshot, ev: &mut Evaluation) {
    score(profile, pod, snapshot, ev)
}

/// Score plugins' PreScore states for `ev.feasible`: `None` for a plugin that skipped.
/// Returns Err when a PreScore failed (recorded in `ev.error`).
pub(crate) fn pre_score_all(
    profile: &Profile,
    pod: &PodInfo,
    snapshot: &Snapshot,
    ev: &mut Evaluation,
    reuse: &mut dyn FnMut(usize) -> Option<Option<PluginState>>,
) -> Result<Vec<Option<PluginState>>, ()> {
    let mut states = Vec::with_capacity(profile.scores.len());
    for (p, ws) in profile.scores.iter().enumerate() {
        if let Some(state) = reuse(p) {
            states.push(state);
            continue;
        }
        match ws.plugin.pre_score(pod, snapshot, &ev.feasible) {
            Ok(state) => states.push(Some(state)),
            Err(st) if st.is_skip() => states.push(None),
            Err(mut st) => {
                st.plugin = ws.plugin.name();
                ev.error = Some(pre_score_error(st));
                return Err(());
            }
        }
    }
    Ok(states)
}

/// Raw scores of the plugins in `which` over the feasible nodes, in one parallel pass
/// that writes each plugin's column directly.
pub(crate) fn raw_scores(
    profile: &Profile,
    pod: &PodInfo,
    snapshot: &Snapshot,
    feasible: &[usize],
    states: &[Option<PluginState>],
    which: &[usize],
) -> Vec<Vec<i64>> {
    let mut out: Vec<Vec<i64>> = vec![Vec::new(); profile.scores.len()];
    let active: Vec<(usize, &PluginState)> =
        which.iter().filter_map(|&p| states[p].as_ref().map(|state| (p, state))).collect();
    if active.is_empty() {
        return out;
    }
    let chunks = fold_chunks(
        feasible.len(),
        || vec![Vec::new(); active.len()],
        |cols: &mut Vec<Vec<i64>>, k| {
            let i = feasible[k];
            let node = &snapshot.nodes[i];
            for (col, &(p, state)) in cols.iter_mut().zip(&active) {
                col.push(profile.scores[p].plugin.score_at(state, pod, node, snapshot, i));
            }
        },
    );
    for (slot, &(p, _)) in active.iter().enumerate() {
        let mut column = Vec::with_capacity(feasible.len());
        for c in &chunks {
            column.extend_from_slice(&c[slot]);
        }
        out[p] = column;
    }
    out
}

/// Normalizes raw scores, weighs them and fills `ev.scores` and `ev.totals`.
pub(crate) fn finish_scores(
    profile: &Profile,
    states: &[Option<PluginState>],
    mut raw: Vec<Vec<i64>>,
    ev: &mut Evaluation,
) {
    let n = ev.feasible.len();
    let mut totals = vec![0i64; n];
    for (p, ws) in profile.scores.iter().enumerate() {
        let (scores, skipped) = match &states[p] {
            None => (vec![0; n], true),
            Some(state) => {
                let mut s = std::mem::take(&mut raw[p]);
                s.resize(n, 0);
                ws.plugin.normalize(state, &mut s);
                (s, false)
            }
        };
        for (t, s) in totals.iter_mut().zip(&scores) {
            *t += s * ws.weight;
        }
        ev.scores.push(PluginScores { name: ws.plugin.name(), weight: ws.weight, scores, skipped });
    }
    ev.totals = totals;
}

fn score(profile: &Profile, pod: &PodInfo, snapshot: &Snapshot, ev: &mut Evaluation) {
    let Ok(states) = pre_score_all(profile, pod, snapshot, ev, &mut |_| None) else { return };
    let which: Vec<usize> = (0..states.len()).filter(|&p| states[p].is_some()).collect();
    let raw = raw_scores(profile, pod, snapshot, &ev.feasible, &states, &which);
    finish_scores(profile, &states, raw, ev);
}

/// Picks the node with the highest total, breaking ties uniformly at random among the
/// tied nodes, as kube-scheduler does.
pub fn select_host(feasible: &[usize], totals: &[i64], rng: &mut impl Rng) -> Option<usize> {
    let best = totals.iter().copied().max()?;
    let ties = totals.iter().filter(|t| **t == best).count();
    let pick = if ties > 1 { rng.random_range(0..ties) } else { 0 };
    let k = totals.iter().enumerate().filter(|(_, t)| **t == best).nth(pick).map(|(k, _)| k)?;
    feasible.get(k).copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    /// Human details are built only for a profile that asks for them (as `explain`'s
    /// does), whatever the thread's setting outside the filters.
    #[test]
    fn filters_build_details_only_for_profiles_that_want_them() {
        use crate::builders::{NodeBuilder, PodBuilder, snapshot};
        let nodes = [NodeBuilder::new("small").capacity("1", "1Gi", "10").build()];
        let snap = snapshot(&nodes, &[]);
        let pod = PodBuilder::new("big").req("2", "100Mi").info();
        let plain = crate::config::default_profile("s");
        let detail =
            |p: &Profile| filter_nodes(p, &pod, &snap).rejected.iter().next().and_then(|(_, s)| s.detail.clone());
        assert_eq!(detail(&plain), None);
        let explaining = Profile { details: true, ..plain.clone() };
        assert_eq!(detail(&explaining).as_deref(), Some("cpu: requested 2, 1 free of 1 allocatable"));
        assert!(!crate::status::details_enabled(), "the thread's setting is restored");
        crate::status::with_details(true, || assert_eq!(detail(&plain), None));
    }

    #[test]
    fn summary_sorts_count_reason_strings_like_kube_scheduler() {
        let mut reasons = BTreeMap::new();
        reasons.insert("node(s) had untolerated taint(s)".to_string(), 1);
        reasons.insert("Insufficient cpu".to_string(), 2);
        reasons.insert("Too many pods".to_string(), 10);
        let s = FitSummary { num_nodes: 13, reasons, prefilter_message: None };
        assert_eq!(
            s.message(),
            "0/13 nodes are available: 1 node(s) had untolerated taint(s), 10 Too many pods, 2 Insufficient cpu."
        );
    }

    #[test]
    fn nodes_to_find_follows_the_percentage_with_a_floor_of_100_nodes() {
        assert_eq!(nodes_to_find(None, 5000), 5000);
        assert_eq!(nodes_to_find(Some(0), 50), 50);
        assert_eq!(nodes_to_find(Some(0), 5000), 5000, "0 is the default: every node");
        assert_eq!(nodes_to_find(Some(20), 1000), 200);
        assert_eq!(nodes_to_find(Some(10), 5000), 500);
        assert_eq!(nodes_to_find(Some(10), 500), 100);
        assert_eq!(nodes_to_find(Some(100), 500), 500);
    }

    #[test]
    fn a_share_of_nodes_is_searched_from_the_start_index_round_the_end() {
        use crate::builders::{NodeBuilder, PodBuilder, snapshot};
        let nodes: Vec<_> = (0..500).map(|i| NodeBuilder::new(&format!("n{i}")).build()).collect();
        let snap = snapshot(&nodes, &[]);
        let mut profile = crate::config::default_profile("custom-scheduler");
        profile.percentage_of_nodes_to_score = Some(10);
        let pod = PodBuilder::new("p").info();
        let mut rng = StdRng::seed_from_u64(1);
        let opts = EvaluateOptions { start: 450, ..Default::default() };
        let ev = evaluate(&profile, &pod, &snap, &mut rng, opts.clone());
        let expected: Vec<usize> = (450..500).chain(0..50).collect();
        assert_eq!(ev.feasible, expected);
        assert!(ev.selected.is_some_and(|i| expected.contains(&i)));
        // Every node evaluated: the start index does not matter.
        profile.percentage_of_nodes_to_score = None;
        let ev = evaluate(&profile, &pod, &snap, &mut rng, opts);
        assert_eq!(ev.feasible, (0..500).collect::<Vec<_>>());
    }

    #[test]
    fn select_host_picks_the_maximum_and_spreads_ties() {
        let mut rng = StdRng::seed_from_u64(7);
        assert_eq!(select_host(&[4, 5, 6], &[10, 30, 20], &mut rng), Some(5));
        let mut seen = HashSet::new();
        for _ in 0..200 {
            seen.insert(select_host(&[1, 2, 3], &[5, 5, 1], &mut rng));
        }
        assert_eq!(seen, [Some(1), Some(2)].into_iter().collect());
        assert_eq!(select_host(&[], &[], &mut rng), None);
    }
}
