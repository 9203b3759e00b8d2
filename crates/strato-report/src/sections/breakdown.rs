//! Time breakdown (RL-Scope figure 4 top): per process, time per (resource, stratum) cell
//! overall and per operation.

use crate::html::Html;
use crate::svg::bars::{self, Axis, Bar, Chart, Segment};
use crate::svg::fmt_ns;
use crate::ReportInput;
use std::collections::BTreeMap;
use strato_analysis::cross_stack::breakdown::{ProcessBreakdown, Resource};
use strato_trace::{Level, Ns};

use super::palette::{breakdown_legend, fill_of, level_label};
use super::{
    analysis_or_close, cell_rows, close, close_empty, name, open, pct, representatives, share,
};
use crate::TABLE_ROWS;

/// Time per (resource, CPU level) cell.
type Cells = BTreeMap<(Resource, Option<Level>), Ns>;

/// Per operation, time per (resource, level) cell; operations ordered by total.
fn cells_by_operation(p: &ProcessBreakdown) -> Vec<(String, Ns, Cells)> {
    let mut ops: BTreeMap<String, BTreeMap<(Resource, Option<Level>), Ns>> = BTreeMap::new();
    for row in &p.rows {
        *ops.entry(row.operation.clone())
            .or_default()
            .entry((row.resource, row.cpu_level))
            .or_insert(0) += row.time_ns;
    }
    let mut out: Vec<_> = ops
        .into_iter()
        .map(|(op, cells)| {
            let total: Ns = cells.values().sum();
            (op, total, cells)
        })
        .collect();
    out.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

fn segments(
    label: &str,
    cells: &BTreeMap<(Resource, Option<Level>), Ns>,
    window: Ns,
) -> Vec<Segment> {
    // Order: CPU, CPU+GPU, GPU, idle; within a resource by stratum.
    let mut keys: Vec<_> = cells.keys().copied().collect();
    keys.sort_by_key(|(r, l)| {
        let ro = match r {
            Resource::Cpu => 0,
            Resource::CpuGpu => 1,
            Resource::Gpu => 2,
            Resource::Idle => 3,
        };
        (ro, l.map_or(0, |l| l.code()))
    });
    keys.into_iter()
        .map(|(r, l)| {
            let ns = cells[&(r, l)];
            let what = match l {
                Some(l) => format!("{} / {}", r.as_str(), level_label(l)),
                None => r.as_str().to_owned(),
            };
            Segment {
                value: ns as f64,
                fill: fill_of(r, l),
                tip: format!(
                    "{label}\n{what}: {} ({} of the window)",
                    fmt_ns(ns as f64),
                    pct(share(ns, window))
                ),
            }
        })
        .collect()
}

/// Thread states in display order with their fills (the OS level, `strato record --os`);
/// `None` = no OS data covers the time.
const STATE_FILLS: [(Option<&str>, &str); 7] = strato_analysis::palette::THREAD_STATES;

/// The annotated thread's states per operation (the breakdown's `thread_state` column), as one
/// bar per operation; None when the process has no OS data.
fn thread_state_chart(p: &ProcessBreakdown) -> Option<Chart> {
    if p.rows.iter().all(|r| r.thread_state.is_absent()) {
        return None;
    }
    let mut ops: BTreeMap<&str, BTreeMap<Option<&str>, Ns>> = BTreeMap::new();
    for r in &p.rows {
        *ops.entry(&r.operation)
            .or_default()
            .entry(r.thread_state.as_str())
            .or_insert(0) += r.time_ns;
    }
    let mut ops: Vec<_> = ops.into_iter().collect();
    ops.sort_by_key(|(op, states)| (std::cmp::Reverse(states.values().sum::<Ns>()), *op));
    let bars: Vec<Bar> = ops
        .iter()
        .take(BREAKDOWN_BARS)
        .map(|(op, states)| {
            let total: Ns = states.values().sum();
            Bar {
                label: (*op).to_owned(),
                segments: STATE_FILLS
                    .iter()
                    .filter_map(|&(state, fill)| {
                        let ns = *states.get(&state)?;
                        Some(Segment {
                            value: ns as f64,
                            fill: fill.to_owned(),
                            tip: format!(
                                "{op}\n{}: {} ({} of the operation)",
                                state.unwrap_or("no OS data"),
                                fmt_ns(ns as f64),
                                pct(share(ns, total))
                            ),
                        })
                    })
                    .collect(),
                note: fmt_ns(total as f64),
            }
        })
        .collect();
    Some(Chart {
        aria: format!("thread states per operation of pid {}", p.pid),
        axis: Axis::Duration,
        axis_title: "time".into(),
        bars,
        legend: STATE_FILLS
            .iter()
            .map(|&(s, f)| (s.unwrap_or("no OS data").to_owned(), f.to_owned()))
            .collect(),
        defs: String::new(),
    })
}

const BREAKDOWN_BARS: usize = 14;

pub(super) fn breakdown(h: &mut Html, input: &ReportInput) -> bool {
    open(
        h,
        "breakdown",
        "Where the time goes",
        "Per operation: the time the CPU only, the GPU only, or both were busy, and the stratum \
         the CPU was in (colour = resource, pattern = stratum; RL-Scope figure 4). Rows sum to \
         the process's window exactly.",
    );
    let Some(report) = analysis_or_close(h, &input.breakdown) else {
        return false;
    };
    if report.processes.is_empty() {
        return close_empty(
            h,
            "No process has CPU spans or attributed device work: nothing to break down.",
        );
    }
    let mut levels: Vec<Level> = report
        .processes
        .iter()
        .flat_map(|p| p.rows.iter().filter_map(|r| r.cpu_level))
        .collect();
    levels.sort();
    levels.dedup();
    let mut processes: Vec<&ProcessBreakdown> = report.processes.iter().collect();
    processes.sort_by_key(|p| std::cmp::Reverse(p.window_ns));
    let chosen = representatives(processes.len());
    if chosen.len() < processes.len() {
        // A job: every process side by side (whole window), details for three of them.
        h.elem(
            "h3",
            &format!(
                "{} processes side by side (longest window first); details below for the \
                 slowest, median and fastest, the other {} folded",
                processes.len(),
                processes.len() - chosen.len()
            ),
        );
        let side: Vec<Bar> = processes
            .iter()
            .take(TABLE_ROWS)
            .map(|p| {
                let mut whole: Cells = BTreeMap::new();
                for row in &p.rows {
                    *whole.entry((row.resource, row.cpu_level)).or_insert(0) += row.time_ns;
                }
                let label = format!("rank {} · pid {}", p.rank, p.pid);
                Bar {
                    segments: segments(&label, &whole, p.window_ns),
                    label,
                    note: fmt_ns(p.window_ns as f64),
                }
            })
            .collect();
        h.fragment(&bars::stacked(&Chart {
            aria: "time breakdown of every process".into(),
            axis: Axis::Duration,
            axis_title: "time".into(),
            bars: side,
            legend: breakdown_legend(&levels),
            defs: String::new(),
        }));
    }
    for (index, which) in chosen {
        let p = processes[index];
        h.elem(
            "h3",
            &format!(
                "{}rank {} · pid {}{} · window {}",
                which.map(|w| format!("{w}: ")).unwrap_or_default(),
                p.rank,
                p.pid,
                p.name
                    .as_deref()
                    .map(|n| format!(" ({n})"))
                    .unwrap_or_default(),
                fmt_ns(p.window_ns as f64)
            ),
        );
        let ops = cells_by_operation(p);
        let mut whole: BTreeMap<(Resource, Option<Level>), Ns> = BTreeMap::new();
        for (_, _, cells) in &ops {
            for (k, v) in cells {
                *whole.entry(*k).or_insert(0) += v;
            }
        }
        let mut chart_bars = vec![Bar {
            label: "whole window".into(),
            segments: segments("whole window", &whole, p.window_ns),
            note: fmt_ns(p.window_ns as f64),
        }];
        let mut rest: BTreeMap<(Resource, Option<Level>), Ns> = BTreeMap::new();
        let mut rest_n = 0;
        for (i, (op, total, cells)) in ops.iter().enumerate() {
            if i < BREAKDOWN_BARS {
                chart_bars.push(Bar {
                    label: op.clone(),
                    segments: segments(op, cells, p.window_ns),
                    note: format!(
                        "{} · {}",
                        fmt_ns(*total as f64),
                        pct(share(*total, p.window_ns))
                    ),
                });
            } else {
                rest_n += 1;
                for (k, v) in cells {
                    *rest.entry(*k).or_insert(0) += v;
                }
            }
        }
        if rest_n > 0 {
            let label = format!("({rest_n} more operations)");
            let total: Ns = rest.values().sum();
            chart_bars.push(Bar {
                segments: segments(&label, &rest, p.window_ns),
                label,
                note: format!(
                    "{} · {}",
                    fmt_ns(total as f64),
                    pct(share(total, p.window_ns))
                ),
            });
        }
        h.fragment(&bars::stacked(&Chart {
            aria: format!("time breakdown of pid {}", p.pid),
            axis: Axis::Duration,
            axis_title: "time".into(),
            bars: chart_bars,
            legend: breakdown_legend(&levels),
            defs: String::new(),
        }));
        let states = thread_state_chart(p);
        if let Some(chart) = &states {
            h.elem(
                "p",
                "Thread states of the annotated thread per operation (OS level, `strato record \
                 --os`): running, runnable (waiting for a core), blocked by cause.",
            );
            h.fragment(&bars::stacked(chart));
        }
        let mut rows: Vec<_> = p.rows.iter().collect();
        rows.sort_by_key(|r| std::cmp::Reverse(r.time_ns));
        let table: Vec<Vec<String>> = rows
            .iter()
            .map(|r| {
                let mut cells = vec![
                    name(&r.phase),
                    name(&r.operation),
                    r.resource.as_str().to_owned(),
                    r.cpu_level.map_or("-".into(), |l| l.as_str().to_owned()),
                ];
                if states.is_some() {
                    cells.push(r.thread_state.as_str().unwrap_or("-").to_owned());
                }
                cells.push(fmt_ns(r.time_ns as f64));
                cells.push(pct(share(r.time_ns, p.window_ns)));
                cells
            })
            .collect();
        let mut headers = vec!["phase", "operation", "resource", "CPU stratum"];
        if states.is_some() {
            headers.push("thread state");
        }
        headers.extend(["time", "share"]);
        let numeric = [headers.len() - 2, headers.len() - 1];
        h.details_table(
            &format!("Table: {} rows (they sum to the window)", p.rows.len()),
            &headers,
            &numeric,
            &cell_rows(table),
        );
        let ops_table: Vec<Vec<String>> = p
            .operations
            .iter()
            .map(|o| {
                vec![
                    name(&o.operation),
                    fmt_ns(o.total_ns as f64),
                    fmt_ns(o.cpu_only_ns as f64),
                    fmt_ns(o.cpu_gpu_ns as f64),
                    fmt_ns(o.gpu_only_ns as f64),
                    fmt_ns(o.idle_ns as f64),
                    fmt_ns(o.gpu_launched_ns as f64),
                    o.device_ops_launched.to_string(),
                ]
            })
            .collect();
        h.details_table(
            "Table: per operation",
            &[
                "operation",
                "total",
                "CPU only",
                "CPU+GPU",
                "GPU only",
                "idle",
                "GPU launched",
                "device ops",
            ],
            &[1, 2, 3, 4, 5, 6, 7],
            &cell_rows(ops_table),
        );
    }
    close(h);
    true
}
