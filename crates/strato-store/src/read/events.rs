//! The event tables: spans, instants, counter samples and flows, read whole or batch by
//! batch (a streamed read), with the args ids and spans the read keeps, and the args blobs
//! of a selection loaded row by row.

use std::path::Path;

use arrow::datatypes::{Float64Type, Int64Type, UInt32Type};
use strato_trace::{
    ArgsId, CounterSample, Flow, FlowEnd, Instant, Level, Span, SpanId, Trace, TrackId,
};

use super::columns::{IdColumn, Prim, Rows, Text};
use super::select::{ArgsRead, SpanRule};
use super::table::Table;
use super::BatchDone;
use crate::error::{Result, StoreError, StoreErrorKind};
use crate::meta::Metadata;
use crate::schema::{self, TableDef};

/// Reads the spans `options` keeps (args ids as `args` says). With a selection that leaves
/// spans out and flows to read, returns each stored span's new id (`u32::MAX`: left out), for
/// the flows' ends. With `batch_done` (a streamed read), it is called after each batch of
/// spans is pushed (and no id map is returned).
pub(super) fn read_spans(
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
                correlation: correlation.opt(i).into(),
                external_id: external_id.opt(i).into(),
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
pub(super) fn read_instants(
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
pub(super) fn read_device_args(dir: &Path, meta: &Metadata, trace: &mut Trace) -> Result<()> {
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
pub(super) fn read_counters(
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
pub(super) fn read_flows(
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
