//! The DRA world of kube-scheduler's scheduler_perf DRA workloads: a test driver that
//! publishes one ResourceSlice per node with `devices` devices, a DeviceClass selecting
//! that driver, a ResourceClaimTemplate asking for one device, and for each pod the claim
//! the resourceclaim controller makes from the template (the pods' statuses name them).

use algorithms::dra::{self, DraState};
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::resource::v1 as api;
use serde_json::json;

/// The test driver's name.
pub const DRIVER: &str = "test-driver.cdi.k8s.io";
/// The DeviceClass.
pub const CLASS: &str = "test-class";
/// The ResourceClaimTemplate.
pub const TEMPLATE: &str = "test-claim-template";
/// The pods' claim entry.
pub const POD_CLAIM: &str = "resource";

/// The claim made for pod `pod` from the template.
pub fn claim_name(pod: &str) -> String {
    format!("{pod}-{POD_CLAIM}")
}

/// The taint of scheduler_perf's toleration case (its DeviceTaintRule taints every device).
pub const TAINT_KEY: &str = "example.com/taint";

/// The ResourceSlice the test driver publishes for one node (every device `tainted`
/// with `example.com/taint=tainted:NoSchedule`, when asked).
pub fn slice(node: &str, devices: usize, tainted: bool) -> api::ResourceSlice {
    let devices: Vec<serde_json::Value> = (0..devices)
        .map(|i| {
            let mut d = json!({"name": format!("instance-{i}"),
                "attributes": {"model": {"string": "A100"}, "family": {"string": "GPU"},
                    "driverVersion": {"version": "1.2.3"}, "dra.example.com/numa": {"int": i}},
                "capacity": {"memory": {"value": "1Gi"}}});
            if tainted {
                d["taints"] = json!([{"key": TAINT_KEY, "value": "tainted", "effect": "NoSchedule"}]);
            }
            d
        })
        .collect();
    let v = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": node},
        "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices}});
    serde_json::from_value(v).unwrap_or_default()
}

/// The DeviceClass.
pub fn class() -> api::DeviceClass {
    let v = json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": CLASS},
        "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{DRIVER}\"")}}]}});
    serde_json::from_value(v).unwrap_or_default()
}

/// The ResourceClaimTemplate in `namespace` (tolerating the taint, when asked).
pub fn template(namespace: &str, tolerating: bool) -> api::ResourceClaimTemplate {
    let mut exactly = json!({"deviceClassName": CLASS});
    if tolerating {
        exactly["tolerations"] = json!([{"key": TAINT_KEY, "operator": "Exists"}]);
    }
    let v = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": TEMPLATE, "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [{"name": "req-0", "exactly": exactly}]}}}});
    serde_json::from_value(v).unwrap_or_default()
}

/// A state with the class and `template`, and the claims made from it for `pods` (name, UID).
fn state_with<'a>(
    template: api::ResourceClaimTemplate,
    namespace: &str,
    pods: impl Iterator<Item = (&'a str, &'a str)>,
) -> DraState {
    let mut st = DraState::default();
    if let Ok(c) = dra::DeviceClass::from_api(&class()) {
        st.upsert_class(c);
    }
    for (pod, uid) in pods {
        let claim = dra::claim_object(&template, namespace, pod, uid, POD_CLAIM, &claim_name(pod));
        if let Ok(c) = dra::Claim::from_api(&claim) {
            st.upsert_claim(c);
        }
    }
    st.upsert_template(template);
    st
}

/// The world: slices for `nodes` nodes (`node-0`…), the class, the template, and the
/// claims of the pods named in `pods` (namespace, name, UID); with `tainted`, every
/// device tainted and the template tolerating it.
pub fn world<'a>(
    nodes: usize,
    devices: usize,
    tainted: bool,
    namespace: &str,
    pods: impl Iterator<Item = (&'a str, &'a str)>,
) -> DraState {
    let mut st = state_with(template(namespace, tainted), namespace, pods);
    for i in 0..nodes {
        if let Ok(s) = dra::Slice::from_api(&slice(&format!("node-{i}"), devices, tainted)) {
            st.upsert_slice(s);
        }
    }
    st
}

/// The classes of scheduler_perf's extended-resource workloads: `test-class-N` selecting
/// the test driver's devices and serving `example.com/gpu-N`.
pub fn extended_class(i: usize) -> api::DeviceClass {
    let v = json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": format!("{CLASS}-{i}")},
        "spec": {"extendedResourceName": extended_resource(i),
            "selectors": [{"cel": {"expression": format!("device.driver == \"{DRIVER}\"")}}]}});
    serde_json::from_value(v).unwrap_or_default()
}

/// The extended resource the class `test-class-N` serves.
pub fn extended_resource(i: usize) -> String {
    format!("example.com/gpu-{i}")
}

/// The world of the extended-resource workloads: the test driver's slices on `nodes`
/// nodes and `classes` classes serving `example.com/gpu-N` (no claims: the scheduler
/// makes them).
pub fn extended_world(nodes: usize, devices: usize, classes: usize) -> DraState {
    let mut st = DraState::default();
    for i in 0..classes {
        if let Ok(c) = dra::DeviceClass::from_api(&extended_class(i)) {
            st.upsert_class(c);
        }
    }
    for i in 0..nodes {
        if let Ok(s) = dra::Slice::from_api(&slice(&format!("node-{i}"), devices, false)) {
            st.upsert_slice(s);
        }
    }
    st
}

/// Adds `count` standalone claims in `namespace` (`claim-N`, one device each), already
/// allocated without a pod as scheduler_perf's `allocResourceClaims` does: each on a
/// scattered node that still has a free device, so that the cluster starts partly used.
pub fn allocate_standalone(st: &mut DraState, nodes: usize, devices: usize, namespace: &str, count: usize) {
    let nodes = nodes.max(1);
    let mut used = vec![0usize; nodes];
    for i in 0..count.min(nodes * devices) {
        // A multiplicative hash scatters the start; the walk finds the next node with room.
        let start = i.wrapping_mul(2_654_435_761) % nodes;
        let Some(node) = (0..nodes).map(|k| (start + k) % nodes).find(|&n| used[n] < devices) else { break };
        let device = format!("instance-{}", used[node]);
        used[node] += 1;
        let v = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": format!("claim-{i}"), "namespace": namespace, "uid": format!("uid-claim-{i}"),
                "resourceVersion": "1"},
            "spec": {"devices": {"requests": [{"name": "req-0", "exactly": {"deviceClassName": CLASS}}]}},
            "status": {"allocation": {
                "devices": {"results": [{"request": "req-0", "driver": DRIVER, "pool": format!("node-{node}"),
                    "device": device}]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [format!("node-{node}")]}]}]}}}});
        let claim: Option<api::ResourceClaim> = serde_json::from_value(v).ok();
        if let Some(c) = claim.and_then(|c| dra::Claim::from_api(&c).ok()) {
            st.upsert_claim(c);
        }
    }
}

/// The label of the nodes the partitionable pools serve.
pub const DRA_NODE_LABEL: &str = "node-with-dra";

fn with_dra_nodes() -> serde_json::Value {
    json!({"nodeSelectorTerms": [{"matchExpressions": [{"key": DRA_NODE_LABEL, "operator": "In", "values": ["true"]}]}]})
}

/// The slices of partitionable pool `i` (scheduler_perf's partitionable case): a counter
/// set of four counters of one each in a slice of its own, and six devices reachable from
/// every node labelled `node-with-dra=true`: two consuming two counters each (one of them
/// marked to be preallocated) and four consuming one each.
pub fn partitionable_slices(i: usize) -> [api::ResourceSlice; 2] {
    let pool = json!({"name": format!("resourceslice-{i}"), "generation": 1, "resourceSliceCount": 2});
    let counter = |names: &[&str]| -> serde_json::Value {
        names.iter().map(|n| ((*n).to_string(), json!({"value": "1"}))).collect::<serde_json::Map<_, _>>().into()
    };
    let device = |name: &str, preallocate: bool, counters: &[&str]| {
        json!({"name": name,
            "attributes": {"preallocate": {"bool": preallocate}, "dra.example.com/slice": {"int": i}},
            "capacity": {"counters": {"value": counters.len().to_string()}},
            "consumesCounters": [{"counterSet": "counter-set", "counters": counter(counters)}]})
    };
    let sets = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": format!("resourceslice-countersets-{i}")},
        "spec": {"driver": DRIVER, "pool": pool, "nodeSelector": with_dra_nodes(),
            "sharedCounters": [{"name": "counter-set",
                "counters": counter(&["counter1", "counter2", "counter3", "counter4"])}]}});
    let devices = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": format!("resourceslice-devices-{i}")},
        "spec": {"driver": DRIVER, "pool": pool, "nodeSelector": with_dra_nodes(), "devices": [
            device("device-2-counters-1", true, &["counter1", "counter2"]),
            device("device-2-counters-2", false, &["counter3", "counter4"]),
            device("device-1-counter-1", false, &["counter1"]),
            device("device-1-counter-2", false, &["counter2"]),
            device("device-1-counter-3", false, &["counter3"]),
            device("device-1-counter-4", false, &["counter4"])]}});
    [serde_json::from_value(sets).unwrap_or_default(), serde_json::from_value(devices).unwrap_or_default()]
}

/// The template of the partitionable case: two devices of one pool (`matchAttribute` on
/// the pool's slice number).
pub fn two_device_template(namespace: &str) -> api::ResourceClaimTemplate {
    let v = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": TEMPLATE, "namespace": namespace},
        "spec": {"spec": {"devices": {
            "requests": [{"name": "req-0", "exactly": {"deviceClassName": CLASS, "count": 2}}],
            "constraints": [{"requests": ["req-0"], "matchAttribute": "dra.example.com/slice"}]}}}});
    serde_json::from_value(v).unwrap_or_default()
}

/// The partitionable world: `pools` pools, the class, the two-device template, one
/// preallocated claim per pool (`init` namespace, holding the pool's preallocated device,
/// as scheduler_perf's `allocResourceClaims` leaves them), and the pods' claims.
pub fn partitionable_world<'a>(
    pools: usize,
    namespace: &str,
    pods: impl Iterator<Item = (&'a str, &'a str)>,
) -> DraState {
    let mut st = state_with(two_device_template(namespace), namespace, pods);
    for i in 0..pools {
        for s in partitionable_slices(i) {
            if let Ok(s) = dra::Slice::from_api(&s) {
                st.upsert_slice(s);
            }
        }
        let v = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": format!("test-claim-with-selector-{i}"), "namespace": "init",
                "uid": format!("uid-preallocated-{i}"), "resourceVersion": "1"},
            "spec": {"devices": {"requests": [{"name": "req-0", "exactly": {"deviceClassName": CLASS}}]}},
            "status": {"allocation": {
                "devices": {"results": [{"request": "req-0", "driver": DRIVER, "pool": format!("resourceslice-{i}"),
                    "device": "device-2-counters-1"}]},
                "nodeSelector": with_dra_nodes()}}});
        let claim: Option<api::ResourceClaim> = serde_json::from_value(v).ok();
        if let Some(c) = claim.and_then(|c| dra::Claim::from_api(&c).ok()) {
            st.upsert_claim(c);
        }
    }
    st
}

/// The slices of consumable-capacity pool `i` (scheduler_perf's consumable-capacity case):
/// a counter set of two counters in a slice of its own, and two devices allowing multiple
/// allocations, each with 80Gi of memory (requests rounded up to whole Gi, 1Gi by
/// default), one of them consuming both counters.
pub fn consumable_slices(i: usize) -> [api::ResourceSlice; 2] {
    let pool = json!({"name": format!("resourceslice-{i}"), "generation": 1, "resourceSliceCount": 2});
    let memory = json!({"value": "80Gi", "requestPolicy": {"default": "1Gi", "validRange": {"min": "1Gi"}}});
    let sets = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": format!("resourceslice-countersets-{i}")},
        "spec": {"driver": DRIVER, "pool": pool, "nodeSelector": with_dra_nodes(),
            "sharedCounters": [{"name": "counter-set",
                "counters": {"counter1": {"value": "1"}, "counter2": {"value": "1"}}}]}});
    let devices = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": format!("resourceslice-devices-{i}")},
        "spec": {"driver": DRIVER, "pool": pool, "nodeSelector": with_dra_nodes(), "devices": [
            {"name": "shareable-device", "allowMultipleAllocations": true,
                "attributes": {"preallocate": {"bool": false}, "dra.example.com/slice": {"int": i}},
                "capacity": {"memory": memory}},
            {"name": "device-2-counters-1", "allowMultipleAllocations": true,
                "attributes": {"preallocate": {"bool": true}, "dra.example.com/slice": {"int": i}},
                "capacity": {"counters": {"value": "2"}, "memory": memory},
                "consumesCounters": [{"counterSet": "counter-set",
                    "counters": {"counter1": {"value": "1"}, "counter2": {"value": "1"}}}]}]}});
    [serde_json::from_value(sets).unwrap_or_default(), serde_json::from_value(devices).unwrap_or_default()]
}

/// The template of the consumable-capacity case: two requests of 10Gi each.
pub fn capacity_template(namespace: &str) -> api::ResourceClaimTemplate {
    let request = |name: &str| json!({"name": name, "exactly": {"deviceClassName": CLASS, "capacity": {"requests": {"memory": "10Gi"}}}});
    let v = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": TEMPLATE, "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [request("req-0"), request("req-1")]}}}});
    serde_json::from_value(v).unwrap_or_default()
}

/// The consumable-capacity world: `pools` pools, a class of the driver's devices that
/// allow multiple allocations, the template, and the pods' claims.
pub fn consumable_world<'a>(pools: usize, namespace: &str, pods: impl Iterator<Item = (&'a str, &'a str)>) -> DraState {
    let mut st = state_with(capacity_template(namespace), namespace, pods);
    let v = json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": CLASS},
        "spec": {"selectors": [{"cel": {"expression":
            format!("device.driver == \"{DRIVER}\" && device.allowMultipleAllocations == true")}}]}});
    let class: Option<api::DeviceClass> = serde_json::from_value(v).ok();
    if let Some(c) = class.and_then(|c| dra::DeviceClass::from_api(&c).ok()) {
        st.upsert_class(c);
    }
    for i in 0..pools {
        for s in consumable_slices(i) {
            if let Ok(s) = dra::Slice::from_api(&s) {
                st.upsert_slice(s);
            }
        }
    }
    st
}

/// The driver publishing the GPUs of the `/dra` variants.
pub const GPU_DRIVER: &str = "gpu.example.com";

/// Moves every node's `resource` (GPUs) from its allocatable and capacity into a
/// ResourceSlice of as many devices, as a DRA driver publishes them, and adds the
/// DeviceClass `gpu` serving `resource` as an extended resource: pods asking for it in
/// their containers then get devices through claims the scheduler makes.
pub fn gpus_from_slices(nodes: &mut [core::Node], resource: &str) -> DraState {
    let mut st = DraState::default();
    let class = json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
        "spec": {"extendedResourceName": resource,
            "selectors": [{"cel": {"expression": format!("device.driver == \"{GPU_DRIVER}\"")}}]}});
    if let Some(c) = serde_json::from_value(class).ok().and_then(|c| dra::DeviceClass::from_api(&c).ok()) {
        st.upsert_class(c);
    }
    for node in nodes {
        let name = node.metadata.name.clone().unwrap_or_default();
        let Some(status) = node.status.as_mut() else { continue };
        let count = status.allocatable.as_mut().and_then(|a| a.remove(resource));
        if let Some(c) = status.capacity.as_mut() {
            c.remove(resource);
        }
        let Some(count) = count.and_then(|q| q.0.parse::<usize>().ok()).filter(|&c| c > 0) else { continue };
        let devices: Vec<serde_json::Value> = (0..count).map(|i| json!({"name": format!("gpu-{i}")})).collect();
        let v = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": format!("{name}-gpus")},
            "spec": {"driver": GPU_DRIVER, "nodeName": name, "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                "devices": devices}});
        if let Some(s) = serde_json::from_value(v).ok().and_then(|s| dra::Slice::from_api(&s).ok()) {
            st.upsert_slice(s);
        }
    }
    st
}
