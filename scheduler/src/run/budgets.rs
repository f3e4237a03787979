//! Watches PodDisruptionBudgets (policy/v1), which preemption spares when it can.

use std::sync::Arc;

use algorithms::preemption::Budget;
use futures::StreamExt;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::runtime::watcher;
use kube::{Api, Client};
use tracing::info;

use super::Shared;
use super::watches::watch;
use super::workloads::{Kind, map_event};

/// Runs the watch until the process stops, publishing the budgets to the cache.
pub async fn run(client: Client, shared: Arc<Shared>) {
    let api = Api::<PodDisruptionBudget>::all(client);
    let mut events = watch("poddisruptionbudgets", api, watcher::Config::default()).boxed();
    let mut kind: Kind<Budget> = Kind::new();
    let mut was_synced = false;
    while let Some(w) = events.next().await {
        let changed = w.into_event().is_some_and(|ev| kind.apply(map_event(ev, |p| Some(Budget::from_api(p)))));
        if kind.synced && (changed || !was_synced) {
            let mut keyed: Vec<_> = kind.current.iter().collect();
            keyed.sort_by(|a, b| a.0.cmp(b.0));
            let budgets: Vec<Budget> = keyed.into_iter().map(|(_, b)| b.clone()).collect();
            if !was_synced {
                info!(count = budgets.len(), "pod disruption budgets synced");
            }
            let mut st = shared.lock();
            st.engine.cache.set_budgets(budgets);
            if !was_synced {
                st.synced_budgets = true;
                st.announce_sync();
            }
            drop(st);
            was_synced = true;
            shared.wake();
        }
    }
}
