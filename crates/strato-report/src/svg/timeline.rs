//! Timeline: rows (one per device loop, process, ...) of intervals on a shared time axis
//! (iterations of each loop alternate two shades so their boundaries show). Intervals closer
//! than half a pixel are merged into one rectangle whose tooltip says how many it holds, so a
//! row never has more rectangles than the plot has pixels.

use super::{fmt_tick, nice_ticks, time_unit, Svg, WIDTH};
use crate::html::shorten;

/// One interval.
#[derive(Debug, Clone)]
pub struct Item {
    pub start_ns: i64,
    pub end_ns: i64,
    pub fill: &'static str,
    pub tip: String,
}

/// One row.
#[derive(Debug, Clone)]
pub struct Row {
    pub label: String,
    /// In start order.
    pub items: Vec<Item>,
}

/// The chart.
#[derive(Debug, Clone)]
pub struct Timeline {
    pub aria: String,
    pub origin_ns: i64,
    pub end_ns: i64,
    pub rows: Vec<Row>,
}

/// Draws the timeline.
pub fn draw(chart: &Timeline) -> String {
    let longest = chart
        .rows
        .iter()
        .map(|r| r.label.chars().count().min(36))
        .max()
        .unwrap_or(4);
    let left = (longest as f64 * 6.9 + 16.0).clamp(80.0, 270.0);
    let right = 20.0;
    let plot_w = WIDTH - left - right;
    let row_h = 22.0;
    let top = 8.0;
    let bottom = top + chart.rows.len() as f64 * (row_h + 6.0);
    let span = (chart.end_ns - chart.origin_ns).max(1) as f64;
    let (div, unit) = time_unit(span);
    let ticks = nice_ticks(span / div, 8);
    let xtop = ticks.last().copied().unwrap_or(1.0) * div;
    let x_of = |t: i64| left + plot_w * ((t - chart.origin_ns) as f64) / xtop.max(1.0);
    let mut svg = Svg::new(bottom + 40.0, &chart.aria);
    for t in &ticks {
        let x = left + plot_w * t * div / xtop.max(1.0);
        svg.line(x, top, x, bottom, "grid");
        svg.text(x, bottom + 14.0, "middle", "tick", &fmt_tick(*t), None);
    }
    svg.line(left, bottom, left + plot_w, bottom, "axis");
    svg.text(
        left + plot_w / 2.0,
        bottom + 30.0,
        "middle",
        "axt",
        &format!("time from trace start ({unit})"),
        None,
    );
    for (i, row) in chart.rows.iter().enumerate() {
        let y = top + 3.0 + i as f64 * (row_h + 6.0);
        svg.text(
            left - 6.0,
            y + row_h * 0.68,
            "end",
            "lbl",
            &shorten(&row.label, 36),
            Some(&row.label),
        );
        // Merge runs closer than half a pixel.
        let mut k = 0;
        while k < row.items.len() {
            let first = &row.items[k];
            let mut end = first.end_ns;
            let mut j = k + 1;
            while j < row.items.len()
                && x_of(row.items[j].start_ns) - x_of(end) < 0.5
                && x_of(row.items[j].end_ns) - x_of(first.start_ns) < 3.0
            {
                end = end.max(row.items[j].end_ns);
                j += 1;
            }
            let x0 = x_of(first.start_ns);
            let w = (x_of(end) - x0).max(0.8);
            if j - k == 1 {
                svg.rect(x0, y, w, row_h, first.fill, Some(&first.tip));
            } else {
                let tip = format!(
                    "{} intervals merged at this zoom; first: {}",
                    j - k,
                    first.tip
                );
                svg.rect(x0, y, w, row_h, first.fill, Some(&tip));
            }
            k = j;
        }
    }
    svg.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_rows_are_bounded_by_pixels() {
        let items: Vec<Item> = (0..100_000)
            .map(|i| Item {
                start_ns: i * 10,
                end_ns: i * 10 + 9,
                fill: "#000",
                tip: format!("it {i}"),
            })
            .collect();
        let chart = Timeline {
            aria: "t".into(),
            origin_ns: 0,
            end_ns: 1_000_000,
            rows: vec![Row {
                label: "loop".into(),
                items,
            }],
        };
        let s = draw(&chart);
        assert!(
            s.matches("<rect").count() < 2000,
            "{}",
            s.matches("<rect").count()
        );
    }
}
