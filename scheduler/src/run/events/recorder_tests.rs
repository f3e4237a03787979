use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;

use super::*;
use crate::run::foreground::Foreground;

/// A sink that records every call and fails the first `failures` of them as told.
#[derive(Clone, Default)]
struct Fake {
    calls: Arc<Mutex<Vec<(String, String, Option<i32>)>>>,
    failures: Arc<Mutex<Vec<SinkError>>>,
    existing: Arc<Mutex<Vec<String>>>,
    stall: bool,
}

impl Fake {
    fn call(&self, verb: &str, e: &Event) -> Result<(), SinkError> {
        let name = e.metadata.name.clone().unwrap_or_default();
        self.calls.lock().unwrap().push((verb.into(), name.clone(), e.series.as_ref().map(|s| s.count)));
        let mut failures = self.failures.lock().unwrap();
        if !failures.is_empty() {
            return Err(failures.remove(0));
        }
        let mut existing = self.existing.lock().unwrap();
        match verb {
            "create" if existing.contains(&name) => Err(SinkError::AlreadyExists),
            "create" => {
                existing.push(name);
                Ok(())
            }
            _ if existing.contains(&name) => Ok(()),
            _ => Err(SinkError::NotFound),
        }
    }

    fn calls(&self) -> Vec<(String, String, Option<i32>)> {
        self.calls.lock().unwrap().clone()
    }
}

impl EventSink for Fake {
    async fn create(&self, event: &Event) -> Result<(), SinkError> {
        if self.stall {
            std::future::pending::<()>().await;
        }
        self.call("create", event)
    }

    async fn patch_series(&self, event: &Event) -> Result<(), SinkError> {
        self.call("patch", event)
    }
}

fn event(pod: &str, rv: &str) -> Event {
    Event {
        metadata: kube::api::ObjectMeta {
            name: Some(format!("{pod}.{rv}")),
            namespace: Some("default".into()),
            ..Default::default()
        },
        reason: Some("FailedScheduling".into()),
        regarding: Some(ObjectReference {
            name: Some(pod.into()),
            resource_version: Some(rv.into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn quick() -> Options {
    Options { first_delay: Duration::from_millis(1), max_delay: Duration::from_millis(4), ..Options::default() }
}

fn dropped(stats: &Stats, reason: &str) -> u64 {
    stats.dropped.get_or_create(&ReasonLabels { reason: reason.into() }).get()
}

#[tokio::test]
async fn a_write_that_fails_while_the_server_is_unreachable_is_retried_until_written() {
    let sink = Fake::default();
    sink.failures.lock().unwrap().extend([
        SinkError::Transient("connection refused".into()),
        SinkError::Transient("503 Service Unavailable".into()),
    ]);
    let stats = Stats::default();
    let recorder = Recorder::start(sink.clone(), quick(), stats.clone());
    recorder.record(event("p", "1"));
    recorder.close(Duration::from_secs(10)).await;
    let calls = sink.calls();
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert!(calls.iter().all(|c| c.0 == "create" && c.1 == "p.1"));
    assert_eq!((stats.written.get(), stats.retried.get()), (1, 2));
    assert_eq!(dropped(&stats, "write_failed"), 0);
}

#[tokio::test]
async fn retries_are_bounded_and_a_rejected_event_is_not_retried() {
    let sink = Fake::default();
    sink.failures.lock().unwrap().extend(
        std::iter::repeat_n(SinkError::Transient("down".into()), 3)
            .chain([SinkError::Rejected("namespace is being terminated (403)".into())]),
    );
    let stats = Stats::default();
    let options = Options { tries: 3, writers: 1, ..quick() };
    let recorder = Recorder::start(sink.clone(), options, stats.clone());
    recorder.record(event("a", "1"));
    recorder.record(event("b", "1"));
    recorder.close(Duration::from_secs(10)).await;
    // Three attempts for the first write, one for the rejected one.
    assert_eq!(sink.calls().len(), 4, "{:?}", sink.calls());
    assert_eq!(dropped(&stats, "write_failed"), 2);
    assert_eq!(stats.written.get(), 0);
}

#[tokio::test]
async fn a_repeat_patches_the_series_and_a_series_whose_event_is_gone_is_created() {
    let sink = Fake::default();
    // q's first create is refused, so its series finds no event to patch.
    sink.failures.lock().unwrap().extend([SinkError::Rejected("quota exceeded (403)".into())]);
    // One writer: writes land in the order they were asked for.
    let recorder = Recorder::start(sink.clone(), Options { writers: 1, ..quick() }, Stats::default());
    for e in [event("q", "1"), event("q", "1"), event("p", "1"), event("p", "1"), event("p", "1")] {
        recorder.record(e);
    }
    recorder.close(Duration::from_secs(10)).await;
    let calls: Vec<_> = sink.calls().into_iter().map(|(v, n, c)| format!("{v} {n} {c:?}")).collect();
    assert_eq!(
        calls,
        ["create q.1 None", "patch q.1 Some(2)", "create q.1 Some(2)", "create p.1 None", "patch p.1 Some(2)"],
        "the third p is only counted until its series ends"
    );
}

#[tokio::test]
async fn a_full_queue_drops_and_counts_instead_of_waiting() {
    let sink = Fake { stall: true, ..Fake::default() };
    let stats = Stats::default();
    let options = Options { queue: 2, writers: 1, ..quick() };
    let recorder = Recorder::start(sink, options, stats.clone());
    // On this single-threaded runtime nothing runs the pipeline until the test yields.
    for i in 0..10 {
        recorder.record(event(&format!("p{i}"), "1"));
    }
    assert_eq!(dropped(&stats, "queue_full"), 8);
    recorder.close(Duration::from_millis(50)).await;
}

#[tokio::test(start_paused = true)]
async fn writes_yield_while_a_binding_cycle_waits_then_follow() {
    let sink = Fake::default();
    let foreground = Foreground::default();
    let busy = foreground.waiting();
    let options = Options { yield_to: Some(foreground.clone()), ..quick() };
    let recorder = Recorder::start(sink.clone(), options, Stats::default());
    recorder.record(event("p", "1"));
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(sink.calls().is_empty(), "written while a binding cycle waited for a slot");
    drop(busy);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(sink.calls().len(), 1);
    recorder.close(Duration::from_secs(1)).await;
}

#[tokio::test(start_paused = true)]
async fn a_write_yields_no_longer_than_its_limit() {
    let sink = Fake::default();
    let foreground = Foreground::default();
    let _busy = foreground.waiting();
    let options = Options { yield_to: Some(foreground.clone()), max_defer: Duration::from_secs(10), ..quick() };
    let recorder = Recorder::start(sink.clone(), options, Stats::default());
    recorder.record(event("p", "1"));
    tokio::time::sleep(Duration::from_secs(9)).await;
    assert!(sink.calls().is_empty());
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(sink.calls().len(), 1, "written once it had waited its limit, though cycles still wait");
    recorder.close(Duration::from_secs(1)).await;
}

#[tokio::test(start_paused = true)]
async fn writes_wait_in_the_backlog_for_a_writer_and_only_a_full_backlog_drops() {
    let sink = Fake { stall: true, ..Fake::default() };
    let stats = Stats::default();
    let options = Options { queue: 2, writers: 1, backlog: 5, ..quick() };
    let recorder = Recorder::start(sink, options, stats.clone());
    for i in 0..10 {
        recorder.record(event(&format!("p{i}"), "1"));
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // One write stalls on the only writer, five wait for it, four do not fit.
    assert_eq!(dropped(&stats, "queue_full"), 0);
    assert_eq!(dropped(&stats, "backlog_full"), 4);
    recorder.close(Duration::from_millis(50)).await;
}
