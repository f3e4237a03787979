//! In-place resize against a real kube-apiserver v1.36.2: a bound pod counts by the larger
//! of its spec and what the kubelet reports while a resize is under way, and a resize
//! that frees room lets a waiting pod in at once. There is no kubelet: the test writes the
//! container status a kubelet would (allocated and actual resources).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod realapi;

use std::time::{Duration, Instant};

use algorithms::builders::{NodeBuilder, PodBuilder};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use realapi::{Ours, plane, pod_scheduled};
use serde_json::json;
use testing::api::{self, node_of};

/// Resizes `name` to `cpu` (the `resize` subresource, as `kubectl` does) and, as the
/// kubelet would once it has, reports the allocation and the running size.
async fn resize(pods: &Api<Pod>, name: &str, cpu: &str, kubelet_done: bool) {
    let spec = json!({"spec": {"containers": [{"name": "c0", "resources": {"requests": {"cpu": cpu}}}]}});
    pods.patch_subresource("resize", name, &PatchParams::default(), &Patch::Strategic(spec)).await.unwrap();
    if kubelet_done {
        let status = json!({"status": {"containerStatuses": [{
            "name": "c0", "image": "img", "imageID": "", "ready": true, "restartCount": 0,
            "allocatedResources": {"cpu": cpu},
            "resources": {"requests": {"cpu": cpu}},
        }]}});
        pods.patch_status(name, &PatchParams::default(), &Patch::Strategic(status)).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resize_counts_while_under_way_and_one_that_frees_room_lets_a_pod_in() {
    let Some(p) = plane("a_resize_counts_while_under_way_and_one_that_frees_room_lets_a_pod_in").await else {
        return;
    };
    let client = &p.client;
    let ns = "resize";
    api::create_namespace(client, ns).await.unwrap();
    api::create_node(client, &NodeBuilder::new("n0").capacity("4", "16Gi", "110").build()).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    // A running pod of 1 CPU, as the kubelet reports it.
    let mut running = PodBuilder::new("running").req("1", "1Gi").node_name("n0").build();
    running.metadata.namespace = Some(ns.into());
    api::create_pod(client, &running).await.unwrap();
    resize(&pods, "running", "1", true).await;
    let _ours = Ours::start(&p.plane, "custom-scheduler", None, &[]);

    // Resized up to 3 CPUs; the kubelet has not allocated it yet. A pod of 2 CPUs would
    // fit against the old size only: it waits.
    resize(&pods, "running", "3", false).await;
    let mut waiter = PodBuilder::new("waiter").scheduler("custom-scheduler").req("2", "1Gi").build();
    waiter.metadata.namespace = Some(ns.into());
    api::create_pod(client, &waiter).await.unwrap();
    let condition = api::wait_for("the waiter reported unschedulable", Duration::from_secs(30), || async {
        pod_scheduled(&pods.get("waiter").await.ok()?)
    })
    .await;
    assert_eq!(condition.0, "False", "{condition:?}");
    assert!(condition.2.as_deref().unwrap_or("").contains("Insufficient cpu"), "{condition:?}");
    // The kubelet allocates the new size: still no room.
    resize(&pods, "running", "3", true).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(node_of(&pods.get("waiter").await.unwrap()), None);

    // Resized down to 1 CPU, but the kubelet still runs it at 3: the node stays full.
    resize(&pods, "running", "1", false).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(node_of(&pods.get("waiter").await.unwrap()), None, "bound while the resize was not actuated");

    // The kubelet actuates it: the waiter goes in, without waiting for the five-minute
    // retry of unschedulable pods.
    let t = Instant::now();
    resize(&pods, "running", "1", true).await;
    let node = api::wait_for("the waiter bound", Duration::from_secs(20), || async {
        node_of(&pods.get("waiter").await.ok()?).map(str::to_string)
    })
    .await;
    assert_eq!(node, "n0");
    println!("bound {:.2}s after the resize down", t.elapsed().as_secs_f64());
}
