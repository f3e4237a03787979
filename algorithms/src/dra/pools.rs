//! The pools of devices one node can reach: the slices that serve it, grouped by
//! driver and pool, only the newest generation, with pools that are being updated
//! (fewer slices than `resourceSliceCount`) or invalid (a device name twice) marked.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use super::objects::{Counters, Device, NodeScope, Slice};
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
    /// The slices with devices serving the node, sorted by name (empty when incomplete
    /// or invalid).
    pub slices: Vec<Arc<Slice>>,
    /// The number standing for the pool (see [`super::DeviceId::pool_key`]).
    pub key: u32,
    /// Every device of the pool is local to this node (its slices all name it).
    pub exclusive: bool,
    /// How many devices its slices hold.
    pub size: usize,
    /// Its shared counters (partitionable devices), when any device consumes some.
    pub counters: Option<Arc<PoolCounters>>,
}

/// A pool's shared counters and every device of the pool (on whichever node) that
/// consumes from them: what an allocation may still consume is the sets' values less
/// what the allocated ones consume.
#[derive(Debug, Default)]
pub struct PoolCounters {
    /// The counter sets by name.
    pub sets: BTreeMap<String, Counters>,
    /// The devices consuming counters.
    pub consumers: Vec<Arc<Device>>,
}

/// A device the node can reach, with the slice it came from.
#[derive(Debug, Clone)]
pub struct Reachable {
    /// The slice.
    pub slice: Arc<Slice>,
    /// The device.
    pub device: Arc<Device>,
    /// Its pool's index in the node's pools.
    pub pool: usize,
}

impl Pool {
    /// Its devices the node can reach, in slice then device order (`index` is the
    /// pool's among the node's pools).
    pub fn devices<'a>(
        &'a self,
        index: usize,
        node: &'a str,
        labels: &'a Labels,
    ) -> impl Iterator<Item = Reachable> + 'a {
        self.slices.iter().flat_map(move |s| {
            s.devices
                .iter()
                .filter(move |d| d.scope.as_ref().is_none_or(|sc| sc.reaches(node, labels)))
                .map(move |d| Reachable { slice: s.clone(), device: d.clone(), pool: index })
        })
    }

    /// Whether a device of the pool declares binding conditions.
    fn binding_conditions(&self) -> bool {
        self.slices.iter().flat_map(|s| s.devices.iter()).any(|d| !d.binding_conditions.is_empty())
    }
}

/// Whether a slice serves the node.
fn serves(slice: &Slice, node: &str, labels: &Labels) -> bool {
    match &slice.scope {
        NodeScope::PerDevice => slice.devices.iter().any(|d| d.scope.as_ref().is_some_and(|s| s.reaches(node, labels))),
        scope => scope.reaches(node, labels),
    }
}

/// Adds a slice to a pool's list, keeping only the newest generation.
fn add<'a>(list: &mut Vec<&'a Arc<Slice>>, slice: &'a Arc<Slice>) {
    match list.first().map(|s| s.generation) {
        Some(g) if g > slice.generation => {}
        Some(g) if g < slice.generation => *list = vec![slice],
        _ => list.push(slice),
    }
}

/// The pools serving a node, sorted by driver then pool name, pools with devices that
/// declare binding conditions last. Without `partitionable` (`DRAPartitionableDevices`)
/// slices with counter sets or per-device node selection are left out.
///
/// Slices publishing counter sets belong to every node their pool's devices serve,
/// whatever node they name themselves.
pub fn gather(state: &DraState, node: &str, labels: &Labels, partitionable: bool) -> Vec<Pool> {
    let mut newest: BTreeMap<(&str, &str), Vec<&Arc<Slice>>> = BTreeMap::new();
    for slice in state.slices_for(node) {
        let gated = slice.scope == NodeScope::PerDevice || !slice.counter_sets.is_empty();
        if (gated && !partitionable) || !slice.counter_sets.is_empty() || !serves(slice, node, labels) {
            continue;
        }
        add(newest.entry((slice.driver.as_str(), slice.pool.as_str())).or_default(), slice);
    }
    if partitionable {
        for ((driver, pool), list) in &mut newest {
            for slice in state.pool_slices(driver, pool).filter(|s| !s.counter_sets.is_empty()) {
                add(list, slice);
            }
        }
    }
    let mut pools = Vec::with_capacity(newest.len());
    let mut waiting = Vec::new();
    for ((driver, pool), mut slices) in newest {
        let generation = slices.first().map(|s| s.generation).unwrap_or_default();
        let count = slices.first().map(|s| s.slice_count).unwrap_or_default();
        let id = format!("{driver}/{pool}");
        let key = super::state::pool_key_of(driver, pool);
        let mut incomplete = false;
        let mut others = Vec::new();
        if i64::try_from(slices.len()).unwrap_or(i64::MAX) != count {
            let all: Vec<&Arc<Slice>> = state.pool_slices(driver, pool).collect();
            if all.iter().any(|s| s.generation > generation) {
                continue;
            }
            let same: Vec<&Arc<Slice>> = all.into_iter().filter(|s| s.generation == generation).collect();
            incomplete = i64::try_from(same.len()).unwrap_or(i64::MAX) != count;
            others = same.into_iter().filter(|s| !slices.iter().any(|t| t.name == s.name)).collect();
        }
        if incomplete {
            let empty = Pool {
                id,
                incomplete,
                invalid: None,
                slices: Vec::new(),
                key,
                exclusive: false,
                size: 0,
                counters: None,
            };
            pools.push(empty);
            continue;
        }
        slices.sort_by(|a, b| a.name.cmp(&b.name));
        let (sets, slices): (Vec<&Arc<Slice>>, Vec<&Arc<Slice>>) =
            slices.into_iter().partition(|s| !s.counter_sets.is_empty());
        let counters = if partitionable { pool_counters(&sets, &slices, &others) } else { Ok(None) };
        let mut invalid = duplicate_device(&slices).err();
        if invalid.is_none() {
            invalid = counters.as_ref().err().cloned();
        }
        let exclusive = slices.iter().chain(&sets).all(|s| s.scope == NodeScope::Node(node.to_string()));
        let slices: Vec<Arc<Slice>> =
            if invalid.is_some() { Vec::new() } else { slices.into_iter().cloned().collect() };
        let size = slices.iter().map(|s| s.devices.len()).sum();
        let counters = counters.ok().flatten().map(Arc::new);
        let p = Pool { id, incomplete, invalid, slices, key, exclusive, size, counters };
        if p.binding_conditions() { waiting.push(p) } else { pools.push(p) }
    }
    pools.extend(waiting);
    pools
}

fn duplicate_device(slices: &[&Arc<Slice>]) -> Result<(), String> {
    let mut seen = HashSet::new();
    match slices.iter().flat_map(|s| s.devices.iter()).find(|d| !seen.insert(d.name.as_str())) {
        Some(d) => Err(format!("duplicate device name {}", d.name)),
        None => Ok(()),
    }
}

/// The pool's counter sets (from `sets`) and the devices consuming them (those of
/// `slices`, serving the node, and of `others`, the pool's slices serving other nodes),
/// checked as kube-scheduler checks them: set names unique, every consumed set and
/// counter published. `None` when nothing publishes or consumes counters.
fn pool_counters(
    sets: &[&Arc<Slice>],
    slices: &[&Arc<Slice>],
    others: &[&Arc<Slice>],
) -> Result<Option<PoolCounters>, String> {
    let mut out = PoolCounters::default();
    for set in sets.iter().flat_map(|s| s.counter_sets.iter()) {
        if out.sets.insert(set.name.clone(), set.counters.clone()).is_some() {
            return Err(format!("duplicate counter set name {}", set.name));
        }
    }
    for device in slices.iter().chain(others).flat_map(|s| s.devices.iter()) {
        for used in &device.consumes {
            let Some(set) = out.sets.get(&used.set) else { return Err(format!("counter set {} not found", used.set)) };
            if let Some(name) = used.counters.keys().find(|k| !set.contains_key(*k)) {
                return Err(format!("counter {name} not found in counter set {}", used.set));
            }
        }
        if !device.consumes.is_empty() {
            out.consumers.push(device.clone());
        }
    }
    Ok((!out.sets.is_empty() || !out.consumers.is_empty()).then_some(out))
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
pub fn node_devices(state: &DraState, node: &str, labels: &Labels, partitionable: bool) -> Arc<NodeDevices> {
    let build = || {
        let pools = gather(state, node, labels, partitionable);
        let devices = pools.iter().enumerate().flat_map(|(i, p)| p.devices(i, node, labels)).collect();
        Arc::new(NodeDevices { pools, devices })
    };
    if !state.only_node_local() {
        return build();
    }
    let version = state.slices_version() * 2 + u64::from(partitionable);
    if let Some(hit) = state.reach_cache().get(node, version) {
        return hit;
    }
    let fresh = build();
    state.reach_cache().put(node, version, fresh.clone());
    fresh
}
