//! ElasticQuota's admission by runtime share and its reclaim, in our own cases: one node
//! of 8 CPUs, quotas `a` and `b` in their own namespaces (min 2, max 8 CPUs each, weights
//! their max).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::preemption::{PREEMPTIBLE_LABEL, TreeRules};
use super::*;
use crate::builders::{NodeBuilder, PodBuilder};
use crate::objects::ClusterObjects;
use crate::plugins::capacity_scheduling::preemption::Rules;
use crate::quotas::{ElasticQuota as Api, Quota};

fn quota(name: &str) -> Quota {
    let cpu = |v: &str| -> BTreeMap<String, Quantity> { [("cpu".to_string(), Quantity(v.into()))].into() };
    Quota::from_api(&Api {
        metadata: ObjectMeta { name: Some(name.into()), namespace: Some(name.into()), ..Default::default() },
        spec: crate::quotas::api::ElasticQuotaSpec { min: Some(cpu("2")), max: Some(cpu("8")) },
        status: None,
    })
    .unwrap()
}

fn pod(ns: &str, name: &str, priority: i32) -> PodBuilder {
    PodBuilder::new(name).namespace(ns).req("1", "").priority(priority)
}

/// The node with `placed` on it; the quotas charged with them and told of `waiting`.
fn cluster(placed: &[PodInfo], waiting: &[PodInfo]) -> Snapshot {
    let node = NodeBuilder::new("n").capacity("8", "64Gi", "110").build();
    let mut snap = crate::builders::snapshot(&[node], &[]);
    let mut n = (*snap.nodes[0]).clone();
    let mut objects = ClusterObjects::default();
    objects.quotas_mut().upsert(quota("a")).unwrap();
    objects.quotas_mut().upsert(quota("b")).unwrap();
    for p in placed {
        let mut p = p.clone();
        p.node_name = Some("n".into());
        objects.quotas_mut().charge_pod(&p, &Default::default());
        n.add_pod(Arc::new(p));
    }
    objects.quotas_mut().set_waiting(&mut waiting.iter());
    snap.replace_node(0, Arc::new(n));
    snap.objects = Arc::new(objects);
    snap
}

#[test]
fn a_pod_is_admitted_while_its_quota_stays_within_its_runtime_share() {
    let placed: Vec<PodInfo> = (0..6).map(|i| pod("a", &format!("a-{i}"), 0).info()).collect();
    let (next_a, next_b) = (pod("a", "a-next", 0).info(), pod("b", "b-0", 0).info());
    let waiting = [
        next_a.clone(),
        next_b.clone(),
        pod("b", "b-1", 0).info(),
        pod("b", "b-2", 0).info(),
        pod("b", "b-3", 0).info(),
    ];
    let snap = cluster(&placed, &waiting);
    // a asks for 7, b for 4: each gets its min of 2, and the 4 left go 2 and 2.
    let st = standing(snap.objects.quotas(), &next_a, &snap).unwrap();
    assert_eq!(st.runtime.milli_cpu, 4000);
    let refused = ElasticQuota.pre_filter(&next_a, &snap).status;
    assert_eq!(
        refused.message(),
        "Insufficient quotas, quotaName: a, runtime: cpu:4, used: cpu:6, pod's request: cpu:1, exceedDimensions: [cpu]"
    );
    assert!(ElasticQuota.pre_filter(&next_b, &snap).status.is_skip(), "b is within its share");
    // With nobody else asking, a may borrow everything up to its max.
    let alone = cluster(&placed, std::slice::from_ref(&next_a));
    assert!(ElasticQuota.pre_filter(&next_a, &alone).status.is_skip());
    let free = PodBuilder::new("f").namespace("elsewhere").req("1", "").info();
    assert!(ElasticQuota.pre_filter(&free, &snap).status.is_skip(), "a pod no quota governs");
}

#[test]
fn a_quota_within_its_min_reclaims_from_one_over_its_share_down_to_the_share() {
    let mut placed: Vec<PodInfo> = (0..5).map(|i| pod("a", &format!("a-{i}"), 100).info()).collect();
    placed.push(pod("a", "keep", 100).label(PREEMPTIBLE_LABEL, "false").info());
    let b = pod("b", "b-0", 0).info();
    let waiting = [b.clone(), pod("b", "b-1", 0).info(), pod("b", "b-2", 0).info(), pod("b", "b-3", 0).info()];
    let snap = cluster(&placed, &waiting);
    // a uses 6 of a share of 4: two of its preemptible pods, whatever their priority.
    let victims = TreeRules.potential(&b, &snap, 0);
    assert_eq!(victims.len(), 2, "{victims:?}");
    assert!(victims.iter().all(|v| v.namespace == "a" && v.name != "keep"));
    // Over its min, a pod of a may evict only lower-priority pods of a.
    let over = pod("a", "late", 200).info();
    let own = TreeRules.potential(
        &over,
        &cluster(&placed, &[over.clone(), pod("a", "x", 0).info(), pod("a", "y", 0).info()]),
        0,
    );
    assert_eq!(own.len(), 5, "every preemptible pod of a at lower priority: {own:?}");
    assert!(TreeRules.refuses(&pod("a", "p", 0).info(), &snap));
    assert!(!TreeRules.refuses(&b, &snap));
}

#[test]
fn explain_walks_the_tree_the_shares_use() {
    // `b` names `a` as its parent, but `a` is no parent: `b` stands at the top, in the
    // shares and in what explain shows.
    let mut snap = cluster(&[], &[]);
    let mut objects = (*snap.objects).clone();
    let mut b = quota("b");
    b.tree.parent = Some("a".into());
    objects.quotas_mut().upsert(b).unwrap();
    snap.objects = Arc::new(objects);
    let p = pod("b", "p", 0).info();
    let lines = ElasticQuota.explain(&p, &snap);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].starts_with("quota b: "), "{lines:?}");
    assert!(snap.objects.quotas().parent_of(snap.objects.quotas().named("b").unwrap()).is_none());
}

#[test]
fn a_pod_with_claims_is_limited_to_what_its_runtime_share_leaves_in_the_resources_max_names() {
    let placed: Vec<PodInfo> = (0..6).map(|i| pod("a", &format!("a-{i}"), 0).info()).collect();
    let claimed = pod("b", "b-0", 0).resource_claim("gpus", "b-0-gpus").info();
    let waiting = [pod("a", "a-next", 0).info(), claimed.clone(), pod("b", "b-1", 0).info()];
    let snap = cluster(&placed, &waiting);
    let out = ElasticQuota.pre_filter(&claimed, &snap);
    assert!(out.status.is_skip());
    let limits = out.limits.expect("limits for a pod with claims");
    // b asks for 2 CPUs (its two waiting pods), within its min: its share is 2; it uses
    // none and the pod asks for 1, which leaves 1 CPU (in milli-CPU, as requests count).
    assert_eq!(limits.of("cpu"), Some(1000));
    assert_eq!(limits.of("gpu.example.com.deviceclass.resource.k8s.io/devices"), None, "max does not name it");
    assert_eq!(limits.by(), "the runtime share of quota b");
    assert!(ElasticQuota.pre_filter(&pod("b", "b-1", 0).info(), &snap).limits.is_none(), "no claims, no limits");
}

#[test]
fn pods_that_may_not_be_evicted_are_admitted_only_within_their_quotas_min() {
    // a's min is 2 CPUs; one of its placed pods may not be evicted.
    let placed = vec![pod("a", "keep", 0).label(PREEMPTIBLE_LABEL, "false").info(), pod("a", "a-0", 0).info()];
    let second = pod("a", "keep-2", 0).label(PREEMPTIBLE_LABEL, "false").info();
    let snap = cluster(&placed, std::slice::from_ref(&second));
    assert!(ElasticQuota.pre_filter(&second, &snap).status.is_skip(), "1 + 1 is within a min of 2");
    let mut more = placed.clone();
    more.push(second.clone());
    let third = pod("a", "keep-3", 0).label(PREEMPTIBLE_LABEL, "false").info();
    let snap = cluster(&more, std::slice::from_ref(&third));
    assert_eq!(
        ElasticQuota.pre_filter(&third, &snap).status.message(),
        "Insufficient non-preemptible quotas, quotaName: a, min: cpu:2, nonPreemptibleUsed: cpu:2, pod's request: \
         cpu:1, exceedDimensions: [cpu]"
    );
    let plain = pod("a", "a-1", 0).info();
    assert!(ElasticQuota.pre_filter(&plain, &cluster(&more, std::slice::from_ref(&plain))).status.is_skip());
    assert_eq!(snap.objects.quotas().non_preemptible_used("a").milli_cpu, 2000);
}
