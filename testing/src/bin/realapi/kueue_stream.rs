//! `realapi kueue-stream`: the same stream of rack-constrained GPU Jobs under the real
//! Kueue, with custom-scheduler's placement admission check and without it, each on a
//! fresh control plane (kube-apiserver, kube-controller-manager's Job controller, Kueue,
//! custom-scheduler). There is no kubelet: this program plays it, starting a Job's work
//! once all its pods are bound and ending its pods `Succeeded` when its run time is over.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use testing::{Assets, ControlPlane, api};

use super::{NS, Who, start};

const GPU: &str = "nvidia.com/gpu";
const RACK: &str = "cloud.example.com/rack";
/// GPUs each pod asks for.
const GPUS_A_POD: u64 = 4;
/// The admission check controller name custom-scheduler answers for.
const CONTROLLER: &str = "custom-scheduler.x-k8s.io/placement";
/// The pod template annotation asking the check for one rack.
const PLACEMENT_TOPOLOGY: &str = "custom-scheduler.x-k8s.io/placement-topology";
/// The PodGroup annotation asking custom-scheduler for one rack.
const GROUP_TOPOLOGY: &str = "custom-scheduler/required-topology";
const POD_GROUP_LABEL: &str = "scheduling.x-k8s.io/pod-group";
const POD_GROUP_CRD: &str = include_str!("../../../../deploy/crds/podgroups.scheduling.x-k8s.io.yaml");
/// An admitted Job whose pods are not all bound this long after its admission counts as
/// one that waited for placement.
const WAITED: f64 = 5.0;

/// What Kueue admits on.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Mode {
    /// ClusterQueue quota and custom-scheduler's placement admission check.
    Check,
    /// ClusterQueue quota alone.
    Quota,
}

impl Mode {
    fn label(self) -> &'static str {
        match self {
            Mode::Check => "Kueue + placement check",
            Mode::Quota => "Kueue quota alone",
        }
    }
}

/// The cluster and the Job stream.
pub struct Stream {
    /// Racks, and nodes in each.
    pub racks: usize,
    pub nodes_per_rack: usize,
    /// GPUs a node.
    pub gpus_per_node: u64,
    /// Jobs created, one every `interval`.
    pub jobs: usize,
    pub interval: Duration,
    /// A Job's pods: from `pods.0` to `pods.1`, each of `GPUS_A_POD` GPUs.
    pub pods: (u64, u64),
    /// A Job's run time once all its pods are bound, in seconds.
    pub life: (u64, u64),
    /// How long each run is watched, from the first Job's creation.
    pub window: Duration,
    pub seed: u64,
}

/// One Job of the stream.
#[derive(Clone)]
struct Spec {
    name: String,
    pods: u64,
    life: f64,
}

fn specs(s: &Stream) -> Vec<Spec> {
    let mut rng = SmallRng::seed_from_u64(s.seed);
    (0..s.jobs)
        .map(|i| Spec {
            name: format!("job-{i:03}"),
            pods: rng.random_range(s.pods.0..=s.pods.1),
            life: rng.random_range(s.life.0..=s.life.1) as f64,
        })
        .collect()
}

/// What happened to one Job, in seconds from the first Job's creation.
#[derive(Default, Clone)]
struct Track {
    created: Option<f64>,
    admitted: Option<f64>,
    /// All its pods bound (its work starts).
    placed: Option<f64>,
    completed: Option<f64>,
    /// Times Kueue suspended it again after admitting it.
    evicted: usize,
    suspended: bool,
    /// Why its pods were still pending while it waited for placement, as the scheduler
    /// last said (their `PodScheduled` condition).
    why: Option<String>,
}

/// One run's outcome.
struct Outcome {
    mode: Mode,
    tracks: Vec<(Spec, Track)>,
    /// (second, GPUs allocated to bound, running pods).
    allocation: Vec<(f64, u64)>,
    capacity: u64,
    window: f64,
}

/// Runs `stream` under each of `modes`, each on a fresh control plane, and prints the
/// tables.
pub async fn compare(
    scheduler: &Path,
    kueue: &Path,
    stream: &Stream,
    modes: &[Mode],
    logs: Option<PathBuf>,
) -> Result<()> {
    let assets =
        Assets::from_env()?.context("set KUBE_ASSETS to a folder with etcd, kube-apiserver and kube-scheduler")?;
    let mut outcomes = Vec::new();
    for &mode in modes {
        let plane = ControlPlane::start(&assets).await?;
        let outcome = run(&plane, scheduler, kueue, stream, mode).await;
        if let Some(dir) = &logs {
            std::fs::create_dir_all(dir)?;
            for name in ["custom-scheduler", "kueue", "kube-controller-manager"] {
                let tag = if mode == Mode::Check { "check" } else { "quota" };
                let _ =
                    std::fs::copy(plane.dir().join(format!("{name}.log")), dir.join(format!("kueue-{tag}-{name}.log")));
            }
        }
        let outcome = outcome?;
        for (spec, t) in &outcome.tracks {
            let Some(admitted) = t.admitted else { continue };
            let wait = t.placed.unwrap_or(outcome.window) - admitted;
            if wait > WAITED {
                eprintln!(
                    "  {} ({} pods) created {:.0} s, admitted {admitted:.0} s, placed {}, waited {wait:.0} s",
                    spec.name,
                    spec.pods,
                    t.created.unwrap_or(f64::NAN),
                    t.placed.map_or("never".into(), |p| format!("{p:.0} s")),
                );
                if let Some(why) = &t.why {
                    eprintln!("    pending: {why}");
                }
            }
        }
        eprintln!("{}", row(&outcome));
        outcomes.push(outcome);
    }
    println!("{}", table(&outcomes));
    println!("{}", curves(&outcomes));
    Ok(())
}

async fn run(plane: &ControlPlane, scheduler: &Path, kueue: &Path, s: &Stream, mode: Mode) -> Result<Outcome> {
    let client = plane.client().await?;
    api::create_namespace(&client, NS).await?;
    let crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
        serde_yaml::from_str(POD_GROUP_CRD)?;
    Api::all(client.clone()).create(&PostParams::default(), &crd).await?;
    let nodes: Vec<_> = (0..s.racks * s.nodes_per_rack)
        .map(|i| {
            algorithms::builders::NodeBuilder::new(&format!("r{}-n{}", i / s.nodes_per_rack, i % s.nodes_per_rack))
                .capacity("64", "512Gi", "110")
                .resource(GPU, &s.gpus_per_node.to_string())
                .label(RACK, &format!("r{}", i / s.nodes_per_rack))
                .build()
        })
        .collect();
    api::create_nodes(&client, &nodes, 16).await?;
    let capacity = nodes.len() as u64 * s.gpus_per_node;

    let _controllers = testing::start_controller_manager(plane, "kube-controller-manager", &["--controllers=job"])?;
    let _kueue = testing::kueue::start_kueue(plane, &client, "kueue", kueue).await?;
    let mut ours = start(plane, &scheduler.to_path_buf(), Who::Ours, false)?;
    queues(&client, mode, capacity).await?;

    let specs = specs(s);
    let mut tracks: BTreeMap<String, (Spec, Track)> =
        specs.iter().map(|j| (j.name.clone(), (j.clone(), Track::default()))).collect();
    let creator = {
        let client = client.clone();
        let specs = specs.clone();
        let interval = s.interval;
        tokio::spawn(async move {
            for spec in &specs {
                if let Err(e) = create_job(&client, spec).await {
                    eprintln!("creating {}: {e}", spec.name);
                }
                tokio::time::sleep(interval).await;
            }
        })
    };
    let t0 = Instant::now();
    let mut allocation = Vec::new();
    let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    eprintln!(
        "{}: {} nodes in {} racks, {} Jobs, one every {:?}",
        mode.label(),
        nodes.len(),
        s.racks,
        s.jobs,
        s.interval
    );
    while t0.elapsed() < s.window {
        let now = t0.elapsed().as_secs_f64();
        if let Some(status) = ours.poll() {
            anyhow::bail!("custom-scheduler exited ({status}):\n{}", ours.log_tail(20));
        }
        let (Ok(job_list), Ok(pod_list)) =
            (jobs.list(&ListParams::default()).await, pods.list(&ListParams::default()).await)
        else {
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        };
        for job in &job_list.items {
            let Some((_, t)) = job.metadata.name.as_ref().and_then(|n| tracks.get_mut(n)) else { continue };
            t.created.get_or_insert(now);
            let suspended = job.spec.as_ref().and_then(|s| s.suspend).unwrap_or(false);
            if !suspended && t.admitted.is_none() {
                t.admitted = Some(now);
            }
            if suspended && t.admitted.is_some() && !t.suspended {
                t.evicted += 1;
            }
            t.suspended = suspended;
            let complete = job
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Complete" && c.status == "True"));
            if complete && t.completed.is_none() {
                t.completed = Some(now);
            }
        }
        let mut bound: BTreeMap<&str, Vec<&Pod>> = BTreeMap::new();
        let mut allocated = 0;
        for pod in &pod_list.items {
            let name = pod.metadata.name.clone().unwrap_or_default();
            if pod.metadata.deletion_timestamp.is_some() {
                // The played kubelet: a deleted pod is gone at once.
                let _ = pods.delete(&name, &DeleteParams { grace_period_seconds: Some(0), ..Default::default() }).await;
                continue;
            }
            let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("Pending");
            if api::node_of(pod).is_none() || phase == "Succeeded" || phase == "Failed" {
                continue;
            }
            allocated += GPUS_A_POD;
            let job = pod.metadata.labels.as_ref().and_then(|l| l.get("job")).map(String::as_str).unwrap_or("");
            bound.entry(job).or_default().push(pod);
        }
        allocation.push((now, allocated));
        // What the scheduler says of the pods of Jobs admitted a while ago and not placed.
        for pod in &pod_list.items {
            let job = pod.metadata.labels.as_ref().and_then(|l| l.get("job")).cloned().unwrap_or_default();
            let Some((_, t)) = tracks.get_mut(&job) else { continue };
            if t.placed.is_some() || t.admitted.is_none_or(|at| now - at < WAITED) || api::node_of(pod).is_some() {
                continue;
            }
            let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
            let said =
                conditions.into_iter().flatten().find(|c| c.type_ == "PodScheduled").and_then(|c| c.message.clone());
            if said.is_some() {
                t.why = said;
            }
        }
        for (job, running) in bound {
            let Some((spec, t)) = tracks.get_mut(job) else { continue };
            if t.placed.is_none() && running.len() as u64 == spec.pods {
                t.placed = Some(now);
            }
            if t.placed.is_some_and(|at| now >= at + spec.life) {
                for pod in running {
                    let name = pod.metadata.name.clone().unwrap_or_default();
                    let done = json!({"status": {"phase": "Succeeded",
                        "conditions": [{"type": "Ready", "status": "False"}]}});
                    let _ = pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(&done)).await;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    creator.abort();
    ours.stop(Duration::from_secs(10)).await;
    Ok(Outcome { mode, tracks: tracks.into_values().collect(), allocation, capacity, window: s.window.as_secs_f64() })
}

/// The flavor, the ClusterQueue with all the cluster's GPUs as its quota (and the
/// placement check in `Mode::Check`), and the LocalQueue `lq`.
async fn queues(client: &kube::Client, mode: Mode, gpus: u64) -> Result<()> {
    create(
        client,
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
        "metadata": {"name": "gpu"}, "spec": {}}),
    )
    .await?;
    let mut spec = json!({"namespaceSelector": {},
        "resourceGroups": [{"coveredResources": ["cpu", "memory", GPU], "flavors": [{"name": "gpu",
            "resources": [{"name": "cpu", "nominalQuota": "100000"}, {"name": "memory", "nominalQuota": "100000Gi"},
                          {"name": GPU, "nominalQuota": gpus.to_string()}]}]}]});
    if mode == Mode::Check {
        create(
            client,
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
            "metadata": {"name": "placement"}, "spec": {"controllerName": CONTROLLER}}),
        )
        .await?;
        spec["admissionChecksStrategy"] = json!({"admissionChecks": [{"name": "placement"}]});
    }
    create(
        client,
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": "cq"}, "spec": spec}),
    )
    .await?;
    create(
        client,
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
        "metadata": {"name": "lq", "namespace": NS}, "spec": {"clusterQueue": "cq"}}),
    )
    .await
}

/// Creates an object given as JSON, its kind served or about to be.
async fn create(client: &kube::Client, object: Value) -> Result<()> {
    api::create_object(client, &object).await.with_context(|| format!("creating {}", object["metadata"]["name"]))
}

/// A Job's PodGroup (all its pods in one rack, for custom-scheduler) and the Job itself,
/// suspended with its queue label as Kueue's webhook would leave it; its pod template asks
/// the placement check for one rack.
async fn create_job(client: &kube::Client, spec: &Spec) -> Result<()> {
    create(
        client,
        json!({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": spec.name, "namespace": NS, "annotations": {GROUP_TOPOLOGY: RACK}},
        "spec": {"minMember": spec.pods}}),
    )
    .await?;
    let gpus = GPUS_A_POD.to_string();
    let job = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": spec.name, "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {"suspend": true, "parallelism": spec.pods, "completions": spec.pods,
            "template": {
                "metadata": {"labels": {"job": spec.name, POD_GROUP_LABEL: spec.name},
                             "annotations": {PLACEMENT_TOPOLOGY: RACK}},
                "spec": {"schedulerName": "custom-scheduler", "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "train", "image": "trainer:1",
                        "resources": {"requests": {"cpu": "1", "memory": "1Gi", GPU: gpus}, "limits": {GPU: gpus}}}]}}},
    });
    let job: Job = serde_json::from_value(job)?;
    Api::<Job>::namespaced(client.clone(), NS).create(&PostParams::default(), &job).await?;
    Ok(())
}

const HEADER: &str = "| Kueue admits on | Jobs created | admitted | admitted, then waited > 5 s for placement | longest admitted → placed wait s | GPU·s of quota admitted but unplaced | mean GPU allocation | Jobs completed | created → running p50 / p90 s |\n\
|---|---:|---:|---:|---:|---:|---:|---:|---|\n";

fn row(o: &Outcome) -> String {
    let created = o.tracks.iter().filter(|(_, t)| t.created.is_some()).count();
    let admitted = o.tracks.iter().filter(|(_, t)| t.admitted.is_some()).count();
    // Each admission's wait for its pods to be placed, cut at the window's end.
    let waits: Vec<(u64, f64)> = o
        .tracks
        .iter()
        .filter_map(|(s, t)| Some((s.pods * GPUS_A_POD, t.placed.unwrap_or(o.window) - t.admitted?)))
        .collect();
    let waited = waits.iter().filter(|(_, w)| *w > WAITED).count();
    let longest = waits.iter().map(|(_, w)| *w).fold(0.0, f64::max);
    let held: f64 = waits.iter().map(|(g, w)| *g as f64 * w).sum();
    let completed = o.tracks.iter().filter(|(_, t)| t.completed.is_some()).count();
    let mut starts: Vec<f64> = o.tracks.iter().filter_map(|(_, t)| Some(t.placed? - t.created?)).collect();
    starts.sort_by(f64::total_cmp);
    let q = |p: f64| starts.get(((starts.len() as f64 - 1.0) * p).round() as usize).copied().unwrap_or(f64::NAN);
    let evicted: usize = o.tracks.iter().map(|(_, t)| t.evicted).sum();
    let mean = o.allocation.iter().map(|(_, g)| *g as f64).sum::<f64>() / o.allocation.len().max(1) as f64;
    format!(
        "| {}{} | {created} | {admitted} | {waited} | {longest:.0} | {held:.0} | {:.1}% | {completed} | {:.0} / {:.0} |",
        o.mode.label(),
        if evicted > 0 { format!(" ({evicted} evicted after admission)") } else { String::new() },
        mean / o.capacity as f64 * 100.0,
        q(0.5),
        q(0.9),
    )
}

fn table(outcomes: &[Outcome]) -> String {
    let mut out = String::from(HEADER);
    for o in outcomes {
        out.push_str(&row(o));
        out.push('\n');
    }
    out
}

/// GPU allocation every 30 s of the window, one column a run.
fn curves(outcomes: &[Outcome]) -> String {
    let mut out = String::from("| second |");
    for o in outcomes {
        out.push_str(&format!(" {} |", o.mode.label()));
    }
    out.push_str("\n|---:|");
    out.push_str(&"---:|".repeat(outcomes.len()));
    out.push('\n');
    let window = outcomes.iter().map(|o| o.window).fold(0.0, f64::max);
    let mut at = 30.0;
    while at <= window + 0.5 {
        out.push_str(&format!("| {at:.0} |"));
        for o in outcomes {
            // The mean of the samples of the 30 s ending here.
            let seen: Vec<u64> =
                o.allocation.iter().filter(|(t, _)| *t > at - 30.0 && *t <= at).map(|(_, g)| *g).collect();
            let mean = seen.iter().sum::<u64>() as f64 / seen.len().max(1) as f64;
            out.push_str(&format!(" {:.0}% |", mean / o.capacity as f64 * 100.0));
        }
        out.push('\n');
        at += 30.0;
    }
    out
}
