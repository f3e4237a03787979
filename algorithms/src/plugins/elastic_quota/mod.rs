//! ElasticQuota: quota trees with Koordinator's conventions (`crate::quotas::tree`) over
//! the same ElasticQuotas CapacityScheduling reads.
//!
//! Each quota's runtime share of the cluster (`crate::quotas::runtime`) follows from the
//! guarantees, the weights and the demand of every quota: what their placed pods and
//! the pods waiting in the scheduling queue ask for. PreFilter admits a pod while its
//! quota's use and its request stay within that share in every resource the quota's `max`
//! names, with Koordinator's message; a pod no quota governs is not its concern. What a
//! quota uses is kept by the cache as it places and removes pods (the quotas' owner).
//! PostFilter reclaims (`preemption.rs`).

pub mod preemption;
#[cfg(test)]
mod tests;

use super::roles::Built;
use crate::events::{ClusterEvent, QueueingHint};
use crate::framework::{FilterPlugin, Limits, PluginState, PreFilterOutcome};
use crate::node_info::NodeInfo;
use crate::pod_info::PodInfo;
use crate::quotas::kinds::ELASTIC_QUOTA;
use crate::quotas::{QuotaObjects, QuotaState, runtime};
use crate::resource::{Resource, format_amount};
use crate::snapshot::Snapshot;
use crate::status::Status;

/// Plugin name (Koordinator's).
pub const NAME: &str = "ElasticQuota";

/// Builds the plugin (it takes no args): PreFilter and PostFilter.
pub fn build(
    _: &str,
    _: Option<&serde_json::Value>,
    _: crate::features::FeatureGates,
) -> Result<Built, super::ArgsError> {
    Ok(super::roles::filter_and_post_filter(ElasticQuota))
}

/// The plugin.
#[derive(Debug, Default, Clone, Copy)]
pub struct ElasticQuota;

/// What the nodes of `snapshot` can hold together.
pub fn cluster_total(snapshot: &Snapshot) -> Resource {
    let mut total = Resource::default();
    for n in &snapshot.nodes {
        total.add(&n.allocatable);
    }
    total
}

/// A quota's figures for one pod: its runtime share, its use and the pod's request, in
/// the resources its `max` names.
#[derive(Debug, Clone, PartialEq)]
pub struct Standing {
    /// The quota's name.
    pub quota: String,
    /// The resources its `max` names.
    pub limited: Vec<String>,
    /// Its runtime share.
    pub runtime: Resource,
    /// What its placed pods request.
    pub used: Resource,
    /// Its guarantee.
    pub min: Resource,
    /// What its placed pods that may not be evicted for quotas request.
    pub non_preemptible: Resource,
}

impl Standing {
    /// The resources in which `request` does not fit: use and request over runtime.
    pub fn exceeded(&self, request: &Resource) -> Vec<&str> {
        self.limited
            .iter()
            .filter(|r| self.used.get(r).saturating_add(request.get(r)) > self.runtime.get(r))
            .map(String::as_str)
            .collect()
    }
}

/// The standing of `pod`'s quota, if a quota of a tree governs it.
pub fn standing(state: &QuotaState, pod: &PodInfo, snapshot: &Snapshot) -> Option<Standing> {
    let name = state.tree_quota_of(pod)?;
    let quota = state.named(name)?;
    let shares = runtime::shares(state, &cluster_total(snapshot));
    Some(Standing {
        quota: name.to_string(),
        limited: quota.tree.limited.clone(),
        runtime: shares.get(name).cloned().unwrap_or_default(),
        used: state.used_by(name).clone(),
        min: quota.min.clone(),
        non_preemptible: state.non_preemptible_used(name).clone(),
    })
}

/// What a quota and the quotas under it hold by `get` (a parent's use is its children's).
fn subtree(state: &QuotaState, name: &str, get: for<'a> fn(&'a QuotaState, &str) -> &'a Resource) -> Resource {
    let mut total = Resource::default();
    let mut todo = vec![name.to_string()];
    let mut seen: Vec<String> = Vec::new();
    while let Some(n) = todo.pop() {
        if seen.contains(&n) {
            continue;
        }
        total.add(get(state, &n));
        todo.extend(
            state.all_named().filter(|q| state.parent_of(q).is_some_and(|p| p.name == n)).map(|q| q.name.clone()),
        );
        seen.push(n);
    }
    total
}

/// `cpu:2,memory:1Gi` over `names`.
fn list(r: &Resource, names: &[String]) -> String {
    names.iter().map(|n| format!("{n}:{}", format_amount(n, r.get(n)))).collect::<Vec<_>>().join(",")
}

/// Why the quota tree refuses `pod`, if it does.
pub fn refusal(state: &QuotaState, pod: &PodInfo, snapshot: &Snapshot) -> Option<Status> {
    let s = standing(state, pod, snapshot)?;
    refusal_at(&s, pod).or_else(|| non_preemptible_refusal(&s, pod))
}

/// How many more of each resource its quota's `max` names the devices of `pod`'s
/// claims may take: what the runtime share leaves beyond the quota's use and the pod's
/// own request.
fn device_limits(s: Standing, pod: &PodInfo) -> Limits {
    let request = pod.requests.requests.clone();
    Limits::new(format!("the runtime share of quota {}", s.quota), move |name| {
        s.limited.iter().any(|r| r == name).then(|| s.runtime.get(name) - s.used.get(name) - request.get(name))
    })
}

/// Why the quota tree refuses `pod` at its quota's standing `s`, if it does.
fn refusal_at(s: &Standing, pod: &PodInfo) -> Option<Status> {
    let request = &pod.requests.requests;
    let exceeded = s.exceeded(request);
    if exceeded.is_empty() {
        return None;
    }
    let message = format!(
        "Insufficient quotas, quotaName: {}, runtime: {}, used: {}, pod's request: {}, exceedDimensions: [{}]",
        s.quota,
        list(&s.runtime, &s.limited),
        list(&s.used, &s.limited),
        list(request, &s.limited),
        exceeded.join(" ")
    );
    Some(Status::unschedulable(message))
}

/// Why the quota tree refuses `pod`, which may not be evicted for quotas, at its quota's
/// standing `s`: such pods of a quota stay within its `min`, in the resources the pod
/// requests.
fn non_preemptible_refusal(s: &Standing, pod: &PodInfo) -> Option<Status> {
    if crate::quotas::tree::preemptible(pod) {
        return None;
    }
    let request = &pod.requests.requests;
    let names = requested(request);
    let exceeded: Vec<&str> = names
        .iter()
        .filter(|r| s.non_preemptible.get(r).saturating_add(request.get(r)) > s.min.get(r))
        .map(String::as_str)
        .collect();
    if exceeded.is_empty() {
        return None;
    }
    let message = format!(
        "Insufficient non-preemptible quotas, quotaName: {}, min: {}, nonPreemptibleUsed: {}, pod's request: {}, exceedDimensions: [{}]",
        s.quota,
        list(&s.min, &names),
        list(&s.non_preemptible, &names),
        list(request, &names),
        exceeded.join(" ")
    );
    Some(Status::unschedulable(message))
}

/// The resources a request names (CPU, memory and ephemeral storage when above 0).
fn requested(r: &Resource) -> Vec<String> {
    use crate::resource::{CPU, EPHEMERAL_STORAGE, MEMORY};
    let fixed = [(CPU, r.milli_cpu), (MEMORY, r.memory), (EPHEMERAL_STORAGE, r.ephemeral_storage)];
    fixed
        .into_iter()
        .filter(|&(_, v)| v > 0)
        .map(|(n, _)| n.to_string())
        .chain(r.scalar.iter().map(|(n, _)| n.clone()))
        .collect()
}

impl FilterPlugin for ElasticQuota {
    fn name(&self) -> &'static str {
        NAME
    }

    fn pre_filter(&self, pod: &PodInfo, snapshot: &Snapshot) -> PreFilterOutcome {
        let Some(s) = standing(snapshot.objects.quotas(), pod, snapshot) else { return PreFilterOutcome::skip() };
        if let Some(status) = refusal_at(&s, pod).or_else(|| non_preemptible_refusal(&s, pod)) {
            return PreFilterOutcome::reject(status);
        }
        // Quotas judge the pod, not a node; the devices its claims get stay within them.
        match pod.resource_claims.is_empty() {
            true => PreFilterOutcome::skip(),
            false => PreFilterOutcome::skip().with_limits(device_limits(s, pod)),
        }
    }

    fn filter(&self, _: &PluginState, _: &PodInfo, _: &NodeInfo) -> Status {
        Status::success()
    }

    fn explain(&self, pod: &PodInfo, snapshot: &Snapshot) -> Vec<String> {
        let state = snapshot.objects.quotas();
        let Some(leaf) = state.tree_quota_of(pod).and_then(|n| state.named(n)) else { return Vec::new() };
        let shares = runtime::shares(state, &cluster_total(snapshot));
        let mut path = vec![leaf];
        while let Some(parent) = path.last().and_then(|q| state.parent_of(q)) {
            if path.iter().any(|q| q.name == parent.name) {
                break;
            }
            path.push(parent);
        }
        let names = &leaf.tree.limited;
        let mut lines: Vec<String> = path
            .iter()
            .rev()
            .map(|q| {
                format!(
                    "quota {}: min {}, max {}, used {}, waiting {}, runtime share {}",
                    q.name,
                    list(&q.min, names),
                    list(&q.max, names),
                    list(&subtree(state, &q.name, QuotaState::used_by), names),
                    list(&subtree(state, &q.name, QuotaState::waiting), names),
                    list(&shares.get(&q.name).cloned().unwrap_or_default(), names)
                )
            })
            .collect();
        let mut with = state.used_by(&leaf.name).clone();
        with.add(&pod.requests.requests);
        lines.push(format!(
            "the pod requests {}: {} would use {}, borrowing {} beyond its min",
            list(&pod.requests.requests, names),
            leaf.name,
            list(&with, names),
            list(&super::capacity_scheduling::beyond(&with, &leaf.min), names)
        ));
        lines
    }

    fn counts_waiting_pods(&self) -> bool {
        true
    }

    fn after_eviction(
        &self,
        objects: &crate::objects::ClusterObjects,
        evicted: &[std::sync::Arc<PodInfo>],
    ) -> Option<crate::objects::ClusterObjects> {
        super::capacity_scheduling::CapacityScheduling.after_eviction(objects, evicted)
    }

    fn queueing_hint(&self, _pod: &PodInfo, event: &ClusterEvent) -> QueueingHint {
        QueueingHint::from_bool(match event {
            // A pod that leaves frees its quota's use; a node added grows every share.
            ClusterEvent::PodDeleted(_) | ClusterEvent::NodeAdded(_) => true,
            ClusterEvent::Object(e) => e.kind == ELASTIC_QUOTA,
            _ => false,
        })
    }
}
