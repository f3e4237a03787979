//! The scheduling cycle shared by `run` and `simulate`: pop a pod, refresh the
//! snapshot, run the framework, assume the chosen node.

use std::sync::Arc;
use std::time::{Duration, Instant};

use algorithms::framework::{EquivalenceCache, EvaluateOptions, evaluate, evaluate_cached};
use algorithms::{PodInfo, Profile, Snapshot};
use rand::SeedableRng;
use rand::rngs::SmallRng;

use crate::cache::Cache;
use crate::queue::{QueuedPod, SchedulingQueue};

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
    },
    /// An internal error; retried after backoff.
    Error {
        /// What failed.
        message: String,
    },
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

/// Cache, queue, profiles and the current snapshot.
pub struct Engine {
    /// Profiles by scheduler name.
    pub profiles: Vec<Profile>,
    /// The cache.
    pub cache: Cache,
    /// The queue.
    pub queue: SchedulingQueue,
    snapshot: Snapshot,
    rng: SmallRng,
    /// Reuse node-local results across pods with the same spec (on by default).
    pub use_equivalence_cache: bool,
    caches: Vec<EquivalenceCache>,
    /// Where the next search for feasible nodes starts (kube-scheduler's rotating index,
    /// shared by all profiles); it matters only when a share of nodes is to be found.
    next_start: usize,
}

impl Engine {
    /// An engine with empty cache and queue; `seed` fixes tie-breaking.
    pub fn new(profiles: Vec<Profile>, seed: u64) -> Self {
        Engine {
            profiles,
            cache: Cache::new(),
            queue: SchedulingQueue::default(),
            snapshot: Snapshot::default(),
            rng: SmallRng::seed_from_u64(seed),
            use_equivalence_cache: true,
            caches: Vec::new(),
            next_start: 0,
        }
    }

    /// Whether one of the profiles handles the pod's scheduler name.
    pub fn handles(&self, pod: &PodInfo) -> bool {
        self.profiles.iter().any(|p| p.scheduler_name == pod.scheduler_name)
    }

    /// The current snapshot, refreshed from the cache.
    pub fn snapshot(&mut self) -> &Snapshot {
        self.cache.update_snapshot(&mut self.snapshot);
        &self.snapshot
    }

    /// Schedules the next pod from the queue, if one is ready at `now`.
    pub fn schedule_one(&mut self, now: Instant) -> Option<Cycle> {
        let queued = self.queue.pop(now)?;
        let started = Instant::now();
        let pod: Arc<PodInfo> = queued.pod.clone();
        let key = pod.key();
        self.cache.update_snapshot(&mut self.snapshot);
        let Some(pi) = self.profiles.iter().position(|p| p.scheduler_name == pod.scheduler_name) else {
            self.queue.delete(&key);
            let message = format!("no profile for scheduler name {:?}", pod.scheduler_name);
            return Some(Cycle {
                queued,
                profile: String::new(),
                outcome: Outcome::Error { message },
                duration: started.elapsed(),
            });
        };
        let profile = &self.profiles[pi];
        let profile_name = profile.scheduler_name.clone();
        let opts = EvaluateOptions { start: self.next_start, ..Default::default() };
        let ev = if self.use_equivalence_cache {
            if self.caches.len() < self.profiles.len() {
                self.caches.resize_with(self.profiles.len(), EquivalenceCache::new);
            }
            let cache = &mut self.caches[pi];
            evaluate_cached(profile, &pod, &self.snapshot, &mut self.rng, opts, cache)
        } else {
            evaluate(profile, &pod, &self.snapshot, &mut self.rng, opts)
        };
        let n = self.snapshot.nodes.len();
        if n > 0 {
            self.next_start = (self.next_start + ev.feasible.len() + ev.rejected.len()) % n;
        }
        let outcome = match (ev.selected, &ev.error) {
            (_, Some(err)) => {
                self.queue.error(&key, now);
                Outcome::Error { message: format!("running {} plugin failed: {}", err.plugin, err.message()) }
            }
            (Some(i), None) => {
                let node = self.snapshot.nodes[i].name.clone();
                match self.cache.assume(&pod, &node) {
                    Ok(()) => {
                        self.queue.done(&key);
                        Outcome::Scheduled { node }
                    }
                    Err(e) => {
                        self.queue.error(&key, now);
                        Outcome::Error { message: format!("failed to assume pod: {e}") }
                    }
                }
            }
            (None, None) => {
                let mut plugins: Vec<&'static str> = ev.rejected.iter().map(|(_, s)| s.plugin).collect();
                plugins.sort_unstable();
                plugins.dedup();
                let message = ev.failure_message().unwrap_or_default();
                self.queue.unschedulable(&key, plugins, now);
                Outcome::Unschedulable { message }
            }
        };
        Some(Cycle { queued, profile: profile_name, outcome, duration: started.elapsed() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use algorithms::NodeInfo;
    use algorithms::testing::{NodeBuilder, PodBuilder};

    #[test]
    fn successive_pods_search_from_where_the_last_search_stopped() {
        let mut profile = algorithms::config::default_profile("custom-scheduler");
        // 200 nodes at 50%: each attempt looks for 100 feasible nodes.
        profile.percentage_of_nodes_to_score = Some(50);
        let mut engine = Engine::new(vec![profile], 1);
        for i in 0..200 {
            let node = NodeBuilder::new(&format!("n{i:03}")).build();
            engine.cache.upsert_node(NodeInfo::from_node(&node).unwrap());
        }
        let now = Instant::now();
        for name in ["first", "second", "third"] {
            engine.queue.add(Arc::new(PodBuilder::new(name).scheduler("custom-scheduler").info()), now);
        }
        let mut placed = Vec::new();
        while let Some(cycle) = engine.schedule_one(now) {
            let Outcome::Scheduled { node } = cycle.outcome else { panic!("every pod fits") };
            placed.push(node);
        }
        let index = |n: &str| n.trim_start_matches('n').parse::<usize>().unwrap();
        assert!(index(&placed[0]) < 100, "{placed:?}");
        assert!(index(&placed[1]) >= 100, "{placed:?}");
        assert!(index(&placed[2]) < 100, "{placed:?}");
    }
}
