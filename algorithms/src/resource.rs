//! The resource vector used for requests and allocatable amounts.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

use crate::quantity::{Quantity, QuantityError};

/// CPU, in millicores.
pub const CPU: &str = "cpu";
/// Memory, in bytes.
pub const MEMORY: &str = "memory";
/// Local ephemeral storage, in bytes.
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
/// The number of pods a node can run.
pub const PODS: &str = "pods";
/// Prefix of huge page resources (`hugepages-2Mi`).
pub const HUGEPAGES_PREFIX: &str = "hugepages-";

/// CPU a container without a CPU request counts as when scoring (millicores).
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// Memory a container without a memory request counts as when scoring (bytes).
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// Amounts of every resource kind the scheduler tracks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resource {
    /// CPU in millicores.
    pub milli_cpu: i64,
    /// Memory in bytes.
    pub memory: i64,
    /// Ephemeral storage in bytes.
    pub ephemeral_storage: i64,
    /// Pod slots (only meaningful for allocatable).
    pub allowed_pod_number: i64,
    /// Extended resources, huge pages and any other named resource, sorted by name.
    pub scalar: Vec<(String, i64)>,
}

/// Whether a resource is a "scalar" one: extended, huge pages or attachable volumes.
pub fn is_scalar_resource_name(name: &str) -> bool {
    !matches!(name, CPU | MEMORY | EPHEMERAL_STORAGE | PODS)
}

/// Whether a resource name is an extended resource (`vendor.example/name`,
/// outside the `kubernetes.io/` namespace, not `requests.`-prefixed).
pub fn is_extended_resource_name(name: &str) -> bool {
    if !name.contains('/') || name.starts_with("requests.") {
        return false;
    }
    let (prefix, _) = name.split_once('/').unwrap_or((name, ""));
    !(prefix == "kubernetes.io" || prefix.ends_with(".kubernetes.io"))
}

impl Resource {
    /// Parses a `ResourceList`; `pods` is read into `allowed_pod_number`.
    pub fn from_list(list: &BTreeMap<String, ApiQuantity>) -> Result<Self, QuantityError> {
        let mut r = Resource::default();
        for (name, q) in list {
            let q = Quantity::parse_non_negative(&q.0)?;
            r.set(name, q);
        }
        Ok(r)
    }

    /// Sets one resource from a parsed quantity, in that resource's unit.
    pub fn set(&mut self, name: &str, q: Quantity) {
        match name {
            CPU => self.milli_cpu = q.milli_value(),
            _ => self.set_value(name, q.value()),
        }
    }

    /// Sets one resource to a raw value (millicores for CPU).
    pub fn set_value(&mut self, name: &str, v: i64) {
        match name {
            CPU => self.milli_cpu = v,
            MEMORY => self.memory = v,
            EPHEMERAL_STORAGE => self.ephemeral_storage = v,
            PODS => self.allowed_pod_number = v,
            _ => match self.scalar.binary_search_by(|(n, _)| n.as_str().cmp(name)) {
                Ok(i) => self.scalar[i].1 = v,
                Err(i) => self.scalar.insert(i, (name.to_string(), v)),
            },
        }
    }

    /// The amount of one resource (millicores for CPU), zero when absent.
    pub fn get(&self, name: &str) -> i64 {
        match name {
            CPU => self.milli_cpu,
            MEMORY => self.memory,
            EPHEMERAL_STORAGE => self.ephemeral_storage,
            PODS => self.allowed_pod_number,
            _ => self.scalar_value(name).unwrap_or(0),
        }
    }

    /// The amount of a scalar resource, `None` when the resource is not listed.
    pub fn scalar_value(&self, name: &str) -> Option<i64> {
        self.scalar
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .ok()
            .and_then(|i| self.scalar.get(i))
            .map(|(_, v)| *v)
    }

    /// Adds `other` to `self`, resource by resource.
    pub fn add(&mut self, other: &Resource) {
        self.milli_cpu = self.milli_cpu.saturating_add(other.milli_cpu);
        self.memory = self.memory.saturating_add(other.memory);
        self.ephemeral_storage = self.ephemeral_storage.saturating_add(other.ephemeral_storage);
        self.allowed_pod_number = self.allowed_pod_number.saturating_add(other.allowed_pod_number);
        for (name, v) in &other.scalar {
            let cur = self.get(name);
            self.set_value(name, cur.saturating_add(*v));
        }
    }

    /// Subtracts `other` from `self`, resource by resource.
    pub fn sub(&mut self, other: &Resource) {
        self.milli_cpu -= other.milli_cpu;
        self.memory -= other.memory;
        self.ephemeral_storage -= other.ephemeral_storage;
        self.allowed_pod_number -= other.allowed_pod_number;
        for (name, v) in &other.scalar {
            let cur = self.get(name);
            self.set_value(name, cur - *v);
        }
    }

    /// Raises each resource of `self` to at least `other`'s amount.
    pub fn set_max(&mut self, other: &Resource) {
        self.milli_cpu = self.milli_cpu.max(other.milli_cpu);
        self.memory = self.memory.max(other.memory);
        self.ephemeral_storage = self.ephemeral_storage.max(other.ephemeral_storage);
        self.allowed_pod_number = self.allowed_pod_number.max(other.allowed_pod_number);
        for (name, v) in &other.scalar {
            let cur = self.get(name);
            self.set_value(name, cur.max(*v));
        }
    }

    /// Whether every amount is zero.
    pub fn is_zero(&self) -> bool {
        self.milli_cpu == 0
            && self.memory == 0
            && self.ephemeral_storage == 0
            && self.scalar.iter().all(|(_, v)| *v == 0)
    }
}

/// Formats an amount of a resource for people: `1500m` CPU, `512Mi` memory.
pub fn format_amount(name: &str, v: i64) -> String {
    if name == CPU {
        if v % 1000 == 0 {
            return format!("{}", v / 1000);
        }
        return format!("{v}m");
    }
    if name == MEMORY || name == EPHEMERAL_STORAGE || name.starts_with(HUGEPAGES_PREFIX) {
        for (suffix, shift) in [("Gi", 30), ("Mi", 20), ("Ki", 10)] {
            if v != 0 && v % (1i64 << shift) == 0 {
                return format!("{}{suffix}", v >> shift);
            }
        }
    }
    v.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalar_resources_stay_sorted_and_add_up() {
        let mut a = Resource::default();
        a.set_value("nvidia.com/gpu", 2);
        a.set_value("example.com/fpga", 1);
        let mut b = Resource::default();
        b.set_value("nvidia.com/gpu", 3);
        b.milli_cpu = 500;
        a.add(&b);
        assert_eq!(a.get("nvidia.com/gpu"), 5);
        assert_eq!(a.get("example.com/fpga"), 1);
        assert_eq!(a.scalar[0].0, "example.com/fpga");
        assert_eq!(a.milli_cpu, 500);
        a.sub(&b);
        assert_eq!(a.get("nvidia.com/gpu"), 2);
    }

    #[test]
    fn extended_resource_names_exclude_the_kubernetes_namespace() {
        assert!(is_extended_resource_name("nvidia.com/gpu"));
        assert!(!is_extended_resource_name("kubernetes.io/foo"));
        assert!(!is_extended_resource_name("node.kubernetes.io/foo"));
        assert!(!is_extended_resource_name("cpu"));
        assert!(!is_extended_resource_name("hugepages-2Mi"));
    }

    #[test]
    fn amounts_format_in_familiar_units() {
        assert_eq!(format_amount(CPU, 1500), "1500m");
        assert_eq!(format_amount(CPU, 2000), "2");
        assert_eq!(format_amount(MEMORY, 512 << 20), "512Mi");
        assert_eq!(format_amount("nvidia.com/gpu", 3), "3");
    }
}
