//! `strato measure`: parallel, accurate measurement of auto-tuning candidates (the
//! `strato-measure` engine). Modes: measure a candidate list (or a built-in workload) with the
//! calibrated engine; `--compare-serial` against the conventional serial harness; `--serve` a
//! JSON-lines server for tuners (the Python API); `--worker`, the worker process itself.

use std::io::{BufRead, Write};
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use strato_measure::calibrate::Params;
use strato_measure::candidate::{self, Candidate};
use strato_measure::compare::{self, CompareConfig};
use strato_measure::engine::{Engine, EngineConfig, Parallelism, Statistic};
use strato_measure::serve::{ServeReply, ServeRequest};
use strato_measure::WorkerSpec;

/// Arguments of `strato measure`.
#[derive(Args, Debug)]
pub(crate) struct MeasureArgs {
    /// Candidate list file (JSON, see docs/measure.md).
    candidates: Option<PathBuf>,
    /// Use a built-in workload instead of a file: opencl-matmul.
    #[arg(long, value_name = "NAME")]
    example: Option<String>,
    /// Problem size of the built-in workload (N for an N x N matmul).
    #[arg(long, default_value_t = 128)]
    size: usize,
    /// Write the candidate list of --example to FILE and exit.
    #[arg(long, value_name = "FILE")]
    write_candidates: Option<PathBuf>,
    /// Compare with the conventional serial harness (fresh process per candidate, CPU
    /// timestamps) and with the engine pinned to parallelism 1.
    #[arg(long)]
    compare_serial: bool,
    /// With --compare-serial: skip the engine pinned to parallelism 1.
    #[arg(long)]
    no_pinned: bool,
    /// With --compare-serial: static timeout of the serial harness (s).
    #[arg(long, default_value_t = 3.0)]
    serial_timeout: f64,
    /// With --compare-serial: most interleaved passes measuring the truth (every candidate a
    /// method ranked within 20% of its best, until each 95% interval is within 1%).
    #[arg(long, default_value_t = 20)]
    verify_passes: usize,
    /// With --compare-serial: run the whole comparison N times; the JSON's headline figures
    /// are then medians, with every run in "runs" and the worst gaps.
    #[arg(long, default_value_t = 1, value_name = "N")]
    runs: usize,
    /// Parallelism: `auto` (REACT) or a fixed number.
    #[arg(long, default_value = "auto")]
    parallelism: String,
    /// Statistic of the timed runs used as latency: median (default), mean (the paper's), min.
    #[arg(long, default_value = "median")]
    statistic: String,
    /// Timed runs per measurement.
    #[arg(long, default_value_t = 10)]
    repeats: u32,
    /// Untimed runs before them.
    #[arg(long, default_value_t = 1)]
    warmup: u32,
    /// Calibrator parameters as JSON, e.g. '{"tau":0.1,"max_dp":4}' (see docs/measure.md).
    #[arg(long, value_name = "JSON")]
    params: Option<String>,
    /// Worker command (default: `strato-measure-worker` next to this program, else this program
    /// in `measure --worker` mode).
    #[arg(long, value_name = "CMD")]
    worker_cmd: Option<String>,
    /// Let timed runs of different workers overlap (naive parallel measurement); by default
    /// they are serialised as a GPU serialises kernels of different processes.
    #[arg(long)]
    no_device_lock: bool,
    /// Keep PoCL's kernel cache (default: POCL_KERNEL_CACHE=0 for honest compile times).
    #[arg(long)]
    pocl_cache: bool,
    /// Stream every decision as JSON lines to FILE.
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Serve JSON-lines requests on stdin (used by the Python API).
    #[arg(long)]
    serve: bool,
    /// Run as a measurement worker (framed protocol on stdin/stdout).
    #[arg(long, hide = true)]
    worker: bool,
}

fn worker_command(args: &MeasureArgs) -> Result<Vec<String>> {
    if let Some(cmd) = &args.worker_cmd {
        let parts: Vec<String> = cmd.split_whitespace().map(String::from).collect();
        if parts.is_empty() {
            bail!("--worker-cmd is empty");
        }
        return Ok(parts);
    }
    if let Ok(cmd) = std::env::var("STRATO_MEASURE_WORKER") {
        let parts: Vec<String> = cmd.split_whitespace().map(String::from).collect();
        if !parts.is_empty() {
            return Ok(parts);
        }
    }
    let exe = std::env::current_exe().context("cannot find this program to start workers")?;
    // The worker binary next to us: in the wheel (`stratoscope/_bin/`) and in a cargo target
    // dir after `cargo build` (the whole workspace).
    let sibling = exe.with_file_name("strato-measure-worker");
    if sibling.is_file() {
        return Ok(vec![sibling.to_string_lossy().into_owned()]);
    }
    let name = exe
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if name.starts_with("strato") {
        return Ok(vec![
            exe.to_string_lossy().into_owned(),
            "measure".into(),
            "--worker".into(),
        ]);
    }
    // Embedded (e.g. in Python): look for a worker next to us or on PATH.
    for dir in std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
    {
        let w = dir.join("strato-measure-worker");
        if w.is_file() {
            return Ok(vec![w.to_string_lossy().into_owned()]);
        }
        let s = dir.join("strato");
        if s.is_file() {
            return Ok(vec![
                s.to_string_lossy().into_owned(),
                "measure".into(),
                "--worker".into(),
            ]);
        }
    }
    bail!("no worker program: set STRATO_MEASURE_WORKER or pass --worker-cmd")
}

fn engine_config(args: &MeasureArgs) -> Result<EngineConfig> {
    let mut spec = WorkerSpec::new(worker_command(args)?);
    if args.pocl_cache {
        spec.env.retain(|(k, _)| k != "POCL_KERNEL_CACHE");
    }
    let mut params = Params::default();
    if let Some(text) = &args.params {
        // Overlay the given keys on the defaults.
        let mut value = serde_json::to_value(&params)?;
        let over: serde_json::Value =
            serde_json::from_str(text).context("--params: not a JSON object")?;
        match (value.as_object_mut(), over.as_object()) {
            (Some(base), Some(over)) => {
                for (k, v) in over {
                    if !base.contains_key(k) {
                        bail!("--params: unknown parameter {k:?}");
                    }
                    base.insert(k.clone(), v.clone());
                }
            }
            _ => bail!("--params: not a JSON object"),
        }
        params = serde_json::from_value(value).context("--params")?;
    }
    let parallelism = match args.parallelism.as_str() {
        "auto" => Parallelism::Adaptive,
        n => Parallelism::Fixed(
            n.parse::<usize>()
                .ok()
                .filter(|&n| n > 0)
                .context("--parallelism: `auto` or a positive number")?,
        ),
    };
    Ok(EngineConfig {
        worker: spec,
        repeats: args.repeats.max(1),
        warmup: args.warmup,
        params,
        parallelism,
        devices: 1,
        device_lock: !args.no_device_lock,
        statistic: match args.statistic.as_str() {
            "mean" => Statistic::Mean,
            "median" => Statistic::Median,
            "min" => Statistic::Min,
            other => bail!("--statistic: mean, median or min, not {other:?}"),
        },
    })
}

fn load_candidates(args: &MeasureArgs) -> Result<Vec<Candidate>> {
    match (&args.example, &args.candidates) {
        (Some(name), None) => {
            strato_measure::examples::by_name(name, args.size).with_context(|| {
                format!(
                    "--example: unknown workload {name:?} (known: {})",
                    strato_measure::examples::NAMES.join(", ")
                )
            })
        }
        (None, Some(path)) => {
            candidate::read_list(path).with_context(|| path.display().to_string())
        }
        (Some(_), Some(_)) => bail!("give a candidate list or --example, not both"),
        (None, None) => bail!("measure: give a candidate list file or --example NAME"),
    }
}

/// The `--log` file, created (it is written as the run goes: a live log, not replaced
/// atomically). It may not be the candidate list nor any other input (`crate::output`).
fn log_sink(args: &MeasureArgs) -> Result<Option<Box<dyn Write + Send>>> {
    Ok(match &args.log {
        None => None,
        Some(p) => Some(Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("{}: cannot create", p.display()))?,
        ))),
    })
}

/// Runs `strato measure`.
pub(crate) fn run(args: MeasureArgs, ctx: &crate::ctx::Ctx, out: &mut dyn Write) -> Result<()> {
    if args.worker {
        // The worker owns stdin/stdout; nothing else may write to them.
        let code = strato_measure::worker::main();
        if code != std::process::ExitCode::SUCCESS {
            bail!("measure worker failed");
        }
        return Ok(());
    }
    if let Some(log) = &args.log {
        // Before anything runs: a log over the candidate list would truncate it.
        let inputs = ctx.read_paths(&args.candidates);
        crate::output::refuse_inputs(log, &inputs)?;
    }
    if args.serve {
        return serve(&args);
    }
    let candidates = load_candidates(&args)?;
    if let Some(path) = &args.write_candidates {
        let text = serde_json::to_string_pretty(&candidate::to_list_json(&candidates))?;
        let inputs = ctx.read_paths(&args.candidates);
        crate::output::write_output(path, &inputs, |w| w.write_all(text.as_bytes()))?;
        writeln!(
            out,
            "wrote {} candidates to {}",
            candidates.len(),
            path.display()
        )?;
        return Ok(());
    }
    if candidates.is_empty() {
        bail!("no candidates");
    }
    let cfg = engine_config(&args)?;
    if args.compare_serial {
        let mut ccfg = CompareConfig::new(cfg);
        ccfg.serial_timeout_s = args.serial_timeout;
        ccfg.pinned = !args.no_pinned;
        ccfg.verify_passes = args.verify_passes;
        if args.runs == 0 {
            bail!("--runs: at least 1");
        }
        let report = compare::run_many(&ccfg, &candidates, args.runs, &mut |line| {
            eprintln!("strato measure: {line}")
        })?;
        if args.json {
            serde_json::to_writer_pretty(&mut *out, &report)?;
            writeln!(out)?;
        } else {
            crate::render::measure::print_compare(out, &report)?;
        }
        return Ok(());
    }
    let mut engine = Engine::new(cfg);
    if let Some(sink) = log_sink(&args)? {
        engine = engine.with_log_sink(sink);
    }
    let report = engine.measure(&candidates)?;
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &report)?;
        writeln!(out)?;
    } else {
        crate::render::measure::print_run(out, &report)?;
    }
    Ok(())
}

/// JSON-lines server ([`strato_measure::serve`]): `{"op":"measure","candidates":[...]}`
/// measures a tuner batch (REACT state carries over), `{"op":"finish"}` runs rank selection
/// over everything measured and returns the report, `{"op":"shutdown"}` ends. Each request
/// but `shutdown` gets one JSON line back.
fn serve(args: &MeasureArgs) -> Result<()> {
    let cfg = engine_config(args)?;
    let mut engine = Engine::new(cfg);
    if let Some(sink) = log_sink(args)? {
        engine = engine.with_log_sink(sink);
    }
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    let mut all_candidates: Vec<Candidate> = Vec::new();
    let mut all_results = Vec::new();
    let started = std::time::Instant::now();
    let reply = |r: ServeReply<'_>| -> Result<()> {
        let mut o = stdout.lock();
        writeln!(o, "{}", serde_json::to_string(&r)?)?;
        o.flush()?;
        Ok(())
    };
    let error = |error: String| ServeReply::Error { error };
    for line in stdin.lock().lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        match ServeRequest::parse(&line) {
            Err(message) => reply(error(message))?,
            Ok(ServeRequest::Measure { candidates }) => {
                let list = serde_json::json!({ "candidates": candidates }).to_string();
                let cands = match candidate::parse_list(&list, None) {
                    Ok(c) => c,
                    Err(e) => {
                        reply(error(e.to_string()))?;
                        continue;
                    }
                };
                match engine.measure_batch(&cands) {
                    Ok(results) => {
                        reply(ServeReply::Measured {
                            dp: engine.dp(),
                            results: &results,
                        })?;
                        all_candidates.extend(cands);
                        all_results.extend(results);
                    }
                    Err(e) => reply(error(e.to_string()))?,
                }
            }
            Ok(ServeRequest::Finish) => {
                let best = engine.rank_select(&all_candidates, &mut all_results)?;
                let report = engine.report(
                    std::mem::take(&mut all_results),
                    best,
                    started.elapsed().as_secs_f64(),
                );
                reply(ServeReply::Finished(&report))?;
                all_candidates.clear();
            }
            Ok(ServeRequest::Shutdown) => break,
        }
    }
    engine.shutdown();
    Ok(())
}
