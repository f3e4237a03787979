//! The built-in demo cluster: a few hundred nodes over three zones, tainted GPU nodes
//! with `nvidia.com/gpu`, and pending pods that exercise every plugin.

use algorithms::builders::{NodeBuilder, PodBuilder, affinity_term, node_term};
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{GeneratedCluster, namespace};

/// Zones of the demo cluster.
pub const ZONES: &[&str] = &["zone-a", "zone-b", "zone-c"];
/// Scheduler name of the demo's pending pods.
pub const SCHEDULER: &str = "custom-scheduler";
/// The GPU resource.
pub const GPU: &str = "nvidia.com/gpu";

fn created(pod: &mut core::Pod, seq: i64) {
    let t = k8s_openapi::jiff::Timestamp::from_second(1_780_000_000 + seq).unwrap_or_default();
    pod.metadata.creation_timestamp = Some(meta::Time(t));
}

fn pending(name: &str, ns: &str, app: &str) -> PodBuilder {
    PodBuilder::new(name).namespace(ns).label("app", app).scheduler(SCHEDULER).no_containers()
}

fn cpu_node(i: usize, rng: &mut StdRng) -> core::Node {
    let zone = ZONES[i % ZONES.len()];
    let highmem = i.is_multiple_of(5);
    let mut b = NodeBuilder::new(&format!("cpu-{i:03}"))
        .label("topology.kubernetes.io/zone", zone)
        .label("node.kubernetes.io/pool", if highmem { "highmem" } else { "general" })
        .capacity("16", if highmem { "128Gi" } else { "64Gi" }, "110")
        .image(&["registry.example/web:1.4"], 180 << 20);
    if rng.random_bool(0.4) {
        b = b.label("disktype", "ssd");
    }
    if i % 60 == 7 {
        b = b.unschedulable(true);
    }
    if i % 45 == 11 {
        b = b.taint("maintenance", "soon", "PreferNoSchedule");
    }
    b.build()
}

fn gpu_node(i: usize) -> core::Node {
    NodeBuilder::new(&format!("gpu-{i:02}"))
        .label("topology.kubernetes.io/zone", ZONES[i % ZONES.len()])
        .label("node.kubernetes.io/pool", "gpu")
        .label("accelerator", if i.is_multiple_of(3) { "h200" } else { "h100" })
        .capacity("64", "512Gi", "110")
        .resource(GPU, "8")
        .taint(GPU, "present", "NoSchedule")
        .build()
}

/// Builds the demo cluster deterministically from `seed`.
pub fn demo_cluster(seed: u64) -> GeneratedCluster {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut c = GeneratedCluster {
        namespaces: vec![
            namespace("default", &[]),
            namespace("shop", &[("team", "shop")]),
            namespace("ml", &[("team", "ml")]),
            namespace("batch", &[("team", "data")]),
        ],
        ..Default::default()
    };
    c.nodes.extend((0..288).map(|i| cpu_node(i, &mut rng)));
    c.nodes.extend((0..24).map(gpu_node));

    // Existing load: a system pod on every CPU node and some busy nodes.
    for (i, n) in c.nodes.iter().enumerate() {
        let name = n.metadata.name.clone().unwrap_or_default();
        let cpu = if i % 4 == 0 { "6" } else { "1" };
        let mut p = PodBuilder::new(&format!("agent-{name}"))
            .namespace("default")
            .label("app", "agent")
            .req(cpu, "2Gi")
            .node_name(&name)
            .build();
        created(&mut p, i as i64);
        c.pods.push(p);
    }

    let mut seq = 10_000i64;
    let mut push = |c: &mut GeneratedCluster, b: PodBuilder| {
        let mut p = b.build();
        seq += 1;
        created(&mut p, seq);
        c.pods.push(p);
    };
    let zone = "topology.kubernetes.io/zone";
    let host = "kubernetes.io/hostname";
    for i in 0..360 {
        push(
            &mut c,
            pending(&format!("web-{i}"), "shop", "web")
                .images(&["registry.example/web:1.4"])
                .req("500m", "1Gi")
                .spread(1, zone, "DoNotSchedule", &[("app", "web")])
                .spread(2, host, "ScheduleAnyway", &[("app", "web")]),
        );
    }
    for i in 0..60 {
        push(
            &mut c,
            pending(&format!("cache-{i}"), "shop", "cache")
                .container("2", "8Gi")
                .priority(1000)
                .pod_anti_affinity(affinity_term(&[("app", "cache")], host))
                .node_selector("node.kubernetes.io/pool", "highmem"),
        );
    }
    for i in 0..240 {
        push(
            &mut c,
            pending(&format!("api-{i}"), "shop", "api")
                .container("250m", "512Mi")
                .preferred_pod_affinity(50, affinity_term(&[("app", "web")], zone))
                .preferred_pod_anti_affinity(20, affinity_term(&[("app", "api")], host)),
        );
    }
    for i in 0..420 {
        let cpu = ["100m", "500m", "1", "2"][rng.random_range(0..4)];
        push(
            &mut c,
            pending(&format!("etl-{i}"), "batch", "etl")
                .container(cpu, "1Gi")
                .priority(-10)
                .required_node_affinity(vec![node_term("node.kubernetes.io/pool", "In", &["general", "highmem"])])
                .preferred_node_affinity(10, node_term("disktype", "In", &["ssd"])),
        );
    }
    for i in 0..60 {
        let gpus = ["1", "1", "2", "4", "8"][rng.random_range(0..5)];
        push(
            &mut c,
            pending(&format!("train-{i}"), "ml", "train")
                .container("8", "64Gi")
                .req_list(&[(GPU, gpus)])
                .priority(500)
                .toleration(GPU, "Exists", "", "NoSchedule"),
        );
    }
    for i in 0..40 {
        push(
            &mut c,
            pending(&format!("ingress-{i}"), "default", "ingress")
                .container("100m", "128Mi")
                .host_port("", "TCP", 8443),
        );
    }
    // Pods that fit nowhere, each for a different reason.
    push(
        &mut c,
        pending("huge-train", "ml", "train")
            .container("8", "64Gi")
            .req_list(&[(GPU, "16")])
            .toleration(GPU, "Exists", "", ""),
    );
    push(&mut c, pending("gpu-no-toleration", "ml", "train").container("1", "1Gi").req_list(&[(GPU, "1")]));
    push(
        &mut c,
        pending("arm-only", "default", "arm").container("1", "1Gi").node_selector("kubernetes.io/arch", "arm64"),
    );
    push(&mut c, pending("monster", "batch", "etl").container("200", "1Ti"));
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demo_is_deterministic_and_sized() {
        let a = demo_cluster(1);
        let b = demo_cluster(1);
        assert_eq!(a.nodes.len(), 312);
        assert_eq!(a.pods.len(), b.pods.len());
        assert_eq!(a.pods[400].metadata.name, b.pods[400].metadata.name);
        let pending = a.pods.iter().filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_none()).count();
        assert_eq!(pending, 360 + 60 + 240 + 420 + 60 + 40 + 4);
    }
}
