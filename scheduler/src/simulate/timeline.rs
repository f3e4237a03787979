//! A timeline in virtual time: pods arrive at given steps, run for given numbers of steps
//! once bound, and leave; after each step's arrivals and departures the queue is drained
//! and an observer looks at the cluster. A pod evicted by preemption comes back at the
//! next step, as the controller that owns it recreates it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use algorithms::PodInfo;

use super::{Drained, PreemptionRecord, drain};
use crate::binding::memory::MemoryApi;
use crate::engine::{Cycler, Engine};

/// What an observer of a timeline sees after each step.
pub trait Observer: Send {
    /// After step `step`: the engine as it is, the pods that arrived, those bound and the
    /// preemptions of the step.
    fn observe(
        &mut self,
        engine: &Engine,
        step: usize,
        arrived: &[PodInfo],
        bound: &[String],
        preemptions: &[PreemptionRecord],
    );
    /// What the observer found, for the report.
    fn summary(&self) -> serde_json::Value;
    /// The summary as lines for people.
    fn lines(&self) -> Vec<String>;
}

/// Pods arriving over virtual time.
pub struct Timeline {
    /// The length of a step.
    pub step: Duration,
    /// The pods arriving at each step.
    pub arrivals: Vec<Vec<PodInfo>>,
    /// How many steps each pod runs once bound, by `namespace/name`.
    pub runs_for: HashMap<String, usize>,
    /// Who looks at the cluster after each step.
    pub observer: Box<dyn Observer>,
}

/// What a timeline run produced.
pub(super) struct Ran {
    pub drained: Drained,
    pub observer: Box<dyn Observer>,
}

/// Runs `timeline` on `engine` from `clock`.
pub(super) fn run(
    engine: &mut Engine,
    cycler: &mut Cycler,
    api: &MemoryApi,
    clock: &mut Instant,
    timeline: Timeline,
) -> Ran {
    let Timeline { step, arrivals, runs_for, mut observer } = timeline;
    let start = *clock;
    let mut all = Drained::default();
    // When each run of a pod ends, by (key, run): a pod evicted and bound again runs anew.
    let mut ends: BTreeMap<usize, Vec<(String, usize)>> = BTreeMap::new();
    let mut running: HashMap<String, usize> = HashMap::new();
    let mut runs = 0usize;
    let mut pods: HashMap<String, PodInfo> = HashMap::new();
    let mut again: Vec<PodInfo> = Vec::new();
    let steps = arrivals.len();
    let mut arrivals = arrivals.into_iter();
    for k in 0..steps {
        *clock = (*clock).max(start + step * k as u32);
        // Pods that end leave the cluster; they stay among the placements (they ran).
        for (key, run) in ends.remove(&k).unwrap_or_default() {
            if running.get(&key) == Some(&run) {
                running.remove(&key);
                engine.remove_pod(&key, *clock);
            }
        }
        let arrived: Vec<PodInfo> =
            std::mem::take(&mut again).into_iter().chain(arrivals.next().unwrap_or_default()).collect();
        for pod in &arrived {
            pods.insert(pod.key(), pod.clone());
            engine.enqueue(Arc::new(pod.clone()), *clock);
        }
        let d = drain(engine, cycler, api, clock, None, None, None);
        let mut bound = Vec::new();
        for key in d.placements.keys() {
            if !pods.contains_key(key) {
                continue;
            }
            runs += 1;
            running.insert(key.clone(), runs);
            ends.entry(k + runs_for.get(key).copied().unwrap_or(1).max(1)).or_default().push((key.clone(), runs));
            bound.push(key.clone());
        }
        for p in &d.preemptions {
            for v in &p.victims {
                // Evicted (bound in an earlier step or in this one): its controller makes it
                // again.
                running.remove(v);
                if let Some(pod) = pods.get(v) {
                    all.placements.remove(v);
                    again.push(pod.clone());
                }
            }
        }
        observer.observe(engine, k, &arrived, &bound, &d.preemptions);
        all.placements.extend(d.placements);
        all.preemptions.extend(d.preemptions);
        all.latencies.extend(d.latencies);
        for key in &bound {
            all.failures.remove(key);
        }
        all.failures.extend(d.failures.into_iter().filter(|(k, _)| !running.contains_key(k)));
        all.owned = d.owned;
    }
    Ran { drained: all, observer }
}
