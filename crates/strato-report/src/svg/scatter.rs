//! Roofline scatter: attained FLOP/s against arithmetic intensity (FLOP/byte), both on log
//! axes (decades), with the device's memory roof (bandwidth x intensity) and compute roofs
//! (peak per precision) when its spec is known, and the ridge point marked.

use super::{color, fmt_si, Svg, WIDTH};

/// One point.
#[derive(Debug, Clone)]
pub struct Point {
    pub label: String,
    /// FLOP/byte.
    pub intensity: f64,
    /// FLOP/s.
    pub attained: f64,
    /// Series index (colour), e.g. 0 = kernels, 1 = layers.
    pub series: usize,
    /// Radius in px (e.g. by time share).
    pub radius: f64,
}

/// A compute roof.
#[derive(Debug, Clone)]
pub struct Roof {
    pub label: String,
    pub peak_flops: f64,
}

/// The chart.
#[derive(Debug, Clone)]
pub struct Roofline {
    pub aria: String,
    pub points: Vec<Point>,
    pub series_names: Vec<String>,
    /// Memory bandwidth in bytes/s, when the device is known.
    pub bandwidth: Option<f64>,
    pub roofs: Vec<Roof>,
}

fn decade_floor(v: f64) -> f64 {
    10f64.powf(v.log10().floor())
}

fn decade_ceil(v: f64) -> f64 {
    10f64.powf(v.log10().ceil())
}

/// Draws the chart; points with non-positive values are skipped.
pub fn draw(chart: &Roofline) -> String {
    let left = 80.0;
    let right = 150.0;
    let top = 14.0;
    let plot_h = 380.0;
    let bottom = top + plot_h;
    let plot_w = WIDTH - left - right;
    let pts: Vec<&Point> = chart
        .points
        .iter()
        .filter(|p| {
            p.intensity > 0.0
                && p.attained > 0.0
                && p.intensity.is_finite()
                && p.attained.is_finite()
        })
        .collect();
    let mut xs: Vec<f64> = pts.iter().map(|p| p.intensity).collect();
    let mut ys: Vec<f64> = pts.iter().map(|p| p.attained).collect();
    for roof in &chart.roofs {
        ys.push(roof.peak_flops);
        if let Some(bw) = chart.bandwidth {
            xs.push(roof.peak_flops / bw);
        }
    }
    let xmin = decade_floor(xs.iter().copied().fold(f64::MAX, f64::min).min(1.0)).max(1e-4);
    let xmax = decade_ceil(xs.iter().copied().fold(0.0, f64::max).max(xmin * 10.0) * 2.0);
    let ymax = decade_ceil(ys.iter().copied().fold(0.0, f64::max).max(1.0) * 1.5);
    let ymin = decade_floor(ys.iter().copied().fold(f64::MAX, f64::min).max(1.0)).min(ymax / 1e3);
    let lx = |v: f64| left + plot_w * (v.log10() - xmin.log10()) / (xmax.log10() - xmin.log10());
    let ly = |v: f64| bottom - plot_h * (v.log10() - ymin.log10()) / (ymax.log10() - ymin.log10());
    let legend_h = 24.0;
    let mut svg = Svg::new(bottom + 44.0 + legend_h, &chart.aria);
    let mut d = xmin;
    while d <= xmax * 1.0001 {
        svg.line(lx(d), top, lx(d), bottom, "grid");
        svg.text(lx(d), bottom + 14.0, "middle", "tick", &fmt_si(d), None);
        d *= 10.0;
    }
    let mut d = ymin;
    while d <= ymax * 1.0001 {
        svg.line(left, ly(d), left + plot_w, ly(d), "grid");
        svg.text(left - 6.0, ly(d) + 4.0, "end", "tick", &fmt_si(d), None);
        d *= 10.0;
    }
    svg.line(left, bottom, left + plot_w, bottom, "axis");
    svg.line(left, top, left, bottom, "axis");
    svg.text(
        left + plot_w / 2.0,
        bottom + 32.0,
        "middle",
        "axt",
        "arithmetic intensity (FLOP/byte, log)",
        None,
    );
    svg.vtext(16.0, top + plot_h / 2.0, "attained FLOP/s (log)");
    if let Some(bw) = chart.bandwidth {
        for roof in &chart.roofs {
            let ridge = roof.peak_flops / bw;
            // Memory roof from the left edge (or where it enters the plot) to the ridge.
            let x_start = xmin.max(ymin / bw);
            if ridge > x_start {
                svg.line(
                    lx(x_start),
                    ly(x_start * bw),
                    lx(ridge),
                    ly(roof.peak_flops),
                    "roof",
                );
            }
            svg.line(
                lx(ridge.max(xmin)),
                ly(roof.peak_flops),
                lx(xmax),
                ly(roof.peak_flops),
                "roof",
            );
            svg.line(lx(ridge), ly(roof.peak_flops), lx(ridge), bottom, "ridge");
            svg.text(
                lx(xmax) + 4.0,
                ly(roof.peak_flops) + 4.0,
                "start",
                "roofl",
                &format!("{} {}FLOP/s", roof.label, fmt_si(roof.peak_flops)),
                Some(&format!("ridge at {} FLOP/byte", fmt_si(ridge))),
            );
        }
        svg.text(
            lx(xmin) + 6.0,
            ly(xmin.max(ymin / bw) * bw) - 6.0,
            "start",
            "roofl",
            &format!("{}B/s", fmt_si(bw)),
            None,
        );
    } else {
        for roof in &chart.roofs {
            svg.line(
                left,
                ly(roof.peak_flops),
                left + plot_w,
                ly(roof.peak_flops),
                "roof",
            );
        }
    }
    for p in &pts {
        let tip = format!(
            "{}\n{} FLOP/byte, {}FLOP/s",
            p.label,
            fmt_si(p.intensity),
            fmt_si(p.attained)
        );
        svg.circle(
            lx(p.intensity),
            ly(p.attained),
            p.radius.clamp(2.5, 12.0),
            color(p.series),
            &tip,
        );
    }
    let legend: Vec<(String, String)> = chart
        .series_names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.clone(), color(i).to_owned()))
        .collect();
    svg.legend(left, bottom + 56.0, &legend);
    svg.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_points_and_roofs() {
        let chart = Roofline {
            aria: "r".into(),
            points: vec![
                Point {
                    label: "gemm".into(),
                    intensity: 50.0,
                    attained: 5e12,
                    series: 0,
                    radius: 4.0,
                },
                Point {
                    label: "bad".into(),
                    intensity: 0.0,
                    attained: 1.0,
                    series: 0,
                    radius: 4.0,
                },
            ],
            series_names: vec!["kernels".into()],
            bandwidth: Some(2e12),
            roofs: vec![Roof {
                label: "fp32".into(),
                peak_flops: 19.5e12,
            }],
        };
        let s = draw(&chart);
        assert_eq!(s.matches("<circle").count(), 1);
        assert!(s.contains("class=\"roof\""));
    }
}
