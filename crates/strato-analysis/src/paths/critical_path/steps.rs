//! Per-step windows: the critical path of each `ProfilerStep#N` on every rank that has it
//! ([`critical_path_steps`]), the spans each step's graph holds, and the whole trace as one
//! window when there are no steps ([`critical_path_by_step_or_whole`]).

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use serde::Serialize;
use strato_trace::{Level, Ns, RankId, Span, SpanId, Trace};

use super::collective_edges::{add_collectives, MemberIndex};
use super::graph::{step_annotation, Graph, TraceIndex};
use super::options::CriticalPathOptions;
use super::rank_edges::build_rank;
use super::search::{critical_path, longest_paths, path_ends, rank_path};
use super::shapes::{CriticalPathError, CriticalPathReport, GraphStats, RankCriticalPath};
use super::window::{compose, WindowComposition, TOP_PATH_OPS};

/// One rank's critical path in one step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankStepPath {
    /// The path searched in the step's graph (its `start_ns`/`end_ns` can leave the window
    /// only through another rank's collective).
    pub path: RankCriticalPath,
    /// The path inside the rank's step window.
    pub window: WindowComposition,
}

/// The critical paths of one `ProfilerStep#N`, on every rank that has it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepCriticalPath {
    /// The annotation (`ProfilerStep#12`).
    pub step: String,
    pub number: u64,
    pub ranks: Vec<RankStepPath>,
    pub graph: GraphStats,
}

/// The `ProfilerStep#N` annotations of each rank: number -> (start, end); for a number
/// annotated twice on a rank (several threads), the earliest. Indexed by [`strato_trace::RankId`].
pub fn rank_steps(trace: &Trace) -> Vec<BTreeMap<u64, (Ns, Ns)>> {
    let mut steps = vec![BTreeMap::new(); trace.ranks.len()];
    for span in &trace.spans {
        note_step(&mut steps, trace, span);
    }
    steps
}

/// Adds `span` (of `trace`, whose tables name its track and name) to `steps` ([`rank_steps`])
/// when it is a `ProfilerStep#N` annotation of a CPU track; `steps` grows to the span's rank.
pub(super) fn note_step(steps: &mut Vec<BTreeMap<u64, (Ns, Ns)>>, trace: &Trace, span: &Span) {
    let Some(number) = step_annotation(trace, span) else {
        return;
    };
    let rank = trace.track(span.track).rank.0 as usize;
    if steps.len() <= rank {
        steps.resize_with(rank + 1, BTreeMap::new);
    }
    let slot = steps[rank].entry(number).or_insert((span.start, span.end));
    if span.start < slot.0 {
        *slot = (span.start, span.end);
    }
}

/// The step numbers of `trace` (any rank), in order.
pub fn step_numbers(trace: &Trace) -> Vec<u64> {
    let mut all: Vec<u64> = rank_steps(trace)
        .into_iter()
        .flat_map(|m| m.into_keys())
        .collect();
    all.sort_unstable();
    all.dedup();
    all
}

/// The critical path of every rank in each `ProfilerStep#N` (only step `only` when given).
///
/// **Window** of a step on a rank: from the step annotation's start to the latest end of what
/// the step includes: the CPU spans of the rank that start inside the annotation, and the
/// device ops (kernels, copies, memsets, syncs) launched by a runtime call among them (device
/// ops whose launch is not in the trace: those starting inside the annotation). The device
/// work of a step can thus run past the next step's start: step windows of one rank may
/// overlap, each holds its own work. The graph of step N holds the step-N spans of every rank
/// with a step N, and the collectives whose members are among them, so a path can cross
/// ranks within the step. Each rank's path is composed inside its window ([`compose`]).
pub fn critical_path_steps(
    trace: &Trace,
    options: &CriticalPathOptions,
    only: Option<u64>,
) -> Result<Vec<StepCriticalPath>, CriticalPathError> {
    steps_with(trace, options, only, PathDetail::Full)
}

/// What each rank's path keeps once its window is composed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PathDetail {
    /// Its events and segments too.
    Full,
    /// Its figures and window composition only: the events and segments of every step of a
    /// long trace would be held at once (on 5M events, 245 MB of a report's 1.8 GB peak).
    Summary,
}

fn steps_with(
    trace: &Trace,
    options: &CriticalPathOptions,
    only: Option<u64>,
    detail: PathDetail,
) -> Result<Vec<StepCriticalPath>, CriticalPathError> {
    let mut out = Vec::new();
    for_each_step_graph(trace, options, only, false, |step| {
        out.push(step_paths(trace, &step, detail)?);
        Ok(())
    })?;
    Ok(out)
}

/// The critical paths of one step (its graph as the search reads it: not built for the
/// replay, or stripped), each rank's path composed inside its window; `detail` says what the
/// paths keep.
pub(super) fn step_paths(
    trace: &Trace,
    step: &StepGraph,
    detail: PathDetail,
) -> Result<StepCriticalPath, CriticalPathError> {
    let graph = &step.graph;
    let stats = GraphStats {
        nodes: graph.nodes.len(),
        edges: graph.edges.len(),
        negative_edges: graph.negative,
        collectives: step.collectives,
    };
    let search = longest_paths(graph)?;
    let ends = path_ends(trace, graph, &search);
    let ranks = step
        .ranks
        .iter()
        .map(|&r| {
            let mut path = rank_path(trace, r, graph, &search, ends[r.0 as usize]);
            let (start, end) = step.windows[r.0 as usize].expect("ranks with the step");
            let window = compose(trace, &path, start, end, TOP_PATH_OPS);
            if detail == PathDetail::Summary {
                path.events = Vec::new();
                path.segments = Vec::new();
            }
            RankStepPath { path, window }
        })
        .collect();
    Ok(StepCriticalPath {
        step: format!("ProfilerStep#{}", step.number),
        number: step.number,
        ranks,
        graph: stats,
    })
}

/// The graph of one step window, on every rank with the step ([`for_each_step_graph`]).
pub(super) struct StepGraph {
    pub(super) number: u64,
    /// The ranks with the step, in order.
    pub(super) ranks: Vec<RankId>,
    pub(super) graph: Graph,
    /// Per rank of the trace, its window on the reference clock: the step annotation's start
    /// to the latest end of the rank's nodes (`None`: the rank has no such step).
    pub(super) windows: Vec<Option<(Ns, Ns)>>,
    /// Collective instances linked in the graph.
    pub(super) collectives: usize,
}

/// Builds the graph of each `ProfilerStep#N` window (only step `only` when given), one at a
/// time, and hands it to `visit`: the windows and spans of the critical path's steps
/// ([`critical_path_steps`]), built for the replay when `replay` ([`Graph::replay`]).
pub(super) fn for_each_step_graph(
    trace: &Trace,
    options: &CriticalPathOptions,
    only: Option<u64>,
    replay: bool,
    visit: impl FnMut(StepGraph) -> Result<(), CriticalPathError>,
) -> Result<(), CriticalPathError> {
    let steps = rank_steps(trace);
    let numbers: Vec<u64> = step_numbers(trace)
        .into_iter()
        .filter(|n| only.is_none_or(|o| o == *n))
        .collect();
    let index = TraceIndex::new(trace);
    graphs_of_steps(trace, options, &steps, &numbers, &index, replay, visit)
}

/// [`for_each_step_graph`] for the steps `numbers` of a trace whose step annotations are
/// `steps` ([`rank_steps`]) and whose event records `index` holds: `trace` may hold only the
/// spans of these steps (a part of a longer trace, with its tables: see
/// [`super::windowed`]); the graphs are those of the whole trace's steps.
pub(super) fn graphs_of_steps(
    trace: &Trace,
    options: &CriticalPathOptions,
    steps: &[BTreeMap<u64, (Ns, Ns)>],
    numbers: &[u64],
    index: &TraceIndex,
    replay: bool,
    mut visit: impl FnMut(StepGraph) -> Result<(), CriticalPathError>,
) -> Result<(), CriticalPathError> {
    let members = MemberIndex::new(options);
    let mut buckets = step_buckets(trace, steps, numbers);
    for (step, &number) in numbers.iter().enumerate() {
        // Windows on the reference clock, as the graph's times.
        let window_of = |rank: RankId| {
            let shift = options.shift_of(rank);
            steps[rank.0 as usize]
                .get(&number)
                .map(|&(s, e)| (s.saturating_add(shift), e.saturating_add(shift)))
        };
        let mut windows: Vec<Option<(Ns, Ns)>> = (0..steps.len() as u32)
            .map(|r| window_of(RankId(r)))
            .collect();
        let mut graph = Graph::new(options);
        graph.replay = replay;
        let ranks: Vec<RankId> = (0..trace.ranks.len() as u32)
            .map(RankId)
            .filter(|&r| windows[r.0 as usize].is_some())
            .collect();
        // Each step's spans are dropped once its graph holds them.
        let step_spans = std::mem::take(&mut buckets[step]);
        for &r in &ranks {
            build_rank(trace, index, r, &step_spans[r.0 as usize], &mut graph);
        }
        drop(step_spans);
        // The window ends at the latest end of the rank's nodes.
        for node in &graph.nodes {
            if let Some(id) = node.span() {
                let end = trace.spans[id.0 as usize]
                    .end
                    .saturating_add(options.shift_of(node.rank));
                if let Some(window) = &mut windows[node.rank.0 as usize] {
                    window.1 = window.1.max(end);
                }
            }
        }
        let collectives = add_collectives(options, &members, &mut graph);
        visit(StepGraph {
            number,
            ranks,
            graph,
            windows,
            collectives,
        })?;
    }
    Ok(())
}

/// One rank's step windows, for finding every window that holds an instant.
#[derive(Debug)]
struct RankWindows {
    /// `(start, end, step index)`, by start.
    windows: Vec<(Ns, Ns, u32)>,
    /// Largest end among `windows[..=i]`.
    max_end: Vec<Ns>,
}

impl RankWindows {
    pub(super) fn new(steps: &BTreeMap<u64, (Ns, Ns)>, numbers: &[u64]) -> RankWindows {
        let mut windows: Vec<(Ns, Ns, u32)> = numbers
            .iter()
            .enumerate()
            .filter_map(|(i, n)| steps.get(n).map(|&(s, e)| (s, e, i as u32)))
            .collect();
        windows.sort_unstable();
        let mut max_end = Vec::with_capacity(windows.len());
        let mut m = Ns::MIN;
        for w in &windows {
            m = m.max(w.1);
            max_end.push(m);
        }
        RankWindows { windows, max_end }
    }

    /// Calls `found` with the step index of every window `[start, end)` holding `t`. Visits
    /// only the windows that start at or before `t` and could still be open: one for
    /// steps that do not overlap.
    fn containing(&self, t: Ns, mut found: impl FnMut(u32)) {
        let mut i = self.windows.partition_point(|w| w.0 <= t);
        while i > 0 && self.max_end[i - 1] > t {
            i -= 1;
            let (s, e, step) = self.windows[i];
            if t >= s && t < e {
                found(step);
            }
        }
    }
}

/// The spans of each step's graph, per rank, in trace order: `[step index][rank]`. A rank's
/// CPU span belongs to a step when it starts inside the rank's step annotation; a device op
/// to the step of its launching runtime call when the rank has that call, else to the step
/// it starts in. Two passes over the trace, whatever the number of steps.
pub(super) fn step_buckets(
    trace: &Trace,
    steps: &[BTreeMap<u64, (Ns, Ns)>],
    numbers: &[u64],
) -> Vec<Vec<Vec<SpanId>>> {
    let ranks = trace.ranks.len();
    let rule = StepRule::new(steps, numbers);
    let mut buckets: Vec<Vec<Vec<SpanId>>> = vec![vec![Vec::new(); ranks]; numbers.len()];
    let mut calls = CallSteps::default();
    for (i, span) in trace.spans.iter().enumerate() {
        let track = trace.track(span.track);
        if track.is_device() {
            continue;
        }
        let rank = track.rank.0;
        rule.cpu_span(&mut calls, rank, span, |step| {
            buckets[step as usize][rank as usize].push(SpanId(i as u32));
        });
    }
    for (i, span) in trace.spans.iter().enumerate() {
        let track = trace.track(span.track);
        if !track.is_device() {
            continue;
        }
        let rank = track.rank.0;
        rule.device_span(&calls, rank, span, |step| {
            buckets[step as usize][rank as usize].push(SpanId(i as u32));
        });
    }
    buckets
}

/// Which steps a span belongs to (see [`step_buckets`]): the step windows of every rank, for
/// steps `numbers` (a step is its index in `numbers`).
#[derive(Debug)]
pub(super) struct StepRule {
    windows: Vec<RankWindows>,
}

/// The steps holding each runtime call of a rank (by `(rank, correlation)`), which its device
/// ops belong to: [`StepRule::cpu_span`] fills it, [`StepRule::device_span`] reads it.
#[derive(Debug, Default)]
pub(super) struct CallSteps {
    /// The first step holding the call (`NO_STEP`: none).
    first: FxHashMap<(u32, u64), u32>,
    /// Further ones (only where step annotations overlap).
    more: FxHashMap<(u32, u64), Vec<u32>>,
}

/// A call in no step.
const NO_STEP: u32 = u32::MAX;

/// The correlation of `span` when it is a runtime call that can launch device ops.
pub(super) fn call_of(span: &Span) -> Option<u64> {
    match (span.level, span.correlation.get()) {
        (Level::AcceleratorApi, Some(c)) => Some(c),
        _ => None,
    }
}

impl StepRule {
    pub(super) fn new(steps: &[BTreeMap<u64, (Ns, Ns)>], numbers: &[u64]) -> StepRule {
        StepRule {
            windows: steps.iter().map(|m| RankWindows::new(m, numbers)).collect(),
        }
    }

    /// The steps of rank `rank`'s CPU span `span` (those whose annotation holds its start),
    /// handed to `found`; a runtime call's steps are noted in `calls` for its device ops.
    /// Calls must come in trace order.
    pub(super) fn cpu_span(
        &self,
        calls: &mut CallSteps,
        rank: u32,
        span: &Span,
        found: impl FnMut(u32),
    ) {
        self.cpu_event(calls, rank, span.start, call_of(span), found);
    }

    /// [`StepRule::cpu_span`] of a CPU span starting at `start`, a runtime call with
    /// correlation `call` when it is one ([`call_of`]).
    pub(super) fn cpu_event(
        &self,
        calls: &mut CallSteps,
        rank: u32,
        start: Ns,
        call: Option<u64>,
        mut found: impl FnMut(u32),
    ) {
        let call = call.map(|c| (rank, c));
        if let Some(key) = call {
            calls.first.entry(key).or_insert(NO_STEP);
        }
        self.cpu_steps(rank, start, |step| {
            found(step);
            if let Some(key) = call {
                let first = calls.first.get_mut(&key).expect("inserted above");
                if *first == NO_STEP {
                    *first = step;
                } else if *first != step {
                    calls.more.entry(key).or_default().push(step);
                }
            }
        });
    }

    /// The steps whose annotation on rank `rank` holds `start`, handed to `found`.
    pub(super) fn cpu_steps(&self, rank: u32, start: Ns, found: impl FnMut(u32)) {
        if let Some(windows) = self.windows.get(rank as usize) {
            windows.containing(start, found);
        }
    }

    /// The steps of rank `rank`'s device op `span`, handed to `found` once each: those of its
    /// launching runtime call when the rank has that call (none when the call is in no step),
    /// else those whose annotation holds its start. `calls` holds every CPU span's steps.
    pub(super) fn device_span(
        &self,
        calls: &CallSteps,
        rank: u32,
        span: &Span,
        mut found: impl FnMut(u32),
    ) {
        let launched = span.correlation.get().and_then(|c| {
            calls
                .first
                .get(&(rank, c))
                .map(|&first| (first, calls.more.get(&(rank, c))))
        });
        match launched {
            Some((first, more)) => {
                let mut seen: Vec<u32> = Vec::new();
                for step in std::iter::once(first).chain(more.into_iter().flatten().copied()) {
                    if step != NO_STEP && !seen.contains(&step) {
                        seen.push(step);
                        found(step);
                    }
                }
            }
            None => self.cpu_steps(rank, span.start, found),
        }
    }
}

/// Per step when the trace has `ProfilerStep#N` annotations ([`critical_path_steps`]), else
/// the whole trace as one window per rank (the path's own extent, so nothing is before or
/// after it), named `whole trace` with number 0: what the report shows. Each rank's path
/// keeps its figures (length, work, time by kind, note) and its window composition; its
/// `events` and `segments` are left empty (the report shows neither, and every step's would
/// be held at once).
pub fn critical_path_by_step_or_whole(
    trace: &Trace,
    options: &CriticalPathOptions,
) -> Result<Vec<StepCriticalPath>, CriticalPathError> {
    if !step_numbers(trace).is_empty() {
        return steps_with(trace, options, None, PathDetail::Summary);
    }
    Ok(vec![whole_as_step(trace, critical_path(trace, options)?)])
}

/// The whole trace's paths as one window, as [`critical_path_by_step_or_whole`] gives them
/// for a trace without steps (each path's events and segments dropped).
pub(super) fn whole_as_step(trace: &Trace, report: CriticalPathReport) -> StepCriticalPath {
    let ranks = report
        .ranks
        .into_iter()
        .map(|mut path| {
            let (start, end) = (path.start_ns.unwrap_or(0), path.end_ns.unwrap_or(0));
            let window = compose(trace, &path, start, end, TOP_PATH_OPS);
            path.events = Vec::new();
            path.segments = Vec::new();
            RankStepPath { path, window }
        })
        .collect();
    StepCriticalPath {
        step: "whole trace".into(),
        number: 0,
        ranks,
        graph: report.graph,
    }
}
