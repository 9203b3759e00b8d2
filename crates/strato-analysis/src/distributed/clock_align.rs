//! Clock alignment of the ranks of a job from matched symmetric collectives.
//!
//! Owns: the estimate of each rank's clock offset to a reference rank, its error, and the rule
//! that decides whether a rank is shifted. Why here and not in the importer: the only paired
//! observations ranks on different hosts share are their collectives, and those are known only
//! after [`crate::distributed::collectives`] matched them.
//!
//! Method. The kernels of one all-reduce, all-gather or reduce-scatter end within microseconds
//! of each other on every member (no member can finish before the last one has contributed,
//! and the last step of the ring or tree completes on all of them together); broadcast,
//! reduce, send/recv and all-to-all do not have that property and are never used. For each
//! rank `r` and each symmetric instance it shares with the reference rank, the sample is
//! `end(reference) - end(r)`. The offset is the median of the samples; samples farther than
//! `3 x max(1.4826 x MAD, 1 us)` from it are outliers and dropped; the error is the largest
//! remaining residual, at least [`MIN_ERROR_NS`] (timestamps of Kineto traces are whole
//! microseconds). A rank is shifted (its times + offset) only when `|offset| > error`; with
//! no symmetric collective shared with the reference, its clock is left alone and the result
//! says so.

use serde::Serialize;
use strato_trace::{Ns, RankId};

/// The smallest alignment error claimed: one microsecond, the resolution of Kineto timestamps.
pub const MIN_ERROR_NS: Ns = 1_000;

/// One observation: on instance `instance`, rank `rank`'s symmetric-collective kernel ended at
/// `end` (its own clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndSample {
    pub instance: usize,
    pub rank: RankId,
    pub end: Ns,
}

/// How one rank's clock relates to the reference rank's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankClock {
    pub rank: RankId,
    /// Estimated offset: `reference time = own time + offset_ns`. `None`: no symmetric
    /// collective shared with the reference (clock left alone).
    pub offset_ns: Option<Ns>,
    /// The alignment error (largest residual of the kept samples, at least [`MIN_ERROR_NS`]).
    pub error_ns: Option<Ns>,
    /// Samples used (after outliers were dropped) and dropped.
    pub samples: usize,
    pub outliers: usize,
    /// Whether the rank's times are shifted by `offset_ns` (only when `|offset| > error`).
    pub shifted: bool,
}

impl RankClock {
    /// The shift applied to this rank's times: the offset when shifted, else 0.
    pub fn shift(&self) -> Ns {
        if self.shifted {
            self.offset_ns.unwrap_or(0)
        } else {
            0
        }
    }
}

/// The alignment of every rank to the reference rank.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClockAlignment {
    /// The reference: the first rank (in input order) with a symmetric collective.
    pub reference: Option<RankId>,
    /// One entry per rank given, in the order given.
    pub ranks: Vec<RankClock>,
    /// Whether any rank was shifted.
    pub aligned: bool,
    /// The largest alignment error over the ranks with an estimate; `None` when no rank has one.
    pub max_error_ns: Option<Ns>,
    /// A sentence for people: what was done and why.
    pub note: String,
}

impl ClockAlignment {
    /// The shift of `rank` (0 when unknown or not shifted).
    pub fn shift_of(&self, rank: RankId) -> Ns {
        self.ranks
            .iter()
            .find(|c| c.rank == rank)
            .map_or(0, RankClock::shift)
    }

    /// The shift of each of the `ranks` ranks of a trace, by rank index ([`Self::shift_of`]).
    pub fn shifts(&self, ranks: usize) -> Vec<Ns> {
        (0..ranks as u32)
            .map(|r| self.shift_of(RankId(r)))
            .collect()
    }
}

/// Each rank's window (the first start and the last end of its spans) on its own clock, as a
/// pass over the spans gathers it, stated as one window on the job's clock
/// ([`RankWindows::on_job_clock`]): the union of the ranks' windows, each shifted as the
/// collectives align it. Without the shifts (one rank, or no collective) it is the union of
/// the ranks' own windows.
#[derive(Debug, Clone, Default)]
pub struct RankWindows(Vec<(Ns, Ns)>);

impl RankWindows {
    /// Widens rank `rank`'s window to `[start, end)`.
    pub fn add(&mut self, rank: RankId, start: Ns, end: Ns) {
        let r = rank.0 as usize;
        if self.0.len() <= r {
            self.0.resize(r + 1, (Ns::MAX, Ns::MIN));
        }
        let w = &mut self.0[r];
        *w = (w.0.min(start), w.1.max(end));
    }

    /// The number of ranks seen (the highest rank with a span, plus one).
    pub fn ranks(&self) -> usize {
        self.0.len()
    }

    /// Widens the windows of ranks `first_rank..` by `other`'s (a rank file's windows, read
    /// apart, put into the whole job's).
    pub fn add_all(&mut self, first_rank: u32, other: &RankWindows) {
        for (r, &(start, end)) in other.0.iter().enumerate() {
            if start <= end {
                self.add(RankId(first_rank + r as u32), start, end);
            }
        }
    }

    /// The union of the ranks' windows, rank `r`'s shifted by `shifts[r]` (0 beyond them);
    /// `(Ns::MAX, Ns::MIN)` without spans.
    pub fn on_job_clock(&self, shifts: &[Ns]) -> (Ns, Ns) {
        let mut out = (Ns::MAX, Ns::MIN);
        for (r, &(start, end)) in self.0.iter().enumerate() {
            if start > end {
                continue;
            }
            let shift = shifts.get(r).copied().unwrap_or(0);
            out = (
                out.0.min(start.saturating_add(shift)),
                out.1.max(end.saturating_add(shift)),
            );
        }
        out
    }
}

fn median(sorted: &[i64]) -> i64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        // Mean of the two middle values, without overflow.
        let (a, b) = (sorted[n / 2 - 1], sorted[n / 2]);
        a / 2 + b / 2 + (a % 2 + b % 2) / 2
    }
}

/// Estimates every rank's offset from the end samples of symmetric collectives. `ranks` lists
/// the ranks to report, in order; samples of other ranks are ignored.
pub fn estimate(ranks: &[RankId], samples: &[EndSample]) -> ClockAlignment {
    let reference = ranks
        .iter()
        .copied()
        .find(|r| samples.iter().any(|s| s.rank == *r));
    let Some(reference) = reference else {
        return ClockAlignment {
            reference: None,
            ranks: ranks
                .iter()
                .map(|&rank| RankClock {
                    rank,
                    offset_ns: None,
                    error_ns: None,
                    samples: 0,
                    outliers: 0,
                    shifted: false,
                })
                .collect(),
            aligned: false,
            max_error_ns: None,
            note: "no symmetric collective (all-reduce, all-gather, reduce-scatter) in the input: \
                   clocks left as recorded"
                .into(),
        };
    };
    let mut reference_end: rustc_hash::FxHashMap<usize, Ns> = Default::default();
    for s in samples.iter().filter(|s| s.rank == reference) {
        reference_end.insert(s.instance, s.end);
    }
    let mut out = Vec::with_capacity(ranks.len());
    for &rank in ranks {
        if rank == reference {
            out.push(RankClock {
                rank,
                offset_ns: Some(0),
                error_ns: Some(0),
                samples: reference_end.len(),
                outliers: 0,
                shifted: false,
            });
            continue;
        }
        let mut diffs: Vec<i64> = samples
            .iter()
            .filter(|s| s.rank == rank)
            .filter_map(|s| reference_end.get(&s.instance).map(|&e| e - s.end))
            .collect();
        if diffs.is_empty() {
            out.push(RankClock {
                rank,
                offset_ns: None,
                error_ns: None,
                samples: 0,
                outliers: 0,
                shifted: false,
            });
            continue;
        }
        diffs.sort_unstable();
        let offset = median(&diffs);
        let mut deviations: Vec<i64> = diffs.iter().map(|d| (d - offset).abs()).collect();
        deviations.sort_unstable();
        let mad = median(&deviations);
        let bound = 3 * ((1.4826 * mad as f64) as i64).max(MIN_ERROR_NS);
        let kept: Vec<i64> = diffs
            .iter()
            .copied()
            .filter(|d| (d - offset).abs() <= bound)
            .collect();
        let error = kept
            .iter()
            .map(|d| (d - offset).abs())
            .max()
            .unwrap_or(0)
            .max(MIN_ERROR_NS);
        out.push(RankClock {
            rank,
            offset_ns: Some(offset),
            error_ns: Some(error),
            samples: kept.len(),
            outliers: diffs.len() - kept.len(),
            shifted: offset.abs() > error,
        });
    }
    let aligned = out.iter().any(|c| c.shifted);
    let max_error_ns = out.iter().filter_map(|c| c.error_ns).max();
    let unestimated = out.iter().filter(|c| c.offset_ns.is_none()).count();
    let shifted = out.iter().filter(|c| c.shifted).count();
    let mut note = if aligned {
        format!(
            "{shifted} rank(s) shifted to the reference rank's clock (offset beyond the alignment error)"
        )
    } else {
        "no rank's offset exceeds its alignment error: clocks left as recorded".to_string()
    };
    if unestimated > 0 {
        note.push_str(&format!(
            "; {unestimated} rank(s) share no symmetric collective with the reference: left alone"
        ));
    }
    ClockAlignment {
        reference: Some(reference),
        ranks: out,
        aligned,
        max_error_ns,
        note,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(instance: usize, rank: u32, end: Ns) -> EndSample {
        EndSample {
            instance,
            rank: RankId(rank),
            end,
        }
    }

    #[test]
    fn a_skewed_rank_is_found_and_shifted_an_unskewed_one_is_not() {
        // Rank 1's clock runs 5 ms behind; rank 2 agrees within 2 us.
        let mut samples = Vec::new();
        for i in 0..5 {
            let t = 1_000_000 * (i as i64 + 1);
            samples.push(s(i, 0, t));
            samples.push(s(i, 1, t - 5_000_000 + (i as i64 % 2) * 1_500));
            samples.push(s(i, 2, t + 2_000 * (i as i64 % 2)));
        }
        // One wild sample on rank 1 (a kernel that ended late for another reason).
        samples.push(s(9, 0, 50_000_000));
        samples.push(s(9, 1, 40_000_000));
        let a = estimate(&[RankId(0), RankId(1), RankId(2)], &samples);
        assert_eq!(a.reference, Some(RankId(0)));
        let r1 = &a.ranks[1];
        assert!(r1.shifted);
        assert!((r1.offset_ns.unwrap() - 5_000_000).abs() <= 1_500);
        assert_eq!(r1.outliers, 1);
        assert!(r1.error_ns.unwrap() <= 1_500);
        let r2 = &a.ranks[2];
        assert!(!r2.shifted, "{r2:?}");
        assert!(a.aligned);
        assert_eq!(a.shift_of(RankId(2)), 0);
    }

    #[test]
    fn without_symmetric_collectives_clocks_stay_and_it_says_so() {
        let a = estimate(&[RankId(0), RankId(1)], &[]);
        assert!(!a.aligned);
        assert_eq!(a.max_error_ns, None);
        assert!(a.note.contains("no symmetric collective"));
        assert!(a.ranks.iter().all(|r| r.offset_ns.is_none()));
    }

    #[test]
    fn median_of_even_counts_does_not_overflow() {
        assert_eq!(median(&[i64::MAX - 1, i64::MAX - 1]), i64::MAX - 1);
        assert_eq!(median(&[1, 2, 3, 4]), 2);
        assert_eq!(median(&[-3, -1]), -2);
    }
}
