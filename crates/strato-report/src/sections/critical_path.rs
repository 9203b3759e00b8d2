//! Critical path: per `ProfilerStep#N` window and rank (the whole trace when the profile has no
//! steps), what the longest dependency chain is made of
//! ([`strato_analysis::paths::critical_path::critical_path_by_step_or_whole`]): CPU ops, launches,
//! compute and communication kernels, copies, waits for the device or for peers, untraced gaps,
//! and the part of the window the path does not reach. Each bar adds up to its window. Below:
//! the operations with the most path time over all windows.
//!
//! Served by `strato view` ([`crate::ViewerLinks`]), each step and rank links to its path in the
//! viewer.
//!
//! Size at job scale: at most [`MAX_BARS`] bars (the first windows in step and rank order), the
//! tables at most [`crate::TABLE_ROWS`] rows.

use std::collections::BTreeMap;

use strato_analysis::palette::path;

use crate::html::Html;
use crate::svg::bars::{self, Axis, Bar, Chart, Segment};
use crate::svg::fmt_ns;
use crate::ReportInput;
use strato_analysis::paths::critical_path::{PathKind, WindowComposition};
use strato_trace::Ns;

use super::{analysis_or_close, cell_rows, close, close_empty, name, open, pct, share};

/// Most bars of the composition chart.
pub const MAX_BARS: usize = 48;
/// Rows of the top path operations table.
const TOP_OPS_ROWS: usize = 20;

/// The parts of a window, in drawing order: label, colour, value.
fn parts(w: &WindowComposition) -> [(&'static str, &'static str, Ns); 10] {
    let kind = |k: PathKind| w.by_kind.get(&k).copied().unwrap_or(0);
    let kernel = kind(PathKind::Kernel);
    [
        ("CPU op", path::CPU_OP, kind(PathKind::CpuOp)),
        ("launch", path::LAUNCH, kind(PathKind::Launch)),
        (
            "compute kernel",
            path::COMPUTE_KERNEL,
            kernel - w.communication_ns,
        ),
        (
            "communication kernel",
            path::COMMUNICATION_KERNEL,
            w.communication_ns,
        ),
        ("copy / memset", path::COPY, kind(PathKind::Copy)),
        (
            "waiting for the device",
            path::DEVICE_WAIT,
            kind(PathKind::SyncWait),
        ),
        (
            "waiting for peers",
            path::PEER_WAIT,
            kind(PathKind::CollectiveWait),
        ),
        ("untraced gap", path::UNTRACED, kind(PathKind::Idle)),
        ("before the path", path::BEFORE, w.before_path_ns),
        ("after the path", path::AFTER, w.after_path_ns),
    ]
}

pub(super) fn critical_path(h: &mut Html, input: &ReportInput) -> bool {
    open(
        h,
        "critical-path",
        "Critical path",
        "The longest dependency chain through CPU ops, launches, kernels, stream order, \
         synchronisations and (across ranks) collectives, per step window and rank: what the \
         step's time waited on. Window of a step: its ProfilerStep annotation's start to the \
         latest end of its CPU ops and the device ops they launched. Each bar adds up to its \
         window: the path's time by kind, plus the window's time before and after the path.",
    );
    let Some(result) = analysis_or_close(h, &input.critical_path) else {
        return false;
    };
    let windows = match result {
        Ok(windows) => windows,
        Err(e) => return close_empty(h, &format!("No critical path: {e}.")),
    };
    let rows: Vec<(
        &str,
        i64,
        &strato_analysis::paths::critical_path::RankStepPath,
    )> = windows
        .iter()
        .flat_map(|s| {
            s.ranks
                .iter()
                .map(move |r| (s.step.as_str(), r.path.rank, r))
        })
        .filter(|(_, _, r)| r.path.note.is_none())
        .collect();
    if rows.is_empty() {
        return close_empty(
            h,
            "No CPU operation, runtime call or device op for a critical path in this profile.",
        );
    }
    let total_window: Ns = rows.iter().map(|(_, _, r)| r.window.window_ns).sum();
    let on_path: Ns = rows
        .iter()
        .map(|(_, _, r)| r.window.by_kind.values().sum::<Ns>())
        .sum();
    h.elem(
        "p",
        &format!(
            "{} windows ({} per step and rank); the path covers {} of their {} ({}).",
            rows.len(),
            if windows.len() == 1 && windows[0].number == 0 {
                "the whole trace: no ProfilerStep annotation"
            } else {
                "ProfilerStep#N"
            },
            fmt_ns(on_path as f64),
            fmt_ns(total_window as f64),
            pct(share(on_path, total_window))
        ),
    );
    let legend: Vec<(String, String)> = parts(&rows[0].2.window)
        .iter()
        .map(|(label, fill, _)| ((*label).to_owned(), (*fill).to_owned()))
        .collect();
    let bars_of: Vec<Bar> = rows
        .iter()
        .take(MAX_BARS)
        .map(|(step, rank, r)| Bar {
            label: format!("{step} · rank {rank}"),
            segments: parts(&r.window)
                .iter()
                .map(|(label, fill, ns)| Segment {
                    value: *ns as f64,
                    fill: (*fill).to_owned(),
                    tip: format!(
                        "{step} · rank {rank}: {label} {} ({})",
                        fmt_ns(*ns as f64),
                        pct(share(*ns, r.window.window_ns))
                    ),
                })
                .collect(),
            note: fmt_ns(r.window.window_ns as f64),
        })
        .collect();
    if rows.len() > MAX_BARS {
        h.elem(
            "p",
            &format!(
                "The chart shows the first {MAX_BARS} of {} windows; the table has them all.",
                rows.len()
            ),
        );
    }
    h.fragment(&bars::stacked(&Chart {
        aria: "critical path composition per step and rank".into(),
        axis: Axis::Duration,
        axis_title: "window".into(),
        bars: bars_of,
        legend,
        defs: String::new(),
    }));
    let table_rows: Vec<Vec<String>> = rows
        .iter()
        .map(|(step, rank, r)| {
            let mut row = vec![
                (*step).to_owned(),
                rank.to_string(),
                fmt_ns(r.window.window_ns as f64),
                fmt_ns(r.path.length_ns as f64),
            ];
            row.extend(parts(&r.window).iter().map(|(_, _, ns)| fmt_ns(*ns as f64)));
            row
        })
        .collect();
    let links: Vec<Option<String>> = match &input.viewer {
        // The windows of `rows`, in its order, with their step numbers.
        Some(viewer) => windows
            .iter()
            .flat_map(|s| s.ranks.iter().map(move |r| (s.number, r)))
            .filter(|(_, r)| r.path.note.is_none())
            .map(|(number, r)| {
                let step = if number == 0 {
                    "whole".to_owned()
                } else {
                    number.to_string()
                };
                let (start, end) = (r.path.start_ns?, r.path.end_ns?);
                Some(viewer.range(start, end, Some(r.path.rank), &format!("path={step}")))
            })
            .collect(),
        None => Vec::new(),
    };
    h.details_table_linked(
        "Composition per step and rank",
        &[
            "step",
            "rank",
            "window",
            "path length",
            "CPU op",
            "launch",
            "compute",
            "communication",
            "copy",
            "device wait",
            "peer wait",
            "untraced",
            "before path",
            "after path",
        ],
        &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13],
        &cell_rows(table_rows),
        &links,
    );
    // Top path operations over all windows.
    let mut ops: BTreeMap<(String, &'static str, i64), (Ns, usize)> = BTreeMap::new();
    for (_, _, r) in &rows {
        for op in &r.window.top_ops {
            let slot = ops
                .entry((op.name.clone(), op.kind.as_str(), op.rank))
                .or_insert((0, 0));
            slot.0 += op.ns;
            slot.1 += 1;
        }
    }
    let mut ops: Vec<_> = ops.into_iter().collect();
    ops.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then_with(|| a.0.cmp(&b.0)));
    ops.truncate(TOP_OPS_ROWS);
    h.elem("h3", "Operations with the most critical-path time");
    let op_rows: Vec<Vec<String>> = ops
        .iter()
        .map(|((op, kind, rank), (ns, windows))| {
            vec![
                name(op),
                (*kind).to_owned(),
                rank.to_string(),
                fmt_ns(*ns as f64),
                pct(share(*ns, total_window)),
                windows.to_string(),
            ]
        })
        .collect();
    h.table(
        &[
            "operation",
            "kind",
            "rank",
            "path time",
            "of all windows",
            "windows",
        ],
        &[2, 3, 4, 5],
        &op_rows,
    );
    close(h);
    true
}
