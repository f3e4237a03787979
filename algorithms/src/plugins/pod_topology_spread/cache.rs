//! Per-node spreading facts kept across pods: for a set of constraints (and the pod
//! fields they depend on), each node's domain value, whether its domains count under
//! the inclusion policies, and how many matching pods it runs. Only nodes whose
//! generation changed are recomputed, and the per-domain sums Filter reads are kept
//! current by taking a changed node's old contribution out and its new one in.

use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap;

use super::{count_matching, has_all_keys, node_included};
use crate::labels::{Labels, NodeSelector};
use crate::pod_info::{PodInfo, SpreadConstraint};
use crate::snapshot::Snapshot;
use crate::taints::Toleration;

/// Value id of a node without the constraint's topology key.
pub const MISSING: u32 = u32::MAX;
const SLOTS: usize = 8;

/// Facts of every node for one set of constraints.
#[derive(Debug, Default)]
pub struct NodeFacts {
    /// Constraints per node (the stride of the flat arrays).
    pub per: usize,
    /// Whether the node has every constraint's key.
    pub has_all: Vec<bool>,
    /// `values[i * per + c]`: the node's value id for constraint `c`, or [`MISSING`].
    pub values: Arc<Vec<u32>>,
    /// Whether the node's domain counts for constraint `c` (inclusion policies).
    pub included: Vec<bool>,
    /// Matching pods on the node for constraint `c`.
    pub counts: Arc<Vec<i64>>,
    /// Value strings by id, per constraint.
    pub names: Vec<Vec<String>>,
    /// Per constraint, by value id: matching pods on the nodes that have every key and
    /// whose domain counts (what Filter sums), kept current node by node.
    pub domain_pods: Vec<Vec<i64>>,
    /// Per constraint, by value id: how many such nodes the domain has.
    pub domain_nodes: Vec<Vec<i64>>,
    /// Whether node `i` is in `domain_pods` and `domain_nodes`.
    counted: Vec<bool>,
    ids: Vec<FxHashMap<String, u32>>,
    generations: Vec<u64>,
}

impl NodeFacts {
    /// The id of `value` for constraint `c`, interning it.
    pub fn intern(&mut self, c: usize, value: &str) -> u32 {
        if let Some(id) = self.ids[c].get(value) {
            return *id;
        }
        let id = self.names[c].len() as u32;
        self.ids[c].insert(value.to_string(), id);
        self.names[c].push(value.to_string());
        self.domain_pods[c].push(0);
        self.domain_nodes[c].push(0);
        id
    }

    /// Adds node `i` to the domain sums (`sign` 1) or takes it out (`sign` -1).
    fn contribute(&mut self, i: usize, sign: i64) {
        self.counted[i] = sign > 0;
        if !self.has_all[i] {
            return;
        }
        for c in 0..self.per {
            let id = self.values[i * self.per + c];
            if id == MISSING || !self.included[i * self.per + c] {
                continue;
            }
            self.domain_pods[c][id as usize] += sign * self.counts[i * self.per + c];
            self.domain_nodes[c][id as usize] += sign;
        }
    }
}

#[derive(Debug, Default)]
struct Slot {
    key: Option<SpreadKey>,
    epoch: u64,
    used: u64,
    facts: NodeFacts,
}

/// The cache a plugin instance keeps.
#[derive(Debug, Default)]
pub struct SpreadCache {
    slots: Vec<Slot>,
    tick: u64,
}

/// Everything the facts depend on besides the nodes.
#[derive(Debug, Clone, PartialEq)]
struct SpreadKey {
    constraints: Vec<SpreadConstraint>,
    namespace: String,
    node_affinity: Option<(Labels, Option<NodeSelector>)>,
    tolerations: Option<Vec<Toleration>>,
}

impl SpreadKey {
    fn new(constraints: &[SpreadConstraint], pod: &PodInfo) -> Self {
        SpreadKey {
            constraints: constraints.to_vec(),
            namespace: pod.namespace.clone(),
            node_affinity: constraints
                .iter()
                .any(|c| c.honor_node_affinity)
                .then(|| (pod.node_selector.clone(), pod.required_node_affinity.clone())),
            tolerations: constraints.iter().any(|c| c.honor_node_taints).then(|| pod.tolerations.clone()),
        }
    }
}

impl SpreadCache {
    /// Brings the facts for these constraints up to date with `snapshot` and passes them to `f`.
    pub fn with_facts<R>(
        cache: &Mutex<SpreadCache>,
        constraints: &[SpreadConstraint],
        pod: &PodInfo,
        snapshot: &Snapshot,
        f: impl FnOnce(&mut NodeFacts) -> R,
    ) -> R {
        let mut guard = cache.lock().unwrap_or_else(|e| e.into_inner());
        let key = SpreadKey::new(constraints, pod);
        guard.tick += 1;
        let tick = guard.tick;
        let slots = &mut guard.slots;
        let idx = crate::lru::slot_index(slots, SLOTS, |s| s.key.as_ref() == Some(&key), |s| s.used);
        let slot = &mut slots[idx];
        let n = snapshot.nodes.len();
        let per = constraints.len();
        if slot.key.as_ref() != Some(&key)
            || slot.epoch != snapshot.epoch
            || slot.facts.generations.len() != n
            || slot.facts.per != per
        {
            *slot = Slot { key: Some(key), epoch: snapshot.epoch, used: tick, facts: NodeFacts::default() };
            let f = &mut slot.facts;
            f.per = per;
            f.has_all = vec![false; n];
            f.values = Arc::new(vec![MISSING; n * per]);
            f.included = vec![false; n * per];
            f.counts = Arc::new(vec![0; n * per]);
            f.names = vec![Vec::new(); per];
            f.domain_pods = vec![Vec::new(); per];
            f.domain_nodes = vec![Vec::new(); per];
            f.counted = vec![false; n];
            f.ids = vec![FxHashMap::default(); per];
            f.generations = vec![0; n];
        }
        slot.used = tick;
        let facts = &mut slot.facts;
        for i in 0..n {
            if facts.generations[i] == snapshot.generations[i] {
                continue;
            }
            if facts.counted[i] {
                facts.contribute(i, -1);
            }
            let node = &snapshot.nodes[i];
            facts.has_all[i] = has_all_keys(node, constraints);
            for (c, con) in constraints.iter().enumerate() {
                let id = match node.labels.get(&con.topology_key) {
                    Some(v) => facts.intern(c, v),
                    None => MISSING,
                };
                if facts.values[i * per + c] != id {
                    Arc::make_mut(&mut facts.values)[i * per + c] = id;
                }
                facts.included[i * per + c] = node_included(con, pod, node);
                let count = count_matching(node, &con.selector, &pod.namespace);
                if facts.counts[i * per + c] != count {
                    Arc::make_mut(&mut facts.counts)[i * per + c] = count;
                }
            }
            facts.contribute(i, 1);
            facts.generations[i] = snapshot.generations[i];
        }
        f(facts)
    }
}
