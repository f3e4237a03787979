//! The placement-aware admission check, run by the leader: Kueue's AdmissionChecks whose
//! `spec.controllerName` is [`CONTROLLER_NAME`] are marked Active, and each Workload with
//! quota reserved and such a check `Pending` is placed whole on the scheduler's cache (the
//! room promised to Workloads let through before included). The check turns `Ready` when
//! every pod fits. A Workload that does not fit now but would once the Jobs running now
//! end stays `Pending` with the reason (its quota kept; it is decided again each round and
//! goes in as soon as room frees) for up to [`HOLD_TIMEOUT`]. Otherwise, and after that,
//! `Retry` with the reason of the first pod that does not fit (Kueue then
//! gives the quota back and tries the Workload again after `requeueAfterSeconds`, which
//! doubles with each retry from 5 s up to [`MAX_REQUEUE`]: room that frees up is offered
//! again soon). What was promised is held
//! until the Workload's pods are placed, it goes away, or the promise lapses.
//!
//! A Workload whose pod template names a node label in
//! [`crate::admission_check::TOPOLOGY_ANNOTATION`] is placed whole inside one domain of
//! that label, and the check's `podSetUpdates` pin its pod sets there with a node selector.
//!
//! The Workloads and checks are read as soon as a Workload changes (a watch wakes the
//! loop, a few changes at once read together), when a pod ends while Workloads are held
//! for room, and at least every [`PERIOD`].

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};
use tracing::{debug, info, warn};

use super::shared::Shared;
use crate::admission_check::{
    CONTROLLER_NAME, Flavor, HOLD_TIMEOUT, Promises, place_workload, required_topology, without_jobs, workload_pods,
};

/// How often Workloads are looked at when none changes.
pub const PERIOD: Duration = Duration::from_secs(1);
/// How long a change waits for others before the Workloads are read.
const GATHER: Duration = Duration::from_millis(50);
/// The least time between two reads of the Workloads.
const MIN_ROUND: Duration = Duration::from_millis(200);
/// The longest a refused Workload waits before Kueue offers it to the check again.
pub const MAX_REQUEUE: u64 = 30;
/// The field manager of the check's writes.
const MANAGER: &str = "custom-scheduler-admission-check";

fn resource(kind: &str, plural: &str) -> ApiResource {
    let gvk = GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta2", kind);
    ApiResource { plural: plural.into(), ..ApiResource::from_gvk(&gvk) }
}

/// Runs the check until the process stops; idle while Kueue's kinds are not served or
/// this replica does not lead.
pub async fn run(client: Client, shared: Arc<Shared>) {
    let checks: Api<DynamicObject> = Api::all_with(client.clone(), &resource("AdmissionCheck", "admissionchecks"));
    let workloads: Api<DynamicObject> = Api::all_with(client.clone(), &resource("Workload", "workloads"));
    let flavors: Api<DynamicObject> = Api::all_with(client.clone(), &resource("ResourceFlavor", "resourceflavors"));
    let mut promises = Promises::default();
    let mut said: HashMap<String, (String, String)> = HashMap::new();
    let mut held: HashMap<String, Instant> = HashMap::new();
    let mut announced = false;
    let changed = Arc::new(tokio::sync::Notify::new());
    let mut last_round = Instant::now();
    tokio::spawn(wake_on_changes(workloads.clone(), changed.clone()));
    loop {
        tokio::select! {
            () = tokio::time::sleep(PERIOD) => {}
            () = changed.notified() => tokio::time::sleep(GATHER).await,
            // Room that frees matters only to Workloads held for it.
            () = shared.room_freed.notified(), if !held.is_empty() => tokio::time::sleep(GATHER).await,
        }
        // However busy the cluster, rounds are some time apart.
        tokio::time::sleep(MIN_ROUND.saturating_sub(last_round.elapsed())).await;
        last_round = Instant::now();
        if shared.stopping() {
            return;
        }
        if !shared.is_leader() || !shared.ready() {
            continue;
        }
        let ours = match active_checks(&checks).await {
            Ok(ours) => ours,
            Err(e) => {
                debug!(error = %crate::watch::cause::Told(&e), "Kueue's AdmissionChecks cannot be listed");
                continue;
            }
        };
        if ours.is_empty() {
            continue;
        }
        if !std::mem::replace(&mut announced, true) {
            info!(checks = ?ours, controller = CONTROLLER_NAME, "deciding Kueue admission checks by placement");
        }
        let list = match workloads.list(&ListParams::default()).await {
            Ok(l) => l.items,
            Err(e) => {
                warn!(error = %crate::watch::cause::Told(&e), "cannot list Kueue's Workloads");
                continue;
            }
        };
        let mut flavor_cache: HashMap<String, Flavor> = HashMap::new();
        // Workloads that went away take their promise and what was said of them along.
        let present: HashSet<String> = list
            .iter()
            .map(|w| {
                format!(
                    "{}/{}",
                    w.metadata.namespace.as_deref().unwrap_or_default(),
                    w.metadata.name.as_deref().unwrap_or_default()
                )
            })
            .collect();
        said.retain(|k, _| present.contains(k));
        held.retain(|k, _| present.contains(k));
        promises.retain(|k| present.contains(k));
        for wl in list {
            let value = serde_json::to_value(&wl).unwrap_or_default();
            let mut state = Decider {
                flavors: &flavors,
                cache: &mut flavor_cache,
                promises: &mut promises,
                said: &mut said,
                held: &mut held,
            };
            state.decide(&client, &shared, &ours, &value).await;
        }
    }
}

/// Wakes the check's loop whenever a Workload changes. While Kueue's kinds are not served
/// the watch retries with a growing backoff, quietly: the loop's own reads say so.
async fn wake_on_changes(workloads: Api<DynamicObject>, changed: Arc<tokio::sync::Notify>) {
    use futures::StreamExt;
    use kube::runtime::{WatchStreamExt, watcher};
    let stream = watcher::watcher(workloads, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_) | watcher::Event::InitDone) => changed.notify_one(),
            Ok(_) => {}
            Err(e) => debug!(error = %e, "Kueue's Workloads cannot be watched"),
        }
    }
}

/// The names of this scheduler's AdmissionChecks, each marked Active.
async fn active_checks(checks: &Api<DynamicObject>) -> Result<HashSet<String>, kube::Error> {
    let mut ours = HashSet::new();
    for check in checks.list(&ListParams::default()).await?.items {
        let v = serde_json::to_value(&check).unwrap_or_default();
        if v["spec"]["controllerName"].as_str() != Some(CONTROLLER_NAME) {
            continue;
        }
        let Some(name) = check.metadata.name.clone() else { continue };
        let conditions = v["status"]["conditions"].as_array().cloned().unwrap_or_default();
        let active = conditions.iter().any(|c| c["type"] == "Active" && c["status"] == "True");
        if !active {
            let status = json!({
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": name},
                "status": {"conditions": [{"type": "Active", "status": "True", "reason": "Active",
                    "message": "custom-scheduler decides this check by placement", "lastTransitionTime": now()}]},
            });
            checks.patch_status(&name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&status)).await?;
        }
        ours.insert(name);
    }
    Ok(ours)
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now().round(k8s_openapi::jiff::Unit::Second).unwrap_or_default().to_string()
}

/// What deciding a Workload's check reads and keeps between rounds.
struct Decider<'a> {
    flavors: &'a Api<DynamicObject>,
    cache: &'a mut HashMap<String, Flavor>,
    promises: &'a mut Promises,
    /// The last decision written per Workload: a repeated one is not written or logged again.
    said: &'a mut HashMap<String, (String, String)>,
    /// Since when each Workload kept `Pending` for room has been held.
    held: &'a mut HashMap<String, Instant>,
}

impl Decider<'_> {
    /// Decides one Workload's check, if it is ours and pending.
    async fn decide(&mut self, client: &Client, shared: &Shared, ours: &HashSet<String>, wl: &Value) {
        let (flavors, cache, promises) = (self.flavors, &mut *self.cache, &mut *self.promises);
        let ns = wl["metadata"]["namespace"].as_str().unwrap_or_default().to_string();
        let name = wl["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let key = format!("{ns}/{name}");
        let states = wl["status"]["admissionChecks"].as_array().cloned().unwrap_or_default();
        let Some(state) = states.iter().find(|s| s["name"].as_str().is_some_and(|n| ours.contains(n))) else {
            return;
        };
        let check = state["name"].as_str().unwrap_or_default().to_string();
        let reserved = !wl["status"]["admission"].is_null();
        match state["state"].as_str() {
            Some("Pending") if reserved => {}
            Some("Ready") if reserved => return,
            _ => {
                promises.release(&key);
                self.held.remove(&key);
                return;
            }
        }
        for f in wl["status"]["admission"]["podSetAssignments"].as_array().into_iter().flatten() {
            for flavor in f["flavors"].as_object().into_iter().flatten().filter_map(|(_, v)| v.as_str()) {
                if !cache.contains_key(flavor)
                    && let Ok(rf) = flavors.get(flavor).await
                {
                    cache.insert(flavor.to_string(), flavor_of(&serde_json::to_value(&rf).unwrap_or_default()));
                }
            }
        }
        let topology = required_topology(wl);
        // Placing a large group takes a while: off the runtime's workers, so that health,
        // metrics and watches go on meanwhile. Not placeable now: would it be once the
        // Jobs running now end?
        let decision = tokio::task::block_in_place(|| {
            let pods = workload_pods(wl, cache).map_err(|e| (e, false))?;
            // A copy of the cache: the scheduling loop's own snapshot is left alone.
            let (profile, snapshot) = {
                let st = shared.lock();
                let profile = pods
                    .first()
                    .and_then(|p| st.engine.profiles.iter().find(|pr| pr.scheduler_name == p.scheduler_name))
                    .or_else(|| st.engine.profiles.first())
                    .cloned()
                    .ok_or_else(|| ("no scheduling profile".to_string(), false))?;
                (profile, st.engine.cache.full_snapshot())
            };
            let mut now = snapshot.clone();
            promises.apply(&profile, &mut now, Instant::now(), &key);
            match place_workload(&profile, &mut now, &pods, topology.as_deref()) {
                Ok((nodes, pinned)) => {
                    let named: Vec<String> = nodes.iter().map(|&i| now.nodes[i].name.clone()).collect();
                    Ok((pods, named, pinned))
                }
                Err(why) => {
                    let later = place_workload(&profile, &mut without_jobs(&snapshot), &pods, topology.as_deref());
                    Err((why, later.is_ok()))
                }
            }
        });
        let mut updates = Vec::new();
        let (verdict, message) = match decision {
            Ok((pods, nodes, pinned)) => {
                let mut message = format!("all {} pods fit: {}", pods.len(), summary(&nodes));
                if let Some((label, value)) = pinned {
                    message = format!("all {} pods fit in {label}={value}: {}", pods.len(), summary(&nodes));
                    // Every pod set is pinned to the domain: Kueue adds the selector to its pods.
                    for set in wl["spec"]["podSets"].as_array().into_iter().flatten() {
                        let set_name = set["name"].as_str().unwrap_or("main");
                        updates.push(json!({"name": set_name, "nodeSelector": {&label: &value}}));
                    }
                }
                promises.promise(&key, pods.into_iter().zip(nodes).collect(), Instant::now());
                self.held.remove(&key);
                ("Ready", message)
            }
            Err((why, later)) => {
                // It would fit once running Jobs end: its quota is kept and it is decided
                // again each round, so that it goes in as soon as room frees.
                let since = later.then(|| *self.held.entry(key.clone()).or_insert_with(Instant::now));
                if since.is_some_and(|t| t.elapsed() < HOLD_TIMEOUT) {
                    ("Pending", format!("waiting for room: {why}"))
                } else {
                    self.held.remove(&key);
                    ("Retry", why)
                }
            }
        };
        // Said to wait already: not written again each round (its reason stays the first).
        if verdict == "Pending" && self.said.get(&key).is_some_and(|(v, _)| v == "Pending") {
            return;
        }
        let mut entry =
            json!({"name": check, "state": verdict, "message": truncate(&message), "lastTransitionTime": now()});
        if !updates.is_empty() {
            entry["podSetUpdates"] = json!(updates);
        }
        if verdict == "Retry" {
            let retries = state["retryCount"].as_u64().unwrap_or(0).min(6) as u32;
            entry["requeueAfterSeconds"] = json!((5u64 << retries).min(MAX_REQUEUE));
        }
        let status = json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": name, "namespace": ns},
            "status": {"admissionChecks": [entry]},
        });
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource("Workload", "workloads"));
        match api.patch_status(&name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&status)).await {
            Ok(_) => {
                let now_said = (verdict.to_string(), message.clone());
                if self.said.insert(key.clone(), now_said.clone()).as_ref() != Some(&now_said) {
                    info!(workload = %key, check = %check, state = verdict, message = %message, "admission check decided");
                } else {
                    debug!(workload = %key, state = verdict, "admission check decided as before");
                }
            }
            Err(e) => {
                promises.release(&key);
                warn!(workload = %key, error = %crate::watch::cause::Told(&e), "cannot write the admission check's state");
            }
        }
    }
}

/// A ResourceFlavor's node labels and tolerations.
fn flavor_of(rf: &Value) -> Flavor {
    let node_labels = rf["spec"]["nodeLabels"]
        .as_object()
        .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect())
        .unwrap_or_default();
    let tolerations = serde_json::from_value(rf["spec"]["tolerations"].clone()).unwrap_or_default();
    Flavor { node_labels, tolerations }
}

/// `node-a x2, node-b` for the nodes of a placement.
fn summary(nodes: &[String]) -> String {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for n in nodes {
        match counts.iter_mut().find(|(m, _)| m == n) {
            Some((_, c)) => *c += 1,
            None => counts.push((n.clone(), 1)),
        }
    }
    let parts: Vec<String> = counts.iter().map(|(n, c)| if *c > 1 { format!("{n} x{c}") } else { n.clone() }).collect();
    parts.join(", ")
}

/// Kueue keeps a check's message to 32 KiB.
fn truncate(message: &str) -> String {
    const MAX: usize = 32 * 1024 - 1;
    if message.len() <= MAX {
        return message.to_string();
    }
    let mut end = MAX;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    message[..end].to_string()
}
