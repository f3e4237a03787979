//! The kinds of the storage objects the volume plugins read, for their events.

use crate::object_kind;
use crate::objects::ObjectKind;

/// PersistentVolumeClaim.
pub const CLAIM: ObjectKind = object_kind!("PersistentVolumeClaim");
/// PersistentVolume.
pub const VOLUME: ObjectKind = object_kind!("PersistentVolume");
/// StorageClass.
pub const CLASS: ObjectKind = object_kind!("StorageClass");
/// CSINode.
pub const CSI_NODE: ObjectKind = object_kind!("CSINode");
/// CSIDriver.
pub const CSI_DRIVER: ObjectKind = object_kind!("CSIDriver");
/// CSIStorageCapacity.
pub const CAPACITY: ObjectKind = object_kind!("CSIStorageCapacity");
