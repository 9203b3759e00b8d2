//! `strato import`: traces into a profile directory (Parquet tables + metadata.json), secrets
//! redacted unless `--keep-secrets`.
use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;

use crate::ctx::Ctx;
use crate::input::load;

// Arguments of `strato import` (its help text is on the variant in `app.rs`).
#[derive(clap::Args, Debug)]
pub struct ImportArgs {
    /// Trace files or directories of per-rank files.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// The profile directory to write (replaced atomically if it is already a profile).
    #[arg(short, long)]
    output: PathBuf,
}

/// Runs `strato import`.
pub fn run(args: ImportArgs, ctx: &Ctx, out: &mut impl Write) -> Result<()> {
    let ImportArgs { inputs, output } = args;
    let trace = load(&inputs, &ctx.import_options(true)?)?;
    let redacted = strato_io::redact::redacted_names(&trace);
    if !redacted.is_empty() {
        eprintln!(
            "strato: note: redacted secret-looking values in the sources' metadata: {} \
             (--keep-secrets keeps them)",
            redacted.join(", ")
        );
    }
    strato_store::write(&trace, &output)?;
    writeln!(
        out,
        "wrote {}: {} ranks, {} spans, {} instants, {} counter samples, {} flows",
        output.display(),
        trace.ranks.len(),
        trace.spans.len(),
        trace.instants.len(),
        trace.counters.len(),
        trace.flows.len()
    )?;
    Ok(())
}
