//! The arithmetic of quotas, after scheduler-plugins' tables for ElasticQuotaInfo,
//! in our own cases and words (CPU in millicores, memory in bytes).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;

const GPU: &str = "nvidia.com/gpu";
const UNLIMITED: i64 = i64::MAX;

/// CPU, memory and, when given, GPUs and ephemeral storage.
fn res(cpu: i64, mem: i64, gpu: Option<i64>, storage: i64) -> Resource {
    let mut r = Resource { milli_cpu: cpu, memory: mem, ephemeral_storage: storage, ..Default::default() };
    if let Some(g) = gpu {
        r.set_value(GPU, g);
    }
    r
}

fn quota(min: Resource, max: Resource) -> Quota {
    Quota { name: "q".into(), namespace: "ns1".into(), min, max, tree: Default::default() }
}

fn list(items: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    items.iter().map(|(k, v)| (k.to_string(), Quantity(v.to_string()))).collect()
}

fn api(min: Option<&[(&str, &str)]>, max: Option<&[(&str, &str)]>) -> ElasticQuota {
    ElasticQuota {
        metadata: ObjectMeta { name: Some("quota".into()), namespace: Some("ns1".into()), ..Default::default() },
        spec: api::ElasticQuotaSpec { min: min.map(list), max: max.map(list) },
        status: None,
    }
}

#[test]
fn charging_and_discharging_pods_adds_and_takes_back_their_requests() {
    let mut st = QuotaState::default();
    st.upsert(quota(Resource::default(), Resource::default())).unwrap();
    st.charge("ns1", &res(1000, 200, Some(2), 0));
    for r in [res(1000, 50, Some(1), 0), res(2000, 100, Some(0), 0), res(0, 0, Some(2), 0)] {
        st.charge("ns1", &r);
    }
    assert_eq!(st.used("ns1"), &res(4000, 350, Some(5), 0));
    for r in [res(1000, 50, Some(1), 0), res(2000, 100, Some(0), 0), res(0, 0, Some(2), 0)] {
        st.discharge("ns1", &r);
    }
    assert_eq!(st.used("ns1"), &res(1000, 200, Some(2), 0));
    st.discharge("ns1", &res(1000, 200, Some(2), 0));
    assert_eq!(st.used("ns1"), &Resource::default(), "a namespace whose pods all left uses nothing");
    assert_eq!(st.used("elsewhere"), &Resource::default());
}

#[test]
fn over_min_with_a_request_compares_each_resource_the_request_names() {
    let cases = [
        (
            "request and use exceed min",
            res(4000, 200, Some(5), 0),
            res(3000, 100, Some(5), 0),
            res(1500, 100, None, 0),
            true,
        ),
        (
            "request and use within min",
            res(300, 100, Some(5), 0),
            res(4000, 200, Some(5), 0),
            res(100, 50, None, 0),
            false,
        ),
        (
            "a GPU min does not name counts as 0",
            res(10, 10, None, 0),
            res(3000, 100, None, 0),
            res(10, 10, Some(5), 0),
            true,
        ),
        (
            "ephemeral storage within min",
            res(10, 10, None, 10),
            res(3000, 100, None, 100),
            res(10, 10, None, 10),
            false,
        ),
    ];
    for (name, used, min, request, want) in cases {
        let q = quota(min, res(UNLIMITED, UNLIMITED, None, UNLIMITED));
        assert_eq!(q.over_min_with(&used, &request), want, "{name}");
    }
}

#[test]
fn over_max_with_a_request_allows_reaching_max_exactly() {
    let cases = [
        (
            "request and use exceed max",
            res(4000, 200, Some(5), 0),
            res(4000, 200, Some(5), 0),
            res(100, 100, None, 0),
            true,
        ),
        (
            "request and use reach max",
            res(3900, 100, Some(5), 0),
            res(4000, 200, Some(5), 0),
            res(100, 100, None, 0),
            false,
        ),
        (
            "a GPU max does not name is unlimited",
            res(10, 10, None, 0),
            res(3000, 100, None, 0),
            res(10, 10, Some(5), 0),
            false,
        ),
        ("ephemeral storage over max", res(10, 10, None, 10), res(3000, 100, None, 100), res(10, 10, None, 100), true),
    ];
    for (name, used, max, request, want) in cases {
        let q = quota(Resource::default(), max);
        assert_eq!(q.over_max_with(&used, &request), want, "{name}");
    }
}

#[test]
fn over_min_looks_at_every_resource_used() {
    let cases = [
        ("CPU used over min", res(4000, 200, Some(5), 0), res(3000, 300, Some(5), 0), true),
        ("all used within min", res(300, 100, Some(5), 0), res(4000, 200, Some(5), 0), false),
        ("GPUs used that min does not name", res(300, 100, Some(5), 0), res(4000, 200, None, 0), true),
        ("ephemeral storage used over min", res(300, 100, None, 100), res(4000, 200, None, 10), true),
    ];
    for (name, used, min, want) in cases {
        assert_eq!(quota(min, Resource::default()).over_min(&used), want, "{name}");
    }
}

#[test]
fn a_quota_reads_min_and_max_with_their_defaults() {
    let both = Some(&[("cpu", "100m"), ("memory", "1000")][..]);
    let min_only = Some(&[("cpu", "10m"), ("memory", "100")][..]);
    let cases = [
        ("min and max", min_only, both, res(10, 100, None, 0), res(100, 1000, None, UNLIMITED)),
        ("no max: unlimited", min_only, None, res(10, 100, None, 0), res(UNLIMITED, UNLIMITED, None, UNLIMITED)),
        ("no min: nothing guaranteed", None, both, res(0, 0, None, 0), res(100, 1000, None, UNLIMITED)),
        ("neither", None, None, res(0, 0, None, 0), res(UNLIMITED, UNLIMITED, None, UNLIMITED)),
    ];
    for (name, min, max, want_min, want_max) in cases {
        let q = Quota::from_api(&api(min, max)).unwrap();
        assert_eq!((q.min, q.max), (want_min, want_max), "{name}");
        let st = QuotaState::default();
        assert_eq!(st.used("ns1"), &Resource::default(), "{name}: a new quota starts from its pods' use");
    }
}

#[test]
fn names_a_quota_does_not_count_are_left_out_and_bad_amounts_are_errors() {
    let q = Quota::from_api(&api(None, Some(&[("pods", "10"), ("gpu", "3"), (GPU, "8"), ("hugepages-2Mi", "1Gi")])))
        .unwrap();
    assert_eq!(q.max.scalar, vec![("hugepages-2Mi".to_string(), 1 << 30), (GPU.to_string(), 8)]);
    assert_eq!(q.max.allowed_pod_number, 0, "pods is not counted");
    let err = Quota::from_api(&api(Some(&[("cpu", "a lot")]), None)).unwrap_err();
    assert!(err.starts_with("spec.min: cpu: "), "{err}");
}

#[test]
fn the_aggregate_check_adds_every_quotas_use_against_every_quotas_min() {
    let mut st = QuotaState::default();
    for ns in ["ns1", "ns2"] {
        let q = Quota {
            name: ns.into(),
            namespace: ns.into(),
            min: res(0, 1000, None, 0),
            max: res(0, 2000, None, 0),
            tree: Default::default(),
        };
        assert_eq!(st.upsert(q), Ok(false));
    }
    for (ns, used) in [("ns1", 1800), ("ns2", 200), ("free", 5000)] {
        st.charge(ns, &res(0, used, None, 0));
    }
    assert_eq!(st.used("free"), &Resource::default(), "a namespace without a quota is not counted");
    assert!(!st.aggregated_over_min_with(&res(0, 0, None, 0)), "the namespace without a quota does not count");
    assert!(!st.aggregated_over_min_with(&res(0, 0, Some(0), 0)));
    assert!(st.aggregated_over_min_with(&res(0, 500, None, 0)), "1800 + 200 + 500 is over 2000");
    assert!(st.aggregated_over_min_with(&res(0, 0, Some(1), 0)), "no quota guarantees GPUs");
}

#[test]
fn a_namespace_keeps_its_first_quota_and_removal_names_it() {
    let mut st = QuotaState::default();
    let q = |name: &str| Quota {
        name: name.into(),
        namespace: "ns1".into(),
        min: res(1, 1, None, 0),
        max: res(2, 2, None, 0),
        tree: Default::default(),
    };
    assert_eq!(st.upsert(q("a")), Ok(false));
    assert_eq!(st.upsert(q("a")), Ok(true));
    assert!(st.upsert(q("b")).unwrap_err().contains("already has ElasticQuota a"));
    assert!(st.remove("ns1/b").is_some(), "b was kept as a quota of a tree");
    assert_eq!(st.quota("ns1").map(|q| q.name.as_str()), Some("a"), "the namespace's own stays");
    assert_eq!(st.remove("ns1/a").map(|q| q.name.clone()), Some("a".to_string()));
    assert!(st.is_empty());
}

#[test]
fn a_quota_that_comes_after_its_pods_counts_them_afresh_once() {
    let pod =
        |ns: &str, name: &str, cpu: &str| crate::builders::PodBuilder::new(name).namespace(ns).req(cpu, "").info();
    let placed = [pod("ns1", "p", "1"), pod("ns1", "q", "2"), pod("ns2", "p", "4")];
    let mut st = QuotaState::default();
    st.charge("ns1", &res(1000, 0, None, 0));
    assert_eq!(st.used("ns1"), &Resource::default(), "no quota yet: nothing kept");
    st.upsert(quota(Resource::default(), Resource::default())).unwrap();
    assert!(st.needs_recount(0));
    st.charge("ns1", &res(1000, 0, None, 0));
    st.recount(&mut placed.iter(), &Default::default());
    assert!(!st.needs_recount(0));
    assert_eq!(st.used("ns1").milli_cpu, 3000, "the placed pods, not what was charged before the count");
    st.upsert(quota(Resource::default(), res(1, 1, None, 1))).unwrap();
    assert!(!st.needs_recount(0), "a changed quota keeps its count");
    st.remove("ns1/q");
    assert_eq!(st.used("ns1"), &Resource::default());
}

#[test]
fn a_pod_is_counted_once_and_taken_back_once_however_often_it_is_told_of() {
    // Both quota plugins' dry runs, or a gang's victims in a scratch snapshot, may tell of
    // the same pod twice.
    let mut st = QuotaState::default();
    st.upsert(quota(res(0, 0, None, 0), res(UNLIMITED, UNLIMITED, None, UNLIMITED))).unwrap();
    st.recount(&mut std::iter::empty(), &Default::default());
    let pod = crate::builders::PodBuilder::new("p").namespace("ns1").req("1", "").info();
    st.charge_pod(&pod, &Default::default());
    st.charge_pod(&pod, &Default::default());
    assert_eq!(st.used("ns1").milli_cpu, 1000);
    st.discharge_pod(&pod);
    st.discharge_pod(&pod);
    assert_eq!(st.used("ns1").milli_cpu, 0);
    let other = crate::builders::PodBuilder::new("q").namespace("ns1").req("2", "").info();
    st.charge_pod(&other, &Default::default());
    st.discharge_pod(&pod);
    assert_eq!(st.used("ns1").milli_cpu, 2000, "a pod not counted takes nothing back");
}
