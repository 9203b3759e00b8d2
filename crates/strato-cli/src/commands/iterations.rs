//! `strato iterations`: DeepProf-style iteration mining per device main stream, with
//! per-iteration metrics, a summary and a diagnosis; optionally checked against the trace's
//! `ProfilerStep#N` annotations (`--check-steps`; never used for mining).

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;
use serde::Serialize;
use strato_analysis::patterns::iterations::{
    check_against_steps, iterations, IterationOptions, LoopReport, StepCheck,
};

use crate::render::units::us;
use crate::render::units::{fit_ascii, ms_num};
use crate::table::Table;

/// Arguments of `strato iterations`.
#[derive(Args, Debug)]
pub struct IterationsArgs {
    /// Trace files, directories of ranks, or a profile directory.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Number of iterations per loop, e.g. `100` or `100,20` (train, eval). Estimated when
    /// not given.
    #[arg(short = 'i', long, value_delimiter = ',', value_name = "I[,I...]")]
    iterations: Vec<usize>,
    /// Most ops one iteration may have beyond the pattern (default: pattern length / 20, at
    /// least 2).
    #[arg(long)]
    k0: Option<usize>,
    /// Start value of DeepProf's count tolerance eps (default i/2; doubled until a pattern
    /// qualifies).
    #[arg(long)]
    epsilon: Option<usize>,
    /// Most loops searched when i is estimated.
    #[arg(long, default_value_t = 3)]
    max_loops: usize,
    /// Compare the mined boundaries with the trace's ProfilerStep#N annotations.
    #[arg(long)]
    check_steps: bool,
    /// Iterations shown per loop in the table (0: all); the rest are summarised.
    #[arg(long, default_value_t = 20)]
    top: usize,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Print the per-iteration table as CSV.
    #[arg(long, conflicts_with = "json")]
    csv: bool,
}

#[derive(Serialize)]
struct Output<'a> {
    sequences: Vec<Entry<'a>>,
    not_found: &'a [strato_analysis::patterns::iterations::NoLoop],
}

#[derive(Serialize)]
struct Entry<'a> {
    #[serde(flatten)]
    report: &'a LoopReport,
    #[serde(skip_serializing_if = "Option::is_none")]
    check: Option<StepCheck>,
}

/// Runs `strato iterations`.
pub fn run(args: IterationsArgs, ctx: &crate::ctx::Ctx, out: &mut dyn Write) -> Result<()> {
    if args.iterations.contains(&0) || args.iterations.contains(&1) {
        bail!("--iterations: each loop needs at least 2 iterations");
    }
    // Only device ops' args are read (queue times, copy bytes): CPU ops' are not kept.
    let options = strato_io::ImportOptions {
        args_scope: strato_io::ArgsScope::DeviceOps,
        ..ctx.import_options(true)?
    };
    let trace = ctx.engine.load(&args.inputs, &options)?;
    let options = IterationOptions {
        iterations: args.iterations.clone(),
        epsilon: args.epsilon,
        k0: args.k0,
        max_loops: args.max_loops.max(1),
        ..IterationOptions::default()
    };
    let mut report = iterations(&trace, &options);
    strato_analysis::patterns::iterations::attach_lines_up(
        &strato_analysis::analyzed::Analyzed::new(&trace),
        &mut report,
    );
    let entries: Vec<Entry<'_>> = report
        .sequences
        .iter()
        .map(|s| Entry {
            report: s,
            check: if args.check_steps && s.loop_index == 0 {
                let same: Vec<&LoopReport> = report
                    .sequences
                    .iter()
                    .filter(|o| {
                        (o.rank_index, o.device, o.stream) == (s.rank_index, s.device, s.stream)
                    })
                    .collect();
                check_against_steps(&trace, &same)
            } else {
                None
            },
        })
        .collect();
    if args.json {
        serde_json::to_writer_pretty(
            &mut *out,
            &Output {
                sequences: entries,
                not_found: &report.not_found,
            },
        )?;
        writeln!(out)?;
        return Ok(());
    }
    if args.csv {
        let mut t = Table::new(&[
            "rank",
            "pid",
            "device",
            "stream",
            "loop",
            "index",
            "start_ns",
            "end_ns",
            "duration_ns",
            "ops",
            "inserted_ops",
            "interval_ns",
            "h2d_overlap",
            "mean_op_gap_ns",
            "bytes_in",
        ]);
        for e in &entries {
            let s = e.report;
            for i in &s.iterations {
                t.row(vec![
                    s.rank.to_string(),
                    s.pid.map_or(String::new(), |p| p.to_string()),
                    s.device.to_string(),
                    s.stream.to_string(),
                    s.loop_index.to_string(),
                    i.index.to_string(),
                    i.start_ns.to_string(),
                    i.end_ns.to_string(),
                    i.duration_ns.to_string(),
                    i.ops.to_string(),
                    i.inserted_ops.to_string(),
                    i.interval_to_next_ns
                        .map_or(String::new(), |v| v.to_string()),
                    i.h2d_overlap.map_or(String::new(), |v| format!("{v:.4}")),
                    format!("{:.1}", i.mean_op_gap_ns),
                    i.bytes_in.map_or(String::new(), |v| v.to_string()),
                ]);
            }
        }
        t.write(out, ctx.table_format(true))?;
        return Ok(());
    }
    for e in &entries {
        let s = e.report;
        writeln!(
            out,
            "rank {} pid {} device {} {} — loop {}",
            s.rank,
            s.pid.map_or("-".into(), |p| p.to_string()),
            s.device,
            s.stream_choice,
            s.loop_index
        )?;
        writeln!(
            out,
            "  {} ops on the stream; pattern {} ops starting with {:?}; i = {} ({}), eps {}, \
             k0 {}; {} exact occurrences, {} iterations\n",
            s.ops,
            s.pattern_len,
            fit_ascii(&s.pattern_first_op, 60),
            s.i,
            if s.i_estimated { "estimated" } else { "given" },
            s.epsilon,
            s.k0,
            s.exact_occurrences,
            s.iterations.len()
        )?;
        let mut t = Table::new(&[
            "#",
            "start (ns)",
            "duration ms",
            "interval ms",
            "h2d overlap %",
            "op gap us",
            "bytes in",
            "ops",
            "+ops",
        ]);
        let shown = if args.top == 0 {
            s.iterations.len()
        } else {
            args.top.min(s.iterations.len())
        };
        for i in &s.iterations[..shown] {
            t.row(vec![
                i.index.to_string(),
                i.start_ns.to_string(),
                ms_num(i.duration_ns as f64),
                i.interval_to_next_ns
                    .map_or("-".into(), |v| ms_num(v as f64)),
                i.h2d_overlap
                    .map_or("-".into(), |v| format!("{:.1}", 100.0 * v)),
                us(i.mean_op_gap_ns),
                i.bytes_in.map_or("-".into(), |v| v.to_string()),
                i.ops.to_string(),
                i.inserted_ops.to_string(),
            ]);
        }
        t.print(out, "")?;
        if shown < s.iterations.len() {
            writeln!(out, "  ... {} more iterations", s.iterations.len() - shown)?;
        }
        let m = &s.summary;
        writeln!(
            out,
            "\n  summary: mean duration {} ms; interval mean {} ms, max {} ms; mean h2d overlap \
             {:.1}%; mean op gap {} us; mean bytes in {}; busy in iterations {:.1}%; coverage \
             {:.1}% of the stream's ops",
            ms_num(m.mean_duration_ns),
            ms_num(m.mean_interval_ns),
            ms_num(m.max_interval_ns as f64),
            100.0 * m.mean_h2d_overlap,
            us(m.mean_op_gap_ns),
            m.mean_bytes_in.map_or("-".into(), |b| format!("{b:.0}")),
            100.0 * m.busy_in_iterations,
            100.0 * m.coverage
        )?;
        for d in &s.diagnosis {
            writeln!(out, "  diagnosis: {d}")?;
        }
        if let Some(c) = &e.check {
            writeln!(
                out,
                "  check vs ProfilerStep: {} steps, {} mined, {} within their step ({} exact): \
                 precision {:.2}, recall {:.2}",
                c.steps, c.mined, c.matched, c.exact, c.precision, c.recall
            )?;
        }
        writeln!(out)?;
    }
    for n in &report.not_found {
        writeln!(
            out,
            "rank {} device {} stream {}: no iterations ({} ops): {}",
            n.rank, n.device, n.stream, n.ops, n.reason
        )?;
    }
    Ok(())
}
