//! One preemption over 5,000 nodes, each full of four low-priority pods: the failed
//! evaluation, then DefaultPreemption's dry runs (500 candidates) and node choice.

use std::hint::black_box;
use std::sync::Arc;

use algorithms::builders::{NodeBuilder, PodBuilder};
use algorithms::config::default_profile;
use algorithms::framework::PostFilterResult;
use algorithms::framework::{EvaluateOptions, evaluate};
use algorithms::preemption::{PreemptionArgs, preempt};
use algorithms::{NodeInfo, PodInfo, Snapshot};
use criterion::{Criterion, criterion_group, criterion_main};
use rand::SeedableRng;
use rand::rngs::SmallRng;

const NODES: usize = 5000;

fn full_cluster() -> Snapshot {
    let infos = (0..NODES)
        .map(|i| {
            let n = NodeBuilder::new(&format!("node-{i}")).capacity("4", "32Gi", "110").build();
            let mut info = NodeInfo::from_node(&n).unwrap_or_default();
            for j in 0..4 {
                let p = PodBuilder::new(&format!("low-{i}-{j}"))
                    .priority(1)
                    .req("900m", "500Mi")
                    .started(1_700_000_000 + (i * 4 + j) as i64)
                    .node_name(&info.name)
                    .info();
                info.add_pod(Arc::new(p));
            }
            Arc::new(info)
        })
        .collect();
    Snapshot::new(infos, Default::default())
}

fn bench(c: &mut Criterion) {
    let profile = default_profile("custom-scheduler");
    let mut snap = full_cluster();
    let pod: PodInfo = PodBuilder::new("high").priority(10).req("3", "500Mi").info();
    let mut rng = SmallRng::seed_from_u64(1);
    let ev = evaluate(&profile, &pod, &snap, &mut rng, EvaluateOptions::default());
    let args = PreemptionArgs::default();
    c.bench_function("preemption/one_pod_5000_full_nodes", |b| {
        b.iter(|| {
            let out = preempt(&profile, &pod, &mut snap, &ev, &[], &args, &mut rng);
            assert!(matches!(out, PostFilterResult::Nominate(_)));
            black_box(out)
        })
    });
    c.bench_function("preemption/evaluate_and_preempt_5000_full_nodes", |b| {
        b.iter(|| {
            let ev = evaluate(&profile, &pod, &snap, &mut rng, EvaluateOptions::default());
            black_box(preempt(&profile, &pod, &mut snap, &ev, &[], &args, &mut rng))
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench
}
criterion_main!(benches);
