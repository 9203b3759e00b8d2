//! How the engine opens inputs for `info` ([`Counted`]): their events counted as they are
//! read and never held. One Chrome/Kineto JSON file streams, its flows only counted
//! (`strato_io::Projection::COUNTS`: not bound to spans); several rank files are imported one
//! at a time (at most `--jobs` at once), counted and dropped, their tables kept and gathered as
//! the whole import gathers them; a stored profile or store is read batch by batch. Other
//! inputs are opened whole by the registry.

use std::path::PathBuf;

use strato_analysis::info::{info_with, EventCounts, Info, InfoReport};
use strato_analysis::registry::NoOptions;
use strato_trace::Trace;

use crate::opening::Opening;
use crate::{Engine, Result};

/// `info`'s opening (see the module docs).
#[derive(Debug)]
pub struct Counted;

impl Opening<Info> for Counted {
    fn open(
        engine: &Engine,
        inputs: &[PathBuf],
        import: &strato_io::ImportOptions,
        _: &NoOptions,
    ) -> Result<Option<InfoReport>> {
        if let [input] = inputs {
            let mut counts = EventCounts::default();
            let mut sink = |trace: &mut Trace| {
                counts.add(trace);
                trace.flows.clear();
                crate::drop_batch_events(trace);
                Ok(())
            };
            let counting = strato_io::ImportOptions {
                projection: strato_io::Projection::COUNTS,
                ..import.clone()
            };
            if let Some(trace) = engine.stream_file(input, &counting, &mut sink)? {
                counts.add_flows(&trace.flows);
                let info = info_with(&trace, counts);
                return Ok(Some(InfoReport::of(&trace, info)));
            }
        }
        if inputs.len() > 1 || inputs.first().is_some_and(|p| p.is_dir()) {
            let parts = engine.map_ranks(inputs, import, |trace| {
                let mut counts = EventCounts::default();
                counts.add(trace);
                (counts, trace.tables())
            })?;
            if let Some(parts) = parts {
                let mut tables = Trace::default();
                let mut counts = EventCounts::default();
                for (part_counts, part_tables) in parts.parts.into_iter().map(|p| p.value) {
                    counts.append(part_counts, tables.tracks.len());
                    tables.append(part_tables);
                }
                strato_io::ranks::note_rank_claims(&mut tables);
                let info = info_with(&tables, counts);
                return Ok(Some(InfoReport::of(&tables, info)));
            }
        }
        let mut counts = EventCounts::default();
        if let Some(trace) = engine.stream_stored(inputs, import, &mut |batch| counts.add(batch))? {
            let info = info_with(&trace, counts);
            return Ok(Some(InfoReport::of(&trace, info)));
        }
        Ok(None)
    }
}
