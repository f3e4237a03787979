//! NodeUnschedulable: cordoned nodes take only pods tolerating the unschedulable taint.

use crate::events::{ClusterEvent, QueueingHint};
use crate::framework::node_hint;
use crate::framework::{FilterPlugin, PluginState};
use crate::node_info::NodeInfo;
use crate::pod_info::PodInfo;
use crate::status::Status;
use crate::taints::{Effect, Taint};

/// Plugin name.
pub const NAME: &str = "NodeUnschedulable";
/// Reason for a cordoned node.
pub const ERR_REASON_UNSCHEDULABLE: &str = "node(s) were unschedulable";
/// The taint a pod must tolerate to land on a cordoned node.
pub const TAINT_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";

/// The NodeUnschedulable filter.
#[derive(Debug, Default)]
pub struct NodeUnschedulable;

impl FilterPlugin for NodeUnschedulable {
    fn name(&self) -> &'static str {
        NAME
    }

    fn node_local(&self) -> bool {
        true
    }

    fn filter(&self, _: &PluginState, pod: &PodInfo, node: &NodeInfo) -> Status {
        if !node.unschedulable {
            return Status::success();
        }
        let taint = Taint { key: TAINT_UNSCHEDULABLE.into(), value: String::new(), effect: Effect::NoSchedule };
        if pod.tolerations.iter().any(|t| t.tolerates(&taint)) {
            return Status::success();
        }
        Status::unresolvable(ERR_REASON_UNSCHEDULABLE).with_detail_fn(|| "node is cordoned (spec.unschedulable)".into())
    }

    /// A node that is not (or no longer) cordoned.
    fn queueing_hint(&self, pod: &PodInfo, event: &ClusterEvent) -> QueueingHint {
        node_hint(self, pod, event).unwrap_or(QueueingHint::Skip)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::{NodeBuilder, PodBuilder, filter_one};
    use crate::status::Code;

    #[test]
    fn node_unschedulable_table() {
        let cases = [
            ("schedulable node", PodBuilder::new("p").build(), false, Code::Success),
            ("cordoned node", PodBuilder::new("p").build(), true, Code::UnschedulableAndUnresolvable),
            (
                "cordoned node, pod tolerates the taint",
                PodBuilder::new("p").toleration(TAINT_UNSCHEDULABLE, "Exists", "", "NoSchedule").build(),
                true,
                Code::Success,
            ),
            (
                "cordoned node, pod tolerates everything",
                PodBuilder::new("p").toleration("", "Exists", "", "").build(),
                true,
                Code::Success,
            ),
        ];
        for (name, pod, cordoned, code) in cases {
            let node = NodeBuilder::new("n").unschedulable(cordoned).build();
            let st = filter_one(&NodeUnschedulable, &pod, &node, &[]);
            assert_eq!(st.code, code, "{name}");
        }
    }
}
