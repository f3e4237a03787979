//! kube-scheduler's metrics of scheduling cycles, preemption, the cache and the queue's
//! unschedulable pods, with its names, types, labels and buckets.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// `attempts` label: "1" to "14", or "15+".
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AttemptsLabels {
    /// Attempts the pod took.
    pub attempts: String,
}

/// `plugin` and `profile` labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PluginLabels {
    /// The plugin that rejected the pods.
    pub plugin: String,
    /// The scheduler name.
    pub profile: String,
}

/// The families.
#[derive(Clone)]
pub struct CycleMetrics {
    /// `scheduler_scheduling_algorithm_duration_seconds`: filtering and scoring of a cycle.
    pub algorithm_duration: Histogram,
    /// `scheduler_preemption_attempts_total`: PostFilter (preemption) runs.
    pub preemption_attempts: Counter,
    /// `scheduler_preemption_victims`: victims a preemption chose.
    pub preemption_victims: Histogram,
    /// `scheduler_pod_scheduling_attempts`: attempts a bound pod took.
    pub pod_attempts: Histogram,
    /// `scheduler_pod_scheduling_sli_duration_seconds{attempts}`: from entering the queue
    /// to the bind.
    pub sli_duration: Family<AttemptsLabels, Histogram>,
    /// `scheduler_cache_size{type}`: nodes, pods and assumed pods.
    pub cache_size: Family<Vec<(String, String)>, Gauge>,
    /// `scheduler_unschedulable_pods{plugin,profile}`: pods waiting, by rejecting plugin.
    pub unschedulable_pods: Family<PluginLabels, Gauge>,
}

impl CycleMetrics {
    /// The families, registered in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let m = CycleMetrics {
            algorithm_duration: Histogram::new(exponential_buckets(0.001, 2.0, 15)),
            preemption_attempts: Counter::default(),
            preemption_victims: Histogram::new(exponential_buckets(1.0, 2.0, 7)),
            pod_attempts: Histogram::new(exponential_buckets(1.0, 2.0, 5)),
            sli_duration: Family::new_with_constructor(|| Histogram::new(exponential_buckets(0.01, 2.0, 20))),
            cache_size: Family::default(),
            unschedulable_pods: Family::default(),
        };
        registry.register(
            "scheduler_scheduling_algorithm_duration_seconds",
            "Scheduling algorithm latency in seconds",
            m.algorithm_duration.clone(),
        );
        registry.register("scheduler_preemption_attempts", "Total preemption attempts", m.preemption_attempts.clone());
        registry.register(
            "scheduler_preemption_victims",
            "Number of selected preemption victims",
            m.preemption_victims.clone(),
        );
        registry.register(
            "scheduler_pod_scheduling_attempts",
            "Number of attempts to successfully schedule a pod",
            m.pod_attempts.clone(),
        );
        registry.register(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue",
            m.sli_duration.clone(),
        );
        registry.register(
            "scheduler_cache_size",
            "Number of nodes, pods, and assumed (bound) pods in the scheduler cache",
            m.cache_size.clone(),
        );
        registry.register(
            "scheduler_unschedulable_pods",
            "The number of unschedulable pods broken down by plugin name",
            m.unschedulable_pods.clone(),
        );
        m
    }

    /// A pod was bound after `attempts` attempts, `seconds` after it entered the queue.
    pub fn bound(&self, attempts: u32, seconds: f64) {
        self.pod_attempts.observe(f64::from(attempts));
        let label = if attempts >= 15 { "15+".to_string() } else { attempts.max(1).to_string() };
        self.sli_duration.get_or_create(&AttemptsLabels { attempts: label }).observe(seconds);
    }

    /// Sets the cache sizes.
    pub fn cache(&self, nodes: usize, pods: usize, assumed: usize) {
        for (kind, n) in [("nodes", nodes), ("pods", pods), ("assumed_pods", assumed)] {
            let labels = vec![("type".to_string(), kind.to_string())];
            self.cache_size.get_or_create(&labels).set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }

    /// Sets the unschedulable pods by (plugin, profile); pairs seen before and absent now
    /// are set to 0.
    pub fn unschedulable(&self, counts: &[((String, String), usize)]) {
        self.unschedulable_pods.clear();
        for ((plugin, profile), n) in counts {
            let labels = PluginLabels { plugin: plugin.clone(), profile: profile.clone() };
            self.unschedulable_pods.get_or_create(&labels).set(i64::try_from(*n).unwrap_or(i64::MAX));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_render_with_kube_schedulers_names_types_and_labels() {
        let mut registry = Registry::default();
        let m = CycleMetrics::register(&mut registry);
        m.algorithm_duration.observe(0.002);
        m.preemption_attempts.inc();
        m.preemption_victims.observe(3.0);
        m.bound(1, 0.5);
        m.bound(20, 9.0);
        m.cache(3, 10, 2);
        m.unschedulable(&[(("NodeResourcesFit".into(), "custom-scheduler".into()), 4)]);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            "# TYPE scheduler_scheduling_algorithm_duration_seconds histogram",
            "# TYPE scheduler_preemption_attempts counter",
            "scheduler_preemption_attempts_total 1",
            "# TYPE scheduler_preemption_victims histogram",
            "# TYPE scheduler_pod_scheduling_attempts histogram",
            "scheduler_pod_scheduling_sli_duration_seconds_count{attempts=\"1\"} 1",
            "scheduler_pod_scheduling_sli_duration_seconds_count{attempts=\"15+\"} 1",
            "scheduler_cache_size{type=\"assumed_pods\"} 2",
            "scheduler_unschedulable_pods{plugin=\"NodeResourcesFit\",profile=\"custom-scheduler\"} 4",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
        }
        // A plugin that no longer rejects anyone is gone from the gauge.
        m.unschedulable(&[]);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(!text.contains("plugin=\"NodeResourcesFit\""), "{text}");
    }
}
