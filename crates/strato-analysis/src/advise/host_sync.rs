//! Rule `host-sync`: host synchronisation that stalls the CPU.
//!
//! A *stall* is a CPU span (on a thread track) that waits for the device:
//! - an accelerator API synchronisation: a call whose name (version suffix dropped) is a
//!   device/context, stream or event synchronize (`cudaDeviceSynchronize`,
//!   `cudaStreamSynchronize`, `cudaEventSynchronize`, `cuCtxSynchronize`, the `hip*` and
//!   `cu*` equivalents), `clFinish` or `clWaitForEvents`, or an OpenCL enqueue made
//!   blocking (a read, write or map whose `blocking` attribute is true);
//! - a framework op that hides one: `aten::_local_scalar_dense` (what `.item()`, `bool(t)`
//!   and `int(t)` run) and `aten::nonzero` (its output size is read back to the host);
//! - a copy to pageable host memory: the API call that launched a device-to-host copy whose
//!   destination is pageable (`Memcpy DtoH (Device -> Pageable)`, nsys `dstKind`
//!   `Pageable`); the runtime returns only when the copy is done.
//!
//! Time at stake: the union of the stalls' intervals. Evidence: the longest stalls, each
//! followed by what was queued before it — the device op of the same rank that finished last
//! while the host waited (`waited_for`).

use serde::{Deserialize, Serialize};
use strato_trace::{Level, Trace, TrackKind};

use super::{api_name, human, span_evidence, Draft, Evidence, Facts};
use crate::analyzed::Analyzed;

/// The rule id.
pub const ID: &str = "host-sync";

/// Thresholds of [`run`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub enabled: bool,
    /// Stalls shorter than this (us) are not counted (a synchronize that found the device
    /// idle costs a call, not a stall).
    pub min_stall_us: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            enabled: true,
            min_stall_us: 0.0,
        }
    }
}

/// What kind of stall a CPU span is, if any.
pub fn stall_kind(trace: &Trace, facts: &Facts, span: u32) -> Option<&'static str> {
    let s = &trace.spans[span as usize];
    if !matches!(trace.track(s.track).kind, TrackKind::Thread { .. }) {
        return None;
    }
    let name = api_name(trace.str(s.name));
    match s.level {
        Level::AcceleratorApi => {
            let lower = name.to_ascii_lowercase();
            if lower.ends_with("devicesynchronize") || lower.ends_with("ctxsynchronize") {
                Some("device sync")
            } else if lower.ends_with("streamsynchronize") {
                Some("stream sync")
            } else if lower.ends_with("eventsynchronize") || name == "clWaitForEvents" {
                Some("event sync")
            } else if name == "clFinish" {
                Some("queue finish")
            } else if name.starts_with("clEnqueue")
                && crate::paths::critical_path::is_blocking_call(trace, strato_trace::SpanId(span))
            {
                Some("blocking OpenCL transfer")
            } else if to_pageable_host(trace, facts, span) {
                Some("copy to pageable host memory")
            } else {
                None
            }
        }
        Level::Backend => match name {
            "aten::_local_scalar_dense" => Some(".item() (aten::_local_scalar_dense)"),
            "aten::nonzero" => Some("aten::nonzero"),
            _ => None,
        },
        _ => None,
    }
}

/// True when API call `span` launched a device-to-host copy into pageable memory.
fn to_pageable_host(trace: &Trace, facts: &Facts, span: u32) -> bool {
    facts.copies_of_launch.get(&span).is_some_and(|copies| {
        copies.iter().any(|&c| {
            let d = &trace.spans[c as usize];
            super::sync_copy::pageable_side(trace, d) == Some(false)
        })
    })
}

/// Runs the rule.
pub fn run(analyzed: &Analyzed, facts: &Facts, config: &Config) -> Vec<Draft> {
    let trace = analyzed.trace();
    let min = (config.min_stall_us * 1e3) as i64;
    let mut stalls: Vec<(u32, &'static str)> = Vec::new();
    for (i, s) in trace.spans.iter().enumerate() {
        if !matches!(s.level, Level::AcceleratorApi | Level::Backend) || s.duration() < min {
            continue;
        }
        if let Some(kind) = stall_kind(trace, facts, i as u32) {
            stalls.push((i as u32, kind));
        }
    }
    if stalls.is_empty() {
        return Vec::new();
    }
    let mut by_kind: std::collections::BTreeMap<&str, (usize, i64)> = Default::default();
    for &(i, k) in &stalls {
        let e = by_kind.entry(k).or_default();
        e.0 += 1;
        // Stalls on several threads overlap: the sum can pass i64 on long spans.
        e.1 = e.1.saturating_add(trace.spans[i as usize].duration());
    }
    let intervals = stalls
        .iter()
        .map(|&(i, _)| facts.clock.span(trace, &trace.spans[i as usize]))
        .collect();
    stalls.sort_by_key(|&(i, _)| {
        (
            std::cmp::Reverse(trace.spans[i as usize].duration()),
            super::time_key(trace, i),
        )
    });
    let mut evidence: Vec<Evidence> = Vec::new();
    for &(i, kind) in stalls.iter().take(super::MAX_EVIDENCE / 2) {
        let s = &trace.spans[i as usize];
        evidence.push(span_evidence(
            trace,
            "sync",
            i,
            format!("{kind}: {} ({})", trace.str(s.name), human(s.duration())),
        ));
        if let Some(w) = waited_for(trace, facts, i) {
            let ws = &trace.spans[w as usize];
            evidence.push(span_evidence(
                trace,
                "waited_for",
                w,
                format!("queued before: {}", trace.str(ws.name)),
            ));
        }
    }
    let kinds: Vec<String> = by_kind
        .iter()
        .map(|(k, (n, t))| format!("{n} x {k} ({})", human(*t)))
        .collect();
    vec![Draft {
        intervals,
        evidence,
        message: format!(
            "The CPU waited for the device in {} synchronisations: {}.",
            stalls.len(),
            kinds.join(", ")
        ),
        advice: "Remove synchronisations from the loop: keep values on the device instead of \
                 reading them with .item()/bool()/nonzero; log metrics every N steps; use \
                 events and non_blocking copies into pinned memory; synchronise once per step \
                 at most."
            .into(),
    }]
}

/// The device op of the sync's rank that finished last while the host waited (ended inside
/// the sync, or the last one to end before it).
fn waited_for(trace: &Trace, facts: &Facts, sync: u32) -> Option<u32> {
    let s = &trace.spans[sync as usize];
    let rank = trace.track(s.track).rank.0;
    let mut best: Option<(i64, u32)> = None;
    for (_, ops) in facts.device_work.range((rank, i64::MIN)..=(rank, i64::MAX)) {
        let upto = ops.partition_point(|&o| trace.spans[o as usize].start < s.end);
        // Look back a bounded number of ops: the queue ahead of a sync is recent work.
        for &o in ops[..upto].iter().rev().take(4096) {
            let d = &trace.spans[o as usize];
            if d.end <= s.end && best.is_none_or(|b| d.end > b.0) {
                best = Some((d.end, o));
            }
        }
    }
    best.map(|b| b.1)
}
