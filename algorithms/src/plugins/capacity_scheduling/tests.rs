//! CapacityScheduling's PreFilter, its charging of placed pods and its queueing hints,
//! after scheduler-plugins' tables, in our own cases and words (memory in bytes).

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;
use crate::builders::PodBuilder;
use crate::events::{ObjectAction, ObjectEvent};
use crate::objects::ClusterObjects;
use crate::owners::Owner;
use crate::quotas::{ElasticQuota, Quota};

/// A quota of `ns` over memory alone.
fn quota(ns: &str, min: i64, max: i64) -> Quota {
    let list = |v: i64| Some([("memory".to_string(), Quantity(v.to_string()))].into_iter().collect());
    let api = ElasticQuota {
        metadata: ObjectMeta { name: Some(format!("{ns}-quota")), namespace: Some(ns.into()), ..Default::default() },
        spec: crate::quotas::api::ElasticQuotaSpec { min: list(min), max: list(max) },
        status: None,
    };
    Quota::from_api(&api).unwrap()
}

fn pod(ns: &str, name: &str, memory: i64, priority: i32) -> PodInfo {
    PodBuilder::new(name).namespace(ns).req("", &memory.to_string()).priority(priority).info()
}

/// Quotas (namespace, min, max) with what their namespaces use.
fn objects(quotas: &[(&str, i64, i64)], used: &[(&str, i64)]) -> ClusterObjects {
    let mut objects = ClusterObjects::default();
    for &(ns, min, max) in quotas {
        objects.quotas_mut().upsert(quota(ns, min, max)).unwrap();
    }
    for &(ns, memory) in used {
        Quotas.pod_placed(&mut objects, &pod(ns, "placed", memory, 0));
    }
    objects
}

fn snapshot(objects: ClusterObjects, nominated: Vec<PodInfo>) -> Snapshot {
    let mut snap = Snapshot::new(Vec::new(), HashMap::new());
    snap.objects = Arc::new(objects);
    let mut by_node: HashMap<String, Vec<Arc<PodInfo>>> = HashMap::new();
    by_node.insert("node-a".into(), nominated.into_iter().map(Arc::new).collect());
    snap.nominated = Arc::new(by_node);
    snap
}

const OVER_MAX: &str = "is more than Max";
const OVER_MIN: &str = "total ElasticQuota used is more than min";

#[test]
fn pre_filter_refuses_what_would_pass_max_or_the_sum_of_mins() {
    // (case, quotas, used, nominated pods, the pod, its verdict: None to pass, else the message)
    type Case =
        (&'static str, Vec<(&'static str, i64, i64)>, Vec<(&'static str, i64)>, Vec<PodInfo>, PodInfo, Option<String>);
    let cases: Vec<Case> = vec![
        (
            "within max and the sum of mins",
            vec![("ns1", 1000, 2000)],
            vec![("ns1", 300)],
            vec![],
            pod("ns1", "p1", 500, 0),
            None,
        ),
        (
            "over max",
            vec![("ns1", 1000, 2000)],
            vec![("ns1", 300)],
            vec![],
            pod("ns1", "p2", 1800, 0),
            Some("Pod ns1/p2 is rejected in PreFilter because ElasticQuota ns1 is more than Max".into()),
        ),
        (
            "reaching max exactly passes max, but not a sum of mins below it",
            vec![("ns1", 1000, 2000)],
            vec![("ns1", 300)],
            vec![],
            pod("ns1", "p3", 1700, 0),
            Some("Pod ns1/p3 is rejected in PreFilter because total ElasticQuota used is more than min".into()),
        ),
        (
            "the sum of use is over the sum of mins",
            vec![("ns1", 1000, 2000), ("ns2", 1000, 2000)],
            vec![("ns1", 1800), ("ns2", 200)],
            vec![],
            pod("ns2", "p1", 500, 0),
            Some("Pod ns2/p1 is rejected in PreFilter because total ElasticQuota used is more than min".into()),
        ),
        (
            "borrowing what another quota leaves idle",
            vec![("ns1", 1000, 2000), ("ns2", 1000, 2000)],
            vec![("ns2", 200)],
            vec![],
            pod("ns1", "p1", 1500, 0),
            None,
        ),
        (
            "a namespace without a quota",
            vec![("ns1", 1000, 2000)],
            vec![("ns1", 5000)],
            vec![],
            pod("ns2", "p1", 500, 0),
            None,
        ),
        ("no quotas at all", vec![], vec![], vec![], pod("ns2", "p1", 500, 0), None),
        (
            "a pod nominated in its namespace at its priority counts against max",
            vec![("ns1", 5000, 1000)],
            vec![("ns1", 300)],
            vec![pod("ns1", "ahead", 400, 10)],
            pod("ns1", "p1", 400, 10),
            Some(format!("Pod ns1/p1 is rejected in PreFilter because ElasticQuota ns1 {OVER_MAX}")),
        ),
        (
            "a pod nominated at a lower priority does not",
            vec![("ns1", 5000, 1000)],
            vec![("ns1", 300)],
            vec![pod("ns1", "behind", 400, 5)],
            pod("ns1", "p1", 400, 10),
            None,
        ),
        (
            "the pod itself nominated is not counted twice",
            vec![("ns1", 5000, 1000)],
            vec![("ns1", 300)],
            vec![pod("ns1", "p1", 400, 10)],
            pod("ns1", "p1", 400, 10),
            None,
        ),
        (
            "a pod nominated in a quota within its min counts in the sum of mins",
            vec![("ns1", 1000, 5000), ("ns2", 1000, 5000)],
            vec![("ns1", 900)],
            vec![pod("ns2", "other", 800, 0)],
            pod("ns1", "p1", 400, 10),
            Some(format!("Pod ns1/p1 is rejected in PreFilter because {OVER_MIN}")),
        ),
        (
            "one nominated in a quota over its min does not",
            vec![("ns1", 1000, 5000), ("ns2", 100, 5000)],
            vec![("ns2", 200)],
            vec![pod("ns2", "other", 800, 0)],
            pod("ns1", "p1", 400, 10),
            None,
        ),
        (
            "one nominated in a namespace without a quota does not",
            vec![("ns1", 1000, 5000)],
            vec![],
            vec![pod("ns3", "other", 800, 0)],
            pod("ns1", "p1", 400, 10),
            None,
        ),
    ];
    for (name, quotas, used, nominated, p, want) in cases {
        let snap = snapshot(objects(&quotas, &used), nominated);
        let out = CapacityScheduling.pre_filter(&p, &snap);
        match want {
            None => assert!(out.status.is_skip(), "{name}: {:?}", out.status),
            Some(message) => {
                assert_eq!(out.status.code, crate::status::Code::Unschedulable, "{name}");
                assert_eq!(out.status.message(), message, "{name}");
            }
        }
    }
}

#[test]
fn explain_details_name_the_quota_and_its_figures() {
    let snap = snapshot(objects(&[("ns1", 1000, 2000)], &[("ns1", 300)]), vec![]);
    let status = crate::status::with_details(true, || refusal(snap.objects.quotas(), &pod("ns1", "p", 1800, 0), &snap));
    let detail = status.and_then(|s| s.detail).unwrap();
    assert_eq!(
        detail,
        "ElasticQuota ns1/ns1-quota: used memory=300; min cpu=0, memory=1000, ephemeral-storage=0; max memory=2000; the pod requests memory=1800"
    );
}

#[test]
fn placed_pods_are_charged_to_their_namespace_and_taken_back_when_they_leave() {
    let mut objects = objects(&[("ns1", 1000, 2000)], &[("ns1", 300)]);
    let (p1, p2) = (pod("ns1", "t1-p1", 50, 0), pod("ns2", "t1-p2", 50, 0));
    assert!(Quotas.pod_placed(&mut objects, &p1));
    assert!(!Quotas.pod_placed(&mut objects, &p2), "a namespace without a quota is not counted");
    assert_eq!(objects.quotas().used("ns1").memory, 350);
    assert!(Quotas.pod_unplaced(&mut objects, &p1));
    assert_eq!(objects.quotas().used("ns1").memory, 300);
    // A quota created after its namespace's pods starts from their use, once counted.
    objects.quotas_mut().upsert(quota("ns2", 10, 40)).unwrap();
    assert!(Quotas.needs_recount(&objects));
    Quotas.recount(&mut objects, &mut [p2].iter());
    assert_eq!(objects.quotas().used("ns2").memory, 50);
    let snap = snapshot(objects, vec![]);
    let refused = CapacityScheduling.pre_filter(&pod("ns2", "late", 1, 0), &snap);
    assert!(refused.status.message().ends_with(OVER_MAX), "{:?}", refused.status);
}

#[test]
fn a_refused_pod_is_tried_again_when_a_placed_pod_leaves_or_a_quota_changes() {
    let p = Arc::new(pod("ns1", "p", 10, 0));
    let node = Arc::new(crate::node_info::NodeInfo::default());
    let quota_event = |action| ClusterEvent::Object(ObjectEvent::new(ELASTIC_QUOTA, action, "ns1/q"));
    let cases = [
        ("a placed pod deleted", ClusterEvent::PodDeleted(p.clone()), QueueingHint::Queue),
        ("a quota added", quota_event(ObjectAction::Add), QueueingHint::Queue),
        ("a quota changed", quota_event(ObjectAction::Update), QueueingHint::Queue),
        ("a quota deleted", quota_event(ObjectAction::Delete), QueueingHint::Queue),
        ("a pod placed", ClusterEvent::PodAdded(p.clone()), QueueingHint::Skip),
        ("a node added", ClusterEvent::NodeAdded(node), QueueingHint::Skip),
        (
            "another kind of object",
            ClusterEvent::Object(ObjectEvent::new(crate::dra::kinds::RESOURCE_CLAIM, ObjectAction::Delete, "ns1/c")),
            QueueingHint::Skip,
        ),
    ];
    for (name, event, want) in cases {
        assert_eq!(CapacityScheduling.queueing_hint(&p, &event), want, "{name}");
    }
}

#[test]
fn a_quota_read_from_a_dump_governs_its_namespace() {
    let mut objects = ClusterObjects::default();
    let object = serde_json::json!({
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
        "metadata": {"name": "team-a", "namespace": "team-a"},
        "spec": {"min": {"cpu": "2", "nvidia.com/gpu": 4}, "max": {"cpu": "4", "memory": "8Gi"}}
    });
    assert_eq!(Quotas.load(&mut objects, "ElasticQuota", &object), Some(Ok(())));
    assert_eq!(Quotas.load(&mut objects, "Pod", &object), None);
    let q = objects.quotas().quota("team-a").unwrap();
    assert_eq!((q.min.milli_cpu, q.min.get("nvidia.com/gpu"), q.max.memory), (2000, 4, 8 << 30));
    let bad = serde_json::json!({"metadata": {"name": "x", "namespace": "y"}, "spec": {"max": {"cpu": "-1"}}});
    assert!(Quotas.load(&mut objects, "ElasticQuota", &bad).unwrap().is_err());
    assert_eq!(Quotas.counts(&objects), vec![("elastic_quotas", 1)]);
}

#[test]
fn gauges_show_each_quota_of_a_tree_its_runtime_share_and_its_use_in_the_tree() {
    use crate::owners::Owner;
    use crate::quotas::tree::Place;
    let cpu = |m: i64| Resource { milli_cpu: m, ..Default::default() };
    let quota = |name: &str, min: i64, parent: Option<&str>| Quota {
        name: name.into(),
        namespace: name.into(),
        min: cpu(min),
        max: cpu(8000),
        tree: Place {
            parent: parent.map(String::from),
            is_parent: parent.is_none(),
            weight: None,
            lends: true,
            limited: vec!["cpu".into()],
        },
    };
    let mut objects = ClusterObjects::default();
    for q in [quota("dept", 0, None), quota("a", 2000, Some("dept")), quota("b", 2000, Some("dept"))] {
        objects.quotas_mut().upsert(q).unwrap();
    }
    Quotas.recount(&mut objects, &mut std::iter::empty());
    let running = crate::builders::PodBuilder::new("r").namespace("a").req("3", "").info();
    assert!(Quotas.pod_placed(&mut objects, &running));
    let waiting = crate::builders::PodBuilder::new("w").namespace("b").req("4", "").info();
    let samples = Quotas.gauges(&objects, &[&waiting], &cpu(8000));
    let value = |family: &str, quota: &str| {
        samples.iter().find(|s| s.family == family && s.labels.contains(&("quota", quota.to_string()))).map(|s| s.value)
    };
    let used = "scheduler_elastic_quota_tree_used";
    assert_eq!((value(used, "dept/dept"), value(used, "a/a"), value(used, "b/b")), (Some(3.0), Some(3.0), Some(0.0)));
    let runtime = "scheduler_elastic_quota_runtime";
    assert_eq!(
        (value(runtime, "dept/dept"), value(runtime, "a/a"), value(runtime, "b/b")),
        (Some(7.0), Some(3.0), Some(4.0)),
        "each child gets its demand, the parent its children's"
    );
}
