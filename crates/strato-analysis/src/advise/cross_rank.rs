//! [`CrossRankEvidence`]: the [`MultiRankEvidence`] the multi-rank rules consume, computed
//! from a trace of several ranks with the collectives analysis
//! ([`crate::distributed::collectives`]).
//!
//! - **Stragglers** are the ranks the others wait for. Step durations alone cannot name them:
//!   in synchronous data parallelism every rank's step lasts as long as the slowest one's,
//!   and a rank's lateness can build up between its step annotations. So the evidence comes
//!   from the collectives matched across ranks (the collectives analysis, on its aligned
//!   clock): in each complete instance the last rank's lateness is its arrival minus the
//!   median arrival of the other members; lateness is summed per (rank, step), the step being that
//!   rank's `ProfilerStep#N` span holding the collective's CPU launch (else its kernel start;
//!   outside every step, the step before), and compared with the median duration of that step
//!   (same `N`) over the ranks. A rank without steps has one window, its whole extent.
//! - **Exposed communication** is, for each communication kernel (HTA's classes,
//!   [`crate::device_time::gpu_time::kernel_class`]), the part of its *transfer* that no
//!   computation kernel of the same rank and device overlapped (any stream), grouped per (rank,
//!   kernel name). A kernel that is a member of a complete matched collective starts by waiting for
//!   the last member ([`crate::distributed::collectives::Member::wait_ns`]): that head, `[start,
//!   start + wait)` on the rank's clock, is a [`PeerWait`] for the last member (the straggler's
//!   finding), and only the rest is transfer. Unmatched kernels are transfer whole.
//!
//! Exposure needs no peer, so it is computed for every trace, single-rank included. With a
//! single rank there is nothing to compare: the collectives analysis is not run, no straggler
//! is looked for, and [`MultiRankEvidence::compares_ranks`] is `false` (the straggler rule
//! says it was not evaluated).

use rustc_hash::FxHashMap;
use strato_trace::{Level, Ns, Trace};

use super::multi_rank::{ExposedCommunication, MultiRankEvidence, PeerWait, StragglerObservation};
use crate::device_time::gpu_time::{merge, KernelClass, KernelClasses};
use crate::distributed::collectives::{collectives, CollectivesOptions, CollectivesReport};

/// What the cross-rank analyses found, ready for the multi-rank rules.
#[derive(Debug, Clone, Default)]
pub struct CrossRankEvidence {
    /// Two or more ranks were compared (else `stragglers` is empty and means nothing).
    pub compares_ranks: bool,
    pub stragglers: Vec<StragglerObservation>,
    pub exposed: Vec<ExposedCommunication>,
    /// Waits for late peers (empty with one rank).
    pub peer_waits: Vec<PeerWait>,
}

impl MultiRankEvidence for CrossRankEvidence {
    fn compares_ranks(&self) -> bool {
        self.compares_ranks
    }
    fn stragglers(&self) -> Vec<StragglerObservation> {
        self.stragglers.clone()
    }
    fn exposed_communication(&self) -> Vec<ExposedCommunication> {
        self.exposed.clone()
    }
    fn peer_waits(&self) -> Vec<PeerWait> {
        self.peer_waits.clone()
    }
}

impl CrossRankEvidence {
    /// The evidence of a trace: exposure always, stragglers with two or more ranks (the
    /// collectives analysis runs only then).
    pub fn from_trace(trace: &Trace) -> CrossRankEvidence {
        if trace.ranks.len() < 2 {
            return CrossRankEvidence {
                compares_ranks: false,
                stragglers: Vec::new(),
                exposed: exposed(trace, &FxHashMap::default()),
                peer_waits: Vec::new(),
            };
        }
        let report = collectives(trace, &CollectivesOptions::default());
        Self::from_collectives(trace, &report)
    }

    /// The same from a collectives analysis already run on `trace` (the report runs it for its
    /// Distributed section: not twice).
    pub fn from_collectives(trace: &Trace, report: &CollectivesReport) -> CrossRankEvidence {
        let compares_ranks = trace.ranks.len() >= 2;
        let waits = if compares_ranks {
            kernel_waits(trace, report)
        } else {
            FxHashMap::default()
        };
        CrossRankEvidence {
            compares_ranks,
            stragglers: if compares_ranks {
                stragglers(trace, report)
            } else {
                Vec::new()
            },
            exposed: exposed(trace, &waits),
            peer_waits: peer_waits(trace, &waits),
        }
    }
}

/// The wait at the head of a collective kernel: how long, and for which rank (the last
/// member to arrive).
#[derive(Debug, Clone, Copy)]
struct KernelWait {
    wait_ns: Ns,
    peer: strato_trace::RankId,
}

/// Per collective kernel (by span index) of a complete instance whose member waited: the wait
/// and the peer waited for.
fn kernel_waits(trace: &Trace, report: &CollectivesReport) -> FxHashMap<u32, KernelWait> {
    let mut out = FxHashMap::default();
    for instance in report.instances.iter().filter(|i| i.complete) {
        let Some(peer) = instance.last_rank else {
            continue;
        };
        for m in &instance.members {
            let Some(wait_ns) = m.wait_ns.filter(|&w| w > 0 && m.rank != peer) else {
                continue;
            };
            if (m.kernel.0 as usize) < trace.spans.len() {
                out.insert(m.kernel.0, KernelWait { wait_ns, peer });
            }
        }
    }
    out
}

/// The waits grouped per (waiting rank, peer, kernel name), on the waiting rank's clock.
fn peer_waits(trace: &Trace, waits: &FxHashMap<u32, KernelWait>) -> Vec<PeerWait> {
    let mut grouped: std::collections::BTreeMap<(i64, i64, &str), PeerWait> = Default::default();
    for (&kernel, w) in waits {
        let span = &trace.spans[kernel as usize];
        let rank = job_rank(trace, trace.track(span.track).rank);
        let peer = job_rank(trace, w.peer);
        let name = trace.str(span.name);
        let entry = grouped
            .entry((rank, peer, name))
            .or_insert_with(|| PeerWait {
                rank,
                peer,
                name: name.to_owned(),
                count: 0,
                intervals: Vec::new(),
                wait_ns: 0,
            });
        let wait = w.wait_ns.min(span.end - span.start);
        entry.count += 1;
        entry.wait_ns = entry.wait_ns.saturating_add(wait);
        entry.intervals.push((span.start, span.start + wait));
    }
    grouped
        .into_values()
        .map(|mut w| {
            w.intervals.sort_unstable();
            w
        })
        .collect()
}

/// A rank's job rank as the rules print it (the rank index when the job's is unknown).
fn job_rank(trace: &Trace, rank: strato_trace::RankId) -> i64 {
    trace
        .ranks
        .get(rank.0 as usize)
        .and_then(|r| r.rank)
        .unwrap_or(i64::from(rank.0))
}

fn stragglers(trace: &Trace, report: &CollectivesReport) -> Vec<StragglerObservation> {
    // Steps per rank, in time order: (start, end, name). A rank without steps has one window:
    // the extent of its spans.
    let mut steps: Vec<Vec<(Ns, Ns, String)>> = vec![Vec::new(); trace.ranks.len()];
    let mut extent: Vec<Option<(Ns, Ns)>> = vec![None; trace.ranks.len()];
    for span in &trace.spans {
        let track = trace.track(span.track);
        let r = track.rank.0 as usize;
        if let Some(e) = extent.get_mut(r) {
            let w = e.get_or_insert((span.start, span.end));
            w.0 = w.0.min(span.start);
            w.1 = w.1.max(span.end);
        }
        if track.is_device() {
            continue;
        }
        let name = trace.str(span.name);
        if name.starts_with(STEP_PREFIX) {
            if let Some(list) = steps.get_mut(r) {
                list.push((span.start, span.end, name.to_owned()));
            }
        }
    }
    for (r, list) in steps.iter_mut().enumerate() {
        list.sort_by_key(|s| (s.0, s.1));
        if list.is_empty() {
            if let Some((start, end)) = extent[r] {
                list.push((start, end, WINDOW.to_owned()));
            }
        }
    }
    // Lateness of each complete instance's last rank (its arrival minus the median arrival of
    // the other members), charged to that rank's step holding the launch (else the kernel start).
    let mut late: FxHashMap<(usize, usize), Ns> = FxHashMap::default();
    for instance in report.instances.iter().filter(|i| i.complete) {
        let (Some(last_rank), Some(last_arrival)) = (instance.last_rank, instance.last_arrival)
        else {
            continue;
        };
        let Some(member) = instance.members.iter().find(|m| m.rank == last_rank) else {
            continue;
        };
        let mut others: Vec<Ns> = instance
            .members
            .iter()
            .filter(|m| m.rank != last_rank)
            .map(|m| m.start)
            .collect();
        if others.is_empty() {
            continue;
        }
        others.sort_unstable();
        let lateness = last_arrival - median(&others);
        if lateness <= 0 {
            continue;
        }
        let at = member
            .launch
            .map(|id| trace.spans[id.0 as usize].start)
            .unwrap_or(trace.spans[member.kernel.0 as usize].start);
        let r = last_rank.0 as usize;
        let Some(list) = steps.get(r) else { continue };
        let k = list.partition_point(|s| s.0 <= at);
        // Outside every step: the nearest step before (or the first).
        let k = k.saturating_sub(1);
        if !list.is_empty() {
            let sum = late.entry((r, k)).or_default();
            *sum = sum.saturating_add(lateness);
        }
    }
    // Median step duration per step name over the ranks that have it.
    let mut durations: FxHashMap<&str, Vec<Ns>> = FxHashMap::default();
    for list in &steps {
        for (start, end, name) in list {
            durations
                .entry(name.as_str())
                .or_default()
                .push(end - start);
        }
    }
    let medians: FxHashMap<&str, Ns> = durations
        .into_iter()
        .map(|(name, mut d)| {
            d.sort_unstable();
            (name, median(&d))
        })
        .collect();
    let mut out: Vec<StragglerObservation> = late
        .into_iter()
        .map(|((r, k), excess)| {
            let (start, end, name) = &steps[r][k];
            StragglerObservation {
                rank: job_rank(trace, strato_trace::RankId(r as u32)),
                step: name
                    .strip_prefix(STEP_PREFIX)
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(k),
                start_ns: *start,
                end_ns: *end,
                excess_ns: excess.min(end - start),
                median_ns: medians.get(name.as_str()).copied().unwrap_or(end - start),
            }
        })
        .collect();
    out.sort_by_key(|o| (o.rank, o.step));
    out
}

const STEP_PREFIX: &str = "ProfilerStep#";
/// The pseudo-step of a rank without `ProfilerStep#N` spans: its whole extent.
const WINDOW: &str = "(whole trace)";

/// Median of a sorted, non-empty slice (the lower middle's midpoint for even lengths).
fn median(sorted: &[Ns]) -> Ns {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        sorted[n / 2 - 1] + (sorted[n / 2] - sorted[n / 2 - 1]) / 2
    }
}

fn exposed(trace: &Trace, waits: &FxHashMap<u32, KernelWait>) -> Vec<ExposedCommunication> {
    // Per (rank, device): communication kernels (start, end, name, wait at the head) and
    // computation intervals.
    type Key = (u32, i64);
    let mut comm: FxHashMap<Key, Vec<(Ns, Ns, &str, Ns)>> = FxHashMap::default();
    let mut compute: FxHashMap<Key, Vec<(Ns, Ns)>> = FxHashMap::default();
    let mut classes = KernelClasses::default();
    for (index, span) in trace.spans.iter().enumerate() {
        if span.level != Level::DeviceKernel || span.end <= span.start {
            continue;
        }
        let track = trace.track(span.track);
        let strato_trace::TrackKind::DeviceQueue { device, .. } = track.kind else {
            continue;
        };
        let key = (track.rank.0, device);
        let name = trace.str(span.name);
        match classes.of(trace, span.name) {
            KernelClass::Communication => {
                let wait = waits
                    .get(&(index as u32))
                    .map_or(0, |w| w.wait_ns.min(span.end - span.start));
                comm.entry(key)
                    .or_default()
                    .push((span.start, span.end, name, wait))
            }
            KernelClass::Computation => {
                compute.entry(key).or_default().push((span.start, span.end))
            }
            _ => {}
        }
    }
    let mut grouped: FxHashMap<(u32, &str), ExposedCommunication> = FxHashMap::default();
    for (key, kernels) in comm {
        let busy = merge(compute.remove(&key).unwrap_or_default().into_iter());
        for (start, end, name, wait) in kernels {
            let entry = grouped
                .entry((key.0, name))
                .or_insert_with(|| ExposedCommunication {
                    rank: job_rank(trace, strato_trace::RankId(key.0)),
                    name: name.to_owned(),
                    intervals: Vec::new(),
                    total_ns: 0,
                    waiting_ns: 0,
                });
            entry.total_ns = entry.total_ns.saturating_add(end - start);
            entry.waiting_ns = entry.waiting_ns.saturating_add(wait);
            // Only the transfer part, after the wait for the last member.
            entry.intervals.extend(uncovered(start + wait, end, &busy));
        }
    }
    let mut out: Vec<ExposedCommunication> = grouped.into_values().collect();
    out.sort_by(|a, b| (a.rank, &a.name).cmp(&(b.rank, &b.name)));
    // In time order, whatever order the file lists the kernels in.
    for c in &mut out {
        c.intervals.sort_unstable();
    }
    out
}

/// The parts of `[start, end)` that no interval of `busy` (merged, sorted) covers.
fn uncovered(start: Ns, end: Ns, busy: &[(Ns, Ns)]) -> Vec<(Ns, Ns)> {
    let mut out = Vec::new();
    let mut at = start;
    let first = busy.partition_point(|&(_, e)| e <= start);
    for &(s, e) in &busy[first..] {
        if s >= end {
            break;
        }
        if s > at {
            out.push((at, s));
        }
        at = at.max(e);
        if at >= end {
            break;
        }
    }
    if at < end {
        out.push((at, end));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use strato_trace::testing::{rank, TraceBuilder};

    /// Ranks with one step `[0, 1100 us)` each and one all-reduce whose kernels all end at
    /// 1000 us (clocks agree) and start at the given times, each launched 10 us before.
    fn one_step_all_reduce(starts: &[(i64, Ns)]) -> Trace {
        const US: Ns = 1_000;
        let mut b = TraceBuilder::new();
        for &(r, start) in starts {
            let mut info = rank(Some(r), &format!("rank{r}"));
            info.world_size = Some(starts.len() as i64);
            b.rank(info);
            let cpu = b.thread(100 + r, 1);
            let gpu = b.queue(r, 20);
            b.span(cpu, Level::Operation, "ProfilerStep#1", 0, 1100 * US);
            b.span(
                cpu,
                Level::AcceleratorApi,
                "cudaLaunchKernel",
                start - 10 * US,
                start - 9 * US,
            )
            .correlation(1);
            b.span(
                gpu,
                Level::DeviceKernel,
                "ncclKernel_AllReduce_RING_LL_Sum_float",
                start,
                1000 * US,
            )
            .correlation(1);
        }
        b.build()
    }

    #[test]
    fn uncovered_parts_and_busy_add_up_to_the_kernel() {
        let busy = vec![(10, 20), (30, 40), (60, 100)];
        let parts = uncovered(15, 70, &busy);
        assert_eq!(parts, vec![(20, 30), (40, 60)]);
        let covered: Ns = busy
            .iter()
            .map(|&(s, e)| (e.min(70) - s.max(15)).max(0))
            .sum();
        let free: Ns = parts.iter().map(|&(s, e)| e - s).sum();
        assert_eq!(covered + free, 70 - 15);
        assert_eq!(uncovered(0, 5, &busy), vec![(0, 5)]);
        assert_eq!(uncovered(60, 80, &busy), vec![]);
    }

    #[test]
    fn a_single_rank_gives_exposure_but_compares_no_ranks() {
        let mut b = TraceBuilder::new();
        b.rank(rank(Some(0), "r0"));
        let d = b.queue(0, 7);
        b.span(d, Level::DeviceKernel, "ncclKernel_AllReduce", 0, 10);
        let evidence = CrossRankEvidence::from_trace(&b.build());
        assert!(!evidence.compares_ranks && evidence.stragglers.is_empty());
        assert_eq!(evidence.exposed.len(), 1);
        assert_eq!(evidence.exposed[0].intervals, vec![(0, 10)]);
    }

    #[test]
    fn the_late_rank_is_the_straggler_by_construction() {
        // Three ranks, one step [0, 1100 us) each; an all-reduce whose kernels all end at
        // 1000 us (clocks agree) and start at 100, 120 and 600 us: rank 2 is late by
        // 600 - median(100, 120) = 490 us, against a median step of 1100 us.
        const US: Ns = 1_000;
        let trace = one_step_all_reduce(&[(0, 100 * US), (1, 120 * US), (2, 600 * US)]);
        let evidence = CrossRankEvidence::from_trace(&trace);
        assert!(evidence.compares_ranks);
        assert_eq!(
            evidence.stragglers,
            vec![StragglerObservation {
                rank: 2,
                step: 1,
                start_ns: 0,
                end_ns: 1100 * US,
                excess_ns: 490 * US,
                median_ns: 1100 * US,
            }]
        );
    }

    #[test]
    fn a_wait_for_a_late_rank_is_its_peers_not_exposed_communication() {
        // Four ranks, one step [0, 1100 us) each; an all-reduce whose kernels all end at
        // 1000 us and start at 100, 110, 120 and 900 us (rank 3 late). No computation, so all
        // transfer is exposed. Rank 0's kernel: 900 us, of which 800 wait for rank 3 (its
        // arrival - rank 0's) and 100 transfer, [900, 1000) us.
        const US: Ns = 1_000;
        let trace =
            one_step_all_reduce(&[(0, 100 * US), (1, 110 * US), (2, 120 * US), (3, 900 * US)]);
        let evidence = CrossRankEvidence::from_trace(&trace);
        let r0 = &evidence.exposed[0];
        assert_eq!(r0.rank, 0);
        assert_eq!(
            (r0.total_ns, r0.waiting_ns, r0.intervals.clone()),
            (900 * US, 800 * US, vec![(900 * US, 1000 * US)])
        );
        let r3 = evidence.exposed.iter().find(|e| e.rank == 3).unwrap();
        assert_eq!(
            (r3.waiting_ns, r3.total_ns),
            (0, 100 * US),
            "the late rank waits for no one"
        );
        let w0 = evidence.peer_waits.iter().find(|w| w.rank == 0).unwrap();
        assert_eq!(
            (w0.peer, w0.count, w0.wait_ns, w0.intervals.clone()),
            (3, 1, 800 * US, vec![(100 * US, 900 * US)])
        );
        assert_eq!(
            evidence.peer_waits.len(),
            3,
            "ranks 0, 1 and 2 waited for rank 3"
        );
        assert!(evidence.peer_waits.iter().all(|w| w.peer == 3));
        // Wait + transfer = the kernel, for every rank.
        for e in &evidence.exposed {
            let transfer: Ns = e.intervals.iter().map(|&(s, t)| t - s).sum();
            assert_eq!(e.waiting_ns + transfer, e.total_ns, "rank {}", e.rank);
        }
        // The rules: rank 3 is the straggler and rank 0's wait is named there; rank 0's
        // exposed finding covers the 100 us of transfer only.
        let s = super::super::multi_rank::stragglers(
            Some(&evidence),
            &Default::default(),
            &Default::default(),
        )
        .unwrap();
        assert_eq!(s.len(), 1);
        assert!(s[0].message.starts_with("Rank 3 "), "{}", s[0].message);
        assert!(s[0].message.contains("the most rank 0"), "{}", s[0].message);
        let x = super::super::multi_rank::exposed_communication(
            Some(&evidence),
            &Default::default(),
            &Default::default(),
        )
        .unwrap();
        let x0 = x
            .iter()
            .find(|d| d.message.starts_with("On rank 0,"))
            .unwrap();
        assert_eq!(x0.intervals, vec![(900 * US, 1000 * US)]);
    }

    #[test]
    fn exposed_communication_by_construction() {
        // Rank 0, device 0: all-reduce [0, 100) beside a gemm [20, 50) on another stream:
        // 70 exposed of 100. Rank 1: all-reduce [0, 100) under a gemm [0, 100): none exposed.
        let mut b = TraceBuilder::new();
        b.rank(rank(Some(0), "r0"));
        let a7 = b.queue(0, 7);
        let a8 = b.queue(0, 8);
        b.span(a8, Level::DeviceKernel, "ncclKernel_AllReduce", 0, 100);
        b.span(a7, Level::DeviceKernel, "gemm", 20, 50);
        b.rank(rank(Some(1), "r1"));
        let b7 = b.queue(0, 7);
        let b8 = b.queue(0, 8);
        b.span(b8, Level::DeviceKernel, "ncclKernel_AllReduce", 0, 100);
        b.span(b7, Level::DeviceKernel, "gemm", 0, 100);
        let evidence = CrossRankEvidence::from_trace(&b.build());
        assert_eq!(evidence.exposed.len(), 2);
        let r0 = &evidence.exposed[0];
        assert_eq!(
            (r0.total_ns, r0.intervals.clone()),
            (100, vec![(0, 20), (50, 100)])
        );
        let r1 = &evidence.exposed[1];
        assert_eq!((r1.total_ns, r1.intervals.clone()), (100, vec![]));
    }
}
