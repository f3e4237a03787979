//! The ElasticQuota object as the API serves it: scheduler-plugins' CRD
//! `elasticquotas.scheduling.x-k8s.io`, version `v1alpha1`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

/// The API group of ElasticQuota.
pub const GROUP: &str = "scheduling.x-k8s.io";
/// The version of ElasticQuota read.
pub const VERSION: &str = "v1alpha1";
/// The plural of ElasticQuota.
pub const PLURAL: &str = "elasticquotas";

/// An ElasticQuota: the guaranteed (`min`) and the most (`max`) its namespace's pods
/// may request together.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElasticQuota {
    /// The object's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What the quota guarantees and allows.
    #[serde(default)]
    pub spec: ElasticQuotaSpec,
    /// What its controller last counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ElasticQuotaStatus>,
}

/// `spec` of an ElasticQuota.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElasticQuotaSpec {
    /// What the namespace is guaranteed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<BTreeMap<String, Quantity>>,
    /// The most the namespace may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<BTreeMap<String, Quantity>>,
}

/// `status` of an ElasticQuota.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElasticQuotaStatus {
    /// What the namespace's pods use, as its controller counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used: Option<BTreeMap<String, Quantity>>,
}
