//! The node features (`status.declaredFeatures`) a pod's spec needs, as kube-scheduler
//! v1.36's feature registry infers them for a new pod.

use k8s_openapi::api::core::v1 as core;

/// A container restart rule restarts every container of the pod.
pub const RESTART_ALL_CONTAINERS: &str = "RestartAllContainersOnContainerExits";
/// A host-network pod in a user namespace.
pub const USER_NAMESPACES_HOST_NETWORK: &str = "UserNamespacesHostNetworkSupport";

/// The features a pod with this spec needs, sorted.
pub fn required_by(spec: &core::PodSpec) -> Vec<&'static str> {
    let mut out = Vec::new();
    let restarts_all = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .flat_map(|c| c.restart_policy_rules.iter().flatten())
        .any(|r| r.action == "RestartAllContainers");
    if restarts_all {
        out.push(RESTART_ALL_CONTAINERS);
    }
    if spec.host_network == Some(true) && spec.host_users == Some(false) {
        out.push(USER_NAMESPACES_HOST_NETWORK);
    }
    out.sort_unstable();
    out
}
