//! `NominatedNodeNameForExpectation`: a pod whose binding cycle has something to do
//! before its Binding carries the node it is going to in `status.nominatedNodeName`, so
//! that cluster autoscalers and queueing controllers see where it goes while it waits.
//!
//! The write informs; it does not bind. As kube-scheduler's asynchronous API calls do
//! (a pending status patch is overwritten by the pod's Binding), it is dropped when the
//! Binding comes first. It is made at once when the API server has room or when the
//! cycle starts waiting on the cluster (Permit, a volume being provisioned, a device's
//! binding conditions), and otherwise yields to the binding cycles' own writes
//! ([`super::foreground`]), so that a burst of pods is not slowed by writes made moot a
//! moment later by their Bindings.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use super::foreground::Foreground;

/// The expectation of one pod.
#[derive(Default)]
struct Expectation {
    /// Still to be written (cleared when the Binding comes or the cycle ends).
    wanted: AtomicBool,
    /// The cycle started waiting on the cluster: write now.
    urgent: Notify,
    /// Held while the write is in flight: the Binding waits for it, so the server never
    /// sees the nomination after the Binding (which clears it).
    writing: tokio::sync::Mutex<()>,
}

/// A registered expectation, to be written by [`Pending::run`].
pub struct Pending(Arc<Expectation>);

impl Pending {
    /// Writes the expectation through `write` once it is its turn (see the module docs),
    /// unless [`Expectations::finish`] came first. Returns whether it was written.
    pub async fn run<F, Fut>(self, foreground: &Foreground, write: F) -> bool
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = ()>,
    {
        let e = self.0;
        let urgent = e.urgent.notified();
        tokio::pin!(urgent);
        // Woken when the server has room, when the cycle starts waiting on the cluster,
        // and when the Binding comes first.
        if e.wanted.load(Ordering::SeqCst) && foreground.busy() {
            tokio::select! {
                _ = &mut urgent => {}
                _ = foreground.yield_to(Duration::MAX) => {}
            }
        }
        let _writing = e.writing.lock().await;
        if !e.wanted.load(Ordering::SeqCst) {
            return false;
        }
        write().await;
        true
    }
}

/// The expectations not yet written or dropped, by pod key.
#[derive(Default)]
pub struct Expectations {
    pods: Mutex<HashMap<String, Arc<Expectation>>>,
}

impl Expectations {
    fn get(&self, key: &str) -> Option<Arc<Expectation>> {
        self.pods.lock().unwrap_or_else(|e| e.into_inner()).get(key).cloned()
    }

    /// Registers the pod's expectation, before its binding cycle goes on: from here,
    /// [`Expectations::finish`] drops it or waits for it.
    pub fn begin(&self, key: &str) -> Pending {
        let e = Arc::new(Expectation::default());
        e.wanted.store(true, Ordering::SeqCst);
        self.pods.lock().unwrap_or_else(|e| e.into_inner()).insert(key.to_string(), e.clone());
        Pending(e)
    }

    /// The cycle of `key` started waiting on the cluster: its expectation is written now.
    pub fn urgent(&self, key: &str) {
        if let Some(e) = self.get(key) {
            e.urgent.notify_one();
        }
    }

    /// The Binding is about to be posted, or the cycle ended: an expectation not yet
    /// written is dropped, one in flight is waited for.
    pub async fn finish(&self, key: &str) {
        let Some(e) = self.pods.lock().unwrap_or_else(|e| e.into_inner()).remove(key) else { return };
        e.wanted.store(false, Ordering::SeqCst);
        e.urgent.notify_one();
        let _done = e.writing.lock().await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    fn counter() -> (Arc<AtomicUsize>, impl Fn() -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>>) {
        let n = Arc::new(AtomicUsize::new(0));
        let m = n.clone();
        (n, move || {
            let m = m.clone();
            Box::pin(async move {
                m.fetch_add(1, Ordering::SeqCst);
            })
        })
    }

    /// Registers the expectation of `ns/p` and writes it through `write` on a task.
    fn spawn_run(
        x: &Expectations,
        f: &Foreground,
        write: impl Fn() -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> + Send + 'static,
    ) -> tokio::task::JoinHandle<bool> {
        let (pending, f) = (x.begin("ns/p"), f.clone());
        tokio::spawn(async move { pending.run(&f, write).await })
    }

    #[tokio::test(start_paused = true)]
    async fn written_at_once_when_the_server_has_room() {
        let (x, f) = (Expectations::default(), Foreground::default());
        let (n, write) = counter();
        assert!(x.begin("ns/p").run(&f, write).await);
        assert_eq!(n.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn dropped_when_the_binding_comes_first_under_load() {
        let x = Arc::new(Expectations::default());
        let f = Foreground::default();
        let busy = f.waiting();
        let (n, write) = counter();
        let task = spawn_run(&x, &f, write);
        tokio::time::sleep(Duration::from_secs(1)).await;
        x.finish("ns/p").await;
        drop(busy);
        assert!(!task.await.unwrap(), "superseded by the binding");
        assert_eq!(n.load(Ordering::SeqCst), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_binding_before_the_write_started_drops_it() {
        let x = Expectations::default();
        let pending = x.begin("ns/p");
        x.finish("ns/p").await;
        let (n, write) = counter();
        assert!(!pending.run(&Foreground::default(), write).await);
        assert_eq!(n.load(Ordering::SeqCst), 0);
        x.urgent("ns/p");
    }

    #[tokio::test(start_paused = true)]
    async fn written_under_load_once_the_cycle_waits_on_the_cluster() {
        let x = Arc::new(Expectations::default());
        let f = Foreground::default();
        let _busy = f.waiting();
        let (n, write) = counter();
        let task = spawn_run(&x, &f, write);
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(n.load(Ordering::SeqCst), 0, "yields while binding cycles wait");
        x.urgent("ns/p");
        assert!(task.await.unwrap());
        assert_eq!(n.load(Ordering::SeqCst), 1);
        x.finish("ns/p").await;
    }

    #[tokio::test(start_paused = true)]
    async fn the_binding_waits_for_a_write_in_flight() {
        let x = Arc::new(Expectations::default());
        let f = Foreground::default();
        let landed = Arc::new(AtomicBool::new(false));
        let task = {
            let (pending, f, landed) = (x.begin("ns/p"), f.clone(), landed.clone());
            tokio::spawn(async move {
                pending
                    .run(&f, || async move {
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        landed.store(true, Ordering::SeqCst);
                    })
                    .await
            })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        x.finish("ns/p").await;
        assert!(landed.load(Ordering::SeqCst), "finish returned before the write landed");
        assert!(task.await.unwrap());
    }
}
