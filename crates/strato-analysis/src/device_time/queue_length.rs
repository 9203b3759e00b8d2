//! Launch-queue length per device queue over time (HTA's "queue length" augmented counter):
//! how many device ops a CPU thread has launched onto a stream that have not started yet. A
//! queue that stays near the driver's limit (CUDA blocks the launching thread once 1,024
//! launches are pending on a stream) means the CPU runs ahead and will stall in its next launch;
//! a queue that stays at 0 means the device waits for the CPU (launch-bound).
//!
//! Definition (HTA's `TraceCounters`): the length rises by one when the API call that launches a
//! device op starts (the op's correlated call) and falls by one when the op starts on its
//! queue. Unlike HTA, which counts only the calls named `cudaLaunchKernel`, `cudaMemcpyAsync`,
//! `cudaMemsetAsync` and their HIP/MTIA counterparts, every device op (kernel, copy, set; device
//! syncs excluded) with a correlated API call on its rank counts, whatever the call's name:
//! graph launches (one call, many ops), other runtimes, synchronous copies. Ops without a
//! launching call in the trace are counted apart (`unlaunched_ops`). An op that starts before
//! its call (host and device clocks disagree) is taken as launched when it starts
//! (`skewed_ops`).
//!
//! Window: per queue, from its first launch to the last start of one of its ops (the length is
//! 0 before and after). Conservation: per queue the time at each length band
//! ([`QueueLevel`]) adds up to the window exactly; the mean, the percentiles and the time at the
//! limit are weighted by time (HTA's summary describes the length at its change points instead).

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use strato_trace::{Level, Ns, RankId, Trace, TrackKind};

use super::kernel_stats::saturated;
use crate::analyzed::Analyzed;
use crate::registry::{
    merged_ranks, streamed, Analysis, AnalysisError, OptionKind, OptionSpec, RankPart, RankRow,
    Reads, Stream, TableSpec,
};

/// CUDA's bound on launches pending on one stream: a launch beyond it blocks the CPU thread.
pub const CUDA_QUEUE_LIMIT: u64 = 1024;

/// Options of [`queue_length`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueueLengthOptions {
    /// Pending launches at which a queue counts as full (time at the limit).
    pub limit: u64,
}

impl Default for QueueLengthOptions {
    fn default() -> Self {
        QueueLengthOptions {
            limit: CUDA_QUEUE_LIMIT,
        }
    }
}

/// Time a queue spent with a length in `[min_length, max_length]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueueLevel {
    pub min_length: u64,
    pub max_length: u64,
    pub time_ns: Ns,
    /// Share of the queue's window.
    pub share: f64,
}

/// The launch queue of one device queue (stream).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamQueue {
    pub device: i64,
    pub stream: i64,
    /// Device ops with a launching call.
    pub ops: u64,
    /// First launch onto the queue.
    pub window_start_ns: Ns,
    /// First launch -> last op start.
    pub window_ns: Ns,
    /// Time-weighted mean length over the window.
    pub mean: f64,
    /// Time-weighted median length.
    pub p50: u64,
    /// Length the queue stays at or below for 95 % of the window.
    pub p95: u64,
    pub max: u64,
    /// When the length first reached `max`.
    pub max_at_ns: Ns,
    /// Time with `limit` or more launches pending.
    pub at_limit_ns: Ns,
    pub at_limit_share: f64,
    /// Time per length band (0, 1, 2-3, 4-7, ...): adds up to `window_ns`.
    pub levels: Vec<QueueLevel>,
}

/// The launch queues of one rank.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankQueues {
    pub rank: i64,
    pub source: String,
    /// Device ops with no correlated API call in the trace (not counted in any queue).
    pub unlaunched_ops: u64,
    /// Device ops that start before their launching call (taken as launched at their start).
    pub skewed_ops: u64,
    pub streams: Vec<StreamQueue>,
}

/// Launch-queue lengths of every rank.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueueLengthReport {
    pub limit: u64,
    pub ranks: Vec<RankQueues>,
}

/// The launch-queue lengths of every device queue of `trace`: the whole trace read as one
/// batch of [`QueueLengthStream`].
pub fn queue_length(trace: &Trace, options: &QueueLengthOptions) -> QueueLengthReport {
    let mut stream = QueueLengthStream::default();
    stream.add(trace);
    stream.finish(trace, options)
}

// The size the docs give (docs/analyses/queue-length.md, "Cost").
const _: () = assert!(std::mem::size_of::<PendingOp>() == 48);

/// A device op whose launch is looked up at the end (48 bytes).
#[derive(Debug, Clone, Copy)]
struct PendingOp {
    start: Ns,
    correlation: Option<u64>,
    device: i64,
    queue: i64,
    rank: u32,
}

/// [`queue_length`] gathered batch by batch, so that `strato queue-length` on one file or
/// stored profile never holds the trace's spans: per (rank, correlation) the earliest start
/// of its accelerator API calls, and per device op (synchronisations aside) its start, queue
/// and correlation, in trace order.
#[derive(Debug, Default)]
pub struct QueueLengthStream {
    launches: FxHashMap<(u32, u64), Ns>,
    ops: Vec<PendingOp>,
}

impl QueueLengthStream {
    /// Reads the spans `batch` holds (its tables are the whole trace's so far).
    pub fn add(&mut self, batch: &Trace) {
        for span in &batch.spans {
            let track = batch.track(span.track);
            if let TrackKind::DeviceQueue { device, queue } = track.kind {
                if span.level.is_device_op() && span.level != Level::DeviceSync {
                    self.ops.push(PendingOp {
                        start: span.start,
                        correlation: span.correlation.get(),
                        device,
                        queue,
                        rank: track.rank.0,
                    });
                }
                continue;
            }
            // The launching call of each (rank, correlation): its earliest start.
            if let (Level::AcceleratorApi, Some(c)) = (span.level, span.correlation.get()) {
                self.launches
                    .entry((track.rank.0, c))
                    .and_modify(|t| *t = (*t).min(span.start))
                    .or_insert(span.start);
            }
        }
    }

    /// The queue lengths of the trace whose tables `trace` holds (its events are not read).
    pub fn finish(self, trace: &Trace, options: &QueueLengthOptions) -> QueueLengthReport {
        let QueueLengthStream { launches, ops } = self;
        let mut ranks: Vec<RankAcc> = (0..trace.ranks.len()).map(|_| RankAcc::default()).collect();
        for op in ops {
            let rank = &mut ranks[op.rank as usize];
            let launched = op
                .correlation
                .and_then(|c| launches.get(&(op.rank, c)).copied());
            let Some(mut launched) = launched else {
                rank.unlaunched += 1;
                continue;
            };
            if launched > op.start {
                rank.skewed += 1;
                launched = op.start;
            }
            let changes = rank.queues.entry((op.device, op.queue)).or_default();
            changes.push((launched, 1));
            changes.push((op.start, -1));
        }
        QueueLengthReport {
            limit: options.limit,
            ranks: ranks
                .into_iter()
                .enumerate()
                .map(|(i, acc)| rank_queues(trace, RankId(i as u32), acc, options.limit))
                .collect(),
        }
    }
}

#[derive(Debug, Default)]
struct RankAcc {
    /// Per (device, queue): (time, +1 launch / -1 start).
    queues: BTreeMap<(i64, i64), Vec<(Ns, i64)>>,
    unlaunched: u64,
    skewed: u64,
}

fn rank_queues(trace: &Trace, rank: RankId, acc: RankAcc, limit: u64) -> RankQueues {
    let info = &trace.ranks[rank.0 as usize];
    RankQueues {
        rank: info.rank.unwrap_or(i64::from(rank.0)),
        source: info.source.clone(),
        unlaunched_ops: acc.unlaunched,
        skewed_ops: acc.skewed,
        streams: acc
            .queues
            .into_iter()
            .map(|((device, stream), changes)| stream_queue(device, stream, changes, limit))
            .collect(),
    }
}

/// The step function of one queue's length, from its changes.
fn stream_queue(device: i64, stream: i64, mut changes: Vec<(Ns, i64)>, limit: u64) -> StreamQueue {
    changes.sort_unstable();
    let ops = (changes.len() / 2) as u64;
    let start = changes.first().map_or(0, |c| c.0);
    let end = changes.last().map_or(0, |c| c.0);
    // Time spent at each exact length (the length after every change at an instant applied).
    let mut time_at: BTreeMap<u64, i128> = BTreeMap::new();
    let (mut length, mut max, mut max_at) = (0i64, 0u64, start);
    let mut i = 0;
    while i < changes.len() {
        let t = changes[i].0;
        while i < changes.len() && changes[i].0 == t {
            length += changes[i].1;
            i += 1;
        }
        // Every op's start follows its launch, so the length never falls below 0.
        let now = length.max(0) as u64;
        if now > max {
            max = now;
            max_at = t;
        }
        if let Some(&(next, _)) = changes.get(i) {
            *time_at.entry(now).or_default() += i128::from(next) - i128::from(t);
        }
    }
    let window = i128::from(end) - i128::from(start);
    let share = |time: i128| {
        if window > 0 {
            time as f64 / window as f64
        } else {
            0.0
        }
    };
    let weighted: i128 = time_at.iter().map(|(&l, &t)| i128::from(l) * t).sum();
    let percentile = |p: f64| {
        let mut seen = 0i128;
        for (&l, &t) in &time_at {
            seen += t;
            if seen as f64 >= p * window as f64 {
                return l;
            }
        }
        0
    };
    let at_limit: i128 = time_at.range(limit.max(1)..).map(|(_, &t)| t).sum();
    StreamQueue {
        device,
        stream,
        ops,
        window_start_ns: start,
        window_ns: saturated(window),
        mean: share(weighted),
        p50: if window > 0 { percentile(0.5) } else { 0 },
        p95: if window > 0 { percentile(0.95) } else { 0 },
        max,
        max_at_ns: max_at,
        at_limit_ns: saturated(at_limit),
        at_limit_share: share(at_limit),
        levels: bands(&time_at)
            .into_iter()
            .map(|(min_length, max_length, time)| QueueLevel {
                min_length,
                max_length,
                time_ns: saturated(time),
                share: share(time),
            })
            .collect(),
    }
}

/// Time per band of lengths: 0, 1, 2-3, 4-7, ... up to the band of the longest length held for
/// any time; every band up to it listed, empty ones with 0.
fn bands(time_at: &BTreeMap<u64, i128>) -> Vec<(u64, u64, i128)> {
    let Some(&top) = time_at.keys().next_back() else {
        return Vec::new();
    };
    let mut out = vec![(0u64, 0u64, 0i128)];
    let mut low = 1u64;
    while low <= top {
        let high = low.saturating_mul(2) - 1;
        out.push((low, high, 0));
        low = low.saturating_mul(2);
    }
    for (&length, &time) in time_at {
        let band = if length == 0 {
            0
        } else {
            (u64::BITS - length.leading_zeros()) as usize
        };
        out[band].2 += time;
    }
    out
}

/// The launch-queue analysis, registered for every front end (`strato queue-length`,
/// `Profile.queue_length()`, SQL views `queue_length` and `queue_length_levels`, a report
/// section).
#[derive(Debug)]
pub struct QueueLength;

impl Analysis for QueueLength {
    const NAME: &'static str = "queue-length";
    const SUMMARY: &'static str = "Launch-queue length per stream over time (HTA's queue-length \
counter): launched device ops not started yet, time-weighted mean/p50/p95/max and time at the \
driver's limit";
    const WINDOW: &'static str = "per stream: its first launch to the last start of one of its ops";
    const DOC: &'static str = "docs/analyses/queue-length.md";
    const EXAMPLES: &'static [&'static str] = &[
        "strato queue-length trace.json.gz",
        "strato queue-length ranks/ --json",
        "strato queue-length trace.json.gz --csv --table queue_length_levels",
    ];
    const OPTIONS: &'static [OptionSpec] = &[OptionSpec {
        name: "limit",
        help: "pending launches at which a stream counts as full (CUDA blocks the launching \
thread beyond 1024)",
        kind: OptionKind::Count { min: 1 },
        default: "1024",
    }];
    const TABLES: &'static [TableSpec] = &[
        TableSpec {
            name: "queue_length",
            about: "one row per rank and stream",
            path: &["ranks", "streams"],
            inherit: &["rank"],
            options: &[],
        },
        TableSpec {
            name: "queue_length_levels",
            about: "time per length band of each stream (adds up to its window)",
            path: &["ranks", "streams", "levels"],
            inherit: &["rank", "device", "stream"],
            options: &[],
        },
    ];
    const RANK_BY_RANK: bool = true;
    const READS: Reads = Reads::SPANS;
    type Options = QueueLengthOptions;
    type Output = QueueLengthReport;

    fn run(
        analyzed: &Analyzed<'_>,
        options: &QueueLengthOptions,
    ) -> Result<QueueLengthReport, AnalysisError> {
        Ok(queue_length(analyzed.trace(), options))
    }

    /// One file or stored profile streams ([`QueueLengthStream`]).
    fn stream(options: &QueueLengthOptions) -> Option<Box<dyn Stream<QueueLengthReport>>> {
        let options = options.clone();
        Some(streamed(
            QueueLengthStream::default(),
            QueueLengthStream::add,
            move |stream, trace| stream.finish(trace, &options),
        ))
    }

    fn merge(
        parts: Vec<RankPart<QueueLengthReport>>,
        options: &QueueLengthOptions,
    ) -> Option<QueueLengthReport> {
        Some(QueueLengthReport {
            limit: options.limit,
            ranks: merged_ranks(parts, |report| report.ranks),
        })
    }

    fn render_text(report: &QueueLengthReport, _: &QueueLengthOptions) -> String {
        let mut out = String::new();
        for rank in &report.ranks {
            out.push_str(&format!(
                "rank {} ({}): {} streams",
                rank.rank,
                rank.source,
                rank.streams.len()
            ));
            if rank.unlaunched_ops > 0 {
                out.push_str(&format!(
                    "; {} device ops without a launching call (not counted)",
                    rank.unlaunched_ops
                ));
            }
            if rank.skewed_ops > 0 {
                out.push_str(&format!(
                    "; {} ops start before their call (clock skew; launched at their start)",
                    rank.skewed_ops
                ));
            }
            out.push('\n');
            out.push_str(&format!(
                "  {:>6} {:>6} {:>9} {:>12} {:>8} {:>5} {:>5} {:>6} {:>9}\n",
                "device", "stream", "ops", "window ms", "mean", "p50", "p95", "max", "full %",
            ));
            for s in &rank.streams {
                out.push_str(&format!(
                    "  {:>6} {:>6} {:>9} {:>12.3} {:>8.2} {:>5} {:>5} {:>6} {:>9.2}\n",
                    s.device,
                    s.stream,
                    s.ops,
                    s.window_ns as f64 / 1e6,
                    s.mean,
                    s.p50,
                    s.p95,
                    s.max,
                    100.0 * s.at_limit_share,
                ));
            }
        }
        out.push_str(&format!(
            "full: {} or more launches pending (--limit); mean, p50, p95 weighted by time\n",
            report.limit
        ));
        out
    }
}

impl RankRow for RankQueues {
    fn rank(&self) -> i64 {
        self.rank
    }
    fn set_rank(&mut self, rank: i64) {
        self.rank = rank;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strato_trace::testing::TraceBuilder;

    /// Three kernels launched at 0, 10, 20 onto one stream, starting at 30, 40, 100 (each
    /// 5 long): length 1 on [0,10), 2 on [10,20), 3 on [20,30), 2 on [30,40), 1 on [40,100),
    /// 0 after. A fourth op on another stream has no launching call. The rank is `claim`.
    fn three_queued_on(claim: Option<i64>) -> Trace {
        let mut b = TraceBuilder::new();
        b.rank(strato_trace::testing::rank(claim, "test"));
        let cpu = b.thread(1, 1);
        let gpu = b.queue(0, 7);
        let other = b.queue(0, 8);
        for (k, (launch, start)) in [(0, 30), (10, 40), (20, 100)].into_iter().enumerate() {
            let c = k as u64 + 1;
            b.span(
                cpu,
                Level::AcceleratorApi,
                "cudaLaunchKernel",
                launch,
                launch + 2,
            )
            .correlation(c);
            b.span(gpu, Level::DeviceKernel, "k", start, start + 5)
                .correlation(c);
        }
        b.span(other, Level::DeviceKernel, "orphan", 50, 60)
            .correlation(99);
        b.build()
    }

    fn three_queued() -> Trace {
        three_queued_on(None)
    }

    #[test]
    fn lengths_follow_launches_and_starts_and_the_bands_add_up_to_the_window() {
        let report = queue_length(&three_queued(), &QueueLengthOptions::default());
        let rank = &report.ranks[0];
        assert_eq!(rank.unlaunched_ops, 1);
        assert_eq!(rank.skewed_ops, 0);
        assert_eq!(rank.streams.len(), 1);
        let s = &rank.streams[0];
        assert_eq!((s.device, s.stream, s.ops), (0, 7, 3));
        assert_eq!((s.window_start_ns, s.window_ns), (0, 100));
        assert_eq!((s.max, s.max_at_ns), (3, 20));
        // (1*10 + 2*10 + 3*10 + 2*10 + 1*60) / 100
        assert!((s.mean - 1.4).abs() < 1e-12);
        // Length 1 for 70 of 100 ns: the median and p50 are 1; p95 reaches 3.
        assert_eq!((s.p50, s.p95), (1, 3));
        assert_eq!(s.at_limit_ns, 0);
        let bands: Vec<(u64, u64, Ns)> = s
            .levels
            .iter()
            .map(|l| (l.min_length, l.max_length, l.time_ns))
            .collect();
        assert_eq!(bands, vec![(0, 0, 0), (1, 1, 70), (2, 3, 30)]);
        assert_eq!(s.levels.iter().map(|l| l.time_ns).sum::<Ns>(), s.window_ns);
        let shares: f64 = s.levels.iter().map(|l| l.share).sum();
        assert!((shares - 1.0).abs() < 1e-12);
    }

    #[test]
    fn time_at_the_limit_and_ops_that_start_before_their_call() {
        let options = QueueLengthOptions { limit: 2 };
        let report = queue_length(&three_queued(), &options);
        let s = &report.ranks[0].streams[0];
        // Two or more pending on [10, 40).
        assert_eq!(s.at_limit_ns, 30);
        assert!((s.at_limit_share - 0.3).abs() < 1e-12);

        let mut b = TraceBuilder::new();
        let cpu = b.thread(1, 1);
        let gpu = b.queue(0, 7);
        b.span(cpu, Level::AcceleratorApi, "cudaLaunchKernel", 50, 52)
            .correlation(1);
        b.span(gpu, Level::DeviceKernel, "early", 40, 45)
            .correlation(1);
        let report = queue_length(&b.build(), &QueueLengthOptions::default());
        let rank = &report.ranks[0];
        assert_eq!(rank.skewed_ops, 1);
        let s = &rank.streams[0];
        assert_eq!((s.ops, s.window_ns, s.max), (1, 0, 0));
        assert!(s.levels.is_empty() || s.levels.iter().all(|l| l.time_ns == 0));
    }

    #[test]
    fn one_graph_launch_queues_every_op_it_launches() {
        let mut b = TraceBuilder::new();
        let cpu = b.thread(1, 1);
        let gpu = b.queue(0, 7);
        b.span(cpu, Level::AcceleratorApi, "cudaGraphLaunch", 0, 5)
            .correlation(1);
        for k in 0..4 {
            b.span(gpu, Level::DeviceKernel, "node", 10 + 10 * k, 15 + 10 * k)
                .correlation(1);
        }
        let report = queue_length(&b.build(), &QueueLengthOptions::default());
        let s = &report.ranks[0].streams[0];
        assert_eq!((s.ops, s.max, s.max_at_ns, s.window_ns), (4, 4, 0, 40));
        assert_eq!(s.levels.iter().map(|l| l.time_ns).sum::<Ns>(), 40);
    }

    #[test]
    fn merged_rank_parts_number_unclaimed_ranks_by_position() {
        let options = QueueLengthOptions::default();
        let part = |first_rank, claim: Option<i64>| RankPart {
            value: queue_length(&three_queued_on(claim), &options),
            first_rank,
            job_ranks: vec![claim],
        };
        // Files 0 and 1 say nothing (their positions, 0 and 1, number them); file 2 says 5.
        let merged = QueueLength::merge(
            vec![part(0, None), part(1, None), part(2, Some(5))],
            &options,
        )
        .expect("queue-length merges");
        let numbers: Vec<i64> = merged.ranks.iter().map(|r| r.rank).collect();
        assert_eq!(numbers, vec![0, 1, 5]);
    }
}
