//! Which writes come first when the API server is the bottleneck.
//!
//! A backlog of pods is drained as fast as the API server accepts their binding cycles'
//! writes (claims, volumes, Bindings). Writes that only inform (the `Scheduled` events,
//! the `nominatedNodeName` of a pod about to be bound) yield to them, up to a limit, so
//! that in a burst the server spends itself on binding pods and the informing writes
//! follow once it has room.
//!
//! The server is taken to be the bottleneck while a binding cycle waits for a write slot,
//! and after that for as long as the cycles' writes then in flight last (at most
//! [`SATURATED_FOR`] after the last wait): so the last cycles of a burst, which hold
//! every slot and wait for none, are not slowed either. Under a steady load the server
//! keeps up with, writes are in flight but no cycle waits, and informing writes go at
//! once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// How long after a binding cycle last waited for a slot the writes in flight still
/// count as a burst.
pub const SATURATED_FOR: Duration = Duration::from_secs(2);

#[derive(Debug)]
struct Inner {
    /// Binding cycles waiting for a slot.
    waiting: AtomicUsize,
    /// Binding cycles' writes in flight.
    writing: AtomicUsize,
    /// When a cycle last stopped waiting, in milliseconds since `epoch`.
    last_wait: AtomicU64,
    epoch: Instant,
    /// Told when the server stops being busy (the last wait or write ended).
    idle: Notify,
}

impl Default for Inner {
    fn default() -> Self {
        Inner {
            waiting: AtomicUsize::new(0),
            writing: AtomicUsize::new(0),
            last_wait: AtomicU64::new(0),
            epoch: Instant::now(),
            idle: Notify::new(),
        }
    }
}

impl Inner {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX).max(1)
    }

    /// How long the writes in flight still count as a burst (zero: they do not).
    fn burst_left(&self) -> Duration {
        let last = self.last_wait.load(Ordering::Acquire);
        if last == 0 || self.writing.load(Ordering::Acquire) == 0 {
            return Duration::ZERO;
        }
        let since = Duration::from_millis(self.now_ms().saturating_sub(last));
        SATURATED_FOR.saturating_sub(since)
    }

    fn busy(&self) -> bool {
        self.waiting.load(Ordering::Acquire) > 0 || !self.burst_left().is_zero()
    }
}

/// Counts the binding cycles waiting for a write slot and their writes in flight.
#[derive(Clone, Debug, Default)]
pub struct Foreground {
    inner: Arc<Inner>,
}

/// A binding cycle waiting for a slot; counted until dropped.
#[derive(Debug)]
pub struct Waiting(Arc<Inner>);

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.last_wait.store(self.0.now_ms(), Ordering::Release);
        if self.0.waiting.fetch_sub(1, Ordering::AcqRel) == 1 && !self.0.busy() {
            self.0.idle.notify_waiters();
        }
    }
}

/// A binding cycle's write in flight; counted until dropped.
#[derive(Debug)]
pub struct Writing(Arc<Inner>);

impl Drop for Writing {
    fn drop(&mut self) {
        if self.0.writing.fetch_sub(1, Ordering::AcqRel) == 1 && !self.0.busy() {
            self.0.idle.notify_waiters();
        }
    }
}

impl Foreground {
    /// Marks a binding cycle as waiting for a slot until the guard is dropped.
    pub fn waiting(&self) -> Waiting {
        self.inner.waiting.fetch_add(1, Ordering::AcqRel);
        Waiting(self.inner.clone())
    }

    /// Marks a binding cycle's write as in flight until the guard is dropped.
    pub fn writing(&self) -> Writing {
        self.inner.writing.fetch_add(1, Ordering::AcqRel);
        Writing(self.inner.clone())
    }

    /// Awaits `slot` (a write slot, a binding permit, the rate limit), counted as a
    /// binding cycle waiting only if it is not there at once: a slot taken at once is no
    /// sign of a burst.
    pub async fn waiting_for<T>(&self, slot: impl std::future::Future<Output = T>) -> T {
        let mut slot = std::pin::pin!(slot);
        if let std::task::Poll::Ready(v) = futures::poll!(slot.as_mut()) {
            return v;
        }
        let _waiting = self.waiting();
        slot.await
    }

    /// Whether the server is busy with binding cycles: one waits for a slot, or writes
    /// are in flight less than [`SATURATED_FOR`] after one did.
    pub fn busy(&self) -> bool {
        self.inner.busy()
    }

    /// Waits until the server is not busy with binding cycles, or `limit` has passed.
    pub async fn yield_to(&self, limit: Duration) {
        let deadline = Instant::now().checked_add(limit);
        loop {
            let idle = self.inner.idle.notified();
            tokio::pin!(idle);
            // Registered before the look, so that the last cycle's wake is not missed.
            idle.as_mut().enable();
            if !self.busy() {
                return;
            }
            // The burst's window ends by itself: look again then (and, should one open
            // meanwhile without a wake, within a window's length).
            let burst = self.inner.burst_left();
            let next = Instant::now().checked_add(if burst.is_zero() { SATURATED_FOR } else { burst });
            let wake = match (deadline, next) {
                (Some(d), Some(n)) => Some(d.min(n)),
                (d, n) => d.or(n),
            };
            let timer = async {
                match wake {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = idle => {}
                _ = timer => {}
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_slot_there_at_once_is_no_wait() {
        let f = Foreground::default();
        f.waiting_for(async {}).await;
        let _write = f.writing();
        assert!(!f.busy(), "the slot was free: no burst");
        f.waiting_for(tokio::time::sleep(Duration::from_millis(10))).await;
        assert!(f.busy(), "the slot took a while: the write in flight is a burst's");
    }

    /// Yields for up to a minute on a task; the task gives how long it yielded.
    fn spawn_yield(f: &Foreground) -> tokio::task::JoinHandle<Duration> {
        let f = f.clone();
        tokio::spawn(async move {
            let t0 = Instant::now();
            f.yield_to(Duration::from_secs(60)).await;
            t0.elapsed()
        })
    }

    #[tokio::test(start_paused = true)]
    async fn yields_while_a_cycle_waits_and_no_longer_than_the_limit() {
        let f = Foreground::default();
        assert!(!f.busy());
        let guard = f.waiting();
        let second = f.waiting();
        assert!(f.busy());
        drop(second);
        assert!(f.busy(), "one cycle still waits");
        let t0 = tokio::time::Instant::now();
        f.yield_to(Duration::from_secs(2)).await;
        assert!(t0.elapsed() >= Duration::from_secs(2), "waited the whole limit while busy");
        let waiter = spawn_yield(&f);
        tokio::time::sleep(Duration::from_millis(500)).await;
        drop(guard);
        let waited = waiter.await.unwrap();
        assert!(!f.busy());
        assert!(waited >= Duration::from_millis(500) && waited < Duration::from_secs(1), "{waited:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn writes_in_flight_hold_informing_writes_only_after_a_cycle_waited() {
        let f = Foreground::default();
        let steady = f.writing();
        assert!(!f.busy(), "writes in flight alone: the server keeps up");
        drop(f.waiting());
        assert!(f.busy(), "a cycle just waited: the writes in flight are a burst's");
        tokio::time::advance(SATURATED_FOR + Duration::from_millis(10)).await;
        assert!(!f.busy(), "the burst's window is over");
        drop(steady);
        drop(f.waiting());
        assert!(!f.busy(), "nothing in flight after the wait");

        // The last write of a burst wakes those yielding.
        let last = f.writing();
        drop(f.waiting());
        let waiter = spawn_yield(&f);
        tokio::time::sleep(Duration::from_millis(300)).await;
        drop(last);
        let waited = waiter.await.unwrap();
        assert!(waited >= Duration::from_millis(300) && waited < Duration::from_millis(400), "{waited:?}");

        // So does the end of the window, with writes still in flight.
        let _long = f.writing();
        drop(f.waiting());
        let t0 = Instant::now();
        f.yield_to(Duration::from_secs(60)).await;
        let waited = t0.elapsed();
        assert!(waited >= SATURATED_FOR && waited < SATURATED_FOR + Duration::from_millis(100), "{waited:?}");

        // A window that opens while one yields (a wait ends with writes in flight) is
        // noticed when it ends, though nothing wakes the yielding write then.
        tokio::time::advance(SATURATED_FOR).await;
        let wait = f.waiting();
        let waiter = spawn_yield(&f);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let _more = f.writing();
        drop(wait);
        let waited = waiter.await.unwrap();
        let end = SATURATED_FOR + Duration::from_millis(100);
        assert!(waited >= end && waited < end + Duration::from_millis(100), "{waited:?}");
    }
}
