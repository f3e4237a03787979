//! Reserve and Unreserve of VolumeBinding: the chosen node's bindings are assumed in the
//! volume store, so that the next pods see the volumes taken and the claims provisioning,
//! until the API server's versions arrive or the binding is given up.

use std::sync::Arc;

use super::binder::{NodeBindings, bound_to};
use crate::volumes::objects::BOUND_BY_CONTROLLER;
use crate::volumes::{ClaimRef, Volume, VolumeClaim, VolumeState};

/// The volume as it reads once bound to the claim: claimRef set, and marked bound by a
/// controller when it was not pre-bound.
pub fn bind_volume_to_claim(volume: &Volume, claim: &VolumeClaim) -> Volume {
    let mut v = volume.clone();
    let prebound = bound_to(volume, claim) && volume.claim_ref.as_ref().is_some_and(|r| r.uid == claim.uid);
    if !prebound {
        v.claim_ref =
            Some(ClaimRef { namespace: claim.namespace.clone(), name: claim.name.clone(), uid: claim.uid.clone() });
    }
    if !bound_to(volume, claim) && !v.annotations.contains_key(BOUND_BY_CONTROLLER) {
        v.annotations.insert(BOUND_BY_CONTROLLER.to_string(), "yes".to_string());
    }
    v
}

/// The claim as it reads once the node is selected for provisioning.
pub fn select_node(claim: &VolumeClaim, node: &str) -> VolumeClaim {
    let mut c = claim.clone();
    c.selected_node = Some(node.to_string());
    c
}

/// Assumes the bindings; returns them as assumed (the objects to write to the API).
pub fn assume(state: &mut VolumeState, node: &str, b: &NodeBindings) -> NodeBindings {
    let mut out = NodeBindings::default();
    for (claim, volume) in &b.static_bindings {
        let bound = bind_volume_to_claim(volume, claim);
        let bound = if bound == **volume {
            volume.clone()
        } else {
            state.assume_volume(bound.clone());
            Arc::new(bound)
        };
        out.static_bindings.push((claim.clone(), bound));
    }
    for claim in &b.provisions {
        let selected = select_node(claim, node);
        state.assume_claim(selected.clone());
        out.provisions.push(Arc::new(selected));
    }
    out.capacities = b.capacities.clone();
    out
}

/// Drops the assumptions of `b` (Unreserve).
pub fn revert(state: &mut VolumeState, b: &NodeBindings) {
    for (_, volume) in &b.static_bindings {
        state.forget_volume(&volume.name);
    }
    for claim in &b.provisions {
        state.forget_claim(&claim.key());
    }
}
