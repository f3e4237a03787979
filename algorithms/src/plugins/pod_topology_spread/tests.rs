use k8s_openapi::api::core::v1 as core;

use super::*;
use crate::builders::{NodeBuilder, PodBuilder, expr_selector, filter_all, node_term, score_feasible, snapshot};
use crate::status::Code;

fn node(name: &str, labels: &[(&str, &str)]) -> core::Node {
    let mut b = NodeBuilder::new(name).no_labels();
    for (k, v) in labels {
        b = b.label(k, v);
    }
    b.build()
}

fn four_nodes() -> Vec<core::Node> {
    vec![
        node("node-a", &[("zone", "zone1"), ("node", "node-a")]),
        node("node-b", &[("zone", "zone1"), ("node", "node-b")]),
        node("node-x", &[("zone", "zone2"), ("node", "node-x")]),
        node("node-y", &[("zone", "zone2"), ("node", "node-y")]),
    ]
}

fn constraint(max_skew: i32, key: &str, when: &str, selector_key: &str) -> core::TopologySpreadConstraint {
    core::TopologySpreadConstraint {
        max_skew,
        topology_key: key.into(),
        when_unsatisfiable: when.into(),
        label_selector: Some(expr_selector(selector_key, "Exists", &[])),
        ..Default::default()
    }
}

fn foo_pods(node: &str, n: usize) -> Vec<core::Pod> {
    (0..n).map(|i| PodBuilder::new(&format!("{node}-{i}")).label("foo", "").node_name(node).build()).collect()
}

fn spread(counts: &[(&str, usize)]) -> Vec<core::Pod> {
    counts.iter().flat_map(|(n, c)| foo_pods(n, *c)).collect()
}

fn incoming(constraints: Vec<core::TopologySpreadConstraint>) -> PodBuilder {
    constraints.into_iter().fold(PodBuilder::new("p").label("foo", ""), |b, c| b.spread_constraint(c))
}

const OK: Code = Code::Success;
const NO: Code = Code::Unschedulable;
const NEVER: Code = Code::UnschedulableAndUnresolvable;

fn codes(pod: &core::Pod, nodes: &[core::Node], pods: &[core::Pod]) -> Vec<Code> {
    filter_all(&PodTopologySpread::default(), pod, &snapshot(nodes, pods)).iter().map(|s| s.code).collect()
}

#[test]
fn filter_table() {
    let zone1 = || incoming(vec![constraint(1, "zone", "DoNotSchedule", "foo")]).build();
    let by_node = |skew| incoming(vec![constraint(skew, "node", "DoNotSchedule", "foo")]).build();
    let other_ns: Vec<core::Pod> = vec![
        PodBuilder::new("n1").namespace("ns1").label("foo", "").node_name("node-a").build(),
        PodBuilder::new("n2").namespace("ns2").label("foo", "").node_name("node-a").build(),
    ]
    .into_iter()
    .chain(spread(&[("node-x", 1), ("node-y", 1)]))
    .collect();
    let mut missing = four_nodes();
    missing[1] = node("node-b", &[("zon", "zone1"), ("node", "node-b")]);
    let cases: Vec<(&str, core::Pod, Vec<core::Node>, Vec<core::Pod>, Vec<Code>)> = vec![
        ("no existing pods", zone1(), four_nodes(), vec![], vec![OK; 4]),
        ("pods of other namespaces do not count", zone1(), four_nodes(), other_ns, vec![OK, OK, NO, NO]),
        (
            "evenly spread zones",
            zone1(),
            four_nodes(),
            spread(&[("node-a", 2), ("node-b", 1), ("node-y", 3)]),
            vec![OK; 4],
        ),
        (
            "a node without the key is unresolvable",
            zone1(),
            missing,
            spread(&[("node-a", 1), ("node-b", 1), ("node-x", 1), ("node-y", 1)]),
            vec![OK, NEVER, NO, NO],
        ),
        (
            "no node has the key",
            incoming(vec![constraint(1, "rack", "DoNotSchedule", "foo")]).build(),
            four_nodes(),
            vec![],
            vec![NEVER; 4],
        ),
        (
            "per node, max skew 1",
            by_node(1),
            four_nodes(),
            spread(&[("node-a", 2), ("node-b", 1), ("node-y", 3)]),
            vec![NO, NO, OK, NO],
        ),
        (
            "per node, max skew 2",
            by_node(2),
            four_nodes(),
            spread(&[("node-a", 2), ("node-b", 1), ("node-y", 3)]),
            vec![NO, OK, OK, NO],
        ),
        (
            "a pod outside its own selector does not count itself",
            PodBuilder::new("p")
                .label("bar", "")
                .spread_constraint(constraint(1, "node", "DoNotSchedule", "foo"))
                .build(),
            four_nodes(),
            spread(&[("node-a", 2), ("node-b", 1), ("node-y", 3)]),
            vec![NO, OK, OK, NO],
        ),
        (
            "node affinity narrows the domains",
            incoming(vec![constraint(1, "node", "DoNotSchedule", "foo")])
                .required_node_affinity(vec![node_term("node", "In", &["node-a", "node-y"])])
                .build(),
            four_nodes(),
            spread(&[("node-a", 2), ("node-b", 1), ("node-y", 3)]),
            vec![OK, OK, OK, NO],
        ),
        (
            "two constraints must both hold",
            incoming(vec![
                constraint(1, "zone", "DoNotSchedule", "foo"),
                constraint(1, "node", "DoNotSchedule", "foo"),
            ])
            .build(),
            four_nodes(),
            spread(&[("node-a", 2), ("node-b", 1), ("node-y", 3)]),
            vec![NO, NO, OK, NO],
        ),
    ];
    for (name, pod, nodes, pods, want) in cases {
        assert_eq!(codes(&pod, &nodes, &pods), want, "{name}");
    }
}

#[test]
fn terminating_pods_are_not_counted() {
    let nodes = vec![node("a", &[("node", "a")]), node("b", &[("node", "b")])];
    let mut dying = PodBuilder::new("d").label("foo", "").node_name("a").build();
    dying.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()));
    let pods = vec![dying, PodBuilder::new("l").label("foo", "").node_name("b").build()];
    let pod = incoming(vec![constraint(1, "node", "DoNotSchedule", "foo")]).build();
    assert_eq!(codes(&pod, &nodes, &pods), vec![OK, NO]);
}

#[test]
fn fewer_domains_than_min_domains_make_the_global_minimum_zero() {
    let nodes: Vec<core::Node> =
        (0..4).map(|i| node(&format!("node-{i}"), &[("node", &format!("node-{i}"))])).collect();
    let mut c = constraint(2, "node", "DoNotSchedule", "foo");
    c.min_domains = Some(4);
    let pod = incoming(vec![c]).required_node_affinity(vec![node_term("node", "NotIn", &["node-0"])]).build();
    let pods = spread(&[("node-1", 2), ("node-2", 2), ("node-3", 1)]);
    assert_eq!(codes(&pod, &nodes, &pods), vec![OK, NO, NO, OK]);
}

#[test]
fn node_taints_policy_honor_leaves_tainted_domains_out() {
    let nodes = vec![
        node("a", &[("zone", "zone1")]),
        NodeBuilder::new("b").no_labels().label("zone", "zone2").taint("k", "v", "NoSchedule").build(),
    ];
    let pods = foo_pods("a", 1);
    let ignore = incoming(vec![constraint(1, "zone", "DoNotSchedule", "foo")]).build();
    assert_eq!(codes(&ignore, &nodes, &pods), vec![NO, OK]);
    let mut honor_c = constraint(1, "zone", "DoNotSchedule", "foo");
    honor_c.node_taints_policy = Some("Honor".into());
    let honor = incoming(vec![honor_c]).build();
    assert_eq!(codes(&honor, &nodes, &pods), vec![OK, OK]);
}

fn host_nodes(names: &[&str]) -> Vec<core::Node> {
    names.iter().map(|n| NodeBuilder::new(n).build()).collect()
}

fn scores(pod: &core::Pod, nodes: &[core::Node], pods: &[core::Pod], feasible: &[usize]) -> Vec<i64> {
    score_feasible(&PodTopologySpread::default(), pod, &snapshot(nodes, pods), feasible)
}

#[test]
fn score_table() {
    let host = |skew| incoming(vec![constraint(skew, HOSTNAME, "ScheduleAnyway", "foo")]).build();
    let nodes = host_nodes(&["a", "b", "c", "d"]);
    assert_eq!(scores(&host(1), &nodes, &[], &[0, 1]), vec![100, 100]);
    let p2103 = spread(&[("a", 2), ("b", 1), ("d", 3)]);
    assert_eq!(scores(&host(1), &nodes, &p2103, &[0, 1, 2, 3]), vec![20, 60, 100, 0]);
    assert_eq!(scores(&host(2), &nodes, &p2103, &[0, 1, 2, 3]), vec![33, 66, 100, 16]);
    let p4321 = spread(&[("a", 4), ("b", 3), ("c", 2), ("d", 1)]);
    assert_eq!(scores(&host(3), &nodes, &p4321, &[0, 1, 2, 3]), vec![44, 66, 77, 100]);
    let nil = PodBuilder::new("p")
        .label("foo", "")
        .spread_constraint(core::TopologySpreadConstraint {
            label_selector: None,
            ..constraint(1, HOSTNAME, "ScheduleAnyway", "foo")
        })
        .build();
    assert_eq!(scores(&nil, &nodes, &p2103, &[0, 1, 2, 3]), vec![100, 100, 100, 100]);
}

#[test]
fn zone_scores_count_pods_on_all_nodes() {
    let nodes = vec![
        NodeBuilder::new("a").label("zone", "zone1").build(),
        NodeBuilder::new("b").label("zone", "zone1").build(),
        NodeBuilder::new("x").label("zone", "zone2").build(),
        NodeBuilder::new("y").label("zone", "zone2").build(),
    ];
    let zone = incoming(vec![constraint(1, "zone", "ScheduleAnyway", "foo")]).build();
    let pods = spread(&[("a", 4), ("b", 2), ("x", 1), ("y", 3)]);
    assert_eq!(scores(&zone, &nodes, &pods, &[0, 1, 2]), vec![75, 75, 100]);

    let both = incoming(vec![
        constraint(1, "zone", "ScheduleAnyway", "foo"),
        constraint(1, HOSTNAME, "ScheduleAnyway", "foo"),
    ])
    .build();
    let pods = spread(&[("a", 2), ("b", 1), ("x", 2), ("y", 4)]);
    assert_eq!(scores(&both, &nodes, &pods, &[0, 2]), vec![100, 63]);
}

#[test]
fn nodes_missing_a_key_are_ignored_when_the_pod_has_constraints() {
    let nodes = vec![
        NodeBuilder::new("a").build(),
        NodeBuilder::new("b").no_labels().label("n", "b").build(),
        NodeBuilder::new("x").build(),
    ];
    let pod = incoming(vec![constraint(1, HOSTNAME, "ScheduleAnyway", "foo")]).build();
    let pods = spread(&[("a", 4), ("b", 2), ("x", 1)]);
    assert_eq!(scores(&pod, &nodes, &pods, &[0, 1, 2]), vec![16, 0, 100]);
}

#[test]
fn system_defaults_apply_only_with_a_selecting_service() {
    let nodes = host_nodes(&["a", "b", "c", "d"]);
    let pods = spread(&[("a", 4), ("b", 3), ("c", 2), ("d", 1)]);
    let bare = PodBuilder::new("p").label("foo", "").build();
    let mut snap = snapshot(&nodes, &pods);
    let plugin = PodTopologySpread::default();
    let info = PodInfo::from_pod(&bare).unwrap();
    assert!(crate::framework::ScorePlugin::pre_score(&plugin, &info, &snap, &[0, 1, 2, 3]).is_err());
    snap.workloads = std::sync::Arc::new(crate::snapshot::WorkloadSelectors {
        services: [(("default".into(), "svc".into()), [("foo".to_string(), String::new())].into())].into(),
        ..Default::default()
    });
    assert_eq!(score_feasible(&plugin, &bare, &snap, &[0, 1, 2, 3]), vec![44, 66, 77, 100]);
}

#[test]
fn args_are_validated() {
    let bad = PodTopologySpreadArgs {
        default_constraints: vec![constraint(1, "zone", "ScheduleAnyway", "foo")],
        defaulting_type: Some("System".into()),
    };
    assert!(PodTopologySpread::new(&bad).is_err());
    let with_selector = PodTopologySpreadArgs {
        default_constraints: vec![constraint(1, "zone", "ScheduleAnyway", "foo")],
        defaulting_type: Some("List".into()),
    };
    assert!(PodTopologySpread::new(&with_selector).is_err());
    let ok = PodTopologySpreadArgs {
        default_constraints: vec![core::TopologySpreadConstraint {
            max_skew: 1,
            topology_key: "zone".into(),
            when_unsatisfiable: "DoNotSchedule".into(),
            ..Default::default()
        }],
        defaulting_type: Some("List".into()),
    };
    assert!(PodTopologySpread::new(&ok).is_ok());
}

#[test]
fn a_long_lived_plugin_agrees_with_a_fresh_one_as_the_cluster_changes() {
    use crate::framework::{FilterPlugin, ScorePlugin};
    use crate::pod_info::PodInfo;
    use crate::snapshot::Snapshot;
    use std::sync::Arc;

    let nodes: Vec<core::Node> = (0..12)
        .map(|i| {
            let b = NodeBuilder::new(&format!("n{i}")).label("zone", ["z1", "z2", "z3"][i % 3]);
            if i % 5 == 4 { b.no_labels().label("kubernetes.io/hostname", &format!("n{i}")).build() } else { b.build() }
        })
        .collect();
    let mut snap: Snapshot = snapshot(&nodes, &[]);
    let hard =
        incoming(vec![constraint(1, "zone", "DoNotSchedule", "foo"), constraint(2, HOSTNAME, "DoNotSchedule", "foo")])
            .build();
    let soft = incoming(vec![
        constraint(1, "zone", "ScheduleAnyway", "foo"),
        constraint(1, HOSTNAME, "ScheduleAnyway", "foo"),
    ])
    .build();
    let long_lived = PodTopologySpread::default();
    for step in 0..30 {
        // Place a matching pod on a changing node: only that node's generation moves.
        // Every third step takes the pod the step before placed away again and moves
        // that node to another zone.
        let i = if step % 3 == 2 { ((step - 1) * 7) % nodes.len() } else { (step * 7) % nodes.len() };
        let mut node = (*snap.nodes[i]).clone();
        if step % 3 == 2 {
            let p = node.pods.last().cloned().expect("the step before placed a pod here");
            node.remove_pod(&p.namespace, &p.name);
            node.labels.insert("zone".into(), ["z1", "z2", "z3"][(step / 3) % 3].into());
            node.generation = crate::node_info::next_generation();
        } else {
            let p = PodBuilder::new(&format!("p{step}")).label("foo", "").node_name(&node.name).info();
            node.add_pod(Arc::new(p));
        }
        snap.replace_node(i, Arc::new(node));
        for pod in [&hard, &soft] {
            let info = PodInfo::from_pod(pod).unwrap();
            let fresh = PodTopologySpread::default();
            let a = FilterPlugin::pre_filter(&long_lived, &info, &snap);
            let b = FilterPlugin::pre_filter(&fresh, &info, &snap);
            for (k, n) in snap.nodes.iter().enumerate() {
                if a.status.is_skip() {
                    assert!(b.status.is_skip());
                    continue;
                }
                assert_eq!(
                    long_lived.filter_at(&a.state, &info, n, k),
                    fresh.filter_at(&b.state, &info, n, k),
                    "step {step} node {k}"
                );
            }
            let feasible: Vec<usize> = (0..snap.nodes.len()).collect();
            let sa = ScorePlugin::pre_score(&long_lived, &info, &snap, &feasible);
            let sb = ScorePlugin::pre_score(&fresh, &info, &snap, &feasible);
            if let (Ok(sa), Ok(sb)) = (sa, sb) {
                for (k, n) in snap.nodes.iter().enumerate() {
                    assert_eq!(
                        long_lived.score_at(&sa, &info, n, &snap, k),
                        fresh.score_at(&sb, &info, n, &snap, k),
                        "step {step} node {k}"
                    );
                }
            }
        }
    }
}
