//! Synthetic clusters: the built-in demo and scheduler_perf-style workloads.

pub mod demo;
pub mod dra;
pub mod multitenant;
pub mod workloads;

use k8s_openapi::api::core::v1 as core;

/// A generated cluster: nodes, pods (bound ones carry `spec.nodeName`) and namespaces.
#[derive(Debug, Clone, Default)]
pub struct GeneratedCluster {
    /// Nodes.
    pub nodes: Vec<core::Node>,
    /// Pods, bound first, then pending in creation order.
    pub pods: Vec<core::Pod>,
    /// Namespaces.
    pub namespaces: Vec<core::Namespace>,
}

/// A namespace object with labels.
pub fn namespace(name: &str, labels: &[(&str, &str)]) -> core::Namespace {
    core::Namespace {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.into()),
            labels: Some(labels.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect()),
            ..Default::default()
        },
        ..Default::default()
    }
}
