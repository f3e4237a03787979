//! Preemption by `custom-scheduler run` on a real kube-apiserver v1.36.2. There is no
//! kubelet and no kube-controller-manager: the test plays the kubelet by removing pods
//! once they are marked for deletion, and the disruption controller by writing the
//! PodDisruptionBudget's status.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod realapi;

use std::collections::BTreeMap;
use std::time::Duration;

use algorithms::builders::{NodeBuilder, PodBuilder};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{Api, Patch, PatchParams, PostParams};
use realapi::{Ours, events_about, kubelet, plane};
use testing::api::{self, node_of};
use testing::check::placement_errors;

fn priority_class(name: &str, value: i32) -> PriorityClass {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": name}, "value": value
    }))
    .unwrap()
}

fn pod(ns: &str, name: &str, class: &str, cpu: &str) -> PodBuilder {
    PodBuilder::new(name).namespace(ns).scheduler("custom-scheduler").req(cpu, "100Mi").priority_class(class)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn high_priority_pods_preempt_spare_budgeted_pods_and_keep_their_room() {
    let Some(p) = plane("high_priority_pods_preempt_spare_budgeted_pods_and_keep_their_room").await else {
        return;
    };
    let client = &p.client;
    let ns = "preempt";
    api::create_namespace(client, ns).await.unwrap();
    let classes: Api<PriorityClass> = Api::all(client.clone());
    for (name, value) in [("low", 10), ("high", 1000)] {
        classes.create(&PostParams::default(), &priority_class(name, value)).await.unwrap();
    }
    // Four 2-CPU nodes, full of 1-CPU low-priority pods; node n0's are protected.
    let nodes: Vec<Node> =
        (0..4).map(|i| NodeBuilder::new(&format!("n{i}")).capacity("2", "8Gi", "110").build()).collect();
    api::create_nodes(client, &nodes, 4).await.unwrap();
    let mut fill = Vec::new();
    for n in 0..4 {
        for k in 0..2 {
            let app = if n == 0 { "protected" } else { "batch" };
            fill.push(
                pod(ns, &format!("low-{n}-{k}"), "low", "1").label("app", app).node_name(&format!("n{n}")).build(),
            );
        }
    }
    api::create_pods(client, &fill, 8).await.unwrap();
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), ns);
    let pdb: PodDisruptionBudget = serde_json::from_value(serde_json::json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "protected", "namespace": ns},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "protected"}}}
    }))
    .unwrap();
    pdbs.create(&PostParams::default(), &pdb).await.unwrap();
    // The disruption controller's part: two healthy pods, none may go.
    let status = serde_json::json!({"status": {
        "disruptionsAllowed": 0, "currentHealthy": 2, "desiredHealthy": 2, "expectedPods": 2, "observedGeneration": 1
    }});
    pdbs.patch_status("protected", &PatchParams::default(), &Patch::Merge(status)).await.unwrap();
    let _kubelet = kubelet(client.clone(), "preempt");

    let _ours = Ours::start(&p.plane, "custom-scheduler", None, &[]);
    // Three 1.5-CPU high-priority pods, then a low-priority pod of the same size that
    // arrives while their victims are being deleted.
    let high: Vec<Pod> = (0..3).map(|i| pod(ns, &format!("high-{i}"), "high", "1500m").build()).collect();
    api::create_pods(client, &high, 3).await.unwrap();
    api::create_pod(client, &pod(ns, "intruder", "low", "1500m").build()).await.unwrap();

    let bound = api::wait_for("every high-priority pod bound", Duration::from_secs(60), || async {
        let pods = api::pods(client, ns).await.ok()?;
        let bound: BTreeMap<String, String> = pods
            .iter()
            .filter(|p| p.metadata.name.as_deref().unwrap_or("").starts_with("high-"))
            .filter_map(|p| Some((p.metadata.name.clone()?, node_of(p)?.to_string())))
            .collect();
        (bound.len() == 3).then_some(bound)
    })
    .await;
    // A moment for anything wrong to happen (the intruder taking freed room).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pods = api::pods(client, ns).await.unwrap();
    let names: Vec<&str> = pods.iter().filter_map(|p| p.metadata.name.as_deref()).collect();
    assert!(names.contains(&"low-0-0") && names.contains(&"low-0-1"), "budgeted pods were evicted: {names:?}");
    let used: Vec<&String> = bound.values().collect();
    assert!(!used.contains(&&"n0".to_string()), "a high pod went to the protected node: {bound:?}");
    let intruder = pods.iter().find(|p| p.metadata.name.as_deref() == Some("intruder")).unwrap();
    assert_eq!(node_of(intruder), None, "the intruder took room freed for a high-priority pod");
    assert!(placement_errors(&nodes, &pods).is_empty(), "{:?}", placement_errors(&nodes, &pods));
    for p in pods.iter().filter(|p| p.metadata.name.as_deref().unwrap_or("").starts_with("high-")) {
        assert_eq!(p.status.as_ref().and_then(|s| s.nominated_node_name.as_deref()), None, "nomination left set");
    }
    // Each evicted pod got kube-scheduler's Preempted event naming its preemptor's node.
    let events = api::events(client, ns).await.unwrap();
    let evicted: Vec<String> = (1..4).flat_map(|n| (0..2).map(move |k| format!("low-{n}-{k}"))).collect();
    for name in &evicted {
        assert!(!names.contains(&name.as_str()), "{name} is still there");
        // One event per eviction call, the preemptor's reference carrying its resource
        // version, as kube-scheduler's (which also wrote two for one victim of a preemptor
        // retried while the victim was still terminating: see the recorded fixture).
        let ev = events_about(&events, name, "Preempted");
        assert!(!ev.is_empty() && ev.len() <= 3, "{name}: {ev:?}");
        for e in &ev {
            let note = e.note.as_deref().unwrap_or("");
            assert!(note.starts_with("Preempted by pod ") && note.contains(" on node n"), "{note}");
            assert_eq!(e.action.as_deref(), Some("Preempting"));
            assert_eq!(e.note, ev[0].note, "{name}: one preemptor, one node");
        }
    }
}
