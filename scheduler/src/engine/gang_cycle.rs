//! Cycles for gang members: the whole group in one decision (see [`crate::gang`]).

use std::sync::Arc;
use std::time::Instant;

use algorithms::PodInfo;
use algorithms::events::ClusterEvent;
use algorithms::framework::{EvaluateOptions, Limits, evaluate};
use algorithms::framework::{PostFilterResult, run_post_filters};
use algorithms::plugins::registry::OWNERS;

use algorithms::Snapshot;

use super::topology::Within;
use super::{Attempt, Cycle, Cycler, Engine, Nomination, Outcome, Preempted, Refused};
use crate::gang::{self, PodGroupSpec};

/// The plugin name gang decisions are reported under (scheduler-plugins' Coscheduling).
pub const COSCHEDULING: &str = "Coscheduling";

impl Cycler {
    /// Schedules the next pod ready at `now`, or, for a gang member, its whole group;
    /// `None` when nothing is ready. For a caller that holds the engine alone (`simulate`).
    pub fn schedule_next(&mut self, engine: &mut Engine, now: Instant) -> Option<Vec<Cycle>> {
        match self.begin(engine, now)? {
            Err(cycle) => Some(vec![cycle]),
            Ok(attempt) => match engine.groups.gang_of(&attempt.queued.pod) {
                Some((group, spec)) => Some(self.schedule_group(engine, attempt, &group, &spec, now)),
                None if let Some(group) = engine.groups.missing(&attempt.queued.pod) => {
                    Some(vec![self.wait_for_group(engine, attempt, &group, now)])
                }
                None => {
                    let decision = self.evaluate(&attempt);
                    Some(vec![self.finish(engine, attempt, decision, now)])
                }
            },
        }
    }

    /// Parks a pod whose `scheduling.k8s.io` PodGroup does not exist yet; the group's
    /// arrival wakes it.
    pub fn wait_for_group(&mut self, engine: &mut Engine, attempt: Attempt, group: &str, now: Instant) -> Cycle {
        let message = format!("pod group {group:?} does not exist yet");
        self.park(engine, attempt, message, vec![COSCHEDULING], now)
    }

    /// Places `first`'s group all at once, or none of it: the three steps of
    /// [`Cycler::begin_group`], [`Cycler::evaluate_group`] and [`Cycler::finish_group`]
    /// in a row, for a caller that holds the engine alone (`simulate`).
    pub fn schedule_group(
        &mut self,
        engine: &mut Engine,
        first: Attempt,
        group: &str,
        spec: &PodGroupSpec,
        now: Instant,
    ) -> Vec<Cycle> {
        match self.begin_group(engine, first, group, spec, now) {
            Err(parked) => vec![*parked],
            Ok(attempt) => {
                let plan = self.evaluate_group(attempt);
                self.finish_group(engine, plan, now)
            }
        }
    }

    /// Under the state lock: takes the group's pending members from the queue, or parks
    /// `first` when the group has fewer pods than its minimum.
    pub fn begin_group(
        &mut self,
        engine: &mut Engine,
        first: Attempt,
        group: &str,
        spec: &PodGroupSpec,
        now: Instant,
    ) -> Result<GroupAttempt, Box<Cycle>> {
        let api = gang::api_of(&first.queued.pod);
        let in_group = |p: &PodInfo| gang::api_of(p) == api && gang::is_member(p, group);
        // The cache keeps each group's placed members: no scan of every pod.
        let placed = engine.cache.group_nodes(api, group);
        let running = placed.len();
        let mut homes: Vec<usize> = placed.iter().filter_map(|n| self.snapshot.position(n)).collect();
        homes.sort_unstable();
        homes.dedup();
        let pending = engine.queue.group_keys(group, in_group);
        let min = spec.min_member as usize;
        if running + pending.len() < min {
            let message =
                format!("pod group {group:?} has {} of the {min} pods it needs (minMember)", running + pending.len());
            return Err(Box::new(self.park(engine, first, message, vec![COSCHEDULING], now)));
        }
        let first_key = first.queued.pod.key();
        let mut members = vec![first];
        for key in pending.iter().filter(|k| **k != first_key) {
            let Some(queued) = engine.queue.take(key) else { continue };
            let Some(profile) = self.profiles.iter().position(|p| p.scheduler_name == queued.pod.scheduler_name) else {
                engine.queue.error(key, now);
                continue;
            };
            members.push(Attempt { queued, profile, started: Instant::now(), nominated: None });
        }
        let topology = spec.topology_key.clone();
        let need = min.saturating_sub(running);
        Ok(GroupAttempt { group: group.to_string(), need, scheduled: running, homes, members, topology })
    }

    /// Without any lock: places the members one after another on a copy of the snapshot,
    /// each as the next sees it (its pod on the node, what its Reserve plugins take), and
    /// when too few fit, plans the preemption that would make room for the whole group.
    /// A group constrained to a topology domain is placed in one domain
    /// ([`super::topology`]).
    pub fn evaluate_group(&mut self, attempt: GroupAttempt) -> GroupPlan {
        let GroupAttempt { group, need, scheduled, homes, members, topology } = attempt;
        let mut domains = Vec::new();
        let (placed, failed, preemptions, message) = match &topology {
            Some(key) => {
                let o = self.place_in_domains(&group, (need, scheduled, &homes), &members, key);
                domains = o.domains;
                (o.placed, o.failed, o.preemptions, o.message)
            }
            None => {
                let mut scratch = self.snapshot.clone();
                let (placed, failed) = self.place_members(&mut scratch, &members, None);
                let preemptions = if placed.len() < need {
                    let failing: Vec<&Attempt> = failed.iter().map(|f| &members[f.0]).collect();
                    self.preempt_members(scratch, &failing, None)
                } else {
                    None
                };
                (placed, failed, preemptions, None)
            }
        };
        let mut members: Vec<Option<Attempt>> = members.into_iter().map(Some).collect();
        let placed = placed
            .into_iter()
            .filter_map(|(i, node, limits)| Some((members.get_mut(i)?.take()?, node, limits)))
            .collect();
        let failed = failed.into_iter().filter_map(|(i, m, p)| Some((members.get_mut(i)?.take()?, m, p))).collect();
        GroupPlan { group, need, placed, failed, preemptions, message, domains }
    }

    /// Places `members` in turn on `scratch` (only on the nodes `within` names, when
    /// given): the members placed (by index, with their node), and those not (with their
    /// message and the plugins that turned them away).
    pub(super) fn place_members(
        &mut self,
        scratch: &mut Snapshot,
        members: &[Attempt],
        within: Option<&Within>,
    ) -> (Vec<Placed>, Vec<Failed>) {
        let mut placed: Vec<Placed> = Vec::new();
        let mut failed: Vec<Failed> = Vec::new();
        for (k, attempt) in members.iter().enumerate() {
            let ev = self.evaluate_within(scratch, attempt, within);
            let chosen = ev.selected.filter(|_| ev.error.is_none());
            let profile = &self.profiles[attempt.profile];
            let limits = ev.limits.as_ref();
            match chosen.map(|i| (i, place(scratch, i, &attempt.queued.pod, profile, limits))) {
                Some((i, Ok(()))) => placed.push((k, scratch.nodes[i].name.clone(), ev.limits.clone())),
                Some((_, Err(message))) => failed.push((k, message, Vec::new())),
                None => {
                    let mut plugins: Vec<&'static str> = ev
                        .rejected
                        .iter()
                        .map(|(_, s)| s.plugin)
                        .filter(|p| within.is_none() || *p != COSCHEDULING)
                        .collect();
                    plugins.sort_unstable();
                    plugins.dedup();
                    let message = ev.failure_message().unwrap_or_default();
                    failed.push((k, message, plugins));
                }
            }
        }
        (placed, failed)
    }

    /// Under the state lock: assumes and reserves every placed member (all of them, or,
    /// if the cluster changed so that one no longer can be, none), or parks the group.
    pub fn finish_group(&mut self, engine: &mut Engine, plan: GroupPlan, now: Instant) -> Vec<Cycle> {
        let GroupPlan { group, need, placed, failed, preemptions, message: constrained, .. } = plan;
        let mut cycles = Vec::new();
        if placed.len() >= need {
            let mut reserved: Vec<(Attempt, String, Arc<PodInfo>)> = Vec::new();
            let mut refused = None;
            let mut placed = placed.into_iter();
            for (attempt, node, limits) in placed.by_ref() {
                let profile = &self.profiles[attempt.profile];
                match engine.reserve(&attempt.queued.pod, &node, profile, limits.as_ref(), now) {
                    Ok(info) => reserved.push((attempt, node, info)),
                    Err(e) => {
                        let message = match e {
                            Refused::Rejected { message, .. } | Refused::Error(message) => message,
                        };
                        refused = Some((attempt, message));
                        break;
                    }
                }
            }
            if let Some((attempt, message)) = refused {
                // The cluster changed since the members were placed: undo the group's
                // assumptions and retry every member after backoff.
                let message = format!("pod group {group:?}: {message}");
                // Every member is retried: those reserved, the refused one, those not
                // reached yet and those that did not fit.
                let rest = reserved
                    .into_iter()
                    .map(|(a, ..)| a)
                    .chain([attempt])
                    .chain(placed.map(|(a, _, _)| a))
                    .chain(failed.into_iter().map(|(a, ..)| a));
                for attempt in rest.collect::<Vec<_>>() {
                    engine.forget(&attempt.queued.pod.key(), now);
                    cycles.push(self.retry(engine, attempt, message.clone(), now));
                }
                return cycles;
            }
            for (attempt, node, info) in reserved {
                let key = attempt.queued.pod.key();
                if !engine.queue.contains(&key) {
                    // Deleted while the group was decided.
                    engine.forget(&key, now);
                    cycles.push(self.ended(attempt, None));
                    continue;
                }
                engine.queue.done(&key);
                engine.cache.nominator.remove(&key);
                engine.on_event(ClusterEvent::PodAdded(info), now);
                cycles.push(self.ended(attempt, Some(Outcome::Scheduled { node })));
            }
            for (attempt, message, plugins) in failed {
                cycles.push(self.park(engine, attempt, message, plugins, now));
            }
            return cycles;
        }
        // Too few fit: preempt for the whole group or not at all, and the whole group
        // waits (for the victims to go, or for a cluster change).
        let why = failed.first().map(|(_, m, _)| m.clone()).unwrap_or_default();
        let mut message = constrained
            .unwrap_or_else(|| format!("pod group {group:?}: {} of the {need} pods it needs fit; {why}", placed.len()));
        if preemptions.is_some() {
            message.push_str(" The group preempts lower-priority pods for the members that do not fit.");
        }
        let mut plugins: Vec<&'static str> = failed.iter().flat_map(|(_, _, p)| p.iter().copied()).collect();
        plugins.push(COSCHEDULING);
        plugins.sort_unstable();
        plugins.dedup();
        for (attempt, _, _) in placed {
            cycles.push(self.park(engine, attempt, message.clone(), plugins.clone(), now));
        }
        let mut preemptions = preemptions.map(Vec::into_iter);
        for (attempt, ..) in failed {
            let pod = attempt.queued.pod.clone();
            let mut cycle = self.park(engine, attempt, message.clone(), plugins.clone(), now);
            if let (Some(mut p), Outcome::Unschedulable { nomination, .. }) =
                (preemptions.as_mut().and_then(Iterator::next), &mut cycle.outcome)
            {
                let cleared = engine.cache.nominator.lower_on(&p.node, pod.priority);
                for k in &cleared {
                    engine.cache.nominator.remove(k);
                }
                engine.cache.nominator.nominate(pod, &p.node);
                p.cleared = cleared;
                *nomination = Nomination::Preempted(p);
            }
            cycles.push(cycle);
        }
        cycles
    }

    /// DefaultPreemption for a group as a whole: each member that did not fit, in turn,
    /// gets a node (among those `within` allows, when given) by evicting lower-priority
    /// pods (or fits once earlier victims are gone), with the members before it placed;
    /// `None` unless every one of them does.
    pub(super) fn preempt_members(
        &mut self,
        mut scratch: Snapshot,
        failed: &[&Attempt],
        within: Option<&Within>,
    ) -> Option<Vec<Preempted>> {
        failed.first()?;
        let mut out = Vec::new();
        for attempt in failed {
            let pod = &attempt.queued.pod;
            let profile = &self.profiles[attempt.profile];
            let opts = EvaluateOptions { within: within.cloned(), ..Default::default() };
            let ev = evaluate(profile, pod, &scratch, &mut self.rng, opts);
            let (i, victims) = match ev.selected.filter(|_| ev.error.is_none()) {
                Some(i) => (i, Vec::new()),
                None => match run_post_filters(profile, pod, &mut scratch, &ev, &mut self.rng) {
                    Some(PostFilterResult::Nominate(c)) => (c.node, c.victims),
                    _ => return None,
                },
            };
            let mut node = (*scratch.nodes[i]).clone();
            for v in &victims {
                node.remove_pod(&v.namespace, &v.name);
            }
            let mut member = (**pod).clone();
            member.node_name = Some(node.name.clone());
            tell_owners(&mut scratch, &member, &victims);
            node.add_pod(Arc::new(member));
            let name = node.name.clone();
            scratch.replace_node(i, Arc::new(node));
            scratch.set_pod_flags(i);
            out.push(Preempted { node: name, victims, cleared: Vec::new() });
        }
        Some(out)
    }

    /// Sends a member back to be retried after backoff, with `message` as an error.
    fn retry(&mut self, engine: &mut Engine, attempt: Attempt, message: String, now: Instant) -> Cycle {
        let key = attempt.queued.pod.key();
        let outcome = engine.queue.contains(&key).then(|| {
            engine.queue.error(&key, now);
            Outcome::Error { message }
        });
        self.ended(attempt, outcome)
    }

    /// Parks a member as unschedulable with `message`.
    fn park(
        &mut self,
        engine: &mut Engine,
        attempt: Attempt,
        message: String,
        plugins: Vec<&'static str>,
        now: Instant,
    ) -> Cycle {
        let key = attempt.queued.pod.key();
        let outcome = engine.queue.contains(&key).then(|| {
            engine.park(&key, plugins, now);
            Outcome::Unschedulable { message, nomination: Nomination::Unchanged }
        });
        self.ended(attempt, outcome)
    }

    /// The cycle of a member that ended with `outcome`, or [`Outcome::Gone`] when the pod
    /// left the queue meanwhile.
    fn ended(&self, attempt: Attempt, outcome: Option<Outcome>) -> Cycle {
        Cycle {
            duration: attempt.started.elapsed(),
            profile: self.profiles[attempt.profile].scheduler_name.clone(),
            queued: attempt.queued,
            outcome: outcome.unwrap_or(Outcome::Gone),
        }
    }
}

/// A group's members taken from the queue, to be decided without the lock.
#[derive(Debug)]
pub struct GroupAttempt {
    group: String,
    /// Members that must be placed (the minimum less those already running).
    need: usize,
    /// The group's pods already on nodes.
    scheduled: usize,
    /// The nodes they are on.
    homes: Vec<usize>,
    members: Vec<Attempt>,
    /// The node label whose one domain must hold the group, if constrained.
    topology: Option<String>,
}

/// A member placed: its index among the members, its node, and the limits its
/// PreFilters gave (for its Reserve).
pub(super) type Placed = (usize, String, Option<Limits>);
/// A member not placed: its index, its message and the plugins that turned it away.
pub(super) type Failed = (usize, String, Vec<&'static str>);

/// What deciding a group found, to be applied under the lock.
#[derive(Debug)]
pub struct GroupPlan {
    group: String,
    need: usize,
    placed: Vec<(Attempt, String, Option<Limits>)>,
    failed: Vec<(Attempt, String, Vec<&'static str>)>,
    preemptions: Option<Vec<Preempted>>,
    /// The message of a constrained group that no domain holds.
    message: Option<String>,
    /// Each candidate domain's verdict, for a constrained group.
    domains: Vec<super::DomainVerdict>,
}

impl GroupPlan {
    /// The group's `namespace/name`.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// The members that must be placed.
    pub fn need(&self) -> usize {
        self.need
    }

    /// The message when the group does not fit (constrained groups).
    pub fn message(&self) -> Option<&str> {
        self.message.as_deref()
    }

    /// Each candidate domain's verdict (constrained groups; empty otherwise).
    pub fn domains(&self) -> &[super::DomainVerdict] {
        &self.domains
    }

    /// The members placed, as (pod name, node), in the order they are assumed.
    pub fn placed(&self) -> Vec<(String, String)> {
        self.placed.iter().map(|(a, node, _)| (a.queued.pod.name.clone(), node.clone())).collect()
    }
}

/// Places a member on node `i` of a scratch snapshot, as Reserve would in the cache: its
/// pod on the node, and what the profile's Reserve plugins assume in a copy of the
/// cluster objects. `Err` is why a Reserve plugin refused it (the copy is left as it was).
fn place(
    scratch: &mut Snapshot,
    i: usize,
    pod: &PodInfo,
    profile: &algorithms::Profile,
    limits: Option<&Limits>,
) -> Result<(), String> {
    let Some(node) = scratch.nodes.get(i).cloned() else { return Err(format!("node {i} is not in the snapshot")) };
    if !profile.reserves.is_empty() {
        let mut objects = (*scratch.objects).clone();
        for plugin in &profile.reserves {
            if let Err(status) = plugin.reserve_within(&mut objects, pod, &node, limits) {
                return Err(format!("running Reserve plugin \"{}\": {}", plugin.name(), status.message()));
            }
        }
        scratch.objects = Arc::new(objects);
    }
    let mut node = (*node).clone();
    let mut member = pod.clone();
    member.node_name = Some(node.name.clone());
    tell_owners(scratch, &member, &[]);
    node.add_pod(Arc::new(member));
    scratch.replace_node(i, Arc::new(node));
    scratch.set_pod_flags(i);
    Ok(())
}

/// Tells the owners of cluster objects that keep what placed pods take (quotas) of a
/// member placed in a scratch snapshot and of the victims evicted for it, as the cache
/// tells them of the pods it places and removes: the next member sees them counted.
fn tell_owners(scratch: &mut Snapshot, placed: &PodInfo, evicted: &[Arc<PodInfo>]) {
    let mut objects = (*scratch.objects).clone();
    let mut changed = false;
    for owner in OWNERS {
        for victim in evicted {
            changed |= owner.pod_unplaced(&mut objects, victim);
        }
        changed |= owner.pod_placed(&mut objects, placed);
    }
    if changed {
        scratch.objects = Arc::new(objects);
    }
}
