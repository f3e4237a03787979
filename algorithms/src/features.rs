//! Feature gates (`--feature-gates Name=true,...`), for kube-scheduler features that are
//! off (or on) by default in v1.36. They are parsed once and handed to the plugins that read
//! them when the profiles are built.

/// `StorageCapacityScoring` (alpha, off): VolumeBinding scores nodes by how much of the
/// storage its claims would use there.
pub const STORAGE_CAPACITY_SCORING: &str = "StorageCapacityScoring";

/// `DRAAdminAccess` (beta, on): claims may ask for admin access to devices in use.
pub const DRA_ADMIN_ACCESS: &str = "DRAAdminAccess";
/// `DRAPrioritizedList` (beta, on): requests may list `firstAvailable` alternatives.
pub const DRA_PRIORITIZED_LIST: &str = "DRAPrioritizedList";

/// `NodeDeclaredFeatures` (beta, on): pods needing a node feature go only to nodes that
/// declare it.
pub const NODE_DECLARED_FEATURES: &str = "NodeDeclaredFeatures";

/// `SchedulerPopFromBackoffQ` (beta, on): with no pod active, a pod backing off after an
/// unschedulable attempt is retried at once.
pub const SCHEDULER_POP_FROM_BACKOFF_Q: &str = "SchedulerPopFromBackoffQ";

/// `NominatedNodeNameForExpectation` (beta, on): a pod whose binding cycle will wait (at
/// Permit, or for PreBind's work such as volume provisioning) carries its node in
/// `status.nominatedNodeName` first, for cluster autoscalers and queueing controllers.
pub const NOMINATED_NODE_NAME_FOR_EXPECTATION: &str = "NominatedNodeNameForExpectation";

/// `DRADeviceTaints` (beta, on): devices with NoSchedule or NoExecute taints are
/// allocated only to requests tolerating them.
pub const DRA_DEVICE_TAINTS: &str = "DRADeviceTaints";

/// `DRADeviceBindingConditions` (beta, on): devices that declare binding conditions are
/// allocated, and the pod is bound once the driver reports them.
pub const DRA_DEVICE_BINDING_CONDITIONS: &str = "DRADeviceBindingConditions";

/// `DRAResourceClaimDeviceStatus` (beta, on): drivers report devices' conditions in the
/// claim's status; binding conditions need it.
pub const DRA_RESOURCE_CLAIM_DEVICE_STATUS: &str = "DRAResourceClaimDeviceStatus";

/// `DRAPartitionableDevices` (beta, on): devices may consume shared counters (one GPU's
/// partitions) and slices may select nodes per device.
pub const DRA_PARTITIONABLE_DEVICES: &str = "DRAPartitionableDevices";

/// `DRAConsumableCapacity` (beta, on): devices allowing multiple allocations are shared
/// by claims while their capacity lasts.
pub const DRA_CONSUMABLE_CAPACITY: &str = "DRAConsumableCapacity";

/// `DRAExtendedResource` (beta, on): a pod's extended-resource requests go to devices of
/// the DeviceClass serving that resource on nodes that do not advertise it.
pub const DRA_EXTENDED_RESOURCE: &str = "DRAExtendedResource";

/// The gates a scheduler runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeatureGates {
    /// Whether VolumeBinding scores nodes.
    pub storage_capacity_scoring: bool,
    /// `DRAAdminAccess`.
    pub dra_admin_access: bool,
    /// `DRAPrioritizedList`.
    pub dra_prioritized_list: bool,
    /// `NodeDeclaredFeatures`.
    pub node_declared_features: bool,
    /// `SchedulerPopFromBackoffQ`.
    pub pop_from_backoff: bool,
    /// `DRADeviceTaints`.
    pub dra_device_taints: bool,
    /// `DRADeviceBindingConditions`.
    pub dra_binding_conditions: bool,
    /// `DRAResourceClaimDeviceStatus`.
    pub dra_device_status: bool,
    /// `NominatedNodeNameForExpectation`.
    pub nominate_for_expectation: bool,
    /// `DRAPartitionableDevices`.
    pub dra_partitionable: bool,
    /// `DRAConsumableCapacity`.
    pub dra_consumable_capacity: bool,
    /// `DRAExtendedResource`.
    pub dra_extended_resource: bool,
}

impl Default for FeatureGates {
    fn default() -> Self {
        FeatureGates {
            storage_capacity_scoring: false,
            dra_admin_access: true,
            dra_prioritized_list: true,
            node_declared_features: true,
            pop_from_backoff: true,
            nominate_for_expectation: true,
            dra_device_taints: true,
            dra_binding_conditions: true,
            dra_device_status: true,
            dra_partitionable: true,
            dra_consumable_capacity: true,
            dra_extended_resource: true,
        }
    }
}

impl FeatureGates {
    /// Every gate on: what a plugin can do at all.
    pub fn all_on() -> Self {
        FeatureGates {
            storage_capacity_scoring: true,
            dra_admin_access: true,
            dra_prioritized_list: true,
            node_declared_features: true,
            pop_from_backoff: true,
            nominate_for_expectation: true,
            dra_device_taints: true,
            dra_binding_conditions: true,
            dra_device_status: true,
            dra_partitionable: true,
            dra_consumable_capacity: true,
            dra_extended_resource: true,
        }
    }

    /// Gates from kube-scheduler's `--feature-gates` syntax (`A=true,B=false`), the rest
    /// at their defaults. Unknown gates and values other than true/false are errors.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let mut gates = FeatureGates::default();
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (name, value) = item.split_once('=').ok_or_else(|| format!("missing bool value for {item}"))?;
            let on = match value.trim() {
                "true" => true,
                "false" => false,
                other => return Err(format!("invalid value of {name}={other}, err: expected true or false")),
            };
            match name.trim() {
                STORAGE_CAPACITY_SCORING => gates.storage_capacity_scoring = on,
                DRA_ADMIN_ACCESS => gates.dra_admin_access = on,
                DRA_PRIORITIZED_LIST => gates.dra_prioritized_list = on,
                NODE_DECLARED_FEATURES => gates.node_declared_features = on,
                SCHEDULER_POP_FROM_BACKOFF_Q => gates.pop_from_backoff = on,
                NOMINATED_NODE_NAME_FOR_EXPECTATION => gates.nominate_for_expectation = on,
                DRA_DEVICE_TAINTS => gates.dra_device_taints = on,
                DRA_DEVICE_BINDING_CONDITIONS => gates.dra_binding_conditions = on,
                DRA_RESOURCE_CLAIM_DEVICE_STATUS => gates.dra_device_status = on,
                DRA_PARTITIONABLE_DEVICES => gates.dra_partitionable = on,
                DRA_CONSUMABLE_CAPACITY => gates.dra_consumable_capacity = on,
                DRA_EXTENDED_RESOURCE => gates.dra_extended_resource = on,
                other => return Err(format!("unrecognized feature gate: {other}")),
            }
        }
        Ok(gates)
    }

    /// The structured allocator's features under these gates.
    pub fn dra_features(&self) -> crate::dra::Features {
        crate::dra::Features {
            admin_access: self.dra_admin_access,
            prioritized_list: self.dra_prioritized_list,
            device_taints: self.dra_device_taints,
            binding_conditions: self.dra_binding_conditions && self.dra_device_status,
            partitionable: self.dra_partitionable,
            consumable_capacity: self.dra_consumable_capacity,
            extended_resource: self.dra_extended_resource,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::FeatureGates;

    #[test]
    fn gates_parse_like_kube_schedulers_flag() {
        assert_eq!(FeatureGates::parse("StorageCapacityScoring=false"), Ok(FeatureGates::default()));
        assert!(FeatureGates::parse("StorageCapacityScoring=true").unwrap().storage_capacity_scoring);
        assert_eq!(FeatureGates::parse("Nope=true").unwrap_err(), "unrecognized feature gate: Nope");
        assert!(FeatureGates::parse("StorageCapacityScoring=yes").is_err());
        assert!(FeatureGates::parse("StorageCapacityScoring").is_err());
    }
}
