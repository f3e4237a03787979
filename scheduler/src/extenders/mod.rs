//! kube-scheduler's HTTP extenders, called by `run`: filter after the profile's filters,
//! prioritize after its scores, bind in place of the Binding for the pods they are
//! interested in, with the configuration's `ignorable`, `weight`, `nodeCacheCapable`,
//! `managedResources`, `httpTimeout` and TLS settings.

mod http;
mod objects;
mod preempt;

use std::collections::HashMap;
use std::sync::Arc;

use algorithms::config::ExtenderConfig;
use algorithms::framework::{Candidate, Evaluation, Extenders};
use algorithms::{PodInfo, Snapshot, Status};
use extender::types::{
    ExtenderArgs, ExtenderBindingArgs, ExtenderBindingResult, ExtenderFilterResult, HostPriority,
    MAX_EXTENDER_PRIORITY, NodeList,
};
use k8s_openapi::api::core::v1::Pod;
use tracing::{debug, info};

pub use http::HttpExtender;
pub use objects::Objects;

/// The plugin name statuses from extenders carry, as kube-scheduler's diagnosis names them.
pub const EXTENDER: &str = "Extender";

/// kube-scheduler's highest node score, to which extender scores are scaled.
const MAX_NODE_SCORE: i64 = 100;

/// The configured extenders, in kube-scheduler's order (ignorable ones last), and the API
/// objects they are sent.
pub struct ExtenderSet {
    extenders: Vec<HttpExtender>,
    /// Pending pods and nodes as the API server serves them.
    pub objects: Objects,
}

impl ExtenderSet {
    /// The extenders of a configuration; `None` without any. Fails on an extender whose
    /// TLS files cannot be read.
    pub fn new(configs: &[ExtenderConfig]) -> Result<Option<Arc<Self>>, String> {
        if configs.is_empty() {
            return Ok(None);
        }
        let mut extenders: Vec<HttpExtender> = Vec::with_capacity(configs.len());
        for (i, cfg) in configs.iter().enumerate() {
            extenders.push(HttpExtender::new(cfg).map_err(|e| format!("extenders[{i}]: {e}"))?);
        }
        // kube-scheduler calls the ignorable extenders after the others.
        extenders.sort_by_key(HttpExtender::ignorable);
        Ok(Some(Arc::new(ExtenderSet { extenders, objects: Objects::default() })))
    }

    /// The extenders, in calling order.
    pub fn extenders(&self) -> &[HttpExtender] {
        &self.extenders
    }

    fn raw_pod(&self, pod: &PodInfo) -> Result<Arc<Pod>, Status> {
        self.objects.pod(&pod.key()).ok_or_else(|| {
            let mut st = Status::error(format!("pod {} is not in the extenders' object store", pod.key()));
            st.plugin = EXTENDER;
            st
        })
    }

    /// The arguments of a filter or prioritize call over the nodes `feasible`.
    fn args(&self, ext: &HttpExtender, pod: &Arc<Pod>, snapshot: &Snapshot, feasible: &[usize]) -> ExtenderArgs {
        let names = || feasible.iter().map(|&i| snapshot.nodes[i].name.as_str());
        if ext.node_cache_capable() {
            let names = names().map(str::to_string).collect();
            ExtenderArgs { pod: Some((**pod).clone()), nodes: None, node_names: Some(names) }
        } else {
            let items = self.objects.nodes(names()).into_iter().map(|n| (*n).clone()).collect();
            let list = NodeList { metadata: serde_json::json!({}), items };
            ExtenderArgs { pod: Some((**pod).clone()), nodes: Some(list), node_names: None }
        }
    }

    /// The extender that binds `pod`, kube-scheduler's `extendersBinding`: the first with
    /// a bind verb interested in the pod. Returns whether one bound it (or failed to and
    /// is not ignorable), with the error.
    pub fn bind(&self, pod: &PodInfo, node: &str) -> Option<Result<(), String>> {
        let raw = self.objects.pod(&pod.key());
        for ext in &self.extenders {
            let Some(verb) = ext.bind_verb() else { continue };
            if !raw.as_deref().is_some_and(|p| ext.interested(p)) {
                continue;
            }
            let args = ExtenderBindingArgs {
                pod_name: pod.name.clone(),
                pod_namespace: pod.namespace.clone(),
                pod_uid: pod.uid.clone(),
                node: node.to_string(),
            };
            let result = ext.send::<_, ExtenderBindingResult>(verb, &args).and_then(|r| match r.error.as_str() {
                "" => Ok(()),
                e => Err(e.to_string()),
            });
            match result {
                Err(e) if ext.ignorable() => {
                    info!(extender = ext.name(), error = %e, "skipping extender in bind as it returned an error and is ignorable");
                }
                r => return Some(r),
            }
        }
        None
    }
}

impl Extenders for ExtenderSet {
    fn applies_to(&self, pod: &PodInfo) -> bool {
        let Some(raw) = self.objects.pod(&pod.key()) else { return true };
        let judges = |e: &&HttpExtender| e.filter_verb().is_some() || e.prioritize_verb().is_some();
        self.extenders.iter().filter(judges).any(|e| e.interested(&raw))
    }

    fn filter(&self, pod: &PodInfo, snapshot: &Snapshot, ev: &mut Evaluation) {
        let raw = match self.raw_pod(pod) {
            Ok(p) => p,
            Err(st) => {
                ev.error = Some(st);
                return;
            }
        };
        for ext in &self.extenders {
            if ev.feasible.is_empty() {
                break;
            }
            let Some(verb) = ext.filter_verb() else { continue };
            if !ext.interested(&raw) {
                continue;
            }
            let args = self.args(ext, &raw, snapshot, &ev.feasible);
            let outcome = ext.send::<_, ExtenderFilterResult>(verb, &args).and_then(|r| passed(ext, r, snapshot, ev));
            match outcome {
                Ok(()) => {}
                Err(e) if ext.ignorable() => {
                    info!(extender = ext.name(), error = %e, "skipping extender as it returned an error and is ignorable");
                }
                Err(e) => {
                    let mut st = Status::error(e);
                    st.plugin = EXTENDER;
                    ev.error = Some(st);
                    return;
                }
            }
        }
    }

    fn preempt(
        &self,
        pod: &PodInfo,
        snapshot: &Snapshot,
        candidates: Vec<Candidate>,
    ) -> Result<Vec<Candidate>, String> {
        if !self.extenders.iter().any(|e| e.preempt_verb().is_some()) {
            return Ok(candidates);
        }
        let raw = self.raw_pod(pod).map_err(|st| st.message())?;
        preempt::narrow(&self.extenders, &raw, snapshot, candidates)
    }

    fn score(&self, pod: &PodInfo, snapshot: &Snapshot, feasible: &[usize]) -> Vec<i64> {
        let mut totals = vec![0i64; feasible.len()];
        let Ok(raw) = self.raw_pod(pod) else { return totals };
        let at: HashMap<&str, usize> =
            feasible.iter().enumerate().map(|(k, &i)| (snapshot.nodes[i].name.as_str(), k)).collect();
        for ext in &self.extenders {
            let Some(verb) = ext.prioritize_verb() else { continue };
            if !ext.interested(&raw) {
                continue;
            }
            let args = self.args(ext, &raw, snapshot, feasible);
            match ext.send::<_, Option<Vec<HostPriority>>>(verb, &args) {
                Ok(list) => {
                    for hp in list.unwrap_or_default() {
                        if let Some(&k) = at.get(hp.host.as_str()) {
                            totals[k] += hp.score * ext.weight() * (MAX_NODE_SCORE / MAX_EXTENDER_PRIORITY);
                        }
                    }
                }
                // As kube-scheduler: a failed prioritize gives no points and is not an error.
                Err(e) => debug!(extender = ext.name(), error = %e, "extender's prioritize failed; no score from it"),
            }
        }
        totals
    }
}

/// Applies a filter answer: the nodes it kept stay feasible, those it names as failed are
/// rejected with its reason (unresolvable ones first), the rest are dropped unnamed.
fn passed(ext: &HttpExtender, r: ExtenderFilterResult, snapshot: &Snapshot, ev: &mut Evaluation) -> Result<(), String> {
    if !r.error.is_empty() {
        return Err(r.error);
    }
    let sent: HashMap<&str, usize> = ev.feasible.iter().map(|&i| (snapshot.nodes[i].name.as_str(), i)).collect();
    let kept: Vec<String> = match (ext.node_cache_capable(), r.node_names, r.nodes) {
        (true, Some(names), _) => {
            if let Some(n) = names.iter().find(|n| !sent.contains_key(n.as_str())) {
                return Err(format!(
                    "extender {:?} claims a filtered node {n:?} which is not found in the input node list",
                    ext.name()
                ));
            }
            names
        }
        (_, _, Some(list)) => list.items.into_iter().filter_map(|n| n.metadata.name).collect(),
        _ => Vec::new(),
    };
    let kept: std::collections::HashSet<&str> = kept.iter().map(String::as_str).collect();
    for (name, why) in &r.failed_and_unresolvable_nodes {
        if let Some(&i) = sent.get(name.as_str())
            && !kept.contains(name.as_str())
        {
            let mut st = Status::unresolvable(why.clone());
            st.plugin = EXTENDER;
            ev.rejected.push(i, st);
        }
    }
    for (name, why) in &r.failed_nodes {
        if r.failed_and_unresolvable_nodes.contains_key(name) {
            continue;
        }
        if let Some(&i) = sent.get(name.as_str())
            && !kept.contains(name.as_str())
        {
            let mut st = Status::unschedulable(why.clone());
            st.plugin = EXTENDER;
            ev.rejected.push(i, st);
        }
    }
    ev.feasible.retain(|&i| kept.contains(snapshot.nodes[i].name.as_str()));
    Ok(())
}

#[cfg(test)]
mod tests;
