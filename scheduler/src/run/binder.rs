//! The binding cycle: POST pods/{name}/binding in the background with bounded concurrency.

use std::sync::Arc;
use std::time::{Duration, Instant};

use algorithms::PodInfo;
use algorithms::events::ClusterEvent;
use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, PostParams};
use tracing::{debug, info, warn};

use super::Shared;
use super::events::Reporter;

/// A pod assumed on a node, to be bound.
#[derive(Debug, Clone)]
pub struct BindRequest {
    /// The pod.
    pub pod: Arc<PodInfo>,
    /// The node.
    pub node: String,
    /// Scheduling attempts so far.
    pub attempts: u32,
    /// The profile that placed it.
    pub profile: String,
    /// When its scheduling cycle started.
    pub started: Instant,
}

/// What the API server said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BindOutcome {
    /// Bound.
    Bound,
    /// 409: already bound (by us earlier or by someone else); the watch has the truth.
    Conflict,
    /// 404: the pod is gone.
    Gone,
    /// Anything else: retry later.
    Failed(String),
}

/// Posts the Binding.
pub async fn bind(client: &Client, pod: &PodInfo, node: &str) -> BindOutcome {
    let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
    let binding = Binding {
        metadata: ObjectMeta {
            name: Some(pod.name.clone()),
            namespace: Some(pod.namespace.clone()),
            uid: (!pod.uid.is_empty()).then(|| pod.uid.clone()),
            ..Default::default()
        },
        target: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(node.to_string()),
            ..Default::default()
        },
    };
    match api.create_subresource::<_, serde_json::Value>("binding", &pod.name, &PostParams::default(), &binding).await {
        Ok(_) => BindOutcome::Bound,
        Err(kube::Error::Api(e)) if e.code == 409 => BindOutcome::Conflict,
        Err(kube::Error::Api(e)) if e.code == 404 => BindOutcome::Gone,
        Err(e) => BindOutcome::Failed(e.to_string()),
    }
}

/// VolumeBinding's PreBind, when Reserve assumed volume bindings for the pod. On
/// failure the pod's assumptions go (Unreserve) and it is retried after backoff; returns
/// whether binding may go on.
pub async fn pre_bind(client: &Client, shared: &Arc<Shared>, reporter: &Reporter, req: &BindRequest) -> bool {
    let key = req.pod.key();
    let (bindings, timeout) = {
        let st = shared.lock();
        let Some(b) = st.engine.cache.reserved_volumes(&key).cloned() else { return true };
        let profile = st.engine.profiles.iter().find(|p| p.scheduler_name == req.profile);
        let timeout = profile
            .and_then(|p| p.volume_bind_timeout)
            .unwrap_or(Duration::from_secs(algorithms::plugins::volume_binding::DEFAULT_BIND_TIMEOUT_SECONDS));
        (b, timeout)
    };
    let t0 = Instant::now();
    let result = super::prebind::pre_bind(client, shared, &req.pod, &req.node, &bindings, timeout).await;
    match result {
        Ok(()) => {
            debug!(pod = %key, node = %req.node, ms = t0.elapsed().as_millis() as u64, "claims bound");
            true
        }
        Err(e) => {
            warn!(pod = %key, node = %req.node, error = %e, "running PreBind plugin \"VolumeBinding\" failed; will retry");
            shared.metrics.attempt("error", &req.profile, req.started.elapsed().as_secs_f64());
            let requeued = {
                let mut st = shared.lock();
                let now = Instant::now();
                let forgotten = st.engine.cache.forget(&key);
                if let Some(f) = &forgotten {
                    st.engine.on_event(ClusterEvent::PodDeleted(f.clone()), now);
                    st.engine.queue.requeue(req.pod.clone(), req.attempts, now);
                }
                forgotten.is_some()
            };
            shared.wake();
            if requeued {
                reporter.scheduler_error(&req.pod, &format!("running PreBind plugin \"VolumeBinding\": {e}")).await;
            }
            false
        }
    }
}

/// Binds one pod and applies the outcome to the cache and queue.
pub async fn bind_and_record(client: Client, shared: Arc<Shared>, reporter: Arc<Reporter>, req: BindRequest) {
    shared.limiter.until_ready().await;
    if shared.stopping() {
        shared.release(&req.pod.key());
        return;
    }
    let key = req.pod.key();
    let t0 = Instant::now();
    let outcome = bind(&client, &req.pod, &req.node).await;
    shared.metrics.bind(outcome == BindOutcome::Bound, &req.profile, t0.elapsed().as_secs_f64());
    {
        let mut st = shared.lock();
        let now = Instant::now();
        if outcome == BindOutcome::Bound {
            st.engine.cache.finish_binding(&key, now);
        } else {
            // The assumption goes: what it held is free again for the pods waiting on it.
            if let Some(forgotten) = st.engine.cache.forget(&key) {
                st.engine.on_event(ClusterEvent::PodDeleted(forgotten), now);
            }
            match &outcome {
                BindOutcome::Gone => st.engine.queue.delete(&key),
                BindOutcome::Failed(_) => st.engine.queue.requeue(req.pod.clone(), req.attempts, now),
                // 409: already bound; the watch brings the truth.
                BindOutcome::Conflict | BindOutcome::Bound => {}
            }
        }
    }
    shared.wake();
    match outcome {
        BindOutcome::Bound => {
            debug!(pod = %key, node = %req.node, "bound");
            shared.stats.scheduled.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if !shared.stats.first_bind_logged.swap(true, std::sync::atomic::Ordering::Relaxed) {
                let ms = shared.lock().started.elapsed().as_millis() as u64;
                info!(pod = %key, node = %req.node, ms, "first pod bound");
            }
            shared.metrics.attempt("scheduled", &req.profile, req.started.elapsed().as_secs_f64());
            reporter.scheduled(&req.pod, &req.node).await;
        }
        BindOutcome::Conflict => info!(pod = %key, "pod was already bound; leaving it to the watch"),
        BindOutcome::Gone => info!(pod = %key, "pod is gone; dropping it"),
        BindOutcome::Failed(e) => {
            warn!(pod = %key, node = %req.node, error = %e, "binding failed; will retry");
            shared.metrics.attempt("error", &req.profile, req.started.elapsed().as_secs_f64());
        }
    }
}
