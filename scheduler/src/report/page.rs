//! The page around a report: inline style and script, so that the file opens anywhere
//! without fetching anything.

use maud::{DOCTYPE, Markup, PreEscaped, html};

const STYLE: &str = r#"
:root { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1b1f23; }
body { margin: 0 auto; max-width: 1320px; padding: 16px 24px 48px; background: #fafbfc; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; }
figure.chart { margin: 0; background: #fff; border: 1px solid #e1e4e8; padding: 6px 8px; }
figure.chart figcaption { font-size: 12px; font-weight: 600; }
figure.chart .legend { font-size: 11px; margin: 2px 0 0; }
h1 { font-size: 22px; margin: 8px 0 2px; }
h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid #d0d7de; padding-bottom: 4px; }
h3 { font-size: 14px; margin: 16px 0 6px; }
.sub { color: #57606a; margin: 0 0 12px; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; }
.card { background: #fff; border: 1px solid #d0d7de; border-radius: 6px; padding: 8px 14px; min-width: 110px; }
.card b { display: block; font-size: 20px; }
.card span { color: #57606a; font-size: 12px; }
.card.bad b { color: #b42318; }
.card.good b { color: #1a7f37; }
table { border-collapse: collapse; background: #fff; font-size: 13px; }
th, td { border: 1px solid #d0d7de; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f0f3f6; position: sticky; top: 0; }
table.sortable th { cursor: pointer; user-select: none; }
table.sortable th[data-dir="asc"]::after { content: " \25B2"; }
table.sortable th[data-dir="desc"]::after { content: " \25BC"; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.scroll { max-height: 480px; overflow: auto; border: 1px solid #d0d7de; display: inline-block; max-width: 100%; }
input.filter { display: block; margin: 4px 0 8px; padding: 4px 8px; width: 320px; }
th.plugin { max-width: 60px; white-space: normal; font-size: 12px; }
td.node { white-space: nowrap; }
td.reason { min-width: 150px; max-width: 220px; }
#nodes .scroll { display: block; }
#node-table { width: 100%; }
svg.heatmap text { font-size: 12px; fill: #1b1f23; }
svg.heatmap text.panel { font-weight: 600; }
svg.legend text { font-size: 11px; fill: #57606a; }
.verdict-selected { color: #1a7f37; font-weight: 600; }
.verdict-feasible { color: #1a7f37; }
.verdict-rejected { color: #b42318; }
.verdict-unresolvable { color: #7d1a12; }
.muted { color: #57606a; }
code { font-size: 12px; }
"#;

/// Sorts a table by a clicked header (numbers as numbers), filters rows by the text of
/// an input whose `data-table` names the table, and marks the page ready.
const SCRIPT: &str = r#"
(function () {
  "use strict";
  document.querySelectorAll("table.sortable").forEach(function (table) {
    table.querySelectorAll("th").forEach(function (th, col) {
      th.addEventListener("click", function () {
        var dir = th.dataset.dir === "asc" ? "desc" : "asc";
        table.querySelectorAll("th").forEach(function (h) { delete h.dataset.dir; });
        th.dataset.dir = dir;
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        var numeric = th.classList.contains("num");
        rows.sort(function (a, b) {
          var x = a.cells[col] ? a.cells[col].textContent : "";
          var y = b.cells[col] ? b.cells[col].textContent : "";
          var c = numeric ? (parseFloat(x) || 0) - (parseFloat(y) || 0) : x.localeCompare(y, undefined, { numeric: true });
          return dir === "asc" ? c : -c;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
  document.querySelectorAll("input.filter").forEach(function (input) {
    var table = document.getElementById(input.dataset.table);
    if (!table) { return; }
    input.addEventListener("input", function () {
      var words = input.value.toLowerCase().split(/\s+/).filter(Boolean);
      Array.prototype.forEach.call(table.tBodies[0].rows, function (r) {
        var text = r.textContent.toLowerCase();
        r.hidden = !words.every(function (w) { return text.indexOf(w) >= 0; });
      });
    });
  });
  document.body.dataset.ready = "1";
})();
"#;

/// A whole page.
pub fn page(title: &str, subtitle: &str, body: Markup) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                style { (PreEscaped(STYLE)) }
            }
            body {
                h1 { (title) }
                p.sub { (subtitle) }
                (body)
                script { (PreEscaped(SCRIPT)) }
            }
        }
    }
    .into_string()
}

/// A summary figure.
pub fn card(value: impl std::fmt::Display, label: &str, class: &str) -> Markup {
    html! { div class={ "card " (class) } { b { (value) } span { (label) } } }
}

/// A filter box for the table `table_id`.
pub fn filter(table_id: &str, placeholder: &str) -> Markup {
    html! { input.filter type="search" data-table=(table_id) placeholder=(placeholder) aria-label=(placeholder); }
}
