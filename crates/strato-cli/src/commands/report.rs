//! `strato report PATH -o report.html`: writes the self-contained HTML report
//! (`strato_report`); `--baseline OTHER` adds the diff with another profile; `strato
//! completions SHELL` prints shell completions. Wiring only: the analyses are in
//! `strato-analysis`, which of them a report shows and the HTML in `strato-report`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use strato_analysis::analyzed::Analyzed;
use strato_analysis::compare::Diff;
use strato_analysis::registry::Comparison;
use strato_report::{ReportInput, ReportOptions};

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

/// The inputs' file names, joined: what a report is titled unless told (`strato view`'s too).
pub(crate) fn default_title(inputs: &[PathBuf]) -> String {
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
pub fn run(args: ReportArgs, ctx: &crate::ctx::Ctx, out: &mut dyn Write) -> Result<()> {
    // The baseline is read too: the report may overwrite neither.
    let read = ctx.read_paths(args.inputs.iter().chain(&args.baseline));
    crate::output::refuse_inputs(&args.output, &read)?;
    let options = ctx.import_options(true)?;
    let mut steps = crate::term::Steps::new(if args.baseline.is_some() {
        strato_report::ANALYSIS_STEPS + 2 + strato_report::BASELINE_STEPS
    } else {
        strato_report::ANALYSIS_STEPS
    });
    // The baseline first, reduced to the diff's side with what the diff reads, and dropped
    // before the profile is read: the two traces are never held at once.
    let baseline = match &args.baseline {
        Some(base) => {
            steps.step("loading the baseline");
            let reads = strato_engine::registry::import_options(&ctx.engine, Diff::READS)?;
            let a = ctx.engine.load(std::slice::from_ref(base), &reads)?;
            steps.step("analysing the baseline");
            let side = strato_report::baseline_side(&Analyzed::new(&a));
            Some((crate::ctx::Ctx::side_label(base), side))
        }
        None => None,
    };
    let trace = ctx.engine.load(&args.inputs, &options)?;
    let title = args
        .title
        .clone()
        .unwrap_or_else(|| default_title(&args.inputs));
    let analyzed = Analyzed::new(&trace);
    let report_options = ReportOptions {
        title,
        generator: format!("strato {}", env!("CARGO_PKG_VERSION")),
        // Two threads unless one job is asked for (`--jobs 1`, `STRATO_JOBS=1`) or the trace
        // holds more than a third of the memory budget: the second thread's working memory
        // (about a quarter more at the peak, docs/report.md) must not be what passes it.
        parallel: options.effective_jobs() > 1
            && strato_trace::MemoryTracker::new(options.memory_budget_bytes)
                .kept_bytes(&trace)
                .saturating_mul(3)
                <= options.memory_budget_bytes,
    };
    let mut input = ReportInput::from_analyzed(&analyzed, &report_options, &mut steps);
    input.add_registered(&analyzed);
    if let Some((label, side)) = &baseline {
        input.add_baseline(
            (label, side.as_ref()),
            (&default_title(&args.inputs), &analyzed),
            &mut steps,
        );
    }
    steps.finish();
    let html = strato_report::render(&input);
    crate::output::write_output(&args.output, &read, |w| w.write_all(html.as_bytes()))?;
    writeln!(
        out,
        "wrote {} ({:.1} KiB)",
        args.output.display(),
        html.len() as f64 / 1024.0
    )?;
    Ok(())
}
