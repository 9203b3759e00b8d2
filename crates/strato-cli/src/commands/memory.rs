//! `strato memory`: allocated bytes per device over time (peak and when), top allocating ops,
//! and host<->device copies by direction (sizes, bandwidth, bandwidth over time).

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use strato_analysis::device_time::memory::{memory, MemoryOptions};

use crate::table::Table;

/// Arguments of `strato memory`.
#[derive(Args, Debug)]
pub struct MemoryArgs {
    /// Trace files, directories of ranks, or a profile directory.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Allocating ops kept per device; the rest folded (0: all).
    #[arg(long, default_value_t = 20)]
    top: usize,
    /// Most points per allocation series in JSON (bucket maxima keep the peak).
    #[arg(long, default_value_t = 512)]
    max_points: usize,
    /// Time bins of the copy bandwidth series.
    #[arg(long, default_value_t = 50)]
    bins: usize,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Print the tables as CSV.
    #[arg(long, conflicts_with = "json")]
    csv: bool,
}

fn mib(bytes: f64) -> String {
    format!("{:.2}", bytes / (1024.0 * 1024.0))
}

/// Runs `strato memory`.
pub fn run(args: MemoryArgs, ctx: &crate::ctx::Ctx, out: &mut dyn Write) -> Result<()> {
    let trace = ctx.engine.load(&args.inputs, &ctx.import_options(true)?)?;
    let report = memory(
        &trace,
        &MemoryOptions {
            max_points: args.max_points,
            bandwidth_bins: args.bins,
            top_ops: args.top,
        },
    );
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &report)?;
        writeln!(out)?;
        return Ok(());
    }
    let mut t = Table::new(&[
        "rank",
        "pid",
        "device",
        "samples",
        "peak MiB",
        "peak at (ns)",
        "min MiB",
        "final MiB",
        "capacity MiB",
    ]);
    for d in &report.devices {
        t.row(vec![
            d.rank.to_string(),
            d.pid.map_or("-".into(), |p| p.to_string()),
            d.device.map_or("-".into(), |p| p.to_string()),
            d.samples.to_string(),
            mib(d.peak_bytes),
            d.peak_ns.map_or("-".into(), |p| p.to_string()),
            mib(d.min_bytes),
            mib(d.final_bytes),
            d.capacity_bytes.map_or("-".into(), |c| mib(c as f64)),
        ]);
    }
    if !args.csv {
        writeln!(out, "allocated memory per device (allocation events)\n")?;
    }
    t.write(out, ctx.table_format(args.csv))?;
    for d in &report.devices {
        if d.ops.is_empty() {
            continue;
        }
        writeln!(out)?;
        if !args.csv {
            writeln!(
                out,
                "top allocating ops, rank {} device {}\n",
                d.rank,
                d.device.map_or("-".into(), |p| p.to_string())
            )?;
        }
        let mut t = Table::new(&[
            "<op",
            "allocs",
            "alloc MiB",
            "largest MiB",
            "frees",
            "freed MiB",
        ]);
        for r in &d.ops {
            t.row(vec![
                r.op.clone(),
                r.allocations.to_string(),
                mib(r.allocated_bytes as f64),
                mib(r.max_bytes as f64),
                r.frees.to_string(),
                mib(r.freed_bytes as f64),
            ]);
        }
        t.write(out, ctx.table_format(args.csv))?;
    }
    writeln!(out)?;
    if !args.csv {
        writeln!(out, "copies by direction\n")?;
    }
    let mut t = Table::new(&[
        "rank", "device", "dir", "count", "time us", "MiB", "mean KiB", "max MiB", "GB/s",
        "max GB/s",
    ]);
    for c in &report.copies {
        t.row(vec![
            c.rank.to_string(),
            c.device.to_string(),
            c.direction.label().to_string(),
            c.count.to_string(),
            format!("{:.1}", c.total_ns as f64 / 1e3),
            c.bytes.map_or("-".into(), |b| mib(b as f64)),
            c.mean_bytes
                .map_or("-".into(), |b| format!("{:.1}", b / 1024.0)),
            c.max_bytes.map_or("-".into(), |b| mib(b as f64)),
            c.bandwidth_gb_s.map_or("-".into(), |b| format!("{b:.2}")),
            c.max_bandwidth_gb_s
                .map_or("-".into(), |b| format!("{b:.2}")),
        ]);
    }
    t.write(out, ctx.table_format(args.csv))?;
    if !args.csv {
        for n in &report.notes {
            writeln!(out, "note: {n}")?;
        }
    }
    Ok(())
}
