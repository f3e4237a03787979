//! Gang scheduling: the pods of a PodGroup (scheduler-plugins' `scheduling.x-k8s.io/v1alpha1`,
//! members labelled `scheduling.x-k8s.io/pod-group: NAME`) are placed together or not at all.
//!
//! A group is tried only once at least `minMember` of its pods exist. Then all of its
//! pending pods are taken from the queue and placed one after another, each assumed in
//! the cache so that the next sees it (affinity, spreading, resources); if fewer than the
//! minimum (less those already running) found a node, every assumption is undone and the
//! whole group waits for a cluster change. A group is never left half placed, so two groups
//! that cannot both fit never hold each other's capacity.

use std::collections::HashMap;
use std::time::Duration;

use algorithms::PodInfo;
use serde_json::Value;

/// The label naming a pod's PodGroup (in the pod's namespace).
pub const POD_GROUP_LABEL: &str = "scheduling.x-k8s.io/pod-group";

/// The PodGroup API version read.
pub const POD_GROUP_API_VERSION: &str = "scheduling.x-k8s.io/v1alpha1";

/// scheduler-plugins' default `scheduleTimeoutSeconds`.
pub const DEFAULT_SCHEDULE_TIMEOUT: Duration = Duration::from_secs(60);

/// What the scheduler reads of a PodGroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodGroupSpec {
    /// `spec.minMember`: pods that must be placed together.
    pub min_member: u32,
    /// `spec.scheduleTimeoutSeconds`.
    pub schedule_timeout: Duration,
}

/// The PodGroup of `pod`, as `namespace/name`, if it names one.
pub fn group_of(pod: &PodInfo) -> Option<String> {
    pod.labels.get(POD_GROUP_LABEL).filter(|g| !g.is_empty()).map(|g| format!("{}/{g}", pod.namespace))
}

/// Reads a PodGroup object: its `namespace/name` and spec.
pub fn parse_pod_group(v: &Value) -> Result<(String, PodGroupSpec), String> {
    let name = v["metadata"]["name"].as_str().filter(|n| !n.is_empty()).ok_or("PodGroup without metadata.name")?;
    let ns = v["metadata"]["namespace"].as_str().unwrap_or("default");
    let spec = &v["spec"];
    let min_member = match &spec["minMember"] {
        Value::Null => 1,
        m => m
            .as_u64()
            .and_then(|m| u32::try_from(m).ok())
            .filter(|m| *m >= 1)
            .ok_or_else(|| format!("PodGroup {ns}/{name}: spec.minMember {m} must be a positive integer"))?,
    };
    let schedule_timeout = match &spec["scheduleTimeoutSeconds"] {
        Value::Null => DEFAULT_SCHEDULE_TIMEOUT,
        t => Duration::from_secs(t.as_u64().ok_or_else(|| {
            format!("PodGroup {ns}/{name}: spec.scheduleTimeoutSeconds {t} must be a non-negative integer")
        })?),
    };
    Ok((format!("{ns}/{name}"), PodGroupSpec { min_member, schedule_timeout }))
}

/// The PodGroups the scheduler knows, by `namespace/name`.
#[derive(Debug, Clone, Default)]
pub struct Groups {
    specs: HashMap<String, PodGroupSpec>,
}

impl Groups {
    /// Adds or replaces a group.
    pub fn upsert(&mut self, key: String, spec: PodGroupSpec) {
        self.specs.insert(key, spec);
    }

    /// Forgets a group.
    pub fn remove(&mut self, key: &str) {
        self.specs.remove(key);
    }

    /// The spec of a group.
    pub fn get(&self, key: &str) -> Option<&PodGroupSpec> {
        self.specs.get(key)
    }

    /// The group `pod` is a gang member of: it names a group the scheduler knows.
    pub fn gang_of(&self, pod: &PodInfo) -> Option<(String, PodGroupSpec)> {
        let key = group_of(pod)?;
        let spec = self.specs.get(&key)?.clone();
        Some((key, spec))
    }

    /// Whether no group is known.
    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pod_groups_are_read_with_scheduler_plugins_defaults() {
        let (key, spec) =
            parse_pod_group(&json!({"metadata": {"name": "job", "namespace": "ml"}, "spec": {"minMember": 4}}))
                .unwrap();
        assert_eq!(key, "ml/job");
        assert_eq!(spec, PodGroupSpec { min_member: 4, schedule_timeout: DEFAULT_SCHEDULE_TIMEOUT });
        let (_, spec) =
            parse_pod_group(&json!({"metadata": {"name": "j"}, "spec": {"scheduleTimeoutSeconds": 5}})).unwrap();
        assert_eq!(spec, PodGroupSpec { min_member: 1, schedule_timeout: Duration::from_secs(5) });
        for bad in [
            json!({"spec": {}}),
            json!({"metadata": {"name": "j"}, "spec": {"minMember": 0}}),
            json!({"metadata": {"name": "j"}, "spec": {"minMember": "4"}}),
        ] {
            assert!(parse_pod_group(&bad).is_err(), "{bad}");
        }
    }
}
