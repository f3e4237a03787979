//! `custom-scheduler run` calling extenders from its configuration's `extenders` stanza,
//! against kube-scheduler v1.36.2 with the same stanza, on a real kube-apiserver started
//! by the test from `KUBE_ASSETS`. The extenders: our own `custom-scheduler extender`
//! managing `nvidia.com/gpu` (ignored by the scheduler itself); one served by this test
//! that turns a node down, scores, and binds every pod through the API server; one that
//! is down and ignorable; and one that is down and not ignorable, managing a resource only
//! one pod asks for.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod realapi;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use algorithms::builders::{NodeBuilder, PodBuilder};
use axum::extract::{Path, State};
use axum::routing::post;
use axum::{Json, Router};
use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, PostParams};
use realapi::{OurExtender, Ours, events_about, plane, pod_scheduled};
use serde_json::{Value, json};
use testing::api::{self, node_of, wait_for};

const NS: &str = "default";
const GPU: &str = "nvidia.com/gpu";
const NEVER: &str = "example.com/never";

/// The extender this test serves: what it was asked, by verb.
#[derive(Clone)]
struct TestExtender {
    client: Client,
    calls: Arc<Mutex<BTreeMap<String, usize>>>,
}

impl TestExtender {
    fn count(&self, verb: &str) -> usize {
        self.calls.lock().unwrap().get(verb).copied().unwrap_or(0)
    }
}

fn asks_for_gpus(pod: &Value) -> bool {
    pod["spec"]["containers"].as_array().into_iter().flatten().any(|c| !c["resources"]["requests"][GPU].is_null())
}

/// Filter: cpu-0 is draining. Prioritize: cpu-3 for plain pods, gpu-1 for GPU pods.
/// Bind: a Binding posted to the API server.
async fn answer(State(t): State<TestExtender>, Path(verb): Path<String>, Json(body): Json<Value>) -> Json<Value> {
    *t.calls.lock().unwrap().entry(verb.clone()).or_default() += 1;
    let names: Vec<String> =
        body["NodeNames"].as_array().into_iter().flatten().filter_map(|n| n.as_str().map(String::from)).collect();
    match verb.as_str() {
        "filter" => {
            let keep: Vec<&String> = names.iter().filter(|n| *n != "cpu-0").collect();
            let failed: BTreeMap<&str, &str> =
                names.iter().filter(|n| *n == "cpu-0").map(|_| ("cpu-0", "node(s) are draining")).collect();
            Json(json!({"NodeNames": keep, "FailedNodes": failed, "FailedAndUnresolvableNodes": {}, "Error": ""}))
        }
        "prioritize" => {
            let best = if asks_for_gpus(&body["Pod"]) { "gpu-1" } else { "cpu-3" };
            let list: Vec<Value> =
                names.iter().map(|n| json!({"Host": n, "Score": if n == best { 10 } else { 0 }})).collect();
            Json(json!(list))
        }
        "bind" => {
            let ns = body["PodNamespace"].as_str().unwrap_or_default().to_string();
            let name = body["PodName"].as_str().unwrap_or_default().to_string();
            let binding = Binding {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(ns.clone()),
                    uid: body["PodUID"].as_str().map(String::from),
                    ..Default::default()
                },
                target: ObjectReference {
                    kind: Some("Node".into()),
                    name: body["Node"].as_str().map(String::from),
                    ..Default::default()
                },
            };
            let api: Api<Pod> = Api::namespaced(t.client.clone(), &ns);
            let r = api.create_subresource::<_, Value>("binding", &name, &PostParams::default(), &binding).await;
            Json(json!({"Error": r.err().map(|e| e.to_string()).unwrap_or_default()}))
        }
        _ => Json(json!({"Error": format!("unknown verb {verb}")})),
    }
}

async fn serve_test_extender(client: Client) -> (SocketAddr, TestExtender) {
    let t = TestExtender { client, calls: Default::default() };
    let app = Router::new().route("/test/{verb}", post(answer)).with_state(t.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, t)
}

/// The same stanza for both schedulers.
fn stanza(ours: &OurExtender, test: SocketAddr, down: u16) -> Value {
    json!([
        {"urlPrefix": ours.url(), "filterVerb": "filter", "prioritizeVerb": "prioritize", "weight": 5,
            "managedResources": [{"name": GPU, "ignoredByScheduler": true}]},
        {"urlPrefix": format!("http://{test}/test"), "filterVerb": "filter", "prioritizeVerb": "prioritize",
            "weight": 2, "bindVerb": "bind", "nodeCacheCapable": true},
        {"urlPrefix": format!("http://127.0.0.1:{down}/lenient"), "filterVerb": "filter",
            "prioritizeVerb": "prioritize", "weight": 1, "ignorable": true, "httpTimeout": "2s"},
        {"urlPrefix": format!("http://127.0.0.1:{down}/strict"), "filterVerb": "filter", "ignorable": false,
            "httpTimeout": "2s", "managedResources": [{"name": NEVER, "ignoredByScheduler": true}]},
    ])
}

/// What one scheduler did.
#[derive(Debug, PartialEq)]
struct Outcome {
    /// Nodes of the plain pods, sorted.
    plain: Vec<String>,
    /// Nodes of the GPU pods, sorted.
    gpu: Vec<String>,
    /// Why a pod asking for more GPUs than a node has stays pending.
    too_many: String,
    /// Why a pod that only fits the draining node stays pending.
    pinned: String,
    /// The reason, and the message up to the transport error, of the pod whose extender
    /// is down and not ignorable.
    down: (String, String),
    /// Binds the test extender made, and whether every bound pod was announced.
    binds_and_events: (usize, bool),
}

async fn pod_named(client: &Client, name: &str) -> Pod {
    Api::<Pod>::namespaced(client.clone(), NS).get(name).await.unwrap()
}

async fn condition(client: &Client, name: &str, reason: &str) -> String {
    wait_for(&format!("{name} to be reported {reason}"), Duration::from_secs(60), || async {
        let (status, r, message) = pod_scheduled(&pod_named(client, name).await)?;
        (status == "False" && r.as_deref() == Some(reason)).then_some(message).flatten()
    })
    .await
}

async fn scenario(client: &Client, scheduler: &str, test: &TestExtender) -> Outcome {
    let pod = |name: &str| PodBuilder::new(name).namespace(NS).scheduler(scheduler).req("100m", "128Mi");
    let mut pods: Vec<Pod> = (0..4).map(|i| pod(&format!("plain-{i}")).build()).collect();
    pods.extend((0..3).map(|i| pod(&format!("gpu-{i}")).device(GPU, "1").build()));
    pods.push(pod("too-many").device(GPU, "5").priority_class("no-preempt").build());
    pods.push(pod("pinned").node_selector("kubernetes.io/hostname", "cpu-0").priority_class("no-preempt").build());
    pods.push(pod("never").device(NEVER, "1").build());
    api::create_pods(client, &pods, 4).await.unwrap();
    let listed = api::wait_bound(client, NS, 7, Duration::from_secs(60)).await;
    let bound: Vec<Pod> = listed.into_iter().filter(|p| node_of(p).is_some()).collect();
    let nodes_of = |prefix: &str| {
        let mut v: Vec<String> = bound
            .iter()
            .filter(|p| p.metadata.name.as_deref().is_some_and(|n| n.starts_with(prefix)))
            .filter_map(|p| node_of(p).map(String::from))
            .collect();
        v.sort();
        v
    };
    let too_many = condition(client, "too-many", "Unschedulable").await;
    let pinned = condition(client, "pinned", "Unschedulable").await;
    let down = condition(client, "never", "SchedulerError").await;
    let down = down.split_once("\": ").map(|(head, _)| format!("{head}\"")).unwrap_or(down);
    // Still nothing else bound: the three pending pods stay pending.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let all = api::pods(client, NS).await.unwrap();
    assert_eq!(all.iter().filter(|p| node_of(p).is_some()).count(), 7, "{scheduler}");
    let announced = tokio::time::timeout(
        Duration::from_secs(20),
        wait_for("every bound pod's Scheduled event", Duration::from_secs(20), || async {
            let events = api::events(client, NS).await.ok()?;
            bound
                .iter()
                .all(|p| {
                    let name = p.metadata.name.as_deref().unwrap_or_default();
                    events_about(&events, name, "Scheduled").len() == 1
                })
                .then_some(())
        }),
    )
    .await
    .is_ok();
    if !announced {
        let events = api::events(client, NS).await.unwrap();
        for e in &events {
            let about = e.regarding.as_ref().and_then(|r| r.name.clone());
            println!("{scheduler}: event {:?} about {about:?}: {:?}", e.reason, e.note);
        }
    }
    Outcome {
        plain: nodes_of("plain-"),
        gpu: nodes_of("gpu-"),
        too_many,
        pinned,
        down: ("SchedulerError".into(), down),
        binds_and_events: (test.count("bind"), announced),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_calls_extenders_as_kube_scheduler_does() {
    let down = testing::free_port().unwrap();
    let mut outcomes = Vec::new();
    for scheduler in ["custom-scheduler", "default-scheduler"] {
        let Some(p) = plane("run_calls_extenders_as_kube_scheduler_does").await else { return };
        let client = &p.client;
        for i in 0..4 {
            api::create_node(client, &NodeBuilder::new(&format!("cpu-{i}")).capacity("8", "32Gi", "110").build())
                .await
                .unwrap();
        }
        for i in 0..2 {
            let node = NodeBuilder::new(&format!("gpu-{i}")).capacity("8", "32Gi", "110").resource(GPU, "4");
            api::create_node(client, &node.resource(NEVER, "1").build()).await.unwrap();
        }
        // Pods of this class never preempt, so preemption adds one fixed sentence.
        let class: k8s_openapi::api::scheduling::v1::PriorityClass = serde_json::from_value(json!({
            "metadata": {"name": "no-preempt"}, "value": 0, "preemptionPolicy": "Never"}))
        .unwrap();
        Api::all(client.clone()).create(&PostParams::default(), &class).await.unwrap();
        let ours_ext = OurExtender::start(&p.plane, "extender", false, &[]).await;
        let (addr, test) = serve_test_extender(client.clone()).await;
        let config = json!({
            "profiles": [{"schedulerName": scheduler}],
            "extenders": stanza(&ours_ext, addr, down),
        });
        let _scheduler = match scheduler {
            "custom-scheduler" => {
                Box::new(Ours::start(&p.plane, "custom-scheduler", Some(config), &[])) as Box<dyn std::any::Any>
            }
            _ => Box::new(testing::start_kube_scheduler(&p.plane, "kube-scheduler", config).unwrap()),
        };
        let outcome = scenario(client, scheduler, &test).await;
        assert!(test.count("filter") > 0 && test.count("prioritize") > 0, "{scheduler}");
        assert!(ours_ext.requests("filter").await >= 4.0, "{scheduler}: GPU pods reach our extender");
        outcomes.push(outcome);
    }
    let ours = &outcomes[0];
    let url = format!("http://127.0.0.1:{down}/strict/filter");
    assert_eq!(ours.plain, vec!["cpu-3"; 4]);
    assert_eq!(ours.gpu, vec!["gpu-1"; 3]);
    assert_eq!(ours.down, ("SchedulerError".to_string(), format!("Post \"{url}\"")));
    assert_eq!(ours.binds_and_events, (7, true));
    println!("ours: {ours:#?}");
    assert_eq!(&outcomes[0], &outcomes[1], "ours against kube-scheduler v1.36.2");
}
