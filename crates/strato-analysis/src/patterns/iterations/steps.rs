//! Mined iterations against `ProfilerStep#N` annotations ([`check_against_steps`]): ground
//! truth for the miner, never its input.

use rustc_hash::FxHashMap;
use serde::Serialize;
use strato_trace::{Level, Ns, RankId, Trace, TrackKind};

use super::report::LoopReport;

/// A `ProfilerStep#N` annotation seen from the device: the main-stream ops launched by the
/// runtime calls inside it (by correlation).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepWindow {
    pub name: String,
    pub cpu_start_ns: Ns,
    pub cpu_end_ns: Ns,
    /// First start and last end of the step's ops on the stream.
    pub device_start_ns: Ns,
    pub device_end_ns: Ns,
    pub ops: usize,
}

/// Mined boundaries against `ProfilerStep#N` (ground truth, never input).
///
/// A mined boundary is an iteration's start. It is *within* step j when
/// `device_start(j) <= start < device_end(j)`; each step takes at most one boundary (the first);
/// a boundary in no step, or in an already taken step, is a false positive. *Exact*: the
/// boundary is the step's first op.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepCheck {
    pub steps: usize,
    pub mined: usize,
    pub matched: usize,
    pub exact: usize,
    pub precision: f64,
    pub recall: f64,
    pub step_windows: Vec<StepWindow>,
}

/// The device windows of the `ProfilerStep#N` spans of a rank on one stream. Steps that
/// launched nothing on it are dropped (outside the window the kernels cover).
pub fn step_windows(trace: &Trace, rank: RankId, device: i64, stream: i64) -> Vec<StepWindow> {
    let of_rank = |s: &&strato_trace::Span| trace.track(s.track).rank == rank;
    let host = |s: &&strato_trace::Span| !trace.track(s.track).is_device();
    let steps = (trace.spans.iter().filter(of_rank).filter(host))
        .filter(|s| trace.str(s.name).starts_with("ProfilerStep#"))
        .map(|s| (s.start, s.end, trace.str(s.name).to_string()))
        .collect();
    let api = (trace.spans.iter().filter(of_rank).filter(host))
        .filter(|s| s.level == Level::AcceleratorApi)
        .filter_map(|s| Some((s.start, s.correlation.get()?)));
    let queue = TrackKind::DeviceQueue {
        device,
        queue: stream,
    };
    let ops = (trace.spans.iter().filter(of_rank))
        .filter(|s| s.level.is_device_op() && s.level != Level::DeviceSync)
        .filter(|s| trace.track(s.track).kind == queue)
        .map(|s| (s.start, s.end, s.correlation.get()));
    windows_of_steps(steps, api, ops)
}

/// [`step_windows`] of one rank's `ProfilerStep#N` host spans (`steps`: start, end, name, in
/// trace order), its host accelerator API calls with a correlation (`api`: start,
/// correlation, in trace order: a later call of a correlation wins) and the device ops of the
/// stream (`ops`: start, end, correlation; any order).
pub(super) fn windows_of_steps(
    mut steps: Vec<(Ns, Ns, String)>,
    api: impl Iterator<Item = (Ns, u64)>,
    ops: impl Iterator<Item = (Ns, Ns, Option<u64>)>,
) -> Vec<StepWindow> {
    steps.sort_by_key(|s| s.0);
    let mut step_of: FxHashMap<u64, usize> = FxHashMap::default();
    for (start, c) in api {
        let k = steps.partition_point(|s| s.0 <= start);
        if k > 0 && start < steps[k - 1].1 {
            step_of.insert(c, k - 1);
        }
    }
    let mut windows: Vec<Option<(Ns, Ns, usize)>> = vec![None; steps.len()];
    for (start, end, correlation) in ops {
        let Some(&k) = correlation.and_then(|c| step_of.get(&c)) else {
            continue;
        };
        let w = windows[k].get_or_insert((start, end, 0));
        w.0 = w.0.min(start);
        w.1 = w.1.max(end);
        w.2 += 1;
    }
    steps
        .into_iter()
        .zip(windows)
        .filter_map(|((cs, ce, name), w)| {
            w.map(|(ds, de, n)| StepWindow {
                name,
                cpu_start_ns: cs,
                cpu_end_ns: ce,
                device_start_ns: ds,
                device_end_ns: de,
                ops: n,
            })
        })
        .collect()
}

/// Compares a device's mined iteration starts (all loops) with its step windows.
pub fn check_against_steps(trace: &Trace, loops: &[&LoopReport]) -> Option<StepCheck> {
    let first = loops.first()?;
    let windows = step_windows(trace, RankId(first.rank_index), first.device, first.stream);
    check_with_windows(windows, loops)
}

/// [`check_against_steps`] with the stream's step windows given.
pub(super) fn check_with_windows(
    windows: Vec<StepWindow>,
    loops: &[&LoopReport],
) -> Option<StepCheck> {
    if windows.is_empty() {
        return None;
    }
    let mut starts: Vec<Ns> = loops
        .iter()
        .flat_map(|l| l.iterations.iter().map(|i| i.start_ns))
        .collect();
    starts.sort_unstable();
    let mut taken = vec![false; windows.len()];
    let (mut matched, mut exact) = (0usize, 0usize);
    for &s in &starts {
        if let Some(k) = windows
            .iter()
            .position(|w| w.device_start_ns <= s && s < w.device_end_ns)
        {
            if !taken[k] {
                taken[k] = true;
                matched += 1;
                if windows[k].device_start_ns == s {
                    exact += 1;
                }
            }
        }
    }
    Some(StepCheck {
        steps: windows.len(),
        mined: starts.len(),
        matched,
        exact,
        precision: if starts.is_empty() {
            0.0
        } else {
            matched as f64 / starts.len() as f64
        },
        recall: matched as f64 / windows.len() as f64,
        step_windows: windows,
    })
}
