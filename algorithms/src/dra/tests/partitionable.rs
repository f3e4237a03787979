//! Partitionable devices (`DRAPartitionableDevices`): devices consuming counters that a
//! pool's counter sets share, after kube-scheduler's allocator cases.

use std::sync::Arc;

use serde_json::{Value, json};

use super::*;

/// One GPU of 8Gi memory split three ways: whole (8Gi), and two halves (4Gi each).
fn gpu(node: &str, count: i64) -> Vec<Value> {
    vec![
        counters("counters-1", on(node), "pool-1", count, json!({"gpu-0": {"memory": "8Gi"}})),
        sliced(
            "slice-1",
            on(node),
            "pool-1",
            "driver-a",
            1,
            count,
            vec![
                part("whole", json!({"gpu-0": {"memory": "8Gi"}})),
                part("half-1", json!({"gpu-0": {"memory": "4Gi"}})),
                part("half-2", json!({"gpu-0": {"memory": "4Gi"}})),
            ],
        ),
    ]
}

fn held(devices: &[&'static str]) -> Vec<(&'static str, &'static str, &'static str)> {
    devices.iter().map(|d| ("driver-a", "pool-1", *d)).collect()
}

#[test]
fn a_partition_is_allocated_while_its_counters_last() {
    let c = |claims, allocated| Case { slices: gpu("node-1", 2), claims, allocated, ..Default::default() };
    let one_device = || claim0(vec![exact("req-0", "class-a", 1)]);
    assert_eq!(run(c(one_device(), vec![])), Ok(one(&["req-0=driver-a/pool-1/whole"])));
    // Two devices: the whole GPU leaves nothing for a second, so the halves are taken.
    assert_eq!(
        run(c(claim0(vec![exact("req-0", "class-a", 2)]), vec![])),
        Ok(one(&["req-0=driver-a/pool-1/half-1", "req-0=driver-a/pool-1/half-2"]))
    );
    // One half allocated: the whole GPU no longer fits, the other half does.
    assert_eq!(run(c(one_device(), held(&["half-1"]))), Ok(one(&["req-0=driver-a/pool-1/half-2"])));
    // The whole GPU allocated: no partition is left.
    assert_eq!(run(c(one_device(), held(&["whole"]))), Ok(None));
    // Three devices never fit in 8Gi.
    assert_eq!(run(c(claim0(vec![exact("req-0", "class-a", 3)]), vec![])), Ok(None));
    // Across claims as within one.
    let two = vec![
        claim("claim-0", vec![exact("req-0", "class-a", 1)]),
        claim("claim-1", vec![exact("req-0", "class-a", 1)]),
    ];
    assert_eq!(
        run(c(two, vec![])),
        Ok(Some(vec![vec!["req-0=driver-a/pool-1/half-1".into()], vec!["req-0=driver-a/pool-1/half-2".into()]]))
    );
}

#[test]
fn every_counter_of_every_set_must_last() {
    let slices = vec![
        counters(
            "counters-1",
            on("node-1"),
            "pool-1",
            2,
            json!({"gpu-0": {"memory": "8Gi", "cores": "4"}, "gpu-1": {"memory": "8Gi", "cores": "4"}}),
        ),
        sliced(
            "slice-1",
            on("node-1"),
            "pool-1",
            "driver-a",
            1,
            2,
            vec![
                part("mem-heavy", json!({"gpu-0": {"memory": "6Gi", "cores": "1"}})),
                part("core-heavy", json!({"gpu-0": {"memory": "1Gi", "cores": "4"}})),
                part("small", json!({"gpu-0": {"memory": "2Gi", "cores": "3"}})),
                part("other-gpu", json!({"gpu-1": {"memory": "8Gi"}})),
            ],
        ),
    ];
    let c = |count, allocated| Case {
        slices: slices.clone(),
        claims: claim0(vec![exact("req-0", "class-a", count)]),
        allocated,
        ..Default::default()
    };
    // Memory allows mem-heavy with core-heavy (7Gi) but cores do not (5): the search
    // backs up to mem-heavy with small (8Gi, 4 cores: exactly what is there).
    assert_eq!(run(c(2, vec![])), Ok(one(&["req-0=driver-a/pool-1/mem-heavy", "req-0=driver-a/pool-1/small"])));
    // With small held (2Gi, 3 cores), mem-heavy still fits beside it and the other GPU
    // is next. Small and core-heavy both held overdraw gpu-0's cores (7 of 4): as in
    // kube-scheduler, that blocks the whole pool, the other GPU included.
    assert_eq!(
        run(c(2, held(&["small"]))),
        Ok(one(&["req-0=driver-a/pool-1/mem-heavy", "req-0=driver-a/pool-1/other-gpu"]))
    );
    assert_eq!(run(c(1, held(&["small", "core-heavy"]))), Ok(None));
    assert_eq!(
        run(c(3, vec![])),
        Ok(one(&["req-0=driver-a/pool-1/mem-heavy", "req-0=driver-a/pool-1/small", "req-0=driver-a/pool-1/other-gpu"]))
    );
    assert_eq!(run(c(4, vec![])), Ok(None));
    // A counter that allocated devices overdraw (published values shrank) blocks every
    // device of the pool, as kube-scheduler checks every counter of the pool.
    let shrunk = |allocated| Case {
        slices: vec![
            counters(
                "counters-1",
                on("node-1"),
                "pool-1",
                2,
                json!({"gpu-0": {"memory": "4Gi"}, "gpu-1": {"memory": "8Gi"}}),
            ),
            sliced(
                "slice-1",
                on("node-1"),
                "pool-1",
                "driver-a",
                1,
                2,
                vec![
                    part("big", json!({"gpu-0": {"memory": "6Gi"}})),
                    part("other-gpu", json!({"gpu-1": {"memory": "8Gi"}})),
                ],
            ),
        ],
        claims: claim0(vec![exact("req-0", "class-a", 1)]),
        allocated,
        ..Default::default()
    };
    assert_eq!(run(shrunk(vec![])), Ok(one(&["req-0=driver-a/pool-1/other-gpu"])));
    assert_eq!(run(shrunk(held(&["big"]))), Ok(None));
}

#[test]
fn counters_are_shared_across_the_nodes_of_a_pool() {
    // One counter set (published for all nodes) shared by devices on two nodes: what
    // node-2's device holds is gone for node-1's.
    let slices = || {
        vec![
            counters("counters-1", json!({"allNodes": true}), "pool-1", 3, json!({"shared": {"memory": "8Gi"}})),
            sliced(
                "slice-1",
                on("node-1"),
                "pool-1",
                "driver-a",
                1,
                3,
                vec![part("dev-1", json!({"shared": {"memory": "6Gi"}}))],
            ),
            sliced(
                "slice-2",
                on("node-2"),
                "pool-1",
                "driver-a",
                1,
                3,
                vec![part("dev-2", json!({"shared": {"memory": "6Gi"}}))],
            ),
        ]
    };
    let c = |allocated| Case {
        slices: slices(),
        claims: claim0(vec![exact("req-0", "class-a", 1)]),
        allocated,
        ..Default::default()
    };
    assert_eq!(run(c(vec![])), Ok(one(&["req-0=driver-a/pool-1/dev-1"])));
    assert_eq!(run(c(held(&["dev-2"]))), Ok(None));
    // A request with admin access still needs the counters.
    let admin_claim = Case { claims: claim0(vec![admin("req-0", "class-a", 1)]), ..c(held(&["dev-2"])) };
    assert_eq!(run(admin_claim), Ok(None));
}

#[test]
fn broken_counter_references_make_the_pool_invalid() {
    let c =
        |slices: Vec<Value>| Case { slices, claims: claim0(vec![exact("req-0", "class-a", 1)]), ..Default::default() };
    let devices = |uses: Value| sliced("slice-1", on("node-1"), "pool-1", "driver-a", 1, 2, vec![part("dev-1", uses)]);
    let sets = || counters("counters-1", on("node-1"), "pool-1", 2, json!({"gpu-0": {"memory": "8Gi"}}));
    let unknown_set = vec![sets(), devices(json!({"gpu-9": {"memory": "1Gi"}}))];
    assert_eq!(run(c(unknown_set)), Err(INVALID_POOLS.into()));
    let unknown_counter = vec![sets(), devices(json!({"gpu-0": {"cores": "1"}}))];
    assert_eq!(run(c(unknown_counter)), Err(INVALID_POOLS.into()));
    // The same set name in two slices of the pool.
    let twice = vec![
        counters("counters-1", on("node-1"), "pool-1", 3, json!({"gpu-0": {"memory": "8Gi"}})),
        counters("counters-2", on("node-1"), "pool-1", 3, json!({"gpu-0": {"memory": "8Gi"}})),
        sliced(
            "slice-1",
            on("node-1"),
            "pool-1",
            "driver-a",
            1,
            3,
            vec![part("dev-1", json!({"gpu-0": {"memory": "1Gi"}}))],
        ),
    ];
    assert_eq!(run(c(twice)), Err(INVALID_POOLS.into()));
    // A set of another pool does not count.
    let elsewhere = vec![
        counters("counters-1", on("node-1"), "pool-2", 1, json!({"gpu-0": {"memory": "8Gi"}})),
        slice("slice-1", on("node-1"), "pool-1", "driver-a", vec![part("dev-1", json!({"gpu-0": {"memory": "1Gi"}}))]),
    ];
    assert_eq!(run(c(elsewhere)), Err(INVALID_POOLS.into()));
    // A broken device on another node's slice of the pool spoils the pool here too.
    let other_node = vec![
        counters("counters-1", on("node-1"), "pool-1", 3, json!({"gpu-0": {"memory": "8Gi"}})),
        sliced(
            "slice-1",
            on("node-1"),
            "pool-1",
            "driver-a",
            1,
            3,
            vec![part("dev-1", json!({"gpu-0": {"memory": "1Gi"}}))],
        ),
        sliced(
            "slice-2",
            on("node-2"),
            "pool-1",
            "driver-a",
            1,
            3,
            vec![part("dev-2", json!({"gpu-9": {"memory": "1Gi"}}))],
        ),
    ];
    assert_eq!(run(c(other_node)), Err(INVALID_POOLS.into()));
    // An invalid pool is only the reason when nothing else fits.
    let mut fallback = vec![sets(), devices(json!({"gpu-9": {"memory": "1Gi"}}))];
    fallback.push(slice("slice-9", on("node-1"), "pool-9", "driver-a", vec![device("plain")]));
    assert_eq!(run(c(fallback)), Ok(one(&["req-0=driver-a/pool-9/plain"])));
}

#[test]
fn all_mode_takes_partitions_only_while_counters_last() {
    let c = |allocated| Case {
        slices: gpu("node-1", 2),
        claims: claim0(vec![all("req-0", "class-a")]),
        allocated,
        ..Default::default()
    };
    // All three together exceed the GPU: All cannot be met.
    assert_eq!(run(c(vec![])), Ok(None));
    let halves = Case {
        slices: vec![
            counters("counters-1", on("node-1"), "pool-1", 2, json!({"gpu-0": {"memory": "8Gi"}})),
            sliced(
                "slice-1",
                on("node-1"),
                "pool-1",
                "driver-a",
                1,
                2,
                vec![
                    part("half-1", json!({"gpu-0": {"memory": "4Gi"}})),
                    part("half-2", json!({"gpu-0": {"memory": "4Gi"}})),
                ],
            ),
        ],
        claims: claim0(vec![all("req-0", "class-a")]),
        ..Default::default()
    };
    assert_eq!(run(halves), Ok(one(&["req-0=driver-a/pool-1/half-1", "req-0=driver-a/pool-1/half-2"])));
}

#[test]
fn without_the_gate_partitions_and_per_device_slices_are_left_alone() {
    let off = Features { partitionable: false, ..Features::default() };
    let run_with = |case: Case, features: Features| -> Result<Option<usize>, String> {
        let mut st = DraState::default();
        for c in case.classes {
            st.upsert_class(DeviceClass::from_api(&serde_json::from_value(c).map_err(|e| e.to_string())?)?);
        }
        for s in case.slices {
            st.upsert_slice(Slice::from_api(&serde_json::from_value(s).map_err(|e| e.to_string())?)?);
        }
        let claims: Vec<std::sync::Arc<Claim>> = case
            .claims
            .into_iter()
            .map(|c| Claim::from_api(&serde_json::from_value(c).map_err(|e| e.to_string())?).map(std::sync::Arc::new))
            .collect::<Result<_, _>>()?;
        match allocate(&st, "node-1", &Labels::default(), &claims, features)? {
            Outcome::Allocated(a) => Ok(Some(a.len())),
            _ => Ok(None),
        }
    };
    let partitions =
        || Case { slices: gpu("node-1", 2), claims: claim0(vec![exact("req-0", "class-a", 1)]), ..Default::default() };
    assert_eq!(run_with(partitions(), Features::default()), Ok(Some(1)));
    assert_eq!(run_with(partitions(), off), Ok(None));
    let per_device = || Case {
        slices: vec![slice(
            "slice-1",
            json!({"perDeviceNodeSelection": true}),
            "pool-1",
            "driver-a",
            vec![json!({"name": "dev-1", "nodeName": "node-1"})],
        )],
        claims: claim0(vec![exact("req-0", "class-a", 1)]),
        ..Default::default()
    };
    assert_eq!(run_with(per_device(), Features::default()), Ok(Some(1)));
    assert_eq!(run_with(per_device(), off), Ok(None));
}

/// A device consuming counters that also publishes them as its capacity (what the
/// selectors below read), optionally with more fields.
fn sized(name: &str, uses: Value, extra: Value) -> Value {
    let mut d = part(name, uses.clone());
    let mut capacity = serde_json::Map::new();
    for counters in uses.as_object().into_iter().flat_map(|m| m.values()) {
        for (k, v) in counters.as_object().into_iter().flatten() {
            capacity.insert(k.clone(), json!({"value": v}));
        }
    }
    d["capacity"] = Value::Object(capacity);
    if let (Some(d), Some(extra)) = (d.as_object_mut(), extra.as_object()) {
        d.extend(extra.clone());
    }
    d
}

fn memory_at_least(q: &str) -> Value {
    json!([{"cel": {"expression": format!("device.capacity[\"driver-a\"].memory.compareTo(quantity(\"{q}\")) >= 0")}}])
}

fn prioritized_memory(name: &str) -> Value {
    first_available(
        name,
        vec![
            with(sub("subReq-0", "class-a", 1), &["selectors"], memory_at_least("6Gi")),
            with(sub("subReq-1", "class-a", 1), &["selectors"], memory_at_least("4Gi")),
        ],
    )
}

fn devices_in(name: &str, node: Value, pool: &str, count: i64, devices: Vec<Value>) -> Value {
    sliced(name, node, pool, "driver-a", 1, count, devices)
}

#[test]
fn kube_scheduler_partitionable_cases() {
    let mem = |set: &str, q: &str| json!({ set: {"memory": q} });
    let three = |a: &str, b: &str, c: &str| {
        vec![
            sized("device-1", mem("cs1", a), json!({})),
            sized("device-2", mem("cs1", b), json!({})),
            sized("device-3", mem("cs1", c), json!({})),
        ]
    };
    let cases: Vec<(&str, Case, Result<Option<Vec<Vec<String>>>, String>)> = vec![
        (
            "single device",
            Case {
                slices: vec![
                    devices_in("slice-1", on("node-1"), "pool-1", 2, vec![part("device-1", mem("cs1", "4Gi"))]),
                    counters("slice-2", on("node-1"), "pool-1", 2, mem("cs1", "8Gi")),
                ],
                claims: claim0(vec![exact("req-0", "class-a", 1)]),
                ..Default::default()
            },
            Ok(one(&["req-0=driver-a/pool-1/device-1"])),
        ),
        (
            "prioritized list",
            Case {
                slices: vec![
                    devices_in("slice-1", on("node-1"), "pool-1", 2, three("4Gi", "6Gi", "4Gi")),
                    counters("slice-2", on("node-1"), "pool-1", 2, mem("cs1", "8Gi")),
                ],
                claims: claim0(vec![exact("req-0", "class-a", 1), prioritized_memory("req-1")]),
                ..Default::default()
            },
            Ok(one(&["req-0=driver-a/pool-1/device-1", "req-1/subReq-1=driver-a/pool-1/device-3"])),
        ),
        (
            "multiple devices",
            Case {
                slices: vec![
                    devices_in("slice-1", on("node-1"), "pool-1", 2, three("4Gi", "6Gi", "4Gi")),
                    counters("slice-2", on("node-1"), "pool-1", 2, mem("cs1", "8Gi")),
                ],
                claims: claim0(vec![exact("req-0", "class-a", 1), exact("req-1", "class-a", 1)]),
                ..Default::default()
            },
            Ok(one(&["req-0=driver-a/pool-1/device-1", "req-1=driver-a/pool-1/device-3"])),
        ),
        (
            "multiple counter sets",
            Case {
                slices: vec![
                    devices_in(
                        "slice-1",
                        on("node-1"),
                        "pool-1",
                        2,
                        vec![
                            sized("device-1", json!({"cs1": {"memory": "4Gi"}, "cs2": {"cpus": "4"}}), json!({})),
                            sized("device-2", json!({"cs1": {"memory": "6Gi"}, "cs2": {"cpus": "6"}}), json!({})),
                            sized("device-3", json!({"cs1": {"memory": "4Gi"}, "cs2": {"cpus": "4"}}), json!({})),
                        ],
                    ),
                    counters(
                        "slice-2",
                        on("node-1"),
                        "pool-1",
                        2,
                        json!({"cs1": {"memory": "18Gi"}, "cs2": {"cpus": "8"}}),
                    ),
                ],
                claims: claim0(vec![exact("req-0", "class-a", 1), prioritized_memory("req-1")]),
                ..Default::default()
            },
            Ok(one(&["req-0=driver-a/pool-1/device-1", "req-1/subReq-1=driver-a/pool-1/device-3"])),
        ),
        (
            "multiple counters",
            Case {
                slices: vec![
                    devices_in(
                        "slice-1",
                        on("node-1"),
                        "pool-1",
                        2,
                        vec![
                            sized(
                                "device-1",
                                json!({"cs1": {"memory": "4Gi", "cpus": "6"}, "cs2": {"cpus": "4", "memory": "2Gi"}}),
                                json!({}),
                            ),
                            sized(
                                "device-2",
                                json!({"cs1": {"memory": "6Gi", "cpus": "4"}, "cs2": {"cpus": "6", "memory": "6Gi"}}),
                                json!({}),
                            ),
                            sized(
                                "device-3",
                                json!({"cs1": {"memory": "4Gi", "cpus": "4"}, "cs2": {"cpus": "4", "memory": "4Gi"}}),
                                json!({}),
                            ),
                        ],
                    ),
                    counters(
                        "slice-2",
                        on("node-1"),
                        "pool-1",
                        2,
                        json!({"cs1": {"cpus": "8", "memory": "18Gi"}, "cs2": {"cpus": "12", "memory": "18Gi"}}),
                    ),
                ],
                claims: claim0(vec![exact("req-0", "class-a", 1), exact("req-1", "class-a", 1)]),
                ..Default::default()
            },
            Ok(one(&["req-0=driver-a/pool-1/device-2", "req-1=driver-a/pool-1/device-3"])),
        ),
        (
            "multiple pools, some devices allocated",
            Case {
                slices: vec![
                    devices_in(
                        "slice-1",
                        on("node-1"),
                        "pool-1",
                        2,
                        vec![
                            sized("device-1", json!({"cs1": {"cpus": "6", "memory": "4Gi"}}), json!({})),
                            sized("device-2", json!({"cs1": {"cpus": "4", "memory": "6Gi"}}), json!({})),
                            sized("device-3", json!({"cs1": {"cpus": "4", "memory": "4Gi"}}), json!({})),
                        ],
                    ),
                    counters("slice-2", on("node-1"), "pool-1", 2, json!({"cs1": {"cpus": "8", "memory": "18Gi"}})),
                    devices_in(
                        "slice-3",
                        on("node-1"),
                        "pool-2",
                        2,
                        vec![
                            sized("device-1", json!({"cs1": {"cpus": "6", "memory": "4Gi"}}), json!({})),
                            sized("device-2", json!({"cs1": {"cpus": "1", "memory": "7Gi"}}), json!({})),
                            sized("device-3", json!({"cs1": {"cpus": "1", "memory": "7Gi"}}), json!({})),
                        ],
                    ),
                    counters("slice-4", on("node-1"), "pool-2", 2, json!({"cs1": {"cpus": "8", "memory": "18Gi"}})),
                ],
                allocated: vec![
                    ("driver-a", "pool-1", "device-2"),
                    ("driver-a", "pool-1", "device-3"),
                    ("driver-a", "pool-2", "device-1"),
                ],
                claims: claim0(vec![exact("req-0", "class-a", 1), exact("req-1", "class-a", 1)]),
                ..Default::default()
            },
            Ok(one(&["req-0=driver-a/pool-2/device-2", "req-1=driver-a/pool-2/device-3"])),
        ),
        (
            "unused counters in a set",
            Case {
                slices: vec![
                    devices_in(
                        "slice-1",
                        on("node-1"),
                        "pool-1",
                        2,
                        vec![
                            part("device-1", mem("cs1", "5Gi")),
                            part("device-2", mem("cs1", "4Gi")),
                            part("device-3", mem("cs1", "4Gi")),
                        ],
                    ),
                    counters("slice-2", on("node-1"), "pool-1", 2, json!({"cs1": {"memory": "8Gi", "unused": "1Gi"}})),
                ],
                claims: claim0(vec![exact("req-0", "class-a", 2)]),
                ..Default::default()
            },
            Ok(one(&["req-0=driver-a/pool-1/device-2", "req-0=driver-a/pool-1/device-3"])),
        ),
        (
            "no counters left (whole pool, counted right)",
            Case {
                slices: vec![
                    devices_in(
                        "slice-1",
                        on("node-1"),
                        "pool-1",
                        2,
                        vec![
                            sized("device-1", mem("cs1", "4Gi"), json!({})),
                            sized("device-2", mem("cs1", "16Gi"), json!({})),
                        ],
                    ),
                    counters("slice-2", on("node-1"), "pool-1", 2, mem("cs1", "18Gi")),
                ],
                allocated: vec![("driver-a", "pool-1", "device-2")],
                claims: claim0(vec![exact("req-0", "class-a", 1)]),
                ..Default::default()
            },
            Ok(None),
        ),
        (
            "per-device node name",
            Case {
                slices: vec![
                    devices_in(
                        "slice-1",
                        json!({"perDeviceNodeSelection": true}),
                        "pool-1",
                        2,
                        vec![
                            sized("device-1", mem("cs1", "4Gi"), json!({"nodeName": "node-1"})),
                            sized("device-2", mem("cs1", "6Gi"), json!({"nodeName": "node-2"})),
                        ],
                    ),
                    counters("slice-2", json!({"perDeviceNodeSelection": true}), "pool-1", 2, mem("cs1", "18Gi")),
                ],
                claims: claim0(vec![prioritized_memory("req-0")]),
                ..Default::default()
            },
            Ok(one(&["req-0/subReq-1=driver-a/pool-1/device-1"])),
        ),
        (
            "attribute selector with backtracking",
            Case {
                slices: vec![
                    devices_in(
                        "slice-1",
                        on("node-1"),
                        "pool-1",
                        2,
                        vec![
                            with(
                                part("device-1", json!({"cs1": {"cpu1": "1"}, "cs2": {"mem": "10Gi"}})),
                                &["attributes"],
                                json!({"special": {"bool": true}}),
                            ),
                            with(
                                part("device-2", json!({"cs1": {"cpu2": "1"}, "cs2": {"mem": "10Gi"}})),
                                &["attributes"],
                                json!({"special": {"bool": false}}),
                            ),
                            with(
                                part("device-3", json!({"cs1": {"cpu3": "1"}, "cs2": {"mem": "10Gi"}})),
                                &["attributes"],
                                json!({"special": {"bool": false}}),
                            ),
                        ],
                    ),
                    counters(
                        "slice-2",
                        on("node-1"),
                        "pool-1",
                        2,
                        json!({"cs1": {"cpu1": "1", "cpu2": "1", "cpu3": "1"}, "cs2": {"mem": "30Gi"}}),
                    ),
                ],
                claims: claim0(vec![
                    exact("req-0", "class-a", 2),
                    with(
                        exact("req-1", "class-a", 1),
                        &["exactly", "selectors"],
                        json!([{"cel": {"expression": "device.attributes[\"driver-a\"].special"}}]),
                    ),
                ]),
                ..Default::default()
            },
            Ok(one(&[
                "req-0=driver-a/pool-1/device-2",
                "req-0=driver-a/pool-1/device-3",
                "req-1=driver-a/pool-1/device-1",
            ])),
        ),
        (
            "devices on two nodes share one set",
            Case {
                slices: vec![
                    counters("slice-1", on("node-1"), "pool-1", 3, mem("cs1", "8Gi")),
                    devices_in(
                        "slice-2",
                        on("node-1"),
                        "pool-1",
                        3,
                        vec![
                            sized("device-1", mem("cs1", "6Gi"), json!({})),
                            sized("device-2", mem("cs1", "2Gi"), json!({})),
                        ],
                    ),
                    devices_in("slice-3", on("node-2"), "pool-1", 3, vec![part("device-3", mem("cs1", "6Gi"))]),
                ],
                allocated: vec![("driver-a", "pool-1", "device-3")],
                claims: claim0(vec![first_available(
                    "req-0",
                    vec![
                        with(sub("subReq-0", "class-a", 1), &["selectors"], memory_at_least("6Gi")),
                        with(sub("subReq-1", "class-a", 1), &["selectors"], memory_at_least("2Gi")),
                    ],
                )]),
                ..Default::default()
            },
            Ok(one(&["req-0/subReq-1=driver-a/pool-1/device-2"])),
        ),
        (
            "same set name in two slices",
            Case {
                slices: vec![
                    devices_in("slice-1", on("node-1"), "pool-1", 4, vec![device("device-1")]),
                    counters("slice-2", on("node-1"), "pool-1", 4, json!({"cs1": {}})),
                    devices_in("slice-3", on("node-1"), "pool-1", 4, vec![device("device-2")]),
                    counters("slice-4", on("node-1"), "pool-1", 4, json!({"cs1": {}})),
                ],
                claims: claim0(vec![exact("req-0", "class-a", 1)]),
                ..Default::default()
            },
            Err(INVALID_POOLS.into()),
        ),
        (
            "unknown counter on a slice serving another node",
            Case {
                slices: vec![
                    counters("slice-1", on("node-1"), "pool-1", 3, mem("cs1", "8Gi")),
                    devices_in(
                        "slice-2",
                        on("node-1"),
                        "pool-1",
                        3,
                        vec![sized("device-1", mem("cs1", "6Gi"), json!({}))],
                    ),
                    devices_in("slice-3", on("node-2"), "pool-1", 3, vec![part("device-3", mem("cs2", "6Gi"))]),
                ],
                claims: claim0(vec![exact("req-0", "class-a", 1)]),
                ..Default::default()
            },
            Err(INVALID_POOLS.into()),
        ),
    ];
    for (name, case, want) in cases {
        let mut got = run(case);
        if let Ok(Some(claims)) = &mut got {
            for c in claims.iter_mut() {
                c.sort();
            }
        }
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn pools_whose_devices_wait_for_binding_conditions_come_last() {
    let waiting = json!({"bindingConditions": ["IsPrepared"], "bindingFailureConditions": ["Failed"]});
    let c = |count| Case {
        slices: vec![
            slice(
                "slice-1",
                on("node-1"),
                "pool-1",
                "driver-a",
                vec![with(device("device-1"), &["bindingConditions"], waiting["bindingConditions"].clone())],
            ),
            slice("slice-2", on("node-1"), "pool-2", "driver-a", vec![device("device-2")]),
        ],
        claims: claim0(vec![exact("req-0", "class-a", count)]),
        ..Default::default()
    };
    assert_eq!(run(c(1)), Ok(one(&["req-0=driver-a/pool-2/device-2"])));
    assert_eq!(run(c(2)), Ok(one(&["req-0=driver-a/pool-2/device-2", "req-0=driver-a/pool-1/device-1"])));
}

#[test]
fn nodes_reaching_the_same_devices_share_one_list_and_others_do_not() {
    let region = json!({"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "region", "operator": "In", "values": ["region-1"]}]}]}});
    let mut st = DraState::default();
    for s in [
        slice("slice-1", region, "pool-1", "driver-a", vec![device("device-1")]),
        slice("slice-2", on("node-3"), "pool-2", "driver-a", vec![device("device-2")]),
    ] {
        st.upsert_slice(Slice::from_api(&serde_json::from_value(s).unwrap()).unwrap());
    }
    let labels = |region: &str| -> Labels { [("region".to_string(), region.to_string())].into_iter().collect() };
    let reach = |node: &str, region: &str| node_devices(&st, node, &labels(region), true);
    let (a, b) = (reach("node-1", "region-1"), reach("node-2", "region-1"));
    assert!(Arc::ptr_eq(&a, &b), "same devices, one list");
    assert_eq!(a.devices.len(), 1);
    // Another region reaches nothing; a node with its own slice reaches more.
    let other = reach("node-4", "region-2");
    assert!(other.devices.is_empty() && !Arc::ptr_eq(&a, &other));
    let own = reach("node-3", "region-1");
    assert_eq!(own.devices.len(), 2);
    assert!(!Arc::ptr_eq(&a, &own));
    // A node's labels changing is seen at once.
    assert!(reach("node-1", "region-2").devices.is_empty());
}

/// kube-scheduler's remaining partitionable cases: the gate off leaves devices without
/// counters allocatable, per-device node selectors, and partitions with binding conditions.
#[test]
fn kube_scheduler_partitionable_cases_with_selectors_and_binding_conditions() {
    let memory = |q: &str| json!({"counter-set-1": {"memory": q}});
    // partitionable-devices-disabled-other-device-do-not-consume-counters
    let case = Case {
        slices: vec![
            sliced(
                "slice-1",
                on("node-1"),
                "pool-1",
                "driver-a",
                1,
                2,
                vec![part("device-1", memory("4Gi")), device("device-2")],
            ),
            counters("slice-2", on("node-1"), "pool-1", 2, json!({"counter-set-1": {"memory": "18Gi"}})),
        ],
        claims: claim0(vec![exact("req-0", "class-a", 1)]),
        features: Features { partitionable: false, ..Features::default() },
        ..Default::default()
    };
    assert_eq!(run(case), Ok(one(&["req-0=driver-a/pool-1/device-2"])));

    // partitionable-devices-per-device-node-selection-node-selector
    let region = json!({"nodeSelectorTerms": [{"matchExpressions": [{"key": "region", "operator": "In", "values": ["region-1"]}]}]});
    let per_device = json!({"perDeviceNodeSelection": true});
    let case = Case {
        slices: vec![
            sliced(
                "slice-1",
                per_device.clone(),
                "pool-1",
                "driver-a",
                1,
                2,
                vec![with(part("device-1", memory("4Gi")), &["nodeSelector"], region.clone())],
            ),
            counters("slice-2", per_device.clone(), "pool-1", 2, json!({"counter-set-1": {"memory": "18Gi"}})),
        ],
        claims: claim0(vec![exact("req-0", "class-a", 1)]),
        ..Default::default()
    };
    let result = run_full(case).expect("no error").expect("allocated");
    assert_eq!(result[0].node_selector, Some(serde_json::from_value(region.clone()).expect("selector")));

    // ...-node-selector-multiple-devices: a device local to the node makes it local.
    let case = Case {
        slices: vec![
            sliced(
                "slice-1",
                per_device.clone(),
                "pool-1",
                "driver-a",
                1,
                2,
                vec![
                    with(part("device-1", memory("4Gi")), &["nodeSelector"], region),
                    with(part("device-2", memory("4Gi")), &["nodeName"], json!("node-1")),
                    with(part("device-3", memory("4Gi")), &["allNodes"], json!(true)),
                ],
            ),
            counters("slice-2", per_device, "pool-1", 2, json!({"counter-set-1": {"memory": "18Gi"}})),
            sliced(
                "slice-3",
                on("node-1"),
                "pool-2",
                "driver-b",
                1,
                2,
                (1..=3).map(|i| part(&format!("device-{i}"), json!({"counter-set-2": {"memory": "4Gi"}}))).collect(),
            ),
            with(
                counters("slice-4", on("node-1"), "pool-2", 2, json!({"counter-set-2": {"memory": "12Gi"}})),
                &["spec", "driver"],
                json!("driver-b"),
            ),
        ],
        claims: claim0(vec![exact("req-0", "class-a", 3), exact("req-1", "class-b", 3)]),
        ..Default::default()
    };
    let result = run_full(case).expect("no error").expect("allocated");
    assert_eq!(result[0].devices.as_ref().and_then(|d| d.results.as_ref()).map(Vec::len), Some(6));
    assert_eq!(result[0].node_selector, Some(local_selector("node-1")));

    // Partitions with binding conditions keep them, per device.
    let conditioned = |d: Value, ready: &str, failed: &str| {
        with(with(d, &["bindingConditions"], json!([ready])), &["bindingFailureConditions"], json!([failed]))
    };
    let sized = |name: &str, q: &str| with(part(name, memory(q)), &["capacity"], json!({"memory": {"value": q}}));
    let case = Case {
        slices: vec![
            sliced(
                "slice-1",
                on("node-1"),
                "pool-1",
                "driver-a",
                1,
                2,
                vec![
                    conditioned(sized("device-1", "2Gi"), "IsPrepare", "BindingFailed"),
                    sized("device-2", "2Gi"),
                    conditioned(sized("device-3", "4Gi"), "IsReady", "BindingTimeout"),
                ],
            ),
            counters("slice-2", on("node-1"), "pool-1", 2, json!({"counter-set-1": {"memory": "8Gi"}})),
        ],
        claims: claim0(vec![exact("req-0", "class-a", 3)]),
        ..Default::default()
    };
    let result = run_full(case).expect("no error").expect("allocated");
    let got: Vec<(String, Option<Vec<String>>)> = result[0]
        .devices
        .as_ref()
        .and_then(|d| d.results.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|r| (r.device, r.binding_conditions))
        .collect();
    assert_eq!(
        got,
        [
            ("device-1".to_string(), Some(vec!["IsPrepare".to_string()])),
            ("device-2".to_string(), None),
            ("device-3".to_string(), Some(vec!["IsReady".to_string()])),
        ]
    );
    // ...-and-taints: an untolerated taint leaves two devices too few; tolerated, both go.
    let taint = json!([{"key": "key1", "value": "value1", "effect": "NoSchedule"}]);
    let tainted_pair = |request: Value| Case {
        slices: vec![
            sliced(
                "slice-1",
                on("node-1"),
                "pool-1",
                "driver-a",
                1,
                2,
                vec![
                    with(
                        conditioned(sized("device-1", "4Gi"), "IsPrepare", "BindingFailed"),
                        &["taints"],
                        taint.clone(),
                    ),
                    sized("device-2", "4Gi"),
                ],
            ),
            counters("slice-2", on("node-1"), "pool-1", 2, json!({"counter-set-1": {"memory": "8Gi"}})),
        ],
        claims: claim0(vec![request]),
        ..Default::default()
    };
    assert_eq!(run(tainted_pair(exact("req-0", "class-a", 2))), Ok(None));
    let toleration = json!([{"key": "key1", "operator": "Exists", "effect": "NoSchedule"}]);
    let result = run_full(tainted_pair(tolerating(exact("req-0", "class-a", 2), toleration.clone())))
        .expect("no error")
        .expect("allocated");
    let results = result[0].devices.as_ref().and_then(|d| d.results.clone()).unwrap_or_default();
    assert_eq!(results.len(), 2);
    for r in &results {
        assert_eq!(serde_json::to_value(&r.tolerations).expect("json"), toleration, "{}", r.device);
    }
    assert!(results[0].binding_conditions.is_some() && results[1].binding_conditions.is_none());
}
