//! `strato record` and `strato validate` (issue 4): run an unmodified Python program with
//! stratoscope's recorder on, optionally calibrate book-keeping costs (delta calibration over
//! collection levels 0..4) and validate the overhead correction against an uninstrumented run,
//! run XSP-style leveled experiments, and print the (corrected) breakdown.
//!
//! The launcher sets `STRATOSCOPE_OUT` (the profile directory), `STRATOSCOPE_LEVEL`, optional
//! `STRATOSCOPE_TORCH` / `STRATOSCOPE_WRAP`, and puts the package's `_bootstrap` directory
//! (a `sitecustomize`) first on `PYTHONPATH`, so every Python process of the run starts
//! recording at interpreter start. A run's time is its root process's recorded region (START
//! to STOP records).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use strato_analysis::breakdown::{self, BreakdownOptions, BreakdownReport};
use strato_analysis::overhead::{self, Calibration, CalibrationRun, Counts};
use strato_trace::{Level, Trace, TrackKind};

use crate::app::import_options;

/// `strato record`.
#[derive(clap::Args, Debug)]
pub struct RecordArgs {
    /// The profile directory to write (its *.strato files are replaced).
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
    /// configuration's time is the mean of its fastest 60% of runs).
    #[arg(long, default_value_t = 5)]
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
    /// Runs the command once at `level` into `dir` (its *.strato files removed first).
    fn run(&self, dir: &Path, level: u64, output: Output) -> Result<Option<i32>> {
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
            cmd.env("OPENCL_LAYERS", crate::cmd_overhead::opencl_layer_path()?);
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
        let status = cmd
            .status()
            .with_context(|| format!("record: cannot run {:?}", self.args.command[0]))?;
        Ok(status.code())
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

struct RunResult {
    dir: PathBuf,
    time_ns: f64,
    counts: Counts,
    /// Calibrated cost the correction removes from the root process's region (held-out
    /// validation runs only).
    removed_ns: f64,
}

struct Measured {
    level: u64,
    runs: Vec<RunResult>,
}

/// Indices of the runs a robust statistic keeps: the fastest 60% (at least one). Interference
/// from other work only ever adds time, so the slowest runs are the least representative.
fn kept(runs: &[RunResult]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..runs.len()).collect();
    idx.sort_by(|&a, &b| runs[a].time_ns.total_cmp(&runs[b].time_ns));
    idx.truncate((runs.len() * 3).div_ceil(5).max(1));
    idx
}

/// The representative value of `f` over a configuration's runs: its mean over [`kept`] runs.
fn robust(runs: &[RunResult], f: impl Fn(&RunResult) -> f64) -> f64 {
    let k = kept(runs);
    k.iter().map(|&i| f(&runs[i])).sum::<f64>() / k.len().max(1) as f64
}

fn run_once(launcher: &Launcher<'_>, dir: &Path, level: u64, output: Output) -> Result<RunResult> {
    let code = launcher.run(dir, level, output)?;
    if code != Some(0) {
        bail!(
            "record: calibration run at level {level} failed (exit {})",
            code.map_or("signal".into(), |c| c.to_string())
        );
    }
    let trace = load_dir(dir)?;
    let (pid, start, end) =
        root_time_ns(&trace).with_context(|| format!("{}: no recorded process", dir.display()))?;
    Ok(RunResult {
        dir: dir.to_owned(),
        time_ns: (end - start) as f64,
        counts: overhead::count(&trace, Some(pid)),
        removed_ns: 0.0,
    })
}

/// The cost the correction removes from the root process's recorded region, and that region.
fn removed_in_root(trace: &Trace, cal: &Calibration) -> Option<(i64, f64, f64)> {
    let (pid, start, end) = root_time_ns(trace)?;
    let removed = overhead::removed_before(trace, cal, pid, pid, end)
        - overhead::removed_before(trace, cal, pid, pid, start - 1);
    Some((pid, (end - start) as f64, removed as f64))
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
/// an uninstrumented time.
fn validation(trace: &Trace, cal: &Calibration, uninstrumented_ns: f64) -> Option<Value> {
    let (pid, instrumented, removed) = removed_in_root(trace, cal)?;
    Some(validation_json(
        uninstrumented_ns,
        instrumented,
        removed,
        pid,
    ))
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

/// Runs `strato record`.
pub fn run_record(args: RecordArgs, out: &mut impl Write) -> Result<()> {
    let launcher = Launcher {
        bootstrap: bootstrap_dir(&args.command)?,
        args: &args,
    };
    let dir = args.output.clone();
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
        runs: Vec::new(),
    }));
    // Held-out runs at the recorded level (validation), measured with the configurations.
    let mut held_out: Vec<RunResult> = Vec::new();
    let repeat = args.repeat.max(1);
    if !wanted.is_empty() && !args.json {
        eprintln!(
            "strato record: levels {wanted:?}{} interleaved x{repeat}",
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
            let d = work
                .join(format!("level-{}", m.level))
                .join(format!("run-{rep}"));
            m.runs.push(run_once(&launcher, &d, m.level, Output::Null)?);
        }
        if args.calibrate {
            let d = work.join("recorded").join(format!("run-{rep}"));
            held_out.push(run_once(&launcher, &d, args.level, Output::Null)?);
        }
    }
    let mut calibration_json = None;
    if args.calibrate {
        let runs: Vec<CalibrationRun> = measured
            .iter()
            .flat_map(|m| {
                kept(&m.runs).into_iter().map(|i| CalibrationRun {
                    level: m.level,
                    time_ns: m.runs[i].time_ns,
                    counts: m.runs[i].counts,
                })
            })
            .collect();
        let cal = overhead::calibrate(&runs);
        for r in &mut held_out {
            let trace = load_dir(&r.dir)?;
            r.removed_ns = removed_in_root(&trace, &cal).map_or(0.0, |v| v.2);
        }
        let uninstrumented = robust(&measured[0].runs, |r| r.time_ns);
        let run_json = |level: u64, name: &str, runs: &[RunResult]| {
            json!({
                "level": level,
                "name": name,
                "times_s": runs.iter().map(|r| r.time_ns / 1e9).collect::<Vec<_>>(),
                "robust_s": robust(runs, |r| r.time_ns) / 1e9,
                "counts": runs.iter().map(|r| r.counts).collect::<Vec<_>>(),
            })
        };
        let mut runs_json: Vec<Value> = measured
            .iter()
            .map(|m| run_json(m.level, LEVEL_NAMES[m.level as usize], &m.runs))
            .collect();
        runs_json.push(run_json(args.level, "held-out", &held_out));
        let value = json!({
            "costs_ns": cal.costs_ns,
            "method": "joint non-negative least squares over levels 0-4, one equation per run (fastest 60% of each configuration's interleaved repeats), per-run counts",
            "command": args.command,
            "repeat": repeat,
            "uninstrumented_s": uninstrumented / 1e9,
            "runs": runs_json,
            // Held-out runs at the recorded level, not used by the fit: mean over the fastest
            // 60% of their instrumented and corrected times.
            "validation": validation_json(
                uninstrumented,
                robust(&held_out, |r| r.time_ns),
                robust(&held_out, |r| r.removed_ns),
                0,
            ),
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
    let code = if args.calibrate {
        // The profile is the held-out run of median time.
        let mut idx: Vec<usize> = (0..held_out.len()).collect();
        idx.sort_by(|&a, &b| held_out[a].time_ns.total_cmp(&held_out[b].time_ns));
        copy_profile(&held_out[idx[idx.len() / 2]].dir, &dir)?;
        Some(0)
    } else {
        launcher.run(&dir, args.level, output)?
    };
    if code != Some(0) {
        eprintln!(
            "strato record: the command exited with {}; loading what was recorded",
            code.map_or("a signal".into(), |c| format!("code {c}"))
        );
    }
    let raw = load_dir(&dir)?;
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
        doc["calibration"] = json!({"costs_ns": c.costs_ns, "repeat": repeat});
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
    Ok(())
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
    for m in measured.iter().filter(|m| m.level != 2) {
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
        writeln!(
            out,
            "\nvalidation: uninstrumented {:.3} s, instrumented {:.3} s ({:+.1}%), corrected {:.3} s, bias {:+.2}%",
            v["uninstrumented_s"].as_f64().unwrap_or(0.0),
            v["instrumented_s"].as_f64().unwrap_or(0.0),
            v["inflation_pct"].as_f64().unwrap_or(0.0),
            v["corrected_s"].as_f64().unwrap_or(0.0),
            v["bias_pct"].as_f64().unwrap_or(0.0)
        )?;
    }
    if let Some(c) = doc.get("calibration") {
        writeln!(out, "calibrated cost per event (ns): {}", c["costs_ns"])?;
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
    let trace = load_dir(&args.profile)?;
    let v = validation(&trace, &cal, uninstrumented)
        .with_context(|| format!("{}: no recorded process", args.profile.display()))?;
    if args.json {
        serde_json::to_writer_pretty(
            &mut *out,
            &json!({"validation": v, "costs_ns": cal.costs_ns}),
        )?;
        writeln!(out)?;
    } else {
        writeln!(
            out,
            "uninstrumented {:.4} s, instrumented {:.4} s ({:+.1}%), corrected {:.4} s, bias {:+.2}%",
            v["uninstrumented_s"].as_f64().unwrap_or(0.0),
            v["instrumented_s"].as_f64().unwrap_or(0.0),
            v["inflation_pct"].as_f64().unwrap_or(0.0),
            v["corrected_s"].as_f64().unwrap_or(0.0),
            v["bias_pct"].as_f64().unwrap_or(0.0)
        )?;
    }
    Ok(())
}
