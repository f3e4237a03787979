//! Watches PodGroups (`scheduling.x-k8s.io/v1alpha1`, scheduler-plugins' CRD) for gang
//! scheduling, and writes their status. Without the CRD the scheduler runs without gangs
//! and looks for it again every 30 s.

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
use crate::gang::{self, PodGroupSpec};

/// How often a missing CRD is looked for again.
const CRD_POLL: Duration = Duration::from_secs(30);

/// The PodGroup kind.
pub fn gvk() -> GroupVersionKind {
    GroupVersionKind::gvk("scheduling.x-k8s.io", "v1alpha1", "PodGroup")
}

/// Waits for the PodGroup kind to be served; scheduling does not wait for it meanwhile.
async fn resource(client: &Client, shared: &Shared) -> ApiResource {
    let mut said = false;
    loop {
        match pinned_kind(client, &gvk()).await {
            Ok((ar, _)) => return ar,
            Err(e) => {
                if !said {
                    info!(error = %e, "PodGroup CRD (scheduling.x-k8s.io/v1alpha1) not served: gang scheduling is off until it is");
                    let mut st = shared.lock();
                    if !st.synced_pod_groups {
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

/// Runs the watch until the process stops, publishing the groups to the engine.
pub async fn run(client: Client, shared: Arc<Shared>) {
    let ar = resource(&client, &shared).await;
    let api = Api::<DynamicObject>::all_with(client, &ar);
    let mut events = watch("podgroups", api, watcher::Config::default()).boxed();
    let mut kind: Kind<PodGroupSpec> = Kind::new();
    let mut was_synced = false;
    while let Some(w) = events.next().await {
        let changed = match w {
            Watched::Event(ev) => kind.apply(map_event(ev, |o: &DynamicObject| {
                let v = serde_json::to_value(o).ok()?;
                match gang::parse_pod_group(&v) {
                    Ok((_, spec)) => Some(spec),
                    Err(e) => {
                        warn!(error = %e, "ignoring a PodGroup the scheduler cannot read");
                        None
                    }
                }
            })),
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
            let mut groups = gang::Groups::default();
            for ((ns, name), spec) in &kind.current {
                groups.upsert(format!("{ns}/{name}"), spec.clone());
            }
            if !was_synced {
                info!(count = kind.current.len(), "pod groups synced");
            }
            st.engine.groups = groups;
            // Members parked while their group was unknown or smaller are retried.
            for key in st.engine.queue.keys_where(|p| gang::group_of(p).is_some()) {
                st.engine.queue.activate(&key, now);
            }
            if !st.synced_pod_groups {
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
