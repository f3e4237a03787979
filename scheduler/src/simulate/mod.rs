//! `simulate`: the real queue, cache, framework and an in-memory binder over a snapshot.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use algorithms::framework::on_pool;
use algorithms::{PodInfo, Profile};
use indicatif::{ProgressBar, ProgressStyle};

use crate::binding::memory::{MemoryApi, MemoryHost};
use crate::binding::{self, BindRequest, Finished};
use crate::cluster::ParsedCluster;
use crate::engine::{Cycler, Engine, Nomination, Outcome, Preempted};

mod groups;
mod report;
mod steady;
mod timeline;
pub use report::{Latency, PreemptionRecord, SimulationReport, peak_rss_bytes, percentile, reasons, render};
use steady::Steady;
pub use timeline::{Observer, Timeline};

/// Options of a simulation run.
#[derive(Debug, Clone, Default)]
pub struct SimulateOptions {
    /// Seed for tie-breaking.
    pub seed: u64,
    /// Show a progress bar on stderr.
    pub progress: bool,
    /// Turn off reuse of node-local results across identical pods (for comparison).
    pub no_equivalence_cache: bool,
    /// Keep per-node use before and after, and why each pending pod fits nowhere, for a
    /// report (`SimulationReport::detail`).
    pub detail: bool,
}

/// One change of the cluster during the measured phase: a node update, a bound pod that
/// leaves and a pod that arrives, each optional.
#[derive(Debug, Default)]
pub struct ChurnStep {
    /// The node's new version.
    pub node: Option<algorithms::NodeInfo>,
    /// `namespace/name` of a placed pod that is deleted.
    pub leaving: Option<String>,
    /// A new pending pod.
    pub arriving: Option<PodInfo>,
}

/// Cluster churn at a steady wall-clock rate while the measured pods are scheduled,
/// as scheduler_perf's churn operation does.
pub struct Churn {
    /// Steps per second.
    pub per_second: f64,
    /// Builds step `k`; `None` ends the churn.
    pub step: Box<dyn FnMut(usize) -> Option<ChurnStep> + Send>,
}

/// How the measured pods arrive.
#[derive(Default)]
pub enum Stream {
    /// All at once, as one backlog.
    #[default]
    Backlog,
    /// All at once, while the cluster churns.
    Churn(Churn),
    /// scheduler_perf's steady state: `in_flight` pending at a time, each deleted once
    /// bound (with the claims it owns) and replaced by the next.
    Steady {
        /// Pods pending at a time.
        in_flight: usize,
    },
    /// Arrivals and departures in virtual time (the measured pods are the timeline's).
    Timeline(Timeline),
}

/// A churn in progress.
struct ChurnRun {
    churn: Churn,
    started: Instant,
    done: usize,
    /// The measured backlog: churn stops once this many pods were placed or parked, so
    /// that arrivals cannot outrun a slow scheduler forever.
    backlog: usize,
    ended: bool,
}

impl ChurnRun {
    /// Applies the steps due by now, firing the events the informers would.
    fn apply_due(&mut self, engine: &mut Engine, clock: Instant, out: &mut Drained) {
        if self.ended || out.placements.len() + out.failures.len() >= self.backlog {
            return;
        }
        let due = (self.started.elapsed().as_secs_f64() * self.churn.per_second) as usize;
        while self.done < due {
            let Some(step) = (self.churn.step)(self.done) else {
                self.ended = true;
                return;
            };
            self.done += 1;
            if let Some(node) = step.node
                && let Some(event) = engine.cache.upsert_node(node).event()
            {
                engine.on_event(event, clock);
            }
            if let Some(key) = step.leaving
                && engine.remove_pod(&key, clock).is_some()
            {
                out.placements.remove(&key);
            }
            if let Some(pod) = step.arriving
                && engine.handles(&pod)
            {
                engine.enqueue(Arc::new(pod), clock);
            }
        }
    }
}

/// Loads nodes, bound pods and namespaces into an engine; returns the pending pods
/// this engine's profiles handle, and how many of them are gated.
pub fn load(engine: &mut Engine, cluster: ParsedCluster) -> (Vec<PodInfo>, usize) {
    for (ns, labels) in cluster.namespaces {
        engine.cache.upsert_namespace(&ns, labels);
    }
    engine.cache.set_workloads(cluster.workloads);
    engine.cache.set_budgets(cluster.budgets);
    *engine.cache.objects_mut() = cluster.owned;
    for (key, spec) in cluster.pod_groups {
        engine.groups.upsert(key, spec);
    }
    engine.groups.set_all(crate::gang::Api::Kubernetes, cluster.kube_pod_groups);
    for node in cluster.nodes {
        engine.cache.upsert_node(node);
    }
    for pod in cluster.bound {
        // Every bound pod's node is among the nodes loaded above.
        let _ = engine.cache.add_pod(pod);
    }
    let mut gated = 0;
    let mut pending = Vec::new();
    for pod in cluster.pending {
        if !engine.handles(&pod) {
            continue;
        }
        if !pod.scheduling_gates.is_empty() {
            gated += 1;
            continue;
        }
        pending.push(pod);
    }
    (pending, gated)
}

/// What one drain of the queue produced.
#[derive(Default)]
struct Drained {
    preemptions: Vec<PreemptionRecord>,
    placements: BTreeMap<String, String>,
    owned: algorithms::owners::Reported,
    failures: BTreeMap<String, String>,
    latencies: Vec<Duration>,
}

/// Schedules until the queue holds only unschedulable pods, binding through the binding
/// cycle against the in-memory API.
fn drain(
    engine: &mut Engine,
    cycler: &mut Cycler,
    api: &MemoryApi,
    clock: &mut Instant,
    bar: Option<&ProgressBar>,
    mut churn: Option<&mut ChurnRun>,
    mut steady: Option<&mut Steady>,
) -> Drained {
    let mut out = Drained::default();
    loop {
        if let Some(c) = churn.as_deref_mut() {
            c.apply_due(engine, *clock, &mut out);
        }
        let Some(cycles) = cycler.schedule_next(engine, *clock) else {
            // Nothing is ready: jump the virtual clock to the next backoff expiry, if any.
            match engine.queue.next_backoff() {
                Some(at) => {
                    *clock = (*clock).max(at);
                    continue;
                }
                None => break,
            }
        };
        for cycle in cycles {
            let pod = cycle.queued.pod.clone();
            let fewest = fewest_victims(cycler, &cycle);
            if record(engine, api, cycle, *clock, bar, fewest, &mut out)
                && let Some(s) = steady.as_deref_mut()
            {
                s.bound(engine, &pod, *clock);
            }
        }
    }
    out.owned = api.report(engine);
    out
}

/// The fewest pods whose eviction would have sufficed for a cycle's preemption, when the
/// cycler measures it.
fn fewest_victims(cycler: &mut Cycler, cycle: &crate::engine::Cycle) -> Option<usize> {
    match &cycle.outcome {
        Outcome::Unschedulable { nomination: Nomination::Preempted(p), .. }
            if cycler.count_fewest_victims && !p.victims.is_empty() =>
        {
            cycler.fewest_victims(&cycle.profile, &cycle.queued.pod, &p.node, p.victims.len())
        }
        _ => None,
    }
}

/// Takes in what one cycle decided: a placement (bound through the binding cycle), a
/// preemption (with the fewest victims that would have sufficed, when measured) or a
/// failure. Returns whether the pod was bound.
fn record(
    engine: &mut Engine,
    api: &MemoryApi,
    cycle: crate::engine::Cycle,
    clock: Instant,
    bar: Option<&ProgressBar>,
    fewest: Option<usize>,
    out: &mut Drained,
) -> bool {
    out.latencies.push(cycle.duration);
    let key = cycle.queued.pod.key();
    let failure = match cycle.outcome {
        Outcome::Scheduled { node } => {
            let req = BindRequest {
                pod: cycle.queued.pod.clone(),
                node: node.clone(),
                attempts: cycle.queued.attempts,
                profile: cycle.profile.clone(),
                started: clock,
                queued_since: cycle.queued.first_seen,
            };
            match futures::executor::block_on(binding::run(&MemoryHost::new(engine, api, clock), &req)) {
                Finished::Bound => {
                    out.failures.remove(&key);
                    out.placements.insert(key.clone(), node);
                    if let Some(b) = bar {
                        b.inc(1);
                    }
                    None
                }
                Finished::Failed { message, .. } => Some(message),
                Finished::Conflict | Finished::Gone | Finished::Released => None,
            }
        }
        Outcome::Gone => None,
        Outcome::Unschedulable { message, nomination } => {
            if let Nomination::Released(writes) = &nomination {
                let host = MemoryHost::new(engine, api, clock);
                let failed = writes
                    .iter()
                    .any(|w| futures::executor::block_on(crate::binding::ClusterApi::write(&host, w)).is_err());
                if failed {
                    // As in `run`: the pod is retried after its backoff.
                    engine.queue.requeue(cycle.queued.pod.clone(), cycle.queued.attempts, clock);
                }
            }
            if let Nomination::Preempted(p) = nomination
                && !p.victims.is_empty()
            {
                evict(engine, &p, clock, out);
                out.preemptions.push(PreemptionRecord {
                    preemptor: key.clone(),
                    node: p.node,
                    victims: p.victims.iter().map(|v| v.key()).collect(),
                    fewest,
                });
            }
            Some(message)
        }
        Outcome::Error { message } => Some(message),
    };
    let Some(message) = failure else { return out.placements.contains_key(&key) };
    if cycle.queued.attempts == 1
        && let Some(b) = bar
    {
        b.inc(1);
    }
    out.failures.insert(key, message);
    false
}

/// Deletes the victims of a preemption from the in-memory cluster, as the API server
/// does once the scheduler deletes them; the deletions wake the preemptor.
fn evict(engine: &mut Engine, p: &Preempted, clock: Instant, out: &mut Drained) {
    for v in &p.victims {
        let key = v.key();
        engine.remove_pod(&key, clock);
        out.placements.remove(&key);
    }
}

/// Runs the scheduling loop until every pod is placed or parked as unschedulable.
pub fn run(profiles: Vec<Profile>, cluster: ParsedCluster, opts: &SimulateOptions) -> SimulationReport {
    run_phased(profiles, cluster, Vec::new(), opts)
}

/// Like [`run`], first scheduling `init` pods without measuring them (as scheduler_perf's
/// initial pods), then measuring the cluster's pending pods.
pub fn run_phased(
    profiles: Vec<Profile>,
    cluster: ParsedCluster,
    init: Vec<PodInfo>,
    opts: &SimulateOptions,
) -> SimulationReport {
    run_streamed(profiles, cluster, init, opts, Stream::Backlog)
}

/// Like [`run_phased`], with the measured pods arriving as `stream` says.
pub fn run_streamed(
    profiles: Vec<Profile>,
    cluster: ParsedCluster,
    init: Vec<PodInfo>,
    opts: &SimulateOptions,
    stream: Stream,
) -> SimulationReport {
    let mut engine = Engine::new(profiles);
    let mut cycler = Cycler::new(&engine, opts.seed);
    cycler.use_equivalence_cache = !opts.no_equivalence_cache;
    let mut clock = Instant::now();
    let (pending, gated) = load(&mut engine, cluster);
    for pod in init {
        if engine.handles(&pod) {
            engine.enqueue(Arc::new(pod), clock);
        }
    }
    let api = MemoryApi::default();
    on_pool(|| drain(&mut engine, &mut cycler, &api, &mut clock, None, None, None));
    for key in engine.queue.unschedulable_keys() {
        // Initial pods that fit nowhere stay out of the measured phase.
        engine.queue.delete(&key);
    }
    let total = pending.len() as u64;
    // What the cluster requested before the measured pods, for a report.
    let mut before = None;
    let mut pods_by_key = std::collections::HashMap::new();
    if opts.detail {
        let snap = engine.cache.full_snapshot();
        let resources = crate::detail::resources(&snap);
        before = Some((crate::detail::requested(&snap, &resources), resources));
    }
    if opts.detail {
        pods_by_key.extend(pending.iter().map(|p| (p.key(), Arc::new(p.clone()))));
    }
    let group_members = groups::members(&pending, |p| engine.groups.gang_of(p).and_then(|(_, spec)| spec.topology_key));
    let (churn, mut steady, backlog_pods, timeline) = match stream {
        Stream::Backlog => (None, None, pending, None),
        Stream::Churn(c) => (Some(c), None, pending, None),
        Stream::Steady { in_flight } => {
            (None, Some(Steady::start(&mut engine, pending, in_flight.max(1), clock)), Vec::new(), None)
        }
        Stream::Timeline(t) => {
            // A timeline measures each reclaim's victims against the fewest that would do.
            cycler.count_fewest_victims = true;
            (None, None, Vec::new(), Some(t))
        }
    };
    for pod in backlog_pods {
        engine.enqueue(Arc::new(pod), clock);
    }
    let bar = if opts.progress && total > 0 {
        let bar = ProgressBar::new(total);
        if let Ok(style) = ProgressStyle::with_template("{bar:40} {pos}/{len} pods {per_sec} {msg}") {
            bar.set_style(style);
        }
        Some(bar)
    } else {
        None
    };
    let started = Instant::now();
    let backlog = total as usize;
    let mut churn = churn.map(|churn| ChurnRun { churn, started, done: 0, backlog, ended: false });
    let mut observed = None;
    let mut d = match timeline {
        Some(t) => {
            let ran = on_pool(|| timeline::run(&mut engine, &mut cycler, &api, &mut clock, t));
            observed = Some(ran.observer);
            ran.drained
        }
        None => {
            on_pool(|| drain(&mut engine, &mut cycler, &api, &mut clock, bar.as_ref(), churn.as_mut(), steady.as_mut()))
        }
    };
    let elapsed = started.elapsed();
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    d.latencies.sort_unstable();
    let mut report = SimulationReport { nodes: engine.cache.node_count(), gated, ..Default::default() };
    report.scheduled = d.placements.len();
    report.unschedulable = d.failures.len();
    report.attempts = d.latencies.len();
    report.placements = d.placements;
    report.owned = d.owned.fields.into_iter().collect();
    report.owned_lines = d.owned.lines;
    report.charts = d.owned.charts;
    report.preemptions = d.preemptions;
    report.failures = d.failures;
    report.seconds = elapsed.as_secs_f64();
    report.pods_per_second = if report.seconds > 0.0 { report.scheduled as f64 / report.seconds } else { 0.0 };
    report.latency_ms = Latency {
        p50: percentile(&d.latencies, 50.0),
        p99: percentile(&d.latencies, 99.0),
        max: d.latencies.last().map(|d| d.as_secs_f64() * 1000.0).unwrap_or(0.0),
    };
    report.peak_memory_mib = peak_rss_bytes().map(|b| b as f64 / (1024.0 * 1024.0));
    report.churn_steps = churn.map_or(0, |c| c.done);
    report.never_created = steady.map_or(0, |s| s.remaining());
    if !group_members.is_empty() {
        let snap = engine.cache.full_snapshot();
        if let Some((figures, line)) = groups::outcome(&group_members, &report.placements, &snap) {
            report.owned.insert("podGroups", figures);
            report.owned_lines.push(line);
        }
    }
    if let Some(o) = observed {
        report.workload = Some(o.summary());
        report.owned_lines.extend(o.lines());
    }
    if let Some((before, resources)) = before {
        let snap = engine.cache.full_snapshot();
        report.detail = Some(crate::detail::collect(
            &engine.profiles,
            &snap,
            &before,
            resources,
            &report.failures,
            &pods_by_key,
            engine.groups.topology_key(),
        ));
    }
    report
}
