//! Processes side by side (RL-Scope figure 8): one bar per process with the same cells as the
//! breakdown.

use crate::html::Html;
use crate::svg::bars::{self, Axis, Bar, Chart, Segment};
use crate::svg::fmt_ns;
use crate::ReportInput;
use std::collections::BTreeMap;
use strato_analysis::cross_stack::breakdown::Resource;
use strato_trace::Ns;

use super::palette::{breakdown_legend, fill_of};
use super::{analysis_or_close, cell_rows, close, close_empty, open, pct, share};

pub(super) fn processes(h: &mut Html, input: &ReportInput) -> bool {
    open(
        h,
        "processes",
        "Processes side by side",
        "Each process's window split by resource (RL-Scope figure 8, multi-process view): worker \
         pools and ranks that should look alike, and the slowest one.",
    );
    let Some(report) = analysis_or_close(h, &input.breakdown) else {
        return false;
    };
    if report.processes.len() < 2 {
        return close_empty(
            h,
            "Single-process profile: nothing to compare side by side.",
        );
    }
    let mut chart_bars = Vec::new();
    let mut table = Vec::new();
    for p in report.processes.iter().take(48) {
        let mut by: BTreeMap<Resource, Ns> = BTreeMap::new();
        for r in &p.rows {
            *by.entry(r.resource).or_insert(0) += r.time_ns;
        }
        let label = format!(
            "rank {} · pid {}{}",
            p.rank,
            p.pid,
            p.name
                .as_deref()
                .map(|n| format!(" {n}"))
                .unwrap_or_default()
        );
        let order = [
            Resource::Cpu,
            Resource::CpuGpu,
            Resource::Gpu,
            Resource::Idle,
        ];
        chart_bars.push(Bar {
            segments: order
                .iter()
                .map(|r| {
                    let ns = by.get(r).copied().unwrap_or(0);
                    Segment {
                        value: ns as f64,
                        fill: fill_of(*r, None),
                        tip: format!(
                            "{label}\n{}: {} ({})",
                            r.as_str(),
                            fmt_ns(ns as f64),
                            pct(share(ns, p.window_ns))
                        ),
                    }
                })
                .collect(),
            note: fmt_ns(p.window_ns as f64),
            label: label.clone(),
        });
        let get = |r| by.get(&r).copied().unwrap_or(0);
        table.push(vec![
            label,
            fmt_ns(p.window_ns as f64),
            fmt_ns(get(Resource::Cpu) as f64),
            fmt_ns(get(Resource::CpuGpu) as f64),
            fmt_ns(get(Resource::Gpu) as f64),
            fmt_ns(get(Resource::Idle) as f64),
            pct(share(
                get(Resource::Gpu) + get(Resource::CpuGpu),
                p.window_ns,
            )),
        ]);
    }
    h.fragment(&bars::stacked(&Chart {
        aria: "processes side by side".into(),
        axis: Axis::Duration,
        axis_title: "time".into(),
        bars: chart_bars,
        legend: breakdown_legend(&[]),
        defs: String::new(),
    }));
    if let Some(s) = &report.summary {
        h.elem(
            "p",
            &format!(
                "{} processes; slowest: rank {} pid {} ({}); windows spread {:.1}%; GPU active {:.1}%–{:.1}%.",
                s.processes,
                s.slowest_rank,
                s.slowest_pid,
                fmt_ns(s.slowest_window_ns as f64),
                s.window_spread_pct,
                s.gpu_active_min_pct,
                s.gpu_active_max_pct
            ),
        );
    }
    h.details_table(
        "Table: per process",
        &[
            "process",
            "window",
            "CPU",
            "CPU+GPU",
            "GPU",
            "idle",
            "GPU active",
        ],
        &[1, 2, 3, 4, 5, 6],
        &cell_rows(table),
    );
    close(h);
    true
}
