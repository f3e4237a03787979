//! Table tests after kube-scheduler's default_preemption_test.go (TestPostFilter,
//! TestDryRunPreemption, TestSelectBestCandidate, TestPodEligibleToPreemptOthers),
//! rebuilt with the default plugins.

use crate::dra::DraObjects;
use std::sync::Arc;

use k8s_openapi::api::core::v1 as core;
use rand::SeedableRng;
use rand::rngs::StdRng;

use super::*;
use crate::builders::{NodeBuilder, PodBuilder, snapshot};
use crate::config::default_profile;
use crate::framework::{EvaluateOptions, evaluate};

const NEG: i32 = -100;
const LOW: i32 = 0;
const MID: i32 = 100;
const HIGH: i32 = 1000;
const VERY_HIGH: i32 = 10000;
const SMALL: &str = "100m";
const MEDIUM: &str = "200m";
const LARGE: &str = "300m";
const VERY_LARGE: &str = "500m";

fn node(name: &str, cpu: &str) -> core::Node {
    NodeBuilder::new(name).capacity(cpu, "1Gi", "32").build()
}

fn pod(name: &str, prio: i32, cpu: &str) -> PodBuilder {
    PodBuilder::new(name).priority(prio).req(cpu, "10Mi")
}

fn on(p: PodBuilder, node: &str) -> core::Pod {
    p.node_name(node).build()
}

/// Evaluates `preemptor` then preempts with a fixed offset of 0.
fn run(
    nodes: &[core::Node],
    pods: &[core::Pod],
    preemptor: core::Pod,
    budgets: &[Budget],
    args: PreemptionArgs,
) -> (PostFilterResult, Snapshot) {
    let mut snap = snapshot(nodes, pods);
    let profile = default_profile("s");
    let pod = PodInfo::from_pod(&preemptor).unwrap();
    let mut rng = StdRng::seed_from_u64(0);
    let ev = evaluate(&profile, &pod, &snap, &mut rng, EvaluateOptions::default());
    assert!(ev.selected.is_none(), "the preemptor must not fit as it is");
    let before: Vec<u64> = snap.generations.clone();
    let out = preempt(&profile, &pod, &mut snap, &ev, budgets, &args, &mut ZeroRng);
    assert_eq!(before, snap.generations, "the snapshot is restored");
    (out, snap)
}

/// Always draws the lowest value: the dry run starts at the first potential node.
struct ZeroRng;
impl rand::RngCore for ZeroRng {
    fn next_u32(&mut self) -> u32 {
        0
    }
    fn next_u64(&mut self) -> u64 {
        0
    }
    fn fill_bytes(&mut self, dst: &mut [u8]) {
        dst.fill(0);
    }
}

fn chosen(out: &PostFilterResult, snap: &Snapshot) -> (String, Vec<String>, usize) {
    match out {
        PostFilterResult::Nominate(c) => {
            (snap.nodes[c.node].name.clone(), c.victims.iter().map(|p| p.name.clone()).collect(), c.pdb_violations)
        }
        other => panic!("expected a nomination, got {other:?}"),
    }
}

fn message(out: &PostFilterResult) -> String {
    match out {
        PostFilterResult::Unschedulable { message, .. } | PostFilterResult::Stopped(message) => message.clone(),
        other => panic!("expected no nomination, got {other:?}"),
    }
}

fn budget(app: &str, allowed: i32, disrupted: &[&str]) -> Budget {
    let sel = crate::builders::label_selector(&[("app", app)]);
    Budget {
        namespace: "default".into(),
        selector: crate::labels::LabelSelector::parse(&sel).ok(),
        disruptions_allowed: allowed,
        disrupted: disrupted.iter().map(|s| s.to_string()).collect(),
    }
}

#[test]
fn post_filter_outcomes_and_messages() {
    let d = PreemptionArgs::default();
    let one_pod = |n: &str| NodeBuilder::new(n).capacity("4", "1Gi", "1").build();
    // A higher-priority pod takes the only slot of node1.
    let (out, snap) = run(&[one_pod("node1")], &[on(pod("p1", LOW, ""), "node1")], pod("p", HIGH, "").build(), &[], d);
    assert_eq!(chosen(&out, &snap), ("node1".into(), vec!["p1".into()], 0));
    // Tied priority: nothing to evict.
    let (out, _) = run(&[one_pod("node1")], &[on(pod("p1", LOW, ""), "node1")], pod("p", LOW, "").build(), &[], d);
    assert_eq!(message(&out), "0/1 nodes are available: 1 No preemption victims found for incoming pod.");
    // The profile's PostFilter chain: DynamicResources' reason, then DefaultPreemption's.
    let mut snap = snapshot(&[one_pod("node1")], &[on(pod("p1", LOW, ""), "node1")]);
    let profile = default_profile("s");
    let p = PodInfo::from_pod(&pod("p", LOW, "").build()).unwrap();
    let ev = evaluate(&profile, &p, &snap, &mut StdRng::seed_from_u64(0), EvaluateOptions::default());
    let chain = crate::framework::run_post_filters(&profile, &p, &mut snap, &ev, &mut ZeroRng).unwrap();
    assert_eq!(
        chain.message().unwrap(),
        "no new claims to deallocate, preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    );
    // One node holds a higher, the other a lower priority pod.
    let (out, snap) = run(
        &[one_pod("node1"), one_pod("node2")],
        &[on(pod("p1", HIGH, ""), "node1"), on(pod("p2", LOW, ""), "node2")],
        pod("p", MID, "").build(),
        &[],
        d,
    );
    assert_eq!(chosen(&out, &snap).0, "node2");
    // Not enough room even without the lower-priority pods.
    let (out, _) = run(
        &[node("node1", MEDIUM), node("node2", MEDIUM)],
        &[on(pod("p1", LOW, SMALL), "node1"), on(pod("p2", LOW, SMALL), "node2")],
        pod("p", HIGH, LARGE).build(),
        &[],
        d,
    );
    // 300m over 200m allocatable is unresolvable for NodeResourcesFit: never dry-run.
    assert_eq!(message(&out), "0/2 nodes are available: 2 Preemption is not helpful for scheduling.");
    // Mixed: one node without victims, one without room after eviction.
    let (out, _) = run(
        &[one_pod("node1"), node("node2", MEDIUM), one_pod("node3")],
        &[
            on(pod("p1", HIGH, ""), "node1"),
            on(pod("p2", LOW, SMALL), "node2"),
            on(pod("h2", HIGH, SMALL), "node2"),
            on(pod("p3", HIGH, ""), "node3"),
        ],
        pod("p", MID, MEDIUM).build(),
        &[],
        d,
    );
    assert_eq!(
        message(&out),
        "0/3 nodes are available: 1 Insufficient cpu, 2 No preemption victims found for incoming pod."
    );
}

#[test]
fn dry_run_victims_per_node() {
    let d = PreemptionArgs::default();
    let nodes = [node("node1", VERY_LARGE), node("node2", VERY_LARGE)];
    // Lower-priority pods on both nodes: each node is a candidate; node1 comes first.
    let (out, snap) = run(
        &nodes,
        &[on(pod("p1", MID, LARGE), "node1"), on(pod("p2", MID, LARGE), "node2")],
        pod("p", HIGH, LARGE).build(),
        &[],
        d,
    );
    assert!(matches!(chosen(&out, &snap).0.as_str(), "node1" | "node2"));
    // Running pods are more important: nothing happens.
    let (out, _) = run(
        &nodes,
        &[on(pod("p1", MID, LARGE), "node1"), on(pod("p2", MID, LARGE), "node2")],
        pod("p", LOW, LARGE).build(),
        &[],
        d,
    );
    assert_eq!(message(&out), "0/2 nodes are available: 2 No preemption victims found for incoming pod.");
    // The medium-priority large pod goes, the small low one stays.
    let (out, snap) = run(
        &[node("node1", VERY_LARGE)],
        &[on(pod("p1.1", LOW, SMALL), "node1"), on(pod("p1.2", MID, LARGE), "node1")],
        pod("p", HIGH, LARGE).build(),
        &[],
        d,
    );
    assert_eq!(chosen(&out, &snap).1, vec!["p1.2".to_string()]);
    // Mixed priorities: reprieve most important first, equal priority by later start.
    let (out, snap) = run(
        &[node("node1", VERY_LARGE), node("node2", VERY_LARGE)],
        &[
            on(pod("p1.1", LOW, SMALL).started(5), "node1"),
            on(pod("p1.2", LOW, SMALL).started(4), "node1"),
            on(pod("p1.3", MID, MEDIUM).started(3), "node1"),
            on(pod("p1.4", HIGH, SMALL).started(2), "node1"),
            on(pod("p2", HIGH, LARGE).started(1), "node2"),
        ],
        pod("p", HIGH, LARGE).build(),
        &[],
        d,
    );
    assert_eq!(chosen(&out, &snap), ("node1".into(), vec!["p1.3".into(), "p1.1".into()], 0));
}

#[test]
fn dry_run_respects_disruption_budgets() {
    let d = PreemptionArgs::default();
    let nodes = [node("node1", VERY_LARGE)];
    let pods = [
        on(pod("p1.1", MID, MEDIUM).label("app", "foo").started(1), "node1"),
        on(pod("p1.2", MID, MEDIUM).label("app", "foo").started(2), "node1"),
    ];
    let cases: [(&str, Budget, usize); 3] = [
        ("same budget", budget("foo", 1, &[]), 1),
        ("other pod already disrupted", budget("foo", 1, &["p2"]), 1),
        ("victim already disrupted", budget("foo", 1, &["p1.2"]), 0),
    ];
    for (name, b, violations) in cases {
        let (out, snap) = run(&nodes, &pods, pod("p", HIGH, VERY_LARGE).build(), &[b], d);
        let (_, victims, v) = chosen(&out, &snap);
        assert_eq!(victims.len(), 2, "{name}");
        assert_eq!(v, violations, "{name}");
    }
    // Three pods, one already disrupted: all go, one violation.
    let pods3 = [
        on(pod("p1.1", MID, MEDIUM).label("app", "foo").started(1), "node1"),
        on(pod("p1.2", MID, MEDIUM).label("app", "foo").started(2), "node1"),
        on(pod("p1.3", MID, MEDIUM).label("app", "foo").started(3), "node1"),
    ];
    let big = NodeBuilder::new("node1").capacity("600m", "1Gi", "32").build();
    let (out, snap) = run(&[big], &pods3, pod("p", HIGH, "600m").build(), &[budget("foo", 1, &["p1.3"])], d);
    let (_, victims, v) = chosen(&out, &snap);
    assert_eq!((victims.len(), v), (3, 1));
}

#[test]
fn the_node_without_budget_violations_is_preferred() {
    // node1's only victim is protected; node2's is not.
    let nodes = [node("node1", VERY_LARGE), node("node2", VERY_LARGE)];
    let pods = [on(pod("a", LOW, VERY_LARGE).label("app", "db"), "node1"), on(pod("b", MID, VERY_LARGE), "node2")];
    let (out, snap) =
        run(&nodes, &pods, pod("p", HIGH, LARGE).build(), &[budget("db", 0, &[])], PreemptionArgs::default());
    assert_eq!(chosen(&out, &snap), ("node2".into(), vec!["b".into()], 0));
    // Without the budget the lower-priority victim's node wins.
    let (out, snap) = run(&nodes, &pods, pod("p", HIGH, LARGE).build(), &[], PreemptionArgs::default());
    assert_eq!(chosen(&out, &snap).0, "node1");
}

/// TestSelectBestCandidate: three (or four) 500m nodes, the preemptor needs all of a node.
#[test]
fn select_best_candidate_table() {
    type Case = (&'static str, i32, Vec<(&'static str, &'static str, i32, &'static str, i64)>, &'static [&'static str]);
    let cases: Vec<Case> = vec![
        (
            "min highest priority",
            HIGH,
            vec![
                ("p1.1", "node1", MID, MEDIUM, 0),
                ("p1.2", "node1", MID, LARGE, 0),
                ("p2.1", "node2", MID, MEDIUM, 0),
                ("p2.2", "node2", LOW, MEDIUM, 0),
                ("p3.1", "node3", LOW, MEDIUM, 0),
                ("p3.2", "node3", LOW, MEDIUM, 0),
            ],
            &["node3"],
        ),
        (
            "min sum of priorities",
            HIGH,
            vec![
                ("p1.1", "node1", MID, MEDIUM, 0),
                ("p1.2", "node1", MID, LARGE, 0),
                ("p2.1", "node2", MID, LARGE, 0),
                ("p2.2", "node2", LOW, MEDIUM, 0),
                ("p3.1", "node3", MID, MEDIUM, 0),
                ("p3.2", "node3", MID, MEDIUM, 0),
            ],
            &["node2"],
        ),
        (
            "fewest pods",
            HIGH,
            vec![
                ("p1.1", "node1", MID, SMALL, 0),
                ("p1.2", "node1", NEG, SMALL, 0),
                ("p1.3", "node1", MID, SMALL, 0),
                ("p1.4", "node1", NEG, SMALL, 0),
                ("p2.1", "node2", MID, LARGE, 0),
                ("p2.2", "node2", NEG, MEDIUM, 0),
                ("p3.1", "node3", MID, MEDIUM, 0),
                ("p3.2", "node3", NEG, SMALL, 0),
                ("p3.3", "node3", LOW, SMALL, 0),
            ],
            &["node2"],
        ),
        (
            "adjusted sum",
            HIGH,
            vec![
                ("p1.1", "node1", MID, SMALL, 0),
                ("p1.2", "node1", NEG, SMALL, 0),
                ("p1.3", "node1", NEG, SMALL, 0),
                ("p2.1", "node2", MID, LARGE, 0),
                ("p2.2", "node2", NEG, MEDIUM, 0),
                ("p3.1", "node3", MID, MEDIUM, 0),
                ("p3.2", "node3", NEG, SMALL, 0),
                ("p3.3", "node3", LOW, SMALL, 0),
            ],
            &["node2"],
        ),
        (
            "non-overlapping",
            VERY_HIGH,
            vec![
                ("p1.1", "node1", MID, SMALL, 0),
                ("p1.2", "node1", LOW, SMALL, 0),
                ("p1.3", "node1", LOW, SMALL, 0),
                ("p2.1", "node2", HIGH, LARGE, 0),
                ("p3.1", "node3", MID, MEDIUM, 0),
                ("p3.2", "node3", LOW, SMALL, 0),
                ("p3.3", "node3", LOW, SMALL, 0),
                ("p3.4", "node3", LOW, MEDIUM, 0),
                ("p4.1", "node4", MID, MEDIUM, 0),
                ("p4.2", "node4", MID, SMALL, 0),
                ("p4.3", "node4", MID, SMALL, 0),
                ("p4.4", "node4", NEG, SMALL, 0),
            ],
            &["node1"],
        ),
        (
            "later start, same per node",
            HIGH,
            vec![
                ("p1.1", "node1", MID, MEDIUM, 2),
                ("p1.2", "node1", MID, MEDIUM, 2),
                ("p2.1", "node2", MID, MEDIUM, 3),
                ("p2.2", "node2", MID, MEDIUM, 3),
                ("p3.1", "node3", MID, MEDIUM, 1),
                ("p3.2", "node3", MID, MEDIUM, 1),
            ],
            &["node2"],
        ),
        (
            "later start, all different",
            HIGH,
            vec![
                ("p1.1", "node1", MID, MEDIUM, 4),
                ("p1.2", "node1", MID, MEDIUM, 2),
                ("p2.1", "node2", MID, MEDIUM, 5),
                ("p2.2", "node2", MID, MEDIUM, 1),
                ("p3.1", "node3", MID, MEDIUM, 3),
                ("p3.2", "node3", MID, MEDIUM, 6),
            ],
            &["node3"],
        ),
        (
            "start of the highest victims",
            HIGH,
            vec![
                ("p1.1", "node1", LOW, MEDIUM, 4),
                ("p1.2", "node1", MID, MEDIUM, 2),
                ("p2.1", "node2", MID, MEDIUM, 6),
                ("p2.2", "node2", LOW, MEDIUM, 1),
                ("p3.1", "node3", LOW, MEDIUM, 3),
                ("p3.2", "node3", MID, MEDIUM, 5),
            ],
            &["node2"],
        ),
    ];
    for (name, prio, pods, want) in cases {
        let n = pods.iter().map(|p| p.1).max().unwrap().trim_start_matches("node").parse::<usize>().unwrap();
        let nodes: Vec<core::Node> = (1..=n).map(|i| node(&format!("node{i}"), VERY_LARGE)).collect();
        let pods: Vec<core::Pod> =
            pods.iter().map(|(p, nd, pr, cpu, t)| on(pod(p, *pr, cpu).started(*t), nd)).collect();
        let (out, snap) = run(&nodes, &pods, pod("p", prio, VERY_LARGE).build(), &[], PreemptionArgs::default());
        let (node_name, ..) = chosen(&out, &snap);
        assert!(want.contains(&node_name.as_str()), "{name}: chose {node_name}");
    }
}

#[test]
fn eligibility() {
    let snap = snapshot(
        &[node("node1", VERY_LARGE)],
        &[
            on(pod("leaving", LOW, SMALL).terminating(true), "node1"),
            on(pod("other", LOW, SMALL).terminating(false), "node2"),
        ],
    );
    let base = || pod("p", HIGH, SMALL);
    let info = |b: PodBuilder| PodInfo::from_pod(&b.build()).unwrap();
    assert_eq!(eligible(&info(base()), None, &snap), Ok(()));
    assert_eq!(
        eligible(&info(base().never_preempt()), None, &snap).unwrap_err(),
        "not eligible due to preemptionPolicy=Never."
    );
    assert_eq!(
        eligible(&info(base().nominated("node1")), Some(Code::Unschedulable), &snap).unwrap_err(),
        "not eligible due to a terminating pod on the nominated node."
    );
    assert_eq!(eligible(&info(base().nominated("node1")), Some(Code::UnschedulableAndUnresolvable), &snap), Ok(()));
    let plain = snapshot(&[node("node1", VERY_LARGE)], &[on(pod("going", LOW, SMALL).terminating(false), "node1")]);
    assert_eq!(eligible(&info(base().nominated("node1")), None, &plain), Ok(()), "terminating without the condition");
}

#[test]
fn candidate_count_and_args() {
    let d = PreemptionArgs::default();
    assert_eq!(d.num_candidates(50), 50);
    assert_eq!(d.num_candidates(500), 100);
    assert_eq!(d.num_candidates(5000), 500);
    let a = PreemptionArgs { min_candidate_nodes_percentage: 40, min_candidate_nodes_absolute: 1 };
    assert_eq!(a.num_candidates(5), 2);
    assert!(PreemptionArgs { min_candidate_nodes_percentage: 0, min_candidate_nodes_absolute: 0 }.validate().is_err());
    assert!(
        PreemptionArgs { min_candidate_nodes_percentage: 101, min_candidate_nodes_absolute: 1 }.validate().is_err()
    );
}

#[test]
fn nominated_room_is_kept_for_equal_or_higher_priority() {
    // node1 has room for one 300m pod, nominated to a high-priority pod.
    let mut snap = snapshot(&[node("node1", VERY_LARGE)], &[]);
    let nominee = Arc::new(PodInfo::from_pod(&pod("nominee", HIGH, LARGE).build()).unwrap());
    snap.nominated = Arc::new([("node1".to_string(), vec![nominee])].into_iter().collect());
    let profile = default_profile("s");
    let mut rng = StdRng::seed_from_u64(0);
    let low = PodInfo::from_pod(&pod("low", MID, LARGE).build()).unwrap();
    let ev = evaluate(&profile, &low, &snap, &mut rng, EvaluateOptions::default());
    assert_eq!(ev.failure_message().unwrap(), "0/1 nodes are available: 1 Insufficient cpu.");
    let high = PodInfo::from_pod(&pod("high", VERY_HIGH, LARGE).build()).unwrap();
    assert!(evaluate(&profile, &high, &snap, &mut rng, EvaluateOptions::default()).selected.is_some());
}

const HOST: &str = "kubernetes.io/hostname";
const ZONE: &str = "topology.kubernetes.io/zone";

fn labelled(name: &str, zone: &str) -> core::Node {
    NodeBuilder::new(name).capacity(VERY_LARGE, "1Gi", "32").label(HOST, name).label(ZONE, zone).build()
}

/// The victims `select_victims` picks on `node`, or the reason it is no candidate.
fn victims_on(
    nodes: &[core::Node],
    pods: &[core::Pod],
    preemptor: core::Pod,
    node: &str,
) -> Result<Vec<String>, String> {
    let mut snap = snapshot(nodes, pods);
    let profile = default_profile("s");
    let pod = PodInfo::from_pod(&preemptor).unwrap();
    let i = snap.index[node];
    select_victims(&profile, &pod, &mut snap, i, &[])
        .map(|(v, _)| v.iter().map(|p| p.name.clone()).collect())
        .map_err(|st| st.message())
}

#[test]
fn existing_anti_affinity_is_resolved_by_evicting_its_pod() {
    use crate::builders::affinity_term;
    let nodes = [labelled("node1", "z"), labelled("node2", "z")];
    let pods = [
        on(
            pod("p1.1", LOW, SMALL).label("app", "foo").pod_anti_affinity(affinity_term(&[("app", "foo")], HOST)),
            "node1",
        ),
        on(pod("p1.2", MID, SMALL), "node1"),
        on(pod("p1.3", HIGH, SMALL), "node1"),
        on(pod("p2", HIGH, VERY_LARGE), "node2"),
    ];
    let p = || pod("p", HIGH, SMALL).label("app", "foo").build();
    assert_eq!(victims_on(&nodes, &pods, p(), "node1"), Ok(vec!["p1.1".to_string()]));
    assert_eq!(victims_on(&nodes, &pods, p(), "node2"), Err(NO_VICTIMS.to_string()));
    let (out, snap) = run(&nodes, &pods, p(), &[], PreemptionArgs::default());
    assert_eq!(chosen(&out, &snap), ("node1".into(), vec!["p1.1".into()], 0));
}

#[test]
fn topology_spread_is_resolved_by_evicting_the_fewest() {
    let nodes = [labelled("node-a", "zone1"), labelled("node-b", "zone1"), labelled("node-x", "zone2")];
    let foo = |n: &str, prio: i32| pod(n, prio, "").label("app", "foo");
    let pods = [
        on(foo("a1", MID), "node-a"),
        on(foo("a2", LOW), "node-a"),
        on(foo("b1", LOW), "node-b"),
        on(foo("x1", HIGH), "node-x"),
        on(foo("x2", HIGH), "node-x"),
    ];
    let p = || {
        pod("p", HIGH, "")
            .label("app", "foo")
            .spread(1, ZONE, "DoNotSchedule", &[("app", "foo")])
            .spread(1, HOST, "DoNotSchedule", &[("app", "foo")])
            .build()
    };
    assert_eq!(victims_on(&nodes, &pods, p(), "node-a"), Ok(vec!["a2".to_string()]));
    assert_eq!(victims_on(&nodes, &pods, p(), "node-b"), Ok(vec!["b1".to_string()]));
    assert_eq!(victims_on(&nodes, &pods, p(), "node-x"), Err(NO_VICTIMS.to_string()));
}

/// Five nodes, each with one pod; `protected` pods are covered by a budget allowing none.
fn five(veryhigh: &[usize], protected: &[usize]) -> (Vec<core::Node>, Vec<core::Pod>) {
    let nodes: Vec<core::Node> = (1..=5).map(|i| node(&format!("node{i}"), VERY_LARGE)).collect();
    let pods = (1..=5)
        .map(|i| {
            let prio = if veryhigh.contains(&i) { VERY_HIGH } else { MID };
            let mut b = pod(&format!("p{i}"), prio, LARGE);
            if protected.contains(&i) {
                b = b.label("app", "foo");
            }
            on(b, &format!("node{i}"))
        })
        .collect();
    (nodes, pods)
}

fn candidates(
    nodes: &[core::Node],
    pods: &[core::Pod],
    budgets: &[Budget],
    args: PreemptionArgs,
) -> Vec<(String, usize)> {
    let mut snap = snapshot(nodes, pods);
    let profile = default_profile("s");
    let pod = PodInfo::from_pod(&pod("p", HIGH, LARGE).build()).unwrap();
    let potential: Vec<usize> = (0..snap.len()).collect();
    let found = dry_run(&profile, &pod, &mut snap, &potential, 4, budgets, &args);
    found.candidates.iter().map(|c| (snap.nodes[c.node].name.clone(), c.pdb_violations)).collect()
}

#[test]
fn dry_runs_stop_at_the_candidate_limit_from_the_offset() {
    let args = PreemptionArgs { min_candidate_nodes_percentage: 40, min_candidate_nodes_absolute: 1 };
    let (nodes, pods) = five(&[], &[]);
    // From offset 4: node5, then node1; two is enough.
    assert_eq!(candidates(&nodes, &pods, &[], args), vec![("node5".into(), 0), ("node1".into(), 0)]);
    // node2 and node5 hold more important pods: node5 (none), node1, node2 (none), node3.
    let (nodes, pods) = five(&[2, 5], &[]);
    assert_eq!(candidates(&nodes, &pods, &[], args), vec![("node1".into(), 0), ("node3".into(), 0)]);
}

#[test]
fn dry_runs_look_past_the_limit_for_a_node_without_violations() {
    let args = PreemptionArgs { min_candidate_nodes_percentage: 40, min_candidate_nodes_absolute: 2 };
    let (nodes, pods) = five(&[], &[1, 2, 5]);
    // node5 and node1 violate the budget (node2 too, but the list is full); node3 does not.
    let got = candidates(&nodes, &pods, &[budget("foo", 0, &[])], args);
    assert_eq!(got, vec![("node3".into(), 0), ("node5".into(), 1), ("node1".into(), 1)]);
}

#[test]
fn nominated_pods_count_in_spreading_too() {
    // Two zones with one pod each; a pod nominated to zone a's node counts there, so a
    // second pod with maxSkew 1 must go to zone b even though a has room.
    let nodes = [labelled("a", "za"), labelled("b", "zb")];
    let pods = [on(pod("a1", LOW, "").label("app", "w"), "a"), on(pod("b1", LOW, "").label("app", "w"), "b")];
    let mut snap = snapshot(&nodes, &pods);
    let nominee = PodInfo::from_pod(&pod("n", HIGH, "").label("app", "w").build()).unwrap();
    snap.nominated = Arc::new([("a".to_string(), vec![Arc::new(nominee)])].into_iter().collect());
    let profile = default_profile("s");
    let incoming = PodInfo::from_pod(
        &pod("p", HIGH, "").label("app", "w").spread(1, ZONE, "DoNotSchedule", &[("app", "w")]).build(),
    )
    .unwrap();
    let mut rng = StdRng::seed_from_u64(0);
    let ev = evaluate(&profile, &incoming, &snap, &mut rng, EvaluateOptions::default());
    assert_eq!(ev.feasible, vec![1], "zone a would hold 3 against 1");
    let mut cache = crate::framework::EquivalenceCache::new();
    let cached =
        crate::framework::evaluate_cached(&profile, &incoming, &snap, &mut rng, EvaluateOptions::default(), &mut cache);
    assert_eq!(cached.feasible, vec![1]);
}

/// One device on `node1`, held through its claim by `victim` (priority `victim_prio`);
/// the preemptor asks for a device through its own pending claim.
fn device_world(victim_prio: i32) -> (Snapshot, PodInfo) {
    use serde_json::json;
    let nodes = [node("node1", "4")];
    let victim = on(pod("victim", victim_prio, "").resource_claim("gpu", "victim-gpu"), "node1");
    let mut snap = snapshot(&nodes, &[victim]);
    let mut objects = crate::objects::ClusterObjects::default();
    let class = json!({"metadata": {"name": "gpu"}, "spec": {"selectors": [{"cel": {"expression": "true"}}]}});
    objects.dra_mut().upsert_class(crate::dra::DeviceClass::from_api(&serde_json::from_value(class).unwrap()).unwrap());
    let slice = json!({"metadata": {"name": "node1"}, "spec": {"driver": "gpu.example.com", "nodeName": "node1",
        "pool": {"name": "node1", "generation": 1, "resourceSliceCount": 1}, "devices": [{"name": "gpu-0"}]}});
    objects.dra_mut().upsert_slice(crate::dra::Slice::from_api(&serde_json::from_value(slice).unwrap()).unwrap());
    let request = json!([{"name": "r", "exactly": {"deviceClassName": "gpu"}}]);
    let held = json!({"metadata": {"name": "victim-gpu", "namespace": "default", "uid": "c1", "resourceVersion": "1"},
        "spec": {"devices": {"requests": request}},
        "status": {"allocation": {"devices": {"results": [
            {"request": "r", "driver": "gpu.example.com", "pool": "node1", "device": "gpu-0"}]}},
            "reservedFor": [{"resource": "pods", "name": "victim", "uid": "uid-victim"}]}});
    let wanted = json!({"metadata": {"name": "p-gpu", "namespace": "default", "uid": "c2", "resourceVersion": "1"},
        "spec": {"devices": {"requests": request}}});
    for c in [held, wanted] {
        objects.dra_mut().upsert_claim(crate::dra::Claim::from_api(&serde_json::from_value(c).unwrap()).unwrap());
    }
    snap.objects = Arc::new(objects);
    let preemptor = PodInfo::from_pod(&pod("p", MID, "").resource_claim("gpu", "p-gpu").build()).unwrap();
    (snap, preemptor)
}

#[test]
fn a_victims_devices_count_as_freed_when_it_is_their_only_consumer() {
    let profile = default_profile("s");
    let d = PreemptionArgs::default();
    // A lower-priority holder: evicting it frees the device, so it is the victim.
    let (mut snap, p) = device_world(LOW);
    let ev = evaluate(&profile, &p, &snap, &mut StdRng::seed_from_u64(0), EvaluateOptions::default());
    assert_eq!(ev.failure_message().unwrap(), "0/1 nodes are available: 1 cannot allocate all claims.");
    let out = preempt(&profile, &p, &mut snap, &ev, &[], &d, &mut ZeroRng);
    assert_eq!(chosen(&out, &snap), ("node1".into(), vec!["victim".into()], 0));
    assert_eq!(snap.objects.dra().holders(&crate::dra::DeviceId::new("gpu.example.com", "node1", "gpu-0")), 1);
    // A holder of the same priority: the device cannot be freed, as kube-scheduler says it.
    let (mut snap, p) = device_world(MID);
    let ev = evaluate(&profile, &p, &snap, &mut StdRng::seed_from_u64(0), EvaluateOptions::default());
    let out = preempt(&profile, &p, &mut snap, &ev, &[], &d, &mut ZeroRng);
    assert_eq!(message(&out), "0/1 nodes are available: 1 Preemption is not helpful for scheduling.");
}

/// kube-scheduler's PodTopologySpread never counts a terminating pod, yet its RemovePod
/// takes every victim off its counts: in the dry run a terminating lower-priority pod's
/// removal lowers its zone's count below what PreFilter counted, so the node passes and
/// the terminating pod is its victim. A running pod in its place was counted, and taking
/// it off leaves the equal-priority pod's count: no candidate.
#[test]
fn a_terminating_victim_comes_off_the_spread_counts_as_kube_schedulers_remove_pod_takes_it() {
    const ZONE: &str = "topology.kubernetes.io/zone";
    let nodes = [
        NodeBuilder::new("zn1").capacity("4", "1Gi", "32").label(ZONE, "a").taint("only", "x", "NoSchedule").build(),
        NodeBuilder::new("zn2").capacity("4", "1Gi", "32").label(ZONE, "b").build(),
    ];
    let spread = |p: PodBuilder| p.label("v", "2");
    let preemptor = spread(pod("p", MID, SMALL)).spread(1, ZONE, "DoNotSchedule", &[("v", "2")]).build();
    let counted = on(spread(pod("counted", MID, SMALL)), "zn2");
    let (out, snap) = run(
        &nodes,
        &[counted.clone(), on(spread(pod("leaving", LOW, SMALL)).terminating(false), "zn2")],
        preemptor.clone(),
        &[],
        PreemptionArgs::default(),
    );
    assert_eq!(chosen(&out, &snap), ("zn2".into(), vec!["leaving".into()], 0));
    let (out, _) = run(
        &nodes,
        &[counted, on(spread(pod("running", LOW, SMALL)), "zn2")],
        preemptor,
        &[],
        PreemptionArgs::default(),
    );
    assert!(message(&out).contains("didn't match pod topology spread constraints"), "{}", message(&out));
}
