//! VolumeBinding's PreBind: the bindings Reserve assumed are written through the API
//! (a volume's `claimRef`; a claim's `volume.kubernetes.io/selected-node`, which starts
//! its provisioner), then the pod waits until every claim is bound before it is bound.

use std::time::{Duration, Instant};

use algorithms::PodInfo;
use algorithms::labels::Labels;
use algorithms::plugins::volume_binding::NodeBindings;
use algorithms::volumes::objects::{BOUND_BY_CONTROLLER, SELECTED_NODE};
use algorithms::volumes::{Volume, VolumeState};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::Shared;

/// How often the claims are checked while waiting (against the watched state, not the API).
const POLL: Duration = Duration::from_millis(100);

/// Writes the bindings and waits for the claims to be bound; `Err` is the reason
/// PreBind failed (the caller unreserves and retries the pod).
pub async fn pre_bind(
    client: &Client,
    shared: &Shared,
    pod: &PodInfo,
    node: &str,
    b: &NodeBindings,
    timeout: Duration,
) -> Result<(), String> {
    let written = write(client, shared, b, node).await?;
    let deadline = Instant::now() + timeout;
    loop {
        {
            let st = shared.lock();
            if st.engine.cache.node_of(&pod.key()).is_none() {
                return Err(format!("pod {} does not exist any more", pod.key()));
            }
            let Some(labels) = st.engine.cache.node(node).map(|n| n.labels.clone()) else {
                return Err(format!("binding volumes: failed to get node \"{node}\": not found"));
            };
            let volumes = st.engine.cache.volumes.clone();
            drop(st);
            let state = volumes.read();
            if check(&state, node, &labels, b, &written).map_err(|e| format!("binding volumes: {e}"))? {
                return Ok(());
            }
        }
        if Instant::now() >= deadline {
            return Err("binding volumes: timed out waiting for the claims to be bound".into());
        }
        if shared.stopping() {
            return Err("binding volumes: the scheduler is stopping".into());
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The resource versions the writes produced, in binding order (volumes, then claims).
type Written = Vec<u64>;

fn version(rv: Option<&str>) -> u64 {
    rv.and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// PATCHes each assumed volume's claimRef and each provisioned claim's selected node,
/// with the resource version it was assumed over as a precondition.
async fn write(client: &Client, shared: &Shared, b: &NodeBindings, node: &str) -> Result<Written, String> {
    let mut out = Vec::new();
    let params = PatchParams::default();
    for (claim, volume) in &b.static_bindings {
        let api: Api<PersistentVolume> = Api::all(client.clone());
        let mut annotations = serde_json::Map::new();
        if let Some(v) = volume.annotations.get(BOUND_BY_CONTROLLER) {
            annotations.insert(BOUND_BY_CONTROLLER.into(), v.clone().into());
        }
        let patch = json!({
            "metadata": {"resourceVersion": volume.resource_version, "annotations": annotations},
            "spec": {"claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "namespace": claim.namespace, "name": claim.name, "uid": claim.uid}},
        });
        shared.limiter.until_ready().await;
        let pv = api
            .patch(&volume.name, &params, &Patch::Merge(&patch))
            .await
            .map_err(|e| format!("binding volume {} to claim {}: {e}", volume.name, claim.key()))?;
        out.push(version(pv.metadata.resource_version.as_deref()));
    }
    for claim in &b.provisions {
        let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &claim.namespace);
        let patch = json!({"metadata": {"resourceVersion": claim.resource_version,
            "annotations": {SELECTED_NODE: node}}});
        shared.limiter.until_ready().await;
        let pvc = api
            .patch(&claim.name, &params, &Patch::Merge(&patch))
            .await
            .map_err(|e| format!("selecting node {node} for claim {}: {e}", claim.key()))?;
        out.push(version(pvc.metadata.resource_version.as_deref()));
    }
    Ok(out)
}

/// Whether every binding is complete (`Ok(false)`: keep waiting; `Err`: it cannot be),
/// by the watched objects, as kube-scheduler's checkBindings.
fn check(st: &VolumeState, node: &str, labels: &Labels, b: &NodeBindings, written: &[u64]) -> Result<bool, String> {
    let mut versions = written.iter().copied();
    for (claim, volume) in &b.static_bindings {
        let want = versions.next().unwrap_or(0);
        let Some(pv) = st.api_volume(&volume.name) else {
            return Err(format!("failed to check binding: persistentvolume \"{}\" not found", volume.name));
        };
        if version(Some(&pv.resource_version)) < want {
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
        if version(Some(&c.resource_version)) < want {
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
