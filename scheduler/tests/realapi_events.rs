//! The event pipeline against a real kube-apiserver v1.36.2: series written as
//! `events.k8s.io/v1` patches the server accepts, and a write made while the server is
//! down retried until it lands.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod realapi;

use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::ObjectMeta;
use realapi::plane;
use scheduler::run::events::{KubeSink, Options, Recorder, Stats};
use testing::api;

fn event(pod: &str, rv: &str) -> Event {
    let now = k8s_openapi::jiff::Timestamp::now();
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{pod}.{:x}", now.as_nanosecond())),
            namespace: Some("default".into()),
            ..Default::default()
        },
        event_time: Some(MicroTime(now)),
        type_: Some("Warning".into()),
        reason: Some("FailedScheduling".into()),
        action: Some("Scheduling".into()),
        note: Some("0/3 nodes are available: 3 Insufficient cpu.".into()),
        regarding: Some(ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            namespace: Some("default".into()),
            name: Some(pod.into()),
            uid: Some(format!("uid-{pod}")),
            resource_version: Some(rv.into()),
            ..Default::default()
        }),
        reporting_controller: Some("custom-scheduler".into()),
        reporting_instance: Some("custom-scheduler-test".into()),
        ..Default::default()
    }
}

fn about<'a>(events: &'a [Event], pod: &str) -> Vec<&'a Event> {
    events.iter().filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(pod)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeats_become_a_series_and_a_write_made_while_the_server_is_down_lands_after_it() {
    let Some(mut p) = plane("repeats_become_a_series_and_a_write_made_while_the_server_is_down_lands_after_it").await
    else {
        return;
    };
    let stats = Stats::default();
    let options = Options { max_delay: Duration::from_secs(2), ..Options::default() };
    let recorder = Recorder::start(KubeSink::new(p.client.clone()), options.clone(), stats.clone());
    // The same failure three times at one resource version, then at a new one.
    for _ in 0..3 {
        recorder.record(event("pending", "10"));
    }
    recorder.record(event("pending", "11"));
    recorder.close(Duration::from_secs(20)).await;
    let events = api::events(&p.client, "default").await.unwrap();
    let mine = about(&events, "pending");
    assert_eq!(mine.len(), 2, "{mine:?}");
    let series: Vec<_> = mine.iter().filter_map(|e| e.series.as_ref().map(|s| s.count)).collect();
    // The third repeat only counts until the series ends (six minutes later).
    assert_eq!(series, [2], "{mine:?}");
    assert_eq!(stats.written.get(), 3);

    // The server goes away; an event recorded meanwhile is written once it is back.
    p.plane.kill_apiserver();
    let recorder = Recorder::start(KubeSink::new(p.client.clone()), options, stats.clone());
    recorder.record(event("during-outage", "1"));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(stats.retried.get() > 0, "no write was retried while the server was down");
    p.plane.start_apiserver().await.unwrap();
    recorder.close(Duration::from_secs(60)).await;
    let client = p.plane.client().await.unwrap();
    let events = api::events(&client, "default").await.unwrap();
    assert_eq!(about(&events, "during-outage").len(), 1);
    println!("written {}, retried {}", stats.written.get(), stats.retried.get());
}
