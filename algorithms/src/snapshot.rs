//! An immutable view of the cluster that one scheduling cycle reads.

use std::collections::HashMap;
use std::sync::Arc;

use crate::labels::{LabelSelector, Labels};
use crate::node_info::NodeInfo;

/// Nodes (shared with the cache until they change), namespaces and derived indexes.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// All nodes, in a stable order.
    pub nodes: Vec<Arc<NodeInfo>>,
    /// Each node's generation, by index (kept beside `nodes` for fast scans).
    pub generations: Vec<u64>,
    /// Node name to index in `nodes`.
    pub index: Arc<HashMap<String, usize>>,
    /// Namespace labels by namespace name.
    pub namespaces: Arc<HashMap<String, Labels>>,
    /// For each image name, on how many nodes it is present.
    pub image_nodes: Arc<HashMap<String, usize>>,
    /// Indexes of nodes with at least one pod with pod (anti-)affinity.
    pub with_affinity: Vec<usize>,
    /// Services, ReplicaSets, StatefulSets and ReplicationControllers, for default spreading.
    pub workloads: Arc<WorkloadSelectors>,
    /// Indexes of nodes with at least one pod with required anti-affinity.
    pub with_required_anti_affinity: Vec<usize>,
    /// PodDisruptionBudgets, for preemption.
    pub budgets: Arc<Vec<crate::budgets::Budget>>,
    /// Pods nominated to a node by preemption, by node name.
    pub nominated: Arc<HashMap<String, Vec<Arc<crate::pod_info::PodInfo>>>>,
    /// Cluster objects beyond nodes and pods (claims, volumes, storage classes, CSI
    /// objects), as the cache held them when the snapshot was refreshed.
    pub objects: Arc<crate::objects::ClusterObjects>,
    /// Changes whenever nodes are added or removed (not when a node or its pods change).
    pub epoch: u64,
    /// In a preemption dry run, the terminating pods taken off a node (by node index).
    /// kube-scheduler's PodTopologySpread never counts terminating pods, yet its RemovePod
    /// takes every removed victim off its counts; PreFilter subtracts these to judge as it
    /// does. Empty outside dry runs.
    pub evicted_terminating: Vec<(usize, Arc<crate::pod_info::PodInfo>)>,
}

/// Selectors of the objects kube-scheduler derives default spread selectors from.
#[derive(Debug, Clone, Default)]
pub struct WorkloadSelectors {
    /// Services by (namespace, name): spec.selector.
    pub services: HashMap<(String, String), Labels>,
    /// ReplicationControllers by (namespace, name): spec.selector.
    pub replication_controllers: HashMap<(String, String), Labels>,
    /// ReplicaSets and StatefulSets by (kind, namespace, name): spec.selector.
    pub sets: HashMap<(String, String, String), LabelSelector>,
}

static EMPTY_LABELS: std::sync::LazyLock<Labels> = std::sync::LazyLock::new(Labels::new);

impl Snapshot {
    /// Builds a snapshot from nodes and namespace labels.
    pub fn new(nodes: Vec<Arc<NodeInfo>>, namespaces: HashMap<String, Labels>) -> Self {
        let mut s = Snapshot { namespaces: Arc::new(namespaces), ..Default::default() };
        s.set_nodes(nodes);
        s
    }

    /// Replaces the node list, recomputing the indexes (images only when `images_changed`).
    pub fn set_nodes(&mut self, nodes: Vec<Arc<NodeInfo>>) {
        self.index = Arc::new(nodes.iter().enumerate().map(|(i, n)| (n.name.clone(), i)).collect());
        self.generations = nodes.iter().map(|n| n.generation).collect();
        self.nodes = nodes;
        self.epoch = crate::node_info::next_generation();
        self.refresh_pod_indexes();
        self.refresh_images();
    }

    /// Recomputes the per-node affinity indexes.
    pub fn refresh_pod_indexes(&mut self) {
        self.with_affinity.clear();
        self.with_required_anti_affinity.clear();
        for (i, n) in self.nodes.iter().enumerate() {
            if !n.pods_with_affinity.is_empty() {
                self.with_affinity.push(i);
            }
            if !n.pods_with_required_anti_affinity.is_empty() {
                self.with_required_anti_affinity.push(i);
            }
        }
    }

    /// Updates the affinity indexes for one node whose pods changed.
    pub fn set_pod_flags(&mut self, i: usize) {
        let Some(node) = self.nodes.get(i) else { return };
        let flags = [!node.pods_with_affinity.is_empty(), !node.pods_with_required_anti_affinity.is_empty()];
        for (list, on) in [&mut self.with_affinity, &mut self.with_required_anti_affinity].into_iter().zip(flags) {
            match (list.binary_search(&i), on) {
                (Err(at), true) => list.insert(at, i),
                (Ok(at), false) => {
                    list.remove(at);
                }
                _ => {}
            }
        }
    }

    /// Recomputes how many nodes hold each image.
    pub fn refresh_images(&mut self) {
        let mut counts: HashMap<String, usize> = HashMap::new();
        for n in &self.nodes {
            for (img, _) in &n.images {
                *counts.entry(img.clone()).or_default() += 1;
            }
        }
        self.image_nodes = Arc::new(counts);
    }

    /// Replaces one node (same name), keeping the indexes current.
    pub fn replace_node(&mut self, i: usize, node: Arc<NodeInfo>) {
        if let (Some(slot), Some(g)) = (self.nodes.get_mut(i), self.generations.get_mut(i)) {
            *g = node.generation;
            *slot = node;
        }
    }

    /// The labels of a namespace (empty when unknown).
    pub fn namespace_labels(&self, ns: &str) -> &Labels {
        self.namespaces.get(ns).unwrap_or(&EMPTY_LABELS)
    }

    /// A node by name.
    pub fn node(&self, name: &str) -> Option<&Arc<NodeInfo>> {
        self.index.get(name).and_then(|i| self.nodes.get(*i))
    }

    /// A node's index by name.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether there are no nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
}
