//! Opening a profile for the Python API through the engine every front end uses
//! (`strato-engine`): the same steps, in the same order, as the `strato` command's inputs (one
//! profile directory or partitioned store read as stored, or trace files / directories of
//! ranks / recordings imported, recordings calibrated by `strato record --calibrate`
//! overhead-corrected; then graph attribution, then redaction unless `keep_secrets`). Options
//! are the CLI's global input flags (`--level-map`, `--salvage`, `--keep-secrets`,
//! `--graph-capture`; the memory budget from `STRATO_MEMORY_BUDGET`, jobs from `STRATO_JOBS`).
//! Everything is kept (every event and its attributes): one import serves every analysis
//! method. Nothing is printed: the engine's listener is quiet.

use std::path::PathBuf;

use strato_engine::{Engine, OpenOptions};
use strato_trace::Trace;

use crate::errors::OpenError;

/// An opened profile: the trace the analyses read and whether a calibration was applied.
#[derive(Debug)]
pub struct Opened {
    pub trace: Trace,
    pub corrected: bool,
}

/// Opens `inputs` as `strato <command> INPUTS...` does (standard input excepted: Python
/// names files).
pub fn open(inputs: &[PathBuf], options: OpenOptions) -> Result<Opened, OpenError> {
    if inputs.iter().any(|p| strato_io::input::is_stdin(p)) {
        return Err(OpenError::Option(
            "-: standard input cannot be opened from Python; give a path".into(),
        ));
    }
    let engine = Engine::new(options, std::sync::Arc::new(strato_engine::Quiet));
    let import = engine.import_options(true)?;
    let profile = engine.open(inputs, &import)?;
    Ok(Opened {
        corrected: profile.correction.is_some(),
        trace: profile.trace,
    })
}
