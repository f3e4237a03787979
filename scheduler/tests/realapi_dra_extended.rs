//! Extended resources backed by DRA on a real kube-apiserver v1.36.2 with
//! kube-controller-manager v1.36.2 (its garbage collector deletes a pod's claims with
//! the pod): pods ask for `nvidia.com/gpu` in their containers; two nodes have GPUs only
//! in ResourceSlices (the test publishes them, as a node's driver would), one advertises
//! one GPU in its allocatable (a device plugin's way). No kubelet runs: the test deletes
//! pods at once. The same scenario runs under kube-scheduler v1.36.2 and both must agree.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod realapi;

use std::time::Duration;

use algorithms::builders::{NodeBuilder, PodBuilder};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use kube::Client;
use kube::api::{Api, DeleteParams};
use realapi::dra::{NS, create, pod_named, start_side, wait_message};
use realapi::plane;
use serde_json::json;
use testing::api::{self, node_of, wait_for};

const DRIVER: &str = "gpu.example.com";
const GPU: &str = "nvidia.com/gpu";

/// Nodes n-a (four GPUs in a slice), n-b (two in a slice), n-dp (one in allocatable),
/// and the class `gpu` serving `nvidia.com/gpu`.
async fn world(client: &Client) {
    for (name, advertised) in [("n-a", None), ("n-b", None), ("n-dp", Some("1"))] {
        let mut b = NodeBuilder::new(name).capacity("8", "16Gi", "110");
        if let Some(q) = advertised {
            b = b.resource(GPU, q);
        }
        api::create_node(client, &b.build()).await.unwrap();
    }
    for (node, count) in [("n-a", 4), ("n-b", 2)] {
        let devices: Vec<_> = (0..count).map(|i| json!({"name": format!("gpu-{i}")})).collect();
        create::<ResourceSlice>(
            Api::all(client.clone()),
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": format!("{node}-gpus")},
                "spec": {"driver": DRIVER, "nodeName": node,
                    "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}}),
        )
        .await;
    }
    create::<DeviceClass>(
        Api::all(client.clone()),
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
            "spec": {"extendedResourceName": GPU,
                "selectors": [{"cel": {"expression": format!("device.driver == \"{DRIVER}\"")}}]}}),
    )
    .await;
}

/// What a bound pod got: its node, its claim's devices (pool/device/request, sorted),
/// whether the claim is annotated, controlled by the pod and reserved for it, and the
/// pod's recorded mappings (container, resource, request) to that claim.
#[derive(Debug, PartialEq)]
struct Placed {
    node: String,
    devices: Vec<String>,
    owned_and_reserved: bool,
    mappings: Vec<(String, String, String)>,
}

async fn placed(client: &Client, name: &str) -> Placed {
    let node = wait_for(&format!("{name} to be bound"), Duration::from_secs(90), || async {
        node_of(&pod_named(client, name).await).map(String::from)
    })
    .await;
    let pod = pod_named(client, name).await;
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let recorded = pod.status.as_ref().and_then(|s| s.extended_resource_claim_status.clone());
    let claims = Api::<ResourceClaim>::namespaced(client.clone(), NS).list(&Default::default()).await.unwrap().items;
    let claim = recorded
        .as_ref()
        .and_then(|r| claims.iter().find(|c| c.metadata.name.as_ref() == Some(&r.resource_claim_name)));
    let mut devices: Vec<String> = claim
        .and_then(|c| c.status.as_ref()?.allocation.as_ref()?.devices.as_ref()?.results.clone())
        .into_iter()
        .flatten()
        .map(|r| format!("{}/{}/{}", r.pool, r.device, r.request))
        .collect();
    devices.sort();
    let owned_and_reserved = claim.is_some_and(|c| {
        let annotated =
            c.metadata.annotations.as_ref().and_then(|a| a.get("resource.kubernetes.io/extended-resource-claim"));
        let owned = c.metadata.owner_references.iter().flatten().any(|o| o.uid == uid && o.controller == Some(true));
        let reserved =
            c.status.as_ref().and_then(|s| s.reserved_for.as_ref()).is_some_and(|r| r.iter().any(|x| x.uid == uid));
        annotated.is_some_and(|v| v == "true") && owned && reserved
    });
    let mappings = recorded
        .map(|r| r.request_mappings.into_iter().map(|m| (m.container_name, m.resource_name, m.request_name)).collect())
        .unwrap_or_default();
    Placed { node, devices, owned_and_reserved, mappings }
}

fn gpus(name: &str, scheduler: &str, count: &str) -> Pod {
    PodBuilder::new(name).namespace(NS).scheduler(scheduler).req("100m", "128Mi").device(GPU, count).build()
}

/// x-0 asks for three GPUs (only n-a has them), x-1 for two (n-a has one left: n-b),
/// x-2 for two (none left: its message); x-0 goes, its claim with it, and x-2 gets n-a.
async fn scenario(client: &Client, scheduler: &str) -> (Vec<Placed>, String) {
    world(client).await;
    let mut out = Vec::new();
    for (name, count) in [("x-0", "3"), ("x-1", "2")] {
        api::create_pod(client, &gpus(name, scheduler, count)).await.unwrap();
        out.push(placed(client, name).await);
    }
    api::create_pod(client, &gpus("x-2", scheduler, "2")).await.unwrap();
    let message = wait_message(client, "x-2").await;
    let now = DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
    Api::<Pod>::namespaced(client.clone(), NS).delete("x-0", &now).await.unwrap();
    out.push(placed(client, "x-2").await);
    (out, message)
}

#[tokio::test]
async fn pods_asking_for_an_extended_resource_get_devices_through_a_claim_as_with_kube_scheduler() {
    let mut outcomes = Vec::new();
    for scheduler in ["custom-scheduler", "default-scheduler"] {
        let Some(p) = plane("realapi_dra_extended").await else { return };
        let _running = start_side(&p, scheduler);
        outcomes.push(scenario(&p.client, scheduler).await);
    }
    let (ours, message) = &outcomes[0];
    let nodes: Vec<&str> = ours.iter().map(|p| p.node.as_str()).collect();
    assert_eq!(nodes, vec!["n-a", "n-b", "n-a"]);
    assert_eq!(ours[0].devices.len(), 3, "{ours:?}");
    assert_eq!(ours[1].devices, vec!["n-b/gpu-0/container-0-request-2", "n-b/gpu-1/container-0-request-2"]);
    assert!(ours.iter().all(|p| p.owned_and_reserved), "{ours:?}");
    assert_eq!(ours[1].mappings, vec![("c0".into(), GPU.into(), "container-0-request-2".into())]);
    assert_eq!(
        message,
        "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 cannot allocate all claims. still not schedulable, \
         preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );
    assert_eq!(outcomes[0], outcomes[1], "ours against kube-scheduler v1.36.2");
}
