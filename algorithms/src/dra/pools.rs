//! The pools of devices one node can reach: the slices that serve it, grouped by
//! driver and pool, only the newest generation, with pools that are being updated
//! (fewer slices than `resourceSliceCount`) or invalid (a device name twice) marked.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use super::objects::{Device, NodeScope, Slice};
use super::state::DraState;
use crate::labels::Labels;

/// One pool as the node sees it.
#[derive(Debug)]
pub struct Pool {
    /// `driver/pool`, as messages print it.
    pub id: String,
    /// Fewer slices of its newest generation exist than it announces.
    pub incomplete: bool,
    /// It is invalid: why.
    pub invalid: Option<String>,
    /// The slices serving the node, sorted by name (empty when incomplete or invalid).
    pub slices: Vec<Arc<Slice>>,
    /// The number standing for the pool (see [`super::DeviceId::pool_key`]).
    pub key: u32,
    /// Every device of the pool is local to this node (its slices all name it).
    pub exclusive: bool,
    /// How many devices its slices hold.
    pub size: usize,
}

/// A device the node can reach, with the slice it came from.
#[derive(Debug, Clone)]
pub struct Reachable {
    /// The slice.
    pub slice: Arc<Slice>,
    /// The device.
    pub device: Arc<Device>,
}

impl Pool {
    /// Its devices the node can reach, in slice then device order.
    pub fn devices<'a>(&'a self, node: &'a str, labels: &'a Labels) -> impl Iterator<Item = Reachable> + 'a {
        self.slices.iter().flat_map(move |s| {
            s.devices
                .iter()
                .filter(move |d| d.scope.as_ref().is_none_or(|sc| sc.reaches(node, labels)))
                .map(move |d| Reachable { slice: s.clone(), device: d.clone() })
        })
    }
}

/// Whether a slice serves the node.
fn serves(slice: &Slice, node: &str, labels: &Labels) -> bool {
    match &slice.scope {
        NodeScope::PerDevice => slice.devices.iter().any(|d| d.scope.as_ref().is_some_and(|s| s.reaches(node, labels))),
        scope => scope.reaches(node, labels),
    }
}

/// The pools serving a node, sorted by driver then pool name.
pub fn gather(state: &DraState, node: &str, labels: &Labels) -> Vec<Pool> {
    let mut newest: BTreeMap<(&str, &str), Vec<&Arc<Slice>>> = BTreeMap::new();
    for slice in state.slices_for(node) {
        if slice.shared_counters || !serves(slice, node, labels) {
            continue;
        }
        let list = newest.entry((slice.driver.as_str(), slice.pool.as_str())).or_default();
        match list.first().map(|s| s.generation) {
            Some(g) if g > slice.generation => {}
            Some(g) if g < slice.generation => *list = vec![slice],
            _ => list.push(slice),
        }
    }
    let mut pools = Vec::with_capacity(newest.len());
    for ((driver, pool), mut slices) in newest {
        let generation = slices.first().map(|s| s.generation).unwrap_or_default();
        let count = slices.first().map(|s| s.slice_count).unwrap_or_default();
        let id = format!("{driver}/{pool}");
        let mut incomplete = false;
        if i64::try_from(slices.len()).unwrap_or(i64::MAX) != count {
            let all: Vec<&Arc<Slice>> = state.pool_slices(driver, pool).collect();
            if all.iter().any(|s| s.generation > generation) {
                continue;
            }
            let same = all.iter().filter(|s| s.generation == generation).count();
            incomplete = i64::try_from(same).unwrap_or(i64::MAX) != count;
        }
        slices.sort_by(|a, b| a.name.cmp(&b.name));
        let mut seen = HashSet::new();
        let invalid = slices
            .iter()
            .flat_map(|s| s.devices.iter())
            .find(|d| !seen.insert(d.name.as_str()))
            .map(|d| format!("duplicate device name {}", d.name));
        let exclusive = !incomplete && slices.iter().all(|s| s.scope == NodeScope::Node(node.to_string()));
        let slices: Vec<Arc<Slice>> =
            if incomplete || invalid.is_some() { Vec::new() } else { slices.into_iter().cloned().collect() };
        let size = slices.iter().map(|s| s.devices.len()).sum();
        let key = super::state::pool_key_of(driver, pool);
        pools.push(Pool { id, incomplete, invalid, slices, key, exclusive, size });
    }
    pools
}

/// The pools a node can reach and their devices in search order.
#[derive(Debug, Default)]
pub struct NodeDevices {
    /// The pools.
    pub pools: Vec<Pool>,
    /// Their devices the node can reach.
    pub devices: Vec<Reachable>,
}

/// [`gather`] with the devices listed, kept per node while the slices do not change
/// (when every slice names its node, so that node labels cannot matter).
pub fn node_devices(state: &DraState, node: &str, labels: &Labels) -> Arc<NodeDevices> {
    let build = || {
        let pools = gather(state, node, labels);
        let devices = pools.iter().flat_map(|p| p.devices(node, labels)).collect();
        Arc::new(NodeDevices { pools, devices })
    };
    if !state.only_node_local() {
        return build();
    }
    let version = state.slices_version();
    if let Some(hit) = state.reach_cache().get(node, version) {
        return hit;
    }
    let fresh = build();
    state.reach_cache().put(node, version, fresh.clone());
    fresh
}
