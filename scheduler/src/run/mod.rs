//! `run`: the standalone scheduler against a Kubernetes API server.
//!
//! Ownership, in one place:
//! - `Shared::state` (one mutex) holds the cache and the queue ([`crate::engine::Engine`]).
//!   The informer task is the single writer of watch events into it. The scheduling
//!   thread takes it briefly to pop a pod and refresh its own snapshot, and again to
//!   assume or park the pod; the binder takes it to confirm or forget an assumption.
//! - The scheduling thread owns the [`crate::engine::Cycler`]: the snapshot the plugins
//!   read, with no lock held while they run, so watch events, binds, `/readyz` and
//!   `/metrics` never wait for a cycle.
//! - Binds, events and status updates run as tasks with bounded concurrency.
//!
//! Lock order: `Shared::state` is never held across an await; the extender's snapshot
//! view is locked only inside it.

pub mod admission;
pub mod binder;
pub mod budgets;
mod dispatch;
pub mod events;
mod expectation;
pub mod foreground;
pub mod informer;
pub mod leader;
pub mod metrics;
mod objects;
pub mod pod_groups;
pub mod preempt;
mod scheduling;
pub mod secure;
mod serial;
pub mod server;
pub mod shared;
pub mod state;
pub mod workloads;

use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use governor::Quota;
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};
use thiserror::Error;
use tokio::sync::{Semaphore, mpsc, watch};
use tracing::{error, info, warn};

use crate::config_file;
use crate::engine::{Cycler, Engine};
use scheduling::{Work, scheduling_loop};
pub use shared::{Shared, Stats};
pub use state::{Feed, State};

/// What can stop `run` from starting.
#[derive(Debug, Error)]
pub enum RunError {
    /// Bad configuration file.
    #[error(transparent)]
    Config(#[from] config_file::ConfigFileError),
    /// An extender that cannot be set up (unreadable TLS files).
    #[error("cannot set up the extenders: {0}")]
    Extenders(String),
    /// No usable kubeconfig or in-cluster configuration.
    #[error("failed to configure the API client: {0}")]
    Client(String),
    /// The health/metrics address cannot be bound.
    #[error("failed to listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// Options of `custom-scheduler run`.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Kubeconfig path (else `KUBECONFIG`, `~/.kube/config` or in-cluster).
    pub kubeconfig: Option<PathBuf>,
    /// KubeSchedulerConfiguration path.
    pub config: Option<PathBuf>,
    /// Plain-HTTP address of `/healthz`, `/livez`, `/readyz` and `/metrics`, unauthenticated:
    /// a loopback address only.
    pub listen: Option<SocketAddr>,
    /// The secure port: HTTPS, `/metrics` for tokens the API server allows.
    pub secure: Option<secure::SecureServing>,
    /// Force leader election on or off (else the configuration decides).
    pub leader_elect: Option<bool>,
    /// Binds in flight at most.
    pub bind_concurrency: usize,
    /// This replica's identity for leader election and events.
    pub identity: String,
    /// Tie-breaking seed.
    pub seed: u64,
    /// Interval of the summary line in the logs.
    pub summary_interval: Duration,
    /// kube-scheduler feature gates.
    pub feature_gates: algorithms::features::FeatureGates,
}

/// Builds an API client from a kubeconfig path, or by inference (KUBECONFIG, ~/.kube/config, in-cluster).
pub async fn make_client(path: Option<&std::path::Path>) -> Result<Client, RunError> {
    let config = match path {
        Some(p) => {
            let kc = Kubeconfig::read_from(p).map_err(|e| RunError::Client(format!("{}: {e}", p.display())))?;
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(|e| RunError::Client(e.to_string()))?
        }
        None => kube::Config::infer().await.map_err(|e| RunError::Client(e.to_string()))?,
    };
    crate::watch::cause::set_server(&config.cluster_url.to_string());
    if config.accept_invalid_certs {
        tracing::warn!(server = %config.cluster_url, "insecure-skip-tls-verify: the API server's certificate is not verified");
    }
    Client::try_from(config).map_err(|e| RunError::Client(e.to_string()))
}

/// Parses `15s`, `500ms`, `2m`, `1m30s` durations (Go's syntax).
pub fn parse_duration(s: &str) -> Option<Duration> {
    algorithms::extender_config::parse_go_duration(s)
}

/// Runs the scheduler until `shutdown` completes.
pub async fn run(opts: RunOptions, shutdown: impl std::future::Future<Output = ()>) -> Result<(), RunError> {
    let (cfg, mut profiles) = config_file::profiles_with(opts.config.as_deref(), opts.feature_gates, true)?;
    let extenders = crate::extenders::ExtenderSet::new(&cfg.extenders).map_err(RunError::Extenders)?;
    if let Some(x) = &extenders {
        let names: Vec<&str> = x.extenders().iter().map(|e| e.name()).collect();
        info!(extenders = ?names, "calling extenders");
        for p in &mut profiles {
            p.extenders = Some(x.clone() as Arc<dyn algorithms::framework::Extenders>);
        }
    }
    let kubeconfig = opts.kubeconfig.clone().or_else(|| cfg.client_connection.kubeconfig.clone().map(PathBuf::from));
    let client = make_client(kubeconfig.as_deref()).await?;
    let qps = cfg.client_connection.qps.unwrap_or(500.0).max(1.0) as u32;
    let burst = cfg.client_connection.burst.unwrap_or(1000).max(1);
    let quota = Quota::per_second(NonZeroU32::new(qps).unwrap_or(NonZeroU32::MIN))
        .allow_burst(NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN));
    let mut engine = Engine::new(profiles);
    if let (Some(init), Some(max)) = (cfg.pod_initial_backoff_seconds, cfg.pod_max_backoff_seconds) {
        engine.queue = crate::queue::SchedulingQueue::new(Duration::from_secs(init), Duration::from_secs(max));
    }
    engine.queue.set_pop_from_backoff(cfg.feature_gates.pop_from_backoff);
    let names: Vec<String> = engine.profiles.iter().map(|p| p.scheduler_name.clone()).collect();
    let cycler = Cycler::new(&engine, opts.seed);
    let shared = Arc::new(Shared::new(engine, quota));
    if let Some(x) = extenders {
        let _ = shared.extenders.set(x);
    }
    {
        let mut st = shared.lock();
        st.engine.queue.set_observer(Arc::new(shared.metrics.flow.clone()));
        st.engine.record_timings = true;
    }
    shared.nominate_before_waiting.store(cfg.feature_gates.nominate_for_expectation, Ordering::Relaxed);
    info!(profiles = ?names, identity = %opts.identity, "starting custom-scheduler");

    if let Some(listen) = opts.listen {
        if !listen.ip().is_loopback() {
            return Err(RunError::Client(format!(
                "--listen {listen}: the plain-HTTP port serves /metrics without authentication and binds only \
                 a loopback address; use --secure-listen for other addresses"
            )));
        }
        let listener =
            tokio::net::TcpListener::bind(listen).await.map_err(|source| RunError::Listen { addr: listen, source })?;
        let app = server::router(shared.clone());
        tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                error!(error = %e, "health and metrics server stopped");
            }
        });
    }
    if let Some(serving) = &opts.secure {
        let auth = Arc::new(secure::Delegated::new(client.clone()));
        let app = secure::router(server::router(shared.clone()), auth);
        secure::serve(serving, app).await.map_err(|e| RunError::Client(e.to_string()))?;
        info!(listen = %serving.listen, "serving HTTPS: /metrics for tokens allowed to get it, health checks open");
    }
    tokio::spawn(informer::run(client.clone(), shared.clone()));
    tokio::spawn(workloads::run(client.clone(), shared.clone()));
    tokio::spawn(budgets::run(client.clone(), shared.clone()));
    tokio::spawn(objects::run(client.clone(), shared.clone()));
    tokio::spawn(pod_groups::run(client.clone(), shared.clone()));
    tokio::spawn(pod_groups::statuses(client.clone(), shared.clone()));
    tokio::spawn(admission::run(client.clone(), shared.clone()));

    let (stop_tx, stop_rx) = watch::channel(false);
    let leader_elect = opts.leader_elect.or(cfg.leader_election.leader_elect).unwrap_or(false);
    leader::follow(&shared, &client, leader_elect.then_some(&cfg.leader_election), &opts.identity, stop_rx);

    let (work_tx, work_rx) = mpsc::unbounded_channel::<Work>();
    let sched_shared = shared.clone();
    let cycle_thread = std::thread::Builder::new()
        .name("scheduling-cycle".into())
        // The loop runs on a worker of the scheduling pool so its parallel sections hand
        // nothing over between threads.
        .spawn(move || algorithms::framework::on_pool(move || scheduling_loop(sched_shared, work_tx, cycler)))
        .map_err(|e| RunError::Client(format!("failed to start the scheduling thread: {e}")))?;

    // Events have a rate limit of their own, as kube-scheduler's event client has.
    // They yield to the binding cycles' writes: in a burst, pods are bound first.
    let event_options =
        events::Options { qps, burst, yield_to: Some(shared.foreground.clone()), ..events::Options::default() };
    let reporter = Arc::new(events::Reporter::new(
        client.clone(),
        shared.clone(),
        "custom-scheduler",
        &opts.identity,
        event_options,
    ));
    let permits = Arc::new(Semaphore::new(opts.bind_concurrency.max(1)));
    let host =
        binder::ApiHost::new(client.clone(), shared.clone(), opts.bind_concurrency).with_reporter(reporter.clone());
    let dispatcher = dispatch::Dispatcher::new(client.clone(), shared.clone(), reporter.clone(), permits.clone(), host);
    let dispatch = tokio::spawn(dispatcher.run(work_rx));

    tokio::spawn(summary(shared.clone(), permits.clone(), opts.bind_concurrency.max(1), opts.summary_interval));

    shutdown.await;
    info!("shutting down: no new pods are taken; binds already sent finish, the others are released");
    shared.stopping.store(true, Ordering::SeqCst);
    shared.wake();
    let _ = tokio::task::spawn_blocking(move || cycle_thread.join()).await;
    let _ = dispatch.await;
    let n = u32::try_from(opts.bind_concurrency.max(1)).unwrap_or(u32::MAX);
    if tokio::time::timeout(Duration::from_secs(30), permits.acquire_many(n)).await.is_err() {
        warn!("binds still in flight after 30s; exiting anyway");
    }
    reporter.close(Duration::from_secs(5)).await;
    let unfinished = shared.lock().engine.cache.binding_in_progress();
    info!(released = shared.released.load(Ordering::SeqCst), unfinished, "stopped");
    let _ = stop_tx.send(true);
    tokio::time::sleep(Duration::from_millis(100)).await;
    Ok(())
}

/// Every `every` (30 s by default), while anything happens or waits, one line: pods
/// scheduled, unschedulable attempts and errors since the last line, pending pods by
/// queue, binds in flight.
async fn summary(shared: Arc<Shared>, permits: Arc<Semaphore>, bind_concurrency: usize, every: Duration) {
    let mut tick = tokio::time::interval(every.max(Duration::from_millis(100)));
    tick.tick().await;
    let mut last = (0, 0, 0);
    loop {
        tick.tick().await;
        let now = (
            shared.stats.scheduled.load(Ordering::Relaxed),
            shared.stats.unschedulable.load(Ordering::Relaxed),
            shared.stats.errors.load(Ordering::Relaxed),
        );
        let lengths = shared.lock().engine.queue.lengths();
        let in_flight = bind_concurrency.saturating_sub(permits.available_permits());
        shared.metrics.queues(lengths);
        if now != last || lengths.active + lengths.backoff + lengths.unschedulable + lengths.gated + in_flight > 0 {
            info!(
                scheduled = now.0 - last.0,
                unschedulable = now.1 - last.1,
                errors = now.2 - last.2,
                active = lengths.active,
                backoff = lengths.backoff,
                waiting = lengths.unschedulable,
                gated = lengths.gated,
                binds_in_flight = in_flight,
                leader = shared.is_leader(),
                seconds = every.as_secs_f64(),
                "summary"
            );
        }
        last = now;
    }
}

impl Shared {
    fn may_schedule_locked(&self, st: &State) -> bool {
        self.leader.load(Ordering::SeqCst) && !self.stopping.load(Ordering::SeqCst) && st.all_synced()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use algorithms::builders::{NodeBuilder, PodBuilder};
    use algorithms::framework::{FilterPlugin, PluginState};
    use algorithms::{NodeInfo, PodInfo, Profile, Status};
    use std::sync::Mutex;
    use std::sync::atomic::AtomicBool;
    use std::sync::mpsc as std_mpsc;
    use std::time::Instant;

    /// A filter that holds the cycle, the first time it runs, until the test lets it go.
    struct Gate {
        entered: Mutex<std_mpsc::Sender<()>>,
        release: Mutex<std_mpsc::Receiver<()>>,
        held: AtomicBool,
    }

    impl Gate {
        fn new() -> (Self, std_mpsc::Receiver<()>, std_mpsc::Sender<()>) {
            let (entered_tx, entered) = std_mpsc::channel();
            let (release, release_rx) = std_mpsc::channel();
            let gate =
                Gate { entered: Mutex::new(entered_tx), release: Mutex::new(release_rx), held: AtomicBool::new(false) };
            (gate, entered, release)
        }
    }

    impl FilterPlugin for Gate {
        fn name(&self) -> &'static str {
            "Gate"
        }
        fn filter(&self, _: &PluginState, _: &PodInfo, _: &algorithms::NodeInfo) -> Status {
            if !self.held.swap(true, Ordering::SeqCst) {
                let _ = self.entered.lock().unwrap_or_else(|e| e.into_inner()).send(());
                let _ = self.release.lock().unwrap_or_else(|e| e.into_inner()).recv_timeout(Duration::from_secs(10));
            }
            Status::success()
        }
    }

    /// A synced, leading scheduler whose only filter is `gate`, over `nodes` nodes, with
    /// `pods` applied as the watch would.
    fn gated(gate: Gate, nodes: usize, pods: &[k8s_openapi::api::core::v1::Pod]) -> (Arc<Shared>, Cycler) {
        let profile =
            Profile { scheduler_name: "custom-scheduler".into(), filters: vec![Arc::new(gate)], ..Default::default() };
        let mut engine = Engine::new(vec![profile]);
        engine.groups.upsert("default/train".into(), crate::gang::PodGroupSpec::with_min(16));
        let cycler = Cycler::new(&engine, 1);
        let shared = Arc::new(Shared::new(engine, Quota::per_second(NonZeroU32::MIN)));
        {
            let mut st = shared.lock();
            for feed in Feed::ALL {
                st.listed(feed);
            }
            for i in 0..nodes {
                let node = NodeInfo::from_node(&NodeBuilder::new(&format!("n{i}")).build()).unwrap();
                st.engine.cache.upsert_node(node);
            }
            for pod in pods {
                st.apply_pod(pod, Instant::now());
            }
        }
        shared.leader.store(true, Ordering::SeqCst);
        (shared, cycler)
    }

    /// While the cycle is held in its filter, 100 bound pods arrive through the watch:
    /// none of them waits for the cycle.
    fn watch_events_go_through(shared: &Shared, entered: &std_mpsc::Receiver<()>) {
        entered.recv_timeout(Duration::from_secs(10)).unwrap();
        let started = Instant::now();
        let before = shared.lock().engine.cache.pod_count();
        for i in 0..100 {
            let pod = PodBuilder::new(&format!("bound-{i}")).node_name("n0").build();
            shared.lock().apply_pod(&pod, Instant::now());
        }
        assert!(started.elapsed() < Duration::from_secs(5), "the informer waited for the cycle");
        assert_eq!(shared.lock().engine.cache.pod_count(), before + 100);
    }

    #[test]
    fn watch_events_are_applied_while_a_cycle_runs() {
        let (gate, entered, release) = Gate::new();
        let pod = PodBuilder::new("slow").scheduler("custom-scheduler").build();
        let (shared, cycler) = gated(gate, 1, &[pod]);
        let (work_tx, mut work_rx) = mpsc::unbounded_channel();
        let sh = shared.clone();
        let thread = std::thread::spawn(move || scheduling_loop(sh, work_tx, cycler));
        watch_events_go_through(&shared, &entered);
        release.send(()).unwrap();
        let Some(Work::Bind(req)) = work_rx.blocking_recv() else { panic!("the pod was not scheduled") };
        assert_eq!((req.pod.name.as_str(), req.node.as_str()), ("slow", "n0"));
        shared.stopping.store(true, Ordering::SeqCst);
        shared.wake();
        thread.join().unwrap();
    }

    #[test]
    fn watch_events_are_applied_while_a_gang_of_16_is_decided() {
        let (gate, entered, release) = Gate::new();
        let members: Vec<_> = (0..16)
            .map(|i| {
                PodBuilder::new(&format!("worker-{i}"))
                    .scheduler("custom-scheduler")
                    .label(crate::gang::POD_GROUP_LABEL, "train")
                    .build()
            })
            .collect();
        let (shared, cycler) = gated(gate, 4, &members);
        let (work_tx, mut work_rx) = mpsc::unbounded_channel();
        let sh = shared.clone();
        let thread = std::thread::spawn(move || scheduling_loop(sh, work_tx, cycler));
        watch_events_go_through(&shared, &entered);
        // The members are taken from the queue while the group is decided.
        assert_eq!(shared.lock().engine.queue.lengths().active, 0);
        release.send(()).unwrap();
        let mut bound = Vec::new();
        while bound.len() < 16 {
            match work_rx.blocking_recv() {
                Some(Work::Bind(req)) => bound.push(req.pod.name.clone()),
                Some(_) => {}
                None => panic!("the scheduling loop stopped after {bound:?}"),
            }
        }
        bound.sort();
        let mut want: Vec<String> = (0..16).map(|i| format!("worker-{i}")).collect();
        want.sort();
        assert_eq!(bound, want);
        // All 16 assumed, and the 100 pods that arrived meanwhile counted too.
        assert_eq!(shared.lock().engine.cache.pod_count(), 116);
        shared.stopping.store(true, Ordering::SeqCst);
        shared.wake();
        thread.join().unwrap();
    }

    /// The cluster changes while a group is decided so that its second member can no
    /// longer be assumed (the watch shows it bound elsewhere): every other member, those
    /// after it included, goes back to the queue; none is left taken from the queue.
    #[test]
    fn a_group_refused_half_way_puts_every_other_member_back() {
        let profile = Profile { scheduler_name: "custom-scheduler".into(), ..Default::default() };
        let mut engine = Engine::new(vec![profile]);
        engine.groups.upsert("default/train".into(), crate::gang::PodGroupSpec::with_min(4));
        let mut cycler = Cycler::new(&engine, 1);
        let mut st = State::new(engine);
        let now = Instant::now();
        for i in 0..2 {
            st.engine.cache.upsert_node(NodeInfo::from_node(&NodeBuilder::new(&format!("n{i}")).build()).unwrap());
        }
        let member = |i: usize| {
            PodBuilder::new(&format!("worker-{i}"))
                .scheduler("custom-scheduler")
                .label(crate::gang::POD_GROUP_LABEL, "train")
                .started(i64::try_from(i).unwrap())
        };
        for i in 0..4 {
            st.apply_pod(&member(i).build(), now);
        }
        let Some(Ok(attempt)) = cycler.begin(&mut st.engine, now) else { panic!("nothing to schedule") };
        let (group, spec) = st.engine.groups.gang_of(&attempt.queued.pod).unwrap();
        let Ok(members) = cycler.begin_group(&mut st.engine, attempt, &group, &spec, now) else {
            panic!("the group was parked")
        };
        let plan = cycler.evaluate_group(members);
        assert_eq!(plan.placed().len(), 4);
        let second = plan.placed()[1].0.clone();
        let mut bound = member(second[7..].parse().unwrap()).build();
        bound.spec.as_mut().unwrap().node_name = Some("n1".into());
        st.apply_pod(&bound, now);
        let cycles = cycler.finish_group(&mut st.engine, plan, now);
        assert!(cycles.iter().all(|c| !matches!(c.outcome, crate::engine::Outcome::Scheduled { .. })));
        let others: Vec<String> =
            (0..4).map(|i| format!("default/worker-{i}")).filter(|k| !k.ends_with(&second)).collect();
        for key in &others {
            assert!(st.engine.queue.contains(key), "{key} was dropped");
            assert_eq!(st.engine.cache.node_of(key), None, "{key} is still assumed");
        }
        assert_eq!(st.engine.queue.lengths().backoff, 3);
        assert_eq!(st.engine.queue.in_flight(), 0, "a member was left taken from the queue");
    }

    #[test]
    fn durations_parse_like_kubernetes_config() {
        assert_eq!(parse_duration("15s"), Some(Duration::from_secs(15)));
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("soon"), None);
    }
}
