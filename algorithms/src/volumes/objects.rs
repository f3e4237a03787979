//! The storage objects the volume plugins read, parsed once from their API form:
//! PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes, CSIDrivers and
//! CSIStorageCapacities.

use super::migration::{self, VolumeHandle};
use rustc_hash::FxHashMap as HashMap;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::storage::v1 as storage;

use crate::labels::{LabelSelector, Labels, NodeSelector, SelectorError};
use crate::quantity::Quantity;

/// The claim annotation naming the node chosen for provisioning.
pub const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// The claim annotation the PV controller sets once binding finished.
pub const BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// The PV annotation saying the PV controller (or the scheduler) bound it.
pub const BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// The deprecated annotation naming a claim's or volume's class.
const BETA_CLASS: &str = "volume.beta.kubernetes.io/storage-class";
/// The provisioner that means "static volumes only".
pub const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";

/// `spec.claimRef` of a PersistentVolume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRef {
    /// Namespace of the claim.
    pub namespace: String,
    /// Name of the claim.
    pub name: String,
    /// UID of the claim; empty when the volume is pre-bound by name only.
    pub uid: String,
}

/// A PersistentVolumeClaim.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VolumeClaim {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID.
    pub uid: String,
    /// `metadata.resourceVersion`.
    pub resource_version: String,
    /// Storage class (`spec.storageClassName`, else the beta annotation); empty: none.
    pub class: String,
    /// `spec.volumeName`; empty while unbound.
    pub volume_name: String,
    /// Access modes asked for.
    pub access_modes: Vec<String>,
    /// `spec.volumeMode` is `Block`.
    pub block: bool,
    /// `spec.volumeAttributesClassName` (empty when unset).
    pub attributes_class: String,
    /// Requested storage in bytes (0 when unset).
    pub request: i64,
    /// Whether `requests.storage` is set at all.
    pub request_set: bool,
    /// `spec.selector`; `None` when unset.
    pub selector: Option<LabelSelector>,
    /// The `volume.kubernetes.io/selected-node` annotation.
    pub selected_node: Option<String>,
    /// The `pv.kubernetes.io/bind-completed` annotation is present.
    pub bind_completed: bool,
    /// Has a deletion timestamp.
    pub deleting: bool,
    /// UID of the controlling owner, for generic ephemeral volumes.
    pub controller_uid: Option<String>,
    /// `status.phase`.
    pub phase: String,
}

impl VolumeClaim {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Bound to a volume and the binding completed (kube-scheduler's "fully bound").
    pub fn fully_bound(&self) -> bool {
        !self.volume_name.is_empty() && self.bind_completed
    }

    /// Whether the claim asks for the `ReadWriteOncePod` access mode.
    pub fn read_write_once_pod(&self) -> bool {
        self.access_modes.iter().any(|m| m == "ReadWriteOncePod")
    }

    /// Parses an API claim.
    pub fn from_api(pvc: &core::PersistentVolumeClaim) -> Result<Self, String> {
        let meta = &pvc.metadata;
        let spec = pvc.spec.clone().unwrap_or_default();
        let annotations = meta.annotations.clone().unwrap_or_default();
        let class = spec.storage_class_name.clone().or_else(|| annotations.get(BETA_CLASS).cloned());
        let asked = spec.resources.as_ref().and_then(|r| r.requests.as_ref()).and_then(|r| r.get("storage"));
        let request = match asked {
            Some(q) => Quantity::parse(&q.0).map_err(|e| format!("spec.resources.requests.storage: {e}"))?.value(),
            None => 0,
        };
        let selector = spec.selector.as_ref().map(LabelSelector::parse).transpose().map_err(selector_error)?;
        Ok(VolumeClaim {
            namespace: meta.namespace.clone().unwrap_or_else(|| "default".into()),
            name: meta.name.clone().ok_or("metadata.name is missing")?,
            uid: meta.uid.clone().unwrap_or_default(),
            resource_version: meta.resource_version.clone().unwrap_or_default(),
            class: class.unwrap_or_default(),
            volume_name: spec.volume_name.clone().unwrap_or_default(),
            access_modes: spec.access_modes.clone().unwrap_or_default(),
            block: spec.volume_mode.as_deref() == Some("Block"),
            attributes_class: spec.volume_attributes_class_name.clone().unwrap_or_default(),
            request,
            request_set: asked.is_some(),
            selector,
            selected_node: annotations.get(SELECTED_NODE).cloned(),
            bind_completed: annotations.contains_key(BIND_COMPLETED),
            deleting: meta.deletion_timestamp.is_some(),
            controller_uid: meta
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.controller == Some(true))
                .map(|o| o.uid.clone()),
            phase: pvc.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default(),
        })
    }
}

fn selector_error(e: SelectorError) -> String {
    format!("spec.selector: {e}")
}

/// A PersistentVolume.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Volume {
    /// Name.
    pub name: String,
    /// `metadata.resourceVersion`.
    pub resource_version: String,
    /// Storage class; empty: none.
    pub class: String,
    /// Capacity in bytes.
    pub capacity: i64,
    /// Access modes offered.
    pub access_modes: Vec<String>,
    /// `spec.volumeMode` is `Block`.
    pub block: bool,
    /// `spec.volumeAttributesClassName` (empty when unset).
    pub attributes_class: String,
    /// Labels (zone and region among them).
    pub labels: Labels,
    /// Required node affinity; `None` when the volume is reachable from every node.
    pub node_affinity: Option<NodeSelector>,
    /// The claim it is bound or pre-bound to.
    pub claim_ref: Option<ClaimRef>,
    /// `status.phase`.
    pub phase: String,
    /// Has a deletion timestamp.
    pub deleting: bool,
    /// Driver and handle, for attach limits.
    pub handle: Option<VolumeHandle>,
    /// Annotations, kept so that API updates can carry them.
    pub annotations: Labels,
}

impl Volume {
    /// Parses an API volume.
    pub fn from_api(pv: &core::PersistentVolume) -> Result<Self, String> {
        let meta = &pv.metadata;
        let spec = pv.spec.clone().unwrap_or_default();
        let annotations = meta.annotations.clone().unwrap_or_default();
        let capacity = match spec.capacity.as_ref().and_then(|c| c.get("storage")) {
            Some(q) => Quantity::parse(&q.0).map_err(|e| format!("spec.capacity.storage: {e}"))?.value(),
            None => 0,
        };
        Ok(Volume {
            name: meta.name.clone().ok_or("metadata.name is missing")?,
            resource_version: meta.resource_version.clone().unwrap_or_default(),
            class: spec.storage_class_name.clone().or_else(|| annotations.get(BETA_CLASS).cloned()).unwrap_or_default(),
            capacity,
            access_modes: spec.access_modes.clone().unwrap_or_default(),
            block: spec.volume_mode.as_deref() == Some("Block"),
            attributes_class: spec.volume_attributes_class_name.clone().unwrap_or_default(),
            labels: meta.labels.clone().unwrap_or_default(),
            node_affinity: spec.node_affinity.as_ref().and_then(|a| a.required.as_ref()).map(NodeSelector::parse),
            claim_ref: spec.claim_ref.as_ref().map(|r| ClaimRef {
                namespace: r.namespace.clone().unwrap_or_default(),
                name: r.name.clone().unwrap_or_default(),
                uid: r.uid.clone().unwrap_or_default(),
            }),
            phase: pv.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default(),
            deleting: meta.deletion_timestamp.is_some(),
            handle: migration::pv_handle(&spec),
            annotations,
        })
    }

    /// Whether the volume's node affinity admits a node with these labels (no affinity
    /// admits every node; an affinity without usable terms admits none).
    pub fn admits(&self, node_labels: &Labels) -> bool {
        self.node_affinity.as_ref().is_none_or(|a| a.matches("", node_labels))
    }
}

/// One `allowedTopologies` term: every key must carry one of its values.
pub type TopologyTerm = Vec<(String, Vec<String>)>;

/// A StorageClass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StorageClass {
    /// Name.
    pub name: String,
    /// Provisioner.
    pub provisioner: String,
    /// `volumeBindingMode: WaitForFirstConsumer`.
    pub wait_for_first_consumer: bool,
    /// `allowedTopologies` terms, ORed; empty: everywhere.
    pub allowed_topologies: Vec<TopologyTerm>,
}

impl StorageClass {
    /// Parses an API class.
    pub fn from_api(sc: &storage::StorageClass) -> Result<Self, String> {
        Ok(StorageClass {
            name: sc.metadata.name.clone().ok_or("metadata.name is missing")?,
            provisioner: sc.provisioner.clone(),
            wait_for_first_consumer: sc.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer"),
            allowed_topologies: sc
                .allowed_topologies
                .iter()
                .flatten()
                .map(|t| {
                    t.match_label_expressions.iter().flatten().map(|e| (e.key.clone(), e.values.clone())).collect()
                })
                .collect(),
        })
    }

    /// Whether a node with these labels is inside `allowedTopologies`.
    pub fn allows(&self, node_labels: &Labels) -> bool {
        self.allowed_topologies.is_empty()
            || self
                .allowed_topologies
                .iter()
                .any(|term| term.iter().all(|(k, vs)| node_labels.get(k).is_some_and(|v| vs.iter().any(|x| x == v))))
    }
}

/// A CSINode: the CSI drivers installed on a node and their attach limits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CsiNode {
    /// Name (the node's).
    pub name: String,
    /// Driver name to `allocatable.count` (`None`: no limit).
    pub drivers: HashMap<String, Option<i64>>,
    /// In-tree plugins migrated to CSI on this node (`storage.alpha.kubernetes.io/migrated-plugins`).
    pub migrated: Vec<String>,
}

impl CsiNode {
    /// Parses an API CSINode.
    pub fn from_api(n: &storage::CSINode) -> Result<Self, String> {
        let migrated = n
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("storage.alpha.kubernetes.io/migrated-plugins"))
            .map(|s| s.split(',').map(|p| p.trim().to_string()).filter(|p| !p.is_empty()).collect())
            .unwrap_or_default();
        Ok(CsiNode {
            name: n.metadata.name.clone().ok_or("metadata.name is missing")?,
            drivers: n
                .spec
                .drivers
                .iter()
                .map(|d| (d.name.clone(), d.allocatable.as_ref().and_then(|a| a.count).map(i64::from)))
                .collect(),
            migrated,
        })
    }
}

/// A CSIDriver.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CsiDriver {
    /// Name.
    pub name: String,
    /// `spec.storageCapacity`: the scheduler checks CSIStorageCapacity objects.
    pub storage_capacity: bool,
}

impl CsiDriver {
    /// Parses an API CSIDriver.
    pub fn from_api(d: &storage::CSIDriver) -> Result<Self, String> {
        Ok(CsiDriver {
            name: d.metadata.name.clone().ok_or("metadata.name is missing")?,
            storage_capacity: d.spec.storage_capacity.unwrap_or(false),
        })
    }
}

/// A CSIStorageCapacity: free space of one class in one topology segment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Capacity {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Storage class.
    pub class: String,
    /// Which nodes the segment covers; `None` covers none.
    pub topology: Option<LabelSelector>,
    /// Free capacity in bytes; `None` when unknown.
    pub capacity: Option<i64>,
    /// Largest volume that can be created, in bytes; `None` when unknown.
    pub maximum_volume_size: Option<i64>,
}

impl Capacity {
    /// Parses an API CSIStorageCapacity.
    pub fn from_api(c: &storage::CSIStorageCapacity) -> Result<Self, String> {
        let bytes = |q: &Option<k8s_openapi::apimachinery::pkg::api::resource::Quantity>, field: &str| {
            q.as_ref()
                .map(|q| Quantity::parse(&q.0).map(|q| q.value()).map_err(|e| format!("{field}: {e}")))
                .transpose()
        };
        Ok(Capacity {
            namespace: c.metadata.namespace.clone().unwrap_or_default(),
            name: c.metadata.name.clone().ok_or("metadata.name is missing")?,
            class: c.storage_class_name.clone(),
            topology: c
                .node_topology
                .as_ref()
                .map(LabelSelector::parse)
                .transpose()
                .map_err(|e| format!("nodeTopology: {e}"))?,
            capacity: bytes(&c.capacity, "capacity")?,
            maximum_volume_size: bytes(&c.maximum_volume_size, "maximumVolumeSize")?,
        })
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}
