//! What kube-controller-manager's resourceclaim controller does for a pod that asks for
//! a claim from a ResourceClaimTemplate, for clusters read from files (`simulate`,
//! `explain`), where no controller runs: the claim is made from the template, owned by
//! the pod, and the pod's status names it.

use k8s_openapi::api::resource::v1 as api;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

use super::objects::Claim;
use super::state::DraState;
use crate::pod_info::PodInfo;

/// The annotation naming the pod claim a generated claim serves.
pub const POD_CLAIM_NAME: &str = "resource.kubernetes.io/pod-claim-name";

/// Makes the claims of the pod's template entries that have none yet, as the controller
/// would (name `<pod>-<claim>`, the template's labels, annotations and spec, the pod as
/// controlling owner) and records their names in the pod. Entries whose template is not
/// in `dra` are left as they are (the pod waits, as it would in a cluster).
pub fn create_from_templates(dra: &mut DraState, pod: &mut PodInfo) {
    for i in 0..pod.resource_claims.len() {
        let entry = &pod.resource_claims[i];
        if !entry.from_template || entry.claim.is_some() || entry.not_needed {
            continue;
        }
        let Some(template_name) = &entry.template else { continue };
        let Some(template) = dra.template(&format!("{}/{template_name}", pod.namespace)).cloned() else { continue };
        let name = format!("{}-{}", pod.name, entry.name);
        let object = claim_object(&template, &pod.namespace, &pod.name, &pod.uid, &entry.name, &name);
        // A template that cannot make a claim leaves the pod waiting: explaining it says
        // its claim is not created yet.
        if let Ok(claim) = Claim::from_api(&object) {
            if dra.api_claim(&claim.key()).is_none() {
                dra.upsert_claim(claim);
            }
            pod.resource_claims[i].claim = Some(name);
        }
    }
}

/// The claim the controller makes from `template` for the pod entry `entry` of pod
/// `namespace/pod` (UID `uid`), named `name`.
pub fn claim_object(
    template: &api::ResourceClaimTemplate,
    namespace: &str,
    pod: &str,
    uid: &str,
    entry: &str,
    name: &str,
) -> api::ResourceClaim {
    let mut annotations = template.spec.metadata.as_ref().and_then(|m| m.annotations.clone()).unwrap_or_default();
    annotations.insert(POD_CLAIM_NAME.into(), entry.into());
    api::ResourceClaim {
        metadata: meta::ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            uid: Some(format!("uid-claim-{namespace}-{name}")),
            resource_version: Some("1".into()),
            labels: template.spec.metadata.as_ref().and_then(|m| m.labels.clone()),
            annotations: Some(annotations),
            owner_references: Some(vec![meta::OwnerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: pod.into(),
                uid: uid.into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..Default::default()
        },
        spec: template.spec.spec.clone(),
        status: None,
    }
}

/// The UID the pod is reserved under (pods read from files may have none).
pub fn pod_uid(pod: &PodInfo) -> String {
    if pod.uid.is_empty() { format!("uid-{}-{}", pod.namespace, pod.name) } else { pod.uid.clone() }
}
