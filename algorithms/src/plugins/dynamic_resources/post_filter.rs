//! DynamicResources' PostFilter: when a claim of the pod is allocated somewhere the pod
//! cannot go and nobody else uses it, the claim is deallocated so that the next attempt
//! may allocate it anew (kube-scheduler's `deallocation of ResourceClaim completed`);
//! otherwise it only shapes the end of the FailedScheduling message.

use std::sync::Arc;

use rand::RngCore;

use super::{
    DEALLOCATED, DELETED, DynamicResources, Extended, NAME, NO_CLAIMS, NOT_AVAILABLE, STATE_MISSING,
    STILL_NOT_SCHEDULABLE, pod_claims, pod_uid,
};
use crate::dra::{Claim, ClaimWrite};
use crate::dra::{DraObjects, DraWrite};
use crate::framework::{ApiWrite, Evaluation, PostFilterPlugin, PostFilterResult, Profile};
use crate::labels::NodeSelector;
use crate::pod_info::PodInfo;
use crate::snapshot::Snapshot;

impl PostFilterPlugin for DynamicResources {
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
        match &ev.prefilter_rejection {
            Some(s) if s.plugin == NAME => {
                return PostFilterResult::Unschedulable { message: NO_CLAIMS.into(), clear: false };
            }
            // A PreFilter before this plugin's rejected the pod: this one never ran.
            Some(s) if ran_before(profile, s.plugin) => return PostFilterResult::Stopped(STATE_MISSING.into()),
            _ => {}
        }
        let extended = Extended::find(pod, snapshot.objects.dra(), self.features);
        if let Some(stale) = extended.as_ref().and_then(|x| x.stale.as_ref()) {
            // kube-scheduler deletes the claim left from an earlier attempt, so that the
            // next one starts anew.
            let write =
                ApiWrite::new(DraWrite::DeleteClaim { namespace: stale.namespace.clone(), name: stale.name.clone() });
            return PostFilterResult::Released { message: DELETED.into(), clear: false, writes: vec![write] };
        }
        if pod.resource_claims.iter().all(|c| c.not_needed) && extended.is_none() {
            return PostFilterResult::Unschedulable { message: NO_CLAIMS.into(), clear: false };
        }
        match deallocation(self, pod, snapshot, ev) {
            Some(claim) => {
                let write = ClaimWrite { claim, add_finalizer: false, allocated: false };
                PostFilterResult::Released {
                    message: DEALLOCATED.into(),
                    clear: false,
                    writes: vec![ApiWrite::new(DraWrite::Claim(write))],
                }
            }
            None => PostFilterResult::Unschedulable { message: STILL_NOT_SCHEDULABLE.into(), clear: false },
        }
    }
}

/// Whether the filter `plugin` runs before DynamicResources in `profile`.
fn ran_before(profile: &Profile, plugin: &str) -> bool {
    let at = |name: &str| profile.filters.iter().position(|f| f.name() == name);
    match (at(plugin), at(NAME)) {
        (Some(p), Some(us)) => p < us,
        _ => true,
    }
}

/// The first of the pod's claims that is allocated where a node Filter turned down for
/// it (`resourceclaim not available on the node`) cannot use it, and that no other pod
/// uses, as it is once deallocated (no allocation, no consumers, no device status).
fn deallocation(plugin: &DynamicResources, pod: &PodInfo, snapshot: &Snapshot, ev: &Evaluation) -> Option<Arc<Claim>> {
    let turned_down: Vec<usize> = ev
        .rejected
        .iter()
        .filter(|(_, s)| s.plugin == NAME && s.reasons.first().is_some_and(|r| r == NOT_AVAILABLE))
        .map(|(i, _)| i)
        .collect();
    if turned_down.is_empty() {
        return None;
    }
    let uid = pod_uid(pod);
    let claims = pod_claims(pod, snapshot.objects.dra()).ok()?;
    let claim = claims.iter().find(|c| {
        let Some(allocation) = c.allocation() else { return false };
        let elsewhere = allocation.node_selector.as_ref().map(NodeSelector::parse).is_some_and(|sel| {
            turned_down.iter().filter_map(|&i| snapshot.nodes.get(i)).any(|n| !sel.matches(&n.name, &n.labels))
        });
        let now = super::binding::now();
        let stuck =
            plugin.features.binding_conditions && super::binding::stuck(&c.api, plugin.args.binding_timeout, now);
        let unavailable = elsewhere || stuck;
        let unused = match c.reserved_for.as_slice() {
            [] => true,
            [only] => only.uid == uid,
            _ => false,
        };
        unavailable && unused
    })?;
    Some(Arc::new(claim.deallocated()))
}
