//! The event pipeline: a bounded queue off the scheduling and binding paths, the
//! correlator, and writers with their own rate limit that retry failed writes.
//!
//! Writes yield to the binding cycles ([`crate::run::foreground`]): while one waits for
//! a write slot (and while the writes of such a burst are in flight), a write waits too,
//! up to `Options::max_defer` after its event was recorded, or until half the backlog
//! is taken. In a burst the API server binds pods first and the events follow.
//!
//! Memory is bounded by the queue, the correlator's cache, the backlog of writes waiting
//! for a writer and the writers in flight; the work per event is constant. What does not
//! fit is dropped and counted in `scheduler_events_dropped_total{reason}`: `queue_full`,
//! `backlog_full`, `rate_limited` (the per-object limit) or `write_failed` (the server
//! rejected it, or every retry failed).

use std::collections::VecDeque;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use k8s_openapi::api::events::v1::Event;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use rand::Rng;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tokio::task::JoinHandle;
use tracing::{debug, warn};

use super::correlator::{Correlator, Observed, Write};
use super::sink::{EventSink, SinkError};
use crate::run::foreground::Foreground;

/// `reason` label of the event pipeline's counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    /// Why.
    pub reason: String,
}

/// Sizes, rates and retry rules.
#[derive(Debug, Clone)]
pub struct Options {
    /// Events waiting for the correlator (client-go's broadcaster queues 1,000).
    pub queue: usize,
    /// Keys the correlator keeps.
    pub cache: usize,
    /// Writes in flight at once, retries included.
    pub writers: usize,
    /// Writes per second, and the burst above it.
    pub qps: u32,
    /// See `qps`.
    pub burst: u32,
    /// Attempts per write (client-go makes 12).
    pub tries: u32,
    /// The first retry's delay; it doubles up to `max_delay`, with jitter.
    pub first_delay: Duration,
    /// See `first_delay`.
    pub max_delay: Duration,
    /// How often series are finished and refreshed.
    pub tick: Duration,
    /// Writes waiting for a writer, at most.
    pub backlog: usize,
    /// The binding cycles writes yield to, if any.
    pub yield_to: Option<Foreground>,
    /// How long after its event was recorded a write yields, at most.
    pub max_defer: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            queue: 1000,
            cache: super::correlator::CACHE_ENTRIES,
            writers: 32,
            qps: 500,
            burst: 1000,
            tries: 12,
            first_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(10),
            tick: Duration::from_secs(60),
            backlog: 20_000,
            yield_to: None,
            max_defer: Duration::from_secs(30),
        }
    }
}

/// The pipeline's counters.
#[derive(Clone, Default)]
pub struct Stats {
    /// Events dropped, by reason.
    pub dropped: Family<ReasonLabels, Counter>,
    /// Keys in the correlator's cache.
    pub cache_size: Gauge,
    /// Writes that succeeded.
    pub written: Counter,
    /// Attempts that failed and were retried.
    pub retried: Counter,
}

impl Stats {
    fn drop(&self, reason: &str) {
        self.dropped.get_or_create(&ReasonLabels { reason: reason.into() }).inc();
    }
}

/// Hands events to the pipeline without waiting.
pub struct Recorder {
    tx: mpsc::Sender<Event>,
    stats: Stats,
    close: watch::Sender<bool>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl Recorder {
    /// Starts the pipeline on the current runtime, writing to `sink`.
    pub fn start<S: EventSink>(sink: S, options: Options, stats: Stats) -> Self {
        let (tx, rx) = mpsc::channel(options.queue.max(1));
        let (close, closed) = watch::channel(false);
        let task = tokio::spawn(pipeline(sink, options, stats.clone(), rx, closed));
        Recorder { tx, stats, close, task: Mutex::new(Some(task)) }
    }

    /// Queues `event`; a full queue drops it (counted).
    pub fn record(&self, event: Event) {
        if let Err(e) = self.tx.try_send(event) {
            let reason = match e {
                mpsc::error::TrySendError::Full(_) => "queue_full",
                mpsc::error::TrySendError::Closed(_) => "closed",
            };
            self.stats.drop(reason);
        }
    }

    /// Writes what is queued and waits, at most `limit`, for the writes in flight.
    pub async fn close(&self, limit: Duration) {
        let _ = self.close.send(true);
        let task = self.task.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(task) = task
            && tokio::time::timeout(limit, task).await.is_err()
        {
            warn!("event writes still in flight at exit");
        }
    }
}

async fn pipeline<S: EventSink>(
    sink: S,
    options: Options,
    stats: Stats,
    mut rx: mpsc::Receiver<Event>,
    mut closed: watch::Receiver<bool>,
) {
    let qps = NonZeroU32::new(options.qps).unwrap_or(NonZeroU32::MIN);
    let burst = NonZeroU32::new(options.burst).unwrap_or(NonZeroU32::MIN);
    let limiter = Arc::new(RateLimiter::direct(Quota::per_second(qps).allow_burst(burst)));
    let writers = Arc::new(Semaphore::new(options.writers.max(1)));
    let mut correlator = Correlator::new(options.cache);
    let mut tick = tokio::time::interval(options.tick);
    tick.tick().await;
    let mut writes = Vec::new();
    // Writes waiting for a writer, with when they were recorded; its length is shared
    // with the writers, which stop yielding once half the backlog is taken.
    let mut backlog: VecDeque<(tokio::time::Instant, Write)> = VecDeque::new();
    let waiting = Arc::new(AtomicUsize::new(0));
    loop {
        let closing = tokio::select! {
            event = rx.recv() => match event {
                Some(event) => {
                    observe(&mut correlator, &stats, event, &mut writes);
                    false
                }
                None => true,
            },
            _ = tick.tick() => {
                correlator.tick(Instant::now(), &mut writes);
                false
            }
            _ = closed.changed() => true,
            permit = writers.clone().acquire_owned(), if !backlog.is_empty() => {
                let Ok(permit) = permit else { return };
                if let Some(write) = backlog.pop_front() {
                    spawn_write(&sink, &limiter, &stats, &options, &waiting, write, permit);
                }
                false
            }
        };
        if closing {
            rx.close();
            while let Ok(event) = rx.try_recv() {
                observe(&mut correlator, &stats, event, &mut writes);
            }
        }
        stats.cache_size.set(i64::try_from(correlator.len()).unwrap_or(i64::MAX));
        let now = tokio::time::Instant::now();
        for write in writes.drain(..) {
            if backlog.len() >= options.backlog.max(1) {
                stats.drop("backlog_full");
            } else {
                backlog.push_back((now, write));
            }
        }
        waiting.store(backlog.len(), Ordering::Relaxed);
        if closing {
            // Nothing yields any more: what is left is written now.
            let options = Options { yield_to: None, ..options.clone() };
            while let Some(write) = backlog.pop_front() {
                let Ok(permit) = writers.clone().acquire_owned().await else { return };
                spawn_write(&sink, &limiter, &stats, &options, &waiting, write, permit);
            }
            let all = u32::try_from(options.writers.max(1)).unwrap_or(u32::MAX);
            let _ = writers.acquire_many(all).await;
            return;
        }
    }
}

/// Starts a write on its writer: first it yields to the binding cycles (as the module
/// docs say), then it is made.
fn spawn_write<S: EventSink>(
    sink: &S,
    limiter: &Arc<DefaultDirectRateLimiter>,
    stats: &Stats,
    options: &Options,
    waiting: &Arc<AtomicUsize>,
    (recorded, write): (tokio::time::Instant, Write),
    permit: OwnedSemaphorePermit,
) {
    let (sink, limiter, stats, options, waiting) =
        (sink.clone(), limiter.clone(), stats.clone(), options.clone(), waiting.clone());
    tokio::spawn(async move {
        if let Some(foreground) = &options.yield_to {
            // Half the backlog taken: the writes catch up rather than drop.
            while foreground.busy() && waiting.load(Ordering::Relaxed) < options.backlog / 2 {
                let left = options.max_defer.saturating_sub(recorded.elapsed());
                if left.is_zero() {
                    break;
                }
                foreground.yield_to(left.min(Duration::from_secs(1))).await;
            }
        }
        write_with_retries(&sink, &limiter, &stats, &options, write).await;
        drop(permit);
    });
}

fn observe(correlator: &mut Correlator, stats: &Stats, event: Event, writes: &mut Vec<Write>) {
    if correlator.observe(event, Instant::now(), writes) == Observed::Limited {
        stats.drop("rate_limited");
    }
}

/// Writes once, retrying transient failures with growing delays up to `options.tries`
/// attempts. A series whose event is gone is created with its count; a create that finds
/// its event there already is done, unless it was a series' (the first create raced it).
async fn write_with_retries<S: EventSink>(
    sink: &S,
    limiter: &DefaultDirectRateLimiter,
    stats: &Stats,
    options: &Options,
    write: Write,
) {
    let mut delay = options.first_delay;
    for attempt in 1..=options.tries.max(1) {
        limiter.until_ready().await;
        let result = match &write {
            Write::Create(e) => match sink.create(e).await {
                Err(SinkError::AlreadyExists) => Ok(()),
                other => other,
            },
            Write::Series(e) => match sink.patch_series(e).await {
                Err(SinkError::NotFound) => sink.create(e).await.map_err(|err| match err {
                    SinkError::AlreadyExists => SinkError::Transient("the event was created meanwhile".into()),
                    other => other,
                }),
                other => other,
            },
        };
        let event = write.event().metadata.name.as_deref().unwrap_or_default();
        match result {
            Ok(()) => {
                stats.written.inc();
                return;
            }
            Err(SinkError::Transient(error)) if attempt < options.tries => {
                debug!(event, attempt, %error, "event write failed; retrying");
                stats.retried.inc();
                let jitter = rand::rng().random_range(0.5..1.0);
                tokio::time::sleep(delay.mul_f64(jitter)).await;
                delay = (delay * 2).min(options.max_delay);
            }
            Err(error) => {
                warn!(event, attempt, %error, "event not written");
                stats.drop("write_failed");
                return;
            }
        }
    }
}

#[cfg(test)]
#[path = "recorder_tests.rs"]
mod tests;
