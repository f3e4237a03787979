//! TaintToleration: hard taints filter, PreferNoSchedule taints lower the score.

use crate::events::{ClusterEvent, QueueingHint};
use crate::framework::node_hint;
use crate::framework::{FilterPlugin, PluginState, ScorePlugin, default_normalize};
use crate::node_info::NodeInfo;
use crate::pod_info::PodInfo;
use crate::snapshot::Snapshot;
use crate::status::Status;
use crate::taints::{Effect, Toleration, find_untolerated};

/// Plugin name.
pub const NAME: &str = "TaintToleration";
/// Reason when a NoSchedule or NoExecute taint is not tolerated.
pub const ERR_REASON_NOT_MATCH: &str = "node(s) had untolerated taint(s)";

/// The TaintToleration filter and score.
#[derive(Debug, Default)]
pub struct TaintToleration;

impl FilterPlugin for TaintToleration {
    fn name(&self) -> &'static str {
        NAME
    }

    fn node_local(&self) -> bool {
        true
    }

    fn filter(&self, _: &PluginState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let hard = |t: &crate::taints::Taint| matches!(t.effect, Effect::NoSchedule | Effect::NoExecute);
        match find_untolerated(&node.taints, &pod.tolerations, hard) {
            None => Status::success(),
            Some(t) => {
                Status::unresolvable(ERR_REASON_NOT_MATCH).with_detail_fn(|| format!("taint {t} is not tolerated"))
            }
        }
    }
    /// A node whose taints the pod tolerates, new or no longer tainted against it.
    fn queueing_hint(&self, pod: &PodInfo, event: &ClusterEvent) -> QueueingHint {
        node_hint(self, pod, event).unwrap_or(QueueingHint::Skip)
    }
}

struct PreferState {
    tolerations: Vec<Toleration>,
}

impl ScorePlugin for TaintToleration {
    fn name(&self) -> &'static str {
        NAME
    }

    fn node_local(&self) -> bool {
        true
    }

    fn pre_score(&self, pod: &PodInfo, _: &Snapshot, _: &[usize]) -> Result<PluginState, Status> {
        let tolerations = pod
            .tolerations
            .iter()
            .filter(|t| matches!(t.effect, None | Some(Effect::PreferNoSchedule)))
            .cloned()
            .collect();
        Ok(PluginState::new(PreferState { tolerations }))
    }

    fn score(&self, state: &PluginState, _: &PodInfo, node: &NodeInfo, _: &Snapshot) -> i64 {
        let tolerations = state.get::<PreferState>().map(|s| s.tolerations.as_slice()).unwrap_or(&[]);
        node.taints
            .iter()
            .filter(|t| t.effect == Effect::PreferNoSchedule)
            .filter(|t| !tolerations.iter().any(|tol| tol.tolerates(t)))
            .count() as i64
    }

    fn normalize(&self, _: &PluginState, scores: &mut [i64]) {
        default_normalize(true, scores);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::{NodeBuilder, PodBuilder, filter_one, score_all, snapshot};
    use crate::status::Code;

    #[test]
    fn filter_table() {
        let cases = [
            (
                "untainted node fits a pod without tolerations",
                NodeBuilder::new("n"),
                PodBuilder::new("p"),
                Code::Success,
            ),
            (
                "NoSchedule taint without toleration",
                NodeBuilder::new("n").taint("dedicated", "user1", "NoSchedule"),
                PodBuilder::new("p"),
                Code::UnschedulableAndUnresolvable,
            ),
            (
                "tolerated by Equal with the same value",
                NodeBuilder::new("n").taint("dedicated", "user1", "NoSchedule"),
                PodBuilder::new("p").toleration("dedicated", "Equal", "user1", "NoSchedule"),
                Code::Success,
            ),
            (
                "Equal with another value does not tolerate",
                NodeBuilder::new("n").taint("dedicated", "user1", "NoSchedule"),
                PodBuilder::new("p").toleration("dedicated", "Equal", "user2", "NoSchedule"),
                Code::UnschedulableAndUnresolvable,
            ),
            (
                "Exists tolerates any value",
                NodeBuilder::new("n").taint("foo", "bar", "NoSchedule"),
                PodBuilder::new("p").toleration("foo", "Exists", "", "NoSchedule"),
                Code::Success,
            ),
            (
                "toleration of another effect does not tolerate",
                NodeBuilder::new("n").taint("foo", "bar", "NoSchedule"),
                PodBuilder::new("p").toleration("foo", "Equal", "bar", "PreferNoSchedule"),
                Code::UnschedulableAndUnresolvable,
            ),
            (
                "PreferNoSchedule taints never filter",
                NodeBuilder::new("n").taint("foo", "bar", "PreferNoSchedule"),
                PodBuilder::new("p"),
                Code::Success,
            ),
            (
                "NoExecute taints filter",
                NodeBuilder::new("n").taint("foo", "bar", "NoExecute"),
                PodBuilder::new("p"),
                Code::UnschedulableAndUnresolvable,
            ),
            (
                "one of two hard taints untolerated",
                NodeBuilder::new("n").taint("a", "1", "NoSchedule").taint("b", "2", "NoExecute"),
                PodBuilder::new("p").toleration("a", "Equal", "1", ""),
                Code::UnschedulableAndUnresolvable,
            ),
        ];
        for (name, node, pod, code) in cases {
            let st = filter_one(&TaintToleration, &pod.build(), &node.build(), &[]);
            assert_eq!(st.code, code, "{name}");
            if code != Code::Success {
                assert_eq!(st.reasons.as_slice(), [ERR_REASON_NOT_MATCH], "{name}");
            }
        }
    }

    #[test]
    fn score_table() {
        // Nodes with 0, 1 and 2 untolerated PreferNoSchedule taints.
        let nodes = vec![
            NodeBuilder::new("clean").build(),
            NodeBuilder::new("one").taint("a", "x", "PreferNoSchedule").build(),
            NodeBuilder::new("two").taint("a", "x", "PreferNoSchedule").taint("b", "y", "PreferNoSchedule").build(),
        ];
        let snap = snapshot(&nodes, &[]);
        let cases = [
            ("no tolerations", PodBuilder::new("p"), vec![100, 50, 0]),
            ("tolerates a", PodBuilder::new("p").toleration("a", "Equal", "x", "PreferNoSchedule"), vec![100, 100, 0]),
            (
                "tolerates both with empty effect",
                PodBuilder::new("p").toleration("a", "Exists", "", "").toleration("b", "Exists", "", ""),
                vec![100, 100, 100],
            ),
            (
                "NoSchedule toleration does not count for scoring",
                PodBuilder::new("p").toleration("a", "Exists", "", "NoSchedule"),
                vec![100, 50, 0],
            ),
        ];
        for (name, pod, want) in cases {
            assert_eq!(score_all(&TaintToleration, &pod.build(), &snap), want, "{name}");
        }
    }
}
