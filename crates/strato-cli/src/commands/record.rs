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
use strato_analysis::breakdown::{self, BreakdownOptions, BreakdownReport};

use strato_analysis::calibration::{
    self, robust, Basis, CalibrationFile, ConfigRuns, RecordingInfo, RunMeasure, StoredRuns,
    BOOTSTRAP_SAMPLES, LEVEL_NAMES,
};
use strato_trace::Level;

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
    /// Re-fit the calibration on the runs stored under PROFILE/.runs (as `strato record
    /// --calibrate` fitted it) and print the figures, saying whether they equal the stored ones.
    #[arg(long)]
    pub refit: bool,
}

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

/// Whether the OpenCL layer (loaded when `opencl_on`) traces device commands in a run at
/// `level` with layer level `opencl` (None: `STRATOSCOPE_OPENCL` or full; the recorder's level
/// 0 turns the layer off).
fn device_tracing(opencl_on: bool, level: u64, opencl: Option<&str>) -> bool {
    let layer = opencl
        .map(str::to_owned)
        .or_else(|| std::env::var("STRATOSCOPE_OPENCL").ok())
        .unwrap_or_else(|| "full".into());
    opencl_on
        && level > 0
        && matches!(
            layer.trim().to_ascii_lowercase().as_str(),
            "device" | "2" | "full" | "3" | ""
        )
}

struct Launcher<'a> {
    args: &'a RecordArgs,
    bootstrap: PathBuf,
}

impl Launcher<'_> {
    /// Whether the OpenCL layer traces device commands in a run at `level` with layer level
    /// `opencl` (the recorder's level 0 turns the layer off).
    fn device_tracing(&self, level: u64, opencl: Option<&str>) -> bool {
        device_tracing(self.args.opencl, level, opencl)
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
            cmd.env("OPENCL_LAYERS", crate::launch::opencl_layer_path()?);
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

/// One run of a configuration: where it was recorded and what it measured.
struct RunResult {
    dir: PathBuf,
    measure: RunMeasure,
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
    let trace = crate::input::load_recording(dir)?;
    let measure = calibration::measure_run(&trace, launcher.device_tracing(level, opencl))
        .with_context(|| format!("{}: no recorded process", dir.display()))?;
    Ok(RunResult {
        dir: dir.to_owned(),
        measure,
    })
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
        let file = fit_runs(&measured, &held_out, args.level, &args.command, repeat)?;
        std::fs::create_dir_all(&dir)?;
        file.write(&dir)?;
        calibration_json = Some(file);
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
        idx.sort_by(|&a, &b| {
            held_out[a]
                .measure
                .time_ns
                .total_cmp(&held_out[b].measure.time_ns)
        });
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
    let profile = match crate::input::open_recording(&dir, !args.no_correct) {
        Ok(profile) => profile,
        // The program's failure is the news; that it recorded nothing comes with it.
        Err(e) => match failed {
            Some(status) => {
                eprintln!("strato: {e:#}");
                return Ok(status.shell_code());
            }
            None => return Err(e),
        },
    };
    let cal = profile.recording.calibration.clone();
    let trace = &profile.trace;
    let report = breakdown::breakdown(
        &strato_analysis::analyzed::Analyzed::new(trace),
        &BreakdownOptions::default(),
    );
    let mut doc = serde_json::to_value(&report)?;
    doc["profile"] = json!(dir.display().to_string());
    doc["corrected"] = json!(profile.correction.is_some());
    if let (Some(c), Some(cj)) = (&cal, &mut calibration_json) {
        if let Some((pid, _, _)) = profile.recording.root_region() {
            cj.validation.pid = pid;
            cj.write(&dir)?;
        }
        doc["validation"] = serde_json::to_value(&cj.validation)?;
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

/// Fits and validates the calibration on the runs of each configuration (`measured`, in the
/// order they ran) and the held-out runs at the recorded `level`: the content of
/// `calibration.json`. `strato validate --refit` calls it again on the stored runs.
fn fit_runs(
    measured: &[Measured],
    held_out: &[RunResult],
    level: u64,
    command: &[String],
    repeat: usize,
) -> Result<CalibrationFile> {
    let measures = |runs: &[RunResult]| runs.iter().map(|r| r.measure.clone()).collect::<Vec<_>>();
    let configs_runs: Vec<Vec<RunMeasure>> = measured.iter().map(|m| measures(&m.runs)).collect();
    let held: Vec<RunMeasure> = measures(held_out);
    let basis = Basis::of(configs_runs.iter().flatten().chain(&held));
    let configs: Vec<ConfigRuns<'_>> = measured
        .iter()
        .zip(&configs_runs)
        .map(|(m, runs)| (m.level, m.opencl, &runs[..]))
        .collect();
    let fit = calibration::fit_and_validate(&configs, &held, basis);
    // How far run-to-run noise alone moves the figure.
    let interval = calibration::bias_interval(&configs, &held, basis, BOOTSTRAP_SAMPLES);
    let cal = fit.calibration.clone();
    let mut removed = Vec::with_capacity(held_out.len());
    for r in held_out {
        let trace = crate::input::load_recording(&r.dir)?;
        removed.push(calibration::removed_in_root(&trace, &cal).map_or(0.0, |v| v.2));
    }
    let uninstrumented = robust(&configs_runs[0], |r| r.time_ns);
    let mut runs: Vec<StoredRuns> = measured
        .iter()
        .zip(&configs_runs)
        .map(|(m, runs)| StoredRuns::of(m.level, &m.name(), m.opencl, runs))
        .collect();
    runs.push(StoredRuns::of(level, "held-out", None, &held));
    // Held-out runs at the recorded level, not used by the fit: mean over the fastest 60%
    // of their instrumented and corrected times, on the fit's basis and on wall time.
    let validation =
        calibration::held_out_validation(&fit, basis, uninstrumented, &held, &removed, interval);
    Ok(CalibrationFile {
        costs_ns: cal.costs_ns,
        api_inflation_ns: cal.api_inflation_ns,
        basis,
        method: calibration::METHOD.to_owned(),
        command: command.to_vec(),
        repeat,
        uninstrumented_s: uninstrumented / 1e9,
        uninstrumented_cpu_s: (basis == Basis::ThreadCpu).then_some(fit.uninstrumented_ns / 1e9),
        runs,
        validation,
    })
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
        .map_or(0.0, |m| robust(&m.runs, |r| r.measure.time_ns));
    let mut runs = Vec::new();
    let mut prev = base;
    // Level timings from the lowest-overhead run that records them.
    let mut chosen: std::collections::BTreeMap<Level, (u64, i64)> = Default::default();
    for m in measured
        .iter()
        .filter(|m| m.level != 2 && m.opencl.is_none())
    {
        let t = robust(&m.runs, |r| r.measure.time_ns);
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
        let trace = crate::input::load_recording(&m.runs[0].dir)?;
        if let Some((pid, _, _)) = RecordingInfo::of(&trace).root_region() {
            for (level, ns) in calibration::level_times(&trace, pid) {
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

/// Runs `strato validate`: recomputes the validation of a calibrated profile; with
/// `--refit`, re-fits the calibration on the runs stored under `PROFILE/.runs` first.
pub fn run_validate(args: ValidateArgs, out: &mut impl Write) -> Result<()> {
    let stored = CalibrationFile::read(&args.profile)?;
    if args.refit {
        return refit(&args, &stored, out);
    }
    let cal = stored.calibration();
    let trace = crate::input::load_recording(&args.profile)?;
    let v = calibration::validate_recording(
        &trace,
        &cal,
        stored.uninstrumented_s * 1e9,
        stored.uninstrumented_cpu_s.map(|s| s * 1e9),
    )
    .with_context(|| format!("{}: no recorded process", args.profile.display()))?;
    if args.json {
        serde_json::to_writer_pretty(
            &mut *out,
            &json!({"validation": v, "costs_ns": cal.costs_ns}),
        )?;
        writeln!(out)?;
    } else {
        write_validation(out, "", &serde_json::to_value(&v)?)?;
    }
    Ok(())
}

/// `strato validate --refit`: the runs of every configuration stored by `strato record
/// --calibrate` (`.runs/level-N[-opencl-L]/run-K`, `.runs/recorded/run-K`) measured and fitted
/// again as the recording did; prints the figures and whether they equal the stored ones.
fn refit(args: &ValidateArgs, stored: &CalibrationFile, out: &mut impl Write) -> Result<()> {
    let work = args.profile.join(".runs");
    let Some((held_entry, configs)) = stored.runs.split_last() else {
        bail!("{}: calibration.json lists no runs", args.profile.display());
    };
    let opencl_on = configs.iter().any(|c| c.opencl.is_some());
    let load_runs = |config: &str, level: u64, opencl: Option<&str>, n: usize| {
        (0..n)
            .map(|rep| {
                let dir = work.join(config).join(format!("run-{rep}"));
                let trace = crate::input::load_recording(&dir)?;
                let measure =
                    calibration::measure_run(&trace, device_tracing(opencl_on, level, opencl))
                        .with_context(|| format!("{}: no recorded process", dir.display()))?;
                Ok(RunResult { dir, measure })
            })
            .collect::<Result<Vec<_>>>()
    };
    let mut measured = Vec::new();
    for c in configs {
        let opencl: Option<&'static str> = match c.opencl.as_deref() {
            None => None,
            Some("api") => Some("api"),
            Some("off") => Some("off"),
            Some(other) => bail!(
                "{}: unknown OpenCL configuration {other:?} in calibration.json",
                args.profile.display()
            ),
        };
        let config = match opencl {
            Some(layer) => format!("level-{}-opencl-{layer}", c.level),
            None => format!("level-{}", c.level),
        };
        measured.push(Measured {
            level: c.level,
            opencl,
            runs: load_runs(&config, c.level, opencl, c.times_s.len())?,
        });
    }
    let held_out = load_runs("recorded", held_entry.level, None, held_entry.times_s.len())?;
    let mut file = fit_runs(
        &measured,
        &held_out,
        held_entry.level,
        &stored.command,
        stored.repeat,
    )?;
    file.validation.pid = stored.validation.pid;
    // Compared with the file's text: parsing and writing a float again may move its last digit.
    let stored_text = std::fs::read_to_string(args.profile.join(CalibrationFile::NAME))?;
    let same = file.to_json() == stored_text;
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &json!({"refit": file, "same_as_stored": same}))?;
        writeln!(out)?;
        return Ok(());
    }
    let runs: usize = file.runs.iter().map(|r| r.times_s.len()).sum();
    writeln!(
        out,
        "refit of {runs} stored runs ({} configurations + held-out, basis {})",
        configs.len(),
        file.basis.name()
    )?;
    writeln!(
        out,
        "calibrated cost per event (ns): {}",
        json!(file.costs_ns)
    )?;
    if !file.api_inflation_ns.is_empty() {
        writeln!(
            out,
            "API call inflation under device tracing (ns per call): {}",
            json!(file.api_inflation_ns)
        )?;
    }
    write_validation(out, "validation ", &serde_json::to_value(&file.validation)?)?;
    writeln!(
        out,
        "{}",
        if same {
            "same figures as the stored calibration.json"
        } else {
            "differs from the stored calibration.json (--json shows the refit)"
        }
    )?;
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
