//! `strato record` and `strato validate` (issue 4): run an unmodified Python program with
//! stratoscope's recorder on, optionally calibrate book-keeping costs (delta calibration over
//! collection levels 0..4, plus the OpenCL layer's configurations and difference of averages
//! with `--opencl`) and validate the overhead correction against uninstrumented runs (with a
//! bootstrap interval), run XSP-style leveled experiments, and print the (corrected) breakdown.
//!
//! The launcher sets `STRATOSCOPE_OUT` (the profile directory), `STRATOSCOPE_LEVEL`, optional
//! `STRATOSCOPE_TORCH` / `STRATOSCOPE_WRAP` / `STRATOSCOPE_OPENCL`, and puts the package's
//! `_bootstrap` directory (a `sitecustomize`) first on `PYTHONPATH`, so every Python process of
//! the run starts recording at interpreter start. A run's time for calibration is the CPU time
//! of its processes' recording threads (the recorder's `strato.cpu` records), or, when a
//! process lacks it, its root process's recorded region (START to STOP records), which is
//! also the wall-clock figure reported beside it.
//!
//! Exit status (docs/recording.md): once the program has run, `strato record` exits with the
//! program's status ([`ProgramStatus::shell_code`]: its exit code, or 128 + N when signal N
//! ended it), after writing what was recorded; with several runs (`--calibrate`, `--levels`)
//! the first run that fails stops the command with that run's status ([`ProgramFailed`]).
//! Exit code 2 stays strato's own failure before the program starts. While the program runs,
//! strato ignores SIGINT and SIGQUIT (as a shell waiting for a foreground job does): Ctrl-C
//! reaches the program, which flushes and ends, and strato then reports on it.

use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use strato_analysis::breakdown::{self, BreakdownOptions, BreakdownReport};

use strato_analysis::overhead::{self, Calibration, CalibrationRun, CallStats, Counts};
use strato_trace::{Level, Trace, TrackKind};

use crate::app::import_options;

/// `strato record`.
#[derive(clap::Args, Debug)]
pub struct RecordArgs {
    /// The profile directory to write (its *.strato files are replaced; a profile imported
    /// there is replaced too, unless the directory holds other files: then refused).
    #[arg(short, long, default_value = "strato-profile")]
    pub output: PathBuf,
    /// Collection level of the recorded run: 0 timing only, 1 annotations, 3 + interception
    /// (profile hook), 4 full (+ wrappers, framework profilers).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(0..=4))]
    pub level: u64,
    /// Also run the calibration configurations (levels 0-4), store per-event costs in
    /// OUTPUT/calibration.json and report the corrected time against the uninstrumented run.
    #[arg(long)]
    pub calibrate: bool,
    /// Runs per calibration configuration, interleaved across configurations (each
    /// configuration's time is the mean of its fastest 60% of runs). Fewer runs calibrate
    /// faster but less reliably: the bias's 95% interval in the validation says how much.
    #[arg(long, default_value_t = 9)]
    pub repeat: usize,
    /// Leveled experimentation (XSP): run once per collection level, take each stratum's
    /// timings from the lowest-overhead run that has it, report per-level overhead.
    #[arg(long)]
    pub levels: bool,
    /// Run torch.profiler alongside and merge its events (needs torch).
    #[arg(long)]
    pub torch: bool,
    /// Modules to wrap at start (level 4), e.g. `numpy` or `numpy:Library,mysim:Simulator`.
    #[arg(long, value_name = "MODULES")]
    pub wrap: Option<String>,
    /// Do not apply overhead correction before the breakdown.
    #[arg(long)]
    pub no_correct: bool,
    /// Also load stratoscope's OpenCL layer into the program (`OPENCL_LAYERS`): API calls,
    /// device commands aligned to the host clock, device memory (docs/opencl.md). The layer's
    /// level follows `STRATOSCOPE_OPENCL` (default full) and is off at level 0.
    #[arg(long)]
    pub opencl: bool,
    /// Print JSON (the shape of `strato breakdown --json`, plus `validation` / `levels`).
    #[arg(long)]
    pub json: bool,
    /// Rows per process in the text breakdown.
    #[arg(long, default_value_t = 12)]
    pub top: usize,
    /// The command to run (after `--`), e.g. `python train.py --steps 100`.
    #[arg(required = true, last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// `strato validate`.
#[derive(clap::Args, Debug)]
pub struct ValidateArgs {
    /// A profile directory written by `strato record --calibrate`.
    pub profile: PathBuf,
    #[arg(long)]
    pub json: bool,
}

const LEVEL_NAMES: [&str; 5] = [
    "uninstrumented",
    "annotations",
    "hook-silent",
    "interception",
    "full",
];

/// How one run of the recorded program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProgramStatus {
    /// The exit code, when the program exited.
    pub code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
}

impl ProgramStatus {
    fn of(status: ExitStatus) -> ProgramStatus {
        ProgramStatus {
            code: status.code(),
            signal: status.signal(),
        }
    }

    /// True when the program exited with code 0.
    pub fn success(self) -> bool {
        self.code == Some(0)
    }

    /// The status a shell reports for it: the exit code (0-255), or 128 + N for signal N.
    pub fn shell_code(self) -> u8 {
        match (self.code, self.signal) {
            (Some(code), _) => (code & 0xff) as u8,
            (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(255),
            (None, None) => 1,
        }
    }

    /// "exit code 3", "signal 15 (SIGTERM)".
    pub fn describe(self) -> String {
        match (self.code, self.signal) {
            (Some(code), _) => format!("exit code {code}"),
            (None, Some(signal)) => {
                let name = match signal {
                    1 => " (SIGHUP)",
                    2 => " (SIGINT)",
                    3 => " (SIGQUIT)",
                    6 => " (SIGABRT)",
                    9 => " (SIGKILL)",
                    11 => " (SIGSEGV)",
                    15 => " (SIGTERM)",
                    _ => "",
                };
                format!("signal {signal}{name}")
            }
            (None, None) => "an unknown status".into(),
        }
    }
}

/// A run of the recorded program failed where the command needs every run to succeed (the
/// calibration and leveled runs): `strato` stops and exits with [`ProgramFailed::code`], the
/// run's [`ProgramStatus::shell_code`].
#[derive(Debug)]
pub struct ProgramFailed {
    pub code: u8,
    pub message: String,
}

impl std::fmt::Display for ProgramFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ProgramFailed {}

fn python_for(command: &[String]) -> String {
    if let Ok(p) = std::env::var("STRATOSCOPE_PYTHON") {
        return p;
    }
    match command.first() {
        Some(c)
            if Path::new(c)
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("python")) =>
        {
            c.clone()
        }
        _ => "python3".into(),
    }
}

fn bootstrap_dir(command: &[String]) -> Result<PathBuf> {
    if let Ok(dir) = std::env::var("STRATOSCOPE_BOOTSTRAP") {
        return Ok(PathBuf::from(dir));
    }
    let python = python_for(command);
    let out = Command::new(&python)
        .args([
            "-c",
            "import os, stratoscope; print(os.path.join(os.path.dirname(stratoscope.__file__), '_bootstrap'))",
        ])
        .env_remove("STRATOSCOPE_OUT")
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("record: cannot run {python}"))?;
    if !out.status.success() {
        bail!("record: the stratoscope Python package is not importable by {python} (pip install . at the repository root)");
    }
    Ok(PathBuf::from(
        String::from_utf8_lossy(&out.stdout).trim().to_owned(),
    ))
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Output {
    Inherit,
    ToStderr,
    Null,
}

struct Launcher<'a> {
    args: &'a RecordArgs,
    bootstrap: PathBuf,
}

impl Launcher<'_> {
    /// Whether the OpenCL layer traces device commands in a run at `level` with layer level
    /// `opencl` (the recorder's level 0 turns the layer off).
    fn device_tracing(&self, level: u64, opencl: Option<&str>) -> bool {
        let layer = opencl
            .map(str::to_owned)
            .or_else(|| std::env::var("STRATOSCOPE_OPENCL").ok())
            .unwrap_or_else(|| "full".into());
        self.args.opencl
            && level > 0
            && matches!(
                layer.trim().to_ascii_lowercase().as_str(),
                "device" | "2" | "full" | "3" | ""
            )
    }

    /// Runs the command once at `level` into `dir` (its *.strato files removed first); with
    /// `--opencl`, `opencl` sets the layer's level (None: `STRATOSCOPE_OPENCL` or full).
    fn run(
        &self,
        dir: &Path,
        level: u64,
        opencl: Option<&str>,
        output: Output,
    ) -> Result<ProgramStatus> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("{}: cannot create", dir.display()))?;
        for entry in std::fs::read_dir(dir)?.flatten() {
            let p = entry.path();
            if p.extension().is_some_and(|e| e == "strato") {
                std::fs::remove_file(&p)?;
            }
        }
        let dir = std::fs::canonicalize(dir)?;
        let mut pythonpath = self.bootstrap.as_os_str().to_owned();
        if let Some(old) = std::env::var_os("PYTHONPATH").filter(|p| !p.is_empty()) {
            pythonpath.push(":");
            pythonpath.push(old);
        }
        let mut cmd = Command::new(&self.args.command[0]);
        cmd.args(&self.args.command[1..])
            .env("STRATOSCOPE_OUT", &dir)
            .env("STRATOSCOPE_LEVEL", level.to_string())
            .env("PYTHONPATH", pythonpath);
        if self.args.torch && level >= 4 {
            cmd.env("STRATOSCOPE_TORCH", "1");
        }
        if let Some(w) = &self.args.wrap {
            cmd.env("STRATOSCOPE_WRAP", w);
        }
        if self.args.opencl {
            cmd.env(
                "OPENCL_LAYERS",
                crate::commands::overhead::opencl_layer_path()?,
            );
            if let Some(l) = opencl {
                cmd.env("STRATOSCOPE_OPENCL", l);
            }
        }
        match output {
            Output::Inherit => {}
            Output::Null => {
                cmd.stdout(Stdio::null());
            }
            Output::ToStderr => {
                use std::os::fd::AsFd;
                let fd = std::io::stderr().as_fd().try_clone_to_owned()?;
                cmd.stdout(Stdio::from(fd));
            }
        }
        let shell_signals = crate::shell_signals::ShellSignals::ignore();
        shell_signals.reset_in_child(&mut cmd);
        let status = cmd
            .status()
            .with_context(|| format!("record: cannot run {:?}", self.args.command[0]))?;
        drop(shell_signals);
        Ok(ProgramStatus::of(status))
    }
}

/// Facts about the processes of a recording, from the rank metadata the importer writes.
#[derive(Debug, Clone)]
pub struct ProcInfo {
    pub pid: i64,
    pub ppid: i64,
    pub start_ns: i64,
    pub stop_ns: Option<i64>,
    pub last_ns: i64,
    /// The thread that started recording and its CPU time from START to STOP (the
    /// recorder's `strato.cpu` record; None when missing).
    pub cpu_tid: Option<i64>,
    pub thread_cpu_ns: Option<i64>,
}

/// The recorded processes of a trace (strato ranks only).
pub fn processes(trace: &Trace) -> Vec<ProcInfo> {
    let mut out = Vec::new();
    for r in trace.ranks.iter().filter(|r| r.format == "strato") {
        let Some(meta) = r
            .metadata_json
            .as_deref()
            .and_then(|m| serde_json::from_str::<Value>(m).ok())
        else {
            continue;
        };
        for p in meta["processes"].as_array().into_iter().flatten() {
            if p["component"].as_str().is_some_and(|c| !c.is_empty()) {
                continue;
            }
            out.push(ProcInfo {
                pid: p["pid"].as_i64().unwrap_or(0),
                ppid: p["ppid"].as_i64().unwrap_or(0),
                start_ns: p["start_ns"].as_i64().unwrap_or(0),
                stop_ns: p["stop_ns"].as_i64(),
                last_ns: p["last_ns"].as_i64().unwrap_or(0),
                cpu_tid: p["cpu"]["start_tid"].as_i64(),
                thread_cpu_ns: p["cpu"]["thread_cpu_ns"].as_i64(),
            });
        }
    }
    out
}

/// The root process: the one whose parent is not recorded (earliest start first).
pub fn root(procs: &[ProcInfo]) -> Option<&ProcInfo> {
    procs
        .iter()
        .filter(|p| !procs.iter().any(|q| q.pid == p.ppid))
        .min_by_key(|p| p.start_ns)
}

fn root_time_ns(trace: &Trace) -> Option<(i64, i64, i64)> {
    let procs = processes(trace);
    let r = root(&procs)?;
    let end = r.stop_ns.unwrap_or(r.last_ns.max(r.start_ns));
    Some((r.pid, r.start_ns, end))
}

fn load_dir(dir: &Path) -> Result<Trace> {
    let options = import_options(None, false)?;
    Ok(strato_io::recording::import_dir(dir, &options)?)
}

#[derive(Clone)]
struct RunResult {
    dir: PathBuf,
    /// The root process's recorded region (START to STOP), wall clock.
    time_ns: f64,
    /// Book-keeping counts of the root process, and its OpenCL API calls by name.
    counts: Counts,
    api: BTreeMap<String, CallStats>,
    /// CPU basis: CPU time of each process's recording thread summed over the processes, and
    /// the book-keeping counts and API calls of those threads (None when a process has no CPU
    /// times, e.g. it was killed or stopped from another thread).
    cpu: Option<(f64, Counts, BTreeMap<String, CallStats>)>,
    /// The OpenCL layer traced device commands (API calls inflated: difference of averages).
    device_tracing: bool,
    /// Calibrated cost the correction removes from the root process's region (held-out
    /// validation runs only).
    removed_ns: f64,
}

struct Measured {
    level: u64,
    /// The OpenCL layer's level for this configuration (None: the recorded run's).
    opencl: Option<&'static str>,
    runs: Vec<RunResult>,
}

impl Measured {
    fn name(&self) -> String {
        let base = LEVEL_NAMES[self.level as usize];
        match self.opencl {
            Some(l) => format!("{base}, opencl {l}"),
            None => base.to_owned(),
        }
    }
}

/// What calibration fits and validation compares: CPU time of the recording threads (not
/// inflated when other programs take the CPU away, so the fit sees the book-keeping cost and
/// little else), or, when a run lacks CPU times, the root process's wall-clock region.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Basis {
    ThreadCpu,
    Wall,
}

impl Basis {
    fn of(runs: &[&RunResult]) -> Basis {
        if runs.iter().all(|r| r.cpu.is_some()) {
            Basis::ThreadCpu
        } else {
            Basis::Wall
        }
    }

    fn name(self) -> &'static str {
        match self {
            Basis::ThreadCpu => "thread_cpu",
            Basis::Wall => "wall",
        }
    }

    /// `(time, counts, API calls)` of a run on this basis.
    fn of_run(self, r: &RunResult) -> (f64, Counts, &BTreeMap<String, CallStats>) {
        match (self, &r.cpu) {
            (Basis::ThreadCpu, Some(c)) => (c.0, c.1, &c.2),
            _ => (r.time_ns, r.counts, &r.api),
        }
    }
}

/// Indices of the runs a robust statistic keeps: the fastest 60% by `key` (at least one).
/// Interference from other work only ever adds time, so the slowest runs are the least
/// representative.
fn kept(runs: &[RunResult], key: impl Fn(&RunResult) -> f64) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..runs.len()).collect();
    idx.sort_by(|&a, &b| key(&runs[a]).total_cmp(&key(&runs[b])));
    idx.truncate((runs.len() * 3).div_ceil(5).max(1));
    idx
}

/// The representative value of `f` over a configuration's runs: its mean over the runs
/// [`kept`] by `f` itself.
fn robust(runs: &[RunResult], f: impl Fn(&RunResult) -> f64) -> f64 {
    let k = kept(runs, &f);
    k.iter().map(|&i| f(&runs[i])).sum::<f64>() / k.len().max(1) as f64
}

/// The CPU basis of a recording: its processes' recording threads' CPU time summed, and those
/// threads' book-keeping counts and OpenCL API calls; None when some process has no CPU times.
fn cpu_basis(trace: &Trace) -> Option<(f64, Counts, BTreeMap<String, CallStats>)> {
    let procs = processes(trace);
    if procs.is_empty() {
        return None;
    }
    let threads: Vec<((i64, i64), f64)> = procs
        .iter()
        .map(|p| Some(((p.pid, p.cpu_tid?), p.thread_cpu_ns? as f64)))
        .collect::<Option<_>>()?;
    let ids: Vec<(i64, i64)> = threads.iter().map(|t| t.0).collect();
    Some((
        threads.iter().map(|t| t.1).sum(),
        overhead::count_threads(trace, &ids),
        overhead::api_calls(trace, Some(&ids)),
    ))
}

fn run_once(
    launcher: &Launcher<'_>,
    dir: &Path,
    level: u64,
    opencl: Option<&str>,
    output: Output,
) -> Result<RunResult> {
    let status = launcher.run(dir, level, opencl, output)?;
    if !status.success() {
        return Err(ProgramFailed {
            code: status.shell_code(),
            message: format!(
                "record: the program ended with {} in the run at level {level} ({}); stopping (what it recorded is in {})",
                status.describe(),
                LEVEL_NAMES[level as usize],
                dir.display()
            ),
        }
        .into());
    }
    let trace = load_dir(dir)?;
    let (pid, start, end) =
        root_time_ns(&trace).with_context(|| format!("{}: no recorded process", dir.display()))?;
    let cpu = cpu_basis(&trace);
    let root_threads: Vec<(i64, i64)> = trace
        .tracks
        .iter()
        .filter_map(|t| match t.kind {
            TrackKind::Thread { pid: p, tid } if p == pid => Some((p, tid)),
            _ => None,
        })
        .collect();
    Ok(RunResult {
        dir: dir.to_owned(),
        time_ns: (end - start) as f64,
        counts: overhead::count(&trace, Some(pid)),
        api: overhead::api_calls(&trace, Some(&root_threads)),
        cpu,
        device_tracing: launcher.device_tracing(level, opencl),
        removed_ns: 0.0,
    })
}

/// The cost the correction removes from the root process's recorded region, and that region.
fn removed_in_root(trace: &Trace, cal: &Calibration) -> Option<(i64, f64, f64)> {
    let (pid, start, end) = root_time_ns(trace)?;
    let at = overhead::removed_at(trace, cal, pid, pid, &[start - 1, end]);
    let removed = at[1] - at[0];
    Some((pid, (end - start) as f64, removed as f64))
}

/// The calibrated cost of `counts`, plus the inflation of `api` calls when the run traced
/// device commands.
fn modelled_cost(
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

fn validation_json(uninstrumented_ns: f64, instrumented: f64, removed: f64, pid: i64) -> Value {
    let corrected = instrumented - removed;
    let pct = |x: f64| (x - uninstrumented_ns) / uninstrumented_ns * 100.0;
    json!({
        "uninstrumented_s": uninstrumented_ns / 1e9,
        "instrumented_s": instrumented / 1e9,
        "corrected_s": corrected / 1e9,
        "inflation_pct": pct(instrumented),
        "bias_pct": pct(corrected),
        "removed_s": removed / 1e9,
        "pid": pid,
    })
}

/// Validation of the correction on one recording: its root process's corrected time against
/// an uninstrumented time (wall clock), and, when `uninstrumented_cpu_ns` is given and the
/// recording has CPU times, the same on the recording threads' CPU time.
fn validation(
    trace: &Trace,
    cal: &Calibration,
    uninstrumented_ns: f64,
    uninstrumented_cpu_ns: Option<f64>,
) -> Option<Value> {
    let (pid, instrumented, removed) = removed_in_root(trace, cal)?;
    let wall = validation_json(uninstrumented_ns, instrumented, removed, pid);
    let cpu = uninstrumented_cpu_ns
        .zip(cpu_basis(trace))
        .map(|(u, (time, counts, api))| {
            validation_json(u, time, modelled_cost(cal, &counts, &api, true), pid)
        });
    Some(match cpu {
        Some(mut v) => {
            v["basis"] = json!(Basis::ThreadCpu.name());
            v["wall"] = wall;
            v
        }
        None => {
            let mut v = wall;
            v["basis"] = json!(Basis::Wall.name());
            v
        }
    })
}

/// Resamples of the runs behind the bias interval.
const BOOTSTRAP_SAMPLES: usize = 400;

/// A calibration fitted on some runs and its validation on held-out runs, on one basis.
#[derive(Debug, Clone)]
struct Fit {
    calibration: Calibration,
    /// Robust level-0 time.
    uninstrumented_ns: f64,
    /// Robust held-out instrumented time, and the calibrated cost of those same runs.
    instrumented_ns: f64,
    removed_ns: f64,
}

impl Fit {
    fn bias_pct(&self) -> f64 {
        (self.instrumented_ns - self.removed_ns - self.uninstrumented_ns) / self.uninstrumented_ns
            * 100.0
    }
}

/// One calibration configuration's runs: Python level, OpenCL layer level (None: the
/// recorded run's), runs.
type ConfigRuns<'a> = (u64, Option<&'static str>, &'a [RunResult]);

/// Fits the costs on the [`kept`] runs of each configuration and validates them on
/// `held_out`: mean over its kept runs of the instrumented time and of their modelled cost
/// (with carry-forward, [`overhead::correct`] removes exactly the modelled cost).
///
/// With the OpenCL layer, the per-call inflation of API calls under device tracing comes first,
/// by difference of averages between the configuration with the layer at `api` and the one at
/// the same level with device tracing; runs with device tracing have that inflation taken off
/// their time before the joint fit of the book-keeping costs.
fn fit_and_validate(configs: &[ConfigRuns<'_>], held_out: &[RunResult], basis: Basis) -> Fit {
    let key = |r: &RunResult| basis.of_run(r).0;
    let kept_api = |runs: &'_ [RunResult]| -> Vec<BTreeMap<String, CallStats>> {
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
    let inflation = |r: &RunResult| {
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
    let k = kept(held_out, key);
    let mean = |f: &dyn Fn(&RunResult) -> f64| {
        k.iter().map(|&i| f(&held_out[i])).sum::<f64>() / k.len().max(1) as f64
    };
    let uninstrumented_ns = configs
        .iter()
        .find(|c| c.0 == 0)
        .map_or(0.0, |c| robust(c.2, key));
    Fit {
        uninstrumented_ns,
        instrumented_ns: mean(&key),
        removed_ns: mean(&|r| {
            let (_, counts, api) = basis.of_run(r);
            modelled_cost(&calibration, &counts, api, r.device_tracing)
        }),
        calibration,
    }
}

/// 95% bootstrap interval of the held-out bias: every configuration's runs and the held-out
/// runs resampled with replacement, costs refitted, bias recomputed, `samples` times (fixed
/// seed, so the same runs give the same interval). None with fewer than 3 runs each.
fn bias_interval(
    configs: &[ConfigRuns<'_>],
    held_out: &[RunResult],
    basis: Basis,
    samples: usize,
) -> Option<(f64, f64)> {
    if held_out.len() < 3 || configs.iter().any(|c| c.2.len() < 3) {
        return None;
    }
    let mut rng = fastrand::Rng::with_seed(0x5742_4154);
    let mut resample = |runs: &[RunResult]| -> Vec<RunResult> {
        (0..runs.len())
            .map(|_| runs[rng.usize(..runs.len())].clone())
            .collect()
    };
    let mut biases: Vec<f64> = (0..samples)
        .map(|_| {
            let drawn: Vec<(u64, Option<&'static str>, Vec<RunResult>)> = configs
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

/// Sum of span durations per level on thread tracks of process `pid` (leveled experiments).
fn level_times(trace: &Trace, pid: i64) -> std::collections::BTreeMap<Level, i64> {
    let mut out = std::collections::BTreeMap::new();
    for s in &trace.spans {
        let t = trace.track(s.track);
        if matches!(t.kind, TrackKind::Thread { pid: p, .. } if p == pid) {
            *out.entry(s.level).or_insert(0) += s.duration();
        }
    }
    out
}

fn write_calibration(dir: &Path, value: &Value) -> Result<()> {
    let path = dir.join("calibration.json");
    std::fs::write(&path, serde_json::to_string_pretty(value)? + "\n")
        .with_context(|| format!("{}: cannot write", path.display()))
}

/// Runs `strato record`; returns the exit status for `strato`: 0, or the recorded program's
/// [`ProgramStatus::shell_code`] when it failed (after writing what was recorded). A failed
/// calibration or leveled run is an error carrying its status ([`ProgramFailed`]).
pub fn run_record(args: RecordArgs, out: &mut impl Write) -> Result<u8> {
    let launcher = Launcher {
        bootstrap: bootstrap_dir(&args.command)?,
        args: &args,
    };
    let dir = args.output.clone();
    crate::output::prepare_record_dir(&dir)?;
    let work = dir.join(".runs");
    let mut measured: Vec<Measured> = Vec::new();
    let mut wanted: Vec<u64> = Vec::new();
    if args.calibrate {
        wanted.extend([0, 1, 2, 3, 4]);
    }
    if args.levels {
        wanted.extend([0, 1, 3, 4]);
    }
    wanted.sort_unstable();
    wanted.dedup();
    measured.extend(wanted.iter().map(|&level| Measured {
        level,
        opencl: None,
        runs: Vec::new(),
    }));
    if args.calibrate && args.opencl {
        // The OpenCL layer's own costs: its API spans (layer `api` vs `off`, with annotations
        // only), and the inflation of API calls under device tracing (`api` vs the recorded
        // level's tracing, by difference of averages).
        let at = measured.iter().position(|m| m.level == 1).unwrap_or(0);
        for layer in ["api", "off"] {
            measured.insert(
                at,
                Measured {
                    level: 1,
                    opencl: Some(layer),
                    runs: Vec::new(),
                },
            );
        }
    }
    // Held-out runs at the recorded level (validation), measured with the configurations.
    let mut held_out: Vec<RunResult> = Vec::new();
    let repeat = args.repeat.max(1);
    if !wanted.is_empty() && !args.json {
        eprintln!(
            "strato record: {}{} interleaved x{repeat}",
            measured
                .iter()
                .map(Measured::name)
                .collect::<Vec<_>>()
                .join(", "),
            if args.calibrate {
                format!(" + held-out level {}", args.level)
            } else {
                String::new()
            }
        );
    }
    // Interleaved (round r runs every configuration once), so slow drifts of the machine's
    // load affect every configuration alike instead of biasing the ones run last.
    for rep in 0..if wanted.is_empty() { 0 } else { repeat } {
        for m in &mut measured {
            let config = match m.opencl {
                Some(layer) => format!("level-{}-opencl-{layer}", m.level),
                None => format!("level-{}", m.level),
            };
            let d = work.join(config).join(format!("run-{rep}"));
            m.runs
                .push(run_once(&launcher, &d, m.level, m.opencl, Output::Null)?);
        }
        if args.calibrate {
            let d = work.join("recorded").join(format!("run-{rep}"));
            held_out.push(run_once(&launcher, &d, args.level, None, Output::Null)?);
        }
    }
    let mut calibration_json = None;
    if args.calibrate {
        let all: Vec<&RunResult> = measured
            .iter()
            .flat_map(|m| &m.runs)
            .chain(&held_out)
            .collect();
        let basis = Basis::of(&all);
        let configs: Vec<ConfigRuns<'_>> = measured
            .iter()
            .map(|m| (m.level, m.opencl, &m.runs[..]))
            .collect();
        let fit = fit_and_validate(&configs, &held_out, basis);
        let interval = bias_interval(&configs, &held_out, basis, BOOTSTRAP_SAMPLES);
        let cal = fit.calibration.clone();
        for r in &mut held_out {
            let trace = load_dir(&r.dir)?;
            r.removed_ns = removed_in_root(&trace, &cal).map_or(0.0, |v| v.2);
        }
        let uninstrumented = robust(&measured[0].runs, |r| r.time_ns);
        let run_json = |level: u64, name: &str, opencl: Option<&str>, runs: &[RunResult]| {
            json!({
                "level": level,
                "name": name,
                "opencl": opencl,
                "times_s": runs.iter().map(|r| r.time_ns / 1e9).collect::<Vec<_>>(),
                "robust_s": robust(runs, |r| r.time_ns) / 1e9,
                "cpu_times_s": runs.iter().map(|r| r.cpu.as_ref().map(|c| c.0 / 1e9)).collect::<Vec<_>>(),
                "counts": runs.iter().map(|r| r.counts).collect::<Vec<_>>(),
            })
        };
        let mut runs_json: Vec<Value> = measured
            .iter()
            .map(|m| run_json(m.level, &m.name(), m.opencl, &m.runs))
            .collect();
        runs_json.push(run_json(args.level, "held-out", None, &held_out));
        // Held-out runs at the recorded level, not used by the fit: mean over the fastest 60%
        // of their instrumented and corrected times, on the fit's basis and on wall time.
        let mean_kept = |key: &dyn Fn(&RunResult) -> f64, f: &dyn Fn(&RunResult) -> f64| {
            let k = kept(&held_out, key);
            k.iter().map(|&i| f(&held_out[i])).sum::<f64>() / k.len().max(1) as f64
        };
        let wall_time = |r: &RunResult| r.time_ns;
        let wall = validation_json(
            uninstrumented,
            mean_kept(&wall_time, &wall_time),
            mean_kept(&wall_time, &|r| r.removed_ns),
            0,
        );
        let mut held_out_validation = match basis {
            Basis::ThreadCpu => validation_json(
                fit.uninstrumented_ns,
                fit.instrumented_ns,
                fit.removed_ns,
                0,
            ),
            Basis::Wall => wall.clone(),
        };
        held_out_validation["basis"] = json!(basis.name());
        // How far run-to-run noise alone moves the figure.
        held_out_validation["bias_pct_interval95"] = json!(interval.map(|(a, b)| [a, b]));
        held_out_validation["bootstrap_samples"] = json!(BOOTSTRAP_SAMPLES);
        if basis != Basis::Wall {
            held_out_validation["wall"] = wall;
        }
        let value = json!({
            "costs_ns": cal.costs_ns,
            "api_inflation_ns": cal.api_inflation_ns,
            "basis": basis.name(),
            "method": "joint non-negative least squares over levels 0-4, one equation per run (fastest 60% of each configuration's interleaved repeats), per-run counts; with --opencl, per-call inflation of OpenCL API calls under device tracing by difference of averages (layer api vs the recorded level, annotations on), taken off the traced runs' times before the fit; times are the CPU time of each process's recording thread when every run has it (basis thread_cpu), else the root process's wall-clock region",
            "command": args.command,
            "repeat": repeat,
            "uninstrumented_s": uninstrumented / 1e9,
            "uninstrumented_cpu_s": (basis == Basis::ThreadCpu).then_some(fit.uninstrumented_ns / 1e9),
            "runs": runs_json,
            "validation": held_out_validation,
        });
        std::fs::create_dir_all(&dir)?;
        write_calibration(&dir, &value)?;
        calibration_json = Some(value);
    }
    if !args.json {
        eprintln!(
            "strato record: recording at level {} into {}",
            args.level,
            dir.display()
        );
    }
    let output = if args.json {
        Output::ToStderr
    } else {
        Output::Inherit
    };
    let failed = if args.calibrate {
        // The profile is the held-out run of median time (every run succeeded).
        let mut idx: Vec<usize> = (0..held_out.len()).collect();
        idx.sort_by(|&a, &b| held_out[a].time_ns.total_cmp(&held_out[b].time_ns));
        copy_profile(&held_out[idx[idx.len() / 2]].dir, &dir)?;
        None
    } else {
        Some(launcher.run(&dir, args.level, None, output)?).filter(|s| !s.success())
    };
    if let Some(status) = failed {
        eprintln!(
            "strato record: the program ended with {}; loading what was recorded (strato exits with {})",
            status.describe(),
            status.shell_code()
        );
    }
    let raw = match load_dir(&dir) {
        Ok(trace) => trace,
        // The program's failure is the news; that it recorded nothing comes with it.
        Err(e) => match failed {
            Some(status) => {
                eprintln!("strato: {e:#}");
                return Ok(status.shell_code());
            }
            None => return Err(e),
        },
    };
    let cal = overhead::recorded_calibration(&raw);
    let trace = match (&cal, args.no_correct) {
        (Some(c), false) => overhead::correct(&raw, c).0,
        _ => raw.clone(),
    };
    let report = breakdown::breakdown(&trace, &BreakdownOptions::default());
    let mut doc = serde_json::to_value(&report)?;
    doc["profile"] = json!(dir.display().to_string());
    doc["corrected"] = json!(cal.is_some() && !args.no_correct);
    if let (Some(c), Some(cj)) = (&cal, &mut calibration_json) {
        if let Some((pid, _, _)) = root_time_ns(&raw) {
            cj["validation"]["pid"] = json!(pid);
            write_calibration(&dir, cj)?;
        }
        doc["validation"] = cj["validation"].clone();
        doc["calibration"] = json!({"costs_ns": c.costs_ns, "api_inflation_ns": c.api_inflation_ns, "repeat": repeat});
    }
    if args.levels {
        doc["levels"] = leveled(&launcher, &work, &measured)?;
    }
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &doc)?;
        writeln!(out)?;
    } else {
        print_text(out, &report, &doc, args.top)?;
    }
    Ok(failed.map_or(0, ProgramStatus::shell_code))
}

fn copy_profile(from: &Path, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    for entry in std::fs::read_dir(dir)?.flatten() {
        if entry.path().extension().is_some_and(|e| e == "strato") {
            std::fs::remove_file(entry.path())?;
        }
    }
    for entry in std::fs::read_dir(from)?.flatten() {
        let p = entry.path();
        if p.extension().is_some_and(|e| e == "strato") {
            if let Some(name) = p.file_name() {
                std::fs::copy(&p, dir.join(name))?;
            }
        }
    }
    Ok(())
}

fn leveled(launcher: &Launcher<'_>, work: &Path, measured: &[Measured]) -> Result<Value> {
    let _ = launcher;
    let base = measured
        .iter()
        .find(|m| m.level == 0)
        .map_or(0.0, |m| robust(&m.runs, |r| r.time_ns));
    let mut runs = Vec::new();
    let mut prev = base;
    // Level timings from the lowest-overhead run that records them.
    let mut chosen: std::collections::BTreeMap<Level, (u64, i64)> = Default::default();
    for m in measured
        .iter()
        .filter(|m| m.level != 2 && m.opencl.is_none())
    {
        let t = robust(&m.runs, |r| r.time_ns);
        runs.push(json!({
            "level": m.level,
            "name": LEVEL_NAMES[m.level as usize],
            "time_s": t / 1e9,
            "overhead_vs_uninstrumented_pct": if base > 0.0 { (t - base) / base * 100.0 } else { 0.0 },
            "overhead_vs_previous_level_s": (t - prev) / 1e9,
        }));
        prev = t;
        if m.level == 0 {
            continue;
        }
        let _ = work;
        let trace = load_dir(&m.runs[0].dir)?;
        if let Some((pid, _, _)) = root_time_ns(&trace) {
            for (level, ns) in level_times(&trace, pid) {
                chosen.entry(level).or_insert((m.level, ns));
            }
        }
    }
    let strata: Vec<Value> = chosen
        .into_iter()
        .map(|(level, (from, ns))| {
            json!({"stratum": level.as_str(), "from_level": from, "from_run": LEVEL_NAMES[from as usize], "span_time_s": ns as f64 / 1e9})
        })
        .collect();
    Ok(json!({"runs": runs, "strata": strata}))
}

fn print_text(
    out: &mut impl Write,
    report: &BreakdownReport,
    doc: &Value,
    top: usize,
) -> Result<()> {
    writeln!(
        out,
        "profile {}{}",
        doc["profile"].as_str().unwrap_or(""),
        if doc["corrected"].as_bool() == Some(true) {
            " (overhead-corrected)"
        } else {
            ""
        }
    )?;
    for p in &report.processes {
        writeln!(
            out,
            "\nprocess {} {}: {:.3} s",
            p.pid,
            p.name.as_deref().unwrap_or(""),
            p.window_ns as f64 / 1e9
        )?;
        writeln!(
            out,
            "  {:<18} {:<28} {:<8} {:<11} {:>10} {:>7}",
            "phase", "operation", "resource", "cpu level", "time (s)", "share"
        )?;
        let mut rows = p.rows.clone();
        rows.sort_by_key(|r| std::cmp::Reverse(r.time_ns));
        for r in rows.iter().take(top) {
            writeln!(
                out,
                "  {:<18} {:<28} {:<8} {:<11} {:>10.4} {:>6.1}%",
                r.phase,
                r.operation,
                r.resource.as_str(),
                r.cpu_level.map_or("-", |l| l.as_str()),
                r.time_ns as f64 / 1e9,
                r.time_ns as f64 * 100.0 / p.window_ns.max(1) as f64
            )?;
        }
        if rows.len() > top {
            writeln!(out, "  ... {} more rows (--top N)", rows.len() - top)?;
        }
    }
    if let Some(v) = doc.get("validation") {
        write_validation(out, "\nvalidation ", v)?;
    }
    if let Some(c) = doc.get("calibration") {
        writeln!(out, "calibrated cost per event (ns): {}", c["costs_ns"])?;
        if c["api_inflation_ns"]
            .as_object()
            .is_some_and(|m| !m.is_empty())
        {
            writeln!(
                out,
                "API call inflation under device tracing (ns per call): {}",
                c["api_inflation_ns"]
            )?;
        }
    }
    if let Some(l) = doc.get("levels") {
        writeln!(out, "\nleveled experimentation:")?;
        for r in l["runs"].as_array().into_iter().flatten() {
            writeln!(
                out,
                "  level {} {:<15} {:>9.4} s  overhead {:+.1}%",
                r["level"],
                r["name"].as_str().unwrap_or(""),
                r["time_s"].as_f64().unwrap_or(0.0),
                r["overhead_vs_uninstrumented_pct"].as_f64().unwrap_or(0.0)
            )?;
        }
        for s in l["strata"].as_array().into_iter().flatten() {
            writeln!(
                out,
                "  {:<12} timings from level {} ({}) : {:.4} s",
                s["stratum"].as_str().unwrap_or(""),
                s["from_level"],
                s["from_run"].as_str().unwrap_or(""),
                s["span_time_s"].as_f64().unwrap_or(0.0)
            )?;
        }
    }
    Ok(())
}

/// Runs `strato validate`: recomputes the validation of a calibrated profile.
pub fn run_validate(args: ValidateArgs, out: &mut impl Write) -> Result<()> {
    let path = args.profile.join("calibration.json");
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "{}: not a calibrated profile (run strato record --calibrate)",
            path.display()
        )
    })?;
    let value: Value = serde_json::from_str(&text).with_context(|| path.display().to_string())?;
    let cal: Calibration = serde_json::from_value(value.clone())?;
    let uninstrumented = value["uninstrumented_s"].as_f64().unwrap_or(0.0) * 1e9;
    let uninstrumented_cpu = value["uninstrumented_cpu_s"].as_f64().map(|s| s * 1e9);
    let trace = load_dir(&args.profile)?;
    let v = validation(&trace, &cal, uninstrumented, uninstrumented_cpu)
        .with_context(|| format!("{}: no recorded process", args.profile.display()))?;
    if args.json {
        serde_json::to_writer_pretty(
            &mut *out,
            &json!({"validation": v, "costs_ns": cal.costs_ns}),
        )?;
        writeln!(out)?;
    } else {
        write_validation(out, "", &v)?;
    }
    Ok(())
}

/// One line per basis of a validation object (see [`validation`]): its own basis, then the
/// wall-clock figures when the basis was CPU time.
fn write_validation(out: &mut impl Write, prefix: &str, v: &Value) -> Result<()> {
    let line = |v: &Value, basis: &str| {
        format!(
            "({basis}): uninstrumented {:.4} s, instrumented {:.4} s ({:+.1}%), corrected {:.4} s, bias {:+.2}%",
            v["uninstrumented_s"].as_f64().unwrap_or(0.0),
            v["instrumented_s"].as_f64().unwrap_or(0.0),
            v["inflation_pct"].as_f64().unwrap_or(0.0),
            v["corrected_s"].as_f64().unwrap_or(0.0),
            v["bias_pct"].as_f64().unwrap_or(0.0)
        )
    };
    let basis = v["basis"].as_str().unwrap_or("wall");
    let interval = match v["bias_pct_interval95"].as_array().map(Vec::as_slice) {
        Some([a, b]) => format!(
            " (95% interval over resampled runs: {:+.2}% .. {:+.2}%)",
            a.as_f64().unwrap_or(0.0),
            b.as_f64().unwrap_or(0.0)
        ),
        _ => String::new(),
    };
    writeln!(out, "{prefix}{}{interval}", line(v, basis))?;
    if let Some(w) = v.get("wall") {
        writeln!(
            out,
            "{}{}",
            prefix.trim_start_matches('\n'),
            line(w, "wall")
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::ProgramStatus;
    use std::os::unix::process::ExitStatusExt;
    use std::process::ExitStatus;

    #[test]
    fn shell_code_is_the_exit_code_or_128_plus_the_signal() {
        // wait(2) statuses: exit code in bits 8-15, a terminating signal in bits 0-6.
        let exited = |code: i32| ProgramStatus::of(ExitStatus::from_raw(code << 8));
        let killed = |signal: i32| ProgramStatus::of(ExitStatus::from_raw(signal));
        assert!(exited(0).success());
        assert_eq!(exited(3).shell_code(), 3);
        assert_eq!(exited(255).shell_code(), 255);
        assert_eq!(exited(3).describe(), "exit code 3");
        assert!(!killed(9).success());
        assert_eq!(killed(9).shell_code(), 137);
        assert_eq!(killed(11).shell_code(), 139);
        assert_eq!(killed(15).shell_code(), 143);
        assert_eq!(killed(15).describe(), "signal 15 (SIGTERM)");
        // A core dump (bit 7) does not change the status a shell reports.
        assert_eq!(
            ProgramStatus::of(ExitStatus::from_raw(11 | 0x80)).shell_code(),
            139
        );
    }
}
