//! The reader: checks a profile directory (marker, version, every table's columns, types,
//! nulls, row counts, ids) and rebuilds the [`Trace`] exactly. A damaged profile is an error
//! naming the file, never a panic.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, ArrowPrimitiveType, DictionaryArray, PrimitiveArray, RecordBatch, StringArray,
};
use arrow::datatypes::{DataType, Float64Type, Int32Type, Int64Type, UInt32Type, UInt64Type};
use parquet::arrow::arrow_reader::{
    ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder, RowSelection, RowSelector,
};
use parquet::arrow::ProjectionMask;
use strato_trace::{
    ArgsId, ClockInfo, CounterSample, Device, Flow, FlowEnd, ImportNotes, Instant, Level, Process,
    Rank, RankId, SourceFormat, Span, SpanId, StrId, StringTable, Trace, Track, TrackId, TrackKind,
};

use crate::error::{Result, StoreError, StoreErrorKind};
use crate::meta::Metadata;
use crate::schema::{self, TableDef};

/// Rows per record batch while reading.
const BATCH_ROWS: usize = 64 * 1024;

/// See [`crate::read`]; `options` says which tables, columns and rows (see
/// [`crate::ReadOptions`]).
pub(crate) fn read(dir: &Path, options: &crate::ReadOptions) -> Result<Trace> {
    let meta = Metadata::read(dir)?;
    let mut trace = Trace {
        clock: ClockInfo::clone(&meta.clock),
        ..Trace::default()
    };
    trace.strings = read_strings(dir, &meta)?;
    let args = args_read(options);
    if args == ArgsRead::All {
        read_args(dir, &meta, &mut trace)?;
    }
    read_ranks(dir, &meta, &mut trace)?;
    read_processes(dir, &meta, &mut trace)?;
    read_tracks(dir, &meta, &mut trace)?;
    let span_ids = read_spans(dir, &meta, options, args, &mut trace, None)?;
    if options.instants {
        read_instants(dir, &meta, args, &mut trace, None)?;
    }
    if options.counters {
        read_counters(dir, &meta, &mut trace, None)?;
    }
    if options.flows {
        read_flows(dir, &meta, span_ids.as_deref(), &mut trace, None)?;
    }
    read_devices(dir, &meta, &mut trace)?;
    if args.selects() {
        read_device_args(dir, &meta, &mut trace)?;
    }
    trace
        .validate()
        .map_err(|e| StoreError::new(dir, StoreErrorKind::InvalidTrace(e.to_string())))?;
    Ok(trace)
}

fn args_read(options: &crate::ReadOptions) -> ArgsRead {
    match (options.args, options.args_scope) {
        (false, _) => ArgsRead::None,
        (true, crate::ArgsScope::All) => ArgsRead::All,
        (true, crate::ArgsScope::DeviceOps) => ArgsRead::DeviceOps,
        (true, crate::ArgsScope::Dependencies) => ArgsRead::Dependencies,
    }
}

/// Called after each batch of events a streamed read has put in the trace.
type BatchDone<'a> = &'a mut dyn FnMut(&mut Trace) -> Result<()>;

/// A profile opened for a streamed read ([`crate::stream_with`]): its tables but the events
/// (strings, ranks, processes, tracks, devices, clock), checked; the events are read by
/// [`TablesRead::stream_events`].
pub(crate) struct TablesRead {
    dir: PathBuf,
    meta: Metadata,
    /// The tables; no event, no args blob.
    pub(crate) trace: Trace,
}

/// Reads the tables of the profile at `dir` but its events (see [`TablesRead`]).
pub(crate) fn read_tables(dir: &Path) -> Result<TablesRead> {
    let meta = Metadata::read(dir)?;
    let mut trace = Trace {
        clock: ClockInfo::clone(&meta.clock),
        ..Trace::default()
    };
    trace.strings = read_strings(dir, &meta)?;
    read_ranks(dir, &meta, &mut trace)?;
    read_processes(dir, &meta, &mut trace)?;
    read_tracks(dir, &meta, &mut trace)?;
    read_devices(dir, &meta, &mut trace)?;
    trace
        .validate()
        .map_err(|e| StoreError::new(dir, StoreErrorKind::InvalidTrace(e.to_string())))?;
    Ok(TablesRead {
        dir: dir.to_path_buf(),
        meta,
        trace,
    })
}

impl TablesRead {
    /// Reads the events `options` keeps batch by batch (spans, then instants, counter samples
    /// and flows), each batch put in the tables' trace alone, with only its own args blobs
    /// (ids renumbered to index them; only the rows of `args.parquet` holding one are read),
    /// flow ends without span (the spans are gone), checked, handed to `sink`, then dropped.
    /// Returns the tables (no event).
    pub(crate) fn stream_events(
        mut self,
        options: &crate::ReadOptions,
        sink: &mut dyn FnMut(&mut Trace),
    ) -> Result<Trace> {
        let args = args_read(options);
        let (dir, meta) = (self.dir, self.meta);
        let mut done = |t: &mut Trace| -> Result<()> {
            if args != ArgsRead::None
                && (t.spans.iter().any(|s| s.args.is_some())
                    || t.instants.iter().any(|e| e.args.is_some()))
            {
                read_device_args(&dir, &meta, t)?;
            }
            for f in &mut t.flows {
                for end in [&mut f.from, &mut f.to].into_iter().flatten() {
                    end.span = None;
                }
            }
            t.validate()
                .map_err(|e| StoreError::new(&dir, StoreErrorKind::InvalidTrace(e.to_string())))?;
            sink(t);
            t.spans.clear();
            t.instants.clear();
            t.counters.clear();
            t.flows.clear();
            t.args = Default::default();
            Ok(())
        };
        let trace = &mut self.trace;
        read_spans(&dir, &meta, options, args, trace, Some(&mut done))?;
        if options.instants {
            read_instants(&dir, &meta, args, trace, Some(&mut done))?;
        }
        if options.counters {
            read_counters(&dir, &meta, trace, Some(&mut done))?;
        }
        if options.flows {
            read_flows(&dir, &meta, None, trace, Some(&mut done))?;
        }
        Ok(self.trace)
    }
}

/// Which args blobs a read loads (from [`crate::ReadOptions`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ArgsRead {
    /// None: `args.parquet` is not opened, every args id is dropped.
    None,
    /// Every blob, with the stored ids.
    All,
    /// The device operations' blobs: their stored ids are kept on the events while the tables
    /// are read, then [`read_device_args`] loads those blobs and renumbers them.
    DeviceOps,
    /// The dependency analyses' blobs, kept and loaded as [`ArgsRead::DeviceOps`]'s.
    Dependencies,
}

impl ArgsRead {
    /// The args id an event keeps, of its stored `id`; `selected`: whether the selection
    /// takes the event ([`ArgsRead::selected`]).
    fn keep(self, id: Option<u32>, selected: bool) -> Option<ArgsId> {
        match self {
            ArgsRead::None => None,
            ArgsRead::All => id.map(ArgsId),
            ArgsRead::DeviceOps | ArgsRead::Dependencies => id.filter(|_| selected).map(ArgsId),
        }
    }

    /// True for the reads that keep some blobs only (loaded by [`read_device_args`]).
    fn selects(self) -> bool {
        matches!(self, ArgsRead::DeviceOps | ArgsRead::Dependencies)
    }

    /// Whether this read keeps the blob of an event on `track` at `level` named `name`.
    fn selected(self, trace: &Trace, track: TrackId, level: Level, name: StrId) -> bool {
        match self {
            ArgsRead::DeviceOps => is_device_op(trace, track, level),
            ArgsRead::Dependencies => strato_trace::args_of::dependency_args(
                level,
                trace
                    .tracks
                    .get(track.0 as usize)
                    .is_some_and(Track::is_device),
                trace.str(name),
            ),
            ArgsRead::None | ArgsRead::All => false,
        }
    }
}

use strato_trace::projection::KINETO_HOST_CATEGORIES;

/// Decides, span by span, whether a [`crate::SpanProjection`] keeps it.
struct SpanRule {
    /// Per track: its spans may be left out (a host track of a Chrome/Kineto rank).
    host_track_of_chrome_rank: Vec<bool>,
    /// The string ids of [`KINETO_HOST_CATEGORIES`] in this profile.
    host_categories: Vec<StrId>,
}

impl SpanRule {
    /// `None` for [`crate::SpanProjection::All`] (every span kept).
    fn new(selection: crate::SpanProjection, trace: &Trace) -> Option<SpanRule> {
        if selection == crate::SpanProjection::All {
            return None;
        }
        let host_track_of_chrome_rank = trace
            .tracks
            .iter()
            .map(|t| {
                !t.is_device()
                    && trace.ranks.get(t.rank.0 as usize).is_some_and(|r| {
                        matches!(r.format, SourceFormat::Kineto | SourceFormat::Chrome)
                    })
            })
            .collect();
        let host_categories = KINETO_HOST_CATEGORIES
            .iter()
            .filter_map(|c| trace.strings.lookup(c))
            .collect();
        Some(SpanRule {
            host_track_of_chrome_rank,
            host_categories,
        })
    }

    fn keeps(&self, trace: &Trace, s: &Span) -> bool {
        let may_leave_out = self
            .host_track_of_chrome_rank
            .get(s.track.0 as usize)
            .copied()
            .unwrap_or(false);
        !may_leave_out
            || s.correlation.is_some()
            || s.level.is_device_op()
            || !self.host_categories.contains(&s.category)
            || trace.str(s.name).starts_with("ProfilerStep#")
    }
}

/// Whether an event on `track` at `level` is a device operation (whose args
/// [`crate::ArgsScope::DeviceOps`] keeps).
fn is_device_op(trace: &Trace, track: TrackId, level: Level) -> bool {
    level.is_device_op()
        || trace
            .tracks
            .get(track.0 as usize)
            .is_some_and(Track::is_device)
}

fn read_strings(dir: &Path, meta: &Metadata) -> Result<StringTable> {
    let mut strings = StringTable::default();
    Table::open(dir, meta, &schema::STRINGS)?.for_each(|rows| {
        let id = rows.u32("id")?;
        let text = rows.text("text")?;
        for i in 0..rows.len() {
            rows.check_id(&id, i)?;
            let text = text.req(i)?;
            let row = rows.base + i;
            if row == 0 && !text.is_empty() {
                return Err(rows.bad("text", i, "string 0 must be the empty string".into()));
            }
            if strings.intern(text).0 as usize != row {
                return Err(rows.bad("text", i, format!("duplicate string {text:?}")));
            }
        }
        Ok(())
    })?;
    Ok(strings)
}

/// Reads the blobs batch by batch into the trace's arena (no allocation per blob).
fn read_args(dir: &Path, meta: &Metadata, trace: &mut Trace) -> Result<()> {
    Table::open(dir, meta, &schema::ARGS)?.for_each(|rows| {
        let id = rows.u32("id")?;
        let json = rows.text("json")?;
        for i in 0..rows.len() {
            rows.check_id(&id, i)?;
            trace.args.push(json.req(i)?);
        }
        Ok(())
    })
}

/// See [`crate::visit_args`].
pub(crate) fn visit_args(dir: &Path, visit: &mut dyn FnMut(&str) -> bool) -> Result<()> {
    let meta = Metadata::read(dir)?;
    let mut going = true;
    Table::open(dir, &meta, &schema::ARGS)?.for_each(|rows| {
        if !going {
            return Ok(());
        }
        let json = rows.text("json")?;
        for i in 0..rows.len() {
            if !visit(json.req(i)?) {
                going = false;
                break;
            }
        }
        Ok(())
    })
}

fn read_ranks(dir: &Path, meta: &Metadata, trace: &mut Trace) -> Result<()> {
    Table::open(dir, meta, &schema::RANKS)?.for_each(|rows| {
        let id = rows.u32("id")?;
        let (rank, world_size) = (rows.i64("rank")?, rows.i64("world_size")?);
        let (source, format) = (rows.text("source")?, rows.text("format")?);
        let (host, metadata_json) = (rows.text("host")?, rows.text("metadata_json")?);
        let notes_json = match rows.has("import_notes_json") {
            true => Some(rows.text("import_notes_json")?),
            false => None,
        };
        for i in 0..rows.len() {
            rows.check_id(&id, i)?;
            trace.ranks.push(Rank {
                rank: rank.opt(i),
                world_size: world_size.opt(i),
                source: source.req(i)?.to_owned(),
                format: SourceFormat::from_name(format.req(i)?),
                host: host.opt(i)?.map(str::to_owned),
                metadata_json: metadata_json.opt(i)?.map(str::to_owned),
                notes: match notes_json.as_ref().map(|c| c.opt(i)).transpose()?.flatten() {
                    None => ImportNotes::default(),
                    Some(text) => ImportNotes::from_json(text).map_err(|e| {
                        rows.bad("import_notes_json", i, format!("not import notes: {e}"))
                    })?,
                },
            });
        }
        Ok(())
    })
}

fn read_processes(dir: &Path, meta: &Metadata, trace: &mut Trace) -> Result<()> {
    Table::open(dir, meta, &schema::PROCESSES)?.for_each(|rows| {
        let (rank, pid) = (rows.u32("rank")?, rows.i64("pid")?);
        let (name, labels) = (rows.text("name")?, rows.text("labels")?);
        for i in 0..rows.len() {
            trace.processes.push(Process {
                rank: RankId(rank.req(i)?),
                pid: pid.req(i)?,
                name: name.opt(i)?.map(str::to_owned),
                labels: labels.opt(i)?.map(str::to_owned),
            });
        }
        Ok(())
    })
}

fn read_tracks(dir: &Path, meta: &Metadata, trace: &mut Trace) -> Result<()> {
    Table::open(dir, meta, &schema::TRACKS)?.for_each(|rows| {
        let (id, rank, kind) = (rows.u32("id")?, rows.u32("rank")?, rows.text("kind")?);
        let (pid, tid) = (rows.i64("pid")?, rows.i64("tid")?);
        let (device, queue) = (rows.i64("device")?, rows.i64("queue")?);
        let (counter_name, counter_unit) = (rows.text("counter_name")?, rows.text("counter_unit")?);
        let (custom_group, custom_name) = (rows.text("custom_group")?, rows.text("custom_name")?);
        let (name, sort_index) = (rows.text("name")?, rows.i64("sort_index")?);
        for i in 0..rows.len() {
            rows.check_id(&id, i)?;
            let kind = match kind.req(i)? {
                "Thread" => TrackKind::Thread {
                    pid: pid.req(i)?,
                    tid: tid.req(i)?,
                },
                "DeviceQueue" => TrackKind::DeviceQueue {
                    device: device.req(i)?,
                    queue: queue.req(i)?,
                },
                "Counter" => TrackKind::Counter {
                    pid: pid.opt(i),
                    device: device.opt(i),
                    name: counter_name.req(i)?.to_owned(),
                    unit: counter_unit.req(i)?.to_owned(),
                },
                "Custom" => TrackKind::Custom {
                    group: custom_group.req(i)?.to_owned(),
                    name: custom_name.req(i)?.to_owned(),
                },
                other => {
                    return Err(rows.bad("kind", i, format!("unknown track kind {other:?}")));
                }
            };
            trace.tracks.push(Track {
                rank: RankId(rank.req(i)?),
                kind,
                name: name.opt(i)?.map(str::to_owned),
                sort_index: sort_index.opt(i),
            });
        }
        Ok(())
    })
}

/// Reads the spans `options` keeps (args ids as `args` says). With a selection that leaves
/// spans out and flows to read, returns each stored span's new id (`u32::MAX`: left out), for
/// the flows' ends. With `batch_done` (a streamed read), it is called after each batch of
/// spans is pushed (and no id map is returned).
fn read_spans(
    dir: &Path,
    meta: &Metadata,
    options: &crate::ReadOptions,
    args: ArgsRead,
    trace: &mut Trace,
    mut batch_done: Option<BatchDone<'_>>,
) -> Result<Option<Vec<u32>>> {
    let (mut names, mut categories) = (IdColumn::new("name"), IdColumn::new("category"));
    let rule = SpanRule::new(options.spans, trace);
    let streamed = batch_done.is_some();
    let mut new_ids = (rule.is_some() && options.flows && !streamed).then(Vec::new);
    if rule.is_none() && !streamed {
        trace.spans.reserve(table_rows(meta, &schema::SPANS));
    }
    let skip: &[&str] = match args {
        ArgsRead::None => &["args_id"],
        _ => &[],
    };
    Table::open_columns(dir, meta, &schema::SPANS, skip)?.for_each(|rows| {
        let (id, track) = (rows.u32("id")?, rows.u32("track")?);
        let (start, end) = (rows.i64("start_ns")?, rows.i64("end_ns")?);
        let name = names.resolve(rows, &trace.strings)?;
        let category = categories.resolve(rows, &trace.strings)?;
        let level = rows.text("level")?;
        let (correlation, external_id) = (rows.u64("correlation")?, rows.u64("external_id")?);
        let args_id = match args {
            ArgsRead::None => None,
            _ => Some(rows.u32("args_id")?),
        };
        for i in 0..rows.len() {
            rows.check_id(&id, i)?;
            let mut span = Span {
                track: TrackId(track.req(i)?),
                start: start.req(i)?,
                end: end.req(i)?,
                name: name[i],
                category: category[i],
                level: parse_level(rows, &level, i)?,
                correlation: correlation.opt(i),
                external_id: external_id.opt(i),
                args: None,
            };
            let kept = rule.as_ref().is_none_or(|r| r.keeps(trace, &span));
            if let Some(new_ids) = new_ids.as_mut() {
                new_ids.push(match kept {
                    true => trace.spans.len() as u32,
                    false => u32::MAX,
                });
            }
            if kept {
                let selected = args.selected(trace, span.track, span.level, span.name);
                span.args = args.keep(args_id.as_ref().and_then(|a| a.opt(i)), selected);
                trace.spans.push(span);
            }
        }
        match batch_done.as_mut() {
            Some(done) => done(trace),
            None => Ok(()),
        }
    })?;
    Ok(new_ids)
}

/// Reads the instants; `args` and `batch_done` as for [`read_spans`].
fn read_instants(
    dir: &Path,
    meta: &Metadata,
    args: ArgsRead,
    trace: &mut Trace,
    mut batch_done: Option<BatchDone<'_>>,
) -> Result<()> {
    let (mut names, mut categories) = (IdColumn::new("name"), IdColumn::new("category"));
    if batch_done.is_none() {
        trace.instants.reserve(table_rows(meta, &schema::INSTANTS));
    }
    let skip: &[&str] = match args {
        ArgsRead::None => &["args_id"],
        _ => &[],
    };
    Table::open_columns(dir, meta, &schema::INSTANTS, skip)?.for_each(|rows| {
        let (id, track, ts) = (rows.u32("id")?, rows.u32("track")?, rows.i64("ts_ns")?);
        let name = names.resolve(rows, &trace.strings)?;
        let category = categories.resolve(rows, &trace.strings)?;
        let level = rows.text("level")?;
        let args_id = match args {
            ArgsRead::None => None,
            _ => Some(rows.u32("args_id")?),
        };
        for i in 0..rows.len() {
            rows.check_id(&id, i)?;
            let (track, level) = (TrackId(track.req(i)?), parse_level(rows, &level, i)?);
            let selected = args.selected(trace, track, level, name[i]);
            trace.instants.push(Instant {
                track,
                ts: ts.req(i)?,
                name: name[i],
                category: category[i],
                level,
                args: args.keep(args_id.as_ref().and_then(|a| a.opt(i)), selected),
            });
        }
        match batch_done.as_mut() {
            Some(done) => done(trace),
            None => Ok(()),
        }
    })
}

/// Loads the blobs of [`ArgsRead::DeviceOps`] and [`ArgsRead::Dependencies`]: the events hold their stored args ids; only
/// the row groups of `args.parquet` holding one of them are read, only those rows are
/// decoded, and the events' ids are renumbered to the blobs' places in `trace.args` (in the
/// order of the stored ids). A streamed read calls it on each batch (its `args` empty).
fn read_device_args(dir: &Path, meta: &Metadata, trace: &mut Trace) -> Result<()> {
    let mut wanted: Vec<u32> = trace
        .spans
        .iter()
        .filter_map(|s| s.args)
        .chain(trace.instants.iter().filter_map(|e| e.args))
        .map(|a| a.0)
        .collect();
    wanted.sort_unstable();
    wanted.dedup();
    let table = Table::open_rows(dir, meta, &schema::ARGS, &wanted)?;
    let path = table.path.clone();
    let mut next = 0usize;
    table.for_each(|rows| {
        let (id, json) = (rows.u32("id")?, rows.text("json")?);
        for i in 0..rows.len() {
            let found = id.req(i)?;
            if wanted.get(next) != Some(&found) {
                return Err(rows.bad(
                    "id",
                    i,
                    format!("id {found} out of order (rows must be stored in id order)"),
                ));
            }
            trace.args.push(json.req(i)?);
            next += 1;
        }
        Ok(())
    })?;
    if next != wanted.len() {
        return Err(StoreError::new(
            &path,
            StoreErrorKind::RowCount {
                expected: wanted.len() as u64,
                found: next as u64,
            },
        ));
    }
    let renumber = |a: &mut Option<ArgsId>| {
        if let Some(id) = a {
            // Every kept id is in `wanted`, read above.
            *id = ArgsId(wanted.partition_point(|&w| w < id.0) as u32);
        }
    };
    trace.spans.iter_mut().for_each(|s| renumber(&mut s.args));
    trace
        .instants
        .iter_mut()
        .for_each(|e| renumber(&mut e.args));
    Ok(())
}

/// Reads the counter samples; `batch_done` as for [`read_spans`].
fn read_counters(
    dir: &Path,
    meta: &Metadata,
    trace: &mut Trace,
    mut batch_done: Option<BatchDone<'_>>,
) -> Result<()> {
    if batch_done.is_none() {
        trace.counters.reserve(table_rows(meta, &schema::COUNTERS));
    }
    Table::open(dir, meta, &schema::COUNTERS)?.for_each(|rows| {
        let (track, ts) = (rows.u32("track")?, rows.i64("ts_ns")?);
        let value = rows.prim::<Float64Type>("value")?;
        for i in 0..rows.len() {
            trace.counters.push(CounterSample {
                track: TrackId(track.req(i)?),
                ts: ts.req(i)?,
                value: value.req(i)?,
            });
        }
        match batch_done.as_mut() {
            Some(done) => done(trace),
            None => Ok(()),
        }
    })
}

/// Reads the flows; `span_ids` (when spans were left out) maps each stored span id to its new
/// one (`u32::MAX`: left out, the end keeps no span); `batch_done` as for [`read_spans`].
fn read_flows(
    dir: &Path,
    meta: &Metadata,
    span_ids: Option<&[u32]>,
    trace: &mut Trace,
    mut batch_done: Option<BatchDone<'_>>,
) -> Result<()> {
    let mut categories = IdColumn::new("category");
    if batch_done.is_none() {
        trace.flows.reserve(table_rows(meta, &schema::FLOWS));
    }
    Table::open(dir, meta, &schema::FLOWS)?.for_each(|rows| {
        let id = rows.u64("id")?;
        let category = categories.resolve(rows, &trace.strings)?;
        let from = FlowEndColumns::new(rows, "from")?;
        let to = FlowEndColumns::new(rows, "to")?;
        for (i, &category) in category.iter().enumerate() {
            trace.flows.push(Flow {
                id: id.req(i)?,
                category,
                from: from.get(rows, i, span_ids)?,
                to: to.get(rows, i, span_ids)?,
            });
        }
        match batch_done.as_mut() {
            Some(done) => done(trace),
            None => Ok(()),
        }
    })
}

fn read_devices(dir: &Path, meta: &Metadata, trace: &mut Trace) -> Result<()> {
    Table::open(dir, meta, &schema::DEVICES)?.for_each(|rows| {
        let (rank, index, name) = (rows.u32("rank")?, rows.i64("index")?, rows.text("name")?);
        let sm_count = rows.i64("sm_count")?;
        let total_memory_bytes = rows.i64("total_memory_bytes")?;
        let (major, minor) = (rows.i64("compute_major")?, rows.i64("compute_minor")?);
        let clock_rate_khz = rows.i64("clock_rate_khz")?;
        let bandwidth = rows.prim::<Float64Type>("memory_bandwidth_bytes_per_s")?;
        let extra_json = rows.text("extra_json")?;
        for i in 0..rows.len() {
            trace.devices.push(Device {
                rank: rank.opt(i).map(RankId),
                index: index.req(i)?,
                name: name.opt(i)?.map(str::to_owned),
                sm_count: sm_count.opt(i),
                total_memory_bytes: total_memory_bytes.opt(i),
                compute_major: major.opt(i),
                compute_minor: minor.opt(i),
                clock_rate_khz: clock_rate_khz.opt(i),
                memory_bandwidth_bytes_per_s: bandwidth.opt(i),
                extra_json: extra_json.opt(i)?.map(str::to_owned),
            });
        }
        Ok(())
    })
}

/// The metadata's row count for a table, as a capacity hint (bounded, since it is untrusted).
fn table_rows(meta: &Metadata, def: &TableDef) -> usize {
    meta.tables
        .get(def.name)
        .map_or(0, |t| usize::try_from(t.rows).unwrap_or(0).min(1 << 24))
}

fn parse_level(rows: &Rows<'_>, level: &Text<'_>, i: usize) -> Result<Level> {
    let text = level.req(i)?;
    Level::parse(text).ok_or_else(|| rows.bad("level", i, format!("unknown level {text:?}")))
}

/// The three columns of one end of a flow (`from_*` or `to_*`).
struct FlowEndColumns<'a> {
    prefix: &'static str,
    track: Prim<'a, UInt32Type>,
    ts: Prim<'a, Int64Type>,
    span: Prim<'a, UInt32Type>,
}

impl<'a> FlowEndColumns<'a> {
    fn new(rows: &'a Rows<'a>, prefix: &'static str) -> Result<Self> {
        let (track, ts, span) = match prefix {
            "from" => ("from_track", "from_ts_ns", "from_span"),
            _ => ("to_track", "to_ts_ns", "to_span"),
        };
        Ok(FlowEndColumns {
            prefix,
            track: rows.u32(track)?,
            ts: rows.i64(ts)?,
            span: rows.u32(span)?,
        })
    }

    /// The end of row `i`; `span_ids` as for [`read_flows`] (a stored id beyond it is kept,
    /// for the trace's check to report).
    fn get(&self, rows: &Rows<'_>, i: usize, span_ids: Option<&[u32]>) -> Result<Option<FlowEnd>> {
        let renumber = |span: u32| match span_ids.map(|ids| ids.get(span as usize)) {
            None | Some(None) => Some(span),
            Some(Some(&u32::MAX)) => None,
            Some(Some(&new)) => Some(new),
        };
        match (self.track.opt(i), self.ts.opt(i), self.span.opt(i)) {
            (None, None, None) => Ok(None),
            (Some(track), Some(ts), span) => Ok(Some(FlowEnd {
                track: TrackId(track),
                ts,
                span: span.and_then(renumber).map(SpanId),
            })),
            _ => Err(rows.bad(
                self.track.name,
                i,
                format!(
                    "flow end '{}' is partly null: track and ts must both be set or both be null",
                    self.prefix
                ),
            )),
        }
    }
}

/// One open table: checked columns, projected to the ones the reader needs.
struct Table {
    path: PathBuf,
    batches: ParquetRecordBatchReader,
    expected_rows: u64,
}

impl Table {
    /// Every row, every column of `def` (those the file has).
    fn open(dir: &Path, meta: &Metadata, def: &TableDef) -> Result<Table> {
        Table::open_projected(dir, meta, def, &[], None)
    }

    /// Every row, the columns of `def` but `skip` (not decoded; still checked to be there).
    fn open_columns(dir: &Path, meta: &Metadata, def: &TableDef, skip: &[&str]) -> Result<Table> {
        Table::open_projected(dir, meta, def, skip, None)
    }

    /// Only the rows numbered `rows` (sorted, distinct), every column: only the row groups
    /// holding one are read, and only those rows decoded. A row beyond the table is an error.
    fn open_rows(dir: &Path, meta: &Metadata, def: &TableDef, rows: &[u32]) -> Result<Table> {
        Table::open_projected(dir, meta, def, &[], Some(rows))
    }

    fn open_projected(
        dir: &Path,
        meta: &Metadata,
        def: &TableDef,
        skip: &[&str],
        only_rows: Option<&[u32]>,
    ) -> Result<Table> {
        let path = dir.join(def.file());
        let listed = meta.tables.get(def.name).ok_or_else(|| {
            StoreError::new(
                dir.join(crate::meta::METADATA_FILE),
                StoreErrorKind::Metadata(format!("table '{}' is not listed", def.name)),
            )
        })?;
        let file = File::open(&path).map_err(|e| StoreError::new(&path, e))?;
        let parquet_err = |e: parquet::errors::ParquetError| {
            StoreError::new(&path, StoreErrorKind::Parquet(e.to_string()))
        };
        let mut builder = guard(&path, || ParquetRecordBatchReaderBuilder::try_new(file))?
            .map_err(parquet_err)?;
        let found_rows = builder.metadata().file_metadata().num_rows();
        if u64::try_from(found_rows).ok() != Some(listed.rows) {
            return Err(StoreError::new(
                &path,
                StoreErrorKind::RowCount {
                    expected: listed.rows,
                    found: u64::try_from(found_rows).unwrap_or(0),
                },
            ));
        }
        let file_schema = builder.schema().clone();
        let mut roots = Vec::new();
        for col in def.columns.iter().filter(|c| !c.derived) {
            let Some((index, field)) = file_schema.column_with_name(col.name) else {
                if col.may_be_absent {
                    continue;
                }
                return Err(StoreError::new(
                    &path,
                    StoreErrorKind::MissingColumn(col.name.into()),
                ));
            };
            if !col.ty.accepts(field.data_type()) {
                return Err(StoreError::new(
                    &path,
                    StoreErrorKind::ColumnType {
                        column: col.name.into(),
                        found: field.data_type().to_string(),
                        expected: col.ty.arrow().to_string(),
                    },
                ));
            }
            if !skip.contains(&col.name) {
                roots.push(index);
            }
        }
        let mut expected_rows = listed.rows;
        if let Some(only_rows) = only_rows {
            if let Some(&beyond) = only_rows.iter().find(|&&r| u64::from(r) >= listed.rows) {
                return Err(StoreError::new(
                    &path,
                    StoreErrorKind::InvalidTrace(format!(
                        "row {beyond} is referenced but the table has {} rows",
                        listed.rows
                    )),
                ));
            }
            let group_rows: Vec<u64> = builder
                .metadata()
                .row_groups()
                .iter()
                .map(|g| u64::try_from(g.num_rows()).unwrap_or(0))
                .collect();
            let (groups, selection) = select_rows(&group_rows, only_rows);
            builder = builder
                .with_row_groups(groups)
                .with_row_selection(selection);
            expected_rows = only_rows.len() as u64;
        }
        let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
        let batches = guard(&path, || {
            builder
                .with_projection(mask)
                .with_batch_size(BATCH_ROWS)
                .build()
        })?
        .map_err(parquet_err)?;
        Ok(Table {
            path,
            batches,
            expected_rows,
        })
    }

    /// Calls `f` on every batch, then checks that the rows add up to the listed count.
    fn for_each(self, mut f: impl FnMut(&Rows<'_>) -> Result<()>) -> Result<()> {
        let mut base = 0usize;
        let mut batches = self.batches;
        while let Some(batch) = guard(&self.path, || batches.next())? {
            let batch = batch
                .map_err(|e| StoreError::new(&self.path, StoreErrorKind::Parquet(e.to_string())))?;
            let rows = Rows {
                path: &self.path,
                batch,
                base,
            };
            f(&rows)?;
            base += rows.len();
        }
        if base as u64 != self.expected_rows {
            return Err(StoreError::new(
                &self.path,
                StoreErrorKind::RowCount {
                    expected: self.expected_rows,
                    found: base as u64,
                },
            ));
        }
        Ok(())
    }
}

/// The row groups (of `group_rows` rows each) that hold one of `rows` (sorted row numbers of
/// the whole file), and the selection of exactly those rows within them.
fn select_rows(group_rows: &[u64], rows: &[u32]) -> (Vec<usize>, RowSelection) {
    let (mut groups, mut selectors) = (Vec::new(), Vec::new());
    let (mut next, mut group_start) = (0usize, 0u64);
    for (g, &n) in group_rows.iter().enumerate() {
        let group_end = group_start + n;
        let mut at = group_start;
        let first = next;
        while let Some(&r) = rows.get(next).filter(|&&r| u64::from(r) < group_end) {
            let r = u64::from(r);
            if r > at {
                push_selector(&mut selectors, (r - at) as usize, true);
            }
            push_selector(&mut selectors, 1, false);
            at = r + 1;
            next += 1;
        }
        if next > first {
            groups.push(g);
            if group_end > at {
                push_selector(&mut selectors, (group_end - at) as usize, true);
            }
        }
        group_start = group_end;
    }
    (groups, RowSelection::from(selectors))
}

/// Appends `rows` skipped or selected rows, merged with the last selector when alike.
fn push_selector(selectors: &mut Vec<RowSelector>, rows: usize, skip: bool) {
    match selectors.last_mut() {
        Some(last) if last.skip == skip => last.row_count += rows,
        _ => selectors.push(match skip {
            true => RowSelector::skip(rows),
            false => RowSelector::select(rows),
        }),
    }
}

/// Runs a step of the Parquet decoder, turning a panic into an error about `path`: the
/// decoder trusts some lengths and offsets in the file, and a damaged file must not bring the
/// caller down. (The default panic hook still prints the panic to stderr.)
fn guard<T>(path: &Path, f: impl FnOnce() -> T) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        StoreError::new(
            path,
            StoreErrorKind::Parquet(format!("decoder failed on damaged data: {message}")),
        )
    })
}

/// One record batch of a table, with typed, null-checked column access.
struct Rows<'a> {
    path: &'a Path,
    batch: RecordBatch,
    /// Row number of the batch's first row in the table.
    base: usize,
}

impl<'a> Rows<'a> {
    fn len(&self) -> usize {
        self.batch.num_rows()
    }

    fn err(&self, kind: StoreErrorKind) -> StoreError {
        StoreError::new(self.path, kind)
    }

    fn bad(&self, column: &str, i: usize, message: String) -> StoreError {
        self.err(StoreErrorKind::BadValue {
            column: column.into(),
            row: self.base + i,
            message,
        })
    }

    /// True when the batch has the column (see [`crate::schema::Col::may_be_absent`]).
    fn has(&self, name: &str) -> bool {
        self.batch.column_by_name(name).is_some()
    }

    fn column(&self, name: &str) -> Result<&ArrayRef> {
        self.batch
            .column_by_name(name)
            .ok_or_else(|| self.err(StoreErrorKind::MissingColumn(name.into())))
    }

    fn type_error(&self, name: &str, found: &DataType, expected: &DataType) -> StoreError {
        self.err(StoreErrorKind::ColumnType {
            column: name.into(),
            found: found.to_string(),
            expected: expected.to_string(),
        })
    }

    fn prim<T: ArrowPrimitiveType>(&self, name: &'static str) -> Result<Prim<'_, T>> {
        let column = self.column(name)?;
        let array = column
            .as_any()
            .downcast_ref::<PrimitiveArray<T>>()
            .ok_or_else(|| self.type_error(name, column.data_type(), &T::DATA_TYPE))?;
        Ok(Prim {
            rows: self,
            name,
            array,
        })
    }

    fn u32(&self, name: &'static str) -> Result<Prim<'_, UInt32Type>> {
        self.prim(name)
    }

    fn u64(&self, name: &'static str) -> Result<Prim<'_, UInt64Type>> {
        self.prim(name)
    }

    fn i64(&self, name: &'static str) -> Result<Prim<'_, Int64Type>> {
        self.prim(name)
    }

    fn text(&self, name: &'static str) -> Result<Text<'_>> {
        let column = self.column(name)?;
        let wrong = || self.type_error(name, column.data_type(), &DataType::Utf8);
        let inner = if let Some(plain) = column.as_any().downcast_ref::<StringArray>() {
            TextInner::Plain(plain)
        } else if let Some(dict) = column.as_any().downcast_ref::<DictionaryArray<Int32Type>>() {
            let values = dict
                .values()
                .as_any()
                .downcast_ref::<StringArray>()
                .ok_or_else(wrong)?;
            TextInner::Dict(dict.keys(), values)
        } else {
            return Err(wrong());
        };
        Ok(Text {
            rows: self,
            name,
            inner,
        })
    }

    /// Checks that the `id` column numbers the rows 0, 1, 2, ... in order.
    fn check_id(&self, id: &Prim<'_, UInt32Type>, i: usize) -> Result<()> {
        let value = id.req(i)?;
        if value as usize != self.base + i {
            return Err(self.bad(
                "id",
                i,
                format!("id {value} out of order (rows must be stored in id order)"),
            ));
        }
        Ok(())
    }
}

/// A primitive column of a batch.
struct Prim<'a, T: ArrowPrimitiveType> {
    rows: &'a Rows<'a>,
    name: &'static str,
    array: &'a PrimitiveArray<T>,
}

impl<T: ArrowPrimitiveType> Prim<'_, T> {
    fn opt(&self, i: usize) -> Option<T::Native> {
        self.array.is_valid(i).then(|| self.array.value(i))
    }

    fn req(&self, i: usize) -> Result<T::Native> {
        self.opt(i).ok_or_else(|| {
            self.rows.err(StoreErrorKind::Null {
                column: self.name.into(),
                row: self.rows.base + i,
            })
        })
    }
}

enum TextInner<'a> {
    Plain(&'a StringArray),
    Dict(&'a PrimitiveArray<Int32Type>, &'a StringArray),
}

/// A text column of a batch, plain or dictionary-encoded.
struct Text<'a> {
    rows: &'a Rows<'a>,
    name: &'static str,
    inner: TextInner<'a>,
}

impl<'a> Text<'a> {
    fn opt(&self, i: usize) -> Result<Option<&'a str>> {
        match self.inner {
            TextInner::Plain(array) => Ok(array.is_valid(i).then(|| array.value(i))),
            TextInner::Dict(keys, values) => {
                if keys.is_null(i) {
                    return Ok(None);
                }
                let key = keys.value(i);
                match usize::try_from(key).ok().filter(|&k| k < values.len()) {
                    Some(k) => Ok(values.is_valid(k).then(|| values.value(k))),
                    None => Err(self.rows.bad(
                        self.name,
                        i,
                        format!("dictionary key {key} out of range"),
                    )),
                }
            }
        }
    }

    fn req(&self, i: usize) -> Result<&'a str> {
        self.opt(i)?.ok_or_else(|| {
            self.rows.err(StoreErrorKind::Null {
                column: self.name.into(),
                row: self.rows.base + i,
            })
        })
    }
}

/// Resolves a name/category text column to string ids of the rebuilt string table. For a
/// dictionary column the dictionary is resolved once and reused while the reader hands out
/// the same dictionary (a whole row group), so the per-row cost is an array index.
struct IdColumn {
    name: &'static str,
    cache: Option<(ArrayRef, Vec<Option<StrId>>)>,
}

impl IdColumn {
    fn new(name: &'static str) -> Self {
        IdColumn { name, cache: None }
    }

    fn resolve(&mut self, rows: &Rows<'_>, strings: &StringTable) -> Result<Vec<StrId>> {
        let missing = |i: usize, text: &str| {
            rows.bad(self.name, i, format!("{text:?} is not in strings.parquet"))
        };
        let column = rows.column(self.name)?;
        let mut out = Vec::with_capacity(rows.len());
        if let Some(dict) = column.as_any().downcast_ref::<DictionaryArray<Int32Type>>() {
            let values = dict.values();
            let fresh = !matches!(&self.cache, Some((cached, _)) if Arc::ptr_eq(cached, values));
            if fresh {
                let text = rows.text(self.name)?;
                let TextInner::Dict(_, strs) = text.inner else {
                    return Err(rows.type_error(self.name, column.data_type(), &DataType::Utf8));
                };
                let ids = (0..strs.len())
                    .map(|k| {
                        strs.is_valid(k)
                            .then(|| strings.lookup(strs.value(k)))
                            .flatten()
                    })
                    .collect();
                self.cache = Some((values.clone(), ids));
            }
            let ids = self.cache.as_ref().map_or(&[][..], |(_, ids)| &ids[..]);
            let keys = dict.keys();
            for i in 0..rows.len() {
                let id = if keys.is_null(i) {
                    None
                } else {
                    usize::try_from(keys.value(i))
                        .ok()
                        .and_then(|k| ids.get(k))
                        .copied()
                        .flatten()
                };
                match id {
                    Some(id) => out.push(id),
                    None => {
                        // Slow path, for the message: null, out of range, or unknown text.
                        let text = rows.text(self.name)?;
                        let text = text.req(i)?;
                        return Err(missing(i, text));
                    }
                }
            }
        } else {
            let text = rows.text(self.name)?;
            for i in 0..rows.len() {
                let t = text.req(i)?;
                out.push(strings.lookup(t).ok_or_else(|| missing(i, t))?);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rows a selection selects, as row numbers of the whole file.
    fn selected(group_rows: &[u64], rows: &[u32]) -> Vec<u64> {
        let (groups, selection) = select_rows(group_rows, rows);
        let starts: Vec<u64> = group_rows
            .iter()
            .scan(0, |at, &n| {
                let start = *at;
                *at += n;
                Some(start)
            })
            .collect();
        // The selected groups' rows, concatenated, as the reader sees them.
        let mut file_rows = groups
            .iter()
            .flat_map(|&g| starts[g]..starts[g] + group_rows[g]);
        let mut out = Vec::new();
        for selector in selection.iter() {
            for _ in 0..selector.row_count {
                let row = file_rows.next().expect("selection longer than its groups");
                if !selector.skip {
                    out.push(row);
                }
            }
        }
        assert!(
            file_rows.next().is_none(),
            "selection shorter than its groups"
        );
        out
    }

    #[test]
    fn row_selection_selects_exactly_the_rows_and_skips_empty_groups() {
        let groups = [4, 3, 5, 1, 2];
        for rows in [
            vec![],
            vec![0],
            vec![3, 4],
            vec![0, 1, 2, 3],
            vec![11, 12, 14],
            vec![5, 6, 13],
            (0..15).collect(),
        ] {
            let want: Vec<u64> = rows.iter().map(|&r| u64::from(r)).collect();
            assert_eq!(selected(&groups, &rows), want, "{rows:?}");
            let (chosen, _) = select_rows(&groups, &rows);
            let mut start = 0;
            for (g, &n) in groups.iter().enumerate() {
                let holds = want.iter().any(|&r| r >= start && r < start + n);
                assert_eq!(chosen.contains(&g), holds, "group {g} of {rows:?}");
                start += n;
            }
        }
    }
}
