//! Per-node inter-pod affinity facts kept across pods: for an incoming pod's labels,
//! namespace and required terms, how many pods on each node match its affinity and
//! anti-affinity terms, which existing pods' required anti-affinity terms select it,
//! and each node's value of every topology key involved. Only nodes whose generation
//! changed are recomputed, and the sums by topology domain that Filter reads are kept
//! current by taking a changed node's old contribution out and its new one in.

use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap;

use super::NO_LABELS;
use crate::labels::Labels;
use crate::pod_info::{AffinityTerm, PodInfo, WeightedAffinityTerm};
use crate::snapshot::Snapshot;

/// Value id of a node without the key.
pub const MISSING: u32 = u32::MAX;
const SLOTS: usize = 8;

/// The per-domain sums over every node, by value id of the key involved.
#[derive(Debug, Default, Clone)]
pub struct Sums {
    /// Existing pods' required anti-affinity terms selecting the pod, per key id.
    pub existing: Vec<Vec<i64>>,
    /// Pods matching every affinity term of the pod, per affinity term.
    pub affinity: Vec<Vec<i64>>,
    /// Pods matching each anti-affinity term, per anti-affinity term.
    pub anti: Vec<Vec<i64>>,
    /// Totals of the three above.
    pub existing_total: i64,
    /// See `existing_total`.
    pub affinity_total: i64,
    /// See `existing_total`.
    pub anti_total: i64,
}

/// Adds `delta` at `id`, growing the vector as value ids appear.
fn bump(counts: &mut Vec<i64>, id: u32, delta: i64) {
    let id = id as usize;
    if counts.len() <= id {
        counts.resize(id + 1, 0);
    }
    counts[id] += delta;
}

/// Facts of every node for one incoming pod shape.
#[derive(Debug, Default)]
pub struct Facts {
    /// Topology keys and every node's value id of each.
    pub topology: TopologyValues,
    /// The sums Filter reads, kept current node by node.
    pub sums: Arc<Sums>,
    /// Whether node `i`'s facts are in `sums`.
    counted: Vec<bool>,
    /// Per node: key ids of existing pods' required anti-affinity terms that select the pod.
    pub existing: Vec<Vec<u32>>,
    /// Per node: pods matching every affinity term of the pod.
    pub affinity: Vec<i64>,
    /// `anti[i * terms + t]`: pods on node `i` matching anti-affinity term `t`.
    pub anti: Vec<i64>,
    /// Key ids of the pod's affinity terms and anti-affinity terms.
    pub affinity_keys: Vec<u32>,
    /// Key ids of the pod's anti-affinity terms.
    pub anti_keys: Vec<u32>,
    generations: Vec<u64>,
}

impl Facts {
    fn key(&mut self, key: &str, snapshot: &Snapshot) -> u32 {
        self.topology.key(key, snapshot)
    }

    /// Adds node `i`'s facts to the sums (`sign` 1) or takes them out (`sign` -1).
    fn contribute(&mut self, i: usize, sign: i64) {
        let sums = Arc::make_mut(&mut self.sums);
        let values = &self.topology.values;
        let value = |k: u32| values[k as usize][i];
        for &k in &self.existing[i] {
            let v = value(k);
            if v != MISSING {
                if sums.existing.len() <= k as usize {
                    sums.existing.resize(k as usize + 1, Vec::new());
                }
                bump(&mut sums.existing[k as usize], v, sign);
                sums.existing_total += sign;
            }
        }
        let aff = self.affinity[i];
        if aff > 0 {
            for (t, &k) in self.affinity_keys.iter().enumerate() {
                let v = value(k);
                if v != MISSING {
                    bump(&mut sums.affinity[t], v, sign * aff);
                    sums.affinity_total += sign * aff;
                }
            }
        }
        let terms = self.anti_keys.len();
        for (t, &k) in self.anti_keys.iter().enumerate() {
            let c = self.anti[i * terms + t];
            let v = value(k);
            if c > 0 && v != MISSING {
                bump(&mut sums.anti[t], v, sign * c);
                sums.anti_total += sign * c;
            }
        }
        self.counted[i] = sign > 0;
    }
}

/// Topology keys by id, and each node's value id of every key.
#[derive(Debug, Default)]
pub struct TopologyValues {
    /// Topology keys by id.
    pub keys: Vec<String>,
    key_ids: FxHashMap<String, u32>,
    /// Value ids per key.
    value_ids: Vec<FxHashMap<String, u32>>,
    /// `values[k][i]`: node `i`'s value id for key `k`, or [`MISSING`]. Shared with the
    /// states that read it; written only where a node's labels changed.
    pub values: Arc<Vec<Vec<u32>>>,
}

impl TopologyValues {
    /// The id of a topology key, registering it (and every node's value of it) when new.
    fn key(&mut self, key: &str, snapshot: &Snapshot) -> u32 {
        if let Some(k) = self.key_ids.get(key) {
            return *k;
        }
        let k = self.keys.len() as u32;
        self.keys.push(key.to_string());
        self.key_ids.insert(key.to_string(), k);
        let mut ids = FxHashMap::default();
        let column =
            snapshot.nodes.iter().map(|node| node.labels.get(key).map_or(MISSING, |v| intern(&mut ids, v))).collect();
        self.value_ids.push(ids);
        Arc::make_mut(&mut self.values).push(column);
        k
    }

    /// Re-reads node `i`'s value of every key.
    fn refresh(&mut self, i: usize, node: &crate::node_info::NodeInfo) {
        for k in 0..self.keys.len() {
            let v = match node.labels.get(&self.keys[k]) {
                Some(v) => intern(&mut self.value_ids[k], v),
                None => MISSING,
            };
            if self.values[k][i] != v {
                Arc::make_mut(&mut self.values)[k][i] = v;
            }
        }
    }

    /// Number of distinct values of each key.
    fn value_counts(&self) -> impl Iterator<Item = usize> + '_ {
        self.value_ids.iter().map(FxHashMap::len)
    }
}

fn intern(ids: &mut FxHashMap<String, u32>, v: &str) -> u32 {
    if let Some(id) = ids.get(v) {
        return *id;
    }
    let id = ids.len() as u32;
    ids.insert(v.to_string(), id);
    id
}

#[derive(Debug, Default)]
struct Slot {
    key: Option<FilterKey>,
    epoch: u64,
    used: u64,
    facts: Facts,
}

/// Everything the filter facts depend on besides the nodes.
#[derive(Debug, Clone, PartialEq)]
struct FilterKey {
    namespace: String,
    labels: Labels,
    ns_labels: Labels,
    affinity: Vec<AffinityTerm>,
    anti: Vec<AffinityTerm>,
}

/// The cache a plugin instance keeps.
#[derive(Debug, Default)]
pub struct AffinityCache {
    slots: Vec<Slot>,
    tick: u64,
}

impl FilterKey {
    fn is(&self, pod: &PodInfo, ns_labels: &Labels, affinity: &[AffinityTerm], anti: &[AffinityTerm]) -> bool {
        self.namespace == pod.namespace
            && self.labels == pod.labels
            && &self.ns_labels == ns_labels
            && self.affinity == affinity
            && self.anti == anti
    }
}

impl AffinityCache {
    /// Brings the facts for this pod shape up to date with `snapshot` and passes them to `f`.
    pub fn with_facts<R>(
        cache: &Mutex<AffinityCache>,
        pod: &PodInfo,
        snapshot: &Snapshot,
        affinity: &[AffinityTerm],
        anti: &[AffinityTerm],
        f: impl FnOnce(&Facts) -> R,
    ) -> R {
        let ns_labels = snapshot.namespace_labels(&pod.namespace);
        let own = |s: &Slot| s.key.as_ref().is_some_and(|k| k.is(pod, ns_labels, affinity, anti));
        let mut guard = cache.lock().unwrap_or_else(|e| e.into_inner());
        guard.tick += 1;
        let tick = guard.tick;
        let slots = &mut guard.slots;
        let idx = crate::lru::slot_index(slots, SLOTS, own, |s| s.used);
        let slot = &mut slots[idx];
        let n = snapshot.nodes.len();
        if !own(slot) || slot.epoch != snapshot.epoch || slot.facts.generations.len() != n {
            let key = FilterKey {
                namespace: pod.namespace.clone(),
                labels: pod.labels.clone(),
                ns_labels: ns_labels.clone(),
                affinity: affinity.to_vec(),
                anti: anti.to_vec(),
            };
            *slot = Slot { key: Some(key), epoch: snapshot.epoch, used: tick, facts: Facts::default() };
            let fa = &mut slot.facts;
            fa.generations = vec![0; n];
            fa.counted = vec![false; n];
            fa.existing = vec![Vec::new(); n];
            fa.affinity = vec![0; n];
            fa.anti = vec![0; n * anti.len()];
            fa.affinity_keys = affinity.iter().map(|t| fa.key(&t.topology_key, snapshot)).collect();
            fa.anti_keys = anti.iter().map(|t| fa.key(&t.topology_key, snapshot)).collect();
            fa.sums = Arc::new(Sums {
                affinity: vec![Vec::new(); affinity.len()],
                anti: vec![Vec::new(); anti.len()],
                ..Default::default()
            });
        }
        slot.used = tick;
        let fa = &mut slot.facts;
        let terms = anti.len();
        for i in 0..n {
            if fa.generations[i] == snapshot.generations[i] {
                continue;
            }
            if fa.counted[i] {
                fa.contribute(i, -1);
            }
            let node = &snapshot.nodes[i];
            fa.topology.refresh(i, node);
            let mut existing = Vec::new();
            for ep in &node.pods_with_required_anti_affinity {
                for t in &ep.required_anti_affinity {
                    if t.matches(pod, ns_labels) {
                        existing.push(fa.key(&t.topology_key, snapshot));
                    }
                }
            }
            fa.existing[i] = existing;
            let mut aff = 0;
            let mut counts = vec![0i64; terms];
            if !affinity.is_empty() || terms > 0 {
                for ep in &node.pods {
                    if !affinity.is_empty() && affinity.iter().all(|t| t.matches(ep, &NO_LABELS)) {
                        aff += 1;
                    }
                    for (t, term) in anti.iter().enumerate() {
                        if term.matches(ep, &NO_LABELS) {
                            counts[t] += 1;
                        }
                    }
                }
            }
            fa.affinity[i] = aff;
            fa.anti[i * terms..(i + 1) * terms].copy_from_slice(&counts);
            fa.contribute(i, 1);
            fa.generations[i] = snapshot.generations[i];
        }
        f(fa)
    }
}

/// Per-node score contributions for one incoming pod shape, with interned keys and values.
#[derive(Debug, Default)]
struct ScoreSlot {
    key: Option<ScoreKey>,
    epoch: u64,
    used: u64,
    generations: Vec<u64>,
    /// Per node: (key id, delta) pairs.
    contributions: Vec<Vec<(u32, i64)>>,
    topology: TopologyValues,
}

/// Summed topology scores: `sums[k][v]` for key id `k` and value id `v`, and each node's value ids.
#[derive(Debug, Default)]
pub struct TopologyScores {
    /// Dense sums by key, then value id.
    pub sums: Vec<Vec<i64>>,
    /// Whether any key received a contribution.
    pub any: bool,
    /// `values[k][i]`.
    pub values: Arc<Vec<Vec<u32>>>,
}

impl TopologyScores {
    /// The raw score of node `i`: the sums of its values over every key.
    pub fn score(&self, i: usize) -> i64 {
        let mut total = 0;
        for (k, sums) in self.sums.iter().enumerate() {
            let v = self.values.get(k).and_then(|c| c.get(i)).copied().unwrap_or(MISSING);
            if v != MISSING {
                total += sums.get(v as usize).copied().unwrap_or(0);
            }
        }
        total
    }
}

/// Everything one pod shape's score contributions depend on besides the nodes.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoreKey {
    /// Whether the pod has preferred terms of its own.
    pub has_own: bool,
    /// hardPodAffinityWeight.
    pub hard: i64,
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's labels.
    pub labels: Labels,
    /// Its namespace's labels.
    pub ns_labels: Labels,
    /// Preferred affinity terms, namespaces resolved.
    pub affinity: Vec<WeightedAffinityTerm>,
    /// Preferred anti-affinity terms, namespaces resolved.
    pub anti: Vec<WeightedAffinityTerm>,
}

/// The scoring cache a plugin instance keeps.
#[derive(Debug, Default)]
pub struct ScoreCache {
    slots: Vec<ScoreSlot>,
    tick: u64,
}

impl ScoreCache {
    /// Refreshes changed nodes' contributions (topology key, delta) with `contribution`
    /// and sums them by the contributing node's value of each key.
    pub fn aggregate(
        &mut self,
        key: ScoreKey,
        snapshot: &Snapshot,
        contribution: impl Fn(&crate::node_info::NodeInfo) -> Vec<(String, i64)>,
    ) -> TopologyScores {
        self.tick += 1;
        let tick = self.tick;
        let idx = crate::lru::slot_index(&mut self.slots, SLOTS, |s| s.key.as_ref() == Some(&key), |s| s.used);
        let slot = &mut self.slots[idx];
        let n = snapshot.nodes.len();
        if slot.key.as_ref() != Some(&key) || slot.epoch != snapshot.epoch || slot.generations.len() != n {
            *slot = ScoreSlot {
                key: Some(key),
                epoch: snapshot.epoch,
                generations: vec![0; n],
                contributions: vec![Vec::new(); n],
                ..Default::default()
            };
        }
        slot.used = tick;
        for i in 0..n {
            if slot.generations[i] == snapshot.generations[i] {
                continue;
            }
            let node = &snapshot.nodes[i];
            slot.topology.refresh(i, node);
            let mut pairs = Vec::new();
            for (k, delta) in contribution(node) {
                pairs.push((slot.topology.key(&k, snapshot), delta));
            }
            slot.contributions[i] = pairs;
            slot.generations[i] = snapshot.generations[i];
        }
        let mut out = TopologyScores {
            sums: slot.topology.value_counts().map(|n| vec![0; n]).collect(),
            any: false,
            values: slot.topology.values.clone(),
        };
        for i in 0..n {
            for &(k, delta) in &slot.contributions[i] {
                let v = slot.topology.values[k as usize][i];
                if v != MISSING {
                    out.sums[k as usize][v as usize] += delta;
                    out.any = true;
                }
            }
        }
        out
    }
}
