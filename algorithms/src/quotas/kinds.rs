//! The kind of the quota objects (`scheduling.x-k8s.io`) CapacityScheduling reads, for
//! their events.

use crate::object_kind;
use crate::objects::ObjectKind;

/// ElasticQuota.
pub const ELASTIC_QUOTA: ObjectKind = object_kind!("ElasticQuota");
