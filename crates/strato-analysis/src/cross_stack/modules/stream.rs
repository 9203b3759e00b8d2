//! [`ModulesStream`]: the module tree gathered batch by batch, so that `strato modules` on one file
//! or stored profile never holds the trace's spans (issue 28: the whole-trace tree held every span
//! with every attribute, the scopes and two per-span indexes, 0.37x the file on a 1.4 GB trace).
//!
//! Kept per span of a CPU thread: its extent, id and whether it is a module call, an autograd
//! engine span or carries a correlation (24 bytes, [`ThreadSpan`]); per CPU span with a
//! correlation, its id and correlation (16 bytes); per device op, its duration, rank and
//! correlation (24 bytes); per module call, its extent and name; per (rank, correlation), the
//! launch chosen so far and its first thread span; the spans the job's collectives are read from
//! ([`CollectiveCopies`]: the collective kernels and CPU ops, a few). At the end each thread is
//! swept twice by the whole-trace enclosing sweep ([`super::enclose`]: module calls, then autograd
//! engine spans), which gives each call its parent and whether it is recomputed, and each launch
//! the module call it runs under; then the device ops are given to those calls and the report made
//! as the whole trace's ([`super::report_of`]), its window on the job's clock. The engine's tests
//! hold the two to the same bytes on every shared file, in batches of every size.

use rustc_hash::FxHashMap;
use strato_trace::{Level, Ns, Trace, TrackId, TrackKind};

use super::{enclose, module_of, Call, Gathered, ModulesReport, BACKWARD_PREFIX};
use crate::distributed::clock_align::RankWindows;
use crate::distributed::collectives::{CollectiveCopies, HostSpan};
use crate::scope::{is_device_work, offer_launch};

// The sizes the docs give (docs/analyses/modules.md, "Cost").
const _: () = assert!(std::mem::size_of::<ThreadSpan>() == 24);
const _: () = assert!(std::mem::size_of::<DeviceOp>() == 24);
// A launch map entry stays 32 bytes with its key.
const _: () = assert!(std::mem::size_of::<((u32, u64), Launch)>() == 32);

/// [`ThreadSpan::bits`]: a module call.
const MODULE: u8 = 1;
/// [`ThreadSpan::bits`]: a span of the autograd engine.
const BACKWARD: u8 = 2;
/// [`ThreadSpan::bits`]: the span carries a correlation.
const HAS_CORRELATION: u8 = 4;

/// A span of a CPU thread, as the sweeps read it (24 bytes).
#[derive(Debug, Clone, Copy)]
struct ThreadSpan {
    start: Ns,
    end: Ns,
    /// Its index in the whole trace.
    index: u32,
    bits: u8,
}

/// A device op: what it adds and how its launch is found (24 bytes).
#[derive(Debug, Clone, Copy)]
struct DeviceOp {
    duration: Ns,
    /// Its correlation; [`DeviceOp::rank`] has [`HAS_CORRELATION_BIT`] when it has one.
    correlation: u64,
    rank: u32,
}

/// [`DeviceOp::rank`]'s bit saying the op has a correlation.
const HAS_CORRELATION_BIT: u32 = 1 << 31;

/// The launch of a (rank, correlation): while streaming, the span chosen so far (the first API
/// call, else the first thread span); after the sweeps, the module call it runs under.
#[derive(Debug, Clone, Copy)]
struct Launch {
    index: u32,
    api: bool,
    /// The module call the launch is or runs under ([`NO_CALL`]: none).
    owner: u32,
    /// The first thread span with the (rank, correlation), API call or not: a collective
    /// kernel's launch as [`crate::distributed::collectives::rank_summaries`] chooses it.
    first: u32,
}

const NO_CALL: u32 = u32::MAX;

/// The module tree gathered batch by batch ([`ModulesStream::add`], then
/// [`ModulesStream::finish`]).
#[derive(Debug, Default)]
pub struct ModulesStream {
    /// Spans read so far: the next span's index in the whole trace.
    seen: u64,
    /// Each rank's window, on its own clock.
    windows: RankWindows,
    /// Per track: its spans if it is a CPU thread, in trace order.
    threads: Vec<Vec<ThreadSpan>>,
    /// Per CPU thread span with a correlation, in trace order: (index, correlation).
    thread_correlations: Vec<(u32, u64)>,
    launches: FxHashMap<(u32, u64), Launch>,
    device_ops: Vec<DeviceOp>,
    calls: Vec<Call>,
    collectives: CollectiveCopies,
}

impl ModulesStream {
    pub fn new() -> ModulesStream {
        ModulesStream::default()
    }

    /// Takes one batch of events (`batch` holds every table read so far).
    pub fn add(&mut self, batch: &Trace) {
        for span in &batch.spans {
            let index = self.seen as u32;
            self.seen += 1;
            let track = batch.track(span.track);
            self.windows.add(track.rank, span.start, span.end);
            self.collectives.offer(batch, span, index);
            match track.kind {
                TrackKind::DeviceQueue { .. } if is_device_work(span.level) => {
                    let (correlation, bit) = match span.correlation.get() {
                        Some(c) => (c, HAS_CORRELATION_BIT),
                        None => (0, 0),
                    };
                    self.device_ops.push(DeviceOp {
                        duration: span.duration(),
                        correlation,
                        rank: track.rank.0 | bit,
                    });
                    continue;
                }
                TrackKind::Thread { .. } => {}
                _ => continue,
            }
            let name = batch.str(span.name);
            let mut bits = 0;
            if module_of(name).is_some() {
                bits |= MODULE;
                self.calls.push(Call {
                    index,
                    start: span.start,
                    end: span.end,
                    name: span.name,
                });
            }
            if name.starts_with(BACKWARD_PREFIX) {
                bits |= BACKWARD;
            }
            if let Some(c) = span.correlation.get() {
                bits |= HAS_CORRELATION;
                self.thread_correlations.push((index, c));
                let api = span.level == Level::AcceleratorApi;
                let key = (track.rank.0, c);
                let first = self.launches.get(&key).map_or(index, |l| l.first);
                let launch = Launch {
                    index,
                    api,
                    owner: NO_CALL,
                    first,
                };
                offer_launch(&mut self.launches, key, launch, api, |l| l.api);
            }
            let t = span.track.0 as usize;
            if self.threads.len() <= t {
                self.threads.resize_with(t + 1, Vec::new);
            }
            self.threads[t].push(ThreadSpan {
                start: span.start,
                end: span.end,
                index,
                bits,
            });
        }
    }

    /// The module tree once the input is read (`trace`: every table but the events).
    pub fn finish(self, trace: &Trace) -> ModulesReport {
        let ModulesStream {
            seen,
            windows,
            threads,
            thread_correlations,
            mut launches,
            device_ops,
            calls,
            collectives,
        } = self;
        // The collective kernels' launches now, while the threads' spans are in trace order;
        // their summaries once the per-span vectors are gone.
        let first = collective_launches(trace, &collectives, &threads, &launches);
        let mut g = Gathered {
            calls,
            windows,
            spans: seen as u32,
            ..Gathered::default()
        };
        for (t, mut spans) in threads.into_iter().enumerate() {
            if spans.is_empty() {
                continue;
            }
            let rank = trace.tracks[t].rank.0;
            // Module calls: each call's parent, each launch's owner.
            sort_marked(&mut spans, MODULE);
            enclose(
                spans.len(),
                |k| (spans[k].end, spans[k].bits & MODULE != 0),
                |k, outer| {
                    let s = &spans[k];
                    let outer = outer.map(|o| spans[o].index);
                    if s.bits & MODULE != 0 {
                        if let Some(p) = outer {
                            g.parent.insert(s.index, p);
                        }
                    }
                    if s.bits & HAS_CORRELATION == 0 {
                        return;
                    }
                    let Ok(at) = thread_correlations.binary_search_by_key(&s.index, |c| c.0) else {
                        return;
                    };
                    let key = (rank, thread_correlations[at].1);
                    if let Some(l) = launches.get_mut(&key).filter(|l| l.index == s.index) {
                        l.owner = if s.bits & MODULE != 0 {
                            s.index
                        } else {
                            outer.unwrap_or(NO_CALL)
                        };
                    }
                },
            );
            // Autograd engine spans: which calls are recomputed.
            if spans.iter().any(|s| s.bits & BACKWARD != 0) {
                sort_marked(&mut spans, BACKWARD);
                enclose(
                    spans.len(),
                    |k| (spans[k].end, spans[k].bits & BACKWARD != 0),
                    |k, outer| {
                        if spans[k].bits & MODULE != 0 && outer.is_some() {
                            g.recomputed.insert(spans[k].index);
                        }
                    },
                );
            }
        }
        drop(thread_correlations);
        for op in &device_ops {
            let owner = (op.rank & HAS_CORRELATION_BIT != 0)
                .then(|| launches.get(&(op.rank & !HAS_CORRELATION_BIT, op.correlation)))
                .flatten()
                .map(|l| l.owner)
                .filter(|&o| o != NO_CALL);
            g.device.add(op.duration, owner, &g.parent);
        }
        drop((device_ops, launches));
        g.collectives = collectives.summaries(trace, first);
        super::report_of(trace, g)
    }
}

/// Per collective kernel's (rank, correlation), its first thread span with them
/// ([`Launch::first`]), for [`CollectiveCopies::summaries`]. `threads`: each track's spans in
/// trace order.
fn collective_launches(
    trace: &Trace,
    collectives: &CollectiveCopies,
    threads: &[Vec<ThreadSpan>],
    launches: &FxHashMap<(u32, u64), Launch>,
) -> FxHashMap<(u32, u64), HostSpan> {
    let mut out = FxHashMap::default();
    if !collectives.has_kernels(trace) {
        return out;
    }
    for key in collectives.wanted(trace) {
        let Some(first) = launches.get(&key).map(|l| l.first) else {
            continue;
        };
        let found = (threads.iter().enumerate())
            .filter(|(t, _)| trace.tracks[*t].rank.0 == key.0)
            .find_map(|(t, spans)| {
                let at = spans.binary_search_by_key(&first, |s| s.index).ok()?;
                Some((TrackId(t as u32), spans[at].start, spans[at].end, first))
            });
        if let Some(span) = found {
            out.insert(key, span);
        }
    }
    out
}

/// Sorts a thread's spans as the enclosing sweep reads them: by start, longer first, spans
/// with `mark` first at equal extents, then trace order.
fn sort_marked(spans: &mut [ThreadSpan], mark: u8) {
    spans.sort_unstable_by_key(|s| {
        (
            s.start,
            std::cmp::Reverse(s.end),
            s.bits & mark == 0,
            s.index,
        )
    });
}
