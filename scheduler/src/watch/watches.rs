//! Watch streams with the scheduler's retry policy: retries backing off exponentially
//! with jitter up to a few seconds, so the cache catches up soon after an API server
//! restart without hammering one that is down; an immediate relist after 410 Gone; one
//! log line when a watch starts failing (or fails differently) and one when it recovers.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::{Stream, StreamExt};
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};

/// What a watch yields.
pub enum Watched<K> {
    /// An event of the watched kind.
    Event(Event<K>),
    /// 410 Gone: the watcher relists.
    Expired(&'static str),
    /// The watch failed and is retried after a backoff.
    Failed(&'static str, String),
}

impl<K> Watched<K> {
    /// The event, if this is one; an expiry or a failure is logged and gives `None` (the
    /// watcher relists or retries on its own).
    pub fn into_event(self) -> Option<Event<K>> {
        match self {
            Watched::Event(ev) => Some(ev),
            Watched::Expired(kind) => {
                tracing::info!(kind, "watch expired (410 Gone); relisting");
                None
            }
            // Logged by the watch when the failure starts or changes.
            Watched::Failed(..) => None,
        }
    }
}

/// Watch retries start at 200 ms and grow to at most 5 s (with jitter), so that the cache
/// catches up within seconds of an API server coming back.
fn backoff(progress: Arc<AtomicBool>) -> Patient {
    let inner = backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(200))
        .with_max_delay(Duration::from_secs(5))
        .with_factor(2.0)
        .with_jitter()
        .without_max_times()
        .into();
    Patient { inner, progress }
}

/// A backoff that starts over only after the watch made progress. The watcher yields
/// `Init` before every list attempt, and a backoff reset by any item would then never
/// grow while the server is down.
struct Patient {
    inner: watcher::ExponentialBackoff,
    /// Set when the watch yields an object or finishes a list.
    progress: Arc<AtomicBool>,
}

impl Iterator for Patient {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        self.inner.next()
    }
}

impl kube::runtime::utils::Backoff for Patient {
    fn reset(&mut self) {
        if self.progress.swap(false, Ordering::SeqCst) {
            self.inner.reset();
        }
    }
}

/// A watch error in one line, an API error as the server's message (not kube's `Debug`
/// dump of its `Status`).
fn told(error: &watcher::Error) -> String {
    use super::cause::api;
    match error {
        watcher::Error::InitialListFailed(e) => format!("failed to perform initial object list: {}", api(e)),
        watcher::Error::WatchStartFailed(e) => format!("failed to start watching object: {}", api(e)),
        watcher::Error::WatchFailed(e) => format!("watch stream failed: {}", api(e)),
        watcher::Error::WatchError(s) => {
            format!("error returned by apiserver during watch: {} ({} {})", s.message, s.code, s.reason)
        }
        other => super::cause::chain(other),
    }
}

/// Logs a watch's health when it changes: the first failure and each different one, with
/// the server and the cause, and the recovery.
struct Health {
    kind: &'static str,
    failing: Option<String>,
}

impl Health {
    fn failed(&mut self, error: &watcher::Error) -> String {
        let cause = told(error);
        if self.failing.as_deref() != Some(cause.as_str()) {
            tracing::warn!(kind = self.kind, server = super::cause::server(), error = %cause,
                "watch failing; retrying with backoff (logged again when it recovers or fails otherwise)");
            self.failing = Some(cause.clone());
        }
        cause
    }

    fn progressed(&mut self) {
        if self.failing.take().is_some() {
            tracing::info!(kind = self.kind, "watch recovered");
        }
    }
}

/// Whether the error is 410 Gone: the resource version is too old and the watcher
/// relists on its own, so there is nothing to back off from.
fn is_gone(e: &watcher::Error) -> bool {
    match e {
        watcher::Error::WatchError(s) => s.code == 410,
        watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::InitialListFailed(kube::Error::Api(s)) => s.code == 410,
        _ => false,
    }
}

/// A watch of `api` as a stream: events, `Expired` when the watcher relists after 410
/// Gone (at once), and failures (retried with [`backoff`]).
pub fn watch<K>(kind: &'static str, api: Api<K>, cfg: watcher::Config) -> impl Stream<Item = Watched<K>> + Send
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    let progress = Arc::new(AtomicBool::new(false));
    let seen = progress.clone();
    let mut health = Health { kind, failing: None };
    watcher::watcher(api, cfg)
        .map(move |r| {
            if matches!(r, Ok(Event::InitApply(_) | Event::InitDone | Event::Apply(_) | Event::Delete(_))) {
                seen.store(true, Ordering::SeqCst);
            }
            match r {
                Ok(ev) => Ok(Some(ev)),
                Err(e) if is_gone(&e) => Ok(None),
                Err(e) => Err(e),
            }
        })
        .backoff(backoff(progress))
        .map(move |r| match r {
            Ok(Some(ev)) => {
                if !matches!(ev, Event::Init) {
                    health.progressed();
                }
                Watched::Event(ev)
            }
            Ok(None) => Watched::Expired(kind),
            Err(e) => Watched::Failed(kind, health.failed(&e)),
        })
}
