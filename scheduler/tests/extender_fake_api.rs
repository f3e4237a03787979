//! The extender with cluster access, against the fake API server over real HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use algorithms::builders::{NodeBuilder, PodBuilder};
use common::fake_api::{FakeApi, Kind};
use scheduler::extender_mode::{ExtenderOptions, serve};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn http(addr: std::net::SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    let code = out.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    // Responses may be chunked; take the JSON object or array inside.
    let start = body.find(['{', '[']).unwrap_or(0);
    let end = body.rfind(['}', ']']).map(|e| e + 1).unwrap_or(body.len());
    (code, body[start..end.max(start)].to_string())
}

fn gpu_pod(name: &str, gpus: &str) -> Value {
    serde_json::to_value(PodBuilder::new(name).req_list(&[("cpu", "100m"), ("example.com/gpu", gpus)]).build()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_devices_are_counted_including_pods_the_extender_bound() {
    let api = FakeApi::start().await;
    api.apply(Kind::Namespace, json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}));
    for n in ["cpu-1", "cpu-2"] {
        api.apply(Kind::Node, serde_json::to_value(NodeBuilder::new(n).build()).unwrap());
    }
    api.apply(
        Kind::Node,
        serde_json::to_value(NodeBuilder::new("gpu").resource("example.com/gpu", "4").build()).unwrap(),
    );
    let mut running = gpu_pod("running", "2");
    running["spec"]["nodeName"] = json!("gpu");
    api.apply(Kind::Pod, running);

    let listen = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let opts = ExtenderOptions {
        listen,
        kubeconfig: Some(api.kubeconfig_file()),
        in_cluster: false,
        config: None,
        managed_resources: vec!["example.com/gpu".into()],
        tls: None,
        secure: None,
        max_body_bytes: 1 << 20,
        header_timeout: Duration::from_secs(1),
        request_timeout: Duration::from_secs(2),
        max_connections: 4,
        max_nodes: 3,
        feature_gates: Default::default(),
    };
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        serve(opts, async move {
            let _ = rx.await;
        })
        .await
        .unwrap();
    });
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(s) = tokio::net::TcpStream::connect(listen).await {
            drop(s);
            if http(listen, "GET", "/readyz", "").await.0 == 200 {
                break;
            }
        }
        assert!(tokio::time::Instant::now() < deadline, "extender never became ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let names = json!(["cpu-1", "cpu-2", "gpu"]);
    let filter = |pod: Value| json!({"Pod": pod, "NodeNames": names}).to_string();
    // Two of four devices are used: a 2-GPU pod fits, a 3-GPU pod does not.
    let (code, body) = http(listen, "POST", "/scheduler/filter", &filter(gpu_pod("two", "2"))).await;
    assert_eq!(code, 200, "{body}");
    let r: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(r["NodeNames"], json!(["gpu"]));
    assert_eq!(r["FailedAndUnresolvableNodes"]["cpu-1"], "Insufficient example.com/gpu");
    let (_, body) = http(listen, "POST", "/filter", &filter(gpu_pod("three", "3"))).await;
    let r: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(r["FailedNodes"]["gpu"], "Insufficient example.com/gpu", "{r}");
    // More nodes than --max-nodes (3 here) are refused, whatever the body size allows.
    let four = json!({"Pod": gpu_pod("two", "2"), "NodeNames": ["cpu-1", "cpu-2", "gpu", "other"]}).to_string();
    let (code, body) = http(listen, "POST", "/filter", &four).await;
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("at most 3 (the extender's --max-nodes)"), "{body}");

    // The extender binds a 2-GPU pod; the next 1-GPU pod no longer fits, even before the watch confirms.
    api.apply(Kind::Pod, gpu_pod("two", "2"));
    let uid = api.get(Kind::Pod, "default", "two").unwrap()["metadata"]["uid"].clone();
    let bind = json!({"PodName": "two", "PodNamespace": "default", "PodUID": uid, "Node": "gpu"}).to_string();
    let (code, body) = http(listen, "POST", "/bind", &bind).await;
    assert_eq!(code, 200);
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["Error"], "");
    assert_eq!(api.bindings(), vec![("default/two".to_string(), "gpu".to_string())]);
    let (_, body) = http(listen, "POST", "/filter", &filter(gpu_pod("one", "1"))).await;
    let r: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(r["NodeNames"], json!([]), "{r}");

    // Binding it again is refused by the API server and reported.
    let (_, body) = http(listen, "POST", "/bind", &bind).await;
    assert!(serde_json::from_str::<Value>(&body).unwrap()["Error"].as_str().unwrap().contains("already bound"));

    // Preemption runs DefaultPreemption's victim selection on the proposed nodes. An
    // equal-priority preemptor has no victims anywhere.
    let running_uid = api.get(Kind::Pod, "default", "running").unwrap()["metadata"]["uid"].clone();
    let proposal = json!({
        "gpu": {"Pods": [{"UID": running_uid}], "NumPDBViolations": 0},
        "cpu-1": {"Pods": [], "NumPDBViolations": 0}
    });
    let preempt = json!({"Pod": gpu_pod("big", "4"), "NodeNameToMetaVictims": proposal}).to_string();
    let (_, body) = http(listen, "POST", "/preempt", &preempt).await;
    let r: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(r["NodeNameToMetaVictims"], json!({}), "{r}");
    // A higher-priority 4-GPU pod needs both GPU pods gone (kube-scheduler proposed one,
    // not knowing that the extender manages the devices); a node without GPUs is dropped.
    let mut big = gpu_pod("big", "4");
    big["spec"]["priority"] = json!(100);
    let preempt = json!({"Pod": big, "NodeNameToMetaVictims": proposal}).to_string();
    let (_, body) = http(listen, "POST", "/preempt", &preempt).await;
    let r: Value = serde_json::from_str(&body).unwrap();
    let mut uids: Vec<String> = r["NodeNameToMetaVictims"]["gpu"]["Pods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["UID"].as_str().unwrap().to_string())
        .collect();
    uids.sort();
    let mut want = vec![running_uid.as_str().unwrap().to_string(), uid.as_str().unwrap().to_string()];
    want.sort();
    assert_eq!(uids, want, "{r}");
    assert_eq!(r["NodeNameToMetaVictims"]["gpu"]["NumPDBViolations"], 0);
    assert!(r["NodeNameToMetaVictims"]["cpu-1"].is_null(), "{r}");

    // Slow clients: one that never finishes its headers is disconnected after the header
    // timeout (1 s here), one that announces a body and stops sending gets 408 after the
    // request timeout (2 s); a normal request is answered meanwhile.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let started = tokio::time::Instant::now();
    let mut slow_headers = tokio::net::TcpStream::connect(listen).await.unwrap();
    slow_headers.write_all(b"POST /filter HTTP/1.1\r\nHost: x\r\n").await.unwrap();
    let mut slow_body = tokio::net::TcpStream::connect(listen).await.unwrap();
    slow_body
        .write_all(
            b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{",
        )
        .await
        .unwrap();
    assert_eq!(http(listen, "GET", "/healthz", "").await.0, 200);
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), slow_headers.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "a client that never finished its headers was kept");
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(900), "closed after {waited:?}, before the header timeout");
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), slow_body.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    drop((slow_headers, slow_body));

    // A kept-alive connection that goes idle after its request is closed after the
    // header timeout.
    let mut kept = tokio::net::TcpStream::connect(listen).await.unwrap();
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let mut first = [0u8; 512];
    let n = kept.read(&mut first).await.unwrap();
    assert!(first[..n].starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&first[..n]));
    let idle_from = tokio::time::Instant::now();
    let closed = tokio::time::timeout(Duration::from_secs(5), kept.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "an idle kept-alive connection was kept");
    assert!(idle_from.elapsed() >= Duration::from_millis(900), "closed after {:?}", idle_from.elapsed());

    // The connection limit (4 here): four silent clients hold every slot, so a fifth is
    // accepted and answered only once the header timeout has closed one of them.
    let mut silent = Vec::new();
    for _ in 0..4 {
        silent.push(tokio::net::TcpStream::connect(listen).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let queued_from = tokio::time::Instant::now();
    assert_eq!(http(listen, "GET", "/healthz", "").await.0, 200);
    let queued = queued_from.elapsed();
    assert!(queued >= Duration::from_millis(500), "answered after {queued:?} while every slot was taken");
    drop(silent);

    let _ = tx.send(());
    let _ = tokio::time::timeout(Duration::from_secs(15), server).await;
}
