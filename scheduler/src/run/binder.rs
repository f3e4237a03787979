//! `run`'s side of the binding cycle ([`crate::binding`]): the API server it writes to
//! (PreBind's PATCHes, `pods/{name}/binding`), and what each ending reports (events,
//! metrics, logs).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use algorithms::PodInfo;
use algorithms::framework::ApiWrite;
use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tracing::{debug, info, warn};

use super::events::Reporter;
use super::expectation::Expectations;
use super::shared::Shared;
use crate::binding::{self, ClusterApi, Finished, Host, POLL};
pub use crate::binding::{BindOutcome, BindRequest};
use crate::engine::Engine;
use crate::engine::timing::{Ended, Point};
use algorithms::Code;

/// The API server and the shared state, as a binding cycle's host.
#[derive(Clone)]
pub struct ApiHost {
    /// The client.
    pub client: Client,
    /// The scheduler's state.
    pub shared: Arc<Shared>,
    /// Bounds PreBind's writes in flight (the Bindings have their own bound): a backlog
    /// of pods with claims or volumes to write must not put thousands of requests in
    /// flight at once, where the API server serves them slower than a steady stream.
    write_slots: Arc<tokio::sync::Semaphore>,
    /// The pods' `nominatedNodeName` expectations not yet written.
    expectations: Arc<Expectations>,
    /// Where the cycle's events on the pod go (none for PostFilter's writes).
    reporter: Option<Arc<Reporter>>,
}

impl ApiHost {
    /// A host writing through `client`, with at most `writes` PreBind writes in flight.
    pub fn new(client: Client, shared: Arc<Shared>, writes: usize) -> Self {
        ApiHost {
            client,
            shared,
            write_slots: Arc::new(tokio::sync::Semaphore::new(writes.max(1))),
            expectations: Arc::default(),
            reporter: None,
        }
    }

    /// The host reporting the binding cycles' events through `reporter`.
    pub fn with_reporter(mut self, reporter: Arc<Reporter>) -> Self {
        self.reporter = Some(reporter);
        self
    }
}

impl ClusterApi for ApiHost {
    async fn write(&self, write: &ApiWrite) -> Result<u64, String> {
        // Counted as in flight from the start, so that the wait's end wakes nothing.
        let _writing = self.shared.foreground.writing();
        let _slot = (self.shared.foreground.waiting_for(self.write_slots.acquire()).await)
            .map_err(|_| "the scheduler is stopping".to_string())?;
        match crate::owners::API_OWNERS.iter().find_map(|o| o.write(&self.client, write)) {
            Some(made) => made.await,
            None => Err(format!("no owner makes the write {write:?}")),
        }
    }

    async fn bind(&self, pod: &PodInfo, node: &str) -> BindOutcome {
        let _writing = self.shared.foreground.writing();
        if let Some(x) = self.shared.extenders.get().cloned() {
            let (p, n) = (pod.clone(), node.to_string());
            match tokio::task::spawn_blocking(move || x.bind(&p, &n)).await {
                Ok(Some(Ok(()))) => return BindOutcome::Bound,
                Ok(Some(Err(e))) => return BindOutcome::Failed(e),
                Ok(None) => {}
                Err(e) => return BindOutcome::Failed(format!("extender bind: {e}")),
            }
        }
        bind(&self.client, pod, node).await
    }
}

impl Host for ApiHost {
    type Api = Self;

    fn api(&self) -> &Self {
        self
    }

    fn with_engine<R>(&self, f: impl FnOnce(&mut Engine) -> R) -> R {
        f(&mut self.shared.lock().engine)
    }

    async fn pause(&self) -> bool {
        tokio::time::sleep(POLL).await;
        true
    }

    async fn throttle(&self) {
        self.shared.foreground.waiting_for(self.shared.limiter.until_ready()).await;
    }

    fn stopping(&self) -> bool {
        self.shared.stopping()
    }

    fn now(&self) -> Instant {
        Instant::now()
    }

    fn changed(&self) {
        self.shared.wake();
    }

    fn waits(&self, pod: &PodInfo) {
        self.expectations.urgent(&pod.key());
    }

    fn waiting(&self, pod: &PodInfo, reason: &str, note: String) {
        if let Some(r) = &self.reporter {
            r.publish(pod, pod, "Normal", reason, "Scheduling", note, None);
        }
    }
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
        Err(e) => {
            use algorithms::framework::wording::{DEFAULT_BINDER, bind_error};
            BindOutcome::Failed(bind_error(DEFAULT_BINDER, &crate::watch::cause::api(&e)))
        }
    }
}

/// Permit's wait and PreBind; `false` when the cycle ended there (reported). With
/// `NominatedNodeNameForExpectation` the pod's node goes into `status.nominatedNodeName`
/// meanwhile, as kube-scheduler writes it ([`super::expectation`]).
pub async fn pre_bind(host: &ApiHost, reporter: &Reporter, req: &BindRequest) -> bool {
    let t0 = Instant::now();
    let key = req.pod.key();
    if host.shared.nominate_before_waiting.load(Ordering::Relaxed)
        && req.pod.nominated_node.as_deref() != Some(&req.node)
    {
        let pending = host.expectations.begin(&key);
        let (host, req) = (host.clone(), req.clone());
        tokio::spawn(async move {
            let foreground = host.shared.foreground.clone();
            pending.run(&foreground, || nominate(&host, &req)).await;
        });
    }
    let outcome = binding::pre_bind(host, req).await;
    let ended = Ended::ok(outcome.is_ok());
    host.shared.metrics.extension_point(Point::PreBind, ended, &req.profile, t0.elapsed().as_secs_f64());
    match outcome {
        Ok(()) => {
            debug!(pod = %key, node = %req.node, ms = t0.elapsed().as_millis() as u64, "ready to bind");
            true
        }
        Err(finished) => {
            host.expectations.finish(&key).await;
            report(host, reporter, req, finished).await;
            false
        }
    }
}

/// Writes the pod's expected node; a failure is logged and the cycle goes on, as
/// kube-scheduler's does.
async fn nominate(host: &ApiHost, req: &BindRequest) {
    host.shared.limiter.until_ready().await;
    let Ok(_slot) = host.write_slots.acquire().await else { return };
    let api: Api<Pod> = Api::namespaced(host.client.clone(), &req.pod.namespace);
    let patch = json!({"status": {"nominatedNodeName": req.node}});
    if let Err(e) = api.patch_status(&req.pod.name, &PatchParams::default(), &Patch::Merge(&patch)).await {
        warn!(pod = %req.pod.key(), node = %req.node, error = %crate::watch::cause::Told(&e), "failed to set the nominated node before binding");
    }
}

/// The Binding, and its report.
pub async fn bind_and_record(host: ApiHost, reporter: Arc<Reporter>, req: BindRequest) {
    let t0 = Instant::now();
    host.expectations.finish(&req.pod.key()).await;
    let finished = binding::bind(&host, &req).await;
    if finished != Finished::Released {
        let bound = finished == Finished::Bound;
        host.shared.metrics.bind(bound, &req.profile, t0.elapsed().as_secs_f64());
    }
    report(&host, &reporter, &req, finished).await;
}

/// Whether the pod has anything to do before its Binding (a reservation to write, a
/// wait at Permit): such pods are not given a binding slot until it is done. This is
/// kube-scheduler's PreBindPreFlight, and is timed as it.
pub fn has_pre_bind_work(shared: &Shared, req: &BindRequest) -> bool {
    let t0 = Instant::now();
    let key = req.pod.key();
    let work = {
        let st = shared.lock();
        st.engine.cache.has_reservation(&key) || st.engine.permit_deadline(&key).is_some()
    };
    let ended = Ended::Code(if work { Code::Success } else { Code::Skip });
    shared.metrics.extension_point(Point::PreBindPreFlight, ended, &req.profile, t0.elapsed().as_secs_f64());
    if !work {
        // No PreBind plugin has anything to do for the pod: PreBind runs none.
        shared.metrics.extension_point(Point::PreBind, Ended::ok(true), &req.profile, 0.0);
    }
    work
}

/// Logs, counts and reports how a binding cycle ended.
async fn report(host: &ApiHost, reporter: &Reporter, req: &BindRequest, finished: Finished) {
    let shared = &host.shared;
    let key = req.pod.key();
    match finished {
        Finished::Bound => {
            let t0 = Instant::now();
            debug!(pod = %key, node = %req.node, "bound");
            shared.stats.scheduled.fetch_add(1, Ordering::Relaxed);
            if !shared.stats.first_bind_logged.swap(true, Ordering::Relaxed) {
                let ms = shared.lock().started.elapsed().as_millis() as u64;
                info!(pod = %key, node = %req.node, ms, "first pod bound");
            }
            shared.metrics.attempt("scheduled", &req.profile, req.started.elapsed().as_secs_f64());
            shared.metrics.cycle.bound(req.attempts, req.queued_since.elapsed().as_secs_f64());
            reporter.scheduled(&req.pod, &req.node);
            // PostBind: what follows a successful bind (the Scheduled event queued).
            shared.metrics.extension_point(Point::PostBind, Ended::ok(true), &req.profile, t0.elapsed().as_secs_f64());
        }
        Finished::Conflict => info!(pod = %key, "pod was already bound; leaving it to the watch"),
        Finished::Gone => info!(pod = %key, "pod is gone; dropping it"),
        Finished::Released => shared.count_released(),
        Finished::Failed { step: "Bind", message, .. } => {
            warn!(pod = %key, node = %req.node, error = %message, "binding failed; will retry");
            shared.metrics.attempt("error", &req.profile, req.started.elapsed().as_secs_f64());
        }
        Finished::Failed { step, message, requeued } => {
            warn!(pod = %key, node = %req.node, step, error = %message, "binding cycle failed; will retry");
            shared.metrics.attempt("error", &req.profile, req.started.elapsed().as_secs_f64());
            if requeued {
                reporter.scheduler_error(&req.pod, &message).await;
            }
        }
    }
}
