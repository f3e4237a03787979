//! PreEnqueue: a pod DynamicResources keeps out (its claim is not made yet) is parked
//! untried, and comes back when the claim and the pod's claim status arrive.

use std::sync::Arc;
use std::time::Instant;

use algorithms::PodInfo;
use algorithms::builders::PodBuilder;
use algorithms::dra::Claim;
use algorithms::dra::DraObjects;
use algorithms::events::{ClusterEvent, ObjectAction, ObjectEvent};
use k8s_openapi::api::resource::v1::ResourceClaim;
use serde_json::json;

use super::*;

fn pod(generated: Option<&str>) -> Arc<PodInfo> {
    let b = PodBuilder::new("p").scheduler("custom-scheduler").claim_template("gpu", "one-gpu", generated);
    let mut p = b.build();
    p.metadata.uid = Some("pod-uid".into());
    Arc::new(PodInfo::from_pod(&p).unwrap())
}

fn claim() -> Claim {
    let c: ResourceClaim = serde_json::from_value(json!({
        "metadata": {"name": "p-gpu", "namespace": "default", "uid": "c1", "resourceVersion": "1",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "pod-uid", "controller": true}]},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}))
    .unwrap();
    Claim::from_api(&c).unwrap()
}

#[test]
fn a_pod_whose_claim_is_not_made_yet_waits_untried_until_it_is() {
    let mut engine = Engine::new(vec![algorithms::config::default_profile("custom-scheduler")]);
    let mut cycler = Cycler::new(&engine, 1);
    let t0 = Instant::now();
    engine.enqueue(pod(None), t0);
    // Popped, kept out by DynamicResources: no cycle, no attempt, counted as gated.
    assert!(cycler.begin(&mut engine, t0).is_none());
    let lengths = engine.queue.lengths();
    assert_eq!((lengths.active, lengths.backoff, lengths.unschedulable, lengths.gated), (0, 0, 0, 1));
    assert!(engine.queue.unschedulable_by_plugin().is_empty(), "a gated pod is not counted as unschedulable");
    // The claim appears before the pod's status names it: still kept out.
    engine.cache.objects_mut().dra_mut().upsert_claim(claim());
    let added = ObjectEvent {
        kind: algorithms::dra::kinds::RESOURCE_CLAIM,
        action: ObjectAction::Add,
        key: "default/p-gpu".into(),
    };
    assert_eq!(engine.on_event(ClusterEvent::Object(added), t0), 0, "not the pod's claim yet");
    // The resourceclaim controller reports the claim in the pod's status: tried at once,
    // as a first attempt.
    engine.enqueue(pod(Some("p-gpu")), t0);
    let Some(Ok(attempt)) = cycler.begin(&mut engine, t0) else { panic!("the pod is tried") };
    assert_eq!(attempt.queued.attempts, 1);
    assert_eq!(engine.queue.lengths().gated, 0);
}

#[test]
fn a_pod_whose_status_names_a_claim_not_seen_yet_comes_back_when_the_claim_does() {
    let mut engine = Engine::new(vec![algorithms::config::default_profile("custom-scheduler")]);
    let mut cycler = Cycler::new(&engine, 1);
    let t0 = Instant::now();
    engine.enqueue(pod(Some("p-gpu")), t0);
    assert!(cycler.begin(&mut engine, t0).is_none(), "could not find the claim");
    assert_eq!(engine.queue.lengths().gated, 1);
    engine.cache.objects_mut().dra_mut().upsert_claim(claim());
    let added = ObjectEvent {
        kind: algorithms::dra::kinds::RESOURCE_CLAIM,
        action: ObjectAction::Add,
        key: "default/p-gpu".into(),
    };
    assert_eq!(engine.on_event(ClusterEvent::Object(added), t0), 1);
    let Some(Ok(attempt)) = cycler.begin(&mut engine, t0) else { panic!("the pod is tried") };
    assert_eq!(attempt.queued.attempts, 1);
}
