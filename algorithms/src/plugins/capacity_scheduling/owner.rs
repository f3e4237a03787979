//! The quotas as an [`Owner`] of cluster objects: ElasticQuotas read from dumps, each
//! namespace's use charged as pods are placed and discharged as they leave, and each
//! quota's use shown in `simulate`'s report (`report.rs`).

use serde_json::Value;

use super::report::{in_tree, resources};
use crate::dra::DraObjects;
use crate::objects::ClusterObjects;
use crate::owners::{Controller, ObjectError, Owner, Sample, read};
use crate::pod_info::PodInfo;

use crate::quotas::{ElasticQuota, Quota, QuotaObjects, QuotaState, runtime};
use crate::resource::Resource;

/// The owner of the quotas (see [`Owner`]).
#[derive(Debug, Default)]
pub struct Quotas;

impl Owner for Quotas {
    fn name(&self) -> &'static str {
        "quotas"
    }

    fn load(&self, objects: &mut ClusterObjects, kind: &str, object: &Value) -> Option<Result<(), ObjectError>> {
        if kind != "ElasticQuota" {
            return None;
        }
        // A second quota in a namespace is not read, as scheduler-plugins keeps the first.
        Some(read::<ElasticQuota, _>(object, Quota::from_api).map(|q| {
            let _ = objects.quotas_mut().upsert(q);
        }))
    }

    fn counts(&self, objects: &ClusterObjects) -> Vec<(&'static str, usize)> {
        vec![("elastic_quotas", objects.quotas().len())]
    }

    fn pod_placed(&self, objects: &mut ClusterObjects, pod: &PodInfo) -> bool {
        // Only a pod some quota governs is counted (a quota that comes later recounts).
        if !objects.quotas().governs(pod) {
            return false;
        }
        let dra = objects.dra_shared();
        objects.quotas_mut().charge_pod(pod, &dra);
        true
    }

    fn pod_unplaced(&self, objects: &mut ClusterObjects, pod: &PodInfo) -> bool {
        if !objects.quotas().governs(pod) {
            return false;
        }
        objects.quotas_mut().discharge_pod(pod);
        true
    }

    fn waiting(&self, objects: &mut ClusterObjects, pending: &mut dyn Iterator<Item = &PodInfo>) -> bool {
        if objects.quotas().is_empty() {
            return false;
        }
        objects.quotas_mut().set_waiting(pending);
        true
    }

    fn needs_recount(&self, objects: &ClusterObjects) -> bool {
        objects.quotas().needs_recount(objects.dra().generation())
    }

    fn recount(&self, objects: &mut ClusterObjects, placed: &mut dyn Iterator<Item = &PodInfo>) {
        let dra = objects.dra_shared();
        objects.quotas_mut().recount(placed, &dra);
    }

    fn gauges(&self, objects: &ClusterObjects, pending: &[&PodInfo], allocatable: &Resource) -> Vec<Sample> {
        let state = objects.quotas();
        let mut out = Vec::new();
        for q in state.quotas() {
            let quota = q.key();
            let families: [(&'static str, &'static str, &Resource); 3] = [
                (
                    "scheduler_elastic_quota_used",
                    "Requests of the quota's placed pods, by resource",
                    state.used(&q.namespace),
                ),
                ("scheduler_elastic_quota_min", "The quota's guaranteed amount (spec.min), by resource", &q.min),
                (
                    "scheduler_elastic_quota_max",
                    "The quota's limit (spec.max), by resource; unlimited ones left out",
                    &q.max,
                ),
            ];
            for (family, help, amounts) in families {
                for (resource, value) in resources(amounts) {
                    let labels = vec![("quota", quota.clone()), ("resource", resource)];
                    out.push(Sample { family, help, labels, value });
                }
            }
            let waiting = pending.iter().filter(|p| p.namespace == q.namespace).count();
            out.push(Sample {
                family: "scheduler_elastic_quota_pending_pods",
                help: "Pods of the quota's namespace waiting in the scheduling queue",
                labels: vec![("quota", quota)],
                value: waiting as f64,
            });
        }
        out.extend(tree_gauges(objects.quotas(), pending, allocatable));
        out
    }

    fn controller(&self) -> Box<dyn Controller> {
        Box::new(super::report::QuotaReport::default())
    }
}

/// The gauges of quota trees, in the resources each quota's `max` names: its runtime
/// share (with the pending pods as its waiting demand) and its use in the tree (a
/// parent's, its children's).
fn tree_gauges(state: &QuotaState, pending: &[&PodInfo], allocatable: &Resource) -> Vec<Sample> {
    let mut quotas: Vec<&Quota> = state.all_named().filter(|q| !q.tree.limited.is_empty()).collect();
    if quotas.is_empty() {
        return Vec::new();
    }
    quotas.sort_by_key(|q| q.key());
    let mut asking = state.clone();
    asking.set_waiting(&mut pending.iter().copied());
    let shares = runtime::shares(&asking, allocatable);
    let in_tree = in_tree(state);
    let mut out = Vec::new();
    for q in quotas {
        let limited =
            |r: &Resource| resources(r).into_iter().filter(|(n, _)| q.tree.limited.contains(n)).collect::<Vec<_>>();
        let share = shares.get(&q.name).cloned().unwrap_or_default();
        let used = in_tree.get(q.name.as_str()).cloned().unwrap_or_default();
        let families: [(&'static str, &'static str, Vec<(String, f64)>); 2] = [
            (
                "scheduler_elastic_quota_runtime",
                "The quota's runtime share in its quota tree, by resource its max names",
                limited(&share),
            ),
            (
                "scheduler_elastic_quota_tree_used",
                "Requests counted against the quota in its tree (a parent's are its children's), by resource its max names",
                limited(&used),
            ),
        ];
        for (family, help, amounts) in families {
            for (resource, value) in amounts {
                out.push(Sample { family, help, labels: vec![("quota", q.key()), ("resource", resource)], value });
            }
        }
    }
    out
}
