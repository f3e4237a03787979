//! The `custom-scheduler` command line.
//!
//! One file though long: the command-line definitions and, for each command, the short
//! glue from its flags to the library (the work itself is in the library's modules).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use algorithms::features::FeatureGates;
use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand, ValueEnum};
use scheduler::cluster::{self, ClusterObjects};
use scheduler::{config_file, explain, simulate};

/// The allocator: many small short-lived allocations (watch events, requests, per-cycle
/// scratch) across threads, where the system one spends a large share of the CPU. It asks
/// for no transparent huge pages: memory it returns and takes again would be zeroed 2 MiB
/// at a time (a seventh of the process's CPU in a real-API DRA backlog).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A fast Kubernetes scheduler with kube-scheduler's semantics.
#[derive(Parser, Debug)]
#[command(name = "custom-scheduler", version, about)]
struct Cli {
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// kube-scheduler feature gates, e.g. StorageCapacityScoring=true.
    #[arg(long, global = true)]
    feature_gates: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Output {
    Text,
    Table,
    Json,
}

/// The secure port's flags, shared by `run` and `extender`.
#[derive(clap::Args, Debug)]
struct SecurePort {
    /// HTTPS address for /healthz, /livez, /readyz and /metrics (kube-scheduler's secure
    /// port), /metrics only for bearer tokens the API server authenticates and allows to
    /// get it. run: 0.0.0.0:10259 unless only --listen is given. extender: off unless
    /// given; it needs cluster access, and /metrics then leaves the verbs port.
    #[arg(long)]
    secure_listen: Option<std::net::SocketAddr>,
    /// Certificate (PEM) of the secure port; a self-signed one is made without it.
    #[arg(long, requires = "tls_private_key_file")]
    tls_cert_file: Option<PathBuf>,
    /// Private key (PEM) of --tls-cert-file.
    #[arg(long, requires = "tls_cert_file")]
    tls_private_key_file: Option<PathBuf>,
}

impl SecurePort {
    /// The secure port at `listen`, with the certificate given.
    fn serving(self, listen: std::net::SocketAddr) -> scheduler::run::secure::SecureServing {
        scheduler::run::secure::SecureServing {
            listen,
            cert_and_key: self.tls_cert_file.zip(self.tls_private_key_file),
        }
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the scheduler against a Kubernetes API server.
    Run {
        /// Kubeconfig file (default: KUBECONFIG, ~/.kube/config, or in-cluster).
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// A KubeSchedulerConfiguration file.
        #[arg(long)]
        config: Option<PathBuf>,
        #[command(flatten)]
        secure: SecurePort,
        /// A plain-HTTP address on loopback for /healthz, /livez, /readyz and /metrics, with
        /// no authentication. Given alone, no secure port is served.
        #[arg(long)]
        listen: Option<std::net::SocketAddr>,
        /// Elect a leader among replicas through a Lease (overrides the configuration).
        #[arg(long)]
        leader_elect: Option<bool>,
        /// Binding requests in flight at most.
        #[arg(long, default_value_t = 256)]
        bind_concurrency: usize,
        /// This replica's identity (default: the pod or host name).
        #[arg(long)]
        identity: Option<String>,
        /// Interval of the summary line in the logs (e.g. 30s, 1m).
        #[arg(long, default_value = "30s", value_parser = parse_interval)]
        summary_interval: std::time::Duration,
    },
    /// Serve kube-scheduler's extender protocol over HTTP.
    Extender {
        /// Listen address.
        #[arg(long, default_value = "0.0.0.0:8888")]
        listen: std::net::SocketAddr,
        /// Kubeconfig for cluster access (enables NodeNames, bind, and counting running pods).
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// Use the in-cluster service account for cluster access.
        #[arg(long)]
        in_cluster: bool,
        /// A KubeSchedulerConfiguration (profile plugins; `extenders[].managedResources`).
        #[arg(long)]
        config: Option<PathBuf>,
        /// An extended resource this extender manages (repeatable), e.g. nvidia.com/gpu.
        #[arg(long = "managed-resource")]
        managed_resources: Vec<String>,
        /// TLS certificate (PEM); serve HTTPS with --tls-key.
        #[arg(long, requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// TLS private key (PEM).
        #[arg(long, requires = "tls_cert")]
        tls_key: Option<PathBuf>,
        #[command(flatten)]
        secure: SecurePort,
        /// Largest accepted request body in bytes.
        #[arg(long, default_value_t = extender::DEFAULT_BODY_LIMIT)]
        max_body_bytes: usize,
        /// A connection must send a request's headers within this time, else it is closed.
        #[arg(long, default_value = "10s", value_parser = parse_interval)]
        header_timeout: std::time::Duration,
        /// A request's body must arrive and be answered within this time, else 408.
        #[arg(long, default_value = "60s", value_parser = parse_interval)]
        request_timeout: std::time::Duration,
        /// Connections held open at once; further clients wait to be accepted.
        #[arg(long, default_value_t = scheduler::listener::DEFAULT_MAX_CONNECTIONS)]
        max_connections: usize,
        /// Nodes one filter or prioritize request may carry; more get 400.
        #[arg(long, default_value_t = extender::DEFAULT_MAX_NODES)]
        max_nodes: usize,
    },
    /// Schedule every pending pod of a snapshot (or the built-in demo) in memory.
    Simulate {
        /// A `kubectl get … -A -o yaml|json` dump: nodes, pods and namespaces, with what the
        /// README's dump commands add (PodDisruptionBudgets, volumes, DRA objects, PodGroups,
        /// ElasticQuotas); the demo cluster when absent.
        #[arg(long, conflicts_with = "workload")]
        cluster: Option<PathBuf>,
        #[arg(long, help = workloads_help())]
        workload: Option<String>,
        /// Nodes of the workload (default: the workload's own).
        #[arg(long, requires = "workload")]
        nodes: Option<usize>,
        /// Measured pods of the workload (default: the workload's own).
        #[arg(long, requires = "workload")]
        pods: Option<usize>,
        /// A KubeSchedulerConfiguration file.
        #[arg(long)]
        config: Option<PathBuf>,
        /// `text` (the default; `table` is the same) or `json`.
        #[arg(long, value_enum, default_value_t = Output::Text)]
        output: Output,
        /// Write the resulting cluster (pods with their nodes) to this file (.json, or YAML
        /// otherwise); for a `--cluster` dump or the demo, not a generated workload.
        #[arg(long, conflicts_with = "workload")]
        write: Option<PathBuf>,
        /// Seed for tie-breaking between equal scores.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Recompute every node for every pod instead of reusing results across identical pods.
        #[arg(long)]
        no_equivalence_cache: bool,
        /// Churn steps per second during the measured phase (a node updated, a bound pod
        /// deleted, a pod created); default: the workload's own (SchedulingChurn: 20).
        #[arg(long, requires = "workload")]
        churn_per_second: Option<f64>,
        /// Also write a self-contained HTML report (utilization heatmaps, pending pods by
        /// reason, placements, the run's figures and configuration) to this file.
        #[arg(long)]
        report: Option<PathBuf>,
        /// List every unschedulable pod with its message in the text output, rather than
        /// the pods grouped by reason.
        #[arg(long)]
        list_pending: bool,
    },
    /// Explain why a pod fits or does not fit each node.
    Explain {
        /// A cluster dump.
        #[arg(long)]
        cluster: PathBuf,
        /// A pod manifest, or `namespace/name` of a pending pod in the dump.
        #[arg(long)]
        pod: String,
        /// A KubeSchedulerConfiguration file.
        #[arg(long)]
        config: Option<PathBuf>,
        /// `table` (the default; `text` is the same) or `json`.
        #[arg(long, value_enum, default_value_t = Output::Table)]
        output: Output,
        /// Seed for tie-breaking between equal scores.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Also write a self-contained HTML report of every node's verdict and scores.
        #[arg(long)]
        report: Option<PathBuf>,
    },
}

/// Logs go to stderr; `RUST_LOG` overrides the level. The servers (`run`, `extender`)
/// log start-up, cache sync, leadership and a periodic summary at `info`, as
/// kube-scheduler does at its default verbosity; `simulate` and `explain` only warn.
/// Colours only on a terminal.
fn init_logging(format: LogFormat, server: bool) {
    // kube's client logs every request that fails to connect at error level; the watches
    // and writers say it once, with the server and the cause.
    // It also warns at every TLS connection to a server it does not verify; `make_client`
    // says that once.
    let default = if server { "info,kube_client::client::builder=off,kube_client::client::tls=error" } else { "warn" };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Colour only for a terminal: a log file or a collector gets plain text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

fn main() {
    let cli = Cli::parse();
    init_logging(cli.log_format, matches!(cli.command, Command::Run { .. } | Command::Extender { .. }));
    let gates = match algorithms::features::FeatureGates::parse(cli.feature_gates.as_deref().unwrap_or_default()) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("error: --feature-gates: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = dispatch(cli.command, gates) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

/// Every workload `simulate --workload` generates, from the one list of them.
fn workload_names() -> Vec<&'static str> {
    let generated = scheduler::synthetic::workloads::WORKLOADS.iter().map(|w| w.0);
    generated.chain([scheduler::synthetic::multitenant::NAME]).collect()
}

/// `--workload`'s help: the workloads by name.
fn workloads_help() -> String {
    format!("A generated scheduler_perf-style workload: {}", workload_names().join(", "))
}

/// Writes a command's output to stdout. A reader that went away (`| head -1`) ends the
/// process quietly, as Unix tools end; any other failure is an error.
fn out(text: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: writing the output: {e}");
        std::process::exit(1);
    }
}

fn parse_interval(s: &str) -> Result<std::time::Duration, String> {
    scheduler::run::parse_duration(s).ok_or_else(|| format!("{s:?} is not a duration such as 30s or 1m"))
}

fn identity(explicit: Option<String>) -> String {
    explicit
        .or_else(|| std::env::var("POD_NAME").ok())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| format!("custom-scheduler-{}", std::process::id()))
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().context("failed to start the async runtime")
}

fn dispatch(cmd: Command, gates: FeatureGates) -> Result<()> {
    match cmd {
        Command::Run {
            kubeconfig,
            config,
            secure,
            listen,
            leader_elect,
            bind_concurrency,
            identity: id,
            summary_interval,
        } => {
            let secure_listen = match (secure.secure_listen, listen) {
                (Some(addr), _) => Some(addr),
                (None, None) => Some(std::net::SocketAddr::from(([0, 0, 0, 0], 10259))),
                (None, Some(_)) => None,
            };
            let opts = scheduler::run::RunOptions {
                kubeconfig,
                config,
                listen,
                secure: secure_listen.map(|l| secure.serving(l)),
                leader_elect,
                bind_concurrency,
                identity: identity(id),
                seed: rand_seed(),
                summary_interval,
                feature_gates: gates,
            };
            runtime()?.block_on(scheduler::run::run(opts, shutdown_signal()))?;
            Ok(())
        }
        Command::Extender {
            listen,
            kubeconfig,
            in_cluster,
            config,
            managed_resources,
            tls_cert,
            tls_key,
            secure,
            max_body_bytes,
            header_timeout,
            request_timeout,
            max_connections,
            max_nodes,
        } => {
            let opts = scheduler::extender_mode::ExtenderOptions {
                listen,
                kubeconfig,
                in_cluster,
                config,
                managed_resources,
                tls: tls_cert.zip(tls_key),
                secure: secure.secure_listen.map(|l| secure.serving(l)),
                max_body_bytes,
                header_timeout,
                request_timeout,
                max_connections,
                max_nodes,
                feature_gates: gates,
            };
            runtime()?.block_on(scheduler::extender_mode::serve(opts, shutdown_signal()))?;
            Ok(())
        }
        Command::Simulate {
            cluster,
            workload,
            nodes,
            pods,
            config,
            output,
            write,
            seed,
            no_equivalence_cache,
            churn_per_second,
            report,
            list_pending,
        } => {
            let sim =
                SimFlags { output, seed, no_equivalence_cache, report, config: config.clone(), gates, list_pending };
            match workload {
                Some(name) => {
                    let churn = churn_per_second.or_else(|| scheduler::synthetic::workloads::churn_rate(&name));
                    run_workload(&name, (nodes, pods), churn, &sim)
                }
                None => run_simulate(cluster.as_deref(), write.as_deref(), &sim),
            }
        }
        Command::Explain { cluster, pod, config, output, seed, report } => {
            run_explain(&cluster, &pod, (config.as_deref(), gates), output, seed, report.as_deref())
        }
    }
}

fn rand_seed() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

fn demo_objects(seed: u64) -> ClusterObjects {
    let g = scheduler::synthetic::demo::demo_cluster(seed);
    ClusterObjects {
        nodes: g.nodes,
        pods: g.pods,
        namespaces: g.namespaces,
        workloads: Default::default(),
        budgets: Default::default(),
        pod_groups: Default::default(),
        kube_pod_groups: Default::default(),
        owned: Default::default(),
    }
}

/// Profiles for `simulate` and `explain`, which judge without the configured extenders
/// (only `run` calls them): says so when there are some.
fn offline_profiles(config: Option<&Path>, gates: FeatureGates) -> Result<Vec<algorithms::Profile>> {
    let (cfg, profiles) = config_file::profiles(config, gates)?;
    if !cfg.extenders.is_empty() {
        eprintln!(
            "warning: {} extender(s) configured: only `run` calls extenders; this answer leaves them out",
            cfg.extenders.len()
        );
    }
    Ok(profiles)
}

fn run_simulate(cluster: Option<&Path>, write: Option<&Path>, sim: &SimFlags) -> Result<()> {
    let (output, seed) = (sim.output, sim.seed);
    let profiles = offline_profiles(sim.config.as_deref(), sim.gates)?;
    let (objects, source) = match cluster {
        Some(p) => (cluster::load_file(p)?, p.display().to_string()),
        None => (demo_objects(seed), "built-in demo cluster".to_string()),
    };
    let parsed = cluster::parse_cluster(&objects, &source)?;
    if parsed.nodes.is_empty() {
        eprintln!("warning: {source} has no nodes: every pod will be unschedulable");
    }
    let report = simulate::run(profiles, parsed, &sim.options());
    if let Some(path) = write {
        write_cluster(path, &objects, &report.placements)?;
    }
    sim.write_report(&source, &report)?;
    match output {
        Output::Json => out(&format!("{}\n", serde_json::to_string_pretty(&report)?)),
        _ => {
            out(&format!("Simulated {source}.\n{}", simulate::render(&report, sim.list_pending)));
        }
    }
    Ok(())
}

/// Flags shared by the simulate variants.
struct SimFlags {
    output: Output,
    seed: u64,
    no_equivalence_cache: bool,
    report: Option<PathBuf>,
    config: Option<PathBuf>,
    gates: FeatureGates,
    /// Every unschedulable pod in the text output, not the pods grouped by reason.
    list_pending: bool,
}

impl SimFlags {
    fn options(&self) -> simulate::SimulateOptions {
        simulate::SimulateOptions {
            seed: self.seed,
            progress: self.output != Output::Json && std::io::stderr().is_terminal(),
            no_equivalence_cache: self.no_equivalence_cache,
            detail: self.report.is_some(),
        }
    }

    /// Writes the HTML report when `--report` asked for one.
    fn write_report(&self, source: &str, report: &simulate::SimulationReport) -> Result<()> {
        let Some(path) = &self.report else { return Ok(()) };
        let run = scheduler::report::RunSource {
            cluster: source.to_string(),
            config: self.config.as_ref().map(|p| p.display().to_string()),
            seed: self.seed,
        };
        let html = scheduler::report::simulate_html(&run, report);
        std::fs::write(path, html).with_context(|| format!("failed to write the report {}", path.display()))?;
        eprintln!("Report written to {}.", path.display());
        Ok(())
    }
}

fn run_workload(
    name: &str,
    (nodes, pods): (Option<usize>, Option<usize>),
    churn_per_second: Option<f64>,
    sim: &SimFlags,
) -> Result<()> {
    if name.eq_ignore_ascii_case(scheduler::synthetic::multitenant::NAME) {
        let (w, timeline) = scheduler::synthetic::multitenant::generate(nodes, sim.seed);
        return simulate_generated(w, Vec::new(), Vec::new(), simulate::Stream::Timeline(timeline), sim);
    }
    // A bad configuration is told before a long generation.
    offline_profiles(sim.config.as_deref(), sim.gates)?;
    // Pods are parsed as they are generated, so large workloads never hold every API object.
    let mut init: Vec<algorithms::PodInfo> = Vec::new();
    let mut measured: Vec<algorithms::PodInfo> = Vec::new();
    let mut bad: Option<algorithms::pod_info::PodError> = None;
    let mut keep =
        |list: &mut Vec<algorithms::PodInfo>, p: k8s_openapi::api::core::v1::Pod| match algorithms::PodInfo::from_pod(
            &p,
        ) {
            Ok(info) => list.push(info),
            Err(e) => bad = Some(e),
        };
    let mut init_sink = Vec::new();
    let generated =
        scheduler::synthetic::workloads::generate(name, nodes, pods, |p| init_sink.push(p), |p| keep(&mut measured, p));
    let Some(w) = generated else {
        bail!("unknown workload {name:?}; known: {}", workload_names().join(", "));
    };
    for p in init_sink {
        keep(&mut init, p);
    }
    if let Some(e) = bad {
        bail!("failed to read a generated pod: {e}");
    }
    let init_count = init.len();
    let node_count = w.cluster.nodes.len();
    let churn = churn_per_second.filter(|r| *r > 0.0).map(|per_second| simulate::Churn {
        per_second,
        step: Box::new(move |k| {
            let step = scheduler::synthetic::workloads::churn_step(node_count, init_count, k);
            Some(simulate::ChurnStep {
                node: algorithms::NodeInfo::from_node(&step.node).ok(),
                leaving: step.leaving,
                arriving: algorithms::PodInfo::from_pod(&step.arriving).ok(),
            })
        }),
    });
    let stream = match (churn, scheduler::synthetic::workloads::steady_in_flight(&w.name)) {
        (Some(c), _) => simulate::Stream::Churn(c),
        (None, Some(in_flight)) => simulate::Stream::Steady { in_flight },
        (None, None) => simulate::Stream::Backlog,
    };
    simulate_generated(w, init, measured, stream, sim)
}

/// Simulates a generated workload: its cluster, its initial pods first, then its
/// measured pods as `stream` brings them.
fn simulate_generated(
    mut w: scheduler::synthetic::workloads::Workload,
    init: Vec<algorithms::PodInfo>,
    measured: Vec<algorithms::PodInfo>,
    stream: simulate::Stream,
    sim: &SimFlags,
) -> Result<()> {
    let output = sim.output;
    let profiles = offline_profiles(sim.config.as_deref(), sim.gates)?;
    let pod_groups = w.pod_group_specs();
    let owned = w.take_owned();
    let objects = ClusterObjects {
        nodes: w.cluster.nodes,
        pods: Vec::new(),
        namespaces: w.cluster.namespaces,
        workloads: Default::default(),
        budgets: Default::default(),
        pod_groups,
        kube_pod_groups: Vec::new(),
        owned,
    };
    let source = format!("workload {}", w.name);
    let mut parsed = cluster::parse_cluster(&objects, &source)?;
    parsed.pending = measured;
    let init_count = init.len();
    drop(objects);
    let report = simulate::run_streamed(profiles, parsed, init, &sim.options(), stream);
    sim.write_report(&source, &report)?;
    match output {
        Output::Json => out(&format!("{}\n", serde_json::to_string_pretty(&report)?)),
        _ => {
            out(&format!(
                "Simulated {source} ({init_count} initial pods scheduled first, not measured).\n{}",
                simulate::render(&report, sim.list_pending)
            ));
        }
    }
    Ok(())
}

fn write_cluster(
    path: &Path,
    objects: &ClusterObjects,
    placements: &std::collections::BTreeMap<String, String>,
) -> Result<()> {
    let mut items: Vec<serde_json::Value> = Vec::new();
    for ns in &objects.namespaces {
        let mut v = serde_json::to_value(ns)?;
        v["apiVersion"] = "v1".into();
        v["kind"] = "Namespace".into();
        items.push(v);
    }
    for n in &objects.nodes {
        let mut v = serde_json::to_value(n)?;
        v["apiVersion"] = "v1".into();
        v["kind"] = "Node".into();
        items.push(v);
    }
    for p in &objects.pods {
        let mut pod = p.clone();
        let key = format!(
            "{}/{}",
            pod.metadata.namespace.as_deref().unwrap_or("default"),
            pod.metadata.name.as_deref().unwrap_or("")
        );
        if let (Some(node), Some(spec)) = (placements.get(&key), pod.spec.as_mut()) {
            spec.node_name = Some(node.clone());
        }
        let mut v = serde_json::to_value(&pod)?;
        v["apiVersion"] = "v1".into();
        v["kind"] = "Pod".into();
        items.push(v);
    }
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    let text = if path.extension().is_some_and(|e| e == "json") {
        serde_json::to_string_pretty(&list)?
    } else {
        serde_yaml::to_string(&list)?
    };
    std::fs::write(path, text).with_context(|| format!("failed to write {}", path.display()))
}

fn load_pod(spec: &str, parsed: &cluster::ParsedCluster) -> Result<algorithms::PodInfo> {
    let path = Path::new(spec);
    if path.exists() {
        let objects = cluster::load_file(path)?;
        let Some(pod) = objects.pods.first() else { bail!("{spec} holds no Pod object") };
        return algorithms::PodInfo::from_pod(pod).with_context(|| format!("failed to read the pod in {spec}"));
    }
    let key = if spec.contains('/') { spec.to_string() } else { format!("default/{spec}") };
    parsed
        .pending
        .iter()
        .chain(parsed.bound.iter())
        .find(|p| p.key() == key)
        .cloned()
        .with_context(|| format!("{spec} is neither a pod manifest file nor a pod in the cluster dump"))
}

fn run_explain(
    cluster_path: &Path,
    pod: &str,
    (config, gates): (Option<&Path>, FeatureGates),
    output: Output,
    seed: u64,
    report_path: Option<&Path>,
) -> Result<()> {
    let profiles = offline_profiles(config, gates)?;
    let objects = cluster::load_file(cluster_path)?;
    let mut parsed = cluster::parse_cluster(&objects, &cluster_path.display().to_string())?;
    let mut pod = load_pod(pod, &parsed)?;
    // Explaining a pod that is already bound asks where it would go now: leave it out.
    let key = pod.key();
    let before = parsed.bound.len();
    parsed.bound.retain(|p| p.key() != key);
    let bound_to = pod.node_name.take().filter(|_| parsed.bound.len() != before);
    let profile = match profiles.iter().find(|p| p.scheduler_name == pod.scheduler_name) {
        Some(p) => p,
        None => {
            let p = &profiles[0];
            tracing::warn!(pod = %key, scheduler = %pod.scheduler_name, profile = %p.scheduler_name, "the pod names another scheduler; explaining with this profile");
            p
        }
    };
    let mut snapshot = parsed.snapshot();
    if profile.filters.iter().any(|f| f.counts_waiting_pods()) {
        // The dump's pending pods wait, with the pod explained (quota trees divide by demand).
        let mut objects = (*snapshot.objects).clone();
        let waiting: Vec<&algorithms::PodInfo> =
            parsed.pending.iter().filter(|p| p.key() != key).chain(std::iter::once(&pod)).collect();
        for owner in algorithms::plugins::registry::OWNERS {
            owner.waiting(&mut objects, &mut waiting.iter().copied());
        }
        snapshot.objects = std::sync::Arc::new(objects);
    }
    let mut report = explain::explain(profile, &pod, &snapshot, seed);
    if let Some(node) = bound_to {
        report.notes.insert(0, format!("{key} is bound to {node}: judged as if it were pending, without itself there"));
    }
    report
        .notes
        .push("The pod is judged alone on the cluster as dumped: other pending pods are not placed first".to_string());
    if scheduler::gang::group_of(&pod).is_some() {
        // A member of a group held to one topology domain: the whole group judged.
        let mut whole = cluster::parse_cluster(&objects, &cluster_path.display().to_string())?;
        whole.bound.retain(|p| p.key() != key);
        whole.pending.retain(|p| p.key() != key);
        report.group = scheduler::explain_group::explain_group(&profiles, whole, &pod, seed);
    }
    if let Some(path) = report_path {
        let nodes: Vec<(String, String)> = snapshot
            .nodes
            .iter()
            .map(|n| {
                let zone = n.labels.get(scheduler::detail::ZONE_LABEL).cloned().unwrap_or_default();
                (n.name.clone(), zone)
            })
            .collect();
        let html = scheduler::report::explain_html(&report, &nodes, &cluster_path.display().to_string());
        std::fs::write(path, html).with_context(|| format!("failed to write the report {}", path.display()))?;
        eprintln!("Report written to {}.", path.display());
    }
    match output {
        Output::Json => out(&format!("{}\n", serde_json::to_string_pretty(&report)?)),
        _ => {
            // Colour only for a person at a terminal, and never with NO_COLOR set.
            let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            out(&explain::render_table(&report, color));
        }
    }
    Ok(())
}
