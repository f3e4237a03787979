//! Loading a cluster snapshot: `kubectl get nodes,pods,namespaces,pvc,pv,storageclasses,csinodes,csidrivers,csistoragecapacities -A -o yaml|json`
//! (a `v1` `List`, a single object or multi-document YAML).

use std::collections::HashMap;
use std::path::Path;

use algorithms::labels::{LabelSelector, Labels};
use algorithms::plugins::registry::OWNERS;
use algorithms::snapshot::WorkloadSelectors;
use std::sync::Arc;

use algorithms::{NodeInfo, PodInfo, Snapshot};
use k8s_openapi::api::core::v1 as core;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use thiserror::Error;
use tracing::warn;

/// A snapshot file that cannot be used.
#[derive(Debug, Error)]
pub enum LoadError {
    /// The file cannot be read.
    #[error("failed to read {path}: {source}")]
    Read {
        /// The path.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The text is neither JSON nor YAML.
    #[error("failed to parse {path}: {message}")]
    Syntax {
        /// The path.
        path: String,
        /// Parser message.
        message: String,
    },
    /// An object does not match its schema.
    #[error("{path}: {kind} {name}: field {field}: {message}")]
    Object {
        /// The path.
        path: String,
        /// Object kind.
        kind: String,
        /// Object name (or item index).
        name: String,
        /// The offending field path.
        field: String,
        /// What is wrong.
        message: String,
    },
}

/// Typed objects read from a snapshot file.
#[derive(Debug, Default, Clone)]
pub struct ClusterObjects {
    /// Nodes.
    pub nodes: Vec<core::Node>,
    /// Pods, bound and pending.
    pub pods: Vec<core::Pod>,
    /// Namespaces.
    pub namespaces: Vec<core::Namespace>,
    /// Selectors of Services, ReplicaSets, StatefulSets, ReplicationControllers.
    pub workloads: WorkloadSelectors,
    /// PodDisruptionBudgets.
    pub budgets: Vec<algorithms::preemption::Budget>,
    /// PodGroups (`scheduling.x-k8s.io/v1alpha1`) by `namespace/name`.
    pub pod_groups: Vec<(String, crate::gang::PodGroupSpec)>,
    /// PodGroups (`scheduling.k8s.io/v1alpha2`) by `namespace/name`; `None` for the basic policy.
    pub kube_pod_groups: Vec<(String, Option<crate::gang::PodGroupSpec>)>,
    /// The objects plugins own (claims, volumes, storage classes, CSI objects, DRA
    /// objects), each read by its owner ([`algorithms::plugins::registry::OWNERS`]).
    pub owned: algorithms::objects::ClusterObjects,
}

/// Parses JSON or (multi-document) YAML text into JSON values.
pub fn parse_documents(text: &str, path: &str) -> Result<Vec<Value>, LoadError> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        return serde_json::from_str::<Value>(text)
            .map(|v| vec![v])
            .map_err(|e| LoadError::Syntax { path: path.into(), message: e.to_string() });
    }
    let mut docs = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(text) {
        let v = Value::deserialize(doc).map_err(|e| LoadError::Syntax { path: path.into(), message: e.to_string() })?;
        if !v.is_null() {
            docs.push(v);
        }
    }
    Ok(docs)
}

/// Flattens `List` objects and arrays into their items.
fn flatten(values: Vec<Value>) -> Vec<Value> {
    let mut out = Vec::new();
    for v in values {
        match v {
            Value::Array(items) => out.extend(flatten(items)),
            Value::Object(ref o)
                if o.get("items").is_some_and(Value::is_array)
                    && o.get("kind").and_then(Value::as_str).is_none_or(|k| k.ends_with("List")) =>
            {
                if let Some(Value::Array(items)) = v.get("items").cloned() {
                    out.extend(flatten(items));
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// Deserializes one object, naming the field on error.
pub fn typed<T: DeserializeOwned>(v: Value, path: &str, kind: &str, index: usize) -> Result<T, LoadError> {
    let name = v
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| format!("(item {index}, no metadata.name)"));
    serde_path_to_error::deserialize(v).map_err(|e| LoadError::Object {
        path: path.into(),
        kind: kind.into(),
        name,
        field: e.path().to_string(),
        message: e.inner().to_string(),
    })
}

fn selector_map(v: &Value) -> Labels {
    v.as_object()
        .map(|o| o.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect())
        .unwrap_or_default()
}

/// Reads typed objects from already parsed documents.
pub fn objects_from_values(values: Vec<Value>, path: &str) -> Result<ClusterObjects, LoadError> {
    let mut out = ClusterObjects::default();
    for (i, v) in flatten(values).into_iter().enumerate() {
        let kind = v.get("kind").and_then(Value::as_str).unwrap_or("").to_string();
        let ns = v.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("default").to_string();
        let name = v.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_string();
        match kind.as_str() {
            "Node" => out.nodes.push(typed(v, path, &kind, i)?),
            "Pod" => out.pods.push(typed(v, path, &kind, i)?),
            "Namespace" => out.namespaces.push(typed(v, path, &kind, i)?),
            "Service" => {
                if let Some(sel) = v.pointer("/spec/selector") {
                    out.workloads.services.insert((ns, name), selector_map(sel));
                }
            }
            "ReplicationController" => {
                if let Some(sel) = v.pointer("/spec/selector") {
                    out.workloads.replication_controllers.insert((ns, name), selector_map(sel));
                }
            }
            "ReplicaSet" | "StatefulSet" => {
                if let Some(sel) = v.pointer("/spec/selector").cloned() {
                    let api: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector =
                        typed(sel, path, &kind, i)?;
                    let parsed = LabelSelector::parse(&api).map_err(|e| LoadError::Object {
                        path: path.into(),
                        kind: kind.clone(),
                        name: name.clone(),
                        field: "spec.selector".into(),
                        message: e.to_string(),
                    })?;
                    out.workloads.sets.insert((kind.clone(), ns, name), parsed);
                }
            }
            "PodGroup" if v.get("apiVersion").and_then(Value::as_str) == Some(crate::gang::POD_GROUP_API_VERSION) => {
                let group = crate::gang::parse_pod_group(&v).map_err(|message| LoadError::Object {
                    path: path.into(),
                    kind: kind.clone(),
                    name: name.clone(),
                    field: "spec".into(),
                    message,
                })?;
                out.pod_groups.push(group);
            }
            "PodGroup"
                if v.get("apiVersion").and_then(Value::as_str) == Some(crate::gang::KUBE_POD_GROUP_API_VERSION) =>
            {
                let group = crate::gang::parse_kube_pod_group(&v).map_err(|message| LoadError::Object {
                    path: path.into(),
                    kind: kind.clone(),
                    name: name.clone(),
                    field: "spec.schedulingPolicy".into(),
                    message,
                })?;
                out.kube_pod_groups.push(group);
            }
            "PodDisruptionBudget" => {
                let pdb: k8s_openapi::api::policy::v1::PodDisruptionBudget = typed(v, path, &kind, i)?;
                out.budgets.push(algorithms::preemption::Budget::from_api(&pdb));
            }
            "" => warn!(path, item = i, "skipping an object without kind"),
            other => match OWNERS.iter().find_map(|o| o.load(&mut out.owned, other, &v)) {
                Some(loaded) => loaded.map_err(|e| LoadError::Object {
                    path: path.into(),
                    kind: kind.clone(),
                    name: name.clone(),
                    field: e.field,
                    message: e.message,
                })?,
                None => {
                    warn!(path, kind = other, name = %name, "skipping an object of a kind the scheduler does not use")
                }
            },
        }
    }
    Ok(out)
}

/// Reads a snapshot file.
pub fn load_file(path: &Path) -> Result<ClusterObjects, LoadError> {
    let p = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Read { path: p.clone(), source })?;
    objects_from_values(parse_documents(&text, &p)?, &p)
}

/// A parsed cluster: nodes, bound and pending pods, namespaces.
#[derive(Debug, Default)]
pub struct ParsedCluster {
    /// Nodes (without pods).
    pub nodes: Vec<NodeInfo>,
    /// Pods bound to one of `nodes`.
    pub bound: Vec<PodInfo>,
    /// Pods without a node, in file order.
    pub pending: Vec<PodInfo>,
    /// Namespace labels.
    pub namespaces: HashMap<String, Labels>,
    /// Workload selectors.
    pub workloads: WorkloadSelectors,
    /// PodDisruptionBudgets.
    pub budgets: Vec<algorithms::preemption::Budget>,
    /// PodGroups by `namespace/name`.
    pub pod_groups: Vec<(String, crate::gang::PodGroupSpec)>,
    /// `scheduling.k8s.io` PodGroups by `namespace/name`.
    pub kube_pod_groups: Vec<(String, Option<crate::gang::PodGroupSpec>)>,
    /// The objects plugins own, with what the cluster's controllers would have made for
    /// the pending pods (their claims from templates).
    pub owned: algorithms::objects::ClusterObjects,
}

/// Whether a pod has finished (its resources are free again).
pub fn is_terminal(pod: &core::Pod) -> bool {
    matches!(pod.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Succeeded" | "Failed"))
}

/// Parses nodes and pods; bound pods are placed on their nodes, terminal pods dropped.
pub fn parse_cluster(objects: &ClusterObjects, path: &str) -> Result<ParsedCluster, LoadError> {
    let obj_err = |kind: &str, name: String, e: &dyn std::fmt::Display| LoadError::Object {
        path: path.into(),
        kind: kind.into(),
        name,
        field: "(see message)".into(),
        message: e.to_string(),
    };
    let mut nodes = Vec::with_capacity(objects.nodes.len());
    let mut index: HashMap<String, usize> = HashMap::new();
    for n in &objects.nodes {
        let info =
            NodeInfo::from_node(n).map_err(|e| obj_err("Node", n.metadata.name.clone().unwrap_or_default(), &e))?;
        if index.insert(info.name.clone(), nodes.len()).is_some() {
            warn!(node = %info.name, "node listed twice; keeping the first");
            continue;
        }
        nodes.push(info);
    }
    let mut pending = Vec::new();
    let mut bound = Vec::new();
    for p in &objects.pods {
        if is_terminal(p) {
            continue;
        }
        let info = match PodInfo::from_pod(p) {
            Ok(info) => info,
            // A bound pod that cannot be read still runs; leave it out with a warning
            // rather than refuse the whole cluster. A pending one is what the user asks about.
            Err(e) if p.spec.as_ref().is_some_and(|s| s.node_name.is_some()) => {
                warn!(error = %e, "ignoring a bound pod the scheduler cannot read");
                continue;
            }
            Err(e) => return Err(obj_err("Pod", p.metadata.name.clone().unwrap_or_default(), &e)),
        };
        match &info.node_name {
            Some(node) => match index.get(node) {
                Some(_) => bound.push(info),
                None => {
                    warn!(pod = %info.key(), node = %node, "pod is bound to a node that is not in the snapshot; ignoring it")
                }
            },
            None => pending.push(info),
        }
    }
    let mut owned = objects.owned.clone();
    for pod in &mut pending {
        for owner in OWNERS {
            owner.admit(&mut owned, pod);
        }
    }
    let namespaces = objects
        .namespaces
        .iter()
        .filter_map(|ns| Some((ns.metadata.name.clone()?, ns.metadata.labels.clone().unwrap_or_default())))
        .collect();
    Ok(ParsedCluster {
        nodes,
        bound,
        pending,
        namespaces,
        workloads: objects.workloads.clone(),
        budgets: objects.budgets.clone(),
        pod_groups: objects.pod_groups.clone(),
        kube_pod_groups: objects.kube_pod_groups.clone(),
        owned,
    })
}

impl ParsedCluster {
    /// A snapshot with every bound pod on its node.
    pub fn snapshot(&self) -> Snapshot {
        let mut nodes = self.nodes.clone();
        let index: HashMap<&str, usize> = self.nodes.iter().enumerate().map(|(i, n)| (n.name.as_str(), i)).collect();
        let mut owned = self.owned.clone();
        for p in &self.bound {
            if let Some(&i) = p.node_name.as_deref().and_then(|n| index.get(n)) {
                for owner in OWNERS {
                    owner.pod_placed(&mut owned, p);
                }
                nodes[i].add_pod(Arc::new(p.clone()));
            }
        }
        let mut snap = Snapshot::new(nodes.into_iter().map(Arc::new).collect(), self.namespaces.clone());
        snap.workloads = Arc::new(self.workloads.clone());
        snap.budgets = Arc::new(self.budgets.clone());
        snap.objects = Arc::new(owned);
        snap
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_recorded_kubectl_dump_in_both_formats() {
        for file in ["tests/data/cluster-dump.yaml", "tests/data/cluster-dump.json"] {
            let objs = load_file(Path::new(file)).unwrap();
            assert_eq!(objs.nodes.len(), 4, "{file}");
            assert!(objs.namespaces.len() >= 4, "{file}");
            let parsed = parse_cluster(&objs, file).unwrap();
            assert!(!parsed.pending.is_empty(), "{file}");
            assert!(!parsed.bound.is_empty(), "{file}");
            assert!(parsed.snapshot().nodes.iter().any(|n| !n.pods.is_empty()), "{file}");
        }
    }

    #[test]
    fn multi_document_yaml_and_unknown_kinds() {
        let text = "apiVersion: v1\nkind: Node\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n---\n";
        let objs = objects_from_values(parse_documents(text, "t").unwrap(), "t").unwrap();
        assert_eq!(objs.nodes.len(), 1);
    }

    #[test]
    fn bad_objects_name_the_object_and_field() {
        let text = r#"{"kind": "List", "items": [{"kind": "Pod", "metadata": {"name": "web"}, "spec": {"containers": "nope"}}]}"#;
        let err = objects_from_values(parse_documents(text, "f.json").unwrap(), "f.json").unwrap_err().to_string();
        assert!(err.contains("Pod web") && err.contains("spec.containers"), "{err}");
        let bad_qty = r#"{"kind": "Node", "metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "lots"}}}"#;
        let objs = objects_from_values(parse_documents(bad_qty, "f").unwrap(), "f").unwrap();
        let err = parse_cluster(&objs, "f").unwrap_err().to_string();
        assert!(err.contains("Node n") && err.contains("lots"), "{err}");
        let bad_claim = r#"{"kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "db"},
            "spec": {"resources": {"requests": {"storage": "lots"}}}}"#;
        let err = objects_from_values(parse_documents(bad_claim, "f").unwrap(), "f").unwrap_err().to_string();
        assert!(err.contains("PersistentVolumeClaim data") && err.contains("requests.storage"), "{err}");
        assert!(parse_documents("{not json", "f").is_err());
        assert!(parse_documents("a: [b", "f").is_err());
    }
}
