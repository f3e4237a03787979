//! The scheduling thread and the hand-off of its decisions to the dispatcher.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use algorithms::PodInfo;
use tokio::sync::mpsc;
use tracing::{debug, info_span, warn};

use super::shared::Shared;
use crate::binding::BindRequest;
use crate::engine::timing::{Ended, Point};
use crate::engine::{Cycle, Cycler, Engine, Nomination, Outcome};
use algorithms::Code;

/// What the scheduling thread hands the dispatcher.
pub(super) enum Work {
    Bind(BindRequest),
    Unschedulable(Arc<PodInfo>, String, Nomination),
    /// An attempt that failed with an error (an extender that cannot be reached): the
    /// pod is retried after its backoff and told why.
    Error(Arc<PodInfo>, String),
    /// A Kubernetes PodGroup's decision: placed, or why not.
    GroupScheduled(String, Result<(), String>),
}

/// The scheduling thread: it holds the state lock to pop a pod and refresh its snapshot,
/// and again to assume or park it, but not while the plugins run.
pub(super) fn scheduling_loop(shared: Arc<Shared>, work: mpsc::UnboundedSender<Work>, mut cycler: Cycler) {
    loop {
        if shared.stopping() {
            return;
        }
        let mut st = shared.lock();
        for t in st.engine.timings.drain(..) {
            shared.metrics.extension_point(t.point, t.ended, &t.profile, t.seconds);
        }
        if !shared.may_schedule_locked(&st) {
            let _ = shared.cv.wait_timeout(st, Duration::from_millis(200));
            continue;
        }
        let now = Instant::now();
        st.engine.queue.flush_unschedulable(now);
        for pod in st.engine.expire_assumed(now) {
            warn!(pod = %pod.key(), "assumed pod was never confirmed by the watch; forgetting it");
        }
        let span = info_span!("scheduling_cycle");
        let _enter = span.enter();
        let Some(begun) = cycler.begin(&mut st.engine, now) else {
            let wait = st
                .engine
                .queue
                .next_backoff()
                .map(|t| t.saturating_duration_since(now))
                .unwrap_or(Duration::from_secs(1))
                .clamp(Duration::from_millis(5), Duration::from_secs(1));
            let _ = shared.cv.wait_timeout(st, wait);
            continue;
        };
        // A pod whose PodGroup does not exist yet waits for it.
        if let Ok(attempt) = &begun
            && let Some(group) = st.engine.groups.missing(&attempt.queued.pod)
        {
            let Ok(attempt) = begun else { continue };
            let cycle = cycler.wait_for_group(&mut st.engine, attempt, &group, now);
            drop(st);
            if !dispatch(&shared, &work, cycle, now) {
                return;
            }
            continue;
        }
        // A gang member: its whole group is decided at once, without the lock but to
        // take the members from the queue and to assume them.
        if let Ok(attempt) = &begun
            && let Some((group, spec)) = st.engine.groups.gang_of(&attempt.queued.pod)
        {
            let api = crate::gang::api_of(&attempt.queued.pod);
            let Ok(attempt) = begun else { continue };
            let cycles = match cycler.begin_group(&mut st.engine, attempt, &group, &spec, now) {
                Err(parked) => vec![*parked],
                Ok(members) => {
                    drop(st);
                    let plan = cycler.evaluate_group(members);
                    st = shared.lock();
                    cycler.finish_group(&mut st.engine, plan, Instant::now())
                }
            };
            if !shared.is_leader() {
                for cycle in &cycles {
                    give_back(&mut st.engine, cycle, now);
                }
                continue;
            }
            let placed = cycles.iter().any(|c| matches!(c.outcome, Outcome::Scheduled { .. }));
            let verdict = match cycles.iter().find(|_| !placed).map(|c| &c.outcome) {
                Some(Outcome::Unschedulable { message, .. }) => Err(message.clone()),
                _ => Ok(()),
            };
            let kube_group = (api == crate::gang::Api::Kubernetes).then(|| group.clone());
            if api == crate::gang::Api::SchedulerPlugins {
                st.dirty_groups.insert(group);
            }
            drop(st);
            if let Some(g) = kube_group
                && work.send(Work::GroupScheduled(g, verdict)).is_err()
            {
                return;
            }
            for cycle in cycles {
                if !dispatch(&shared, &work, cycle, now) {
                    return;
                }
            }
            continue;
        }
        drop(st);
        let cycle = match begun {
            Err(cycle) => cycle,
            Ok(attempt) => {
                let t0 = Instant::now();
                let ev = cycler.evaluate(&attempt);
                shared.metrics.cycle.algorithm_duration.observe(t0.elapsed().as_secs_f64());
                let profile = cycler.profile_of(&attempt).scheduler_name.clone();
                evaluations(&shared.metrics.flow, cycler.profile_of(&attempt), &ev.ev);
                extension_points(&shared.metrics, &profile, &ev);
                let mut st = shared.lock();
                let cycle = cycler.finish(&mut st.engine, attempt, ev, Instant::now());
                if !shared.is_leader() && give_back(&mut st.engine, &cycle, now) {
                    continue;
                }
                cycle
            }
        };
        if !dispatch(&shared, &work, cycle, now) {
            return;
        }
    }
}

/// Counts `scheduler_plugin_evaluation_total`: every filter plugin at PreFilter, and at
/// Filter unless PreFilter turned the pod down; each score plugin that PreScore did not
/// skip at PreScore and Score, when the cycle scored.
fn evaluations(flow: &crate::run::metrics::FlowMetrics, profile: &algorithms::Profile, ev: &algorithms::Evaluation) {
    let name = profile.scheduler_name.as_str();
    let filters = || profile.filters.iter().map(|f| f.name());
    flow.evaluated(name, "PreFilter", filters());
    if ev.prefilter_rejection.is_none() {
        flow.evaluated(name, "Filter", filters());
    }
    let scored = || ev.scores.iter().filter(|s| !s.skipped).map(|s| s.name);
    flow.evaluated(name, "PreScore", scored());
    flow.evaluated(name, "Score", scored());
}

/// `scheduler_framework_extension_point_duration_seconds` of a cycle's PreFilter and
/// PostFilter, with the status code each ended in.
fn extension_points(metrics: &super::metrics::Metrics, profile: &str, d: &crate::engine::Decision) {
    let pre = match (&d.ev.error, &d.ev.prefilter_rejection) {
        (Some(_), None) if d.ev.feasible.is_empty() && d.ev.rejected.is_empty() => Code::Error,
        (_, Some(st)) => st.code,
        _ => Code::Success,
    };
    metrics.extension_point(Point::PreFilter, Ended::Code(pre), profile, d.ev.pre_filter_seconds);
    if let Some(seconds) = d.post_filter_seconds {
        let code = match &d.preemption {
            Some(algorithms::framework::PostFilterResult::Nominate(_)) => Code::Success,
            _ => Code::Unschedulable,
        };
        metrics.extension_point(Point::PostFilter, Ended::Code(code), profile, seconds);
    }
}

/// Leadership was lost during the cycle, and another replica schedules now: a pod the
/// cycle assumed is forgotten and requeued. Returns whether it was one.
fn give_back(engine: &mut Engine, cycle: &Cycle, now: Instant) -> bool {
    if !matches!(cycle.outcome, Outcome::Scheduled { .. }) {
        return false;
    }
    engine.forget(&cycle.queued.pod.key(), now);
    engine.queue.requeue(cycle.queued.pod.clone(), cycle.queued.attempts, now);
    true
}

/// Hands a finished cycle to the dispatcher: a bind, or an unschedulable report. False
/// once the dispatcher is gone (shutting down).
fn dispatch(shared: &Shared, work: &mpsc::UnboundedSender<Work>, cycle: Cycle, started: Instant) -> bool {
    let pod = cycle.queued.pod.clone();
    match cycle.outcome {
        Outcome::Scheduled { node } => {
            let queued_since = cycle.queued.first_seen;
            let req = BindRequest {
                pod,
                node,
                attempts: cycle.queued.attempts,
                profile: cycle.profile,
                started,
                queued_since,
            };
            work.send(Work::Bind(req)).is_ok()
        }
        Outcome::Unschedulable { message, nomination } => {
            debug!(pod = %pod.key(), %message, "unschedulable");
            shared.stats.unschedulable.fetch_add(1, Ordering::Relaxed);
            shared.metrics.attempt("unschedulable", &cycle.profile, cycle.duration.as_secs_f64());
            // Every unschedulable attempt runs PostFilter, as kube-scheduler counts it.
            shared.metrics.cycle.preemption_attempts.inc();
            if let Nomination::Preempted(p) = &nomination {
                shared.metrics.cycle.preemption_victims.observe(p.victims.len() as f64);
            }
            work.send(Work::Unschedulable(pod, message, nomination)).is_ok()
        }
        Outcome::Error { message } => {
            warn!(pod = %pod.key(), %message, "scheduling error; retrying after backoff");
            shared.stats.errors.fetch_add(1, Ordering::Relaxed);
            shared.metrics.attempt("error", &cycle.profile, cycle.duration.as_secs_f64());
            work.send(Work::Error(pod, message)).is_ok()
        }
        Outcome::Gone => {
            debug!(pod = %pod.key(), "pod was deleted during its scheduling cycle");
            true
        }
    }
}
