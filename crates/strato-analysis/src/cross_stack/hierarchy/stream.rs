//! [`HierarchyStream`]: the hierarchy report gathered batch by batch, so that `strato
//! hierarchy` on one file or stored profile never holds the trace's spans (issue 28: the
//! whole-trace report held every span, the scopes and the parent index, 0.31x the file on a
//! 1.4 GB trace).
//!
//! Kept per span: its extent, id, levels and a few flags (24 bytes, [`Extent`]); per CPU span
//! with a correlation, its id and correlation (16 bytes); per device span, its correlation
//! (8 bytes); per (rank, correlation), the launch chosen so far. At the end each track is
//! sorted and swept as [`super::index::Hierarchy::build`] sweeps it ([`nest`]), thread tracks
//! first, which gives every span's depth and a launch's flags; then the device ops are counted
//! as [`super::report`] counts them.
//!
//! The rules are the whole-trace ones to the span ([`super::report`], [`crate::scope`]): a
//! launch is its rank's first accelerator API call on a thread with the correlation, else its
//! first thread span with it; a process is (rank, pid) of thread tracks with spans, its
//! annotated thread the one whose operations cover the most time (then more operations, more
//! CPU spans, the lower track), and a launch is annotated *by time* when an operation is
//! innermost on that thread at its start. The engine's tests hold the two to the same bytes on
//! every shared file, in batches of every size.

use rustc_hash::FxHashMap;
use strato_trace::{Level, Ns, Span, Trace, TrackKind};

use super::index::{nest, own_flags, UNDER_BACKEND, UNDER_OPERATION};
use super::{Attribution, HierarchyReport, RankAttribution};
use crate::scope::{
    effective_level, innermost_segments, is_device_work, offer_launch, operation_in, thread_score,
    OpSegment, ProcessTracks,
};
use strato_trace::names::{is_graph_capture_track, is_graph_launch_name};

// The size the docs give (docs/analyses/hierarchy.md, "Cost").
const _: () = assert!(std::mem::size_of::<Extent>() == 24);

/// [`Extent::bits`]: a thread-state span (no parent, no span's parent).
pub(crate) const THREAD_STATE: u8 = 1;
/// [`Extent::bits`]: the span carries a correlation (kept beside it).
pub(crate) const HAS_CORRELATION: u8 = 2;
/// [`Extent::bits`]: a graph launch call (`cudaGraphLaunch`, ...).
pub(crate) const GRAPH_LAUNCH: u8 = 4;

/// One span as the hierarchy's sweep reads it (24 bytes): what a stream keeps of each span to
/// sweep its tracks as [`super::index::Hierarchy::build`] does (`iterations` keeps it too).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Extent {
    pub(crate) start: Ns,
    pub(crate) end: Ns,
    /// Its index in the whole trace.
    pub(crate) index: u32,
    /// Its effective level ([`effective_level`]).
    pub(crate) level: Level,
    /// Its own level.
    pub(crate) raw: Level,
    /// [`THREAD_STATE`], [`HAS_CORRELATION`], [`GRAPH_LAUNCH`].
    pub(crate) bits: u8,
}

impl Extent {
    /// `span` of `batch`, the `index`-th span of the whole trace.
    pub(crate) fn of(batch: &Trace, span: &Span, index: u32) -> Extent {
        let mut bits = 0;
        if crate::scope::is_thread_state(batch, span) {
            bits |= THREAD_STATE;
        }
        if span.correlation.is_some() {
            bits |= HAS_CORRELATION;
        }
        if is_graph_launch_name(batch.str(span.name)) {
            bits |= GRAPH_LAUNCH;
        }
        Extent {
            start: span.start,
            end: span.end,
            index,
            level: effective_level(batch, span),
            raw: span.level,
            bits,
        }
    }

    /// The order a track's spans are swept in ([`nest`]): by start, longer first, then level
    /// and index. The whole-trace hierarchy orders spans of the same extent and level by
    /// [`Span::same_extent_order`] too; what the streams count of the sweep (levels above a
    /// launch) does not depend on that order, and the operations, where it matters, keep it
    /// ([`OperationOrders`]).
    pub(crate) fn sweep_key(&self) -> (Ns, std::cmp::Reverse<Ns>, u8, u32) {
        (
            self.start,
            std::cmp::Reverse(self.end),
            self.level.code(),
            self.index,
        )
    }
}

/// [`Span::same_extent_order`] of the operation spans (effective level `Operation`) a stream
/// keeps as [`Extent`]s, by index. Only there does it change what a stream gives (which of
/// two operations of the same extent is innermost names a segment), and operations are few,
/// so it is kept beside the extents rather than in each (24 bytes would become 32).
#[derive(Debug, Default)]
pub(crate) struct OperationOrders(FxHashMap<u32, u32>);

impl OperationOrders {
    /// Keeps `span`'s order when its `extent` is an operation.
    pub(crate) fn keep(&mut self, extent: &Extent, span: &Span) {
        if extent.level == Level::Operation {
            self.0.insert(extent.index, span.same_extent_order());
        }
    }

    /// The operations among `extents` flattened into segments ([`innermost_segments`]).
    pub(crate) fn segments<'a>(&self, extents: impl Iterator<Item = &'a Extent>) -> Vec<OpSegment> {
        innermost_segments(extents.filter(|s| s.level == Level::Operation).map(|s| {
            let order = self.0.get(&s.index).copied().unwrap_or(u32::MAX);
            (s.start, s.end, order, s.index)
        }))
    }
}

/// The spans of one track, in trace order.
#[derive(Debug, Default)]
struct TrackSpans {
    spans: Vec<Extent>,
    /// On a device queue: the correlation of each span (0 without one), beside `spans`.
    correlations: Vec<u64>,
}

/// The launch of a (rank, correlation): while streaming, the span chosen so far; after the
/// thread sweeps, what the report reads of it.
#[derive(Debug, Clone, Copy)]
struct Launch {
    index: u32,
    api: bool,
    depth: u32,
    /// [`UNDER_BACKEND`], [`UNDER_OPERATION`] of the launch, [`BY_TIME`], [`GRAPH_MAPPED`],
    /// [`GRAPH_LAUNCH`].
    flags: u8,
}

/// [`Launch::flags`]: an operation was innermost on the annotated thread at the launch.
const BY_TIME: u8 = 8;
/// [`Launch::flags`]: the launch is on a graph-capture track.
const GRAPH_MAPPED: u8 = 16;

/// The hierarchy report gathered batch by batch ([`HierarchyStream::add`], then
/// [`HierarchyStream::finish`]).
#[derive(Debug, Default)]
pub struct HierarchyStream {
    /// Spans read so far: the next span's index in the whole trace.
    seen: u64,
    tracks: Vec<TrackSpans>,
    operation_orders: OperationOrders,
    /// Per CPU thread span with a correlation, in trace order: (index, correlation).
    thread_correlations: Vec<(u32, u64)>,
    /// (rank, correlation) -> its launch.
    launches: FxHashMap<(u32, u64), Launch>,
}

impl HierarchyStream {
    pub fn new() -> HierarchyStream {
        HierarchyStream::default()
    }

    /// Takes one batch of events (`batch` holds every table read so far).
    pub fn add(&mut self, batch: &Trace) {
        for span in &batch.spans {
            let index = self.seen as u32;
            self.seen += 1;
            let t = span.track.0 as usize;
            if self.tracks.len() <= t {
                self.tracks.resize_with(t + 1, TrackSpans::default);
            }
            let track = batch.track(span.track);
            let spans = &mut self.tracks[t];
            let extent = Extent::of(batch, span, index);
            self.operation_orders.keep(&extent, span);
            spans.spans.push(extent);
            if track.is_device() {
                spans.correlations.push(span.correlation.get().unwrap_or(0));
                continue;
            }
            let (Some(c), TrackKind::Thread { .. }) = (span.correlation.get(), &track.kind) else {
                continue;
            };
            self.thread_correlations.push((index, c));
            let api = span.level == Level::AcceleratorApi;
            let launch = Launch {
                index,
                api,
                depth: 0,
                flags: 0,
            };
            offer_launch(&mut self.launches, (track.rank.0, c), launch, api, |l| {
                l.api
            });
        }
    }

    /// The report once the input is read (`trace`: every table but the events).
    pub fn finish(mut self, trace: &Trace) -> HierarchyReport {
        let mut tracks = std::mem::take(&mut self.tracks);
        let annotated = annotated_threads(trace, &tracks, &self.operation_orders);
        let mut counts = Counts {
            ranks: vec![Attribution::default(); trace.ranks.len()],
            first_launch: vec![Ns::MAX; trace.ranks.len()],
            ..Counts::default()
        };
        let mut stack = Vec::new();
        // Thread (and other host) tracks first, so that launches have their depth and flags.
        let order = (0..tracks.len()).filter(|&t| !is_device(trace, t));
        for t in order.chain((0..tracks.len()).filter(|&t| is_device(trace, t))) {
            if is_device(trace, t) {
                self.device_track(trace, t, &tracks[t], &mut counts, &mut stack);
            } else {
                let spans = std::mem::take(&mut tracks[t].spans);
                let segments = (annotated.process_of_track.get(t).copied().flatten())
                    .map_or(&[][..], |p| &annotated.segments[p][..]);
                self.host_track(trace, t, spans, segments, &mut counts, &mut stack);
            }
        }
        drop(tracks);
        let mut total = Attribution::default();
        for a in &counts.ranks {
            total.add(a);
        }
        HierarchyReport {
            total,
            spans: self.seen as usize,
            spans_with_parent: counts.with_parent,
            max_depth: counts.max_depth as usize,
            ranks: (counts.ranks.into_iter().enumerate())
                .map(|(r, counts)| RankAttribution {
                    rank: trace.ranks[r].rank.unwrap_or(r as i64),
                    source: trace.ranks[r].source.clone(),
                    counts,
                })
                .collect(),
        }
    }

    /// Sweeps host track `t` (`spans`: its spans, in trace order; `segments`: its process's
    /// annotated thread's operations): depths, parents, and the depth and flags of the
    /// launches on it.
    fn host_track(
        &mut self,
        trace: &Trace,
        t: usize,
        mut spans: Vec<Extent>,
        segments: &[(Ns, Ns, u32)],
        counts: &mut Counts,
        stack: &mut Vec<usize>,
    ) {
        let track = &trace.tracks[t];
        let rank = track.rank.0;
        let capture = if is_graph_capture_track(track) {
            GRAPH_MAPPED
        } else {
            0
        };
        // A launch on this track: its depth and flags, what the report reads of it.
        let mut launched = |s: &Extent, depth: u32, flags: u8| {
            if s.bits & HAS_CORRELATION == 0 {
                return;
            }
            let Ok(at) = (self.thread_correlations).binary_search_by_key(&s.index, |c| c.0) else {
                return; // not a thread span: never a launch
            };
            let key = (rank, self.thread_correlations[at].1);
            let Some(launch) = self.launches.get_mut(&key).filter(|l| l.index == s.index) else {
                return;
            };
            let by_time = if operation_in(segments, s.start).is_some() {
                BY_TIME
            } else {
                0
            };
            launch.depth = depth;
            launch.flags = flags | by_time | capture | (s.bits & GRAPH_LAUNCH);
            let first = &mut counts.first_launch[rank as usize];
            *first = (*first).min(s.start);
        };
        // Thread states take no part: no parent (depth 0), no flags.
        for s in spans.iter().filter(|s| s.bits & THREAD_STATE != 0) {
            launched(s, 0, 0);
        }
        spans.retain(|s| s.bits & THREAD_STATE == 0);
        spans.sort_unstable_by_key(Extent::sweep_key);
        let mut depth_flags: Vec<(u32, u8)> = vec![(0, 0); spans.len()];
        let (mut with_parent, mut max_depth) = (0, 0);
        nest(
            spans.len(),
            |k| (spans[k].start, spans[k].end, spans[k].level),
            stack,
            |k, found| {
                let (depth, inherited) =
                    found.map_or((0, 0), |p| (depth_flags[p].0 + 1, depth_flags[p].1));
                with_parent += usize::from(found.is_some());
                max_depth = max_depth.max(depth);
                let flags = own_flags(spans[k].level) | inherited;
                depth_flags[k] = (depth, flags);
                launched(&spans[k], depth, flags);
            },
        );
        counts.with_parent += with_parent;
        counts.max_depth = counts.max_depth.max(max_depth);
    }

    /// Sweeps device track `t` (depths and parents) and counts its device ops.
    fn device_track(
        &self,
        trace: &Trace,
        t: usize,
        spans: &TrackSpans,
        counts: &mut Counts,
        stack: &mut Vec<usize>,
    ) {
        let rank = trace.tracks[t].rank.0;
        let launch_of = |k: usize| {
            let s = &spans.spans[k];
            (s.bits & HAS_CORRELATION != 0)
                .then(|| self.launches.get(&(rank, spans.correlations[k])))
                .flatten()
        };
        // Counted as the whole-trace report counts them.
        for (k, s) in spans.spans.iter().enumerate() {
            if !s.raw.is_device_op() {
                continue;
            }
            let a = &mut counts.ranks[rank as usize];
            let kernel = usize::from(s.raw == Level::DeviceKernel);
            a.device_ops += 1;
            a.kernels += kernel;
            let Some(l) = launch_of(k) else {
                if s.start < counts.first_launch[rank as usize] {
                    a.launched_before_trace += 1;
                    a.kernels_launched_before_trace += kernel;
                }
                continue;
            };
            a.with_launch += 1;
            a.kernels_with_launch += kernel;
            if l.flags & GRAPH_MAPPED != 0 {
                a.graph_kernels += 1;
                a.graph_kernels_mapped += 1;
            } else if l.flags & GRAPH_LAUNCH != 0 {
                a.graph_kernels += 1;
            }
            a.with_op += usize::from(l.flags & UNDER_BACKEND != 0);
            let annotated = if l.flags & UNDER_OPERATION != 0 {
                a.with_annotation_by_containment += 1;
                true
            } else {
                let by_time = l.flags & BY_TIME != 0;
                a.with_annotation_by_time += usize::from(by_time);
                by_time
            };
            a.with_annotation += usize::from(annotated);
            a.kernels_with_annotation += usize::from(annotated) * kernel;
        }
        // Depths: a device op's parent is its launch, else the span around it.
        let mut order: Vec<u32> = (0..spans.spans.len() as u32)
            .filter(|&k| spans.spans[k as usize].bits & THREAD_STATE == 0)
            .collect();
        order.sort_unstable_by_key(|&k| spans.spans[k as usize].sweep_key());
        let mut depths: Vec<u32> = vec![0; order.len()];
        nest(
            order.len(),
            |k| {
                let s = &spans.spans[order[k] as usize];
                (s.start, s.end, s.level)
            },
            stack,
            |k, found| {
                let at = order[k] as usize;
                let launched = if is_device_work(spans.spans[at].raw) {
                    launch_of(at)
                } else {
                    None
                };
                let depth = match (launched, found) {
                    (Some(l), _) => Some(l.depth + 1),
                    (None, Some(p)) => Some(depths[p] + 1),
                    (None, None) => None,
                };
                counts.with_parent += usize::from(depth.is_some());
                depths[k] = depth.unwrap_or(0);
                counts.max_depth = counts.max_depth.max(depths[k]);
            },
        );
    }
}

/// The processes of the host tracks and the operation segments of each one's annotated
/// thread (for [`BY_TIME`]), as [`crate::scope::Scopes::build`] makes them.
struct Annotated {
    /// Per track: its process, for thread tracks with spans (graph-capture tracks included).
    process_of_track: Vec<Option<usize>>,
    segments: Vec<Vec<(Ns, Ns, u32)>>,
}

fn annotated_threads(trace: &Trace, tracks: &[TrackSpans], orders: &OperationOrders) -> Annotated {
    let processes = ProcessTracks::build(trace, tracks.len(), |t| {
        let spans = &tracks[t].spans;
        (!spans.is_empty())
            .then(|| thread_score(spans.iter().map(|s| (s.start, s.end, s.level, s.raw))))
    });
    let segments = (processes.annotated.iter())
        .map(|thread| {
            orders.segments(
                thread
                    .iter()
                    .flat_map(|t| tracks[t.0 as usize].spans.iter()),
            )
        })
        .collect();
    Annotated {
        process_of_track: processes.process_of_track,
        segments,
    }
}

/// What the sweeps count.
#[derive(Debug, Default)]
struct Counts {
    ranks: Vec<Attribution>,
    /// Per rank: the start of its first launch.
    first_launch: Vec<Ns>,
    with_parent: usize,
    max_depth: u32,
}

fn is_device(trace: &Trace, t: usize) -> bool {
    trace.tracks.get(t).is_some_and(|track| track.is_device())
}
