//! `critical-path` as a registered analysis ([`crate::registry`]): its options (`--step`,
//! `--top`), tables, JSON shape ([`super::json`]) and text. The path itself is the parent
//! module's. The job is the one `collectives` sees: a process driving several GPUs is split
//! into one rank per device, collectives are matched the same way and the same clock
//! alignment is applied, so that every cross-rank analysis sees one job.
//!
//! What only a terminal front end does with the path (`--overlay`: the trace written back with
//! the path laid over it) takes the typed report from [`whole_trace`].

use std::borrow::Cow;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use strato_trace::projection::ArgsScope;
use strato_trace::{Ns, Trace};

use super::json::{
    collectives_json, report_json, step_json, steps_json, CollectivesJson, Names, RankJson,
    ReportJson, StepsJson,
};
use super::search::critical_path_without_segments;
use super::shapes::{CriticalPathReport, PathKind};
use super::steps::{for_each_step_graph, step_paths, PathDetail};
use super::window::TOP_PATH_OPS;
use super::{critical_path, step_numbers, CriticalPathOptions};
use crate::analyzed::Analyzed;
use crate::distributed::collectives::split_multi_device_ranks;
use crate::registry::{
    Analysis, AnalysisError, Events, InReport, OptionKind, OptionSpec, Reads, TableSpec,
};
use crate::text::units::{fit, ms};

/// The critical path of each rank, over the whole trace or per step window.
#[derive(Debug)]
pub struct CriticalPath;

/// The options of [`CriticalPath`] as the front ends give them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CriticalPathSettings {
    /// Text: how many of the path's longest events to list per rank.
    pub top: u64,
    /// `""`: the whole trace; `all`: every `ProfilerStep#N` window; `N`: that step's.
    pub step: String,
}

impl Default for CriticalPathSettings {
    fn default() -> Self {
        CriticalPathSettings {
            top: 10,
            step: String::new(),
        }
    }
}

/// The path over the whole trace, or per step; serialises as the command's JSON.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum CriticalPathResult {
    Whole(ReportJson),
    Steps(StepsJson),
}

/// The job the path is computed over: `trace`, with a process driving several GPUs split into
/// one rank per device, as NCCL numbers them, so that its collectives link the devices (see
/// docs/analyses/collectives.md).
pub fn job_of(trace: &Trace) -> Cow<'_, Trace> {
    match split_multi_device_ranks(trace) {
        Some(split) => Cow::Owned(split),
        None => Cow::Borrowed(trace),
    }
}

/// The whole trace's path of `job` ([`job_of`]): what `draw` makes of the typed report (what
/// a front end draws from it, such as an overlay), then the result the registry presents,
/// which takes the report over (the path is held once).
pub fn whole_trace<T>(
    job: &Trace,
    draw: impl FnOnce(&CriticalPathReport) -> T,
) -> Result<(T, CriticalPathResult), AnalysisError> {
    let (report, collectives) = whole_report(job, true)?;
    let drawn = draw(&report);
    Ok((
        drawn,
        CriticalPathResult::Whole(report_json(report, collectives)),
    ))
}

/// The whole trace's path of `job` (its segments only when `segments`: the result shows
/// none, an overlay draws them) and how its collectives were matched.
fn whole_report(
    job: &Trace,
    segments: bool,
) -> Result<(CriticalPathReport, Option<CollectivesJson>), AnalysisError> {
    let options = CriticalPathOptions::matched(job);
    let collectives = collectives_of(job, &options);
    let report = if segments {
        critical_path(job, &options)
    } else {
        critical_path_without_segments(job, &options)
    };
    let report = report.map_err(|e| AnalysisError(e.to_string()))?;
    Ok((report, collectives))
}

fn collectives_of(job: &Trace, options: &CriticalPathOptions) -> Option<CollectivesJson> {
    let instances = options.collectives.as_ref().map_or(0, Vec::len);
    collectives_json(job.ranks.len(), instances)
}

/// The step windows of `job` that `step` asks for.
fn per_step(job: &Trace, step: &str) -> Result<CriticalPathResult, AnalysisError> {
    let only = chosen_step(&step_numbers(job), step)?;
    let options = CriticalPathOptions::matched(job);
    // Each step as the result keeps it (its paths' segments dropped) once it is searched.
    let mut steps = Vec::new();
    let mut names = Names::default();
    for_each_step_graph(job, &options, only, false, |graph| {
        let paths = step_paths(job, &graph, PathDetail::Full)?;
        steps.push(step_json(paths, &mut names));
        Ok(())
    })
    .map_err(|e| AnalysisError(e.to_string()))?;
    let mut result = steps_json(Vec::new(), collectives_of(job, &options));
    result.steps = steps;
    Ok(CriticalPathResult::Steps(result))
}

/// The step `step` (`--step`'s text) asks for among the trace's step `numbers`: `None` for
/// `all`; an error when the trace has no step, or not that one.
pub fn chosen_step(numbers: &[u64], step: &str) -> Result<Option<u64>, AnalysisError> {
    if numbers.is_empty() {
        return Err(AnalysisError(
            "no ProfilerStep#N annotation in the trace: no step window (run without --step for \
             the whole trace)"
                .into(),
        ));
    }
    let only = match step {
        "all" => None,
        n => Some(n.parse::<u64>().map_err(|_| {
            AnalysisError(format!(
                "step: a step number (N of ProfilerStep#N) or `all`, not {n:?}"
            ))
        })?),
    };
    if let Some(n) = only.filter(|n| !numbers.contains(n)) {
        let listed: Vec<String> = numbers.iter().map(u64::to_string).collect();
        return Err(AnalysisError(format!(
            "no ProfilerStep#{n} in the trace (steps: {})",
            listed.join(", ")
        )));
    }
    Ok(only)
}

impl Analysis for CriticalPath {
    const NAME: &'static str = "critical-path";
    const SUMMARY: &'static str = "Critical path per rank: the longest dependency chain through \
CPU ops, launches, kernels, stream order, synchronisations and (across ranks) collectives; its \
length and its time by kind (cpu_op, launch, kernel, copy, sync_wait, collective_wait, idle)";
    const WINDOW: &'static str = "the whole trace: the chain ending on each rank; with --step, \
each ProfilerStep#N window (the step annotation's start to the latest end of its CPU ops and \
the device ops they launched), where the path's kinds plus the time before and after it add up \
to the window";
    const DOC: &'static str = "docs/analyses/critical-path.md";
    const EXAMPLES: &'static [&'static str] = &[
        "strato critical-path trace.json.gz",
        "strato critical-path traces/ --json",
        "strato critical-path trace.json.gz --step all --csv --table critical_path_steps",
        "strato critical-path trace.json.gz --overlay critical.json   (open in ui.perfetto.dev)",
    ];
    const OPTIONS: &'static [OptionSpec] = &[
        OptionSpec {
            name: "top",
            help: "text: how many of the path's longest events to list per rank",
            kind: OptionKind::Count { min: 0 },
            default: "10",
        },
        OptionSpec {
            name: "step",
            help: "one window per ProfilerStep#N instead of the whole trace: N for that step, \
`all` for every step; each rank's path is composed inside its step window",
            kind: OptionKind::Step,
            default: "",
        },
    ];
    const TABLES: &'static [TableSpec] = &[
        TableSpec {
            name: "critical_path",
            about: "one row per rank: the whole trace's path, its length and time by kind \
(by_kind.<kind>); empty with --step",
            path: &["ranks"],
            inherit: &[],
            options: &[],
        },
        TableSpec {
            name: "critical_path_events",
            about: "one row per event on a rank's whole-trace path; empty with --step",
            path: &["ranks", "events"],
            inherit: &[],
            options: &[],
        },
        TableSpec {
            name: "critical_path_steps",
            about: "one row per (step, rank): the path inside the rank's step window \
(window.* adds up to window.window_ns); every step unless --step N",
            path: &["steps", "ranks"],
            inherit: &["step", "number"],
            options: &[("step", "all")],
        },
    ];
    /// Spans (the graph has no instant, counter or flow), with the args of device ops, API
    /// calls and collectives' CPU side only (`ArgsScope::Dependencies`: what the dependency
    /// edges read).
    const READS: Reads = Reads {
        events: Events::Spans,
        args: Some(ArgsScope::Dependencies),
    };
    /// The report's critical path section (per step, or the whole trace without steps).
    const IN_REPORT: InReport = InReport::OwnSection;
    type Options = CriticalPathSettings;
    type Output = CriticalPathResult;

    fn run(
        analyzed: &Analyzed<'_>,
        settings: &CriticalPathSettings,
    ) -> Result<CriticalPathResult, AnalysisError> {
        let job = analyzed.job();
        if settings.step.is_empty() {
            let (report, collectives) = whole_report(job, false)?;
            Ok(CriticalPathResult::Whole(report_json(report, collectives)))
        } else {
            per_step(job, &settings.step)
        }
    }

    fn render_text(result: &CriticalPathResult, settings: &CriticalPathSettings) -> String {
        let top = usize::try_from(settings.top).unwrap_or(usize::MAX);
        let mut out = String::new();
        match result {
            CriticalPathResult::Whole(report) => render_whole(&mut out, report, top),
            CriticalPathResult::Steps(steps) => render_steps(&mut out, steps, top),
        }
        out
    }
}

/// `kind`'s time in a `by_kind` object of the JSON (0 when absent).
fn kind_ns(by_kind: &serde_json::Map<String, serde_json::Value>, kind: PathKind) -> Ns {
    (by_kind.get(kind.as_str()))
        .and_then(serde_json::Value::as_i64)
        .unwrap_or(0)
}

fn render_collectives(out: &mut String, collectives: Option<&CollectivesJson>) {
    if let Some(c) = collectives {
        let _ = writeln!(
            out,
            "collectives matched across ranks: {} instances ({})",
            c.instances, c.method
        );
    }
}

fn render_whole(out: &mut String, report: &ReportJson, top: usize) {
    out.push_str(
        "critical path per rank (whole trace): the longest chain of work ending on the rank; \
         its time by kind adds up to its length\n",
    );
    render_collectives(out, report.collectives.as_ref());
    for r in &report.ranks {
        render_rank(out, r, top);
    }
}

fn render_rank(out: &mut String, r: &RankJson, top: usize) {
    let _ = writeln!(out, "\nrank {}  {}", r.rank, r.source);
    if let Some(note) = &r.note {
        let _ = writeln!(out, "  note: {note}");
        return;
    }
    let _ = writeln!(
        out,
        "  length {}  (work on it {}), {} events",
        ms(r.length_ns),
        ms(r.work_ns),
        r.events.len()
    );
    for kind in PathKind::ALL {
        let ns = kind_ns(&r.by_kind, kind);
        let pct = if r.length_ns > 0 {
            100.0 * ns as f64 / r.length_ns as f64
        } else {
            0.0
        };
        let _ = writeln!(
            out,
            "  {:<16} {:>14}  {:>6.2} %",
            kind.as_str(),
            ms(ns),
            pct
        );
    }
    render_late_peers(out, &r.late_peers, "  ");
    let mut longest: Vec<_> = r.events.iter().collect();
    longest.sort_by_key(|e| std::cmp::Reverse(e.end_ns - e.start_ns));
    if top > 0 && !longest.is_empty() {
        out.push_str("  longest events on the path:\n");
        for e in longest.into_iter().take(top) {
            let _ = writeln!(
                out,
                "    {:>14}  {:<15} rank {:<3} {}",
                ms(e.end_ns - e.start_ns),
                e.kind.as_str(),
                e.rank,
                fit(&e.name, 80)
            );
        }
    }
}

/// The late peers a path names, one line per (peer, collective): how often and how long the
/// rank waited for it there.
fn render_late_peers(out: &mut String, late: &[super::LatePeer], indent: &str) {
    let mut by_peer: std::collections::BTreeMap<(i64, &str), (usize, Ns)> = Default::default();
    for l in late {
        let entry = by_peer.entry((l.peer, l.collective.as_str())).or_default();
        entry.0 += 1;
        entry.1 = entry.1.saturating_add(l.waited_ns);
    }
    for ((peer, collective), (count, waited)) in by_peer {
        let _ = writeln!(
            out,
            "{indent}waited for rank {peer} (the path goes on through it): {} in {count} x {}",
            ms(waited),
            fit(collective, 60)
        );
    }
}

fn render_steps(out: &mut String, steps: &StepsJson, top: usize) {
    out.push_str(
        "critical path per step and rank: window = the step annotation's start to the latest \
         end of its CPU ops and the device ops they launched; the path's time by kind plus the \
         time before and after the path adds up to the window\n",
    );
    render_collectives(out, steps.collectives.as_ref());
    for s in &steps.steps {
        let _ = writeln!(out, "\n{}", s.step);
        for r in &s.ranks {
            let w = &r.window;
            let _ = writeln!(
                out,
                "  rank {}  window {} .. {} ({}), path {} ({} events)",
                r.path.rank,
                w.start_ns,
                w.end_ns,
                ms(w.window_ns),
                ms(r.path.length_ns),
                r.path.events.len()
            );
            if let Some(note) = &r.path.note {
                let _ = writeln!(out, "    note: {note}");
            }
            let pct = |ns: Ns| {
                if w.window_ns > 0 {
                    100.0 * ns as f64 / w.window_ns as f64
                } else {
                    0.0
                }
            };
            let mut rows: Vec<(&str, Ns)> = Vec::new();
            for kind in PathKind::ALL {
                if kind == PathKind::Kernel {
                    rows.push(("kernel (compute)", w.compute_ns));
                    rows.push(("kernel (communication)", w.communication_ns));
                } else {
                    rows.push((kind.as_str(), kind_ns(&w.by_kind, kind)));
                }
            }
            rows.push(("before the path", w.before_path_ns));
            rows.push(("after the path", w.after_path_ns));
            for (label, ns) in rows {
                let _ = writeln!(out, "    {label:<24} {:>14}  {:>6.2} %", ms(ns), pct(ns));
            }
            render_late_peers(out, &r.path.late_peers, "    ");
            if top > 0 && !w.top_ops.is_empty() {
                out.push_str("    most path time:\n");
                for o in w.top_ops.iter().take(top.min(TOP_PATH_OPS)) {
                    let _ = writeln!(
                        out,
                        "      {:>14}  {:<15} rank {:<3} {}",
                        ms(o.ns),
                        o.kind,
                        o.rank,
                        fit(&o.name, 80)
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paths::critical_path::tests::two_steps;
    use strato_trace::testing::TraceBuilder;
    use strato_trace::Level;

    fn run(trace: &Trace, step: &str) -> Result<CriticalPathResult, AnalysisError> {
        let settings = CriticalPathSettings {
            step: step.into(),
            ..CriticalPathSettings::default()
        };
        CriticalPath::run(&Analyzed::new(trace), &settings)
    }

    #[test]
    fn the_whole_trace_is_the_path_of_the_analysis_and_its_text_adds_up() {
        let trace = two_steps("gemm");
        let Ok(CriticalPathResult::Whole(result)) = run(&trace, "") else {
            panic!("the whole trace's path");
        };
        let report = critical_path(&trace, &CriticalPathOptions::matched(&trace)).unwrap();
        assert_eq!(
            serde_json::to_value(&result).unwrap(),
            serde_json::to_value(report_json(report, None)).unwrap()
        );
        let rank = &result.ranks[0];
        let kinds: Ns = PathKind::ALL
            .iter()
            .map(|k| kind_ns(&rank.by_kind, *k))
            .sum();
        assert_eq!(kinds, rank.length_ns);
        let text = CriticalPath::render_text(
            &CriticalPathResult::Whole(result),
            &CriticalPathSettings::default(),
        );
        assert!(text.contains("longest events on the path:"), "{text}");
        assert!(text.contains("gemm"), "{text}");
    }

    #[test]
    fn steps_are_windows_that_add_up_and_a_missing_step_is_refused() {
        let trace = two_steps("gemm");
        let Ok(CriticalPathResult::Steps(all)) = run(&trace, "all") else {
            panic!("every step's path");
        };
        let numbers: Vec<u64> = all.steps.iter().map(|s| s.number).collect();
        assert_eq!(numbers, [1, 2]);
        for r in all.steps.iter().flat_map(|s| &s.ranks) {
            let w = &r.window;
            let kinds: Ns = PathKind::ALL.iter().map(|k| kind_ns(&w.by_kind, *k)).sum();
            assert_eq!(kinds + w.before_path_ns + w.after_path_ns, w.window_ns);
        }
        let Ok(CriticalPathResult::Steps(two)) = run(&trace, "2") else {
            panic!("step 2's path");
        };
        assert_eq!(two.steps.len(), 1);
        assert_eq!(two.steps[0].number, 2);
        let missing = run(&trace, "7").err().map(|e| e.0);
        assert_eq!(
            missing.as_deref(),
            Some("no ProfilerStep#7 in the trace (steps: 1, 2)")
        );
    }

    #[test]
    fn a_trace_without_steps_has_no_step_window() {
        let mut b = TraceBuilder::new();
        let cpu = b.thread(1, 1);
        b.span(cpu, Level::Backend, "op", 0, 10);
        let trace = b.build();
        assert!(run(&trace, "").is_ok());
        let err = run(&trace, "all").err().map(|e| e.0).unwrap_or_default();
        assert!(err.starts_with("no ProfilerStep#N annotation"), "{err}");
    }
}
