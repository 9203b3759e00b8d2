//! The writer: turns a [`Trace`] into the Parquet tables of a profile directory, chunk by
//! chunk (bounded memory), and installs the directory atomically (temp sibling, fsync,
//! rename; `metadata.json` last). [`ProfileWriter`] does the same for a trace that is still
//! being read: its events are written as they arrive, so a streaming import never holds them.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{
    ArrayRef, DictionaryArray, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray,
    UInt32Array, UInt64Array,
};
use arrow::datatypes::{Int32Type, SchemaRef};
use arrow::error::ArrowError;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding};
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;
use strato_trace::{
    ArgsId, ArgsTable, CounterSample, FlowEnd, Instant, Level, Span, StrId, StringTable, Trace,
    Track, TrackKind,
};

use crate::error::{Result, StoreError, StoreErrorKind};
use crate::meta::{self, Metadata, TableInfo};
use crate::schema::{self, TableDef};

/// Rows per Arrow record batch handed to the Parquet writer.
const CHUNK_ROWS: usize = 16 * 1024;
/// Rows per Parquet row group (at most).
const ROW_GROUP_ROWS: usize = 1 << 20;
/// Buffered bytes at which a row group is closed before it has [`ROW_GROUP_ROWS`] rows.
const ROW_GROUP_BYTES: usize = 8 << 20;

/// A temp or old sibling (`DIR.tmp-PID`, `DIR.old-PID`) left by a process that is gone is
/// removed by a later write once nothing in it changed for this long: PIDs are reused, and a
/// store may be shared by machines whose processes this one cannot see.
pub const STALE_AGE: std::time::Duration = std::time::Duration::from_secs(3600);

/// See [`crate::write`].
pub(crate) fn write(trace: &Trace, dir: &Path) -> Result<()> {
    trace
        .validate()
        .map_err(|e| StoreError::new(dir, StoreErrorKind::InvalidTrace(e.to_string())))?;
    let mut writer = ProfileWriter::create(dir)?;
    writer.append(trace)?;
    writer.finish_tables(trace).map(|_| ())
}

/// A profile directory written while a trace is still being read: the event tables (spans,
/// instants, counter samples, args) are written in chunks as the events arrive
/// ([`ProfileWriter::write_events`], which takes them out of the trace), the other tables
/// (strings, ranks, processes, tracks, flows, devices) and `metadata.json` by
/// [`ProfileWriter::finish`], which installs the directory as [`crate::write`] does. Memory is
/// one chunk per event table plus the Parquet writers' open row groups, whatever the trace's
/// size. The files are the same, byte for byte, as [`crate::write`] writes for the whole trace.
///
/// Rules: the trace handed to each call is the same one, growing (strings, tracks and ranks
/// are only ever appended); the args ids of the events of one call index the blobs of that
/// call (the writer renumbers them); flows refer to spans by their index among all spans
/// written. Dropping the writer without `finish` removes the temporary directory.
pub struct ProfileWriter {
    dir: PathBuf,
    tmp: PathBuf,
    ctx: Ctx,
    spans: EventTable<Span>,
    instants: EventTable<Instant>,
    counters: EventTable<CounterSample>,
    args: ArgsWriter,
    /// Blobs received so far: added to the args ids of the next call's events.
    args_received: usize,
    installed: bool,
}

/// The rows [`ProfileWriter::finish`] wrote per table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WrittenRows {
    pub spans: u64,
    pub instants: u64,
    pub counter_samples: u64,
    pub flows: u64,
    pub args: u64,
}

impl ProfileWriter {
    /// Starts a profile at `dir`: refuses a target [`crate::write`] would refuse, and creates
    /// the temporary sibling the tables are written into.
    pub fn create(dir: &Path) -> Result<ProfileWriter> {
        check_target(dir)?;
        remove_stale_siblings(dir);
        let tmp = sibling(dir, "tmp")?;
        if let Some(parent) = tmp.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| StoreError::new(parent, e))?;
        }
        if tmp.symlink_metadata().is_ok() {
            // A leftover of an earlier write by a process with our pid: ours by name.
            std::fs::remove_dir_all(&tmp).map_err(|e| StoreError::new(&tmp, e))?;
        }
        std::fs::create_dir(&tmp).map_err(|e| StoreError::new(&tmp, e))?;
        let open = || -> Result<ProfileWriter> {
            let ctx = Ctx::new(&tmp);
            Ok(ProfileWriter {
                spans: EventTable::create(&ctx, &schema::SPANS)?,
                instants: EventTable::create(&ctx, &schema::INSTANTS)?,
                counters: EventTable::create(&ctx, &schema::COUNTERS)?,
                args: ArgsWriter {
                    file: TableFile::create(&ctx, &schema::ARGS)?,
                    pending: ArgsTable::default(),
                },
                ctx,
                dir: dir.to_path_buf(),
                tmp: tmp.clone(),
                args_received: 0,
                installed: false,
            })
        };
        open().inspect_err(|_| {
            let _ = std::fs::remove_dir_all(&tmp);
        })
    }

    /// Writes the spans, instants, counter samples and args `trace` holds and takes them out
    /// of it (the vectors are left empty; their capacity is kept for the next events). They
    /// are checked first, as [`crate::write`] checks a whole trace.
    pub fn write_events(&mut self, trace: &mut Trace) -> Result<()> {
        let flows = std::mem::take(&mut trace.flows);
        let valid = trace.validate();
        trace.flows = flows;
        valid
            .map_err(|e| StoreError::new(&self.dir, StoreErrorKind::InvalidTrace(e.to_string())))?;
        let base = self.args_received;
        let received = trace.args.len();
        if u32::try_from(base + received).is_err() {
            return Err(StoreError::new(
                &self.dir,
                StoreErrorKind::InvalidTrace("more than 2^32 args blobs".into()),
            ));
        }
        if base > 0 {
            let shift = |a: &mut Option<ArgsId>| {
                if let Some(a) = a {
                    a.0 += base as u32;
                }
            };
            trace.spans.iter_mut().for_each(|s| shift(&mut s.args));
            trace.instants.iter_mut().for_each(|i| shift(&mut i.args));
        }
        self.append(trace)?;
        self.args_received += received;
        trace.spans.clear();
        trace.instants.clear();
        trace.counters.clear();
        trace.args = ArgsTable::default();
        Ok(())
    }

    /// Writes the events of `trace` (args ids already global), leaving `trace` as it is.
    fn append(&mut self, trace: &Trace) -> Result<()> {
        self.ctx.sync(trace)?;
        let (ctx, strings) = (&self.ctx, &trace.strings);
        self.spans.put(&trace.spans, |rows, first| {
            span_columns(rows, first, ctx, strings)
        })?;
        self.instants.put(&trace.instants, |rows, first| {
            instant_columns(rows, first, ctx, strings)
        })?;
        self.counters
            .put(&trace.counters, |rows, _| counter_columns(rows, ctx))?;
        self.args.put(&trace.args)
    }

    /// Writes what `trace` still holds of events, then every other table and
    /// `metadata.json`, and installs the profile at its directory (atomically, see
    /// [`crate::write`]). `trace` holds the flows, whose span ids count every span written.
    pub fn finish(mut self, trace: &mut Trace) -> Result<WrittenRows> {
        self.write_events(trace)?;
        self.finish_tables(trace)
    }

    fn finish_tables(mut self, trace: &Trace) -> Result<WrittenRows> {
        let result = self.write_rest(trace);
        if result.is_ok() {
            install(&self.tmp, &self.dir)?;
            self.installed = true;
        }
        result
    }

    fn write_rest(&mut self, trace: &Trace) -> Result<WrittenRows> {
        self.ctx.sync(trace)?;
        let ctx = &self.ctx;
        let strings = &trace.strings;
        let spans = self
            .spans
            .close(|rows, first| span_columns(rows, first, ctx, strings))?;
        let instants = self
            .instants
            .close(|rows, first| instant_columns(rows, first, ctx, strings))?;
        let counters = self.counters.close(|rows, _| counter_columns(rows, ctx))?;
        let args = self.args.close()?;
        check_flows(trace, spans)
            .map_err(|e| StoreError::new(&self.dir, StoreErrorKind::InvalidTrace(e.to_string())))?;
        let mut tables = BTreeMap::new();
        for (def, rows) in [
            (&schema::SPANS, spans),
            (&schema::INSTANTS, instants),
            (&schema::COUNTERS, counters),
            (&schema::ARGS, args),
        ] {
            put_table(&mut tables, def, rows);
        }
        write_other_tables(trace, ctx, &mut tables)?;
        let metadata = Metadata::new(trace.clock.clone(), tables);
        let path = ctx.dir.join(meta::METADATA_FILE);
        let text = serde_json::to_string_pretty(&metadata)
            .map_err(|e| StoreError::new(&path, StoreErrorKind::Metadata(e.to_string())))?;
        let mut file = File::create(&path).map_err(|e| StoreError::new(&path, e))?;
        file.write_all(text.as_bytes())
            .and_then(|()| file.write_all(b"\n"))
            .and_then(|()| file.sync_all())
            .map_err(|e| StoreError::new(&path, e))?;
        sync_dir(&ctx.dir)?;
        Ok(WrittenRows {
            spans: spans as u64,
            instants: instants as u64,
            counter_samples: counters as u64,
            flows: trace.flows.len() as u64,
            args: args as u64,
        })
    }
}

impl std::fmt::Debug for ProfileWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProfileWriter")
            .field("dir", &self.dir)
            .field("tmp", &self.tmp)
            .field("spans", &self.spans.file.rows)
            .field("instants", &self.instants.file.rows)
            .field("counters", &self.counters.file.rows)
            .field("args", &self.args.file.rows)
            .finish_non_exhaustive()
    }
}

impl Drop for ProfileWriter {
    fn drop(&mut self) {
        if !self.installed {
            let _ = std::fs::remove_dir_all(&self.tmp);
        }
    }
}

/// The checks [`Trace::validate`] makes of flows, with `spans` spans written (the trace
/// itself no longer holds them).
fn check_flows(trace: &Trace, spans: usize) -> std::result::Result<(), String> {
    for (i, f) in trace.flows.iter().enumerate() {
        if f.category.0 as usize >= trace.strings.len() {
            return Err(format!(
                "flow {i} refers to string {} which does not exist",
                f.category.0
            ));
        }
        for end in [&f.from, &f.to].into_iter().flatten() {
            if end.track.0 as usize >= trace.tracks.len() {
                return Err(format!(
                    "flow {i} refers to track {} which does not exist",
                    end.track.0
                ));
            }
            if !strato_trace::time_in_range(end.ts) {
                return Err(format!("flow {i} has a time out of range: {}", end.ts));
            }
            if let Some(s) = end.span {
                if s.0 as usize >= spans {
                    return Err(format!(
                        "flow {i} refers to span {} which does not exist",
                        s.0
                    ));
                }
            }
        }
    }
    Ok(())
}

fn put_table(tables: &mut BTreeMap<String, TableInfo>, def: &TableDef, rows: usize) {
    tables.insert(
        def.name.to_owned(),
        TableInfo {
            file: def.file(),
            rows: rows as u64,
        },
    );
}

/// The names of the files a profile directory holds (the tables and `metadata.json`).
fn profile_file_names() -> Vec<String> {
    schema::ALL
        .iter()
        .map(|t| t.file())
        .chain(std::iter::once(meta::METADATA_FILE.to_owned()))
        .collect()
}

/// Refuses a target that exists and is neither an empty directory nor a profile holding only
/// the files stratoscope writes (replacing it would delete the others).
fn check_target(dir: &Path) -> Result<()> {
    let Ok(info) = std::fs::metadata(dir) else {
        return Ok(());
    };
    let refuse = |why: String| Err(StoreError::new(dir, StoreErrorKind::Refused(why)));
    if !info.is_dir() {
        return refuse("it exists and is not a directory".into());
    }
    if is_empty_dir(dir)? {
        return Ok(());
    }
    if !meta::has_marker(dir) {
        return refuse(
            "it is a non-empty directory that is not a stratoscope profile (no metadata.json \
             marker)"
                .into(),
        );
    }
    let foreign = foreign_entries(dir)?;
    if !foreign.is_empty() {
        return refuse(format!(
            "the profile holds files stratoscope did not write ({}); move them out or write \
             the profile elsewhere",
            foreign.join(", ")
        ));
    }
    Ok(())
}

/// Entries of the profile directory `dir` that are not files stratoscope writes, sorted
/// (directories end in `/`).
pub(crate) fn foreign_entries(dir: &Path) -> Result<Vec<String>> {
    let ours = profile_file_names();
    let mut foreign = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| StoreError::new(dir, e))? {
        let entry = entry.map_err(|e| StoreError::new(dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_file = entry.file_type().is_ok_and(|t| t.is_file());
        if !(is_file && ours.contains(&name)) {
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            foreign.push(if is_dir { format!("{name}/") } else { name });
        }
    }
    foreign.sort();
    Ok(foreign)
}

/// See [`crate::remove_profile_files`].
pub(crate) fn remove_profile_files(dir: &Path) -> Result<()> {
    for name in
        std::iter::once(meta::METADATA_FILE.to_owned()).chain(schema::ALL.iter().map(|t| t.file()))
    {
        let path = dir.join(name);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(StoreError::new(&path, e))
            }
            _ => {}
        }
    }
    sync_dir(dir)
}

fn is_empty_dir(dir: &Path) -> Result<bool> {
    let mut entries = std::fs::read_dir(dir).map_err(|e| StoreError::new(dir, e))?;
    Ok(entries.next().is_none())
}

/// `DIR.<what>-<pid>` beside `dir`.
fn sibling(dir: &Path, what: &str) -> Result<PathBuf> {
    let name = dir.file_name().ok_or_else(|| {
        StoreError::new(
            dir,
            StoreErrorKind::Refused("the path does not end in a directory name".into()),
        )
    })?;
    let mut name = name.to_os_string();
    name.push(format!(".{what}-{}", std::process::id()));
    Ok(dir.with_file_name(name))
}

/// Removes `DIR.tmp-PID` siblings (and `DIR.old-PID` ones while `DIR` exists) whose process
/// is gone and that are older than [`STALE_AGE`]. Best effort: a sibling that cannot be
/// removed is left.
fn remove_stale_siblings(dir: &Path) {
    let Some(name) = dir.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return;
    };
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    let dir_exists = dir.exists();
    for entry in entries.flatten() {
        let entry_name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = entry_name.strip_prefix(&format!("{name}.")) else {
            continue;
        };
        let pid = match rest.split_once('-') {
            Some(("tmp", pid)) => pid,
            // The old profile of an interrupted replace is the only copy while DIR is missing.
            Some(("old", pid)) if dir_exists => pid,
            _ => continue,
        };
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        if pid == std::process::id() || process_alive(pid) {
            continue;
        }
        let path = entry.path();
        if entry.file_type().is_ok_and(|t| t.is_dir()) && untouched_for(&path) >= STALE_AGE {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

/// False only when no process `pid` exists on this machine.
fn process_alive(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    !matches!(
        rustix::process::test_kill_process(pid),
        Err(rustix::io::Errno::SRCH)
    )
}

/// How long ago `dir` or any file directly in it was last modified (zero when unknown).
fn untouched_for(dir: &Path) -> std::time::Duration {
    let mtime = |p: &Path| std::fs::symlink_metadata(p).and_then(|m| m.modified()).ok();
    let mut newest = mtime(dir);
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            newest = newest.max(mtime(&entry.path()));
        }
    }
    newest
        .and_then(|t| t.elapsed().ok())
        .unwrap_or(std::time::Duration::ZERO)
}

/// Moves the finished `tmp` to `dir`, replacing an existing profile or empty directory, so
/// that `dir` holds either the old or the new profile, complete, and nothing else is left:
/// the replace is one `renameat2(RENAME_EXCHANGE)` (the old profile lands in `tmp` and is
/// removed; if it cannot be, the exchange is undone). The new directory keeps the old one's
/// permission bits.
fn install(tmp: &Path, dir: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let err = |path: &Path| {
        let path = path.to_path_buf();
        move |e| StoreError::new(path, e)
    };
    let Ok(old_info) = std::fs::metadata(dir) else {
        std::fs::rename(tmp, dir).map_err(err(dir))?;
        return sync_parent(dir);
    };
    let keep_mode = || {
        std::fs::set_permissions(
            dir,
            std::fs::Permissions::from_mode(old_info.permissions().mode() & 0o7777),
        )
        .map_err(err(dir))
    };
    if is_empty_dir(dir)? {
        // rename(2) replaces an empty directory.
        std::fs::rename(tmp, dir).map_err(err(dir))?;
        keep_mode()?;
        return sync_parent(dir);
    }
    // Re-check just before moving anything: never move away what is not a profile.
    check_target(dir)?;
    // The old profile's files must be removable, or the replace would leave it behind.
    rustix::fs::access(dir, rustix::fs::Access::WRITE_OK)
        .map_err(|e| StoreError::new(dir, std::io::Error::from(e)))?;
    match rustix::fs::renameat_with(
        rustix::fs::CWD,
        tmp,
        rustix::fs::CWD,
        dir,
        rustix::fs::RenameFlags::EXCHANGE,
    ) {
        Ok(()) => {
            sync_parent(dir)?;
            // `tmp` now holds the old profile.
            if let Err(e) = std::fs::remove_dir_all(tmp) {
                let undo = rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    tmp,
                    rustix::fs::CWD,
                    dir,
                    rustix::fs::RenameFlags::EXCHANGE,
                );
                if undo.is_ok() {
                    let _ = sync_parent(dir);
                }
                return Err(StoreError::new(dir, e));
            }
            keep_mode()
        }
        Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => {
            // The file system cannot exchange: move the old one aside, then the new in.
            let old = sibling(dir, "old")?;
            if old.symlink_metadata().is_ok() {
                std::fs::remove_dir_all(&old).map_err(err(&old))?;
            }
            std::fs::rename(dir, &old).map_err(err(dir))?;
            if let Err(e) = std::fs::rename(tmp, dir) {
                let _ = std::fs::rename(&old, dir);
                return Err(StoreError::new(dir, e));
            }
            sync_parent(dir)?;
            std::fs::remove_dir_all(&old).map_err(err(&old))?;
            keep_mode()
        }
        Err(e) => Err(StoreError::new(dir, std::io::Error::from(e))),
    }
}

/// fsyncs the directory holding `path` so a rename survives a crash.
fn sync_parent(path: &Path) -> Result<()> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    sync_dir(parent)
}

fn sync_dir(dir: &Path) -> Result<()> {
    if cfg!(unix) {
        File::open(dir)
            .and_then(|f| f.sync_all())
            .map_err(|e| StoreError::new(dir, e))?;
    }
    Ok(())
}

/// One Parquet file being written: rows go in as record batches of up to [`CHUNK_ROWS`]; a row
/// group is closed early once its buffered pages pass [`ROW_GROUP_BYTES`].
struct TableFile {
    path: PathBuf,
    schema: SchemaRef,
    writer: ArrowWriter<File>,
    rows: usize,
}

impl TableFile {
    fn create(ctx: &Ctx, def: &TableDef) -> Result<TableFile> {
        let path = ctx.dir.join(def.file());
        let schema = def.schema();
        let file = File::create(&path).map_err(|e| StoreError::new(&path, e))?;
        let writer = ArrowWriter::try_new(file, schema.clone(), Some(ctx.props.clone()))
            .map_err(|e| StoreError::new(&path, StoreErrorKind::Parquet(e.to_string())))?;
        Ok(TableFile {
            path,
            schema,
            writer,
            rows: 0,
        })
    }

    fn parquet_err(&self, e: impl std::fmt::Display) -> StoreError {
        StoreError::new(&self.path, StoreErrorKind::Parquet(e.to_string()))
    }

    /// Writes one chunk of rows, given as its columns.
    fn write(&mut self, columns: Result<Vec<ArrayRef>, ArrowError>) -> Result<()> {
        let columns = columns.map_err(|e| self.parquet_err(e))?;
        let batch =
            RecordBatch::try_new(self.schema.clone(), columns).map_err(|e| self.parquet_err(e))?;
        self.writer.write(&batch).map_err(|e| self.parquet_err(e))?;
        // The writer holds the open row group's encoded pages: close it early when wide
        // rows (args texts) would make it large.
        if self.writer.memory_size() > ROW_GROUP_BYTES {
            self.writer.flush().map_err(|e| self.parquet_err(e))?;
        }
        self.rows += batch.num_rows();
        Ok(())
    }

    /// Finishes the file (footer) and fsyncs it; returns its row count.
    fn close(&mut self) -> Result<usize> {
        self.writer.finish().map_err(|e| self.parquet_err(e))?;
        self.writer
            .inner()
            .sync_all()
            .map_err(|e| StoreError::new(&self.path, e))?;
        Ok(self.rows)
    }
}

/// An event table written as events arrive: rows are written in chunks of exactly
/// [`CHUNK_ROWS`] (the last one shorter), whatever the batches they arrive in, so the file is
/// the one a single pass over all the rows writes; the rest waits in `pending`.
struct EventTable<T> {
    file: TableFile,
    pending: Vec<T>,
}

impl<T: Clone> EventTable<T> {
    fn create(ctx: &Ctx, def: &TableDef) -> Result<Self> {
        Ok(EventTable {
            file: TableFile::create(ctx, def)?,
            pending: Vec::new(),
        })
    }

    /// Adds `rows`; `columns(chunk, first_id)` encodes one chunk.
    fn put(
        &mut self,
        mut rows: &[T],
        columns: impl Fn(&[T], usize) -> Result<Vec<ArrayRef>, ArrowError>,
    ) -> Result<()> {
        if !self.pending.is_empty() {
            let take = (CHUNK_ROWS - self.pending.len()).min(rows.len());
            self.pending.extend_from_slice(&rows[..take]);
            rows = &rows[take..];
            if self.pending.len() < CHUNK_ROWS {
                return Ok(());
            }
            let first = self.file.rows;
            self.file.write(columns(&self.pending, first))?;
            self.pending.clear();
        }
        let mut chunks = rows.chunks_exact(CHUNK_ROWS);
        for chunk in &mut chunks {
            let first = self.file.rows;
            self.file.write(columns(chunk, first))?;
        }
        self.pending.extend_from_slice(chunks.remainder());
        Ok(())
    }

    /// Writes what is pending and finishes the file; returns its row count.
    fn close(
        &mut self,
        columns: impl Fn(&[T], usize) -> Result<Vec<ArrayRef>, ArrowError>,
    ) -> Result<usize> {
        if !self.pending.is_empty() {
            let first = self.file.rows;
            self.file.write(columns(&self.pending, first))?;
            self.pending = Vec::new();
        }
        self.file.close()
    }
}

/// The args table, written as [`EventTable`] writes events (blobs instead of rows).
struct ArgsWriter {
    file: TableFile,
    pending: ArgsTable,
}

impl ArgsWriter {
    fn put(&mut self, blobs: &ArgsTable) -> Result<()> {
        let mut next = 0;
        if !self.pending.is_empty() {
            while next < blobs.len() && self.pending.len() < CHUNK_ROWS {
                self.pending.push(blobs.get(next).unwrap_or_default());
                next += 1;
            }
            if self.pending.len() < CHUNK_ROWS {
                return Ok(());
            }
            let pending = std::mem::take(&mut self.pending);
            self.write_chunk(&pending, 0..pending.len())?;
        }
        while blobs.len() - next >= CHUNK_ROWS {
            self.write_chunk(blobs, next..next + CHUNK_ROWS)?;
            next += CHUNK_ROWS;
        }
        for i in next..blobs.len() {
            self.pending.push(blobs.get(i).unwrap_or_default());
        }
        Ok(())
    }

    fn write_chunk(&mut self, blobs: &ArgsTable, range: Range<usize>) -> Result<()> {
        let first = self.file.rows;
        let columns = vec![
            ids(first..first + range.len()),
            Arc::new(StringArray::from_iter_values(blobs.range(range))) as ArrayRef,
        ];
        self.file.write(Ok(columns))
    }

    fn close(&mut self) -> Result<usize> {
        if !self.pending.is_empty() {
            let pending = std::mem::take(&mut self.pending);
            self.write_chunk(&pending, 0..pending.len())?;
        }
        self.file.close()
    }
}

/// The name/category texts one chunk uses, as the dictionary its columns share: a chunk's
/// dictionary holds only what it uses, so the writer never copies the whole string table
/// (the Parquet files do not depend on it: the encoder reads values, not keys).
struct ChunkStrings<'s> {
    strings: &'s StringTable,
    keys: std::collections::HashMap<u32, u32>,
    values: Vec<&'s str>,
}

impl<'s> ChunkStrings<'s> {
    fn new(strings: &'s StringTable) -> Self {
        ChunkStrings {
            strings,
            keys: Default::default(),
            values: Vec::new(),
        }
    }

    fn key(&mut self, id: StrId) -> Option<u32> {
        let values = &mut self.values;
        let strings = self.strings;
        Some(*self.keys.entry(id.0).or_insert_with(|| {
            values.push(strings.get(id));
            (values.len() - 1) as u32
        }))
    }

    fn keyed(&mut self, ids: impl Iterator<Item = StrId>) -> Vec<Option<u32>> {
        ids.map(|id| self.key(id)).collect()
    }

    fn dictionary(&self) -> ArrayRef {
        Arc::new(StringArray::from_iter_values(self.values.iter()))
    }
}

fn span_columns(
    rows: &[Span],
    first: usize,
    ctx: &Ctx,
    strings: &StringTable,
) -> Result<Vec<ArrayRef>, ArrowError> {
    let loc: Vec<&Location> = rows.iter().map(|s| ctx.location(s.track.0)).collect();
    let mut texts = ChunkStrings::new(strings);
    let names = texts.keyed(rows.iter().map(|s| s.name));
    let categories = texts.keyed(rows.iter().map(|s| s.category));
    let dictionary = texts.dictionary();
    Ok(vec![
        ids(first..first + rows.len()),
        u32s(rows.iter().map(|s| Some(s.track.0))),
        i64s(rows.iter().map(|s| Some(s.start))),
        i64s(rows.iter().map(|s| Some(s.end))),
        i64s(rows.iter().map(|s| Some(s.end.saturating_sub(s.start)))),
        dict(names.into_iter(), &dictionary)?,
        dict(categories.into_iter(), &dictionary)?,
        dict(rows.iter().map(|s| Some(level_code(s.level))), &ctx.levels)?,
        u64s(rows.iter().map(|s| s.correlation)),
        u64s(rows.iter().map(|s| s.external_id)),
        u32s(rows.iter().map(|s| s.args.map(|a| a.0))),
        u32s(loc.iter().map(|l| Some(l.rank))),
        i64s(loc.iter().map(|l| l.pid)),
        i64s(loc.iter().map(|l| l.tid)),
        i64s(loc.iter().map(|l| l.device)),
        i64s(loc.iter().map(|l| l.queue)),
    ])
}

fn instant_columns(
    rows: &[Instant],
    first: usize,
    ctx: &Ctx,
    strings: &StringTable,
) -> Result<Vec<ArrayRef>, ArrowError> {
    let loc: Vec<&Location> = rows.iter().map(|s| ctx.location(s.track.0)).collect();
    let mut texts = ChunkStrings::new(strings);
    let names = texts.keyed(rows.iter().map(|s| s.name));
    let categories = texts.keyed(rows.iter().map(|s| s.category));
    let dictionary = texts.dictionary();
    Ok(vec![
        ids(first..first + rows.len()),
        u32s(rows.iter().map(|s| Some(s.track.0))),
        i64s(rows.iter().map(|s| Some(s.ts))),
        dict(names.into_iter(), &dictionary)?,
        dict(categories.into_iter(), &dictionary)?,
        dict(rows.iter().map(|s| Some(level_code(s.level))), &ctx.levels)?,
        u32s(rows.iter().map(|s| s.args.map(|a| a.0))),
        u32s(loc.iter().map(|l| Some(l.rank))),
        i64s(loc.iter().map(|l| l.pid)),
        i64s(loc.iter().map(|l| l.tid)),
        i64s(loc.iter().map(|l| l.device)),
        i64s(loc.iter().map(|l| l.queue)),
    ])
}

fn counter_columns(rows: &[CounterSample], ctx: &Ctx) -> Result<Vec<ArrayRef>, ArrowError> {
    let loc: Vec<&Location> = rows.iter().map(|s| ctx.location(s.track.0)).collect();
    Ok(vec![
        u32s(rows.iter().map(|c| Some(c.track.0))),
        i64s(rows.iter().map(|c| Some(c.ts))),
        Arc::new(Float64Array::from_iter_values(rows.iter().map(|c| c.value))),
        dict(counter_keys(rows, &loc), &ctx.counter_names)?,
        dict(counter_keys(rows, &loc), &ctx.counter_units)?,
        u32s(loc.iter().map(|l| Some(l.rank))),
        i64s(loc.iter().map(|l| l.pid)),
        i64s(loc.iter().map(|l| l.device)),
    ])
}

/// The columns of rows `range` of a table (one chunk).
type ChunkColumns<'a> = dyn Fn(Range<usize>) -> Result<Vec<ArrayRef>, ArrowError> + 'a;

/// Where [`other_tables`] puts each table: Parquet files ([`FileSink`]) or Arrow record
/// batches in memory ([`crate::arrow_tables`]).
trait TableSink {
    /// Takes table `def`, `rows` rows long, whose chunks `columns` encodes.
    fn table(&mut self, def: &TableDef, rows: usize, columns: &ChunkColumns<'_>) -> Result<()>;
}

/// Writes each table as its Parquet file in the directory being written.
struct FileSink<'a> {
    ctx: &'a Ctx,
    tables: &'a mut BTreeMap<String, TableInfo>,
}

impl TableSink for FileSink<'_> {
    fn table(&mut self, def: &TableDef, rows: usize, columns: &ChunkColumns<'_>) -> Result<()> {
        let mut file = TableFile::create(self.ctx, def)?;
        let mut start = 0;
        while start < rows {
            let end = rows.min(start + CHUNK_ROWS);
            file.write(columns(start..end))?;
            start = end;
        }
        let written = file.close()?;
        put_table(self.tables, def, written);
        Ok(())
    }
}

/// Keeps each table as record batches of [`CHUNK_ROWS`] rows (see [`crate::arrow_tables`]).
struct MemorySink {
    out: Vec<crate::ArrowTable>,
}

impl TableSink for MemorySink {
    fn table(&mut self, def: &TableDef, rows: usize, columns: &ChunkColumns<'_>) -> Result<()> {
        let mut table = crate::ArrowTable {
            name: def.name,
            schema: def.schema(),
            batches: Vec::new(),
        };
        let mut start = 0;
        while start < rows {
            let end = rows.min(start + CHUNK_ROWS);
            table.batches.push(batch(def, columns(start..end))?);
            start = end;
        }
        self.out.push(table);
        Ok(())
    }
}

/// One chunk of `def` as a record batch (errors name the table: there is no file).
fn batch(def: &TableDef, columns: Result<Vec<ArrayRef>, ArrowError>) -> Result<RecordBatch> {
    let fail = |e: ArrowError| {
        StoreError::new(
            Path::new(def.name),
            StoreErrorKind::InvalidTrace(e.to_string()),
        )
    };
    RecordBatch::try_new(def.schema(), columns.map_err(fail)?).map_err(fail)
}

/// See [`crate::arrow_tables`]: every table of the profile `trace` would be written as, in
/// [`schema::ALL`] order.
pub(crate) fn arrow_tables(trace: &Trace) -> Result<Vec<crate::ArrowTable>> {
    trace.validate().map_err(|e| {
        StoreError::new(
            Path::new("trace"),
            StoreErrorKind::InvalidTrace(e.to_string()),
        )
    })?;
    let mut ctx = Ctx::new(Path::new("trace"));
    ctx.sync(trace)?;
    let mut sink = MemorySink { out: Vec::new() };
    let strings = &trace.strings;
    let ctx = &ctx;
    sink.table(&schema::SPANS, trace.spans.len(), &|r: Range<usize>| {
        span_columns(&trace.spans[r.clone()], r.start, ctx, strings)
    })?;
    sink.table(&schema::INSTANTS, trace.instants.len(), &|r: Range<
        usize,
    >| {
        instant_columns(&trace.instants[r.clone()], r.start, ctx, strings)
    })?;
    sink.table(&schema::COUNTERS, trace.counters.len(), &|r: Range<
        usize,
    >| {
        counter_columns(&trace.counters[r], ctx)
    })?;
    sink.table(&schema::ARGS, trace.args.len(), &|r: Range<usize>| {
        Ok(vec![
            ids(r.clone()),
            Arc::new(StringArray::from_iter_values(trace.args.range(r))) as ArrayRef,
        ])
    })?;
    other_tables(trace, ctx, &mut sink)?;
    let mut out = sink.out;
    let order = |name: &str| schema::ALL.iter().position(|d| d.name == name);
    out.sort_by_key(|t| order(t.name));
    Ok(out)
}

/// Writes the strings, ranks, processes, tracks, flows and devices tables.
fn write_other_tables(
    trace: &Trace,
    ctx: &Ctx,
    tables: &mut BTreeMap<String, TableInfo>,
) -> Result<()> {
    other_tables(trace, ctx, &mut FileSink { ctx, tables })
}

/// Hands the strings, ranks, processes, tracks, flows and devices tables to `sink`.
fn other_tables(trace: &Trace, ctx: &Ctx, sink: &mut dyn TableSink) -> Result<()> {
    sink.table(&schema::STRINGS, trace.strings.len(), &|r| {
        Ok(vec![
            ids(r.clone()),
            Arc::new(StringArray::from_iter_values(
                trace
                    .strings
                    .iter()
                    .skip(r.start)
                    .take(r.len())
                    .map(|(_, s)| s),
            )),
        ])
    })?;
    sink.table(&schema::RANKS, trace.ranks.len(), &|r| {
        let rows = &trace.ranks[r.clone()];
        let notes: Vec<Option<String>> = rows
            .iter()
            .map(|x| (!x.notes.is_empty() || x.notes.events_read > 0).then(|| x.notes.to_json()))
            .collect();
        Ok(vec![
            ids(r),
            i64s(rows.iter().map(|x| x.rank)),
            i64s(rows.iter().map(|x| x.world_size)),
            strs(rows.iter().map(|x| Some(x.source.as_str()))),
            strs(rows.iter().map(|x| Some(x.format.as_str()))),
            strs(rows.iter().map(|x| x.host.as_deref())),
            strs(rows.iter().map(|x| x.metadata_json.as_deref())),
            strs(notes.iter().map(Option::as_deref)),
        ])
    })?;

    sink.table(&schema::PROCESSES, trace.processes.len(), &|r| {
        let rows = &trace.processes[r];
        Ok(vec![
            u32s(rows.iter().map(|x| Some(x.rank.0))),
            i64s(rows.iter().map(|x| Some(x.pid))),
            strs(rows.iter().map(|x| x.name.as_deref())),
            strs(rows.iter().map(|x| x.labels.as_deref())),
        ])
    })?;

    sink.table(&schema::TRACKS, trace.tracks.len(), &|r| {
        let rows = &trace.tracks[r.clone()];
        let loc: Vec<Location> = rows.iter().map(Location::of).collect();
        let kinds = rows.iter().map(|t| Some(kind_code(&t.kind)));
        let counter = |f: for<'x> fn(&'x str, &'x str) -> &'x str| {
            strs(rows.iter().map(move |t| match &t.kind {
                TrackKind::Counter { name, unit, .. } => Some(f(name, unit)),
                _ => None,
            }))
        };
        let custom = |f: for<'x> fn(&'x str, &'x str) -> &'x str| {
            strs(rows.iter().map(move |t| match &t.kind {
                TrackKind::Custom { group, name } => Some(f(group, name)),
                _ => None,
            }))
        };
        Ok(vec![
            ids(r),
            u32s(rows.iter().map(|t| Some(t.rank.0))),
            dict(kinds, &ctx.kinds)?,
            i64s(loc.iter().map(|l| l.pid)),
            i64s(loc.iter().map(|l| l.tid)),
            i64s(loc.iter().map(|l| l.device)),
            i64s(loc.iter().map(|l| l.queue)),
            counter(|name, _| name),
            counter(|_, unit| unit),
            custom(|group, _| group),
            custom(|_, name| name),
            strs(rows.iter().map(|t| t.name.as_deref())),
            i64s(rows.iter().map(|t| t.sort_index)),
        ])
    })?;

    sink.table(&schema::FLOWS, trace.flows.len(), &|r| {
        let rows = &trace.flows[r];
        let end = |pick: fn(&strato_trace::Flow) -> Option<&FlowEnd>| {
            (
                u32s(rows.iter().map(move |f| pick(f).map(|e| e.track.0))),
                i64s(rows.iter().map(move |f| pick(f).map(|e| e.ts))),
                u32s(
                    rows.iter()
                        .map(move |f| pick(f).and_then(|e| e.span).map(|s| s.0)),
                ),
            )
        };
        let (from_track, from_ts, from_span) = end(|f| f.from.as_ref());
        let (to_track, to_ts, to_span) = end(|f| f.to.as_ref());
        let mut texts = ChunkStrings::new(&trace.strings);
        let categories = texts.keyed(rows.iter().map(|f| f.category));
        Ok(vec![
            u64s(rows.iter().map(|f| Some(f.id))),
            dict(categories.into_iter(), &texts.dictionary())?,
            from_track,
            from_ts,
            from_span,
            to_track,
            to_ts,
            to_span,
        ])
    })?;

    sink.table(&schema::DEVICES, trace.devices.len(), &|r| {
        let rows = &trace.devices[r];
        Ok(vec![
            u32s(rows.iter().map(|d| d.rank.map(|x| x.0))),
            i64s(rows.iter().map(|d| Some(d.index))),
            strs(rows.iter().map(|d| d.name.as_deref())),
            i64s(rows.iter().map(|d| d.sm_count)),
            i64s(rows.iter().map(|d| d.total_memory_bytes)),
            i64s(rows.iter().map(|d| d.compute_major)),
            i64s(rows.iter().map(|d| d.compute_minor)),
            i64s(rows.iter().map(|d| d.clock_rate_khz)),
            Arc::new(Float64Array::from_iter(
                rows.iter().map(|d| d.memory_bandwidth_bytes_per_s),
            )),
            strs(rows.iter().map(|d| d.extra_json.as_deref())),
        ])
    })?;

    Ok(())
}

/// Where a track is, flattened for the convenience columns.
#[derive(Debug, Default)]
struct Location {
    rank: u32,
    pid: Option<i64>,
    tid: Option<i64>,
    device: Option<i64>,
    queue: Option<i64>,
    /// A counter track: the counter name/unit dictionaries have an entry for it.
    counter: bool,
}

impl Location {
    fn of(track: &Track) -> Location {
        let rank = track.rank.0;
        match &track.kind {
            TrackKind::Thread { pid, tid } => Location {
                rank,
                pid: Some(*pid),
                tid: Some(*tid),
                ..Location::default()
            },
            TrackKind::DeviceQueue { device, queue } => Location {
                rank,
                device: Some(*device),
                queue: Some(*queue),
                ..Location::default()
            },
            TrackKind::Counter { pid, device, .. } => Location {
                rank,
                pid: *pid,
                device: *device,
                counter: true,
                ..Location::default()
            },
            TrackKind::Custom { .. } => Location {
                rank,
                ..Location::default()
            },
        }
    }
}

/// What every table writer shares: the target directory, the fixed dictionaries, and what is
/// known of the tracks so far (their locations and counter names), kept in step with the
/// trace by [`Ctx::sync`].
struct Ctx {
    dir: PathBuf,
    props: WriterProperties,
    /// Level names keyed by [`level_code`].
    levels: ArrayRef,
    /// Track kind names keyed by [`kind_code`].
    kinds: ArrayRef,
    /// Per track: its counter name / unit (empty for other tracks), keyed by track id.
    counter_names: ArrayRef,
    counter_units: ArrayRef,
    locations: Vec<Location>,
}

impl Ctx {
    fn new(dir: &Path) -> Ctx {
        let empty: ArrayRef = Arc::new(StringArray::from_iter_values(std::iter::empty::<&str>()));
        Ctx {
            dir: dir.to_path_buf(),
            props: writer_properties(),
            levels: Arc::new(StringArray::from_iter_values(
                Level::ALL.iter().map(|l| l.as_str()),
            )),
            kinds: Arc::new(StringArray::from_iter_values(KINDS)),
            counter_names: empty.clone(),
            counter_units: empty,
            locations: Vec::new(),
        }
    }

    /// Catches up with the tracks `trace` has now (tracks are only ever appended, and a
    /// track's kind never changes).
    fn sync(&mut self, trace: &Trace) -> Result<()> {
        if i32::try_from(trace.strings.len()).is_err() || i32::try_from(trace.tracks.len()).is_err()
        {
            return Err(StoreError::new(
                &self.dir,
                StoreErrorKind::InvalidTrace("more than 2^31 strings or tracks".into()),
            ));
        }
        if trace.tracks.len() == self.locations.len() {
            return Ok(());
        }
        let known = self.locations.len().min(trace.tracks.len());
        self.locations.truncate(known);
        self.locations
            .extend(trace.tracks[known..].iter().map(Location::of));
        let counter_field = |f: for<'x> fn(&'x str, &'x str) -> &'x str| -> ArrayRef {
            Arc::new(StringArray::from_iter_values(trace.tracks.iter().map(
                |t| match &t.kind {
                    TrackKind::Counter { name, unit, .. } => f(name, unit),
                    _ => "",
                },
            )))
        };
        self.counter_names = counter_field(|name, _| name);
        self.counter_units = counter_field(|_, unit| unit);
        Ok(())
    }

    fn location(&self, track: u32) -> &Location {
        // Validated: every track id refers to a track.
        static NOWHERE: Location = Location {
            rank: 0,
            pid: None,
            tid: None,
            device: None,
            queue: None,
            counter: false,
        };
        self.locations.get(track as usize).unwrap_or(&NOWHERE)
    }
}

/// Snappy, bounded row groups, and per-column encodings: columns whose values are (nearly)
/// all distinct (ids, times, correlation ids, JSON texts) skip the dictionary attempt, and
/// integer ones among them are delta-encoded (sequential ids then cost almost nothing).
/// Settings are keyed by column name, which means the same thing in every table.
fn writer_properties() -> WriterProperties {
    const DELTA: [&str; 12] = [
        "id",
        "start_ns",
        "end_ns",
        "dur_ns",
        "ts_ns",
        "correlation",
        "external_id",
        "args_id",
        "from_ts_ns",
        "from_span",
        "to_ts_ns",
        "to_span",
    ];
    const UNIQUE_TEXT: [&str; 4] = ["text", "json", "metadata_json", "extra_json"];
    let mut builder = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_created_by(concat!("stratoscope ", env!("CARGO_PKG_VERSION")).to_owned());
    for name in DELTA {
        builder = builder
            .set_column_dictionary_enabled(ColumnPath::from(name), false)
            .set_column_encoding(ColumnPath::from(name), Encoding::DELTA_BINARY_PACKED);
    }
    for name in UNIQUE_TEXT {
        builder = builder.set_column_dictionary_enabled(ColumnPath::from(name), false);
    }
    builder.build()
}

/// Names of the track kinds, keyed by [`kind_code`].
pub(crate) const KINDS: [&str; 4] = ["Thread", "DeviceQueue", "Counter", "Custom"];

fn kind_code(kind: &TrackKind) -> u32 {
    match kind {
        TrackKind::Thread { .. } => 0,
        TrackKind::DeviceQueue { .. } => 1,
        TrackKind::Counter { .. } => 2,
        TrackKind::Custom { .. } => 3,
    }
}

fn level_code(level: Level) -> u32 {
    u32::from(level.code())
}

/// Keys into the per-track counter name/unit dictionaries: the track id for samples on
/// counter tracks, null for samples on other tracks.
fn counter_keys<'a>(
    rows: &'a [strato_trace::CounterSample],
    loc: &'a [&Location],
) -> impl Iterator<Item = Option<u32>> + 'a {
    rows.iter()
        .zip(loc)
        .map(|(c, l)| l.counter.then_some(c.track.0))
}

/// `range` as a `UInt32` id column.
fn ids(range: Range<usize>) -> ArrayRef {
    Arc::new(UInt32Array::from_iter_values(range.map(|i| i as u32)))
}

fn u32s(values: impl Iterator<Item = Option<u32>>) -> ArrayRef {
    Arc::new(UInt32Array::from_iter(values))
}

fn u64s(values: impl Iterator<Item = Option<u64>>) -> ArrayRef {
    Arc::new(UInt64Array::from_iter(values))
}

fn i64s(values: impl Iterator<Item = Option<i64>>) -> ArrayRef {
    Arc::new(Int64Array::from_iter(values))
}

fn strs<'a>(values: impl Iterator<Item = Option<&'a str>>) -> ArrayRef {
    Arc::new(StringArray::from_iter(values))
}

/// A dictionary column whose keys index `values` (shared, not copied, between chunks).
fn dict(
    keys: impl Iterator<Item = Option<u32>>,
    values: &ArrayRef,
) -> Result<ArrayRef, ArrowError> {
    let keys = Int32Array::from_iter(keys.map(|k| k.map(|k| k as i32)));
    Ok(Arc::new(DictionaryArray::<Int32Type>::try_new(
        keys,
        values.clone(),
    )?))
}
