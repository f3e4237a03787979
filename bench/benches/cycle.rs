//! One scheduling cycle of one pod over clusters of several sizes, default profile.
//!
//! `engine_path` is what `run` and `simulate` do for each pod: the equivalence cache is
//! warm and one node changed since the last pod (the bind before). `plain` evaluates
//! every plugin on every node, as the extender and `explain` do.

use std::sync::Arc;

use algorithms::builders::{NodeBuilder, PodBuilder};
use algorithms::config::default_profile;
use algorithms::framework::{EquivalenceCache, EvaluateOptions, evaluate, evaluate_cached};
use algorithms::{NodeInfo, PodInfo, Snapshot};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use rand::SeedableRng;
use rand::rngs::StdRng;

fn cluster(nodes: usize) -> Snapshot {
    let infos = (0..nodes)
        .map(|i| {
            let n = NodeBuilder::new(&format!("node-{i}"))
                .label("topology.kubernetes.io/zone", &format!("zone-{}", i % 3))
                .capacity("4", "32Gi", "110")
                .build();
            let mut info = NodeInfo::from_node(&n).unwrap_or_default();
            for j in 0..(i % 10) {
                let p = PodBuilder::new(&format!("p-{i}-{j}")).req("100m", "500Mi").node_name(&info.name).info();
                info.add_pod(Arc::new(p));
            }
            Arc::new(info)
        })
        .collect();
    Snapshot::new(infos, Default::default())
}

fn one_cycle(c: &mut Criterion) {
    // The profile builds no human details, as in the scheduling loop (only `explain` does).
    let profile = default_profile("custom-scheduler");
    let pod: PodInfo = PodBuilder::new("incoming").req("100m", "500Mi").info();
    let mut group = c.benchmark_group("scheduling_cycle");
    for nodes in [500usize, 5000, 15000] {
        let mut snap = cluster(nodes);
        let mut rng = StdRng::seed_from_u64(1);
        group.bench_with_input(BenchmarkId::new("plain", nodes), &snap, |b, snap| {
            b.iter(|| evaluate(&profile, &pod, snap, &mut rng, EvaluateOptions::default()))
        });
        let mut cache = EquivalenceCache::new();
        let mut k = 0usize;
        group.bench_function(BenchmarkId::new("engine_path", nodes), |b| {
            b.iter(|| {
                // The bind before this pod changed one node.
                k = (k + 7) % nodes;
                let mut changed = (*snap.nodes[k]).clone();
                changed.generation = algorithms::node_info::next_generation();
                snap.replace_node(k, Arc::new(changed));
                evaluate_cached(&profile, &pod, &snap, &mut rng, EvaluateOptions::default(), &mut cache)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, one_cycle);
criterion_main!(benches);
