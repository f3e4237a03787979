//! Gang scheduling through the real scheduling loop (`simulate`): the group lifecycle as
//! a table of cases.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use algorithms::builders::{NodeBuilder, PodBuilder, affinity_term};
use algorithms::config::default_profile;
use scheduler::cluster::{ClusterObjects, parse_cluster};
use scheduler::gang::{POD_GROUP_LABEL, PodGroupSpec};
use scheduler::simulate::{SimulateOptions, SimulationReport, run};

/// A member of `group` needing `cpu` CPUs, created `age` seconds after the epoch.
fn member(name: &str, group: &str, cpu: &str, age: i64) -> k8s_openapi::api::core::v1::Pod {
    PodBuilder::new(name)
        .scheduler("custom-scheduler")
        .label(POD_GROUP_LABEL, group)
        .label("job", group)
        .req(cpu, "1Gi")
        .started(age)
        .build()
}

fn simulate(nodes: usize, pods: Vec<k8s_openapi::api::core::v1::Pod>, groups: &[(&str, u32)]) -> SimulationReport {
    let objects = ClusterObjects {
        nodes: (0..nodes)
            .map(|i| NodeBuilder::new(&format!("node-{i}")).capacity("4", "16Gi", "110").build())
            .collect(),
        pods,
        pod_groups: groups.iter().map(|(g, min)| (format!("default/{g}"), PodGroupSpec::with_min(*min))).collect(),
        ..Default::default()
    };
    let parsed = parse_cluster(&objects, "test").unwrap();
    run(vec![default_profile("custom-scheduler")], parsed, &SimulateOptions { seed: 1, ..Default::default() })
}

fn placed_in(r: &SimulationReport, prefix: &str) -> usize {
    r.placements.keys().filter(|k| k.starts_with(&format!("default/{prefix}"))).count()
}

#[test]
fn a_group_waits_for_its_minimum_of_pods() {
    let r = simulate(3, vec![member("a-0", "a", "1", 1), member("a-1", "a", "1", 2)], &[("a", 3)]);
    assert_eq!((r.scheduled, r.unschedulable), (0, 2));
    for (pod, message) in &r.failures {
        assert!(message.contains(r#"pod group "default/a" has 2 of the 3 pods it needs"#), "{pod}: {message}");
    }
}

#[test]
fn a_group_is_placed_whole_or_not_at_all() {
    struct Case {
        what: &'static str,
        nodes: usize,
        cpu: &'static str,
        size: usize,
        min: u32,
        placed: usize,
    }
    let cases = [
        Case { what: "every member fits", nodes: 3, cpu: "3", size: 3, min: 3, placed: 3 },
        Case { what: "one member short: none placed", nodes: 2, cpu: "3", size: 3, min: 3, placed: 0 },
        Case { what: "the minimum fits, the rest waits", nodes: 2, cpu: "3", size: 3, min: 2, placed: 2 },
        Case { what: "members share nodes", nodes: 1, cpu: "1", size: 4, min: 4, placed: 4 },
    ];
    for c in cases {
        let pods = (0..c.size).map(|i| member(&format!("a-{i}"), "a", c.cpu, i as i64)).collect();
        let r = simulate(c.nodes, pods, &[("a", c.min)]);
        assert_eq!(r.scheduled, c.placed, "{}: {:?}", c.what, r.failures);
        assert_eq!(r.unschedulable, c.size - c.placed, "{}", c.what);
        if c.placed == 0 {
            let expected = format!(r#"pod group "default/a": 2 of the {} pods it needs fit; 0/"#, c.min);
            assert!(r.failures.values().all(|m| m.starts_with(&expected)), "{}: {:?}", c.what, r.failures);
        }
    }
}

#[test]
fn of_two_gangs_that_cannot_both_fit_one_is_placed_whole_and_the_other_waits_whole() {
    // Four nodes with room for one 3-CPU pod each; two gangs of three such pods.
    let mut pods = Vec::new();
    for i in 0..3 {
        // Interleaved creation, so that a pod-by-pod scheduler would give each gang two.
        pods.push(member(&format!("a-{i}"), "a", "3", 2 * i));
        pods.push(member(&format!("b-{i}"), "b", "3", 2 * i + 1));
    }
    let r = simulate(4, pods, &[("a", 3), ("b", 3)]);
    assert_eq!((placed_in(&r, "a-"), placed_in(&r, "b-")), (3, 0), "{:?}", r.failures);
    assert_eq!(r.unschedulable, 3);
    let nodes: BTreeMap<&String, usize> = r.placements.values().fold(BTreeMap::new(), |mut m, n| {
        *m.entry(n).or_default() += 1;
        m
    });
    assert_eq!(nodes.len(), 3, "one member per node: {nodes:?}");
}

/// Three members of group a with required anti-affinity to each other by host.
fn spread_members() -> Vec<k8s_openapi::api::core::v1::Pod> {
    (0..3)
        .map(|i| {
            PodBuilder::new(&format!("a-{i}"))
                .scheduler("custom-scheduler")
                .label(POD_GROUP_LABEL, "a")
                .label("job", "a")
                .req("100m", "100Mi")
                .pod_anti_affinity(affinity_term(&[("job", "a")], "kubernetes.io/hostname"))
                .started(i)
                .build()
        })
        .collect()
}

#[test]
fn members_see_each_other_while_the_group_is_placed() {
    // Required anti-affinity between members: three members need three nodes.
    let r = simulate(3, spread_members(), &[("a", 3)]);
    assert_eq!(r.scheduled, 3, "{:?}", r.failures);
    let mut nodes: Vec<&String> = r.placements.values().collect();
    nodes.sort();
    nodes.dedup();
    assert_eq!(nodes.len(), 3);
    // On two nodes only two can be placed, below the minimum: none is.
    assert_eq!(simulate(2, spread_members(), &[("a", 3)]).scheduled, 0);
}

#[test]
fn pods_naming_an_unknown_group_are_scheduled_one_by_one() {
    let r = simulate(1, vec![member("x-0", "unknown", "1", 1)], &[]);
    assert_eq!(r.scheduled, 1);
}

/// A member of Kubernetes' PodGroup `group` (`spec.schedulingGroup`).
fn kube_member(name: &str, group: &str, cpu: &str, age: i64) -> k8s_openapi::api::core::v1::Pod {
    let mut p = PodBuilder::new(name).scheduler("custom-scheduler").req(cpu, "1Gi").started(age).build();
    p.spec.as_mut().unwrap().scheduling_group =
        Some(k8s_openapi::api::core::v1::PodSchedulingGroup { pod_group_name: Some(group.into()) });
    p
}

#[test]
fn kubernetes_pod_groups_gang_wait_for_the_group_or_schedule_one_by_one() {
    let spec = |min| Some(PodGroupSpec::with_min(min));
    let objects = ClusterObjects {
        nodes: (0..2).map(|i| NodeBuilder::new(&format!("node-{i}")).capacity("4", "16Gi", "110").build()).collect(),
        pods: vec![
            // A gang of three 3-CPU pods on two nodes: none placed.
            kube_member("gang-0", "gang", "3", 0),
            kube_member("gang-1", "gang", "3", 1),
            kube_member("gang-2", "gang", "3", 2),
            // The basic policy: one by one.
            kube_member("basic-0", "basic", "1", 3),
            // A group that does not exist: the pod waits.
            kube_member("orphan-0", "absent", "1", 4),
        ],
        kube_pod_groups: vec![("default/gang".into(), spec(3)), ("default/basic".into(), None)],
        ..Default::default()
    };
    let parsed = parse_cluster(&objects, "test").unwrap();
    let r = run(vec![default_profile("custom-scheduler")], parsed, &SimulateOptions { seed: 1, ..Default::default() });
    assert_eq!(r.placements.keys().collect::<Vec<_>>(), ["default/basic-0"], "{:?}", r.failures);
    assert!(r.failures["default/gang-0"].starts_with(r#"pod group "default/gang": 2 of the 3 pods it needs fit"#));
    assert_eq!(r.failures["default/orphan-0"], r#"pod group "default/absent" does not exist yet"#);
}

/// Two 4-CPU nodes, each full with a low-priority pod; high-priority members need 3 CPUs.
fn preempting_gang(members: usize) -> SimulationReport {
    let mut pods: Vec<_> = (0..2)
        .map(|i| {
            PodBuilder::new(&format!("low-{i}"))
                .scheduler("custom-scheduler")
                .req("4", "1Gi")
                .priority(1)
                .node_name(&format!("node-{i}"))
                .build()
        })
        .collect();
    for i in 0..members {
        let mut p = member(&format!("a-{i}"), "a", "3", i as i64);
        p.spec.as_mut().unwrap().priority = Some(100);
        pods.push(p);
    }
    simulate(2, pods, &[("a", members as u32)])
}

#[test]
fn a_gang_preempts_for_all_its_members_or_for_none() {
    // Both members need a node: both low-priority pods are evicted, then the gang is placed.
    let r = preempting_gang(2);
    assert_eq!(placed_in(&r, "a-"), 2, "{:?}", r.failures);
    let mut victims: Vec<String> = r.preemptions.iter().flat_map(|p| p.victims.clone()).collect();
    victims.sort();
    assert_eq!(victims, ["default/low-0", "default/low-1"]);
    // Three members cannot fit on two nodes even with every victim gone: nothing is evicted.
    let r = preempting_gang(3);
    assert_eq!((placed_in(&r, "a-"), r.preemptions.len()), (0, 0), "{:?}", r.preemptions);
    assert_eq!(r.placements.len(), 0);
}

#[test]
fn a_preemptor_evicts_a_running_gang_whole() {
    // Gang g runs one 2-CPU member on each node; a high-priority 4-CPU pod needs a whole
    // node, so one member must go, and with it the other.
    let mut pods: Vec<_> = (0..2)
        .map(|i| {
            PodBuilder::new(&format!("g-{i}"))
                .scheduler("custom-scheduler")
                .label(POD_GROUP_LABEL, "g")
                .req("2", "1Gi")
                .priority(1)
                .node_name(&format!("node-{i}"))
                .build()
        })
        .collect();
    pods.push(
        PodBuilder::new("filler")
            .scheduler("custom-scheduler")
            .req("2", "1Gi")
            .priority(50)
            .node_name("node-1")
            .build(),
    );
    pods.push(PodBuilder::new("urgent").scheduler("custom-scheduler").req("4", "1Gi").priority(100).build());
    let r = simulate(2, pods, &[("g", 2)]);
    assert_eq!(r.placements.get("default/urgent").map(String::as_str), Some("node-0"), "{:?}", r.failures);
    let mut victims: Vec<String> = r.preemptions.iter().flat_map(|p| p.victims.clone()).collect();
    victims.sort();
    assert_eq!(victims, ["default/g-0", "default/g-1"]);
}
