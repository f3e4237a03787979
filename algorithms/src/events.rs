//! Cluster events that may make a rejected pod schedulable, and the queueing hints with
//! which each filter plugin says whether an event can help a pod it rejected (as
//! kube-scheduler's `EnqueueExtensions` do).

use std::sync::Arc;

use crate::node_info::NodeInfo;
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
    /// A storage object was added, updated or deleted.
    Storage(StorageEvent),
}

/// The kinds of cluster objects beyond nodes and pods: the storage objects the volume
/// plugins read and the DRA objects DynamicResources reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StorageKind {
    /// PersistentVolumeClaim.
    Claim,
    /// PersistentVolume.
    Volume,
    /// StorageClass.
    Class,
    /// CSINode.
    CsiNode,
    /// CSIDriver.
    CsiDriver,
    /// CSIStorageCapacity.
    Capacity,
    /// ResourceClaim (`resource.k8s.io`).
    ResourceClaim,
    /// ResourceSlice.
    ResourceSlice,
    /// DeviceClass.
    DeviceClass,
    /// ResourceClaimTemplate.
    ResourceClaimTemplate,
}

/// What happened to a storage object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StorageAction {
    /// Created.
    Add,
    /// Changed.
    Update,
    /// Deleted.
    Delete,
}

/// A change of one storage object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageEvent {
    /// The object's kind.
    pub kind: StorageKind,
    /// What happened.
    pub action: StorageAction,
    /// The object's key: `namespace/name` for claims and capacities, else its name.
    pub key: String,
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
            ClusterEvent::Storage(e) => e.label(),
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

impl StorageEvent {
    /// kube-scheduler's name of the event (`PersistentVolumeClaimAdd`, `CSINodeUpdate`).
    pub fn label(&self) -> &'static str {
        use StorageAction::{Add, Delete, Update};
        use StorageKind::*;
        match (self.kind, self.action) {
            (Claim, Add) => "PersistentVolumeClaimAdd",
            (Claim, Update) => "PersistentVolumeClaimUpdate",
            (Claim, Delete) => "PersistentVolumeClaimDelete",
            (Volume, Add) => "PersistentVolumeAdd",
            (Volume, Update) => "PersistentVolumeUpdate",
            (Volume, Delete) => "PersistentVolumeDelete",
            (Class, Add) => "StorageClassAdd",
            (Class, Update) => "StorageClassUpdate",
            (Class, Delete) => "StorageClassDelete",
            (CsiNode, Add) => "CSINodeAdd",
            (CsiNode, Update) => "CSINodeUpdate",
            (CsiNode, Delete) => "CSINodeDelete",
            (CsiDriver, Add) => "CSIDriverAdd",
            (CsiDriver, Update) => "CSIDriverUpdate",
            (CsiDriver, Delete) => "CSIDriverDelete",
            (Capacity, Add) => "CSIStorageCapacityAdd",
            (Capacity, Update) => "CSIStorageCapacityUpdate",
            (Capacity, Delete) => "CSIStorageCapacityDelete",
            (ResourceClaim, Add) => "ResourceClaimAdd",
            (ResourceClaim, Update) => "ResourceClaimUpdate",
            (ResourceClaim, Delete) => "ResourceClaimDelete",
            (ResourceSlice, Add) => "ResourceSliceAdd",
            (ResourceSlice, Update) => "ResourceSliceUpdate",
            (ResourceSlice, Delete) => "ResourceSliceDelete",
            (DeviceClass, Add) => "DeviceClassAdd",
            (DeviceClass, Update) => "DeviceClassUpdate",
            (DeviceClass, Delete) => "DeviceClassDelete",
            (ResourceClaimTemplate, Add) => "ResourceClaimTemplateAdd",
            (ResourceClaimTemplate, Update) => "ResourceClaimTemplateUpdate",
            (ResourceClaimTemplate, Delete) => "ResourceClaimTemplateDelete",
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
