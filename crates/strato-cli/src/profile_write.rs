//! Inputs written as a profile directory, the one way `strato import -o` and `strato sql` do
//! it: one Chrome/Kineto JSON file streamed straight into the store's row groups (the whole
//! trace never held), anything else opened as every command opens it ([`strato_engine::Engine::load`])
//! and written whole. `strato sql FILE` queries a temporary profile written here, so it answers
//! what `strato sql` over `strato import FILE -o P` answers.

use std::path::{Path, PathBuf};

use anyhow::Result;
use strato_io::ImportOptions;
use strato_trace::Trace;

/// What was written: the figures of `strato import`'s summary line.
pub(crate) struct Written {
    pub ranks: usize,
    pub rows: strato_store::WrittenRows,
}

/// Writes `inputs` as the profile directory `output` (replaced atomically if it is already a
/// profile: [`strato_store::write`]); a note on stderr names the values redacted.
pub(crate) fn write_profile(
    engine: &strato_engine::Engine,
    inputs: &[PathBuf],
    output: &Path,
    options: &ImportOptions,
) -> Result<Written> {
    if let [input] = inputs {
        if let Some(written) = write_streaming(engine, input, output, options)? {
            return Ok(written);
        }
    }
    let trace = engine.load(inputs, options)?;
    note_redacted(&trace);
    strato_store::write(&trace, output)?;
    Ok(Written {
        ranks: trace.ranks.len(),
        rows: strato_store::WrittenRows {
            spans: trace.spans.len() as u64,
            instants: trace.instants.len() as u64,
            counter_samples: trace.counters.len() as u64,
            flows: trace.flows.len() as u64,
            args: trace.args.len() as u64,
        },
    })
}

/// One note line on stderr naming the sources' values redacted as secrets, if any.
pub(crate) fn note_redacted(trace: &Trace) {
    let redacted = strato_io::redact::redacted_names(trace);
    if !redacted.is_empty() {
        eprintln!(
            "strato: note: redacted secret-looking values in the sources' metadata and names: {} \
             (--keep-secrets keeps them)",
            redacted.join(", ")
        );
    }
}

/// Imports one Chrome/Kineto JSON file straight into the profile: its events go to the
/// store's row groups as they are read ([`strato_io::import_file_streaming`],
/// [`strato_store::ProfileWriter`]), so the whole trace is never held. The profile is the one
/// the in-memory path writes, byte for byte. `None` for an input that does not stream (not a
/// regular Chrome JSON file, or a TensorFlow trace viewer file): nothing is left behind and
/// the caller imports it whole.
fn write_streaming(
    engine: &strato_engine::Engine,
    input: &Path,
    output: &Path,
    options: &ImportOptions,
) -> Result<Option<Written>> {
    if !input.is_file() {
        return Ok(None);
    }
    let mut writer = strato_store::ProfileWriter::create(output)?;
    let mut failed: Option<strato_store::StoreError> = None;
    let mut sink = |trace: &mut Trace| {
        writer.write_events(trace).map_err(|e| {
            let message = e.to_string();
            failed = Some(e);
            message
        })
    };
    let mut trace = match engine.stream_file(input, options, &mut sink) {
        Ok(Some(trace)) => trace,
        // The writer's temporary directory goes with it.
        Ok(None) => return Ok(None),
        Err(e) => return Err(failed.map_or_else(|| e.into(), Into::into)),
    };
    note_redacted(&trace);
    let rows = writer.finish(&mut trace)?;
    Ok(Some(Written {
        ranks: trace.ranks.len(),
        rows,
    }))
}
