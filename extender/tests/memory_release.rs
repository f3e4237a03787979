//! Memory a large request used goes back to the system once it is answered, rather than
//! staying in the allocator's arenas. In a test binary of its own, so that the process's
//! resident memory is this test's.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use algorithms::builders::{NodeBuilder, PodBuilder};
use algorithms::config::default_profile;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use extender::{Extender, router};
use tower::ServiceExt;

/// Resident memory of this process in KiB (Linux), if known.
fn resident_kib() -> Option<u64> {
    status_kib("VmRSS:")
}

/// A memory figure of /proc/self/status in KiB.
fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_5000_node_request_gives_its_memory_back() {
    let app = router(Arc::new(Extender::new(default_profile("custom-scheduler"), None, vec![])), 64 << 20);
    let nodes: Vec<_> = (0..5000)
        .map(|i| {
            NodeBuilder::new(&format!("node-{i}"))
                .label("topology.kubernetes.io/zone", &format!("zone-{}", i % 3))
                .image(&[&format!("registry.example/image-{}:v1", i % 50)], 300_000_000)
                .build()
        })
        .collect();
    let pod = PodBuilder::new("p").req_list(&[("cpu", "100m"), ("memory", "64Mi")]).build();
    let body = serde_json::to_vec(&serde_json::json!({"Pod": pod, "Nodes": {"items": nodes}})).unwrap();
    drop(nodes);
    let size_kib = (body.len() / 1024) as u64;
    // A small request first starts the thread pools, which stay.
    let small = serde_json::json!({"Pod": pod, "NodeNames": ["a"]}).to_string();
    let req = Request::post("/filter").header("content-type", "application/json").body(Body::from(small)).unwrap();
    assert_eq!(app.clone().oneshot(req).await.unwrap().status(), StatusCode::OK);
    let Some(before) = resident_kib() else {
        println!("no /proc/self/status: skipped");
        return;
    };
    let req = Request::post("/filter").header("content-type", "application/json").body(Body::from(body)).unwrap();
    let resp = app.oneshot(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let answer = axum::body::to_bytes(resp.into_body(), usize::MAX).await.unwrap();
    // Checked without decoding it, so that this test allocates nothing of its own here.
    let text = String::from_utf8_lossy(&answer);
    assert!(text.contains(r#""name":"node-4999""#) && text.contains(r#""FailedNodes":{}"#), "{}", &text[..200]);
    drop(answer);
    // The release runs on a blocking thread once the answer is built. Without it about
    // two thirds of what the request took stay resident; with it about a quarter does
    // (what this test's own buffers held while it ran).
    let peak = status_kib("VmHWM:").unwrap();
    let took = peak.saturating_sub(before);
    let mut kept = u64::MAX;
    for _ in 0..50 {
        kept = resident_kib().unwrap().saturating_sub(before);
        if kept * 2 < took {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!("body {size_kib} KiB: the request took {took} KiB at its peak and {kept} KiB stayed resident");
    assert!(kept * 2 < took, "{kept} KiB of the {took} KiB the request took stayed resident");
}
