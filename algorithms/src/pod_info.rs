//! `PodInfo`: everything the plugins need from a pod, parsed once when it enters.
//!
//! One file though long: the parse reads the pod's spec once, field by field, into the
//! parts each plugin uses.

use std::sync::Arc;

use k8s_openapi::api::core::v1 as core;
use thiserror::Error;

use crate::labels::{LabelSelector, Labels, NodeSelector, NodeSelectorTerm, Operator, SelectorError, parse_term};
use crate::requests::{PodRequests, RequestError, pod_requests_with_status};
use crate::taints::Toleration;

/// A pod that cannot be turned into a `PodInfo`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PodError {
    /// `metadata.name` is missing.
    #[error("pod has no metadata.name")]
    MissingName,
    /// `spec` is missing.
    #[error("pod {0}: spec is missing")]
    MissingSpec(String),
    /// A resource quantity is malformed.
    #[error("pod {pod}: failed to read requests: {source}")]
    Requests {
        /// namespace/name.
        pod: String,
        /// The cause.
        #[source]
        source: RequestError,
    },
    /// A label selector is malformed.
    #[error("pod {pod}: invalid {field}: {source}")]
    Selector {
        /// namespace/name.
        pod: String,
        /// The field holding the selector.
        field: &'static str,
        /// The cause.
        #[source]
        source: SelectorError,
    },
}

/// A host port a container asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPort {
    /// Host IP, `0.0.0.0` when unset.
    pub ip: String,
    /// Protocol, `TCP` when unset.
    pub protocol: String,
    /// The port number.
    pub port: i32,
}

impl HostPort {
    /// Whether two host port claims cannot both be held on one node.
    pub fn conflicts(&self, other: &HostPort) -> bool {
        self.port == other.port
            && self.protocol == other.protocol
            && (self.ip == other.ip || self.ip == "0.0.0.0" || other.ip == "0.0.0.0")
    }
}

/// A pod (anti-)affinity term with its namespaces resolved.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AffinityTerm {
    /// Pod label selector; `None` (unset) matches no pod.
    pub selector: Option<LabelSelector>,
    /// Namespaces listed (or the pod's own when neither list nor selector is set).
    pub namespaces: Vec<String>,
    /// Namespace selector; `None` matches no namespace, empty matches all.
    pub namespace_selector: Option<LabelSelector>,
    /// Topology key.
    pub topology_key: String,
}

impl AffinityTerm {
    /// Whether `pod` (whose namespace carries `ns_labels`) is selected by the term.
    pub fn matches(&self, pod: &PodInfo, ns_labels: &Labels) -> bool {
        let ns_ok = self.namespaces.contains(&pod.namespace)
            || self.namespace_selector.as_ref().is_some_and(|s| s.matches(ns_labels));
        ns_ok && self.selector.as_ref().is_some_and(|s| s.matches(&pod.labels))
    }
}

/// A preferred pod (anti-)affinity term with its weight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightedAffinityTerm {
    /// Weight 1-100.
    pub weight: i64,
    /// The term.
    pub term: AffinityTerm,
}

/// A preferred node affinity term; `None` when the term could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightedNodeTerm {
    /// Weight 1-100.
    pub weight: i64,
    /// The term.
    pub term: Option<NodeSelectorTerm>,
}

/// `whenUnsatisfiable` of a spread constraint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unsatisfiable {
    /// Hard: a filter.
    DoNotSchedule,
    /// Soft: a score.
    ScheduleAnyway,
}

/// A topology spread constraint, parsed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SpreadConstraint {
    /// Maximum permitted skew.
    pub max_skew: i64,
    /// The node label defining domains.
    pub topology_key: String,
    /// Hard or soft.
    pub when_unsatisfiable: Unsatisfiable,
    /// Which pods are counted; `None` counts none.
    pub selector: Option<LabelSelector>,
    /// Minimum number of domains (1 when unset).
    pub min_domains: i64,
    /// Whether nodes failing the pod's node affinity are left out of the counts (default yes).
    pub honor_node_affinity: bool,
    /// Whether nodes with untolerated taints are left out of the counts (default no).
    pub honor_node_taints: bool,
}

/// Everything the scheduler needs from one pod.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodInfo {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID (may be empty for pods read from files).
    pub uid: String,
    /// Labels.
    pub labels: Labels,
    /// `spec.nodeName` when set.
    pub node_name: Option<String>,
    /// `spec.schedulerName` (`default-scheduler` when unset).
    pub scheduler_name: String,
    /// `spec.priority` (0 when unset).
    pub priority: i32,
    /// Creation time in nanoseconds since the epoch (0 when unset).
    pub created_nanos: i128,
    /// Resource requests.
    pub requests: PodRequests,
    /// Tolerations.
    pub tolerations: Vec<Toleration>,
    /// `spec.nodeSelector`.
    pub node_selector: Labels,
    /// Required node affinity.
    pub required_node_affinity: Option<NodeSelector>,
    /// Preferred node affinity terms.
    pub preferred_node_affinity: Vec<WeightedNodeTerm>,
    /// Host ports of containers and sidecars.
    pub host_ports: Vec<HostPort>,
    /// Required pod affinity terms.
    pub required_affinity: Vec<AffinityTerm>,
    /// Required pod anti-affinity terms.
    pub required_anti_affinity: Vec<AffinityTerm>,
    /// Preferred pod affinity terms.
    pub preferred_affinity: Vec<WeightedAffinityTerm>,
    /// Preferred pod anti-affinity terms.
    pub preferred_anti_affinity: Vec<WeightedAffinityTerm>,
    /// Topology spread constraints.
    pub spread_constraints: Vec<SpreadConstraint>,
    /// Normalized images of init and app containers (`name:latest` added when untagged).
    pub images: Vec<String>,
    /// Scheduling gates still present.
    pub scheduling_gates: Vec<String>,
    /// Hash of the spec fields node-local plugins read (requests, ports, images,
    /// tolerations, node selector and affinity, node name): pods with equal
    /// signatures get equal node-local filter and score results.
    pub signature: u64,
    /// The fields [`PodInfo::signature`] hashes, as canonical text: cache hits compare
    /// this, never the hash alone.
    pub signature_key: Arc<str>,
    /// The controlling owner as (kind, name), for default spread selectors.
    pub controller: Option<(String, String)>,
    /// Whether the pod has a deletion timestamp.
    pub terminating: bool,
    /// `spec.preemptionPolicy` is `Never`: the pod never preempts others.
    pub never_preempts: bool,
    /// `status.startTime` in nanoseconds since the epoch.
    pub started_nanos: Option<i128>,
    /// `status.nominatedNodeName` when set.
    pub nominated_node: Option<String>,
    /// The node features (`status.declaredFeatures`) the pod needs, as NodeDeclaredFeatures
    /// infers them from its spec (sorted).
    pub required_features: Vec<&'static str>,
    /// `metadata.resourceVersion` (empty when unset).
    pub resource_version: String,
    /// The `PodScheduled` condition as last seen: the scheduler writes it only when it
    /// changes, as kube-scheduler does.
    pub scheduled_condition: Option<ConditionState>,
    /// The pod carries a `DisruptionTarget=True` condition with reason `PreemptionByScheduler`
    /// (the first DisruptionTarget condition decides).
    pub preempted_by_scheduler: bool,
    /// `spec.schedulingGroup.podGroupName`: the `scheduling.k8s.io` PodGroup (in the pod's
    /// namespace) the pod belongs to.
    pub scheduling_group: Option<String>,
    /// Claims, in-tree disks and inline CSI volumes.
    pub volumes: crate::volumes::PodVolumes,
    /// `spec.resourceClaims`, with the claims created from templates resolved through
    /// `status.resourceClaimStatuses`.
    pub resource_claims: Vec<PodResourceClaim>,
    /// Containers requesting resources a DeviceClass may serve (extended resources backed
    /// by DRA); empty when none does.
    pub device_asks: Vec<crate::device_asks::ContainerAsk>,
    /// `status.extendedResourceClaimStatus.resourceClaimName`: the claim the scheduler
    /// made for those requests.
    pub extended_claim: Option<String>,
}

/// The parts of a pod condition a scheduler compares before rewriting it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConditionState {
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// The reason, empty when unset.
    pub reason: String,
    /// The message, empty when unset.
    pub message: String,
}

/// One entry of a pod's `spec.resourceClaims`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodResourceClaim {
    /// The name the pod's containers use.
    pub name: String,
    /// The ResourceClaim's name in the pod's namespace: `resourceClaimName`, or for a
    /// template the name the resourceclaim controller reported; `None` while it has not
    /// reported one (or reported that no claim is needed, see `not_needed`).
    pub claim: Option<String>,
    /// The claim is made from a ResourceClaimTemplate (and so must be owned by the pod).
    pub from_template: bool,
    /// The template's name, for claims made from one.
    pub template: Option<String>,
    /// The controller reported that no claim is needed for this entry.
    pub not_needed: bool,
}

/// The label naming a pod's scheduler-plugins PodGroup.
pub const POD_GROUP_LABEL: &str = "scheduling.x-k8s.io/pod-group";

impl PodInfo {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The name (without the namespace) of the pod group the pod belongs to, if any:
    /// `spec.schedulingGroup`'s PodGroup first, then scheduler-plugins' label.
    pub fn group_name(&self) -> Option<&str> {
        self.scheduling_group
            .as_deref()
            .or_else(|| self.labels.get(POD_GROUP_LABEL).map(String::as_str).filter(|g| !g.is_empty()))
    }

    /// Whether `other` belongs to the same pod group as this pod (false for pods in none).
    pub fn same_group(&self, other: &PodInfo) -> bool {
        self.namespace == other.namespace && self.group_name().is_some_and(|g| other.group_name() == Some(g))
    }

    /// Whether the pod has any pod affinity or anti-affinity term.
    pub fn has_affinity(&self) -> bool {
        !(self.required_affinity.is_empty()
            && self.required_anti_affinity.is_empty()
            && self.preferred_affinity.is_empty()
            && self.preferred_anti_affinity.is_empty())
    }

    /// Parses an API pod.
    pub fn from_pod(pod: &core::Pod) -> Result<Self, PodError> {
        let meta = &pod.metadata;
        let name = meta.name.clone().ok_or(PodError::MissingName)?;
        let namespace = meta.namespace.clone().unwrap_or_else(|| "default".to_string());
        let key = format!("{namespace}/{name}");
        let spec = pod.spec.as_ref().ok_or_else(|| PodError::MissingSpec(key.clone()))?;
        let requests =
            pod_requests_with_status(pod).map_err(|source| PodError::Requests { pod: key.clone(), source })?;
        let labels: Labels = meta.labels.clone().unwrap_or_default();
        let sel_err = |field| {
            let pod = key.clone();
            move |source| PodError::Selector { pod, field, source }
        };

        let mut info = PodInfo {
            namespace: namespace.clone(),
            name,
            uid: meta.uid.clone().unwrap_or_default(),
            node_name: spec.node_name.clone().filter(|n| !n.is_empty()),
            scheduler_name: spec.scheduler_name.clone().unwrap_or_else(|| "default-scheduler".to_string()),
            priority: spec.priority.unwrap_or(0),
            created_nanos: meta.creation_timestamp.as_ref().map(|t| t.0.as_nanosecond()).unwrap_or(0),
            requests,
            tolerations: spec.tolerations.iter().flatten().filter_map(Toleration::from_api).collect(),
            node_selector: spec.node_selector.clone().unwrap_or_default(),
            host_ports: host_ports(spec),
            images: images(spec),
            scheduling_gates: spec.scheduling_gates.iter().flatten().map(|g| g.name.clone()).collect(),
            controller: meta
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.controller == Some(true))
                .map(|o| (o.kind.clone(), o.name.clone())),
            terminating: meta.deletion_timestamp.is_some(),
            never_preempts: spec.preemption_policy.as_deref() == Some("Never"),
            started_nanos: pod.status.as_ref().and_then(|s| s.start_time.as_ref()).map(|t| t.0.as_nanosecond()),
            nominated_node: pod.status.as_ref().and_then(|s| s.nominated_node_name.clone()).filter(|n| !n.is_empty()),
            resource_version: meta.resource_version.clone().unwrap_or_default(),
            scheduled_condition: pod
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"))
                .map(|c| ConditionState {
                    status: c.status.clone(),
                    reason: c.reason.clone().unwrap_or_default(),
                    message: c.message.clone().unwrap_or_default(),
                }),
            scheduling_group: spec
                .scheduling_group
                .as_ref()
                .and_then(|g| g.pod_group_name.clone())
                .filter(|n| !n.is_empty()),
            preempted_by_scheduler: pod
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.type_ == "DisruptionTarget"))
                .is_some_and(|c| c.status == "True" && c.reason.as_deref() == Some("PreemptionByScheduler")),
            ..Default::default()
        };

        if let Some(na) = spec.affinity.as_ref().and_then(|a| a.node_affinity.as_ref()) {
            info.required_node_affinity =
                na.required_during_scheduling_ignored_during_execution.as_ref().map(NodeSelector::parse);
            info.preferred_node_affinity = na
                .preferred_during_scheduling_ignored_during_execution
                .iter()
                .flatten()
                .map(|p| WeightedNodeTerm { weight: i64::from(p.weight), term: parse_term(&p.preference).ok() })
                .collect();
        }
        if let Some(pa) = spec.affinity.as_ref().and_then(|a| a.pod_affinity.as_ref()) {
            for t in pa.required_during_scheduling_ignored_during_execution.iter().flatten() {
                info.required_affinity.push(affinity_term(t, &namespace, &labels).map_err(sel_err("podAffinity"))?);
            }
            for w in pa.preferred_during_scheduling_ignored_during_execution.iter().flatten() {
                let term = affinity_term(&w.pod_affinity_term, &namespace, &labels).map_err(sel_err("podAffinity"))?;
                info.preferred_affinity.push(WeightedAffinityTerm { weight: i64::from(w.weight), term });
            }
        }
        if let Some(pa) = spec.affinity.as_ref().and_then(|a| a.pod_anti_affinity.as_ref()) {
            for t in pa.required_during_scheduling_ignored_during_execution.iter().flatten() {
                info.required_anti_affinity
                    .push(affinity_term(t, &namespace, &labels).map_err(sel_err("podAntiAffinity"))?);
            }
            for w in pa.preferred_during_scheduling_ignored_during_execution.iter().flatten() {
                let term =
                    affinity_term(&w.pod_affinity_term, &namespace, &labels).map_err(sel_err("podAntiAffinity"))?;
                info.preferred_anti_affinity.push(WeightedAffinityTerm { weight: i64::from(w.weight), term });
            }
        }
        for c in spec.topology_spread_constraints.iter().flatten() {
            info.spread_constraints.push(spread_constraint(c, &labels).map_err(sel_err("topologySpreadConstraints"))?);
        }
        info.volumes = crate::volumes::PodVolumes::from_spec(&info.namespace, &info.name, &info.uid, spec);
        info.resource_claims = resource_claims(pod);
        info.device_asks = crate::device_asks::container_asks(spec);
        info.extended_claim = pod
            .status
            .as_ref()
            .and_then(|s| s.extended_resource_claim_status.as_ref())
            .map(|s| s.resource_claim_name.clone());
        info.labels = labels;
        info.required_features = crate::node_features::required_by(spec);
        (info.signature, info.signature_key) = signature(spec);
        Ok(info)
    }
}

fn resource_claims(pod: &core::Pod) -> Vec<PodResourceClaim> {
    let statuses = pod.status.as_ref().and_then(|s| s.resource_claim_statuses.as_ref());
    let spec = pod.spec.as_ref();
    spec.and_then(|s| s.resource_claims.as_ref())
        .into_iter()
        .flatten()
        .map(|c| {
            if let Some(n) = c.resource_claim_name.as_ref().filter(|n| !n.is_empty()) {
                return PodResourceClaim {
                    name: c.name.clone(),
                    claim: Some(n.clone()),
                    from_template: false,
                    template: None,
                    not_needed: false,
                };
            }
            let status = statuses.into_iter().flatten().find(|s| s.name == c.name);
            PodResourceClaim {
                name: c.name.clone(),
                claim: status.and_then(|s| s.resource_claim_name.clone()),
                from_template: true,
                template: c.resource_claim_template_name.clone(),
                not_needed: status.is_some_and(|s| s.resource_claim_name.is_none()),
            }
        })
        .collect()
}

fn signature(spec: &core::PodSpec) -> (u64, Arc<str>) {
    use std::hash::{Hash, Hasher};
    let strip = |cs: &[core::Container]| -> Vec<serde_json::Value> {
        cs.iter()
            .map(|c| {
                serde_json::json!([
                    c.image,
                    c.resources,
                    c.restart_policy,
                    c.restart_policy_rules,
                    c.ports.iter().flatten().filter(|p| p.host_port.is_some()).collect::<Vec<_>>()
                ])
            })
            .collect()
    };
    let key = serde_json::json!([
        strip(&spec.containers),
        strip(spec.init_containers.as_deref().unwrap_or(&[])),
        spec.overhead,
        spec.resources,
        spec.tolerations,
        spec.node_selector,
        spec.affinity.as_ref().and_then(|a| a.node_affinity.as_ref()),
        spec.node_name,
        spec.volumes.iter().flatten().filter_map(|v| v.image.as_ref()).collect::<Vec<_>>(),
        spec.host_network,
        spec.host_users,
        // The claims' templates (or shared claims) decide what DRA devices the pod asks for.
        spec.resource_claims,
    ]);
    let text = key.to_string();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    (h.finish(), Arc::from(text))
}

fn affinity_term(t: &core::PodAffinityTerm, namespace: &str, labels: &Labels) -> Result<AffinityTerm, SelectorError> {
    let mut selector = t.label_selector.as_ref().map(LabelSelector::parse).transpose()?;
    if let Some(sel) = selector.as_mut() {
        // The API server merges matchLabelKeys/mismatchLabelKeys into the selector
        // at creation; doing it here too keeps hand-written manifests equivalent.
        for key in t.match_label_keys.iter().flatten() {
            if let Some(v) = labels.get(key) {
                sel.push(key, Operator::In, v);
            }
        }
        for key in t.mismatch_label_keys.iter().flatten() {
            if let Some(v) = labels.get(key) {
                sel.push(key, Operator::NotIn, v);
            }
        }
    }
    let namespace_selector = t.namespace_selector.as_ref().map(LabelSelector::parse).transpose()?;
    let mut namespaces = t.namespaces.clone().unwrap_or_default();
    if namespaces.is_empty() && namespace_selector.is_none() {
        namespaces.push(namespace.to_string());
    }
    Ok(AffinityTerm { selector, namespaces, namespace_selector, topology_key: t.topology_key.clone() })
}

fn spread_constraint(c: &core::TopologySpreadConstraint, labels: &Labels) -> Result<SpreadConstraint, SelectorError> {
    let mut selector = c.label_selector.as_ref().map(LabelSelector::parse).transpose()?;
    if let Some(sel) = selector.as_mut() {
        for key in c.match_label_keys.iter().flatten() {
            if let Some(v) = labels.get(key) {
                sel.push(key, Operator::In, v);
            }
        }
    }
    Ok(SpreadConstraint {
        max_skew: i64::from(c.max_skew),
        topology_key: c.topology_key.clone(),
        when_unsatisfiable: if c.when_unsatisfiable == "ScheduleAnyway" {
            Unsatisfiable::ScheduleAnyway
        } else {
            Unsatisfiable::DoNotSchedule
        },
        selector,
        min_domains: c.min_domains.map(i64::from).unwrap_or(1),
        honor_node_affinity: c.node_affinity_policy.as_deref() != Some("Ignore"),
        honor_node_taints: c.node_taints_policy.as_deref() == Some("Honor"),
    })
}

fn host_ports(spec: &core::PodSpec) -> Vec<HostPort> {
    let sidecars = spec.init_containers.iter().flatten().filter(|c| c.restart_policy.as_deref() == Some("Always"));
    spec.containers
        .iter()
        .chain(sidecars)
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            let port = p.host_port.filter(|hp| *hp > 0)?;
            Some(HostPort {
                ip: p.host_ip.clone().filter(|ip| !ip.is_empty()).unwrap_or_else(|| "0.0.0.0".to_string()),
                protocol: p.protocol.clone().filter(|pr| !pr.is_empty()).unwrap_or_else(|| "TCP".to_string()),
                port,
            })
        })
        .collect()
}

/// Adds `:latest` to an image reference without a tag, as kube-scheduler's ImageLocality does.
pub fn normalized_image_name(name: &str) -> String {
    let colon = name.rfind(':');
    let slash = name.rfind('/');
    let untagged = match (colon, slash) {
        (None, _) => true,
        (Some(c), Some(s)) => c <= s,
        (Some(_), None) => false,
    };
    if untagged { format!("{name}:latest") } else { name.to_string() }
}

fn images(spec: &core::PodSpec) -> Vec<String> {
    spec.init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter())
        .map(|c| normalized_image_name(c.image.as_deref().unwrap_or("")))
        .collect()
}
