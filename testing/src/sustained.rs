//! A sustained stream on a real kube-apiserver: pods created at a fixed rate, each deleted
//! a short life after it was bound, while the scheduler under test's CPU time and
//! resident memory are sampled. Without kubelets a bound pod stays Pending, which is all a
//! scheduler sees of it anyway.

use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::watcher::{self, Event};
use tokio::sync::Semaphore;

use crate::HarnessError;

/// The stream's shape.
#[derive(Debug, Clone)]
pub struct Stream {
    /// Namespace of the pods.
    pub namespace: String,
    /// The scheduler the pods name.
    pub scheduler: String,
    /// Pods created per second.
    pub rate: u32,
    /// How long pods are created.
    pub duration: Duration,
    /// A bound pod is deleted after a life drawn evenly from this range, in seconds.
    pub life: (u64, u64),
    /// Latencies of pods created in the first `warmup` are left out.
    pub warmup: Duration,
    /// How often CPU and memory are sampled.
    pub sample: Duration,
}

/// One sample of the scheduler process.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// Seconds since the stream started.
    pub at: f64,
    /// Resident memory in MiB.
    pub rss_mib: f64,
    /// CPU seconds since the process started.
    pub cpu: f64,
    /// Pods bound so far.
    pub bound: usize,
}

/// What a stream measured.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Pods created.
    pub created: usize,
    /// Pods seen bound.
    pub bound: usize,
    /// Pods created but never seen bound (by the end of the drain).
    pub unbound: usize,
    /// Create → bind latencies in seconds, of pods created after the warm-up, sorted.
    pub latencies: Vec<f64>,
    /// Samples, in order.
    pub samples: Vec<Sample>,
    /// Seconds the stream ran (creation only).
    pub seconds: f64,
}

/// The pod `j` of the stream: 100m CPU and 200Mi; every fifth pins a zone.
pub fn pod(j: usize, namespace: &str, scheduler: &str) -> Pod {
    let requests: BTreeMap<String, Quantity> =
        [("cpu".to_string(), Quantity("100m".into())), ("memory".to_string(), Quantity("200Mi".into()))].into();
    let node_selector =
        j.is_multiple_of(5).then(|| [(crate::backlog::ZONE.to_string(), format!("zone-{}", j % 3))].into());
    Pod {
        metadata: ObjectMeta {
            name: Some(format!("s-{j:07}")),
            namespace: Some(namespace.into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            scheduler_name: Some(scheduler.into()),
            containers: vec![Container {
                name: "app".into(),
                image: Some("app:1".into()),
                resources: Some(ResourceRequirements { requests: Some(requests), ..Default::default() }),
                ..Default::default()
            }],
            node_selector,
            ..Default::default()
        }),
        status: None,
    }
}

/// Resident memory (MiB) and CPU seconds of a live process.
pub fn usage(pid: u32) -> Option<(f64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: f64 = status.lines().find(|l| l.starts_with("VmRSS:"))?.split_whitespace().nth(1)?.parse().ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some((kib / 1024.0, ticks as f64 / 100.0))
}

#[derive(Default)]
struct Book {
    created: HashMap<String, Instant>,
    bound: HashMap<String, Instant>,
}

type Shared = Arc<Mutex<Book>>;

fn lock(b: &Shared) -> std::sync::MutexGuard<'_, Book> {
    b.lock().unwrap_or_else(|e| e.into_inner())
}

/// The life of pod `name`, evenly spread over `life` by a hash of the name.
fn life_of(name: &str, (lo, hi): (u64, u64)) -> Duration {
    let h = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    Duration::from_secs(lo + h % (hi.saturating_sub(lo) + 1))
}

/// Runs the stream against the scheduler process `pid` and returns what it measured.
pub async fn run(client: &kube::Client, pid: u32, stream: &Stream) -> Result<Outcome, HarnessError> {
    let api: Api<Pod> = Api::namespaced(client.clone(), &stream.namespace);
    let book: Shared = Arc::default();
    // Deletions due, earliest first.
    let due: Arc<Mutex<BinaryHeap<std::cmp::Reverse<(Instant, String)>>>> = Arc::default();
    let (synced_tx, synced_rx) = tokio::sync::oneshot::channel();
    let watch = {
        let (api, book, due, life) = (api.clone(), book.clone(), due.clone(), stream.life);
        tokio::spawn(async move {
            let mut synced = Some(synced_tx);
            let mut events = std::pin::pin!(watcher::watcher(api, watcher::Config::default()));
            while let Some(ev) = events.next().await {
                match ev {
                    Ok(Event::Apply(p) | Event::InitApply(p))
                        if p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some() =>
                    {
                        let name = p.metadata.name.unwrap_or_default();
                        let now = Instant::now();
                        // The first sight only: a deletion brings the pod again.
                        let first = {
                            let mut b = lock(&book);
                            let first = !b.bound.contains_key(&name);
                            b.bound.entry(name.clone()).or_insert(now);
                            first
                        };
                        // Pods bound before the stream stay.
                        if first && name.starts_with("s-") {
                            let at = now + life_of(&name, life);
                            due.lock().unwrap_or_else(|e| e.into_inner()).push(std::cmp::Reverse((at, name)));
                        }
                    }
                    Ok(Event::InitDone) => {
                        if let Some(tx) = synced.take() {
                            let _ = tx.send(());
                        }
                    }
                    _ => {}
                }
            }
        })
    };
    synced_rx.await.map_err(|_| HarnessError::Client("the pod watch ended before its first list".into()))?;

    let deleter = {
        let (api, due) = (api.clone(), due.clone());
        tokio::spawn(async move {
            let slots = Arc::new(Semaphore::new(256));
            loop {
                let now = Instant::now();
                let ready: Vec<String> = {
                    let mut d = due.lock().unwrap_or_else(|e| e.into_inner());
                    let mut out = Vec::new();
                    while d.peek().is_some_and(|r| r.0.0 <= now) {
                        out.extend(d.pop().map(|r| r.0.1));
                    }
                    out
                };
                for name in ready {
                    let Ok(permit) = slots.clone().acquire_owned().await else { return };
                    let api = api.clone();
                    tokio::spawn(async move {
                        let dp = DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
                        let _ = api.delete(&name, &dp).await;
                        drop(permit);
                    });
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };

    let started = Instant::now();
    let mut outcome = Outcome::default();
    let slots = Arc::new(Semaphore::new(512));
    let tick = Duration::from_millis(20);
    let per_tick = f64::from(stream.rate) * tick.as_secs_f64();
    let mut next_sample = started;
    let mut j = 0usize;
    let mut interval = tokio::time::interval(tick);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    while started.elapsed() < stream.duration {
        interval.tick().await;
        // Pods owed by now, so that a slow tick is made up by the next.
        let owed = (started.elapsed().as_secs_f64() / tick.as_secs_f64() * per_tick) as usize;
        while j < owed {
            let Ok(permit) = slots.clone().acquire_owned().await else { break };
            let p = pod(j, &stream.namespace, &stream.scheduler);
            let (api, book) = (api.clone(), book.clone());
            tokio::spawn(async move {
                let name = p.metadata.name.clone().unwrap_or_default();
                let sent = Instant::now();
                if api.create(&PostParams::default(), &p).await.is_ok() {
                    lock(&book).created.insert(name, sent);
                }
                drop(permit);
            });
            j += 1;
        }
        if Instant::now() >= next_sample {
            if let Some((rss_mib, cpu)) = usage(pid) {
                let bound = lock(&book).bound.len();
                outcome.samples.push(Sample { at: started.elapsed().as_secs_f64(), rss_mib, cpu, bound });
            }
            next_sample += stream.sample;
        }
    }
    outcome.seconds = started.elapsed().as_secs_f64();
    // The last creations return, then the last pods are bound.
    let _ = slots.acquire_many(512).await;
    let drain = Instant::now();
    while drain.elapsed() < Duration::from_secs(30) {
        let all_bound = {
            let b = lock(&book);
            b.created.keys().all(|k| b.bound.contains_key(k))
        };
        if all_bound {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if let Some((rss_mib, cpu)) = usage(pid) {
        let bound = lock(&book).bound.len();
        outcome.samples.push(Sample { at: started.elapsed().as_secs_f64(), rss_mib, cpu, bound });
    }
    deleter.abort();
    watch.abort();
    let b = lock(&book);
    outcome.created = b.created.len();
    outcome.bound = b.created.keys().filter(|k| b.bound.contains_key(*k)).count();
    outcome.unbound = outcome.created - outcome.bound;
    let after = started + stream.warmup;
    outcome.latencies = b
        .created
        .iter()
        .filter(|(_, sent)| **sent >= after)
        .filter_map(|(k, sent)| Some(b.bound.get(k)?.duration_since(*sent).as_secs_f64()))
        .collect();
    outcome.latencies.sort_by(f64::total_cmp);
    Ok(outcome)
}

/// The `q` quantile of sorted values.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lives_fall_in_the_range_and_quantiles_pick_from_sorted_values() {
        for j in 0..1000 {
            let l = life_of(&format!("s-{j:07}"), (5, 30)).as_secs();
            assert!((5..=30).contains(&l));
        }
        let v = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!((quantile(&v, 0.5), quantile(&v, 0.99), quantile(&v, 0.0)), (3.0, 5.0, 1.0));
        assert!(quantile(&[], 0.5).is_nan());
    }
}
