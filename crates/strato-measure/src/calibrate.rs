//! The calibrator's arithmetic (DOPpler, `papers/` seed 002, sections 4.2-4.3), kept pure so
//! that it is tested against hand-computed values:
//!
//! - outliers: modified z-scores `0.6745 (x - median) / MAD` with the *double* MAD (a separate
//!   MAD for each side of the median), on the ratios latency / duration; |z| > 3.5 is an
//!   outlier (Iglewicz & Hoaglin's cut-off);
//! - eq. 3: `Q = max(#outliers, ceil(zeta * #successes))` candidates re-measured in isolation;
//! - eq. 4: `delta_mean = mean(|l_isolated - l_parallel| / l_parallel)`;
//! - eq. 5: reported latency `r_i (v_i - v_i delta_mean)` with `r_i = l_i / v_i`;
//! - eq. 2: adaptive timeout `floor(max(eta, min(iota, 2 iota tanh(phi dp G / 2))))`;
//! - eq. 6-7: the REACT policy (multiplicative decrease, binary increase);
//! - rank selection: the top `ceil(K |C|)` candidates are re-measured serially.

use serde::{Deserialize, Serialize};

/// The modified z-score constant (0.6745 = the 0.75 quantile of the standard normal).
pub const Z_CONST: f64 = 0.6745;

/// Calibrator and policy parameters; defaults are the paper's.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Params {
    /// Minimum timeout (s), eta.
    pub eta_s: f64,
    /// Maximum timeout (s), iota.
    pub iota_s: f64,
    /// Growth of the timeout with parallelism, phi (not given in the paper; 0.1 puts dp 1 at
    /// eta and reaches iota at dp 12).
    pub phi: f64,
    /// Multiplicative decrease factor, beta.
    pub beta: f64,
    /// Inaccuracy threshold, tau (fraction).
    pub tau: f64,
    /// Re-measurement fraction, zeta.
    pub zeta: f64,
    /// Binary increase bounds, gamma_min..gamma_max.
    pub gamma_min: f64,
    pub gamma_max: f64,
    /// Fraction of candidates re-measured at the end (rank selection), K.
    pub top_k: f64,
    /// |modified z| above which a ratio is an outlier.
    pub z_threshold: f64,
    /// Initial adaptive maximum parallelism A (alpha); `None` = `max_dp`.
    pub alpha: Option<usize>,
    /// Parallelism of the first round.
    pub initial_dp: usize,
    /// Upper bound on parallelism (the paper uses the tuner's batch size; here the number of
    /// CPUs: with the device lock only single-threaded builds overlap, and more workers than
    /// cores only queue for them).
    pub max_dp: usize,
    /// Candidates per calibration round: `max(dp * G, min_round)` (see docs/measure.md).
    pub min_round: usize,
    /// Apply the binary increase in the same update as a multiplicative decrease (Algorithm 2
    /// read literally). Off by default: with gamma_min = 2 it cancels every decrease below
    /// dp = 10, so parallelism could never fall to the 1-3 the paper reports for large programs.
    pub increase_after_decrease: bool,
    /// Re-measure samples even in rounds run at dp 1 (already isolated).
    pub remeasure_at_dp1: bool,
    /// Seed for the random sample of re-measured candidates.
    pub seed: u64,
    /// Correct a parallel round's latencies by the *signed* mean relative change of its
    /// re-measured samples, `l (1 + bias)`, instead of eq. 5's `l (1 - delta_mean)` (which
    /// shrinks every latency of a noisy round, whatever the direction of the noise).
    pub signed_correction: bool,
    /// Relative uncertainty of a latency measured alone, for the rank-selection window.
    pub rank_noise: f64,
    /// Quantile of the measured distortions `|l_iso - l_par| / l_par` at a parallelism level
    /// taken as the uncertainty of a latency measured at that level (rank-selection window).
    pub rank_quantile: f64,
    /// Most candidates re-measured in rank selection (the window is cut at this size).
    pub rank_max: usize,
    /// Most interleaved passes of rank selection.
    pub rank_passes: usize,
    /// Rank selection stops when every remaining candidate's 95% interval is within this
    /// fraction of its mean.
    pub rank_ci: f64,
    /// Timed runs during which some task on the host waited for a core for more than this
    /// fraction of their duration (CPU pressure stall) count as disturbed: the worker repeats
    /// them (without rebuilding) up to `disturbed_retries` times and keeps the least disturbed.
    /// A quarter: the median of the runs absorbs a disturbance that hits fewer than half of
    /// them, and the worker's own enqueueing stalls briefly at every measurement.
    pub stall_limit: f64,
    pub disturbed_retries: u32,
    /// Time budget of one timed run (ms): each of the `repeats` runs of a measurement
    /// launches the kernel back to back until the launches take at least this long (counted
    /// from one probe launch) and reports the time per launch. A kernel of 0.1 ms timed one
    /// launch at a time varies with thread wake-ups and scheduler ticks of its own order;
    /// 0 = one launch per run.
    pub min_run_ms: f64,
}

impl Default for Params {
    fn default() -> Self {
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        Self {
            eta_s: 4.0,
            iota_s: 20.0,
            phi: 0.1,
            beta: 0.2,
            tau: 0.05,
            zeta: 0.2,
            gamma_min: 2.0,
            gamma_max: 12.0,
            top_k: 0.01,
            z_threshold: 3.5,
            alpha: None,
            initial_dp: 2,
            max_dp: cpus,
            min_round: 8,
            increase_after_decrease: false,
            remeasure_at_dp1: false,
            seed: 0x5EED,
            signed_correction: true,
            rank_noise: 0.08,
            rank_quantile: 0.9,
            rank_max: 32,
            rank_passes: 8,
            rank_ci: 0.01,
            stall_limit: 0.25,
            disturbed_retries: 2,
            min_run_ms: 2.0,
        }
    }
}

/// Launches per timed run so that they take at least `min_run_ns`, one launch taking
/// `probe_ns`: `ceil(min_run_ns / probe_ns)`, within `1..=MAX_LAUNCHES_PER_RUN`.
pub fn launches_for(min_run_ns: f64, probe_ns: f64) -> u32 {
    let max = crate::protocol::MAX_LAUNCHES_PER_RUN;
    if min_run_ns.is_nan() || min_run_ns <= 0.0 {
        return 1;
    }
    if probe_ns.is_nan() || probe_ns <= 0.0 {
        return max;
    }
    let k = (min_run_ns / probe_ns).ceil();
    if k >= f64::from(max) {
        max
    } else {
        (k as u32).max(1)
    }
}

/// SplitMix64 finaliser: a well-mixed 64-bit hash of `x`.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A small deterministic generator for sampling.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        splitmix64(self.0)
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

/// Median of finite values; NaN for none.
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Modified z-scores with the double MAD. Where one side's MAD is zero, that side falls back
/// to `(x - median) / (1.253314 * mean absolute deviation)`; where that is zero too, 0.
pub fn modified_z_scores(values: &[f64]) -> Vec<f64> {
    let m = median(values);
    if !m.is_finite() {
        return vec![0.0; values.len()];
    }
    let left: Vec<f64> = values.iter().filter(|&&x| x <= m).map(|x| m - x).collect();
    let right: Vec<f64> = values.iter().filter(|&&x| x >= m).map(|x| x - m).collect();
    let side_z = |dev: &[f64]| -> Box<dyn Fn(f64) -> f64> {
        let mad = median(dev);
        if mad > 0.0 {
            Box::new(move |d| Z_CONST * d / mad)
        } else {
            let mean_ad = if dev.is_empty() {
                0.0
            } else {
                dev.iter().sum::<f64>() / dev.len() as f64
            };
            if mean_ad > 0.0 {
                Box::new(move |d| d / (1.253_314 * mean_ad))
            } else {
                Box::new(|_| 0.0)
            }
        }
    };
    let zl = side_z(&left);
    let zr = side_z(&right);
    values
        .iter()
        .map(|&x| if x < m { -zl(m - x) } else { zr(x - m) })
        .collect()
}

/// Indices whose |modified z| exceeds `threshold`.
pub fn outliers(values: &[f64], threshold: f64) -> Vec<usize> {
    modified_z_scores(values)
        .iter()
        .enumerate()
        .filter(|(_, z)| z.abs() > threshold)
        .map(|(i, _)| i)
        .collect()
}

/// Eq. 3: how many candidates to re-measure in isolation (never more than succeeded).
pub fn remeasure_count(n_outliers: usize, n_successes: usize, zeta: f64) -> usize {
    let sampled = (zeta * n_successes as f64).ceil() as usize;
    n_outliers.max(sampled).min(n_successes)
}

/// Eq. 4: mean relative difference between isolated (`.1`) and parallel (`.0`) latencies.
pub fn delta_mean(pairs: &[(f64, f64)]) -> f64 {
    let d: Vec<f64> = pairs
        .iter()
        .filter(|(p, _)| *p > 0.0)
        .map(|(p, iso)| (iso - p).abs() / p)
        .collect();
    if d.is_empty() {
        0.0
    } else {
        d.iter().sum::<f64>() / d.len() as f64
    }
}

/// Eq. 5: the latency reported for a candidate measured in parallel, `r (v - v delta)` with
/// `r = latency / duration`.
pub fn scaled_latency(latency: f64, duration: f64, delta_mean: f64) -> f64 {
    if duration <= 0.0 {
        return latency * (1.0 - delta_mean);
    }
    let r = latency / duration;
    r * (duration - duration * delta_mean)
}

/// The signed mean relative change `mean((l_iso - l_par) / l_par)` of re-measured pairs
/// `(parallel, isolated)`: positive when parallel measurement made candidates look faster.
pub fn signed_bias(pairs: &[(f64, f64)]) -> f64 {
    let d: Vec<f64> = pairs
        .iter()
        .filter(|(p, _)| *p > 0.0)
        .map(|(p, iso)| (iso - p) / p)
        .collect();
    if d.is_empty() {
        0.0
    } else {
        d.iter().sum::<f64>() / d.len() as f64
    }
}

/// The `q` quantile (0..=1) of finite values, linear between order statistics; NaN for none.
pub fn quantile(values: &[f64], q: f64) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let pos = q.clamp(0.0, 1.0) * (v.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

/// The 0.975 quantile of Student's t with `df` degrees of freedom (two-sided 95%).
pub fn t_975(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => T[df - 1],
        31..=60 => 2.000 + (2.042 - 2.000) * (60 - df) as f64 / 30.0,
        _ => 1.96,
    }
}

/// Mean and half-width of its 95% interval (Student's t); the half-width is infinite for
/// fewer than two values.
pub fn mean_ci95(values: &[f64]) -> (f64, f64) {
    let n = values.len();
    if n == 0 {
        return (f64::NAN, f64::INFINITY);
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    if n < 2 {
        return (mean, f64::INFINITY);
    }
    let var = values.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    (mean, t_975(n - 1) * (var / n as f64).sqrt())
}

/// A median and its distribution-free 95% interval (order statistics): `x_(j) ..= x_(n+1-j)`
/// of the sorted values, `j` the largest rank with `P(Binomial(n, 1/2) < j) <= 0.025`, so the
/// interval holds the true median with at least 95% probability whatever the distribution
/// (below 6 values no such `j` exists and the interval is the whole range). Robust where a
/// mean is not: on a CPU device a sample taken while another process held a core is 2-3x
/// slower, and two such samples in twenty moved a mean by 20%. `None` for no finite values.
pub fn median_ci95(values: &[f64]) -> Option<MedianCi> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    // P(X = i) for X ~ Binomial(n, 1/2), accumulated from i = 0; 0.5^n underflows only
    // beyond n = 1074, far more samples than any measurement takes.
    let mut pmf = 0.5f64.powi(n.min(1000) as i32);
    let mut cdf = 0.0;
    let mut j = 0; // number of order statistics cut from each end
    for i in 0..n / 2 {
        cdf += pmf;
        if cdf > 0.025 {
            break;
        }
        j = i + 1;
        pmf = pmf * (n - i) as f64 / (i + 1) as f64;
    }
    // `j` values below the interval's lower end have probability <= 0.025; the interval is
    // x_(j+1) ..= x_(n-j) (1-based), i.e. v[j] ..= v[n-1-j] (the whole range for j = 0).
    let (lo, hi) = (v[j], v[n - 1 - j]);
    Some(MedianCi {
        median: median(&v),
        lo,
        hi,
        n,
    })
}

/// See [`median_ci95`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MedianCi {
    pub median: f64,
    pub lo: f64,
    pub hi: f64,
    pub n: usize,
}

impl MedianCi {
    /// The larger distance from the median to an end of the interval.
    pub fn half(&self) -> f64 {
        (self.median - self.lo).max(self.hi - self.median)
    }
    /// The interval widened to at least `median (1 -+ rel / sqrt(n))`: a prior on the noise
    /// of one sample, so that a few samples that happen to agree do not count as certain.
    pub fn floored(self, rel: f64) -> Self {
        let d = self.median * rel / (self.n.max(1) as f64).sqrt();
        Self {
            lo: self.lo.min(self.median - d),
            hi: self.hi.max(self.median + d),
            ..self
        }
    }
}

/// The rank-selection window: of candidates with reported latency `r` and relative
/// uncertainty `u` (`(r, u)` each), those that could be the fastest, i.e. whose lower bound
/// `r (1 - u)` is at most the smallest upper bound `min r (1 + u)`. Indices in order of `r`,
/// at least `min_count` and at most `max_count` of them (`max_count >= min_count`).
pub fn rank_window(items: &[(f64, f64)], min_count: usize, max_count: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..items.len())
        .filter(|&i| items[i].0.is_finite())
        .collect();
    order.sort_by(|&a, &b| items[a].0.total_cmp(&items[b].0));
    let upper = order
        .iter()
        .map(|&i| items[i].0 * (1.0 + items[i].1.max(0.0)))
        .fold(f64::INFINITY, f64::min);
    let max_count = max_count.max(min_count);
    order
        .iter()
        .enumerate()
        .filter(|&(k, &i)| {
            k < min_count || items[i].0 * (1.0 - items[i].1.clamp(0.0, 1.0)) <= upper
        })
        .map(|(_, &i)| i)
        .take(max_count)
        .collect()
}

/// Eq. 2: the adaptive timeout in whole seconds for parallelism `dp` over `devices` devices.
pub fn timeout_s(p: &Params, dp: usize, devices: usize) -> f64 {
    let grow = 2.0 * p.iota_s * (p.phi * dp as f64 * devices as f64 / 2.0).tanh();
    p.eta_s.max(p.iota_s.min(grow)).floor()
}

/// Rank selection: how many of `n` candidates are re-measured at the end (at least 1).
pub fn rank_count(n: usize, top_k: f64) -> usize {
    ((top_k * n as f64).ceil() as usize).clamp(1, n.max(1))
}

/// One REACT update, for the decision log.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ReactStep {
    pub dp_before: usize,
    pub a_before: f64,
    pub delta_mean: f64,
    pub n_err_dp: usize,
    /// Whether the multiplicative decrease (eq. 6) fired.
    pub decreased: bool,
    /// The binary increase applied (eq. 7), after clamping; 0 when not applied.
    pub gamma: f64,
    pub a_after: f64,
    pub dp_after: usize,
}

/// The REACT parallelism policy (Algorithm 2, lines 11-16; eq. 6-7).
#[derive(Debug, Clone)]
pub struct React {
    /// Adaptive maximum parallelism A.
    pub a: f64,
    /// Current parallelism.
    pub dp: usize,
    params: Params,
}

impl React {
    pub fn new(params: &Params) -> Self {
        let max_dp = params.max_dp.max(1);
        Self {
            a: params.alpha.unwrap_or(max_dp) as f64,
            dp: params.initial_dp.clamp(1, max_dp),
            params: params.clone(),
        }
    }

    /// Updates parallelism after a round with inaccuracy `delta_mean` and `n_err_dp` failures
    /// that succeeded when re-run alone.
    pub fn update(&mut self, delta_mean: f64, n_err_dp: usize) -> ReactStep {
        let p = &self.params;
        let dp_before = self.dp;
        let a_before = self.a;
        let dp = dp_before as f64;
        let decreased = delta_mean > p.tau || n_err_dp as f64 > dp * p.tau;
        let mut next = dp;
        if decreased {
            // Eq. 6.
            self.a = if dp < self.a {
                (dp * (2.0 - p.beta) / 2.0).floor()
            } else {
                dp.floor()
            };
            next = (dp * (1.0 - p.beta)).floor();
        }
        let mut gamma = 0.0;
        if !decreased || p.increase_after_decrease {
            // Eq. 7.
            let g = if next < self.a {
                (self.a - next) / 2.0
            } else {
                next - self.a
            };
            gamma = g.min(p.gamma_max).max(p.gamma_min);
            next = (next + gamma).floor();
        }
        self.dp = (next.max(1.0) as usize).min(p.max_dp.max(1));
        ReactStep {
            dp_before,
            a_before,
            delta_mean,
            n_err_dp,
            decreased,
            gamma,
            a_after: self.a,
            dp_after: self.dp,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn modified_z_double_mad_hand_computed() {
        // median 3; left deviations {2,1,0} -> MAD 1; right {0,1,97} -> MAD 1.
        let z = modified_z_scores(&[1.0, 2.0, 3.0, 4.0, 100.0]);
        assert!(close(z[0], -2.0 * 0.6745));
        assert!(close(z[1], -0.6745));
        assert!(close(z[2], 0.0));
        assert!(close(z[3], 0.6745));
        assert!(close(z[4], 97.0 * 0.6745));
        assert_eq!(outliers(&[1.0, 2.0, 3.0, 4.0, 100.0], 3.5), vec![4]);
    }

    #[test]
    fn modified_z_asymmetric_sides() {
        // median 10; values <= 10: 0,4,8,10 -> devs 10,6,2,0 -> MAD (2+6)/2 = 4;
        // values >= 10: 10,11,12,40 -> devs 0,1,2,30 -> MAD 1.5.
        let v = [0.0, 4.0, 8.0, 10.0, 11.0, 12.0, 40.0];
        let z = modified_z_scores(&v);
        assert!(close(z[0], -0.6745 * 10.0 / 4.0));
        assert!(close(z[6], 0.6745 * 30.0 / 1.5));
        assert_eq!(outliers(&v, 3.5), vec![6]);
    }

    #[test]
    fn modified_z_zero_mad_falls_back_to_mean_ad() {
        // median 1; values >= 1 are all six: devs {0,0,0,0,0,9} -> MAD 0, mean AD 1.5
        // -> z = 9 / (1.253314 * 1.5).
        let v = [1.0, 1.0, 1.0, 1.0, 1.0, 10.0];
        let z = modified_z_scores(&v);
        assert!(close(z[5], 9.0 / (1.253_314 * 1.5)));
        assert!(close(z[0], 0.0));
        assert!(modified_z_scores(&[2.0, 2.0, 2.0])
            .iter()
            .all(|z| *z == 0.0));
    }

    #[test]
    fn q_formula() {
        assert_eq!(remeasure_count(1, 8, 0.2), 2); // ceil(1.6) = 2
        assert_eq!(remeasure_count(3, 8, 0.2), 3);
        assert_eq!(remeasure_count(0, 10, 0.2), 2);
        assert_eq!(remeasure_count(0, 11, 0.2), 3); // ceil(2.2)
        assert_eq!(remeasure_count(0, 0, 0.2), 0);
        assert_eq!(remeasure_count(5, 3, 0.2), 3);
    }

    #[test]
    fn timeout_eq2() {
        let p = Params::default();
        // 40 tanh(0.05) = 1.998 -> max(4, .) = 4.
        assert_eq!(timeout_s(&p, 1, 1), 4.0);
        // 40 tanh(0.2) = 7.895 -> 7.
        assert_eq!(timeout_s(&p, 4, 1), 7.0);
        // 40 tanh(0.3) = 11.65 -> 11 (dp 3 on 2 devices: phi dp G / 2 = 0.3).
        assert_eq!(timeout_s(&p, 3, 2), 11.0);
        // 40 tanh(0.6) = 21.48 -> iota 20.
        assert_eq!(timeout_s(&p, 12, 1), 20.0);
    }

    #[test]
    fn delta_and_scaling_eq4_eq5() {
        // |110-100|/100 = 0.1, |180-200|/200 = 0.1.
        assert!(close(delta_mean(&[(100.0, 110.0), (200.0, 180.0)]), 0.1));
        assert!(close(delta_mean(&[]), 0.0));
        // r = 110/1100 = 0.1; 0.1 * (1100 - 110) = 99.
        assert!(close(scaled_latency(110.0, 1100.0, 0.1), 99.0));
    }

    #[test]
    fn react_eq6_eq7() {
        let p = Params {
            alpha: Some(8),
            initial_dp: 10,
            max_dp: 64,
            ..Params::default()
        };
        let mut r = React::new(&p);
        // dp 10 >= A 8: A <- 10, dp <- floor(8.0) = 8, no increase in the same update.
        let s = r.update(0.10, 0);
        assert!(s.decreased);
        assert_eq!((s.a_after, s.dp_after), (10.0, 8));
        // dp 8 < A 10: gamma = (10-8)/2 = 1 -> clamped to 2 -> dp 10.
        let s = r.update(0.01, 0);
        assert!(!s.decreased);
        assert!(close(s.gamma, 2.0));
        assert_eq!(s.dp_after, 10);
        // dp 10 >= A 10: gamma = 0 -> 2 -> 12.
        assert_eq!(r.update(0.0, 0).dp_after, 12);
        // 12 - 10 = 2 -> 14; then 14 - 10 = 4 -> 18; 18 - 10 = 8 -> 26; 16 -> clamped 12 -> 38.
        assert_eq!(r.update(0.0, 0).dp_after, 14);
        assert_eq!(r.update(0.0, 0).dp_after, 18);
        assert_eq!(r.update(0.0, 0).dp_after, 26);
        assert_eq!(r.update(0.0, 0).dp_after, 38);
        // Failures: 2 > 38 * 0.05 = 1.9 -> decrease: A <- 38, dp <- floor(30.4) = 30.
        let s = r.update(0.0, 2);
        assert!(s.decreased);
        assert_eq!((s.a_after, s.dp_after), (38.0, 30));
        // A decrease below A: dp 30 < A 38 -> A <- floor(30 * 0.9) = 27, dp <- 24.
        let s = r.update(0.2, 0);
        assert_eq!((s.a_after, s.dp_after), (27.0, 24));
    }

    #[test]
    fn react_literal_and_bounds() {
        let p = Params {
            alpha: Some(8),
            initial_dp: 10,
            max_dp: 64,
            increase_after_decrease: true,
            ..Params::default()
        };
        let mut r = React::new(&p);
        // A <- 10, dp 8, then gamma (10-8)/2 = 1 -> 2 -> 10.
        let s = r.update(0.10, 0);
        assert_eq!((s.a_after, s.dp_after), (10.0, 10));
        // Bounded by max_dp and by 1.
        let p = Params {
            initial_dp: 2,
            max_dp: 4,
            ..Params::default()
        };
        let mut r = React::new(&p);
        assert_eq!(r.update(0.0, 0).dp_after, 4);
        assert_eq!(r.update(0.0, 0).dp_after, 4);
        assert_eq!(r.update(0.5, 0).dp_after, 3); // floor(3.2)
        let mut r = React::new(&Params {
            initial_dp: 1,
            max_dp: 4,
            ..Params::default()
        });
        assert_eq!(r.update(0.5, 0).dp_after, 1); // floor(0.8) -> at least 1
    }

    #[test]
    fn signed_bias_keeps_the_direction() {
        // (110-100)/100 = +0.1, (180-200)/200 = -0.1: delta_mean 0.1 but no bias.
        assert!(close(signed_bias(&[(100.0, 110.0), (200.0, 180.0)]), 0.0));
        assert!(close(signed_bias(&[(100.0, 150.0), (200.0, 300.0)]), 0.5));
        assert!(close(signed_bias(&[]), 0.0));
    }

    #[test]
    fn quantiles_and_intervals_hand_computed() {
        assert!(close(quantile(&[4.0, 1.0, 3.0, 2.0], 0.5), 2.5));
        assert!(close(quantile(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.9), 4.6));
        assert!(quantile(&[], 0.5).is_nan());
        // mean 2, s = 1, n = 3: 4.303 / sqrt(3).
        let (m, h) = mean_ci95(&[1.0, 2.0, 3.0]);
        assert!(close(m, 2.0));
        assert!(close(h, 4.303 / 3f64.sqrt()));
        assert!(mean_ci95(&[5.0]).1.is_infinite());
        assert_eq!(t_975(100), 1.96);
    }

    #[test]
    fn rank_window_grows_with_uncertainty() {
        // Upper bounds: 100*1.05 = 105, 103*1.05, 130*1.5 = 195, 300*1.05.
        let items = [(100.0, 0.05), (103.0, 0.05), (130.0, 0.5), (300.0, 0.05)];
        // 103*0.95 = 97.85 <= 105; 130*0.5 = 65 <= 105; 300*0.95 > 105.
        assert_eq!(rank_window(&items, 1, 10), vec![0, 1, 2]);
        // Same latencies, all measured alone with 5%: 130*0.95 = 123.5 > 105.
        let tight = [(100.0, 0.05), (103.0, 0.05), (130.0, 0.05), (300.0, 0.05)];
        assert_eq!(rank_window(&tight, 1, 10), vec![0, 1]);
        // Bounds on the size.
        assert_eq!(rank_window(&tight, 3, 10), vec![0, 1, 2]);
        assert_eq!(rank_window(&items, 1, 2), vec![0, 1]);
        assert!(rank_window(&[], 1, 3).is_empty());
    }

    #[test]
    fn rank_count_k() {
        assert_eq!(rank_count(216, 0.01), 3);
        assert_eq!(rank_count(100, 0.01), 1);
        assert_eq!(rank_count(5, 0.01), 1);
        assert_eq!(rank_count(0, 0.01), 1);
    }

    #[test]
    fn launches_per_run_fill_the_time_budget() {
        // 2 ms budget: a 0.11 ms kernel needs ceil(18.18) = 19 launches, a 0.5 ms one 4,
        // a kernel longer than the budget 1.
        assert_eq!(launches_for(2e6, 110e3), 19);
        assert_eq!(launches_for(2e6, 5e5), 4);
        assert_eq!(launches_for(2e6, 3e6), 1);
        // Exactly on the budget.
        assert_eq!(launches_for(2e6, 1e6), 2);
        // No budget: one launch; a zero-time probe or a tiny kernel: the cap.
        assert_eq!(launches_for(0.0, 1e3), 1);
        assert_eq!(
            launches_for(2e6, 0.0),
            crate::protocol::MAX_LAUNCHES_PER_RUN
        );
        assert_eq!(
            launches_for(2e6, 10.0),
            crate::protocol::MAX_LAUNCHES_PER_RUN
        );
        assert_eq!(launches_for(f64::NAN, 1e3), 1);
    }

    #[test]
    fn median_interval_order_statistics_hand_computed() {
        // n = 20: P(X <= 5) = 0.0207 <= 0.025 < P(X <= 6) = 0.0577, so j = 6 values are cut
        // from each end: x_(6+1) = 7 and x_(20-6) = 14 (1..=20 in order).
        let v: Vec<f64> = (1..=20).rev().map(f64::from).collect();
        let c = median_ci95(&v).unwrap();
        assert_eq!((c.median, c.lo, c.hi, c.n), (10.5, 7.0, 14.0, 20));
        assert_eq!(c.half(), 3.5);
        // n = 9: P(X = 0) = 0.002, P(X <= 1) = 0.0195 <= 0.025 < P(X <= 2) = 0.0898: j = 2.
        let c = median_ci95(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]).unwrap();
        assert_eq!((c.lo, c.hi), (3.0, 7.0));
        // n = 8: P(X = 0) = 0.0039, P(X <= 1) = 0.035 > 0.025: j = 1.
        let c = median_ci95(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]).unwrap();
        assert_eq!((c.lo, c.hi), (2.0, 7.0));
        // n = 5: P(X = 0) = 0.031 > 0.025: the whole range.
        let c = median_ci95(&[5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
        assert_eq!((c.median, c.lo, c.hi), (3.0, 1.0, 5.0));
        // Two samples of twenty disturbed (x3) move the median and its interval by nothing
        // much, where the mean moves by 20%.
        let mut d = vec![100.0; 18];
        d.extend([300.0, 300.0]);
        let c = median_ci95(&d).unwrap();
        assert_eq!((c.median, c.lo, c.hi), (100.0, 100.0, 100.0));
        assert!((mean_ci95(&d).0 - 120.0).abs() < 1e-9);
        // NaN ignored; none left: None.
        assert_eq!(median_ci95(&[f64::NAN, 2.0]).unwrap().n, 1);
        assert!(median_ci95(&[]).is_none());
        // The floor: 1 sample of 100 with 8% noise: 92..108; 4 samples: 96..104 at least.
        let one = median_ci95(&[100.0]).unwrap().floored(0.08);
        assert!((one.lo - 92.0).abs() < 1e-9 && (one.hi - 108.0).abs() < 1e-9);
        let four = median_ci95(&[99.0, 100.0, 100.0, 101.0])
            .unwrap()
            .floored(0.08);
        assert!((four.lo - 96.0).abs() < 1e-9 && (four.hi - 104.0).abs() < 1e-9);
    }
}
