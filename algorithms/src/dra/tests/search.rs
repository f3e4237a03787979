//! kube-scheduler's allocator cases on the search itself: devices across slices, pools and
//! drivers, combinations it must exhaust, multi-host pools whose generations move between
//! nodes, `allocationMode: All` beside other claims, network-attached slices, admin access
//! and the order pools and slices are tried in.

use serde_json::{Value, json};

use super::*;

fn typed(name: &str, kind: &str) -> Value {
    json!({"name": name, "attributes": {"type": {"string": kind}}})
}

fn selecting(request: Value, expression: &str) -> Value {
    let at = if request.get("exactly").is_some() { &["exactly", "selectors"][..] } else { &["selectors"][..] };
    with(request, at, json!([{"cel": {"expression": expression}}]))
}

fn claims(list: &[(&str, Vec<Value>)]) -> Vec<Value> {
    list.iter().map(|(name, requests)| claim(name, requests.clone())).collect()
}

fn each(lists: &[&[&str]]) -> Option<Vec<Vec<String>>> {
    Some(lists.iter().map(|l| l.iter().map(|s| s.to_string()).collect()).collect())
}

/// Results sorted within each claim (upstream compares them as sets).
fn sorted(got: Result<Option<Vec<Vec<String>>>, String>) -> Result<Option<Vec<Vec<String>>>, String> {
    got.map(|o| {
        o.map(|mut all| {
            all.iter_mut().for_each(|c| c.sort());
            all
        })
    })
}

type Want = Result<Option<Vec<Vec<String>>>, String>;

#[test]
fn kube_scheduler_search_cases() {
    let x_y_y = || vec![typed("device-1", "X"), typed("device-2", "Y"), typed("device-3", "Y")];
    let is = |t: &str| format!("device.attributes[\"driver-a\"].type == \"{t}\"");
    let five = || claim0(vec![exact("req-0", "class-a", 5)]);
    let cases: Vec<(&str, Case, Want)> = vec![
        (
            "devices-split-across-different-slices",
            Case {
                slices: vec![
                    slice("slice-1", on("node-1"), "pool-1", "driver-a", vec![device("device-1")]),
                    slice("slice-2", on("node-1"), "pool-2", "driver-a", vec![device("device-1")]),
                ],
                claims: claim0(vec![exact("req-0", "class-a", 2)]),
                ..Default::default()
            },
            Ok(one(&["req-0=driver-a/pool-1/device-1", "req-0=driver-a/pool-2/device-1"])),
        ),
        (
            "several-different-drivers",
            Case {
                slices: vec![
                    slice("slice-1", on("node-1"), "pool-1", "driver-a", vec![device("device-1"), device("device-2")]),
                    slice("slice-2", on("node-1"), "pool-1", "driver-b", vec![device("device-1")]),
                ],
                claims: claims(&[
                    ("claim-0", vec![exact("req-0", "class-a", 1)]),
                    ("claim-1", vec![exact("req-0", "class-b", 1)]),
                ]),
                ..Default::default()
            },
            Ok(each(&[&["req-0=driver-a/pool-1/device-1"], &["req-0=driver-b/pool-1/device-1"]])),
        ),
        (
            "check-combinations-within-single-request-single-pool-single-slice",
            Case {
                slices: vec![slice("slice-1", on("node-1"), "pool-1", "driver-a", devices_of(4))],
                claims: five(),
                ..Default::default()
            },
            Ok(None),
        ),
        (
            "check-combinations-within-single-request-single-pool-multiple-slices",
            Case {
                slices: vec![
                    sliced(
                        "slice-1",
                        on("node-1"),
                        "pool-1",
                        "driver-a",
                        1,
                        2,
                        vec![device("device-1"), device("device-2")],
                    ),
                    sliced(
                        "slice-2",
                        on("node-1"),
                        "pool-1",
                        "driver-a",
                        1,
                        2,
                        vec![device("device-3"), device("device-4")],
                    ),
                ],
                claims: five(),
                ..Default::default()
            },
            Ok(None),
        ),
        (
            "check-combinations-within-single-request-multiple-pools-multiple-slices",
            Case {
                slices: vec![
                    sliced("slice-1", on("node-1"), "pool-1", "driver-a", 1, 2, vec![device("device-1")]),
                    sliced("slice-2", on("node-1"), "pool-1", "driver-a", 1, 2, vec![device("device-2")]),
                    slice("slice-3", on("node-1"), "pool-2", "driver-a", vec![device("device-3"), device("device-4")]),
                ],
                claims: five(),
                ..Default::default()
            },
            Ok(None),
        ),
        (
            "check-combinations-within-single-request-many-pools",
            Case {
                slices: (1..=4)
                    .map(|i| {
                        slice(
                            &format!("slice-{i}"),
                            on("node-1"),
                            &format!("pool-{i}"),
                            "driver-a",
                            vec![device(&format!("device-{i}"))],
                        )
                    })
                    .collect(),
                claims: five(),
                ..Default::default()
            },
            Ok(None),
        ),
        (
            "check-combinations-with-backtracking",
            Case {
                slices: vec![slice("slice-1", on("node-1"), "pool-1", "driver-a", x_y_y())],
                claims: claim0(vec![exact("req-1", "class-a", 2), selecting(exact("req-2", "class-a", 1), &is("X"))]),
                ..Default::default()
            },
            Ok(one(&[
                "req-1=driver-a/pool-1/device-2",
                "req-1=driver-a/pool-1/device-3",
                "req-2=driver-a/pool-1/device-1",
            ])),
        ),
        (
            "check-combinations-with-backtracking-across-slices-and-pools",
            Case {
                slices: vec![
                    sliced("slice-1", on("node-1"), "pool-1", "driver-a", 1, 2, vec![typed("device-1", "X")]),
                    sliced("slice-2", on("node-1"), "pool-1", "driver-a", 1, 2, vec![typed("device-2", "Y")]),
                    slice(
                        "slice-3",
                        on("node-1"),
                        "pool-2",
                        "driver-a",
                        vec![with(typed("device-3", "Y"), &["bindingConditions"], json!(["IsPrepare"]))],
                    ),
                ],
                claims: claim0(vec![exact("req-1", "class-a", 2), selecting(exact("req-2", "class-a", 1), &is("X"))]),
                ..Default::default()
            },
            Ok(one(&[
                "req-1=driver-a/pool-1/device-2",
                "req-1=driver-a/pool-2/device-3",
                "req-2=driver-a/pool-1/device-1",
            ])),
        ),
        (
            "check-combinations-with-prioritized-list",
            Case {
                slices: vec![slice("slice-1", on("node-1"), "pool-1", "driver-a", x_y_y())],
                claims: claim0(vec![
                    first_available(
                        "req-1",
                        vec![selecting(sub("subReq-0", "class-a", 3), &is("Y")), sub("subReq-1", "class-a", 2)],
                    ),
                    first_available(
                        "req-2",
                        vec![sub("subReq-0", "class-a", 2), selecting(sub("subReq-1", "class-a", 1), &is("X"))],
                    ),
                ]),
                ..Default::default()
            },
            Ok(one(&[
                "req-1/subReq-1=driver-a/pool-1/device-2",
                "req-1/subReq-1=driver-a/pool-1/device-3",
                "req-2/subReq-1=driver-a/pool-1/device-1",
            ])),
        ),
    ];
    for (name, case, want) in cases {
        assert_eq!(sorted(run(case)), want, "{name}");
    }
}

#[test]
fn kube_scheduler_pool_cases() {
    let req = || claim0(vec![exact("req-0", "class-a", 1)]);
    // Pool pool-1 of two slices a generation, each generation published from one node.
    let generation = |generation: i64, node: &str, devices: &[&str], first: usize| -> Vec<Value> {
        devices
            .iter()
            .enumerate()
            .map(|(i, d)| {
                sliced(&format!("slice-{}", first + i), on(node), "pool-1", "driver-a", generation, 2, vec![device(d)])
            })
            .collect()
    };
    let both = ["device-1", "device-2"];
    let cases: Vec<(&str, Case, Want)> = vec![
        (
            "duplicate-slice",
            Case {
                slices: vec![
                    sliced("slice-1", on("node-1"), "pool-1", "driver-a", 1, 2, vec![device("device-1")]),
                    sliced("slice-1-2", on("node-1"), "pool-1", "driver-a", 1, 2, vec![device("device-1")]),
                ],
                claims: req(),
                ..Default::default()
            },
            Err(INVALID_POOLS.into()),
        ),
        (
            "no-allocation-from-incomplete-pools",
            Case {
                slices: vec![sliced("slice-1", on("node-1"), "pool-1", "driver-a", 1, 2, vec![device("device-1")])],
                claims: req(),
                ..Default::default()
            },
            Ok(None),
        ),
        (
            "multi-host-resource-pool-complete-update-from-node-1-to-node-2",
            Case {
                slices: [generation(1, "node-1", &both, 1), generation(2, "node-2", &both, 3)].concat(),
                claims: req(),
                ..Default::default()
            },
            Ok(one(&["req-0=driver-a/pool-1/device-1"])),
        ),
        (
            "multi-host-resource-pool-complete-update-from-node-2-to-node-1",
            Case {
                slices: [generation(1, "node-2", &both, 1), generation(2, "node-1", &both, 3)].concat(),
                claims: req(),
                ..Default::default()
            },
            Ok(one(&["req-0=driver-a/pool-1/device-1"])),
        ),
        (
            "multi-host-resource-pool-incomplete-update-from-node-1-to-node-2",
            Case {
                slices: [generation(1, "node-1", &both, 1), generation(2, "node-2", &["device-1"], 3)].concat(),
                claims: req(),
                ..Default::default()
            },
            Ok(one(&["req-0=driver-a/pool-1/device-1"])),
        ),
        (
            "multi-host-resource-pool-incomplete-update-from-node-2-to-node-1",
            Case {
                slices: [generation(1, "node-2", &both, 1), generation(2, "node-1", &["device-1"], 3)].concat(),
                claims: req(),
                ..Default::default()
            },
            Ok(None),
        ),
        (
            "allocation-mode-all-with-multi-host-resource-pool",
            Case {
                slices: vec![
                    sliced("slice-1", on("node-1"), "pool-1", "driver-a", 1, 2, vec![device("device-1")]),
                    sliced("slice-2", on("node-2"), "pool-1", "driver-a", 1, 2, vec![device("device-2")]),
                ],
                claims: claim0(vec![all("req-0", "class-a")]),
                ..Default::default()
            },
            Ok(one(&["req-0=driver-a/pool-1/device-1"])),
        ),
        (
            "lexicographical-sorting-pools",
            Case {
                slices: (1..=3)
                    .rev()
                    .map(|i| {
                        slice(
                            &format!("slice-{i}"),
                            on("node-1"),
                            &format!("pool-{i}"),
                            "driver-a",
                            vec![device("device-1")],
                        )
                    })
                    .collect(),
                claims: claim0(vec![exact("req-0", "class-a", 2)]),
                ..Default::default()
            },
            Ok(one(&["req-0=driver-a/pool-1/device-1", "req-0=driver-a/pool-2/device-1"])),
        ),
        (
            "lexicographical-sorting-slices",
            Case {
                slices: (1..=3)
                    .rev()
                    .map(|i| {
                        sliced(
                            &format!("slice-{i}"),
                            on("node-1"),
                            "pool-1",
                            "driver-a",
                            1,
                            3,
                            vec![device(&format!("device-{i}"))],
                        )
                    })
                    .collect(),
                claims: claim0(vec![exact("req-0", "class-a", 2)]),
                ..Default::default()
            },
            Ok(one(&["req-0=driver-a/pool-1/device-1", "req-0=driver-a/pool-1/device-2"])),
        ),
        (
            // Inside one pool a device with binding conditions is not put off: only whole
            // pools with such devices come last.
            "lexicographical-sorting-slices-with-binding-conditions",
            Case {
                slices: vec![
                    sliced(
                        "slice-1",
                        on("node-1"),
                        "pool-1",
                        "driver-a",
                        1,
                        3,
                        vec![
                            json!({"name": "device-1", "bindingConditions": ["IsPrepare"], "bindingFailureConditions": ["BindingFailed"]}),
                        ],
                    ),
                    sliced("slice-3", on("node-1"), "pool-1", "driver-a", 1, 3, vec![device("device-3")]),
                    sliced("slice-2", on("node-1"), "pool-1", "driver-a", 1, 3, vec![device("device-2")]),
                ],
                claims: claim0(vec![exact("req-0", "class-a", 2)]),
                ..Default::default()
            },
            Ok(one(&["req-0=driver-a/pool-1/device-1", "req-0=driver-a/pool-1/device-2"])),
        ),
    ];
    for (name, case, want) in cases {
        assert_eq!(sorted(run(case)), want, "{name}");
    }
    // The multi-host pool's All request is usable on node-1 only.
    let case = Case {
        slices: vec![
            sliced("slice-1", on("node-1"), "pool-1", "driver-a", 1, 2, vec![device("device-1")]),
            sliced("slice-2", on("node-2"), "pool-1", "driver-a", 1, 2, vec![device("device-2")]),
        ],
        claims: claim0(vec![all("req-0", "class-a")]),
        ..Default::default()
    };
    let result = run_full(case).expect("no error").expect("allocated");
    assert_eq!(result[0].node_selector, Some(local_selector("node-1")));
}

#[test]
fn kube_scheduler_all_mode_cases() {
    let one_device = || vec![slice("slice-1", on("node-1"), "pool-1", "driver-a", vec![device("device-1")])];
    let a_and_b = |a: Vec<Value>| {
        vec![
            slice("slice-1", on("node-1"), "pool-1", "driver-a", a),
            slice("slice-2", on("node-1"), "pool-1", "driver-b", vec![device("device-1")]),
        ]
    };
    let all_a = || ("claim-0", vec![all("req-0", "class-a")]);
    let one_b = || ("claim-1", vec![exact("req-0", "class-b", 1)]);
    let cases: Vec<(&str, Case, Want)> = vec![
        (
            "all-devices-no-solution-reversed",
            Case {
                slices: one_device(),
                claims: claims(&[all_a(), ("claim-1", vec![exact("req-0", "class-a", 1)])]),
                ..Default::default()
            },
            Ok(None),
        ),
        (
            "all-devices-slice-without-devices",
            Case {
                slices: vec![slice("slice-1", on("node-1"), "pool-1", "driver-a", Vec::new())],
                claims: claims(&[all_a()]),
                ..Default::default()
            },
            Ok(None),
        ),
        (
            "all-devices-plus-another",
            Case {
                slices: a_and_b(vec![device("device-1")]),
                claims: claims(&[all_a(), one_b()]),
                ..Default::default()
            },
            Ok(each(&[&["req-0=driver-a/pool-1/device-1"], &["req-0=driver-b/pool-1/device-1"]])),
        ),
        (
            "all-devices-plus-another-reversed",
            Case {
                slices: a_and_b(vec![device("device-1")]),
                claims: claims(&[one_b(), all_a()]),
                ..Default::default()
            },
            Ok(each(&[&["req-0=driver-b/pool-1/device-1"], &["req-0=driver-a/pool-1/device-1"]])),
        ),
        (
            "all-devices-many-plus-another",
            Case {
                slices: a_and_b(vec![device("device-1"), device("device-2")]),
                claims: claims(&[all_a(), one_b()]),
                ..Default::default()
            },
            Ok(each(&[
                &["req-0=driver-a/pool-1/device-1", "req-0=driver-a/pool-1/device-2"],
                &["req-0=driver-b/pool-1/device-1"],
            ])),
        ),
        (
            "all-devices-many-plus-another-reversed",
            Case {
                slices: a_and_b(vec![device("device-1"), device("device-2")]),
                claims: claims(&[one_b(), all_a()]),
                ..Default::default()
            },
            Ok(each(&[
                &["req-0=driver-b/pool-1/device-1"],
                &["req-0=driver-a/pool-1/device-1", "req-0=driver-a/pool-1/device-2"],
            ])),
        ),
        (
            "all-devices-some-allocated-admin-access",
            Case {
                slices: vec![slice(
                    "slice-1",
                    on("node-1"),
                    "pool-1",
                    "driver-a",
                    vec![device("device-1"), device("device-2")],
                )],
                allocated: vec![("driver-a", "pool-1", "device-1")],
                claims: claim0(vec![with(all("req-0", "class-a"), &["exactly", "adminAccess"], json!(true))]),
                ..Default::default()
            },
            Ok(one(&["req-0=driver-a/pool-1/device-1!", "req-0=driver-a/pool-1/device-2!"])),
        ),
        (
            // The All request cannot have a device the same claim's other request took.
            "all-devices-some-allocating-admin-access",
            Case {
                slices: vec![slice(
                    "slice-1",
                    on("node-1"),
                    "pool-1",
                    "driver-a",
                    vec![device("device-1"), device("device-2")],
                )],
                claims: claim0(vec![
                    admin("req-0", "class-a", 1),
                    with(all("req-1", "class-a"), &["exactly", "adminAccess"], json!(true)),
                ]),
                ..Default::default()
            },
            Ok(None),
        ),
        (
            "admin-access-claims-device-allocating-for-non-admin-access",
            Case {
                slices: vec![slice(
                    "slice-1",
                    on("node-1"),
                    "pool-1",
                    "driver-a",
                    vec![device("device-1"), device("device-2")],
                )],
                claims: claims(&[
                    ("claim-0", vec![exact("req-0", "class-a", 1)]),
                    ("claim-1", vec![admin("req-0", "class-a", 1)]),
                ]),
                ..Default::default()
            },
            Ok(each(&[&["req-0=driver-a/pool-1/device-1"], &["req-0=driver-a/pool-1/device-1!"]])),
        ),
    ];
    for (name, case, want) in cases {
        assert_eq!(sorted(run(case)), want, "{name}");
    }
}

#[test]
fn kube_scheduler_network_attached_cases() {
    let selected = |expressions: Value, fields: Value| json!({"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": expressions, "matchFields": fields}]}});
    let label_in = |key: &str, value: &str| json!([{"key": key, "operator": "In", "values": [value]}]);
    let many = Case {
        slices: vec![
            slice(
                "slice-1",
                selected(label_in("region", "region-1"), json!([])),
                "pool-1",
                "driver-a",
                vec![device("device-1")],
            ),
            slice("slice-2", json!({"allNodes": true}), "pool-2", "driver-a", vec![device("device-1")]),
            slice(
                "slice-3",
                selected(label_in("planet", "earth"), json!([])),
                "pool-3",
                "driver-a",
                vec![device("device-1")],
            ),
            slice(
                "slice-4",
                selected(json!([]), label_in("metadata.name", "node-1")),
                "pool-4",
                "driver-a",
                vec![device("device-1")],
            ),
        ],
        claims: claim0(vec![exact("req-0", "class-a", 4)]),
        ..Default::default()
    };
    let result = run_full(many).expect("no error").expect("allocated");
    let devices = result[0].devices.as_ref().and_then(|d| d.results.clone()).unwrap_or_default();
    let mut pools: Vec<&str> = devices.iter().map(|r| r.pool.as_str()).collect();
    pools.sort();
    assert_eq!(pools, ["pool-1", "pool-2", "pool-3", "pool-4"]);
    // One term: every slice's requirements together, allNodes adding none.
    let terms = result[0].node_selector.clone().expect("a node selector").node_selector_terms;
    assert_eq!(terms.len(), 1, "{terms:?}");
    let mut expressions: Vec<(String, Vec<String>)> = terms[0]
        .match_expressions
        .iter()
        .flatten()
        .map(|r| (r.key.clone(), r.values.clone().unwrap_or_default()))
        .collect();
    expressions.sort();
    assert_eq!(
        expressions,
        [("planet".to_string(), vec!["earth".to_string()]), ("region".into(), vec!["region-1".into()])]
    );
    let fields: Vec<(String, Vec<String>)> =
        terms[0].match_fields.iter().flatten().map(|r| (r.key.clone(), r.values.clone().unwrap_or_default())).collect();
    assert_eq!(fields, [("metadata.name".to_string(), vec!["node-1".to_string()])]);

    let local_and_attached = Case {
        slices: vec![
            slice(
                "slice-1",
                selected(label_in("region", "region-1"), json!([])),
                "pool-1",
                "driver-a",
                vec![device("device-1")],
            ),
            slice("slice-2", on("node-1"), "pool-2", "driver-a", vec![device("device-1")]),
        ],
        claims: claim0(vec![exact("req-0", "class-a", 2)]),
        ..Default::default()
    };
    let result = run_full(local_and_attached).expect("no error").expect("allocated");
    assert_eq!(result[0].devices.as_ref().and_then(|d| d.results.as_ref()).map(Vec::len), Some(2));
    assert_eq!(result[0].node_selector, Some(local_selector("node-1")));
}

/// kube-scheduler's node-restriction case: a network-attached device that binds to the
/// node it is allocated for makes the allocation usable there only.
#[test]
fn a_device_binding_to_its_node_makes_the_allocation_local() {
    let planet = json!({"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "planet", "operator": "In", "values": ["earth"]}]}]}});
    let bound = json!({"name": "device-1", "bindsToNode": true, "bindingConditions": ["IsPrepare"], "bindingFailureConditions": ["BindingFailed"]});
    let case = |device: Value| Case {
        slices: vec![slice("slice-1", planet.clone(), "pool-1", "driver-a", vec![device])],
        claims: claim0(vec![exact("req-0", "class-a", 1)]),
        ..Default::default()
    };
    let result = run_full(case(bound)).expect("no error").expect("allocated");
    assert_eq!(result[0].node_selector, Some(local_selector("node-1")));
    // Without it, the slice's selector.
    let result = run_full(case(device("device-1"))).expect("no error").expect("allocated");
    let terms = result[0].node_selector.clone().expect("selector").node_selector_terms;
    assert_eq!(terms[0].match_expressions.as_ref().map(Vec::len), Some(1));
}
