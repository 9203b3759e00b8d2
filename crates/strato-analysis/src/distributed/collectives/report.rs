//! The analysis ([`collectives`], [`collectives_of_summaries`]): instances, per-rank totals,
//! clock alignment, stragglers, and the tables by size bucket and by exact size with the
//! devices' link bandwidths.

use rustc_hash::FxHashMap;
use serde::Serialize;
use strato_trace::{Ns, RankId, Trace};

use super::calls::{rank_summaries, RankCollectives};
use super::kinds::CollectiveKind;
use super::matching::{match_collectives, measure, CollectiveInstance};
use super::stragglers::{straggler, straggler_cause, CauseRequest, Straggler, StragglerCause};
use crate::distributed::clock_align::ClockAlignment;

/// Options of [`collectives`].
#[derive(Debug, Clone)]
pub struct CollectivesOptions {
    /// How many of the worst late arrivals get a cause.
    pub stragglers: usize,
}

impl Default for CollectivesOptions {
    fn default() -> Self {
        CollectivesOptions { stragglers: 5 }
    }
}

/// One rank's totals over the instances.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankSummary {
    pub rank: RankId,
    pub job_rank: i64,
    /// Collective kernels of the rank.
    pub collectives: usize,
    /// Of them, in complete instances.
    pub complete: usize,
    /// Complete instances where it arrived last (ties: the later input rank is last).
    pub last_arrivals: usize,
    /// Its waits summed over complete instances; `None` when it has none.
    pub wait_ns: Option<Ns>,
    /// Its kernels' time after the last arrival, over complete instances: with `wait_ns`, the
    /// whole kernel time of those instances.
    pub transfer_part_ns: Option<Ns>,
    /// The others' waits in the instances where it arrived last; `None` when it has no
    /// complete instance.
    pub imposed_wait_ns: Option<Ns>,
    /// Kernel time of all its collective kernels.
    pub kernel_ns: Ns,
    /// The clock shift applied to it.
    pub shift_ns: Ns,
}

/// Instances of one kind and size bucket.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizeGroup {
    pub kind: CollectiveKind,
    /// Lower bound of the power-of-two size bucket; `None`: sizes unknown.
    pub bucket_bytes: Option<u64>,
    pub count: usize,
    pub complete: usize,
    pub bytes_total: Option<u64>,
    pub transfer_ns_total: Option<Ns>,
    /// Median busbw over the complete instances that have one.
    pub busbw_gbps_median: Option<f64>,
    /// The devices' per-direction link (NVLink) bandwidth, when the device model is known.
    pub link_gbps: Option<f64>,
}

/// Instances of one kind and one exact message size (what TraceLens and NCCL-tests tabulate).
/// Times and bandwidths over the complete instances that have a transfer; bandwidths in
/// decimal GB/s (10^9 B/s).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExactSizeGroup {
    pub kind: CollectiveKind,
    /// Message bytes of each instance; `None`: sizes unknown.
    pub bytes: Option<u64>,
    pub count: usize,
    pub complete: usize,
    /// Mean and median transfer time (last arrival to the last member's end).
    pub transfer_ns_mean: Option<f64>,
    pub transfer_ns_median: Option<f64>,
    pub algbw_gbps_median: Option<f64>,
    pub busbw_gbps_median: Option<f64>,
}

/// The analysis: instances, per-rank totals, clock alignment, stragglers, size groups.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CollectivesReport {
    /// From the first arrival to the last kernel end (aligned clock); `None` without
    /// collectives.
    pub window: Option<(Ns, Ns)>,
    pub instances: Vec<CollectiveInstance>,
    pub ranks: Vec<RankSummary>,
    pub clock: ClockAlignment,
    pub stragglers: Vec<Straggler>,
    pub by_size: Vec<SizeGroup>,
    /// By (kind, exact message bytes), in that order.
    pub by_exact_size: Vec<ExactSizeGroup>,
    /// Index in `ranks` of the rank imposing the most wait, when any waited.
    pub worst_rank: Option<usize>,
}

/// Per-direction NVLink bandwidth per GPU (GB/s) of known device models: V100 SXM2 6 links x
/// 25 GB/s, A100 SXM 12 x 25, H100 SXM 18 x 25 (NVIDIA datasheets). PCIe boards: `None` (the
/// link depends on the system).
pub fn link_bandwidth_gbps(device_name: &str) -> Option<f64> {
    let n = device_name.to_ascii_uppercase();
    if n.contains("PCIE") {
        return None;
    }
    if n.contains("V100") {
        Some(150.0)
    } else if n.contains("A100") {
        Some(300.0)
    } else if n.contains("H100") || n.contains("H200") {
        Some(450.0)
    } else {
        None
    }
}

/// The device of a rank and its link bandwidth: what the size groups read of a trace's
/// devices (kept per rank when ranks are summarised one by one).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceLink {
    pub rank: RankId,
    pub device: i64,
    /// [`link_bandwidth_gbps`] of the device's name; `None` when unnamed or unknown.
    pub link_gbps: Option<f64>,
}

/// The devices of `trace` in its order, with their link bandwidths.
pub fn device_links(trace: &Trace) -> Vec<DeviceLink> {
    trace
        .devices
        .iter()
        .filter_map(|d| {
            Some(DeviceLink {
                rank: d.rank?,
                device: d.index,
                link_gbps: d.name.as_deref().and_then(link_bandwidth_gbps),
            })
        })
        .collect()
}

/// Runs the whole analysis (see the module docs) on a trace held whole.
pub fn collectives(trace: &Trace, options: &CollectivesOptions) -> CollectivesReport {
    collectives_of_summaries(
        rank_summaries(trace),
        &device_links(trace),
        options,
        |requests| {
            requests
                .iter()
                .map(|r| straggler_cause(trace, r.rank, r.call, r.window_start, r.window_end))
                .collect()
        },
    )
}

/// The analysis from per-rank summaries alone ([`rank_summaries`], [`device_links`]): what the
/// rank-by-rank import keeps. The causes of the worst late arrivals are asked of `causes`
/// once, for all of them together (one [`StragglerCause`] per request, in order), so a caller
/// that dropped the ranks' events re-reads only the late ranks.
pub fn collectives_of_summaries(
    ranks: Vec<RankCollectives>,
    links: &[DeviceLink],
    options: &CollectivesOptions,
    causes: impl FnOnce(&[CauseRequest<'_>]) -> Vec<StragglerCause>,
) -> CollectivesReport {
    let mut instances = match_collectives(&ranks);
    let clock = measure(&ranks, &mut instances);
    let window =
        instances
            .iter()
            .flat_map(|i| i.members.iter())
            .fold(None, |acc: Option<(Ns, Ns)>, m| match acc {
                None => Some((m.start, m.end)),
                Some((a, b)) => Some((a.min(m.start), b.max(m.end))),
            });
    let mut summaries: Vec<RankSummary> = ranks
        .iter()
        .map(|r| RankSummary {
            rank: r.rank,
            job_rank: r.job_rank,
            collectives: r.calls.len(),
            complete: 0,
            last_arrivals: 0,
            wait_ns: None,
            transfer_part_ns: None,
            imposed_wait_ns: None,
            kernel_ns: r.calls.iter().map(|c| c.end - c.start).sum(),
            shift_ns: clock.shift_of(r.rank),
        })
        .collect();
    let index_of: FxHashMap<RankId, usize> = summaries
        .iter()
        .enumerate()
        .map(|(i, s)| (s.rank, i))
        .collect();
    for inst in instances.iter().filter(|i| i.complete) {
        let imposed: Ns = inst.members.iter().filter_map(|m| m.wait_ns).sum();
        for m in &inst.members {
            let s = &mut summaries[index_of[&m.rank]];
            s.complete += 1;
            let wait = m.wait_ns.unwrap_or(0);
            *s.wait_ns.get_or_insert(0) += wait;
            *s.transfer_part_ns.get_or_insert(0) += (m.end - m.start) - wait;
            s.imposed_wait_ns.get_or_insert(0);
            if Some(m.rank) == inst.last_rank {
                s.last_arrivals += 1;
                *s.imposed_wait_ns.get_or_insert(0) += imposed;
            }
        }
    }
    let worst_rank = summaries
        .iter()
        .enumerate()
        .filter(|(_, s)| s.imposed_wait_ns.unwrap_or(0) > 0)
        .max_by_key(|(i, s)| (s.imposed_wait_ns, std::cmp::Reverse(*i)))
        .map(|(i, _)| i);
    // The worst late arrivals.
    let mut candidates: Vec<(usize, Ns)> = instances
        .iter()
        .enumerate()
        .filter(|(_, i)| i.complete && i.members.len() >= 2)
        .map(|(k, i)| (k, i.members.iter().filter_map(|m| m.wait_ns).sum()))
        .filter(|(_, w)| *w > 0)
        .collect();
    candidates.sort_by_key(|(k, w)| (std::cmp::Reverse(*w), *k));
    let late: Vec<(Straggler, CauseRequest<'_>)> = candidates
        .into_iter()
        .take(options.stragglers)
        .filter_map(|(k, imposed)| straggler(&ranks, &instances, k, imposed, &clock))
        .collect();
    let requests: Vec<CauseRequest<'_>> = late.iter().map(|(_, r)| r.clone()).collect();
    let found = causes(&requests);
    assert_eq!(
        found.len(),
        requests.len(),
        "one straggler cause per request"
    );
    let stragglers = late
        .into_iter()
        .zip(found)
        .map(|((s, _), cause)| Straggler { cause, ..s })
        .collect();
    let by_size = size_groups(links, &instances);
    let by_exact_size = exact_size_groups(&instances);
    CollectivesReport {
        window,
        instances,
        ranks: summaries,
        clock,
        stragglers,
        by_size,
        by_exact_size,
        worst_rank,
    }
}

/// Median of `values` (sorted here); `None` when empty.
fn median(values: &mut [f64]) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

fn exact_size_groups(instances: &[CollectiveInstance]) -> Vec<ExactSizeGroup> {
    // (count, complete, transfers, algbws, busbws) per (kind, bytes).
    type Acc = (usize, usize, Vec<f64>, Vec<f64>, Vec<f64>);
    let mut groups: std::collections::BTreeMap<(CollectiveKind, Option<u64>), Acc> =
        Default::default();
    for inst in instances {
        let (count, complete, transfers, algbw, busbw) =
            groups.entry((inst.kind, inst.bytes)).or_default();
        *count += 1;
        if inst.complete {
            *complete += 1;
            if let Some(t) = inst.transfer_ns {
                transfers.push(t as f64);
            }
        }
        algbw.extend(inst.algbw_gbps);
        busbw.extend(inst.busbw_gbps);
    }
    groups
        .into_iter()
        .map(
            |((kind, bytes), (count, complete, mut transfers, mut algbw, mut busbw))| {
                ExactSizeGroup {
                    kind,
                    bytes,
                    count,
                    complete,
                    transfer_ns_mean: (!transfers.is_empty())
                        .then(|| transfers.iter().sum::<f64>() / transfers.len() as f64),
                    transfer_ns_median: median(&mut transfers),
                    algbw_gbps_median: median(&mut algbw),
                    busbw_gbps_median: median(&mut busbw),
                }
            },
        )
        .collect()
}

fn size_groups(links: &[DeviceLink], instances: &[CollectiveInstance]) -> Vec<SizeGroup> {
    let link = |inst: &CollectiveInstance| {
        inst.members.iter().find_map(|m| {
            links
                .iter()
                .find(|d| d.rank == m.rank && d.device == m.device)
                .and_then(|d| d.link_gbps)
        })
    };
    let mut groups: std::collections::BTreeMap<
        (CollectiveKind, Option<u64>),
        (SizeGroup, Vec<f64>),
    > = Default::default();
    for inst in instances {
        let bucket = inst
            .bytes
            .filter(|b| *b > 0)
            .map(|b| 1u64 << (63 - b.leading_zeros()));
        let entry = groups.entry((inst.kind, bucket)).or_insert_with(|| {
            (
                SizeGroup {
                    kind: inst.kind,
                    bucket_bytes: bucket,
                    count: 0,
                    complete: 0,
                    bytes_total: None,
                    transfer_ns_total: None,
                    busbw_gbps_median: None,
                    link_gbps: None,
                },
                Vec::new(),
            )
        });
        let (g, busbw) = entry;
        g.count += 1;
        if let Some(b) = inst.bytes {
            *g.bytes_total.get_or_insert(0) += b;
        }
        if inst.complete {
            g.complete += 1;
        }
        if let Some(t) = inst.transfer_ns {
            *g.transfer_ns_total.get_or_insert(0) += t;
        }
        if let Some(b) = inst.busbw_gbps {
            busbw.push(b);
        }
        if g.link_gbps.is_none() {
            g.link_gbps = link(inst);
        }
    }
    groups
        .into_values()
        .map(|(mut g, mut busbw)| {
            busbw.sort_by(f64::total_cmp);
            if !busbw.is_empty() {
                let n = busbw.len();
                g.busbw_gbps_median = Some(if n % 2 == 1 {
                    busbw[n / 2]
                } else {
                    (busbw[n / 2 - 1] + busbw[n / 2]) / 2.0
                });
            }
            g
        })
        .collect()
}
