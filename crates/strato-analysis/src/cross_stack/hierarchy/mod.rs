//! Span hierarchy (XSP, seed 001): every span gets its parent, and the report says how many
//! device ops reach a launching call, a framework op and an annotation.
//!
//! Rules (see `docs/analyses/hierarchy.md`):
//! - the parent of a device op is its launch: the CPU span of the same rank with the same
//!   correlation id ([`crate::scope`]); without one, the innermost span containing it on its
//!   device queue (a `gpu_user_annotation`), if any;
//! - thread-state spans of the OS level (category
//!   [`strato_trace::names::THREAD_STATE_CATEGORY`]) are states, not calls: they have no parent and
//!   are no span's parent;
//! - the parent of any other span is the innermost span on the same track that contains it
//!   (`start <= child.start`, `end >= child.end`) at the same or a higher stratum (effective
//!   level, so step markers count as operations). Same-level nesting (`aten::linear` >
//!   `aten::addmm`) is kept, so the parents form a forest; XSP's strictly-higher-level parent is
//!   the nearest ancestor of a higher level on the chain;
//! - a device op is *with launch* when its launch was found, *with op* when the launch has a
//!   `Backend` ancestor, *with annotation* when the launch has an `Operation` ancestor
//!   (containment) or, failing that, an operation was active on its process's annotated thread
//!   when the launch started (the breakdown's attribution rule; counted apart as `by_time`).
//!
//! Device ops without a launch that start before their rank's first launch are counted as
//! `launched_before_trace`: their launch precedes the CPU side of the trace.
//!
//! Device ops whose launch is a graph launch call (`cudaGraphLaunch`, `hipGraphLaunch`) or a
//! captured launch copied in by [`crate::cross_stack::graphs`] are counted as `graph_kernels`, the
//! latter also as `graph_kernels_mapped`.
//!
//! Window: the whole trace. Conservation: `with_annotation = by_containment + by_time`,
//! `graph_kernels_mapped <= graph_kernels <= with_launch` and each count is at most `device_ops`;
//! per-rank counts add up to the totals.

use serde::Serialize;
use strato_trace::{Level, Ns, Trace};

use crate::analyzed::Analyzed;
use crate::scope::effective_level;

pub mod index;
mod registration;
pub(crate) mod stream;
mod tree;
pub use index::{Hierarchy, UNDER_BACKEND, UNDER_OPERATION};
pub use registration::SpanHierarchy;
pub use stream::HierarchyStream;
pub use tree::{parse_time, Tree, TreeResult, TreeSettings};

/// Attribution counts of one rank (or of all).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Attribution {
    pub device_ops: usize,
    pub with_launch: usize,
    pub with_op: usize,
    pub with_annotation: usize,
    pub with_annotation_by_containment: usize,
    pub with_annotation_by_time: usize,
    pub kernels: usize,
    pub kernels_with_launch: usize,
    pub kernels_with_annotation: usize,
    /// Device ops without a launch that started before the first launch of their rank: their
    /// launch happened before the CPU side of the trace begins (Kineto's warm-up flush), so
    /// no attribution is possible from this trace.
    pub launched_before_trace: usize,
    pub kernels_launched_before_trace: usize,
    /// Device ops replayed by a CUDA/HIP graph launch ([`crate::cross_stack::graphs`]): their
    /// launch is a graph launch call, or a captured launch copied in by `--graph-capture`.
    pub graph_kernels: usize,
    /// Of those, mapped to a captured launch (their launch is on a graph-capture track).
    pub graph_kernels_mapped: usize,
}

impl Attribution {
    fn add(&mut self, o: &Attribution) {
        self.device_ops += o.device_ops;
        self.with_launch += o.with_launch;
        self.with_op += o.with_op;
        self.with_annotation += o.with_annotation;
        self.with_annotation_by_containment += o.with_annotation_by_containment;
        self.with_annotation_by_time += o.with_annotation_by_time;
        self.kernels += o.kernels;
        self.kernels_with_launch += o.kernels_with_launch;
        self.kernels_with_annotation += o.kernels_with_annotation;
        self.launched_before_trace += o.launched_before_trace;
        self.kernels_launched_before_trace += o.kernels_launched_before_trace;
        self.graph_kernels += o.graph_kernels;
        self.graph_kernels_mapped += o.graph_kernels_mapped;
    }
}

/// Counts of one rank.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankAttribution {
    pub rank: i64,
    pub source: String,
    #[serde(flatten)]
    pub counts: Attribution,
}

/// The hierarchy report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HierarchyReport {
    #[serde(flatten)]
    pub total: Attribution,
    /// Spans with a parent / all spans.
    pub spans: usize,
    pub spans_with_parent: usize,
    pub max_depth: usize,
    pub ranks: Vec<RankAttribution>,
}

/// Device ops counted by the report: device-level spans on device queues.
fn is_counted_device_op(trace: &Trace, i: usize) -> bool {
    let s = &trace.spans[i];
    s.level.is_device_op() && trace.track(s.track).is_device()
}

/// Counts attribution (see the module docs).
pub fn report(analyzed: &Analyzed) -> HierarchyReport {
    let (trace, scopes, h) = (analyzed.trace(), analyzed.scopes(), analyzed.hierarchy());
    let mut ranks: Vec<Attribution> = vec![Attribution::default(); trace.ranks.len()];
    let mut first_launch: Vec<Ns> = vec![Ns::MAX; trace.ranks.len()];
    for (&(rank, _), &l) in &scopes.launch {
        let f = &mut first_launch[rank as usize];
        *f = (*f).min(trace.spans[l as usize].start);
    }
    for i in 0..trace.spans.len() {
        if !is_counted_device_op(trace, i) {
            continue;
        }
        let s = &trace.spans[i];
        let rank = trace.track(s.track).rank.0 as usize;
        let a = &mut ranks[rank];
        let kernel = s.level == Level::DeviceKernel;
        a.device_ops += 1;
        a.kernels += usize::from(kernel);
        let Some(l) = scopes.launch_of(trace, i as u32) else {
            if s.start < first_launch[rank] {
                a.launched_before_trace += 1;
                a.kernels_launched_before_trace += usize::from(kernel);
            }
            continue;
        };
        a.with_launch += 1;
        a.kernels_with_launch += usize::from(kernel);
        let ls = &trace.spans[l as usize];
        if crate::cross_stack::graphs::is_graph_capture_track(trace.track(ls.track)) {
            a.graph_kernels += 1;
            a.graph_kernels_mapped += 1;
        } else if crate::cross_stack::graphs::is_graph_launch_name(trace.str(ls.name)) {
            a.graph_kernels += 1;
        }
        let f = h.flags[l as usize];
        if f & UNDER_BACKEND != 0 {
            a.with_op += 1;
        }
        let annotated = if f & UNDER_OPERATION != 0 {
            a.with_annotation_by_containment += 1;
            true
        } else {
            let ls = &trace.spans[l as usize];
            let by_time = scopes.process_of_track[ls.track.0 as usize]
                .and_then(|p| scopes.processes[p].operation_at(ls.start))
                .is_some();
            a.with_annotation_by_time += usize::from(by_time);
            by_time
        };
        a.with_annotation += usize::from(annotated);
        a.kernels_with_annotation += usize::from(annotated && kernel);
    }
    let mut total = Attribution::default();
    for a in &ranks {
        total.add(a);
    }
    // Depth by memoised walk in start order (parents start no later than children, except
    // device ops whose launch precedes them: both cases resolve through the memo).
    let mut depth: Vec<u32> = vec![u32::MAX; trace.spans.len()];
    let mut max_depth = 0usize;
    let mut path: Vec<u32> = Vec::new();
    for i in 0..trace.spans.len() {
        let mut cur = i as u32;
        path.clear();
        while depth[cur as usize] == u32::MAX {
            path.push(cur);
            match h.parent[cur as usize] {
                Some(p) if path.len() <= trace.spans.len() => cur = p,
                _ => break,
            }
        }
        let mut d = if depth[cur as usize] == u32::MAX {
            0
        } else {
            depth[cur as usize] + 1
        };
        for &p in path.iter().rev() {
            if depth[p as usize] == u32::MAX {
                depth[p as usize] = d;
                d += 1;
            }
        }
        max_depth = max_depth.max(depth[i] as usize);
    }
    HierarchyReport {
        total,
        spans: trace.spans.len(),
        spans_with_parent: h.parent.iter().filter(|p| p.is_some()).count(),
        max_depth,
        ranks: ranks
            .into_iter()
            .enumerate()
            .map(|(r, counts)| RankAttribution {
                rank: trace.ranks[r].rank.unwrap_or(r as i64),
                source: trace.ranks[r].source.clone(),
                counts,
            })
            .collect(),
    }
}

/// One span of a chain, for display. Fields in alphabetical order (the order of its JSON).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChainLink {
    pub category: String,
    pub end_ns: Ns,
    pub level: Level,
    pub name: String,
    pub span: u32,
    pub start_ns: Ns,
    pub track: String,
}

/// Chains of the spans active at `t`: for every device op active at `t`, its chain up to the
/// root; for every CPU thread, the chain of its innermost active span. At most `limit` chains.
pub fn chains_at(analyzed: &Analyzed, t: Ns, limit: usize) -> Vec<Vec<ChainLink>> {
    let (trace, h) = (analyzed.trace(), analyzed.hierarchy());
    let mut innermost: Vec<Option<u32>> = vec![None; trace.tracks.len()];
    let mut device: Vec<u32> = Vec::new();
    for (i, s) in trace.spans.iter().enumerate() {
        if !(s.start <= t && t < s.end) {
            continue;
        }
        let track = trace.track(s.track);
        if track.is_device() && s.level.is_device_op() {
            device.push(i as u32);
        } else if !track.is_device() {
            let slot = &mut innermost[s.track.0 as usize];
            let better = slot.is_none_or(|o| {
                let os = &trace.spans[o as usize];
                (s.start, std::cmp::Reverse(s.end), s.same_extent_order())
                    > (os.start, std::cmp::Reverse(os.end), os.same_extent_order())
            });
            if better {
                *slot = Some(i as u32);
            }
        }
    }
    // Not the file's order: device ops by time (then track), then each thread's innermost
    // span by rank, threads before other host tracks, and track.
    let track_key = |i: u32| {
        let s = &trace.spans[i as usize];
        let track = trace.track(s.track);
        let thread = matches!(track.kind, strato_trace::TrackKind::Thread { .. });
        (track.rank.0, !thread, track_label(track), s.start)
    };
    device.sort_by_cached_key(|&i| {
        let s = &trace.spans[i as usize];
        (
            s.start,
            std::cmp::Reverse(s.end),
            track_key(i),
            s.same_extent_order(),
            i,
        )
    });
    let mut threads: Vec<u32> = innermost.into_iter().flatten().collect();
    threads.sort_by_cached_key(|&i| (track_key(i), i));
    let roots: Vec<u32> = device.into_iter().chain(threads).collect();
    roots
        .into_iter()
        .take(limit)
        .map(|leaf| h.chain(leaf).into_iter().map(|i| link(trace, i)).collect())
        .collect()
}

/// Chains of the first `limit` device ops whose name contains `needle`.
pub fn chains_of_kernels(analyzed: &Analyzed, needle: &str, limit: usize) -> Vec<Vec<ChainLink>> {
    let (trace, h) = (analyzed.trace(), analyzed.hierarchy());
    let mut found: Vec<u32> = (0..trace.spans.len() as u32)
        .filter(|&i| {
            let s = &trace.spans[i as usize];
            trace.track(s.track).is_device()
                && s.level.is_device_op()
                && trace.str(s.name).contains(needle)
        })
        .collect();
    found.sort_by_cached_key(|&i| {
        let s = &trace.spans[i as usize];
        let track = trace.track(s.track);
        (s.start, s.end, track.rank.0, track_label(track), i)
    });
    found
        .into_iter()
        .take(limit)
        .map(|leaf| h.chain(leaf).into_iter().map(|i| link(trace, i)).collect())
        .collect()
}

/// How a chain link names its track.
fn track_label(track: &strato_trace::Track) -> String {
    match &track.kind {
        strato_trace::TrackKind::Thread { pid, tid } => format!("pid {pid} tid {tid}"),
        strato_trace::TrackKind::DeviceQueue { device, queue } => {
            format!("device {device} stream {queue}")
        }
        strato_trace::TrackKind::Counter { name, .. } => format!("counter {name}"),
        strato_trace::TrackKind::Custom { group, name } => format!("{group}/{name}"),
    }
}

fn link(trace: &Trace, i: u32) -> ChainLink {
    let s = &trace.spans[i as usize];
    let track_name = track_label(trace.track(s.track));
    ChainLink {
        span: i,
        name: trace.str(s.name).to_owned(),
        level: effective_level(trace, s),
        category: trace.str(s.category).to_owned(),
        track: track_name,
        start_ns: s.start,
        end_ns: s.end,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cross_stack::breakdown::tests::Synth;

    #[test]
    fn chain_annotation_op_api_kernel_and_counts() {
        let mut s = Synth::new();
        s.cpu(1, "forward", Level::Operation, (0, 100));
        s.cpu(1, "aten::linear", Level::Backend, (10, 60));
        s.cpu(1, "aten::addmm", Level::Backend, (12, 50));
        s.launch(1, (20, 25), 1); // span 3
        s.kernel("gemm", (30, 80), 1); // span 4
        s.launch(1, (70, 72), 2); // outside any op
        s.kernel("copy", (90, 95), 2);
        s.kernel("orphan", (96, 97), 3); // no launch, after the first launch
        let a = Analyzed::new(s.trace());
        assert_eq!(a.hierarchy().chain(4), vec![4, 3, 2, 1, 0]);
        let r = report(&a);
        // The same, streamed one span at a time.
        let stream = <SpanHierarchy as crate::registry::Analysis>::stream(&Default::default());
        let streamed = crate::registry::fed_span_by_span(s.trace(), stream.expect("streams"));
        assert_eq!(streamed, r);
        assert_eq!(
            (
                r.total.device_ops,
                r.total.with_launch,
                r.total.with_op,
                r.total.with_annotation
            ),
            (3, 2, 1, 2)
        );
        assert_eq!(r.total.with_annotation_by_containment, 2);
        assert_eq!(r.total.launched_before_trace, 0);
        assert_eq!(r.max_depth, 4);
        let chains = chains_at(&a, 31, 10);
        let names: Vec<&str> = chains[0].iter().map(|l| l.name.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "gemm",
                "cudaLaunchKernel",
                "aten::addmm",
                "aten::linear",
                "forward"
            ]
        );
    }
}
