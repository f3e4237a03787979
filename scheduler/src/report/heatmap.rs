//! SVG heatmaps: one cell a node, grouped by zone, coloured by a share from 0 to 1.

use std::collections::BTreeMap;

use maud::{Markup, html};

/// Width in pixels of one grid of cells.
const GRID_WIDTH: f64 = 560.0;
/// Largest cell, for small clusters.
const MAX_CELL: f64 = 22.0;
/// Height of a zone's caption.
const CAPTION: f64 = 18.0;
/// Gap between grids and between zones.
const GAP: f64 = 14.0;

/// One cell: a node, its colour, and the text its tooltip shows.
#[derive(Debug, Clone)]
pub struct Cell {
    /// Node name.
    pub node: String,
    /// Fill colour, such as [`colour`] gives.
    pub fill: String,
    /// Tooltip text after the node's name.
    pub tip: String,
}

/// A colour from light (0) to dark red (1), grey where there is no share.
pub fn colour(share: Option<f64>) -> String {
    // Yellow-orange-red stops, readable by people with the common colour deficiencies.
    const STOPS: [(f64, [u8; 3]); 5] = [
        (0.0, [255, 255, 229]),
        (0.25, [254, 227, 145]),
        (0.5, [254, 153, 41]),
        (0.75, [204, 76, 2]),
        (1.0, [102, 37, 6]),
    ];
    let Some(s) = share else { return "#d9d9d9".into() };
    if !s.is_finite() || s > 1.0 + 1e-9 {
        return "#000000".into();
    }
    let s = s.max(0.0);
    let k = STOPS.iter().position(|(at, _)| *at >= s).unwrap_or(STOPS.len() - 1).max(1);
    let ((a, ca), (b, cb)) = (STOPS[k - 1], STOPS[k]);
    let t = if b > a { (s - a) / (b - a) } else { 0.0 };
    let mix = |i: usize| (ca[i] as f64 + (cb[i] as f64 - ca[i] as f64) * t).round() as u8;
    format!("#{:02x}{:02x}{:02x}", mix(0), mix(1), mix(2))
}

/// Columns and cell size for zones of at most `largest` nodes.
fn layout(largest: usize) -> (usize, f64) {
    let cols = ((largest.max(1) as f64 * 4.0).sqrt().ceil() as usize).clamp(10, 120);
    (cols, (GRID_WIDTH / cols as f64).min(MAX_CELL).floor().max(3.0))
}

/// Grids side by side (one per entry of `panels`, e.g. before and after), the cells of
/// each zone together under the zone's name. `panels[p].1[z]` holds zone `z`'s cells.
pub fn grids(id: &str, titles: &[&str], zones: &[String], panels: &[Vec<Vec<Cell>>]) -> Markup {
    let largest = panels.iter().flat_map(|p| p.iter().map(Vec::len)).max().unwrap_or(0);
    let (cols, cell) = layout(largest);
    let grid_w = cols as f64 * cell;
    let mut y = CAPTION;
    let mut zone_top = Vec::new();
    for z in 0..zones.len() {
        zone_top.push(y);
        let count = panels.iter().map(|p| p.get(z).map_or(0, Vec::len)).max().unwrap_or(0);
        y += CAPTION + count.div_ceil(cols).max(1) as f64 * cell + GAP;
    }
    let width = titles.len() as f64 * (grid_w + GAP * 2.0);
    html! {
        svg id=(id) class="heatmap" xmlns="http://www.w3.org/2000/svg" width=(width) height=(y)
            viewBox=(format!("0 0 {width} {y}")) role="img" {
            @for (p, title) in titles.iter().enumerate() {
                @let x0 = p as f64 * (grid_w + GAP * 2.0);
                text x=(x0) y="13" class="panel" { (title) }
                @for (z, zone) in zones.iter().enumerate() {
                    @let top = zone_top[z];
                    @let cells = panels[p].get(z).map(Vec::as_slice).unwrap_or(&[]);
                    text x=(x0) y=(top + 13.0) class="zone" { (zone) " · " (cells.len()) " nodes" }
                    g data-panel=(title) data-zone=(zone) {
                        @for (i, c) in cells.iter().enumerate() {
                            rect x=(x0 + (i % cols) as f64 * cell) y=(top + CAPTION + (i / cols) as f64 * cell)
                                width=(cell - 1.0) height=(cell - 1.0) fill=(c.fill) data-node=(c.node) {
                                title { (c.node) ": " (c.tip) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The top of a colour scale for shares up to `max`: the smallest of 10%, 20%, 25%, 50%
/// and 100% that holds it, so that a lightly used cluster still shows its differences.
pub fn scale_top(max: f64) -> f64 {
    [0.1, 0.2, 0.25, 0.5].into_iter().find(|t| max <= *t).unwrap_or(1.0)
}

/// [`colour`] of `share` on a scale that ends at `top` (over 100% stays black).
pub fn scaled_colour(share: Option<f64>, top: f64) -> String {
    colour(share.map(|s| if s > 1.0 || top <= 0.0 { s } else { (s / top).min(1.0) }))
}

/// The legend of a scale ending at `top`.
pub fn legend(top: f64) -> Markup {
    let pct = |f: f64| format!("{:.0}%", f * 100.0);
    html! {
        svg class="legend" xmlns="http://www.w3.org/2000/svg" width="330" height="30" viewBox="0 0 330 30" {
            @for i in 0..=20 {
                rect x=(i * 12) y="0" width="12" height="12" fill=(colour(Some(i as f64 / 20.0))) {}
            }
            text x="0" y="26" { "0%" }
            text x="114" y="26" { (pct(top / 2.0)) }
            text x="222" y="26" { (pct(top)) }
            rect x="262" y="0" width="12" height="12" fill=(colour(None)) {}
            text x="278" y="10" { "none" }
        }
    }
}

/// Zones in order with the indices of their nodes; nodes without a zone come last.
pub fn by_zone<'a>(zones: impl Iterator<Item = &'a str>) -> (Vec<String>, Vec<Vec<usize>>) {
    let mut groups: BTreeMap<(bool, String), Vec<usize>> = BTreeMap::new();
    for (i, z) in zones.enumerate() {
        groups.entry((z.is_empty(), z.to_string())).or_default().push(i);
    }
    groups.into_iter().map(|((none, z), idx)| (if none { "(no zone)".to_string() } else { z }, idx)).unzip()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_run_from_light_to_dark_and_mark_missing_and_overcommitted() {
        assert_eq!(colour(Some(0.0)), "#ffffe5");
        assert_eq!(colour(Some(1.0)), "#662506");
        assert_eq!(colour(Some(0.5)), "#fe9929");
        assert_eq!(colour(None), "#d9d9d9");
        assert_eq!(colour(Some(1.5)), "#000000");
        let mid = colour(Some(0.125));
        assert!(mid.as_str() > "#fe" && mid != colour(Some(0.0)), "{mid}");
    }

    #[test]
    fn light_use_gets_a_shorter_scale() {
        assert_eq!(scale_top(0.06), 0.1);
        assert_eq!(scale_top(0.22), 0.25);
        assert_eq!(scale_top(0.9), 1.0);
        assert_eq!(scaled_colour(Some(0.05), 0.1), colour(Some(0.5)));
        assert_eq!(scaled_colour(Some(1.2), 0.1), "#000000");
    }

    #[test]
    fn large_clusters_get_small_cells_and_small_ones_large_cells() {
        assert_eq!(layout(4), (10, 22.0));
        let (cols, cell) = layout(1667);
        assert_eq!(cols, 82);
        assert!(cell * cols as f64 <= GRID_WIDTH && cell >= 6.0, "{cell}");
    }

    #[test]
    fn zones_are_sorted_with_unzoned_nodes_last() {
        let (zones, idx) = by_zone(["b", "", "a", "b"].into_iter());
        assert_eq!(zones, ["a", "b", "(no zone)"]);
        assert_eq!(idx, vec![vec![2], vec![0, 3], vec![1]]);
    }
}
