//! Watches Services, ReplicationControllers, ReplicaSets and StatefulSets for their
//! selectors, which kube-scheduler's default topology spreading (PodTopologySpread with
//! `defaultingType: System`) uses to spread the pods they select.

use std::sync::Arc;

use algorithms::labels::{LabelSelector, Labels};
use algorithms::snapshot::WorkloadSelectors;
use futures::{StreamExt, stream};
use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{ReplicationController, Service};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use tracing::{info, warn};

use super::shared::Shared;
use super::state::Feed;
use crate::watch::relist::Mirror;
use crate::watch::watches::watch;

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

#[allow(clippy::large_enum_variant)] // one update at a time flows through; boxing buys nothing
enum Update {
    Service(Event<Service>),
    Rc(Event<ReplicationController>),
    Rs(Event<ReplicaSet>),
    Ss(Event<StatefulSet>),
}

/// `(namespace, name)` of a `namespace/name` key.
fn split(key: &str) -> (String, String) {
    let (ns, name) = key.split_once('/').unwrap_or(("", key));
    (ns.to_string(), name.to_string())
}

/// Runs the watches until the process stops, publishing the selectors to the cache.
pub async fn run(client: Client, shared: Arc<Shared>) {
    let cfg = watcher::Config::default();
    let services = watch("services", Api::<Service>::all(client.clone()), cfg.clone())
        .map(|w| w.into_event().map(Update::Service));
    let rcs = watch("replicationcontrollers", Api::<ReplicationController>::all(client.clone()), cfg.clone())
        .map(|w| w.into_event().map(Update::Rc));
    let rss = watch("replicasets", Api::<ReplicaSet>::all(client.clone()), cfg.clone())
        .map(|w| w.into_event().map(Update::Rs));
    let sss = watch("statefulsets", Api::<StatefulSet>::all(client), cfg).map(|w| w.into_event().map(Update::Ss));
    let mut all = stream::select_all([services.boxed(), rcs.boxed(), rss.boxed(), sss.boxed()]);
    let (mut svc, mut rc): (Mirror<Labels>, Mirror<Labels>) = Default::default();
    let (mut rs, mut ss): (Mirror<LabelSelector>, Mirror<LabelSelector>) = Default::default();
    while let Some(update) = all.next().await {
        let changed = match update {
            None => false,
            Some(Update::Service(ev)) => {
                svc.apply(ev, |s: &Service| s.spec.as_ref()?.selector.clone().map(|m| m.into_iter().collect()))
            }
            Some(Update::Rc(ev)) => rc.apply(ev, |r: &ReplicationController| {
                r.spec.as_ref()?.selector.clone().map(|m| m.into_iter().collect())
            }),
            Some(Update::Rs(ev)) => rs.apply(ev, |r: &ReplicaSet| {
                set_selector("ReplicaSet", &r.name_any(), r.spec.as_ref().map(|s| &s.selector))
            }),
            Some(Update::Ss(ev)) => ss.apply(ev, |r: &StatefulSet| {
                set_selector("StatefulSet", &r.name_any(), r.spec.as_ref().map(|s| &s.selector))
            }),
        };
        if !(changed && svc.listed() && rc.listed() && rs.listed() && ss.listed()) {
            continue;
        }
        let sets = |kind: &str, m: &Mirror<LabelSelector>| {
            m.values
                .iter()
                .map(|(k, sel)| {
                    let (ns, name) = split(k);
                    ((kind.to_string(), ns, name), sel.clone())
                })
                .collect::<Vec<_>>()
        };
        let selectors = WorkloadSelectors {
            services: svc.values.iter().map(|(k, v)| (split(k), v.clone())).collect(),
            replication_controllers: rc.values.iter().map(|(k, v)| (split(k), v.clone())).collect(),
            sets: sets("ReplicaSet", &rs).into_iter().chain(sets("StatefulSet", &ss)).collect(),
        };
        let mut st = shared.lock();
        st.engine.cache.set_workloads(selectors);
        if !st.has_listed(Feed::Workloads) {
            info!(
                services = svc.values.len(),
                replication_controllers = rc.values.len(),
                replica_sets = rs.values.len(),
                stateful_sets = ss.values.len(),
                "workload selectors synced"
            );
        }
        st.listed(Feed::Workloads);
        drop(st);
        shared.wake();
    }
}
