//! The side-by-side DRA backlog, after scheduler_perf's SchedulingWithResourceClaimTemplate:
//! a test driver publishes 10 devices on every node (the benchmark plays the driver),
//! a DeviceClass selects them, and every pod asks for one device through a claim that
//! kube-controller-manager's resourceclaim controller makes from a template.

use std::collections::{BTreeMap, BTreeSet};
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use futures::StreamExt;
use governor::{Quota, RateLimiter};
use k8s_openapi::api::core::v1::{Binding, Node, ObjectReference, Pod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, Error};
use serde_json::json;

/// The test driver.
pub const DRIVER: &str = "test-driver.cdi.k8s.io";
/// Devices per node.
pub const DEVICES: usize = 10;
const TEMPLATE: &str = "test-claim-template";

fn object<K: serde::de::DeserializeOwned + Default>(v: serde_json::Value) -> K {
    serde_json::from_value(v).unwrap_or_default()
}

/// Publishes each node's devices, the class and (in `namespace`) the template.
pub async fn setup(client: &Client, namespace: &str, nodes: &[String]) -> Result<(), Error> {
    let slices: Api<ResourceSlice> = Api::all(client.clone());
    let pp = PostParams::default();
    for node in nodes {
        let devices: Vec<_> = (0..DEVICES)
            .map(|i| json!({"name": format!("instance-{i}"), "attributes": {"model": {"string": "A100"}}}))
            .collect();
        let s: ResourceSlice = object(json!({"metadata": {"name": node}, "spec": {"driver": DRIVER, "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}}));
        slices.create(&pp, &s).await?;
    }
    let class: DeviceClass = object(json!({"metadata": {"name": "test-class"},
        "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{DRIVER}\"")}}]}}));
    Api::<DeviceClass>::all(client.clone()).create(&pp, &class).await?;
    let t: ResourceClaimTemplate = object(json!({"metadata": {"name": TEMPLATE},
        "spec": {"spec": {"devices": {"requests": [{"name": "req-0", "exactly": {"deviceClassName": "test-class"}}]}}}}));
    Api::<ResourceClaimTemplate>::namespaced(client.clone(), namespace).create(&pp, &t).await?;
    Ok(())
}

/// Pod `j`: 100m and 500Mi, one device through a claim from the template.
pub fn pod(j: usize, namespace: &str, scheduler: &str) -> Pod {
    object(json!({"metadata": {"name": format!("pod-{j:05}"), "namespace": namespace},
        "spec": {"schedulerName": scheduler, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}],
            "resourceClaims": [{"name": "resource", "resourceClaimTemplateName": TEMPLATE}]}}))
}

/// The backlog's pods.
pub fn pods(m: usize, namespace: &str, scheduler: &str) -> Vec<Pod> {
    (0..m).map(|j| pod(j, namespace, scheduler)).collect()
}

/// The claim each pod's status names.
fn claim_of(p: &Pod) -> Option<String> {
    p.status.as_ref()?.resource_claim_statuses.as_ref()?.first()?.resource_claim_name.clone()
}

/// Waits until the controller named a claim for `m` pods (`false` on timeout).
pub async fn wait_claims(client: &Client, namespace: &str, m: usize, timeout: Duration) -> Result<bool, Error> {
    let started = Instant::now();
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), namespace);
    while started.elapsed() < timeout {
        let named = pods.list(&ListParams::default()).await?.items.iter().filter(|p| claim_of(p).is_some()).count();
        if named >= m && claims.list(&ListParams::default()).await?.items.len() >= m {
            return Ok(true);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(false)
}

/// Waits until no claim is left in the namespace (the garbage collector deletes the
/// claims of deleted pods).
pub async fn wait_no_claims(client: &Client, namespace: &str, timeout: Duration) -> Result<bool, Error> {
    let started = Instant::now();
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), namespace);
    while started.elapsed() < timeout {
        if claims.list(&ListParams::default()).await?.items.is_empty() {
            return Ok(true);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(false)
}

/// The null binder of the DRA backlog: pod `i` gets device `i / nodes` of node `i % nodes`,
/// written as the scheduler writes it (finalizer, then allocation and `reservedFor`),
/// then the binding. Returns how many pods were bound.
pub async fn null_bind(client: Client, namespace: &str, qps: u32, concurrency: usize) -> Result<usize, Error> {
    let nodes: Vec<String> = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let claims_api: Api<ResourceClaim> = Api::namespaced(client.clone(), namespace);
    let pending: Vec<Pod> = pods_api.list(&ListParams::default().fields("spec.nodeName=")).await?.items;
    let rate = NonZeroU32::new(qps).unwrap_or(NonZeroU32::MIN);
    let limiter = RateLimiter::direct(Quota::per_second(rate).allow_burst(rate));
    let n = nodes.len().max(1);
    let bound = futures::stream::iter(pending.iter().enumerate())
        .map(|(i, pod)| {
            let node = nodes.get(i % n).cloned().unwrap_or_default();
            let device = format!("instance-{}", (i / n) % DEVICES);
            let (pods_api, claims_api, limiter) = (&pods_api, &claims_api, &limiter);
            async move {
                let name = pod.metadata.name.clone().unwrap_or_default();
                let Some(claim) = claim_of(pod) else { return false };
                let pp = PatchParams::default();
                limiter.until_ready().await;
                let finalizer = json!({"metadata": {"finalizers": ["resource.kubernetes.io/delete-protection"]}});
                if claims_api.patch(&claim, &pp, &Patch::Merge(&finalizer)).await.is_err() {
                    return false;
                }
                limiter.until_ready().await;
                let status = json!({"status": {
                    "allocation": {"devices": {"results": [{"request": "req-0", "driver": DRIVER, "pool": node, "device": device}]},
                        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": [node]}]}]}},
                    "reservedFor": [{"resource": "pods", "name": name, "uid": pod.metadata.uid}]}});
                if claims_api.patch_status(&claim, &pp, &Patch::Merge(&status)).await.is_err() {
                    return false;
                }
                let binding = Binding {
                    metadata: ObjectMeta { name: Some(name.clone()), namespace: pod.metadata.namespace.clone(), ..Default::default() },
                    target: ObjectReference { kind: Some("Node".into()), name: Some(node), ..Default::default() },
                };
                limiter.until_ready().await;
                pods_api
                    .create_subresource::<_, serde_json::Value>("binding", &name, &PostParams::default(), &binding)
                    .await
                    .is_ok()
            }
        })
        .buffer_unordered(concurrency.max(1))
        .filter(|ok| std::future::ready(*ok))
        .count()
        .await;
    Ok(bound)
}

/// Bound pods whose claim is not allocated on their node, or holds a device another
/// claim also holds.
pub async fn placement_errors(client: &Client, namespace: &str) -> Result<usize, Error> {
    let pods = Api::<Pod>::namespaced(client.clone(), namespace).list(&ListParams::default()).await?.items;
    let claims: BTreeMap<String, ResourceClaim> = Api::<ResourceClaim>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|c| Some((c.metadata.name.clone()?, c)))
        .collect();
    let mut held = BTreeSet::new();
    let mut bad = 0;
    for p in &pods {
        let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.clone()) else { continue };
        let results = claim_of(p)
            .and_then(|c| claims.get(&c).cloned())
            .and_then(|c| c.status?.allocation?.devices?.results)
            .unwrap_or_default();
        let fine = results.len() == 1
            && results.iter().all(|r| r.pool == node && held.insert(format!("{}/{}/{}", r.driver, r.pool, r.device)));
        if !fine {
            bad += 1;
        }
    }
    Ok(bad)
}
