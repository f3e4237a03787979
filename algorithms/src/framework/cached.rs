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
    EvaluateOptions, Evaluation, filter_list, finish_scores, first_pass, nodes_to_find, outside_allowed,
    pre_filter_all, pre_score_all, raw_scores, run_filters, select_host, with_nominated,
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
    recomputed: u64,
    rest_run: u64,
}

/// Node-local filter verdicts and raw scores of one pod signature, kept as flat
/// arrays by node index (struct of arrays: the per-pod scan touches only what it needs).
///
/// An entry is valid while the node at its index has the generation it was computed
/// with: generations are unique across nodes and versions, so a node's change, a
/// node's arrival or departure (which moves indexes) invalidates exactly the entries
/// concerned. Scores that read the cluster-wide image spread are kept apart: they are
/// recomputed when the spread of the pod's own images, or the node count, changes.
#[derive(Default)]
struct Slot {
    used: u64,
    /// The pod's signature text (compared in full on every hit).
    key: Option<Arc<str>>,
    /// Each node's generation when its entry was computed (0: never).
    generations: Vec<u64>,
    /// Per node: 0 when every node-local filter passes, else 1 + the index of the first
    /// failing one's status in `statuses`.
    verdicts: Vec<u32>,
    /// Distinct statuses of the node-local filters.
    statuses: StatusTable,
    /// Raw scores by score plugin, then node: `raw[p][i]`.
    raw: Vec<Vec<i64>>,
    /// The image spread the image-dependent columns were computed with.
    spread: Vec<usize>,
    /// The cluster objects' stamp the entries were computed with
    /// ([`crate::objects::ObjectPart::stamp`]): which extended resources NodeResourcesFit
    /// leaves to DRA, and the devices scoring counts where nodes do not advertise them,
    /// depend on the DeviceClasses and ResourceSlices.
    classes: u64,
    /// How many leading filters the verdicts cover.
    local_filters: usize,
}

impl Slot {
    fn is_for(&self, pod: &PodInfo) -> bool {
        self.key.as_deref() == Some(&*pod.signature_key)
    }

    /// Starts over for `pod` with `n` nodes and `plugins` score columns.
    fn reset(&mut self, pod: &PodInfo, n: usize, plugins: usize) {
        self.key = Some(pod.signature_key.clone());
        self.generations = vec![0; n];
        self.verdicts = vec![0; n];
        self.statuses = StatusTable::default();
        self.raw = vec![vec![0; n]; plugins];
        self.spread.clear();
    }

    /// Follows a change in the node count: entries whose index now holds another node
    /// fail the generation check and are recomputed.
    fn resize(&mut self, n: usize) {
        self.generations.resize(n, 0);
        self.verdicts.resize(n, 0);
        for column in &mut self.raw {
            column.resize(n, 0);
        }
    }
}

/// What image-spread-dependent scores of `pod` read: the node count and how many
/// nodes hold each of its images.
fn image_spread(pod: &PodInfo, snapshot: &Snapshot) -> Vec<usize> {
    let mut out = Vec::with_capacity(pod.images.len() + 1);
    out.push(snapshot.nodes.len());
    out.extend(pod.images.iter().map(|i| snapshot.image_nodes.get(i).copied().unwrap_or(0)));
    out
}

impl EquivalenceCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many (pod, node) node-local entries were computed so far.
    pub fn nodes_recomputed(&self) -> u64 {
        self.recomputed
    }

    /// How many (pod, node) pairs ran the filters after the cached ones so far.
    pub fn nodes_filtered_uncached(&self) -> u64 {
        self.rest_run
    }

    /// The slot for a pod: its own, else a free or the least recently used one.
    fn slot(&mut self, pod: &PodInfo) -> (&mut Slot, &mut u64, &mut u64) {
        self.tick += 1;
        let i = crate::lru::slot_index(&mut self.slots, SIGNATURES, |s| s.is_for(pod), |s| s.used);
        let slot = &mut self.slots[i];
        slot.used = self.tick;
        (slot, &mut self.recomputed, &mut self.rest_run)
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
    // Extenders judge outside the process, so their answers are never cached.
    // A restricted attempt judges a few nodes: nothing to reuse.
    if opts.within.is_some()
        || nodes_to_find(profile.percentage_of_nodes_to_score, n) < n
        || profile.scores.len() > 16
        || profile.extenders.as_ref().is_some_and(|x| x.applies_to(pod))
    {
        return super::evaluate(profile, pod, snapshot, rng, opts);
    }
    let mut ev = Evaluation { num_nodes: n, ..Default::default() };
    let t0 = std::time::Instant::now();
    let pre = pre_filter_all(profile, pod, snapshot, &mut ev, n, &|k| k);
    ev.pre_filter_seconds = t0.elapsed().as_secs_f64();
    let Some((fstates, allowed)) = pre else { return ev };

    // Node-local filters form the leading run of the profile; the rest always run. A
    // filter the pod's PreFilter skipped runs for no node, so it does not end the run.
    let local_filters =
        profile.filters.iter().zip(&fstates).take_while(|(f, state)| f.node_local() || state.is_none()).count();
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
                ev.error = Some(super::run::pre_score_error(st));
                return ev;
            }
        }
    }

    let plugins = profile.scores.len();
    let (cache, recomputed, rest_run) = cache.slot(pod);
    // Statuses with details are never shared; start over before they pile up.
    let classes = snapshot.objects.stamp();
    if !cache.is_for(pod)
        || cache.raw.len() != plugins
        || cache.statuses.len() > 2 * n + 64
        || cache.classes != classes
        || cache.local_filters != local_filters
    {
        cache.reset(pod, n, plugins);
        cache.classes = classes;
        cache.local_filters = local_filters;
    } else if cache.generations.len() != n {
        cache.resize(n);
    }
    let spread = image_spread(pod, snapshot);
    let spread_changed = cache.spread != spread;
    cache.spread = spread;
    let stale: Vec<usize> = cache
        .generations
        .iter()
        .zip(&snapshot.generations)
        .enumerate()
        .filter(|(_, (c, s))| c != s)
        .map(|(i, _)| i)
        .collect();
    *recomputed += stale.len() as u64;
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
    if spread_changed && stale.len() < n {
        // Only the image-spread columns of nodes that kept their entries are out of date.
        for &p in local_scores.iter().filter(|&&p| profile.scores[p].plugin.reads_image_spread()) {
            let Some(Some(state)) = &local_states[p] else { continue };
            let plugin = &profile.scores[p].plugin;
            let column = map_nodes(n, |i| {
                if cache.verdicts[i] == 0 { plugin.score_at(state, pod, &snapshot.nodes[i], snapshot, i) } else { 0 }
            });
            cache.raw[p] = column;
        }
    }

    // Nodes with nominated pods the pod must leave room for: the first of the two
    // passes runs fresh (the cached verdict is the second).
    let mut nominated_fail: std::collections::HashMap<usize, Status> = std::collections::HashMap::new();
    for name in snapshot.nominated.keys() {
        let Some(&i) = snapshot.index.get(name) else { continue };
        if let Some(with) = with_nominated(pod, &snapshot.nodes[i], snapshot) {
            let st = first_pass(&profile.filters, &fstates, pod, with, (i, snapshot), profile.details);
            if !st.is_success() {
                nominated_fail.insert(i, st);
            }
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
        } else if !nominated_fail.is_empty()
            && let Some(st) = nominated_fail.remove(&i)
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
        *rest_run += passed.len() as u64;
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
    let st = run_filters(&profile.filters, states, pod, node, index, profile.details);
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
    run_filters(&profile.filters[from..], &states[from..], pod, node, index, profile.details)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::{NodeBuilder, PodBuilder, snapshot};
    use crate::config::default_profile;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn run(profile: &Profile, pod: &PodInfo, snap: &Snapshot, cache: &mut EquivalenceCache) -> Evaluation {
        let mut rng = StdRng::seed_from_u64(1);
        evaluate_cached(profile, pod, snap, &mut rng, EvaluateOptions::default(), cache)
    }

    fn nodes(n: usize) -> Vec<k8s_openapi::api::core::v1::Node> {
        (0..n).map(|i| NodeBuilder::new(&format!("n{i}")).capacity("4", "8Gi", "110").build()).collect()
    }

    #[test]
    fn a_label_or_image_change_on_one_node_recomputes_that_node_only() {
        let profile = default_profile("s");
        let mut snap = snapshot(&nodes(50), &[]);
        let pod = PodInfo::from_pod(&PodBuilder::new("p").req("100m", "100Mi").images(&["app:1"]).build()).unwrap();
        let mut cache = EquivalenceCache::new();
        run(&profile, &pod, &snap, &mut cache);
        assert_eq!(cache.nodes_recomputed(), 50);
        run(&profile, &pod, &snap, &mut cache);
        assert_eq!(cache.nodes_recomputed(), 50, "nothing changed");

        // A label on node 3, then an image the pod does not use on node 4.
        let mut node = (*snap.nodes[3]).clone();
        let mut fresh = node.clone();
        fresh.labels.insert("k".into(), "v".into());
        node.update_node(fresh);
        snap.replace_node(3, Arc::new(node));
        let mut node = (*snap.nodes[4]).clone();
        let mut fresh = node.clone();
        fresh.images.push(("other:1".into(), 500 << 20));
        node.update_node(fresh);
        snap.replace_node(4, Arc::new(node));
        snap.refresh_images();
        run(&profile, &pod, &snap, &mut cache);
        assert_eq!(cache.nodes_recomputed(), 52);

        // A node joins: only it is computed.
        let mut all = snap.nodes.clone();
        let joined = NodeBuilder::new("joined").capacity("4", "8Gi", "110").build();
        all.push(Arc::new(crate::NodeInfo::from_node(&joined).unwrap()));
        snap.set_nodes(all);
        run(&profile, &pod, &snap, &mut cache);
        assert_eq!(cache.nodes_recomputed(), 53);
    }

    #[test]
    fn filters_a_pod_skips_leave_the_rest_cached() {
        // DynamicResources (not node-local) comes before NodeDeclaredFeatures in the
        // default profile: for a pod without claims it is skipped and every filter is
        // served from the cache.
        let profile = default_profile("s");
        let snap = snapshot(&nodes(50), &[]);
        let pod = PodInfo::from_pod(&PodBuilder::new("p").req("100m", "100Mi").build()).unwrap();
        let mut cache = EquivalenceCache::new();
        let first = run(&profile, &pod, &snap, &mut cache);
        run(&profile, &pod, &snap, &mut cache);
        assert_eq!(cache.nodes_filtered_uncached(), 0);
        assert_eq!(cache.nodes_recomputed(), 50, "computed once, then reused");
        let plain =
            super::super::evaluate(&profile, &pod, &snap, &mut StdRng::seed_from_u64(1), EvaluateOptions::default());
        assert_eq!(first.feasible, plain.feasible);
    }

    #[test]
    fn the_pods_own_image_spreading_refreshes_image_scores_everywhere() {
        let profile = default_profile("s");
        let mut built = nodes(4);
        built[0] = NodeBuilder::new("n0").capacity("4", "8Gi", "110").image(&["app:1"], 800 << 20).build();
        let mut snap = snapshot(&built, &[]);
        let pod = PodInfo::from_pod(&PodBuilder::new("p").req("100m", "100Mi").images(&["app:1"]).build()).unwrap();
        let mut cache = EquivalenceCache::new();
        let before = run(&profile, &pod, &snap, &mut cache);
        // Node 1 pulls the image: node 0's image score rises with the spread too.
        let mut node = (*snap.nodes[1]).clone();
        let mut fresh = node.clone();
        fresh.images.push(("app:1".into(), 800 << 20));
        node.update_node(fresh);
        snap.replace_node(1, Arc::new(node));
        snap.refresh_images();
        let cached = run(&profile, &pod, &snap, &mut cache);
        let mut rng = StdRng::seed_from_u64(1);
        let plain = super::super::evaluate(&profile, &pod, &snap, &mut rng, EvaluateOptions::default());
        assert_eq!(cached.totals, plain.totals);
        assert_ne!(cached.totals[0], before.totals[0], "node 0's score follows the spread");
    }

    #[test]
    fn a_slot_is_hit_only_by_an_equal_key_even_when_hashes_collide() {
        let profile = default_profile("s");
        let snap = snapshot(&nodes(3), &[]);
        let small = PodInfo::from_pod(&PodBuilder::new("a").req("1", "1Gi").build()).unwrap();
        let mut big = PodInfo::from_pod(&PodBuilder::new("b").req("5", "1Gi").build()).unwrap();
        big.signature = small.signature;
        let mut cache = EquivalenceCache::new();
        assert_eq!(run(&profile, &small, &snap, &mut cache).feasible.len(), 3);
        let ev = run(&profile, &big, &snap, &mut cache);
        assert!(ev.feasible.is_empty(), "a 5-CPU pod fits no 4-CPU node");
    }
}
