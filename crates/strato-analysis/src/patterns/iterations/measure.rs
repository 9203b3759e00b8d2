//! The measures of one loop: each iteration's time, interval to the next, copies and gaps
//! ([`Iteration`]), and the averages over the loop ([`Summary`]).

use serde::Serialize;
use strato_trace::Ns;

use super::mine::Match;
use crate::device_time::gpu_time::intersection_length;

/// One iteration of one loop.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Iteration {
    pub index: usize,
    pub start_ns: Ns,
    pub end_ns: Ns,
    pub duration_ns: Ns,
    /// Ops of the main stream in it, and how many of them are beyond the pattern.
    pub ops: usize,
    pub inserted_ops: usize,
    /// Next iteration's start - this end (`None` for the last).
    pub interval_to_next_ns: Option<Ns>,
    /// Share of that interval covered by host-to-device copies of the device (any stream).
    pub h2d_overlap: Option<f64>,
    /// Mean idle time between consecutive main-stream ops inside the iteration.
    pub mean_op_gap_ns: f64,
    /// Host-to-device bytes of copies starting between this start and the next start.
    pub bytes_in: Option<i64>,
}

/// Averages over a loop's iterations.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub iterations: usize,
    pub mean_duration_ns: f64,
    pub mean_interval_ns: f64,
    pub max_interval_ns: Ns,
    pub median_interval_ns: f64,
    pub mean_h2d_overlap: f64,
    pub mean_op_gap_ns: f64,
    pub mean_bytes_in: Option<f64>,
    /// Share of the iterations' time the main stream is busy.
    pub busy_in_iterations: f64,
    /// Share of each cycle (iteration + interval) spent between iterations.
    pub between_share: f64,
    /// Share of the main stream's ops inside iterations.
    pub coverage: f64,
}

/// A device op of a main stream.
#[derive(Debug, Clone, Copy)]
pub(super) struct Op {
    pub(super) start: Ns,
    pub(super) end: Ns,
    pub(super) name: u32,
    pub(super) correlation: Option<u64>,
    pub(super) kernel: bool,
}

pub(super) fn measure(
    ops: &[Op],
    matches: &[Match],
    gap_prefix: &[Ns],
    h2d: &[(Ns, Ns, Option<i64>)],
    h2d_merged: &[(Ns, Ns)],
) -> Vec<Iteration> {
    let mut out: Vec<Iteration> = Vec::with_capacity(matches.len());
    for (index, m) in matches.iter().enumerate() {
        let start = ops[m.start].start;
        let end = ops[m.start..=m.end]
            .iter()
            .map(|o| o.end)
            .max()
            .unwrap_or(start);
        let next_start = matches.get(index + 1).map(|n| ops[n.start].start);
        let interval = next_start.map(|n| (n - end).max(0));
        let h2d_overlap = next_start.map(|n| {
            if n <= end {
                0.0
            } else {
                intersection_length(h2d_merged, &[(end, n)]) as f64 / (n - end) as f64
            }
        });
        let window_end = next_start.unwrap_or(end);
        let lo = h2d.partition_point(|c| c.0 < start);
        let hi = h2d.partition_point(|c| c.0 < window_end.max(start + 1));
        let copies = &h2d[lo..hi];
        let bytes_in = if copies.iter().any(|c| c.2.is_some()) {
            Some(copies.iter().filter_map(|c| c.2).sum())
        } else if copies.is_empty() && h2d.iter().any(|c| c.2.is_some()) {
            Some(0)
        } else {
            None
        };
        let count = m.end - m.start + 1;
        let gaps = gap_prefix[m.end + 1] - gap_prefix[m.start + 1];
        out.push(Iteration {
            index,
            start_ns: start,
            end_ns: end,
            duration_ns: end - start,
            ops: count,
            inserted_ops: m.inserted,
            interval_to_next_ns: interval,
            h2d_overlap,
            mean_op_gap_ns: if count > 1 {
                gaps as f64 / (count - 1) as f64
            } else {
                0.0
            },
            bytes_in,
        });
    }
    out
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    (n > 0).then(|| sum / n as f64)
}

pub(super) fn summarize(iterations: &[Iteration], stream_ops: usize) -> Summary {
    let intervals: Vec<Ns> = iterations
        .iter()
        .filter_map(|i| i.interval_to_next_ns)
        .collect();
    let mut sorted = intervals.clone();
    sorted.sort_unstable();
    let median_interval = if sorted.is_empty() {
        0.0
    } else if sorted.len() % 2 == 1 {
        sorted[sorted.len() / 2] as f64
    } else {
        (sorted[sorted.len() / 2 - 1] + sorted[sorted.len() / 2]) as f64 / 2.0
    };
    let mean_duration = mean(iterations.iter().map(|i| i.duration_ns as f64)).unwrap_or(0.0);
    let mean_interval = mean(intervals.iter().map(|&v| v as f64)).unwrap_or(0.0);
    let idle_inside: f64 = iterations
        .iter()
        .map(|i| i.mean_op_gap_ns * (i.ops.saturating_sub(1)) as f64)
        .sum();
    let total: f64 = iterations.iter().map(|i| i.duration_ns as f64).sum();
    let ops_in: usize = iterations.iter().map(|i| i.ops).sum();
    Summary {
        iterations: iterations.len(),
        mean_duration_ns: mean_duration,
        mean_interval_ns: mean_interval,
        max_interval_ns: intervals.iter().copied().max().unwrap_or(0),
        median_interval_ns: median_interval,
        mean_h2d_overlap: mean(iterations.iter().filter_map(|i| i.h2d_overlap)).unwrap_or(0.0),
        mean_op_gap_ns: mean(iterations.iter().map(|i| i.mean_op_gap_ns)).unwrap_or(0.0),
        mean_bytes_in: mean(
            iterations
                .iter()
                .filter_map(|i| i.bytes_in.map(|b| b as f64)),
        ),
        busy_in_iterations: if total > 0.0 {
            (1.0 - idle_inside / total).clamp(0.0, 1.0)
        } else {
            0.0
        },
        between_share: if mean_duration + mean_interval > 0.0 && !intervals.is_empty() {
            mean_interval / (mean_duration + mean_interval)
        } else {
            0.0
        },
        coverage: if stream_ops > 0 {
            ops_in as f64 / stream_ops as f64
        } else {
            0.0
        },
    }
}
