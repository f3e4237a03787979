//! DynamicResources: devices a pod asks for through ResourceClaims (`resource.k8s.io/v1`).
//!
//! So far its PostFilter, which runs before DefaultPreemption in kube-scheduler v1.36's
//! default profile and shapes the end of every FailedScheduling message: a pod with no
//! claim allocated in its cycle has nothing to deallocate, and after another plugin's
//! PreFilter rejected the pod this plugin finds no state of its own and stops the chain.

use rand::RngCore;

use crate::framework::{Evaluation, PostFilterPlugin, PostFilterResult, Profile};
use crate::pod_info::PodInfo;
use crate::snapshot::Snapshot;

/// Plugin name.
pub const NAME: &str = "DynamicResources";
/// PostFilter's reason for a pod without claims allocated in its cycle.
pub const NO_CLAIMS: &str = "no new claims to deallocate";
/// PostFilter's error when a PreFilter before it rejected the pod (its state was never written).
pub const STATE_MISSING: &str = "not found";

/// The DynamicResources plugin.
#[derive(Debug, Clone, Copy, Default)]
pub struct DynamicResources;

impl PostFilterPlugin for DynamicResources {
    fn name(&self) -> &'static str {
        NAME
    }

    fn post_filter(
        &self,
        _: &Profile,
        _: &PodInfo,
        _: &mut Snapshot,
        ev: &Evaluation,
        _: &mut dyn RngCore,
    ) -> PostFilterResult {
        if ev.prefilter_rejection.is_some() {
            return PostFilterResult::Stopped(STATE_MISSING.into());
        }
        PostFilterResult::Unschedulable { message: NO_CLAIMS.into(), clear: false }
    }
}
