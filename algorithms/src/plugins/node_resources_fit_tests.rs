use super::*;
use crate::builders::{NodeBuilder, PodBuilder, filter_one, score_all, snapshot};
use crate::status::Code;
use k8s_openapi::api::core::v1 as core;

fn fit_node() -> core::Node {
    NodeBuilder::new("n")
        .capacity("10m", "20", "32")
        .resource("example.com/aaa", "5")
        .resource("ephemeral-storage", "20")
        .resource("hugepages-2Mi", "5")
        .build()
}

fn used(cpu: &str, mem: &str) -> core::Pod {
    PodBuilder::new("used").no_containers().container(cpu, mem).build()
}

#[test]
fn filter_table() {
    struct Case {
        name: &'static str,
        pod: PodBuilder,
        existing: Vec<core::Pod>,
        args: NodeResourcesFitArgs,
        code: Code,
        reasons: Vec<&'static str>,
    }
    let none = NodeResourcesFitArgs::default();
    let cases = vec![
        Case {
            name: "pod without requests fits a full node",
            pod: PodBuilder::new("p").no_containers(),
            existing: vec![used("10m", "20")],
            args: none.clone(),
            code: Code::Success,
            reasons: vec![],
        },
        Case {
            name: "cpu and memory both short",
            pod: PodBuilder::new("p").no_containers().container("1m", "1"),
            existing: vec![used("10m", "20")],
            args: none.clone(),
            code: Code::Unschedulable,
            reasons: vec!["Insufficient cpu", "Insufficient memory"],
        },
        Case {
            name: "init container larger than app containers counts",
            pod: PodBuilder::new("p").no_containers().container("1m", "1").init_container("3m", "1", false),
            existing: vec![used("8m", "19")],
            args: none.clone(),
            code: Code::Unschedulable,
            reasons: vec!["Insufficient cpu"],
        },
        Case {
            name: "max of init and app containers fits exactly",
            pod: PodBuilder::new("p").no_containers().container("4m", "1").init_container("5m", "1", false),
            existing: vec![used("5m", "19")],
            args: none.clone(),
            code: Code::Success,
            reasons: vec![],
        },
        Case {
            name: "sidecar adds to app containers",
            pod: PodBuilder::new("p").no_containers().container("3m", "1").init_container("3m", "1", true),
            existing: vec![used("5m", "1")],
            args: none.clone(),
            code: Code::Unschedulable,
            reasons: vec!["Insufficient cpu"],
        },
        Case {
            name: "extended resource above allocatable is unresolvable",
            pod: PodBuilder::new("p").no_containers().container("", "").req_list(&[("example.com/aaa", "10")]),
            existing: vec![],
            args: none.clone(),
            code: Code::UnschedulableAndUnresolvable,
            reasons: vec!["Insufficient example.com/aaa"],
        },
        Case {
            name: "extended resource used up is unschedulable",
            pod: PodBuilder::new("p").no_containers().container("", "").req_list(&[("example.com/aaa", "1")]),
            existing: vec![
                PodBuilder::new("u").no_containers().container("", "").req_list(&[("example.com/aaa", "5")]).build(),
            ],
            args: none.clone(),
            code: Code::Unschedulable,
            reasons: vec!["Insufficient example.com/aaa"],
        },
        Case {
            name: "ignored extended resource is not checked",
            pod: PodBuilder::new("p").no_containers().container("", "").req_list(&[("example.com/bbb", "1")]),
            existing: vec![],
            args: NodeResourcesFitArgs { ignored_resources: vec!["example.com/bbb".into()], ..Default::default() },
            code: Code::Success,
            reasons: vec![],
        },
        Case {
            name: "ignored group skips its extended resources",
            pod: PodBuilder::new("p").no_containers().container("", "").req_list(&[("example.com/bbb", "1")]),
            existing: vec![],
            args: NodeResourcesFitArgs { ignored_resource_groups: vec!["example.com".into()], ..Default::default() },
            code: Code::Success,
            reasons: vec![],
        },
        Case {
            name: "ignored groups never cover kubernetes.io resources",
            pod: PodBuilder::new("p").no_containers().container("", "").req_list(&[("kubernetes.io/something", "1")]),
            existing: vec![],
            args: NodeResourcesFitArgs { ignored_resource_groups: vec!["kubernetes.io".into()], ..Default::default() },
            code: Code::UnschedulableAndUnresolvable,
            reasons: vec!["Insufficient kubernetes.io/something"],
        },
        Case {
            name: "hugepages above allocatable",
            pod: PodBuilder::new("p").no_containers().container("", "").req_list(&[("hugepages-2Mi", "10")]),
            existing: vec![],
            args: none.clone(),
            code: Code::UnschedulableAndUnresolvable,
            reasons: vec!["Insufficient hugepages-2Mi"],
        },
        Case {
            name: "ephemeral storage short",
            pod: PodBuilder::new("p").no_containers().container("", "").req_list(&[("ephemeral-storage", "10")]),
            existing: vec![
                PodBuilder::new("u").no_containers().container("", "").req_list(&[("ephemeral-storage", "15")]).build(),
            ],
            args: none.clone(),
            code: Code::Unschedulable,
            reasons: vec!["Insufficient ephemeral-storage"],
        },
        Case {
            name: "request above a node's whole cpu is unresolvable",
            pod: PodBuilder::new("p").no_containers().container("11m", "1"),
            existing: vec![],
            args: none.clone(),
            code: Code::UnschedulableAndUnresolvable,
            reasons: vec!["Insufficient cpu"],
        },
    ];
    for c in cases {
        let plugin = NodeResourcesFit::new(&c.args).unwrap();
        let st = filter_one(&plugin, &c.pod.build(), &fit_node(), &c.existing);
        assert_eq!(st.code, c.code, "{}", c.name);
        let reasons: Vec<String> = st.reasons.iter().map(|r| r.to_string()).collect();
        assert_eq!(reasons, c.reasons, "{}", c.name);
    }
}

#[test]
fn too_many_pods_applies_even_without_requests() {
    let node = NodeBuilder::new("n").capacity("10", "10Gi", "1").build();
    let st =
        filter_one(&NodeResourcesFit::default(), &PodBuilder::new("p").no_containers().build(), &node, &[used("", "")]);
    assert_eq!(st.code, Code::Unschedulable);
    assert_eq!(st.reasons.as_slice(), [ERR_REASON_TOO_MANY_PODS]);
}

#[test]
fn overhead_counts_toward_fit() {
    let mut pod = PodBuilder::new("p").no_containers().container("1m", "1").build();
    if let Some(spec) = pod.spec.as_mut() {
        spec.overhead = Some(
            [
                ("cpu".to_string(), k8s_openapi::apimachinery::pkg::api::resource::Quantity("1m".into())),
                ("memory".to_string(), k8s_openapi::apimachinery::pkg::api::resource::Quantity("15".into())),
            ]
            .into(),
        );
    }
    let st = filter_one(&NodeResourcesFit::default(), &pod, &fit_node(), &[used("5m", "5")]);
    assert_eq!(st.reasons.as_slice(), ["Insufficient memory"]);
}

fn on(node: &str, pod: PodBuilder) -> core::Pod {
    pod.node_name(node).build()
}

fn two_containers() -> PodBuilder {
    PodBuilder::new("p").no_containers().container("1000m", "2000").container("2000m", "3000")
}

fn args(kind: &str, resources: serde_json::Value, shape: Option<serde_json::Value>) -> NodeResourcesFitArgs {
    let mut strategy = serde_json::json!({"type": kind, "resources": resources});
    if let Some(s) = shape {
        strategy["requestedToCapacityRatio"] = serde_json::json!({"shape": s});
    }
    serde_json::from_value(serde_json::json!({"scoringStrategy": strategy})).unwrap()
}

#[test]
fn least_allocated_table() {
    let cpu_mem = serde_json::json!([{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]);
    let small = || {
        vec![
            NodeBuilder::new("n1").capacity("4000m", "10000", "110").build(),
            NodeBuilder::new("n2").capacity("6000m", "10000", "110").build(),
        ]
    };
    let big = || {
        vec![
            NodeBuilder::new("n1").capacity("10000m", "20000", "110").build(),
            NodeBuilder::new("n2").capacity("10000m", "20000", "110").build(),
        ]
    };
    let cpu_only = |n: &str, name: &str| on(n, PodBuilder::new(name).no_containers().container("3000m", "0"));
    let cpu_mem_pod = |n: &str, name: &str| on(n, PodBuilder::new(name).no_containers().container("3000m", "5000"));
    let cases: Vec<(&str, PodBuilder, Vec<core::Node>, Vec<core::Pod>, serde_json::Value, Vec<i64>)> = vec![
        (
            "nothing requested, nothing scheduled",
            PodBuilder::new("p").no_containers(),
            vec![
                NodeBuilder::new("n1").capacity("4000m", "10000", "110").build(),
                NodeBuilder::new("n2").capacity("4000m", "10000", "110").build(),
            ],
            vec![],
            cpu_mem.clone(),
            vec![100, 100],
        ),
        ("requested, nothing scheduled", two_containers(), small(), vec![], cpu_mem.clone(), vec![37, 50]),
        (
            "nothing requested, pods scheduled",
            PodBuilder::new("p").no_containers(),
            big(),
            vec![cpu_only("n1", "a"), cpu_only("n1", "b"), cpu_only("n2", "c"), cpu_mem_pod("n2", "d")],
            cpu_mem.clone(),
            vec![70, 57],
        ),
        (
            "requested, pods scheduled",
            two_containers(),
            big(),
            vec![cpu_only("n1", "a"), cpu_mem_pod("n2", "b")],
            cpu_mem.clone(),
            vec![57, 45],
        ),
        (
            "requested beyond capacity scores zero for that resource",
            PodBuilder::new("p").no_containers().container("3000m", "0"),
            vec![
                NodeBuilder::new("n1").capacity("4000m", "10000", "110").build(),
                NodeBuilder::new("n2").capacity("4000m", "10000", "110").build(),
            ],
            vec![cpu_only("n1", "a"), cpu_mem_pod("n2", "b")],
            cpu_mem.clone(),
            vec![50, 25],
        ),
        (
            "memory weighs double",
            two_containers(),
            small(),
            vec![],
            serde_json::json!([{"name": "memory", "weight": 2}, {"name": "cpu", "weight": 1}]),
            vec![41, 50],
        ),
    ];
    for (name, pod, nodes, existing, resources, want) in cases {
        let plugin = NodeResourcesFit::new(&args("LeastAllocated", resources, None)).unwrap();
        let snap = snapshot(&nodes, &existing);
        assert_eq!(score_all(&plugin, &pod.build(), &snap), want, "{name}");
    }
}

#[test]
fn least_allocated_scores_requested_extended_resources() {
    let nodes = vec![
        NodeBuilder::new("n1").capacity("6000m", "10000", "110").resource("nvidia.com/gpu", "4").build(),
        NodeBuilder::new("n2").capacity("6000m", "10000", "110").resource("nvidia.com/gpu", "10").build(),
    ];
    let resources = serde_json::json!([{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}, {"name": "nvidia.com/gpu", "weight": 1}]);
    let plugin = NodeResourcesFit::new(&args("LeastAllocated", resources, None)).unwrap();
    let pod =
        PodBuilder::new("p").no_containers().container("3000m", "5000").req_list(&[("nvidia.com/gpu", "2")]).build();
    assert_eq!(score_all(&plugin, &pod, &snapshot(&nodes, &[])), vec![50, 60]);
    // Not requested: the extended resource is left out.
    let plain = PodBuilder::new("p").no_containers().container("3000m", "5000").build();
    assert_eq!(score_all(&plugin, &plain, &snapshot(&nodes, &[])), vec![50, 50]);
}

#[test]
fn most_allocated_table() {
    let cpu_mem = serde_json::json!([{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]);
    let plugin = NodeResourcesFit::new(&args("MostAllocated", cpu_mem, None)).unwrap();
    let nodes = vec![
        NodeBuilder::new("n1").capacity("4000m", "10000", "110").build(),
        NodeBuilder::new("n2").capacity("6000m", "10000", "110").build(),
    ];
    assert_eq!(score_all(&plugin, &two_containers().build(), &snapshot(&nodes, &[])), vec![62, 50]);

    let nodes = vec![
        NodeBuilder::new("n1").capacity("5000m", "10000", "110").build(),
        NodeBuilder::new("n2").capacity("10000m", "9000", "110").build(),
    ];
    let pod = PodBuilder::new("p").no_containers().container("2000m", "4000").container("3000m", "5000").build();
    assert_eq!(score_all(&plugin, &pod, &snapshot(&nodes, &[])), vec![95, 75]);

    // Pods without requests count the 100m / 200Mi defaults; over-use is clamped.
    let nodes = vec![
        NodeBuilder::new("n1").capacity("250m", "1000Mi", "110").build(),
        NodeBuilder::new("n2").capacity("250m", "1000Mi", "110").build(),
    ];
    let bare = |n: &str| PodBuilder::new(n).no_containers().container("", "");
    let existing = vec![on("n1", bare("a")), on("n1", bare("b"))];
    assert_eq!(score_all(&plugin, &bare("p").build(), &snapshot(&nodes, &existing)), vec![80, 30]);
}

#[test]
fn requested_to_capacity_ratio_table() {
    let cpu_mem = serde_json::json!([{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]);
    let shape = serde_json::json!([{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]);
    let plugin = NodeResourcesFit::new(&args("RequestedToCapacityRatio", cpu_mem, Some(shape))).unwrap();
    let nodes = vec![
        NodeBuilder::new("n1").capacity("4000m", "10000", "110").build(),
        NodeBuilder::new("n2").capacity("6000m", "10000", "110").build(),
    ];
    assert_eq!(score_all(&plugin, &two_containers().build(), &snapshot(&nodes, &[])), vec![38, 50]);
    assert_eq!(
        score_all(&plugin, &PodBuilder::new("p").no_containers().build(), &snapshot(&nodes, &[])),
        vec![100, 100]
    );

    let foo = serde_json::json!([{"name": "intel.com/foo", "weight": 1}]);
    let up = serde_json::json!([{"utilization": 0, "score": 0}, {"utilization": 100, "score": 1}]);
    let plugin = NodeResourcesFit::new(&args("RequestedToCapacityRatio", foo, Some(up))).unwrap();
    let nodes = vec![
        NodeBuilder::new("n1").resource("intel.com/foo", "8").build(),
        NodeBuilder::new("n2").resource("intel.com/foo", "4").build(),
    ];
    let wants =
        |n: &str| PodBuilder::new("p").no_containers().container("", "").req_list(&[("intel.com/foo", n)]).build();
    assert_eq!(score_all(&plugin, &wants("2"), &snapshot(&nodes, &[])), vec![2, 5]);
    assert_eq!(score_all(&plugin, &wants("4"), &snapshot(&nodes, &[])), vec![5, 10]);
    let existing = vec![
        PodBuilder::new("u")
            .no_containers()
            .container("", "")
            .req_list(&[("intel.com/foo", "2")])
            .node_name("n2")
            .build(),
    ];
    assert_eq!(score_all(&plugin, &wants("2"), &snapshot(&nodes, &existing)), vec![2, 10]);
    assert_eq!(score_all(&plugin, &PodBuilder::new("p").no_containers().build(), &snapshot(&nodes, &[])), vec![0, 0]);
}

#[test]
fn bad_args_are_rejected_with_a_clear_message() {
    let bad_weight = args("LeastAllocated", serde_json::json!([{"name": "cpu", "weight": 101}]), None);
    assert!(NodeResourcesFit::new(&bad_weight).unwrap_err().to_string().contains("weight 101"));
    let bad_type = args("Fancy", serde_json::json!([]), None);
    assert!(NodeResourcesFit::new(&bad_type).is_err());
    let bad_shape = args(
        "RequestedToCapacityRatio",
        serde_json::json!([]),
        Some(serde_json::json!([{"utilization": 50, "score": 1}, {"utilization": 40, "score": 2}])),
    );
    assert!(NodeResourcesFit::new(&bad_shape).is_err());
    let missing_shape = args("RequestedToCapacityRatio", serde_json::json!([]), None);
    assert!(NodeResourcesFit::new(&missing_shape).is_err());
}
