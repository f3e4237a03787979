use std::collections::HashMap;

use k8s_openapi::api::core::v1 as core;

use super::*;
use crate::builders::{
    NodeBuilder, PodBuilder, expr_selector, filter_all, score_all, snapshot, snapshot_with_namespaces,
};
use crate::status::Code;

fn term(key: &str, op: &str, values: &[&str], topology: &str) -> core::PodAffinityTerm {
    core::PodAffinityTerm {
        label_selector: Some(expr_selector(key, op, values)),
        topology_key: topology.into(),
        ..Default::default()
    }
}

fn node(name: &str, labels: &[(&str, &str)]) -> core::Node {
    let mut b = NodeBuilder::new(name).no_labels();
    for (k, v) in labels {
        b = b.label(k, v);
    }
    b.build()
}

fn codes(statuses: &[crate::status::Status]) -> Vec<Code> {
    statuses.iter().map(|s| s.code).collect()
}

#[test]
fn filter_single_node_table() {
    let machine = node("m1", &[("region", "r1"), ("zone", "z11")]);
    let scan = |ns: &str| PodBuilder::new("e").namespace(ns).label("service", "securityscan").node_name("m1").build();
    let affinity = term("service", "In", &["securityscan", "value2"], "region");
    let cases: Vec<(&str, core::Pod, Vec<core::Pod>, Code, &str)> = vec![
        (
            "affinity satisfied",
            PodBuilder::new("p").label("security", "S1").pod_affinity(affinity.clone()).build(),
            vec![scan("default")],
            Code::Success,
            "",
        ),
        (
            "affinity in another namespace is not satisfied",
            PodBuilder::new("p")
                .label("security", "S1")
                .pod_affinity(core::PodAffinityTerm {
                    namespaces: Some(vec!["DiffNameSpace".into()]),
                    ..affinity.clone()
                })
                .build(),
            vec![scan("ns")],
            Code::UnschedulableAndUnresolvable,
            ERR_REASON_AFFINITY,
        ),
        (
            "selector matches no pod",
            PodBuilder::new("p")
                .label("service", "securityscan")
                .pod_affinity(term("service", "In", &["antivirusscan", "value2"], "region"))
                .build(),
            vec![scan("default")],
            Code::UnschedulableAndUnresolvable,
            ERR_REASON_AFFINITY,
        ),
        (
            "own anti-affinity violated",
            PodBuilder::new("p")
                .label("security", "S1")
                .pod_affinity(affinity.clone())
                .pod_anti_affinity(term("service", "In", &["securityscan", "value2"], "zone"))
                .build(),
            vec![scan("default")],
            Code::Unschedulable,
            ERR_REASON_ANTI_AFFINITY,
        ),
        (
            "existing pod's anti-affinity violated",
            PodBuilder::new("p").label("service", "securityscan").build(),
            vec![
                PodBuilder::new("e")
                    .label("x", "y")
                    .pod_anti_affinity(term("service", "In", &["securityscan", "value2"], "zone"))
                    .node_name("m1")
                    .build(),
            ],
            Code::Unschedulable,
            ERR_REASON_EXISTING_ANTI_AFFINITY,
        ),
        (
            "existing pod's NotIn anti-affinity not violated",
            PodBuilder::new("p").label("service", "securityscan").build(),
            vec![
                PodBuilder::new("e")
                    .pod_anti_affinity(term("service", "NotIn", &["securityscan", "value2"], "zone"))
                    .node_name("m1")
                    .build(),
            ],
            Code::Success,
            "",
        ),
    ];
    for (name, pod, existing, code, reason) in cases {
        let snap = snapshot(std::slice::from_ref(&machine), &existing);
        let st = filter_all(&InterPodAffinity::default(), &pod, &snap).remove(0);
        assert_eq!(st.code, code, "{name}");
        if !reason.is_empty() {
            assert_eq!(st.reasons.as_slice(), [reason], "{name}");
        }
    }
}

#[test]
fn every_affinity_term_must_be_met_by_one_pod() {
    let nodes = vec![node("a", &[("region", "r1"), ("zone", "z1")]), node("b", &[("region", "r1"), ("zone", "z2")])];
    let pod = PodBuilder::new("p")
        .pod_affinity(term("foo", "Exists", &[], "region"))
        .pod_affinity(term("bar", "Exists", &[], "zone"))
        .build();
    let split = vec![
        PodBuilder::new("x").label("foo", "").node_name("a").build(),
        PodBuilder::new("y").label("bar", "").node_name("b").build(),
    ];
    let st = filter_all(&InterPodAffinity::default(), &pod, &snapshot(&nodes, &split));
    assert_eq!(codes(&st), vec![Code::UnschedulableAndUnresolvable; 2]);

    let same = vec![node("a", &[("region", "r1"), ("zone", "z1")]), node("b", &[("region", "r1"), ("zone", "z1")])];
    let both = vec![PodBuilder::new("x").label("foo", "").label("bar", "").node_name("a").build()];
    let st = filter_all(&InterPodAffinity::default(), &pod, &snapshot(&same, &both));
    assert_eq!(codes(&st), vec![Code::Success; 2]);
}

#[test]
fn existing_anti_affinity_blocks_whole_topology_domains() {
    let nodes = vec![
        node("a", &[("region", "r1"), ("zone", "z1")]),
        node("b", &[("region", "r1"), ("zone", "z2")]),
        node("c", &[("region", "r2"), ("zone", "z3")]),
    ];
    let existing = vec![
        PodBuilder::new("x").pod_anti_affinity(term("foo", "Exists", &[], "zone")).node_name("a").build(),
        PodBuilder::new("y").pod_anti_affinity(term("bar", "Exists", &[], "region")).node_name("a").build(),
    ];
    let pod = PodBuilder::new("p").label("foo", "").label("bar", "").build();
    let st = filter_all(&InterPodAffinity::default(), &pod, &snapshot(&nodes, &existing));
    assert_eq!(codes(&st), vec![Code::Unschedulable, Code::Unschedulable, Code::Success]);
}

#[test]
fn anti_affinity_on_a_missing_topology_key_is_ignored() {
    let nodes = vec![node("a", &[("region", "r1"), ("zone", "z1")]), node("b", &[("region", "r1"), ("zone", "z2")])];
    let existing = vec![
        PodBuilder::new("x")
            .pod_anti_affinity(term("foo", "Exists", &[], "invalid-node-label"))
            .pod_anti_affinity(term("bar", "Exists", &[], "zone"))
            .node_name("a")
            .build(),
    ];
    let pod = PodBuilder::new("p").label("foo", "").label("bar", "").build();
    let st = filter_all(&InterPodAffinity::default(), &pod, &snapshot(&nodes, &existing));
    assert_eq!(codes(&st), vec![Code::Unschedulable, Code::Success]);
}

#[test]
fn first_pod_of_a_self_affine_group_may_go_anywhere_with_the_key() {
    let nodes = vec![node("a", &[("zone", "z1")]), node("b", &[("other", "x")])];
    let pod = PodBuilder::new("p").label("app", "x").pod_affinity(term("app", "In", &["x"], "zone")).build();
    let st = filter_all(&InterPodAffinity::default(), &pod, &snapshot(&nodes, &[]));
    assert_eq!(codes(&st), vec![Code::Success, Code::UnschedulableAndUnresolvable]);
}

#[test]
fn pods_without_terms_skip_when_no_existing_anti_affinity() {
    let snap = snapshot(&[node("a", &[("zone", "z1")])], &[]);
    let out =
        crate::framework::FilterPlugin::pre_filter(&InterPodAffinity::default(), &PodBuilder::new("p").info(), &snap);
    assert!(out.status.is_skip());
}

fn china(name: &str) -> core::Node {
    node(name, &[("region", "China")])
}

#[test]
fn score_table() {
    let s1 = |n: &str, name: &str| PodBuilder::new(name).label("security", "S1").node_name(n);
    let s2 = |n: &str, name: &str| PodBuilder::new(name).label("security", "S2").node_name(n);
    let plugin = InterPodAffinity::default();
    let pref = term("security", "In", &["S1"], "region");

    // Preferred affinity by region.
    let nodes = vec![china("n1"), node("n2", &[("region", "India")]), node("n3", &[("az", "az1")])];
    let pods = vec![s1("n1", "a").build(), s2("n2", "b").build(), s1("n3", "c").build()];
    let pod = PodBuilder::new("p").label("security", "S1").preferred_pod_affinity(5, pref.clone()).build();
    assert_eq!(score_all(&plugin, &pod, &snapshot(&nodes, &pods)), vec![100, 0, 0]);

    // The region is shared through the label value.
    let nodes2 =
        vec![china("n1"), node("n2", &[("region", "China"), ("az", "az1")]), node("n3", &[("region", "India")])];
    assert_eq!(score_all(&plugin, &pod, &snapshot(&nodes2, &[s1("n1", "a").build()])), vec![100, 100, 0]);

    // Preferred anti-affinity.
    let nodes3 = vec![node("n1", &[("az", "az1")]), china("n2")];
    let anti = PodBuilder::new("p")
        .label("security", "S1")
        .preferred_pod_anti_affinity(5, term("security", "In", &["S1"], "az"))
        .build();
    assert_eq!(
        score_all(&plugin, &anti, &snapshot(&nodes3, &[s1("n1", "a").build(), s2("n2", "b").build()])),
        vec![0, 100]
    );
}

#[test]
fn existing_pods_terms_score_symmetrically() {
    let plugin = InterPodAffinity::default();
    // Required affinity of existing pods counts with hardPodAffinityWeight.
    let nodes = vec![china("n1"), node("n2", &[("region", "India")]), node("n3", &[("az", "az1")])];
    let hard = |n: &str, name: &str, sec: &str| {
        PodBuilder::new(name)
            .label("security", sec)
            .pod_affinity(term("security", "In", &["S1", "value2"], "region"))
            .pod_affinity(term("security", "Exists", &[], "region"))
            .node_name(n)
            .build()
    };
    let incoming = PodBuilder::new("p").label("security", "S1").build();
    let snap = snapshot(&nodes, &[hard("n1", "a", "S1"), hard("n2", "b", "S2")]);
    assert_eq!(score_all(&plugin, &incoming, &snap), vec![100, 100, 0]);
    let zero =
        InterPodAffinity::new(&InterPodAffinityArgs { hard_pod_affinity_weight: 0, ..Default::default() }).unwrap();
    assert_eq!(score_all(&zero, &incoming, &snap), vec![0, 0, 0]);

    // Preferred anti-affinity of existing pods.
    let nodes = vec![node("n1", &[("az", "az1")]), node("n2", &[("az", "az2")])];
    let pods = vec![
        PodBuilder::new("a")
            .label("security", "S1")
            .preferred_pod_anti_affinity(5, term("security", "In", &["S2"], "az"))
            .node_name("n1")
            .build(),
        PodBuilder::new("b")
            .label("security", "S2")
            .preferred_pod_anti_affinity(5, term("security", "In", &["S1"], "az"))
            .node_name("n2")
            .build(),
    ];
    let s2 = PodBuilder::new("p").label("security", "S2").build();
    assert_eq!(score_all(&plugin, &s2, &snapshot(&nodes, &pods)), vec![0, 100]);

    // Equal non-zero raw scores normalize to zero.
    let nodes = vec![china("n1"), china("n2")];
    let pods = vec![
        PodBuilder::new("a")
            .preferred_pod_affinity(8, term("security", "In", &["S1"], "region"))
            .node_name("n2")
            .build(),
    ];
    let s1 = PodBuilder::new("p").label("security", "S1").build();
    assert_eq!(score_all(&plugin, &s1, &snapshot(&nodes, &pods)), vec![0, 0]);
}

#[test]
fn namespace_selectors_of_existing_pods_match_the_incoming_namespace() {
    let plugin = InterPodAffinity::default();
    let nodes = vec![china("n1"), node("n2", &[("region", "India")]), node("n3", &[("az", "az1")])];
    let ns_term = core::PodAffinityTerm {
        namespaces: Some(vec!["subteam2.team2".into()]),
        namespace_selector: Some(expr_selector("team", "In", &["team1"])),
        ..term("security", "In", &["S1"], "region")
    };
    let pods = vec![PodBuilder::new("a").preferred_pod_affinity(5, ns_term.clone()).node_name("n1").build()];
    let namespaces: HashMap<String, crate::labels::Labels> =
        [("subteam1.team1".to_string(), [("team".to_string(), "team1".to_string())].into())].into();
    let incoming = PodBuilder::new("p").namespace("subteam1.team1").label("security", "S1").build();
    let snap = snapshot_with_namespaces(&nodes, &pods, namespaces.clone());
    assert_eq!(score_all(&plugin, &incoming, &snap), vec![100, 0, 0]);
    let anti_pods = vec![PodBuilder::new("a").preferred_pod_anti_affinity(5, ns_term).node_name("n1").build()];
    let snap = snapshot_with_namespaces(&nodes, &anti_pods, namespaces);
    assert_eq!(score_all(&plugin, &incoming, &snap), vec![0, 100, 100]);
}

#[test]
fn a_long_lived_plugin_agrees_with_a_fresh_one_as_the_cluster_changes() {
    use crate::framework::FilterPlugin;
    use std::sync::Arc;

    let nodes: Vec<core::Node> = (0..9)
        .map(|i| {
            node(&format!("n{i}"), &[("zone", ["z1", "z2", "z3"][i % 3]), ("kubernetes.io/hostname", &format!("n{i}"))])
        })
        .collect();
    let mut snap = snapshot(&nodes, &[]);
    let anti = PodBuilder::new("p")
        .label("app", "web")
        .pod_anti_affinity(term("app", "In", &["web"], "kubernetes.io/hostname"))
        .build();
    let aff = PodBuilder::new("q").label("app", "api").pod_affinity(term("app", "In", &["web"], "zone")).build();
    let long_lived = InterPodAffinity::default();
    for step in 0..24 {
        // Every third step undoes the node that the step before changed.
        let i = if step % 3 == 2 { ((step - 1) * 4) % nodes.len() } else { (step * 4) % nodes.len() };
        let mut n = (*snap.nodes[i]).clone();
        if step % 3 == 2 {
            // Take a pod away again and move the node to another zone.
            let p = n.pods.last().cloned().expect("the step before placed a pod here");
            n.remove_pod(&p.namespace, &p.name);
            n.labels.insert("zone".into(), ["z1", "z2", "z3"][step % 3].into());
            n.generation = crate::node_info::next_generation();
        } else {
            let placed = if step % 2 == 0 { anti.clone() } else { aff.clone() };
            let mut info = crate::pod_info::PodInfo::from_pod(&placed).unwrap();
            info.name = format!("placed-{step}");
            info.node_name = Some(n.name.clone());
            n.add_pod(Arc::new(info));
        }
        snap.replace_node(i, Arc::new(n));
        snap.refresh_pod_indexes();
        for pod in [&anti, &aff] {
            let info = crate::pod_info::PodInfo::from_pod(pod).unwrap();
            let fresh = InterPodAffinity::default();
            let a = FilterPlugin::pre_filter(&long_lived, &info, &snap);
            let b = FilterPlugin::pre_filter(&fresh, &info, &snap);
            assert_eq!(a.status.code, b.status.code);
            if a.status.is_skip() {
                continue;
            }
            for (k, n) in snap.nodes.iter().enumerate() {
                assert_eq!(
                    long_lived.filter_at(&a.state, &info, n, k),
                    fresh.filter_at(&b.state, &info, n, k),
                    "step {step} node {k}"
                );
            }
        }
    }
}
