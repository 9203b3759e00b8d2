//! Line charts over time (memory in use per device, device busy fraction, copy bandwidth):
//! x is time from the trace start, several series share the axes, each series at most
//! [`MAX_POINTS`] points (callers downsample; [`downsample_max`] and [`downsample_mean`] help).

use super::{color, fmt_bytes, fmt_tick, nice_ticks, time_unit, Svg, WIDTH};

/// Most points drawn per series.
pub const MAX_POINTS: usize = 2000;

/// What the y values are.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum YAxis {
    Bytes,
    Percent,
    /// Plain numbers with a unit name.
    Plain(&'static str),
}

/// One series: `(time ns, value)` in time order.
#[derive(Debug, Clone)]
pub struct Series {
    pub label: String,
    pub points: Vec<(i64, f64)>,
    /// Draw as steps (a value holds until the next sample).
    pub step: bool,
}

/// A chart.
#[derive(Debug, Clone)]
pub struct LineChart {
    pub aria: String,
    pub y: YAxis,
    pub y_title: String,
    /// Time origin (the trace start): x is shown relative to it.
    pub origin_ns: i64,
    pub series: Vec<Series>,
    pub height: f64,
}

/// Keeps at most `max` points: the maximum of each of `max` equal-count buckets (so peaks
/// survive), at the time of that maximum.
pub fn downsample_max(points: &[(i64, f64)], max: usize) -> Vec<(i64, f64)> {
    if points.len() <= max || max == 0 {
        return points.to_vec();
    }
    let per = points.len().div_ceil(max);
    points
        .chunks(per)
        .filter_map(|c| {
            c.iter()
                .copied()
                .max_by(|a, b| a.1.partial_cmp(&b.1).unwrap_or(std::cmp::Ordering::Equal))
        })
        .collect()
}

/// Keeps at most `max` points: the mean of each of `max` equal-count buckets, at the bucket's
/// first time (for fractions, where the mean conserves the busy time).
pub fn downsample_mean(points: &[(i64, f64)], max: usize) -> Vec<(i64, f64)> {
    if points.len() <= max || max == 0 {
        return points.to_vec();
    }
    let per = points.len().div_ceil(max);
    points
        .chunks(per)
        .map(|c| (c[0].0, c.iter().map(|p| p.1).sum::<f64>() / c.len() as f64))
        .collect()
}

fn y_label(y: YAxis, v: f64) -> String {
    match y {
        YAxis::Bytes => fmt_bytes(v),
        YAxis::Percent => format!("{}%", fmt_tick(v)),
        YAxis::Plain(_) => fmt_tick(v),
    }
}

/// Draws the chart.
pub fn draw(chart: &LineChart) -> String {
    let left = 90.0;
    let right = 20.0;
    let top = 12.0;
    let plot_h = chart.height;
    let bottom = top + plot_h;
    let plot_w = WIDTH - left - right;
    let legend_rows = 1.0 + (chart.series.len() as f64 / 5.0).floor();
    let height = bottom + 40.0 + legend_rows * 18.0 + 8.0;
    let (t0, t1) = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold((i64::MAX, i64::MIN), |(a, b), t| (a.min(t), b.max(t)));
    let (t0, t1) = if t0 > t1 {
        (chart.origin_ns, chart.origin_ns + 1)
    } else {
        (t0, t1.max(t0 + 1))
    };
    let x0 = (t0 - chart.origin_ns) as f64;
    let x1 = (t1 - chart.origin_ns) as f64;
    let ymax = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(0.0, f64::max);
    let yticks = match chart.y {
        YAxis::Percent => nice_ticks(100.0, 4),
        YAxis::Bytes => {
            // Ticks at binary-friendly steps: pick a unit then nice ticks in it.
            let unit = [1.0, 1024.0, 1048576.0, 1073741824.0, 1099511627776.0]
                .into_iter()
                .rev()
                .find(|u| ymax >= *u)
                .unwrap_or(1.0);
            nice_ticks(ymax / unit, 4)
                .into_iter()
                .map(|t| t * unit)
                .collect()
        }
        YAxis::Plain(_) => nice_ticks(ymax, 4),
    };
    let ytop = yticks.last().copied().unwrap_or(1.0).max(f64::MIN_POSITIVE);
    let (div, unit) = time_unit(x1.max(1.0));
    let xticks = nice_ticks(x1 / div, 8);
    let xtop = xticks.last().copied().unwrap_or(1.0) * div;
    let x_of = |t: i64| left + plot_w * ((t - chart.origin_ns) as f64) / xtop.max(1.0);
    let y_of = |v: f64| bottom - plot_h * v / ytop;

    let mut svg = Svg::new(height, &chart.aria);
    for t in &yticks {
        svg.line(left, y_of(*t), left + plot_w, y_of(*t), "grid");
        svg.text(
            left - 6.0,
            y_of(*t) + 4.0,
            "end",
            "tick",
            &y_label(chart.y, *t),
            None,
        );
    }
    for t in &xticks {
        let x = left + plot_w * t * div / xtop.max(1.0);
        svg.line(x, top, x, bottom, "grid");
        svg.text(x, bottom + 14.0, "middle", "tick", &fmt_tick(*t), None);
    }
    let _ = x0;
    svg.line(left, bottom, left + plot_w, bottom, "axis");
    svg.line(left, top, left, bottom, "axis");
    svg.text(
        left + plot_w / 2.0,
        bottom + 30.0,
        "middle",
        "axt",
        &format!("time from trace start ({unit})"),
        None,
    );
    svg.vtext(16.0, top + plot_h / 2.0, &chart.y_title);
    let mut legend = Vec::new();
    for (i, s) in chart.series.iter().enumerate() {
        let c = color(i);
        let mut pts = Vec::with_capacity(s.points.len() * if s.step { 2 } else { 1 });
        for (k, &(t, v)) in s.points.iter().enumerate() {
            if s.step && k > 0 {
                pts.push((x_of(t), y_of(s.points[k - 1].1)));
            }
            pts.push((x_of(t), y_of(v)));
        }
        if chart.series.len() == 1 {
            svg.area(&pts, bottom, c);
        }
        let peak = s.points.iter().map(|p| p.1).fold(f64::MIN, f64::max);
        let tip = format!("{}: peak {}", s.label, y_label(chart.y, peak.max(0.0)));
        svg.polyline(&pts, c, Some(&tip));
        legend.push((s.label.clone(), c.to_owned()));
    }
    svg.legend(left, bottom + 52.0, &legend);
    svg.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn downsampling_bounds_points_and_keeps_the_peak() {
        let pts: Vec<(i64, f64)> = (0..10_000).map(|i| (i, (i % 97) as f64)).collect();
        let d = downsample_max(&pts, 2000);
        assert!(d.len() <= 2000);
        assert_eq!(d.iter().map(|p| p.1).fold(0.0, f64::max), 96.0);
        let m = downsample_mean(&pts, 100);
        assert!(m.len() <= 100);
        let chart = LineChart {
            aria: "m".into(),
            y: YAxis::Bytes,
            y_title: "bytes".into(),
            origin_ns: 0,
            series: vec![Series {
                label: "dev".into(),
                points: d,
                step: true,
            }],
            height: 200.0,
        };
        assert!(draw(&chart).contains("<path class=\"series\""));
    }
}
