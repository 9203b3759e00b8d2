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
    /// Runs per calibration configuration (the minimum time is used).
    #[arg(long, default_value_t = 3)]
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

struct Measured {
    level: u64,
    times_ns: Vec<f64>,
    counts: Counts,
}

/// The representative time of repeated runs: the minimum, the run least disturbed by other
/// work on the machine (book-keeping only ever adds time).
fn median(v: &[f64]) -> f64 {
    v.iter()
        .copied()
        .fold(f64::INFINITY, f64::min)
        .min(f64::MAX)
}

fn measure(launcher: &Launcher<'_>, base: &Path, level: u64, repeat: usize) -> Result<Measured> {
    let mut times = Vec::new();
    let mut counts = Counts::default();
    for rep in 0..repeat.max(1) {
        let dir = base
            .join(format!("level-{level}"))
            .join(format!("run-{rep}"));
        let code = launcher.run(&dir, level, Output::Null)?;
        if code != Some(0) {
            bail!(
                "record: calibration run at level {level} failed (exit {})",
                code.map_or("signal".into(), |c| c.to_string())
            );
        }
        let trace = load_dir(&dir)?;
        let (pid, start, end) = root_time_ns(&trace)
            .with_context(|| format!("{}: no recorded process", dir.display()))?;
        times.push((end - start) as f64);
        counts = overhead::count(&trace, Some(pid));
    }
    Ok(Measured {
        level,
        times_ns: times,
        counts,
    })
}

/// Validation of the correction on one recording: its root process's corrected time against
/// an uninstrumented time.
fn validation(trace: &Trace, cal: &Calibration, uninstrumented_ns: f64) -> Option<Value> {
    let (pid, start, end) = root_time_ns(trace)?;
    let instrumented = (end - start) as f64;
    let removed = overhead::removed_before(trace, cal, pid, pid, end)
        - overhead::removed_before(trace, cal, pid, pid, start - 1);
    let corrected = instrumented - removed as f64;
    let pct = |x: f64| (x - uninstrumented_ns) / uninstrumented_ns * 100.0;
    Some(json!({
        "uninstrumented_s": uninstrumented_ns / 1e9,
        "instrumented_s": instrumented / 1e9,
        "corrected_s": corrected / 1e9,
        "inflation_pct": pct(instrumented),
        "bias_pct": pct(corrected),
        "removed_s": removed as f64 / 1e9,
        "pid": pid,
    }))
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
    for &level in &wanted {
        if !args.json {
            eprintln!(
                "strato record: level {level} ({}) x{}",
                LEVEL_NAMES[level as usize], args.repeat
            );
        }
        measured.push(measure(&launcher, &work, level, args.repeat)?);
    }
    let mut calibration_json = None;
    if args.calibrate {
        let runs: Vec<CalibrationRun> = measured
            .iter()
            .map(|m| CalibrationRun {
                level: m.level,
                time_ns: median(&m.times_ns),
                counts: m.counts,
            })
            .collect();
        let cal = overhead::calibrate(&runs);
        let value = json!({
            "costs_ns": cal.costs_ns,
            "method": "delta calibration over collection levels 0-4 (minimum of repeats)",
            "command": args.command,
            "uninstrumented_s": median(&measured[0].times_ns) / 1e9,
            "runs": measured.iter().map(|m| json!({
                "level": m.level,
                "name": LEVEL_NAMES[m.level as usize],
                "times_s": m.times_ns.iter().map(|t| t / 1e9).collect::<Vec<_>>(),
                "median_s": median(&m.times_ns) / 1e9,
                "counts": m.counts,
            })).collect::<Vec<_>>(),
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
    let code = if args.calibrate && args.repeat > 1 {
        // Validation compares like with like: the recorded run is also the fastest of
        // `repeat` runs (each configuration's time is a minimum over its runs).
        fastest_run(&launcher, &work, &dir, args.level, args.repeat, output)?
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
        let uninstrumented = cj["uninstrumented_s"].as_f64().unwrap_or(0.0) * 1e9;
        if let Some(v) = validation(&raw, c, uninstrumented) {
            cj["validation"] = v.clone();
            write_calibration(&dir, cj)?;
            doc["validation"] = v;
        }
        doc["calibration"] = json!({"costs_ns": c.costs_ns});
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

fn fastest_run(
    launcher: &Launcher<'_>,
    work: &Path,
    dir: &Path,
    level: u64,
    repeat: usize,
    output: Output,
) -> Result<Option<i32>> {
    let mut best: Option<(i64, PathBuf, Option<i32>)> = None;
    for rep in 0..repeat {
        let run_dir = work.join("recorded").join(format!("run-{rep}"));
        let code = launcher.run(
            &run_dir,
            level,
            if rep == 0 { output } else { Output::Null },
        )?;
        let time = load_dir(&run_dir)
            .ok()
            .and_then(|t| root_time_ns(&t))
            .map_or(i64::MAX, |(_, s, e)| e - s);
        if best.as_ref().is_none_or(|b| time < b.0) {
            best = Some((time, run_dir, code));
        }
    }
    let Some((_, best_dir, code)) = best else {
        return Ok(None);
    };
    std::fs::create_dir_all(dir)?;
    for entry in std::fs::read_dir(dir)?.flatten() {
        if entry.path().extension().is_some_and(|e| e == "strato") {
            std::fs::remove_file(entry.path())?;
        }
    }
    for entry in std::fs::read_dir(&best_dir)?.flatten() {
        let p = entry.path();
        if p.extension().is_some_and(|e| e == "strato") {
            if let Some(name) = p.file_name() {
                std::fs::copy(&p, dir.join(name))?;
            }
        }
    }
    Ok(code)
}

fn leveled(launcher: &Launcher<'_>, work: &Path, measured: &[Measured]) -> Result<Value> {
    let _ = launcher;
    let base = measured
        .iter()
        .find(|m| m.level == 0)
        .map_or(0.0, |m| median(&m.times_ns));
    let mut runs = Vec::new();
    let mut prev = base;
    // Level timings from the lowest-overhead run that records them.
    let mut chosen: std::collections::BTreeMap<Level, (u64, i64)> = Default::default();
    for m in measured.iter().filter(|m| m.level != 2) {
        let t = median(&m.times_ns);
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
        let dir = work.join(format!("level-{}", m.level)).join("run-0");
        let trace = load_dir(&dir)?;
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
