//! The DRA objects as an [`Owner`] of cluster objects: read from dumps, kept by the
//! resourceclaim controller and the garbage collector in `simulate`, shown in reports.

use std::sync::Arc;

use k8s_openapi::api::resource::v1 as api;
use serde_json::Value;

use super::controller::DraController;
use crate::dra::kinds::RESOURCE_CLAIM;
use crate::dra::{self, Claim, DEVICES_PREFIX, DeviceClass, DraObjects, Slice};
use crate::node_info::NodeInfo;
use crate::objects::{ClusterObjects, ObjectAction, ObjectEvent};
use crate::owners::{Controller, ObjectError, Owner, Usage, read};
use crate::pod_info::PodInfo;

/// The owner of the DRA objects (see [`Owner`]).
#[derive(Debug, Default)]
pub struct Dra;

impl Owner for Dra {
    fn name(&self) -> &'static str {
        "dra"
    }

    fn load(&self, objects: &mut ClusterObjects, kind: &str, object: &Value) -> Option<Result<(), ObjectError>> {
        let dra = objects.dra_mut();
        let stored = match kind {
            "ResourceClaim" => read::<api::ResourceClaim, _>(object, Claim::from_api).map(|c| {
                dra.upsert_claim(c);
            }),
            "ResourceSlice" => read::<api::ResourceSlice, _>(object, Slice::from_api).map(|s| {
                dra.upsert_slice(s);
            }),
            "DeviceClass" => read::<api::DeviceClass, _>(object, DeviceClass::from_api).map(|c| {
                dra.upsert_class(c);
            }),
            "ResourceClaimTemplate" => read::<api::ResourceClaimTemplate, _>(object, |t| Ok(t.clone())).map(|t| {
                dra.upsert_template(t);
            }),
            _ => return None,
        };
        Some(stored)
    }

    fn counts(&self, objects: &ClusterObjects) -> Vec<(&'static str, usize)> {
        let [claims, slices, classes, templates] = objects.dra().counts();
        vec![
            ("resource_claims", claims),
            ("resource_slices", slices),
            ("device_classes", classes),
            ("resource_claim_templates", templates),
        ]
    }

    fn admit(&self, objects: &mut ClusterObjects, pod: &mut PodInfo) {
        dra::create_from_templates(objects.dra_mut(), pod);
    }

    fn pod_deleted(&self, objects: &mut ClusterObjects, pod: &PodInfo) -> Vec<ObjectEvent> {
        // The garbage collector deletes the claims the pod owns: those made from its
        // templates and its extended resource claim.
        let uid = dra::pod_uid(pod);
        let special = objects.dra().special_claim(&uid).map(|c| c.name.clone());
        let own = pod.resource_claims.iter().filter(|c| c.from_template).filter_map(|c| c.claim.clone());
        let mut events = Vec::new();
        for name in own.chain(special).collect::<Vec<_>>() {
            let key = format!("{}/{name}", pod.namespace);
            if objects.dra_mut().remove_claim(&key).is_some() {
                events.push(ObjectEvent::new(RESOURCE_CLAIM, ObjectAction::Delete, key));
            }
        }
        events
    }

    fn usage_columns(&self, objects: &ClusterObjects, nodes: &[Arc<NodeInfo>]) -> Vec<String> {
        let dra = objects.dra();
        let mut classes: Vec<&str> = dra.classes().map(|c| c.name.as_str()).collect();
        classes.sort_unstable();
        classes
            .into_iter()
            .filter(|class| {
                let prepared = dra::prepare_class(dra, class);
                nodes.iter().any(|n| dra::extended::devices_selected(dra, &n.name, &n.labels, &prepared, true).0 > 0)
            })
            .map(|class| format!("{DEVICES_PREFIX}{class}"))
            .collect()
    }

    fn usage<'a>(&self, objects: &'a ClusterObjects, column: &str) -> Option<Usage<'a>> {
        let class = column.strip_prefix(DEVICES_PREFIX)?;
        let dra = objects.dra();
        let prepared = dra::prepare_class(dra, class);
        Some(Box::new(move |n: &NodeInfo| dra::extended::devices_selected(dra, &n.name, &n.labels, &prepared, true)))
    }

    fn controller(&self) -> Box<dyn Controller> {
        Box::new(DraController)
    }
}
