//! The scheduling queue: activeQ by priority then age, per-pod exponential backoff,
//! and an unschedulable set moved back by the cluster events the rejecting plugins'
//! queueing hints accept, or after five minutes. Events that arrive while a pod is
//! being scheduled are kept and replayed if that pod turns out unschedulable, so an
//! event during its cycle is not lost (kube-scheduler's in-flight events).
//!
//! Time is passed in by the caller, so the queue is deterministic under test and in
//! simulations that run on a virtual clock.
//!
//! One file though long: a pod is in exactly one of the active, backoff and
//! unschedulable sets (or in flight), and every move between them is made here.

use std::cmp::Reverse;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use algorithms::PodInfo;
use algorithms::events::ClusterEvent;
use priority_queue::PriorityQueue;

/// Pods sitting in the unschedulable set longer than this are retried anyway.
pub const UNSCHEDULABLE_FLUSH: Duration = Duration::from_secs(300);

/// A queueing hint: whether an event may help a pod rejected by the named plugin.
pub type Hint<'a> = &'a dyn Fn(&PodInfo, &'static str, &ClusterEvent) -> bool;

/// A pod in the queue with its scheduling history.
#[derive(Debug, Clone)]
pub struct QueuedPod {
    /// The pod.
    pub pod: Arc<PodInfo>,
    /// Scheduling attempts so far.
    pub attempts: u32,
    /// Plugins that rejected it last time.
    pub rejected_by: Vec<&'static str>,
    /// When it first entered the queue.
    pub first_seen: Instant,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Order {
    priority: i32,
    older_first: Reverse<(i128, u64)>,
}

/// Where the queue tells what it does, for metrics: pods coming into a sub-queue (the
/// event that brought them, the sub-queue) and how long handling a cluster event took.
pub trait QueueObserver: Send + Sync {
    /// A pod entered `queue` (active, backoff or unschedulable) because of `event`.
    fn incoming(&self, event: &'static str, queue: &'static str);
    /// Handling the cluster event `event` took `seconds`.
    fn event_handled(&self, event: &'static str, seconds: f64);
}

#[derive(Clone)]
struct Observer(Option<std::sync::Arc<dyn QueueObserver>>);

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "Observer(set)" } else { "Observer(none)" })
    }
}

/// The scheduling queue.
#[derive(Debug)]
pub struct SchedulingQueue {
    observer: Observer,
    active: PriorityQueue<String, Order>,
    backoff: PriorityQueue<String, Reverse<Instant>>,
    /// Parked pods: since when, and whether a PreEnqueue plugin gated them (never tried).
    unschedulable: HashMap<String, Parked>,
    pods: HashMap<String, QueuedPod>,
    /// Queued members of pod groups: pod keys by group (`namespace/name`).
    groups: HashMap<String, HashSet<String>>,
    seq: u64,
    initial_backoff: Duration,
    max_backoff: Duration,
    /// Popped pods not yet done, with the number of events seen when they were popped.
    in_flight: HashMap<String, u64>,
    /// Events seen while pods were in flight, numbered from `events_seen`.
    recent: VecDeque<(u64, ClusterEvent)>,
    events_seen: u64,
    /// `SchedulerPopFromBackoffQ`: with nothing active, a pod backing off after an
    /// unschedulable attempt is taken at once.
    pop_from_backoff: bool,
    /// Backoff ends are compared in whole seconds from here when popping early.
    epoch: Instant,
}

/// A pod parked until an event may help it.
#[derive(Debug, Clone, Copy)]
struct Parked {
    since: Instant,
    gated: bool,
}

/// Pod counts per sub-queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueLengths {
    /// Ready to be scheduled.
    pub active: usize,
    /// Waiting out their backoff.
    pub backoff: usize,
    /// Waiting for a cluster event after an attempt.
    pub unschedulable: usize,
    /// Kept out by a PreEnqueue plugin, waiting for a cluster event.
    pub gated: usize,
}

impl Default for SchedulingQueue {
    fn default() -> Self {
        Self::new(Duration::from_secs(1), Duration::from_secs(10))
    }
}

impl SchedulingQueue {
    /// A queue with the given backoff bounds.
    pub fn new(initial_backoff: Duration, max_backoff: Duration) -> Self {
        SchedulingQueue {
            observer: Observer(None),
            active: PriorityQueue::new(),
            backoff: PriorityQueue::new(),
            unschedulable: HashMap::new(),
            pods: HashMap::new(),
            groups: HashMap::new(),
            seq: 0,
            initial_backoff,
            max_backoff: max_backoff.max(initial_backoff),
            in_flight: HashMap::new(),
            recent: VecDeque::new(),
            events_seen: 0,
            pop_from_backoff: true,
            epoch: Instant::now(),
        }
    }

    /// Reports pods coming in and event handling times to `observer`.
    pub fn set_observer(&mut self, observer: std::sync::Arc<dyn QueueObserver>) {
        self.observer = Observer(Some(observer));
    }

    fn came(&self, event: &'static str, queue: &'static str) {
        if let Some(o) = &self.observer.0 {
            o.incoming(event, queue);
        }
    }

    /// Reports how long handling a cluster event took.
    pub fn event_handled(&self, event: &'static str, seconds: f64) {
        if let Some(o) = &self.observer.0 {
            o.event_handled(event, seconds);
        }
    }

    /// Turns `SchedulerPopFromBackoffQ` (beta, on by default) on or off.
    pub fn set_pop_from_backoff(&mut self, on: bool) {
        self.pop_from_backoff = on;
    }

    fn order(&mut self, pod: &PodInfo) -> Order {
        self.seq += 1;
        Order { priority: pod.priority, older_first: Reverse((pod.created_nanos, self.seq)) }
    }

    /// Adds a pending pod, or refreshes it if already queued (a change of its labels or
    /// scheduling-relevant spec makes an unschedulable pod active again).
    pub fn add(&mut self, pod: Arc<PodInfo>, now: Instant) {
        let key = pod.key();
        let order = self.order(&pod);
        match self.pods.get_mut(&key) {
            Some(q) => {
                // What may change in a pending pod: labels, tolerations, images, resources
                // (all in its labels or signature), and the claims the resourceclaim
                // controller made for it. A status update (our own condition) changes
                // none of them and is no reason to retry.
                let changed = q.pod.signature_key != pod.signature_key
                    || q.pod.labels != pod.labels
                    || q.pod.resource_claims != pod.resource_claims;
                // The namespace of a pod never changes: comparing names is enough.
                let regroup = crate::gang::group_name(&q.pod) != crate::gang::group_name(&pod);
                let old = std::mem::replace(&mut q.pod, pod.clone());
                if regroup {
                    self.unindex(&key, &old);
                    self.index(&key, &pod);
                }
                if changed && self.unschedulable.remove(&key).is_some() {
                    self.backoff.push(key.clone(), Reverse(now));
                    self.came("PodUpdate", "backoff");
                }
            }
            None => {
                self.index(&key, &pod);
                self.pods.insert(key.clone(), QueuedPod { pod, attempts: 0, rejected_by: Vec::new(), first_seen: now });
                self.active.push(key, order);
                self.came("PodAdd", "active");
            }
        }
    }

    /// Removes a pod (deleted, or bound by someone else).
    pub fn delete(&mut self, key: &str) {
        if let Some(q) = self.pods.remove(key) {
            self.unindex(key, &q.pod);
        }
        self.active.remove(key);
        self.backoff.remove(key);
        self.unschedulable.remove(key);
        self.land(key);
    }

    /// The pod's cycle is over: stop keeping events for it.
    fn land(&mut self, key: &str) {
        if self.in_flight.remove(key).is_none() {
            return;
        }
        match self.in_flight.values().min() {
            None => self.recent.clear(),
            Some(&oldest) => {
                while self.recent.front().is_some_and(|(n, _)| *n < oldest) {
                    self.recent.pop_front();
                }
            }
        }
    }

    /// Pods the queue holds, in flight included.
    pub fn len(&self) -> usize {
        self.pods.len()
    }

    /// Whether the queue holds no pod.
    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }

    /// Whether the queue holds the pod in any sub-queue or in flight.
    pub fn contains(&self, key: &str) -> bool {
        self.pods.contains_key(key)
    }

    /// Moves pods whose backoff is over to activeQ and pops the highest priority one.
    /// The pod stays known to the queue (in flight) until `done`, `unschedulable` or `error`.
    pub fn pop(&mut self, now: Instant) -> Option<QueuedPod> {
        self.flush_backoff(now);
        let key = match self.active.pop() {
            Some((key, _)) => key,
            None => self.early_from_backoff()?,
        };
        let q = self.pods.get_mut(&key)?;
        q.attempts += 1;
        let popped = q.clone();
        self.in_flight.insert(key, self.events_seen);
        Some(popped)
    }

    /// The pod was scheduled (assumed); the queue forgets it.
    pub fn done(&mut self, key: &str) {
        if let Some(q) = self.pods.remove(key) {
            self.unindex(key, &q.pod);
        }
        self.land(key);
    }

    /// The pod fits nowhere: park it until an event its rejecting plugins' hints accept,
    /// or the flush interval. If such an event came while it was being scheduled, it is
    /// retried after its backoff instead.
    pub fn unschedulable(&mut self, key: &str, rejected_by: Vec<&'static str>, now: Instant, hint: Hint<'_>) {
        let since = self.in_flight.get(key).copied();
        let Some(q) = self.pods.get_mut(key) else {
            self.land(key);
            return;
        };
        q.rejected_by = rejected_by;
        let q = q.clone();
        let helped = since.is_some_and(|since| {
            self.recent.iter().filter(|(n, _)| *n >= since).any(|(_, ev)| Self::may_help(&q, ev, hint))
        });
        self.land(key);
        if helped {
            let at = now + self.backoff_for(q.attempts);
            self.backoff.push(key.to_string(), Reverse(at));
            self.came("ScheduleAttemptFailure", "backoff");
        } else {
            self.unschedulable.insert(key.to_string(), Parked { since: now, gated: false });
            self.came("ScheduleAttemptFailure", "unschedulable");
        }
    }

    /// A PreEnqueue plugin keeps the popped pod out: it is parked, without the attempt
    /// counting, until an event the plugin's hint accepts (as kube-scheduler's gated pods,
    /// no condition or event is written for it). An event that came while it was popped
    /// and may help sends it back at once.
    pub fn gate(&mut self, key: &str, plugin: &'static str, now: Instant, hint: Hint<'_>) {
        let since = self.in_flight.get(key).copied();
        let Some(q) = self.pods.get_mut(key) else {
            self.land(key);
            return;
        };
        q.attempts = q.attempts.saturating_sub(1);
        q.rejected_by = vec![plugin];
        let q = q.clone();
        let helped = since.is_some_and(|since| {
            self.recent.iter().filter(|(n, _)| *n >= since).any(|(_, ev)| Self::may_help(&q, ev, hint))
        });
        self.land(key);
        if helped {
            self.backoff.push(key.to_string(), Reverse(now));
        } else {
            self.unschedulable.insert(key.to_string(), Parked { since: now, gated: true });
        }
    }

    /// An error (e.g. a failed bind): retry after the pod's backoff.
    pub fn error(&mut self, key: &str, now: Instant) {
        if let Some(q) = self.pods.get_mut(key) {
            // It backs off as an error, not as unschedulable.
            q.rejected_by.clear();
            let attempts = q.attempts;
            let at = now + self.backoff_for(attempts);
            self.backoff.push(key.to_string(), Reverse(at));
            self.came("ScheduleAttemptFailure", "backoff");
        }
        self.land(key);
    }

    /// Puts a pod that was popped or forgotten back (e.g. its bind failed) with backoff.
    pub fn requeue(&mut self, pod: Arc<PodInfo>, attempts: u32, now: Instant) {
        let key = pod.key();
        self.land(&key);
        if let Some(q) = self.pods.get(&key) {
            let old = q.pod.clone();
            self.unindex(&key, &old);
        }
        self.index(&key, &pod);
        self.pods.insert(key.clone(), QueuedPod { pod, attempts, rejected_by: Vec::new(), first_seen: now });
        self.active.remove(&key);
        self.unschedulable.remove(&key);
        self.backoff.push(key, Reverse(now + self.backoff_for(attempts)));
        self.came("ScheduleAttemptFailure", "backoff");
    }

    /// The events kept for pods in flight, counted by label, with `PodPopped` for the
    /// pods themselves (kube-scheduler's in-flight events).
    pub fn in_flight_events(&self) -> Vec<(&'static str, usize)> {
        let mut counts: std::collections::BTreeMap<&'static str, usize> = Default::default();
        counts.insert("PodPopped", self.in_flight.len());
        for (_, ev) in &self.recent {
            *counts.entry(ev.label()).or_default() += 1;
        }
        counts.into_iter().collect()
    }

    /// Pods taken from the queue whose cycle has not ended.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// [`SchedulingQueue::requeue`] for a pod the queue still holds (parked after its
    /// cycle): a pod deleted meanwhile is not brought back. Returns whether it was.
    pub fn requeue_if_queued(&mut self, pod: Arc<PodInfo>, attempts: u32, now: Instant) -> bool {
        if !self.pods.contains_key(&pod.key()) {
            return false;
        }
        self.requeue(pod, attempts, now);
        true
    }

    /// Backoff after `attempts` failed attempts: 1 s doubling up to 10 s by default.
    pub fn backoff_for(&self, attempts: u32) -> Duration {
        let shift = attempts.saturating_sub(1).min(20);
        self.initial_backoff.saturating_mul(1 << shift).min(self.max_backoff)
    }

    fn backoff_until(&self, q: &QueuedPod, since: Instant) -> Instant {
        since + self.backoff_for(q.attempts)
    }

    fn may_help(q: &QueuedPod, event: &ClusterEvent, hint: Hint<'_>) -> bool {
        q.rejected_by.is_empty() || q.rejected_by.iter().any(|p| hint(&q.pod, p, event))
    }

    /// Moves unschedulable pods that the event may help (by `hint`, asked for each plugin
    /// that rejected them) to activeQ, or to backoff if their backoff has not run out;
    /// keeps the event for pods in flight. Returns how many moved.
    pub fn on_event(&mut self, event: ClusterEvent, now: Instant, hint: Hint<'_>) -> usize {
        let keys: Vec<String> = self
            .unschedulable
            .keys()
            .filter(|k| self.pods.get(*k).is_some_and(|q| Self::may_help(q, &event, hint)))
            .cloned()
            .collect();
        let keys = self.in_arrival_order(keys);
        for k in &keys {
            self.reactivate(k, now, event.label());
        }
        if !self.in_flight.is_empty() {
            self.recent.push_back((self.events_seen, event));
        }
        self.events_seen += 1;
        keys.len()
    }

    fn reactivate(&mut self, key: &str, now: Instant, event: &'static str) {
        let Some(parked) = self.unschedulable.remove(key) else { return };
        let Some(q) = self.pods.get(key).cloned() else { return };
        // A gated pod was never tried: nothing to back off from.
        let until = if parked.gated { now } else { self.backoff_until(&q, parked.since) };
        if until <= now {
            let order = self.order(&q.pod);
            self.active.push(key.to_string(), order);
            self.came(event, "active");
        } else {
            self.backoff.push(key.to_string(), Reverse(until));
            self.came(event, "backoff");
        }
    }

    /// Retries pods parked as unschedulable for longer than five minutes.
    pub fn flush_unschedulable(&mut self, now: Instant) {
        let stale: Vec<String> = self
            .unschedulable
            .iter()
            .filter(|(_, parked)| now.saturating_duration_since(parked.since) >= UNSCHEDULABLE_FLUSH)
            .map(|(k, _)| k.clone())
            .collect();
        for k in self.in_arrival_order(stale) {
            self.reactivate(&k, now, "UnschedulableTimeout");
        }
    }

    /// Parked pods' keys in the order their pods came (creation, then name), so that pods
    /// of equal priority go back to the active queue the same way every time.
    fn in_arrival_order(&self, mut keys: Vec<String>) -> Vec<String> {
        keys.sort_by_cached_key(|k| (self.pods.get(k).map_or(0, |q| q.pod.created_nanos), k.clone()));
        keys
    }

    fn flush_backoff(&mut self, now: Instant) {
        while let Some((_, Reverse(at))) = self.backoff.peek() {
            if *at > now {
                break;
            }
            let Some((key, _)) = self.backoff.pop() else { break };
            if let Some(q) = self.pods.get(&key).cloned() {
                let order = self.order(&q.pod);
                self.active.push(key, order);
                self.came("BackoffComplete", "active");
            }
        }
    }

    /// With nothing active, the pod kube-scheduler's `SchedulerPopFromBackoffQ` takes from
    /// backoff before its time: one whose last attempt found it unschedulable (a pod
    /// backing off after an error waits its backoff out), earliest backoff end in whole
    /// seconds first, then as activeQ orders (priority, then age). It leaves backoff.
    fn early_from_backoff(&mut self) -> Option<String> {
        if !self.pop_from_backoff {
            return None;
        }
        let epoch = self.epoch;
        let key = self
            .backoff
            .iter()
            .filter_map(|(k, Reverse(at))| {
                let q = self.pods.get(k).filter(|q| !q.rejected_by.is_empty())?;
                let window = at.saturating_duration_since(epoch).as_secs();
                Some(((window, Reverse(q.pod.priority), q.pod.created_nanos, k.as_str()), k))
            })
            .min_by(|a, b| a.0.cmp(&b.0))
            .map(|(_, k)| k.clone())?;
        self.backoff.remove(&key);
        Some(key)
    }

    /// When the earliest backoff ends, if any pod is backing off.
    pub fn next_backoff(&self) -> Option<Instant> {
        self.backoff.peek().map(|(_, Reverse(at))| *at)
    }

    /// Sizes of the sub-queues.
    pub fn lengths(&self) -> QueueLengths {
        let gated = self.unschedulable.values().filter(|p| p.gated).count();
        QueueLengths {
            active: self.active.len(),
            backoff: self.backoff.len(),
            unschedulable: self.unschedulable.len() - gated,
            gated,
        }
    }

    /// Pods waiting in the unschedulable set, counted by each plugin that rejected them and
    /// their profile, sorted.
    pub fn unschedulable_by_plugin(&self) -> Vec<((String, String), usize)> {
        let mut counts: std::collections::BTreeMap<(String, String), usize> = Default::default();
        let tried = self.unschedulable.iter().filter(|(_, p)| !p.gated);
        for q in tried.filter_map(|(k, _)| self.pods.get(k)) {
            for plugin in &q.rejected_by {
                *counts.entry((plugin.to_string(), q.pod.scheduler_name.clone())).or_default() += 1;
            }
        }
        counts.into_iter().collect()
    }

    /// Keys of pods in the unschedulable set.
    pub fn unschedulable_keys(&self) -> Vec<String> {
        self.unschedulable.keys().cloned().collect()
    }

    /// The queued pods (in flight included), in no particular order.
    pub fn pods(&self) -> impl Iterator<Item = &PodInfo> {
        self.pods.values().map(|q| &*q.pod)
    }

    /// Keys of the queued pods (in flight included) for which `pred` holds, highest
    /// priority and then oldest first.
    pub fn keys_where(&self, pred: impl Fn(&PodInfo) -> bool) -> Vec<String> {
        sorted_keys(self.pods.values().filter(|q| pred(&q.pod)).collect())
    }

    /// Keys of the queued members of `group` (`namespace/name`) that `pred` accepts, in
    /// the order [`SchedulingQueue::keys_where`] gives, without looking at other pods.
    pub fn group_keys(&self, group: &str, pred: impl Fn(&PodInfo) -> bool) -> Vec<String> {
        let Some(keys) = self.groups.get(group) else { return Vec::new() };
        sorted_keys(keys.iter().filter_map(|k| self.pods.get(k)).filter(|q| pred(&q.pod)).collect())
    }

    fn index(&mut self, key: &str, pod: &PodInfo) {
        if let Some(group) = crate::gang::group_of(pod) {
            self.groups.entry(group).or_default().insert(key.to_string());
        }
    }

    fn unindex(&mut self, key: &str, pod: &PodInfo) {
        let Some(group) = crate::gang::group_of(pod) else { return };
        if let Some(keys) = self.groups.get_mut(&group) {
            keys.remove(key);
            if keys.is_empty() {
                self.groups.remove(&group);
            }
        }
    }
}

/// Queued pods' keys by priority, then age, then key.
fn sorted_keys(mut found: Vec<&QueuedPod>) -> Vec<String> {
    found.sort_by(|a, b| {
        b.pod
            .priority
            .cmp(&a.pod.priority)
            .then(a.pod.created_nanos.cmp(&b.pod.created_nanos))
            .then_with(|| a.pod.key().cmp(&b.pod.key()))
    });
    found.into_iter().map(|q| q.pod.key()).collect()
}

impl SchedulingQueue {
    /// Takes a queued pod that is not in flight, wherever it waits (active, backoff or
    /// unschedulable), as [`SchedulingQueue::pop`] would: it is in flight afterwards.
    pub fn take(&mut self, key: &str) -> Option<QueuedPod> {
        if self.in_flight.contains_key(key) {
            return None;
        }
        let q = self.pods.get_mut(key)?;
        q.attempts += 1;
        let taken = q.clone();
        self.active.remove(key);
        self.backoff.remove(key);
        self.unschedulable.remove(key);
        self.in_flight.insert(key.to_string(), self.events_seen);
        Some(taken)
    }

    /// Moves a pod parked as unschedulable back to be retried (after what is left of its
    /// backoff).
    pub fn activate(&mut self, key: &str, now: Instant) {
        self.reactivate(key, now, "ForceActivate");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use algorithms::builders::PodBuilder;

    fn pod(name: &str, priority: i32, created: i128) -> Arc<PodInfo> {
        let mut p = PodBuilder::new(name).priority(priority).info();
        p.created_nanos = created;
        Arc::new(p)
    }

    #[test]
    fn a_groups_queued_members_are_found_without_the_others() {
        use crate::gang::POD_GROUP_LABEL;
        let now = Instant::now();
        let member = |name: &str, group: &str, created: i128| {
            let mut p = PodBuilder::new(name).label(POD_GROUP_LABEL, group).info();
            p.created_nanos = created;
            Arc::new(p)
        };
        let mut q = SchedulingQueue::default();
        q.add(member("b", "job", 2), now);
        q.add(member("a", "job", 1), now);
        q.add(member("x", "other", 0), now);
        q.add(pod("plain", 0, 0), now);
        assert_eq!(q.group_keys("default/job", |_| true), vec!["default/a", "default/b"]);
        assert_eq!(q.group_keys("default/job", |p| p.name == "b"), vec!["default/b"]);
        assert!(q.group_keys("default/none", |_| true).is_empty());
        // A member whose label moves it to another group is found there.
        q.add(member("b", "other", 2), now);
        assert_eq!(q.group_keys("default/job", |_| true), vec!["default/a"]);
        assert_eq!(q.group_keys("default/other", |_| true), vec!["default/x", "default/b"]);
        // Scheduled, deleted or requeued: the index follows.
        let popped = q.take("default/a").unwrap();
        q.done("default/a");
        assert!(q.group_keys("default/job", |_| true).is_empty());
        q.requeue(popped.pod, 1, now);
        assert_eq!(q.group_keys("default/job", |_| true), vec!["default/a"]);
        q.delete("default/x");
        assert_eq!(q.group_keys("default/other", |_| true), vec!["default/b"]);
    }

    #[test]
    fn with_nothing_active_an_unschedulable_pod_backing_off_is_popped_at_once() {
        let t0 = Instant::now();
        let helps = |_: &PodInfo, _: &str, _: &ClusterEvent| true;
        let event = || ClusterEvent::NodeAdded(Arc::new(algorithms::NodeInfo::default()));
        for gate in [true, false] {
            let mut q = SchedulingQueue::default();
            q.set_pop_from_backoff(gate);
            // Three pods fail: two as unschedulable (then an event moves them to backoff),
            // one with an error.
            for (name, priority) in [("low", 0), ("high", 10), ("broken", 100)] {
                q.add(pod(name, priority, 1), t0);
            }
            for _ in 0..3 {
                let p = q.pop(t0).unwrap();
                match p.pod.name.as_str() {
                    "broken" => q.error("default/broken", t0),
                    name => q.unschedulable(&format!("default/{name}"), vec!["NodeResourcesFit"], t0, &helps),
                }
            }
            assert_eq!(q.on_event(event(), t0, &helps), 2);
            assert_eq!(q.lengths().backoff, 3);
            let popped: Vec<String> = std::iter::from_fn(|| q.pop(t0).map(|p| p.pod.name.clone())).collect();
            if gate {
                // Same backoff window: the higher priority first; the erroring pod waits.
                assert_eq!(popped, ["high", "low"]);
                assert_eq!(q.lengths().backoff, 1);
            } else {
                assert!(popped.is_empty(), "{popped:?}");
                assert_eq!(q.lengths().backoff, 3);
            }
            // Once the backoff is over the erroring pod goes as always.
            let later = t0 + Duration::from_secs(11);
            assert!(q.pop(later).is_some());
        }
    }

    #[test]
    fn a_pod_deleted_while_its_report_was_written_is_not_brought_back() {
        let mut q = SchedulingQueue::default();
        let t0 = Instant::now();
        q.add(pod("p", 0, 1), t0);
        let popped = q.pop(t0).unwrap();
        q.unschedulable("default/p", vec!["NodeResourcesFit"], t0, &|_, _, _| false);
        // Still parked: a retry after preemption or a failed PostFilter write puts it back.
        assert!(q.requeue_if_queued(popped.pod.clone(), 1, t0));
        assert_eq!(q.lengths().backoff, 1);
        // Deleted (the watch said so) before the retry came: it stays gone.
        q.delete("default/p");
        assert!(!q.requeue_if_queued(popped.pod, 1, t0));
        assert_eq!(q.lengths(), QueueLengths::default());
        assert!(!q.contains("default/p"));
    }

    #[test]
    fn pops_by_priority_then_age() {
        let now = Instant::now();
        let mut q = SchedulingQueue::default();
        q.add(pod("young-low", 0, 20), now);
        q.add(pod("old-low", 0, 10), now);
        q.add(pod("high", 100, 30), now);
        let order: Vec<String> = std::iter::from_fn(|| q.pop(now).map(|p| p.pod.name.clone())).collect();
        assert_eq!(order, vec!["high", "old-low", "young-low"]);
    }

    #[test]
    fn backoff_doubles_until_ten_seconds() {
        let q = SchedulingQueue::default();
        let secs: Vec<u64> = (1..=6).map(|a| q.backoff_for(a).as_secs()).collect();
        assert_eq!(secs, vec![1, 2, 4, 8, 10, 10]);
    }

    #[test]
    fn errored_pods_wait_out_their_backoff() {
        let t0 = Instant::now();
        let mut q = SchedulingQueue::default();
        q.add(pod("p", 0, 0), t0);
        let popped = q.pop(t0).unwrap();
        assert_eq!(popped.attempts, 1);
        q.error("default/p", t0);
        assert!(q.pop(t0 + Duration::from_millis(999)).is_none());
        assert_eq!(q.pop(t0 + Duration::from_secs(1)).unwrap().attempts, 2);
        q.error("default/p", t0 + Duration::from_secs(1));
        assert!(q.pop(t0 + Duration::from_millis(2999)).is_none());
        assert!(q.pop(t0 + Duration::from_secs(3)).is_some());
    }

    /// A hint that accepts pod deletions for NodeResourcesFit and anything for others.
    fn deletions_help_fit(_: &PodInfo, plugin: &'static str, ev: &ClusterEvent) -> bool {
        plugin != "NodeResourcesFit" || matches!(ev, ClusterEvent::PodDeleted(_))
    }

    fn any_event() -> ClusterEvent {
        ClusterEvent::PodAdded(pod("other", 0, 0))
    }

    #[test]
    fn unschedulable_pods_move_only_on_events_their_rejecting_plugins_accept() {
        let t0 = Instant::now();
        let mut q = SchedulingQueue::default();
        q.add(pod("p", 0, 0), t0);
        q.pop(t0);
        q.unschedulable("default/p", vec!["NodeResourcesFit"], t0, &deletions_help_fit);
        let later = t0 + Duration::from_secs(2);
        assert_eq!(q.on_event(ClusterEvent::PodAdded(pod("x", 0, 0)), later, &deletions_help_fit), 0);
        assert!(q.pop(later).is_none());
        assert_eq!(q.on_event(ClusterEvent::PodDeleted(pod("x", 0, 0)), later, &deletions_help_fit), 1);
        assert_eq!(q.pop(later).unwrap().attempts, 2);
    }

    #[test]
    fn a_helpful_event_during_the_cycle_sends_the_pod_to_backoff_not_to_the_unschedulable_set() {
        let t0 = Instant::now();
        let mut q = SchedulingQueue::default();
        q.add(pod("p", 0, 0), t0);
        q.add(pod("q", 0, 1), t0);
        q.pop(t0);
        q.on_event(ClusterEvent::PodAdded(pod("x", 0, 0)), t0, &deletions_help_fit);
        q.unschedulable("default/p", vec!["NodeResourcesFit"], t0, &deletions_help_fit);
        assert_eq!(q.lengths().unschedulable, 1, "an event that cannot help is no reason to retry");
        q.pop(t0);
        // The deletion wakes the parked p and is kept for q, in flight.
        q.on_event(ClusterEvent::PodDeleted(pod("x", 0, 0)), t0, &deletions_help_fit);
        q.unschedulable("default/q", vec!["NodeResourcesFit"], t0, &deletions_help_fit);
        assert_eq!(q.lengths(), QueueLengths { active: 0, backoff: 2, unschedulable: 0, gated: 0 });
        assert!(q.recent.is_empty(), "events are kept only while pods are in flight");
    }

    #[test]
    fn moved_pods_still_back_off() {
        let t0 = Instant::now();
        let mut q = SchedulingQueue::default();
        // The backoff itself (with nothing active, SchedulerPopFromBackoffQ would take it).
        q.set_pop_from_backoff(false);
        q.add(pod("p", 0, 0), t0);
        q.pop(t0);
        q.unschedulable("default/p", vec!["TaintToleration"], t0, &deletions_help_fit);
        assert_eq!(q.on_event(any_event(), t0 + Duration::from_millis(100), &deletions_help_fit), 1);
        assert_eq!(q.lengths().backoff, 1);
        assert!(q.pop(t0 + Duration::from_millis(500)).is_none());
        assert!(q.pop(t0 + Duration::from_secs(1)).is_some());
    }

    #[test]
    fn unschedulable_pods_are_flushed_after_five_minutes() {
        let t0 = Instant::now();
        let mut q = SchedulingQueue::default();
        q.add(pod("p", 0, 0), t0);
        q.pop(t0);
        q.unschedulable("default/p", vec!["NodeAffinity"], t0, &deletions_help_fit);
        q.flush_unschedulable(t0 + Duration::from_secs(299));
        assert_eq!(q.lengths().unschedulable, 1);
        q.flush_unschedulable(t0 + UNSCHEDULABLE_FLUSH);
        assert!(q.pop(t0 + UNSCHEDULABLE_FLUSH).is_some());
    }

    #[test]
    fn a_status_update_leaves_an_unschedulable_pod_parked_and_a_label_change_does_not() {
        let t0 = Instant::now();
        let mut q = SchedulingQueue::default();
        q.add(pod("p", 0, 0), t0);
        q.pop(t0);
        q.unschedulable("default/p", vec!["NodeAffinity"], t0, &deletions_help_fit);
        q.add(pod("p", 0, 0), t0);
        assert_eq!(q.lengths().unschedulable, 1);
        let mut relabelled = (*pod("p", 0, 0)).clone();
        relabelled.labels.insert("tier".into(), "db".into());
        q.add(Arc::new(relabelled), t0);
        assert_eq!(q.lengths().unschedulable, 0);
    }

    #[test]
    fn deleted_pods_are_dropped_everywhere() {
        let t0 = Instant::now();
        let mut q = SchedulingQueue::default();
        q.add(pod("p", 0, 0), t0);
        q.delete("default/p");
        assert!(q.pop(t0).is_none());
        assert!(!q.contains("default/p"));
    }

    #[derive(Default)]
    struct Seen(std::sync::Mutex<Vec<(String, String)>>);

    impl QueueObserver for Seen {
        fn incoming(&self, event: &'static str, queue: &'static str) {
            self.0.lock().unwrap().push((event.into(), queue.into()));
        }
        fn event_handled(&self, _: &'static str, _: f64) {}
    }

    #[test]
    fn pods_coming_in_are_told_with_the_event_and_the_sub_queue() {
        let seen = Arc::new(Seen::default());
        let mut q = SchedulingQueue::default();
        q.set_observer(seen.clone());
        let t0 = Instant::now();
        q.add(pod("p", 0, 0), t0);
        q.pop(t0).unwrap();
        // While the pod is in its cycle, events are kept for it.
        q.on_event(ClusterEvent::PodDeleted(pod("x", 0, 0)), t0, &|_, _, _| false);
        assert_eq!(q.in_flight_events(), vec![("AssignedPodDelete", 1), ("PodPopped", 1)]);
        q.unschedulable("default/p", vec!["NodeResourcesFit"], t0, &|_, _, _| false);
        assert_eq!(q.in_flight_events(), vec![("PodPopped", 0)]);
        // A node event that helps, after the backoff: straight to active.
        let later = t0 + Duration::from_secs(30);
        q.on_event(ClusterEvent::NodeAdded(Arc::new(algorithms::NodeInfo::default())), later, &|_, _, _| true);
        q.pop(later).unwrap();
        q.error("default/p", later);
        let told: Vec<(String, String)> = seen.0.lock().unwrap().clone();
        let want = [
            ("PodAdd", "active"),
            ("ScheduleAttemptFailure", "unschedulable"),
            ("NodeAdd", "active"),
            ("ScheduleAttemptFailure", "backoff"),
        ];
        assert_eq!(told, want.map(|(e, q)| (e.to_string(), q.to_string())));
    }
}
