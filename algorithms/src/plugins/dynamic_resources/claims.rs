//! A pod's ResourceClaims as DynamicResources finds them: each `spec.resourceClaims`
//! entry resolved to its claim (template claims through the pod's status), checked as
//! kube-scheduler checks them, with its messages.

use std::sync::Arc;

use crate::dra::{Claim, DraState};
use crate::pod_info::PodInfo;

/// The pod's claims, in `spec.resourceClaims` order (entries the resourceclaim
/// controller reported as not needed left out), or the reason the pod cannot be
/// scheduled yet.
pub fn pod_claims(pod: &PodInfo, dra: &DraState) -> Result<Vec<Arc<Claim>>, String> {
    let mut out = Vec::with_capacity(pod.resource_claims.len());
    for entry in &pod.resource_claims {
        if entry.not_needed {
            continue;
        }
        let Some(name) = &entry.claim else {
            return Err(format!("pod \"{}/{}\": ResourceClaim not created yet", pod.namespace, pod.name));
        };
        let key = format!("{}/{name}", pod.namespace);
        let Some(claim) = dra.claim(&key) else {
            return Err(format!("could not find ResourceClaim \"{key}\""));
        };
        if claim.deleting {
            return Err(format!("resourceclaim \"{name}\" is being deleted"));
        }
        if entry.from_template && !owned_by(claim, pod) {
            return Err(format!(
                "ResourceClaim {key} was not created for Pod {}/{} (Pod is not owner)",
                pod.namespace, pod.name
            ));
        }
        out.push(claim.clone());
    }
    Ok(out)
}

/// Whether the pod controls the claim (the claim was made for it from a template).
pub fn owned_by(claim: &Claim, pod: &PodInfo) -> bool {
    claim.owner.as_ref().is_some_and(|(kind, name, uid)| {
        kind == "Pod" && *name == pod.name && (uid == &pod.uid || pod.uid.is_empty() || uid.is_empty())
    })
}

pub use crate::dra::pod_uid;

/// Checks the classes of a claim that is still to be allocated, request by request (and
/// that a request with sub-requests may have them, `prioritized_list` being the gate).
pub fn check_classes(claim: &Claim, dra: &DraState, prioritized_list: bool) -> Result<(), String> {
    for r in &claim.requests {
        if r.prioritized && !prioritized_list {
            return Err(format!(
                "resource claim {}, request {}: has subrequests, but the DRAPrioritizedList feature is disabled",
                claim.key(),
                r.name
            ));
        }
        for alt in &r.alternatives {
            if dra.class(&alt.class).is_none() {
                return Err(format!("request {}: device class {} does not exist", alt.name, alt.class));
            }
        }
    }
    Ok(())
}
