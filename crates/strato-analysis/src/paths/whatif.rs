//! `whatif` as a registered analysis ([`crate::registry`]): the job's dependency graph
//! replayed per step and rank with the traced durations (how well the graph explains the
//! timeline), and predicted with what-if changes (`--scale KIND:NAME=F`). The simulation is
//! [`crate::paths::critical_path::replay`]'s; the job (ranks, collectives, clock alignment)
//! is the one `critical-path` sees.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use strato_trace::projection::ArgsScope;
use strato_trace::Ns;

use super::critical_path::replay::{
    replay, AppliedChange, PredictedWindow, ReplayReport, ReplayWindows, ReplayedWindow, Scale,
    WindowPath, MAX_CHANGES,
};
use super::critical_path::{step_numbers, CriticalPathOptions};
use crate::analyzed::Analyzed;
use crate::registry::{Analysis, AnalysisError, Events, OptionKind, OptionSpec, Reads, TableSpec};
use crate::text::units::{fit, ms};

/// The replay and what-if of the job's dependency graph.
#[derive(Debug)]
pub struct WhatIf;

/// The options of [`WhatIf`] as the front ends give them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WhatIfSettings {
    /// Changes, each `KIND:NAME=FACTOR` ([`Scale::parse`]).
    pub scale: Vec<String>,
    /// `""`: every step (the whole trace without steps); `all`: every step; `N`: that step.
    pub step: String,
    /// The steps read from one simulation of the whole trace, each from the previous step's
    /// end to its own, so that a change carries from a step into the next
    /// ([`ReplayWindows::Across`]); the trace must have steps.
    pub across_steps: bool,
    /// Host synchronisations removed: `""` none, `all` every one, else those under the CPU op
    /// of that name ([`Scale::no_sync`]).
    pub no_sync: String,
    /// Blocking copy calls made asynchronous: `""` none, `all` every one, else those under the
    /// CPU op of that name ([`Scale::async_copies`]).
    pub async_copies: String,
    /// Each window's straggler arrives at its collectives with the median member
    /// ([`Scale::even_straggler`]).
    pub even_straggler: bool,
    /// The links' bandwidth times this factor ([`Scale::link_bandwidth`]); `None`: unchanged.
    pub link_bw: Option<f64>,
    /// Communication overlapped with compute ([`Scale::overlap_comm`]).
    pub overlap_comm: bool,
    /// Host<->device copies overlapped with compute ([`Scale::overlap_copies`]).
    pub overlap_copies: bool,
    /// Launches replayed as graph launches ([`Scale::graph_launch`]): `""` none, `all` each
    /// top-level CPU op of a thread, else each call of the CPU op of that name.
    pub graph_launch: String,
}

/// The replay of every window and, with changes, the prediction.
#[derive(Debug, Serialize)]
pub struct WhatIfResult {
    pub replay: ReplayJson,
    pub whatif: PredictionJson,
}

/// The replay: each (step, rank) window simulated with the traced durations.
#[derive(Debug, Serialize)]
pub struct ReplayJson {
    pub steps: Vec<ReplayedWindow>,
    /// Median and worst `error_pct` over the windows (0 without windows).
    pub median_error_pct: f64,
    pub worst_error_pct: f64,
}

/// The changes and each window predicted with them (without changes: the replay, gain 0).
#[derive(Debug, Serialize)]
pub struct PredictionJson {
    pub changes: Vec<AppliedChange>,
    pub steps: Vec<PredictedWindow>,
}

impl WhatIfSettings {
    fn changes(&self) -> Result<Vec<Scale>, String> {
        if self.scale.len() > MAX_CHANGES {
            return Err(format!(
                "scale: at most {MAX_CHANGES} changes, not {}",
                self.scale.len()
            ));
        }
        let mut changes: Vec<Scale> = self
            .scale
            .iter()
            .map(|s| Scale::parse(s))
            .collect::<Result<_, _>>()?;
        match self.no_sync.trim() {
            "" => {}
            "all" => changes.push(Scale::no_sync("")),
            under => changes.push(Scale::no_sync(under)),
        }
        match self.async_copies.trim() {
            "" => {}
            "all" => changes.push(Scale::async_copies("")),
            under => changes.push(Scale::async_copies(under)),
        }
        if self.even_straggler {
            changes.push(Scale::even_straggler(None));
        }
        if let Some(factor) = self.link_bw {
            changes.push(Scale::link_bandwidth(factor)?);
        }
        if self.overlap_comm {
            changes.push(Scale::overlap_comm());
        }
        if self.overlap_copies {
            changes.push(Scale::overlap_copies());
        }
        match self.graph_launch.trim() {
            "" => {}
            "all" => changes.push(Scale::graph_launch("")),
            region => changes.push(Scale::graph_launch(region)),
        }
        if changes.len() > MAX_CHANGES {
            return Err(format!(
                "at most {MAX_CHANGES} changes, not {}",
                changes.len()
            ));
        }
        Ok(changes)
    }
}

impl WhatIfSettings {
    /// The changes the settings ask for, each parsed ([`Scale`]); one line when one cannot be.
    pub fn scales(&self) -> Result<Vec<Scale>, AnalysisError> {
        self.changes().map_err(AnalysisError)
    }

    /// The windows `step` asks for over a trace (a job) with the step numbers `numbers`: every
    /// step (the whole trace without steps) or step N, which must be one of them.
    pub fn windows(&self, numbers: &[u64]) -> Result<ReplayWindows, AnalysisError> {
        let windows = self.step_windows(numbers)?;
        if !self.across_steps {
            return Ok(windows);
        }
        match windows {
            ReplayWindows::Steps(only) => Ok(ReplayWindows::Across(only)),
            _ => Err(AnalysisError(
                "across_steps: the trace has no step annotation (ProfilerStep#N)".into(),
            )),
        }
    }

    /// [`WhatIfSettings::windows`] without `across_steps`.
    fn step_windows(&self, numbers: &[u64]) -> Result<ReplayWindows, AnalysisError> {
        Ok(match self.step.as_str() {
            "" | "all" if numbers.is_empty() => ReplayWindows::Whole,
            "" | "all" => ReplayWindows::Steps(None),
            n => {
                let n = n.parse::<u64>().map_err(|_| {
                    AnalysisError(format!(
                        "step: a step number (N of ProfilerStep#N) or `all`, not {n:?}"
                    ))
                })?;
                if !numbers.contains(&n) {
                    let listed: Vec<String> = numbers.iter().map(u64::to_string).collect();
                    return Err(AnalysisError(if listed.is_empty() {
                        format!("no ProfilerStep#{n} in the trace (it has no step annotation)")
                    } else {
                        format!(
                            "no ProfilerStep#{n} in the trace (steps: {})",
                            listed.join(", ")
                        )
                    }));
                }
                ReplayWindows::Steps(Some(n))
            }
        })
    }
}

impl WhatIfResult {
    /// The result of a replay's report (the windows' median and worst error added).
    pub fn of_report(report: ReplayReport) -> WhatIfResult {
        let mut errors: Vec<f64> = report.replay.iter().map(|w| w.error_pct).collect();
        let (median_error_pct, worst_error_pct) = median_and_worst(&mut errors);
        WhatIfResult {
            replay: ReplayJson {
                steps: report.replay,
                median_error_pct,
                worst_error_pct,
            },
            whatif: PredictionJson {
                changes: report.changes,
                steps: report.predicted,
            },
        }
    }
}

fn median_and_worst(errors: &mut [f64]) -> (f64, f64) {
    if errors.is_empty() {
        return (0.0, 0.0);
    }
    errors.sort_by(f64::total_cmp);
    let n = errors.len();
    let median = if n % 2 == 1 {
        errors[n / 2]
    } else {
        (errors[n / 2 - 1] + errors[n / 2]) / 2.0
    };
    (median, errors[n - 1])
}

impl Analysis for WhatIf {
    const NAME: &'static str = "whatif";
    const SUMMARY: &'static str = "What would it buy: the job's dependency graph (the critical \
path's) replayed per step and rank with the traced durations, its error against the trace, and \
the step time predicted with changes (--scale KIND:NAME=F), with the predicted path by kind and \
its new bottleneck";
    const WINDOW: &'static str = "each ProfilerStep#N window (the step annotation's start to \
the rank's last point in the step's graph), or the whole trace without steps; with \
--across-steps, each step from the previous step's end on its rank to the end of its own work \
(a rank's steps add up to its first step's start to its last step's end); the predicted \
path's kinds plus the time before it add up to the predicted window";
    const DOC: &'static str = "docs/analyses/whatif.md";
    const EXAMPLES: &'static [&'static str] = &[
        "strato whatif trace.json.gz",
        "strato whatif trace.json.gz --scale 'kernel:gemm=0.5'",
        "strato whatif traces/ --scale 'op:aten::mm=0.5' --scale 'category:copy=0' --json",
        "strato whatif trace.json.gz --step 12 --scale 'cpu:aten::to=0.5'",
        "strato whatif trace.json.gz --scale 'module:Qwen2Attention=0.67'",
        "strato whatif trace.json.gz --no-sync all",
        "strato whatif trace.json.gz --async-copies all",
        "strato whatif ranks/ --even-straggler",
        "strato whatif ranks/ --link-bw 2",
        "strato whatif ranks/ --overlap-comm",
        "strato whatif trace.json.gz --overlap-copies --async-copies all",
        "strato whatif trace.json.gz --graph-launch all",
    ];
    const OPTIONS: &'static [OptionSpec] = &[
        OptionSpec {
            name: "scale",
            help: "a change, repeatable: KIND:NAME=F scales the time of what it selects by F \
(0.5: twice as fast; 0: gone). kernel:TEXT = device ops whose name contains TEXT; op:NAME = \
device ops launched under the CPU op NAME; module:CLASS = device ops launched under a call of \
the nn.Module class CLASS; cpu:NAME = the CPU op NAME and what it calls; thread:NAME = every \
CPU op of the threads named NAME; category:kernel|copy|device",
            kind: OptionKind::Texts {
                value_name: "KIND:NAME=F",
            },
            default: "",
        },
        OptionSpec {
            name: "no_sync",
            help: "remove host synchronisations (the blocking calls: cudaStreamSynchronize, \
cudaDeviceSynchronize, cudaMemcpy, clFinish, an OpenCL read or write made blocking, ...): `all`, or OP for those under the CPU op OP; \
the call then costs what it costs when it does not wait",
            kind: OptionKind::Text {
                value_name: "all|OP",
            },
            default: "",
        },
        OptionSpec {
            name: "async_copies",
            help: "copies made asynchronous (pinned host memory, non-blocking calls): the \
blocking calls that launched a copy or a memset (cudaMemcpy, cuMemcpyDtoH, a pageable \
cudaMemcpyAsync, hipMemcpy, an OpenCL read or write made blocking): `all`, or OP for those under \
the CPU op OP, no longer wait for it (the copy itself runs as long as it did; the faster copy \
pinned memory may also give is not modelled)",
            kind: OptionKind::Text {
                value_name: "all|OP",
            },
            default: "",
        },
        OptionSpec {
            name: "even_straggler",
            help: "remove the straggler's lateness: in each window, the rank that arrived last \
at the most collectives arrives at each collective with the median member instead of later \
(its own work unchanged; what waited for it goes on earlier)",
            kind: OptionKind::Flag,
            default: "false",
        },
        OptionSpec {
            name: "link_bw",
            help: "the links collectives move data over F times as fast (2: twice the \
bandwidth): each collective kernel's transfer, from the last member's arrival to its end, \
takes 1/F of the time (the whole kernel where the job's collectives are not matched across \
ranks); waiting for peers is unchanged",
            kind: OptionKind::Number,
            default: "",
        },
        OptionSpec {
            name: "overlap_comm",
            help: "communication overlapped with compute, as bucketing would: collective \
kernels no longer wait on the device for compute (the order of a stream they share with it, a \
stream wait event on it), only for their launch, their peers and the collectives before them; \
compute on a stream they share no longer waits for them (the most overlapping can buy)",
            kind: OptionKind::Flag,
            default: "false",
        },
        OptionSpec {
            name: "overlap_copies",
            help: "host<->device copies overlapped with compute on the device, as a copy \
stream with the next batch prefetched would: a host-to-device copy no longer waits for compute \
nor compute for it (its data there in time), compute no longer waits for a device-to-host copy \
(the copy still waits for the compute that made its data); the most overlapping can buy. The \
copies' durations and the host's waits for them are unchanged (that is --async-copies)",
            kind: OptionKind::Flag,
            default: "false",
        },
        OptionSpec {
            name: "graph_launch",
            help: "launches replayed as CUDA graph launches (as CUDA graphs or torch.compile's \
reduce-overhead would): `all` (each top-level CPU op of a thread a graph) or OP (each call of the \
CPU op OP): the region's CPU ops cost nothing and every device op launched inside it is \
submitted at the region's start with the typical launch delay; synchronisations inside still \
wait",
            kind: OptionKind::Text {
                value_name: "all|OP",
            },
            default: "",
        },
        OptionSpec {
            name: "across_steps",
            help: "read the steps from one simulation of the whole trace instead of one graph \
per step: a step's time runs from the previous step's end on its rank (its annotation's start \
for the first) to the end of its own work, so a rank's steps add up to its first step's start \
to its last step's end, and a change carries into the next step (removing the synchronisation \
that ends each step lets the host run ahead while the device works)",
            kind: OptionKind::Flag,
            default: "false",
        },
        OptionSpec {
            name: "step",
            help: "N: that ProfilerStep#N window only; all (and unset): every step, or the whole \
trace when it has no step",
            kind: OptionKind::Step,
            default: "",
        },
    ];
    const TABLES: &'static [TableSpec] = &[
        TableSpec {
            name: "whatif",
            about: "one row per (step, rank): baseline (the replay) and predicted step time with \
the changes (--scale, --no-sync, --async-copies, --even-straggler, --link-bw, --overlap-comm, --overlap-copies, --graph-launch; none: the replay), the gain, the predicted path by kind (path.by_kind.<kind>) and its bottleneck",
            path: &["whatif", "steps"],
            inherit: &[],
            options: &[],
        },
        TableSpec {
            name: "whatif_replay",
            about: "one row per (step, rank): measured and simulated step time, the error, and \
what the end waited on (path.by_kind.<kind>, path.bottleneck)",
            path: &["replay", "steps"],
            inherit: &[],
            options: &[],
        },
    ];
    /// What `critical-path` reads: the graph is its.
    const READS: Reads = Reads {
        events: Events::Spans,
        args: Some(ArgsScope::Dependencies),
    };
    /// The report's replay section (the replay without a change; the changes are the
    /// user's to choose, and the findings' gains are the what-ifs of their fixes).
    const IN_REPORT: crate::registry::InReport = crate::registry::InReport::OwnSection;
    type Options = WhatIfSettings;
    type Output = WhatIfResult;

    fn check_options(options: &WhatIfSettings) -> Result<(), String> {
        options.changes().map(|_| ())
    }

    fn run(
        analyzed: &Analyzed<'_>,
        settings: &WhatIfSettings,
    ) -> Result<WhatIfResult, AnalysisError> {
        let changes = settings.changes().map_err(AnalysisError)?;
        let job = analyzed.job();
        let windows = settings.windows(&step_numbers(job))?;
        let options = CriticalPathOptions::matched(job);
        let report =
            replay(job, &options, windows, &changes).map_err(|e| AnalysisError(e.to_string()))?;
        Ok(WhatIfResult::of_report(report))
    }

    fn render_text(result: &WhatIfResult, _settings: &WhatIfSettings) -> String {
        let mut out = String::new();
        let replay = &result.replay;
        let _ = writeln!(
            out,
            "replay: the dependency graph simulated with the traced durations, per step and \
             rank ({} windows; error median {:.3} %, worst {:.3} %)",
            replay.steps.len(),
            replay.median_error_pct,
            replay.worst_error_pct
        );
        let _ = writeln!(
            out,
            "  {:<22} {:>5} {:>14} {:>14} {:>9}  its path: the most time by kind; the op with the most",
            "step", "rank", "measured", "simulated", "error"
        );
        for w in &replay.steps {
            let _ = writeln!(
                out,
                "  {:<22} {:>5} {:>14} {:>14} {:>8.3}%  {}",
                fit(&w.step, 22),
                w.rank,
                ms(w.measured_ns),
                ms(w.simulated_ns),
                w.error_pct,
                path_text(&w.path, w.simulated_ns)
            );
        }
        for w in &replay.steps {
            for p in &w.path.peer_waits {
                let _ = writeln!(
                    out,
                    "  {} rank {} waited {} at {} for rank {}",
                    w.step,
                    w.rank,
                    ms(p.waited_ns),
                    fit(&p.collective, 60),
                    p.peer
                );
            }
        }
        let whatif = &result.whatif;
        if whatif.changes.is_empty() {
            out.push_str("\nno change asked (--scale KIND:NAME=F): the replay only\n");
            return out;
        }
        out.push_str("\nwhat-if: ");
        let changes: Vec<String> = whatif
            .changes
            .iter()
            .map(|c| format!("{} ({} ops)", c.change, c.matched_ops))
            .collect();
        out.push_str(&changes.join(", "));
        out.push('\n');
        for c in whatif.changes.iter() {
            if let Some(note) = &c.note {
                let _ = writeln!(out, "  {}: {note}", c.change);
            }
        }
        let baseline: Ns = whatif.steps.iter().map(|s| s.baseline_ns).sum();
        let predicted: Ns = whatif.steps.iter().map(|s| s.predicted_ns).sum();
        let _ = writeln!(
            out,
            "  over every window: {} -> {} ({:+.2} %)",
            ms(baseline),
            ms(predicted),
            if baseline > 0 {
                100.0 * (predicted - baseline) as f64 / baseline as f64
            } else {
                0.0
            }
        );
        let _ = writeln!(
            out,
            "  {:<22} {:>5} {:>14} {:>14} {:>14}  new bottleneck",
            "step", "rank", "baseline", "predicted", "gain"
        );
        for s in &whatif.steps {
            let _ = writeln!(
                out,
                "  {:<22} {:>5} {:>14} {:>14} {:>14}  {}",
                fit(&s.step, 22),
                s.rank,
                ms(s.baseline_ns),
                ms(s.predicted_ns),
                ms(s.gain_ns),
                path_text(&s.path, s.predicted_ns)
            );
        }
        out
    }
}

/// A path in a line: its two largest kinds (share of the window) and its bottleneck.
fn path_text(path: &WindowPath, window: Ns) -> String {
    let mut kinds: Vec<(&str, Ns)> = path
        .by_kind
        .iter()
        .map(|(k, ns)| (*k, *ns))
        .filter(|(_, ns)| *ns > 0)
        .collect();
    kinds.sort_by_key(|&(k, ns)| (std::cmp::Reverse(ns), k));
    let pct = |ns: Ns| {
        if window > 0 {
            100.0 * ns as f64 / window as f64
        } else {
            0.0
        }
    };
    let mut parts: Vec<String> = kinds
        .iter()
        .take(2)
        .map(|(k, ns)| format!("{k} {:.0} %", pct(*ns)))
        .collect();
    if let Some(b) = &path.bottleneck {
        parts.push(format!("{} {} ({})", b.kind, fit(&b.name, 50), ms(b.ns)));
    }
    parts.join("; ")
}
