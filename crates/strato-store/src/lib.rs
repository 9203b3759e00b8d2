//! The profile store: a [`Trace`] as a directory of Parquet tables plus `metadata.json`, with a
//! documented schema (`docs/profile-format.md`) so pandas, polars, DuckDB, DataFusion or Spark
//! read it directly, and read back by [`read`] exactly as it was written.
//!
//! This crate owns the on-disk profile format: the table definitions ([`schema`] internally),
//! the chunked writer with its atomic install, the checking reader, and `metadata.json`.
//!
//! - [`write`] builds the directory beside the target (`DIR.tmp-<pid>`), fsyncs every file,
//!   writes `metadata.json` last, then renames it into place. An existing profile (or an empty
//!   directory) is replaced; anything else is refused, and so is a profile holding files the
//!   writer did not write (replacing it would delete them). The replace is one
//!   `renameat2(RENAME_EXCHANGE)`: the directory holds the old or the new profile, complete,
//!   and nothing is left beside it; `DIR.tmp-PID` siblings of a killed writer are removed by a
//!   later write once their process is gone and they are older than `STALE_AGE` (1 hour).
//! - [`read`] checks everything (marker, version, columns, types, nulls, row counts, ids) and
//!   never panics on a damaged profile: errors name the file and the problem in one line.
//! - [`is_profile_dir`] tells a profile from anything else.
//!
//! Floating-point counter values are stored as they are (NaN included); note that a trace
//! holding NaN never compares equal to itself, though its round trip is bit-exact.

mod error;
mod meta;
pub mod partitioned;
mod read;
mod schema;
mod write;

use std::path::Path;

use strato_trace::Trace;

pub use error::{Result, StoreError, StoreErrorKind};
pub use meta::{Metadata, TableInfo, FORMAT_MARKER, METADATA_FILE, SCHEMA_VERSION};
pub use write::{ProfileWriter, WrittenRows};

/// Writes `trace` as a profile directory at `dir`, atomically: see the crate docs.
pub fn write(trace: &Trace, dir: &Path) -> Result<(), StoreError> {
    write::write(trace, dir)
}

/// Reads the profile directory at `dir`, every table.
pub fn read(dir: &Path) -> Result<Trace, StoreError> {
    read::read(dir, &ReadOptions::default())
}

/// What [`read_with`] loads: the columns and rows a command reads, so that reading a stored
/// profile holds what importing its JSON with the same projection would hold
/// (`strato_io::Projection`, `strato_io::ArgsScope`). A table not asked for is not opened; a
/// column not asked for is not decoded (Parquet column projection); left-out spans are
/// dropped batch by batch as the spans table is read, and only the row groups of
/// `args.parquet` holding a kept blob are read (see [`ArgsScope::DeviceOps`]).
/// [`ReadOptions::default`] reads everything (what [`read`] does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadOptions {
    /// Load the attribute blobs (`args.parquet`). When off, that table is not opened, and
    /// every span and instant comes back with `args: None` (so no id dangles): analyses that
    /// read only times, names and correlations keep far less in memory.
    pub args: bool,
    /// With `args`: whose blobs are kept.
    pub args_scope: ArgsScope,
    /// Which spans are kept.
    pub spans: SpanProjection,
    /// Read `instants.parquet` (else no instant).
    pub instants: bool,
    /// Read `counters.parquet` (else no counter sample).
    pub counters: bool,
    /// Read `flows.parquet` (else no flow). With a [`SpanProjection`] that leaves spans out,
    /// a flow end on a left-out span keeps its track and time but no span.
    pub flows: bool,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            args: true,
            args_scope: ArgsScope::All,
            spans: SpanProjection::All,
            instants: true,
            counters: true,
            flows: true,
        }
    }
}

/// Whose attribute blobs and which spans a read keeps: the projection vocabulary every reader
/// shares ([`strato_trace::projection`]). With [`ArgsScope::DeviceOps`] or
/// [`ArgsScope::Dependencies`] the blobs kept are renumbered in the order of their ids
/// (`ArgsId`s differ from the profile's) and only the row groups of `args.parquet` that hold
/// one are read. [`SpanProjection::DeviceAndLaunches`] applies its rule to ranks imported from
/// Chrome/Kineto JSON; spans of ranks of other formats are all kept.
pub use strato_trace::projection::{ArgsScope, SpanProjection};

/// Reads the profile directory at `dir`, the parts `options` asks for.
pub fn read_with(dir: &Path, options: &ReadOptions) -> Result<Trace, StoreError> {
    read::read(dir, options)
}

/// Reads the profile directory at `dir` as [`read_with`] reads it, its events handed to `sink`
/// batch by batch instead of kept, so that memory holds one batch (at most 65,536 rows of one
/// table), not the profile's events: for analyses that count as they go (`strato info`,
/// `strato kernels`).
///
/// Rules of the stream:
/// - `sink` sees the trace with every table of the profile but the events (strings, ranks,
///   processes, tracks, devices, clock) and one batch of the events `options` keeps: spans
///   first (in stored order, the order [`read_with`] gives), then instants, counter samples
///   and flows, one kind per batch;
/// - a batch's `args` holds only its own events' blobs, and their ids index them there (with
///   [`ReadOptions::args`]; only the rows of `args.parquet` holding one are read);
/// - flow ends carry no span (the spans they named are gone);
/// - each batch is checked as [`read_with`] checks the whole trace, before `sink` sees it;
///   what `sink` leaves in the trace is dropped after it returns.
///
/// Returns the tables without events (what `sink` saw, minus the batch). A damaged profile is
/// an error as for [`read_with`]; batches handed to `sink` before it are not taken back.
pub fn stream_with(
    dir: &Path,
    options: &ReadOptions,
    sink: &mut dyn FnMut(&mut Trace),
) -> Result<Trace, StoreError> {
    read::read_tables(dir)?.stream_events(options, sink)
}

/// Reads the tables of the profile at `dir` that are not events (strings, ranks, processes,
/// tracks, devices, clock), checked as [`read`] checks them: the trace has no event and no
/// attribute blob.
pub fn read_without_events(dir: &Path) -> Result<Trace, StoreError> {
    Ok(read::read_tables(dir)?.trace)
}

/// Hands the text of every attribute blob of the profile at `dir` (`args.parquet`, in id
/// order) to `visit`, a batch at a time, until `visit` returns `false` (the rest is not handed over);
/// no other table is read. For a scan that keeps nothing: `strato sql`
/// asks whether a stored profile holds a secret before querying it in place.
pub fn visit_args(dir: &Path, visit: &mut dyn FnMut(&str) -> bool) -> Result<(), StoreError> {
    read::visit_args(dir, visit)
}

/// Reads only `metadata.json` of the profile at `dir` (checked like [`read`] does).
pub fn read_metadata(dir: &Path) -> Result<Metadata, StoreError> {
    Metadata::read(dir)
}

/// True when `path` is a directory with a `metadata.json` carrying the profile marker.
pub fn is_profile_dir(path: &Path) -> bool {
    path.is_dir() && meta::has_marker(path)
}

/// Entries of the profile directory `dir` that `strato import` did not write (sorted;
/// directories end in `/`): what replacing the profile would delete, so [`write`] refuses.
pub fn foreign_entries(dir: &Path) -> Result<Vec<String>, StoreError> {
    write::foreign_entries(dir)
}

/// Turns the profile at `dir` back into a plain directory: removes `metadata.json` first (so
/// it stops being a profile at once), then the table files; anything else is left.
pub fn remove_profile_files(dir: &Path) -> Result<(), StoreError> {
    write::remove_profile_files(dir)
}

/// The names of the tables of a profile, in the order they are written (each is
/// `<name>.parquet`).
pub fn table_names() -> impl Iterator<Item = &'static str> {
    schema::ALL.iter().map(|t| t.name)
}

/// The Arrow schema the writer gives table `name` (`<name>.parquet`, one of [`table_names`]);
/// `None` for any other name. A file whose schema equals it (field names, types, nullability)
/// can be read as it is by any Parquet engine (`strato sql` does).
pub fn table_schema(name: &str) -> Option<arrow::datatypes::SchemaRef> {
    schema::ALL
        .iter()
        .find(|t| t.name == name)
        .map(|t| t.schema())
}

/// One table of a profile as Arrow record batches: the schema and rows of `<name>.parquet`
/// (`docs/profile-format.md`), kept in memory.
#[derive(Debug, Clone)]
pub struct ArrowTable {
    /// The table's name (`spans`, `tracks`, ...).
    pub name: &'static str,
    pub schema: arrow::datatypes::SchemaRef,
    /// The rows, in the order the file stores them, in batches of at most 65,536 rows.
    pub batches: Vec<arrow::array::RecordBatch>,
}

/// Every table of the profile `trace` would be written as (same schemas, same rows, same
/// order as [`write`] writes; [`table_names`] order), as Arrow record batches in memory: for
/// engines that query a trace without a profile directory (`strato sql`). The trace is
/// checked as [`write`] checks it.
pub fn arrow_tables(trace: &Trace) -> Result<Vec<ArrowTable>, StoreError> {
    write::arrow_tables(trace)
}
