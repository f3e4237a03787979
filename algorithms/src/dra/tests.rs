//! Allocator cases after kube-scheduler's structured allocator table (node `node-1`
//! with labels region=region-1 and planet=earth unless a case says otherwise).

use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::labels::Labels;

fn class(name: &str, driver: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{driver}\"")}}]}})
}

fn device(name: &str) -> Value {
    json!({"name": name})
}

fn slice(name: &str, node: Value, pool: &str, driver: &str, devices: Vec<Value>) -> Value {
    sliced(name, node, pool, driver, 1, 1, devices)
}

fn sliced(
    name: &str,
    node: Value,
    pool: &str,
    driver: &str,
    generation: i64,
    count: i64,
    devices: Vec<Value>,
) -> Value {
    let mut spec = json!({"driver": driver, "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
        "devices": devices});
    if let (Some(s), Some(n)) = (spec.as_object_mut(), node.as_object()) {
        s.extend(n.clone());
    }
    json!({"metadata": {"name": name}, "spec": spec})
}

fn on(node: &str) -> Value {
    json!({"nodeName": node})
}

fn exact(name: &str, class: &str, count: i64) -> Value {
    json!({"name": name, "exactly": {"deviceClassName": class, "count": count}})
}

fn claim(name: &str, requests: Vec<Value>) -> Value {
    json!({"metadata": {"name": name, "namespace": "default"}, "spec": {"devices": {"requests": requests}}})
}

fn with(mut v: Value, path: &[&str], extra: Value) -> Value {
    let mut at = &mut v;
    for p in path {
        at = &mut at[*p];
    }
    *at = extra;
    v
}

struct Case {
    classes: Vec<Value>,
    slices: Vec<Value>,
    allocated: Vec<(&'static str, &'static str, &'static str)>,
    /// Shares of driver-a/pool-1's devices already allocated: device and what it consumes.
    shared: Vec<(&'static str, Value)>,
    claims: Vec<Value>,
    node: &'static str,
    features: Features,
}

impl Default for Case {
    fn default() -> Self {
        Case {
            classes: vec![class("class-a", "driver-a"), class("class-b", "driver-b")],
            slices: Vec::new(),
            allocated: Vec::new(),
            shared: Vec::new(),
            claims: Vec::new(),
            node: "node-1",
            features: Features::default(),
        }
    }
}

/// Runs a case: the devices each claim got as `request=driver/pool/device` (admin access
/// marked `!`), or the error.
fn run(case: Case) -> Result<Option<Vec<Vec<String>>>, String> {
    run_full(case).map(|o| o.map(|all| all.iter().map(picked).collect()))
}

fn run_full(case: Case) -> Result<Option<Vec<k8s_openapi::api::resource::v1::AllocationResult>>, String> {
    let mut st = DraState::default();
    for c in case.classes {
        st.upsert_class(DeviceClass::from_api(&serde_json::from_value(c).map_err(|e| e.to_string())?)?);
    }
    for s in case.slices {
        st.upsert_slice(Slice::from_api(&serde_json::from_value(s).map_err(|e| e.to_string())?)?);
    }
    for (i, (driver, pool, dev)) in case.allocated.iter().enumerate() {
        let c = json!({"metadata": {"name": format!("held-{i}"), "namespace": "default"}, "spec": {},
            "status": {"allocation": {"devices": {"results": [{"request": "r", "driver": driver, "pool": pool, "device": dev}]}}}});
        st.upsert_claim(Claim::from_api(&serde_json::from_value(c).map_err(|e| e.to_string())?)?);
    }
    for (i, (dev, consumed)) in case.shared.iter().enumerate() {
        let c = json!({"metadata": {"name": format!("shared-{i}"), "namespace": "default"}, "spec": {},
            "status": {"allocation": {"devices": {"results": [{"request": "r", "driver": "driver-a", "pool": "pool-1",
                "device": dev, "shareID": format!("00000000-0000-4000-8000-{i:012}"), "consumedCapacity": consumed}]}}}});
        st.upsert_claim(Claim::from_api(&serde_json::from_value(c).map_err(|e| e.to_string())?)?);
    }
    let claims: Vec<Arc<Claim>> = case
        .claims
        .into_iter()
        .map(|c| Claim::from_api(&serde_json::from_value(c).map_err(|e| e.to_string())?).map(Arc::new))
        .collect::<Result<_, _>>()?;
    let labels: Labels = [("region", if case.node == "node-1" { "region-1" } else { "region-2" }), ("planet", "earth")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let outcome = allocate(&st, case.node, &labels, &claims, case.features)?;
    // Filter's question (asked twice: the second answer is the remembered one) agrees.
    if let Ok(plan) = plan(&st, &claims, case.features)
        && !matches!(outcome, Outcome::TimedOut)
    {
        for _ in 0..2 {
            let fits = fits_planned(&st, case.node, &labels, &claims, &plan);
            match (&outcome, fits) {
                (Outcome::Allocated(_), Ok(Outcome::Allocated(none))) => assert!(none.is_empty()),
                (Outcome::Unschedulable(a), Ok(Outcome::Unschedulable(b))) => assert_eq!(a, &b),
                (_, Err(_)) => {}
                (want, got) => panic!("allocate gave {want:?}, fits gave {got:?}"),
            }
        }
    }
    match outcome {
        Outcome::Allocated(a) => Ok(Some(a)),
        Outcome::Unschedulable(None) => Ok(None),
        Outcome::Unschedulable(Some(reason)) => Err(reason),
        Outcome::TimedOut => Err("timed out".into()),
    }
}

fn picked(a: &k8s_openapi::api::resource::v1::AllocationResult) -> Vec<String> {
    let results = a.devices.as_ref().and_then(|d| d.results.clone()).unwrap_or_default();
    results
        .iter()
        .map(|r| {
            let admin = if r.admin_access == Some(true) { "!" } else { "" };
            format!("{}={}/{}/{}{admin}", r.request, r.driver, r.pool, r.device)
        })
        .collect()
}

fn one(list: &[&str]) -> Option<Vec<Vec<String>>> {
    Some(vec![list.iter().map(|s| s.to_string()).collect()])
}

fn claim0(requests: Vec<Value>) -> Vec<Value> {
    vec![claim("claim-0", requests)]
}

#[test]
fn simple_allocations_take_the_nodes_devices() {
    let local = |node| Case {
        slices: vec![
            slice("slice-1", on("node-1"), "pool-1", "driver-a", vec![device("device-1")]),
            slice("slice-2", on("node-2"), "pool-2", "driver-a", vec![device("device-1")]),
        ],
        claims: claim0(vec![exact("req-0", "class-a", 1)]),
        node,
        ..Default::default()
    };
    assert_eq!(run(local("node-1")), Ok(one(&["req-0=driver-a/pool-1/device-1"])));
    assert_eq!(run(local("node-2")), Ok(one(&["req-0=driver-a/pool-2/device-1"])));
    let result = run_full(local("node-1")).expect("allocated").expect("some");
    assert_eq!(result[0].node_selector, Some(local_selector("node-1")));
    assert_eq!(run(Case { claims: Vec::new(), ..local("node-1") }), Ok(Some(Vec::new())));
    assert_eq!(run(Case { slices: Vec::new(), ..local("node-1") }), Ok(None));
}

fn local_selector(node: &str) -> k8s_openapi::api::core::v1::NodeSelector {
    super::local(node)
}

#[test]
fn selectors_and_backtracking_across_requests_and_claims() {
    let mem = |q: &str| json!([{"cel": {"expression": format!("device.capacity[\"driver-a\"].memory.compareTo(quantity(\"{q}\")) >= 0")}}]);
    let dev = |n: &str, m: &str| json!({"name": n, "capacity": {"memory": {"value": m}}});
    let small_then_large = vec![
        with(exact("req-0", "class-a", 1), &["exactly", "selectors"], mem("1Gi")),
        with(exact("req-1", "class-a", 1), &["exactly", "selectors"], mem("2Gi")),
    ];
    let slices = |order: [(&str, &str); 2]| {
        vec![slice("slice-1", on("node-1"), "pool-1", "driver-a", order.iter().map(|(n, m)| dev(n, m)).collect())]
    };
    for order in [[("device-1", "1Gi"), ("device-2", "2Gi")], [("device-2", "2Gi"), ("device-1", "1Gi")]] {
        let c = Case { slices: slices(order), claims: claim0(small_then_large.clone()), ..Default::default() };
        let mut got = run(c).expect("no error").expect("allocated");
        got[0].sort();
        assert_eq!(got[0], vec!["req-0=driver-a/pool-1/device-1", "req-1=driver-a/pool-1/device-2"]);
    }
    let two_claims =
        vec![claim("claim-0", vec![small_then_large[0].clone()]), claim("claim-1", vec![small_then_large[1].clone()])];
    let c =
        Case { slices: slices([("device-2", "2Gi"), ("device-1", "1Gi")]), claims: two_claims, ..Default::default() };
    assert_eq!(
        run(c),
        Ok(Some(vec![vec!["req-0=driver-a/pool-1/device-1".into()], vec!["req-1=driver-a/pool-1/device-2".into()]]))
    );
}

#[test]
fn held_and_missing_devices_leave_nothing_to_allocate() {
    let base = || Case {
        slices: vec![slice("slice-1", on("node-1"), "pool-1", "driver-a", vec![device("device-1")])],
        claims: claim0(vec![exact("req-0", "class-a", 1)]),
        ..Default::default()
    };
    assert_eq!(run(Case { allocated: vec![("driver-a", "pool-1", "device-1")], ..base() }), Ok(None));
    let two = vec![
        claim("claim-0", vec![exact("req-0", "class-a", 1)]),
        claim("claim-1", vec![exact("req-0", "class-a", 1)]),
    ];
    assert_eq!(run(Case { claims: two, ..base() }), Ok(None));
    let err = run(Case { classes: Vec::new(), ..base() }).expect_err("class missing");
    assert!(err.contains("could not retrieve device class class-a"), "{err}");
    let empty = claim0(vec![exact("req-0", "", 1)]);
    assert_eq!(
        run(Case { claims: empty, ..base() }),
        Err("claim default/claim-0, request req-0: missing device class name (unsupported request type?)".into())
    );
}

#[test]
fn the_claim_limit_is_32_devices() {
    let devices = (0..32).map(|i| device(&format!("device-{i}"))).collect();
    let base = || Case {
        slices: vec![slice("slice-1", on("node-1"), "pool-1", "driver-a", devices_of(32))],
        ..Default::default()
    };
    let got =
        run(Case { claims: claim0(vec![exact("req-0", "class-a", 32)]), ..base() }).expect("ok").expect("allocated");
    assert_eq!(got[0].len(), 32);
    let err = run(Case { claims: claim0(vec![exact("req-0", "class-a", 500)]), ..base() }).expect_err("too many");
    assert!(err.contains("exceeds the claim limit of 32"), "{err}");
    let err = run(Case { claims: claim0(vec![exact("req-0", "class-a", 32), exact("req-1", "class-a", 1)]), ..base() })
        .expect_err("too many in all");
    assert!(err.contains("number of requested devices 33 exceeds the claim limit of 32"), "{err}");
    let _: Vec<Value> = devices;
}

fn devices_of(n: usize) -> Vec<Value> {
    (0..n).map(|i| device(&format!("device-{i}"))).collect()
}

#[test]
fn network_attached_devices_carry_their_selector() {
    let region = json!({"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "region", "operator": "In", "values": ["region-1"]}]}]}});
    let c = |node| Case {
        slices: vec![slice("slice-1", region.clone(), "pool-1", "driver-a", vec![device("device-1")])],
        claims: claim0(vec![exact("req-0", "class-a", 1)]),
        node,
        ..Default::default()
    };
    let got = run_full(c("node-1")).expect("ok").expect("allocated");
    let want: k8s_openapi::api::core::v1::NodeSelector =
        serde_json::from_value(region["nodeSelector"].clone()).expect("selector");
    assert_eq!(got[0].node_selector, Some(want));
    assert_eq!(run(c("node-2")), Ok(None));
    let all = json!({"allNodes": true});
    let c = Case {
        slices: vec![slice("slice-1", all, "pool-1", "driver-a", vec![device("device-1")])],
        claims: claim0(vec![exact("req-0", "class-a", 1)]),
        ..Default::default()
    };
    assert_eq!(run_full(c).expect("ok").expect("allocated")[0].node_selector, None);
}

#[test]
fn pools_count_only_when_complete_and_newest() {
    let c = |slices| Case { slices, claims: claim0(vec![exact("req-0", "class-a", 1)]), ..Default::default() };
    // Generation 2 replaces generation 1 but has only one of its two slices: incomplete.
    let obsolete = vec![
        sliced("slice-1", on("node-1"), "pool-1", "driver-a", 1, 2, vec![device("device-1")]),
        sliced("slice-1b", on("node-1"), "pool-1", "driver-a", 2, 2, vec![device("device-2")]),
    ];
    assert_eq!(run(c(obsolete)), Ok(None));
    // A newer generation on another node makes this node's older slices obsolete.
    let stale = vec![
        sliced("slice-1", on("node-1"), "pool-1", "driver-a", 1, 2, vec![device("device-1")]),
        sliced("slice-2", on("node-2"), "pool-1", "driver-a", 2, 2, vec![device("device-2")]),
    ];
    assert_eq!(run(c(stale)), Ok(None));
    // A pool spread over two nodes serves each node from its own slice.
    let spread = vec![
        sliced("slice-1", on("node-2"), "pool-1", "driver-a", 1, 2, vec![device("device-1")]),
        sliced("slice-2", on("node-1"), "pool-1", "driver-a", 1, 2, vec![device("device-2")]),
    ];
    assert_eq!(run(c(spread)), Ok(one(&["req-0=driver-a/pool-1/device-2"])));
    // A device name twice makes the pool invalid: an error only when nothing else fits.
    let dup =
        || sliced("slice-1", on("node-1"), "pool-1", "driver-a", 1, 1, vec![device("device-1"), device("device-1")]);
    let other = slice("slice-2", on("node-1"), "pool-2", "driver-a", vec![device("device-2")]);
    assert_eq!(run(c(vec![dup(), other.clone()])), Ok(one(&["req-0=driver-a/pool-2/device-2"])));
    assert_eq!(run(c(vec![dup()])), Err(INVALID_POOLS.into()));
}

fn all(name: &str, class: &str) -> Value {
    json!({"name": name, "exactly": {"deviceClassName": class, "allocationMode": "All"}})
}

#[test]
fn allocation_mode_all_takes_every_matching_device() {
    let two_pools = || {
        vec![
            slice("slice-1", on("node-1"), "pool-1", "driver-a", vec![device("device-1")]),
            slice("slice-2", on("node-1"), "pool-2", "driver-a", vec![device("device-1")]),
        ]
    };
    let c = |claims, allocated| Case { slices: two_pools(), claims, allocated, ..Default::default() };
    assert_eq!(
        run(c(claim0(vec![all("req-0", "class-a")]), vec![])),
        Ok(one(&["req-0=driver-a/pool-1/device-1", "req-0=driver-a/pool-2/device-1"]))
    );
    assert_eq!(run(c(claim0(vec![all("req-0", "class-a")]), vec![("driver-a", "pool-1", "device-1")])), Ok(None));
    let incomplete = Case {
        slices: vec![sliced("slice-1", on("node-1"), "pool-1", "driver-a", 1, 2, vec![device("device-1")])],
        claims: claim0(vec![all("req-0", "class-a")]),
        ..Default::default()
    };
    assert_eq!(
        run(incomplete),
        Err("claim default/claim-0, request req-0: asks for all devices, but resource pool driver-a/pool-1 is currently being updated".into())
    );
    let none = Case { claims: claim0(vec![all("req-0", "class-a")]), ..Default::default() };
    assert_eq!(run(none), Ok(None));
    // With a second claim needing one of the same devices, nothing fits.
    let both =
        vec![claim("claim-0", vec![exact("req-0", "class-a", 1)]), claim("claim-1", vec![all("req-0", "class-a")])];
    let one_device = Case {
        slices: vec![slice("slice-1", on("node-1"), "pool-1", "driver-a", vec![device("device-1")])],
        claims: both,
        ..Default::default()
    };
    assert_eq!(run(one_device), Ok(None));
}

fn admin(name: &str, class: &str, count: i64) -> Value {
    json!({"name": name, "exactly": {"deviceClassName": class, "count": count, "adminAccess": true}})
}

#[test]
fn admin_access_uses_held_devices_without_consuming_them() {
    let base = |claims| Case {
        slices: vec![slice(
            "slice-1",
            on("node-1"),
            "pool-1",
            "driver-a",
            vec![device("device-1"), device("device-2")],
        )],
        allocated: vec![("driver-a", "pool-1", "device-1")],
        claims,
        ..Default::default()
    };
    assert_eq!(run(base(claim0(vec![admin("req-0", "class-a", 1)]))), Ok(one(&["req-0=driver-a/pool-1/device-1!"])));
    assert_eq!(
        run(base(claim0(vec![admin("req-0", "class-a", 2)]))),
        Ok(one(&["req-0=driver-a/pool-1/device-1!", "req-0=driver-a/pool-1/device-2!"]))
    );
    let shared = vec![
        claim("claim-0", vec![admin("req-0", "class-a", 1)]),
        claim("claim-1", vec![admin("req-0", "class-a", 1)]),
    ];
    assert_eq!(
        run(base(shared)),
        Ok(Some(vec![vec!["req-0=driver-a/pool-1/device-1!".into()], vec!["req-0=driver-a/pool-1/device-1!".into()]]))
    );
}

fn constrained(attribute: &str, requests: &[&str]) -> Value {
    json!({"matchAttribute": attribute, "requests": requests})
}

#[test]
fn match_attribute_constraints_hold_across_requests() {
    let dev = |n: &str, numa: i64, s: &str| json!({"name": n, "attributes": {"numa": {"int": numa}, "driver-a/s": {"string": s}}});
    let c = |devices: Vec<Value>, constraints: Vec<Value>| {
        let cl = claim("claim-0", vec![exact("req-0", "class-a", 1), exact("req-1", "class-a", 1)]);
        let cl = with(cl, &["spec", "devices", "constraints"], Value::Array(constraints));
        Case {
            slices: vec![slice("slice-1", on("node-1"), "pool-1", "driver-a", devices)],
            claims: vec![cl],
            ..Default::default()
        }
    };
    let equal = vec![dev("device-1", 1, "a"), dev("device-2", 1, "a")];
    assert_eq!(
        run(c(equal, vec![constrained("driver-a/numa", &[])])),
        Ok(one(&["req-0=driver-a/pool-1/device-1", "req-1=driver-a/pool-1/device-2"]))
    );
    let differ = vec![dev("device-1", 1, "a"), dev("device-2", 2, "a")];
    assert_eq!(run(c(differ.clone(), vec![constrained("driver-a/numa", &[])])), Ok(None));
    assert_eq!(run(c(differ, vec![constrained("driver-a/missing", &[])])), Ok(None));
    // The first device taken has the odd value: the search backs up and takes the others.
    let retry = vec![dev("device-1", 1, "a"), dev("device-2", 1, "b"), dev("device-3", 1, "b")];
    assert_eq!(
        run(c(retry, vec![constrained("driver-a/s", &[])])),
        Ok(one(&["req-0=driver-a/pool-1/device-2", "req-1=driver-a/pool-1/device-3"]))
    );
    // All mode: a device that breaks the constraint is an error.
    let cl = with(
        claim("claim-0", vec![all("req-0", "class-a")]),
        &["spec", "devices", "constraints"],
        json!([constrained("driver-a/numa", &[])]),
    );
    let case = Case {
        slices: vec![slice(
            "slice-1",
            on("node-1"),
            "pool-1",
            "driver-a",
            vec![dev("device-1", 1, "a"), dev("device-2", 2, "a")],
        )],
        claims: vec![cl],
        ..Default::default()
    };
    assert_eq!(
        run(case),
        Err("claim default/claim-0, request req-0: cannot add device driver-a/pool-1/device-2 because a claim constraint would not be satisfied".into())
    );
}

fn first_available(name: &str, subs: Vec<Value>) -> Value {
    json!({"name": name, "firstAvailable": subs})
}

fn sub(name: &str, class: &str, count: i64) -> Value {
    json!({"name": name, "deviceClassName": class, "count": count})
}

#[test]
fn first_available_takes_the_first_sub_request_that_fits() {
    let c = |claims| Case {
        slices: vec![slice("slice-1", on("node-1"), "pool-1", "driver-a", vec![device("device-1")])],
        claims,
        ..Default::default()
    };
    let req = first_available("req-0", vec![sub("subReq-0", "class-b", 1), sub("subReq-1", "class-a", 1)]);
    assert_eq!(run(c(claim0(vec![req]))), Ok(one(&["req-0/subReq-1=driver-a/pool-1/device-1"])));
    let neither = first_available("req-0", vec![sub("subReq-0", "class-a", 2), sub("subReq-1", "class-b", 2)]);
    assert_eq!(run(c(claim0(vec![neither]))), Ok(None));
    // The limit is checked against the smallest sub-request.
    let big_first = first_available("req-0", vec![sub("subReq-0", "class-b", 500), sub("subReq-1", "class-a", 1)]);
    assert_eq!(run(c(claim0(vec![big_first]))), Ok(one(&["req-0/subReq-1=driver-a/pool-1/device-1"])));
    let mut case = c(claim0(vec![first_available("req-0", vec![sub("subReq-0", "class-a", 1)])]));
    let off = Features { prioritized_list: false, ..Features::default() };
    let claims: Vec<Arc<Claim>> = std::mem::take(&mut case.claims)
        .into_iter()
        .map(|v| Arc::new(Claim::from_api(&serde_json::from_value(v).expect("claim")).expect("parse")))
        .collect();
    let err = allocate(&DraState::default(), "node-1", &Labels::new(), &claims, off).expect_err("gate off");
    assert_eq!(
        err,
        "claim default/claim-0, request req-0: has subrequests, but the DRAPrioritizedList feature is disabled"
    );
}

#[test]
fn configuration_from_classes_and_claims_is_copied() {
    let opaque = |p: &str| json!({"opaque": {"driver": "driver-a", "parameters": {"p": p}}});
    let mut a = class("class-a", "driver-a");
    a["spec"]["config"] = json!([opaque("class")]);
    let cl = claim("claim-0", vec![exact("req-0", "class-a", 1), exact("req-1", "class-a", 1)]);
    let cl = with(
        cl,
        &["spec", "devices", "config"],
        json!([
            {"requests": ["req-0"], "opaque": opaque("for-0")["opaque"]},
            {"requests": ["req-0", "req-1"], "opaque": opaque("for-all")["opaque"]},
            {"requests": ["other"], "opaque": opaque("dropped")["opaque"]},
        ]),
    );
    let case = Case {
        classes: vec![a],
        slices: vec![slice(
            "slice-1",
            on("node-1"),
            "pool-1",
            "driver-a",
            vec![device("device-1"), device("device-2")],
        )],
        claims: vec![cl],
        ..Default::default()
    };
    let got = run_full(case).expect("ok").expect("allocated");
    let config = got[0].devices.as_ref().and_then(|d| d.config.clone()).expect("config");
    let summary: Vec<(String, Option<Vec<String>>, String)> = config
        .iter()
        .map(|c| {
            let p = c
                .opaque
                .as_ref()
                .map(|o| o.parameters.0["p"].as_str().unwrap_or_default().to_string())
                .unwrap_or_default();
            (c.source.clone(), c.requests.clone(), p)
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            ("FromClass".into(), Some(vec!["req-0".into(), "req-1".into()]), "class".into()),
            ("FromClaim".into(), Some(vec!["req-0".into()]), "for-0".into()),
            // Once for each request it names, as kube-scheduler copies it.
            ("FromClaim".into(), Some(vec!["req-0".into(), "req-1".into()]), "for-all".into()),
            ("FromClaim".into(), Some(vec!["req-0".into(), "req-1".into()]), "for-all".into()),
        ]
    );
}

#[test]
fn selector_errors_are_reported_with_their_source() {
    let base = |classes, request_selector: Option<&str>| {
        let mut req = exact("req-0", "class-a", 1);
        if let Some(s) = request_selector {
            req["exactly"]["selectors"] = json!([{"cel": {"expression": s}}]);
        }
        Case {
            classes,
            slices: vec![slice("slice-1", on("node-1"), "pool-1", "driver-a", vec![device("device-1")])],
            claims: claim0(vec![req]),
            ..Default::default()
        }
    };
    let err = run(base(vec![class("class-a", "driver-a")], Some("device.attributes[\"driver-a\"].healthy")))
        .expect_err("runtime");
    assert_eq!(err, "claim default/claim-0: selector #0: CEL runtime error: no such key: healthy");
    let broken = json!({"metadata": {"name": "class-a"}, "spec": {"selectors": [{"cel": {"expression": "device.attributes[\"driver-a\"].healthy"}}]}});
    let err = run(base(vec![broken], None)).expect_err("runtime");
    assert_eq!(err, "class class-a: selector #0: CEL runtime error: no such key: healthy");
    let err = run(base(vec![class("class-a", "driver-a")], Some("noSuchVar"))).expect_err("undeclared");
    assert!(
        err.contains("claim default/claim-0: selector #0: CEL runtime error") && err.contains("noSuchVar"),
        "{err}"
    );
    let err = run(base(vec![class("class-a", "driver-a")], Some("1"))).expect_err("not bool");
    assert!(err.contains("CEL result of type int could not be converted to bool"), "{err}");
    let err = run(base(vec![class("class-a", "driver-a")], Some("?!"))).expect_err("syntax");
    assert!(err.contains("CEL compile error") && err.contains("Syntax error"), "{err}");
}

/// Kubernetes' DRA CEL environment, expression by expression.
#[test]
fn the_cel_environment_reads_devices_as_kubernetes_does() {
    let d = json!({"name": "device-1", "attributes": {
        "name": {"bool": true}, "num": {"int": 1}, "str": {"string": "fish"}, "ver": {"version": "1.0.0"},
        "other.example.com/name": {"bool": true}, "services": {"string": "some_example_value"}},
        "capacity": {"memory": {"value": "1Mi"}}});
    let s =
        Slice::from_api(&serde_json::from_value(slice("s", on("n"), "p", "dra.example.com", vec![d])).expect("slice"))
            .expect("parse");
    let device = Reachable { device: s.devices[0].clone(), slice: Arc::new(s.clone()), pool: 0 };
    let eval = |expr: &str| -> Result<bool, String> {
        let program = cel_env_for_tests(expr)?;
        let value = device.device.cel_value("dra.example.com").as_ref().map_err(|e| e.clone())?;
        super::selectors::run(&program, value.as_ref())
    };
    let yes = [
        "true",
        r#"device.driver == "dra.example.com""#,
        r#"!("no-such-domain" in device.attributes)"#,
        r#""dra.example.com" in device.attributes"#,
        r#"device.attributes["dra.example.com"].name"#,
        r#"device.attributes["dra.example.com"]["name"]"#,
        r#"cel.bind(dra, device.attributes["dra.example.com"], dra.name)"#,
        r#"device.attributes["other.example.com"].name"#,
        r#"device.attributes["dra.example.com"].num > 0"#,
        r#"device.attributes["dra.example.com"].str == "fish""#,
        r#"device.attributes["dra.example.com"].ver.isGreaterThan(semver("0.0.1"))"#,
        r#"device.attributes["dra.example.com"].ver.isGreaterThan(semver("v0.0.1", true)) && isSemver("v1.0.0", true)"#,
        r#"device.capacity["dra.example.com"].memory.isGreaterThan(quantity("1Ki"))"#,
        r#""memory" in device.capacity["dra.example.com"] && device.capacity["dra.example.com"].memory.compareTo(quantity("1024Ki")) == 0"#,
        r#"!("gpus" in device.capacity["dra.example.com"]) || device.capacity["dra.example.com"].gpus.isGreaterThan(quantity("1"))"#,
        r#"device.attributes.exists_one(x, x == "dra.example.com")"#,
        r#"device.attributes["dra.example.com"].services.split("example").size() >= 2"#,
        r#"device.capacity["dra.example.com"].exists_one(x, x == "memory")"#,
        r#"quantity("50k").add(20).sub(quantity("100k")).asInteger() == -49980"#,
        r#"quantity("200M") == quantity("0.2G") && sign(quantity("-1")) == -1 && isQuantity("1Gi") && !isQuantity("10Mo")"#,
        r#"semver("1.2.3+build") == semver("1.2.3") && semver("1.2.3").major() == 1 && semver("v01.01", true) == semver("1.1.0")"#,
        r#"device.attributes["dra.example.com"].?missing.orValue("x") == "x""#,
    ];
    for e in yes {
        assert_eq!(eval(e), Ok(true), "{e}");
    }
    assert_eq!(eval("false"), Ok(false));
    assert_eq!(eval(r#"device.attributes["no-such-domain"].noSuchAttr"#), Err("no such key: noSuchAttr".into()));
    assert!(eval(r#"quantity("1Gi") < quantity("2Gi")"#).is_err(), "no ordering operators on quantities");
}

fn cel_env_for_tests(expr: &str) -> Result<cel::Program, String> {
    super::cel_env::env()?.compile(expr).map_err(|e| e.to_string())
}

#[test]
fn claims_held_by_allocations_are_counted_once_per_claim() {
    let mut st = DraState::default();
    let held = |name: &str| {
        let c = json!({"metadata": {"name": name, "namespace": "default", "resourceVersion": "1"}, "spec": {},
            "status": {"allocation": {"devices": {"results": [{"request": "r", "driver": "d", "pool": "p", "device": "x"}]}}}});
        Claim::from_api(&serde_json::from_value(c).expect("claim")).expect("parse")
    };
    let id = DeviceId::new("d", "p", "x");
    st.upsert_claim(held("a"));
    st.upsert_claim(held("a"));
    assert_eq!(st.holders(&id), 1);
    st.upsert_claim(held("b"));
    assert_eq!(st.holders(&id), 2);
    assert_eq!(st.held_in_pool(id.pool_key()), 1, "a device held twice counts once in its pool");
    st.remove_claim("default/a");
    st.remove_claim("default/b");
    assert_eq!(st.holders(&id), 0);
    assert_eq!(st.held_in_pool(id.pool_key()), 0);
    assert!(!st.any_held());
    // An assumed allocation holds the device until it is restored.
    let free = json!({"metadata": {"name": "c", "namespace": "default", "resourceVersion": "1"}, "spec": {}});
    st.upsert_claim(Claim::from_api(&serde_json::from_value(free).expect("claim")).expect("parse"));
    let assumed = Arc::new(Claim { name: "c".into(), ..held("c") });
    st.assume(assumed.clone());
    assert_eq!(st.holders(&id), 1);
    st.restore(&assumed);
    assert_eq!(st.holders(&id), 0);
}

/// The write path of an allocation: the finalizer is written first (a version without the
/// allocation reaches the watch), then the allocation. The device stays taken throughout,
/// and the assumption goes only once the watch shows the version the write returned.
#[test]
fn an_assumed_allocation_outlives_the_versions_written_before_it() {
    let version = |rv: &str, allocated: bool| {
        let mut c = json!({"metadata": {"name": "c", "namespace": "default", "resourceVersion": rv}, "spec": {}});
        if allocated {
            c["status"] = json!({"allocation": {"devices": {"results": [
                {"request": "r", "driver": "d", "pool": "p", "device": "x"}]}}});
        }
        Claim::from_api(&serde_json::from_value(c).expect("claim")).expect("parse")
    };
    let id = DeviceId::new("d", "p", "x");
    let mut st = DraState::default();
    st.upsert_claim(version("10", false));
    let assumed = Arc::new(version("10", true));
    st.assume(assumed.clone());
    // The finalizer's version, then a late copy of the first one: still assumed.
    st.upsert_claim(version("11", false));
    st.upsert_claim(version("10", false));
    assert!(st.is_assumed("default/c"));
    assert_eq!(st.holders(&id), 1);
    // The allocation was stored at 12; the watch has not shown it yet.
    st.written(&assumed, 12);
    assert!(st.is_assumed("default/c"));
    st.upsert_claim(version("12", true));
    assert!(!st.is_assumed("default/c"));
    assert_eq!(st.holders(&id), 1);
    // The watch ran ahead of the write's answer: the assumption goes at once.
    let mut st = DraState::default();
    st.upsert_claim(version("20", false));
    let assumed = Arc::new(version("20", true));
    st.assume(assumed.clone());
    st.upsert_claim(version("22", true));
    assert!(st.is_assumed("default/c"), "in flight: kept whatever the watch says");
    st.written(&assumed, 22);
    assert!(!st.is_assumed("default/c"));
    assert_eq!(st.holders(&id), 1);
    // Deallocated later (its pod gone): the device is free again.
    st.upsert_claim(version("30", false));
    assert_eq!(st.holders(&id), 0);
}

/// Two pods share a claim: the second builds its assumption on the first's, which is
/// written first. The second's write conflicts (it was made over the old version); once
/// the watch shows the first's version the assumption goes, so the retry is made over
/// the claim as the API server has it, not over a stale assumed copy.
#[test]
fn a_shared_claims_chained_assumptions_end_with_the_first_write() {
    let version = |rv: &str, consumers: &[&str]| {
        let reserved: Vec<_> =
            consumers.iter().map(|p| json!({"resource": "pods", "name": p, "uid": format!("uid-{p}")})).collect();
        let c = json!({"metadata": {"name": "c", "namespace": "default", "resourceVersion": rv}, "spec": {},
            "status": {"allocation": {"devices": {"results": [
                {"request": "r", "driver": "d", "pool": "p", "device": "x"}]}}, "reservedFor": reserved}});
        Claim::from_api(&serde_json::from_value(c).expect("claim")).expect("parse")
    };
    let free = json!({"metadata": {"name": "c", "namespace": "default", "resourceVersion": "10"}, "spec": {}});
    for restore_first in [false, true] {
        let mut st = DraState::default();
        st.upsert_claim(Claim::from_api(&serde_json::from_value(free.clone()).expect("claim")).expect("parse"));
        let first = Arc::new(version("10", &["a"]));
        st.assume(first.clone());
        let second = Arc::new(version("10", &["a", "b"]));
        st.assume(second.clone());
        st.written(&first, 12);
        if restore_first {
            // The second's write conflicted before the watch showed the first's version.
            st.restore(&second);
        }
        st.upsert_claim(version("11", &[]));
        assert!(st.is_assumed("default/c"), "the finalizer's version ends nothing");
        st.upsert_claim(version("12", &["a"]));
        assert!(!st.is_assumed("default/c"), "restore first: {restore_first}");
        st.restore(&second);
        assert!(!st.is_assumed("default/c"));
        assert_eq!(st.claim("default/c").map(|c| c.resource_version.clone()).as_deref(), Some("12"));
    }
}

/// Two pods share a claim and both give up (in either order, with or without a write
/// having returned): no assumption of either is left behind to hold the device.
#[test]
fn chained_assumptions_of_pods_that_gave_up_leave_nothing_behind() {
    let claim = |rv: &str, consumers: &[&str], allocated: bool| {
        let reserved: Vec<_> =
            consumers.iter().map(|p| json!({"resource": "pods", "name": p, "uid": format!("uid-{p}")})).collect();
        let mut c = json!({"metadata": {"name": "c", "namespace": "default", "resourceVersion": rv}, "spec": {}});
        if allocated {
            c["status"] = json!({"allocation": {"devices": {"results": [
                {"request": "r", "driver": "d", "pool": "p", "device": "x"}]}}, "reservedFor": reserved});
        }
        Claim::from_api(&serde_json::from_value(c).expect("claim")).expect("parse")
    };
    let id = DeviceId::new("d", "p", "x");
    for first_gives_up_first in [true, false] {
        let mut st = DraState::default();
        st.upsert_claim(claim("10", &[], false));
        let a = Arc::new(claim("10", &["a"], true));
        st.assume(a.clone());
        let b = Arc::new(claim("10", &["a", "b"], true));
        st.assume(b.clone());
        let order = if first_gives_up_first { [&a, &b] } else { [&b, &a] };
        st.restore(order[0]);
        assert!(st.is_assumed("default/c"), "the other pod's assumption still holds");
        assert_eq!(st.holders(&id), 1);
        st.restore(order[1]);
        assert!(!st.is_assumed("default/c"), "a first gives up first: {first_gives_up_first}");
        assert_eq!(st.holders(&id), 0);
    }
    // The first pod's write returned before the second built on it, and the second gave
    // up: what is left ends once the watch shows the first's write.
    let mut st = DraState::default();
    st.upsert_claim(claim("10", &[], false));
    let a = Arc::new(claim("10", &["a"], true));
    st.assume(a.clone());
    st.written(&a, 12);
    let b = Arc::new(claim("10", &["a", "b"], true));
    st.assume(b.clone());
    st.restore(&b);
    assert!(st.is_assumed("default/c"));
    st.upsert_claim(claim("12", &["a"], true));
    assert!(!st.is_assumed("default/c"));
    assert_eq!(st.holders(&id), 1);
}

fn tainted(name: &str, taints: Value) -> Value {
    json!({"name": name, "taints": taints})
}

fn tolerating(request: Value, tolerations: Value) -> Value {
    let mut r = request;
    if r.get("exactly").is_some() {
        r["exactly"]["tolerations"] = tolerations;
    } else {
        r["tolerations"] = tolerations;
    }
    r
}

#[test]
fn tainted_devices_go_only_to_requests_that_tolerate_their_taints() {
    let no_schedule = json!([{"key": "example.com/taint", "value": "tainted", "effect": "NoSchedule"}]);
    let no_execute = json!([{"key": "example.com/taint", "value": "tainted", "effect": "NoExecute"}]);
    let informational = json!([{"key": "example.com/taint", "value": "tainted", "effect": "None"}]);
    let c = |devices: Vec<Value>, requests: Vec<Value>| Case {
        slices: vec![slice("slice-1", on("node-1"), "pool-1", "driver-a", devices)],
        claims: claim0(requests),
        ..Default::default()
    };
    let got = |d: &str| one(&[&format!("req-0=driver-a/pool-1/{d}")]);
    let cases: Vec<(&str, Case, Result<Option<Vec<Vec<String>>>, String>)> = vec![
        (
            "a NoSchedule taint keeps the device from a request without tolerations",
            c(vec![tainted("device-1", no_schedule.clone())], vec![exact("req-0", "class-a", 1)]),
            Ok(None),
        ),
        (
            "so does NoExecute",
            c(vec![tainted("device-1", no_execute.clone())], vec![exact("req-0", "class-a", 1)]),
            Ok(None),
        ),
        (
            "the untainted device is taken instead",
            c(vec![tainted("device-1", no_schedule.clone()), device("device-2")], vec![exact("req-0", "class-a", 1)]),
            Ok(got("device-2")),
        ),
        (
            "a None taint only informs",
            c(vec![tainted("device-1", informational)], vec![exact("req-0", "class-a", 1)]),
            Ok(got("device-1")),
        ),
        (
            "Exists on the key tolerates it",
            c(
                vec![tainted("device-1", no_schedule.clone())],
                vec![tolerating(
                    exact("req-0", "class-a", 1),
                    json!([{"key": "example.com/taint", "operator": "Exists"}]),
                )],
            ),
            Ok(got("device-1")),
        ),
        (
            "Exists without a key tolerates every taint",
            c(
                vec![tainted("device-1", no_execute.clone())],
                vec![tolerating(exact("req-0", "class-a", 1), json!([{"operator": "Exists"}]))],
            ),
            Ok(got("device-1")),
        ),
        (
            "Equal with the value tolerates it",
            c(
                vec![tainted("device-1", no_schedule.clone())],
                vec![tolerating(
                    exact("req-0", "class-a", 1),
                    json!([{"key": "example.com/taint", "operator": "Equal", "value": "tainted"}]),
                )],
            ),
            Ok(got("device-1")),
        ),
        (
            "Equal with another value does not",
            c(
                vec![tainted("device-1", no_schedule.clone())],
                vec![tolerating(exact("req-0", "class-a", 1), json!([{"key": "example.com/taint", "value": "other"}]))],
            ),
            Ok(None),
        ),
        (
            "a toleration of another effect does not",
            c(
                vec![tainted("device-1", no_schedule.clone())],
                vec![tolerating(
                    exact("req-0", "class-a", 1),
                    json!([{"key": "example.com/taint", "operator": "Exists", "effect": "NoExecute"}]),
                )],
            ),
            Ok(None),
        ),
        (
            "every taint must be tolerated",
            c(
                vec![tainted(
                    "device-1",
                    json!([{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoSchedule"}]),
                )],
                vec![tolerating(exact("req-0", "class-a", 1), json!([{"key": "a", "operator": "Exists"}]))],
            ),
            Ok(None),
        ),
        (
            "a sub-request tolerating the taint is the one that fits",
            c(
                vec![tainted("device-1", no_schedule.clone())],
                vec![first_available(
                    "req-0",
                    vec![
                        sub("subReq-0", "class-a", 1),
                        tolerating(sub("subReq-1", "class-a", 1), json!([{"operator": "Exists"}])),
                    ],
                )],
            ),
            Ok(one(&["req-0/subReq-1=driver-a/pool-1/device-1"])),
        ),
    ];
    for (name, case, want) in cases {
        assert_eq!(run(case), want, "{name}");
    }
}

#[test]
fn without_the_device_taints_gate_taints_are_not_looked_at() {
    let st = {
        let mut st = DraState::default();
        let class = class("class-a", "driver-a");
        st.upsert_class(DeviceClass::from_api(&serde_json::from_value(class).expect("class")).expect("class"));
        let taint = json!([{"key": "example.com/taint", "effect": "NoSchedule"}]);
        let s = slice("slice-1", on("node-1"), "pool-1", "driver-a", vec![tainted("device-1", taint)]);
        st.upsert_slice(Slice::from_api(&serde_json::from_value(s).expect("slice")).expect("slice"));
        st
    };
    let claim = claim("claim-0", vec![exact("req-0", "class-a", 1)]);
    let claims = vec![Arc::new(Claim::from_api(&serde_json::from_value(claim).expect("claim")).expect("claim"))];
    let labels = Labels::new();
    let off = Features { device_taints: false, ..Features::default() };
    let allocated = |f: Features| matches!(allocate(&st, "node-1", &labels, &claims, f), Ok(Outcome::Allocated(_)));
    assert!(allocated(off));
    assert!(!allocated(Features::default()));
}

#[test]
fn devices_with_binding_conditions_are_allocated_with_them_when_the_gates_are_on() {
    let mut st = DraState::default();
    let class = class("class-a", "driver-a");
    st.upsert_class(DeviceClass::from_api(&serde_json::from_value(class).expect("class")).expect("class"));
    let attached =
        json!({"name": "device-1", "bindingConditions": ["Attached"], "bindingFailureConditions": ["Failed"]});
    let s = slice("slice-1", on("node-1"), "pool-1", "driver-a", vec![attached]);
    st.upsert_slice(Slice::from_api(&serde_json::from_value(s).expect("slice")).expect("slice"));
    let claim = claim("claim-0", vec![exact("req-0", "class-a", 1)]);
    let claims = vec![Arc::new(Claim::from_api(&serde_json::from_value(claim).expect("claim")).expect("claim"))];
    let labels = Labels::new();
    let Ok(Outcome::Allocated(a)) = allocate(&st, "node-1", &labels, &claims, Features::default()) else {
        panic!("not allocated with the gates on");
    };
    let result = &a[0].devices.as_ref().and_then(|d| d.results.clone()).unwrap_or_default()[0];
    assert_eq!(result.binding_conditions, Some(vec!["Attached".to_string()]));
    assert_eq!(result.binding_failure_conditions, Some(vec!["Failed".to_string()]));
    let off = Features { binding_conditions: false, ..Features::default() };
    assert!(matches!(allocate(&st, "node-1", &labels, &claims, off), Ok(Outcome::Unschedulable(None))));
}

/// A slice publishing counter sets (`sets`: set name to counters and values).
fn counters(name: &str, node: Value, pool: &str, count: i64, sets: Value) -> Value {
    let sets: Vec<Value> = sets
        .as_object()
        .into_iter()
        .flatten()
        .map(|(set, values)| {
            let values: serde_json::Map<String, Value> =
                values.as_object().into_iter().flatten().map(|(k, v)| (k.clone(), json!({"value": v}))).collect();
            json!({"name": set, "counters": values})
        })
        .collect();
    let s = sliced(name, node, pool, "driver-a", 1, count, Vec::new());
    let mut s = with(s, &["spec", "sharedCounters"], Value::Array(sets));
    if let Some(spec) = s["spec"].as_object_mut() {
        spec.remove("devices");
    }
    s
}

/// A device consuming counters (`uses`: set name to counters and amounts).
fn part(name: &str, uses: Value) -> Value {
    let uses: Vec<Value> = uses
        .as_object()
        .into_iter()
        .flatten()
        .map(|(set, values)| {
            let values: serde_json::Map<String, Value> =
                values.as_object().into_iter().flatten().map(|(k, v)| (k.clone(), json!({"value": v}))).collect();
            json!({"counterSet": set, "counters": values})
        })
        .collect();
    json!({"name": name, "consumesCounters": uses})
}

mod choices;
mod consumable;
mod partitionable;
mod search;

/// Filter's answers are remembered from one pod to the next (pods from one template ask
/// the same): an answer holds only while nobody takes or frees a device of the node's
/// pools, in whichever copy of the state, and only for claims of the same shape.
#[test]
fn a_remembered_answer_ends_when_the_nodes_devices_change_hands() {
    let parse = |v: Value| Claim::from_api(&serde_json::from_value(v).expect("claim")).expect("parse");
    let mut st = DraState::default();
    st.upsert_class(
        DeviceClass::from_api(&serde_json::from_value(class("class-a", "driver-a")).expect("class")).expect("parse"),
    );
    let s = slice("slice-1", on("node-1"), "pool-1", "driver-a", vec![device("device-1")]);
    st.upsert_slice(Slice::from_api(&serde_json::from_value(s).expect("slice")).expect("parse"));
    let labels = Labels::default();
    let fits = |st: &DraState, name: &str| {
        let claims = vec![Arc::new(parse(claim(name, vec![exact("req-0", "class-a", 1)])))];
        let plan = plan(st, &claims, Features::default()).expect("plan");
        match fits_planned(st, "node-1", &labels, &claims, &plan).expect("no error") {
            Outcome::Allocated(_) => true,
            Outcome::Unschedulable(None) => false,
            other => panic!("{other:?}"),
        }
    };
    let held = |name: &str| {
        parse(json!({"metadata": {"name": name, "namespace": "default", "resourceVersion": "1"}, "spec": {},
            "status": {"allocation": {"devices": {"results": [
                {"request": "r", "driver": "driver-a", "pool": "pool-1", "device": "device-1"}]}}}}))
    };
    assert!(fits(&st, "claim-0"));
    assert!(fits(&st, "claim-1"), "the same shape, remembered");
    st.upsert_claim(held("held-0"));
    assert!(!fits(&st, "claim-2"), "the device was taken");
    st.remove_claim("default/held-0");
    assert!(fits(&st, "claim-3"), "and freed again");
    // A copy of the state shares the remembered answers, not the holders.
    let mut copy = st.clone();
    copy.assume(Arc::new(held("assumed-0")));
    assert!(!fits(&copy, "claim-4"));
    assert!(fits(&st, "claim-5"), "the original still has the device free");
    assert!(!fits(&copy, "claim-6"));
    // Another shape is searched afresh: two devices do not fit where one does.
    let two = vec![Arc::new(parse(claim("claim-7", vec![exact("req-0", "class-a", 2)])))];
    let p = plan(&st, &two, Features::default()).expect("plan");
    assert_eq!(fits_planned(&st, "node-1", &labels, &two, &p), Ok(Outcome::Unschedulable(None)));
    // So is the same request once its class selects other devices.
    st.upsert_class(
        DeviceClass::from_api(&serde_json::from_value(class("class-a", "driver-b")).expect("class")).expect("parse"),
    );
    assert!(!fits(&st, "claim-8"));
}

/// Only a change of who holds a pool's devices gives the pool a new stamp: a new version
/// of a claim holding the same devices (its finalizer, a consumer added) keeps the
/// answers remembered for the nodes reaching the pool.
#[test]
fn a_claims_new_version_holding_the_same_devices_keeps_the_pool_stamp() {
    let version = |rv: &str, consumer: bool| {
        let mut c = json!({"metadata": {"name": "c", "namespace": "default", "resourceVersion": rv}, "spec": {},
            "status": {"allocation": {"devices": {"results": [{"request": "r", "driver": "d", "pool": "p", "device": "x"}]}}}});
        if consumer {
            c["status"]["reservedFor"] = json!([{"resource": "pods", "name": "a", "uid": "uid-a"}]);
        }
        Claim::from_api(&serde_json::from_value(c).expect("claim")).expect("parse")
    };
    let id = DeviceId::new("d", "p", "x");
    let mut st = DraState::default();
    assert_eq!(st.pool_stamp(id.pool_key()), 0);
    st.upsert_claim(version("1", false));
    let stamp = st.pool_stamp(id.pool_key());
    assert_ne!(stamp, 0);
    st.upsert_claim(version("2", true));
    assert_eq!(st.pool_stamp(id.pool_key()), stamp);
    assert_eq!(st.holders(&id), 1);
    st.remove_claim("default/c");
    assert_ne!(st.pool_stamp(id.pool_key()), stamp);
    assert_eq!(st.holders(&id), 0);
}
