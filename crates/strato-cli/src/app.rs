//! The `strato` command: argument parsing and wiring only. Loading lives in `strato-io` /
//! `strato-store`, analyses in `strato-analysis`, text rendering in [`crate::present`].
//! Subcommands are declared in [`Command`] and dispatched in `run`; a command's handling and
//! rendering live in their own `cmd_<name>.rs` module.
//!
//! Every failure prints one line `strato: PATH: what is wrong` to stderr and exits with code 2.

use crate::present;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use strato_analysis::gpu_time::{GpuTimeOptions, Window};
use strato_io::ImportOptions;
use strato_trace::{LevelMap, LevelRule, Trace};

#[derive(Parser, Debug)]
#[command(
    name = "strato",
    version,
    about = "stratoscope: where an ML workload's time goes, across every stratum of its stack",
    after_help = "Inputs: trace files (Kineto/PyTorch profiler JSON[.gz], TensorFlow trace viewer \
JSON, *.xplane.pb, Nsight Systems SQLite, Nsight Compute CSV), directories of per-rank files, or a \
profile directory written by `strato import`.\n\nExamples:\n  strato import traces/ -o prof\n  \
strato info prof\n  strato gpu-time traces/rank-0.json.gz --window hta\n  strato export prof --perfetto prof.pftrace"
)]
struct Cli {
    /// A JSON file of level rules `[{"format":"kineto","category":"cpu_op","level":"Library"}]`
    /// applied over the default category -> level mapping (see docs/levels.md).
    #[arg(long, global = true, value_name = "FILE")]
    level_map: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Cross-stack analyses: breakdown, hierarchy, tree, layers, roofline, util.
    #[command(flatten)]
    CrossStack(crate::cmd_crossstack::CrossStackCommand),
    /// Import traces into a profile directory (Parquet tables + metadata.json).
    #[command(
        after_help = "Example:\n  strato import ../shared/data/kineto/hta_trace_filter -o prof"
    )]
    Import {
        /// Trace files or directories of per-rank files.
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        /// The profile directory to write (replaced atomically if it is already a profile).
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Summarise a trace: formats, time span, events by level and category, processes, devices.
    #[command(after_help = "Example:\n  strato info trace.json.gz --json")]
    Info {
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Device temporal breakdown per rank (idle / compute / non-compute, comm-comp overlap)
    /// and per-stream idle breakdown (host wait / kernel wait / other).
    #[command(
        name = "gpu-time",
        after_help = "Windows:\n  whole  every device event, exact nanoseconds (default)\n  hta    \
Holistic Trace Analysis's window (CPU events before the last ProfilerStep, device events \
correlated to them) and whole-microsecond rounding\n\nExample:\n  strato gpu-time traces/ --window hta --json"
    )]
    GpuTime {
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        #[arg(long, value_enum, default_value_t = WindowArg::Whole)]
        window: WindowArg,
        /// Gaps shorter than this (us) count as kernel wait.
        #[arg(long, default_value_t = 30.0)]
        kernel_wait_us: f64,
        #[arg(long)]
        json: bool,
    },
    /// Export a trace for timeline viewers.
    #[command(
        after_help = "Examples:\n  strato export prof --perfetto out.pftrace   (open in ui.perfetto.dev)\n  \
strato export trace.json.gz --perfetto out.pftrace --iterations\n  \
strato export trace.json.gz --chrome out.json"
    )]
    Export {
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        /// Write Perfetto protobuf (TrackEvent) here.
        #[arg(long, value_name = "OUT")]
        perfetto: Option<PathBuf>,
        /// Write Chrome-trace JSON here.
        #[arg(long, value_name = "OUT")]
        chrome: Option<PathBuf>,
        /// Perfetto: the trace only, without what the analyses add (per-stratum thread
        /// tracks, device busy counters, iterations; see docs/export.md).
        #[arg(long)]
        raw: bool,
        /// Perfetto: add the iterations found by `strato iterations` as a track of slices
        /// under each device.
        #[arg(long, conflicts_with = "raw")]
        iterations: bool,
    },
    /// Measure auto-tuning candidates in parallel, accurately (DOPpler): warm workers, device
    /// timing, calibrator, REACT parallelism, rank selection (see docs/measure.md).
    #[command(after_help = "Examples:\n  strato measure candidates.json\n  \
strato measure --compare-serial --example opencl-matmul --json\n  \
strato measure --example opencl-matmul --write-candidates mm.json")]
    Measure(crate::cmd_measure::MeasureArgs),
    /// Find training/inference iterations from device activity alone (DeepProf pattern mining):
    /// per-iteration duration, interval, copy overlap, op gap, bytes in; summary and diagnosis.
    #[command(after_help = "Examples:\n  strato iterations trace.json.gz\n  \
strato iterations trace.json.gz -i 100,20 --k0 8 --json\n  \
strato iterations trace.json.gz --check-steps")]
    Iterations(crate::cmd_iterations::IterationsArgs),
    /// Kernel statistics per kernel and per launching op (count, total, mean, std, min, max,
    /// share), launch and queue latencies.
    #[command(after_help = "Examples:\n  strato kernels trace.json.gz --top 15\n  \
strato kernels trace.json.gz --csv > kernels.csv")]
    Kernels(crate::cmd_kernels::KernelsArgs),
    /// Device memory over time (peak, top allocating ops) and host<->device copies.
    #[command(after_help = "Examples:\n  strato memory trace.json.gz\n  \
strato memory trace.json.gz --json")]
    Memory(crate::cmd_memory::MemoryArgs),
    /// Record an unmodified Python program (stratoscope's recorder on) and print its breakdown;
    /// `--calibrate` also calibrates and validates overhead correction, `--levels` runs XSP
    /// leveled experiments (see docs/recording.md).
    #[command(
        after_help = "Examples:\n  strato record -o prof -- python examples/rl_cartpole.py\n  \
strato record --calibrate --json -o prof -- python examples/rl_cartpole.py --steps 2000\n  \
strato record --levels -o prof -- python examples/selfplay.py"
    )]
    Record(crate::cmd_record::RecordArgs),
    /// Report a calibrated profile's corrected time against its uninstrumented run (bias %).
    #[command(after_help = "Example:\n  strato validate prof --json")]
    Validate(crate::cmd_record::ValidateArgs),
    /// Overhead of the OpenCL layer per collection level (baseline, api, device, full): mean and
    /// std over repeated runs of a workload (Zins tables 4.3-4.8; see docs/opencl.md).
    #[command(
        after_help = "Example:\n  strato overhead --runs 10 -- target/release/strato-opencl-demo workload 50"
    )]
    Overhead(crate::cmd_overhead::OverheadArgs),
    /// Write a self-contained HTML report with plots (breakdown, transitions, processes,
    /// utilization, kernels, roofline, iterations, memory; a diff with --baseline).
    #[command(
        after_help = "The report needs no network and no script: open it from file://. See \
docs/report.md.\n\nExamples:\n  strato report trace.json.gz -o report.html\n  \
strato report prof -o report.html --baseline before/ --title \"after the fix\""
    )]
    Report(crate::cmd_report::ReportArgs),
    /// Compare two profiles: per operation, per operation x stratum, per kernel; time and share
    /// in each, absolute and relative change, added and removed.
    #[command(
        after_help = "A is the baseline; negative changes are time saved.\n\nExamples:\n  \
strato diff base.json.gz test.json.gz\n  strato diff before/ after/ --top 30\n  \
strato diff a.json.gz b.json.gz --json > diff.json"
    )]
    Diff(crate::cmd_diff::DiffArgs),
    /// Print shell completions (bash, zsh, fish, elvish, powershell) to stdout.
    #[command(
        after_help = "Examples:\n  strato completions bash > ~/.local/share/bash-completion/completions/strato\n  \
strato completions zsh > ~/.zfunc/_strato\n  strato completions fish > ~/.config/fish/completions/strato.fish"
    )]
    Completions(crate::cmd_report::CompletionsArgs),
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum WindowArg {
    Whole,
    Hta,
}

/// Runs `strato` with the process's arguments.
pub fn main() -> ExitCode {
    main_with_args(std::env::args_os())
}

/// Runs `strato` with `args` (the first is the program name), as the binary and the Python
/// package's `strato` entry point do.
pub fn main_with_args<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // A closed stdout (e.g. `| head`) is not an error worth reporting.
            if error
                .downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
            {
                return ExitCode::SUCCESS;
            }
            let mut message = error.to_string();
            for cause in error.chain().skip(1) {
                let cause = cause.to_string();
                if !message.contains(&cause) {
                    message.push_str(": ");
                    message.push_str(&cause);
                }
            }
            eprintln!("strato: {message}");
            ExitCode::from(2)
        }
    }
}

pub(crate) fn import_options(
    cli_level_map: Option<&Path>,
    keep_args: bool,
) -> Result<ImportOptions> {
    let level_map = match cli_level_map {
        None => LevelMap::default(),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("{}: cannot read level map", path.display()))?;
            let rules: Vec<LevelRule> = serde_json::from_str(&text).with_context(|| {
                format!(
                    "{}: not a list of {{format, category, level}} rules",
                    path.display()
                )
            })?;
            LevelMap::with_overrides(rules).with_context(|| path.display().to_string())?
        }
    };
    Ok(ImportOptions {
        level_map,
        keep_args,
        progress: crate::term::import_progress(),
        ..ImportOptions::default()
    })
}

/// Loads inputs: one profile directory, or trace files / directories of ranks.
pub(crate) fn load(inputs: &[PathBuf], options: &ImportOptions) -> Result<Trace> {
    for input in inputs {
        if !input.exists() {
            bail!("{}: no such file or directory", input.display());
        }
    }
    if inputs.len() == 1 && strato_store::is_profile_dir(&inputs[0]) {
        let read = strato_store::ReadOptions {
            args: options.keep_args,
        };
        return Ok(strato_store::read_with(&inputs[0], &read)?);
    }
    if inputs.iter().any(|p| strato_store::is_profile_dir(p)) {
        bail!("a profile directory must be given alone");
    }
    let trace = strato_io::import_paths(inputs, options);
    crate::term::finish_progress();
    let trace = trace?;
    // Recordings calibrated by `strato record --calibrate` are overhead-corrected first.
    Ok(strato_analysis::overhead::apply_recorded_calibration(trace))
}

/// Writes `out` through a temporary sibling renamed into place only on success, so a failed
/// run never leaves a partial file that looks complete.
pub(crate) fn write_atomically(
    out: &Path,
    write: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> std::io::Result<()>,
) -> Result<()> {
    let file_name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = out.with_file_name(format!(".{file_name}.tmp-{}", std::process::id()));
    let result = (|| -> std::io::Result<()> {
        let file = std::fs::File::create(&tmp)?;
        let mut writer = std::io::BufWriter::with_capacity(1 << 20, file);
        write(&mut writer)?;
        let file = writer.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        std::fs::rename(&tmp, out)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("{}: cannot write", out.display()));
    }
    Ok(())
}

fn run(cli: Cli) -> Result<()> {
    let level_map = cli.level_map.as_deref();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match cli.command {
        Command::CrossStack(command) => crate::cmd_crossstack::run(command, level_map, &mut out)?,
        Command::Import { inputs, output } => {
            let trace = load(&inputs, &import_options(level_map, true)?)?;
            strato_store::write(&trace, &output)?;
            writeln!(
                out,
                "wrote {}: {} ranks, {} spans, {} instants, {} counter samples, {} flows",
                output.display(),
                trace.ranks.len(),
                trace.spans.len(),
                trace.instants.len(),
                trace.counters.len(),
                trace.flows.len()
            )?;
        }
        Command::Info { inputs, json } => {
            let trace = load(&inputs, &import_options(level_map, false)?)?;
            let info = strato_analysis::info::info(&trace);
            if json {
                serde_json::to_writer_pretty(&mut out, &info)?;
                writeln!(out)?;
            } else {
                present::info(&mut out, &info)?;
            }
        }
        Command::GpuTime {
            inputs,
            window,
            kernel_wait_us,
            json,
        } => {
            let trace = load(&inputs, &import_options(level_map, false)?)?;
            let options = GpuTimeOptions {
                window: match window {
                    WindowArg::Whole => Window::Whole,
                    WindowArg::Hta => Window::Hta,
                },
                kernel_wait_threshold_ns: (kernel_wait_us * 1000.0).round() as i64,
            };
            let report = strato_analysis::gpu_time::gpu_time(&trace, &options);
            if json {
                serde_json::to_writer_pretty(&mut out, &present::gpu_time_json(&report))?;
                writeln!(out)?;
            } else {
                present::gpu_time(&mut out, &report)?;
            }
        }
        Command::Measure(args) => crate::cmd_measure::run(args, &mut out)?,
        Command::Iterations(args) => crate::cmd_iterations::run(args, level_map, &mut out)?,
        Command::Kernels(args) => crate::cmd_kernels::run(args, level_map, &mut out)?,
        Command::Memory(args) => crate::cmd_memory::run(args, level_map, &mut out)?,
        Command::Record(args) => crate::cmd_record::run_record(args, &mut out)?,
        Command::Validate(args) => crate::cmd_record::run_validate(args, &mut out)?,
        Command::Overhead(args) => crate::cmd_overhead::run(args, &mut out)?,
        Command::Report(args) => crate::cmd_report::run(args, level_map, &mut out)?,
        Command::Diff(args) => crate::cmd_diff::run(args, level_map, &mut out)?,
        Command::Completions(args) => crate::cmd_report::completions(
            args,
            &mut <Cli as clap::CommandFactory>::command(),
            &mut out,
        )?,
        Command::Export {
            inputs,
            perfetto,
            chrome,
            raw,
            iterations,
        } => {
            if perfetto.is_none() && chrome.is_none() {
                bail!("export: say where to write: --perfetto OUT and/or --chrome OUT");
            }
            let trace = load(&inputs, &import_options(level_map, true)?)?;
            if let Some(path) = perfetto {
                let extras = if raw {
                    strato_io::export::perfetto::Extras::default()
                } else {
                    crate::cmd_report::perfetto_extras(&trace, iterations)
                };
                write_atomically(&path, |w| {
                    strato_io::export::perfetto::write_with(&trace, &extras, w)
                })?;
                writeln!(out, "wrote {}", path.display())?;
            }
            if let Some(path) = chrome {
                write_atomically(&path, |w| strato_io::export::chrome::write(&trace, w))?;
                writeln!(out, "wrote {}", path.display())?;
            }
        }
    }
    out.flush()?;
    Ok(())
}
