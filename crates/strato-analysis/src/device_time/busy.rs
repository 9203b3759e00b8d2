//! Device busy fraction over time: per (rank, device), the share of each fixed bucket (10 ms by
//! default) covered by the union of the device's work (kernels, copies, sets on its queues,
//! [`crate::scope::is_device_work`]). The Perfetto exporter draws it as a utilization counter
//! and the HTML report as a line.
//!
//! Window: per device, from its first op's start (rounded down to a bucket boundary) to its
//! last op's end. Conservation: `sum(fraction_k * bucket_k) = union of the device's work`
//! (the last bucket is clipped to the window, and its fraction is of its clipped length).

use rustc_hash::FxHashMap;
use serde::Serialize;
use strato_trace::{Ns, RankId, Trace, TrackKind};

use crate::scope::is_device_work;

/// Default bucket: 10 ms.
pub const DEFAULT_BUCKET_NS: Ns = 10_000_000;

/// At most this many buckets per device: when the device's window is longer than
/// `MAX_BUCKETS` buckets, the bucket widens (to the window / `MAX_BUCKETS`, rounded up) so
/// the series stays bounded (8 MB per device) whatever the times are.
pub const MAX_BUCKETS: Ns = 1 << 20;

/// Busy fraction of one device.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BusySeries {
    pub rank: RankId,
    pub device: i64,
    pub bucket_ns: Ns,
    /// Start of the first bucket.
    pub start_ns: Ns,
    /// End of the window (the last bucket is clipped here).
    pub end_ns: Ns,
    /// Busy fraction (0..=1) of each bucket, in time order.
    pub fractions: Vec<f64>,
    /// Length of the union of the device's work.
    pub busy_ns: Ns,
}

impl BusySeries {
    /// `(bucket start, fraction)` pairs.
    pub fn points(&self) -> impl Iterator<Item = (Ns, f64)> + '_ {
        self.fractions.iter().enumerate().map(|(k, &f)| {
            let t = i128::from(self.start_ns) + k as i128 * i128::from(self.bucket_ns);
            (t.clamp(i128::from(Ns::MIN), i128::from(Ns::MAX)) as Ns, f)
        })
    }
}

/// Computes the busy series of every device with work. `bucket_ns` must be positive (a
/// non-positive value is taken as [`DEFAULT_BUCKET_NS`]); a device's bucket is widened when
/// its window would need more than [`MAX_BUCKETS`]. Times are those of a valid trace (in the
/// valid range, so window lengths fit in an `i64`); the arithmetic is checked in `i128`
/// anyway, so no input makes it overflow or loop.
pub fn busy_series(trace: &Trace, bucket_ns: Ns) -> Vec<BusySeries> {
    let mut work = DeviceWork::default();
    work.add(trace);
    work.series(bucket_ns)
}

/// The device work [`busy_series`] reduces, gathered from the batches of a streamed import
/// one at a time ([`DeviceWork::add`]: 16 bytes a device op), so that a trace never held
/// whole gets the same series.
#[derive(Debug, Default)]
pub struct DeviceWork {
    work: FxHashMap<(RankId, i64), Vec<(Ns, Ns)>>,
}

impl DeviceWork {
    /// Adds the device work of `trace` (a whole trace, or a batch of a streamed import).
    pub fn add(&mut self, trace: &Trace) {
        for span in &trace.spans {
            if !is_device_work(span.level) {
                continue;
            }
            let track = trace.track(span.track);
            if let TrackKind::DeviceQueue { device, .. } = track.kind {
                self.work
                    .entry((track.rank, device))
                    .or_default()
                    .push((span.start, span.end));
            }
        }
    }

    /// The busy series of every device with work ([`busy_series`]).
    pub fn series(self, bucket_ns: Ns) -> Vec<BusySeries> {
        let bucket = if bucket_ns > 0 {
            bucket_ns
        } else {
            DEFAULT_BUCKET_NS
        };
        let mut work = self.work;
        let mut keys: Vec<(RankId, i64)> = work.keys().copied().collect();
        keys.sort();
        keys.into_iter()
            .filter_map(|key| {
                let mut spans = work.remove(&key)?;
                spans.sort_unstable();
                // Union of the intervals.
                let mut union: Vec<(Ns, Ns)> = Vec::new();
                for (s, e) in spans {
                    match union.last_mut() {
                        Some(last) if s <= last.1 => last.1 = last.1.max(e),
                        _ => union.push((s, e)),
                    }
                }
                let first = i128::from(union.first()?.0);
                let end = i128::from(union.iter().map(|u| u.1).max()?);
                let max = i128::from(MAX_BUCKETS);
                let mut bucket = i128::from(bucket);
                let window = end - first.div_euclid(bucket) * bucket;
                if (window + bucket - 1) / bucket > max {
                    bucket = (window + max - 1) / max;
                }
                let start = first.div_euclid(bucket) * bucket;
                // At most MAX_BUCKETS + 1 (the start moves down by less than one bucket).
                let n = ((end - start + bucket - 1) / bucket).clamp(1, max + 1) as usize;
                let mut busy = vec![0i128; n];
                for &(s, e) in &union {
                    let (mut t, e) = (i128::from(s), i128::from(e));
                    while t < e {
                        let k = (t - start) / bucket;
                        let bucket_end = start + (k + 1) * bucket;
                        let upto = e.min(bucket_end);
                        if let Some(b) = usize::try_from(k).ok().and_then(|k| busy.get_mut(k)) {
                            *b += upto - t;
                        }
                        t = upto;
                    }
                }
                let fractions = busy
                    .iter()
                    .enumerate()
                    .map(|(k, &b)| {
                        let lo = start + k as i128 * bucket;
                        let len = (lo + bucket).min(end) - lo;
                        if len > 0 {
                            (b as f64 / len as f64).min(1.0)
                        } else {
                            0.0
                        }
                    })
                    .collect();
                let busy_ns: i128 = union
                    .iter()
                    .map(|u| i128::from(u.1) - i128::from(u.0))
                    .sum();
                let clamp = |v: i128| v.clamp(i128::from(Ns::MIN), i128::from(Ns::MAX)) as Ns;
                Some(BusySeries {
                    rank: key.0,
                    device: key.1,
                    bucket_ns: clamp(bucket),
                    start_ns: clamp(start),
                    end_ns: clamp(end),
                    fractions,
                    busy_ns: clamp(busy_ns),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strato_trace::testing::{rank, TraceBuilder};
    use strato_trace::Level;

    #[test]
    fn fractions_conserve_busy_time() {
        let mut b = TraceBuilder::new();
        b.rank(rank(None, "t"));
        let q0 = b.queue(0, 1);
        let q1 = b.queue(0, 2);
        let mut add = |track, start, end| {
            b.span(track, Level::DeviceKernel, "k", start, end)
                .category("k");
        };
        // Bucket 10: [5,25) on q0 and [20,30) on q1 overlap; [41,43) alone.
        add(q0, 5, 25);
        add(q1, 20, 30);
        add(q0, 41, 43);
        let trace = b.build();
        let series = busy_series(&trace, 10);
        assert_eq!(series.len(), 1);
        let s = &series[0];
        assert_eq!((s.start_ns, s.end_ns, s.busy_ns), (0, 43, 27));
        assert_eq!(s.fractions, vec![0.5, 1.0, 1.0, 0.0, 2.0 / 3.0]);
        let total: f64 = s
            .points()
            .map(|(t, f)| f * ((t + 10).min(s.end_ns) - t) as f64)
            .sum();
        assert!((total - 27.0).abs() < 1e-9);
    }

    #[test]
    fn extreme_times_give_a_bounded_series_and_terminate() {
        // A kernel at 0 and one 54 years later (a missing `ts` read as 0, before it became an
        // error), and the widest spans i64 allows (an invalid trace): bounded, no loop.
        for (a, b) in [
            (
                (0, 10),
                (1_712_195_495_505_543_200, 1_712_195_495_505_600_000),
            ),
            ((i64::MIN, i64::MIN + 5), (i64::MAX - 5, i64::MAX)),
        ] {
            let mut builder = TraceBuilder::new();
            builder.rank(rank(None, "t"));
            let q = builder.queue(0, 1);
            for (start, end) in [a, b] {
                builder
                    .span(q, Level::DeviceKernel, "k", start, end)
                    .category("k");
            }
            let trace = builder.build();
            let series = busy_series(&trace, DEFAULT_BUCKET_NS);
            let s = &series[0];
            assert!(
                s.fractions.len() as Ns <= MAX_BUCKETS + 1,
                "{}",
                s.fractions.len()
            );
            assert!(s.bucket_ns > DEFAULT_BUCKET_NS);
            assert_eq!(s.busy_ns, (a.1 - a.0) + (b.1 - b.0));
            assert!(s.fractions.iter().all(|f| (0.0..=1.0).contains(f)));
        }
    }
}
