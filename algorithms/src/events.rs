//! Cluster events that may make a rejected pod schedulable, and the queueing hints with
//! which each filter plugin says whether an event can help a pod it rejected (as
//! kube-scheduler's `EnqueueExtensions` do).

use std::sync::Arc;

use crate::node_info::NodeInfo;
pub use crate::objects::{ObjectAction, ObjectEvent, ObjectKind};
use crate::pod_info::PodInfo;

/// A change the scheduler saw: from the watch, or its own assumption of a pod.
#[derive(Debug, Clone)]
pub enum ClusterEvent {
    /// A node appeared.
    NodeAdded(Arc<NodeInfo>),
    /// A node's labels, taints, schedulability, allocatable or images changed.
    NodeUpdated {
        /// Before.
        old: Arc<NodeInfo>,
        /// After.
        new: Arc<NodeInfo>,
    },
    /// A node went away.
    NodeDeleted(Arc<NodeInfo>),
    /// A pod was placed on a node: bound by someone else, or assumed by this scheduler.
    PodAdded(Arc<PodInfo>),
    /// A placed pod's labels changed.
    PodUpdated {
        /// Before.
        old: Arc<PodInfo>,
        /// After.
        new: Arc<PodInfo>,
    },
    /// A placed pod went away: deleted, finished, or its assumption forgotten.
    PodDeleted(Arc<PodInfo>),
    /// A cluster object beyond nodes and pods was added, updated or deleted.
    Object(ObjectEvent),
}

impl ClusterEvent {
    /// A short label for logs and metrics, as kube-scheduler names events.
    pub fn label(&self) -> &'static str {
        match self {
            ClusterEvent::NodeAdded(_) => "NodeAdd",
            ClusterEvent::NodeUpdated { .. } => "NodeUpdate",
            ClusterEvent::NodeDeleted(_) => "NodeDelete",
            ClusterEvent::PodAdded(_) => "AssignedPodAdd",
            ClusterEvent::PodUpdated { .. } => "AssignedPodUpdate",
            ClusterEvent::PodDeleted(_) => "AssignedPodDelete",
            ClusterEvent::Object(e) => e.label(),
        }
    }

    /// The node of a node event.
    pub fn node(&self) -> Option<&NodeInfo> {
        match self {
            ClusterEvent::NodeAdded(n) | ClusterEvent::NodeDeleted(n) => Some(n),
            ClusterEvent::NodeUpdated { new, .. } => Some(new),
            _ => None,
        }
    }

    /// The pod of a pod event (the new one of an update).
    pub fn pod(&self) -> Option<&PodInfo> {
        match self {
            ClusterEvent::PodAdded(p) | ClusterEvent::PodDeleted(p) => Some(p),
            ClusterEvent::PodUpdated { new, .. } => Some(new),
            _ => None,
        }
    }
}

/// Whether a rejected pod is worth another attempt after an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueingHint {
    /// The event may make the pod schedulable: retry it.
    Queue,
    /// The event cannot help: leave the pod where it is.
    Skip,
}

impl QueueingHint {
    /// `Queue` when `may_help`.
    pub fn from_bool(may_help: bool) -> Self {
        if may_help { QueueingHint::Queue } else { QueueingHint::Skip }
    }
}

/// Whether a node update changed its taints or schedulability. kube-scheduler requeues
/// pods rejected by plugins that register node additions on such changes too.
pub fn taints_changed(old: &NodeInfo, new: &NodeInfo) -> bool {
    old.taints != new.taints || old.unschedulable != new.unschedulable
}
