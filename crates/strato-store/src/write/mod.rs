//! The writer: turns a [`Trace`] into the Parquet tables of a profile directory, chunk by
//! chunk (bounded memory), and installs the directory atomically (temp sibling, fsync,
//! rename; `metadata.json` last). [`ProfileWriter`] does the same for a trace that is still
//! being read: its events are written as they arrive, so a streaming import never holds them.
//!
//! Layout (each file reads only this one and those listed before it): `ctx.rs` (what every
//! table writer shares), `columns.rs` (rows to Arrow columns), `files.rs` (Parquet files
//! written chunk by chunk), `tables.rs` (the tables without events, to files or to memory),
//! `install.rs` (the target directory: checks, siblings, atomic install, fsync).

mod columns;
mod ctx;
mod files;
mod install;
mod tables;

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use strato_trace::{ArgsId, ArgsTable, CounterSample, Instant, Span, Trace};

use crate::error::{Result, StoreError, StoreErrorKind};
use crate::meta::{self, Metadata, TableInfo};
use crate::schema::{self, TableDef};
use columns::{counter_columns, instant_columns, span_columns};
use ctx::Ctx;
use files::{ArgsWriter, EventTable, TableFile};
use install::{check_target, install, remove_stale_siblings, sibling, sync_dir};
use tables::write_other_tables;

pub(crate) use install::{foreign_entries, remove_profile_files};
pub(crate) use tables::arrow_tables;

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
                    pending: ArgsTable::uncompressed(),
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
