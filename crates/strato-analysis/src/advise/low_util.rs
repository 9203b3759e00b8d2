//! Rule `low-util`: low-utilisation windows (Nsight Systems' `gpu_time_util` rule).
//!
//! Per device (rank, device index), its window (first op start to last op end) is cut into
//! [`Config::chunks`] equal chunks; a chunk whose busy share (union of the device's kernels,
//! copies and sets) is below [`Config::threshold_pct`] is a low-utilisation chunk, and runs of
//! consecutive low chunks are reported as windows. Time at stake: the idle time inside the low
//! windows (not their whole length: the busy part is not lost). Conservation: per chunk, busy
//! + idle = chunk length (tested).

use serde::{Deserialize, Serialize};
use strato_trace::Ns;

use super::{human, intersect, rank_number, subtract, Draft, Evidence, Facts};
use crate::analyzed::Analyzed;
use crate::device_time::gpu_time::{length, merge};

/// The rule id.
pub const ID: &str = "low-util";

/// Thresholds of [`run`] (Nsight Systems' `gpu_time_util` defaults).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub enabled: bool,
    /// Chunks below this busy share (percent) are low.
    pub threshold_pct: f64,
    /// Number of equal chunks the device's window is cut into.
    pub chunks: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            enabled: true,
            threshold_pct: 50.0,
            chunks: 30,
        }
    }
}

/// One chunk: `(start, end, busy)`.
pub fn chunks(busy: &[(Ns, Ns)], w0: Ns, w1: Ns, n: usize) -> Vec<(Ns, Ns, Ns)> {
    let n = n.max(1) as i128;
    let len = i128::from(w1 - w0);
    (0..n)
        .map(|k| {
            let a = w0 + (len * k / n) as Ns;
            let b = w0 + (len * (k + 1) / n) as Ns;
            let lo = busy.partition_point(|x| x.1 <= a);
            let hi = busy.partition_point(|x| x.0 < b);
            (a, b, length(&intersect(&busy[lo..hi], &[(a, b)])))
        })
        .filter(|c| c.1 > c.0)
        .collect()
}

/// Runs the rule.
pub fn run(analyzed: &Analyzed, facts: &Facts, config: &Config) -> Vec<Draft> {
    let trace = analyzed.trace();
    let mut drafts = Vec::new();
    for (&(rank, device), ops) in &facts.device_work {
        let busy = merge(ops.iter().map(|&i| {
            let s = &trace.spans[i as usize];
            (s.start, s.end)
        }));
        let (Some(first), Some(last)) = (busy.first(), busy.last()) else {
            continue;
        };
        let (w0, w1) = (first.0, last.1);
        // Runs of consecutive low chunks.
        let mut windows: Vec<(Ns, Ns, Ns)> = Vec::new();
        let mut prev_low = false;
        for (a, b, busy_ns) in chunks(&busy, w0, w1, config.chunks) {
            let low = super::pct(busy_ns, b - a) < config.threshold_pct;
            if low {
                match windows.last_mut() {
                    Some(w) if prev_low => {
                        w.1 = b;
                        w.2 += busy_ns;
                    }
                    _ => windows.push((a, b, busy_ns)),
                }
            }
            prev_low = low;
        }
        if windows.is_empty() {
            continue;
        }
        let low: Vec<(Ns, Ns)> = windows.iter().map(|w| (w.0, w.1)).collect();
        let idle = subtract(&low, &busy);
        let mut evidence: Vec<(Ns, Evidence)> = windows
            .iter()
            .map(|&(a, b, busy_ns)| {
                (
                    b - a - busy_ns,
                    Evidence {
                        kind: "window".into(),
                        rank: rank_number(trace, rank),
                        start_ns: a,
                        end_ns: b,
                        name: format!(
                            "device {device} busy {:.0}% of {}",
                            super::pct(busy_ns, b - a),
                            human(b - a)
                        ),
                    },
                )
            })
            .collect();
        evidence.sort_by_key(|e| std::cmp::Reverse(e.0));
        let low_len: Ns = windows.iter().map(|w| w.1 - w.0).sum();
        drafts.push(Draft {
            message: format!(
                "Device {device} of rank {} was busy less than {:.0}% of the time in {} of its \
                 {} chunks ({} windows, {} long, {} idle).",
                rank_number(trace, rank),
                config.threshold_pct,
                windows.len(),
                config.chunks,
                windows.len(),
                human(low_len),
                human(length(&idle))
            ),
            intervals: facts.clock.intervals(rank, idle),
            evidence: evidence.into_iter().map(|e| e.1).collect(),
            advice: "Open these windows in the timeline: see the gpu-idle and step-breakdown \
                     findings for what the host did meanwhile; raise the work per launch \
                     (batch size), overlap input and host work with device work."
                .into(),
        });
    }
    drafts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_conserve_time() {
        let busy = vec![(0, 5), (12, 30)];
        let c = chunks(&busy, 0, 30, 3);
        assert_eq!(c, vec![(0, 10, 5), (10, 20, 8), (20, 30, 10)]);
        assert_eq!(c.iter().map(|c| c.2).sum::<Ns>(), length(&busy));
    }
}
