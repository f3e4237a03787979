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

use super::shared::Shared;
use super::state::Feed;
use crate::gang::{self, Api as GroupApi, PodGroupSpec};
use crate::watch::relist::Mirror;
use crate::watch::watches::watch;

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

/// The API resource of a kind, known without asking the server (status writes happen
/// only for groups its watch already listed).
fn resource_of(gvk: &GroupVersionKind) -> ApiResource {
    ApiResource::from_gvk_with_plural(gvk, "podgroups")
}

fn gvk_of(api: GroupApi) -> GroupVersionKind {
    match api {
        GroupApi::SchedulerPlugins => gvk(),
        GroupApi::Kubernetes => kube_gvk(),
    }
}

/// Waits for the PodGroup kind of `api` to be served; scheduling does not wait for it
/// meanwhile. Only the server's answer (not found, forbidden) says the kind is not there:
/// while the server cannot be reached, the question stays open (the watches say why).
async fn resource(client: &Client, shared: &Shared, api: GroupApi) -> ApiResource {
    let mut said = false;
    loop {
        match pinned_kind(client, &gvk_of(api)).await {
            Ok((ar, _)) => return ar,
            Err(e @ (kube::Error::Api(_) | kube::Error::Discovery(_))) => {
                if !said {
                    let kind = gvk_of(api);
                    info!(error = %crate::watch::cause::Told(&e), group = %kind.group, version = %kind.version, "PodGroup kind not served: gangs of this API wait until it is");
                    if api == GroupApi::SchedulerPlugins {
                        shared.lock().listed(Feed::PodGroups);
                    }
                    shared.wake();
                    said = true;
                }
            }
            Err(e) => {
                tracing::debug!(error = %crate::watch::cause::chain(&e), "cannot ask whether PodGroups are served")
            }
        }
        tokio::time::sleep(CRD_POLL).await;
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
    let mut groups: Mirror<Option<PodGroupSpec>> = Mirror::default();
    let mut announced = false;
    while let Some(w) = events.next().await {
        let changed = w.into_event().is_some_and(|ev| groups.apply(ev, |o| spec_of(api, o)));
        if !(groups.listed() && changed) {
            continue;
        }
        let now = Instant::now();
        let mut st = shared.lock();
        st.engine.groups.set_all(api, groups.values.iter().map(|(k, spec)| (k.clone(), spec.clone())));
        // Members parked while their group was unknown or smaller are retried.
        for key in st.engine.queue.keys_where(|p| gang::group_of(p).is_some()) {
            st.engine.queue.activate(&key, now);
        }
        if !std::mem::replace(&mut announced, true) {
            info!(count = groups.values.len(), group = %gvk_of(api).group, "pod groups synced");
        }
        if api == GroupApi::SchedulerPlugins {
            st.listed(Feed::PodGroups);
        }
        drop(st);
        shared.wake();
    }
}

/// How often changed groups' status is written.
const STATUS_INTERVAL: Duration = Duration::from_secs(1);

/// Writes the status of the scheduler-plugins groups that changed (a decision, or a
/// member's update), at most once a second each, until the process stops.
pub async fn statuses(client: Client, shared: Arc<Shared>) {
    loop {
        tokio::time::sleep(STATUS_INTERVAL).await;
        if shared.stopping() {
            return;
        }
        let dirty: Vec<(String, u32)> = {
            let mut st = shared.lock();
            let keys = std::mem::take(&mut st.dirty_groups);
            keys.into_iter()
                .filter_map(|k| {
                    let min = st.engine.groups.spec(GroupApi::SchedulerPlugins, &k)?.min_member;
                    Some((k, min))
                })
                .collect()
        };
        if !shared.is_leader() {
            continue;
        }
        for (group, min) in dirty {
            write_status(client.clone(), &group, min).await;
        }
    }
}

/// The status scheduler-plugins keeps for a group whose members are in these phases,
/// `scheduled` of them bound.
pub fn status_of(min: u32, scheduled: u32, phases: &[&str]) -> serde_json::Value {
    let count = |phase: &str| phases.iter().filter(|p| **p == phase).count() as u32;
    let (running, succeeded, failed) = (count("Running"), count("Succeeded"), count("Failed"));
    let phase = if failed > 0 && running + succeeded < min {
        "Failed"
    } else if succeeded >= min {
        "Finished"
    } else if running + succeeded >= min {
        "Running"
    } else if scheduled >= min {
        "Scheduled"
    } else {
        "Pending"
    };
    serde_json::json!({"status": {
        "phase": phase, "scheduled": scheduled, "running": running, "succeeded": succeeded, "failed": failed
    }})
}

/// Counts the group's members (pods labelled with its name) and writes its status.
async fn write_status(client: Client, group: &str, min: u32) {
    let Some((ns, name)) = group.split_once('/') else { return };
    let ar = resource_of(&gvk());
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), ns);
    let selector = format!("{}={name}", gang::POD_GROUP_LABEL);
    let list = match pods.list(&kube::api::ListParams::default().labels(&selector)).await {
        Ok(l) => l,
        Err(e) => {
            warn!(group = %group, error = %crate::watch::cause::Told(&e), "failed to list the PodGroup's pods");
            return;
        }
    };
    let scheduled = list.items.iter().filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some())).count();
    let phases: Vec<&str> =
        list.items.iter().filter_map(|p| p.status.as_ref().and_then(|s| s.phase.as_deref())).collect();
    let status = status_of(min, scheduled as u32, &phases);
    let api = Api::<DynamicObject>::namespaced_with(client, ns, &ar);
    if let Err(e) = api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status)).await {
        warn!(group = %group, error = %crate::watch::cause::Told(&e), "failed to write the PodGroup's status");
    }
}

/// Sets a Kubernetes PodGroup's `PodGroupScheduled` condition after a decision: `True`
/// once placed, `False` (reason `Unschedulable`, with the message) when it waits. Other
/// conditions are kept; the transition time changes only with the status.
pub async fn write_condition(client: Client, group: String, verdict: Result<(), String>) {
    let Some((ns, name)) = group.split_once('/') else { return };
    let ar = resource_of(&kube_gvk());
    let api = Api::<DynamicObject>::namespaced_with(client, ns, &ar);
    let current = match api.get_status(name).await {
        Ok(o) => o,
        Err(e) => {
            warn!(group = %group, error = %crate::watch::cause::Told(&e), "failed to read the PodGroup");
            return;
        }
    };
    let (status, reason, message) = match &verdict {
        Ok(()) => ("True", "Scheduled", String::new()),
        Err(m) => ("False", "Unschedulable", m.clone()),
    };
    let mut conditions: Vec<serde_json::Value> =
        current.data["status"]["conditions"].as_array().cloned().unwrap_or_default();
    let old = conditions.iter().position(|c| c["type"] == "PodGroupScheduled");
    let since = old
        .map(|i| conditions[i].clone())
        .filter(|c| c["status"] == status)
        .and_then(|c| c["lastTransitionTime"].as_str().map(str::to_string))
        .unwrap_or_else(|| k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
    let condition = serde_json::json!({
        "type": "PodGroupScheduled", "status": status, "reason": reason, "message": message,
        "lastTransitionTime": since
    });
    match old {
        Some(i) => conditions[i] = condition,
        None => conditions.push(condition),
    }
    let patch = serde_json::json!({"status": {"conditions": conditions}});
    if let Err(e) = api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
        warn!(group = %group, error = %crate::watch::cause::Told(&e), "failed to write the PodGroup's condition");
    }
}

#[cfg(test)]
mod tests {
    use super::status_of;

    #[test]
    fn group_phases_follow_the_members() {
        let phase = |min, scheduled, phases: &[&str]| status_of(min, scheduled, phases)["status"]["phase"].clone();
        assert_eq!(phase(2, 0, &["Pending", "Pending"]), "Pending");
        assert_eq!(phase(2, 1, &["Pending", "Pending"]), "Pending");
        assert_eq!(phase(2, 2, &["Pending", "Pending"]), "Scheduled");
        assert_eq!(phase(2, 2, &["Running", "Pending"]), "Scheduled");
        assert_eq!(phase(2, 2, &["Running", "Running"]), "Running");
        assert_eq!(phase(2, 2, &["Running", "Succeeded"]), "Running");
        assert_eq!(phase(2, 2, &["Succeeded", "Succeeded"]), "Finished");
        assert_eq!(phase(2, 2, &["Running", "Failed"]), "Failed");
        let s = status_of(3, 3, &["Running", "Running", "Succeeded"]);
        assert_eq!((s["status"]["running"].as_u64(), s["status"]["succeeded"].as_u64()), (Some(2), Some(1)));
    }
}
