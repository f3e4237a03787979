//! Watches Services, ReplicationControllers, ReplicaSets and StatefulSets for their
//! selectors, which kube-scheduler's default topology spreading (PodTopologySpread with
//! `defaultingType: System`) uses to spread the pods they select.

use std::collections::HashMap;
use std::sync::Arc;

use algorithms::labels::{LabelSelector, Labels};
use algorithms::snapshot::WorkloadSelectors;
use futures::{StreamExt, stream};
use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{ReplicationController, Service};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use tracing::{info, warn};

use super::Shared;
use super::watches::{Watched, watch};

pub(super) type Key = (String, String);

/// One kind's selectors by (namespace, name), and the ones seen in a relist under way.
pub(super) struct Kind<V> {
    pub(super) current: HashMap<Key, V>,
    relisting: Option<HashMap<Key, V>>,
    pub(super) synced: bool,
}

impl<V: PartialEq + Clone> Kind<V> {
    pub(super) fn new() -> Self {
        Kind { current: HashMap::new(), relisting: None, synced: false }
    }

    /// Applies an event whose object yielded `value`; returns whether the selectors changed.
    pub(super) fn apply(&mut self, ev: Event<(Key, Option<V>)>) -> bool {
        match ev {
            Event::Init => {
                self.relisting = Some(HashMap::new());
                false
            }
            Event::InitApply((key, value)) => {
                if let (Some(r), Some(v)) = (self.relisting.as_mut(), value) {
                    r.insert(key, v);
                }
                false
            }
            Event::InitDone => {
                self.synced = true;
                match self.relisting.take() {
                    Some(fresh) if fresh != self.current => {
                        self.current = fresh;
                        true
                    }
                    _ => false,
                }
            }
            Event::Apply((key, Some(v))) => self.current.insert(key, v.clone()).is_none_or(|old| old != v),
            Event::Apply((key, None)) | Event::Delete((key, _)) => self.current.remove(&key).is_some(),
        }
    }
}

fn key<K: ResourceExt>(o: &K) -> Key {
    (o.namespace().unwrap_or_default(), o.name_any())
}

pub(super) fn map_event<K, V>(ev: Event<K>, value: impl Fn(&K) -> Option<V>) -> Event<(Key, Option<V>)>
where
    K: ResourceExt,
{
    let pair = |o: K| {
        let v = value(&o);
        (key(&o), v)
    };
    match ev {
        Event::Init => Event::Init,
        Event::InitApply(o) => Event::InitApply(pair(o)),
        Event::InitDone => Event::InitDone,
        Event::Apply(o) => Event::Apply(pair(o)),
        Event::Delete(o) => Event::Delete(pair(o)),
    }
}

fn set_selector(
    kind: &str,
    name: &str,
    sel: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
) -> Option<LabelSelector> {
    let sel = sel?;
    match LabelSelector::parse(sel) {
        Ok(parsed) => Some(parsed),
        Err(e) => {
            warn!(kind, name, error = %e, "ignoring a selector the scheduler cannot read");
            None
        }
    }
}

enum Update {
    Service(Event<(Key, Option<Labels>)>),
    Rc(Event<(Key, Option<Labels>)>),
    Rs(Event<(Key, Option<LabelSelector>)>),
    Ss(Event<(Key, Option<LabelSelector>)>),
    Other(Watched<()>),
}

fn lift<K, F>(w: Watched<K>, wrap: F) -> Update
where
    F: FnOnce(Event<K>) -> Update,
{
    match w {
        Watched::Event(ev) => wrap(ev),
        Watched::Expired(k) => Update::Other(Watched::Expired(k)),
        Watched::Failed(k, e) => Update::Other(Watched::Failed(k, e)),
    }
}

/// Runs the watches until the process stops, publishing the selectors to the cache.
pub async fn run(client: Client, shared: Arc<Shared>) {
    let cfg = watcher::Config::default();
    let services = watch("services", Api::<Service>::all(client.clone()), cfg.clone()).map(|w| {
        lift(w, |ev| {
            Update::Service(map_event(ev, |s: &Service| {
                s.spec.as_ref()?.selector.clone().map(|m| m.into_iter().collect())
            }))
        })
    });
    let rcs =
        watch("replicationcontrollers", Api::<ReplicationController>::all(client.clone()), cfg.clone()).map(|w| {
            lift(w, |ev| {
                Update::Rc(map_event(ev, |r: &ReplicationController| {
                    r.spec.as_ref()?.selector.clone().map(|m| m.into_iter().collect())
                }))
            })
        });
    let rss = watch("replicasets", Api::<ReplicaSet>::all(client.clone()), cfg.clone()).map(|w| {
        lift(w, |ev| {
            Update::Rs(map_event(ev, |r: &ReplicaSet| {
                set_selector("ReplicaSet", &r.name_any(), r.spec.as_ref().map(|s| &s.selector))
            }))
        })
    });
    let sss = watch("statefulsets", Api::<StatefulSet>::all(client), cfg).map(|w| {
        lift(w, |ev| {
            Update::Ss(map_event(ev, |r: &StatefulSet| {
                set_selector("StatefulSet", &r.name_any(), r.spec.as_ref().map(|s| &s.selector))
            }))
        })
    });
    let mut all = stream::select_all([services.boxed(), rcs.boxed(), rss.boxed(), sss.boxed()]);
    let (mut svc, mut rc, mut rs, mut ss) = (Kind::new(), Kind::new(), Kind::new(), Kind::new());
    let mut was_synced = false;
    while let Some(update) = all.next().await {
        let changed = match update {
            Update::Service(ev) => svc.apply(ev),
            Update::Rc(ev) => rc.apply(ev),
            Update::Rs(ev) => rs.apply(ev),
            Update::Ss(ev) => ss.apply(ev),
            Update::Other(w) => {
                // Only expiries and failures come this way: logged.
                let _ = w.into_event();
                false
            }
        };
        let synced = svc.synced && rc.synced && rs.synced && ss.synced;
        if synced && (changed || !was_synced) {
            let selectors =
                WorkloadSelectors {
                    services: svc.current.clone(),
                    replication_controllers: rc.current.clone(),
                    sets: rs
                        .current
                        .iter()
                        .map(|((ns, name), sel)| (("ReplicaSet".to_string(), ns.clone(), name.clone()), sel.clone()))
                        .chain(ss.current.iter().map(|((ns, name), sel)| {
                            (("StatefulSet".to_string(), ns.clone(), name.clone()), sel.clone())
                        }))
                        .collect(),
                };
            let mut st = shared.lock();
            st.engine.cache.set_workloads(selectors);
            if !was_synced {
                st.synced_workloads = true;
                st.announce_sync();
                info!(
                    services = svc.current.len(),
                    replication_controllers = rc.current.len(),
                    replica_sets = rs.current.len(),
                    stateful_sets = ss.current.len(),
                    "workload selectors synced"
                );
            }
            was_synced = true;
            drop(st);
            shared.wake();
        }
    }
}
