//! The scheduler cache: nodes with their pods, assumed placements, and incremental snapshots.
//!
//! One writer (the informer loop or the simulator) applies changes; the scheduling
//! cycle reads a [`Snapshot`]. Nodes are shared with the snapshot through `Arc` and
//! copied on write, so refreshing a snapshot replaces only the nodes that changed.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use algorithms::labels::Labels;
use algorithms::objects::ClusterObjects;
use algorithms::plugins::registry::OWNERS;
use algorithms::preemption::Budget;
use algorithms::snapshot::WorkloadSelectors;
use algorithms::{NodeInfo, PodInfo, Snapshot};
use thiserror::Error;

use crate::nominator::Nominator;

/// How long an assumed pod may wait for the watch to confirm its binding.
pub const ASSUME_TTL: Duration = Duration::from_secs(30);

/// A cache operation that does not apply.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CacheError {
    /// The node is not in the cache.
    #[error("node {0} is not in the cache")]
    UnknownNode(String),
    /// The pod is already placed.
    #[error("pod {0} is already in the cache")]
    AlreadyPlaced(String),
}

/// What a node update changed.
#[derive(Debug, Clone)]
pub enum NodeChange {
    /// A new node.
    Added(Arc<NodeInfo>),
    /// Labels, taints, schedulability, allocatable or images changed.
    Changed {
        /// Before.
        old: Arc<NodeInfo>,
        /// After.
        new: Arc<NodeInfo>,
    },
    /// Nothing the scheduler uses changed.
    Unchanged,
}

impl NodeChange {
    /// The cluster event for the queue, if anything changed.
    pub fn event(self) -> Option<algorithms::events::ClusterEvent> {
        use algorithms::events::ClusterEvent;
        match self {
            NodeChange::Added(n) => Some(ClusterEvent::NodeAdded(n)),
            NodeChange::Changed { old, new } => Some(ClusterEvent::NodeUpdated { old, new }),
            NodeChange::Unchanged => None,
        }
    }
}

#[derive(Debug, Clone)]
struct PodState {
    node: String,
    assumed: bool,
    deadline: Option<Instant>,
}

/// The cache.
#[derive(Debug, Default)]
pub struct Cache {
    nodes: Vec<Arc<NodeInfo>>,
    index: HashMap<String, usize>,
    namespaces: HashMap<String, Labels>,
    workloads: Arc<WorkloadSelectors>,
    pods: HashMap<String, PodState>,
    /// Placed members of pod groups: by (API, group), each member's node by pod key.
    groups: HashMap<(crate::gang::Api, String), HashMap<String, String>>,
    /// Bound pods whose node has not been seen yet, by node name.
    orphans: HashMap<String, Vec<Arc<PodInfo>>>,
    dirty: HashSet<usize>,
    structure_changed: bool,
    images_changed: bool,
    namespaces_changed: bool,
    budgets: Arc<Vec<Budget>>,
    /// Claims, volumes, classes and CSI objects; snapshots take a copy when it changed.
    objects: ClusterObjects,
    objects_changed: bool,
    /// Pods nominated to nodes by preemption.
    pub nominator: Nominator,
    /// What Reserve plugins assumed for pods being bound, by pod key.
    reservations: HashMap<String, reservations::Reservation>,
}

impl Cache {
    /// An empty cache.
    pub fn new() -> Self {
        Cache { structure_changed: true, objects_changed: true, ..Default::default() }
    }

    /// Claims, volumes and the other cluster objects, with what Reserve assumed.
    pub fn objects(&self) -> &ClusterObjects {
        &self.objects
    }

    /// The cluster objects, to change (watch events, the in-memory API); the next
    /// snapshot refresh copies them.
    pub fn objects_mut(&mut self) -> &mut ClusterObjects {
        self.objects_changed = true;
        &mut self.objects
    }

    /// The cluster objects to change, with the nodes to read meanwhile (the in-memory
    /// API's controllers read a node's labels).
    pub fn objects_and_nodes(&mut self) -> (&mut ClusterObjects, impl Fn(&str) -> Option<Arc<NodeInfo>> + '_) {
        self.objects_changed = true;
        let (nodes, index) = (&self.nodes, &self.index);
        (&mut self.objects, move |name: &str| index.get(name).and_then(|&i| nodes.get(i)).cloned())
    }

    /// Adds a node, or updates it when known (keeping its pods). Reports whether anything
    /// the scheduler looks at changed (status heartbeats do not count).
    pub fn upsert_node(&mut self, node: NodeInfo) -> NodeChange {
        let name = node.name.clone();
        let change = match self.index.get(&node.name) {
            Some(&i) => {
                let cur = &self.nodes[i];
                if cur.labels == node.labels
                    && cur.taints == node.taints
                    && cur.unschedulable == node.unschedulable
                    && cur.declared_features == node.declared_features
                    && cur.allocatable == node.allocatable
                    && cur.images == node.images
                {
                    return NodeChange::Unchanged;
                }
                let old = cur.clone();
                self.images_changed |= old.images != node.images;
                Arc::make_mut(&mut self.nodes[i]).update_node(node);
                self.dirty.insert(i);
                NodeChange::Changed { old, new: self.nodes[i].clone() }
            }
            None => {
                self.index.insert(node.name.clone(), self.nodes.len());
                let node = Arc::new(node);
                self.nodes.push(node.clone());
                self.structure_changed = true;
                self.images_changed = true;
                NodeChange::Added(node)
            }
        };
        for pod in self.orphans.remove(&name).unwrap_or_default() {
            let _ = self.add_pod(pod);
        }
        change
    }

    /// Removes a node and forgets the pods on it; returns it.
    pub fn remove_node(&mut self, name: &str) -> Option<Arc<NodeInfo>> {
        let i = *self.index.get(name)?;
        // Pods assumed there are not bound: their volume assumptions go with the node.
        let assumed: Vec<String> =
            self.pods.iter().filter(|(_, st)| st.assumed && st.node == name).map(|(k, _)| k.clone()).collect();
        for key in &assumed {
            self.unreserve(key);
        }
        self.index.remove(name);
        let removed = self.nodes.remove(i);
        // Pods still bound to the node wait for it (or their deletion) like any orphan.
        let orphans: Vec<Arc<PodInfo>> = removed.pods.clone();
        for pod in &orphans {
            self.unindex_member(pod);
            self.charge(pod, false);
        }
        if !orphans.is_empty() {
            self.orphans.insert(name.to_string(), orphans);
        }
        self.index = self.nodes.iter().enumerate().map(|(i, n)| (n.name.clone(), i)).collect();
        self.pods.retain(|_, st| st.node != name);
        self.structure_changed = true;
        self.images_changed = true;
        Some(removed)
    }

    /// Sets a namespace's labels.
    pub fn upsert_namespace(&mut self, name: &str, labels: Labels) {
        self.namespaces.insert(name.to_string(), labels);
        self.namespaces_changed = true;
    }

    /// Removes a namespace.
    pub fn remove_namespace(&mut self, name: &str) {
        self.namespaces.remove(name);
        self.namespaces_changed = true;
    }

    /// Replaces the PodDisruptionBudgets preemption respects.
    pub fn set_budgets(&mut self, budgets: Vec<Budget>) {
        self.budgets = Arc::new(budgets);
    }

    /// Replaces the workload selectors used for default spreading.
    pub fn set_workloads(&mut self, w: WorkloadSelectors) {
        self.workloads = Arc::new(w);
    }

    fn place(&mut self, pod: Arc<PodInfo>, node: &str) -> Result<(), CacheError> {
        let i = *self.index.get(node).ok_or_else(|| CacheError::UnknownNode(node.to_string()))?;
        if let Some(group) = crate::gang::group_of(&pod) {
            let members = self.groups.entry((crate::gang::api_of(&pod), group)).or_default();
            members.insert(pod.key(), node.to_string());
        }
        self.charge(&pod, true);
        Arc::make_mut(&mut self.nodes[i]).add_pod(pod);
        self.dirty.insert(i);
        Ok(())
    }

    /// Tells the owners of cluster objects that keep what placed pods take (quotas) that
    /// `pod` was placed, or left its node.
    fn charge(&mut self, pod: &PodInfo, placed: bool) {
        for owner in OWNERS {
            let changed = if placed {
                owner.pod_placed(&mut self.objects, pod)
            } else {
                owner.pod_unplaced(&mut self.objects, pod)
            };
            self.objects_changed |= changed;
        }
    }

    fn unplace(&mut self, key: &str, node: &str) -> Option<Arc<PodInfo>> {
        let i = *self.index.get(node)?;
        let (ns, name) = key.split_once('/')?;
        let removed = Arc::make_mut(&mut self.nodes[i]).remove_pod(ns, name);
        self.dirty.insert(i);
        if let Some(pod) = &removed {
            self.unindex_member(pod);
            self.charge(pod, false);
        }
        removed
    }

    /// Drops a pod from the placed members of its group.
    fn unindex_member(&mut self, pod: &PodInfo) {
        let Some(group) = crate::gang::group_of(pod) else { return };
        let at = (crate::gang::api_of(pod), group);
        if let Some(members) = self.groups.get_mut(&at) {
            members.remove(&pod.key());
            if members.is_empty() {
                self.groups.remove(&at);
            }
        }
    }

    /// The nodes the placed (bound or assumed) members of a pod group are on, one entry
    /// per member.
    pub fn group_nodes(&self, api: crate::gang::Api, group: &str) -> Vec<&str> {
        let at = (api, group.to_string());
        self.groups.get(&at).map(|m| m.values().map(String::as_str).collect()).unwrap_or_default()
    }

    /// Records a pod bound to a node (from the watch). Confirms an assumed pod. A pod
    /// on a node not seen yet is kept aside until the node arrives. Returns the version
    /// it replaces (the assumed or the previously watched one), if any.
    pub fn add_pod(&mut self, pod: impl Into<Arc<PodInfo>>) -> Result<Option<Arc<PodInfo>>, CacheError> {
        let pod: Arc<PodInfo> = pod.into();
        let Some(node) = pod.node_name.clone() else { return Ok(None) };
        let key = pod.key();
        let mut previous = None;
        if let Some(st) = self.pods.get(&key).cloned() {
            previous = self.unplace(&key, &st.node);
            self.pods.remove(&key);
        }
        if !self.index.contains_key(&node) {
            let list = self.orphans.entry(node).or_default();
            list.retain(|p| p.key() != key);
            list.push(pod);
            return Ok(previous);
        }
        self.place(pod, &node)?;
        // A bound pod's claims are bound: its reservation has served.
        self.reservations.remove(&key);
        self.pods.insert(key, PodState { node, assumed: false, deadline: None });
        Ok(previous)
    }

    /// Removes a pod (deleted, or finished).
    pub fn remove_pod(&mut self, key: &str) -> Option<Arc<PodInfo>> {
        self.unreserve(key);
        self.orphans.retain(|_, list| {
            list.retain(|p| p.key() != key);
            !list.is_empty()
        });
        let st = self.pods.remove(key)?;
        self.unplace(key, &st.node)
    }

    /// Places a pod on a node before its binding is confirmed; returns it as placed.
    pub fn assume(&mut self, pod: &PodInfo, node: &str) -> Result<Arc<PodInfo>, CacheError> {
        let key = pod.key();
        if self.pods.contains_key(&key) {
            return Err(CacheError::AlreadyPlaced(key));
        }
        let mut placed = pod.clone();
        placed.node_name = Some(node.to_string());
        let placed = Arc::new(placed);
        self.place(placed.clone(), node)?;
        self.pods.insert(key, PodState { node: node.to_string(), assumed: true, deadline: None });
        Ok(placed)
    }

    /// The binding call returned; the assumption now expires unless the watch confirms it.
    pub fn finish_binding(&mut self, key: &str, now: Instant) {
        if let Some(st) = self.pods.get_mut(key).filter(|s| s.assumed) {
            st.deadline = Some(now + ASSUME_TTL);
        }
    }

    /// Confirms an assumed pod without waiting for the watch (the in-memory binder).
    pub fn confirm(&mut self, key: &str) {
        // As when the watch confirms it: the reservation has served.
        self.reservations.remove(key);
        if let Some(st) = self.pods.get_mut(key) {
            st.assumed = false;
            st.deadline = None;
        }
    }

    /// Drops an assumed pod whose binding failed.
    pub fn forget(&mut self, key: &str) -> Option<Arc<PodInfo>> {
        match self.pods.get(key) {
            Some(st) if st.assumed => self.remove_pod(key),
            _ => None,
        }
    }

    /// Forgets assumed pods whose confirmation never came; returns them.
    pub fn expire_assumed(&mut self, now: Instant) -> Vec<Arc<PodInfo>> {
        let expired: Vec<String> = self
            .pods
            .iter()
            .filter(|(_, st)| st.assumed && st.deadline.is_some_and(|d| d <= now))
            .map(|(k, _)| k.clone())
            .collect();
        expired.iter().filter_map(|k| self.remove_pod(k)).collect()
    }

    /// Whether a pod is assumed (placed but not confirmed).
    pub fn is_assumed(&self, key: &str) -> bool {
        self.pods.get(key).is_some_and(|s| s.assumed)
    }

    /// Assumed pods whose binding call has not returned.
    pub fn binding_in_progress(&self) -> usize {
        self.pods.values().filter(|s| s.assumed && s.deadline.is_none()).count()
    }

    /// Pods assumed (not yet bound) on a node.
    pub fn assumed_on(&self, node: &str) -> Vec<Arc<PodInfo>> {
        let Some(info) = self.node(node) else { return Vec::new() };
        info.pods.iter().filter(|p| self.is_assumed(&p.key())).cloned().collect()
    }

    /// A node by name.
    pub fn node(&self, name: &str) -> Option<&Arc<NodeInfo>> {
        self.index.get(name).and_then(|i| self.nodes.get(*i))
    }

    /// The node a pod is placed on, if any.
    pub fn node_of(&self, key: &str) -> Option<&str> {
        self.pods.get(key).map(|s| s.node.as_str())
    }

    /// What every node can hold together (their allocatable).
    pub fn allocatable(&self) -> algorithms::resource::Resource {
        let mut total = algorithms::resource::Resource::default();
        for n in &self.nodes {
            total.add(&n.allocatable);
        }
        total
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Number of assumed pods (placed, binding not confirmed by the watch).
    pub fn assumed_count(&self) -> usize {
        self.pods.values().filter(|s| s.assumed).count()
    }

    /// Number of placed pods (bound and assumed).
    pub fn pod_count(&self) -> usize {
        self.pods.len()
    }

    /// A snapshot of the whole cache (nodes, namespaces and cluster objects) that leaves
    /// the scheduling loop's own snapshot updates untouched (reports read it).
    pub fn full_snapshot(&self) -> Snapshot {
        let mut snap = Snapshot::new(self.nodes.clone(), self.namespaces.clone());
        snap.objects = Arc::new(self.objects.clone());
        snap.workloads = self.workloads.clone();
        snap.budgets = self.budgets.clone();
        snap
    }

    /// Brings `snap` up to date, copying only nodes that changed. Returns how many nodes were refreshed.
    pub fn update_snapshot(&mut self, snap: &mut Snapshot) -> usize {
        if self.namespaces_changed {
            snap.namespaces = Arc::new(self.namespaces.clone());
            self.namespaces_changed = false;
        }
        if !Arc::ptr_eq(&snap.workloads, &self.workloads) {
            snap.workloads = self.workloads.clone();
        }
        if !Arc::ptr_eq(&snap.budgets, &self.budgets) {
            snap.budgets = self.budgets.clone();
        }
        if self.objects_changed {
            for owner in OWNERS {
                if owner.needs_recount(&self.objects) {
                    let mut placed = self.nodes.iter().flat_map(|n| n.pods.iter().map(|p| &**p));
                    owner.recount(&mut self.objects, &mut placed);
                }
            }
            snap.objects = Arc::new(self.objects.clone());
            self.objects_changed = false;
        }
        self.nominator.update_snapshot(snap);
        let refreshed;
        if self.structure_changed || snap.nodes.len() != self.nodes.len() {
            snap.set_nodes(self.nodes.clone());
            refreshed = self.nodes.len();
            self.images_changed = false;
        } else {
            for &i in &self.dirty {
                let Some(new) = self.nodes.get(i) else { continue };
                snap.replace_node(i, new.clone());
                snap.set_pod_flags(i);
            }
            refreshed = self.dirty.len();
            if self.images_changed {
                snap.refresh_images();
                self.images_changed = false;
            }
        }
        self.dirty.clear();
        self.structure_changed = false;
        refreshed
    }
}

mod reservations;

#[cfg(test)]
mod tests {
    use super::*;
    use algorithms::builders::{NodeBuilder, PodBuilder, affinity_term};

    fn node(name: &str) -> NodeInfo {
        NodeInfo::from_node(&NodeBuilder::new(name).build()).unwrap()
    }

    #[test]
    fn each_groups_placed_members_are_kept_by_node() {
        use crate::gang::{Api, POD_GROUP_LABEL};
        let mut c = Cache::new();
        c.upsert_node(node("a"));
        c.upsert_node(node("b"));
        let member = |n: &str| PodBuilder::new(n).label(POD_GROUP_LABEL, "job").info();
        c.assume(&member("m0"), "a").unwrap();
        let mut bound = member("m1");
        bound.node_name = Some("b".into());
        c.add_pod(bound).unwrap();
        c.assume(&PodBuilder::new("other").info(), "a").unwrap();
        let mut nodes = c.group_nodes(Api::SchedulerPlugins, "default/job");
        nodes.sort_unstable();
        assert_eq!(nodes, vec!["a", "b"]);
        assert!(c.group_nodes(Api::Kubernetes, "default/job").is_empty());
        c.forget("default/m0");
        assert_eq!(c.group_nodes(Api::SchedulerPlugins, "default/job"), vec!["b"]);
        // A removed node takes its members out; they return with it.
        c.remove_node("b");
        assert!(c.group_nodes(Api::SchedulerPlugins, "default/job").is_empty());
        c.upsert_node(node("b"));
        assert_eq!(c.group_nodes(Api::SchedulerPlugins, "default/job"), vec!["b"]);
        c.remove_pod("default/m1");
        assert!(c.group_nodes(Api::SchedulerPlugins, "default/job").is_empty());
    }

    #[test]
    fn assumed_pods_count_until_forgotten() {
        let mut c = Cache::new();
        c.upsert_node(node("a"));
        let mut snap = Snapshot::default();
        c.update_snapshot(&mut snap);
        let pod = PodBuilder::new("p").req("1", "1Gi").info();
        c.assume(&pod, "a").unwrap();
        assert!(c.is_assumed("default/p"));
        assert_eq!(c.update_snapshot(&mut snap), 1);
        assert_eq!(snap.nodes[0].requested.milli_cpu, 1000);
        assert!(c.assume(&pod, "a").is_err());
        c.forget("default/p");
        c.update_snapshot(&mut snap);
        assert_eq!(snap.nodes[0].requested.milli_cpu, 0);
        assert!(c.assume(&pod, "missing").is_err());
    }

    #[test]
    fn each_placed_pod_is_charged_to_its_namespace_once_until_it_leaves() {
        use algorithms::quotas::{Quota, QuotaObjects};
        let mut c = Cache::new();
        c.upsert_node(node("a"));
        let mut snap = Snapshot::default();
        c.update_snapshot(&mut snap);
        let used = |c: &Cache| c.objects().quotas().used("team").milli_cpu;
        let pod = |name: &str| PodBuilder::new(name).namespace("team").req("1", "1Gi");
        c.add_pod(pod("early").node_name("a").info()).unwrap();
        let quota = Quota {
            name: "q".into(),
            namespace: "team".into(),
            min: Default::default(),
            max: Default::default(),
            tree: Default::default(),
        };
        c.objects_mut().quotas_mut().upsert(quota).unwrap();
        c.update_snapshot(&mut snap);
        assert_eq!(used(&c), 1000, "a quota that comes after its pods counts them");
        c.remove_pod("team/early");
        assert_eq!(used(&c), 0);
        c.assume(&pod("p").info(), "a").unwrap();
        assert_eq!(used(&c), 1000, "assumed (Reserve)");
        c.update_snapshot(&mut snap);
        assert_eq!(snap.objects.quotas().used("team").milli_cpu, 1000, "the next cycle sees it");
        c.add_pod(pod("p").node_name("a").info()).unwrap();
        assert_eq!(used(&c), 1000, "the watch confirming it charges nothing more");
        c.add_pod(pod("q").node_name("a").info()).unwrap();
        c.assume(&pod("r").info(), "a").unwrap();
        c.forget("team/r");
        assert_eq!(used(&c), 2000, "a forgotten assumption is taken back (Unreserve)");
        c.remove_node("a");
        assert_eq!(used(&c), 0, "pods of a node gone wait off the books");
        c.upsert_node(node("a"));
        assert_eq!(used(&c), 2000, "and count again once it is back");
        c.remove_pod("team/p");
        assert_eq!(used(&c), 1000);
    }

    #[test]
    fn the_watch_confirms_an_assumed_pod() {
        let mut c = Cache::new();
        c.upsert_node(node("a"));
        let pod = PodBuilder::new("p").req("1", "1Gi").info();
        c.assume(&pod, "a").unwrap();
        c.finish_binding("default/p", Instant::now());
        c.add_pod(PodBuilder::new("p").req("1", "1Gi").node_name("a").info()).unwrap();
        assert!(!c.is_assumed("default/p"));
        assert!(c.expire_assumed(Instant::now() + ASSUME_TTL * 2).is_empty());
        let mut snap = Snapshot::default();
        c.update_snapshot(&mut snap);
        assert_eq!(snap.nodes[0].pods.len(), 1);
    }

    #[test]
    fn unconfirmed_assumptions_expire() {
        let mut c = Cache::new();
        c.upsert_node(node("a"));
        c.assume(&PodBuilder::new("p").info(), "a").unwrap();
        let t = Instant::now();
        c.finish_binding("default/p", t);
        assert!(c.expire_assumed(t + Duration::from_secs(1)).is_empty());
        let expired: Vec<String> = c.expire_assumed(t + ASSUME_TTL).iter().map(|p| p.key()).collect();
        assert_eq!(expired, vec!["default/p".to_string()]);
        assert_eq!(c.pod_count(), 0);
    }

    #[test]
    fn snapshots_copy_only_changed_nodes() {
        let mut c = Cache::new();
        for n in ["a", "b", "c"] {
            c.upsert_node(node(n));
        }
        let mut snap = Snapshot::default();
        assert_eq!(c.update_snapshot(&mut snap), 3);
        let b_before = snap.nodes[1].clone();
        c.add_pod(PodBuilder::new("p").node_name("a").info()).unwrap();
        assert_eq!(c.update_snapshot(&mut snap), 1);
        assert!(Arc::ptr_eq(&b_before, &snap.nodes[1]));
        assert_eq!(snap.nodes[0].pods.len(), 1);
        // The old snapshot's node was not mutated in place.
        assert_eq!(c.update_snapshot(&mut snap), 0);
    }

    #[test]
    fn affinity_indexes_follow_pod_changes() {
        let mut c = Cache::new();
        c.upsert_node(node("a"));
        c.upsert_node(node("b"));
        let mut snap = Snapshot::default();
        c.update_snapshot(&mut snap);
        let anti = PodBuilder::new("x").pod_anti_affinity(affinity_term(&[("app", "x")], "zone")).node_name("b").info();
        c.add_pod(anti).unwrap();
        c.update_snapshot(&mut snap);
        assert_eq!(snap.with_required_anti_affinity, vec![1]);
        c.remove_pod("default/x");
        c.update_snapshot(&mut snap);
        assert!(snap.with_required_anti_affinity.is_empty());
    }

    #[test]
    fn pods_on_unknown_nodes_wait_for_the_node() {
        let mut c = Cache::new();
        c.add_pod(PodBuilder::new("p").req("1", "1Gi").node_name("late").info()).unwrap();
        assert_eq!(c.pod_count(), 0);
        assert!(matches!(c.upsert_node(node("late")), NodeChange::Added(_)));
        assert_eq!(c.node_of("default/p"), Some("late"));
        assert!(matches!(c.upsert_node(node("late")), NodeChange::Unchanged));
    }

    #[test]
    fn removing_a_node_rebuilds_the_snapshot() {
        let mut c = Cache::new();
        c.upsert_node(node("a"));
        c.upsert_node(node("b"));
        c.add_pod(PodBuilder::new("p").node_name("a").info()).unwrap();
        c.remove_node("a");
        let mut snap = Snapshot::default();
        c.update_snapshot(&mut snap);
        assert_eq!(snap.nodes.len(), 1);
        assert_eq!(snap.index.get("b"), Some(&0));
        assert_eq!(c.pod_count(), 0);
        // The node comes back: its pod is counted again.
        c.upsert_node(node("a"));
        assert_eq!(c.pod_count(), 1);
    }
}
