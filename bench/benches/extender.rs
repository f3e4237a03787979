//! Extender filter and prioritize for one pod over 5,000 nodes sent as a full NodeList.

use algorithms::builders::{NodeBuilder, PodBuilder};
use algorithms::config::default_profile;
use criterion::{Criterion, criterion_group, criterion_main};
use extender::Extender;
use extender::handlers::{filter, prioritize};
use extender::types::{ExtenderArgs, NodeList};

fn args(nodes: usize) -> ExtenderArgs {
    let items = (0..nodes)
        .map(|i| {
            NodeBuilder::new(&format!("node-{i}"))
                .capacity("4", "32Gi", "110")
                .label("topology.kubernetes.io/zone", &format!("zone{}", i % 3))
                .build()
        })
        .collect();
    ExtenderArgs {
        pod: Some(PodBuilder::new("p").req("100m", "500Mi").build()),
        nodes: Some(NodeList { metadata: serde_json::json!({}), items }),
        node_names: None,
    }
}

fn verbs(c: &mut Criterion) {
    let ext = Extender::new(default_profile("custom-scheduler"), None, Vec::new());
    let a = args(5000);
    let body = serde_json::to_vec(&a).unwrap_or_default();
    let mut group = c.benchmark_group("extender_5000_nodes");
    group.sample_size(20);
    group.bench_function("filter_with_json", |b| {
        b.iter(|| {
            let parsed: ExtenderArgs = serde_json::from_slice(&body).unwrap_or_else(|_| args(0));
            let r = filter(&ext, parsed);
            serde_json::to_vec(&r.ok()).unwrap_or_default()
        })
    });
    group.bench_function("prioritize_with_json", |b| {
        b.iter(|| {
            let parsed: ExtenderArgs = serde_json::from_slice(&body).unwrap_or_else(|_| args(0));
            let r = prioritize(&ext, parsed);
            serde_json::to_vec(&r.ok()).unwrap_or_default()
        })
    });
    group.finish();
}

criterion_group!(benches, verbs);
criterion_main!(benches);
