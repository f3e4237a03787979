//! Events and the PodScheduled condition, as kube-scheduler writes them.
//!
//! Events go through a pipeline of their own ([`recorder`]): queued without waiting,
//! aggregated into series in a bounded cache ([`correlator`]), written by a few writers
//! under their own rate limit, retried when the server is unreachable.

mod correlator;
mod recorder;
mod sink;

use std::sync::Arc;
use std::time::Duration;

use algorithms::PodInfo;
use algorithms::pod_info::ConditionState;
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Client;
use kube::api::{Api, ObjectMeta, Patch, PatchParams};
use tracing::debug;

pub use correlator::{CACHE_ENTRIES, Correlator, Observed, Write};
pub use recorder::{Options, Recorder, Stats};
pub use sink::{EventSink, KubeSink, SinkError};

use super::shared::Shared;

/// Publishes scheduling events and pod conditions.
pub struct Reporter {
    client: Client,
    recorder: Recorder,
    shared: Arc<Shared>,
    controller: String,
    instance: String,
}

/// The object reference of a pod, with the resource version it had when seen (as
/// kube-scheduler's, so that events about different versions are not aggregated).
pub fn reference(pod: &PodInfo) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some(pod.name.clone()),
        namespace: Some(pod.namespace.clone()),
        uid: (!pod.uid.is_empty()).then(|| pod.uid.clone()),
        resource_version: (!pod.resource_version.is_empty()).then(|| pod.resource_version.clone()),
        ..Default::default()
    }
}

impl Reporter {
    /// A reporter writing as `controller` (for pods without a scheduler name)/`instance`, its events through a pipeline with
    /// `options`, counted in the shared metrics.
    pub fn new(client: Client, shared: Arc<Shared>, controller: &str, instance: &str, options: Options) -> Self {
        let recorder = Recorder::start(KubeSink::new(client.clone()), options, shared.metrics.events.clone());
        Reporter { client, recorder, shared, controller: controller.into(), instance: instance.into() }
    }

    /// The name events of `by`'s profile are reported by: its scheduler name.
    fn controller_of<'a>(&'a self, by: &'a PodInfo) -> &'a str {
        if by.scheduler_name.is_empty() { &self.controller } else { &by.scheduler_name }
    }

    /// Writes the events still queued, waiting at most `limit`.
    pub async fn close(&self, limit: Duration) {
        self.recorder.close(limit).await;
    }

    /// `Scheduled`: "Successfully assigned ns/name to node".
    pub fn scheduled(&self, pod: &PodInfo, node: &str) {
        let note = format!("Successfully assigned {} to {node}", pod.key());
        self.publish(pod, pod, "Normal", "Scheduled", "Binding", note, None);
    }

    /// An event about `pod` (`type_` `Normal` or `Warning`) from the profile of the pod
    /// being scheduled, `by` (the pod itself, or the preemptor of a victim), queued without
    /// waiting. As kube-scheduler's, the event is reported by that profile's scheduler name.
    #[allow(clippy::too_many_arguments)]
    pub fn publish(
        &self,
        by: &PodInfo,
        pod: &PodInfo,
        type_: &str,
        reason: &str,
        action: &str,
        note: String,
        related: Option<ObjectReference>,
    ) {
        let now = k8s_openapi::jiff::Timestamp::now();
        let event = Event {
            metadata: ObjectMeta {
                // The name client-go gives: the object's name and the time in hex nanoseconds.
                name: Some(format!("{}.{:x}", pod.name, now.as_nanosecond())),
                namespace: Some(pod.namespace.clone()),
                ..Default::default()
            },
            event_time: Some(MicroTime(now)),
            type_: Some(type_.into()),
            reason: Some(reason.into()),
            action: Some(action.into()),
            note: Some(truncate_note(&note)),
            regarding: Some(reference(pod)),
            related,
            reporting_controller: Some(self.controller_of(by).to_string()),
            reporting_instance: Some(self.instance.clone()),
            ..Default::default()
        };
        self.recorder.record(event);
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
        // Reports run concurrently: one that a newer report of the same pod overtook while
        // it waited is not written over it.
        if !current() {
            return;
        }
        self.publish(pod, pod, "Warning", "FailedScheduling", "Scheduling", message.to_string(), None);
        // The condition and nomination are written only when they change, as
        // kube-scheduler's updatePod: a pod that keeps failing the same way keeps its
        // resource version, and its events become one series.
        if !status_changes(pod, reason, message, nominated) {
            return;
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

/// Whether writing `PodScheduled=False` with `reason` and `message`, and `nominated`,
/// changes the pod's status as last seen.
fn status_changes(pod: &PodInfo, reason: &str, message: &str, nominated: Option<Option<&str>>) -> bool {
    let condition = ConditionState { status: "False".into(), reason: reason.into(), message: message.into() };
    pod.scheduled_condition.as_ref() != Some(&condition)
        || nominated.is_some_and(|n| n != pod.nominated_node.as_deref())
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
    use algorithms::PodInfo;
    use algorithms::pod_info::ConditionState;

    #[test]
    fn the_status_is_rewritten_only_when_the_condition_or_nomination_changes() {
        let mut pod = PodInfo { name: "p".into(), namespace: "default".into(), ..Default::default() };
        let msg = "0/3 nodes are available: 3 Insufficient cpu.";
        assert!(super::status_changes(&pod, "Unschedulable", msg, None), "no condition yet");
        pod.scheduled_condition =
            Some(ConditionState { status: "False".into(), reason: "Unschedulable".into(), message: msg.into() });
        assert!(!super::status_changes(&pod, "Unschedulable", msg, None));
        assert!(!super::status_changes(&pod, "Unschedulable", msg, Some(None)), "no nomination to clear");
        assert!(super::status_changes(&pod, "Unschedulable", msg, Some(Some("n1"))));
        assert!(super::status_changes(&pod, "SchedulerError", msg, None));
        assert!(super::status_changes(&pod, "Unschedulable", "0/4 nodes are available: 4 Insufficient cpu.", None));
        pod.nominated_node = Some("n1".into());
        assert!(!super::status_changes(&pod, "Unschedulable", msg, Some(Some("n1"))));
        assert!(super::status_changes(&pod, "Unschedulable", msg, Some(None)));
    }

    #[test]
    fn long_notes_are_cut_as_kube_scheduler_cuts_them() {
        assert_eq!(super::truncate_note("short"), "short");
        let long = "x".repeat(2000);
        let cut = super::truncate_note(&long);
        assert_eq!(cut.len(), 1024);
        assert!(cut.ends_with(" ..."));
    }
}
