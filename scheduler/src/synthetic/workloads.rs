//! Workloads shaped like kube-scheduler's scheduler_perf test cases.
//!
//! Nodes follow scheduler_perf's node template (4 CPU, 32Gi, 110 pods) with zone
//! labels; pods follow its pod template (100m CPU, 500Mi, one container).

use algorithms::builders::{NodeBuilder, PodBuilder, affinity_term, node_term};
use k8s_openapi::api::core::v1 as core;

use super::{GeneratedCluster, namespace};

/// The scheduler name of generated pods.
pub const SCHEDULER: &str = "custom-scheduler";
const ZONE: &str = "topology.kubernetes.io/zone";
const HOST: &str = "kubernetes.io/hostname";
/// GPU resource used by the GPU workload.
pub const GPU: &str = "nvidia.com/gpu";

/// A generated workload: the cluster, pods scheduled first (not measured), and measured pods.
#[derive(Debug, Clone, Default)]
pub struct Workload {
    /// Workload name.
    pub name: String,
    /// Nodes and namespaces (no pods).
    pub cluster: GeneratedCluster,
    /// Pods scheduled before measuring.
    pub init_pods: Vec<core::Pod>,
    /// Pods whose scheduling is measured.
    pub measured_pods: Vec<core::Pod>,
    /// PodGroups (`namespace/name`, minMember) of gang workloads.
    pub pod_groups: Vec<(String, u32)>,
    /// The node label one domain of which must hold each PodGroup, if they are constrained.
    pub topology_key: Option<String>,
    /// Claims, storage classes and CSI objects of volume workloads.
    pub volumes: algorithms::volumes::VolumeState,
    /// ResourceSlices, DeviceClasses, templates and claims of DRA workloads.
    pub dra: algorithms::dra::DraState,
    /// ElasticQuotas of quota workloads.
    pub quotas: Option<algorithms::quotas::QuotaState>,
}

impl Workload {
    /// The objects plugins own, as the cluster would hold them: the volume and the DRA
    /// objects, taken out of the workload (a copy kept here would hold on to every
    /// version the scheduler's copy goes through).
    pub fn take_owned(&mut self) -> algorithms::objects::ClusterObjects {
        let volumes = std::mem::take(&mut self.volumes);
        let dra = std::mem::take(&mut self.dra);
        let objects = algorithms::objects::ClusterObjects::default().with(volumes).with(dra);
        match self.quotas.take() {
            Some(q) => objects.with(q),
            None => objects,
        }
    }

    /// The PodGroups' specs (`namespace/name`), held to the topology key when there is one.
    pub fn pod_group_specs(&self) -> Vec<(String, crate::gang::PodGroupSpec)> {
        let spec = |min: u32| {
            let s = crate::gang::PodGroupSpec::with_min(min);
            match &self.topology_key {
                Some(k) => s.within(k),
                None => s,
            }
        };
        self.pod_groups.iter().map(|(k, min)| (k.clone(), spec(*min))).collect()
    }
}

/// The label naming a pod's PodGroup.
pub const POD_GROUP_LABEL: &str = "scheduling.x-k8s.io/pod-group";

/// Every workload name with its default (nodes, init pods, measured pods).
pub const WORKLOADS: &[(&str, usize, usize, usize)] = &[
    ("SchedulingBasic", 5000, 1000, 10000),
    ("SchedulingNodeAffinity", 5000, 1000, 10000),
    ("SchedulingPodAntiAffinity", 5000, 1000, 2000),
    ("SchedulingPodAffinity", 5000, 1000, 5000),
    ("TopologySpreading", 5000, 1000, 5000),
    ("PreferredTopologySpreading", 5000, 1000, 5000),
    ("Unschedulable", 5000, 200, 5000),
    ("SchedulingGpu", 5000, 1000, 5000),
    ("SchedulingGpuPacking", 5000, 0, 2000),
    ("GangTraining", 5000, 0, 3000),
    ("SchedulingChurn", 5000, 1000, 10000),
    ("SchedulingWithPVC", 5000, 1000, 5000),
    ("PreemptionBasic", 5000, 20000, 1000),
    ("SchedulingWithResourceClaimTemplate", 500, 2500, 2500),
    ("SchedulingWithResourceClaimTemplateToleration", 500, 2500, 2500),
    ("SteadyStateClusterResourceClaimTemplate/empty", 500, 0, 5000),
    ("SteadyStateClusterResourceClaimTemplate/half", 500, 0, 5000),
    ("SteadyStateClusterResourceClaimTemplate/full", 500, 0, 5000),
    ("SteadyStateClusterResourceClaimTemplatePartitionable", 100, 0, 4000),
    ("SteadyStateClusterResourceClaimTemplateConsumableCapacity", 100, 0, 4000),
    ("ExtendedResource_25Classes", 500, 2500, 2500),
    ("SchedulingGpuPacking/dra", 5000, 0, 2000),
    ("GangTraining/dra", 5000, 0, 3000),
    ("GangTrainingTopology", 4096, 0, 20000),
];

/// The rack label of GangTrainingTopology.
pub const RACK_LABEL: &str = "topology.kubernetes.io/rack";
/// The block label of GangTrainingTopology (eight racks a block).
pub const BLOCK_LABEL: &str = "topology.kubernetes.io/block";
/// Nodes per rack in GangTrainingTopology.
pub const RACK_SIZE: usize = 64;

/// The suffix of the GPU workloads whose GPUs a DRA driver publishes in ResourceSlices
/// (a DeviceClass serving `nvidia.com/gpu`) instead of the nodes' allocatable.
pub const DRA_SUFFIX: &str = "/dra";

/// The extended-resource workload (scheduler_perf's `ExtendedResource_25Classes`,
/// 5000pods_500nodes): 25 classes serving `example.com/gpu-N`, nodes advertising none of
/// them, pod `i` asking for one `example.com/gpu-(i mod 25)` in its container.
pub const EXTENDED: &str = "ExtendedResource_25Classes";
const EXTENDED_CLASSES: usize = 25;

/// The consumable-capacity steady-state workload (scheduler_perf's 2000pods_100nodes):
/// pools of two shared 80Gi devices reachable from every node, pods asking 10Gi twice.
pub const CONSUMABLE: &str = "SteadyStateClusterResourceClaimTemplateConsumableCapacity";

/// The partitionable steady-state workload (scheduler_perf's 2000pods_100nodes): pools
/// (one GPU-like counter set each, reachable from every node), and pods pending at a
/// time.
pub const PARTITIONABLE: &str = "SteadyStateClusterResourceClaimTemplatePartitionable";
const PARTITIONABLE_POOLS: usize = 2000;

/// Measured pods pending at a time in the steady-state workloads (scheduler_perf's
/// `steadyState` createPods with count 10).
pub const STEADY_IN_FLIGHT: usize = 10;

/// How many measured pods `name` keeps pending at a time, each deleted once bound and
/// replaced by the next (`None`: all measured pods arrive at once).
pub fn steady_in_flight(name: &str) -> Option<usize> {
    if name.eq_ignore_ascii_case(PARTITIONABLE) || name.eq_ignore_ascii_case(CONSUMABLE) {
        return Some(PARTITIONABLE_POOLS);
    }
    steady_used(name, 1).map(|_| STEADY_IN_FLIGHT)
}

/// Devices already allocated (to claims without pods) when a steady-state DRA workload
/// of `nodes` nodes starts: none, half, or all but ten.
fn steady_used(name: &str, nodes: usize) -> Option<usize> {
    let variant = name.strip_prefix("SteadyStateClusterResourceClaimTemplate/")?;
    let devices = nodes * DRA_DEVICES_PER_NODE;
    match variant {
        "empty" => Some(0),
        "half" => Some(devices / 2),
        "full" => Some(devices.saturating_sub(STEADY_IN_FLIGHT)),
        _ => None,
    }
}

/// Devices the test driver publishes on each node of the DRA workloads.
pub const DRA_DEVICES_PER_NODE: usize = 10;

/// Churn steps per second of the churn workload: each step updates one node (a newly
/// pulled image in its status, or a label), deletes one bound pod and creates one pod.
pub const CHURN_PER_SECOND: f64 = 20.0;

/// One step of cluster churn.
#[derive(Debug, Clone)]
pub struct ChurnStep {
    /// The updated node object.
    pub node: core::Node,
    /// `namespace/name` of a bound pod that leaves, while initial pods last.
    pub leaving: Option<String>,
    /// A pod that arrives.
    pub arriving: core::Pod,
}

/// The steps per second at which `name` churns the cluster (`None`: no churn).
pub fn churn_rate(name: &str) -> Option<f64> {
    name.eq_ignore_ascii_case("SchedulingChurn").then_some(CHURN_PER_SECOND)
}

/// Step `k` of the churn of a cluster of `nodes` nodes that started with `init` initial pods.
/// Even steps give a node a newly pulled image; odd steps change a label. Nodes are
/// visited in a scattered order so that consecutive steps touch different nodes.
pub fn churn_step(nodes: usize, init: usize, k: usize) -> ChurnStep {
    let n = nodes.max(1);
    let j = (k * 7919 + 13) % n;
    let mut node = base_node(j);
    node = if k.is_multiple_of(2) {
        node.image(&[&format!("registry.example/churn/app-{k}:1")], 300 * 1024 * 1024)
    } else {
        node.label("example.com/churn-step", &k.to_string())
    };
    ChurnStep {
        node: node.build(),
        leaving: (k < init).then(|| format!("sched-perf/init-{k}")),
        arriving: with_created(base_pod("churn", k).build(), init + 1_000_000 + k),
    }
}

fn zone(i: usize) -> String {
    format!("zone{}", i % 3 + 1)
}

fn base_node(i: usize) -> NodeBuilder {
    NodeBuilder::new(&format!("node-{i}")).capacity("4", "32Gi", "110").label(ZONE, &zone(i))
}

/// A node with 8 GPUs, tainted so that only pods tolerating it land there.
fn gpu_node(i: usize, cpu: &str, memory: &str) -> core::Node {
    base_node(i).capacity(cpu, memory, "110").resource(GPU, "8").taint(GPU, "present", "NoSchedule").build()
}

fn base_pod(prefix: &str, i: usize) -> PodBuilder {
    PodBuilder::new(&format!("{prefix}-{i}"))
        .namespace("sched-perf")
        .scheduler(SCHEDULER)
        .images(&["registry.k8s.io/pause:3.10"])
        .req("100m", "500Mi")
}

fn with_created(mut p: core::Pod, seq: usize) -> core::Pod {
    let t = k8s_openapi::jiff::Timestamp::from_second(1_780_000_000 + seq as i64).unwrap_or_default();
    p.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(t));
    p
}

/// Builds a workload by name with the given sizes (`None` takes the defaults).
pub fn workload(name: &str, nodes: Option<usize>, pods: Option<usize>) -> Option<Workload> {
    let mut init_pods = Vec::new();
    let mut measured_pods = Vec::new();
    let mut w = generate(name, nodes, pods, |p| init_pods.push(p), |p| measured_pods.push(p))?;
    w.init_pods = init_pods;
    w.measured_pods = measured_pods;
    Some(w)
}

/// Builds a workload handing each generated pod to `init` or `measured` as it is made,
/// so that large workloads never hold every API object at once. The returned
/// workload carries the nodes and namespaces only.
pub fn generate(
    name: &str,
    nodes: Option<usize>,
    pods: Option<usize>,
    mut on_init: impl FnMut(core::Pod),
    mut on_measured: impl FnMut(core::Pod),
) -> Option<Workload> {
    let &(_, dn, di, dm) = WORKLOADS.iter().find(|(n, ..)| n.eq_ignore_ascii_case(name))?;
    let canonical = WORKLOADS.iter().find(|(n, ..)| n.eq_ignore_ascii_case(name)).map(|w| w.0)?;
    let n = nodes.unwrap_or(dn).max(1);
    let m = pods.unwrap_or(dm);
    // Initial pods scale with the measured count when it is changed.
    let init = if pods.is_some() { (di * m).div_ceil(dm.max(1)) } else { di };
    if let Some(base) = canonical.strip_suffix(DRA_SUFFIX) {
        let mut w = generate(base, nodes, pods, on_init, on_measured)?;
        w.name = canonical.to_string();
        w.dra = super::dra::gpus_from_slices(&mut w.cluster.nodes, GPU);
        return Some(w);
    }
    let mut w = Workload { name: canonical.to_string(), ..Default::default() };
    w.cluster.namespaces = vec![namespace("sched-perf", &[])];
    if canonical == "GangTraining" {
        gang_training(&mut w, n, m, &mut on_measured);
        return Some(w);
    }
    if canonical == "GangTrainingTopology" {
        gang_training_topology(&mut w, n, m, &mut on_measured);
        return Some(w);
    }
    let gpu = canonical == "SchedulingGpu";
    let consumable = canonical == CONSUMABLE;
    let partitionable = canonical == PARTITIONABLE;
    let tainted = canonical == "SchedulingWithResourceClaimTemplateToleration";
    let claims = canonical == "SchedulingWithResourceClaimTemplate"
        || tainted
        || steady_used(canonical, n).is_some()
        || partitionable
        || consumable;
    let packing = canonical == "SchedulingGpuPacking";
    let extended = canonical == EXTENDED;
    w.cluster.nodes = (0..n)
        .map(|i| {
            if (gpu && i % 5 == 0) || (packing && i % 10 == 0) {
                gpu_node(i, "32", "256Gi")
            } else if partitionable || consumable {
                base_node(i).label(super::dra::DRA_NODE_LABEL, "true").build()
            } else {
                base_node(i).build()
            }
        })
        .collect();
    let make = |prefix: &str, i: usize| -> core::Pod {
        let p = base_pod(prefix, i);
        let p = match canonical {
            "SchedulingNodeAffinity" => p.required_node_affinity(vec![node_term(ZONE, "In", &["zone1", "zone2"])]),
            "SchedulingPodAntiAffinity" => {
                p.label("color", "green").pod_anti_affinity(affinity_term(&[("color", "green")], HOST))
            }
            "SchedulingPodAffinity" if prefix == "init" => p.label("color", "blue"),
            "SchedulingPodAffinity" => p.label("color", "blue").pod_affinity(affinity_term(&[("color", "blue")], ZONE)),
            "TopologySpreading" => p.label("app", "spread").spread(5, ZONE, "DoNotSchedule", &[("app", "spread")]),
            "PreferredTopologySpreading" => {
                p.label("app", "spread").spread(5, ZONE, "ScheduleAnyway", &[("app", "spread")])
            }
            "Unschedulable" if prefix == "init" => p.req("9", "500Mi"),
            // Four low-priority pods fill each node; each high-priority pod needs three of them gone.
            "PreemptionBasic" if prefix == "init" => p.priority(1).req("900m", "500Mi"),
            "PreemptionBasic" => p.priority(10).req("3", "500Mi"),
            // Fragmentation: first 1-GPU pods (every other pod; the rest need no GPU),
            // then whole-node 8-GPU pods, more than the GPU nodes can hold.
            "SchedulingGpuPacking" if i < m / 2 && i.is_multiple_of(2) => {
                p.req_list(&[(GPU, "1")]).toleration(GPU, "Exists", "", "NoSchedule")
            }
            "SchedulingGpuPacking" if i >= m / 2 => {
                p.req_list(&[(GPU, "8")]).toleration(GPU, "Exists", "", "NoSchedule")
            }
            _ if extended => p.device(&super::dra::extended_resource(i % EXTENDED_CLASSES), "1"),
            // Each pod asks for one device through a claim made from the template.
            _ if claims => {
                let name = format!("{prefix}-{i}");
                p.claim_template(super::dra::POD_CLAIM, super::dra::TEMPLATE, Some(&super::dra::claim_name(&name)))
            }
            // Each pod mounts its own WaitForFirstConsumer claim, like a StatefulSet replica.
            "SchedulingWithPVC" => p.claim("data", &format!("data-{prefix}-{i}")),
            "SchedulingGpu" if i % 5 < 2 => {
                let gpus = ["1", "2", "4", "1", "8", "2"][i % 6];
                p.req_list(&[(GPU, gpus)]).toleration(GPU, "Exists", "", "NoSchedule")
            }
            _ => p,
        };
        p.build()
    };
    if canonical == "SchedulingWithPVC" {
        w.volumes = pvc_world(n, init, m);
    }
    if claims {
        let names: Vec<(String, String)> = (0..init)
            .map(|i| format!("init-{i}"))
            .chain((0..m).map(|i| format!("pod-{i}")))
            .map(|n| (format!("uid-{n}"), n))
            .collect();
        // The pools scale with the measured pods when their count is changed.
        let pools = if pods.is_some() { m.div_ceil(2).clamp(1, PARTITIONABLE_POOLS) } else { PARTITIONABLE_POOLS };
        let pods = names.iter().map(|(uid, n)| (n.as_str(), uid.as_str()));
        if consumable {
            w.dra = super::dra::consumable_world(pools, "sched-perf", pods);
        } else if partitionable {
            w.dra = super::dra::partitionable_world(pools, "sched-perf", pods);
        } else {
            w.dra = super::dra::world(n, DRA_DEVICES_PER_NODE, tainted, "sched-perf", pods);
        }
        let used = steady_used(canonical, n).unwrap_or(0);
        super::dra::allocate_standalone(&mut w.dra, n, DRA_DEVICES_PER_NODE, "init", used);
    }
    if extended {
        w.dra = super::dra::extended_world(n, DRA_DEVICES_PER_NODE, EXTENDED_CLASSES);
    }
    for i in 0..init {
        on_init(with_created(make("init", i), i));
    }
    for i in 0..m {
        on_measured(with_created(make("pod", i), init + i));
    }
    Some(w)
}

/// The CSI driver of SchedulingWithPVC.
pub const PVC_DRIVER: &str = "csi.example.com";
/// Its attach limit per node.
const PVC_ATTACH_LIMIT: i64 = 39;

/// SchedulingWithPVC's storage: a WaitForFirstConsumer class whose CSI driver publishes
/// capacity per zone and attaches at most 39 volumes per node, and one 1Gi claim per pod
/// (`data-init-N`, `data-pod-N`). Provisioning happens in memory as pods are placed.
fn pvc_world(nodes: usize, init: usize, measured: usize) -> algorithms::volumes::VolumeState {
    use algorithms::volumes::builders::{GI, capacity, class, csi_node, sized_claim};
    use algorithms::volumes::{CsiDriver, VolumeClaim};
    let mut st = algorithms::volumes::VolumeState::default();
    st.upsert_class(class("wffc", PVC_DRIVER, true));
    st.upsert_driver(CsiDriver { name: PVC_DRIVER.into(), storage_capacity: true });
    for z in 1..=3 {
        let zone = format!("zone{z}");
        st.upsert_capacity(capacity(&zone, "wffc", Some((ZONE, &zone)), Some(1 << 50), None));
    }
    for i in 0..nodes {
        st.upsert_csi_node(csi_node(&format!("node-{i}"), &[(PVC_DRIVER, Some(PVC_ATTACH_LIMIT))], &[]));
    }
    let names = (0..init).map(|i| format!("data-init-{i}")).chain((0..measured).map(|i| format!("data-pod-{i}")));
    for name in names {
        st.upsert_claim(VolumeClaim { namespace: "sched-perf".into(), ..sized_claim(&name, "wffc", GI) });
    }
    st
}

/// GangTraining: a tenth of the nodes have 8 GPUs (tainted); a stream of training jobs,
/// each a PodGroup of 2-16 workers that all need 1, 2, 4 or 8 GPUs, every job followed by
/// four CPU pods, until `m` pods. A worker is named `gang-G-gN-K`: job G, N GPUs, worker K.
fn gang_training(w: &mut Workload, n: usize, m: usize, on_measured: &mut impl FnMut(core::Pod)) {
    w.cluster.nodes =
        (0..n).map(|i| if i % 10 == 0 { gpu_node(i, "64", "512Gi") } else { base_node(i).build() }).collect();
    training_jobs(w, m, |job| (2 + (job * 7) % 15, [1, 2, 4, 8][(job * 3) % 4]), on_measured);
}

/// GangTrainingTopology: every node has 8 GPUs, in racks of 64 nodes (eight racks a
/// block); jobs of 2-64 workers of 1, 2, 4 or 8 GPUs, each held to one rack, every job
/// followed by four CPU pods, until `m` pods.
fn gang_training_topology(w: &mut Workload, n: usize, m: usize, on_measured: &mut impl FnMut(core::Pod)) {
    w.cluster.nodes = (0..n)
        .map(|i| {
            base_node(i)
                .capacity("64", "512Gi", "110")
                .resource(GPU, "8")
                .taint(GPU, "present", "NoSchedule")
                .label(RACK_LABEL, &format!("rack-{}", i / RACK_SIZE))
                .label(BLOCK_LABEL, &format!("block-{}", i / (8 * RACK_SIZE)))
                .build()
        })
        .collect();
    w.topology_key = Some(RACK_LABEL.to_string());
    training_jobs(w, m, |job| (2 + (job * 13) % 63, [1, 2, 4, 8][(job * 3) % 4]), on_measured);
}

/// The stream of training jobs: job `j` has `shape(j)` = (workers, GPUs each).
fn training_jobs(
    w: &mut Workload,
    m: usize,
    shape: impl Fn(usize) -> (usize, usize),
    on_measured: &mut impl FnMut(core::Pod),
) {
    let (mut made, mut job, mut seq) = (0, 0, 0);
    while made < m {
        let (size, gpus) = shape(job);
        let size = size.min(m - made);
        let group = format!("gang-{job}");
        w.pod_groups.push((format!("sched-perf/{group}"), size as u32));
        for k in 0..size {
            let p = PodBuilder::new(&format!("{group}-g{gpus}-{k}"))
                .namespace("sched-perf")
                .scheduler(SCHEDULER)
                .label(POD_GROUP_LABEL, &group)
                .req_list(&[("cpu", "4"), ("memory", "16Gi"), (GPU, &gpus.to_string())])
                .toleration(GPU, "Exists", "", "NoSchedule");
            on_measured(with_created(p.build(), seq));
            seq += 1;
        }
        made += size;
        for k in 0..4.min(m - made) {
            on_measured(with_created(base_pod(&format!("cpu-{job}"), k).build(), seq));
            seq += 1;
            made += 1;
        }
        job += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use algorithms::PodInfo;

    #[test]
    fn every_workload_builds_at_a_small_size() {
        for (name, ..) in WORKLOADS {
            let w = workload(name, Some(30), Some(40)).unwrap();
            assert_eq!(w.cluster.nodes.len(), 30, "{name}");
            assert_eq!(w.measured_pods.len(), 40, "{name}");
            for p in w.init_pods.iter().chain(&w.measured_pods) {
                PodInfo::from_pod(p).unwrap();
            }
        }
        assert!(workload("schedulingbasic", None, None).is_some());
        assert!(workload("NoSuchWorkload", None, None).is_none());
    }

    #[test]
    fn churn_steps_alternate_images_and_labels_and_replace_initial_pods() {
        assert_eq!(churn_rate("SchedulingChurn"), Some(CHURN_PER_SECOND));
        assert_eq!(churn_rate("SchedulingBasic"), None);
        let even = churn_step(100, 2, 0);
        let images = even.node.status.as_ref().and_then(|s| s.images.as_ref()).map_or(0, Vec::len);
        assert_eq!(images, 1);
        assert_eq!(even.leaving.as_deref(), Some("sched-perf/init-0"));
        let odd = churn_step(100, 2, 1);
        let labels = odd.node.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get("example.com/churn-step").map(String::as_str), Some("1"));
        assert_ne!(odd.node.metadata.name, even.node.metadata.name);
        assert_eq!(churn_step(100, 2, 2).leaving, None);
        assert_eq!(churn_step(100, 2, 5).arriving.metadata.name.as_deref(), Some("churn-5"));
    }

    #[test]
    fn gpu_workload_mixes_gpu_and_cpu_nodes_and_pods() {
        let w = workload("SchedulingGpu", Some(10), Some(10)).unwrap();
        let gpu_nodes =
            w.cluster.nodes.iter().filter(|n| n.spec.as_ref().and_then(|s| s.taints.as_ref()).is_some()).count();
        assert_eq!(gpu_nodes, 2);
        let gpu_pods =
            w.measured_pods.iter().filter(|p| PodInfo::from_pod(p).unwrap().requests.requests.get(GPU) > 0).count();
        assert_eq!(gpu_pods, 4);
    }
}
