//! NodeVolumeLimits: a node's CSI drivers attach at most `allocatable.count` volumes each
//! (from its CSINode); volumes of the pod's claims and of migrated in-tree volumes count,
//! once each however many pods share them.

use crate::events::{ClusterEvent, ObjectAction, QueueingHint};
use crate::framework::{FilterPlugin, PluginState, PreFilterOutcome};
use crate::node_info::NodeInfo;
use crate::pod_info::PodInfo;
use crate::snapshot::Snapshot;
use crate::status::Status;
use crate::volumes::VolumeObjects;
use smallvec::SmallVec;

use crate::volumes::migration::csi_driver_of;
use crate::volumes::{CsiNode, VolumeClaim, VolumeHandle, VolumeState};

/// Plugin name.
pub const NAME: &str = "NodeVolumeLimits";
/// Reason when a driver would exceed its attach limit.
pub const ERR_REASON: &str = "node(s) exceed max volume count";

/// In-tree plugins whose volumes count once the node says they migrated to CSI.
const COUNTED_IN_TREE: [&str; 4] =
    ["kubernetes.io/aws-ebs", "kubernetes.io/gce-pd", "kubernetes.io/azure-disk", "kubernetes.io/cinder"];

/// Whether the node runs an in-tree plugin's volumes through its CSI driver.
fn migrated(csi_node: Option<&CsiNode>, plugin: &str) -> bool {
    COUNTED_IN_TREE.contains(&plugin) && csi_node.is_some_and(|n| n.migrated.iter().any(|p| p == plugin))
}

/// One attachable volume: its CSI driver and its handle, or for a claim not bound yet
/// the claim's key (unlike any real handle, and the same for all pods sharing it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Attachable<'a> {
    driver: &'a str,
    handle: &'a str,
    unbound: bool,
}

/// The CSI driver and handle of a volume, when it counts on this node (in-tree volumes
/// only once migrated).
fn translated<'a>(h: &'a VolumeHandle, csi_node: Option<&CsiNode>) -> Option<Attachable<'a>> {
    match csi_driver_of(&h.driver) {
        None => Some(Attachable { driver: &h.driver, handle: &h.handle, unbound: false }),
        Some(driver) => {
            migrated(csi_node, &h.driver).then_some(Attachable { driver, handle: &h.handle, unbound: false })
        }
    }
}

/// Driver and handle of a claim's volume; for an unbound claim, its class's provisioner.
fn claim_volume<'a>(
    claim: &'a VolumeClaim,
    key: &'a str,
    state: &'a VolumeState,
    csi_node: Option<&CsiNode>,
) -> Option<Attachable<'a>> {
    if let Some(v) = (!claim.volume_name.is_empty()).then(|| state.volume(&claim.volume_name)).flatten() {
        return translated(v.handle.as_ref()?, csi_node);
    }
    let class = state.class(&claim.class).filter(|_| !claim.class.is_empty())?;
    match csi_driver_of(&class.provisioner) {
        Some(driver) => {
            migrated(csi_node, &class.provisioner).then_some(Attachable { driver, handle: key, unbound: true })
        }
        None => Some(Attachable { driver: &class.provisioner, handle: key, unbound: true }),
    }
}

type Volumes<'a> = SmallVec<[Attachable<'a>; 8]>;

fn push<'a>(out: &mut Volumes<'a>, v: Attachable<'a>) {
    if !out.contains(&v) {
        out.push(v);
    }
}

/// Adds the attachable volumes of `pod` to `out`, each once. For the pod being
/// scheduled a missing claim is an error; for pods already placed it is skipped.
fn attachable<'a>(
    pod: &'a PodInfo,
    state: &'a VolumeState,
    csi_node: Option<&CsiNode>,
    new_pod: bool,
    out: &mut Volumes<'a>,
) -> Result<(), Status> {
    for c in &pod.volumes.claims {
        let Some(claim) = state.claim(&c.key) else {
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
        if let Some(v) = claim_volume(claim, &c.key, state, csi_node) {
            push(out, v);
        }
    }
    for h in &pod.volumes.inline_in_tree {
        if let Some(v) = translated(h, csi_node) {
            push(out, v);
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
            return PreFilterOutcome::skip();
        }
        // A copy of the store for the cycle: every node's Filter reads it without a lock.
        let state = snapshot.objects.volumes().clone();
        let resolved = NewVolumes::resolve(pod, &state);
        PreFilterOutcome::run(PluginState::new((state, resolved)))
    }

    fn filter(&self, state: &PluginState, _: &PodInfo, node: &NodeInfo) -> Status {
        match state.get::<(VolumeState, NewVolumes)>() {
            Some((volumes, new)) => filter_node(new, node, volumes),
            None => Status::error("NodeVolumeLimits state is missing"),
        }
    }

    fn queueing_hint(&self, pod: &PodInfo, event: &ClusterEvent) -> QueueingHint {
        QueueingHint::from_bool(match event {
            ClusterEvent::PodDeleted(gone) => {
                !gone.volumes.claims.is_empty() || !gone.volumes.inline_in_tree.is_empty()
            }
            ClusterEvent::Object(e) => match (e.kind, e.action) {
                (crate::volumes::kinds::CSI_NODE, ObjectAction::Add | ObjectAction::Update) => true,
                (crate::volumes::kinds::CLAIM, ObjectAction::Add) => super::volume_binding::uses_claim(pod, &e.key),
                _ => false,
            },
            _ => false,
        })
    }
}

/// A volume of the pod being scheduled, resolved once.
#[derive(Debug, Clone)]
struct Owned {
    driver: String,
    handle: String,
    unbound: bool,
    /// The in-tree plugin the node must have migrated for the volume to count.
    migrated_from: Option<String>,
}

/// PreFilter's resolution of the pod's own volumes: they do not depend on the node,
/// except in-tree ones, which count where the node migrated their plugin.
#[derive(Debug, Clone, Default)]
struct NewVolumes {
    /// What every node reports: a claim missing, an ephemeral claim not the pod's.
    failure: Option<Status>,
    volumes: Vec<Owned>,
}

impl NewVolumes {
    fn resolve(pod: &PodInfo, state: &VolumeState) -> Self {
        let mut out = NewVolumes::default();
        let mut add = |driver: &str, handle: &str, unbound: bool| {
            let migrated_from = csi_driver_of(driver).map(|_| driver.to_string());
            let driver = csi_driver_of(driver).unwrap_or(driver).to_string();
            let v = Owned { driver, handle: handle.to_string(), unbound, migrated_from };
            if !out.volumes.iter().any(|o| o.driver == v.driver && o.handle == v.handle && o.unbound == v.unbound) {
                out.volumes.push(v);
            }
        };
        for c in &pod.volumes.claims {
            let Some(claim) = state.claim(&c.key) else {
                out.failure = Some(Status::unresolvable(format!(
                    "looking up PVC {}/{}: persistentvolumeclaim \"{}\" not found",
                    pod.namespace, c.claim, c.claim
                )));
                return out;
            };
            if c.ephemeral
                && let Err(e) = super::volume_binding::owned_by(pod, claim)
            {
                out.failure = Some(Status::error(e));
                return out;
            }
            if let Some(v) = (!claim.volume_name.is_empty()).then(|| state.volume(&claim.volume_name)).flatten() {
                if let Some(h) = &v.handle {
                    add(&h.driver, &h.handle, false);
                }
                continue;
            }
            if let Some(class) = state.class(&claim.class).filter(|_| !claim.class.is_empty()) {
                add(&class.provisioner, &c.key, true);
            }
        }
        for h in &pod.volumes.inline_in_tree {
            add(&h.driver, &h.handle, false);
        }
        out
    }
}

/// Filter on one node with the volume store.
fn filter_node(pod: &NewVolumes, node: &NodeInfo, state: &VolumeState) -> Status {
    if let Some(st) = &pod.failure {
        return st.clone();
    }
    let csi_node = state.csi_node(&node.name).map(|n| &**n);
    let mut new = Volumes::new();
    for v in &pod.volumes {
        if v.migrated_from.as_deref().is_none_or(|p| migrated(csi_node, p)) {
            push(&mut new, Attachable { driver: &v.driver, handle: &v.handle, unbound: v.unbound });
        }
    }
    let limit = |driver: &str| csi_node.and_then(|n| n.drivers.get(driver).copied().flatten());
    if new.iter().all(|v| limit(v.driver).is_none()) {
        return Status::success();
    }
    let mut attached = Volumes::new();
    for p in node.pods.iter().filter(|p| !p.volumes.claims.is_empty() || !p.volumes.inline_in_tree.is_empty()) {
        if let Err(st) = attachable(p, state, csi_node, false, &mut attached) {
            return Status::error(st.message());
        }
    }
    new.retain(|v| !attached.contains(v));
    for (i, v) in new.iter().enumerate() {
        // Each driver once, at its first new volume.
        if new[..i].iter().any(|o| o.driver == v.driver) {
            continue;
        }
        let Some(max) = limit(v.driver) else { continue };
        let used = attached.iter().filter(|a| a.driver == v.driver).count() as i64;
        let count = new.iter().filter(|o| o.driver == v.driver).count() as i64;
        if used + count > max {
            let driver = v.driver;
            return Status::unschedulable(ERR_REASON)
                .with_detail_fn(|| format!("{driver}: {used} attached + {count} new > limit {max}"));
        }
    }
    Status::success()
}

#[cfg(test)]
mod tests;
