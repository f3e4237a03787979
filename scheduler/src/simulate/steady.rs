//! scheduler_perf's steady state: a fixed number of measured pods pending at a time;
//! each pod is deleted as soon as it is bound (its ResourceClaims with it, as the
//! garbage collector removes the claims a pod owns) and the next one is created, so
//! the cluster stays at the same level of use.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use algorithms::PodInfo;
use algorithms::events::ClusterEvent;
use algorithms::plugins::registry::OWNERS;

use crate::engine::Engine;

/// A steady stream of measured pods.
pub(super) struct Steady {
    /// Pods still to be created, in order.
    waiting: VecDeque<PodInfo>,
}

impl Steady {
    /// Enqueues the first `in_flight` of `pods`; the rest wait for bound pods to go.
    pub(super) fn start(engine: &mut Engine, pods: Vec<PodInfo>, in_flight: usize, clock: Instant) -> Self {
        let mut waiting: VecDeque<PodInfo> = pods.into();
        for pod in waiting.drain(..in_flight.min(waiting.len())).collect::<Vec<_>>() {
            engine.enqueue(Arc::new(pod), clock);
        }
        Steady { waiting }
    }

    /// Deletes the bound pod `pod` and the claims it owns, then creates the next pod.
    pub(super) fn bound(&mut self, engine: &mut Engine, pod: &PodInfo, clock: Instant) {
        engine.remove_pod(&pod.key(), clock);
        // The garbage collector deletes what the pod owns (its claims).
        for owner in OWNERS {
            for event in owner.pod_deleted(engine.cache.objects_mut(), pod) {
                engine.on_event(ClusterEvent::Object(event), clock);
            }
        }
        if let Some(next) = self.waiting.pop_front() {
            engine.enqueue(Arc::new(next), clock);
        }
    }

    /// Pods not created yet.
    pub(super) fn remaining(&self) -> usize {
        self.waiting.len()
    }
}
