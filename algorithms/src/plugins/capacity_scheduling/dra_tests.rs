//! Quotas inside the DRA allocator's search: a claim's `firstAvailable` request takes
//! the alternative its quota leaves room for, in Filter and in Reserve alike. Node
//! `node-a` has eight GPUs of class `gpu.example.com` (serving `nvidia.com/gpu`); the
//! pod's claim asks for four GPUs, else two.

use std::sync::Arc;

use rand::SeedableRng;
use serde_json::json;

use super::*;
use crate::builders::{NodeBuilder, PodBuilder};
use crate::dra::charge::devices_key;
use crate::dra::{self, DraObjects};
use crate::framework::{EvaluateOptions, Profile, evaluate};
use crate::objects::ClusterObjects;
use crate::plugins::dynamic_resources::DynamicResources;
use crate::quotas::{Quota, QuotaObjects};

const GPU: &str = "nvidia.com/gpu";
const CLASS: &str = "gpu.example.com";

fn profile() -> Profile {
    let dra: Arc<DynamicResources> = Arc::new(DynamicResources::default());
    Profile { filters: vec![dra.clone(), Arc::new(CapacityScheduling)], reserves: vec![dra], ..Default::default() }
}

/// The cluster, with quota `ns1` limiting `name` to `max` (no quota when `None`).
fn cluster(max: Option<(String, i64)>) -> (Snapshot, PodInfo) {
    let node = NodeBuilder::new("node-a").capacity("8", "8Gi", "32").build();
    let mut snap = crate::builders::snapshot(&[node], &[]);
    let mut objects = ClusterObjects::default();
    let class = json!({"metadata": {"name": CLASS}, "spec": {"extendedResourceName": GPU,
        "selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}]}});
    let devices: Vec<_> = (0..8).map(|i| json!({"name": format!("gpu-{i}")})).collect();
    let slice = json!({"metadata": {"name": "node-a-gpus"}, "spec": {"driver": CLASS, "nodeName": "node-a",
        "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1}, "devices": devices}});
    let claim = json!({"metadata": {"name": "train", "namespace": "ns1", "uid": "c1", "resourceVersion": "1"},
        "spec": {"devices": {"requests": [{"name": "gpus", "firstAvailable": [
            {"name": "four", "deviceClassName": CLASS, "count": 4},
            {"name": "two", "deviceClassName": CLASS, "count": 2}]}]}}});
    let dra = objects.dra_mut();
    dra.upsert_class(dra::DeviceClass::from_api(&serde_json::from_value(class).unwrap()).unwrap());
    dra.upsert_slice(dra::Slice::from_api(&serde_json::from_value(slice).unwrap()).unwrap());
    dra.upsert_claim(dra::Claim::from_api(&serde_json::from_value(claim).unwrap()).unwrap());
    if let Some((name, max)) = max {
        let mut limit =
            Resource { milli_cpu: i64::MAX, memory: i64::MAX, ephemeral_storage: i64::MAX, ..Default::default() };
        limit.set_value(&name, max);
        let mut min = Resource::default();
        min.set_value(GPU, 8);
        let q = Quota { name: "ns1".into(), namespace: "ns1".into(), min, max: limit, tree: Default::default() };
        objects.quotas_mut().upsert(q).unwrap();
    }
    snap.objects = Arc::new(objects);
    let pod = PodBuilder::new("p").namespace("ns1").resource_claim("gpus", "train").info();
    (snap, pod)
}

/// The sub-request Filter then Reserve chose, or the first node's rejection.
fn chosen(max: Option<(String, i64)>) -> Result<String, String> {
    let (snap, pod) = cluster(max);
    let profile = profile();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
    let ev = evaluate(&profile, &pod, &snap, &mut rng, EvaluateOptions::default());
    if ev.selected.is_none() {
        return Err(ev.rejected.iter().next().map(|(_, s)| s.message()).unwrap_or_default());
    }
    let mut objects = (*snap.objects).clone();
    let reserved = profile.reserves[0]
        .reserve_within(&mut objects, &pod, &snap.nodes[0], ev.limits.as_ref())
        .map_err(|s| s.message())?;
    assert!(reserved.is_some());
    let claim = objects.dra().claim("ns1/train").cloned().unwrap();
    let results = claim.allocation().unwrap().devices.as_ref().unwrap().results.clone().unwrap_or_default();
    let mut names: Vec<&str> = results.iter().map(|r| r.request.as_str()).collect();
    names.dedup();
    Ok(format!("{} x{}", names.join(","), results.len()))
}

#[test]
fn a_claim_takes_the_alternative_its_quota_leaves_room_for() {
    let gpus = |n: i64| Some((GPU.to_string(), n));
    let cases = [
        ("no quota: the first alternative", None, Ok("gpus/four x4")),
        ("room for four GPUs", gpus(4), Ok("gpus/four x4")),
        ("room for three: the smaller alternative", gpus(3), Ok("gpus/two x2")),
        ("the class's own key limits alike", Some((devices_key(CLASS), 2)), Ok("gpus/two x2")),
        (
            "room for one: neither fits",
            gpus(1),
            Err("cannot allocate all claims within what ElasticQuota ns1/ns1 leaves"),
        ),
    ];
    for (name, max, want) in cases {
        assert_eq!(chosen(max).as_deref().map_err(String::as_str), want, "{name}");
    }
}

#[test]
fn the_aggregate_min_limits_devices_too() {
    // A quota whose max allows everything, but every quota's min together guarantees 3.
    let (mut snap, pod) = cluster(Some((GPU.to_string(), 8)));
    let mut objects = (*snap.objects).clone();
    let mut q = objects.quotas().quota("ns1").cloned().unwrap();
    q.min.set_value(GPU, 3);
    objects.quotas_mut().upsert(q).unwrap();
    snap.objects = Arc::new(objects);
    let state = snap.objects.quotas();
    let limits = device_limits(state, &pod, &asked(state, &pod, &snap)).expect("limits");
    assert_eq!(limits.of(GPU), Some(3));
    assert_eq!(limits.of(&devices_key(CLASS)), None, "no quota names the class's devices");
    assert_eq!(limits.of("example.com/other"), Some(0), "an extended resource no min names is 0, as upstream");
}
