//! VolumeZone: the zone and region labels of a pod's bound volumes must match the node's.

use crate::volumes::VolumeObjects;
use std::collections::HashSet;

use crate::events::{ClusterEvent, ObjectAction, QueueingHint};
use crate::framework::{FilterPlugin, PluginState, PreFilterOutcome};
use crate::node_info::NodeInfo;
use crate::pod_info::PodInfo;
use crate::snapshot::Snapshot;
use crate::status::Status;
use crate::volumes::VolumeState;

/// Plugin name.
pub const NAME: &str = "VolumeZone";
/// Reason when the node is outside a volume's zones or regions.
pub const ERR_REASON: &str = "node(s) had no available volume zone";

const BETA_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";
const BETA_REGION: &str = "failure-domain.beta.kubernetes.io/region";
const ZONE: &str = "topology.kubernetes.io/zone";
const REGION: &str = "topology.kubernetes.io/region";
/// The topology labels, in the order they are checked.
const KEYS: [&str; 4] = [BETA_ZONE, BETA_REGION, ZONE, REGION];

/// One topology constraint of a volume: the label and the values it allows.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Topology {
    key: &'static str,
    values: HashSet<String>,
}

/// Splits a multi-zone label value (`a__b`); `None` when an element is empty.
fn zones(value: &str) -> Option<HashSet<String>> {
    let mut out = HashSet::new();
    for part in value.split("__") {
        let p = part.trim();
        if p.is_empty() {
            return None;
        }
        out.insert(p.to_string());
    }
    Some(out)
}

/// The volume topologies of the pod's bound claims; `Err` rejects the pod.
fn topologies(pod: &PodInfo, state: &VolumeState) -> Result<Vec<Topology>, Status> {
    let mut out = Vec::new();
    for c in pod.volumes.claims.iter().filter(|c| !c.ephemeral) {
        if c.claim.is_empty() {
            return Err(Status::unresolvable("PersistentVolumeClaim had no name"));
        }
        let Some(claim) = state.claim(&c.key) else {
            return Err(Status::unresolvable(format!("persistentvolumeclaim \"{}\" not found", c.claim)));
        };
        if claim.volume_name.is_empty() {
            if claim.class.is_empty() {
                return Err(Status::unresolvable("PersistentVolumeClaim had no pv name and storageClass name"));
            }
            let Some(class) = state.class(&claim.class) else {
                return Err(Status::unresolvable(format!("storageclass.storage.k8s.io \"{}\" not found", claim.class)));
            };
            if class.wait_for_first_consumer {
                continue;
            }
            return Err(Status::unresolvable("PersistentVolume had no name"));
        }
        let Some(volume) = state.volume(&claim.volume_name) else {
            return Err(Status::unresolvable(format!("persistentvolume \"{}\" not found", claim.volume_name)));
        };
        for key in KEYS {
            if let Some(values) = volume.labels.get(key).and_then(|v| zones(v)) {
                out.push(Topology { key, values });
            }
        }
    }
    Ok(out)
}

/// The GA name of a beta topology label.
fn to_ga(key: &str) -> &str {
    match key {
        BETA_ZONE => ZONE,
        BETA_REGION => REGION,
        other => other,
    }
}

/// The VolumeZone filter.
#[derive(Debug, Default)]
pub struct VolumeZone;

impl FilterPlugin for VolumeZone {
    fn name(&self) -> &'static str {
        NAME
    }

    fn pre_filter(&self, pod: &PodInfo, snapshot: &Snapshot) -> PreFilterOutcome {
        if pod.volumes.claims.is_empty() {
            return PreFilterOutcome::skip();
        }
        match topologies(pod, snapshot.objects.volumes()) {
            Ok(t) if t.is_empty() => PreFilterOutcome::skip(),
            Ok(t) => PreFilterOutcome::run(PluginState::new(t)),
            Err(st) => PreFilterOutcome::reject(st),
        }
    }

    fn filter(&self, state: &PluginState, _: &PodInfo, node: &NodeInfo) -> Status {
        let Some(topologies) = state.get::<Vec<Topology>>() else {
            return Status::error("VolumeZone state is missing");
        };
        if !KEYS.iter().any(|k| node.labels.contains_key(*k)) {
            return Status::success();
        }
        for t in topologies {
            let value = node.labels.get(t.key).or_else(|| node.labels.get(to_ga(t.key)));
            if !value.is_some_and(|v| t.values.contains(v)) {
                return Status::unresolvable(ERR_REASON).with_detail_fn(|| {
                    let mut allowed: Vec<&str> = t.values.iter().map(String::as_str).collect();
                    allowed.sort_unstable();
                    format!("volume needs {} in [{}]", t.key, allowed.join(", "))
                });
            }
        }
        Status::success()
    }

    fn queueing_hint(&self, pod: &PodInfo, event: &ClusterEvent) -> QueueingHint {
        QueueingHint::from_bool(match event {
            ClusterEvent::NodeAdded(_) => true,
            ClusterEvent::NodeUpdated { old, new } => old.labels != new.labels,
            ClusterEvent::Object(e) => match (e.kind, e.action) {
                (_, ObjectAction::Delete) => false,
                (crate::volumes::kinds::CLAIM, _) => super::volume_binding::uses_claim(pod, &e.key),
                (crate::volumes::kinds::VOLUME, _) | (crate::volumes::kinds::CLASS, ObjectAction::Add) => true,
                _ => false,
            },
            _ => false,
        })
    }
}

#[cfg(test)]
mod tests;
