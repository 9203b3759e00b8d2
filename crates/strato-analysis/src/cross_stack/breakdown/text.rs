//! The breakdown as text and CSV: the one renderer of a [`BreakdownReport`] (`strato
//! breakdown`, `strato record`).

use std::io::{Result, Write};

use strato_trace::Ns;

use super::{BreakdownReport, Resource};
use crate::text::table::Table;
use crate::text::units::{fit, ms, ms_num, pct};

/// The breakdown rows as CSV: one line per (rank, pid, phase, operation, resource, CPU level).
/// With OS data, a `thread_state` column follows `cpu_level` (empty where no OS data covers
/// the row).
pub fn write_csv(out: &mut dyn Write, report: &BreakdownReport, raw: bool) -> Result<()> {
    let states = report
        .processes
        .iter()
        .any(|p| p.rows.iter().any(|r| !r.thread_state.is_absent()));
    let mut header = vec!["rank", "pid", "phase", "operation", "resource", "cpu_level"];
    if states {
        header.push("thread_state");
    }
    header.extend(["time_ns", "window_ns"]);
    let mut t = Table::with_left(&header, &[]);
    for p in &report.processes {
        for r in &p.rows {
            let mut cells = vec![
                p.rank.to_string(),
                p.pid.to_string(),
                r.phase.clone(),
                r.operation.clone(),
                r.resource.as_str().to_owned(),
                r.cpu_level.map_or(String::new(), |l| l.as_str().to_owned()),
            ];
            if states {
                cells.push(r.thread_state.as_str().unwrap_or("").to_owned());
            }
            cells.push(r.time_ns.to_string());
            cells.push(p.window_ns.to_string());
            t.row(cells);
        }
    }
    t.csv(out, raw)?;
    Ok(())
}

/// The breakdown as text: per process its window, resource totals, the operations table
/// (`top` rows, the rest folded) and the rows by stratum. Used by `strato breakdown` and
/// `strato record`.
pub fn write_text(out: &mut dyn Write, report: &BreakdownReport, top: usize) -> Result<()> {
    if report.processes.is_empty() {
        writeln!(out, "no CPU processes in the trace: nothing to break down")?;
    }
    for p in &report.processes {
        let w = p.window_ns as f64;
        writeln!(
            out,
            "rank {} pid {} ({})  annotated thread {}  window {}  [{} .. {})",
            p.rank,
            p.pid,
            p.name.as_deref().unwrap_or("-"),
            p.annotated_tid.map_or("-".into(), |t| t.to_string()),
            ms(p.window_ns),
            p.window_start_ns,
            p.window_end_ns
        )?;
        writeln!(
            out,
            "  source {}; {} device ops attributed ({} without launch correlation)",
            p.source, p.device_ops, p.device_ops_without_launch
        )?;
        // Resource totals.
        let mut by_resource = [0i64; 4];
        for r in &p.rows {
            by_resource[r.resource as usize] += r.time_ns;
        }
        writeln!(
            out,
            "  CPU only {} ({}), CPU+GPU {} ({}), GPU only {} ({}), idle {} ({})\n",
            ms(by_resource[Resource::Cpu as usize]),
            pct(by_resource[Resource::Cpu as usize] as f64, w),
            ms(by_resource[Resource::CpuGpu as usize]),
            pct(by_resource[Resource::CpuGpu as usize] as f64, w),
            ms(by_resource[Resource::Gpu as usize]),
            pct(by_resource[Resource::Gpu as usize] as f64, w),
            ms(by_resource[Resource::Idle as usize]),
            pct(by_resource[Resource::Idle as usize] as f64, w),
        )?;
        let mut t = Table::with_left(
            &[
                "operation",
                "total ms",
                "share",
                "CPU ms",
                "CPU+GPU ms",
                "GPU ms",
                "idle ms",
                "launched GPU ms",
                "device ops",
            ],
            &[0],
        );
        for o in p.operations.iter().take(top) {
            t.row(vec![
                fit(&o.operation, 48),
                ms_num(o.total_ns as f64),
                pct(o.total_ns as f64, w),
                ms_num(o.cpu_only_ns as f64),
                ms_num(o.cpu_gpu_ns as f64),
                ms_num(o.gpu_only_ns as f64),
                ms_num(o.idle_ns as f64),
                ms_num(o.gpu_launched_ns as f64),
                o.device_ops_launched.to_string(),
            ]);
        }
        fold(
            &mut t,
            p.operations.iter().skip(top).map(|o| o.total_ns),
            w,
            9,
        );
        writeln!(out, "  by operation")?;
        t.print(out, "  ")?;
        // With OS data (`strato record --os`), the thread state is part of the row key.
        let states = p.rows.iter().any(|r| !r.thread_state.is_absent());
        let mut t = if states {
            Table::with_left(
                &[
                    "phase",
                    "operation",
                    "resource",
                    "CPU level",
                    "thread state",
                    "ms",
                    "share",
                ],
                &[0, 1, 2, 3, 4],
            )
        } else {
            Table::with_left(
                &["phase", "operation", "resource", "CPU level", "ms", "share"],
                &[0, 1, 2, 3],
            )
        };
        for r in p.rows.iter().take(top) {
            let mut cells = vec![
                fit(&r.phase, 20),
                fit(&r.operation, 40),
                r.resource.as_str().to_owned(),
                r.cpu_level
                    .map_or("-".to_owned(), |l| l.as_str().to_owned()),
            ];
            if states {
                cells.push(r.thread_state.as_str().unwrap_or("-").to_owned());
            }
            cells.push(ms_num(r.time_ns as f64));
            cells.push(pct(r.time_ns as f64, w));
            t.row(cells);
        }
        fold(
            &mut t,
            p.rows.iter().skip(top).map(|r| r.time_ns),
            w,
            if states { 7 } else { 6 },
        );
        writeln!(
            out,
            "\n  rows ({} in all; they sum to the window)",
            p.rows.len()
        )?;
        t.print(out, "  ")?;
        if !p.transitions.is_empty() {
            let mut t = Table::with_left(&["operation", "transition", "count"], &[0, 1]);
            for tr in p.transitions.iter().take(top) {
                t.row(vec![
                    fit(&tr.operation, 40),
                    format!("{} -> {}", tr.from, tr.to),
                    tr.count.to_string(),
                ]);
            }
            let rest: u64 = p.transitions.iter().skip(top).map(|t| t.count).sum();
            if p.transitions.len() > top {
                t.row(vec![
                    format!("({} more)", p.transitions.len() - top),
                    String::new(),
                    rest.to_string(),
                ]);
            }
            writeln!(out, "\n  transitions")?;
            t.print(out, "  ")?;
        }
        writeln!(out)?;
    }
    if report.unattributed_device_ops > 0 {
        writeln!(
            out,
            "{} device ops could not be attributed to a process (no launch correlation, several processes in their rank)",
            report.unattributed_device_ops
        )?;
    }
    if let Some(s) = &report.summary {
        writeln!(
            out,
            "across {} processes: slowest rank {} pid {} ({}), fastest {}, spread {:.1}% of the mean; GPU active {:.1}%..{:.1}% of the window",
            s.processes,
            s.slowest_rank,
            s.slowest_pid,
            ms(s.slowest_window_ns),
            ms(s.fastest_window_ns),
            s.window_spread_pct,
            s.gpu_active_min_pct,
            s.gpu_active_max_pct
        )?;
    }
    Ok(())
}

/// Adds a "(N more)" row with the folded total in the second column and its share in the third.
fn fold(t: &mut Table, rest: impl Iterator<Item = Ns>, whole: f64, columns: usize) {
    let rest: Vec<Ns> = rest.collect();
    if rest.is_empty() {
        return;
    }
    let total: Ns = rest.iter().sum();
    let mut row = vec![String::new(); columns];
    row[0] = format!("({} more)", rest.len());
    // Rows tables (6 columns, 7 with thread states) end with time and share.
    let time_col = match columns {
        6 | 7 => columns - 2,
        _ => 1,
    };
    row[time_col] = ms_num(total as f64);
    row[time_col + 1] = pct(total as f64, whole);
    t.row(row);
}
