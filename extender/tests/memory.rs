//! Memory stays proportional to the request body: a body packed with empty node objects
//! is refused without building them. In a test binary of its own, so that the process's
//! peak memory is this test's.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use algorithms::config::default_profile;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use extender::{Extender, router};
use tower::ServiceExt;

/// Peak resident memory of this process in KiB (Linux), if known.
fn peak_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[tokio::test]
async fn a_body_of_400000_empty_nodes_is_refused_within_a_small_multiple_of_its_size() {
    let app = router(Arc::new(Extender::new(default_profile("custom-scheduler"), None, vec![])), 64 << 20);
    // Built in place, so that building it does not raise the peak beyond its own size.
    let mut body = String::with_capacity(1_300_000);
    body.push_str(r#"{"Pod": {"metadata": {"name": "p"}, "spec": {"containers": []}}, "Nodes": {"items": ["#);
    for i in 0..400_000 {
        body.push_str(if i == 0 { "{}" } else { ",{}" });
    }
    body.push_str("]}}");
    let size_kib = (body.len() / 1024) as u64;
    let before = peak_kib();
    let req = Request::post("/filter").header("content-type", "application/json").body(Body::from(body)).unwrap();
    let resp = app.oneshot(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX).await.unwrap();
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.contains("400000 nodes in a"), "{text}");
    if let (Some(before), Some(after)) = (before, peak_kib()) {
        let grown = after.saturating_sub(before);
        println!("body {size_kib} KiB, peak grew by {grown} KiB");
        assert!(grown <= 8 * size_kib.max(1024), "peak grew by {grown} KiB for a {size_kib} KiB body");
    }
}
