//! The preempt verb: extenders narrow preemption's candidate nodes and victims.

use std::collections::BTreeMap;
use std::sync::Arc;

use algorithms::framework::Candidate;
use algorithms::preemption::more_important;
use algorithms::{PodInfo, Snapshot};
use extender::types::{ExtenderPreemptionArgs, ExtenderPreemptionResult, MetaPod, MetaVictims, Victims};
use k8s_openapi::api::core::v1::{Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tracing::info;

use super::HttpExtender;

/// Victims on a node, by node name: the pods and the budget violations.
type VictimsMap = BTreeMap<String, (Vec<Arc<PodInfo>>, usize)>;

/// kube-scheduler's `callExtenders`: each interested extender with a preempt verb, in
/// order, is given the candidates left by the one before and answers with those it
/// agrees with.
pub(super) fn narrow(
    extenders: &[HttpExtender],
    pod: &Arc<Pod>,
    snapshot: &Snapshot,
    candidates: Vec<Candidate>,
) -> Result<Vec<Candidate>, String> {
    let mut map: VictimsMap =
        candidates.into_iter().map(|c| (snapshot.nodes[c.node].name.clone(), (c.victims, c.pdb_violations))).collect();
    for ext in extenders {
        if map.is_empty() {
            break;
        }
        let Some(verb) = ext.preempt_verb() else { continue };
        if !ext.interested(pod) {
            continue;
        }
        let answer = ext
            .send::<_, ExtenderPreemptionResult>(verb, &args(ext, pod, &map))
            .and_then(|r| victims_of(ext, r, snapshot));
        let mut next = match answer {
            Ok(next) => next,
            Err(e) if ext.ignorable() => {
                info!(extender = ext.name(), error = %e, "skipped extender as it returned an error and is ignorable");
                continue;
            }
            Err(e) => return Err(e),
        };
        if let Some(node) = next.iter().find(|(_, (v, _))| v.is_empty()).map(|(n, _)| n.clone()) {
            if !ext.ignorable() {
                return Err(format!("expected at least one victim pod on node {node:?}"));
            }
            next.retain(|_, (v, _)| !v.is_empty());
        }
        map = next;
    }
    Ok(map
        .into_iter()
        .filter_map(|(name, (mut victims, pdb_violations))| {
            victims.sort_by(|a, b| more_important(a, b));
            Some(Candidate { node: *snapshot.index.get(&name)?, victims, pdb_violations })
        })
        .collect())
}

/// The request: victims by UID for an extender with its own node cache, else as pods.
fn args(ext: &HttpExtender, pod: &Arc<Pod>, map: &VictimsMap) -> ExtenderPreemptionArgs {
    let pdb = |n: usize| n as i64;
    if ext.node_cache_capable() {
        let meta = map
            .iter()
            .map(|(node, (victims, v))| {
                let pods = victims.iter().map(|p| MetaPod { uid: p.uid.clone() }).collect();
                (node.clone(), MetaVictims { pods, num_pdb_violations: pdb(*v) })
            })
            .collect();
        ExtenderPreemptionArgs {
            pod: Some((**pod).clone()),
            node_name_to_victims: None,
            node_name_to_meta_victims: Some(meta),
        }
    } else {
        let full = map
            .iter()
            .map(|(node, (victims, v))| {
                let pods = victims.iter().map(|p| victim_pod(p)).collect();
                (node.clone(), Victims { pods, num_pdb_violations: pdb(*v) })
            })
            .collect();
        ExtenderPreemptionArgs {
            pod: Some((**pod).clone()),
            node_name_to_victims: Some(full),
            node_name_to_meta_victims: None,
        }
    }
}

/// A victim as sent to an extender without a node cache: its identity, labels, node and
/// priority (the scheduler's cache does not keep running pods' whole objects).
fn victim_pod(p: &PodInfo) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(p.name.clone()),
            namespace: Some(p.namespace.clone()),
            uid: Some(p.uid.clone()),
            labels: Some(p.labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: p.node_name.clone(),
            priority: Some(p.priority),
            scheduler_name: Some(p.scheduler_name.clone()),
            ..Default::default()
        }),
        status: None,
    }
}

/// The answer's victims, found by UID among the pods on their nodes.
fn victims_of(ext: &HttpExtender, r: ExtenderPreemptionResult, snapshot: &Snapshot) -> Result<VictimsMap, String> {
    let mut out = VictimsMap::new();
    for (node, meta) in r.node_name_to_meta_victims {
        let info = snapshot.node(&node).ok_or_else(|| format!("nodeinfo not found for node name {node:?}"))?;
        let mut victims = Vec::with_capacity(meta.pods.len());
        for m in &meta.pods {
            let pod = info.pods.iter().find(|p| p.uid == m.uid).ok_or_else(|| {
                format!(
                    "extender: {} claims to preempt pod (UID: {}) on node: {node}, but the pod is not found on that node",
                    ext.name(),
                    m.uid
                )
            })?;
            victims.push(pod.clone());
        }
        out.insert(node, (victims, meta.num_pdb_violations.max(0) as usize));
    }
    Ok(out)
}
