//! Gang scheduling by `custom-scheduler run` on a real kube-apiserver v1.36.2, with the
//! PodGroup CRD of deploy/crds applied. No kubelet runs: pods are removed by force
//! deletion, as the kubelet would once they stopped.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod realapi;

use std::time::Duration;

use algorithms::builders::{NodeBuilder, PodBuilder};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use realapi::gang::{NS, bound, install_pod_group_crd, scheduled_condition};
use realapi::{Ours, events_about, plane};
use testing::api;

fn member(name: &str, group: &str) -> Pod {
    let b = PodBuilder::new(name).namespace(NS).scheduler("custom-scheduler").req("3", "1Gi");
    if group.is_empty() { b.build() } else { b.label(scheduler::gang::POD_GROUP_LABEL, group).build() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gangs_are_bound_whole_or_not_at_all() {
    let Some(p) = plane("gangs_are_bound_whole_or_not_at_all").await else {
        return;
    };
    let client = &p.client;
    let ar = install_pod_group_crd(client).await;
    let groups: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &ar);
    for name in ["a", "b"] {
        let pg: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": NS}, "spec": {"minMember": 2}
        }))
        .unwrap();
        groups.create(&PostParams::default(), &pg).await.unwrap();
    }
    // Three 4-CPU nodes: room for three 3-CPU pods.
    let nodes: Vec<Node> =
        (0..3).map(|i| NodeBuilder::new(&format!("n{i}")).capacity("4", "16Gi", "110").build()).collect();
    api::create_nodes(client, &nodes, 3).await.unwrap();
    let _ours = Ours::start(&p.plane, "custom-scheduler", None, &[]);

    // Gang a fits: both members bound, on two nodes.
    api::create_pods(client, &[member("a-0", "a"), member("a-1", "a")], 2).await.unwrap();
    let a = api::wait_for("gang a bound", Duration::from_secs(60), || async {
        let b = bound(client, "a-").await;
        (b.len() == 2).then_some(b)
    })
    .await;
    assert_ne!(a["a-0"], a["a-1"]);

    // Gang b: one member would fit on the third node, the second nowhere: neither is
    // bound, and the member that fit holds nothing (a plain pod takes that node).
    api::create_pods(client, &[member("b-0", "b"), member("b-1", "b")], 2).await.unwrap();
    api::wait_for("gang b reported unschedulable", Duration::from_secs(30), || async {
        scheduled_condition(client, "b-0")
            .await?
            .contains(r#"pod group "default/b": 1 of the 2 pods it needs fit"#)
            .then_some(())
    })
    .await;
    // Each member's FailedScheduling event names the group (the first report may be the
    // wait for the rest of the group to exist; a repeated event keeps its first note).
    // Events are written apart from scheduling: wait for them.
    api::wait_for("each member's FailedScheduling event naming the group", Duration::from_secs(30), || async {
        let events = api::events(client, NS).await.ok()?;
        ["b-0", "b-1"]
            .iter()
            .all(|name| {
                events_about(&events, name, "FailedScheduling")
                    .iter()
                    .any(|e| e.note.as_deref().unwrap_or("").contains(r#"pod group "default/b""#))
            })
            .then_some(())
    })
    .await;
    assert!(bound(client, "b-").await.is_empty());
    api::create_pod(client, &member("plain", "")).await.unwrap();
    let plain = api::wait_for("the plain pod bound", Duration::from_secs(30), || async {
        bound(client, "plain").await.remove("plain")
    })
    .await;
    assert!(!a.values().any(|n| *n == plain), "plain pod on a full node: {plain}");
    assert!(bound(client, "b-").await.is_empty());
    let status = api::wait_for("gang a's status", Duration::from_secs(10), || async {
        let s = groups.get_status("a").await.ok()?.data["status"].clone();
        (s["phase"] == "Scheduled").then_some(s)
    })
    .await;
    assert_eq!((status["scheduled"].as_u64(), status["running"].as_u64()), (Some(2), Some(0)), "{status}");
    // The kubelet's part: both members start; the group's counts follow.
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    for name in ["a-0", "a-1"] {
        let running = serde_json::json!({"status": {"phase": "Running"}});
        pods.patch_status(name, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&running)).await.unwrap();
    }
    let status = api::wait_for("gang a running", Duration::from_secs(10), || async {
        let s = groups.get_status("a").await.ok()?.data["status"].clone();
        (s["phase"] == "Running").then_some(s)
    })
    .await;
    assert_eq!((status["scheduled"].as_u64(), status["running"].as_u64()), (Some(2), Some(2)), "{status}");

    // Capacity frees (a-0 and the plain pod end): gang b is placed whole.
    let now = DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
    pods.delete("a-0", &now).await.unwrap();
    pods.delete("plain", &now).await.unwrap();
    let b = api::wait_for("gang b bound", Duration::from_secs(60), || async {
        let b = bound(client, "b-").await;
        (b.len() == 2).then_some(b)
    })
    .await;
    assert_ne!(b["b-0"], b["b-1"]);
    let status = api::wait_for("gang b's status", Duration::from_secs(10), || async {
        let s = groups.get_status("b").await.ok()?.data["status"].clone();
        (s["phase"] == "Scheduled").then_some(s)
    })
    .await;
    assert_eq!(status["scheduled"], 2);
}

/// Kubernetes' own alpha PodGroup (`scheduling.k8s.io/v1alpha2`, with the GenericWorkload
/// and GangScheduling feature gates on): members set `spec.schedulingGroup`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubernetes_pod_groups_are_bound_whole_or_not_at_all() {
    let test = "kubernetes_pod_groups_are_bound_whole_or_not_at_all";
    let Some((p, groups)) = realapi::gang::kube_pod_group_plane(test, "").await else {
        return;
    };
    let client = &p.client;
    for (name, min) in [("fits", 2), ("too-big", 3)] {
        let pg: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min}}}
        }))
        .unwrap();
        groups.create(&PostParams::default(), &pg).await.unwrap_or_else(|e| panic!("PodGroup {name}: {e}"));
    }
    let nodes: Vec<Node> =
        (0..4).map(|i| NodeBuilder::new(&format!("n{i}")).capacity("4", "16Gi", "110").build()).collect();
    api::create_nodes(client, &nodes, 4).await.unwrap();
    let _ours = Ours::start(&p.plane, "custom-scheduler", None, &[]);
    let kube_member = |name: &str, group: &str| {
        let mut pod = member(name, "");
        pod.spec.as_mut().unwrap().scheduling_group =
            Some(k8s_openapi::api::core::v1::PodSchedulingGroup { pod_group_name: Some(group.into()) });
        pod
    };
    let pods = [kube_member("fits-0", "fits"), kube_member("fits-1", "fits")];
    api::create_pods(client, &pods, 2).await.unwrap();
    let fits = api::wait_for("group fits bound", Duration::from_secs(60), || async {
        let b = bound(client, "fits-").await;
        (b.len() == 2).then_some(b)
    })
    .await;
    assert_ne!(fits["fits-0"], fits["fits-1"]);
    // Two nodes are left for three 3-CPU members: none is bound.
    let pods =
        [kube_member("too-big-0", "too-big"), kube_member("too-big-1", "too-big"), kube_member("too-big-2", "too-big")];
    api::create_pods(client, &pods, 3).await.unwrap();
    let created: Pod = Api::<Pod>::namespaced(client.clone(), NS).get("too-big-0").await.unwrap();
    let group = created.spec.unwrap().scheduling_group.and_then(|g| g.pod_group_name);
    assert_eq!(group.as_deref(), Some("too-big"), "the API server dropped spec.schedulingGroup");
    api::wait_for("group too-big reported unschedulable", Duration::from_secs(30), || async {
        let message = scheduled_condition(client, "too-big-0").await?;
        message.contains(r#"pod group "default/too-big": 2 of the 3 pods it needs fit"#).then_some(())
    })
    .await;
    assert!(bound(client, "too-big-").await.is_empty());
    // Each group's PodGroupScheduled condition says so.
    let condition = |name: &'static str| realapi::gang::group_condition(&groups, name);
    let fits = api::wait_for("group fits' condition", Duration::from_secs(10), || condition("fits")).await;
    assert_eq!(fits["status"], "True", "{fits}");
    let big = api::wait_for("group too-big's condition", Duration::from_secs(10), || async {
        condition("too-big").await.filter(|c| c["status"] == "False")
    })
    .await;
    assert_eq!(big["reason"], "Unschedulable");
    assert!(big["message"].as_str().unwrap().contains(r#"pod group "default/too-big""#), "{big}");
}

/// A high-priority gang preempts for all its members: both low-priority pods go (the test
/// plays the kubelet that removes them), then the gang is bound whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_high_priority_gang_preempts_for_all_its_members() {
    let Some(p) = plane("a_high_priority_gang_preempts_for_all_its_members").await else {
        return;
    };
    let client = &p.client;
    let ar = install_pod_group_crd(client).await;
    let pg: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "urgent", "namespace": NS}, "spec": {"minMember": 2}
    }))
    .unwrap();
    Api::<DynamicObject>::namespaced_with(client.clone(), NS, &ar).create(&PostParams::default(), &pg).await.unwrap();
    let classes: Api<k8s_openapi::api::scheduling::v1::PriorityClass> = Api::all(client.clone());
    for (name, value) in [("low", 10), ("high", 1000)] {
        let class = serde_json::from_value(serde_json::json!({
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value
        }))
        .unwrap();
        classes.create(&PostParams::default(), &class).await.unwrap();
    }
    let nodes: Vec<Node> =
        (0..2).map(|i| NodeBuilder::new(&format!("n{i}")).capacity("4", "16Gi", "110").build()).collect();
    api::create_nodes(client, &nodes, 2).await.unwrap();
    let low: Vec<Pod> = (0..2)
        .map(|i| {
            PodBuilder::new(&format!("low-{i}"))
                .namespace(NS)
                .req("4", "1Gi")
                .priority_class("low")
                .node_name(&format!("n{i}"))
                .build()
        })
        .collect();
    api::create_pods(client, &low, 2).await.unwrap();
    let _kubelet = realapi::kubelet(client.clone(), NS);
    let _ours = Ours::start(&p.plane, "custom-scheduler", None, &[]);
    let urgent: Vec<Pod> = (0..2)
        .map(|i| {
            PodBuilder::new(&format!("urgent-{i}"))
                .namespace(NS)
                .scheduler("custom-scheduler")
                .req("3", "1Gi")
                .priority_class("high")
                .label(scheduler::gang::POD_GROUP_LABEL, "urgent")
                .build()
        })
        .collect();
    api::create_pods(client, &urgent, 2).await.unwrap();
    let placed = api::wait_for("the gang bound", Duration::from_secs(60), || async {
        let b = bound(client, "urgent-").await;
        (b.len() == 2).then_some(b)
    })
    .await;
    assert_ne!(placed["urgent-0"], placed["urgent-1"]);
    let left: Vec<String> =
        api::pods(client, NS).await.unwrap().iter().filter_map(|p| p.metadata.name.clone()).collect();
    assert!(!left.iter().any(|n| n.starts_with("low-")), "{left:?}");
}
