//! The trace's own tables as Arrow (`Profile.spans()`, `flows()`, `counters()`, `tracks()`,
//! `ranks()`): one row per element of the model ([`strato_trace::Trace`]), ids as the model's
//! indices, so tables join on them (`spans.track` = `tracks.track`, `tracks.rank_index` =
//! `ranks.rank_index`, `flows.from_span` = a span's `span` id). Names and categories are
//! dictionary-encoded over the trace's string table (one copy of each text).

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, DictionaryArray, Float64Builder, Int64Builder, StringArray, StringBuilder,
    UInt32Array, UInt32Builder, UInt64Builder,
};
use arrow::datatypes::{Field, Schema, UInt32Type};
use arrow::record_batch::RecordBatch;
use strato_trace::{StrId, Trace, TrackKind};

fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
    let fields: Vec<Field> = columns
        .iter()
        .map(|(name, array)| Field::new(*name, array.data_type().clone(), true))
        .collect();
    let arrays = columns.into_iter().map(|(_, a)| a).collect();
    // Every column is built from the same elements: the lengths and types agree.
    RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)
        .unwrap_or_else(|_| RecordBatch::new_empty(Arc::new(Schema::empty())))
}

/// Strings of the trace's string table as a dictionary column with keys `ids`.
fn texts(strings: &Arc<StringArray>, ids: impl Iterator<Item = StrId>) -> ArrayRef {
    let keys = UInt32Array::from_iter_values(ids.map(|id| id.0));
    // Every id is an index of the string table (the trace's invariant); a trace breaking it
    // gets the texts themselves looked up one by one instead.
    match DictionaryArray::<UInt32Type>::try_new(keys.clone(), strings.clone()) {
        Ok(dict) => Arc::new(dict),
        Err(_) => Arc::new(StringArray::from_iter(keys.iter().map(|k| {
            k.and_then(|k| ((k as usize) < strings.len()).then(|| strings.value(k as usize)))
        }))),
    }
}

fn string_table(trace: &Trace) -> Arc<StringArray> {
    Arc::new(StringArray::from_iter_values(
        trace.strings.iter().map(|(_, s)| s),
    ))
}

/// (pid, tid, device, queue) of a track.
fn track_place(kind: &TrackKind) -> (Option<i64>, Option<i64>, Option<i64>, Option<i64>) {
    match kind {
        TrackKind::Thread { pid, tid } => (Some(*pid), Some(*tid), None, None),
        TrackKind::DeviceQueue { device, queue } => (None, None, Some(*device), Some(*queue)),
        TrackKind::Counter { pid, device, .. } => (*pid, None, *device, None),
        TrackKind::Custom { .. } => (None, None, None, None),
    }
}

/// One row per span: `span` (its id), `track`, `rank_index`, `pid`, `tid`, `device`, `stream`,
/// `start_ns`, `end_ns`, `duration_ns`, `name`, `category`, `level`, `correlation`,
/// `external_id`, and `args` (the attributes' JSON text) when `with_args`.
pub fn spans(trace: &Trace, with_args: bool) -> RecordBatch {
    let strings = string_table(trace);
    let n = trace.spans.len();
    let mut span = UInt32Builder::with_capacity(n);
    let mut track = UInt32Builder::with_capacity(n);
    let mut rank = UInt32Builder::with_capacity(n);
    let (mut pid, mut tid, mut device, mut stream) = (
        Int64Builder::with_capacity(n),
        Int64Builder::with_capacity(n),
        Int64Builder::with_capacity(n),
        Int64Builder::with_capacity(n),
    );
    let (mut start, mut end, mut dur) = (
        Int64Builder::with_capacity(n),
        Int64Builder::with_capacity(n),
        Int64Builder::with_capacity(n),
    );
    let mut level = StringBuilder::with_capacity(n, n * 8);
    let mut correlation = UInt64Builder::with_capacity(n);
    let mut external = UInt64Builder::with_capacity(n);
    let mut args = StringBuilder::new();
    for (i, s) in trace.spans.iter().enumerate() {
        span.append_value(i as u32);
        track.append_value(s.track.0);
        let t = trace.tracks.get(s.track.0 as usize);
        rank.append_option(t.map(|t| t.rank.0));
        let (p, th, d, q) = t.map_or((None, None, None, None), |t| track_place(&t.kind));
        pid.append_option(p);
        tid.append_option(th);
        device.append_option(d);
        stream.append_option(q);
        start.append_value(s.start);
        end.append_value(s.end);
        dur.append_value(s.duration());
        level.append_value(s.level.as_str());
        correlation.append_option(s.correlation.get());
        external.append_option(s.external_id.get());
        if with_args {
            args.append_option(s.args.and_then(|a| trace.args.get(a.0 as usize)));
        }
    }
    let mut columns: Vec<(&str, ArrayRef)> = vec![
        ("span", Arc::new(span.finish())),
        ("track", Arc::new(track.finish())),
        ("rank_index", Arc::new(rank.finish())),
        ("pid", Arc::new(pid.finish())),
        ("tid", Arc::new(tid.finish())),
        ("device", Arc::new(device.finish())),
        ("stream", Arc::new(stream.finish())),
        ("start_ns", Arc::new(start.finish())),
        ("end_ns", Arc::new(end.finish())),
        ("duration_ns", Arc::new(dur.finish())),
        ("name", texts(&strings, trace.spans.iter().map(|s| s.name))),
        (
            "category",
            texts(&strings, trace.spans.iter().map(|s| s.category)),
        ),
        ("level", Arc::new(level.finish())),
        ("correlation", Arc::new(correlation.finish())),
        ("external_id", Arc::new(external.finish())),
    ];
    if with_args {
        columns.push(("args", Arc::new(args.finish())));
    }
    batch(columns)
}

/// One row per flow: `id`, `category`, and each end's `track`, `ts_ns` and `span` (null when
/// the end is missing or bound to no span).
pub fn flows(trace: &Trace) -> RecordBatch {
    let strings = string_table(trace);
    let n = trace.flows.len();
    let mut id = UInt64Builder::with_capacity(n);
    let (mut from_track, mut from_ts, mut from_span) = (
        UInt32Builder::with_capacity(n),
        Int64Builder::with_capacity(n),
        UInt32Builder::with_capacity(n),
    );
    let (mut to_track, mut to_ts, mut to_span) = (
        UInt32Builder::with_capacity(n),
        Int64Builder::with_capacity(n),
        UInt32Builder::with_capacity(n),
    );
    for f in &trace.flows {
        id.append_value(f.id);
        from_track.append_option(f.from.as_ref().map(|e| e.track.0));
        from_ts.append_option(f.from.as_ref().map(|e| e.ts));
        from_span.append_option(f.from.as_ref().and_then(|e| e.span).map(|s| s.0));
        to_track.append_option(f.to.as_ref().map(|e| e.track.0));
        to_ts.append_option(f.to.as_ref().map(|e| e.ts));
        to_span.append_option(f.to.as_ref().and_then(|e| e.span).map(|s| s.0));
    }
    batch(vec![
        ("id", Arc::new(id.finish())),
        (
            "category",
            texts(&strings, trace.flows.iter().map(|f| f.category)),
        ),
        ("from_track", Arc::new(from_track.finish())),
        ("from_ts_ns", Arc::new(from_ts.finish())),
        ("from_span", Arc::new(from_span.finish())),
        ("to_track", Arc::new(to_track.finish())),
        ("to_ts_ns", Arc::new(to_ts.finish())),
        ("to_span", Arc::new(to_span.finish())),
    ])
}

/// One row per counter sample: `track`, `rank_index`, `name`, `unit`, `pid`, `device`,
/// `ts_ns`, `value`.
pub fn counters(trace: &Trace) -> RecordBatch {
    let n = trace.counters.len();
    let mut track = UInt32Builder::with_capacity(n);
    let mut rank = UInt32Builder::with_capacity(n);
    let mut name = StringBuilder::new();
    let mut unit = StringBuilder::new();
    let (mut pid, mut device, mut ts) = (
        Int64Builder::with_capacity(n),
        Int64Builder::with_capacity(n),
        Int64Builder::with_capacity(n),
    );
    let mut value = Float64Builder::with_capacity(n);
    for c in &trace.counters {
        track.append_value(c.track.0);
        let t = trace.tracks.get(c.track.0 as usize);
        rank.append_option(t.map(|t| t.rank.0));
        match t.map(|t| &t.kind) {
            Some(TrackKind::Counter {
                pid: p,
                device: d,
                name: nm,
                unit: u,
            }) => {
                name.append_value(nm);
                unit.append_value(u);
                pid.append_option(*p);
                device.append_option(*d);
            }
            _ => {
                name.append_null();
                unit.append_null();
                pid.append_null();
                device.append_null();
            }
        }
        ts.append_value(c.ts);
        value.append_value(c.value);
    }
    batch(vec![
        ("track", Arc::new(track.finish())),
        ("rank_index", Arc::new(rank.finish())),
        ("name", Arc::new(name.finish())),
        ("unit", Arc::new(unit.finish())),
        ("pid", Arc::new(pid.finish())),
        ("device", Arc::new(device.finish())),
        ("ts_ns", Arc::new(ts.finish())),
        ("value", Arc::new(value.finish())),
    ])
}

/// One row per track: `track`, `rank_index`, `kind` (thread, device_queue, counter, custom),
/// `pid`, `tid`, `device`, `stream`, `name`, `sort_index`.
pub fn tracks(trace: &Trace) -> RecordBatch {
    let n = trace.tracks.len();
    let mut track = UInt32Builder::with_capacity(n);
    let mut rank = UInt32Builder::with_capacity(n);
    let mut kind = StringBuilder::new();
    let (mut pid, mut tid, mut device, mut stream, mut sort) = (
        Int64Builder::with_capacity(n),
        Int64Builder::with_capacity(n),
        Int64Builder::with_capacity(n),
        Int64Builder::with_capacity(n),
        Int64Builder::with_capacity(n),
    );
    let mut name = StringBuilder::new();
    for (i, t) in trace.tracks.iter().enumerate() {
        track.append_value(i as u32);
        rank.append_value(t.rank.0);
        kind.append_value(match &t.kind {
            TrackKind::Thread { .. } => "thread",
            TrackKind::DeviceQueue { .. } => "device_queue",
            TrackKind::Counter { .. } => "counter",
            TrackKind::Custom { .. } => "custom",
        });
        let (p, th, d, q) = track_place(&t.kind);
        pid.append_option(p);
        tid.append_option(th);
        device.append_option(d);
        stream.append_option(q);
        name.append_option(t.name.as_deref());
        sort.append_option(t.sort_index);
    }
    batch(vec![
        ("track", Arc::new(track.finish())),
        ("rank_index", Arc::new(rank.finish())),
        ("kind", Arc::new(kind.finish())),
        ("pid", Arc::new(pid.finish())),
        ("tid", Arc::new(tid.finish())),
        ("device", Arc::new(device.finish())),
        ("stream", Arc::new(stream.finish())),
        ("name", Arc::new(name.finish())),
        ("sort_index", Arc::new(sort.finish())),
    ])
}

/// One row per rank (source): `rank_index`, `rank` (the job rank the source states),
/// `world_size`, `source`, `format`, `host`.
pub fn ranks(trace: &Trace) -> RecordBatch {
    let n = trace.ranks.len();
    let mut index = UInt32Builder::with_capacity(n);
    let (mut rank, mut world) = (
        Int64Builder::with_capacity(n),
        Int64Builder::with_capacity(n),
    );
    let (mut source, mut format, mut host) = (
        StringBuilder::new(),
        StringBuilder::new(),
        StringBuilder::new(),
    );
    for (i, r) in trace.ranks.iter().enumerate() {
        index.append_value(i as u32);
        rank.append_option(r.rank);
        world.append_option(r.world_size);
        source.append_value(&r.source);
        format.append_value(r.format.as_str());
        host.append_option(r.host.as_deref());
    }
    batch(vec![
        ("rank_index", Arc::new(index.finish())),
        ("rank", Arc::new(rank.finish())),
        ("world_size", Arc::new(world.finish())),
        ("source", Arc::new(source.finish())),
        ("format", Arc::new(format.finish())),
        ("host", Arc::new(host.finish())),
    ])
}
