//! What a simulation reports: the `simulate --output json` contract, the readable
//! summary, and the figures they are made of.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

/// Latency percentiles in milliseconds.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Slowest.
    pub max: f64,
}

/// The result of a simulation (the `simulate --output json` contract).
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SimulationReport {
    /// Pods placed.
    pub scheduled: usize,
    /// Pods that fit nowhere.
    pub unschedulable: usize,
    /// Pod key to node.
    pub placements: BTreeMap<String, String>,
    /// Pod key to kube-scheduler's FailedScheduling message.
    pub failures: BTreeMap<String, String>,
    /// Wall-clock seconds of the scheduling loop.
    pub seconds: f64,
    /// Scheduled pods per second.
    pub pods_per_second: f64,
    /// Per-attempt scheduling latency.
    pub latency_ms: Latency,
    /// Scheduling attempts (retries included).
    pub attempts: usize,
    /// Nodes in the cluster.
    pub nodes: usize,
    /// Pending pods skipped because they still have scheduling gates.
    pub gated: usize,
    /// Peak resident memory of the process, in MiB (when the platform reports it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_memory_mib: Option<f64>,
    /// Preemptions, in the order they happened.
    pub preemptions: Vec<PreemptionRecord>,
    /// Churn steps applied while the measured pods were scheduled.
    #[serde(skip_serializing_if = "is_zero")]
    pub churn_steps: usize,
    /// Measured pods of a steady stream never created: the pods in flight stayed
    /// unschedulable, so none left to make room.
    #[serde(skip_serializing_if = "is_zero")]
    pub never_created: usize,
    /// What the owners of cluster objects report (`claims`: the claims the scheduled
    /// pods bound to volumes, static or provisioned in memory; `resourceClaims`: the
    /// ResourceClaims allocated when the run ended, their devices and the pods they are
    /// reserved for), by field.
    #[serde(flatten)]
    pub owned: BTreeMap<&'static str, serde_json::Value>,
    /// What a timeline's observer found (the workload's own figures).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload: Option<serde_json::Value>,
    /// Their lines for the readable summary.
    #[serde(skip)]
    pub owned_lines: Vec<String>,
    /// Their charts over the run (quotas' use against their guarantee and share).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub charts: Vec<algorithms::owners::Chart>,
    /// Per-node and per-pod detail, when [`SimulateOptions::detail`] asked for it.
    #[serde(skip)]
    pub detail: Option<crate::detail::RunDetail>,
}

/// One preemption: the pod that preempted, the node and the pods evicted there.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct PreemptionRecord {
    /// `namespace/name` of the preempting pod.
    pub preemptor: String,
    /// The node it was nominated to.
    pub node: String,
    /// `namespace/name` of each victim, most important first.
    pub victims: Vec<String>,
    /// The fewest pods of the node whose eviction would have let the preemptor fit, any
    /// pod counted (a lower bound of what the rules allow), when measured (timelines).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub fewest: Option<usize>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The reasons of a FailedScheduling message without its node count and preemption
/// part: pods turned away for the same reasons share it.
pub fn reasons(message: &str) -> &str {
    let rest = match message.split_once(" nodes are available: ") {
        Some((count, rest)) if count.starts_with("0/") => rest,
        _ => message,
    };
    // The reasons end with the first sentence; what follows is about preemption.
    let rest = rest.split(". ").next().unwrap_or(rest);
    rest.trim_end().trim_end_matches('.')
}

/// Peak resident set size of this process in bytes (Linux), if known.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Millisecond percentile of sorted durations (nearest rank).
pub fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1].as_secs_f64() * 1000.0
}

/// The human summary of a simulation.
pub fn render(report: &SimulationReport, every_pending: bool) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Scheduled {} of {} pods on {} nodes in {:.3}s ({:.0} pods/s); {} unschedulable{}.",
        report.scheduled,
        report.scheduled + report.unschedulable,
        report.nodes,
        report.seconds,
        report.pods_per_second,
        report.unschedulable,
        if report.gated > 0 { format!(", {} gated", report.gated) } else { String::new() }
    );
    let _ = writeln!(
        s,
        "Latency per attempt: p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms over {} attempts.",
        report.latency_ms.p50, report.latency_ms.p99, report.latency_ms.max, report.attempts
    );
    if !report.preemptions.is_empty() {
        let victims: usize = report.preemptions.iter().map(|p| p.victims.len()).sum();
        let _ = writeln!(s, "Preemptions: {} ({victims} pods evicted).", report.preemptions.len());
        for p in report.preemptions.iter().take(20) {
            let _ = writeln!(s, "  {} on {}: evicted {}", p.preemptor, p.node, p.victims.join(", "));
        }
        if report.preemptions.len() > 20 {
            let _ = writeln!(s, "  … and {} more", report.preemptions.len() - 20);
        }
    }
    for line in &report.owned_lines {
        let _ = writeln!(s, "{line}");
    }
    if report.churn_steps > 0 {
        let _ = writeln!(
            s,
            "Churn: {} steps (a node updated, a pod deleted, a pod created) while scheduling.",
            report.churn_steps
        );
    }
    if report.never_created > 0 {
        let _ = writeln!(
            s,
            "Steady stream stalled: {} pods never created (the pods in flight could not be placed).",
            report.never_created
        );
    }
    if let Some(m) = report.peak_memory_mib {
        let _ = writeln!(s, "Peak memory: {m:.0} MiB.");
    }
    let mut per_node: BTreeMap<&str, usize> = BTreeMap::new();
    for node in report.placements.values() {
        *per_node.entry(node.as_str()).or_default() += 1;
    }
    if let Some((busiest, n)) = per_node.iter().max_by_key(|(_, n)| **n) {
        let _ = writeln!(s, "Pods landed on {} nodes; busiest {busiest} with {n} new pods.", per_node.len());
    }
    if report.failures.is_empty() {
        return s;
    }
    if every_pending {
        let _ = writeln!(s, "\nUnschedulable pods:");
        let width = report.failures.keys().map(String::len).max().unwrap_or(0);
        for (pod, msg) in &report.failures {
            let _ = writeln!(s, "  {pod:width$}  {msg}");
        }
        return s;
    }
    // By reason, most pods first, as the report page groups them.
    let mut groups: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (pod, msg) in &report.failures {
        groups.entry(reasons(msg)).or_default().push(pod);
    }
    let mut groups: Vec<(&str, Vec<&str>)> = groups.into_iter().collect();
    groups.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(b.0)));
    let _ = writeln!(s, "\nUnschedulable pods by reason (--list-pending lists each pod and its message):");
    for (why, pods) in groups {
        let shown: Vec<&str> = pods.iter().take(3).copied().collect();
        let more = if pods.len() > 3 { format!(" and {} more", pods.len() - 3) } else { String::new() };
        let _ = writeln!(s, "  {:>5}  {why}\n         {}{more}", pods.len(), shown.join(", "));
    }
    s
}
