//! Rule `launch-bound`: stretches of many short kernels whose launch cost exceeds their run
//! time, so the device waits for the host to launch the next one.
//!
//! A kernel is *launch-bound* when it has a launch (by correlation) whose API call lasted at
//! least as long as the kernel ran (HTA's "short kernel": the runtime event outlasts the
//! kernel) and it ran at most [`Config::max_kernel_us`]. Per device (rank, device index), a
//! *stretch* is a maximal run of consecutive launch-bound kernels in the device's work order
//! (any other op ends it) holding at least [`Config::min_kernels`] kernels. Time at stake: the
//! device's idle time inside each stretch (first kernel start to last kernel end, minus the
//! union of its work): what launching faster (CUDA graphs, fused kernels) could recover.
//! Conservation: per stretch, busy + idle = stretch length (tested).

use serde::{Deserialize, Serialize};
use strato_trace::{Level, Ns};

use super::{human, rank_number, subtract, Draft, Evidence, Facts};
use crate::analyzed::Analyzed;
use crate::device_time::gpu_time::{length, merge};

/// The rule id.
pub const ID: &str = "launch-bound";

/// Thresholds of [`run`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub enabled: bool,
    /// A kernel longer than this (us) is not short (HTA `runtime_cutoff`, 50 us).
    pub max_kernel_us: f64,
    /// Fewest consecutive launch-bound kernels that make a stretch.
    pub min_kernels: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            enabled: true,
            max_kernel_us: 50.0,
            min_kernels: 20,
        }
    }
}

/// One stretch with its launch statistics.
#[derive(Debug, Clone, PartialEq)]
pub struct Stretch {
    pub start: Ns,
    pub end: Ns,
    pub kernels: usize,
    pub kernel_ns: Ns,
    pub launch_ns: Ns,
    /// Device idle intervals inside the stretch.
    pub idle: Vec<(Ns, Ns)>,
}

/// Cuts a device's ordered `(kernel start, kernel end, launch duration if launch-bound)` list
/// into stretches of at least `min_kernels` launch-bound kernels.
pub fn stretches(ops: &[(Ns, Ns, Option<Ns>)], min_kernels: usize) -> Vec<Stretch> {
    let mut out = Vec::new();
    let mut run: Vec<(Ns, Ns, Ns)> = Vec::new();
    let mut flush = |run: &mut Vec<(Ns, Ns, Ns)>| {
        if run.len() >= min_kernels.max(1) {
            let busy = merge(run.iter().map(|r| (r.0, r.1)));
            let (start, end) = (busy[0].0, busy[busy.len() - 1].1);
            out.push(Stretch {
                start,
                end,
                kernels: run.len(),
                // Kernels of several streams and launches of several threads overlap: the
                // sums can pass i64 on long spans.
                kernel_ns: run.iter().map(|r| r.1 - r.0).fold(0, Ns::saturating_add),
                launch_ns: run.iter().map(|r| r.2).fold(0, Ns::saturating_add),
                idle: subtract(&[(start, end)], &busy),
            });
        }
        run.clear();
    };
    for &(a, b, launch) in ops {
        match launch {
            Some(l) => run.push((a, b, l)),
            None => flush(&mut run),
        }
    }
    flush(&mut run);
    out
}

/// Runs the rule.
pub fn run(analyzed: &Analyzed, facts: &Facts, config: &Config) -> Vec<Draft> {
    let trace = analyzed.trace();
    let max = (config.max_kernel_us * 1e3) as Ns;
    let mut drafts = Vec::new();
    for (&(rank, device), ops) in &facts.device_work {
        let list: Vec<(Ns, Ns, Option<Ns>)> = ops
            .iter()
            .map(|&i| {
                let s = &trace.spans[i as usize];
                let launch = facts
                    .launch_of
                    .get(&i)
                    .map(|&l| trace.spans[l as usize].duration());
                let bound = s.level == Level::DeviceKernel
                    && s.duration() <= max
                    && launch.is_some_and(|l| l >= s.duration());
                (s.start, s.end, if bound { launch } else { None })
            })
            .collect();
        let found = stretches(&list, config.min_kernels);
        if found.is_empty() {
            continue;
        }
        let kernels: usize = found.iter().map(|s| s.kernels).sum();
        let kernel_ns: Ns = found
            .iter()
            .map(|s| s.kernel_ns)
            .fold(0, Ns::saturating_add);
        let launch_ns: Ns = found
            .iter()
            .map(|s| s.launch_ns)
            .fold(0, Ns::saturating_add);
        let idle: Vec<(Ns, Ns)> = found.iter().flat_map(|s| s.idle.iter().copied()).collect();
        let mut ranked: Vec<&Stretch> = found.iter().collect();
        ranked.sort_by_key(|s| std::cmp::Reverse(length(&s.idle)));
        let evidence = ranked
            .iter()
            .map(|s| Evidence {
                kind: "stretch".into(),
                rank: rank_number(trace, rank),
                start_ns: s.start,
                end_ns: s.end,
                name: format!(
                    "{} kernels, mean {} run vs {} launch; device idle {}",
                    s.kernels,
                    human(s.kernel_ns / s.kernels as Ns),
                    human(s.launch_ns / s.kernels as Ns),
                    human(length(&s.idle))
                ),
            })
            .collect();
        drafts.push(Draft {
            message: format!(
                "Device {device} of rank {} ran {kernels} short kernels in {} launch-bound \
                 stretches: mean kernel {} vs mean launch call {}; the device idled {} between \
                 them.",
                rank_number(trace, rank),
                found.len(),
                human(kernel_ns / kernels as Ns),
                human(launch_ns / kernels as Ns),
                human(length(&merge(idle.iter().copied())))
            ),
            intervals: facts.clock.intervals(rank, idle),
            evidence,
            advice: "Launch fewer, larger kernels: capture the loop in a CUDA graph \
                     (torch.cuda.graphs / torch.compile(mode=\"reduce-overhead\")), fuse \
                     element-wise ops (torch.compile), or raise the work per kernel (batch size)."
                .into(),
        });
    }
    drafts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_over_long_overlapping_kernels_saturate() {
        // Two kernels of 2^62 ns on two streams, each behind a launch as long: 2^63 ns of
        // kernel and launch time, one past i64.
        let long: Ns = 1 << 62;
        let ops = [(-long, 0, Some(long)), (-long, 0, Some(long))];
        let found = stretches(&ops, 2);
        assert_eq!(found.len(), 1);
        assert_eq!((found[0].kernel_ns, found[0].launch_ns), (Ns::MAX, Ns::MAX));
    }

    #[test]
    fn stretches_need_enough_consecutive_launch_bound_kernels() {
        // 3 launch-bound kernels 10 ns long, 5 ns apart, then a long one, then 2 more.
        let ops = vec![
            (0, 10, Some(15)),
            (15, 25, Some(15)),
            (30, 40, Some(15)),
            (40, 1000, None),
            (1000, 1010, Some(20)),
            (1020, 1030, Some(20)),
        ];
        let s = stretches(&ops, 3);
        assert_eq!(s.len(), 1);
        assert_eq!((s[0].start, s[0].end, s[0].kernels), (0, 40, 3));
        assert_eq!(s[0].idle, vec![(10, 15), (25, 30)]);
        // Conservation: busy + idle = stretch.
        assert_eq!(s[0].kernel_ns + length(&s[0].idle), s[0].end - s[0].start);
        assert_eq!(stretches(&ops, 2).len(), 2);
    }
}
