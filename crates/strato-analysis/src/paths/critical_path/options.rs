//! The cross-rank input of the graph ([`CriticalPathOptions`]): the collectives matched across
//! ranks ([`CollectiveInstance`]) and each rank's shift onto the job's reference clock, taken
//! from the collectives analysis ([`crate::distributed::collectives`]) or, for inputs without
//! its matcher, matched by name and order ([`match_collectives_by_name_order`]).

use std::collections::BTreeMap;

use strato_trace::{Level, Ns, RankId, SpanId, Trace};

/// One rank's kernel of a collective instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CollectiveMember {
    pub rank: RankId,
    /// The device span of the rank's collective kernel.
    pub span: SpanId,
}

/// One collective instance matched across ranks: the kernel of each rank that took part.
/// Instances with fewer than two members in the trace add no edge.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CollectiveInstance {
    pub members: Vec<CollectiveMember>,
}

/// Options of [`critical_path`](super::critical_path).
#[derive(Debug, Clone, Default)]
pub struct CriticalPathOptions {
    /// Collectives matched across ranks (cross-rank edges); `None`: ranks are independent.
    pub collectives: Option<Vec<CollectiveInstance>>,
    /// Per rank (indexed by [`RankId`]), what is added to its times to put them on the job's
    /// reference clock: the clock alignment of [`crate::distributed::collectives`] (ranks beyond
    /// the list: 0). Every cross-rank edge compares aligned times, and every time the result gives
    /// (path, events, segments, windows) is on that clock.
    pub clock_shift: Vec<Ns>,
}

impl CriticalPathOptions {
    /// The cross-rank inputs exactly as `strato collectives` computes them: its matched
    /// instances (with two or more ranks) and its clock alignment, so that every cross-rank
    /// analysis sees the same job.
    pub fn from_collectives(
        trace: &Trace,
        report: &crate::distributed::collectives::CollectivesReport,
    ) -> CriticalPathOptions {
        CriticalPathOptions::from_matched(trace, &report.instances, &report.clock)
    }

    /// The cross-rank inputs from collectives already matched and clocks already aligned
    /// ([`crate::distributed::collectives::match_collectives`], then
    /// [`crate::distributed::collectives::measure`]): what the two constructors above share,
    /// for a caller that keeps the matched instances for itself too.
    pub fn from_matched(
        trace: &Trace,
        instances: &[crate::distributed::collectives::CollectiveInstance],
        clock: &crate::distributed::clock_align::ClockAlignment,
    ) -> CriticalPathOptions {
        if trace.ranks.len() < 2 {
            return CriticalPathOptions::default();
        }
        CriticalPathOptions {
            collectives: Some(instances_from_matched(instances)),
            clock_shift: clock.shifts(trace.ranks.len()),
        }
    }

    /// Matches the collectives of `trace` and aligns its clocks as `strato collectives` does
    /// (without its straggler and size analyses): [`CriticalPathOptions::from_collectives`]'s
    /// inputs, for a caller that has no collectives report.
    pub fn matched(trace: &Trace) -> CriticalPathOptions {
        if trace.ranks.len() < 2 {
            return CriticalPathOptions::default();
        }
        let ranks = crate::distributed::collectives::rank_summaries(trace);
        let mut instances = crate::distributed::collectives::match_collectives(&ranks);
        let clock = crate::distributed::collectives::measure(&ranks, &mut instances);
        CriticalPathOptions::from_matched(trace, &instances, &clock)
    }

    /// The shift of `rank` onto the reference clock.
    pub fn shift_of(&self, rank: RankId) -> Ns {
        self.clock_shift.get(rank.0 as usize).copied().unwrap_or(0)
    }
}

/// The cross-rank instances of [`crate::distributed::collectives::match_collectives`] as
/// critical-path input: each matched collective's member kernels (incomplete instances keep the
/// members the input has; fewer than two add no edge).
pub fn instances_from_matched(
    matched: &[crate::distributed::collectives::CollectiveInstance],
) -> Vec<CollectiveInstance> {
    matched
        .iter()
        .map(|instance| CollectiveInstance {
            members: instance
                .members
                .iter()
                .map(|m| CollectiveMember {
                    rank: m.rank,
                    span: m.kernel,
                })
                .collect(),
        })
        .collect()
}

/// Fallback collective matching for inputs without a matcher: on each rank, the device spans
/// whose name contains `ncclKernel` or `ncclDevKernel` (or starts with `rccl`), in start order;
/// the i-th kernel of a given name on every rank form one instance. Ranks with a different
/// count of a name are matched up to the shortest list.
pub fn match_collectives_by_name_order(trace: &Trace) -> Vec<CollectiveInstance> {
    /// One rank's kernels of one name, in start order.
    type RankKernels = (u32, Vec<(Ns, SpanId)>);
    let mut per_rank: BTreeMap<(String, u32), Vec<(Ns, SpanId)>> = BTreeMap::new();
    for (i, span) in trace.spans.iter().enumerate() {
        if span.level != Level::DeviceKernel {
            continue;
        }
        let track = trace.track(span.track);
        if !track.is_device() {
            continue;
        }
        let name = trace.str(span.name);
        if !(name.contains("ncclKernel")
            || name.contains("ncclDevKernel")
            || name.starts_with("rccl"))
        {
            continue;
        }
        per_rank
            .entry((name.to_owned(), track.rank.0))
            .or_default()
            .push((span.start, SpanId(i as u32)));
    }
    let mut by_name: BTreeMap<String, Vec<RankKernels>> = BTreeMap::new();
    for ((name, rank), mut list) in per_rank {
        list.sort_unstable_by_key(|&(ts, id)| (ts, id.0));
        by_name.entry(name).or_default().push((rank, list));
    }
    let mut out = Vec::new();
    for (_, ranks) in by_name {
        if ranks.len() < 2 {
            continue;
        }
        let count = ranks.iter().map(|(_, l)| l.len()).min().unwrap_or(0);
        for i in 0..count {
            out.push(CollectiveInstance {
                members: ranks
                    .iter()
                    .map(|(r, l)| CollectiveMember {
                        rank: RankId(*r),
                        span: l[i].1,
                    })
                    .collect(),
            });
        }
    }
    out
}
