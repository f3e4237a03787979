//! The parts of a cycle on their own, over 5,000 nodes: each plugin's filter and score,
//! the snapshot update after one bind, and the queue with 10,000 pending pods.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use algorithms::builders::{NodeBuilder, PodBuilder, affinity_term, node_term};
use algorithms::config::default_profile;
use algorithms::{NodeInfo, PodInfo, Snapshot};
use criterion::{Criterion, criterion_group, criterion_main};
use scheduler::cache::Cache;
use scheduler::queue::SchedulingQueue;

const NODES: usize = 5000;
const ZONE: &str = "topology.kubernetes.io/zone";
const HOST: &str = "kubernetes.io/hostname";

fn node(i: usize) -> NodeInfo {
    let n = NodeBuilder::new(&format!("node-{i}"))
        .label(ZONE, &format!("zone-{}", i % 3))
        .label(HOST, &format!("node-{i}"))
        .capacity("4", "32Gi", "110")
        .build();
    NodeInfo::from_node(&n).unwrap_or_default()
}

/// Nodes with a few pods each, some of them carrying the labels the incoming pod's
/// affinity, anti-affinity and spread terms look for.
fn cluster() -> Snapshot {
    let infos = (0..NODES)
        .map(|i| {
            let mut info = node(i);
            for j in 0..(i % 4) {
                let app = if j % 2 == 0 { "web" } else { "db" };
                let p = PodBuilder::new(&format!("p-{i}-{j}"))
                    .label("app", app)
                    .req("100m", "500Mi")
                    .node_name(&info.name)
                    .info();
                info.add_pod(Arc::new(p));
            }
            Arc::new(info)
        })
        .collect();
    Snapshot::new(infos, Default::default())
}

/// A pod that no default plugin skips.
fn incoming() -> PodInfo {
    PodBuilder::new("incoming")
        .images(&["registry.example/app:v1"])
        .label("app", "web")
        .req("100m", "500Mi")
        .host_port("", "TCP", 8080)
        .toleration("dedicated", "Exists", "", "NoSchedule")
        .node_selector(ZONE, "zone-1")
        .pod_affinity(affinity_term(&[("app", "db")], ZONE))
        .pod_anti_affinity(affinity_term(&[("app", "web")], HOST))
        .preferred_pod_affinity(10, affinity_term(&[("app", "web")], ZONE))
        .preferred_node_affinity(5, node_term(ZONE, "In", &["zone-1", "zone-2"]))
        .spread(5, ZONE, "ScheduleAnyway", &[("app", "web")])
        .spread(5, HOST, "DoNotSchedule", &[("app", "web")])
        .info()
}

fn plugins(c: &mut Criterion) {
    // As in the scheduling loop: human details only for `explain`.
    algorithms::status::with_details(false, || plugins_without_details(c));
}

fn plugins_without_details(c: &mut Criterion) {
    let profile = default_profile("custom-scheduler");
    let snap = cluster();
    let pod = incoming();
    let all: Vec<usize> = (0..NODES).collect();
    let mut group = c.benchmark_group("plugin_5000_nodes");
    for plugin in &profile.filters {
        group.bench_function(format!("filter/{}", plugin.name()), |b| {
            b.iter(|| {
                let out = plugin.pre_filter(&pod, &snap);
                let passed =
                    snap.nodes.iter().enumerate().filter(|(i, n)| {
                        out.status.is_skip() || plugin.filter_at(&out.state, &pod, n, *i).is_success()
                    });
                black_box(passed.count())
            })
        });
    }
    for ws in &profile.scores {
        let plugin = &ws.plugin;
        group.bench_function(format!("score/{}", plugin.name()), |b| {
            b.iter(|| {
                let Ok(state) = plugin.pre_score(&pod, &snap, &all) else { return 0 };
                let mut scores: Vec<i64> =
                    snap.nodes.iter().enumerate().map(|(i, n)| plugin.score_at(&state, &pod, n, &snap, i)).collect();
                plugin.normalize(&state, &mut scores);
                black_box(scores.iter().sum::<i64>())
            })
        });
    }
    group.finish();
}

fn snapshot_update(c: &mut Criterion) {
    let mut cache = Cache::new();
    for i in 0..NODES {
        cache.upsert_node(node(i));
    }
    let mut snap = Snapshot::default();
    cache.update_snapshot(&mut snap);
    let pod = PodBuilder::new("bound").req("100m", "500Mi").info();
    let mut k = 0usize;
    c.bench_function("snapshot_update_after_one_bind_5000_nodes", |b| {
        b.iter(|| {
            // Assume a pod onto one node, refresh, then take it back out, refresh again.
            k = (k + 7) % NODES;
            let _ = cache.assume(&pod, &format!("node-{k}"));
            black_box(cache.update_snapshot(&mut snap));
            cache.forget(&pod.key());
            black_box(cache.update_snapshot(&mut snap));
        })
    });
}

fn queue(c: &mut Criterion) {
    let now = Instant::now();
    let mut q = SchedulingQueue::default();
    for i in 0..10_000 {
        q.add(Arc::new(PodBuilder::new(&format!("pending-{i}")).priority(i % 5).info()), now);
    }
    let extra: Vec<Arc<PodInfo>> =
        (0..1000).map(|i| Arc::new(PodBuilder::new(&format!("extra-{i}")).priority(i % 5).info())).collect();
    let mut k = 0usize;
    c.bench_function("queue_push_pop_10000_pending", |b| {
        b.iter(|| {
            k = (k + 1) % extra.len();
            q.add(extra[k].clone(), now);
            let popped = q.pop(now).map(|p| p.pod);
            if let Some(p) = &popped {
                q.done(&p.key());
                // Keep 10,000 pending: the popped pod comes back as a new arrival.
                q.add(p.clone(), now);
            }
            black_box(popped.is_some())
        })
    });
}

criterion_group!(benches, plugins, snapshot_update, queue);
criterion_main!(benches);
