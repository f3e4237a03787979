//! The extender's HTTP contract, exercised with the requests a real kube-scheduler sent.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::sync::Arc;

use algorithms::config::default_profile;
use algorithms::{NodeInfo, PodInfo, Profile, Snapshot};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use extender::types::ExtenderBindingArgs;
use extender::{ClusterView, Extender, router};
use futures::future::BoxFuture;
use serde_json::Value;
use tower::ServiceExt;

fn fixture(path: &str) -> Value {
    let text = std::fs::read_to_string(format!("tests/data/{path}")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn stateless() -> axum::Router {
    router(Arc::new(Extender::new(default_profile("custom-scheduler"), None, vec![])), 1 << 20)
}

async fn post(app: axum::Router, path: &str, body: impl Into<Body>) -> (StatusCode, Value) {
    let req = Request::post(path).header("content-type", "application/json").body(body.into()).unwrap();
    let resp = app.oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX).await.unwrap();
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

async fn replay(app: axum::Router, file: &str) -> (StatusCode, Value, Value) {
    let f = fixture(file);
    let path = f["path"].as_str().unwrap().to_string();
    let (s, v) = post(app, &path, f["body"].to_string()).await;
    (s, v, f["body"].clone())
}

fn sent_names(body: &Value) -> BTreeSet<String> {
    match body["Nodes"]["items"].as_array() {
        Some(items) => items.iter().map(|n| n["metadata"]["name"].as_str().unwrap().to_string()).collect(),
        None => body["NodeNames"].as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_string()).collect(),
    }
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default()
}

#[tokio::test]
async fn every_recorded_filter_request_is_answered_with_a_partition_of_the_sent_nodes() {
    for i in 1..=7 {
        let (status, r, body) = replay(stateless(), &format!("nodecache-false/filter-request-{i}.json")).await;
        assert_eq!(status, StatusCode::OK, "request {i}: {r}");
        assert_eq!(r["Error"], "", "request {i}");
        let passed: BTreeSet<String> = r["Nodes"]["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        let failed = keys(&r["FailedNodes"]);
        let never = keys(&r["FailedAndUnresolvableNodes"]);
        let mut all = passed.clone();
        all.extend(failed.iter().cloned());
        all.extend(never.iter().cloned());
        assert_eq!(all, sent_names(&body), "request {i}");
        assert_eq!(passed.len() + failed.len() + never.len(), all.len(), "request {i}: overlapping sets");
    }
}

#[tokio::test]
async fn stateless_filter_agrees_with_node_local_filters() {
    // The "important" pod wants more CPU than the one sent node has free only with its pods;
    // alone, the node's allocatable decides.
    let (_, r, body) = replay(stateless(), "nodecache-false/filter-request-1.json").await;
    let pod = PodInfo::from_pod(&serde_json::from_value(body["Pod"].clone()).unwrap()).unwrap();
    let nodes: Vec<_> =
        body["Nodes"]["items"].as_array().unwrap().iter().map(|n| serde_json::from_value(n.clone()).unwrap()).collect();
    let snap = algorithms::builders::snapshot(&nodes, &[]);
    let ev = algorithms::framework::filter_nodes(&default_profile("custom-scheduler"), &pod, &snap);
    let want: BTreeSet<String> = ev.feasible.iter().map(|&i| snap.nodes[i].name.clone()).collect();
    let got: BTreeSet<String> = r["Nodes"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(got, want);
}

#[tokio::test]
async fn node_names_without_cluster_access_explain_themselves() {
    let (status, r, _) = replay(stateless(), "nodecache-true/filter-request-1.json").await;
    assert_eq!(status, StatusCode::OK);
    assert!(r["Error"].as_str().unwrap().contains("nodeCacheCapable"), "{r}");
}

#[tokio::test]
async fn prioritize_scores_every_sent_node_between_zero_and_ten() {
    let (status, r, body) = replay(stateless(), "nodecache-false/prioritize-request-1.json").await;
    assert_eq!(status, StatusCode::OK);
    let hosts: BTreeSet<String> =
        r.as_array().unwrap().iter().map(|h| h["Host"].as_str().unwrap().to_string()).collect();
    assert_eq!(hosts, sent_names(&body));
    for h in r.as_array().unwrap() {
        let s = h["Score"].as_i64().unwrap();
        assert!((0..=10).contains(&s), "{h}");
    }
}

#[tokio::test]
async fn bind_without_cluster_access_reports_an_error() {
    let (status, r, _) = replay(stateless(), "nodecache-false/bind-request-1.json").await;
    assert_eq!(status, StatusCode::OK);
    assert!(r["Error"].as_str().unwrap().contains("cluster access"));
}

#[tokio::test]
async fn stateless_preempt_returns_the_candidates_as_meta_victims() {
    let (status, r, body) = replay(stateless(), "nodecache-false/preempt-request-1.json").await;
    assert_eq!(status, StatusCode::OK, "{r}");
    let got = keys(&r["NodeNameToMetaVictims"]);
    assert_eq!(got, keys(&body["NodeNameToVictims"]));
    let uid = body["NodeNameToVictims"]["node-a"]["Pods"][0]["metadata"]["uid"].clone();
    assert_eq!(r["NodeNameToMetaVictims"]["node-a"]["Pods"][0]["UID"], uid);
}

/// A cluster view over the recorded dump, as the informer cache would hold it.
struct DumpCluster {
    snap: Arc<Snapshot>,
    bound: std::sync::Mutex<Vec<ExtenderBindingArgs>>,
}

impl DumpCluster {
    fn new(leave_out: &[&str]) -> Self {
        let dump = fixture("cluster-dump.json");
        let items = dump["items"].as_array().unwrap();
        let nodes: Vec<k8s_openapi::api::core::v1::Node> =
            items.iter().filter(|i| i["kind"] == "Node").map(|i| serde_json::from_value(i.clone()).unwrap()).collect();
        let pods: Vec<k8s_openapi::api::core::v1::Pod> = items
            .iter()
            .filter(|i| i["kind"] == "Pod" && !leave_out.contains(&i["metadata"]["name"].as_str().unwrap()))
            .map(|i| serde_json::from_value(i.clone()).unwrap())
            .collect();
        let _ = NodeInfo::default();
        DumpCluster { snap: Arc::new(algorithms::builders::snapshot(&nodes, &pods)), bound: Default::default() }
    }
}

impl ClusterView for DumpCluster {
    fn snapshot(&self) -> Arc<Snapshot> {
        self.snap.clone()
    }
    fn ready(&self) -> bool {
        true
    }
    fn bind(&self, args: ExtenderBindingArgs, _profile: Profile) -> BoxFuture<'static, Result<(), String>> {
        self.bound.lock().unwrap().push(args);
        Box::pin(async { Ok(()) })
    }
}

#[tokio::test]
async fn node_cache_mode_rejects_nodes_without_free_managed_devices() {
    let cluster = Arc::new(DumpCluster::new(&["gpu-2", "gpu-init"]));
    let ext = Extender::new(default_profile("custom-scheduler"), Some(cluster.clone()), vec!["example.com/gpu".into()]);
    let app = router(Arc::new(ext), 1 << 20);
    let (status, r, body) = replay(app.clone(), "nodecache-true/filter-request-1.json").await;
    assert_eq!(status, StatusCode::OK, "{r}");
    assert_eq!(r["NodeNames"], serde_json::json!(["node-gpu"]));
    for n in ["node-a", "node-b", "node-reject-1"] {
        assert_eq!(r["FailedAndUnresolvableNodes"][n], "Insufficient example.com/gpu", "{r}");
    }
    let returned: BTreeSet<String> =
        keys(&r["FailedAndUnresolvableNodes"]).into_iter().chain(["node-gpu".to_string()]).collect();
    assert_eq!(returned, sent_names(&body));

    let (_, p, _) = replay(app.clone(), "nodecache-true/prioritize-request-1.json").await;
    let gpu = p.as_array().unwrap().iter().find(|h| h["Host"] == "node-gpu").unwrap();
    assert!(gpu["Score"].as_i64().unwrap() > 0, "{p}");

    let (_, b, _) = replay(app, "nodecache-true/bind-request-1.json").await;
    assert_eq!(b["Error"], "");
    assert_eq!(cluster.bound.lock().unwrap()[0].pod_name, "gpu-2");
}

#[tokio::test]
async fn node_cache_mode_counts_devices_already_in_use() {
    // With gpu-2 (2 devices) and gpu-init (1) bound, one of node-gpu's four devices is free.
    let cluster = Arc::new(DumpCluster::new(&[]));
    let app = router(
        Arc::new(Extender::new(default_profile("custom-scheduler"), Some(cluster), vec!["example.com/gpu".into()])),
        1 << 20,
    );
    let (_, r, _) = replay(app, "nodecache-true/filter-request-1.json").await;
    assert_eq!(r["NodeNames"], serde_json::json!([]));
    assert_eq!(r["FailedNodes"]["node-gpu"], "Insufficient example.com/gpu", "{r}");
}

#[tokio::test]
async fn bad_requests_get_clear_json_errors() {
    let (s, r) = post(stateless(), "/filter", "{not json").await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(r["Error"].as_str().unwrap().contains("malformed request body"));
    let (s, r) = post(stateless(), "/filter", r#"{"Nodes": {"items": []}}"#).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(r["Error"], "Pod is required");
    let (s, r) = post(
        stateless(),
        "/prioritize",
        r#"{"Pod": {"metadata": {"name": "p"}, "spec": {"containers": 5}}, "NodeNames": []}"#,
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(r["Error"].as_str().unwrap().contains("Pod.spec.containers"), "{r}");
    let (s, r) =
        post(stateless(), "/filter", r#"{"Pod": {"metadata": {"name": "p"}, "spec": {"containers": []}}}"#).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(r["Error"].as_str().unwrap().contains("NodeNames"));
    let (s, r) = post(stateless(), "/frobnicate", "{}").await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert!(r["Error"].as_str().unwrap().contains("unknown path"));
    // Bytes after the document, or a second document, are refused.
    let pod = r#"{"metadata": {"name": "p"}, "spec": {"containers": []}}"#;
    for tail in [" x", " {}", "}"] {
        let (s, r) = post(stateless(), "/filter", format!(r#"{{"Pod": {pod}, "NodeNames": []}}{tail}"#)).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "tail {tail:?}: {r}");
        assert!(r["Error"].as_str().unwrap().contains("malformed request body"), "{r}");
    }
    // A node sent twice (or without a name) cannot be answered with a partition.
    let node = |n: &str| format!(r#"{{"metadata": {{"name": "{n}"}}}}"#);
    let twice = format!(r#"{{"Pod": {pod}, "Nodes": {{"items": [{}, {}, {}]}}}}"#, node("a"), node("b"), node("a"));
    for verb in ["/filter", "/prioritize"] {
        let (s, r) = post(stateless(), verb, twice.clone()).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{verb}: {r}");
        assert_eq!(r["Error"], "node names sent more than once: a", "{verb}");
    }
    let nameless = format!(r#"{{"Pod": {pod}, "Nodes": {{"items": [{}, {{"metadata": {{}}}}]}}}}"#, node("a"));
    let (s, r) = post(stateless(), "/filter", nameless).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(r["Error"], "Nodes.items[1] has no metadata.name");
    // Negative requests are refused as the API server refuses them.
    let negative = r#"{"Pod": {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c",
        "resources": {"requests": {"cpu": "-1500m"}}}]}}, "Nodes": {"items": []}}"#;
    let (s, r) = post(stateless(), "/filter", negative).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(r["Error"].as_str().unwrap().contains("must be greater than or equal to 0"), "{r}");
    // Compressed bodies are refused rather than misread.
    let req = Request::post("/filter")
        .header("content-type", "application/json")
        .header("content-encoding", "gzip")
        .body(Body::from("\u{1f}\u{8b}"))
        .unwrap();
    assert_eq!(stateless().oneshot(req).await.unwrap().status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    // A declared length over the limit is refused before the body is read: a body that
    // never arrives does not hold the answer up.
    let (tx, rx) = futures::channel::mpsc::unbounded::<Result<axum::body::Bytes, std::io::Error>>();
    let req = Request::post("/filter")
        .header("content-type", "application/json")
        .header("content-length", (4u64 << 20).to_string())
        .header("expect", "100-continue")
        .body(Body::from_stream(rx))
        .unwrap();
    let resp =
        tokio::time::timeout(std::time::Duration::from_secs(5), stateless().oneshot(req)).await.unwrap().unwrap();
    assert_eq!(resp.status(), StatusCode::PAYLOAD_TOO_LARGE);
    drop(tx);
    let big = format!(r#"{{"Pod": null, "pad": "{}"}}"#, "x".repeat(2 << 20));
    let (s, r) = post(stateless(), "/filter", big).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(r["Error"].as_str().unwrap().contains("limit"), "{r}");
}

#[tokio::test]
async fn verbs_are_served_under_the_scheduler_prefix_and_metrics_count_them() {
    let ext = Arc::new(Extender::new(default_profile("custom-scheduler"), None, vec![]));
    let app = router(ext.clone(), 1 << 20);
    let f = fixture("nodecache-false/filter-request-2.json");
    let (s, _) = post(app.clone(), "/scheduler/filter", f["body"].to_string()).await;
    assert_eq!(s, StatusCode::OK);
    let resp = app.oneshot(Request::get("/metrics").body(Body::empty()).unwrap()).await.unwrap();
    let text = String::from_utf8(axum::body::to_bytes(resp.into_body(), usize::MAX).await.unwrap().to_vec()).unwrap();
    assert!(text.contains(r#"extender_requests_total{verb="filter",code="200"} 1"#), "{text}");
}

#[tokio::test]
async fn concurrent_requests_are_all_answered() {
    let app = stateless();
    let body = fixture("nodecache-false/filter-request-1.json")["body"].to_string();
    let mut tasks = Vec::new();
    for _ in 0..32 {
        let (app, body) = (app.clone(), body.clone());
        tasks.push(tokio::spawn(async move { post(app, "/filter", body).await.0 }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), StatusCode::OK);
    }
}

#[test]
fn results_use_kube_schedulers_pascal_case_keys() {
    let r = extender::types::ExtenderFilterResult { node_names: Some(vec!["a".into()]), ..Default::default() };
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(
        keys(&v),
        ["Error", "FailedAndUnresolvableNodes", "FailedNodes", "NodeNames", "Nodes"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    );
    let h = serde_json::to_value(extender::types::HostPriority { host: "a".into(), score: 3 }).unwrap();
    assert_eq!(h, serde_json::json!({"Host": "a", "Score": 3}));
    let m = serde_json::to_value(extender::types::ExtenderPreemptionResult::default()).unwrap();
    assert_eq!(m, serde_json::json!({"NodeNameToMetaVictims": {}}));
}
