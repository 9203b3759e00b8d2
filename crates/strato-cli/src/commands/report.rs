//! `strato report PATH -o report.html`: runs every analysis on a profile and writes the
//! self-contained HTML report (`strato_report`); `--baseline OTHER` adds the diff with another
//! profile; `strato completions SHELL` prints shell completions. Wiring only: the analyses are
//! in `strato-analysis`, the HTML in `strato-report`.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::Args;
use strato_analysis::busy::{busy_series, DEFAULT_BUCKET_NS};
use strato_analysis::hierarchy::Hierarchy;
use strato_analysis::iterations::{iterations, IterationOptions};
use strato_analysis::kernel_stats::fold_top;
use strato_analysis::layers::{layers, LayersOptions};
use strato_analysis::memory::{memory, MemoryOptions};
use strato_analysis::scope::Scopes;
use strato_analysis::util::{util, DEFAULT_PERIODS_S};
use strato_report::{ReportInput, KERNEL_TOP};
use strato_trace::Trace;

use crate::output::guarded;

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

/// Every analysis the report shows, on one trace.
pub(crate) fn analyse(trace: &Trace, title: String, steps: &mut crate::term::Steps) -> ReportInput {
    steps.step("overview");
    let info = strato_analysis::info::info(trace);
    steps.step("breakdown");
    let breakdown = guarded("breakdown", || {
        strato_analysis::breakdown::breakdown(trace, &Default::default())
    });
    steps.step("utilization");
    let util_report = guarded("utilization", || util(trace, &DEFAULT_PERIODS_S));
    let busy = guarded("busy", || busy_series(trace, DEFAULT_BUCKET_NS)).unwrap_or_default();
    steps.step("kernels");
    let kernels = guarded("kernel statistics", || {
        let mut k = strato_analysis::kernel_stats::kernel_stats(trace, 0);
        for r in &mut k.ranks {
            r.kernels = fold_top(std::mem::take(&mut r.kernels), KERNEL_TOP, "kernels");
            r.ops = fold_top(std::mem::take(&mut r.ops), KERNEL_TOP, "operations");
        }
        k
    });
    steps.step("layers and roofline");
    let layers_report = guarded("layers", || {
        let scopes = Scopes::build(trace);
        let h = Hierarchy::build(trace, &scopes);
        layers(trace, &scopes, &h, &LayersOptions::default())
    });
    steps.step("iterations");
    let iterations_report = guarded("iterations", || {
        iterations(trace, &IterationOptions::default())
    });
    steps.step("memory");
    let memory_report = guarded("memory", || {
        memory(
            trace,
            &MemoryOptions {
                max_points: strato_report::svg::line::MAX_POINTS,
                ..MemoryOptions::default()
            },
        )
    });
    ReportInput {
        title,
        generator: format!("strato {}", env!("CARGO_PKG_VERSION")),
        info,
        breakdown,
        util: util_report,
        busy,
        kernels,
        layers: layers_report,
        iterations: iterations_report,
        memory: memory_report,
        diff: None,
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
    let options = crate::input::import_options(level_map, true)?;
    let trace = crate::input::load(&args.inputs, &options)?;
    let mut steps = crate::term::Steps::new(if args.baseline.is_some() { 10 } else { 7 });
    let title = args
        .title
        .clone()
        .unwrap_or_else(|| default_title(&args.inputs));
    let mut input = analyse(&trace, title, &mut steps);
    if let Some(base) = &args.baseline {
        steps.step("loading the baseline");
        let a = crate::input::load(std::slice::from_ref(base), &options)?;
        steps.step("analysing the baseline");
        let ra = crate::commands::diff::side_results(&a, false);
        steps.step("diff");
        let rb = crate::commands::diff::side_results(&trace, false);
        let b_label = default_title(&args.inputs);
        input.diff = Some(strato_analysis::diff::diff(
            &crate::commands::diff::label(base),
            (&ra.0, &ra.1),
            &b_label,
            (&rb.0, &rb.1),
        ));
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
