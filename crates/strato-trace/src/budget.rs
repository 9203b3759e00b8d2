//! The memory budget of an import: importers keep events in a [`Trace`]'s vectors, which grow
//! by doubling. A trace that outgrows the machine ended in `memory allocation of N bytes
//! failed` and an abort; instead, an importer calls [`MemoryTracker::check`] once per event
//! kept and stops with an error when the next growth would pass the budget.
//!
//! The accounting is an estimate of what the trace holds: every event vector's capacity times
//! its element size, the attribute texts, the string table ([`crate::StringTable::heap_bytes`]),
//! plus, for each vector that is full, the doubling its next push causes. It is cheap: a few
//! comparisons per call, and attribute texts are summed once each (the tracker remembers how
//! many it has seen). Where the budget comes from (environment, physical memory) is the
//! caller's business: this crate does no I/O.

use crate::Trace;

/// The import would keep more than the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the trace would need more than the memory budget of {} MiB ({} MiB kept so far)", limit_bytes >> 20, kept_bytes >> 20)]
pub struct MemoryBudgetExceeded {
    pub limit_bytes: u64,
    pub kept_bytes: u64,
}

/// Tracks one trace's memory against a budget. See the module docs.
#[derive(Debug, Clone)]
pub struct MemoryTracker {
    limit_bytes: u64,
}

fn vec_bytes<T>(v: &Vec<T>) -> u64 {
    let size = std::mem::size_of::<T>() as u64;
    let capacity = v.capacity() as u64;
    // A full vector doubles on its next push.
    let growth = if v.len() == v.capacity() {
        capacity.max(4)
    } else {
        0
    };
    (capacity + growth) * size
}

impl MemoryTracker {
    /// A tracker allowing `limit_bytes`.
    pub fn new(limit_bytes: u64) -> Self {
        MemoryTracker { limit_bytes }
    }

    /// The budget.
    pub fn limit_bytes(&self) -> u64 {
        self.limit_bytes
    }

    /// The estimated bytes `trace` holds, with the growth its next pushes cause.
    pub fn kept_bytes(&mut self, trace: &Trace) -> u64 {
        vec_bytes(&trace.spans)
            + vec_bytes(&trace.instants)
            + vec_bytes(&trace.counters)
            + vec_bytes(&trace.flows)
            + vec_bytes(&trace.tracks)
            + trace.args.heap_bytes() as u64
            + trace.strings.heap_bytes() as u64
    }

    /// Fails when what `trace` keeps, with its next growth, passes the budget. Call it once
    /// per event kept (it is a few comparisons when nothing is about to grow).
    pub fn check(&mut self, trace: &Trace) -> Result<(), MemoryBudgetExceeded> {
        let kept = self.kept_bytes(trace);
        if kept > self.limit_bytes {
            return Err(MemoryBudgetExceeded {
                limit_bytes: self.limit_bytes,
                kept_bytes: kept,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::OptionalId;
    use crate::{Level, Span, TrackId};

    #[test]
    fn stops_before_the_budget_is_passed() {
        let mut trace = Trace::default();
        let mut tracker = MemoryTracker::new(1 << 20);
        let mut kept = 0usize;
        let outcome = loop {
            if let Err(e) = tracker.check(&trace) {
                break e;
            }
            trace.spans.push(Span {
                track: TrackId(0),
                start: 0,
                end: 1,
                name: Default::default(),
                category: Default::default(),
                level: Level::Library,
                correlation: OptionalId::NONE,
                external_id: OptionalId::NONE,
                args: None,
            });
            kept += 1;
            assert!(kept < 1 << 20, "never stopped");
        };
        assert_eq!(outcome.limit_bytes, 1 << 20);
        let span = std::mem::size_of::<Span>();
        assert!(trace.spans.capacity() * span <= 1 << 20);
        assert!(
            kept * span * 2 > 1 << 19,
            "stopped far too early: {kept} spans"
        );
    }

    #[test]
    fn args_are_counted_once_each() {
        let mut trace = Trace::default();
        let mut tracker = MemoryTracker::new(u64::MAX);
        trace.add_args(&"x".repeat(1000));
        let a = tracker.kept_bytes(&trace);
        let b = tracker.kept_bytes(&trace);
        assert_eq!(a, b);
        assert!(a >= 1000);
    }
}
