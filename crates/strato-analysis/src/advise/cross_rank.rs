//! [`CrossRankEvidence`]: the [`MultiRankEvidence`] the multi-rank rules consume, computed
//! from a trace of several ranks with the collectives analysis ([`crate::collectives`]).
//!
//! - **Stragglers** compare ranks step by step. Steps are the `ProfilerStep#N` spans of each
//!   rank's CPU, aligned across ranks by their name (the same `N`). A straggler is not the
//!   rank with the longest step — in synchronous data parallelism every rank's step lasts as
//!   long as the slowest one's, because the others wait for it in the collectives — but the
//!   rank that *worked* longest: a rank's work in a step is the step's duration minus the time
//!   its collective kernels waited for the last peer (the collectives analysis's `wait_ns`,
//!   on the aligned clock), collectives assigned to the step their CPU launch (else their
//!   kernel start) falls in. The excess is the work minus the median work of the ranks that
//!   have the step; steps present on fewer than two ranks are skipped.
//! - **Exposed communication** is, for each communication kernel (HTA's classes,
//!   [`crate::gpu_time::kernel_class`]), the part of it that no computation kernel of the same
//!   rank and device overlapped (any stream), grouped per (rank, kernel name).
//!
//! With a single rank there is nothing to compare: [`CrossRankEvidence::from_trace`] returns
//! `None` and both rules say so.

use rustc_hash::FxHashMap;
use strato_trace::{Level, Ns, Trace};

use super::multi_rank::{ExposedCommunication, MultiRankEvidence, StragglerObservation};
use crate::collectives::{collectives, CollectivesOptions};
use crate::gpu_time::{kernel_class, merge, KernelClass};

/// What the cross-rank analyses found, ready for the multi-rank rules.
#[derive(Debug, Clone, Default)]
pub struct CrossRankEvidence {
    pub stragglers: Vec<StragglerObservation>,
    pub exposed: Vec<ExposedCommunication>,
}

impl MultiRankEvidence for CrossRankEvidence {
    fn stragglers(&self) -> Vec<StragglerObservation> {
        self.stragglers.clone()
    }
    fn exposed_communication(&self) -> Vec<ExposedCommunication> {
        self.exposed.clone()
    }
}

impl CrossRankEvidence {
    /// The evidence of a trace with two or more ranks; `None` for a single rank.
    pub fn from_trace(trace: &Trace) -> Option<CrossRankEvidence> {
        if trace.ranks.len() < 2 {
            return None;
        }
        Some(CrossRankEvidence {
            stragglers: stragglers(trace),
            exposed: exposed(trace),
        })
    }
}

/// A rank's job rank as the rules print it (the rank index when the job's is unknown).
fn job_rank(trace: &Trace, rank: strato_trace::RankId) -> i64 {
    trace
        .ranks
        .get(rank.0 as usize)
        .and_then(|r| r.rank)
        .unwrap_or(i64::from(rank.0))
}

fn stragglers(trace: &Trace) -> Vec<StragglerObservation> {
    // Steps per rank: name -> (start, end).
    let mut steps: Vec<Vec<(Ns, Ns, String)>> = vec![Vec::new(); trace.ranks.len()];
    for span in &trace.spans {
        let track = trace.track(span.track);
        if track.is_device() {
            continue;
        }
        let name = trace.str(span.name);
        if name.starts_with("ProfilerStep#") {
            if let Some(list) = steps.get_mut(track.rank.0 as usize) {
                list.push((span.start, span.end, name.to_owned()));
            }
        }
    }
    for list in &mut steps {
        list.sort_by_key(|s| (s.0, s.1));
    }
    // Collective waits charged to the step of each member's launch (else kernel start).
    let mut waited: Vec<Vec<Ns>> = steps.iter().map(|l| vec![0; l.len()]).collect();
    let report = collectives(trace, &CollectivesOptions::default());
    for instance in &report.instances {
        for m in &instance.members {
            let Some(wait) = m.wait_ns else { continue };
            let at = m
                .launch
                .map(|id| trace.spans[id.0 as usize].start)
                .unwrap_or(trace.spans[m.kernel.0 as usize].start);
            let Some(list) = steps.get(m.rank.0 as usize) else {
                continue;
            };
            let k = list.partition_point(|s| s.0 <= at);
            if k > 0 && at < list[k - 1].1 {
                waited[m.rank.0 as usize][k - 1] += wait;
            }
        }
    }
    // Work per (step name, rank).
    let mut by_step: FxHashMap<&str, Vec<(usize, usize, Ns)>> = FxHashMap::default();
    for (r, list) in steps.iter().enumerate() {
        for (k, (start, end, name)) in list.iter().enumerate() {
            let work = end
                .saturating_sub(*start)
                .saturating_sub(waited[r][k])
                .max(0);
            by_step.entry(name.as_str()).or_default().push((r, k, work));
        }
    }
    let mut out = Vec::new();
    for (name, mut ranks) in by_step {
        if ranks.len() < 2 {
            continue;
        }
        let step: usize = name
            .trim_start_matches("ProfilerStep#")
            .parse()
            .unwrap_or_default();
        let mut works: Vec<Ns> = ranks.iter().map(|r| r.2).collect();
        works.sort_unstable();
        let n = works.len();
        let median = if n % 2 == 1 {
            works[n / 2]
        } else {
            works[n / 2 - 1] + (works[n / 2] - works[n / 2 - 1]) / 2
        };
        ranks.sort_unstable_by_key(|r| r.0);
        for (r, k, work) in ranks {
            let excess = work - median;
            if excess <= 0 {
                continue;
            }
            let (start, end, _) = &steps[r][k];
            out.push(StragglerObservation {
                rank: job_rank(trace, strato_trace::RankId(r as u32)),
                step,
                start_ns: *start,
                end_ns: *end,
                excess_ns: excess.min(end - start),
                median_ns: median,
            });
        }
    }
    out.sort_by_key(|o| (o.rank, o.step));
    out
}

fn exposed(trace: &Trace) -> Vec<ExposedCommunication> {
    // Per (rank, device): communication kernels and computation intervals.
    type Key = (u32, i64);
    let mut comm: FxHashMap<Key, Vec<(Ns, Ns, &str)>> = FxHashMap::default();
    let mut compute: FxHashMap<Key, Vec<(Ns, Ns)>> = FxHashMap::default();
    for span in &trace.spans {
        if span.level != Level::DeviceKernel || span.end <= span.start {
            continue;
        }
        let track = trace.track(span.track);
        let strato_trace::TrackKind::DeviceQueue { device, .. } = track.kind else {
            continue;
        };
        let key = (track.rank.0, device);
        let name = trace.str(span.name);
        match kernel_class(name) {
            KernelClass::Communication => comm
                .entry(key)
                .or_default()
                .push((span.start, span.end, name)),
            KernelClass::Computation => {
                compute.entry(key).or_default().push((span.start, span.end))
            }
            _ => {}
        }
    }
    let mut grouped: FxHashMap<(u32, &str), ExposedCommunication> = FxHashMap::default();
    for (key, kernels) in comm {
        let busy = merge(compute.remove(&key).unwrap_or_default().into_iter());
        for (start, end, name) in kernels {
            let entry = grouped
                .entry((key.0, name))
                .or_insert_with(|| ExposedCommunication {
                    rank: job_rank(trace, strato_trace::RankId(key.0)),
                    name: name.to_owned(),
                    intervals: Vec::new(),
                    total_ns: 0,
                });
            entry.total_ns += end - start;
            entry.intervals.extend(uncovered(start, end, &busy));
        }
    }
    let mut out: Vec<ExposedCommunication> = grouped.into_values().collect();
    out.sort_by(|a, b| (a.rank, &a.name).cmp(&(b.rank, &b.name)));
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
    fn a_single_rank_gives_no_evidence() {
        let mut b = TraceBuilder::new();
        b.rank(rank(Some(0), "r0"));
        let d = b.queue(0, 7);
        b.span(d, Level::DeviceKernel, "ncclKernel_AllReduce", 0, 10);
        assert!(CrossRankEvidence::from_trace(&b.build()).is_none());
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
        let evidence = CrossRankEvidence::from_trace(&b.build()).expect("two ranks");
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
