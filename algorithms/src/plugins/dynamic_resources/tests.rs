//! DynamicResources cases after kube-scheduler's plugin table: pod `default/my-pod`
//! with claim `my-resource` (claim `my-pod-my-resource`), class `my-resource-class`,
//! driver `some-driver`, node `worker` whose slice has device `instance-1`.

use crate::dra::DraObjects;
use std::sync::Arc;

use rand::SeedableRng;
use serde_json::{Value, json};

use super::*;
use crate::builders::{NodeBuilder, PodBuilder, snapshot};
use crate::dra::{self, DeviceId, DraWrite};
use crate::events::ObjectEvent;
use crate::framework::{
    ApiWrite, Evaluation, PostFilterPlugin, PostFilterResult, PreBindPlugin, Profile, ReservePlugin,
};
use crate::status::Code;

const CLAIM: &str = "my-pod-my-resource";

fn class() -> Value {
    json!({"metadata": {"name": "my-resource-class"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == \"some-driver\""}}]}})
}

fn worker_slice(node: &str, attributes: Value) -> Value {
    json!({"metadata": {"name": node}, "spec": {"driver": "some-driver", "nodeName": node,
        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "instance-1", "attributes": attributes}]}})
}

fn pending(request: Value) -> Value {
    json!({"metadata": {"name": CLAIM, "namespace": "default", "uid": "claim-uid", "resourceVersion": "5",
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "my-pod", "uid": "1234", "controller": true}]},
        "spec": {"devices": {"requests": [request]}}})
}

fn req() -> Value {
    json!({"name": "req-1", "exactly": {"deviceClassName": "my-resource-class"}})
}

fn allocated(claim: Value, selector: Value) -> Value {
    let mut c = claim;
    c["metadata"]["finalizers"] = json!([dra::FINALIZER]);
    c["status"] = json!({"allocation": {"devices": {"results": [
        {"request": "req-1", "driver": "some-driver", "pool": "worker", "device": "instance-1"}]},
        "nodeSelector": selector}});
    c
}

fn on_worker() -> Value {
    json!({"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["worker"]}]}]})
}

fn pod() -> PodBuilder {
    let mut b = PodBuilder::new("my-pod");
    b = b.claim_template("my-resource", "template", Some(CLAIM));
    b
}

fn pod_info(b: PodBuilder) -> PodInfo {
    let mut p = b.build();
    p.metadata.uid = Some("1234".into());
    PodInfo::from_pod(&p).expect("pod")
}

struct World {
    classes: Vec<Value>,
    slices: Vec<Value>,
    claims: Vec<Value>,
    nodes: Vec<&'static str>,
}

impl Default for World {
    fn default() -> Self {
        World { classes: vec![class()], slices: Vec::new(), claims: Vec::new(), nodes: vec!["worker"] }
    }
}

fn build(w: World) -> Snapshot {
    let nodes: Vec<_> = w.nodes.iter().map(|n| NodeBuilder::new(n).build()).collect();
    let mut snap = snapshot(&nodes, &[]);
    let mut objects = ClusterObjects::default();
    for c in w.classes {
        objects
            .dra_mut()
            .upsert_class(dra::DeviceClass::from_api(&serde_json::from_value(c).expect("class")).expect("parse"));
    }
    for s in w.slices {
        objects
            .dra_mut()
            .upsert_slice(dra::Slice::from_api(&serde_json::from_value(s).expect("slice")).expect("parse"));
    }
    for c in w.claims {
        objects
            .dra_mut()
            .upsert_claim(dra::Claim::from_api(&serde_json::from_value(c).expect("claim")).expect("parse"));
    }
    snap.objects = Arc::new(objects);
    snap
}

/// PreFilter then Filter on every node: each node's status (PreFilter's for all when it rejects).
fn filter(plugin: &DynamicResources, pod: &PodInfo, snap: &Snapshot) -> Vec<Status> {
    let pre = plugin.pre_filter(pod, snap);
    match pre.status.code {
        Code::Skip => snap.nodes.iter().map(|_| Status::skip()).collect(),
        Code::Success => snap.nodes.iter().map(|n| plugin.filter(&pre.state, pod, n)).collect(),
        _ => snap.nodes.iter().map(|_| pre.status.clone()).collect(),
    }
}

fn messages(statuses: &[Status]) -> Vec<String> {
    statuses.iter().map(|s| if s.is_success() { "ok".into() } else { s.message() }).collect()
}

fn post_filter(plugin: &DynamicResources, pod: &PodInfo, snap: &mut Snapshot, rejection: Option<Status>) -> String {
    let mut ev = Evaluation { prefilter_rejection: rejection, ..Default::default() };
    if ev.prefilter_rejection.is_none() {
        // What Filter said of each node, as the evaluation records it.
        for (i, mut st) in filter(plugin, pod, snap).into_iter().enumerate() {
            if !st.is_success() && !st.is_skip() {
                st.plugin = NAME;
                ev.rejected.push(i, st);
            }
        }
    }
    let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
    match plugin.post_filter(&Profile::default(), pod, snap, &ev, &mut rng) {
        PostFilterResult::Unschedulable { message, .. } => message,
        PostFilterResult::Stopped(m) => format!("stopped: {m}"),
        PostFilterResult::Nominate(_) => "nominated".into(),
        PostFilterResult::Released { message, writes, .. } => format!("{message} ({} writes)", writes.len()),
    }
}

#[test]
fn a_pod_without_claims_is_skipped() {
    let plugin = DynamicResources::default();
    let p = pod_info(PodBuilder::new("my-pod"));
    let mut snap = build(World::default());
    assert!(plugin.pre_filter(&p, &snap).status.is_skip());
    assert_eq!(post_filter(&plugin, &p, &mut snap, None), NO_CLAIMS);
    let mut objects = (*snap.objects).clone();
    assert!(plugin.reserve(&mut objects, &p, &snap.nodes[0]).expect("reserve").is_none());
}

#[test]
fn claims_that_are_missing_deleted_or_foreign_reject_the_pod() {
    let plugin = DynamicResources::default();
    let snap = build(World::default());
    let not_created = pod_info(PodBuilder::new("my-pod").claim_template("my-resource", "template", None));
    assert_eq!(
        messages(&filter(&plugin, &not_created, &snap)),
        vec!["pod \"default/my-pod\": ResourceClaim not created yet"]
    );
    assert_eq!(
        messages(&filter(&plugin, &pod_info(pod()), &snap)),
        vec![format!("could not find ResourceClaim \"default/{CLAIM}\"")]
    );
    let mut deleted = allocated(pending(req()), on_worker());
    deleted["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    let snap = build(World { claims: vec![deleted], ..Default::default() });
    let st = filter(&plugin, &pod_info(pod()), &snap);
    assert_eq!(messages(&st), vec![format!("resourceclaim \"{CLAIM}\" is being deleted")]);
    assert_eq!(st[0].code, Code::UnschedulableAndUnresolvable);
    let mut foreign = allocated(pending(req()), on_worker());
    foreign["metadata"]["ownerReferences"][0]["uid"] = json!("other");
    let snap = build(World { claims: vec![foreign], ..Default::default() });
    assert_eq!(
        messages(&filter(&plugin, &pod_info(pod()), &snap)),
        vec![format!("ResourceClaim default/{CLAIM} was not created for Pod default/my-pod (Pod is not owner)")]
    );
}

#[test]
fn a_missing_class_rejects_in_prefilter_and_post_filter_has_nothing_to_deallocate() {
    let plugin = DynamicResources::default();
    let mut snap = build(World { classes: Vec::new(), claims: vec![pending(req())], ..Default::default() });
    let p = pod_info(pod());
    let pre = plugin.pre_filter(&p, &snap);
    assert_eq!(pre.status.message(), "request req-1: device class my-resource-class does not exist");
    let mut rejection = pre.status.clone();
    rejection.plugin = NAME;
    assert_eq!(post_filter(&plugin, &p, &mut snap, Some(rejection)), NO_CLAIMS);
    let mut other = Status::unresolvable("x");
    other.plugin = "NodeAffinity";
    assert_eq!(post_filter(&plugin, &p, &mut snap, Some(other)), "stopped: not found");
}

#[test]
fn a_pending_claim_is_allocated_reserved_and_written() {
    let plugin = DynamicResources::default();
    let world = || World {
        slices: vec![worker_slice("worker", json!({}))],
        claims: vec![pending(req())],
        ..Default::default()
    };
    let snap = build(world());
    let p = pod_info(pod());
    assert_eq!(messages(&filter(&plugin, &p, &snap)), vec!["ok"]);
    let mut objects = (*snap.objects).clone();
    let reserved = plugin.reserve(&mut objects, &p, &snap.nodes[0]).expect("reserve").expect("something reserved");
    let id = DeviceId::new("some-driver", "worker", "instance-1");
    assert_eq!(objects.dra().holders(&id), 1, "the device is taken for the next pod");
    let writes = plugin.pre_bind(&reserved, "worker");
    let writes = dra_writes(&writes);
    let [DraWrite::Claim(w)] = writes.as_slice() else { panic!("one claim write: {writes:?}") };
    assert!(w.add_finalizer && w.allocated);
    let status = w.claim.api.status.clone().expect("status");
    let results = status.allocation.as_ref().and_then(|a| a.devices.as_ref()).and_then(|d| d.results.clone());
    let r = &results.expect("results")[0];
    assert_eq!(
        (r.request.as_str(), r.driver.as_str(), r.pool.as_str(), r.device.as_str()),
        ("req-1", "some-driver", "worker", "instance-1")
    );
    assert_eq!(
        status.allocation.and_then(|a| a.node_selector),
        Some(serde_json::from_value(on_worker()).expect("sel"))
    );
    let consumers = status.reserved_for.expect("reservedFor");
    assert_eq!(
        (consumers[0].resource.as_str(), consumers[0].name.as_str(), consumers[0].uid.as_str()),
        ("pods", "my-pod", "1234")
    );
    assert_eq!(w.claim.api.metadata.finalizers, Some(vec![dra::FINALIZER.to_string()]));
    assert_eq!(
        w.claim.api.metadata.resource_version.as_deref(),
        Some("5"),
        "written over the version it was assumed on"
    );
    // Another pod asking for the same kind of device now finds none on the node.
    let mut second = pending(req());
    second["metadata"]["name"] = json!("other-claim");
    second["metadata"]["ownerReferences"][0]["name"] = json!("other");
    objects.dra_mut().upsert_claim(dra::Claim::from_api(&serde_json::from_value(second).expect("c")).expect("p"));
    let mut snap2 = snap.clone();
    snap2.objects = Arc::new(objects.clone());
    let other = PodInfo::from_pod(&{
        let mut o = PodBuilder::new("other").claim_template("my-resource", "t", Some("other-claim")).build();
        o.metadata.uid = Some("1234".into());
        o
    })
    .expect("pod");
    assert_eq!(messages(&filter(&plugin, &other, &snap2)), vec![CANNOT_ALLOCATE]);
    // Unreserve frees the device again.
    plugin.unreserve(&mut objects, "default/my-pod", &reserved);
    assert_eq!(objects.dra().holders(&id), 0);
}

#[test]
fn exhausted_devices_leave_the_pod_unschedulable() {
    let plugin = DynamicResources::default();
    let mut taken = allocated(pending(req()), on_worker());
    taken["metadata"]["name"] = json!("not-my-claim");
    let mut snap = build(World {
        slices: vec![worker_slice("worker", json!({}))],
        claims: vec![pending(req()), taken],
        ..Default::default()
    });
    let p = pod_info(pod());
    let st = filter(&plugin, &p, &snap);
    assert_eq!(messages(&st), vec![CANNOT_ALLOCATE]);
    assert_eq!(st[0].code, Code::UnschedulableAndUnresolvable);
    assert_eq!(post_filter(&plugin, &p, &mut snap, None), STILL_NOT_SCHEDULABLE);
    let none = build(World { claims: vec![pending(req())], ..Default::default() });
    assert_eq!(messages(&filter(&plugin, &p, &none)), vec![CANNOT_ALLOCATE]);
}

#[test]
fn admin_access_ignores_devices_in_use() {
    let plugin = DynamicResources::default();
    let admin = json!({"name": "req-1", "exactly": {"deviceClassName": "my-resource-class", "adminAccess": true}});
    let mut taken = allocated(pending(req()), on_worker());
    taken["metadata"]["name"] = json!("not-my-claim");
    let snap = build(World {
        slices: vec![worker_slice("worker", json!({}))],
        claims: vec![pending(admin), taken],
        ..Default::default()
    });
    let p = pod_info(pod());
    assert_eq!(messages(&filter(&plugin, &p, &snap)), vec!["ok"]);
    let off = DynamicResources {
        features: dra::Features { admin_access: false, ..Default::default() },
        ..Default::default()
    };
    let st = filter(&off, &p, &snap);
    assert_eq!(st[0].code, Code::Error);
    assert_eq!(
        st[0].message(),
        format!("claim default/{CLAIM}, request req-1: admin access is requested, but the feature is disabled")
    );
}

#[test]
fn selector_runtime_errors_are_errors() {
    let plugin = DynamicResources::default();
    let broken = json!({"name": "req-1", "exactly": {"deviceClassName": "my-resource-class",
        "selectors": [{"cel": {"expression": "device.attributes[\"some-driver\"].healthy"}}]}});
    let snap = build(World {
        slices: vec![worker_slice("worker", json!({}))],
        claims: vec![pending(broken)],
        ..Default::default()
    });
    let st = filter(&plugin, &pod_info(pod()), &snap);
    assert_eq!(st[0].code, Code::Error);
    assert_eq!(st[0].message(), format!("claim default/{CLAIM}: selector #0: CEL runtime error: no such key: healthy"));
    let mut class = class();
    class["spec"]["selectors"] = json!([{"cel": {"expression": "device.attributes[\"some-driver\"].healthy"}}]);
    let snap = build(World {
        classes: vec![class],
        slices: vec![worker_slice("worker", json!({}))],
        claims: vec![pending(req())],
        ..Default::default()
    });
    let st = filter(&plugin, &pod_info(pod()), &snap);
    assert_eq!(st[0].message(), "class my-resource-class: selector #0: CEL runtime error: no such key: healthy");
}

#[test]
fn an_allocated_claim_keeps_the_pod_on_its_nodes() {
    let plugin = DynamicResources::default();
    let elsewhere = json!({"nodeSelectorTerms": [{"matchExpressions": [{"key": "no-such-label", "operator": "In", "values": ["no-such-value"]}]}]});
    let snap = build(World {
        claims: vec![allocated(pending(req()), elsewhere)],
        nodes: vec!["worker", "worker-2"],
        ..Default::default()
    });
    assert_eq!(messages(&filter(&plugin, &pod_info(pod()), &snap)), vec![NOT_AVAILABLE, NOT_AVAILABLE]);
    let snap = build(World {
        claims: vec![allocated(pending(req()), on_worker())],
        nodes: vec!["worker", "worker-2"],
        ..Default::default()
    });
    let p = pod_info(pod());
    assert_eq!(messages(&filter(&plugin, &p, &snap)), vec!["ok".to_string(), NOT_AVAILABLE.into()]);
    // Reserve adds the pod as a consumer; PreBind writes only that.
    let mut objects = (*snap.objects).clone();
    let reserved = plugin.reserve(&mut objects, &p, &snap.nodes[0]).expect("reserve").expect("reserved");
    let writes = plugin.pre_bind(&reserved, "worker");
    let writes = dra_writes(&writes);
    let [DraWrite::Claim(w)] = writes.as_slice() else { panic!("{writes:?}") };
    assert!(!w.allocated && !w.add_finalizer);
    assert_eq!(w.claim.reserved_for.len(), 1);
    // A claim already reserved for the pod needs nothing.
    let mut in_use = allocated(pending(req()), on_worker());
    in_use["status"]["reservedFor"] = json!([{"resource": "pods", "name": "my-pod", "uid": "1234"}]);
    let snap = build(World { claims: vec![in_use], ..Default::default() });
    let mut objects = (*snap.objects).clone();
    assert!(plugin.reserve(&mut objects, &p, &snap.nodes[0]).expect("reserve").is_none());
}

#[test]
fn prioritized_lists_score_the_first_choice_highest() {
    let plugin = DynamicResources::default();
    let request = json!({"name": "req-1", "firstAvailable": [
        {"name": "subreq-1", "deviceClassName": "my-resource-class",
            "selectors": [{"cel": {"expression": "device.attributes[\"some-driver\"].healthy"}}]},
        {"name": "subreq-2", "deviceClassName": "my-resource-class"}]});
    let snap = build(World {
        slices: vec![
            worker_slice("worker", json!({"healthy": {"bool": true}})),
            worker_slice("worker-2", json!({"healthy": {"bool": false}})),
        ],
        claims: vec![pending(request)],
        nodes: vec!["worker", "worker-2"],
        ..Default::default()
    });
    let p = pod_info(pod());
    assert_eq!(messages(&filter(&plugin, &p, &snap)), vec!["ok", "ok"]);
    let state = plugin.pre_score(&p, &snap, &[0, 1]).expect("scored");
    let mut scores: Vec<i64> = snap.nodes.iter().map(|n| plugin.score(&state, &p, n, &snap)).collect();
    assert_eq!(scores, vec![8, 7]);
    plugin.normalize(&state, &mut scores);
    assert_eq!(scores, vec![100, 87]);
    let plain = build(World {
        slices: vec![worker_slice("worker", json!({}))],
        claims: vec![pending(req())],
        ..Default::default()
    });
    assert!(plugin.pre_score(&p, &plain, &[0]).is_err(), "nothing to rank without firstAvailable");
}

#[test]
fn claim_and_device_events_requeue_only_pods_they_may_help() {
    let plugin = DynamicResources::default();
    let p = pod_info(pod());
    let ev = |kind, action, key: &str| ClusterEvent::Object(ObjectEvent { kind, action, key: key.into() });
    let hint = |e| plugin.queueing_hint(&p, &e);
    assert_eq!(
        hint(ev(crate::dra::kinds::RESOURCE_CLAIM, ObjectAction::Add, &format!("default/{CLAIM}"))),
        QueueingHint::Queue
    );
    assert_eq!(hint(ev(crate::dra::kinds::RESOURCE_CLAIM, ObjectAction::Add, "default/unrelated")), QueueingHint::Skip);
    assert_eq!(
        hint(ev(crate::dra::kinds::RESOURCE_CLAIM, ObjectAction::Update, "default/unrelated")),
        QueueingHint::Queue
    );
    assert_eq!(hint(ev(crate::dra::kinds::RESOURCE_SLICE, ObjectAction::Add, "worker")), QueueingHint::Queue);
    assert_eq!(
        hint(ev(crate::dra::kinds::DEVICE_CLASS, ObjectAction::Update, "my-resource-class")),
        QueueingHint::Queue
    );
    assert_eq!(hint(ev(crate::volumes::kinds::CLAIM, ObjectAction::Update, "default/pvc")), QueueingHint::Skip);
}

#[test]
fn args_read_go_durations() {
    let a: DynamicResourcesArgs =
        serde_json::from_value(json!({"filterTimeout": "1m30s", "bindingTimeout": "500ms"})).expect("args");
    assert_eq!(a.filter_timeout, Duration::from_secs(90));
    assert_eq!(a.binding_timeout, Duration::from_millis(500));
    assert_eq!(
        serde_json::from_value::<DynamicResourcesArgs>(json!({})).expect("defaults"),
        DynamicResourcesArgs::default()
    );
    assert!(serde_json::from_value::<DynamicResourcesArgs>(json!({"filterTimeout": "ten"})).is_err());
}

#[test]
fn a_search_that_runs_out_of_time_reports_the_timeout() {
    // 64 devices with distinct NUMA nodes and a claim wanting two on the same one: the
    // search tries every pair before it gives up.
    let devices: Vec<Value> =
        (0..64).map(|i| json!({"name": format!("d-{i}"), "attributes": {"numa": {"int": i}}})).collect();
    let slice = json!({"metadata": {"name": "worker"}, "spec": {"driver": "some-driver", "nodeName": "worker",
        "pool": {"name": "worker", "generation": 1, "resourceSliceCount": 1}, "devices": devices}});
    let mut claim = pending(json!({"name": "req-1", "exactly": {"deviceClassName": "my-resource-class", "count": 2}}));
    claim["spec"]["devices"]["constraints"] = json!([{"matchAttribute": "some-driver/numa"}]);
    let snap = build(World { slices: vec![slice], claims: vec![claim], ..Default::default() });
    let p = pod_info(pod());
    let hurried = DynamicResources {
        args: DynamicResourcesArgs { filter_timeout: Duration::from_nanos(1), ..Default::default() },
        ..Default::default()
    };
    let st = filter(&hurried, &p, &snap);
    assert_eq!((st[0].code, st[0].message()), (Code::Error, format!("node worker: {TIMED_OUT}")));
    let unlimited = DynamicResources {
        args: DynamicResourcesArgs { filter_timeout: Duration::ZERO, ..Default::default() },
        ..Default::default()
    };
    assert_eq!(messages(&filter(&unlimited, &p, &snap)), vec![CANNOT_ALLOCATE]);
}

/// A claim allocated where the pod cannot go: PostFilter deallocates it when no other
/// pod uses it (the pod itself may), and leaves it alone when another pod does.
#[test]
fn post_filter_deallocates_a_claim_allocated_where_the_pod_cannot_go() {
    let plugin = DynamicResources::default();
    let elsewhere = json!({"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gone"]}]}]});
    let mut wrong = allocated(pending(req()), elsewhere);
    wrong["status"]["devices"] = json!([{"driver": "some-driver", "pool": "gone", "device": "instance-1"}]);
    let p = pod_info(pod());
    let mut snap = build(World { claims: vec![wrong.clone()], ..Default::default() });
    assert_eq!(messages(&filter(&plugin, &p, &snap)), vec![NOT_AVAILABLE]);
    let mut ev = Evaluation::default();
    // Rejected by another plugin only: DynamicResources' Filter never looked, nothing to do.
    ev.rejected.push(0, Status::unresolvable("node(s) had untolerated taint(s)"));
    let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
    let out = plugin.post_filter(&Profile::default(), &p, &mut snap, &ev, &mut rng);
    assert!(matches!(&out, PostFilterResult::Unschedulable { message, .. } if message == STILL_NOT_SCHEDULABLE));
    let mut ev = Evaluation::default();
    let mut st = filter(&plugin, &p, &snap).remove(0);
    st.plugin = NAME;
    ev.rejected.push(0, st);
    let PostFilterResult::Released { message, clear: false, writes } =
        plugin.post_filter(&Profile::default(), &p, &mut snap, &ev, &mut rng)
    else {
        panic!("expected a deallocation")
    };
    assert_eq!(message, DEALLOCATED);
    let writes = dra_writes(&writes);
    let [DraWrite::Claim(w)] = writes.as_slice() else { panic!("{writes:?}") };
    assert!(!w.allocated && !w.add_finalizer);
    assert!(w.claim.allocation().is_none() && w.claim.reserved_for.is_empty());
    let status = w.claim.api.status.clone().unwrap_or_default();
    assert!(status.allocation.is_none() && status.reserved_for.is_none() && status.devices.is_none());
    assert_eq!(w.claim.resource_version, "5", "written over the version it was read at");
    // Reserved for this pod only: still deallocated.
    let mut own = wrong.clone();
    own["status"]["reservedFor"] = json!([{"resource": "pods", "name": "my-pod", "uid": "1234"}]);
    let mut snap = build(World { claims: vec![own], ..Default::default() });
    assert_eq!(post_filter(&plugin, &p, &mut snap, None), format!("{DEALLOCATED} (1 writes)"));
    // Another pod uses it: left alone.
    let mut shared = wrong;
    shared["status"]["reservedFor"] = json!([{"resource": "pods", "name": "other", "uid": "5678"}]);
    let mut snap = build(World { claims: vec![shared], ..Default::default() });
    assert_eq!(post_filter(&plugin, &p, &mut snap, None), STILL_NOT_SCHEDULABLE);
    // Allocated where the pod can go: nothing to deallocate.
    let mut snap = build(World { claims: vec![allocated(pending(req()), on_worker())], ..Default::default() });
    assert_eq!(post_filter(&plugin, &p, &mut snap, None), STILL_NOT_SCHEDULABLE);
}

mod extended;
mod table;

/// The DRA writes among `writes`.
pub(super) fn dra_writes(writes: &[ApiWrite]) -> Vec<DraWrite> {
    writes.iter().filter_map(|w| w.get::<DraWrite>().cloned()).collect()
}
