//! The standalone scheduler against an in-process fake API server over real HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use algorithms::builders::{NodeBuilder, PodBuilder, affinity_term};
use common::fake_api::{FakeApi, Kind};
use scheduler::run::{RunOptions, run};
use serde_json::{Value, json};
use tokio::sync::oneshot;

fn node(name: &str, cpu: &str, zone: &str) -> Value {
    let n = NodeBuilder::new(name).capacity(cpu, "16Gi", "110").label("topology.kubernetes.io/zone", zone).build();
    serde_json::to_value(n).unwrap()
}

fn pod(name: &str, cpu: &str) -> Value {
    let p = PodBuilder::new(name).scheduler("custom-scheduler").req(cpu, "128Mi").build();
    serde_json::to_value(p).unwrap()
}

fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

struct Running {
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let _ = tokio::time::timeout(Duration::from_secs(40), self.task).await;
    }
}

fn free_addr() -> std::net::SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

fn start(api: &FakeApi, config: Option<&str>, identity: &str) -> (Running, std::net::SocketAddr) {
    let config_path = config.map(|c| {
        let p =
            std::env::temp_dir().join(format!("cs-config-{}-{identity}-{}.yaml", std::process::id(), api.addr.port()));
        std::fs::write(&p, c).unwrap();
        p
    });
    let listen = free_addr();
    let opts = RunOptions {
        kubeconfig: Some(api.kubeconfig_file()),
        config: config_path,
        listen: Some(listen),
        secure: None,
        leader_elect: None,
        bind_concurrency: 32,
        identity: identity.to_string(),
        seed: 1,
        summary_interval: Duration::from_secs(30),
        feature_gates: Default::default(),
    };
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        run(opts, async move {
            let _ = rx.await;
        })
        .await
        .unwrap();
    });
    (Running { stop: Some(tx), task }, listen)
}

async fn wait_for(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + timeout;
    while !cond() {
        if tokio::time::Instant::now() > deadline {
            panic!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every binding is unique and no node holds more CPU than it has.
fn check_bindings(api: &FakeApi, expected: usize) {
    let bindings = api.bindings();
    let unique: BTreeSet<&String> = bindings.iter().map(|(p, _)| p).collect();
    assert_eq!(unique.len(), bindings.len(), "a pod was bound twice");
    assert_eq!(bindings.len(), expected);
    let mut used: BTreeMap<String, i64> = BTreeMap::new();
    for p in api.list(Kind::Pod) {
        if let Some(n) = p["spec"]["nodeName"].as_str() {
            let cpu = p["spec"]["containers"][0]["resources"]["requests"]["cpu"].as_str().unwrap_or("0");
            let milli = algorithms::quantity::Quantity::parse(cpu).unwrap().milli_value();
            *used.entry(n.to_string()).or_default() += milli;
        }
    }
    for n in api.list(Kind::Node) {
        let name = n["metadata"]["name"].as_str().unwrap();
        let alloc = algorithms::quantity::Quantity::parse(n["status"]["allocatable"]["cpu"].as_str().unwrap())
            .unwrap()
            .milli_value();
        assert!(used.get(name).copied().unwrap_or(0) <= alloc, "node {name} over-committed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binds_a_thousand_pods_on_a_hundred_nodes_exactly_once() {
    let api = FakeApi::start().await;
    api.apply(Kind::Namespace, namespace("default"));
    for i in 0..100 {
        api.apply(Kind::Node, node(&format!("n{i:03}"), "4", ["a", "b", "c"][i % 3]));
    }
    let (sched, listen) = start(&api, None, "solo");
    for i in 0..1000 {
        api.apply(Kind::Pod, pod(&format!("p{i:04}"), "250m"));
    }
    wait_for("1000 bindings", Duration::from_secs(120), || api.bindings().len() >= 1000).await;
    check_bindings(&api, 1000);
    // Readiness and metrics are served.
    let ready = reqwest_get(listen, "/readyz").await;
    assert!(ready.starts_with("ok"), "{ready}");
    let metrics = reqwest_get(listen, "/metrics").await;
    assert!(
        metrics.contains("scheduler_schedule_attempts_total{result=\"scheduled\",profile=\"custom-scheduler\"} 1000"),
        "{metrics}"
    );
    assert!(metrics.contains("scheduler_pending_pods"), "{metrics}");
    let events: Vec<Value> = api.list(Kind::Event).into_iter().filter(|e| e["reason"] == "Scheduled").collect();
    assert!(!events.is_empty());
    assert!(events[0]["note"].as_str().unwrap().starts_with("Successfully assigned default/p"));
    sched.stop().await;
}

async fn reqwest_get(addr: std::net::SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unschedulable_pod_is_reported_then_bound_when_a_node_fits() {
    let api = FakeApi::start().await;
    api.apply(Kind::Namespace, namespace("default"));
    api.apply(Kind::Node, node("small", "1", "a"));
    let (sched, _) = start(&api, None, "solo");
    api.apply(Kind::Pod, pod("big", "3"));
    wait_for("a FailedScheduling event", Duration::from_secs(30), || {
        api.list(Kind::Event).iter().any(|e| e["reason"] == "FailedScheduling")
    })
    .await;
    let ev = api.list(Kind::Event).into_iter().find(|e| e["reason"] == "FailedScheduling").unwrap();
    assert_eq!(
        ev["note"],
        "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, preemption: 0/1 nodes are \
         available: 1 Preemption is not helpful for scheduling."
    );
    assert_eq!(ev["type"], "Warning");
    wait_for("the PodScheduled condition", Duration::from_secs(30), || {
        api.get(Kind::Pod, "default", "big").is_some_and(|p| {
            p["status"]["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "PodScheduled" && c["status"] == "False" && c["reason"] == "Unschedulable")
            })
        })
    })
    .await;
    api.apply(Kind::Node, node("large", "8", "b"));
    wait_for("the pod to be bound", Duration::from_secs(30), || !api.bindings().is_empty()).await;
    assert_eq!(api.bindings(), vec![("default/big".to_string(), "large".to_string())]);
    sched.stop().await;
}

/// A list that keeps failing is retried with a growing backoff: over eight seconds a
/// handful of attempts (200 ms doubling, with jitter, up to 5 s), not one every few
/// hundred milliseconds. Then it recovers and the node is used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_list_is_retried_with_a_growing_backoff() {
    let api = FakeApi::start().await;
    api.apply(Kind::Namespace, namespace("default"));
    api.apply(Kind::Node, node("n1", "8", "a"));
    api.fail_next(Some(axum::http::Method::GET), "/api/v1/nodes", 500, 1000);
    let (sched, _) = start(&api, None, "patient");
    tokio::time::sleep(Duration::from_secs(8)).await;
    let attempts = 1000 - api.faults_remaining();
    assert!((2..=10).contains(&attempts), "{attempts} attempts to list nodes in 8 s");
    api.clear_faults();
    api.apply(Kind::Pod, pod("p", "100m"));
    wait_for("the pod bound once nodes list", Duration::from_secs(30), || api.bindings().len() == 1).await;
    sched.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_pod_is_lost_when_the_api_server_restarts_or_fails() {
    let api = FakeApi::start().await;
    api.apply(Kind::Namespace, namespace("default"));
    for i in 0..20 {
        api.apply(Kind::Node, node(&format!("n{i:02}"), "8", "a"));
    }
    // The first bindings fail with 500s; they must be retried.
    api.fail_next(Some(axum::http::Method::POST), "/binding", 500, 5);
    let (sched, _) = start(&api, None, "solo");
    for i in 0..150 {
        api.apply(Kind::Pod, pod(&format!("p{i:03}"), "100m"));
    }
    wait_for("some bindings", Duration::from_secs(60), || api.bindings().len() >= 50).await;
    api.restart();
    for i in 150..300 {
        api.apply(Kind::Pod, pod(&format!("p{i:03}"), "100m"));
    }
    api.drop_watches();
    api.set_delay(Duration::from_millis(5));
    // A pod deleted while the watches are down must not be bound.
    api.apply(Kind::Pod, pod("doomed", "100m"));
    api.delete(Kind::Pod, "default", "doomed");
    wait_for("300 bindings", Duration::from_secs(120), || api.bindings().len() >= 300).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    check_bindings(&api, 300);
    assert_eq!(api.faults_remaining(), 0, "the injected binding failures happened");
    assert!(api.get(Kind::Pod, "default", "doomed").is_none());
    sched.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spread_and_anti_affinity_hold_across_bindings() {
    let api = FakeApi::start().await;
    api.apply(Kind::Namespace, namespace("default"));
    for (i, z) in ["a", "a", "b", "b", "c", "c"].iter().enumerate() {
        api.apply(Kind::Node, node(&format!("n{i}"), "8", z));
    }
    let (sched, _) = start(&api, None, "solo");
    for i in 0..6 {
        let p = PodBuilder::new(&format!("web-{i}"))
            .scheduler("custom-scheduler")
            .label("app", "web")
            .req("100m", "64Mi")
            .pod_anti_affinity(affinity_term(&[("app", "web")], "kubernetes.io/hostname"))
            .build();
        api.apply(Kind::Pod, serde_json::to_value(p).unwrap());
    }
    wait_for("6 bindings", Duration::from_secs(60), || api.bindings().len() >= 6).await;
    let nodes: BTreeSet<String> = api.bindings().into_iter().map(|(_, n)| n).collect();
    assert_eq!(nodes.len(), 6, "anti-affinity puts each web pod on its own node");
    sched.stop().await;
}

const LEADER_CONFIG: &str = r#"
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: true
  leaseDuration: 2s
  renewDeadline: 1s
  retryPeriod: 200ms
  resourceName: custom-scheduler
  resourceNamespace: default
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_never_double_bind_and_the_standby_takes_over() {
    let api = FakeApi::start().await;
    api.apply(Kind::Namespace, namespace("default"));
    for i in 0..10 {
        api.apply(Kind::Node, node(&format!("n{i}"), "16", "a"));
    }
    let (first, _) = start(&api, Some(LEADER_CONFIG), "replica-a");
    let (second, _) = start(&api, Some(LEADER_CONFIG), "replica-b");
    for i in 0..100 {
        api.apply(Kind::Pod, pod(&format!("p{i:03}"), "100m"));
    }
    wait_for("100 bindings", Duration::from_secs(60), || api.bindings().len() >= 100).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(api.binding_attempts(), 100, "only the leader binds: the standby never tried");
    let lease = api.get(Kind::Lease, "default", "custom-scheduler").unwrap();
    let leader = lease["spec"]["holderIdentity"].as_str().unwrap().to_string();
    // Stop the leader; the standby must take over and schedule new pods.
    let (stop_first, keep) = if leader == "replica-a" { (first, second) } else { (second, first) };
    stop_first.stop().await;
    for i in 100..150 {
        api.apply(Kind::Pod, pod(&format!("p{i:03}"), "100m"));
    }
    wait_for("150 bindings", Duration::from_secs(60), || api.bindings().len() >= 150).await;
    let lease = api.get(Kind::Lease, "default", "custom-scheduler").unwrap();
    assert_ne!(lease["spec"]["holderIdentity"].as_str().unwrap(), leader);
    check_bindings(&api, 150);
    keep.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_writing_a_claims_node_unreserves_and_retries() {
    let api = FakeApi::start().await;
    api.apply(Kind::Namespace, namespace("default"));
    api.apply(Kind::Node, node("n1", "4", "a"));
    api.apply(
        Kind::StorageClass,
        json!({"metadata": {"name": "wffc"}, "provisioner": "csi.example.com",
               "volumeBindingMode": "WaitForFirstConsumer"}),
    );
    api.apply(
        Kind::PersistentVolumeClaim,
        json!({"metadata": {"name": "data", "namespace": "default", "uid": "uid-data"},
               "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "wffc",
                        "resources": {"requests": {"storage": "1Gi"}}}}),
    );
    // The first write of the claim's selected node conflicts (someone else changed it).
    api.fail_next(Some(axum::http::Method::PATCH), "persistentvolumeclaims/data", 409, 1);
    let (sched, _) = start(&api, None, "solo");
    let p = PodBuilder::new("p").scheduler("custom-scheduler").req("100m", "128Mi").claim("v", "data").build();
    api.apply(Kind::Pod, serde_json::to_value(p).unwrap());
    let selected = |api: &FakeApi| {
        api.get(Kind::PersistentVolumeClaim, "default", "data")
            .is_some_and(|c| c["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == "n1")
    };
    wait_for("the claim's node selected on the retry", Duration::from_secs(30), || selected(&api)).await;
    assert_eq!(api.faults_remaining(), 0);
    let reported = api.list(Kind::Event).into_iter().any(|e| {
        e["reason"] == "FailedScheduling"
            && e["note"].as_str().unwrap_or("").starts_with("running PreBind plugin \"VolumeBinding\"")
    });
    assert!(reported, "the conflict was not reported");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(api.bindings().is_empty(), "the pod was bound before its claim");
    // The provisioner's part: a volume, and the claim bound to it.
    api.apply(
        Kind::PersistentVolume,
        json!({"metadata": {"name": "pv-data"},
               "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "wffc",
                        "claimRef": {"namespace": "default", "name": "data", "uid": "uid-data"},
                        "csi": {"driver": "csi.example.com", "volumeHandle": "vol-1"}},
               "status": {"phase": "Bound"}}),
    );
    let mut claim = api.get(Kind::PersistentVolumeClaim, "default", "data").unwrap();
    claim["spec"]["volumeName"] = json!("pv-data");
    claim["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] = json!("yes");
    claim["status"] = json!({"phase": "Bound"});
    api.apply(Kind::PersistentVolumeClaim, claim);
    wait_for("the pod bound", Duration::from_secs(30), || api.bindings().len() == 1).await;
    assert_eq!(api.bindings()[0].1, "n1");
    sched.stop().await;
}

/// Informing writes (events, nominations) yield to a burst's binding cycles while their
/// writes are in flight, not only while one waits for a slot: the end of a burst, when
/// every cycle left holds a slot, is not slowed by them either. A Binding in flight
/// without any wait (a load the server keeps up with) holds nothing back.
#[tokio::test]
async fn a_binding_in_flight_keeps_informing_writes_waiting() {
    let api = FakeApi::start().await;
    api.apply(Kind::Node, node("n1", "4", "a"));
    api.apply(Kind::Pod, pod("p", "100m"));
    let kubeconfig = kube::config::Kubeconfig::read_from(api.kubeconfig_file()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await.unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let shared = std::sync::Arc::new(scheduler::run::Shared::new(
        scheduler::engine::Engine::new(Vec::new()),
        governor::Quota::per_second(std::num::NonZeroU32::MAX),
    ));
    let host = scheduler::run::binder::ApiHost::new(client, shared.clone(), 4);
    let info = algorithms::PodInfo::from_pod(&serde_json::from_value(pod("p", "100m")).unwrap()).unwrap();
    // Long enough for the looks below on a loaded machine; shorter than a burst's window.
    api.set_delay(Duration::from_millis(1000));
    let bind = |after_a_wait: bool| {
        let (host, info, shared) = (host.clone(), info.clone(), shared.clone());
        tokio::spawn(async move {
            if after_a_wait {
                // Another cycle waited for a slot a moment ago: a burst.
                drop(shared.foreground.waiting());
            }
            scheduler::binding::ClusterApi::bind(&host, &info, "n1").await
        })
    };
    let steady = bind(false);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!shared.foreground.busy(), "a Binding alone is no burst");
    assert!(matches!(steady.await.unwrap(), scheduler::binding::BindOutcome::Bound));
    api.apply(Kind::Pod, pod("p", "100m"));
    let burst = bind(true);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(shared.foreground.busy(), "the burst's Binding is in flight");
    let outcome = burst.await.unwrap();
    assert!(matches!(outcome, scheduler::binding::BindOutcome::Bound), "{outcome:?}");
    assert!(!shared.foreground.busy());
}
