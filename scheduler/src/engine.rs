//! The scheduling cycle shared by `run` and `simulate`, in three steps: pop a pod and
//! refresh the snapshot ([`Cycler::begin`], under the state lock), run the framework over
//! the snapshot ([`Cycler::evaluate`], without it), then assume the chosen node or park
//! the pod ([`Cycler::finish`], under the lock again).
//!
//! Ownership: the [`Engine`] (cache, queue, profiles) is shared state; in `run` it sits
//! behind the one state mutex and the informer task is its single writer of watch events.
//! The [`Cycler`] (the snapshot, the tie-break generator, the reuse caches) belongs to
//! the scheduling thread alone, so the long part of a cycle holds no lock.
//!
//! One file though long: the three steps and the engine's operations they call (assume,
//! reserve, forget, the events that follow) keep the cache and the queue in step.

use std::sync::Arc;
use std::time::{Duration, Instant};

use algorithms::events::{ClusterEvent, QueueingHint};
use algorithms::framework::{
    EquivalenceCache, EvaluateOptions, Permit, PostFilterResult, evaluate, evaluate_cached, filter_candidates,
    post_filter_failure_message, run_post_filters,
};
use algorithms::plugins::registry::OWNERS;
use algorithms::{Code, Evaluation, PodInfo, Profile, Snapshot};
use rand::SeedableRng;
use rand::rngs::SmallRng;

mod gang_cycle;
pub mod timing;
mod topology;

pub use gang_cycle::{COSCHEDULING, GroupAttempt, GroupPlan};
use topology::Within;
pub use topology::{DomainVerdict, Verdict};

use crate::cache::Cache;
use crate::gang::{self, Groups};
use crate::queue::{QueuedPod, SchedulingQueue};
use timing::{Ended, Point, Timing};

/// What one scheduling cycle decided.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// Assumed on a node; the caller binds it.
    Scheduled {
        /// The node.
        node: String,
    },
    /// Fits nowhere; parked in the unschedulable set.
    Unschedulable {
        /// kube-scheduler's FailedScheduling message.
        message: String,
        /// What became of the pod's nomination.
        nomination: Nomination,
    },
    /// An internal error; retried after backoff.
    Error {
        /// What failed.
        message: String,
    },
    /// The pod was deleted while it was being scheduled; nothing to do.
    Gone,
}

/// What an unschedulable cycle did to the pod's `status.nominatedNodeName`.
#[derive(Debug, Clone)]
pub enum Nomination {
    /// Left as it is.
    Unchanged,
    /// Set by a preemption whose victims the caller evicts.
    Preempted(Preempted),
    /// Cleared: preemption found no candidate for a pod that had a nomination.
    Cleared,
    /// Left as it is; a PostFilter plugin asked for these writes, which may make room
    /// (DynamicResources deallocating a claim): the caller makes them.
    Released(Vec<algorithms::framework::ApiWrite>),
}

/// Victims chosen for a pod that fits nowhere: the caller evicts them; the pod is
/// nominated to the node (in the cache's nominator already).
#[derive(Debug, Clone)]
pub struct Preempted {
    /// The node.
    pub node: String,
    /// Pods to evict, most important first.
    pub victims: Vec<Arc<PodInfo>>,
    /// Lower-priority pods whose nomination to the node was cleared.
    pub cleared: Vec<String>,
}

/// What the lock-free part of a cycle found.
pub struct Decision {
    /// The framework's evaluation.
    pub ev: Evaluation,
    /// PostFilter's result when the pod fit nowhere and the profile has PostFilter plugins.
    pub preemption: Option<PostFilterResult>,
    /// How long PostFilter took, in seconds, when it ran.
    pub post_filter_seconds: Option<f64>,
}

/// One finished cycle.
#[derive(Debug, Clone)]
pub struct Cycle {
    /// The pod as popped.
    pub queued: QueuedPod,
    /// The profile (scheduler name) that handled it.
    pub profile: String,
    /// The decision.
    pub outcome: Outcome,
    /// How long the cycle took.
    pub duration: Duration,
}

/// Cache, queue and profiles: the state watch events change and cycles read.
pub struct Engine {
    /// Profiles by scheduler name.
    pub profiles: Vec<Profile>,
    /// The cache.
    pub cache: Cache,
    /// The queue.
    pub queue: SchedulingQueue,
    /// PodGroups, for gang scheduling.
    pub groups: Groups,
    /// Pods a Permit plugin made wait, with the end of their wait.
    waiting: std::collections::HashMap<String, (Instant, Duration)>,
    /// Whether PreEnqueue, Reserve and Permit runs are timed into `timings` (`run` turns
    /// this on and takes them each loop).
    pub record_timings: bool,
    /// Timed runs.
    pub timings: Vec<Timing>,
}

/// Why Reserve or Permit refused the chosen node.
#[derive(Debug, Clone)]
pub enum Refused {
    /// A Permit plugin rejected the pod: it is unschedulable, as kube-scheduler reports it.
    Rejected {
        /// The plugin.
        plugin: &'static str,
        /// Its reason.
        message: String,
    },
    /// Assume or a Reserve plugin failed: retried after backoff.
    Error(String),
}

/// Whether `event` may help `pod`, rejected by `plugin` under its profile: the plugin's
/// queueing hint; a plugin that is not a filter of the profile retries on anything.
fn hint(profiles: &[Profile], pod: &PodInfo, plugin: &str, event: &ClusterEvent) -> bool {
    let filter = profiles
        .iter()
        .find(|p| p.scheduler_name == pod.scheduler_name)
        .and_then(|p| p.filters.iter().find(|f| f.name() == plugin));
    filter.is_none_or(|f| f.queueing_hint(pod, event) == QueueingHint::Queue)
}

impl Engine {
    /// An engine with an empty cache and queue.
    pub fn new(profiles: Vec<Profile>) -> Self {
        Engine {
            profiles,
            cache: Cache::new(),
            queue: SchedulingQueue::default(),
            groups: Groups::default(),
            waiting: Default::default(),
            record_timings: false,
            timings: Vec::new(),
        }
    }

    /// Whether one of the profiles handles the pod's scheduler name.
    pub fn handles(&self, pod: &PodInfo) -> bool {
        self.profiles.iter().any(|p| p.scheduler_name == pod.scheduler_name)
    }

    /// Queues a pending pod (or refreshes a queued one). A new gang member also wakes its
    /// parked siblings, which may have been waiting for the group to reach its minimum.
    pub fn enqueue(&mut self, pod: Arc<PodInfo>, now: Instant) {
        // Only a new member counts: an update of one already queued (its status, say)
        // changes nothing for the group.
        let group = self.groups.gang_of(&pod).map(|(g, _)| g).filter(|_| !self.queue.contains(&pod.key()));
        self.queue.add(pod, now);
        if let Some(g) = group {
            for key in self.queue.group_keys(&g, |p| gang::is_member(p, &g)) {
                self.queue.activate(&key, now);
            }
        }
    }

    /// Moves the unschedulable pods the event may help (by the hints of the plugins that
    /// rejected them) back to be retried, and keeps it for pods being scheduled right now.
    /// Returns how many moved.
    pub fn on_event(&mut self, event: ClusterEvent, now: Instant) -> usize {
        let t0 = Instant::now();
        let label = event.label();
        let profiles = &self.profiles;
        let moved = self.queue.on_event(event, now, &|pod, plugin, ev| hint(profiles, pod, plugin, ev));
        self.queue.event_handled(label, t0.elapsed().as_secs_f64());
        moved
    }

    fn timed(&mut self, point: Point, ended: Ended, profile: &str, since: Instant) {
        if self.record_timings {
            self.timings.push(Timing {
                point,
                ended,
                profile: profile.to_string(),
                seconds: since.elapsed().as_secs_f64(),
            });
        }
    }

    /// Reserve and Permit for the node a cycle chose: the pod is assumed there, each
    /// Reserve plugin of its profile assumes what the pod takes, and each Permit plugin
    /// has its say (a wait is recorded for the binding cycle). On failure nothing is kept.
    pub fn reserve(
        &mut self,
        pod: &PodInfo,
        node: &str,
        profile: &Profile,
        limits: Option<&algorithms::framework::Limits>,
        now: Instant,
    ) -> Result<Arc<PodInfo>, Refused> {
        let placed = self.cache.assume(pod, node).map_err(|e| Refused::Error(format!("failed to assume pod: {e}")))?;
        let key = pod.key();
        let t0 = Instant::now();
        let reserved = self.cache.reserve(pod, node, &profile.reserves, limits);
        self.timed(Point::Reserve, Ended::ok(reserved.is_ok()), &profile.scheduler_name, t0);
        if let Err(e) = reserved {
            self.cache.forget(&key);
            return Err(Refused::Error(e));
        }
        let t0 = Instant::now();
        let mut wait: Option<Duration> = None;
        for plugin in &profile.permits {
            match plugin.permit(self.cache.objects(), pod, node) {
                Permit::Allow => {}
                Permit::Wait(d) => wait = Some(wait.map_or(d, |w| w.min(d))),
                Permit::Reject(status) => {
                    self.timed(Point::Permit, Ended::Code(Code::Unschedulable), &profile.scheduler_name, t0);
                    self.cache.forget(&key);
                    let message = algorithms::framework::wording::permit_rejection(plugin.name(), &status);
                    return Err(Refused::Rejected { plugin: plugin.name(), message });
                }
            }
        }
        let ended = if wait.is_some() { Ended::Wait } else { Ended::Code(Code::Success) };
        self.timed(Point::Permit, ended, &profile.scheduler_name, t0);
        self.waiting.remove(&key);
        if let Some(d) = wait {
            self.waiting.insert(key, (now + d, d));
        }
        Ok(placed)
    }

    /// Drops the assumption of a pod that will not be bound (Unreserve runs for its
    /// reservations) and tells the pods it kept out; returns it if it was assumed.
    pub fn forget(&mut self, key: &str, now: Instant) -> Option<Arc<PodInfo>> {
        self.waiting.remove(key);
        let forgotten = self.cache.forget(key)?;
        self.on_event(ClusterEvent::PodDeleted(forgotten.clone()), now);
        Some(forgotten)
    }

    /// Removes a placed pod (deleted, evicted, finished) and tells the pods it kept out.
    pub fn remove_pod(&mut self, key: &str, now: Instant) -> Option<Arc<PodInfo>> {
        self.waiting.remove(key);
        let gone = self.cache.remove_pod(key)?;
        self.on_event(ClusterEvent::PodDeleted(gone.clone()), now);
        Some(gone)
    }

    /// Forgets the assumed pods the watch never confirmed, as [`Engine::forget`] does;
    /// returns them.
    pub fn expire_assumed(&mut self, now: Instant) -> Vec<Arc<PodInfo>> {
        let expired = self.cache.expire_assumed(now);
        for pod in &expired {
            self.waiting.remove(&pod.key());
            self.on_event(ClusterEvent::PodDeleted(pod.clone()), now);
        }
        expired
    }

    /// When the pod's wait at Permit ends and how long it is, if a Permit plugin made it wait.
    pub fn permit_deadline(&self, key: &str) -> Option<(Instant, Duration)> {
        self.waiting.get(key).copied()
    }

    /// The pod's wait at Permit is over (allowed, rejected or given up).
    pub fn end_wait(&mut self, key: &str) {
        self.waiting.remove(key);
    }

    /// Parks a pod that fits nowhere, unless an event seen during its cycle may help it.
    fn park(&mut self, key: &str, rejected_by: Vec<&'static str>, now: Instant) {
        let profiles = &self.profiles;
        self.queue.unschedulable(key, rejected_by, now, &|pod, plugin, ev| hint(profiles, pod, plugin, ev));
    }
}

/// A popped pod on its way through a cycle.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// The pod as popped.
    pub queued: QueuedPod,
    profile: usize,
    started: Instant,
    /// The node the pod is nominated to, if any.
    nominated: Option<String>,
}

/// What the scheduling thread owns across cycles.
pub struct Cycler {
    profiles: Vec<Profile>,
    snapshot: Snapshot,
    rng: SmallRng,
    /// Reuse node-local results across pods with the same spec (on by default).
    pub use_equivalence_cache: bool,
    caches: Vec<EquivalenceCache>,
    /// Where the next search for feasible nodes starts (kube-scheduler's rotating index,
    /// shared by all profiles); it matters only when a share of nodes is to be found.
    next_start: usize,
    /// A filter of some profile reads what the waiting pods ask for (quota trees).
    counts_waiting: bool,
    /// Whether `simulate` measures each preemption's victims against the fewest that
    /// would have sufficed ([`Cycler::fewest_victims`]).
    pub count_fewest_victims: bool,
}

impl Cycler {
    /// A cycler for the engine's profiles; `seed` fixes tie-breaking.
    pub fn new(engine: &Engine, seed: u64) -> Self {
        Cycler {
            profiles: engine.profiles.clone(),
            snapshot: Snapshot::default(),
            rng: SmallRng::seed_from_u64(seed),
            use_equivalence_cache: true,
            caches: Vec::new(),
            next_start: 0,
            counts_waiting: engine.profiles.iter().any(|p| p.filters.iter().any(|f| f.counts_waiting_pods())),
            count_fewest_victims: false,
        }
    }

    /// The fewest pods of `node` whose eviction would have let `pod` (of the profile
    /// named `profile`) fit there in the last cycle's snapshot, among sets of at most
    /// `most` (see [`algorithms::preemption::fewest_victims`]).
    pub fn fewest_victims(&mut self, profile: &str, pod: &PodInfo, node: &str, most: usize) -> Option<usize> {
        let p = self.profiles.iter().find(|p| p.scheduler_name == profile)?;
        let i = self.snapshot.position(node)?;
        algorithms::preemption::fewest_victims(p, pod, &mut self.snapshot, i, most)
    }

    /// The profile an attempt runs.
    pub fn profile_of(&self, attempt: &Attempt) -> &Profile {
        &self.profiles[attempt.profile]
    }

    /// The snapshot of the last cycle.
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// Under the state lock: pops the next pod ready at `now` and brings the snapshot up
    /// to date. A pod no profile handles is dropped and reported as an error cycle.
    /// A pod a PreEnqueue plugin keeps out is parked untried and the next one is popped.
    pub fn begin(&mut self, engine: &mut Engine, now: Instant) -> Option<Result<Attempt, Cycle>> {
        let queued = loop {
            let queued = engine.queue.pop(now)?;
            let t0 = Instant::now();
            let gate = self.gate(engine, &queued.pod);
            let code = if gate.is_some() { Code::UnschedulableAndUnresolvable } else { Code::Success };
            engine.timed(Point::PreEnqueue, Ended::Code(code), &queued.pod.scheduler_name, t0);
            let Some(plugin) = gate else { break queued };
            let profiles = &engine.profiles;
            engine.queue.gate(&queued.pod.key(), plugin, now, &|pod, plugin, ev| hint(profiles, pod, plugin, ev));
        };
        let started = Instant::now();
        if self.counts_waiting {
            // Quota trees divide by demand: the waiting pods count.
            let objects = engine.cache.objects_mut();
            for owner in OWNERS {
                owner.waiting(objects, &mut engine.queue.pods());
            }
        }
        engine.cache.update_snapshot(&mut self.snapshot);
        let key = queued.pod.key();
        let nominated =
            engine.cache.nominator.node_of(&key).map(str::to_string).or_else(|| queued.pod.nominated_node.clone());
        match self.profiles.iter().position(|p| p.scheduler_name == queued.pod.scheduler_name) {
            Some(profile) => Some(Ok(Attempt { queued, profile, started, nominated })),
            None => {
                engine.queue.delete(&queued.pod.key());
                let message = format!("no profile for scheduler name {:?}", queued.pod.scheduler_name);
                Some(Err(Cycle {
                    queued,
                    profile: String::new(),
                    outcome: Outcome::Error { message },
                    duration: started.elapsed(),
                }))
            }
        }
    }

    /// The first PreEnqueue plugin of the pod's profile that keeps it out.
    fn gate(&self, engine: &Engine, pod: &PodInfo) -> Option<&'static str> {
        let profile = self.profiles.iter().find(|p| p.scheduler_name == pod.scheduler_name)?;
        let objects = engine.cache.objects();
        let (plugin, why) = profile.filters.iter().find_map(|f| Some((f.name(), f.pre_enqueue(pod, objects)?)))?;
        tracing::debug!(pod = %pod.key(), plugin, reason = %why, "kept out by PreEnqueue");
        Some(plugin)
    }

    /// Without any lock: runs the profile's plugins over the snapshot (the pod's nominated
    /// node first, alone), then preemption when the pod fits nowhere.
    pub fn evaluate(&mut self, attempt: &Attempt) -> Decision {
        let pi = attempt.profile;
        let profile = &self.profiles[pi];
        let pod = &attempt.queued.pod;
        let nominated = attempt.nominated.as_ref().and_then(|n| self.snapshot.index.get(n).copied());
        if let Some(i) = nominated {
            let mut ev = filter_candidates(profile, pod, &self.snapshot, Some(&[i]));
            if let Some(x) = &profile.extenders
                && ev.error.is_none()
                && !ev.feasible.is_empty()
            {
                x.filter(pod, &self.snapshot, &mut ev);
            }
            if ev.error.is_none() && ev.feasible == [i] {
                ev.selected = Some(i);
                ev.num_nodes = self.snapshot.len();
                return Decision { ev, preemption: None, post_filter_seconds: None };
            }
        }
        let ev = self.evaluate_all(attempt);
        let (preemption, post_filter_seconds) = if ev.selected.is_none() && ev.error.is_none() {
            let t0 = Instant::now();
            let mut pod = (*attempt.queued.pod).clone();
            pod.nominated_node = attempt.nominated.clone();
            let result = run_post_filters(&self.profiles[pi], &pod, &mut self.snapshot, &ev, &mut self.rng);
            (result, Some(t0.elapsed().as_secs_f64()))
        } else {
            (None, None)
        };
        Decision { ev, preemption, post_filter_seconds }
    }

    fn evaluate_all(&mut self, attempt: &Attempt) -> Evaluation {
        let snapshot = std::mem::take(&mut self.snapshot);
        let ev = self.evaluate_on(&snapshot, attempt);
        self.snapshot = snapshot;
        ev
    }

    /// Runs the pod's profile over `snapshot` (the cycle's own, or a copy in which gang
    /// members placed before it are on their nodes).
    fn evaluate_on(&mut self, snapshot: &Snapshot, attempt: &Attempt) -> Evaluation {
        self.evaluate_within(snapshot, attempt, None)
    }

    /// [`Cycler::evaluate_on`] choosing only among the nodes `within` allows.
    fn evaluate_within(&mut self, snapshot: &Snapshot, attempt: &Attempt, within: Option<&Within>) -> Evaluation {
        let pi = attempt.profile;
        let profile = &self.profiles[pi];
        let pod = &attempt.queued.pod;
        let opts = EvaluateOptions { start: self.next_start, within: within.cloned(), ..Default::default() };
        let ev = if self.use_equivalence_cache {
            if self.caches.len() < self.profiles.len() {
                self.caches.resize_with(self.profiles.len(), EquivalenceCache::new);
            }
            evaluate_cached(profile, pod, snapshot, &mut self.rng, opts, &mut self.caches[pi])
        } else {
            evaluate(profile, pod, snapshot, &mut self.rng, opts)
        };
        let n = snapshot.nodes.len();
        if n > 0 {
            self.next_start = (self.next_start + ev.feasible.len() + ev.rejected.len()) % n;
        }
        ev
    }

    /// Under the state lock: assumes the pod on the chosen node (an assigned-pod event for
    /// the pods waiting on it), or parks it, or backs it off after an error.
    pub fn finish(&mut self, engine: &mut Engine, attempt: Attempt, decision: Decision, now: Instant) -> Cycle {
        let Attempt { queued, profile, started, .. } = attempt;
        let Decision { ev, preemption, .. } = decision;
        let pod: Arc<PodInfo> = queued.pod.clone();
        let key = pod.key();
        let profile_name = self.profiles[profile].scheduler_name.clone();
        let outcome = match (ev.selected, &ev.error) {
            _ if !engine.queue.contains(&key) => Outcome::Gone,
            (_, Some(err)) => {
                engine.queue.error(&key, now);
                // Worded by the framework, as kube-scheduler's (an extender's error as it is).
                let message = err.message();
                Outcome::Error { message }
            }
            (Some(i), None) => {
                let node = self.snapshot.nodes[i].name.clone();
                match engine.reserve(&pod, &node, &self.profiles[profile], ev.limits.as_ref(), now) {
                    Ok(placed) => {
                        engine.queue.done(&key);
                        engine.cache.nominator.remove(&key);
                        engine.on_event(ClusterEvent::PodAdded(placed), now);
                        Outcome::Scheduled { node }
                    }
                    Err(Refused::Rejected { plugin, message }) => {
                        engine.park(&key, vec![plugin], now);
                        let message = format!("0/1 nodes are available: {message}.");
                        Outcome::Unschedulable { message, nomination: Nomination::Unchanged }
                    }
                    Err(Refused::Error(message)) => {
                        engine.queue.error(&key, now);
                        Outcome::Error { message }
                    }
                }
            }
            (None, None) => {
                let mut plugins: Vec<&'static str> = ev.rejected.iter().map(|(_, s)| s.plugin).collect();
                plugins.sort_unstable();
                plugins.dedup();
                let (message, nomination) = after_preemption(engine, &pod, &ev, preemption, &self.snapshot);
                engine.park(&key, plugins, now);
                Outcome::Unschedulable { message, nomination }
            }
        };
        Cycle { queued, profile: profile_name, outcome, duration: started.elapsed() }
    }

    /// The three steps at once, for a caller that holds the engine alone (`simulate`).
    pub fn schedule_one(&mut self, engine: &mut Engine, now: Instant) -> Option<Cycle> {
        match self.begin(engine, now)? {
            Err(cycle) => Some(cycle),
            Ok(attempt) => {
                let decision = self.evaluate(&attempt);
                Some(self.finish(engine, attempt, decision, now))
            }
        }
    }
}

/// A gang is evicted whole: a victim that is a gang member brings the group's other
/// running members of lower priority than `preemptor` (on any node), since a gang that
/// lost a member cannot run.
fn whole_gangs(
    engine: &Engine,
    preemptor: &PodInfo,
    mut victims: Vec<Arc<PodInfo>>,
    snapshot: &Snapshot,
) -> Vec<Arc<PodInfo>> {
    let broken: Vec<(gang::Api, String)> =
        victims.iter().filter_map(|v| engine.groups.gang_of(v).map(|(g, _)| (gang::api_of(v), g))).collect();
    if broken.is_empty() {
        return victims;
    }
    let mut taken: std::collections::HashSet<String> = victims.iter().map(|v| v.key()).collect();
    for p in snapshot.nodes.iter().flat_map(|n| n.pods.iter()) {
        let member = gang::group_of(p).is_some_and(|g| broken.contains(&(gang::api_of(p), g)));
        if member && p.priority < preemptor.priority && taken.insert(p.key()) {
            victims.push(p.clone());
        }
    }
    victims
}

/// Applies PostFilter's result to the nominator: the message and what became of the
/// pod's nomination.
fn after_preemption(
    engine: &mut Engine,
    pod: &Arc<PodInfo>,
    ev: &Evaluation,
    preemption: Option<PostFilterResult>,
    snapshot: &Snapshot,
) -> (String, Nomination) {
    let key = pod.key();
    let first = ev.failure_message().unwrap_or_default();
    match preemption {
        None => (first, Nomination::Unchanged),
        Some(PostFilterResult::Nominate(c)) => {
            let node = snapshot.nodes[c.node].name.clone();
            let cleared = engine.cache.nominator.lower_on(&node, pod.priority);
            for k in &cleared {
                engine.cache.nominator.remove(k);
            }
            engine.cache.nominator.nominate(pod.clone(), &node);
            let victims = whole_gangs(engine, pod, c.victims, snapshot);
            (first, Nomination::Preempted(Preempted { node, victims, cleared }))
        }
        Some(p) => {
            let message = post_filter_failure_message(ev, &p).unwrap_or(first);
            let clear = matches!(
                p,
                PostFilterResult::Unschedulable { clear: true, .. } | PostFilterResult::Released { clear: true, .. }
            );
            let had = clear && (engine.cache.nominator.remove(&key).is_some() || pod.nominated_node.is_some());
            match p {
                // The writes come first: the nomination is cleared in the cache only.
                PostFilterResult::Released { writes, .. } => (message, Nomination::Released(writes)),
                _ => (message, if had { Nomination::Cleared } else { Nomination::Unchanged }),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use algorithms::NodeInfo;
    use algorithms::builders::{NodeBuilder, PodBuilder, affinity_term};

    fn engine_with_nodes(profile: Profile, n: usize) -> (Engine, Cycler) {
        let mut engine = Engine::new(vec![profile]);
        for i in 0..n {
            let node = NodeBuilder::new(&format!("n{i:03}")).label("zone", ["a", "b"][i % 2]).build();
            engine.cache.upsert_node(NodeInfo::from_node(&node).unwrap());
        }
        let cycler = Cycler::new(&engine, 1);
        (engine, cycler)
    }

    #[test]
    fn successive_pods_search_from_where_the_last_search_stopped() {
        let mut profile = algorithms::config::default_profile("custom-scheduler");
        // 200 nodes at 50%: each attempt looks for 100 feasible nodes.
        profile.percentage_of_nodes_to_score = Some(50);
        let (mut engine, mut cycler) = engine_with_nodes(profile, 200);
        let now = Instant::now();
        for name in ["first", "second", "third"] {
            engine.queue.add(Arc::new(PodBuilder::new(name).scheduler("custom-scheduler").info()), now);
        }
        let mut placed = Vec::new();
        while let Some(cycle) = cycler.schedule_one(&mut engine, now) {
            let Outcome::Scheduled { node } = cycle.outcome else { panic!("every pod fits") };
            placed.push(node);
        }
        let index = |n: &str| n.trim_start_matches('n').parse::<usize>().unwrap();
        assert!(index(&placed[0]) < 100, "{placed:?}");
        assert!(index(&placed[1]) >= 100, "{placed:?}");
        assert!(index(&placed[2]) < 100, "{placed:?}");
    }

    #[test]
    fn assuming_a_pod_wakes_the_pod_whose_affinity_waited_for_it() {
        let (mut engine, mut cycler) = engine_with_nodes(algorithms::config::default_profile("custom-scheduler"), 4);
        let t0 = Instant::now();
        let follower = PodBuilder::new("follower")
            .scheduler("custom-scheduler")
            .pod_affinity(affinity_term(&[("app", "db")], "zone"))
            .info();
        engine.queue.add(Arc::new(follower), t0);
        let Outcome::Unschedulable { .. } = cycler.schedule_one(&mut engine, t0).unwrap().outcome else {
            panic!("no db pod yet")
        };
        assert_eq!(engine.queue.lengths().unschedulable, 1);
        // A pod the follower does not select leaves it parked; the db pod wakes it.
        let other = PodBuilder::new("web").scheduler("custom-scheduler").label("app", "web").info();
        engine.queue.add(Arc::new(other), t0);
        assert!(matches!(cycler.schedule_one(&mut engine, t0).unwrap().outcome, Outcome::Scheduled { .. }));
        assert_eq!(engine.queue.lengths().unschedulable, 1);
        let db = PodBuilder::new("db").scheduler("custom-scheduler").label("app", "db").info();
        engine.queue.add(Arc::new(db), t0);
        assert!(matches!(cycler.schedule_one(&mut engine, t0).unwrap().outcome, Outcome::Scheduled { .. }));
        assert_eq!(engine.queue.lengths().unschedulable, 0);
        let later = t0 + Duration::from_secs(1);
        let cycle = cycler.schedule_one(&mut engine, later).unwrap();
        assert_eq!(cycle.queued.pod.name, "follower");
        assert!(matches!(cycle.outcome, Outcome::Scheduled { .. }), "{:?}", cycle.outcome);
    }

    #[test]
    fn an_event_during_the_cycle_is_not_lost_for_the_pod_being_scheduled() {
        let (mut engine, mut cycler) = engine_with_nodes(algorithms::config::default_profile("custom-scheduler"), 2);
        let t0 = Instant::now();
        let pod = PodBuilder::new("p").scheduler("custom-scheduler").node_selector("disk", "ssd").info();
        engine.queue.add(Arc::new(pod), t0);
        let Ok(attempt) = cycler.begin(&mut engine, t0).unwrap() else { panic!("has a profile") };
        let ev = cycler.evaluate(&attempt);
        // While the plugins ran, a node with the label arrived.
        let ssd = NodeInfo::from_node(&NodeBuilder::new("ssd").label("disk", "ssd").build()).unwrap();
        engine.cache.upsert_node(ssd.clone());
        engine.on_event(ClusterEvent::NodeAdded(Arc::new(ssd)), t0);
        let Outcome::Unschedulable { .. } = cycler.finish(&mut engine, attempt, ev, t0).outcome else {
            panic!("the snapshot had no such node")
        };
        assert_eq!(engine.queue.lengths().unschedulable, 0, "parked despite the new node");
        let cycle = cycler.schedule_one(&mut engine, t0 + Duration::from_secs(1)).unwrap();
        assert!(matches!(cycle.outcome, Outcome::Scheduled { ref node } if node == "ssd"), "{:?}", cycle.outcome);
    }
}

#[cfg(test)]
#[path = "engine_gate_tests.rs"]
mod gate_tests;
