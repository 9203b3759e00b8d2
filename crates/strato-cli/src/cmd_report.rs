//! `strato report PATH -o report.html`: writes the self-contained HTML report
//! (`strato_report`); `--baseline OTHER` adds the diff with another profile; `strato
//! completions SHELL` prints shell completions. Wiring only: the analyses are in
//! `strato-analysis`, which of them a report shows and the HTML in `strato-report`.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::Args;
use strato_analysis::analyzed::Analyzed;
use strato_analysis::busy::{busy_series, DEFAULT_BUCKET_NS};
use strato_analysis::iterations::{iterations, IterationOptions};
use strato_report::{ReportInput, ReportOptions};
use strato_trace::Trace;

/// Arguments of `strato report`.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Trace files, directories of ranks, or a profile directory.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// The HTML file to write.
    #[arg(short, long, value_name = "OUT.html")]
    output: PathBuf,
    /// Compare with this profile (the baseline, A) and add a diff section.
    #[arg(long, value_name = "PATH")]
    baseline: Option<PathBuf>,
    /// Page title (default: the input's file name).
    #[arg(long)]
    title: Option<String>,
}

/// The report's progress steps on the terminal.
impl strato_report::Progress for crate::term::Steps {
    fn step(&mut self, what: &str) {
        crate::term::Steps::step(self, what);
    }
}

fn default_title(inputs: &[PathBuf]) -> String {
    let names: Vec<String> = inputs
        .iter()
        .map(|p| {
            p.file_name().map_or_else(
                || p.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            )
        })
        .collect();
    names.join(", ")
}

/// Runs `strato report`.
pub fn run(args: ReportArgs, level_map: Option<&Path>, out: &mut dyn Write) -> Result<()> {
    let options = crate::app::import_options(level_map, true)?;
    let trace = crate::app::load(&args.inputs, &options)?;
    let mut steps = crate::term::Steps::new(if args.baseline.is_some() {
        strato_report::ANALYSIS_STEPS + 1 + strato_report::BASELINE_STEPS
    } else {
        strato_report::ANALYSIS_STEPS
    });
    let title = args
        .title
        .clone()
        .unwrap_or_else(|| default_title(&args.inputs));
    let analyzed = Analyzed::new(&trace);
    let report_options = ReportOptions {
        title,
        generator: format!("strato {}", env!("CARGO_PKG_VERSION")),
    };
    let mut input = ReportInput::from_analyzed(&analyzed, &report_options, &mut steps);
    if let Some(base) = &args.baseline {
        steps.step("loading the baseline");
        let a = crate::app::load(std::slice::from_ref(base), &options)?;
        input.add_baseline(
            (&crate::cmd_diff::label(base), &Analyzed::new(&a)),
            (&default_title(&args.inputs), &analyzed),
            &mut steps,
        );
    }
    steps.finish();
    let html = strato_report::render(&input);
    crate::output::write_output(&args.output, |w| w.write_all(html.as_bytes()))?;
    writeln!(
        out,
        "wrote {} ({:.1} KiB)",
        args.output.display(),
        html.len() as f64 / 1024.0
    )?;
    Ok(())
}

/// Arguments of `strato completions`.
#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// The shell to print completions for.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

/// Prints completions for `shell` of the command `cmd`.
pub fn completions(
    args: CompletionsArgs,
    cmd: &mut clap::Command,
    out: &mut dyn Write,
) -> Result<()> {
    clap_complete::generate(args.shell, cmd, "strato", out);
    Ok(())
}

/// What the analyses add to a Perfetto export (`strato export --perfetto`): threads split
/// into one track per stratum, a device busy-fraction counter per device (10 ms buckets,
/// `strato_analysis::busy`), and with `with_iterations` the iterations of each device's loops
/// as spans under the device (extra slices). See docs/export.md.
pub(crate) fn perfetto_extras(
    trace: &Trace,
    with_iterations: bool,
) -> strato_io::export::perfetto::Extras {
    use strato_io::export::perfetto::{ExtraCounter, ExtraSpan, ExtraTrack, Extras, Owner};
    let mut extras = Extras {
        strata_tracks: true,
        ..Extras::default()
    };
    for b in busy_series(trace, DEFAULT_BUCKET_NS) {
        let mut points: Vec<(i64, f64)> = b.points().map(|(t, f)| (t, 100.0 * f)).collect();
        points.push((b.end_ns, 0.0));
        extras.counters.push(ExtraCounter {
            rank: b.rank,
            owner: Owner::Device(b.device),
            name: format!("device busy % ({} ms buckets)", b.bucket_ns / 1_000_000),
            unit: "%".into(),
            points,
        });
    }
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
