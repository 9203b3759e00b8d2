//! Rule `copy-overlap`: host<->device copies not overlapped with compute (the NVIDIA Visual
//! Profiler's "Low Memcpy/Compute Overlap" guided-analysis rule).
//!
//! Per device (rank, device index): the union of its host-to-device and device-to-host copies
//! ([`crate::device_time::memory::span_copy_direction`]: by name, else the OpenCL layer's
//! `direction` attribute) minus the union of its compute kernels
//! ([`crate::device_time::gpu_time::kernel_class`] `Computation`). That remainder is the copy time
//! the device spent doing nothing else: the time at stake. Devices with no compute kernel at all
//! are skipped (there is nothing to overlap with). Conservation: per device, exposed copy
//! time + overlapped copy time = copy time (tested).

use serde::{Deserialize, Serialize};
use strato_trace::{Level, Ns};

use super::{human, rank_number, span_evidence, subtract, Draft, Facts};
use crate::analyzed::Analyzed;
use crate::device_time::gpu_time::{length, merge, KernelClass, KernelClasses};
use crate::device_time::memory::{span_copy_direction, CopyDirection};

/// The rule id.
pub const ID: &str = "copy-overlap";

/// Switches of [`run`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub enabled: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config { enabled: true }
    }
}

/// Copy intervals of one device split into (exposed, overlapped) with compute.
pub fn split(copies: &[(Ns, Ns)], compute: &[(Ns, Ns)]) -> (Vec<(Ns, Ns)>, Ns) {
    let copies = merge(copies.iter().copied());
    let exposed = subtract(&copies, compute);
    let overlapped = length(&copies) - length(&exposed);
    (exposed, overlapped)
}

/// Runs the rule.
pub fn run(analyzed: &Analyzed, facts: &Facts, _config: &Config) -> Vec<Draft> {
    let trace = analyzed.trace();
    let mut drafts = Vec::new();
    let mut classes = KernelClasses::default();
    for (&(rank, device), ops) in &facts.device_work {
        let mut copies = Vec::new();
        let mut copy_spans = Vec::new();
        let mut compute = Vec::new();
        for &i in ops {
            let s = &trace.spans[i as usize];
            match s.level {
                Level::DeviceCopy
                    if matches!(
                        span_copy_direction(trace, s),
                        CopyDirection::HostToDevice | CopyDirection::DeviceToHost
                    ) =>
                {
                    copies.push((s.start, s.end));
                    copy_spans.push(i);
                }
                Level::DeviceKernel if classes.of(trace, s.name) == KernelClass::Computation => {
                    compute.push((s.start, s.end))
                }
                _ => {}
            }
        }
        if copies.is_empty() || compute.is_empty() {
            continue;
        }
        let compute = merge(compute.into_iter());
        let (exposed, overlapped) = split(&copies, &compute);
        let exposed_ns = length(&exposed);
        if exposed_ns == 0 {
            continue;
        }
        // The copies with the most exposed time first.
        let mut ranked: Vec<(Ns, u32)> = copy_spans
            .iter()
            .map(|&i| {
                let s = &trace.spans[i as usize];
                let lo = compute.partition_point(|c| c.1 <= s.start);
                let hi = compute.partition_point(|c| c.0 < s.end);
                (length(&subtract(&[(s.start, s.end)], &compute[lo..hi])), i)
            })
            .collect();
        ranked.sort_by_key(|&(exposed, i)| (std::cmp::Reverse(exposed), super::time_key(trace, i)));
        let evidence = ranked
            .iter()
            .filter(|r| r.0 > 0)
            .take(super::MAX_EVIDENCE)
            .map(|&(t, i)| {
                let name = trace.str(trace.spans[i as usize].name);
                span_evidence(
                    trace,
                    "copy",
                    i,
                    format!("{name}: {} not overlapped", human(t)),
                )
            })
            .collect();
        drafts.push(Draft {
            intervals: facts.clock.intervals(rank, exposed),
            evidence,
            message: format!(
                "{} host<->device copies on device {device} of rank {} ran for {} with no \
                 compute kernel beside them ({} overlapped).",
                copy_spans.len(),
                rank_number(trace, rank),
                human(exposed_ns),
                human(overlapped)
            ),
            advice: "Overlap copies with compute: copy from pinned memory with non_blocking=True \
                     on a separate stream (or let the DataLoader prefetch to the device), and \
                     start the next batch's copy while the current step computes."
                .into(),
        });
    }
    drafts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposed_plus_overlapped_is_the_copy_time() {
        let copies = vec![(0, 10), (5, 20), (30, 40)];
        let compute = vec![(8, 12), (35, 50)];
        let (exposed, overlapped) = split(&copies, &compute);
        assert_eq!(exposed, vec![(0, 8), (12, 20), (30, 35)]);
        assert_eq!(length(&exposed) + overlapped, 30);
    }
}
