//! Writes about one object in the order they were decided: the reports of a pod's (or a
//! PodGroup's) attempts run concurrently, so without this an older attempt's write could
//! land after a newer one's and leave a stale message behind.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Each write takes a ticket when it is decided; it runs under its object's lock, and
/// only while no newer ticket exists for the object.
#[derive(Clone, Default)]
pub struct Serial {
    /// By object key: its newest ticket and its lock.
    objects: Arc<Mutex<HashMap<String, (u64, Arc<tokio::sync::Mutex<()>>)>>>,
    next: Arc<AtomicU64>,
}

impl Serial {
    /// A ticket for a write about `key`, newer than every ticket before it.
    pub fn ticket(&self, key: &str) -> u64 {
        let n = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let mut objects = self.objects.lock().unwrap_or_else(|e| e.into_inner());
        objects.entry(key.to_string()).and_modify(|e| e.0 = n).or_insert_with(|| (n, Arc::default()));
        n
    }

    /// Whether `ticket` is still the newest for `key`.
    pub fn is_latest(&self, key: &str, ticket: u64) -> bool {
        let objects = self.objects.lock().unwrap_or_else(|e| e.into_inner());
        objects.get(key).is_none_or(|e| e.0 == ticket)
    }

    /// Runs `write` under `key`'s lock, unless a newer ticket came meanwhile (`None`
    /// then); once the newest ticket's write ran, the key is forgotten.
    pub async fn run<F: Future>(&self, key: &str, ticket: u64, write: impl FnOnce() -> F) -> Option<F::Output> {
        let lock = {
            let objects = self.objects.lock().unwrap_or_else(|e| e.into_inner());
            objects.get(key).map(|e| e.1.clone())?
        };
        let _held = lock.lock().await;
        if !self.is_latest(key, ticket) {
            return None;
        }
        let out = write().await;
        let mut objects = self.objects.lock().unwrap_or_else(|e| e.into_inner());
        if objects.get(key).is_some_and(|e| e.0 == ticket) {
            objects.remove(key);
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::Serial;

    #[tokio::test]
    async fn only_the_newest_write_runs_once_overtaken() {
        let s = Serial::default();
        let old = s.ticket("p");
        let new = s.ticket("p");
        assert!(!s.is_latest("p", old) && s.is_latest("p", new));
        assert_eq!(s.run("p", old, || async { 1 }).await, None, "the older write is dropped");
        assert_eq!(s.run("p", new, || async { 2 }).await, Some(2));
        // Forgotten once written: a later ticket starts anew.
        let later = s.ticket("p");
        assert_eq!(s.run("p", later, || async { 3 }).await, Some(3));
        // Other keys are independent.
        let a = s.ticket("a");
        let _b = s.ticket("b");
        assert_eq!(s.run("a", a, || async { 4 }).await, Some(4));
    }
}
