//! `strato info`: formats, time span, events by level and category, processes, devices, the
//! import notes, shared rank claims and redacted names.
use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;

use crate::ctx::Ctx;
use strato_analysis::info::{info_with, EventCounts, TraceInfo};

// Arguments of `strato info` (its help text is on the variant in `app.rs`).
#[derive(clap::Args, Debug)]
pub struct InfoArgs {
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// The trace (for its tables) and its summary. One Chrome/Kineto JSON file streams: its
/// events are counted as they are read ([`EventCounts`]) and never kept; its flows are only
/// counted ([`strato_io::Projection::COUNTS`]: not bound to spans). A stored profile or store
/// streams too ([`stream_stored`]: its tables read batch by batch).
fn summarise(
    engine: &strato_engine::Engine,
    inputs: &[PathBuf],
    options: &strato_io::ImportOptions,
) -> Result<(strato_trace::Trace, TraceInfo)> {
    if let [input] = inputs {
        let mut counts = EventCounts::default();
        let mut sink = |trace: &mut strato_trace::Trace| {
            counts.add(trace);
            trace.flows.clear();
            strato_engine::drop_batch_events(trace);
            Ok(())
        };
        let counting = strato_io::ImportOptions {
            projection: strato_io::Projection::COUNTS,
            ..options.clone()
        };
        if let Some(trace) = engine.stream_file(input, &counting, &mut sink)? {
            counts.add_flows(&trace.flows);
            let info = info_with(&trace, counts);
            return Ok((trace, info));
        }
    }
    // A stored profile or store: its events counted batch by batch as they are read.
    let mut counts = EventCounts::default();
    if let Some(trace) = engine.stream_stored(inputs, options, &mut |batch| counts.add(batch))? {
        let info = info_with(&trace, counts);
        return Ok((trace, info));
    }
    let trace = engine.load(inputs, options)?;
    let info = strato_analysis::info::info(&trace);
    Ok((trace, info))
}

/// Runs `strato info`.
pub fn run(args: InfoArgs, ctx: &Ctx, out: &mut impl Write) -> Result<()> {
    let InfoArgs { inputs, json } = args;
    let (trace, info) = summarise(&ctx.engine, &inputs, &ctx.import_options(false)?)?;
    let redacted = strato_io::redact::redacted_names(&trace);
    let shared_ranks = strato_engine::shared_rank_claims(&trace);
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
                "redacted {} (secret-looking values in the sources' metadata and names; \
                 --keep-secrets keeps them)",
                redacted.join(", ")
            )?;
        }
    }
    Ok(())
}
