//! The axum router: verbs, health, readiness and metrics.

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::Extender;
use crate::handlers::{self, ApiError};
use crate::types::{ExtenderBindingResult, ExtenderFilterResult};

/// Default request body limit: room for a NodeList of 5,000 large nodes.
pub const DEFAULT_BODY_LIMIT: usize = 256 * 1024 * 1024;

#[derive(Serialize)]
struct ErrorBody {
    #[serde(rename = "Error")]
    error: String,
}

fn error_response(e: ApiError) -> Response {
    let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_REQUEST);
    (status, axum::Json(ErrorBody { error: e.message })).into_response()
}

fn parse<T: DeserializeOwned>(body: Result<Bytes, BytesRejection>) -> Result<T, ApiError> {
    let body = body.map_err(|r| ApiError { status: r.status().as_u16(), message: r.body_text() })?;
    // Tracking the field path slows decoding of a large NodeList down: decode plainly,
    // and only a body that fails is decoded again to name where it went wrong.
    if let Ok(args) = serde_json::from_slice(&body) {
        return Ok(args);
    }
    let mut de = serde_json::Deserializer::from_slice(&body);
    let args = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let at = if path == "." { String::new() } else { format!(" at {path}") };
        ApiError::bad_request(format!("malformed request body{at}: {}", e.inner()))
    })?;
    // The plain decoder failed, yet the document itself is fine: something follows it.
    de.end().map_err(|e| ApiError::bad_request(format!("malformed request body: {e} after the JSON document")))?;
    Ok(args)
}

/// Bytes of body per node a request may carry at least: a node that names itself takes
/// about 25 bytes, one kube-scheduler sends several hundred. A body packed with more,
/// emptier items is refused before the items are built, so memory stays proportional to
/// the body.
pub const MIN_BYTES_PER_NODE: usize = 24;

/// The shape of a filter or prioritize body, counted without building anything.
#[derive(serde::Deserialize)]
struct Counted {
    #[serde(rename = "Nodes", default)]
    nodes: Option<CountedList>,
    #[serde(rename = "NodeNames", default)]
    node_names: Option<Vec<serde::de::IgnoredAny>>,
}

#[derive(serde::Deserialize)]
struct CountedList {
    #[serde(default)]
    items: Option<Vec<serde::de::IgnoredAny>>,
}

/// Refuses a body with more nodes than its size allows (see [`MIN_BYTES_PER_NODE`]) or
/// than `max_nodes`. Bodies that do not even have the shape are left to the decoder to
/// describe.
fn check_node_count(body: &Result<Bytes, BytesRejection>, max_nodes: usize) -> Result<(), ApiError> {
    let Ok(bytes) = body else { return Ok(()) };
    let Ok(counted) = serde_json::from_slice::<Counted>(bytes) else { return Ok(()) };
    let items = counted.nodes.and_then(|l| l.items).map_or(0, |v| v.len());
    let names = counted.node_names.map_or(0, |v| v.len());
    let allowed = (bytes.len() / MIN_BYTES_PER_NODE).max(16);
    let sent = items.max(names);
    if sent > allowed {
        return Err(ApiError::bad_request(format!(
            "{sent} nodes in a {}-byte body: at most {allowed} (one per {MIN_BYTES_PER_NODE} bytes)",
            bytes.len()
        )));
    }
    if sent > max_nodes {
        return Err(ApiError::bad_request(format!(
            "{sent} nodes in one request: at most {max_nodes} (the extender's --max-nodes)"
        )));
    }
    Ok(())
}

/// Parses the body, runs `f` on a blocking thread (the plugins use rayon), records metrics.
async fn serve<A, R>(
    ext: Arc<Extender>,
    verb: &'static str,
    body: Result<Bytes, BytesRejection>,
    f: fn(&Extender, A) -> Result<R, ApiError>,
) -> Response
where
    A: DeserializeOwned + Send + 'static,
    R: Serialize + Send + 'static,
{
    let started = Instant::now();
    let large = body.as_ref().is_ok_and(|b| b.len() >= crate::memory::RELEASE_AFTER_BYTES);
    let checked = if matches!(verb, "filter" | "prioritize") { check_node_count(&body, ext.max_nodes) } else { Ok(()) };
    let response = match checked.and_then(|()| parse::<A>(body)) {
        Err(e) => error_response(e),
        Ok(args) => {
            let ext2 = ext.clone();
            match tokio::task::spawn_blocking(move || f(&ext2, args)).await {
                Ok(Ok(r)) => axum::Json(r).into_response(),
                Ok(Err(e)) => error_response(e),
                Err(join) => {
                    tracing::error!(verb, error = %join, "extender handler failed");
                    error_response(ApiError { status: 500, message: format!("{verb} failed: internal error") })
                }
            }
        }
    };
    let code = response.status().as_u16();
    if code >= 400 {
        tracing::warn!(verb, code, "extender request rejected");
    }
    ext.metrics.observe(verb, code, started.elapsed().as_secs_f64());
    if large {
        // What decoding and answering freed goes back once the answer is on its way.
        tokio::task::spawn_blocking(crate::memory::release_free_memory);
    }
    response
}

async fn filter(State(ext): State<Arc<Extender>>, body: Result<Bytes, BytesRejection>) -> Response {
    serve::<_, ExtenderFilterResult>(ext, "filter", body, handlers::filter).await
}

async fn prioritize(State(ext): State<Arc<Extender>>, body: Result<Bytes, BytesRejection>) -> Response {
    serve(ext, "prioritize", body, handlers::prioritize).await
}

async fn preempt(State(ext): State<Arc<Extender>>, body: Result<Bytes, BytesRejection>) -> Response {
    serve(ext, "preempt", body, handlers::preempt).await
}

async fn bind(State(ext): State<Arc<Extender>>, body: Result<Bytes, BytesRejection>) -> Response {
    let started = Instant::now();
    let response = match parse::<crate::types::ExtenderBindingArgs>(body) {
        Err(e) => error_response(e),
        Ok(args) => {
            let error = match &ext.cluster {
                None => "binding needs cluster access: start the extender with --kubeconfig or inside the cluster"
                    .to_string(),
                Some(c) => match c.bind(args, ext.profile.clone()).await {
                    Ok(()) => String::new(),
                    Err(e) => e,
                },
            };
            axum::Json(ExtenderBindingResult { error }).into_response()
        }
    };
    ext.metrics.observe("bind", response.status().as_u16(), started.elapsed().as_secs_f64());
    response
}

async fn readyz(State(ext): State<Arc<Extender>>) -> Response {
    match &ext.cluster {
        Some(c) if !c.ready() => (StatusCode::SERVICE_UNAVAILABLE, "caches not synced\n").into_response(),
        _ => "ok\n".into_response(),
    }
}

async fn metrics(State(ext): State<Arc<Extender>>) -> Response {
    ([("content-type", "application/openmetrics-text; version=1.0.0; charset=utf-8")], ext.metrics.render())
        .into_response()
}

async fn not_found() -> Response {
    error_response(ApiError {
        status: 404,
        message: "unknown path: the extender serves POST /filter, /prioritize, /bind, /preempt".into(),
    })
}

fn verbs() -> Router<Arc<Extender>> {
    Router::new()
        .route("/filter", post(filter))
        .route("/prioritize", post(prioritize))
        .route("/bind", post(bind))
        .route("/preempt", post(preempt))
}

/// Default bound on the time to receive a request's body and answer it.
pub const DEFAULT_REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// What one request may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest body in bytes; larger ones get `413`.
    pub body_bytes: usize,
    /// Time from the request's headers to its answer; past it `408`.
    pub request_timeout: std::time::Duration,
    /// Whether `/metrics` is served beside the verbs (not when a secure port serves it).
    pub metrics: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Self { body_bytes: DEFAULT_BODY_LIMIT, request_timeout: DEFAULT_REQUEST_TIMEOUT, metrics: true }
    }
}

/// `/healthz`, `/readyz` and `/metrics` alone, for a port of their own.
pub fn operations_router(ext: Arc<Extender>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/livez", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(ext)
}

/// The extender's routes. Verbs are served at the root and under `/scheduler`
/// (a common `urlPrefix`).
pub fn router(ext: Arc<Extender>, body_limit: usize) -> Router {
    router_with_limits(ext, Limits { body_bytes: body_limit, ..Limits::default() })
}

/// [`router`] with every limit given. A client that stops sending its body gets `408`
/// after the request timeout and its connection is freed.
pub fn router_with_limits(ext: Arc<Extender>, limits: Limits) -> Router {
    let Limits { body_bytes: body_limit, request_timeout, metrics: with_metrics } = limits;
    let mut routes = Router::new()
        .merge(verbs())
        .nest("/scheduler", verbs())
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz));
    if with_metrics {
        routes = routes.route("/metrics", get(metrics));
    }
    routes
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(axum::middleware::from_fn(move |req, next| refuse_oversize(req, next, body_limit)))
        .layer(axum::middleware::from_fn(move |req, next: axum::middleware::Next| async move {
            match tokio::time::timeout(request_timeout, next.run(req)).await {
                Ok(response) => response,
                Err(_) => error_response(ApiError {
                    status: 408,
                    message: format!("the request was not received and answered within {request_timeout:?}"),
                }),
            }
        }))
        .with_state(ext)
}

/// Answers 413 from the `Content-Length` header alone, before any of the body is read
/// (so a client that sent `Expect: 100-continue` is never told to continue).
async fn refuse_oversize(req: axum::extract::Request, next: axum::middleware::Next, limit: usize) -> Response {
    if let Some(enc) = req.headers().get(axum::http::header::CONTENT_ENCODING)
        && !enc.as_bytes().eq_ignore_ascii_case(b"identity")
    {
        return error_response(ApiError {
            status: 415,
            message: format!("Content-Encoding {:?} is not supported: send the body uncompressed", enc),
        });
    }
    let declared = req
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(len) = declared.filter(|&len| len > limit as u64) {
        return error_response(ApiError {
            status: 413,
            message: format!("request body of {len} bytes is over the limit of {limit} bytes"),
        });
    }
    next.run(req).await
}
