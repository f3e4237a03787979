//! `explain`: why a pod fits or does not fit each node, and which node it would get.

use std::collections::BTreeMap;

use algorithms::framework::{EvaluateOptions, evaluate};
use algorithms::framework::{PostFilterResult, post_filter_failure_message, run_post_filters};
use algorithms::{PodInfo, Profile, Snapshot};
use anstyle::{AnsiColor, Color, Style};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use serde::Serialize;

/// Why a node was rejected.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct FailedNode {
    /// The first filter plugin that rejected it.
    pub plugin: String,
    /// `Unschedulable` or `UnschedulableAndUnresolvable`.
    pub code: String,
    /// kube-scheduler's reason strings.
    pub reasons: Vec<String>,
    /// What exactly did not fit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Scores of one feasible node.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct NodeScores {
    /// Normalized 0-100 score per plugin, before weighting.
    pub plugins: BTreeMap<String, i64>,
    /// Weighted total.
    pub total: i64,
}

/// The `explain --output json` contract.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExplainReport {
    /// `namespace/name`.
    pub pod: String,
    /// Nodes that pass every filter, in cluster order.
    pub feasible_nodes: Vec<String>,
    /// Rejected nodes.
    pub failed_nodes: BTreeMap<String, FailedNode>,
    /// Scores of feasible nodes.
    pub scores: BTreeMap<String, NodeScores>,
    /// The node the scheduler would pick.
    pub selected_node: Option<String>,
    /// kube-scheduler's summary when no node fits.
    pub message: Option<String>,
    /// What the profile's plugins tell about the pod before any node (its quota's path,
    /// use and share), one line each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// What preemption would do when no node fits: the node and the pods it would evict.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preemption: Option<WouldPreempt>,
    /// Score plugin weights, for readers of the table.
    #[serde(skip)]
    pub weights: Vec<(String, i64)>,
    /// For a member of a pod group held to one topology domain: how the group's domains
    /// were judged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<GroupExplain>,
}

/// How a topology-constrained pod group would be placed: every candidate domain's verdict.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct GroupExplain {
    /// `namespace/name` of the PodGroup.
    pub group: String,
    /// The node label whose one domain must hold the group.
    pub topology_key: String,
    /// Pending members judged together.
    pub members: usize,
    /// Members that must be placed (the minimum less those already running).
    pub need: usize,
    /// The domain the group would go to.
    pub chosen: Option<String>,
    /// Where each member would go, as `namespace/name` to node.
    pub placements: BTreeMap<String, String>,
    /// Why the group would wait, when it would.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The candidate domains, in the order they were judged.
    pub domains: Vec<DomainRow>,
    /// placementScore plugin weights, for readers of the table.
    #[serde(skip)]
    pub weights: Vec<(String, i64)>,
}

/// One candidate domain of a constrained group.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DomainRow {
    /// The label's value.
    pub domain: String,
    /// Its nodes.
    pub nodes: usize,
    /// `chosen`, `feasible`, `too few fit`, `skipped` or `not tried`.
    pub verdict: String,
    /// Members placed in it, when tried.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placed: Option<usize>,
    /// Why it was skipped, or why its first member that did not fit did not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Placement scores (0-100 before weighting), when it holds the group.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub scores: BTreeMap<String, i64>,
    /// Weighted total, when it holds the group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<i64>,
}

/// The preemption `explain` foresees.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WouldPreempt {
    /// The node the pod would be nominated to.
    pub node: String,
    /// `namespace/name` of the pods that would be evicted, most important first.
    pub victims: Vec<String>,
    /// How many of them a PodDisruptionBudget does not allow to go.
    pub pdb_violations: usize,
}

/// Evaluates `pod` on every node of `snapshot` with `profile`.
pub fn explain(profile: &Profile, pod: &PodInfo, snapshot: &Snapshot, seed: u64) -> ExplainReport {
    // Explaining is what the detail strings are for.
    let profile = &Profile { details: true, ..profile.clone() };
    let mut rng = SmallRng::seed_from_u64(seed);
    let ev = evaluate(profile, pod, snapshot, &mut rng, EvaluateOptions { always_score: true, ..Default::default() });
    let name = |i: usize| snapshot.nodes[i].name.clone();
    let failed_nodes = ev
        .rejected
        .iter()
        .map(|(i, st)| {
            let f = FailedNode {
                plugin: st.plugin.to_string(),
                code: st.code.as_str().to_string(),
                reasons: st.reasons.iter().map(|r| r.to_string()).collect(),
                detail: st.detail.clone(),
            };
            (name(i), f)
        })
        .collect();
    let mut scores = BTreeMap::new();
    for (k, &i) in ev.feasible.iter().enumerate() {
        let plugins =
            ev.scores.iter().map(|ps| (ps.name.to_string(), ps.scores.get(k).copied().unwrap_or(0))).collect();
        scores.insert(name(i), NodeScores { plugins, total: ev.totals.get(k).copied().unwrap_or(0) });
    }
    let mut message = ev.failure_message();
    let mut preemption = None;
    if ev.selected.is_none() && ev.error.is_none() {
        let mut snap = snapshot.clone();
        match run_post_filters(profile, pod, &mut snap, &ev, &mut rng) {
            Some(PostFilterResult::Nominate(c)) => {
                preemption = Some(WouldPreempt {
                    node: name(c.node),
                    victims: c.victims.iter().map(|v| v.key()).collect(),
                    pdb_violations: c.pdb_violations,
                });
            }
            Some(other) => message = post_filter_failure_message(&ev, &other).or(message),
            None => {}
        }
    }
    ExplainReport {
        notes: profile.filters.iter().flat_map(|f| f.explain(pod, snapshot)).collect(),
        preemption,
        pod: pod.key(),
        feasible_nodes: ev.feasible.iter().map(|&i| name(i)).collect(),
        failed_nodes,
        scores,
        selected_node: ev.selected.map(name),
        message,
        weights: profile.scores.iter().map(|s| (s.plugin.name().to_string(), s.weight)).collect(),
        group: None,
    }
}

/// Short column headers for score plugins.
fn short(plugin: &str) -> &str {
    match plugin {
        "TaintToleration" => "Taint",
        "NodeAffinity" => "NodeAff",
        "NodeResourcesFit" => "Fit",
        "PodTopologySpread" => "Spread",
        "InterPodAffinity" => "PodAff",
        "NodeResourcesBalancedAllocation" => "Balanced",
        "ImageLocality" => "Image",
        "TightestFit" => "Tightest",
        "PodGroupPodsCount" => "PodsCount",
        other => other,
    }
}

/// Aligned lines of `rows`, columns `right` aligned right.
fn table(rows: &[Vec<String>], right: &[bool]) -> Vec<String> {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> =
        (0..cols).map(|c| rows.iter().filter_map(|r| r.get(c)).map(|s| s.chars().count()).max().unwrap_or(0)).collect();
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        let mut line = String::new();
        for (c, cell) in r.iter().enumerate() {
            let w = widths[c];
            let last = c + 1 == r.len();
            if right.get(c).copied().unwrap_or(false) {
                line.push_str(&format!("{cell:>w$}"));
            } else if last {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}"));
            }
            if !last {
                line.push_str("  ");
            }
        }
        out.push(line.trim_end().to_string());
    }
    out
}

/// Styles of the table's lines; all plain without colour.
struct Paint {
    color: bool,
}

impl Paint {
    const HEADER: Style = Style::new().bold();
    const SELECTED: Style = Style::new().bold().fg_color(Some(Color::Ansi(AnsiColor::Green)));
    const FITS: Style = Style::new().fg_color(Some(Color::Ansi(AnsiColor::Green)));
    const REJECTED: Style = Style::new().fg_color(Some(Color::Ansi(AnsiColor::Red)));
    const UNRESOLVABLE: Style = Style::new().dimmed().fg_color(Some(Color::Ansi(AnsiColor::Red)));

    /// `text` and a newline, in `style` when colour is on.
    fn line(&self, out: &mut String, style: Style, text: &str) {
        if self.color {
            out.push_str(&format!("{style}{text}{style:#}\n"));
        } else {
            out.push_str(text);
            out.push('\n');
        }
    }
}

/// The table a person reads: feasible nodes by total, then rejected nodes with reasons;
/// coloured (selected and fitting nodes green, rejected ones red) when `color` is set.
pub fn render_table(r: &ExplainReport, color: bool) -> String {
    let paint = Paint { color };
    let mut out = String::new();
    let total_nodes = r.feasible_nodes.len() + r.failed_nodes.len();
    match &r.selected_node {
        Some(n) => paint.line(
            &mut out,
            Paint::SELECTED,
            &format!(
                "Pod {} would be scheduled to {n} ({} of {total_nodes} nodes fit).",
                r.pod,
                r.feasible_nodes.len()
            ),
        ),
        None => paint.line(&mut out, Paint::REJECTED.bold(), &format!("Pod {} fits no node.", r.pod)),
    }
    if let Some(m) = &r.message {
        out.push_str(m);
        out.push('\n');
    }
    for note in &r.notes {
        out.push_str(note);
        out.push('\n');
    }
    if let Some(p) = &r.preemption {
        out.push_str(&format!(
            "Preemption would nominate it to {} and evict {} pod(s): {}{}.\n",
            p.node,
            p.victims.len(),
            p.victims.join(", "),
            if p.pdb_violations > 0 {
                format!(" ({} against a PodDisruptionBudget)", p.pdb_violations)
            } else {
                String::new()
            }
        ));
    }
    if !r.scores.is_empty() {
        let mut header = vec!["NODE".to_string(), "TOTAL".to_string()];
        header.extend(r.weights.iter().map(|(p, w)| format!("{}×{w}", short(p))));
        let mut rows = vec![header];
        let mut feasible: Vec<(&String, &NodeScores)> = r.scores.iter().collect();
        feasible.sort_by(|a, b| b.1.total.cmp(&a.1.total).then(a.0.cmp(b.0)));
        let mut styles = vec![Paint::HEADER];
        for (node, s) in feasible {
            let selected = Some(node) == r.selected_node.as_ref();
            let mark = if selected { format!("{node} *") } else { node.clone() };
            let mut row = vec![mark, s.total.to_string()];
            row.extend(r.weights.iter().map(|(p, _)| s.plugins.get(p).map(|v| v.to_string()).unwrap_or_default()));
            rows.push(row);
            styles.push(if selected { Paint::SELECTED } else { Paint::FITS });
        }
        let right: Vec<bool> = (0..rows[0].len()).map(|c| c > 0).collect();
        out.push_str("\nFeasible nodes (* = selected; scores are 0-100 before weighting):\n");
        for (line, style) in table(&rows, &right).iter().zip(styles) {
            paint.line(&mut out, style, line);
        }
    }
    if let Some(g) = &r.group {
        render_group(&mut out, &paint, g);
    }
    if !r.failed_nodes.is_empty() {
        let mut rows = vec![vec!["NODE".into(), "PLUGIN".into(), "REASON".into(), "DETAIL".into()]];
        let mut styles = vec![Paint::HEADER];
        let mut failed: Vec<(&String, &FailedNode)> = r.failed_nodes.iter().collect();
        failed.sort_by(|a, b| a.1.plugin.cmp(&b.1.plugin).then(a.0.cmp(b.0)));
        for (node, f) in failed {
            let unresolvable = f.code == "UnschedulableAndUnresolvable";
            let code = if unresolvable { " (unresolvable)" } else { "" };
            rows.push(vec![
                node.clone(),
                f.plugin.clone(),
                format!("{}{code}", f.reasons.join(", ")),
                f.detail.clone().unwrap_or_default(),
            ]);
            styles.push(if unresolvable { Paint::UNRESOLVABLE } else { Paint::REJECTED });
        }
        out.push_str(&format!("\nRejected nodes ({}):\n", r.failed_nodes.len()));
        for (line, style) in table(&rows, &[]).iter().zip(styles) {
            paint.line(&mut out, style, line);
        }
    }
    out
}

/// The group's section of the table: its verdict, then one row per candidate domain.
fn render_group(out: &mut String, paint: &Paint, g: &GroupExplain) {
    out.push('\n');
    match &g.chosen {
        Some(d) => paint.line(
            out,
            Paint::SELECTED,
            &format!(
                "Pod group {} ({} pending, {} needed) would be placed in {} {d}.",
                g.group, g.members, g.need, g.topology_key
            ),
        ),
        None => paint.line(
            out,
            Paint::REJECTED.bold(),
            &format!(
                "Pod group {} ({} pending, {} needed) fits no {} domain.",
                g.group, g.members, g.need, g.topology_key
            ),
        ),
    }
    if let Some(m) = &g.message {
        out.push_str(m);
        out.push('\n');
    }
    let mut header = vec!["DOMAIN".to_string(), "NODES".into(), "VERDICT".into(), "PLACED".into(), "TOTAL".into()];
    header.extend(g.weights.iter().map(|(p, w)| format!("{}×{w}", short(p))));
    header.push("REASON".into());
    let mut rows = vec![header];
    let mut styles = vec![Paint::HEADER];
    for d in &g.domains {
        let mut row = vec![
            d.domain.clone(),
            d.nodes.to_string(),
            d.verdict.clone(),
            d.placed.map(|p| p.to_string()).unwrap_or_default(),
            d.total.map(|t| t.to_string()).unwrap_or_default(),
        ];
        row.extend(g.weights.iter().map(|(p, _)| d.scores.get(p).map(|v| v.to_string()).unwrap_or_default()));
        row.push(d.reason.clone().unwrap_or_default());
        rows.push(row);
        styles.push(match d.verdict.as_str() {
            "chosen" => Paint::SELECTED,
            "feasible" => Paint::FITS,
            "not tried" => Style::new(),
            _ => Paint::REJECTED,
        });
    }
    let last = rows[0].len() - 1;
    let right: Vec<bool> = (0..rows[0].len()).map(|c| c != 0 && c != 2 && c != last).collect();
    out.push_str(&format!("\n{} domains (placement scores are 0-100 before weighting):\n", g.topology_key));
    for (line, style) in table(&rows, &right).iter().zip(styles) {
        paint.line(out, style, line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> ExplainReport {
        let mut scores = BTreeMap::new();
        scores
            .insert("node-a".to_string(), NodeScores { plugins: [("NodeResourcesFit".into(), 80)].into(), total: 80 });
        scores.insert("node-bb".to_string(), NodeScores { plugins: [("NodeResourcesFit".into(), 5)].into(), total: 5 });
        let mut failed_nodes = BTreeMap::new();
        failed_nodes.insert(
            "node-c".to_string(),
            FailedNode {
                plugin: "NodeResourcesFit".into(),
                code: "Unschedulable".into(),
                reasons: vec!["Insufficient cpu".into()],
                detail: None,
            },
        );
        ExplainReport {
            notes: Vec::new(),
            pod: "default/p".into(),
            feasible_nodes: vec!["node-a".into(), "node-bb".into()],
            failed_nodes,
            scores,
            selected_node: Some("node-a".into()),
            message: None,
            preemption: None,
            weights: vec![("NodeResourcesFit".into(), 1)],
            group: None,
        }
    }

    /// Removes ANSI escape sequences.
    fn plain(s: &str) -> String {
        let mut out = String::new();
        let mut chars = s.chars();
        while let Some(c) = chars.next() {
            if c == '\u{1b}' {
                for d in chars.by_ref() {
                    if d == 'm' {
                        break;
                    }
                }
            } else {
                out.push(c);
            }
        }
        out
    }

    #[test]
    fn colour_is_only_added_on_request_and_keeps_the_columns_aligned() {
        let r = report();
        let bare = render_table(&r, false);
        assert!(!bare.contains('\u{1b}'), "{bare}");
        let painted = render_table(&r, true);
        assert!(painted.contains("\u{1b}[1m\u{1b}[32mPod default/p would be scheduled to node-a"), "{painted:?}");
        assert!(painted.contains("\u{1b}[31mnode-c"), "{painted:?}");
        assert_eq!(plain(&painted), bare);
        // Totals line up at the right edge of their column.
        let rows: Vec<&str> = bare.lines().filter(|l| l.starts_with("node-a") || l.starts_with("node-bb")).collect();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].find("80").map(|i| i + 2), rows[1].find(" 5").map(|i| i + 2));
    }
}
