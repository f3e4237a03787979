//! Watches the cluster objects plugins own (the storage objects, the DRA objects, each
//! owner's kinds as [`crate::owners::API_OWNERS`] lists them) into the cache, with the
//! events that requeue the pods they may help.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use algorithms::events::{ClusterEvent, ObjectAction, ObjectEvent};
use algorithms::plugins::registry::OWNERS;
use futures::{StreamExt, stream};
use kube::Client;
use tracing::info;

use super::shared::Shared;
use super::state::Feed;
use crate::owners::{API_OWNERS, Op};
use crate::watch::relist::{Change, Relist};

/// Runs the watches until the process stops.
pub async fn run(client: Client, shared: Arc<Shared>) {
    let watches: Vec<_> = API_OWNERS.iter().flat_map(|o| o.watches(&client)).collect();
    let kinds = watches.len();
    let mut all = stream::select_all(watches);
    // Per kind (by name): its relist bookkeeping; kinds whose watch is failing.
    let mut relists: HashMap<&'static str, Relist> = HashMap::new();
    let mut failing: HashSet<&'static str> = HashSet::new();
    while let Some(op) = all.next().await {
        let mut guard = shared.lock();
        let now = Instant::now();
        let mut events: Vec<ObjectEvent> = Vec::new();
        match op {
            Op::Event(kind, remove, ev) => {
                let st = guard.engine.cache.objects_mut();
                for change in relists.entry(kind.name).or_default().apply(ev, |(k, _)| k.clone()) {
                    match change {
                        Change::Apply(key, (_, Some(store))) => {
                            failing.remove(kind.name);
                            let action = if store(st) { ObjectAction::Update } else { ObjectAction::Add };
                            events.push(ObjectEvent::new(kind, action, key));
                        }
                        Change::Apply(_, (_, None)) | Change::Listed { .. } => {}
                        Change::Delete(key) => {
                            if remove(st, &key) {
                                events.push(ObjectEvent::new(kind, ObjectAction::Delete, key));
                            }
                        }
                    }
                }
            }
            Op::Failed(kind, _) => {
                relists.entry(kind.name).or_default();
                // The watch logs the failure; pods that need the kind wait for it.
                failing.insert(kind.name);
            }
        }
        for e in events {
            guard.engine.on_event(ClusterEvent::Object(e), now);
        }
        let listed = relists.len() == kinds && relists.iter().all(|(k, r)| r.listed() || failing.contains(k));
        if listed && !guard.has_listed(Feed::Objects) {
            let objects = guard.engine.cache.objects();
            let mut unlisted: Vec<&str> = failing.iter().copied().collect();
            unlisted.sort_unstable();
            for owner in OWNERS {
                let counts: Vec<String> = owner.counts(objects).iter().map(|(k, n)| format!("{k}={n}")).collect();
                if unlisted.is_empty() {
                    info!(owner = owner.name(), counts = %counts.join(" "), "cluster objects listed");
                } else {
                    info!(owner = owner.name(), counts = %counts.join(" "), failing = %unlisted.join(","),
                        "cluster objects listed, but for the failing kinds (pods that need them wait)");
                }
            }
            guard.listed(Feed::Objects);
        }
        drop(guard);
        shared.wake();
    }
}
