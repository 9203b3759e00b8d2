//! Presenters: the self-contained HTML report (`strato report`) with SVG plots.
//!
//! This crate decides which analyses a report shows ([`ReportInput::from_analyzed`], on an
//! [`Analyzed`] profile, and [`ReportInput::add_baseline`] with [`baseline_side`] for the
//! diff) and presents their
//! results; it never reads a trace file or calls an importer. [`render`] writes one
//! HTML document: inline CSS, inline SVG, no script, no network, so it opens from `file://`
//! and can be mailed. Every text that comes from data (operation, kernel, file names) goes
//! through [`html::esc`].
//!
//! - [`html`]: the escaping function and the HTML builder;
//! - [`svg`]: one module per kind of plot (stacked/grouped bars, line, log-log scatter,
//!   timeline);
//! - [`sections`]: one function per report section, each drawing its plot and the table
//!   behind it, or saying why the profile has no data for it.
//!
//! Size bound (see `docs/report.md`): series are downsampled to at most
//! [`svg::line::MAX_POINTS`] points, the kernel ranking keeps the top [`KERNEL_TOP`] and folds
//! the rest, tables keep at most [`TABLE_ROWS`] rows, names are shortened to
//! [`NAME_CHARS`] characters in tables; a report stays under [`SIZE_BOUND_BYTES`] (tested on
//! every dev trace).

pub mod html;
pub mod sections;
pub mod svg;

use std::panic::{catch_unwind, AssertUnwindSafe};

use strato_analysis::advise::{advise_matched, AdviseReport, AdviseSettings};
use strato_analysis::analyzed::Analyzed;
use strato_analysis::compare::diff::DiffReport;
use strato_analysis::compare::registration::{Diff, DiffOutput, DiffSettings, DiffSides};
use strato_analysis::cross_stack::breakdown::{Breakdown, BreakdownReport};
use strato_analysis::cross_stack::layers::{Layers, LayersResult};
use strato_analysis::cross_stack::modules::{Modules, ModulesReport};
use strato_analysis::cross_stack::samples::{cpu_samples, CpuSamples};
use strato_analysis::device_time::busy::{busy_series, BusySeries, DEFAULT_BUCKET_NS};
use strato_analysis::device_time::kernel_stats::{
    fold_top, KernelStatsReport, Kernels, KernelsOptions,
};
use strato_analysis::device_time::memory::{Memory, MemoryReport, MemorySettings};
use strato_analysis::device_time::util::{Util, UtilResult};
use strato_analysis::distributed::collectives::{Collectives, CollectivesResult};
use strato_analysis::info::InfoReport;
use strato_analysis::paths::critical_path::replay::{
    paths_gains_and_replay, BaselineReplay, Scale,
};
use strato_analysis::paths::critical_path::{
    CriticalPathError, CriticalPathOptions, StepCriticalPath,
};
use strato_analysis::patterns::iterations::{Iterations, IterationsResult};
use strato_analysis::registry::{Analysis, Comparison, InReport, NoOptions};
use strato_trace::Ns;

/// Kernels shown in the ranking before the rest is folded into one bar.
pub const KERNEL_TOP: usize = 30;
/// Most rows of any table in the report.
pub const TABLE_ROWS: usize = 200;
/// Longest name in a table cell (the full name is in the plots' tooltips up to this too).
pub const NAME_CHARS: usize = 160;
/// The documented bound on a report's size.
pub const SIZE_BOUND_BYTES: usize = 2 * 1024 * 1024;

/// Why a report part has no result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PartError {
    /// The analysis does not run on this profile (its own error, as `strato NAME` gives it).
    #[error("The {analysis} analysis did not run on this profile: {message}")]
    Refused {
        /// The analysis's registered name.
        analysis: &'static str,
        message: String,
    },
    /// The analysis panicked on this profile (a bug): the section says so instead of the whole
    /// report being lost.
    #[error("The {analysis} analysis failed on this profile (a bug; please report it): {message}")]
    Panicked {
        /// The analysis, as the report names it (`breakdown`, `kernel statistics`, ...).
        analysis: &'static str,
        /// The panic's message (empty when it carried none).
        message: String,
    },
}

/// An analysis result, or why there is none.
pub type Part<T> = Result<T, PartError>;

/// Runs one analysis; a panic (a bug) becomes [`PartError::Panicked`] instead of losing the
/// whole report.
pub fn guarded<T>(analysis: &'static str, f: impl FnOnce() -> T) -> Part<T> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|e| {
        let message = e
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_default();
        PartError::Panicked { analysis, message }
    })
}

/// The registered analysis `A` over `analyzed` as its registration runs it ([`Analysis::run`]:
/// the result `strato NAME --json` and Python's method give with the same options), guarded: a
/// panic or the analysis's own error becomes that section's [`PartError`].
pub fn registered<A: Analysis>(analyzed: &Analyzed, options: &A::Options) -> Part<A::Output> {
    guarded(A::NAME, || A::run(analyzed, options)).and_then(|result| {
        result.map_err(|e| PartError::Refused {
            analysis: A::NAME,
            message: e.to_string(),
        })
    })
}

/// Everything a report shows: the results of the analyses, each optional with the reason it
/// was not computed.
#[derive(Debug, Clone)]
pub struct ReportInput {
    /// Page title (e.g. the input's file name).
    pub title: String,
    /// What produced it (`strato 0.1.0`), shown in the footer.
    pub generator: String,
    /// The overview (`strato info`).
    pub info: InfoReport,
    pub breakdown: Part<BreakdownReport>,
    pub util: Part<UtilResult>,
    /// Device busy fraction over time (`strato_analysis::device_time::busy`).
    pub busy: Vec<BusySeries>,
    /// Kernel statistics, folded after [`KERNEL_TOP`].
    pub kernels: Part<KernelStatsReport>,
    /// The layer tables (`strato layers`, by framework op).
    pub layers: Part<LayersResult>,
    /// The nn.Module tree (`strato_analysis::cross_stack::modules`).
    pub modules: Part<ModulesReport>,
    pub iterations: Part<IterationsResult>,
    pub memory: Part<MemoryReport>,
    /// Collectives matched across ranks, stragglers and their cause (the Distributed section).
    pub collectives: Part<CollectivesResult>,
    /// The critical path per step window and rank (the whole trace without steps), with the
    /// collectives above as cross-rank edges; the analysis's own error (a cycle) inside.
    pub critical_path: Part<Result<Vec<StepCriticalPath>, CriticalPathError>>,
    /// The advice rules' findings (`strato advise` with the default rules), shown first.
    pub advice: Part<AdviseReport>,
    /// The critical path's graph of each window replayed without a change (`strato whatif`'s
    /// `replay`), from the critical path's pass; `None` when it was not run.
    pub replay: Part<BaselineReplay>,
    /// CPU samples per operation (`strato_analysis::cross_stack::samples`), the flame graphs.
    pub samples: Part<CpuSamples>,
    /// A comparison with another profile, when one was asked for.
    pub diff: Option<DiffReport>,
    /// The sections of the registered analyses (`strato_engine::registry`), after the fixed
    /// ones: their main table ([`ReportInput::add_registered`]).
    pub registered: Vec<RegisteredSection>,
    /// Links into a running `strato view` of the same trace, when the report is served by it;
    /// `None` (a report written to a file): no link, the page stays self-contained.
    pub viewer: Option<ViewerLinks>,
}

/// Where the report's sections link into `strato view` when the viewer serves the report (at
/// `/report`): each finding's evidence ranges, each step and rank's critical path, each
/// iteration, each ranked kernel (a search for its name) and the collectives overlay. A link
/// opens the viewer in one browser tab of its own (`target="strato-view"`), zoomed to what it
/// names.
///
/// Times in a link are nanoseconds since [`ViewerLinks::origin_ns`], as the viewer's page
/// takes them (its `#t0=&t1=` fragment); the report's own times are on the same clock (the
/// viewer builds the report from the trace it shows).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewerLinks {
    /// The viewer's page with its query (`/?token=T`): every link is this plus a fragment.
    pub page: String,
    /// The viewer's origin (its first event's time).
    pub origin_ns: Ns,
}

impl ViewerLinks {
    /// Margin each side of a range a link zooms to: a tenth of the range, at least this.
    pub const MIN_MARGIN_NS: Ns = 1_000;

    /// The page with `fragment` (already URL-safe: `findings`, `collectives`).
    pub fn at(&self, fragment: &str) -> String {
        format!("{}#{fragment}", self.page)
    }

    /// The page zoomed to `[start_ns, end_ns]` (the trace's times) with a margin each side
    /// ([`ViewerLinks::MIN_MARGIN_NS`] at least), the range marked, scrolled to `rank`'s lanes
    /// when one is given, and `extra` (URL-safe fields, `findings`) after.
    pub fn range(&self, start_ns: Ns, end_ns: Ns, rank: Option<i64>, extra: &str) -> String {
        let (a, b) = (
            start_ns.saturating_sub(self.origin_ns),
            end_ns.max(start_ns).saturating_sub(self.origin_ns),
        );
        let margin = ((b - a) / 10).max(Self::MIN_MARGIN_NS);
        let mut fragment = format!(
            "t0={}&t1={}&mark={a},{b}",
            a.saturating_sub(margin),
            b.saturating_add(margin)
        );
        if let Some(rank) = rank {
            fragment.push_str(&format!("&rank={rank}"));
        }
        if !extra.is_empty() {
            fragment.push('&');
            fragment.push_str(extra);
        }
        self.at(&fragment)
    }

    /// The page searching for `name` (its first match selected).
    pub fn search(&self, name: &str) -> String {
        let q: String = form_urlencoded::byte_serialize(name.as_bytes()).collect();
        self.at(&format!("q={q}"))
    }
}

/// The section of one registered analysis: its main table as text cells.
#[derive(Debug, Clone, PartialEq)]
pub struct RegisteredSection {
    /// The analysis's name: the section's anchor.
    pub id: String,
    /// One line: what the analysis shows.
    pub summary: String,
    pub window: String,
    /// Its doc page.
    pub doc: String,
    /// The table, or why the analysis failed.
    pub table: Result<RegisteredTable, String>,
}

/// A registered analysis's main table: its columns and its first rows.
#[derive(Debug, Clone, PartialEq)]
pub struct RegisteredTable {
    pub columns: Vec<String>,
    /// At most [`REGISTERED_ROWS`] rows.
    pub rows: Vec<Vec<String>>,
    /// Rows the table has in all.
    pub total_rows: usize,
}

/// Rows a registered analysis's section shows (the report's size stays bounded; `strato NAME
/// --csv` has them all).
pub const REGISTERED_ROWS: usize = 64;

/// Told before each analysis step of [`ReportInput::from_analyzed`] (e.g. a progress bar).
pub trait Progress {
    /// The next step starts; `what` names it (`"kernels"`).
    fn step(&mut self, what: &str);
}

/// No progress shown.
impl Progress for () {
    fn step(&mut self, _what: &str) {}
}

/// Stack of the thread [`ReportInput::from_analyzed`] runs the cross-rank analyses on: the
/// main thread's usual 8 MiB.
const CROSS_THREAD_STACK_BYTES: usize = 8 << 20;

/// Steps [`ReportInput::from_analyzed`] announces: one per analysis.
pub const ANALYSIS_STEPS: usize = 12;
/// Steps [`ReportInput::add_baseline`] announces.
pub const BASELINE_STEPS: usize = 1;

/// What a report shows besides the analyses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportOptions {
    /// Page title (e.g. the input's file name).
    pub title: String,
    /// What produced it (`strato 0.1.0`), shown in the footer.
    pub generator: String,
    /// Run the analyses on two threads ([`ReportInput::from_analyzed`]); the report is the
    /// same either way. The CLI sets it unless one job is asked for (`--jobs 1`).
    pub parallel: bool,
}

impl ReportInput {
    /// Runs every analysis the report shows on one profile, each guarded (a panic becomes
    /// that section's [`PartError`]): overview, breakdown, utilization and busy series, layers
    /// and roofline, the module tree, iterations, memory downsampled to
    /// [`svg::line::MAX_POINTS`] and CPU samples on one side; kernel statistics folded after
    /// [`KERNEL_TOP`], collectives, the critical path per step and the advice rules' findings
    /// on the other. With [`ReportOptions::parallel`] the two sides run on two threads (they
    /// share the trace and the [`Analyzed`] indexes, built once by whichever needs them
    /// first); the results do not depend on it: every analysis is a pure function of the
    /// trace. Announces [`ANALYSIS_STEPS`] steps.
    pub fn from_analyzed(
        analyzed: &Analyzed,
        options: &ReportOptions,
        progress: &mut dyn Progress,
    ) -> ReportInput {
        let (local, cross) = if options.parallel {
            let (local, cross) = std::thread::scope(|s| {
                // The main thread's stack size (a spawned thread gets 2 MiB by default): an
                // analysis must not run out of stack on one thread where it would not on the
                // other.
                let cross = std::thread::Builder::new()
                    .name("report cross-rank analyses".into())
                    .stack_size(CROSS_THREAD_STACK_BYTES)
                    .spawn_scoped(s, || CrossParts::run(analyzed, None));
                let local = LocalParts::run(analyzed, progress);
                let cross = match cross {
                    // Each analysis is guarded: a panic that reaches the join is not an
                    // analysis' own.
                    Ok(handle) => handle
                        .join()
                        .unwrap_or_else(|e| std::panic::resume_unwind(e)),
                    // No thread to be had: the other side runs here, after this one.
                    Err(_) => CrossParts::run(analyzed, None),
                };
                (local, cross)
            });
            for step in CrossParts::STEPS {
                progress.step(step);
            }
            (local, cross)
        } else {
            let local = LocalParts::run(analyzed, progress);
            (local, CrossParts::run(analyzed, Some(progress)))
        };
        ReportInput {
            title: options.title.clone(),
            generator: options.generator.clone(),
            info: local.info,
            breakdown: local.breakdown,
            util: local.util,
            busy: local.busy,
            kernels: cross.kernels,
            layers: local.layers,
            modules: local.modules,
            iterations: local.iterations,
            memory: local.memory,
            collectives: cross.collectives,
            critical_path: cross.critical_path,
            advice: cross.advice,
            replay: cross.replay,
            samples: local.samples,
            diff: None,
            registered: Vec::new(),
            viewer: None,
        }
    }

    /// Adds the sections of the registered analyses that show a table in the report
    /// (`strato_engine::registry::ANALYSES` with [`InReport::Table`]), each run on `analyzed`
    /// with its default settings; a failure (a panic included) is that section's, not the
    /// report's.
    pub fn add_registered(&mut self, analyzed: &Analyzed<'_>) {
        self.registered = strato_engine::registry::ANALYSES
            .iter()
            .filter(|a| a.in_report == InReport::Table)
            .map(|analysis| registered_section(analysis, analyzed))
            .collect();
    }

    /// Adds the diff with a baseline profile (A), this report's profile being B: the
    /// registered comparison `diff` ([`Diff`]) at its defaults (steps not kept apart), from
    /// the baseline's side ([`baseline_side`], computed before this profile was read, so the
    /// two traces are never held at once) and this profile's. Announces [`BASELINE_STEPS`]
    /// steps. No section when either side could not be computed.
    pub fn add_baseline(
        &mut self,
        baseline: (&str, Option<&DiffSides>),
        this: (&str, &Analyzed),
        progress: &mut dyn Progress,
    ) {
        let options = DiffSettings::default();
        progress.step("diff");
        let compared = match (baseline.1, Diff::side(this.1, &options)) {
            (Some(a), Ok(b)) => Diff::compare(baseline.0, a, this.0, &b, &options).ok(),
            _ => None,
        };
        self.diff = match compared {
            Some(DiffOutput::Runs(report)) => Some(report),
            Some(DiffOutput::ByOp(_)) | None => None,
        };
    }
}

/// The report section of a registered analysis: its main table's first rows, or why it failed
/// (a panic included: one section's failure does not lose the report).
fn registered_section(
    analysis: &strato_engine::registry::Registered,
    analyzed: &Analyzed<'_>,
) -> RegisteredSection {
    let run = || -> Result<RegisteredTable, String> {
        let outcome = analysis
            .run_analyzed(analyzed, &[])
            .map_err(|e| e.to_string())?;
        let spec = analysis.table(None).map_err(|e| e.to_string())?;
        let (columns, rows) = outcome.text_rows(spec);
        Ok(RegisteredTable {
            columns,
            total_rows: rows.len(),
            rows: rows.into_iter().take(REGISTERED_ROWS).collect(),
        })
    };
    let table = catch_unwind(AssertUnwindSafe(run))
        .unwrap_or_else(|_| Err("the analysis panicked (a bug)".to_owned()));
    RegisteredSection {
        id: analysis.name.to_owned(),
        summary: analysis.summary.to_owned(),
        window: analysis.window.to_owned(),
        doc: analysis.doc.to_owned(),
        table,
    }
}

/// The baseline's side of the report's diff ([`ReportInput::add_baseline`]): `diff` at its
/// defaults over the baseline profile; `None` when it cannot be computed (the section is then
/// left out).
pub fn baseline_side(baseline: &Analyzed) -> Option<DiffSides> {
    Diff::side(baseline, &DiffSettings::default()).ok()
}

/// The analyses of one rank at a time (and the overview), in page order: one side of
/// [`ReportInput::from_analyzed`], announcing its steps as it goes. Each section's result is
/// its registered analysis's ([`registered`]) at the options the report shows it with; the
/// busy series and the CPU samples are plots of the report's own (no command of their own).
struct LocalParts {
    info: InfoReport,
    breakdown: Part<BreakdownReport>,
    util: Part<UtilResult>,
    busy: Vec<BusySeries>,
    layers: Part<LayersResult>,
    modules: Part<ModulesReport>,
    iterations: Part<IterationsResult>,
    memory: Part<MemoryReport>,
    samples: Part<CpuSamples>,
}

impl LocalParts {
    fn run(analyzed: &Analyzed, progress: &mut dyn Progress) -> LocalParts {
        let trace = analyzed.trace();
        progress.step("overview");
        // `strato info`'s (its registered run is this, and never fails).
        let info = InfoReport::of(trace, strato_analysis::info::info(trace));
        progress.step("breakdown");
        let breakdown = registered::<Breakdown>(analyzed, &Default::default());
        progress.step("utilization");
        let util = registered::<Util>(analyzed, &Default::default());
        let busy = guarded("busy", || busy_series(trace, DEFAULT_BUCKET_NS)).unwrap_or_default();
        progress.step("layers and roofline");
        let layers = registered::<Layers>(analyzed, &Default::default());
        progress.step("module tree");
        let modules = registered::<Modules>(analyzed, &NoOptions::default());
        progress.step("iterations");
        let iterations = registered::<Iterations>(analyzed, &Default::default());
        progress.step("memory");
        let memory = registered::<Memory>(
            analyzed,
            &MemorySettings {
                max_points: svg::line::MAX_POINTS,
                ..MemorySettings::default()
            },
        );
        progress.step("cpu samples");
        let samples = guarded("cpu samples", || cpu_samples(trace, &Default::default()));
        LocalParts {
            info,
            breakdown,
            util,
            busy,
            layers,
            modules,
            iterations,
            memory,
            samples,
        }
    }
}

/// The kernel statistics and the cross-rank analyses, which build on each other (the critical
/// path and the advice use the collectives' matching and clock alignment): the other side of
/// [`ReportInput::from_analyzed`]. On another thread it announces nothing (`progress` is
/// `None`): its [`CrossParts::STEPS`] are announced when it is done.
///
/// Kernels and collectives are their registered analyses' results. The critical path of each
/// step window, its replay and the findings' estimated gains come from one pass over the step
/// graphs ([`paths_gains_and_replay`]), and the findings are `strato advise`'s with the same
/// collectives ([`advise_matched`]): the three sections are what `critical-path --step all`,
/// `whatif` and `advise` give, without building each step's graph three times.
struct CrossParts {
    kernels: Part<KernelStatsReport>,
    collectives: Part<CollectivesResult>,
    critical_path: Part<Result<Vec<StepCriticalPath>, CriticalPathError>>,
    advice: Part<AdviseReport>,
    replay: Part<BaselineReplay>,
}

impl CrossParts {
    const STEPS: [&'static str; 4] = ["kernels", "collectives", "critical path", "advice"];

    fn run(analyzed: &Analyzed, mut progress: Option<&mut dyn Progress>) -> CrossParts {
        let mut announce = |step: &str| {
            if let Some(p) = progress.as_mut() {
                p.step(step);
            }
        };
        announce(Self::STEPS[0]);
        let kernels = registered::<Kernels>(analyzed, &KernelsOptions { top: 0 }).map(|mut k| {
            for r in &mut k.ranks {
                r.kernels = fold_top(std::mem::take(&mut r.kernels), KERNEL_TOP, "kernels");
                r.ops = fold_top(std::mem::take(&mut r.ops), KERNEL_TOP, "operations");
            }
            k
        });
        // A process driving several GPUs is seen as one rank per device by the cross-rank
        // analyses (collectives, their advice, the critical path), as NCCL numbers them.
        let job = guarded("collectives", || analyzed.job());
        announce(Self::STEPS[1]);
        let collectives = registered::<Collectives>(analyzed, &Default::default());
        announce(Self::STEPS[2]);
        // The collectives' matching and clock alignment: one view of the job.
        let (job, options) = match (&job, &collectives) {
            (Ok(job), Ok(matched)) => {
                (*job, CriticalPathOptions::from_collectives(job, &matched.0))
            }
            (Ok(job), Err(_)) => (*job, CriticalPathOptions::default()),
            (Err(_), _) => (analyzed.trace(), CriticalPathOptions::default()),
        };
        // The critical path's step graphs serve the replay and the findings' estimated gains
        // too: one pass over them (the advice asks for the gains once, when a finding's fix is
        // modelled; else the pass runs after the advice, without gains).
        let one_pass = |sets: &[Vec<Scale>]| {
            guarded("critical-path", || {
                paths_gains_and_replay(job, &options, sets, true)
            })
        };
        let mut critical_path = None;
        let mut replay = None;
        let advice = guarded(strato_analysis::advise::Advise::NAME, || {
            let config = AdviseSettings::default().config().unwrap_or_default();
            // The collectives `strato advise` matches: the job's, when it has two ranks or more.
            let matched = (collectives.as_ref().ok())
                .filter(|_| job.ranks.len() >= 2)
                .map(|c| &c.0);
            advise_matched(
                analyzed,
                &config,
                matched,
                &mut |sets| match one_pass(sets) {
                    Ok((paths, gains, replayed)) => {
                        critical_path = Some(Ok(paths));
                        replay = Some(Ok(replayed));
                        gains.map_err(|e| e.to_string())
                    }
                    Err(e) => {
                        let message = e.to_string();
                        critical_path = Some(Err(e.clone()));
                        replay = Some(Err(e));
                        Err(message)
                    }
                },
            )
        });
        announce(Self::STEPS[3]);
        let (critical_path, replay) = match (critical_path, replay) {
            (Some(paths), Some(replay)) => (paths, replay),
            _ => match one_pass(&[]) {
                Ok((paths, _, replayed)) => (Ok(paths), Ok(replayed)),
                Err(e) => (Err(e.clone()), Err(e)),
            },
        };
        CrossParts {
            kernels,
            collectives,
            critical_path,
            advice,
            replay,
        }
    }
}

/// Renders the report as one HTML document.
pub fn render(input: &ReportInput) -> String {
    sections::document(input)
}
