//! The span hierarchy's index: every span's parent and the flags it inherits, built once per
//! trace (through [`crate::analyzed::Analyzed::hierarchy`]) from the trace and its
//! [`Scopes`]. The rules are in the parent module's docs ([`crate::cross_stack::hierarchy`]); the
//! report built on it is there too.

use strato_trace::{Level, Ns, Trace};

use crate::scope::{effective_level, Scopes};

/// Parent links of every span.
#[derive(Debug, Clone)]
pub struct Hierarchy {
    /// Parent span of each span.
    pub parent: Vec<Option<u32>>,
    /// Bit flags per span: [`UNDER_OPERATION`], [`UNDER_BACKEND`] (ancestor-or-self).
    pub flags: Vec<u8>,
}

/// The span or one of its ancestors is an operation.
pub const UNDER_OPERATION: u8 = 1;
/// The span or one of its ancestors is a framework (Backend) op.
pub const UNDER_BACKEND: u8 = 2;

pub(super) fn own_flags(level: Level) -> u8 {
    match level {
        Level::Operation => UNDER_OPERATION,
        Level::Backend => UNDER_BACKEND,
        _ => 0,
    }
}

impl Hierarchy {
    /// Builds the parent links. O(n log n) plus the nesting depth per span.
    pub fn build(trace: &Trace, scopes: &Scopes) -> Hierarchy {
        let n = trace.spans.len();
        let mut parent: Vec<Option<u32>> = vec![None; n];
        let mut flags: Vec<u8> = vec![0; n];
        let levels: Vec<Level> = trace
            .spans
            .iter()
            .map(|s| effective_level(trace, s))
            .collect();
        // Containment, track by track; thread tracks first so launches have their flags.
        let mut order: Vec<usize> = (0..trace.tracks.len()).collect();
        order.sort_by_key(|&t| trace.tracks[t].is_device());
        let mut stack: Vec<usize> = Vec::new();
        let mut sorted: Vec<u32> = Vec::new();
        for t in order {
            let device = trace.tracks[t].is_device();
            sorted.clear();
            // Thread-state spans (the OS level's `running`, `blocked:*`, ...) are states of the
            // thread, not calls: no span's parent and without one.
            sorted.extend(
                scopes.by_track[t]
                    .iter()
                    .copied()
                    .filter(|&i| !crate::scope::is_thread_state(trace, &trace.spans[i as usize])),
            );
            sorted.sort_unstable_by_key(|&i| {
                let s = &trace.spans[i as usize];
                (
                    s.start,
                    std::cmp::Reverse(s.end),
                    levels[i as usize].code(),
                    s.same_extent_order(),
                    i,
                )
            });
            nest(
                sorted.len(),
                |k| {
                    let i = sorted[k] as usize;
                    (trace.spans[i].start, trace.spans[i].end, levels[i])
                },
                &mut stack,
                |k, found| {
                    let i = sorted[k];
                    let s = &trace.spans[i as usize];
                    let launched = if device && crate::scope::is_device_work(s.level) {
                        scopes.launch_of(trace, i)
                    } else {
                        None
                    };
                    let p = launched.or(found.map(|f| sorted[f]));
                    parent[i as usize] = p;
                    flags[i as usize] =
                        own_flags(levels[i as usize]) | p.map_or(0, |p| flags[p as usize]);
                },
            );
        }
        Hierarchy { parent, flags }
    }

    /// The chain from `span` up to its root: `[span, parent, grandparent, ...]`.
    pub fn chain(&self, span: u32) -> Vec<u32> {
        let mut out = vec![span];
        let mut cur = span;
        while let Some(p) = self.parent[cur as usize] {
            if out.len() > self.parent.len() {
                break; // defensive: no cycles are possible, but never loop forever
            }
            out.push(p);
            cur = p;
        }
        out
    }
}

/// The containment sweep of one track: its `len` spans sorted by start, longer first, then
/// level and id (`at(k)`: the `k`-th one's start, end and effective level). Visits each in
/// that order with the innermost span before it that contains it at the same or a higher
/// stratum (`visit(k, Some(parent's k))`), the rules of the module docs. `stack` is working
/// room, cleared first.
pub(crate) fn nest(
    len: usize,
    at: impl Fn(usize) -> (Ns, Ns, Level),
    stack: &mut Vec<usize>,
    mut visit: impl FnMut(usize, Option<usize>),
) {
    stack.clear();
    for k in 0..len {
        let (start, end, level) = at(k);
        while let Some(&top) = stack.last() {
            let (top_start, top_end, _) = at(top);
            // `top` cannot contain this span or anything after it.
            if top_end < end || (top_end == start && top_end > top_start) {
                stack.pop();
            } else {
                break;
            }
        }
        let found = stack.iter().rev().copied().find(|&c| at(c).2 <= level);
        visit(k, found);
        stack.push(k);
    }
}
