//! Finding volumes for a pod's claims on one node (kube-scheduler's FindPodVolumes): bound
//! claims' volumes must admit the node; unbound WaitForFirstConsumer claims need a static
//! volume on the node or a provisioner that can create one there.

use std::sync::Arc;

use smallvec::SmallVec;

use super::claims::PodClaims;
use crate::labels::Labels;
use crate::node_info::NodeInfo;
use crate::volumes::objects::NO_PROVISIONER;
use crate::volumes::{Capacity, StorageClass, Volume, VolumeClaim, VolumeState};

/// Reason when a bound volume's node affinity excludes the node.
pub const ERR_NODE_CONFLICT: &str = "node(s) didn't match PersistentVolume's node affinity";
/// Reason when an unbound claim finds no volume and cannot be provisioned on the node.
pub const ERR_BIND_CONFLICT: &str = "node(s) didn't find available persistent volumes to bind";
/// Reason when the provisioner's storage capacity on the node is too small.
pub const ERR_NOT_ENOUGH_SPACE: &str = "node(s) did not have enough free storage";
/// Reason when a bound claim's volume does not exist.
pub const ERR_PV_NOT_EXIST: &str = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";

/// How an unbound claim could be provisioned, decided once per pod.
#[derive(Debug, Clone)]
pub enum Provisioning {
    /// The claim cannot be provisioned this way: an internal error (no class, unknown class).
    Error(String),
    /// The class has no provisioner.
    Impossible,
    /// The class's provisioner can, where `allowedTopologies` and capacity allow.
    Possible {
        /// The class.
        class: Arc<StorageClass>,
        /// `None`: no capacity check; else the capacity objects of the class large enough.
        capacities: Option<Vec<Arc<Capacity>>>,
    },
}

/// One unbound claim with what PreFilter found for it.
#[derive(Debug, Clone)]
pub struct ClaimPlan {
    /// The claim.
    pub claim: Arc<VolumeClaim>,
    /// A volume pre-bound to the claim (its claimRef names it) that is large enough.
    pub prebound: Option<Arc<Volume>>,
    /// Available volumes that fit the claim on some node, smallest first.
    pub candidates: Vec<Arc<Volume>>,
    /// Dynamic provisioning.
    pub provisioning: Provisioning,
}

/// What PreFilter hands to Filter.
#[derive(Debug, Clone, Default)]
pub struct BindingState {
    /// Bound claims and their volumes (`None`: the volume does not exist).
    pub bound: Vec<(Arc<VolumeClaim>, Option<Arc<Volume>>)>,
    /// Unbound claims, by increasing request.
    pub plans: Vec<ClaimPlan>,
}

/// Bindings the pod needs on one node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeBindings {
    /// Claims to bind to existing volumes.
    pub static_bindings: Vec<(Arc<VolumeClaim>, Arc<Volume>)>,
    /// Claims to provision on the node.
    pub provisions: Vec<Arc<VolumeClaim>>,
    /// For each provision, the CSIStorageCapacity it would draw from (when its driver
    /// tracks capacity).
    pub capacities: Vec<Option<Arc<Capacity>>>,
}

impl NodeBindings {
    /// Nothing to bind.
    pub fn is_empty(&self) -> bool {
        self.static_bindings.is_empty() && self.provisions.is_empty()
    }
}

/// Whether a volume's claimRef names the claim (an empty UID matches any).
pub fn bound_to(volume: &Volume, claim: &VolumeClaim) -> bool {
    volume.claim_ref.as_ref().is_some_and(|r| {
        r.name == claim.name && r.namespace == claim.namespace && (r.uid.is_empty() || r.uid == claim.uid)
    })
}

/// Whether a volume can serve the claim regardless of node: kube-scheduler's
/// FindMatchingVolume checks other than node affinity and pre-binding.
fn fits_anywhere(v: &Volume, claim: &VolumeClaim) -> bool {
    v.capacity >= claim.request
        && v.block == claim.block
        && v.attributes_class == claim.attributes_class
        && !v.deleting
        && v.phase == "Available"
        && claim.selector.as_ref().is_none_or(|s| s.matches(&v.labels))
        && v.class == claim.class
        && claim.access_modes.iter().all(|m| v.access_modes.contains(m))
}

/// The plan of one unbound claim.
fn plan(claim: Arc<VolumeClaim>, state: &VolumeState) -> ClaimPlan {
    // A volume pre-bound to the claim (of its class, large enough, same mode, not
    // going away) is the only choice; otherwise free volumes of the class are candidates.
    let prebound = state
        .volumes_claimed_by(&claim.key())
        .find(|v| {
            bound_to(v, &claim)
                && v.class == claim.class
                && v.capacity >= claim.request
                && v.block == claim.block
                && v.attributes_class == claim.attributes_class
                && !v.deleting
        })
        .cloned();
    let mut candidates: Vec<Arc<Volume>> = match prebound {
        Some(_) => Vec::new(),
        None => state.free_volumes(&claim.class).filter(|v| fits_anywhere(v, &claim)).cloned().collect(),
    };
    candidates.sort_by(|a, b| a.capacity.cmp(&b.capacity).then_with(|| a.name.cmp(&b.name)));
    let provisioning = provisioning(&claim, state);
    ClaimPlan { claim, prebound, candidates, provisioning }
}

fn provisioning(claim: &VolumeClaim, state: &VolumeState) -> Provisioning {
    if claim.class.is_empty() {
        return Provisioning::Error(format!("no class for claim \"{}\"", claim.key()));
    }
    let Some(class) = state.class(&claim.class) else {
        return Provisioning::Error(format!("failed to find storage class \"{}\"", claim.class));
    };
    if class.provisioner.is_empty() || class.provisioner == NO_PROVISIONER {
        return Provisioning::Impossible;
    }
    let tracked = state.driver(&class.provisioner).is_some_and(|d| d.storage_capacity);
    let capacities = (claim.request_set && tracked).then(|| {
        let mut caps: Vec<Arc<Capacity>> = state
            .capacities()
            .filter(|c| c.class == class.name)
            .filter(|c| c.maximum_volume_size.or(c.capacity).is_some_and(|limit| limit >= claim.request))
            .cloned()
            .collect();
        caps.sort_by(|a, b| a.namespace.cmp(&b.namespace).then_with(|| a.name.cmp(&b.name)));
        caps
    });
    Provisioning::Possible { class: class.clone(), capacities }
}

/// Builds the Filter state from the sorted claims.
pub fn binding_state(claims: PodClaims, state: &VolumeState) -> BindingState {
    let bound = claims
        .bound
        .into_iter()
        .map(|c| {
            let v = state.volume(&c.volume_name).cloned();
            (c, v)
        })
        .collect();
    let mut plans: Vec<ClaimPlan> = claims.delayed.into_iter().map(|c| plan(c, state)).collect();
    plans.sort_by_key(|p| p.claim.request);
    BindingState { bound, plans }
}

/// What one node lacks, as flags in kube-scheduler's reason order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// Bound volumes admit the node.
    pub bound_satisfied: bool,
    /// Every unbound claim found a volume or a provisioner.
    pub unbound_satisfied: bool,
    /// Provisioners have the capacity.
    pub sufficient_storage: bool,
    /// Every bound claim's volume exists.
    pub bound_volumes_found: bool,
}

impl Verdict {
    const OK: Verdict =
        Verdict { bound_satisfied: true, unbound_satisfied: true, sufficient_storage: true, bound_volumes_found: true };

    /// The reasons, in kube-scheduler's order; empty when the node fits.
    pub fn reasons(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if !self.bound_satisfied {
            out.push(ERR_NODE_CONFLICT);
        }
        if !self.unbound_satisfied {
            out.push(ERR_BIND_CONFLICT);
        }
        if !self.sufficient_storage {
            out.push(ERR_NOT_ENOUGH_SPACE);
        }
        if !self.bound_volumes_found {
            out.push(ERR_PV_NOT_EXIST);
        }
        out
    }
}

/// Finds the pod's bindings on `node`; `Err` is an internal error.
pub fn find_pod_volumes(s: &BindingState, node: &NodeInfo) -> Result<(NodeBindings, Verdict), String> {
    let mut out = NodeBindings::default();
    let verdict = search(s, node, Some(&mut out))?;
    Ok((out, verdict))
}

/// Filter's part of [`find_pod_volumes`]: the verdict alone, without building bindings.
pub fn verdict(s: &BindingState, node: &NodeInfo) -> Result<Verdict, String> {
    search(s, node, None)
}

type Plans<'a> = SmallVec<[&'a ClaimPlan; 4]>;

fn search(s: &BindingState, node: &NodeInfo, mut out: Option<&mut NodeBindings>) -> Result<Verdict, String> {
    let mut verdict = Verdict::OK;
    for (_, volume) in &s.bound {
        match volume {
            None => {
                verdict.bound_volumes_found = false;
                break;
            }
            Some(v) if !v.admits(&node.labels) => {
                verdict.bound_satisfied = false;
                break;
            }
            Some(_) => {}
        }
    }
    if s.plans.is_empty() {
        return Ok(verdict);
    }
    let mut to_provision = Plans::new();
    let mut to_match = Plans::new();
    for p in &s.plans {
        match &p.claim.selected_node {
            Some(selected) if *selected != node.name => {
                verdict.unbound_satisfied = false;
                return Ok(verdict);
            }
            Some(_) => to_provision.push(p),
            None => to_match.push(p),
        }
    }
    let mut chosen: SmallVec<[&str; 4]> = SmallVec::new();
    for p in to_match {
        match matching_volume(p, &node.labels, &chosen) {
            Some(v) => {
                chosen.push(&v.name);
                if let Some(o) = out.as_deref_mut() {
                    o.static_bindings.push((p.claim.clone(), v.clone()));
                }
            }
            None => {
                verdict.unbound_satisfied = false;
                to_provision.push(p);
            }
        }
    }
    if !to_provision.is_empty() {
        let (unbound_ok, storage_ok) = check_provisions(&to_provision, &node.labels)?;
        verdict.unbound_satisfied = unbound_ok;
        verdict.sufficient_storage = storage_ok;
        if let Some(o) = out
            && unbound_ok
            && storage_ok
        {
            o.provisions = to_provision.iter().map(|p| p.claim.clone()).collect();
            o.capacities = to_provision.iter().map(|p| capacity_on(p, &node.labels)).collect();
        }
    }
    Ok(verdict)
}

/// The smallest volume for the claim on a node with `labels`, not among `chosen`.
fn matching_volume<'a>(p: &'a ClaimPlan, labels: &Labels, chosen: &[&str]) -> Option<&'a Arc<Volume>> {
    if let Some(v) = &p.prebound {
        return (!chosen.contains(&v.name.as_str()) && v.admits(labels)).then_some(v);
    }
    p.candidates.iter().find(|v| !chosen.contains(&v.name.as_str()) && v.admits(labels))
}

/// The first capacity object of the claim's class that covers a node with `labels`.
fn capacity_on(p: &ClaimPlan, labels: &Labels) -> Option<Arc<Capacity>> {
    match &p.provisioning {
        Provisioning::Possible { capacities: Some(caps), .. } => {
            caps.iter().find(|c| c.topology.as_ref().is_some_and(|t| t.matches(labels))).cloned()
        }
        _ => None,
    }
}

/// Whether the claims can be provisioned on a node with `labels`: (allowed, enough storage).
fn check_provisions(claims: &[&ClaimPlan], labels: &Labels) -> Result<(bool, bool), String> {
    for p in claims {
        match &p.provisioning {
            Provisioning::Error(e) => return Err(e.clone()),
            Provisioning::Impossible => return Ok((false, true)),
            Provisioning::Possible { class, capacities } => {
                if !class.allows(labels) {
                    return Ok((false, true));
                }
                if let Some(caps) = capacities
                    && !caps.iter().any(|c| c.topology.as_ref().is_some_and(|t| t.matches(labels)))
                {
                    return Ok((true, false));
                }
            }
        }
    }
    Ok((true, true))
}
