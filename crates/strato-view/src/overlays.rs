//! The analyses' answers placed on the timeline: the `ProfilerStep` windows, the critical path
//! of a step (its events, by span), `advise`'s findings with their evidence, and the HTML
//! report, whose sections link back into the timeline.
//!
//! Computed on first request and kept (the critical path per step asked): opening a trace to
//! look at it does not pay for analyses nobody asks for. The analyses are the same code as
//! `strato critical-path` and `strato advise` (the critical path over every rank of the trace,
//! with collectives matched and clocks aligned as `strato collectives` does; advise through
//! the registry, as the command runs it). The critical path and the collectives read the job
//! those commands read ([`job_of`]: a process driving several GPUs split into one rank per
//! device; the split keeps every span and track where it is, so span ids stay the
//! timeline's), and the collectives are matched once for both.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{json, Value};
use strato_analysis::distributed::clock_align::ClockAlignment;
use strato_analysis::distributed::collectives::{
    match_collectives, measure, rank_summaries, CollectiveInstance,
};
use strato_analysis::paths::critical_path::registration::job_of;
use strato_analysis::paths::critical_path::{
    critical_path, critical_path_steps, rank_steps, CriticalPathOptions, RankCriticalPath,
};
use strato_trace::{Ns, Trace};

/// The shift that puts each track's times on the job's one clock (indexed by track): the clock
/// alignment `strato collectives` estimates from the symmetric collectives ([`measure`]) for
/// the rank the track belongs to in the job ([`job_of`]), as the critical path, `advise` and
/// `whatif` use it. Empty when every rank keeps its own clock (one rank, no symmetric
/// collective, offsets within the alignment's error).
pub fn job_clock_shifts(trace: &Trace) -> Vec<Ns> {
    let job = job_of(trace);
    if job.ranks.len() < 2 {
        return Vec::new();
    }
    let shifts = collectives_of(&job).1.shifts(job.ranks.len());
    if shifts.iter().all(|&s| s == 0) {
        return Vec::new();
    }
    job.tracks
        .iter()
        .map(|t| shifts.get(t.rank.0 as usize).copied().unwrap_or(0))
        .collect()
}

/// The collectives of `job` matched across its ranks and the clock alignment they give, as
/// `strato collectives` finds them.
fn collectives_of(job: &Trace) -> (Vec<CollectiveInstance>, ClockAlignment) {
    let ranks = rank_summaries(job);
    let mut instances = match_collectives(&ranks);
    let clock = measure(&ranks, &mut instances);
    (instances, clock)
}

/// Moves every time of `trace` by its track's shift (`shifts`, indexed by track, as
/// [`job_clock_shifts`] gives them; nothing when empty): [`Trace::shift_tracks`].
pub fn onto_job_clock(trace: &mut Trace, shifts: &[Ns]) {
    trace.shift_tracks(shifts);
}

/// One `ProfilerStep#N` on one rank: its annotation's start and end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepOnRank {
    pub rank_index: u32,
    pub start: Ns,
    pub end: Ns,
}

/// The critical paths of one step (or the whole trace), or why they could not be found.
pub type StepPaths = Arc<Result<Vec<RankCriticalPath>, String>>;

/// The overlays of one trace, computed when first asked.
#[derive(Debug, Default)]
pub struct Overlays {
    steps: OnceLock<BTreeMap<u64, Vec<StepOnRank>>>,
    /// The job split per device, when [`job_of`] splits it.
    job: OnceLock<Option<Trace>>,
    /// The job's collectives matched across ranks, and the critical path's options built on
    /// them.
    matched: OnceLock<(Vec<CollectiveInstance>, CriticalPathOptions)>,
    paths: Mutex<HashMap<Option<u64>, StepPaths>>,
    findings: OnceLock<Result<Value, String>>,
    report: OnceLock<String>,
}

impl Overlays {
    /// The `ProfilerStep#N` annotations of every rank (CPU tracks), by number, as the
    /// critical path analysis windows its steps ([`rank_steps`]: a number annotated twice on a
    /// rank keeps the earliest).
    pub fn steps(&self, trace: &Trace) -> &BTreeMap<u64, Vec<StepOnRank>> {
        self.steps.get_or_init(|| {
            let mut steps: BTreeMap<u64, Vec<StepOnRank>> = BTreeMap::new();
            for (rank, numbered) in rank_steps(trace).into_iter().enumerate() {
                for (number, (start, end)) in numbered {
                    steps.entry(number).or_default().push(StepOnRank {
                        rank_index: rank as u32,
                        start,
                        end,
                    });
                }
            }
            steps
        })
    }

    /// The critical path of every rank in step `step` (the whole trace when `None`), as the
    /// analysis gives it, kept once computed.
    pub fn critical_path(&self, trace: &Trace, step: Option<u64>) -> StepPaths {
        if let Some(done) = self.lock().get(&step) {
            return Arc::clone(done);
        }
        let job = self.job(trace);
        let options = &self.matched(trace).1;
        let trace = job;
        let result = match step {
            Some(n) => critical_path_steps(trace, options, Some(n))
                .map(|steps| {
                    steps
                        .into_iter()
                        .flat_map(|s| s.ranks.into_iter().map(|r| r.path))
                        .collect()
                })
                .map_err(|e| e.to_string()),
            None => critical_path(trace, options)
                .map(|r| r.ranks)
                .map_err(|e| e.to_string()),
        };
        let result = Arc::new(result);
        self.lock().insert(step, Arc::clone(&result));
        result
    }

    /// `advise`'s answer (its JSON, as `strato advise --json` prints it).
    pub fn findings(&self, trace: &Trace) -> &Result<Value, String> {
        self.findings.get_or_init(|| {
            let advise = strato_engine::registry::find("advise")
                .ok_or_else(|| "advise is not registered".to_string())?;
            let outcome = advise.run_trace(trace, &[]).map_err(|e| e.to_string())?;
            serde_json::from_str(&outcome.json()).map_err(|e| e.to_string())
        })
    }

    /// The HTML report of the trace (`strato report`'s page: the same analyses, sections and
    /// registered tables; with `baseline`, its label and side of the diff, the diff section as
    /// `strato report --baseline` adds it), its sections linking into the viewer as `viewer`
    /// says. Built on
    /// first request, on the request's thread, and kept; later requests wait for it.
    pub fn report(
        &self,
        trace: &Trace,
        title: &str,
        viewer: strato_report::ViewerLinks,
        baseline: Option<(
            &str,
            Option<&strato_analysis::compare::registration::DiffSides>,
        )>,
    ) -> &str {
        self.report.get_or_init(|| {
            let analyzed = strato_analysis::analyzed::Analyzed::new(trace);
            let options = strato_report::ReportOptions {
                title: title.to_owned(),
                generator: format!("strato view {}", env!("CARGO_PKG_VERSION")),
                // The server holds the trace and its index already; one thread's working
                // memory, not two.
                parallel: false,
            };
            let mut input = strato_report::ReportInput::from_analyzed(&analyzed, &options, &mut ());
            input.add_registered(&analyzed);
            if let Some(baseline) = baseline {
                input.add_baseline(baseline, (title, &analyzed), &mut ());
            }
            input.viewer = Some(viewer);
            strato_report::render(&input)
        })
    }

    /// The collectives matched across ranks, as `strato collectives` matches them (with two
    /// ranks or more; none otherwise).
    pub fn collectives(&self, trace: &Trace) -> &[CollectiveInstance] {
        &self.matched(trace).0
    }

    /// The job the cross-rank overlays read ([`job_of`]).
    fn job<'t>(&'t self, trace: &'t Trace) -> &'t Trace {
        self.job
            .get_or_init(|| match job_of(trace) {
                std::borrow::Cow::Owned(split) => Some(split),
                std::borrow::Cow::Borrowed(_) => None,
            })
            .as_ref()
            .unwrap_or(trace)
    }

    fn matched(&self, trace: &Trace) -> &(Vec<CollectiveInstance>, CriticalPathOptions) {
        self.matched.get_or_init(|| {
            let job = self.job(trace);
            if job.ranks.len() < 2 {
                return (Vec::new(), CriticalPathOptions::default());
            }
            let (instances, clock) = collectives_of(job);
            let options = CriticalPathOptions::from_matched(job, &instances, &clock);
            (instances, options)
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Option<u64>, StepPaths>> {
        // A panic while computing a path leaves the map as it was: use it anyway.
        self.paths.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The JSON of the steps, times since `origin`.
pub fn steps_json(steps: &BTreeMap<u64, Vec<StepOnRank>>, origin: Ns) -> Value {
    let list: Vec<Value> = steps
        .iter()
        .map(|(n, on)| {
            let ranks: Vec<Value> = on
                .iter()
                .map(|s| {
                    json!({"rank_index": s.rank_index, "start_ns": s.start - origin, "end_ns": s.end - origin})
                })
                .collect();
            json!({"number": n, "name": format!("ProfilerStep#{n}"), "ranks": ranks})
        })
        .collect();
    json!({ "steps": list })
}
