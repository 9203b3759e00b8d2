//! Host/device clock alignment.
//!
//! PoCL stamps commands (`CL_PROFILING_COMMAND_*`) with `CLOCK_MONOTONIC_RAW`; recordings use
//! `CLOCK_MONOTONIC`, which NTP slews, so the two differ by an offset that drifts. OpenCL 2.1's
//! `clGetDeviceAndHostTimer` would give paired readings but PoCL does not implement it, so the
//! layer makes its own **paired observations**: it reads MONOTONIC, RAW, MONOTONIC back to back
//! ([`sample_round`]), keeps the read with the narrowest bracket of a round (min-width
//! bracketing: the RAW read happened inside `[m0, m1]`, so `mono = (m0 + m1) / 2 ± (m1 - m0) /
//! 2`), takes a round at start, at sync points (at most every [`ROUND_INTERVAL_NS`]) and at the
//! end, and fits `mono - raw = offset + drift * (raw - anchor)` by least squares ([`fit`]).
//! Error bound = the widest half-bracket used + the fit's largest residual.
//!
//! The estimate is checked independently against the device: a command's QUEUED timestamp is
//! taken inside the enqueue call, so `api_begin <= queued + offset <= api_end` bounds the offset
//! from both sides for every command ([`BracketBounds`], Zins's figure 4.3 constraints); the
//! fitted offset must fall inside the intersection of these intervals.

/// Minimum time between two sampling rounds taken at sync points.
pub const ROUND_INTERVAL_NS: i64 = 20_000_000;

/// Reads per round.
pub const READS_PER_ROUND: usize = 16;

/// One paired observation: a RAW reading and the MONOTONIC midpoint of its bracket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pair {
    /// CLOCK_MONOTONIC_RAW (the device clock on PoCL).
    pub raw: i64,
    /// Midpoint of the CLOCK_MONOTONIC reads around it.
    pub mono: i64,
    /// Width of the bracket (ns).
    pub width: i64,
}

impl Pair {
    /// `mono - raw`.
    pub fn offset(&self) -> i64 {
        self.mono - self.raw
    }
}

use strato_record::read_clock as read;

/// CLOCK_MONOTONIC_RAW now.
pub fn raw_now() -> i64 {
    read(libc::CLOCK_MONOTONIC_RAW)
}

/// One round: [`READS_PER_ROUND`] bracketed reads, the narrowest kept.
pub fn sample_round() -> Pair {
    let mut best = Pair {
        raw: 0,
        mono: 0,
        width: i64::MAX,
    };
    for _ in 0..READS_PER_ROUND {
        let m0 = read(libc::CLOCK_MONOTONIC);
        let r = read(libc::CLOCK_MONOTONIC_RAW);
        let m1 = read(libc::CLOCK_MONOTONIC);
        let width = m1 - m0;
        if width < best.width {
            best = Pair {
                raw: r,
                mono: m0 + width / 2,
                width,
            };
        }
    }
    best
}

/// A fitted mapping `mono = raw + offset_ns + drift_ppb * (raw - anchor_ns) / 1e9`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fit {
    pub offset_ns: i64,
    pub drift_ppb: f64,
    pub anchor_ns: i64,
    /// Widest half-bracket used + largest residual, rounded up.
    pub error_ns: i64,
    pub max_residual_ns: f64,
    pub max_half_width_ns: i64,
    pub pairs: usize,
    /// RAW time covered by the pairs.
    pub span_ns: i64,
}

impl Fit {
    /// Maps a RAW timestamp to MONOTONIC.
    pub fn to_mono(&self, raw: i64) -> i64 {
        raw + self.offset_ns + (self.drift_ppb * (raw - self.anchor_ns) as f64 / 1e9).round() as i64
    }
}

/// Least-squares fit of offset (at the first pair) and drift. With one pair (or pairs spanning
/// under 1 ms) the drift is 0 and the offset is their mean.
pub fn fit(pairs: &[Pair]) -> Option<Fit> {
    let first = pairs.first()?;
    let anchor = first.raw;
    let n = pairs.len() as f64;
    let xs: Vec<f64> = pairs.iter().map(|p| (p.raw - anchor) as f64).collect();
    let ys: Vec<f64> = pairs.iter().map(|p| p.offset() as f64).collect();
    let mx = xs.iter().sum::<f64>() / n;
    let my = ys.iter().sum::<f64>() / n;
    let sxx: f64 = xs.iter().map(|x| (x - mx) * (x - mx)).sum();
    let sxy: f64 = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let span = pairs.iter().map(|p| p.raw).max().unwrap_or(anchor) - anchor;
    let slope = if pairs.len() >= 2 && span >= 1_000_000 && sxx > 0.0 {
        sxy / sxx
    } else {
        0.0
    };
    let intercept = my - slope * mx;
    let max_residual = xs
        .iter()
        .zip(&ys)
        .map(|(x, y)| (y - (intercept + slope * x)).abs())
        .fold(0.0f64, f64::max);
    let max_half = pairs.iter().map(|p| (p.width + 1) / 2).max().unwrap_or(0);
    Some(Fit {
        offset_ns: intercept.round() as i64,
        drift_ppb: slope * 1e9,
        anchor_ns: anchor,
        error_ns: max_half + max_residual.ceil() as i64,
        max_residual_ns: max_residual,
        max_half_width_ns: max_half,
        pairs: pairs.len(),
        span_ns: span,
    })
}

/// Bounds on the offset implied by commands' QUEUED stamps lying inside their enqueue calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BracketBounds {
    /// Largest `api_begin - queued` (detrended): the offset is at least this.
    pub lo: i64,
    /// Smallest `api_end - queued` (detrended): the offset is at most this.
    pub hi: i64,
    pub commands: u64,
}

impl Default for BracketBounds {
    fn default() -> Self {
        BracketBounds {
            lo: i64::MIN,
            hi: i64::MAX,
            commands: 0,
        }
    }
}

impl BracketBounds {
    /// Adds one command: enqueue call `[api_begin, api_end]` (MONOTONIC), QUEUED stamp `queued`
    /// (RAW), detrended by `drift_ppb` around `anchor`.
    pub fn add(&mut self, api_begin: i64, api_end: i64, queued: i64, drift_ppb: f64, anchor: i64) {
        let trend = (drift_ppb * (queued - anchor) as f64 / 1e9).round() as i64;
        self.lo = self.lo.max(api_begin - queued - trend);
        self.hi = self.hi.min(api_end - queued - trend);
        self.commands += 1;
    }

    /// True when `offset` satisfies every command's constraint (within `slack` ns).
    pub fn contains(&self, offset: i64, slack: i64) -> bool {
        self.commands == 0 || (offset >= self.lo - slack && offset <= self.hi + slack)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_recovers_offset_and_drift() {
        // mono = raw + 5000 + 20 ppm * (raw - 1e9)
        let pairs: Vec<Pair> = (0..50)
            .map(|k| {
                let raw = 1_000_000_000 + k * 10_000_000;
                let mono = raw + 5000 + ((raw - 1_000_000_000) as f64 * 20e-6) as i64;
                Pair {
                    raw,
                    mono,
                    width: 40,
                }
            })
            .collect();
        let f = fit(&pairs).expect("fit");
        assert!((f.drift_ppb - 20_000.0).abs() < 5.0, "{f:?}");
        assert!((f.offset_ns - 5000).abs() <= 1, "{f:?}");
        assert!(f.error_ns <= 22, "{f:?}");
        assert_eq!(
            f.to_mono(1_000_000_000 + 100_000_000),
            1_100_000_000 + 5000 + 2000
        );
    }

    #[test]
    fn single_pair_has_no_drift() {
        let f = fit(&[Pair {
            raw: 10,
            mono: 110,
            width: 30,
        }])
        .expect("fit");
        assert_eq!((f.offset_ns, f.drift_ppb, f.error_ns), (100, 0.0, 15));
    }

    #[test]
    fn real_clocks_pair_tightly() {
        let a = sample_round();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let b = sample_round();
        assert!(a.width < 100_000 && b.width < 100_000);
        let f = fit(&[a, b]).expect("fit");
        // MONOTONIC and MONOTONIC_RAW differ by a steady offset: two rounds agree to well
        // under a millisecond.
        assert!(
            (a.offset() - b.offset()).abs() < 1_000_000,
            "{a:?} {b:?} {f:?}"
        );
    }

    #[test]
    fn bracket_bounds_intersect() {
        let mut b = BracketBounds::default();
        b.add(1000, 1100, 900, 0.0, 0); // offset in [100, 200]
        b.add(2000, 2050, 1870, 0.0, 0); // offset in [130, 180]
        assert_eq!((b.lo, b.hi), (130, 180));
        assert!(b.contains(150, 0) && !b.contains(200, 0) && b.contains(200, 20));
    }
}
