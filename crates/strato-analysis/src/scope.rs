//! Scoping helpers shared by the cross-stack analyses (breakdown, transitions, hierarchy,
//! layers): which spans are operations, which levels are CPU strata and which device work, the
//! processes of a trace with their threads and *annotated thread*, the innermost operation on
//! that thread at any instant, the launch of a device op (by correlation id) and the process
//! and operation a device op is attributed to.
//!
//! No window or conservation rule of its own: this module only classifies and indexes.
//!
//! Rules (see `docs/analyses/breakdown.md`):
//! - an *operation* span is a span of level `Operation` on a CPU thread, or a span named
//!   `ProfilerStep#N` at any level (the 2021 Kineto schema files step markers as `Operator`);
//! - *CPU strata*: Python, Backend, Simulator, Library, AcceleratorApi, Os, Overhead. `Other`
//!   spans (profiler ranges) belong to no stratum and are ignored;
//! - *device work*: DeviceKernel, DeviceCopy, DeviceSet on a device queue (device-side syncs are
//!   waits, not work);
//! - a process is (rank, pid) of its thread tracks. Its *annotated thread* is the thread whose
//!   operation spans cover the most time (ties: more operation spans, more CPU spans, lower
//!   track id). Where no thread has operations it is the thread with the most CPU spans;
//! - a device op's launch is the CPU span of the same rank with the same correlation id
//!   (runtime calls preferred); the device op belongs to that span's process and to the
//!   operation innermost on that process's annotated thread at the launch's start. A device op
//!   without a launch is given to the rank's only process when the rank has exactly one
//!   (operation at the device op's own start), else it stays unattributed;
//! - graph-capture tracks ([`strato_trace::names::is_graph_capture_track`],
//!   [`crate::cross_stack::graphs`]: copies of the ops that captured a CUDA/HIP graph, laid out
//!   inside the graph launch) belong to their process for attribution only: they are not among its
//!   `threads` (no CPU time) and never its annotated thread. A device op launched from one belongs
//!   to the operation innermost on that track at the launch, else to the operation on the annotated
//!   thread at the launch (as for any launch).

use std::cmp::Reverse;
use std::collections::BTreeSet;

use rustc_hash::FxHashMap;
use serde::Serialize;
use strato_trace::{Level, Ns, RankId, Span, Trace, TrackId, TrackKind};

/// True for the CPU strata the breakdown reports.
pub fn is_cpu_level(level: Level) -> bool {
    matches!(
        level,
        Level::Python
            | Level::Backend
            | Level::Simulator
            | Level::Library
            | Level::AcceleratorApi
            | Level::Os
            | Level::Overhead
    )
}

/// True for device work: kernels, copies and sets.
pub fn is_device_work(level: Level) -> bool {
    matches!(
        level,
        Level::DeviceKernel | Level::DeviceCopy | Level::DeviceSet
    )
}

/// True when a thread-state span of `s`'s kind: the OS level's per-thread states.
pub(crate) fn is_thread_state(trace: &Trace, s: &strato_trace::Span) -> bool {
    s.level == Level::Os && trace.str(s.category) == strato_trace::names::THREAD_STATE_CATEGORY
}

/// True when `name` is a PyTorch profiler step marker (`ProfilerStep#12`).
pub fn is_step_name(name: &str) -> bool {
    name.strip_prefix("ProfilerStep#")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The level a span is treated at: `Operation` for step markers, else its own.
pub fn effective_level(trace: &Trace, span: &Span) -> Level {
    if span.level != Level::Operation
        && span.level != Level::Phase
        && !trace.track(span.track).is_device()
        && is_step_name(trace.str(span.name))
    {
        Level::Operation
    } else {
        span.level
    }
}

/// A process: a pid of a rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct ProcessKey {
    pub rank: RankId,
    pub pid: i64,
}

/// One process with its threads and operation timeline.
#[derive(Debug, Clone)]
pub struct ProcessScope {
    pub key: ProcessKey,
    /// Thread tracks of the process, by track id.
    pub threads: Vec<TrackId>,
    /// The annotated thread (see the module docs); `None` only when the process has no spans.
    pub annotated: Option<TrackId>,
    /// Disjoint `[start, end)` segments of the annotated thread with the innermost operation
    /// span active there, sorted by start.
    pub op_segments: Vec<(Ns, Ns, u32)>,
    /// Graph-capture tracks of the process with their operation segments (see the module docs).
    pub graph_capture: Vec<(TrackId, Vec<OpSegment>)>,
}

/// `[start, end)` of a segment and the innermost operation span active there.
pub type OpSegment = (Ns, Ns, u32);

fn segment_at(segments: &[(Ns, Ns, u32)], t: Ns) -> Option<u32> {
    let i = segments.partition_point(|s| s.0 <= t);
    let seg = segments.get(i.checked_sub(1)?)?;
    (t < seg.1).then_some(seg.2)
}

impl ProcessScope {
    /// The innermost operation span on the annotated thread at `t`.
    pub fn operation_at(&self, t: Ns) -> Option<u32> {
        segment_at(&self.op_segments, t)
    }

    /// The operation a launch span of this process belongs to: on a graph-capture track, the
    /// innermost operation on that track at its start, if any; else [`Self::operation_at`].
    pub fn operation_of_launch(&self, launch: &Span) -> Option<u32> {
        self.graph_capture
            .iter()
            .find(|g| g.0 == launch.track)
            .and_then(|g| segment_at(&g.1, launch.start))
            .or_else(|| self.operation_at(launch.start))
    }
}

/// How a device op found its process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AttributedBy {
    /// Its launch's correlation id.
    Correlation,
    /// The rank has a single process.
    OnlyProcess,
}

/// The process and operation a device op belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceOwner {
    /// The device op's span index.
    pub span: u32,
    /// Index into [`Scopes::processes`].
    pub process: usize,
    /// The launching operation span, when one was active.
    pub operation: Option<u32>,
    /// The launch span, when found by correlation.
    pub launch: Option<u32>,
    pub by: AttributedBy,
}

/// The scoping index of a whole trace.
#[derive(Debug, Clone)]
pub struct Scopes {
    pub processes: Vec<ProcessScope>,
    /// Span ids of each track (in span order).
    pub by_track: Vec<Vec<u32>>,
    /// Process index of each thread track (`None` for other tracks).
    pub process_of_track: Vec<Option<usize>>,
    /// (rank, correlation) -> launching CPU span.
    pub launch: FxHashMap<(u32, u64), u32>,
    /// Device work spans with their owner; `unattributed` lists the rest.
    pub device_owners: Vec<DeviceOwner>,
    pub unattributed: Vec<u32>,
}

/// Tracks the innermost of a set of nested (or overlapping) spans: the active span with the
/// latest start; for equal starts the earlier end, then the lower stratum, then the later in
/// the source's numbering ([`Span::same_extent_order`]), then the later in the trace.
#[derive(Debug, Default)]
pub struct Innermost {
    set: BTreeSet<(Ns, Reverse<Ns>, u8, u32, u32)>,
}

impl Innermost {
    pub fn insert(&mut self, span: &Span, level: Level, idx: u32) {
        self.insert_extent((span.start, span.end), level, span.same_extent_order(), idx);
    }
    pub fn remove(&mut self, span: &Span, level: Level, idx: u32) {
        self.remove_extent((span.start, span.end), level, span.same_extent_order(), idx);
    }
    /// [`Innermost::insert`] of a span given by its `(start, end)` and
    /// [`Span::same_extent_order`].
    pub fn insert_extent(&mut self, (start, end): (Ns, Ns), level: Level, order: u32, idx: u32) {
        self.set
            .insert((start, Reverse(end), level.code(), order, idx));
    }
    /// [`Innermost::remove`] of a span given by its `(start, end)` and
    /// [`Span::same_extent_order`].
    pub fn remove_extent(&mut self, (start, end): (Ns, Ns), level: Level, order: u32, idx: u32) {
        self.set
            .remove(&(start, Reverse(end), level.code(), order, idx));
    }
    /// The innermost active span and its level code.
    pub fn get(&self) -> Option<(u32, u8)> {
        self.set.last().map(|k| (k.4, k.2))
    }
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }
}

/// How a thread ranks as the annotated thread: operation coverage, operation spans, CPU spans,
/// lower thread id ([`thread_tie`]).
type ThreadScore = (Ns, usize, usize, Reverse<(i64, u32)>);

/// The last key of [`ThreadScore`]: the lower thread id, then the lower track id. The thread
/// id first, as the track ids follow the order a file lists its events in.
fn thread_tie(trace: &Trace, t: TrackId) -> Reverse<(i64, u32)> {
    let tid = match trace.track(t).kind {
        TrackKind::Thread { tid, .. } => tid,
        _ => i64::MAX,
    };
    Reverse((tid, t.0))
}

/// Flattens spans (nested or overlapping, e.g. operations) into disjoint `[start, end)`
/// segments labelled with the innermost span active there.
pub fn flatten_innermost(trace: &Trace, ops: &[u32]) -> Vec<(Ns, Ns, u32)> {
    innermost_segments(ops.iter().map(|&i| {
        let s = &trace.spans[i as usize];
        (s.start, s.end, s.same_extent_order(), i)
    }))
}

/// [`flatten_innermost`] of spans given by their extents, [`Span::same_extent_order`] and ids
/// (`(start, end, order, id)`), for callers that keep the extents without the spans (the
/// streamed hierarchy).
pub(crate) fn innermost_segments(
    ops: impl Iterator<Item = (Ns, Ns, u32, u32)>,
) -> Vec<(Ns, Ns, u32)> {
    let mut events: Vec<(Ns, bool, u32, Ns, Ns, u32)> = Vec::with_capacity(ops.size_hint().0 * 2);
    for (start, end, order, i) in ops {
        if end > start {
            events.push((start, true, i, start, end, order));
            events.push((end, false, i, start, end, order));
        }
    }
    events.sort_unstable_by_key(|e| (e.0, e.1, e.2));
    let mut active = Innermost::default();
    let mut out: Vec<(Ns, Ns, u32)> = Vec::new();
    let mut k = 0;
    while k < events.len() {
        let t = events[k].0;
        while k < events.len() && events[k].0 == t {
            let (_, start, i, s, e, order) = events[k];
            if start {
                active.insert_extent((s, e), Level::Operation, order, i);
            } else {
                active.remove_extent((s, e), Level::Operation, order, i);
            }
            k += 1;
        }
        let Some(next) = events.get(k).map(|e| e.0) else {
            break;
        };
        if let Some((op, _)) = active.get() {
            match out.last_mut() {
                Some(last) if last.1 == t && last.2 == op => last.1 = next,
                _ => out.push((t, next, op)),
            }
        }
    }
    out
}

impl Scopes {
    /// Builds the index. O(n log n) in the number of spans.
    pub fn build(trace: &Trace) -> Scopes {
        let mut by_track: Vec<Vec<u32>> = vec![Vec::new(); trace.tracks.len()];
        for (i, s) in trace.spans.iter().enumerate() {
            by_track[s.track.0 as usize].push(i as u32);
        }
        // Processes from thread tracks.
        let mut index: FxHashMap<ProcessKey, usize> = FxHashMap::default();
        let mut processes: Vec<ProcessScope> = Vec::new();
        let mut process_of_track = vec![None; trace.tracks.len()];
        for (t, track) in trace.tracks.iter().enumerate() {
            if let TrackKind::Thread { pid, .. } = track.kind {
                if by_track[t].is_empty() {
                    continue;
                }
                let key = ProcessKey {
                    rank: track.rank,
                    pid,
                };
                let p = *index.entry(key).or_insert_with(|| {
                    processes.push(ProcessScope {
                        key,
                        threads: Vec::new(),
                        annotated: None,
                        op_segments: Vec::new(),
                        graph_capture: Vec::new(),
                    });
                    processes.len() - 1
                });
                if strato_trace::names::is_graph_capture_track(track) {
                    processes[p]
                        .graph_capture
                        .push((TrackId(t as u32), Vec::new()));
                } else {
                    processes[p].threads.push(TrackId(t as u32));
                }
                process_of_track[t] = Some(p);
            }
        }
        processes.sort_by_key(|p| p.key);
        for (i, p) in processes.iter().enumerate() {
            for t in p.threads.iter().chain(p.graph_capture.iter().map(|g| &g.0)) {
                process_of_track[t.0 as usize] = Some(i);
            }
        }
        // Annotated thread and its operation segments.
        for p in &mut processes {
            let mut best: Option<(ThreadScore, TrackId, Vec<u32>)> = None;
            for &t in &p.threads {
                let spans = &by_track[t.0 as usize];
                let ops: Vec<u32> = spans
                    .iter()
                    .copied()
                    .filter(|&i| {
                        effective_level(trace, &trace.spans[i as usize]) == Level::Operation
                    })
                    .collect();
                let covered = crate::device_time::gpu_time::length(
                    &crate::device_time::gpu_time::merge(ops.iter().map(|&i| {
                        let s = &trace.spans[i as usize];
                        (s.start, s.end)
                    })),
                );
                let cpu = spans
                    .iter()
                    .filter(|&&i| is_cpu_level(trace.spans[i as usize].level))
                    .count();
                let score = (covered, ops.len(), cpu, thread_tie(trace, t));
                if best.as_ref().is_none_or(|b| score > b.0) {
                    best = Some((score, t, ops));
                }
            }
            if let Some((_, t, ops)) = best {
                p.annotated = Some(t);
                p.op_segments = flatten_innermost(trace, &ops);
            }
            for (t, segments) in &mut p.graph_capture {
                let ops: Vec<u32> = by_track[t.0 as usize]
                    .iter()
                    .copied()
                    .filter(|&i| {
                        effective_level(trace, &trace.spans[i as usize]) == Level::Operation
                    })
                    .collect();
                *segments = flatten_innermost(trace, &ops);
            }
        }
        // Launches by correlation: runtime calls preferred over other CPU spans.
        let mut launch: FxHashMap<(u32, u64), u32> = FxHashMap::default();
        for (i, s) in trace.spans.iter().enumerate() {
            let Some(c) = s.correlation.get() else {
                continue;
            };
            let track = trace.track(s.track);
            if !matches!(track.kind, TrackKind::Thread { .. }) {
                continue;
            }
            let key = (track.rank.0, c);
            match launch.get(&key) {
                Some(&old)
                    if trace.spans[old as usize].level == Level::AcceleratorApi
                        || s.level != Level::AcceleratorApi => {}
                _ => {
                    launch.insert(key, i as u32);
                }
            }
        }
        // Device owners.
        let mut only_process: FxHashMap<u32, Option<usize>> = FxHashMap::default();
        for (i, p) in processes.iter().enumerate() {
            only_process
                .entry(p.key.rank.0)
                .and_modify(|v| *v = None)
                .or_insert(Some(i));
        }
        let mut device_owners = Vec::new();
        let mut unattributed = Vec::new();
        for (i, s) in trace.spans.iter().enumerate() {
            let track = trace.track(s.track);
            if !track.is_device() || !is_device_work(s.level) {
                continue;
            }
            let found = s
                .correlation
                .get()
                .and_then(|c| launch.get(&(track.rank.0, c)).copied());
            let owner = match found {
                Some(l) => {
                    let ls = &trace.spans[l as usize];
                    process_of_track[ls.track.0 as usize].map(|p| DeviceOwner {
                        span: i as u32,
                        process: p,
                        operation: processes[p].operation_of_launch(ls),
                        launch: Some(l),
                        by: AttributedBy::Correlation,
                    })
                }
                None => only_process
                    .get(&track.rank.0)
                    .copied()
                    .flatten()
                    .map(|p| DeviceOwner {
                        span: i as u32,
                        process: p,
                        operation: processes[p].operation_at(s.start),
                        launch: None,
                        by: AttributedBy::OnlyProcess,
                    }),
            };
            match owner {
                Some(o) => device_owners.push(o),
                None => unattributed.push(i as u32),
            }
        }
        Scopes {
            processes,
            by_track,
            process_of_track,
            launch,
            device_owners,
            unattributed,
        }
    }

    /// The launch span of device op `span` (by correlation), if any.
    pub fn launch_of(&self, trace: &Trace, span: u32) -> Option<u32> {
        let s = &trace.spans[span as usize];
        let rank = trace.track(s.track).rank.0;
        s.correlation
            .get()
            .and_then(|c| self.launch.get(&(rank, c)).copied())
    }
}

/// The processes of a trace's thread tracks, as [`Scopes::build`] makes them, for a caller
/// that kept its own copies of the spans (the streamed analyses): `facts(t)` says of thread
/// track `t` whether it has spans and, if so, what ranks it as the annotated thread
/// (operation time covered, operation spans, CPU spans).
#[derive(Debug, Default)]
pub(crate) struct ProcessTracks {
    /// Sorted by key, as [`Scopes::processes`].
    pub keys: Vec<ProcessKey>,
    pub threads: Vec<Vec<TrackId>>,
    pub graph_capture: Vec<Vec<TrackId>>,
    pub annotated: Vec<Option<TrackId>>,
    /// Per track: its process (graph-capture tracks included).
    pub process_of_track: Vec<Option<usize>>,
}

impl ProcessTracks {
    pub(crate) fn build(
        trace: &Trace,
        tracks: usize,
        facts: impl Fn(usize) -> Option<(Ns, usize, usize)>,
    ) -> ProcessTracks {
        let mut by_key: std::collections::BTreeMap<ProcessKey, (Vec<TrackId>, Vec<TrackId>)> =
            std::collections::BTreeMap::new();
        let mut scores: Vec<Option<(Ns, usize, usize)>> = vec![None; tracks];
        for (t, score) in scores.iter_mut().enumerate() {
            let Some(track) = trace.tracks.get(t) else {
                continue;
            };
            let TrackKind::Thread { pid, .. } = track.kind else {
                continue;
            };
            let Some(facts) = facts(t) else { continue };
            let key = ProcessKey {
                rank: track.rank,
                pid,
            };
            let entry = by_key.entry(key).or_default();
            if strato_trace::names::is_graph_capture_track(track) {
                entry.1.push(TrackId(t as u32));
            } else {
                entry.0.push(TrackId(t as u32));
                *score = Some(facts);
            }
        }
        let mut out = ProcessTracks {
            process_of_track: vec![None; tracks],
            ..ProcessTracks::default()
        };
        for (p, (key, (threads, capture))) in by_key.into_iter().enumerate() {
            let mut best: Option<(ThreadScore, TrackId)> = None;
            for &t in &threads {
                let (covered, ops, cpu) = scores[t.0 as usize].unwrap_or_default();
                let score = (covered, ops, cpu, thread_tie(trace, t));
                if best.as_ref().is_none_or(|b| score > b.0) {
                    best = Some((score, t));
                }
            }
            for t in threads.iter().chain(&capture) {
                out.process_of_track[t.0 as usize] = Some(p);
            }
            out.keys.push(key);
            out.annotated.push(best.map(|b| b.1));
            out.threads.push(threads);
            out.graph_capture.push(capture);
        }
        out
    }

    /// Per rank: its only process, `None` when it has several.
    pub(crate) fn only_process(&self) -> FxHashMap<u32, Option<usize>> {
        let mut only: FxHashMap<u32, Option<usize>> = FxHashMap::default();
        for (i, key) in self.keys.iter().enumerate() {
            only.entry(key.rank.0)
                .and_modify(|v| *v = None)
                .or_insert(Some(i));
        }
        only
    }
}

/// Offers `launch` (an accelerator API call when `api`) as the launch of `key` (rank,
/// correlation) among `launches`, as [`Scopes::build`] chooses it for a caller that meets the
/// thread spans in trace order (the streamed analyses): the first API call, else the first
/// thread span. `is_api` says whether a launch already chosen is an API call.
pub(crate) fn offer_launch<V>(
    launches: &mut FxHashMap<(u32, u64), V>,
    key: (u32, u64),
    launch: V,
    api: bool,
    is_api: impl Fn(&V) -> bool,
) {
    match launches.entry(key) {
        std::collections::hash_map::Entry::Occupied(mut old) => {
            if api && !is_api(old.get()) {
                old.insert(launch);
            }
        }
        std::collections::hash_map::Entry::Vacant(slot) => {
            slot.insert(launch);
        }
    }
}

/// Orders candidate launches (thread spans with a correlation, met in any order) so that each
/// (rank, correlation)'s own come together and the launch [`Scopes::build`] chooses comes first
/// among them: the rank's runtime calls with the correlation in trace order, then its other
/// thread spans with it in trace order. `key` gives a candidate's (rank index, correlation,
/// whether it is a runtime call, index in the trace). For the streamed analyses that choose
/// the launches once the input is read, into a sorted list.
pub(crate) fn sort_launch_candidates<T>(
    candidates: &mut [T],
    key: impl Fn(&T) -> (u32, u64, bool, u32),
) {
    candidates.sort_unstable_by_key(|c| {
        let (rank, correlation, api, index) = key(c);
        (rank, correlation, !api, index)
    });
}

/// What ranks a thread as its process's annotated thread ([`ProcessTracks::build`]'s facts),
/// from its spans' `(start, end, effective level, own level)`: the time its operations cover,
/// its operations, its CPU spans.
pub(crate) fn thread_score(
    spans: impl Iterator<Item = (Ns, Ns, Level, Level)> + Clone,
) -> (Ns, usize, usize) {
    let ops = spans.clone().filter(|s| s.2 == Level::Operation);
    let covered = crate::device_time::gpu_time::length(&crate::device_time::gpu_time::merge(
        ops.clone().map(|s| (s.0, s.1)),
    ));
    let cpu = spans.filter(|s| is_cpu_level(s.3)).count();
    (covered, ops.count(), cpu)
}

/// The operation of the segment at `t` ([`ProcessScope::operation_at`] over `segments`).
pub(crate) fn operation_in(segments: &[OpSegment], t: Ns) -> Option<u32> {
    segment_at(segments, t)
}

/// Display label of an operation: step markers fold into `ProfilerStep#*` unless `per_step`.
pub fn operation_label(name: &str, per_step: bool) -> String {
    if !per_step && is_step_name(name) {
        "ProfilerStep#*".to_owned()
    } else {
        name.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_names() {
        assert!(is_step_name("ProfilerStep#12"));
        assert!(!is_step_name("ProfilerStep#"));
        assert!(!is_step_name("ProfilerStep#1x"));
        assert_eq!(operation_label("ProfilerStep#3", false), "ProfilerStep#*");
        assert_eq!(operation_label("ProfilerStep#3", true), "ProfilerStep#3");
    }
}
