//! Property-based fuzzing of the extender's request handling: recorded kube-scheduler
//! requests with random byte edits, and arbitrary bytes, sent to every verb. The
//! properties: the answer is never a 5xx, and every non-2xx answer is a JSON `Error`.
//! `FUZZ_CASES=100000 cargo test -p custom-scheduler-extender --release --test fuzz` runs
//! a long run.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use algorithms::config::default_profile;
use axum::body::Body;
use axum::http::Request;
use extender::{Extender, router};
use proptest::prelude::*;
use tower::ServiceExt;

fn cases() -> u32 {
    std::env::var("FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256)
}

fn recorded() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for dir in ["nodecache-false", "nodecache-true"] {
        let Ok(entries) = std::fs::read_dir(format!("tests/data/{dir}")) else { continue };
        for e in entries.flatten().filter(|e| e.path().extension().is_some_and(|x| x == "json")) {
            let v: serde_json::Value = serde_json::from_slice(&std::fs::read(e.path()).unwrap()).unwrap();
            out.push((v["path"].as_str().unwrap().to_string(), v["body"].to_string().into_bytes()));
        }
    }
    out.sort();
    out
}

/// One edit: overwrite, insert or delete a byte at a position (taken modulo the length).
#[derive(Debug, Clone)]
enum Edit {
    Set(usize, u8),
    Insert(usize, u8),
    Delete(usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    let byte = prop_oneof![
        any::<u8>(),
        Just(b'"'),
        Just(b'{'),
        Just(b'}'),
        Just(b'['),
        Just(b']'),
        Just(b','),
        Just(b'-'),
        Just(b'0')
    ];
    prop_oneof![
        (any::<usize>(), byte.clone()).prop_map(|(i, b)| Edit::Set(i, b)),
        (any::<usize>(), byte).prop_map(|(i, b)| Edit::Insert(i, b)),
        any::<usize>().prop_map(Edit::Delete),
    ]
}

fn answer(path: &str, body: Vec<u8>) -> (u16, Vec<u8>) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let app = router(Arc::new(Extender::new(default_profile("custom-scheduler"), None, vec![])), 8 << 20);
        let req = Request::post(path).header("content-type", "application/json").body(Body::from(body)).unwrap();
        let resp = app.oneshot(req).await.unwrap();
        let status = resp.status().as_u16();
        (status, axum::body::to_bytes(resp.into_body(), usize::MAX).await.unwrap().to_vec())
    })
}

fn check(status: u16, body: &[u8]) -> Result<(), TestCaseError> {
    prop_assert!(status < 500, "status {status}: {}", String::from_utf8_lossy(body));
    if status >= 400 {
        let v: serde_json::Value = serde_json::from_slice(body).unwrap();
        prop_assert!(v["Error"].as_str().is_some_and(|e| !e.is_empty()));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn edited_recorded_requests_get_an_answer_or_a_clear_error(pick in any::<usize>(), edits in proptest::collection::vec(edit(), 1..8)) {
        let all = recorded();
        prop_assume!(!all.is_empty());
        let (path, mut body) = all[pick % all.len()].clone();
        for e in edits {
            let n = body.len().max(1);
            match e {
                Edit::Set(i, b) if !body.is_empty() => body[i % n] = b,
                Edit::Insert(i, b) => body.insert(i % (body.len() + 1), b),
                Edit::Delete(i) if !body.is_empty() => {
                    body.remove(i % n);
                }
                _ => {}
            }
        }
        let (status, answer_body) = answer(&path, body);
        check(status, &answer_body)?;
    }

    #[test]
    fn arbitrary_bytes_get_a_clear_error(verb in prop_oneof![Just("/filter"), Just("/prioritize"), Just("/preempt"), Just("/bind")], body in proptest::collection::vec(any::<u8>(), 0..256)) {
        let (status, answer_body) = answer(verb, body);
        check(status, &answer_body)?;
    }
}
