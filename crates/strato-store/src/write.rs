//! The writer: turns a [`Trace`] into the Parquet tables of a profile directory, chunk by
//! chunk (bounded memory), and installs the directory atomically (temp sibling, fsync,
//! rename; `metadata.json` last).

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
use arrow::datatypes::Int32Type;
use arrow::error::ArrowError;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding};
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;
use strato_trace::{FlowEnd, Level, Trace, Track, TrackKind};

use crate::error::{Result, StoreError, StoreErrorKind};
use crate::meta::{self, Metadata, TableInfo};
use crate::schema::{self, TableDef};

/// Rows per Arrow record batch handed to the Parquet writer.
const CHUNK_ROWS: usize = 64 * 1024;
/// Rows per Parquet row group (at most).
const ROW_GROUP_ROWS: usize = 1 << 20;
/// Buffered bytes at which a row group is closed before it has [`ROW_GROUP_ROWS`] rows.
const ROW_GROUP_BYTES: usize = 32 << 20;

/// A temp or old sibling (`DIR.tmp-PID`, `DIR.old-PID`) left by a process that is gone is
/// removed by a later write once nothing in it changed for this long: PIDs are reused, and a
/// store may be shared by machines whose processes this one cannot see.
pub const STALE_AGE: std::time::Duration = std::time::Duration::from_secs(3600);

/// See [`crate::write`].
pub(crate) fn write(trace: &Trace, dir: &Path) -> Result<()> {
    trace
        .validate()
        .map_err(|e| StoreError::new(dir, StoreErrorKind::InvalidTrace(e.to_string())))?;
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
    let result = write_tables(trace, &tmp).and_then(|()| install(&tmp, dir));
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    result
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

/// Writes every table, then `metadata.json`, into `dir`.
fn write_tables(trace: &Trace, dir: &Path) -> Result<()> {
    let ctx = Ctx::new(trace, dir)?;
    let mut tables = BTreeMap::new();
    let mut put = |def: &TableDef, rows: usize| {
        tables.insert(
            def.name.to_owned(),
            TableInfo {
                file: def.file(),
                rows: rows as u64,
            },
        );
    };
    ctx.table(&schema::STRINGS, trace.strings.len(), |r| {
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
    put(&schema::STRINGS, trace.strings.len());

    ctx.table(&schema::ARGS, trace.args.len(), |r| {
        Ok(vec![
            ids(r.clone()),
            Arc::new(StringArray::from_iter_values(trace.args.range(r.clone()))),
        ])
    })?;
    put(&schema::ARGS, trace.args.len());

    ctx.table(&schema::RANKS, trace.ranks.len(), |r| {
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
    put(&schema::RANKS, trace.ranks.len());

    ctx.table(&schema::PROCESSES, trace.processes.len(), |r| {
        let rows = &trace.processes[r];
        Ok(vec![
            u32s(rows.iter().map(|x| Some(x.rank.0))),
            i64s(rows.iter().map(|x| Some(x.pid))),
            strs(rows.iter().map(|x| x.name.as_deref())),
            strs(rows.iter().map(|x| x.labels.as_deref())),
        ])
    })?;
    put(&schema::PROCESSES, trace.processes.len());

    ctx.table(&schema::TRACKS, trace.tracks.len(), |r| {
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
    put(&schema::TRACKS, trace.tracks.len());

    ctx.table(&schema::SPANS, trace.spans.len(), |r| {
        let rows = &trace.spans[r.clone()];
        let loc: Vec<&Location> = rows.iter().map(|s| ctx.location(s.track.0)).collect();
        Ok(vec![
            ids(r),
            u32s(rows.iter().map(|s| Some(s.track.0))),
            i64s(rows.iter().map(|s| Some(s.start))),
            i64s(rows.iter().map(|s| Some(s.end))),
            i64s(rows.iter().map(|s| Some(s.end.saturating_sub(s.start)))),
            dict(rows.iter().map(|s| Some(s.name.0)), &ctx.strings)?,
            dict(rows.iter().map(|s| Some(s.category.0)), &ctx.strings)?,
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
    })?;
    put(&schema::SPANS, trace.spans.len());

    ctx.table(&schema::INSTANTS, trace.instants.len(), |r| {
        let rows = &trace.instants[r.clone()];
        let loc: Vec<&Location> = rows.iter().map(|s| ctx.location(s.track.0)).collect();
        Ok(vec![
            ids(r),
            u32s(rows.iter().map(|s| Some(s.track.0))),
            i64s(rows.iter().map(|s| Some(s.ts))),
            dict(rows.iter().map(|s| Some(s.name.0)), &ctx.strings)?,
            dict(rows.iter().map(|s| Some(s.category.0)), &ctx.strings)?,
            dict(rows.iter().map(|s| Some(level_code(s.level))), &ctx.levels)?,
            u32s(rows.iter().map(|s| s.args.map(|a| a.0))),
            u32s(loc.iter().map(|l| Some(l.rank))),
            i64s(loc.iter().map(|l| l.pid)),
            i64s(loc.iter().map(|l| l.tid)),
            i64s(loc.iter().map(|l| l.device)),
            i64s(loc.iter().map(|l| l.queue)),
        ])
    })?;
    put(&schema::INSTANTS, trace.instants.len());

    ctx.table(&schema::COUNTERS, trace.counters.len(), |r| {
        let rows = &trace.counters[r];
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
    })?;
    put(&schema::COUNTERS, trace.counters.len());

    ctx.table(&schema::FLOWS, trace.flows.len(), |r| {
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
        Ok(vec![
            u64s(rows.iter().map(|f| Some(f.id))),
            dict(rows.iter().map(|f| Some(f.category.0)), &ctx.strings)?,
            from_track,
            from_ts,
            from_span,
            to_track,
            to_ts,
            to_span,
        ])
    })?;
    put(&schema::FLOWS, trace.flows.len());

    ctx.table(&schema::DEVICES, trace.devices.len(), |r| {
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
    put(&schema::DEVICES, trace.devices.len());

    let metadata = Metadata::new(trace.clock.clone(), tables);
    let path = dir.join(meta::METADATA_FILE);
    let text = serde_json::to_string_pretty(&metadata)
        .map_err(|e| StoreError::new(&path, StoreErrorKind::Metadata(e.to_string())))?;
    let mut file = File::create(&path).map_err(|e| StoreError::new(&path, e))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.write_all(b"\n"))
        .and_then(|()| file.sync_all())
        .map_err(|e| StoreError::new(&path, e))?;
    sync_dir(dir)
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

/// What every table writer shares: the target directory, the dictionaries, track locations.
struct Ctx {
    dir: PathBuf,
    props: WriterProperties,
    /// The whole string table: the dictionary of name/category columns, keyed by `StrId`.
    strings: ArrayRef,
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
    fn new(trace: &Trace, dir: &Path) -> Result<Ctx> {
        if i32::try_from(trace.strings.len()).is_err() || i32::try_from(trace.tracks.len()).is_err()
        {
            return Err(StoreError::new(
                dir,
                StoreErrorKind::InvalidTrace("more than 2^31 strings or tracks".into()),
            ));
        }
        let counter_field = |f: for<'x> fn(&'x str, &'x str) -> &'x str| -> ArrayRef {
            Arc::new(StringArray::from_iter_values(trace.tracks.iter().map(
                |t| match &t.kind {
                    TrackKind::Counter { name, unit, .. } => f(name, unit),
                    _ => "",
                },
            )))
        };
        Ok(Ctx {
            dir: dir.to_path_buf(),
            props: writer_properties(),
            strings: Arc::new(StringArray::from_iter_values(
                trace.strings.iter().map(|(_, s)| s),
            )),
            levels: Arc::new(StringArray::from_iter_values(
                Level::ALL.iter().map(|l| l.as_str()),
            )),
            kinds: Arc::new(StringArray::from_iter_values(KINDS)),
            counter_names: counter_field(|name, _| name),
            counter_units: counter_field(|_, unit| unit),
            locations: trace.tracks.iter().map(Location::of).collect(),
        })
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

    /// Writes `def` with `rows` rows, asking `columns` for one chunk of rows at a time, and
    /// fsyncs the file. A table with no rows is still written, with its full schema.
    fn table(
        &self,
        def: &TableDef,
        rows: usize,
        columns: impl Fn(Range<usize>) -> Result<Vec<ArrayRef>, ArrowError>,
    ) -> Result<()> {
        let path = self.dir.join(def.file());
        let parquet_err = |e: parquet::errors::ParquetError| {
            StoreError::new(&path, StoreErrorKind::Parquet(e.to_string()))
        };
        let arrow_err =
            |e: ArrowError| StoreError::new(&path, StoreErrorKind::Parquet(e.to_string()));
        let schema = def.schema();
        let file = File::create(&path).map_err(|e| StoreError::new(&path, e))?;
        let mut writer = ArrowWriter::try_new(file, schema.clone(), Some(self.props.clone()))
            .map_err(parquet_err)?;
        let mut start = 0;
        while start < rows {
            let end = rows.min(start + CHUNK_ROWS);
            let batch =
                RecordBatch::try_new(schema.clone(), columns(start..end).map_err(arrow_err)?)
                    .map_err(arrow_err)?;
            writer.write(&batch).map_err(parquet_err)?;
            // The writer holds the open row group's encoded pages: close it early when wide
            // rows (args texts) would make it large.
            if writer.memory_size() > ROW_GROUP_BYTES {
                writer.flush().map_err(parquet_err)?;
            }
            start = end;
        }
        let file = writer.into_inner().map_err(parquet_err)?;
        file.sync_all().map_err(|e| StoreError::new(&path, e))
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
