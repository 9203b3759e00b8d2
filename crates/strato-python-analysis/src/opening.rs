//! Opening a profile for the Python API: the same steps, in the same order, as the `strato`
//! command's inputs (`strato-cli`'s `input::open_profile`): one profile directory read as
//! stored, or trace files / directories of ranks / recordings imported (recordings calibrated
//! by `strato record --calibrate` overhead-corrected); then `graph_capture` attribution, then
//! secrets in metadata redacted unless `keep_secrets`. Options are the CLI's global input
//! flags (`--level-map`, `--salvage`, `--keep-secrets`, `--graph-capture`; the memory budget
//! from `STRATO_MEMORY_BUDGET`). Everything is kept (every event and its attributes): one
//! import serves every analysis method.

use std::path::{Path, PathBuf};

use strato_analysis::calibration::RecordingInfo;
use strato_analysis::overhead;
use strato_io::ImportOptions;
use strato_trace::{LevelMap, Trace};

use crate::errors::OpenError;

/// The options of `stratoscope.open`.
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    /// A JSON list of `{format, category, level}` rules over the default level map.
    pub level_map: Option<PathBuf>,
    /// Keep what can be read from a damaged Chrome/Kineto input (an import note says what was
    /// lost) instead of failing.
    pub salvage: bool,
    /// Leave secrets in the sources' metadata.
    pub keep_secrets: bool,
    /// A trace of the CUDA graph capture: replayed graph kernels are attributed to the
    /// captured launches ([`strato_analysis::graphs`]).
    pub graph_capture: Option<PathBuf>,
}

/// An opened profile: the trace the analyses read and whether a calibration was applied.
#[derive(Debug)]
pub struct Opened {
    pub trace: Trace,
    pub corrected: bool,
}

fn import_options(options: &OpenOptions) -> Result<ImportOptions, OpenError> {
    let level_map = match &options.level_map {
        None => LevelMap::default(),
        Some(path) => {
            // Bounded like every configuration file (strato_io::config).
            let text = strato_io::config::read_config_text(path, "the level map")
                .map_err(|e| OpenError::Read(e.to_string()))?;
            LevelMap::from_json(&text).map_err(|e| OpenError::option(path, e))?
        }
    };
    let memory_budget_bytes = strato_io::budget::memory_budget_from_env()
        .map_err(|e| OpenError::Option(e.to_string()))?;
    Ok(ImportOptions {
        level_map,
        keep_args: true,
        memory_budget_bytes,
        salvage: options.salvage,
        ..ImportOptions::default()
    })
}

/// Opens `inputs` as `strato <command> INPUTS...` does.
pub fn open(inputs: &[PathBuf], options: &OpenOptions) -> Result<Opened, OpenError> {
    if inputs.is_empty() {
        return Err(OpenError::Option("open: give at least one path".into()));
    }
    for input in inputs {
        if strato_io::input::is_stdin(input) {
            return Err(OpenError::Option(
                "-: standard input cannot be opened from Python; give a path".into(),
            ));
        }
        if !input.exists() {
            return Err(OpenError::NotFound(input.clone()));
        }
    }
    let import = import_options(options)?;
    let mut opened = if inputs.len() == 1 && strato_store::is_profile_dir(&inputs[0]) {
        let read = strato_store::ReadOptions::default();
        // A stored profile is analysed as it was stored.
        Opened {
            trace: strato_store::read_with(&inputs[0], &read)?,
            corrected: false,
        }
    } else {
        if inputs.iter().any(|p| strato_store::is_profile_dir(p)) {
            return Err(OpenError::Option(
                "a profile directory must be given alone".into(),
            ));
        }
        let raw = strato_io::import_paths(inputs, &import)?;
        corrected(raw)
    };
    // Graph kernels the trace links to their captured launches itself (nsys graph node ids),
    // as the CLI's `open_profile` does.
    opened.trace =
        strato_analysis::graphs::attribute_graph_nodes(std::mem::take(&mut opened.trace)).0;
    if let Some(capture) = &options.graph_capture {
        let trace = std::mem::take(&mut opened.trace);
        opened.trace = apply_graph_capture(trace, capture, &import)?;
    }
    if !options.keep_secrets {
        strato_io::redact::redact_trace(&mut opened.trace);
    }
    Ok(opened)
}

/// `raw` with its recording's calibration applied when it has a non-empty one (as the CLI does
/// for imported inputs).
fn corrected(raw: Trace) -> Opened {
    let recording = RecordingInfo::of(&raw);
    match &recording.calibration {
        Some(cal) if !cal.is_empty() => Opened {
            trace: overhead::correct(&raw, cal).0,
            corrected: true,
        },
        _ => Opened {
            trace: raw,
            corrected: false,
        },
    }
}

fn apply_graph_capture(
    trace: Trace,
    capture: &Path,
    options: &ImportOptions,
) -> Result<Trace, OpenError> {
    if !capture.exists() {
        return Err(OpenError::NotFound(capture.to_path_buf()));
    }
    let capture_trace = strato_io::import_paths(&[capture.to_path_buf()], options)?;
    let label = capture.display().to_string();
    strato_analysis::graphs::attribute_graphs(trace, &capture_trace, &label)
        .map(|(trace, _coverage)| trace)
        .map_err(|e| OpenError::option(capture, format!("cannot be used as graph_capture: {e}")))
}
