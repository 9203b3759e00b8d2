//! [`BreakdownStream`]: the breakdown gathered batch by batch, so that `strato breakdown` on
//! one file or stored profile never holds the trace's spans (issue 28: the whole-trace
//! breakdown held every span with the scopes and the parent index, 0.34x the file on a 1.4 GB
//! trace).
//!
//! Kept per span of a CPU thread and per device op: its extent, name, levels and a few flags
//! (24 bytes, [`Kept`]) and its id in a list per track (4 bytes); per device op, its track and
//! correlation (24 bytes, [`DeviceOp`]); per (rank, correlation), the launch chosen so far.
//! Ids are the kept spans' positions, in trace order, so the sweep breaks ties as the whole
//! trace's span ids do. At the end, the processes, annotated threads and device owners are made as
//! [`crate::scope::Scopes::build`] makes them, each process is swept by the whole-trace sweep
//! ([`super::sweep`]), and its transitions are counted over the containment sweep of its
//! threads ([`crate::cross_stack::hierarchy::index::nest`]). The engine's tests hold the two to
//! the same bytes on every shared file, in batches of every size.

use rustc_hash::FxHashMap;
use strato_trace::{Level, Ns, StrId, Trace, TrackId, TrackKind};

use super::{
    is_os_syscall, summary, sweep, transition_from, AttributedBy, BreakdownOptions,
    BreakdownReport, Gathered, Kind, Labels, SpanFacts,
};
use crate::cross_stack::hierarchy::index::nest;
use crate::scope::{
    effective_level, innermost_segments, is_device_work, is_thread_state, offer_launch,
    operation_in, thread_score, OpSegment, ProcessTracks,
};

// The sizes the docs give (docs/analyses/breakdown.md, "Cost").
const _: () = assert!(std::mem::size_of::<Kept>() == 24);
const _: () = assert!(std::mem::size_of::<DeviceOp>() == 24);

/// [`Kept::bits`]: a thread-state span.
const THREAD_STATE: u8 = 1;
/// [`Kept::bits`]: a slow system call of the OS level.
const OS_SYSCALL: u8 = 2;

/// A span as the breakdown reads it (24 bytes).
#[derive(Debug, Clone, Copy)]
struct Kept {
    start: Ns,
    end: Ns,
    name: StrId,
    /// Its own level.
    level: Level,
    /// Its effective level ([`effective_level`]).
    effective: Level,
    bits: u8,
}

/// A device op: its kept id, track and correlation.
#[derive(Debug, Clone, Copy)]
struct DeviceOp {
    id: u32,
    track: u32,
    /// Its correlation, when it has one.
    correlation: Option<u64>,
}

/// The launch of a (rank, correlation): the first API call, else the first thread span.
#[derive(Debug, Clone, Copy)]
struct Launch {
    id: u32,
    track: u32,
    api: bool,
}

/// The kept spans, read by the sweep by their ids, and the
/// [`strato_trace::Span::same_extent_order`] of those at the operation and phase levels: only
/// there does it change an answer (which operation or phase is innermost names a row; CPU
/// spans are told apart by their level), so only those keep it.
#[derive(Debug)]
struct KeptSpans(Vec<Kept>, FxHashMap<u32, u32>);

impl SpanFacts for KeptSpans {
    fn extent(&self, i: u32) -> (Ns, Ns) {
        let s = &self.0[i as usize];
        (s.start, s.end)
    }
    fn level(&self, i: u32) -> Level {
        self.0[i as usize].level
    }
    fn order(&self, i: u32) -> u32 {
        self.1.get(&i).copied().unwrap_or(u32::MAX)
    }
    fn name(&self, i: u32) -> StrId {
        self.0[i as usize].name
    }
}

/// The breakdown gathered batch by batch ([`BreakdownStream::add`], then
/// [`BreakdownStream::finish`]).
#[derive(Debug)]
pub struct BreakdownStream {
    options: BreakdownOptions,
    kept: Vec<Kept>,
    /// [`KeptSpans`]'s orders of the operations and phases.
    orders: FxHashMap<u32, u32>,
    /// Per track: the ids of its kept spans, in trace order.
    tracks: Vec<Vec<u32>>,
    device_ops: Vec<DeviceOp>,
    /// (rank, correlation) -> its launch.
    launches: FxHashMap<(u32, u64), Launch>,
}

impl BreakdownStream {
    pub fn new(options: BreakdownOptions) -> BreakdownStream {
        BreakdownStream {
            options,
            kept: Vec::new(),
            orders: FxHashMap::default(),
            tracks: Vec::new(),
            device_ops: Vec::new(),
            launches: FxHashMap::default(),
        }
    }

    /// Takes one batch of events (`batch` holds every table read so far).
    pub fn add(&mut self, batch: &Trace) {
        for span in &batch.spans {
            let track = batch.track(span.track);
            let thread = matches!(track.kind, TrackKind::Thread { .. });
            let device_op = track.is_device() && is_device_work(span.level);
            if !thread && !device_op {
                continue;
            }
            let id = self.kept.len() as u32;
            let mut bits = 0;
            if is_thread_state(batch, span) {
                bits |= THREAD_STATE;
            }
            if is_os_syscall(batch, span) {
                bits |= OS_SYSCALL;
            }
            let effective = effective_level(batch, span);
            if matches!(effective, Level::Operation | Level::Phase) {
                self.orders.insert(id, span.same_extent_order());
            }
            self.kept.push(Kept {
                start: span.start,
                end: span.end,
                name: span.name,
                level: span.level,
                effective,
                bits,
            });
            let t = span.track.0 as usize;
            if self.tracks.len() <= t {
                self.tracks.resize_with(t + 1, Vec::new);
            }
            self.tracks[t].push(id);
            if device_op {
                self.device_ops.push(DeviceOp {
                    id,
                    track: span.track.0,
                    correlation: span.correlation.get(),
                });
                continue;
            }
            let Some(c) = span.correlation.get() else {
                continue;
            };
            let api = span.level == Level::AcceleratorApi;
            let launch = Launch {
                id,
                track: span.track.0,
                api,
            };
            offer_launch(&mut self.launches, (track.rank.0, c), launch, api, |l| {
                l.api
            });
        }
    }

    /// The breakdown once the input is read (`trace`: every table but the events).
    pub fn finish(self, trace: &Trace) -> BreakdownReport {
        let BreakdownStream {
            options,
            kept,
            orders,
            mut tracks,
            device_ops,
            launches,
        } = self;
        tracks.resize_with(trace.tracks.len().max(tracks.len()), Vec::new);
        // What the sweeps keep for the rest: no room to grow.
        let mut kept = kept;
        kept.shrink_to_fit();
        tracks.iter_mut().for_each(Vec::shrink_to_fit);
        let spans = KeptSpans(kept, orders);
        let is_thread = |t: usize| {
            matches!(
                trace.tracks.get(t).map(|t| &t.kind),
                Some(TrackKind::Thread { .. })
            )
        };
        let processes = ProcessTracks::build(trace, tracks.len(), |t| {
            let ids = &tracks[t];
            (is_thread(t) && !ids.is_empty()).then(|| {
                thread_score(ids.iter().map(|&i| {
                    let s = &spans.0[i as usize];
                    (s.start, s.end, s.effective, s.level)
                }))
            })
        });
        let operations_of = |t: &TrackId| {
            innermost_segments(
                (tracks[t.0 as usize].iter())
                    .filter(|&&i| spans.0[i as usize].effective == Level::Operation)
                    .map(|&i| {
                        let s = &spans.0[i as usize];
                        (s.start, s.end, spans.order(i), i)
                    }),
            )
        };
        let segments: Vec<Vec<OpSegment>> = (processes.annotated.iter())
            .map(|a| a.as_ref().map(operations_of).unwrap_or_default())
            .collect();
        let capture: FxHashMap<u32, Vec<OpSegment>> = (processes.graph_capture.iter())
            .flatten()
            .map(|t| (t.0, operations_of(t)))
            .collect();
        // Device owners, as the scopes give them.
        let only = processes.only_process();
        let mut owners: Vec<Vec<Owner>> = vec![Vec::new(); processes.keys.len()];
        let mut unattributed = 0;
        for op in &device_ops {
            let rank = trace.tracks[op.track as usize].rank.0;
            let launch = op.correlation.and_then(|c| launches.get(&(rank, c)));
            let owner = match launch {
                Some(l) => processes.process_of_track[l.track as usize].map(|p| {
                    let start = spans.0[l.id as usize].start;
                    let operation = (capture.get(&l.track))
                        .and_then(|seg| operation_in(seg, start))
                        .or_else(|| operation_in(&segments[p], start));
                    (p, operation, AttributedBy::Correlation)
                }),
                None => only.get(&rank).copied().flatten().map(|p| {
                    let start = spans.0[op.id as usize].start;
                    (
                        p,
                        operation_in(&segments[p], start),
                        AttributedBy::OnlyProcess,
                    )
                }),
            };
            match owner {
                Some((p, operation, by)) => owners[p].push(Owner {
                    span: op.id,
                    operation,
                    by,
                }),
                None => unattributed += 1,
            }
        }
        drop(device_ops);
        drop(launches);
        let mut labels = Labels::default();
        let mut out = Vec::new();
        let mut stack = Vec::new();
        for (p, key) in processes.keys.iter().enumerate() {
            let threads = &processes.threads[p];
            let annotated = processes.annotated[p];
            let os_only = {
                let mut all = threads.iter().flat_map(|t| &tracks[t.0 as usize]);
                let any = all.clone().next().is_some();
                any && all.all(|&i| spans.0[i as usize].bits & (THREAD_STATE | OS_SYSCALL) != 0)
            };
            if os_only && owners[p].is_empty() {
                continue;
            }
            let mut g = Gathered::new();
            let spans_of_process: usize = threads.iter().map(|t| tracks[t.0 as usize].len()).sum();
            g.events.reserve_exact(spans_of_process + owners[p].len());
            for &t in threads {
                let on_annotated = annotated == Some(t);
                for &i in &tracks[t.0 as usize] {
                    let s = &spans.0[i as usize];
                    if s.bits & THREAD_STATE != 0 {
                        if on_annotated && s.end > s.start {
                            g.states.push(i);
                        }
                        continue;
                    }
                    if !on_annotated && s.bits & OS_SYSCALL != 0 {
                        continue;
                    }
                    if let Some(kind) = Gathered::kind_of(s.effective, on_annotated) {
                        g.push(&spans, kind, i);
                    }
                }
            }
            for o in &owners[p] {
                g.push(&spans, Some(Kind::Device), o.span);
                let label = labels.of(trace, &spans, o.operation, options.per_step);
                g.device_label.insert(o.span, label);
                g.device_ops.push(o.span);
                g.without_launch += usize::from(o.by == AttributedBy::OnlyProcess);
            }
            let swept = sweep(trace, &spans, g, options.per_step, &mut labels);
            let mut counts: FxHashMap<(u32, Level, Level), u64> = FxHashMap::default();
            for t in threads {
                transitions_of_thread(&spans, &tracks[t.0 as usize], &mut stack, |i, from, to| {
                    let at = spans.0[i as usize].start;
                    let op = operation_in(&segments[p], at);
                    let op = labels.of(trace, &spans, op, options.per_step);
                    *counts.entry((op, from, to)).or_insert(0) += 1;
                });
            }
            let transitions = super::sorted_transitions(counts, &labels);
            let annotated_tid = annotated.and_then(|t| match trace.track(t).kind {
                TrackKind::Thread { tid, .. } => Some(tid),
                _ => None,
            });
            out.push(super::assemble(
                trace,
                *key,
                annotated_tid,
                swept,
                transitions,
            ));
        }
        BreakdownReport {
            summary: summary(&out),
            processes: out,
            unattributed_device_ops: unattributed,
        }
    }
}

/// A device op given to a process: its id, the operation that launched it, and how.
#[derive(Debug, Clone, Copy)]
struct Owner {
    span: u32,
    operation: Option<u32>,
    by: AttributedBy,
}

/// The language transitions of one thread (`ids`: its kept spans, in trace order): each CPU
/// span whose containment parent ([`nest`], thread states apart) is at another stratum, told
/// as `(span, from, to)` ([`transition_from`]).
fn transitions_of_thread(
    spans: &KeptSpans,
    ids: &[u32],
    stack: &mut Vec<usize>,
    mut told: impl FnMut(u32, Level, Level),
) {
    let mut sorted: Vec<u32> = (ids.iter().copied())
        .filter(|&i| spans.0[i as usize].bits & THREAD_STATE == 0)
        .collect();
    sorted.sort_unstable_by_key(|&i| {
        let s = &spans.0[i as usize];
        (s.start, std::cmp::Reverse(s.end), s.effective.code(), i)
    });
    nest(
        sorted.len(),
        |k| {
            let s = &spans.0[sorted[k] as usize];
            (s.start, s.end, s.effective)
        },
        stack,
        |k, found| {
            let Some(parent) = found else { return };
            let s = &spans.0[sorted[k] as usize];
            let parent = &spans.0[sorted[parent] as usize];
            if let Some(from) = transition_from(s.level, s.effective, parent.effective) {
                told(sorted[k], from, s.level);
            }
        },
    );
}
