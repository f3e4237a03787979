//! Dynamic Resource Allocation by `custom-scheduler run` on a real kube-apiserver
//! v1.36.2 with kube-controller-manager v1.36.2 (its resourceclaim controller makes the
//! pods' claims from templates and releases the claims of deleted pods; its garbage
//! collector deletes them). No DRA driver and no kubelet run: the test publishes the
//! ResourceSlices a node's driver would, and deletes pods at once as a kubelet would.
//! The same scenario runs under kube-scheduler v1.36.2 and both must agree.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod realapi;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use algorithms::builders::{NodeBuilder, PodBuilder};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice};
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use realapi::dra::{NS, create, pod_named, start_side, wait_message};
use realapi::{Ours, plane};
use serde_json::json;
use testing::api::{self, node_of, wait_for};

const DRIVER: &str = "gpu.example.com";

/// Nodes n-a (two GPUs, one "big"), n-b (one GPU) and n-c (none); the class, a template
/// asking for one GPU, and a shared claim by name.
async fn world(client: &Client) {
    for n in ["n-a", "n-b", "n-c"] {
        api::create_node(client, &NodeBuilder::new(n).capacity("8", "16Gi", "110").build()).await.unwrap();
    }
    let slices: Api<ResourceSlice> = Api::all(client.clone());
    for (node, devices) in [("n-a", vec![("gpu-0", "big"), ("gpu-1", "small")]), ("n-b", vec![("gpu-0", "small")])] {
        let devices: Vec<_> = devices
            .iter()
            .map(|(name, size)| json!({"name": name, "attributes": {"size": {"string": size}}}))
            .collect();
        create(
            slices.clone(),
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": format!("{node}-gpus")},
                "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                    "devices": devices}}),
        )
        .await;
    }
    gpu_class(client).await;
    let templates: Api<ResourceClaimTemplate> = Api::namespaced(client.clone(), NS);
    create(
        templates.clone(),
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "one-gpu"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}}),
    )
    .await;
    // A request that prefers a big GPU and settles for any.
    create(
        templates,
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "big-or-any"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "firstAvailable": [
                {"name": "big", "deviceClassName": "gpu",
                    "selectors": [{"cel": {"expression": format!("device.attributes[\"{DRIVER}\"].size == \"big\"")}}]},
                {"name": "any", "deviceClassName": "gpu"}]}]}}}}),
    )
    .await;
}

/// The DeviceClass `gpu`: every device of the test's driver.
async fn gpu_class(client: &Client) {
    create::<DeviceClass>(
        Api::all(client.clone()),
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{DRIVER}\"")}}]}}),
    )
    .await;
}

fn pod(name: &str, scheduler: &str) -> PodBuilder {
    PodBuilder::new(name).namespace(NS).scheduler(scheduler).req("100m", "128Mi")
}

/// The devices of an allocated claim, and its consumers' names.
fn allocation(c: &ResourceClaim) -> Option<(Vec<String>, Vec<String>)> {
    let status = c.status.as_ref()?;
    let results = status.allocation.as_ref()?.devices.as_ref()?.results.clone()?;
    let devices = results.iter().map(|r| format!("{}/{}/{}", r.pool, r.device, r.request)).collect();
    let consumers = status.reserved_for.iter().flatten().map(|r| r.name.clone()).collect();
    Some((devices, consumers))
}

async fn claims(client: &Client) -> Vec<ResourceClaim> {
    Api::<ResourceClaim>::namespaced(client.clone(), NS).list(&Default::default()).await.unwrap().items
}

/// What one scheduler did with the scenario.
#[derive(Debug, PartialEq)]
struct Outcome {
    /// Nodes of the first three template pods, sorted.
    nodes: Vec<String>,
    /// The fourth pod's FailedScheduling message while no device is free.
    message: String,
    /// The node the fourth pod got once a pod's device was freed.
    after_free: String,
    /// Whether both pods sharing a claim landed on the claim's node.
    shared_together: bool,
    /// The request a `firstAvailable` claim was allocated for.
    first_available: String,
    /// The first FailedScheduling message of a pod whose claim was allocated on a node
    /// that is gone.
    stale_message: String,
    /// Whether that pod was then bound with its claim allocated anew on its node.
    stale_reallocated: bool,
}

async fn scenario(client: &Client, scheduler: &str) -> Outcome {
    world(client).await;
    // Three pods take the three GPUs; none is taken twice.
    for i in 0..3 {
        api::create_pod(client, &pod(&format!("t-{i}"), scheduler).claim_template("gpu", "one-gpu", None).build())
            .await
            .unwrap();
    }
    let bound = api::wait_bound(client, NS, 3, Duration::from_secs(60)).await;
    let mut nodes: Vec<String> = bound.iter().filter_map(|p| node_of(p).map(String::from)).collect();
    nodes.sort();
    let all = claims(client).await;
    let mut held = BTreeSet::new();
    for c in &all {
        let (devices, consumers) = allocation(c).unwrap_or_else(|| panic!("claim not allocated: {c:?}"));
        let owner = &c.metadata.owner_references.as_ref().unwrap()[0].name;
        assert_eq!(&consumers, &vec![owner.clone()], "reservedFor names the pod");
        let p = pod_named(client, owner).await;
        let device = &devices[0];
        assert!(device.starts_with(&format!("{}/", node_of(&p).unwrap())), "{owner}: {device} is not on its node");
        assert!(held.insert(device.clone()), "device {device} allocated twice");
        assert!(c.metadata.finalizers.iter().flatten().any(|f| f == "resource.kubernetes.io/delete-protection"));
    }
    assert_eq!(held.len(), 3);
    // A fourth finds no device.
    api::create_pod(client, &pod("t-3", scheduler).claim_template("gpu", "one-gpu", None).build()).await.unwrap();
    let message = wait_message(client, "t-3").await;
    // Deleting a pod on n-b frees its device (the controller deallocates and deletes its claim).
    let on_b = bound.iter().find(|p| node_of(p) == Some("n-b")).unwrap().metadata.name.clone().unwrap();
    let now = DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
    Api::<Pod>::namespaced(client.clone(), NS).delete(&on_b, &now).await.unwrap();
    let after_free = wait_for("t-3 to be bound", Duration::from_secs(60), || async {
        node_of(&pod_named(client, "t-3").await).map(String::from)
    })
    .await;
    // Make room: delete everything, then a claim shared by two pods, and a firstAvailable pod.
    for p in api::pods(client, NS).await.unwrap() {
        let name = p.metadata.name.unwrap();
        Api::<Pod>::namespaced(client.clone(), NS).delete(&name, &now).await.unwrap();
    }
    wait_for("every device free", Duration::from_secs(60), || async {
        claims(client).await.iter().all(|c| allocation(c).is_none()).then_some(())
    })
    .await;
    api::create_pod(client, &pod("f-0", scheduler).claim_template("gpu", "big-or-any", None).build()).await.unwrap();
    api::wait_bound(client, NS, 1, Duration::from_secs(60)).await;
    create::<ResourceClaim>(
        Api::namespaced(client.clone(), NS),
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "shared"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}),
    )
    .await;
    for name in ["s-0", "s-1"] {
        api::create_pod(client, &pod(name, scheduler).resource_claim("gpu", "shared").build()).await.unwrap();
    }
    let bound = api::wait_bound(client, NS, 3, Duration::from_secs(60)).await;
    let by_name: BTreeMap<String, String> =
        bound.iter().filter_map(|p| Some((p.metadata.name.clone()?, node_of(p)?.to_string()))).collect();
    let all = claims(client).await;
    let shared = all.iter().find(|c| c.metadata.name.as_deref() == Some("shared")).unwrap();
    let (devices, consumers) = allocation(shared).unwrap();
    let shared_node = devices[0].split('/').next().unwrap().to_string();
    let shared_together = by_name["s-0"] == shared_node && by_name["s-1"] == shared_node && consumers.len() == 2;
    let mine = all.iter().find(|c| c.metadata.name.as_deref().is_some_and(|n| n.starts_with("f-0-"))).unwrap();
    let (devices, _) = allocation(mine).unwrap();
    let first_available = devices[0].splitn(3, '/').nth(2).unwrap().to_string();
    let (stale_message, stale_reallocated) = stale_claim(client, scheduler).await;
    Outcome { nodes, message, after_free, shared_together, first_available, stale_message, stale_reallocated }
}

/// A claim allocated on a node that is gone and used by nobody: PostFilter deallocates
/// it, and the next attempt allocates it on the node with the one device left.
async fn stale_claim(client: &Client, scheduler: &str) -> (String, bool) {
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), NS);
    create(
        claims.clone(),
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "stale", "finalizers": ["resource.kubernetes.io/delete-protection"]},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}),
    )
    .await;
    let status = json!({"status": {"allocation": {
        "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "n-gone", "device": "gpu-0"}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["n-gone"]}]}]}}}});
    claims.patch_status("stale", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    api::create_pod(client, &pod("d-0", scheduler).resource_claim("gpu", "stale").build()).await.unwrap();
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    let message = wait_for("d-0's FailedScheduling event", Duration::from_secs(30), || async {
        let list = events.list(&Default::default()).await.ok()?;
        let mut failed: Vec<_> = list
            .items
            .into_iter()
            .filter(|e| {
                let about = e.regarding.as_ref().and_then(|r| r.name.as_deref());
                e.reason.as_deref() == Some("FailedScheduling") && about == Some("d-0")
            })
            .collect();
        failed.sort_by_key(|e| e.metadata.creation_timestamp.clone().map(|t| t.0));
        failed.first()?.note.clone()
    })
    .await;
    let node = wait_for("d-0 to be bound", Duration::from_secs(60), || async {
        node_of(&pod_named(client, "d-0").await).map(String::from)
    })
    .await;
    let claim = claims.get("stale").await.unwrap();
    let on_node = allocation(&claim).is_some_and(|(devices, consumers)| {
        devices.len() == 1 && devices[0].starts_with(&format!("{node}/")) && consumers == vec!["d-0".to_string()]
    });
    (message, on_node)
}

#[tokio::test]
async fn claims_are_allocated_as_kube_scheduler_allocates_them() {
    let Some(p) = plane("realapi_dra").await else { return };
    let _kcm = testing::start_controller_manager(&p.plane, "kube-controller-manager", &[]).unwrap();
    let _ours = Ours::start(&p.plane, "custom-scheduler", None, &[]);
    let ours = scenario(&p.client, "custom-scheduler").await;
    drop(p);

    let Some(p) = plane("realapi_dra").await else { return };
    let _kcm = testing::start_controller_manager(&p.plane, "kube-controller-manager", &[]).unwrap();
    let _kube = testing::start_kube_scheduler(
        &p.plane,
        "kube-scheduler",
        json!({"profiles": [{"schedulerName": "default-scheduler"}]}),
    )
    .unwrap();
    let kube = scenario(&p.client, "default-scheduler").await;

    assert_eq!(ours.nodes, vec!["n-a", "n-a", "n-b"]);
    assert_eq!(
        ours.message,
        "0/3 nodes are available: 3 cannot allocate all claims. still not schedulable, preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );
    assert_eq!(ours.after_free, "n-b");
    assert!(ours.shared_together);
    assert_eq!(ours.first_available, "gpu/big");
    assert_eq!(
        ours.stale_message,
        "0/3 nodes are available: 3 resourceclaim not available on the node. deallocation of ResourceClaim completed, \
         preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );
    assert!(ours.stale_reallocated);
    assert_eq!(ours, kube, "ours against kube-scheduler v1.36.2");
}

/// A node whose one GPU carries a NoSchedule taint: a pod whose claim does not tolerate
/// it waits with kube-scheduler's message; one whose claim tolerates it gets the device.
async fn tainted_device(client: &Client, scheduler: &str) -> (String, Option<String>) {
    api::create_node(client, &NodeBuilder::new("n-t").capacity("8", "16Gi", "110").build()).await.unwrap();
    create::<ResourceSlice>(
        Api::all(client.clone()),
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "n-t-gpus"},
            "spec": {"driver": DRIVER, "nodeName": "n-t", "pool": {"name": "n-t", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0", "taints": [{"key": "example.com/unhealthy", "value": "xid-48", "effect": "NoSchedule"}]}]}}),
    )
    .await;
    gpu_class(client).await;
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), NS);
    for (name, tolerations) in
        [("plain", json!([])), ("tolerant", json!([{"key": "example.com/unhealthy", "operator": "Exists"}]))]
    {
        create(
            claims.clone(),
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "tolerations": tolerations}}]}}}),
        )
        .await;
    }
    api::create_pod(client, &pod("plain", scheduler).resource_claim("gpu", "plain").build()).await.unwrap();
    let message = wait_message(client, "plain").await;
    api::create_pod(client, &pod("tolerant", scheduler).resource_claim("gpu", "tolerant").build()).await.unwrap();
    let node = wait_for("tolerant to be bound", Duration::from_secs(60), || async {
        node_of(&pod_named(client, "tolerant").await).map(String::from)
    })
    .await;
    let device = allocation(&claims.get("tolerant").await.unwrap()).map(|(d, _)| d.join(","));
    assert_eq!(node, "n-t");
    (message, device)
}

#[tokio::test]
async fn a_tainted_device_goes_only_to_a_claim_that_tolerates_it_as_with_kube_scheduler() {
    let mut outcomes = Vec::new();
    for scheduler in ["custom-scheduler", "default-scheduler"] {
        let Some(p) = plane("realapi_dra_taints").await else { return };
        let _running = start_side(&p, scheduler);
        outcomes.push(tainted_device(&p.client, scheduler).await);
    }
    assert_eq!(outcomes[0].1.as_deref(), Some("n-t/gpu-0/gpu"));
    assert!(outcomes[0].0.starts_with("0/1 nodes are available: 1 cannot allocate all claims."), "{}", outcomes[0].0);
    assert_eq!(outcomes[0], outcomes[1], "ours against kube-scheduler v1.36.2");
}

/// A GPU that declares a binding condition: the pod waits, nominated to the node and
/// unbound, until the test (as the driver) reports the condition true in the claim's
/// device status. Returns (nominated while waiting, bound node, the result's conditions,
/// whether the allocation carries a timestamp).
/// What one scheduler did with a device declaring a binding condition: the pod's
/// nomination while it waited, its node, the conditions copied into the allocation,
/// whether the allocation was stamped, and the waiting event (type, reason, action, note).
type BindingOutcome = (Option<String>, String, Option<Vec<String>>, bool, (String, String, String, String));

async fn binding_condition(client: &Client, scheduler: &str) -> BindingOutcome {
    api::create_node(client, &NodeBuilder::new("n-bc").capacity("8", "16Gi", "110").build()).await.unwrap();
    create::<ResourceSlice>(
        Api::all(client.clone()),
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "n-bc-gpus"},
            "spec": {"driver": DRIVER, "nodeName": "n-bc", "pool": {"name": "n-bc", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0", "bindingConditions": ["Attached"], "bindingFailureConditions": ["AttachFailed"]}]}}),
    )
    .await;
    gpu_class(client).await;
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), NS);
    create(
        claims.clone(),
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "attach"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}),
    )
    .await;
    api::create_pod(client, &pod("waits", scheduler).resource_claim("gpu", "attach").build()).await.unwrap();
    // The claim is written (allocated, reserved for the pod) but the pod is not bound.
    wait_for("the claim's allocation", Duration::from_secs(60), || async {
        allocation(&claims.get("attach").await.ok()?).filter(|(_, consumers)| !consumers.is_empty())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let waiting = pod_named(client, "waits").await;
    assert!(node_of(&waiting).is_none(), "{scheduler}: bound before the binding condition");
    let nominated = waiting.status.and_then(|s| s.nominated_node_name);
    let claim = claims.get("attach").await.unwrap();
    let result = claim.status.as_ref().and_then(|s| s.allocation.as_ref()).unwrap();
    let conditions =
        result.devices.as_ref().and_then(|d| d.results.as_ref()).and_then(|r| r[0].binding_conditions.clone());
    let stamped = result.allocation_timestamp.is_some();
    // The driver reports the device attached.
    let status = json!({"status": {"devices": [{"driver": DRIVER, "pool": "n-bc", "device": "gpu-0",
        "conditions": [{"type": "Attached", "status": "True", "reason": "Attached", "message": "",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]}]}});
    claims.patch_status("attach", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    let node = wait_for("waits to be bound", Duration::from_secs(60), || async {
        node_of(&pod_named(client, "waits").await).map(String::from)
    })
    .await;
    let event = wait_for("the BindingConditionsPending event", Duration::from_secs(30), || async {
        let events = Api::<Event>::namespaced(client.clone(), NS).list(&Default::default()).await.ok()?.items;
        let e = events.into_iter().find(|e| {
            e.reason.as_deref() == Some("BindingConditionsPending")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("waits")
        })?;
        Some((e.type_?, e.reason?, e.action?, e.note?))
    })
    .await;
    (nominated, node, conditions, stamped, event)
}

#[tokio::test]
async fn a_device_with_a_binding_condition_holds_the_bind_until_the_driver_reports_it() {
    let mut outcomes = Vec::new();
    for scheduler in ["custom-scheduler", "default-scheduler"] {
        let Some(p) = plane("realapi_dra_binding_conditions").await else { return };
        let _running = start_side(&p, scheduler);
        outcomes.push(binding_condition(&p.client, scheduler).await);
    }
    let event = (
        "Normal".to_string(),
        "BindingConditionsPending".to_string(),
        "Scheduling".to_string(),
        "waiting for binding conditions for device on node n-bc".to_string(),
    );
    assert_eq!(
        outcomes[0],
        (Some("n-bc".to_string()), "n-bc".to_string(), Some(vec!["Attached".to_string()]), true, event)
    );
    assert_eq!(outcomes[0], outcomes[1], "ours against kube-scheduler v1.36.2");
}

/// Unreserve's patch against the real API server: the pod's entry leaves `reservedFor`,
/// the other consumer's and the allocation stay, and a claim of another UID is refused.
#[tokio::test]
async fn unreserve_takes_only_the_pod_out_of_a_claim() {
    let Some(p) = plane("realapi_dra_unreserve").await else { return };
    let client = &p.client;
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), NS);
    let claim = create(
        claims.clone(),
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "shared"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}),
    )
    .await;
    let status = json!({"status": {
        "allocation": {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "n-a", "device": "gpu-0"}]}},
        "reservedFor": [{"resource": "pods", "name": "a", "uid": "uid-a"}, {"resource": "pods", "name": "b", "uid": "uid-b"}]}});
    claims.patch_status("shared", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    let shared = std::sync::Arc::new(scheduler::run::Shared::new(
        scheduler::engine::Engine::new(Vec::new()),
        governor::Quota::per_second(std::num::NonZeroU32::MIN),
    ));
    let host = scheduler::run::binder::ApiHost::new(client.clone(), shared, 1);
    let release = |uid: &str| {
        algorithms::framework::ApiWrite::new(algorithms::dra::DraWrite::ReleaseClaim {
            namespace: NS.into(),
            name: "shared".into(),
            claim_uid: uid.into(),
            pod_uid: "uid-a".into(),
        })
    };
    let other = scheduler::binding::ClusterApi::write(&host, &release("not-this-claim")).await;
    assert!(other.is_err(), "a claim of another UID was patched");
    let uid = claim.metadata.uid.clone().unwrap();
    scheduler::binding::ClusterApi::write(&host, &release(&uid)).await.unwrap();
    let after = claims.get("shared").await.unwrap();
    let (devices, consumers) = allocation(&after).unwrap();
    assert_eq!(devices, vec!["n-a/gpu-0/gpu".to_string()]);
    assert_eq!(consumers, vec!["b".to_string()]);
}

/// One GPU of 8Gi on node n-p published as MIG-style partitions: a counter set in a slice
/// of its own, and devices `whole` (8Gi), `half-0` and `half-1` (4Gi each) consuming it.
/// A pod asking for a half takes half-0; a pod asking for any device cannot have the
/// whole GPU beside it and takes half-1; a third waits; once the first is gone it gets
/// half-0 again (the whole GPU still does not fit beside half-1). Returns each pod's
/// device and the third's message.
async fn partitions(client: &Client, scheduler: &str) -> (Vec<String>, String) {
    api::create_node(client, &NodeBuilder::new("n-p").capacity("8", "16Gi", "110").build()).await.unwrap();
    let slices: Api<ResourceSlice> = Api::all(client.clone());
    let pool = json!({"name": "n-p", "generation": 1, "resourceSliceCount": 2});
    create(
        slices.clone(),
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "n-p-counters"},
            "spec": {"driver": DRIVER, "nodeName": "n-p", "pool": pool,
                "sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "8Gi"}}}]}}),
    )
    .await;
    let part = |name: &str, size: &str, memory: &str| {
        json!({"name": name, "attributes": {"size": {"string": size}}, "capacity": {"memory": {"value": memory}},
            "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": memory}}}]})
    };
    create(
        slices,
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "n-p-gpus"},
            "spec": {"driver": DRIVER, "nodeName": "n-p", "pool": pool,
                "devices": [part("whole", "whole", "8Gi"), part("half-0", "half", "4Gi"), part("half-1", "half", "4Gi")]}}),
    )
    .await;
    gpu_class(client).await;
    let templates: Api<ResourceClaimTemplate> = Api::namespaced(client.clone(), NS);
    for (name, selectors) in [
        ("half", json!([{"cel": {"expression": format!("device.attributes[\"{DRIVER}\"].size == \"half\"")}}])),
        ("any", json!([])),
    ] {
        create(
            templates.clone(),
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
                "spec": {"spec": {"devices": {"requests": [{"name": "gpu",
                    "exactly": {"deviceClassName": "gpu", "selectors": selectors}}]}}}}),
        )
        .await;
    }
    let device_of = |pod: &'static str| async move {
        let all = claims(client).await;
        let mine =
            all.iter().find(|c| c.metadata.name.as_deref().is_some_and(|n| n.starts_with(&format!("{pod}-"))))?;
        allocation(mine).map(|(d, _)| d.join(","))
    };
    let mut devices = Vec::new();
    for (name, template) in [("p-0", "half"), ("p-1", "any")] {
        api::create_pod(client, &pod(name, scheduler).claim_template("gpu", template, None).build()).await.unwrap();
        wait_for(&format!("{name} to be bound"), Duration::from_secs(60), || async {
            node_of(&pod_named(client, name).await).map(String::from)
        })
        .await;
        devices.push(device_of(name).await.unwrap_or_default());
    }
    api::create_pod(client, &pod("p-2", scheduler).claim_template("gpu", "any", None).build()).await.unwrap();
    let message = wait_message(client, "p-2").await;
    let now = DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
    Api::<Pod>::namespaced(client.clone(), NS).delete("p-0", &now).await.unwrap();
    wait_for("p-2 to be bound", Duration::from_secs(60), || async {
        node_of(&pod_named(client, "p-2").await).map(String::from)
    })
    .await;
    devices.push(device_of("p-2").await.unwrap_or_default());
    (devices, message)
}

#[tokio::test]
async fn partitions_of_one_gpu_are_never_allocated_beyond_its_counters_as_with_kube_scheduler() {
    let mut outcomes = Vec::new();
    for scheduler in ["custom-scheduler", "default-scheduler"] {
        let Some(p) = plane("realapi_dra_partitions").await else { return };
        let _running = start_side(&p, scheduler);
        outcomes.push(partitions(&p.client, scheduler).await);
    }
    assert_eq!(outcomes[0].0, vec!["n-p/half-0/gpu", "n-p/half-1/gpu", "n-p/half-0/gpu"]);
    assert!(outcomes[0].1.starts_with("0/1 nodes are available: 1 cannot allocate all claims."), "{}", outcomes[0].1);
    assert_eq!(outcomes[0], outcomes[1], "ours against kube-scheduler v1.36.2");
}

/// One GPU of 8Gi memory on n-s that allows multiple allocations: two pods whose claims
/// ask for 4Gi each share it (each result with its own share ID and 4Gi consumed), a
/// third waits. Returns each bound pod's (device, consumed memory) and the third's message.
async fn shared_device(client: &Client, scheduler: &str) -> (Vec<(String, String)>, String) {
    api::create_node(client, &NodeBuilder::new("n-s").capacity("8", "16Gi", "110").build()).await.unwrap();
    create::<ResourceSlice>(
        Api::all(client.clone()),
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "n-s-gpus"},
            "spec": {"driver": DRIVER, "nodeName": "n-s", "pool": {"name": "n-s", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0", "allowMultipleAllocations": true,
                    "capacity": {"memory": {"value": "8Gi",
                        "requestPolicy": {"default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}}}}}]}}),
    )
    .await;
    gpu_class(client).await;
    create::<ResourceClaimTemplate>(
        Api::namespaced(client.clone(), NS),
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "four-gi"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu",
                "exactly": {"deviceClassName": "gpu", "capacity": {"requests": {"memory": "3500Mi"}}}}]}}}}),
    )
    .await;
    let mut shares = Vec::new();
    let mut ids = BTreeSet::new();
    for name in ["s-0", "s-1"] {
        api::create_pod(client, &pod(name, scheduler).claim_template("gpu", "four-gi", None).build()).await.unwrap();
        wait_for(&format!("{name} to be bound"), Duration::from_secs(60), || async {
            node_of(&pod_named(client, name).await).map(String::from)
        })
        .await;
        let all = claims(client).await;
        let mine = all.iter().find(|c| c.metadata.name.as_deref().is_some_and(|n| n.starts_with(&format!("{name}-"))));
        let result = mine
            .and_then(|c| c.status.as_ref()?.allocation.as_ref()?.devices.as_ref()?.results.as_ref()?.first().cloned())
            .unwrap();
        ids.insert(result.share_id.clone().unwrap_or_default());
        let memory = result.consumed_capacity.as_ref().and_then(|c| c.get("memory")).map(|q| q.0.clone());
        shares.push((format!("{}/{}", result.pool, result.device), memory.unwrap_or_default()));
    }
    assert_eq!(ids.len(), 2, "{scheduler}: each share has its own ID: {ids:?}");
    api::create_pod(client, &pod("s-2", scheduler).claim_template("gpu", "four-gi", None).build()).await.unwrap();
    let message = wait_message(client, "s-2").await;
    (shares, message)
}

#[tokio::test]
async fn two_pods_share_one_device_through_consumable_capacity_as_with_kube_scheduler() {
    let mut outcomes = Vec::new();
    for scheduler in ["custom-scheduler", "default-scheduler"] {
        let Some(p) = plane("realapi_dra_shared").await else { return };
        let _running = start_side(&p, scheduler);
        outcomes.push(shared_device(&p.client, scheduler).await);
    }
    let four = ("n-s/gpu-0".to_string(), "4Gi".to_string());
    assert_eq!(outcomes[0].0, vec![four.clone(), four]);
    assert!(outcomes[0].1.starts_with("0/1 nodes are available: 1 cannot allocate all claims."), "{}", outcomes[0].1);
    assert_eq!(outcomes[0], outcomes[1], "ours against kube-scheduler v1.36.2");
}
