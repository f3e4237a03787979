//! Which writes come first when the API server is the bottleneck.
//!
//! A backlog of pods is drained as fast as the API server accepts their binding cycles'
//! writes (claims, volumes, Bindings). Writes that only inform (the `Scheduled` events,
//! the `nominatedNodeName` of a pod about to be bound) yield to them: they wait while a
//! binding cycle waits for a write slot or for the answer to a write, up to a limit, so
//! that in a burst the server spends itself on binding pods (to the last of them) and the
//! informing writes follow once it has room.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

#[derive(Debug, Default)]
struct Inner {
    waiting: AtomicUsize,
    /// Told when the last waiting cycle got its slot.
    idle: Notify,
}

/// Counts the binding cycles' writes waiting for a slot or for their answer.
#[derive(Clone, Debug, Default)]
pub struct Foreground {
    inner: Arc<Inner>,
}

/// A binding cycle's write (or its wait for a slot); counted until dropped.
#[derive(Debug)]
pub struct Waiting(Arc<Inner>);

impl Drop for Waiting {
    fn drop(&mut self) {
        if self.0.waiting.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

impl Foreground {
    /// Counts a binding cycle's write, or its wait for a slot, until the guard is dropped.
    pub fn waiting(&self) -> Waiting {
        self.inner.waiting.fetch_add(1, Ordering::AcqRel);
        Waiting(self.inner.clone())
    }

    /// Awaits `slot` (a write slot, a binding permit, the rate limit) counted as a
    /// binding cycle waiting.
    pub async fn waiting_for<T>(&self, slot: impl std::future::Future<Output = T>) -> T {
        let _waiting = self.waiting();
        slot.await
    }

    /// Whether any binding cycle's write is waiting for a slot or for its answer.
    pub fn busy(&self) -> bool {
        self.inner.waiting.load(Ordering::Acquire) > 0
    }

    /// Waits until no binding cycle's write waits (for a slot or an answer), or `limit`
    /// has passed.
    pub async fn yield_to(&self, limit: Duration) {
        let deadline = tokio::time::Instant::now().checked_add(limit);
        let expired = async {
            match deadline {
                Some(deadline) => tokio::time::sleep_until(deadline).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(expired);
        loop {
            let idle = self.inner.idle.notified();
            tokio::pin!(idle);
            // Registered before the look, so that the last cycle's wake is not missed.
            idle.as_mut().enable();
            if !self.busy() {
                return;
            }
            tokio::select! {
                _ = idle => {}
                _ = &mut expired => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let waiter = {
            let f = f.clone();
            tokio::spawn(async move {
                let t0 = tokio::time::Instant::now();
                f.yield_to(Duration::from_secs(60)).await;
                t0.elapsed()
            })
        };
        tokio::time::sleep(Duration::from_millis(500)).await;
        drop(guard);
        let waited = waiter.await.unwrap();
        assert!(!f.busy());
        assert!(waited >= Duration::from_millis(500) && waited < Duration::from_secs(1), "{waited:?}");
    }
}
