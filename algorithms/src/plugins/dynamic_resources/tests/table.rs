//! More of kube-scheduler's DynamicResources plugin cases: claims referenced by name,
//! finalizers already there, claims in flight, admin allocations that hold nothing, CEL
//! errors on one node of several, prioritized lists (unknown classes, the written
//! sub-request name, scores over several claims and requests), taints at the plugin's
//! level, allocation timestamps, and claims whose binding conditions succeeded, failed or
//! timed out.

use serde_json::{Value, json};

use super::*;
use crate::framework::Progress;

/// A slice on `node` with `n` devices `instance-1`, `instance-2`, … of `driver`.
fn devices_on(node: &str, driver: &str, n: usize) -> Value {
    let devices: Vec<Value> = (1..=n).map(|i| json!({"name": format!("instance-{i}")})).collect();
    json!({"metadata": {"name": format!("{node}-{driver}")}, "spec": {"driver": driver, "nodeName": node,
        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}})
}

fn named(mut claim: Value, name: &str) -> Value {
    claim["metadata"]["name"] = json!(name);
    claim
}

/// The pod with its claims referenced by name (`my-resource` → `my-pod-my-resource`, …).
fn pod_naming(claims: &[(&str, &str)]) -> PodInfo {
    let mut b = PodBuilder::new("my-pod");
    for (name, claim) in claims {
        b = b.resource_claim(name, claim);
    }
    pod_info(b)
}

/// Reserve on the first node, then PreBind there: the claim writes.
fn reserve_and_write(plugin: &DynamicResources, p: &PodInfo, snap: &Snapshot) -> Vec<DraWrite> {
    let mut objects = (*snap.objects).clone();
    let reserved = plugin.reserve(&mut objects, p, &snap.nodes[0]).expect("reserve").expect("reserved");
    dra_writes(&plugin.pre_bind(&reserved, &snap.nodes[0].name))
}

fn results_of(w: &crate::dra::ClaimWrite) -> Vec<k8s_openapi::api::resource::v1::DeviceRequestAllocationResult> {
    let status = w.claim.api.status.clone().unwrap_or_default();
    status.allocation.and_then(|a| a.devices).and_then(|d| d.results).unwrap_or_default()
}

#[test]
fn claim_reference_reserves_an_allocated_claim_and_leaves_others_alone() {
    let plugin = DynamicResources::default();
    let snap = build(World {
        claims: vec![
            allocated(pending(req()), on_worker()),
            named(
                json!({"metadata": {"namespace": "default"},
            "spec": {"devices": {"requests": [req()]}}}),
                "not-my-claim",
            ),
        ],
        ..Default::default()
    });
    let p = pod_naming(&[("my-resource", CLAIM)]);
    assert_eq!(messages(&filter(&plugin, &p, &snap)), vec!["ok"]);
    let writes = reserve_and_write(&plugin, &p, &snap);
    let [DraWrite::Claim(w)] = writes.as_slice() else { panic!("{writes:?}") };
    assert_eq!(w.claim.name, CLAIM);
    assert!(!w.allocated && !w.add_finalizer);
    let consumers: Vec<_> =
        w.claim.reserved_for.iter().map(|c| (c.resource.clone(), c.name.clone(), c.uid.clone())).collect();
    assert_eq!(consumers, [("pods".to_string(), "my-pod".to_string(), "1234".to_string())]);
}

#[test]
fn with_resources_has_finalizer_adds_it_no_second_time() {
    let plugin = DynamicResources::default();
    let mut claim = pending(req());
    claim["metadata"]["finalizers"] = json!([dra::FINALIZER]);
    let snap =
        build(World { slices: vec![worker_slice("worker", json!({}))], claims: vec![claim], ..Default::default() });
    let writes = reserve_and_write(&plugin, &pod_info(pod()), &snap);
    let [DraWrite::Claim(w)] = writes.as_slice() else { panic!("{writes:?}") };
    assert!(w.allocated && !w.add_finalizer);
    assert_eq!(w.claim.api.metadata.finalizers, Some(vec![dra::FINALIZER.to_string()]));
}

#[test]
fn a_claim_in_flight_on_another_device_leaves_this_one_free() {
    let plugin = DynamicResources::default();
    let mut snap = build(World {
        slices: vec![worker_slice("worker", json!({}))],
        claims: vec![pending(req()), named(pending(req()), "not-my-claim")],
        ..Default::default()
    });
    // Not written yet: allocated in the scheduler's memory only, to a device of no slice.
    let mut other = named(pending(req()), "not-my-claim");
    other["status"] = json!({"allocation": {"devices": {"results": [
        {"request": "req-1", "driver": "some-driver", "pool": "worker", "device": "instance-1-other"}]}}});
    let other = dra::Claim::from_api(&serde_json::from_value(other).expect("claim")).expect("parse");
    Arc::make_mut(&mut snap.objects).dra_mut().assume(Arc::new(other));
    let p = pod_info(pod());
    assert_eq!(messages(&filter(&plugin, &p, &snap)), vec!["ok"]);
    let writes = reserve_and_write(&plugin, &p, &snap);
    let [DraWrite::Claim(w)] = writes.as_slice() else { panic!("{writes:?}") };
    assert_eq!(results_of(w)[0].device, "instance-1");
    assert!(snap.objects.dra().is_assumed("default/not-my-claim"));
}

#[test]
fn an_admin_access_allocation_holds_no_device() {
    let plugin = DynamicResources::default();
    let mut admin = named(allocated(pending(req()), on_worker()), "not-my-claim");
    admin["spec"]["devices"]["requests"][0]["exactly"]["adminAccess"] = json!(true);
    admin["status"]["allocation"]["devices"]["results"][0]["adminAccess"] = json!(true);
    let snap = build(World {
        slices: vec![worker_slice("worker", json!({}))],
        claims: vec![pending(req()), admin],
        ..Default::default()
    });
    let writes = reserve_and_write(&plugin, &pod_info(pod()), &snap);
    let [DraWrite::Claim(w)] = writes.as_slice() else { panic!("{writes:?}") };
    let r = &results_of(w)[0];
    assert_eq!((r.device.as_str(), r.admin_access), ("instance-1", None));
}

#[test]
fn admin_access_is_written_into_the_result() {
    let plugin = DynamicResources::default();
    let admin = json!({"name": "req-1", "exactly": {"deviceClassName": "my-resource-class", "adminAccess": true}});
    let snap = build(World {
        slices: vec![worker_slice("worker", json!({}))],
        claims: vec![pending(admin)],
        ..Default::default()
    });
    let writes = reserve_and_write(&plugin, &pod_info(pod()), &snap);
    let [DraWrite::Claim(w)] = writes.as_slice() else { panic!("{writes:?}") };
    assert_eq!(results_of(w)[0].admin_access, Some(true));
}

#[test]
fn a_cel_runtime_error_on_one_node_is_an_error_there_only() {
    let plugin = DynamicResources::default();
    let healthy = json!({"name": "req-1", "exactly": {"deviceClassName": "my-resource-class",
        "selectors": [{"cel": {"expression": "device.attributes[\"some-driver\"].healthy"}}]}});
    for nodes in [vec!["worker", "worker-2"], vec!["worker", "worker-2", "worker-3"]] {
        let mut slices = vec![worker_slice("worker", json!({}))];
        slices.extend(nodes[1..].iter().map(|n| worker_slice(n, json!({"healthy": {"bool": true}}))));
        let snap =
            build(World { slices, claims: vec![pending(healthy.clone())], nodes: nodes.clone(), ..Default::default() });
        let st = filter(&plugin, &pod_info(pod()), &snap);
        assert_eq!(st[0].code, Code::Error, "{nodes:?}");
        assert_eq!(
            st[0].message(),
            format!("claim default/{CLAIM}: selector #0: CEL runtime error: no such key: healthy")
        );
        assert!(st[1..].iter().all(Status::is_success), "{nodes:?}: {:?}", messages(&st));
    }
}

#[test]
fn prioritized_lists_in_prefilter_and_in_the_written_result() {
    let plugin = DynamicResources::default();
    let listed =
        |class: &str| json!({"name": "req-1", "firstAvailable": [{"name": "subreq-1", "deviceClassName": class}]});
    let mut snap =
        build(World { classes: Vec::new(), claims: vec![pending(listed("does-not-exist"))], ..Default::default() });
    let p = pod_info(pod());
    let pre = plugin.pre_filter(&p, &snap);
    assert_eq!(pre.status.code, Code::UnschedulableAndUnresolvable);
    assert_eq!(pre.status.message(), "request req-1/subreq-1: device class does-not-exist does not exist");
    let mut rejection = pre.status.clone();
    rejection.plugin = NAME;
    assert_eq!(post_filter(&plugin, &p, &mut snap, Some(rejection)), NO_CLAIMS);

    let unknown = json!({"name": "req-1", "exactly": {"deviceClassName": "does-not-exist"}});
    let snap = build(World { claims: vec![pending(unknown)], ..Default::default() });
    assert_eq!(
        plugin.pre_filter(&p, &snap).status.message(),
        "request req-1: device class does-not-exist does not exist"
    );

    let snap = build(World {
        slices: vec![worker_slice("worker", json!({}))],
        claims: vec![pending(listed("my-resource-class"))],
        ..Default::default()
    });
    let writes = reserve_and_write(&plugin, &p, &snap);
    let [DraWrite::Claim(w)] = writes.as_slice() else { panic!("{writes:?}") };
    assert!(w.allocated && w.add_finalizer);
    let r = &results_of(w)[0];
    assert_eq!((r.request.as_str(), r.driver.as_str(), r.pool.as_str()), ("req-1/subreq-1", "some-driver", "worker"));
}

/// Filter on each node, then the scores of the nodes that passed, raw and normalized.
fn scores(plugin: &DynamicResources, p: &PodInfo, snap: &Snapshot) -> (Vec<String>, Vec<i64>, Vec<i64>) {
    let st = filter(plugin, p, snap);
    let fit: Vec<usize> = st.iter().enumerate().filter(|(_, s)| s.is_success()).map(|(i, _)| i).collect();
    let state = plugin.pre_score(p, snap, &fit).expect("scored");
    let raw: Vec<i64> = fit.iter().map(|&i| plugin.score(&state, p, &snap.nodes[i], snap)).collect();
    let mut normalized = raw.clone();
    plugin.normalize(&state, &mut normalized);
    (messages(&st), raw, normalized)
}

#[test]
fn prioritized_lists_score_over_several_claims_and_requests() {
    let plugin = DynamicResources::default();
    let sub = |name: &str, count: u32| json!({"name": name, "deviceClassName": "my-resource-class", "count": count});
    let three_nodes = |sizes: [usize; 3]| {
        let nodes = vec!["worker", "worker-2", "worker-3"];
        let slices = nodes.iter().zip(sizes).map(|(n, k)| devices_on(n, "some-driver", k)).collect();
        (nodes, slices)
    };

    // Two claims: the second's choices 4, 3, 2 and 1 devices.
    let first = pending(json!({"name": "req-1", "firstAvailable": [sub("subreq-1", 1)]}));
    let second = named(
        pending(
            json!({"name": "req-1", "firstAvailable": [sub("subreq-1", 4), sub("subreq-2", 3), sub("subreq-3", 2), sub("subreq-4", 1)]}),
        ),
        "my-pod-my-resource-2",
    );
    let (nodes, slices) = three_nodes([4, 2, 1]);
    let snap = build(World { slices, claims: vec![first, second], nodes, ..Default::default() });
    let p = pod_naming(&[("my-resource", CLAIM), ("my-resource-2", "my-pod-my-resource-2")]);
    assert_eq!(
        scores(&plugin, &p, &snap),
        (vec!["ok".into(), "ok".into(), CANNOT_ALLOCATE.into()], vec![15, 13], vec![100, 86])
    );
    let writes = reserve_and_write(&plugin, &p, &snap);
    let got: Vec<(String, Vec<String>)> = writes
        .iter()
        .filter_map(|w| match w {
            DraWrite::Claim(w) => Some((w.claim.name.clone(), results_of(w).into_iter().map(|r| r.request).collect())),
            _ => None,
        })
        .collect();
    assert!(got.contains(&(CLAIM.to_string(), vec!["req-1/subreq-1".to_string()])), "{got:?}");
    assert!(got.contains(&("my-pod-my-resource-2".to_string(), vec!["req-1/subreq-2".to_string(); 3])), "{got:?}");

    // One claim, two requests of 2 or 1 devices each.
    let two = |name: &str| json!({"name": name, "firstAvailable": [sub("subreq-1", 2), sub("subreq-2", 1)]});
    let mut claim = pending(two("req-1"));
    claim["spec"]["devices"]["requests"] = json!([two("req-1"), two("req-2")]);
    let (nodes, slices) = three_nodes([4, 3, 2]);
    let snap = build(World { slices, claims: vec![claim], nodes, ..Default::default() });
    let p = pod_info(pod());
    assert_eq!(scores(&plugin, &p, &snap).1, vec![16, 15, 14]);
    assert_eq!(scores(&plugin, &p, &snap).2, vec![100, 93, 87]);
    let writes = reserve_and_write(&plugin, &p, &snap);
    let [DraWrite::Claim(w)] = writes.as_slice() else { panic!("{writes:?}") };
    let requests: Vec<String> = results_of(w).into_iter().map(|r| r.request).collect();
    assert_eq!(requests, ["req-1/subreq-1", "req-1/subreq-1", "req-2/subreq-1", "req-2/subreq-1"]);
}

#[test]
fn a_tainted_device_is_left_unless_the_gate_is_off() {
    let mut slice = worker_slice("worker", json!({}));
    slice["spec"]["devices"][0]["taints"] =
        json!([{"key": "taint-key", "value": "taint-value", "effect": "NoSchedule"}]);
    let world = || World { slices: vec![slice.clone()], claims: vec![pending(req())], ..Default::default() };
    let p = pod_info(pod());
    let plugin = DynamicResources::default();
    let mut snap = build(world());
    assert_eq!(messages(&filter(&plugin, &p, &snap)), vec![CANNOT_ALLOCATE]);
    assert_eq!(post_filter(&plugin, &p, &mut snap, None), STILL_NOT_SCHEDULABLE);
    let off = DynamicResources {
        features: dra::Features { device_taints: false, ..Default::default() },
        ..Default::default()
    };
    let snap = build(world());
    assert_eq!(messages(&filter(&off, &p, &snap)), vec!["ok"]);
    let writes = reserve_and_write(&off, &p, &snap);
    let [DraWrite::Claim(w)] = writes.as_slice() else { panic!("{writes:?}") };
    assert_eq!(results_of(w)[0].device, "instance-1");
}

#[test]
fn the_allocation_timestamp_is_written_with_binding_conditions_on_only() {
    let snap = build(World {
        slices: vec![worker_slice("worker", json!({}))],
        claims: vec![pending(req())],
        ..Default::default()
    });
    let stamp = |plugin: &DynamicResources| {
        let writes = reserve_and_write(plugin, &pod_info(pod()), &snap);
        let [DraWrite::Claim(w)] = writes.as_slice() else { panic!("{writes:?}") };
        w.claim.api.status.clone().and_then(|s| s.allocation).and_then(|a| a.allocation_timestamp)
    };
    assert!(stamp(&DynamicResources::default()).is_some());
    let off = DynamicResources {
        features: dra::Features { binding_conditions: false, ..Default::default() },
        ..Default::default()
    };
    assert!(stamp(&off).is_none());
}

/// An allocated claim whose device declares binding conditions, allocated `ago` seconds
/// back, with the device status conditions given (none: no device status).
fn conditioned(name: &str, driver: &str, request: &str, ago: i64, conditions: Option<Value>) -> Value {
    let mut c = named(pending(json!({"name": request, "exactly": {"deviceClassName": "my-resource-class"}})), name);
    c["metadata"]["finalizers"] = json!([dra::FINALIZER]);
    let at = super::super::binding::now().as_second() - ago;
    let at = k8s_openapi::jiff::Timestamp::from_second(at).expect("time").to_string();
    c["status"] = json!({"allocation": {"devices": {"results": [{"request": request, "driver": driver, "pool": "worker",
        "device": "instance-1", "bindingConditions": ["condition"], "bindingFailureConditions": ["failed"]}]},
        "nodeSelector": on_worker(), "allocationTimestamp": at}});
    if let Some(conditions) = conditions {
        c["status"]["devices"] =
            json!([{"driver": driver, "pool": "worker", "device": "instance-1", "conditions": conditions}]);
    }
    c
}

fn condition(kind: &str, status: &str) -> Value {
    json!({"type": kind, "status": status, "reason": "Tested", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"})
}

#[test]
fn bound_claims_with_binding_conditions_that_succeeded_failed_or_timed_out() {
    let plugin = DynamicResources::default();
    let p = pod_naming(&[("my-resource", CLAIM)]);
    let succeeded = conditioned(
        CLAIM,
        "some-driver",
        "req-1",
        5,
        Some(json!([condition("condition", "True"), condition("failed", "False")])),
    );
    let snap = build(World { claims: vec![succeeded], ..Default::default() });
    assert_eq!(messages(&filter(&plugin, &p, &snap)), vec!["ok"]);
    let mut objects = (*snap.objects).clone();
    let reserved = plugin.reserve(&mut objects, &p, &snap.nodes[0]).expect("reserve").expect("reserved");
    let writes = dra_writes(&plugin.pre_bind(&reserved, "worker"));
    let [DraWrite::Claim(w)] = writes.as_slice() else { panic!("{writes:?}") };
    assert_eq!(w.claim.reserved_for.len(), 1);
    assert!(matches!(plugin.check(&objects, &reserved, &snap.nodes[0], &[]), Progress::Done));

    let stuck = [
        (
            "failed",
            conditioned(
                CLAIM,
                "some-driver",
                "req-1",
                5,
                Some(json!([condition("condition", "False"), condition("failed", "True")])),
            ),
        ),
        ("timed out", conditioned(CLAIM, "some-driver", "req-1", 600 + 5, Some(json!([])))),
        (
            "mixed",
            conditioned(
                CLAIM,
                "some-driver",
                "req-1",
                600 + 5,
                Some(json!([condition("condition1", "True"), condition("condition2", "False")])),
            ),
        ),
    ];
    for (what, claim) in stuck {
        let mut snap =
            build(World { slices: vec![worker_slice("worker", json!({}))], claims: vec![claim], ..Default::default() });
        let st = filter(&plugin, &p, &snap);
        assert_eq!(
            (st[0].code, st[0].message()),
            (Code::UnschedulableAndUnresolvable, NOT_AVAILABLE.to_string()),
            "{what}"
        );
        let mut ev = Evaluation::default();
        let mut rejected = st[0].clone();
        rejected.plugin = NAME;
        ev.rejected.push(0, rejected);
        let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
        let PostFilterResult::Released { message, writes, .. } =
            plugin.post_filter(&Profile::default(), &p, &mut snap, &ev, &mut rng)
        else {
            panic!("{what}: expected a deallocation")
        };
        assert_eq!(message, DEALLOCATED, "{what}");
        let writes = dra_writes(&writes);
        let [DraWrite::Claim(w)] = writes.as_slice() else { panic!("{writes:?}") };
        let status = w.claim.api.status.clone().unwrap_or_default();
        assert!(status.allocation.is_none() && status.devices.is_none(), "{what}");
    }
}

#[test]
fn of_two_claims_with_binding_conditions_only_the_failed_one_is_deallocated() {
    let plugin = DynamicResources::default();
    let ok = || {
        conditioned(
            CLAIM,
            "some-driver",
            "req-1",
            5,
            Some(json!([condition("condition", "True"), condition("failed", "False")])),
        )
    };
    let p = pod_naming(&[("my-resource", CLAIM), ("my-resource-2", "my-pod-my-resource-2")]);
    let slices = vec![devices_on("worker", "some-driver", 1), devices_on("worker", "some-driver-2", 1)];
    let both_ok = conditioned(
        "my-pod-my-resource-2",
        "some-driver-2",
        "req-2",
        5,
        Some(json!([condition("condition", "True"), condition("failed", "False")])),
    );
    let snap = build(World { slices: slices.clone(), claims: vec![ok(), both_ok], ..Default::default() });
    assert_eq!(messages(&filter(&plugin, &p, &snap)), vec!["ok"]);
    let mut objects = (*snap.objects).clone();
    let reserved = plugin.reserve(&mut objects, &p, &snap.nodes[0]).expect("reserve").expect("reserved");
    assert_eq!(dra_writes(&plugin.pre_bind(&reserved, "worker")).len(), 2);
    assert!(matches!(plugin.check(&objects, &reserved, &snap.nodes[0], &[]), Progress::Done));

    let failed = conditioned(
        "my-pod-my-resource-2",
        "some-driver-2",
        "req-2",
        5,
        Some(json!([condition("condition", "False"), condition("failed", "True")])),
    );
    let mut snap = build(World { slices, claims: vec![ok(), failed], ..Default::default() });
    let st = filter(&plugin, &p, &snap);
    assert_eq!(messages(&st), vec![NOT_AVAILABLE]);
    let mut ev = Evaluation::default();
    let mut rejected = st[0].clone();
    rejected.plugin = NAME;
    ev.rejected.push(0, rejected);
    let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
    let PostFilterResult::Released { message, writes, .. } =
        plugin.post_filter(&Profile::default(), &p, &mut snap, &ev, &mut rng)
    else {
        panic!("expected a deallocation")
    };
    assert_eq!(message, DEALLOCATED);
    let writes = dra_writes(&writes);
    let [DraWrite::Claim(w)] = writes.as_slice() else { panic!("{writes:?}") };
    assert_eq!(w.claim.name, "my-pod-my-resource-2");
}

#[test]
fn sub_requests_with_the_prioritized_list_gate_off_are_refused_in_prefilter() {
    let off = DynamicResources {
        features: dra::Features { prioritized_list: false, ..Default::default() },
        ..Default::default()
    };
    let listed =
        json!({"name": "req-1", "firstAvailable": [{"name": "subreq-1", "deviceClassName": "my-resource-class"}]});
    let mut snap = build(World {
        slices: vec![worker_slice("worker", json!({}))],
        claims: vec![pending(listed)],
        ..Default::default()
    });
    let p = pod_info(pod());
    let pre = off.pre_filter(&p, &snap);
    assert_eq!(pre.status.code, Code::UnschedulableAndUnresolvable);
    assert_eq!(
        pre.status.message(),
        format!(
            "resource claim default/{CLAIM}, request req-1: has subrequests, but the DRAPrioritizedList feature is disabled"
        )
    );
    let mut rejection = pre.status.clone();
    rejection.plugin = NAME;
    assert_eq!(post_filter(&off, &p, &mut snap, Some(rejection)), NO_CLAIMS);
}

#[test]
fn the_binding_timeout_counts_from_the_allocation_too() {
    let plugin = DynamicResources::default();
    let p = pod_naming(&[("my-resource", CLAIM)]);
    // Allocated 10 s short of the timeout: available, and PreBind waits for the driver.
    let waiting = conditioned(CLAIM, "some-driver", "req-1", 600 - 10, Some(json!([])));
    let snap = build(World { claims: vec![waiting.clone()], ..Default::default() });
    assert_eq!(messages(&filter(&plugin, &p, &snap)), vec!["ok"]);
    let mut objects = (*snap.objects).clone();
    let reserved = plugin.reserve(&mut objects, &p, &snap.nodes[0]).expect("reserve").expect("reserved");
    assert!(matches!(plugin.check(&objects, &reserved, &snap.nodes[0], &[]), Progress::Waiting));
    // The allocation's timeout passes while it waits (here: the same wait judged with a
    // timeout the allocation's age already passed): the binding fails.
    let shorter = DynamicResources {
        args: DynamicResourcesArgs { binding_timeout: Duration::from_secs(580), ..Default::default() },
        ..Default::default()
    };
    let Progress::Failed(message) = shorter.check(&objects, &reserved, &snap.nodes[0], &[]) else {
        panic!("the binding should time out")
    };
    assert_eq!(message, format!("device binding timeout: claim={CLAIM}"));
}
