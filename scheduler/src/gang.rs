//! Gang scheduling: the pods of a PodGroup are placed together or not at all. Two APIs
//! name groups: scheduler-plugins' `scheduling.x-k8s.io/v1alpha1` PodGroup (members
//! labelled `scheduling.x-k8s.io/pod-group: NAME`, `spec.minMember`), as Kubeflow's
//! training operator creates it, and Kubernetes' own alpha `scheduling.k8s.io/v1alpha2`
//! PodGroup (members set `spec.schedulingGroup.podGroupName`; a gang policy's
//! `minCount`; a basic policy schedules members one by one).
//!
//! A group is tried only once at least its minimum of pods exist. Then all of its
//! pending pods are taken from the queue and placed one after another on a copy of the
//! snapshot, each on its node so that the next sees it (affinity, spreading, resources,
//! what Reserve plugins take), without the state lock; once at least the minimum (less
//! those already running) found a node, all of them are assumed in the cache together
//! (if the cluster changed so that one can no longer be, none is, and the group is
//! retried); otherwise nothing was assumed and the whole group waits for a cluster change. A group is never left half placed, so two groups
//! that cannot both fit never hold each other's capacity. A pod naming a
//! `scheduling.k8s.io` PodGroup that does not exist yet waits for it.

use std::collections::HashMap;
use std::time::Duration;

use algorithms::PodInfo;
use serde_json::Value;

/// The label naming a pod's PodGroup (in the pod's namespace).
pub use algorithms::pod_info::POD_GROUP_LABEL;

/// scheduler-plugins' PodGroup API version.
pub const POD_GROUP_API_VERSION: &str = "scheduling.x-k8s.io/v1alpha1";

/// Kubernetes' PodGroup API version.
pub const KUBE_POD_GROUP_API_VERSION: &str = "scheduling.k8s.io/v1alpha2";

/// The annotation on a scheduler-plugins PodGroup naming the node label whose domains
/// (one rack, one block, one NVLink domain) must each hold the whole group. Its prefix is
/// this scheduler's own: scheduler-plugins' API has no such field and its group's domain
/// is not ours to extend, and Kueue's `podset-required-topology` annotation, which means
/// the same, belongs on pod templates and is read by Kueue. The value has the meaning of
/// Kubernetes' `spec.schedulingConstraints.topology[].key`.
pub const TOPOLOGY_ANNOTATION: &str = "custom-scheduler/required-topology";

/// scheduler-plugins' default `scheduleTimeoutSeconds`.
pub const DEFAULT_SCHEDULE_TIMEOUT: Duration = Duration::from_secs(60);

/// What the scheduler reads of a PodGroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodGroupSpec {
    /// `spec.minMember`: pods that must be placed together.
    pub min_member: u32,
    /// `spec.scheduleTimeoutSeconds`.
    pub schedule_timeout: Duration,
    /// The node label whose domains must each hold the whole group, when it is
    /// constrained (Kubernetes' `schedulingConstraints.topology`, or
    /// [`TOPOLOGY_ANNOTATION`]).
    pub topology_key: Option<String>,
}

impl PodGroupSpec {
    /// A group of at least `min_member` pods, with the default timeout.
    pub fn with_min(min_member: u32) -> Self {
        PodGroupSpec { min_member, schedule_timeout: DEFAULT_SCHEDULE_TIMEOUT, topology_key: None }
    }

    /// The group constrained to one domain of the node label `key`.
    pub fn within(mut self, key: &str) -> Self {
        self.topology_key = Some(key.to_string());
        self
    }
}

/// Whether `key` is a label key: an optional DNS-subdomain prefix and `/`, then a name of
/// at most 63 alphanumerics, `-`, `_` and `.`, beginning and ending alphanumeric.
fn valid_label_key(key: &str) -> bool {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|l| {
                !l.is_empty()
                    && l.len() <= 63
                    && l.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            })
    });
    name_ok && prefix_ok
}

/// A topology key as read: a non-empty label key.
fn topology_key(key: &Value, at: &str, group: &str) -> Result<Option<String>, String> {
    match key {
        Value::Null => Ok(None),
        Value::String(k) if !k.is_empty() && valid_label_key(k) => Ok(Some(k.clone())),
        other => Err(format!("PodGroup {group}: {at} {other} is not a label key")),
    }
}

/// The PodGroup of `pod`, as `namespace/name`, if it names one (`spec.schedulingGroup`
/// first, then the scheduler-plugins label).
pub fn group_of(pod: &PodInfo) -> Option<String> {
    group_name(pod).map(|name| format!("{}/{name}", pod.namespace))
}

/// The name (without the namespace) of the PodGroup `pod` names, if any, without
/// allocating.
pub fn group_name(pod: &PodInfo) -> Option<&str> {
    pod.group_name()
}

/// Whether `pod` names the group `namespace/name` (through either API), without
/// allocating: the queue asks it of every pending pod.
pub fn is_member(pod: &PodInfo, group: &str) -> bool {
    let Some((ns, name)) = group.split_once('/') else { return false };
    group_name(pod) == Some(name) && pod.namespace == ns
}

/// Reads a `scheduling.k8s.io/v1alpha2` PodGroup: its `namespace/name`, and its spec when
/// its policy is gang (`None` for the basic policy).
pub fn parse_kube_pod_group(v: &Value) -> Result<(String, Option<PodGroupSpec>), String> {
    let name = v["metadata"]["name"].as_str().filter(|n| !n.is_empty()).ok_or("PodGroup without metadata.name")?;
    let ns = v["metadata"]["namespace"].as_str().unwrap_or("default");
    let key = format!("{ns}/{name}");
    let gang = &v["spec"]["schedulingPolicy"]["gang"];
    if gang.is_null() {
        return Ok((key, None));
    }
    let min = gang["minCount"].as_u64().and_then(|m| u32::try_from(m).ok()).filter(|m| *m >= 1).ok_or_else(|| {
        format!("PodGroup {key}: spec.schedulingPolicy.gang.minCount {} must be positive", gang["minCount"])
    })?;
    // One key for now, as the alpha API allows.
    let topology = topology_key(
        &v["spec"]["schedulingConstraints"]["topology"][0]["key"],
        "spec.schedulingConstraints.topology[0].key",
        &key,
    )?;
    Ok((
        key,
        Some(PodGroupSpec { min_member: min, schedule_timeout: DEFAULT_SCHEDULE_TIMEOUT, topology_key: topology }),
    ))
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
    let key = format!("{ns}/{name}");
    let topology = topology_key(&v["metadata"]["annotations"][TOPOLOGY_ANNOTATION], TOPOLOGY_ANNOTATION, &key)?;
    Ok((key, PodGroupSpec { min_member, schedule_timeout, topology_key: topology }))
}

/// Where a group is defined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Api {
    /// `scheduling.x-k8s.io/v1alpha1` (members by label).
    SchedulerPlugins,
    /// `scheduling.k8s.io/v1alpha2` (members by `spec.schedulingGroup`).
    Kubernetes,
}

/// The API a pod names its group through.
pub fn api_of(pod: &PodInfo) -> Api {
    if pod.scheduling_group.is_some() { Api::Kubernetes } else { Api::SchedulerPlugins }
}

/// The PodGroups the scheduler knows, by API and `namespace/name`; `None` specs are
/// Kubernetes groups with the basic policy.
#[derive(Debug, Clone, Default)]
pub struct Groups {
    specs: HashMap<(Api, String), Option<PodGroupSpec>>,
}

impl Groups {
    /// Adds or replaces a scheduler-plugins group.
    pub fn upsert(&mut self, key: String, spec: PodGroupSpec) {
        self.specs.insert((Api::SchedulerPlugins, key), Some(spec));
    }

    /// Replaces every group of `api`.
    pub fn set_all(&mut self, api: Api, groups: impl IntoIterator<Item = (String, Option<PodGroupSpec>)>) {
        self.specs.retain(|(a, _), _| *a != api);
        self.specs.extend(groups.into_iter().map(|(k, s)| ((api, k), s)));
    }

    /// The spec of a gang group of `api`.
    pub fn spec(&self, api: Api, key: &str) -> Option<&PodGroupSpec> {
        self.specs.get(&(api, key.to_string()))?.as_ref()
    }

    /// The topology key PodGroups are held to (the first by name, if they differ).
    pub fn topology_key(&self) -> Option<&str> {
        self.specs.values().flatten().filter_map(|s| s.topology_key.as_deref()).min()
    }

    /// The group `pod` is a gang member of: it names a gang group the scheduler knows.
    pub fn gang_of(&self, pod: &PodInfo) -> Option<(String, PodGroupSpec)> {
        let key = group_of(pod)?;
        let spec = self.specs.get(&(api_of(pod), key.clone()))?.clone()?;
        Some((key, spec))
    }

    /// The `scheduling.k8s.io` group `pod` names when it does not exist (yet): such a pod
    /// waits for it.
    pub fn missing(&self, pod: &PodInfo) -> Option<String> {
        pod.scheduling_group.as_ref()?;
        let key = group_of(pod)?;
        (!self.specs.contains_key(&(Api::Kubernetes, key.clone()))).then_some(key)
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
        assert_eq!(spec, PodGroupSpec::with_min(4));
        let (_, spec) =
            parse_pod_group(&json!({"metadata": {"name": "j"}, "spec": {"scheduleTimeoutSeconds": 5}})).unwrap();
        assert_eq!(spec, PodGroupSpec { schedule_timeout: Duration::from_secs(5), ..PodGroupSpec::with_min(1) });
        let racked = json!({"metadata": {"name": "j", "annotations": {TOPOLOGY_ANNOTATION: "example.com/rack"}}});
        assert_eq!(parse_pod_group(&racked).unwrap().1.topology_key.as_deref(), Some("example.com/rack"));
        for bad in [
            json!({"spec": {}}),
            json!({"metadata": {"name": "j"}, "spec": {"minMember": 0}}),
            json!({"metadata": {"name": "j"}, "spec": {"minMember": "4"}}),
            json!({"metadata": {"name": "j", "annotations": {TOPOLOGY_ANNOTATION: ""}}}),
            json!({"metadata": {"name": "j", "annotations": {TOPOLOGY_ANNOTATION: "not a key!"}}}),
        ] {
            assert!(parse_pod_group(&bad).is_err(), "{bad}");
        }
    }
    #[test]
    fn kubernetes_pod_groups_are_gangs_only_with_a_gang_policy() {
        let gang = json!({"metadata": {"name": "g", "namespace": "ml"}, "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}}});
        let (key, spec) = parse_kube_pod_group(&gang).unwrap();
        assert_eq!((key.as_str(), spec.map(|s| s.min_member)), ("ml/g", Some(3)));
        let basic = json!({"metadata": {"name": "b"}, "spec": {"schedulingPolicy": {"basic": {}}}});
        assert_eq!(parse_kube_pod_group(&basic).unwrap(), ("default/b".to_string(), None));
        let bad = json!({"metadata": {"name": "g"}, "spec": {"schedulingPolicy": {"gang": {"minCount": 0}}}});
        assert!(parse_kube_pod_group(&bad).is_err());
        let racked = json!({"metadata": {"name": "g"}, "spec": {"schedulingPolicy": {"gang": {"minCount": 2}},
            "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/rack"}]}}});
        let spec = parse_kube_pod_group(&racked).unwrap().1.unwrap();
        assert_eq!(spec.topology_key.as_deref(), Some("topology.kubernetes.io/rack"));
    }

    #[test]
    fn pods_find_their_group_through_either_api() {
        use algorithms::builders::PodBuilder;
        let spec = PodGroupSpec::with_min;
        let mut groups = Groups::default();
        groups.upsert("default/a".into(), spec(2));
        groups
            .set_all(Api::Kubernetes, [("default/k".to_string(), Some(spec(3))), ("default/basic".to_string(), None)]);
        let labelled = PodBuilder::new("p").label(POD_GROUP_LABEL, "a").info();
        assert_eq!(groups.gang_of(&labelled).map(|(k, s)| (k, s.min_member)), Some(("default/a".into(), 2)));
        let mut member = PodBuilder::new("q").info();
        member.scheduling_group = Some("k".into());
        assert_eq!(groups.gang_of(&member).map(|(k, s)| (k, s.min_member)), Some(("default/k".into(), 3)));
        member.scheduling_group = Some("basic".into());
        assert!(groups.gang_of(&member).is_none() && groups.missing(&member).is_none());
        member.scheduling_group = Some("later".into());
        assert_eq!(groups.missing(&member).as_deref(), Some("default/later"));
        // A label names no Kubernetes group: the same name through the other API is another group.
        let other = PodBuilder::new("r").label(POD_GROUP_LABEL, "k").info();
        assert!(groups.gang_of(&other).is_none());
        // Replacing one API's groups leaves the other's.
        groups.set_all(Api::Kubernetes, []);
        assert!(groups.gang_of(&labelled).is_some());
    }
}
