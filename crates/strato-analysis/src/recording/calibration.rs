//! Overhead calibration as a library (issue 14): what a recording says about its processes
//! ([`RecordingInfo`], typed from the rank metadata the importer writes), what one calibration
//! run measured ([`RunMeasure`]), the robust statistics over repeated runs ([`kept`],
//! [`robust`]), the joint fit with its held-out validation ([`fit_and_validate`]) and bootstrap
//! interval ([`bias_interval`]), the validation of one recording ([`validate_recording`]) and
//! the calibration file `calibration.json` ([`CalibrationFile`]).
//!
//! `strato record --calibrate` launches the runs and calls these; `strato validate --refit`
//! calls them again on the stored runs, so the figures can be recomputed. The book-keeping
//! counts, the NNLS fit of per-event costs and the correction itself are in
//! [`crate::recording::overhead`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use strato_trace::metadata::CollectorMetadata;
use strato_trace::{Level, Trace, TrackKind};

use crate::recording::overhead::{self, Calibration, CalibrationRun, CallStats, Counts};

/// Names of the collection levels 0..=4, as the calibration file and the CLI show them.
pub const LEVEL_NAMES: [&str; 5] = [
    "uninstrumented",
    "annotations",
    "hook-silent",
    "interception",
    "full",
];

/// One recorded process, from a recording's metadata (its files of processes, not of
/// components).
pub use strato_trace::metadata::RecordedFile as ProcessInfo;

/// What a recording says about itself: its processes (strato ranks only; components left out)
/// and the calibration stored with it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecordingInfo {
    pub processes: Vec<ProcessInfo>,
    pub calibration: Option<Calibration>,
}

impl RecordingInfo {
    /// Reads the metadata of the trace's strato ranks. A rank whose metadata does not have the
    /// recording's shape contributes nothing.
    pub fn of(trace: &Trace) -> RecordingInfo {
        let processes = trace
            .recordings()
            .flat_map(|meta| meta.process_files().cloned())
            .collect();
        RecordingInfo {
            processes,
            calibration: overhead::recorded_calibration(trace),
        }
    }

    /// The root process: the one whose parent is not recorded (earliest start first).
    pub fn root(&self) -> Option<&ProcessInfo> {
        let procs = &self.processes;
        procs
            .iter()
            .filter(|p| !procs.iter().any(|q| q.pid == p.ppid))
            .min_by_key(|p| p.start_ns)
    }

    /// `(pid, start, end)` of the root process's recorded region (START to STOP, or to its last
    /// record when it did not stop).
    pub fn root_region(&self) -> Option<(i64, i64, i64)> {
        let r = self.root()?;
        let end = r.stop_ns.unwrap_or(r.last_ns.max(r.start_ns));
        Some((r.pid, r.start_ns, end))
    }
}

/// The CPU basis of one run: the CPU time of every process's recording thread summed, and the
/// book-keeping counts and OpenCL API calls of those threads.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuMeasure {
    pub time_ns: f64,
    pub counts: Counts,
    pub api: BTreeMap<String, CallStats>,
}

/// What one calibration (or held-out) run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct RunMeasure {
    /// The root process's recorded region (START to STOP), wall clock.
    pub time_ns: f64,
    /// Book-keeping counts of the root process, and its OpenCL API calls by name.
    pub counts: Counts,
    pub api: BTreeMap<String, CallStats>,
    /// None when a process has no CPU times (e.g. it was killed or stopped from another
    /// thread).
    pub cpu: Option<CpuMeasure>,
    /// The OpenCL layer traced device commands (API calls inflated: difference of averages).
    pub device_tracing: bool,
    /// CPU time of the OS level's collector thread (in the launcher, outside the program's
    /// threads), when the run recorded the OS level.
    pub os_collector_cpu_ns: Option<f64>,
    /// Time the program's threads were runnable behind the launcher's collectors (wall time,
    /// removed by the correction), when the run recorded the OS level.
    pub os_collector_wait_ns: Option<f64>,
    /// CPU time of the sample collector thread (in the launcher), when the run sampled.
    pub sample_collector_cpu_ns: Option<f64>,
}

/// The CPU basis of a recording; None when some process has no CPU times (or none recorded).
pub fn cpu_basis(trace: &Trace, info: &RecordingInfo) -> Option<CpuMeasure> {
    if info.processes.is_empty() {
        return None;
    }
    let threads: Vec<((i64, i64), f64)> = info
        .processes
        .iter()
        .map(|p| Some(((p.pid, p.cpu_tid()?), p.thread_cpu_ns()? as f64)))
        .collect::<Option<_>>()?;
    let ids: Vec<(i64, i64)> = threads.iter().map(|t| t.0).collect();
    let mut counts = overhead::count_threads(trace, &ids);
    // OS events and samples of each recording thread while its CPU time was measured (START
    // to STOP).
    counts.os_event = 0;
    counts.cpu_sample = 0;
    counts.python_stack = 0;
    for (p, &(pid, tid)) in info.processes.iter().zip(&ids) {
        let end = p.stop_ns.unwrap_or(p.last_ns.max(p.start_ns));
        let this = |a: i64, b: i64| (a, b) == (pid, tid);
        counts.os_event += overhead::count_os_events(trace, this, Some((p.start_ns, end)));
        let (native, python) = overhead::count_samples(trace, this, Some((p.start_ns, end)));
        counts.cpu_sample += native;
        counts.python_stack += python;
    }
    Some(CpuMeasure {
        time_ns: threads.iter().map(|t| t.1).sum(),
        counts,
        api: overhead::api_calls(trace, Some(&ids)),
    })
}

/// A number a collector stored with a recording, read by `cost` from the root process's
/// collector metadata (where the importer puts it) of the first `strato` rank that has it.
fn collector_figure(
    trace: &Trace,
    cost: impl Fn(&CollectorMetadata) -> Option<f64>,
) -> Option<f64> {
    trace.recordings().find_map(|meta| cost(&meta.metadata))
}

/// The OS level's collector cost stored with a recording (`strato.os.collector` metadata of
/// the root's OS file): its thread's CPU time in ns; None without OS data.
pub fn os_collector_cpu_ns(trace: &Trace) -> Option<f64> {
    collector_figure(trace, |m| m.os_collector()?.cpu_ns)
}

/// The time the program's threads were runnable behind the launcher's collectors, ns
/// (`program_wait_ns` of `strato.os.collector`); None without OS data.
pub fn os_collector_wait_ns(trace: &Trace) -> Option<f64> {
    collector_figure(trace, |m| m.os_collector()?.program_wait_ns)
}

/// The CPU sample collector's cost stored with a recording (`strato.samples.collector`): its
/// thread's CPU time in ns; None without samples.
pub fn sample_collector_cpu_ns(trace: &Trace) -> Option<f64> {
    collector_figure(trace, |m| m.sample_collector()?.cpu_ns)
}

/// Measures one run's recording; None when no process was recorded.
pub fn measure_run(trace: &Trace, device_tracing: bool) -> Option<RunMeasure> {
    let info = RecordingInfo::of(trace);
    let (pid, start, end) = info.root_region()?;
    let root_threads: Vec<(i64, i64)> = trace
        .tracks
        .iter()
        .filter_map(|t| match t.kind {
            TrackKind::Thread { pid: p, tid } if p == pid => Some((p, tid)),
            _ => None,
        })
        .collect();
    let mut counts = overhead::count(trace, Some(pid));
    counts.os_event = overhead::count_os_events(trace, |p, _| p == pid, Some((start, end)));
    (counts.cpu_sample, counts.python_stack) =
        overhead::count_samples(trace, |p, _| p == pid, Some((start, end)));
    Some(RunMeasure {
        time_ns: (end - start) as f64,
        counts,
        api: overhead::api_calls(trace, Some(&root_threads)),
        cpu: cpu_basis(trace, &info),
        device_tracing,
        os_collector_cpu_ns: os_collector_cpu_ns(trace),
        os_collector_wait_ns: os_collector_wait_ns(trace),
        sample_collector_cpu_ns: sample_collector_cpu_ns(trace),
    })
}

/// What calibration fits and validation compares: CPU time of the recording threads (not
/// inflated when other programs take the CPU away, so the fit sees the book-keeping cost and
/// little else), or, when a run lacks CPU times, the root process's wall-clock region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    ThreadCpu,
    Wall,
}

impl Basis {
    /// ThreadCpu when every run has CPU times, else Wall.
    pub fn of<'a>(runs: impl IntoIterator<Item = &'a RunMeasure>) -> Basis {
        if runs.into_iter().all(|r| r.cpu.is_some()) {
            Basis::ThreadCpu
        } else {
            Basis::Wall
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Basis::ThreadCpu => "thread_cpu",
            Basis::Wall => "wall",
        }
    }

    /// `(time, counts, API calls)` of a run on this basis.
    pub fn of_run(self, r: &RunMeasure) -> (f64, Counts, &BTreeMap<String, CallStats>) {
        match (self, &r.cpu) {
            (Basis::ThreadCpu, Some(c)) => (c.time_ns, c.counts, &c.api),
            _ => (r.time_ns, r.counts, &r.api),
        }
    }
}

/// Indices of the runs a robust statistic keeps: the fastest 60% by `key` (at least one).
/// Interference from other work only ever adds time, so the slowest runs are the least
/// representative.
pub fn kept<R>(runs: &[R], key: impl Fn(&R) -> f64) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..runs.len()).collect();
    idx.sort_by(|&a, &b| key(&runs[a]).total_cmp(&key(&runs[b])));
    idx.truncate((runs.len() * 3).div_ceil(5).max(1));
    idx
}

/// Mean of `f` over the runs [`kept`] by `key` (0 for no runs).
pub fn mean_over_kept<R>(runs: &[R], key: impl Fn(&R) -> f64, f: impl Fn(&R) -> f64) -> f64 {
    let k = kept(runs, key);
    k.iter().map(|&i| f(&runs[i])).sum::<f64>() / k.len().max(1) as f64
}

/// The representative value of `f` over a configuration's runs: its mean over the runs
/// [`kept`] by `f` itself.
pub fn robust<R>(runs: &[R], f: impl Fn(&R) -> f64) -> f64 {
    mean_over_kept(runs, &f, &f)
}

/// The calibrated cost of `counts`, plus the inflation of `api` calls when the run traced
/// device commands.
pub fn modelled_cost(
    cal: &Calibration,
    counts: &Counts,
    api: &BTreeMap<String, CallStats>,
    device_tracing: bool,
) -> f64 {
    let book_keeping: f64 = counts
        .pairs()
        .iter()
        .map(|(k, n)| cal.costs_ns.get(*k).copied().unwrap_or(0.0) * *n as f64)
        .sum();
    let inflation = if device_tracing {
        overhead::api_inflation_total(api, &cal.api_inflation_ns)
    } else {
        0.0
    };
    book_keeping + inflation
}

/// Resamples of the runs behind the bias interval.
pub const BOOTSTRAP_SAMPLES: usize = 400;

/// A calibration fitted on some runs and its validation on held-out runs, on one basis.
#[derive(Debug, Clone, PartialEq)]
pub struct Fit {
    pub calibration: Calibration,
    /// Robust level-0 time.
    pub uninstrumented_ns: f64,
    /// Robust held-out instrumented time, and the calibrated cost of those same runs.
    pub instrumented_ns: f64,
    pub removed_ns: f64,
}

impl Fit {
    /// `(instrumented - removed - uninstrumented) / uninstrumented`, in percent.
    pub fn bias_pct(&self) -> f64 {
        (self.instrumented_ns - self.removed_ns - self.uninstrumented_ns) / self.uninstrumented_ns
            * 100.0
    }
}

/// One calibration configuration's runs: Python level, OpenCL layer level (None: the
/// recorded run's), runs.
pub type ConfigRuns<'a> = (u64, Option<&'a str>, &'a [RunMeasure]);

/// Fits the costs on the [`kept`] runs of each configuration and validates them on
/// `held_out`: mean over its kept runs of the instrumented time and of their modelled cost
/// (with carry-forward, [`overhead::correct`] removes exactly the modelled cost).
///
/// With the OpenCL layer, the per-call inflation of API calls under device tracing comes first,
/// by difference of averages between the configuration with the layer at `api` and the one at
/// the same level with device tracing; runs with device tracing have that inflation taken off
/// their time before the joint fit of the book-keeping costs.
pub fn fit_and_validate(configs: &[ConfigRuns<'_>], held_out: &[RunMeasure], basis: Basis) -> Fit {
    let key = |r: &RunMeasure| basis.of_run(r).0;
    let kept_api = |runs: &'_ [RunMeasure]| -> Vec<BTreeMap<String, CallStats>> {
        kept(runs, key)
            .into_iter()
            .map(|i| basis.of_run(&runs[i]).2.clone())
            .collect()
    };
    let mut api_inflation = BTreeMap::new();
    if let Some(&(level, _, api_only)) = configs.iter().find(|c| c.1 == Some("api")) {
        if let Some(&(_, _, traced)) = configs.iter().find(|c| {
            c.0 == level && c.1.is_none() && c.2.first().is_some_and(|r| r.device_tracing)
        }) {
            let (with, without) = (kept_api(traced), kept_api(api_only));
            api_inflation = overhead::difference_of_averages(
                &with.iter().collect::<Vec<_>>(),
                &without.iter().collect::<Vec<_>>(),
            );
        }
    }
    let inflation = |r: &RunMeasure| {
        if r.device_tracing {
            overhead::api_inflation_total(basis.of_run(r).2, &api_inflation)
        } else {
            0.0
        }
    };
    let runs: Vec<CalibrationRun> = configs
        .iter()
        .flat_map(|(level, _, runs)| {
            kept(runs, key).into_iter().map(|i| {
                let (time_ns, counts, _) = basis.of_run(&runs[i]);
                CalibrationRun {
                    level: *level,
                    time_ns: time_ns - inflation(&runs[i]),
                    counts,
                }
            })
        })
        .collect();
    let mut calibration = overhead::calibrate(&runs);
    calibration.api_inflation_ns = api_inflation;
    let uninstrumented_ns = configs
        .iter()
        .find(|c| c.0 == 0)
        .map_or(0.0, |c| robust(c.2, key));
    Fit {
        uninstrumented_ns,
        instrumented_ns: mean_over_kept(held_out, key, key),
        removed_ns: mean_over_kept(held_out, key, |r| {
            let (_, counts, api) = basis.of_run(r);
            modelled_cost(&calibration, &counts, api, r.device_tracing)
        }),
        calibration,
    }
}

/// 95% bootstrap interval of the held-out bias: every configuration's runs and the held-out
/// runs resampled with replacement, costs refitted, bias recomputed, `samples` times (fixed
/// seed, so the same runs give the same interval). None with fewer than 3 runs each.
pub fn bias_interval(
    configs: &[ConfigRuns<'_>],
    held_out: &[RunMeasure],
    basis: Basis,
    samples: usize,
) -> Option<(f64, f64)> {
    if held_out.len() < 3 || configs.iter().any(|c| c.2.len() < 3) {
        return None;
    }
    let mut rng = fastrand::Rng::with_seed(0x5742_4154);
    let mut resample = |runs: &[RunMeasure]| -> Vec<RunMeasure> {
        (0..runs.len())
            .map(|_| runs[rng.usize(..runs.len())].clone())
            .collect()
    };
    let mut biases: Vec<f64> = (0..samples)
        .map(|_| {
            let drawn: Vec<(u64, Option<&str>, Vec<RunMeasure>)> = configs
                .iter()
                .map(|(l, o, r)| (*l, *o, resample(r)))
                .collect();
            let views: Vec<ConfigRuns<'_>> =
                drawn.iter().map(|(l, o, r)| (*l, *o, &r[..])).collect();
            fit_and_validate(&views, &resample(held_out), basis).bias_pct()
        })
        .filter(|b| b.is_finite())
        .collect();
    if biases.is_empty() {
        return None;
    }
    biases.sort_by(f64::total_cmp);
    let at = |q: f64| biases[((biases.len() - 1) as f64 * q).round() as usize];
    Some((at(0.025), at(0.975)))
}

/// The cost the correction removes from the root process's recorded region: `(pid, region
/// length, removed)`.
pub fn removed_in_root(trace: &Trace, cal: &Calibration) -> Option<(i64, f64, f64)> {
    let (pid, start, end) = RecordingInfo::of(trace).root_region()?;
    let at = overhead::removed_at(trace, cal, pid, pid, &[start - 1, end]);
    let removed = at[1] - at[0];
    Some((pid, (end - start) as f64, removed as f64))
}

/// Corrected time against an uninstrumented time, on one basis (`wall` nests the wall-clock
/// figures when the basis is CPU time). Written in `calibration.json` and by `strato record
/// --json` / `strato validate --json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Validation {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basis: Option<Basis>,
    pub uninstrumented_s: f64,
    pub instrumented_s: f64,
    pub corrected_s: f64,
    /// `(instrumented - uninstrumented) / uninstrumented`, percent.
    pub inflation_pct: f64,
    /// `(corrected - uninstrumented) / uninstrumented`, percent.
    pub bias_pct: f64,
    pub removed_s: f64,
    pub pid: i64,
    /// 95% bootstrap interval of `bias_pct` (held-out validation only; null with fewer than 3
    /// runs per configuration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bias_pct_interval95: Option<Option<[f64; 2]>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_samples: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall: Option<Box<Validation>>,
}

impl Validation {
    /// The figures of `instrumented` minus `removed` against `uninstrumented_ns` (all ns).
    pub fn figures(uninstrumented_ns: f64, instrumented: f64, removed: f64, pid: i64) -> Self {
        let corrected = instrumented - removed;
        let pct = |x: f64| (x - uninstrumented_ns) / uninstrumented_ns * 100.0;
        Validation {
            basis: None,
            uninstrumented_s: uninstrumented_ns / 1e9,
            instrumented_s: instrumented / 1e9,
            corrected_s: corrected / 1e9,
            inflation_pct: pct(instrumented),
            bias_pct: pct(corrected),
            removed_s: removed / 1e9,
            pid,
            bias_pct_interval95: None,
            bootstrap_samples: None,
            wall: None,
        }
    }
}

/// Validation of the correction on one recording: its root process's corrected time against
/// an uninstrumented time (wall clock), and, when `uninstrumented_cpu_ns` is given and the
/// recording has CPU times, the same on the recording threads' CPU time.
pub fn validate_recording(
    trace: &Trace,
    cal: &Calibration,
    uninstrumented_ns: f64,
    uninstrumented_cpu_ns: Option<f64>,
) -> Option<Validation> {
    let (pid, instrumented, removed) = removed_in_root(trace, cal)?;
    let wall = Validation::figures(uninstrumented_ns, instrumented, removed, pid);
    let cpu = uninstrumented_cpu_ns
        .zip(cpu_basis(trace, &RecordingInfo::of(trace)))
        .map(|(u, c)| {
            Validation::figures(
                u,
                c.time_ns,
                modelled_cost(cal, &c.counts, &c.api, true),
                pid,
            )
        });
    Some(match cpu {
        Some(mut v) => {
            v.basis = Some(Basis::ThreadCpu);
            v.wall = Some(Box::new(wall));
            v
        }
        None => Validation {
            basis: Some(Basis::Wall),
            ..wall
        },
    })
}

/// The held-out validation of a calibration: on the fit's basis, with the bootstrap interval,
/// and the wall-clock figures beside a CPU basis. `held_out_removed_ns[i]` is what the
/// correction removes from held-out run `i`'s root region ([`removed_in_root`]).
pub fn held_out_validation(
    fit: &Fit,
    basis: Basis,
    uninstrumented_wall_ns: f64,
    held_out: &[RunMeasure],
    held_out_removed_ns: &[f64],
    interval: Option<(f64, f64)>,
) -> Validation {
    let pairs: Vec<(f64, f64)> = held_out
        .iter()
        .zip(held_out_removed_ns)
        .map(|(r, &removed)| (r.time_ns, removed))
        .collect();
    let wall = Validation::figures(
        uninstrumented_wall_ns,
        mean_over_kept(&pairs, |p| p.0, |p| p.0),
        mean_over_kept(&pairs, |p| p.0, |p| p.1),
        0,
    );
    let mut v = match basis {
        Basis::ThreadCpu => Validation::figures(
            fit.uninstrumented_ns,
            fit.instrumented_ns,
            fit.removed_ns,
            0,
        ),
        Basis::Wall => wall.clone(),
    };
    v.basis = Some(basis);
    v.bias_pct_interval95 = Some(interval.map(|(a, b)| [a, b]));
    v.bootstrap_samples = Some(BOOTSTRAP_SAMPLES);
    if basis != Basis::Wall {
        v.wall = Some(Box::new(wall));
    }
    v
}

/// The OS level's part of a held-out validation (`strato record --os --calibrate`), so the
/// correction for it is reported, never hidden: what its events cost, how much of the
/// correction is theirs, and where the figure would be without it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OsValidation {
    /// Fitted cost of one OS book-keeping event (`os_event`), ns.
    pub os_event_cost_ns: f64,
    /// Mean over the kept held-out runs (the validation's statistic) of their OS events on
    /// the fit's basis, and of the cost removed for them, s.
    pub events: f64,
    pub removed_s: f64,
    /// The held-out bias with only the other levels' costs removed (percent), beside the
    /// validation's `bias_pct` with every cost removed.
    pub bias_without_os_pct: f64,
    /// Mean CPU time of the collector thread over the held-out runs, s (None when no run has
    /// it). It runs in the launcher, not in the program's threads, so no program time
    /// contains it and nothing is removed for it; on a machine without a spare core it slows
    /// the program by taking a core (threads `runnable` in the OS data).
    pub collector_cpu_s: Option<f64>,
    /// `collector_cpu_s` over the uninstrumented time of the fit's basis, percent.
    pub collector_cpu_pct: Option<f64>,
    /// Mean over the held-out runs of the time the program's threads were runnable on a CPU
    /// the launcher's collectors held, s (None when no run has it). Wall time, not CPU time:
    /// the correction removes it from the profile's timeline (where each wait ended, in the
    /// thread that waited) and from the wall-clock validation; no CPU-basis figure contains it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collector_wait_s: Option<f64>,
}

/// The OS part of `fit`'s held-out validation ([`OsValidation`]); None when no held-out run
/// recorded OS events.
pub fn os_validation(fit: &Fit, held_out: &[RunMeasure], basis: Basis) -> Option<OsValidation> {
    let key = |r: &RunMeasure| basis.of_run(r).0;
    if !held_out.iter().any(|r| basis.of_run(r).1.os_event > 0) {
        return None;
    }
    let cost = fit
        .calibration
        .costs_ns
        .get(overhead::OS_EVENT)
        .copied()
        .unwrap_or(0.0);
    let events = mean_over_kept(held_out, key, |r| basis.of_run(r).1.os_event as f64);
    let removed = events * cost;
    let collector: Vec<f64> = held_out
        .iter()
        .filter_map(|r| r.os_collector_cpu_ns)
        .collect();
    let collector_ns =
        (!collector.is_empty()).then(|| collector.iter().sum::<f64>() / collector.len() as f64);
    let waits: Vec<f64> = held_out
        .iter()
        .filter_map(|r| r.os_collector_wait_ns)
        .collect();
    let wait_ns = (!waits.is_empty()).then(|| waits.iter().sum::<f64>() / waits.len() as f64);
    Some(OsValidation {
        os_event_cost_ns: cost,
        events,
        removed_s: removed / 1e9,
        bias_without_os_pct: (fit.instrumented_ns
            - (fit.removed_ns - removed)
            - fit.uninstrumented_ns)
            / fit.uninstrumented_ns
            * 100.0,
        collector_cpu_s: collector_ns.map(|c| c / 1e9),
        collector_cpu_pct: collector_ns.map(|c| c / fit.uninstrumented_ns * 100.0),
        collector_wait_s: wait_ns.map(|w| w / 1e9),
    })
}

/// The sampling part of a held-out validation (`strato record --sample --calibrate`), so the
/// correction for it is reported, never hidden: what a sample costs the sampled thread, how
/// much of the correction is theirs, and where the figure would be without it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampleValidation {
    /// Fitted cost of one native CPU sample in the sampled thread (`cpu_sample`), ns.
    pub cpu_sample_cost_ns: f64,
    /// Fitted cost of one Python-stack sample to the sampled thread (`python_stack`), ns.
    pub python_stack_cost_ns: f64,
    /// Mean over the kept held-out runs (the validation's statistic) of their native samples
    /// and Python-stack samples on the fit's basis, and of the cost removed for both, s.
    pub cpu_samples: f64,
    pub python_stacks: f64,
    pub removed_s: f64,
    /// The held-out bias with only the other costs removed (percent), beside the validation's
    /// `bias_pct` with every cost removed.
    pub bias_without_sampling_pct: f64,
    /// Mean CPU time of the launcher's sample collector over the held-out runs, s (None when
    /// no run has it): outside the program's threads, reported, not removed.
    pub collector_cpu_s: Option<f64>,
    /// `collector_cpu_s` over the uninstrumented time of the fit's basis, percent.
    pub collector_cpu_pct: Option<f64>,
}

/// The sampling part of `fit`'s held-out validation ([`SampleValidation`]); None when no
/// held-out run has samples.
pub fn sample_validation(
    fit: &Fit,
    held_out: &[RunMeasure],
    basis: Basis,
) -> Option<SampleValidation> {
    let key = |r: &RunMeasure| basis.of_run(r).0;
    let counts = |r: &RunMeasure| {
        let c = basis.of_run(r).1;
        (c.cpu_sample, c.python_stack)
    };
    if !held_out.iter().any(|r| counts(r) != (0, 0)) {
        return None;
    }
    let cost = |k: &str| fit.calibration.costs_ns.get(k).copied().unwrap_or(0.0);
    let (native_cost, python_cost) = (cost(overhead::CPU_SAMPLE), cost(overhead::PYTHON_STACK));
    let native = mean_over_kept(held_out, key, |r| counts(r).0 as f64);
    let python = mean_over_kept(held_out, key, |r| counts(r).1 as f64);
    let removed = native * native_cost + python * python_cost;
    let collector: Vec<f64> = held_out
        .iter()
        .filter_map(|r| r.sample_collector_cpu_ns)
        .collect();
    let collector_ns =
        (!collector.is_empty()).then(|| collector.iter().sum::<f64>() / collector.len() as f64);
    Some(SampleValidation {
        cpu_sample_cost_ns: native_cost,
        python_stack_cost_ns: python_cost,
        cpu_samples: native,
        python_stacks: python,
        removed_s: removed / 1e9,
        bias_without_sampling_pct: (fit.instrumented_ns
            - (fit.removed_ns - removed)
            - fit.uninstrumented_ns)
            / fit.uninstrumented_ns
            * 100.0,
        collector_cpu_s: collector_ns.map(|c| c / 1e9),
        collector_cpu_pct: collector_ns.map(|c| c / fit.uninstrumented_ns * 100.0),
    })
}

/// One configuration's runs as stored in `calibration.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredRuns {
    pub level: u64,
    pub name: String,
    pub opencl: Option<String>,
    /// The runs recorded the OS level (`--os`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub os: bool,
    /// The OS collector thread's CPU time per run (runs with `os` only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub os_collector_cpu_s: Vec<Option<f64>>,
    /// The runs sampled the CPU (`--sample`): `"native+python"` (the launcher's native
    /// samples and the program's Python-stack sampler, as the profile does) or `"native"`
    /// (native samples only, to tell the two costs apart). Absent without sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample: Option<String>,
    /// The sample collector thread's CPU time per run (sampled runs only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sample_collector_cpu_s: Vec<Option<f64>>,
    pub times_s: Vec<f64>,
    pub robust_s: f64,
    pub cpu_times_s: Vec<Option<f64>>,
    pub counts: Vec<Counts>,
    /// On the fit's basis: the configuration's robust time, and the robust time with its
    /// calibrated cost removed ([`corrected_figures`]; the per-level table's corrected column).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basis_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corrected_s: Option<f64>,
}

impl StoredRuns {
    /// The stored summary of `runs` of one configuration.
    pub fn of(level: u64, name: &str, opencl: Option<&str>, runs: &[RunMeasure]) -> Self {
        let os = runs.iter().any(|r| r.os_collector_cpu_ns.is_some());
        StoredRuns {
            level,
            name: name.to_owned(),
            opencl: opencl.map(str::to_owned),
            os,
            os_collector_cpu_s: if os {
                runs.iter()
                    .map(|r| r.os_collector_cpu_ns.map(|c| c / 1e9))
                    .collect()
            } else {
                Vec::new()
            },
            sample: None,
            sample_collector_cpu_s: if runs.iter().any(|r| r.sample_collector_cpu_ns.is_some()) {
                runs.iter()
                    .map(|r| r.sample_collector_cpu_ns.map(|c| c / 1e9))
                    .collect()
            } else {
                Vec::new()
            },
            times_s: runs.iter().map(|r| r.time_ns / 1e9).collect(),
            robust_s: robust(runs, |r| r.time_ns) / 1e9,
            cpu_times_s: runs
                .iter()
                .map(|r| r.cpu.as_ref().map(|c| c.time_ns / 1e9))
                .collect(),
            counts: runs.iter().map(|r| r.counts).collect(),
            basis_s: None,
            corrected_s: None,
        }
    }
}

/// A configuration's robust time on `basis` and its robust corrected time: the mean over the
/// runs [`kept`] by time of the time, and of the time minus the run's calibrated cost
/// ([`modelled_cost`]), in ns.
pub fn corrected_figures(runs: &[RunMeasure], cal: &Calibration, basis: Basis) -> (f64, f64) {
    let key = |r: &RunMeasure| basis.of_run(r).0;
    let corrected = mean_over_kept(runs, key, |r| {
        let (time, counts, api) = basis.of_run(r);
        time - modelled_cost(cal, &counts, api, r.device_tracing)
    });
    (mean_over_kept(runs, key, key), corrected)
}

/// How the costs were fitted (the `method` field of the file).
pub const METHOD: &str = "joint non-negative least squares over levels 0-4, one equation per run (fastest 60% of each configuration's interleaved repeats), per-run counts; with --os, OS book-keeping events (a traced system call or switch out in the thread, counted while its CPU time was measured) are one more cost, fitted with an extra configuration (annotations + OS level); with --sample, native CPU samples and Python-stack samples of the thread are two more costs, fitted with two extra configurations (annotations + native and Python samples, annotations + native samples only); with --opencl, per-call inflation of OpenCL API calls under device tracing by difference of averages (layer api vs the recorded level, annotations on), taken off the traced runs' times before the fit; times are the CPU time of each process's recording thread when every run has it (basis thread_cpu), else the root process's wall-clock region";

/// `calibration.json`, written by `strato record --calibrate` beside the recording (the
/// importer copies it into the rank's metadata under `calibration`). Keys are written sorted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalibrationFile {
    pub costs_ns: BTreeMap<String, f64>,
    #[serde(default)]
    pub api_inflation_ns: BTreeMap<String, f64>,
    pub basis: Basis,
    pub method: String,
    /// The recorded command line.
    pub command: Vec<String>,
    /// Runs per configuration.
    pub repeat: usize,
    /// Robust wall-clock time of the uninstrumented runs.
    pub uninstrumented_s: f64,
    /// Robust recording-thread CPU time of the uninstrumented runs (basis thread_cpu only).
    pub uninstrumented_cpu_s: Option<f64>,
    /// One entry per configuration in the order they ran, the held-out runs last.
    pub runs: Vec<StoredRuns>,
    pub validation: Validation,
    /// The OS level's part of the validation (recordings with `--os`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<OsValidation>,
    /// The sampling part of the validation (recordings with `--sample`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample: Option<SampleValidation>,
}

/// Errors reading or writing `calibration.json`.
#[derive(Debug, thiserror::Error)]
pub enum CalibrationFileError {
    #[error("{path}: not a calibrated profile (run strato record --calibrate): {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Parse {
        path: String,
        source: serde_json::Error,
    },
    #[error("{path}: cannot write: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
}

impl CalibrationFile {
    /// The file's name in a profile directory.
    pub const NAME: &'static str = "calibration.json";

    /// The per-event costs it stores.
    pub fn calibration(&self) -> Calibration {
        Calibration {
            costs_ns: self.costs_ns.clone(),
            api_inflation_ns: self.api_inflation_ns.clone(),
        }
    }

    /// Reads `dir/calibration.json`.
    pub fn read(dir: &std::path::Path) -> Result<Self, CalibrationFileError> {
        let path = dir.join(Self::NAME);
        let text = std::fs::read_to_string(&path).map_err(|source| CalibrationFileError::Read {
            path: path.display().to_string(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|source| CalibrationFileError::Parse {
            path: path.display().to_string(),
            source,
        })
    }

    /// Pretty JSON with sorted keys and a final newline.
    pub fn to_json(&self) -> String {
        // Through a Value: its map sorts keys, as the file always had them.
        let value = serde_json::to_value(self).expect("a calibration file serializes");
        serde_json::to_string_pretty(&value).expect("a JSON value serializes") + "\n"
    }

    /// Writes `dir/calibration.json`.
    pub fn write(&self, dir: &std::path::Path) -> Result<(), CalibrationFileError> {
        let path = dir.join(Self::NAME);
        std::fs::write(&path, self.to_json()).map_err(|source| CalibrationFileError::Write {
            path: path.display().to_string(),
            source,
        })
    }
}

/// Sum of span durations per level on thread tracks of process `pid` (leveled experiments).
pub fn level_times(trace: &Trace, pid: i64) -> BTreeMap<Level, i64> {
    let mut out = BTreeMap::new();
    for s in &trace.spans {
        let t = trace.track(s.track);
        if matches!(t.kind, TrackKind::Thread { pid: p, .. } if p == pid) {
            *out.entry(s.level).or_insert(0) += s.duration();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use strato_trace::metadata::SourceMetadata;

    /// A run whose wall and CPU time are `base + sum cost_k * count_k` exactly.
    fn run(base: f64, annotations: u64, hook_spans: u64, costs: (f64, f64)) -> RunMeasure {
        let counts = Counts {
            annotation: annotations,
            hook_span: hook_spans,
            ..Counts::default()
        };
        let t = base + costs.0 * annotations as f64 + costs.1 * hook_spans as f64;
        RunMeasure {
            time_ns: t + 1000.0,
            counts,
            api: BTreeMap::new(),
            cpu: Some(CpuMeasure {
                time_ns: t,
                counts,
                api: BTreeMap::new(),
            }),
            device_tracing: false,
            os_collector_cpu_ns: None,
            os_collector_wait_ns: None,
            sample_collector_cpu_ns: None,
        }
    }

    #[test]
    fn kept_is_the_fastest_sixty_percent_and_robust_their_mean() {
        let runs = [5.0, 1.0, 4.0, 2.0, 3.0];
        assert_eq!(kept(&runs, |x| *x), vec![1, 3, 4]);
        assert_eq!(robust(&runs, |x| *x), 2.0);
        assert_eq!(kept(&[7.0], |x| *x), vec![0]);
        assert_eq!(robust::<f64>(&[], |x| *x), 0.0);
        // 2 runs: ceil(1.2) = 2 kept.
        assert_eq!(kept(&[2.0, 1.0], |x| *x), vec![1, 0]);
    }

    #[test]
    fn exact_runs_fit_their_costs_and_validate_without_bias() {
        // 1 ms base, annotation 500 ns, hook span 900 ns: every run lies on the model.
        let costs = (500.0, 900.0);
        let l0: Vec<_> = (0..3).map(|_| run(1e6, 0, 0, costs)).collect();
        let l1: Vec<_> = (0..3).map(|i| run(1e6, 100 + i, 0, costs)).collect();
        let l3: Vec<_> = (0..3).map(|i| run(1e6, 100, 1000 + 7 * i, costs)).collect();
        let held: Vec<_> = (0..3).map(|i| run(1e6, 120, 2000 + i, costs)).collect();
        let configs: Vec<ConfigRuns<'_>> = vec![(0, None, &l0), (1, None, &l1), (3, None, &l3)];
        let basis = Basis::of(l0.iter().chain(&held));
        assert_eq!(basis, Basis::ThreadCpu);
        let fit = fit_and_validate(&configs, &held, basis);
        assert!((fit.calibration.costs_ns["annotation"] - 500.0).abs() < 1e-6);
        assert!((fit.calibration.costs_ns["hook_span"] - 900.0).abs() < 1e-6);
        assert!((fit.uninstrumented_ns - 1e6).abs() < 1e-6);
        assert!(fit.bias_pct().abs() < 1e-9, "{}", fit.bias_pct());
        // Resampling exact runs changes nothing: the interval is the point.
        let (lo, hi) = bias_interval(&configs, &held, basis, 50).unwrap();
        assert!(lo.abs() < 1e-6 && hi.abs() < 1e-6, "{lo} {hi}");
        assert_eq!(bias_interval(&configs, &held[..2], basis, 50), None);
        // The wall basis sees the same costs (the 1 us offset is in the base).
        let fit_wall = fit_and_validate(&configs, &held, Basis::Wall);
        assert!((fit_wall.uninstrumented_ns - (1e6 + 1000.0)).abs() < 1e-6);
        assert!((fit_wall.calibration.costs_ns["hook_span"] - 900.0).abs() < 1e-6);
    }

    /// A run at the OS level: `base + 500 x annotations + 1500 x os_events` ns exactly.
    fn os_run(base: f64, annotations: u64, os_events: u64, collector_ns: f64) -> RunMeasure {
        let counts = Counts {
            annotation: annotations,
            os_event: os_events,
            ..Counts::default()
        };
        let t = base + 500.0 * annotations as f64 + 1500.0 * os_events as f64;
        RunMeasure {
            os_collector_cpu_ns: (os_events > 0).then_some(collector_ns),
            os_collector_wait_ns: (os_events > 0).then_some(collector_ns / 2.0),
            ..exact_run(t, counts)
        }
    }

    /// A run that took exactly `time_ns` on both bases with `counts`, no API calls and no
    /// collectors.
    fn exact_run(time_ns: f64, counts: Counts) -> RunMeasure {
        RunMeasure {
            time_ns,
            counts,
            api: BTreeMap::new(),
            cpu: Some(CpuMeasure {
                time_ns,
                counts,
                api: BTreeMap::new(),
            }),
            device_tracing: false,
            os_collector_cpu_ns: None,
            os_collector_wait_ns: None,
            sample_collector_cpu_ns: None,
        }
    }

    #[test]
    fn os_events_get_their_cost_and_the_os_part_is_reported() {
        // 10 ms base; annotations 500 ns; OS events 1.5 us. Only runs with the OS level count
        // OS events (without it nothing is traced, so nothing costs).
        let l0: Vec<_> = (0..3).map(|_| os_run(1e7, 0, 0, 0.0)).collect();
        let l1: Vec<_> = (0..3).map(|i| os_run(1e7, 200 + i, 0, 0.0)).collect();
        let l1_os: Vec<_> = (0..3)
            .map(|i| os_run(1e7, 200, 4000 + 10 * i, 2e6))
            .collect();
        // Held out: 200 annotations, 4000 OS events: 0.1 ms + 6 ms over the 10 ms base.
        let held: Vec<_> = (0..3).map(|_| os_run(1e7, 200, 4000, 3e6)).collect();
        let configs: Vec<ConfigRuns<'_>> = vec![(0, None, &l0), (1, None, &l1), (1, None, &l1_os)];
        let fit = fit_and_validate(&configs, &held, Basis::ThreadCpu);
        assert!((fit.calibration.costs_ns["os_event"] - 1500.0).abs() < 1e-6);
        assert!((fit.calibration.costs_ns["annotation"] - 500.0).abs() < 1e-6);
        assert!(fit.bias_pct().abs() < 1e-9, "{}", fit.bias_pct());
        let os = os_validation(&fit, &held, Basis::ThreadCpu).unwrap();
        assert_eq!(os.events, 4000.0);
        assert!((os.removed_s - 6e-3).abs() < 1e-9);
        // Without the OS part the 6 ms stay: +60 % of the 10 ms base.
        assert!((os.bias_without_os_pct - 60.0).abs() < 1e-6, "{os:?}");
        assert_eq!(os.collector_cpu_s, Some(3e-3));
        assert_eq!(os.collector_wait_s, Some(1.5e-3));
        assert!((os.collector_cpu_pct.unwrap() - 30.0).abs() < 1e-9);
        // No OS events held out: no OS part.
        assert_eq!(os_validation(&fit, &l1, Basis::ThreadCpu), None);
        // Stored runs say which ran with the OS level.
        let stored = StoredRuns::of(1, "annotations + os", None, &l1_os);
        assert!(stored.os);
        assert_eq!(stored.os_collector_cpu_s, vec![Some(2e-3); 3]);
        assert!(!StoredRuns::of(1, "annotations", None, &l1).os);
        // Corrected per configuration: every configuration comes back to the 10 ms base.
        for runs in [&l0, &l1, &l1_os, &held] {
            let (_, corrected) = corrected_figures(runs, &fit.calibration, Basis::ThreadCpu);
            assert!((corrected - 1e7).abs() < 1e-6, "{corrected}");
        }
        let (time, _) = corrected_figures(&held, &fit.calibration, Basis::ThreadCpu);
        assert!((time - 1.61e7).abs() < 1e-6, "{time}");
    }

    /// A sampled run: `base + 500 x annotations + 12000 x native + 3000 x python` ns exactly.
    fn sample_run(base: f64, annotations: u64, native: u64, python: u64) -> RunMeasure {
        let counts = Counts {
            annotation: annotations,
            cpu_sample: native,
            python_stack: python,
            ..Counts::default()
        };
        let t = base + 500.0 * annotations as f64 + 12e3 * native as f64 + 3e3 * python as f64;
        RunMeasure {
            sample_collector_cpu_ns: (native > 0).then_some(4e6),
            ..exact_run(t, counts)
        }
    }

    /// How often the bias interval contains 0 over `trials` calibrations of `n` runs a
    /// configuration, under the noise this project's 2-core VMs show (measured: the same fixed
    /// work takes 1.0-1.1x its time, or, about a third of the time, 1.3-1.8x while its vCPU's
    /// host core is shared, for a second or more), and the interval's mean half-width (percent).
    /// The held-out runs carry `unmodelled` ns that no cost explains (0: an exact model).
    fn noisy_coverage(n: usize, trials: usize, unmodelled: f64) -> (f64, f64) {
        let mut rng = fastrand::Rng::with_seed(19);
        let mut noisy = |base: f64, annotations: u64, os_events: u64| {
            let r = os_run(base, annotations, os_events, 1e6);
            let slow = if rng.f64() < 1.0 / 3.0 {
                1.3 + 0.5 * rng.f64()
            } else {
                1.0 + 0.1 * rng.f64()
            };
            let time_ns = r.time_ns * slow;
            let counts = r.counts;
            RunMeasure {
                time_ns,
                cpu: Some(CpuMeasure {
                    time_ns,
                    counts,
                    api: BTreeMap::new(),
                }),
                ..r
            }
        };
        let (mut covered, mut width) = (0, 0.0);
        for _ in 0..trials {
            // 0.1 s of work; 40 annotations; 20,000 OS events (+30 %), as os_syscalls.py.
            let l0: Vec<_> = (0..n).map(|_| noisy(1e8, 0, 0)).collect();
            let l1: Vec<_> = (0..n).map(|_| noisy(1e8, 40, 0)).collect();
            let l1_os: Vec<_> = (0..n).map(|_| noisy(1e8, 40, 20_000)).collect();
            let held: Vec<_> = (0..n)
                .map(|_| noisy(1e8 + unmodelled, 40, 20_000))
                .collect();
            let configs: Vec<ConfigRuns<'_>> =
                vec![(0, None, &l0), (1, None, &l1), (1, None, &l1_os)];
            let (lo, hi) = bias_interval(&configs, &held, Basis::ThreadCpu, BOOTSTRAP_SAMPLES)
                .expect("3 runs or more each");
            covered += usize::from(lo <= 0.0 && 0.0 <= hi);
            width += (hi - lo) / 2.0;
        }
        (covered as f64 / trials as f64, width / trials as f64)
    }

    /// The interval is what python/tests/test_os_calibration.py and test_sample_calibration.py
    /// judge a real calibration by on a noisy machine, so it must hold its 95 % where the
    /// model is exact (measured at 200 trials: 95 % at 5 runs, half-width 33 %; 96.5 % at 8,
    /// 25 %), and must exclude 0 when the held-out runs are off by far more than the noise.
    #[test]
    fn the_bias_interval_covers_an_exact_model_under_vm_noise() {
        let (coverage, half_width) = noisy_coverage(5, 100, 0.0);
        assert!(coverage >= 0.9, "{coverage} {half_width}");
        assert!((20.0..45.0).contains(&half_width), "{half_width}");
        let (coverage8, half_width8) = noisy_coverage(8, 100, 0.0);
        assert!(coverage8 >= 0.9, "{coverage8}");
        assert!(half_width8 < half_width, "{half_width8} {half_width}");
        // Held-out runs 80 % slower than any cost explains: the interval leaves 0 out.
        let (coverage, _) = noisy_coverage(8, 100, 8e7);
        assert!(coverage <= 0.1, "{coverage}");
    }

    #[test]
    fn native_and_python_samples_get_their_own_costs_and_are_reported() {
        // 100 ms base at 999 Hz: about 100 native samples; the Python sampler (at most 200 Hz)
        // 20. The native-only configuration tells the two costs apart.
        let l0: Vec<_> = (0..3).map(|_| sample_run(1e8, 0, 0, 0)).collect();
        let l1: Vec<_> = (0..3).map(|i| sample_run(1e8, 40 + i, 0, 0)).collect();
        let both: Vec<_> = (0..3)
            .map(|i| sample_run(1e8, 40, 100 + 3 * i, 20 + i))
            .collect();
        let native: Vec<_> = (0..3).map(|i| sample_run(1e8, 40, 98 + 2 * i, 0)).collect();
        let held: Vec<_> = (0..3).map(|_| sample_run(1e8, 40, 101, 21)).collect();
        let configs: Vec<ConfigRuns<'_>> = vec![
            (0, None, &l0),
            (1, None, &l1),
            (1, None, &both),
            (1, None, &native),
        ];
        let fit = fit_and_validate(&configs, &held, Basis::ThreadCpu);
        assert!((fit.calibration.costs_ns["cpu_sample"] - 12e3).abs() < 1e-3);
        assert!((fit.calibration.costs_ns["python_stack"] - 3e3).abs() < 1e-3);
        assert!(fit.bias_pct().abs() < 1e-6, "{}", fit.bias_pct());
        let v = sample_validation(&fit, &held, Basis::ThreadCpu).unwrap();
        assert_eq!((v.cpu_samples, v.python_stacks), (101.0, 21.0));
        // Removed = samples x cost, per kind.
        assert!((v.removed_s - (101.0 * 12e3 + 21.0 * 3e3) / 1e9).abs() < 1e-12);
        // Without it the 1.275 ms stay: +1.275 % of the 100 ms base.
        assert!((v.bias_without_sampling_pct - 1.275).abs() < 1e-6, "{v:?}");
        assert_eq!(v.collector_cpu_s, Some(4e-3));
        assert_eq!(sample_validation(&fit, &l1, Basis::ThreadCpu), None);
        let stored = StoredRuns::of(1, "annotations + samples", None, &both);
        assert_eq!(stored.sample_collector_cpu_s, vec![Some(4e-3); 3]);
        assert!(StoredRuns::of(1, "annotations", None, &l1)
            .sample_collector_cpu_s
            .is_empty());
    }

    #[test]
    fn a_run_without_cpu_times_makes_the_basis_wall() {
        let mut r = run(1e6, 0, 0, (0.0, 0.0));
        assert_eq!(Basis::of([&r]), Basis::ThreadCpu);
        r.cpu = None;
        assert_eq!(Basis::of([&r]), Basis::Wall);
        assert_eq!(Basis::Wall.of_run(&r).0, r.time_ns);
    }

    #[test]
    fn modelled_cost_adds_inflation_only_under_device_tracing() {
        let cal = Calibration {
            costs_ns: [("annotation".to_owned(), 10.0)].into(),
            api_inflation_ns: [("clFinish".to_owned(), 100.0)].into(),
        };
        let counts = Counts {
            annotation: 3,
            ..Counts::default()
        };
        let api: BTreeMap<String, CallStats> = [(
            "clFinish".to_owned(),
            CallStats {
                count: 2,
                ..CallStats::default()
            },
        )]
        .into();
        assert_eq!(modelled_cost(&cal, &counts, &api, false), 30.0);
        assert_eq!(modelled_cost(&cal, &counts, &api, true), 230.0);
    }

    #[test]
    fn validation_figures_and_file_round_trip() {
        let v = Validation::figures(100.0, 150.0, 40.0, 7);
        assert!((v.inflation_pct - 50.0).abs() < 1e-12);
        assert!((v.bias_pct - 10.0).abs() < 1e-12);
        assert!((v.corrected_s - 110e-9).abs() < 1e-18);
        let file = CalibrationFile {
            costs_ns: [("annotation".to_owned(), 1.5)].into(),
            api_inflation_ns: BTreeMap::new(),
            basis: Basis::Wall,
            method: METHOD.into(),
            command: vec!["python".into()],
            repeat: 1,
            uninstrumented_s: 1e-7,
            uninstrumented_cpu_s: None,
            runs: vec![StoredRuns::of(
                0,
                "uninstrumented",
                None,
                &[run(100.0, 0, 0, (0.0, 0.0))],
            )],
            validation: Validation {
                basis: Some(Basis::Wall),
                bias_pct_interval95: Some(None),
                bootstrap_samples: Some(BOOTSTRAP_SAMPLES),
                ..v
            },
            os: None,
            sample: None,
        };
        let text = file.to_json();
        // Sorted keys, explicit nulls where the format always had them.
        assert!(text.find("\"api_inflation_ns\"").unwrap() < text.find("\"basis\"").unwrap());
        assert!(text.contains("\"bias_pct_interval95\": null"));
        assert!(text.contains("\"uninstrumented_cpu_s\": null"));
        assert!(!text.contains("\"wall\":"));
        let back: CalibrationFile = serde_json::from_str(&text).unwrap();
        assert_eq!(back.costs_ns, file.costs_ns);
        assert_eq!(back.runs, file.runs);
        assert_eq!(back.validation.bias_pct, file.validation.bias_pct);
    }

    #[test]
    fn recording_info_reads_processes_and_finds_the_root() {
        let mut trace = Trace::default();
        trace.add_rank(strato_trace::Rank {
            rank: None,
            world_size: None,
            source: "r".into(),
            host: None,
            notes: Default::default(),
            format: "strato".into(),
            metadata: SourceMetadata::from_json(
                r#"{"processes":[
                {"pid":2,"ppid":1,"start_ns":50,"last_ns":90},
                {"pid":1,"ppid":0,"start_ns":10,"stop_ns":100,"last_ns":99,
                 "cpu":{"start_tid":1,"thread_cpu_ns":40}},
                {"pid":3,"ppid":0,"start_ns":0,"last_ns":5,"component":"opencl"}]}"#,
                "strato".into(),
            )
            .unwrap(),
        });
        let info = RecordingInfo::of(&trace);
        assert_eq!(info.processes.len(), 2);
        assert_eq!(info.root().map(|p| p.pid), Some(1));
        assert_eq!(info.root_region(), Some((1, 10, 100)));
        assert_eq!(info.processes[1].thread_cpu_ns(), Some(40));
        // The child has no CPU times: no CPU basis.
        assert_eq!(cpu_basis(&trace, &info), None);
        // No OS level recorded: no collector cost; with it, the root OS file's metadata.
        assert_eq!(os_collector_cpu_ns(&trace), None);
        trace.ranks[0].metadata = SourceMetadata::from_json(
            r#"{"processes":[],"metadata":{"strato.os.collector":{"cpu_ns":1250,"records":9}}}"#,
            "strato".into(),
        )
        .unwrap();
        assert_eq!(os_collector_cpu_ns(&trace), Some(1250.0));
    }
}
