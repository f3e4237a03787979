//! Every scheduler_perf-style workload runs at a small size, and reusing node-local
//! results across identical pods changes no placement (correctness only; no timing).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use algorithms::PodInfo;
use algorithms::config::default_profile;
use bench::workloads::{WORKLOADS, workload};
use scheduler::cluster::{ClusterObjects, parse_cluster};
use scheduler::simulate::{SimulateOptions, SimulationReport, run_phased};

fn simulate(name: &str, seed: u64, no_cache: bool) -> SimulationReport {
    let w = workload(name, Some(120), Some(300)).unwrap();
    let objects = ClusterObjects {
        nodes: w.cluster.nodes,
        pods: w.measured_pods,
        namespaces: w.cluster.namespaces,
        workloads: Default::default(),
    };
    let parsed = parse_cluster(&objects, name).unwrap();
    let init: Vec<PodInfo> = w.init_pods.iter().map(|p| PodInfo::from_pod(p).unwrap()).collect();
    let opts = SimulateOptions { seed, progress: false, no_equivalence_cache: no_cache };
    run_phased(vec![default_profile("custom-scheduler")], parsed, init, &opts)
}

#[test]
fn every_workload_places_the_same_pods_with_and_without_the_cache() {
    for (name, ..) in WORKLOADS {
        for seed in [1, 7] {
            let cached = simulate(name, seed, false);
            let plain = simulate(name, seed, true);
            assert_eq!(cached.scheduled + cached.unschedulable, 300, "{name}");
            assert_eq!(cached.placements, plain.placements, "{name} seed {seed}: placements differ");
            assert_eq!(cached.failures, plain.failures, "{name} seed {seed}: failures differ");
        }
    }
}

#[test]
fn workloads_schedule_what_fits() {
    let basic = simulate("SchedulingBasic", 1, false);
    assert_eq!(basic.scheduled, 300);
    let unsched = simulate("Unschedulable", 1, false);
    assert_eq!(unsched.scheduled, 300, "the measured pods fit; only the initial ones do not");
    let anti = simulate("SchedulingPodAntiAffinity", 1, false);
    // Each anti-affine pod needs a node of its own: 120 nodes, some taken by initial pods.
    assert!(anti.scheduled <= 120 && anti.unschedulable > 0);
    let gpu = simulate("SchedulingGpu", 1, false);
    assert!(gpu.scheduled > 0);
    for msg in gpu.failures.values() {
        assert!(msg.starts_with("0/120 nodes are available: "), "{msg}");
    }
}

/// One pod's outcome, in comparable form.
type Outcome = (Vec<usize>, Vec<i64>, Option<usize>, Vec<(usize, algorithms::Status)>, Option<String>);

fn outcome(ev: &algorithms::Evaluation) -> Outcome {
    let rejected = ev.rejected.iter().map(|(i, s)| (i, s.clone())).collect();
    (ev.feasible.clone(), ev.totals.clone(), ev.selected, rejected, ev.failure_message())
}

/// The engine's path (long-lived plugins with their per-node fact caches, plus the
/// equivalence cache) against the plain algorithm (fresh plugins for every pod, every
/// plugin on every node): the same verdicts, scores and choice for every pod of every
/// workload while the cluster fills up and now and then loses a pod.
#[test]
fn the_engine_path_decides_every_pod_as_fresh_plugins_do() {
    use algorithms::framework::{EquivalenceCache, EvaluateOptions, evaluate, evaluate_cached};
    use algorithms::status::set_details_enabled;
    use rand::SeedableRng;
    use rand::rngs::StdRng;
    use std::sync::Arc;

    set_details_enabled(false);
    for (name, ..) in WORKLOADS {
        let w = workload(name, Some(60), Some(150)).unwrap();
        let objects = ClusterObjects {
            nodes: w.cluster.nodes,
            pods: Vec::new(),
            namespaces: w.cluster.namespaces,
            workloads: Default::default(),
        };
        let mut snap = parse_cluster(&objects, name).unwrap().snapshot();
        let long_lived = default_profile("custom-scheduler");
        let mut cache = EquivalenceCache::new();
        let mut placed: Vec<(usize, String, String)> = Vec::new();
        let pods = w.init_pods.iter().chain(&w.measured_pods);
        for (k, pod) in pods.enumerate() {
            let pod = PodInfo::from_pod(pod).unwrap();
            let opts = EvaluateOptions::default();
            let mut rng_a = StdRng::seed_from_u64(k as u64);
            let mut rng_b = StdRng::seed_from_u64(k as u64);
            let a = evaluate_cached(&long_lived, &pod, &snap, &mut rng_a, opts, &mut cache);
            let b = evaluate(&default_profile("custom-scheduler"), &pod, &snap, &mut rng_b, opts);
            assert_eq!(outcome(&a), outcome(&b), "{name}: pod {k} ({})", pod.name);
            if let Some(i) = a.selected {
                let mut node = (*snap.nodes[i]).clone();
                let mut bound = pod.clone();
                bound.node_name = Some(node.name.clone());
                node.add_pod(Arc::new(bound));
                node.generation = algorithms::node_info::next_generation();
                snap.replace_node(i, Arc::new(node));
                snap.set_pod_flags(i);
                placed.push((i, pod.namespace.clone(), pod.name.clone()));
            }
            // Now and then a pod placed a little earlier goes away again.
            if k % 7 == 6 && placed.len() > 3 {
                let (i, namespace, gone) = placed.remove(placed.len() - 3);
                let mut node = (*snap.nodes[i]).clone();
                assert!(node.remove_pod(&namespace, &gone).is_some());
                node.generation = algorithms::node_info::next_generation();
                snap.replace_node(i, Arc::new(node));
                snap.set_pod_flags(i);
            }
        }
    }
}
