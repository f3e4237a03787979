//! One scheduling cycle of one pod over clusters of several sizes, default profile.

use std::sync::Arc;

use algorithms::config::default_profile;
use algorithms::framework::{EvaluateOptions, evaluate};
use algorithms::testing::{NodeBuilder, PodBuilder};
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
    let profile = default_profile("custom-scheduler");
    let pod: PodInfo = PodBuilder::new("incoming").req("100m", "500Mi").info();
    let mut group = c.benchmark_group("scheduling_cycle");
    for nodes in [500usize, 5000, 15000] {
        let snap = cluster(nodes);
        let mut rng = StdRng::seed_from_u64(1);
        group.bench_with_input(BenchmarkId::new("default_profile", nodes), &snap, |b, snap| {
            b.iter(|| evaluate(&profile, &pod, snap, &mut rng, EvaluateOptions::default()))
        });
    }
    group.finish();
}

criterion_group!(benches, one_cycle);
criterion_main!(benches);
