use super::*;
use crate::builders::{NodeBuilder, PodBuilder, filter_all, node_term, score_all, snapshot};
use crate::status::Code;
use k8s_openapi::api::core::v1 as core;

fn name_term(names: &[&str]) -> core::NodeSelectorTerm {
    core::NodeSelectorTerm {
        match_expressions: None,
        match_fields: Some(
            names
                .iter()
                .map(|n| core::NodeSelectorRequirement {
                    key: "metadata.name".into(),
                    operator: "In".into(),
                    values: Some(vec![(*n).into()]),
                })
                .collect(),
        ),
    }
}

#[test]
fn filter_table() {
    let plugin = NodeAffinity::default();
    let cases: Vec<(&str, PodBuilder, NodeBuilder, Code)> = vec![
        ("no selector fits", PodBuilder::new("p"), NodeBuilder::new("n"), Code::Success),
        (
            "selector on unlabeled node",
            PodBuilder::new("p").node_selector("foo", "bar"),
            NodeBuilder::new("n").no_labels(),
            Code::UnschedulableAndUnresolvable,
        ),
        (
            "selector subset of labels",
            PodBuilder::new("p").node_selector("foo", "bar"),
            NodeBuilder::new("n").label("foo", "bar").label("x", "y"),
            Code::Success,
        ),
        (
            "Gt on integer labels",
            PodBuilder::new("p").required_node_affinity(vec![node_term("mem", "Gt", &["0204"])]),
            NodeBuilder::new("n").label("mem", "0206"),
            Code::Success,
        ),
        (
            "NotIn matches other value",
            PodBuilder::new("p").required_node_affinity(vec![node_term("mem", "NotIn", &["DDR", "DDR2"])]),
            NodeBuilder::new("n").label("mem", "DDR3"),
            Code::Success,
        ),
        (
            "NotIn matches an absent label",
            PodBuilder::new("p").required_node_affinity(vec![node_term("mem", "NotIn", &["DDR"])]),
            NodeBuilder::new("n"),
            Code::Success,
        ),
        (
            "DoesNotExist matches an absent label",
            PodBuilder::new("p").required_node_affinity(vec![node_term("gpu", "DoesNotExist", &[])]),
            NodeBuilder::new("n"),
            Code::Success,
        ),
        (
            "In misses",
            PodBuilder::new("p").required_node_affinity(vec![node_term("gpu", "In", &["AMD", "INTEL"])]),
            NodeBuilder::new("n").label("gpu", "NVIDIA"),
            Code::UnschedulableAndUnresolvable,
        ),
        (
            "empty term matches nothing",
            PodBuilder::new("p").required_node_affinity(vec![core::NodeSelectorTerm::default()]),
            NodeBuilder::new("n").label("foo", "bar"),
            Code::UnschedulableAndUnresolvable,
        ),
        (
            "no terms matches nothing",
            PodBuilder::new("p").required_node_affinity(vec![]),
            NodeBuilder::new("n"),
            Code::UnschedulableAndUnresolvable,
        ),
        (
            "selector and affinity are ANDed",
            PodBuilder::new("p").node_selector("foo", "bar").required_node_affinity(vec![node_term(
                "zone",
                "In",
                &["a"],
            )]),
            NodeBuilder::new("n").label("zone", "a"),
            Code::UnschedulableAndUnresolvable,
        ),
        (
            "invalid NotIn value term fails",
            PodBuilder::new("p").required_node_affinity(vec![node_term("mem", "Gt", &["x"])]),
            NodeBuilder::new("n").label("mem", "1"),
            Code::UnschedulableAndUnresolvable,
        ),
    ];
    for (name, pod, node, code) in cases {
        let snap = snapshot(&[node.build()], &[]);
        let st = filter_all(&plugin, &pod.build(), &snap).remove(0);
        assert_eq!(st.code, code, "{name}");
        if code != Code::Success {
            assert_eq!(st.reasons.as_slice(), [ERR_REASON_POD], "{name}");
        }
    }
}

#[test]
fn prefilter_narrows_nodes_by_name_fields() {
    let plugin = NodeAffinity::default();
    let snap = snapshot(&[], &[]);
    let pod = PodBuilder::new("p").required_node_affinity(vec![name_term(&["node1"])]).info();
    let out = FilterPlugin::pre_filter(&plugin, &pod, &snap);
    assert_eq!(out.node_names, Some(["node1".to_string()].into()));

    let mixed = PodBuilder::new("p")
        .required_node_affinity(vec![name_term(&["node1", "node2"]), node_term("foo", "In", &["bar"])])
        .info();
    assert_eq!(FilterPlugin::pre_filter(&plugin, &mixed, &snap).node_names, None);

    let conflict = PodBuilder::new("p").required_node_affinity(vec![name_term(&["node1", "node2"])]).info();
    let out = FilterPlugin::pre_filter(&plugin, &conflict, &snap);
    assert_eq!(out.status.code, Code::UnschedulableAndUnresolvable);
    assert_eq!(out.status.reasons.as_slice(), [ERR_REASON_CONFLICT]);
}

#[test]
fn added_affinity_is_enforced_first() {
    let args: NodeAffinityArgs = serde_json::from_value(serde_json::json!({
        "addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["batch"]}]}
        ]}}
    }))
    .unwrap();
    let plugin = NodeAffinity::new(&args);
    let snap = snapshot(&[NodeBuilder::new("a").label("pool", "batch").build(), NodeBuilder::new("b").build()], &[]);
    let st = filter_all(&plugin, &PodBuilder::new("p").build(), &snap);
    assert!(st[0].is_success());
    assert_eq!(st[1].reasons.as_slice(), [ERR_REASON_ENFORCED]);
}

#[test]
fn score_table() {
    let plugin = NodeAffinity::default();
    let nodes = vec![
        NodeBuilder::new("n1").label("foo", "bar").build(),
        NodeBuilder::new("n2").label("foo", "bar").label("key", "value").label("az", "az1").build(),
        NodeBuilder::new("n3").label("key", "value").build(),
    ];
    let snap = snapshot(&nodes, &[]);
    let all_three = core::NodeSelectorTerm {
        match_expressions: Some(
            [("foo", "bar"), ("key", "value"), ("az", "az1")]
                .iter()
                .map(|(k, v)| core::NodeSelectorRequirement {
                    key: (*k).into(),
                    operator: "In".into(),
                    values: Some(vec![(*v).into()]),
                })
                .collect(),
        ),
        match_fields: None,
    };
    let pod = PodBuilder::new("p")
        .preferred_node_affinity(2, node_term("foo", "In", &["bar"]))
        .preferred_node_affinity(4, node_term("key", "In", &["value"]))
        .preferred_node_affinity(5, all_three)
        .build();
    assert_eq!(score_all(&plugin, &pod, &snap), vec![18, 100, 36]);
    assert_eq!(score_all(&plugin, &PodBuilder::new("p").build(), &snap), vec![0, 0, 0]);

    let args: NodeAffinityArgs = serde_json::from_value(serde_json::json!({
        "addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 3, "preference": {"matchExpressions": [{"key": "key", "operator": "In", "values": ["value"]}]}}
        ]}
    }))
    .unwrap();
    let added = NodeAffinity::new(&args);
    let two = PodBuilder::new("p").preferred_node_affinity(2, node_term("foo", "In", &["bar"])).build();
    // Raw 2, 5, 3.
    assert_eq!(score_all(&added, &two, &snap), vec![40, 100, 60]);
}
