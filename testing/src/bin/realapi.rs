//! Side-by-side drain of a backlog on a real kube-apiserver: `custom-scheduler run`,
//! kube-scheduler with a profile of the same name, and the null binder (binds with no
//! scheduling) as the ceiling the API server allows. Prints a Markdown table.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::json;
use testing::bind_watch::BindWatch;
use testing::server_load::ServerLoad;
use testing::{Assets, ControlPlane, Process, api, backlog, free_port};

#[path = "realapi/kueue_stream.rs"]
mod kueue_stream;
#[path = "realapi/sustained.rs"]
mod sustained;

const NS: &str = "bench";
const QPS: u32 = 5000;

#[derive(Parser)]
#[command(about = "Drain a backlog on a real kube-apiserver with custom-scheduler, kube-scheduler and a null binder")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Runs every size with every scheduler and prints the table.
    Compare {
        /// The custom-scheduler binary.
        #[arg(long)]
        scheduler: PathBuf,
        /// Backlog sizes as NODESxPODS, comma-separated; `dra:NODESxPODS` is the DRA
        /// backlog (10 devices a node, a claim from a template a pod, with
        /// kube-controller-manager running).
        #[arg(long, default_value = "500x1000,5000x5000,dra:500x2500")]
        sizes: String,
        /// Give up on a run after this many seconds.
        #[arg(long, default_value_t = 600)]
        timeout: u64,
        /// Binds in flight for the null binder, comma-separated: each is run and the
        /// fastest is the ceiling.
        #[arg(long, default_value = "16,64,256")]
        null_concurrency: String,
        /// Copy each run's log (and kube-apiserver's) into this folder.
        #[arg(long)]
        logs: Option<PathBuf>,
        /// Which runs, comma-separated: ours, kube, null.
        #[arg(long, default_value = "ours,kube,null")]
        who: String,
    },
    /// A sustained stream: pods created at `--rate` a second for `--seconds`, each deleted
    /// a short life after it was bound, on `--nodes` half-full nodes; custom-scheduler and
    /// kube-scheduler in turn, each on a fresh control plane. Prints binds/s, create →
    /// bind latency, CPU seconds per 1,000 pods bound and resident memory over time.
    Sustained {
        /// The custom-scheduler binary.
        #[arg(long)]
        scheduler: PathBuf,
        /// Nodes (4 CPUs and 32Gi each, half taken by pods bound before the stream).
        #[arg(long, default_value_t = 1000)]
        nodes: usize,
        /// Pods created per second.
        #[arg(long, default_value_t = 500)]
        rate: u32,
        /// Seconds of creation.
        #[arg(long, default_value_t = 600)]
        seconds: u64,
        /// A pod's life after its bind, as MIN-MAX seconds.
        #[arg(long, default_value = "5-30")]
        life: String,
        /// Latencies of the pods created in the first seconds are left out.
        #[arg(long, default_value_t = 30)]
        warmup: u64,
        /// Seconds between samples of CPU and memory.
        #[arg(long, default_value_t = 10)]
        sample: u64,
        /// Which schedulers, comma-separated: ours, kube.
        #[arg(long, default_value = "ours,kube")]
        who: String,
        /// Copy each run's log into this folder.
        #[arg(long)]
        logs: Option<PathBuf>,
    },
    /// The same stream of rack-constrained GPU Jobs under the real Kueue, with
    /// custom-scheduler's placement admission check and without it, each on a fresh
    /// control plane with kube-controller-manager's Job controller. Prints the table.
    KueueStream {
        /// The custom-scheduler binary.
        #[arg(long)]
        scheduler: PathBuf,
        /// The Kueue manager binary (`.ci/install-tools` builds it; `KUEUE_BIN` names its folder).
        #[arg(long)]
        kueue: PathBuf,
        /// Racks, and nodes a rack.
        #[arg(long, default_value_t = 8)]
        racks: usize,
        #[arg(long, default_value_t = 8)]
        nodes_per_rack: usize,
        /// GPUs a node.
        #[arg(long, default_value_t = 8)]
        gpus: u64,
        /// Jobs, one created every `--interval-ms`.
        #[arg(long, default_value_t = 150)]
        jobs: usize,
        #[arg(long, default_value_t = 1000)]
        interval_ms: u64,
        /// Pods a Job (4 GPUs each), as MIN-MAX.
        #[arg(long, default_value = "2-16")]
        pods: String,
        /// A Job's run time once all its pods are bound, as MIN-MAX seconds.
        #[arg(long, default_value = "20-60")]
        life: String,
        /// Seconds each run is watched from the first Job's creation.
        #[arg(long, default_value_t = 300)]
        window: u64,
        /// Seed of the Jobs' sizes and run times.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Which runs, comma-separated: check, quota.
        #[arg(long, default_value = "check,quota")]
        modes: String,
        /// Copy each run's logs into this folder.
        #[arg(long)]
        logs: Option<PathBuf>,
    },
    /// Binds the pending pods of a namespace round-robin (run as its own process by `compare`).
    NullBinder {
        /// Kubeconfig.
        #[arg(long)]
        kubeconfig: PathBuf,
        /// Namespace of the pods.
        #[arg(long)]
        namespace: String,
        /// Binds in flight at most.
        #[arg(long, default_value_t = 64)]
        concurrency: usize,
        /// The DRA backlog: write each pod's claim allocation before binding it.
        #[arg(long)]
        dra: bool,
    },
}

#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Who {
    Ours,
    Kube,
    /// With this many binds in flight.
    Null(usize),
}

impl Who {
    fn label(self) -> String {
        match self {
            Who::Ours => "custom-scheduler".into(),
            Who::Kube => "kube-scheduler v1.36.2".into(),
            Who::Null(c) => format!("null binder, {c} in flight (ceiling)"),
        }
    }

    fn is_null(self) -> bool {
        matches!(self, Who::Null(_))
    }
}

struct Row {
    dra: bool,
    nodes: usize,
    pods: usize,
    who: Who,
    first: f64,
    last: f64,
    rate: f64,
    bound: usize,
    bad: Option<usize>,
    /// CPU seconds the process used from its start to the last bind (user + system).
    cpu: Option<f64>,
}

/// User plus system CPU seconds of a live process, from `/proc/PID/stat` (kernel
/// clock ticks of 1/100 s).
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces): state is the first, then
    // utime and stime are the 12th and 13th.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    match cli.command {
        Cmd::NullBinder { kubeconfig, namespace, concurrency, dra } => rt.block_on(async {
            let kc = kube::config::Kubeconfig::read_from(&kubeconfig)?;
            let config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
            let client = kube::Client::try_from(config)?;
            let n = if dra {
                testing::dra_backlog::null_bind(client, &namespace, QPS, concurrency).await?
            } else {
                testing::null_binder::run(client, &namespace, QPS, concurrency).await?
            };
            eprintln!("null binder: {n} pods bound");
            Ok(())
        }),
        Cmd::Sustained { scheduler, nodes, rate, seconds, life, warmup, sample, who, logs } => {
            let (lo, hi) = life.split_once('-').context("--life is MIN-MAX")?;
            let stream = testing::sustained::Stream {
                namespace: NS.into(),
                scheduler: "custom-scheduler".into(),
                rate,
                duration: Duration::from_secs(seconds),
                life: (lo.trim().parse()?, hi.trim().parse()?),
                warmup: Duration::from_secs(warmup),
                sample: Duration::from_secs(sample),
            };
            let whos = runs(&who, None)?;
            rt.block_on(sustained::compare(&scheduler, nodes, &stream, &whos, logs))
        }
        Cmd::KueueStream {
            scheduler,
            kueue,
            racks,
            nodes_per_rack,
            gpus,
            jobs,
            interval_ms,
            pods,
            life,
            window,
            seed,
            modes,
            logs,
        } => {
            let range = |s: &str, what: &str| -> Result<(u64, u64)> {
                let (lo, hi) = s.split_once('-').with_context(|| format!("{what} is MIN-MAX"))?;
                Ok((lo.trim().parse()?, hi.trim().parse()?))
            };
            let stream = kueue_stream::Stream {
                racks,
                nodes_per_rack,
                gpus_per_node: gpus,
                jobs,
                interval: Duration::from_millis(interval_ms),
                pods: range(&pods, "--pods")?,
                life: range(&life, "--life")?,
                window: Duration::from_secs(window),
                seed,
            };
            let modes = modes
                .split(',')
                .map(|m| match m.trim() {
                    "check" => Ok(kueue_stream::Mode::Check),
                    "quota" => Ok(kueue_stream::Mode::Quota),
                    other => bail!("unknown mode {other:?} (check, quota)"),
                })
                .collect::<Result<Vec<_>>>()?;
            rt.block_on(kueue_stream::compare(&scheduler, &kueue, &stream, &modes, logs))
        }
        Cmd::Compare { scheduler, sizes, timeout, null_concurrency, logs, who } => {
            let nulls = null_concurrency.split(',').map(|c| c.trim().parse()).collect::<Result<Vec<usize>, _>>()?;
            let runs = runs(&who, Some(&nulls))?;
            rt.block_on(compare(scheduler, &sizes, Duration::from_secs(timeout), &runs, logs))
        }
    }
}

/// The runs `--who` names, in its order: `ours`, `kube`, and (where null binders are
/// run) `null`, once per null binder concurrency. An unknown name is an error.
fn runs(who: &str, nulls: Option<&[usize]>) -> Result<Vec<Who>> {
    let mut out = Vec::new();
    for name in who.split(',').map(str::trim) {
        match (name, nulls) {
            ("ours", _) => out.push(Who::Ours),
            ("kube", _) => out.push(Who::Kube),
            ("null", Some(nulls)) => out.extend(nulls.iter().map(|&c| Who::Null(c))),
            (other, Some(_)) => bail!("unknown run {other:?}: ours, kube or null"),
            (other, None) => bail!("unknown scheduler {other:?}: ours or kube"),
        }
    }
    Ok(out)
}

async fn compare(
    scheduler: PathBuf,
    sizes: &str,
    timeout: Duration,
    runs: &[Who],
    logs: Option<PathBuf>,
) -> Result<()> {
    let assets =
        Assets::from_env()?.context("set KUBE_ASSETS to a folder with etcd, kube-apiserver and kube-scheduler")?;
    let mut rows = Vec::new();
    for size in sizes.split(',') {
        let (dra, size) = match size.trim().strip_prefix("dra:") {
            Some(rest) => (true, rest),
            None => (false, size),
        };
        let (n, m) = size.split_once('x').context("sizes are NODESxPODS")?;
        let (n, m): (usize, usize) = (n.trim().parse()?, m.trim().parse()?);
        let plane = ControlPlane::start(&assets).await?;
        let client = plane.client().await?;
        // The resourceclaim controller makes the pods' claims; the garbage collector removes
        // them. Its client may write fast: claim creation is setup, not measured. Without
        // kubelets the node-lifecycle controller would taint every node unreachable 50 s in.
        let qps = ["--kube-api-qps=1000", "--kube-api-burst=2000", "--controllers=*,-node-lifecycle-controller"];
        let _controllers =
            if dra { Some(testing::start_controller_manager(&plane, "kube-controller-manager", &qps)?) } else { None };
        api::create_namespace(&client, NS).await?;
        let t = Instant::now();
        let nodes = backlog::nodes(n);
        api::create_nodes(&client, &nodes, 64).await?;
        if dra {
            let names: Vec<String> = nodes.iter().filter_map(|n| n.metadata.name.clone()).collect();
            testing::dra_backlog::setup(&client, NS, &names).await?;
        }
        eprintln!("{n} nodes created in {:.1}s", t.elapsed().as_secs_f64());
        let mut ceiling: Option<Row> = None;
        for &who in runs {
            let row = drain(&plane, &client, &scheduler, who, (dra, n, m), timeout).await?;
            if let Some(dir) = &logs {
                std::fs::create_dir_all(dir)?;
                let name = match who {
                    Who::Ours => "custom-scheduler",
                    Who::Kube => "kube-scheduler",
                    Who::Null(_) => "null-binder",
                };
                let from = plane.dir().join(format!("{name}.log"));
                let prefix = if dra { "dra-" } else { "" };
                let label = who.label().replace([' ', ','], "-");
                let _ = std::fs::copy(&from, dir.join(format!("{prefix}{n}x{m}-{label}.log")));
            }
            eprintln!(
                "{n} nodes / {m} pods, {}: first bind {:.2}s, last {:.2}s, {:.0} pods/s, {} bound, bad {:?}",
                who.label(),
                row.first,
                row.last,
                row.rate,
                row.bound,
                row.bad
            );
            if who.is_null() {
                if ceiling.as_ref().is_none_or(|c| row.last < c.last) {
                    ceiling = Some(row);
                }
            } else {
                rows.push(row);
            }
        }
        rows.extend(ceiling);
        if let Some(dir) = &logs {
            let _ = std::fs::copy(plane.apiserver_log(), dir.join(format!("{n}x{m}-kube-apiserver.log")));
        }
    }
    println!("{}", table(&rows));
    Ok(())
}

pub(crate) fn start(plane: &ControlPlane, scheduler: &PathBuf, who: Who, dra: bool) -> Result<Process> {
    let config = json!({
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"qps": QPS, "burst": QPS},
        "profiles": [{"schedulerName": "custom-scheduler"}],
    });
    let dir = plane.dir();
    Ok(match who {
        Who::Ours => {
            let path = dir.join("custom-scheduler.json");
            std::fs::write(&path, config.to_string())?;
            let listen = SocketAddr::from(([127, 0, 0, 1], free_port()?));
            let mut cmd = Command::new(scheduler);
            cmd.arg("run").arg("--kubeconfig").arg(plane.kubeconfig()).arg("--config").arg(&path);
            cmd.arg("--listen").arg(listen.to_string());
            Process::spawn("custom-scheduler", cmd, &dir.join("custom-scheduler.log"))?
        }
        Who::Kube => testing::start_kube_scheduler_with(plane, "kube-scheduler", config, &[])?,
        Who::Null(concurrency) => {
            let mut cmd = Command::new(std::env::current_exe()?);
            cmd.arg("null-binder").arg("--kubeconfig").arg(plane.kubeconfig()).args(["--namespace", NS]);
            cmd.arg("--concurrency").arg(concurrency.to_string());
            if dra {
                cmd.arg("--dra");
            }
            Process::spawn("null-binder", cmd, &dir.join("null-binder.log"))?
        }
    })
}

async fn drain(
    plane: &ControlPlane,
    client: &kube::Client,
    scheduler: &PathBuf,
    who: Who,
    (dra, n, m): (bool, usize, usize),
    timeout: Duration,
) -> Result<Row> {
    if dra {
        api::create_pods(client, &testing::dra_backlog::pods(m, NS, "custom-scheduler"), 64).await?;
        if !testing::dra_backlog::wait_claims(client, NS, m, timeout).await? {
            bail!("the resourceclaim controller did not create {m} claims in {timeout:?}");
        }
    } else {
        api::create_pods(client, &backlog::pods(m, NS, "custom-scheduler"), 64).await?;
    }
    let watch = BindWatch::start(client, NS).await?;
    let before = ServerLoad::scrape(client).await.ok();
    let started = Instant::now();
    let mut process = start(plane, scheduler, who, dra)?;
    while watch.count() < m && started.elapsed() < timeout {
        if !who.is_null() && process.poll().is_some() {
            bail!("{} exited early:\n{}", who.label(), process.log_tail(20));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cpu = cpu_seconds(process.pid());
    if let (Some(before), Ok(after)) = (&before, ServerLoad::scrape(client).await) {
        eprintln!("{}: {}", who.label(), after.since(before).summary(m));
    }
    process.stop(Duration::from_secs(10)).await;
    let (first, last) = watch.first_and_last().context("nothing was bound")?;
    let bound = watch.count();
    let pods = api::pods(client, NS).await?;
    let bad = match who {
        Who::Null(_) => None,
        _ if dra => Some(
            testing::check::placement_errors(&api::nodes(client).await?, &pods).len()
                + testing::dra_backlog::placement_errors(client, NS).await?,
        ),
        _ => Some(testing::check::placement_errors(&api::nodes(client).await?, &pods).len()),
    };
    let span = last.duration_since(first).as_secs_f64();
    let row = Row {
        dra,
        nodes: n,
        pods: m,
        who,
        first: first.duration_since(started).as_secs_f64(),
        last: last.duration_since(started).as_secs_f64(),
        rate: if span > 0.0 { (bound.saturating_sub(1)) as f64 / span } else { 0.0 },
        bound,
        bad,
        cpu,
    };
    let api: Api<Pod> = Api::namespaced(client.clone(), NS);
    api.delete_collection(
        &DeleteParams { grace_period_seconds: Some(0), ..Default::default() },
        &ListParams::default(),
    )
    .await?;
    while !api::pods(client, NS).await?.is_empty() {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    if dra && !testing::dra_backlog::wait_no_claims(client, NS, timeout).await? {
        bail!("the claims of deleted pods were not removed in {timeout:?}");
    }
    Ok(row)
}

fn table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| backlog | scheduler | start → first bind s | start → last bind s | pods/s first → last | bound | bad placements | vs kube-scheduler | share of ceiling | CPU s |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        let same = |f: fn(Who) -> bool| {
            rows.iter().find(|x| f(x.who) && x.dra == r.dra && x.nodes == r.nodes && x.pods == r.pods)
        };
        let speedup = match (r.who, same(|w| w == Who::Kube)) {
            (Who::Ours, Some(k)) if r.last > 0.0 => format!("{:.1}x faster", k.last / r.last),
            _ => String::new(),
        };
        let share = match (r.who, same(Who::is_null)) {
            (Who::Ours | Who::Kube, Some(c)) if r.last > 0.0 => format!("{:.0}%", 100.0 * c.last / r.last),
            _ => String::new(),
        };
        out.push_str(&format!(
            "| {}{} nodes / {} pods | {} | {:.2} | {:.2} | {:.0} | {} | {} | {} | {} | {} |\n",
            if r.dra { "DRA: " } else { "" },
            r.nodes,
            r.pods,
            r.who.label(),
            r.first,
            r.last,
            r.rate,
            r.bound,
            r.bad.map(|b| b.to_string()).unwrap_or_else(|| "n/a".into()),
            speedup,
            share,
            r.cpu.map(|c| format!("{c:.2}")).unwrap_or_default()
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn who_names_the_runs_in_order_and_rejects_unknown_names() {
        let got = runs("null, ours", Some(&[64, 256])).unwrap();
        assert!(got == [Who::Null(64), Who::Null(256), Who::Ours]);
        assert!(runs("ours,nul", Some(&[64])).is_err(), "a misspelt run is not silently left out");
        assert!(runs("kube", None).unwrap() == [Who::Kube]);
        assert!(runs("null", None).is_err(), "the sustained stream runs no null binder");
    }
}
