use std::collections::HashMap;
use std::time::Instant;

use algorithms::builders::{NodeBuilder, PodBuilder, snapshot};
use algorithms::config::default_profile;
use serde_json::json;

use super::*;

const GPU: &str = "nvidia.com/gpu";

/// A Workload of one pod set of `count` pods with `gpus` GPUs each, owned by Job `job`,
/// admitted on the flavor `gpu`.
fn workload(job: &str, count: u64, gpus: &str) -> Value {
    json!({
        "metadata": {"name": format!("job-{job}"), "namespace": "team",
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": "u", "controller": true}]},
        "spec": {"podSets": [{"name": "main", "count": count, "template": {"spec": {
            "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1", GPU: gpus}, "limits": {GPU: gpus}}}]}}}]},
        "status": {"admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": count,
            "flavors": {"cpu": "gpu", GPU: "gpu"}}]}},
    })
}

fn flavors() -> HashMap<String, Flavor> {
    let flavor = Flavor { node_labels: [("pool".to_string(), "gpu".to_string())].into(), tolerations: Vec::new() };
    [("gpu".to_string(), flavor)].into()
}

/// Two GPU nodes of four GPUs in the `gpu` pool, and a larger node outside it.
fn cluster() -> Snapshot {
    let gpu =
        |n: &str| NodeBuilder::new(n).capacity("16", "64Gi", "110").resource(GPU, "4").label("pool", "gpu").build();
    let other = NodeBuilder::new("other").capacity("16", "64Gi", "110").resource(GPU, "8").build();
    snapshot(&[gpu("g0"), gpu("g1"), other], &[])
}

#[test]
fn a_workloads_pods_carry_its_templates_and_its_flavors_node_labels() {
    let pods = workload_pods(&workload("a", 3, "1"), &flavors()).unwrap();
    assert_eq!(pods.len(), 3);
    assert_eq!(pods[2].name, "job-a-main-2");
    assert_eq!(pods[0].namespace, "team");
    assert_eq!(pods[0].node_selector.get("pool").map(String::as_str), Some("gpu"));
    assert_eq!(pods[0].controller, Some(("Job".to_string(), "a".to_string())));
    let err = workload_pods(&workload("a", 1, "1"), &HashMap::new()).unwrap_err();
    assert!(err.contains("ResourceFlavor \"gpu\""), "{err}");
}

#[test]
fn a_group_fits_whole_on_its_flavor_or_says_which_pod_does_not() {
    let profile = default_profile("custom-scheduler");
    let mut snap = cluster();
    let pods = workload_pods(&workload("a", 2, "3"), &flavors()).unwrap();
    let nodes = place_group(&profile, &mut snap, &pods).unwrap();
    let names: Vec<&str> = nodes.iter().map(|&i| snap.nodes[i].name.as_str()).collect();
    assert_eq!(names.len(), 2);
    assert!(names.contains(&"g0") && names.contains(&"g1"), "{names:?}");
    // Eight GPUs on one node exist only outside the flavor.
    let mut snap = cluster();
    let big = workload_pods(&workload("b", 1, "8"), &flavors()).unwrap();
    let err = place_group(&profile, &mut snap, &big).unwrap_err();
    assert!(err.starts_with("pod 1 of 1: 0/3 nodes are available:"), "{err}");
    assert!(err.contains("Insufficient nvidia.com/gpu"), "{err}");
}

#[test]
fn promised_room_is_not_given_twice_and_is_freed_when_the_pods_come() {
    let profile = default_profile("custom-scheduler");
    let now = Instant::now();
    let mut promises = Promises::default();
    let first = workload_pods(&workload("a", 2, "3"), &flavors()).unwrap();
    let mut snap = cluster();
    let nodes = place_group(&profile, &mut snap, &first).unwrap();
    let promised: Vec<(PodInfo, String)> =
        first.iter().cloned().zip(nodes.iter().map(|&i| snap.nodes[i].name.clone())).collect();
    promises.promise("team/job-a", promised, now);

    // A second Workload of 2 x 2 GPUs: one GPU is left on each node once the first's
    // promise is counted.
    let second = workload_pods(&workload("c", 2, "2"), &flavors()).unwrap();
    let mut snap = cluster();
    promises.apply(&profile, &mut snap, now, "team/job-c");
    assert!(place_group(&profile, &mut snap, &second).is_err());
    // Its own promise does not count against itself.
    let mut snap = cluster();
    promises.apply(&profile, &mut snap, now, "team/job-a");
    assert!(place_group(&profile, &mut snap, &first).is_ok());

    // The first's pods are placed: the promise is redeemed, not counted twice.
    let placed: Vec<_> = ["g0", "g1"]
        .iter()
        .enumerate()
        .map(|(k, node)| {
            let mut pod = PodBuilder::new(&format!("a-{k}"))
                .namespace("team")
                .req("1", "1Gi")
                .device(GPU, "3")
                .node_name(node)
                .build();
            pod.metadata.owner_references = serde_json::from_value(
                json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "a", "uid": "u", "controller": true}]),
            )
            .unwrap();
            pod
        })
        .collect();
    let gpu =
        |n: &str| NodeBuilder::new(n).capacity("16", "64Gi", "110").resource(GPU, "4").label("pool", "gpu").build();
    let mut snap = snapshot(&[gpu("g0"), gpu("g1")], &placed);
    promises.apply(&profile, &mut snap, now, "team/job-c");
    assert!(promises.is_empty());
    // A lapsed promise goes too.
    promises.promise("team/job-a", Vec::new(), now);
    promises.apply(&profile, &mut cluster(), now + PROMISE_TIMEOUT, "");
    assert_eq!(promises.len(), 0);
}

/// Two nodes with four devices each from a DRA driver, and a claim template for one.
const DRA_CLUSTER: &str = r#"
- {apiVersion: v1, kind: Node, metadata: {name: g0, labels: {pool: gpu}},
   status: {allocatable: {cpu: "16", memory: 64Gi, pods: "110"}}}
- {apiVersion: v1, kind: Node, metadata: {name: g1, labels: {pool: gpu}},
   status: {allocatable: {cpu: "16", memory: 64Gi, pods: "110"}}}
- apiVersion: resource.k8s.io/v1
  kind: DeviceClass
  metadata: {name: gpu}
  spec: {selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]}
- apiVersion: resource.k8s.io/v1
  kind: ResourceClaimTemplate
  metadata: {name: one-gpu, namespace: team}
  spec: {spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu}}]}}}
- apiVersion: resource.k8s.io/v1
  kind: ResourceSlice
  metadata: {name: g0-gpus}
  spec: {driver: gpu.example.com, nodeName: g0, pool: {name: g0, generation: 1, resourceSliceCount: 1},
         devices: [{name: gpu-0}, {name: gpu-1}, {name: gpu-2}, {name: gpu-3}]}
- apiVersion: resource.k8s.io/v1
  kind: ResourceSlice
  metadata: {name: g1-gpus}
  spec: {driver: gpu.example.com, nodeName: g1, pool: {name: g1, generation: 1, resourceSliceCount: 1},
         devices: [{name: gpu-0}, {name: gpu-1}, {name: gpu-2}, {name: gpu-3}]}
"#;

/// A Workload of `count` pods, each with a claim for one device from the template.
fn dra_workload(job: &str, count: u64) -> Value {
    json!({
        "metadata": {"name": format!("job-{job}"), "namespace": "team"},
        "spec": {"podSets": [{"name": "main", "count": count, "template": {"spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
            "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}, "claims": [{"name": "gpu"}]}}]}}}]},
        "status": {"admission": {"podSetAssignments": [{"name": "main", "count": count, "flavors": {"cpu": "gpu"}}]}},
    })
}

fn dra_cluster() -> Snapshot {
    let values = crate::cluster::parse_documents(DRA_CLUSTER, "dra.yaml").unwrap();
    let objects = crate::cluster::objects_from_values(values, "dra.yaml").unwrap();
    crate::cluster::parse_cluster(&objects, "dra.yaml").unwrap().snapshot()
}

/// Claims made from templates take devices one pod after another: eight pods of one
/// device each fit the two nodes, a ninth does not; and devices promised to one Workload
/// are not given to the next.
#[test]
fn devices_from_claim_templates_are_counted_pod_by_pod_and_across_promises() {
    let profile = default_profile("custom-scheduler");
    let eight = workload_pods(&dra_workload("a", 8), &flavors()).unwrap();
    let mut snap = dra_cluster();
    let nodes = place_group(&profile, &mut snap, &eight).unwrap();
    assert_eq!(nodes.iter().filter(|&&i| snap.nodes[i].name == "g0").count(), 4);
    let nine = workload_pods(&dra_workload("b", 9), &flavors()).unwrap();
    let err = place_group(&profile, &mut dra_cluster(), &nine).unwrap_err();
    assert!(err.starts_with("pod 9 of 9: 0/2 nodes are available"), "{err}");
    assert!(err.contains("cannot allocate all claims"), "{err}");

    let mut promises = Promises::default();
    let promised = eight.iter().cloned().zip(nodes.iter().map(|&i| snap.nodes[i].name.clone())).collect();
    promises.promise("team/job-a", promised, Instant::now());
    let one = workload_pods(&dra_workload("c", 1), &flavors()).unwrap();
    let mut snap = dra_cluster();
    promises.apply(&profile, &mut snap, Instant::now(), "team/job-c");
    let err = place_group(&profile, &mut snap, &one).unwrap_err();
    assert!(err.contains("cannot allocate all claims"), "{err}");
}

/// Kueue's partial admission runs the pods it assigned, not all the pod set asks for.
#[test]
fn a_partially_admitted_pod_set_has_the_assigned_count() {
    let mut wl = workload("a", 4, "1");
    wl["status"]["admission"]["podSetAssignments"][0]["count"] = json!(2);
    assert_eq!(workload_pods(&wl, &flavors()).unwrap().len(), 2);
}

/// A promise whose pods came in part holds room only for the rest.
#[test]
fn a_promise_partly_kept_holds_only_the_rest() {
    let profile = default_profile("custom-scheduler");
    let now = Instant::now();
    let first = workload_pods(&workload("a", 2, "3"), &flavors()).unwrap();
    let mut promises = Promises::default();
    promises.promise("team/job-a", vec![(first[0].clone(), "g0".into()), (first[1].clone(), "g1".into())], now);
    // One of the two pods is placed on g0: g0 holds it, g1 the rest of the promise.
    let mut pod = PodBuilder::new("a-0").namespace("team").req("1", "1Gi").device(GPU, "3").node_name("g0").build();
    pod.metadata.owner_references = serde_json::from_value(
        json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "a", "uid": "u", "controller": true}]),
    )
    .unwrap();
    let gpu =
        |n: &str| NodeBuilder::new(n).capacity("16", "64Gi", "110").resource(GPU, "4").label("pool", "gpu").build();
    let mut snap = snapshot(&[gpu("g0"), gpu("g1")], &[pod]);
    promises.apply(&profile, &mut snap, now, "");
    let on = |name: &str| snap.nodes[snap.index[name]].pods.len();
    assert_eq!((on("g0"), on("g1")), (1, 1));
    assert_eq!(promises.len(), 1);
}

/// A group that must share one rack goes whole to the first rack that holds it.
#[test]
fn a_group_that_must_share_a_domain_goes_whole_to_one_that_holds_it() {
    let profile = default_profile("custom-scheduler");
    let node = |n: &str, rack: &str| {
        NodeBuilder::new(n)
            .capacity("4", "16Gi", "110")
            .resource(GPU, "4")
            .label("pool", "gpu")
            .label("rack", rack)
            .build()
    };
    let nodes = [node("r1-0", "r1"), node("r1-1", "r1"), node("r2-0", "r2"), node("r2-1", "r2")];
    // r1-0 has one GPU left: r1 cannot hold four pods of two GPUs.
    let busy = PodBuilder::new("busy").namespace("team").device(GPU, "3").node_name("r1-0").build();
    let mut wl = workload("a", 4, "2");
    wl["spec"]["podSets"][0]["template"]["metadata"] = json!({"annotations": {TOPOLOGY_ANNOTATION: "rack"}});
    assert_eq!(required_topology(&wl).as_deref(), Some("rack"));
    let pods = workload_pods(&wl, &flavors()).unwrap();
    let mut snap = snapshot(&nodes, std::slice::from_ref(&busy));
    let (placed, rack) = place_in_one_domain(&profile, &mut snap, &pods, "rack").unwrap();
    assert_eq!(rack, "r2");
    assert!(placed.iter().all(|&i| snap.nodes[i].name.starts_with("r2")), "{placed:?}");
    // Eight GPUs per pod fit no rack: each rack's reason is given.
    let big = workload_pods(&workload("b", 2, "5"), &flavors()).unwrap();
    let err = place_in_one_domain(&profile, &mut snapshot(&nodes, &[busy]), &big, "rack").unwrap_err();
    assert!(err.starts_with("no rack domain holds all 2 pods: rack=r1: pod 1 of 2:"), "{err}");
    assert!(err.contains("; rack=r2: pod 1 of 2:"), "{err}");
}
