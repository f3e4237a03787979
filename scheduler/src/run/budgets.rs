//! Watches PodDisruptionBudgets (policy/v1), which preemption spares when it can.

use std::sync::Arc;

use algorithms::budgets::Budget;
use futures::StreamExt;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::runtime::watcher;
use kube::{Api, Client};
use tracing::info;

use super::shared::Shared;
use super::state::Feed;
use crate::watch::relist::Mirror;
use crate::watch::watches::watch;

/// Runs the watch until the process stops, publishing the budgets to the cache.
pub async fn run(client: Client, shared: Arc<Shared>) {
    let api = Api::<PodDisruptionBudget>::all(client);
    let mut events = watch("poddisruptionbudgets", api, watcher::Config::default()).boxed();
    let mut budgets: Mirror<Budget> = Mirror::default();
    while let Some(w) = events.next().await {
        let changed = w.into_event().is_some_and(|ev| budgets.apply(ev, |p| Some(Budget::from_api(p))));
        if budgets.listed() && changed {
            let mut keyed: Vec<_> = budgets.values.iter().collect();
            keyed.sort_by(|a, b| a.0.cmp(b.0));
            let list: Vec<Budget> = keyed.into_iter().map(|(_, b)| b.clone()).collect();
            let mut st = shared.lock();
            if !st.has_listed(Feed::Budgets) {
                info!(count = list.len(), "pod disruption budgets synced");
            }
            st.engine.cache.set_budgets(list);
            st.listed(Feed::Budgets);
            drop(st);
            shared.wake();
        }
    }
}
