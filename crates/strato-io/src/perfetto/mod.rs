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
//!
//! Layout: this module owns the entry point and the import state ([`Reader`]: packets, events,
//! flows, the trace at the end); [`wire`] holds the packet messages only the reader needs,
//! [`clock`] converts timestamps, and [`tracks`] turns track descriptors into tracks.

mod clock;
mod tracks;

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::Path;
use strato_trace::metadata::SourceMetadata;

use prost::Message;
use serde_json::{Map, Value};
use strato_trace::{
    CounterSample, Flow, FlowEnd, Instant, Level, Ns, Rank, RankId, SourceFormat, Span, SpanId,
    StrId, Trace, TrackId, TrackIndexHandle, TrackKind,
};

use crate::export::perfetto_proto as proto;
use crate::{input, input::Input, Error, ErrorKind, ImportOptions, Result};
use tracks::named_device;

pub mod wire;

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
            metadata: SourceMetadata::None,
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
                        correlation: annotations.correlation.into(),
                        external_id: annotations.external_id.into(),
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

#[cfg(test)]
mod tests;
