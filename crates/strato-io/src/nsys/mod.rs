//! Nsight Systems SQLite export importer (`nsys export --type sqlite`).
//!
//! This module owns reading one nsys SQLite database into a [`Trace`] (one [`Rank`]): CUDA
//! runtime calls, kernels, memcpys, memsets and synchronizations (CUPTI tables), CUDA memory
//! allocations and frees, NVTX ranges and marks, OS runtime calls, thread states from the
//! scheduling events (`SCHED_EVENTS`, as the live recorder's OS level writes them), profiler
//! overhead, CPU samples, GPUs, thread and process names, the export metadata and the session clock. The
//! table -> level mapping, the columns read and the clock convention are documented in
//! `docs/formats/nsys.md`.
//!
//! It is tolerant of schema drift: tables are found through `sqlite_master` and columns through
//! `pragma table_info`; a missing table is skipped and a missing column reads as NULL. The file
//! is opened read-only and rows are streamed through prepared statements, so memory is bounded
//! by what the trace keeps (plus a map from launch correlation id to runtime span), and what
//! it keeps is accounted against the memory budget ([`ImportOptions::memory_budget_bytes`]).
//!
//! Rows are independent, so a row whose times cannot be used is dropped and counted in the
//! rank's [`ImportNotes`] (shown by `info`): start or end NULL or not an integer
//! (`dropped_rows_no_time`), `end < start` (`dropped_rows_end_before_start`), a time outside
//! the valid range after the session offset ([`strato_trace::TIME_LIMIT_NS`],
//! `dropped_rows_time_out_of_range`). Device ops without a `streamId` or `deviceId` go to
//! queue / device -1 and are counted (`device_ops_without_stream`, `device_ops_without_device`).
//!
//! Layout: this module owns the entry point, the import state ([`Importer`]: tracks, launches by
//! correlation id, the memory budget) and what every table reader shares (placing rows on
//! tracks, checking their times, host-call tables). [`schema`] is the SQL access tolerant of
//! schema drift; each group of tables is a child adding its readers to the importer:
//! [`device`] (CUPTI kernels, copies, sets, syncs), [`graph`] (CUDA graph node links),
//! [`memory`] (allocations), [`nvtx`], [`os`] (scheduling, thread states), [`samples`] (CPU
//! samples) and [`system`] (GPUs, threads, processes).

mod device;
mod graph;
mod memory;
mod nvtx;
mod os;
mod samples;
mod schema;
mod system;

use std::collections::BTreeSet;
use std::path::Path;
use strato_trace::metadata::SourceMetadata;
use strato_trace::OptionalId;

use rusqlite::{Connection, OpenFlags, Row};
use rustc_hash::FxHashMap;
use serde_json::{Map, Value};
use strato_trace::{
    checked_time, ClockDomain, ClockInfo, ClockSource, ImportNotes, Instant, Level, MemoryTracker,
    Rank, RankId, SourceFormat, Span, SpanId, StrId, Trace, Track, TrackId, TrackKind,
};

use crate::{Error, ErrorKind, ImportOptions, Result};
use os::{osrt_cause, OsrtCall, OsrtCalls};
use schema::{
    for_each_row, int, nonempty, one_line, process_key, put_int, read_host, read_metadata,
    read_session_start, split_global_tid, strip_version, Enum, Schema,
};

const FORMAT: SourceFormat = SourceFormat::Nsys;
const KERNEL: &str = "CUPTI_ACTIVITY_KIND_KERNEL";
const MEMCPY: &str = "CUPTI_ACTIVITY_KIND_MEMCPY";
const MEMSET: &str = "CUPTI_ACTIVITY_KIND_MEMSET";
const SYNC: &str = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION";
const RUNTIME: &str = "CUPTI_ACTIVITY_KIND_RUNTIME";
const MEM_USAGE: &str = "CUDA_GPU_MEMORY_USAGE_EVENTS";
const NVTX: &str = "NVTX_EVENTS";
const OSRT: &str = "OSRT_API";
const OVERHEAD: &str = "PROFILER_OVERHEAD";
const SAMPLES: &str = "COMPOSITE_EVENTS";
const CALLCHAINS: &str = "SAMPLING_CALLCHAINS";
const GPUS: &str = "TARGET_INFO_GPU";
const THREAD_NAMES: &str = "ThreadNames";
const PROCESSES: &str = "PROCESSES";
const STRINGS: &str = "StringIds";
const META_NEW: &str = "META_DATA_EXPORT";
const META_OLD: &str = "EXPORT_META_DATA";
const SESSION_START: &str = "TARGET_INFO_SESSION_START_TIME";
const SYSTEM_ENV: &str = "TARGET_INFO_SYSTEM_ENV";
const ENUM_MEMCPY: &str = "ENUM_CUDA_MEMCPY_OPER";
const ENUM_MEM_KIND: &str = "ENUM_CUDA_MEM_KIND";
const ENUM_MEM_OPER: &str = "ENUM_CUDA_DEV_MEM_EVENT_OPER";
const ENUM_SYNC: &str = "ENUM_CUPTI_SYNC_TYPE";
const ENUM_THREAD_STATE: &str = "ENUM_SAMPLING_THREAD_STATE";
const SCHED: &str = "SCHED_EVENTS";
const GRAPH_NODES: &str = "CUDA_GRAPH_NODE_EVENTS";
const ENUM_THREAD_BLOCK: &str = "ENUM_SCHEDULING_THREAD_BLOCK";

/// The category of the OS level's thread-state spans: the name the live recorder writes
/// (`strato_record::os::THREAD_STATE_CATEGORY`) and the breakdown's `thread_state` key reads
/// (`strato_trace::names::THREAD_STATE_CATEGORY`); the span's name is the state.
pub use strato_trace::names::THREAD_STATE_CATEGORY;

/// Tables of which at least one must exist for a database to be taken as an nsys export.
const NSYS_TABLES: [&str; 16] = [
    KERNEL,
    MEMCPY,
    MEMSET,
    SYNC,
    RUNTIME,
    MEM_USAGE,
    NVTX,
    OSRT,
    SAMPLES,
    GPUS,
    THREAD_NAMES,
    PROCESSES,
    STRINGS,
    META_NEW,
    META_OLD,
    SESSION_START,
];

/// The other tables this importer reads: with [`NSYS_TABLES`], every table whose columns are
/// probed.
const OTHER_READ_TABLES: [&str; 11] = [
    OVERHEAD,
    GRAPH_NODES,
    CALLCHAINS,
    SYSTEM_ENV,
    ENUM_MEMCPY,
    ENUM_MEM_KIND,
    ENUM_MEM_OPER,
    ENUM_SYNC,
    ENUM_THREAD_STATE,
    SCHED,
    ENUM_THREAD_BLOCK,
];

/// Flow category of runtime call -> device op links (Kineto's name for the same thing).
const FLOW_CATEGORY: &str = "ac2g";

/// Flow category of the link from the runtime call that created a CUDA graph node (the
/// captured launch, found through `CUDA_GRAPH_NODE_EVENTS`) to a device op replayed from that
/// node. `strato_analysis::cross_stack::graphs` reads it.
pub use strato_trace::names::GRAPH_NODE_FLOW;

/// Flow category of the same link when the export has no node events: the replayed ops of one
/// graph launch, in `graphNodeId` order, paired one to one with the kernel launches of the one
/// stream capture of that process with as many launches (see [`Importer::graph_node_links`]).
pub use strato_trace::names::GRAPH_NODE_ORDER_FLOW;

/// Name of allocation instants and of the per-(pid, device) counter track: the names the Kineto
/// importer uses, which `strato_analysis::device_time::memory` reads.
const MEMORY_INSTANT: &str = "[memory]";
const MEMORY_COUNTER: &str = "memory allocated";

/// Imports an `nsys export --type sqlite` database.
pub fn import(path: &Path, options: &ImportOptions) -> Result<Trace> {
    let sql = |e: rusqlite::Error| Error::new(path, ErrorKind::Sqlite(one_line(&e.to_string())));
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sql)?;
    let schema = Schema::probe(&conn).map_err(sql)?;
    if !NSYS_TABLES.iter().any(|t| schema.has(t)) {
        return Err(Error::new(
            path,
            ErrorKind::NotATrace(format!(
                "SQLite database has none of the Nsight Systems tables ({})",
                NSYS_TABLES.join(", ")
            )),
        ));
    }
    let mut importer = Importer::new(path, &conn, schema, options).map_err(sql)?;
    importer.run().map_err(sql)?;
    if let Some(limit_bytes) = importer.over_budget {
        return Err(Error::new(path, ErrorKind::MemoryBudget { limit_bytes }));
    }
    Ok(importer.trace)
}

struct Importer<'a> {
    conn: &'a Connection,
    schema: Schema,
    options: &'a ImportOptions,
    trace: Trace,
    rank: RankId,
    /// Added to every timestamp: session time -> reference clock.
    offset: i64,
    tracks: FxHashMap<TrackKind, TrackId>,
    /// Processes (plain pid) that own a track or a device op.
    pids: BTreeSet<i64>,
    /// (process key, correlationId) -> the runtime call's span.
    launches: FxHashMap<(i64, i64), SpanId>,
    flow_category: StrId,
    memcpy_kinds: Enum,
    mem_kinds: Enum,
    mem_opers: Enum,
    sync_types: Enum,
    thread_states: Enum,
    thread_blocks: Enum,
    /// `OSRT_API` calls per thread (global tid), on the reference clock: (start, end, name),
    /// read by [`Importer::sched_events`] to tell the cause of a switch-out the export does
    /// not name (see [`osrt_cause`]).
    osrt_calls: FxHashMap<i64, OsrtCalls>,
    memory: MemoryTracker,
    /// Device ops replayed from a CUDA graph node: (span, process key, `graphNodeId`).
    graph_ops: Vec<(SpanId, i64, i64)>,
    /// (process key, correlationId) of every device op: a launch with none did not run (it
    /// was captured into a graph).
    ran: rustc_hash::FxHashSet<(i64, i64)>,
    /// Set (to the budget) once what the import keeps would pass the memory budget: every
    /// later row is skipped and [`import`] fails.
    over_budget: Option<u64>,
}

impl<'a> Importer<'a> {
    fn new(
        path: &Path,
        conn: &'a Connection,
        schema: Schema,
        options: &'a ImportOptions,
    ) -> rusqlite::Result<Self> {
        let mut trace = Trace::default();
        let metadata = read_metadata(conn, &schema)?;
        let host = read_host(conn, &schema)?;
        let session_start = read_session_start(conn, &schema)?;
        let meta = |key: &str| metadata.get(key).and_then(Value::as_str);
        // Timestamps are ns since the session start; anchor them to UTC when the file gives the
        // session start and the export did not shift or normalize times.
        let untouched = !matches!(meta("EXPORT_PARAM_TIME_NORMALIZE"), Some("true"))
            && [
                meta("EXPORT_PARAM_TIME_SHIFT"),
                meta("EXPORT_CONFIG_TIME_SHIFT"),
            ]
            .iter()
            .all(|v| v.is_none_or(|v| v.trim() == "0" || v.trim().is_empty()));
        let offset = session_start.filter(|_| untouched);
        trace.clock = match offset {
            Some(utc) => ClockInfo {
                reference: ClockDomain::Realtime,
                sources: vec![ClockSource {
                    name: "nsys session".into(),
                    domain: ClockDomain::Unknown,
                    offset_ns: utc,
                    drift_ppb: 0.0,
                    anchor_ns: 0,
                    error_ns: None,
                    method: "session start (TARGET_INFO_SESSION_START_TIME.utcEpochNs)".into(),
                }],
            },
            None => ClockInfo {
                reference: ClockDomain::Unknown,
                sources: vec![ClockSource {
                    name: "nsys session".into(),
                    domain: ClockDomain::Unknown,
                    offset_ns: 0,
                    drift_ppb: 0.0,
                    anchor_ns: 0,
                    error_ns: None,
                    method: "identity".into(),
                }],
            },
        };
        let rank = trace.add_rank(Rank {
            rank: None,
            world_size: None,
            source: path.display().to_string(),
            format: FORMAT,
            host,
            metadata: SourceMetadata::of_value(Value::Object(metadata)),
            notes: Default::default(),
        });
        let flow_category = trace.intern(FLOW_CATEGORY);
        Ok(Importer {
            conn,
            options,
            trace,
            rank,
            offset: offset.unwrap_or(0),
            tracks: FxHashMap::default(),
            pids: BTreeSet::new(),
            launches: FxHashMap::default(),
            flow_category,
            memcpy_kinds: Enum::load(conn, &schema, ENUM_MEMCPY)?,
            mem_kinds: Enum::load(conn, &schema, ENUM_MEM_KIND)?,
            mem_opers: Enum::load(conn, &schema, ENUM_MEM_OPER)?,
            sync_types: Enum::load(conn, &schema, ENUM_SYNC)?,
            thread_states: Enum::load(conn, &schema, ENUM_THREAD_STATE)?,
            thread_blocks: Enum::load(conn, &schema, ENUM_THREAD_BLOCK)?,
            osrt_calls: FxHashMap::default(),
            schema,
            memory: MemoryTracker::new(options.memory_budget_bytes),
            graph_ops: Vec::new(),
            ran: Default::default(),
            over_budget: None,
        })
    }

    fn run(&mut self) -> rusqlite::Result<()> {
        // Runtime calls first: device ops and syncs look their launch up by correlation id.
        self.host_calls(RUNTIME, Level::AcceleratorApi, true)?;
        self.kernels()?;
        self.memcpys()?;
        self.memsets()?;
        self.graph_node_links()?;
        self.syncs()?;
        self.memory_events()?;
        self.nvtx()?;
        self.host_calls(OSRT, Level::Os, false)?;
        self.sched_events()?;
        self.host_calls(OVERHEAD, Level::Overhead, false)?;
        self.samples()?;
        self.devices()?;
        self.thread_names()?;
        self.processes()?;
        Ok(())
    }

    /// The level of `table`'s events (`fallback` unless the level map says otherwise) and the
    /// table's name as their category.
    fn level_and_category(&mut self, table: &str, fallback: Level) -> (Level, StrId) {
        let level = self
            .options
            .level_map
            .level(FORMAT.as_str(), table)
            .unwrap_or(fallback);
        (level, self.trace.intern(table))
    }

    /// The import notes of this file's rank.
    fn notes(&mut self) -> &mut ImportNotes {
        &mut self.trace.ranks[self.rank.0 as usize].notes
    }

    /// A row was read: counts it, and says whether to go on (false once over the budget).
    fn row_read(&mut self) -> bool {
        self.notes().events_read += 1;
        self.over_budget.is_none()
    }

    /// Drops a row, counting why.
    fn drop_row<T>(&mut self, why: &str) -> Option<T> {
        self.notes().count(why, 1);
        None
    }

    /// A session time on the reference clock, `None` when outside the valid range.
    fn at(&self, t: i64) -> Option<i64> {
        checked_time(i128::from(t) + i128::from(self.offset)).ok()
    }

    /// An instant's time on the reference clock; `None` (counted) when NULL, not an integer or
    /// out of range.
    fn instant_time(&mut self, t: Option<i64>) -> Option<i64> {
        let Some(t) = t else {
            return self.drop_row("dropped_rows_no_time");
        };
        match self.at(t) {
            Some(t) => Some(t),
            None => self.drop_row("dropped_rows_time_out_of_range"),
        }
    }

    /// `(start, end)` on the reference clock; `None` (counted, see the module docs) when
    /// either is NULL or not an integer, `end < start`, or either is out of range. Counts the
    /// row as read.
    fn times(&mut self, row: &Row, start: usize, end: usize) -> Option<(i64, i64)> {
        if !self.row_read() {
            return None;
        }
        let (Some(s), Some(e)) = (int(row, start), int(row, end)) else {
            return self.drop_row("dropped_rows_no_time");
        };
        if e < s {
            return self.drop_row("dropped_rows_end_before_start");
        }
        match (self.at(s), self.at(e)) {
            (Some(s), Some(e)) => Some((s, e)),
            _ => self.drop_row("dropped_rows_time_out_of_range"),
        }
    }

    /// Notes when what the trace keeps would pass the memory budget.
    fn check_memory(&mut self) {
        if let Err(e) = self.memory.check(&self.trace) {
            self.over_budget = Some(e.limit_bytes);
        }
    }

    fn track(&mut self, kind: TrackKind, name: Option<String>) -> TrackId {
        if let Some(&id) = self.tracks.get(&kind) {
            return id;
        }
        let id = self.trace.add_track(Track {
            rank: self.rank,
            kind: kind.clone(),
            name,
            sort_index: None,
        });
        self.tracks.insert(kind, id);
        id
    }

    fn thread_track(&mut self, global_tid: i64) -> TrackId {
        let (pid, tid) = split_global_tid(global_tid);
        self.pids.insert(pid);
        self.track(TrackKind::Thread { pid, tid }, None)
    }

    /// The track of a process's main thread (`tid == pid`).
    fn main_thread_track(&mut self, pid: i64) -> TrackId {
        self.track(TrackKind::Thread { pid, tid: pid }, None)
    }

    fn queue_track(&mut self, device: i64, stream: i64) -> TrackId {
        self.track(
            TrackKind::DeviceQueue {
                device,
                queue: stream,
            },
            Some(format!("Stream {stream}")),
        )
    }

    fn args(&mut self, args: Option<Map<String, Value>>) -> Option<strato_trace::ArgsId> {
        match args {
            Some(map) if self.options.keep_args => {
                Some(self.trace.add_args(&Value::Object(map).to_string()))
            }
            _ => None,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn span(
        &mut self,
        track: TrackId,
        (start, end): (i64, i64),
        name: StrId,
        category: StrId,
        level: Level,
        correlation: Option<i64>,
        args: Option<Map<String, Value>>,
    ) -> SpanId {
        self.check_memory();
        let args = self.args(args);
        self.trace.spans.push(Span {
            track,
            start,
            end,
            name,
            category,
            level,
            correlation: correlation.and_then(|c| u64::try_from(c).ok()).into(),
            external_id: OptionalId::NONE,
            args,
        });
        SpanId((self.trace.spans.len() - 1) as u32)
    }

    fn instant(
        &mut self,
        track: TrackId,
        ts: i64,
        name: StrId,
        category: StrId,
        level: Level,
        args: Option<Map<String, Value>>,
    ) {
        self.check_memory();
        let args = self.args(args);
        self.trace.instants.push(Instant {
            track,
            ts,
            name,
            category,
            level,
            args,
        });
    }

    /// CUDA runtime calls, OS runtime calls, profiler overhead: spans on CPU threads named by
    /// `nameId`. Runtime calls are remembered by correlation id.
    fn host_calls(
        &mut self,
        table: &'static str,
        fallback: Level,
        runtime: bool,
    ) -> rusqlite::Result<()> {
        let Some(mut q) = self.schema.select(table) else {
            return Ok(());
        };
        let (s, e) = (q.col("start"), q.col("end"));
        let gtid = q.col("globalTid");
        let corr = q.col("correlationId");
        let name = q.string("nameId");
        let ret = q.col("returnValue");
        let class = q.col("eventClass");
        let nesting = q.col("nestingLevel");
        let callchain = q.col("callchainId");
        let sql = q.sql();
        let (level, category) = self.level_and_category(table, fallback);
        for_each_row(self.conn, &sql, |row| {
            let (Some(times), Some(g)) = (self.times(row, s, e), int(row, gtid)) else {
                return;
            };
            let track = self.thread_track(g);
            let raw = nonempty(row, name);
            let name_id = match raw.as_deref() {
                Some(raw) if runtime => self.trace.intern(strip_version(raw)),
                Some(raw) => self.trace.intern(raw),
                None => self.trace.intern(table),
            };
            let args = self.options.keep_args.then(|| {
                let mut a = Map::new();
                if runtime {
                    if let Some(raw) = raw.as_deref() {
                        a.insert("function".into(), Value::String(raw.to_owned()));
                    }
                }
                put_int(&mut a, "returnValue", row, ret);
                put_int(&mut a, "eventClass", row, class);
                put_int(&mut a, "nestingLevel", row, nesting);
                put_int(&mut a, "callchainId", row, callchain);
                a
            });
            if table == OSRT {
                if let Some(cause) = raw.as_deref().and_then(osrt_cause) {
                    self.osrt_calls.entry(g).or_default().calls.push(OsrtCall {
                        start: times.0,
                        end: times.1,
                        name: name_id,
                        cause,
                    });
                }
            }
            let correlation = if runtime { int(row, corr) } else { None };
            let id = self.span(track, times, name_id, category, level, correlation, args);
            if let Some(c) = correlation {
                self.launches.insert((process_key(g), c), id);
            }
        })
    }
}

#[cfg(test)]
mod tests;
