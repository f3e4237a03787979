//! The dispatcher: what the scheduling thread decided, carried out as tasks, one
//! function per kind of work (a binding cycle, an error, a PodGroup's condition, an
//! unschedulable pod's report with its PostFilter writes or preemption).

use std::sync::Arc;
use std::time::Instant;

use algorithms::PodInfo;
use kube::Client;
use tokio::sync::{Semaphore, mpsc};
use tracing::warn;

use super::binder::{self, ApiHost, BindRequest};
use super::events::Reporter;
use super::scheduling::Work;
use super::serial::Serial;
use super::shared::Shared;
use super::{pod_groups, preempt};
use crate::engine::Nomination;

/// What every task the dispatcher starts shares.
pub(super) struct Dispatcher {
    /// The API server.
    pub(super) client: Client,
    /// The scheduler's state.
    pub(super) shared: Arc<Shared>,
    /// Where events on pods go.
    pub(super) reporter: Arc<Reporter>,
    /// Bindings in flight.
    pub(super) permits: Arc<Semaphore>,
    /// The binding cycles' host.
    pub(super) host: ApiHost,
    /// Each pod's unschedulable reports are written in the order they were decided:
    /// they run concurrently, and an older one must not land over a newer one.
    latest: Serial,
    /// The same for each PodGroup's condition.
    groups_written: Serial,
}

impl Dispatcher {
    /// A dispatcher over its tasks' shared parts.
    pub(super) fn new(
        client: Client,
        shared: Arc<Shared>,
        reporter: Arc<Reporter>,
        permits: Arc<Semaphore>,
        host: ApiHost,
    ) -> Self {
        Dispatcher {
            client,
            shared,
            reporter,
            permits,
            host,
            latest: Serial::default(),
            groups_written: Serial::default(),
        }
    }

    /// Carries out the work until the scheduling thread stops sending (or binding slots
    /// are closed).
    pub(super) async fn run(self, mut work: mpsc::UnboundedReceiver<Work>) {
        while let Some(w) = work.recv().await {
            let carried = match w {
                Work::Bind(req) if binder::has_pre_bind_work(&self.shared, &req) => {
                    self.bind_after_waiting(req);
                    true
                }
                Work::Bind(req) => self.bind(req).await,
                Work::Error(pod, message) => {
                    self.error(pod, message);
                    true
                }
                Work::GroupScheduled(group, verdict) => {
                    self.group_scheduled(group, verdict);
                    true
                }
                Work::Unschedulable(pod, message, nomination) => {
                    self.unschedulable(pod, message, nomination);
                    true
                }
            };
            if !carried {
                break;
            }
        }
    }

    /// A pod that waits at Permit or for PreBind's writes to take effect: the wait holds
    /// no binding slot, so that a slow provisioner does not stall the pods that have
    /// nothing to wait for.
    fn bind_after_waiting(&self, req: BindRequest) {
        let (host, r, permits) = (self.host.clone(), self.reporter.clone(), self.permits.clone());
        let in_flight = self.shared.metrics.flow.start("binding");
        tokio::spawn(async move {
            let _in_flight = in_flight;
            if !binder::pre_bind(&host, &r, &req).await {
                return;
            }
            let Ok(permit) = host.shared.foreground.waiting_for(permits.acquire_owned()).await else {
                return;
            };
            binder::bind_and_record(host, r, req).await;
            drop(permit);
        });
    }

    /// A pod with nothing to wait for before its Binding: the cycle goes straight to it
    /// once a binding slot is free. False when the slots are closed (stopping).
    async fn bind(&self, req: BindRequest) -> bool {
        let Ok(permit) = self.shared.foreground.waiting_for(self.permits.clone().acquire_owned()).await else {
            return false;
        };
        let (host, r) = (self.host.clone(), self.reporter.clone());
        let in_flight = self.shared.metrics.flow.start("binding");
        tokio::spawn(async move {
            let _in_flight = in_flight;
            binder::bind_and_record(host, r, req).await;
            drop(permit);
        });
        true
    }

    /// An attempt that failed with an error: the pod is told why.
    fn error(&self, pod: Arc<PodInfo>, message: String) {
        let r = self.reporter.clone();
        tokio::spawn(async move { r.scheduler_error(&pod, &message).await });
    }

    /// A Kubernetes PodGroup's decision, written in order: the last stays.
    fn group_scheduled(&self, group: String, verdict: Result<(), String>) {
        let ticket = self.groups_written.ticket(&group);
        let (c, serial) = (self.client.clone(), self.groups_written.clone());
        tokio::spawn(async move {
            let key = group.clone();
            serial.run(&key, ticket, || pod_groups::write_condition(c, group, verdict)).await;
        });
    }

    /// An unschedulable pod: its report (event, condition, nomination), then what its
    /// PostFilter asked for: a plugin's writes, or the preemption's evictions.
    fn unschedulable(&self, pod: Arc<PodInfo>, message: String, nomination: Nomination) {
        let (c, s, r) = (self.client.clone(), self.shared.clone(), self.reporter.clone());
        let key = pod.key();
        let this = self.latest.ticket(&key);
        let latest = self.latest.clone();
        tokio::spawn(async move {
            let nominated = match &nomination {
                Nomination::Preempted(p) => Some(Some(p.node.as_str())),
                Nomination::Cleared => Some(None),
                Nomination::Unchanged | Nomination::Released(_) => None,
            };
            // A preemption's nomination is written whatever came after it.
            let preempted = matches!(nomination, Nomination::Preempted(_));
            let current = || preempted || latest.is_latest(&key, this);
            // A pod's reports are written one at a time, in the order they were decided
            // (an older one overtaken is dropped).
            let report = || r.unschedulable(&pod, &message, nominated, &current);
            if preempted {
                report().await;
            } else {
                latest.run(&key, this, report).await;
            }
            if let Nomination::Released(writes) = &nomination {
                release(c.clone(), s.clone(), &pod, writes).await;
            }
            if let Nomination::Preempted(p) = nomination
                && preempt::evict(c, s.clone(), r, pod.clone(), p).await > 0
            {
                // Retry the pod soon, as kube-scheduler activates it.
                s.lock().engine.queue.requeue_if_queued(pod, 1, Instant::now());
                s.wake();
            }
        });
    }
}

/// Makes the writes a PostFilter plugin asked for (a claim's deallocation); the watch
/// then brings the change, which wakes the pod. A failed write is logged and the pod
/// retried after its backoff, as kube-scheduler retries a PostFilter error.
async fn release(client: Client, shared: Arc<Shared>, pod: &Arc<PodInfo>, writes: &[algorithms::framework::ApiWrite]) {
    let host = ApiHost::new(client, shared, 1);
    for w in writes {
        host.shared.limiter.until_ready().await;
        if let Err(error) = crate::binding::ClusterApi::write(&host, w).await {
            warn!(pod = %pod.key(), %error, "PostFilter write failed; retrying the pod");
            host.shared.lock().engine.queue.requeue_if_queued(pod.clone(), 1, Instant::now());
            host.shared.wake();
            return;
        }
    }
}
