//! A quota's place in a quota tree, with Koordinator's conventions on the ElasticQuota
//! CRD: the parent it names, whether it is a parent, its weight in dividing what its
//! parent has beyond the guarantees, whether it lends its idle guarantee, and the pods
//! that name it.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

use super::{ElasticQuota, counted};
use crate::quantity::Quantity;
use crate::resource::Resource;

/// The label naming a quota's parent (by name; none, or empty, for a top-level quota).
pub const PARENT_LABEL: &str = "quota.scheduling.koordinator.sh/parent";
/// The label making a quota a parent (`"true"`).
pub const IS_PARENT_LABEL: &str = "quota.scheduling.koordinator.sh/is-parent";
/// The label that, `"false"`, keeps a quota's idle guarantee from its siblings.
pub const ALLOW_LENT_LABEL: &str = "quota.scheduling.koordinator.sh/allow-lent-resource";
/// The annotation with a quota's weights (a JSON resource list; its `max` by default).
pub const SHARED_WEIGHT_ANNOTATION: &str = "quota.scheduling.koordinator.sh/shared-weight";
/// The pod label naming the quota a pod counts against (else its namespace's).
pub const QUOTA_NAME_LABEL: &str = "quota.scheduling.koordinator.sh/name";
/// The pod label that, `"false"`, keeps a pod from being evicted for quotas; such pods
/// are admitted only within their quota's `min`.
pub const PREEMPTIBLE_LABEL: &str = "quota.scheduling.koordinator.sh/preemptible";

/// Whether `pod` may be evicted for quotas (its [`PREEMPTIBLE_LABEL`] is not `"false"`).
pub fn preemptible(pod: &crate::pod_info::PodInfo) -> bool {
    pod.labels.get(PREEMPTIBLE_LABEL).map(String::as_str) != Some("false")
}

/// A quota's place in a tree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Place {
    /// The parent's name; `None` at the top.
    pub parent: Option<String>,
    /// It is a parent.
    pub is_parent: bool,
    /// Its weights, by resource; `None`: its `max`.
    pub weight: Option<Resource>,
    /// Its idle guarantee may go to its siblings.
    pub lends: bool,
    /// The resources its `max` names: the ones its runtime share is computed and checked
    /// for.
    pub limited: Vec<String>,
}

impl Place {
    /// Reads the labels and annotation of a quota.
    pub fn from_api(q: &ElasticQuota) -> Result<Self, String> {
        let labels = q.metadata.labels.as_ref();
        let label = |k: &str| labels.and_then(|l| l.get(k)).map(String::as_str);
        let weight = match q.metadata.annotations.as_ref().and_then(|a| a.get(SHARED_WEIGHT_ANNOTATION)) {
            None => None,
            Some(text) => {
                let list: BTreeMap<String, ApiQuantity> =
                    serde_json::from_str(text).map_err(|e| format!("annotation {SHARED_WEIGHT_ANNOTATION}: {e}"))?;
                let mut w = Resource::default();
                for (name, v) in list.iter().filter(|(n, _)| counted(n)) {
                    let v = Quantity::parse_non_negative(&v.0)
                        .map_err(|e| format!("annotation {SHARED_WEIGHT_ANNOTATION}: {name}: {e}"))?;
                    w.set(name, v);
                }
                // All zero is no weight at all: the max stands.
                (!w.is_zero()).then_some(w)
            }
        };
        let mut limited: Vec<String> =
            q.spec.max.as_ref().map(|m| m.keys().filter(|n| counted(n)).cloned().collect()).unwrap_or_default();
        limited.sort();
        Ok(Place {
            parent: label(PARENT_LABEL).filter(|p| !p.is_empty()).map(str::to_string),
            is_parent: label(IS_PARENT_LABEL) == Some("true"),
            weight,
            lends: label(ALLOW_LENT_LABEL) != Some("false"),
            limited,
        })
    }
}
