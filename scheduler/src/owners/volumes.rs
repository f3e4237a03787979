//! The storage objects in `run`: the watches of PersistentVolumeClaims,
//! PersistentVolumes, StorageClasses, CSINodes, CSIDrivers and CSIStorageCapacities, and
//! VolumeBinding's PreBind PATCHes.

use algorithms::framework::{ApiWrite, resource_version as version};
use algorithms::volumes::kinds::{CAPACITY, CLAIM, CLASS, CSI_DRIVER, CSI_NODE, VOLUME};
use algorithms::volumes::objects::{BOUND_BY_CONTROLLER, SELECTED_NODE};
use algorithms::volumes::{
    Capacity, CsiDriver, CsiNode, StorageClass, Volume, VolumeClaim, VolumeObjects, VolumeWrite,
};
use futures::FutureExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1 as storage;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::{ApiOwner, Op, ops, store};

/// The storage objects' API side.
#[derive(Debug, Default)]
pub struct Volumes;

impl ApiOwner for Volumes {
    fn watches(&self, client: &Client) -> Vec<BoxStream<'static, Op>> {
        vec![
            ops::<PersistentVolumeClaim>(
                client,
                CLAIM,
                "persistentvolumeclaims",
                |o| Ok(store(VolumeClaim::from_api(o)?, |st, c| st.volumes_mut().upsert_claim(c).is_some())),
                |st, key| st.volumes_mut().remove_claim(key).is_some(),
            ),
            ops::<PersistentVolume>(
                client,
                VOLUME,
                "persistentvolumes",
                |o| Ok(store(Volume::from_api(o)?, |st, v| st.volumes_mut().upsert_volume(v).is_some())),
                |st, key| st.volumes_mut().remove_volume(key).is_some(),
            ),
            ops::<storage::StorageClass>(
                client,
                CLASS,
                "storageclasses",
                |o| Ok(store(StorageClass::from_api(o)?, |st, c| st.volumes_mut().upsert_class(c).is_some())),
                |st, key| st.volumes_mut().remove_class(key).is_some(),
            ),
            ops::<storage::CSINode>(
                client,
                CSI_NODE,
                "csinodes",
                |o| Ok(store(CsiNode::from_api(o)?, |st, n| st.volumes_mut().upsert_csi_node(n).is_some())),
                |st, key| st.volumes_mut().remove_csi_node(key).is_some(),
            ),
            ops::<storage::CSIDriver>(
                client,
                CSI_DRIVER,
                "csidrivers",
                |o| Ok(store(CsiDriver::from_api(o)?, |st, d| st.volumes_mut().upsert_driver(d).is_some())),
                |st, key| st.volumes_mut().remove_driver(key).is_some(),
            ),
            ops::<storage::CSIStorageCapacity>(
                client,
                CAPACITY,
                "csistoragecapacities",
                |o| Ok(store(Capacity::from_api(o)?, |st, c| st.volumes_mut().upsert_capacity(c).is_some())),
                |st, key| st.volumes_mut().remove_capacity(key).is_some(),
            ),
        ]
    }

    fn write<'a>(&'a self, client: &'a Client, write: &'a ApiWrite) -> Option<BoxFuture<'a, Result<u64, String>>> {
        let write = write.get::<VolumeWrite>()?;
        Some(apply(client, write).boxed())
    }
}

/// Makes one of VolumeBinding's writes, with the resource version it was assumed over as
/// precondition.
async fn apply(client: &Client, write: &VolumeWrite) -> Result<u64, String> {
    let params = PatchParams::default();
    match write {
        VolumeWrite::BindVolume { volume, claim } => {
            let api: Api<PersistentVolume> = Api::all(client.clone());
            let mut annotations = serde_json::Map::new();
            if let Some(v) = volume.annotations.get(BOUND_BY_CONTROLLER) {
                annotations.insert(BOUND_BY_CONTROLLER.into(), v.clone().into());
            }
            let patch = json!({
                "metadata": {"resourceVersion": volume.resource_version, "annotations": annotations},
                "spec": {"claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                    "namespace": claim.namespace, "name": claim.name, "uid": claim.uid}},
            });
            let pv = api.patch(&volume.name, &params, &Patch::Merge(&patch)).await.map_err(|e| {
                format!("binding volume {} to claim {}: {}", volume.name, claim.key(), crate::watch::cause::Told(&e))
            })?;
            Ok(version(pv.metadata.resource_version.as_deref().unwrap_or_default()))
        }
        VolumeWrite::SelectNode { claim, node } => {
            let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &claim.namespace);
            let patch = json!({"metadata": {"resourceVersion": claim.resource_version,
                "annotations": {SELECTED_NODE: node}}});
            let pvc = api.patch(&claim.name, &params, &Patch::Merge(&patch)).await.map_err(|e| {
                format!("selecting node {node} for claim {}: {}", claim.key(), crate::watch::cause::Told(&e))
            })?;
            Ok(version(pvc.metadata.resource_version.as_deref().unwrap_or_default()))
        }
    }
}
