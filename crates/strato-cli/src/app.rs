//! The `strato` command: argument parsing and dispatch only. Subcommands are declared in
//! [`Command`] (their help text on the variants) and dispatched in `run` with a
//! [`crate::ctx::Ctx`] built from the global options; each command's handling lives in its own
//! `commands/<name>.rs`; inputs are opened by the context's engine (`strato-engine`), outputs written by
//! [`crate::output`], text rendered by [`crate::render`].
//!
//! Every failure prints one line `strato: PATH: what is wrong` to stderr and exits with code 2;
//! `strato record` exits with the recorded program's status when the program failed
//! ([`crate::commands::record`]).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "strato",
    version,
    about = "stratoscope: where an ML workload's time goes, across every stratum of its stack",
    after_help = "Inputs: trace files (Kineto/PyTorch profiler JSON[.gz], TensorFlow trace viewer \
JSON, *.xplane.pb, Nsight Systems SQLite, Nsight Compute CSV, rocprofv3 JSON, Perfetto *.pftrace), \
directories of per-rank files, or a \
profile directory written by `strato import`.\n\nExamples:\n  strato import traces/ -o prof\n  \
strato info prof\n  strato gpu-time traces/rank-0.json.gz --window hta\n  strato export prof --perfetto prof.pftrace"
)]
struct Cli {
    #[command(flatten)]
    globals: Globals,
    #[command(subcommand)]
    command: Command,
}

/// The options every command takes (before or after its name).
#[derive(clap::Args, Debug)]
struct Globals {
    /// A JSON file of level rules `[{"format":"kineto","category":"cpu_op","level":"Library"}]`
    /// applied over the default category -> level mapping (see docs/levels.md).
    #[arg(long, global = true, value_name = "FILE")]
    level_map: Option<PathBuf>,
    /// CSV outputs: write cells as they are. By default a text cell starting with =, +, -, @,
    /// tab or CR is written as '<cell> so spreadsheets do not run it as a formula.
    #[arg(long, global = true)]
    csv_raw: bool,
    /// Keep secrets (values of TOKEN, KEY, SECRET, PASSWORD, ... variables, keys and flags,
    /// known token shapes like hf_..., passwords in URLs) found in a trace's metadata, names
    /// and event attributes; by default they are redacted in everything strato writes (see
    /// docs/profile-format.md).
    #[arg(long, global = true)]
    keep_secrets: bool,
    /// Import what can be read from a damaged Chrome/Kineto JSON trace (truncated, corrupt
    /// gzip, data after the document, a bad event) instead of failing: the events before the
    /// damage are kept, and a warning says what was lost (see docs/import.md).
    #[arg(long, global = true)]
    salvage: bool,
    /// The trace of the same program profiled while it captured its CUDA/HIP graphs: kernels
    /// the inputs replay through cudaGraphLaunch/hipGraphLaunch are attributed to the ops and
    /// modules that captured them (coverage on stderr; see docs/analyses/graphs.md).
    #[arg(long, global = true, value_name = "FILE")]
    graph_capture: Option<PathBuf>,
    /// How many rank files are imported at once (default: `STRATO_JOBS`, else all cores).
    /// Results never depend on it (see docs/scale.md).
    #[arg(long, global = true, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    jobs: Option<u64>,
}

impl Globals {
    /// The command context these options build.
    fn ctx(&self) -> crate::ctx::Ctx {
        crate::ctx::Ctx::new(
            strato_engine::OpenOptions {
                level_map: self.level_map.clone(),
                graph_capture: self.graph_capture.clone(),
                salvage: self.salvage,
                keep_secrets: self.keep_secrets,
                jobs: self.jobs.map(|n| n as usize),
            },
            self.csv_raw,
        )
    }
}

/// The whole command line: [`Cli`]'s subcommands and one per registered analysis
/// ([`crate::commands::registered`]).
fn command() -> clap::Command {
    let mut command = <Cli as clap::CommandFactory>::command();
    for registration in crate::commands::registered::Registration::all() {
        command = command.subcommand(crate::commands::registered::command(registration));
    }
    command
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Import traces into a profile directory (Parquet tables + metadata.json).
    #[command(
        after_help = "Example:\n  strato import ../shared/data/kineto/hta_trace_filter -o prof"
    )]
    Import(crate::commands::import::ImportArgs),
    /// Export a trace for timeline viewers.
    #[command(
        after_help = "Examples:\n  strato export prof --perfetto out.pftrace   (open in ui.perfetto.dev)\n  \
strato export trace.json.gz --perfetto out.pftrace --iterations\n  \
strato export trace.json.gz --chrome out.json"
    )]
    Export(crate::commands::export::ExportArgs),
    /// An interactive timeline in the browser: a local web server (loopback, per-run token)
    /// streaming level of detail from the trace in memory; prints the URL to open (see
    /// docs/view.md).
    #[command(after_help = "Examples:\n  strato view trace.json.gz\n  \
strato view ranks_dir/ --port 8765 --open\n  strato view prof/ --bind 0.0.0.0")]
    View(crate::commands::view::ViewArgs),
    /// Measure auto-tuning candidates in parallel, accurately (DOPpler): warm workers, device
    /// timing, calibrator, REACT parallelism, rank selection (see docs/measure.md).
    #[command(after_help = "Examples:\n  strato measure candidates.json\n  \
strato measure --compare-serial --example opencl-matmul --json\n  \
strato measure --example opencl-matmul --write-candidates mm.json")]
    Measure(crate::commands::measure::MeasureArgs),
    /// SQL over the profile's tables (spans, tracks, ranks, counters, flows, ...) and the
    /// analyses' views (kernels, device_events) on an embedded DataFusion; the shipped
    /// cross-rank analyses (--analysis). Schema: docs/sql.md.
    #[command(
        after_help = "Examples:\n  strato sql \"SELECT rank, COUNT(*) FROM kernels GROUP BY rank\" ranks_dir/\n  \
strato sql \"SELECT name, SUM(end_ns - start_ns) AS ns FROM kernels GROUP BY name ORDER BY ns DESC LIMIT 5\" trace.json.gz --format json\n  \
strato sql --analysis gpu_busy prof/ --format csv\n  strato sql --show gpu_busy > gpu_busy.sql"
    )]
    #[cfg(feature = "sql")]
    Sql(crate::commands::sql::SqlArgs),
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
    Validate(crate::commands::validate::ValidateArgs),
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
    /// Print shell completions (bash, zsh, fish, elvish, powershell) to stdout.
    #[command(
        after_help = "Examples:\n  strato completions bash > ~/.local/share/bash-completion/completions/strato\n  \
strato completions zsh > ~/.zfunc/_strato\n  strato completions fish > ~/.config/fish/completions/strato.fish"
    )]
    Completions(crate::commands::completions::CompletionsArgs),
}

/// Runs `strato` with the process's arguments.
pub fn main() -> ExitCode {
    ExitCode::from(main_with_args(std::env::args_os()))
}

/// Runs `strato` with `args` (the first is the program name), as the binary and the Python
/// package's `strato` entry point do; returns the exit status: 0, 2 for any failure of
/// strato's own, or, for `strato record`, the recorded program's status when it failed (see
/// [`crate::launch::ProgramStatus::shell_code`]).
pub fn main_with_args<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    if args.get(1).is_some_and(|a| a == crate::gate::GATE_ARG) {
        return crate::gate::exec_when_ready(&args[2..]);
    }
    let mut command_name = String::from("strato");
    let parsed = command().try_get_matches_from(args).and_then(|matches| {
        // A registered analysis: its own subcommand's matches and the global options.
        if let Some((name, sub)) = matches.subcommand() {
            command_name = format!("strato {name}");
            if let Some(registration) = crate::commands::registered::Registration::find(name) {
                let globals = <Globals as clap::FromArgMatches>::from_arg_matches(&matches)?;
                return Ok(Parsed::Registered(registration, globals, sub.clone()));
            }
        }
        Ok(Parsed::Builtin(
            <Cli as clap::FromArgMatches>::from_arg_matches(&matches)?,
        ))
    });
    let parsed = match parsed {
        Ok(parsed) => parsed,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    // From here on every heap byte counts against the memory budget. An invalid
    // `STRATO_MEMORY_BUDGET` arms nothing: the command's own read of it reports the error.
    if let Ok(budget) = strato_io::budget::memory_budget_from_env() {
        crate::process_budget::arm(budget, &command_name);
    }
    let result = match parsed {
        Parsed::Builtin(cli) => run(cli),
        Parsed::Registered(analysis, globals, matches) => {
            run_registered(analysis, &globals, &matches)
        }
    };
    match result {
        Ok(status) => status,
        Err(error) => {
            if let Some(failed) = error.downcast_ref::<crate::launch::ProgramFailed>() {
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

/// What the command line asks for.
enum Parsed {
    Builtin(Cli),
    Registered(
        crate::commands::registered::Registration,
        Globals,
        clap::ArgMatches,
    ),
}

/// Runs a registered analysis's subcommand.
fn run_registered(
    analysis: crate::commands::registered::Registration,
    globals: &Globals,
    matches: &clap::ArgMatches,
) -> Result<u8> {
    let ctx = globals.ctx();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    crate::commands::registered::run(analysis, matches, &ctx, &mut out)?;
    out.flush()?;
    Ok(0)
}

/// Runs one command; returns the exit status (non-zero only for `strato record` of a failed
/// program).
fn run(cli: Cli) -> Result<u8> {
    let ctx = cli.globals.ctx();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut status = 0;
    match cli.command {
        Command::Import(args) => crate::commands::import::run(args, &ctx, &mut out)?,
        Command::Measure(args) => crate::commands::measure::run(args, &ctx, &mut out)?,
        #[cfg(feature = "sql")]
        Command::Sql(args) => crate::commands::sql::run(args, &ctx, &mut out)?,
        Command::Record(args) => {
            status = crate::commands::record::run_record(args, &ctx, &mut out)?
        }
        Command::Validate(args) => crate::commands::validate::run(args, &ctx, &mut out)?,
        Command::Overhead(args) => crate::commands::overhead::run(args, &ctx, &mut out)?,
        Command::Report(args) => crate::commands::report::run(args, &ctx, &mut out)?,
        Command::Completions(args) => {
            crate::commands::completions::completions(args, &mut command(), &mut out)?
        }
        Command::Export(args) => crate::commands::export::run(args, &ctx, &mut out)?,
        Command::View(args) => crate::commands::view::run(args, &ctx, &mut out)?,
    }
    out.flush()?;
    Ok(status)
}
