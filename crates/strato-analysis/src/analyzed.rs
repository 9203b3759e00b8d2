//! The analysis context: one trace with the indexes that several analyses share, built once.
//!
//! The cross-stack analyses (breakdown, hierarchy report and chains, layers) all read the
//! same [`Scopes`] (processes, annotated threads, launches, device-op owners) and the same
//! [`Hierarchy`] (parent links). Building them is the bulk of those analyses' cost, so an
//! [`Analyzed`] builds each at most once, on first use, and every analysis that needs them
//! takes `&Analyzed` instead of its steps. Analyses that only read the trace take
//! [`Analyzed::trace`].
//!
//! The cross-rank analyses (collectives, critical path, what-if, advice) all see the same job
//! ([`Analyzed::job`]: a process driving several devices split into one rank per device); an
//! [`Analyzed`] makes it once for all of them.
//!
//! Rules: the indexes are a pure function of the trace, so an analysis gives the same result
//! whether they were built for it or for an earlier one. An `Analyzed` borrows its trace and
//! never changes it; corrections (e.g. the recorded-overhead correction) are applied before.

use std::sync::OnceLock;

use strato_trace::Trace;

use crate::cross_stack::hierarchy::index::Hierarchy;
use crate::distributed::collectives::split_multi_device_ranks;
use crate::scope::Scopes;

/// A trace and its lazily built shared indexes.
#[derive(Debug)]
pub struct Analyzed<'t> {
    trace: &'t Trace,
    scopes: OnceLock<Scopes>,
    hierarchy: OnceLock<Hierarchy>,
    /// The trace split by device when it has a process to split ([`Analyzed::job`]).
    job: OnceLock<Option<Trace>>,
}

impl<'t> Analyzed<'t> {
    /// A context over `trace`; nothing is built until an analysis asks for it.
    pub fn new(trace: &'t Trace) -> Analyzed<'t> {
        Analyzed {
            trace,
            scopes: OnceLock::new(),
            hierarchy: OnceLock::new(),
            job: OnceLock::new(),
        }
    }

    /// The trace analysed.
    pub fn trace(&self) -> &'t Trace {
        self.trace
    }

    /// The trace's scopes ([`Scopes::build`]), built on first use.
    pub fn scopes(&self) -> &Scopes {
        self.scopes.get_or_init(|| Scopes::build(self.trace))
    }

    /// The span hierarchy ([`Hierarchy::build`], which needs the scopes), built on first use.
    pub fn hierarchy(&self) -> &Hierarchy {
        self.hierarchy
            .get_or_init(|| Hierarchy::build(self.trace, self.scopes()))
    }

    /// The job the cross-rank analyses read: the trace with each process that drives several
    /// devices split into one rank per device, as NCCL numbers them
    /// ([`split_multi_device_ranks`]), or the trace itself when no process has a device to
    /// split off (then `std::ptr::eq(analyzed.job(), analyzed.trace())`). Made on first use
    /// and kept: every cross-rank analysis run on this context matches the same ranks.
    pub fn job(&self) -> &Trace {
        self.job
            .get_or_init(|| split_multi_device_ranks(self.trace))
            .as_ref()
            .unwrap_or(self.trace)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cross_stack::breakdown::tests::Synth;
    use strato_trace::Level;

    #[test]
    fn builds_each_index_once_and_matches_a_direct_build() {
        let mut s = Synth::new();
        s.cpu(1, "forward", Level::Operation, (0, 100));
        s.launch(1, (20, 25), 1);
        s.kernel("gemm", (30, 80), 1);
        let a = Analyzed::new(s.trace());
        assert!(a.scopes.get().is_none() && a.hierarchy.get().is_none());
        let h = a.hierarchy();
        assert!(
            a.scopes.get().is_some(),
            "the hierarchy builds the scopes it needs"
        );
        let direct = Hierarchy::build(s.trace(), &Scopes::build(s.trace()));
        assert_eq!(h.parent, direct.parent);
        assert_eq!(h.flags, direct.flags);
        // A second request returns the same index, not a rebuilt one.
        assert!(std::ptr::eq(a.hierarchy(), h));
        assert!(std::ptr::eq(a.scopes(), a.scopes()));
        assert_eq!(a.scopes().processes.len(), 1);
    }
}
