//! Kernel statistics and latencies (Zins, `papers/` seed 003, section 4.4.4 and table 4.1):
//! per kernel name and per launching operation, count, total, mean, standard deviation, min,
//! max and share of device time, ranked by total; launch latency (end of the launching API
//! call -> device start) and, where the source records them (`queued`/`submitted` attributes,
//! OpenCL profiling info), device queue latencies (queued -> submit -> start).
//!
//! Window: every device op (kernels, copies, sets; device-side syncs excluded) of a rank.
//! Conservation: per rank the rows of either table sum to the rank's device time (sum of op
//! durations, so concurrent streams count twice) and their shares to 1; folding the tail into
//! one row keeps both sums (its std is the pooled one).
//!
//! Sums are exact: durations are summed in `i128` (a few long spans of a valid trace already
//! pass `i64`), and shares and means come from those exact sums. A total reported in ns
//! ([`StatRow::total_ns`], [`RankKernelStats::device_time_ns`]) saturates at `i64::MAX`
//! (292 years of device time, which only a hostile trace reaches), never wraps.

use rustc_hash::FxHashMap;
use serde::Serialize;
use strato_trace::{Level, Ns, RankId, Span, Trace, Track, TrackKind};

use crate::device_time::memory::args_i64;

mod registration;
pub use registration::{Kernels, KernelsOptions};

/// Duration statistics of one group of device ops.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatRow {
    pub name: String,
    pub count: u64,
    pub total_ns: Ns,
    pub mean_ns: f64,
    pub std_ns: f64,
    pub min_ns: Ns,
    pub max_ns: Ns,
    /// Share of the rank's device time.
    pub share: f64,
}

/// Distribution of a latency.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Latency {
    pub count: u64,
    pub mean_ns: f64,
    pub std_ns: f64,
    pub min_ns: Ns,
    pub p50_ns: Ns,
    pub p95_ns: Ns,
    pub max_ns: Ns,
}

/// The statistics of one rank.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankKernelStats {
    pub rank: i64,
    pub source: String,
    pub device_ops: u64,
    pub device_time_ns: Ns,
    /// Per kernel name, ranked by total time.
    pub kernels: Vec<StatRow>,
    /// Per launching operation (innermost framework op around the launching API call;
    /// `(no operation)` when there is none, `(no launch)` when the op has no correlated call).
    pub ops: Vec<StatRow>,
    /// API call end -> device start.
    pub launch_latency: Option<Latency>,
    /// queued -> submitted, where the source has it.
    pub queue_latency: Option<Latency>,
    /// submitted -> start, where the source has it.
    pub submit_latency: Option<Latency>,
}

/// The report over every rank.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelStatsReport {
    pub ranks: Vec<RankKernelStats>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Acc {
    count: u64,
    total: i128,
    sum_sq: f64,
    min: Ns,
    max: Ns,
}

impl Acc {
    fn add(&mut self, d: Ns) {
        if self.count == 0 {
            self.min = d;
            self.max = d;
        }
        self.count += 1;
        self.total += i128::from(d);
        self.sum_sq += (d as f64) * (d as f64);
        self.min = self.min.min(d);
        self.max = self.max.max(d);
    }
}

/// An exact sum of durations as an [`Ns`], saturated at the ends of its range.
pub(crate) fn saturated(total: i128) -> Ns {
    total.clamp(i128::from(Ns::MIN), i128::from(Ns::MAX)) as Ns
}

fn row(name: String, a: &Acc, device_time: i128) -> StatRow {
    let n = a.count.max(1) as f64;
    let mean = a.total as f64 / n;
    let var = (a.sum_sq / n - mean * mean).max(0.0);
    StatRow {
        name,
        count: a.count,
        total_ns: saturated(a.total),
        mean_ns: mean,
        std_ns: var.sqrt(),
        min_ns: a.min,
        max_ns: a.max,
        share: if device_time > 0 {
            a.total as f64 / device_time as f64
        } else {
            0.0
        },
    }
}

/// Keeps the first `top` rows and folds the rest into one `(other N)` row with the same
/// count, total and share sums and the pooled standard deviation.
pub fn fold_top(mut rows: Vec<StatRow>, top: usize, what: &str) -> Vec<StatRow> {
    if top == 0 || rows.len() <= top {
        return rows;
    }
    let rest = rows.split_off(top);
    let count: u64 = rest.iter().map(|r| r.count).sum();
    let total: i128 = rest.iter().map(|r| i128::from(r.total_ns)).sum();
    let mean = total as f64 / count.max(1) as f64;
    let second: f64 = rest
        .iter()
        .map(|r| r.count as f64 * (r.std_ns * r.std_ns + r.mean_ns * r.mean_ns))
        .sum::<f64>()
        / count.max(1) as f64;
    rows.push(StatRow {
        name: format!("(other {} {what})", rest.len()),
        count,
        total_ns: saturated(total),
        mean_ns: mean,
        std_ns: (second - mean * mean).max(0.0).sqrt(),
        min_ns: rest.iter().map(|r| r.min_ns).min().unwrap_or(0),
        max_ns: rest.iter().map(|r| r.max_ns).max().unwrap_or(0),
        share: rest.iter().map(|r| r.share).sum(),
    });
    rows
}

fn latency(mut values: Vec<Ns>) -> Option<Latency> {
    if values.is_empty() {
        return None;
    }
    values.sort_unstable();
    let n = values.len();
    let mean = values.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
    let var = values
        .iter()
        .map(|&v| (v as f64 - mean).powi(2))
        .sum::<f64>()
        / n as f64;
    let pct = |p: f64| values[(((n - 1) as f64) * p).round() as usize];
    Some(Latency {
        count: n as u64,
        mean_ns: mean,
        std_ns: var.sqrt(),
        min_ns: values[0],
        p50_ns: pct(0.5),
        p95_ns: pct(0.95),
        max_ns: values[n - 1],
    })
}

/// Computes the statistics of every rank. `top` folds each table after that many rows (0: all).
pub fn kernel_stats(trace: &Trace, top: usize) -> KernelStatsReport {
    // The trace is held: the sweep keeps span ids, not copies of the spans, and the device ops
    // are read from the trace again at the end.
    let mut stream = KernelStatsStream {
        ranks: Vec::new(),
        held: true,
    };
    stream.add(trace);
    stream.finish(trace, top)
}

/// A CPU span in the launch sweep: start, end, is an API call, name id, and the API call's
/// correlation or the op's [`Span::same_extent_order`].
type SweepSpan = (Ns, Ns, bool, u32, u64);

/// A device op whose launching operation is looked up at the end: start, duration and launch
/// correlation (32 bytes).
type PendingOp = (Ns, Ns, Option<u64>);

/// [`kernel_stats`] gathered batch by batch, so that a streaming import never holds the
/// trace's spans: [`KernelStatsStream::add`] reads one batch of events (the trace as it is
/// then: its tracks, strings and args are those of the whole trace so far, its spans the
/// batch's, in the trace's order, and their args ids index the batch's args) and keeps only
/// what the statistics need: per kernel name the running sums, per device op its start,
/// duration and correlation (the launching op is known only once every CPU span is read), and
/// per CPU thread the framework ops and correlated API calls (start, end, name, correlation).
/// [`KernelStatsStream::finish`] gives what [`kernel_stats`] gives for the whole trace.
#[derive(Debug, Default)]
pub struct KernelStatsStream {
    ranks: Vec<RankStream>,
    /// The trace given to [`KernelStatsStream::add`] is the whole trace, given once, and the
    /// same one is given to [`KernelStatsStream::finish`] ([`kernel_stats`]): spans are kept
    /// as their ids.
    held: bool,
}

#[derive(Debug, Default)]
struct RankStream {
    /// Framework ops (Backend) and correlated API calls of each CPU track, in trace order.
    sweep: FxHashMap<u32, Vec<SweepSpan>>,
    /// The same as span ids, when the trace is held.
    held_sweep: FxHashMap<u32, Vec<u32>>,
    /// [`RankStream::ops`] as span ids, when the trace is held.
    held_ops: Vec<u32>,
    by_name: FxHashMap<u32, Acc>,
    ops: Vec<PendingOp>,
    queue_lat: Vec<Ns>,
    submit_lat: Vec<Ns>,
    /// Exact sum of the device ops' durations.
    device_time: i128,
}

impl KernelStatsStream {
    /// Reads the spans `trace` holds now (see [`KernelStatsStream`]).
    pub fn add(&mut self, trace: &Trace) {
        if self.ranks.len() < trace.ranks.len() {
            self.ranks
                .resize_with(trace.ranks.len(), RankStream::default);
        }
        for (id, span) in trace.spans.iter().enumerate() {
            let t = trace.track(span.track);
            let rank = &mut self.ranks[t.rank.0 as usize];
            if !t.is_device() {
                let Some(entry) = sweep_entry(span) else {
                    continue;
                };
                if self.held {
                    let list = rank.held_sweep.entry(span.track.0).or_default();
                    list.push(id as u32);
                } else {
                    rank.sweep.entry(span.track.0).or_default().push(entry);
                }
            }
            if !is_device_op(t, span) {
                continue;
            }
            let d = span.duration();
            rank.device_time += i128::from(d);
            rank.by_name.entry(span.name.0).or_default().add(d);
            if self.held {
                rank.held_ops.push(id as u32);
            } else {
                rank.ops.push(pending_op(span));
            }
            if let Some(text) = trace.args_text(span.args) {
                let [queued, submitted] = args_i64(&text, ["queued", "submitted"]);
                // The attributes are the file's numbers, not checked times: saturate.
                if let (Some(q), Some(s)) = (queued, submitted) {
                    rank.queue_lat.push(s.saturating_sub(q));
                }
                if let Some(s) = submitted {
                    rank.submit_lat.push(span.start.saturating_sub(s));
                }
            }
        }
    }

    /// The statistics of every rank of `trace` (the whole trace's tables; its events are not
    /// read). `top` folds each table after that many rows (0: all).
    pub fn finish(mut self, trace: &Trace, top: usize) -> KernelStatsReport {
        self.ranks
            .resize_with(trace.ranks.len().max(self.ranks.len()), RankStream::default);
        let ranks = self
            .ranks
            .into_iter()
            .take(trace.ranks.len())
            .enumerate()
            .map(|(r, stream)| rank_stats(trace, RankId(r as u32), stream, self.held, top))
            .collect();
        KernelStatsReport { ranks }
    }
}

/// A CPU span's entry in the launch sweep: framework ops and correlated API calls.
fn sweep_entry(span: &Span) -> Option<SweepSpan> {
    match span.level {
        Level::Backend => Some((
            span.start,
            span.end,
            false,
            span.name.0,
            u64::from(span.same_extent_order()),
        )),
        Level::AcceleratorApi => span
            .correlation
            .get()
            .map(|c| (span.start, span.end, true, span.name.0, c)),
        _ => None,
    }
}

/// Whether a span is a device op the statistics count (a synchronisation is not).
fn is_device_op(track: &Track, span: &Span) -> bool {
    matches!(track.kind, TrackKind::DeviceQueue { .. })
        && span.level.is_device_op()
        && span.level != Level::DeviceSync
}

fn pending_op(span: &Span) -> PendingOp {
    (span.start, span.duration(), span.correlation.get())
}

/// Innermost Backend span around each AcceleratorApi span with a correlation, per thread:
/// correlation -> (api end, op name id or u32::MAX). `entry` reads a list's element.
fn launches<T>(
    per_track: FxHashMap<u32, Vec<T>>,
    entry: impl Fn(&T) -> SweepSpan,
) -> FxHashMap<u64, (Ns, u32)> {
    let mut out = FxHashMap::default();
    for (_, mut list) in per_track {
        // Parents first: by start, longer first, ops before API calls at equal times, then
        // ops of the same extent by the source's numbering (`Span::same_extent_order`).
        list.sort_by(|a, b| {
            let (a, b) = (entry(a), entry(b));
            (a.0.cmp(&b.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2))).then(a.4.cmp(&b.4))
        });
        let mut stack: Vec<(Ns, u32)> = Vec::new();
        for (start, end, is_api, name, c) in list.iter().map(&entry) {
            while stack
                .last()
                .is_some_and(|top| top.0 <= start && top.0 < end)
            {
                stack.pop();
            }
            if is_api {
                out.insert(c, (end, stack.last().map_or(u32::MAX, |t| t.1)));
            } else {
                stack.push((end, name));
            }
        }
    }
    out
}

/// One rank's statistics; `held`: the stream kept span ids of `trace` (see
/// [`KernelStatsStream::held`]).
fn rank_stats(
    trace: &Trace,
    rank: RankId,
    stream: RankStream,
    held: bool,
    top: usize,
) -> RankKernelStats {
    let RankStream {
        sweep,
        held_sweep,
        held_ops,
        by_name,
        ops,
        queue_lat,
        submit_lat,
        device_time,
    } = stream;
    let launch = if held {
        let entry =
            |&id: &u32| sweep_entry(&trace.spans[id as usize]).expect("only sweep spans are kept");
        launches(held_sweep, entry)
    } else {
        launches(sweep, |e| *e)
    };
    let mut by_op: FxHashMap<u32, Acc> = FxHashMap::default();
    let mut launch_lat = Vec::new();
    const NO_LAUNCH: u32 = u32::MAX - 1;
    // The device ops in trace order.
    let pending: Box<dyn Iterator<Item = PendingOp>> = if held {
        let op = |id: u32| pending_op(&trace.spans[id as usize]);
        Box::new(held_ops.into_iter().map(op))
    } else {
        Box::new(ops.into_iter())
    };
    let mut device_ops = 0u64;
    for (start, d, correlation) in pending {
        device_ops += 1;
        let op = match correlation.and_then(|c| launch.get(&c)) {
            Some(&(api_end, op)) => {
                launch_lat.push(start - api_end);
                op
            }
            None => NO_LAUNCH,
        };
        by_op.entry(op).or_default().add(d);
    }
    drop(launch);
    let mut kernels: Vec<StatRow> = by_name
        .iter()
        .map(|(&id, a)| {
            row(
                trace.strings.get(strato_trace::StrId(id)).to_string(),
                a,
                device_time,
            )
        })
        .collect();
    let mut ops: Vec<StatRow> = by_op
        .iter()
        .map(|(&id, a)| {
            let name = match id {
                u32::MAX => "(no operation)".to_string(),
                NO_LAUNCH => "(no launch)".to_string(),
                id => trace.strings.get(strato_trace::StrId(id)).to_string(),
            };
            row(name, a, device_time)
        })
        .collect();
    for rows in [&mut kernels, &mut ops] {
        rows.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
    }
    let info = &trace.ranks[rank.0 as usize];
    RankKernelStats {
        rank: info.rank.unwrap_or(i64::from(rank.0)),
        source: info.source.clone(),
        device_ops,
        device_time_ns: saturated(device_time),
        kernels: fold_top(kernels, top, "kernels"),
        ops: fold_top(ops, top, "ops"),
        launch_latency: latency(launch_lat),
        queue_latency: latency(queue_lat),
        submit_latency: latency(submit_lat),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strato_trace::testing::{rank, TraceBuilder};

    #[test]
    fn stats_fold_and_conserve() {
        let mut b = TraceBuilder::new();
        b.rank(rank(Some(0), "s"));
        let cpu = b.thread(1, 1);
        let gpu = b.queue(0, 7);
        let launch = "cudaLaunchKernel";
        b.span(cpu, Level::Backend, "aten::mm", 0, 100);
        b.span(cpu, Level::AcceleratorApi, launch, 10, 20)
            .correlation(1);
        b.span(cpu, Level::AcceleratorApi, launch, 30, 40)
            .correlation(2);
        b.span(cpu, Level::AcceleratorApi, launch, 200, 210)
            .correlation(3);
        b.span(gpu, Level::DeviceKernel, "gemm", 25, 65)
            .correlation(1);
        b.span(gpu, Level::DeviceKernel, "gemm", 70, 90)
            .correlation(2);
        b.span(gpu, Level::DeviceKernel, "relu", 215, 225)
            .correlation(3);
        let t = b.build();
        let r = &kernel_stats(&t, 0).ranks[0];
        assert_eq!(r.device_time_ns, 70);
        assert_eq!(r.kernels[0].name, "gemm");
        assert_eq!((r.kernels[0].count, r.kernels[0].total_ns), (2, 60));
        assert_eq!((r.kernels[0].min_ns, r.kernels[0].max_ns), (20, 40));
        assert!((r.kernels[0].std_ns - 10.0).abs() < 1e-9);
        assert_eq!(r.ops[0].name, "aten::mm");
        assert_eq!(r.ops[1].name, "(no operation)");
        let lat = r.launch_latency.as_ref().unwrap();
        assert_eq!((lat.count, lat.min_ns, lat.max_ns), (3, 5, 30));
        let share: f64 = r.kernels.iter().map(|k| k.share).sum();
        assert!((share - 1.0).abs() < 1e-12);
        let folded = &kernel_stats(&t, 1).ranks[0];
        assert_eq!(folded.kernels.len(), 2);
        assert_eq!(folded.kernels[1].name, "(other 1 kernels)");
        let total: Ns = folded.kernels.iter().map(|k| k.total_ns).sum();
        assert_eq!(total, 70);
    }
}
