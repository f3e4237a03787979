//! The scheduling algorithms of custom-scheduler: kube-scheduler's semantics, parsed once, run in parallel.
//!
//! Pure library: no API client and no async runtime. Pods and nodes enter as
//! `k8s-openapi` objects and are parsed into [`PodInfo`] and [`NodeInfo`]; a
//! [`Snapshot`] of nodes is what one scheduling cycle reads; a [`Profile`] lists
//! the filter and score plugins that [`framework::evaluate`] runs over it.

pub mod budgets;
pub mod builders;
pub mod config;
pub mod device_asks;
pub mod dra;
pub mod events;
pub mod extender_config;
pub mod features;
pub mod framework;
pub mod labels;
mod lru;
pub mod node_features;
pub mod node_info;
pub mod objects;
pub mod owners;
pub mod placement;
pub mod plugins;
pub mod pod_info;
pub mod preemption;
pub mod quantity;
pub mod quotas;
pub mod requests;
pub mod resource;
pub mod snapshot;
pub mod status;
pub mod taints;
pub mod volumes;

pub use framework::{Evaluation, Profile};
pub use node_info::NodeInfo;
pub use pod_info::PodInfo;
pub use snapshot::Snapshot;
pub use status::{Code, Status};
