//! VolumeBinding after the node is chosen: Reserve assumes the node's bindings in the
//! volume store, Unreserve drops them, PreBind writes them (a volume's `claimRef`, a
//! claim's selected node) and waits until every claim is bound, as kube-scheduler's
//! checkBindings judges it from the watched objects.

use std::sync::Arc;
use std::time::Duration;

use super::{NAME, NodeBindings, VolumeBinding, assume, find_pod_volumes, pre_filter, revert};
use crate::framework::{ApiWrite, PreBindPlugin, Progress, ReservePlugin, Reserved, resource_version as version};
use crate::labels::Labels;
use crate::node_info::NodeInfo;
use crate::objects::ClusterObjects;
use crate::pod_info::PodInfo;
use crate::status::Status;
use crate::volumes::{Volume, VolumeState};
use crate::volumes::{VolumeObjects, VolumeWrite};

impl ReservePlugin for VolumeBinding {
    fn name(&self) -> &'static str {
        NAME
    }

    /// Finds the pod's bindings on the node again (the store may have changed since the
    /// cycle's Filter) and assumes them.
    fn reserve(
        &self,
        objects: &mut ClusterObjects,
        pod: &PodInfo,
        node: &NodeInfo,
    ) -> Result<Option<Reserved>, Status> {
        if pod.volumes.claims.is_empty() {
            return Ok(None);
        }
        let st = objects.volumes();
        let Some(state) = pre_filter(pod, st).map_err(|s| Status::error(s.message()))? else { return Ok(None) };
        let (bindings, verdict) = find_pod_volumes(&state, node).map_err(Status::error)?;
        let reasons = verdict.reasons();
        if !reasons.is_empty() {
            return Err(Status::error(reasons.join(", ")));
        }
        if bindings.is_empty() {
            return Ok(None);
        }
        Ok(Some(Arc::new(assume(objects.volumes_mut(), &node.name, &bindings))))
    }

    fn unreserve(&self, objects: &mut ClusterObjects, _key: &str, reserved: &Reserved) {
        if let Some(b) = reserved.downcast_ref::<NodeBindings>() {
            revert(objects.volumes_mut(), b);
        }
    }
}

impl PreBindPlugin for VolumeBinding {
    fn name(&self) -> &'static str {
        NAME
    }

    /// Each assumed volume's claimRef, then each provisioned claim's selected node.
    fn pre_bind(&self, reserved: &Reserved, node: &str) -> Vec<ApiWrite> {
        let Some(b) = reserved.downcast_ref::<NodeBindings>() else { return Vec::new() };
        let volumes = b.static_bindings.iter().map(|(claim, volume)| {
            ApiWrite::new(VolumeWrite::BindVolume { volume: volume.clone(), claim: claim.clone() })
        });
        let claims = b
            .provisions
            .iter()
            .map(|claim| ApiWrite::new(VolumeWrite::SelectNode { claim: claim.clone(), node: node.into() }));
        volumes.chain(claims).collect()
    }

    fn check(&self, objects: &ClusterObjects, reserved: &Reserved, node: &NodeInfo, versions: &[u64]) -> Progress {
        let Some(b) = reserved.downcast_ref::<NodeBindings>() else { return Progress::Done };
        match check(objects.volumes(), &node.name, &node.labels, b, versions) {
            Ok(true) => Progress::Done,
            Ok(false) => Progress::Waiting,
            Err(e) => Progress::Failed(format!("binding volumes: {e}")),
        }
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(self.args.bind_timeout_seconds)
    }

    fn timeout_message(&self) -> String {
        "binding volumes: timed out waiting for the claims to be bound".into()
    }
}

/// Whether every binding is complete (`Ok(false)`: keep waiting; `Err`: it cannot be),
/// by the watched objects, as kube-scheduler's checkBindings. `written` holds the
/// resource versions PreBind's writes returned (volumes, then claims): older watched
/// versions are not judged.
fn check(st: &VolumeState, node: &str, labels: &Labels, b: &NodeBindings, written: &[u64]) -> Result<bool, String> {
    let mut versions = written.iter().copied();
    for (claim, volume) in &b.static_bindings {
        let want = versions.next().unwrap_or(0);
        let Some(pv) = st.api_volume(&volume.name) else {
            return Err(format!("failed to check binding: persistentvolume \"{}\" not found", volume.name));
        };
        if version(&pv.resource_version) < want {
            return Ok(false);
        }
        admits(pv, labels, node)?;
        if pv.claim_ref.as_ref().is_none_or(|r| r.uid.is_empty()) {
            return Err(format!("ClaimRef got reset for pv \"{}\"", pv.name));
        }
        if !st.api_claim(&claim.key()).is_some_and(|c| c.fully_bound()) {
            return Ok(false);
        }
    }
    for claim in &b.provisions {
        let want = versions.next().unwrap_or(0);
        let Some(c) = st.api_claim(&claim.key()) else {
            return Err(format!(
                "failed to check provisioning pvc: persistentvolumeclaim \"{}\" not found",
                claim.name
            ));
        };
        if version(&c.resource_version) < want {
            return Ok(false);
        }
        match &c.selected_node {
            None => return Err(format!("selectedNode annotation reset for PVC \"{}\"", c.name)),
            Some(n) if n != node => return Err(format!("provisioning failed for PVC \"{}\"", c.name)),
            Some(_) => {}
        }
        if !c.volume_name.is_empty() {
            let Some(pv) = st.api_volume(&c.volume_name) else { return Ok(false) };
            admits(pv, labels, node)?;
        }
        if !c.fully_bound() {
            return Ok(false);
        }
    }
    Ok(true)
}

fn admits(pv: &Volume, labels: &Labels, node: &str) -> Result<(), String> {
    if pv.admits(labels) {
        Ok(())
    } else {
        Err(format!("pv \"{}\" node affinity doesn't match node \"{node}\"", pv.name))
    }
}
