//! The volumes of a pod that the volume plugins look at.

use k8s_openapi::api::core::v1 as core;

use super::migration::VolumeHandle;
use super::migration::inline_handle;

/// A claim a pod mounts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodClaim {
    /// The pod's volume name.
    pub volume: String,
    /// The claim name (`<pod>-<volume>` for a generic ephemeral volume).
    pub claim: String,
    /// A generic ephemeral volume: the claim must be owned by the pod.
    pub ephemeral: bool,
    /// `namespace/claim`, the key claims are looked up by.
    pub key: String,
}

/// An in-tree disk that two pods on one node may not share (VolumeRestrictions).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Disk {
    /// A GCE persistent disk.
    GcePd {
        /// `pdName`.
        name: String,
        /// `readOnly`.
        read_only: bool,
    },
    /// An AWS EBS volume.
    AwsEbs {
        /// `volumeID`.
        id: String,
    },
    /// A Ceph RBD image.
    Rbd {
        /// `monitors`.
        monitors: Vec<String>,
        /// `pool` (`rbd` when unset).
        pool: String,
        /// `image`.
        image: String,
        /// `readOnly`.
        read_only: bool,
    },
    /// An iSCSI target.
    Iscsi {
        /// `iqn`.
        iqn: String,
        /// `readOnly`.
        read_only: bool,
    },
}

impl Disk {
    /// Whether two pods using these disks cannot share a node.
    pub fn conflicts(&self, other: &Disk) -> bool {
        match (self, other) {
            (Disk::GcePd { name: a, read_only: ra }, Disk::GcePd { name: b, read_only: rb }) => a == b && !(*ra && *rb),
            (Disk::AwsEbs { id: a }, Disk::AwsEbs { id: b }) => a == b,
            (Disk::Iscsi { iqn: a, read_only: ra }, Disk::Iscsi { iqn: b, read_only: rb }) => a == b && !(*ra && *rb),
            (
                Disk::Rbd { monitors: ma, pool: pa, image: ia, read_only: ra },
                Disk::Rbd { monitors: mb, pool: pb, image: ib, read_only: rb },
            ) => ma.iter().any(|m| mb.contains(m)) && pa == pb && ia == ib && !(*ra && *rb),
            _ => false,
        }
    }
}

/// The volumes of a pod, by what each plugin needs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct PodVolumes {
    /// Claims, in volume order.
    pub claims: Vec<PodClaim>,
    /// In-tree disks with exclusive-use rules.
    pub disks: Vec<Disk>,
    /// Inline CSI volumes: (driver, handle); the handle is unique to the pod.
    pub inline_csi: Vec<VolumeHandle>,
    /// Inline in-tree volumes of plugins migrated to CSI.
    pub inline_in_tree: Vec<VolumeHandle>,
    /// Whether the pod has any volume at all.
    pub any: bool,
}

impl PodVolumes {
    /// Reads the volumes of a pod spec.
    pub fn from_spec(namespace: &str, pod_name: &str, pod_uid: &str, spec: &core::PodSpec) -> Self {
        let mut out = PodVolumes::default();
        for v in spec.volumes.iter().flatten() {
            out.any = true;
            if let Some(c) = &v.persistent_volume_claim {
                let key = format!("{namespace}/{}", c.claim_name);
                out.claims.push(PodClaim {
                    volume: v.name.clone(),
                    claim: c.claim_name.clone(),
                    ephemeral: false,
                    key,
                });
            }
            if v.ephemeral.is_some() {
                let claim = format!("{pod_name}-{}", v.name);
                let key = format!("{namespace}/{claim}");
                out.claims.push(PodClaim { volume: v.name.clone(), claim, ephemeral: true, key });
            }
            if let Some(csi) = &v.csi {
                let handle = format!("{pod_uid}-{}", v.name);
                out.inline_csi.push(VolumeHandle { driver: csi.driver.clone(), handle });
            }
            if let Some(h) = inline_handle(v) {
                out.inline_in_tree.push(h);
            }
            if let Some(d) = disk(v) {
                out.disks.push(d);
            }
        }
        out
    }
}

fn disk(v: &core::Volume) -> Option<Disk> {
    if let Some(s) = &v.gce_persistent_disk {
        return Some(Disk::GcePd { name: s.pd_name.clone(), read_only: s.read_only.unwrap_or(false) });
    }
    if let Some(s) = &v.aws_elastic_block_store {
        return Some(Disk::AwsEbs { id: s.volume_id.clone() });
    }
    if let Some(s) = &v.rbd {
        return Some(Disk::Rbd {
            monitors: s.monitors.clone(),
            pool: s.pool.clone().filter(|p| !p.is_empty()).unwrap_or_else(|| "rbd".into()),
            image: s.image.clone(),
            read_only: s.read_only.unwrap_or(false),
        });
    }
    if let Some(s) = &v.iscsi {
        return Some(Disk::Iscsi { iqn: s.iqn.clone(), read_only: s.read_only.unwrap_or(false) });
    }
    None
}
