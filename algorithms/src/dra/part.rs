//! The DRA objects as a part of the cluster objects.

use std::sync::{Arc, LazyLock};

use super::DraState;
use crate::objects::{ClusterObjects, ObjectPart};

/// The prefix of a report column of a DeviceClass's devices (`devices:<class>`: the
/// node's devices of the class, and how many of them claims hold).
pub const DEVICES_PREFIX: &str = "devices:";

/// The DRA objects in [`ClusterObjects`].
pub trait DraObjects {
    /// ResourceClaims, ResourceSlices, DeviceClasses and ResourceClaimTemplates, with the
    /// allocations assumed on top (empty when none were stored).
    fn dra(&self) -> &DraState;
    /// The same, to hold on to while these objects change.
    fn dra_shared(&self) -> Arc<DraState>;
    /// The same, to change.
    fn dra_mut(&mut self) -> &mut DraState;
}

impl DraObjects for ClusterObjects {
    fn dra(&self) -> &DraState {
        static EMPTY: LazyLock<DraState> = LazyLock::new(DraState::default);
        self.get::<DraState>().unwrap_or_else(|| &EMPTY)
    }

    fn dra_shared(&self) -> Arc<DraState> {
        self.shared::<DraState>().unwrap_or_default()
    }

    fn dra_mut(&mut self) -> &mut DraState {
        self.get_mut::<DraState>()
    }
}

impl ObjectPart for DraState {
    fn stamp(&self) -> u64 {
        self.classes_version().wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ self.slices_version()
    }
}
