//! PreFilter's part of VolumeBinding: the pod's claims read and sorted into bound ones,
//! unbound ones waiting for a node, and the candidate volumes for the latter.

use std::sync::Arc;

use crate::pod_info::PodInfo;
use crate::status::Status;
use crate::volumes::{PodClaim, VolumeClaim, VolumeState};

/// Reason when a claim of the pod is unbound and its class binds immediately.
pub const ERR_UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";

/// The pod's claims by how they bind.
#[derive(Debug, Clone, Default)]
pub struct PodClaims {
    /// Fully bound claims.
    pub bound: Vec<Arc<VolumeClaim>>,
    /// Unbound claims of WaitForFirstConsumer classes.
    pub delayed: Vec<Arc<VolumeClaim>>,
}

/// Looks up one of the pod's claims with the checks every volume plugin makes: it exists,
/// is not lost or being deleted, and an ephemeral volume's claim belongs to the pod.
pub fn lookup(pod: &PodInfo, c: &PodClaim, state: &VolumeState) -> Result<Arc<VolumeClaim>, Status> {
    let Some(claim) = state.claim(&c.key) else {
        return Err(Status::unresolvable(if c.ephemeral {
            format!("waiting for ephemeral volume controller to create the persistentvolumeclaim \"{}\"", c.claim)
        } else {
            format!("persistentvolumeclaim \"{}\" not found", c.claim)
        }));
    };
    if claim.phase == "Lost" {
        return Err(Status::unresolvable(format!(
            "persistentvolumeclaim \"{}\" bound to non-existent persistentvolume \"{}\"",
            c.claim, claim.volume_name
        )));
    }
    if claim.deleting {
        return Err(Status::unresolvable(format!("persistentvolumeclaim \"{}\" is being deleted", c.claim)));
    }
    if c.ephemeral {
        owned_by(pod, claim).map_err(Status::unresolvable)?;
    }
    Ok(claim.clone())
}

/// An ephemeral volume's claim must be controlled by the pod.
pub fn owned_by(pod: &PodInfo, claim: &VolumeClaim) -> Result<(), String> {
    if claim.controller_uid.as_deref() == Some(pod.uid.as_str()) && !pod.uid.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "PVC {}/{} was not created for pod {}/{} (pod is not owner)",
            claim.namespace, claim.name, pod.namespace, pod.name
        ))
    }
}

/// Whether an unbound claim waits for the first consumer: its class exists and says so.
/// A claim without a class, or whose class is unknown, binds immediately.
pub fn delayed(claim: &VolumeClaim, state: &VolumeState) -> bool {
    !claim.class.is_empty() && state.class(&claim.class).is_some_and(|c| c.wait_for_first_consumer)
}

/// Reads and sorts the pod's claims; `Err` rejects the pod on every node.
pub fn pod_claims(pod: &PodInfo, state: &VolumeState) -> Result<PodClaims, Status> {
    let mut out = PodClaims::default();
    let mut immediate = false;
    for c in &pod.volumes.claims {
        let claim = lookup(pod, c, state)?;
        if claim.fully_bound() {
            out.bound.push(claim);
        } else if delayed(&claim, state) && claim.volume_name.is_empty() {
            out.delayed.push(claim);
        } else {
            immediate = true;
        }
    }
    if immediate {
        return Err(Status::unresolvable(ERR_UNBOUND_IMMEDIATE));
    }
    Ok(out)
}
