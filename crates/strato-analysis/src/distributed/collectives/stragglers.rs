//! The ranks that arrive last ([`Straggler`]) and why ([`straggler_cause`]): what the late rank's
//! CPU and device were doing while the others waited.

use rustc_hash::FxHashMap;
use serde::Serialize;
use strato_trace::{Level, Ns, RankId, SpanId, Trace, TrackKind};

use super::calls::{CollectiveCall, RankCollectives};
use super::matching::CollectiveInstance;
use crate::distributed::clock_align::ClockAlignment;

/// Why a rank was late to a collective. Written (JSON, tables) as its snake_case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StragglerVerdict {
    /// Its CPU launched the collective after the first peer had arrived.
    LateLaunch,
    /// Launched in time; the device was busy with other work (more than half of the window).
    DeviceBusy,
    /// Neither (e.g. a wait on an event, or the launch is not in the input).
    Other,
}

impl StragglerVerdict {
    /// The name written in outputs: `late_launch`, `device_busy`, `other`.
    pub fn as_str(self) -> &'static str {
        match self {
            StragglerVerdict::LateLaunch => "late_launch",
            StragglerVerdict::DeviceBusy => "device_busy",
            StragglerVerdict::Other => "other",
        }
    }
}

/// What the late rank was doing while the others waited.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StragglerCause {
    /// Why it was late.
    pub verdict: StragglerVerdict,
    /// The window on the late rank's own clock: from the first peer's arrival to its own.
    pub window_start: Ns,
    pub window_end: Ns,
    /// Launch start minus window start (positive: launched after the first peer arrived).
    pub launch_delay_ns: Option<Ns>,
    /// The CPU op on the launching thread that took most of the window before the launch
    /// (not one enclosing the launch, unless no other op ran).
    pub cpu_op: Option<String>,
    pub cpu_level: Option<Level>,
    pub cpu_op_ns: Option<Ns>,
    /// The outermost op around `cpu_op` on that thread (the phase or step it belongs to).
    pub cpu_context: Option<String>,
    /// Device: time busy (union of its device ops on the kernel's device) in the window, and
    /// the device op that took most of it.
    pub device_busy_ns: Ns,
    pub device_op: Option<String>,
    pub device_op_ns: Option<Ns>,
}

/// One of the worst late arrivals and its cause.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Straggler {
    /// Index in [`CollectivesReport::instances`](super::CollectivesReport::instances).
    pub instance: usize,
    pub rank: RankId,
    pub job_rank: i64,
    /// The others' waits summed.
    pub imposed_wait_ns: Ns,
    /// Last arrival minus the second-to-last.
    pub lateness_ns: Ns,
    pub cause: StragglerCause,
}

/// What the straggler analysis asks of the late rank's events: what it was doing in
/// `[window_start, window_end)` (its own clock) before `call` ([`straggler_cause`]).
#[derive(Debug, Clone, PartialEq)]
pub struct CauseRequest<'a> {
    pub rank: RankId,
    pub call: &'a CollectiveCall,
    pub window_start: Ns,
    pub window_end: Ns,
}

/// The straggler of instance `index` without its cause, and the request for the cause.
pub(super) fn straggler<'a>(
    ranks: &'a [RankCollectives],
    instances: &[CollectiveInstance],
    index: usize,
    imposed: Ns,
    clock: &ClockAlignment,
) -> Option<(Straggler, CauseRequest<'a>)> {
    let inst = &instances[index];
    let last = inst
        .members
        .iter()
        .find(|m| Some(m.rank) == inst.last_rank)?;
    let mut others: Vec<Ns> = inst
        .members
        .iter()
        .filter(|m| m.rank != last.rank)
        .map(|m| m.start)
        .collect();
    others.sort_unstable();
    let first_other = *others.first()?;
    let second_last = *others.last()?;
    let shift = clock.shift_of(last.rank);
    let window_start = first_other - shift;
    let window_end = last.local_start;
    let call = ranks
        .iter()
        .find(|r| r.rank == last.rank)
        .map(|r| &r.calls[last.call])?;
    let request = CauseRequest {
        rank: last.rank,
        call,
        window_start,
        window_end,
    };
    let straggler = Straggler {
        instance: index,
        rank: last.rank,
        job_rank: last.job_rank,
        imposed_wait_ns: imposed,
        lateness_ns: last.start - second_last,
        cause: StragglerCause::unknown(window_start, window_end),
    };
    Some((straggler, request))
}

impl StragglerCause {
    /// Nothing known yet about the window (filled by [`straggler_cause`]).
    pub fn unknown(window_start: Ns, window_end: Ns) -> StragglerCause {
        StragglerCause {
            verdict: StragglerVerdict::Other,
            window_start,
            window_end,
            launch_delay_ns: None,
            cpu_op: None,
            cpu_level: None,
            cpu_op_ns: None,
            cpu_context: None,
            device_busy_ns: 0,
            device_op: None,
            device_op_ns: None,
        }
    }
}

/// What rank `rank` did in `[window_start, window_end)` (its own clock) before `call`: its
/// device ops on the call's device in the window, and the CPU ops of the launching thread
/// before the launch. `call`'s span ids are `trace`'s.
pub fn straggler_cause(
    trace: &Trace,
    rank: RankId,
    call: &CollectiveCall,
    window_start: Ns,
    window_end: Ns,
) -> StragglerCause {
    let overlap = |s: Ns, e: Ns, a: Ns, b: Ns| (e.min(b) - s.max(a)).max(0);
    // Device: union of the device ops on the kernel's device in the window.
    let mut device_spans: Vec<(Ns, Ns)> = Vec::new();
    let mut by_name: FxHashMap<strato_trace::StrId, Ns> = FxHashMap::default();
    for (i, s) in trace.spans.iter().enumerate() {
        if SpanId(i as u32) == call.kernel {
            continue;
        }
        let t = trace.track(s.track);
        if t.rank != rank {
            continue;
        }
        if let TrackKind::DeviceQueue { device, .. } = t.kind {
            if device != call.device || !s.level.is_device_op() {
                continue;
            }
            let o = overlap(s.start, s.end, window_start, window_end);
            if o > 0 {
                device_spans.push((s.start.max(window_start), s.end.min(window_end)));
                *by_name.entry(s.name).or_insert(0) += o;
            }
        }
    }
    device_spans.sort_unstable();
    let mut device_busy_ns = 0;
    let mut cur: Option<(Ns, Ns)> = None;
    for (s, e) in device_spans {
        match cur {
            Some((cs, ce)) if s <= ce => cur = Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                device_busy_ns += ce - cs;
                cur = Some((s, e));
            }
            None => cur = Some((s, e)),
        }
    }
    if let Some((cs, ce)) = cur {
        device_busy_ns += ce - cs;
    }
    let top_device = by_name
        .into_iter()
        .max_by_key(|(name, ns)| (*ns, std::cmp::Reverse(*name)));
    // CPU: the launching thread before the launch.
    let mut cpu_op = None;
    let mut cpu_level = None;
    let mut cpu_op_ns = None;
    let mut cpu_context = None;
    let mut launch_delay_ns = None;
    if let Some(l) = call.launch {
        let launch = &trace.spans[l.0 as usize];
        launch_delay_ns = Some(launch.start - window_start);
        let cpu_end = launch.start.min(window_end);
        if cpu_end > window_start {
            let encloses = |s: &strato_trace::Span| s.start <= launch.start && s.end >= launch.end;
            let mut best: Option<(Ns, Ns, usize)> = None; // (overlap, start, index)
            let mut best_enclosing: Option<(Ns, usize)> = None; // (start, index)
            let mut outermost: Option<(Ns, Ns, usize)> = None;
            for (i, s) in trace.spans.iter().enumerate() {
                if s.track != launch.track || i == l.0 as usize {
                    continue;
                }
                let o = overlap(s.start, s.end, window_start, cpu_end);
                if o == 0 {
                    continue;
                }
                if encloses(s) {
                    if best_enclosing.is_none_or(|(st, _)| s.start > st) {
                        best_enclosing = Some((s.start, i));
                    }
                } else if best.is_none_or(|(bo, bs, _)| (o, s.start) > (bo, bs)) {
                    best = Some((o, s.start, i));
                }
                let len = s.end - s.start;
                if outermost.is_none_or(|(ol, os, _)| {
                    (len, std::cmp::Reverse(s.start)) > (ol, std::cmp::Reverse(os))
                }) {
                    outermost = Some((len, s.start, i));
                }
            }
            let chosen = best
                .map(|(o, _, i)| (i, o))
                .or(best_enclosing.map(|(_, i)| {
                    let s = &trace.spans[i];
                    (i, overlap(s.start, s.end, window_start, cpu_end))
                }));
            if let Some((i, o)) = chosen {
                let s = &trace.spans[i];
                cpu_op = Some(trace.str(s.name).to_owned());
                cpu_level = Some(s.level);
                cpu_op_ns = Some(o);
            }
            if let Some((_, _, i)) = outermost {
                cpu_context = Some(trace.str(trace.spans[i].name).to_owned());
            }
        }
    }
    let window = (window_end - window_start).max(0);
    let verdict = match launch_delay_ns {
        Some(d) if d > 0 => StragglerVerdict::LateLaunch,
        _ if window > 0 && device_busy_ns * 2 > window => StragglerVerdict::DeviceBusy,
        _ => StragglerVerdict::Other,
    };
    StragglerCause {
        verdict,
        window_start,
        window_end,
        launch_delay_ns,
        cpu_op,
        cpu_level,
        cpu_op_ns,
        cpu_context,
        device_busy_ns,
        device_op: top_device.as_ref().map(|(n, _)| trace.str(*n).to_owned()),
        device_op_ns: top_device.map(|(_, ns)| ns),
    }
}
