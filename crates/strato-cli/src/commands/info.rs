//! `strato info`: formats, time span, events by level and category, processes, devices, the
//! import notes, shared rank claims and redacted names.
use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;

use crate::ctx::Ctx;
use crate::input::load;

// Arguments of `strato info` (its help text is on the variant in `app.rs`).
#[derive(clap::Args, Debug)]
pub struct InfoArgs {
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// Runs `strato info`.
pub fn run(args: InfoArgs, ctx: &Ctx, out: &mut impl Write) -> Result<()> {
    let InfoArgs { inputs, json } = args;
    let trace = load(&inputs, &ctx.import_options(false)?)?;
    let info = strato_analysis::info::info(&trace);
    let redacted = strato_io::redact::redacted_names(&trace);
    let shared_ranks = crate::input::shared_rank_claims(&trace);
    if json {
        let mut value = serde_json::to_value(&info)?;
        value["redacted"] = serde_json::json!(redacted);
        value["shared_rank_claims"] = serde_json::json!(shared_ranks
            .iter()
            .map(|(rank, sources)| serde_json::json!({"rank": rank, "sources": sources}))
            .collect::<Vec<_>>());
        serde_json::to_writer_pretty(&mut *out, &value)?;
        writeln!(out)?;
    } else {
        crate::render::present::info(out, &info)?;
        for (rank, sources) in &shared_ranks {
            writeln!(
                out,
                "note     {} sources claim rank {rank} ({}): kept apart as separate sources",
                sources.len(),
                sources.join(", ")
            )?;
        }
        if !redacted.is_empty() {
            writeln!(
                out,
                "redacted {} (secret-looking values in the sources' metadata; \
                 --keep-secrets keeps them)",
                redacted.join(", ")
            )?;
        }
    }
    Ok(())
}
