//! Cycles for gang members: the whole group in one decision (see [`crate::gang`]).

use std::sync::Arc;
use std::time::Instant;

use algorithms::PodInfo;
use algorithms::events::ClusterEvent;
use algorithms::framework::{EvaluateOptions, evaluate};
use algorithms::framework::{PostFilterResult, run_post_filters};

use super::{Attempt, Cycle, Cycler, Engine, Nomination, Outcome, Preempted};
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

    /// Places `first`'s group all at once, or none of it (under the state lock in `run`).
    pub fn schedule_group(
        &mut self,
        engine: &mut Engine,
        first: Attempt,
        group: &str,
        spec: &PodGroupSpec,
        now: Instant,
    ) -> Vec<Cycle> {
        let api = gang::api_of(&first.queued.pod);
        let in_group = |p: &PodInfo| gang::api_of(p) == api && gang::group_of(p).as_deref() == Some(group);
        let running = self.snapshot.nodes.iter().flat_map(|n| n.pods.iter()).filter(|p| in_group(p)).count();
        let pending = engine.queue.keys_where(in_group);
        let min = spec.min_member as usize;
        if running + pending.len() < min {
            let message =
                format!("pod group {group:?} has {} of the {min} pods it needs (minMember)", running + pending.len());
            return vec![self.park(engine, first, message, vec![COSCHEDULING], now)];
        }
        let need = min.saturating_sub(running);
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
        // Each member sees the ones placed before it: they are assumed in the cache.
        let mut placed: Vec<(Attempt, String, Arc<PodInfo>)> = Vec::new();
        let mut failed: Vec<(Attempt, String, Vec<&'static str>)> = Vec::new();
        for attempt in members {
            engine.cache.update_snapshot(&mut self.snapshot);
            let ev = self.evaluate_all(&attempt);
            let chosen = ev.selected.filter(|_| ev.error.is_none()).map(|i| self.snapshot.nodes[i].name.clone());
            let profile = &self.profiles[attempt.profile];
            match chosen.map(|node| (engine.reserve(&attempt.queued.pod, &node, profile, now), node)) {
                Some((Ok(info), node)) => placed.push((attempt, node, info)),
                _ => {
                    let mut plugins: Vec<&'static str> = ev.rejected.iter().map(|(_, s)| s.plugin).collect();
                    plugins.sort_unstable();
                    plugins.dedup();
                    failed.push((attempt, ev.failure_message().unwrap_or_default(), plugins));
                }
            }
        }
        let mut cycles = Vec::new();
        if placed.len() >= need {
            for (attempt, node, info) in placed {
                let key = attempt.queued.pod.key();
                engine.queue.done(&key);
                engine.cache.nominator.remove(&key);
                engine.on_event(ClusterEvent::PodAdded(info), now);
                cycles.push(Cycle {
                    duration: attempt.started.elapsed(),
                    profile: self.profiles[attempt.profile].scheduler_name.clone(),
                    queued: attempt.queued,
                    outcome: Outcome::Scheduled { node },
                });
            }
            for (attempt, message, plugins) in failed {
                cycles.push(self.park(engine, attempt, message, plugins, now));
            }
            return cycles;
        }
        // Too few fit: preempt for the whole group or not at all, undo every assumption,
        // and the whole group waits (for the victims to go, or for a cluster change).
        let preemptions = self.preempt_group(engine, &failed);
        let why = failed.first().map(|(_, m, _)| m.clone()).unwrap_or_default();
        let mut message = format!("pod group {group:?}: {} of the {need} pods it needs fit; {why}", placed.len());
        if preemptions.is_some() {
            message.push_str(" The group preempts lower-priority pods for the members that do not fit.");
        }
        let mut plugins: Vec<&'static str> = failed.iter().flat_map(|(_, _, p)| p.iter().copied()).collect();
        plugins.push(COSCHEDULING);
        plugins.sort_unstable();
        plugins.dedup();
        for (attempt, _, _) in &placed {
            engine.cache.forget(&attempt.queued.pod.key());
        }
        for (attempt, ..) in placed {
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
    /// gets a node by evicting lower-priority pods (or fits once earlier victims are gone),
    /// with the members before it placed; `None` unless every one of them does.
    fn preempt_group(
        &mut self,
        engine: &mut Engine,
        failed: &[(Attempt, String, Vec<&'static str>)],
    ) -> Option<Vec<Preempted>> {
        failed.first()?;
        engine.cache.update_snapshot(&mut self.snapshot);
        let mut scratch = self.snapshot.clone();
        let mut out = Vec::new();
        for (attempt, ..) in failed {
            let pod = &attempt.queued.pod;
            let profile = &self.profiles[attempt.profile];
            let ev = evaluate(profile, pod, &scratch, &mut self.rng, EvaluateOptions::default());
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
            node.add_pod(Arc::new(member));
            let name = node.name.clone();
            scratch.replace_node(i, Arc::new(node));
            scratch.set_pod_flags(i);
            out.push(Preempted { node: name, victims, cleared: Vec::new() });
        }
        Some(out)
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
        let outcome = if engine.queue.contains(&key) {
            engine.park(&key, plugins, now);
            Outcome::Unschedulable { message, nomination: Nomination::Unchanged }
        } else {
            Outcome::Gone
        };
        Cycle {
            duration: attempt.started.elapsed(),
            profile: self.profiles[attempt.profile].scheduler_name.clone(),
            queued: attempt.queued,
            outcome,
        }
    }
}
