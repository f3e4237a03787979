//! The API calls behind a pod's extended resource claim (extended resources backed by
//! DRA): creating it and writing its allocation, recording it in the pod's status, and
//! deleting it when the binding cycle fails or a later attempt finds it left over.

use std::sync::Arc;

use algorithms::dra::extended::Mapping;
use algorithms::dra::{Claim, ClaimWrite, FINALIZER};
use algorithms::framework::resource_version as version;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tracing::warn;

/// Creates the claim (with the delete-protection finalizer), then writes its allocation
/// and `reservedFor` over the version the creation made. A failed status write deletes
/// the claim again, so that nothing is left behind.
pub(super) async fn create(client: &Client, w: &ClaimWrite) -> Result<u64, String> {
    let claim = &w.claim;
    let api: Api<ResourceClaim> = Api::namespaced(client.clone(), &claim.namespace);
    let mut object = (*claim.api).clone();
    object.status = None;
    object.metadata.resource_version = None;
    object.metadata.uid = None;
    let created = api.create(&PostParams::default(), &object).await.map_err(|e| {
        format!("create claim for extended resources {}: {}", claim.key(), crate::watch::cause::Told(&e))
    })?;
    let mut assumed = (*claim.api).clone();
    assumed.metadata.resource_version = created.metadata.resource_version.clone();
    assumed.metadata.uid = created.metadata.uid.clone();
    let parsed = Claim::from_api(&assumed)?;
    let write = ClaimWrite { claim: Arc::new(parsed), add_finalizer: false, allocated: true };
    match super::write_claim(client, &write).await {
        Ok(v) => Ok(v),
        Err(e) => {
            if let Err(d) = delete(client, &claim.namespace, &claim.name).await {
                warn!(claim = %claim.key(), error = %d, "could not delete the extended resource claim after a failed write");
            }
            Err(e)
        }
    }
}

/// Deletes a claim the scheduler made, dropping its finalizer first; one already gone is
/// no error.
pub(super) async fn delete(client: &Client, namespace: &str, name: &str) -> Result<u64, String> {
    let api: Api<ResourceClaim> = Api::namespaced(client.clone(), namespace);
    let not_found = |e: &kube::Error| matches!(e, kube::Error::Api(s) if s.code == 404);
    for _ in 0..5 {
        let current = match api.get(name).await {
            Ok(c) => c,
            Err(e) if not_found(&e) => return Ok(0),
            Err(e) => return Err(format!("get resourceclaim {namespace}/{name}: {}", crate::watch::cause::Told(&e))),
        };
        let finalizers = current.metadata.finalizers.clone().unwrap_or_default();
        if !finalizers.iter().any(|f| f == FINALIZER) {
            break;
        }
        let kept: Vec<&String> = finalizers.iter().filter(|f| *f != FINALIZER).collect();
        let patch = json!({"metadata": {"resourceVersion": current.metadata.resource_version, "finalizers": kept}});
        match api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(_) => break,
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) if not_found(&e) => return Ok(0),
            Err(e) => {
                return Err(format!("update resourceclaim {namespace}/{name}: {}", crate::watch::cause::Told(&e)));
            }
        }
    }
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(0),
        Err(e) if not_found(&e) => Ok(0),
        Err(e) => Err(format!("delete resourceclaim {namespace}/{name}: {}", crate::watch::cause::Told(&e))),
    }
}

/// Sets the pod's `status.extendedResourceClaimStatus`.
pub(super) async fn record(
    client: &Client,
    namespace: &str,
    pod: &str,
    claim: &str,
    mappings: &[Mapping],
) -> Result<u64, String> {
    if mappings.is_empty() {
        return Err(format!(
            "nil or empty request mappings, no update of pod {namespace}/{pod} ExtendedResourceClaimStatus"
        ));
    }
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let mappings: Vec<serde_json::Value> = mappings
        .iter()
        .map(|m| json!({"containerName": m.container, "resourceName": m.resource, "requestName": m.request}))
        .collect();
    let patch = json!({"status": {"extendedResourceClaimStatus": {
        "requestMappings": mappings, "resourceClaimName": claim}}});
    let updated = api.patch_status(pod, &PatchParams::default(), &Patch::Merge(&patch)).await.map_err(|e| {
        format!("update pod {namespace}/{pod} ExtendedResourceClaimStatus: {}", crate::watch::cause::Told(&e))
    })?;
    Ok(version(updated.metadata.resource_version.as_deref().unwrap_or_default()))
}
