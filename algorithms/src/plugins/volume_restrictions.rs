//! VolumeRestrictions: in-tree disks that two pods on one node may not share, and
//! ReadWriteOncePod claims that only one pod in the cluster may use.

use crate::events::{ClusterEvent, ObjectAction, QueueingHint};
use crate::framework::{FilterPlugin, PluginState, PreFilterOutcome};
use crate::node_info::NodeInfo;
use crate::pod_info::PodInfo;
use crate::snapshot::Snapshot;
use crate::status::Status;
use crate::volumes::VolumeObjects;

/// Plugin name.
pub const NAME: &str = "VolumeRestrictions";
/// Reason when a pod on the node uses one of the pod's disks.
pub const ERR_DISK_CONFLICT: &str = "node(s) had no available disk";
/// Reason when another pod already uses one of the pod's ReadWriteOncePod claims.
pub const ERR_RWOP_CONFLICT: &str =
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod";

/// PreFilter's findings.
struct RestrictionState {
    /// Names of the pod's ReadWriteOncePod claims.
    rwop: Vec<String>,
    /// How many of them other pods use already.
    in_use: usize,
}

/// Whether `other` (in the pod's namespace) mounts the claim named `claim`.
fn mounts(other: &PodInfo, namespace: &str, claim: &str) -> bool {
    other.namespace == namespace && other.volumes.claims.iter().any(|c| !c.ephemeral && c.claim == claim)
}

/// The VolumeRestrictions filter.
#[derive(Debug, Default)]
pub struct VolumeRestrictions;

impl FilterPlugin for VolumeRestrictions {
    fn name(&self) -> &'static str {
        NAME
    }

    fn pre_filter(&self, pod: &PodInfo, snapshot: &Snapshot) -> PreFilterOutcome {
        let mut rwop = Vec::new();
        {
            let state = snapshot.objects.volumes();
            for c in pod.volumes.claims.iter().filter(|c| !c.ephemeral) {
                let Some(claim) = state.claim(&c.key) else {
                    return PreFilterOutcome::reject(Status::unresolvable(format!(
                        "persistentvolumeclaim \"{}\" not found",
                        c.claim
                    )));
                };
                if claim.read_write_once_pod() {
                    rwop.push(c.claim.clone());
                }
            }
        }
        let in_use = rwop
            .iter()
            .filter(|name| {
                snapshot
                    .nodes
                    .iter()
                    .any(|n| n.pods.iter().any(|p| p.key() != pod.key() && mounts(p, &pod.namespace, name)))
            })
            .count();
        if pod.volumes.disks.is_empty() && in_use == 0 {
            return PreFilterOutcome::skip();
        }
        PreFilterOutcome::run(PluginState::new(RestrictionState { rwop, in_use }))
    }

    fn filter(&self, state: &PluginState, pod: &PodInfo, node: &NodeInfo) -> Status {
        for d in &pod.volumes.disks {
            if let Some(other) = node.pods.iter().find(|p| p.volumes.disks.iter().any(|e| d.conflicts(e))) {
                return Status::unschedulable(ERR_DISK_CONFLICT)
                    .with_detail_fn(|| format!("pod {} uses the same disk", other.key()));
            }
        }
        match state.get::<RestrictionState>() {
            Some(s) if s.in_use > 0 => Status::unschedulable(ERR_RWOP_CONFLICT)
                .with_detail_fn(|| format!("ReadWriteOncePod claims: {}", s.rwop.join(", "))),
            Some(_) => Status::success(),
            None => Status::error("VolumeRestrictions state is missing"),
        }
    }

    fn queueing_hint(&self, pod: &PodInfo, event: &ClusterEvent) -> QueueingHint {
        QueueingHint::from_bool(match event {
            ClusterEvent::NodeAdded(_) => true,
            ClusterEvent::PodDeleted(gone) => {
                gone.namespace == pod.namespace
                    && (pod.volumes.disks.iter().any(|d| gone.volumes.disks.iter().any(|e| d.conflicts(e)))
                        || pod.volumes.claims.iter().any(|c| !c.ephemeral && mounts(gone, &pod.namespace, &c.claim)))
            }
            ClusterEvent::Object(e) => {
                e.kind == crate::volumes::kinds::CLAIM
                    && e.action == ObjectAction::Add
                    && super::volume_binding::uses_claim(pod, &e.key)
            }
            _ => false,
        })
    }
}

#[cfg(test)]
mod tests;
