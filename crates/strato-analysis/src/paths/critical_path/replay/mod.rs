//! The replay: the critical path's dependency graph simulated, each point of time as late as
//! its dependencies make it, with the traced durations ([`replay`]); and what-if changes to
//! those durations ([`Scale`]), simulated on the same graph (issue 29, first part).
//!
//! Each edge of the graph (built with [`Graph::replay`], so a kernel keeps both its launch and
//! its stream constraint) gets a duration:
//! - **work** (a CPU op's inside, a device op running, a collective's transfer) and the
//!   **untraced** time between a thread's top-level ops: the traced time between its ends;
//! - **latency** (launch delay, stream order, synchronisation, waiting inside a blocking call,
//!   waiting for peers): for the constraint that bound the point (the latest of its latency
//!   edges, when no work edge already reaches the point), the traced time it took; for the
//!   others, the same time capped at the median binding latency of that kind in the graph
//!   (what the constraint costs when it binds).
//!
//! A point with no edge into it (a thread's first op of the window, a device op whose launch
//! is not in it) keeps its traced time. The simulation gives each point the latest of its
//! edges' `from + duration`; with the traced durations it gives back every traced time except
//! where the trace contradicts its own graph (an edge back in time: clock jitter between
//! nested spans, clocks of two ranks), which is the replay's error. A change scales the
//! work edges of what it selects; the rest of the graph decides how much of it reaches the
//! step's end.
//!
//! - [`changes`]: what a change is and what it selects in a graph;
//! - [`durations`]: each edge's traced duration and the simulation over a prepared graph;
//! - [`predict`]: the simulation with changes;
//! - [`simulations`]: one graph's replay and predictions, and the paths read back;
//! - [`gains`]: what a set of changes gains (`advise`) and the report's one pass;
//! - [`across`]: the steps simulated as one run;
//! - [`report`]: the result's shape;
//! - this module: [`replay`] over windows, and [`PartsReplay`] over a trace read in parts.

use strato_trace::{Level, Ns, RankId, Span, Trace};

use super::graph::Graph;
use super::options::CriticalPathOptions;
use super::search::whole_graph;
use super::shapes::CriticalPathError;
use super::steps::{for_each_step_graph, StepGraph};

mod across;
mod changes;
mod durations;
mod gains;
mod predict;
mod report;
mod simulations;
#[cfg(test)]
mod tests;

use across::replay_across;
use changes::ModuleCalls;
use simulations::Simulations;

pub use changes::{DeviceCategory, Scale, Selector, MAX_CHANGES};
pub use gains::{
    estimated_gains, paths_and_gains, paths_gains_and_replay, BaselineReplay, PathsAndGains,
    PathsGainsAndReplay,
};
pub use report::{
    AppliedChange, Bottleneck, PeerWait, PredictedWindow, ReplayReport, ReplayWindows,
    ReplayedWindow, WindowPath,
};

/// Replays `trace` over `windows`, and predicts it with `changes` ([`MAX_CHANGES`] at most;
/// more are refused by the caller). One graph at a time: a step's graph is dropped before the
/// next is built.
pub fn replay(
    trace: &Trace,
    options: &CriticalPathOptions,
    windows: ReplayWindows,
    changes: &[Scale],
) -> Result<ReplayReport, CriticalPathError> {
    let changes = &changes[..changes.len().min(MAX_CHANGES)];
    let modules = ModuleCalls::new(trace, changes);
    let mut report = ReplayReport::empty(changes);
    match windows {
        ReplayWindows::Steps(only) => {
            for_each_step_graph(trace, options, only, true, |step| {
                let window = step_window(&step);
                replay_graph(trace, &step.graph, &window, changes, &modules, &mut report)
            })?;
        }
        ReplayWindows::Whole => {
            let (graph, _) = whole_graph(trace, options, true);
            let window = whole_window(trace, &graph);
            replay_graph(trace, &graph, &window, changes, &modules, &mut report)?;
        }
        ReplayWindows::Across(only) => {
            let (graph, _) = whole_graph(trace, options, true);
            replay_across(trace, &graph, only, changes, &modules, &mut report)?;
        }
    }
    note_unmatched_overlap(&mut report, changes, || {
        trace
            .spans
            .iter()
            .any(|s| is_collective_kernel_span(trace, s))
    });
    Ok(report)
}

/// The whole trace as the replay's one window: every rank with a traced op in `graph`, from
/// its first point.
fn whole_window(trace: &Trace, graph: &Graph) -> Window {
    let mut starts: Vec<Option<Ns>> = vec![None; trace.ranks.len()];
    for node in graph.nodes.iter().filter(|n| n.span().is_some()) {
        let slot = &mut starts[node.rank.0 as usize];
        *slot = Some(slot.map_or(node.ts, |s: Ns| s.min(node.ts)));
    }
    Window {
        step: "whole trace".into(),
        number: 0,
        ranks: (0..trace.ranks.len() as u32)
            .map(RankId)
            .filter(|r| starts[r.0 as usize].is_some())
            .collect(),
        starts,
    }
}

/// A step's window as the replay reports it: the step, its ranks and each rank's start.
fn step_window(step: &StepGraph) -> Window {
    Window {
        step: format!("ProfilerStep#{}", step.number),
        number: step.number,
        ranks: step.ranks.clone(),
        starts: step.windows.iter().map(|w| w.map(|w| w.0)).collect(),
    }
}

/// Whether `span` of `trace` is a collective kernel (NCCL/RCCL).
fn is_collective_kernel_span(trace: &Trace, span: &Span) -> bool {
    span.level == Level::DeviceKernel
        && crate::distributed::collectives::is_collective_kernel(trace.str(span.name))
}

/// Why an `--overlap-comm` change matched nothing, on the change (`has_collective`: whether
/// the trace has a collective kernel at all, asked only then).
fn note_unmatched_overlap(
    report: &mut ReplayReport,
    changes: &[Scale],
    has_collective: impl FnOnce() -> bool,
) {
    let mut has_collective = Some(has_collective);
    for (applied, change) in report.changes.iter_mut().zip(changes) {
        if change.selector == Selector::OverlapCopies && applied.matched_ops == 0 {
            applied.note = Some(
                "no host-to-device copy waits for compute on the device in this trace's graph, \
                 nor compute for a device-to-host copy (copies on streams of their own, or no \
                 copy whose direction is known)"
                    .to_owned(),
            );
        }
        if change.selector == Selector::OverlapComm && applied.matched_ops == 0 {
            let collectives = has_collective.take().is_some_and(|f| f());
            applied.note = Some(if collectives {
                "no collective waits for compute on the device in this trace's graph: its \
                 collectives have streams of their own and the trace records no stream wait \
                 event (Kineto's cuda_sync events) ordering them behind compute"
                    .to_owned()
            } else {
                "the trace has no collective kernel (NCCL/RCCL)".to_owned()
            });
        }
    }
}

/// [`replay`] over the steps of a trace read in parts ([`super::windowed`]), each part holding
/// the spans of a few steps: the same windows, changes and notes as [`replay`] gives with
/// [`ReplayWindows::Steps`] on the whole trace. Fed every span of the trace first, in trace
/// order, as the step survey is ([`PartsReplay::add_span`]: the module calls `module:`
/// changes select, and whether the trace has a collective kernel); then each part in step
/// order ([`PartsReplay::add_part`]); then [`PartsReplay::finish`]. Memory beyond the part:
/// the selected module calls (40 bytes each) and the windows' results.
#[derive(Debug, Clone)]
pub struct PartsReplay {
    changes: Vec<Scale>,
    modules: ModuleCalls,
    /// `Some(whether a collective kernel was seen)` when a change needs to know.
    collective_kernel: Option<bool>,
    report: ReplayReport,
}

impl PartsReplay {
    /// No span seen yet; `changes` as [`replay`] takes them ([`MAX_CHANGES`] at most: more
    /// are refused by the caller).
    pub fn new(changes: &[Scale]) -> PartsReplay {
        let changes = changes[..changes.len().min(MAX_CHANGES)].to_vec();
        let overlap = changes.iter().any(|c| c.selector == Selector::OverlapComm);
        PartsReplay {
            modules: ModuleCalls::for_changes(&changes),
            collective_kernel: overlap.then_some(false),
            report: ReplayReport::empty(&changes),
            changes,
        }
    }

    /// Notes one span of the trace (`trace` holds its tables).
    pub fn add_span(&mut self, trace: &Trace, span: &Span) {
        self.modules.add(trace, span, &self.changes);
        if let Some(seen) = &mut self.collective_kernel {
            *seen = *seen || is_collective_kernel_span(trace, span);
        }
    }

    /// Adds what another file of the job noted ([`PartsReplay::add_span`] with that file's
    /// ids), whose tracks come after the `track_base` tracks of the files before it.
    pub fn append(&mut self, other: PartsReplay, track_base: u32) {
        self.modules.append(other.modules, track_base);
        if let (Some(seen), Some(other)) = (&mut self.collective_kernel, other.collective_kernel) {
            *seen = *seen || other;
        }
    }

    /// Replays the steps `range` of `plan` from `part` (as [`super::windowed::StepPlan`]
    /// reads a part), with the job's cross-rank inputs `options` given the part's span ids.
    pub fn add_part(
        &mut self,
        plan: &super::windowed::StepPlan,
        part: &Trace,
        range: std::ops::Range<usize>,
        options: &CriticalPathOptions,
    ) -> Result<(), CriticalPathError> {
        self.modules.link();
        let PartsReplay {
            changes,
            modules,
            report,
            ..
        } = self;
        plan.graphs(part, range, options, true, |step| {
            let window = step_window(&step);
            replay_graph(part, &step.graph, &window, changes, modules, report)
        })
    }

    /// The report once every part is replayed.
    pub fn finish(mut self) -> ReplayReport {
        let seen = self.collective_kernel.unwrap_or(false);
        note_unmatched_overlap(&mut self.report, &self.changes, || seen);
        self.report
    }
}

/// One graph's windows: the ranks with a window and each one's start.
#[derive(Clone)]
struct Window {
    step: String,
    number: u64,
    ranks: Vec<RankId>,
    starts: Vec<Option<Ns>>,
}

/// Replays one graph and, with changes, predicts it; appends each rank's window to `report`.
fn replay_graph(
    trace: &Trace,
    graph: &Graph,
    window: &Window,
    changes: &[Scale],
    modules: &ModuleCalls,
    report: &mut ReplayReport,
) -> Result<(), CriticalPathError> {
    let sims = Simulations::new(trace, graph, changes, modules, report)?;
    report_window(trace, &sims, window, report);
    Ok(())
}

/// Appends each rank's window of a graph's simulations to `report`.
fn report_window(trace: &Trace, sims: &Simulations, window: &Window, report: &mut ReplayReport) {
    let graph = sims.prepared.graph;
    let (t0, via0, predicted) = (&sims.t0, &sims.via0, &sims.predicted);
    let (walk, predicted_walk) = (sims.walk(trace), sims.predicted_walk(trace));
    let rank_label = |r: RankId| trace.ranks[r.0 as usize].rank.unwrap_or(i64::from(r.0));
    // Each rank's last point, traced and simulated.
    let last_of = |times: &[Ns]| {
        let mut last: Vec<Option<(Ns, u32)>> = vec![None; trace.ranks.len()];
        for (v, node) in graph.nodes.iter().enumerate() {
            if node.span().is_none() {
                continue;
            }
            let slot = &mut last[node.rank.0 as usize];
            if slot.is_none_or(|(at, _)| times[v] > at) {
                *slot = Some((times[v], v as u32));
            }
        }
        last
    };
    let traced_times: Vec<Ns> = graph.nodes.iter().map(|n| n.ts).collect();
    let measured_last = last_of(&traced_times);
    drop(traced_times);
    let simulated_last = last_of(t0);
    let predicted_last = predicted.as_ref().map(|p| last_of(&p.t));
    for &r in &window.ranks {
        let (Some(start), Some((measured, _)), Some((simulated, end))) = (
            window.starts[r.0 as usize],
            measured_last[r.0 as usize],
            simulated_last[r.0 as usize],
        ) else {
            continue;
        };
        let measured_ns = (measured - start).max(0);
        let simulated_ns = (simulated - start).max(0);
        let path = walk.path(t0, via0, end, start, r);
        let (predicted_ns, predicted_path) = match (&predicted, &predicted_last) {
            (Some(p), Some(last)) => {
                let Some((at, end)) = last[r.0 as usize] else {
                    continue;
                };
                (
                    (at - start).max(0),
                    predicted_walk.path(&p.t, &p.via, end, start, r),
                )
            }
            _ => (simulated_ns, path.clone()),
        };
        let replayed = ReplayedWindow {
            rank: rank_label(r),
            step: window.step.clone(),
            number: window.number,
            start_ns: start,
            measured_ns,
            simulated_ns,
            error_pct: error_pct(simulated_ns, measured_ns),
            edges_back_in_time: graph.negative,
            path,
        };
        report.push(replayed, predicted_ns, predicted_path);
    }
}

fn error_pct(simulated: Ns, measured: Ns) -> f64 {
    if measured <= 0 {
        return 0.0;
    }
    100.0 * (simulated - measured).abs() as f64 / measured as f64
}
