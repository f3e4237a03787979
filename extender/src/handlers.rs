//! The verbs, as plain functions from request to response (the router wraps them).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use algorithms::framework::{Evaluation, filter_candidates, score_nodes};
use algorithms::plugins::device_packing::DevicePacking;
use algorithms::preemption::{Judge, select_victims_with};
use algorithms::{Code, NodeInfo, PodInfo, Snapshot};
use k8s_openapi::api::core::v1 as core;

use crate::Extender;
use crate::devices;
use crate::types::*;

/// A request the extender cannot serve: answered with this status and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status.
    pub status: u16,
    /// Message for the caller.
    pub message: String,
}

impl ApiError {
    /// 400 Bad Request.
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError { status: 400, message: message.into() }
    }
}

/// Message returned for `NodeNames` without cluster access.
pub const NEEDS_CLUSTER: &str = "the request carries NodeNames (nodeCacheCapable: true), which needs cluster access: start the extender with --kubeconfig or inside the cluster";

fn parse_pod(pod: Option<core::Pod>) -> Result<PodInfo, ApiError> {
    let pod = pod.ok_or_else(|| ApiError::bad_request("Pod is required"))?;
    PodInfo::from_pod(&pod).map_err(|e| ApiError::bad_request(format!("invalid Pod: {e}")))
}

/// The snapshot to judge against and the candidate node indexes in it.
struct Candidates {
    snapshot: Arc<Snapshot>,
    indexes: Vec<usize>,
    /// Sent nodes that cannot be judged, with the reason.
    unknown: BTreeMap<String, String>,
}

/// Refuses nameless nodes and names sent twice: the answer must be a partition of what
/// was sent, which a repeated name cannot be.
fn check_names(args: &ExtenderArgs) -> Result<(), ApiError> {
    let names: Vec<&str> = match (&args.nodes, &args.node_names) {
        (Some(list), _) => {
            let mut names = Vec::with_capacity(list.items.len());
            for (i, n) in list.items.iter().enumerate() {
                match n.metadata.name.as_deref() {
                    Some(name) if !name.is_empty() => names.push(name),
                    _ => return Err(ApiError::bad_request(format!("Nodes.items[{i}] has no metadata.name"))),
                }
            }
            names
        }
        (None, Some(names)) => names.iter().map(String::as_str).collect(),
        (None, None) => return Ok(()),
    };
    let mut seen = HashSet::with_capacity(names.len());
    let mut twice: Vec<&str> = names.into_iter().filter(|n| !seen.insert(*n)).collect();
    if twice.is_empty() {
        return Ok(());
    }
    twice.sort_unstable();
    twice.dedup();
    Err(ApiError::bad_request(format!("node names sent more than once: {}", twice.join(", "))))
}

fn candidates(ext: &Extender, args: &ExtenderArgs) -> Result<Result<Candidates, String>, ApiError> {
    check_names(args)?;
    let cached = ext.cluster.as_ref().map(|c| c.snapshot());
    let mut unknown = BTreeMap::new();
    if let Some(list) = &args.nodes {
        if let Some(snap) = cached {
            let mut indexes = Vec::new();
            for n in &list.items {
                let name = n.metadata.name.clone().unwrap_or_default();
                match snap.index.get(&name) {
                    Some(&i) => indexes.push(i),
                    None => {
                        unknown.insert(name, "node is not in the extender's cache yet".to_string());
                    }
                }
            }
            return Ok(Ok(Candidates { snapshot: snap, indexes, unknown }));
        }
        let mut infos = Vec::new();
        for (i, n) in list.items.iter().enumerate() {
            match NodeInfo::from_node(n) {
                Ok(info) => infos.push(Arc::new(info)),
                Err(e) => {
                    let name = n.metadata.name.clone().unwrap_or_else(|| format!("(item {i})"));
                    unknown.insert(name, format!("invalid node: {e}"));
                }
            }
        }
        let indexes = (0..infos.len()).collect();
        return Ok(Ok(Candidates { snapshot: Arc::new(Snapshot::new(infos, Default::default())), indexes, unknown }));
    }
    let Some(names) = &args.node_names else {
        return Err(ApiError::bad_request("Nodes or NodeNames is required"));
    };
    let Some(snap) = cached else { return Ok(Err(NEEDS_CLUSTER.to_string())) };
    let mut indexes = Vec::new();
    for name in names {
        match snap.index.get(name) {
            Some(&i) => indexes.push(i),
            None => {
                unknown.insert(name.clone(), "node is not in the extender's cache".to_string());
            }
        }
    }
    Ok(Ok(Candidates { snapshot: snap, indexes, unknown }))
}

/// `POST /filter`.
pub fn filter(ext: &Extender, args: ExtenderArgs) -> Result<ExtenderFilterResult, ApiError> {
    let pod = parse_pod(args.pod.clone())?;
    let c = match candidates(ext, &args)? {
        Ok(c) => c,
        Err(error) => return Ok(ExtenderFilterResult { error, ..Default::default() }),
    };
    let ev = filter_candidates(&ext.profile, &pod, &c.snapshot, Some(&c.indexes));
    let mut result = ExtenderFilterResult { failed_and_unresolvable_nodes: c.unknown, ..Default::default() };
    if let Some(err) = &ev.error {
        result.error = err.message();
        return Ok(result);
    }
    for (i, st) in ev.rejected.iter() {
        let name = c.snapshot.nodes[i].name.clone();
        let target = if st.code == Code::UnschedulableAndUnresolvable {
            &mut result.failed_and_unresolvable_nodes
        } else {
            &mut result.failed_nodes
        };
        target.insert(name, st.message());
    }
    let passed: HashSet<&str> = ev.feasible.iter().map(|&i| c.snapshot.nodes[i].name.as_str()).collect();
    match &args.nodes {
        Some(list) => {
            let items = list
                .items
                .iter()
                .filter(|n| n.metadata.name.as_deref().is_some_and(|name| passed.contains(&name)))
                .cloned()
                .collect();
            result.nodes = Some(NodeList { metadata: list.metadata.clone(), items });
        }
        None => {
            result.node_names = Some(ev.feasible.iter().map(|&i| c.snapshot.nodes[i].name.clone()).collect());
        }
    }
    Ok(result)
}

/// `POST /prioritize`: the profile's weighted total scaled to 0..=10, or, for pods that
/// request managed devices, the device best-fit score.
pub fn prioritize(ext: &Extender, args: ExtenderArgs) -> Result<Vec<HostPriority>, ApiError> {
    let pod = parse_pod(args.pod.clone())?;
    let c = match candidates(ext, &args)? {
        Ok(c) => c,
        Err(message) => return Err(ApiError { status: 422, message }),
    };
    let mut out: Vec<HostPriority> = c.unknown.keys().map(|h| HostPriority { host: h.clone(), score: 0 }).collect();
    if devices::requests_any(&pod, &ext.managed) {
        let packing = DevicePacking::for_resources(&ext.managed);
        out.extend(c.indexes.iter().map(|&i| {
            let n = &c.snapshot.nodes[i];
            HostPriority { host: n.name.clone(), score: devices::score(&packing, &pod, n) }
        }));
        return Ok(out);
    }
    let mut ev = Evaluation { num_nodes: c.snapshot.nodes.len(), feasible: c.indexes.clone(), ..Default::default() };
    score_nodes(&ext.profile, &pod, &c.snapshot, &mut ev);
    if let Some(err) = ev.error {
        return Err(ApiError { status: 500, message: err.message() });
    }
    let max = 100 * ext.profile.scores.iter().map(|s| s.weight).sum::<i64>();
    for (k, &i) in c.indexes.iter().enumerate() {
        let total = ev.totals.get(k).copied().unwrap_or(0);
        let score = if max > 0 { (total * MAX_EXTENDER_PRIORITY + max / 2) / max } else { 0 };
        out.push(HostPriority { host: c.snapshot.nodes[i].name.clone(), score: score.clamp(0, MAX_EXTENDER_PRIORITY) });
    }
    Ok(out)
}

/// `POST /preempt`: with cluster access, runs DefaultPreemption's victim selection on
/// each node kube-scheduler proposes (over this scheduler's view, managed devices and
/// PodDisruptionBudgets included) and answers with the victims it would evict there;
/// nodes where evicting lower-priority pods cannot make the pod fit are dropped. Without
/// cluster access the candidates cannot be judged and are returned as they came.
pub fn preempt(ext: &Extender, args: ExtenderPreemptionArgs) -> Result<ExtenderPreemptionResult, ApiError> {
    let pod = parse_pod(args.pod.clone())?;
    let mut proposed: BTreeMap<String, MetaVictims> = args.node_name_to_meta_victims.clone().unwrap_or_default();
    for (node, v) in args.node_name_to_victims.iter().flatten() {
        let pods = v.pods.iter().map(|p| MetaPod { uid: p.metadata.uid.clone().unwrap_or_default() }).collect();
        proposed.insert(node.clone(), MetaVictims { pods, num_pdb_violations: v.num_pdb_violations });
    }
    let Some(cluster) = &ext.cluster else {
        return Ok(ExtenderPreemptionResult { node_name_to_meta_victims: proposed });
    };
    let mut snap = (*cluster.snapshot()).clone();
    let budgets = snap.budgets.clone();
    let judge = Judge::new(&ext.profile, &pod, &snap);
    let mut agreed = BTreeMap::new();
    for node in proposed.into_keys() {
        let Some(&i) = snap.index.get(&node) else { continue };
        if let Ok((victims, violations)) = select_victims_with(&judge, &pod, &mut snap, i, &budgets) {
            let pods = victims.iter().map(|p| MetaPod { uid: p.uid.clone() }).collect();
            agreed.insert(node, MetaVictims { pods, num_pdb_violations: violations as i64 });
        }
    }
    Ok(ExtenderPreemptionResult { node_name_to_meta_victims: agreed })
}
