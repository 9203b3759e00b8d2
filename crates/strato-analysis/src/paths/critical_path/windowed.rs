//! The per-step critical path of a trace that is never held whole ([`StepSurvey`],
//! [`StepPlan`]): the same steps, graphs and paths as [`super::critical_path_steps`], computed
//! from parts of the trace that each hold a few steps' spans.
//!
//! A front end that streams the trace (and keeps its spans somewhere it can read them again,
//! such as a spill file) works in three moves:
//! 1. every span, in trace order, goes to [`StepSurvey::add`] (with the batch's tables): the
//!    step annotations, the runtime calls that can launch device ops and the event records are
//!    kept, nothing else;
//! 2. [`StepSurvey::plan`] with the trace's tables gives the [`StepPlan`]: the steps asked
//!    for, and which of them every span belongs to ([`StepPlan::steps_of`], the rule of
//!    [`super::critical_path_steps`]);
//! 3. for consecutive steps `range`, a part of the trace holding the trace's tables and, in
//!    trace order, the spans that belong to one of those steps gives their paths
//!    ([`StepPlan::paths`]), equal to what the whole trace gives for them.
//!
//! Memory is the survey (a step annotation per step and rank, 24 bytes per runtime call, the
//! event records) and one part. A job of several ranks is surveyed file by file
//! ([`StepSurvey::append`]); its collectives are matched over every rank's collectives first
//! (as [`CriticalPathOptions::matched`] matches them) and each part given the members it
//! holds. Jobs whose ranks split by device ([`StepSurvey::splits_ranks`]) are not handled.

use std::collections::BTreeMap;
use std::ops::Range;

use strato_trace::{Level, Ns, Span, Trace, TrackKind};

use super::graph::TraceIndex;
use super::json::{collectives_json, step_json, steps_json, Names, StepJson};
use super::options::CriticalPathOptions;
use super::registration::{chosen_step, CriticalPathResult};
use super::shapes::CriticalPathError;
use super::steps::{
    call_of, graphs_of_steps, note_step, step_paths, CallSteps, PathDetail, StepGraph, StepRule,
};
use crate::distributed::collectives::is_collective_kernel;
use crate::registry::AnalysisError;

/// What the per-step critical path needs of the whole trace, gathered span by span.
#[derive(Debug, Default)]
pub struct StepSurvey {
    /// Per rank, its step annotations ([`super::rank_steps`]).
    steps: Vec<BTreeMap<u64, (Ns, Ns)>>,
    /// Runtime calls that can launch device ops, in trace order: rank, correlation, start.
    calls: Vec<(u32, u64, Ns)>,
    index: TraceIndex,
    /// Per rank, the devices running collective kernels (two or more: the job splits the rank,
    /// as [`super::registration::job_of`] does).
    collective_devices: Vec<Vec<i64>>,
}

impl StepSurvey {
    /// Adds the spans of `batch` (whose tables name their tracks and names), in trace order.
    pub fn add(&mut self, batch: &Trace) {
        for span in &batch.spans {
            self.add_span(batch, span);
        }
    }

    /// Adds one span of `trace`.
    pub fn add_span(&mut self, trace: &Trace, span: &Span) {
        let track = trace.track(span.track);
        let rank = track.rank.0;
        note_step(&mut self.steps, trace, span);
        self.index.note(trace, span);
        if !track.is_device() {
            // As `step_buckets` reads them: runtime calls on CPU tracks.
            if let Some(call) = call_of(span) {
                self.calls.push((rank, call, span.start));
            }
        } else if let TrackKind::DeviceQueue { device, .. } = track.kind {
            // As `split_multi_device_ranks` counts them.
            if span.level == Level::DeviceKernel && is_collective_kernel(trace.str(span.name)) {
                let at = rank as usize;
                if self.collective_devices.len() <= at {
                    self.collective_devices.resize_with(at + 1, Vec::new);
                }
                if !self.collective_devices[at].contains(&device) {
                    self.collective_devices[at].push(device);
                }
            }
        }
    }

    /// Whether the trace whose tables are `tables` is a job of one rank as the critical path
    /// reads it (one rank, not split by device).
    pub fn one_rank_job(&self, tables: &Trace) -> bool {
        tables.ranks.len() == 1 && !self.splits_ranks()
    }

    /// Whether a rank runs collective kernels on two devices or more: the job the critical
    /// path reads then has one rank per device ([`super::registration::job_of`]), which parts
    /// do not handle.
    pub fn splits_ranks(&self) -> bool {
        self.collective_devices.iter().any(|d| d.len() >= 2)
    }

    /// Adds the survey of the next file of a job, whose ranks come after the `first_rank`
    /// ranks of the files before it (its spans come after theirs in trace order).
    pub fn append(&mut self, other: StepSurvey, first_rank: u32) {
        let at = first_rank as usize;
        self.steps.resize_with(at, BTreeMap::new);
        self.steps.extend(other.steps);
        self.calls.extend(
            other
                .calls
                .into_iter()
                .map(|(rank, call, start)| (rank + first_rank, call, start)),
        );
        self.index.append(other.index, at);
        self.collective_devices.resize_with(at, Vec::new);
        self.collective_devices.extend(other.collective_devices);
    }

    /// The step numbers of every rank, in order (none: the trace has no step annotation).
    pub fn numbers(&self) -> Vec<u64> {
        let mut numbers: Vec<u64> = self.steps.iter().flat_map(|m| m.keys().copied()).collect();
        numbers.sort_unstable();
        numbers.dedup();
        numbers
    }

    /// The plan for `--step` `step` (`all` or a number) over the trace whose tables are
    /// `tables`: the errors are those of the whole trace's run (no step; no such step).
    pub fn plan(mut self, tables: &Trace, step: &str) -> Result<StepPlan, AnalysisError> {
        let ranks = tables.ranks.len();
        if self.steps.len() < ranks {
            self.steps.resize_with(ranks, BTreeMap::new);
        }
        let mut numbers = self.numbers();
        let only = chosen_step(&numbers, step)?;
        numbers.retain(|n| only.is_none_or(|o| o == *n));
        let rule = StepRule::new(&self.steps, &numbers);
        let mut calls = CallSteps::default();
        for &(rank, call, start) in &self.calls {
            rule.cpu_event(&mut calls, rank, start, Some(call), |_| {});
        }
        self.index.cover(ranks);
        Ok(StepPlan {
            steps: self.steps,
            numbers,
            rule,
            calls,
            index: self.index,
        })
    }
}

/// The steps of a trace and which of them each span belongs to (see the module docs).
#[derive(Debug)]
pub struct StepPlan {
    steps: Vec<BTreeMap<u64, (Ns, Ns)>>,
    numbers: Vec<u64>,
    rule: StepRule,
    calls: CallSteps,
    index: TraceIndex,
}

impl StepPlan {
    /// The step numbers, in order; a step is named by its index here.
    pub fn numbers(&self) -> &[u64] {
        &self.numbers
    }

    /// Hands `found` each step (index into [`StepPlan::numbers`]) that `span` of the trace
    /// (whose tables are `tables`) belongs to: a CPU span to the steps whose annotation holds
    /// its start, a device op to those of its launching call (see
    /// [`super::critical_path_steps`]).
    pub fn steps_of(&self, tables: &Trace, span: &Span, mut found: impl FnMut(usize)) {
        let track = tables.track(span.track);
        let rank = track.rank.0;
        if track.is_device() {
            self.rule
                .device_span(&self.calls, rank, span, |step| found(step as usize));
        } else {
            self.rule
                .cpu_steps(rank, span.start, |step| found(step as usize));
        }
    }

    /// The paths of the steps `range` (indices into [`StepPlan::numbers`]) from `part`: the
    /// trace's tables with, in trace order, every span that belongs to one of them (and any
    /// others). Each step as the result gives it ([`steps_result`]): its paths' events kept,
    /// their segments not.
    ///
    /// `options` are the job's cross-rank inputs with the part's span ids (a collective's
    /// members in other parts left out); `names` shares the names of every part's paths.
    pub fn paths(
        &self,
        part: &Trace,
        range: Range<usize>,
        options: &CriticalPathOptions,
        names: &mut Names,
    ) -> Result<Vec<StepJson>, CriticalPathError> {
        let mut out = Vec::new();
        self.graphs(part, range, options, false, |step| {
            let paths = step_paths(part, &step, PathDetail::Full)?;
            out.push(step_json(paths, names));
            Ok(())
        })?;
        Ok(out)
    }

    /// Hands `visit` the graph of each step of `range` from `part` (as [`StepPlan::paths`]
    /// reads a part), built for the replay when `replay`.
    pub(super) fn graphs(
        &self,
        part: &Trace,
        range: Range<usize>,
        options: &CriticalPathOptions,
        replay: bool,
        visit: impl FnMut(StepGraph) -> Result<(), CriticalPathError>,
    ) -> Result<(), CriticalPathError> {
        graphs_of_steps(
            part,
            options,
            &self.steps,
            &self.numbers[range],
            &self.index,
            replay,
            visit,
        )
    }
}

/// The result of `critical-path --step` from every step asked for, in step order
/// ([`StepPlan::paths`] of consecutive parts), for the job whose tables are `tables` and whose
/// cross-rank inputs are `options` (with the whole job's span ids): what
/// [`super::CriticalPath`] gives on the whole trace.
pub fn steps_result(
    tables: &Trace,
    options: &CriticalPathOptions,
    steps: Vec<StepJson>,
) -> CriticalPathResult {
    let instances = options.collectives.as_ref().map_or(0, Vec::len);
    let mut result = steps_json(Vec::new(), collectives_json(tables.ranks.len(), instances));
    result.steps = steps;
    CriticalPathResult::Steps(result)
}
