//! `strato record` (issue 4): run an unmodified Python program with
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
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result};
use serde_json::{json, Value};
use strato_analysis::cross_stack::breakdown::{self, BreakdownOptions};

use strato_analysis::recording::calibration::{self, robust, RecordingInfo, LEVEL_NAMES};
use strato_trace::Level;

use crate::calibration_runs::{device_tracing, fit_runs, Measured, RunResult, Sampling};
use crate::launch::{bootstrap_dir, ProgramFailed, ProgramStatus};

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
    /// Also record the OS level of the program's process tree through perf events: thread
    /// states (running, runnable, blocked by cause), wakeups, migrations, slow system calls,
    /// page faults (docs/recording.md). When perf events are not permitted, one message says
    /// what to change and the recording goes on without this level.
    /// With `--calibrate`, the OS level's own book-keeping (each traced system call and switch
    /// in the program's threads) is calibrated and corrected like the other levels', with one
    /// more configuration (annotations + OS level); the collector thread's CPU time is reported.
    #[arg(long)]
    pub os: bool,
    /// Also sample the CPU with stacks (issue 19): native stacks of the process tree through
    /// perf events at HZ samples per CPU-second (default 99; `--sample=999` for more), joined
    /// with the Python stack the program's recorder samples (docs/recording.md); flame graphs
    /// per operation in the report, `strato export --folded/--firefox`. When perf events are
    /// not permitted, one message says what to change and the recording goes on without.
    /// With `--calibrate`, what the samples cost the sampled threads (each native sample, each
    /// Python-stack sample) is calibrated and corrected like the other levels' book-keeping,
    /// with two more configurations (annotations + samples, annotations + native samples);
    /// with `--levels`, the leveled runs are made without sampling.
    #[arg(long, value_name = "HZ", num_args = 0..=1, require_equals = true,
          default_missing_value = "99")]
    pub sample: Option<u64>,
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

#[derive(Debug, Clone, Copy, PartialEq)]
enum Output {
    Inherit,
    ToStderr,
    Null,
}

struct Launcher<'a> {
    args: &'a RecordArgs,
    /// Reads each run's recording back.
    engine: &'a strato_engine::Engine,
    /// The recorder's Python bootstrap (put first on `PYTHONPATH`); None when the stratoscope
    /// package is not importable and only the launcher's collectors record ([`bootstrap`]).
    bootstrap: Option<PathBuf>,
}

impl Launcher<'_> {
    /// Whether the OpenCL layer traces device commands in a run at `level` with layer level
    /// `opencl` (the recorder's level 0 turns the layer off).
    fn device_tracing(&self, level: u64, opencl: Option<&str>) -> bool {
        device_tracing(self.args.opencl, level, opencl)
    }

    /// Runs the command once at `level` into `dir` (its *.strato files removed first); with
    /// `--opencl`, `opencl` sets the layer's level (None: `STRATOSCOPE_OPENCL` or full); with
    /// `record_os`, the OS level too; with `sample`, CPU samples at `--sample`'s rate (the
    /// collectors' summary lines printed unless `output` is Null: the calibration runs).
    fn run(
        &self,
        dir: &Path,
        level: u64,
        opencl: Option<&str>,
        output: Output,
        record_os: bool,
        sample: Option<Sampling>,
    ) -> Result<ProgramStatus> {
        let hz = sample.and(self.args.sample);
        std::fs::create_dir_all(dir)
            .with_context(|| format!("{}: cannot create", dir.display()))?;
        for entry in std::fs::read_dir(dir)?.flatten() {
            let p = entry.path();
            if p.extension().is_some_and(|e| e == "strato") {
                std::fs::remove_file(&p)?;
            }
        }
        let dir = std::fs::canonicalize(dir)?;
        // The launcher's collectors attach before the program's first instruction.
        let (mut cmd, mut gate) = if record_os || hz.is_some() {
            let (cmd, gate) = crate::gate::Gate::command(&self.args.command)?;
            (cmd, Some(gate))
        } else {
            let mut cmd = Command::new(&self.args.command[0]);
            cmd.args(&self.args.command[1..]);
            (cmd, None)
        };
        cmd.env("STRATOSCOPE_OUT", &dir)
            .env("STRATOSCOPE_LEVEL", level.to_string());
        if let Some(bootstrap) = &self.bootstrap {
            let mut pythonpath = bootstrap.as_os_str().to_owned();
            if let Some(old) = std::env::var_os("PYTHONPATH").filter(|p| !p.is_empty()) {
                pythonpath.push(":");
                pythonpath.push(old);
            }
            cmd.env("PYTHONPATH", pythonpath);
        }
        if let (Some(hz), Some(Sampling::NativeAndPython)) = (hz, sample) {
            cmd.env(
                crate::commands::record_sample::ENV_SAMPLE_HZ,
                hz.to_string(),
            );
        }
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
        let mut child = cmd
            .spawn()
            .with_context(|| format!("record: cannot run {:?}", self.args.command[0]))?;
        if let Some(gate) = &mut gate {
            gate.spawned();
        }
        let os = record_os
            .then(|| start_os(&dir, child.id(), level))
            .flatten();
        let sampler =
            hz.and_then(|hz| crate::commands::record_sample::start(&dir, child.id(), hz, level));
        if let Some(gate) = gate {
            gate.open();
        }
        let status = child
            .wait()
            .with_context(|| format!("record: waiting for {:?}", self.args.command[0]))?;
        drop(shell_signals);
        if let Some(sampler) = sampler {
            crate::commands::record_sample::stop(sampler, output != Output::Null);
        }
        if let Some(os) = os {
            let s = os.stop();
            if output == Output::Null {
                return Ok(ProgramStatus::of(status));
            }
            eprintln!(
                "strato record --os: {} processes, {} threads: {} context switches, {} wakeups, {} migrations, {} system calls ({} slow), {} thread-state spans; collector CPU {:.1} ms; the program's threads runnable behind strato's collectors {:.1} ms{}",
                s.processes,
                s.threads,
                s.switches,
                s.wakeups,
                s.migrations,
                s.syscalls,
                s.slow_syscalls,
                s.state_spans,
                s.collector_cpu_ns as f64 / 1e6,
                s.collector_wait_ns as f64 / 1e6,
                if s.lost > 0 {
                    format!("; {} kernel records LOST (ring buffers full): some states are missing", s.lost)
                } else {
                    String::new()
                }
            );
            if s.throttled > 0 {
                eprintln!(
                    "strato record --os: the kernel throttled the OS events {} times, {:.1} ms in all (more than kernel.perf_event_max_sample_rate a second): some system calls and states are missing (strato info lists it)",
                    s.throttled,
                    s.throttled_ns as f64 / 1e6
                );
            }
        }
        Ok(ProgramStatus::of(status))
    }
}

fn run_once(
    launcher: &Launcher<'_>,
    dir: &Path,
    level: u64,
    opencl: Option<&str>,
    output: Output,
    record_os: bool,
    sample: Option<Sampling>,
) -> Result<RunResult> {
    let status = launcher.run(dir, level, opencl, output, record_os, sample)?;
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
    let trace = launcher.engine.load_recording(dir)?;
    let measure = calibration::measure_run(&trace, launcher.device_tracing(level, opencl))
        .with_context(|| format!("{}: no recorded process", dir.display()))?;
    Ok(RunResult {
        dir: dir.to_owned(),
        measure,
    })
}

/// The recorder's Python bootstrap for `args`' program. Without the stratoscope package, a
/// program that is not a Python interpreter is still recorded by the launcher's own collectors
/// when it asks for one (`--os`, `--sample`; not with `--calibrate` / `--levels`, whose levels
/// are the recorder's): one message says its Python processes are not; otherwise the missing
/// package is the error.
fn bootstrap(args: &RecordArgs) -> Result<Option<PathBuf>> {
    match bootstrap_dir(&args.command) {
        Ok(dir) => Ok(Some(dir)),
        Err(e)
            if !crate::launch::is_python(&args.command)
                && (args.os || args.sample.is_some())
                && !args.calibrate
                && !args.levels =>
        {
            eprintln!("strato {e:#}: Python processes the program starts are not recorded; the OS level and CPU samples are");
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Runs `strato record`; returns the exit status for `strato`: 0, or the recorded program's
/// [`ProgramStatus::shell_code`] when it failed (after writing what was recorded). A failed
/// calibration or leveled run is an error carrying its status ([`ProgramFailed`]).
pub fn run_record(args: RecordArgs, ctx: &crate::ctx::Ctx, out: &mut impl Write) -> Result<u8> {
    let launcher = Launcher {
        bootstrap: bootstrap(&args)?,
        args: &args,
        engine: &ctx.engine,
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
        os: false,
        sample: None,
        runs: Vec::new(),
    }));
    // The recorded run's (and the held-out runs') sampling: both samplers.
    let recorded_sample = args.sample.map(|_| Sampling::NativeAndPython);
    if args.calibrate && args.sample.is_some() {
        // The samples' book-keeping: annotations with both samplers, and with native samples
        // only (the two kinds' counts move together within a run, so the fit needs a
        // configuration that has one without the other).
        let at = measured
            .iter()
            .position(|m| m.level == 1)
            .map_or(0, |i| i + 1);
        for sample in [Sampling::Native, Sampling::NativeAndPython] {
            measured.insert(
                at,
                Measured {
                    level: 1,
                    opencl: None,
                    os: false,
                    sample: Some(sample),
                    runs: Vec::new(),
                },
            );
        }
    }
    if args.calibrate && args.os {
        // The OS level's book-keeping: annotations with the OS level on, beside annotations
        // without it (the held-out runs record it too, as the profile does).
        let at = measured
            .iter()
            .position(|m| m.level == 1)
            .map_or(0, |i| i + 1);
        measured.insert(
            at,
            Measured {
                level: 1,
                opencl: None,
                os: true,
                sample: None,
                runs: Vec::new(),
            },
        );
    }
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
                    os: false,
                    sample: None,
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
            let d = work.join(m.dir_name()).join(format!("run-{rep}"));
            m.runs.push(run_once(
                &launcher,
                &d,
                m.level,
                m.opencl,
                Output::Null,
                m.os,
                m.sample,
            )?);
        }
        if args.calibrate {
            let d = work.join("recorded").join(format!("run-{rep}"));
            held_out.push(run_once(
                &launcher,
                &d,
                args.level,
                None,
                Output::Null,
                args.os,
                recorded_sample,
            )?);
        }
    }
    let mut calibration_json = None;
    if args.calibrate {
        let file = fit_runs(
            &ctx.engine,
            &measured,
            &held_out,
            args.level,
            &args.command,
            repeat,
        )?;
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
        Some(launcher.run(&dir, args.level, None, output, args.os, recorded_sample)?)
            .filter(|s| !s.success())
    };
    if let Some(status) = failed {
        eprintln!(
            "strato record: the program ended with {}; loading what was recorded (strato exits with {})",
            status.describe(),
            status.shell_code()
        );
    }
    let profile = match ctx.engine.open_recording(&dir, !args.no_correct) {
        Ok(profile) => profile,
        // The program's failure is the news; that it recorded nothing comes with it.
        Err(e) => match failed {
            Some(status) => {
                eprintln!("strato: {e:#}");
                return Ok(status.shell_code());
            }
            None => return Err(e.into()),
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
    if let (Some(_), Some(cj)) = (&cal, &mut calibration_json) {
        if let Some((pid, _, _)) = profile.recording.root_region() {
            cj.validation.pid = pid;
            cj.write(&dir)?;
        }
        doc["validation"] = serde_json::to_value(&cj.validation)?;
        // The fitted figures as fitted (those the profile loaded back went through a JSON
        // parse, which may move a float by an ulp): the same numbers as `os` / `sample` below
        // and as calibration.json.
        doc["calibration"] = json!({"costs_ns": cj.costs_ns, "api_inflation_ns": cj.api_inflation_ns, "repeat": repeat});
        if let Some(os) = &cj.os {
            doc["calibration"]["os"] = serde_json::to_value(os)?;
        }
        if let Some(sample) = &cj.sample {
            doc["calibration"]["sample"] = serde_json::to_value(sample)?;
        }
    }
    if args.levels {
        doc["levels"] = leveled(&launcher, &work, &measured)?;
    }
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &doc)?;
        writeln!(out)?;
    } else {
        crate::render::record::print_text(out, &report, &doc, args.top)?;
    }
    Ok(failed.map_or(0, ProgramStatus::shell_code))
}

/// Starts the OS-level recorder on `pid`; when perf events cannot be opened, says why once and
/// returns None (the recording goes on without the OS level).
fn start_os(dir: &Path, pid: u32, level: u64) -> Option<strato_record::os::OsRecorder> {
    let mut options = strato_record::os::OsOptions::new(dir.to_owned(), pid as i32);
    options.level = level;
    match strato_record::os::OsRecorder::start(options) {
        Ok(r) => Some(r),
        Err(e) => {
            eprintln!("strato record --os: {e}; recording goes on without the OS level");
            None
        }
    }
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
        .filter(|m| m.level != 2 && m.opencl.is_none() && !m.os && m.sample.is_none())
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
        let trace = launcher.engine.load_recording(&m.runs[0].dir)?;
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
