//! Storage objects in their parsed form, for tests and synthetic workloads.

use crate::labels::{LabelSelector, NodeSelector, NodeSelectorTerm, Operator, Requirement};
use crate::volumes::{Capacity, ClaimRef, CsiNode, StorageClass, Volume, VolumeClaim, VolumeHandle};

/// One GiB.
pub const GI: i64 = 1 << 30;

/// An unbound claim `default/<name>` of `class` asking for ReadWriteOnce.
pub fn claim(name: &str, class: &str) -> VolumeClaim {
    VolumeClaim {
        namespace: "default".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        class: class.into(),
        access_modes: vec!["ReadWriteOnce".into()],
        ..Default::default()
    }
}

/// A claim bound to `volume`, binding completed.
pub fn bound_claim(name: &str, class: &str, volume: &str) -> VolumeClaim {
    VolumeClaim { volume_name: volume.into(), bind_completed: true, ..claim(name, class) }
}

/// A claim of `class` asking for `bytes`.
pub fn sized_claim(name: &str, class: &str, bytes: i64) -> VolumeClaim {
    VolumeClaim { request: bytes, request_set: true, ..claim(name, class) }
}

/// An Available ReadWriteOnce volume of `class` and `bytes`.
pub fn volume(name: &str, class: &str, bytes: i64) -> Volume {
    Volume {
        name: name.into(),
        class: class.into(),
        capacity: bytes,
        access_modes: vec!["ReadWriteOnce".into()],
        phase: "Available".into(),
        ..Default::default()
    }
}

/// A node affinity of one term requiring `key` In `values`, per pair.
pub fn affinity(pairs: &[(&str, &str)]) -> Option<NodeSelector> {
    let expressions =
        pairs.iter().filter_map(|(k, v)| Requirement::new(k, "In", &[v.to_string()], true).ok()).collect();
    Some(NodeSelector { terms: vec![NodeSelectorTerm { expressions, fields: Vec::new() }], errors: Vec::new() })
}

/// The volume with a node affinity.
pub fn on(mut v: Volume, pairs: &[(&str, &str)]) -> Volume {
    v.node_affinity = affinity(pairs);
    v
}

/// The volume bound to a claim.
pub fn claimed(mut v: Volume, claim: &VolumeClaim) -> Volume {
    v.claim_ref =
        Some(ClaimRef { namespace: claim.namespace.clone(), name: claim.name.clone(), uid: claim.uid.clone() });
    v.phase = "Bound".into();
    v
}

/// A CSI volume of `driver`.
pub fn csi(mut v: Volume, driver: &str) -> Volume {
    v.handle = Some(VolumeHandle { driver: driver.into(), handle: v.name.clone() });
    v
}

/// A storage class.
pub fn class(name: &str, provisioner: &str, wait: bool) -> StorageClass {
    StorageClass {
        name: name.into(),
        provisioner: provisioner.into(),
        wait_for_first_consumer: wait,
        ..Default::default()
    }
}

/// A CSINode with attach limits per driver.
pub fn csi_node(name: &str, limits: &[(&str, Option<i64>)], migrated: &[&str]) -> CsiNode {
    CsiNode {
        name: name.into(),
        drivers: limits.iter().map(|(d, c)| (d.to_string(), *c)).collect(),
        migrated: migrated.iter().map(|m| m.to_string()).collect(),
    }
}

/// A capacity of `class` on nodes labelled `key=value` (`None`: every node).
pub fn capacity(name: &str, class: &str, on: Option<(&str, &str)>, bytes: Option<i64>, max: Option<i64>) -> Capacity {
    let topology = match on {
        Some((k, v)) => {
            let mut s = LabelSelector::default();
            s.push(k, Operator::In, v);
            s
        }
        None => LabelSelector::default(),
    };
    Capacity {
        namespace: "default".into(),
        name: name.into(),
        class: class.into(),
        topology: Some(topology),
        capacity: bytes,
        maximum_volume_size: max,
    }
}
