//! kube-scheduler's allocator cases on what a request may choose: prioritized lists
//! (`firstAvailable`, with selectors, constraints, All mode and the claim limit), device
//! taints with their tolerations copied into the results, matchAttribute and
//! distinctAttribute constraints, and binding conditions carried per device.

use serde_json::{Value, json};

use super::*;

type Want = Result<Option<Vec<Vec<String>>>, String>;

fn memory(name: &str, q: &str) -> Value {
    json!({"name": name, "capacity": {"memory": {"value": q}}})
}

fn at_least(request: Value, q: &str) -> Value {
    let at = if request.get("exactly").is_some() { &["exactly", "selectors"][..] } else { &["selectors"][..] };
    let expression = format!("device.capacity[\"driver-a\"].memory.compareTo(quantity(\"{q}\")) >= 0");
    with(request, at, json!([{"cel": {"expression": expression}}]))
}

fn selecting(request: Value, expression: &str) -> Value {
    let at = if request.get("exactly").is_some() { &["exactly", "selectors"][..] } else { &["selectors"][..] };
    with(request, at, json!([{"cel": {"expression": expression}}]))
}

fn all_sub(name: &str, class: &str) -> Value {
    json!({"name": name, "deviceClassName": class, "allocationMode": "All"})
}

fn constraints(c: Value, list: Value) -> Value {
    with(c, &["spec", "devices", "constraints"], list)
}

fn generation(name: &str, g: &str) -> Value {
    json!({"name": name, "attributes": {"generation": {"string": g}}})
}

fn sorted(got: Want) -> Want {
    got.map(|o| {
        o.map(|mut all| {
            all.iter_mut().for_each(|c| c.sort());
            all
        })
    })
}

fn names(prefix: &str, range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("{prefix}device-{i}")).collect()
}

#[test]
fn kube_scheduler_prioritized_list_cases() {
    let pools_8_and_4 = || {
        vec![
            slice("slice-1", on("node-1"), "pool-1", "driver-a", vec![memory("device-1", "8Gi")]),
            slice("slice-2", on("node-1"), "pool-2", "driver-a", vec![memory("device-2", "4Gi")]),
        ]
    };
    let choose_8_or_4 = || {
        first_available(
            "req-0",
            vec![at_least(sub("subReq-0", "class-a", 1), "8Gi"), at_least(sub("subReq-1", "class-a", 1), "4Gi")],
        )
    };
    let all_or_b = || first_available("req-0", vec![all_sub("subReq-0", "class-a"), sub("subReq-1", "class-b", 1)]);
    let all_or_one =
        |name: &str| first_available(name, vec![all_sub("subReq-0", "class-a"), sub("subReq-1", "class-a", 1)]);
    let b_device = || slice("slice-2", on("node-1"), "pool-2", "driver-b", vec![device("device-1")]);
    let v5_or_v6 = || {
        first_available(
            "req-0",
            vec![
                selecting(all_sub("subReq-0", "class-a"), "device.attributes[\"driver-a\"].generation == \"v6\""),
                selecting(all_sub("subReq-1", "class-a"), "device.attributes[\"driver-a\"].generation == \"v5\""),
            ],
        )
    };
    let version_constraint = |requests: Value| {
        constraints(
            claim(
                "claim-0",
                vec![
                    at_least(exact("req-0", "class-a", 1), "8Gi"),
                    first_available(
                        "req-1",
                        vec![
                            at_least(sub("subReq-0", "class-a", 1), "2Gi"),
                            at_least(sub("subReq-1", "class-a", 1), "1Gi"),
                        ],
                    ),
                ],
            ),
            json!([{"requests": requests, "matchAttribute": "driver-a/driverVersion"}]),
        )
    };
    let versioned =
        |name: &str, q: &str, v: &str| with(memory(name, q), &["attributes"], json!({"driverVersion": {"version": v}}));
    let cases: Vec<(&str, Case, Want)> = vec![
        (
            "prioritized-list-subrequests-with-expressions",
            Case {
                slices: vec![slice(
                    "slice-1",
                    on("node-1"),
                    "pool-1",
                    "driver-a",
                    vec![memory("device-1", "2Gi"), memory("device-2", "2Gi"), memory("device-3", "1Gi")],
                )],
                claims: claim0(vec![
                    at_least(exact("req-0", "class-a", 1), "1Gi"),
                    first_available("req-1", vec![at_least(sub("subReq-0", "class-a", 1), "4Gi"), at_least(sub("subReq-1", "class-a", 2), "2Gi")]),
                ]),
                ..Default::default()
            },
            Ok(one(&["req-0=driver-a/pool-1/device-3", "req-1/subReq-1=driver-a/pool-1/device-1", "req-1/subReq-1=driver-a/pool-1/device-2"])),
        ),
        (
            "prioritized-list-subrequests-with-constraints-ref-parent-request",
            Case {
                slices: vec![
                    slice("slice-1", on("node-1"), "pool-1", "driver-a", vec![versioned("device-1", "8Gi", "1.0.0")]),
                    slice(
                        "slice-2",
                        on("node-1"),
                        "pool-2",
                        "driver-a",
                        vec![versioned("device-2", "2Gi", "2.0.0"), versioned("device-3", "1Gi", "1.0.0")],
                    ),
                ],
                claims: vec![version_constraint(json!(["req-0", "req-1"]))],
                ..Default::default()
            },
            Ok(one(&["req-0=driver-a/pool-1/device-1", "req-1/subReq-1=driver-a/pool-2/device-3"])),
        ),
        (
            // The constraint names sub-request 0 only: sub-request 1 is free of it.
            "prioritized-list-subrequests-with-constraints-ref-sub-request",
            Case {
                slices: vec![
                    slice("slice-1", on("node-1"), "pool-1", "driver-a", vec![versioned("device-1", "8Gi", "1.0.0")]),
                    slice("slice-2", on("node-1"), "pool-2", "driver-a", vec![versioned("device-2", "2Gi", "2.0.0")]),
                ],
                claims: vec![version_constraint(json!(["req-0", "req-1/subReq-0"]))],
                ..Default::default()
            },
            Ok(one(&["req-0=driver-a/pool-1/device-1", "req-1/subReq-1=driver-a/pool-2/device-2"])),
        ),
        (
            "prioritized-list-subrequests-with-allocation-mode-all",
            Case {
                slices: vec![slice("slice-1", on("node-1"), "pool-1", "driver-a", vec![device("device-1"), device("device-2")])],
                allocated: vec![("driver-a", "pool-1", "device-1")],
                claims: claim0(vec![all_or_one("req-0")]),
                ..Default::default()
            },
            Ok(one(&["req-0/subReq-1=driver-a/pool-1/device-2"])),
        ),
        (
            "prioritized-list-allocation-mode-all-multiple-requests",
            Case {
                slices: vec![slice("slice-1", on("node-1"), "pool-1", "driver-a", vec![device("device-1"), device("device-2")])],
                claims: claim0(vec![exact("req-0", "class-a", 1), all_or_one("req-1")]),
                ..Default::default()
            },
            Ok(one(&["req-0=driver-a/pool-1/device-1", "req-1/subReq-1=driver-a/pool-1/device-2"])),
        ),
        (
            "prioritized-list-multi-request",
            Case {
                slices: pools_8_and_4(),
                claims: claim0(vec![at_least(exact("req-1", "class-a", 1), "8Gi"), choose_8_or_4()]),
                ..Default::default()
            },
            Ok(one(&["req-0/subReq-1=driver-a/pool-2/device-2", "req-1=driver-a/pool-1/device-1"])),
        ),
        (
            "prioritized-list-with-backtracking",
            Case {
                slices: pools_8_and_4(),
                claims: claim0(vec![choose_8_or_4(), at_least(exact("req-1", "class-a", 1), "8Gi")]),
                ..Default::default()
            },
            Ok(one(&["req-0/subReq-1=driver-a/pool-2/device-2", "req-1=driver-a/pool-1/device-1"])),
        ),
        (
            "all-devices-slice-without-devices-prioritized-list",
            Case {
                slices: vec![slice("slice-1", on("node-1"), "pool-1", "driver-a", Vec::new()), b_device()],
                claims: claim0(vec![all_or_b()]),
                ..Default::default()
            },
            Ok(one(&["req-0/subReq-1=driver-b/pool-2/device-1"])),
        ),
        (
            "all-devices-no-slices-prioritized-list",
            Case { slices: vec![b_device()], claims: claim0(vec![all_or_b()]), ..Default::default() },
            Ok(one(&["req-0/subReq-1=driver-b/pool-2/device-1"])),
        ),
        (
            "all-devices-some-allocated-prioritized-list",
            Case {
                slices: vec![slice("slice-1", on("node-1"), "pool-1", "driver-a", vec![device("device-1"), device("device-2")]), b_device()],
                allocated: vec![("driver-a", "pool-1", "device-1")],
                claims: claim0(vec![all_or_b()]),
                ..Default::default()
            },
            Ok(one(&["req-0/subReq-1=driver-b/pool-2/device-1"])),
        ),
        (
            "prioritized-list-allocation-mode-all",
            Case {
                slices: vec![slice("slice-1", on("node-1"), "pool-1", "driver-a", vec![device("device-1"), device("device-2")])],
                allocated: vec![("driver-a", "pool-1", "device-2")],
                claims: claim0(vec![all_or_one("req-0")]),
                ..Default::default()
            },
            Ok(one(&["req-0/subReq-1=driver-a/pool-1/device-1"])),
        ),
        (
            // All must match at least one device, else the next sub-request is tried.
            "prioritized-list-allocation-mode-all-with-selectors",
            Case {
                slices: vec![slice("slice-1", on("node-1"), "pool-1", "driver-a", vec![generation("device-1", "v5")])],
                claims: claim0(vec![v5_or_v6()]),
                ..Default::default()
            },
            Ok(one(&["req-0/subReq-1=driver-a/pool-1/device-1"])),
        ),
        (
            "prioritized-list-allocation-mode-all-with-selectors-multiple-pools",
            Case {
                slices: vec![
                    slice("slice-1", on("node-1"), "pool-1", "driver-a", vec![generation("device-1", "v5")]),
                    slice("slice-2", on("node-1"), "pool-2", "driver-a", vec![generation("device-1", "v5")]),
                ],
                claims: claim0(vec![v5_or_v6()]),
                ..Default::default()
            },
            Ok(one(&["req-0/subReq-1=driver-a/pool-1/device-1", "req-0/subReq-1=driver-a/pool-2/device-1"])),
        ),
        (
            "prioritized-list-allocation-mode-all-with-selectors-multiple-pools-across-nodes",
            Case {
                slices: vec![
                    slice("slice-1", on("node-1"), "pool-1", "driver-a", vec![generation("device-1", "v5")]),
                    slice(
                        "slice-2",
                        on("node-2"),
                        "pool-2",
                        "driver-a",
                        vec![generation("device-1", "v5"), generation("device-2", "v6")],
                    ),
                ],
                claims: claim0(vec![v5_or_v6()]),
                ..Default::default()
            },
            Ok(one(&["req-0/subReq-1=driver-a/pool-1/device-1"])),
        ),
        (
            "prioritized-list-allocation-mode-all-with-selectors-deviceclass-subset",
            Case {
                classes: vec![json!({"metadata": {"name": "class-a"}, "spec": {"selectors": [{"cel": {"expression":
                    "device.driver == \"driver-a\" && device.attributes[\"driver-a\"].selected"}}]}})],
                slices: vec![slice(
                    "slice-1",
                    on("node-1"),
                    "pool-1",
                    "driver-a",
                    [("device-1", "v6", false), ("device-2", "v5", false), ("device-3", "v5", true)]
                        .iter()
                        .map(|(n, g, s)| json!({"name": n, "attributes": {"generation": {"string": g}, "selected": {"bool": s}}}))
                        .collect(),
                )],
                claims: claim0(vec![v5_or_v6()]),
                ..Default::default()
            },
            Ok(one(&["req-0/subReq-1=driver-a/pool-1/device-3"])),
        ),
    ];
    for (name, case, want) in cases {
        assert_eq!(sorted(run(case)), want, "{name}");
    }
}

#[test]
fn kube_scheduler_prioritized_list_limit_cases() {
    // Two requests of 32 would pass the claim's limit of 32 devices: both take their
    // second choice of 16.
    let choice =
        |name: &str| first_available(name, vec![sub("subReq-0", "class-a", 32), sub("subReq-1", "class-a", 16)]);
    let case = Case {
        slices: vec![slice(
            "slice-1",
            on("node-1"),
            "pool-1",
            "driver-a",
            (0..64).map(|i| device(&format!("device-{i}"))).collect(),
        )],
        claims: claim0(vec![choice("req-0"), choice("req-1")]),
        ..Default::default()
    };
    let got = run(case).expect("no error").expect("allocated");
    let of = |request: &str| -> Vec<String> {
        got[0]
            .iter()
            .filter_map(|r| r.strip_prefix(&format!("{request}/subReq-1=driver-a/pool-1/")))
            .map(String::from)
            .collect()
    };
    assert_eq!(got[0].len(), 32, "{got:?}");
    let mut taken = [of("req-0"), of("req-1")].concat();
    taken.sort();
    let mut want = names("", 0..32);
    want.sort();
    assert_eq!(taken, want);
    assert_eq!(of("req-0").len(), 16);

    // All of 31 devices plus two more would pass it too: the All request takes its
    // second choice.
    let case = Case {
        slices: vec![
            slice(
                "slice-1",
                on("node-1"),
                "pool-1",
                "driver-a",
                (0..31).map(|i| device(&format!("device-{i}"))).collect(),
            ),
            slice("slice-2", on("node-1"), "pool-2", "driver-b", devices_of(2)),
        ],
        claims: claim0(vec![
            first_available("req-0", vec![all_sub("subReq-0", "class-a"), sub("subReq-1", "class-a", 2)]),
            exact("req-1", "class-b", 2),
        ]),
        ..Default::default()
    };
    assert_eq!(
        sorted(run(case)),
        Ok(one(&[
            "req-0/subReq-1=driver-a/pool-1/device-0",
            "req-0/subReq-1=driver-a/pool-1/device-1",
            "req-1=driver-b/pool-2/device-0",
            "req-1=driver-b/pool-2/device-1",
        ]))
    );
}

/// kube-scheduler's taint fixtures: NoSchedule and NoExecute taints on `taint-key`, and
/// the tolerations of each.
fn no_schedule() -> Value {
    json!({"key": "taint-key", "value": "taint-value", "effect": "NoSchedule"})
}
fn no_execute() -> Value {
    json!({"key": "taint-key", "value": "taint-value-2", "effect": "NoExecute"})
}
fn tolerate_no_schedule() -> Value {
    json!({"key": "taint-key", "operator": "Exists", "effect": "NoSchedule"})
}
fn tolerate_no_execute() -> Value {
    json!({"key": "taint-key", "operator": "Equal", "value": "taint-value-2", "effect": "NoExecute"})
}

/// Each result's request, device and tolerations (as JSON), in order.
fn with_tolerations(case: Case) -> Vec<(String, String, Value)> {
    let result = run_full(case).expect("no error").expect("allocated");
    let results = result[0].devices.as_ref().and_then(|d| d.results.clone()).unwrap_or_default();
    results
        .into_iter()
        .map(|r| (r.request, r.device, serde_json::to_value(r.tolerations).unwrap_or_default()))
        .collect()
}

#[test]
fn kube_scheduler_taint_cases() {
    let two = || {
        vec![slice(
            "slice-1",
            on("node-1"),
            "pool-1",
            "driver-a",
            vec![tainted("device-1", json!([no_schedule()])), tainted("device-2", json!([no_execute()]))],
        )]
    };
    let tolerated = Case {
        slices: two(),
        claims: claim0(vec![tolerating(exact("req-0", "class-a", 1), json!([tolerate_no_execute()]))]),
        ..Default::default()
    };
    assert_eq!(with_tolerations(tolerated), [("req-0".into(), "device-2".into(), json!([tolerate_no_execute()]))]);
    let listed = Case {
        slices: two(),
        claims: claim0(vec![first_available(
            "req-0",
            vec![
                sub("subReq-0", "class-a", 1),
                tolerating(sub("subReq-1", "class-a", 1), json!([tolerate_no_execute()])),
            ],
        )]),
        ..Default::default()
    };
    assert_eq!(
        with_tolerations(listed),
        [("req-0/subReq-1".into(), "device-2".into(), json!([tolerate_no_execute()]))]
    );
    let both_tolerated = Case {
        slices: vec![slice(
            "slice-1",
            on("node-1"),
            "pool-1",
            "driver-a",
            vec![tainted("device-1", json!([no_schedule(), no_execute()]))],
        )],
        claims: claim0(vec![tolerating(
            exact("req-0", "class-a", 1),
            json!([tolerate_no_schedule(), tolerate_no_execute()]),
        )]),
        ..Default::default()
    };
    assert_eq!(
        with_tolerations(both_tolerated),
        [("req-0".into(), "device-1".into(), json!([tolerate_no_schedule(), tolerate_no_execute()]))]
    );
    // No tolerations asked, none written.
    let plain = Case {
        slices: vec![slice("slice-1", on("node-1"), "pool-1", "driver-a", vec![device("device-1")])],
        claims: claim0(vec![exact("req-0", "class-a", 1)]),
        ..Default::default()
    };
    assert_eq!(with_tolerations(plain), [("req-0".into(), "device-1".into(), Value::Null)]);

    let tainted_one = || {
        vec![slice("slice-1", on("node-1"), "pool-1", "driver-a", vec![tainted("device-1", json!([no_schedule()]))])]
    };
    let off = Features { device_taints: false, ..Features::default() };
    let b_or_a =
        || claim0(vec![first_available("req-0", vec![sub("subReq-0", "class-b", 1), sub("subReq-1", "class-a", 1)])]);
    let admin_held = |features| Case {
        slices: tainted_one(),
        allocated: vec![("driver-a", "pool-1", "device-1"), ("driver-a", "pool-1", "device-2")],
        claims: claim0(vec![admin("req-0", "class-a", 1)]),
        features,
        ..Default::default()
    };
    let cases: Vec<(&str, Case, Want)> = vec![
        ("tainted-prioritized-list", Case { slices: tainted_one(), claims: b_or_a(), ..Default::default() }, Ok(None)),
        (
            "tainted-prioritized-list-disabled",
            Case { slices: tainted_one(), claims: b_or_a(), features: off, ..Default::default() },
            Ok(one(&["req-0/subReq-1=driver-a/pool-1/device-1"])),
        ),
        // Admin access does not pass over taints.
        ("tainted-admin-access", admin_held(Features::default()), Ok(None)),
        ("tainted-admin-access-disabled", admin_held(off), Ok(one(&["req-0=driver-a/pool-1/device-1!"]))),
        (
            "tainted-all-devices-single",
            Case { slices: tainted_one(), claims: claim0(vec![all("req-0", "class-a")]), ..Default::default() },
            Ok(None),
        ),
        (
            "tainted-all-devices-single-disabled",
            Case {
                slices: tainted_one(),
                claims: claim0(vec![all("req-0", "class-a")]),
                features: off,
                ..Default::default()
            },
            Ok(one(&["req-0=driver-a/pool-1/device-1"])),
        ),
    ];
    for (name, case, want) in cases {
        assert_eq!(run(case), want, "{name}");
    }
}

#[test]
fn kube_scheduler_constraint_cases() {
    let attrs = |name: &str, version: &str, numa: i64, s: &str, b: bool| {
        json!({"name": name, "attributes": {"driverVersion": {"version": version}, "numa": {"int": numa},
            "stringAttribute": {"string": s}, "boolAttribute": {"bool": b}}})
    };
    let one_slice = |devices: Vec<Value>| vec![slice("slice-1", on("node-1"), "pool-1", "driver-a", devices)];
    let matching = |attribute: &str| json!({"matchAttribute": format!("driver-a/{attribute}")});
    let pair = || vec![exact("req-0", "class-a", 1), exact("req-1", "class-a", 1)];
    let two_of = |devices, attribute: &str| Case {
        slices: one_slice(devices),
        claims: vec![constraints(claim("claim-0", vec![exact("req-0", "class-a", 2)]), json!([matching(attribute)]))],
        ..Default::default()
    };
    let cases: Vec<(&str, Case, Want)> = vec![
        (
            "with-constraint",
            Case {
                slices: one_slice(vec![
                    attrs("device-1", "1.0.0", 1, "v", true),
                    attrs("device-2", "1.0.0", 1, "v", true),
                ]),
                claims: vec![constraints(
                    claim("claim-0", pair()),
                    json!([
                        matching("numa"),
                        matching("driverVersion"),
                        matching("stringAttribute"),
                        matching("boolAttribute")
                    ]),
                )],
                ..Default::default()
            },
            Ok(one(&["req-0=driver-a/pool-1/device-1", "req-1=driver-a/pool-1/device-2"])),
        ),
        (
            "with-constraint-not-matching-string-attribute",
            two_of(
                vec![attrs("device-1", "1.0.0", 1, "v", true), attrs("device-2", "1.0.0", 1, "v2", true)],
                "stringAttribute",
            ),
            Ok(None),
        ),
        (
            "with-constraint-not-matching-bool-attribute",
            two_of(
                vec![attrs("device-1", "1.0.0", 1, "v", true), attrs("device-2", "1.0.0", 1, "v", false)],
                "boolAttribute",
            ),
            Ok(None),
        ),
        (
            "with-constraint-not-matching-version-attribute",
            two_of(
                vec![attrs("device-1", "1.0.0", 1, "v", true), attrs("device-2", "2.0.0", 1, "v", true)],
                "driverVersion",
            ),
            Ok(None),
        ),
        (
            // The constraint covers req-0 alone: one device always satisfies it.
            "with-constraint-for-request",
            Case {
                slices: one_slice(vec![
                    attrs("device-1", "1.0.0", 1, "v", true),
                    attrs("device-2", "2.0.0", 1, "v", true),
                ]),
                claims: vec![constraints(
                    claim("claim-0", pair()),
                    json!([{"requests": ["req-0"], "matchAttribute": "driver-a/driverVersion"}]),
                )],
                ..Default::default()
            },
            Ok(one(&["req-0=driver-a/pool-1/device-1", "req-1=driver-a/pool-1/device-2"])),
        ),
        (
            "with-constraint-for-request-retry",
            Case {
                slices: one_slice(vec![
                    attrs("device-1", "1.0.0", 1, "a", true),
                    attrs("device-2", "2.0.0", 1, "b", true),
                    attrs("device-3", "3.0.0", 1, "b", true),
                ]),
                claims: vec![constraints(
                    claim("claim-0", pair()),
                    json!([{"requests": ["req-0"], "matchAttribute": "driver-a/driverVersion"}, matching("stringAttribute")]),
                )],
                ..Default::default()
            },
            Ok(one(&["req-0=driver-a/pool-1/device-2", "req-1=driver-a/pool-1/device-3"])),
        ),
        (
            "with-distinct-constraints",
            Case {
                slices: one_slice(
                    [
                        ("device-1", "1.0.0", 0, true),
                        ("device-2", "1.0.1", 1, false),
                        ("device-3", "1.0.2", 2, true),
                        ("device-4", "1.0.0", 3, true),
                    ]
                    .iter()
                    .map(|(n, v, numa, b)| {
                        with(attrs(n, v, *numa, "v", *b), &["allowMultipleAllocations"], json!(true))
                    })
                    .collect(),
                ),
                claims: vec![constraints(
                    claim("claim-0", (0..4).map(|i| exact(&format!("req-{i}"), "class-a", 1)).collect()),
                    json!([
                        {"requests": ["req-0", "req-1"], "distinctAttribute": "driver-a/boolAttribute"},
                        {"requests": ["req-0", "req-1", "req-2"], "distinctAttribute": "driver-a/driverVersion"},
                        {"requests": ["req-0", "req-1", "req-2", "req-3"], "distinctAttribute": "driver-a/numa"},
                    ]),
                )],
                ..Default::default()
            },
            Ok(one(&[
                "req-0=driver-a/pool-1/device-1",
                "req-1=driver-a/pool-1/device-2",
                "req-2=driver-a/pool-1/device-3",
                "req-3=driver-a/pool-1/device-4",
            ])),
        ),
        (
            "with-distinct-constraints-with-subrequests",
            Case {
                slices: one_slice(
                    [("device-1", true), ("device-2", false)]
                        .iter()
                        .map(|(n, b)| with(attrs(n, "1.0.0", 0, "v", *b), &["allowMultipleAllocations"], json!(true)))
                        .collect(),
                ),
                claims: vec![constraints(
                    claim(
                        "claim-0",
                        (0..3)
                            .map(|i| {
                                first_available(
                                    &format!("req-{i}"),
                                    vec![
                                        selecting(
                                            sub("subReq-0", "class-a", 1),
                                            "device.attributes[\"driver-a\"].boolAttribute",
                                        ),
                                        sub("subReq-1", "class-a", 1),
                                    ],
                                )
                            })
                            .collect(),
                    ),
                    json!([{"requests": ["req-0", "req-1"], "distinctAttribute": "driver-a/boolAttribute"}]),
                )],
                ..Default::default()
            },
            Ok(one(&[
                "req-0/subReq-0=driver-a/pool-1/device-1",
                "req-1/subReq-1=driver-a/pool-1/device-2",
                "req-2/subReq-0=driver-a/pool-1/device-1",
            ])),
        ),
    ];
    for (name, case, want) in cases {
        assert_eq!(run(case), want, "{name}");
    }
}

#[test]
fn kube_scheduler_binding_condition_cases() {
    let conditioned = |name: &str, ready: &str, failed: &str| json!({"name": name, "bindingConditions": [ready], "bindingFailureConditions": [failed]});
    let conditions_of = |case: Case| -> Vec<(String, String, Option<Vec<String>>, Option<Vec<String>>)> {
        let result = run_full(case).expect("no error").expect("allocated");
        let results = result[0].devices.as_ref().and_then(|d| d.results.clone()).unwrap_or_default();
        results.into_iter().map(|r| (r.request, r.device, r.binding_conditions, r.binding_failure_conditions)).collect()
    };
    let s = |v: &str| Some(vec![v.to_string()]);
    let three = Case {
        slices: vec![slice(
            "slice-1",
            on("node-1"),
            "pool-1",
            "driver-a",
            vec![
                conditioned("device-1", "IsPrepare", "BindingFailed"),
                conditioned("device-2", "IsPrepare2", "BindingFailed2"),
                conditioned("device-3", "IsPrepare3", "BindingFailed3"),
            ],
        )],
        claims: claim0(vec![exact("req-0", "class-a", 2), exact("req-1", "class-a", 1)]),
        ..Default::default()
    };
    assert_eq!(
        conditions_of(three),
        [
            ("req-0".into(), "device-1".into(), s("IsPrepare"), s("BindingFailed")),
            ("req-0".into(), "device-2".into(), s("IsPrepare2"), s("BindingFailed2")),
            ("req-1".into(), "device-3".into(), s("IsPrepare3"), s("BindingFailed3")),
        ]
    );
    let mixed = Case {
        slices: vec![slice(
            "slice-1",
            on("node-1"),
            "pool-1",
            "driver-a",
            vec![device("device-1"), conditioned("device-2", "IsPrepare", "BindingFailed")],
        )],
        claims: claim0(vec![exact("req-0", "class-a", 1), exact("req-1", "class-a", 1)]),
        ..Default::default()
    };
    assert_eq!(
        conditions_of(mixed),
        [
            ("req-0".into(), "device-1".into(), None, None),
            ("req-1".into(), "device-2".into(), s("IsPrepare"), s("BindingFailed")),
        ]
    );
}

/// Each configuration's source, requests and the value of its parameter `p`.
fn configs(case: Case) -> Vec<(String, Option<Vec<String>>, String)> {
    let result = run_full(case).expect("no error").expect("allocated");
    let config = result[0].devices.as_ref().and_then(|d| d.config.clone()).unwrap_or_default();
    config
        .into_iter()
        .map(|c| {
            let p = c.opaque.as_ref().and_then(|o| o.parameters.0["p"].as_str().map(String::from)).unwrap_or_default();
            (c.source, c.requests, p)
        })
        .collect()
}

#[test]
fn kube_scheduler_configuration_cases() {
    let opaque = |driver: &str, p: &str| json!({"opaque": {"driver": driver, "parameters": {"p": p}}});
    let configured =
        |name: &str, driver: &str, p: &str| with(class(name, driver), &["spec", "config"], json!([opaque(driver, p)]));
    let strings = |l: &[&str]| Some(l.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    // with-class-device-config-with-multiple-request-and-configs
    let case = Case {
        classes: vec![configured("class-a", "driver-a", "A"), configured("class-b", "driver-b", "B")],
        slices: vec![
            slice("slice-1", on("node-1"), "pool-1", "driver-a", vec![device("device-0"), device("device-1")]),
            slice("slice-2", on("node-1"), "pool-1", "driver-b", vec![device("device-1")]),
        ],
        claims: claim0(vec![exact("req-0", "class-a", 1), exact("req-1", "class-a", 1), exact("req-2", "class-b", 1)]),
        ..Default::default()
    };
    assert_eq!(
        configs(case),
        [
            ("FromClass".to_string(), strings(&["req-0", "req-1"]), "A".to_string()),
            ("FromClass".to_string(), strings(&["req-2"]), "B".to_string()),
        ]
    );
    // prioritized-list-device-config: only the chosen sub-request's claim configuration.
    let b_devices =
        || slice("slice-1", on("node-1"), "pool-1", "driver-b", vec![device("device-1"), device("device-2")]);
    let listed = || first_available("req-0", vec![sub("subReq-0", "class-a", 1), sub("subReq-1", "class-b", 2)]);
    let claim_configured = with(
        claim("claim-0", vec![listed()]),
        &["spec", "devices", "config"],
        json!([
            {"requests": ["req-0/subReq-0"], "opaque": opaque("driver-a", "foo")["opaque"]},
            {"requests": ["req-0/subReq-1"], "opaque": opaque("driver-b", "bar")["opaque"]},
        ]),
    );
    let case = Case { slices: vec![b_devices()], claims: vec![claim_configured], ..Default::default() };
    assert_eq!(configs(case), [("FromClaim".to_string(), strings(&["req-0/subReq-1"]), "bar".to_string())]);
    // prioritized-list-class-config: the chosen sub-request's class.
    let case = Case {
        classes: vec![configured("class-a", "driver-a", "foo"), configured("class-b", "driver-b", "bar")],
        slices: vec![b_devices(), slice("slice-2", on("node-1"), "pool-2", "driver-a", vec![device("device-3")])],
        claims: claim0(vec![first_available(
            "req-0",
            vec![sub("subReq-0", "class-a", 2), sub("subReq-1", "class-b", 2)],
        )]),
        ..Default::default()
    };
    assert_eq!(configs(case), [("FromClass".to_string(), strings(&["req-0/subReq-1"]), "bar".to_string())]);
}
