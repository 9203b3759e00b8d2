//! Kernel ranking: the kernels and operations with the most device time (top
//! [`crate::KERNEL_TOP`], the rest folded).

use crate::html::Html;
use crate::svg::bars::{self, Axis, Bar, Chart, Segment};
use crate::svg::{color, fmt_ns};
use crate::{ReportInput, KERNEL_TOP};

use super::palette::IDLE_COLOR;
use super::{analysis_or_close, cell_rows, close, close_empty, name, open, pct, representatives};

pub(super) fn kernels(h: &mut Html, input: &ReportInput) -> bool {
    open(
        h,
        "kernels",
        "Kernel ranking",
        "Device ops (kernels, copies, sets) by total time, per rank; the tail is folded into one \
         bar. Concurrent streams count twice, so shares are of device time, not of wall time.",
    );
    let Some(report) = analysis_or_close(h, &input.kernels) else {
        return false;
    };
    let mut ranks: Vec<_> = report.ranks.iter().filter(|r| r.device_ops > 0).collect();
    if ranks.is_empty() {
        return close_empty(h, "No device ops in this profile: nothing to rank.");
    }
    // A job: the ranks with the most, the median and the least device time; the rest folded.
    ranks.sort_by_key(|r| std::cmp::Reverse(r.device_time_ns));
    let chosen = representatives(ranks.len());
    if chosen.len() < ranks.len() {
        h.elem(
            "p",
            &format!(
                "{} ranks ran device work; shown: the ones with the most, the median and the \
                 least device time; the other {} are folded (`strato kernels` lists every rank).",
                ranks.len(),
                ranks.len() - chosen.len()
            ),
        );
    }
    for (index, which) in chosen {
        let r = ranks[index];
        h.elem(
            "h3",
            &format!(
                "{}rank {} · {} device ops · {} device time",
                which.map(|w| format!("{w}: ")).unwrap_or_default(),
                r.rank,
                r.device_ops,
                fmt_ns(r.device_time_ns as f64)
            ),
        );
        let chart_bars: Vec<Bar> = r
            .kernels
            .iter()
            .take(KERNEL_TOP + 1)
            .enumerate()
            .map(|(i, k)| Bar {
                label: k.name.clone(),
                segments: vec![Segment {
                    value: k.total_ns as f64,
                    fill: if k.name.starts_with('(') && i == r.kernels.len() - 1 {
                        IDLE_COLOR.to_owned()
                    } else {
                        color(0).to_owned()
                    },
                    tip: format!(
                        "{}\n{} calls, total {}, mean {}, max {}",
                        name(&k.name),
                        k.count,
                        fmt_ns(k.total_ns as f64),
                        fmt_ns(k.mean_ns),
                        fmt_ns(k.max_ns as f64)
                    ),
                }],
                note: format!("{} · {}", fmt_ns(k.total_ns as f64), pct(k.share)),
            })
            .collect();
        h.fragment(&bars::stacked(&Chart {
            aria: format!("kernel ranking of rank {}", r.rank),
            axis: Axis::Duration,
            axis_title: "total time".into(),
            bars: chart_bars,
            legend: Vec::new(),
            defs: String::new(),
        }));
        let table: Vec<Vec<String>> = r
            .kernels
            .iter()
            .enumerate()
            .map(|(i, k)| {
                vec![
                    (i + 1).to_string(),
                    name(&k.name),
                    k.count.to_string(),
                    fmt_ns(k.total_ns as f64),
                    fmt_ns(k.mean_ns),
                    fmt_ns(k.std_ns),
                    fmt_ns(k.min_ns as f64),
                    fmt_ns(k.max_ns as f64),
                    pct(k.share),
                ]
            })
            .collect();
        // A kernel's link searches the viewer for its name (the folded tail has none).
        let links: Vec<Option<String>> = match &input.viewer {
            Some(viewer) => r
                .kernels
                .iter()
                .map(|k| (!k.name.starts_with("(other ")).then(|| viewer.search(&k.name)))
                .collect(),
            None => Vec::new(),
        };
        h.details_table_linked(
            "Table: kernels",
            &[
                "#", "kernel", "count", "total", "mean", "std", "min", "max", "share",
            ],
            &[0, 2, 3, 4, 5, 6, 7, 8],
            &cell_rows(table),
            &links,
        );
        let ops: Vec<Vec<String>> = r
            .ops
            .iter()
            .map(|k| {
                vec![
                    name(&k.name),
                    k.count.to_string(),
                    fmt_ns(k.total_ns as f64),
                    pct(k.share),
                ]
            })
            .collect();
        h.details_table(
            "Table: by launching operation",
            &["operation", "device ops", "total", "share"],
            &[1, 2, 3],
            &cell_rows(ops),
        );
        let lat: Vec<Vec<String>> = [
            ("launch (API end → device start)", &r.launch_latency),
            ("queued → submitted", &r.queue_latency),
            ("submitted → start", &r.submit_latency),
        ]
        .iter()
        .filter_map(|(what, l)| {
            l.as_ref().map(|l| {
                vec![
                    (*what).to_owned(),
                    l.count.to_string(),
                    fmt_ns(l.mean_ns),
                    fmt_ns(l.p50_ns as f64),
                    fmt_ns(l.p95_ns as f64),
                    fmt_ns(l.max_ns as f64),
                ]
            })
        })
        .collect();
        if !lat.is_empty() {
            h.table(
                &["latency", "count", "mean", "p50", "p95", "max"],
                &[1, 2, 3, 4, 5],
                &lat,
            );
        }
    }
    if ranks.len() > 4 {
        h.absent(&format!(
            "{} more ranks not drawn (`strato kernels` lists them all).",
            ranks.len() - 4
        ));
    }
    close(h);
    true
}
