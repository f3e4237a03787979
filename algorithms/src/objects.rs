//! Cluster objects beyond nodes and pods: what plugins read in their cycle and what the
//! binding half assumes in Reserve until the API server's versions arrive.
//!
//! The cache owns one [`ClusterObjects`] and changes it (watch events, Reserve,
//! Unreserve); a snapshot holds an immutable copy taken when it is refreshed. The maps
//! inside are persistent, so the copy costs constant time.

use crate::dra::DraState;
use crate::volumes::VolumeState;

/// Claims, volumes, storage classes and CSI objects, and the DRA objects.
#[derive(Debug, Clone, Default)]
pub struct ClusterObjects {
    /// PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes, CSIDrivers
    /// and CSIStorageCapacities, with the bindings assumed on top.
    pub volumes: VolumeState,
    /// ResourceClaims, ResourceSlices, DeviceClasses and ResourceClaimTemplates, with the
    /// allocations assumed on top.
    pub dra: DraState,
}

impl ClusterObjects {
    /// Objects holding only these storage objects.
    pub fn with_volumes(volumes: VolumeState) -> Self {
        ClusterObjects { volumes, dra: DraState::default() }
    }
}
