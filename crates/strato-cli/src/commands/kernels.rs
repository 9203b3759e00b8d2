//! `strato kernels`: kernel statistics and launch/queue latencies (Zins table 4.1), per kernel
//! name and per launching op, ranked, top-N folded. Also holds the small aligned-table / CSV
//! writer the iterations and memory commands share.

use std::io::Write;
use std::path::PathBuf;

use crate::render::units::fit_ascii;
use crate::render::units::us;
use crate::table::{Table, TableFormat};
use anyhow::Result;
use clap::Args;
use strato_analysis::device_time::kernel_stats::{
    kernel_stats, KernelStatsReport, KernelStatsStream, Latency, StatRow,
};

/// Arguments of `strato kernels`.
#[derive(Args, Debug)]
pub struct KernelsArgs {
    /// Trace files, directories of ranks, or a profile directory.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Rows kept per table; the rest are folded into one `(other N)` row (0: all).
    #[arg(long, default_value_t = 20)]
    top: usize,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Print the tables as CSV.
    #[arg(long, conflicts_with = "json")]
    csv: bool,
}

/// Nanoseconds as microseconds with 3 decimals.
fn stat_table(rows: &[StatRow], what: &'static str, csv: bool) -> Table {
    let mut t = Table::new(&[
        "rank#", what, "count", "total us", "mean us", "std us", "min us", "max us", "share %",
    ]);
    for (k, r) in rows.iter().enumerate() {
        t.row(vec![
            (k + 1).to_string(),
            if csv {
                r.name.clone()
            } else {
                fit_ascii(&r.name, 60)
            },
            r.count.to_string(),
            us(r.total_ns as f64),
            us(r.mean_ns),
            us(r.std_ns),
            us(r.min_ns as f64),
            us(r.max_ns as f64),
            format!("{:.2}", 100.0 * r.share),
        ]);
    }
    t
}

fn latency_line(label: &str, l: &Option<Latency>) -> String {
    match l {
        None => format!("{label}: not in this source"),
        Some(l) => format!(
            "{label}: n {} mean {} us  std {} us  min {} us  p50 {} us  p95 {} us  max {} us",
            l.count,
            us(l.mean_ns),
            us(l.std_ns),
            us(l.min_ns as f64),
            us(l.p50_ns as f64),
            us(l.p95_ns as f64),
            us(l.max_ns as f64)
        ),
    }
}

/// The statistics of one Chrome/Kineto JSON file gathered while it streams
/// ([`KernelStatsStream`]: its spans are never all held); `None` when the input does not
/// stream (it is then loaded whole) or `--graph-capture` rewrites the trace first. A stored
/// profile or store streams its tables ([`strato_engine::Engine::stream_stored`]).
fn streamed_stats(
    engine: &strato_engine::Engine,
    inputs: &[std::path::PathBuf],
    options: &strato_io::ImportOptions,
    top: usize,
) -> Result<Option<KernelStatsReport>> {
    let [input] = inputs else { return Ok(None) };
    if engine.attributes_graph_capture() {
        return Ok(None);
    }
    // A stored profile or store: its spans read batch by batch (only the columns, and the
    // args rows of device ops, that the statistics read).
    let mut stream = KernelStatsStream::default();
    if let Some(trace) = engine.stream_stored(inputs, options, &mut |batch| stream.add(batch))? {
        return Ok(Some(stream.finish(&trace, top)));
    }
    let mut stream = KernelStatsStream::default();
    let mut sink = |trace: &mut strato_trace::Trace| {
        stream.add(trace);
        strato_engine::drop_batch_events(trace);
        Ok(())
    };
    let Some(trace) = engine.stream_file(input, options, &mut sink)? else {
        return Ok(None);
    };
    Ok(Some(stream.finish(&trace, top)))
}

/// Runs `strato kernels`.
pub fn run(args: KernelsArgs, ctx: &crate::ctx::Ctx, out: &mut dyn Write) -> Result<()> {
    // Only spans are read, and only device ops' args (queue times, copy bytes): CPU ops' args,
    // instants, counters and flows are not kept.
    let options = strato_io::ImportOptions {
        args_scope: strato_io::ArgsScope::DeviceOps,
        projection: strato_io::Projection::SPANS,
        ..ctx.import_options(true)?
    };
    // One file: its statistics gathered while it streams (its spans never all held).
    if let Some(report) = streamed_stats(&ctx.engine, &args.inputs, &options, args.top)? {
        return present(&report, &args, ctx.table_format(args.csv), out);
    }
    // Rank by rank: each rank file's statistics computed as it is imported, its events dropped.
    let streamed = ctx.engine.map_ranks(&args.inputs, &options, |trace| {
        kernel_stats(trace, args.top).ranks
    })?;
    let report = match streamed {
        Some(streamed) => {
            let ranks = streamed.into_ranks(|rank, position| rank.rank = position);
            KernelStatsReport { ranks }
        }
        None => kernel_stats(&ctx.engine.load(&args.inputs, &options)?, args.top),
    };
    present(&report, &args, ctx.table_format(args.csv), out)
}

/// Writes the statistics as `--json`, `--csv` or the tables.
fn present(
    report: &KernelStatsReport,
    args: &KernelsArgs,
    format: TableFormat,
    out: &mut dyn Write,
) -> Result<()> {
    if args.json {
        serde_json::to_writer_pretty(&mut *out, report)?;
        writeln!(out)?;
        return Ok(());
    }
    for r in &report.ranks {
        if !args.csv {
            writeln!(
                out,
                "rank {} ({}): {} device ops, {} us device time\n",
                r.rank,
                r.source,
                r.device_ops,
                us(r.device_time_ns as f64)
            )?;
        }
        stat_table(&r.kernels, "<kernel", args.csv).write(out, format)?;
        writeln!(out)?;
        stat_table(&r.ops, "<launching op", args.csv).write(out, format)?;
        if !args.csv {
            writeln!(out)?;
            writeln!(
                out,
                "{}",
                latency_line(
                    "launch latency (API end -> device start)",
                    &r.launch_latency
                )
            )?;
            writeln!(
                out,
                "{}",
                latency_line("queue latency (queued -> submit)", &r.queue_latency)
            )?;
            writeln!(
                out,
                "{}",
                latency_line("submit latency (submit -> start)", &r.submit_latency)
            )?;
            writeln!(out)?;
        }
    }
    Ok(())
}
