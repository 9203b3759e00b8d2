//! `strato export`: a trace for timeline viewers (Perfetto protobuf, Chrome JSON), with what
//! the analyses add to the Perfetto file ([`perfetto_extras`]).

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Result};
use strato_analysis::device_time::busy::{busy_series, DeviceWork, DEFAULT_BUCKET_NS};
use strato_analysis::patterns::iterations::{iterations, IterationOptions};
use strato_trace::Trace;

/// Arguments of `strato export`.
#[derive(clap::Args, Debug)]
pub struct ExportArgs {
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Write Perfetto protobuf (TrackEvent) here.
    #[arg(long, value_name = "OUT")]
    perfetto: Option<PathBuf>,
    /// Write Chrome-trace JSON here.
    #[arg(long, value_name = "OUT")]
    chrome: Option<PathBuf>,
    /// Perfetto: the trace only, without what the analyses add (per-stratum thread
    /// tracks, device busy counters, iterations; see docs/export.md).
    #[arg(long)]
    raw: bool,
    /// Perfetto: add the iterations found by `strato iterations` as a track of slices
    /// under each device.
    #[arg(long, conflicts_with = "raw")]
    iterations: bool,
    /// Write the CPU samples (`strato record --sample`) as folded stacks here, one line per
    /// distinct stack, the operation as the root frame (flamegraph.pl, inferno, speedscope).
    #[arg(long, value_name = "OUT")]
    folded: Option<PathBuf>,
    /// Write the CPU samples in the Firefox Profiler's format here (profiler.firefox.com).
    #[arg(long, value_name = "OUT")]
    firefox: Option<PathBuf>,
}

/// Runs `strato export`.
pub fn run(args: ExportArgs, ctx: &crate::ctx::Ctx, out: &mut dyn Write) -> Result<()> {
    let ExportArgs {
        inputs,
        perfetto,
        chrome,
        raw,
        iterations,
        folded,
        firefox,
    } = args;
    if perfetto.is_none() && chrome.is_none() && folded.is_none() && firefox.is_none() {
        bail!("export: say where to write: --perfetto OUT, --chrome OUT, --folded OUT and/or --firefox OUT");
    }
    for path in [&perfetto, &chrome, &folded, &firefox]
        .into_iter()
        .flatten()
    {
        crate::output::refuse_inputs(path, &ctx.read_paths(&inputs))?;
    }
    if let (Some(path), None, None, None, [input]) =
        (&chrome, &perfetto, &folded, &firefox, inputs.as_slice())
    {
        if stream_chrome(ctx, input, path, &ctx.read_paths(&inputs))? {
            writeln!(out, "wrote {}", path.display())?;
            return Ok(());
        }
    }
    if let (Some(path), None, None, None, [input], false) = (
        &perfetto,
        &chrome,
        &folded,
        &firefox,
        inputs.as_slice(),
        iterations,
    ) {
        if stream_perfetto(ctx, input, path, &ctx.read_paths(&inputs), raw)? {
            writeln!(out, "wrote {}", path.display())?;
            return Ok(());
        }
    }
    let trace = ctx.engine.load(&inputs, &ctx.import_options(true)?)?;
    if let Some(path) = perfetto {
        let extras = if raw {
            strato_io::export::perfetto::Extras::default()
        } else {
            perfetto_extras(&trace, iterations)
        };
        crate::output::write_output(&path, &ctx.read_paths(&inputs), |w| {
            strato_io::export::perfetto::write_with(&trace, &extras, w)
        })?;
        writeln!(out, "wrote {}", path.display())?;
    }
    if let Some(path) = chrome {
        crate::output::write_output(&path, &ctx.read_paths(&inputs), |w| {
            strato_io::export::chrome::write(&trace, w)
        })?;
        writeln!(out, "wrote {}", path.display())?;
    }
    if let Some(path) = folded {
        let lines = super::export_samples::write_folded(&trace, &path, &ctx.read_paths(&inputs))?;
        writeln!(out, "wrote {} ({lines} stacks)", path.display())?;
    }
    if let Some(path) = firefox {
        let samples =
            super::export_samples::write_firefox(&trace, &path, &ctx.read_paths(&inputs))?;
        writeln!(out, "wrote {} ({samples} samples)", path.display())?;
    }
    Ok(())
}

/// `--chrome` alone, of one Chrome/Kineto JSON file: written without holding the trace, in two
/// streamed passes over the file ([`strato_io::export::chrome::ChromeStream`]): the first reads
/// the tables (tracks, names, flows: what fixes every pid and tid and the redacted names), the
/// second writes each batch of events as it is read. Memory is the tables and one batch;
/// time about two `strato info`s plus the writing. `false` when the input does not stream (a
/// pipe, another format, `--graph-capture`): the caller loads it whole.
fn stream_chrome(
    ctx: &crate::ctx::Ctx,
    input: &std::path::Path,
    path: &std::path::Path,
    read: &[PathBuf],
) -> Result<bool> {
    // The first pass reads no attributes: the tables do not depend on them (a difference
    // would fail the second pass's check, never pass silently).
    let options = ctx.import_options(true)?;
    let tables_only = strato_io::ImportOptions {
        keep_args: false,
        ..options.clone()
    };
    let mut drop_events = |batch: &mut Trace| {
        strato_engine::drop_batch_events(batch);
        Ok(())
    };
    let Some(tables) = ctx
        .engine
        .stream_file(input, &tables_only, &mut drop_events)?
    else {
        return Ok(false);
    };
    // The second pass tells nothing the first did not (its import notes, its progress).
    let quiet = strato_engine::Engine::new(
        ctx.engine.options().clone(),
        std::sync::Arc::new(strato_engine::Quiet),
    );
    // Nor does it read flows: they are written from the first pass's tables.
    let second = strato_io::ImportOptions {
        progress: None,
        projection: strato_io::Projection {
            flows: false,
            flow_ends: false,
            ..options.projection
        },
        ..options
    };
    crate::output::write_output(path, read, |w| {
        let mut stream = strato_io::export::chrome::ChromeStream::start(&tables, w)?;
        let mut failed: Option<std::io::Error> = None;
        let mut sink = |batch: &mut Trace| {
            stream.batch(batch).map_err(|e| {
                let message = e.to_string();
                failed = Some(e);
                message
            })
        };
        let last = quiet.stream_file(input, &second, &mut sink);
        if let Some(e) = failed {
            return Err(e);
        }
        let last = match last {
            Ok(Some(last)) => last,
            Ok(None) => return Err(std::io::Error::other("the input no longer streams")),
            Err(e) => {
                return Err(std::io::Error::other(format!(
                    "{}: second reading: {e}",
                    input.display()
                )))
            }
        };
        stream.finish(&last).map(drop)
    })?;
    Ok(true)
}

/// `--perfetto` alone (without `--iterations`, which needs the whole trace), of one
/// Chrome/Kineto JSON file: written without holding the trace, in one streamed pass
/// ([`strato_io::export::perfetto::PerfettoStream`]: each batch's slices go to sorted runs
/// spilled beside the output, merged once the import has returned the tables and flows; the
/// device busy counters are reduced batch by batch, [`DeviceWork`]). The same bytes as the
/// whole trace's export. `false` when the input does not stream (a pipe, a profile, another
/// format, `--graph-capture`): the caller loads it whole.
fn stream_perfetto(
    ctx: &crate::ctx::Ctx,
    input: &std::path::Path,
    path: &std::path::Path,
    read: &[PathBuf],
    raw: bool,
) -> Result<bool> {
    let options = ctx.import_options(true)?;
    let dir = spill_dir(path);
    let mut stream = strato_io::export::perfetto::PerfettoStream::new(&dir, !raw).map_err(|e| {
        anyhow::anyhow!(
            "{}: cannot write: its spill files cannot be made in {}: {e}",
            path.display(),
            dir.display()
        )
    })?;
    let mut work = DeviceWork::default();
    let mut failed: Option<std::io::Error> = None;
    let mut sink = |batch: &mut Trace| {
        if !raw {
            work.add(batch);
        }
        stream.batch(batch).map_err(|e| {
            let message = e.to_string();
            failed = Some(e);
            message
        })
    };
    let streamed = ctx.engine.stream_file(input, &options, &mut sink);
    if let Some(e) = failed {
        bail!("{}: spilling the export's events: {e}", input.display());
    }
    let Some(trace) = streamed? else {
        return Ok(false);
    };
    let extras = if raw {
        strato_io::export::perfetto::Extras::default()
    } else {
        strato_io::export::perfetto::Extras {
            strata_tracks: true,
            counters: busy_counters(work.series(DEFAULT_BUCKET_NS)),
            tracks: Vec::new(),
        }
    };
    crate::output::write_output(path, read, |w| stream.finish(&trace, &extras, w))?;
    Ok(true)
}

/// Where a streamed export spills: beside the output (room for about the file written), or
/// the system's temporary directory when the output is not a regular file's path (a device
/// such as `/dev/null`, a FIFO).
fn spill_dir(output: &std::path::Path) -> PathBuf {
    let regular = std::fs::metadata(output).map_or(true, |m| m.is_file());
    match output.parent() {
        Some(parent) if regular && parent.as_os_str().is_empty() => PathBuf::from("."),
        Some(parent) if regular => parent.to_path_buf(),
        _ => std::env::temp_dir(),
    }
}

/// The device busy counters of a Perfetto export: one per device, in percent.
fn busy_counters(
    series: Vec<strato_analysis::device_time::busy::BusySeries>,
) -> Vec<strato_io::export::perfetto::ExtraCounter> {
    series
        .into_iter()
        .map(|b| {
            let mut points: Vec<(i64, f64)> = b.points().map(|(t, f)| (t, 100.0 * f)).collect();
            points.push((b.end_ns, 0.0));
            strato_io::export::perfetto::ExtraCounter {
                rank: b.rank,
                owner: strato_io::export::perfetto::Owner::Device(b.device),
                name: format!("device busy % ({} ms buckets)", b.bucket_ns / 1_000_000),
                unit: "%".into(),
                points,
            }
        })
        .collect()
}

/// What the analyses add to a Perfetto export (`strato export --perfetto`): threads split
/// into one track per stratum, a device busy-fraction counter per device (10 ms buckets,
/// `strato_analysis::device_time::busy`), and with `with_iterations` the iterations of each
/// device's loops as spans under the device (extra slices). See docs/export.md.
pub(crate) fn perfetto_extras(
    trace: &Trace,
    with_iterations: bool,
) -> strato_io::export::perfetto::Extras {
    use strato_io::export::perfetto::{ExtraSpan, ExtraTrack, Extras, Owner};
    let mut extras = Extras {
        strata_tracks: true,
        counters: busy_counters(busy_series(trace, DEFAULT_BUCKET_NS)),
        ..Extras::default()
    };
    let report = with_iterations.then(|| {
        strato_report::guarded("iterations", || {
            iterations(trace, &IterationOptions::default())
        })
    });
    if let Some(Ok(report)) = report {
        for l in &report.sequences {
            extras.tracks.push(ExtraTrack {
                rank: strato_trace::RankId(l.rank_index),
                owner: Owner::Device(l.device),
                name: format!(
                    "iterations (stream {}, loop {})",
                    l.stream,
                    l.loop_index + 1
                ),
                spans: l
                    .iterations
                    .iter()
                    .map(|it| ExtraSpan {
                        start: it.start_ns,
                        end: it.end_ns,
                        name: format!("iteration {}", it.index + 1),
                        args: vec![
                            ("ops".into(), it.ops.to_string()),
                            (
                                "interval to next (ns)".into(),
                                it.interval_to_next_ns.map_or("-".into(), |g| g.to_string()),
                            ),
                        ],
                    })
                    .collect(),
            });
        }
    }
    extras
}
