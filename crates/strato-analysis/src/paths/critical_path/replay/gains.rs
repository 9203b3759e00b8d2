//! What a set of changes would gain over the trace's windows ([`estimated_gains`], `strato
//! advise`'s estimates), and the report's one pass that gives the critical path, the gains and
//! the replay from the same graphs ([`paths_gains_and_replay`]).

use strato_trace::{Ns, RankId, Trace};

use super::super::graph::Graph;
use super::super::options::CriticalPathOptions;
use super::super::search::whole_graph;
use super::super::shapes::CriticalPathError;
use super::super::steps::for_each_step_graph;
use super::changes::{ModuleCalls, Scale, MAX_CHANGES};
use super::predict::predict;
use super::report::ReplayReport;
use super::simulations::Simulations;
use super::{report_window, step_window, whole_window, Window};

/// What each set of changes in `sets` would save over the trace's `ProfilerStep#N` windows (the
/// whole trace as one window when it has none): per window, the latest rank's end replayed
/// with the traced durations minus the same with the set's changes, summed over the windows
/// (negative: the set makes the job longer); `None` for a set none of whose changes selected
/// anything in any window (the graph has nothing the change is about: no estimate, rather
/// than a gain of 0). Each window's graph is built and replayed once, then predicted once per
/// set; sets of more than [`MAX_CHANGES`] changes use the first ones. This is what `strato
/// advise` estimates a finding's fix to gain with.
pub fn estimated_gains(
    trace: &Trace,
    options: &CriticalPathOptions,
    sets: &[Vec<Scale>],
) -> Result<Vec<Option<Ns>>, CriticalPathError> {
    let mut gains = Gains::new(sets.len());
    if sets.is_empty() {
        return Ok(gains.finish());
    }
    let modules = ModuleCalls::of_sets(trace, sets);
    let mut windows = 0usize;
    for_each_step_graph(trace, options, None, true, |step| {
        windows += 1;
        let replay = Simulations::replay(trace, &step.graph)?;
        graph_gains(trace, &replay, &step.ranks, sets, &modules, &mut gains);
        Ok(())
    })?;
    if windows == 0 {
        let (graph, _) = whole_graph(trace, options, true);
        let ranks: Vec<RankId> = (0..trace.ranks.len() as u32).map(RankId).collect();
        let replay = Simulations::replay(trace, &graph)?;
        graph_gains(trace, &replay, &ranks, sets, &modules, &mut gains);
    }
    Ok(gains.finish())
}

/// Each set's gain summed over the windows, and whether any of its changes selected anything.
pub(super) struct Gains {
    pub(super) sums: Vec<Ns>,
    pub(super) selected: Vec<bool>,
}

impl Gains {
    pub(super) fn new(sets: usize) -> Gains {
        Gains {
            sums: vec![0; sets],
            selected: vec![false; sets],
        }
    }

    pub(super) fn finish(self) -> Vec<Option<Ns>> {
        self.sums
            .into_iter()
            .zip(self.selected)
            .map(|(sum, selected)| selected.then_some(sum))
            .collect()
    }
}

/// What [`paths_and_gains`] gives: the critical path of every window, and each set's gain
/// ([`estimated_gains`]).
pub type PathsAndGains = (
    Result<Vec<super::super::StepCriticalPath>, CriticalPathError>,
    Result<Vec<Option<Ns>>, CriticalPathError>,
);

/// The critical path of every `ProfilerStep#N` window (the whole trace as one window without
/// steps) as [`super::super::critical_path_by_step_or_whole`] gives it, and what each set of changes
/// in `sets` would save over those windows as [`estimated_gains`] gives it, from one graph per
/// window: built for the replay, replayed with each set, then stripped of its replay-only
/// edges ([`Graph::strip_replay_edges`]) and searched. See [`paths_gains_and_replay`], which
/// gives the replay too.
pub fn paths_and_gains(
    trace: &Trace,
    options: &CriticalPathOptions,
    sets: &[Vec<Scale>],
) -> PathsAndGains {
    let (paths, gains, _) = paths_gains_and_replay(trace, options, sets, false);
    (paths, gains)
}

/// The replay ([`replay`] without changes: each window's measured and simulated time), when
/// [`paths_gains_and_replay`] is asked for it.
pub type BaselineReplay = Option<Result<ReplayReport, CriticalPathError>>;

/// What [`paths_gains_and_replay`] gives: the critical path of every window, each set's gain,
/// and the replay when asked.
pub type PathsGainsAndReplay = (
    Result<Vec<super::super::StepCriticalPath>, CriticalPathError>,
    Result<Vec<Option<Ns>>, CriticalPathError>,
    BaselineReplay,
);

/// [`paths_and_gains`], and with `baseline` the replay of every window without changes as
/// [`replay`] gives it (`strato whatif`'s `replay`), from the same graphs. This is the report's
/// one pass for its critical path and replay sections and its findings' gains.
///
/// The gains and the replay fail with the graph that failed them (a dependency cycle), and
/// with the paths when those fail (a window left out would make the sums partial); the paths
/// do not fail for them: a cycle through a replay-only edge leaves the search's graph whole.
pub fn paths_gains_and_replay(
    trace: &Trace,
    options: &CriticalPathOptions,
    sets: &[Vec<Scale>],
    baseline: bool,
) -> PathsGainsAndReplay {
    let replay = !sets.is_empty() || baseline;
    let modules = ModuleCalls::of_sets(trace, sets);
    let mut gains: Result<Gains, CriticalPathError> = Ok(Gains::new(sets.len()));
    let mut replayed: Result<ReplayReport, CriticalPathError> = Ok(ReplayReport::empty(&[]));
    let mut add_replays =
        |graph: &mut Graph, ranks: &[RankId], window: &dyn Fn(&Graph) -> Window| {
            if !replay {
                return;
            }
            // One replay of the graph for the gains and the baseline replay.
            match Simulations::replay(trace, graph) {
                Ok(replay) => {
                    if let (false, Ok(sums)) = (sets.is_empty(), gains.as_mut()) {
                        graph_gains(trace, &replay, ranks, sets, &modules, sums);
                    }
                    if let (true, Ok(report)) = (baseline, replayed.as_mut()) {
                        report_window(trace, &replay, &window(graph), report);
                    }
                }
                Err(e) => {
                    if !sets.is_empty() && gains.is_ok() {
                        gains = Err(e.clone());
                    }
                    if baseline && replayed.is_ok() {
                        replayed = Err(e);
                    }
                }
            }
            graph.strip_replay_edges();
        };
    let paths = if super::super::step_numbers(trace).is_empty() {
        let (mut graph, collectives) = whole_graph(trace, options, replay);
        let ranks: Vec<RankId> = (0..trace.ranks.len() as u32).map(RankId).collect();
        add_replays(&mut graph, &ranks, &|graph| whole_window(trace, graph));
        super::super::search::report_of_graph(trace, &graph, collectives, options)
            .map(|report| vec![super::super::steps::whole_as_step(trace, report)])
    } else {
        let mut paths = Vec::new();
        for_each_step_graph(trace, options, None, replay, |mut step| {
            let (window, ranks) = (step_window(&step), step.ranks.clone());
            add_replays(&mut step.graph, &ranks, &|_| window.clone());
            paths.push(super::super::steps::step_paths(
                trace,
                &step,
                super::super::steps::PathDetail::Summary,
            )?);
            Ok(())
        })
        .map(|()| paths)
    };
    if let Err(e) = &paths {
        gains = Err(e.clone());
        replayed = Err(e.clone());
    }
    (
        paths,
        gains.map(Gains::finish),
        baseline.then_some(replayed),
    )
}

/// [`estimated_gains`] of one graph, from its replay: adds each set's gain on the latest end
/// of `ranks`.
pub(super) fn graph_gains(
    trace: &Trace,
    replay: &Simulations,
    ranks: &[RankId],
    sets: &[Vec<Scale>],
    modules: &[ModuleCalls],
    gains: &mut Gains,
) {
    let prepared = &replay.prepared;
    let mut in_window = vec![false; trace.ranks.len()];
    for r in ranks {
        in_window[r.0 as usize] = true;
    }
    // The window's ranks' traced ops, whose latest end in a simulation is the window's end.
    let members: Vec<usize> = (prepared.graph.nodes.iter().enumerate())
        .filter(|(_, n)| n.span().is_some() && in_window[n.rank.0 as usize])
        .map(|(v, _)| v)
        .collect();
    let latest = |times: &[Ns]| members.iter().map(|&v| times[v]).max();
    let Some(baseline) = latest(&replay.t0) else {
        return;
    };
    for (i, (set, modules)) in sets.iter().zip(modules).enumerate() {
        let changes = &set[..set.len().min(MAX_CHANGES)];
        let mut counts = ReplayReport::empty(changes);
        let predicted = predict(prepared, trace, changes, modules, &mut counts);
        if let Some(predicted) = latest(&predicted.t) {
            gains.sums[i] += baseline - predicted;
        }
        gains.selected[i] |= counts.changes.iter().any(|c| c.matched_ops > 0);
    }
}
