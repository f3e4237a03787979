//! DynamicResources' side of extended resources backed by DRA ([`crate::dra::extended`]):
//! PreFilter finds the resources a DeviceClass serves; Filter allocates them, with the
//! pod's own claims, on each node that does not advertise them, through a claim made
//! for the node's mix (`container-<i>-request-<j>` requests); Reserve names that claim
//! and PreBind creates it, writes its allocation and records it in the pod's status.
//! A claim left from an earlier attempt fails every node until PostFilter deletes it.

use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap;

use crate::dra::extended::{self, Mapping, SpecialRequest};
use crate::dra::{self, Claim, DeviceClass, DraState, Features, Plan};
use crate::node_info::NodeInfo;
use crate::pod_info::PodInfo;

/// Filter's reason while a claim from an earlier attempt is left.
pub const STALE: &str = "cannot schedule extended resource claim";
/// PostFilter's message once it deleted that claim.
pub const DELETED: &str = "deletion of ResourceClaim completed";

/// The claims Filter allocates on nodes leaving the same resources to DRA.
pub struct Batch {
    /// The pod's unallocated claims, then (when there is one) its extended resource claim.
    pub claims: Vec<Arc<Claim>>,
    /// Their checks and compiled selectors.
    pub plan: Result<Plan, String>,
    /// The extended resource claim's requests and the containers' mappings to them.
    pub special: Option<(Vec<SpecialRequest>, Vec<Mapping>)>,
}

/// What PreFilter found of the pod's extended resources that DeviceClasses serve.
pub struct Extended {
    /// The resources, in name order, with the class serving each.
    pub served: Vec<(String, Arc<DeviceClass>)>,
    /// The pod's extended resource claim from an earlier attempt, if the API still has it.
    pub stale: Option<Arc<Claim>>,
    /// Batches by the set of resources a node leaves to DRA (bit `i`: `served[i]`).
    batches: Mutex<FxHashMap<u64, Arc<Batch>>>,
}

impl Extended {
    /// The pod's served resources; `None` when there are none (or the gate is off).
    pub fn find(pod: &PodInfo, dra: &DraState, features: Features) -> Option<Self> {
        if !features.extended_resource || pod.device_asks.is_empty() {
            return None;
        }
        let served = extended::served(&pod.device_asks, dra);
        if served.is_empty() {
            return None;
        }
        let stale = dra.special_claim(&super::pod_uid(pod)).cloned();
        Some(Extended { served, stale, batches: Mutex::default() })
    }

    /// The resources the node leaves to DRA: those it does not advertise.
    pub fn mask(&self, node: &NodeInfo) -> u64 {
        let mut mask = 0u64;
        for (i, (name, _)) in self.served.iter().enumerate().take(64) {
            if node.allocatable.get(name) == 0 {
                mask |= 1 << i;
            }
        }
        mask
    }

    /// The batch for nodes leaving `mask` to DRA, made once per cycle: the pod's own
    /// claims `base`, then a claim asking for those resources.
    pub fn batch(
        &self,
        mask: u64,
        base: &[Arc<Claim>],
        pod: &PodInfo,
        dra: &DraState,
        plugin: &super::DynamicResources,
    ) -> Arc<Batch> {
        let lock = || self.batches.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(b) = lock().get(&mask) {
            return b.clone();
        }
        let names: Vec<(String, Arc<DeviceClass>)> =
            self.served.iter().enumerate().filter(|(i, _)| mask & (1 << i) != 0).map(|(_, s)| s.clone()).collect();
        let (requests, mappings) = extended::requests_and_mappings(&pod.device_asks, &names);
        let mut claims = base.to_vec();
        let mut invalid = None;
        let special = (!requests.is_empty()).then(|| {
            let object = extended::claim_object(
                &pod.namespace,
                &pod.name,
                &super::pod_uid(pod),
                extended::IN_MEMORY_NAME,
                &requests,
            );
            match Claim::from_api(&object) {
                Ok(c) => claims.push(Arc::new(c)),
                Err(e) => invalid = Some(e),
            }
            (requests, mappings)
        });
        let plan = match invalid {
            Some(e) => Err(e),
            None => dra::plan(dra, &claims, plugin.features).map(|p| p.with_timeout(plugin.args.filter_timeout)),
        };
        let batch = Arc::new(Batch { claims, plan, special });
        lock().insert(mask, batch.clone());
        batch
    }
}
