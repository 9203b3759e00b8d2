//! The tables without events (strings, ranks, processes, tracks, flows, devices), handed to
//! a sink ([`TableSink`]): Parquet files of the directory being written, or Arrow record
//! batches in memory for [`crate::arrow_tables`] (which takes the event tables too).

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, RecordBatch, StringArray};
use arrow::error::ArrowError;
use strato_trace::{FlowEnd, Trace, TrackKind};

use super::columns::{
    counter_columns, dict, i64s, ids, instant_columns, span_columns, strs, u32s, u64s, ChunkStrings,
};
use super::ctx::{kind_code, Ctx, Location};
use super::files::TableFile;
use super::{put_table, CHUNK_ROWS};
use crate::error::{Result, StoreError, StoreErrorKind};
use crate::meta::TableInfo;
use crate::schema::{self, TableDef};

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
pub(super) fn write_other_tables(
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
        let metadata: Vec<Option<String>> = rows.iter().map(|x| x.metadata.to_json()).collect();
        Ok(vec![
            ids(r),
            i64s(rows.iter().map(|x| x.rank)),
            i64s(rows.iter().map(|x| x.world_size)),
            strs(rows.iter().map(|x| Some(x.source.as_str()))),
            strs(rows.iter().map(|x| Some(x.format.as_str()))),
            strs(rows.iter().map(|x| x.host.as_deref())),
            strs(metadata.iter().map(Option::as_deref)),
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
        let extra: Vec<Option<String>> = rows
            .iter()
            .map(|d| (!d.extra.is_empty()).then(|| d.extra.to_json()))
            .collect();
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
            strs(extra.iter().map(Option::as_deref)),
        ])
    })?;

    Ok(())
}
