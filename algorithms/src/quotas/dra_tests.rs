//! Devices allocated through DRA, charged to quotas as the allocator chose them.

use serde_json::{Value, json};

use super::*;
use crate::builders::PodBuilder;
use crate::dra::charge::{allocated_charge, devices_key};
use crate::dra::{Claim, DeviceClass};

const GPU: &str = "nvidia.com/gpu";

fn state_with_classes() -> DraState {
    let mut dra = DraState::default();
    for (name, extended) in [("gpu.example.com", Some(GPU)), ("nic.example.com", None)] {
        let mut spec = json!({});
        if let Some(resource) = extended {
            spec["extendedResourceName"] = json!(resource);
        }
        let class = json!({"metadata": {"name": name}, "spec": spec});
        dra.upsert_class(DeviceClass::from_api(&serde_json::from_value(class).unwrap()).unwrap());
    }
    dra
}

/// A claim in `ns1` with `requests`, allocated `results` (request, device, admin access)
/// unless `results` is empty.
fn claim(name: &str, requests: Value, results: &[(&str, &str, bool)]) -> Claim {
    let mut c = json!({"metadata": {"name": name, "namespace": "ns1", "resourceVersion": "1"},
        "spec": {"devices": {"requests": requests}}});
    if !results.is_empty() {
        let results: Vec<Value> = results
            .iter()
            .map(|(r, d, admin)| {
                let mut v = json!({"request": r, "driver": "gpu.example.com", "pool": "node-a", "device": d});
                if *admin {
                    v["adminAccess"] = json!(true);
                }
                v
            })
            .collect();
        c["status"] = json!({"allocation": {"devices": {"results": results}}});
    }
    Claim::from_api(&serde_json::from_value(c).unwrap()).unwrap()
}

fn exactly(name: &str, class: &str, count: i64) -> Value {
    json!({"name": name, "exactly": {"deviceClassName": class, "count": count}})
}

fn gpus(n: i64) -> Resource {
    let mut r = Resource::default();
    r.set_value(&devices_key("gpu.example.com"), n);
    r.set_value(GPU, n);
    r
}

#[test]
fn an_allocated_claim_counts_the_devices_the_allocator_chose() {
    let dra = state_with_classes();
    let first_available = json!([{"name": "req", "firstAvailable": [
        {"name": "eight", "deviceClassName": "gpu.example.com", "count": 8},
        {"name": "two", "deviceClassName": "gpu.example.com", "count": 2}]}]);
    let nic = devices_key("nic.example.com");
    let cases: Vec<(&str, Claim, Option<Resource>)> = vec![
        ("not allocated: nothing yet", claim("c", json!([exactly("req", "gpu.example.com", 2)]), &[]), None),
        (
            "exactly two: two of the class and two of the resource it serves",
            claim("c", json!([exactly("req", "gpu.example.com", 2)]), &[("req", "g0", false), ("req", "g1", false)]),
            Some(gpus(2)),
        ),
        (
            "firstAvailable: the alternative taken, not the largest",
            claim("c", first_available, &[("req/two", "g0", false), ("req/two", "g1", false)]),
            Some(gpus(2)),
        ),
        (
            "All: the devices it got",
            claim(
                "c",
                json!([{"name": "req", "exactly": {"deviceClassName": "gpu.example.com", "allocationMode": "All"}}]),
                &[("req", "g0", false), ("req", "g1", false), ("req", "g2", false)],
            ),
            Some(gpus(3)),
        ),
        (
            "admin access consumes nothing",
            claim("c", json!([exactly("req", "gpu.example.com", 1)]), &[("req", "g0", true)]),
            Some(Resource::default()),
        ),
        (
            "a class serving no extended resource counts under its own key only",
            claim("c", json!([exactly("req", "nic.example.com", 1)]), &[("req", "n0", false)]),
            Some(Resource { scalar: vec![(nic.clone(), 1)], ..Default::default() }),
        ),
    ];
    for (name, c, want) in cases {
        assert_eq!(allocated_charge(&dra, &c), want, "{name}");
    }
    // A pod's extended resource claim: its containers' requests count the GPUs already.
    let mut special = json!({"metadata": {"name": "p-extended-resources-x", "namespace": "ns1",
        "annotations": {crate::dra::extended::ANNOTATION: "true"},
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u1", "controller": true}]},
        "spec": {"devices": {"requests": [exactly("container-0-request-0", "gpu.example.com", 1)]}}});
    special["status"] = json!({"allocation": {"devices": {"results": [
        {"request": "container-0-request-0", "driver": "gpu.example.com", "pool": "node-a", "device": "g0"}]}}});
    let special = Claim::from_api(&serde_json::from_value(special).unwrap()).unwrap();
    let class_only = Resource { scalar: vec![(devices_key("gpu.example.com"), 1)], ..Default::default() };
    assert_eq!(allocated_charge(&dra, &special), Some(class_only));
}

fn quota_state(max_gpus: i64) -> QuotaState {
    let mut st = QuotaState::default();
    let mut max = Resource { milli_cpu: i64::MAX, memory: i64::MAX, ephemeral_storage: i64::MAX, ..Default::default() };
    max.set_value(GPU, max_gpus);
    let q =
        Quota { name: "q".into(), namespace: "ns1".into(), min: Resource::default(), max, tree: Default::default() };
    st.upsert(q).unwrap();
    st.recount(&mut std::iter::empty(), &DraState::default());
    st
}

#[test]
fn a_claim_shared_by_pods_counts_once_and_goes_with_the_last_of_them() {
    let mut dra = state_with_classes();
    let shared =
        claim("shared", json!([exactly("req", "gpu.example.com", 2)]), &[("req", "g0", false), ("req", "g1", false)]);
    dra.upsert_claim(shared);
    let mut st = quota_state(8);
    let a = PodBuilder::new("a").namespace("ns1").resource_claim("gpu", "shared").info();
    let b = PodBuilder::new("b").namespace("ns1").resource_claim("gpu", "shared").info();
    st.charge_pod(&a, &dra);
    st.charge_pod(&b, &dra);
    assert_eq!(st.used("ns1"), &gpus(2), "two pods, one claim of two GPUs");
    st.discharge_pod(&a);
    assert_eq!(st.used("ns1"), &gpus(2), "b still uses it");
    st.discharge_pod(&b);
    assert!(st.used("ns1").is_zero(), "{:?}", st.used("ns1"));
}

#[test]
fn a_claim_allocated_after_its_pod_was_placed_is_counted_at_the_next_count() {
    let mut dra = state_with_classes();
    dra.upsert_claim(claim("later", json!([exactly("req", "gpu.example.com", 1)]), &[]));
    let mut st = quota_state(8);
    let pod = PodBuilder::new("a").namespace("ns1").resource_claim("gpu", "later").info();
    st.charge_pod(&pod, &dra);
    assert!(st.used("ns1").is_zero(), "not allocated yet");
    st.recount(&mut std::iter::empty(), &dra);
    assert!(!st.needs_recount(dra.generation()), "nothing changed since it was looked at");
    let mut allocated = claim("later", json!([exactly("req", "gpu.example.com", 1)]), &[("req", "g0", false)]);
    allocated.resource_version = "2".into();
    dra.upsert_claim(allocated);
    assert!(st.needs_recount(dra.generation()), "the claims changed: the unsettled one is looked at again");
    st.recount(&mut std::iter::empty(), &dra);
    assert_eq!(st.used("ns1"), &gpus(1));
    assert!(!st.needs_recount(dra.generation()));
    st.discharge_pod(&pod);
    assert!(st.used("ns1").is_zero(), "{:?}", st.used("ns1"));
}

#[test]
fn a_quota_that_comes_after_pods_with_claims_counts_their_devices() {
    let mut dra = state_with_classes();
    dra.upsert_claim(claim(
        "c",
        json!([exactly("req", "gpu.example.com", 2)]),
        &[("req", "g0", false), ("req", "g1", false)],
    ));
    let pod = PodBuilder::new("a").namespace("ns1").resource_claim("gpu", "c").req("1", "").info();
    let mut st = QuotaState::default();
    st.upsert(Quota {
        name: "q".into(),
        namespace: "ns1".into(),
        min: Resource::default(),
        max: Resource::default(),
        tree: Default::default(),
    })
    .unwrap();
    assert!(st.needs_recount(dra.generation()));
    st.recount(&mut [pod.clone()].iter(), &dra);
    let mut want = gpus(2);
    want.milli_cpu = 1000;
    assert_eq!(st.used("ns1"), &want);
    assert_eq!(st.used_by("q"), &want, "and its quota of a tree");
}

#[test]
fn a_device_class_key_limits_only_where_a_quota_names_it() {
    let key = devices_key("nic.example.com");
    let used = Resource { scalar: vec![(key.clone(), 3)], ..Default::default() };
    let mut named = Resource::default();
    named.set_value(&key, 2);
    let q = |min: Resource| Quota {
        name: "q".into(),
        namespace: "ns1".into(),
        min,
        max: Resource::default(),
        tree: Default::default(),
    };
    assert!(!q(Resource::default()).over_min(&used), "no quota names it: not guaranteed, not borrowed either");
    assert!(q(named).over_min(&used), "3 devices over a min of 2");
    let gpus_used = Resource { scalar: vec![(GPU.to_string(), 1)], ..Default::default() };
    assert!(q(Resource::default()).over_min(&gpus_used), "an extended resource min does not name is 0, as upstream");
}
