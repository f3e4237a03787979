//! What devices allocated through DRA count as, for quotas: each device a claim holds
//! counts once under ResourceQuota's key for its DeviceClass
//! (`<class>.deviceclass.resource.k8s.io/devices`) and, when the class serves an
//! extended resource (`spec.extendedResourceName`), once under that resource too, so
//! that a quota's `nvidia.com/gpu` counts GPUs asked for through claims as it counts
//! those asked for as an extended resource. A pod's extended resource claim (made for
//! it from its containers' requests) counts under the class's key only: its containers'
//! requests already count the extended resource.

use super::objects::{Alternative, Claim};
use super::state::{DraState, special_owner};
use crate::pod_info::PodInfo;
use crate::resource::Resource;

/// The end of ResourceQuota's key for a DeviceClass's devices.
pub const DEVICES_KEY_SUFFIX: &str = ".deviceclass.resource.k8s.io/devices";

/// ResourceQuota's key for the devices of `class`.
pub fn devices_key(class: &str) -> String {
    format!("{class}{DEVICES_KEY_SUFFIX}")
}

/// Whether `name` is ResourceQuota's key for a DeviceClass's devices.
pub fn is_devices_key(name: &str) -> bool {
    name.len() > DEVICES_KEY_SUFFIX.len() && name.ends_with(DEVICES_KEY_SUFFIX)
}

/// What one device taken for `alt`, an alternative of `claim`, counts as: the class's
/// key, and the extended resource the class serves unless `claim` is a pod's extended
/// resource claim.
pub fn alternative_keys(dra: &DraState, claim: &Claim, alt: &Alternative) -> Vec<String> {
    let mut keys = vec![devices_key(&alt.class)];
    if special_owner(claim).is_none()
        && let Some(resource) = dra.class(&alt.class).and_then(|c| c.extended_resource_name.clone())
    {
        keys.push(resource);
    }
    keys
}

/// What an allocated claim's devices count as (`None` while it is not allocated): each
/// device of its allocation once (the `firstAvailable` alternative taken, every device
/// an `All` request got, a partition as one device), except those taken with admin
/// access, which consume nothing.
pub fn allocated_charge(dra: &DraState, claim: &Claim) -> Option<Resource> {
    let allocation = claim.allocation()?;
    let mut charge = Resource::default();
    for result in allocation.devices.iter().flat_map(|d| d.results.iter().flatten()) {
        if result.admin_access == Some(true) {
            continue;
        }
        let mut alternatives = claim.requests.iter().flat_map(|r| r.alternatives.iter());
        let Some(alt) = alternatives.find(|a| a.name == result.request) else { continue };
        for key in alternative_keys(dra, claim, alt) {
            charge.set_value(&key, charge.get(&key) + 1);
        }
    }
    Some(charge)
}

/// The claims a pod uses, by key (`namespace/name`): those its spec names that exist
/// by name, and its extended resource claim.
pub fn pod_claim_keys(dra: &DraState, pod: &PodInfo) -> Vec<String> {
    if pod.resource_claims.is_empty() && pod.device_asks.is_empty() {
        return Vec::new();
    }
    let mut keys: Vec<String> = pod
        .resource_claims
        .iter()
        .filter(|c| !c.not_needed)
        .filter_map(|c| c.claim.as_ref())
        .map(|name| format!("{}/{name}", pod.namespace))
        .collect();
    if let Some(special) = dra.special_claim(&super::pod_uid(pod)) {
        let key = special.key();
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    keys
}
