//! Where events are written: the API server's `events.k8s.io/v1`, or a test's double.

use std::future::Future;

use k8s_openapi::api::events::v1::Event;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};

/// Why a write failed, as the retry rules need it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SinkError {
    /// The event to patch does not exist.
    #[error("the event does not exist")]
    NotFound,
    /// An event of this name exists already.
    #[error("the event exists already")]
    AlreadyExists,
    /// The server could not be reached or was unavailable: the write may be retried.
    #[error("failed to write the event: {0}")]
    Transient(String),
    /// The server refused the event: retrying would be refused again.
    #[error("the server rejected the event: {0}")]
    Rejected(String),
}

/// Writes events.
pub trait EventSink: Clone + Send + Sync + 'static {
    /// Creates `event`.
    fn create(&self, event: &Event) -> impl Future<Output = Result<(), SinkError>> + Send;
    /// Writes `event`'s series onto the existing event of its name.
    fn patch_series(&self, event: &Event) -> impl Future<Output = Result<(), SinkError>> + Send;
}

/// The API server.
#[derive(Clone)]
pub struct KubeSink {
    client: Client,
}

impl KubeSink {
    /// Writes through `client`.
    pub fn new(client: Client) -> Self {
        KubeSink { client }
    }

    fn api(&self, event: &Event) -> Api<Event> {
        Api::namespaced(self.client.clone(), event.metadata.namespace.as_deref().unwrap_or("default"))
    }
}

impl EventSink for KubeSink {
    async fn create(&self, event: &Event) -> Result<(), SinkError> {
        let mut event = event.clone();
        event.metadata.resource_version = None;
        self.api(&event).create(&PostParams::default(), &event).await.map(|_| ()).map_err(classify)
    }

    async fn patch_series(&self, event: &Event) -> Result<(), SinkError> {
        let name = event.metadata.name.as_deref().unwrap_or_default();
        let patch = serde_json::json!({ "series": event.series });
        self.api(event)
            .patch(name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
            .map(|_| ())
            .map_err(classify)
    }
}

/// Sorts a client error by what a retry could change.
fn classify(e: kube::Error) -> SinkError {
    match e {
        kube::Error::Api(s) if s.code == 404 => SinkError::NotFound,
        kube::Error::Api(s) if s.code == 409 => SinkError::AlreadyExists,
        // Too many requests, server errors and timeouts pass; the rest will not.
        kube::Error::Api(s) if s.code == 429 || s.code >= 500 => SinkError::Transient(s.message),
        kube::Error::Api(s) => SinkError::Rejected(format!("{} ({})", s.message, s.code)),
        kube::Error::SerdeError(e) => SinkError::Rejected(e.to_string()),
        other => SinkError::Transient(other.to_string()),
    }
}
