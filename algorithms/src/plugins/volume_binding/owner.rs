//! The storage objects as an [`Owner`] of cluster objects: read from dumps, bound and
//! provisioned by the in-memory PV controller in `simulate`.

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::storage::v1 as storage;
use serde_json::Value;

use super::controller::VolumeController;
use crate::objects::ClusterObjects;
use crate::owners::{Controller, ObjectError, Owner, read};
use crate::volumes::{Capacity, CsiDriver, CsiNode, StorageClass, Volume, VolumeClaim, VolumeObjects};

/// The owner of the storage objects (see [`Owner`]).
#[derive(Debug, Default)]
pub struct Volumes;

impl Owner for Volumes {
    fn name(&self) -> &'static str {
        "volumes"
    }

    fn load(&self, objects: &mut ClusterObjects, kind: &str, object: &Value) -> Option<Result<(), ObjectError>> {
        let st = objects.volumes_mut();
        let stored = match kind {
            "PersistentVolumeClaim" => read::<core::PersistentVolumeClaim, _>(object, VolumeClaim::from_api).map(|c| {
                st.upsert_claim(c);
            }),
            "PersistentVolume" => read::<core::PersistentVolume, _>(object, Volume::from_api).map(|v| {
                st.upsert_volume(v);
            }),
            "StorageClass" => read::<storage::StorageClass, _>(object, StorageClass::from_api).map(|c| {
                st.upsert_class(c);
            }),
            "CSINode" => read::<storage::CSINode, _>(object, CsiNode::from_api).map(|n| {
                st.upsert_csi_node(n);
            }),
            "CSIDriver" => read::<storage::CSIDriver, _>(object, CsiDriver::from_api).map(|d| {
                st.upsert_driver(d);
            }),
            "CSIStorageCapacity" => read::<storage::CSIStorageCapacity, _>(object, Capacity::from_api).map(|c| {
                st.upsert_capacity(c);
            }),
            _ => return None,
        };
        Some(stored)
    }

    fn counts(&self, objects: &ClusterObjects) -> Vec<(&'static str, usize)> {
        let [claims, volumes, classes, csi_nodes, drivers, capacities] = objects.volumes().counts();
        vec![
            ("claims", claims),
            ("volumes", volumes),
            ("classes", classes),
            ("csi_nodes", csi_nodes),
            ("drivers", drivers),
            ("capacities", capacities),
        ]
    }

    fn controller(&self) -> Box<dyn Controller> {
        Box::<VolumeController>::default()
    }
}
