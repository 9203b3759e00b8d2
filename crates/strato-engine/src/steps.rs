//! `critical-path --step` over one input that is never held whole ([`StepWindows`]): the
//! input streamed once, its spans spilled to an anonymous temporary file while the step
//! survey is gathered ([`strato_analysis::paths::critical_path::windowed`]), then read back
//! part by part, each part holding the spans of consecutive steps (about [`PART_SPANS`] of
//! them: a step is never split), and the parts' paths put together. The result is the whole
//! trace's, and memory holds the survey and one part instead of the trace.
//!
//! Handled: one Chrome/Kineto JSON file or one profile directory, of a job of one rank (one
//! rank, not split by device). Anything else (several ranks, whose collectives must be
//! matched across every rank first; a partitioned store; `--graph-capture`; standard input)
//! is left to the whole trace: a multi-rank JSON file is given up on as soon as its second
//! rank shows, before anything is told.

use std::ops::Range;
use std::path::{Path, PathBuf};

use strato_analysis::paths::critical_path::windowed::{steps_result, StepPlan, StepSurvey};
use strato_analysis::paths::critical_path::{
    CriticalPath, CriticalPathResult, CriticalPathSettings,
};
use strato_io::spill::{SpanLog, SpilledSpans};
use strato_io::ImportOptions;
use strato_trace::Trace;

use crate::opening::Opening;
use crate::{Engine, EngineError, Result};

/// Spans a part holds, at most, beyond its first step's: enough for the graph of a few steps
/// of a large job, little beside a multi-GB trace.
pub const PART_SPANS: u64 = 1 << 17;

/// Parts at most (about): beyond `MAX_PARTS` x [`PART_SPANS`] spans, parts grow instead.
const MAX_PARTS: u64 = 256;

/// The opening of `critical-path`: with `--step`, one input read as the module docs say.
#[derive(Debug)]
pub struct StepWindows;

impl Opening<CriticalPath> for StepWindows {
    fn open(
        engine: &Engine,
        inputs: &[PathBuf],
        import: &ImportOptions,
        settings: &CriticalPathSettings,
    ) -> Result<Option<CriticalPathResult>> {
        if settings.step.is_empty() {
            return Ok(None);
        }
        engine.critical_path_steps_in_parts(inputs, import, &settings.step, PART_SPANS)
    }
}

/// What streaming gathers: the spilled spans, the survey, and why it stopped early.
struct Gathered {
    dir: PathBuf,
    log: SpanLog,
    survey: StepSurvey,
    /// The spill could not be written.
    failed: Option<std::io::Error>,
    /// The job is not one rank: left to the whole trace.
    not_one_rank: bool,
}

impl Gathered {
    fn new(dir: &Path) -> Result<Gathered> {
        Ok(Gathered {
            dir: dir.to_owned(),
            log: SpanLog::new(dir).map_err(|source| EngineError::Spill {
                dir: dir.to_owned(),
                source,
            })?,
            survey: StepSurvey::default(),
            failed: None,
            not_one_rank: false,
        })
    }

    /// Takes a batch: its spans surveyed and spilled. `Err` once the batch shows the input
    /// cannot be read this way (the stream may stop).
    fn add(&mut self, batch: &Trace) -> std::result::Result<(), String> {
        if self.failed.is_some() || self.not_one_rank {
            return Err("stopped".into());
        }
        for span in &batch.spans {
            self.survey.add_span(batch, span);
            if let Err(e) = self.log.push(span, batch.args_text(span.args).as_deref()) {
                self.failed = Some(e);
                return Err("stopped".into());
            }
        }
        if !self.survey.one_rank_job(batch) {
            self.not_one_rank = true;
            return Err("stopped".into());
        }
        Ok(())
    }

    fn spill_error(&self, source: std::io::Error) -> EngineError {
        EngineError::Spill {
            dir: self.dir.clone(),
            source,
        }
    }
}

impl Engine {
    /// `critical-path --step STEP` over `inputs` read in parts of about `part_spans` spans (see
    /// the module docs); `None` when the inputs are not handled that way.
    pub fn critical_path_steps_in_parts(
        &self,
        inputs: &[PathBuf],
        import: &ImportOptions,
        step: &str,
        part_spans: u64,
    ) -> Result<Option<CriticalPathResult>> {
        let [input] = inputs else { return Ok(None) };
        if self.attributes_graph_capture() || !one_rank_input(input) {
            return Ok(None);
        }
        // Spans only: the paths read no instant, counter or flow.
        let import = ImportOptions {
            projection: strato_io::Projection {
                instants: false,
                counters: false,
                flows: false,
                flow_ends: false,
                ..import.projection
            },
            ..import.clone()
        };
        let dir = std::env::temp_dir();
        let mut gathered = Gathered::new(&dir)?;
        let streamed = if strato_store::is_profile_dir(input) {
            let mut sink = |batch: &mut Trace| {
                let _ = gathered.add(batch);
            };
            self.stream_stored(inputs, &import, &mut sink)?
        } else {
            let mut sink = |batch: &mut Trace| {
                let added = gathered.add(batch);
                crate::drop_batch_events(batch);
                added
            };
            match self.stream_file(input, &import, &mut sink) {
                Err(_) if gathered.not_one_rank => return Ok(None),
                Err(_) if gathered.failed.is_some() => {
                    let e = gathered.failed.take().expect("checked");
                    return Err(gathered.spill_error(e));
                }
                other => other?,
            }
        };
        if let Some(e) = gathered.failed.take() {
            return Err(gathered.spill_error(e));
        }
        let Some(tables) = streamed else {
            return Ok(None);
        };
        if gathered.not_one_rank || !gathered.survey.one_rank_job(&tables) {
            return Ok(None);
        }
        let Gathered {
            dir, log, survey, ..
        } = gathered;
        let failed = |source| EngineError::Spill {
            dir: dir.clone(),
            source,
        };
        let spilled = log.finish().map_err(failed)?;
        let plan = survey
            .plan(&tables, step)
            .map_err(|e| EngineError::Analysis(format!("{}: {e}", input.display())))?;
        let parts = parts_of(&plan, &tables, &spilled, part_spans).map_err(failed)?;
        let files = distribute(&plan, &tables, spilled, &parts, &dir).map_err(failed)?;
        let mut steps = Vec::with_capacity(plan.numbers().len());
        for (range, file) in parts.into_iter().zip(files) {
            let part = part_of(&tables, &file).map_err(failed)?;
            drop(file);
            let paths = plan
                .paths(&part, range)
                .map_err(|e| EngineError::Analysis(format!("{}: {e}", input.display())))?;
            steps.extend(paths);
        }
        Ok(Some(steps_result(&tables, steps)))
    }
}

/// Whether `input` may be a job of one rank read this way: a regular file (a JSON trace; its
/// ranks show as it streams), or a profile directory of one rank (its metadata says).
fn one_rank_input(input: &Path) -> bool {
    if strato_store::is_profile_dir(input) {
        return strato_store::read_metadata(input)
            .ok()
            .and_then(|m| m.tables.get("ranks").map(|t| t.rows == 1))
            .unwrap_or(false);
    }
    input.is_file()
}

/// Consecutive steps in parts of about `part_spans` spans each (a step alone may hold more).
fn parts_of(
    plan: &StepPlan,
    tables: &Trace,
    spilled: &SpilledSpans,
    part_spans: u64,
) -> std::io::Result<Vec<Range<usize>>> {
    let mut per_step = vec![0u64; plan.numbers().len()];
    for spilled in spilled.read()? {
        plan.steps_of(tables, &spilled?.span, |step| per_step[step] += 1);
    }
    // At most about MAX_PARTS parts (each is a file open at once while they are written).
    let total: u64 = per_step.iter().sum();
    let part_spans = part_spans.max(total / MAX_PARTS);
    let mut parts = Vec::new();
    let (mut first, mut held) = (0, 0u64);
    for (step, &spans) in per_step.iter().enumerate() {
        if step > first && held + spans > part_spans {
            parts.push(first..step);
            (first, held) = (step, 0);
        }
        held += spans;
    }
    if first < per_step.len() {
        parts.push(first..per_step.len());
    }
    Ok(parts)
}

/// The spans of each part (the steps `parts`), in trace order, each in a file of its own: one
/// reading of `spilled` (dropped then), a span in several parts written to each.
fn distribute(
    plan: &StepPlan,
    tables: &Trace,
    spilled: SpilledSpans,
    parts: &[Range<usize>],
    dir: &Path,
) -> std::io::Result<Vec<SpilledSpans>> {
    let mut logs = parts
        .iter()
        .map(|_| SpanLog::new(dir))
        .collect::<std::io::Result<Vec<_>>>()?;
    let firsts: Vec<usize> = parts.iter().map(|r| r.start).collect();
    let mut to: Vec<usize> = Vec::new();
    for read in spilled.read()? {
        let read = read?;
        to.clear();
        plan.steps_of(tables, &read.span, |step| {
            let part = firsts.partition_point(|&first| first <= step) - 1;
            if !to.contains(&part) {
                to.push(part);
            }
        });
        for &part in &to {
            logs[part].push(&read.span, read.args.as_deref())?;
        }
    }
    drop(spilled);
    logs.into_iter().map(SpanLog::finish).collect()
}

/// The part of the trace a part's file holds: the trace's tables and the file's spans, with
/// their args.
fn part_of(tables: &Trace, file: &SpilledSpans) -> std::io::Result<Trace> {
    let mut part = crate::tables_of(tables);
    part.args = strato_trace::ArgsTable::uncompressed();
    part.spans.reserve(usize::try_from(file.len()).unwrap_or(0));
    for read in file.read()? {
        let read = read?;
        let mut span = read.span;
        span.args = read.args.as_deref().map(|text| part.args.push(text));
        part.spans.push(span);
    }
    Ok(part)
}
