//! Reclaim in quota trees: a pod whose quota, with it and the pods of its quota already
//! nominated, stays within its `min` takes back
//! what quotas running over their runtime share borrowed, whatever their priority, while
//! they stay over it; otherwise it may evict only lower-priority pods of its own quota,
//! and a pod no quota governs only lower-priority pods no quota governs. Pods labelled
//! `quota.scheduling.koordinator.sh/preemptible: "false"` are never victims. The dry
//! runs, reprieve, whole pod groups and choice of node are CapacityScheduling's
//! (`super::super::capacity_scheduling::preemption`).

use std::sync::Arc;

use rand::RngCore;

use super::{ElasticQuota, NAME, cluster_total, standing};
use crate::framework::{Evaluation, PostFilterPlugin, PostFilterResult, Profile};
use crate::plugins::capacity_scheduling::preemption::{Rules, preempt};
use crate::pod_info::PodInfo;
use crate::preemption::more_important;
use crate::quotas::{QuotaObjects, QuotaState, runtime};
use crate::resource::Resource;
use crate::snapshot::Snapshot;

pub use crate::quotas::tree::PREEMPTIBLE_LABEL;
use crate::quotas::tree::preemptible;

impl PostFilterPlugin for ElasticQuota {
    fn name(&self) -> &'static str {
        NAME
    }

    fn post_filter(
        &self,
        profile: &Profile,
        pod: &PodInfo,
        snapshot: &mut Snapshot,
        ev: &Evaluation,
        _: &mut dyn RngCore,
    ) -> PostFilterResult {
        preempt(&TreeRules, profile, pod, snapshot, ev)
    }
}

/// The rules of quota trees.
#[derive(Debug, Default, Clone, Copy)]
pub struct TreeRules;

/// Whether `used` and `request` together stay within `limit` in each of `names`.
fn within(used: &Resource, request: &Resource, limit: &Resource, names: &[String]) -> bool {
    names.iter().all(|r| used.get(r).saturating_add(request.get(r)) <= limit.get(r))
}

impl Rules for TreeRules {
    fn plugin(&self) -> &'static str {
        NAME
    }

    fn blocked_by_terminating(&self, pod: &PodInfo, snapshot: &Snapshot, i: usize) -> bool {
        let quotas = snapshot.objects.quotas();
        let mine = quotas.tree_quota_of(pod);
        // A pod that reclaims waits for the pods of other quotas it evicted, too.
        let reclaims = mine
            .and_then(|n| quotas.named(n))
            .is_some_and(|q| within(quotas.used_by(&q.name), &pod.requests.requests, &q.min, &q.tree.limited));
        snapshot.nodes[i].pods.iter().filter(|p| p.terminating).any(|p| {
            let theirs = quotas.tree_quota_of(p);
            (theirs == mine && p.priority < pod.priority) || (reclaims && theirs.is_some() && theirs != mine)
        })
    }

    fn evictable(&self, victim: &PodInfo) -> bool {
        preemptible(victim)
    }

    fn potential(&self, pod: &PodInfo, snapshot: &Snapshot, i: usize) -> Vec<Arc<PodInfo>> {
        let state: &QuotaState = snapshot.objects.quotas();
        let mut pods: Vec<Arc<PodInfo>> = snapshot.nodes[i].pods.iter().filter(|p| preemptible(p)).cloned().collect();
        pods.sort_by(|a, b| more_important(b, a));
        let Some(mine) = state.tree_quota_of(pod).and_then(|n| state.named(n)) else {
            pods.retain(|p| state.tree_quota_of(p).is_none() && p.priority < pod.priority);
            return pods;
        };
        // The pods of its quota already nominated (their victims on their way out) count
        // as used.
        let mut request = pod.requests.requests.clone();
        for p in snapshot.nominated.values().flatten() {
            if p.key() != pod.key() && state.tree_quota_of(p) == Some(mine.name.as_str()) {
                request.add(&p.requests.requests);
            }
        }
        let reclaims = within(state.used_by(&mine.name), &request, &mine.min, &mine.tree.limited);
        if !reclaims {
            pods.retain(|p| state.tree_quota_of(p) == Some(mine.name.as_str()) && p.priority < pod.priority);
            return pods;
        }
        // Over their share: counted off as they are chosen.
        let shares = runtime::shares(state, &cluster_total(snapshot));
        let mut used: std::collections::HashMap<String, Resource> = std::collections::HashMap::new();
        let mut chosen = Vec::new();
        for p in pods {
            let Some(theirs) = state.tree_quota_of(&p).and_then(|n| state.named(n)) else { continue };
            if theirs.name == mine.name {
                continue;
            }
            let now = used.entry(theirs.name.clone()).or_insert_with(|| state.used_by(&theirs.name).clone());
            let share = shares.get(&theirs.name).cloned().unwrap_or_default();
            if within(now, &Resource::default(), &share, &theirs.tree.limited) {
                continue;
            }
            now.sub(&p.requests.requests);
            chosen.push(p);
        }
        chosen
    }

    fn refuses(&self, pod: &PodInfo, snapshot: &Snapshot) -> bool {
        let state = snapshot.objects.quotas();
        standing(state, pod, snapshot).is_some_and(|s| !s.exceeded(&pod.requests.requests).is_empty())
    }
}
