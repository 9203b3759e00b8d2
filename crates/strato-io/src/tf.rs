//! TensorFlow / JAX trace viewer JSON: a post-pass over the generic Chrome-JSON import.
//!
//! This module owns recognising a trace viewer trace (a `chrome` rank with a process named
//! `/device:GPU:N` or `/host:CPU`, the planes xprof turns into pids) and refining it with the
//! same rules as the XPlane importer ([`crate::xplane::classify`]):
//! - the rank's format becomes `tf-trace-viewer`;
//! - a device process's `Stream #…` threads become `DeviceQueue { device: N, queue: tid }`
//!   tracks; its derived lines (`TensorFlow Ops`, `XLA Ops`, `TensorFlow Name Scope`, `Steps`,
//!   `XLA Modules`) become `Custom { group: process name, name: thread name }` tracks, so they
//!   never count as device time. Tracks are changed in place (same ids, names and sort
//!   indices), so spans, instants and flows stay pointed at them;
//! - spans and instants on those tracks and on host threads get a `tf` category and its level
//!   (the trace viewer writes no `cat`);
//! - `args.correlation_id` becomes [`strato_trace::Span::correlation`] when the Chrome importer
//!   has not filled it (it needs the args, i.e. `keep_args`, unless the importer reads the key);
//! - each device process becomes a [`Device`] (the JSON has no device properties).
//!
//! Any other trace passes through unchanged.

use rustc_hash::FxHashMap;
use serde::de::IgnoredAny;
use serde::Deserialize;
use strato_trace::{Device, Level, RankId, SourceFormat, StrId, Trace, TrackKind};

use crate::xplane::classify::{self, LineClass, PlaneRole};
use crate::ImportOptions;

/// How the events of one track are refined.
#[derive(Debug, Clone, Copy)]
enum Mode {
    /// A device stream: kernels, copies, memsets by event name / args.
    Stream,
    /// A derived device line or a device queue with one category.
    Fixed(&'static str),
    /// A host thread: per-event categories.
    Host(LineClass),
}

/// The `args` keys the post-pass reads.
#[derive(Deserialize, Default)]
struct TfArgs {
    correlation_id: Option<serde_json::Value>,
    memcpy_details: Option<IgnoredAny>,
    is_eager: Option<IgnoredAny>,
}

impl TfArgs {
    fn correlation(&self) -> Option<u64> {
        match self.correlation_id.as_ref()? {
            serde_json::Value::Number(n) => n.as_u64(),
            serde_json::Value::String(s) => s.trim().parse().ok(),
            _ => None,
        }
    }
}

/// Recognises a TF trace viewer trace (pids named `/device:GPU:N`, `/host:CPU`) and moves its
/// device lines onto device-queue tracks with device levels. Other traces pass unchanged.
pub fn post_process(mut trace: Trace, options: &ImportOptions) -> Trace {
    for r in 0..trace.ranks.len() {
        let rank = RankId(r as u32);
        if trace.ranks[r].format == SourceFormat::Chrome {
            refine_rank(&mut trace, rank, options);
        }
    }
    trace
}

/// Whether [`post_process`] would refine any rank of `trace` (a Chrome JSON rank whose process
/// names are TensorFlow trace viewer planes).
pub fn is_trace_viewer(trace: &Trace) -> bool {
    trace.processes.iter().any(|p| {
        trace.ranks[p.rank.0 as usize].format == SourceFormat::Chrome
            && p.name
                .as_deref()
                .is_some_and(|name| classify::plane_role(name) != PlaneRole::Other)
    })
}

/// Refines one rank if it is a trace viewer trace.
fn refine_rank(trace: &mut Trace, rank: RankId, options: &ImportOptions) {
    let roles: FxHashMap<i64, (PlaneRole, String)> = trace
        .processes
        .iter()
        .filter(|p| p.rank == rank)
        .filter_map(|p| {
            let name = p.name.as_deref()?;
            let role = classify::plane_role(name);
            (role != PlaneRole::Other).then(|| (p.pid, (role, name.to_owned())))
        })
        .collect();
    if roles.is_empty() {
        return;
    }
    trace.ranks[rank.0 as usize].format = SourceFormat::TfTraceViewer;

    // Device processes with at least one stream thread (for the TPU `XLA Ops` rule).
    let mut with_streams: Vec<i64> = Vec::new();
    for track in trace.tracks.iter().filter(|t| t.rank == rank) {
        if let TrackKind::Thread { pid, .. } = track.kind {
            let class = classify::line_class(track.name.as_deref().unwrap_or(""));
            if class == LineClass::Stream {
                with_streams.push(pid);
            }
        }
    }

    let mut modes: FxHashMap<u32, Mode> = FxHashMap::default();
    for (i, track) in trace.tracks.iter_mut().enumerate() {
        if track.rank != rank {
            continue;
        }
        let TrackKind::Thread { pid, tid } = track.kind else {
            continue;
        };
        let Some((role, process_name)) = roles.get(&pid) else {
            continue;
        };
        let line_name = track.name.clone().unwrap_or_else(|| tid.to_string());
        let class = classify::line_class(&line_name);
        let mode = match *role {
            PlaneRole::Device { index, gpu } => match class {
                LineClass::Stream => {
                    track.kind = TrackKind::DeviceQueue {
                        device: index,
                        queue: tid,
                    };
                    Mode::Stream
                }
                LineClass::Ops
                    if !gpu && !with_streams.contains(&pid) && line_name == "XLA Ops" =>
                {
                    track.kind = TrackKind::DeviceQueue {
                        device: index,
                        queue: tid,
                    };
                    Mode::Fixed("device_kernel")
                }
                _ => {
                    track.kind = TrackKind::Custom {
                        group: process_name.clone(),
                        name: line_name,
                    };
                    Mode::Fixed(classify::derived_category(class))
                }
            },
            PlaneRole::HostCpu | PlaneRole::Other => Mode::Host(class),
        };
        modes.insert(i as u32, mode);
    }

    let mut categories: FxHashMap<&'static str, (StrId, Level)> = FxHashMap::default();
    let mut category = |trace: &mut Trace, name: &'static str| {
        *categories.entry(name).or_insert_with(|| {
            (
                trace.intern(name),
                classify::level(&options.level_map, name),
            )
        })
    };
    let parse_args = |trace: &Trace, id| -> TfArgs {
        trace
            .args_text(id)
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or_default()
    };

    for i in 0..trace.spans.len() {
        let span = &trace.spans[i];
        let Some(&mode) = modes.get(&span.track.0) else {
            continue;
        };
        let args = parse_args(trace, span.args);
        let correlation = span.correlation.get().or_else(|| args.correlation());
        let name = trace.str(span.name);
        let cat = match mode {
            Mode::Stream => classify::stream_category(name, args.memcpy_details.is_some()),
            Mode::Fixed(cat) => cat,
            Mode::Host(class) => {
                classify::host_category(class, name, correlation.is_some(), args.is_eager.is_some())
            }
        };
        let (cat, level) = category(trace, cat);
        let span = &mut trace.spans[i];
        span.category = cat;
        span.level = level;
        span.correlation = correlation.into();
    }
    for i in 0..trace.instants.len() {
        let instant = &trace.instants[i];
        let Some(&mode) = modes.get(&instant.track.0) else {
            continue;
        };
        let args = parse_args(trace, instant.args);
        let name = trace.str(instant.name);
        let cat = match mode {
            Mode::Stream => classify::stream_category(name, args.memcpy_details.is_some()),
            Mode::Fixed(cat) => cat,
            Mode::Host(class) => classify::host_category(
                class,
                name,
                args.correlation().is_some(),
                args.is_eager.is_some(),
            ),
        };
        let (cat, level) = category(trace, cat);
        let instant = &mut trace.instants[i];
        instant.category = cat;
        instant.level = level;
    }

    let mut indices: Vec<i64> = roles
        .values()
        .filter_map(|(role, _)| match role {
            PlaneRole::Device { index, .. } => Some(*index),
            _ => None,
        })
        .collect();
    indices.sort_unstable();
    for index in indices {
        let known = trace
            .devices
            .iter()
            .any(|d| d.index == index && d.rank.is_none_or(|r| r == rank));
        if !known {
            trace.devices.push(Device {
                rank: Some(rank),
                index,
                ..Device::default()
            });
        }
    }
}
