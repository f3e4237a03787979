//! When each pod of a namespace was first seen bound, from a watch started before the
//! scheduler under test.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::HarnessError;

type Times = Arc<Mutex<HashMap<String, Instant>>>;

/// A running watch of a namespace's pods.
pub struct BindWatch {
    times: Times,
    task: JoinHandle<()>,
}

fn lock(times: &Times) -> MutexGuard<'_, HashMap<String, Instant>> {
    times.lock().unwrap_or_else(|e| e.into_inner())
}

impl BindWatch {
    /// Starts watching `namespace` and returns once the initial list is in.
    pub async fn start(client: &Client, namespace: &str) -> Result<BindWatch, HarnessError> {
        let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let times: Times = Arc::default();
        let (synced_tx, synced_rx) = oneshot::channel();
        let t = times.clone();
        let task = tokio::spawn(async move {
            let mut synced = Some(synced_tx);
            let mut events = std::pin::pin!(watcher::watcher(api, watcher::Config::default()));
            while let Some(ev) = events.next().await {
                match ev {
                    Ok(Event::Apply(p) | Event::InitApply(p))
                        if p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some() =>
                    {
                        let name = p.metadata.name.unwrap_or_default();
                        lock(&t).entry(name).or_insert_with(Instant::now);
                    }
                    Ok(Event::InitDone) => {
                        if let Some(tx) = synced.take() {
                            let _ = tx.send(());
                        }
                    }
                    _ => {}
                }
            }
        });
        synced_rx.await.map_err(|_| HarnessError::Client("the pod watch ended before its first list".into()))?;
        Ok(BindWatch { times, task })
    }

    /// How many pods have been seen bound.
    pub fn count(&self) -> usize {
        lock(&self.times).len()
    }

    /// When each pod was first seen bound, by name.
    pub fn times(&self) -> HashMap<String, Instant> {
        lock(&self.times).clone()
    }

    /// The first and the last time a pod was seen bound.
    pub fn first_and_last(&self) -> Option<(Instant, Instant)> {
        let t = lock(&self.times);
        Some((*t.values().min()?, *t.values().max()?))
    }
}

impl Drop for BindWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}
