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

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::path::Path;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags, Row};
use rustc_hash::FxHashMap;
use serde_json::{Map, Value};
use strato_record::sample::{fold_leaf_first, frame_label, CPU_SAMPLE_CATEGORY, UNKNOWN_SYMBOL};
use strato_trace::{checked_time, ImportNotes, MemoryTracker};
use strato_trace::{
    ClockDomain, ClockInfo, ClockSource, CounterSample, Device, Flow, FlowEnd, Instant, Level,
    Process, Rank, RankId, SourceFormat, Span, SpanId, StrId, Trace, Track, TrackId, TrackKind,
};

use crate::{Error, ErrorKind, ImportOptions, Result};

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
/// (`strato_analysis::breakdown::THREAD_STATE_CATEGORY`); the span's name is the state.
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

/// NVTX event types (`ENUM_NSYS_EVENT_TYPE`).
const NVTX_MARK: i64 = 34;
const NVTX_PUSH_POP: i64 = 59;
const NVTX_START_END: i64 = 60;
const NVTX_DOMAIN_CREATE: i64 = 75;

/// Flow category of runtime call -> device op links (Kineto's name for the same thing).
const FLOW_CATEGORY: &str = "ac2g";

/// Flow category of the link from the runtime call that created a CUDA graph node (the
/// captured launch, found through `CUDA_GRAPH_NODE_EVENTS`) to a device op replayed from that
/// node. `strato_analysis::graphs` reads it.
pub use strato_trace::names::GRAPH_NODE_FLOW;

/// Flow category of the same link when the export has no node events: the replayed ops of one
/// graph launch, in `graphNodeId` order, paired one to one with the kernel launches of the one
/// stream capture of that process with as many launches (see [`Importer::graph_node_links`]).
pub use strato_trace::names::GRAPH_NODE_ORDER_FLOW;

/// Name of allocation instants and of the per-(pid, device) counter track: the names the Kineto
/// importer uses, which `strato_analysis::memory` reads.
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

/// SQLite's message on one line: a damaged schema makes SQLite quote the `CREATE TABLE` text,
/// comments and newlines included. Whitespace runs become one space; past 300 characters the
/// text is cut (with `...`).
fn one_line(message: &str) -> String {
    const MAX_CHARS: usize = 300;
    let mut out = String::with_capacity(message.len().min(MAX_CHARS + 3));
    for (i, word) in message.split_whitespace().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(word);
    }
    if let Some((cut, _)) = out.char_indices().nth(MAX_CHARS) {
        out.truncate(cut);
        out.push_str("...");
    }
    out
}

/// The tables that exist and the columns of those this importer reads.
#[derive(Debug, Default)]
struct Schema {
    tables: FxHashMap<String, Vec<String>>,
}

impl Schema {
    fn probe(conn: &Connection) -> rusqlite::Result<Schema> {
        let mut schema = Schema::default();
        let tables = "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')";
        for_each_row(conn, tables, |row| {
            if let Some(name) = text(row, 0) {
                if NSYS_TABLES.contains(&name.as_ref())
                    || OTHER_READ_TABLES.contains(&name.as_ref())
                {
                    schema.tables.insert(name.into_owned(), Vec::new());
                }
            }
        })?;
        for (table, columns) in schema.tables.iter_mut() {
            let sql = format!("PRAGMA table_info({})", quote(table));
            for_each_row(conn, &sql, |row| {
                if let Some(name) = text(row, 1) {
                    columns.push(name.into_owned());
                }
            })?;
        }
        Ok(schema)
    }

    /// A [`Select`] over `table`, or `None` when the file has no such table.
    fn select(&self, table: &'static str) -> Option<Select<'_>> {
        self.has(table).then(|| Select::new(self, table))
    }

    fn has(&self, table: &str) -> bool {
        self.tables.contains_key(table)
    }

    fn has_col(&self, table: &str, column: &str) -> bool {
        self.tables
            .get(table)
            .is_some_and(|cols| cols.iter().any(|c| c == column))
    }
}

/// Quotes an SQL identifier.
fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Runs `sql` and calls `each` with every row, streaming.
fn for_each_row(conn: &Connection, sql: &str, mut each: impl FnMut(&Row)) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare(sql)?;
    let mut rows = stmt.query([])?;
    while let Some(row) = rows.next()? {
        each(row);
    }
    Ok(())
}

/// Runs `sql` and returns the first value `pick` finds in a row (rows where it finds none are
/// skipped).
fn first_value<T>(
    conn: &Connection,
    sql: &str,
    mut pick: impl FnMut(&Row) -> Option<T>,
) -> rusqlite::Result<Option<T>> {
    let mut stmt = conn.prepare(sql)?;
    let mut rows = stmt.query([])?;
    while let Some(row) = rows.next()? {
        if let Some(v) = pick(row) {
            return Ok(Some(v));
        }
    }
    Ok(None)
}

/// Builds a `SELECT` over one table where a missing column reads as NULL and string-id columns
/// are resolved through `StringIds` with a `LEFT JOIN`.
struct Select<'s> {
    schema: &'s Schema,
    table: &'static str,
    exprs: Vec<String>,
    joins: String,
    tail: String,
}

impl<'s> Select<'s> {
    fn new(schema: &'s Schema, table: &'static str) -> Self {
        Select {
            schema,
            table,
            exprs: Vec::new(),
            joins: String::new(),
            tail: String::new(),
        }
    }

    fn push(&mut self, expr: String) -> usize {
        self.exprs.push(expr);
        self.exprs.len() - 1
    }

    /// `t.column`, or NULL when the table lacks it.
    fn col(&mut self, column: &str) -> usize {
        if self.schema.has_col(self.table, column) {
            self.push(format!("t.{}", quote(column)))
        } else {
            self.push("NULL".into())
        }
    }

    /// The `StringIds` text of the id in `column`, or NULL.
    fn string(&mut self, column: &str) -> usize {
        if self.schema.has_col(self.table, column) && self.schema.has_col(STRINGS, "value") {
            let alias = format!("s{}", self.exprs.len());
            self.joins.push_str(&format!(
                " LEFT JOIN {} AS {alias} ON {alias}.id = t.{}",
                quote(STRINGS),
                quote(column)
            ));
            self.push(format!("{alias}.value"))
        } else {
            self.push("NULL".into())
        }
    }

    fn sql(&self) -> String {
        format!(
            "SELECT {} FROM {} AS t{}{}",
            self.exprs.join(", "),
            quote(self.table),
            self.joins,
            self.tail
        )
    }
}

/// An integer cell, tolerating reals and numeric text; NULL and anything else is `None`.
fn int(row: &Row, i: usize) -> Option<i64> {
    match row.get_ref(i).ok()? {
        ValueRef::Integer(v) => Some(v),
        ValueRef::Real(f) if f.is_finite() => Some(f as i64),
        ValueRef::Text(t) => std::str::from_utf8(t).ok()?.trim().parse().ok(),
        _ => None,
    }
}

/// A text cell (numbers are formatted); NULL and blobs are `None`.
fn text<'r>(row: &'r Row, i: usize) -> Option<Cow<'r, str>> {
    match row.get_ref(i).ok()? {
        ValueRef::Text(t) => Some(String::from_utf8_lossy(t)),
        ValueRef::Integer(v) => Some(Cow::Owned(v.to_string())),
        ValueRef::Real(f) => Some(Cow::Owned(f.to_string())),
        _ => None,
    }
}

/// A non-empty text cell.
fn nonempty<'r>(row: &'r Row, i: usize) -> Option<Cow<'r, str>> {
    text(row, i).filter(|s| !s.is_empty())
}

/// A cell as JSON.
fn json_cell(value: ValueRef) -> Value {
    match value {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(v) => Value::from(v),
        ValueRef::Real(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        ValueRef::Text(t) => Value::String(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Value::String(format!("<{} bytes>", b.len())),
    }
}

/// Puts an integer cell into `args` under `key` when it is not NULL.
fn put_int(args: &mut Map<String, Value>, key: &str, row: &Row, i: usize) {
    if let Some(v) = int(row, i) {
        args.insert(key.to_owned(), Value::from(v));
    }
}

/// Puts a text cell into `args` under `key` when it is not NULL.
fn put_text(args: &mut Map<String, Value>, key: &str, row: &Row, i: usize) {
    if let Some(v) = text(row, i) {
        args.insert(key.to_owned(), Value::String(v.into_owned()));
    }
}

/// Puts each integer cell of `cols` under the key at the same place in `keys`.
fn put_ints(args: &mut Map<String, Value>, keys: &[&str], row: &Row, cols: &[usize]) {
    for (key, &i) in keys.iter().zip(cols) {
        put_int(args, key, row, i);
    }
}

/// Puts a memory kind cell (labelled by [`mem_kind`]) under `key` when it is not NULL.
fn put_mem_kind(args: &mut Map<String, Value>, key: &str, row: &Row, i: usize, kinds: &Enum) {
    if let Some(k) = int(row, i) {
        args.insert(key.to_owned(), mem_kind(k, kinds));
    }
}

/// Puts `[x, y, z]` when any of the three cells is not NULL.
fn put_dim3(args: &mut Map<String, Value>, key: &str, row: &Row, cols: [usize; 3]) {
    let dims = cols.map(|i| int(row, i));
    if dims.iter().any(Option::is_some) {
        let dims = dims.map(|d| d.map_or(Value::Null, Value::from));
        args.insert(key.to_owned(), Value::Array(dims.to_vec()));
    }
}

/// `cudaLaunchKernel_v7000` -> `cudaLaunchKernel` (the runtime call without its ABI version).
fn strip_version(name: &str) -> &str {
    match name.rfind("_v") {
        Some(pos)
            if pos > 0
                && name.len() > pos + 2
                && name[pos + 2..].bytes().all(|b| b.is_ascii_digit()) =>
        {
            &name[..pos]
        }
        _ => name,
    }
}

/// `pid` and `tid` of a serialized global thread id (the higher bits are the VM / host).
fn split_global_tid(g: i64) -> (i64, i64) {
    ((g >> 24) & 0xFF_FFFF, g & 0xFF_FFFF)
}

/// The process part (VM / host bits included) of a global thread or process id: equal for the
/// threads of one process and its `globalPid`.
fn process_key(g: i64) -> i64 {
    g >> 24
}

/// An `ENUM_*` table: id -> (name, label).
#[derive(Debug, Default)]
struct Enum {
    values: FxHashMap<i64, (String, String)>,
}

impl Enum {
    fn load(conn: &Connection, schema: &Schema, table: &'static str) -> rusqlite::Result<Enum> {
        let mut out = Enum::default();
        let Some(mut q) = schema.select(table) else {
            return Ok(out);
        };
        let id = q.col("id");
        let name = q.col("name");
        let label = q.col("label");
        for_each_row(conn, &q.sql(), |row| {
            if let Some(key) = int(row, id) {
                let name = text(row, name).unwrap_or_default().into_owned();
                let label = text(row, label).unwrap_or_default().into_owned();
                out.values.insert(key, (name, label));
            }
        })?;
        Ok(out)
    }

    fn label(&self, id: i64) -> Option<&str> {
        self.values
            .get(&id)
            .map(|(name, label)| if label.is_empty() { name } else { label })
            .map(String::as_str)
    }

    fn name(&self, id: i64) -> Option<&str> {
        self.values.get(&id).map(|(name, _)| name.as_str())
    }

    /// The label of `id` as JSON text, or `id` itself when the table does not list it.
    fn label_value(&self, id: i64) -> Value {
        self.label(id)
            .map_or(Value::from(id), |l| Value::String(l.to_owned()))
    }
}

/// `Memcpy HtoD` from a `copyKind`, through `ENUM_CUDA_MEMCPY_OPER` when present.
fn memcpy_name(kind: Option<i64>, kinds: &Enum) -> String {
    let Some(kind) = kind else {
        return "Memcpy".into();
    };
    if let Some(name) = kinds.name(kind) {
        let short = name.strip_prefix("CUDA_MEMCPY_KIND_").unwrap_or(name);
        let b = short.as_bytes();
        if b.len() == 4 && &short[1..3] == "TO" {
            return format!("Memcpy {}to{}", &short[..1], &short[3..]);
        }
        if let Some(label) = kinds.label(kind) {
            return format!("Memcpy {label}");
        }
    }
    let builtin = match kind {
        1 => "HtoD",
        2 => "DtoH",
        3 => "HtoA",
        4 => "AtoH",
        5 => "AtoA",
        6 => "AtoD",
        7 => "DtoA",
        8 => "DtoD",
        9 => "HtoH",
        10 => "PtoP",
        _ => return format!("Memcpy (kind {kind})"),
    };
    format!("Memcpy {builtin}")
}

/// Memory kind label through `ENUM_CUDA_MEM_KIND`, or the CUPTI numbering.
fn mem_kind(kind: i64, kinds: &Enum) -> Value {
    if let Some(label) = kinds.label(kind) {
        return Value::String(label.to_owned());
    }
    let builtin = match kind {
        0 => "Pageable",
        1 => "Pinned",
        2 => "Device",
        3 => "Array",
        4 => "Managed",
        5 => "Device Static",
        6 => "Managed Static",
        _ => return Value::from(kind),
    };
    Value::String(builtin.into())
}

/// Whether a `memoryOperationType` is a free (`Some(true)`) or an allocation (`Some(false)`),
/// through `ENUM_CUDA_DEV_MEM_EVENT_OPER` (`0 CUDA_DEV_MEM_EVENT_OPR_ALLOCATION Allocation`,
/// `1 CUDA_DEV_MEM_EVENT_OPR_DEALLOCATION Deallocation`) when present, else that numbering.
/// `None`: an operation this importer does not know.
fn mem_oper_is_free(op: i64, opers: &Enum) -> Option<bool> {
    if let Some((name, label)) = opers.values.get(&op) {
        let text = format!("{name} {label}").to_ascii_uppercase();
        if text.contains("DEALLOC") || text.contains("FREE") {
            return Some(true);
        }
        if text.contains("ALLOC") {
            return Some(false);
        }
    }
    match op {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    }
}

/// Host memory kinds (`Pageable`, `Pinned`): counted on device -1, as Kineto counts host memory.
fn is_host_mem_kind(kind: i64, kinds: &Enum) -> bool {
    matches!(mem_kind(kind, kinds), Value::String(s) if s == "Pageable" || s == "Pinned")
}

/// Columns every device-op table shares.
struct DeviceCols {
    start: usize,
    end: usize,
    device: usize,
    stream: usize,
    correlation: usize,
    global_pid: usize,
    context: usize,
    /// `graphNodeId`: set on ops replayed from a CUDA graph node.
    graph_node: usize,
}

impl DeviceCols {
    fn select(q: &mut Select) -> DeviceCols {
        DeviceCols {
            start: q.col("start"),
            end: q.col("end"),
            device: q.col("deviceId"),
            stream: q.col("streamId"),
            correlation: q.col("correlationId"),
            global_pid: q.col("globalPid"),
            context: q.col("contextId"),
            graph_node: q.col("graphNodeId"),
        }
    }
}

/// One CPU sample being assembled from its call-chain rows.
struct Sample {
    id: i64,
    ts: i64,
    global_tid: Option<i64>,
    cpu: Option<i64>,
    state: Option<i64>,
    cycles: Option<i64>,
    /// Frame labels (`symbol [module]`), leaf first, in `stackDepth` order.
    frames: Vec<String>,
    /// The raw symbols, leaf first (args `stack`, with `keep_args`).
    stack: Vec<String>,
    leaf_module: Option<String>,
}

/// One `CUDA_GPU_MEMORY_USAGE_EVENTS` row (read in full, then put in time order).
struct MemEvent {
    ts: i64,
    global_pid: i64,
    device: Option<i64>,
    context: Option<i64>,
    address: Option<i64>,
    pc: Option<i64>,
    bytes: Option<i64>,
    kind: Option<i64>,
    op: i64,
    name: Option<String>,
    correlation: Option<i64>,
    stream: Option<i64>,
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
            metadata_json: if metadata.is_empty() {
                None
            } else {
                Some(Value::Object(metadata).to_string())
            },
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
            correlation: correlation.and_then(|c| u64::try_from(c).ok()),
            external_id: None,
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

    /// `SCHED_EVENTS` -> thread-state spans on each thread's own track (see
    /// [`off_cpu_state`] and `docs/formats/nsys.md`): `running` from a sched-in to the next
    /// sched-out of the thread, the off-CPU state from a sched-out to the next sched-in; no state
    /// before a thread's first event, after its last, or after a switch-out that ended the
    /// thread. Rows are read sorted by (thread, time, file order) by SQLite, so one thread's
    /// state is kept at a time. A sched-in followed by another sched-in
    /// (`sched_in_without_sched_out`) and a sched-out while the thread is already off CPU
    /// (`sched_out_without_sched_in`) are dropped and counted; so are rows without a thread
    /// (`sched_events_without_thread`) or a direction (`sched_events_without_direction`).
    fn sched_events(&mut self) -> rusqlite::Result<()> {
        let Some(mut q) = self.schema.select(SCHED) else {
            return Ok(());
        };
        let start = q.col("start");
        let cpu = q.col("cpu");
        let is_in = q.col("isSchedIn");
        let gtid = q.col("globalTid");
        let state = q.col("threadState");
        let block = q.col("threadBlock");
        let mut order: Vec<String> = ["globalTid", "start"]
            .iter()
            .filter(|c| self.schema.has_col(SCHED, c))
            .map(|c| format!("t.{}", quote(c)))
            .collect();
        order.push("t.rowid".into());
        q.tail = format!(" ORDER BY {}", order.join(", "));
        let sql = q.sql();
        let level = self
            .options
            .level_map
            .level(FORMAT.as_str(), SCHED)
            .unwrap_or(Level::Os);
        let category = self.trace.intern(THREAD_STATE_CATEGORY);
        let mut names: FxHashMap<&'static str, StrId> = FxHashMap::default();
        let osrt_calls = std::mem::take(&mut self.osrt_calls);
        let osrt_calls: FxHashMap<i64, OsrtCalls> = osrt_calls
            .into_iter()
            .map(|(g, calls)| (g, calls.indexed()))
            .collect();
        // The thread being read and its current state.
        let mut current: Option<(i64, OnCpu)> = None;
        for_each_row(self.conn, &sql, |row| {
            if !self.row_read() {
                return;
            }
            let Some(g) = int(row, gtid) else {
                self.notes().count("sched_events_without_thread", 1);
                return;
            };
            let Some(incoming) = int(row, is_in).map(|v| v != 0) else {
                self.notes().count("sched_events_without_direction", 1);
                return;
            };
            let Some(ts) = self.instant_time(int(row, start)) else {
                return;
            };
            let now = match current.take() {
                Some((thread, now)) if thread == g => now,
                _ => OnCpu::Unknown,
            };
            let track = self.thread_track(g);
            let mut emit = |me: &mut Self, from: i64, state: &'static str, args| {
                let name = *names.entry(state).or_insert_with(|| me.trace.intern(state));
                me.span(track, (from, ts), name, category, level, None, args);
            };
            let next = if incoming {
                match now {
                    OnCpu::On { .. } => self.notes().count("sched_in_without_sched_out", 1),
                    OnCpu::Off { since, state, args } => emit(self, since, state, args),
                    OnCpu::Unknown | OnCpu::Ended => {}
                }
                let args = self.options.keep_args.then(|| {
                    let mut a = Map::new();
                    put_int(&mut a, "cpu", row, cpu);
                    a
                });
                OnCpu::On { since: ts, args }
            } else {
                let (thread_state, thread_block) = (int(row, state), int(row, block));
                let state_name = thread_state.and_then(|s| self.thread_states.name(s));
                let block_name = thread_block.and_then(|b| self.thread_blocks.name(b));
                let mut off = off_cpu_state(state_name, block_name);
                // Cause not told by the export: the OS runtime call the thread was in.
                let inferred = (off == OffCpu::State("blocked:other")
                    && block_name.is_none_or(|b| b == "Unknown"))
                .then(|| osrt_calls.get(&g).and_then(|c| c.covering(ts)))
                .flatten();
                if let Some(call) = inferred {
                    off = OffCpu::State(call.cause);
                }
                let call_name = inferred.map(|c| c.name);
                let args = self.options.keep_args.then(|| {
                    let mut a = Map::new();
                    if let Some(n) = call_name {
                        a.insert(
                            "osrtCall".into(),
                            Value::String(self.trace.str(n).to_owned()),
                        );
                    }
                    if let Some(s) = thread_state {
                        a.insert("threadState".into(), self.thread_states.label_value(s));
                    }
                    if let Some(b) = thread_block {
                        a.insert("threadBlock".into(), self.thread_blocks.label_value(b));
                    }
                    a
                });
                match now {
                    // After running, or the thread's first event: its off-CPU state starts here.
                    OnCpu::On { .. } | OnCpu::Unknown => {
                        if let OnCpu::On { since, args: on } = now {
                            emit(self, since, "running", on);
                        }
                        match off {
                            OffCpu::Ended => OnCpu::Ended,
                            OffCpu::State(state) => OnCpu::Off {
                                since: ts,
                                state,
                                args,
                            },
                        }
                    }
                    off @ (OnCpu::Off { .. } | OnCpu::Ended) => {
                        self.notes().count("sched_out_without_sched_in", 1);
                        off
                    }
                }
            };
            current = Some((g, next));
        })
    }

    /// A device op: span on its stream, correlation, flow from its runtime call.
    fn device_op(
        &mut self,
        row: &Row,
        c: &DeviceCols,
        name: StrId,
        category: StrId,
        level: Level,
        args: Option<Map<String, Value>>,
    ) {
        let Some(times) = self.times(row, c.start, c.end) else {
            return;
        };
        let device = int(row, c.device).unwrap_or_else(|| {
            self.notes().count("device_ops_without_device", 1);
            -1
        });
        let stream = int(row, c.stream).unwrap_or_else(|| {
            self.notes().count("device_ops_without_stream", 1);
            -1
        });
        let track = self.queue_track(device, stream);
        let correlation = int(row, c.correlation);
        let global_pid = int(row, c.global_pid);
        if let Some(g) = global_pid {
            self.pids.insert(split_global_tid(g).0);
        }
        let args = args.map(|mut a| {
            put_int(&mut a, "contextId", row, c.context);
            a
        });
        let id = self.span(track, times, name, category, level, correlation, args);
        if let Some(g) = global_pid {
            if let Some(node) = int(row, c.graph_node) {
                self.graph_ops.push((id, process_key(g), node));
            }
        }
        let (Some(corr), Some(g)) = (correlation, global_pid) else {
            return;
        };
        self.ran.insert((process_key(g), corr));
        let Some(&launch) = self.launches.get(&(process_key(g), corr)) else {
            return;
        };
        let Some(from) = self.trace.spans.get(launch.0 as usize) else {
            return;
        };
        let from = FlowEnd {
            track: from.track,
            ts: from.start,
            span: Some(launch),
        };
        self.trace.flows.push(Flow {
            id: u64::try_from(corr).unwrap_or_default(),
            category: self.flow_category,
            from: Some(from),
            to: Some(FlowEnd {
                track,
                ts: times.0,
                span: Some(id),
            }),
        });
    }

    fn kernels(&mut self) -> rusqlite::Result<()> {
        let keep = self.options.keep_args;
        let Some(mut q) = self.schema.select(KERNEL) else {
            return Ok(());
        };
        let c = DeviceCols::select(&mut q);
        let demangled = q.string("demangledName");
        let short = q.string("shortName");
        let mangled = if keep { q.string("mangledName") } else { 0 };
        let grid = ["gridX", "gridY", "gridZ"].map(|n| q.col(n));
        let block = ["blockX", "blockY", "blockZ"].map(|n| q.col(n));
        let cluster = ["clusterX", "clusterY", "clusterZ"].map(|n| q.col(n));
        const SCALARS: [&str; 15] = [
            "registersPerThread",
            "staticSharedMemory",
            "dynamicSharedMemory",
            "localMemoryPerThread",
            "localMemoryTotal",
            "sharedMemoryExecuted",
            "sharedMemoryLimitConfig",
            "launchType",
            "cacheConfig",
            "gridId",
            "graphId",
            "graphNodeId",
            "greenContextId",
            "clusterSchedulingPolicy",
            "maxPotentialClusterSize",
        ];
        let scalars = SCALARS.map(|n| q.col(n));
        let sql = q.sql();
        let (level, category) = self.level_and_category(KERNEL, Level::DeviceKernel);
        for_each_row(self.conn, &sql, |row| {
            let name = match nonempty(row, demangled).or_else(|| nonempty(row, short)) {
                Some(n) => self.trace.intern(&n),
                None => self.trace.intern("kernel"),
            };
            let args = keep.then(|| {
                let mut a = Map::new();
                put_dim3(&mut a, "grid", row, grid);
                put_dim3(&mut a, "block", row, block);
                put_dim3(&mut a, "cluster", row, cluster);
                put_ints(&mut a, &SCALARS, row, &scalars);
                put_text(&mut a, "shortName", row, short);
                put_text(&mut a, "mangledName", row, mangled);
                a
            });
            self.device_op(row, &c, name, category, level, args);
        })
    }

    fn memcpys(&mut self) -> rusqlite::Result<()> {
        let keep = self.options.keep_args;
        let Some(mut q) = self.schema.select(MEMCPY) else {
            return Ok(());
        };
        let c = DeviceCols::select(&mut q);
        let bytes = q.col("bytes");
        let kind = q.col("copyKind");
        let src = q.col("srcKind");
        let dst = q.col("dstKind");
        const SCALARS: [&str; 6] = [
            "srcDeviceId",
            "srcContextId",
            "dstDeviceId",
            "dstContextId",
            "migrationCause",
            "graphNodeId",
        ];
        let scalars = SCALARS.map(|n| q.col(n));
        let sql = q.sql();
        let (level, category) = self.level_and_category(MEMCPY, Level::DeviceCopy);
        // Names are few: intern each copy kind once.
        let mut names: FxHashMap<Option<i64>, StrId> = FxHashMap::default();
        for_each_row(self.conn, &sql, |row| {
            let copy_kind = int(row, kind);
            let name = *names.entry(copy_kind).or_insert_with(|| {
                self.trace
                    .intern(&memcpy_name(copy_kind, &self.memcpy_kinds))
            });
            let args = keep.then(|| {
                let mut a = Map::new();
                put_int(&mut a, "bytes", row, bytes);
                if let Some(k) = copy_kind {
                    a.insert("copyKind".into(), self.memcpy_kinds.label_value(k));
                }
                put_mem_kind(&mut a, "srcKind", row, src, &self.mem_kinds);
                put_mem_kind(&mut a, "dstKind", row, dst, &self.mem_kinds);
                put_ints(&mut a, &SCALARS, row, &scalars);
                a
            });
            self.device_op(row, &c, name, category, level, args);
        })
    }

    fn memsets(&mut self) -> rusqlite::Result<()> {
        let keep = self.options.keep_args;
        let Some(mut q) = self.schema.select(MEMSET) else {
            return Ok(());
        };
        let c = DeviceCols::select(&mut q);
        let bytes = q.col("bytes");
        let value = q.col("value");
        let kind = q.col("memKind");
        let node = q.col("graphNodeId");
        let sql = q.sql();
        let (level, category) = self.level_and_category(MEMSET, Level::DeviceSet);
        let name = self.trace.intern("Memset");
        for_each_row(self.conn, &sql, |row| {
            let args = keep.then(|| {
                let mut a = Map::new();
                put_int(&mut a, "bytes", row, bytes);
                put_int(&mut a, "value", row, value);
                put_mem_kind(&mut a, "memKind", row, kind, &self.mem_kinds);
                put_int(&mut a, "graphNodeId", row, node);
                a
            });
            self.device_op(row, &c, name, category, level, args);
        })
    }

    /// Links the device ops replayed from a CUDA graph node (`graphNodeId` set) to the runtime
    /// call that created the node, as flows `strato_analysis::graphs` reads
    /// (`docs/analyses/graphs.md`):
    /// - with `CUDA_GRAPH_NODE_EVENTS` (`--cuda-graph-trace=node`): the op's node is followed
    ///   through `originalGraphNodeId` (instantiation and `cudaGraphClone` clone nodes) to the
    ///   node the application created; the runtime call on the creating thread (`globalTid`)
    ///   whose span holds that creation's `start` created it (during stream capture: the
    ///   captured `cudaLaunchKernel`; else `cudaGraphAddKernelNode` and kin). The schema has no
    ///   id for that last step: containment in time on the thread is the link. Flow category
    ///   [`GRAPH_NODE_FLOW`];
    /// - ops still without a link (no node events, or a node whose creation is not in the
    ///   export): the ops of one graph launch (process, correlation id), in `graphNodeId` order,
    ///   are paired one to one with the kernel launches of a stream capture of that process
    ///   (kernel launch calls between `*StreamBeginCapture*` and `*StreamEndCapture*` on one
    ///   thread whose correlation id has no device op) with exactly as many launches, ended
    ///   before the graph launch (the latest such one). Node ids are handed out in creation
    ///   order in the exports seen, but nothing in the schema says so: these flows have category
    ///   [`GRAPH_NODE_ORDER_FLOW`], counted in the notes as `graph_ops_linked_by_node_order`;
    ///   ops left without a link are counted as `graph_ops_without_capture_link`.
    fn graph_node_links(&mut self) -> rusqlite::Result<()> {
        if self.graph_ops.is_empty() {
            return Ok(());
        }
        let ops = std::mem::take(&mut self.graph_ops);
        // Runtime calls per thread track, in start order, with their process and correlation.
        let mut calls: FxHashMap<TrackId, Vec<(SpanId, i64, i64)>> = FxHashMap::default();
        for (&(process, corr), &id) in &self.launches {
            calls
                .entry(self.trace.spans[id.0 as usize].track)
                .or_default()
                .push((id, process, corr));
        }
        let spans = &self.trace.spans;
        for v in calls.values_mut() {
            v.sort_by_key(|(id, ..)| (spans[id.0 as usize].start, id.0));
        }
        // Node lineage and creations.
        let mut original: FxHashMap<i64, i64> = FxHashMap::default();
        let mut created: FxHashMap<i64, (i64, i64)> = FxHashMap::default();
        if let Some(mut q) = self.schema.select(GRAPH_NODES) {
            let (s, g) = (q.col("start"), q.col("globalTid"));
            let (n, o) = (q.col("graphNodeId"), q.col("originalGraphNodeId"));
            let sql = q.sql();
            for_each_row(self.conn, &sql, |row| {
                let Some(node) = int(row, n) else {
                    return;
                };
                match int(row, o) {
                    Some(from) if from != node => {
                        original.entry(node).or_insert(from);
                    }
                    _ => {
                        if let (Some(g), Some(t)) = (int(row, g), int(row, s)) {
                            created.entry(node).or_insert((g, t));
                        }
                    }
                }
            })?;
        }
        let root = |mut node: i64| -> i64 {
            for _ in 0..64 {
                match original.get(&node) {
                    Some(&from) => node = from,
                    None => break,
                }
            }
            node
        };
        let mut flows: Vec<(SpanId, SpanId, &'static str)> = Vec::new();
        let mut unlinked: FxHashMap<(i64, u64), Vec<(i64, SpanId)>> = FxHashMap::default();
        for &(op, process, node) in &ops {
            let creator = created.get(&root(node)).and_then(|&(g, t)| {
                let (pid, tid) = split_global_tid(g);
                let track = self.tracks.get(&TrackKind::Thread { pid, tid })?;
                let t = self.at(t)?;
                let on_thread = calls.get(track)?;
                let before = on_thread.partition_point(|(id, ..)| spans[id.0 as usize].start <= t);
                on_thread[..before]
                    .iter()
                    .rev()
                    .take(64)
                    .find(|(id, ..)| spans[id.0 as usize].end >= t)
                    .map(|&(id, ..)| id)
            });
            match (creator, spans[op.0 as usize].correlation) {
                (Some(from), _) => flows.push((from, op, GRAPH_NODE_FLOW)),
                (None, Some(corr)) => unlinked
                    .entry((process, corr))
                    .or_default()
                    .push((node, op)),
                (None, None) => {}
            }
        }
        // The order fallback: stream captures per process, (end, launches).
        let mut captures: FxHashMap<i64, Vec<(i64, Vec<SpanId>)>> = FxHashMap::default();
        if !unlinked.is_empty() {
            for on_thread in calls.values() {
                let mut open: Option<Vec<SpanId>> = None;
                for &(id, process, corr) in on_thread {
                    let name = self.trace.str(spans[id.0 as usize].name);
                    if name.contains("StreamBeginCapture") {
                        open = Some(Vec::new());
                    } else if name.contains("StreamEndCapture") {
                        if let Some(launches) = open.take().filter(|l| !l.is_empty()) {
                            captures
                                .entry(process)
                                .or_default()
                                .push((spans[id.0 as usize].end, launches));
                        }
                    } else if let Some(launches) = open.as_mut() {
                        if name.contains("Launch")
                            && !name.contains("GraphLaunch")
                            && !self.ran.contains(&(process, corr))
                        {
                            launches.push(id);
                        }
                    }
                }
            }
        }
        let mut by_order = 0u64;
        let mut without = 0u64;
        let mut groups: Vec<_> = unlinked.into_iter().collect();
        groups.sort_unstable_by_key(|(key, _)| *key);
        for ((process, corr), mut group) in groups {
            group.sort_unstable_by_key(|&(node, op)| (node, op.0));
            let launch_start = i64::try_from(corr)
                .ok()
                .and_then(|c| self.launches.get(&(process, c)))
                .map(|id| spans[id.0 as usize].start);
            let capture = launch_start.and_then(|start| {
                captures
                    .get(&process)?
                    .iter()
                    .filter(|(end, l)| *end <= start && l.len() == group.len())
                    .max_by_key(|(end, _)| *end)
            });
            match capture {
                Some((_, launches)) => {
                    by_order += group.len() as u64;
                    for (&from, &(_, op)) in launches.iter().zip(&group) {
                        flows.push((from, op, GRAPH_NODE_ORDER_FLOW));
                    }
                }
                None => without += group.len() as u64,
            }
        }
        for (from, to, category) in flows {
            let category = self.trace.intern(category);
            let (f, t) = (
                &self.trace.spans[from.0 as usize],
                &self.trace.spans[to.0 as usize],
            );
            let flow = Flow {
                id: u64::from(to.0),
                category,
                from: Some(FlowEnd {
                    track: f.track,
                    ts: f.start,
                    span: Some(from),
                }),
                to: Some(FlowEnd {
                    track: t.track,
                    ts: t.start,
                    span: Some(to),
                }),
            };
            self.trace.flows.push(flow);
        }
        if by_order > 0 {
            self.notes()
                .count("graph_ops_linked_by_node_order", by_order);
        }
        if without > 0 {
            self.notes()
                .count("graph_ops_without_capture_link", without);
        }
        Ok(())
    }

    /// CUDA synchronizations: host-side waits. The table names no thread, so a sync goes on the
    /// thread of the runtime call with its correlation id (the `cuda*Synchronize` call it
    /// happened in), else on the main thread (`tid == pid`) of its process.
    fn syncs(&mut self) -> rusqlite::Result<()> {
        let keep = self.options.keep_args;
        let Some(mut q) = self.schema.select(SYNC) else {
            return Ok(());
        };
        let c = DeviceCols::select(&mut q);
        let gtid = q.col("globalTid");
        let sync_type = q.col("syncType");
        let event = q.col("eventId");
        let sql = q.sql();
        let (level, category) = self.level_and_category(SYNC, Level::AcceleratorApi);
        let mut names: FxHashMap<Option<i64>, StrId> = FxHashMap::default();
        for_each_row(self.conn, &sql, |row| {
            let Some(times) = self.times(row, c.start, c.end) else {
                return;
            };
            let correlation = int(row, c.correlation);
            let global_pid = int(row, c.global_pid);
            let launch = match (global_pid, correlation) {
                (Some(g), Some(corr)) => self.launches.get(&(process_key(g), corr)).copied(),
                _ => None,
            };
            let track = if let Some(g) = int(row, gtid) {
                self.thread_track(g)
            } else if let Some(span) = launch.and_then(|l| self.trace.spans.get(l.0 as usize)) {
                span.track
            } else if let Some(g) = global_pid {
                let (pid, _) = split_global_tid(g);
                self.pids.insert(pid);
                self.main_thread_track(pid)
            } else {
                return;
            };
            let kind = int(row, sync_type);
            let name = *names.entry(kind).or_insert_with(|| {
                let text = match kind {
                    Some(k) => self
                        .sync_types
                        .label(k)
                        .map_or_else(|| format!("Sync (type {k})"), str::to_owned),
                    None => "Sync".to_owned(),
                };
                self.trace.intern(&text)
            });
            let args = keep.then(|| {
                let mut a = Map::new();
                if let Some(k) = kind {
                    let v = self
                        .sync_types
                        .name(k)
                        .map_or(Value::from(k), |n| Value::String(n.to_owned()));
                    a.insert("syncType".into(), v);
                }
                put_int(&mut a, "deviceId", row, c.device);
                put_int(&mut a, "streamId", row, c.stream);
                put_int(&mut a, "contextId", row, c.context);
                put_int(&mut a, "eventId", row, event);
                a
            });
            self.span(track, times, name, category, level, correlation, args);
        })
    }

    /// CUDA memory allocations and frees (`CUDA_GPU_MEMORY_USAGE_EVENTS`): one `[memory]`
    /// instant per event, with Kineto's attribute names (`Bytes`, negative for a free; `Addr`;
    /// `Device Id`; `Total Allocated`), and a running `memory allocated` counter per (pid,
    /// device), as the Kineto importer derives from Kineto's `[memory]` events.
    ///
    /// Columns: from the nsys export schema (`sqlite3 <export> .schema`, the commented
    /// `CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS` of 2024-era exports; the fields of CUPTI's
    /// `CUPTI_ACTIVITY_KIND_MEMORY2` record, docs.nvidia.com/cupti/api/
    /// structCUpti__ActivityMemory2.html) and the enum rows of a real export
    /// (`0|CUDA_DEV_MEM_EVENT_OPR_ALLOCATION|Allocation`,
    /// `1|CUDA_DEV_MEM_EVENT_OPR_DEALLOCATION|Deallocation`): `start`, `globalPid`,
    /// `deviceId`, `contextId`, `address`, `pc`, `bytes`, `memKind` (-> `ENUM_CUDA_MEM_KIND`),
    /// `memoryOperationType` (-> `ENUM_CUDA_DEV_MEM_EVENT_OPER`: 0 Allocation, 1 Deallocation),
    /// `name` (variable name, TEXT), `correlationId` (-> runtime call), then the
    /// `localMemoryPool*` / `importedMemoryPool*` columns (not read). Some exports also have
    /// `streamId`. Rows without `start`, `globalPid` or a known operation are skipped.
    fn memory_events(&mut self) -> rusqlite::Result<()> {
        if !self.schema.has_col(MEM_USAGE, "start")
            || !self.schema.has_col(MEM_USAGE, "memoryOperationType")
        {
            return Ok(());
        }
        let keep = self.options.keep_args;
        let mut q = Select::new(&self.schema, MEM_USAGE);
        let start = q.col("start");
        let gpid = q.col("globalPid");
        let device = q.col("deviceId");
        let context = q.col("contextId");
        let address = q.col("address");
        let pc = q.col("pc");
        let bytes = q.col("bytes");
        let kind = q.col("memKind");
        let op = q.col("memoryOperationType");
        let var = q.col("name");
        let corr = q.col("correlationId");
        let stream = q.col("streamId");
        let sql = q.sql();
        let mut events = Vec::new();
        for_each_row(self.conn, &sql, |row| {
            if !self.row_read() {
                return;
            }
            let Some(ts) = self.instant_time(int(row, start)) else {
                return;
            };
            let (Some(global_pid), Some(op)) = (int(row, gpid), int(row, op)) else {
                return;
            };
            events.push(MemEvent {
                ts,
                global_pid,
                device: int(row, device),
                context: int(row, context),
                address: int(row, address),
                pc: int(row, pc),
                bytes: int(row, bytes),
                kind: int(row, kind),
                op,
                name: if keep {
                    nonempty(row, var).map(Cow::into_owned)
                } else {
                    None
                },
                correlation: int(row, corr),
                stream: int(row, stream),
            });
        })?;
        // The running total needs time order; a stable sort keeps the file's order on ties.
        events.sort_by_key(|e| e.ts);
        let (level, category) = self.level_and_category(MEM_USAGE, Level::AcceleratorApi);
        let name = self.trace.intern(MEMORY_INSTANT);
        // (process key, address) -> (bytes, device) of the live allocation.
        let mut live: FxHashMap<(i64, i64), (i64, i64)> = FxHashMap::default();
        // (pid, device) -> bytes in use.
        let mut totals: FxHashMap<(i64, i64), i64> = FxHashMap::default();
        for ev in events {
            let Some(free) = mem_oper_is_free(ev.op, &self.mem_opers) else {
                continue;
            };
            let key = process_key(ev.global_pid);
            let (pid, _) = split_global_tid(ev.global_pid);
            let row_device = if ev
                .kind
                .is_some_and(|k| is_host_mem_kind(k, &self.mem_kinds))
            {
                -1
            } else {
                ev.device.unwrap_or(-1)
            };
            let row_bytes = ev.bytes.filter(|&b| b > 0);
            let (size, dev) = if free {
                // A free is counted where its allocation was, with the allocation's size when
                // the free row gives none.
                let alloc = ev.address.and_then(|a| live.remove(&(key, a)));
                (
                    row_bytes.or(alloc.map(|a| a.0)),
                    alloc.map_or(row_device, |a| a.1),
                )
            } else {
                if let (Some(a), Some(b)) = (ev.address, row_bytes) {
                    live.insert((key, a), (b, row_device));
                }
                (row_bytes, row_device)
            };
            let delta = size.map(|b| if free { -b } else { b });
            let total = totals.entry((pid, dev)).or_insert(0);
            *total = total.saturating_add(delta.unwrap_or(0));
            let total = *total;
            self.pids.insert(pid);
            let counter = self.track(
                TrackKind::Counter {
                    pid: Some(pid),
                    device: Some(dev),
                    name: MEMORY_COUNTER.into(),
                    unit: "bytes".into(),
                },
                None,
            );
            self.trace.counters.push(CounterSample {
                track: counter,
                ts: ev.ts,
                value: total as f64,
            });
            // On the thread of the runtime call (cudaMalloc, cudaFree, ...) with the same
            // correlation id, else on the process's main thread.
            let launch = ev
                .correlation
                .and_then(|c| self.launches.get(&(key, c)))
                .and_then(|l| self.trace.spans.get(l.0 as usize));
            let track = match launch {
                Some(span) => span.track,
                None => self.main_thread_track(pid),
            };
            let args = keep.then(|| {
                let mut a = Map::new();
                if let Some(d) = delta {
                    a.insert("Bytes".into(), Value::from(d));
                }
                if let Some(addr) = ev.address {
                    a.insert("Addr".into(), Value::from(addr));
                }
                a.insert("Device Id".into(), Value::from(dev));
                a.insert("Total Allocated".into(), Value::from(total));
                let oper = self
                    .mem_opers
                    .label(ev.op)
                    .filter(|l| !l.is_empty())
                    .map_or(Value::from(ev.op), |l| Value::String(l.to_owned()));
                a.insert("memoryOperationType".into(), oper);
                if let Some(k) = ev.kind {
                    a.insert("memKind".into(), mem_kind(k, &self.mem_kinds));
                }
                for (k, v) in [
                    ("deviceId", ev.device),
                    ("contextId", ev.context),
                    ("streamId", ev.stream),
                    ("correlationId", ev.correlation),
                    ("pc", ev.pc),
                ] {
                    if let Some(v) = v {
                        a.insert(k.into(), Value::from(v));
                    }
                }
                if let Some(n) = ev.name {
                    a.insert("name".into(), Value::String(n));
                }
                a
            });
            self.instant(track, ev.ts, name, category, level, args);
        }
        Ok(())
    }

    /// NVTX push/pop and start/end ranges (spans) and marks (instants).
    fn nvtx(&mut self) -> rusqlite::Result<()> {
        if !self.schema.has(NVTX) || !self.schema.has_col(NVTX, "eventType") {
            return Ok(());
        }
        let keep = self.options.keep_args;
        let mut domains: FxHashMap<i64, String> = FxHashMap::default();
        if keep && self.schema.has_col(NVTX, "domainId") && self.schema.has_col(NVTX, "text") {
            let sql = format!(
                "SELECT domainId, text FROM {} WHERE eventType = {NVTX_DOMAIN_CREATE}",
                quote(NVTX)
            );
            for_each_row(self.conn, &sql, |row| {
                if let (Some(id), Some(name)) = (int(row, 0), text(row, 1)) {
                    domains.insert(id, name.into_owned());
                }
            })?;
        }
        let mut q = Select::new(&self.schema, NVTX);
        let (s, e) = (q.col("start"), q.col("end"));
        let event_type = q.col("eventType");
        let inline = q.col("text");
        let text_id = q.string("textId");
        let gtid = q.col("globalTid");
        let domain = q.col("domainId");
        let nvtx_category = q.col("category");
        let color = q.col("color");
        let range = q.col("rangeId");
        const PAYLOADS: [&str; 6] = [
            "uint64Value",
            "int64Value",
            "doubleValue",
            "uint32Value",
            "int32Value",
            "floatValue",
        ];
        let payloads = PAYLOADS.map(|n| q.col(n));
        q.tail = format!(" WHERE t.eventType IN ({NVTX_MARK}, {NVTX_PUSH_POP}, {NVTX_START_END})");
        let sql = q.sql();
        let (level, category) = self.level_and_category(NVTX, Level::Operation);
        for_each_row(self.conn, &sql, |row| {
            let (Some(kind), Some(start), Some(g)) =
                (int(row, event_type), int(row, s), int(row, gtid))
            else {
                return;
            };
            if start < 0 {
                return;
            }
            let name = match nonempty(row, inline).or_else(|| nonempty(row, text_id)) {
                Some(n) => self.trace.intern(&n),
                None => self.trace.intern("NVTX"),
            };
            let args = keep.then(|| {
                let mut a = Map::new();
                if let Some(d) = int(row, domain) {
                    a.insert("domainId".into(), Value::from(d));
                    if let Some(n) = domains.get(&d) {
                        a.insert("domain".into(), Value::String(n.clone()));
                    }
                }
                put_int(&mut a, "category", row, nvtx_category);
                put_int(&mut a, "color", row, color);
                put_int(&mut a, "rangeId", row, range);
                let payload = payloads
                    .iter()
                    .filter_map(|&i| row.get_ref(i).ok())
                    .find(|v| !matches!(v, ValueRef::Null));
                if let Some(v) = payload {
                    a.insert("payload".into(), json_cell(v));
                }
                a
            });
            let track = self.thread_track(g);
            if kind == NVTX_MARK {
                if !self.row_read() {
                    return;
                }
                if let Some(ts) = self.instant_time(Some(start)) {
                    self.instant(track, ts, name, category, level, args);
                }
            } else if let Some(times) = self.times(row, s, e) {
                self.span(track, times, name, category, level, None, args);
            }
        })
    }

    /// CPU samples (`COMPOSITE_EVENTS` with their `SAMPLING_CALLCHAINS`): one instant per
    /// sample on its thread in the representation `strato record --sample` writes (category
    /// [`CPU_SAMPLE_CATEGORY`], named by the whole call chain folded outermost first, each
    /// frame `symbol [module]`; see `strato_record::sample`), so the per-operation flame graphs
    /// and `export --folded/--firefox` read nsys samples like live ones. A frame nsys could not
    /// resolve (`unresolved`, its symbol an address) is [`UNKNOWN_SYMBOL`] in its module, as in
    /// a live recording; with `keep_args`, args keep the raw symbols (`stack`, leaf first).
    fn samples(&mut self) -> rusqlite::Result<()> {
        let keep = self.options.keep_args;
        let chains = self.schema.has_col(CALLCHAINS, "id")
            && self.schema.has_col(CALLCHAINS, "stackDepth")
            && self.schema.has_col(CALLCHAINS, "symbol");
        let strings = self.schema.has_col(STRINGS, "value");
        let Some(mut q) = self.schema.select(SAMPLES) else {
            return Ok(());
        };
        let id = q.col("id");
        let start = q.col("start");
        let gtid = q.col("globalTid");
        let cpu = q.col("cpu");
        let state = q.col("threadState");
        let cycles = q.col("cpuCycles");
        let (depth, symbol, module, unresolved) = if chains && strings {
            let has_module = self.schema.has_col(CALLCHAINS, "module");
            q.joins = format!(
                " LEFT JOIN {c} AS c ON c.id = t.id \
                 LEFT JOIN {s} AS sym ON sym.id = c.symbol{module_join}",
                c = quote(CALLCHAINS),
                s = quote(STRINGS),
                module_join = if has_module {
                    format!(" LEFT JOIN {} AS mod ON mod.id = c.module", quote(STRINGS))
                } else {
                    String::new()
                },
            );
            let depth = q.push("c.stackDepth".into());
            let symbol = q.push("sym.value".into());
            let module = if has_module {
                q.push("mod.value".into())
            } else {
                q.push("NULL".into())
            };
            let unresolved = if self.schema.has_col(CALLCHAINS, "unresolved") {
                q.push("c.unresolved".into())
            } else {
                q.push("NULL".into())
            };
            q.tail = " ORDER BY t.id, c.stackDepth".into();
            (depth, symbol, module, unresolved)
        } else {
            let null = q.push("NULL".into());
            (null, null, null, null)
        };
        let sql = q.sql();
        let (level, _) = self.level_and_category(SAMPLES, Level::Os);
        let category = self.trace.intern(CPU_SAMPLE_CATEGORY);
        let mut pending: Option<Sample> = None;
        for_each_row(self.conn, &sql, |row| {
            let Some(sample_id) = int(row, id) else {
                return;
            };
            if pending.as_ref().is_none_or(|p| p.id != sample_id) {
                if let Some(done) = pending.take() {
                    self.push_sample(done, category, level);
                }
                if !self.row_read() {
                    return;
                }
                let Some(ts) = self.instant_time(int(row, start)) else {
                    return;
                };
                pending = Some(Sample {
                    id: sample_id,
                    ts,
                    global_tid: int(row, gtid),
                    cpu: int(row, cpu),
                    state: int(row, state),
                    cycles: int(row, cycles),
                    frames: Vec::new(),
                    stack: Vec::new(),
                    leaf_module: None,
                });
            }
            let Some(sample) = pending.as_mut() else {
                return;
            };
            if let Some(sym) = text(row, symbol) {
                let module = text(row, module);
                let module_name = module.as_deref().unwrap_or("?");
                let label = if int(row, unresolved).is_some_and(|u| u != 0) {
                    frame_label(UNKNOWN_SYMBOL, module_name)
                } else {
                    frame_label(&sym, module_name)
                };
                sample.frames.push(label);
                if int(row, depth) == Some(0) {
                    sample.leaf_module = module.map(Cow::into_owned);
                }
                if keep {
                    sample.stack.push(sym.into_owned());
                }
            }
        })?;
        if let Some(done) = pending.take() {
            self.push_sample(done, category, level);
        }
        Ok(())
    }

    fn push_sample(&mut self, sample: Sample, category: StrId, level: Level) {
        let Some(g) = sample.global_tid else {
            return;
        };
        let track = self.thread_track(g);
        let name = self.trace.intern(&fold_leaf_first(&sample.frames));
        let args = self.options.keep_args.then(|| {
            let mut a = Map::new();
            if let Some(cpu) = sample.cpu {
                a.insert("cpu".into(), Value::from(cpu));
            }
            if let Some(s) = sample.state {
                a.insert("threadState".into(), self.thread_states.label_value(s));
            }
            if let Some(c) = sample.cycles {
                a.insert("cpuCycles".into(), Value::from(c));
            }
            if let Some(m) = sample.leaf_module {
                a.insert("module".into(), Value::String(m));
            }
            if !sample.stack.is_empty() {
                let stack = sample.stack.into_iter().map(Value::String).collect();
                a.insert("stack".into(), Value::Array(stack));
            }
            a
        });
        self.instant(track, sample.ts, name, category, level, args);
    }

    /// `TARGET_INFO_GPU` rows -> devices; every column not mapped to a field goes to
    /// `extra_json`.
    fn devices(&mut self) -> rusqlite::Result<()> {
        if !self.schema.has(GPUS) {
            return Ok(());
        }
        let conn = self.conn;
        let mut stmt = conn.prepare(&format!("SELECT * FROM {}", quote(GPUS)))?;
        let names: Vec<String> = stmt.column_names().map(String::from).collect();
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let mut extra = Map::new();
            let mut device = Device {
                rank: Some(self.rank),
                ..Device::default()
            };
            let mut has_index = false;
            for (i, column) in names.iter().enumerate() {
                let v = int(row, i);
                match column.as_str() {
                    "id" => {
                        has_index = v.is_some();
                        device.index = v.unwrap_or(-1);
                    }
                    "name" => device.name = nonempty(row, i).map(Cow::into_owned),
                    "smCount" => device.sm_count = v,
                    "totalMemory" => device.total_memory_bytes = v,
                    "computeMajor" | "computeCapabilityMajor" if device.compute_major.is_none() => {
                        device.compute_major = v
                    }
                    "computeMinor" | "computeCapabilityMinor" if device.compute_minor.is_none() => {
                        device.compute_minor = v
                    }
                    // nsys writes Hz; values below 10 MHz can only be kHz already.
                    "clockRate" => {
                        device.clock_rate_khz =
                            v.map(|hz| if hz >= 10_000_000 { hz / 1000 } else { hz })
                    }
                    "memoryBandwidth" => {
                        device.memory_bandwidth_bytes_per_s = match row.get_ref(i) {
                            Ok(ValueRef::Real(f)) => Some(f),
                            _ => v.map(|b| b as f64),
                        }
                    }
                    _ => {
                        let value = row.get_ref(i).map_or(Value::Null, json_cell);
                        if !value.is_null() {
                            extra.insert(column.clone(), value);
                        }
                    }
                }
            }
            if !has_index {
                continue;
            }
            if !extra.is_empty() {
                device.extra_json = Some(Value::Object(extra).to_string());
            }
            self.trace.devices.push(device);
        }
        Ok(())
    }

    /// Names thread tracks from `ThreadNames` (the highest `priority` name wins).
    fn thread_names(&mut self) -> rusqlite::Result<()> {
        let Some(mut q) = self.schema.select(THREAD_NAMES) else {
            return Ok(());
        };
        let gtid = q.col("globalTid");
        let name = q.string("nameId");
        let priority = q.col("priority");
        let sql = q.sql();
        let mut best: FxHashMap<TrackId, i64> = FxHashMap::default();
        for_each_row(self.conn, &sql, |row| {
            let (Some(g), Some(text)) = (int(row, gtid), nonempty(row, name)) else {
                return;
            };
            let (pid, tid) = split_global_tid(g);
            let Some(&track) = self.tracks.get(&TrackKind::Thread { pid, tid }) else {
                return;
            };
            let p = int(row, priority).unwrap_or(0);
            if best.get(&track).is_some_and(|&b| b > p) {
                return;
            }
            best.insert(track, p);
            if let Some(t) = self.trace.tracks.get_mut(track.0 as usize) {
                t.name = Some(text.into_owned());
            }
        })
    }

    /// One [`Process`] per pid that owns a track or a device op, named from `PROCESSES`.
    fn processes(&mut self) -> rusqlite::Result<()> {
        let mut names: FxHashMap<i64, Option<String>> = FxHashMap::default();
        if let Some(mut q) = self.schema.select(PROCESSES) {
            let gpid = q.col("globalPid");
            let pid = q.col("pid");
            let name = q.col("name");
            let pids = &self.pids;
            for_each_row(self.conn, &q.sql(), |row| {
                let p = match int(row, gpid) {
                    Some(g) => split_global_tid(g).0,
                    None => match int(row, pid) {
                        Some(p) => p,
                        None => return,
                    },
                };
                if pids.contains(&p) && !names.contains_key(&p) {
                    names.insert(p, nonempty(row, name).map(Cow::into_owned));
                }
            })?;
        }
        for &pid in &self.pids {
            self.trace.processes.push(Process {
                rank: self.rank,
                pid,
                name: names.remove(&pid).flatten(),
                labels: None,
            });
        }
        Ok(())
    }
}

/// The export metadata table (`META_DATA_EXPORT`, 2024+, or `EXPORT_META_DATA`, <=2023) as a
/// JSON object of name -> value.
/// A thread's state while its `SCHED_EVENTS` are read.
#[derive(Debug, Clone)]
enum OnCpu {
    /// Before the thread's first event.
    Unknown,
    /// Switched in at `since`.
    On {
        since: i64,
        args: Option<Map<String, Value>>,
    },
    /// Switched out at `since`, in `state`.
    Off {
        since: i64,
        state: &'static str,
        args: Option<Map<String, Value>>,
    },
    /// Switched out for the last time (the thread ended).
    Ended,
}

/// One `OSRT_API` call whose name tells a blocking cause ([`osrt_cause`]).
#[derive(Debug, Clone, Copy)]
struct OsrtCall {
    start: i64,
    end: i64,
    name: StrId,
    cause: &'static str,
}

/// One thread's `OSRT_API` calls: gathered in file order, then [`OsrtCalls::indexed`] (sorted
/// by start, with the running maximum of ends) for [`OsrtCalls::covering`].
#[derive(Debug, Default)]
struct OsrtCalls {
    calls: Vec<OsrtCall>,
    max_end: Vec<i64>,
}

impl OsrtCalls {
    fn indexed(mut self) -> OsrtCalls {
        self.calls
            .sort_by_key(|c| (c.start, std::cmp::Reverse(c.end)));
        let mut max = i64::MIN;
        self.max_end = self
            .calls
            .iter()
            .map(|c| {
                max = max.max(c.end);
                max
            })
            .collect();
        self
    }

    /// The innermost call (the latest to start) with `start <= ts < end`.
    fn covering(&self, ts: i64) -> Option<&OsrtCall> {
        let mut i = self.calls.partition_point(|c| c.start <= ts);
        while i > 0 {
            i -= 1;
            if self.max_end[i] <= ts {
                return None;
            }
            if self.calls[i].end > ts {
                return Some(&self.calls[i]);
            }
        }
        None
    }
}

/// The blocking cause an OS runtime call (`OSRT_API` name, a libc function) stands for, when it
/// names one: lock and condition waits, semaphores and joins are `blocked:lock`; sleeps
/// `blocked:sleep`; file, pipe, socket and device calls (`read`, `write`, `poll`, `fopen`,
/// `ioctl`, ...) `blocked:io`. Anything else (`mmap`, `pipe2`, `pthread_create`, ...) names no
/// cause (`None`: the state stays `blocked:other`). A `64` suffix (`fopen64`, `open64`) and
/// glibc's `__` prefix are ignored.
fn osrt_cause(name: &str) -> Option<&'static str> {
    let base = name.trim_start_matches("__");
    let base = base.strip_suffix("64").unwrap_or(base);
    match base {
        "pthread_mutex_lock"
        | "pthread_mutex_timedlock"
        | "pthread_cond_wait"
        | "pthread_cond_timedwait"
        | "pthread_cond_clockwait"
        | "pthread_rwlock_rdlock"
        | "pthread_rwlock_wrlock"
        | "pthread_rwlock_timedrdlock"
        | "pthread_rwlock_timedwrlock"
        | "pthread_spin_lock"
        | "pthread_barrier_wait"
        | "pthread_join"
        | "pthread_timedjoin_np"
        | "sem_wait"
        | "sem_timedwait"
        | "sem_clockwait"
        | "semop"
        | "semtimedop"
        | "futex"
        | "flock"
        | "lockf" => Some("blocked:lock"),
        "sleep" | "usleep" | "nanosleep" | "clock_nanosleep" | "pause" => Some("blocked:sleep"),
        "read" | "write" | "pread" | "pwrite" | "readv" | "writev" | "preadv" | "pwritev"
        | "fread" | "fwrite" | "fgets" | "fputs" | "fflush" | "fopen" | "fdopen" | "freopen"
        | "fclose" | "open" | "openat" | "creat" | "close" | "fsync" | "fdatasync" | "sync"
        | "msync" | "poll" | "ppoll" | "select" | "pselect" | "epoll_wait" | "epoll_pwait"
        | "recv" | "recvfrom" | "recvmsg" | "send" | "sendto" | "sendmsg" | "accept"
        | "accept4" | "connect" | "ioctl" | "getline" | "getc" | "fgetc" | "fputc" | "fprintf"
        | "fscanf" | "sendfile" | "splice" | "aio_suspend" | "io_getevents" => Some("blocked:io"),
        _ => None,
    }
}

/// What a switch-out says about the time until the next switch-in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OffCpu {
    /// A thread-state name.
    State(&'static str),
    /// The thread ended: no state after it.
    Ended,
}

/// The off-CPU state after a switch-out, from the `ENUM_SAMPLING_THREAD_STATE` name of its
/// `threadState` and the `ENUM_SCHEDULING_THREAD_BLOCK` name of its `threadBlock` (the names,
/// not the ids, so it holds when an export renumbers them). A block reason that names a cause
/// wins; else the state: `Running` (switched out while runnable: preempted) is `runnable`,
/// `Terminated` ends the thread, anything else (`Interruptible`, `Uninterruptible`, `Waiting`,
/// `Unknown`, missing: off CPU, cause not told) is `blocked:other`. Block reasons:
/// - `runnable`: `NonBlocked`, `Preempted`, `QuantumEnd`, `DispatchInt`, `YieldExecution`,
///   `DeferredPreempt`, `ReadyToRun`;
/// - `blocked:sleep`: `Nanosleep`, `DelayExecution`;
/// - `blocked:lock`: `Mutex`, `CondVar`, `Sem`, `Join`, `WaitThread`, `PushLock`,
///   `WindowsMutex`, `FastMutex`, `GuardedMutex`, `KeyedEvent`, `EventPair`, `Rendezvous`,
///   `AlertByThreadId`;
/// - `blocked:io`: `PageIn`, `PageOut`, `NetSend`, `NetReply`;
/// - `blocked:other`: every other reason (`Unknown`, signals, stops, message passing, paging
///   and memory waits other than page in/out, ...).
fn off_cpu_state(thread_state: Option<&str>, thread_block: Option<&str>) -> OffCpu {
    let by_block = match thread_block {
        Some(
            "NonBlocked" | "Preempted" | "QuantumEnd" | "DispatchInt" | "YieldExecution"
            | "DeferredPreempt" | "ReadyToRun",
        ) => Some("runnable"),
        Some("Nanosleep" | "DelayExecution") => Some("blocked:sleep"),
        Some(
            "Mutex" | "CondVar" | "Sem" | "Join" | "WaitThread" | "PushLock" | "WindowsMutex"
            | "FastMutex" | "GuardedMutex" | "KeyedEvent" | "EventPair" | "Rendezvous"
            | "AlertByThreadId",
        ) => Some("blocked:lock"),
        Some("PageIn" | "PageOut" | "NetSend" | "NetReply") => Some("blocked:io"),
        Some("Unknown") | None => None,
        Some(_) => Some("blocked:other"),
    };
    match (thread_state, by_block) {
        (Some("Terminated"), _) => OffCpu::Ended,
        (_, Some(state)) => OffCpu::State(state),
        (Some("Running"), None) => OffCpu::State("runnable"),
        _ => OffCpu::State("blocked:other"),
    }
}

fn read_metadata(conn: &Connection, schema: &Schema) -> rusqlite::Result<Map<String, Value>> {
    let mut out = Map::new();
    for table in [META_NEW, META_OLD] {
        let Some(mut q) = schema.select(table) else {
            continue;
        };
        let name = q.col("name");
        let value = q.col("value");
        for_each_row(conn, &q.sql(), |row| {
            if let Some(key) = text(row, name) {
                let v = row.get_ref(value).map_or(Value::Null, json_cell);
                out.entry(key.into_owned()).or_insert(v);
            }
        })?;
    }
    Ok(out)
}

/// The profiled host's name (`TARGET_INFO_SYSTEM_ENV`, `Hostname`). `EXPORT_HOST` in the
/// metadata is the machine that ran the export, not the profiled one, so it is not used.
fn read_host(conn: &Connection, schema: &Schema) -> rusqlite::Result<Option<String>> {
    if !schema.has_col(SYSTEM_ENV, "name") || !schema.has_col(SYSTEM_ENV, "value") {
        return Ok(None);
    }
    let sql = format!(
        "SELECT value FROM {} WHERE name = 'Hostname'",
        quote(SYSTEM_ENV)
    );
    first_value(conn, &sql, |row| nonempty(row, 0).map(Cow::into_owned))
}

/// UTC ns since the epoch at the session start (timestamp 0 of the file).
fn read_session_start(conn: &Connection, schema: &Schema) -> rusqlite::Result<Option<i64>> {
    if !schema.has_col(SESSION_START, "utcEpochNs") {
        return Ok(None);
    }
    let sql = format!("SELECT utcEpochNs FROM {}", quote(SESSION_START));
    first_value(conn, &sql, |row| int(row, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn osrt_calls_name_their_cause() {
        assert_eq!(osrt_cause("pthread_cond_wait"), Some("blocked:lock"));
        assert_eq!(osrt_cause("sem_timedwait"), Some("blocked:lock"));
        assert_eq!(osrt_cause("nanosleep"), Some("blocked:sleep"));
        assert_eq!(osrt_cause("read"), Some("blocked:io"));
        assert_eq!(osrt_cause("poll"), Some("blocked:io"));
        assert_eq!(osrt_cause("fopen64"), Some("blocked:io"));
        assert_eq!(osrt_cause("mmap64"), None);
        assert_eq!(osrt_cause("pipe2"), None);
    }

    #[test]
    fn the_innermost_covering_call_is_found() {
        let call = |start, end, cause| OsrtCall {
            start,
            end,
            name: StrId(0),
            cause,
        };
        let calls = OsrtCalls {
            calls: vec![
                call(50, 60, "blocked:sleep"),
                call(0, 100, "blocked:io"),
                call(10, 20, "blocked:lock"),
            ],
            max_end: vec![],
        }
        .indexed();
        assert_eq!(calls.covering(15).map(|c| c.cause), Some("blocked:lock"));
        assert_eq!(calls.covering(20).map(|c| c.cause), Some("blocked:io"));
        assert_eq!(calls.covering(55).map(|c| c.cause), Some("blocked:sleep"));
        assert_eq!(calls.covering(99).map(|c| c.cause), Some("blocked:io"));
        assert!(calls.covering(100).is_none());
        assert!(calls.covering(-1).is_none());
        assert!(OsrtCalls::default().indexed().covering(5).is_none());
    }

    #[test]
    fn runtime_names_lose_their_abi_version() {
        assert_eq!(strip_version("cudaLaunchKernel_v7000"), "cudaLaunchKernel");
        assert_eq!(strip_version("cudaFree_v3020"), "cudaFree");
        assert_eq!(
            strip_version("cuModuleGetLoadingMode"),
            "cuModuleGetLoadingMode"
        );
        assert_eq!(strip_version("my_var"), "my_var");
        assert_eq!(strip_version("x_v"), "x_v");
    }

    #[test]
    fn global_ids_split_into_pid_and_tid() {
        assert_eq!(split_global_tid(310028055214088), (1701896, 1701896));
        assert_eq!(split_global_tid(310028053512192), (1701896, 0));
        assert_eq!(process_key(310028055214088), process_key(310028053512192));
    }

    #[test]
    fn memcpy_names_with_and_without_the_enum() {
        let empty = Enum::default();
        assert_eq!(memcpy_name(Some(1), &empty), "Memcpy HtoD");
        assert_eq!(memcpy_name(Some(8), &empty), "Memcpy DtoD");
        assert_eq!(memcpy_name(None, &empty), "Memcpy");
        let mut kinds = Enum::default();
        kinds
            .values
            .insert(2, ("CUDA_MEMCPY_KIND_DTOH".into(), "Device-to-Host".into()));
        kinds.values.insert(
            11,
            (
                "CUDA_MEMCPY_KIND_UVM_HTOD".into(),
                "Unified Host-to-Device".into(),
            ),
        );
        assert_eq!(memcpy_name(Some(2), &kinds), "Memcpy DtoH");
        assert_eq!(
            memcpy_name(Some(11), &kinds),
            "Memcpy Unified Host-to-Device"
        );
    }
}
