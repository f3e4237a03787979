//! CapacityScheduling: scheduler-plugins' quota plugin over ElasticQuotas
//! (`crate::quotas`), one per namespace.
//!
//! PreFilter refuses a pod of a namespace with a quota when its quota's use, the pod's
//! request and the requests of pods nominated in that namespace at the pod's priority or
//! above would exceed the quota's `max`; or when every quota's use together, with the pod
//! and the nominated pods of quotas still within their `min`, would exceed every
//! quota's `min` together (a namespace borrows only what others leave idle). A pod of a
//! namespace without a quota is not its concern. What a namespace uses is kept by the
//! cache as it places and removes pods (`owner.rs`): Reserve and Unreserve are the
//! cache's assume and forget. A rejected pod is tried again when a placed pod goes away
//! or a quota changes. PostFilter preempts under the quotas' rules (`preemption.rs`).

#[cfg(test)]
mod dra_tests;
mod owner;
pub mod preemption;
#[cfg(test)]
mod preemption_tests;
mod report;
#[cfg(test)]
mod tests;

pub use owner::Quotas;

use super::roles::Built;
use crate::dra::charge::is_devices_key;
use crate::events::{ClusterEvent, QueueingHint};
use crate::framework::{FilterPlugin, Limits, PluginState, PreFilterOutcome};
use crate::node_info::NodeInfo;
use crate::pod_info::PodInfo;
use crate::quotas::kinds::ELASTIC_QUOTA;
use crate::quotas::{QuotaObjects, QuotaState};
use crate::resource::Resource;
use crate::snapshot::Snapshot;
use crate::status::Status;

/// Plugin name.
pub const NAME: &str = "CapacityScheduling";

/// Builds the plugin (it takes no args): PreFilter and PostFilter.
pub fn build(
    _: &str,
    _: Option<&serde_json::Value>,
    _: crate::features::FeatureGates,
) -> Result<Built, super::ArgsError> {
    Ok(super::roles::filter_and_post_filter(CapacityScheduling))
}

/// The plugin.
#[derive(Debug, Default, Clone, Copy)]
pub struct CapacityScheduling;

/// What a pod asks of quotas: its own request, with the pods nominated ahead of it
/// that its quota and the aggregate must leave room for.
#[derive(Debug, Clone, PartialEq)]
pub struct Asked {
    /// The pod's request.
    pub pod: Resource,
    /// With the nominated pods of its namespace at its priority or above.
    pub in_quota: Resource,
    /// With those and the nominated pods of other quotas within their `min`.
    pub in_all: Resource,
}

/// What `pod` asks of the quotas in `state`, with the pods nominated in `snapshot`.
pub fn asked(state: &QuotaState, pod: &PodInfo, snapshot: &Snapshot) -> Asked {
    let request = &pod.requests.requests;
    let (mut in_quota, mut in_all) = (request.clone(), request.clone());
    for p in snapshot.nominated.values().flatten() {
        if p.namespace == pod.namespace && p.name == pod.name {
            continue;
        }
        let Some(quota) = state.quota(&p.namespace) else { continue };
        if p.namespace == pod.namespace {
            if p.priority >= pod.priority {
                in_quota.add(&p.requests.requests);
                in_all.add(&p.requests.requests);
            }
        } else if !quota.over_min(state.used(&p.namespace)) {
            in_all.add(&p.requests.requests);
        }
    }
    Asked { pod: request.clone(), in_quota, in_all }
}

/// Why quotas refuse `pod`, if they do.
pub fn refusal(state: &QuotaState, pod: &PodInfo, snapshot: &Snapshot) -> Option<Status> {
    state.quota(&pod.namespace)?;
    refusal_for(state, pod, &asked(state, pod, snapshot))
}

/// Why quotas refuse `pod`, which asks `asked` of them, if they do.
fn refusal_for(state: &QuotaState, pod: &PodInfo, asked: &Asked) -> Option<Status> {
    let quota = state.quota(&pod.namespace)?;
    let used = state.used(&pod.namespace);
    let (ns, name) = (&pod.namespace, &pod.name);
    if quota.over_max_with(used, &asked.in_quota) {
        let message = format!("Pod {ns}/{name} is rejected in PreFilter because ElasticQuota {ns} is more than Max");
        return Some(Status::unschedulable(message).with_detail_fn(|| detail(state, quota, asked)));
    }
    if state.aggregated_over_min_with(&asked.in_all) {
        let message =
            format!("Pod {ns}/{name} is rejected in PreFilter because total ElasticQuota used is more than min");
        return Some(Status::unschedulable(message).with_detail_fn(|| detail(state, quota, asked)));
    }
    None
}

/// How many more devices (by the resources they count as, see
/// [`crate::dra::charge`]) the claims of `pod` may be given: what its quota's `max`
/// leaves beyond its use and what it asks, and what every quota's `min` together leaves
/// beyond every quota's use and what it asks with the nominated pods (a DeviceClass's
/// devices only where some quota's `min` names them), `pod` asking `asked` of them.
/// `None` for a pod without claims or quota.
pub fn device_limits(state: &QuotaState, pod: &PodInfo, asked: &Asked) -> Option<Limits> {
    let quota = state.quota(&pod.namespace)?;
    if pod.resource_claims.is_empty() {
        return None;
    }
    let mut in_quota = state.used(&pod.namespace).clone();
    in_quota.add(&asked.in_quota);
    let max = quota.max.clone();
    let (mut all_used, all_min) = state.aggregate();
    all_used.add(&asked.in_all);
    Some(Limits::new(format!("ElasticQuota {}", quota.key()), move |name| {
        let by_max = max.scalar_value(name).map(|m| m.saturating_sub(in_quota.get(name)));
        let min = all_min.scalar_value(name).or((!is_devices_key(name)).then_some(0));
        let by_min = min.map(|m| m.saturating_sub(all_used.get(name)));
        match (by_max, by_min) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }))
}

/// The quota's figures, for `explain`.
fn detail(state: &QuotaState, quota: &crate::quotas::Quota, asked: &Asked) -> String {
    let used = state.used(&quota.namespace);
    format!(
        "ElasticQuota {}: used {}; min {}; max {}; the pod requests {}",
        quota.key(),
        amounts(used, false),
        amounts(&quota.min, true),
        limits(&quota.max),
        amounts(&asked.pod, false)
    )
}

/// `cpu=2, memory=1Gi, nvidia.com/gpu=4`: unlimited amounts left out, and zeros unless
/// `zeros` (a quota's `min`, where 0 guarantees nothing).
pub fn amounts(r: &Resource, zeros: bool) -> String {
    use crate::resource::{CPU, EPHEMERAL_STORAGE, MEMORY, format_amount};
    let fixed = [(CPU, r.milli_cpu), (MEMORY, r.memory), (EPHEMERAL_STORAGE, r.ephemeral_storage)];
    let named = r.scalar.iter().map(|(n, v)| (n.as_str(), *v));
    let parts: Vec<String> = fixed
        .into_iter()
        .chain(named)
        .filter(|&(_, v)| v != i64::MAX && (zeros || v != 0))
        .map(|(n, v)| format!("{n}={}", format_amount(n, v)))
        .collect();
    if parts.is_empty() { "none".into() } else { parts.join(", ") }
}

/// What `used` takes beyond `min`, resource by resource (none where it stays within).
pub fn beyond(used: &Resource, min: &Resource) -> Resource {
    let mut out = Resource {
        milli_cpu: (used.milli_cpu - min.milli_cpu).max(0),
        memory: (used.memory - min.memory).max(0),
        ephemeral_storage: (used.ephemeral_storage - min.ephemeral_storage).max(0),
        ..Default::default()
    };
    for (name, v) in &used.scalar {
        out.set_value(name, (v - min.get(name)).max(0));
    }
    out
}

/// A quota's `max` for people: its amounts, or `unlimited`.
pub fn limits(max: &Resource) -> String {
    match amounts(max, true) {
        none if none == "none" => "unlimited".into(),
        some => some,
    }
}

impl FilterPlugin for CapacityScheduling {
    fn name(&self) -> &'static str {
        NAME
    }

    fn pre_filter(&self, pod: &PodInfo, snapshot: &Snapshot) -> PreFilterOutcome {
        let state = snapshot.objects.quotas();
        if state.quota(&pod.namespace).is_none() {
            return PreFilterOutcome::skip();
        }
        let asked = asked(state, pod, snapshot);
        if let Some(status) = refusal_for(state, pod, &asked) {
            return PreFilterOutcome::reject(status);
        }
        // Quotas judge the pod, not a node: there is nothing to filter; the devices its
        // claims get stay within them.
        match device_limits(state, pod, &asked) {
            Some(limits) => PreFilterOutcome::skip().with_limits(limits),
            None => PreFilterOutcome::skip(),
        }
    }

    fn filter(&self, _: &PluginState, _: &PodInfo, _: &NodeInfo) -> Status {
        Status::success()
    }

    fn after_eviction(
        &self,
        objects: &crate::objects::ClusterObjects,
        evicted: &[std::sync::Arc<PodInfo>],
    ) -> Option<crate::objects::ClusterObjects> {
        let quotas = objects.quotas();
        if !evicted.iter().any(|p| quotas.governs(p)) {
            return None;
        }
        let mut after = objects.clone();
        for p in evicted {
            after.quotas_mut().discharge_pod(p);
        }
        Some(after)
    }

    fn explain(&self, pod: &PodInfo, snapshot: &Snapshot) -> Vec<String> {
        let state = snapshot.objects.quotas();
        let Some(quota) = state.quota(&pod.namespace) else { return Vec::new() };
        let asked = asked(state, pod, snapshot);
        let mut with = state.used(&pod.namespace).clone();
        with.add(&asked.in_quota);
        vec![format!(
            "ElasticQuota {} (namespace {}): {}; with the pod it would use {}, borrowing {} beyond its min",
            quota.key(),
            quota.namespace,
            detail(state, quota, &asked).split_once(": ").map_or("", |(_, rest)| rest),
            amounts(&with, false),
            amounts(&beyond(&with, &quota.min), false)
        )]
    }

    fn queueing_hint(&self, _pod: &PodInfo, event: &ClusterEvent) -> QueueingHint {
        QueueingHint::from_bool(match event {
            // A pod that leaves frees its quota's use and the aggregate's.
            ClusterEvent::PodDeleted(_) => true,
            ClusterEvent::Object(e) => e.kind == ELASTIC_QUOTA,
            _ => false,
        })
    }
}
