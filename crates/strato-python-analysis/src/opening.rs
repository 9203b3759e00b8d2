//! Opening a profile for the Python API through the engine every front end uses
//! (`strato-engine`): the same steps, in the same order, as the `strato` command's inputs (one
//! profile directory or partitioned store read as stored, or trace files / directories of
//! ranks / recordings imported, recordings calibrated by `strato record --calibrate`
//! overhead-corrected; then graph attribution, then redaction unless `keep_secrets`). Options
//! are the CLI's global input flags (`--level-map`, `--salvage`, `--keep-secrets`,
//! `--graph-capture`; the memory budget from `STRATO_MEMORY_BUDGET`, jobs from `STRATO_JOBS`).
//! Everything is kept (every event and its attributes): one import serves every analysis
//! method. Nothing is printed: what the CLI prints on stderr while opening (import warnings,
//! notes on rank claims and graph attribution) is collected, and `stratoscope.open` issues
//! each line as a `UserWarning` and keeps them in `Profile.warnings`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use strato_engine::{Engine, Listener, OpenOptions};
use strato_trace::Trace;

use crate::errors::OpenError;

/// An opened profile: the trace the analyses read, whether a calibration was applied, and the
/// lines the CLI would have printed on stderr while opening it.
#[derive(Debug)]
pub struct Opened {
    pub trace: Trace,
    pub corrected: bool,
    pub warnings: Vec<String>,
}

/// The engine's listener for Python: keeps every line, shows nothing (no progress bar).
#[derive(Debug, Default)]
struct Collected {
    lines: Mutex<Vec<String>>,
}

impl Listener for Collected {
    fn notice(&self, line: &str) {
        if let Ok(mut lines) = self.lines.lock() {
            lines.push(line.to_owned());
        }
    }
}

/// Opens `inputs` as `strato <command> INPUTS...` does (standard input excepted: Python
/// names files).
pub fn open(inputs: &[PathBuf], options: OpenOptions) -> Result<Opened, OpenError> {
    if inputs.iter().any(|p| strato_io::input::is_stdin(p)) {
        return Err(OpenError::Option(
            "-: standard input cannot be opened from Python; give a path".into(),
        ));
    }
    let collected = Arc::new(Collected::default());
    let engine = Engine::new(options, collected.clone());
    let import = engine.import_options(true)?;
    let profile = engine.open(inputs, &import)?;
    let warnings = collected
        .lines
        .lock()
        .map(|mut lines| std::mem::take(&mut *lines))
        .unwrap_or_default();
    Ok(Opened {
        corrected: profile.correction.is_some(),
        trace: profile.trace,
        warnings,
    })
}
