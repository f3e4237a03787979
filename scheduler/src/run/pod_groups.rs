//! Watches PodGroups for gang scheduling: scheduler-plugins' `scheduling.x-k8s.io/v1alpha1`
//! (whose status it writes) and Kubernetes' alpha `scheduling.k8s.io/v1alpha2`. A kind
//! that is not served (no CRD, or the alpha API off) is looked for again every 30 s; the
//! scheduler runs without it meanwhile.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiResource, pinned_kind};
use kube::runtime::watcher;
use kube::{Api, Client};
use tracing::{info, warn};

use super::Shared;
use super::watches::{Watched, watch};
use super::workloads::{Kind, map_event};
use crate::gang::{self, Api as GroupApi, PodGroupSpec};

/// How often a missing CRD is looked for again.
const CRD_POLL: Duration = Duration::from_secs(30);

/// The scheduler-plugins PodGroup kind.
pub fn gvk() -> GroupVersionKind {
    GroupVersionKind::gvk("scheduling.x-k8s.io", "v1alpha1", "PodGroup")
}

/// The Kubernetes PodGroup kind.
pub fn kube_gvk() -> GroupVersionKind {
    GroupVersionKind::gvk("scheduling.k8s.io", "v1alpha2", "PodGroup")
}

fn gvk_of(api: GroupApi) -> GroupVersionKind {
    match api {
        GroupApi::SchedulerPlugins => gvk(),
        GroupApi::Kubernetes => kube_gvk(),
    }
}

/// Waits for the PodGroup kind of `api` to be served; scheduling does not wait for it
/// meanwhile.
async fn resource(client: &Client, shared: &Shared, api: GroupApi) -> ApiResource {
    let mut said = false;
    loop {
        match pinned_kind(client, &gvk_of(api)).await {
            Ok((ar, _)) => return ar,
            Err(e) => {
                if !said {
                    let kind = gvk_of(api);
                    info!(error = %e, group = %kind.group, version = %kind.version, "PodGroup kind not served: gangs of this API wait until it is");
                    let mut st = shared.lock();
                    if !st.synced_pod_groups && api == GroupApi::SchedulerPlugins {
                        st.synced_pod_groups = true;
                        st.announce_sync();
                    }
                    drop(st);
                    shared.wake();
                    said = true;
                }
                tokio::time::sleep(CRD_POLL).await;
            }
        }
    }
}

/// Runs both watches until the process stops.
pub async fn run(client: Client, shared: Arc<Shared>) {
    tokio::join!(
        watch_api(client.clone(), shared.clone(), GroupApi::SchedulerPlugins),
        watch_api(client, shared, GroupApi::Kubernetes)
    );
}

/// Reads a PodGroup of `api`: `None` (after a warning) when it cannot be read, `Some(None)`
/// for a basic-policy group.
fn spec_of(api: GroupApi, o: &DynamicObject) -> Option<Option<PodGroupSpec>> {
    let v = serde_json::to_value(o).ok()?;
    let read = match api {
        GroupApi::SchedulerPlugins => gang::parse_pod_group(&v).map(|(_, s)| Some(s)),
        GroupApi::Kubernetes => gang::parse_kube_pod_group(&v).map(|(_, s)| s),
    };
    read.map_err(|e| warn!(error = %e, "ignoring a PodGroup the scheduler cannot read")).ok()
}

/// Watches the PodGroups of one API, publishing them to the engine.
async fn watch_api(client: Client, shared: Arc<Shared>, api: GroupApi) {
    let ar = resource(&client, &shared, api).await;
    let objects = Api::<DynamicObject>::all_with(client, &ar);
    let mut events = watch("podgroups", objects, watcher::Config::default()).boxed();
    let mut kind: Kind<Option<PodGroupSpec>> = Kind::new();
    let mut was_synced = false;
    while let Some(w) = events.next().await {
        let changed = match w {
            Watched::Event(ev) => kind.apply(map_event(ev, |o: &DynamicObject| spec_of(api, o))),
            Watched::Expired(k) => {
                info!(kind = k, "watch expired (410 Gone); relisting");
                false
            }
            Watched::Failed(k, e) => {
                warn!(kind = k, error = %e, "watch failed; retrying with backoff");
                false
            }
        };
        if kind.synced && (changed || !was_synced) {
            let now = Instant::now();
            let mut st = shared.lock();
            if !was_synced {
                info!(count = kind.current.len(), group = %gvk_of(api).group, "pod groups synced");
            }
            let groups = kind.current.iter().map(|((ns, name), spec)| (format!("{ns}/{name}"), spec.clone()));
            st.engine.groups.set_all(api, groups);
            // Members parked while their group was unknown or smaller are retried.
            for key in st.engine.queue.keys_where(|p| gang::group_of(p).is_some()) {
                st.engine.queue.activate(&key, now);
            }
            if !st.synced_pod_groups && api == GroupApi::SchedulerPlugins {
                st.synced_pod_groups = true;
                st.announce_sync();
            }
            drop(st);
            was_synced = true;
            shared.wake();
        }
    }
}

/// Writes a group's status after a decision, as scheduler-plugins does: `Scheduled` with
/// the number of members placed, or `Pending` while it cannot be.
pub async fn write_status(client: Client, group: String, scheduled: Option<usize>) {
    let Some((ns, name)) = group.split_once('/') else { return };
    let Ok((ar, _)) = pinned_kind(&client, &gvk()).await else { return };
    let api = Api::<DynamicObject>::namespaced_with(client, ns, &ar);
    let status = match scheduled {
        Some(n) => serde_json::json!({"status": {"phase": "Scheduled", "scheduled": n}}),
        None => serde_json::json!({"status": {"phase": "Pending"}}),
    };
    if let Err(e) = api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status)).await {
        warn!(group = %group, error = %e, "failed to write the PodGroup's status");
    }
}
