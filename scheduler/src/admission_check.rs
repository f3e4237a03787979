//! A placement-aware admission check for Kueue: before Kueue admits a Workload whose
//! quota it reserved, the scheduler places all its pods together on its view of the
//! cluster (the pods it promised to earlier Workloads included) and says whether they
//! fit. This module holds what does not talk to the API server: a Workload's pods as
//! they will be created, the group placement and the promises kept until the pods come.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use algorithms::framework::{EvaluateOptions, evaluate};
use algorithms::preemption::put_node;
use algorithms::snapshot::Snapshot;
use algorithms::{PodInfo, Profile};
use k8s_openapi::api::core::v1::{Pod, PodSpec, Toleration};
use rand::SeedableRng;
use serde_json::Value;

/// The `spec.controllerName` of the AdmissionChecks this scheduler decides.
pub const CONTROLLER_NAME: &str = "custom-scheduler.x-k8s.io/placement";

/// How long a promise holds devices and room for a Workload whose pods have not come.
pub const PROMISE_TIMEOUT: Duration = Duration::from_secs(300);

/// How long a Workload that would fit once the running Jobs end is kept `Pending` (its
/// quota held, decided again as soon as room frees) before it is sent back with `Retry`.
pub const HOLD_TIMEOUT: Duration = Duration::from_secs(300);

/// What a ResourceFlavor puts on the pods it is assigned to.
#[derive(Debug, Clone, Default)]
pub struct Flavor {
    /// `spec.nodeLabels`: Kueue adds them to the pods' node selector.
    pub node_labels: BTreeMap<String, String>,
    /// `spec.tolerations`: Kueue adds them to the pods.
    pub tolerations: Vec<Toleration>,
}

/// The pods a Workload's Job will create once admitted: each pod set's template, `count`
/// times, with the node labels and tolerations of the flavors Kueue assigned to it.
pub fn workload_pods(workload: &Value, flavors: &HashMap<String, Flavor>) -> Result<Vec<PodInfo>, String> {
    let namespace = workload["metadata"]["namespace"].as_str().unwrap_or("default");
    let name = workload["metadata"]["name"].as_str().unwrap_or("workload");
    let owner = workload["metadata"]["ownerReferences"].as_array().and_then(|o| o.first()).cloned();
    let assignments = workload["status"]["admission"]["podSetAssignments"].as_array().cloned().unwrap_or_default();
    let mut out = Vec::new();
    for set in workload["spec"]["podSets"].as_array().into_iter().flatten() {
        let set_name = set["name"].as_str().unwrap_or("main");
        let assigned = assignments.iter().find(|a| a["name"].as_str() == Some(set_name));
        // Kueue's partial admission runs fewer pods than the pod set asks: as many as assigned.
        let count = assigned.and_then(|a| a["count"].as_u64()).or_else(|| set["count"].as_u64()).unwrap_or(1);
        let mut spec: PodSpec = serde_json::from_value(set["template"]["spec"].clone())
            .map_err(|e| format!("pod set {set_name}: the pod template cannot be read: {e}"))?;
        let names = assigned.and_then(|a| a["flavors"].as_object()).into_iter().flatten();
        let mut seen = Vec::new();
        for flavor in names.filter_map(|(_, f)| f.as_str()) {
            if seen.contains(&flavor) {
                continue;
            }
            seen.push(flavor);
            let Some(f) = flavors.get(flavor) else { return Err(format!("ResourceFlavor {flavor:?} is not known")) };
            let selector = spec.node_selector.get_or_insert_with(Default::default);
            selector.extend(f.node_labels.iter().map(|(k, v)| (k.clone(), v.clone())));
            spec.tolerations.get_or_insert_with(Vec::new).extend(f.tolerations.iter().cloned());
        }
        let template_meta = &set["template"]["metadata"];
        for i in 0..count {
            let mut meta: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta =
                serde_json::from_value(template_meta.clone()).unwrap_or_default();
            meta.name = Some(format!("{name}-{set_name}-{i}"));
            meta.namespace = Some(namespace.to_string());
            if let Some(o) = &owner {
                meta.owner_references = serde_json::from_value(Value::Array(vec![o.clone()])).ok();
            }
            let pod = Pod { metadata: meta, spec: Some(spec.clone()), status: None };
            out.push(PodInfo::from_pod(&pod).map_err(|e| format!("pod set {set_name}: {e}"))?);
        }
    }
    Ok(out)
}

/// Places `pods` one after another on `snapshot`, each counting those placed before it,
/// as kube-scheduler would place them: the cluster's controllers first make each pod's
/// claims from its templates, then each pod is judged, put on its node and reserved
/// there (so the devices one takes are not given to the next). The node of each, or why
/// the first that fits nowhere does not fit. The pods stay placed in `snapshot`.
pub fn place_group(profile: &Profile, snapshot: &mut Snapshot, pods: &[PodInfo]) -> Result<Vec<usize>, String> {
    place_within(profile, snapshot, pods, None)
}

/// [`place_group`] on the nodes `within` (indexes into `snapshot`) only.
fn place_within(
    profile: &Profile,
    snapshot: &mut Snapshot,
    pods: &[PodInfo],
    within: Option<Arc<Vec<usize>>>,
) -> Result<Vec<usize>, String> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(0);
    let mut nodes = Vec::with_capacity(pods.len());
    let opts = EvaluateOptions { within, ..EvaluateOptions::default() };
    for pod in pods {
        let pod = admitted(snapshot, pod);
        let ev = evaluate(profile, &pod, snapshot, &mut rng, opts.clone());
        let Some(i) = ev.selected else {
            let why = ev.failure_message().unwrap_or_else(|| "no node fits".into());
            return Err(format!("pod {} of {}: {why}", nodes.len() + 1, pods.len()));
        };
        put(profile, snapshot, i, &pod).map_err(|why| format!("pod {} of {}: {why}", nodes.len() + 1, pods.len()))?;
        nodes.push(i);
    }
    Ok(nodes)
}

/// Places a Workload's `pods` as the check does: whole in one domain of `topology` when
/// given (the nodes and the domain's label and value), else as one group anywhere.
pub fn place_workload(
    profile: &Profile,
    snapshot: &mut Snapshot,
    pods: &[PodInfo],
    topology: Option<&str>,
) -> Result<(Vec<usize>, Option<(String, String)>), String> {
    match topology {
        Some(label) => {
            let (nodes, value) = place_in_one_domain(profile, snapshot, pods, label)?;
            Ok((nodes, Some((label.to_string(), value))))
        }
        None => Ok((place_group(profile, snapshot, pods)?, None)),
    }
}

/// `snapshot` once the batch work running now has ended: every pod a Job controls taken
/// off its node (what else runs, and the devices claims hold, stay).
pub fn without_jobs(snapshot: &Snapshot) -> Snapshot {
    let mut out = snapshot.clone();
    for i in 0..out.nodes.len() {
        let batch: Vec<(String, String)> = out.nodes[i]
            .pods
            .iter()
            .filter(|p| p.controller.as_ref().is_some_and(|(kind, _)| kind == "Job"))
            .map(|p| (p.namespace.clone(), p.name.clone()))
            .collect();
        if batch.is_empty() {
            continue;
        }
        let mut node = (*out.nodes[i]).clone();
        for (ns, name) in batch {
            node.remove_pod(&ns, &name);
        }
        put_node(&mut out, i, node);
    }
    out
}

/// The pod template annotation naming a node label whose one domain (one value) must hold
/// all of a Workload's pods; the check then pins the pods there with `podSetUpdates`.
pub const TOPOLOGY_ANNOTATION: &str = "custom-scheduler.x-k8s.io/placement-topology";

/// The label key a Workload's pod sets ask their pods to share a domain of, if any.
pub fn required_topology(workload: &Value) -> Option<String> {
    workload["spec"]["podSets"]
        .as_array()?
        .iter()
        .find_map(|set| set["template"]["metadata"]["annotations"][TOPOLOGY_ANNOTATION].as_str())
        .filter(|k| !k.is_empty())
        .map(String::from)
}

/// Places `pods` whole inside one domain of the node label `key`, trying the domains as
/// the scheduler's own topology-constrained groups do by default: the least free of the
/// pods' dominant resource first (the device they ask for, else CPU), so that emptier
/// domains stay whole for larger groups, then by value. The nodes and the domain's value,
/// or why no domain holds them (each domain's reason). `snapshot` holds the placement
/// that succeeded.
pub fn place_in_one_domain(
    profile: &Profile,
    snapshot: &mut Snapshot,
    pods: &[PodInfo],
    key: &str,
) -> Result<(Vec<usize>, String), String> {
    let mut domains: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, node) in snapshot.nodes.iter().enumerate() {
        if let Some(v) = node.labels.get(key) {
            domains.entry(v.clone()).or_default().push(i);
        }
    }
    if domains.is_empty() {
        return Err(format!("no node has the label {key:?} the pods must share a domain of"));
    }
    let dominant = algorithms::placement::dominant(&snapshot.nodes, pods);
    let mut domains: Vec<(String, Vec<usize>)> = domains.into_iter().collect();
    domains.sort_by_cached_key(|(value, nodes)| {
        let free: i64 = nodes.iter().map(|&i| algorithms::placement::free_on(&snapshot.nodes[i], &dominant)).sum();
        (free, value.clone())
    });
    let mut reasons = Vec::new();
    for (value, nodes) in domains {
        let mut trial = snapshot.clone();
        match place_within(profile, &mut trial, pods, Some(Arc::new(nodes))) {
            Ok(placed) => {
                *snapshot = trial;
                return Ok((placed, value));
            }
            Err(why) => reasons.push(format!("{key}={value}: {why}")),
        }
    }
    Err(format!("no {key} domain holds all {} pods: {}", pods.len(), reasons.join("; ")))
}

/// `pod` as the cluster's controllers leave it before a scheduler sees it: its claims made
/// from its templates in `snapshot`'s objects.
fn admitted(snapshot: &mut Snapshot, pod: &PodInfo) -> PodInfo {
    let mut pod = pod.clone();
    let objects = Arc::make_mut(&mut snapshot.objects);
    for owner in algorithms::plugins::registry::OWNERS {
        owner.admit(objects, &mut pod);
    }
    pod
}

/// Puts `pod` on node `i` and runs the profile's Reserve plugins there.
fn put(profile: &Profile, snapshot: &mut Snapshot, i: usize, pod: &PodInfo) -> Result<(), String> {
    let node = &snapshot.nodes[i];
    let mut placed = pod.clone();
    placed.node_name = Some(node.name.clone());
    let objects = Arc::make_mut(&mut snapshot.objects);
    for plugin in &profile.reserves {
        plugin
            .reserve(objects, &placed, node)
            .map_err(|st| format!("running Reserve plugin {:?}: {}", plugin.name(), st.message()))?;
    }
    settle(snapshot, i, placed);
    Ok(())
}

/// Adds `pod` to node `i`'s pods (its requests counted there).
fn settle(snapshot: &mut Snapshot, i: usize, mut pod: PodInfo) {
    let mut node = (*snapshot.nodes[i]).clone();
    pod.node_name = Some(node.name.clone());
    node.add_pod(Arc::new(pod));
    put_node(snapshot, i, node);
}

/// Room promised to a Workload the check let through, held until its pods are placed.
#[derive(Debug, Clone)]
pub struct Promise {
    /// The pods as simulated, each with its node's name.
    pub pods: Vec<(PodInfo, String)>,
    /// The Workload's owner (namespace, kind, name), whose pods redeem the promise.
    pub owner: Option<(String, String, String)>,
    /// When the promise lapses.
    pub until: Instant,
}

/// The promises made, by Workload (namespace/name).
#[derive(Debug, Default)]
pub struct Promises {
    held: HashMap<String, Promise>,
}

impl Promises {
    /// Holds room for `workload`'s pods placed on `nodes` (names) of a simulation.
    pub fn promise(&mut self, workload: &str, pods: Vec<(PodInfo, String)>, now: Instant) {
        let owner = pods.first().and_then(|(p, _)| {
            p.controller.as_ref().map(|(kind, name)| (p.namespace.clone(), kind.clone(), name.clone()))
        });
        self.held.insert(workload.to_string(), Promise { pods, owner, until: now + PROMISE_TIMEOUT });
    }

    /// Drops the promise of a Workload that went away or no longer waits on the check.
    pub fn release(&mut self, workload: &str) {
        self.held.remove(workload);
    }

    /// Drops the promises that lapsed or whose pods `snapshot` holds (as many placed as
    /// promised), then puts the others' pods on `snapshot` (their claims made and
    /// reserved under `profile`), except `except`'s own.
    pub fn apply(&mut self, profile: &Profile, snapshot: &mut Snapshot, now: Instant, except: &str) {
        let placed = owners_placed(snapshot);
        self.held.retain(|_, p| {
            let redeemed = p.owner.as_ref().is_some_and(|o| placed.get(o).copied().unwrap_or(0) >= p.pods.len());
            p.until > now && !redeemed
        });
        for (key, promise) in &self.held {
            if key == except {
                continue;
            }
            // The pods already placed count as themselves: only the rest of the promise.
            let arrived = promise.owner.as_ref().and_then(|o| placed.get(o)).copied().unwrap_or(0);
            for (pod, node) in promise.pods.iter().skip(arrived) {
                if let Some(&i) = snapshot.index.get(node) {
                    let pod = admitted(snapshot, pod);
                    // What was promised stays counted even where it no longer fits.
                    if put(profile, snapshot, i, &pod).is_err() {
                        settle(snapshot, i, pod);
                    }
                }
            }
        }
    }

    /// Keeps only the promises of the Workloads `keep` says to.
    pub fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        self.held.retain(|k, _| keep(k));
    }

    /// How many promises are held.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    /// Whether no promise is held.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }
}

/// Placed pods per controlling owner (namespace, kind, name).
fn owners_placed(snapshot: &Snapshot) -> HashMap<(String, String, String), usize> {
    let mut out = HashMap::new();
    for node in &snapshot.nodes {
        for pod in &node.pods {
            if let Some((kind, name)) = &pod.controller {
                *out.entry((pod.namespace.clone(), kind.clone(), name.clone())).or_insert(0) += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
