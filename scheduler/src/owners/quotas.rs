//! The quotas in `run`: the watch of ElasticQuotas (scheduler-plugins' CRD
//! `elasticquotas.scheduling.x-k8s.io/v1alpha1`). Quotas ask for no writes: their
//! `status.used` is left to scheduler-plugins' controller.

use std::borrow::Cow;

use algorithms::framework::ApiWrite;
use algorithms::quotas::api::{GROUP, PLURAL, VERSION};
use algorithms::quotas::kinds::ELASTIC_QUOTA;
use algorithms::quotas::{ElasticQuota, Quota, QuotaObjects};
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use serde::{Deserialize, Serialize};

use super::{ApiOwner, Op, ops, store};

/// The quotas' API side.
#[derive(Debug, Default)]
pub struct Quotas;

impl ApiOwner for Quotas {
    fn watches(&self, client: &Client) -> Vec<BoxStream<'static, Op>> {
        vec![ops::<Object>(
            client,
            ELASTIC_QUOTA,
            PLURAL,
            // A second quota in a namespace is not read, as scheduler-plugins keeps the first.
            |o| Ok(store(Quota::from_api(&o.0)?, |st, q| st.quotas_mut().upsert(q).unwrap_or(false))),
            |st, key| st.quotas_mut().remove(key).is_some(),
        )]
    }

    fn write<'a>(&'a self, _: &'a Client, _: &'a ApiWrite) -> Option<BoxFuture<'a, Result<u64, String>>> {
        None
    }
}

/// An ElasticQuota as the client reads it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Object(pub ElasticQuota);

impl kube::Resource for Object {
    type DynamicType = ();
    type Scope = kube::core::NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("ElasticQuota")
    }

    fn group(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(GROUP)
    }

    fn version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(VERSION)
    }

    fn plural(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(PLURAL)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.0.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.0.metadata
    }
}
