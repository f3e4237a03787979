//! DynamicResources after the node is chosen: Reserve allocates the pod's unallocated
//! claims on the node again (the objects may have changed since Filter) and assumes
//! every claim with its allocation and the pod in `reservedFor`; Unreserve drops the
//! assumptions; PreBind writes each claim (the delete-protection finalizer, then
//! `status.allocation` and `status.reservedFor`, with the claim's resource version as
//! precondition) before the pod is bound.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::resource::v1 as api;

use super::{DynamicResources, NAME, pod_uid};
use crate::dra::extended::{self, Mapping};
use crate::dra::{Claim, ClaimWrite, FINALIZER};
use crate::dra::{DraObjects, DraWrite};
use crate::framework::{ApiWrite, Limits, PreBindPlugin, Progress, ReservePlugin, Reserved};
use crate::node_info::NodeInfo;
use crate::objects::ClusterObjects;
use crate::pod_info::PodInfo;
use crate::status::Status;

/// What Reserve assumed for one pod.
#[derive(Debug, Clone, Default)]
pub struct Reservation {
    /// The claims written in PreBind, in the pod's order.
    pub writes: Vec<ClaimWrite>,
    /// The pod's extended resource claim, created after them.
    pub special: Option<SpecialClaim>,
}

/// The extended resource claim Reserve made for a pod.
#[derive(Debug, Clone)]
pub struct SpecialClaim {
    /// The claim as created (allocated, the pod in `reservedFor`).
    pub write: ClaimWrite,
    /// The pod's name.
    pub pod: String,
    /// The containers' mappings to its requests, for the pod's status.
    pub mappings: Vec<Mapping>,
}

impl Reservation {
    /// Every claim Reserve assumed, the extended resource claim last.
    fn claims(&self) -> impl Iterator<Item = &ClaimWrite> {
        self.writes.iter().chain(self.special.as_ref().map(|s| &s.write))
    }
}

/// The claim as PreBind writes it: allocated (with the finalizer) when Reserve allocated
/// it, the pod in `reservedFor`, and, with binding conditions on, the allocation's
/// timestamp when it has none (the binding timeout counts from it), as kube-scheduler.
fn assumed(claim: &Arc<Claim>, allocation: Option<api::AllocationResult>, pod: &PodInfo, stamp: bool) -> ClaimWrite {
    let mut object = (*claim.api).clone();
    let allocated = allocation.is_some();
    let finalizers = object.metadata.finalizers.get_or_insert_with(Vec::new);
    let add_finalizer = allocated && !finalizers.iter().any(|f| f == FINALIZER);
    if add_finalizer {
        finalizers.push(FINALIZER.into());
    }
    let status = object.status.get_or_insert_with(Default::default);
    if let Some(a) = allocation {
        status.allocation = Some(a);
    }
    if stamp && let Some(a) = status.allocation.as_mut().filter(|a| a.allocation_timestamp.is_none()) {
        a.allocation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(super::binding::now()));
    }
    status.reserved_for.get_or_insert_with(Vec::new).push(api::ResourceClaimConsumerReference {
        api_group: None,
        resource: "pods".into(),
        name: pod.name.clone(),
        uid: pod_uid(pod),
    });
    let parsed =
        Claim::from_api(&object).unwrap_or_else(|_| Claim { api: Arc::new(object.clone()), ..(**claim).clone() });
    ClaimWrite { claim: Arc::new(parsed), add_finalizer, allocated }
}

impl ReservePlugin for DynamicResources {
    fn name(&self) -> &'static str {
        NAME
    }

    fn reserve(
        &self,
        objects: &mut ClusterObjects,
        pod: &PodInfo,
        node: &NodeInfo,
    ) -> Result<Option<Reserved>, Status> {
        self.reserve_within(objects, pod, node, None)
    }

    fn reserve_within(
        &self,
        objects: &mut ClusterObjects,
        pod: &PodInfo,
        node: &NodeInfo,
        limits: Option<&Limits>,
    ) -> Result<Option<Reserved>, Status> {
        if !super::may_need_devices(pod) {
            return Ok(None);
        }
        let shared = Arc::new(objects.clone());
        let Some(mut state) = self.resolve(pod, &shared).map_err(|s| Status::error(s.message()))? else {
            return Ok(None);
        };
        if let Some(limits) = limits {
            state.limit(limits);
        }
        if !Self::available(&state, node) {
            return Err(Status::error(super::NOT_AVAILABLE));
        }
        let (allocations, batch) = self.allocate(&state, pod, node).map_err(|s| Status::error(s.message()))?;
        let mut allocations = allocations.into_iter();
        let uid = pod_uid(pod);
        let mut reservation = Reservation::default();
        for claim in super::pod_claims(pod, objects.dra()).map_err(Status::error)? {
            let allocation = if claim.allocation().is_none() {
                Some(allocations.next().ok_or_else(|| Status::error("claim allocation not found for node"))?)
            } else if claim.reserved_for_pod(&uid) {
                continue;
            } else {
                None
            };
            reservation.writes.push(assumed(&claim, allocation, pod, self.features.binding_conditions));
        }
        if let Some((requests, mappings)) = batch.as_ref().and_then(|b| b.special.as_ref()) {
            let allocation = allocations.next().ok_or_else(|| Status::error("claim allocation not found for node"))?;
            let object =
                extended::claim_object(&pod.namespace, &pod.name, &uid, &extended::claim_name(&pod.name), requests);
            let claim = Arc::new(Claim::from_api(&object).map_err(Status::error)?);
            let write = assumed(&claim, Some(allocation), pod, self.features.binding_conditions);
            reservation.special = Some(SpecialClaim { write, pod: pod.name.clone(), mappings: mappings.clone() });
        }
        if reservation.writes.is_empty() && reservation.special.is_none() {
            return Ok(None);
        }
        for w in reservation.claims() {
            objects.dra_mut().assume(w.claim.clone());
        }
        Ok(Some(Arc::new(reservation)))
    }

    fn unreserve(&self, objects: &mut ClusterObjects, _key: &str, reserved: &Reserved) {
        if let Some(r) = reserved.downcast_ref::<Reservation>() {
            let claims: Vec<&ClaimWrite> = r.claims().collect();
            for w in claims.into_iter().rev() {
                objects.dra_mut().restore(&w.claim);
            }
        }
    }
}

impl PreBindPlugin for DynamicResources {
    fn name(&self) -> &'static str {
        NAME
    }

    fn pre_bind(&self, reserved: &Reserved, _node: &str) -> Vec<ApiWrite> {
        let Some(r) = reserved.downcast_ref::<Reservation>() else { return Vec::new() };
        let mut writes: Vec<ApiWrite> = r.writes.iter().map(|w| ApiWrite::new(DraWrite::Claim(w.clone()))).collect();
        if let Some(s) = &r.special {
            writes.push(ApiWrite::new(DraWrite::CreateClaim(s.write.clone())));
            writes.push(ApiWrite::new(DraWrite::PodExtendedClaim {
                namespace: s.write.claim.namespace.clone(),
                pod: s.pod.clone(),
                claim: s.write.claim.name.clone(),
                mappings: s.mappings.clone(),
            }));
        }
        writes
    }

    /// Once the API server accepted the writes the pod may be bound, unless a device
    /// declares binding conditions: then it waits for the driver to report them all
    /// true, and fails on a binding failure condition or the binding timeout (from the
    /// start of the wait, or from the claim's allocation when that is sooner).
    fn check(&self, objects: &ClusterObjects, reserved: &Reserved, _: &NodeInfo, _: &[u64]) -> Progress {
        let Some(r) = reserved.downcast_ref::<Reservation>() else { return Progress::Done };
        if !self.features.binding_conditions {
            return Progress::Done;
        }
        for w in r.claims() {
            if !super::binding::has_binding_conditions(&w.claim.api) {
                continue;
            }
            let current = objects.dra().claim(&w.claim.key()).map_or(&w.claim.api, |c| &c.api);
            match super::binding::readiness(current) {
                super::binding::Readiness::Ready => {}
                // The timeout counts from the allocation too, as kube-scheduler's does.
                super::binding::Readiness::Waiting
                    if super::binding::timed_out(current, self.args.binding_timeout, super::binding::now()) =>
                {
                    return Progress::Failed(format!("device binding timeout: claim={}", w.claim.name));
                }
                super::binding::Readiness::Waiting => return Progress::Waiting,
                super::binding::Readiness::Failed(message) => return Progress::Failed(message),
            }
        }
        Progress::Done
    }

    fn timeout_message(&self) -> String {
        "device binding timeout".into()
    }

    fn waiting_event(&self, node: &str) -> Option<(&'static str, String)> {
        Some(("BindingConditionsPending", format!("waiting for binding conditions for device on node {node}")))
    }

    /// kube-scheduler's Unreserve: the pod leaves the `reservedFor` of each claim whose
    /// write landed (the allocation stays, as kube-scheduler leaves it), and its extended
    /// resource claim, once created, is deleted.
    fn undo(&self, reserved: &Reserved, pod: &PodInfo, landed: usize) -> Vec<ApiWrite> {
        let Some(r) = reserved.downcast_ref::<Reservation>() else { return Vec::new() };
        let uid = pod_uid(pod);
        let mut undo: Vec<ApiWrite> = r
            .writes
            .iter()
            .take(landed)
            .map(|w| {
                ApiWrite::new(DraWrite::ReleaseClaim {
                    namespace: w.claim.namespace.clone(),
                    name: w.claim.name.clone(),
                    claim_uid: w.claim.uid.clone(),
                    pod_uid: uid.clone(),
                })
            })
            .collect();
        if let Some(s) = r.special.as_ref().filter(|_| landed > r.writes.len()) {
            undo.push(ApiWrite::new(DraWrite::DeleteClaim {
                namespace: s.write.claim.namespace.clone(),
                name: s.write.claim.name.clone(),
            }));
        }
        undo
    }

    /// Each written claim stays assumed until the watch shows the version its write made.
    fn written(&self, objects: &mut ClusterObjects, reserved: &Reserved, versions: &[u64]) {
        let Some(r) = reserved.downcast_ref::<Reservation>() else { return };
        for (w, version) in r.claims().zip(versions) {
            objects.dra_mut().written(&w.claim, *version);
        }
    }

    fn timeout(&self) -> Duration {
        self.args.binding_timeout
    }
}
