//! `custom-scheduler run` under the real Kueue v0.17.0 (built from its Go module by
//! `.ci/install-tools`, named by `KUEUE_BIN`), on the real kube-apiserver v1.36.2 with
//! kube-controller-manager running the Job controller. There is no kubelet: the tests
//! play it, marking pods of finished work `Succeeded` and removing deleted pods at once.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod realapi;

use std::collections::BTreeMap;
use std::time::Duration;

use algorithms::builders::NodeBuilder;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use realapi::{Ours, plane};
use serde_json::{Value, json};
use testing::api::{self, node_of, wait_for};

const NS: &str = "team";
const QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";

/// What runs beside the control plane in these tests: kube-controller-manager's Job
/// controller, Kueue, custom-scheduler, and the played kubelet that removes deleted pods.
struct Beside {
    _controllers: testing::Process,
    _kueue: testing::Process,
    ours: Ours,
    _kubelet: tokio::task::JoinHandle<()>,
}

impl Beside {
    async fn start(p: &realapi::Plane, bin: &std::path::Path) -> Beside {
        let controllers = &["--controllers=job"];
        Beside {
            _controllers: testing::start_controller_manager(&p.plane, "kube-controller-manager", controllers).unwrap(),
            _kueue: testing::kueue::start_kueue(&p.plane, &p.client, "kueue", bin).await.unwrap(),
            ours: Ours::start(&p.plane, "custom-scheduler", None, &[]),
            _kubelet: realapi::kubelet(p.client.clone(), NS),
        }
    }
}

/// The LocalQueue `lq` in the tests' namespace, feeding the ClusterQueue `cq`.
async fn local_queue(client: &kube::Client) {
    create(
        client,
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
        "metadata": {"name": "lq", "namespace": NS}, "spec": {"clusterQueue": "cq"}}),
    )
    .await;
}

/// Creates any object given as JSON.
async fn create(client: &kube::Client, object: Value) {
    api::create_object(client, &object).await.unwrap_or_else(|e| panic!("creating {object}: {e}"));
}

/// A Job of `pods` pods of `cpu` each for the local queue `lq`, created suspended with its
/// queue label, as Kueue's webhook would leave it.
fn job(name: &str, pods: i32, cpu: &str, priority_class: Option<&str>) -> Value {
    let mut pod = json!({
        "schedulerName": "custom-scheduler",
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
    });
    if let Some(pc) = priority_class {
        pod["priorityClassName"] = json!(pc);
    }
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": NS, "labels": {QUEUE_LABEL: "lq"}},
        "spec": {"suspend": true, "parallelism": pods, "completions": pods,
                 "template": {"metadata": {"labels": {"job": name}}, "spec": pod}},
    })
}

/// The pods of each Job, by Job name: (pod name, node, terminating).
async fn pods_by_job(client: &kube::Client) -> BTreeMap<String, Vec<(String, Option<String>, bool)>> {
    let mut out: BTreeMap<String, Vec<_>> = BTreeMap::new();
    for p in api::pods(client, NS).await.unwrap() {
        let job = p.metadata.labels.as_ref().and_then(|l| l.get("job")).cloned().unwrap_or_default();
        let entry =
            (p.metadata.name.clone().unwrap(), node_of(&p).map(String::from), p.metadata.deletion_timestamp.is_some());
        out.entry(job).or_default().push(entry);
    }
    out
}

async fn suspended(client: &kube::Client, name: &str) -> bool {
    let job = Api::<Job>::namespaced(client.clone(), NS).get(name).await.unwrap();
    job.spec.and_then(|s| s.suspend).unwrap_or(false)
}

/// Waits until the Job's pods are all bound, and returns their nodes.
async fn bound(client: &kube::Client, name: &str, pods: usize) -> Vec<String> {
    wait_for(&format!("{name}'s {pods} pods bound"), Duration::from_secs(90), || async {
        let all = pods_by_job(client).await;
        let live: Vec<String> =
            all.get(name)?.iter().filter(|(_, _, gone)| !gone).filter_map(|(_, node, _)| node.clone()).collect();
        (live.len() == pods).then_some(live)
    })
    .await
}

/// Plays the kubelet for a Job whose work is done: its pods end `Succeeded`.
async fn finish(client: &kube::Client, name: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    for (pod, _, _) in pods_by_job(client).await.remove(name).unwrap_or_default() {
        let status = json!({"status": {"phase": "Succeeded", "conditions": [{"type": "Ready", "status": "False"}]}});
        pods.patch_status(&pod, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    }
}

/// Kueue's queues in front of us: a ClusterQueue of 4 CPUs on the `on-demand` flavor
/// admits two of three 2-CPU Jobs; their pods are placed by custom-scheduler on the
/// flavor's nodes only (the node selector Kueue injects), although the spot node is the
/// emptiest; the third stays suspended with no pods until the first finishes. Then a
/// high-priority Job makes Kueue evict lower-priority work: the evicted Jobs' pods are
/// deleted and never bound again, and the high-priority Job's pods are placed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kueue_admits_within_quota_and_we_place_what_it_admits_on_its_flavor() {
    let test = "kueue_admits_within_quota_and_we_place_what_it_admits_on_its_flavor";
    let Some(bin) = testing::kueue::kueue_or_skip(test) else { return };
    let Some(p) = plane(test).await else { return };
    let client = &p.client;
    api::create_namespace(client, NS).await.unwrap();
    let mut nodes: Vec<_> = (0..2)
        .map(|i| {
            NodeBuilder::new(&format!("od-{i}"))
                .capacity("4", "16Gi", "110")
                .label("instance-type", "on-demand")
                .build()
        })
        .collect();
    nodes.push(NodeBuilder::new("spot-0").capacity("16", "64Gi", "110").label("instance-type", "spot").build());
    api::create_nodes(client, &nodes, 3).await.unwrap();
    create(
        client,
        json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": "high"}, "value": 1000}),
    )
    .await;

    let beside = Beside::start(&p, &bin).await;

    create(
        client,
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
        "metadata": {"name": "on-demand"}, "spec": {"nodeLabels": {"instance-type": "on-demand"}}}),
    )
    .await;
    create(client, json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {"namespaceSelector": {},
                 "preemption": {"withinClusterQueue": "LowerPriority"},
                 "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{"name": "on-demand",
                     "resources": [{"name": "cpu", "nominalQuota": "4"}, {"name": "memory", "nominalQuota": "16Gi"}]}]}]}})).await;
    local_queue(client).await;

    let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
    for name in ["a", "b", "c"] {
        jobs.create(&PostParams::default(), &serde_json::from_value(job(name, 2, "1", None)).unwrap()).await.unwrap();
    }
    // Kueue admits two (in an order of its own: the three were created within a second).
    let running = wait_for("Kueue to admit two Jobs", Duration::from_secs(60), || async {
        let mut running = Vec::new();
        for name in ["a", "b", "c"] {
            if !suspended(client, name).await {
                running.push(name);
            }
        }
        (running.len() == 2).then_some(running)
    })
    .await;
    let waiting = ["a", "b", "c"].into_iter().find(|n| !running.contains(n)).unwrap();
    for name in &running {
        let placed = bound(client, name, 2).await;
        assert!(placed.iter().all(|n| n.starts_with("od-")), "{name} placed off its flavor: {placed:?}");
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(suspended(client, waiting).await, "a third Job was admitted beyond the quota");
    assert!(!pods_by_job(client).await.contains_key(waiting), "the suspended Job has pods");

    // One finishes: its quota goes to the one waiting.
    finish(client, running[0]).await;
    let placed = bound(client, waiting, 2).await;
    assert!(placed.iter().all(|n| n.starts_with("od-")), "{waiting} placed off its flavor: {placed:?}");
    let lower = [running[1], waiting];

    // A high-priority Job of 4 CPUs: Kueue evicts the two lower-priority Jobs running.
    let urgent = job("urgent", 2, "2", Some("high"));
    jobs.create(&PostParams::default(), &serde_json::from_value(urgent).unwrap()).await.unwrap();
    let placed = bound(client, "urgent", 2).await;
    assert!(placed.iter().all(|n| n.starts_with("od-")), "urgent placed off its flavor: {placed:?}");
    for name in lower {
        assert!(suspended(client, name).await, "Kueue did not evict {name}");
    }
    // Evicted pods are gone, and nothing of the evicted Jobs is bound again.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let all = pods_by_job(client).await;
    for name in lower {
        let live: Vec<_> =
            all.get(name).map(|v| v.iter().filter(|(_, n, gone)| n.is_some() && !gone).collect()).unwrap_or_default();
        assert!(live.is_empty(), "{name} has bound pods after its eviction: {live:?}");
    }
    let nodes = api::nodes(client).await.unwrap();
    let pods = api::pods(client, NS).await.unwrap();
    assert!(testing::check::placement_errors(&nodes, &pods).is_empty());
    let log = std::fs::read_to_string(beside.ours.process.log()).unwrap();
    assert!(!log.contains("Status {"), "{log}");
}

/// Kueue's topology-aware scheduling: a Job that requires one rack gets its rack from
/// Kueue, which holds its pods behind its scheduling gate and ungates each with node
/// selectors for its domain; custom-scheduler places every pod inside the domain Kueue
/// gave it. Rack r1 is partly taken by a running pod, so only r2 holds the whole Job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kueue_topology_assignments_are_honoured() {
    const RACK: &str = "cloud.example.com/rack";
    let test = "kueue_topology_assignments_are_honoured";
    let Some(bin) = testing::kueue::kueue_or_skip(test) else { return };
    let Some(p) = plane(test).await else { return };
    let client = &p.client;
    api::create_namespace(client, NS).await.unwrap();
    let nodes: Vec<_> = ["r1-0", "r1-1", "r2-0", "r2-1"]
        .iter()
        .map(|n| {
            let rack = &n[..2];
            NodeBuilder::new(n).capacity("4", "16Gi", "110").label(RACK, rack).label("pool", "tas").build()
        })
        .collect();
    api::create_nodes(client, &nodes, 4).await.unwrap();
    // A running pod outside Kueue takes 3 of r1-0's CPUs.
    let running =
        algorithms::builders::PodBuilder::new("running").namespace(NS).req("3", "1Gi").node_name("r1-0").build();
    api::create_pod(client, &running).await.unwrap();

    let _beside = Beside::start(&p, &bin).await;

    create(
        client,
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
        "metadata": {"name": "default"},
        "spec": {"levels": [{"nodeLabel": RACK}, {"nodeLabel": "kubernetes.io/hostname"}]}}),
    )
    .await;
    create(
        client,
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
        "metadata": {"name": "tas"}, "spec": {"nodeLabels": {"pool": "tas"}, "topologyName": "default"}}),
    )
    .await;
    create(client, json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {"namespaceSelector": {},
                 "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{"name": "tas",
                     "resources": [{"name": "cpu", "nominalQuota": "100"}, {"name": "memory", "nominalQuota": "400Gi"}]}]}]}})).await;
    local_queue(client).await;

    let mut train = job("train", 4, "2", None);
    train["spec"]["template"]["metadata"]["annotations"] = json!({"kueue.x-k8s.io/podset-required-topology": RACK});
    let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
    jobs.create(&PostParams::default(), &serde_json::from_value(train).unwrap()).await.unwrap();
    let placed = bound(client, "train", 4).await;
    assert!(placed.iter().all(|n| n.starts_with("r2-")), "the Job left the one rack that holds it: {placed:?}");
    // Each pod sits inside the domain Kueue's node selectors name.
    let nodes: BTreeMap<String, _> =
        api::nodes(client).await.unwrap().into_iter().map(|n| (n.metadata.name.clone().unwrap(), n)).collect();
    for pod in api::pods(client, NS)
        .await
        .unwrap()
        .iter()
        .filter(|p| p.metadata.name.as_deref().is_some_and(|n| n.starts_with("train")))
    {
        let spec = pod.spec.as_ref().unwrap();
        assert!(spec.scheduling_gates.as_ref().is_none_or(|g| g.is_empty()), "a gated pod was bound");
        let selector = spec.node_selector.clone().unwrap_or_default();
        assert!(
            selector.contains_key(RACK) || selector.contains_key("kubernetes.io/hostname"),
            "no domain: {selector:?}"
        );
        let labels = nodes[node_of(pod).unwrap()].metadata.labels.clone().unwrap_or_default();
        for (k, v) in &selector {
            assert_eq!(labels.get(k), Some(v), "{:?} on {:?} outside its domain", pod.metadata.name, node_of(pod));
        }
    }
}

/// The state and message of a Workload's admission check `placement`, by its Job's name.
async fn check_of(client: &kube::Client, job: &str) -> Option<(String, String)> {
    let gvk = GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta2", "Workload");
    let resource = ApiResource { plural: "workloads".into(), ..ApiResource::from_gvk(&gvk) };
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &resource);
    for wl in api.list(&Default::default()).await.ok()?.items {
        let v = serde_json::to_value(&wl).unwrap();
        let owned = v["metadata"]["ownerReferences"].as_array().into_iter().flatten().any(|o| o["name"] == job);
        if !owned {
            continue;
        }
        let states = v["status"]["admissionChecks"].as_array()?.clone();
        let s = states.iter().find(|s| s["name"] == "placement")?;
        return Some((s["state"].as_str()?.to_string(), s["message"].as_str().unwrap_or("").to_string()));
    }
    None
}

/// The placement-aware admission check: quota allows 32 GPUs, but the flavor's two nodes
/// have four GPUs each. A Job of 2 x 3 GPUs is placed on paper, admitted and placed for
/// real; a Job of one 8-GPU pod fits the quota but no node, and its check says why
/// (`Retry`, so Kueue gives its quota back) while it stays suspended; a Job of 2 x 2 GPUs
/// would fit empty nodes but not beside the first Job's GPUs, promised before its pods
/// came: it is held `Pending`, and once the first Job finishes it is admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admission_check_admits_only_what_can_be_placed() {
    const GPU: &str = "nvidia.com/gpu";
    let test = "the_admission_check_admits_only_what_can_be_placed";
    let Some(bin) = testing::kueue::kueue_or_skip(test) else { return };
    let Some(p) = plane(test).await else { return };
    let client = &p.client;
    api::create_namespace(client, NS).await.unwrap();
    let nodes: Vec<_> = ["g0", "g1"]
        .iter()
        .map(|n| NodeBuilder::new(n).capacity("16", "64Gi", "110").resource(GPU, "4").label("pool", "gpu").build())
        .collect();
    api::create_nodes(client, &nodes, 2).await.unwrap();
    let beside = Beside::start(&p, &bin).await;

    create(
        client,
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
        "metadata": {"name": "gpu"}, "spec": {"nodeLabels": {"pool": "gpu"}}}),
    )
    .await;
    create(
        client,
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
        "metadata": {"name": "placement"},
        "spec": {"controllerName": scheduler::admission_check::CONTROLLER_NAME}}),
    )
    .await;
    create(
        client,
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {"namespaceSelector": {},
                 "admissionChecksStrategy": {"admissionChecks": [{"name": "placement"}]},
                 "resourceGroups": [{"coveredResources": ["cpu", "memory", GPU], "flavors": [{"name": "gpu",
                     "resources": [{"name": "cpu", "nominalQuota": "32"}, {"name": "memory", "nominalQuota": "128Gi"},
                                   {"name": GPU, "nominalQuota": "32"}]}]}]}}),
    )
    .await;
    local_queue(client).await;

    let gpu_job = |name: &str, pods: i32, gpus: &str| {
        let mut j = job(name, pods, "1", None);
        let res = &mut j["spec"]["template"]["spec"]["containers"][0]["resources"];
        res["requests"][GPU] = json!(gpus);
        res["limits"] = json!({GPU: gpus});
        serde_json::from_value::<Job>(j).unwrap()
    };
    let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
    jobs.create(&PostParams::default(), &gpu_job("first", 2, "3")).await.unwrap();
    let (state, message) = wait_for("first's check", Duration::from_secs(60), || async {
        check_of(client, "first").await.filter(|(s, _)| s == "Ready")
    })
    .await;
    assert!(message.starts_with("all 2 pods fit"), "{state}: {message}");
    // Its pods are not bound yet when the next Jobs are judged: its promise holds the GPUs.
    jobs.create(&PostParams::default(), &gpu_job("huge", 1, "8")).await.unwrap();
    jobs.create(&PostParams::default(), &gpu_job("pair", 2, "2")).await.unwrap();
    // The huge one never fits: sent back. The pair would once running Jobs end: held.
    for (name, state) in [("huge", "Retry"), ("pair", "Pending")] {
        let (got, message) = wait_for(&format!("{name}'s check to be refused"), Duration::from_secs(60), || async {
            check_of(client, name).await.filter(|(s, m)| s != "Ready" && m.contains("Insufficient nvidia.com/gpu"))
        })
        .await;
        assert_eq!(got, state, "{name}: {message}");
        assert!(message.contains("0/2 nodes are available"), "{name}: {message}");
        assert!(suspended(client, name).await, "{name} was admitted though it cannot be placed");
    }
    let placed = bound(client, "first", 2).await;
    assert_eq!(placed.iter().collect::<std::collections::BTreeSet<_>>().len(), 2, "{placed:?}");

    // The first finishes: the pair fits now and is admitted and placed; the huge one never.
    finish(client, "first").await;
    let placed = bound(client, "pair", 2).await;
    assert!(placed.iter().all(|n| n.starts_with('g')), "{placed:?}");
    assert!(suspended(client, "huge").await);
    let log = std::fs::read_to_string(beside.ours.process.log()).unwrap();
    assert!(log.contains("deciding Kueue admission checks by placement"), "{log}");
}

/// The admission check pins a Workload that must share a rack to one that holds it whole:
/// rack r1 has a running pod, so the check's `podSetUpdates` give the pods a node
/// selector on rack r2, and every pod is placed there (without it, the emptiest nodes of
/// both racks would take them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admission_check_pins_a_group_to_a_rack_that_holds_it() {
    const RACK: &str = "cloud.example.com/rack";
    let test = "the_admission_check_pins_a_group_to_a_rack_that_holds_it";
    let Some(bin) = testing::kueue::kueue_or_skip(test) else { return };
    let Some(p) = plane(test).await else { return };
    let client = &p.client;
    api::create_namespace(client, NS).await.unwrap();
    let nodes: Vec<_> = ["r1-0", "r1-1", "r2-0", "r2-1"]
        .iter()
        .map(|n| NodeBuilder::new(n).capacity("4", "16Gi", "110").label(RACK, &n[..2]).build())
        .collect();
    api::create_nodes(client, &nodes, 4).await.unwrap();
    let running =
        algorithms::builders::PodBuilder::new("running").namespace(NS).req("3", "1Gi").node_name("r1-0").build();
    api::create_pod(client, &running).await.unwrap();
    let _beside = Beside::start(&p, &bin).await;

    create(
        client,
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
        "metadata": {"name": "default"}, "spec": {}}),
    )
    .await;
    create(
        client,
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
        "metadata": {"name": "placement"},
        "spec": {"controllerName": scheduler::admission_check::CONTROLLER_NAME}}),
    )
    .await;
    create(client, json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {"namespaceSelector": {},
                 "admissionChecksStrategy": {"admissionChecks": [{"name": "placement"}]},
                 "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{"name": "default",
                     "resources": [{"name": "cpu", "nominalQuota": "64"}, {"name": "memory", "nominalQuota": "256Gi"}]}]}]}})).await;
    local_queue(client).await;

    let mut train = job("train", 4, "1500m", None);
    train["spec"]["template"]["metadata"]["annotations"] =
        json!({scheduler::admission_check::TOPOLOGY_ANNOTATION: RACK});
    let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
    jobs.create(&PostParams::default(), &serde_json::from_value(train).unwrap()).await.unwrap();
    let (_, message) = wait_for("the check to pin the group", Duration::from_secs(60), || async {
        check_of(client, "train").await.filter(|(s, _)| s == "Ready")
    })
    .await;
    assert!(message.starts_with(&format!("all 4 pods fit in {RACK}=r2")), "{message}");
    let placed = bound(client, "train", 4).await;
    assert!(placed.iter().all(|n| n.starts_with("r2-")), "the group left its rack: {placed:?}");
    let pods = api::pods(client, NS).await.unwrap();
    for pod in pods.iter().filter(|p| p.metadata.name.as_deref().is_some_and(|n| n.starts_with("train"))) {
        let selector = pod.spec.as_ref().and_then(|s| s.node_selector.clone()).unwrap_or_default();
        assert_eq!(selector.get(RACK).map(String::as_str), Some("r2"), "{:?}", pod.metadata.name);
    }
}
