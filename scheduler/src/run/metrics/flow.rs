//! kube-scheduler's metrics of pods flowing through the queue, event handling, plugin
//! evaluations, and the binding and preemption work in flight, with its names, types,
//! labels and buckets.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::queue::QueueObserver;

/// `queue` and `event` labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct IncomingLabels {
    /// active, backoff or unschedulable.
    pub queue: String,
    /// What brought the pod: PodAdd, ScheduleAttemptFailure, BackoffComplete, a cluster
    /// event (NodeAdd, AssignedPodDelete, ...).
    pub event: String,
}

/// `event` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EventLabels {
    /// The cluster event.
    pub event: String,
}

/// `operation` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OperationLabels {
    /// binding or preemption.
    pub operation: String,
}

/// `plugin`, `extension_point` and `profile` labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EvaluationLabels {
    /// The plugin.
    pub plugin: String,
    /// PreFilter, Filter, PreScore or Score.
    pub extension_point: String,
    /// The scheduler name.
    pub profile: String,
}

/// `result` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// success or error.
    pub result: String,
}

/// The families.
#[derive(Clone)]
pub struct FlowMetrics {
    /// `scheduler_queue_incoming_pods_total{queue,event}`.
    pub incoming: Family<IncomingLabels, Counter>,
    /// `scheduler_event_handling_duration_seconds{event}`.
    pub event_handling: Family<EventLabels, Histogram>,
    /// `scheduler_goroutines{operation}`: binding cycles and preemptions in flight.
    pub in_flight: Family<OperationLabels, Gauge>,
    /// `scheduler_plugin_evaluation_total{plugin,extension_point,profile}`.
    pub plugin_evaluation: Family<EvaluationLabels, Counter>,
    /// `scheduler_preemption_goroutines_duration_seconds{result}`: a preemption's API calls.
    pub preemption_duration: Family<ResultLabels, Histogram>,
    /// `scheduler_preemption_goroutines_execution_total{result}`.
    pub preemption_executions: Family<ResultLabels, Counter>,
    /// `scheduler_inflight_events{event}`: events kept for pods in their cycle.
    pub inflight_events: Family<EventLabels, Gauge>,
    inflight_seen: std::sync::Arc<std::sync::Mutex<std::collections::BTreeSet<&'static str>>>,
    evaluation_counters: std::sync::Arc<std::sync::Mutex<EvaluationCounters>>,
}

/// `scheduler_plugin_evaluation_total`'s counters by profile, then extension point and plugin.
type EvaluationCounters =
    std::collections::HashMap<String, std::collections::HashMap<(&'static str, &'static str), Counter>>;

impl FlowMetrics {
    /// The families, registered in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let m = FlowMetrics {
            incoming: Family::default(),
            event_handling: Family::new_with_constructor(|| Histogram::new(exponential_buckets(0.0001, 2.0, 12))),
            in_flight: Family::default(),
            plugin_evaluation: Family::default(),
            preemption_duration: Family::new_with_constructor(|| Histogram::new(exponential_buckets(0.01, 2.0, 20))),
            preemption_executions: Family::default(),
            inflight_events: Family::default(),
            inflight_seen: Default::default(),
            evaluation_counters: Default::default(),
        };
        registry.register(
            "scheduler_inflight_events",
            "Number of events kept for pods in their scheduling cycle, and of such pods (PodPopped)",
            m.inflight_events.clone(),
        );
        registry.register(
            "scheduler_queue_incoming_pods",
            "Number of pods added to scheduling queues by event and queue type",
            m.incoming.clone(),
        );
        registry.register(
            "scheduler_event_handling_duration_seconds",
            "Event handling latency in seconds",
            m.event_handling.clone(),
        );
        registry.register(
            "scheduler_goroutines",
            "Number of binding cycles and preemptions in flight, by the operation",
            m.in_flight.clone(),
        );
        registry.register(
            "scheduler_plugin_evaluation",
            "Number of attempts to schedule pods by each plugin and the extension point (PreFilter, Filter, PreScore and Score)",
            m.plugin_evaluation.clone(),
        );
        registry.register(
            "scheduler_preemption_goroutines_duration_seconds",
            "Duration in seconds for running the API calls of a preemption",
            m.preemption_duration.clone(),
        );
        registry.register(
            "scheduler_preemption_goroutines_execution",
            "Number of preemptions whose API calls ran, by the result",
            m.preemption_executions.clone(),
        );
        m
    }

    /// Counts one work item in flight until the returned guard is dropped.
    pub fn start(&self, operation: &str) -> InFlight {
        let g = self.in_flight.get_or_create(&OperationLabels { operation: operation.into() }).clone();
        g.inc();
        InFlight(g)
    }

    /// Sets the in-flight event gauges; labels set before and not listed now drop to zero.
    pub fn in_flight_events(&self, counts: &[(&'static str, usize)]) {
        let mut seen = self.inflight_seen.lock().unwrap_or_else(|e| e.into_inner());
        for label in seen.iter() {
            if !counts.iter().any(|(l, _)| l == label) {
                self.inflight_events.get_or_create(&EventLabels { event: (*label).into() }).set(0);
            }
        }
        for (label, n) in counts {
            self.inflight_events.get_or_create(&EventLabels { event: (*label).into() }).set(*n as i64);
            seen.insert(label);
        }
    }

    /// Records a preemption's API calls.
    pub fn preempted(&self, ok: bool, seconds: f64) {
        let labels = ResultLabels { result: if ok { "success" } else { "error" }.into() };
        self.preemption_duration.get_or_create(&labels).observe(seconds);
        self.preemption_executions.get_or_create(&labels).inc();
    }

    /// Counts one evaluation of each plugin at an extension point (the counters are
    /// looked up without building labels after their first use).
    pub fn evaluated(&self, profile: &str, extension_point: &'static str, plugins: impl Iterator<Item = &'static str>) {
        let mut cache = self.evaluation_counters.lock().unwrap_or_else(|e| e.into_inner());
        let by_plugin = match cache.get_mut(profile) {
            Some(m) => m,
            None => cache.entry(profile.to_string()).or_default(),
        };
        for plugin in plugins {
            let counter = by_plugin.entry((extension_point, plugin)).or_insert_with(|| {
                let labels = EvaluationLabels {
                    plugin: plugin.into(),
                    extension_point: extension_point.into(),
                    profile: profile.into(),
                };
                self.plugin_evaluation.get_or_create(&labels).clone()
            });
            counter.inc();
        }
    }
}

/// A work item in flight (`scheduler_goroutines`), counted down when dropped.
pub struct InFlight(Gauge);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl QueueObserver for FlowMetrics {
    fn incoming(&self, event: &'static str, queue: &'static str) {
        self.incoming.get_or_create(&IncomingLabels { queue: queue.into(), event: event.into() }).inc();
    }

    fn event_handled(&self, event: &'static str, seconds: f64) {
        self.event_handling.get_or_create(&EventLabels { event: event.into() }).observe(seconds);
    }
}
