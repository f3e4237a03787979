//! Wire types of k8s.io/kube-scheduler/extender/v1. The Go types carry no JSON tags,
//! so keys are PascalCase; embedded Pod and Node objects keep their camelCase.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as core;
use serde::{Deserialize, Serialize};

/// The highest score an extender returns (kube-scheduler multiplies by weight × 10).
pub const MAX_EXTENDER_PRIORITY: i64 = 10;

/// Reads a JSON `null` (a Go nil map, slice or string) as the type's empty value.
fn null_as_default<'de, D: serde::Deserializer<'de>, T: Default + Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// A `v1.NodeList` as kube-scheduler embeds it (no kind or apiVersion).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
pub struct NodeList {
    /// List metadata (kept as sent).
    #[serde(default)]
    pub metadata: serde_json::Value,
    /// The nodes.
    #[serde(default)]
    pub items: Vec<core::Node>,
}

/// `ExtenderArgs`: the body of filter and prioritize.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ExtenderArgs {
    /// The pod being scheduled.
    #[serde(rename = "Pod")]
    pub pod: Option<core::Pod>,
    /// Candidate nodes, when the extender is not nodeCacheCapable.
    #[serde(rename = "Nodes", default)]
    pub nodes: Option<NodeList>,
    /// Candidate node names, when the extender is nodeCacheCapable.
    #[serde(rename = "NodeNames", default)]
    pub node_names: Option<Vec<String>>,
}

/// `ExtenderFilterResult`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
pub struct ExtenderFilterResult {
    /// Nodes that passed (when the request carried `Nodes`).
    #[serde(rename = "Nodes")]
    pub nodes: Option<NodeList>,
    /// Names that passed (when the request carried `NodeNames`).
    #[serde(rename = "NodeNames")]
    pub node_names: Option<Vec<String>>,
    /// Rejected nodes that preemption might help, with the reason.
    #[serde(rename = "FailedNodes", default, deserialize_with = "null_as_default")]
    pub failed_nodes: BTreeMap<String, String>,
    /// Rejected nodes that preemption cannot help.
    #[serde(rename = "FailedAndUnresolvableNodes", default, deserialize_with = "null_as_default")]
    pub failed_and_unresolvable_nodes: BTreeMap<String, String>,
    /// A whole-request error.
    #[serde(rename = "Error", default, deserialize_with = "null_as_default")]
    pub error: String,
}

/// One entry of a `HostPriorityList`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
pub struct HostPriority {
    /// Node name.
    #[serde(rename = "Host")]
    pub host: String,
    /// Score 0..=10.
    #[serde(rename = "Score")]
    pub score: i64,
}

/// `ExtenderBindingArgs`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
pub struct ExtenderBindingArgs {
    /// Pod name.
    #[serde(rename = "PodName")]
    pub pod_name: String,
    /// Pod namespace.
    #[serde(rename = "PodNamespace")]
    pub pod_namespace: String,
    /// Pod UID.
    #[serde(rename = "PodUID")]
    pub pod_uid: String,
    /// Target node.
    #[serde(rename = "Node")]
    pub node: String,
}

/// `ExtenderBindingResult`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
pub struct ExtenderBindingResult {
    /// Empty on success.
    #[serde(rename = "Error", default, deserialize_with = "null_as_default")]
    pub error: String,
}

/// `Victims`: full pods to evict on a node.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct Victims {
    /// The pods.
    #[serde(rename = "Pods", default)]
    pub pods: Vec<core::Pod>,
    /// PodDisruptionBudget violations.
    #[serde(rename = "NumPDBViolations", default)]
    pub num_pdb_violations: i64,
}

/// `MetaPod`: a pod by UID.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
pub struct MetaPod {
    /// Pod UID.
    #[serde(rename = "UID")]
    pub uid: String,
}

/// `MetaVictims`: pods to evict on a node, by UID.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
pub struct MetaVictims {
    /// The pods.
    #[serde(rename = "Pods", default)]
    pub pods: Vec<MetaPod>,
    /// PodDisruptionBudget violations.
    #[serde(rename = "NumPDBViolations", default)]
    pub num_pdb_violations: i64,
}

/// `ExtenderPreemptionArgs`.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ExtenderPreemptionArgs {
    /// The preemptor.
    #[serde(rename = "Pod")]
    pub pod: Option<core::Pod>,
    /// Candidates with full victim pods (not nodeCacheCapable).
    #[serde(rename = "NodeNameToVictims", default)]
    pub node_name_to_victims: Option<BTreeMap<String, Victims>>,
    /// Candidates with victim UIDs (nodeCacheCapable).
    #[serde(rename = "NodeNameToMetaVictims", default)]
    pub node_name_to_meta_victims: Option<BTreeMap<String, MetaVictims>>,
}

/// `ExtenderPreemptionResult`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
pub struct ExtenderPreemptionResult {
    /// The candidates the extender agrees with.
    #[serde(rename = "NodeNameToMetaVictims", default, deserialize_with = "null_as_default")]
    pub node_name_to_meta_victims: BTreeMap<String, MetaVictims>,
}
