//! Opening inputs whole: [`Engine::open`] (one profile directory or store, or trace files /
//! directories of ranks / recordings, then correction, graph attribution and redaction, in
//! that order) and reading recordings back ([`Engine::open_recording`]).

use std::path::{Path, PathBuf};
use strato_analysis::info::shared_rank_claims;

use strato_analysis::recording::calibration::RecordingInfo;
use strato_analysis::recording::overhead::{self, CorrectionSummary};
use strato_io::ImportOptions;
use strato_trace::Trace;

use crate::{Engine, EngineError, Result};

/// A profile opened for analysis: the trace (overhead-corrected when it is a calibrated
/// recording and correction was asked for), what the recording says about itself, and what
/// the correction removed.
#[derive(Debug)]
pub struct Profile {
    pub trace: Trace,
    pub recording: RecordingInfo,
    /// Set when the recording's calibration was applied.
    pub correction: Option<CorrectionSummary>,
}

impl Profile {
    /// `raw` with its recording's calibration applied (when it has a non-empty one and
    /// `correct`).
    pub fn from_trace(raw: Trace, correct: bool) -> Profile {
        let recording = RecordingInfo::of(&raw);
        match &recording.calibration {
            Some(cal) if correct && !cal.is_empty() => {
                let (trace, summary) = overhead::correct(&raw, cal);
                Profile {
                    trace,
                    recording,
                    correction: Some(summary),
                }
            }
            _ => Profile {
                trace: raw,
                recording,
                correction: None,
            },
        }
    }
}

/// The warning lines of `trace`'s import notes that pass the warning rule
/// ([`strato_trace::ImportNotes::warnings`]: a count above 0.1 % of the events read, or any
/// free-text note), in rank order; `strato info` lists every note.
pub fn import_warnings(trace: &Trace) -> Vec<String> {
    let mut out = Vec::new();
    for rank in &trace.ranks {
        for line in rank.notes.warnings() {
            out.push(format!(
                "strato: warning: {}: {line} (see `strato info`)",
                rank.source
            ));
        }
    }
    out
}

/// The note on sources that all claim `rank`.
pub(crate) fn shared_rank_note(rank: i64, sources: &[String]) -> String {
    format!(
        "strato: note: {} sources all claim rank {rank} ({}): kept apart as separate sources",
        sources.len(),
        sources.join(", ")
    )
}

/// What reading a stored profile loads for an analysis importing with `options`: the tables,
/// spans and args blobs its projection and args scope keep (so it holds what it would hold
/// importing the JSON the profile was made from).
pub fn store_read_options(options: &ImportOptions) -> strato_store::ReadOptions {
    let projection = options.projection;
    strato_store::ReadOptions {
        args: options.keep_args,
        args_scope: options.args_scope,
        spans: projection.spans,
        instants: projection.instants,
        counters: projection.counters,
        flows: projection.flows,
    }
}

impl Engine {
    /// Opens `inputs` whole: one profile directory or partitioned store (read as stored, with
    /// what `options` projects), or trace files / directories of ranks / recordings / `-`
    /// (imported; recordings calibrated by `strato record --calibrate` overhead-corrected).
    /// Then graph-replayed kernels are attributed to their captured launches (from the trace's
    /// own graph node links, and from `graph_capture`), then secrets are redacted unless
    /// `keep_secrets`. Shared rank claims and import warnings are told to the listener.
    pub fn open(&self, inputs: &[PathBuf], options: &ImportOptions) -> Result<Profile> {
        let mut profile = self.open_unredacted(inputs, options)?;
        profile.trace = self.apply_graph_nodes(std::mem::take(&mut profile.trace));
        if let Some(capture) = &self.options().graph_capture {
            let trace = std::mem::take(&mut profile.trace);
            profile.trace = self.apply_graph_capture(trace, capture, options)?;
        }
        if self.redacts() {
            strato_io::redact::redact_trace(&mut profile.trace);
        }
        Ok(profile)
    }

    /// The trace of [`Engine::open`].
    pub fn load(&self, inputs: &[PathBuf], options: &ImportOptions) -> Result<Trace> {
        Ok(self.open(inputs, options)?.trace)
    }

    /// A directory of `*.strato` files as `strato record` reads it back (no redaction, nothing
    /// told), corrected when `correct` and it is calibrated.
    pub fn open_recording(&self, dir: &Path, correct: bool) -> Result<Profile> {
        Ok(Profile::from_trace(self.load_recording(dir)?, correct))
    }

    /// The raw trace of a directory of `*.strato` files.
    pub fn load_recording(&self, dir: &Path) -> Result<Trace> {
        let options = self.recording_import_options()?;
        Ok(strato_io::recording::import_dir(dir, &options)?)
    }

    pub(crate) fn warn_import_notes(&self, trace: &Trace) {
        for line in import_warnings(trace) {
            self.listener().notice(&line);
        }
    }

    pub(crate) fn note_shared_rank_claims(&self, trace: &Trace) {
        for (rank, sources) in shared_rank_claims(trace) {
            self.listener().notice(&shared_rank_note(rank, &sources));
        }
    }

    fn open_unredacted(&self, inputs: &[PathBuf], options: &ImportOptions) -> Result<Profile> {
        if inputs.is_empty() {
            return Err(EngineError::Usage("give at least one input".into()));
        }
        for input in inputs {
            if !strato_io::input::is_stdin(input) && !input.exists() {
                return Err(EngineError::NotFound(input.clone()));
            }
        }
        if inputs
            .iter()
            .filter(|p| strato_io::input::is_stdin(p))
            .count()
            > 1
        {
            return Err(EngineError::Usage(
                "-: standard input can be given only once".into(),
            ));
        }
        if let [input] = inputs {
            let stored = if strato_store::is_profile_dir(input) {
                Some(strato_store::read_with(
                    input,
                    &store_read_options(options),
                )?)
            } else if strato_store::partitioned::is_store_dir(input) {
                Some(strato_store::partitioned::read_store(
                    input,
                    &store_read_options(options),
                )?)
            } else {
                None
            };
            if let Some(trace) = stored {
                self.warn_import_notes(&trace);
                // A stored profile is analysed as it was stored.
                return Ok(Profile::from_trace(trace, false));
            }
        }
        if inputs
            .iter()
            .any(|p| strato_store::is_profile_dir(p) || strato_store::partitioned::is_store_dir(p))
        {
            return Err(EngineError::Usage(
                "a profile directory or store must be given alone".into(),
            ));
        }
        let trace = strato_io::import_paths(inputs, options);
        self.listener().import_finished();
        let trace = trace?;
        self.note_shared_rank_claims(&trace);
        self.warn_import_notes(&trace);
        // Recordings calibrated by `strato record --calibrate` are overhead-corrected first.
        Ok(Profile::from_trace(trace, true))
    }

    /// The replayed graph kernels of `trace` attributed to the launches of the capture trace at
    /// `capture` ([`strato_analysis::cross_stack::graphs`]); one coverage line told.
    fn apply_graph_capture(
        &self,
        trace: Trace,
        capture: &Path,
        options: &ImportOptions,
    ) -> Result<Trace> {
        match std::fs::metadata(capture) {
            Err(_) => return Err(EngineError::NotFound(capture.to_path_buf())),
            Ok(info) if info.is_dir() => {
                return Err(EngineError::option(
                    capture,
                    "is a directory; a graph capture is one trace file (of the capturing run)",
                ))
            }
            Ok(_) => {}
        }
        let capture_options = ImportOptions {
            keep_args: true,
            ..options.clone()
        };
        let capture_trace = strato_io::import_paths(&[capture.to_path_buf()], &capture_options);
        self.listener().import_finished();
        let capture_trace = capture_trace?;
        let label = capture.display().to_string();
        let (trace, coverage) =
            strato_analysis::cross_stack::graphs::attribute_graphs(trace, &capture_trace, &label)
                .map_err(|e| {
                EngineError::option(capture, format!("cannot be used as the graph capture: {e}"))
            })?;
        self.listener().notice(&format!(
            "strato: note: --graph-capture {label}: {} of {} graph-replayed device ops mapped to captured launches ({} graph launches, {} replayed exactly as captured, {} captured graphs)",
            coverage.graph_kernels_mapped,
            coverage.graph_kernels,
            coverage.graph_launches,
            coverage.exact_launches,
            coverage.captured_graphs,
        ));
        Ok(trace)
    }

    /// The graph-replayed device ops of `trace` attributed to the launches that captured them
    /// when the trace links them itself (an nsys export with graph node ids,
    /// [`strato_analysis::cross_stack::graphs::attribute_graph_nodes`]); one coverage line told
    /// then.
    fn apply_graph_nodes(&self, trace: Trace) -> Trace {
        let (trace, coverage) = strato_analysis::cross_stack::graphs::attribute_graph_nodes(trace);
        if let Some(c) = coverage {
            self.listener().notice(&format!(
                "strato: note: {}: {} of {} graph-replayed device ops mapped to the launches that captured them by graph node ({} of them by node order only), {} graph launches, {} replayed exactly as captured",
                c.capture_source,
                c.graph_kernels_mapped,
                c.graph_kernels,
                c.mapped_by_node_order,
                c.graph_launches,
                c.exact_launches,
            ));
        }
        trace
    }
}
