//! `simulate --report` and `explain --report`: the HTML parses, holds every node and
//! pending pod of the run, loads nothing from elsewhere, and opens in headless Chromium
//! without console errors (where Chromium is installed).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use scraper::{Html, Selector};
use serde_json::Value;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_custom-scheduler"))
}

fn select<'a>(doc: &'a Html, css: &str) -> Vec<scraper::ElementRef<'a>> {
    doc.select(&Selector::parse(css).unwrap()).collect()
}

fn attrs(doc: &Html, css: &str, attr: &str) -> Vec<String> {
    select(doc, css).iter().filter_map(|e| e.value().attr(attr)).map(str::to_string).collect()
}

/// Parses a report and checks what every report must be: well-formed, and self-contained.
fn parse(path: &Path) -> Html {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.starts_with("<!DOCTYPE html>"), "{}", &text[..40]);
    let doc = Html::parse_document(&text);
    assert!(doc.errors.is_empty(), "HTML parse errors: {:?}", doc.errors);
    for css in ["link", "img", "iframe", "script[src]", "object", "embed"] {
        assert!(select(&doc, css).is_empty(), "the report refers to outside resources: {css}");
    }
    assert!(!text.contains("https://"), "the report names a remote address");
    doc
}

/// Headless Chromium, where installed (`CHROMIUM` names another build): the path, or
/// `None` after a line saying so.
fn chromium() -> Option<PathBuf> {
    testing::tools::find("chromium", "CHROMIUM", &["--version"], "the Chromium checks")
}

/// Opens `page` in headless Chromium: its DOM once the scripts ran, and the console lines
/// Chromium logged.
fn open_in_chromium(chrome: &Path, page: &Path) -> (String, String) {
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(chrome)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.canonicalize().unwrap().display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "chromium failed: {}", String::from_utf8_lossy(&out.stderr));
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn no_console_errors(log: &str) {
    let errors: Vec<&str> =
        log.lines().filter(|l| l.contains("CONSOLE") || l.contains("Uncaught") || l.contains("SyntaxError")).collect();
    assert!(errors.is_empty(), "console errors: {errors:#?}");
}

#[test]
fn the_demo_report_holds_every_node_and_pending_pod() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("demo.html");
    let out = bin().args(["simulate", "--output", "json", "--report"]).arg(&page).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let run: Value = serde_json::from_slice(&out.stdout).unwrap();
    let doc = parse(&page);

    // Every node once in each heatmap panel of every resource, and every node that got
    // a pod among them.
    let nodes = run["nodes"].as_u64().unwrap() as usize;
    for resource in ["cpu", "memory", "pods", "nvidia.com/gpu"] {
        for panel in ["before", "after"] {
            let css = format!("svg[id=\"heatmap-{resource}\"] g[data-panel=\"{panel}\"] rect");
            let cells = attrs(&doc, &css, "data-node");
            let unique: BTreeSet<&String> = cells.iter().collect();
            assert_eq!((cells.len(), unique.len()), (nodes, nodes), "{resource} {panel}");
        }
    }
    let cells: BTreeSet<String> = attrs(&doc, "svg[id=\"heatmap-cpu\"] rect", "data-node").into_iter().collect();
    for node in run["placements"].as_object().unwrap().values() {
        assert!(cells.contains(node.as_str().unwrap()), "{node} has no cell");
    }

    // Every pending pod has its row, and the groups add up to them.
    let failures: BTreeSet<String> = run["failures"].as_object().unwrap().keys().cloned().collect();
    assert!(!failures.is_empty(), "the demo leaves some pods pending");
    let rows: BTreeSet<String> = attrs(&doc, "#pending-pods tr[data-pod]", "data-pod").into_iter().collect();
    assert_eq!(rows, failures);
    let grouped: usize = select(&doc, "#pending-groups tbody tr")
        .iter()
        .map(|tr| tr.text().next().unwrap().trim().parse::<usize>().unwrap())
        .sum();
    assert_eq!(grouped, failures.len());
    // Each pending pod names the plugin that turned it away from the most nodes.
    for tr in select(&doc, "#pending-pods tbody tr") {
        let cells: Vec<String> = tr.child_elements().map(|td| td.text().collect::<String>()).collect();
        assert!(!cells[1].is_empty() && cells[2].parse::<usize>().unwrap() > 0, "{cells:?}");
    }
    // One placement row per placed pod; the run's figures and configuration are shown.
    let placed = select(&doc, "#placements tbody tr").len();
    assert_eq!(placed, run["placements"].as_object().unwrap().len());
    let text: String = doc.root_element().text().collect();
    for needle in ["pods/s", "p99 ms", "peak memory", "built-in demo cluster", "NodeResourcesFit", "DefaultPreemption"]
    {
        assert!(text.contains(needle), "no {needle:?} in the report");
    }

    if let Some(chrome) = chromium() {
        let (dom, log) = open_in_chromium(&chrome, &page);
        assert!(dom.contains("data-ready=\"1\""), "the page's script did not finish");
        no_console_errors(&log);
    }
}

#[test]
fn the_explain_report_shows_every_node_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("explain.html");
    let args = ["explain", "--cluster", "tests/data/cluster-dump.yaml", "--pod", "default/gpu-2", "--output"];
    let out = bin().args(args).arg("json").arg("--report").arg(&page).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let doc = parse(&page);
    let feasible = r["feasibleNodes"].as_array().unwrap().len();
    let failed = r["failedNodes"].as_object().unwrap();
    let rows = attrs(&doc, "#node-table tr[data-node]", "data-node");
    assert_eq!(rows.len(), feasible + failed.len());
    assert_eq!(attrs(&doc, "svg#verdicts rect", "data-node").len(), rows.len());
    for tr in select(&doc, "#node-table tbody tr") {
        let node = tr.value().attr("data-node").unwrap();
        let cells: Vec<String> = tr.child_elements().map(|td| td.text().collect::<String>()).collect();
        match failed.get(node) {
            Some(f) => {
                assert!(cells[2].starts_with("rejected"), "{cells:?}");
                assert_eq!(cells[4], f["plugin"].as_str().unwrap());
            }
            None => assert!(cells[2] == "fits" || cells[2] == "selected", "{cells:?}"),
        }
    }
    if let Some(chrome) = chromium() {
        let (dom, log) = open_in_chromium(&chrome, &page);
        assert!(dom.contains("data-ready=\"1\""), "the page's script did not finish");
        no_console_errors(&log);
    }
}

/// With GPUs from a DRA driver, the report has a heatmap of the class's devices: each
/// node's held devices of those it reaches, adding up to the devices the placed pods took.
#[test]
fn a_dra_workload_report_shows_each_node_devices_of_a_class() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("dra.html");
    let out = bin()
        .args(["simulate", "--workload", "SchedulingGpuPacking/dra", "--nodes", "50", "--pods", "40"])
        .args(["--output", "json", "--seed", "1", "--report"])
        .arg(&page)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let run: Value = serde_json::from_slice(&out.stdout).unwrap();
    let doc = parse(&page);
    let after = select(&doc, "svg[id=\"heatmap-devices:gpu\"] g[data-panel=\"after\"] rect");
    assert_eq!(after.len(), 50, "one cell a node");
    let mut held = 0;
    let mut reached = 0;
    for cell in &after {
        let tip: String = cell.text().collect();
        let (_, figures) = tip.split_once(": ").unwrap();
        let (used, rest) = figures.split_once(" of ").unwrap();
        let total: i64 = rest.split_whitespace().next().unwrap().parse().unwrap();
        held += used.parse::<i64>().unwrap();
        reached += total;
    }
    assert_eq!(reached, 5 * 8, "five GPU nodes of eight devices");
    // SchedulingGpuPacking: pods 0, 2, … of the first half ask for one GPU, the second
    // half for eight.
    let taken: i64 = run["placements"]
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.rsplit('-').next().unwrap().parse::<i64>().unwrap())
        .map(|i| {
            if i >= 20 {
                8
            } else if i % 2 == 0 {
                1
            } else {
                0
            }
        })
        .sum();
    assert!(held > 0 && held == taken, "held {held}, taken {taken}");
}

/// With PodGroups held to racks, the heatmaps group the nodes by rack.
#[test]
fn a_topology_workload_report_groups_nodes_by_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("racks.html");
    let out = bin()
        .args(["simulate", "--workload", "GangTrainingTopology", "--nodes", "128", "--pods", "300"])
        .args(["--output", "json", "--seed", "1", "--report"])
        .arg(&page)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc = parse(&page);
    let text: String = doc.root_element().text().collect();
    assert!(text.contains("Utilization by rack"), "no rack grouping");
    for rack in ["rack-0", "rack-1"] {
        assert!(text.contains(rack), "no {rack} in the report");
    }
}

#[test]
fn a_timeline_with_quotas_charts_each_quotas_use_against_its_guarantee_and_share() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("quotas.html");
    let out = bin()
        .args(["simulate", "--workload", "MultiTenantGPU", "--nodes", "16", "--seed", "1", "--output", "json"])
        .args(["--config", "../deploy/examples/quota-tree-profile.yaml", "--report", page.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let charts = r["charts"].as_array().unwrap();
    let titles: BTreeSet<&str> = charts.iter().map(|c| c["title"].as_str().unwrap()).collect();
    assert!(titles.contains("quota a1/a1: nvidia.com/gpu"), "{titles:?}");
    let a1 = charts.iter().find(|c| c["title"] == "quota a1/a1: nvidia.com/gpu").unwrap();
    let lines: Vec<&str> = a1["lines"].as_array().unwrap().iter().map(|l| l["name"].as_str().unwrap()).collect();
    assert_eq!(lines, ["used", "runtime share", "min"]);
    // One point per step of the timeline; the team's use is above 0 at some step.
    let used = a1["lines"][0]["points"].as_array().unwrap();
    assert!(used.len() > 100, "{}", used.len());
    assert!(used.iter().any(|p| p[1].as_f64().unwrap() > 0.0));
    let doc = parse(&page);
    assert_eq!(select(&doc, "#objects figure.chart").len(), charts.len());
    assert_eq!(select(&doc, "#objects figure.chart polyline").len(), 3 * charts.len());
}

/// Measures, once the page has loaded at the window's width, where each filter box sits
/// against its table and whether the node table fits its frame.
const MEASURE: &str = r#"<script>
window.addEventListener('load', function () {
  var out = {width: window.innerWidth, filters: [], nodes: null};
  document.querySelectorAll('input.filter').forEach(function (f) {
    var fr = f.getBoundingClientRect(), tr = document.getElementById(f.dataset.table).getBoundingClientRect();
    out.filters.push({table: f.dataset.table, bottom: fr.bottom, left: fr.left, tableTop: tr.top, tableLeft: tr.left});
  });
  var t = document.getElementById('node-table');
  if (t) {
    var frame = t.closest('.scroll');
    var total = Array.from(t.querySelectorAll('th')).find(function (h) { return h.textContent.trim() === 'total'; });
    var lines = Array.from(t.querySelectorAll('td.node')).map(function (td) {
      var r = document.createRange(); r.selectNodeContents(td); return r.getClientRects().length;
    });
    out.nodes = {table: t.getBoundingClientRect().width, frame: frame.clientWidth,
      totalRight: total.getBoundingClientRect().right, nameLines: Math.max.apply(null, lines)};
  }
  var pre = document.createElement('pre'); pre.id = 'layout'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"#;

/// The page laid out by headless Chromium in a window `width` pixels wide.
fn layout(chrome: &Path, page: &Path, width: u32) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let measured = dir.path().join("measured.html");
    let text = std::fs::read_to_string(page).unwrap().replace("</body>", &format!("{MEASURE}</body>"));
    std::fs::write(&measured, text).unwrap();
    let out = Command::new(chrome)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--virtual-time-budget=5000"])
        .arg(format!("--window-size={width},900"))
        .arg(format!("--user-data-dir={}", dir.path().join("profile").display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", measured.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    let json = dom
        .split("<pre id=\"layout\">")
        .nth(1)
        .and_then(|r| r.split("</pre>").next())
        .unwrap_or_else(|| panic!("{dom}"));
    let json = json.replace("&quot;", "\"").replace("&amp;", "&");
    serde_json::from_str(&json).unwrap()
}

/// At 1,280 and 1,920 pixels: every filter box sits just above the left edge of its table,
/// and explain's node table fits its frame with the total column in view and each node
/// name on one line.
#[test]
fn the_reports_fit_a_laptop_and_a_desktop_screen() {
    let Some(chrome) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let demo = dir.path().join("demo.html");
    assert!(bin().arg("simulate").arg("--report").arg(&demo).output().unwrap().status.success());
    let explain = dir.path().join("explain.html");
    let args = ["explain", "--cluster", "tests/data/cluster-dump.yaml", "--pod", "team-a/trainer", "--report"];
    assert!(bin().args(args).arg(&explain).output().unwrap().status.success());
    for width in [1280, 1920] {
        for page in [&demo, &explain] {
            let l = layout(&chrome, page, width);
            let filters = l["filters"].as_array().unwrap();
            assert!(!filters.is_empty());
            for f in filters {
                let gap = f["tableTop"].as_f64().unwrap() - f["bottom"].as_f64().unwrap();
                let offset = (f["tableLeft"].as_f64().unwrap() - f["left"].as_f64().unwrap()).abs();
                assert!((0.0..24.0).contains(&gap) && offset <= 2.0, "{width}px: filter of {}: {f}", f["table"]);
            }
        }
        let l = layout(&chrome, &explain, width);
        let n = &l["nodes"];
        assert!(n["table"].as_f64().unwrap() <= n["frame"].as_f64().unwrap() + 1.0, "{width}px: {n}");
        assert!(n["totalRight"].as_f64().unwrap() <= l["width"].as_f64().unwrap(), "{width}px: {n}");
        assert_eq!(n["nameLines"].as_f64(), Some(1.0), "{width}px: a node name wraps: {n}");
    }
}
