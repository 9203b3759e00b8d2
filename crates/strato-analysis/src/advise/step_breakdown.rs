//! Rule `step-breakdown`: per-step time breakdown in the style of XProf's step-time graph
//! (input, host compute, kernel launch, device compute, device copy, communication, idle),
//! naming each step's bottleneck.
//!
//! Steps are the PyTorch profiler's `ProfilerStep#N` spans ([`crate::scope::is_step_name`]) on
//! a CPU thread. Each instant of a step `[start, end)` gets exactly one category, by priority:
//! 1. `device compute`: a computation kernel of the step's rank runs
//!    ([`crate::device_time::gpu_time::kernel_class`] `Computation`);
//! 2. `communication`: else a communication kernel (NCCL, ...) runs;
//! 3. `input`: else a host-to-device copy runs;
//! 4. `device copy`: else another copy or set runs;
//! 5. the device is idle: what the step's thread does there — `input` inside a DataLoader
//!    span, `launch` in an accelerator API call that is not a stall, `idle` in a stall (the
//!    host waits for a device with nothing queued) or outside any span, else `host compute`.
//!
//! Conservation: per step, the categories add up to the step's length (tested). The
//! bottleneck of a step is its largest category other than device compute when that reaches
//! [`Config::bottleneck_pct`] of the step (XProf's "moderately input-bound" threshold), else
//! `device compute`. One finding per bottleneck category other than device compute, whose
//! time at stake is that category's time in the steps it bottlenecks.

use serde::{Deserialize, Serialize};
use strato_trace::{Level, Ns, TrackKind};

use super::{human, intersect, rank_number, subtract, Draft, Evidence, Facts};
use crate::analyzed::Analyzed;
use crate::device_time::gpu_time::{length, merge, KernelClass, KernelClasses};
use crate::device_time::memory::{span_copy_direction, CopyDirection};
use crate::scope::{effective_level, flatten_innermost, is_step_name};

/// The rule id.
pub const ID: &str = "step-breakdown";

/// The categories, in report order.
pub const CATEGORIES: [&str; 7] = [
    "input",
    "host compute",
    "launch",
    "device compute",
    "device copy",
    "communication",
    "idle",
];

/// Thresholds of [`run`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub enabled: bool,
    /// A category other than device compute is a step's bottleneck from this share (percent).
    pub bottleneck_pct: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            enabled: true,
            bottleneck_pct: 5.0,
        }
    }
}

/// One step's breakdown.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepBreakdown {
    pub rank: i64,
    pub name: String,
    pub start_ns: Ns,
    pub end_ns: Ns,
    /// `(category, time)` in [`CATEGORIES`] order; adds up to `end_ns - start_ns`.
    pub parts: Vec<(&'static str, Ns)>,
    pub bottleneck: &'static str,
    #[serde(skip)]
    pub intervals: Vec<(&'static str, Vec<(Ns, Ns)>)>,
    /// The rank's index in the trace (`rank` is the number users see, which two sources may
    /// share).
    #[serde(skip)]
    pub rank_index: u32,
}

fn index(category: &str) -> usize {
    CATEGORIES
        .iter()
        .position(|c| *c == category)
        .expect("known category")
}

/// Runs the rule: the steps and the findings. `Err` when the trace has no steps.
pub fn run(
    analyzed: &Analyzed,
    facts: &Facts,
    config: &Config,
) -> Result<(Vec<StepBreakdown>, Vec<Draft>), String> {
    let trace = analyzed.trace();
    let steps: Vec<u32> = (0..trace.spans.len() as u32)
        .filter(|&i| {
            let s = &trace.spans[i as usize];
            matches!(trace.track(s.track).kind, TrackKind::Thread { .. })
                && is_step_name(trace.str(s.name))
        })
        .collect();
    if steps.is_empty() {
        return Err("no steps (ProfilerStep#N spans) in the trace".into());
    }
    if facts.device_work.is_empty() {
        return Err("no device work in the trace (nothing to break down per step)".into());
    }
    // Per device work list (sorted by start), the running latest end: a step reads only the
    // ops from the first one whose running end passes the step's start, instead of every op
    // that started before the step's end (which made the rule quadratic in steps x ops).
    let latest_ends: std::collections::BTreeMap<(u32, i64), Vec<Ns>> = facts
        .device_work
        .iter()
        .map(|(&key, ops)| {
            let ends = ops
                .iter()
                .scan(Ns::MIN, |latest, &o| {
                    *latest = (*latest).max(trace.spans[o as usize].end);
                    Some(*latest)
                })
                .collect();
            (key, ends)
        })
        .collect();
    let mut out = Vec::new();
    let mut index_cache = super::gpu_idle::ThreadIndex::new(trace);
    let mut classes = KernelClasses::default();
    for &step in &steps {
        let s = &trace.spans[step as usize];
        let (a, b) = (s.start, s.end);
        if b <= a {
            continue;
        }
        let rank = trace.track(s.track).rank.0;
        if facts
            .device_work
            .range((rank, i64::MIN)..=(rank, i64::MAX))
            .next()
            .is_none()
        {
            continue;
        }
        let mut sets: [Vec<(Ns, Ns)>; 4] = Default::default();
        let rank_work = facts.device_work.range((rank, i64::MIN)..=(rank, i64::MAX));
        let rank_ends = latest_ends.range((rank, i64::MIN)..=(rank, i64::MAX));
        for ((_, ops), (_, ends)) in rank_work.zip(rank_ends) {
            // Ops before `from` end by `a` (skipped below anyway); ops from `upto` start at `b`.
            let from = ends.partition_point(|&end| end <= a);
            let upto = ops.partition_point(|&o| trace.spans[o as usize].start < b);
            for &o in ops[from.min(upto)..upto].iter() {
                let d = &trace.spans[o as usize];
                if d.end <= a {
                    continue;
                }
                let k = match d.level {
                    Level::DeviceKernel => match classes.of(trace, d.name) {
                        KernelClass::Communication => 1,
                        _ => 0,
                    },
                    Level::DeviceCopy
                        if span_copy_direction(trace, d) == CopyDirection::HostToDevice =>
                    {
                        2
                    }
                    _ => 3,
                };
                sets[k].push((d.start.max(a), d.end.min(b)));
            }
        }
        let mut taken: Vec<(Ns, Ns)> = Vec::new();
        let mut cats: Vec<Vec<(Ns, Ns)>> = vec![Vec::new(); CATEGORIES.len()];
        for (k, cat) in [
            (0, "device compute"),
            (1, "communication"),
            (2, "input"),
            (3, "device copy"),
        ] {
            let own = subtract(&merge(sets[k].drain(..)), &taken);
            taken = merge(taken.iter().copied().chain(own.iter().copied()));
            cats[index(cat)].extend(own);
        }
        let idle_device = subtract(&[(a, b)], &taken);
        // What the step's thread did while the device idled.
        let spans = index_cache.overlapping(analyzed, s.track, a, b);
        let loaders = merge(
            spans
                .iter()
                .map(|&i| &trace.spans[i as usize])
                .filter(|x| super::gpu_idle::is_data_loading(trace.str(x.name)))
                .map(|x| (x.start, x.end)),
        );
        let mut covered: Vec<(Ns, Ns)> = Vec::new();
        for (x0, x1, i) in flatten_innermost(trace, &spans) {
            let seg = intersect(&[(x0.max(a), x1.min(b))], &idle_device);
            if seg.is_empty() {
                continue;
            }
            covered.extend(seg.iter().copied());
            let span = &trace.spans[i as usize];
            let loading = intersect(&seg, &loaders);
            cats[index("input")].extend(loading.iter().copied());
            let rest = subtract(&seg, &loaders);
            let cat = if super::host_sync::stall_kind(trace, facts, i).is_some() {
                "idle"
            } else {
                match effective_level(trace, span) {
                    Level::AcceleratorApi => "launch",
                    _ => "host compute",
                }
            };
            cats[index(cat)].extend(rest);
        }
        let uncovered = subtract(&idle_device, &merge(covered.into_iter()));
        cats[index("idle")].extend(uncovered);
        let intervals: Vec<(&'static str, Vec<(Ns, Ns)>)> = CATEGORIES
            .iter()
            .zip(cats)
            .map(|(c, list)| (*c, merge(list.into_iter())))
            .collect();
        let parts: Vec<(&'static str, Ns)> =
            intervals.iter().map(|(c, l)| (*c, length(l))).collect();
        let bottleneck = parts
            .iter()
            .filter(|(c, _)| *c != "device compute")
            .max_by_key(|(_, t)| *t)
            .filter(|(_, t)| super::pct(*t, b - a) >= config.bottleneck_pct)
            .map(|(c, _)| *c)
            .unwrap_or("device compute");
        out.push(StepBreakdown {
            rank: rank_number(trace, rank),
            name: trace.str(s.name).to_owned(),
            start_ns: a,
            end_ns: b,
            parts,
            bottleneck,
            intervals,
            rank_index: rank,
        });
    }
    out.sort_by_key(|s| (s.rank, s.start_ns));
    let mut drafts = Vec::new();
    for cat in CATEGORIES {
        if cat == "device compute" {
            continue;
        }
        let bound: Vec<&StepBreakdown> = out.iter().filter(|s| s.bottleneck == cat).collect();
        if bound.is_empty() {
            continue;
        }
        // On the job's clock: the steps of ranks whose clocks differ line up.
        let intervals: Vec<(Ns, Ns)> = bound
            .iter()
            .flat_map(|s| {
                facts
                    .clock
                    .intervals(s.rank_index, s.intervals[index(cat)].1.clone())
            })
            .collect();
        // Summed over the steps (of every rank) like their lengths: the share is of the
        // steps' own time.
        let total: Ns = bound
            .iter()
            .map(|s| s.end_ns - s.start_ns)
            .fold(0, Ns::saturating_add);
        let in_cat: Ns = bound
            .iter()
            .map(|s| s.parts[index(cat)].1)
            .fold(0, Ns::saturating_add);
        let mut ranked = bound.clone();
        ranked.sort_by_key(|s| std::cmp::Reverse(s.parts[index(cat)].1));
        drafts.push(Draft {
            message: format!(
                "{} of {} steps are {cat}-bound: {} of their {} ({:.0}%) is {cat}.",
                bound.len(),
                out.len(),
                human(in_cat),
                human(total),
                super::pct(in_cat, total)
            ),
            intervals,
            evidence: ranked
                .iter()
                .map(|s| Evidence {
                    kind: "step".into(),
                    rank: s.rank,
                    start_ns: s.start_ns,
                    end_ns: s.end_ns,
                    name: format!(
                        "{}: {cat} {:.0}% of {}",
                        s.name,
                        super::pct(s.parts[index(cat)].1, s.end_ns - s.start_ns),
                        human(s.end_ns - s.start_ns)
                    ),
                })
                .collect(),
            advice: advice_for(cat).into(),
        });
    }
    Ok((out, drafts))
}

fn advice_for(cat: &str) -> &'static str {
    match cat {
        "input" => {
            "Input-bound: prefetch and parallelise the input pipeline (DataLoader num_workers, \
             pin_memory, prefetch_factor), copy asynchronously, or cache decoded data."
        }
        "host compute" => {
            "Host-bound: the device waits for Python/framework work between launches; move it \
             off the critical path, vectorise it, or compile the step (torch.compile)."
        }
        "launch" => {
            "Launch-bound: too many small kernels; see the launch-bound finding (CUDA graphs, \
             kernel fusion)."
        }
        "communication" => {
            "Communication-bound: overlap collectives with compute (gradient bucketing), or \
             reduce their volume."
        }
        "device copy" => "Copy-bound: see the sync-copy and copy-overlap findings.",
        _ => {
            "The device idles inside the step: see the gpu-idle and host-sync findings for \
             what the host did."
        }
    }
}
