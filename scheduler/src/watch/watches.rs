//! Watch streams with the scheduler's retry policy: quick retries so the cache catches up
//! soon after an API server restart, and an immediate relist after 410 Gone.

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
            Watched::Failed(kind, e) => {
                tracing::warn!(kind, error = %e, "watch failed; retrying with backoff");
                None
            }
        }
    }
}

/// Watch retries start at 200 ms and grow to at most 5 s (with jitter), so that the cache
/// catches up within seconds of an API server coming back.
fn backoff() -> watcher::ExponentialBackoff {
    backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(200))
        .with_max_delay(Duration::from_secs(5))
        .with_factor(2.0)
        .with_jitter()
        .without_max_times()
        .into()
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
    watcher::watcher(api, cfg)
        .map(|r| match r {
            Ok(ev) => Ok(Some(ev)),
            Err(e) if is_gone(&e) => Ok(None),
            Err(e) => Err(e),
        })
        .backoff(backoff())
        .map(move |r| match r {
            Ok(Some(ev)) => Watched::Event(ev),
            Ok(None) => Watched::Expired(kind),
            Err(e) => Watched::Failed(kind, e.to_string()),
        })
}
