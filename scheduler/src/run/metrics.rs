//! Prometheus metrics with kube-scheduler's names.

mod cycle;
mod flow;

pub use cycle::{AttemptsLabels, CycleMetrics, PluginLabels};
pub use flow::{FlowMetrics, InFlight};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use std::fmt::Write as _;

use algorithms::owners::Sample;

use crate::engine::timing::{Ended, Point};

/// `result` and `profile` labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AttemptLabels {
    /// scheduled, unschedulable or error.
    pub result: String,
    /// The scheduler name.
    pub profile: String,
}

/// `queue` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabels {
    /// active, backoff, unschedulable or gated.
    pub queue: String,
}

/// Extension point labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ExtensionLabels {
    /// PreFilter, PostFilter, Reserve, Permit, PreBind or Bind.
    pub extension_point: String,
    /// Success or Error.
    pub status: String,
    /// The scheduler name.
    pub profile: String,
}

/// All metrics and their registry.
pub struct Metrics {
    registry: Registry,
    /// `scheduler_schedule_attempts_total`.
    pub attempts: Family<AttemptLabels, Counter>,
    /// `scheduler_scheduling_attempt_duration_seconds`.
    pub attempt_duration: Family<AttemptLabels, Histogram>,
    /// `scheduler_pending_pods`.
    pub pending: Family<QueueLabels, Gauge>,
    /// `scheduler_framework_extension_point_duration_seconds`: PreFilter, PostFilter,
    /// Reserve, Permit, PreBind and Bind (Filter and Score run fused per node and are
    /// covered by the algorithm duration).
    pub bind_duration: Family<ExtensionLabels, Histogram>,
    /// `leader_election_master_status`.
    pub leader: Gauge,
    /// The event pipeline's counters (`scheduler_events_*`).
    pub events: super::events::Stats,
    /// Cycles, preemption, the cache and unschedulable pods.
    pub cycle: CycleMetrics,
    /// The queue's incoming pods, event handling, plugin evaluations, work in flight.
    pub flow: FlowMetrics,
    extension_histograms: std::sync::Mutex<ExtensionHistograms>,
}

/// The extension point histograms by profile, then extension point and status.
type ExtensionHistograms = std::collections::HashMap<String, std::collections::HashMap<(Point, Ended), Histogram>>;

fn buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.0, 18))
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let attempts = Family::<AttemptLabels, Counter>::default();
        let attempt_duration = Family::<AttemptLabels, Histogram>::new_with_constructor(buckets);
        let pending = Family::<QueueLabels, Gauge>::default();
        let bind_duration = Family::<ExtensionLabels, Histogram>::new_with_constructor(buckets);
        let leader = Gauge::default();
        registry.register(
            "scheduler_schedule_attempts",
            "Number of attempts to schedule pods, by the result",
            attempts.clone(),
        );
        registry.register(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            attempt_duration.clone(),
        );
        registry.register("scheduler_pending_pods", "Number of pending pods, by the queue type", pending.clone());
        registry.register(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point",
            bind_duration.clone(),
        );
        registry.register("leader_election_master_status", "1 while this replica leads, else 0", leader.clone());
        let events = super::events::Stats::default();
        registry.register(
            "scheduler_events_dropped",
            "Events not written, by the reason: queue_full, rate_limited (per object and reason), write_failed",
            events.dropped.clone(),
        );
        registry.register("scheduler_events_written", "Event writes that succeeded", events.written.clone());
        registry.register(
            "scheduler_events_retried",
            "Event write attempts that failed and were retried",
            events.retried.clone(),
        );
        registry.register(
            "scheduler_events_cache_size",
            "Event keys held for aggregation into series (bounded)",
            events.cache_size.clone(),
        );
        let cycle = CycleMetrics::register(&mut registry);
        let flow = FlowMetrics::register(&mut registry);
        Metrics {
            registry,
            attempts,
            attempt_duration,
            pending,
            bind_duration,
            leader,
            events,
            cycle,
            flow,
            extension_histograms: Default::default(),
        }
    }
}

impl Metrics {
    /// Records a scheduling attempt.
    pub fn attempt(&self, result: &str, profile: &str, seconds: f64) {
        let labels = AttemptLabels { result: result.into(), profile: profile.into() };
        self.attempts.get_or_create(&labels).inc();
        self.attempt_duration.get_or_create(&labels).observe(seconds);
    }

    /// Sets the queue gauges.
    pub fn queues(&self, l: crate::queue::QueueLengths) {
        let counts =
            [("active", l.active), ("backoff", l.backoff), ("unschedulable", l.unschedulable), ("gated", l.gated)];
        for (q, n) in counts {
            self.pending.get_or_create(&QueueLabels { queue: q.into() }).set(n as i64);
        }
    }

    /// Records a bind call.
    pub fn bind(&self, ok: bool, profile: &str, seconds: f64) {
        self.extension_point(Point::Bind, Ended::ok(ok), profile, seconds);
    }

    /// Records one run of an extension point's plugins, with the status code it ended in
    /// (the histograms are looked up without building labels after their first use).
    pub fn extension_point(&self, point: Point, ended: Ended, profile: &str, seconds: f64) {
        let mut cache = self.extension_histograms.lock().unwrap_or_else(|e| e.into_inner());
        let by_point = match cache.get_mut(profile) {
            Some(m) => m,
            None => cache.entry(profile.to_string()).or_default(),
        };
        let h = by_point.entry((point, ended)).or_insert_with(|| {
            let labels = ExtensionLabels {
                extension_point: point.as_str().into(),
                status: ended.as_str().into(),
                profile: profile.into(),
            };
            self.bind_duration.get_or_create(&labels).clone()
        });
        h.observe(seconds);
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        self.render_with(&[])
    }

    /// The Prometheus text exposition with the gauges of the owners of cluster objects
    /// (quotas), read at this scrape.
    pub fn render_with(&self, owned: &[Sample]) -> String {
        let mut out = String::new();
        if encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        if owned.is_empty() {
            return out;
        }
        let end = out.rfind("# EOF").unwrap_or(out.len());
        let mut gauges = String::new();
        let mut families: Vec<&'static str> = Vec::new();
        for s in owned {
            if !families.contains(&s.family) {
                families.push(s.family);
                let _ = writeln!(gauges, "# HELP {} {}\n# TYPE {} gauge", s.family, s.help, s.family);
                for t in owned.iter().filter(|t| t.family == s.family) {
                    let labels: Vec<String> = t.labels.iter().map(|(k, v)| format!("{k}=\"{}\"", escape(v))).collect();
                    let _ = writeln!(gauges, "{}{{{}}} {}", t.family, labels.join(","), t.value);
                }
            }
        }
        out.insert_str(end, &gauges);
        out
    }
}

/// A label value as the text exposition writes it.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_gauges_join_the_exposition_before_its_end() {
        let sample = |quota: &str, value| Sample {
            family: "scheduler_elastic_quota_used",
            help: "Requests of the quota's placed pods, by resource",
            labels: vec![("quota", quota.to_string()), ("resource", "cpu".to_string())],
            value,
        };
        let text = Metrics::default().render_with(&[sample("a/a", 3.0), sample("b/\"b\"", 0.5)]);
        let tail = "# HELP scheduler_elastic_quota_used Requests of the quota's placed pods, by resource\n\
                    # TYPE scheduler_elastic_quota_used gauge\n\
                    scheduler_elastic_quota_used{quota=\"a/a\",resource=\"cpu\"} 3\n\
                    scheduler_elastic_quota_used{quota=\"b/\\\"b\\\"\",resource=\"cpu\"} 0.5\n\
                    # EOF\n";
        assert!(text.ends_with(tail), "{text}");
        assert_eq!(text.matches("# TYPE scheduler_elastic_quota_used").count(), 1);
    }
}
