//! `NodeInfo`: a node with the pods on it and running totals, kept current incrementally.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use k8s_openapi::api::core::v1 as core;
use thiserror::Error;

use crate::labels::Labels;
use crate::pod_info::{HostPort, PodInfo};
use crate::quantity::QuantityError;
use crate::resource::Resource;
use crate::taints::Taint;

static GENERATION: AtomicU64 = AtomicU64::new(1);

/// A fresh, process-wide increasing generation number.
pub fn next_generation() -> u64 {
    GENERATION.fetch_add(1, Ordering::Relaxed)
}

/// A node that cannot be turned into a `NodeInfo`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NodeError {
    /// `metadata.name` is missing.
    #[error("node has no metadata.name")]
    MissingName,
    /// An allocatable quantity is malformed.
    #[error("node {node}: failed to read status.allocatable: {source}")]
    Allocatable {
        /// Node name.
        node: String,
        /// The cause.
        #[source]
        source: QuantityError,
    },
}

/// A node, the pods assigned to it and what they use.
#[derive(Debug, Clone, Default)]
pub struct NodeInfo {
    /// Node name.
    pub name: String,
    /// Node labels.
    pub labels: Labels,
    /// Taints.
    pub taints: Vec<Taint>,
    /// `spec.unschedulable`.
    pub unschedulable: bool,
    /// `status.declaredFeatures`, sorted.
    pub declared_features: Vec<String>,
    /// Allocatable resources.
    pub allocatable: Resource,
    /// Sum of the requests of the pods on the node.
    pub requested: Resource,
    /// CPU requested with the 100m default per container without a request.
    pub non_zero_milli_cpu: i64,
    /// Memory requested with the 200Mi default per container without a request.
    pub non_zero_memory: i64,
    /// The pods on the node.
    pub pods: Vec<Arc<PodInfo>>,
    /// Pods with any pod (anti-)affinity term.
    pub pods_with_affinity: Vec<Arc<PodInfo>>,
    /// Pods with a required anti-affinity term.
    pub pods_with_required_anti_affinity: Vec<Arc<PodInfo>>,
    /// Host ports in use.
    pub used_ports: Vec<HostPort>,
    /// Images present on the node: (normalized name, size in bytes), sorted by name.
    pub images: Vec<(String, i64)>,
    /// Changes whenever the node or its pods change.
    pub generation: u64,
}

impl NodeInfo {
    /// Parses an API node.
    pub fn from_node(node: &core::Node) -> Result<Self, NodeError> {
        let name = node.metadata.name.clone().ok_or(NodeError::MissingName)?;
        let spec = node.spec.as_ref();
        let status = node.status.as_ref();
        let allocatable = status
            .and_then(|s| s.allocatable.as_ref())
            .map(Resource::from_list)
            .transpose()
            .map_err(|source| NodeError::Allocatable { node: name.clone(), source })?
            .unwrap_or_default();
        let mut images: Vec<(String, i64)> = status
            .and_then(|s| s.images.as_ref())
            .into_iter()
            .flatten()
            .flat_map(|img| {
                let size = img.size_bytes.unwrap_or(0);
                img.names.iter().flatten().map(move |n| (n.clone(), size))
            })
            .collect();
        images.sort();
        images.dedup_by(|a, b| a.0 == b.0);
        Ok(NodeInfo {
            name,
            labels: node.metadata.labels.clone().unwrap_or_default(),
            taints: spec.and_then(|s| s.taints.as_ref()).into_iter().flatten().map(Taint::from_api).collect(),
            unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
            declared_features: {
                let mut f = node.status.as_ref().and_then(|s| s.declared_features.clone()).unwrap_or_default();
                f.sort();
                f
            },
            allocatable,
            images,
            generation: next_generation(),
            ..Default::default()
        })
    }

    /// Replaces the node object while keeping its pods and totals.
    pub fn update_node(&mut self, fresh: NodeInfo) {
        self.labels = fresh.labels;
        self.taints = fresh.taints;
        self.unschedulable = fresh.unschedulable;
        self.declared_features = fresh.declared_features;
        self.allocatable = fresh.allocatable;
        self.images = fresh.images;
        self.generation = next_generation();
    }

    /// Adds a pod and its requests and ports.
    pub fn add_pod(&mut self, pod: Arc<PodInfo>) {
        self.requested.add(&pod.requests.requests);
        self.requested.allowed_pod_number += 1;
        self.non_zero_milli_cpu += pod.requests.placed_non_zero.0;
        self.non_zero_memory += pod.requests.placed_non_zero.1;
        self.used_ports.extend(pod.host_ports.iter().cloned());
        if pod.has_affinity() {
            self.pods_with_affinity.push(pod.clone());
        }
        if !pod.required_anti_affinity.is_empty() {
            self.pods_with_required_anti_affinity.push(pod.clone());
        }
        self.pods.push(pod);
        self.generation = next_generation();
    }

    /// Removes the pod with this namespace and name; returns it when found.
    pub fn remove_pod(&mut self, namespace: &str, name: &str) -> Option<Arc<PodInfo>> {
        let is = |p: &Arc<PodInfo>| p.namespace == namespace && p.name == name;
        let idx = self.pods.iter().position(is)?;
        let pod = self.pods.swap_remove(idx);
        self.pods_with_affinity.retain(|p| !is(p));
        self.pods_with_required_anti_affinity.retain(|p| !is(p));
        self.requested.sub(&pod.requests.requests);
        self.requested.allowed_pod_number -= 1;
        self.non_zero_milli_cpu -= pod.requests.placed_non_zero.0;
        self.non_zero_memory -= pod.requests.placed_non_zero.1;
        for hp in &pod.host_ports {
            if let Some(i) = self.used_ports.iter().position(|u| u == hp) {
                self.used_ports.swap_remove(i);
            }
        }
        self.generation = next_generation();
        Some(pod)
    }

    /// The size of an image on this node, if present.
    pub fn image_size(&self, normalized: &str) -> Option<i64> {
        self.images
            .binary_search_by(|(n, _)| n.as_str().cmp(normalized))
            .ok()
            .and_then(|i| self.images.get(i))
            .map(|(_, s)| *s)
    }
}
