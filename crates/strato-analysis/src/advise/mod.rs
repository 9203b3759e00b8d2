//! Advice (`strato advise`): expert rules that read the analyses' facts about a trace and
//! produce typed [`Finding`]s — what is wrong, how much time is at stake, the evidence (time
//! ranges a user can open in the report or in Perfetto) and what to do about it.
//!
//! Owns the rule engine (the [`Finding`] data, the configuration and its defaults, the floor,
//! the union of the time at stake) and one module per rule. Rules read the trace through the
//! shared indexes of [`Analyzed`] (scopes: processes, annotated threads, launches) and the
//! interval helpers of [`crate::device_time::gpu_time`]; they never read files. Every threshold is
//! a field of [`AdviseConfig`] with its source documented in `docs/advise.md` (one section per
//! rule, the target of each finding's `docs` link).
//!
//! Window: the whole trace (earliest span start to latest span end over every rank), on the
//! job's clock ([`JobClock`]: with two or more ranks, each rank's times shifted by the clock
//! alignment of the collectives analysis, as the critical path and `collectives` shift them).
//! A finding's `intervals` are on that clock too, so ranks whose clocks differ neither stretch
//! the window nor spread one moment of the job over several; its evidence stays on its own
//! rank's clock (the times in that rank's file). A finding's `time_ns` is the length of the
//! union of its own intervals, `share_pct` is that over the window. Findings may overlap in time (a GPU idle gap can also be a low-utilisation
//! window): [`AdviseReport::total_at_stake_ns`] is the length of the union of every reported
//! finding's intervals, never their sum, so it never exceeds the window.
//!
//! Rules: a finding whose share is below [`AdviseConfig::floor_pct`] is hidden (counted in
//! [`AdviseReport::hidden_below_floor`]) unless [`AdviseConfig::all`]; a disabled rule is not
//! run; a rule that cannot run on this trace (no steps, no multi-rank analysis) says so in
//! [`AdviseReport::rules`] instead of producing nothing silently.

pub mod copy_overlap;
pub mod cross_rank;
mod gains;
pub mod gpu_idle;
pub mod host_sync;
pub mod launch_bound;
pub mod low_util;
pub mod multi_rank;
pub mod registration;
pub mod small_copies;
pub mod step_breakdown;
pub mod sync_copy;

use serde::{Deserialize, Serialize};
use strato_trace::message::escape_controls;
use strato_trace::{Level, Ns, Span, Trace, TrackKind};

use crate::analyzed::Analyzed;
use crate::device_time::gpu_time::{length, merge};
use crate::paths::critical_path::replay::Scale;
use crate::scope::is_device_work;

pub use cross_rank::CrossRankEvidence;
use gains::estimate_gains;
pub use gains::gain_model;
pub use multi_rank::{ExposedCommunication, MultiRankEvidence, StragglerObservation};
pub use registration::{Advise, AdviseSettings};

/// Where the rules' docs live; a finding links to `DOCS_PAGE#<rule id>`.
pub const DOCS_PAGE: &str = "docs/advise.md";

/// How urgent a finding is, from its share of the window: `high` at 10 % or more, `medium` at
/// 3 % or more, else `low` (a project convention, documented in `docs/advise.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Low,
    Medium,
    High,
}

impl Severity {
    /// The severity of a share of the window (percent).
    pub fn of_share(share_pct: f64) -> Severity {
        if share_pct >= 10.0 {
            Severity::High
        } else if share_pct >= 3.0 {
            Severity::Medium
        } else {
            Severity::Low
        }
    }

    /// `"high"`, `"medium"`, `"low"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
        }
    }
}

/// One piece of evidence: a time range on a rank with what it is. `kind` says what the range
/// is (`sync`, `copy`, `gap`, `cause`, `stretch`, `window`, `step`, `waited_for`, ...).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Evidence {
    pub kind: String,
    pub rank: i64,
    pub start_ns: Ns,
    pub end_ns: Ns,
    pub name: String,
}

/// A finding of one rule.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// The rule's id (also the anchor of its docs section).
    pub rule: &'static str,
    pub severity: Severity,
    /// Length of the union of [`Finding::intervals`].
    pub time_ns: Ns,
    /// `time_ns` over the window, percent.
    pub share_pct: f64,
    /// The strongest evidence first (bounded by [`MAX_EVIDENCE`]).
    pub evidence: Vec<Evidence>,
    pub message: String,
    pub advice: String,
    /// `docs/advise.md#<rule>`.
    pub docs: String,
    /// What fixing it would save: a what-if replay of the critical path's graph with the fix
    /// applied ([`gain_model`], `strato whatif`), summed over the `ProfilerStep` windows (the
    /// whole trace without steps), at most `time_ns`. `None` where no transform models the
    /// fix yet, where it selects nothing, or where the windows' gains add up to more than the
    /// time at stake (steps that overlap; [`Finding::gain_note`] says which).
    pub estimated_gain_ns: Option<Ns>,
    /// The what-if the gain comes from (`whatif --no-sync`), or why there is none.
    pub gain_note: String,
    /// The time at stake as disjoint sorted intervals, on the job's clock ([`JobClock`]).
    #[serde(skip)]
    pub intervals: Vec<(Ns, Ns)>,
}

/// Most evidence items per finding.
pub const MAX_EVIDENCE: usize = 12;

/// What a rule produced before the engine fills in severity, share and docs.
#[derive(Debug, Clone, Default)]
pub struct Draft {
    pub intervals: Vec<(Ns, Ns)>,
    pub evidence: Vec<Evidence>,
    pub message: String,
    pub advice: String,
}

/// Whether a rule ran on this trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuleStatus {
    pub rule: &'static str,
    pub enabled: bool,
    /// False when the trace lacks what the rule needs (the note says what).
    pub evaluated: bool,
    pub findings: usize,
    pub note: Option<String>,
}

/// Thresholds of every rule; `docs/advise.md` says where each default comes from. Read from a
/// `--rules` TOML file: every field is optional (missing ones keep their default), unknown
/// ones are refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdviseConfig {
    /// Findings below this share of the window (percent) are hidden unless `all`.
    pub floor_pct: f64,
    /// Report findings below the floor too.
    pub all: bool,
    pub host_sync: host_sync::Config,
    pub sync_copy: sync_copy::Config,
    pub gpu_idle: gpu_idle::Config,
    pub launch_bound: launch_bound::Config,
    pub low_util: low_util::Config,
    pub step_breakdown: step_breakdown::Config,
    pub small_copies: small_copies::Config,
    pub copy_overlap: copy_overlap::Config,
    pub stragglers: multi_rank::StragglerConfig,
    pub exposed_comm: multi_rank::ExposedConfig,
}

impl Default for AdviseConfig {
    fn default() -> Self {
        AdviseConfig {
            floor_pct: 1.0,
            all: false,
            host_sync: Default::default(),
            sync_copy: Default::default(),
            gpu_idle: Default::default(),
            launch_bound: Default::default(),
            low_util: Default::default(),
            step_breakdown: Default::default(),
            small_copies: Default::default(),
            copy_overlap: Default::default(),
            stragglers: Default::default(),
            exposed_comm: Default::default(),
        }
    }
}

/// Every rule id, in the order the engine runs them.
pub const RULES: [&str; 10] = [
    host_sync::ID,
    sync_copy::ID,
    gpu_idle::ID,
    launch_bound::ID,
    low_util::ID,
    step_breakdown::ID,
    small_copies::ID,
    copy_overlap::ID,
    multi_rank::STRAGGLER_ID,
    multi_rank::EXPOSED_ID,
];

impl AdviseConfig {
    /// Disables rule `id`; false when no rule has that id.
    pub fn disable(&mut self, id: &str) -> bool {
        let flag = match id {
            host_sync::ID => &mut self.host_sync.enabled,
            sync_copy::ID => &mut self.sync_copy.enabled,
            gpu_idle::ID => &mut self.gpu_idle.enabled,
            launch_bound::ID => &mut self.launch_bound.enabled,
            low_util::ID => &mut self.low_util.enabled,
            step_breakdown::ID => &mut self.step_breakdown.enabled,
            small_copies::ID => &mut self.small_copies.enabled,
            copy_overlap::ID => &mut self.copy_overlap.enabled,
            multi_rank::STRAGGLER_ID => &mut self.stragglers.enabled,
            multi_rank::EXPOSED_ID => &mut self.exposed_comm.enabled,
            _ => return false,
        };
        *flag = false;
        true
    }

    /// Checks the thresholds (the error names the field and its range): percentages in
    /// `[0, 100]`; durations finite, in `[0, MAX_DURATION_US]` (one day); `low_util.chunks` in
    /// `[1, MAX_CHUNKS]` (the rule cuts each device's window into that many chunks, so a huge
    /// count would run for ever); `small_copies.max_bytes` in `[0, MAX_COPY_BYTES]` (1 TiB);
    /// the counts `launch_bound.min_kernels` and `small_copies.min_copies` at most
    /// `MAX_COUNT`.
    pub fn validate(&self) -> Result<(), String> {
        let pcts = [
            ("floor_pct", self.floor_pct),
            ("low_util.threshold_pct", self.low_util.threshold_pct),
            (
                "step_breakdown.bottleneck_pct",
                self.step_breakdown.bottleneck_pct,
            ),
            ("stragglers.min_excess_pct", self.stragglers.min_excess_pct),
            (
                "exposed_comm.min_exposed_pct",
                self.exposed_comm.min_exposed_pct,
            ),
        ];
        for (name, v) in pcts {
            if !(0.0..=100.0).contains(&v) {
                return Err(format!(
                    "{name} must be a percentage in [0, 100], got {v:?}"
                ));
            }
        }
        let durations = [
            ("host_sync.min_stall_us", self.host_sync.min_stall_us),
            ("gpu_idle.min_gap_us", self.gpu_idle.min_gap_us),
            (
                "launch_bound.max_kernel_us",
                self.launch_bound.max_kernel_us,
            ),
            (
                "small_copies.max_unsized_us",
                self.small_copies.max_unsized_us,
            ),
        ];
        for (name, v) in durations {
            if !(v.is_finite() && (0.0..=MAX_DURATION_US).contains(&v)) {
                return Err(format!(
                    "{name} must be a duration in [0, {MAX_DURATION_US}] us (one day), got {v:?}"
                ));
            }
        }
        if !(0..=MAX_COPY_BYTES).contains(&self.small_copies.max_bytes) {
            return Err(format!(
                "small_copies.max_bytes must be in [0, {MAX_COPY_BYTES}] (1 TiB), got {}",
                self.small_copies.max_bytes
            ));
        }
        if !(1..=MAX_CHUNKS).contains(&self.low_util.chunks) {
            return Err(format!(
                "low_util.chunks must be in [1, {MAX_CHUNKS}], got {}",
                self.low_util.chunks
            ));
        }
        for (name, v) in [
            ("launch_bound.min_kernels", self.launch_bound.min_kernels),
            ("small_copies.min_copies", self.small_copies.min_copies),
        ] {
            if v > MAX_COUNT {
                return Err(format!("{name} must be at most {MAX_COUNT}, got {v}"));
            }
        }
        Ok(())
    }

    /// Parses and checks a `--rules` file's TOML text: every field optional (a missing one
    /// keeps its default), an unknown one refused, then [`AdviseConfig::validate`]. The error
    /// is one line: what is wrong and, for a syntax or type error, the line.
    pub fn from_toml(text: &str) -> Result<AdviseConfig, RulesError> {
        let config: AdviseConfig = toml::from_str(text).map_err(|e| {
            // The parser's Display spans several lines: its message and where instead.
            let line = e
                .span()
                .map(|r| text[..r.start.min(text.len())].lines().count().max(1));
            RulesError::Toml {
                at: line.map(|l| format!(" at line {l}")).unwrap_or_default(),
                message: escape_controls(&e.message().trim().replace('\n', " ")).into_owned(),
            }
        })?;
        config.validate().map_err(RulesError::Invalid)?;
        Ok(config)
    }
}

/// Largest duration threshold of a rule (us): one day.
pub const MAX_DURATION_US: f64 = 86_400e6;
/// Most chunks [`low_util`] cuts a device's window into.
pub const MAX_CHUNKS: usize = 100_000;
/// Largest `small_copies.max_bytes`: 1 TiB.
pub const MAX_COPY_BYTES: i64 = 1 << 40;
/// Largest count threshold (`min_kernels`, `min_copies`).
pub const MAX_COUNT: usize = 1_000_000_000;

/// Why a `--rules` file was refused ([`AdviseConfig::from_toml`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RulesError {
    #[error("not a valid rules file (TOML){at}: {message}")]
    Toml { at: String, message: String },
    #[error("{0}")]
    Invalid(String),
}

/// The result of [`advise`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AdviseReport {
    pub window_start_ns: Ns,
    pub window_end_ns: Ns,
    pub window_ns: Ns,
    pub floor_pct: f64,
    /// Reported findings, by time at stake (largest first).
    pub findings: Vec<Finding>,
    /// Findings below the floor, not reported (0 with `all`).
    pub hidden_below_floor: usize,
    /// Length of the union of the reported findings' intervals (not their sum: they overlap).
    pub total_at_stake_ns: Ns,
    pub total_at_stake_pct: f64,
    /// Per-step breakdown (XProf style) when the trace has steps.
    pub steps: Vec<step_breakdown::StepBreakdown>,
    pub rules: Vec<RuleStatus>,
}

/// Runs every enabled rule. `multi_rank` is what the cross-rank analyses found (stragglers,
/// exposed communication); `None` leaves those rules unevaluated, saying so.
pub fn advise(
    analyzed: &Analyzed,
    config: &AdviseConfig,
    multi_rank: Option<&dyn MultiRankEvidence>,
) -> AdviseReport {
    advise_with_gains(
        analyzed,
        config,
        multi_rank,
        JobClock::default(),
        &mut |sets| {
            let job = analyzed.job();
            let options = crate::paths::critical_path::CriticalPathOptions::matched(job);
            crate::paths::critical_path::replay::estimated_gains(job, &options, sets)
                .map_err(|e| e.to_string())
        },
    )
}

/// [`advise`] with the job's own cross-rank evidence ([`CrossRankEvidence`]), as `strato
/// advise` runs it. The job is [`Analyzed::job`] (a process driving several devices split by
/// device, as every cross-rank analysis sees it); with two or more ranks, its collectives are
/// matched and its clocks aligned once ([`advise_matched`]).
pub fn advise_trace(analyzed: &Analyzed, config: &AdviseConfig) -> AdviseReport {
    let job = analyzed.job();
    let matched = (job.ranks.len() >= 2)
        .then(|| crate::distributed::collectives::collectives(job, &Default::default()));
    advise_matched(analyzed, config, matched.as_ref(), &mut |sets| {
        use crate::paths::critical_path::CriticalPathOptions;
        // The replay's graph links the instances the evidence came from, with the same clock
        // shifts ([`CriticalPathOptions::matched`] would find them again).
        let options = match &matched {
            Some(report) => CriticalPathOptions::from_collectives(job, report),
            None => CriticalPathOptions::matched(job),
        };
        crate::paths::critical_path::replay::estimated_gains(job, &options, sets)
            .map_err(|e| e.to_string())
    })
}

/// [`advise_with_gains`] with the cross-rank evidence of `matched`: the collectives of
/// [`Analyzed::job`] at their default options, when the job has two or more ranks (`None`: a
/// job of one rank, whose evidence is its exposed communication alone). The clock is their
/// alignment when the job's ranks are the trace's own (a job split by device shares one
/// clock). `strato advise` ([`advise_trace`]) and the report (which shows the same
/// collectives in its Distributed section, and replays the same step graphs for its critical
/// path) run the rules this way.
pub fn advise_matched(
    analyzed: &Analyzed,
    config: &AdviseConfig,
    matched: Option<&crate::distributed::collectives::CollectivesReport>,
    gains: &mut GainsOf<'_>,
) -> AdviseReport {
    let (trace, job) = (analyzed.trace(), analyzed.job());
    let evidence = match matched {
        Some(report) => CrossRankEvidence::from_collectives(job, report),
        None => CrossRankEvidence::from_trace(job),
    };
    let clock = match matched {
        Some(report) if std::ptr::eq(job, trace) => JobClock::of_collectives(trace, report),
        _ => JobClock::default(),
    };
    advise_with_gains(analyzed, config, Some(&evidence), clock, gains)
}

/// What each set of changes would save over the trace's windows
/// ([`crate::paths::critical_path::replay::estimated_gains`]'s answer), or why it could not be
/// replayed.
/// `None` for a set that selected nothing in the trace's graph.
pub type GainsOf<'g> = dyn FnMut(&[Vec<Scale>]) -> Result<Vec<Option<Ns>>, String> + 'g;

/// [`advise`] with the findings' gains from `gains`, for a caller that replays the job's
/// graphs anyway (the report: its critical path section and the gains in one pass,
/// [`crate::paths::critical_path::replay::paths_and_gains`]). `gains` is called once, with
/// the changes of every finding whose fix a transform models ([`gain_model`]), and not at
/// all when none is. `clock` maps the ranks' times onto the job's clock (the window and the
/// findings' intervals; [`JobClock::of_collectives`] with the collectives analysis the
/// cross-rank evidence came from).
pub fn advise_with_gains(
    analyzed: &Analyzed,
    config: &AdviseConfig,
    multi_rank: Option<&dyn MultiRankEvidence>,
    clock: JobClock,
    gains: &mut GainsOf<'_>,
) -> AdviseReport {
    let facts = Facts::build_on(analyzed, clock);
    let (w0, w1) = facts.window.unwrap_or((0, 0));
    let window = w1 - w0;
    let mut rules: Vec<RuleStatus> = Vec::new();
    let mut drafts: Vec<(&'static str, Draft)> = Vec::new();
    let mut steps = Vec::new();
    let mut run = |rule: &'static str, enabled: bool, out: Result<Vec<Draft>, String>| {
        let (evaluated, note, list) = match out {
            Ok(list) => (true, None, list),
            Err(note) => (false, Some(note), Vec::new()),
        };
        rules.push(RuleStatus {
            rule,
            enabled,
            evaluated: enabled && evaluated,
            findings: list.len(),
            note: if enabled {
                note
            } else {
                Some("disabled".into())
            },
        });
        drafts.extend(list.into_iter().map(|d| (rule, d)));
    };
    let c = config;
    let off = || Ok(Vec::new());
    run(
        host_sync::ID,
        c.host_sync.enabled,
        if c.host_sync.enabled {
            Ok(host_sync::run(analyzed, &facts, &c.host_sync))
        } else {
            off()
        },
    );
    run(
        sync_copy::ID,
        c.sync_copy.enabled,
        if c.sync_copy.enabled {
            Ok(sync_copy::run(analyzed, &facts, &c.sync_copy))
        } else {
            off()
        },
    );
    run(
        gpu_idle::ID,
        c.gpu_idle.enabled,
        if c.gpu_idle.enabled {
            Ok(gpu_idle::run(analyzed, &facts, &c.gpu_idle))
        } else {
            off()
        },
    );
    run(
        launch_bound::ID,
        c.launch_bound.enabled,
        if c.launch_bound.enabled {
            Ok(launch_bound::run(analyzed, &facts, &c.launch_bound))
        } else {
            off()
        },
    );
    run(
        low_util::ID,
        c.low_util.enabled,
        if c.low_util.enabled {
            Ok(low_util::run(analyzed, &facts, &c.low_util))
        } else {
            off()
        },
    );
    run(
        step_breakdown::ID,
        c.step_breakdown.enabled,
        if c.step_breakdown.enabled {
            step_breakdown::run(analyzed, &facts, &c.step_breakdown).map(|(s, d)| {
                steps = s;
                d
            })
        } else {
            off()
        },
    );
    run(
        small_copies::ID,
        c.small_copies.enabled,
        if c.small_copies.enabled {
            Ok(small_copies::run(analyzed, &facts, &c.small_copies))
        } else {
            off()
        },
    );
    run(
        copy_overlap::ID,
        c.copy_overlap.enabled,
        if c.copy_overlap.enabled {
            Ok(copy_overlap::run(analyzed, &facts, &c.copy_overlap))
        } else {
            off()
        },
    );
    run(
        multi_rank::STRAGGLER_ID,
        c.stragglers.enabled,
        if c.stragglers.enabled {
            multi_rank::stragglers(multi_rank, &c.stragglers, &facts.clock)
        } else {
            off()
        },
    );
    run(
        multi_rank::EXPOSED_ID,
        c.exposed_comm.enabled,
        if c.exposed_comm.enabled {
            multi_rank::exposed_communication(multi_rank, &c.exposed_comm, &facts.clock)
        } else {
            off()
        },
    );
    let mut findings: Vec<Finding> = drafts
        .into_iter()
        .map(|(rule, d)| finish(rule, d, w0, w1))
        .filter(|f| f.time_ns > 0)
        .collect();
    let before = findings.len();
    if !config.all {
        findings.retain(|f| f.share_pct >= config.floor_pct);
    }
    let hidden_below_floor = before - findings.len();
    estimate_gains(&mut findings, gains);
    // By what a fix would save: the estimated gain where a what-if models the fix, else the
    // time at stake (the most any fix could save).
    findings.sort_by(|a, b| {
        let saves = |f: &Finding| f.estimated_gain_ns.unwrap_or(f.time_ns);
        saves(b)
            .cmp(&saves(a))
            .then(b.time_ns.cmp(&a.time_ns))
            .then(a.rule.cmp(b.rule))
    });
    for status in &mut rules {
        status.findings = findings.iter().filter(|f| f.rule == status.rule).count();
    }
    let total = length(&merge(
        findings.iter().flat_map(|f| f.intervals.iter().copied()),
    ));
    AdviseReport {
        window_start_ns: w0,
        window_end_ns: w1,
        window_ns: window,
        floor_pct: config.floor_pct,
        findings,
        hidden_below_floor,
        total_at_stake_ns: total,
        total_at_stake_pct: pct(total, window),
        steps,
        rules,
    }
}

/// A draft made a finding: intervals clipped to the window and merged, share, severity.
fn finish(rule: &'static str, d: Draft, w0: Ns, w1: Ns) -> Finding {
    let intervals = merge(
        d.intervals
            .into_iter()
            .map(|(a, b)| (a.max(w0), b.min(w1)))
            .filter(|(a, b)| b > a),
    );
    let time_ns = length(&intervals);
    let share_pct = pct(time_ns, w1 - w0);
    let mut evidence = d.evidence;
    evidence.truncate(MAX_EVIDENCE);
    let gain_note = match gain_model(rule, &evidence) {
        Ok((what, _)) => what,
        Err(why) => why.to_owned(),
    };
    Finding {
        rule,
        severity: Severity::of_share(share_pct),
        time_ns,
        share_pct,
        evidence,
        message: d.message,
        advice: d.advice,
        docs: format!("{DOCS_PAGE}#{rule}"),
        estimated_gain_ns: None,
        gain_note,
        intervals,
    }
}

/// `part / whole` in percent (0 for an empty whole).
pub fn pct(part: Ns, whole: Ns) -> f64 {
    if whole > 0 {
        100.0 * part as f64 / whole as f64
    } else {
        0.0
    }
}

/// How each rank's times map onto the job's one clock: the shift the collectives analysis'
/// clock alignment applies to the rank ([`crate::distributed::clock_align`]; 0 for a rank it
/// left alone). The default is every rank on its own clock (one rank, or no alignment).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobClock {
    /// Shift per rank index of the trace.
    shifts: Vec<Ns>,
    /// The same per job rank (the rank number users see).
    by_job_rank: Vec<(i64, Ns)>,
}

impl JobClock {
    /// The alignment of `report`, the collectives analysis of `trace` itself (its ranks are
    /// `trace`'s). A report of another trace (a job split by device) gives the default.
    pub fn of_collectives(
        trace: &Trace,
        report: &crate::distributed::collectives::CollectivesReport,
    ) -> JobClock {
        if report
            .ranks
            .iter()
            .any(|r| r.rank.0 as usize >= trace.ranks.len())
        {
            return JobClock::default();
        }
        JobClock {
            shifts: report.clock.shifts(trace.ranks.len()),
            by_job_rank: report
                .ranks
                .iter()
                .map(|r| (r.job_rank, r.shift_ns))
                .collect(),
        }
    }

    /// The shift of rank index `rank`.
    pub fn shift(&self, rank: u32) -> Ns {
        self.shifts.get(rank as usize).copied().unwrap_or(0)
    }

    /// The shift of the rank users number `job_rank` (as [`rank_number`] gives it; the first
    /// such rank when two sources claim one number).
    pub fn shift_of_job_rank(&self, job_rank: i64) -> Ns {
        self.by_job_rank
            .iter()
            .find(|(r, _)| *r == job_rank)
            .map_or(0, |&(_, shift)| shift)
    }

    /// Intervals of rank index `rank` on the job's clock.
    pub fn intervals(&self, rank: u32, intervals: Vec<(Ns, Ns)>) -> Vec<(Ns, Ns)> {
        shifted(self.shift(rank), intervals)
    }

    /// Intervals of the rank users number `job_rank` on the job's clock.
    pub fn job_rank_intervals(&self, job_rank: i64, intervals: Vec<(Ns, Ns)>) -> Vec<(Ns, Ns)> {
        shifted(self.shift_of_job_rank(job_rank), intervals)
    }

    /// Span `span` of `trace` on the job's clock.
    pub fn span(&self, trace: &Trace, span: &Span) -> (Ns, Ns) {
        let shift = self.shift(trace.track(span.track).rank.0);
        (
            span.start.saturating_add(shift),
            span.end.saturating_add(shift),
        )
    }
}

fn shifted(shift: Ns, mut intervals: Vec<(Ns, Ns)>) -> Vec<(Ns, Ns)> {
    if shift != 0 {
        for (a, b) in &mut intervals {
            *a = a.saturating_add(shift);
            *b = b.saturating_add(shift);
        }
    }
    intervals
}

/// Facts several rules share, computed once: the window, the device work per device.
#[derive(Debug)]
pub struct Facts {
    /// Earliest span start and latest span end, on the job's clock ([`Facts::clock`]).
    pub window: Option<(Ns, Ns)>,
    /// How each rank's times map onto the job's clock: rules give their findings' intervals
    /// on it.
    pub clock: JobClock,
    /// Device work spans (kernels, copies, sets on device queues) per (rank index, device),
    /// sorted by start.
    pub device_work: std::collections::BTreeMap<(u32, i64), Vec<u32>>,
    /// Launch (CPU span) of each device work span that has one.
    pub launch_of: rustc_hash::FxHashMap<u32, u32>,
    /// Device copies launched by each CPU span.
    pub copies_of_launch: rustc_hash::FxHashMap<u32, Vec<u32>>,
}

impl Facts {
    /// Builds the facts in one pass over the spans, every rank on its own clock.
    pub fn build(analyzed: &Analyzed) -> Facts {
        Facts::build_on(analyzed, JobClock::default())
    }

    /// [`Facts::build`] with the ranks' times mapped by `clock`.
    pub fn build_on(analyzed: &Analyzed, clock: JobClock) -> Facts {
        let trace = analyzed.trace();
        let mut launch_of: rustc_hash::FxHashMap<u32, u32> = Default::default();
        let mut copies_of_launch: rustc_hash::FxHashMap<u32, Vec<u32>> = Default::default();
        for o in &analyzed.scopes().device_owners {
            if let Some(l) = o.launch {
                launch_of.insert(o.span, l);
                if trace.spans[o.span as usize].level == Level::DeviceCopy {
                    copies_of_launch.entry(l).or_default().push(o.span);
                }
            }
        }
        let mut window: Option<(Ns, Ns)> = None;
        let mut device_work: std::collections::BTreeMap<(u32, i64), Vec<u32>> = Default::default();
        for (i, s) in trace.spans.iter().enumerate() {
            if s.level == Level::Other {
                // Profiler window markers are not the workload's time.
                continue;
            }
            let (start, end) = clock.span(trace, s);
            window = Some(match window {
                None => (start, end),
                Some((a, b)) => (a.min(start), b.max(end)),
            });
            let track = trace.track(s.track);
            if let TrackKind::DeviceQueue { device, .. } = track.kind {
                if is_device_work(s.level) {
                    device_work
                        .entry((track.rank.0, device))
                        .or_default()
                        .push(i as u32);
                }
            }
        }
        for list in device_work.values_mut() {
            list.sort_by_key(|&i| {
                let s = &trace.spans[i as usize];
                (s.start, s.end, s.same_extent_order(), i)
            });
        }
        Facts {
            window,
            clock,
            device_work,
            launch_of,
            copies_of_launch,
        }
    }
}

/// The rank number users see (the source's rank, else the rank's index).
pub fn rank_number(trace: &Trace, rank: u32) -> i64 {
    trace
        .ranks
        .get(rank as usize)
        .and_then(|r| r.rank)
        .unwrap_or(i64::from(rank))
}

/// A span's name.
pub fn span_name<'t>(trace: &'t Trace, span: &Span) -> &'t str {
    trace.str(span.name)
}

/// An API name without the version suffix nsys adds (`cudaMemcpy_v3020` -> `cudaMemcpy`).
pub fn api_name(name: &str) -> &str {
    match name.rfind("_v") {
        Some(i)
            if i > 0 && name.len() > i + 2 && name[i + 2..].bytes().all(|b| b.is_ascii_digit()) =>
        {
            &name[..i]
        }
        _ => name,
    }
}

/// Where span `i` lies in time, for ties in rankings of spans (longest first, ...): so that
/// evidence does not depend on the order the file lists its events in. Last, the span's index.
fn time_key(trace: &Trace, i: u32) -> (Ns, Ns, u32, u32) {
    let s = &trace.spans[i as usize];
    (s.start, s.end, s.same_extent_order(), i)
}

/// Evidence for one span.
pub fn span_evidence(trace: &Trace, kind: &str, span: u32, name: String) -> Evidence {
    let s = &trace.spans[span as usize];
    Evidence {
        kind: kind.to_owned(),
        rank: rank_number(trace, trace.track(s.track).rank.0),
        start_ns: s.start,
        end_ns: s.end,
        name,
    }
}

/// `a` minus `b`, both sorted and disjoint. Time: `a`'s length plus the part of `b` from
/// `a`'s start on (found by binary search), so one interval against a long list costs what
/// it overlaps.
pub fn subtract(a: &[(Ns, Ns)], b: &[(Ns, Ns)]) -> Vec<(Ns, Ns)> {
    let mut out = Vec::new();
    let Some(&(first, _)) = a.first() else {
        return out;
    };
    let mut j = b.partition_point(|x| x.1 <= first);
    for &(s, e) in a {
        let mut cur = s;
        while j < b.len() && b[j].1 <= cur {
            j += 1;
        }
        let mut k = j;
        while k < b.len() && b[k].0 < e {
            if b[k].0 > cur {
                out.push((cur, b[k].0));
            }
            cur = cur.max(b[k].1);
            k += 1;
        }
        if cur < e {
            out.push((cur, e));
        }
    }
    out
}

/// Intersection of two sorted disjoint interval lists. Each list is entered where the other
/// begins (binary search), so one interval against a long list costs what it overlaps.
pub fn intersect(a: &[(Ns, Ns)], b: &[(Ns, Ns)]) -> Vec<(Ns, Ns)> {
    let mut out = Vec::new();
    let (Some(&(a0, _)), Some(&(b0, _))) = (a.first(), b.first()) else {
        return out;
    };
    let mut i = a.partition_point(|x| x.1 <= b0);
    let mut j = b.partition_point(|x| x.1 <= a0);
    while i < a.len() && j < b.len() {
        let lo = a[i].0.max(b[j].0);
        let hi = a[i].1.min(b[j].1);
        if hi > lo {
            out.push((lo, hi));
        }
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

/// A duration for messages (`12.3 ms`).
pub fn human(ns: Ns) -> String {
    let x = ns as f64;
    if ns.abs() >= 1_000_000_000 {
        format!("{:.3} s", x / 1e9)
    } else if ns.abs() >= 1_000_000 {
        format!("{:.2} ms", x / 1e6)
    } else if ns.abs() >= 1_000 {
        format!("{:.1} us", x / 1e3)
    } else {
        format!("{ns} ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A finding for [`estimate_gains`]: rule `rule`, `time_ns` at stake.
    fn finding(rule: &'static str, time_ns: Ns) -> Finding {
        finish(
            rule,
            Draft {
                intervals: vec![(0, time_ns)],
                ..Draft::default()
            },
            0,
            1_000_000,
        )
    }

    #[test]
    fn a_gain_above_the_time_at_stake_is_not_shown() {
        let mut findings = vec![
            finding(host_sync::ID, 1_000),
            finding(multi_rank::EXPOSED_ID, 1_000),
            finding(sync_copy::ID, 1_000),
        ];
        // As the per-step replay of an asynchronous pipeline can answer: the second set's
        // steps add up to more than its time at stake; the third selects nothing.
        let mut gains = |sets: &[Vec<Scale>]| {
            assert_eq!(sets.len(), 3);
            Ok::<_, String>(vec![Some(400), Some(1_500), None])
        };
        estimate_gains(&mut findings, &mut gains);
        assert_eq!(findings[0].estimated_gain_ns, Some(400));
        assert_eq!(findings[1].estimated_gain_ns, None);
        assert!(
            findings[1]
                .gain_note
                .starts_with("not estimated: whatif --overlap-comm")
                && findings[1]
                    .gain_note
                    .contains("more than the 1.0 us at stake"),
            "{}",
            findings[1].gain_note
        );
        assert_eq!(findings[2].estimated_gain_ns, None);
        assert!(findings[2].gain_note.contains("selects nothing"));
    }

    #[test]
    fn interval_algebra() {
        let a = vec![(0, 10), (20, 30)];
        let b = vec![(5, 22), (25, 26)];
        assert_eq!(subtract(&a, &b), vec![(0, 5), (22, 25), (26, 30)]);
        assert_eq!(intersect(&a, &b), vec![(5, 10), (20, 22), (25, 26)]);
        // Conservation: a = (a - b) + (a & b).
        assert_eq!(
            length(&subtract(&a, &b)) + length(&intersect(&a, &b)),
            length(&a)
        );
    }

    /// Sorted disjoint intervals in `0..64` from a bit mask (bit k: `[k, k+1)` is in).
    fn runs(mask: u64) -> Vec<(Ns, Ns)> {
        let mut out: Vec<(Ns, Ns)> = Vec::new();
        for k in 0..64 {
            if mask >> k & 1 == 1 {
                match out.last_mut() {
                    Some(last) if last.1 == k => last.1 = k + 1,
                    _ => out.push((k, k + 1)),
                }
            }
        }
        out
    }

    proptest::proptest! {
        /// Against set algebra on bit masks, whatever the lists' lengths and where they start
        /// (the binary searches that skip ahead must never skip an overlap).
        #[test]
        fn intersect_and_subtract_are_set_algebra(a: u64, b: u64) {
            proptest::prop_assert_eq!(intersect(&runs(a), &runs(b)), runs(a & b));
            proptest::prop_assert_eq!(subtract(&runs(a), &runs(b)), runs(a & !b));
            proptest::prop_assert_eq!(
                crate::device_time::gpu_time::intersection_length(&runs(a), &runs(b)),
                Ns::from((a & b).count_ones())
            );
        }
    }

    #[test]
    fn api_names_lose_the_version_suffix() {
        assert_eq!(api_name("cudaMemcpy_v3020"), "cudaMemcpy");
        assert_eq!(api_name("cudaMemcpyAsync"), "cudaMemcpyAsync");
        assert_eq!(api_name("my_v"), "my_v");
    }

    #[test]
    fn severity_from_share() {
        assert_eq!(Severity::of_share(0.5), Severity::Low);
        assert_eq!(Severity::of_share(3.0), Severity::Medium);
        assert_eq!(Severity::of_share(12.0), Severity::High);
    }
}
