//! `custom-scheduler run` against a real kube-apiserver v1.36.2 and etcd, started by the
//! tests from `KUBE_ASSETS`. There is no kubelet: bound pods stay Pending, which is all a
//! scheduler sees of them anyway; where a controller would act, the test says so.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod realapi;

use std::collections::BTreeMap;
use std::time::Duration;

use algorithms::builders::{NodeBuilder, PodBuilder, affinity_term, node_term};
use k8s_openapi::api::core::v1::{Node, Pod};
use realapi::{Ours, events_about, plane, pod_scheduled};
use testing::api::{self, node_of};
use testing::check::placement_errors;

const ZONE: &str = "topology.kubernetes.io/zone";
const HOSTNAME: &str = "kubernetes.io/hostname";
const GPU: &str = "nvidia.com/gpu";

/// 24 CPU nodes over three zones (every fourth with an SSD label), 6 tainted nodes with 4
/// GPUs each, and one cordoned node.
fn mixed_nodes() -> Vec<Node> {
    let zones = ["a", "b", "c"];
    let mut nodes = Vec::new();
    for i in 0..24 {
        nodes.push(
            NodeBuilder::new(&format!("cpu-{i:02}"))
                .capacity("4", "16Gi", "110")
                .label(ZONE, zones[i % 3])
                .label("disk", if i % 4 == 0 { "ssd" } else { "hdd" })
                .build(),
        );
    }
    for i in 0..6 {
        nodes.push(
            NodeBuilder::new(&format!("gpu-{i}"))
                .capacity("8", "32Gi", "110")
                .resource(GPU, "4")
                .label(ZONE, zones[i % 3])
                .taint(GPU, "present", "NoSchedule")
                .build(),
        );
    }
    nodes.push(NodeBuilder::new("cordoned").capacity("4", "16Gi", "110").label(ZONE, "a").unschedulable(true).build());
    nodes
}

fn pod(ns: &str, name: &str) -> PodBuilder {
    PodBuilder::new(name).namespace(ns).scheduler("custom-scheduler").req("200m", "256Mi")
}

/// Plain, SSD-selecting, GPU, zone-spread, anti-affine and zonal pods, other schedulers'
/// pods, and pods too big for any node.
fn mixed_pods(ns: &str) -> Vec<Pod> {
    let mut pods = Vec::new();
    pods.extend((0..150).map(|i| pod(ns, &format!("plain-{i:03}")).build()));
    pods.extend((0..40).map(|i| pod(ns, &format!("ssd-{i:02}")).node_selector("disk", "ssd").build()));
    pods.extend(
        (0..30).map(|i| {
            pod(ns, &format!("gpu-{i:02}")).toleration(GPU, "Exists", "", "NoSchedule").device(GPU, "1").build()
        }),
    );
    pods.extend((0..30).map(|i| {
        pod(ns, &format!("spread-{i:02}"))
            .label("app", "spread")
            .spread(1, ZONE, "DoNotSchedule", &[("app", "spread")])
            .build()
    }));
    pods.extend((0..20).map(|i| {
        pod(ns, &format!("anti-{i:02}"))
            .label("app", "anti")
            .pod_anti_affinity(affinity_term(&[("app", "anti")], HOSTNAME))
            .build()
    }));
    pods.extend((0..20).map(|i| {
        pod(ns, &format!("zonal-{i:02}")).required_node_affinity(vec![node_term(ZONE, "In", &["a", "b"])]).build()
    }));
    pods.extend((0..10).map(|i| pod(ns, &format!("other-{i:02}")).scheduler("other-scheduler").build()));
    pods.extend((0..3).map(|i| pod(ns, &format!("huge-{i}")).req("64", "1Gi").build()));
    pods
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mixed_backlog_is_bound_once_each_validly_with_kube_schedulers_events_and_conditions() {
    let Some(p) = plane("a_mixed_backlog_is_bound_once_each_validly_with_kube_schedulers_events_and_conditions").await
    else {
        return;
    };
    let client = &p.client;
    let ns = "backlog";
    api::create_namespace(client, ns).await.unwrap();
    api::create_nodes(client, &mixed_nodes(), 16).await.unwrap();
    let pods = mixed_pods(ns);
    api::create_pods(client, &pods, 32).await.unwrap();
    let ours = Ours::start(&p.plane, "custom-scheduler", None, &[]);

    // Ours are all but the other scheduler's 10; all bound but 6 GPU pods (24 GPUs for
    // 30 pods) and the 3 huge pods.
    let expect_bound = pods.len() - 10 - 6 - 3;
    let unschedulable = 9;
    let final_pods = api::wait_for("every pod decided", Duration::from_secs(90), || async {
        let list = api::pods(client, ns).await.ok()?;
        let bound = list.iter().filter(|p| node_of(p).is_some()).count();
        let failed = list.iter().filter(|p| pod_scheduled(p).is_some_and(|c| c.0 == "False")).count();
        (bound >= expect_bound && failed >= unschedulable).then_some(list)
    })
    .await;
    // Let any late bind or event land before judging.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let final_pods = api::pods(client, ns).await.unwrap_or(final_pods);
    let nodes = api::nodes(client).await.unwrap();
    let events = api::wait_for("events of every decision", Duration::from_secs(30), || async {
        let ev = api::events(client, ns).await.ok()?;
        let scheduled = ev.iter().filter(|e| e.reason.as_deref() == Some("Scheduled")).count();
        (scheduled >= expect_bound).then_some(ev)
    })
    .await;

    let errors = placement_errors(&nodes, &final_pods);
    assert!(errors.is_empty(), "invalid placements:\n{}", errors.join("\n"));

    let bound: Vec<&Pod> = final_pods.iter().filter(|p| node_of(p).is_some()).collect();
    assert_eq!(bound.len(), expect_bound, "bound pods");
    let mut gpu_used: BTreeMap<&str, i32> = BTreeMap::new();
    for p in &bound {
        let name = p.metadata.name.as_deref().unwrap();
        let node = node_of(p).unwrap();
        assert!(!name.starts_with("other-") && !name.starts_with("huge-"), "{name} should not be bound");
        if name.starts_with("gpu-") {
            assert!(node.starts_with("gpu-"), "{name} on {node}");
            *gpu_used.entry(node).or_default() += 1;
        }
        let scheduled = events_about(&events, name, "Scheduled");
        assert_eq!(scheduled.len(), 1, "{name}: Scheduled events {scheduled:?}");
        let e = scheduled[0];
        assert_eq!(e.note.as_deref(), Some(format!("Successfully assigned {ns}/{name} to {node}").as_str()));
        assert_eq!(e.type_.as_deref(), Some("Normal"));
        assert_eq!(e.action.as_deref(), Some("Binding"));
        assert_eq!(e.reporting_controller.as_deref(), Some("custom-scheduler"));
        // The API server's binding subresource sets PodScheduled=True, as for kube-scheduler.
        assert_eq!(pod_scheduled(p).map(|c| c.0), Some("True".to_string()), "{name}");
    }
    assert_eq!(gpu_used.values().sum::<i32>(), 24, "every GPU used once: {gpu_used:?}");
    assert!(gpu_used.values().all(|n| *n == 4), "{gpu_used:?}");

    let huge = "0/31 nodes are available: 1 node(s) were unschedulable, 24 Insufficient cpu, \
                6 node(s) had untolerated taint(s).";
    let gpu = "0/31 nodes are available: 1 node(s) were unschedulable, 30 Insufficient nvidia.com/gpu.";
    let mut failed = 0;
    for p in final_pods.iter().filter(|p| node_of(p).is_none()) {
        let name = p.metadata.name.as_deref().unwrap();
        if name.starts_with("other-") {
            assert!(pod_scheduled(p).is_none(), "{name}: another scheduler's pod was touched");
            assert!(events.iter().all(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) != Some(name)));
            continue;
        }
        failed += 1;
        let want = if name.starts_with("huge-") { huge } else { gpu };
        assert!(name.starts_with("huge-") || name.starts_with("gpu-"), "{name} left pending");
        let (status, reason, message) = pod_scheduled(p).unwrap();
        assert_eq!((status.as_str(), reason.as_deref()), ("False", Some("Unschedulable")), "{name}");
        // The first sentence is the filters' verdict; preemption's part follows (checked
        // word for word against kube-scheduler in the messages test).
        let message = message.unwrap_or_default();
        assert!(message.starts_with(&format!("{want} no new claims to deallocate, preemption: ")), "{name}: {message}");
        let warnings = events_about(&events, name, "FailedScheduling");
        assert!(!warnings.is_empty(), "{name}: no FailedScheduling event");
        assert!(
            warnings
                .iter()
                .all(|e| e.note.as_deref() == Some(message.as_str()) && e.type_.as_deref() == Some("Warning"))
        );
    }
    assert_eq!(failed, unschedulable);
    let scheduled = ours.metric("scheduler_schedule_attempts_total", &["result=\"scheduled\""]).await;
    assert_eq!(scheduled as usize, expect_bound, "scheduled attempts");
    // kube-scheduler's other families, with the values this backlog gives them.
    let bound_after = ours.metric("scheduler_pod_scheduling_attempts_count", &[]).await;
    assert_eq!(bound_after as usize, expect_bound, "pods bound, by their attempts");
    let sli = ours.metric("scheduler_pod_scheduling_sli_duration_seconds_count", &[]).await;
    assert_eq!(sli as usize, expect_bound);
    let nodes = api::nodes(client).await.unwrap().len();
    assert_eq!(ours.metric("scheduler_cache_size", &["type=\"nodes\""]).await as usize, nodes);
    assert_eq!(ours.metric("scheduler_cache_size", &["type=\"pods\""]).await as usize, expect_bound);
    // Each waiting pod counts once for every plugin that rejected it (once parked again).
    api::wait_for("unschedulable pods by plugin", Duration::from_secs(20), || async {
        let waiting = ours.metric("scheduler_unschedulable_pods", &["profile=\"custom-scheduler\""]).await;
        (waiting as usize >= unschedulable).then_some(())
    })
    .await;
    assert!(ours.metric("scheduler_preemption_attempts_total", &[]).await as usize >= unschedulable);
    assert!(ours.metric("scheduler_scheduling_algorithm_duration_seconds_count", &[]).await as usize >= expect_bound);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_schedulers_pods_are_left_alone_and_a_pod_deleted_while_pending_is_never_bound() {
    let Some(p) = plane("other_schedulers_pods_are_left_alone_and_a_pod_deleted_while_pending_is_never_bound").await
    else {
        return;
    };
    let client = &p.client;
    let ns = "shared";
    api::create_namespace(client, ns).await.unwrap();
    let nodes: Vec<Node> = (0..6)
        .map(|i| NodeBuilder::new(&format!("n{i}")).capacity("8", "32Gi", "110").label(ZONE, "a").build())
        .collect();
    api::create_nodes(client, &nodes, 8).await.unwrap();
    // kube-scheduler runs beside ours with its default profile.
    let _kube = testing::start_kube_scheduler(&p.plane, "kube-scheduler", serde_json::json!({})).unwrap();
    let ours = Ours::start(&p.plane, "custom-scheduler", None, &[]);
    let mut pods: Vec<Pod> = (0..40).map(|i| pod(ns, &format!("ours-{i:02}")).build()).collect();
    pods.extend((0..40).map(|i| pod(ns, &format!("theirs-{i:02}")).scheduler("default-scheduler").build()));
    pods.extend((0..10).map(|i| pod(ns, &format!("nobodys-{i:02}")).scheduler("nobody").build()));
    // A pod no node fits yet.
    pods.push(pod(ns, "waiter").node_selector("pool", "late").build());
    api::create_pods(client, &pods, 16).await.unwrap();

    api::wait_for("the waiter to be found unschedulable", Duration::from_secs(60), || async {
        let pods = api::pods(client, ns).await.ok()?;
        let w = pods.iter().find(|p| p.metadata.name.as_deref() == Some("waiter"))?;
        pod_scheduled(w).filter(|c| c.0 == "False").map(|_| ())
    })
    .await;
    let pods_api: kube::Api<Pod> = kube::Api::namespaced(client.clone(), ns);
    pods_api
        .delete("waiter", &kube::api::DeleteParams { grace_period_seconds: Some(0), ..Default::default() })
        .await
        .unwrap();
    // The node it was waiting for arrives after it is gone; a sentinel proves the
    // scheduler has seen that node.
    let late = NodeBuilder::new("late").capacity("8", "32Gi", "110").label("pool", "late").build();
    api::create_node(client, &late).await.unwrap();
    api::create_pod(client, &pod(ns, "sentinel").node_selector("pool", "late").build()).await.unwrap();

    let final_pods = api::wait_bound(client, ns, 81, Duration::from_secs(60)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let events = api::events(client, ns).await.unwrap();
    let sentinel = final_pods.iter().find(|p| p.metadata.name.as_deref() == Some("sentinel")).unwrap();
    assert_eq!(node_of(sentinel), Some("late"));
    assert!(events_about(&events, "waiter", "Scheduled").is_empty(), "the deleted pod was bound");
    for p in &final_pods {
        let name = p.metadata.name.as_deref().unwrap();
        let scheduled = events_about(&events, name, "Scheduled");
        let by: Vec<_> = scheduled.iter().map(|e| e.reporting_controller.as_deref().unwrap_or("")).collect();
        match name.split('-').next() {
            Some("ours") | Some("sentinel") => assert_eq!(by, ["custom-scheduler"], "{name}"),
            Some("theirs") => assert_eq!(by, ["default-scheduler"], "{name}"),
            _ => {
                assert!(node_of(p).is_none() && pod_scheduled(p).is_none(), "{name} was touched");
                assert!(events.iter().all(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) != Some(name)));
            }
        }
    }
    let scheduled = ours.metric("scheduler_schedule_attempts_total", &["result=\"scheduled\""]).await;
    assert_eq!(scheduled as usize, 41, "ours bound its 40 pods and the sentinel");
}

/// A second profile reports its events under its own scheduler name, in ours as in
/// kube-scheduler running two profiles of its own beside it: `Scheduled` for a pod it
/// binds and `FailedScheduling` for one no node fits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_profile_reports_its_events_under_its_own_scheduler_name() {
    let Some(p) = plane("each_profile_reports_its_events_under_its_own_scheduler_name").await else {
        return;
    };
    let client = &p.client;
    let ns = "profiles";
    api::create_namespace(client, ns).await.unwrap();
    let nodes: Vec<Node> =
        (0..2).map(|i| NodeBuilder::new(&format!("n{i}")).capacity("8", "32Gi", "110").build()).collect();
    api::create_nodes(client, &nodes, 4).await.unwrap();
    let two = |first: &str, second: &str| serde_json::json!({"profiles": [{"schedulerName": first}, {"schedulerName": second}]});
    let _kube =
        testing::start_kube_scheduler(&p.plane, "kube-scheduler", two("default-scheduler", "kube-packer")).unwrap();
    let _ours = Ours::start(&p.plane, "custom-scheduler", Some(two("custom-scheduler", "packer")), &[]);
    let mut pods = Vec::new();
    for profile in ["custom-scheduler", "packer", "default-scheduler", "kube-packer"] {
        pods.push(pod(ns, &format!("{profile}-fits")).scheduler(profile).build());
        pods.push(pod(ns, &format!("{profile}-waits")).scheduler(profile).node_selector("pool", "none").build());
    }
    api::create_pods(client, &pods, 8).await.unwrap();
    let by = |events: &[k8s_openapi::api::events::v1::Event], name: &str, reason: &str| -> Vec<String> {
        events_about(events, name, reason).iter().filter_map(|e| e.reporting_controller.clone()).collect()
    };
    let events = api::wait_for("every profile's two events", Duration::from_secs(60), || async {
        let events = api::events(client, ns).await.ok()?;
        let all = ["custom-scheduler", "packer", "default-scheduler", "kube-packer"].iter().all(|profile| {
            !by(&events, &format!("{profile}-fits"), "Scheduled").is_empty()
                && !by(&events, &format!("{profile}-waits"), "FailedScheduling").is_empty()
        });
        all.then_some(events)
    })
    .await;
    for profile in ["custom-scheduler", "packer", "default-scheduler", "kube-packer"] {
        assert_eq!(by(&events, &format!("{profile}-fits"), "Scheduled"), [profile], "{profile}");
        let failed = by(&events, &format!("{profile}-waits"), "FailedScheduling");
        assert!(failed.iter().all(|c| c == profile), "{profile}: {failed:?}");
    }
}

/// A kubeconfig with `insecure-skip-tls-verify`: one warning at start, not one per
/// connection, and pods are bound as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unverified_server_certificate_is_warned_about_once() {
    let Some(p) = plane("an_unverified_server_certificate_is_warned_about_once").await else {
        return;
    };
    let client = &p.client;
    let ns = "insecure";
    api::create_namespace(client, ns).await.unwrap();
    let nodes: Vec<Node> =
        (0..4).map(|i| NodeBuilder::new(&format!("n{i}")).capacity("8", "32Gi", "110").build()).collect();
    api::create_nodes(client, &nodes, 4).await.unwrap();
    let mut kubeconfig: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(p.plane.kubeconfig()).unwrap()).unwrap();
    let cluster = kubeconfig["clusters"][0]["cluster"].as_object_mut().unwrap();
    cluster.remove("certificate-authority");
    cluster.insert("insecure-skip-tls-verify".into(), serde_json::json!(true));
    let path = p.plane.dir().join("insecure.kubeconfig");
    std::fs::write(&path, kubeconfig.to_string()).unwrap();
    let listen = std::net::SocketAddr::from(([127, 0, 0, 1], testing::free_port().unwrap()));
    let mut cmd = std::process::Command::new(realapi::BIN);
    cmd.args(["run", "--listen", &listen.to_string(), "--kubeconfig"]).arg(&path).env_remove("RUST_LOG");
    let ours = testing::Process::spawn("insecure", cmd, &p.plane.dir().join("insecure.log")).unwrap();
    let pods: Vec<Pod> = (0..20).map(|i| pod(ns, &format!("p-{i:02}")).build()).collect();
    api::create_pods(client, &pods, 8).await.unwrap();
    api::wait_bound(client, ns, 20, Duration::from_secs(60)).await;
    let log = std::fs::read_to_string(ours.log()).unwrap();
    assert_eq!(log.matches("insecure-skip-tls-verify").count(), 1, "{log}");
    assert!(!log.contains("Server cert bypassed"), "{log}");
}

/// Every way a pod can fail to fit, on four nodes: a small one holding a pod with a host
/// port and anti-affinity, a tainted one, a cordoned one, and one out of pod slots.
fn unfit_cluster(ns: &str) -> (Vec<Node>, Vec<Pod>, Vec<Pod>) {
    let nodes = vec![
        NodeBuilder::new("n1").capacity("2", "4Gi", "110").label(ZONE, "a").resource(GPU, "1").build(),
        NodeBuilder::new("n2")
            .capacity("2", "4Gi", "110")
            .label(ZONE, "b")
            .taint("dedicated", "infra", "NoSchedule")
            .build(),
        NodeBuilder::new("n3").capacity("2", "4Gi", "110").label(ZONE, "c").unschedulable(true).build(),
        NodeBuilder::new("n4").capacity("4", "8Gi", "1").label(ZONE, "a").build(),
    ];
    let existing = vec![
        PodBuilder::new("web-0")
            .namespace(ns)
            .label("app", "web")
            .req("500m", "256Mi")
            .host_port("", "TCP", 8080)
            .node_name("n1")
            .build(),
        PodBuilder::new("guard")
            .namespace(ns)
            .req("100m", "64Mi")
            .pod_anti_affinity(affinity_term(&[("app", "intruder")], HOSTNAME))
            .node_name("n1")
            .build(),
        PodBuilder::new("filler").namespace(ns).req("100m", "64Mi").node_name("n4").build(),
    ];
    let pending = vec![
        pod(ns, "big").req("3", "1Gi").build(),
        pod(ns, "selector").node_selector("tier", "db").build(),
        pod(ns, "port").host_port("", "TCP", 8080).build(),
        pod(ns, "anti").pod_anti_affinity(affinity_term(&[("app", "web")], HOSTNAME)).build(),
        pod(ns, "affinity").pod_affinity(affinity_term(&[("app", "absent")], ZONE)).build(),
        pod(ns, "gpu").device(GPU, "2").build(),
        pod(ns, "spread").label("app", "web").spread(1, ZONE, "DoNotSchedule", &[("app", "web")]).build(),
        pod(ns, "intruder").label("app", "intruder").build(),
    ];
    (nodes, existing, pending)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unschedulable_messages_are_kube_schedulers_word_for_word() {
    let Some(p) = plane("unschedulable_messages_are_kube_schedulers_word_for_word").await else {
        return;
    };
    let client = &p.client;
    let ns = "unfit";
    api::create_namespace(client, ns).await.unwrap();
    let (nodes, existing, pending) = unfit_cluster(ns);
    api::create_nodes(client, &nodes, 4).await.unwrap();
    api::create_pods(client, &existing, 4).await.unwrap();
    api::create_pods(client, &pending, 8).await.unwrap();
    let n = pending.len();

    let messages = |marker: Option<&'static str>| async move {
        api::wait_for("a PodScheduled=False message on every pending pod", Duration::from_secs(60), || async {
            let pods = api::pods(client, ns).await.ok()?;
            let found: BTreeMap<String, String> = pods
                .iter()
                .filter(|p| node_of(p).is_none())
                .filter_map(|p| {
                    let (status, _, message) = pod_scheduled(p)?;
                    let message = message?;
                    (status == "False" && marker.is_none_or(|m| message.contains(m)))
                        .then(|| (p.metadata.name.clone().unwrap_or_default(), message))
                })
                .collect();
            (found.len() == n).then_some(found)
        })
        .await
    };
    let mut ours = Ours::start(&p.plane, "custom-scheduler", None, &[]);
    let mine = messages(None).await;
    ours.process.stop(Duration::from_secs(10)).await;

    // The same pods, still pending, now judged by kube-scheduler with a profile of the same
    // name. Its messages go on after the first sentence with what its post-filter plugins
    // tried ("no new claims to deallocate, preemption: …"), which marks them as its own.
    let config = serde_json::json!({"profiles": [{"schedulerName": "custom-scheduler"}]});
    let _kube = testing::start_kube_scheduler(&p.plane, "kube-scheduler", config).unwrap();
    let theirs = messages(Some(" preemption: ")).await;
    for (name, message) in &theirs {
        assert_eq!(mine.get(name), Some(message), "{name}");
    }
    let bound = api::pods(client, ns).await.unwrap().iter().filter(|p| node_of(p).is_some()).count();
    assert_eq!(bound, existing.len(), "kube-scheduler placed a pod ours found no node for");
}

/// Ten 8-CPU nodes over three zones and `n` pods of 100m in `ns`.
async fn small_backlog(client: &kube::Client, ns: &str, n: usize) -> Vec<Pod> {
    api::create_namespace(client, ns).await.unwrap();
    let nodes: Vec<Node> = (0..10)
        .map(|i| {
            NodeBuilder::new(&format!("n{i}")).capacity("8", "32Gi", "110").label(ZONE, ["a", "b", "c"][i % 3]).build()
        })
        .collect();
    api::create_nodes(client, &nodes, 10).await.unwrap();
    let pods: Vec<Pod> = (0..n).map(|i| pod(ns, &format!("p{i:03}")).req("100m", "128Mi").build()).collect();
    api::create_pods(client, &pods, 32).await.unwrap();
    pods
}

/// A client rate low enough (binds and events share it) that a backlog takes seconds.
fn slow_writes(extra: serde_json::Value) -> serde_json::Value {
    let mut config = serde_json::json!({
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"qps": 40, "burst": 10},
        "profiles": [{"schedulerName": "custom-scheduler"}],
    });
    if let (Some(c), Some(e)) = (config.as_object_mut(), extra.as_object()) {
        c.extend(e.clone());
    }
    config
}

/// Every pod bound, none with more than one Scheduled event, each event naming the pod's
/// node, and at most `unrecorded` bound pods without an event (a scheduler killed between
/// a bind and its event, or a bind whose answer was lost with the connection).
async fn assert_all_bound_once(
    client: &kube::Client,
    ns: &str,
    n: usize,
    unrecorded: usize,
) -> Vec<k8s_openapi::api::events::v1::Event> {
    let pods = api::wait_bound(client, ns, n, Duration::from_secs(120)).await;
    let with_event = |ev: &[k8s_openapi::api::events::v1::Event]| {
        ev.iter()
            .filter(|e| e.reason.as_deref() == Some("Scheduled"))
            .filter_map(|e| e.regarding.as_ref()?.name.clone())
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    };
    api::wait_for("Scheduled events", Duration::from_secs(30), || async {
        let ev = api::events(client, ns).await.ok()?;
        (with_event(&ev) + unrecorded >= n).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let events = api::events(client, ns).await.unwrap();
    for p in &pods {
        let name = p.metadata.name.as_deref().unwrap();
        let scheduled = events_about(&events, name, "Scheduled");
        assert!(scheduled.len() <= 1, "{name}: {scheduled:?}");
        let node = node_of(p).unwrap();
        for e in scheduled {
            assert!(e.note.as_deref().unwrap_or("").ends_with(&format!(" to {node}")), "{name}: {e:?}");
        }
    }
    assert!(with_event(&events) + unrecorded >= n, "{} of {n} pods have a Scheduled event", with_event(&events));
    let errors = placement_errors(&api::nodes(client).await.unwrap(), &pods);
    assert!(errors.is_empty(), "{errors:?}");
    events
}

async fn bound_count(client: &kube::Client, ns: &str) -> usize {
    api::pods(client, ns).await.map(|l| l.iter().filter(|p| node_of(p).is_some()).count()).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standby_takes_over_within_the_lease_when_the_leader_is_killed() {
    let Some(p) = plane("the_standby_takes_over_within_the_lease_when_the_leader_is_killed").await else {
        return;
    };
    let client = &p.client;
    let ns = "ha";
    let n = 200;
    let lease = serde_json::json!({"leaderElection": {
        "leaderElect": true, "leaseDuration": "4s", "renewDeadline": "3s", "retryPeriod": "500ms",
        "resourceNamespace": "kube-system", "resourceName": "custom-scheduler"}});
    let mut a = Ours::start(&p.plane, "replica-a", Some(slow_writes(lease.clone())), &[]);
    let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
        kube::Api::namespaced(client.clone(), "kube-system");
    let holder = || async {
        let l = leases.get_opt("custom-scheduler").await.ok()??;
        l.spec?.holder_identity.filter(|h| !h.is_empty())
    };
    assert_eq!(api::wait_for("replica-a to lead", Duration::from_secs(30), holder).await, "replica-a");
    let b = Ours::start(&p.plane, "replica-b", Some(slow_writes(lease)), &[]);
    api::wait_for("replica-b to sync", Duration::from_secs(30), || async { b.get("/readyz").await.map(|_| ()) }).await;
    small_backlog(client, ns, n).await;

    api::wait_for("50 pods bound by the leader", Duration::from_secs(60), || async {
        (bound_count(client, ns).await >= 50).then_some(())
    })
    .await;
    a.process.kill();
    let killed = std::time::Instant::now();
    let at_kill = bound_count(client, ns).await;
    assert!(at_kill < n, "the backlog drained before the leader was killed");
    let new = api::wait_for("replica-b to take the lease", Duration::from_secs(15), || async {
        holder().await.filter(|h| h == "replica-b")
    })
    .await;
    let takeover = killed.elapsed();
    assert_eq!(new, "replica-b");
    // Lease duration 4 s, plus one retry period of the standby, plus the time to notice.
    assert!(takeover <= Duration::from_secs(6), "took over after {takeover:?}");

    let events = assert_all_bound_once(client, ns, n, 64).await;
    let by_b = events.iter().filter(|e| e.reporting_instance.as_deref() == Some("replica-b")).count();
    assert!(by_b > 0 && by_b <= n - 50 + 64, "replica-b bound {by_b}");
    println!("leader killed with {at_kill}/{n} bound; replica-b took the lease {takeover:?} later and bound {by_b}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backlog_drains_across_a_kube_apiserver_restart() {
    let Some(mut p) = plane("the_backlog_drains_across_a_kube_apiserver_restart").await else {
        return;
    };
    let ns = "restart";
    let n = 200;
    small_backlog(&p.client, ns, n).await;
    let ours = Ours::start(&p.plane, "custom-scheduler", Some(slow_writes(serde_json::json!({}))), &[]);
    api::wait_for("40 pods bound", Duration::from_secs(60), || async {
        (bound_count(&p.client, ns).await >= 40).then_some(())
    })
    .await;
    p.plane.kill_apiserver();
    tokio::time::sleep(Duration::from_secs(3)).await;
    p.plane.start_apiserver().await.unwrap();
    let client = p.plane.client().await.unwrap();
    let before = bound_count(&client, ns).await;
    assert!(before < n, "the backlog drained before the restart");

    // Events of binds made while the server was away are retried, not dropped: at most a
    // bind whose answer was lost with the connection goes without one.
    // After the restart: a new node and pods that fit only there, to show the node and
    // pod watches are back.
    let late = NodeBuilder::new("late").capacity("8", "32Gi", "110").label("pool", "late").build();
    api::create_node(&client, &late).await.unwrap();
    let extra: Vec<Pod> = (0..20)
        .map(|i| pod(ns, &format!("late-{i:02}")).req("100m", "128Mi").node_selector("pool", "late").build())
        .collect();
    api::create_pods(&client, &extra, 8).await.unwrap();
    assert_all_bound_once(&client, ns, n + extra.len(), 4).await;
    let log = std::fs::read_to_string(ours.process.log()).unwrap();
    assert!(log.contains("watch failing"), "the watches never noticed the restart");
    assert!(log.contains("watch recovered"), "the watches never said they recovered");
    let relisted = log.contains("relisting");
    println!(
        "{before}/{n} bound when kube-apiserver came back (410 Gone seen: {relisted}); every pod bound once after it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_sent_binds_finish_and_releases_the_rest() {
    let Some(p) = plane("sigterm_lets_sent_binds_finish_and_releases_the_rest").await else {
        return;
    };
    let client = &p.client;
    let ns = "term";
    let n = 200;
    small_backlog(client, ns, n).await;
    let mut ours = Ours::start(&p.plane, "first", Some(slow_writes(serde_json::json!({}))), &["--log-format", "json"]);
    api::wait_for("40 pods bound", Duration::from_secs(60), || async {
        (bound_count(client, ns).await >= 40).then_some(())
    })
    .await;
    let status = ours.process.stop(Duration::from_secs(40)).await.unwrap();
    assert!(status.success(), "exit status {status}");
    let log = std::fs::read_to_string(ours.process.log()).unwrap();
    let stopped: serde_json::Value = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|l| l["fields"]["message"] == "stopped")
        .unwrap_or_else(|| panic!("no final report in the log:\n{log}"));
    assert_eq!(stopped["fields"]["unfinished"], 0, "{stopped}");

    // What it bound before exiting is bound, with its event; nothing else was touched.
    let pods = api::pods(client, ns).await.unwrap();
    let events = api::events(client, ns).await.unwrap();
    let bound: Vec<&Pod> = pods.iter().filter(|p| node_of(p).is_some()).collect();
    for p in &bound {
        let name = p.metadata.name.as_deref().unwrap();
        assert_eq!(events_about(&events, name, "Scheduled").len(), 1, "{name}");
    }
    assert!(bound.len() < n, "the backlog drained before the signal");
    let bound_at_exit = bound.len();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(bound_count(client, ns).await, bound_at_exit, "a bind landed after the process exited");

    // A new scheduler takes the rest.
    let _second = Ours::start(&p.plane, "second", None, &[]);
    assert_all_bound_once(client, ns, n, 0).await;
    println!("{bound_at_exit}/{n} bound at exit; released {}", stopped["fields"]["released"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_waiting_for_affinity_is_bound_within_a_second_of_its_target() {
    let Some(p) = plane("a_pod_waiting_for_affinity_is_bound_within_a_second_of_its_target").await else {
        return;
    };
    let client = &p.client;
    let ns = "affinity";
    api::create_namespace(client, ns).await.unwrap();
    let nodes: Vec<Node> = (0..3)
        .map(|i| {
            NodeBuilder::new(&format!("n{i}")).capacity("8", "32Gi", "110").label(ZONE, ["a", "b", "c"][i]).build()
        })
        .collect();
    api::create_nodes(client, &nodes, 3).await.unwrap();
    let watch = testing::bind_watch::BindWatch::start(client, ns).await.unwrap();
    let _ours = Ours::start(&p.plane, "custom-scheduler", None, &[]);
    let follower = pod(ns, "follower").pod_affinity(affinity_term(&[("app", "db")], ZONE)).build();
    api::create_pod(client, &follower).await.unwrap();
    api::wait_for("the follower to be found unschedulable", Duration::from_secs(30), || async {
        let pods = api::pods(client, ns).await.ok()?;
        pods.iter()
            .find(|p| p.metadata.name.as_deref() == Some("follower"))
            .and_then(pod_scheduled)
            .filter(|c| c.0 == "False")
    })
    .await;
    // Past the follower's first backoff (1 s), its target arrives and this scheduler binds it.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    api::create_pod(client, &pod(ns, "db").label("app", "db").build()).await.unwrap();
    let pods = api::wait_bound(client, ns, 2, Duration::from_secs(30)).await;
    // The watch may trail the list that saw both bound.
    api::wait_for("the watch to see both bindings", Duration::from_secs(10), || async {
        (watch.count() >= 2).then_some(())
    })
    .await;
    let times = watch.times();
    let gap = times["follower"].saturating_duration_since(times["db"]);
    assert!(gap < Duration::from_secs(1), "the follower was bound {gap:?} after its target");
    let zone_of = |name: &str| {
        let node = pods.iter().find(|p| p.metadata.name.as_deref() == Some(name)).and_then(node_of).unwrap();
        nodes.iter().find(|n| n.metadata.name.as_deref() == Some(node)).unwrap().metadata.labels.as_ref().unwrap()[ZONE]
            .clone()
    };
    assert_eq!(zone_of("follower"), zone_of("db"));
    println!("follower bound {gap:?} after its target");
}

/// Zone counts of the bound pods whose name starts with `prefix`.
fn zone_counts(pods: &[Pod], nodes: &[Node], prefix: &str) -> BTreeMap<String, usize> {
    let zone: BTreeMap<&str, String> = nodes
        .iter()
        .map(|n| (n.metadata.name.as_deref().unwrap_or(""), n.metadata.labels.as_ref().unwrap()[ZONE].clone()))
        .collect();
    let mut counts = BTreeMap::new();
    for p in pods.iter().filter(|p| p.metadata.name.as_deref().unwrap_or("").starts_with(prefix)) {
        if let Some(n) = node_of(p) {
            *counts.entry(zone[n].clone()).or_default() += 1;
        }
    }
    counts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_sets_pods_spread_over_zones_as_kube_scheduler_spreads_them() {
    let Some(p) = plane("a_replica_sets_pods_spread_over_zones_as_kube_scheduler_spreads_them").await else {
        return;
    };
    let client = &p.client;
    let ns = "spread";
    api::create_namespace(client, ns).await.unwrap();
    // Zone a has four nodes, b and c one each: least-allocated alone puts most pods in a.
    let mut nodes: Vec<Node> = (0..4)
        .map(|i| NodeBuilder::new(&format!("a{i}")).capacity("16", "64Gi", "110").label(ZONE, "a").build())
        .collect();
    nodes.push(NodeBuilder::new("b0").capacity("16", "64Gi", "110").label(ZONE, "b").build());
    nodes.push(NodeBuilder::new("c0").capacity("16", "64Gi", "110").label(ZONE, "c").build());
    api::create_nodes(client, &nodes, 6).await.unwrap();
    let rs: k8s_openapi::api::apps::v1::ReplicaSet = serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web", "namespace": ns},
        "spec": {"replicas": 12, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "app", "image": "app:1"}]}}}
    }))
    .unwrap();
    let rs = kube::Api::namespaced(client.clone(), ns).create(&Default::default(), &rs).await.unwrap();
    let owner = k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
        api_version: "apps/v1".into(),
        kind: "ReplicaSet".into(),
        name: "web".into(),
        uid: rs.metadata.uid.clone().unwrap(),
        controller: Some(true),
        ..Default::default()
    };
    // No controller-manager runs: the test creates the ReplicaSet's pods as it would.
    let replicas = |prefix: &str, owned: bool| -> Vec<Pod> {
        (0..12)
            .map(|i| {
                let mut pod = pod(ns, &format!("{prefix}-{i:02}")).label("app", "web").req("100m", "128Mi").build();
                if owned {
                    pod.metadata.owner_references = Some(vec![owner.clone()]);
                }
                pod
            })
            .collect()
    };
    let mut ours = Ours::start(&p.plane, "custom-scheduler", None, &[]);
    api::create_pods(client, &replicas("ours", true), 12).await.unwrap();
    let pods = api::wait_bound(client, ns, 12, Duration::from_secs(60)).await;
    let by_ours = zone_counts(&pods, &nodes, "ours-");
    // Unowned pods with the same labels get no default spreading: a different picture.
    api::create_pods(client, &replicas("loose", false), 12).await.unwrap();
    let pods = api::wait_bound(client, ns, 24, Duration::from_secs(60)).await;
    let loose = zone_counts(&pods, &nodes, "loose-");
    ours.process.stop(Duration::from_secs(10)).await;
    let pods_api: kube::Api<Pod> = kube::Api::namespaced(client.clone(), ns);
    let all = kube::api::DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
    pods_api.delete_collection(&all, &Default::default()).await.unwrap();
    api::wait_for("the pods to be gone", Duration::from_secs(30), || async {
        api::pods(client, ns).await.ok().filter(|l| l.is_empty()).map(|_| ())
    })
    .await;

    let config = serde_json::json!({"profiles": [{"schedulerName": "custom-scheduler"}]});
    let _kube = testing::start_kube_scheduler(&p.plane, "kube-scheduler", config).unwrap();
    api::create_pods(client, &replicas("kube", true), 12).await.unwrap();
    let pods = api::wait_bound(client, ns, 12, Duration::from_secs(60)).await;
    let by_kube = zone_counts(&pods, &nodes, "kube-");
    println!("zones: ours {by_ours:?}, kube-scheduler {by_kube:?}, without an owner {loose:?}");
    assert_eq!(by_ours, by_kube, "ours spread the ReplicaSet differently from kube-scheduler");
    assert_ne!(by_ours, loose, "default spreading made no difference");
}

/// The JSON log lines of a process, as (message, fields).
fn json_log(process: &testing::Process) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(process.log()).unwrap();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|l| l["fields"].clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_log_tells_start_up_sync_leadership_and_a_periodic_summary() {
    let Some(p) = plane("the_default_log_tells_start_up_sync_leadership_and_a_periodic_summary").await else {
        return;
    };
    let client = &p.client;
    let ns = "logs";
    small_backlog(client, ns, 20).await;
    api::create_pod(client, &pod(ns, "too-big").req("64", "1Gi").build()).await.unwrap();
    let flags = ["--leader-elect", "true", "--summary-interval", "1s", "--log-format", "json"];
    let ours = Ours::start(&p.plane, "custom-scheduler", None, &flags);
    api::wait_bound(client, ns, 20, Duration::from_secs(60)).await;
    let summaries = api::wait_for("two summary lines", Duration::from_secs(10), || async {
        let lines = json_log(&ours.process);
        let s: Vec<serde_json::Value> = lines.into_iter().filter(|l| l["message"] == "summary").collect();
        (s.len() >= 2).then_some(s)
    })
    .await;
    let lines = json_log(&ours.process);
    let find = |m: &str| {
        lines.iter().find(|l| l["message"] == m).cloned().unwrap_or_else(|| panic!("no {m:?} line in {lines:?}"))
    };
    find("starting custom-scheduler");
    find("became leader");
    let synced = find("caches synced");
    assert_eq!(synced["nodes"], 10, "{synced}");
    assert_eq!(synced["pending"], 21, "{synced}");
    for kind in ["nodes", "pods", "namespaces"] {
        assert!(lines.iter().any(|l| l["message"] == "listed" && l["kind"] == kind), "no listed line for {kind}");
    }
    assert!(find("first pod bound")["ms"].as_u64().is_some());
    let scheduled: u64 = summaries.iter().map(|l| l["scheduled"].as_u64().unwrap_or(0)).sum();
    assert!(scheduled <= 20 && summaries.last().unwrap()["waiting"] == 1, "{summaries:?}");
    // Per-pod lines are debug-level, as kube-scheduler keeps them below its default verbosity.
    assert!(!lines.iter().any(|l| l["message"] == "bound"), "per-pod lines at the default level");
}
