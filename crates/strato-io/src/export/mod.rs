//! Exporters: one module per output format, each a `write(trace, out)` that streams the
//! whole [`strato_trace::Trace`] to any `std::io::Write`.
//!
//! - [`perfetto`]: Perfetto protobuf (ui.perfetto.dev, trace_processor), with
//!   [`perfetto::summarize`] to decode and count one back; [`perfetto_proto`] (also `perfetto::proto`) holds the
//!   hand-written message subset.
//! - [`chrome`]: Chrome Trace Event JSON (chrome://tracing, ui.perfetto.dev, Kineto tools).
//! - [`firefox`]: CPU samples in the Firefox Profiler's processed format (the samples joined
//!   with their operations by the caller).
//!
//! What each format carries, the clock, and how to open the files: `docs/export.md`.

pub mod chrome;
pub mod firefox;
pub mod perfetto;
pub mod perfetto_proto;

use strato_trace::{RankId, Trace};

/// Display name of a device: `"GPU 0"`, or `"<name> (device 0)"` when the trace knows it.
pub(crate) fn device_label(trace: &Trace, rank: RankId, device: i64) -> String {
    let known = trace
        .devices
        .iter()
        .filter(|d| d.index == device && d.rank.is_none_or(|r| r == rank))
        .max_by_key(|d| d.rank.is_some())
        .and_then(|d| d.name.as_deref());
    match known {
        Some(name) => format!("{name} (device {device})"),
        None => format!("GPU {device}"),
    }
}
