//! Profiling-overhead correction (RL-Scope, seed 000, section 3.4 and appendix C) for
//! stratoscope's own recordings: counting book-keeping events, solving delta calibration from
//! runs at increasing collection levels, and removing the calibrated cost from each CPU thread
//! at the place it occurred ([`correct`], a pure `Trace -> Trace` transform run before
//! analysis).
//!
//! Book-keeping types (keys of [`Calibration::costs_ns`]):
//! - `annotation`: one operation or phase span (enter + exit), category `operation`/`phase`;
//! - `untraced_hook`: one profile-hook invocation that recorded nothing (counter tracks
//!   `untraced_hook_calls/<tid>`);
//! - `hook_span`: one span recorded by the hook (categories `backend`, `simulator`, `library`,
//!   `python`), including both hook invocations (call and return);
//! - `wrapper_span`: one span recorded by a `wrap_module`/`wrap_env` wrapper (categories
//!   `*_wrap`);
//! - `opencl_api_span`: one API call recorded by the OpenCL layer (category `opencl`);
//! - `os_event`: one record the OS level (`strato record --os`) made the kernel write in the
//!   thread's own context: a system call (its `sys_enter` + `sys_exit` tracepoints) or a switch
//!   out (`sched_switch`), counted per thread by the counter tracks `os_events/<tid>` the
//!   collector writes (cumulative, sampled at each switch out and at least every millisecond
//!   of system calls). The collector thread's own CPU time is not one of these: it runs in the
//!   launcher, outside the program's threads (`strato_analysis::recording::calibration` reports
//!   it);
//! - `cpu_sample`: one native CPU sample (`strato record --sample`) the kernel took in the
//!   thread: the `cpu-clock` timer interrupt, the frame-pointer walk of the user stack and the
//!   ring-buffer write, all charged to the sampled thread; counted by the thread's instants of
//!   category `cpu_sample` (one per sample, at its time);
//! - `python_stack`: one sample of the thread's Python stack by the program's own stack
//!   sampler (a daemon thread in the program): the GIL hand-over it forces on the thread,
//!   counted by the thread's instants of category `python_stack`. The sampler thread's own CPU
//!   time, and the launcher's sample collector, are not in the program's recording threads
//!   (`strato_analysis::recording::calibration` reports the collector's).
//!
//! Measured, not fitted: the time a thread was runnable on a CPU while the launcher's
//! collectors (`strato record --os`, `--sample`) ran there, counted per thread by the counters
//! `collector_wait_ns/<tid>` (cumulative ns, sampled at the end of each such wait). The
//! correction removes it where the counter grew, like the OS events, whatever the calibration
//! (it is the collectors' time, not the program's). It is wall time only: a thread's CPU time
//! does not grow while it waits, so no CPU-time figure of calibration contains it.
//!
//! Difference of averages (RL-Scope C.2): where tracing changes an API call's own cost (the
//! OpenCL layer's device tracing forces profiling and creates events inside `clEnqueue*`, and
//! drains timestamps inside `clFinish`), [`Calibration::api_inflation_ns`] holds, per API name,
//! the mean duration with device tracing minus the mean without ([`difference_of_averages`]);
//! each such call loses that much just before its end.
//!
//! Placement: a span's cost is split in four equal parts: before and after its start, before
//! and after its end; untraced hook calls are placed just before the record that reported them
//! (they happened between the previous record of the thread and that one), and so are OS
//! events (just before the counter sample that reported them) and samples (just before the
//! sample's instant: the interrupt or GIL hand-over happened there). Every time `t` on a
//! thread maps to `t - C(t)`, where `C(t)` is the cost removed at or before `t`. At most the gap
//! between two consecutive distinct times on a thread is removed there, so order is kept and no
//! span gets a negative length; cost that does not fit (the book-keeping really ran outside
//! the gap, e.g. a hook's work before its timestamp was taken) is carried to the following
//! gaps, and what is still left after the thread's last record is removed just after it, so
//! the thread loses exactly its calibrated cost (`deferred_ns` tells how much was carried).
//! Counters of a thread use its mapping;
//! device spans move with the CPU span that shares their correlation id; other tracks are
//! unchanged. Only ranks of format `strato` are corrected.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use strato_trace::{Ns, SourceFormat, Trace, TrackId, TrackKind};

/// Calibrated mean cost per book-keeping event, in nanoseconds, and per-call inflation of
/// API calls under device tracing (category `opencl`, keyed by call name).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub costs_ns: BTreeMap<String, f64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub api_inflation_ns: BTreeMap<String, f64>,
}

impl Calibration {
    /// True when it corrects nothing.
    pub fn is_empty(&self) -> bool {
        self.costs_ns.is_empty() && self.api_inflation_ns.is_empty()
    }
}

/// The book-keeping type of the OS level's events in a thread.
pub const OS_EVENT: &str = "os_event";
/// Name prefix of the per-thread OS-event counters (`strato_record::os` writes them).
pub const OS_EVENTS_COUNTER_PREFIX: &str = "os_events/";
/// Name prefix of the per-thread counters of the time a thread was runnable behind the
/// launcher's collectors (`collector_wait_ns/<tid>`, cumulative ns; `strato_record::os`).
pub const COLLECTOR_WAIT_COUNTER_PREFIX: &str = "collector_wait_ns/";

/// The book-keeping type of a native CPU sample in a thread (`strato record --sample`), and the
/// category of its instants (`strato_record::sample` writes them).
pub const CPU_SAMPLE: &str = strato_trace::names::CPU_SAMPLE_CATEGORY;
/// The book-keeping type of a Python-stack sample of a thread (the program's stack sampler),
/// and the category of its instants.
pub const PYTHON_STACK: &str = strato_trace::names::PYTHON_STACK_CATEGORY;

/// The category of the OpenCL layer's API-call spans.
pub const OPENCL_API_CATEGORY: &str = "opencl";

/// Book-keeping events counted in a trace (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Counts {
    pub annotation: u64,
    pub untraced_hook: u64,
    pub hook_span: u64,
    pub wrapper_span: u64,
    #[serde(default)]
    pub opencl_api_span: u64,
    #[serde(default)]
    pub os_event: u64,
    /// Native CPU samples (`cpu_sample` instants); left out of the JSON when 0, so recordings
    /// without sampling keep their shape.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cpu_sample: u64,
    /// Python-stack samples (`python_stack` instants); left out of the JSON when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub python_stack: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Counts {
    /// `(key, count)` pairs in calibration order.
    pub fn pairs(&self) -> [(&'static str, u64); 8] {
        [
            ("annotation", self.annotation),
            ("untraced_hook", self.untraced_hook),
            ("hook_span", self.hook_span),
            ("wrapper_span", self.wrapper_span),
            ("opencl_api_span", self.opencl_api_span),
            (OS_EVENT, self.os_event),
            (CPU_SAMPLE, self.cpu_sample),
            (PYTHON_STACK, self.python_stack),
        ]
    }
}

/// The book-keeping type of an instant category: samples ([`CPU_SAMPLE`], [`PYTHON_STACK`]).
pub fn kind_of_instant_category(category: &str) -> Option<&'static str> {
    match category {
        CPU_SAMPLE => Some(CPU_SAMPLE),
        PYTHON_STACK => Some(PYTHON_STACK),
        _ => None,
    }
}

/// Samples of the `(pid, tid)` threads `keep` accepts, within `window` (`[from, to]`, None:
/// the whole recording): `(native cpu samples, Python-stack samples)`, one per instant.
pub fn count_samples(
    trace: &Trace,
    keep: impl Fn(i64, i64) -> bool,
    window: Option<(Ns, Ns)>,
) -> (u64, u64) {
    let (mut native, mut python) = (0, 0);
    for i in &trace.instants {
        let TrackKind::Thread { pid, tid } = trace.track(i.track).kind else {
            continue;
        };
        if window.is_some_and(|(from, to)| i.ts < from || i.ts > to)
            || !strato_rank(trace, i.track)
            || !keep(pid, tid)
        {
            continue;
        }
        match kind_of_instant_category(trace.str(i.category)) {
            Some(CPU_SAMPLE) => native += 1,
            Some(PYTHON_STACK) => python += 1,
            _ => {}
        }
    }
    (native, python)
}

/// The book-keeping type of a span category (None: not book-keeping of stratoscope's).
pub fn kind_of_category(category: &str) -> Option<&'static str> {
    match category {
        "operation" | "phase" => Some("annotation"),
        "backend" | "simulator" | "library" | "python" => Some("hook_span"),
        c if c.ends_with("_wrap") => Some("wrapper_span"),
        OPENCL_API_CATEGORY => Some("opencl_api_span"),
        _ => None,
    }
}

fn strato_rank(trace: &Trace, track: TrackId) -> bool {
    let rank = trace.track(track).rank;
    trace
        .ranks
        .get(rank.0 as usize)
        .is_some_and(|r| r.format == SourceFormat::Strato)
}

fn untraced_tid(trace: &Trace, track: TrackId) -> Option<(i64, i64)> {
    counter_tid(trace, track, "untraced_hook_calls/")
}

fn os_events_tid(trace: &Trace, track: TrackId) -> Option<(i64, i64)> {
    counter_tid(trace, track, OS_EVENTS_COUNTER_PREFIX)
}

fn collector_wait_tid(trace: &Trace, track: TrackId) -> Option<(i64, i64)> {
    counter_tid(trace, track, COLLECTOR_WAIT_COUNTER_PREFIX)
}

/// `(pid, tid)` of a per-thread counter named `<prefix><tid>`.
fn counter_tid(trace: &Trace, track: TrackId, prefix: &str) -> Option<(i64, i64)> {
    match &trace.track(track).kind {
        TrackKind::Counter {
            pid: Some(pid),
            name,
            ..
        } => name
            .strip_prefix(prefix)
            .and_then(|t| t.parse().ok())
            .map(|tid| (*pid, tid)),
        _ => None,
    }
}

/// OS book-keeping events of the `(pid, tid)` threads `keep` accepts, within `window`
/// (`(from, to]`, None: the whole recording): per thread, its counter's value at its last
/// sample at or before `to` minus the value at its last sample at or before `from`. The
/// counter is sampled at each switch out and at least every millisecond of system calls, so a
/// window boundary is off by at most the events of one such interval.
pub fn count_os_events(
    trace: &Trace,
    keep: impl Fn(i64, i64) -> bool,
    window: Option<(Ns, Ns)>,
) -> u64 {
    // Per counter track: value at or before `from`, and at or before `to`.
    let mut at: FxHashMap<TrackId, (f64, f64)> = FxHashMap::default();
    for c in &trace.counters {
        let Some((p, t)) = os_events_tid(trace, c.track) else {
            continue;
        };
        if !strato_rank(trace, c.track) || !keep(p, t) {
            continue;
        }
        let e = at.entry(c.track).or_insert((0.0, 0.0));
        match window {
            None => e.1 = e.1.max(c.value),
            Some((from, to)) => {
                if c.ts <= from {
                    e.0 = e.0.max(c.value);
                }
                if c.ts <= to {
                    e.1 = e.1.max(c.value);
                }
            }
        }
    }
    at.values().map(|(a, b)| (b - a).max(0.0) as u64).sum()
}

/// Counts book-keeping events, optionally only those of process `pid`.
pub fn count(trace: &Trace, pid: Option<i64>) -> Counts {
    count_where(trace, |p, _| pid.is_none_or(|want| want == p))
}

/// Counts book-keeping events of the given `(pid, tid)` threads only.
pub fn count_threads(trace: &Trace, threads: &[(i64, i64)]) -> Counts {
    count_where(trace, |p, t| threads.contains(&(p, t)))
}

fn count_where(trace: &Trace, keep: impl Fn(i64, i64) -> bool) -> Counts {
    let mut counts = Counts::default();
    for span in &trace.spans {
        let TrackKind::Thread { pid, tid } = trace.track(span.track).kind else {
            continue;
        };
        if !strato_rank(trace, span.track) || !keep(pid, tid) {
            continue;
        }
        match kind_of_category(trace.str(span.category)) {
            Some("annotation") => counts.annotation += 1,
            Some("hook_span") => counts.hook_span += 1,
            Some("wrapper_span") => counts.wrapper_span += 1,
            Some("opencl_api_span") => counts.opencl_api_span += 1,
            _ => {}
        }
    }
    let mut last: FxHashMap<TrackId, f64> = FxHashMap::default();
    for c in &trace.counters {
        if let Some((p, t)) = untraced_tid(trace, c.track) {
            if keep(p, t) {
                let v = last.entry(c.track).or_insert(0.0);
                *v = v.max(c.value);
            }
        }
    }
    counts.untraced_hook = last.values().map(|v| *v as u64).sum();
    counts.os_event = count_os_events(trace, &keep, None);
    (counts.cpu_sample, counts.python_stack) = count_samples(trace, &keep, None);
    counts
}

/// Calls of one API name: how many, and their summed duration.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CallStats {
    pub count: u64,
    pub total_ns: f64,
}

/// Per API name, the OpenCL layer's calls (category `opencl`) on the given `(pid, tid)`
/// threads (all threads when `threads` is None).
pub fn api_calls(trace: &Trace, threads: Option<&[(i64, i64)]>) -> BTreeMap<String, CallStats> {
    let mut out: BTreeMap<String, CallStats> = BTreeMap::new();
    for span in &trace.spans {
        let TrackKind::Thread { pid, tid } = trace.track(span.track).kind else {
            continue;
        };
        if trace.str(span.category) != OPENCL_API_CATEGORY
            || threads.is_some_and(|t| !t.contains(&(pid, tid)))
        {
            continue;
        }
        let e = out.entry(trace.str(span.name).to_owned()).or_default();
        e.count += 1;
        e.total_ns += span.duration() as f64;
    }
    out
}

/// Calls of one name each side needs before its averages are compared: a call made a handful
/// of times (clBuildProgram, clGetDeviceIDs) varies by far more than any tracing cost.
pub const MIN_CALLS_FOR_DIFFERENCE: u64 = 20;

/// OpenCL calls that can wait for the device (`clFinish`, `clWaitForEvents`, reads, writes
/// and maps, which may be blocking): their duration is mostly device time, not the caller's
/// CPU, so a difference of their averages measures the device's variance, not tracing cost.
pub fn api_call_waits_for_device(name: &str) -> bool {
    matches!(name, "clFinish" | "clWaitForEvents")
        || [
            "clEnqueueRead",
            "clEnqueueWrite",
            "clEnqueueMap",
            "clEnqueueSVM",
        ]
        .iter()
        .any(|p| name.starts_with(p))
}

/// Difference of averages (RL-Scope C.2): per API name called at least
/// [`MIN_CALLS_FOR_DIFFERENCE`] times in both sets of runs and not waiting for the device
/// ([`api_call_waits_for_device`]), the mean call duration `with` device tracing minus the mean
/// `without`, never below 0 (a call does not get faster when traced; a negative difference is
/// noise).
pub fn difference_of_averages(
    with: &[&BTreeMap<String, CallStats>],
    without: &[&BTreeMap<String, CallStats>],
) -> BTreeMap<String, f64> {
    let pool = |runs: &[&BTreeMap<String, CallStats>]| {
        let mut m: BTreeMap<String, CallStats> = BTreeMap::new();
        for run in runs {
            for (name, c) in run.iter() {
                let e = m.entry(name.clone()).or_default();
                e.count += c.count;
                e.total_ns += c.total_ns;
            }
        }
        m
    };
    let (a, b) = (pool(with), pool(without));
    a.iter()
        .filter(|(name, _)| !api_call_waits_for_device(name))
        .filter_map(|(name, x)| {
            let y = b.get(name)?;
            (x.count >= MIN_CALLS_FOR_DIFFERENCE && y.count >= MIN_CALLS_FOR_DIFFERENCE).then(
                || {
                    let d = x.total_ns / x.count as f64 - y.total_ns / y.count as f64;
                    (name.clone(), d.max(0.0))
                },
            )
        })
        .collect()
}

/// The summed inflation of `calls` under `inflation` (per-name means from
/// [`difference_of_averages`]).
pub fn api_inflation_total(
    calls: &BTreeMap<String, CallStats>,
    inflation: &BTreeMap<String, f64>,
) -> f64 {
    calls
        .iter()
        .map(|(name, c)| inflation.get(name).copied().unwrap_or(0.0) * c.count as f64)
        .sum()
}

/// One calibration run: its collection level, measured time and book-keeping counts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CalibrationRun {
    pub level: u64,
    pub time_ns: f64,
    pub counts: Counts,
}

/// The most one book-keeping event may cost, in ns. The recorder's events cost 0.1-2 us in
/// microbenchmarks (docs/recording.md); a fit beyond 20 us is run-to-run noise landing on a
/// type with few events (20 annotations in a 0.2 s program: 10 ms of noise reads as 500 us
/// each), so the cost is held at this bound instead.
pub const MAX_COST_NS: f64 = 20_000.0;

/// The most one native CPU sample may cost the sampled thread, in ns: a timer interrupt with
/// the kernel's walk of the user stack, which on a virtual machine (interrupts trap to the
/// hypervisor) was fitted at the 20 us of [`MAX_COST_NS`] and above it; samples are counted by
/// the thousand, so the fit is not noise landing on a few events.
pub const MAX_CPU_SAMPLE_COST_NS: f64 = 200_000.0;

/// The bound of the cost named `name` ([`MAX_COST_NS`], [`MAX_CPU_SAMPLE_COST_NS`]).
pub fn max_cost_ns(name: &str) -> f64 {
    if name == CPU_SAMPLE {
        MAX_CPU_SAMPLE_COST_NS
    } else {
        MAX_COST_NS
    }
}

/// Delta calibration over runs at levels 0 (uninstrumented), 1 (annotations), 2 (hook
/// recording nothing), 3 (interception) and 4 (full) (and, for the OpenCL layer, runs with its
/// API tracing on or off), solved jointly: every run is one
/// equation `time = base + sum_k cost_k x count_k` over its own book-keeping counts, and the
/// base time and the per-event costs are fitted by least squares over all runs with the costs
/// constrained to `[0, max_cost_ns(type)]` (exact: only the types with events enter, at most eight
/// costs and in practice five or six, so every combination of free / at 0 / at the bound is tried).
/// Costs of types whose count is zero in every run are left out. Runs of every level enter the fit,
/// so no level's error carries into the next (as it does when the levels are solved one after
/// another). Callers pass the runs they trust (e.g. the fastest runs of each configuration:
/// interference only ever adds time).
pub fn calibrate(runs: &[CalibrationRun]) -> Calibration {
    let mut cal = Calibration::default();
    if runs.is_empty() || !runs.iter().any(|r| r.level == 0) {
        return cal;
    }
    let names = Counts::default().pairs().map(|p| p.0);
    let keys: Vec<usize> = (0..Counts::default().pairs().len())
        .filter(|&k| runs.iter().any(|r| r.counts.pairs()[k].1 > 0))
        .collect();
    // Each cost is free, held at 0 or held at the bound: every combination is tried and the
    // feasible one with the least residual kept (exact: 3^k fits for k active types, 243 for five).
    let mut best: Option<(f64, Vec<(usize, f64)>)> = None;
    for combo in 0..3u32.pow(keys.len() as u32) {
        let state = |i: usize| combo / 3u32.pow(i as u32) % 3; // 0 zero, 1 free, 2 bound
        let free: Vec<usize> = (0..keys.len())
            .filter(|&i| state(i) == 1)
            .map(|i| keys[i])
            .collect();
        let bound: Vec<usize> = (0..keys.len())
            .filter(|&i| state(i) == 2)
            .map(|i| keys[i])
            .collect();
        let at_bound = |r: &CalibrationRun| -> f64 {
            let pairs = r.counts.pairs();
            bound
                .iter()
                .map(|&k| max_cost_ns(pairs[k].0) * pairs[k].1 as f64)
                .sum()
        };
        let shifted: Vec<CalibrationRun> = runs
            .iter()
            .map(|r| CalibrationRun {
                time_ns: r.time_ns - at_bound(r),
                ..*r
            })
            .collect();
        let Some(x) = least_squares(&shifted, &free) else {
            continue;
        };
        if x[1..]
            .iter()
            .zip(&free)
            .any(|(&c, &k)| !(0.0..=max_cost_ns(names[k])).contains(&c))
        {
            continue;
        }
        let rss: f64 = shifted
            .iter()
            .map(|r| {
                let pairs = r.counts.pairs();
                let fit = x[0]
                    + free
                        .iter()
                        .zip(&x[1..])
                        .map(|(&k, c)| c * pairs[k].1 as f64)
                        .sum::<f64>();
                (r.time_ns - fit).powi(2)
            })
            .sum();
        if best.as_ref().is_none_or(|b| rss < b.0) {
            let costs = free
                .into_iter()
                .zip(x[1..].iter().copied())
                .chain(bound.into_iter().map(|k| (k, max_cost_ns(names[k]))))
                .collect();
            best = Some((rss, costs));
        }
    }
    for &k in &keys {
        cal.costs_ns.insert(names[k].to_owned(), 0.0);
    }
    if let Some((_, costs)) = best {
        for (k, c) in costs {
            cal.costs_ns.insert(names[k].to_owned(), c);
        }
    }
    cal
}

/// Unconstrained least squares of `time = x0 + sum_j x_{j+1} count_{active[j]}` (normal
/// equations on columns scaled to unit maximum, Gaussian elimination with partial pivoting).
/// None when the columns are (numerically) dependent.
fn least_squares(runs: &[CalibrationRun], active: &[usize]) -> Option<Vec<f64>> {
    let n = active.len() + 1;
    let row = |r: &CalibrationRun| -> Vec<f64> {
        let pairs = r.counts.pairs();
        std::iter::once(1.0)
            .chain(active.iter().map(|&k| pairs[k].1 as f64))
            .collect()
    };
    let mut scale = vec![0.0f64; n];
    for r in runs {
        for (s, v) in scale.iter_mut().zip(row(r)) {
            *s = s.max(v.abs());
        }
    }
    if scale.contains(&0.0) {
        return None;
    }
    // Augmented normal equations [A^T A | A^T y] on scaled columns.
    let mut m = vec![vec![0.0f64; n + 1]; n];
    for r in runs {
        let a: Vec<f64> = row(r).iter().zip(&scale).map(|(v, s)| v / s).collect();
        for i in 0..n {
            for j in 0..n {
                m[i][j] += a[i] * a[j];
            }
            m[i][n] += a[i] * r.time_ns;
        }
    }
    let norm = (0..n).map(|i| m[i][i]).fold(0.0, f64::max);
    for col in 0..n {
        let piv = (col..n).max_by(|&a, &b| m[a][col].abs().total_cmp(&m[b][col].abs()))?;
        if m[piv][col].abs() <= norm * 1e-12 {
            return None;
        }
        m.swap(col, piv);
        let pivot = m[col].clone();
        for (r, row) in m.iter_mut().enumerate() {
            if r != col {
                let f = row[col] / pivot[col];
                for (x, p) in row[col..].iter_mut().zip(&pivot[col..]) {
                    *x -= f * p;
                }
            }
        }
    }
    Some((0..n).map(|i| m[i][n] / m[i][i] / scale[i]).collect())
}

/// The correction applied to one thread.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThreadCorrection {
    pub pid: i64,
    pub tid: i64,
    /// Cost removed from this thread in total (its whole calibrated cost).
    pub removed_ns: Ns,
    /// Cost that did not fit in the gap before the record it belongs to and was removed from
    /// later gaps instead (each nanosecond counted once).
    pub deferred_ns: Ns,
}

/// What [`correct`] did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CorrectionSummary {
    pub threads: Vec<ThreadCorrection>,
}

impl CorrectionSummary {
    /// Cost removed from thread `(pid, tid)`.
    pub fn removed(&self, pid: i64, tid: i64) -> Ns {
        self.threads
            .iter()
            .filter(|t| t.pid == pid && t.tid == tid)
            .map(|t| t.removed_ns)
            .sum()
    }
}

/// The time mapping of one thread: at each distinct time, the cost removed up to and
/// including it.
#[derive(Debug, Default)]
struct Mapping {
    times: Vec<Ns>,
    removed: Vec<Ns>,
}

impl Mapping {
    fn shift(&self, t: Ns) -> Ns {
        let i = self.times.partition_point(|&x| x <= t);
        if i == 0 {
            0
        } else {
            self.removed[i - 1]
        }
    }
}

/// Removes calibrated book-keeping cost from every CPU thread of stratoscope recordings (see
/// the module docs). Returns the corrected trace and what was removed.
pub fn correct(trace: &Trace, cal: &Calibration) -> (Trace, CorrectionSummary) {
    let cost = |k: &str| cal.costs_ns.get(k).copied().unwrap_or(0.0);
    // Per thread track: (time, before-cost, after-cost) points, and every event time.
    let mut points: FxHashMap<TrackId, Vec<(Ns, f64, f64)>> = FxHashMap::default();
    for span in &trace.spans {
        if !strato_rank(trace, span.track)
            || !matches!(trace.track(span.track).kind, TrackKind::Thread { .. })
        {
            continue;
        }
        let category = trace.str(span.category);
        let c = kind_of_category(category).map_or(0.0, cost) / 4.0;
        // A traced call's own inflation happened inside it: removed just before its end.
        let inflation = if category == OPENCL_API_CATEGORY {
            cal.api_inflation_ns
                .get(trace.str(span.name))
                .copied()
                .unwrap_or(0.0)
        } else {
            0.0
        };
        let p = points.entry(span.track).or_default();
        p.push((span.start, c, c));
        p.push((span.end, c + inflation, c));
    }
    // Untraced counters belong to the thread track of the same (pid, tid).
    let mut thread_of: FxHashMap<(i64, i64), TrackId> = FxHashMap::default();
    for (i, t) in trace.tracks.iter().enumerate() {
        if let TrackKind::Thread { pid, tid } = t.kind {
            thread_of.insert((pid, tid), TrackId(i as u32));
        }
    }
    let mut counter_thread: FxHashMap<TrackId, TrackId> = FxHashMap::default();
    let mut last_value: FxHashMap<TrackId, f64> = FxHashMap::default();
    let untraced_cost = cost("untraced_hook");
    let os_event_cost = cost(OS_EVENT);
    for c in &trace.counters {
        if !strato_rank(trace, c.track) {
            continue;
        }
        // Collector waits are measured, not fitted: each nanosecond of the counter is one.
        let Some((key, per_event)) = untraced_tid(trace, c.track)
            .map(|k| (k, untraced_cost))
            .or_else(|| os_events_tid(trace, c.track).map(|k| (k, os_event_cost)))
            .or_else(|| collector_wait_tid(trace, c.track).map(|k| (k, 1.0)))
        else {
            continue;
        };
        let Some(&thread) = thread_of.get(&key) else {
            continue;
        };
        counter_thread.insert(c.track, thread);
        let prev = last_value.insert(c.track, c.value).unwrap_or(0.0);
        let n = (c.value - prev).max(0.0);
        points
            .entry(thread)
            .or_default()
            .push((c.ts, n * per_event, 0.0));
    }
    // A sample's cost was paid just before its instant, in the sampled thread.
    let sample_cost = |category: &str| kind_of_instant_category(category).map_or(0.0, cost);
    for i in &trace.instants {
        if !strato_rank(trace, i.track)
            || !matches!(trace.track(i.track).kind, TrackKind::Thread { .. })
        {
            continue;
        }
        let c = sample_cost(trace.str(i.category));
        if c > 0.0 {
            points.entry(i.track).or_default().push((i.ts, c, 0.0));
        }
    }
    let mut mappings: FxHashMap<TrackId, Mapping> = FxHashMap::default();
    let mut summary = CorrectionSummary::default();
    let mut tracks: Vec<_> = points.into_iter().collect();
    tracks.sort_by_key(|(t, _)| *t);
    for (track, mut pts) in tracks {
        pts.sort_by_key(|p| p.0);
        let mut mapping = Mapping::default();
        let mut removed = 0.0f64;
        let mut deferred = 0.0f64;
        let mut carry = 0.0f64;
        let mut pending_after = 0.0f64;
        let mut prev_t: Option<Ns> = None;
        let mut i = 0;
        while i < pts.len() {
            let t = pts[i].0;
            let mut before = 0.0;
            let mut after = 0.0;
            while i < pts.len() && pts[i].0 == t {
                before += pts[i].1;
                after += pts[i].2;
                i += 1;
            }
            let new = pending_after + before;
            let mut add = carry + new;
            carry = 0.0;
            if let Some(p) = prev_t {
                let gap = (t - p) as f64;
                if add > gap {
                    // Carried cost goes first; what is left of this record's own cost waits.
                    deferred += new.min(add - gap);
                    carry = add - gap;
                    add = gap;
                }
            }
            removed += add;
            pending_after = after;
            prev_t = Some(t);
            mapping.times.push(t);
            mapping.removed.push(removed.round() as Ns);
        }
        if let Some(p) = prev_t {
            // The after-part of the last record, and any carried cost, land just after it.
            removed += pending_after + carry;
            mapping.times.push(p + 1);
            mapping.removed.push(removed.round() as Ns);
        }
        if let TrackKind::Thread { pid, tid } = trace.track(track).kind {
            summary.threads.push(ThreadCorrection {
                pid,
                tid,
                removed_ns: removed.round() as Ns,
                deferred_ns: deferred.round() as Ns,
            });
        }
        mappings.insert(track, mapping);
    }
    let mut out = trace.clone();
    let mut corr_shift: FxHashMap<u64, Ns> = FxHashMap::default();
    for span in &mut out.spans {
        if let Some(m) = mappings.get(&span.track) {
            let (s, e) = (m.shift(span.start), m.shift(span.end));
            if let Some(c) = span.correlation.get() {
                corr_shift.entry(c).or_insert(s);
            }
            span.start -= s;
            span.end = (span.end - e).max(span.start);
        }
    }
    for span in &mut out.spans {
        if trace.track(span.track).is_device() {
            if let Some(s) = span.correlation.get().and_then(|c| corr_shift.get(&c)) {
                span.start -= s;
                span.end -= s;
            }
        }
    }
    for i in &mut out.instants {
        if let Some(m) = mappings.get(&i.track) {
            i.ts -= m.shift(i.ts);
        }
    }
    for c in &mut out.counters {
        let track = counter_thread.get(&c.track).copied().unwrap_or(c.track);
        if let Some(m) = mappings.get(&track) {
            c.ts -= m.shift(c.ts);
        }
    }
    for f in &mut out.flows {
        for end in [&mut f.from, &mut f.to].into_iter().flatten() {
            if let Some(s) = end.span {
                end.ts = out.spans[s.0 as usize].start;
            }
        }
    }
    (out, summary)
}

/// The calibration stored with a recording (`calibration.json` beside the files, which the
/// importer puts in the rank's metadata under `"calibration"`).
pub fn recorded_calibration(trace: &Trace) -> Option<Calibration> {
    trace
        .recordings()
        .find_map(|meta| serde_json::from_value(meta.calibration.clone()?).ok())
}

/// Applies [`correct`] with the recording's own calibration, when it has one; other traces are
/// returned unchanged. This runs before every analysis of a calibrated recording.
pub fn apply_recorded_calibration(trace: Trace) -> Trace {
    match recorded_calibration(&trace) {
        Some(cal) if !cal.is_empty() => correct(&trace, &cal).0,
        _ => trace,
    }
}

/// The cost [`correct`] would remove from thread `(pid, tid)` at or before time `t`.
pub fn removed_before(trace: &Trace, cal: &Calibration, pid: i64, tid: i64, t: Ns) -> Ns {
    removed_at(trace, cal, pid, tid, &[t])[0]
}

/// [`removed_before`] at several times of one thread, from a single correction pass.
pub fn removed_at(trace: &Trace, cal: &Calibration, pid: i64, tid: i64, times: &[Ns]) -> Vec<Ns> {
    // Used for validation: correct once, then read the thread's mapping at each time through
    // marker instants.
    let track = trace.tracks.iter().position(
        |tr| matches!(tr.kind, TrackKind::Thread { pid: p, tid: x } if p == pid && x == tid),
    );
    let Some(track) = track else {
        return vec![0; times.len()];
    };
    let mut probe = trace.clone();
    let name = probe.intern("__probe__");
    let first = probe.instants.len();
    probe
        .instants
        .extend(times.iter().map(|&t| strato_trace::Instant {
            track: TrackId(track as u32),
            ts: t,
            name,
            category: name,
            level: strato_trace::Level::Other,
            args: None,
        }));
    let (corrected, _) = correct(&probe, cal);
    times
        .iter()
        .zip(&corrected.instants[first..])
        .map(|(&t, i)| t - i.ts)
        .collect()
}

/// The mean and the sample standard deviation (n - 1) of `values`: NaN for both when there is
/// none, a standard deviation of 0 for one value. For timed repeats (`strato overhead`).
pub fn mean_and_sample_std(values: &[f64]) -> (f64, f64) {
    if values.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = if values.len() > 1 {
        values.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)
    } else {
        0.0
    };
    (mean, var.sqrt())
}

#[cfg(test)]
mod tests {
    #[test]
    fn mean_and_sample_std_of_timed_repeats() {
        let (m, s) = super::mean_and_sample_std(&[1.0, 2.0, 3.0, 4.0]);
        assert!((m - 2.5).abs() < 1e-12);
        assert!((s - 1.2909944487358056).abs() < 1e-12);
        assert!(super::mean_and_sample_std(&[]).0.is_nan());
        assert_eq!(super::mean_and_sample_std(&[7.0]), (7.0, 0.0));
    }

    use super::*;
    use strato_trace::testing::{rank, TraceBuilder};
    use strato_trace::Level;

    fn trace() -> Trace {
        let mut b = TraceBuilder::new();
        b.rank(strato_trace::Rank {
            format: SourceFormat::Strato,
            ..rank(None, "x")
        });
        let cpu = b.thread(1, 1);
        let ctr = b.counter_track(Some(1), None, "untraced_hook_calls/1", "count");
        // step [0, 1000) containing numpy.dot [100, 300); 10 untraced calls reported at 300.
        b.span(cpu, Level::Operation, "step", 0, 1000)
            .category("operation");
        b.span(cpu, Level::Library, "numpy.dot", 100, 300)
            .category("library");
        b.counter(ctr, 300, 10.0);
        b.build()
    }

    #[test]
    fn counts_and_correction() {
        let t = trace();
        let c = count(&t, None);
        assert_eq!(
            c,
            Counts {
                annotation: 1,
                untraced_hook: 10,
                hook_span: 1,
                wrapper_span: 0,
                opencl_api_span: 0,
                os_event: 0,
                cpu_sample: 0,
                python_stack: 0,
            }
        );
        let cal = Calibration {
            costs_ns: [
                ("annotation".to_string(), 40.0),
                ("hook_span".to_string(), 80.0),
                ("untraced_hook".to_string(), 5.0),
            ]
            .into_iter()
            .collect(),
            ..Calibration::default()
        };
        let (out, summary) = correct(&t, &cal);
        // Total removed: 40 + 80 + 50.
        assert_eq!(summary.removed(1, 1), 170);
        let step = &out.spans[0];
        // Before-start quarter of the step (10) shifts its start too.
        assert_eq!(step.start, -10);
        assert_eq!(step.end - step.start, 1000 - 150);
        let dot = &out.spans[1];
        // dot loses its inner quarters (20 + 20) and the untraced calls reported at its end.
        assert_eq!(dot.end - dot.start, 200 - 40 - 50);
        assert_eq!(removed_before(&t, &cal, 1, 1, 2000), 170);
    }

    #[test]
    fn os_events_are_counted_per_window_and_removed_where_the_counter_grew() {
        let mut b = TraceBuilder::new();
        b.rank(strato_trace::Rank {
            format: SourceFormat::Strato,
            ..rank(None, "x")
        });
        let cpu = b.thread(1, 1);
        let other = b.thread(1, 2);
        let os = b.counter_track(Some(1), None, "os_events/1", "count");
        let os_other = b.counter_track(Some(1), None, "os_events/2", "count");
        b.span(cpu, Level::Operation, "step", 0, 10_000)
            .category("operation");
        b.span(cpu, Level::Os, "running", 0, 6_000)
            .category("thread_state");
        b.span(other, Level::Os, "running", 0, 500)
            .category("thread_state");
        // Thread 1: 4 events by 2000, 10 by 6000, none after; thread 2: 3 events by 500.
        b.counter(os, 2_000, 4.0);
        b.counter(os, 6_000, 10.0);
        b.counter(os, 9_000, 10.0);
        b.counter(os_other, 500, 3.0);
        let t = b.build();
        assert_eq!(count(&t, None).os_event, 13);
        assert_eq!(count_threads(&t, &[(1, 1)]).os_event, 10);
        let only_1 = |p: i64, tid: i64| (p, tid) == (1, 1);
        assert_eq!(count_os_events(&t, only_1, Some((2_000, 9_000))), 6);
        assert_eq!(count_os_events(&t, only_1, Some((0, 1_999))), 0);
        assert_eq!(count_os_events(&t, only_1, Some((-5, 6_000))), 10);
        let cal = Calibration {
            costs_ns: [(OS_EVENT.to_string(), 100.0)].into_iter().collect(),
            ..Calibration::default()
        };
        let (out, summary) = correct(&t, &cal);
        // 400 ns just before 2000, 600 ns just before 6000: the step and the running span end
        // 1000 ns earlier; thread 2 loses its 300 ns inside its running span.
        assert_eq!(summary.removed(1, 1), 1_000);
        assert_eq!(summary.removed(1, 2), 300);
        assert_eq!((out.spans[0].start, out.spans[0].end), (0, 9_000));
        assert_eq!((out.spans[1].start, out.spans[1].end), (0, 5_000));
        assert_eq!(out.spans[2].end, 200);
        assert_eq!(removed_before(&t, &cal, 1, 1, 3_000), 400);
    }

    #[test]
    fn samples_are_counted_per_thread_and_removed_before_each_sample() {
        let mut b = TraceBuilder::new();
        b.rank(strato_trace::Rank {
            format: SourceFormat::Strato,
            ..rank(None, "x")
        });
        let main = b.thread(1, 1);
        let other = b.thread(1, 2);
        b.span(main, Level::Operation, "step", 0, 10_000)
            .category("operation");
        // Thread 1: native samples at 1000, 4000, 8000 and Python stacks at 2000, 4000;
        // thread 2: one native sample at 500.
        for ts in [1_000, 4_000, 8_000] {
            b.instant(main, Level::Os, CPU_SAMPLE, "f [x.so]", ts);
        }
        for ts in [2_000, 4_000] {
            b.instant(main, Level::Python, PYTHON_STACK, "main (a.py)", ts);
        }
        b.instant(other, Level::Os, CPU_SAMPLE, "g [x.so]", 500);
        // Not a sample: no cost.
        b.instant(main, Level::Os, "sched", "migrate", 5_000);
        let t = b.build();
        let c = count(&t, None);
        assert_eq!((c.cpu_sample, c.python_stack), (4, 2));
        let c1 = count_threads(&t, &[(1, 1)]);
        assert_eq!((c1.cpu_sample, c1.python_stack), (3, 2));
        let only_1 = |p: i64, tid: i64| (p, tid) == (1, 1);
        assert_eq!(count_samples(&t, only_1, Some((1_500, 4_000))), (1, 2));
        assert_eq!(count_samples(&t, only_1, Some((8_001, 9_000))), (0, 0));
        let cal = Calibration {
            costs_ns: [
                (CPU_SAMPLE.to_string(), 100.0),
                (PYTHON_STACK.to_string(), 30.0),
            ]
            .into_iter()
            .collect(),
            ..Calibration::default()
        };
        let (out, summary) = correct(&t, &cal);
        // Thread 1: 3 x 100 + 2 x 30; thread 2: 100. Exactly samples x cost per thread.
        assert_eq!(summary.removed(1, 1), 360);
        assert_eq!(summary.removed(1, 2), 100);
        // The step ends after every sample of thread 1: it loses all of them.
        assert_eq!((out.spans[0].start, out.spans[0].end), (0, 9_640));
        // Cost lands just before each sample: nothing before 1000, 100 by it, 260 by 4000.
        assert_eq!(removed_before(&t, &cal, 1, 1, 999), 0);
        assert_eq!(removed_before(&t, &cal, 1, 1, 1_000), 100);
        assert_eq!(removed_before(&t, &cal, 1, 1, 4_000), 260);
        // Without a cost for samples nothing moves.
        let (same, _) = correct(&t, &Calibration::default());
        assert_eq!(same.spans, t.spans);
        assert_eq!(same.instants, t.instants);
    }

    #[test]
    fn collector_wait_is_removed_where_it_ended_whatever_the_costs() {
        let mut b = TraceBuilder::new();
        b.rank(strato_trace::Rank {
            format: SourceFormat::Strato,
            ..rank(None, "x")
        });
        let main = b.thread(1, 1);
        let wait = b.counter_track(Some(1), None, "collector_wait_ns/1", "ns");
        b.span(main, Level::Os, "running", 0, 1_000)
            .category("thread_state");
        b.span(main, Level::Os, "runnable", 1_000, 1_500)
            .category("thread_state");
        b.span(main, Level::Os, "running", 1_500, 3_000)
            .category("thread_state");
        // 300 of the 500 ns runnable were behind the collector, reported when it ran again.
        b.counter(wait, 1_500, 300.0);
        let t = b.build();
        let (out, summary) = correct(
            &t,
            &Calibration {
                costs_ns: [("annotation".to_string(), 10.0)].into_iter().collect(),
                ..Calibration::default()
            },
        );
        assert_eq!(summary.removed(1, 1), 300);
        assert_eq!((out.spans[1].start, out.spans[1].end), (1_000, 1_200));
        assert_eq!((out.spans[2].start, out.spans[2].end), (1_200, 2_700));
        // Not a book-keeping count: the fit never sees it.
        assert_eq!(count(&t, None), Counts::default());
    }

    #[test]
    fn carries_what_does_not_fit_and_calibrates() {
        let t = trace();
        let cal = Calibration {
            costs_ns: [("untraced_hook".to_string(), 1000.0)]
                .into_iter()
                .collect(),
            ..Calibration::default()
        };
        let (out, summary) = correct(&t, &cal);
        assert!(out.spans.iter().all(|s| s.end >= s.start));
        // 10 x 1000 placed before 300, where the gap is 200: 200 there, 700 in the gap up to
        // the step's end at 1000 (which becomes 0 long: all of it was book-keeping), the
        // remaining 9100 just after the last record. Nothing is lost.
        assert_eq!(summary.threads[0].removed_ns, 10_000);
        assert_eq!(summary.threads[0].deferred_ns, 10_000 - 200);
        assert_eq!(out.spans[0].end - out.spans[0].start, 100);
        assert_eq!(out.spans[1].end - out.spans[1].start, 0);
        let runs = [
            CalibrationRun {
                level: 0,
                time_ns: 1000.0,
                counts: Counts::default(),
            },
            CalibrationRun {
                level: 1,
                time_ns: 1100.0,
                counts: Counts {
                    annotation: 10,
                    ..Counts::default()
                },
            },
            CalibrationRun {
                level: 2,
                time_ns: 1300.0,
                counts: Counts {
                    annotation: 10,
                    untraced_hook: 100,
                    ..Counts::default()
                },
            },
        ];
        let cal = calibrate(&runs);
        assert!((cal.costs_ns["annotation"] - 10.0).abs() < 1e-6);
        assert!((cal.costs_ns["untraced_hook"] - 2.0).abs() < 1e-6);
    }

    #[test]
    fn joint_calibration_over_repeats() {
        // base 1000, annotation 10, untraced 2, hook span 50; +-3 ns noise per run; level 4
        // has no wrappers (its equation only adds repeats of level 3's costs).
        let run = |level, time_ns, a, u, h| CalibrationRun {
            level,
            time_ns,
            counts: Counts {
                annotation: a,
                untraced_hook: u,
                hook_span: h,
                wrapper_span: 0,
                opencl_api_span: 0,
                os_event: 0,
                cpu_sample: 0,
                python_stack: 0,
            },
        };
        let runs = [
            run(0, 1003.0, 0, 0, 0),
            run(0, 997.0, 0, 0, 0),
            run(1, 1100.0, 10, 0, 0),
            run(1, 1103.0, 10, 0, 0),
            run(2, 1300.0, 10, 100, 0),
            run(2, 1297.0, 10, 100, 0),
            run(3, 1100.0 + 160.0 + 500.0, 10, 80, 10),
            run(3, 1100.0 + 164.0 + 1000.0 + 3.0, 10, 82, 20),
            run(4, 1100.0 + 160.0 + 500.0 - 3.0, 10, 80, 10),
        ];
        let cal = calibrate(&runs);
        assert!(!cal.costs_ns.contains_key("wrapper_span"));
        assert!((cal.costs_ns["annotation"] - 10.0).abs() < 0.6, "{cal:?}");
        assert!((cal.costs_ns["untraced_hook"] - 2.0).abs() < 0.1, "{cal:?}");
        assert!((cal.costs_ns["hook_span"] - 50.0).abs() < 1.0, "{cal:?}");
        // A cost the data would make negative is held at 0 and the others refitted.
        let neg = [
            run(0, 1000.0, 0, 0, 0),
            run(1, 990.0, 10, 0, 0),
            run(2, 1190.0, 10, 100, 0),
        ];
        let cal = calibrate(&neg);
        assert_eq!(cal.costs_ns["annotation"], 0.0);
        assert!(cal.costs_ns["untraced_hook"] > 0.0);
        // 10 ms of noise on 20 annotations would read as 500 us each: held at the bound.
        let few = [
            run(0, 1e8, 0, 0, 0),
            run(1, 1.1e8, 20, 0, 0),
            run(2, 1.1e8 + 1e6, 20, 10_000, 0),
        ];
        let cal = calibrate(&few);
        assert_eq!(cal.costs_ns["annotation"], MAX_COST_NS);
        assert!(cal.costs_ns["untraced_hook"] > 0.0, "{cal:?}");
        // A native CPU sample may cost more than a recorder event (an interrupt and a stack
        // walk in a VM): 35 us each over 2,000 samples is fitted, not held at 20 us.
        let sampled = |level, time_ns, annotations, samples| CalibrationRun {
            level,
            time_ns,
            counts: Counts {
                annotation: annotations,
                cpu_sample: samples,
                ..run(level, time_ns, 0, 0, 0).counts
            },
        };
        let runs = [
            sampled(0, 1e8, 0, 0),
            sampled(1, 1e8 + 200.0, 20, 0),
            sampled(1, 1e8 + 200.0 + 35_000.0 * 2000.0, 20, 2000),
            sampled(1, 1e8 + 200.0 + 35_000.0 * 2100.0, 20, 2100),
        ];
        let cal = calibrate(&runs);
        assert!(
            (cal.costs_ns["cpu_sample"] - 35_000.0).abs() < 1.0,
            "{cal:?}"
        );
        assert!((cal.costs_ns["annotation"] - 10.0).abs() < 1.0, "{cal:?}");
        assert_eq!(max_cost_ns("cpu_sample"), MAX_CPU_SAMPLE_COST_NS);
        assert_eq!(max_cost_ns("annotation"), MAX_COST_NS);
    }

    #[test]
    fn difference_of_averages_inflates_traced_calls() {
        let stats = |pairs: &[(&str, u64, f64)]| -> BTreeMap<String, CallStats> {
            pairs
                .iter()
                .map(|&(n, count, total_ns)| (n.to_owned(), CallStats { count, total_ns }))
                .collect()
        };
        let with = [
            stats(&[
                ("clEnqueueNDRangeKernel", 20, 10_000.0),
                ("clSetKernelArg", 30, 2700.0),
                ("clBuildProgram", 1, 9e6),
                ("clFinish", 30, 9e6),
            ]),
            stats(&[
                ("clEnqueueNDRangeKernel", 20, 14_000.0),
                ("clCreateBuffer", 30, 1500.0),
            ]),
        ];
        let without = [stats(&[
            ("clEnqueueNDRangeKernel", 40, 8000.0),
            ("clSetKernelArg", 30, 3000.0),
            ("clBuildProgram", 1, 1e6),
            ("clFinish", 30, 1e6),
        ])];
        let doa = difference_of_averages(&[&with[0], &with[1]], &[&without[0]]);
        // Kernel launches 600 vs 200 ns per call; clSetKernelArg got "faster" (noise: 0); a
        // call seen on one side only, made once, or waiting for the device has no difference.
        assert_eq!(doa.get("clEnqueueNDRangeKernel"), Some(&400.0));
        assert_eq!(doa.get("clSetKernelArg"), Some(&0.0));
        assert!(!doa.contains_key("clCreateBuffer"));
        assert!(!doa.contains_key("clBuildProgram"));
        assert!(!doa.contains_key("clFinish"));
        assert!(api_call_waits_for_device("clEnqueueReadBufferRect"));
        assert_eq!(api_inflation_total(&with[0], &doa), 8000.0);

        // A traced clFinish [100, 600) with 40 ns of book-keeping and 300 ns of inflation.
        let mut b = TraceBuilder::new();
        b.rank(strato_trace::Rank {
            format: SourceFormat::Strato,
            ..rank(None, "x")
        });
        let cpu = b.thread(1, 1);
        b.span(cpu, Level::AcceleratorApi, "clFinish", 100, 600)
            .category(OPENCL_API_CATEGORY);
        let t = b.build();
        assert_eq!(count(&t, None).opencl_api_span, 1);
        let cal = Calibration {
            costs_ns: [("opencl_api_span".to_string(), 40.0)]
                .into_iter()
                .collect(),
            api_inflation_ns: [("clFinish".to_string(), 300.0)].into_iter().collect(),
        };
        let (out, summary) = correct(&t, &cal);
        assert_eq!(summary.removed(1, 1), 340);
        assert_eq!(out.spans[0].start, 90);
        assert_eq!(out.spans[0].end - out.spans[0].start, 500 - 20 - 300);
    }
}
