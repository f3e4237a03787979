//! The binding cycle, one for `run` and `simulate`: wait at Permit, PreBind, Bind, then
//! confirm. On any failure one path ([`give_up`]) forgets the pod (which runs Unreserve
//! for every plugin that reserved, in reverse order), fires the deletion event for the
//! pods its assumption kept out, and requeues it with backoff.
//!
//! The cycle names no plugin: it runs the Permit and PreBind plugins of the pod's
//! profile with what their Reserve kept. `run` drives it against the API server
//! (`run::api`), `simulate` against an in-memory API that plays the controllers
//! ([`memory`]).

pub mod memory;
#[cfg(test)]
mod tests;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use algorithms::PodInfo;
use algorithms::framework::{ApiWrite, Permit, PreBindPlugin, Progress, Reserved};

use crate::engine::Engine;

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
    /// When it entered the scheduling queue.
    pub queued_since: Instant,
}

/// What the API server said to a Binding.
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

/// The API server as the binding cycle uses it.
pub trait ClusterApi: Send + Sync {
    /// Makes one of PreBind's writes; returns the object's new resource version.
    fn write(&self, write: &ApiWrite) -> impl Future<Output = Result<u64, String>> + Send;

    /// Binds the pod to the node.
    fn bind(&self, pod: &PodInfo, node: &str) -> impl Future<Output = BindOutcome> + Send;
}

/// Where a binding cycle runs: the engine it changes, the API it calls, its clock.
pub trait Host: Send + Sync {
    /// The API.
    type Api: ClusterApi;

    /// The API the cycle writes through.
    fn api(&self) -> &Self::Api;

    /// Runs `f` on the engine under the state lock.
    fn with_engine<R>(&self, f: impl FnOnce(&mut Engine) -> R) -> R;

    /// Waits until the watched objects may have changed; false when nothing will change
    /// while the cycle waits (the in-memory API answers every write at once).
    fn pause(&self) -> impl Future<Output = bool> + Send;

    /// Before each API call: the client's rate limit.
    fn throttle(&self) -> impl Future<Output = ()> + Send;

    /// Whether the scheduler is shutting down.
    fn stopping(&self) -> bool;

    /// The clock the queue runs on.
    fn now(&self) -> Instant;

    /// The engine changed in a way the scheduling loop should look at (a pod requeued).
    fn changed(&self) {}

    /// The cycle started waiting on the cluster (at Permit, or for what a PreBind
    /// plugin wrote to take effect).
    fn waits(&self, _pod: &PodInfo) {}

    /// A PreBind plugin started waiting for the cluster (a device's binding conditions):
    /// `run` says so in a `Normal` event on the pod (`reason`, `note`), as kube-scheduler.
    fn waiting(&self, _pod: &PodInfo, _reason: &str, _note: String) {}
}

/// How a binding cycle ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finished {
    /// Bound; the watch confirms the assumption.
    Bound,
    /// 409 on the Binding: already bound; the watch brings the truth.
    Conflict,
    /// The pod is gone (404 on the Binding).
    Gone,
    /// Permit or PreBind failed, or the Binding did: the pod was forgotten and, when
    /// `requeued`, retried after backoff. `message` is kube-scheduler's (for the event).
    Failed {
        /// The step: `Permit`, `PreBind` or `Bind`.
        step: &'static str,
        /// What went wrong.
        message: String,
        /// Whether the pod went back to the queue.
        requeued: bool,
    },
    /// Not bound because the scheduler is stopping; the pod stays pending for the next one.
    Released,
}

/// The steps before the Binding: wait at Permit, then each PreBind plugin's writes and
/// its wait until they took effect. `Err` is how the cycle ended (the pod was given up).
pub async fn pre_bind<H: Host>(host: &H, req: &BindRequest) -> Result<(), Finished> {
    // One look under the lock: most pods neither wait at Permit nor have PreBind work.
    let key = req.pod.key();
    let (waits, plugins) = host.with_engine(|e| {
        let waits = e.permit_deadline(&key).is_some();
        let Some(profile) = e.profiles.iter().find(|p| p.scheduler_name == req.profile) else {
            return (waits, Vec::new());
        };
        let reserved = |p: &Arc<dyn PreBindPlugin>| e.cache.reserved(&key, p.name()).map(|r| (p.clone(), r.clone()));
        (waits, profile.pre_binds.iter().filter_map(reserved).collect::<Vec<_>>())
    });
    if waits && let Err(message) = wait_on_permit(host, req).await {
        let requeued = give_up(host, req, Requeue::IfForgotten);
        return Err(Finished::Failed { step: "Permit", message, requeued });
    }
    if !plugins.is_empty()
        && let Err((message, undo)) = run_pre_bind(host, req, plugins).await
    {
        let requeued = give_up(host, req, Requeue::IfForgotten);
        release(host, req, &undo).await;
        return Err(Finished::Failed { step: "PreBind", message, requeued });
    }
    Ok(())
}

/// What Unreserve takes back through the API server after the cycle failed past
/// PreBind's writes: each PreBind plugin's undo of all its writes.
fn undo_all<H: Host>(host: &H, req: &BindRequest) -> Vec<ApiWrite> {
    let key = req.pod.key();
    host.with_engine(|e| {
        let Some(profile) = e.profiles.iter().find(|p| p.scheduler_name == req.profile) else { return Vec::new() };
        let reserved = |p: &Arc<dyn PreBindPlugin>| e.cache.reserved(&key, p.name()).map(|r| (p.clone(), r.clone()));
        let plugins: Vec<_> = profile.pre_binds.iter().filter_map(reserved).collect();
        plugins.iter().flat_map(|(p, r)| p.undo(r, &req.pod, usize::MAX)).collect()
    })
}

/// Makes Unreserve's writes; a failure is logged (the next attempt meets the claim as
/// it is, as kube-scheduler's does).
async fn release<H: Host>(host: &H, req: &BindRequest, undo: &[ApiWrite]) {
    for w in undo {
        host.throttle().await;
        if let Err(error) = host.api().write(w).await {
            tracing::warn!(pod = %req.pod.key(), %error, "Unreserve could not take the pod out of a claim");
        }
    }
}

/// The Binding, and what its answer does to the cache and the queue.
pub async fn bind<H: Host>(host: &H, req: &BindRequest) -> Finished {
    host.throttle().await;
    if host.stopping() {
        give_up(host, req, Requeue::No);
        return Finished::Released;
    }
    let key = req.pod.key();
    match host.api().bind(&req.pod, &req.node).await {
        BindOutcome::Bound => {
            host.with_engine(|e| e.cache.finish_binding(&key, host.now()));
            host.changed();
            Finished::Bound
        }
        BindOutcome::Conflict => {
            give_up(host, req, Requeue::No);
            Finished::Conflict
        }
        BindOutcome::Gone => {
            give_up(host, req, Requeue::Delete);
            Finished::Gone
        }
        BindOutcome::Failed(message) => {
            // Retried only while still assumed: a pod deleted meanwhile, or whose bind
            // landed after all (the watch showed it bound), is not put back.
            let undo = undo_all(host, req);
            let requeued = give_up(host, req, Requeue::IfForgotten);
            release(host, req, &undo).await;
            Finished::Failed { step: "Bind", message, requeued }
        }
    }
}

/// The whole cycle at once.
pub async fn run<H: Host>(host: &H, req: &BindRequest) -> Finished {
    match pre_bind(host, req).await {
        Ok(()) => bind(host, req).await,
        Err(finished) => finished,
    }
}

/// What becomes of a forgotten pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requeue {
    /// Back to the queue (with backoff) if it was still assumed.
    IfForgotten,
    /// Out of the queue (the pod is gone).
    Delete,
    /// Neither: the watch or the next scheduler decides.
    No,
}

/// The one failure path: the pod's assumption goes (Unreserve runs for its
/// reservations), the pods it kept out hear of it, and the pod is requeued or dropped.
/// Returns whether it was requeued.
pub fn give_up<H: Host>(host: &H, req: &BindRequest, requeue: Requeue) -> bool {
    let key = req.pod.key();
    let requeued = host.with_engine(|e| {
        let now = host.now();
        let forgotten = e.forget(&key, now);
        let again = match requeue {
            Requeue::IfForgotten => forgotten.is_some(),
            Requeue::Delete => {
                e.queue.delete(&key);
                false
            }
            Requeue::No => false,
        };
        if again {
            e.queue.requeue(req.pod.clone(), req.attempts, now);
        }
        again
    });
    host.changed();
    requeued
}

/// Waits while a Permit plugin of the pod's profile says so; `Err` is the rejection.
async fn wait_on_permit<H: Host>(host: &H, req: &BindRequest) -> Result<(), String> {
    let key = req.pod.key();
    let mut announced = false;
    loop {
        let verdict = host.with_engine(|e| {
            let (deadline, wait) = e.permit_deadline(&key)?;
            let profile = e.profiles.iter().find(|p| p.scheduler_name == req.profile);
            let mut waiting_on = None;
            for plugin in profile.iter().flat_map(|p| p.permits.iter()) {
                match plugin.permit(e.cache.objects(), &req.pod, &req.node) {
                    Permit::Allow => {}
                    Permit::Wait(_) => {
                        waiting_on.get_or_insert(plugin.name());
                    }
                    Permit::Reject(status) => {
                        return Some(Err(algorithms::framework::wording::permit_rejection(plugin.name(), &status)));
                    }
                }
            }
            match waiting_on {
                Some(plugin) => Some(Ok((plugin, deadline, wait))),
                None => {
                    e.end_wait(&key);
                    None
                }
            }
        });
        let (plugin, deadline, wait) = match verdict {
            None => return Ok(()),
            Some(Err(message)) => return Err(message),
            Some(Ok(waiting)) => waiting,
        };
        if !announced {
            announced = true;
            host.waits(&req.pod);
        }
        if host.now() >= deadline || !host.pause().await {
            return Err(format!("rejected due to timeout after waiting {wait:?} at plugin {plugin}"));
        }
    }
}

/// Each PreBind plugin that reserved something for the pod: its writes, then its wait.
async fn run_pre_bind<H: Host>(
    host: &H,
    req: &BindRequest,
    plugins: Vec<(Arc<dyn PreBindPlugin>, Reserved)>,
) -> Result<(), (String, Vec<ApiWrite>)> {
    let key = req.pod.key();
    // What Unreserve takes back through the API server if the cycle fails from here on.
    let mut undo: Vec<ApiWrite> = Vec::new();
    for (plugin, reserved) in plugins {
        let failed = |message: String| format!("running PreBind plugin \"{}\": {message}", plugin.name());
        let writes = plugin.pre_bind(&reserved, &req.node);
        let mut versions = Vec::with_capacity(writes.len());
        for w in &writes {
            host.throttle().await;
            match host.api().write(w).await {
                Ok(v) => versions.push(v),
                Err(e) => {
                    undo.extend(plugin.undo(&reserved, &req.pod, versions.len()));
                    return Err((failed(e), undo));
                }
            }
        }
        undo.extend(plugin.undo(&reserved, &req.pod, versions.len()));
        if !versions.is_empty() {
            host.with_engine(|e| plugin.written(e.cache.objects_mut(), &reserved, &versions));
        }
        let deadline = Instant::now() + plugin.timeout();
        let mut announced = false;
        loop {
            let progress = host.with_engine(|e| {
                if e.cache.node_of(&key).is_none() {
                    return Progress::Failed(format!("pod {key} does not exist any more"));
                }
                match e.cache.node(&req.node) {
                    None => Progress::Failed(format!("failed to get node \"{}\": not found", req.node)),
                    Some(node) => plugin.check(e.cache.objects(), &reserved, node, &versions),
                }
            });
            match progress {
                Progress::Done => break,
                Progress::Failed(message) => return Err((failed(message), undo)),
                Progress::Waiting if !announced => {
                    announced = true;
                    host.waits(&req.pod);
                    if let Some((reason, note)) = plugin.waiting_event(&req.node) {
                        host.waiting(&req.pod, reason, note);
                    }
                }
                Progress::Waiting => {}
            }
            if Instant::now() >= deadline || !host.pause().await {
                return Err((failed(plugin.timeout_message()), undo));
            }
            if host.stopping() {
                return Err((failed("the scheduler is stopping".into()), undo));
            }
        }
    }
    Ok(())
}

/// How often a waiting cycle looks at the watched objects again in `run`.
pub const POLL: Duration = Duration::from_millis(100);
