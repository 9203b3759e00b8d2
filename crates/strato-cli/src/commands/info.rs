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
    // Several rank files: each imported on its own (at most `--jobs` at once), its events
    // counted and dropped, its tables kept; the tables gathered as the whole import gathers
    // them. Inputs the rank-by-rank path does not cover are read whole below.
    if inputs.len() > 1 || inputs.first().is_some_and(|p| p.is_dir()) {
        let parts = engine.map_ranks(inputs, options, |trace| {
            let mut counts = EventCounts::default();
            counts.add(trace);
            (counts, strato_engine::tables_of(trace))
        })?;
        if let Some(parts) = parts {
            let mut tables = strato_trace::Trace::default();
            let mut counts = EventCounts::default();
            for (part_counts, part_tables) in parts.parts.into_iter().map(|p| p.value) {
                counts.append(part_counts, tables.tracks.len());
                tables.append(part_tables);
            }
            strato_io::ranks::note_rank_claims(&mut tables);
            let info = info_with(&tables, counts);
            return Ok((tables, info));
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
