//! Rule `small-copies`: many small host<->device copies where one large copy would do (Zins,
//! section 4.5.5: one large transfer instead of a batch per execution; every transfer pays a
//! fixed setup cost, so small ones run far below the link's bandwidth).
//!
//! A copy is *small* when its size (the `bytes`/`Bytes` attribute) is at most
//! [`Config::max_bytes`]; copies without a size count as small when they ran at most
//! [`Config::max_unsized_us`]. Per device (rank, device index) and direction (host-to-device,
//! device-to-host; [`crate::device_time::memory::copy_direction`] or the OpenCL layer's `direction`
//! attribute), a finding needs at least [`Config::min_copies`] small copies. A *burst* is a run
//! of small copies with no other device op of the device between them. Time at stake: the
//! union of the bursts, each from its first copy's start to its last copy's end (the copies
//! and the device's idle time between them, which one large copy would not have). Evidence: the
//! longest bursts first.

use serde::{Deserialize, Serialize};
use strato_trace::{Level, Ns};

use super::{human, rank_number, Draft, Evidence, Facts};
use crate::analyzed::Analyzed;
use crate::device_time::gpu_time::{length, merge};
use crate::device_time::memory::{arg_i64, span_copy_direction, CopyDirection};

/// The rule id.
pub const ID: &str = "small-copies";

/// Thresholds of [`run`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub enabled: bool,
    /// Largest small copy (bytes). Default 64 KiB (docs/advise.md#small-copies).
    pub max_bytes: i64,
    /// A copy of unknown size is small when it ran at most this long (us).
    pub max_unsized_us: f64,
    /// Fewest small copies of one direction on one device that make a finding.
    pub min_copies: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            enabled: true,
            max_bytes: 64 * 1024,
            max_unsized_us: 10.0,
            min_copies: 64,
        }
    }
}

/// Runs the rule.
pub fn run(analyzed: &Analyzed, facts: &Facts, config: &Config) -> Vec<Draft> {
    let trace = analyzed.trace();
    let max_unsized = (config.max_unsized_us * 1e3) as Ns;
    let mut drafts = Vec::new();
    for (&(rank, device), ops) in &facts.device_work {
        for dir in [CopyDirection::HostToDevice, CopyDirection::DeviceToHost] {
            // Bursts: runs of consecutive small copies of this direction.
            let mut bursts: Vec<Vec<u32>> = Vec::new();
            let mut open = false;
            let mut small = 0usize;
            let mut bytes_known: i64 = 0;
            for &i in ops {
                let s = &trace.spans[i as usize];
                let is_small =
                    s.level == Level::DeviceCopy && span_copy_direction(trace, s) == dir && {
                        match arg_i64(trace.args_text(s.args).as_deref(), &["bytes", "Bytes"]) {
                            Some(b) => {
                                let ok = b <= config.max_bytes;
                                if ok {
                                    bytes_known += b;
                                }
                                ok
                            }
                            None => s.duration() <= max_unsized,
                        }
                    };
                if is_small {
                    small += 1;
                    if open {
                        bursts.last_mut().expect("open burst").push(i);
                    } else {
                        bursts.push(vec![i]);
                        open = true;
                    }
                } else {
                    open = false;
                }
            }
            if small < config.min_copies.max(1) {
                continue;
            }
            // At stake: each burst from its first copy's start to its last copy's end — the
            // copies and the device's idle time between them (no other op runs there).
            let intervals: Vec<(Ns, Ns)> = bursts
                .iter()
                .map(|b| {
                    (
                        trace.spans[b[0] as usize].start,
                        trace.spans[b[b.len() - 1] as usize].end,
                    )
                })
                .collect();
            let copy_ns = length(&merge(bursts.iter().flatten().map(|&i| {
                let s = &trace.spans[i as usize];
                (s.start, s.end)
            })));
            bursts.sort_by_key(|b| std::cmp::Reverse(b.len()));
            let evidence = bursts
                .iter()
                .map(|b| {
                    let first = &trace.spans[b[0] as usize];
                    let last = &trace.spans[b[b.len() - 1] as usize];
                    Evidence {
                        kind: "copy".into(),
                        rank: rank_number(trace, rank),
                        start_ns: first.start,
                        end_ns: last.end,
                        name: format!("{} small {} copies in a row", b.len(), dir.label()),
                    }
                })
                .collect();
            drafts.push(Draft {
                message: format!(
                    "Device {device} of rank {} ran {small} small {} copies (at most {} bytes \
                     each, {} bytes known in all) in {} bursts: {} of copying spread over {}.",
                    rank_number(trace, rank),
                    dir.label(),
                    config.max_bytes,
                    bytes_known,
                    bursts.len(),
                    human(copy_ns),
                    human(length(&merge(intervals.iter().copied())))
                ),
                intervals: facts.clock.intervals(rank, intervals),
                evidence,
                advice: "Copy in one large transfer instead of many small ones: gather the \
                         pieces in one (pinned) host buffer and copy it once, or copy the whole \
                         dataset to the device once and slice batches there (Zins 4.5.5)."
                    .into(),
            });
        }
    }
    drafts
}
