//! Perfetto exporter: writes a [`Trace`] as a Perfetto protobuf trace (`Trace { repeated
//! TracePacket packet = 1 }`) that ui.perfetto.dev and trace_processor open, and reads one back
//! into a [`PerfettoSummary`] for tests ([`summary`], which reads only the messages, not the
//! writer's state).
//!
//! Layout (see `docs/export.md`):
//! - one track per (rank, pid) process (with a `ProcessDescriptor` when the pid is a real,
//!   rank-unique OS pid), one per (rank, device) (`"GPU 0"` or the device name), and one per
//!   custom-track group;
//! - a thread track per CPU thread under its process (with a `ThreadDescriptor` when the pid
//!   has one), a track per device queue (`"stream 7"`) under its device, counter tracks under
//!   their process or device, custom tracks under their group;
//! - spans as slice begin/end pairs. Slices on one Perfetto track must nest, and imported data
//!   can hold spans that overlap without nesting: those go to overflow child tracks
//!   (`"<track> (overlap N)"`), chosen greedily in (start, longer first) order;
//! - instants as `TYPE_INSTANT`, counter samples as `TYPE_COUNTER` with
//!   `double_counter_value`, and each flow whose two ends are bound to spans as one `flow_ids`
//!   entry on both spans' begin events;
//! - names, categories and annotation keys interned on one packet sequence; level,
//!   correlation, external id and the span's args as debug annotations.
//!
//! With [`write_with`] and [`Extras`] the export also carries what the analyses know (see
//! `docs/export.md`, "What the analyses add"): each CPU thread's spans split into one child
//! track per stratum (Operation, Python, Backend, AcceleratorApi, ...), counters computed by
//! analyses (device busy fraction) under their device or process, and spans computed by
//! analyses (iterations) on named tracks. The exporter computes none of it: the caller passes
//! the results in.
//!
//! Output is streamed packet by packet through a `BufWriter`; memory is one sort index over
//! the spans plus the flow ends, never the encoded trace. [`PerfettoStream`] writes the same
//! file from a streamed import's batches, without the spans in memory (`stream.rs`: an
//! external sort of the slices).
//!
//! Files: this one the public API and the writer's state and packet output; `tracks.rs` the
//! track descriptors; `events.rs` interning, slices, flows, instants and counter samples;
//! `stream.rs` the streamed export; `summary.rs` the reader for tests.

mod events;
mod stream;
mod summary;
mod tracks;

use std::cmp::Reverse;
use std::io::{self, BufWriter, Write};

use prost::encoding::{self, WireType};
use prost::Message;
use proto::{DebugAnnotation, InternedData, TracePacket, TrackDescriptor};
use rustc_hash::FxHashMap;
use strato_trace::{ArgsText, Level, Ns, RankId, StrId, Trace, TrackId};

pub use super::perfetto_proto as proto;
pub use stream::{PerfettoStream, RUN_BYTES};
pub use summary::{summarize, PerfettoSummary};

/// The one packet sequence every packet is written on.
const SEQUENCE_ID: u32 = 1;

/// Writes `trace` as a Perfetto protobuf trace to `out`.
///
/// Timestamps are the trace's nanoseconds, written on the default trace clock (BOOTTIME, no
/// `ClockSnapshot`), so trace_processor shows them unshifted. Perfetto timestamps are
/// unsigned: a trace with negative times is shifted so that its earliest time is 0.
pub fn write<W: Write>(trace: &Trace, out: W) -> io::Result<()> {
    write_with(trace, &Extras::default(), out)
}

/// Who an extra track belongs to: it is drawn under that process's or device's track.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    Process(i64),
    Device(i64),
    /// A top-level track.
    None,
}

/// A counter computed by an analysis (e.g. device busy fraction per 10 ms).
#[derive(Debug, Clone, PartialEq)]
pub struct ExtraCounter {
    pub rank: RankId,
    pub owner: Owner,
    pub name: String,
    pub unit: String,
    /// `(time, value)` in time order; a value holds until the next sample.
    pub points: Vec<(Ns, f64)>,
}

/// A span computed by an analysis.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtraSpan {
    pub start: Ns,
    pub end: Ns,
    pub name: String,
    /// Shown as the slice's arguments.
    pub args: Vec<(String, String)>,
}

/// A track of spans computed by an analysis (e.g. the iterations of a device's loop). Spans
/// are drawn in start order; one that starts before the previous one ended is clipped.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtraTrack {
    pub rank: RankId,
    pub owner: Owner,
    pub name: String,
    pub spans: Vec<ExtraSpan>,
}

/// What the analyses add to an export. The default adds nothing: [`write`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extras {
    /// Put each CPU thread's spans on one child track per stratum (level), in stack order.
    pub strata_tracks: bool,
    pub counters: Vec<ExtraCounter>,
    pub tracks: Vec<ExtraTrack>,
}

/// [`write`] plus what the analyses know ([`Extras`]).
pub fn write_with<W: Write>(trace: &Trace, extras: &Extras, out: W) -> io::Result<()> {
    let min = trace.time_span().map(|(lo, _)| lo);
    let mut writer = Writer::new(trace, min, out);
    writer.strata_tracks = extras.strata_tracks;
    writer.tracks()?;
    writer.bind_flows(&trace.flows);
    let split = writer.split_tracks();
    let mut order: Vec<u32> = (0..trace.spans.len() as u32).collect();
    order.sort_unstable_by_key(|&i| {
        let s = &trace.spans[i as usize];
        (s.track, group_level(&split, s), s.start, Reverse(s.end), i)
    });
    writer.slices(order.iter().map(|&i| {
        let s = &trace.spans[i as usize];
        Ok(Slice::of(
            s,
            i,
            group_level(&split, s),
            trace.args_text(s.args),
        ))
    }))?;
    writer.instants(
        trace
            .instants
            .iter()
            .map(|i| Ok(InstantEvent::of(i, trace.args_text(i.args)))),
    )?;
    writer.counters(trace.counters.iter().map(|c| Ok((c.track, c.ts, c.value))))?;
    writer.extras(extras)?;
    writer.out.flush()
}

/// The level a span is laid out at on its track: its own level on a thread split into one
/// track per stratum (`split[track]`), else one level for the whole track.
fn group_level(split: &[bool], span: &strato_trace::Span) -> Level {
    if split.get(span.track.0 as usize).copied().unwrap_or(false) {
        span.level
    } else {
        Level::Phase
    }
}

/// What a slice's begin and end events are written from: a span of the trace ([`write_with`])
/// or one read back from a streamed export's spill ([`PerfettoStream`]), with its place in
/// the order slices are laid out in: (track, group level, start, longer first, span index).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Slice<'a> {
    track: TrackId,
    group: Level,
    start: Ns,
    end: Ns,
    /// The span's index in the trace (what flows name).
    index: u32,
    name: StrId,
    category: StrId,
    level: Level,
    correlation: Option<u64>,
    external_id: Option<u64>,
    args: Option<Args<'a>>,
}

impl<'a> Slice<'a> {
    fn of(span: &strato_trace::Span, index: u32, group: Level, args: Option<ArgsText<'a>>) -> Self {
        Slice {
            track: span.track,
            group,
            start: span.start,
            end: span.end,
            index,
            name: span.name,
            category: span.category,
            level: span.level,
            correlation: span.correlation.get(),
            external_id: span.external_id.get(),
            args: args.map(Args::Table),
        }
    }

    /// The order slices are laid out in.
    fn key(&self) -> (TrackId, Level, Ns, Reverse<Ns>, u32) {
        (
            self.track,
            self.group,
            self.start,
            Reverse(self.end),
            self.index,
        )
    }
}

/// An event's args text: read from the trace's table, or owned (read back from a spill).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Args<'a> {
    Table(ArgsText<'a>),
    Owned(String),
}

impl Args<'_> {
    fn as_str(&self) -> &str {
        match self {
            Args::Table(text) => text,
            Args::Owned(text) => text,
        }
    }
}

/// What an instant event is written from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InstantEvent<'a> {
    track: TrackId,
    ts: Ns,
    name: StrId,
    category: StrId,
    level: Level,
    args: Option<Args<'a>>,
}

impl<'a> InstantEvent<'a> {
    fn of(instant: &strato_trace::Instant, args: Option<ArgsText<'a>>) -> Self {
        InstantEvent {
            track: instant.track,
            ts: instant.ts,
            name: instant.name,
            category: instant.category,
            level: instant.level,
            args: args.map(Args::Table),
        }
    }
}

/// Streams packets and owns track uuids and interning state.
struct Writer<'t, W: Write> {
    trace: &'t Trace,
    out: BufWriter<W>,
    buf: Vec<u8>,
    first_packet: bool,
    /// Added to every timestamp (non-zero only for traces with negative times).
    shift: Ns,
    next_uuid: u64,
    /// Uuid of each model track (lane 0 for slices).
    track_uuid: Vec<u64>,
    /// Display name of each model track (for naming overflow tracks).
    track_name: Vec<String>,
    /// Extra tracks created on demand: overflow lanes `(track, lane)`; lane `u32::MAX` is the
    /// counter track of a non-counter model track.
    extra_tracks: FxHashMap<(u32, u32), u64>,
    name_iid: Vec<u64>,
    category_iid: Vec<u64>,
    next_name_iid: u64,
    next_category_iid: u64,
    annotation_iid: FxHashMap<String, u64>,
    /// Perfetto flow ids to put on each span's begin event: (span index, flow id), sorted
    /// (16 bytes an end, no map of vectors).
    flows: Vec<(u32, u64)>,
    /// Split thread spans into per-level child tracks.
    strata_tracks: bool,
    /// Per-level child track of a thread: (track, level code) -> uuid.
    level_tracks: FxHashMap<(u32, u8), u64>,
    /// Overflow lanes of per-level tracks: (track, level code, lane) -> uuid.
    level_lanes: FxHashMap<(u32, u8, u32), u64>,
    process_uuids: FxHashMap<(RankId, i64), u64>,
    device_uuids: FxHashMap<(RankId, i64), u64>,
}

const COUNTER_LANE: u32 = u32::MAX;

impl<'t, W: Write> Writer<'t, W> {
    /// A writer of `trace`'s tables; `min` is the earliest time of its events.
    fn new(trace: &'t Trace, min: Option<Ns>, out: W) -> Self {
        let min = min.unwrap_or(0);
        let strings = trace.strings.len();
        Writer {
            trace,
            out: BufWriter::with_capacity(1 << 16, out),
            buf: Vec::with_capacity(256),
            first_packet: true,
            shift: if min < 0 { min.saturating_neg() } else { 0 },
            next_uuid: 1,
            track_uuid: Vec::with_capacity(trace.tracks.len()),
            track_name: Vec::with_capacity(trace.tracks.len()),
            extra_tracks: FxHashMap::default(),
            name_iid: vec![0; strings],
            category_iid: vec![0; strings],
            next_name_iid: 1,
            next_category_iid: 1,
            annotation_iid: FxHashMap::default(),
            flows: Vec::new(),
            strata_tracks: false,
            level_tracks: FxHashMap::default(),
            level_lanes: FxHashMap::default(),
            process_uuids: FxHashMap::default(),
            device_uuids: FxHashMap::default(),
        }
    }

    /// Writes one `Trace.packet` field: tag, length, message.
    fn emit(&mut self, mut packet: TracePacket) -> io::Result<()> {
        packet.trusted_packet_sequence_id = Some(SEQUENCE_ID);
        if self.first_packet {
            packet.sequence_flags =
                Some(proto::SEQ_INCREMENTAL_STATE_CLEARED | proto::SEQ_NEEDS_INCREMENTAL_STATE);
            packet.first_packet_on_sequence = Some(true);
            self.first_packet = false;
        } else {
            packet.sequence_flags = Some(proto::SEQ_NEEDS_INCREMENTAL_STATE);
        }
        self.buf.clear();
        encoding::encode_key(1, WireType::LengthDelimited, &mut self.buf);
        packet
            .encode_length_delimited(&mut self.buf)
            .map_err(io::Error::other)?;
        self.out.write_all(&self.buf)
    }

    fn timestamp(&self, ts: Ns) -> u64 {
        ts.saturating_add(self.shift).max(0) as u64
    }

    fn new_uuid(&mut self) -> u64 {
        let uuid = self.next_uuid;
        self.next_uuid += 1;
        uuid
    }

    fn descriptor(&mut self, descriptor: TrackDescriptor) -> io::Result<()> {
        self.emit(TracePacket {
            track_descriptor: Some(descriptor),
            ..Default::default()
        })
    }
}

fn non_empty(interned: InternedData) -> Option<InternedData> {
    let empty = interned.event_names.is_empty()
        && interned.event_categories.is_empty()
        && interned.debug_annotation_names.is_empty();
    (!empty).then_some(interned)
}

fn set_json_value(a: &mut DebugAnnotation, value: serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Bool(b) => a.bool_value = Some(b),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                a.int_value = Some(i);
            } else if let Some(u) = n.as_u64() {
                a.uint_value = Some(u);
            } else {
                a.double_value = n.as_f64();
            }
        }
        Value::String(s) => a.string_value = Some(s),
        other => a.legacy_json_value = Some(other.to_string()),
    }
}

fn clamp_i32(v: i64) -> i32 {
    v.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
}
