//! `strato breakdown`: the operation-scoped CPU/GPU breakdown per process (RL-Scope) and its
//! text / JSON / CSV rendering. Window and conservation rules:
//! `strato_analysis::cross_stack::breakdown`, docs/analyses/breakdown.md.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use strato_analysis::analyzed::Analyzed;
use strato_analysis::cross_stack::breakdown::{self, BreakdownOptions};

use crate::render::write_json;

// Arguments of `strato breakdown` (its help text is on the variant in `app.rs`).
#[derive(clap::Args, Debug)]
pub struct BreakdownArgs {
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Keep ProfilerStep#N apart instead of folding them into ProfilerStep#*.
    #[arg(long)]
    per_step: bool,
    /// Rows shown per table in text output (the rest are folded into one line).
    #[arg(long, default_value_t = 12)]
    top: usize,
    #[arg(long)]
    json: bool,
    /// Print the rows as CSV.
    #[arg(long, conflicts_with = "json")]
    csv: bool,
}

/// Runs `strato breakdown`.
pub fn run(args: BreakdownArgs, ctx: &crate::ctx::Ctx, out: &mut impl Write) -> Result<()> {
    let BreakdownArgs {
        inputs,
        per_step,
        top,
        json,
        csv,
    } = args;
    // The breakdown reads spans only: instants, counters and flows are not kept.
    let import = strato_io::ImportOptions {
        projection: strato_io::Projection::SPANS,
        ..ctx.import_options(false)?
    };
    let trace = ctx.engine.load(&inputs, &import)?;
    let report = breakdown::breakdown(&Analyzed::new(&trace), &BreakdownOptions { per_step });
    if json {
        write_json(out, &report)?;
    } else if csv {
        crate::render::breakdown::csv(out, &report, ctx.csv_raw)?;
    } else {
        crate::render::breakdown::text(out, &report, top)?;
    }
    Ok(())
}
