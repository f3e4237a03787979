//! Self-contained HTML reports of `simulate` and `explain`: utilization heatmaps, pending
//! pods by reason, placements and per-node verdicts, readable in any browser offline.

mod chart;
mod explain_page;
pub mod heatmap;
mod page;

use std::collections::{BTreeMap, HashMap};

use maud::{Markup, html};

pub use crate::detail::RunDetail;
pub use explain_page::explain_html;

use crate::simulate::SimulationReport;
pub use crate::simulate::reasons;
use heatmap::Cell;

/// Rows a table shows at most; the rest are counted below it.
pub const MAX_ROWS: usize = 20_000;

/// Where a run's input and configuration came from, for the report's header.
#[derive(Debug, Clone, Default)]
pub struct RunSource {
    /// The cluster: a dump file, a workload or the demo.
    pub cluster: String,
    /// The configuration file, if any.
    pub config: Option<String>,
    /// The tie-breaking seed.
    pub seed: u64,
}

fn human(resource: &str, v: i64) -> String {
    match resource {
        "cpu" => format!("{:.2}", v as f64 / 1000.0),
        "memory" | "ephemeral-storage" => format!("{:.1}Gi", v as f64 / (1u64 << 30) as f64),
        _ => v.to_string(),
    }
}

fn percent(share: f64) -> String {
    format!("{:.0}%", share * 100.0)
}

/// What the nodes are grouped by: `zone`, or the last part of the topology key
/// (`rack` for `topology.kubernetes.io/rack`).
fn group_name(d: &RunDetail) -> &str {
    if d.group_label.is_empty() || d.group_label == crate::detail::ZONE_LABEL {
        return "zone";
    }
    d.group_label.rsplit('/').next().unwrap_or(&d.group_label)
}

/// Heatmaps of every resource, before and after, by zone (or topology domain).
fn utilization(d: &RunDetail) -> Markup {
    let (zones, members) = heatmap::by_zone(d.nodes.iter().map(|n| n.zone.as_str()));
    html! {
        p.muted { "Requested share of each node's allocatable, one cell a node (hover for its figures). "
            "Before: the cluster as given; after: once the run's pods were placed. Each resource's "
            "scale ends at the first of 10%, 20%, 25%, 50% and 100% above its busiest node." }
        @for (r, resource) in d.resources.iter().enumerate() {
            @let has: Vec<bool> = d.nodes.iter().map(|n| n.allocatable[r] > 0).collect();
            @let top = heatmap::scale_top(d.nodes.iter().enumerate().filter(|(i, _)| has[*i])
                .map(|(_, n)| n.share(r, true).max(n.share(r, false))).fold(0.0, f64::max));
            @let cells = |after: bool| -> Vec<Vec<Cell>> {
                members.iter().map(|idx| idx.iter().map(|&i| {
                    let n = &d.nodes[i];
                    let used = if after { n.after[r] } else { n.before[r] };
                    Cell {
                        node: n.name.clone(),
                        fill: heatmap::scaled_colour(has[i].then(|| n.share(r, after)), top),
                        tip: format!("{} of {} {resource} ({})", human(resource, used), human(resource, n.allocatable[r]),
                            if has[i] { percent(n.share(r, after)) } else { "none".into() }),
                    }
                }).collect()).collect()
            };
            @match resource.strip_prefix(algorithms::dra::DEVICES_PREFIX) {
                Some(class) => h3 { "DRA devices of class " (class) " (held by claims, of those the node reaches)" },
                None => h3 { (resource) },
            }
            (heatmap::legend(top))
            table.zones {
                thead { tr { th { (group_name(d)) } th.num { "nodes" } th.num { "before" } th.num { "after" } } }
                tbody {
                    @for (z, zone) in zones.iter().enumerate() {
                        @let idx = &members[z];
                        @let alloc: i64 = idx.iter().map(|&i| d.nodes[i].allocatable[r]).sum();
                        @let before: i64 = idx.iter().map(|&i| d.nodes[i].before[r]).sum();
                        @let after: i64 = idx.iter().map(|&i| d.nodes[i].after[r]).sum();
                        tr {
                            td { (zone) }
                            td.num { (idx.len()) }
                            td.num { @if alloc > 0 { (percent(before as f64 / alloc as f64)) } @else { "–" } }
                            td.num { @if alloc > 0 { (percent(after as f64 / alloc as f64)) } @else { "–" } }
                        }
                    }
                }
            }
            (heatmap::grids(&format!("heatmap-{resource}"), &["before", "after"], &zones, &[cells(false), cells(true)]))
        }
    }
}

/// Pending pods by reason, then one row each.
fn pending(d: &RunDetail) -> Markup {
    let mut groups: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for p in &d.pending {
        groups.entry(reasons(&p.message)).or_default().push(&p.pod);
    }
    let mut groups: Vec<(&str, Vec<&str>)> = groups.into_iter().collect();
    groups.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(b.0)));
    html! {
        h3 { "By reason" }
        table id="pending-groups" {
            thead { tr { th.num { "pods" } th { "0/N nodes are available: …" } th { "for example" } } }
            tbody {
                @for (reason, pods) in &groups {
                    tr { td.num { (pods.len()) } td { (reason) } td { (pods.iter().take(3).copied().collect::<Vec<_>>().join(", ")) } }
                }
            }
        }
        h3 { "Each pod" }
        (page::filter("pending-pods", "filter pods, plugins, reasons"))
        div.scroll {
            table.sortable id="pending-pods" {
                thead { tr { th { "pod" } th { "rejected most by" } th.num { "nodes" } th { "message" } } }
                tbody {
                    @for p in d.pending.iter().take(MAX_ROWS) {
                        tr data-pod=(p.pod) {
                            td { (p.pod) }
                            td { @if let Some((plugin, _)) = &p.top_plugin { (plugin) } }
                            td.num { @if let Some((_, n)) = &p.top_plugin { (n) } }
                            td { (p.message) }
                        }
                    }
                }
            }
        }
        @if d.pending.len() > MAX_ROWS { p.muted { "… and " (d.pending.len() - MAX_ROWS) " more pods." } }
    }
}

fn placements(r: &SimulationReport, zone_of: &HashMap<&str, &str>) -> Markup {
    html! {
        (page::filter("placements", "filter pods, nodes, zones"))
        div.scroll {
            table.sortable id="placements" {
                thead { tr { th { "pod" } th { "node" } th { "zone" } } }
                tbody {
                    @for (pod, node) in r.placements.iter().take(MAX_ROWS) {
                        tr { td { (pod) } td { (node) } td { (zone_of.get(node.as_str()).copied().unwrap_or("")) } }
                    }
                }
            }
        }
        @if r.placements.len() > MAX_ROWS { p.muted { "… and " (r.placements.len() - MAX_ROWS) " more placements." } }
    }
}

fn configuration(source: &RunSource, d: &RunDetail) -> Markup {
    html! {
        table {
            tbody {
                tr { th { "cluster" } td { (source.cluster) } }
                tr { th { "configuration" } td { (source.config.as_deref().unwrap_or("defaults (no --config)")) } }
                tr { th { "seed" } td { (source.seed) } }
            }
        }
        @for p in &d.profiles {
            h3 { "Profile " code { (p.scheduler_name) } }
            table {
                tbody {
                    tr { th { "percentageOfNodesToScore" } td { (p.percentage_of_nodes_to_score.map_or("all nodes".to_string(), |v| format!("{v}%"))) } }
                    tr { th { "filter" } td { (p.filters.join(", ")) } }
                    tr { th { "score (weight)" } td { (p.scores.iter().map(|(n, w)| format!("{n} ({w})")).collect::<Vec<_>>().join(", ")) } }
                    tr { th { "postFilter" } td { (names(&p.post_filters)) } }
                    tr { th { "reserve" } td { (names(&p.binding[0])) } }
                    tr { th { "permit" } td { (names(&p.binding[1])) } }
                    tr { th { "preBind" } td { (names(&p.binding[2])) } }
                }
            }
        }
    }
}

/// Plugin names joined, or "none".
fn names(list: &[String]) -> String {
    if list.is_empty() { "none".into() } else { list.join(", ") }
}

/// The `simulate --report` page. `r.detail` must have been collected.
pub fn simulate_html(source: &RunSource, r: &SimulationReport) -> String {
    let empty = RunDetail::default();
    let d = r.detail.as_ref().unwrap_or(&empty);
    let zone_of: HashMap<&str, &str> = d.nodes.iter().map(|n| (n.name.as_str(), n.zone.as_str())).collect();
    let victims: usize = r.preemptions.iter().map(|p| p.victims.len()).sum();
    let body = html! {
        section id="summary" {
            div.cards {
                (page::card(r.scheduled, "pods scheduled", "good"))
                (page::card(r.unschedulable, "pods pending", if r.unschedulable > 0 { "bad" } else { "" }))
                @if r.gated > 0 { (page::card(r.gated, "pods gated", "")) }
                (page::card(r.nodes, "nodes", ""))
                (page::card(format!("{:.0}", r.pods_per_second), "pods/s", ""))
                (page::card(format!("{:.3}", r.latency_ms.p50), "p50 ms per attempt", ""))
                (page::card(format!("{:.3}", r.latency_ms.p99), "p99 ms", ""))
                (page::card(format!("{:.3}", r.latency_ms.max), "max ms", ""))
                (page::card(r.attempts, "attempts", ""))
                @if let Some(m) = r.peak_memory_mib { (page::card(format!("{m:.0} MiB"), "peak memory", "")) }
                (page::card(r.preemptions.len(), &format!("preemptions ({victims} pods evicted)"), ""))
            }
        }
        section id="pending" {
            h2 { "Pending pods (" (r.unschedulable) ")" }
            @if d.pending.is_empty() { p.muted { "Every pod found a node." } } @else { (pending(d)) }
        }
        section id="utilization" { h2 { "Utilization by " (group_name(d)) } (utilization(d)) }
        section id="placements-section" { h2 { "Placements (" (r.placements.len()) ")" } (placements(r, &zone_of)) }
        @if !r.preemptions.is_empty() {
            section id="preemptions" {
                h2 { "Preemptions (" (r.preemptions.len()) ")" }
                div.scroll {
                    table.sortable id="preemption-table" {
                        thead { tr { th { "preemptor" } th { "node" } th.num { "victims" } th { "evicted" } } }
                        tbody {
                            @for p in r.preemptions.iter().take(MAX_ROWS) {
                                tr { td { (p.preemptor) } td { (p.node) } td.num { (p.victims.len()) } td { (p.victims.join(", ")) } }
                            }
                        }
                    }
                }
            }
        }
        @if !r.owned_lines.is_empty() {
            section id="objects" {
                h2 { "Cluster objects" }
                p.muted { "What the owners of cluster objects (claims, quotas) and the workload report at the end of the run." }
                ul { @for line in &r.owned_lines { li { (line) } } }
                @if !r.charts.is_empty() {
                    p.muted { "Over the run (one point per drain of the queue, or per step of a timeline):" }
                    (chart::charts(&r.charts))
                }
            }
        }
        section id="configuration" { h2 { "Configuration" } (configuration(source, d)) }
    };
    let subtitle = format!(
        "{}: {} of {} pods scheduled on {} nodes in {:.3} s.",
        source.cluster,
        r.scheduled,
        r.scheduled + r.unschedulable,
        r.nodes,
        r.seconds
    );
    page::page("custom-scheduler simulate", &subtitle, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_drop_the_node_count_and_the_preemption_part() {
        let m = "0/12 nodes are available: 3 Insufficient cpu, 9 node(s) didn't match Pod's node affinity/selector. \
                 no new claims to deallocate, preemption: 0/12 nodes are available: 12 Preemption is not helpful \
                 for scheduling.";
        assert_eq!(reasons(m), "3 Insufficient cpu, 9 node(s) didn't match Pod's node affinity/selector");
        assert_eq!(reasons("running \"Foo\" filter plugin: x"), "running \"Foo\" filter plugin: x");
    }
}
