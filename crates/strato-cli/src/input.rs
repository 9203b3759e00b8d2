//! Opening inputs: the import options every command shares (`--level-map`, `--salvage`, the
//! memory budget) and [`open_profile`], the one way from command-line inputs to a [`Profile`]
//! (trace + recording info + applied calibration). `strato record` reads its own runs back
//! through [`open_recording`].

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use strato_analysis::calibration::RecordingInfo;
use strato_analysis::overhead::{self, CorrectionSummary};
use strato_io::ImportOptions;
use strato_trace::{LevelMap, Trace};

/// `--salvage` of the running command (set by `run` for each invocation: the Python package
/// runs several in one process).
pub(crate) static SALVAGE: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// `--jobs` of the running command (0: not given; then `STRATO_JOBS`, else all cores).
pub(crate) static JOBS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

pub(crate) fn import_options(
    cli_level_map: Option<&Path>,
    keep_args: bool,
) -> Result<ImportOptions> {
    let level_map = match cli_level_map {
        None => LevelMap::default(),
        Some(path) => {
            let text = strato_io::config::read_config_text(path, "the level map")?;
            LevelMap::from_json(&text).map_err(|e| anyhow!("{}: {e}", path.display()))?
        }
    };
    let memory_budget_bytes = strato_io::budget::memory_budget_from_env()?;
    let jobs = match JOBS.load(std::sync::atomic::Ordering::Relaxed) {
        0 => strato_io::ranks::jobs_from_env()?,
        n => n,
    };
    Ok(ImportOptions {
        jobs,
        level_map,
        keep_args,
        memory_budget_bytes,
        progress: crate::term::import_progress(),
        salvage: SALVAGE.load(std::sync::atomic::Ordering::Relaxed),
        ..ImportOptions::default()
    })
}

/// One warning line on stderr per import note that passes the warning rule
/// ([`strato_trace::ImportNotes::warnings`]: a count above 0.1 % of the events read, or any
/// free-text note); `strato info` lists them all.
fn warn_import_notes(trace: &Trace) {
    for line in import_warnings(trace) {
        eprintln!("{line}");
    }
}

/// The warning lines [`warn_import_notes`] prints for `trace`, in order.
pub(crate) fn import_warnings(trace: &Trace) -> Vec<String> {
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

/// Whether `--keep-secrets` was given.
pub(crate) fn keep_secrets() -> bool {
    KEEP_SECRETS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Whether `--graph-capture` was given.
pub(crate) fn graph_capture_set() -> bool {
    graph_capture().is_some()
}

/// `--graph-capture` of the running command (set by `run` for each invocation), applied by
/// [`open_profile`].
static GRAPH_CAPTURE: std::sync::Mutex<Option<PathBuf>> = std::sync::Mutex::new(None);

/// Sets the `--graph-capture` trace [`open_profile`] applies to every profile it opens.
pub(crate) fn set_graph_capture(path: Option<PathBuf>) {
    *GRAPH_CAPTURE.lock().unwrap_or_else(|e| e.into_inner()) = path;
}

pub(crate) fn graph_capture() -> Option<PathBuf> {
    GRAPH_CAPTURE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
}

/// `--level-map` of the running command (set by `run` for each invocation), for
/// [`global_inputs`].
static LEVEL_MAP: std::sync::Mutex<Option<PathBuf>> = std::sync::Mutex::new(None);

/// Sets the `--level-map` file [`global_inputs`] names.
pub(crate) fn set_level_map(path: Option<PathBuf>) {
    *LEVEL_MAP.lock().unwrap_or_else(|e| e.into_inner()) = path;
}

/// The files every command of this invocation reads besides its own inputs: `--graph-capture`
/// and `--level-map` (an output may not overwrite them either, [`crate::output`]).
pub(crate) fn global_inputs() -> Vec<PathBuf> {
    let level_map = LEVEL_MAP.lock().unwrap_or_else(|e| e.into_inner()).clone();
    graph_capture().into_iter().chain(level_map).collect()
}

/// The replayed graph kernels of `trace` attributed to the launches of the capture trace at
/// `capture` ([`strato_analysis::graphs`]); one coverage line on stderr.
fn apply_graph_capture(trace: Trace, capture: &Path, options: &ImportOptions) -> Result<Trace> {
    match std::fs::metadata(capture) {
        Err(_) => bail!("{}: no such file or directory", capture.display()),
        Ok(info) if info.is_dir() => bail!(
            "{}: is a directory; --graph-capture takes one trace file (of the capturing run)",
            capture.display()
        ),
        Ok(_) => {}
    }
    let capture_options = ImportOptions {
        keep_args: true,
        ..options.clone()
    };
    let capture_trace = strato_io::import_paths(&[capture.to_path_buf()], &capture_options);
    crate::term::finish_progress();
    let capture_trace = capture_trace?;
    let label = capture.display().to_string();
    let (trace, coverage) =
        strato_analysis::graphs::attribute_graphs(trace, &capture_trace, &label)
            .with_context(|| format!("{label}: cannot be used as --graph-capture"))?;
    eprintln!(
        "strato: note: --graph-capture {label}: {} of {} graph-replayed device ops mapped to captured launches ({} graph launches, {} replayed exactly as captured, {} captured graphs)",
        coverage.graph_kernels_mapped,
        coverage.graph_kernels,
        coverage.graph_launches,
        coverage.exact_launches,
        coverage.captured_graphs,
    );
    Ok(trace)
}

/// The graph-replayed device ops of `trace` attributed to the launches that captured them when
/// the trace links them itself (an nsys export with graph node ids,
/// [`strato_analysis::graphs::attribute_graph_nodes`]); one coverage line on stderr then.
fn apply_graph_nodes(trace: Trace) -> Trace {
    let (trace, coverage) = strato_analysis::graphs::attribute_graph_nodes(trace);
    if let Some(c) = coverage {
        eprintln!(
            "strato: note: {}: {} of {} graph-replayed device ops mapped to the launches that captured them by graph node ({} of them by node order only), {} graph launches, {} replayed exactly as captured",
            c.capture_source,
            c.graph_kernels_mapped,
            c.graph_kernels,
            c.mapped_by_node_order,
            c.graph_launches,
            c.exact_launches,
        );
    }
    trace
}

/// Set once from the command line (`--keep-secrets`): [`load`] leaves secrets in metadata.
pub(crate) static KEEP_SECRETS: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Loads inputs: one profile directory, or trace files / directories of ranks. Secrets (in
/// metadata, names and event attributes) are redacted unless `--keep-secrets` ([`strato_io::redact`]); sources
/// of one import that claim the same rank are noted once on stderr.
pub(crate) fn load(inputs: &[PathBuf], options: &ImportOptions) -> Result<Trace> {
    Ok(open_profile(inputs, options)?.trace)
}

/// A profile opened for analysis: the trace (overhead-corrected when it is a calibrated
/// recording and correction was asked for), what the recording says about itself, and what
/// the correction removed.
pub(crate) struct Profile {
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

/// The one way in for every command: one profile directory, or trace files / directories of
/// ranks. Secrets (in metadata, names and event attributes) are redacted unless `--keep-secrets`
/// ([`strato_io::redact`]); sources of one import that claim the same rank are noted once on
/// stderr; recordings calibrated by `strato record --calibrate` are overhead-corrected; with
/// `--graph-capture`, graph-replayed kernels are attributed to their captured launches.
pub(crate) fn open_profile(inputs: &[PathBuf], options: &ImportOptions) -> Result<Profile> {
    let mut profile = load_unredacted(inputs, options)?;
    profile.trace = apply_graph_nodes(std::mem::take(&mut profile.trace));
    if let Some(capture) = graph_capture() {
        let trace = std::mem::take(&mut profile.trace);
        profile.trace = apply_graph_capture(trace, &capture, options)?;
    }
    if !KEEP_SECRETS.load(std::sync::atomic::Ordering::Relaxed) {
        strato_io::redact::redact_trace(&mut profile.trace);
    }
    Ok(profile)
}

/// A directory of `*.strato` files as `strato record` reads it back (no redaction, no notes
/// on stderr), corrected when `correct` and it is calibrated.
pub(crate) fn open_recording(dir: &Path, correct: bool) -> Result<Profile> {
    Ok(Profile::from_trace(load_recording(dir)?, correct))
}

/// The raw trace of a directory of `*.strato` files.
pub(crate) fn load_recording(dir: &Path) -> Result<Trace> {
    let options = import_options(None, false)?;
    Ok(strato_io::recording::import_dir(dir, &options)?)
}

/// Sources that claim the same rank number, as `(rank, [sources])`, for every shared number.
pub(crate) fn shared_rank_claims(trace: &Trace) -> Vec<(i64, Vec<String>)> {
    let mut by_rank: std::collections::BTreeMap<i64, Vec<String>> = Default::default();
    for r in trace
        .ranks
        .iter()
        .filter(|r| r.format != strato_trace::SourceFormat::Ncu)
    {
        if let Some(n) = r.rank {
            by_rank.entry(n).or_default().push(r.source.clone());
        }
    }
    by_rank.into_iter().filter(|(_, s)| s.len() > 1).collect()
}

/// What reading a stored profile loads for a command importing with `options`: the tables,
/// spans and args blobs its projection and args scope keep (so the command holds what it
/// would hold importing the JSON the profile was made from).
pub(crate) fn store_read_options(options: &ImportOptions) -> strato_store::ReadOptions {
    let projection = options.projection;
    strato_store::ReadOptions {
        args: options.keep_args,
        args_scope: match options.args_scope {
            strato_io::ArgsScope::All => strato_store::ArgsSelection::All,
            strato_io::ArgsScope::DeviceOps => strato_store::ArgsSelection::DeviceOps,
            strato_io::ArgsScope::Dependencies => strato_store::ArgsSelection::Dependencies,
        },
        spans: match projection.spans {
            strato_io::SpanProjection::All => strato_store::SpanSelection::All,
            strato_io::SpanProjection::DeviceAndLaunches => {
                strato_store::SpanSelection::DeviceAndLaunches
            }
        },
        instants: projection.instants,
        counters: projection.counters,
        flows: projection.flows,
    }
}

fn load_unredacted(inputs: &[PathBuf], options: &ImportOptions) -> Result<Profile> {
    for input in inputs {
        if !strato_io::input::is_stdin(input) && !input.exists() {
            bail!("{}: no such file or directory", input.display());
        }
    }
    if inputs
        .iter()
        .filter(|p| strato_io::input::is_stdin(p))
        .count()
        > 1
    {
        bail!("-: standard input can be given only once");
    }
    if inputs.len() == 1 && strato_store::is_profile_dir(&inputs[0]) {
        let read = store_read_options(options);
        let trace = strato_store::read_with(&inputs[0], &read)?;
        warn_import_notes(&trace);
        // A stored profile is analysed as it was stored.
        return Ok(Profile::from_trace(trace, false));
    }
    if inputs.len() == 1 && strato_store::partitioned::is_store_dir(&inputs[0]) {
        let read = store_read_options(options);
        let trace = strato_store::partitioned::read_store(&inputs[0], &read)?;
        warn_import_notes(&trace);
        return Ok(Profile::from_trace(trace, false));
    }
    if inputs
        .iter()
        .any(|p| strato_store::is_profile_dir(p) || strato_store::partitioned::is_store_dir(p))
    {
        bail!("a profile directory or store must be given alone");
    }
    let trace = strato_io::import_paths(inputs, options);
    crate::term::finish_progress();
    let trace = trace?;
    for (rank, sources) in shared_rank_claims(&trace) {
        eprintln!(
            "strato: note: {} sources all claim rank {rank} ({}): kept apart as separate sources",
            sources.len(),
            sources.join(", ")
        );
    }
    warn_import_notes(&trace);
    // Recordings calibrated by `strato record --calibrate` are overhead-corrected first.
    Ok(Profile::from_trace(trace, true))
}

/// One trace file imported as [`open_profile`] imports it alone, its events handed to `sink` as
/// they are read instead of kept ([`strato_io::import_file_streaming`]: the trace returned
/// holds every table but the events; secrets redacted unless `--keep-secrets`, import notes
/// warned about). `None` when the input does not stream (not a regular Chrome/Kineto JSON
/// file, or a TensorFlow trace viewer file), or with `--graph-capture` (its attribution needs
/// the whole trace): the caller imports it with [`open_profile`].
pub(crate) fn stream_file(
    input: &Path,
    options: &ImportOptions,
    sink: &mut strato_io::chrome::EventSink<'_>,
) -> Result<Option<Trace>, strato_io::Error> {
    if !input.is_file() || graph_capture().is_some() {
        return Ok(None);
    }
    let batch = strato_io::chrome::SINK_EVENTS;
    // Each batch's attribute blobs are redacted before anyone sees them (the trace's other
    // tables are redacted below, once they are complete).
    let keep = keep_secrets();
    let mut redacting = |batch: &mut Trace| {
        if !keep {
            strato_io::redact::redact_args(&mut batch.args);
        }
        sink(batch)
    };
    let imported = strato_io::import_file_streaming(input, options, batch, &mut redacting);
    crate::term::finish_progress();
    let Some(mut trace) = imported? else {
        return Ok(None);
    };
    for (rank, sources) in shared_rank_claims(&trace) {
        eprintln!(
            "strato: note: {} sources all claim rank {rank} ({}): kept apart as separate sources",
            sources.len(),
            sources.join(", ")
        );
    }
    if !KEEP_SECRETS.load(std::sync::atomic::Ordering::Relaxed) {
        strato_io::redact::redact_trace(&mut trace);
    }
    warn_import_notes(&trace);
    Ok(Some(trace))
}

/// Drops the events of a batch a [`stream_file`] sink has consumed (spans, instants, counters
/// and their args; flows and the other tables stay), so memory holds only what the consumer keeps.
pub(crate) fn drop_batch_events(trace: &mut Trace) {
    trace.spans.clear();
    trace.instants.clear();
    trace.counters.clear();
    trace.args = Default::default();
}

/// One stored profile or store (`inputs` is that one directory) read as [`open_profile`]
/// reads it, its events handed to `sink` batch by batch instead of kept
/// ([`strato_store::stream_with`], [`strato_store::partitioned::stream_store`]: only the
/// tables, columns and row groups `options` reads, one batch of events in memory). The trace
/// returned holds every table but the events (secrets redacted unless `--keep-secrets`, import
/// notes warned about).
///
/// `None` when the input is not one stored profile or store, or when [`open_profile`] would
/// change its events: with `--graph-capture`, or when flows are read and the profile holds
/// graph node links (their attribution needs the whole trace). In that last case `sink` has
/// already seen the events: the caller starts over with [`open_profile`].
pub(crate) fn stream_stored(
    inputs: &[PathBuf],
    options: &ImportOptions,
    sink: &mut dyn FnMut(&mut Trace),
) -> Result<Option<Trace>> {
    let [input] = inputs else { return Ok(None) };
    if graph_capture().is_some() {
        return Ok(None);
    }
    let read = store_read_options(options);
    // A profile imported with `--keep-secrets` holds them: each batch's attribute blobs are
    // redacted before the sink sees them.
    let keep = keep_secrets();
    let mut redacting = |batch: &mut Trace| {
        if !keep {
            strato_io::redact::redact_args(&mut batch.args);
        }
        sink(batch)
    };
    let mut trace = if strato_store::is_profile_dir(input) {
        strato_store::stream_with(input, &read, &mut redacting)?
    } else if strato_store::partitioned::is_store_dir(input) {
        strato_store::partitioned::stream_store(input, &read, &mut redacting)?
    } else {
        return Ok(None);
    };
    let graph_links = [
        strato_analysis::graphs::GRAPH_NODE_FLOW,
        strato_analysis::graphs::GRAPH_NODE_ORDER_FLOW,
    ]
    .iter()
    .any(|category| trace.strings.lookup(category).is_some());
    if read.flows && graph_links {
        return Ok(None);
    }
    warn_import_notes(&trace);
    if !KEEP_SECRETS.load(std::sync::atomic::Ordering::Relaxed) {
        strato_io::redact::redact_trace(&mut trace);
    }
    Ok(Some(trace))
}

/// The label of one side of a comparison (`strato diff`, `strato report --baseline`): its path
/// as given.
pub(crate) fn side_label(path: &Path) -> String {
    path.display().to_string()
}
