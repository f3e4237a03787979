//! NodeDeclaredFeatures: a pod that needs a node feature (inferred from its spec) runs only
//! on nodes that declare it in `status.declaredFeatures`.
//!
//! kube-scheduler v1.36 (gate `NodeDeclaredFeatures`, beta, on) knows five features; two of
//! them can be required by a new pod: `RestartAllContainersOnContainerExits` (a container
//! or init container with a `restartPolicyRules` entry whose action is
//! `RestartAllContainers`) and `UserNamespacesHostNetworkSupport` (`hostNetwork: true` with
//! `hostUsers: false`). The other three concern in-place updates of a running pod only.
//! A node without declared features fails every pod that needs one; names a node declares
//! that the scheduler does not know are ignored.

use crate::events::{ClusterEvent, QueueingHint};
use crate::framework::node_hint;
use crate::framework::{FilterPlugin, PluginState};
pub use crate::node_features::{RESTART_ALL_CONTAINERS, USER_NAMESPACES_HOST_NETWORK, required_by};
use crate::node_info::NodeInfo;
use crate::pod_info::PodInfo;
use crate::status::Status;

/// Plugin name.
pub const NAME: &str = "NodeDeclaredFeatures";
/// Reason for a node that lacks a feature the pod needs.
pub const ERR_REASON_FEATURES: &str = "node(s) didn't match Pod's required features";
/// The NodeDeclaredFeatures filter; with the gate off it passes every pod.
#[derive(Debug, Clone, Copy)]
pub struct NodeDeclaredFeatures {
    /// The `NodeDeclaredFeatures` gate.
    pub enabled: bool,
}

impl FilterPlugin for NodeDeclaredFeatures {
    fn name(&self) -> &'static str {
        NAME
    }

    fn node_local(&self) -> bool {
        true
    }

    fn filter(&self, _: &PluginState, pod: &PodInfo, node: &NodeInfo) -> Status {
        if !self.enabled || pod.required_features.is_empty() {
            return Status::success();
        }
        let missing: Vec<&str> = pod
            .required_features
            .iter()
            .copied()
            .filter(|f| node.declared_features.binary_search_by(|d| d.as_str().cmp(f)).is_err())
            .collect();
        if missing.is_empty() {
            return Status::success();
        }
        Status::unresolvable(ERR_REASON_FEATURES)
            .with_detail_fn(|| format!("node does not declare {}", missing.join(", ")))
    }

    /// A node added with (or updated to) the features the pod needs.
    fn queueing_hint(&self, pod: &PodInfo, event: &ClusterEvent) -> QueueingHint {
        node_hint(self, pod, event).unwrap_or(QueueingHint::Skip)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::{NodeBuilder, PodBuilder, filter_one};
    use crate::status::Code;
    use k8s_openapi::api::core::v1 as core;

    fn restart_all(mut pod: core::Pod) -> core::Pod {
        let spec = pod.spec.as_mut().expect("spec");
        spec.containers[0].restart_policy_rules = Some(vec![core::ContainerRestartRule {
            action: "RestartAllContainers".into(),
            exit_codes: Some(core::ContainerRestartRuleOnExitCodes { operator: "In".into(), values: Some(vec![42]) }),
        }]);
        pod
    }

    fn host_network_user_ns(mut pod: core::Pod, host_users: Option<bool>) -> core::Pod {
        let spec = pod.spec.as_mut().expect("spec");
        spec.host_network = Some(true);
        spec.host_users = host_users;
        pod
    }

    fn declaring(features: &[&str]) -> core::Node {
        let mut node = NodeBuilder::new("n").build();
        let status = node.status.get_or_insert_with(Default::default);
        status.declared_features = Some(features.iter().map(|f| f.to_string()).collect());
        node
    }

    #[test]
    fn required_features_come_from_the_spec() {
        let plain = PodBuilder::new("p").build();
        let cases: [(&str, core::Pod, Vec<&str>); 5] = [
            ("no feature", plain.clone(), vec![]),
            ("restart rule restarting all containers", restart_all(plain.clone()), vec![RESTART_ALL_CONTAINERS]),
            (
                "host network in a user namespace",
                host_network_user_ns(plain.clone(), Some(false)),
                vec![USER_NAMESPACES_HOST_NETWORK],
            ),
            ("host network, hostUsers unset", host_network_user_ns(plain.clone(), None), vec![]),
            (
                "both",
                host_network_user_ns(restart_all(plain), Some(false)),
                vec![RESTART_ALL_CONTAINERS, USER_NAMESPACES_HOST_NETWORK],
            ),
        ];
        for (name, pod, want) in cases {
            assert_eq!(required_by(pod.spec.as_ref().expect("spec")), want, "{name}");
        }
    }

    #[test]
    fn node_declared_features_table() {
        let plain = PodBuilder::new("p").build();
        let both = host_network_user_ns(restart_all(plain.clone()), Some(false));
        let cases = [
            (
                "pod needs nothing, node declares nothing",
                plain.clone(),
                NodeBuilder::new("n").build(),
                true,
                Code::Success,
            ),
            (
                "node declares the feature",
                restart_all(plain.clone()),
                declaring(&[RESTART_ALL_CONTAINERS]),
                true,
                Code::Success,
            ),
            (
                "node declares another feature",
                restart_all(plain.clone()),
                declaring(&[USER_NAMESPACES_HOST_NETWORK]),
                true,
                Code::UnschedulableAndUnresolvable,
            ),
            (
                "node declares more than the pod needs",
                restart_all(plain.clone()),
                declaring(&["SomethingNew", RESTART_ALL_CONTAINERS, USER_NAMESPACES_HOST_NETWORK]),
                true,
                Code::Success,
            ),
            (
                "node declares no features",
                restart_all(plain.clone()),
                NodeBuilder::new("n").build(),
                true,
                Code::UnschedulableAndUnresolvable,
            ),
            (
                "node declares some of the features the pod needs",
                both.clone(),
                declaring(&[RESTART_ALL_CONTAINERS]),
                true,
                Code::UnschedulableAndUnresolvable,
            ),
            ("gate off", both, NodeBuilder::new("n").build(), false, Code::Success),
        ];
        for (name, pod, node, enabled, code) in cases {
            let st = filter_one(&NodeDeclaredFeatures { enabled }, &pod, &node, &[]);
            assert_eq!(st.code, code, "{name}");
            if code != Code::Success {
                assert_eq!(st.reasons.iter().map(|r| r.as_ref()).collect::<Vec<_>>(), [ERR_REASON_FEATURES], "{name}");
            }
        }
    }

    #[test]
    fn a_node_that_comes_to_declare_the_feature_requeues_the_pod() {
        let pod = PodInfo::from_pod(&restart_all(PodBuilder::new("p").build())).expect("pod");
        let plugin = NodeDeclaredFeatures { enabled: true };
        let without = std::sync::Arc::new(NodeInfo::from_node(&NodeBuilder::new("n").build()).expect("node"));
        let with = std::sync::Arc::new(NodeInfo::from_node(&declaring(&[RESTART_ALL_CONTAINERS])).expect("node"));
        let updated = ClusterEvent::NodeUpdated { old: without.clone(), new: with.clone() };
        assert_eq!(plugin.queueing_hint(&pod, &updated), QueueingHint::Queue);
        let unchanged = ClusterEvent::NodeUpdated { old: with.clone(), new: with.clone() };
        assert_eq!(plugin.queueing_hint(&pod, &unchanged), QueueingHint::Skip);
        assert_eq!(plugin.queueing_hint(&pod, &ClusterEvent::NodeAdded(with)), QueueingHint::Queue);
        assert_eq!(plugin.queueing_hint(&pod, &ClusterEvent::NodeAdded(without)), QueueingHint::Skip);
    }
}
