//! The kinds of the DRA objects (`resource.k8s.io`) DynamicResources reads, for their events.

use crate::object_kind;
use crate::objects::ObjectKind;

/// ResourceClaim.
pub const RESOURCE_CLAIM: ObjectKind = object_kind!("ResourceClaim");
/// ResourceSlice.
pub const RESOURCE_SLICE: ObjectKind = object_kind!("ResourceSlice");
/// DeviceClass.
pub const DEVICE_CLASS: ObjectKind = object_kind!("DeviceClass");
/// ResourceClaimTemplate.
pub const RESOURCE_CLAIM_TEMPLATE: ObjectKind = object_kind!("ResourceClaimTemplate");
