//! The steps simulated as one run (`strato whatif --across-steps`, [`replay_across`]): each
//! step's graph chained to the next through the threads and streams they share.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use strato_trace::{Level, Ns, RankId, Trace, TrackId};

use super::super::graph::step_annotation;
use super::super::graph::Graph;
use super::super::shapes::CriticalPathError;
use super::changes::{ModuleCalls, Scale};
use super::error_pct;
use super::report::{ReplayReport, ReplayedWindow};
use super::simulations::Simulations;

/// One step of one rank read from the whole trace's simulation ([`ReplayWindows::Across`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct AcrossStep {
    pub(super) rank: RankId,
    pub(super) number: u64,
    /// The step annotation's start, on the reference clock.
    pub(super) start: Ns,
    /// The first point at or after `start` on the thread that annotates the rank's steps (the
    /// thread of its first annotation), with which the step's start moves in a simulation:
    /// the untraced time from the annotation to that point is kept.
    pub(super) anchor: Option<u32>,
}

/// The steps of every rank and the step each point of the graph belongs to: a CPU span's
/// points to the step whose annotation holds its start, a device op's to its launching call's
/// step (by correlation on the rank; by its own start when the call is not in a step).
pub(super) struct AcrossSteps {
    /// In rank, then step order.
    pub(super) steps: Vec<AcrossStep>,
    /// Per point of the graph, the index of its step in `steps` ([`NO_STEP`]: none).
    pub(super) member: Vec<u32>,
}

pub(super) const NO_STEP: u32 = u32::MAX;

impl AcrossSteps {
    pub(super) fn new(trace: &Trace, graph: &Graph) -> AcrossSteps {
        let ranks = trace.ranks.len();
        // Per rank: each step's annotation (start, end), and the thread of its first one.
        let mut annotated: Vec<BTreeMap<u64, (Ns, Ns)>> = vec![BTreeMap::new(); ranks];
        let mut thread: Vec<Option<(Ns, TrackId)>> = vec![None; ranks];
        for span in &trace.spans {
            let Some(number) = step_annotation(trace, span) else {
                continue;
            };
            let track = trace.track(span.track);
            let r = track.rank.0 as usize;
            let shift = graph.shift_of(track.rank);
            let (start, end) = (
                span.start.saturating_add(shift),
                span.end.saturating_add(shift),
            );
            let slot = annotated[r].entry(number).or_insert((start, end));
            if start < slot.0 {
                *slot = (start, end);
            }
            if thread[r].is_none_or(|(at, _)| start < at) {
                thread[r] = Some((start, span.track));
            }
        }
        let mut steps = Vec::new();
        // Per rank: its steps' (start, end, index in `steps`), in start order.
        let mut windows: Vec<Vec<(Ns, Ns, u32)>> = vec![Vec::new(); ranks];
        for (r, numbered) in annotated.iter().enumerate() {
            for (&number, &(start, end)) in numbered {
                windows[r].push((start, end, steps.len() as u32));
                steps.push(AcrossStep {
                    rank: RankId(r as u32),
                    number,
                    start,
                    anchor: None,
                });
            }
            windows[r].sort_unstable();
        }
        let step_at = |r: usize, at: Ns| {
            let w = &windows[r];
            let i = w.partition_point(|&(start, _, _)| start <= at);
            (i > 0 && at < w[i - 1].1).then(|| w[i - 1].2)
        };
        // The launching calls' steps, by (rank, correlation).
        let mut call_step: FxHashMap<(u32, u64), u32> = FxHashMap::default();
        for span in &trace.spans {
            let track = trace.track(span.track);
            if track.is_device() || span.level != Level::AcceleratorApi {
                continue;
            }
            let (Some(c), Some(step)) = (
                span.correlation.get(),
                step_at(
                    track.rank.0 as usize,
                    span.start.saturating_add(graph.shift_of(track.rank)),
                ),
            ) else {
                continue;
            };
            call_step.entry((track.rank.0, c)).or_insert(step);
        }
        let mut member = vec![NO_STEP; graph.nodes.len()];
        let mut thread_points: Vec<Vec<(Ns, u32)>> = vec![Vec::new(); ranks];
        for (v, node) in graph.nodes.iter().enumerate() {
            let Some(id) = node.span() else { continue };
            let span = &trace.spans[id.0 as usize];
            let r = node.rank.0 as usize;
            let own = || step_at(r, span.start.saturating_add(graph.shift_of(node.rank)));
            let step = if trace.track(span.track).is_device() {
                span.correlation
                    .get()
                    .and_then(|c| call_step.get(&(node.rank.0, c)).copied())
                    .or_else(own)
            } else {
                own()
            };
            member[v] = step.unwrap_or(NO_STEP);
            if thread[r].is_some_and(|(_, t)| node.track(trace) == t) {
                thread_points[r].push((node.ts, v as u32));
            }
        }
        for (r, points) in thread_points.iter_mut().enumerate() {
            points.sort_unstable();
            for &(start, _, i) in &windows[r] {
                let at = points.partition_point(|&(ts, _)| ts < start);
                steps[i as usize].anchor = points.get(at).map(|&(_, v)| v);
            }
        }
        AcrossSteps { steps, member }
    }

    /// Each step's last point in simulation `t` (`None`: no point of the graph is the step's).
    pub(super) fn ends(&self, t: &[Ns]) -> Vec<Option<u32>> {
        let mut ends: Vec<Option<u32>> = vec![None; self.steps.len()];
        for (v, &step) in self.member.iter().enumerate() {
            if step == NO_STEP {
                continue;
            }
            let slot = &mut ends[step as usize];
            if slot.is_none_or(|e| t[v] > t[e as usize]) {
                *slot = Some(v as u32);
            }
        }
        ends
    }

    /// Each step's time in simulation `t` (the traced times for `traced`), with the point it
    /// ends at and where its time starts: from the previous step's end on the rank (its
    /// start, for a rank's first step) to its own end, so that a rank's steps add up to its
    /// first step's start to its last step's end. A step's start in a simulation is its
    /// anchor's time less the anchor's traced offset from the annotation. `None` for a step
    /// with no point, which is left out.
    pub(super) fn times(&self, graph: &Graph, t: &[Ns]) -> Vec<Option<(Ns, u32, Ns)>> {
        let ends = self.ends(t);
        let mut out = vec![None; self.steps.len()];
        let mut previous: Option<(RankId, Ns)> = None;
        for (i, step) in self.steps.iter().enumerate() {
            let Some(end) = ends[i] else { continue };
            let from = match previous {
                Some((rank, at)) if rank == step.rank => at,
                _ => step.anchor.map_or(step.start, |a| {
                    t[a as usize] - (graph.nodes[a as usize].ts - step.start)
                }),
            };
            let end_at = t[end as usize];
            out[i] = Some(((end_at - from).max(0), end, from));
            previous = Some((step.rank, end_at));
        }
        out
    }
}

/// [`replay_graph`] over the steps of the whole trace ([`ReplayWindows::Across`]): the whole
/// trace's graph simulated once with the traced durations and once with the changes, each
/// step's time read from both ([`AcrossSteps::times`]); `only`: that step's rows alone.
pub(super) fn replay_across(
    trace: &Trace,
    graph: &Graph,
    only: Option<u64>,
    changes: &[Scale],
    modules: &ModuleCalls,
    report: &mut ReplayReport,
) -> Result<(), CriticalPathError> {
    let sims = Simulations::new(trace, graph, changes, modules, report)?;
    let (t0, via0, predicted) = (&sims.t0, &sims.via0, &sims.predicted);
    let (walk, predicted_walk) = (sims.walk(trace), sims.predicted_walk(trace));
    let across = AcrossSteps::new(trace, graph);
    let traced: Vec<Ns> = graph.nodes.iter().map(|n| n.ts).collect();
    let measured = across.times(graph, &traced);
    drop(traced);
    let simulated = across.times(graph, t0);
    let predicted_times = predicted.as_ref().map(|p| across.times(graph, &p.t));
    let rank_label = |r: RankId| trace.ranks[r.0 as usize].rank.unwrap_or(i64::from(r.0));
    // In step, then rank order, as the other windows.
    let mut order: Vec<usize> = (0..across.steps.len()).collect();
    order.sort_by_key(|&i| (across.steps[i].number, across.steps[i].rank.0));
    for i in order {
        let step = &across.steps[i];
        if only.is_some_and(|n| n != step.number) {
            continue;
        }
        let (Some((measured_ns, _, _)), Some((simulated_ns, end, from))) =
            (measured[i], simulated[i])
        else {
            continue;
        };
        let path = walk.path(t0, via0, end, from, step.rank);
        let (predicted_ns, predicted_path) = match (&predicted, &predicted_times) {
            (Some(p), Some(times)) => {
                let Some((ns, end, from)) = times[i] else {
                    continue;
                };
                (ns, predicted_walk.path(&p.t, &p.via, end, from, step.rank))
            }
            _ => (simulated_ns, path.clone()),
        };
        let replayed = ReplayedWindow {
            rank: rank_label(step.rank),
            step: format!("ProfilerStep#{}", step.number),
            number: step.number,
            start_ns: step.start,
            measured_ns,
            simulated_ns,
            error_pct: error_pct(simulated_ns, measured_ns),
            edges_back_in_time: graph.negative,
            path,
        };
        report.push(replayed, predicted_ns, predicted_path);
    }
    Ok(())
}
