//! Utilization reality check (F.11): device busy time at several sampling periods and the
//! busy fraction over time.

use crate::html::Html;
use crate::svg::bars::{self, Axis, Bar, Chart, Segment};
use crate::svg::line::{self, LineChart, Series, YAxis};
use crate::svg::{color, fmt_ns};
use crate::ReportInput;
use strato_analysis::device_time::util::UtilResult;

use super::{analysis_or_close, base_name, cell_rows, close, close_empty, open};

fn rank_label(input: &ReportInput, rank: u32) -> String {
    input
        .info
        .info
        .sources
        .get(rank as usize)
        .map(|s| match s.rank {
            Some(r) => format!("rank {r}"),
            None => base_name(&s.source).to_owned(),
        })
        .unwrap_or_else(|| format!("rank {rank}"))
}

pub(super) fn utilization(h: &mut Html, input: &ReportInput) -> bool {
    open(
        h,
        "utilization",
        "Utilization reality check",
        "What nvidia-smi would report (the share of sampling periods with any device op \
         running) beside the true busy time (the union of device work over the window). A high \
         sampled figure with a low true one means the GPU is mostly waiting (RL-Scope F.11).",
    );
    let Some(UtilResult(report)) = analysis_or_close(h, &input.util) else {
        return false;
    };
    if report.devices.is_empty() {
        return close_empty(
            h,
            "No device work (kernels, copies, sets) in this profile: it ran on the CPU only.",
        );
    }
    let periods: Vec<f64> = report
        .devices
        .first()
        .map(|d| d.sampled.iter().map(|s| s.period_s).collect())
        .unwrap_or_default();
    let period_label = |p: f64| {
        if p < 1.0 {
            format!("sampled, period {:.0} ms", p * 1000.0)
        } else {
            format!("sampled, period {p} s")
        }
    };
    let chart_bars: Vec<Bar> = report
        .devices
        .iter()
        .take(32)
        .map(|d| {
            let label = format!(
                "{} · device {}{}",
                base_name(&d.source),
                d.device,
                d.name
                    .as_deref()
                    .map(|n| format!(" ({n})"))
                    .unwrap_or_default()
            );
            let mut segs = vec![Segment {
                value: d.true_busy_pct,
                fill: color(0).to_owned(),
                tip: format!(
                    "{label}\ntrue busy: {:.1}% ({} of {})",
                    d.true_busy_pct,
                    fmt_ns(d.busy_ns as f64),
                    fmt_ns(d.window_ns as f64)
                ),
            }];
            for (i, s) in d.sampled.iter().enumerate() {
                segs.push(Segment {
                    value: s.sampled_pct,
                    fill: color(i + 1).to_owned(),
                    tip: format!(
                        "{label}\n{}: {:.1}% ({} of {} periods active)",
                        period_label(s.period_s),
                        s.sampled_pct,
                        s.active_periods,
                        s.periods
                    ),
                });
            }
            Bar {
                label,
                segments: segs,
                note: String::new(),
            }
        })
        .collect();
    let mut legend = vec![("true busy".to_owned(), color(0).to_owned())];
    for (i, p) in periods.iter().enumerate() {
        legend.push((period_label(*p), color(i + 1).to_owned()));
    }
    h.fragment(&bars::grouped(&Chart {
        aria: "utilization reality check".into(),
        axis: Axis::Percent,
        axis_title: "% of the window".into(),
        bars: chart_bars,
        legend,
        defs: String::new(),
    }));
    if !input.busy.is_empty() {
        let origin = input.info.info.start_ns.unwrap_or(0);
        let bucket = input.busy[0].bucket_ns;
        let series: Vec<Series> = input
            .busy
            .iter()
            .take(8)
            .map(|b| {
                let pts: Vec<(i64, f64)> = b.points().map(|(t, f)| (t, 100.0 * f)).collect();
                Series {
                    label: format!("{} · device {}", rank_label(input, b.rank.0), b.device),
                    points: line::downsample_mean(&pts, line::MAX_POINTS),
                    step: true,
                }
            })
            .collect();
        h.elem(
            "h3",
            &format!(
                "Device busy over time ({} buckets, averaged when zoomed out)",
                fmt_ns(bucket as f64)
            ),
        );
        h.fragment(&line::draw(&LineChart {
            aria: "device busy over time".into(),
            y: YAxis::Percent,
            y_title: "busy %".into(),
            origin_ns: origin,
            series,
            height: 180.0,
        }));
    }
    let table: Vec<Vec<String>> = report
        .devices
        .iter()
        .map(|d| {
            let mut row = vec![
                base_name(&d.source).to_owned(),
                d.device.to_string(),
                d.name.clone().unwrap_or_else(|| "-".into()),
                d.device_ops.to_string(),
                fmt_ns(d.window_ns as f64),
                fmt_ns(d.busy_ns as f64),
                format!("{:.1}%", d.true_busy_pct),
            ];
            row.extend(d.sampled.iter().map(|s| format!("{:.1}%", s.sampled_pct)));
            row
        })
        .collect();
    let mut header: Vec<String> = [
        "source",
        "device",
        "name",
        "ops",
        "window",
        "busy",
        "true busy",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    header.extend(periods.iter().map(|p| period_label(*p)));
    let header_refs: Vec<&str> = header.iter().map(|s| s.as_str()).collect();
    let numeric: Vec<usize> = (3..header.len()).collect();
    h.details_table(
        "Table: per device",
        &header_refs,
        &numeric,
        &cell_rows(table),
    );
    close(h);
    true
}
