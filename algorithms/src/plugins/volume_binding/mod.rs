//! VolumeBinding: a pod's PersistentVolumeClaims must be bound to volumes its node can
//! reach, or bindable on it: a matching static volume, or a provisioner whose allowed
//! topology and storage capacity cover the node (WaitForFirstConsumer classes).
//!
//! Reserve ([`assume`]), Unreserve ([`revert`]) and PreBind (the API writes, then
//! waiting until the claims are bound) complete it, in `lifecycle.rs`.

mod assume;
mod binder;
mod claims;
mod controller;
mod lifecycle;
mod owner;
mod score;
#[cfg(test)]
mod tests;

pub use assume::{assume, bind_volume_to_claim, revert, select_node};
pub use binder::{
    BindingState, ClaimPlan, ERR_BIND_CONFLICT, ERR_NODE_CONFLICT, ERR_NOT_ENOUGH_SPACE, ERR_PV_NOT_EXIST,
    NodeBindings, Provisioning, Verdict, binding_state, bound_to, find_pod_volumes,
};
pub use claims::{ERR_UNBOUND_IMMEDIATE, PodClaims, delayed, lookup, owned_by, pod_claims};
pub use owner::Volumes;
pub use score::{DEFAULT_SHAPE, ShapePoint};

use super::ArgsError;
use super::roles::{Built, parse};
use crate::events::{ClusterEvent, ObjectAction, QueueingHint};
use crate::features::FeatureGates;
use crate::framework::{FilterPlugin, PluginState, PreFilterOutcome, ScorePlugin};
use crate::node_info::NodeInfo;
use crate::pod_info::PodInfo;
use crate::snapshot::Snapshot;
use crate::status::Status;
use crate::volumes::VolumeObjects;
use crate::volumes::VolumeState;
use crate::volumes::kinds;
use std::sync::Arc;

/// Plugin name.
pub const NAME: &str = "VolumeBinding";
/// Default `bindTimeoutSeconds`: how long PreBind waits for the claims to be bound.
pub const DEFAULT_BIND_TIMEOUT_SECONDS: u64 = 600;

/// `VolumeBindingArgs`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VolumeBindingArgs {
    /// How long PreBind waits for the claims to be bound.
    #[serde(default = "default_timeout")]
    pub bind_timeout_seconds: u64,
    /// Utilization-to-score points for scoring, which needs the `StorageCapacityScoring`
    /// feature gate (off by default, as in kube-scheduler v1.36); empty takes
    /// [`DEFAULT_SHAPE`].
    #[serde(default)]
    pub shape: Vec<ShapePoint>,
}

fn default_timeout() -> u64 {
    DEFAULT_BIND_TIMEOUT_SECONDS
}

impl Default for VolumeBindingArgs {
    fn default() -> Self {
        VolumeBindingArgs { bind_timeout_seconds: DEFAULT_BIND_TIMEOUT_SECONDS, shape: Vec::new() }
    }
}

/// The VolumeBinding filter (and score, with the `StorageCapacityScoring` gate).
#[derive(Debug, Default)]
pub struct VolumeBinding {
    /// Its arguments.
    pub args: VolumeBindingArgs,
    /// The scoring shape; `None` when scoring is off.
    pub shape: Option<Vec<ShapePoint>>,
}

impl VolumeBinding {
    /// The plugin from its args; `scoring` is the `StorageCapacityScoring` gate. A
    /// shape is an error unless scoring is on.
    pub fn new(args: VolumeBindingArgs, scoring: bool) -> Result<Self, String> {
        let shape = if scoring {
            let shape = if args.shape.is_empty() { DEFAULT_SHAPE.to_vec() } else { args.shape.clone() };
            score::validate(&shape)?;
            Some(shape)
        } else if !args.shape.is_empty() {
            return Err("shape: must be empty unless the StorageCapacityScoring feature gate is enabled".into());
        } else {
            None
        };
        Ok(VolumeBinding { args, shape })
    }
}

impl ScorePlugin for VolumeBinding {
    fn name(&self) -> &'static str {
        NAME
    }

    fn pre_score(&self, pod: &PodInfo, snapshot: &Snapshot, _: &[usize]) -> Result<PluginState, Status> {
        if self.shape.is_none() || pod.volumes.claims.is_empty() {
            return Err(Status::skip());
        }
        match pre_filter(pod, snapshot.objects.volumes()) {
            Ok(Some(s)) => Ok(PluginState::new(s)),
            _ => Err(Status::skip()),
        }
    }

    fn score(&self, state: &PluginState, _: &PodInfo, node: &NodeInfo, _: &Snapshot) -> i64 {
        let (Some(shape), Some(s)) = (&self.shape, state.get::<BindingState>()) else { return 0 };
        match find_pod_volumes(s, node) {
            Ok((b, verdict)) if verdict.reasons().is_empty() => score::score(shape, &b),
            _ => 0,
        }
    }
}

/// PreFilter, for a caller with the store locked: Skip for a pod without claims, a
/// rejection of every node, or the state Filter and Reserve read.
pub fn pre_filter(pod: &PodInfo, state: &VolumeState) -> Result<Option<BindingState>, Status> {
    if pod.volumes.claims.is_empty() {
        return Ok(None);
    }
    let claims = pod_claims(pod, state)?;
    Ok(Some(binding_state(claims, state)))
}

/// Filter on one node, from PreFilter's state.
pub fn filter_node(s: &BindingState, node: &NodeInfo) -> Status {
    match binder::verdict(s, node) {
        Err(e) => Status::error(e),
        Ok(verdict) => {
            let reasons = verdict.reasons();
            if reasons.is_empty() {
                return Status::success();
            }
            let mut st = Status::unresolvable(reasons[0]);
            st.reasons.extend(reasons[1..].iter().map(|r| std::borrow::Cow::Borrowed(*r)));
            st.with_detail_fn(|| detail(s, node))
        }
    }
}

/// Which claim or volume keeps the node out, for people (`explain`).
fn detail(s: &BindingState, node: &NodeInfo) -> String {
    let mut out: Vec<String> = Vec::new();
    for (claim, volume) in &s.bound {
        match volume {
            None => out.push(format!("claim {} is bound to missing volume {}", claim.name, claim.volume_name)),
            Some(v) if !v.admits(&node.labels) => {
                out.push(format!("volume {} of claim {} is not reachable from this node", v.name, claim.name))
            }
            Some(_) => {}
        }
    }
    for p in &s.plans {
        if let Some(selected) = p.claim.selected_node.as_ref().filter(|n| **n != node.name) {
            out.push(format!("claim {} is being provisioned for node {selected}", p.claim.name));
            continue;
        }
        let static_ok = p
            .prebound
            .as_ref()
            .map_or_else(|| p.candidates.iter().any(|v| v.admits(&node.labels)), |v| v.admits(&node.labels));
        if static_ok {
            continue;
        }
        let why = match &p.provisioning {
            Provisioning::Error(e) => e.clone(),
            Provisioning::Impossible => format!("class {} has no provisioner", p.claim.class),
            Provisioning::Possible { class, .. } if !class.allows(&node.labels) => {
                format!("class {} does not allow this node's topology", class.name)
            }
            Provisioning::Possible { capacities: Some(caps), .. }
                if !caps.iter().any(|c| c.topology.as_ref().is_some_and(|t| t.matches(&node.labels))) =>
            {
                format!("no CSIStorageCapacity of class {} here has room for {} bytes", p.claim.class, p.claim.request)
            }
            Provisioning::Possible { .. } => continue,
        };
        out.push(format!("claim {}: no available volume fits here, and {why}", p.claim.name));
    }
    out.join("; ")
}

impl FilterPlugin for VolumeBinding {
    fn name(&self) -> &'static str {
        NAME
    }

    fn pre_filter(&self, pod: &PodInfo, snapshot: &Snapshot) -> PreFilterOutcome {
        match pre_filter(pod, snapshot.objects.volumes()) {
            Ok(None) => PreFilterOutcome::skip(),
            Ok(Some(s)) => PreFilterOutcome::run(PluginState::new(s)),
            Err(st) => PreFilterOutcome::reject(st),
        }
    }

    fn filter(&self, state: &PluginState, _: &PodInfo, node: &NodeInfo) -> Status {
        match state.get::<BindingState>() {
            Some(s) => filter_node(s, node),
            None => Status::error("VolumeBinding state is missing"),
        }
    }

    fn queueing_hint(&self, pod: &PodInfo, event: &ClusterEvent) -> QueueingHint {
        match event {
            ClusterEvent::NodeAdded(_) => QueueingHint::Queue,
            ClusterEvent::NodeUpdated { old, new } => QueueingHint::from_bool(old.labels != new.labels),
            ClusterEvent::Object(e) if e.action == ObjectAction::Delete => QueueingHint::Skip,
            ClusterEvent::Object(e) => QueueingHint::from_bool(match e.kind {
                kinds::CLAIM => uses_claim(pod, &e.key),
                kinds::VOLUME | kinds::CLASS | kinds::CSI_NODE | kinds::CAPACITY => true,
                // CSIDrivers, and kinds other plugins read.
                _ => false,
            }),
            _ => QueueingHint::Skip,
        }
    }
}

/// Whether `key` (`namespace/name`) is one of the pod's claims.
pub fn uses_claim(pod: &PodInfo, key: &str) -> bool {
    key.split_once('/')
        .is_some_and(|(ns, name)| ns == pod.namespace && pod.volumes.claims.iter().any(|c| c.claim == name))
}

/// VolumeBinding as the registry builds it: Filter, Reserve and PreBind, and Score with
/// the `StorageCapacityScoring` gate.
pub fn build(name: &str, args: Option<&serde_json::Value>, gates: FeatureGates) -> Result<Built, ArgsError> {
    let vb = VolumeBinding::new(parse(name, args)?, gates.storage_capacity_scoring);
    let p = Arc::new(vb.map_err(|e| ArgsError::new(name, e))?);
    let score: Option<Arc<dyn ScorePlugin>> = p.shape.is_some().then(|| p.clone() as Arc<dyn ScorePlugin>);
    Ok(Built { filter: Some(p.clone()), score, reserve: Some(p.clone()), pre_bind: Some(p), ..Default::default() })
}
