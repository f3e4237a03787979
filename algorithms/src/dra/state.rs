//! The DRA objects of the cluster with the allocations the scheduler assumed on top of
//! what the API server last said, and the indexes the allocator reads: the slices each
//! node can reach, and how many claims hold each device.
//!
//! Like the volume store, the maps are persistent: a snapshot's copy costs constant time.
//!
//! One file though long: every change (a claim stored, assumed, restored or written, a
//! slice stored) keeps the indexes in step (holders, shares, held counts per pool, pool
//! stamps, what nodes reach), and their invariants are checked in one place.

use std::sync::Arc;

use imbl::shared_ptr::DefaultSharedPtr;
use k8s_openapi::api::resource::v1 as api;

use super::objects::{Claim, DeviceClass, Slice};

/// A resource version as the number kube-apiserver makes it (0 when it is not one).
fn resource_version(rv: &str) -> u64 {
    rv.parse().unwrap_or(0)
}

/// Pool stamps, unique across every copy of every state (a pool never changed has 0).
static STAMPS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

type HashMap<K, V> = imbl::GenericHashMap<K, V, rustc_hash::FxBuildHasher, DefaultSharedPtr>;
type Key = Arc<str>;

/// A device's identity: driver, pool and device name, with a number standing for the
/// three (the same for equal names, process-wide) that hashing and comparing use.
#[derive(Debug, Clone)]
pub struct DeviceId {
    /// The driver.
    pub driver: Arc<str>,
    /// The pool.
    pub pool: Arc<str>,
    /// The device.
    pub device: Arc<str>,
    key: u32,
    pool_key: u32,
}

static DEVICE_KEYS: std::sync::LazyLock<std::sync::RwLock<rustc_hash::FxHashMap<String, u32>>> =
    std::sync::LazyLock::new(Default::default);

fn device_key(driver: &str, pool: &str, device: &str) -> u32 {
    let text = format!("{driver}\u{0}{pool}\u{0}{device}");
    if let Some(k) = DEVICE_KEYS.read().unwrap_or_else(|e| e.into_inner()).get(&text) {
        return *k;
    }
    let mut map = DEVICE_KEYS.write().unwrap_or_else(|e| e.into_inner());
    let next = u32::try_from(map.len()).unwrap_or(u32::MAX);
    *map.entry(text).or_insert(next)
}

impl PartialEq for DeviceId {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl Eq for DeviceId {}

impl std::hash::Hash for DeviceId {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.key.hash(state);
    }
}

impl DeviceId {
    /// The id from its parts.
    pub fn new(driver: &str, pool: &str, device: &str) -> Self {
        DeviceId {
            driver: driver.into(),
            pool: pool.into(),
            device: device.into(),
            key: device_key(driver, pool, device),
            pool_key: pool_key_of(driver, pool),
        }
    }

    /// The number standing for this device.
    pub fn key(&self) -> u32 {
        self.key
    }

    /// The number standing for its driver and pool.
    pub fn pool_key(&self) -> u32 {
        self.pool_key
    }
}

/// The number standing for a driver's pool.
pub(crate) fn pool_key_of(driver: &str, pool: &str) -> u32 {
    device_key(driver, pool, "")
}

impl std::fmt::Display for DeviceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.driver, self.pool, self.device)
    }
}

/// The devices an allocation holds for itself (not those taken with admin access, which
/// consume nothing, nor shares of devices allowing multiple allocations).
pub fn held_devices(allocation: &api::AllocationResult) -> impl Iterator<Item = DeviceId> + '_ {
    results(allocation)
        .filter(|r| r.admin_access != Some(true) && r.share_id.is_none())
        .map(|r| DeviceId::new(&r.driver, &r.pool, &r.device))
}

fn results(allocation: &api::AllocationResult) -> impl Iterator<Item = &api::DeviceRequestAllocationResult> {
    allocation.devices.iter().flat_map(|d| d.results.iter().flatten())
}

/// The shares of one device allowing multiple allocations: how many, and the capacity
/// they consume together (by capacity name, in nano units).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Shares {
    /// Allocation results sharing the device.
    pub count: u32,
    /// Capacity consumed, by name.
    pub consumed: std::collections::BTreeMap<String, i128>,
}

/// The assumptions about one claim.
#[derive(Debug, Clone)]
struct Assumed {
    /// One a pod whose Reserve built it, oldest first; never empty.
    layers: Vec<Arc<Claim>>,
    /// The newest version a write of this key returned.
    written: Option<u64>,
}

impl Assumed {
    fn effective(&self) -> Option<&Arc<Claim>> {
        self.layers.last()
    }
}

/// ResourceClaims, ResourceSlices, DeviceClasses and ResourceClaimTemplates, with
/// assumed allocations.
#[derive(Debug, Clone, Default)]
pub struct DraState {
    claims: HashMap<Key, Arc<Claim>>,
    /// Claims as Reserve assumed them, one layer a pod (the last in effect, each built on
    /// the ones before it), with the resource version the API server gave a write (`None`
    /// while none returned): the assumption holds until the watch shows that version.
    assumed: HashMap<Key, Assumed>,
    slices: HashMap<Key, Arc<Slice>>,
    classes: HashMap<Key, Arc<DeviceClass>>,
    templates: HashMap<Key, Arc<api::ResourceClaimTemplate>>,
    /// Slices whose devices one node can reach, by node name (slice names, sorted).
    by_node: HashMap<Key, imbl::OrdSet<Key>>,
    /// Slices that select their nodes (selector, all nodes or per device).
    selecting: imbl::OrdSet<Key>,
    /// Slice names by pool (`driver` and `pool` joined by a NUL).
    by_pool: HashMap<Key, imbl::OrdSet<Key>>,
    /// How many claims (as assumed) hold each device.
    in_use: HashMap<DeviceId, u32>,
    /// Shares of devices allowing multiple allocations (as assumed).
    shared: HashMap<DeviceId, Shares>,
    /// How many devices of each pool (by its number) are held.
    pool_held: HashMap<u32, u32>,
    /// Each pool's stamp: taken afresh whenever who holds or shares its devices changes.
    pool_stamps: HashMap<u32, u64>,
    next_version: u64,
    generation: u64,
    classes_version: u64,
    /// Pods' extended resource claims (as the API shows them), by the pod's UID.
    special: HashMap<Key, Key>,
    /// What each node reaches, shared by every copy of the state (entries carry the
    /// slice version they were computed at).
    reach: Arc<ReachCache>,
}

/// Per-node pools and devices, by the slice version (and, when slices select nodes by
/// label, the node labels) they were gathered at.
#[derive(Debug, Default)]
pub struct ReachCache {
    map: std::sync::RwLock<rustc_hash::FxHashMap<Arc<str>, ReachEntry>>,
    /// One copy of each distinct reach at the newest version, by its fingerprint: nodes
    /// reaching the same devices share it.
    interned: std::sync::Mutex<(u64, rustc_hash::FxHashMap<Vec<usize>, Arc<super::pools::NodeDevices>>)>,
}

#[derive(Debug)]
struct ReachEntry {
    version: u64,
    labels: Option<crate::labels::Labels>,
    devices: Arc<super::pools::NodeDevices>,
}

impl ReachCache {
    /// The node's entry if it was gathered at `version` (with these `labels`, when given).
    pub fn get(
        &self,
        node: &str,
        version: u64,
        labels: Option<&crate::labels::Labels>,
    ) -> Option<Arc<super::pools::NodeDevices>> {
        let map = self.map.read().unwrap_or_else(|e| e.into_inner());
        map.get(node).filter(|e| e.version == version && e.labels.as_ref() == labels).map(|e| e.devices.clone())
    }

    /// The copy of `devices` (gathered at `version`) that other nodes reaching the same
    /// devices already share, or `devices` itself, kept for the next.
    pub fn intern(
        &self,
        version: u64,
        fingerprint: Vec<usize>,
        devices: Arc<super::pools::NodeDevices>,
    ) -> Arc<super::pools::NodeDevices> {
        let mut interned = self.interned.lock().unwrap_or_else(|e| e.into_inner());
        if interned.0 > version {
            return devices;
        }
        if interned.0 < version {
            *interned = (version, rustc_hash::FxHashMap::default());
        }
        interned.1.entry(fingerprint).or_insert(devices).clone()
    }

    /// Stores a node's entry.
    pub fn put(
        &self,
        node: &str,
        version: u64,
        labels: Option<&crate::labels::Labels>,
        devices: Arc<super::pools::NodeDevices>,
    ) {
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        if map.get(node).is_some_and(|e| e.version > version) {
            return;
        }
        // Entries of older slice versions are never read again (deleted nodes' among
        // them): the first entry of a newer version clears them.
        if map.values().next().is_some_and(|e| e.version < version) {
            map.retain(|_, e| e.version >= version);
        }
        map.insert(node.into(), ReachEntry { version, labels: labels.cloned(), devices });
    }
}

impl DraState {
    /// Bumped on every change.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// A number that changes whenever any slice does.
    pub fn slices_version(&self) -> u64 {
        self.next_version
    }

    /// Whether every slice names its node (no selector, all-nodes or per-device slices).
    pub fn only_node_local(&self) -> bool {
        self.selecting.is_empty()
    }

    /// The per-node cache of reachable devices.
    pub fn reach_cache(&self) -> &ReachCache {
        &self.reach
    }

    /// A claim by `namespace/name`, as assumed if it is.
    pub fn claim(&self, key: &str) -> Option<&Arc<Claim>> {
        if self.assumed.is_empty() {
            return self.claims.get(key);
        }
        self.assumed.get(key).and_then(Assumed::effective).or_else(|| self.claims.get(key))
    }

    /// A claim as the API server last said, ignoring assumptions.
    pub fn api_claim(&self, key: &str) -> Option<&Arc<Claim>> {
        self.claims.get(key)
    }

    /// Every claim, as assumed.
    pub fn claims(&self) -> impl Iterator<Item = &Arc<Claim>> {
        self.claims.iter().map(|(k, c)| self.assumed.get(k).and_then(Assumed::effective).unwrap_or(c))
    }

    /// A DeviceClass by name.
    pub fn class(&self, name: &str) -> Option<&Arc<DeviceClass>> {
        self.classes.get(name)
    }

    /// Every DeviceClass.
    pub fn classes(&self) -> impl Iterator<Item = &Arc<DeviceClass>> {
        self.classes.values()
    }

    /// A number that changes whenever any DeviceClass does.
    pub fn classes_version(&self) -> u64 {
        self.classes_version
    }

    /// A ResourceClaimTemplate by `namespace/name`.
    pub fn template(&self, key: &str) -> Option<&Arc<api::ResourceClaimTemplate>> {
        self.templates.get(key)
    }

    /// A slice by name.
    pub fn slice(&self, name: &str) -> Option<&Arc<Slice>> {
        self.slices.get(name)
    }

    /// Every slice.
    pub fn slices(&self) -> impl Iterator<Item = &Arc<Slice>> {
        self.slices.values()
    }

    /// The slices a node may reach: those naming it, then those selecting nodes (the
    /// caller checks their selectors), each list in name order; slices of counter sets
    /// are not among them (see [`DraState::pool_slices`]).
    pub fn slices_for(&self, node: &str) -> impl Iterator<Item = &Arc<Slice>> {
        let named = self.by_node.get(node).into_iter().flatten();
        named.chain(self.selecting.iter()).filter_map(|k| self.slices.get(k))
    }

    /// Every slice of a driver's pool, whatever node it serves.
    pub fn pool_slices(&self, driver: &str, pool: &str) -> impl Iterator<Item = &Arc<Slice>> {
        self.by_pool.get(pool_key(driver, pool).as_str()).into_iter().flatten().filter_map(|k| self.slices.get(k))
    }

    /// How many claims hold the device.
    pub fn holders(&self, id: &DeviceId) -> u32 {
        self.in_use.get(id).copied().unwrap_or(0)
    }

    /// The shares of a device allowing multiple allocations, if any.
    pub fn shares(&self, id: &DeviceId) -> Option<&Shares> {
        self.shared.get(id)
    }

    /// How many devices of a pool (by [`DeviceId::pool_key`]) are held.
    pub fn held_in_pool(&self, pool: u32) -> u32 {
        self.pool_held.get(&pool).copied().unwrap_or(0)
    }

    /// Whether any device is held.
    pub fn any_held(&self) -> bool {
        !self.in_use.is_empty()
    }

    /// Counts of (claims, slices, classes, templates).
    pub fn counts(&self) -> [usize; 4] {
        [self.claims.len(), self.slices.len(), self.classes.len(), self.templates.len()]
    }

    /// The stamp of a pool (by [`DeviceId::pool_key`]): equal stamps, in this state or
    /// any other, mean the same holders and shares of the pool's devices.
    pub fn pool_stamp(&self, pool: u32) -> u64 {
        self.pool_stamps.get(&pool).copied().unwrap_or(0)
    }

    /// Gives a pool a stamp no state has had.
    fn stamp(&mut self, pool: u32) {
        self.pool_stamps.insert(pool, STAMPS.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    }

    fn hold(&mut self, claim: Option<&Arc<Claim>>, delta: i64) {
        let Some(allocation) = claim.and_then(|c| c.allocation()) else { return };
        self.share(allocation, delta);
        for id in held_devices(allocation) {
            let before = self.holders(&id);
            let n = i64::from(before) + delta;
            let pool = id.pool_key();
            self.stamp(pool);
            if n <= 0 {
                self.in_use.remove(&id);
            } else {
                self.in_use.insert(id, u32::try_from(n).unwrap_or(u32::MAX));
            }
            // A device counts once in its pool, however many claims hold it.
            let change = i64::from(n > 0) - i64::from(before > 0);
            if change != 0 {
                let held = i64::from(self.held_in_pool(pool)) + change;
                if held <= 0 {
                    self.pool_held.remove(&pool);
                } else {
                    self.pool_held.insert(pool, u32::try_from(held).unwrap_or(u32::MAX));
                }
            }
        }
    }

    /// Counts an allocation's shares of devices allowing multiple allocations.
    fn share(&mut self, allocation: &api::AllocationResult, delta: i64) {
        for r in results(allocation).filter(|r| r.admin_access != Some(true) && r.share_id.is_some()) {
            let id = DeviceId::new(&r.driver, &r.pool, &r.device);
            self.stamp(id.pool_key());
            let entry = self.shared.entry(id.clone()).or_default();
            let count = i64::from(entry.count) + delta;
            entry.count = u32::try_from(count.max(0)).unwrap_or(u32::MAX);
            for (name, q) in r.consumed_capacity.iter().flatten() {
                let amount = crate::quantity::Quantity::parse(&q.0).map(|q| q.nanos()).unwrap_or(0);
                *entry.consumed.entry(name.clone()).or_default() += i128::from(delta) * amount;
            }
            if entry.count == 0 {
                self.shared.remove(&id);
            }
        }
    }

    /// Replaces what a key's effective claim holds: `before` released, then the new one held.
    fn swap_effective(&mut self, key: &str, before: Option<Arc<Claim>>) {
        let after = self.claim(key).cloned();
        // A new version holding what the old one held (a finalizer, a consumer, the
        // assumption giving way to the stored claim) leaves the pools' stamps alone.
        if before.as_ref().and_then(|c| c.allocation()) != after.as_ref().and_then(|c| c.allocation()) {
            self.hold(before.as_ref(), -1);
            self.hold(after.as_ref(), 1);
        }
        self.generation += 1;
    }

    /// Adds or replaces a claim from the API. An assumption goes once the claim reaches
    /// the version its write produced; versions before it (the finalizer written first,
    /// or a watch running late) leave it in place, so the devices stay taken meanwhile.
    pub fn upsert_claim(&mut self, claim: Claim) -> Option<Arc<Claim>> {
        let key: Key = claim.key().into();
        let before = self.claim(&key).cloned();
        let version = resource_version(&claim.resource_version);
        if self.assumed.get(&key).is_some_and(|a| a.written.is_some_and(|w| version >= w)) {
            self.assumed.remove(&key);
        }
        if let Some(uid) = special_owner(&claim) {
            self.special.insert(uid.into(), key.clone());
        }
        let old = self.claims.insert(key.clone(), Arc::new(claim));
        self.swap_effective(&key, before);
        old
    }

    /// The extended resource claim the API shows for a pod (by UID).
    pub fn special_claim(&self, pod_uid: &str) -> Option<&Arc<Claim>> {
        self.special.get(pod_uid).and_then(|k| self.claims.get(k))
    }

    /// Removes a claim (and any assumption about it).
    pub fn remove_claim(&mut self, key: &str) -> Option<Arc<Claim>> {
        let before = self.claim(key).cloned();
        self.assumed.remove(key);
        let old = self.claims.remove(key);
        if let Some(uid) = old.as_deref().and_then(special_owner) {
            self.special.remove(uid);
        }
        self.swap_effective(key, before);
        old
    }

    /// Assumes a claim's new form (an allocation, a consumer added) while its write is in
    /// flight; [`DraState::written`] or [`DraState::restore`] ends that.
    pub fn assume(&mut self, claim: Arc<Claim>) {
        let key: Key = claim.key().into();
        let before = self.claim(&key).cloned();
        match self.assumed.get_mut(&key) {
            Some(a) => a.layers.push(claim),
            None => {
                self.assumed.insert(key.clone(), Assumed { layers: vec![claim], written: None });
            }
        }
        self.swap_effective(&key, before);
    }

    /// The API server stored the assumed claim `assumed` at `version`. The key's
    /// assumption (this one, or a later one built on it for another pod, whose own write
    /// will then conflict and be retried over the new version) holds until the watch
    /// shows that version (at once, if it already has).
    pub fn written(&mut self, assumed: &Arc<Claim>, version: u64) {
        let key = assumed.key();
        let Some(a) = self.assumed.get_mut(key.as_str()) else { return };
        a.written = Some(a.written.map_or(version, |w| w.max(version)));
        self.drop_if_seen(&key);
    }

    /// Drops the key's assumption if the watch already shows the version it waits for.
    fn drop_if_seen(&mut self, key: &str) {
        let Some(version) = self.assumed.get(key).and_then(|a| a.written) else { return };
        if self.claims.get(key).is_some_and(|c| resource_version(&c.resource_version) >= version) {
            let before = self.claim(key).cloned();
            self.assumed.remove(key);
            self.swap_effective(key, before);
        }
    }

    /// Drops one pod's assumption, wherever it is among the key's layers: the ones built
    /// on it keep what they hold (each is a whole claim), and with none left the claim is
    /// as the watch shows it.
    pub fn restore(&mut self, assumed: &Arc<Claim>) {
        let key = assumed.key();
        let Some(a) = self.assumed.get(key.as_str()) else { return };
        let Some(i) = a.layers.iter().position(|l| Arc::ptr_eq(l, assumed)) else { return };
        let before = self.claim(&key).cloned();
        if let Some(a) = self.assumed.get_mut(key.as_str()) {
            a.layers.remove(i);
            if a.layers.is_empty() {
                self.assumed.remove(key.as_str());
            }
        }
        self.swap_effective(&key, before);
        self.drop_if_seen(&key);
    }

    /// Frees the claims (by key) whose every consumer is one of `gone` (pod UIDs), as the
    /// resourceclaim controller deallocates a claim nobody uses any more: each is assumed
    /// with no allocation and no consumers. Returns how many were freed.
    pub fn release_consumers<'a>(&mut self, keys: impl IntoIterator<Item = &'a str>, gone: &[&str]) -> usize {
        let mut freed = 0;
        for key in keys {
            let Some(claim) = self.claim(key).cloned() else { continue };
            let only_gone = claim.reserved_for.iter().all(|c| c.resource == "pods" && gone.contains(&c.uid.as_str()));
            if claim.allocation().is_none() || claim.reserved_for.is_empty() || !only_gone {
                continue;
            }
            self.assume(Arc::new(claim.deallocated()));
            freed += 1;
        }
        freed
    }

    /// Whether a claim is assumed.
    pub fn is_assumed(&self, key: &str) -> bool {
        self.assumed.contains_key(key)
    }

    /// Adds or replaces a slice.
    pub fn upsert_slice(&mut self, mut slice: Slice) -> Option<Arc<Slice>> {
        self.next_version += 1;
        slice.version = self.next_version;
        let key: Key = slice.name.as_str().into();
        let old = self.remove_slice(&key);
        // Slices of counter sets are found through their pool (they serve the nodes the
        // pool's devices serve).
        match &slice.scope {
            _ if !slice.counter_sets.is_empty() => {}
            super::objects::NodeScope::Node(n) => {
                self.by_node.entry(n.as_str().into()).or_default().insert(key.clone());
            }
            _ => {
                self.selecting.insert(key.clone());
            }
        }
        self.by_pool.entry(pool_key(&slice.driver, &slice.pool).into()).or_default().insert(key.clone());
        self.slices.insert(key, Arc::new(slice));
        self.generation += 1;
        old
    }

    /// Removes a slice.
    pub fn remove_slice(&mut self, name: &str) -> Option<Arc<Slice>> {
        let old = self.slices.remove(name)?;
        self.next_version += 1;
        let pool = pool_key(&old.driver, &old.pool);
        if let Some(set) = self.by_pool.get_mut(pool.as_str()) {
            set.remove(name);
            if set.is_empty() {
                self.by_pool.remove(pool.as_str());
            }
        }
        if let super::objects::NodeScope::Node(n) = &old.scope {
            if let Some(set) = self.by_node.get_mut(n.as_str()) {
                set.remove(name);
                if set.is_empty() {
                    self.by_node.remove(n.as_str());
                }
            }
        } else {
            self.selecting.remove(name);
        }
        self.generation += 1;
        Some(old)
    }

    /// Adds or replaces a DeviceClass.
    pub fn upsert_class(&mut self, class: DeviceClass) -> Option<Arc<DeviceClass>> {
        self.generation += 1;
        self.classes_version += 1;
        self.classes.insert(class.name.as_str().into(), Arc::new(class))
    }

    /// Removes a DeviceClass.
    pub fn remove_class(&mut self, name: &str) -> Option<Arc<DeviceClass>> {
        self.generation += 1;
        self.classes_version += 1;
        self.classes.remove(name)
    }

    /// Adds or replaces a ResourceClaimTemplate.
    pub fn upsert_template(&mut self, t: api::ResourceClaimTemplate) -> Option<Arc<api::ResourceClaimTemplate>> {
        let key = format!(
            "{}/{}",
            t.metadata.namespace.as_deref().unwrap_or("default"),
            t.metadata.name.as_deref().unwrap_or_default()
        );
        self.generation += 1;
        self.templates.insert(key.into(), Arc::new(t))
    }

    /// Removes a ResourceClaimTemplate.
    pub fn remove_template(&mut self, key: &str) -> Option<Arc<api::ResourceClaimTemplate>> {
        self.generation += 1;
        self.templates.remove(key)
    }
}

/// The UID of the pod a claim is the extended resource claim of.
pub(crate) fn special_owner(claim: &Claim) -> Option<&str> {
    let annotated = claim.api.metadata.annotations.as_ref().and_then(|a| a.get(super::extended::ANNOTATION));
    let (kind, _, uid) = claim.owner.as_ref()?;
    (annotated.is_some_and(|v| v == "true") && kind == "Pod").then_some(uid.as_str())
}

fn pool_key(driver: &str, pool: &str) -> String {
    format!("{driver}\0{pool}")
}
