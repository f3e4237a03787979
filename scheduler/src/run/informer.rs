//! Watches nodes, pods and namespaces and applies every event to the cache and queue.
//! This task is the cache's single writer for watch events.

use std::sync::Arc;
use std::time::Instant;

use algorithms::NodeInfo;
use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use tracing::{info, warn};

use super::shared::Shared;
use super::state::{Feed, State, pod_key};
use crate::watch::relist::{Change, Relist, key_of};
use crate::watch::watches::{Watched, watch};

#[allow(clippy::large_enum_variant)] // one update at a time flows through; boxing buys nothing
enum Update {
    Node(Event<Node>),
    Pod(Event<Pod>),
    Namespace(Event<Namespace>),
}

/// Runs the watches until the process stops.
pub async fn run(client: Client, shared: Arc<Shared>) {
    let cfg = watcher::Config::default();
    let nodes = watch("nodes", Api::<Node>::all(client.clone()), cfg.clone()).map(|w| w.into_event().map(Update::Node));
    let pods = watch(
        "pods",
        Api::<Pod>::all(client.clone()),
        cfg.clone().fields("status.phase!=Succeeded,status.phase!=Failed"),
    )
    .map(|w: Watched<Pod>| w.into_event().map(Update::Pod));
    let namespaces =
        watch("namespaces", Api::<Namespace>::all(client), cfg).map(|w| w.into_event().map(Update::Namespace));
    let mut all = stream::select_all([nodes.boxed(), pods.boxed(), namespaces.boxed()]);
    let (mut known_nodes, mut known_pods, mut known_ns) = (Relist::default(), Relist::default(), Relist::default());
    while let Some(update) = all.next().await {
        let Some(update) = update else { continue };
        let mut guard = shared.lock();
        let now = Instant::now();
        match update {
            Update::Node(ev) => {
                for change in known_nodes.apply(ev, key_of) {
                    if let Some(x) = shared.extenders.get() {
                        match &change {
                            Change::Apply(_, n) => x.objects.put_node(n),
                            Change::Delete(name) => x.objects.remove_node(name),
                            Change::Listed { .. } => {}
                        }
                    }
                    apply_node(&mut guard, change, known_nodes.len(), now);
                }
            }
            Update::Pod(ev) => {
                for change in known_pods.apply(ev, pod_key) {
                    if let Some(x) = shared.extenders.get() {
                        let ours = |p: &Pod| {
                            let name = p
                                .spec
                                .as_ref()
                                .and_then(|s| s.scheduler_name.as_deref())
                                .unwrap_or("default-scheduler");
                            guard.engine.profiles.iter().any(|prof| prof.scheduler_name == name)
                        };
                        match &change {
                            // Only this scheduler's pods are ever sent to an extender.
                            Change::Apply(key, p) if ours(p) => x.objects.put_pod(key, p),
                            Change::Apply(key, _) => x.objects.remove_pod(key),
                            Change::Delete(key) => x.objects.remove_pod(key),
                            Change::Listed { .. } => {}
                        }
                    }
                    let ended = |p: &Pod| {
                        let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
                        p.metadata.deletion_timestamp.is_some() || matches!(phase, Some("Succeeded" | "Failed"))
                    };
                    if matches!(&change, Change::Delete(_)) || matches!(&change, Change::Apply(_, p) if ended(p)) {
                        shared.room_freed.notify_one();
                    }
                    match change {
                        Change::Apply(_, p) => guard.apply_pod(&p, now),
                        Change::Delete(key) => guard.delete_pod(&key, now),
                        Change::Listed { first } => listed(&mut guard, Feed::Pods, first, known_pods.len()),
                    }
                }
            }
            Update::Namespace(ev) => {
                for change in known_ns.apply(ev, key_of) {
                    match change {
                        Change::Apply(name, ns) => {
                            guard.engine.cache.upsert_namespace(&name, ns.metadata.labels.clone().unwrap_or_default())
                        }
                        Change::Delete(name) => guard.engine.cache.remove_namespace(&name),
                        Change::Listed { first } => listed(&mut guard, Feed::Namespaces, first, known_ns.len()),
                    }
                }
            }
        }
        drop(guard);
        shared.wake();
    }
}

fn apply_node(st: &mut State, change: Change<Node>, count: usize, now: Instant) {
    match change {
        Change::Apply(_, n) => match NodeInfo::from_node(&n) {
            Ok(info) => {
                if let Some(event) = st.engine.cache.upsert_node(info).event() {
                    st.engine.on_event(event, now);
                }
            }
            Err(e) => warn!(error = %e, "ignoring a node the scheduler cannot read"),
        },
        Change::Delete(name) => st.delete_node(&name, now),
        Change::Listed { first } => listed(st, Feed::Nodes, first, count),
    }
}

/// Records a feed's complete list; logs its first with the count and the time since start.
pub fn listed(st: &mut State, feed: Feed, first: bool, count: usize) {
    if first {
        info!(kind = feed.name(), count, ms = st.started.elapsed().as_millis() as u64, "listed");
    }
    st.listed(feed);
}
