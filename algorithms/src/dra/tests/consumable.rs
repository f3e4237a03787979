//! Consumable capacity (`DRAConsumableCapacity`): devices allowing multiple allocations
//! shared by claims while their capacity lasts, after kube-scheduler's allocator cases
//! (driver-a's pool-1 on node-1; capacities named capacity-0 and capacity-1).

use serde_json::{Value, json};

use super::*;

/// class-a, asking for devices that allow multiple allocations (or that do not).
fn multi_class(multi: bool) -> Value {
    json!({"metadata": {"name": "class-a"}, "spec": {"selectors": [{"cel": {"expression":
        format!("device.driver == \"driver-a\" && device.allowMultipleAllocations == {multi}")}}]}})
}

/// A device allowing multiple allocations with capacities (name to value and policy).
fn shared(name: &str, capacity: Value) -> Value {
    json!({"name": name, "allowMultipleAllocations": true, "capacity": capacity})
}

fn cap(value: &str) -> Value {
    json!({"value": value})
}

/// A capacity with the range policy of the upstream cases: default 2, min 2, step 2, max 4.
fn ranged(value: &str) -> Value {
    json!({"value": value, "requestPolicy": {"default": "2", "validRange": {"min": "2", "step": "2", "max": "4"}}})
}

fn valid_values(value: &str, default: &str, values: &[&str]) -> Value {
    json!({"value": value, "requestPolicy": {"default": default, "validValues": values}})
}

/// A request for one device of class-a asking for `amount` of capacity-0.
fn asking(name: &str, amount: &str) -> Value {
    with(exact(name, "class-a", 1), &["exactly", "capacity"], json!({"requests": {"capacity-0": amount}}))
}

fn one_slice(devices: Vec<Value>) -> Vec<Value> {
    vec![slice("slice-1", on("node-1"), "pool-1", "driver-a", devices)]
}

/// Each claim's results as `request=device{name=amount,…}`, `+` marking a share (a
/// result with a share ID, checked to be a version 4 UUID).
fn shares(case: Case) -> Result<Option<Vec<Vec<String>>>, String> {
    let got = run_full(case)?;
    Ok(got.map(|all| {
        all.iter()
            .map(|a| {
                let results = a.devices.as_ref().and_then(|d| d.results.clone()).unwrap_or_default();
                results
                    .iter()
                    .map(|r| {
                        let share = r.share_id.as_ref().map_or("", |id| {
                            assert_eq!(id.len(), 36, "{id}");
                            assert_eq!(&id[14..15], "4", "{id} is not a version 4 UUID");
                            "+"
                        });
                        let consumed: Vec<String> =
                            r.consumed_capacity.iter().flatten().map(|(k, v)| format!("{k}={}", v.0)).collect();
                        let consumed =
                            if consumed.is_empty() { String::new() } else { format!("{{{}}}", consumed.join(",")) };
                        format!("{}={}{share}{consumed}", r.request, r.device)
                    })
                    .collect()
            })
            .collect()
    }))
}

fn claims_asking(amounts: &[Option<&str>]) -> Vec<Value> {
    amounts
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let request = a.map_or_else(|| exact("req-0", "class-a", 1), |a| asking("req-0", a));
            claim(&format!("claim-{i}"), vec![request])
        })
        .collect()
}

fn each(list: &[&[&str]]) -> Option<Vec<Vec<String>>> {
    Some(list.iter().map(|c| c.iter().map(|s| s.to_string()).collect()).collect())
}

#[test]
fn kube_scheduler_consumable_capacity_cases() {
    let multi = || vec![multi_class(true)];
    let cases: Vec<(&str, Case, Result<Option<Vec<Vec<String>>>, String>)> = vec![
        (
            "a device with no capacity is shared by two claims",
            Case {
                classes: multi(),
                slices: one_slice(vec![json!({"name": "device-1", "allowMultipleAllocations": true})]),
                claims: claims_asking(&[None, None]),
                ..Default::default()
            },
            Ok(each(&[&["req-0=device-1+"], &["req-0=device-1+"]])),
        ),
        (
            "asking nothing takes the whole capacity without a policy",
            Case {
                classes: multi(),
                slices: one_slice(vec![
                    shared("device-1", json!({"capacity-0": cap("1")})),
                    shared("device-2", json!({"capacity-0": cap("1")})),
                ]),
                claims: claims_asking(&[None, None]),
                ..Default::default()
            },
            Ok(each(&[&["req-0=device-1+{capacity-0=1}"], &["req-0=device-2+{capacity-0=1}"]])),
        ),
        (
            "the whole capacity once only",
            Case {
                classes: multi(),
                slices: one_slice(vec![shared("device-1", json!({"capacity-0": cap("2")}))]),
                claims: claims_asking(&[None, None]),
                ..Default::default()
            },
            Ok(None),
        ),
        (
            "two requests of 1 share a capacity of 2",
            Case {
                classes: multi(),
                slices: one_slice(vec![shared("device-1", json!({"capacity-0": cap("2")}))]),
                claims: claims_asking(&[Some("1"), Some("1")]),
                ..Default::default()
            },
            Ok(each(&[&["req-0=device-1+{capacity-0=1}"], &["req-0=device-1+{capacity-0=1}"]])),
        ),
        (
            "asking nothing takes the policy's default",
            Case {
                classes: multi(),
                slices: one_slice(vec![shared("device-1", json!({"capacity-0": ranged("4")}))]),
                claims: claims_asking(&[None, None]),
                ..Default::default()
            },
            Ok(each(&[&["req-0=device-1+{capacity-0=2}"], &["req-0=device-1+{capacity-0=2}"]])),
        ),
        (
            "a zero default",
            Case {
                classes: multi(),
                slices: one_slice(vec![shared("device-1", json!({"capacity-0": valid_values("1", "0", &["0"])}))]),
                claims: claims_asking(&[None, None]),
                ..Default::default()
            },
            Ok(each(&[&["req-0=device-1+{capacity-0=0}"], &["req-0=device-1+{capacity-0=0}"]])),
        ),
        (
            "a request off the valid values",
            Case {
                classes: multi(),
                slices: one_slice(vec![shared("device-1", json!({"capacity-0": valid_values("1", "0", &["0"])}))]),
                claims: claims_asking(&[Some("1")]),
                ..Default::default()
            },
            Ok(None),
        ),
        (
            "a request below the range's minimum takes the minimum",
            Case {
                classes: multi(),
                slices: one_slice(vec![shared("device-1", json!({"capacity-0": ranged("4")}))]),
                claims: claims_asking(&[Some("1"), Some("1")]),
                ..Default::default()
            },
            Ok(each(&[&["req-0=device-1+{capacity-0=2}"], &["req-0=device-1+{capacity-0=2}"]])),
        ),
        (
            "a request rounds up to the next step",
            Case {
                classes: multi(),
                slices: one_slice(vec![shared("device-1", json!({"capacity-0": ranged("4")}))]),
                claims: claims_asking(&[Some("3")]),
                ..Default::default()
            },
            Ok(each(&[&["req-0=device-1+{capacity-0=4}"]])),
        ),
        (
            "a valid value",
            Case {
                classes: multi(),
                slices: one_slice(vec![shared("device-1", json!({"capacity-0": valid_values("4", "1", &["2"])}))]),
                claims: claims_asking(&[Some("2")]),
                ..Default::default()
            },
            Ok(each(&[&["req-0=device-1+{capacity-0=2}"]])),
        ),
        (
            "a request rounds up to the next valid value",
            Case {
                classes: multi(),
                slices: one_slice(vec![shared("device-1", json!({"capacity-0": valid_values("3", "1", &["3"])}))]),
                claims: claims_asking(&[Some("2")]),
                ..Default::default()
            },
            Ok(each(&[&["req-0=device-1+{capacity-0=3}"]])),
        ),
        (
            "rounded requests beyond the capacity",
            Case {
                classes: multi(),
                slices: one_slice(vec![shared("device-1", json!({"capacity-0": ranged("2")}))]),
                claims: claims_asking(&[Some("1"), Some("2")]),
                ..Default::default()
            },
            Ok(None),
        ),
        (
            "a request over the range's maximum",
            Case {
                classes: multi(),
                slices: one_slice(vec![shared("device-1", json!({"capacity-0": ranged("10")}))]),
                claims: claims_asking(&[Some("6")]),
                ..Default::default()
            },
            Ok(None),
        ),
        (
            "what allocated shares leave",
            Case {
                classes: multi(),
                slices: one_slice(vec![shared("device-1", json!({"capacity-0": ranged("4")}))]),
                shared: vec![("device-1", json!({"capacity-0": "2"}))],
                claims: claims_asking(&[Some("2")]),
                ..Default::default()
            },
            Ok(each(&[&["req-0=device-1+{capacity-0=2}"]])),
        ),
        (
            "the next device when allocated shares fill the first",
            Case {
                classes: multi(),
                slices: one_slice(vec![
                    shared("device-1", json!({"capacity-0": ranged("2")})),
                    shared("device-2", json!({"capacity-0": ranged("2")})),
                ]),
                shared: vec![("device-1", json!({"capacity-0": "2"}))],
                claims: claims_asking(&[Some("2")]),
                ..Default::default()
            },
            Ok(each(&[&["req-0=device-2+{capacity-0=2}"]])),
        ),
        (
            "a device without the capacity asked for",
            Case {
                classes: vec![class("class-a", "driver-a")],
                slices: one_slice(vec![shared("device-1", json!({"capacity-1": cap("1")}))]),
                claims: claims_asking(&[Some("1")]),
                ..Default::default()
            },
            Ok(None),
        ),
        (
            "a dedicated device asked for capacity it has",
            Case {
                classes: vec![multi_class(false)],
                slices: one_slice(vec![json!({"name": "device-1", "capacity": {"capacity-0": cap("1")}})]),
                claims: claims_asking(&[Some("1")]),
                ..Default::default()
            },
            Ok(each(&[&["req-0=device-1"]])),
        ),
        (
            "a dedicated device serves one claim",
            Case {
                classes: vec![multi_class(false)],
                slices: one_slice(vec![json!({"name": "device-1", "capacity": {"capacity-0": ranged("2")}})]),
                claims: claims_asking(&[Some("1"), Some("1")]),
                ..Default::default()
            },
            Ok(None),
        ),
        (
            "the class excludes shared devices",
            Case {
                classes: vec![multi_class(false)],
                slices: one_slice(vec![shared("device-1", json!({"capacity-0": cap("1")}))]),
                claims: claims_asking(&[Some("1")]),
                ..Default::default()
            },
            Ok(None),
        ),
        (
            "a shared device allocated whole before keeps out shares",
            Case {
                classes: multi(),
                slices: one_slice(vec![shared("device-1", json!({"capacity-0": cap("2")}))]),
                allocated: vec![("driver-a", "pool-1", "device-1")],
                claims: claims_asking(&[Some("1")]),
                ..Default::default()
            },
            Ok(None),
        ),
    ];
    for (name, case, want) in cases {
        assert_eq!(shares(case), want, "{name}");
    }
}

#[test]
fn one_claim_shares_a_device_across_requests_and_backs_up_to_do_so() {
    // Two requests of one claim must match an attribute: the first device (value1,
    // room for 2) cannot hold both, so the search backs up to the second (value2, room
    // for 4), which serves both; the next claim then gets the first.
    let dev = |name: &str, value: &str, room: &str| {
        json!({"name": name, "allowMultipleAllocations": true, "attributes": {"stringAttribute": {"string": value}},
            "capacity": {"capacity-0": cap(room)}})
    };
    let c = Case {
        slices: one_slice(vec![dev("device-2", "value1", "2"), dev("device-1", "value2", "4")]),
        claims: vec![
            with(
                claim("claim-0", vec![asking("req-0", "2"), asking("req-1", "2")]),
                &["spec", "devices", "constraints"],
                json!([{"requests": ["req-0", "req-1"], "matchAttribute": "driver-a/stringAttribute"}]),
            ),
            claim("claim-1", vec![asking("req-0", "2")]),
        ],
        ..Default::default()
    };
    assert_eq!(
        shares(c),
        Ok(each(&[
            &["req-0=device-1+{capacity-0=2}", "req-1=device-1+{capacity-0=2}"],
            &["req-0=device-2+{capacity-0=2}"]
        ]))
    );
}

#[test]
fn all_mode_takes_the_devices_with_room() {
    let c = |devices: Vec<Value>, requests: Vec<Value>, shared: Vec<(&'static str, Value)>| Case {
        slices: one_slice(devices),
        claims: claim0(requests),
        shared,
        ..Default::default()
    };
    let all_asking = |amount: &str| {
        with(all("req-1", "class-a"), &["exactly", "capacity"], json!({"requests": {"capacity-0": amount}}))
    };
    let dev = |name: &str, capacity: Value| shared(name, capacity);
    // A device without the capacity, or without room for it, is not wanted.
    assert_eq!(
        shares(c(
            vec![dev("device-1", json!({"capacity-0": cap("2")})), dev("device-2", json!({}))],
            vec![all_asking("2")],
            vec![]
        )),
        Ok(each(&[&["req-1=device-1+{capacity-0=2}"]]))
    );
    assert_eq!(
        shares(c(
            vec![dev("device-1", json!({"capacity-0": cap("2")})), dev("device-2", json!({"capacity-0": cap("1")}))],
            vec![all_asking("2")],
            vec![]
        )),
        Ok(each(&[&["req-1=device-1+{capacity-0=2}"]]))
    );
    // A request before it in the same claim may share a device with it while room lasts.
    let two =
        || vec![dev("device-1", json!({"capacity-0": cap("2")})), dev("device-2", json!({"capacity-0": cap("1")}))];
    assert_eq!(
        shares(c(two(), vec![asking("req-0", "1"), all_asking("1")], vec![])),
        Ok(each(&[&[
            "req-0=device-1+{capacity-0=1}",
            "req-1=device-1+{capacity-0=1}",
            "req-1=device-2+{capacity-0=1}"
        ]]))
    );
    let small =
        || vec![dev("device-1", json!({"capacity-0": cap("1")})), dev("device-2", json!({"capacity-0": cap("1")}))];
    assert_eq!(shares(c(small(), vec![asking("req-0", "1"), all_asking("1")], vec![])), Ok(None));
    // Allocated shares leave room or not.
    assert_eq!(
        shares(c(two(), vec![all_asking("1")], vec![("device-1", json!({"capacity-0": "1"}))])),
        Ok(each(&[&["req-1=device-1+{capacity-0=1}", "req-1=device-2+{capacity-0=1}"]]))
    );
    assert_eq!(
        shares(c(small(), vec![all_asking("1")], vec![("device-1", json!({"capacity-0": "1"}))])),
        Ok(each(&[&["req-1=device-2+{capacity-0=1}"]]))
    );
}

#[test]
fn distinct_attributes_keep_devices_apart() {
    let dev = |name: &str, numa: i64| json!({"name": name, "attributes": {"numa": {"int": numa}}});
    let c = |devices: Vec<Value>| Case {
        slices: one_slice(devices),
        claims: vec![with(
            claim("claim-0", vec![exact("req-0", "class-a", 1), exact("req-1", "class-a", 1)]),
            &["spec", "devices", "constraints"],
            json!([{"distinctAttribute": "driver-a/numa"}]),
        )],
        ..Default::default()
    };
    assert_eq!(
        shares(c(vec![dev("device-1", 0), dev("device-2", 0), dev("device-3", 1)])),
        Ok(each(&[&["req-0=device-1", "req-1=device-3"]]))
    );
    assert_eq!(shares(c(vec![dev("device-1", 0), dev("device-2", 0)])), Ok(None));
    // A device without the attribute never satisfies it.
    assert_eq!(shares(c(vec![dev("device-1", 0), device("device-2")])), Ok(None));
    // Two requests sharing one device is not distinct either.
    let one = Case {
        slices: one_slice(vec![shared("device-1", json!({"capacity-0": cap("4")}))]),
        claims: vec![with(
            claim("claim-0", vec![asking("req-0", "1"), asking("req-1", "1")]),
            &["spec", "devices", "constraints"],
            json!([{"distinctAttribute": "driver-a/numa"}]),
        )],
        ..Default::default()
    };
    assert_eq!(shares(one), Ok(None));
}

#[test]
fn shared_partitions_charge_their_counters_once() {
    // Shared partitions of one 8Gi GPU: a share of device-1 charges its 4Gi; a second
    // share of it charges nothing more.
    let part = |name: &str, memory: &str| {
        json!({"name": name, "allowMultipleAllocations": true, "capacity": {"memory": cap(memory)},
            "consumesCounters": [{"counterSet": "gpu", "counters": {"memory": {"value": memory}}}]})
    };
    let c = |claims: Vec<Value>| Case {
        slices: vec![
            with(
                sliced("slice-0", on("node-1"), "pool-1", "driver-a", 1, 2, Vec::new()),
                &["spec", "sharedCounters"],
                json!([{"name": "gpu", "counters": {"memory": {"value": "8Gi"}}}]),
            ),
            sliced(
                "slice-1",
                on("node-1"),
                "pool-1",
                "driver-a",
                1,
                2,
                vec![part("device-1", "4Gi"), part("device-2", "6Gi")],
            ),
        ],
        claims,
        ..Default::default()
    };
    let ask =
        |name: &str| with(exact(name, "class-a", 1), &["exactly", "capacity"], json!({"requests": {"memory": "1Gi"}}));
    let got = shares(c(vec![claim("claim-0", vec![ask("req-0")]), claim("claim-1", vec![ask("req-0")])]));
    assert_eq!(got, Ok(each(&[&["req-0=device-1+{memory=1Gi}"], &["req-0=device-1+{memory=1Gi}"]])));
}

#[test]
fn without_the_gate_capacity_requests_are_an_error_and_devices_are_whole() {
    let off = Features { consumable_capacity: false, ..Features::default() };
    let base = |claims| Case {
        slices: one_slice(vec![shared("device-1", json!({"capacity-0": cap("2")}))]),
        claims,
        features: off,
        ..Default::default()
    };
    assert_eq!(
        shares(base(claims_asking(&[Some("1")]))),
        Err("claim default/claim-0, request req-0: has capacity requests, but the DRAConsumableCapacity feature is disabled".into())
    );
    let sub = claim0(vec![first_available(
        "req-0",
        vec![with(sub("subReq-0", "class-a", 1), &["capacity"], json!({"requests": {"capacity-0": "1"}}))],
    )]);
    assert_eq!(
        shares(base(sub)),
        Err("claim default/claim-0, subrequest subReq-0: has capacity requests, but the DRAConsumableCapacity feature is disabled".into())
    );
    // The device is allocated whole, once, with no share.
    assert_eq!(shares(base(claims_asking(&[None, None]))), Ok(None));
    assert_eq!(shares(base(claims_asking(&[None]))), Ok(each(&[&["req-0=device-1"]])));
}

/// kube-scheduler's remaining consumable-capacity cases: All with a capacity no device
/// has, a share through a sub-request, capacity already spent, a device that no longer
/// allows multiple allocations, and shares of partitionable devices.
#[test]
fn kube_scheduler_consumable_capacity_cases_with_lists_and_counters() {
    let multi = || vec![multi_class(true)];
    let asking_of = |r: Value, amount: &str| with(r, &["capacity"], json!({"requests": {"capacity-0": amount}}));
    let sub_asking = |name: &str, amount: Option<&str>| {
        let s = sub(name, "class-a", 1);
        match amount {
            Some(a) => asking_of(s, a),
            None => s,
        }
    };
    // A partition allowing multiple allocations, with its capacities and more fields.
    let part = |name: &str, uses: Value, capacity: Value, extra: Value| {
        let mut d = with(with(part(name, uses), &["allowMultipleAllocations"], json!(true)), &["capacity"], capacity);
        if let (Some(d), Some(x)) = (d.as_object_mut(), extra.as_object()) {
            d.extend(x.clone());
        }
        d
    };
    let counter_slice = |sets: Value| counters("slice-2", on("node-1"), "pool-1", 2, sets);
    let mem = |q: &str| json!({"counter-set-1": {"memory": q}});
    let cases: Vec<(&str, Case, Result<Option<Vec<Vec<String>>>, String>)> = vec![
        (
            "consumable-capacity-multi-allocatable-device-allocation-mode-all-with-missing-capacity-request",
            Case {
                classes: multi(),
                slices: one_slice(vec![shared("device-1", json!({"capacity-1": cap("1")}))]),
                claims: claim0(vec![with(all("req-0", "class-a"), &["exactly", "capacity"], json!({"requests": {"capacity-0": "1"}}))]),
                ..Default::default()
            },
            Ok(None),
        ),
        (
            "consumable-capacity-multi-allocatable-device-with-subrequest",
            Case {
                classes: multi(),
                slices: one_slice(vec![shared("device-1", json!({"capacity-0": ranged("2")}))]),
                claims: claim0(vec![first_available(
                    "req-0",
                    vec![sub_asking("subReq-0", Some("4")), sub_asking("subReq-1", Some("2")), sub_asking("subReq-2", None)],
                )]),
                ..Default::default()
            },
            Ok(each(&[&["req-0/subReq-1=device-1+{capacity-0=2}"]])),
        ),
        (
            "consumable-capacity-multi-allocatable-device-with-no-available-consumable-capacity",
            Case {
                classes: multi(),
                slices: one_slice(vec![shared("device-1", json!({"capacity-0": ranged("2")}))]),
                shared: vec![("device-1", json!({"capacity-0": "2"}))],
                claims: claim0(vec![asking("req-0", "2")]),
                ..Default::default()
            },
            Ok(None),
        ),
        (
            "allow-multiple-allocations-not-allocate-dedicated-device-which-change-from-multi-allocatable",
            Case {
                classes: multi(),
                slices: one_slice(vec![json!({"name": "device-1", "capacity": {"capacity-0": ranged("2")}})]),
                shared: vec![("device-1", json!({"capacity-0": "1"}))],
                claims: claim0(vec![asking("req-0", "1")]),
                ..Default::default()
            },
            Ok(None),
        ),
        (
            "allow-multiple-allocations-with-partitionable-device",
            Case {
                classes: multi(),
                slices: vec![
                    sliced(
                        "slice-1",
                        on("node-1"),
                        "pool-1",
                        "driver-a",
                        1,
                        2,
                        vec![
                            part("device-1", mem("4Gi"), json!({"memory": cap("4Gi")}), json!({})),
                            part("device-2", mem("6Gi"), json!({"memory": cap("6Gi")}), json!({})),
                            part("device-3", mem("4Gi"), json!({"memory": cap("4Gi")}), json!({})),
                        ],
                    ),
                    counter_slice(json!({"counter-set-1": {"memory": "8Gi"}})),
                ],
                claims: claim0(vec![
                    exact("req-0", "class-a", 1),
                    first_available(
                        "req-1",
                        ["6Gi", "4Gi"]
                            .iter()
                            .enumerate()
                            .map(|(i, q)| {
                                with(
                                    sub(&format!("subReq-{i}"), "class-a", 1),
                                    &["selectors"],
                                    json!([{"cel": {"expression": format!("device.capacity[\"driver-a\"].memory.compareTo(quantity(\"{q}\")) >= 0")}}]),
                                )
                            })
                            .collect(),
                    ),
                ]),
                ..Default::default()
            },
            Ok(each(&[&["req-0=device-1+{memory=4Gi}", "req-1/subReq-1=device-3+{memory=4Gi}"]])),
        ),
        (
            "allow-multiple-allocations-with-shared-device-counter-cross-cycle",
            Case {
                classes: multi(),
                slices: vec![
                    sliced(
                        "slice-1",
                        on("node-1"),
                        "pool-1",
                        "driver-a",
                        1,
                        2,
                        ["a", "b"]
                            .iter()
                            .enumerate()
                            .map(|(i, m)| {
                                part(
                                    &format!("device-{}", i + 1),
                                    json!({"counter-set-1": {"capacity-0": "1"}}),
                                    json!({"capacity-0": cap("1")}),
                                    json!({"attributes": {"mode": {"string": m}}}),
                                )
                            })
                            .collect(),
                    ),
                    counter_slice(json!({"counter-set-1": {"capacity-0": "1"}})),
                ],
                shared: vec![("device-1", json!({"capacity-0": "1"}))],
                claims: claim0(vec![with(
                    asking("req-0", "1"),
                    &["exactly", "selectors"],
                    json!([{"cel": {"expression": "device.attributes[\"driver-a\"].mode == \"b\""}}]),
                )]),
                ..Default::default()
            },
            Ok(None),
        ),
    ];
    for (name, case, want) in cases {
        assert_eq!(shares(case), want, "{name}");
    }
}
