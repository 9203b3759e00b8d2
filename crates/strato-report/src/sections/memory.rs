//! Memory: allocated device memory over time, peaks and the largest allocations.

use crate::html::Html;
use crate::svg::line::{self, LineChart, Series, YAxis};
use crate::svg::{fmt_bytes, fmt_ns};
use crate::ReportInput;

use super::{analysis_or_close, cell_rows, close, close_empty, name, open};

pub(super) fn memory(h: &mut Html, input: &ReportInput) -> bool {
    open(
        h,
        "memory",
        "Memory over time",
        "Device memory allocated over time (bucket maxima, so peaks survive downsampling), the \
         operations that allocated most, and host↔device copies.",
    );
    let Some(report) = analysis_or_close(h, &input.memory) else {
        return false;
    };
    let origin = input.info.info.start_ns.unwrap_or(0);
    let with_series: Vec<_> = report
        .devices
        .iter()
        .filter(|d| !d.series.is_empty())
        .collect();
    if with_series.is_empty() && report.copies.is_empty() {
        let mut why = String::from(
            "No allocation events or memory counters and no copies: record with \
             profile_memory=True (Kineto [memory] events) to see memory over time.",
        );
        for n in report.notes.iter().take(2) {
            why.push(' ');
            why.push_str(n);
        }
        return close_empty(h, &why);
    }
    if with_series.is_empty() {
        h.absent("No allocation events or memory counters: only copies are shown.");
    } else {
        let series: Vec<Series> = with_series
            .iter()
            .take(8)
            .map(|d| Series {
                label: format!(
                    "rank {}{}{} · peak {}",
                    d.rank,
                    d.device
                        .map(|x| if x < 0 {
                            " host (CPU)".to_owned()
                        } else {
                            format!(" device {x}")
                        })
                        .unwrap_or_default(),
                    d.pid.map(|x| format!(" pid {x}")).unwrap_or_default(),
                    fmt_bytes(d.peak_bytes)
                ),
                points: line::downsample_max(&d.series, line::MAX_POINTS),
                step: true,
            })
            .collect();
        h.fragment(&line::draw(&LineChart {
            aria: "memory allocated over time".into(),
            y: YAxis::Bytes,
            y_title: "allocated".into(),
            origin_ns: origin,
            series,
            height: 240.0,
        }));
        let table: Vec<Vec<String>> = report
            .devices
            .iter()
            .map(|d| {
                vec![
                    d.rank.to_string(),
                    d.device.map_or("-".into(), |x| x.to_string()),
                    d.samples.to_string(),
                    fmt_bytes(d.peak_bytes),
                    d.peak_ns
                        .map_or("-".into(), |t| fmt_ns((t - origin) as f64)),
                    fmt_bytes(d.final_bytes),
                    d.capacity_bytes.map_or("-".into(), |c| fmt_bytes(c as f64)),
                ]
            })
            .collect();
        h.details_table(
            "Table: per device",
            &[
                "rank", "device", "samples", "peak", "peak at", "final", "capacity",
            ],
            &[2, 3, 4, 5, 6],
            &cell_rows(table),
        );
        let ops: Vec<Vec<String>> = report
            .devices
            .iter()
            .flat_map(|d| {
                d.ops.iter().map(move |o| {
                    vec![
                        d.device.map_or("-".into(), |x| x.to_string()),
                        name(&o.op),
                        o.allocations.to_string(),
                        fmt_bytes(o.allocated_bytes as f64),
                        o.frees.to_string(),
                        fmt_bytes(o.freed_bytes as f64),
                        fmt_bytes(o.max_bytes as f64),
                    ]
                })
            })
            .collect();
        if !ops.is_empty() {
            h.details_table(
                "Table: allocating operations",
                &[
                    "device",
                    "operation",
                    "allocations",
                    "allocated",
                    "frees",
                    "freed",
                    "largest",
                ],
                &[2, 3, 4, 5, 6],
                &cell_rows(ops),
            );
        }
    }
    if !report.copies.is_empty() {
        let table: Vec<Vec<String>> = report
            .copies
            .iter()
            .map(|c| {
                vec![
                    c.rank.to_string(),
                    c.device.to_string(),
                    c.direction.label().to_owned(),
                    c.count.to_string(),
                    fmt_ns(c.total_ns as f64),
                    c.bytes.map_or("-".into(), |b| fmt_bytes(b as f64)),
                    c.bandwidth_gb_s
                        .map_or("-".into(), |b| format!("{b:.2} GB/s")),
                ]
            })
            .collect();
        h.elem("h3", "Host↔device copies");
        h.table(
            &[
                "rank",
                "device",
                "direction",
                "count",
                "time",
                "bytes",
                "bandwidth",
            ],
            &[3, 4, 5, 6],
            &cell_rows(table),
        );
    }
    close(h);
    true
}
