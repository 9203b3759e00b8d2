//! XSpace protobuf (`*.xplane.pb`) importer: the raw profile TensorFlow, JAX and xprof write.
//!
//! This module owns the hand-written `prost` message structs of `xplane.proto` ([`proto`]; the
//! field numbers are those of `tsl/profiler/protobuf/xplane.proto`) and the mapping from planes,
//! lines and events to the trace model; the naming rules it shares with the trace viewer JSON
//! post-pass ([`crate::tf`]) live in [`classify`].
//!
//! Protobuf is not a streamable format (a message's fields may come in any order and a plane's
//! metadata maps may follow its lines), so the whole file is read into memory. To bound the rest,
//! the top-level `XSpace` is decoded shallowly ([`proto::XSpaceIndex`]: planes stay encoded, as
//! zero-copy slices of the file buffer) and each plane is decoded, converted and dropped in turn:
//! peak memory is the file, one decoded plane and the trace being built.
//!
//! Mapping (see `docs/formats/tensorflow.md`):
//! - `/device:<KIND>:N` planes become [`Device`]s with index `N` (plane stats give SM count,
//!   memory, clock, compute capability); their `Stream #…` lines become
//!   `DeviceQueue { device: N, queue: line.id }` tracks (kernels `device_kernel`, memcpys
//!   `device_copy`, memsets `device_memset`); the derived lines xprof adds (`TensorFlow Ops`,
//!   `XLA Ops`, `TensorFlow Name Scope`, `Steps`, `XLA Modules`) duplicate the stream events, so
//!   they become `Custom { group: plane name, name: line name }` tracks at host-side levels and
//!   never count as device time. (A device plane with no stream lines — a TPU — has no other
//!   device timeline than `XLA Ops`, which is then its device queue.)
//! - every other plane (`/host:CPU`, …) is a process (pid 0 for `/host:CPU`, else the plane's
//!   position + 1) whose lines are threads `Thread { pid, tid: line.id }`.
//! - events: start = `line.timestamp_ns + offset_ps / 1000`, rounded to the nearest ns; events
//!   with a zero duration are [`Instant`]s; aggregated events (`num_occurrences`) have no time
//!   and are skipped. The `correlation_id` stat becomes [`Span::correlation`]; the other stats
//!   (and the event metadata's stats) become the args object when `keep_args` is on.
//!
//! Layout: this module owns the entry point and the mapping above; [`proto`] holds the
//! `xplane.proto` messages and [`classify`] the naming rules the trace viewer JSON post-pass
//! ([`crate::tf`]) shares.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use strato_trace::metadata::{JsonObject, SourceMetadata};
use strato_trace::OptionalId;

use prost::bytes::Bytes;
use prost::Message;
use serde_json::{Map, Value};
use strato_trace::{
    Device, Instant, Level, Process, Rank, RankId, SourceFormat, Span, StrId, Trace,
    TrackIndexHandle, TrackKind,
};

use crate::{input, input::Input, Error, ErrorKind, ImportOptions, Result};

pub mod proto;

pub mod classify;

use classify::{LineClass, PlaneRole};

/// Imports an XSpace protobuf: see the module docs.
pub fn import(path: &Path, mut input: Input, options: &ImportOptions) -> Result<Trace> {
    let mut buffer = Vec::new();
    input
        .reader
        .read_to_end(&mut buffer)
        .map_err(|e| input::classify(path, e))?;
    let protobuf = |e: prost::DecodeError| Error::new(path, ErrorKind::Protobuf(e.to_string()));
    let space = proto::XSpaceIndex::decode(Bytes::from(buffer)).map_err(protobuf)?;
    if space.planes.is_empty() {
        return Err(Error::new(
            path,
            ErrorKind::NotATrace("XSpace protobuf holds no planes".into()),
        ));
    }
    let metadata = serde_json::json!({
        "hostnames": space.hostnames,
        "errors": space.errors,
        "warnings": space.warnings,
    });
    let mut trace = Trace::default();
    let rank = trace.add_rank(Rank {
        rank: None,
        world_size: None,
        source: path.display().to_string(),
        format: SourceFormat::Xplane,
        host: space.hostnames.first().cloned(),
        metadata: SourceMetadata::of_value(metadata.clone()),
        notes: Default::default(),
    });
    let mut builder = Builder {
        rank,
        options,
        index: TrackIndexHandle::default(),
        aggregated: 0,
        memory: strato_trace::MemoryTracker::new(options.memory_budget_bytes),
    };
    for (ordinal, encoded) in space.planes.into_iter().enumerate() {
        let plane = proto::XPlane::decode(encoded).map_err(protobuf)?;
        builder
            .plane(&mut trace, ordinal, plane)
            .map_err(|kind| Error::new(path, kind))?;
    }
    trace.ranks[rank.0 as usize]
        .notes
        .count("aggregated_events_skipped", builder.aggregated);
    if builder.aggregated > 0 {
        if let Some(r) = trace.ranks.get_mut(rank.0 as usize) {
            let mut meta = metadata;
            meta["aggregated_events_skipped"] = builder.aggregated.into();
            r.metadata = SourceMetadata::of_value(meta);
        }
    }
    Ok(trace)
}

/// State kept across planes.
struct Builder<'a> {
    rank: RankId,
    options: &'a ImportOptions,
    index: TrackIndexHandle,
    /// Events with `num_occurrences` instead of a time (skipped).
    aggregated: u64,
    memory: strato_trace::MemoryTracker,
}

/// How the events of one line are mapped.
#[derive(Clone, Copy)]
enum LineMode {
    /// A device stream: kernels, copies, memsets.
    Stream,
    /// A derived device line, all events in one category.
    Derived(&'static str),
    /// A host thread: per-event categories.
    Host(LineClass),
}

/// Stat ids of one plane that the mapping looks at.
struct StatIds {
    correlation: Option<i64>,
    memcpy_details: Option<i64>,
    is_eager: Option<i64>,
}

impl Builder<'_> {
    /// Adds one plane's lines and events. An event whose start or end is outside the valid
    /// time range ([`strato_trace::TIME_LIMIT_NS`]) is an error naming it; what is kept is
    /// accounted against the memory budget.
    fn plane(
        &mut self,
        trace: &mut Trace,
        ordinal: usize,
        plane: proto::XPlane,
    ) -> Result<(), ErrorKind> {
        let role = classify::plane_role(&plane.name);
        let find = |name: &str| {
            plane
                .stat_metadata
                .iter()
                .find(|(_, m)| m.name == name)
                .map(|(&id, _)| id)
        };
        let ids = StatIds {
            correlation: find("correlation_id"),
            memcpy_details: find("memcpy_details"),
            is_eager: find("is_eager"),
        };
        let pid = match role {
            PlaneRole::Device { index, .. } => {
                trace.devices.push(device(self.rank, index, &plane));
                None
            }
            PlaneRole::HostCpu => Some(0),
            PlaneRole::Other => Some(ordinal as i64 + 1),
        };
        if let Some(pid) = pid {
            trace.processes.push(Process {
                rank: self.rank,
                pid,
                name: Some(plane.name.clone()),
                labels: None,
            });
        }
        let has_streams = plane
            .lines
            .iter()
            .any(|l| classify::line_class(&l.name) == LineClass::Stream);
        let mut names: HashMap<i64, StrId> = HashMap::new();
        let mut categories: HashMap<&'static str, (StrId, Level)> = HashMap::new();
        for line in &plane.lines {
            let display = if line.display_name.is_empty() {
                &line.name
            } else {
                &line.display_name
            };
            let class = classify::line_class(&line.name);
            let (kind, mode) = match (role, pid) {
                (PlaneRole::Device { index, gpu }, _) => match class {
                    LineClass::Stream => (
                        TrackKind::DeviceQueue {
                            device: index,
                            queue: line.id,
                        },
                        LineMode::Stream,
                    ),
                    LineClass::Ops if !gpu && !has_streams && line.name == "XLA Ops" => (
                        TrackKind::DeviceQueue {
                            device: index,
                            queue: line.id,
                        },
                        LineMode::Derived("device_kernel"),
                    ),
                    _ => (
                        TrackKind::Custom {
                            group: plane.name.clone(),
                            name: display.clone(),
                        },
                        LineMode::Derived(classify::derived_category(class)),
                    ),
                },
                (_, pid) => (
                    TrackKind::Thread {
                        pid: pid.unwrap_or(0),
                        tid: line.id,
                    },
                    LineMode::Host(class),
                ),
            };
            let track = trace.track_for(&mut self.index, self.rank, kind);
            if let Some(t) = trace.tracks.get_mut(track.0 as usize) {
                t.name = Some(display.clone());
            }
            for event in &line.events {
                trace.ranks[self.rank.0 as usize].notes.events_read += 1;
                self.memory
                    .check(trace)
                    .map_err(|e| ErrorKind::MemoryBudget {
                        limit_bytes: e.limit_bytes,
                    })?;
                let offset_ps = match event.data {
                    Some(proto::x_event::Data::OffsetPs(o)) => o,
                    Some(proto::x_event::Data::NumOccurrences(_)) => {
                        self.aggregated += 1;
                        continue;
                    }
                    None => 0,
                };
                let metadata = plane.event_metadata.get(&event.metadata_id);
                let event_name = metadata.map_or("", |m| {
                    if m.name.is_empty() {
                        &m.display_name
                    } else {
                        &m.name
                    }
                });
                let meta_stats = metadata.map_or(&[][..], |m| &m.stats[..]);
                let all_stats = || meta_stats.iter().chain(&event.stats);
                let has =
                    |id: Option<i64>| id.is_some_and(|id| all_stats().any(|s| s.metadata_id == id));
                let correlation = ids.correlation.and_then(|id| {
                    all_stats()
                        .filter(|s| s.metadata_id == id)
                        .find_map(|s| stat_u64(s, &plane))
                });
                let category = match mode {
                    LineMode::Stream => {
                        classify::stream_category(event_name, has(ids.memcpy_details))
                    }
                    LineMode::Derived(category) => category,
                    LineMode::Host(class) => classify::host_category(
                        class,
                        event_name,
                        correlation.is_some(),
                        has(ids.is_eager),
                    ),
                };
                let (category, level) = *categories.entry(category).or_insert_with(|| {
                    (
                        trace.intern(category),
                        classify::level(&self.options.level_map, category),
                    )
                });
                let name = *names.entry(event.metadata_id).or_insert_with(|| {
                    if metadata.is_some() {
                        trace.intern(event_name)
                    } else {
                        trace.intern(&format!("<event metadata {}>", event.metadata_id))
                    }
                });
                let args = if self.options.keep_args {
                    let display_name = metadata
                        .map(|m| m.display_name.as_str())
                        .filter(|d| !d.is_empty() && *d != event_name);
                    args_json(
                        all_stats(),
                        ids.correlation,
                        display_name,
                        python_source(event_name),
                        &plane,
                    )
                    .map(|text| trace.add_args(&text))
                } else {
                    None
                };
                let start_ps = i128::from(line.timestamp_ns) * 1000 + i128::from(offset_ps);
                let end_ps = start_ps + i128::from(event.duration_ps.max(0));
                let (Some(start), Some(end)) = (ps_to_ns(start_ps), ps_to_ns(end_ps)) else {
                    return Err(ErrorKind::Invalid(format!(
                        "event {event_name:?} on line {display:?} of plane {:?}: time {start_ps} ps \
                         (+ {} ps) is outside the valid range (+-{} ns)",
                        plane.name,
                        event.duration_ps,
                        strato_trace::TIME_LIMIT_NS
                    )));
                };
                if event.duration_ps < 0 {
                    trace.ranks[self.rank.0 as usize]
                        .notes
                        .count("negative_durations_read_as_instants", 1);
                }
                if event.duration_ps <= 0 {
                    trace.instants.push(Instant {
                        track,
                        ts: start,
                        name,
                        category,
                        level,
                        args,
                    });
                } else {
                    trace.spans.push(Span {
                        track,
                        start,
                        end,
                        name,
                        category,
                        level,
                        correlation: correlation.into(),
                        external_id: OptionalId::NONE,
                        args,
                    });
                }
            }
        }
        Ok(())
    }
}

/// Picoseconds to the nearest nanosecond (halves away from zero); `None` outside the valid
/// time range.
fn ps_to_ns(ps: i128) -> Option<i64> {
    let rounded = if ps >= 0 {
        (ps + 500) / 1000
    } else {
        (ps - 500) / 1000
    };
    strato_trace::checked_time(rounded).ok()
}

/// A stat's value as an unsigned integer (correlation ids), when it is one.
fn stat_u64(stat: &proto::XStat, plane: &proto::XPlane) -> Option<u64> {
    use proto::x_stat::Value;
    match stat.value.as_ref()? {
        Value::Uint64Value(v) => Some(*v),
        Value::Int64Value(v) => u64::try_from(*v).ok(),
        Value::StrValue(s) => s.trim().parse().ok(),
        Value::RefValue(r) => i64::try_from(*r)
            .ok()
            .and_then(|r| plane.stat_metadata.get(&r))
            .and_then(|m| m.name.trim().parse().ok()),
        _ => None,
    }
}

/// A stat's value as JSON.
fn stat_json(stat: &proto::XStat, plane: &proto::XPlane) -> Value {
    use proto::x_stat::Value as V;
    match &stat.value {
        None => Value::Null,
        Some(V::DoubleValue(v)) => serde_json::Number::from_f64(*v)
            .map(Value::Number)
            .unwrap_or_else(|| Value::String(v.to_string())),
        Some(V::Uint64Value(v)) => Value::from(*v),
        Some(V::Int64Value(v)) => Value::from(*v),
        Some(V::StrValue(s)) => Value::String(s.clone()),
        Some(V::BytesValue(b)) => Value::String(hex(b)),
        Some(V::RefValue(r)) => {
            let name = i64::try_from(*r)
                .ok()
                .and_then(|r| plane.stat_metadata.get(&r))
                .map(|m| m.name.clone());
            Value::String(name.unwrap_or_else(|| format!("<ref {r}>")))
        }
        Some(V::CompressedStrValue(b)) => Value::String(gunzip_text(b).unwrap_or_else(|| hex(b))),
    }
}

/// Lowercase hex of raw bytes.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A gzip-compressed string, bounded to 16 MiB decompressed.
fn gunzip_text(bytes: &[u8]) -> Option<String> {
    let mut text = String::new();
    flate2::read::GzDecoder::new(bytes)
        .take(16 << 20)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// Where a Python frame event of the JAX/TF Python tracer (`$file.py:123 function`) points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PythonSource<'a> {
    pub file: &'a str,
    pub line: u64,
    pub function: &'a str,
}

/// The source file, line and function of a Python tracer event name (`$api.py:3154
/// block_until_ready`); `None` for any other name.
pub fn python_source(event_name: &str) -> Option<PythonSource<'_>> {
    let rest = event_name.strip_prefix('$')?;
    // The first `:<digits>` followed by a space or the end (file names may hold spaces).
    rest.match_indices(':').find_map(|(at, _)| {
        let after = &rest[at + 1..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        let tail = &after[digits..];
        if digits == 0 || !(tail.is_empty() || tail.starts_with(' ')) || at == 0 {
            return None;
        }
        Some(PythonSource {
            file: &rest[..at],
            line: after[..digits].parse().ok()?,
            function: tail.trim(),
        })
    })
}

/// The args object of an event: every stat but the correlation id (which is a span field),
/// plus the metadata's display name when it differs from the name and, for Python frames, their
/// `source_file`, `source_line` and `function`. `None` when empty.
fn args_json<'s>(
    stats: impl Iterator<Item = &'s proto::XStat>,
    correlation: Option<i64>,
    display_name: Option<&str>,
    source: Option<PythonSource<'_>>,
    plane: &proto::XPlane,
) -> Option<String> {
    let mut map = Map::new();
    if let Some(display) = display_name {
        map.insert("display_name".into(), Value::String(display.into()));
    }
    if let Some(source) = source {
        map.insert("source_file".into(), Value::from(source.file));
        map.insert("source_line".into(), Value::from(source.line));
        map.insert("function".into(), Value::from(source.function));
    }
    for stat in stats {
        if Some(stat.metadata_id) == correlation {
            continue;
        }
        let key = plane
            .stat_metadata
            .get(&stat.metadata_id)
            .map(|m| m.name.clone())
            .unwrap_or_else(|| format!("stat_{}", stat.metadata_id));
        map.insert(key, stat_json(stat, plane));
    }
    (!map.is_empty()).then(|| Value::Object(map).to_string())
}

/// A device from its plane's stats (TF's device capability stat names).
fn device(rank: RankId, index: i64, plane: &proto::XPlane) -> Device {
    let mut device = Device {
        rank: Some(rank),
        index,
        ..Device::default()
    };
    let mut extra = Map::new();
    for stat in &plane.stats {
        let Some(name) = plane.stat_metadata.get(&stat.metadata_id).map(|m| &m.name) else {
            continue;
        };
        let value = stat_json(stat, plane);
        let int = value.as_i64();
        match name.as_str() {
            "core_count" if int.is_some() => device.sm_count = int,
            "memory_size" if int.is_some() => device.total_memory_bytes = int,
            "clock_rate" if int.is_some() => device.clock_rate_khz = int,
            "compute_cap_major" if int.is_some() => device.compute_major = int,
            "compute_cap_minor" if int.is_some() => device.compute_minor = int,
            "memory_bandwidth" if value.as_f64().is_some() => {
                device.memory_bandwidth_bytes_per_s = value.as_f64();
            }
            "device_name" | "device_type_string" if value.is_string() => {
                device.name = value.as_str().map(str::to_owned);
            }
            _ => {
                extra.insert(name.clone(), value);
            }
        }
    }
    device.extra = JsonObject::from_map(extra);
    device
}
