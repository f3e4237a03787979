//! Topology-constrained gangs by `custom-scheduler run` on a real kube-apiserver v1.36.2
//! serving Kubernetes' alpha PodGroup (`scheduling.k8s.io/v1alpha2`, with the
//! GenericWorkload, GangScheduling and TopologyAwareWorkloadScheduling feature gates):
//! a group whose `schedulingConstraints.topology` names the rack label is bound inside
//! one rack, the tightest that holds it, and one no rack holds stays unbound with the
//! message. No kubelet runs: nothing needs one here.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod realapi;

use std::collections::BTreeSet;
use std::time::Duration;

use algorithms::builders::{NodeBuilder, PodBuilder};
use k8s_openapi::api::core::v1::{Node, Pod, PodSchedulingGroup};
use kube::api::{DynamicObject, PostParams};
use realapi::Ours;
use realapi::gang::{NS, bound, scheduled_condition};
use testing::api;

const RACK: &str = "example.com/rack";

fn worker(name: &str, group: &str) -> Pod {
    let mut pod = PodBuilder::new(name).namespace(NS).scheduler("custom-scheduler").req("1", "1Gi").build();
    pod.spec.as_mut().unwrap().scheduling_group = Some(PodSchedulingGroup { pod_group_name: Some(group.into()) });
    pod
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rack_constrained_pod_group_is_bound_inside_one_rack() {
    let test = "a_rack_constrained_pod_group_is_bound_inside_one_rack";
    let Some((p, groups)) = realapi::gang::kube_pod_group_plane(test, ",TopologyAwareWorkloadScheduling=true").await
    else {
        return;
    };
    let client = &p.client;
    for (name, min) in [("train", 16), ("too-big", 30)] {
        let pg: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min}},
                "schedulingConstraints": {"topology": [{"key": RACK}]}}
        }))
        .unwrap();
        let created =
            groups.create(&PostParams::default(), &pg).await.unwrap_or_else(|e| panic!("PodGroup {name}: {e}"));
        assert_eq!(
            created.data["spec"]["schedulingConstraints"]["topology"][0]["key"], RACK,
            "the API server dropped schedulingConstraints"
        );
    }
    // Racks of 4-CPU nodes: r0 holds 8 workers, r1 16, r2 24.
    let nodes: Vec<Node> = [("r0", 2), ("r1", 4), ("r2", 6)]
        .iter()
        .flat_map(|(rack, n)| {
            (0..*n).map(move |i| {
                NodeBuilder::new(&format!("{rack}-{i}")).capacity("4", "16Gi", "110").label(RACK, rack).build()
            })
        })
        .collect();
    api::create_nodes(client, &nodes, 4).await.unwrap();
    let _ours = Ours::start(&p.plane, "custom-scheduler", None, &[]);
    let pods: Vec<Pod> = (0..16).map(|i| worker(&format!("train-{i}"), "train")).collect();
    api::create_pods(client, &pods, 8).await.unwrap();
    let placed = api::wait_for("group train bound", Duration::from_secs(60), || async {
        let b = bound(client, "train-").await;
        (b.len() == 16).then_some(b)
    })
    .await;
    let racks: BTreeSet<&str> = placed.values().map(|n| n.rsplit_once('-').unwrap().0).collect();
    assert_eq!(racks, BTreeSet::from(["r1"]), "the tightest rack that holds 16: {placed:?}");
    // 30 workers: r2's 24 CPUs are the most any rack has left.
    let pods: Vec<Pod> = (0..30).map(|i| worker(&format!("too-big-{i}"), "too-big")).collect();
    api::create_pods(client, &pods, 8).await.unwrap();
    // The last member to arrive completes the group; its condition carries the decision.
    let message = api::wait_for("group too-big reported unschedulable", Duration::from_secs(30), || async {
        scheduled_condition(client, "too-big-29").await.filter(|m| m.contains("no example.com/rack domain"))
    })
    .await;
    assert!(
        message.starts_with(&format!(
            "pod group \"default/too-big\": no {RACK} domain fits all 30 pods; best: r2 fits 24 (0/6 nodes are available: 6 Insufficient cpu.)"
        )),
        "{message}"
    );
    assert!(bound(client, "too-big-").await.is_empty());
    // The placed group's PodGroupScheduled condition says so.
    let condition = |name: &'static str| realapi::gang::group_condition(&groups, name);
    let train = api::wait_for("group train's condition True", Duration::from_secs(10), || async {
        condition("train").await.filter(|c| c["status"] == "True")
    })
    .await;
    assert_eq!(train["type"], "PodGroupScheduled", "{train}");
    // The refused group's condition, and its first member's, end with the decision rather
    // than an earlier count of members.
    let decided = |m: &str| m.contains("no example.com/rack domain fits all 30 pods");
    let big = api::wait_for("group too-big's condition with the decision", Duration::from_secs(15), || async {
        condition("too-big").await.filter(|c| c["message"].as_str().is_some_and(decided))
    })
    .await;
    assert_eq!((&big["status"], &big["reason"]), (&"False".into(), &"Unschedulable".into()), "{big}");
    api::wait_for("too-big-0's condition with the decision", Duration::from_secs(15), || async {
        scheduled_condition(client, "too-big-0").await.filter(|m| decided(m))
    })
    .await;
}
