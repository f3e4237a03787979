//! Aggregation of repeated events into series, in a cache of bounded size, plus a
//! per-object rate limit on new writes.
//!
//! Events are isomorphic when their action, reason, reporting controller, regarding and
//! related objects are equal (resource versions included), as in client-go's
//! `events.k8s.io/v1` broadcaster that kube-scheduler uses: the first is created, the
//! second turns it into a series (count 2, written at once), later ones only count until
//! the series ends (six minutes without a repeat), is refreshed (every thirty minutes) or
//! leaves the cache. Unlike client-go, whose cache holds every event of the last six
//! minutes, the cache keeps at most a fixed number of keys (least recently seen leave
//! first, their unwritten count written as they go), so memory and the work per event do
//! not grow with the event rate.

use std::num::NonZeroUsize;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use lru::LruCache;

/// Keys the series cache holds by default (client-go's correlator keeps 4,096).
pub const CACHE_ENTRIES: usize = 4096;
/// A series with no repeat for this long is finished: its last count is written and it
/// leaves the cache; a single event leaves it this long after it was created.
pub const FINISH_AFTER: Duration = Duration::from_secs(6 * 60);
/// A series still running is written again after this long, so it outlives the API
/// server's event TTL.
pub const REFRESH_AFTER: Duration = Duration::from_secs(30 * 60);
/// New writes one object may cause for one reason in a burst.
pub const SPAM_BURST: f64 = 25.0;
/// One more write per object and reason is allowed after this long.
pub const SPAM_REFILL: Duration = Duration::from_secs(5 * 60);

/// An API write the correlator asks for.
#[derive(Debug, Clone)]
pub enum Write {
    /// Create the event.
    Create(Event),
    /// Write the event's series (count and last observation) onto the event of the same
    /// name; create it with its series when it does not exist.
    Series(Event),
}

impl Write {
    /// The event written.
    pub fn event(&self) -> &Event {
        match self {
            Write::Create(e) | Write::Series(e) => e,
        }
    }
}

/// What became of one observed event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observed {
    /// It causes a write.
    Written,
    /// It was counted into a running series, written later.
    Counted,
    /// The per-object rate limit dropped it.
    Limited,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct RefKey([Option<String>; 7]);

impl RefKey {
    fn of(r: &ObjectReference) -> Self {
        RefKey([
            r.api_version.clone(),
            r.kind.clone(),
            r.namespace.clone(),
            r.name.clone(),
            r.uid.clone(),
            r.resource_version.clone(),
            r.field_path.clone(),
        ])
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    action: Option<String>,
    reason: Option<String>,
    controller: Option<String>,
    regarding: Option<RefKey>,
    related: Option<RefKey>,
}

impl Key {
    fn of(e: &Event) -> Self {
        Key {
            action: e.action.clone(),
            reason: e.reason.clone(),
            controller: e.reporting_controller.clone(),
            regarding: e.regarding.as_ref().map(RefKey::of),
            related: e.related.as_ref().map(RefKey::of),
        }
    }
}

/// The object (without its resource version) and reason the spam limit counts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SpamKey {
    namespace: Option<String>,
    name: Option<String>,
    uid: Option<String>,
    reason: Option<String>,
}

struct Entry {
    event: Event,
    created: Instant,
    last_seen: Instant,
    last_written: Instant,
    unwritten: bool,
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

/// The series cache and the spam limit, both of bounded size.
pub struct Correlator {
    series: LruCache<Key, Entry>,
    spam: LruCache<SpamKey, Bucket>,
}

impl Correlator {
    /// A correlator keeping at most `entries` event keys and as many spam buckets.
    pub fn new(entries: usize) -> Self {
        let cap = NonZeroUsize::new(entries).unwrap_or(NonZeroUsize::MIN);
        Correlator { series: LruCache::new(cap), spam: LruCache::new(cap) }
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        self.series.len()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }

    /// Takes one event seen at `now`, appending the writes it causes to `out` (the
    /// event's own, and the last count of a series it pushed out of the cache).
    pub fn observe(&mut self, event: Event, now: Instant, out: &mut Vec<Write>) -> Observed {
        let key = Key::of(&event);
        let observed_at = event.event_time.clone().unwrap_or_else(|| MicroTime(k8s_openapi::jiff::Timestamp::now()));
        if let Some(entry) = self.series.get_mut(&key) {
            entry.last_seen = now;
            if let Some(series) = entry.event.series.as_mut() {
                series.count += 1;
                series.last_observed_time = observed_at;
                entry.unwritten = true;
                return Observed::Counted;
            }
            if !allow(&mut self.spam, &event, now) {
                return Observed::Limited;
            }
            entry.event.series = Some(EventSeries { count: 2, last_observed_time: observed_at });
            entry.last_written = now;
            entry.unwritten = false;
            out.push(Write::Series(entry.event.clone()));
            return Observed::Written;
        }
        if !allow(&mut self.spam, &event, now) {
            return Observed::Limited;
        }
        let entry = Entry { event: event.clone(), created: now, last_seen: now, last_written: now, unwritten: false };
        if let Some((_, evicted)) = self.series.push(key, entry)
            && evicted.unwritten
        {
            out.push(Write::Series(evicted.event));
        }
        out.push(Write::Create(event));
        Observed::Written
    }

    /// Ends the series idle for [`FINISH_AFTER`] (writing their last count), drops single
    /// events older than that, and rewrites series not written for [`REFRESH_AFTER`].
    pub fn tick(&mut self, now: Instant, out: &mut Vec<Write>) {
        let mut done = Vec::new();
        for (key, entry) in self.series.iter_mut() {
            let running = entry.event.series.is_some();
            if running && now.duration_since(entry.last_seen) >= FINISH_AFTER {
                if entry.unwritten {
                    out.push(Write::Series(entry.event.clone()));
                }
                done.push(key.clone());
            } else if !running && now.duration_since(entry.created) >= FINISH_AFTER {
                done.push(key.clone());
            } else if running && now.duration_since(entry.last_written) >= REFRESH_AFTER {
                entry.last_written = now;
                entry.unwritten = false;
                out.push(Write::Series(entry.event.clone()));
            }
        }
        for key in done {
            self.series.pop(&key);
        }
    }
}

/// Takes a token from the event's object-and-reason bucket.
fn allow(spam: &mut LruCache<SpamKey, Bucket>, event: &Event, now: Instant) -> bool {
    let r = event.regarding.as_ref();
    let key = SpamKey {
        namespace: r.and_then(|r| r.namespace.clone()),
        name: r.and_then(|r| r.name.clone()),
        uid: r.and_then(|r| r.uid.clone()),
        reason: event.reason.clone(),
    };
    let bucket = spam.get_or_insert_mut(key, || Bucket { tokens: SPAM_BURST, at: now });
    let refill = now.duration_since(bucket.at).as_secs_f64() / SPAM_REFILL.as_secs_f64();
    bucket.tokens = (bucket.tokens + refill).min(SPAM_BURST);
    bucket.at = now;
    if bucket.tokens < 1.0 {
        return false;
    }
    bucket.tokens -= 1.0;
    true
}

#[cfg(test)]
#[path = "correlator_tests.rs"]
mod tests;
