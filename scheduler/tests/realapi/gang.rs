//! Helpers of the gang tests: where a group's pods are bound, and what their
//! `PodScheduled` conditions say.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject};
use kube::discovery::pinned_kind;
use testing::api::{self, node_of};

use super::Plane;

/// The test namespace.
pub const NS: &str = "default";

/// Where each pod whose name starts with `prefix` is bound (unbound ones left out).
pub async fn bound(client: &kube::Client, prefix: &str) -> BTreeMap<String, String> {
    api::pods(client, NS)
        .await
        .unwrap()
        .iter()
        .filter(|p| p.metadata.name.as_deref().unwrap_or("").starts_with(prefix))
        .filter_map(|p| Some((p.metadata.name.clone()?, node_of(p)?.to_string())))
        .collect()
}

/// The message of the pod's `PodScheduled` condition, as the scheduler last wrote it.
pub async fn scheduled_condition(client: &kube::Client, name: &str) -> Option<String> {
    let pod = Api::<Pod>::namespaced(client.clone(), NS).get(name).await.ok()?;
    let conditions = pod.status?.conditions?;
    conditions.into_iter().find(|c| c.type_ == "PodScheduled")?.message
}

/// A control plane serving Kubernetes' alpha PodGroup (`scheduling.k8s.io/v1alpha2`, the
/// GenericWorkload and GangScheduling gates on, and `extra_gates`), and its PodGroups in
/// the test namespace; `None` when the binaries are not configured.
pub async fn kube_pod_group_plane(test: &str, extra_gates: &str) -> Option<(Plane, Api<DynamicObject>)> {
    let opts = testing::ControlPlaneOptions {
        apiserver_args: vec![
            format!("--feature-gates=GenericWorkload=true,GangScheduling=true{extra_gates}"),
            "--runtime-config=scheduling.k8s.io/v1alpha2=true".into(),
        ],
    };
    let p = super::plane_with(test, opts).await?;
    let client = p.client.clone();
    let ar = api::wait_for("the scheduling.k8s.io PodGroup kind served", Duration::from_secs(30), || async {
        pinned_kind(&client, &scheduler::run::pod_groups::kube_gvk()).await.ok().map(|(ar, _)| ar)
    })
    .await;
    let groups = Api::namespaced_with(client, NS, &ar);
    Some((p, groups))
}

/// Applies deploy/crds' PodGroup CRD (scheduler-plugins') and waits until the kind is
/// served.
pub async fn install_pod_group_crd(client: &kube::Client) -> kube::discovery::ApiResource {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let text = std::fs::read_to_string("../deploy/crds/podgroups.scheduling.x-k8s.io.yaml").unwrap();
    let crd: CustomResourceDefinition = serde_yaml::from_str(&text).unwrap();
    Api::<CustomResourceDefinition>::all(client.clone()).create(&Default::default(), &crd).await.unwrap();
    api::wait_for("the PodGroup kind served", Duration::from_secs(30), || async {
        pinned_kind(client, &scheduler::run::pod_groups::gvk()).await.ok().map(|(ar, _)| ar)
    })
    .await
}

/// A Kubernetes PodGroup's `PodGroupScheduled` condition, if it has one.
pub async fn group_condition(groups: &Api<DynamicObject>, name: &str) -> Option<serde_json::Value> {
    let o = groups.get_status(name).await.ok()?;
    let conditions = o.data["status"]["conditions"].as_array()?.clone();
    conditions.into_iter().find(|c| c["type"] == "PodGroupScheduled")
}
