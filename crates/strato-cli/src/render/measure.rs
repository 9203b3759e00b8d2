//! `strato measure` results as text: a run's ranking and the comparison with the serial
//! harness (`--compare-serial`).

use anyhow::Result;
use std::io::Write;
use strato_analysis::text::units::ms_or_dash;
use strato_measure::compare::{self, CompareReport};
use strato_measure::engine::RunReport;

pub(crate) fn print_run(out: &mut dyn Write, r: &RunReport) -> Result<()> {
    writeln!(
        out,
        "device: {}",
        r.device.as_deref().unwrap_or("(none started)")
    )?;
    writeln!(
        out,
        "{} candidates in {:.2} s; {}",
        r.candidates,
        r.total_s,
        r.counts
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    )?;
    writeln!(
        out,
        "workers started {}, replaced {}",
        r.workers_started, r.workers_replaced
    )?;
    let dps: Vec<String> = r.dp_timeline.iter().map(|p| p.dp.to_string()).collect();
    writeln!(out, "parallelism by round: {}", dps.join(" "))?;
    for d in &r.delta_by_dp {
        writeln!(
            out,
            "  dp {}: delta_mean {:.2}% over {} rounds (max {:.2}%)",
            d.dp,
            100.0 * d.delta_mean,
            d.rounds,
            100.0 * d.delta_max
        )?;
    }
    writeln!(
        out,
        "{:<28} {:>14} {:>12} {:>12} {:>4}",
        "candidate", "status", "measured", "reported", "dp"
    )?;
    for c in &r.results {
        writeln!(
            out,
            "{:<28} {:>14} {:>12} {:>12} {:>4}",
            c.name,
            c.status,
            ms_or_dash(c.parallel_latency_ns.or(c.isolated_latency_ns)),
            ms_or_dash(c.reported_latency_ns),
            c.dp
        )?;
    }
    match &r.best {
        Some(b) => writeln!(
            out,
            "best: {} at {} (re-measured alone)",
            b.name,
            ms_or_dash(Some(b.latency_ns))
        )?,
        None => writeln!(out, "best: none succeeded")?,
    }
    Ok(())
}

pub(crate) fn print_compare(out: &mut dyn Write, r: &CompareReport) -> Result<()> {
    writeln!(out, "device: {}", r.device.as_deref().unwrap_or("-"))?;
    writeln!(out, "{} candidates, {} repeats", r.candidates, r.repeats)?;
    let row = |out: &mut dyn Write, name: &str, s: &compare::Side| -> std::io::Result<()> {
        writeln!(
            out,
            "{:<22} {:>9.2} s  best {:<28} {:>12} (isolated)",
            name,
            s.time_s,
            s.best.as_deref().unwrap_or("-"),
            ms_or_dash(s.best_latency_ns)
        )
    };
    row(out, "serial (fresh process)", &r.serial)?;
    if let Some(p) = &r.pinned_dp1 {
        row(out, "engine, dp pinned 1", p)?;
    }
    row(out, "engine, dp by REACT", &r.parallel)?;
    if let Some(t) = &r.true_best {
        writeln!(
            out,
            "true best: {} at {} +- {:.2}% ({} candidates re-measured alone)",
            t.name,
            ms_or_dash(Some(t.median_ns)),
            100.0 * t.ci95_ns / t.median_ns,
            r.truth.len()
        )?;
    }
    let gap = |g: Option<f64>| g.map_or("-".to_string(), |g| format!("{g:+.2}%"));
    if r.runs.len() > 1 {
        writeln!(
            out,
            "{:>4} {:>10} {:>10} {:>10} {:>10}  (gaps to the true best)",
            "run", "time red.", "engine", "dp 1", "serial"
        )?;
        for (k, s) in r.runs.iter().enumerate() {
            writeln!(
                out,
                "{:>4} {:>9.1}% {:>10} {:>10} {:>10}",
                k + 1,
                s.time_reduction_pct,
                gap(s.best_gap_pct),
                gap(s.pinned_best_gap_pct),
                gap(s.serial_best_gap_pct)
            )?;
        }
        writeln!(
            out,
            "worst gap: engine {}, dp 1 {}, serial {}",
            gap(r.worst_gap_pct),
            gap(r.worst_pinned_gap_pct),
            gap(r.worst_serial_gap_pct)
        )?;
    }
    writeln!(
        out,
        "time reduction{}: {:.1}%",
        if r.runs.len() > 1 { " (median)" } else { "" },
        r.time_reduction_pct
    )?;
    if let (Some(w), Some(p)) = (r.warm_workers_reduction_pct, r.parallelism_reduction_pct) {
        writeln!(
            out,
            "  warm workers (serial -> dp 1): {w:.1}%; parallelism (dp 1 -> REACT): {p:.1}%"
        )?;
    }
    writeln!(
        out,
        "gap to the true best{}: engine {}, dp 1 {}, serial {}",
        if r.runs.len() > 1 { " (median)" } else { "" },
        gap(r.best_gap_pct),
        gap(r.pinned_best_gap_pct),
        gap(r.serial_best_gap_pct)
    )?;
    let dps: Vec<String> = r
        .parallel_detail
        .dp_timeline
        .iter()
        .map(|p| p.dp.to_string())
        .collect();
    writeln!(out, "parallelism by round: {}", dps.join(" "))?;
    for d in &r.parallel_detail.delta_by_dp {
        writeln!(
            out,
            "  dp {}: delta_mean {:.2}% over {} rounds",
            d.dp,
            100.0 * d.delta_mean,
            d.rounds
        )?;
    }
    Ok(())
}
