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

mod stream;
mod summary;

use std::cmp::Reverse;
use std::io::{self, BufWriter, Write};

use prost::encoding::{self, WireType};
use prost::Message;
use proto::{
    CounterDescriptor, DebugAnnotation, InternedData, InternedString, ProcessDescriptor,
    ThreadDescriptor, TracePacket, TrackDescriptor, TrackEvent,
};
use rustc_hash::{FxHashMap, FxHashSet};
use strato_trace::{ArgsText, Level, Ns, RankId, StrId, Trace, TrackId, TrackKind};

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

    /// Writes the descriptors of every model track and of their parents.
    fn tracks(&mut self) -> io::Result<()> {
        let trace = self.trace;
        let multi_rank = trace.ranks.len() > 1;
        let suffix = |rank: RankId| -> String {
            if multi_rank {
                let number = trace
                    .ranks
                    .get(rank.0 as usize)
                    .and_then(|r| r.rank)
                    .unwrap_or(i64::from(rank.0));
                format!(" [rank {number}]")
            } else {
                String::new()
            }
        };

        // A pid gets real process/thread descriptors only when it is a plausible OS pid used
        // by a single rank: Perfetto merges process tracks by pid, which would put two ranks'
        // (or two hosts') processes into one.
        let mut pid_rank: FxHashMap<i64, RankId> = FxHashMap::default();
        let mut shared_pids: FxHashSet<i64> = FxHashSet::default();
        let mut note_pid = |rank: RankId, pid: i64| match pid_rank.insert(pid, rank) {
            Some(previous) if previous != rank => {
                shared_pids.insert(pid);
            }
            _ => {}
        };
        for p in &trace.processes {
            note_pid(p.rank, p.pid);
        }
        for t in &trace.tracks {
            if let Some(pid) = t.pid() {
                note_pid(t.rank, pid);
            }
        }
        let real_pid = |pid: i64| -> Option<i32> {
            i32::try_from(pid)
                .ok()
                .filter(|&p| p > 0 && !shared_pids.contains(&pid))
        };
        let process_info: FxHashMap<(RankId, i64), &strato_trace::Process> = trace
            .processes
            .iter()
            .map(|p| ((p.rank, p.pid), p))
            .collect();

        let mut processes: FxHashMap<(RankId, i64), u64> = FxHashMap::default();
        let mut devices: FxHashMap<(RankId, i64), u64> = FxHashMap::default();
        let mut groups: FxHashMap<(RankId, String), u64> = FxHashMap::default();

        // Processes the source named come first, in source order; those that own no track
        // (Kineto names every GPU as a process, used or not) are left out.
        let owners: FxHashSet<(RankId, i64)> = trace
            .tracks
            .iter()
            .filter_map(|t| t.pid().map(|pid| (t.rank, pid)))
            .collect();
        for p in &trace.processes {
            let key = (p.rank, p.pid);
            if owners.contains(&key) && !processes.contains_key(&key) {
                let uuid = self.process_track(p.rank, p.pid, &process_info, real_pid, suffix)?;
                processes.insert(key, uuid);
            }
        }

        for (index, track) in trace.tracks.iter().enumerate() {
            let rank = track.rank;
            let uuid = self.new_uuid();
            let mut d = TrackDescriptor {
                uuid: Some(uuid),
                ..Default::default()
            };
            let name = match &track.kind {
                TrackKind::Thread { pid, tid } => {
                    let parent = match processes.get(&(rank, *pid)) {
                        Some(&u) => u,
                        None => {
                            let u =
                                self.process_track(rank, *pid, &process_info, real_pid, suffix)?;
                            processes.insert((rank, *pid), u);
                            u
                        }
                    };
                    let name = track
                        .name
                        .clone()
                        .unwrap_or_else(|| format!("thread {tid}"));
                    d.parent_uuid = Some(parent);
                    if let (Some(p), Ok(t)) = (real_pid(*pid), i32::try_from(*tid)) {
                        if t > 0 {
                            d.thread = Some(ThreadDescriptor {
                                pid: Some(p),
                                tid: Some(t),
                                thread_name: Some(name.clone()),
                            });
                        }
                    }
                    name
                }
                TrackKind::DeviceQueue { device, queue } => {
                    let parent = match devices.get(&(rank, *device)) {
                        Some(&u) => u,
                        None => {
                            let u = self.device_track(rank, *device, suffix)?;
                            devices.insert((rank, *device), u);
                            u
                        }
                    };
                    d.parent_uuid = Some(parent);
                    d.sibling_order_rank = Some(clamp_i32(*queue));
                    track
                        .name
                        .clone()
                        .unwrap_or_else(|| format!("stream {queue}"))
                }
                TrackKind::Counter {
                    pid,
                    device,
                    name,
                    unit,
                } => {
                    let mut label = track.name.clone().unwrap_or_else(|| name.clone());
                    if let Some(pid) = pid {
                        let parent = match processes.get(&(rank, *pid)) {
                            Some(&u) => u,
                            None => {
                                let u = self.process_track(
                                    rank,
                                    *pid,
                                    &process_info,
                                    real_pid,
                                    suffix,
                                )?;
                                processes.insert((rank, *pid), u);
                                u
                            }
                        };
                        d.parent_uuid = Some(parent);
                    } else if let Some(device) = device {
                        let parent = match devices.get(&(rank, *device)) {
                            Some(&u) => u,
                            None => {
                                let u = self.device_track(rank, *device, suffix)?;
                                devices.insert((rank, *device), u);
                                u
                            }
                        };
                        d.parent_uuid = Some(parent);
                    } else {
                        label.push_str(&suffix(rank));
                    }
                    d.counter = Some(CounterDescriptor {
                        unit: None,
                        unit_name: (!unit.is_empty()).then(|| unit.clone()),
                    });
                    label
                }
                TrackKind::Custom { group, name } => {
                    let key = (rank, group.clone());
                    let parent = match groups.get(&key) {
                        Some(&u) => u,
                        None => {
                            let u = self.new_uuid();
                            self.descriptor(TrackDescriptor {
                                uuid: Some(u),
                                name: Some(format!("{group}{}", suffix(rank))),
                                ..Default::default()
                            })?;
                            groups.insert(key, u);
                            u
                        }
                    };
                    d.parent_uuid = Some(parent);
                    track.name.clone().unwrap_or_else(|| name.clone())
                }
            };
            d.name = Some(name.clone());
            self.descriptor(d)?;
            debug_assert_eq!(self.track_uuid.len(), index);
            self.track_uuid.push(uuid);
            self.track_name.push(name);
        }
        self.process_uuids = processes;
        self.device_uuids = devices;
        Ok(())
    }

    /// True when `span`'s slices go to a per-level child of its thread.
    fn split(&self, track: TrackId) -> bool {
        self.strata_tracks
            && matches!(
                self.trace.tracks.get(track.0 as usize).map(|t| &t.kind),
                Some(TrackKind::Thread { .. })
            )
    }

    /// The Perfetto track for slices of `track` at `level` on `lane`: the per-level child
    /// track of a thread (and its overflow lanes) when strata tracks are on, else
    /// [`Self::lane_uuid`].
    fn slice_uuid(&mut self, track: TrackId, level: Level, lane: u32) -> io::Result<u64> {
        if !self.split(track) {
            return self.lane_uuid(track, lane);
        }
        let code = level.code();
        let group = match self.level_tracks.get(&(track.0, code)) {
            Some(&u) => u,
            None => {
                let u = self.new_uuid();
                let parent = self.track_uuid[track.0 as usize];
                self.descriptor(TrackDescriptor {
                    uuid: Some(u),
                    parent_uuid: Some(parent),
                    name: Some(level.as_str().to_owned()),
                    sibling_order_rank: Some(i32::from(code)),
                    ..Default::default()
                })?;
                self.level_tracks.insert((track.0, code), u);
                u
            }
        };
        if lane == 0 {
            return Ok(group);
        }
        if let Some(&u) = self.level_lanes.get(&(track.0, code, lane)) {
            return Ok(u);
        }
        let u = self.new_uuid();
        self.descriptor(TrackDescriptor {
            uuid: Some(u),
            parent_uuid: Some(group),
            name: Some(format!("{} (overlap {lane})", level.as_str())),
            sibling_order_rank: Some(clamp_i32(i64::from(lane))),
            ..Default::default()
        })?;
        self.level_lanes.insert((track.0, code, lane), u);
        Ok(u)
    }

    /// The parent track of an extra track or counter (created top-level when the owner has
    /// no track).
    fn owner_uuid(&mut self, rank: RankId, owner: &Owner) -> Option<u64> {
        match owner {
            Owner::Process(pid) => self.process_uuids.get(&(rank, *pid)).copied(),
            Owner::Device(device) => self.device_uuids.get(&(rank, *device)).copied(),
            Owner::None => None,
        }
    }

    fn extra_counters(&mut self, counters: &[ExtraCounter]) -> io::Result<()> {
        for c in counters {
            let uuid = self.new_uuid();
            let parent = self.owner_uuid(c.rank, &c.owner);
            self.descriptor(TrackDescriptor {
                uuid: Some(uuid),
                parent_uuid: parent,
                name: Some(c.name.clone()),
                counter: Some(CounterDescriptor {
                    unit: None,
                    unit_name: (!c.unit.is_empty()).then(|| c.unit.clone()),
                }),
                ..Default::default()
            })?;
            for &(ts, value) in &c.points {
                self.emit(TracePacket {
                    timestamp: Some(self.timestamp(ts)),
                    track_event: Some(TrackEvent {
                        r#type: Some(proto::TYPE_COUNTER),
                        track_uuid: Some(uuid),
                        double_counter_value: Some(value),
                        ..Default::default()
                    }),
                    ..Default::default()
                })?;
            }
        }
        Ok(())
    }

    fn extra_tracks(&mut self, tracks: &[ExtraTrack]) -> io::Result<()> {
        for t in tracks {
            let uuid = self.new_uuid();
            let parent = self.owner_uuid(t.rank, &t.owner);
            self.descriptor(TrackDescriptor {
                uuid: Some(uuid),
                parent_uuid: parent,
                name: Some(t.name.clone()),
                ..Default::default()
            })?;
            let mut spans: Vec<&ExtraSpan> = t.spans.iter().collect();
            spans.sort_by_key(|s| (s.start, Reverse(s.end)));
            let mut last_end = Ns::MIN;
            for s in spans {
                let start = s.start.max(last_end);
                if s.end < start {
                    continue;
                }
                let mut interned = InternedData::default();
                // Extra names are not in the trace's string table: intern them by text.
                let name_iid = self.intern_text(&s.name, &mut interned);
                let mut debug_annotations = Vec::new();
                for (k, v) in &s.args {
                    let mut a = self.annotation(k, &mut interned);
                    a.string_value = Some(v.clone());
                    debug_annotations.push(a);
                }
                self.emit(TracePacket {
                    timestamp: Some(self.timestamp(start)),
                    track_event: Some(TrackEvent {
                        r#type: Some(proto::TYPE_SLICE_BEGIN),
                        track_uuid: Some(uuid),
                        name_iid: Some(name_iid),
                        debug_annotations,
                        ..Default::default()
                    }),
                    interned_data: non_empty(interned),
                    ..Default::default()
                })?;
                self.slice_end(uuid, s.end)?;
                last_end = s.end;
            }
        }
        Ok(())
    }

    /// Interns a name that is not in the trace's string table.
    fn intern_text(&mut self, text: &str, interned: &mut InternedData) -> u64 {
        let iid = self.next_name_iid;
        self.next_name_iid += 1;
        interned.event_names.push(InternedString {
            iid: Some(iid),
            name: Some(text.to_owned()),
        });
        iid
    }

    fn process_track(
        &mut self,
        rank: RankId,
        pid: i64,
        info: &FxHashMap<(RankId, i64), &strato_trace::Process>,
        real_pid: impl Fn(i64) -> Option<i32>,
        suffix: impl Fn(RankId) -> String,
    ) -> io::Result<u64> {
        let uuid = self.new_uuid();
        let process = info.get(&(rank, pid));
        let given = process.and_then(|p| p.name.clone());
        let labels: Vec<String> = process.and_then(|p| p.labels.clone()).into_iter().collect();
        let mut d = TrackDescriptor {
            uuid: Some(uuid),
            ..Default::default()
        };
        match real_pid(pid) {
            Some(p) => {
                let name = given.map(|n| format!("{n}{}", suffix(rank)));
                d.process = Some(ProcessDescriptor {
                    pid: Some(p),
                    process_name: name.clone().or_else(|| {
                        let s = suffix(rank);
                        (!s.is_empty()).then(|| format!("process {pid}{s}"))
                    }),
                    process_labels: labels,
                });
                d.name = name;
            }
            None => {
                let name = match given {
                    Some(n) => format!("{n} (pid {pid}){}", suffix(rank)),
                    None => format!("process {pid}{}", suffix(rank)),
                };
                d.name = Some(name);
                d.description = labels.into_iter().next();
            }
        }
        self.descriptor(d)?;
        Ok(uuid)
    }

    fn device_track(
        &mut self,
        rank: RankId,
        device: i64,
        suffix: impl Fn(RankId) -> String,
    ) -> io::Result<u64> {
        let uuid = self.new_uuid();
        let name = format!(
            "{}{}",
            super::device_label(self.trace, rank, device),
            suffix(rank)
        );
        self.descriptor(TrackDescriptor {
            uuid: Some(uuid),
            name: Some(name),
            // Queues in queue-number order.
            child_ordering: Some(proto::CHILD_ORDERING_EXPLICIT),
            ..Default::default()
        })?;
        Ok(uuid)
    }

    /// The Perfetto track for slices/instants of `track` on `lane` (0 = the track itself,
    /// except for counter tracks, which cannot carry slices).
    fn lane_uuid(&mut self, track: TrackId, lane: u32) -> io::Result<u64> {
        let index = track.0 as usize;
        let is_counter = matches!(
            self.trace.tracks.get(index).map(|t| &t.kind),
            Some(TrackKind::Counter { .. })
        );
        if lane == 0 && !is_counter {
            return Ok(self.track_uuid[index]);
        }
        if let Some(&uuid) = self.extra_tracks.get(&(track.0, lane)) {
            return Ok(uuid);
        }
        let uuid = self.new_uuid();
        let base = &self.track_name[index];
        let name = if lane == 0 {
            format!("{base} (events)")
        } else {
            format!("{base} (overlap {lane})")
        };
        let parent = self.track_uuid[index];
        self.descriptor(TrackDescriptor {
            uuid: Some(uuid),
            parent_uuid: Some(parent),
            name: Some(name),
            sibling_order_rank: Some(clamp_i32(i64::from(lane))),
            ..Default::default()
        })?;
        self.extra_tracks.insert((track.0, lane), uuid);
        Ok(uuid)
    }

    /// The counter track for samples of `track`.
    fn counter_uuid(&mut self, track: TrackId) -> io::Result<u64> {
        let index = track.0 as usize;
        if matches!(
            self.trace.tracks.get(index).map(|t| &t.kind),
            Some(TrackKind::Counter { .. })
        ) {
            return Ok(self.track_uuid[index]);
        }
        if let Some(&uuid) = self.extra_tracks.get(&(track.0, COUNTER_LANE)) {
            return Ok(uuid);
        }
        let uuid = self.new_uuid();
        let name = format!("{} (counter)", self.track_name[index]);
        let parent = self.track_uuid[index];
        self.descriptor(TrackDescriptor {
            uuid: Some(uuid),
            parent_uuid: Some(parent),
            name: Some(name),
            counter: Some(CounterDescriptor::default()),
            ..Default::default()
        })?;
        self.extra_tracks.insert((track.0, COUNTER_LANE), uuid);
        Ok(uuid)
    }

    fn intern_name(&mut self, id: StrId, interned: &mut InternedData) -> u64 {
        let slot = id.0 as usize;
        if slot >= self.name_iid.len() {
            self.name_iid.resize(slot + 1, 0);
        }
        if self.name_iid[slot] == 0 {
            self.name_iid[slot] = self.next_name_iid;
            self.next_name_iid += 1;
            interned.event_names.push(InternedString {
                iid: Some(self.name_iid[slot]),
                name: Some(self.trace.str(id).to_owned()),
            });
        }
        self.name_iid[slot]
    }

    fn intern_category(&mut self, id: StrId, interned: &mut InternedData) -> Vec<u64> {
        if id == StrId::EMPTY {
            return Vec::new();
        }
        let slot = id.0 as usize;
        if slot >= self.category_iid.len() {
            self.category_iid.resize(slot + 1, 0);
        }
        if self.category_iid[slot] == 0 {
            self.category_iid[slot] = self.next_category_iid;
            self.next_category_iid += 1;
            interned.event_categories.push(InternedString {
                iid: Some(self.category_iid[slot]),
                name: Some(self.trace.str(id).to_owned()),
            });
        }
        vec![self.category_iid[slot]]
    }

    fn annotation(&mut self, key: &str, interned: &mut InternedData) -> DebugAnnotation {
        let iid = match self.annotation_iid.get(key) {
            Some(&iid) => iid,
            None => {
                let iid = self.annotation_iid.len() as u64 + 1;
                self.annotation_iid.insert(key.to_owned(), iid);
                interned.debug_annotation_names.push(InternedString {
                    iid: Some(iid),
                    name: Some(key.to_owned()),
                });
                iid
            }
        };
        DebugAnnotation {
            name_iid: Some(iid),
            ..Default::default()
        }
    }

    /// Level, correlation, external id and the args object's top-level entries.
    fn annotations(
        &mut self,
        level: Level,
        correlation: Option<u64>,
        external_id: Option<u64>,
        args: Option<&str>,
        interned: &mut InternedData,
    ) -> Vec<DebugAnnotation> {
        let mut out = Vec::new();
        let mut a = self.annotation("level", interned);
        a.string_value = Some(level.as_str().to_owned());
        out.push(a);
        if let Some(c) = correlation {
            let mut a = self.annotation("correlation", interned);
            a.uint_value = Some(c);
            out.push(a);
        }
        if let Some(e) = external_id {
            let mut a = self.annotation("External id", interned);
            a.uint_value = Some(e);
            out.push(a);
        }
        let Some(text) = args else {
            return out;
        };
        match serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(text) {
            Ok(map) => {
                for (key, value) in map {
                    // The typed fields above already carry these.
                    if (key == "correlation" && correlation.is_some())
                        || (key == "External id" && external_id.is_some())
                        || key == "level"
                    {
                        continue;
                    }
                    let mut a = self.annotation(&key, interned);
                    set_json_value(&mut a, value);
                    out.push(a);
                }
            }
            Err(_) => {
                let mut a = self.annotation("args", interned);
                a.string_value = Some(text.to_owned());
                out.push(a);
            }
        }
        out
    }

    /// Numbers the flows whose two ends are bound to different spans (source flow ids repeat
    /// across ranks, so afresh: the flow's index + 1) and keeps, per span, the ids its begin
    /// event carries.
    fn bind_flows(&mut self, flows: &[strato_trace::Flow]) {
        self.flows.clear();
        for (i, flow) in flows.iter().enumerate() {
            let from = flow.from.as_ref().and_then(|e| e.span);
            let to = flow.to.as_ref().and_then(|e| e.span);
            if let (Some(a), Some(b)) = (from, to) {
                if a != b {
                    let id = i as u64 + 1;
                    self.flows.push((a.0, id));
                    self.flows.push((b.0, id));
                }
            }
        }
        // Stable: a span's ids stay in flow order.
        self.flows.sort_by_key(|&(span, _)| span);
    }

    /// The flow ids of span `index`'s begin event.
    fn flow_ids(&self, index: u32) -> Vec<u64> {
        let from = self.flows.partition_point(|&(span, _)| span < index);
        self.flows[from..]
            .iter()
            .take_while(|&&(span, _)| span == index)
            .map(|&(_, id)| id)
            .collect()
    }

    /// Per model track: whether its spans go to one child track per stratum.
    fn split_tracks(&self) -> Vec<bool> {
        (0..self.trace.tracks.len())
            .map(|t| self.split(TrackId(t as u32)))
            .collect()
    }

    /// Writes the slices, given in [`Slice::key`] order: each on its track (per level with
    /// strata tracks) or on an overflow lane when it overlaps an open slice without nesting.
    fn slices<'a>(
        &mut self,
        sorted: impl Iterator<Item = io::Result<Slice<'a>>>,
    ) -> io::Result<()> {
        // Per lane, the stack of open spans' ends on the current model track.
        let mut lanes: Vec<Vec<Ns>> = Vec::new();
        let mut current: Option<(TrackId, Level)> = None;
        for span in sorted {
            let span = span?;
            let key = (span.track, span.group);
            if current != Some(key) {
                if let Some(track) = current {
                    self.close_lanes(track, &mut lanes)?;
                }
                current = Some(key);
            }
            let mut chosen = None;
            for (lane, stack) in lanes.iter_mut().enumerate() {
                while let Some(&end) = stack.last() {
                    if end > span.start {
                        break;
                    }
                    stack.pop();
                    let uuid = self.slice_uuid(span.track, key.1, lane as u32)?;
                    self.slice_end(uuid, end)?;
                }
                if stack.last().is_none_or(|&end| end >= span.end) {
                    stack.push(span.end);
                    chosen = Some(lane);
                    break;
                }
            }
            let lane = match chosen {
                Some(lane) => lane,
                None => {
                    lanes.push(vec![span.end]);
                    lanes.len() - 1
                }
            };
            self.slice_begin(&span, lane as u32)?;
        }
        if let Some(track) = current {
            self.close_lanes(track, &mut lanes)?;
        }
        Ok(())
    }

    /// Ends every open slice of `track` (at one level) and forgets its lanes.
    fn close_lanes(
        &mut self,
        (track, level): (TrackId, Level),
        lanes: &mut Vec<Vec<Ns>>,
    ) -> io::Result<()> {
        for (lane, stack) in lanes.iter_mut().enumerate() {
            while let Some(end) = stack.pop() {
                let uuid = self.slice_uuid(track, level, lane as u32)?;
                self.slice_end(uuid, end)?;
            }
        }
        lanes.clear();
        Ok(())
    }

    fn slice_begin(&mut self, span: &Slice<'_>, lane: u32) -> io::Result<()> {
        let uuid = self.slice_uuid(span.track, span.level, lane)?;
        let mut interned = InternedData::default();
        let name_iid = self.intern_name(span.name, &mut interned);
        let category_iids = self.intern_category(span.category, &mut interned);
        let debug_annotations = self.annotations(
            span.level,
            span.correlation,
            span.external_id,
            span.args.as_ref().map(Args::as_str),
            &mut interned,
        );
        let flow_ids = self.flow_ids(span.index);
        let packet = TracePacket {
            timestamp: Some(self.timestamp(span.start)),
            track_event: Some(TrackEvent {
                r#type: Some(proto::TYPE_SLICE_BEGIN),
                track_uuid: Some(uuid),
                name_iid: Some(name_iid),
                category_iids,
                flow_ids,
                debug_annotations,
                ..Default::default()
            }),
            interned_data: non_empty(interned),
            ..Default::default()
        };
        self.emit(packet)
    }

    fn slice_end(&mut self, uuid: u64, ts: Ns) -> io::Result<()> {
        let packet = TracePacket {
            timestamp: Some(self.timestamp(ts)),
            track_event: Some(TrackEvent {
                r#type: Some(proto::TYPE_SLICE_END),
                track_uuid: Some(uuid),
                ..Default::default()
            }),
            ..Default::default()
        };
        self.emit(packet)
    }

    fn instants<'a>(
        &mut self,
        instants: impl Iterator<Item = io::Result<InstantEvent<'a>>>,
    ) -> io::Result<()> {
        for instant in instants {
            let instant = instant?;
            let uuid = self.lane_uuid(instant.track, 0)?;
            let mut interned = InternedData::default();
            let name_iid = self.intern_name(instant.name, &mut interned);
            let category_iids = self.intern_category(instant.category, &mut interned);
            let debug_annotations = self.annotations(
                instant.level,
                None,
                None,
                instant.args.as_ref().map(Args::as_str),
                &mut interned,
            );
            let packet = TracePacket {
                timestamp: Some(self.timestamp(instant.ts)),
                track_event: Some(TrackEvent {
                    r#type: Some(proto::TYPE_INSTANT),
                    track_uuid: Some(uuid),
                    name_iid: Some(name_iid),
                    category_iids,
                    debug_annotations,
                    ..Default::default()
                }),
                interned_data: non_empty(interned),
                ..Default::default()
            };
            self.emit(packet)?;
        }
        Ok(())
    }

    /// Counter samples: (track, time, value).
    fn counters(
        &mut self,
        samples: impl Iterator<Item = io::Result<(TrackId, Ns, f64)>>,
    ) -> io::Result<()> {
        for sample in samples {
            let (track, ts, value) = sample?;
            let uuid = self.counter_uuid(track)?;
            let packet = TracePacket {
                timestamp: Some(self.timestamp(ts)),
                track_event: Some(TrackEvent {
                    r#type: Some(proto::TYPE_COUNTER),
                    track_uuid: Some(uuid),
                    double_counter_value: Some(value),
                    ..Default::default()
                }),
                ..Default::default()
            };
            self.emit(packet)?;
        }
        Ok(())
    }

    /// What the analyses add: their counters and tracks.
    fn extras(&mut self, extras: &Extras) -> io::Result<()> {
        self.extra_counters(&extras.counters)?;
        self.extra_tracks(&extras.tracks)
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
