//! Helpers of the fake API server: Status bodies, field selectors, query strings,
//! strategic-merge-like patches and watch event encoding.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::fake_api::{Change, Kind};

pub fn status(code: u16, reason: &str, message: &str) -> Response {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                      "message": message, "reason": reason, "code": code});
    (StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), axum::Json(body)).into_response()
}

pub fn get_path<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(v, |cur, seg| cur.get(seg))
}

/// `a=b,c!=d` field selectors over the fields the scheduler uses.
pub fn matches_fields(obj: &Value, selector: Option<&str>) -> bool {
    let Some(sel) = selector.filter(|s| !s.is_empty()) else { return true };
    sel.split(',').all(|term| {
        let (path, want, negate) = match term.split_once("!=") {
            Some((p, v)) => (p, v, true),
            None => match term.split_once('=') {
                Some((p, v)) => (p.trim_end_matches('='), v, false),
                None => return true,
            },
        };
        let actual = get_path(obj, path).and_then(Value::as_str).unwrap_or("");
        (actual == want) != negate
    })
}

pub fn query(uri: &axum::http::Uri) -> BTreeMap<String, String> {
    uri.query()
        .map(|q| {
            q.split('&')
                .map(|kv| {
                    let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                    (k.to_string(), urlencoding_decode(v))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn urlencoding_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("00");
                out.push(u8::from_str_radix(hex, 16).unwrap_or(b'?'));
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Strategic-merge-like patch: objects merge recursively, `conditions` lists merge by `type`.
pub fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else if k == "conditions" && v.is_array() {
                    let list = t.entry(k.clone()).or_insert_with(|| json!([]));
                    if !list.is_array() {
                        *list = json!([]);
                    }
                    for c in v.as_array().into_iter().flatten() {
                        let arr = list.as_array_mut().expect("array");
                        match arr.iter_mut().find(|x| x.get("type") == c.get("type")) {
                            Some(existing) => merge(existing, c),
                            None => arr.push(c.clone()),
                        }
                    }
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
}

pub fn watch_event(t: &str, obj: &Value) -> Bytes {
    let mut line = serde_json::to_vec(&json!({"type": t, "object": obj})).unwrap();
    line.push(b'\n');
    Bytes::from(line)
}

/// Translates a change into what a watch with this selector sees.
pub fn visible(c: &Change, kind: Kind, ns: Option<&str>, fields: Option<&str>) -> Option<(&'static str, Value)> {
    if c.kind != kind {
        return None;
    }
    if let Some(ns) = ns
        && c.object["metadata"]["namespace"].as_str() != Some(ns)
    {
        return None;
    }
    let now = matches_fields(&c.object, fields);
    let before = c.old.as_ref().is_some_and(|o| matches_fields(o, fields));
    match (c.kind_type, before, now) {
        ("DELETED", true, _) => Some(("DELETED", c.object.clone())),
        ("DELETED", false, _) => None,
        ("ADDED", _, true) => Some(("ADDED", c.object.clone())),
        ("MODIFIED", true, true) => Some(("MODIFIED", c.object.clone())),
        ("MODIFIED", false, true) => Some(("ADDED", c.object.clone())),
        ("MODIFIED", true, false) => Some(("DELETED", c.object.clone())),
        _ => None,
    }
}

pub fn tokio_stream_from_broadcast(rx: broadcast::Receiver<Change>) -> impl futures::Stream<Item = Change> {
    futures::stream::unfold(rx, |mut rx| async move {
        loop {
            match rx.recv().await {
                Ok(c) => return Some((c, rx)),
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    })
}

pub fn tokio_util_timeout<S: futures::Stream + Send + 'static>(
    s: S,
    d: Duration,
) -> impl futures::Stream<Item = S::Item> {
    let deadline = tokio::time::Instant::now() + d;
    futures::stream::unfold(Box::pin(s), move |mut s| async move {
        match tokio::time::timeout_at(deadline, s.next()).await {
            Ok(Some(item)) => Some((item, s)),
            _ => None,
        }
    })
}
