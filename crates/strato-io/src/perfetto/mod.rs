//! Perfetto protobuf trace importer (`*.pftrace`, `*.perfetto-trace`): the TrackEvent subset
//! of Perfetto's trace format, as rocprofv3 (`--output-format pftrace`), the Perfetto SDK and
//! stratoscope's own exporter write it. Schema: `protos/perfetto/trace/` of google/perfetto
//! (`trace.proto`, `trace_packet.proto`, `track_event/*.proto`, `clock_snapshot.proto`,
//! `trace_packet_defaults.proto`, `interned_data/interned_data.proto`).
//!
//! This module owns the reading side: the packet stream, the per-sequence state Perfetto
//! defines (interned names, packet defaults, sequence-scoped and incremental clocks) and the
//! mapping to the trace model (see `docs/formats/perfetto.md`). The message structs it shares
//! with the exporter live in [`crate::export::perfetto_proto`]; the packet-level ones only the
//! reader needs (clock snapshots, packet defaults, the track descriptor's `static_name`) are
//! here ([`wire`]).
//!
//! Mapping:
//! - the file is one [`Rank`] (format [`SourceFormat::Perfetto`]); `ProcessDescriptor`s are
//!   [`Process`]es;
//! - slices (`TYPE_SLICE_BEGIN`/`TYPE_SLICE_END`, paired per track in file order) are spans,
//!   `TYPE_INSTANT` events instants, `TYPE_COUNTER` events counter samples;
//! - tracks: a `ThreadDescriptor` makes a `Thread { pid, tid }`; a `CounterDescriptor` a
//!   `Counter`; a track named as a device queue (rocprofv3's `COMPUTE AGENT [0] STREAM [1]`,
//!   `COMPUTE GPU [0] QUEUE [2]`, `COPY to AGENT [1] ...`, or a child of a track named `GPU 0`
//!   or `... (device 0)` as stratoscope's exporter writes them) a `DeviceQueue`; rocprofv3's
//!   `THREAD 1 (tid)` tracks a `Thread`; a nameless or derived child of a thread or queue track
//!   (the exporter's overlap and per-level lanes) belongs to its parent; anything else is
//!   `Custom { group: parent's name, name }`;
//! - levels: a `level` debug annotation (stratoscope's exporter) wins, then the level map's
//!   `perfetto` rule for the event's first category (rocprofv3's `hip_api`, `kernel_dispatch`,
//!   `memory_copy`, ...), then `device_kernel` on device queues and `other` elsewhere;
//! - correlation from a `correlation` or `corr_id` annotation, external id from `External id`;
//!   the other annotations become the args object when `keep_args` is on;
//! - flows (`flow_ids`, `terminating_flow_ids`): the first two slices carrying an id are its
//!   ends.
//! - devices: a track named `<name> (device n)` (the exporter's device tracks) names device n.
//!
//! Timestamps: a packet's clock is its `timestamp_clock_id`, else the sequence's default, else
//! BOOTTIME. Sequence-scoped clocks (ids 64..127, what the Perfetto SDK writes with incremental
//! timestamps) are converted through the sequence's last `ClockSnapshot`, incremental ones by
//! summing deltas; other builtin clocks through the last snapshot that relates them to BOOTTIME.
//!
//! Streaming: packets are read one at a time from the input (a packet's bytes, then decoded);
//! what is kept is what the trace keeps plus the open slices.

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::Path;

use prost::Message;
use serde_json::{Map, Value};
use strato_trace::{
    CounterSample, Flow, FlowEnd, Instant, Level, Ns, Process, Rank, RankId, SourceFormat, Span,
    SpanId, StrId, Trace, TrackId, TrackIndexHandle, TrackKind,
};

use crate::export::perfetto_proto as proto;
use crate::{input, input::Input, Error, ErrorKind, ImportOptions, Result};

/// Packet messages only the reader needs, with Perfetto's field numbers.
pub mod wire {
    use crate::export::perfetto_proto as proto;

    /// `TracePacket`: the exporter's subset plus clock snapshots and packet defaults.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TracePacket {
        #[prost(uint64, optional, tag = "8")]
        pub timestamp: Option<u64>,
        #[prost(uint32, optional, tag = "58")]
        pub timestamp_clock_id: Option<u32>,
        #[prost(message, optional, tag = "6")]
        pub clock_snapshot: Option<ClockSnapshot>,
        #[prost(message, optional, tag = "11")]
        pub track_event: Option<proto::TrackEvent>,
        #[prost(message, optional, tag = "60")]
        pub track_descriptor: Option<TrackDescriptor>,
        #[prost(uint32, optional, tag = "10")]
        pub trusted_packet_sequence_id: Option<u32>,
        #[prost(message, optional, tag = "12")]
        pub interned_data: Option<proto::InternedData>,
        #[prost(uint32, optional, tag = "13")]
        pub sequence_flags: Option<u32>,
        /// Deprecated form of `SEQ_INCREMENTAL_STATE_CLEARED`.
        #[prost(bool, optional, tag = "41")]
        pub incremental_state_cleared: Option<bool>,
        #[prost(message, optional, tag = "59")]
        pub trace_packet_defaults: Option<TracePacketDefaults>,
    }

    /// `TracePacketDefaults`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TracePacketDefaults {
        #[prost(uint32, optional, tag = "58")]
        pub timestamp_clock_id: Option<u32>,
        #[prost(message, optional, tag = "11")]
        pub track_event_defaults: Option<TrackEventDefaults>,
    }

    /// `TrackEventDefaults` (subset).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TrackEventDefaults {
        #[prost(uint64, optional, tag = "11")]
        pub track_uuid: Option<u64>,
    }

    /// `ClockSnapshot`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ClockSnapshot {
        #[prost(message, repeated, tag = "1")]
        pub clocks: Vec<Clock>,
        #[prost(uint32, optional, tag = "2")]
        pub primary_trace_clock: Option<u32>,
    }

    /// `ClockSnapshot.Clock`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Clock {
        #[prost(uint32, optional, tag = "1")]
        pub clock_id: Option<u32>,
        #[prost(uint64, optional, tag = "2")]
        pub timestamp: Option<u64>,
        #[prost(bool, optional, tag = "3")]
        pub is_incremental: Option<bool>,
        #[prost(uint64, optional, tag = "4")]
        pub unit_multiplier_ns: Option<u64>,
    }

    /// `TrackDescriptor`: the exporter's subset plus `static_name`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TrackDescriptor {
        #[prost(uint64, optional, tag = "1")]
        pub uuid: Option<u64>,
        #[prost(uint64, optional, tag = "5")]
        pub parent_uuid: Option<u64>,
        #[prost(string, optional, tag = "2")]
        pub name: Option<String>,
        #[prost(string, optional, tag = "10")]
        pub static_name: Option<String>,
        #[prost(message, optional, tag = "3")]
        pub process: Option<proto::ProcessDescriptor>,
        #[prost(message, optional, tag = "4")]
        pub thread: Option<proto::ThreadDescriptor>,
        #[prost(message, optional, tag = "8")]
        pub counter: Option<proto::CounterDescriptor>,
        #[prost(int32, optional, tag = "12")]
        pub sibling_order_rank: Option<i32>,
    }
}

/// `BuiltinClock.BOOTTIME`: the default trace clock.
const BOOTTIME: u32 = 6;
/// First sequence-scoped clock id.
const FIRST_SEQUENCE_CLOCK: u32 = 64;
/// A packet longer than this is refused (Perfetto's own limit on a packet is far lower).
const MAX_PACKET_BYTES: u64 = 1 << 30;

/// A sequence-scoped clock as its last snapshot defines it.
#[derive(Clone, Copy)]
struct SequenceClock {
    incremental: bool,
    unit_ns: i128,
    /// The clock's last value (for incremental clocks, the running sum).
    last: i128,
    /// BOOTTIME ns at value 0: `boottime = offset + value * unit_ns`.
    offset: i128,
}

/// Per `trusted_packet_sequence_id` state.
#[derive(Default)]
struct Sequence {
    names: HashMap<u64, StrId>,
    categories: HashMap<u64, StrId>,
    annotation_names: HashMap<u64, String>,
    default_track: Option<u64>,
    default_clock: Option<u32>,
    clocks: HashMap<u32, SequenceClock>,
}

/// A track descriptor as read.
#[derive(Default, Clone)]
struct Descriptor {
    parent: Option<u64>,
    name: Option<String>,
    process_pid: Option<i64>,
    process_name: Option<String>,
    thread: Option<(i64, i64)>,
    counter_unit: Option<String>,
    sibling_rank: Option<i32>,
}

/// An event's attributes, as the mapping uses them.
struct Annotations {
    level: Option<Level>,
    correlation: Option<u64>,
    external_id: Option<u64>,
    args: Map<String, Value>,
}

/// A slice begun and not yet ended.
struct OpenSlice {
    start: Ns,
    name: StrId,
    category: StrId,
    category_text: String,
    annotations: Annotations,
    flows: Vec<u64>,
}

/// An event read, placed on its track once all descriptors are known.
enum Pending {
    Span {
        uuid: u64,
        start: Ns,
        end: Ns,
        name: StrId,
        category: StrId,
        category_text: String,
        annotations: Annotations,
        flows: Vec<u64>,
    },
    Instant {
        uuid: u64,
        ts: Ns,
        name: StrId,
        category: StrId,
        category_text: String,
        annotations: Annotations,
    },
    Counter {
        uuid: u64,
        ts: Ns,
        value: f64,
    },
}

/// Reads one base-128 varint; `None` at a clean end of input before its first byte.
fn read_varint(reader: &mut impl Read, read: &mut u64) -> std::io::Result<Option<u64>> {
    let mut value = 0u64;
    for i in 0..10 {
        let mut byte = [0u8];
        if reader.read(&mut byte)? == 0 {
            if i == 0 {
                return Ok(None);
            }
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "input ends inside a varint",
            ));
        }
        *read += 1;
        value |= u64::from(byte[0] & 0x7f) << (7 * i);
        if byte[0] & 0x80 == 0 {
            return Ok(Some(value));
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        "varint longer than 10 bytes",
    ))
}

/// Imports a Perfetto protobuf trace: see the module docs.
pub fn import(path: &Path, input: Input, options: &ImportOptions) -> Result<Trace> {
    let mut reader = input.reader;
    let protobuf = |offset: u64, message: String| {
        Error::new(
            path,
            ErrorKind::Protobuf(format!("at byte {offset}: {message}")),
        )
    };
    let io_error = |offset: u64, e: std::io::Error| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof
            || e.kind() == std::io::ErrorKind::InvalidData
        {
            protobuf(offset, format!("{e} (truncated or not a Perfetto trace)"))
        } else {
            input::classify(path, e)
        }
    };
    let mut state = Reader::new(path, options);
    let mut offset = 0u64;
    let mut buffer = Vec::new();
    let mut memory = strato_trace::MemoryTracker::new(options.memory_budget_bytes);
    loop {
        let at = offset;
        let Some(key) = read_varint(&mut reader, &mut offset).map_err(|e| io_error(at, e))? else {
            break;
        };
        let (field, wire_type) = (key >> 3, key & 7);
        let length = match wire_type {
            0 => {
                read_varint(&mut reader, &mut offset)
                    .map_err(|e| io_error(at, e))?
                    .ok_or_else(|| protobuf(at, "input ends inside a field".into()))?;
                continue;
            }
            1 => 8,
            5 => 4,
            2 => read_varint(&mut reader, &mut offset)
                .map_err(|e| io_error(at, e))?
                .ok_or_else(|| protobuf(at, "input ends inside a field".into()))?,
            _ => {
                return Err(protobuf(
                    at,
                    format!("field {field} has wire type {wire_type}: not a Perfetto trace"),
                ))
            }
        };
        if length > MAX_PACKET_BYTES {
            return Err(protobuf(
                at,
                format!("field {field} claims {length} bytes (more than {MAX_PACKET_BYTES})"),
            ));
        }
        buffer.clear();
        let got = (&mut reader)
            .take(length)
            .read_to_end(&mut buffer)
            .map_err(|e| io_error(at, e))?;
        offset += got as u64;
        if (got as u64) < length {
            return Err(protobuf(
                at,
                format!("field {field} claims {length} bytes, the input ends after {got}"),
            ));
        }
        if field != 1 || wire_type != 2 {
            continue;
        }
        let packet = wire::TracePacket::decode(buffer.as_slice())
            .map_err(|e| protobuf(at, format!("packet {}: {e}", state.packets)))?;
        state
            .packet(packet)
            .map_err(|message| protobuf(at, format!("packet {}: {message}", state.packets)))?;
        state.packets += 1;
        if state.packets.is_multiple_of(4096) {
            memory.check(&state.trace).map_err(|e| {
                Error::new(
                    path,
                    ErrorKind::MemoryBudget {
                        limit_bytes: e.limit_bytes,
                    },
                )
            })?;
        }
    }
    if state.packets == 0 {
        return Err(Error::new(
            path,
            ErrorKind::NotATrace("Perfetto trace holds no packets".into()),
        ));
    }
    let trace = state.finish();
    memory.check(&trace).map_err(|e| {
        Error::new(
            path,
            ErrorKind::MemoryBudget {
                limit_bytes: e.limit_bytes,
            },
        )
    })?;
    Ok(trace)
}

/// The import's state.
struct Reader<'a> {
    options: &'a ImportOptions,
    trace: Trace,
    rank: RankId,
    packets: u64,
    sequences: HashMap<u32, Sequence>,
    /// Builtin clock -> BOOTTIME offset (`boottime = value + offset`), from the last snapshot.
    builtin_offsets: HashMap<u32, i128>,
    descriptors: HashMap<u64, Descriptor>,
    open: HashMap<u64, Vec<OpenSlice>>,
    pending: Vec<Pending>,
    track_events: u64,
    unmatched_ends: u64,
    unknown_clock_packets: u64,
    /// Track uuids in order of first use.
    used_tracks: Vec<u64>,
    used: HashSet<u64>,
}

impl<'a> Reader<'a> {
    fn new(path: &Path, options: &'a ImportOptions) -> Self {
        let mut trace = Trace::default();
        let rank = trace.add_rank(Rank {
            rank: None,
            world_size: None,
            source: path.display().to_string(),
            format: SourceFormat::Perfetto,
            host: None,
            metadata_json: None,
            notes: Default::default(),
        });
        Reader {
            options,
            trace,
            rank,
            packets: 0,
            sequences: HashMap::new(),
            builtin_offsets: HashMap::new(),
            descriptors: HashMap::new(),
            open: HashMap::new(),
            pending: Vec::new(),
            track_events: 0,
            unmatched_ends: 0,
            unknown_clock_packets: 0,
            used_tracks: Vec::new(),
            used: HashSet::new(),
        }
    }

    fn packet(&mut self, packet: wire::TracePacket) -> std::result::Result<(), String> {
        let sequence_id = packet.trusted_packet_sequence_id.unwrap_or(0);
        let flags = packet.sequence_flags.unwrap_or(0);
        let cleared = flags & proto::SEQ_INCREMENTAL_STATE_CLEARED != 0
            || packet.incremental_state_cleared == Some(true);
        if cleared {
            let sequence = self.sequences.entry(sequence_id).or_default();
            sequence.names.clear();
            sequence.categories.clear();
            sequence.annotation_names.clear();
        }
        if let Some(defaults) = &packet.trace_packet_defaults {
            let sequence = self.sequences.entry(sequence_id).or_default();
            sequence.default_clock = defaults.timestamp_clock_id;
            sequence.default_track = defaults
                .track_event_defaults
                .as_ref()
                .and_then(|d| d.track_uuid);
        }
        if let Some(interned) = &packet.interned_data {
            let sequence = self.sequences.entry(sequence_id).or_default();
            for n in &interned.event_names {
                if let Some(iid) = n.iid {
                    let id = self.trace.intern(n.name.as_deref().unwrap_or(""));
                    sequence.names.insert(iid, id);
                }
            }
            for c in &interned.event_categories {
                if let Some(iid) = c.iid {
                    let id = self.trace.intern(c.name.as_deref().unwrap_or(""));
                    sequence.categories.insert(iid, id);
                }
            }
            for a in &interned.debug_annotation_names {
                if let Some(iid) = a.iid {
                    sequence
                        .annotation_names
                        .insert(iid, a.name.clone().unwrap_or_default());
                }
            }
        }
        if let Some(snapshot) = &packet.clock_snapshot {
            self.clock_snapshot(sequence_id, snapshot)?;
        }
        if let Some(d) = packet.track_descriptor {
            self.descriptor(d);
        }
        if let Some(event) = packet.track_event {
            let ts = self.timestamp(sequence_id, &packet.timestamp, packet.timestamp_clock_id)?;
            self.event(sequence_id, ts, event)?;
        } else if packet.timestamp.is_some()
            && packet
                .timestamp_clock_id
                .or_else(|| self.sequences.get(&sequence_id)?.default_clock)
                .is_some_and(|c| c >= FIRST_SEQUENCE_CLOCK)
        {
            // Other packets advance an incremental clock too.
            self.timestamp(sequence_id, &packet.timestamp, packet.timestamp_clock_id)?;
        }
        Ok(())
    }

    fn clock_snapshot(
        &mut self,
        sequence_id: u32,
        snapshot: &wire::ClockSnapshot,
    ) -> std::result::Result<(), String> {
        let reference = snapshot
            .clocks
            .iter()
            .find(|c| c.clock_id == Some(BOOTTIME))
            .and_then(|c| c.timestamp);
        let Some(reference) = reference.map(i128::from) else {
            // Without BOOTTIME nothing can be related to the trace clock.
            return Ok(());
        };
        for clock in &snapshot.clocks {
            let (Some(id), Some(ts)) = (clock.clock_id, clock.timestamp) else {
                continue;
            };
            let unit_ns = i128::from(clock.unit_multiplier_ns.unwrap_or(1).max(1));
            let value = i128::from(ts);
            if id >= FIRST_SEQUENCE_CLOCK {
                let sequence = self.sequences.entry(sequence_id).or_default();
                sequence.clocks.insert(
                    id,
                    SequenceClock {
                        incremental: clock.is_incremental == Some(true),
                        unit_ns,
                        last: value,
                        offset: reference.saturating_sub(value.saturating_mul(unit_ns)),
                    },
                );
            } else if id != BOOTTIME {
                self.builtin_offsets
                    .insert(id, reference.saturating_sub(value.saturating_mul(unit_ns)));
            }
        }
        Ok(())
    }

    /// A packet's time in BOOTTIME ns.
    fn timestamp(
        &mut self,
        sequence_id: u32,
        timestamp: &Option<u64>,
        clock: Option<u32>,
    ) -> std::result::Result<Ns, String> {
        let raw = i128::from(timestamp.unwrap_or(0));
        let sequence = self.sequences.entry(sequence_id).or_default();
        let clock = clock.or(sequence.default_clock).unwrap_or(BOOTTIME);
        let ns = if clock >= FIRST_SEQUENCE_CLOCK {
            let Some(c) = sequence.clocks.get_mut(&clock) else {
                return Err(format!(
                    "timestamp on clock {clock}, which no ClockSnapshot of sequence \
                     {sequence_id} defines"
                ));
            };
            let value = if c.incremental {
                c.last.saturating_add(raw)
            } else {
                raw
            };
            c.last = value;
            c.offset.saturating_add(value.saturating_mul(c.unit_ns))
        } else if clock == BOOTTIME {
            raw
        } else {
            match self.builtin_offsets.get(&clock) {
                Some(offset) => raw.saturating_add(*offset),
                None => {
                    self.unknown_clock_packets += 1;
                    raw
                }
            }
        };
        strato_trace::checked_time(ns).map_err(|_| format!("timestamp {ns} ns is out of range"))
    }

    fn descriptor(&mut self, d: wire::TrackDescriptor) {
        let Some(uuid) = d.uuid else {
            return;
        };
        let name = d
            .name
            .or(d.static_name)
            .or_else(|| d.thread.as_ref().and_then(|t| t.thread_name.clone()))
            .or_else(|| d.process.as_ref().and_then(|p| p.process_name.clone()));
        let descriptor = Descriptor {
            parent: d.parent_uuid,
            name,
            process_pid: d.process.as_ref().and_then(|p| p.pid).map(i64::from),
            process_name: d.process.as_ref().and_then(|p| p.process_name.clone()),
            thread: d
                .thread
                .as_ref()
                .map(|t| (i64::from(t.pid.unwrap_or(0)), i64::from(t.tid.unwrap_or(0)))),
            counter_unit: d
                .counter
                .as_ref()
                .map(|c| c.unit_name.clone().unwrap_or_default()),
            sibling_rank: d.sibling_order_rank,
        };
        if let Some(pid) = descriptor.process_pid {
            if !self
                .trace
                .processes
                .iter()
                .any(|p| p.rank == self.rank && p.pid == pid)
            {
                self.trace.processes.push(Process {
                    rank: self.rank,
                    pid,
                    name: descriptor.process_name.clone(),
                    labels: None,
                });
            }
        }
        self.descriptors.insert(uuid, descriptor);
    }

    fn annotations(&self, sequence_id: u32, event: &proto::TrackEvent) -> Annotations {
        let names = self
            .sequences
            .get(&sequence_id)
            .map(|s| &s.annotation_names);
        let mut out = Annotations {
            level: None,
            correlation: None,
            external_id: None,
            args: Map::new(),
        };
        for a in &event.debug_annotations {
            let key = match (&a.name, a.name_iid) {
                (Some(name), _) => name.clone(),
                (None, Some(iid)) => names
                    .and_then(|n| n.get(&iid).cloned())
                    .unwrap_or_else(|| format!("annotation {iid}")),
                (None, None) => continue,
            };
            let value = if let Some(v) = a.bool_value {
                Value::from(v)
            } else if let Some(v) = a.uint_value {
                Value::from(v)
            } else if let Some(v) = a.int_value {
                Value::from(v)
            } else if let Some(v) = a.double_value {
                Value::from(v)
            } else if let Some(v) = &a.string_value {
                Value::from(v.clone())
            } else if let Some(v) = &a.legacy_json_value {
                serde_json::from_str(v).unwrap_or_else(|_| Value::from(v.clone()))
            } else {
                Value::Null
            };
            let as_id = |v: &Value| v.as_u64().or_else(|| v.as_str()?.parse().ok());
            match key.as_str() {
                "level" => out.level = value.as_str().and_then(Level::parse),
                "correlation" | "corr_id" if as_id(&value).is_some() => {
                    out.correlation = as_id(&value).filter(|&c| c != 0);
                    if key == "corr_id" {
                        out.args.insert(key, value);
                    }
                }
                "External id" if as_id(&value).is_some() => {
                    out.external_id = as_id(&value).filter(|&c| c != 0);
                }
                _ => {
                    out.args.insert(key, value);
                }
            }
        }
        out
    }

    fn event(
        &mut self,
        sequence_id: u32,
        ts: Ns,
        event: proto::TrackEvent,
    ) -> std::result::Result<(), String> {
        self.track_events += 1;
        let sequence = self.sequences.entry(sequence_id).or_default();
        let uuid = event.track_uuid.or(sequence.default_track).unwrap_or(0);
        let name = match (&event.name, event.name_iid) {
            (Some(n), _) => self.trace.intern(n),
            (None, Some(iid)) => match sequence.names.get(&iid) {
                Some(&id) => id,
                None => self.trace.intern(&format!("name {iid}")),
            },
            (None, None) => StrId::EMPTY,
        };
        let category_text = match (event.categories.first(), event.category_iids.first()) {
            (Some(c), _) => c.clone(),
            (None, Some(iid)) => sequence
                .categories
                .get(iid)
                .map(|&id| self.trace.str(id).to_owned())
                .unwrap_or_default(),
            (None, None) => String::new(),
        };
        let category = if category_text.is_empty() {
            StrId::EMPTY
        } else {
            self.trace.intern(&category_text)
        };
        if self.used.insert(uuid) {
            self.used_tracks.push(uuid);
        }
        match event.r#type.unwrap_or(0) {
            proto::TYPE_SLICE_BEGIN => {
                let annotations = self.annotations(sequence_id, &event);
                let mut flows = event.flow_ids.clone();
                flows.extend(&event.terminating_flow_ids);
                self.open.entry(uuid).or_default().push(OpenSlice {
                    start: ts,
                    name,
                    category,
                    category_text,
                    annotations,
                    flows,
                });
            }
            proto::TYPE_SLICE_END => match self.open.get_mut(&uuid).and_then(Vec::pop) {
                Some(open) => {
                    if ts < open.start {
                        return Err(format!(
                            "slice ends at {ts} ns before it begins at {} ns",
                            open.start
                        ));
                    }
                    self.pending.push(Pending::Span {
                        uuid,
                        start: open.start,
                        end: ts,
                        name: open.name,
                        category: open.category,
                        category_text: open.category_text,
                        annotations: open.annotations,
                        flows: open.flows,
                    });
                }
                None => self.unmatched_ends += 1,
            },
            proto::TYPE_INSTANT => {
                let annotations = self.annotations(sequence_id, &event);
                self.pending.push(Pending::Instant {
                    uuid,
                    ts,
                    name,
                    category,
                    category_text,
                    annotations,
                });
            }
            proto::TYPE_COUNTER => {
                let value = event
                    .double_counter_value
                    .or(event.counter_value.map(|v| v as f64))
                    .unwrap_or(0.0);
                self.pending.push(Pending::Counter { uuid, ts, value });
            }
            _ => {}
        }
        Ok(())
    }

    /// The name of a track and of its ancestors' processes.
    fn process_of(&self, uuid: u64) -> Option<i64> {
        let mut at = Some(uuid);
        for _ in 0..64 {
            let d = self.descriptors.get(&at?)?;
            if let Some(pid) = d.process_pid.or(d.thread.map(|t| t.0)) {
                return Some(pid);
            }
            at = d.parent;
        }
        None
    }

    /// The model track kind and display name of a Perfetto track.
    fn kind_of(
        &self,
        uuid: u64,
        resolved: &HashMap<u64, (TrackKind, Option<String>)>,
        taken: &mut HashMap<(i64, i64), u64>,
    ) -> (TrackKind, Option<String>) {
        let Some(d) = self.descriptors.get(&uuid) else {
            return (
                TrackKind::Custom {
                    group: "perfetto".into(),
                    name: if uuid == 0 {
                        "events without a track".into()
                    } else {
                        format!("track {uuid}")
                    },
                },
                None,
            );
        };
        let name = d.name.clone().unwrap_or_default();
        let parent = d.parent.and_then(|p| self.descriptors.get(&p));
        let parent_name = parent.and_then(|p| p.name.clone()).unwrap_or_default();
        if let Some((pid, tid)) = d.thread {
            return (TrackKind::Thread { pid, tid }, d.name.clone());
        }
        if let Some(unit) = &d.counter_unit {
            let device = parent.and_then(|p| device_of_name(p.name.as_deref().unwrap_or("")));
            return (
                TrackKind::Counter {
                    pid: if device.is_some() {
                        None
                    } else {
                        self.process_of(uuid)
                    },
                    device,
                    name: name.clone(),
                    unit: unit.clone(),
                },
                d.name.clone(),
            );
        }
        if d.process_pid.is_some() {
            return (
                TrackKind::Custom {
                    group: name.clone(),
                    name: "process".into(),
                },
                d.name.clone(),
            );
        }
        // rocprofv3's queue/stream tracks carry the device in their own name.
        if let Some((device, queue)) = rocprof_queue(&name) {
            return (
                TrackKind::DeviceQueue {
                    device,
                    queue: unique_queue(taken, device, queue, uuid),
                },
                d.name.clone(),
            );
        }
        if let Some(tid) = rocprof_thread(&name) {
            return (
                TrackKind::Thread {
                    pid: self.process_of(uuid).unwrap_or(0),
                    tid,
                },
                d.name.clone(),
            );
        }
        // A lane of a thread or queue track (the exporter's overlap and per-level children).
        if let Some(parent_uuid) = d.parent {
            if let Some((kind @ (TrackKind::Thread { .. } | TrackKind::DeviceQueue { .. }), n)) =
                resolved.get(&parent_uuid)
            {
                return (kind.clone(), n.clone());
            }
        }
        // A child of a device track: a queue numbered by its sibling rank (the exporter) or
        // by its name (`stream 7`, `queue 3`).
        if let Some(device) = device_of_name(&parent_name) {
            let queue = trailing_number(&name)
                .or(d.sibling_rank.map(i64::from))
                .unwrap_or(0);
            return (
                TrackKind::DeviceQueue {
                    device,
                    queue: unique_queue(taken, device, queue, uuid),
                },
                d.name.clone(),
            );
        }
        (
            TrackKind::Custom {
                group: if parent_name.is_empty() {
                    "perfetto".into()
                } else {
                    parent_name
                },
                name: if name.is_empty() {
                    format!("track {uuid}")
                } else {
                    name
                },
            },
            d.name.clone(),
        )
    }

    fn finish(mut self) -> Trace {
        // Resolve tracks: parents before children, so lanes find their parent's kind.
        let mut order: Vec<u64> = Vec::new();
        let mut seen: HashSet<u64> = HashSet::new();
        for &uuid in &self.used_tracks {
            let mut chain = vec![uuid];
            let mut at = self.descriptors.get(&uuid).and_then(|d| d.parent);
            while let Some(p) = at {
                if chain.contains(&p) || chain.len() > 64 {
                    break;
                }
                chain.push(p);
                at = self.descriptors.get(&p).and_then(|d| d.parent);
            }
            for u in chain.into_iter().rev() {
                if seen.insert(u) {
                    order.push(u);
                }
            }
        }
        let mut resolved: HashMap<u64, (TrackKind, Option<String>)> = HashMap::new();
        let mut taken: HashMap<(i64, i64), u64> = HashMap::new();
        for &uuid in &order {
            let kind = self.kind_of(uuid, &resolved, &mut taken);
            resolved.insert(uuid, kind);
        }
        let mut index = TrackIndexHandle::default();
        let mut track_of: HashMap<u64, TrackId> = HashMap::new();
        for &uuid in &self.used_tracks {
            let (kind, name) = resolved[&uuid].clone();
            let track = self.trace.track_for(&mut index, self.rank, kind);
            if let Some(t) = self.trace.tracks.get_mut(track.0 as usize) {
                if t.name.is_none() {
                    t.name = name;
                }
            }
            track_of.insert(uuid, track);
        }
        let options = self.options;
        let level_of = |annotations: &Annotations, category: &str, device: bool| {
            annotations
                .level
                .or_else(|| options.level_map.level("perfetto", category))
                .unwrap_or(if device {
                    Level::DeviceKernel
                } else {
                    Level::Other
                })
        };
        let mut flow_ends: HashMap<u64, Vec<FlowEnd>> = HashMap::new();
        let pending = std::mem::take(&mut self.pending);
        for p in pending {
            match p {
                Pending::Span {
                    uuid,
                    start,
                    end,
                    name,
                    category,
                    category_text,
                    annotations,
                    flows,
                } => {
                    let track = track_of[&uuid];
                    let device = self.trace.track(track).is_device();
                    let level = level_of(&annotations, &category_text, device);
                    let args = self.args(annotations.args);
                    let span = SpanId(self.trace.spans.len() as u32);
                    for id in flows {
                        flow_ends.entry(id).or_default().push(FlowEnd {
                            track,
                            ts: start,
                            span: Some(span),
                        });
                    }
                    self.trace.spans.push(Span {
                        track,
                        start,
                        end,
                        name,
                        category,
                        level,
                        correlation: annotations.correlation,
                        external_id: annotations.external_id,
                        args,
                    });
                }
                Pending::Instant {
                    uuid,
                    ts,
                    name,
                    category,
                    category_text,
                    annotations,
                } => {
                    let track = track_of[&uuid];
                    let device = self.trace.track(track).is_device();
                    let level = level_of(&annotations, &category_text, device);
                    let args = self.args(annotations.args);
                    self.trace.instants.push(Instant {
                        track,
                        ts,
                        name,
                        category,
                        level,
                        args,
                    });
                }
                Pending::Counter { uuid, ts, value } => {
                    self.trace.counters.push(CounterSample {
                        track: track_of[&uuid],
                        ts,
                        value,
                    });
                }
            }
        }
        let mut ids: Vec<u64> = flow_ends.keys().copied().collect();
        ids.sort_unstable();
        let flow_category = self.trace.intern("flow");
        for id in ids {
            let mut ends = flow_ends.remove(&id).unwrap_or_default();
            ends.sort_by_key(|e| e.ts);
            let mut ends = ends.into_iter();
            let from = ends.next();
            let to = ends.next();
            self.trace.flows.push(Flow {
                id,
                category: flow_category,
                from,
                to,
            });
        }
        // Device names the exporter put in its device tracks' names.
        let mut named: Vec<(i64, String)> = self
            .descriptors
            .values()
            .filter_map(|d| named_device(d.name.as_deref()?))
            .map(|(name, index)| (index, name.to_owned()))
            .collect();
        named.sort();
        named.dedup_by_key(|(index, _)| *index);
        for (index, name) in named {
            self.trace.devices.push(strato_trace::Device {
                rank: Some(self.rank),
                index,
                name: Some(name),
                ..Default::default()
            });
        }
        let open: u64 = self.open.values().map(|v| v.len() as u64).sum();
        let notes = &mut self.trace.ranks[self.rank.0 as usize].notes;
        notes.events_read += self.track_events;
        if open > 0 {
            notes.count("slices_never_ended", open);
        }
        if self.unmatched_ends > 0 {
            notes.count("slice_ends_without_begin", self.unmatched_ends);
        }
        if self.unknown_clock_packets > 0 {
            notes.count(
                "timestamps_on_a_clock_without_snapshot_read_as_boottime",
                self.unknown_clock_packets,
            );
        }
        self.trace
    }

    fn args(&mut self, args: Map<String, Value>) -> Option<strato_trace::ArgsId> {
        (self.options.keep_args && !args.is_empty())
            .then(|| self.trace.add_args(&Value::Object(args).to_string()))
    }
}

/// A queue number not yet given to another Perfetto track of the same device.
fn unique_queue(taken: &mut HashMap<(i64, i64), u64>, device: i64, queue: i64, uuid: u64) -> i64 {
    let mut q = queue;
    loop {
        match taken.get(&(device, q)) {
            Some(&owner) if owner != uuid => q = q.saturating_add(1 << 32),
            _ => {
                taken.insert((device, q), uuid);
                return q;
            }
        }
    }
}

/// The number in `[n]` after `label` in `name` (`AGENT [2]`).
fn bracketed(name: &str, label: &str) -> Option<i64> {
    let at = name.find(label)? + label.len();
    let rest = name[at..].trim_start().strip_prefix('[')?;
    let end = rest.find(']')?;
    rest[..end].trim().parse().ok()
}

/// rocprofv3's device tracks: `COMPUTE AGENT [n] STREAM [s] (GPU)` (queue s),
/// `COMPUTE GPU [n] QUEUE [q] ...` (queue q), `COPY to AGENT [n] STREAM [s] ...` and
/// `COPY to AGENT [n] THREAD [t] ...` (copies: queue `-1 - s`, apart from compute queues).
fn rocprof_queue(name: &str) -> Option<(i64, i64)> {
    let device = bracketed(name, "AGENT")
        .or_else(|| bracketed(name, "GPU"))
        .or_else(|| bracketed(name, "CPU"))?;
    let number = bracketed(name, "STREAM")
        .or_else(|| bracketed(name, "QUEUE"))
        .or_else(|| bracketed(name, "THREAD"))
        .unwrap_or(0);
    if name.starts_with("COPY") {
        Some((device, -1 - number))
    } else if name.starts_with("COMPUTE") {
        Some((device, number))
    } else {
        None
    }
}

/// rocprofv3's API thread tracks: `THREAD 1 (12345)`: tid 12345.
fn rocprof_thread(name: &str) -> Option<i64> {
    let rest = name.strip_prefix("THREAD ")?;
    let open = rest.find('(')?;
    let close = rest[open..].find(')')? + open;
    rest[open + 1..close].trim().parse().ok()
}

/// A device track as stratoscope's exporter names them: `GPU 3`, `<name> (device 3)`, either
/// with a ` [rank r]` suffix.
fn device_of_name(name: &str) -> Option<i64> {
    let name = match name.rfind(" [rank ") {
        Some(at) if name.ends_with(']') => &name[..at],
        _ => name,
    };
    if let Some(n) = name.strip_prefix("GPU ") {
        return n.trim().parse().ok();
    }
    let inner = name.strip_suffix(')')?;
    let at = inner.rfind("(device ")?;
    inner[at + "(device ".len()..].trim().parse().ok()
}

/// The device name and index of a device track named `<name> (device n)` (stratoscope's
/// exporter, when the exported trace knew the device's name), with an optional ` [rank r]`.
fn named_device(name: &str) -> Option<(&str, i64)> {
    let name = match name.rfind(" [rank ") {
        Some(at) if name.ends_with(']') => &name[..at],
        _ => name,
    };
    let inner = name.strip_suffix(')')?;
    let at = inner.rfind(" (device ")?;
    let index = inner[at + " (device ".len()..].trim().parse().ok()?;
    let device = inner[..at].trim();
    (!device.is_empty()).then_some((device, index))
}

/// The number a name ends with (`stream 7`: 7).
fn trailing_number(name: &str) -> Option<i64> {
    let digits = name
        .bytes()
        .rev()
        .take_while(|b| b.is_ascii_digit())
        .count();
    if digits == 0 {
        return None;
    }
    let (head, tail) = name.split_at(name.len() - digits);
    let negative = head.ends_with('-');
    let value: i64 = tail.parse().ok()?;
    Some(if negative { -value } else { value })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn track_names() {
        assert_eq!(
            rocprof_queue("COMPUTE AGENT [1] STREAM [0] (GPU)"),
            Some((1, 0))
        );
        assert_eq!(rocprof_queue("COMPUTE GPU [2] QUEUE [3] GPU"), Some((2, 3)));
        assert_eq!(
            rocprof_queue("COPY to AGENT [1] STREAM [0] (GPU)"),
            Some((1, -1))
        );
        assert_eq!(rocprof_queue("THREAD 0 (77)"), None);
        assert_eq!(rocprof_thread("THREAD 2 (12345)"), Some(12345));
        assert_eq!(device_of_name("GPU 3"), Some(3));
        assert_eq!(device_of_name("NVIDIA A100 (device 1) [rank 2]"), Some(1));
        assert_eq!(device_of_name("python (pid 4)"), None);
        assert_eq!(
            named_device("AMD Instinct MI300X (device 2) [rank 1]"),
            Some(("AMD Instinct MI300X", 2))
        );
        assert_eq!(named_device("GPU 2"), None);
        assert_eq!(trailing_number("stream 7"), Some(7));
        assert_eq!(trailing_number("memory copies"), None);
    }
}
