//! `custom-scheduler extender` called by a real kube-scheduler v1.36.2, on a real
//! kube-apiserver, both started by the tests from `KUBE_ASSETS`. kube-scheduler is told
//! to ignore `nvidia.com/gpu` (`managedResources` with `ignoredByScheduler: true`), so
//! only the extender keeps GPU pods off nodes without free GPUs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod realapi;

use std::collections::BTreeMap;
use std::time::Duration;

use algorithms::builders::{NodeBuilder, PodBuilder};
use k8s_openapi::api::core::v1::{Node, Pod};
use realapi::{OurExtender, events_about, plane, pod_scheduled};
use serde_json::{Value, json};
use testing::api::{self, node_of};
use testing::check::placement_errors;

const GPU: &str = "nvidia.com/gpu";
const NS: &str = "ext";

/// Four CPU nodes and two nodes with 4 GPUs each, none tainted: without the extender,
/// kube-scheduler would put GPU pods anywhere.
fn nodes() -> Vec<Node> {
    let mut nodes: Vec<Node> =
        (0..4).map(|i| NodeBuilder::new(&format!("cpu-{i}")).capacity("8", "32Gi", "110").build()).collect();
    nodes.extend(
        (0..2).map(|i| NodeBuilder::new(&format!("gpu-{i}")).capacity("8", "32Gi", "110").resource(GPU, "4").build()),
    );
    nodes
}

fn gpu_pod(name: &str, gpus: &str) -> Pod {
    PodBuilder::new(name).namespace(NS).req("100m", "128Mi").device(GPU, gpus).build()
}

fn plain_pod(name: &str) -> Pod {
    PodBuilder::new(name).namespace(NS).req("100m", "128Mi").build()
}

/// kube-scheduler's configuration with one extender stanza.
fn with_extender(stanza: Value) -> Value {
    let mut ext = json!({
        "filterVerb": "filter",
        "prioritizeVerb": "prioritize",
        "weight": 5,
        "managedResources": [{"name": GPU, "ignoredByScheduler": true}],
    });
    if let (Some(e), Some(s)) = (ext.as_object_mut(), stanza.as_object()) {
        e.extend(s.clone());
    }
    json!({"clientConnection": {"qps": 5000, "burst": 5000}, "extenders": [ext]})
}

async fn setup(client: &kube::Client) {
    api::create_namespace(client, NS).await.unwrap();
    api::create_nodes(client, &nodes(), 6).await.unwrap();
}

fn by_name(pods: &[Pod]) -> BTreeMap<String, &Pod> {
    pods.iter().map(|p| (p.metadata.name.clone().unwrap_or_default(), p)).collect()
}

/// Waits until the pod has a `PodScheduled=False` message and returns it.
async fn unschedulable_message(client: &kube::Client, name: &str) -> String {
    api::wait_for(&format!("{name} to be reported unschedulable"), Duration::from_secs(60), || async {
        let pods = api::pods(client, NS).await.ok()?;
        let p = pods.iter().find(|p| p.metadata.name.as_deref() == Some(name))?;
        pod_scheduled(p).filter(|c| c.0 == "False").and_then(|c| c.2)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_node_cache_the_extender_keeps_gpu_pods_on_gpu_nodes() {
    let Some(p) = plane("without_a_node_cache_the_extender_keeps_gpu_pods_on_gpu_nodes").await else {
        return;
    };
    let client = &p.client;
    setup(client).await;
    // Stateless: it judges the NodeList kube-scheduler sends.
    let ext = OurExtender::start(&p.plane, "extender", false, &[]).await;
    let config = with_extender(json!({"urlPrefix": ext.url(), "nodeCacheCapable": false}));
    let _kube = testing::start_kube_scheduler(&p.plane, "kube-scheduler", config).unwrap();
    // Only pods that request the managed resource reach the extender: the plain pods are
    // bound without a single filter call (counted before GPU pods exist, since
    // kube-scheduler retries an unschedulable GPU pod a time-dependent number of times).
    let plain: Vec<Pod> = (0..6).map(|i| plain_pod(&format!("plain-{i}"))).collect();
    api::create_pods(client, &plain, 6).await.unwrap();
    api::wait_bound(client, NS, 6, Duration::from_secs(60)).await;
    assert_eq!(ext.requests("filter").await, 0.0, "a pod without GPUs reached the extender");
    let mut pods: Vec<Pod> = (0..4).map(|i| gpu_pod(&format!("gpu-{i}"), "1")).collect();
    pods.push(gpu_pod("too-many", "5"));
    api::create_pods(client, &pods, 8).await.unwrap();

    let bound = api::wait_bound(client, NS, 10, Duration::from_secs(60)).await;
    for (name, pod) in by_name(&bound) {
        if name.starts_with("gpu-") {
            assert!(node_of(pod).is_some_and(|n| n.starts_with("gpu-")), "{name} on {:?}", node_of(pod));
        }
    }
    let message = unschedulable_message(client, "too-many").await;
    assert!(message.starts_with("0/6 nodes are available: 6 Insufficient nvidia.com/gpu."), "{message}");
    assert!(placement_errors(&api::nodes(client).await.unwrap(), &bound).is_empty());
    let filters = ext.requests("filter").await;
    assert!(filters >= 5.0, "every GPU pod was filtered by the extender: {filters} calls");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_node_cache_the_extender_counts_gpus_in_use_and_packs_them() {
    let Some(p) = plane("with_a_node_cache_the_extender_counts_gpus_in_use_and_packs_them").await else {
        return;
    };
    let client = &p.client;
    setup(client).await;
    // Three of gpu-0's four GPUs are taken by a pod bound before anything started.
    let used = PodBuilder::new("used").namespace(NS).req("100m", "128Mi").device(GPU, "3").node_name("gpu-0").build();
    api::create_pod(client, &used).await.unwrap();
    let ext = OurExtender::start(&p.plane, "extender", true, &["--managed-resource", GPU]).await;
    let config = with_extender(json!({"urlPrefix": ext.url(), "nodeCacheCapable": true}));
    let _kube = testing::start_kube_scheduler(&p.plane, "kube-scheduler", config).unwrap();

    // One at a time, each after the previous is bound and the extender has had a moment to
    // see it: without bindVerb, the extender learns of kube-scheduler's binds from its watch.
    let mut placed = BTreeMap::new();
    for (name, gpus, want) in [("two", "2", "gpu-1"), ("one", "1", "gpu-0"), ("another", "1", "gpu-1")] {
        api::create_pod(client, &gpu_pod(name, gpus)).await.unwrap();
        let node = api::wait_for(&format!("{name} to be bound"), Duration::from_secs(30), || async {
            let pods = api::pods(client, NS).await.ok()?;
            pods.iter().find(|p| p.metadata.name.as_deref() == Some(name)).and_then(|p| node_of(p).map(String::from))
        })
        .await;
        // gpu-0 has one GPU free: "two" cannot go there; "one" fills it exactly (best fit).
        assert_eq!(node, want, "{name}");
        placed.insert(name, node);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    // gpu-0 is full and gpu-1 has one GPU left.
    api::create_pod(client, &gpu_pod("three", "3")).await.unwrap();
    let message = unschedulable_message(client, "three").await;
    assert!(message.starts_with("0/6 nodes are available: 6 Insufficient nvidia.com/gpu."), "{message}");
    let pods = api::pods(client, NS).await.unwrap();
    assert!(placement_errors(&api::nodes(client).await.unwrap(), &pods).is_empty());
    assert!(ext.requests("filter").await >= 4.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_bind_verb_a_burst_never_overcommits_gpus() {
    let Some(p) = plane("with_bind_verb_a_burst_never_overcommits_gpus").await else {
        return;
    };
    let client = &p.client;
    setup(client).await;
    let ext = OurExtender::start(&p.plane, "extender", true, &["--managed-resource", GPU]).await;
    let config = with_extender(json!({"urlPrefix": ext.url(), "nodeCacheCapable": true, "bindVerb": "bind"}));
    let _kube = testing::start_kube_scheduler(&p.plane, "kube-scheduler", config).unwrap();
    // Ten 1-GPU pods at once for eight GPUs: the extender binds them, and its bind refuses
    // a pod that no longer fits, so kube-scheduler's quick succession cannot overcommit.
    let pods: Vec<Pod> = (0..10).map(|i| gpu_pod(&format!("burst-{i}"), "1")).collect();
    api::create_pods(client, &pods, 10).await.unwrap();
    let bound = api::wait_bound(client, NS, 8, Duration::from_secs(60)).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let pods = api::pods(client, NS).await.unwrap();
    let bound_now = pods.iter().filter(|p| node_of(p).is_some()).count();
    assert_eq!(bound_now, 8, "{} bound at first", bound.len());
    assert!(pods.iter().filter_map(node_of).all(|n| n.starts_with("gpu-")));
    let errors = placement_errors(&api::nodes(client).await.unwrap(), &pods);
    assert!(errors.is_empty(), "{errors:?}");
    let binds = ext.requests("bind").await;
    assert!(binds >= 8.0, "the extender did not bind");
    println!("{binds} bind calls for 8 bound pods");
    let events = api::events(client, NS).await.unwrap();
    for p in pods.iter().filter(|p| node_of(p).is_some()) {
        let name = p.metadata.name.as_deref().unwrap();
        let scheduled = events_about(&events, name, "Scheduled");
        assert_eq!(scheduled.len(), 1, "{name}");
        assert_eq!(scheduled[0].reporting_controller.as_deref(), Some("default-scheduler"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_the_extender_dies_ignorable_decides_whether_kube_scheduler_goes_on() {
    let Some(p) = plane("when_the_extender_dies_ignorable_decides_whether_kube_scheduler_goes_on").await else {
        return;
    };
    let client = &p.client;
    setup(client).await;
    let mut ext = OurExtender::start(&p.plane, "extender", true, &["--managed-resource", GPU]).await;
    let listen = ext.listen;
    // Two kube-schedulers, one profile each, the same extender: ignorable in one, not the
    // other. Both are stopped when the test ends.
    let mut schedulers = Vec::new();
    for (name, ignorable) in [("lenient", true), ("strict", false)] {
        let mut config =
            with_extender(json!({"urlPrefix": ext.url(), "nodeCacheCapable": true, "ignorable": ignorable}));
        config["profiles"] = json!([{"schedulerName": name}]);
        schedulers.push(testing::start_kube_scheduler(&p.plane, name, config).unwrap());
    }
    ext.process.kill();

    let lenient =
        PodBuilder::new("lenient").namespace(NS).scheduler("lenient").req("100m", "128Mi").device(GPU, "1").build();
    let strict =
        PodBuilder::new("strict").namespace(NS).scheduler("strict").req("100m", "128Mi").device(GPU, "1").build();
    api::create_pods(client, &[lenient, strict], 2).await.unwrap();
    // ignorable: kube-scheduler goes on without the extender (and, ignoring GPUs itself,
    // may put the pod anywhere).
    api::wait_bound(client, NS, 1, Duration::from_secs(30)).await;
    let message = unschedulable_message(client, "strict").await;
    let pods = api::pods(client, NS).await.unwrap();
    let pods = by_name(&pods);
    assert!(node_of(pods["lenient"]).is_some());
    assert!(node_of(pods["strict"]).is_none(), "strict was bound without its extender");
    assert!(message.contains("connection refused") || message.contains("extender"), "{message}");

    // Back up on the same address: the strict pod is retried and lands on a GPU node.
    let _ext = OurExtender::start_on(&p.plane, "extender-again", listen, true, &["--managed-resource", GPU]).await;
    let node = api::wait_for("strict to be bound once the extender is back", Duration::from_secs(60), || async {
        let pods = api::pods(client, NS).await.ok()?;
        pods.iter().find(|p| p.metadata.name.as_deref() == Some("strict")).and_then(|p| node_of(p).map(String::from))
    })
    .await;
    assert!(node.starts_with("gpu-"), "strict on {node}");
    println!("strict pod while the extender was down: {message}");
}

/// An example of `deploy/extender/kube-scheduler/` as kube-scheduler's configuration, with
/// its `urlPrefix` pointed at `ext` and its client and election left to the harness.
fn example(file: &str, ext: &OurExtender) -> (Value, std::path::PathBuf) {
    let path = std::path::Path::new("../deploy/extender/kube-scheduler").join(file);
    let mut config: Value = serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    config["extenders"][0]["urlPrefix"] = json!(ext.url());
    config.as_object_mut().unwrap().remove("clientConnection");
    config["leaderElection"] = json!({"leaderElect": false});
    (config, path)
}

/// The documented pairs, as written: the stateless extender with the stateless example,
/// and the extender with cluster access with the two that have it bind. Each keeps GPU
/// pods on GPU nodes within their GPUs; the stateless one refuses the examples that ask
/// it to bind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_examples_work_with_the_documented_commands() {
    let Some(p) = plane("the_documented_examples_work_with_the_documented_commands").await else {
        return;
    };
    let client = &p.client;
    setup(client).await;
    for (i, (file, cluster)) in [
        ("kube-scheduler-stateless.yaml", false),
        ("kube-scheduler-nodecache-false.yaml", true),
        ("kube-scheduler-nodecache-true.yaml", true),
    ]
    .into_iter()
    .enumerate()
    {
        let path = format!("../deploy/extender/kube-scheduler/{file}");
        let mut extra = vec!["--config", path.as_str()];
        if cluster {
            // deploy/extender's Deployment runs it with --in-cluster; here a kubeconfig.
            extra.extend(["--managed-resource", GPU]);
            let out = std::process::Command::new(realapi::BIN)
                .args(["extender", "--listen", "127.0.0.1:0", "--config", &path])
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{file} without cluster access: {stderr}");
            assert!(stderr.contains("extenders[0] sets bindVerb \"bind\""), "{file}: {stderr}");
        }
        let ext = OurExtender::start(&p.plane, &format!("extender-{i}"), cluster, &extra).await;
        let (config, _) = example(file, &ext);
        let kube = testing::start_kube_scheduler(&p.plane, &format!("kube-scheduler-{i}"), config).unwrap();
        // Two GPU pods a case: the three cases take six of the eight GPUs.
        let pods: Vec<Pod> = (0..2).map(|j| gpu_pod(&format!("gpu-{i}-{j}"), "1")).collect();
        api::create_pods(client, &pods, 2).await.unwrap();
        let bound = api::wait_bound(client, NS, 2 * (i + 1), Duration::from_secs(60)).await;
        for pod in
            bound.iter().filter(|p| p.metadata.name.as_deref().is_some_and(|n| n.starts_with(&format!("gpu-{i}-"))))
        {
            assert!(node_of(pod).is_some_and(|n| n.starts_with("gpu-")), "{file}: {:?}", pod.metadata.name);
        }
        assert!(placement_errors(&api::nodes(client).await.unwrap(), &bound).is_empty(), "{file}");
        assert!(ext.requests("filter").await >= 2.0, "{file}");
        if cluster {
            assert!(ext.requests("bind").await >= 2.0, "{file}: the extender binds");
        }
        drop(kube);
        drop(ext);
    }
}
