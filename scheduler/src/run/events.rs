//! Events and the PodScheduled condition, as kube-scheduler writes them.

use std::sync::Arc;

use algorithms::PodInfo;
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder};
use tracing::debug;

use super::Shared;

/// Publishes scheduling events and pod conditions.
pub struct Reporter {
    client: Client,
    recorder: Recorder,
    shared: Arc<Shared>,
}

fn reference(pod: &PodInfo) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some(pod.name.clone()),
        namespace: Some(pod.namespace.clone()),
        uid: (!pod.uid.is_empty()).then(|| pod.uid.clone()),
        ..Default::default()
    }
}

impl Reporter {
    /// A reporter writing as `controller`/`instance`.
    pub fn new(client: Client, shared: Arc<Shared>, controller: &str, instance: &str) -> Self {
        let reporter = kube::runtime::events::Reporter {
            controller: controller.to_string(),
            instance: Some(instance.to_string()),
        };
        Reporter { recorder: Recorder::new(client.clone(), reporter), client, shared }
    }

    /// `Scheduled`: "Successfully assigned ns/name to node".
    pub async fn scheduled(&self, pod: &PodInfo, node: &str) {
        self.shared.limiter.until_ready().await;
        let ev = Event {
            type_: EventType::Normal,
            reason: "Scheduled".into(),
            note: Some(format!("Successfully assigned {} to {node}", pod.key())),
            action: "Binding".into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&ev, &reference(pod)).await {
            debug!(pod = %pod.key(), error = %e, "failed to record Scheduled event");
        }
    }

    /// `FailedScheduling` with kube-scheduler's message, and `PodScheduled=False` (Unschedulable).
    pub async fn unschedulable(&self, pod: &PodInfo, message: &str) {
        self.shared.limiter.until_ready().await;
        let ev = Event {
            type_: EventType::Warning,
            reason: "FailedScheduling".into(),
            note: Some(message.chars().take(1024).collect()),
            action: "Scheduling".into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&ev, &reference(pod)).await {
            debug!(pod = %pod.key(), error = %e, "failed to record FailedScheduling event");
        }
        self.shared.limiter.until_ready().await;
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
        let now = k8s_openapi::jiff::Timestamp::now();
        let patch = serde_json::json!({"status": {"conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": message, "lastTransitionTime": now.to_string(), "lastProbeTime": null
        }]}});
        if let Err(e) = api.patch_status(&pod.name, &PatchParams::default(), &Patch::Strategic(patch)).await {
            debug!(pod = %pod.key(), error = %e, "failed to set the PodScheduled condition");
        }
    }
}
