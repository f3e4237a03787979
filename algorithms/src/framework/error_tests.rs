//! A plugin's error, worded at each extension point as kube-scheduler's framework wraps
//! it: the message the pod's `PodScheduled` condition and FailedScheduling event carry.

use std::sync::Arc;

use rand::SeedableRng;

use super::*;
use crate::builders::{NodeBuilder, PodBuilder, snapshot};

/// Fails with `boom` at one extension point.
struct Failing(&'static str);

impl FilterPlugin for Failing {
    fn name(&self) -> &'static str {
        "Failing"
    }

    fn pre_filter(&self, _: &PodInfo, _: &Snapshot) -> PreFilterOutcome {
        match self.0 {
            "PreFilter" => PreFilterOutcome::reject(Status::error("boom")),
            _ => PreFilterOutcome::run(PluginState::none()),
        }
    }

    fn filter(&self, _: &PluginState, _: &PodInfo, _: &NodeInfo) -> Status {
        if self.0 == "Filter" { Status::error("boom") } else { Status::success() }
    }
}

impl ScorePlugin for Failing {
    fn name(&self) -> &'static str {
        "Failing"
    }

    fn pre_score(&self, _: &PodInfo, _: &Snapshot, _: &[usize]) -> Result<PluginState, Status> {
        if self.0 == "PreScore" { Err(Status::error("boom")) } else { Ok(PluginState::none()) }
    }

    fn score(&self, _: &PluginState, _: &PodInfo, _: &NodeInfo, _: &Snapshot) -> i64 {
        0
    }
}

#[test]
fn a_plugins_error_is_worded_as_kube_schedulers_framework_words_it_at_each_point() {
    let nodes = [NodeBuilder::new("a").build(), NodeBuilder::new("b").build()];
    let snap = snapshot(&nodes, &[]);
    let pod = PodBuilder::new("p").info();
    let cases = [
        ("PreFilter", r#"running PreFilter plugin "Failing": boom"#),
        ("Filter", r#"running "Failing" filter plugin: boom"#),
        ("PreScore", r#"running PreScore plugin "Failing": boom"#),
    ];
    for (point, want) in cases {
        let plugin = Arc::new(Failing(point));
        let profile = Profile {
            filters: vec![plugin.clone()],
            scores: vec![WeightedScore { plugin, weight: 1 }],
            ..Default::default()
        };
        let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
        let ev = evaluate(&profile, &pod, &snap, &mut rng, EvaluateOptions::default());
        assert_eq!(ev.failure_message().as_deref(), Some(want), "{point}");
        assert_eq!(ev.error.map(|e| e.plugin), Some("Failing"), "{point}");
        let mut cache = EquivalenceCache::default();
        let cached = evaluate_cached(&profile, &pod, &snap, &mut rng, EvaluateOptions::default(), &mut cache);
        assert_eq!(cached.failure_message().as_deref(), Some(want), "{point}, with the equivalence cache");
    }
}
