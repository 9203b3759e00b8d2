//! `critical-path --step` and `whatif` over one input that is never held whole
//! ([`StepWindows`], [`WhatIfSteps`]): the
//! input streamed once, its spans spilled to an anonymous temporary file while the step
//! survey is gathered ([`strato_analysis::paths::critical_path::windowed`]), then read back
//! part by part, each part holding the spans of consecutive steps (about [`PART_SPANS`] of
//! them: a step is never split), and the parts' paths put together. The result is the whole
//! trace's, and memory holds the survey and one part instead of the trace.
//!
//! Handled: one Chrome/Kineto JSON file or one profile directory of a job of one rank,
//! several rank files (a directory of ranks: each file imported on its own, surveyed, spilled
//! and reduced to its collective calls, [`Engine::map_ranks`]; the collectives then matched
//! across the job as the whole trace matches them, and each part given the members it holds),
//! and a partitioned store the same way, leaf by leaf ([`Engine::map_ranks_or_leaves`]).
//! Left to the whole trace: jobs whose ranks split by device, one file or profile of several
//! ranks (a JSON file is given up on as soon as its second rank shows, before anything is
//! told), `--graph-capture`, standard input.

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::path::{Path, PathBuf};

use strato_analysis::analyzed::Analyzed;
use strato_analysis::distributed::collectives::{
    match_collectives, measure, rank_summaries, RankCollectives,
};
use strato_analysis::paths::critical_path::json::Names;
use strato_analysis::paths::critical_path::replay::{PartsReplay, ReplayWindows};
use strato_analysis::paths::critical_path::windowed::{steps_result, StepPlan, StepSurvey};
use strato_analysis::paths::critical_path::{
    CollectiveInstance, CollectiveMember, CriticalPath, CriticalPathError, CriticalPathOptions,
    CriticalPathResult, CriticalPathSettings,
};
use strato_analysis::paths::whatif::{WhatIf, WhatIfResult, WhatIfSettings};
use strato_analysis::registry::Analysis;
use strato_io::spill::{SpanLog, SpilledSpan, SpilledSpans};
use strato_io::ImportOptions;
use strato_trace::{Span, SpanId, StrId, Trace, TrackId};

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

/// The opening of `whatif`: its steps read as the module docs say (a trace without steps read
/// back whole from the spill; inputs not handled so left to the whole trace).
#[derive(Debug)]
pub struct WhatIfSteps;

impl Opening<WhatIf> for WhatIfSteps {
    fn open(
        engine: &Engine,
        inputs: &[PathBuf],
        import: &ImportOptions,
        settings: &WhatIfSettings,
    ) -> Result<Option<WhatIfResult>> {
        engine.whatif_in_parts(inputs, import, settings, PART_SPANS)
    }
}

/// What streaming gathers: the spilled spans, the survey, what the use of the parts notes
/// ([`Noted`]), and why it stopped early.
struct Gathered<E> {
    dir: PathBuf,
    log: SpanLog,
    survey: StepSurvey,
    noted: E,
    /// The spill could not be written.
    failed: Option<std::io::Error>,
    /// The job is not one rank: left to the whole trace.
    not_one_rank: bool,
}

impl<E: Noted> Gathered<E> {
    fn new(dir: &Path, noted: E) -> Result<Gathered<E>> {
        Ok(Gathered {
            dir: dir.to_owned(),
            log: SpanLog::new(dir).map_err(|source| EngineError::Spill {
                dir: dir.to_owned(),
                source,
            })?,
            survey: StepSurvey::default(),
            noted,
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
        if let Err(e) = survey_and_spill(batch, &mut self.survey, &mut self.noted, &mut self.log) {
            self.failed = Some(e);
            return Err("stopped".into());
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
        let dir = std::env::temp_dir();
        let Some(job) = self.job_in_parts(inputs, import, (), &dir)? else {
            return Ok(None);
        };
        let mut steps = Vec::new();
        let mut names = Names::default();
        let (tables, options, ()) = job.each_part(
            &inputs[0],
            step,
            part_spans,
            &dir,
            |(), plan, part, range, options| {
                steps.extend(plan.paths(part, range, options, &mut names)?);
                Ok(())
            },
        )?;
        Ok(Some(steps_result(&tables, &options, steps)))
    }

    /// `whatif` over the steps of `inputs` read in parts of about `part_spans` spans, as
    /// `critical-path --step` reads them (see the module docs): every window, change and
    /// note the whole trace gives. A trace without steps has one window, the whole trace: its
    /// spans are read back from the spill as one trace. `None` when the inputs are not handled
    /// that way.
    pub fn whatif_in_parts(
        &self,
        inputs: &[PathBuf],
        import: &ImportOptions,
        settings: &WhatIfSettings,
        part_spans: u64,
    ) -> Result<Option<WhatIfResult>> {
        let changes = settings
            .scales()
            .map_err(|e| EngineError::InvalidOption(e.to_string()))?;
        let dir = std::env::temp_dir();
        let replay = PartsReplay::new(&changes);
        let Some(job) = self.job_in_parts(inputs, import, replay, &dir)? else {
            return Ok(None);
        };
        let input = &inputs[0];
        let windows = (settings.windows(&job.survey.numbers()))
            .map_err(|e| EngineError::Analysis(format!("{}: {e}", input.display())))?;
        let step = match windows {
            // One window, the whole trace, or the steps read from one simulation of it: its
            // spans read back from the spill as one trace, so that the input is not read a
            // second time.
            ReplayWindows::Whole | ReplayWindows::Across(_) => {
                let trace = job.whole().map_err(|source| EngineError::Spill {
                    dir: dir.clone(),
                    source,
                })?;
                let result = WhatIf::run(&Analyzed::new(&trace), settings);
                return (result.map(Some))
                    .map_err(|e| EngineError::Analysis(format!("{}: {e}", input.display())));
            }
            ReplayWindows::Steps(None) => "all".to_owned(),
            ReplayWindows::Steps(Some(n)) => n.to_string(),
        };
        let (_, _, replay) = job.each_part(
            input,
            &step,
            part_spans,
            &dir,
            |replay, plan, part, range, options| replay.add_part(plan, part, range, options),
        )?;
        Ok(Some(WhatIfResult::of_report(replay.finish())))
    }

    /// The job of `inputs` ready to be read in parts, spilled to `dir`, with what `noted`
    /// notes of every span; `None` when the inputs are not handled that way (see the module
    /// docs).
    fn job_in_parts<E: Noted>(
        &self,
        inputs: &[PathBuf],
        import: &ImportOptions,
        noted: E,
        dir: &Path,
    ) -> Result<Option<Job<E>>> {
        if self.attributes_graph_capture() {
            return Ok(None);
        }
        if self.store_leaves(inputs).is_some()
            || self
                .rank_files(inputs)
                .is_some_and(|files| files.len() >= 2)
        {
            return self.job_by_rank_file(inputs, import, noted, dir);
        }
        let [input] = inputs else { return Ok(None) };
        if !crate::stream::one_rank_input(input) {
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
        let mut gathered = Gathered::new(dir, noted)?;
        let streamed = self.stream_one(inputs, &import, &mut |batch| gathered.add(batch))?;
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
            dir,
            log,
            survey,
            noted,
            ..
        } = gathered;
        let spilled = log.finish().map_err(|source| EngineError::Spill {
            dir: dir.clone(),
            source,
        })?;
        Ok(Some(Job {
            tables,
            survey,
            options: CriticalPathOptions::default(),
            files: vec![JobFile {
                spilled,
                track_base: 0,
                strings: None,
            }],
            noted,
        }))
    }

    /// [`Engine::job_in_parts`] over several rank files: each imported on its own
    /// ([`Engine::map_ranks`]), surveyed, spilled and reduced to its collective calls and
    /// tables; the collectives matched across the job as [`CriticalPathOptions::matched`]
    /// matches them.
    fn job_by_rank_file<E: Noted>(
        &self,
        inputs: &[PathBuf],
        import: &ImportOptions,
        noted: E,
        dir: &Path,
    ) -> Result<Option<Job<E>>> {
        let Some(streamed) =
            self.map_ranks_or_leaves(inputs, import, |trace| surveyed(trace, dir, noted.clone()))?
        else {
            return Ok(None);
        };
        let stored = streamed.stored;
        let offsets = streamed.offsets();
        let mut tables = Trace::default();
        let mut survey = StepSurvey::default();
        let mut summaries = Vec::new();
        let mut files = Vec::new();
        let mut noted = noted;
        for (part, (first_rank, first_span)) in streamed.parts.into_iter().zip(offsets) {
            let file = part.value.map_err(|source| EngineError::Spill {
                dir: dir.to_owned(),
                source,
            })?;
            summaries.extend(crate::collectives::moved_summaries(
                &file.summaries,
                &part.job_ranks,
                first_rank,
                first_span,
            ));
            let strings: Vec<StrId> = (file.tables.strings.iter())
                .map(|(_, text)| tables.strings.intern(text))
                .collect();
            let track_base = tables.tracks.len() as u32;
            survey.append(file.survey, first_rank);
            noted.append(file.noted, track_base);
            tables.append(file.tables);
            files.push(JobFile {
                spilled: file.spilled,
                track_base,
                strings: Some(strings),
            });
        }
        // A store's ranks are as stored (their claims were checked at its import).
        if !stored {
            strato_io::ranks::note_rank_claims(&mut tables);
        }
        if survey.splits_ranks() {
            return Ok(None);
        }
        let mut instances = match_collectives(&summaries);
        let clock = measure(&summaries, &mut instances);
        let options = CriticalPathOptions::from_matched(&tables, &instances, &clock);
        Ok(Some(Job {
            tables,
            survey,
            options,
            files,
            noted,
        }))
    }
}

/// What a use of the parts notes of every span while the input streams, beside the step
/// survey (the replay's module calls, say; `()`: nothing), file by file for a job of several
/// files.
trait Noted: Clone + Send + Sync {
    /// One span of the input (`trace` holds its tables), in trace order.
    fn add_span(&mut self, trace: &Trace, span: &Span);
    /// What the next file noted (with its own ids), its tracks after the `track_base` tracks
    /// of the files before it.
    fn append(&mut self, other: Self, track_base: u32);
}

impl Noted for () {
    fn add_span(&mut self, _: &Trace, _: &Span) {}
    fn append(&mut self, (): (), _: u32) {}
}

impl Noted for PartsReplay {
    fn add_span(&mut self, trace: &Trace, span: &Span) {
        PartsReplay::add_span(self, trace, span);
    }
    fn append(&mut self, other: PartsReplay, track_base: u32) {
        PartsReplay::append(self, other, track_base);
    }
}

/// Each span of `trace` (a streamed batch, or a whole rank file) surveyed and spilled with its
/// args text, in trace order.
fn survey_and_spill(
    trace: &Trace,
    survey: &mut StepSurvey,
    noted: &mut impl Noted,
    log: &mut SpanLog,
) -> std::io::Result<()> {
    for span in &trace.spans {
        survey.add_span(trace, span);
        noted.add_span(trace, span);
        log.push(span, trace.args_text(span.args).as_deref())?;
    }
    Ok(())
}

/// What a rank file gives the parts: its spans spilled, its survey, what was noted, its
/// collective calls and its tables (every id the file's own).
struct Surveyed<E> {
    spilled: SpilledSpans,
    survey: StepSurvey,
    noted: E,
    summaries: Vec<RankCollectives>,
    tables: Trace,
}

fn surveyed<E: Noted>(trace: &Trace, dir: &Path, mut noted: E) -> std::io::Result<Surveyed<E>> {
    let mut log = SpanLog::new(dir)?;
    let mut survey = StepSurvey::default();
    survey_and_spill(trace, &mut survey, &mut noted, &mut log)?;
    Ok(Surveyed {
        spilled: log.finish()?,
        survey,
        noted,
        summaries: rank_summaries(trace),
        tables: trace.tables(),
    })
}

/// One file's spans in the job: spilled with the file's ids, and how they move into the job's.
struct JobFile {
    spilled: SpilledSpans,
    /// Tracks of the files before it.
    track_base: u32,
    /// The file's string ids -> the job's (`None`: the same).
    strings: Option<Vec<StrId>>,
}

/// A job ready to be read in parts: its tables, survey and cross-rank inputs (with the job's
/// span ids), its files' spans in trace order, and what was noted of them.
struct Job<E> {
    tables: Trace,
    survey: StepSurvey,
    options: CriticalPathOptions,
    files: Vec<JobFile>,
    noted: E,
}

impl<E> Job<E> {
    /// The whole job as one trace: its tables and every span of its files, with their args.
    fn whole(self) -> std::io::Result<Trace> {
        trace_of(&self.tables, job_spans(&self.files))
    }

    /// Reads the steps `step` asks for in parts of about `part_spans` spans, spilled to `dir`,
    /// and hands each part to `visit`, in step order; gives back the job's tables, its
    /// cross-rank inputs and what was noted. Errors name `input`.
    fn each_part(
        self,
        input: &Path,
        step: &str,
        part_spans: u64,
        dir: &Path,
        mut visit: impl FnMut(
            &mut E,
            &StepPlan,
            &Trace,
            Range<usize>,
            &CriticalPathOptions,
        ) -> std::result::Result<(), CriticalPathError>,
    ) -> Result<(Trace, CriticalPathOptions, E)> {
        let failed = |source| EngineError::Spill {
            dir: dir.to_owned(),
            source,
        };
        let analysis =
            |e: &dyn std::fmt::Display| EngineError::Analysis(format!("{}: {e}", input.display()));
        let Job {
            tables,
            survey,
            options,
            files,
            mut noted,
        } = self;
        let plan = survey.plan(&tables, step).map_err(|e| analysis(&e))?;
        let parts = parts_of(&plan, &tables, &files, part_spans).map_err(failed)?;
        let members: HashSet<u32> = (options.collectives.iter().flatten())
            .flat_map(|i| i.members.iter().map(|m| m.span.0))
            .collect();
        let spilled = distribute(&plan, &tables, files, &parts, dir, &members).map_err(failed)?;
        for (range, (file, held)) in parts.into_iter().zip(spilled) {
            let part = part_of(&tables, &file).map_err(failed)?;
            drop(file);
            visit(
                &mut noted,
                &plan,
                &part,
                range,
                &part_options(&options, &held),
            )
            .map_err(|e| analysis(&e))?;
        }
        Ok((tables, options, noted))
    }
}

/// Every span of the job's files, in trace order, with the job's ids.
fn job_spans(files: &[JobFile]) -> impl Iterator<Item = std::io::Result<SpilledSpan>> + '_ {
    files.iter().flat_map(|file| {
        let reader = file.spilled.read();
        let (spans, error) = match reader {
            Ok(spans) => (Some(spans), None),
            Err(e) => (None, Some(Err(e))),
        };
        error
            .into_iter()
            .chain(spans.into_iter().flatten().map(move |read| {
                let mut read = read?;
                read.span.track = TrackId(read.span.track.0 + file.track_base);
                if let Some(map) = &file.strings {
                    let id = |s: StrId| map.get(s.0 as usize).copied().unwrap_or(s);
                    read.span.name = id(read.span.name);
                    read.span.category = id(read.span.category);
                }
                Ok(read)
            }))
    })
}

/// The cross-rank inputs of a part: the job's, each collective instance keeping the members
/// the part holds (`held`: job span id -> the part's), with the part's span ids.
fn part_options(options: &CriticalPathOptions, held: &[(u32, u32)]) -> CriticalPathOptions {
    let Some(instances) = &options.collectives else {
        return options.clone();
    };
    let local: HashMap<u32, u32> = held.iter().copied().collect();
    CriticalPathOptions {
        collectives: Some(
            instances
                .iter()
                .map(|instance| CollectiveInstance {
                    members: (instance.members.iter())
                        .filter_map(|m| {
                            local.get(&m.span.0).map(|&id| CollectiveMember {
                                rank: m.rank,
                                span: SpanId(id),
                            })
                        })
                        .collect(),
                })
                .collect(),
        ),
        clock_shift: options.clock_shift.clone(),
    }
}

/// Consecutive steps in parts of about `part_spans` spans each (a step alone may hold more).
fn parts_of(
    plan: &StepPlan,
    tables: &Trace,
    files: &[JobFile],
    part_spans: u64,
) -> std::io::Result<Vec<Range<usize>>> {
    let mut per_step = vec![0u64; plan.numbers().len()];
    for read in job_spans(files) {
        plan.steps_of(tables, &read?.span, |step| per_step[step] += 1);
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

/// The collective members a part holds: the job's span id -> the part's.
type HeldMembers = Vec<(u32, u32)>;

/// The spans of each part (the steps `parts`), in trace order, each in a file of its own: one
/// reading of the job's files (dropped then), a span in several parts written to each. With
/// each part's file, the collective members it holds (`members`: job span ids): job id ->
/// the part's.
fn distribute(
    plan: &StepPlan,
    tables: &Trace,
    files: Vec<JobFile>,
    parts: &[Range<usize>],
    dir: &Path,
    members: &HashSet<u32>,
) -> std::io::Result<Vec<(SpilledSpans, HeldMembers)>> {
    let mut logs = parts
        .iter()
        .map(|_| SpanLog::new(dir))
        .collect::<std::io::Result<Vec<_>>>()?;
    let mut held: Vec<HeldMembers> = vec![Vec::new(); parts.len()];
    let firsts: Vec<usize> = parts.iter().map(|r| r.start).collect();
    let mut to: Vec<usize> = Vec::new();
    for (id, read) in job_spans(&files).enumerate() {
        let read = read?;
        to.clear();
        plan.steps_of(tables, &read.span, |step| {
            let part = firsts.partition_point(|&first| first <= step) - 1;
            if !to.contains(&part) {
                to.push(part);
            }
        });
        let id = id as u32;
        for &part in &to {
            if members.contains(&id) {
                held[part].push((id, logs[part].len() as u32));
            }
            logs[part].push(&read.span, read.args.as_deref())?;
        }
    }
    drop(files);
    logs.into_iter()
        .map(SpanLog::finish)
        .zip(held)
        .map(|(file, held)| Ok((file?, held)))
        .collect()
}

/// The part of the trace a part's file holds: the trace's tables and the file's spans, with
/// their args.
fn part_of(tables: &Trace, file: &SpilledSpans) -> std::io::Result<Trace> {
    let mut part = trace_of(tables, std::iter::empty())?;
    part.spans.reserve(usize::try_from(file.len()).unwrap_or(0));
    add_spans(&mut part, file.read()?)?;
    Ok(part)
}

/// The trace's tables and `spans` (spilled), with their args.
fn trace_of(
    tables: &Trace,
    spans: impl Iterator<Item = std::io::Result<SpilledSpan>>,
) -> std::io::Result<Trace> {
    let mut trace = tables.tables();
    trace.args = strato_trace::ArgsTable::uncompressed();
    add_spans(&mut trace, spans)?;
    Ok(trace)
}

/// Adds `spans` (spilled) to `part`, with their args.
fn add_spans(
    part: &mut Trace,
    spans: impl Iterator<Item = std::io::Result<SpilledSpan>>,
) -> std::io::Result<()> {
    for read in spans {
        let read = read?;
        let mut span = read.span;
        span.args = read.args.as_deref().map(|text| part.args.push(text));
        part.spans.push(span);
    }
    Ok(())
}
