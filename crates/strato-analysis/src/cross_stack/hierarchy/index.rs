//! The span hierarchy's index: every span's parent and the flags it inherits, built once per
//! trace (through [`crate::analyzed::Analyzed::hierarchy`]) from the trace and its
//! [`Scopes`]. The rules are in the parent module's docs ([`crate::cross_stack::hierarchy`]); the
//! report built on it is there too.

use strato_trace::{Level, Trace};

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

fn own_flags(level: Level) -> u8 {
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
        let mut stack: Vec<u32> = Vec::new();
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
                    i,
                )
            });
            stack.clear();
            for &i in &sorted {
                let s = &trace.spans[i as usize];
                while let Some(&top) = stack.last() {
                    let ts = &trace.spans[top as usize];
                    // `top` cannot contain `s` or anything after it.
                    if ts.end < s.end || (ts.end == s.start && ts.end > ts.start) {
                        stack.pop();
                    } else {
                        break;
                    }
                }
                let level = levels[i as usize];
                let found = stack
                    .iter()
                    .rev()
                    .copied()
                    .find(|&c| levels[c as usize] <= level);
                let launched = if device && crate::scope::is_device_work(s.level) {
                    scopes.launch_of(trace, i)
                } else {
                    None
                };
                let p = launched.or(found);
                parent[i as usize] = p;
                flags[i as usize] = own_flags(level) | p.map_or(0, |p| flags[p as usize]);
                stack.push(i);
            }
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
