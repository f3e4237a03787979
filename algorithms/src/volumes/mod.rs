//! Volumes: the storage objects the volume plugins read, the volumes of pods, and the
//! shared store that holds the objects with the bindings the scheduler assumed.

pub mod builders;
pub mod kinds;
pub mod migration;
pub mod objects;
mod part;
pub mod pod;
pub mod store;
mod writes;

pub use migration::VolumeHandle;
pub use objects::{Capacity, ClaimRef, CsiDriver, CsiNode, StorageClass, Volume, VolumeClaim};
pub use part::VolumeObjects;
pub use pod::{Disk, PodClaim, PodVolumes};
pub use store::VolumeState;
pub use writes::VolumeWrite;
