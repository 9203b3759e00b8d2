//! Utilization reality check (RL-Scope, seed 000, F.11): per device, the figure `nvidia-smi`
//! would report beside the true busy time.
//!
//! Window: per device, its rank's whole time span (earliest start to latest end over every span
//! of the rank: what a sampler running beside the process would see). Device work = kernels,
//! copies and sets on the device's queues ([`crate::scope::is_device_work`]).
//! - `true_busy_pct` = length of the union of the device work / window;
//! - `sampled_pct` for a period P: the window is cut into periods `[w0 + kP, w0 + (k+1)P)`
//!   (the last one clipped to the window); a period is *active* when any device op overlaps it
//!   (a zero-length op counts at its instant). The figure is the active periods' share of the
//!   window *time*, so a clipped last period weighs by its length; for whole periods this is the
//!   share of periods, as nvidia-smi reports it.
//!
//! Conservation: busy time + idle time = window; every busy instant lies in an active period,
//! so `true_busy_pct <= sampled_pct` for every period.

use std::collections::BTreeMap;

use serde::Serialize;
use strato_trace::{Ns, Trace, TrackKind};

use crate::device_time::gpu_time::{length, merge};
use crate::scope::is_device_work;

mod registration;
pub use registration::{Util, UtilResult, UtilSettings};

/// nvidia-smi's documented sampling periods: 1/6 s and 1 s.
pub const DEFAULT_PERIODS_S: [f64; 2] = [1.0 / 6.0, 1.0];

/// The sampled figure for one period.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sampled {
    pub period_s: f64,
    pub period_ns: Ns,
    pub periods: u64,
    pub active_periods: u64,
    pub sampled_pct: f64,
}

/// One device.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceUtil {
    pub rank: i64,
    /// The device's rank by position in the trace it was computed on (not shown: what a merge
    /// of rank files renumbers, [`Util`]'s `merge`).
    #[serde(skip)]
    pub rank_index: u32,
    pub source: String,
    pub device: i64,
    pub name: Option<String>,
    pub device_ops: usize,
    pub window_start_ns: Ns,
    pub window_end_ns: Ns,
    pub window_ns: Ns,
    pub busy_ns: Ns,
    pub true_busy_pct: f64,
    pub sampled: Vec<Sampled>,
}

/// Every device with device work.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UtilReport {
    pub devices: Vec<DeviceUtil>,
}

/// Computes the check for each device with at least one device op, for each period (seconds).
/// The whole trace read as one batch of [`UtilStream`].
pub fn util(trace: &Trace, periods_s: &[f64]) -> UtilReport {
    let mut stream = UtilStream::default();
    stream.add(trace);
    stream.finish(trace, periods_s)
}

/// [`util`] gathered batch by batch, so that `strato util` on one file or stored profile never
/// holds the trace's spans: per rank its window, per device its ops' (start, end), 16 bytes
/// an op.
#[derive(Debug, Default)]
pub struct UtilStream {
    windows: Vec<Option<(Ns, Ns)>>,
    per_device: BTreeMap<(u32, i64), Vec<(Ns, Ns)>>,
}

impl UtilStream {
    /// Reads the spans `batch` holds (its tables are the whole trace's so far).
    pub fn add(&mut self, batch: &Trace) {
        if self.windows.len() < batch.ranks.len() {
            self.windows.resize(batch.ranks.len(), None);
        }
        for s in &batch.spans {
            let track = batch.track(s.track);
            let w = &mut self.windows[track.rank.0 as usize];
            *w = Some(match *w {
                None => (s.start, s.end),
                Some((a, b)) => (a.min(s.start), b.max(s.end)),
            });
            if let TrackKind::DeviceQueue { device, .. } = track.kind {
                if is_device_work(s.level) {
                    self.per_device
                        .entry((track.rank.0, device))
                        .or_default()
                        .push((s.start, s.end));
                }
            }
        }
    }

    /// The check of the trace whose tables `trace` holds (its events are not read).
    pub fn finish(self, trace: &Trace, periods_s: &[f64]) -> UtilReport {
        let UtilStream {
            windows,
            per_device,
        } = self;
        let devices = per_device
            .into_iter()
            .map(|((rank, device), ops)| {
                let (w0, w1) = windows[rank as usize].unwrap_or((0, 0));
                let info = &trace.ranks[rank as usize];
                let name = trace
                    .devices
                    .iter()
                    .find(|d| d.index == device && d.rank.is_none_or(|r| r.0 == rank))
                    .and_then(|d| d.name.clone());
                let count = ops.len();
                let zero_length: Vec<Ns> = ops.iter().filter(|o| o.1 == o.0).map(|o| o.0).collect();
                let merged = merge(ops.into_iter());
                let busy = length(&merged);
                let window = w1 - w0;
                let pct = |x: Ns| {
                    if window > 0 {
                        100.0 * x as f64 / window as f64
                    } else {
                        0.0
                    }
                };
                let sampled = periods_s
                    .iter()
                    .map(|&p| sample(&merged, &zero_length, w0, w1, p))
                    .map(
                        |(period_s, period_ns, periods, active, active_ns)| Sampled {
                            period_s,
                            period_ns,
                            periods,
                            active_periods: active,
                            sampled_pct: pct(active_ns),
                        },
                    )
                    .collect();
                DeviceUtil {
                    rank: info.rank.unwrap_or(i64::from(rank)),
                    rank_index: rank,
                    source: info.source.clone(),
                    device,
                    name,
                    device_ops: count,
                    window_start_ns: w0,
                    window_end_ns: w1,
                    window_ns: window,
                    busy_ns: busy,
                    true_busy_pct: pct(busy),
                    sampled,
                }
            })
            .collect();
        UtilReport { devices }
    }
}

/// (period_s, period_ns, periods, active periods, active time in the window).
///
/// Linear in the intervals and points, whatever the window's length: active periods are
/// gathered as runs of consecutive period indices (never one entry per period, which a long
/// window would make billions of), merged, and their time computed per run. The arithmetic is
/// in `i128`, so no window or period overflows it.
fn sample(
    merged: &[(Ns, Ns)],
    points: &[Ns],
    w0: Ns,
    w1: Ns,
    period_s: f64,
) -> (f64, Ns, u64, u64, Ns) {
    let p = ((period_s * 1e9).round() as Ns).max(1);
    let window = i128::from(w1) - i128::from(w0);
    if window <= 0 {
        return (period_s, p, 0, 0, 0);
    }
    let period = i128::from(p);
    let periods = (window + period - 1) / period;
    let index = |t: i128| ((t - i128::from(w0)) / period).clamp(0, periods - 1);
    // Runs [first, last] of active period indices.
    let mut runs: Vec<(i128, i128)> = merged
        .iter()
        .filter(|(s, e)| e > s)
        .map(|&(s, e)| (index(i128::from(s)), index(i128::from(e) - 1)))
        .chain(points.iter().map(|&t| {
            let k = index(i128::from(t));
            (k, k)
        }))
        .collect();
    runs.sort_unstable();
    let mut active: i128 = 0;
    let mut active_ns: i128 = 0;
    let mut covered_to: i128 = -1; // the last period index counted
    for (first, last) in runs {
        let first = first.max(covered_to + 1);
        if first > last {
            continue;
        }
        active += last - first + 1;
        // Periods first..=last: whole ones, the window's last clipped at its end.
        let from = i128::from(w0) + first * period;
        let to = (i128::from(w0) + (last + 1) * period).min(i128::from(w1));
        active_ns += to - from;
        covered_to = last;
    }
    let count = |v: i128| u64::try_from(v).unwrap_or(u64::MAX);
    (
        period_s,
        p,
        count(periods),
        count(active),
        Ns::try_from(active_ns).unwrap_or(Ns::MAX),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rank (claiming `claim`, else known by position) with two devices, one op each.
    fn two_devices(claim: Option<i64>) -> Trace {
        let mut b = strato_trace::testing::TraceBuilder::new();
        b.rank(strato_trace::testing::rank(claim, "test"));
        let cpu = b.thread(1, 1);
        b.span(cpu, strato_trace::Level::Backend, "step", 0, 100);
        for device in [0, 1] {
            let queue = b.queue(device, 7);
            b.span(queue, strato_trace::Level::DeviceKernel, "k", 10, 30);
        }
        b.build()
    }

    #[test]
    fn merged_rank_files_number_their_devices_as_the_whole_job() {
        use crate::registry::{Analysis, RankPart};
        let part = |first_rank, claim: Option<i64>| RankPart {
            value: super::registration::UtilResult(util(&two_devices(claim), &[1.0])),
            first_rank,
            job_ranks: vec![claim],
        };
        // Files 0 and 1 say nothing (their positions number them); file 2 says 5.
        let merged = Util::merge(
            vec![part(0, None), part(1, None), part(2, Some(5))],
            &UtilSettings::default(),
        )
        .expect("util merges");
        let ranks: Vec<(i64, u32, i64)> = (merged.0.devices.iter())
            .map(|d| (d.rank, d.rank_index, d.device))
            .collect();
        assert_eq!(
            ranks,
            vec![
                (0, 0, 0),
                (0, 0, 1),
                (1, 1, 0),
                (1, 1, 1),
                (5, 2, 0),
                (5, 2, 1)
            ]
        );
        // Each device's figures are its own: 20 ns busy of a 100 ns window.
        assert!(merged
            .0
            .devices
            .iter()
            .all(|d| d.busy_ns == 20 && d.window_ns == 100));
    }

    #[test]
    fn one_short_kernel_per_period_reads_as_full() {
        // Window [0, 3s): three 1 ms kernels, one per second.
        let merged = vec![
            (0, 1_000_000),
            (1_100_000_000, 1_101_000_000),
            (2_600_000_000, 2_601_000_000),
        ];
        let (_, _, periods, active, active_ns) = sample(&merged, &[], 0, 3_000_000_000, 1.0);
        assert_eq!((periods, active, active_ns), (3, 3, 3_000_000_000));
        let (_, p, periods, active, _) = sample(&merged, &[], 0, 3_000_000_000, 1.0 / 6.0);
        assert_eq!(p, 166_666_667);
        assert_eq!((periods, active), (18, 3));
    }

    #[test]
    fn a_window_of_a_century_costs_its_intervals_not_its_periods() {
        // Three ops spread over ~2^62 ns (146 years): 2.8e10 periods of 1/6 s, 3 active ones
        // (the old per-period list asked for hundreds of GB here).
        let w0 = -(1 << 61);
        let w1 = 1 << 61;
        let merged = vec![(w0, w0 + 1_000), (0, 5), (w1 - 10, w1)];
        let (_, p, periods, active, active_ns) = sample(&merged, &[0], w0, w1, 1.0 / 6.0);
        assert_eq!(p, 166_666_667);
        let window = (w1 as i128 - w0 as i128) as u64;
        assert_eq!(periods, window.div_ceil(p as u64));
        assert_eq!(active, 3);
        // Two whole periods and the clipped last one.
        let last_len = (w1 as i128 - (w0 as i128 + (periods as i128 - 1) * p as i128)) as i64;
        assert_eq!(active_ns, 2 * p + last_len);
    }

    #[test]
    fn clipped_last_period_weighs_by_length() {
        let merged = vec![(0, 10)];
        // Window 0..15, period 10: periods [0,10) active, [10,15) idle -> 10/15.
        let (_, _, periods, active, active_ns) = sample(&merged, &[], 0, 15, 1e-8);
        assert_eq!((periods, active, active_ns), (2, 1, 10));
    }
}
