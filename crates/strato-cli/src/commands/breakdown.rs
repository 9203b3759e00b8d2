//! `strato breakdown`: the operation-scoped CPU/GPU breakdown per process (RL-Scope) and its
//! text / JSON / CSV rendering. Window and conservation rules: `strato_analysis::breakdown`,
//! docs/analyses/breakdown.md.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use clap::ValueEnum;
use serde_json::{json, Map, Value};
use strato_analysis::analyzed::Analyzed;
use strato_analysis::breakdown::{self, BreakdownOptions, BreakdownReport, Resource};
use strato_analysis::hierarchy::{self, ChainLink, HierarchyReport};
use strato_analysis::layers::{self, LayerSource, LayersOptions, LayersReport, Roofline};
use strato_analysis::util::{self, UtilReport, DEFAULT_PERIODS_S};
use strato_trace::{Ns, Trace};

use crate::input::{import_options, load};
use crate::render::units::{fit, ms, ms_num, opt, pct, us_num};
use crate::render::write_json;
use crate::table::Table;

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
    let BreakdownArgs { inputs, per_step, top, json, csv } = args;
    // The breakdown reads spans only: instants, counters and flows are not kept.
    let import = strato_io::ImportOptions {
        projection: strato_io::Projection::SPANS,
        ..ctx.import_options(false)?
    };
    let trace = load(&inputs, &import)?;
    let report =
        breakdown::breakdown(&Analyzed::new(&trace), &BreakdownOptions { per_step });
    if json {
        write_json(out, &report)?;
    } else if csv {
        crate::render::breakdown::csv(out, &report)?;
    } else {
        crate::render::breakdown::text(out, &report, top)?;
    }
    Ok(())
}
