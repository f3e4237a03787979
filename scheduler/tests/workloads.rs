//! Every scheduler_perf-style workload runs at a small size, and reusing node-local
//! results across identical pods changes no placement (correctness only; no timing).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use algorithms::PodInfo;
use algorithms::config::default_profile;
use scheduler::cluster::{ClusterObjects, parse_cluster};
use scheduler::simulate::{SimulateOptions, SimulationReport, run_phased};
use scheduler::synthetic::workloads::{WORKLOADS, workload};

/// A workload at 120 nodes and 300 measured pods: the parsed cluster (measured pods
/// pending) and the initial pods.
fn prepared(name: &str) -> (scheduler::cluster::ParsedCluster, Vec<PodInfo>) {
    parsed_sized(name, 120, 300)
}

fn simulate(name: &str, seed: u64, no_cache: bool) -> SimulationReport {
    simulate_with(name, seed, no_cache, vec![default_profile("custom-scheduler")])
}

fn simulate_with(name: &str, seed: u64, no_cache: bool, profiles: Vec<algorithms::Profile>) -> SimulationReport {
    let (parsed, init) = prepared(name);
    let opts = SimulateOptions { seed, progress: false, no_equivalence_cache: no_cache, detail: false };
    run_phased(profiles, parsed, init, &opts)
}

/// SchedulingGpuPacking at 120 nodes: 12 nodes of 8 GPUs, 75 one-GPU pods (pods 0-149,
/// every other one), then 150 eight-GPU pods (pods 150-299). Spread, the small pods leave
/// no GPU node whole; packed (the gpu profile) into ten nodes, they leave two.
#[test]
fn the_gpu_profile_keeps_whole_gpu_nodes_for_whole_node_pods() {
    let whole_node_pods = |r: &SimulationReport| {
        r.placements
            .keys()
            .filter(|k| k.strip_prefix("sched-perf/pod-").unwrap().parse::<usize>().unwrap() >= 150)
            .count()
    };
    let small_pods = |r: &SimulationReport| r.scheduled - whole_node_pods(r);
    let text = std::fs::read_to_string("../deploy/examples/gpu-profile.yaml").unwrap();
    let gpu = scheduler::config_file::parse(&text, "gpu-profile.yaml").unwrap().build_profiles().unwrap();
    for seed in [1, 7] {
        let spread = simulate("SchedulingGpuPacking", seed, false);
        let packed = simulate_with("SchedulingGpuPacking", seed, false, gpu.clone());
        assert_eq!((small_pods(&spread), small_pods(&packed)), (150, 150), "seed {seed}");
        assert_eq!(whole_node_pods(&spread), 0, "seed {seed}");
        assert_eq!(whole_node_pods(&packed), 2, "seed {seed}");
    }
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

/// SchedulingChurn with every churn step due before the first cycle, so the outcome is
/// deterministic: 40 steps update 40 nodes, delete the initial pods and add 40 pods.
fn churned(no_cache: bool) -> SimulationReport {
    use scheduler::simulate::{Churn, ChurnStep, Stream, run_streamed};
    use scheduler::synthetic::workloads::churn_step;
    let (parsed, init) = prepared("SchedulingChurn");
    let init_count = init.len();
    let churn = Churn {
        per_second: 1e12,
        step: Box::new(move |k| {
            (k < 40).then(|| {
                let step = churn_step(120, init_count, k);
                ChurnStep {
                    node: Some(algorithms::NodeInfo::from_node(&step.node).unwrap()),
                    leaving: step.leaving,
                    arriving: Some(PodInfo::from_pod(&step.arriving).unwrap()),
                }
            })
        }),
    };
    let opts = SimulateOptions { seed: 3, progress: false, no_equivalence_cache: no_cache, detail: false };
    run_streamed(vec![default_profile("custom-scheduler")], parsed, init, &opts, Stream::Churn(churn))
}

#[test]
fn churn_adds_pods_and_changes_no_placement_of_the_cache() {
    let cached = churned(false);
    assert_eq!(cached.churn_steps, 40);
    assert_eq!(cached.scheduled, 340, "300 measured pods and 40 that arrived");
    assert!(cached.placements.contains_key("sched-perf/churn-39"));
    let plain = churned(true);
    assert_eq!(cached.placements, plain.placements);
}

/// The full steady-state DRA cluster (120 nodes of 10 devices, all but 10 allocated to
/// claims without pods): as a backlog only 10 of the 300 pods get a device; as a steady
/// stream each bound pod is deleted with its claim, so all 300 take turns on those 10.
#[test]
fn a_steady_stream_reuses_the_devices_its_deleted_pods_free() {
    use scheduler::simulate::{Stream, run_streamed};
    use scheduler::synthetic::workloads::steady_in_flight;
    let name = "SteadyStateClusterResourceClaimTemplate/full";
    assert_eq!(steady_in_flight(name), Some(10));
    let opts = SimulateOptions { seed: 1, progress: false, no_equivalence_cache: false, detail: false };
    let run = |stream| {
        let (parsed, init) = prepared(name);
        run_streamed(vec![default_profile("custom-scheduler")], parsed, init, &opts, stream)
    };
    let backlog = run(Stream::Backlog);
    assert_eq!((backlog.scheduled, backlog.unschedulable), (10, 290));
    let msg = backlog.failures.values().next().unwrap();
    assert_eq!(
        msg,
        "0/120 nodes are available: 120 cannot allocate all claims. still not schedulable, \
         preemption: 0/120 nodes are available: 120 Preemption is not helpful for scheduling."
    );
    let steady = run(Stream::Steady { in_flight: 10 });
    assert_eq!((steady.scheduled, steady.unschedulable, steady.never_created), (300, 0, 0));
    // Only the nodes that had a free device at the start are ever used.
    let free: std::collections::BTreeSet<&String> = backlog.placements.values().collect();
    assert!(steady.placements.values().all(|n| free.contains(n)), "{free:?}");
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
    let preempt = simulate("PreemptionBasic", 1, false);
    // One 3-CPU pod per 4-CPU node: 120 get a node by preemption, the rest find only
    // equal-priority pods left to evict.
    assert_eq!(preempt.scheduled, 120);
    assert_eq!(preempt.preemptions.len(), 120);
    assert!(preempt.failures.values().all(|m| m.contains("preemption: 0/120 nodes are available: ")));
    assert!(preempt.preemptions.iter().all(|p| p.victims.len() == 3), "three 900m pods make room for 3 CPUs");
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
/// workload while the cluster fills up, now and then loses a pod, and churns: nodes
/// pull and drop the pods' own image (which moves every node's image-locality score),
/// change labels, and join and leave.
#[test]
fn the_engine_path_decides_every_pod_as_fresh_plugins_do() {
    use algorithms::framework::{EquivalenceCache, EvaluateOptions, evaluate, evaluate_cached};
    use rand::SeedableRng;
    use rand::rngs::StdRng;
    use std::sync::Arc;

    for (name, ..) in WORKLOADS {
        let mut w = workload(name, Some(60), Some(150)).unwrap();
        let objects = ClusterObjects {
            owned: w.take_owned(),
            nodes: w.cluster.nodes,
            pods: Vec::new(),
            namespaces: w.cluster.namespaces,
            workloads: Default::default(),
            budgets: Default::default(),
            pod_groups: Default::default(),
            kube_pod_groups: Default::default(),
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
            let a = evaluate_cached(&long_lived, &pod, &snap, &mut rng_a, opts.clone(), &mut cache);
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
            churn(&mut snap, &mut placed, k);
        }
    }
}

/// Step `k` of the churn of the test above.
fn churn(snap: &mut algorithms::Snapshot, placed: &mut Vec<(usize, String, String)>, k: usize) {
    use algorithms::NodeInfo;
    use algorithms::builders::NodeBuilder;
    use std::sync::Arc;
    const MB: i64 = 1024 * 1024;
    let n = snap.nodes.len();
    if k % 5 == 2 {
        // A node pulls (or, every other time, drops) the pods' image, or changes a label.
        let i = (k * 31) % n;
        let cur = snap.nodes[i].clone();
        let mut fresh = NodeInfo {
            labels: cur.labels.clone(),
            allocatable: cur.allocatable.clone(),
            taints: cur.taints.clone(),
            images: cur.images.clone(),
            ..NodeInfo::default()
        };
        match k % 3 {
            0 => fresh.images = vec![("registry.k8s.io/pause:3.10".into(), (300 + k as i64) * MB)],
            1 => fresh.images.clear(),
            _ => {
                fresh.labels.insert("example.com/churn".into(), k.to_string());
            }
        }
        let mut node = (*cur).clone();
        node.update_node(fresh);
        snap.replace_node(i, Arc::new(node));
        snap.refresh_images();
    }
    if k % 23 == 11 {
        // A node joins at the end of the list.
        let built = NodeBuilder::new(&format!("joined-{k}")).capacity("4", "32Gi", "110").build();
        let mut nodes = snap.nodes.clone();
        nodes.push(Arc::new(NodeInfo::from_node(&built).unwrap()));
        snap.set_nodes(nodes);
    }
    if k % 23 == 17 {
        // The last node leaves with its pods.
        let mut nodes = snap.nodes.clone();
        nodes.pop();
        placed.retain(|(i, ..)| *i < nodes.len());
        snap.set_nodes(nodes);
    }
}

/// GangTraining with its PodGroups: every job is placed whole or not at all, with the
/// default and with the gpu profile; with the GPUs published in ResourceSlices instead
/// of allocatable (`/dra`), the same jobs are placed, each GPU pod holding a claim of as
/// many devices of its own node, never a device twice.
#[test]
fn gang_training_places_every_job_whole_or_not_at_all() {
    let text = std::fs::read_to_string("../deploy/examples/gpu-profile.yaml").unwrap();
    let gpu = scheduler::config_file::parse(&text, "gpu-profile.yaml").unwrap().build_profiles().unwrap();
    for profiles in [vec![default_profile("custom-scheduler")], gpu] {
        let mut outcomes = Vec::new();
        for name in ["GangTraining", "GangTraining/dra"] {
            let (placed, report) = gang_run(name, profiles.clone());
            if name.ends_with("/dra") {
                gang_devices_are_their_own(&report);
            }
            outcomes.push(placed);
        }
        assert_eq!(outcomes[0], outcomes[1], "the same jobs with GPUs from ResourceSlices");
    }
}

/// A gang workload's cluster (measured pods pending, PodGroups known), and its groups'
/// sizes by job name.
fn gang_cluster(
    mut w: scheduler::synthetic::workloads::Workload,
    name: &str,
) -> (std::collections::BTreeMap<String, u32>, scheduler::cluster::ParsedCluster) {
    let sizes = w.pod_groups.iter().map(|(k, min)| (k.trim_start_matches("sched-perf/").to_string(), *min)).collect();
    let objects = ClusterObjects {
        owned: w.take_owned(),
        pod_groups: w.pod_group_specs(),
        nodes: w.cluster.nodes,
        pods: w.measured_pods,
        namespaces: w.cluster.namespaces,
        ..Default::default()
    };
    (sizes, parse_cluster(&objects, name).unwrap())
}

/// Runs a GangTraining variant at 200 nodes and 300 pods: the pods placed per job, each
/// job checked whole, and the report.
fn gang_run(
    name: &str,
    profiles: Vec<algorithms::Profile>,
) -> (std::collections::BTreeMap<String, u32>, SimulationReport) {
    let (sizes, parsed) = gang_cluster(workload(name, Some(200), Some(300)).unwrap(), name);
    let opts = SimulateOptions { seed: 1, ..Default::default() };
    let r = run_phased(profiles, parsed, Vec::new(), &opts);
    let mut placed: std::collections::BTreeMap<String, u32> = Default::default();
    for key in r.placements.keys().filter(|k| k.contains("/gang-")) {
        let job = key.trim_start_matches("sched-perf/").splitn(3, '-').take(2).collect::<Vec<_>>().join("-");
        *placed.entry(job).or_default() += 1;
    }
    assert!(!placed.is_empty() && placed.len() < sizes.len(), "{name}: {placed:?}");
    for (job, n) in &placed {
        assert_eq!(Some(n), sizes.get(job), "{name}: {job} placed in part");
    }
    (placed, r)
}

/// Every placed GPU pod (`gang-J-gN-K`) holds one claim of N devices of its node; no
/// device is held twice.
fn gang_devices_are_their_own(r: &SimulationReport) {
    let mut seen = std::collections::BTreeSet::new();
    for (key, node) in r.placements.iter().filter(|(k, _)| k.contains("/gang-")) {
        let pod = key.trim_start_matches("sched-perf/");
        let gpus: usize = pod.split('-').nth(2).and_then(|g| g.strip_prefix('g')).unwrap().parse().unwrap();
        let prefix = format!("sched-perf/{pod}-extended-resources-");
        let all = common::report::resource_claims(r);
        let claims: Vec<_> = all.iter().filter(|(k, _)| k.starts_with(&prefix)).collect();
        assert_eq!(claims.len(), 1, "{pod}: {claims:?}");
        let devices = &claims[0].1.devices;
        assert_eq!(devices.len(), gpus, "{pod}");
        for d in devices {
            assert_eq!(d.split('/').nth(1), Some(node.as_str()), "{pod}: {d} is not on {node}");
            assert!(seen.insert(d.clone()), "{d} held twice");
        }
    }
    assert!(!seen.is_empty());
}

/// SchedulingWithResourceClaimTemplate at 20 nodes of 10 devices: 150 initial pods, then
/// 150 measured ones, of which only 50 find a device. Every scheduled pod's claim holds a
/// device of its own node, no device is held twice, and the rest wait with kube-scheduler's
/// message.
#[test]
fn claim_template_pods_get_devices_of_their_node_and_never_a_device_twice() {
    let w = workload("SchedulingWithResourceClaimTemplate", Some(20), Some(150)).unwrap();
    assert_eq!(w.init_pods.len(), 150);
    let report = simulate_sized("SchedulingWithResourceClaimTemplate", 20, 150);
    assert_eq!((report.scheduled, report.unschedulable), (50, 100));
    let mut seen = std::collections::BTreeSet::new();
    let mut measured = 0;
    for (claim, allocated) in &common::report::resource_claims(&report) {
        assert_eq!(allocated.devices.len(), 1, "{claim}");
        assert!(seen.insert(allocated.devices[0].clone()), "device {} held twice", allocated.devices[0]);
        let pod = claim.strip_prefix("sched-perf/").unwrap().strip_suffix("-resource").unwrap();
        assert_eq!(allocated.reserved_for, vec![pod.to_string()]);
        if let Some(node) = report.placements.get(&format!("sched-perf/{pod}")) {
            measured += 1;
            let pool = allocated.devices[0].split('/').nth(1).unwrap();
            assert_eq!(pool, node, "{claim} holds a device of another node");
        }
    }
    assert_eq!((seen.len(), measured), (200, 50));
    for message in report.failures.values() {
        assert_eq!(
            message,
            "0/20 nodes are available: 20 cannot allocate all claims. still not schedulable, preemption: 0/20 nodes are available: 20 Preemption is not helpful for scheduling."
        );
    }
}

fn simulate_sized(name: &str, nodes: usize, pods: usize) -> SimulationReport {
    let (parsed, init) = parsed_sized(name, nodes, pods);
    let opts = SimulateOptions { seed: 1, progress: false, no_equivalence_cache: false, detail: false };
    run_phased(vec![default_profile("custom-scheduler")], parsed, init, &opts)
}

/// A workload at a size: the parsed cluster (measured pods pending) and the initial pods.
fn parsed_sized(name: &str, nodes: usize, pods: usize) -> (scheduler::cluster::ParsedCluster, Vec<PodInfo>) {
    parsed_of(workload(name, Some(nodes), Some(pods)).unwrap(), name)
}

/// A built workload parsed: the cluster (measured pods pending) and the initial pods.
fn parsed_of(
    mut w: scheduler::synthetic::workloads::Workload,
    name: &str,
) -> (scheduler::cluster::ParsedCluster, Vec<PodInfo>) {
    let objects = ClusterObjects {
        owned: w.take_owned(),
        nodes: w.cluster.nodes,
        pods: w.measured_pods,
        namespaces: w.cluster.namespaces,
        workloads: Default::default(),
        budgets: Default::default(),
        pod_groups: Default::default(),
        kube_pod_groups: Default::default(),
    };
    let parsed = parse_cluster(&objects, name).unwrap();
    let init: Vec<PodInfo> = w.init_pods.iter().map(|p| PodInfo::from_pod(p).unwrap()).collect();
    (parsed, init)
}

/// The partitionable steady-state case at 10 nodes and 40 pods (20 network-attached pools
/// whose preallocated device already holds two of four counters): each pod's two devices
/// of one pool come only after backing up from the two-counter device, so each pool
/// serves one pod at a time. As a backlog 20 pods get devices, never two in a pool; as a
/// steady stream, each bound pod deleted with its claim, all 40 do.
#[test]
fn partitionable_pools_serve_one_pod_each_and_are_reused_in_a_steady_stream() {
    use scheduler::simulate::{Stream, run_streamed};
    let name = scheduler::synthetic::workloads::PARTITIONABLE;
    let report = simulate_sized(name, 10, 40);
    assert_eq!((report.scheduled, report.unschedulable), (20, 20));
    let mut pools = std::collections::BTreeSet::new();
    for (claim, allocated) in
        common::report::resource_claims(&report).iter().filter(|(c, _)| c.starts_with("sched-perf/"))
    {
        let mut devices = allocated.devices.clone();
        devices.sort();
        let pool = devices[0].split('/').nth(1).unwrap().to_string();
        assert_eq!(
            devices,
            vec![
                format!("test-driver.cdi.k8s.io/{pool}/device-1-counter-3"),
                format!("test-driver.cdi.k8s.io/{pool}/device-1-counter-4")
            ],
            "{claim}"
        );
        assert!(pools.insert(pool.clone()), "pool {pool} serves two pods");
    }
    assert_eq!(pools.len(), 20);
    let (parsed, _) = parsed_sized(name, 10, 40);
    let opts = SimulateOptions { seed: 1, progress: false, no_equivalence_cache: false, detail: false };
    let steady = run_streamed(
        vec![default_profile("custom-scheduler")],
        parsed,
        Vec::new(),
        &opts,
        Stream::Steady { in_flight: 20 },
    );
    assert_eq!((steady.scheduled, steady.unschedulable, steady.never_created), (40, 0, 0));
}

/// The consumable-capacity case at 10 nodes and 40 pods (20 pools of two shared 80Gi
/// devices; each pod asks 10Gi twice): shares fill the first device of a pool (8 of
/// 10Gi) before the next is used; the second device also publishes a `counters`
/// capacity of 2 with no policy, which a request not naming it consumes whole, so it
/// takes one share only.
#[test]
fn consumable_capacity_pools_are_shared_until_full() {
    let name = scheduler::synthetic::workloads::CONSUMABLE;
    let report = simulate_sized(name, 10, 40);
    assert_eq!((report.scheduled, report.unschedulable), (40, 0));
    let mut shares: std::collections::BTreeMap<String, usize> = Default::default();
    for (claim, allocated) in &common::report::resource_claims(&report) {
        assert_eq!(allocated.devices.len(), 2, "{claim}");
        for d in &allocated.devices {
            *shares.entry(d.clone()).or_default() += 1;
        }
    }
    for (device, n) in &shares {
        let most = if device.ends_with("/shareable-device") { 8 } else { 1 };
        assert!(*n <= most, "{device} holds {n} shares");
    }
    let full = shares.iter().filter(|(d, n)| d.ends_with("/shareable-device") && **n == 8).count();
    assert!(full >= 8, "shareable devices fill before others are used: {shares:?}");
}

/// The toleration case at 20 nodes of 10 tainted devices (150 initial, 150 measured
/// pods): claims tolerating the taint take the devices as in the untainted case; the same
/// devices without the toleration take none.
#[test]
fn tainted_devices_go_to_tolerating_claims_only() {
    let name = "SchedulingWithResourceClaimTemplateToleration";
    let report = simulate_sized(name, 20, 150);
    assert_eq!((report.scheduled, report.unschedulable), (50, 100));
    let mut w = workload(name, Some(20), Some(150)).unwrap();
    // The same cluster with a template that tolerates nothing.
    let plain = scheduler::synthetic::dra::template("sched-perf", false);
    w.dra.upsert_template(plain.clone());
    let claims: Vec<_> = w.dra.claims().map(|c| c.key()).collect();
    for key in claims {
        let (_, pod) = key.split_once('/').unwrap();
        let pod = pod.strip_suffix("-resource").unwrap();
        let claim = algorithms::dra::claim_object(
            &plain,
            "sched-perf",
            pod,
            &format!("uid-{pod}"),
            "resource",
            &format!("{pod}-resource"),
        );
        w.dra.upsert_claim(algorithms::dra::Claim::from_api(&claim).unwrap());
    }
    let (parsed, init) = parsed_of(w, name);
    let opts = SimulateOptions { seed: 1, progress: false, no_equivalence_cache: false, detail: false };
    let untolerated = run_phased(vec![default_profile("custom-scheduler")], parsed, init, &opts);
    assert_eq!(untolerated.scheduled, 0);
}

/// The extended-resource case at 20 nodes of 10 devices (150 initial, 150 measured pods,
/// each asking for one `example.com/gpu-N` no node advertises): every placed pod holds a
/// claim the scheduler made with one device, never a device twice; the pods beyond the
/// 200 devices wait on `cannot allocate all claims`.
#[test]
fn extended_resources_are_served_by_claims_the_scheduler_makes() {
    let name = scheduler::synthetic::workloads::EXTENDED;
    let report = simulate_sized(name, 20, 150);
    assert_eq!((report.scheduled, report.unschedulable), (50, 100));
    assert_eq!(common::report::resource_claims(&report).len(), 200, "one claim per placed pod");
    let mut devices = std::collections::BTreeSet::new();
    for (key, claim) in &common::report::resource_claims(&report) {
        assert!(key.contains("-extended-resources-"), "{key}");
        assert_eq!((claim.devices.len(), claim.reserved_for.len()), (1, 1), "{key}: {claim:?}");
        assert!(devices.insert(claim.devices[0].clone()), "{key}: a device given twice");
    }
    let message = report.failures.values().next().expect("a waiting pod");
    assert!(message.contains("cannot allocate all claims"), "{message}");
}

/// SchedulingGpuPacking with its GPUs in ResourceSlices places as many pods as with the
/// GPUs in allocatable, with the default and with the gpu profile.
#[test]
fn gpu_packing_places_the_same_pods_with_gpus_from_resource_slices() {
    let text = std::fs::read_to_string("../deploy/examples/gpu-profile.yaml").unwrap();
    let gpu = scheduler::config_file::parse(&text, "gpu-profile.yaml").unwrap().build_profiles().unwrap();
    for profiles in [vec![default_profile("custom-scheduler")], gpu] {
        let mut scheduled = Vec::new();
        for name in ["SchedulingGpuPacking", "SchedulingGpuPacking/dra"] {
            let (parsed, init) = parsed_sized(name, 200, 160);
            let opts = SimulateOptions { seed: 1, ..Default::default() };
            let r = run_phased(profiles.clone(), parsed, init, &opts);
            scheduled.push((r.scheduled, r.unschedulable));
        }
        assert_eq!(scheduled[0], scheduled[1], "{scheduled:?}");
        assert!(scheduled[0].1 > 0, "the workload runs out of GPUs: {scheduled:?}");
    }
}

/// GangTrainingTopology at 256 nodes (four racks of 64) and 1,500 pods: every job is
/// placed whole inside one rack or not at all, and some are refused once the racks fill.
#[test]
fn topology_constrained_jobs_stay_inside_one_rack() {
    use scheduler::synthetic::workloads::{RACK_LABEL, RACK_SIZE};
    let w = workload("GangTrainingTopology", Some(256), Some(1500)).unwrap();
    assert_eq!(w.topology_key.as_deref(), Some(RACK_LABEL));
    let (sizes, parsed) = gang_cluster(w, "GangTrainingTopology");
    let r = run_phased(vec![default_profile("custom-scheduler")], parsed, Vec::new(), &SimulateOptions::default());
    let mut racks: std::collections::BTreeMap<String, std::collections::BTreeSet<usize>> = Default::default();
    for (key, node) in r.placements.iter().filter(|(k, _)| k.contains("/gang-")) {
        let job = key.trim_start_matches("sched-perf/").splitn(3, '-').take(2).collect::<Vec<_>>().join("-");
        let index: usize = node.trim_start_matches("node-").parse().unwrap();
        racks.entry(job).or_default().insert(index / RACK_SIZE);
    }
    assert!(racks.len() > 5, "{racks:?}");
    for (job, r) in &racks {
        assert_eq!(r.len(), 1, "{job} spans racks {r:?}");
    }
    assert!(racks.len() < sizes.len(), "the racks fill before the stream ends");
    let refused = r.failures.iter().find(|(k, _)| k.contains("/gang-")).map(|(_, m)| m.clone()).unwrap();
    assert!(refused.contains(&format!("no {RACK_LABEL} domain fits all")), "{refused}");
}
