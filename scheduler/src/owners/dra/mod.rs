//! The DRA objects in `run`: the watches of ResourceClaims, ResourceSlices and
//! DeviceClasses, and DynamicResources' writes (claim allocations and reservations,
//! extended resource claims, Unreserve's releases, PostFilter's deallocations).

mod extended;

use algorithms::dra::kinds::{DEVICE_CLASS, RESOURCE_CLAIM, RESOURCE_SLICE};
use algorithms::dra::{Claim, ClaimWrite, DeviceClass, DraObjects, DraWrite, Slice};
use algorithms::framework::{ApiWrite, resource_version as version};
use futures::FutureExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use k8s_openapi::api::resource::v1 as resource;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::{ApiOwner, Op, ops, store};

/// The DRA objects' API side.
#[derive(Debug, Default)]
pub struct Dra;

impl ApiOwner for Dra {
    fn watches(&self, client: &Client) -> Vec<BoxStream<'static, Op>> {
        vec![
            ops::<resource::ResourceClaim>(
                client,
                RESOURCE_CLAIM,
                "resourceclaims",
                |o| Ok(store(Claim::from_api(o)?, |st, c| st.dra_mut().upsert_claim(c).is_some())),
                |st, key| st.dra_mut().remove_claim(key).is_some(),
            ),
            ops::<resource::ResourceSlice>(
                client,
                RESOURCE_SLICE,
                "resourceslices",
                |o| Ok(store(Slice::from_api(o)?, |st, s| st.dra_mut().upsert_slice(s).is_some())),
                |st, key| st.dra_mut().remove_slice(key).is_some(),
            ),
            ops::<resource::DeviceClass>(
                client,
                DEVICE_CLASS,
                "deviceclasses",
                |o| Ok(store(DeviceClass::from_api(o)?, |st, c| st.dra_mut().upsert_class(c).is_some())),
                |st, key| st.dra_mut().remove_class(key).is_some(),
            ),
        ]
    }

    fn write<'a>(&'a self, client: &'a Client, write: &'a ApiWrite) -> Option<BoxFuture<'a, Result<u64, String>>> {
        let write = write.get::<DraWrite>()?;
        Some(apply(client, write).boxed())
    }
}

/// Makes one of DynamicResources' writes.
async fn apply(client: &Client, write: &DraWrite) -> Result<u64, String> {
    match write {
        DraWrite::Claim(w) => write_claim(client, w).await,
        DraWrite::CreateClaim(w) => extended::create(client, w).await,
        DraWrite::DeleteClaim { namespace, name } => extended::delete(client, namespace, name).await,
        DraWrite::PodExtendedClaim { namespace, pod, claim, mappings } => {
            extended::record(client, namespace, pod, claim, mappings).await
        }
        DraWrite::ReleaseClaim { namespace, name, claim_uid, pod_uid } => {
            // kube-scheduler's Unreserve patch: the entry of the pod goes, whatever
            // else changed in the claim meanwhile.
            let api: Api<resource::ResourceClaim> = Api::namespaced(client.clone(), namespace);
            let patch = json!({"metadata": {"uid": claim_uid},
                "status": {"reservedFor": [{"$patch": "delete", "uid": pod_uid}]}});
            let claim = api
                .patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
                .await
                .map_err(|e| format!("unreserve claim {namespace}/{name}: {}", crate::watch::cause::Told(&e)))?;
            Ok(version(claim.metadata.resource_version.as_deref().unwrap_or_default()))
        }
    }
}

/// Writes a claim as DynamicResources' PreBind does: the delete-protection finalizer
/// first when it is missing, then `status.allocation` and `status.reservedFor`, each with
/// the resource version it was made over as precondition (a conflict fails the write).
async fn write_claim(client: &Client, w: &ClaimWrite) -> Result<u64, String> {
    let claim = &w.claim;
    let api: Api<resource::ResourceClaim> = Api::namespaced(client.clone(), &claim.namespace);
    let params = PatchParams::default();
    let mut rv = claim.api.metadata.resource_version.clone().unwrap_or_default();
    let what = w.verb();
    if w.add_finalizer {
        let patch = json!({"metadata": {"resourceVersion": rv, "finalizers": claim.api.metadata.finalizers}});
        let updated = api
            .patch(&claim.name, &params, &Patch::Merge(&patch))
            .await
            .map_err(|e| format!("add finalizer to claim {}: {}", claim.key(), crate::watch::cause::Told(&e)))?;
        rv = updated.metadata.resource_version.unwrap_or_default();
    }
    let status = claim.api.status.clone().unwrap_or_default();
    let mut fields = json!({"allocation": status.allocation, "reservedFor": status.reserved_for});
    if status.allocation.is_none() {
        // A deallocation also drops what drivers reported about the devices.
        fields["devices"] = serde_json::Value::Null;
    }
    let patch = json!({"metadata": {"resourceVersion": rv}, "status": fields});
    let updated = api
        .patch_status(&claim.name, &params, &Patch::Merge(&patch))
        .await
        .map_err(|e| format!("{what} claim {}: {}", claim.key(), crate::watch::cause::Told(&e)))?;
    Ok(version(updated.metadata.resource_version.as_deref().unwrap_or_default()))
}
