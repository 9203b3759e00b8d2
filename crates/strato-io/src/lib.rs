//! Importers and exporters: the only place that reads or writes trace files of other tools.
//!
//! Every importer is a function from an input to `Result<Trace, Error>` and streams: memory is
//! bounded by the events kept, not by the file size. [`import_paths`] is the entry point: it
//! takes files or directories of per-rank files, sniffs each file's format from its bytes, and
//! combines the results (ranks side by side; Nsight Compute metrics attached to the matching
//! kernels of a timeline imported with them).
//!
//! Formats: Kineto / Chrome-trace JSON ([`chrome`]), TensorFlow trace viewer JSON (through
//! [`chrome`] with [`tf`]'s post-pass), XPlane protobuf ([`xplane`]), Nsight Systems SQLite
//! ([`nsys`]), Nsight Compute CSV ([`ncu`]), rocprofv3 JSON ([`rocprof`]), Perfetto protobuf
//! TrackEvent traces ([`perfetto`]). Exporters: [`export`].

pub mod budget;
pub mod chrome;
pub mod config;
pub mod error;
pub mod export;
pub mod input;
pub mod job;
pub mod json_lenient;
pub mod json_split;
pub mod ncu;
pub mod nsys;
pub mod perf;
pub mod perfetto;
pub mod ranks;
pub mod recording;
pub mod redact;
pub mod rocprof;
pub mod spill;
pub mod tf;
pub mod xplane;

use std::io::BufRead;
use std::path::{Path, PathBuf};

pub use error::{Error, ErrorKind, Result};
use strato_trace::{LevelMap, SourceFormat, Trace};

/// What to import and how.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// Source category -> level mapping.
    pub level_map: LevelMap,
    /// Keep every event's attributes (`args`) as JSON text. Analyses that only need times,
    /// names and correlations run with this off and keep far less in memory.
    pub keep_args: bool,
    /// Which events' attributes are kept when `keep_args` is on. The Chrome/Kineto importer
    /// honours it (most of a large trace's args belong to CPU ops); the other importers keep
    /// every event's attributes.
    pub args_scope: ArgsScope,
    /// Which events the import keeps: decided by the command from what its analysis reads,
    /// applied while the file streams, so what is not kept never takes memory. The
    /// Chrome/Kineto importer honours it; the other importers keep every event.
    pub projection: Projection,
    /// Bound on decompressed bytes per gzip input (a bomb guard). `None`: the value of
    /// `STRATO_MAX_DECOMPRESSED_BYTES`, else [`input::DEFAULT_MAX_DECOMPRESSED_BYTES`]; read when
    /// a file is opened, and an invalid value is an error then.
    pub max_decompressed_bytes: Option<u64>,
    /// Bytes per read of a streamed JSON input ([`json_split::DEFAULT_CHUNK_SIZE`]). Results
    /// never depend on it; tests use tiny sizes.
    pub read_size: usize,
    /// Keep what can be read from a damaged Chrome/Kineto JSON input (truncated, corrupt gzip,
    /// trailing data, a bad event) instead of failing: the events before the damage are kept
    /// and a `salvaged: ...` import note says what was lost. Off: such an input is an error.
    pub salvage: bool,
    /// Memory budget of one import: what it keeps (events, attributes, strings, as estimated by
    /// [`strato_trace::MemoryTracker`]) may not pass it; the import stops with
    /// [`ErrorKind::MemoryBudget`] instead. Default: [`budget::default_budget`] (half of
    /// physical memory); the CLI reads `STRATO_MEMORY_BUDGET` ([`budget::memory_budget_from_env`]).
    pub memory_budget_bytes: u64,
    /// Called while a file is read, with the file and the (decompressed) bytes read from it
    /// so far; for progress bars. Formats read through a stream (JSON, CSV, protobuf) report;
    /// SQLite does not.
    pub progress: Option<ProgressHook>,
    /// How many rank files [`import_paths`] (and the rank-by-rank analyses) import at once;
    /// 0: all cores. Results never depend on it ([`ranks`]). The CLI reads `--jobs` /
    /// `STRATO_JOBS` ([`ranks::jobs_from_env`]).
    pub jobs: usize,
}

pub use strato_trace::projection::{ArgsScope, SpanProjection};

/// What an import keeps of the events it reads (see [`ImportOptions::projection`]). Events not
/// kept are still read and checked (times, ids; a bad event is the same error), count in
/// `ImportNotes::events_read`, and create the tracks they would create, so tracks and
/// processes are the same as with [`Projection::ALL`]; only the events themselves are left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Projection {
    /// Which spans are kept.
    pub spans: SpanProjection,
    /// Instant events (`i`/`I`/`n`).
    pub instants: bool,
    /// Counter samples (`C` events and the `[memory]` instants' allocated-bytes series).
    pub counters: bool,
    /// Flows (`s`/`t`/`f`).
    pub flows: bool,
    /// With `flows`: each flow end placed (its track resolved, bound to the innermost span
    /// containing it), which keeps every flow end, and each span's track and times, until the
    /// end of the import. Off (what `info` needs: flows counted, complete or not): only the
    /// open flows are held; a flow is added to `Trace::flows` once it is complete (or can no
    /// longer complete: a later event took its place), the rest at the end, so `Trace::flows`
    /// is in that order and its ends carry no track or span (`TrackId(0)`, `None`); a streaming
    /// import's sink sees the flows added since its last call and may take them.
    pub flow_ends: bool,
}

impl Projection {
    /// Everything (the default): `info`, `import -o`, `report`, exports.
    pub const ALL: Projection = Projection {
        spans: SpanProjection::All,
        instants: true,
        counters: true,
        flows: true,
        flow_ends: true,
    };
    /// Every event, flows only counted (see [`Projection::flow_ends`]): `info`.
    pub const COUNTS: Projection = Projection {
        flow_ends: false,
        ..Projection::ALL
    };
    /// Every span, instant and counter sample, no flows: `memory` (allocation instants and
    /// counters, framework ops and copies).
    pub const NO_FLOWS: Projection = Projection {
        flows: false,
        flow_ends: false,
        ..Projection::ALL
    };
    /// Every span and nothing else: analyses of spans alone (`kernels`, `breakdown`).
    pub const SPANS: Projection = Projection {
        spans: SpanProjection::All,
        instants: false,
        counters: false,
        flows: false,
        flow_ends: false,
    };
    /// What the device time breakdown (`gpu-time`) reads: device spans, the host spans that
    /// carry a launch correlation, and `ProfilerStep#` spans (see [`SpanProjection`]).
    pub const DEVICE_TIME: Projection = Projection {
        spans: SpanProjection::DeviceAndLaunches,
        instants: false,
        counters: false,
        flows: false,
        flow_ends: false,
    };
}

impl Default for Projection {
    fn default() -> Self {
        Projection::ALL
    }
}

/// A progress callback: `(file, bytes read so far)`. Called from the reading thread, often
/// (once per read of up to 1 MiB): throttle in the callback.
#[derive(Clone)]
pub struct ProgressHook(pub std::sync::Arc<ProgressFn>);

/// The callback inside a [`ProgressHook`].
pub type ProgressFn = dyn Fn(&Path, u64) + Send + Sync;

impl std::fmt::Debug for ProgressHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressHook")
    }
}

/// Counts the bytes read through it and reports them to a [`ProgressHook`].
struct ProgressReader {
    inner: Box<dyn std::io::BufRead + Send>,
    path: PathBuf,
    read: u64,
    hook: ProgressHook,
}

impl std::io::Read for ProgressReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        (self.hook.0)(&self.path, self.read);
        Ok(n)
    }
}

impl std::io::BufRead for ProgressReader {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        self.inner.fill_buf()
    }
    fn consume(&mut self, amt: usize) {
        self.inner.consume(amt);
        self.read += amt as u64;
        (self.hook.0)(&self.path, self.read);
    }
}

impl ImportOptions {
    /// The decompression bound in force (see [`ImportOptions::max_decompressed_bytes`]); an
    /// invalid `STRATO_MAX_DECOMPRESSED_BYTES` is an error naming `path`.
    pub fn decompression_limit(&self, path: &Path) -> Result<u64> {
        match self.max_decompressed_bytes {
            Some(limit) => Ok(limit),
            None => input::max_decompressed_bytes()
                .map_err(|message| Error::new(path, ErrorKind::Config(message))),
        }
    }
}

/// Opens `path` for an importer, wrapped for progress reports when `options` asks.
fn open_input(path: &Path, options: &ImportOptions) -> Result<input::Input> {
    let mut input = input::open(path, options.decompression_limit(path)?)?;
    if let Some(hook) = &options.progress {
        input.reader = Box::new(ProgressReader {
            inner: input.reader,
            path: path.to_path_buf(),
            read: 0,
            hook: hook.clone(),
        });
    }
    Ok(input)
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            level_map: LevelMap::default(),
            keep_args: true,
            args_scope: ArgsScope::All,
            projection: Projection::ALL,
            max_decompressed_bytes: None,
            memory_budget_bytes: budget::default_budget(),
            read_size: json_split::DEFAULT_CHUNK_SIZE,
            salvage: false,
            progress: None,
            jobs: 0,
        }
    }
}

/// The format of one input file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Chrome-trace JSON: Kineto, TF trace viewer, generic.
    ChromeJson,
    /// Nsight Systems SQLite export.
    NsysSqlite,
    /// Nsight Compute CSV.
    NcuCsv,
    /// XSpace protobuf (`*.xplane.pb`).
    XPlane,
    /// rocprofv3 (rocprofiler-sdk) JSON: an object whose first key is `rocprofiler-sdk-tool`.
    Rocprof,
    /// Perfetto protobuf trace (`*.pftrace`, `*.perfetto-trace`).
    Perfetto,
    /// Linux `perf.data` (magic `PERFILE2`).
    PerfData,
    /// `perf script` text output.
    PerfScript,
}

/// File names (after an optional `.gz`) read as Perfetto protobuf traces.
pub const PERFETTO_SUFFIXES: [&str; 3] = [".pftrace", ".perfetto-trace", ".perfetto"];

/// Sniffs the format of `path` from its content (and, for protobuf, which has no magic bytes,
/// from the name: `.pb` is XPlane, [`PERFETTO_SUFFIXES`] are Perfetto).
pub fn detect_format(path: &Path, options: &ImportOptions) -> Result<Format> {
    let mut input = input::open(path, options.decompression_limit(path)?)?;
    sniffed_format(path, &mut input)
}

/// The format of an opened input, from its buffered head (nothing is consumed).
fn sniffed_format(path: &Path, input: &mut input::Input) -> Result<Format> {
    // Protobuf named as such, starting with field 1 length-delimited (`0x0a`, a Perfetto
    // `Trace.packet` or an `XSpace.planes`): the next byte is a length, which may be `{`, `[`
    // or whitespace, so the content sniffing below would take it for JSON.
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let stem = name.strip_suffix(".gz").unwrap_or(name);
    let head = input
        .reader
        .fill_buf()
        .map_err(|e| input::classify(path, e))?;
    if perf::is_perf_data_head(head) {
        return Ok(Format::PerfData);
    }
    if head.first() == Some(&0x0a) {
        if PERFETTO_SUFFIXES.iter().any(|s| stem.ends_with(s)) {
            return Ok(Format::Perfetto);
        }
        if stem.ends_with(".pb") {
            return Ok(Format::XPlane);
        }
    }
    match input::sniff(path, input)? {
        input::Sniffed::Json => {
            let head = input
                .reader
                .fill_buf()
                .map_err(|e| input::classify(path, e))?;
            if rocprof::is_rocprof_head(head) {
                Ok(Format::Rocprof)
            } else {
                Ok(Format::ChromeJson)
            }
        }
        input::Sniffed::Sqlite => Ok(Format::NsysSqlite),
        input::Sniffed::NcuCsv => Ok(Format::NcuCsv),
        input::Sniffed::Binary => {
            let head = input
                .reader
                .fill_buf()
                .map_err(|e| input::classify(path, e))?;
            if stem.ends_with(".pb") {
                Ok(Format::XPlane)
            } else if PERFETTO_SUFFIXES.iter().any(|s| stem.ends_with(s)) {
                Ok(Format::Perfetto)
            } else if perf::is_perf_script_head(head) {
                Ok(Format::PerfScript)
            } else {
                Err(Error::new(
                    path,
                    ErrorKind::UnknownFormat(
                        "expected Chrome/Kineto JSON, TF trace viewer JSON, rocprofv3 JSON, \
                         *.xplane.pb, Perfetto *.pftrace, Nsight Systems SQLite, Nsight \
                         Compute CSV, perf.data or `perf script` output"
                            .into(),
                    ),
                ))
            }
        }
    }
}

/// Imports one file of any supported format (`-`: standard input). The file is opened once
/// and its format sniffed from the buffered head, so pipes work; formats read by path
/// (recordings, SQLite) need a regular file and say so otherwise.
pub fn import_file(path: &Path, options: &ImportOptions) -> Result<Trace> {
    let mut input = open_input(path, options)?;
    let needs_regular = |what: &str| {
        Error::new(
            path,
            ErrorKind::UnknownFormat(format!(
                "{what} must be a regular file (not a pipe or standard input)"
            )),
        )
    };
    if input.recording {
        if !input.regular_file {
            return Err(needs_regular("a stratoscope recording"));
        }
        drop(input);
        return recording::import_file(path, options);
    }
    let trace = match sniffed_format(path, &mut input)? {
        Format::ChromeJson => {
            let trace = chrome::import(path, input, options)?;
            tf::post_process(trace, options)
        }
        Format::NsysSqlite => {
            if !input.regular_file {
                return Err(needs_regular("an Nsight Systems SQLite export"));
            }
            drop(input);
            nsys::import(path, options)?
        }
        Format::NcuCsv => ncu::import(path, input, options)?,
        Format::XPlane => xplane::import(path, input, options)?,
        Format::Rocprof => rocprof::import(path, input, options)?,
        Format::Perfetto => perfetto::import(path, input, options)?,
        Format::PerfData => {
            if !input.regular_file || input.gzip {
                return Err(needs_regular("a perf.data file (not compressed)"));
            }
            drop(input);
            perf::import_data(path, options)?
        }
        Format::PerfScript => perf::import_script(path, input, options)?,
    };
    trace
        .validate()
        .map_err(|e| Error::new(path, ErrorKind::Invalid(e.to_string())))?;
    Ok(trace)
}

/// Imports one file as [`import_paths`] imports it alone, handing its events to `sink` in
/// batches of `batch_events` as they are read ([`chrome::import_streaming`]: the trace returned holds every table but the
/// events). Only a regular Chrome/Kineto JSON file that is not a TensorFlow trace viewer file
/// streams: for any other input `Ok(None)` is returned before any event is handed over, except
/// for a trace viewer file, which is known to be one only at its end (its spans are re-classified
/// afterwards, [`tf::post_process`]) — `None` then too, after events were handed over: the caller
/// discards them and imports the file whole.
pub fn import_file_streaming(
    path: &Path,
    options: &ImportOptions,
    batch_events: usize,
    sink: &mut chrome::EventSink<'_>,
) -> Result<Option<Trace>> {
    if input::is_stdin(path) || !path.is_file() {
        return Ok(None);
    }
    let mut input = open_input(path, options)?;
    if input.recording || !input.regular_file {
        return Ok(None);
    }
    if sniffed_format(path, &mut input)? != Format::ChromeJson {
        return Ok(None);
    }
    let trace = chrome::import_streaming(path, input, options, batch_events, sink)?;
    if tf::is_trace_viewer(&trace) {
        return Ok(None);
    }
    // As `import_paths` gathers one file.
    let mut timeline = Trace::default();
    timeline.append(trace);
    ranks::note_rank_claims(&mut timeline);
    Ok(Some(timeline))
}

/// The files a directory of ranks holds: regular files with a trace-like name, sorted by name.
///
/// A TensorBoard profile run directory (`plugins/profile/<run>/`) also holds the profiler's
/// tool data, which are not traces: of `*.pb` files only `*.xplane.pb` are read (beside them
/// lie `overview_page.pb`, `kernel_stats.pb`, `input_pipeline.pb`, ...),
/// `*.memory_profile.json[.gz]` is skipped, and `<host>.trace.json[.gz]` (the trace viewer
/// JSON older TensorFlow wrote next to `<host>.xplane.pb`, the same events) is skipped when
/// that XPlane file is there. Hidden files are skipped. A directory with no trace file is an
/// error; when directories below it hold traces (a TensorBoard log directory), it names them.
pub fn rank_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for path in listed(dir)? {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_file() && is_trace_name(name) {
            files.push(path);
        }
    }
    // The trace viewer JSON of a host whose XPlane file is here too: the same events twice.
    let xplane_hosts: Vec<String> = files
        .iter()
        .filter_map(|p| {
            p.file_name()?
                .to_str()?
                .strip_suffix(".xplane.pb")
                .map(str::to_owned)
        })
        .collect();
    files.retain(|p| {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let stem = name.strip_suffix(".gz").unwrap_or(name);
        !stem
            .strip_suffix(".trace.json")
            .is_some_and(|host| xplane_hosts.iter().any(|h| h == host))
    });
    files.sort();
    if files.is_empty() {
        let mut below = Vec::new();
        find_trace_dirs(dir, 3, &mut below);
        below.sort();
        let hint = match below.len() {
            0 => String::new(),
            n => {
                let shown: Vec<String> = below
                    .iter()
                    .take(3)
                    .map(|p| p.display().to_string())
                    .collect();
                format!(
                    "; {n} directories below it do ({}{}): give one of them (each is one profiling run)",
                    shown.join(", "),
                    if n > 3 { ", ..." } else { "" }
                )
            }
        };
        return Err(Error::new(
            dir,
            ErrorKind::NotATrace(format!(
                "directory holds no trace files (*.json[.gz], *.sqlite, *.csv, *.xplane.pb, \
                 *.pftrace){hint}"
            )),
        ));
    }
    Ok(files)
}

/// The entries of a directory.
fn listed(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::new(dir, e))?;
    entries
        .map(|entry| entry.map(|e| e.path()).map_err(|e| Error::new(dir, e)))
        .collect()
}

/// Whether a file name in a directory of ranks is read as a trace (see [`rank_files`]).
fn is_trace_name(name: &str) -> bool {
    let stem = name.strip_suffix(".gz").unwrap_or(name);
    if name.starts_with('.') || stem.ends_with(".memory_profile.json") {
        return false;
    }
    [".sqlite", ".csv"].iter().any(|ext| name.ends_with(ext))
        || [".json", ".xplane.pb"]
            .iter()
            .chain(PERFETTO_SUFFIXES.iter())
            .any(|ext| stem.ends_with(ext))
}

/// Directories below `dir` (down to `depth` levels, hidden ones skipped) that hold a trace file.
fn find_trace_dirs(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if depth == 0 {
        return;
    }
    let Ok(entries) = listed(dir) else { return };
    for path in entries {
        let hidden = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_none_or(|n| n.starts_with('.'));
        if !path.is_dir() || hidden {
            continue;
        }
        let holds = listed(&path).is_ok_and(|files| {
            files.iter().any(|f| {
                f.is_file()
                    && f.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(is_trace_name)
            })
        });
        if holds {
            out.push(path);
        } else {
            find_trace_dirs(&path, depth - 1, out);
        }
    }
}

/// Imports files and directories of per-rank files into one trace: each file becomes a rank.
/// Files are imported in parallel ([`ImportOptions::jobs`] at once) and appended in the order
/// given, so the trace does not depend on the number of jobs ([`ranks`]).
/// Nsight Compute metrics imported beside a timeline are attached to its kernels
/// ([`ncu::attach`]); imported alone they stand as their own trace.
pub fn import_paths(paths: &[PathBuf], options: &ImportOptions) -> Result<Trace> {
    let inputs = ranks::expand_inputs(paths)?;
    let mut timeline = Trace::default();
    for dir in &inputs.recordings {
        timeline.append(recording::import_dir(dir, options)?);
    }
    let traces = ranks::map_files(&inputs.files, options.effective_jobs(), |_, file| {
        import_file(file, options)
    })?;
    let mut metrics = Vec::new();
    let mut os_traces = Vec::new();
    for trace in traces {
        if trace.ranks.iter().all(|r| r.format == SourceFormat::Ncu) {
            metrics.push(trace);
        } else if trace.ranks.iter().all(|r| r.format == SourceFormat::Perf) {
            os_traces.push(trace);
        } else {
            timeline.append(trace);
        }
    }
    for os in os_traces {
        perf::join(&mut timeline, os)?;
    }
    if timeline.ranks.is_empty() {
        for m in metrics {
            timeline.append(m);
        }
    } else {
        for m in metrics {
            ncu::attach(&mut timeline, m);
        }
    }
    ranks::note_rank_claims(&mut timeline);
    Ok(timeline)
}
