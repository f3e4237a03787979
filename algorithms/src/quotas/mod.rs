//! Quotas: scheduler-plugins' ElasticQuota (`scheduling.x-k8s.io/v1alpha1`): one per
//! namespace as CapacityScheduling reads them, and every quota by name for quota trees
//! (`tree`, `runtime`), with what the placed and the waiting pods ask of each.
//!
//! A quota's `min` is what its namespace is guaranteed, its `max` the most its pods may
//! request together. CapacityScheduling (`plugins/capacity_scheduling`) reads them; the
//! cache charges every pod it places (bound or assumed) in a namespace with a quota here
//! and discharges it when the pod leaves. A namespace's quota that arrives after its
//! pods is counted afresh from the placed pods ([`QuotaState::recount`]), so what a
//! namespace uses is always its placed pods' requests, whenever its quota was created;
//! namespaces without a quota cost nothing.

pub mod api;
#[cfg(test)]
mod dra_tests;
pub mod kinds;
pub mod runtime;
#[cfg(test)]
mod tests;
pub mod tree;
#[cfg(test)]
mod tree_tests;

use std::collections::BTreeMap;
use std::sync::Arc;

use imbl::shared_ptr::DefaultSharedPtr;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

pub use api::ElasticQuota;

use crate::dra::DraState;
use crate::objects::{ClusterObjects, ObjectPart};
use crate::quantity::Quantity;
use crate::resource::{CPU, EPHEMERAL_STORAGE, MEMORY, Resource, is_extended_resource_name};

type HashMap<K, V> = imbl::GenericHashMap<K, V, rustc_hash::FxBuildHasher, DefaultSharedPtr>;

/// Nothing, for namespaces without placed pods.
static NOTHING: Resource =
    Resource { milli_cpu: 0, memory: 0, ephemeral_storage: 0, allowed_pod_number: 0, scalar: Vec::new() };

/// One ElasticQuota as the scheduler reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quota {
    /// The quota's name.
    pub name: String,
    /// The namespace it governs (its own).
    pub namespace: String,
    /// What the namespace is guaranteed: a resource `spec.min` does not name is 0.
    pub min: Resource,
    /// The most the namespace may use: a resource `spec.max` does not name is unlimited.
    pub max: Resource,
    /// Its place in a quota tree (Koordinator's labels and annotations).
    pub tree: tree::Place,
}

impl Quota {
    /// Reads an ElasticQuota. Resource names other than CPU, memory, ephemeral storage,
    /// extended resources, huge pages and attachable volumes are not counted (`pods`
    /// among them: pods do not request it).
    pub fn from_api(q: &ElasticQuota) -> Result<Self, String> {
        let namespace = q.metadata.namespace.clone().unwrap_or_default();
        let name = q.metadata.name.clone().unwrap_or_default();
        let empty = BTreeMap::new();
        let min = amounts(q.spec.min.as_ref().unwrap_or(&empty), 0).map_err(|e| format!("spec.min: {e}"))?;
        let max = amounts(q.spec.max.as_ref().unwrap_or(&empty), i64::MAX).map_err(|e| format!("spec.max: {e}"))?;
        let tree = tree::Place::from_api(q)?;
        Ok(Quota { name, namespace, min, max, tree })
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Whether `used` and `request` together exceed `max` in CPU, memory, ephemeral
    /// storage or a named resource the request lists (equal is within).
    pub fn over_max_with(&self, used: &Resource, request: &Resource) -> bool {
        exceeds(request, used, &self.max, i64::MAX)
    }

    /// Whether `used` and `request` together exceed `min` in CPU, memory, ephemeral
    /// storage or a named resource the request lists.
    pub fn over_min_with(&self, used: &Resource, request: &Resource) -> bool {
        exceeds(request, used, &self.min, 0)
    }

    /// Whether `used` exceeds `min` in any resource (one `min` does not name counts once
    /// any of it is used).
    pub fn over_min(&self, used: &Resource) -> bool {
        exceeds(used, &NOTHING, &self.min, 0)
    }
}

/// Whether `a + b` exceeds `limit` in CPU, memory, ephemeral storage, or any named
/// resource `a` lists (`bound` standing for those `limit` does not list, except a
/// DeviceClass's devices, which only a quota naming them limits, as ResourceQuota).
pub fn exceeds(a: &Resource, b: &Resource, limit: &Resource, bound: i64) -> bool {
    a.milli_cpu.saturating_add(b.milli_cpu) > limit.milli_cpu
        || a.memory.saturating_add(b.memory) > limit.memory
        || a.ephemeral_storage.saturating_add(b.ephemeral_storage) > limit.ephemeral_storage
        || a.scalar.iter().any(|(name, v)| {
            let limit = limit.scalar_value(name).or((!crate::dra::charge::is_devices_key(name)).then_some(bound));
            limit.is_some_and(|l| v.saturating_add(b.get(name)) > l)
        })
}

/// Whether a quota counts a resource of this name.
fn counted(name: &str) -> bool {
    matches!(name, CPU | MEMORY | EPHEMERAL_STORAGE)
        || is_extended_resource_name(name)
        || name.starts_with("hugepages-")
        || name.starts_with("attachable-volumes-")
        || name.starts_with("kubernetes.io/")
}

/// The amounts of a resource list; CPU, memory and ephemeral storage it does not name
/// are `missing`.
fn amounts(list: &BTreeMap<String, ApiQuantity>, missing: i64) -> Result<Resource, String> {
    let mut r = Resource { milli_cpu: missing, memory: missing, ephemeral_storage: missing, ..Default::default() };
    for (name, q) in list.iter().filter(|(n, _)| counted(n)) {
        let q = Quantity::parse_non_negative(&q.0).map_err(|e| format!("{name}: {e}"))?;
        r.set(name, q);
    }
    Ok(r)
}

/// The quotas and what each namespace's placed pods request: a part of the cluster
/// objects.
#[derive(Debug, Clone, Default)]
pub struct QuotaState {
    /// The quota of each namespace that has one.
    quotas: HashMap<String, Arc<Quota>>,
    /// What the placed pods of each namespace with a quota request together.
    used: HashMap<String, Resource>,
    /// Namespaces whose quota arrived since their placed pods were last counted.
    fresh: Vec<String>,
    /// Every quota by name, for quota trees (a name is read once).
    named: HashMap<String, Arc<Quota>>,
    /// What the placed pods of each quota of a tree request together (a pod's quota is
    /// the one its label names, else its namespace's).
    used_by: HashMap<String, Resource>,
    /// What the pods waiting in the scheduling queue ask of each quota of a tree.
    waiting: HashMap<String, Resource>,
    /// What the placed pods that may not be evicted for quotas
    /// ([`tree::PREEMPTIBLE_LABEL`]) request of each quota of a tree.
    non_preemptible: HashMap<String, Resource>,
    /// The quotas by name changed since the placed pods were last counted against them
    /// (a pod's quota may have changed with them: all are counted afresh).
    recount_tree: bool,
    /// The ResourceClaims of placed pods some quota governs, by key: each counted once,
    /// however many of those pods share it (see [`crate::dra::charge`]).
    claims: HashMap<String, ClaimCharge>,
    /// The placed pods counted, by key, with the claims each uses as they were counted:
    /// a pod is counted once and taken back once, however many plugins tell of it (both
    /// quota plugins' dry runs, a gang's victims in a scratch snapshot).
    pod_claims: HashMap<String, Vec<String>>,
    /// Claims of placed pods not allocated when their pod was placed (Reserve allocates
    /// them just after the pod is assumed; a watched pod may arrive before its claim).
    unsettled: Vec<String>,
    /// The DRA objects' generation when the unsettled claims were last looked at.
    dra_seen: u64,
}

/// A claim of placed pods, as its quotas count it.
#[derive(Debug, Clone, PartialEq)]
struct ClaimCharge {
    /// The namespace whose quota counts it (the first pod's).
    namespace: String,
    /// The quota of a tree that counts it (the first pod's).
    tree: Option<String>,
    /// What its devices count as; `None` while it is not allocated.
    amount: Option<Resource>,
    /// How many placed pods use it.
    holders: u32,
}

impl ObjectPart for QuotaState {}

impl QuotaState {
    /// The quota of a namespace, if it has one.
    pub fn quota(&self, namespace: &str) -> Option<&Quota> {
        self.quotas.get(namespace).map(|q| &**q)
    }

    /// Every quota, in no particular order.
    pub fn quotas(&self) -> impl Iterator<Item = &Quota> {
        self.quotas.values().map(|q| &**q)
    }

    /// How many quotas there are.
    pub fn len(&self) -> usize {
        self.quotas.len()
    }

    /// Whether there is no quota.
    pub fn is_empty(&self) -> bool {
        self.quotas.is_empty()
    }

    /// What a namespace's placed pods request together.
    pub fn used(&self, namespace: &str) -> &Resource {
        self.used.get(namespace).unwrap_or(&NOTHING)
    }

    /// Stores a quota; returns whether it replaced one. A namespace keeps the first
    /// quota it got as its own: another one there is kept only as a quota of a tree
    /// (`Err` names the namespace's), and a name only its first quota.
    pub fn upsert(&mut self, quota: Quota) -> Result<bool, String> {
        match self.named.get(&quota.name) {
            Some(kept) if kept.namespace != quota.namespace => {}
            kept => {
                self.recount_tree |= kept.is_none();
                self.named.insert(quota.name.clone(), Arc::new(quota.clone()));
            }
        }
        if let Some(kept) = self.quotas.get(&quota.namespace)
            && kept.name != quota.name
        {
            return Err(format!(
                "namespace {} already has ElasticQuota {}; only one quota per namespace is read",
                quota.namespace, kept.name
            ));
        }
        let namespace = quota.namespace.clone();
        let replaced = self.quotas.insert(namespace.clone(), Arc::new(quota)).is_some();
        if !replaced && !self.fresh.contains(&namespace) {
            self.fresh.push(namespace);
        }
        Ok(replaced)
    }

    /// Whether a quota arrived whose namespace's placed pods are not counted yet, or
    /// claims of placed pods that were not allocated may be now (the DRA objects are at
    /// `dra_generation`).
    pub fn needs_recount(&self, dra_generation: u64) -> bool {
        !self.fresh.is_empty() || self.recount_tree || (!self.unsettled.is_empty() && dra_generation != self.dra_seen)
    }

    /// Counts afresh, from every placed pod, when quotas arrived or quotas of trees
    /// changed since the last count; and counts the claims of placed pods allocated
    /// since they were placed.
    pub fn recount(&mut self, placed: &mut dyn Iterator<Item = &crate::pod_info::PodInfo>, dra: &DraState) {
        if !self.fresh.is_empty() || self.recount_tree {
            self.fresh.clear();
            self.recount_tree = false;
            self.used = HashMap::default();
            self.used_by = HashMap::default();
            self.non_preemptible = HashMap::default();
            self.claims = HashMap::default();
            self.pod_claims = HashMap::default();
            self.unsettled.clear();
            for pod in placed {
                if self.governs(pod) {
                    self.charge_pod(pod, dra);
                }
            }
        }
        self.settle(dra);
    }

    /// Counts the unsettled claims that are allocated now.
    fn settle(&mut self, dra: &DraState) {
        self.dra_seen = dra.generation();
        let unsettled = std::mem::take(&mut self.unsettled);
        for key in unsettled {
            let amount = dra.claim(&key).and_then(|c| crate::dra::charge::allocated_charge(dra, c));
            match amount {
                Some(amount) => self.count_claim(&key, amount),
                None if self.claims.contains_key(&key) => self.unsettled.push(key),
                None => {}
            }
        }
    }

    /// Counts what claim `key`'s devices count as against the quotas of its first pod.
    fn count_claim(&mut self, key: &str, amount: Resource) {
        let Some(charge) = self.claims.get_mut(key) else { return };
        let (namespace, tree) = (charge.namespace.clone(), charge.tree.clone());
        charge.amount = Some(amount.clone());
        self.charge(&namespace, &amount);
        if let Some(tree) = tree {
            add(&mut self.used_by, &tree, &amount);
        }
    }

    /// The quota of a tree `pod` counts against: the one its label names, else its
    /// namespace's.
    pub fn tree_quota_of(&self, pod: &crate::pod_info::PodInfo) -> Option<&str> {
        match pod.labels.get(tree::QUOTA_NAME_LABEL) {
            Some(name) if self.named.contains_key(name) => self.named.get(name).map(|q| q.name.as_str()),
            _ => self.quotas.get(&pod.namespace).map(|q| q.name.as_str()),
        }
    }

    /// The parent of a quota of a tree: `None` at the top, which is also where a quota
    /// whose parent is unknown, is not a parent, or leads back to it stands.
    pub fn parent_of(&self, q: &Quota) -> Option<&Quota> {
        let parent = self.named(q.tree.parent.as_ref()?).filter(|p| p.tree.is_parent)?;
        let mut at = parent;
        for _ in 0..self.named.len() {
            match at.tree.parent.as_ref().and_then(|n| self.named(n)) {
                Some(up) if up.name == q.name => return None,
                Some(up) => at = up,
                None => return Some(parent),
            }
        }
        None
    }

    /// A quota by name.
    pub fn named(&self, name: &str) -> Option<&Quota> {
        self.named.get(name).map(|q| &**q)
    }

    /// Every quota by name, in no particular order.
    pub fn all_named(&self) -> impl Iterator<Item = &Quota> {
        self.named.values().map(|q| &**q)
    }

    /// What the placed pods of a tree's quota request together.
    pub fn used_by(&self, name: &str) -> &Resource {
        self.used_by.get(name).unwrap_or(&NOTHING)
    }

    /// What the placed pods of a tree's quota that may not be evicted for quotas request.
    pub fn non_preemptible_used(&self, name: &str) -> &Resource {
        self.non_preemptible.get(name).unwrap_or(&NOTHING)
    }

    /// What the waiting pods ask of a tree's quota.
    pub fn waiting(&self, name: &str) -> &Resource {
        self.waiting.get(name).unwrap_or(&NOTHING)
    }

    /// Whether `pod` counts against any quota.
    pub fn governs(&self, pod: &crate::pod_info::PodInfo) -> bool {
        self.quotas.contains_key(&pod.namespace) || self.tree_quota_of(pod).is_some()
    }

    /// Charges a placed pod to its namespace's quota and its quota of a tree: its
    /// requests, and the devices of its claims as allocated (a claim another placed pod
    /// uses is counted already; one not allocated yet is counted once it is).
    pub fn charge_pod(&mut self, pod: &crate::pod_info::PodInfo, dra: &DraState) {
        let key = pod.key();
        if self.pod_claims.contains_key(&key) {
            return;
        }
        self.charge(&pod.namespace, &pod.requests.requests);
        let tree = self.tree_quota_of(pod).map(str::to_string);
        if let Some(name) = &tree {
            add(&mut self.used_by, name, &pod.requests.requests);
            if !tree::preemptible(pod) {
                add(&mut self.non_preemptible, name, &pod.requests.requests);
            }
        }
        let keys = crate::dra::charge::pod_claim_keys(dra, pod);
        for key in &keys {
            if let Some(charge) = self.claims.get_mut(key) {
                charge.holders += 1;
                continue;
            }
            let charge = ClaimCharge { namespace: pod.namespace.clone(), tree: tree.clone(), amount: None, holders: 1 };
            self.claims.insert(key.clone(), charge);
            match dra.claim(key).and_then(|c| crate::dra::charge::allocated_charge(dra, c)) {
                Some(amount) => self.count_claim(key, amount),
                None => self.unsettled.push(key.clone()),
            }
        }
        self.pod_claims.insert(key, keys);
    }

    /// Takes back what [`QuotaState::charge_pod`] charged (a claim's devices with the
    /// last placed pod using it).
    pub fn discharge_pod(&mut self, pod: &crate::pod_info::PodInfo) {
        let Some(keys) = self.pod_claims.remove(&pod.key()) else { return };
        self.discharge(&pod.namespace, &pod.requests.requests);
        if let Some(name) = self.tree_quota_of(pod).map(str::to_string) {
            if let Some(used) = self.used_by.get_mut(&name) {
                used.sub(&pod.requests.requests);
            }
            if !tree::preemptible(pod)
                && let Some(used) = self.non_preemptible.get_mut(&name)
            {
                used.sub(&pod.requests.requests);
            }
        }
        for key in keys {
            let Some(charge) = self.claims.get_mut(&key) else { continue };
            charge.holders = charge.holders.saturating_sub(1);
            if charge.holders > 0 {
                continue;
            }
            let Some(gone) = self.claims.remove(&key) else { continue };
            self.unsettled.retain(|k| *k != key);
            if let Some(amount) = gone.amount {
                self.discharge(&gone.namespace, &amount);
                if let Some(used) = gone.tree.and_then(|t| self.used_by.get_mut(&t)) {
                    used.sub(&amount);
                }
            }
        }
    }

    /// Counts what the waiting pods ask of each quota of a tree, afresh.
    pub fn set_waiting(&mut self, pods: &mut dyn Iterator<Item = &crate::pod_info::PodInfo>) {
        let mut waiting: HashMap<String, Resource> = HashMap::default();
        for pod in pods {
            if let Some(name) = self.tree_quota_of(pod) {
                add(&mut waiting, name, &pod.requests.requests);
            }
        }
        self.waiting = waiting;
    }

    /// Removes the quota `namespace/name`; returns it if it was stored.
    pub fn remove(&mut self, key: &str) -> Option<Arc<Quota>> {
        let (namespace, name) = key.split_once('/')?;
        let named = self.named.get(name).filter(|q| q.namespace == namespace).cloned();
        if named.is_some() {
            self.remove_named(key);
        }
        if self.quotas.get(namespace).is_none_or(|q| q.name != name) {
            return named;
        }
        self.used.remove(namespace);
        self.fresh.retain(|ns| ns != namespace);
        self.quotas.remove(namespace)
    }

    /// Removes the quota `namespace/name` from the quotas of trees; returns whether it
    /// was there.
    pub fn remove_named(&mut self, key: &str) -> bool {
        let Some((namespace, name)) = key.split_once('/') else { return false };
        if self.named.get(name).is_none_or(|q| q.namespace != namespace) {
            return false;
        }
        self.used_by.remove(name);
        // Pods that named it count against their namespace's quota now.
        self.recount_tree = true;
        self.named.remove(name).is_some()
    }

    /// Charges `request` to a namespace (a pod placed there) that has a quota.
    pub fn charge(&mut self, namespace: &str, request: &Resource) {
        if !self.quotas.contains_key(namespace) {
            return;
        }
        match self.used.get_mut(namespace) {
            Some(used) => used.add(request),
            None => {
                self.used.insert(namespace.to_string(), request.clone());
            }
        }
    }

    /// Takes `request` back from a namespace (a pod that left).
    pub fn discharge(&mut self, namespace: &str, request: &Resource) {
        if let Some(used) = self.used.get_mut(namespace) {
            used.sub(request);
            if used.is_zero() {
                self.used.remove(namespace);
            }
        }
    }

    /// Whether every quota's use together with `request` exceeds every quota's `min`
    /// together: a pod may borrow only what other quotas leave unused.
    pub fn aggregated_over_min_with(&self, request: &Resource) -> bool {
        let (mut used, min) = self.aggregate();
        used.add(request);
        exceeds(&used, &NOTHING, &min, 0)
    }

    /// Every namespace quota's use together, and every one's `min` together.
    pub fn aggregate(&self) -> (Resource, Resource) {
        let (mut used, mut min) = (Resource::default(), Resource::default());
        for q in self.quotas.values() {
            used.add(self.used(&q.namespace));
            min.add(&q.min);
        }
        (used, min)
    }
}

/// Adds `request` to the amount of `name`.
fn add(map: &mut HashMap<String, Resource>, name: &str, request: &Resource) {
    match map.get_mut(name) {
        Some(r) => r.add(request),
        None => {
            map.insert(name.to_string(), request.clone());
        }
    }
}

/// The quotas among the cluster objects.
pub trait QuotaObjects {
    /// The quotas (empty when none was stored).
    fn quotas(&self) -> &QuotaState;
    /// The quotas, to change.
    fn quotas_mut(&mut self) -> &mut QuotaState;
}

impl QuotaObjects for ClusterObjects {
    fn quotas(&self) -> &QuotaState {
        static EMPTY: std::sync::LazyLock<QuotaState> = std::sync::LazyLock::new(QuotaState::default);
        self.get::<QuotaState>().unwrap_or(&EMPTY)
    }

    fn quotas_mut(&mut self) -> &mut QuotaState {
        self.get_mut::<QuotaState>()
    }
}
