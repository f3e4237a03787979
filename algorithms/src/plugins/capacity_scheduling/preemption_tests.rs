//! CapacityScheduling's preemption, after scheduler-plugins' tables for its PostFilter,
//! dry run and eligibility, in our own cases and words. One node of 150 bytes of memory
//! (and no CPU); pods of 50 bytes; priorities mid 100 and high 1000.

use std::sync::Arc;

use super::preemption::{FlatRules, NEVER, NO_STATE, TERMINATING, eligible};
use super::*;
use crate::builders::{NodeBuilder, PodBuilder};
use crate::framework::{EvaluateOptions, Evaluation, PostFilterPlugin, PostFilterResult, Profile, evaluate};
use crate::objects::ClusterObjects;
use crate::plugins::node_resources_fit::NodeResourcesFit;
use crate::quotas::{ElasticQuota, Quota, QuotaObjects};

const MID: i32 = 100;
const HIGH: i32 = 1000;

fn pod(ns: &str, name: &str, priority: i32) -> PodBuilder {
    PodBuilder::new(name).namespace(ns).req("", "50").priority(priority)
}

fn quota(ns: &str, min: i64, max: i64) -> Quota {
    let list = |v: i64| {
        Some(
            [("memory".to_string(), k8s_openapi::apimachinery::pkg::api::resource::Quantity(v.to_string()))]
                .into_iter()
                .collect(),
        )
    };
    let api = ElasticQuota {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(ns.into()),
            namespace: Some(ns.into()),
            ..Default::default()
        },
        spec: crate::quotas::api::ElasticQuotaSpec { min: list(min), max: list(max) },
        status: None,
    };
    Quota::from_api(&api).unwrap()
}

fn profile() -> Profile {
    let fit = NodeResourcesFit::new(&Default::default()).unwrap();
    Profile {
        filters: vec![Arc::new(fit), Arc::new(CapacityScheduling)],
        post_filters: vec![Arc::new(CapacityScheduling)],
        ..Default::default()
    }
}

/// node-a with `placed` on it, and quotas (namespace, min, max, used).
fn cluster(placed: Vec<PodBuilder>, quotas: &[(&str, i64, i64, i64)]) -> Snapshot {
    let node = NodeBuilder::new("node-a").capacity("", "150", "32").build();
    let pods: Vec<_> = placed.into_iter().map(|p| p.node_name("node-a").build()).collect();
    let mut snap = crate::builders::snapshot(&[node], &pods);
    let mut objects = ClusterObjects::default();
    for &(ns, min, max, _) in quotas {
        objects.quotas_mut().upsert(quota(ns, min, max)).unwrap();
    }
    // The placed pods are counted, as the cache counts them; each quota's use is then
    // made what the case says (its other pods run elsewhere).
    for p in snap.nodes[0].pods.iter() {
        objects.quotas_mut().charge_pod(p, &Default::default());
    }
    for &(ns, _, _, used) in quotas {
        let have = objects.quotas().used(ns).memory;
        let gap = Resource { memory: (used - have).abs(), ..Default::default() };
        if used > have {
            objects.quotas_mut().charge(ns, &gap);
        } else {
            objects.quotas_mut().discharge(ns, &gap);
        }
    }
    snap.objects = Arc::new(objects);
    snap
}

/// The victims PostFilter names on node-a, or its message.
fn preempt(preemptor: &PodInfo, snap: &mut Snapshot) -> Result<Vec<String>, String> {
    let profile = profile();
    let mut rng = <rand::rngs::SmallRng as rand::SeedableRng>::seed_from_u64(1);
    let ev = evaluate(&profile, preemptor, snap, &mut rng, EvaluateOptions::default());
    assert!(ev.selected.is_none(), "the pod fits without preemption");
    match CapacityScheduling.post_filter(&profile, preemptor, snap, &ev, &mut rng) {
        PostFilterResult::Nominate(c) => {
            assert_eq!(snap.nodes[c.node].name, "node-a");
            Ok(c.victims.iter().map(|p| p.name.clone()).collect())
        }
        other => Err(other.message().unwrap_or_default()),
    }
}

#[test]
fn a_pod_over_its_min_evicts_lower_priority_pods_of_its_own_quota() {
    let placed = vec![pod("ns1", "t1-p1", MID), pod("ns2", "t1-p2", MID), pod("ns2", "t1-p3", MID)];
    let mut snap = cluster(placed, &[("ns1", 50, 200, 50), ("ns2", 200, 200, 100)]);
    assert_eq!(preempt(&pod("ns1", "t1-p", HIGH).info(), &mut snap), Ok(vec!["t1-p1".to_string()]));
}

#[test]
fn a_pod_within_its_min_takes_back_what_another_quota_borrowed_whatever_its_priority() {
    let placed = vec![pod("ns1", "t1-p1", MID), pod("ns2", "t1-p2", HIGH), pod("ns2", "t1-p3", MID)];
    let mut snap = cluster(placed, &[("ns1", 150, 200, 50), ("ns2", 50, 200, 100)]);
    // t1-p3 (less important) is taken first; ns2 is then within its min, so t1-p2 stays.
    assert_eq!(preempt(&pod("ns1", "t1-p", HIGH).info(), &mut snap), Ok(vec!["t1-p3".to_string()]));
    let placed = vec![pod("ns1", "t1-p1", MID), pod("ns2", "t1-p2", HIGH), pod("ns2", "t1-p3", HIGH)];
    let mut snap = cluster(placed, &[("ns1", 150, 200, 50), ("ns2", 50, 200, 100)]);
    let victims = preempt(&pod("ns1", "t1-p", MID).info(), &mut snap).unwrap();
    assert_eq!(victims.len(), 1, "a higher-priority borrower is evicted: {victims:?}");
}

#[test]
fn the_post_filter_nominates_node_a_in_each_of_upstreams_cases() {
    let placed = || vec![pod("ns1", "t1-p2", MID), pod("ns2", "t1-p3", MID), pod("ns2", "t1-p4", MID)];
    let cases: [(&str, Vec<(&str, i64, i64, i64)>, usize); 3] = [
        ("in-namespace preemption", vec![("ns1", 50, 200, 50), ("ns2", 200, 200, 100)], 1),
        ("cross-namespace preemption", vec![("ns1", 150, 200, 50), ("ns2", 50, 200, 100)], 1),
        ("without quotas", vec![], 1),
    ];
    for (name, quotas, evicted) in cases {
        let mut snap = cluster(placed(), &quotas);
        let victims = preempt(&pod("ns1", "t1-p1", HIGH).info(), &mut snap).unwrap_or_else(|m| panic!("{name}: {m}"));
        assert_eq!(victims.len(), evicted, "{name}: {victims:?}");
    }
}

#[test]
fn a_pod_without_a_quota_evicts_only_lower_priority_pods_without_one() {
    let placed = vec![pod("ns1", "q1", 0), pod("ns1", "q2", 0), pod("free", "f1", HIGH)];
    let mut snap = cluster(placed, &[("ns1", 50, 200, 100)]);
    let message = preempt(&pod("other", "p", MID).info(), &mut snap).unwrap_err();
    assert_eq!(
        message, "0/1 nodes are available: 1 No victims found on node node-a for preemptor pod p.",
        "pods of a quota and higher-priority pods are not its to evict"
    );
}

#[test]
fn a_node_where_the_quota_would_still_refuse_the_pod_is_no_candidate() {
    // ns1 may use 100 at most and uses 100 elsewhere: evicting on node-a (ns2's pods,
    // lower priority, no quota... none of ns1's) cannot make room in its quota.
    let placed = vec![pod("ns1", "mine", MID), pod("ns2", "b1", 0), pod("ns2", "b2", 0)];
    let mut snap = cluster(placed, &[("ns1", 100, 100, 100), ("ns2", 200, 200, 100)]);
    let message = preempt(&pod("ns1", "p", MID).info(), &mut snap).unwrap_err();
    assert!(message.starts_with("0/1 nodes are available: 1 "), "{message}");
}

fn eligible_with(preemptor: PodInfo, placed: Vec<PodBuilder>, quotas: &[(&str, i64, i64, i64)]) -> Result<(), String> {
    let snap = cluster(placed, quotas);
    let mut rng = <rand::rngs::SmallRng as rand::SeedableRng>::seed_from_u64(1);
    let ev = evaluate(&profile(), &preemptor, &snap, &mut rng, EvaluateOptions::default());
    eligible(&FlatRules, &profile(), &preemptor, &snap, &ev)
}

#[test]
fn eligibility_follows_the_quota_of_the_terminating_pods_on_the_nominated_node() {
    let existing = |ns: &str| pod(ns, "t1-p0", MID).terminating(false);
    let nominated = || pod("ns1", "t1-p1", HIGH).nominated("node-a");
    type Case = (&'static str, PodInfo, Vec<PodBuilder>, Vec<(&'static str, i64, i64, i64)>, Result<(), String>);
    let cases: Vec<Case> = vec![
        (
            "preemptionPolicy Never",
            nominated().never_preempt().info(),
            vec![existing("ns1")],
            vec![("ns1", 50, 150, 0)],
            Err(NEVER.into()),
        ),
        (
            "a terminating lower-priority pod of its own quota",
            nominated().info(),
            vec![existing("ns1"), pod("ns1", "big", 0).req("", "100")],
            vec![("ns1", 50, 150, 0)],
            Err(TERMINATING.into()),
        ),
        (
            "a terminating pod of a quota over its min, the pod within its own",
            nominated().req("", "0").info(),
            vec![existing("ns2"), pod("ns2", "big", 0).req("", "100")],
            vec![("ns1", 50, 150, 0), ("ns2", 50, 150, 100)],
            Err(TERMINATING.into()),
        ),
        (
            "a terminating pod, neither with a quota",
            nominated().info(),
            vec![existing("ns2"), pod("ns2", "big", 0).req("", "100")],
            vec![],
            Err(TERMINATING.into()),
        ),
        (
            "a terminating pod of a quota, the pod without one",
            nominated().info(),
            vec![existing("ns2"), pod("ns2", "big", 0).req("", "100")],
            vec![("ns2", 50, 150, 100)],
            Ok(()),
        ),
        ("not nominated", pod("ns1", "t1-p1", HIGH).info(), vec![existing("ns1")], vec![("ns1", 50, 150, 0)], Ok(())),
    ];
    for (name, preemptor, placed, quotas, want) in cases {
        assert_eq!(eligible_with(preemptor, placed, &quotas), want, "{name}");
    }
}

#[test]
fn a_pod_a_pre_filter_before_the_quotas_rejected_is_not_eligible() {
    let snap = cluster(vec![], &[("ns1", 50, 150, 0)]);
    let affinity = crate::plugins::node_affinity::NodeAffinity::new(&Default::default());
    let ports = crate::plugins::node_ports::NodePorts;
    let profile = Profile {
        filters: vec![Arc::new(affinity), Arc::new(CapacityScheduling), Arc::new(ports)],
        post_filters: vec![Arc::new(CapacityScheduling)],
        ..Default::default()
    };
    let p = pod("ns1", "p", HIGH).info();
    let rejected_by = |plugin: &'static str| {
        let mut status = Status::unschedulable("rejected");
        status.plugin = plugin;
        Evaluation { prefilter_rejection: Some(status), ..Default::default() }
    };
    assert_eq!(eligible(&FlatRules, &profile, &p, &snap, &rejected_by("NodeAffinity")), Err(NO_STATE.into()));
    assert_eq!(eligible(&FlatRules, &profile, &p, &snap, &rejected_by(NAME)), Ok(()));
    assert_eq!(eligible(&FlatRules, &profile, &p, &snap, &rejected_by("NodePorts")), Ok(()), "its PreFilter ran first");
}

#[test]
fn a_pod_over_its_min_does_not_evict_pods_of_its_quota_at_its_own_priority() {
    let placed = vec![pod("ns1", "mine", MID), pod("ns2", "theirs", 0)];
    let mut snap = cluster(placed, &[("ns1", 20, 60, 50), ("ns2", 0, 500, 50)]);
    let message = preempt(&pod("ns1", "p", MID).info(), &mut snap).unwrap_err();
    assert_eq!(message, "0/1 nodes are available: 1 No victims found on node node-a for preemptor pod p.");
}

/// node-a (full): ns1's own pod, a member of ns2's group `g` and ns2's single pod `s`;
/// node-b: the other member of `g`. ns2 borrowed beyond its min; ns1's pod is within its.
fn borrowed_by_a_group(single: i32, group: i32) -> Result<Vec<String>, String> {
    let member = |name: &str| pod("ns2", name, group).label(crate::pod_info::POD_GROUP_LABEL, "g");
    let on_b = member("g-1").node_name("node-b").build();
    let placed = vec![pod("ns1", "mine", MID), member("g-0"), pod("ns2", "s", single)];
    let mut snap = cluster(placed, &[("ns1", 150, 1000, 50), ("ns2", 50, 1000, 150)]);
    let node_b = NodeBuilder::new("node-b").capacity("", "150", "32").build();
    let with_b =
        crate::builders::snapshot(&[NodeBuilder::new("node-a").capacity("", "150", "32").build(), node_b], &[on_b]);
    snap.nodes.push(with_b.nodes[1].clone());
    snap.generations.push(with_b.generations[1]);
    let mut index = (*snap.index).clone();
    index.insert("node-b".into(), 1);
    snap.index = Arc::new(index);
    let mut victims = preempt(&pod("ns1", "p", HIGH).info(), &mut snap)?;
    victims.sort();
    Ok(victims)
}

#[test]
fn a_group_member_is_evicted_with_its_whole_group_and_the_group_counts_as_one() {
    // The single pod matters more: the group goes, with its member on node-b.
    assert_eq!(borrowed_by_a_group(HIGH, 0), Ok(vec!["g-0".to_string(), "g-1".to_string()]));
    // The group matters more: it is given back whole, and the single pod alone goes.
    assert_eq!(borrowed_by_a_group(0, MID), Ok(vec!["s".to_string()]));
}
