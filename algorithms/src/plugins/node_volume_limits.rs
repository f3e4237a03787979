//! NodeVolumeLimits: a node's CSI drivers attach at most `allocatable.count` volumes each
//! (from its CSINode); volumes of the pod's claims and of migrated in-tree volumes count,
//! once each however many pods share them.

use std::collections::HashMap;
use std::sync::Arc;

use crate::events::{ClusterEvent, QueueingHint, StorageAction, StorageKind};
use crate::framework::{FilterPlugin, PluginState, PreFilterOutcome};
use crate::node_info::NodeInfo;
use crate::pod_info::PodInfo;
use crate::snapshot::Snapshot;
use crate::status::Status;
use crate::volumes::migration::{csi_driver_of, plugin_of};
use crate::volumes::{Claim, CsiNode, VolumeHandle, VolumeState, VolumeStore};

/// Plugin name.
pub const NAME: &str = "NodeVolumeLimits";
/// Reason when a driver would exceed its attach limit.
pub const ERR_REASON: &str = "node(s) exceed max volume count";
/// Handle prefix of a claim not bound yet: unlike any real handle, the same for all pods
/// sharing the claim.
const UNBOUND_PREFIX: &str = "unbound-claim:";

/// In-tree plugins whose volumes count once the node says they migrated to CSI.
const COUNTED_IN_TREE: [&str; 4] =
    ["kubernetes.io/aws-ebs", "kubernetes.io/gce-pd", "kubernetes.io/azure-disk", "kubernetes.io/cinder"];

/// Whether the node runs an in-tree plugin's volumes through its CSI driver.
fn migrated(csi_node: Option<&CsiNode>, plugin: &str) -> bool {
    COUNTED_IN_TREE.contains(&plugin) && csi_node.is_some_and(|n| n.migrated.iter().any(|p| p == plugin))
}

/// The CSI driver and handle of an in-tree volume, when it counts on this node.
fn translated(h: &VolumeHandle, csi_node: Option<&CsiNode>) -> Option<(String, String)> {
    if plugin_of(&h.driver).is_some() {
        return Some((h.driver.clone(), h.handle.clone()));
    }
    let driver = csi_driver_of(&h.driver)?;
    migrated(csi_node, &h.driver).then(|| (driver.to_string(), h.handle.clone()))
}

/// Driver and handle of a claim's volume; for an unbound claim, its class's provisioner.
fn claim_volume(claim: &Claim, state: &VolumeState, csi_node: Option<&CsiNode>) -> Option<(String, String)> {
    if let Some(v) = (!claim.volume_name.is_empty()).then(|| state.volume(&claim.volume_name)).flatten() {
        let h = v.handle.as_ref()?;
        return if csi_driver_of(&h.driver).is_some() {
            translated(h, csi_node)
        } else {
            Some((h.driver.clone(), h.handle.clone()))
        };
    }
    let class = state.class(&claim.class).filter(|_| !claim.class.is_empty())?;
    let handle = format!("{UNBOUND_PREFIX}{}/{}", claim.namespace, claim.name);
    match csi_driver_of(&class.provisioner) {
        Some(driver) => migrated(csi_node, &class.provisioner).then(|| (driver.to_string(), handle)),
        None => Some((class.provisioner.clone(), handle)),
    }
}

/// Adds the attachable volumes of `pod` to `out` (unique key to driver). For the pod
/// being scheduled a missing claim is an error; for pods already placed it is skipped.
fn attachable(
    pod: &PodInfo,
    state: &VolumeState,
    csi_node: Option<&CsiNode>,
    new_pod: bool,
    out: &mut HashMap<String, String>,
) -> Result<(), Status> {
    for c in &pod.volumes.claims {
        let Some(claim) = state.claim(&format!("{}/{}", pod.namespace, c.claim)) else {
            if new_pod {
                return Err(Status::unresolvable(format!(
                    "looking up PVC {}/{}: persistentvolumeclaim \"{}\" not found",
                    pod.namespace, c.claim, c.claim
                )));
            }
            continue;
        };
        if c.ephemeral {
            super::volume_binding::owned_by(pod, claim).map_err(Status::error)?;
        }
        if let Some((driver, handle)) = claim_volume(claim, state, csi_node) {
            out.insert(format!("{driver}/{handle}"), driver);
        }
    }
    for h in &pod.volumes.inline_in_tree {
        if let Some((driver, handle)) = translated(h, csi_node) {
            out.insert(format!("{driver}/{handle}"), driver);
        }
    }
    Ok(())
}

/// The NodeVolumeLimits filter.
#[derive(Debug, Default)]
pub struct NodeVolumeLimits;

impl FilterPlugin for NodeVolumeLimits {
    fn name(&self) -> &'static str {
        NAME
    }

    fn pre_filter(&self, pod: &PodInfo, snapshot: &Snapshot) -> PreFilterOutcome {
        if pod.volumes.claims.is_empty() && pod.volumes.inline_in_tree.is_empty() {
            PreFilterOutcome::skip()
        } else {
            PreFilterOutcome::run(PluginState::new(snapshot.volumes.clone()))
        }
    }

    fn filter(&self, state: &PluginState, pod: &PodInfo, node: &NodeInfo) -> Status {
        match state.get::<Arc<VolumeStore>>() {
            Some(store) => filter_node(pod, node, &store.read()),
            None => Status::error("NodeVolumeLimits state is missing"),
        }
    }

    fn queueing_hint(&self, pod: &PodInfo, event: &ClusterEvent) -> QueueingHint {
        QueueingHint::from_bool(match event {
            ClusterEvent::PodDeleted(gone) => {
                !gone.volumes.claims.is_empty() || !gone.volumes.inline_in_tree.is_empty()
            }
            ClusterEvent::Storage(e) => match (e.kind, e.action) {
                (StorageKind::CsiNode, StorageAction::Add | StorageAction::Update) => true,
                (StorageKind::Claim, StorageAction::Add) => super::volume_binding::uses_claim(pod, &e.key),
                _ => false,
            },
            _ => false,
        })
    }
}

/// Filter on one node with the volume store.
pub fn filter_node(pod: &PodInfo, node: &NodeInfo, state: &VolumeState) -> Status {
    let csi_node = state.csi_node(&node.name).map(|n| &**n);
    let mut new = HashMap::new();
    if let Err(st) = attachable(pod, state, csi_node, true, &mut new) {
        return st;
    }
    if new.is_empty() {
        return Status::success();
    }
    let limits: HashMap<&str, i64> =
        csi_node.map(|n| n.drivers.iter().filter_map(|(d, c)| Some((d.as_str(), (*c)?))).collect()).unwrap_or_default();
    if limits.is_empty() {
        return Status::success();
    }
    let mut attached = HashMap::new();
    for p in &node.pods {
        if let Err(st) = attachable(p, state, csi_node, false, &mut attached) {
            return Status::error(st.message());
        }
    }
    let mut attached_count: HashMap<&str, i64> = HashMap::new();
    for (key, driver) in &attached {
        new.remove(key);
        *attached_count.entry(driver).or_default() += 1;
    }
    let mut new_count: HashMap<&str, i64> = HashMap::new();
    for driver in new.values() {
        *new_count.entry(driver).or_default() += 1;
    }
    for (driver, count) in new_count {
        if let Some(limit) = limits.get(driver) {
            let used = attached_count.get(driver).copied().unwrap_or(0);
            if used + count > *limit {
                return Status::unschedulable(ERR_REASON)
                    .with_detail_fn(|| format!("{driver}: {used} attached + {count} new > limit {limit}"));
            }
        }
    }
    Status::success()
}

#[cfg(test)]
mod tests;
