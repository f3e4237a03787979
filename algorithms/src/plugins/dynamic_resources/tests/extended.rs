//! Extended resources backed by DRA, after kube-scheduler's cases: class
//! `my-resource-class` serves `example.com/gpu` (and `my-resource-class2` serves
//! `example.com/gpu2`), pod `default/my-pod` asks for them in its container.

use super::*;
use crate::dra::extended::{self, ContainerAsk, Mapping, SpecialRequest};
use crate::dra::{DraObjects, DraWrite};
use crate::plugins::node_resources_fit::{NodeResourcesFit, NodeResourcesFitArgs};

fn serving(name: &str, resource: Option<&str>, created: &str) -> Value {
    let mut spec = json!({"selectors": [{"cel": {"expression": "device.driver == \"some-driver\""}}]});
    if let Some(r) = resource {
        spec["extendedResourceName"] = json!(r);
    }
    json!({"metadata": {"name": name, "creationTimestamp": created}, "spec": spec})
}

fn slice_of(node: &str, devices: usize) -> Value {
    let devices: Vec<Value> = (0..devices).map(|i| json!({"name": format!("gpu-{i}")})).collect();
    json!({"metadata": {"name": node}, "spec": {"driver": "some-driver", "nodeName": node,
        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}})
}

/// Nodes with allocatable `(name, resource, quantity)`, the classes, slices and claims.
fn cluster(nodes: &[(&str, &[(&str, &str)])], classes: Vec<Value>, slices: Vec<Value>, claims: Vec<Value>) -> Snapshot {
    let nodes: Vec<_> = nodes
        .iter()
        .map(|(n, resources)| resources.iter().fold(NodeBuilder::new(n), |b, (r, q)| b.resource(r, q)).build())
        .collect();
    let mut snap = snapshot(&nodes, &[]);
    let mut objects = ClusterObjects::default();
    for c in classes {
        objects
            .dra_mut()
            .upsert_class(dra::DeviceClass::from_api(&serde_json::from_value(c).expect("class")).expect("class"));
    }
    for s in slices {
        objects
            .dra_mut()
            .upsert_slice(dra::Slice::from_api(&serde_json::from_value(s).expect("slice")).expect("slice"));
    }
    for c in claims {
        objects
            .dra_mut()
            .upsert_claim(dra::Claim::from_api(&serde_json::from_value(c).expect("claim")).expect("claim"));
    }
    snap.objects = Arc::new(objects);
    snap
}

fn gpu_class() -> Value {
    serving("my-resource-class", Some("example.com/gpu"), "2026-01-01T00:00:00Z")
}

fn asking(list: &[(&str, &str)]) -> PodInfo {
    let b = list.iter().fold(PodBuilder::new("my-pod"), |b, (r, q)| b.device(r, q));
    pod_info(b)
}

fn ask(container: &str, index: usize, short_lived: bool, amounts: &[(&str, i64)]) -> ContainerAsk {
    let mut keys: Vec<String> = amounts.iter().map(|(n, _)| n.to_string()).collect();
    keys.push("cpu".into());
    keys.sort();
    ContainerAsk {
        container: container.into(),
        index,
        short_lived,
        keys,
        amounts: amounts.iter().map(|(n, q)| (n.to_string(), *q)).collect(),
    }
}

fn class_named(name: &str) -> Arc<dra::DeviceClass> {
    Arc::new(
        dra::DeviceClass::from_api(&serde_json::from_value(serving(name, None, "2026-01-01T00:00:00Z")).expect("c"))
            .expect("c"),
    )
}

fn req_of(name: &str, class: &str, count: i64) -> SpecialRequest {
    SpecialRequest { name: name.into(), class: class.into(), count }
}

fn map_of(container: &str, resource: &str, request: &str) -> Mapping {
    Mapping { container: container.into(), resource: resource.into(), request: request.into() }
}

#[test]
fn requests_are_named_after_container_and_resource_position() {
    let gpu = ("example.com/gpu".to_string(), class_named("gpu-class"));
    let implicit = (format!("{}other", extended::CLASS_PREFIX), class_named("other"));
    // One container asking for both: requests follow the names' order among all its
    // requests (cpu included).
    let one = [ask("c0", 0, false, &[("example.com/gpu", 2), (&implicit.0, 1)])];
    let (reqs, maps) = extended::requests_and_mappings(&one, &[implicit.clone(), gpu.clone()]);
    assert_eq!(
        reqs,
        vec![req_of("container-0-request-1", "other", 1), req_of("container-0-request-2", "gpu-class", 2)]
    );
    assert_eq!(maps[0], map_of("c0", &implicit.0, "container-0-request-1"));
    // Two containers: one request each.
    let two = [ask("a", 0, false, &[("example.com/gpu", 1)]), ask("b", 1, false, &[("example.com/gpu", 2)])];
    let (reqs, _) = extended::requests_and_mappings(&two, std::slice::from_ref(&gpu));
    assert_eq!(
        reqs,
        vec![req_of("container-0-request-1", "gpu-class", 1), req_of("container-1-request-1", "gpu-class", 2)]
    );
}

#[test]
fn init_containers_reuse_later_requests_and_only_the_largest_of_their_own_is_kept() {
    let gpu = ("example.com/gpu".to_string(), class_named("gpu-class"));
    // An init container asking for 2 before a container asking for 1: it uses the
    // container's device and asks for one more.
    let asks = [ask("init", 0, true, &[("example.com/gpu", 2)]), ask("main", 1, false, &[("example.com/gpu", 1)])];
    let (reqs, maps) = extended::requests_and_mappings(&asks, std::slice::from_ref(&gpu));
    assert_eq!(
        reqs,
        vec![req_of("container-0-request-1", "gpu-class", 1), req_of("container-1-request-1", "gpu-class", 1)]
    );
    assert_eq!(
        maps,
        vec![
            map_of("main", "example.com/gpu", "container-1-request-1"),
            map_of("init", "example.com/gpu", "container-1-request-1"),
            map_of("init", "example.com/gpu", "container-0-request-1"),
        ]
    );
    // Init(1), sidecar(1), init(3), main(1): the first init uses the sidecar's device;
    // the second uses main's and asks for 2 more; of the init requests only that one
    // is made.
    let asks = [
        ask("i0", 0, true, &[("example.com/gpu", 1)]),
        ask("side", 1, false, &[("example.com/gpu", 1)]),
        ask("i2", 2, true, &[("example.com/gpu", 3)]),
        ask("main", 3, false, &[("example.com/gpu", 1)]),
    ];
    let (reqs, maps) = extended::requests_and_mappings(&asks, std::slice::from_ref(&gpu));
    assert_eq!(
        reqs,
        vec![
            req_of("container-1-request-1", "gpu-class", 1),
            req_of("container-2-request-1", "gpu-class", 2),
            req_of("container-3-request-1", "gpu-class", 1),
        ]
    );
    assert!(maps.contains(&map_of("i0", "example.com/gpu", "container-1-request-1")));
    assert!(maps.contains(&map_of("i2", "example.com/gpu", "container-2-request-1")));
    // Two init containers both needing their own: the smaller one's mapping moves to the larger.
    let asks = [ask("i0", 0, true, &[("example.com/gpu", 1)]), ask("i1", 1, true, &[("example.com/gpu", 2)])];
    let (reqs, maps) = extended::requests_and_mappings(&asks, std::slice::from_ref(&gpu));
    assert_eq!(reqs, vec![req_of("container-1-request-1", "gpu-class", 2)]);
    assert!(maps.iter().all(|m| m.request == "container-1-request-1"));
}

#[test]
fn the_newest_class_serves_a_resource_and_every_class_its_implicit_name() {
    let snap = cluster(
        &[],
        vec![
            serving("old", Some("example.com/gpu"), "2026-01-01T00:00:00Z"),
            serving("new-b", Some("example.com/gpu"), "2026-02-01T00:00:00Z"),
            serving("new-a", Some("example.com/gpu"), "2026-02-01T00:00:00Z"),
        ],
        vec![],
        vec![],
    );
    let dra = snap.objects.dra();
    assert_eq!(extended::class_for(dra, "example.com/gpu").map(|c| c.name.as_str()), Some("new-a"));
    assert_eq!(
        extended::class_for(dra, "deviceclass.resource.kubernetes.io/old").map(|c| c.name.as_str()),
        Some("old")
    );
    assert!(extended::class_for(dra, "deviceclass.resource.kubernetes.io/none").is_none());
    assert!(extended::class_for(dra, "example.com/other").is_none());
}

#[test]
fn a_node_advertising_the_resource_keeps_the_device_plugin_path() {
    let plugin = DynamicResources::default();
    let snap =
        cluster(&[("worker", &[("example.com/gpu", "1")])], vec![gpu_class()], vec![slice_of("worker", 1)], vec![]);
    let p = asking(&[("example.com/gpu", "1")]);
    assert_eq!(messages(&filter(&plugin, &p, &snap)), vec!["ok"]);
    let mut objects = (*snap.objects).clone();
    assert!(plugin.reserve(&mut objects, &p, &snap.nodes[0]).expect("reserve").is_none(), "no claim is made");
}

#[test]
fn a_node_without_the_resource_gets_a_claim_created_allocated_and_recorded() {
    let plugin = DynamicResources::default();
    // A node advertising zero of it is served by DRA too.
    let snap =
        cluster(&[("worker", &[("example.com/gpu", "0")])], vec![gpu_class()], vec![slice_of("worker", 2)], vec![]);
    let p = asking(&[("example.com/gpu", "2")]);
    assert_eq!(messages(&filter(&plugin, &p, &snap)), vec!["ok"]);
    let mut objects = (*snap.objects).clone();
    let reserved = plugin.reserve(&mut objects, &p, &snap.nodes[0]).expect("reserve").expect("reserved");
    let writes = plugin.pre_bind(&reserved, "worker");
    let writes = super::dra_writes(&writes);
    let [DraWrite::CreateClaim(w), DraWrite::PodExtendedClaim { pod, claim, mappings, .. }] = writes.as_slice() else {
        panic!("create, then record: {writes:?}")
    };
    assert_eq!(pod, "my-pod");
    assert_eq!(claim, &w.claim.name);
    assert!(claim.starts_with("my-pod-extended-resources-") && claim.len() == "my-pod-extended-resources-".len() + 5);
    assert_eq!(mappings, &vec![map_of("c0", "example.com/gpu", "container-0-request-0")]);
    let api = &w.claim.api;
    assert_eq!(
        api.metadata.annotations.as_ref().and_then(|a| a.get(extended::ANNOTATION)).map(String::as_str),
        Some("true")
    );
    let owner = &api.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str(), owner.controller),
        ("Pod", "my-pod", "1234", Some(true))
    );
    let request = &api.spec.devices.as_ref().and_then(|d| d.requests.clone()).expect("requests")[0];
    let exactly = request.exactly.as_ref().expect("exactly");
    assert_eq!(
        (request.name.as_str(), exactly.device_class_name.as_str(), exactly.count),
        ("container-0-request-0", "my-resource-class", Some(2))
    );
    let results = api
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.clone());
    assert_eq!(results.expect("allocated").len(), 2);
    assert_eq!(api.metadata.finalizers, Some(vec![dra::FINALIZER.to_string()]));
    // The devices are taken for the next pod.
    assert_eq!(objects.dra().holders(&DeviceId::new("some-driver", "worker", "gpu-0")), 1);
    let mut after = snap.clone();
    after.objects = Arc::new(objects.clone());
    let next = pod_info(PodBuilder::new("next").device("example.com/gpu", "1"));
    assert_eq!(messages(&filter(&plugin, &next, &after)), vec![CANNOT_ALLOCATE]);
    // A failed cycle after the creation deletes the claim; before it, nothing to undo.
    let undo = plugin.undo(&reserved, &p, 1);
    let undo = super::dra_writes(&undo);
    assert!(matches!(undo.as_slice(), [DraWrite::DeleteClaim { name, .. }] if name == claim), "{undo:?}");
    assert!(plugin.undo(&reserved, &p, 0).is_empty());
    plugin.unreserve(&mut objects, "default/my-pod", &reserved);
    assert_eq!(objects.dra().holders(&DeviceId::new("some-driver", "worker", "gpu-0")), 0);
}

#[test]
fn one_resource_by_device_plugin_and_one_by_dra_make_a_claim_for_the_second_only() {
    let plugin = DynamicResources::default();
    let classes = vec![gpu_class(), serving("my-resource-class2", Some("example.com/gpu2"), "2026-01-01T00:00:00Z")];
    let snap = cluster(&[("worker", &[("example.com/gpu", "1")])], classes, vec![slice_of("worker", 1)], vec![]);
    let p = asking(&[("example.com/gpu", "1"), ("example.com/gpu2", "1")]);
    let mut objects = (*snap.objects).clone();
    let reserved = plugin.reserve(&mut objects, &p, &snap.nodes[0]).expect("reserve").expect("reserved");
    let writes = plugin.pre_bind(&reserved, "worker");
    let writes = super::dra_writes(&writes);
    let DraWrite::CreateClaim(w) = &writes[0] else { panic!("{writes:?}") };
    let requests = w.claim.api.spec.devices.as_ref().and_then(|d| d.requests.clone()).expect("requests");
    let names: Vec<(&str, &str)> = requests
        .iter()
        .map(|r| (r.name.as_str(), r.exactly.as_ref().map_or("", |e| e.device_class_name.as_str())))
        .collect();
    assert_eq!(names, vec![("container-0-request-1", "my-resource-class2")]);
}

#[test]
fn without_devices_the_pod_cannot_be_allocated_and_stays_unschedulable() {
    let plugin = DynamicResources::default();
    let mut snap = cluster(&[("worker", &[])], vec![gpu_class()], vec![], vec![]);
    let p = asking(&[("example.com/gpu", "1")]);
    let st = filter(&plugin, &p, &snap);
    assert_eq!(messages(&st), vec![CANNOT_ALLOCATE]);
    assert_eq!(st[0].code, Code::UnschedulableAndUnresolvable);
    assert_eq!(post_filter(&plugin, &p, &mut snap, None), STILL_NOT_SCHEDULABLE);
}

#[test]
fn resources_no_class_serves_and_the_gate_off_leave_the_pod_alone() {
    let unnamed = serving("my-resource-class", None, "2026-01-01T00:00:00Z");
    let snap = cluster(&[("worker", &[])], vec![unnamed], vec![slice_of("worker", 1)], vec![]);
    let p = asking(&[("example.com/gpu", "1")]);
    assert!(DynamicResources::default().pre_filter(&p, &snap).status.is_skip());
    let snap = cluster(&[("worker", &[])], vec![gpu_class()], vec![slice_of("worker", 1)], vec![]);
    let off = DynamicResources {
        features: dra::Features { extended_resource: false, ..Default::default() },
        ..Default::default()
    };
    assert!(off.pre_filter(&p, &snap).status.is_skip());
    // The class's implicit name is served without extendedResourceName.
    let implicit = asking(&[("deviceclass.resource.kubernetes.io/my-resource-class", "1")]);
    assert_eq!(messages(&filter(&DynamicResources::default(), &implicit, &snap)), vec!["ok"]);
}

#[test]
fn a_claim_left_from_an_earlier_attempt_fails_every_node_until_post_filter_deletes_it() {
    let plugin = DynamicResources::default();
    let left = json!({"metadata": {"name": "my-pod-extended-resources-abcde", "namespace": "default",
        "uid": "left-uid", "resourceVersion": "3", "annotations": {extended::ANNOTATION: "true"},
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "my-pod", "uid": "1234", "controller": true}]},
        "spec": {"devices": {"requests": [{"name": "container-0-request-0",
            "exactly": {"deviceClassName": "my-resource-class", "count": 1}}]}}});
    let mut snap = cluster(&[("a", &[]), ("b", &[])], vec![gpu_class()], vec![slice_of("a", 1)], vec![left]);
    let p = asking(&[("example.com/gpu", "1")]);
    assert_eq!(messages(&filter(&plugin, &p, &snap)), vec![STALE, STALE]);
    assert_eq!(post_filter(&plugin, &p, &mut snap, None), format!("{DELETED} (1 writes)"));
}

#[test]
fn node_resources_fit_leaves_served_resources_to_dra_where_nodes_lack_them() {
    let fit = NodeResourcesFit::new(&NodeResourcesFitArgs::default()).expect("fit");
    let off = NodeResourcesFit::new(&NodeResourcesFitArgs::default()).expect("fit").with_dra_extended(false);
    let snap = cluster(
        &[("none", &[]), ("zero", &[("example.com/gpu", "0")]), ("one", &[("example.com/gpu", "1")])],
        vec![gpu_class()],
        vec![],
        vec![],
    );
    let verdicts = |plugin: &NodeResourcesFit, p: &PodInfo| -> Vec<String> {
        let pre = plugin.pre_filter(p, &snap);
        snap.nodes
            .iter()
            .map(|n| {
                let s = plugin.filter(&pre.state, p, n);
                if s.is_success() { "ok".into() } else { s.message() }
            })
            .collect()
    };
    let two = asking(&[("example.com/gpu", "2")]);
    assert_eq!(
        verdicts(&fit, &two),
        vec!["ok", "ok", "Insufficient example.com/gpu"],
        "a device plugin's count still binds"
    );
    let off_verdicts = verdicts(&off, &two);
    assert!(off_verdicts.iter().all(|v| v == "Insufficient example.com/gpu"), "{off_verdicts:?}");
    let unserved = asking(&[("example.com/other", "1")]);
    assert_eq!(verdicts(&fit, &unserved)[0], "Insufficient example.com/other");
}

/// A claim holding devices `gpu-0`… (`held` of them) of node `node`'s slice.
fn holding(node: &str, held: usize) -> Value {
    let results: Vec<Value> = (0..held)
        .map(|i| json!({"request": "r", "driver": "some-driver", "pool": node, "device": format!("gpu-{i}")}))
        .collect();
    json!({"metadata": {"name": format!("held-{node}"), "namespace": "default", "uid": format!("u-{node}"), "resourceVersion": "1"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "my-resource-class", "count": held}}]}},
        "status": {"allocation": {"devices": {"results": results}}}})
}

#[test]
fn device_packing_counts_a_class_devices_where_nodes_do_not_advertise_them() {
    use crate::plugins::device_packing::{DevicePacking, DevicePackingArgs};
    let args: DevicePackingArgs =
        serde_json::from_value(json!({"resources": [{"name": "example.com/gpu"}]})).expect("args");
    let packing = DevicePacking::new(&args).expect("plugin");
    let snap = cluster(
        &[("a", &[]), ("b", &[]), ("c", &[])],
        vec![gpu_class()],
        vec![slice_of("a", 8), slice_of("b", 8)],
        vec![holding("a", 7)],
    );
    let scores = |p: &PodInfo| -> Vec<i64> {
        snap.nodes.iter().map(|n| packing.score_with(p, n, Some(snap.objects.dra()))).collect()
    };
    // One GPU: the last free one of a before breaking into b; c has none.
    assert_eq!(scores(&asking(&[("example.com/gpu", "1")])), vec![100, 12, 0]);
    // The same through a claim asking for one device of the class.
    let mut claim = pending(json!({"name": "req-1", "exactly": {"deviceClassName": "my-resource-class", "count": 1}}));
    claim["metadata"]["name"] = json!(CLAIM);
    let with_claim = cluster(
        &[("a", &[]), ("b", &[]), ("c", &[])],
        vec![gpu_class()],
        vec![slice_of("a", 8), slice_of("b", 8)],
        vec![holding("a", 7), claim],
    );
    let p = pod_info(pod());
    let by_claim: Vec<i64> =
        with_claim.nodes.iter().map(|n| packing.score_with(&p, n, Some(with_claim.objects.dra()))).collect();
    assert_eq!(by_claim, vec![100, 12, 0]);
    // CPU work keeps off nodes with devices.
    assert_eq!(scores(&pod_info(PodBuilder::new("cpu").req("1", "1Gi"))), vec![0, 0, 100]);
}

#[test]
fn node_resources_fit_scores_a_served_resource_by_the_class_devices() {
    use crate::framework::ScorePlugin;
    let args: NodeResourcesFitArgs = serde_json::from_value(json!({"scoringStrategy": {"type": "LeastAllocated",
        "resources": [{"name": "example.com/gpu", "weight": 1}]}}))
    .expect("args");
    let fit = NodeResourcesFit::new(&args).expect("fit");
    let snap = cluster(
        &[("a", &[]), ("b", &[])],
        vec![gpu_class()],
        vec![slice_of("a", 4), slice_of("b", 4)],
        vec![holding("a", 1)],
    );
    let p = asking(&[("example.com/gpu", "1")]);
    let state = fit.pre_score(&p, &snap, &[]).expect("pre-score");
    let scores: Vec<i64> = snap.nodes.iter().map(|n| fit.score(&state, &p, n, &snap)).collect();
    // a: 2 of 4 in use with the pod, b: 1 of 4.
    assert_eq!(scores, vec![50, 75]);
}

#[test]
fn explain_says_per_request_why_a_node_has_no_devices() {
    let plugin = DynamicResources::default();
    let tainted = {
        let mut s = slice_of("c", 1);
        s["spec"]["devices"][0]["taints"] = json!([{"key": "broken", "effect": "NoSchedule"}]);
        s
    };
    let snap = cluster(
        &[("a", &[]), ("b", &[]), ("c", &[])],
        vec![gpu_class()],
        vec![slice_of("a", 2), tainted],
        vec![holding("a", 2)],
    );
    let p = asking(&[("example.com/gpu", "1")]);
    let details: Vec<String> = crate::status::with_details(true, || {
        filter(&plugin, &p, &snap).into_iter().map(|s| s.detail.unwrap_or_default()).collect()
    });
    let line = |selected: usize, tainted: usize, held: usize| {
        format!(
            "the pod's extended resources request container-0-request-0: 1 wanted, {selected} of the node's devices \
             selected (class my-resource-class), {tainted} with a taint not tolerated, {held} held by other claims, 0 free"
        )
    };
    assert_eq!(details, vec![line(2, 0, 2), "the node reaches no devices".to_string(), line(1, 1, 0)]);
    // Without details (the scheduling loop) nothing is computed.
    assert!(filter(&plugin, &p, &snap).iter().all(|s| s.detail.is_none()));
}
