//! NodePorts: a pod's host ports must be free on the node.

use crate::events::{ClusterEvent, QueueingHint};
use crate::framework::node_hint;
use crate::framework::{FilterPlugin, PluginState, PreFilterOutcome};
use crate::node_info::NodeInfo;
use crate::pod_info::PodInfo;
use crate::snapshot::Snapshot;
use crate::status::Status;

/// Plugin name.
pub const NAME: &str = "NodePorts";
/// Reason when a host port is taken.
pub const ERR_REASON: &str = "node(s) didn't have free ports for the requested pod ports";

/// The NodePorts filter.
#[derive(Debug, Default)]
pub struct NodePorts;

impl FilterPlugin for NodePorts {
    fn name(&self) -> &'static str {
        NAME
    }

    fn node_local(&self) -> bool {
        true
    }

    fn pre_filter(&self, pod: &PodInfo, _: &Snapshot) -> PreFilterOutcome {
        if pod.host_ports.is_empty() { PreFilterOutcome::skip() } else { PreFilterOutcome::run(PluginState::none()) }
    }

    fn filter(&self, _: &PluginState, pod: &PodInfo, node: &NodeInfo) -> Status {
        for want in &pod.host_ports {
            if node.used_ports.iter().any(|used| used.conflicts(want)) {
                return Status::unschedulable(ERR_REASON)
                    .with_detail_fn(|| format!("host port {}/{} on {} is in use", want.port, want.protocol, want.ip));
            }
        }
        Status::success()
    }

    /// A node with the ports free, or a pod holding one of the ports going away.
    fn queueing_hint(&self, pod: &PodInfo, event: &ClusterEvent) -> QueueingHint {
        if let Some(hint) = node_hint(self, pod, event) {
            return hint;
        }
        match event {
            ClusterEvent::PodDeleted(gone) => QueueingHint::from_bool(
                gone.host_ports.iter().any(|used| pod.host_ports.iter().any(|want| used.conflicts(want))),
            ),
            _ => QueueingHint::Skip,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::{NodeBuilder, PodBuilder, filter_one};
    use crate::status::Code;

    fn pod_with(ports: &[(&str, &str, i32)]) -> PodBuilder {
        let mut b = PodBuilder::new("p");
        for (ip, proto, port) in ports {
            b = b.host_port(ip, proto, *port);
        }
        b
    }

    #[test]
    fn node_ports_table() {
        let cases = [
            ("no ports", vec![], vec![("", "TCP", 80)], Code::Success),
            ("other port", vec![("", "TCP", 8080)], vec![("", "TCP", 80)], Code::Success),
            ("same port and protocol", vec![("", "TCP", 80)], vec![("", "TCP", 80)], Code::Unschedulable),
            ("same port other protocol", vec![("", "UDP", 80)], vec![("", "TCP", 80)], Code::Success),
            ("different ips", vec![("127.0.0.1", "TCP", 80)], vec![("127.0.0.2", "TCP", 80)], Code::Success),
            ("same ip", vec![("127.0.0.1", "TCP", 80)], vec![("127.0.0.1", "TCP", 80)], Code::Unschedulable),
            ("wanted all ips", vec![("0.0.0.0", "TCP", 80)], vec![("127.0.0.1", "TCP", 80)], Code::Unschedulable),
            ("used on all ips", vec![("127.0.0.1", "TCP", 80)], vec![("", "TCP", 80)], Code::Unschedulable),
            ("default protocol is tcp", vec![("", "", 80)], vec![("", "TCP", 80)], Code::Unschedulable),
        ];
        for (name, want, used, code) in cases {
            let existing = pod_with(&used).build();
            let node = NodeBuilder::new("n").build();
            let st = filter_one(&NodePorts, &pod_with(&want).build(), &node, &[existing]);
            assert_eq!(st.code, code, "{name}");
            if code != Code::Success {
                assert_eq!(st.reasons.as_slice(), [ERR_REASON]);
            }
        }
    }
}
