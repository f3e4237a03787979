//! Per-node inter-pod affinity facts kept across pods: for an incoming pod's labels,
//! namespace and required terms, how many pods on each node match its affinity and
//! anti-affinity terms, which existing pods' required anti-affinity terms select it,
//! and each node's value of every topology key involved. Only nodes whose generation
//! changed are recomputed; a cycle then aggregates integers.

use std::hash::{Hash, Hasher};
use std::sync::Mutex;

use rustc_hash::FxHashMap;

use super::NO_LABELS;
use crate::labels::Labels;
use crate::pod_info::{AffinityTerm, PodInfo};
use crate::snapshot::Snapshot;

/// Value id of a node without the key.
pub const MISSING: u32 = u32::MAX;
const SLOTS: usize = 8;

/// Facts of every node for one incoming pod shape.
#[derive(Debug, Default)]
pub struct Facts {
    /// Topology keys by id.
    pub keys: Vec<String>,
    key_ids: FxHashMap<String, u32>,
    /// Value ids per key.
    value_ids: Vec<FxHashMap<String, u32>>,
    /// `values[k][i]`: node `i`'s value id for key `k`, or [`MISSING`].
    pub values: Vec<Vec<u32>>,
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
    /// Number of distinct values seen for key `k`.
    pub fn value_count(&self, k: u32) -> usize {
        self.value_ids.get(k as usize).map_or(0, FxHashMap::len)
    }

    fn key(&mut self, key: &str, snapshot: &Snapshot) -> u32 {
        register_key(&mut self.keys, &mut self.key_ids, &mut self.value_ids, &mut self.values, key, snapshot)
    }
}

/// The id of a topology key, registering it (and every node's value of it) when new.
fn register_key(
    keys: &mut Vec<String>,
    key_ids: &mut FxHashMap<String, u32>,
    value_ids: &mut Vec<FxHashMap<String, u32>>,
    values: &mut Vec<Vec<u32>>,
    key: &str,
    snapshot: &Snapshot,
) -> u32 {
    if let Some(k) = key_ids.get(key) {
        return *k;
    }
    let k = keys.len() as u32;
    keys.push(key.to_string());
    key_ids.insert(key.to_string(), k);
    let mut ids = FxHashMap::default();
    let column =
        snapshot.nodes.iter().map(|node| node.labels.get(key).map_or(MISSING, |v| intern(&mut ids, v))).collect();
    value_ids.push(ids);
    values.push(column);
    k
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
    key: u64,
    epoch: u64,
    used: u64,
    facts: Facts,
}

/// The cache a plugin instance keeps.
#[derive(Debug, Default)]
pub struct AffinityCache {
    slots: Vec<Slot>,
    tick: u64,
}

fn key_of(pod: &PodInfo, ns_labels: &Labels, affinity: &[AffinityTerm], anti: &[AffinityTerm]) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    pod.namespace.hash(&mut h);
    pod.labels.hash(&mut h);
    ns_labels.hash(&mut h);
    affinity.hash(&mut h);
    anti.hash(&mut h);
    h.finish()
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
        let key = key_of(pod, ns_labels, affinity, anti);
        let mut guard = cache.lock().unwrap_or_else(|e| e.into_inner());
        guard.tick += 1;
        let tick = guard.tick;
        let slots = &mut guard.slots;
        let idx = crate::lru::slot_index(slots, SLOTS, key, |s| s.key, |s| s.used);
        let slot = &mut slots[idx];
        let n = snapshot.nodes.len();
        if slot.key != key || slot.epoch != snapshot.epoch || slot.facts.generations.len() != n {
            *slot = Slot { key, epoch: snapshot.epoch, used: tick, facts: Facts::default() };
            let fa = &mut slot.facts;
            fa.generations = vec![0; n];
            fa.existing = vec![Vec::new(); n];
            fa.affinity = vec![0; n];
            fa.anti = vec![0; n * anti.len()];
            fa.affinity_keys = affinity.iter().map(|t| fa.key(&t.topology_key, snapshot)).collect();
            fa.anti_keys = anti.iter().map(|t| fa.key(&t.topology_key, snapshot)).collect();
        }
        slot.used = tick;
        let fa = &mut slot.facts;
        let terms = anti.len();
        for i in 0..n {
            if fa.generations[i] == snapshot.generations[i] {
                continue;
            }
            let node = &snapshot.nodes[i];
            for k in 0..fa.keys.len() {
                let v = match node.labels.get(&fa.keys[k]) {
                    Some(v) => intern(&mut fa.value_ids[k], v),
                    None => MISSING,
                };
                fa.values[k][i] = v;
            }
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
            fa.generations[i] = snapshot.generations[i];
        }
        f(fa)
    }
}

/// Per-node score contributions for one incoming pod shape, with interned keys and values.
#[derive(Debug, Default)]
struct ScoreSlot {
    key: u64,
    epoch: u64,
    used: u64,
    generations: Vec<u64>,
    /// Per node: (key id, delta) pairs.
    contributions: Vec<Vec<(u32, i64)>>,
    keys: Vec<String>,
    key_ids: FxHashMap<String, u32>,
    value_ids: Vec<FxHashMap<String, u32>>,
    /// `values[k][i]`: node `i`'s value id for key `k`, or [`MISSING`].
    values: Vec<Vec<u32>>,
}

impl ScoreSlot {
    fn key_id(&mut self, key: &str, snapshot: &Snapshot) -> u32 {
        register_key(&mut self.keys, &mut self.key_ids, &mut self.value_ids, &mut self.values, key, snapshot)
    }
}

/// Summed topology scores: `sums[k][v]` for key id `k` and value id `v`, and each node's value ids.
#[derive(Debug, Default)]
pub struct TopologyScores {
    /// Dense sums by key, then value id.
    pub sums: Vec<Vec<i64>>,
    /// Whether any key received a contribution.
    pub any: bool,
    /// `values[k][i]`.
    pub values: std::sync::Arc<Vec<Vec<u32>>>,
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
        key: u64,
        snapshot: &Snapshot,
        contribution: impl Fn(&crate::node_info::NodeInfo) -> Vec<(String, i64)>,
    ) -> TopologyScores {
        self.tick += 1;
        let tick = self.tick;
        let idx = crate::lru::slot_index(&mut self.slots, SLOTS, key, |s| s.key, |s| s.used);
        let slot = &mut self.slots[idx];
        let n = snapshot.nodes.len();
        if slot.key != key || slot.epoch != snapshot.epoch || slot.generations.len() != n {
            *slot = ScoreSlot {
                key,
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
            for k in 0..slot.keys.len() {
                slot.values[k][i] = match node.labels.get(&slot.keys[k]) {
                    Some(v) => intern(&mut slot.value_ids[k], v),
                    None => MISSING,
                };
            }
            let mut pairs = Vec::new();
            for (k, delta) in contribution(node) {
                pairs.push((slot.key_id(&k, snapshot), delta));
            }
            slot.contributions[i] = pairs;
            slot.generations[i] = snapshot.generations[i];
        }
        let mut out = TopologyScores {
            sums: slot.value_ids.iter().map(|ids| vec![0; ids.len()]).collect(),
            any: false,
            values: std::sync::Arc::new(Vec::new()),
        };
        for i in 0..n {
            for &(k, delta) in &slot.contributions[i] {
                let v = slot.values[k as usize][i];
                if v != MISSING {
                    out.sums[k as usize][v as usize] += delta;
                    out.any = true;
                }
            }
        }
        out.values = std::sync::Arc::new(slot.values.clone());
        out
    }
}
