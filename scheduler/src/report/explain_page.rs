//! The `explain --report` page: one pod's verdict on every node, with score breakdowns.

use maud::html;

use super::heatmap::{self, Cell};
use super::page;
use crate::explain::{ExplainReport, GroupExplain};

/// Colours of the verdicts.
const SELECTED: &str = "#0b5d1e";
const REJECTED: &str = "#cf222e";
const UNRESOLVABLE: &str = "#7d1a12";

/// Green from light (lowest total among feasible nodes) to full (highest).
fn feasible_colour(total: i64, low: i64, high: i64) -> String {
    let t = if high > low { (total - low) as f64 / (high - low) as f64 } else { 1.0 };
    let mix = |a: f64, b: f64| (a + (b - a) * t).round() as u8;
    format!("#{:02x}{:02x}{:02x}", mix(199.0, 45.0), mix(233.0, 164.0), mix(192.0, 78.0))
}

/// The verdict of `node`: a class name, its words and its colour.
fn verdict(r: &ExplainReport, node: &str, low: i64, high: i64) -> (&'static str, String, String) {
    if r.selected_node.as_deref() == Some(node) {
        return ("selected", "selected".into(), SELECTED.into());
    }
    if let Some(s) = r.scores.get(node) {
        return ("feasible", "fits".into(), feasible_colour(s.total, low, high));
    }
    match r.failed_nodes.get(node) {
        Some(f) if f.code == "UnschedulableAndUnresolvable" => {
            ("unresolvable", "rejected (unresolvable)".into(), UNRESOLVABLE.into())
        }
        Some(_) => ("rejected", "rejected".into(), REJECTED.into()),
        // Feasible but not scored: kube-scheduler skips scoring a single feasible node.
        None => ("feasible", "fits".into(), feasible_colour(high, low, high)),
    }
}

/// A plugin's name with a space before each capital after the first, so that a narrow
/// column header can wrap it: `Node Resources Fit`.
fn spaced(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if i > 0 && c.is_ascii_uppercase() {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

/// The page. `nodes` lists every node with its zone (empty for none), in cluster order.
pub fn explain_html(r: &ExplainReport, nodes: &[(String, String)], cluster: &str) -> String {
    let low = r.scores.values().map(|s| s.total).min().unwrap_or(0);
    let high = r.scores.values().map(|s| s.total).max().unwrap_or(0);
    let (zones, members) = heatmap::by_zone(nodes.iter().map(|(_, z)| z.as_str()));
    let cells: Vec<Vec<Cell>> = members
        .iter()
        .map(|idx| {
            idx.iter()
                .map(|&i| {
                    let name = &nodes[i].0;
                    let (_, words, fill) = verdict(r, name, low, high);
                    let tip = match (r.scores.get(name), r.failed_nodes.get(name)) {
                        (Some(s), _) => format!("{words}, total {}", s.total),
                        (_, Some(f)) => format!("{words} by {}: {}", f.plugin, f.reasons.join(", ")),
                        _ => words,
                    };
                    Cell { node: name.clone(), fill, tip }
                })
                .collect()
        })
        .collect();
    let plugins: Vec<&(String, i64)> = r.weights.iter().collect();
    let body = html! {
        section id="summary" {
            div.cards {
                @match &r.selected_node {
                    Some(n) => (page::card(n, "would be chosen", "good")),
                    None => (page::card("none", "node fits", "bad")),
                }
                (page::card(r.feasible_nodes.len(), "nodes fit", "good"))
                (page::card(r.failed_nodes.len(), "nodes rejected", if r.failed_nodes.is_empty() { "" } else { "bad" }))
                @if let Some(p) = &r.preemption {
                    (page::card(&p.node, &format!("preemption: evicts {} pod(s)", p.victims.len()), "bad"))
                }
            }
            @if let Some(m) = &r.message { p { (m) } }
            @if let Some(p) = &r.preemption {
                p { "Preemption would nominate it to " b { (p.node) } " and evict " (p.victims.join(", "))
                    @if p.pdb_violations > 0 { " (" (p.pdb_violations) " against a PodDisruptionBudget)" } "." }
            }
        }
        @if let Some(g) = &r.group { (group_section(g)) }
        section id="map" {
            h2 { "Nodes by zone" }
            p.muted { "Dark green: chosen; green: fits (darker scores higher); red: rejected; dark red: rejected and no preemption can help." }
            (heatmap::grids("verdicts", &["verdict"], &zones, &[cells]))
        }
        section id="nodes" {
            h2 { "Every node (" (nodes.len()) ")" }
            (page::filter("node-table", "filter nodes, zones, plugins, reasons"))
            div.scroll {
                table.sortable id="node-table" {
                    thead {
                        tr {
                            th { "node" } th { "zone" } th { "verdict" } th.num { "total" } th { "rejected by" } th { "reason" }
                            @for (p, w) in &plugins {
                                th.num.plugin title=(format!("{p}, weight {w}, score 0-100 before weighting")) { (spaced(p)) " ×" (w) }
                            }
                        }
                    }
                    tbody {
                        @for (name, zone) in nodes {
                            @let (class, words, _) = verdict(r, name, low, high);
                            @let failed = r.failed_nodes.get(name);
                            @let scores = r.scores.get(name);
                            tr data-node=(name) {
                                td.node { (name) }
                                td { (zone) }
                                td class={ "verdict-" (class) } { (words) }
                                td.num { @if let Some(s) = scores { (s.total) } }
                                td { @if let Some(f) = failed { (f.plugin) } }
                                td.reason {
                                    @if let Some(f) = failed {
                                        (f.reasons.join(", "))
                                        @if let Some(d) = &f.detail { span.muted { " (" (d) ")" } }
                                    }
                                }
                                @for (p, _) in &plugins {
                                    td.num { @if let Some(v) = scores.and_then(|s| s.plugins.get(p.as_str())) { (v) } }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    let subtitle = format!("Pod {} against {cluster}.", r.pod);
    page::page(&format!("custom-scheduler explain {}", r.pod), &subtitle, body)
}

/// The pod group's domains: each one's verdict, members placed, placement scores and reason.
fn group_section(g: &GroupExplain) -> maud::Markup {
    html! {
        section id="group" {
            h2 { "Pod group " (g.group) " by " (g.topology_key) }
            p {
                (g.members) " pending members, " (g.need) " needed: "
                @match &g.chosen {
                    Some(d) => { "placed in " b { (d) } "." }
                    None => { "no domain holds the group." }
                }
            }
            @if let Some(m) = &g.message { p { (m) } }
            div.scroll {
                table.sortable id="domain-table" {
                    thead {
                        tr {
                            th { "domain" } th.num { "nodes" } th { "verdict" } th.num { "placed" }
                            @for (p, w) in &g.weights { th.num title=(format!("{p}, weight {w}, score 0-100 before weighting")) { (p) " ×" (w) } }
                            th.num { "total" } th { "reason" }
                        }
                    }
                    tbody {
                        @for d in &g.domains {
                            tr {
                                td { (d.domain) }
                                td.num { (d.nodes) }
                                td class={ "verdict-" (verdict_class(&d.verdict)) } { (d.verdict) }
                                td.num { @if let Some(p) = d.placed { (p) } }
                                @for (p, _) in &g.weights { td.num { @if let Some(v) = d.scores.get(p) { (v) } } }
                                td.num { @if let Some(t) = d.total { (t) } }
                                td { @if let Some(r) = &d.reason { (r) } }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The page's class for a domain's verdict.
fn verdict_class(verdict: &str) -> &'static str {
    match verdict {
        "chosen" => "selected",
        "feasible" => "feasible",
        "not tried" => "",
        _ => "rejected",
    }
}
