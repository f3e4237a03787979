//! The state behind `run`'s one mutex: the engine (cache, queue, profiles), which watched
//! feeds have listed once (scheduling waits for all of them), and how watch events about
//! pods and nodes change the engine.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Instant;

use algorithms::PodInfo;
use algorithms::events::ClusterEvent;
use k8s_openapi::api::core::v1::Pod;
use tracing::{debug, info, warn};

use crate::cluster::is_terminal;
use crate::engine::Engine;

/// A watched feed that must have listed once before scheduling starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Feed {
    /// Nodes.
    Nodes,
    /// Pods.
    Pods,
    /// Namespaces (for namespace selectors).
    Namespaces,
    /// Services, ReplicationControllers, ReplicaSets and StatefulSets (default spreading).
    Workloads,
    /// PodDisruptionBudgets (preemption must see them).
    Budgets,
    /// PodGroups (or their kind found not served).
    PodGroups,
    /// The cluster objects plugins own: claims, volumes, CSI and DRA objects (or their
    /// watches found failing).
    Objects,
}

impl Feed {
    /// Its name in logs.
    pub fn name(self) -> &'static str {
        match self {
            Feed::Nodes => "nodes",
            Feed::Pods => "pods",
            Feed::Namespaces => "namespaces",
            Feed::Workloads => "workloads",
            Feed::Budgets => "poddisruptionbudgets",
            Feed::PodGroups => "podgroups",
            Feed::Objects => "objects",
        }
    }

    /// Every feed.
    pub const ALL: [Feed; 7] =
        [Feed::Nodes, Feed::Pods, Feed::Namespaces, Feed::Workloads, Feed::Budgets, Feed::PodGroups, Feed::Objects];
}

/// Cache, queue and sync state, behind one mutex.
pub struct State {
    /// The scheduling engine.
    pub engine: Engine,
    /// scheduler-plugins PodGroups whose status is to be written again.
    pub dirty_groups: HashSet<String>,
    /// Feeds listed at least once.
    listed: BTreeSet<Feed>,
    /// Feeds scheduling waits for.
    waits_for: BTreeSet<Feed>,
    /// When the process started (for start-up timings in the logs).
    pub started: Instant,
    announced: bool,
}

impl State {
    /// The state around an engine, waiting for every feed.
    pub fn new(engine: Engine) -> Self {
        State {
            engine,
            dirty_groups: HashSet::new(),
            listed: BTreeSet::new(),
            waits_for: Feed::ALL.into_iter().collect(),
            started: Instant::now(),
            announced: false,
        }
    }

    /// Scheduling does not wait for `feed` (a mode that does not watch it).
    pub fn not_waiting_for(&mut self, feed: Feed) {
        self.waits_for.remove(&feed);
    }

    /// Records that `feed` listed once; returns whether it is the first time (then the
    /// sync is announced if it was the last one missing).
    pub fn listed(&mut self, feed: Feed) -> bool {
        let first = self.listed.insert(feed);
        if first {
            self.announce_sync();
        }
        first
    }

    /// Whether `feed` has listed once.
    pub fn has_listed(&self, feed: Feed) -> bool {
        self.listed.contains(&feed)
    }

    /// Whether every feed scheduling waits for has listed once.
    pub fn all_synced(&self) -> bool {
        self.waits_for.is_subset(&self.listed)
    }

    /// Logs, once, that every cache has synced, with counts and the time since start.
    pub fn announce_sync(&mut self) {
        if self.announced || !self.all_synced() {
            return;
        }
        self.announced = true;
        info!(
            nodes = self.engine.cache.node_count(),
            pods = self.engine.cache.pod_count(),
            pending = self.engine.queue.len(),
            ms = self.started.elapsed().as_millis() as u64,
            "caches synced"
        );
    }
}

/// `namespace/name` of a pod.
pub fn pod_key(p: &Pod) -> String {
    format!("{}/{}", p.metadata.namespace.as_deref().unwrap_or("default"), p.metadata.name.as_deref().unwrap_or(""))
}

impl State {
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
                    // Labels (affinity, spreading) or what the pod counts for (an in-place
                    // resize) changed.
                    if old.labels != info.labels || old.requests != info.requests {
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
        self.engine.remove_pod(key, now);
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
