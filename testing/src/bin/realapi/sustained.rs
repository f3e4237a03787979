//! `realapi sustained`: the same stream for each scheduler on a fresh control plane.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use testing::sustained::{Outcome, Stream, quantile, run};
use testing::{Assets, ControlPlane, api, backlog};

use super::{NS, Who, start};

/// Two pods a node bound before the stream, each with a quarter of its CPU and memory.
fn fillers(nodes: usize) -> Vec<Pod> {
    let requests: BTreeMap<String, Quantity> =
        [("cpu".to_string(), Quantity("1".into())), ("memory".to_string(), Quantity("8Gi".into()))].into();
    (0..nodes * 2)
        .map(|i| Pod {
            metadata: ObjectMeta {
                name: Some(format!("fill-{i:05}")),
                namespace: Some(NS.into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some(backlog::node(i / 2).metadata.name.unwrap_or_default()),
                containers: vec![Container {
                    name: "app".into(),
                    image: Some("app:1".into()),
                    resources: Some(ResourceRequirements { requests: Some(requests.clone()), ..Default::default() }),
                    ..Default::default()
                }],
                tolerations: Some(vec![k8s_openapi::api::core::v1::Toleration {
                    operator: Some("Exists".into()),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            status: None,
        })
        .collect()
}

/// Runs `stream` with each of `whos` and prints the table and the memory curves.
pub async fn compare(
    scheduler: &PathBuf,
    nodes: usize,
    stream: &Stream,
    whos: &[Who],
    logs: Option<PathBuf>,
) -> Result<()> {
    let assets =
        Assets::from_env()?.context("set KUBE_ASSETS to a folder with etcd, kube-apiserver and kube-scheduler")?;
    let mut results = Vec::new();
    for &who in whos {
        let plane = ControlPlane::start(&assets).await?;
        let client = plane.client().await?;
        api::create_namespace(&client, NS).await?;
        api::create_nodes(&client, &backlog::nodes(nodes), 64).await?;
        api::create_pods(&client, &fillers(nodes), 64).await?;
        let mut process = start(&plane, scheduler, who, false)?;
        // The scheduler is up once it has bound a first pod.
        let probe = testing::sustained::pod(usize::MAX / 2, NS, &stream.scheduler);
        let probe_name = probe.metadata.name.clone().unwrap_or_default();
        api::create_pod(&client, &probe).await?;
        let t = Instant::now();
        loop {
            let pods = api::pods(&client, NS).await?;
            if pods.iter().any(|p| p.metadata.name.as_deref() == Some(&probe_name) && api::node_of(p).is_some()) {
                break;
            }
            if t.elapsed() > Duration::from_secs(120) || process.poll().is_some() {
                bail!("{} did not bind a first pod:\n{}", who.label(), process.log_tail(20));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        eprintln!("{}: {nodes} nodes, half full; stream of {}/s for {:?}", who.label(), stream.rate, stream.duration);
        let outcome = run(&client, process.pid(), stream).await?;
        process.stop(Duration::from_secs(10)).await;
        if let Some(dir) = &logs {
            std::fs::create_dir_all(dir)?;
            let name = if who == Who::Ours { "custom-scheduler" } else { "kube-scheduler" };
            let _ = std::fs::copy(plane.dir().join(format!("{name}.log")), dir.join(format!("sustained-{name}.log")));
        }
        eprintln!("{}", row(who, &outcome));
        results.push((who, outcome));
    }
    println!("{}", table(&results));
    println!("{}", curves(&results));
    Ok(())
}

const HEADER: &str = "| scheduler | created | bound | unbound at end | binds/s | create → bind p50 ms | p99 ms | max ms | CPU s per 1,000 bound | RSS MiB first / at 2 min / peak / last | RSS spread after 2 min |\n\
|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|\n";

fn row(who: Who, o: &Outcome) -> String {
    let first = o.samples.first();
    let last = o.samples.last();
    let cpu = match (first, last) {
        (Some(f), Some(l)) if o.bound > 0 => format!("{:.2}", (l.cpu - f.cpu) / o.bound as f64 * 1000.0),
        _ => String::new(),
    };
    let late: Vec<f64> = o.samples.iter().filter(|s| s.at >= 120.0).map(|s| s.rss_mib).collect();
    let at2 = late.first().copied().unwrap_or(f64::NAN);
    let peak = o.samples.iter().map(|s| s.rss_mib).fold(f64::NAN, f64::max);
    let (lo, hi) = late.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    let spread = if late.is_empty() { String::new() } else { format!("{:.1}%", (hi - lo) / lo * 100.0) };
    format!(
        "| {} | {} | {} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {} | {:.0} / {:.0} / {:.0} / {:.0} | {} |",
        who.label(),
        o.created,
        o.bound,
        o.unbound,
        o.bound as f64 / o.seconds,
        quantile(&o.latencies, 0.5) * 1000.0,
        quantile(&o.latencies, 0.99) * 1000.0,
        o.latencies.last().copied().unwrap_or(f64::NAN) * 1000.0,
        cpu,
        first.map_or(f64::NAN, |s| s.rss_mib),
        at2,
        peak,
        last.map_or(f64::NAN, |s| s.rss_mib),
        spread
    )
}

fn table(results: &[(Who, Outcome)]) -> String {
    let mut out = String::from(HEADER);
    for (who, o) in results {
        out.push_str(&row(*who, o));
        out.push('\n');
    }
    out
}

/// Resident memory and pods bound, a line a minute.
fn curves(results: &[(Who, Outcome)]) -> String {
    let mut out = String::from("| minute |");
    for (who, _) in results {
        out.push_str(&format!(" {} RSS MiB | bound |", who.label()));
    }
    out.push_str("\n|---:|");
    out.push_str(&"---:|---:|".repeat(results.len()));
    out.push('\n');
    let minutes =
        results.iter().filter_map(|(_, o)| o.samples.last()).map(|s| (s.at / 60.0) as usize).max().unwrap_or(0);
    for m in 0..=minutes {
        out.push_str(&format!("| {m} |"));
        for (_, o) in results {
            match o.samples.iter().find(|s| s.at >= m as f64 * 60.0) {
                Some(s) => out.push_str(&format!(" {:.0} | {} |", s.rss_mib, s.bound)),
                None => out.push_str(" | |"),
            }
        }
        out.push('\n');
    }
    out
}
