//! `strato gpu-time`: the device temporal breakdown per rank and the idle breakdown per stream
//! (HTA's definitions; `--window hta` reproduces HTA exactly).
use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use clap::ValueEnum;
use strato_analysis::device_time::gpu_time::{
    GpuTimeOptions, GpuTimeReport, GpuTimeStream, Window,
};

use crate::ctx::Ctx;

// Arguments of `strato gpu-time` (its help text is on the variant in `app.rs`).
#[derive(clap::Args, Debug)]
pub struct GpuTimeArgs {
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    #[arg(long, value_enum, default_value_t = WindowArg::Whole)]
    window: WindowArg,
    /// Gaps shorter than this (us) count as kernel wait.
    #[arg(long, default_value_t = 30.0)]
    kernel_wait_us: f64,
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
/// The window of `strato gpu-time` (`--window`).
pub enum WindowArg {
    Whole,
    Hta,
}

/// Runs `strato gpu-time`.
pub fn run(args: GpuTimeArgs, ctx: &Ctx, out: &mut impl Write) -> Result<()> {
    let GpuTimeArgs {
        inputs,
        window,
        kernel_wait_us,
        json,
    } = args;
    // Only what the device time breakdown reads is kept (device spans, launches, steps).
    let import = strato_io::ImportOptions {
        projection: strato_io::Projection::DEVICE_TIME,
        ..ctx.import_options(false)?
    };
    let options = GpuTimeOptions {
        window: match window {
            WindowArg::Whole => Window::Whole,
            WindowArg::Hta => Window::Hta,
        },
        kernel_wait_threshold_ns: (kernel_wait_us * 1000.0).round() as i64,
    };
    // One file: its breakdown gathered while it streams (its spans never all held).
    if let Some(report) = streamed_report(&ctx.engine, &inputs, &import, &options)? {
        return present(&report, json, out);
    }
    // Rank by rank: each rank file's breakdown computed as it is imported, its events dropped.
    let streamed = ctx.engine.map_ranks(&inputs, &import, |trace| {
        strato_analysis::device_time::gpu_time::gpu_time(trace, &options).ranks
    })?;
    let report = match streamed {
        Some(streamed) => {
            let ranks = streamed.into_ranks(|rank, position| rank.rank = position);
            GpuTimeReport {
                window: options.window,
                ranks,
            }
        }
        None => strato_analysis::device_time::gpu_time::gpu_time(
            &ctx.engine.load(&inputs, &import)?,
            &options,
        ),
    };
    present(&report, json, out)
}

/// The breakdown of one Chrome/Kineto JSON file gathered while it streams
/// ([`GpuTimeStream`]: its spans are never all held); `None` when the input does not stream
/// (it is then loaded whole) or `--graph-capture` rewrites the trace first.
fn streamed_report(
    engine: &strato_engine::Engine,
    inputs: &[PathBuf],
    import: &strato_io::ImportOptions,
    options: &GpuTimeOptions,
) -> Result<Option<GpuTimeReport>> {
    let [input] = inputs else { return Ok(None) };
    if engine.attributes_graph_capture() {
        return Ok(None);
    }
    let mut stream = GpuTimeStream::new(*options);
    let mut sink = |trace: &mut strato_trace::Trace| {
        stream.add(trace);
        strato_engine::drop_batch_events(trace);
        Ok(())
    };
    let Some(trace) = engine.stream_file(input, import, &mut sink)? else {
        return Ok(None);
    };
    Ok(Some(stream.finish(&trace)))
}

/// Writes the breakdown as `--json` or as the tables.
fn present(report: &GpuTimeReport, json: bool, out: &mut impl Write) -> Result<()> {
    if json {
        serde_json::to_writer_pretty(
            &mut *out,
            &strato_engine::shapes::gpu_time::gpu_time_json(report),
        )?;
        writeln!(out)?;
    } else {
        crate::render::present::gpu_time(out, report)?;
    }
    Ok(())
}
