//! Cycles for gang members: the whole group in one decision (see [`crate::gang`]).

use std::sync::Arc;
use std::time::Instant;

use algorithms::PodInfo;
use algorithms::events::ClusterEvent;

use super::{Attempt, Cycle, Cycler, Engine, Nomination, Outcome};
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
            match chosen.map(|node| (engine.cache.assume(&attempt.queued.pod, &node), node)) {
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
        // Too few fit: undo every assumption, and the whole group waits.
        let why = failed.first().map(|(_, m, _)| m.clone()).unwrap_or_default();
        let message = format!("pod group {group:?}: {} of the {need} pods it needs fit; {why}", placed.len());
        let mut plugins: Vec<&'static str> = failed.iter().flat_map(|(_, _, p)| p.iter().copied()).collect();
        plugins.push(COSCHEDULING);
        plugins.sort_unstable();
        plugins.dedup();
        for (attempt, _, _) in &placed {
            engine.cache.forget(&attempt.queued.pod.key());
        }
        let all = placed.into_iter().map(|(a, ..)| a).chain(failed.into_iter().map(|(a, ..)| a));
        for attempt in all.collect::<Vec<_>>() {
            cycles.push(self.park(engine, attempt, message.clone(), plugins.clone(), now));
        }
        cycles
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
