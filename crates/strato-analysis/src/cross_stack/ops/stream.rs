//! [`OpsStream`]: what the op table needs, gathered batch by batch, so that `strato ops` on one
//! file or stored profile never holds the trace's spans (issue 28: the table held the whole
//! trace with every span's args, two per-span vectors and the scope indexes). [`super::ops`]
//! feeds it the whole trace as one batch: one code path.
//!
//! Kept per event, without args: each span of a CPU thread (start, end, its index in the trace,
//! the distinct (op, recorded inputs) of a framework op, its launch correlation) for the
//! time-containment sweep that finds each launch's ops, and each device op (duration,
//! correlation, device, name). Kept whole with args: the collective kernels and the collective
//! CPU ops, which [`crate::distributed::collectives::rank_summaries`] reads for the collective
//! rows ([`CollectiveCopies`]). Each framework op's args are
//! read as its batch passes and reduced to its distinct (name, inputs) index, modelled once
//! (in a held trace, only when a launch under the op needs its model: [`OpsStream::held`]).
//!
//! The rules are the whole-trace ones of the parent module, to the span: the sweep orders a
//! thread's spans as [`crate::cross_stack::modules::enclosing`] does (by start, longer first,
//! framework ops first at equal extents, then trace order), and a span that overlaps the op
//! around it without nesting ends that op, marked or not; a device op's launch is its rank's
//! first accelerator API call with its correlation, else its first thread span with it
//! ([`crate::scope::Scopes::launch_of`]).

use rustc_hash::{FxHashMap, FxHashSet};
use serde_json::Value;
use strato_trace::{Level, Ns, Span, StrId, Trace, TrackId, TrackKind};

use super::{Models, OpsGroups};
use crate::distributed::clock_align::RankWindows;
use crate::distributed::collectives::{job_clock_shifts, CollectiveCopies};
use crate::models::devices::DeviceSpec;
use crate::models::op_models::{model, OpCost, OpInputs};
use crate::scope::{effective_level, is_device_work};

// The sizes the docs give (docs/analyses/ops.md, "Cost").
const _: () = assert!(std::mem::size_of::<ThreadSpan>() == 40);
const _: () = assert!(std::mem::size_of::<DeviceOp>() == 32);
const _: () = assert!(std::mem::size_of::<Launch>() == 32);

/// `ThreadSpan::flags`: the span carries a launch correlation.
const HAS_CORRELATION: u8 = 1;
/// `ThreadSpan::flags`: the span is an accelerator API call.
const IS_API: u8 = 2;
/// No distinct call: the span is not a framework op.
const NOT_AN_OP: u32 = u32::MAX;
/// A framework op whose distinct call is read when the sweep needs it, from the trace held
/// ([`OpsStream::held`]).
const NOT_READ_YET: u32 = u32::MAX - 1;
/// No collective kernel.
const NOT_A_COLLECTIVE: u32 = u32::MAX;

/// A span of a CPU thread, as the sweep reads it (40 bytes).
#[derive(Debug, Clone, Copy)]
struct ThreadSpan {
    start: Ns,
    end: Ns,
    correlation: u64,
    /// Its [`strato_trace::Span::same_extent_order`].
    order: u32,
    /// Its index in the whole trace.
    index: u32,
    /// Its distinct call in [`Models`] when it is a framework op ([`NOT_READ_YET`] in a held
    /// trace), else [`NOT_AN_OP`].
    distinct: u32,
    flags: u8,
}

/// A device op, in trace order (32 bytes).
#[derive(Debug, Clone, Copy)]
struct DeviceOp {
    duration: Ns,
    /// Its launch correlation when [`DeviceOp::device`] has [`HAS_CORRELATION_BIT`].
    correlation: u64,
    /// Its (rank, device) in [`OpsStream::devices`], with [`HAS_CORRELATION_BIT`].
    device: u32,
    name: StrId,
    /// Its position among [`CollectiveCopies`]' when it is a collective kernel.
    collective: u32,
}

/// [`DeviceOp::device`]'s bit saying the op has a correlation.
const HAS_CORRELATION_BIT: u32 = 1 << 31;

/// The op table gathered batch by batch ([`OpsStream::add`], then [`OpsStream::finish`]).
#[derive(Debug, Default)]
pub struct OpsStream {
    device_spec: Option<DeviceSpec>,
    /// The trace given to [`OpsStream::add`] is the whole trace, given once, and the same one
    /// is given to [`OpsStream::finish`] ([`super::ops`]): a framework op's args are read
    /// only when a launch under it needs its model, as the whole-trace table always did.
    held: bool,
    /// Spans read so far: the next span's index in the whole trace.
    seen: u64,
    /// Each rank's window, on its own clock: stated on the job's clock at the end.
    windows: RankWindows,
    models: Models,
    threads: FxHashMap<u32, Vec<ThreadSpan>>,
    device_ops: Vec<DeviceOp>,
    /// The (rank, device) pairs of the device ops, each once.
    devices: Vec<(u32, i64)>,
    device_index: FxHashMap<(u32, i64), u32>,
    collectives: CollectiveCopies,
}

impl OpsStream {
    /// A stream whose devices all take `device_spec`'s row, when given.
    pub fn new(device_spec: Option<DeviceSpec>) -> OpsStream {
        OpsStream {
            device_spec,
            ..OpsStream::default()
        }
    }

    /// The stream [`super::ops`] feeds the whole trace, once (see [`OpsStream::held`]).
    pub(super) fn held(device_spec: Option<DeviceSpec>) -> OpsStream {
        OpsStream {
            held: true,
            ..OpsStream::new(device_spec)
        }
    }

    /// Reads the spans `batch` holds (the trace as it is then: its tables are the whole trace's
    /// so far, its spans the batch's, in the trace's order, their args the batch's).
    pub fn add(&mut self, batch: &Trace) {
        for span in &batch.spans {
            let index = self.seen as u32;
            self.seen += 1;
            let track = batch.track(span.track);
            self.windows.add(track.rank, span.start, span.end);
            let collective = self.collectives.offer(batch, span, index);
            match track.kind {
                TrackKind::DeviceQueue { device, .. } => {
                    if is_device_work(span.level) {
                        let key = (track.rank.0, device);
                        let devices = &mut self.devices;
                        let mut at = *self.device_index.entry(key).or_insert_with(|| {
                            devices.push(key);
                            devices.len() as u32 - 1
                        });
                        if span.correlation.is_some() {
                            at |= HAS_CORRELATION_BIT;
                        }
                        self.device_ops.push(DeviceOp {
                            duration: span.duration(),
                            correlation: span.correlation.get().unwrap_or(0),
                            device: at,
                            name: span.name,
                            collective: collective.unwrap_or(NOT_A_COLLECTIVE),
                        });
                    }
                    continue;
                }
                TrackKind::Thread { .. } => {
                    let distinct = if effective_level(batch, span) != Level::Backend {
                        NOT_AN_OP
                    } else if self.held {
                        NOT_READ_YET
                    } else {
                        self.models.intern(span.name, || recorded(batch, span))
                    };
                    let mut flags = 0;
                    if span.correlation.is_some() {
                        flags |= HAS_CORRELATION;
                    }
                    if span.level == Level::AcceleratorApi {
                        flags |= IS_API;
                    }
                    self.threads
                        .entry(span.track.0)
                        .or_default()
                        .push(ThreadSpan {
                            start: span.start,
                            end: span.end,
                            correlation: span.correlation.get().unwrap_or(0),
                            order: span.same_extent_order(),
                            index,
                            distinct,
                            flags,
                        });
                }
                _ => {}
            }
        }
    }

    /// The op table of the trace whose tables `trace` holds (its events are not read).
    pub fn finish(self, trace: &Trace) -> super::OpsReport {
        let OpsStream {
            device_spec,
            held,
            windows,
            mut models,
            threads,
            device_ops,
            devices,
            collectives,
            ..
        } = self;
        let rank_of = |track: u32| trace.track(TrackId(track)).rank.0;
        // The collective kernels' launches are looked for during the sweep.
        let wanted = collectives.wanted(trace);
        // In a held trace, a framework op's distinct call is read from its span when needed.
        let mut read = |models: &mut Models, index: u32| {
            let span = &trace.spans[index as usize];
            models.intern(span.name, || recorded(trace, span))
        };
        let read: Option<&mut ReadDistinct> = if held { Some(&mut read) } else { None };
        let (launches, first_of_wanted) =
            launch_owners(threads, &mut models, read, &rank_of, &wanted);
        let (collective_of, shifts) = collective_rows(trace, collectives, first_of_wanted);
        let mut groups = OpsGroups::new(models);
        for op in device_ops {
            let (rank, device) = devices[(op.device & !HAS_CORRELATION_BIT) as usize];
            let owner = if op.device & HAS_CORRELATION_BIT != 0 {
                launches
                    .binary_search_by_key(&(rank, op.correlation), |l| (l.rank, l.correlation))
                    .ok()
                    .and_then(|at| launches[at].owner())
            } else {
                None
            };
            let collective = (op.collective != NOT_A_COLLECTIVE)
                .then(|| collective_of.get(&op.collective))
                .flatten();
            groups.add(
                trace,
                &super::AttributedOp {
                    duration: op.duration,
                    rank,
                    device,
                    name: op.name,
                    owner,
                    collective,
                },
            );
        }
        groups.report(trace, windows.on_job_clock(&shifts), device_spec.as_ref())
    }
}

/// A launch candidate: a thread span with a correlation, and the op that owns it (32 bytes).
/// Of the candidates of one (rank, correlation), the launch is the first accelerator API
/// call, else the first span (by index in the trace).
#[derive(Debug, Clone, Copy)]
struct Launch {
    correlation: u64,
    rank: u32,
    index: u32,
    is_api: bool,
    /// The op span that owns it: the outermost framework op around the launch with a model,
    /// else the outermost one; [`NOT_AN_OP`] without one.
    owner_index: u32,
    /// The owner's distinct call.
    owner_distinct: u32,
}

impl Launch {
    /// (distinct call, op span index) of the owner.
    fn owner(&self) -> Option<(u32, u32)> {
        (self.owner_index != NOT_AN_OP).then_some((self.owner_distinct, self.owner_index))
    }
}

/// Reads the distinct call of the framework op at an index of a held trace.
type ReadDistinct<'a> = dyn FnMut(&mut Models, u32) -> u32 + 'a;

/// A thread span and its track.
#[derive(Debug, Clone, Copy)]
struct ThreadSpanAt {
    track: u32,
    span: ThreadSpan,
}

/// Sweeps each thread's spans (see the module docs): each (rank, correlation)'s launch with
/// its owner, sorted by (rank, correlation), and the first thread span with each `wanted`
/// correlation (a collective's launch for [`CollectiveCopies::summaries`]).
fn launch_owners(
    threads: FxHashMap<u32, Vec<ThreadSpan>>,
    models: &mut Models,
    mut read: Option<&mut ReadDistinct>,
    rank_of: &dyn Fn(u32) -> u32,
    wanted: &FxHashSet<(u32, u64)>,
) -> (Vec<Launch>, FxHashMap<(u32, u64), ThreadSpanAt>) {
    let mut launches: Vec<Launch> = Vec::new();
    let mut first_of_wanted: FxHashMap<(u32, u64), ThreadSpanAt> = FxHashMap::default();
    for (track, mut spans) in threads {
        let rank = rank_of(track);
        spans.sort_unstable_by_key(|s| {
            (
                s.start,
                std::cmp::Reverse(s.end),
                s.distinct == NOT_AN_OP,
                s.order,
                s.index,
            )
        });
        // The framework ops around the current span, outermost first: (end, distinct, index).
        let mut stack: Vec<(Ns, u32, u32)> = Vec::new();
        for s in spans {
            while stack.last().is_some_and(|top| top.0 < s.end) {
                stack.pop();
            }
            if s.distinct != NOT_AN_OP {
                stack.push((s.end, s.distinct, s.index));
            }
            if s.flags & HAS_CORRELATION == 0 {
                continue;
            }
            let key = (rank, s.correlation);
            if wanted.contains(&key) {
                first_of_wanted
                    .entry(key)
                    .and_modify(|f| {
                        if s.index < f.span.index {
                            *f = ThreadSpanAt { track, span: s };
                        }
                    })
                    .or_insert(ThreadSpanAt { track, span: s });
            }
            if let Some(read) = read.as_mut() {
                for (_, distinct, index) in stack.iter_mut() {
                    if *distinct == NOT_READ_YET {
                        *distinct = read(models, *index);
                    }
                }
            }
            let modelled = stack
                .iter()
                .find(|(_, distinct, _)| models.is_modelled(*distinct));
            let (owner_distinct, owner_index) = modelled
                .or(stack.first())
                .map_or((NOT_AN_OP, NOT_AN_OP), |&(_, distinct, index)| {
                    (distinct, index)
                });
            launches.push(Launch {
                correlation: s.correlation,
                rank,
                index: s.index,
                is_api: s.flags & IS_API != 0,
                owner_index,
                owner_distinct,
            });
        }
    }
    launches.sort_unstable_by_key(|l| (l.rank, l.correlation, !l.is_api, l.index));
    launches.dedup_by_key(|l| (l.rank, l.correlation));
    launches.shrink_to_fit();
    (launches, first_of_wanted)
}

/// Per copied collective kernel, its row key and group size.
type CollectiveRows = FxHashMap<u32, (super::CollectiveKey, Option<usize>)>;

/// [`crate::distributed::collectives::rank_summaries`] over the copied collective spans with their launches
/// ([`CollectiveCopies::summaries`]): per copied kernel, its row key and group size; and each
/// rank's shift onto the job's clock (empty without a collective kernel: no shift), as `strato
/// collectives` aligns the ranks.
fn collective_rows(
    trace: &Trace,
    collectives: CollectiveCopies,
    first_of_wanted: FxHashMap<(u32, u64), ThreadSpanAt>,
) -> (CollectiveRows, Vec<Ns>) {
    let first = (first_of_wanted.into_iter())
        .map(|(key, f)| {
            let span = (TrackId(f.track), f.span.start, f.span.end, f.span.index);
            (key, span)
        })
        .collect();
    let summaries = collectives.summaries(trace, first);
    if summaries.is_empty() {
        return (FxHashMap::default(), Vec::new()); // no collective kernel
    }
    let shifts = job_clock_shifts(&summaries, trace.ranks.len());
    let mut out = FxHashMap::default();
    for rc in summaries {
        let world = rc.world_size.and_then(|w| usize::try_from(w).ok());
        for c in rc.calls {
            let n = c
                .group_ranks
                .as_ref()
                .map(Vec::len)
                .or(c.group_size)
                .or(world);
            out.insert(c.kernel.0, ((c.kind, c.bytes, c.dtype), n));
        }
    }
    (out, shifts)
}

/// A framework op's recorded inputs (from its args) and their model.
fn recorded(trace: &Trace, span: &Span) -> (Option<OpInputs>, Result<OpCost, String>) {
    let inputs = trace
        .args_text(span.args)
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|a| OpInputs::from_args(&a));
    let cost = model(trace.str(span.name), inputs.as_ref()).map_err(|e| e.to_string());
    (inputs, cost)
}
