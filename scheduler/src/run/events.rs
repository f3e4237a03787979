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

/// The object reference of a pod.
pub fn reference(pod: &PodInfo) -> ObjectReference {
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
        self.publish(pod, "Scheduled", "Binding", format!("Successfully assigned {} to {node}", pod.key()), None).await;
    }

    /// A `Normal` event about `pod`.
    pub async fn publish(
        &self,
        pod: &PodInfo,
        reason: &str,
        action: &str,
        note: String,
        related: Option<ObjectReference>,
    ) {
        self.shared.limiter.until_ready().await;
        let ev = Event {
            type_: EventType::Normal,
            reason: reason.into(),
            note: Some(note),
            action: action.into(),
            secondary: related,
        };
        if let Err(e) = self.recorder.publish(&ev, &reference(pod)).await {
            debug!(pod = %pod.key(), error = %e, reason, "failed to record an event");
        }
    }

    /// `FailedScheduling` with kube-scheduler's message, and `PodScheduled=False`
    /// (Unschedulable); `nominated` sets (`Some(Some(node))`) or clears (`Some(None)`)
    /// `status.nominatedNodeName` in the same patch.
    pub async fn unschedulable(
        &self,
        pod: &PodInfo,
        message: &str,
        nominated: Option<Option<&str>>,
        current: &(dyn Fn() -> bool + Send + Sync),
    ) {
        self.failed(pod, "Unschedulable", message, nominated, current).await;
    }

    /// `FailedScheduling` and `PodScheduled=False` with reason `SchedulerError`: the pod
    /// fit, but a later step (PreBind) failed; it is retried after backoff.
    pub async fn scheduler_error(&self, pod: &PodInfo, message: &str) {
        self.failed(pod, "SchedulerError", message, None, &|| true).await;
    }

    async fn failed(
        &self,
        pod: &PodInfo,
        reason: &str,
        message: &str,
        nominated: Option<Option<&str>>,
        current: &(dyn Fn() -> bool + Send + Sync),
    ) {
        self.shared.limiter.until_ready().await;
        // Reports run concurrently: one that a newer report of the same pod overtook while
        // it waited is not written over it.
        if !current() {
            return;
        }
        let ev = Event {
            type_: EventType::Warning,
            reason: "FailedScheduling".into(),
            note: Some(truncate_note(message)),
            action: "Scheduling".into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&ev, &reference(pod)).await {
            debug!(pod = %pod.key(), error = %e, "failed to record FailedScheduling event");
        }
        self.shared.limiter.until_ready().await;
        if !current() {
            return;
        }
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
        let now = k8s_openapi::jiff::Timestamp::now();
        let mut patch = serde_json::json!({"status": {"conditions": [{
            "type": "PodScheduled", "status": "False", "reason": reason,
            "message": message, "lastTransitionTime": now.to_string(), "lastProbeTime": null
        }]}});
        if let Some(node) = nominated {
            patch["status"]["nominatedNodeName"] = node.map_or(serde_json::Value::Null, |n| n.into());
        }
        if let Err(e) = api.patch_status(&pod.name, &PatchParams::default(), &Patch::Strategic(patch)).await {
            debug!(pod = %pod.key(), error = %e, "failed to set the PodScheduled condition");
        }
    }
}

/// An event note as kube-scheduler cuts it: at most 1024 bytes, ending in " ..." when cut.
fn truncate_note(message: &str) -> String {
    const MAX: usize = 1024;
    if message.len() <= MAX {
        return message.to_string();
    }
    let mut end = MAX - 4;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{} ...", &message[..end])
}

#[cfg(test)]
mod tests {
    #[test]
    fn long_notes_are_cut_as_kube_scheduler_cuts_them() {
        assert_eq!(super::truncate_note("short"), "short");
        let long = "x".repeat(2000);
        let cut = super::truncate_note(&long);
        assert_eq!(cut.len(), 1024);
        assert!(cut.ends_with(" ..."));
    }
}
