//! The state `run`'s tasks and its scheduling thread share: the engine behind one
//! mutex, the metrics, the write rate limit, and what the periodic summary counts.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};

use super::state::State;
use super::{foreground, metrics};
use crate::engine::Engine;

/// Counters for the periodic summary.
#[derive(Debug, Default)]
pub struct Stats {
    /// Pods bound.
    pub scheduled: AtomicU64,
    /// Whether the first bind was logged.
    pub first_bind_logged: AtomicBool,
    /// Attempts that found no node.
    pub unschedulable: AtomicU64,
    /// Attempts that failed with an error.
    pub errors: AtomicU64,
}

/// State shared by the tasks and the scheduling thread.
pub struct Shared {
    state: Mutex<State>,
    pub(super) cv: Condvar,
    /// Metrics.
    pub metrics: metrics::Metrics,
    /// Client-side rate limit of writes (clientConnection.qps / burst).
    pub limiter: DefaultDirectRateLimiter,
    pub(super) leader: AtomicBool,
    /// Why this replica's last leader election attempt failed (`None` while it works or
    /// without leader election): the replica is not ready meanwhile.
    pub(super) election_failure: tokio::sync::watch::Sender<Option<String>>,
    pub(super) stopping: AtomicBool,
    /// Assumed pods whose binding was not sent because the scheduler was stopping.
    pub(super) released: AtomicUsize,
    /// Counters for the periodic summary.
    pub stats: Stats,
    /// The configured HTTP extenders, with the objects they are sent.
    pub extenders: std::sync::OnceLock<Arc<crate::extenders::ExtenderSet>>,
    /// `NominatedNodeNameForExpectation`: a pod whose binding cycle will wait carries its
    /// node in `status.nominatedNodeName` first.
    pub nominate_before_waiting: AtomicBool,
    /// The binding cycles waiting for a write slot and their writes in flight, which
    /// informing writes yield to.
    pub foreground: foreground::Foreground,
    /// A pod ended or went away: room may have freed (the admission check waits on it).
    pub room_freed: tokio::sync::Notify,
}

impl Shared {
    /// Shared state around an engine, with a write rate limit.
    pub fn new(engine: Engine, quota: Quota) -> Self {
        Shared {
            state: Mutex::new(State::new(engine)),
            cv: Condvar::new(),
            metrics: metrics::Metrics::default(),
            limiter: RateLimiter::direct(quota),
            leader: AtomicBool::new(false),
            election_failure: tokio::sync::watch::Sender::new(None),
            stopping: AtomicBool::new(false),
            released: AtomicUsize::new(0),
            stats: Stats::default(),
            extenders: std::sync::OnceLock::new(),
            nominate_before_waiting: AtomicBool::new(true),
            foreground: foreground::Foreground::default(),
            room_freed: tokio::sync::Notify::new(),
        }
    }

    /// Locks the state (a panic elsewhere does not poison the scheduler).
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes the scheduling thread.
    pub fn wake(&self) {
        self.cv.notify_all();
    }

    /// Whether the scheduler is shutting down.
    pub fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// Counts a pod whose binding was not sent because the scheduler is stopping (the
    /// binding cycle forgot it; it stays pending in the API for the next scheduler).
    pub fn count_released(&self) {
        self.released.fetch_add(1, Ordering::SeqCst);
    }

    /// Whether this replica leads (always, without leader election).
    pub fn is_leader(&self) -> bool {
        self.leader.load(Ordering::SeqCst)
    }

    /// Why leader election fails, while it does.
    pub fn election_failure(&self) -> Option<String> {
        self.election_failure.borrow().clone()
    }

    /// Whether every cache has synced.
    pub fn ready(&self) -> bool {
        self.lock().all_synced()
    }
}
