use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;

use super::*;

fn event(pod: &str, rv: &str, reason: &str) -> Event {
    Event {
        metadata: kube::api::ObjectMeta {
            name: Some(format!("{pod}.{rv}")),
            namespace: Some("default".into()),
            ..Default::default()
        },
        action: Some("Scheduling".into()),
        reason: Some(reason.into()),
        reporting_controller: Some("custom-scheduler".into()),
        regarding: Some(ObjectReference {
            kind: Some("Pod".into()),
            namespace: Some("default".into()),
            name: Some(pod.into()),
            uid: Some(format!("uid-{pod}")),
            resource_version: Some(rv.into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn kinds(out: &[Write]) -> Vec<(&'static str, Option<i32>)> {
    out.iter()
        .map(|w| match w {
            Write::Create(e) => ("create", e.series.as_ref().map(|s| s.count)),
            Write::Series(e) => ("series", e.series.as_ref().map(|s| s.count)),
        })
        .collect()
}

#[test]
fn repeats_of_one_event_become_a_series_written_at_two_and_when_it_ends() {
    let mut c = Correlator::new(16);
    let t0 = Instant::now();
    let mut out = Vec::new();
    assert_eq!(c.observe(event("p", "7", "FailedScheduling"), t0, &mut out), Observed::Written);
    assert_eq!(c.observe(event("p", "7", "FailedScheduling"), t0, &mut out), Observed::Written);
    for _ in 0..3 {
        assert_eq!(c.observe(event("p", "7", "FailedScheduling"), t0, &mut out), Observed::Counted);
    }
    assert_eq!(kinds(&out), [("create", None), ("series", Some(2))]);
    // The series patch names the event first created.
    assert_eq!(out[1].event().metadata.name.as_deref(), Some("p.7"));

    out.clear();
    c.tick(t0 + FINISH_AFTER - Duration::from_secs(1), &mut out);
    assert!(out.is_empty());
    c.tick(t0 + FINISH_AFTER, &mut out);
    assert_eq!(kinds(&out), [("series", Some(5))]);
    assert!(c.is_empty(), "a finished series leaves the cache");
}

#[test]
fn a_new_resource_version_or_reason_is_a_new_event() {
    let mut c = Correlator::new(16);
    let t0 = Instant::now();
    let mut out = Vec::new();
    c.observe(event("p", "7", "FailedScheduling"), t0, &mut out);
    c.observe(event("p", "8", "FailedScheduling"), t0, &mut out);
    c.observe(event("p", "8", "Scheduled"), t0, &mut out);
    assert_eq!(kinds(&out), [("create", None), ("create", None), ("create", None)]);
    assert_eq!(c.len(), 3);
}

#[test]
fn the_cache_stays_at_its_size_and_an_evicted_series_writes_its_last_count() {
    let mut c = Correlator::new(100);
    let t0 = Instant::now();
    let mut out = Vec::new();
    // A series with unwritten counts, then 10,000 distinct events push it out.
    for _ in 0..4 {
        c.observe(event("old", "1", "FailedScheduling"), t0, &mut out);
    }
    out.clear();
    for i in 0..10_000 {
        c.observe(event(&format!("p{i}"), "1", "Scheduled"), t0, &mut out);
        assert!(c.len() <= 100);
    }
    assert_eq!(c.len(), 100);
    let series: Vec<_> = out.iter().filter(|w| matches!(w, Write::Series(_))).collect();
    assert_eq!(series.len(), 1, "the evicted series' last count is written once");
    assert_eq!(series[0].event().series.as_ref().map(|s| s.count), Some(4));
    assert_eq!(out.len(), 10_001);
}

#[test]
fn single_events_leave_after_six_minutes_and_series_are_refreshed_every_half_hour() {
    let mut c = Correlator::new(16);
    let t0 = Instant::now();
    let mut out = Vec::new();
    c.observe(event("single", "1", "Scheduled"), t0, &mut out);
    c.observe(event("s", "1", "FailedScheduling"), t0, &mut out);
    c.observe(event("s", "1", "FailedScheduling"), t0, &mut out);
    out.clear();
    // The series keeps repeating every minute for 31 minutes.
    for m in 1..=31u64 {
        let now = t0 + Duration::from_secs(60 * m);
        c.observe(event("s", "1", "FailedScheduling"), now, &mut out);
        c.tick(now, &mut out);
    }
    assert_eq!(c.len(), 1, "the single event left, the running series stayed");
    assert_eq!(kinds(&out), [("series", Some(32))], "one refresh after thirty minutes");
}

#[test]
fn an_object_gets_a_burst_of_writes_per_reason_then_one_per_five_minutes() {
    let mut c = Correlator::new(1000);
    let t0 = Instant::now();
    let mut out = Vec::new();
    let mut results = Vec::new();
    for rv in 0..30 {
        results.push(c.observe(event("noisy", &rv.to_string(), "FailedScheduling"), t0, &mut out));
    }
    assert_eq!(results.iter().filter(|r| **r == Observed::Written).count(), 25);
    assert_eq!(results[25..], [Observed::Limited; 5]);
    // Another reason of the same pod has its own budget.
    assert_eq!(c.observe(event("noisy", "99", "Scheduled"), t0, &mut out), Observed::Written);
    let later = t0 + SPAM_REFILL;
    assert_eq!(c.observe(event("noisy", "100", "FailedScheduling"), later, &mut out), Observed::Written);
    assert_eq!(c.observe(event("noisy", "101", "FailedScheduling"), later, &mut out), Observed::Limited);
}
