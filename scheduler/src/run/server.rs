//! `/healthz`, `/readyz` and `/metrics`.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use algorithms::plugins::registry::OWNERS;

use super::shared::Shared;

async fn readyz(State(shared): State<Arc<Shared>>) -> Response {
    if let Some(why) = shared.election_failure() {
        let body = format!("this replica cannot take part in leader election: {why}\n");
        return (StatusCode::SERVICE_UNAVAILABLE, body).into_response();
    }
    if shared.ready() {
        "ok\n".into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "caches not synced\n").into_response()
    }
}

async fn metrics(State(shared): State<Arc<Shared>>) -> Response {
    let owned = {
        let st = shared.lock();
        let l = st.engine.queue.lengths();
        shared.metrics.queues(l);
        let cache = &st.engine.cache;
        shared.metrics.cycle.cache(cache.node_count(), cache.pod_count(), cache.assumed_count());
        shared.metrics.cycle.unschedulable(&st.engine.queue.unschedulable_by_plugin());
        shared.metrics.flow.in_flight_events(&st.engine.queue.in_flight_events());
        let pending: Vec<&algorithms::PodInfo> = st.engine.queue.pods().collect();
        let objects = st.engine.cache.objects();
        let allocatable = st.engine.cache.allocatable();
        OWNERS.iter().flat_map(|o| o.gauges(objects, &pending, &allocatable)).collect::<Vec<_>>()
    };
    (
        [("content-type", "application/openmetrics-text; version=1.0.0; charset=utf-8")],
        shared.metrics.render_with(&owned),
    )
        .into_response()
}

/// The operations router, all of it open (the plain-HTTP port).
pub fn router(shared: Arc<Shared>) -> Router {
    health(shared.clone()).merge(metrics_router(shared))
}

/// `/healthz`, `/livez` and `/readyz`: open on every port, as kube-scheduler's.
pub fn health(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/livez", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .with_state(shared)
}

/// `/metrics`.
pub fn metrics_router(shared: Arc<Shared>) -> Router {
    Router::new().route("/metrics", get(metrics)).with_state(shared)
}
