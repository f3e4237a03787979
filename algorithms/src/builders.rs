//! Builders for pods, nodes and snapshots, for tests and synthetic workloads.
//!
//! One file though long: one fluent builder per API object, each a list of short setters.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

use crate::framework::{FilterPlugin, PluginState, ScorePlugin};
use crate::node_info::NodeInfo;
use crate::pod_info::PodInfo;
use crate::snapshot::Snapshot;
use crate::status::{Code, Status};

fn q(s: &str) -> Quantity {
    Quantity(s.to_string())
}

/// Builds a `v1.Pod`.
#[derive(Debug, Clone)]
pub struct PodBuilder {
    pod: core::Pod,
}

impl PodBuilder {
    /// A pod in `default` with one container and no requests.
    pub fn new(name: &str) -> Self {
        let pod = core::Pod {
            metadata: meta::ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                uid: Some(format!("uid-{name}")),
                ..Default::default()
            },
            spec: Some(core::PodSpec {
                containers: vec![core::Container {
                    name: "c0".into(),
                    image: Some("app".into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: None,
        };
        PodBuilder { pod }
    }

    fn spec(&mut self) -> &mut core::PodSpec {
        self.pod.spec.get_or_insert_with(Default::default)
    }

    fn affinity(&mut self) -> &mut core::Affinity {
        self.spec().affinity.get_or_insert_with(Default::default)
    }

    /// References a ResourceClaim by name as `spec.resourceClaims[name]`.
    pub fn resource_claim(mut self, name: &str, claim: &str) -> Self {
        let c =
            core::PodResourceClaim { name: name.into(), resource_claim_name: Some(claim.into()), ..Default::default() };
        self.spec().resource_claims.get_or_insert_with(Vec::new).push(c);
        self
    }

    /// Asks for a claim from a ResourceClaimTemplate; `generated` is the claim the
    /// resourceclaim controller reported in the pod's status (none: not created yet).
    pub fn claim_template(mut self, name: &str, template: &str, generated: Option<&str>) -> Self {
        let c = core::PodResourceClaim {
            name: name.into(),
            resource_claim_template_name: Some(template.into()),
            ..Default::default()
        };
        self.spec().resource_claims.get_or_insert_with(Vec::new).push(c);
        if let Some(g) = generated {
            let status = core::PodResourceClaimStatus { name: name.into(), resource_claim_name: Some(g.into()) };
            self.pod
                .status
                .get_or_insert_with(Default::default)
                .resource_claim_statuses
                .get_or_insert_with(Vec::new)
                .push(status);
        }
        self
    }

    /// Adds a volume.
    pub fn volume(mut self, v: core::Volume) -> Self {
        self.spec().volumes.get_or_insert_with(Vec::new).push(v);
        self
    }

    /// Adds a volume mounting the claim `claim`.
    pub fn claim(self, volume: &str, claim: &str) -> Self {
        self.volume(core::Volume {
            name: volume.into(),
            persistent_volume_claim: Some(core::PersistentVolumeClaimVolumeSource {
                claim_name: claim.into(),
                read_only: None,
            }),
            ..Default::default()
        })
    }

    /// Adds a generic ephemeral volume (its claim is `<pod>-<volume>`).
    pub fn ephemeral(self, volume: &str) -> Self {
        self.volume(core::Volume {
            name: volume.into(),
            ephemeral: Some(core::EphemeralVolumeSource::default()),
            ..Default::default()
        })
    }

    /// Sets the namespace.
    pub fn namespace(mut self, ns: &str) -> Self {
        self.pod.metadata.namespace = Some(ns.into());
        self
    }

    /// Adds a label.
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.pod.metadata.labels.get_or_insert_with(Default::default).insert(k.into(), v.into());
        self
    }

    /// Sets `spec.nodeName`.
    pub fn node_name(mut self, n: &str) -> Self {
        self.spec().node_name = Some(n.into());
        self
    }

    /// Sets `spec.schedulerName`.
    pub fn scheduler(mut self, n: &str) -> Self {
        self.spec().scheduler_name = Some(n.into());
        self
    }

    /// Sets `spec.priority`.
    pub fn priority(mut self, p: i32) -> Self {
        self.spec().priority = Some(p);
        self
    }

    /// Sets `spec.priorityClassName` (the API server's admission fills in the priority).
    pub fn priority_class(mut self, name: &str) -> Self {
        self.spec().priority_class_name = Some(name.into());
        self
    }

    /// Sets `spec.preemptionPolicy: Never`.
    pub fn never_preempt(mut self) -> Self {
        self.spec().preemption_policy = Some("Never".into());
        self
    }

    /// Sets `status.startTime` to `secs` seconds after the epoch.
    pub fn started(mut self, secs: i64) -> Self {
        let t = k8s_openapi::jiff::Timestamp::from_second(secs).unwrap_or_default();
        self.pod.status.get_or_insert_with(Default::default).start_time = Some(meta::Time(t));
        self
    }

    /// Sets `status.nominatedNodeName`.
    pub fn nominated(mut self, node: &str) -> Self {
        self.pod.status.get_or_insert_with(Default::default).nominated_node_name = Some(node.into());
        self
    }

    /// Marks the pod terminating; with `by_preemption`, also with the scheduler's
    /// `DisruptionTarget` condition.
    pub fn terminating(mut self, by_preemption: bool) -> Self {
        let t = k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).unwrap_or_default();
        self.pod.metadata.deletion_timestamp = Some(meta::Time(t));
        if by_preemption {
            let status = self.pod.status.get_or_insert_with(Default::default);
            status.conditions.get_or_insert_with(Vec::new).push(core::PodCondition {
                type_: "DisruptionTarget".into(),
                status: "True".into(),
                reason: Some("PreemptionByScheduler".into()),
                ..Default::default()
            });
        }
        self
    }

    /// Replaces the containers with none (use `container` to add).
    pub fn no_containers(mut self) -> Self {
        self.spec().containers.clear();
        self
    }

    /// Sets requests on the first container (added if missing). Empty strings leave a resource unset.
    pub fn req(self, cpu: &str, mem: &str) -> Self {
        self.req_list(&[("cpu", cpu), ("memory", mem)])
    }

    /// Sets arbitrary requests on the first container.
    pub fn req_list(mut self, list: &[(&str, &str)]) -> Self {
        let spec = self.spec();
        if spec.containers.is_empty() {
            spec.containers.push(core::Container { name: "c0".into(), ..Default::default() });
        }
        let c = &mut spec.containers[0];
        let res = c.resources.get_or_insert_with(Default::default);
        let reqs = res.requests.get_or_insert_with(Default::default);
        for (k, v) in list {
            if !v.is_empty() {
                reqs.insert((*k).into(), q(v));
            }
        }
        self
    }

    /// Requests an extended resource on the first container, with the equal limit the
    /// API server requires for resources that cannot be overcommitted.
    pub fn device(self, name: &str, qty: &str) -> Self {
        let mut b = self.req_list(&[(name, qty)]);
        let spec = b.spec();
        if let Some(c) = spec.containers.first_mut() {
            let res = c.resources.get_or_insert_with(Default::default);
            res.limits.get_or_insert_with(Default::default).insert(name.into(), q(qty));
        }
        b
    }

    /// Adds a container with requests (empty strings leave a resource unset).
    pub fn container(mut self, cpu: &str, mem: &str) -> Self {
        let spec = self.spec();
        let mut reqs = BTreeMap::new();
        if !cpu.is_empty() {
            reqs.insert("cpu".to_string(), q(cpu));
        }
        if !mem.is_empty() {
            reqs.insert("memory".to_string(), q(mem));
        }
        let n = spec.containers.len();
        spec.containers.push(core::Container {
            name: format!("c{n}"),
            image: Some("app".into()),
            resources: Some(core::ResourceRequirements { requests: Some(reqs), ..Default::default() }),
            ..Default::default()
        });
        self
    }

    /// Adds an init container with requests; `sidecar` makes it restartable (`restartPolicy: Always`).
    pub fn init_container(mut self, cpu: &str, mem: &str, sidecar: bool) -> Self {
        let spec = self.spec();
        let mut reqs = BTreeMap::new();
        if !cpu.is_empty() {
            reqs.insert("cpu".to_string(), q(cpu));
        }
        if !mem.is_empty() {
            reqs.insert("memory".to_string(), q(mem));
        }
        let inits = spec.init_containers.get_or_insert_with(Default::default);
        let n = inits.len();
        inits.push(core::Container {
            name: format!("init{n}"),
            image: Some("init".into()),
            resources: Some(core::ResourceRequirements { requests: Some(reqs), ..Default::default() }),
            restart_policy: sidecar.then(|| "Always".to_string()),
            ..Default::default()
        });
        self
    }

    /// Sets the images of the containers (one container per image).
    pub fn images(mut self, images: &[&str]) -> Self {
        self.spec().containers = images
            .iter()
            .enumerate()
            .map(|(i, img)| core::Container { name: format!("c{i}"), image: Some((*img).into()), ..Default::default() })
            .collect();
        self
    }

    /// Adds a toleration.
    pub fn toleration(mut self, key: &str, op: &str, value: &str, effect: &str) -> Self {
        let t = core::Toleration {
            key: (!key.is_empty()).then(|| key.into()),
            operator: (!op.is_empty()).then(|| op.into()),
            value: (!value.is_empty()).then(|| value.into()),
            effect: (!effect.is_empty()).then(|| effect.into()),
            toleration_seconds: None,
        };
        self.spec().tolerations.get_or_insert_with(Default::default).push(t);
        self
    }

    /// Adds a host port to the first container.
    pub fn host_port(mut self, ip: &str, protocol: &str, port: i32) -> Self {
        let c = &mut self.spec().containers[0];
        c.ports.get_or_insert_with(Default::default).push(core::ContainerPort {
            container_port: port,
            host_port: Some(port),
            host_ip: (!ip.is_empty()).then(|| ip.into()),
            protocol: (!protocol.is_empty()).then(|| protocol.into()),
            ..Default::default()
        });
        self
    }

    /// Adds a `nodeSelector` entry.
    pub fn node_selector(mut self, k: &str, v: &str) -> Self {
        self.spec().node_selector.get_or_insert_with(Default::default).insert(k.into(), v.into());
        self
    }

    /// Sets the required node affinity terms.
    pub fn required_node_affinity(mut self, terms: Vec<core::NodeSelectorTerm>) -> Self {
        let na = self.affinity().node_affinity.get_or_insert_with(Default::default);
        na.required_during_scheduling_ignored_during_execution =
            Some(core::NodeSelector { node_selector_terms: terms });
        self
    }

    /// Adds a preferred node affinity term.
    pub fn preferred_node_affinity(mut self, weight: i32, term: core::NodeSelectorTerm) -> Self {
        let na = self.affinity().node_affinity.get_or_insert_with(Default::default);
        na.preferred_during_scheduling_ignored_during_execution
            .get_or_insert_with(Default::default)
            .push(core::PreferredSchedulingTerm { weight, preference: term });
        self
    }

    /// Adds a required pod affinity term.
    pub fn pod_affinity(mut self, term: core::PodAffinityTerm) -> Self {
        let pa = self.affinity().pod_affinity.get_or_insert_with(Default::default);
        pa.required_during_scheduling_ignored_during_execution.get_or_insert_with(Default::default).push(term);
        self
    }

    /// Adds a required pod anti-affinity term.
    pub fn pod_anti_affinity(mut self, term: core::PodAffinityTerm) -> Self {
        let pa = self.affinity().pod_anti_affinity.get_or_insert_with(Default::default);
        pa.required_during_scheduling_ignored_during_execution.get_or_insert_with(Default::default).push(term);
        self
    }

    /// Adds a preferred pod affinity term.
    pub fn preferred_pod_affinity(mut self, weight: i32, term: core::PodAffinityTerm) -> Self {
        let pa = self.affinity().pod_affinity.get_or_insert_with(Default::default);
        pa.preferred_during_scheduling_ignored_during_execution
            .get_or_insert_with(Default::default)
            .push(core::WeightedPodAffinityTerm { weight, pod_affinity_term: term });
        self
    }

    /// Adds a preferred pod anti-affinity term.
    pub fn preferred_pod_anti_affinity(mut self, weight: i32, term: core::PodAffinityTerm) -> Self {
        let pa = self.affinity().pod_anti_affinity.get_or_insert_with(Default::default);
        pa.preferred_during_scheduling_ignored_during_execution
            .get_or_insert_with(Default::default)
            .push(core::WeightedPodAffinityTerm { weight, pod_affinity_term: term });
        self
    }

    /// Adds a topology spread constraint selecting pods with `selector` labels.
    pub fn spread(mut self, max_skew: i32, key: &str, when: &str, selector: &[(&str, &str)]) -> Self {
        let c = core::TopologySpreadConstraint {
            max_skew,
            topology_key: key.into(),
            when_unsatisfiable: when.into(),
            label_selector: Some(label_selector(selector)),
            ..Default::default()
        };
        self.spec().topology_spread_constraints.get_or_insert_with(Default::default).push(c);
        self
    }

    /// Adds a fully specified topology spread constraint.
    pub fn spread_constraint(mut self, c: core::TopologySpreadConstraint) -> Self {
        self.spec().topology_spread_constraints.get_or_insert_with(Default::default).push(c);
        self
    }

    /// The API object.
    pub fn build(self) -> core::Pod {
        self.pod
    }

    /// The parsed `PodInfo`.
    pub fn info(self) -> PodInfo {
        PodInfo::from_pod(&self.pod).unwrap_or_default()
    }
}

/// A `matchLabels` selector.
pub fn label_selector(pairs: &[(&str, &str)]) -> meta::LabelSelector {
    meta::LabelSelector {
        match_labels: Some(pairs.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect()),
        match_expressions: None,
    }
}

/// A selector with one expression.
pub fn expr_selector(key: &str, op: &str, values: &[&str]) -> meta::LabelSelector {
    meta::LabelSelector {
        match_labels: None,
        match_expressions: Some(vec![meta::LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| (*v).into()).collect()),
        }]),
    }
}

/// A pod affinity term over `matchLabels` in the pod's own namespace.
pub fn affinity_term(pairs: &[(&str, &str)], topology_key: &str) -> core::PodAffinityTerm {
    core::PodAffinityTerm {
        label_selector: Some(label_selector(pairs)),
        topology_key: topology_key.into(),
        ..Default::default()
    }
}

/// A node selector term with one expression.
pub fn node_term(key: &str, op: &str, values: &[&str]) -> core::NodeSelectorTerm {
    core::NodeSelectorTerm {
        match_expressions: Some(vec![core::NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| (*v).into()).collect()),
        }]),
        match_fields: None,
    }
}

/// Builds a `v1.Node`.
#[derive(Debug, Clone)]
pub struct NodeBuilder {
    node: core::Node,
}

impl NodeBuilder {
    /// A node with 32 CPUs, 64Gi of memory and 110 pods allocatable.
    pub fn new(name: &str) -> Self {
        let alloc: BTreeMap<String, Quantity> =
            [("cpu", "32"), ("memory", "64Gi"), ("pods", "110")].iter().map(|(k, v)| ((*k).into(), q(v))).collect();
        let node = core::Node {
            metadata: meta::ObjectMeta {
                name: Some(name.into()),
                labels: Some([("kubernetes.io/hostname".to_string(), name.to_string())].into()),
                ..Default::default()
            },
            spec: Some(Default::default()),
            status: Some(core::NodeStatus { allocatable: Some(alloc), ..Default::default() }),
        };
        NodeBuilder { node }
    }

    fn alloc(&mut self) -> &mut BTreeMap<String, Quantity> {
        self.node.status.get_or_insert_with(Default::default).allocatable.get_or_insert_with(Default::default)
    }

    /// Adds a label.
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.node.metadata.labels.get_or_insert_with(Default::default).insert(k.into(), v.into());
        self
    }

    /// Removes every label (the hostname label included).
    pub fn no_labels(mut self) -> Self {
        self.node.metadata.labels = None;
        self
    }

    /// Adds a taint.
    pub fn taint(mut self, k: &str, v: &str, effect: &str) -> Self {
        let t = core::Taint {
            key: k.into(),
            value: (!v.is_empty()).then(|| v.into()),
            effect: effect.into(),
            time_added: None,
        };
        self.node.spec.get_or_insert_with(Default::default).taints.get_or_insert_with(Default::default).push(t);
        self
    }

    /// Sets `spec.unschedulable`.
    pub fn unschedulable(mut self, u: bool) -> Self {
        self.node.spec.get_or_insert_with(Default::default).unschedulable = Some(u);
        self
    }

    /// Sets allocatable CPU, memory and pods (empty strings remove the resource).
    pub fn capacity(mut self, cpu: &str, mem: &str, pods: &str) -> Self {
        for (k, v) in [("cpu", cpu), ("memory", mem), ("pods", pods)] {
            if v.is_empty() {
                self.alloc().remove(k);
            } else {
                self.alloc().insert(k.into(), q(v));
            }
        }
        self
    }

    /// Sets one allocatable resource.
    pub fn resource(mut self, name: &str, qty: &str) -> Self {
        self.alloc().insert(name.into(), q(qty));
        self
    }

    /// Adds an image with its names and size.
    pub fn image(mut self, names: &[&str], size: i64) -> Self {
        let st = self.node.status.get_or_insert_with(Default::default);
        st.images.get_or_insert_with(Default::default).push(core::ContainerImage {
            names: Some(names.iter().map(|n| (*n).into()).collect()),
            size_bytes: Some(size),
        });
        self
    }

    /// The API object.
    pub fn build(self) -> core::Node {
        self.node
    }
}

/// A snapshot of these nodes with these pods placed by their `spec.nodeName`.
pub fn snapshot(nodes: &[core::Node], pods: &[core::Pod]) -> Snapshot {
    snapshot_with_namespaces(nodes, pods, HashMap::new())
}

/// Like `snapshot`, with namespace labels.
pub fn snapshot_with_namespaces(
    nodes: &[core::Node],
    pods: &[core::Pod],
    namespaces: HashMap<String, BTreeMap<String, String>>,
) -> Snapshot {
    let mut infos: Vec<NodeInfo> = nodes.iter().filter_map(|n| NodeInfo::from_node(n).ok()).collect();
    for p in pods {
        let Ok(info) = PodInfo::from_pod(p) else { continue };
        if let Some(n) = infos.iter_mut().find(|n| Some(&n.name) == info.node_name.as_ref()) {
            n.add_pod(Arc::new(info));
        }
    }
    Snapshot::new(infos.into_iter().map(Arc::new).collect(), namespaces)
}

/// Runs PreFilter and Filter of one plugin for `pod` against every node.
pub fn filter_all(plugin: &dyn FilterPlugin, pod: &core::Pod, snap: &Snapshot) -> Vec<Status> {
    let info = PodInfo::from_pod(pod).unwrap_or_default();
    let pre = plugin.pre_filter(&info, snap);
    match pre.status.code {
        Code::Skip => snap.nodes.iter().map(|_| Status::success()).collect(),
        Code::Success => {
            snap.nodes.iter().enumerate().map(|(i, n)| plugin.filter_at(&pre.state, &info, n, i)).collect()
        }
        _ => snap.nodes.iter().map(|_| pre.status.clone()).collect(),
    }
}

/// Runs PreFilter and Filter of one plugin for `pod` on one node holding `existing` pods.
pub fn filter_one(plugin: &dyn FilterPlugin, pod: &core::Pod, node: &core::Node, existing: &[core::Pod]) -> Status {
    let name = node.metadata.name.clone().unwrap_or_default();
    let placed: Vec<core::Pod> = existing
        .iter()
        .cloned()
        .map(|mut p| {
            p.spec.get_or_insert_with(Default::default).node_name = Some(name.clone());
            p
        })
        .collect();
    let snap = snapshot(std::slice::from_ref(node), &placed);
    filter_all(plugin, pod, &snap).pop().unwrap_or_else(Status::success)
}

/// Runs PreScore, Score and NormalizeScore of one plugin with every node feasible.
pub fn score_all(plugin: &dyn ScorePlugin, pod: &core::Pod, snap: &Snapshot) -> Vec<i64> {
    let feasible: Vec<usize> = (0..snap.nodes.len()).collect();
    score_feasible(plugin, pod, snap, &feasible)
}

/// Runs PreScore, Score and NormalizeScore of one plugin over the given feasible nodes.
pub fn score_feasible(plugin: &dyn ScorePlugin, pod: &core::Pod, snap: &Snapshot, feasible: &[usize]) -> Vec<i64> {
    let info = PodInfo::from_pod(pod).unwrap_or_default();
    let state = match plugin.pre_score(&info, snap, feasible) {
        Ok(s) => s,
        Err(_) => return vec![0; feasible.len()],
    };
    let mut scores: Vec<i64> =
        feasible.iter().map(|&i| plugin.score_at(&state, &info, &snap.nodes[i], snap, i)).collect();
    plugin.normalize(&state, &mut scores);
    scores
}

/// Runs PreScore and Score (no normalization) of one plugin.
pub fn raw_scores(plugin: &dyn ScorePlugin, pod: &core::Pod, snap: &Snapshot) -> Vec<i64> {
    let info = PodInfo::from_pod(pod).unwrap_or_default();
    let feasible: Vec<usize> = (0..snap.nodes.len()).collect();
    let state = plugin.pre_score(&info, snap, &feasible).unwrap_or_else(|_| PluginState::none());
    snap.nodes.iter().enumerate().map(|(i, n)| plugin.score_at(&state, &info, n, snap, i)).collect()
}
