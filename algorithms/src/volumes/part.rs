//! The storage objects as a part of the cluster objects.

use std::sync::LazyLock;

use super::VolumeState;
use crate::objects::{ClusterObjects, ObjectPart};

/// The storage objects in [`ClusterObjects`].
pub trait VolumeObjects {
    /// PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes, CSIDrivers
    /// and CSIStorageCapacities, with the bindings assumed on top (empty when none were
    /// stored).
    fn volumes(&self) -> &VolumeState;
    /// The same, to change.
    fn volumes_mut(&mut self) -> &mut VolumeState;
}

impl VolumeObjects for ClusterObjects {
    fn volumes(&self) -> &VolumeState {
        static EMPTY: LazyLock<VolumeState> = LazyLock::new(VolumeState::default);
        self.get::<VolumeState>().unwrap_or_else(|| &EMPTY)
    }

    fn volumes_mut(&mut self) -> &mut VolumeState {
        self.get_mut::<VolumeState>()
    }
}

impl ObjectPart for VolumeState {}
