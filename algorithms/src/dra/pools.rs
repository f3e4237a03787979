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
    /// A device of the pool allows multiple allocations (one device may serve several
    /// requests).
    pub shareable: bool,
}

/// A pool's shared counters and every device of the pool (on whichever node) that
/// consumes from them: what an allocation may still consume is the sets' values less
/// what the allocated ones consume.
#[derive(Debug, Default)]
pub struct PoolCounters {
    /// Every counter of every set, as (set, counter), in order.
    pub names: Vec<(String, String)>,
    /// Their values.
    pub values: Vec<i128>,
    /// The devices consuming counters, each with what it consumes (by counter index).
    pub consumers: Vec<(Arc<Device>, Vec<(usize, i128)>)>,
    /// Consumers by device (its address).
    by_device: rustc_hash::FxHashMap<usize, usize>,
}

impl PoolCounters {
    /// What a device of the pool consumes, by counter index.
    pub fn uses(&self, device: &Arc<Device>) -> &[(usize, i128)] {
        self.by_device.get(&(Arc::as_ptr(device) as usize)).map_or(&[], |&i| self.consumers[i].1.as_slice())
    }
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
                shareable: false,
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
        let shareable = slices.iter().flat_map(|s| s.devices.iter()).any(|d| d.multi);
        let p = Pool { id, incomplete, invalid, slices, key, exclusive, size, counters, shareable };
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
    let mut index: BTreeMap<&str, BTreeMap<&str, usize>> = BTreeMap::new();
    for set in sets.iter().flat_map(|s| s.counter_sets.iter()) {
        if index.contains_key(set.name.as_str()) {
            return Err(format!("duplicate counter set name {}", set.name));
        }
        let mut counters = BTreeMap::new();
        for (name, value) in &set.counters {
            counters.insert(name.as_str(), out.values.len());
            out.names.push((set.name.clone(), name.clone()));
            out.values.push(*value);
        }
        index.insert(set.name.as_str(), counters);
    }
    for device in slices.iter().chain(others).flat_map(|s| s.devices.iter()) {
        let mut uses = Vec::new();
        for used in &device.consumes {
            let Some(set) = index.get(used.set.as_str()) else {
                return Err(format!("counter set {} not found", used.set));
            };
            for (name, amount) in &used.counters {
                let Some(&i) = set.get(name.as_str()) else {
                    return Err(format!("counter {name} not found in counter set {}", used.set));
                };
                uses.push((i, *amount));
            }
        }
        if !device.consumes.is_empty() {
            out.by_device.insert(Arc::as_ptr(device) as usize, out.consumers.len());
            out.consumers.push((device.clone(), uses));
        }
    }
    Ok((!out.values.is_empty() || !out.consumers.is_empty()).then_some(out))
}

/// The pools a node can reach and their devices in search order.
#[derive(Debug, Default)]
pub struct NodeDevices {
    /// The pools.
    pub pools: Vec<Pool>,
    /// Their devices the node can reach.
    pub devices: Vec<Reachable>,
    /// Filter's answers for claims searched on these devices.
    pub memo: super::memo::FitsMemo,
}

/// [`gather`] with the devices listed, kept per node while the slices do not change (and,
/// when slices select nodes by label, while the node's labels do not).
pub fn node_devices(state: &DraState, node: &str, labels: &Labels, partitionable: bool) -> Arc<NodeDevices> {
    let build = || {
        let pools = gather(state, node, labels, partitionable);
        let devices = pools.iter().enumerate().flat_map(|(i, p)| p.devices(i, node, labels)).collect();
        Arc::new(NodeDevices { pools, devices, memo: Default::default() })
    };
    let by_labels = (!state.only_node_local()).then_some(labels);
    let version = state.slices_version() * 2 + u64::from(partitionable);
    if let Some(hit) = state.reach_cache().get(node, version, by_labels) {
        return hit;
    }
    let fresh = build();
    let fresh = state.reach_cache().intern(version, fresh.fingerprint(), fresh);
    state.reach_cache().put(node, version, by_labels, fresh.clone());
    fresh
}

impl NodeDevices {
    /// What tells two nodes' reaches apart at one slice version: the pools (their state
    /// and slices) and every device reached, by identity. Counter sets follow from the
    /// pool's slices.
    fn fingerprint(&self) -> Vec<usize> {
        let mut out = Vec::with_capacity(self.devices.len() + 4 * self.pools.len() + 1);
        for p in &self.pools {
            let flags =
                usize::from(p.incomplete) | usize::from(p.invalid.is_some()) << 1 | usize::from(p.exclusive) << 2;
            out.extend([p.key as usize, flags, p.slices.len()]);
            out.extend(p.slices.iter().map(|s| Arc::as_ptr(s) as usize));
        }
        out.push(self.devices.len());
        out.extend(self.devices.iter().map(|d| Arc::as_ptr(&d.device) as usize));
        out
    }
}
