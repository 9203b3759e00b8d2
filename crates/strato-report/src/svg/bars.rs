//! Horizontal bar charts: stacked (one bar per category, segments summing to its total:
//! the breakdown, per-process bars, the kernel ranking) and grouped (several bars per
//! category: transitions per operation, utilization, diff A vs B). Labels are on the left,
//! shortened to fit with the full text in a tooltip; every segment has a tooltip.

use super::{fmt_tick, nice_ticks, time_unit, Svg, WIDTH};
use crate::html::shorten;

/// What the values are.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Axis {
    /// Nanoseconds, shown in a unit that suits the largest bar.
    Duration,
    /// Percent, axis 0..100 (or the largest value when above).
    Percent,
    /// Plain counts.
    Count,
}

/// One piece of a stacked bar.
#[derive(Debug, Clone)]
pub struct Segment {
    pub value: f64,
    /// A colour or `url(#pattern)`.
    pub fill: String,
    pub tip: String,
}

/// One bar (stacked) or one category (grouped: each segment is its own bar).
#[derive(Debug, Clone)]
pub struct Bar {
    pub label: String,
    pub segments: Vec<Segment>,
    /// Text written right of the bar (its total, a share).
    pub note: String,
}

/// A chart.
#[derive(Debug, Clone)]
pub struct Chart {
    pub aria: String,
    pub axis: Axis,
    pub axis_title: String,
    pub bars: Vec<Bar>,
    /// Legend entries (label, fill).
    pub legend: Vec<(String, String)>,
    /// Pattern definitions (`<defs>...</defs>` markup from this crate).
    pub defs: String,
}

const LABEL_CHARS: usize = 44;
const CHAR_W: f64 = 6.9;

fn layout(bars: &[Bar]) -> (f64, f64) {
    let longest = bars
        .iter()
        .map(|b| b.label.chars().count().min(LABEL_CHARS))
        .max()
        .unwrap_or(4);
    let left = (longest as f64 * CHAR_W + 16.0).clamp(80.0, 320.0);
    let right = 110.0;
    (left, WIDTH - left - right)
}

fn scale(axis: Axis, max: f64, axis_title: &str) -> (f64, String, Vec<f64>) {
    match axis {
        Axis::Duration => {
            let (div, unit) = time_unit(max);
            let ticks = nice_ticks(max / div, 5);
            let title = if axis_title.is_empty() {
                unit.to_owned()
            } else {
                format!("{axis_title} ({unit})")
            };
            (div, title, ticks)
        }
        Axis::Percent => (1.0, axis_title.to_owned(), nice_ticks(max.max(100.0), 5)),
        Axis::Count => (1.0, axis_title.to_owned(), nice_ticks(max.max(1.0), 5)),
    }
}

fn axis_and_grid(
    svg: &mut Svg,
    left: f64,
    plot_w: f64,
    top: f64,
    bottom: f64,
    ticks: &[f64],
    title: &str,
) {
    let max = ticks.last().copied().unwrap_or(1.0).max(f64::MIN_POSITIVE);
    for t in ticks {
        let x = left + plot_w * t / max;
        svg.line(x, top, x, bottom, "grid");
        svg.text(x, bottom + 14.0, "middle", "tick", &fmt_tick(*t), None);
    }
    svg.line(left, bottom, left + plot_w, bottom, "axis");
    svg.line(left, top, left, bottom, "axis");
    svg.text(
        left + plot_w / 2.0,
        bottom + 30.0,
        "middle",
        "axt",
        title,
        None,
    );
}

/// A stacked horizontal bar chart.
pub fn stacked(chart: &Chart) -> String {
    let bar_h = 18.0;
    let gap = 8.0;
    let top = 10.0;
    let plot_h = chart.bars.len() as f64 * (bar_h + gap);
    let bottom = top + plot_h;
    let legend_rows = 1.0 + (chart.legend.len() as f64 / 6.0).floor();
    let height = bottom + 44.0 + legend_rows * 18.0 + 6.0;
    let (left, plot_w) = layout(&chart.bars);
    let max = chart
        .bars
        .iter()
        .map(|b| b.segments.iter().map(|s| s.value.max(0.0)).sum::<f64>())
        .fold(0.0, f64::max);
    let (div, title, ticks) = scale(chart.axis, max, &chart.axis_title);
    let axis_max = ticks.last().copied().unwrap_or(1.0).max(f64::MIN_POSITIVE) * div;
    let mut svg = Svg::new(height, &chart.aria);
    svg.markup(&chart.defs);
    axis_and_grid(&mut svg, left, plot_w, top, bottom, &ticks, &title);
    for (i, bar) in chart.bars.iter().enumerate() {
        let y = top + gap / 2.0 + i as f64 * (bar_h + gap);
        svg.text(
            left - 6.0,
            y + bar_h * 0.72,
            "end",
            "lbl",
            &shorten(&bar.label, LABEL_CHARS),
            Some(&bar.label),
        );
        let mut x = left;
        for s in &bar.segments {
            let w = plot_w * s.value.max(0.0) / axis_max;
            if w > 0.0 {
                svg.rect(x, y, w.max(0.6), bar_h, &s.fill, Some(&s.tip));
            }
            x += w;
        }
        svg.text(x + 5.0, y + bar_h * 0.72, "start", "note", &bar.note, None);
    }
    svg.legend(left, bottom + 52.0, &chart.legend);
    svg.finish()
}

/// A grouped horizontal bar chart: per bar (category), each segment is drawn as its own thin
/// bar, one under the other.
pub fn grouped(chart: &Chart) -> String {
    let sub_h = 11.0;
    let gap = 10.0;
    let top = 10.0;
    let heights: Vec<f64> = chart
        .bars
        .iter()
        .map(|b| b.segments.len().max(1) as f64 * sub_h + gap)
        .collect();
    let bottom = top + heights.iter().sum::<f64>();
    let legend_rows = 1.0 + (chart.legend.len() as f64 / 6.0).floor();
    let height = bottom + 44.0 + legend_rows * 18.0 + 6.0;
    let (left, plot_w) = layout(&chart.bars);
    let max = chart
        .bars
        .iter()
        .flat_map(|b| b.segments.iter().map(|s| s.value))
        .fold(0.0, f64::max);
    let (div, title, ticks) = scale(chart.axis, max, &chart.axis_title);
    let axis_max = ticks.last().copied().unwrap_or(1.0).max(f64::MIN_POSITIVE) * div;
    let mut svg = Svg::new(height, &chart.aria);
    svg.markup(&chart.defs);
    axis_and_grid(&mut svg, left, plot_w, top, bottom, &ticks, &title);
    let mut y = top + gap / 2.0;
    for (bar, h) in chart.bars.iter().zip(&heights) {
        svg.text(
            left - 6.0,
            y + (h - gap) / 2.0 + 4.0,
            "end",
            "lbl",
            &shorten(&bar.label, LABEL_CHARS),
            Some(&bar.label),
        );
        for (k, s) in bar.segments.iter().enumerate() {
            let w = plot_w * s.value.max(0.0) / axis_max;
            let sy = y + k as f64 * sub_h;
            svg.rect(
                left,
                sy + 1.0,
                w.max(if s.value > 0.0 { 0.6 } else { 0.0 }),
                sub_h - 2.0,
                &s.fill,
                Some(&s.tip),
            );
        }
        if !bar.note.is_empty() {
            let x_end = bar
                .segments
                .iter()
                .map(|s| plot_w * s.value.max(0.0) / axis_max)
                .fold(0.0, f64::max);
            svg.text(
                left + x_end + 5.0,
                y + (h - gap) / 2.0 + 4.0,
                "start",
                "note",
                &bar.note,
                None,
            );
        }
        y += h;
    }
    svg.legend(left, bottom + 52.0, &chart.legend);
    svg.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacked_segments_are_drawn_with_tooltips() {
        let chart = Chart {
            aria: "t".into(),
            axis: Axis::Duration,
            axis_title: "time".into(),
            bars: vec![Bar {
                label: "op <1>".into(),
                segments: vec![
                    Segment {
                        value: 2e6,
                        fill: "#000".into(),
                        tip: "a & b".into(),
                    },
                    Segment {
                        value: 1e6,
                        fill: "#fff".into(),
                        tip: "c".into(),
                    },
                ],
                note: "3 ms".into(),
            }],
            legend: vec![("CPU".into(), "#000".into())],
            defs: String::new(),
        };
        let s = stacked(&chart);
        assert_eq!(s.matches("<rect").count(), 3); // 2 segments + 1 legend swatch
        assert!(s.contains("op &lt;1&gt;"));
        assert!(s.contains("a &amp; b"));
        let g = grouped(&chart);
        assert!(g.contains("<title>c</title>"));
    }
}
