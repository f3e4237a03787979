//! Watches nodes, pods and namespaces and applies every event to the cache and queue.
//! This task is the cache's single writer for watch events.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use algorithms::events::ClusterEvent;
use algorithms::{NodeInfo, PodInfo};
use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use tracing::{debug, info, warn};

use super::Shared;
use super::watches::{Watched, watch};
use crate::cluster::is_terminal;

impl<K> Watched<K> {
    fn into_update(self, wrap: fn(Event<K>) -> Update) -> Update {
        match self {
            Watched::Event(ev) => wrap(ev),
            Watched::Expired(kind) => Update::Expired(kind),
            Watched::Failed(kind, e) => Update::Failed(kind, e),
        }
    }
}

#[allow(clippy::large_enum_variant)] // one update at a time flows through; boxing buys nothing
enum Update {
    Node(Event<Node>),
    Pod(Event<Pod>),
    Namespace(Event<Namespace>),
    Expired(&'static str),
    Failed(&'static str, String),
}

/// Keys seen in the current list of each kind, to find deletions missed across a relist.
#[derive(Default)]
struct Known {
    current: HashSet<String>,
    relisting: Option<HashSet<String>>,
}

impl Known {
    fn begin(&mut self) {
        self.relisting = Some(HashSet::new());
    }
    fn saw(&mut self, key: &str) {
        self.current.insert(key.to_string());
        if let Some(r) = self.relisting.as_mut() {
            r.insert(key.to_string());
        }
    }
    fn forget(&mut self, key: &str) {
        self.current.remove(key);
    }
    /// Ends a relist; returns keys that disappeared while the watch was down.
    fn done(&mut self) -> Vec<String> {
        let Some(seen) = self.relisting.take() else { return Vec::new() };
        let gone: Vec<String> = self.current.difference(&seen).cloned().collect();
        self.current = seen;
        gone
    }
}

fn pod_key(p: &Pod) -> String {
    format!("{}/{}", p.metadata.namespace.as_deref().unwrap_or("default"), p.metadata.name.as_deref().unwrap_or(""))
}

/// Runs the watches until the process stops.
pub async fn run(client: Client, shared: Arc<Shared>) {
    let cfg = watcher::Config::default();
    let nodes = watch("nodes", Api::<Node>::all(client.clone()), cfg.clone()).map(|w| w.into_update(Update::Node));
    let pods = watch(
        "pods",
        Api::<Pod>::all(client.clone()),
        cfg.clone().fields("status.phase!=Succeeded,status.phase!=Failed"),
    )
    .map(|w| w.into_update(Update::Pod));
    let namespaces = watch("namespaces", Api::<Namespace>::all(client), cfg).map(|w| w.into_update(Update::Namespace));
    let mut all = stream::select_all([nodes.boxed(), pods.boxed(), namespaces.boxed()]);
    let mut known_nodes = Known::default();
    let mut known_pods = Known::default();
    let mut known_ns = Known::default();
    while let Some(update) = all.next().await {
        let mut guard = shared.lock();
        let now = Instant::now();
        match update {
            Update::Failed(kind, e) => warn!(kind, error = %e, "watch failed; retrying with backoff"),
            Update::Expired(kind) => info!(kind, "watch expired (410 Gone); relisting"),
            Update::Node(ev) => match ev {
                Event::Init => known_nodes.begin(),
                Event::InitApply(n) | Event::Apply(n) => {
                    known_nodes.saw(n.metadata.name.as_deref().unwrap_or(""));
                    match NodeInfo::from_node(&n) {
                        Ok(info) => {
                            if let Some(event) = guard.engine.cache.upsert_node(info).event() {
                                guard.engine.on_event(event, now);
                            }
                        }
                        Err(e) => warn!(error = %e, "ignoring a node the scheduler cannot read"),
                    }
                }
                Event::Delete(n) => {
                    let name = n.metadata.name.unwrap_or_default();
                    known_nodes.forget(&name);
                    guard.delete_node(&name, now);
                }
                Event::InitDone => {
                    for gone in known_nodes.done() {
                        guard.delete_node(&gone, now);
                    }
                    if !guard.synced_nodes {
                        log_listed("nodes", known_nodes.current.len(), guard.started);
                    }
                    guard.synced_nodes = true;
                    guard.announce_sync();
                }
            },
            Update::Pod(ev) => match ev {
                Event::Init => known_pods.begin(),
                Event::InitApply(p) | Event::Apply(p) => {
                    known_pods.saw(&pod_key(&p));
                    guard.apply_pod(&p, now);
                }
                Event::Delete(p) => {
                    let key = pod_key(&p);
                    known_pods.forget(&key);
                    guard.delete_pod(&key, now);
                }
                Event::InitDone => {
                    for gone in known_pods.done() {
                        guard.delete_pod(&gone, now);
                    }
                    if !guard.synced_pods {
                        log_listed("pods", known_pods.current.len(), guard.started);
                    }
                    guard.synced_pods = true;
                    guard.announce_sync();
                }
            },
            Update::Namespace(ev) => match ev {
                Event::Init => known_ns.begin(),
                Event::InitApply(ns) | Event::Apply(ns) => {
                    let name = ns.metadata.name.clone().unwrap_or_default();
                    known_ns.saw(&name);
                    guard.engine.cache.upsert_namespace(&name, ns.metadata.labels.clone().unwrap_or_default());
                }
                Event::Delete(ns) => {
                    let name = ns.metadata.name.unwrap_or_default();
                    known_ns.forget(&name);
                    guard.engine.cache.remove_namespace(&name);
                }
                Event::InitDone => {
                    for gone in known_ns.done() {
                        guard.engine.cache.remove_namespace(&gone);
                    }
                    if !guard.synced_namespaces {
                        log_listed("namespaces", known_ns.current.len(), guard.started);
                    }
                    guard.synced_namespaces = true;
                    guard.announce_sync();
                }
            },
        }
        drop(guard);
        shared.wake();
    }
}

/// Logs the first complete list of a kind, with its count and the time since start.
fn log_listed(kind: &str, count: usize, started: Instant) {
    info!(kind, count, ms = started.elapsed().as_millis() as u64, "listed");
}

impl super::State {
    /// Applies a pod add or update from the watch.
    pub fn apply_pod(&mut self, pod: &Pod, now: Instant) {
        let key = pod_key(pod);
        // A scheduler-plugins gang member changed: its group's counts may have.
        if let Some(group) = pod.metadata.labels.as_ref().and_then(|l| l.get(crate::gang::POD_GROUP_LABEL)) {
            let group = format!("{}/{group}", pod.metadata.namespace.as_deref().unwrap_or("default"));
            if self.engine.groups.spec(crate::gang::Api::SchedulerPlugins, &group).is_some() {
                self.dirty_groups.insert(group);
            }
        }
        if is_terminal(pod) {
            self.delete_pod(&key, now);
            return;
        }
        let info = match PodInfo::from_pod(pod) {
            Ok(i) => i,
            Err(e) => {
                warn!(pod = %key, error = %e, "ignoring a pod the scheduler cannot read");
                self.engine.queue.delete(&key);
                return;
            }
        };
        if info.node_name.is_some() {
            self.engine.queue.delete(&key);
            self.engine.cache.nominator.remove(&key);
            let was_assumed = self.engine.cache.is_assumed(&key);
            let info = Arc::new(info);
            let previous = match self.engine.cache.add_pod(info.clone()) {
                Ok(previous) => previous,
                Err(e) => {
                    warn!(pod = %key, error = %e, "could not add a bound pod to the cache");
                    return;
                }
            };
            match previous {
                // The binding of a pod this scheduler assumed there: its event fired then.
                Some(old) if was_assumed && old.node_name == info.node_name => {}
                Some(old) if old.node_name == info.node_name => {
                    if old.labels != info.labels {
                        self.engine.on_event(ClusterEvent::PodUpdated { old, new: info }, now);
                    }
                }
                Some(old) => {
                    self.engine.on_event(ClusterEvent::PodDeleted(old), now);
                    self.engine.on_event(ClusterEvent::PodAdded(info), now);
                }
                None => {
                    self.engine.on_event(ClusterEvent::PodAdded(info), now);
                }
            }
            return;
        }
        if !self.engine.handles(&info) {
            return;
        }
        if !info.scheduling_gates.is_empty() {
            debug!(pod = %key, "pod has scheduling gates; waiting");
            self.engine.queue.delete(&key);
            return;
        }
        if self.engine.cache.node_of(&key).is_some() {
            // Assumed and binding: the watch will show it bound.
            return;
        }
        let info = Arc::new(info);
        if let Some(node) = &info.nominated_node {
            // A nomination made before a restart, or by another replica.
            self.engine.cache.nominator.nominate(info.clone(), node);
        }
        self.engine.enqueue(info, now);
    }

    /// Applies a pod deletion.
    pub fn delete_pod(&mut self, key: &str, now: Instant) {
        self.engine.queue.delete(key);
        self.engine.cache.nominator.remove(key);
        if let Some(gone) = self.engine.cache.remove_pod(key) {
            self.engine.on_event(ClusterEvent::PodDeleted(gone), now);
        }
    }

    /// Applies a node deletion.
    pub fn delete_node(&mut self, name: &str, now: Instant) {
        // Pods assumed there and not bound yet (their binding or PreBind still running)
        // are scheduled again; a binding that still lands is seen by the pod watch.
        let assumed = self.engine.cache.assumed_on(name);
        if let Some(gone) = self.engine.cache.remove_node(name) {
            self.engine.on_event(ClusterEvent::NodeDeleted(gone), now);
        }
        for pod in assumed {
            self.engine.cache.remove_pod(&pod.key());
            let mut pending = (*pod).clone();
            pending.node_name = None;
            self.engine.enqueue(Arc::new(pending), now);
        }
    }
}
