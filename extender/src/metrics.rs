//! Prometheus metrics of the extender's HTTP verbs.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of a request counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// filter, prioritize, bind or preempt.
    pub verb: String,
    /// HTTP status code.
    pub code: String,
}

/// Labels of a latency histogram.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerbLabels {
    /// filter, prioritize, bind or preempt.
    pub verb: String,
}

/// The extender's metrics and their registry.
pub struct Metrics {
    registry: Registry,
    /// Requests by verb and status code.
    pub requests: Family<RequestLabels, Counter>,
    /// Request latency by verb.
    pub latency: Family<VerbLabels, Histogram>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        let latency = Family::<VerbLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0001, 2.0, 16))
        });
        registry.register("extender_requests", "Extender requests by verb and status code", requests.clone());
        registry.register("extender_request_duration_seconds", "Extender request latency by verb", latency.clone());
        Metrics { registry, requests, latency }
    }
}

impl Metrics {
    /// Records one request.
    pub fn observe(&self, verb: &str, code: u16, seconds: f64) {
        self.requests.get_or_create(&RequestLabels { verb: verb.into(), code: code.to_string() }).inc();
        self.latency.get_or_create(&VerbLabels { verb: verb.into() }).observe(seconds);
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}
