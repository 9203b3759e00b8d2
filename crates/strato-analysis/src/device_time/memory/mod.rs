//! Device memory: bytes allocated per device over time (from allocation events: Kineto
//! `[memory]` instants and the importer's derived "memory allocated" counter tracks), the peak
//! and when it happened, the operations that allocated most; host<->device copies by direction
//! with sizes, durations and bandwidth, over time.
//!
//! Window: the whole trace. Conservation: per device, the allocation table's net bytes (allocs
//! minus frees, summed over operations including "(no operation)") equal the last counter
//! value minus the first one's pre-event value when every event carries `Bytes`; per direction,
//! the copy rows sum to all copies of the rank. Bytes and per-op attribution need attributes
//! (import with `keep_args`); without them only the counter series and copy times are given.

use rustc_hash::FxHashMap;
use serde::Serialize;
use strato_trace::{Level, Ns, RankId, Span, Trace, TrackKind};

mod registration;
pub use registration::{Memory, MemorySettings};

/// Direction of a copy, from its name (`Memcpy HtoD (Pageable -> Device)`, `[CUDA memcpy
/// DtoH]`, `Memcpy PtoP`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum CopyDirection {
    HostToDevice,
    DeviceToHost,
    DeviceToDevice,
    PeerToPeer,
    HostToHost,
    Unknown,
}

impl CopyDirection {
    /// Short label (`HtoD`).
    pub fn label(self) -> &'static str {
        match self {
            CopyDirection::HostToDevice => "HtoD",
            CopyDirection::DeviceToHost => "DtoH",
            CopyDirection::DeviceToDevice => "DtoD",
            CopyDirection::PeerToPeer => "PtoP",
            CopyDirection::HostToHost => "HtoH",
            CopyDirection::Unknown => "?",
        }
    }
}

/// Classifies a copy by its name.
pub fn copy_direction(name: &str) -> CopyDirection {
    let n = name;
    let has = |pats: &[&str]| pats.iter().any(|p| n.contains(p));
    if has(&[
        "HtoD",
        "H2D",
        "Host to Device",
        "Host-to-Device",
        "HostToDevice",
    ]) {
        CopyDirection::HostToDevice
    } else if has(&[
        "DtoH",
        "D2H",
        "Device to Host",
        "Device-to-Host",
        "DeviceToHost",
    ]) {
        CopyDirection::DeviceToHost
    } else if has(&["PtoP", "P2P", "Peer"]) {
        CopyDirection::PeerToPeer
    } else if has(&["DtoD", "D2D", "Device to Device", "Device-to-Device"]) {
        CopyDirection::DeviceToDevice
    } else if has(&["HtoH", "H2H"]) {
        CopyDirection::HostToHost
    } else {
        CopyDirection::Unknown
    }
}

/// The direction of a copy: its name, else an OpenCL-layer `direction` attribute.
pub fn span_copy_direction(trace: &Trace, span: &Span) -> CopyDirection {
    let by_name = copy_direction(trace.str(span.name));
    if by_name != CopyDirection::Unknown {
        return by_name;
    }
    let Some(text) = trace.args_text(span.args) else {
        return CopyDirection::Unknown;
    };
    if !text.contains("direction") {
        return CopyDirection::Unknown;
    }
    let value: serde_json::Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(_) => return CopyDirection::Unknown,
    };
    value
        .get("direction")
        .and_then(|d| d.as_str())
        .map(copy_direction)
        .unwrap_or(CopyDirection::Unknown)
}

/// Reads an integer attribute (`bytes`, `Bytes`, ...) from an args JSON text: the first of
/// `keys` the object has as an integer, a number (truncated) or a string of an integer.
pub fn arg_i64(args: Option<&str>, keys: &[&str]) -> Option<i64> {
    let text = args?;
    if !may_hold(text, keys) {
        return None;
    }
    let mut values = vec![None; keys.len()];
    read_i64s(text, keys, &mut values);
    values.into_iter().flatten().next()
}

/// [`arg_i64`] of each of `keys` in one reading of `text` (`None` for each when it is not
/// a JSON object).
pub fn args_i64<const N: usize>(text: &str, keys: [&str; N]) -> [Option<i64>; N] {
    let mut values = [None; N];
    if may_hold(text, &keys) {
        read_i64s(text, &keys, &mut values);
    }
    values
}

/// Whether the JSON text may hold one of `keys`: the cheap test before reading it. A key may
/// be written with escapes (`"by\u0074es"`), so a text with any escape is read.
fn may_hold(text: &str, keys: &[&str]) -> bool {
    keys.iter().any(|k| text.contains(k)) || text.contains('\\')
}

/// Reads `keys` of the JSON object `text` into `values` (`values[i]` is `keys[i]`'s, the last
/// one when a key repeats; an integer, a number truncated, or a string of an integer). Leaves
/// every value `None` when `text` is not a JSON object.
fn read_i64s(text: &str, keys: &[&str], values: &mut [Option<i64>]) {
    let Some(object) = object_keys(text, keys) else {
        return;
    };
    for (key, value) in keys.iter().zip(values.iter_mut()) {
        *value = object.get(*key).and_then(|v| {
            v.as_i64()
                .or_else(|| v.as_f64().map(|f| f as i64))
                .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
        });
    }
}

/// The JSON object `text` with only its attributes named in `keys` (the last one when a key
/// repeats, as a whole parse keeps it), or `None` when `text` is not a JSON object. The other
/// attributes are skipped as they are read, not built: the cost of reading a few attributes
/// of a long object is the scan, not the allocations. Keys written with escapes are compared
/// unescaped.
pub fn object_keys(
    text: &str,
    keys: &[&str],
) -> Option<serde_json::Map<String, serde_json::Value>> {
    use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
    use serde_json::{Map, Value};

    /// A key's index in `keys`, compared where the key is (no copy).
    struct KeyIndex<'k>(&'k [&'k str]);
    impl<'de> DeserializeSeed<'de> for KeyIndex<'_> {
        type Value = Option<usize>;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<usize>, D::Error> {
            d.deserialize_str(self)
        }
    }
    impl Visitor<'_> for KeyIndex<'_> {
        type Value = Option<usize>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a key")
        }
        fn visit_str<E>(self, key: &str) -> Result<Option<usize>, E> {
            Ok(self.0.iter().position(|k| *k == key))
        }
    }
    struct Wanted<'k>(&'k [&'k str]);
    impl<'de> Visitor<'de> for Wanted<'_> {
        type Value = Map<String, Value>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut kept = Map::new();
            while let Some(at) = map.next_key_seed(KeyIndex(self.0))? {
                match at {
                    Some(i) => {
                        kept.insert(self.0[i].to_owned(), map.next_value()?);
                    }
                    None => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            Ok(kept)
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let object = de.deserialize_map(Wanted(keys)).ok()?;
    de.end().ok()?;
    Some(object)
}

/// Options of [`memory`].
#[derive(Debug, Clone, Copy)]
pub struct MemoryOptions {
    /// At most this many points per allocation series (bucket maxima, so the peak survives).
    pub max_points: usize,
    /// Number of time bins of the copy bandwidth series.
    pub bandwidth_bins: usize,
    /// Operations kept in the allocation table (the rest folded).
    pub top_ops: usize,
}

impl Default for MemoryOptions {
    fn default() -> Self {
        MemoryOptions {
            max_points: 512,
            bandwidth_bins: 50,
            top_ops: 20,
        }
    }
}

/// Allocated bytes of one device (one counter track) over time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceMemory {
    pub rank: i64,
    /// The rank by position in the trace it was computed on (not shown: what a merge of rank
    /// files renumbers).
    #[serde(skip)]
    pub rank_index: u32,
    pub pid: Option<i64>,
    /// Device index as the source numbers it (-1: host memory in Kineto).
    pub device: Option<i64>,
    pub samples: usize,
    pub first_ns: Option<Ns>,
    pub last_ns: Option<Ns>,
    pub min_bytes: f64,
    pub peak_bytes: f64,
    pub peak_ns: Option<Ns>,
    pub final_bytes: f64,
    /// Total device memory when the source says.
    pub capacity_bytes: Option<i64>,
    /// `(ts, bytes)`, downsampled to bucket maxima.
    pub series: Vec<(Ns, f64)>,
    /// Allocation events attributed to operations (needs attributes), ranked by bytes allocated.
    pub ops: Vec<AllocRow>,
}

/// Allocations of one operation on one device.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AllocRow {
    /// Innermost framework op containing the event on its thread, `(no operation)` otherwise.
    pub op: String,
    pub allocations: u64,
    pub frees: u64,
    pub allocated_bytes: i64,
    pub freed_bytes: i64,
    /// Largest single allocation.
    pub max_bytes: i64,
}

/// Copies of one direction on one device.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CopyRow {
    pub rank: i64,
    /// The rank by position in the trace it was computed on (not shown: what a merge of rank
    /// files renumbers).
    #[serde(skip)]
    pub rank_index: u32,
    pub device: i64,
    pub direction: CopyDirection,
    pub count: u64,
    pub total_ns: Ns,
    /// `None` when no copy carried a byte count.
    pub bytes: Option<i64>,
    pub mean_bytes: Option<f64>,
    pub max_bytes: Option<i64>,
    /// Sum of bytes / sum of durations, of copies with both.
    pub bandwidth_gb_s: Option<f64>,
    pub max_bandwidth_gb_s: Option<f64>,
    /// `(bin start, GB/s)` over the rank's copy window.
    pub bandwidth_series: Vec<(Ns, f64)>,
}

/// The memory report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryReport {
    pub devices: Vec<DeviceMemory>,
    pub copies: Vec<CopyRow>,
    /// What was missing (no allocation events, no byte counts).
    pub notes: Vec<String>,
}

#[derive(Debug)]
struct CopyEvent {
    start: Ns,
    end: Ns,
    bytes: Option<i64>,
}

/// Computes the memory report: the whole trace read as one batch of [`MemoryStream`].
pub fn memory(trace: &Trace, options: &MemoryOptions) -> MemoryReport {
    let mut stream = MemoryStream::default();
    stream.add(trace);
    stream.finish(trace, options)
}

/// [`memory`] gathered batch by batch, so that `strato memory` on one file or stored profile
/// never holds the trace's events: per "memory allocated" counter track its (time, bytes)
/// samples, per track its `[memory]` instants' (time, bytes, device) and its framework ops'
/// (start, end, name), and per (rank, device, direction) its copies' (start, end, bytes).
#[derive(Debug, Default)]
pub struct MemoryStream {
    series: FxHashMap<u32, Vec<(Ns, f64)>>,
    allocations: FxHashMap<u32, Vec<(Ns, i64, i64)>>,
    ops: FxHashMap<u32, Vec<(Ns, Ns, u32)>>,
    copies: FxHashMap<(u32, i64, CopyDirection), Vec<CopyEvent>>,
    directions: FxHashMap<u32, CopyDirection>,
}

impl MemoryStream {
    /// Reads the events `batch` holds (its tables are the whole trace's so far; its args the
    /// batch's).
    pub fn add(&mut self, batch: &Trace) {
        for c in &batch.counters {
            let track = batch.track(c.track);
            if let TrackKind::Counter { name, .. } = &track.kind {
                if name == "memory allocated" {
                    self.series
                        .entry(c.track.0)
                        .or_default()
                        .push((c.ts, c.value));
                }
            }
        }
        for inst in &batch.instants {
            if batch.str(inst.name) != "[memory]" {
                continue;
            }
            let text = batch.args_text(inst.args);
            let Some(bytes) = arg_i64(text.as_deref(), &["Bytes"]) else {
                continue;
            };
            let device = arg_i64(text.as_deref(), &["Device Id"]).unwrap_or(-1);
            (self.allocations.entry(inst.track.0).or_default()).push((inst.ts, bytes, device));
        }
        for span in &batch.spans {
            if span.level == Level::Backend {
                (self.ops.entry(span.track.0).or_default()).push((
                    span.start,
                    span.end,
                    span.name.0,
                ));
                continue;
            }
            if span.level != Level::DeviceCopy {
                continue;
            }
            let track = batch.track(span.track);
            let TrackKind::DeviceQueue { device, .. } = track.kind else {
                continue;
            };
            let direction = *self
                .directions
                .entry(span.name.0)
                .or_insert_with(|| copy_direction(batch.str(span.name)));
            let bytes = arg_i64(batch.args_text(span.args).as_deref(), &["bytes", "Bytes"]);
            self.copies
                .entry((track.rank.0, device, direction))
                .or_default()
                .push(CopyEvent {
                    start: span.start,
                    end: span.end,
                    bytes,
                });
        }
    }

    /// The report of the trace whose tables `trace` holds (its events are not read).
    pub fn finish(self, trace: &Trace, options: &MemoryOptions) -> MemoryReport {
        let MemoryStream {
            mut series,
            allocations,
            ops,
            copies,
            ..
        } = self;
        let rank_number = |r: RankId| trace.ranks[r.0 as usize].rank.unwrap_or(i64::from(r.0));
        // Allocation events attributed to ops: (rank, pid, device) -> op -> row.
        let ops_by_key = allocation_ops(trace, allocations, ops);
        let mut devices = Vec::new();
        let mut keys: Vec<u32> = series.keys().copied().collect();
        keys.sort_unstable();
        for key in keys {
            let mut points = series.remove(&key).unwrap_or_default();
            points.sort_by_key(|p| p.0);
            let track = &trace.tracks[key as usize];
            let (pid, device) = match &track.kind {
                TrackKind::Counter { pid, device, .. } => (*pid, *device),
                _ => (None, None),
            };
            let mut peak = (f64::MIN, None);
            let mut min = f64::MAX;
            for &(ts, v) in &points {
                if v > peak.0 {
                    peak = (v, Some(ts));
                }
                min = min.min(v);
            }
            let capacity = device.and_then(|d| {
                trace
                    .devices
                    .iter()
                    .find(|x| x.index == d && x.rank.is_none_or(|r| r == track.rank))
                    .and_then(|x| x.total_memory_bytes)
            });
            let mut ops: Vec<AllocRow> = ops_by_key
                .get(&(track.rank.0, pid.unwrap_or(0), device.unwrap_or(-1)))
                .map(|m| m.values().cloned().collect())
                .unwrap_or_default();
            ops.sort_by(|a, b| {
                b.allocated_bytes
                    .cmp(&a.allocated_bytes)
                    .then(a.op.cmp(&b.op))
            });
            let ops = fold_alloc_rows(ops, options.top_ops);
            devices.push(DeviceMemory {
                rank: rank_number(track.rank),
                rank_index: track.rank.0,
                pid,
                device,
                samples: points.len(),
                first_ns: points.first().map(|p| p.0),
                last_ns: points.last().map(|p| p.0),
                min_bytes: if points.is_empty() { 0.0 } else { min },
                peak_bytes: if points.is_empty() { 0.0 } else { peak.0 },
                peak_ns: peak.1,
                final_bytes: points.last().map_or(0.0, |p| p.1),
                capacity_bytes: capacity,
                series: downsample(&points, options.max_points),
                ops,
            });
        }
        // Copies.
        let copy_rows: Vec<CopyRow> = copies
            .into_iter()
            .map(|((rank, device, direction), events)| CopyRow {
                rank_index: rank,
                ..copy_row(
                    rank_number(RankId(rank)),
                    device,
                    direction,
                    &events,
                    options.bandwidth_bins,
                )
            })
            .collect();
        MemoryReport::of_rows(devices, copy_rows)
    }
}

impl MemoryReport {
    /// The report of these devices (in trace order) and copies: the copies sorted by rank,
    /// device and direction, and the notes on what is missing.
    pub fn of_rows(devices: Vec<DeviceMemory>, mut copies: Vec<CopyRow>) -> MemoryReport {
        let mut notes = Vec::new();
        if devices.is_empty() {
            notes.push(
                "no allocation events: the source has no Kineto [memory] events (profile_memory=False) \
                 or its memory tables are not imported"
                    .into(),
            );
        }
        copies.sort_by_key(|r| (r.rank, r.device, r.direction));
        if copies.iter().any(|r| r.count > 0 && r.bytes.is_none()) {
            notes.push("some copies carry no byte count (import with attributes kept)".into());
        }
        MemoryReport {
            devices,
            copies,
            notes,
        }
    }
}

fn copy_row(
    rank: i64,
    device: i64,
    direction: CopyDirection,
    events: &[CopyEvent],
    bins: usize,
) -> CopyRow {
    let count = events.len() as u64;
    let total_ns: Ns = events.iter().map(|e| e.end - e.start).sum();
    let with_bytes: Vec<&CopyEvent> = events.iter().filter(|e| e.bytes.is_some()).collect();
    let bytes: Option<i64> = if with_bytes.is_empty() {
        None
    } else {
        Some(with_bytes.iter().filter_map(|e| e.bytes).sum())
    };
    let timed_bytes: i64 = with_bytes
        .iter()
        .filter(|e| e.end > e.start)
        .filter_map(|e| e.bytes)
        .sum();
    let timed_ns: Ns = with_bytes
        .iter()
        .filter(|e| e.end > e.start)
        .map(|e| e.end - e.start)
        .sum();
    let bandwidth = (timed_ns > 0).then(|| timed_bytes as f64 / timed_ns as f64);
    let max_bw = with_bytes
        .iter()
        .filter(|e| e.end > e.start)
        .filter_map(|e| e.bytes.map(|b| b as f64 / (e.end - e.start) as f64))
        .fold(None, |acc: Option<f64>, v| {
            Some(acc.map_or(v, |a| a.max(v)))
        });
    let mut series = Vec::new();
    if bytes.is_some() && bins > 0 {
        let lo = events.iter().map(|e| e.start).min().unwrap_or(0);
        let hi = events.iter().map(|e| e.end).max().unwrap_or(0);
        let width = ((hi - lo) / bins as i64).max(1);
        let mut acc = vec![0f64; bins];
        for e in &with_bytes {
            let b = (((e.start - lo) / width) as usize).min(bins - 1);
            acc[b] += e.bytes.unwrap_or(0) as f64;
        }
        series = acc
            .into_iter()
            .enumerate()
            .map(|(k, b)| (lo + k as i64 * width, b / width as f64))
            .collect();
    }
    CopyRow {
        rank,
        rank_index: 0,
        device,
        direction,
        count,
        total_ns,
        bytes,
        mean_bytes: bytes.map(|b| b as f64 / with_bytes.len() as f64),
        max_bytes: with_bytes.iter().filter_map(|e| e.bytes).max(),
        bandwidth_gb_s: bandwidth,
        max_bandwidth_gb_s: max_bw,
        bandwidth_series: series,
    }
}

/// Bucket maxima, keeping at most `max_points` points (the global peak is always kept).
fn downsample(points: &[(Ns, f64)], max_points: usize) -> Vec<(Ns, f64)> {
    if points.len() <= max_points || max_points == 0 {
        return points.to_vec();
    }
    let per = points.len().div_ceil(max_points);
    points
        .chunks(per)
        .filter_map(|c| {
            c.iter()
                .copied()
                .fold(None, |acc: Option<(Ns, f64)>, p| match acc {
                    Some(a) if a.1 >= p.1 => Some(a),
                    _ => Some(p),
                })
        })
        .collect()
}

fn fold_alloc_rows(mut rows: Vec<AllocRow>, top: usize) -> Vec<AllocRow> {
    if top == 0 || rows.len() <= top {
        return rows;
    }
    let rest = rows.split_off(top);
    let mut other = AllocRow {
        op: format!("(other {} ops)", rest.len()),
        allocations: 0,
        frees: 0,
        allocated_bytes: 0,
        freed_bytes: 0,
        max_bytes: 0,
    };
    for r in rest {
        other.allocations += r.allocations;
        other.frees += r.frees;
        other.allocated_bytes += r.allocated_bytes;
        other.freed_bytes += r.freed_bytes;
        other.max_bytes = other.max_bytes.max(r.max_bytes);
    }
    rows.push(other);
    rows
}

type OpRows = FxHashMap<(u32, i64, i64), FxHashMap<String, AllocRow>>;

/// `[memory]` instants with a `Bytes` attribute, attributed to the innermost Backend span
/// containing them on their thread.
/// The allocation events (per track: time, bytes, device) attributed to the innermost
/// framework op around them on their track (`ops`: per track, start, end, name).
fn allocation_ops(
    trace: &Trace,
    by_track: FxHashMap<u32, Vec<(Ns, i64, i64)>>,
    mut ops_by_track: FxHashMap<u32, Vec<(Ns, Ns, u32)>>,
) -> OpRows {
    let mut out: OpRows = FxHashMap::default();
    for (track_id, mut events) in by_track {
        let track = &trace.tracks[track_id as usize];
        let pid = track.pid().unwrap_or(0);
        events.sort_by_key(|e| e.0);
        let mut ops = ops_by_track.remove(&track_id).unwrap_or_default();
        ops.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        let mut stack: Vec<(Ns, u32)> = Vec::new();
        let mut next = 0usize;
        for (ts, bytes, device) in events {
            while next < ops.len() && ops[next].0 <= ts {
                while stack.last().is_some_and(|top| top.0 <= ops[next].0) {
                    stack.pop();
                }
                stack.push((ops[next].1, ops[next].2));
                next += 1;
            }
            while stack.last().is_some_and(|top| top.0 < ts) {
                stack.pop();
            }
            let op = stack.last().map_or("(no operation)".to_string(), |top| {
                trace.strings.get(strato_trace::StrId(top.1)).to_string()
            });
            let row = out
                .entry((track.rank.0, pid, device))
                .or_default()
                .entry(op.clone())
                .or_insert_with(|| AllocRow {
                    op,
                    allocations: 0,
                    frees: 0,
                    allocated_bytes: 0,
                    freed_bytes: 0,
                    max_bytes: 0,
                });
            if bytes >= 0 {
                row.allocations += 1;
                row.allocated_bytes += bytes;
                row.max_bytes = row.max_bytes.max(bytes);
            } else {
                row.frees += 1;
                row.freed_bytes += -bytes;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directions_from_names() {
        assert_eq!(
            copy_direction("Memcpy HtoD (Pageable -> Device)"),
            CopyDirection::HostToDevice
        );
        assert_eq!(
            copy_direction("[CUDA memcpy DtoH]"),
            CopyDirection::DeviceToHost
        );
        assert_eq!(
            copy_direction("Memcpy DtoD (Device -> Device)"),
            CopyDirection::DeviceToDevice
        );
        assert_eq!(copy_direction("Memcpy PtoP"), CopyDirection::PeerToPeer);
        assert_eq!(copy_direction("Memcpy"), CopyDirection::Unknown);
    }

    /// The attributes read without building the object give what the built object gives, on
    /// texts a file could hold: nested values, escaped and repeated keys, numbers as floats
    /// and strings, values of other types, texts that are not one JSON object.
    #[test]
    fn integer_attributes_read_as_the_parsed_object_gives_them() {
        fn built(text: &str, keys: &[&str]) -> Option<i64> {
            let value: serde_json::Value = serde_json::from_str(text).ok()?;
            let object = value.as_object()?;
            keys.iter().find_map(|k| {
                object.get(*k).and_then(|v| {
                    v.as_i64()
                        .or_else(|| v.as_f64().map(|f| f as i64))
                        .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
                })
            })
        }
        let texts = [
            r#"{"bytes": 4096}"#,
            r#"{"Bytes": " -8 ", "bytes": 2.9}"#,
            r#"{"x": {"bytes": 1}, "name": "bytes", "bytes": [1, 2]}"#,
            r#"{"by\u0074es": 77, "Bytes": 5}"#,
            r#"{"bytes": 1, "bytes": "two"}"#,
            r#"{"bytes": 1, "bytes": 3}"#,
            r#"{"bytes": 18446744073709551615, "Bytes": 1e300}"#,
            r#"{"bytes": null, "Bytes": true}"#,
            r#"{"bytes": 12} trailing"#,
            r#"[{"bytes": 12}]"#,
            r#"{"bytes": 12"#,
            "bytes",
            "",
        ];
        for text in texts {
            for keys in [
                &["bytes"][..],
                &["Bytes"],
                &["bytes", "Bytes"],
                &["Bytes", "bytes"],
            ] {
                assert_eq!(
                    arg_i64(Some(text), keys),
                    built(text, keys),
                    "{text} {keys:?}"
                );
            }
            assert_eq!(
                args_i64(text, ["bytes", "Bytes"]),
                [built(text, &["bytes"]), built(text, &["Bytes"])],
                "{text}"
            );
        }
    }

    /// Reading some keys keeps what a whole parse has under those keys, and nothing else:
    /// nested objects whole, escaped keys unescaped, a repeated key's last value; `None`
    /// exactly where the text is not one JSON object.
    #[test]
    fn an_objects_chosen_keys_are_the_parsed_objects() {
        let texts = [
            r#"{"grid": [1, 2, 3], "block": [4, 1, 1], "stream": 7, "queued": 0}"#,
            r#"{"ncu": {"flops": 1.5e9, "dram_bytes": 2048, "x": [1]}, "grid": null}"#,
            r#"{"gr\u0069d": [9], "grid": [8], "block": {"nested": {"grid": 1}}}"#,
            r#"{"grid": [8], "gr\u0069d": [9]}"#,
            r#"{"flops": 1, "flops": 2, "unrelated": "grid"}"#,
            r#"{}"#,
            r#"{"grid": [1]} trailing"#,
            r#"[{"grid": [1]}]"#,
            r#"{"grid": [1"#,
            "grid",
            "",
        ];
        let keys = ["grid", "block", "ncu", "flops"];
        for text in texts {
            let parsed = serde_json::from_str::<serde_json::Value>(text).ok();
            let expected = parsed.as_ref().and_then(|v| v.as_object()).map(|o| {
                o.iter()
                    .filter(|(k, _)| keys.contains(&k.as_str()))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect::<serde_json::Map<_, _>>()
            });
            assert_eq!(object_keys(text, &keys), expected, "{text}");
        }
    }

    #[test]
    fn args_and_downsample() {
        assert_eq!(arg_i64(Some("{\"bytes\": 4096}"), &["bytes"]), Some(4096));
        assert_eq!(arg_i64(Some("{\"Bytes\": \"-8\"}"), &["Bytes"]), Some(-8));
        assert_eq!(arg_i64(None, &["bytes"]), None);
        let pts: Vec<(Ns, f64)> = (0..100)
            .map(|i| (i, if i == 57 { 1e9 } else { 1.0 }))
            .collect();
        let d = downsample(&pts, 10);
        assert!(d.len() <= 10);
        assert!(d.contains(&(57, 1e9)));
    }
}
