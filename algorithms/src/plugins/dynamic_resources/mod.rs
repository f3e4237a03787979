//! DynamicResources: devices a pod asks for through ResourceClaims (`resource.k8s.io/v1`).
//!
//! PreFilter resolves the pod's claims (kube-scheduler's messages for a claim not created
//! yet, missing, being deleted or made for another pod, or asking for a class that does
//! not exist); Filter keeps a node when every allocated claim's node selector admits it
//! and the structured allocator finds devices there for every unallocated claim; Score
//! ranks `firstAvailable` choices; Reserve assumes the allocations (and the pod in each
//! claim's `reservedFor`) so the next pods see the devices taken; PreBind writes them
//! (`lifecycle.rs`); PostFilter deallocates a claim allocated where the pod cannot go
//! and shapes the end of the FailedScheduling message (`post_filter.rs`).

mod binding;
mod claims;
mod controller;
mod extended;
mod lifecycle;
mod owner;
mod post_filter;
#[cfg(test)]
mod tests;

use crate::dra::DraObjects;
use std::sync::Arc;
use std::time::Duration;

pub use claims::{check_classes, owned_by, pod_claims, pod_uid};
pub use extended::{Batch, DELETED, Extended, STALE};
pub use lifecycle::Reservation;
pub use owner::Dra;

use super::ArgsError;
use super::roles::{Built, parse};
use crate::dra::{self, Claim, DraState, Features, Outcome};
use crate::events::{ClusterEvent, ObjectAction, QueueingHint};
use crate::features::FeatureGates;
use crate::framework::{FilterPlugin, Limits, PluginState, PreFilterOutcome, ScorePlugin, default_normalize};
use crate::labels::NodeSelector;
use crate::node_info::NodeInfo;
use crate::objects::ClusterObjects;
use crate::pod_info::PodInfo;
use crate::snapshot::Snapshot;
use crate::status::Status;

/// Plugin name.
pub const NAME: &str = "DynamicResources";
/// PostFilter's reason for a pod without claims.
pub const NO_CLAIMS: &str = "no new claims to deallocate";
/// PostFilter's reason for a pod with claims it could not place.
pub const STILL_NOT_SCHEDULABLE: &str = "still not schedulable";
/// PostFilter's reason when it deallocated a claim the pod could not use where it was allocated.
pub const DEALLOCATED: &str = "deallocation of ResourceClaim completed";
/// PostFilter's error when a PreFilter before it rejected the pod (its state was never written).
pub const STATE_MISSING: &str = "not found";
/// Filter's reason when the allocator finds no devices for the claims on a node.
pub const CANNOT_ALLOCATE: &str = "cannot allocate all claims";
/// Filter's reason when the node has devices for the claims, but not within the limits
/// `by` sets (the pod's quota).
pub fn over_limits(by: &str) -> String {
    format!("cannot allocate all claims within what {by} leaves")
}
/// Filter's reason when an allocated claim cannot be used on a node.
pub const NOT_AVAILABLE: &str = "resourceclaim not available on the node";
/// Filter's reason when the allocator ran out of time on a node.
pub const TIMED_OUT: &str = "timed out trying to allocate devices";

/// `DynamicResourcesArgs`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DynamicResourcesArgs {
    /// How long Filter may search one node (`10s`; `0s` for no limit).
    #[serde(default = "default_filter_timeout", with = "duration_text")]
    pub filter_timeout: Duration,
    /// How long PreBind waits for devices' binding conditions (`10m`).
    #[serde(default = "default_binding_timeout", with = "duration_text")]
    pub binding_timeout: Duration,
}

fn default_filter_timeout() -> Duration {
    Duration::from_secs(10)
}

fn default_binding_timeout() -> Duration {
    Duration::from_secs(600)
}

impl Default for DynamicResourcesArgs {
    fn default() -> Self {
        DynamicResourcesArgs { filter_timeout: default_filter_timeout(), binding_timeout: default_binding_timeout() }
    }
}

/// Go durations as the configuration writes them (`10s`, `1m30s`, `500ms`).
mod duration_text {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer};

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        parse(&text).ok_or_else(|| serde::de::Error::custom(format!("invalid duration {text:?}")))
    }

    /// Parses a Go duration.
    pub fn parse(text: &str) -> Option<Duration> {
        crate::extender_config::parse_go_duration(text)
    }
}

/// The DynamicResources plugin.
#[derive(Debug, Clone, Default)]
pub struct DynamicResources {
    /// Its arguments.
    pub args: DynamicResourcesArgs,
    /// The allocator features the gates switch on.
    pub features: Features,
}

/// What PreFilter found for one pod.
pub struct ClaimState {
    /// The cluster objects the cycle reads.
    pub objects: Arc<ClusterObjects>,
    /// Their DRA objects, looked up once for every node.
    pub dra: Arc<DraState>,
    /// Node selectors of the claims already allocated (`None`: usable everywhere).
    pub allocated: Vec<Option<NodeSelector>>,
    /// The claims Filter allocates, in the pod's order.
    pub to_allocate: Vec<Arc<Claim>>,
    /// Their checks and compiled selectors (an error fails every node, as upstream's
    /// allocator does).
    pub plan: Result<dra::Plan, String>,
    /// An allocated claim whose binding conditions failed or timed out: the pod cannot
    /// use it on any node until PostFilter deallocates it.
    pub stuck: bool,
    /// The pod's extended resources that DeviceClasses serve (`DRAExtendedResource`).
    pub extended: Option<Extended>,
    /// Filter's answers by the devices a node reaches and the resources it leaves to
    /// DRA: nodes reaching the same devices (network-attached pools) get the same
    /// answer, searched once.
    fits: std::sync::Mutex<FitsMemo>,
}

/// Filter's memo: by the address of the devices reached and the extended-resource mask,
/// the devices (kept alive so that their address names them) and the answer.
type FitsMemo = rustc_hash::FxHashMap<(usize, u64), (Arc<dra::NodeDevices>, Result<(), Status>)>;

/// Whether DynamicResources has anything to do for a pod: claims, or containers asking
/// for resources a DeviceClass may serve.
pub fn may_need_devices(pod: &PodInfo) -> bool {
    !pod.resource_claims.is_empty() || !pod.device_asks.is_empty()
}

impl ClaimState {
    /// Keeps the devices Filter and Reserve give the pod's claims within `limits`.
    pub fn limit(&mut self, limits: &Limits) {
        if let Ok(plan) = &mut self.plan {
            plan.limit(&self.dra, &self.to_allocate, limits);
        }
    }

    /// The batch a node allocates: `None` for the pod's own unallocated claims alone.
    fn batch(&self, plugin: &DynamicResources, pod: &PodInfo, node: &NodeInfo) -> (u64, Option<Arc<Batch>>) {
        let Some(x) = &self.extended else { return (0, None) };
        let mask = x.mask(node);
        if mask == 0 {
            return (0, None);
        }
        (mask, Some(x.batch(mask, &self.to_allocate, pod, &self.dra, plugin)))
    }
}

impl DynamicResources {
    /// PreFilter's work against a set of cluster objects: `Ok(None)` for a pod without claims.
    pub fn resolve(&self, pod: &PodInfo, objects: &Arc<ClusterObjects>) -> Result<Option<ClaimState>, Status> {
        if !may_need_devices(pod) {
            return Ok(None);
        }
        let claims = pod_claims(pod, objects.dra()).map_err(Status::unresolvable)?;
        let extended = Extended::find(pod, objects.dra(), self.features);
        if claims.is_empty() && extended.is_none() {
            return Ok(None);
        }
        let mut state = ClaimState {
            objects: objects.clone(),
            dra: objects.dra_shared(),
            allocated: Vec::new(),
            to_allocate: Vec::new(),
            plan: Err(String::new()),
            stuck: false,
            extended,
            fits: Default::default(),
        };
        let now = binding::now();
        for claim in claims {
            match claim.allocation() {
                Some(a) => {
                    state.allocated.push(a.node_selector.as_ref().map(NodeSelector::parse));
                    if self.features.binding_conditions && binding::stuck(&claim.api, self.args.binding_timeout, now) {
                        state.stuck = true;
                    }
                }
                None => {
                    check_classes(&claim, objects.dra(), self.features.prioritized_list)
                        .map_err(Status::unresolvable)?;
                    state.to_allocate.push(claim);
                }
            }
        }
        state.plan = dra::plan(objects.dra(), &state.to_allocate, self.features)
            .map(|p| p.with_timeout(self.args.filter_timeout));
        Ok(Some(state))
    }

    /// Runs the allocator for the state's unallocated claims on a node (the pod's
    /// extended resource claim for that node last, when it needs one).
    pub fn allocate(
        &self,
        state: &ClaimState,
        pod: &PodInfo,
        node: &NodeInfo,
    ) -> Result<(Vec<k8s_openapi::api::resource::v1::AllocationResult>, Option<Arc<Batch>>), Status> {
        let (_, batch) = state.batch(self, pod, node);
        let (claims, plan) = Self::claims_of(state, batch.as_deref());
        Ok((self.run(&state.dra, claims, plan, node, true)?, batch))
    }

    fn claims_of<'a>(
        state: &'a ClaimState,
        batch: Option<&'a Batch>,
    ) -> (&'a [Arc<Claim>], &'a Result<dra::Plan, String>) {
        match batch {
            Some(b) => (&b.claims, &b.plan),
            None => (&state.to_allocate, &state.plan),
        }
    }

    /// Whether the claims fit on a node, searched once for all nodes reaching the same
    /// devices.
    fn fits(&self, state: &ClaimState, pod: &PodInfo, node: &NodeInfo) -> Result<(), Status> {
        let (mask, batch) = state.batch(self, pod, node);
        let (claims, plan) = Self::claims_of(state, batch.as_deref());
        if claims.is_empty() {
            return Ok(());
        }
        let dra = &*state.dra;
        if dra.only_node_local() {
            // Every node reaches devices of its own: nothing to share.
            return self.run(dra, claims, plan, node, false).map(|_| ());
        }
        let plan = plan.as_ref().map_err(|e| Status::error(e.clone()))?;
        let reach = dra::reach(dra, &node.name, &node.labels, plan);
        let key = (Arc::as_ptr(&reach) as usize, mask);
        let lock = || state.fits.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, answer)) = lock().get(&key) {
            return answer.clone();
        }
        let answer = Self::verdict(dra::fits_reached(dra, &reach, claims, plan), &node.name).map(|_| ());
        // The entry keeps the devices alive, so that their address names them for the cycle.
        lock().insert(key, (reach, answer.clone()));
        answer
    }

    /// Filter's status for an allocator's outcome on `node`. A search out of time is an
    /// error, as in kube-scheduler: the pod is retried after a backoff rather than left
    /// waiting for an event.
    fn verdict(
        outcome: Result<Outcome, String>,
        node: &str,
    ) -> Result<Vec<k8s_openapi::api::resource::v1::AllocationResult>, Status> {
        match outcome {
            Ok(Outcome::Allocated(a)) => Ok(a),
            Ok(Outcome::Unschedulable(None)) => Err(Status::unresolvable(CANNOT_ALLOCATE)),
            Ok(Outcome::Unschedulable(Some(reason))) => Err(Status::unresolvable(reason)),
            Ok(Outcome::TimedOut) => Err(Status::error(format!("node {node}: {TIMED_OUT}"))),
            Err(e) => Err(Status::error(e)),
        }
    }

    /// The allocator on a node; without `build` only whether it fits (no results).
    fn run(
        &self,
        dra: &DraState,
        claims: &[Arc<Claim>],
        plan: &Result<dra::Plan, String>,
        node: &NodeInfo,
        build: bool,
    ) -> Result<Vec<k8s_openapi::api::resource::v1::AllocationResult>, Status> {
        if claims.is_empty() {
            return Ok(Vec::new());
        }
        let plan = plan.as_ref().map_err(|e| Status::error(e.clone()))?;
        let outcome = if build {
            dra::allocate_planned(dra, &node.name, &node.labels, claims, plan)
        } else {
            dra::fits_planned(dra, &node.name, &node.labels, claims, plan)
        };
        Self::verdict(outcome, &node.name)
    }

    /// What holds the claims back on the node, when limits (a quota's) do: they would
    /// fit there without them.
    fn limited_by(&self, state: &ClaimState, pod: &PodInfo, node: &NodeInfo) -> Option<String> {
        let (_, batch) = state.batch(self, pod, node);
        let (claims, plan) = Self::claims_of(state, batch.as_deref());
        let plan = plan.as_ref().ok()?;
        let by = plan.limited_by()?;
        self.run(&state.dra, claims, &Ok(plan.unlimited()), node, false).is_ok().then(|| by.to_string())
    }

    /// Whether the claims would fit on the node once its lower-priority pods were gone
    /// and the claims only they use deallocated.
    fn preemption_frees(&self, state: &ClaimState, pod: &PodInfo, node: &NodeInfo) -> bool {
        let lower: Vec<Arc<PodInfo>> =
            node.pods.iter().filter(|p| p.priority < pod.priority && may_need_devices(p)).cloned().collect();
        if lower.is_empty() {
            return false;
        }
        let Some(after) = FilterPlugin::after_eviction(self, &state.objects, &lower) else { return false };
        let Ok(Some(freed)) = self.resolve(pod, &Arc::new(after)) else { return false };
        let (_, batch) = freed.batch(self, pod, node);
        let (claims, plan) = Self::claims_of(&freed, batch.as_deref());
        self.run(&freed.dra, claims, plan, node, false).is_ok()
    }

    /// Why the node cannot give the claims their devices, request by request.
    fn diagnosis(&self, state: &ClaimState, pod: &PodInfo, node: &NodeInfo) -> String {
        let (_, batch) = state.batch(self, pod, node);
        let (claims, plan) = Self::claims_of(state, batch.as_deref());
        match plan {
            Ok(plan) => dra::diagnose(&state.dra, &node.name, &node.labels, claims, plan),
            Err(e) => e.clone(),
        }
    }

    fn available(state: &ClaimState, node: &NodeInfo) -> bool {
        state.allocated.iter().all(|s| s.as_ref().is_none_or(|s| s.matches(&node.name, &node.labels)))
    }
}

impl FilterPlugin for DynamicResources {
    fn name(&self) -> &'static str {
        NAME
    }

    fn pre_enqueue(&self, pod: &PodInfo, objects: &ClusterObjects) -> Option<String> {
        if !may_need_devices(pod) {
            return None;
        }
        pod_claims(pod, objects.dra()).err()
    }

    fn pre_filter(&self, pod: &PodInfo, snapshot: &Snapshot) -> PreFilterOutcome {
        match self.resolve(pod, &snapshot.objects) {
            Ok(None) => PreFilterOutcome::skip(),
            Ok(Some(state)) => PreFilterOutcome::run(PluginState::new(state)),
            Err(status) => PreFilterOutcome::reject(status),
        }
    }

    fn limit(&self, state: &mut PluginState, limits: &Limits) {
        if let Some(state) = state.get_mut::<ClaimState>() {
            state.limit(limits);
        }
    }

    fn filter(&self, state: &PluginState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(state) = state.get::<ClaimState>() else { return Status::success() };
        if state.extended.as_ref().is_some_and(|x| x.stale.is_some()) {
            return Status::unresolvable(STALE);
        }
        let available = Self::available(state, node);
        if let Err(status) = self.fits(state, pod, node) {
            let cannot = status.reasons.first().is_some_and(|r| r == CANNOT_ALLOCATE);
            let status = if let Some(by) = self.limited_by(state, pod, node).filter(|_| cannot) {
                // The devices are there, but not within what the pod's quota leaves.
                Status::unschedulable(over_limits(&by))
            } else if cannot && self.preemption_frees(state, pod, node) {
                // Evicting lower-priority pods would free the devices: preemption may help.
                Status::unschedulable(CANNOT_ALLOCATE)
            } else {
                status
            };
            return if cannot { status.with_detail_fn(|| self.diagnosis(state, pod, node)) } else { status };
        }
        if !available || state.stuck {
            return Status::unresolvable(NOT_AVAILABLE);
        }
        Status::success()
    }

    fn queueing_hint(&self, pod: &PodInfo, event: &ClusterEvent) -> QueueingHint {
        match event {
            ClusterEvent::NodeAdded(_) | ClusterEvent::NodeUpdated { .. } => QueueingHint::Queue,
            ClusterEvent::Object(e) => match (e.kind, e.action) {
                (crate::dra::kinds::RESOURCE_CLAIM, ObjectAction::Add) => {
                    let own = pod.resource_claims.iter().filter_map(|c| c.claim.as_deref());
                    QueueingHint::from_bool(own.into_iter().any(|n| e.key == format!("{}/{n}", pod.namespace)))
                }
                (
                    crate::dra::kinds::RESOURCE_CLAIM
                    | crate::dra::kinds::RESOURCE_SLICE
                    | crate::dra::kinds::DEVICE_CLASS,
                    _,
                ) => QueueingHint::Queue,
                _ => QueueingHint::Skip,
            },
            _ => QueueingHint::Skip,
        }
    }

    /// A claim whose only consumers are evicted pods is deallocated once they are gone
    /// (by the resourceclaim controller), so preemption counts its devices as free.
    fn after_eviction(&self, objects: &ClusterObjects, evicted: &[Arc<PodInfo>]) -> Option<ClusterObjects> {
        let keys: Vec<String> = evicted
            .iter()
            .flat_map(|p| {
                let special = objects.dra().special_claim(&pod_uid(p)).map(|c| &c.name);
                let claims = p.resource_claims.iter().filter_map(|c| c.claim.as_ref());
                let claims = claims.chain(p.extended_claim.as_ref().or(special));
                claims.map(move |c| format!("{}/{c}", p.namespace))
            })
            .collect();
        if keys.is_empty() {
            return None;
        }
        let uids: Vec<String> = evicted.iter().map(|p| pod_uid(p)).collect();
        let uids: Vec<&str> = uids.iter().map(String::as_str).collect();
        let mut after = objects.clone();
        (after.dra_mut().release_consumers(keys.iter().map(String::as_str), &uids) > 0).then_some(after)
    }
}

/// The score of one node's allocation: for each `firstAvailable` request, 8 for its
/// first sub-request, 7 for the second, and so on.
pub fn rank(claims: &[Arc<Claim>], allocations: &[k8s_openapi::api::resource::v1::AllocationResult]) -> i64 {
    let mut score = 0;
    for (claim, allocation) in claims.iter().zip(allocations) {
        let results = allocation.devices.as_ref().and_then(|d| d.results.as_ref());
        for r in claim.requests.iter().filter(|r| r.prioritized) {
            if let Some(k) =
                r.alternatives.iter().position(|a| results.into_iter().flatten().any(|x| x.request == a.name))
            {
                score += 8 - i64::try_from(k).unwrap_or(8);
            }
        }
    }
    score
}

impl ScorePlugin for DynamicResources {
    fn name(&self) -> &'static str {
        NAME
    }

    fn pre_score(&self, pod: &PodInfo, snapshot: &Snapshot, _: &[usize]) -> Result<PluginState, Status> {
        match self.resolve(pod, &snapshot.objects) {
            Ok(Some(state)) if state.to_allocate.iter().any(|c| c.requests.iter().any(|r| r.prioritized)) => {
                Ok(PluginState::new(state))
            }
            _ => Err(Status::skip()),
        }
    }

    fn score(&self, state: &PluginState, pod: &PodInfo, node: &NodeInfo, _: &Snapshot) -> i64 {
        let Some(state) = state.get::<ClaimState>() else { return 0 };
        // The extended resource claim comes last and has no `firstAvailable` request.
        self.allocate(state, pod, node).map(|(a, _)| rank(&state.to_allocate, &a)).unwrap_or(0)
    }

    fn normalize(&self, _: &PluginState, scores: &mut [i64]) {
        default_normalize(false, scores);
    }
}

/// DynamicResources as the registry builds it: Filter, Score, PostFilter, Reserve and
/// PreBind, with the allocator features the gates switch on.
pub fn build(name: &str, args: Option<&serde_json::Value>, gates: FeatureGates) -> Result<Built, ArgsError> {
    let p = Arc::new(DynamicResources { args: parse(name, args)?, features: gates.dra_features() });
    Ok(Built {
        filter: Some(p.clone()),
        score: Some(p.clone()),
        post_filter: Some(p.clone()),
        reserve: Some(p.clone()),
        pre_bind: Some(p),
        ..Default::default()
    })
}
