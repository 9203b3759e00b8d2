//! A path inside a window ([`compose`]): its time per kind, the time before and after it, and
//! the operations with the most path time, adding up to the window.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use serde::Serialize;
use strato_trace::{Ns, SpanId, Trace};

use super::shapes::{PathKind, RankCriticalPath};

/// One operation's time on the critical path inside a window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PathOp {
    /// The event's name, or for time between events a description in parentheses
    /// (`(launch delay)`, `(waiting for the device)`, `(waiting for another thread)`,
    /// `(untraced gap)`).
    pub name: String,
    pub kind: PathKind,
    /// The rank the time was spent on (another rank's, through a collective).
    pub rank: i64,
    /// Path time inside the window.
    pub ns: Ns,
}

/// What the critical path is made of inside one window `[start_ns, end_ns]`.
///
/// Identity (tested): `sum(by_kind) + before_path_ns + after_path_ns = window_ns`. Each
/// instant of the window is counted once: by the kind of the path edge covering it, or as
/// before/after the path when the path does not reach it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowComposition {
    pub start_ns: Ns,
    pub end_ns: Ns,
    pub window_ns: Ns,
    /// Time of the window before the path's first node (the path starts later).
    pub before_path_ns: Ns,
    /// Time of the window after the path's last node.
    pub after_path_ns: Ns,
    /// Path time inside the window per kind (every kind present).
    pub by_kind: BTreeMap<PathKind, Ns>,
    /// The part of `by_kind[kernel]` spent in communication (NCCL/RCCL) kernels; the rest is
    /// compute.
    pub communication_ns: Ns,
    /// The operations with the most path time inside the window, longest first.
    pub top_ops: Vec<PathOp>,
}

/// How many [`PathOp`]s [`compose`] keeps.
pub const TOP_PATH_OPS: usize = 10;

/// Splits `path` inside `[start, end]` (see [`WindowComposition`]); keeps the `top` operations
/// with the most path time.
pub fn compose(
    trace: &Trace,
    path: &RankCriticalPath,
    start: Ns,
    end: Ns,
    top: usize,
) -> WindowComposition {
    let end = end.max(start);
    let mut by_kind: BTreeMap<PathKind, Ns> = PathKind::ALL.iter().map(|&k| (k, 0)).collect();
    let mut communication_ns = 0;
    // Per op (or unowned kind), rank, and whether an unowned wait was for another thread.
    let mut ops: FxHashMap<(Option<SpanId>, PathKind, i64, bool), Ns> = FxHashMap::default();
    let mut cursor = start;
    let mut first_covered: Option<Ns> = None;
    for seg in &path.segments {
        let lo = seg.from_ns.max(cursor);
        let hi = seg.to_ns.min(end);
        if hi <= lo {
            continue;
        }
        first_covered.get_or_insert(lo);
        cursor = hi;
        let ns = hi - lo;
        *by_kind.entry(seg.kind).or_insert(0) += ns;
        let rank = seg.span.map_or(path.rank, |id| {
            let r = trace.track(trace.spans[id.0 as usize].track).rank;
            trace.ranks[r.0 as usize].rank.unwrap_or(i64::from(r.0))
        });
        if seg.kind == PathKind::Kernel {
            if let Some(id) = seg.span {
                if crate::distributed::collectives::is_collective_kernel(
                    trace.str(trace.spans[id.0 as usize].name),
                ) {
                    communication_ns += ns;
                }
            }
        }
        // A wait from one thread to another (a hand-off between a main thread and its
        // workers), not for the device.
        let on_thread =
            |t: Option<strato_trace::TrackId>| t.is_some_and(|t| !trace.track(t).is_device());
        let between_threads = seg.span.is_none()
            && seg.kind == PathKind::SyncWait
            && on_thread(seg.from_track)
            && on_thread(seg.to_track);
        *ops.entry((seg.span, seg.kind, rank, between_threads))
            .or_insert(0) += ns;
    }
    // Ops by name (one op can own several edges: a call's inside around its children).
    let mut by_name: FxHashMap<(String, PathKind, i64), Ns> = FxHashMap::default();
    for ((span, kind, rank, between_threads), ns) in ops {
        let name = match span {
            Some(id) => trace.str(trace.spans[id.0 as usize].name).to_owned(),
            None => match kind {
                PathKind::Launch => "(launch delay)".to_owned(),
                PathKind::SyncWait if between_threads => "(waiting for another thread)".to_owned(),
                PathKind::SyncWait => "(waiting for the device)".to_owned(),
                PathKind::CollectiveWait => "(waiting for peers)".to_owned(),
                _ => "(untraced gap)".to_owned(),
            },
        };
        *by_name.entry((name, kind, rank)).or_insert(0) += ns;
    }
    let mut top_ops: Vec<PathOp> = by_name
        .into_iter()
        .map(|((name, kind, rank), ns)| PathOp {
            name,
            kind,
            rank,
            ns,
        })
        .collect();
    top_ops.sort_by(|a, b| {
        b.ns.cmp(&a.ns)
            .then_with(|| a.name.cmp(&b.name))
            .then_with(|| a.kind.cmp(&b.kind))
            .then_with(|| a.rank.cmp(&b.rank))
    });
    top_ops.truncate(top);
    let (before_path_ns, after_path_ns) = match first_covered {
        Some(first) => (first - start, end - cursor),
        None => (end - start, 0),
    };
    WindowComposition {
        start_ns: start,
        end_ns: end,
        window_ns: end - start,
        before_path_ns,
        after_path_ns,
        by_kind,
        communication_ns,
        top_ops,
    }
}
