//! NodeName: a pod with `spec.nodeName` fits only that node.

use crate::events::{ClusterEvent, QueueingHint};
use crate::framework::node_hint;
use crate::framework::{FilterPlugin, PluginState, PreFilterOutcome};
use crate::node_info::NodeInfo;
use crate::pod_info::PodInfo;
use crate::snapshot::Snapshot;
use crate::status::Status;

/// Plugin name.
pub const NAME: &str = "NodeName";
/// Reason when the node is not the one the pod names.
pub const ERR_REASON: &str = "node(s) didn't match the requested node name";

/// The NodeName filter.
#[derive(Debug, Default)]
pub struct NodeName;

impl FilterPlugin for NodeName {
    fn name(&self) -> &'static str {
        NAME
    }

    fn node_local(&self) -> bool {
        true
    }

    fn pre_filter(&self, pod: &PodInfo, _: &Snapshot) -> PreFilterOutcome {
        if pod.node_name.is_none() { PreFilterOutcome::skip() } else { PreFilterOutcome::run(PluginState::none()) }
    }

    fn filter(&self, _: &PluginState, pod: &PodInfo, node: &NodeInfo) -> Status {
        match &pod.node_name {
            Some(wanted) if *wanted != node.name => {
                Status::unresolvable(ERR_REASON).with_detail_fn(|| format!("pod asks for node {wanted}"))
            }
            _ => Status::success(),
        }
    }

    /// The node the pod names, once it exists.
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
    fn node_name_table() {
        let cases = [
            ("no node name fits anywhere", PodBuilder::new("p").build(), Code::Success),
            ("matching node name fits", PodBuilder::new("p").node_name("n1").build(), Code::Success),
            (
                "other node name is unresolvable",
                PodBuilder::new("p").node_name("n2").build(),
                Code::UnschedulableAndUnresolvable,
            ),
        ];
        let node = NodeBuilder::new("n1").build();
        for (name, pod, code) in cases {
            let st = filter_one(&NodeName, &pod, &node, &[]);
            assert_eq!(st.code, code, "{name}");
            if code != Code::Success {
                assert_eq!(st.reasons.as_slice(), [ERR_REASON], "{name}");
            }
        }
    }
}
