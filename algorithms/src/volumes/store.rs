//! The storage objects of the cluster, shared by the cache and every snapshot, with the
//! bindings the scheduler assumed on top of what the API server last said.
//!
//! The maps are persistent (structurally shared): a plugin takes a copy of the state for
//! its cycle in constant time and reads it without a lock from every node's Filter,
//! while the cache goes on changing the store (each change copies only a path of the
//! changed map).

use imbl::shared_ptr::DefaultSharedPtr;

/// A persistent hash map with FxHash.
type HashMap<K, V> = imbl::GenericHashMap<K, V, rustc_hash::FxBuildHasher, DefaultSharedPtr>;
/// A persistent ordered set.
type BTreeSet<T> = imbl::OrdSet<T>;
/// A map key: shared, so that copying a map node on write clones no string.
type Key = Arc<str>;
use std::sync::Arc;

use super::objects::{Capacity, CsiDriver, CsiNode, StorageClass, Volume, VolumeClaim};

/// The objects, keyed as the API names them (claims and capacities by `namespace/name`).
#[derive(Debug, Default, Clone)]
pub struct VolumeState {
    claims: HashMap<Key, Arc<VolumeClaim>>,
    volumes: HashMap<Key, Arc<Volume>>,
    classes: HashMap<Key, Arc<StorageClass>>,
    csi_nodes: HashMap<Key, Arc<CsiNode>>,
    drivers: HashMap<Key, Arc<CsiDriver>>,
    capacities: HashMap<Key, Arc<Capacity>>,
    /// Assumed claims with the resource version of the object they were assumed over.
    assumed_claims: HashMap<Key, (Arc<VolumeClaim>, String)>,
    /// Assumed volumes, likewise.
    assumed_volumes: HashMap<Key, (Arc<Volume>, String)>,
    /// Names of volumes without a claimRef, by class (as assumed), for static matching.
    free_by_class: HashMap<Key, BTreeSet<Key>>,
    /// Names of volumes with a claimRef, by the claim's `namespace/name` (as assumed).
    claimed_by: HashMap<Key, BTreeSet<Key>>,
    /// Bumped on every change.
    generation: u64,
}

impl VolumeState {
    /// A claim by `namespace/name`, as assumed if it is.
    pub fn claim(&self, key: &str) -> Option<&Arc<VolumeClaim>> {
        if self.assumed_claims.is_empty() {
            return self.claims.get(key);
        }
        self.assumed_claims.get(key).map(|(c, _)| c).or_else(|| self.claims.get(key))
    }

    /// A volume by name, as assumed if it is.
    pub fn volume(&self, name: &str) -> Option<&Arc<Volume>> {
        if self.assumed_volumes.is_empty() {
            return self.volumes.get(name);
        }
        self.assumed_volumes.get(name).map(|(v, _)| v).or_else(|| self.volumes.get(name))
    }

    /// A claim as the API server last said, assumptions aside.
    pub fn api_claim(&self, key: &str) -> Option<&Arc<VolumeClaim>> {
        self.claims.get(key)
    }

    /// A volume as the API server last said, assumptions aside.
    pub fn api_volume(&self, name: &str) -> Option<&Arc<Volume>> {
        self.volumes.get(name)
    }

    /// A storage class by name.
    pub fn class(&self, name: &str) -> Option<&Arc<StorageClass>> {
        self.classes.get(name)
    }

    /// A node's CSINode.
    pub fn csi_node(&self, node: &str) -> Option<&Arc<CsiNode>> {
        self.csi_nodes.get(node)
    }

    /// A CSIDriver by name.
    pub fn driver(&self, name: &str) -> Option<&Arc<CsiDriver>> {
        self.drivers.get(name)
    }

    /// Every CSIStorageCapacity.
    pub fn capacities(&self) -> impl Iterator<Item = &Arc<Capacity>> {
        self.capacities.values()
    }

    /// The volumes of a class that no claim references, by name.
    pub fn free_volumes<'a>(&'a self, class: &str) -> impl Iterator<Item = &'a Arc<Volume>> + 'a {
        self.free_by_class.get(class).into_iter().flatten().filter_map(|n| self.volume(n))
    }

    /// The volumes whose claimRef names the claim `namespace/name`, by name.
    pub fn volumes_claimed_by<'a>(&'a self, claim: &str) -> impl Iterator<Item = &'a Arc<Volume>> + 'a {
        self.claimed_by.get(claim).into_iter().flatten().filter_map(|n| self.volume(n))
    }

    /// Counts of claims, volumes, classes, CSINodes, CSIDrivers and capacities.
    pub fn counts(&self) -> [usize; 6] {
        [
            self.claims.len(),
            self.volumes.len(),
            self.classes.len(),
            self.csi_nodes.len(),
            self.drivers.len(),
            self.capacities.len(),
        ]
    }

    /// Changes with every update.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Adds or replaces a claim from the API; an assumption over an older version goes.
    pub fn upsert_claim(&mut self, claim: VolumeClaim) -> Option<Arc<VolumeClaim>> {
        let key = claim.key();
        if self.assumed_claims.get(key.as_str()).is_some_and(|(_, base)| *base != claim.resource_version) {
            self.assumed_claims.remove(key.as_str());
        }
        self.generation += 1;
        self.claims.insert(key.into(), Arc::new(claim))
    }

    /// Removes a claim.
    pub fn remove_claim(&mut self, key: &str) -> Option<Arc<VolumeClaim>> {
        self.generation += 1;
        self.assumed_claims.remove(key);
        self.claims.remove(key)
    }

    /// Adds or replaces a volume from the API; an assumption over an older version goes.
    pub fn upsert_volume(&mut self, volume: Volume) -> Option<Arc<Volume>> {
        let name = volume.name.clone();
        let before = self.volume(&name).cloned();
        if self.assumed_volumes.get(name.as_str()).is_some_and(|(_, base)| *base != volume.resource_version) {
            self.assumed_volumes.remove(name.as_str());
        }
        self.generation += 1;
        let old = self.volumes.insert(name.as_str().into(), Arc::new(volume));
        self.reindex(&name, before);
        old
    }

    /// Moves a volume's index entries from what was visible (`before`) to what is now.
    fn reindex(&mut self, name: &str, before: Option<Arc<Volume>>) {
        if let Some(b) = before {
            let (map, key) = match &b.claim_ref {
                None => (&mut self.free_by_class, b.class.clone()),
                Some(r) => (&mut self.claimed_by, format!("{}/{}", r.namespace, r.name)),
            };
            if let Some(set) = map.get_mut(key.as_str()) {
                set.remove(name);
                if set.is_empty() {
                    map.remove(key.as_str());
                }
            }
        }
        let Some(now) = self.volume(name).cloned() else { return };
        let (map, key) = match &now.claim_ref {
            None => (&mut self.free_by_class, now.class.clone()),
            Some(r) => (&mut self.claimed_by, format!("{}/{}", r.namespace, r.name)),
        };
        map.entry(key.into()).or_default().insert(name.into());
    }

    /// Removes a volume.
    pub fn remove_volume(&mut self, name: &str) -> Option<Arc<Volume>> {
        self.generation += 1;
        let before = self.volume(name).cloned();
        self.assumed_volumes.remove(name);
        let old = self.volumes.remove(name);
        self.reindex(name, before);
        old
    }

    /// Adds or replaces a storage class.
    pub fn upsert_class(&mut self, class: StorageClass) -> Option<Arc<StorageClass>> {
        self.generation += 1;
        self.classes.insert(class.name.as_str().into(), Arc::new(class))
    }

    /// Removes a storage class.
    pub fn remove_class(&mut self, name: &str) -> Option<Arc<StorageClass>> {
        self.generation += 1;
        self.classes.remove(name)
    }

    /// Adds or replaces a CSINode.
    pub fn upsert_csi_node(&mut self, n: CsiNode) -> Option<Arc<CsiNode>> {
        self.generation += 1;
        self.csi_nodes.insert(n.name.as_str().into(), Arc::new(n))
    }

    /// Removes a CSINode.
    pub fn remove_csi_node(&mut self, name: &str) -> Option<Arc<CsiNode>> {
        self.generation += 1;
        self.csi_nodes.remove(name)
    }

    /// Adds or replaces a CSIDriver.
    pub fn upsert_driver(&mut self, d: CsiDriver) -> Option<Arc<CsiDriver>> {
        self.generation += 1;
        self.drivers.insert(d.name.as_str().into(), Arc::new(d))
    }

    /// Removes a CSIDriver.
    pub fn remove_driver(&mut self, name: &str) -> Option<Arc<CsiDriver>> {
        self.generation += 1;
        self.drivers.remove(name)
    }

    /// Adds or replaces a CSIStorageCapacity.
    pub fn upsert_capacity(&mut self, c: Capacity) -> Option<Arc<Capacity>> {
        self.generation += 1;
        self.capacities.insert(c.key().into(), Arc::new(c))
    }

    /// Removes a CSIStorageCapacity.
    pub fn remove_capacity(&mut self, key: &str) -> Option<Arc<Capacity>> {
        self.generation += 1;
        self.capacities.remove(key)
    }

    /// Assumes a claim as the scheduler is about to write it.
    pub fn assume_claim(&mut self, claim: VolumeClaim) {
        let key = claim.key();
        let base = self.claims.get(key.as_str()).map(|c| c.resource_version.clone()).unwrap_or_default();
        self.generation += 1;
        self.assumed_claims.insert(key.into(), (Arc::new(claim), base));
    }

    /// Assumes a volume as the scheduler is about to write it.
    pub fn assume_volume(&mut self, volume: Volume) {
        let name = volume.name.clone();
        let before = self.volume(&name).cloned();
        let base = self.volumes.get(name.as_str()).map(|v| v.resource_version.clone()).unwrap_or_default();
        self.generation += 1;
        self.assumed_volumes.insert(name.as_str().into(), (Arc::new(volume), base));
        self.reindex(&name, before);
    }

    /// Drops the assumption of a claim (Unreserve), back to the API's version.
    pub fn forget_claim(&mut self, key: &str) {
        self.generation += 1;
        self.assumed_claims.remove(key);
    }

    /// Drops the assumption of a volume (Unreserve), back to the API's version.
    pub fn forget_volume(&mut self, name: &str) {
        self.generation += 1;
        let before = self.volume(name).cloned();
        self.assumed_volumes.remove(name);
        self.reindex(name, before);
    }

    /// Whether a claim's current state is an assumption not yet seen from the API.
    pub fn is_assumed_claim(&self, key: &str) -> bool {
        self.assumed_claims.contains_key(key)
    }
}
