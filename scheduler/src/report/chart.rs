//! SVG line charts of figures over a run (what the owners of cluster objects chart:
//! each quota's use against its guarantee and runtime share).

use algorithms::owners::Chart;
use maud::{Markup, html};

const WIDTH: f64 = 420.0;
const HEIGHT: f64 = 140.0;
/// Room for the axis labels.
const LEFT: f64 = 44.0;
const BOTTOM: f64 = 18.0;
/// One colour per line, in order (readable with the common colour deficiencies).
const COLOURS: [&str; 4] = ["#0072b2", "#e69f00", "#999999", "#cc79a7"];

/// The charts, side by side.
pub fn charts(charts: &[Chart]) -> Markup {
    html! {
        div.charts {
            @for c in charts { (chart(c)) }
        }
    }
}

fn chart(c: &Chart) -> Markup {
    let points = c.lines.iter().flat_map(|l| l.points.iter());
    let last = points.clone().map(|p| p.0).max().unwrap_or(0).max(1) as f64;
    let top = points.map(|p| p.1).filter(|v| v.is_finite()).fold(0.0_f64, f64::max).max(1.0);
    let x = |at: usize| LEFT + (WIDTH - LEFT - 4.0) * at as f64 / last;
    let y = |v: f64| 4.0 + (HEIGHT - BOTTOM - 4.0) * (1.0 - v / top);
    html! {
        figure.chart {
            figcaption { (c.title) }
            svg width=(WIDTH) height=(HEIGHT) viewBox=(format!("0 0 {WIDTH} {HEIGHT}")) role="img" aria-label=(c.title) {
                line x1=(LEFT) y1=(y(0.0)) x2=(WIDTH - 4.0) y2=(y(0.0)) stroke="#bbb" {}
                text x=(LEFT - 4.0) y=(y(top) + 8.0) text-anchor="end" font-size="10" { (format_value(top)) }
                text x=(LEFT - 4.0) y=(y(0.0)) text-anchor="end" font-size="10" { "0" }
                text x=(WIDTH - 4.0) y=(HEIGHT - 4.0) text-anchor="end" font-size="10" { (format!("report {}", last as usize)) }
                @for (k, l) in c.lines.iter().enumerate() {
                    polyline fill="none" stroke=(COLOURS[k % COLOURS.len()]) stroke-width="1.5"
                        points=(l.points.iter().map(|&(at, v)| format!("{:.1},{:.1}", x(at), y(v))).collect::<Vec<_>>().join(" ")) {
                        title { (l.name) }
                    }
                }
            }
            p.legend {
                @for (k, l) in c.lines.iter().enumerate() {
                    span style=(format!("color:{}", COLOURS[k % COLOURS.len()])) { "■ " } (l.name) " "
                }
            }
        }
    }
}

/// A figure for an axis: whole numbers plainly, others with two decimals.
fn format_value(v: f64) -> String {
    if v.fract() == 0.0 { format!("{v:.0}") } else { format!("{v:.2}") }
}
