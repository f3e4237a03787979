//! Runtime shares of quota trees, after Koordinator's tables for its group quota manager,
//! in our own cases and words (CPU in cores, memory in GiB).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::tree::{ALLOW_LENT_LABEL, IS_PARENT_LABEL, PARENT_LABEL, QUOTA_NAME_LABEL, SHARED_WEIGHT_ANNOTATION};
use super::*;
use crate::builders::PodBuilder;

const GI: i64 = 1 << 30;

/// A quota `name` in namespace `name`, of CPU and memory: (min, max), its parent, whether
/// it is a parent and whether it lends.
fn quota(name: &str, min: (i64, i64), max: (i64, i64), parent: Option<&str>, is_parent: bool, lends: bool) -> Quota {
    let list = |(cpu, mem): (i64, i64)| -> BTreeMap<String, Quantity> {
        [("cpu".to_string(), Quantity(cpu.to_string())), ("memory".to_string(), Quantity(format!("{mem}Gi")))]
            .into_iter()
            .collect()
    };
    let mut labels = BTreeMap::new();
    if let Some(p) = parent {
        labels.insert(PARENT_LABEL.to_string(), p.to_string());
    }
    if is_parent {
        labels.insert(IS_PARENT_LABEL.to_string(), "true".to_string());
    }
    if !lends {
        labels.insert(ALLOW_LENT_LABEL.to_string(), "false".to_string());
    }
    let api = ElasticQuota {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(name.into()),
            labels: Some(labels),
            ..Default::default()
        },
        spec: api::ElasticQuotaSpec { min: Some(list(min)), max: Some(list(max)) },
        status: None,
    };
    Quota::from_api(&api).unwrap()
}

/// Pods of `quota` waiting for (cpu, memory).
fn asking(st: &mut QuotaState, demands: &[(&str, (i64, i64))]) {
    let pods: Vec<crate::pod_info::PodInfo> = demands
        .iter()
        .map(|(q, (cpu, mem))| {
            PodBuilder::new("p")
                .namespace("anywhere")
                .label(QUOTA_NAME_LABEL, q)
                .req(&cpu.to_string(), &format!("{mem}Gi"))
                .info()
        })
        .collect();
    st.set_waiting(&mut pods.iter());
}

fn cluster(cpu: i64, mem: i64) -> Resource {
    Resource { milli_cpu: cpu * 1000, memory: mem * GI, ..Default::default() }
}

fn runtime(st: &QuotaState, total: &Resource, name: &str) -> (i64, i64) {
    let shares = runtime::shares(st, total);
    let r = &shares[name];
    (r.milli_cpu / 1000, r.memory / GI)
}

#[test]
fn two_top_quotas_get_their_mins_and_share_the_rest_by_weight() {
    let mut st = QuotaState::default();
    let total = cluster(96, 160);
    st.upsert(quota("t1", (50, 80), (96, 160), None, false, true)).unwrap();
    asking(&mut st, &[("t1", (120, 200))]);
    assert_eq!(runtime(&st, &total, "t1"), (96, 160), "alone: everything, up to its max");
    st.upsert(quota("t2", (40, 80), (96, 160), None, false, true)).unwrap();
    asking(&mut st, &[("t1", (120, 200)), ("t2", (150, 210))]);
    assert_eq!(runtime(&st, &total, "t1"), (53, 80));
    assert_eq!(runtime(&st, &total, "t2"), (43, 80));
}

#[test]
fn a_quota_that_does_not_lend_keeps_its_min_and_its_parent_reserves_it() {
    // (parent lends, second child lends, first child asks for, runtimes of parent, children)
    let cases: [(bool, bool, i64, [i64; 3]); 9] = [
        (false, false, 0, [60, 20, 20]),
        (false, false, 40, [60, 40, 20]),
        (false, false, 60, [80, 60, 20]),
        (true, true, 0, [20, 20, 0]),
        (true, true, 40, [40, 40, 0]),
        (true, true, 60, [60, 60, 0]),
        (true, false, 0, [40, 20, 20]),
        (true, false, 40, [60, 40, 20]),
        (true, false, 60, [80, 60, 20]),
    ];
    for (parent_lends, c2_lends, wants, want) in cases {
        let mut st = QuotaState::default();
        st.upsert(quota("p", (60, 0), (96, 0), None, true, parent_lends)).unwrap();
        st.upsert(quota("c1", (20, 0), (96, 0), Some("p"), false, false)).unwrap();
        st.upsert(quota("c2", (20, 0), (96, 0), Some("p"), false, c2_lends)).unwrap();
        asking(&mut st, &[("c1", (wants, 0))]);
        let total = cluster(100, 0);
        let got = [runtime(&st, &total, "p").0, runtime(&st, &total, "c1").0, runtime(&st, &total, "c2").0];
        assert_eq!(got, want, "parent lends {parent_lends}, c2 lends {c2_lends}, c1 asks {wants}");
    }
}

#[test]
fn weights_from_the_annotation_divide_what_is_beyond_the_mins() {
    let mut st = QuotaState::default();
    let mut a = quota("a", (0, 0), (100, 0), None, false, true);
    a.tree.weight = Some(Resource { milli_cpu: 3000, ..Default::default() });
    let b = quota("b", (0, 0), (100, 0), None, false, true);
    st.upsert(a).unwrap();
    st.upsert(b).unwrap();
    asking(&mut st, &[("a", (100, 0)), ("b", (100, 0))]);
    // b weighs its max (100 cores), a 3 cores.
    let total = cluster(103, 0);
    assert_eq!((runtime(&st, &total, "a").0, runtime(&st, &total, "b").0), (3, 100));
    let annotated = ElasticQuota {
        metadata: ObjectMeta {
            name: Some("w".into()),
            namespace: Some("w".into()),
            annotations: Some(
                [(SHARED_WEIGHT_ANNOTATION.to_string(), r#"{"cpu": "2", "nvidia.com/gpu": 4}"#.to_string())].into(),
            ),
            ..Default::default()
        },
        ..Default::default()
    };
    let w = Quota::from_api(&annotated).unwrap().tree.weight.unwrap();
    assert_eq!((w.milli_cpu, w.get("nvidia.com/gpu")), (2000, 4));
}

#[test]
fn pods_count_against_the_quota_their_label_names_else_their_namespaces() {
    let mut st = QuotaState::default();
    st.upsert(quota("team", (1, 1), (2, 2), None, false, true)).unwrap();
    st.upsert(quota("other", (1, 1), (2, 2), None, false, true)).unwrap();
    let labelled = PodBuilder::new("p").namespace("team").label(QUOTA_NAME_LABEL, "other").req("1", "").info();
    let plain = PodBuilder::new("q").namespace("team").req("1", "").info();
    let unknown = PodBuilder::new("r").namespace("team").label(QUOTA_NAME_LABEL, "nope").req("1", "").info();
    assert_eq!(st.tree_quota_of(&labelled), Some("other"));
    assert_eq!(st.tree_quota_of(&plain), Some("team"));
    assert_eq!(st.tree_quota_of(&unknown), Some("team"), "a label naming no quota falls back to the namespace");
    st.charge_pod(&labelled, &Default::default());
    st.charge_pod(&plain, &Default::default());
    assert_eq!((st.used_by("other").milli_cpu, st.used_by("team").milli_cpu), (1000, 1000));
    assert_eq!(st.used("team").milli_cpu, 2000, "the namespace's own count is scheduler-plugins'");
    st.discharge_pod(&labelled);
    assert_eq!(st.used_by("other").milli_cpu, 0);
}

#[test]
fn a_parent_loop_leaves_its_quotas_at_the_top() {
    let mut st = QuotaState::default();
    st.upsert(quota("x", (10, 0), (100, 0), Some("y"), true, true)).unwrap();
    st.upsert(quota("y", (10, 0), (100, 0), Some("x"), true, true)).unwrap();
    asking(&mut st, &[("x", (30, 0)), ("y", (30, 0))]);
    let total = cluster(100, 0);
    assert_eq!((runtime(&st, &total, "x").0, runtime(&st, &total, "y").0), (30, 30));
}

#[test]
fn a_quota_named_by_pods_before_it_exists_takes_their_use_over_when_it_arrives() {
    let mut st = QuotaState::default();
    st.upsert(quota("team", (1, 1), (8, 8), None, false, true)).unwrap();
    assert!(st.needs_recount(0));
    st.recount(&mut std::iter::empty(), &Default::default());
    let labelled = PodBuilder::new("p").namespace("team").label(QUOTA_NAME_LABEL, "later").req("1", "").info();
    st.charge_pod(&labelled, &Default::default());
    assert_eq!(st.used_by("team").milli_cpu, 1000, "its namespace's quota, while `later` is unknown");
    st.upsert(quota("later", (1, 1), (8, 8), None, false, true)).unwrap();
    assert!(st.needs_recount(0));
    st.recount(&mut [labelled.clone()].iter(), &Default::default());
    assert_eq!((st.used_by("team").milli_cpu, st.used_by("later").milli_cpu), (0, 1000));
    st.discharge_pod(&labelled);
    assert_eq!((st.used_by("team").milli_cpu, st.used_by("later").milli_cpu), (0, 0), "taken back where it is");
    st.charge_pod(&labelled, &Default::default());
    st.remove("later/later");
    st.recount(&mut [labelled.clone()].iter(), &Default::default());
    assert_eq!(st.used_by("team").milli_cpu, 1000, "back to its namespace's quota when `later` goes");
}

#[test]
fn a_parent_passes_on_its_childrens_demand_in_what_it_does_not_limit() {
    let gpus = |name: &str, parent: Option<&str>, is_parent: bool, max: Option<i64>| {
        let mut q = quota(name, (0, 0), (0, 0), parent, is_parent, true);
        q.tree.limited = max.map(|_| vec!["nvidia.com/gpu".to_string()]).unwrap_or_default();
        q.max = Resource { milli_cpu: i64::MAX, memory: i64::MAX, ephemeral_storage: i64::MAX, ..Default::default() };
        if let Some(m) = max {
            q.max.set_value("nvidia.com/gpu", m);
        }
        q
    };
    let mut st = QuotaState::default();
    st.upsert(gpus("dept", None, true, None)).unwrap();
    st.upsert(gpus("team", Some("dept"), false, Some(16))).unwrap();
    let pods: Vec<crate::pod_info::PodInfo> = (0..4)
        .map(|i| PodBuilder::new(&format!("p{i}")).namespace("team").device("nvidia.com/gpu", "2").info())
        .collect();
    st.set_waiting(&mut pods.iter());
    let total = Resource { scalar: vec![("nvidia.com/gpu".to_string(), 64)], ..Default::default() };
    assert_eq!(runtime::shares(&st, &total)["team"].get("nvidia.com/gpu"), 8);
}
