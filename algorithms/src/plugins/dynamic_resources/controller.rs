//! DynamicResources' writes in memory (`simulate`): the API server stores a claim's
//! allocation with its resource-version precondition, creates and deletes claims, and
//! the DRA driver reports every binding condition true at once.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{AllocatedDeviceStatus, ResourceClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde::Serialize;

use crate::dra::kinds::RESOURCE_CLAIM;
use crate::dra::{Claim, ClaimWrite, DraObjects, DraWrite};
use crate::framework::ApiWrite;
use crate::objects::{ClusterObjects, ObjectAction, ObjectEvent};
use crate::owners::{Controller, Reported, World};

/// The in-memory API server and driver behind DynamicResources' writes.
#[derive(Debug, Default)]
pub(super) struct DraController;

impl Controller for DraController {
    fn apply(&self, write: &ApiWrite, world: &mut World<'_>) -> Option<Result<u64, String>> {
        Some(match write.get::<DraWrite>()? {
            DraWrite::Claim(w) => write_claim(w, world),
            DraWrite::CreateClaim(w) => create_claim(w, world),
            DraWrite::DeleteClaim { namespace, name } => Ok(delete_claim(&format!("{namespace}/{name}"), world)),
            // The pod's status is not kept here: its claim is found by owner and annotation.
            DraWrite::PodExtendedClaim { .. } => Ok(world.next_version()),
            DraWrite::ReleaseClaim { namespace, name, claim_uid, pod_uid } => {
                release_claim(&format!("{namespace}/{name}"), claim_uid, pod_uid, world)
            }
        })
    }

    fn report(&self, objects: &ClusterObjects, _: &crate::resource::Resource) -> Reported {
        let claims = allocated_claims(objects);
        if claims.is_empty() {
            return Reported::default();
        }
        Reported {
            charts: Vec::new(),
            fields: vec![("resourceClaims", serde_json::to_value(claims).unwrap_or_default())],
            lines: Vec::new(),
        }
    }
}

/// An allocated ResourceClaim at the end of a simulation.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
struct AllocatedClaim {
    /// Devices as `driver/pool/device`.
    devices: Vec<String>,
    /// Names of the pods it is reserved for.
    reserved_for: Vec<String>,
}

/// Every allocated claim, by `namespace/name`.
fn allocated_claims(objects: &ClusterObjects) -> BTreeMap<String, AllocatedClaim> {
    objects
        .dra()
        .claims()
        .filter_map(|c| {
            let a = c.allocation()?;
            let devices = a
                .devices
                .iter()
                .flat_map(|d| d.results.iter().flatten())
                .map(|r| format!("{}/{}/{}", r.driver, r.pool, r.device))
                .collect();
            let reserved_for = c.reserved_for.iter().map(|r| r.name.clone()).collect();
            Some((c.key(), AllocatedClaim { devices, reserved_for }))
        })
        .collect()
}

/// Stores `object` as the claim `key` and raises its event.
fn store(object: &ResourceClaim, key: String, action: ObjectAction, world: &mut World<'_>) -> Result<(), String> {
    world.objects.dra_mut().upsert_claim(Claim::from_api(object)?);
    world.events.push(ObjectEvent::new(RESOURCE_CLAIM, action, key));
    Ok(())
}

/// Stores a claim's allocation and consumers as the API server does: refused when the
/// claim changed since it was assumed (its resource version moved on).
fn write_claim(w: &ClaimWrite, world: &mut World<'_>) -> Result<u64, String> {
    let key = w.claim.key();
    let what = w.verb();
    let Some(current) = world.objects.dra().api_claim(&key).cloned() else {
        return Err(format!("{what} claim {key}: resourceclaims \"{}\" not found", w.claim.name));
    };
    let base = w.claim.api.metadata.resource_version.clone().unwrap_or_default();
    if current.resource_version != base {
        return Err(format!(
            "{what} claim {key}: Operation cannot be fulfilled on resourceclaims.resource.k8s.io \"{}\": \
             the object has been modified; please apply your changes to the latest version and try again",
            w.claim.name
        ));
    }
    let version = world.next_version();
    let mut object = (*w.claim.api).clone();
    object.metadata.resource_version = Some(version.to_string());
    report_binding_conditions(&mut object);
    store(&object, key, ObjectAction::Update, world)?;
    Ok(version)
}

/// Creates a pod's extended resource claim with its allocation and consumer, as the
/// creation and the status write do (refused when the name is taken).
fn create_claim(w: &ClaimWrite, world: &mut World<'_>) -> Result<u64, String> {
    let key = w.claim.key();
    if world.objects.dra().api_claim(&key).is_some() {
        return Err(format!(
            "create claim for extended resources {key}: resourceclaims \"{}\" already exists",
            w.claim.name
        ));
    }
    let version = world.next_version();
    let mut object = (*w.claim.api).clone();
    object.metadata.resource_version = Some(version.to_string());
    object.metadata.uid = Some(format!("uid-{}", key.replace('/', "-")));
    report_binding_conditions(&mut object);
    store(&object, key, ObjectAction::Add, world)?;
    Ok(version)
}

/// Deletes a claim (one already gone is no error).
fn delete_claim(key: &str, world: &mut World<'_>) -> u64 {
    if world.objects.dra_mut().remove_claim(key).is_some() {
        world.events.push(ObjectEvent::new(RESOURCE_CLAIM, ObjectAction::Delete, key));
    }
    world.next_version()
}

/// Takes a pod out of a claim's `reservedFor`, as the strategic-merge patch does (a
/// claim of another UID, or without the pod, is left as it is).
fn release_claim(key: &str, claim_uid: &str, pod_uid: &str, world: &mut World<'_>) -> Result<u64, String> {
    let Some(current) = world.objects.dra().api_claim(key).cloned() else {
        return Err(format!("resourceclaims \"{key}\" not found"));
    };
    let mut object = (*current.api).clone();
    let reserved = object.status.as_mut().and_then(|s| s.reserved_for.as_mut());
    let Some(list) = reserved.filter(|l| l.iter().any(|c| c.uid == pod_uid)) else {
        return Ok(0);
    };
    if !claim_uid.is_empty() && current.uid != claim_uid {
        return Err(format!("resourceclaims \"{key}\": the claim's UID is not {claim_uid}"));
    }
    list.retain(|c| c.uid != pod_uid);
    let version = world.next_version();
    object.metadata.resource_version = Some(version.to_string());
    store(&object, key.to_string(), ObjectAction::Update, world)?;
    Ok(version)
}

/// The in-memory API plays the DRA driver: every binding condition of an allocated
/// device is reported true at once, so the binding cycle goes on (a simulation has no
/// driver that could report them later).
fn report_binding_conditions(object: &mut ResourceClaim) {
    let Some(status) = object.status.as_mut() else { return };
    let results = status.allocation.as_ref().and_then(|a| a.devices.as_ref()).and_then(|d| d.results.clone());
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let now = Time(k8s_openapi::jiff::Timestamp::from_second(i64::try_from(secs).unwrap_or(0)).unwrap_or_default());
    for r in results.into_iter().flatten() {
        let Some(wanted) = r.binding_conditions.filter(|c| !c.is_empty()) else { continue };
        let devices = status.devices.get_or_insert_with(Vec::new);
        let at = match devices.iter().position(|d| d.driver == r.driver && d.pool == r.pool && d.device == r.device) {
            Some(i) => i,
            None => {
                devices.push(AllocatedDeviceStatus {
                    driver: r.driver.clone(),
                    pool: r.pool.clone(),
                    device: r.device.clone(),
                    ..Default::default()
                });
                devices.len() - 1
            }
        };
        let conditions = devices[at].conditions.get_or_insert_with(Vec::new);
        for t in wanted {
            conditions.retain(|c| c.type_ != t);
            conditions.push(Condition {
                type_: t,
                status: "True".into(),
                reason: "Simulated".into(),
                message: "reported by the in-memory API".into(),
                last_transition_time: now.clone(),
                observed_generation: None,
            });
        }
    }
}
