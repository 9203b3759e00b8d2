//! The `strato` command: argument parsing and wiring only. Loading lives in `strato-io` /
//! `strato-store`, analyses in `strato-analysis`, text rendering in [`crate::present`].
//! Subcommands are declared in [`Command`] and dispatched in `run`; a command's handling and
//! rendering live in their own `commands/<name>.rs` module; inputs are opened in
//! [`crate::input`].
//!
//! Every failure prints one line `strato: PATH: what is wrong` to stderr and exits with code 2;
//! `strato record` exits with the recorded program's status when the program failed
//! ([`crate::commands::record`]).

use crate::input::{import_options, load, shared_rank_claims};
use crate::present;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand, ValueEnum};
use strato_analysis::gpu_time::{GpuTimeOptions, Window};

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
    /// CSV outputs: write cells as they are. By default a text cell starting with =, +, -, @,
    /// tab or CR is written as '<cell> so spreadsheets do not run it as a formula.
    #[arg(long, global = true)]
    csv_raw: bool,
    /// Keep the values of secret-looking variables (TOKEN, KEY, SECRET, PASSWORD, ... and
    /// passwords in URLs) found in a trace's metadata; by default they are redacted in
    /// everything strato writes (see docs/profile-format.md).
    #[arg(long, global = true)]
    keep_secrets: bool,
    /// Import what can be read from a damaged Chrome/Kineto JSON trace (truncated, corrupt
    /// gzip, data after the document, a bad event) instead of failing: the events before the
    /// damage are kept, and a warning says what was lost (see docs/import.md).
    #[arg(long, global = true)]
    salvage: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Cross-stack analyses: breakdown, hierarchy, tree, layers, roofline, util.
    #[command(flatten)]
    CrossStack(crate::commands::crossstack::CrossStackCommand),
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
    Export(crate::commands::export::ExportArgs),
    /// Measure auto-tuning candidates in parallel, accurately (DOPpler): warm workers, device
    /// timing, calibrator, REACT parallelism, rank selection (see docs/measure.md).
    #[command(after_help = "Examples:\n  strato measure candidates.json\n  \
strato measure --compare-serial --example opencl-matmul --json\n  \
strato measure --example opencl-matmul --write-candidates mm.json")]
    Measure(crate::commands::measure::MeasureArgs),
    /// Find training/inference iterations from device activity alone (DeepProf pattern mining):
    /// per-iteration duration, interval, copy overlap, op gap, bytes in; summary and diagnosis.
    #[command(after_help = "Examples:\n  strato iterations trace.json.gz\n  \
strato iterations trace.json.gz -i 100,20 --k0 8 --json\n  \
strato iterations trace.json.gz --check-steps")]
    Iterations(crate::commands::iterations::IterationsArgs),
    /// Kernel statistics per kernel and per launching op (count, total, mean, std, min, max,
    /// share), launch and queue latencies.
    #[command(after_help = "Examples:\n  strato kernels trace.json.gz --top 15\n  \
strato kernels trace.json.gz --csv > kernels.csv")]
    Kernels(crate::commands::kernels::KernelsArgs),
    /// Device memory over time (peak, top allocating ops) and host<->device copies.
    #[command(after_help = "Examples:\n  strato memory trace.json.gz\n  \
strato memory trace.json.gz --json")]
    Memory(crate::commands::memory::MemoryArgs),
    /// Record an unmodified Python program (stratoscope's recorder on) and print its breakdown;
    /// `--calibrate` also calibrates and validates overhead correction, `--levels` runs XSP
    /// leveled experiments (see docs/recording.md).
    #[command(
        after_help = "Examples:\n  strato record -o prof -- python examples/rl_cartpole.py\n  \
strato record --calibrate --json -o prof -- python examples/rl_cartpole.py --steps 2000\n  \
strato record --levels -o prof -- python examples/selfplay.py"
    )]
    Record(crate::commands::record::RecordArgs),
    /// Report a calibrated profile's corrected time against its uninstrumented run (bias %).
    #[command(after_help = "Example:\n  strato validate prof --json")]
    Validate(crate::commands::record::ValidateArgs),
    /// Overhead of the OpenCL layer per collection level (baseline, api, device, full): mean and
    /// std over repeated runs of a workload (Zins tables 4.3-4.8; see docs/opencl.md).
    #[command(
        after_help = "Example:\n  strato overhead --runs 10 -- target/release/strato-opencl-demo workload 50"
    )]
    Overhead(crate::commands::overhead::OverheadArgs),
    /// Write a self-contained HTML report with plots (breakdown, transitions, processes,
    /// utilization, kernels, roofline, iterations, memory; a diff with --baseline).
    #[command(
        after_help = "The report needs no network and no script: open it from file://. See \
docs/report.md.\n\nExamples:\n  strato report trace.json.gz -o report.html\n  \
strato report prof -o report.html --baseline before/ --title \"after the fix\""
    )]
    Report(crate::commands::report::ReportArgs),
    /// Compare two profiles: per operation, per operation x stratum, per kernel; time and share
    /// in each, absolute and relative change, added and removed.
    #[command(
        after_help = "A is the baseline; negative changes are time saved.\n\nExamples:\n  \
strato diff base.json.gz test.json.gz\n  strato diff before/ after/ --top 30\n  \
strato diff a.json.gz b.json.gz --json > diff.json"
    )]
    Diff(crate::commands::diff::DiffArgs),
    /// Print shell completions (bash, zsh, fish, elvish, powershell) to stdout.
    #[command(
        after_help = "Examples:\n  strato completions bash > ~/.local/share/bash-completion/completions/strato\n  \
strato completions zsh > ~/.zfunc/_strato\n  strato completions fish > ~/.config/fish/completions/strato.fish"
    )]
    Completions(crate::commands::completions::CompletionsArgs),
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum WindowArg {
    Whole,
    Hta,
}

/// Runs `strato` with the process's arguments.
pub fn main() -> ExitCode {
    ExitCode::from(main_with_args(std::env::args_os()))
}

/// Runs `strato` with `args` (the first is the program name), as the binary and the Python
/// package's `strato` entry point do; returns the exit status: 0, 2 for any failure of
/// strato's own, or, for `strato record`, the recorded program's status when it failed (see
/// [`crate::commands::record::ProgramStatus::shell_code`]).
pub fn main_with_args<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    match run(cli) {
        Ok(status) => status,
        Err(error) => {
            if let Some(failed) = error.downcast_ref::<crate::commands::record::ProgramFailed>() {
                eprintln!("strato: {failed}");
                return failed.code;
            }
            // A closed stdout (e.g. `| head`) is not an error worth reporting.
            if error
                .downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
            {
                return 0;
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
            2
        }
    }
}

/// Runs one command; returns the exit status (non-zero only for `strato record` of a failed
/// program).
fn run(cli: Cli) -> Result<u8> {
    crate::input::SALVAGE.store(cli.salvage, std::sync::atomic::Ordering::Relaxed);
    let level_map = cli.level_map.as_deref();
    crate::table::set_csv_raw(cli.csv_raw);
    crate::input::KEEP_SECRETS.store(cli.keep_secrets, std::sync::atomic::Ordering::Relaxed);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut status = 0;
    match cli.command {
        Command::CrossStack(command) => {
            crate::commands::crossstack::run(command, level_map, &mut out)?
        }
        Command::Import { inputs, output } => {
            let trace = load(&inputs, &import_options(level_map, true)?)?;
            let redacted = strato_io::redact::redacted_names(&trace);
            if !redacted.is_empty() {
                eprintln!(
                    "strato: note: redacted secret-looking values in the sources' metadata: {} \
                     (--keep-secrets keeps them)",
                    redacted.join(", ")
                );
            }
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
            let redacted = strato_io::redact::redacted_names(&trace);
            let shared_ranks = shared_rank_claims(&trace);
            if json {
                let mut value = serde_json::to_value(&info)?;
                value["redacted"] = serde_json::json!(redacted);
                value["shared_rank_claims"] = serde_json::json!(shared_ranks
                    .iter()
                    .map(|(rank, sources)| serde_json::json!({"rank": rank, "sources": sources}))
                    .collect::<Vec<_>>());
                serde_json::to_writer_pretty(&mut out, &value)?;
                writeln!(out)?;
            } else {
                present::info(&mut out, &info)?;
                for (rank, sources) in &shared_ranks {
                    writeln!(
                        out,
                        "note     {} sources claim rank {rank} ({}): kept apart as separate sources",
                        sources.len(),
                        sources.join(", ")
                    )?;
                }
                if !redacted.is_empty() {
                    writeln!(
                        out,
                        "redacted {} (secret-looking values in the sources' metadata; \
                         --keep-secrets keeps them)",
                        redacted.join(", ")
                    )?;
                }
            }
        }
        Command::GpuTime {
            inputs,
            window,
            kernel_wait_us,
            json,
        } => {
            // Only what the device time breakdown reads is kept (device spans, launches, steps).
            let import = strato_io::ImportOptions {
                projection: strato_io::Projection::DEVICE_TIME,
                ..import_options(level_map, false)?
            };
            let trace = load(&inputs, &import)?;
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
        Command::Measure(args) => crate::commands::measure::run(args, &mut out)?,
        Command::Iterations(args) => crate::commands::iterations::run(args, level_map, &mut out)?,
        Command::Kernels(args) => crate::commands::kernels::run(args, level_map, &mut out)?,
        Command::Memory(args) => crate::commands::memory::run(args, level_map, &mut out)?,
        Command::Record(args) => status = crate::commands::record::run_record(args, &mut out)?,
        Command::Validate(args) => crate::commands::record::run_validate(args, &mut out)?,
        Command::Overhead(args) => crate::commands::overhead::run(args, &mut out)?,
        Command::Report(args) => crate::commands::report::run(args, level_map, &mut out)?,
        Command::Diff(args) => crate::commands::diff::run(args, level_map, &mut out)?,
        Command::Completions(args) => crate::commands::completions::completions(
            args,
            &mut <Cli as clap::CommandFactory>::command(),
            &mut out,
        )?,
        Command::Export(args) => crate::commands::export::run(args, level_map, &mut out)?,
    }
    out.flush()?;
    Ok(status)
}
