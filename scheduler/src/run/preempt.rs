//! Carrying out a preemption through the API, as kube-scheduler does: clear the
//! nominations of lower-priority pods on the node, mark each victim with the
//! `DisruptionTarget` condition, delete it, and record a `Preempted` event.

use std::sync::Arc;

use algorithms::PodInfo;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::{Client, Error};
use tracing::{info, warn};

use super::events::{Reporter, reference};
use super::shared::Shared;
use crate::engine::Preempted;

/// Evicts the victims of `preemptor`'s preemption; returns how many could not be evicted.
pub async fn evict(
    client: Client,
    shared: Arc<Shared>,
    reporter: Arc<Reporter>,
    preemptor: Arc<PodInfo>,
    p: Preempted,
) -> usize {
    let _in_flight = shared.metrics.flow.start("preemption");
    let t0 = std::time::Instant::now();
    for key in &p.cleared {
        let Some((ns, name)) = key.split_once('/') else { continue };
        shared.limiter.until_ready().await;
        let api: Api<Pod> = Api::namespaced(client.clone(), ns);
        let patch = serde_json::json!({"status": {"nominatedNodeName": null}});
        if let Err(e) = api.patch_status(name, &PatchParams::default(), &Patch::Merge(patch)).await {
            warn!(pod = %key, error = %crate::watch::cause::Told(&e), "failed to clear a lower-priority nomination");
        }
    }
    let mut failed = 0;
    for victim in p.victims.iter().filter(|v| !v.terminating) {
        match evict_one(&client, &shared, &preemptor, victim).await {
            Ok(true) => {
                let note = format!("Preempted by pod {} on node {}", preemptor.uid, p.node);
                reporter.publish(
                    &preemptor,
                    victim,
                    "Normal",
                    "Preempted",
                    "Preempting",
                    note,
                    Some(reference(&preemptor)),
                );
            }
            Ok(false) => {}
            Err(e) => {
                warn!(victim = %victim.key(), preemptor = %preemptor.key(), error = %e, "failed to preempt a pod");
                failed += 1;
            }
        }
    }
    info!(preemptor = %preemptor.key(), node = %p.node, victims = p.victims.len(), failed, "preempted");
    shared.metrics.flow.preempted(failed == 0, t0.elapsed().as_secs_f64());
    failed
}

/// Patches the condition and deletes the victim; `Ok(false)` when it was already gone.
async fn evict_one(client: &Client, shared: &Shared, preemptor: &PodInfo, victim: &PodInfo) -> Result<bool, Error> {
    let api: Api<Pod> = Api::namespaced(client.clone(), &victim.namespace);
    let now = k8s_openapi::jiff::Timestamp::now();
    let patch = serde_json::json!({"status": {"conditions": [{
        "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
        "message": format!("{}: preempting to accommodate a higher priority pod", preemptor.scheduler_name),
        "lastTransitionTime": now.to_string()
    }]}});
    shared.limiter.until_ready().await;
    match api.patch_status(&victim.name, &PatchParams::default(), &Patch::Strategic(patch)).await {
        Err(Error::Api(e)) if e.code == 404 => return Ok(false),
        Err(e) => return Err(e),
        Ok(_) => {}
    }
    shared.limiter.until_ready().await;
    match api.delete(&victim.name, &DeleteParams::default()).await {
        Err(Error::Api(e)) if e.code == 404 => Ok(false),
        Err(e) => Err(e),
        Ok(_) => Ok(true),
    }
}
