//! kube-scheduler's in-tree plugins, one file each, the default profile, and plugins of
//! our own and others' that a profile enables by name (DevicePacking, CapacityScheduling,
//! ElasticQuota).

pub mod balanced_allocation;
pub mod capacity_scheduling;
pub mod device_packing;
pub mod dynamic_resources;
pub mod elastic_quota;
#[cfg(test)]
mod hints_tests;
pub mod image_locality;
pub mod inter_pod_affinity;
pub mod node_affinity;
pub mod node_declared_features;
pub mod node_name;
pub mod node_ports;
pub mod node_resources_fit;
pub mod node_unschedulable;
pub mod node_volume_limits;
pub mod pod_topology_spread;
pub mod registry;
pub mod resource_allocation;
pub mod roles;
pub mod taint_toleration;
pub mod volume_binding;
pub mod volume_restrictions;
pub mod volume_zone;

use thiserror::Error;

/// Plugin arguments that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid args for plugin {plugin}: {message}")]
pub struct ArgsError {
    /// The plugin.
    pub plugin: String,
    /// What is wrong.
    pub message: String,
}

impl ArgsError {
    /// A new error for `plugin`.
    pub fn new(plugin: &str, message: impl Into<String>) -> Self {
        ArgsError { plugin: plugin.to_string(), message: message.into() }
    }
}
