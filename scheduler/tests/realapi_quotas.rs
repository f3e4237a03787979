//! Quotas by `custom-scheduler run` on a real kube-apiserver v1.36.2, with the
//! ElasticQuota CRD of deploy/crds applied and CapacityScheduling enabled as
//! scheduler-plugins' configurations enable it. No kubelet runs: pods are removed by
//! force deletion, as the kubelet would once they stopped, and the test plays the kubelet
//! for preemption's victims (removed once marked for deletion).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod realapi;

use std::time::Duration;

use algorithms::builders::{NodeBuilder, PodBuilder};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use kube::discovery::pinned_kind;
use realapi::{Ours, events_about, plane};
use testing::api;

/// Applies deploy/crds' ElasticQuota CRD and waits until the kind is served.
async fn install_elastic_quota_crd(client: &kube::Client) -> kube::discovery::ApiResource {
    let text = std::fs::read_to_string("../deploy/crds/elasticquotas.scheduling.x-k8s.io.yaml").unwrap();
    let crd: CustomResourceDefinition = serde_yaml::from_str(&text).unwrap();
    Api::<CustomResourceDefinition>::all(client.clone()).create(&PostParams::default(), &crd).await.unwrap();
    let gvk = GroupVersionKind::gvk("scheduling.x-k8s.io", "v1alpha1", "ElasticQuota");
    api::wait_for("the ElasticQuota kind served", Duration::from_secs(30), || async {
        pinned_kind(client, &gvk).await.ok().map(|(ar, _)| ar)
    })
    .await
}

fn pod(ns: &str, name: &str, cpu: &str) -> Pod {
    PodBuilder::new(name).namespace(ns).scheduler("custom-scheduler").req(cpu, "1Gi").build()
}

/// The message of the pod's `PodScheduled` condition, as the scheduler last wrote it.
async fn scheduled_condition(client: &kube::Client, ns: &str, name: &str) -> Option<String> {
    let pod = Api::<Pod>::namespaced(client.clone(), ns).get(name).await.ok()?;
    let conditions = pod.status?.conditions?;
    conditions.into_iter().find(|c| c.type_ == "PodScheduled")?.message
}

async fn bound(client: &kube::Client, ns: &str) -> Vec<String> {
    let pods = api::pods(client, ns).await.unwrap();
    let mut names: Vec<String> =
        pods.iter().filter(|p| api::node_of(p).is_some()).filter_map(|p| p.metadata.name.clone()).collect();
    names.sort();
    names
}

/// The ElasticQuotas team-a and team-b (each min 2 CPUs, max 4), two 4-CPU nodes, and
/// `custom-scheduler run` with `config`.
async fn two_teams(p: &realapi::Plane, config: serde_json::Value) -> Ours {
    let client = &p.client;
    let ar = install_elastic_quota_crd(client).await;
    for ns in ["team-a", "team-b"] {
        api::create_namespace(client, ns).await.unwrap();
        let quotas: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
        let quota: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
            "metadata": {"name": ns, "namespace": ns},
            "spec": {"min": {"cpu": "2", "memory": "8Gi"}, "max": {"cpu": "4", "memory": "16Gi"}}
        }))
        .unwrap();
        quotas.create(&PostParams::default(), &quota).await.unwrap();
    }
    // Two 4-CPU nodes: room for more than either quota allows.
    let nodes: Vec<Node> =
        (0..2).map(|i| NodeBuilder::new(&format!("n{i}")).capacity("4", "16Gi", "110").build()).collect();
    api::create_nodes(client, &nodes, 2).await.unwrap();
    Ours::start(&p.plane, "custom-scheduler", Some(config), &[])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotas_hold_a_namespace_to_max_and_lend_only_what_others_leave_idle() {
    let Some(p) = plane("quotas_hold_a_namespace_to_max_and_lend_only_what_others_leave_idle").await else {
        return;
    };
    let client = &p.client;
    let config = serde_json::json!({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "custom-scheduler",
                      "plugins": {"preFilter": {"enabled": [{"name": "CapacityScheduling"}]}}}]
    });
    let ours = two_teams(&p, config).await;

    // team-a takes 3 of its 4 CPUs; 2 more would pass its max.
    let small: Vec<Pod> = (0..3).map(|i| pod("team-a", &format!("a-{i}"), "1")).collect();
    api::create_pods(client, &small, 3).await.unwrap();
    api::wait_for("team-a's small pods bound", Duration::from_secs(60), || async {
        (bound(client, "team-a").await.len() == 3).then_some(())
    })
    .await;
    api::create_pod(client, &pod("team-a", "a-big", "2")).await.unwrap();
    let over_max = "Pod team-a/a-big is rejected in PreFilter because ElasticQuota team-a is more than Max";
    api::wait_for("a-big refused by its quota", Duration::from_secs(30), || async {
        scheduled_condition(client, "team-a", "a-big").await?.contains(over_max).then_some(())
    })
    .await;
    let quota = r#"quota="team-a/team-a""#;
    assert_eq!(ours.metric("scheduler_elastic_quota_used", &[quota, r#"resource="cpu""#]).await, 3.0);
    assert_eq!(ours.metric("scheduler_elastic_quota_max", &[quota, r#"resource="cpu""#]).await, 4.0);
    assert_eq!(
        ours.metric("scheduler_elastic_quota_min", &[quota, r#"resource="memory""#]).await,
        8.0 * 1024f64.powi(3)
    );
    assert_eq!(ours.metric("scheduler_elastic_quota_pending_pods", &[quota]).await, 1.0);
    let events = api::events(client, "team-a").await.unwrap();
    let failed = events_about(&events, "a-big", "FailedScheduling");
    assert!(failed.iter().any(|e| e.note.as_deref().is_some_and(|n| n.contains(over_max))), "{failed:?}");

    // team-b is within its own max, but team-a borrowed a CPU of team-b's guarantee:
    // 3 used + 2 asked is over the 4 both quotas guarantee together.
    api::create_pod(client, &pod("team-b", "b-0", "2")).await.unwrap();
    let over_min = "Pod team-b/b-0 is rejected in PreFilter because total ElasticQuota used is more than min";
    api::wait_for("b-0 refused: nothing idle to lend", Duration::from_secs(30), || async {
        scheduled_condition(client, "team-b", "b-0").await?.contains(over_min).then_some(())
    })
    .await;

    // team-a's small pods finish: both waiting pods fit their quotas and are bound.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "team-a");
    let now = DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
    for i in 0..3 {
        pods.delete(&format!("a-{i}"), &now).await.unwrap();
    }
    api::wait_for("a-big and b-0 bound once quota frees", Duration::from_secs(60), || async {
        (bound(client, "team-a").await == ["a-big"] && bound(client, "team-b").await == ["b-0"]).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_within_its_min_takes_back_what_another_borrowed() {
    let Some(p) = plane("a_team_within_its_min_takes_back_what_another_borrowed").await else {
        return;
    };
    let client = &p.client;
    let text = std::fs::read_to_string("../deploy/examples/quota-profile.yaml").unwrap();
    let config: serde_json::Value = serde_yaml::from_str(&text).unwrap();
    let _ours = two_teams(&p, config).await;
    let _kubelet = realapi::kubelet(client.clone(), "team-a");

    // team-a runs four 1-CPU pods: 2 of its own guarantee, 2 borrowed from team-b's.
    let borrowers: Vec<Pod> = (0..4).map(|i| pod("team-a", &format!("a-{i}"), "1")).collect();
    api::create_pods(client, &borrowers, 4).await.unwrap();
    api::wait_for("team-a's pods bound", Duration::from_secs(60), || async {
        (bound(client, "team-a").await.len() == 4).then_some(())
    })
    .await;
    // team-b asks for 2 CPUs of its guarantee: exactly two borrowed pods are evicted (the
    // nodes have room; the quotas do not), and its pod is bound.
    api::create_pod(client, &pod("team-b", "b-0", "2")).await.unwrap();
    api::wait_for("b-0 bound", Duration::from_secs(60), || async {
        (bound(client, "team-b").await == ["b-0"]).then_some(())
    })
    .await;
    let left = bound(client, "team-a").await;
    assert_eq!(left.len(), 2, "two of team-a's pods stay: {left:?}");
    let events = api::events(client, "team-a").await.unwrap();
    let preempted: Vec<_> = events.iter().filter(|e| e.reason.as_deref() == Some("Preempted")).collect();
    assert_eq!(preempted.len(), 2, "{preempted:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quota_tree_divides_the_cluster_between_teams_by_demand() {
    let Some(p) = plane("a_quota_tree_divides_the_cluster_between_teams_by_demand").await else {
        return;
    };
    let client = &p.client;
    let ar = install_elastic_quota_crd(client).await;
    let label = |k: &str| format!("quota.scheduling.koordinator.sh/{k}");
    let quotas = [
        ("research", "quota-system", "4", serde_json::json!({label("is-parent"): "true"})),
        ("team-a", "team-a", "2", serde_json::json!({label("parent"): "research"})),
        ("team-b", "team-b", "2", serde_json::json!({label("parent"): "research"})),
    ];
    for (name, ns, min, labels) in quotas {
        api::create_namespace(client, ns).await.unwrap();
        let quota: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"min": {"cpu": min}, "max": {"cpu": "8"}}
        }))
        .unwrap();
        Api::<DynamicObject>::namespaced_with(client.clone(), ns, &ar)
            .create(&PostParams::default(), &quota)
            .await
            .unwrap();
    }
    let nodes: Vec<Node> =
        (0..2).map(|i| NodeBuilder::new(&format!("n{i}")).capacity("4", "16Gi", "110").build()).collect();
    api::create_nodes(client, &nodes, 2).await.unwrap();
    let text = std::fs::read_to_string("../deploy/examples/quota-tree-profile.yaml").unwrap();
    let config: serde_json::Value = serde_yaml::from_str(&text).unwrap();
    let ours = Ours::start(&p.plane, "custom-scheduler", Some(config), &[]);

    // team-b asks for 3 CPUs, then team-a for 6, of research's 8: team-b gets its 3,
    // team-a the 5 left, and its sixth pod waits with Koordinator's message.
    let b: Vec<Pod> = (0..3).map(|i| pod("team-b", &format!("b-{i}"), "1")).collect();
    api::create_pods(client, &b, 3).await.unwrap();
    api::wait_for("team-b's pods bound", Duration::from_secs(60), || async {
        (bound(client, "team-b").await.len() == 3).then_some(())
    })
    .await;
    let a: Vec<Pod> = (0..6).map(|i| pod("team-a", &format!("a-{i}"), "1")).collect();
    api::create_pods(client, &a, 6).await.unwrap();
    let refused = api::wait_for("one of team-a's pods refused by its share", Duration::from_secs(60), || async {
        if bound(client, "team-a").await.len() != 5 {
            return None;
        }
        for i in 0..6 {
            let name = format!("a-{i}");
            if let Some(m) = scheduled_condition(client, "team-a", &name).await
                && m.contains("Insufficient quotas, quotaName: team-a, runtime: cpu:5, used: cpu:5")
            {
                return Some(name);
            }
        }
        None
    })
    .await;
    // The gauges show the shares and the use in the tree: the parent's is its children's.
    let cpu = r#"resource="cpu""#;
    let runtime = "scheduler_elastic_quota_runtime";
    let a = ours.metric(runtime, &[r#"quota="team-a/team-a""#, cpu]).await;
    let b = ours.metric(runtime, &[r#"quota="team-b/team-b""#, cpu]).await;
    assert_eq!((a, b), (5.0, 3.0));
    let used = ours.metric("scheduler_elastic_quota_tree_used", &[r#"quota="quota-system/research""#, cpu]).await;
    assert_eq!(used, 8.0);
    // team-b's pods end: its demand goes, team-a's share grows to all 8, the pod is bound.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "team-b");
    let now = DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
    for i in 0..3 {
        pods.delete(&format!("b-{i}"), &now).await.unwrap();
    }
    api::wait_for("team-a's last pod bound", Duration::from_secs(60), || async {
        bound(client, "team-a").await.contains(&refused).then_some(())
    })
    .await;
}

/// DRA devices charged as allocated, for pods a Job makes: kube-controller-manager runs
/// the Job controller (which makes the pods) and the resourceclaim controller (which
/// makes each pod's claim from its template). No DRA driver runs: the test publishes
/// the node's ResourceSlice, and no kubelet runs. The quota allows three devices of the
/// class; each claim asks for two, else one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_claims_get_the_devices_their_quota_leaves_room_for() {
    use k8s_openapi::api::batch::v1::Job;
    use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice};
    use realapi::dra::create;
    use serde_json::json;

    let Some(p) = plane("a_jobs_claims_get_the_devices_their_quota_leaves_room_for").await else {
        return;
    };
    let client = &p.client;
    let ar = install_elastic_quota_crd(client).await;
    let ns = "team-a";
    api::create_namespace(client, ns).await.unwrap();
    let quotas: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    let quota: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
        "metadata": {"name": ns, "namespace": ns},
        "spec": {"min": {"cpu": "4", "memory": "8Gi"},
                 "max": {"cpu": "4", "memory": "8Gi", "gpu.deviceclass.resource.k8s.io/devices": "3"}}
    }))
    .unwrap();
    quotas.create(&PostParams::default(), &quota).await.unwrap();
    api::create_node(client, &NodeBuilder::new("n0").capacity("8", "16Gi", "110").build()).await.unwrap();
    let devices: Vec<_> = (0..4).map(|i| json!({"name": format!("gpu-{i}")})).collect();
    create::<ResourceSlice>(
        Api::all(client.clone()),
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "n0-gpus"},
            "spec": {"driver": "gpu.example.com", "nodeName": "n0",
                "pool": {"name": "n0", "generation": 1, "resourceSliceCount": 1}, "devices": devices}}),
    )
    .await;
    create::<DeviceClass>(
        Api::all(client.clone()),
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}]}}),
    )
    .await;
    create::<ResourceClaimTemplate>(
        Api::namespaced(client.clone(), ns),
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "two-or-one"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "firstAvailable": [
                {"name": "two", "deviceClassName": "gpu", "count": 2},
                {"name": "one", "deviceClassName": "gpu", "count": 1}]}]}}}}),
    )
    .await;
    let config = json!({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "custom-scheduler",
                      "plugins": {"preFilter": {"enabled": [{"name": "CapacityScheduling"}]}}}]
    });
    let _kcm = testing::start_controller_manager(&p.plane, "kube-controller-manager", &[]).unwrap();
    let ours = Ours::start(&p.plane, "custom-scheduler", Some(config), &[]);

    // Three pods on a node of four GPUs: without the quota the first two would take two
    // each; the quota leaves three, so one gets two, the next one, and the third none.
    create::<Job>(
        Api::namespaced(client.clone(), ns),
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train"},
            "spec": {"parallelism": 3, "completions": 3, "template": {"spec": {
                "schedulerName": "custom-scheduler", "restartPolicy": "Never",
                "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "two-or-one"}],
                "containers": [{"name": "c", "image": "trainer:1",
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "claims": [{"name": "gpus"}]}}]}}}}),
    )
    .await;
    api::wait_for("two of the Job's pods bound", Duration::from_secs(60), || async {
        (bound(client, ns).await.len() == 2).then_some(())
    })
    .await;
    let claims = Api::<ResourceClaim>::namespaced(client.clone(), ns).list(&Default::default()).await.unwrap().items;
    let mut taken: Vec<usize> = claims
        .iter()
        .filter_map(|c| c.status.as_ref()?.allocation.as_ref()?.devices.as_ref()?.results.as_ref().map(Vec::len))
        .collect();
    taken.sort_unstable();
    assert_eq!(taken, [1, 2], "{claims:?}");
    let quota = r#"quota="team-a/team-a""#;
    let key = r#"resource="gpu.deviceclass.resource.k8s.io/devices""#;
    assert_eq!(ours.metric("scheduler_elastic_quota_used", &[quota, key]).await, 3.0);
    // The third pod waits: the node has a GPU left, the quota none.
    let pods = api::pods(client, ns).await.unwrap();
    let waiting: Vec<String> =
        pods.iter().filter(|p| api::node_of(p).is_none()).filter_map(|p| p.metadata.name.clone()).collect();
    assert_eq!(waiting.len(), 1, "{waiting:?}");
    let limited = "cannot allocate all claims within what ElasticQuota team-a/team-a leaves";
    api::wait_for("the third pod held back by its quota", Duration::from_secs(30), || async {
        scheduled_condition(client, ns, &waiting[0]).await?.contains(limited).then_some(())
    })
    .await;
}

/// Reclaim takes a borrower's gang whole: team-a runs a PodGroup of two 2-CPU pods, 2
/// CPUs beyond its min; team-b, within its min, asks for 2 CPUs. Evicting one member
/// would free enough, but a group goes whole: both members are preempted, and team-b's
/// pod is bound. The test plays the kubelet for the victims.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reclaim_evicts_a_borrowers_gang_whole() {
    let Some(p) = plane("reclaim_evicts_a_borrowers_gang_whole").await else {
        return;
    };
    let client = &p.client;
    let groups_kind = realapi::gang::install_pod_group_crd(client).await;
    let text = std::fs::read_to_string("../deploy/examples/quota-profile.yaml").unwrap();
    let config: serde_json::Value = serde_yaml::from_str(&text).unwrap();
    let _ours = two_teams(&p, config).await;
    let _kubelet = realapi::kubelet(client.clone(), "team-a");
    let groups: Api<DynamicObject> = Api::namespaced_with(client.clone(), "team-a", &groups_kind);
    let pg: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "train", "namespace": "team-a"}, "spec": {"minMember": 2}
    }))
    .unwrap();
    groups.create(&PostParams::default(), &pg).await.unwrap();
    let member = |name: &str| {
        PodBuilder::new(name)
            .namespace("team-a")
            .scheduler("custom-scheduler")
            .req("2", "1Gi")
            .label(scheduler::gang::POD_GROUP_LABEL, "train")
            .build()
    };
    api::create_pods(client, &[member("train-0"), member("train-1")], 2).await.unwrap();
    api::wait_for("the gang bound", Duration::from_secs(60), || async {
        (bound(client, "team-a").await.len() == 2).then_some(())
    })
    .await;
    api::create_pod(client, &pod("team-b", "b-0", "2")).await.unwrap();
    api::wait_for("b-0 bound", Duration::from_secs(60), || async {
        (bound(client, "team-b").await == ["b-0"]).then_some(())
    })
    .await;
    api::wait_for("both members gone", Duration::from_secs(30), || async {
        bound(client, "team-a").await.is_empty().then_some(())
    })
    .await;
    let events = api::events(client, "team-a").await.unwrap();
    let mut preempted: Vec<String> = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("Preempted"))
        .filter_map(|e| e.regarding.as_ref()?.name.clone())
        .collect();
    preempted.sort();
    assert_eq!(preempted, ["train-0", "train-1"]);
}
