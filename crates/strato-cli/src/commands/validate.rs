//! `strato validate`: the overhead correction of a calibrated profile against its
//! uninstrumented runs; with `--refit`, the calibration fitted again on the stored runs.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use serde_json::json;
use strato_analysis::recording::calibration::{self, CalibrationFile};

use crate::calibration_runs::{device_tracing, fit_runs, Measured, RunResult, Sampling};
use crate::render::record::write_validation;

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

/// Runs `strato validate`: recomputes the validation of a calibrated profile; with
/// `--refit`, re-fits the calibration on the runs stored under `PROFILE/.runs` first.
pub fn run(args: ValidateArgs, ctx: &crate::ctx::Ctx, out: &mut impl Write) -> Result<()> {
    let stored = CalibrationFile::read(&args.profile)?;
    if args.refit {
        return refit(ctx, &args, &stored, out);
    }
    let cal = stored.calibration();
    let trace = ctx.engine.load_recording(&args.profile)?;
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
/// --calibrate` (`.runs/level-N[-opencl-L][-os][-samples|-native-samples]/run-K`,
/// `.runs/recorded/run-K`) measured and fitted again as the recording did; prints the figures and
/// whether they equal the stored ones.
fn refit(
    ctx: &crate::ctx::Ctx,
    args: &ValidateArgs,
    stored: &CalibrationFile,
    out: &mut impl Write,
) -> Result<()> {
    let work = args.profile.join(".runs");
    let Some((held_entry, configs)) = stored.runs.split_last() else {
        bail!("{}: calibration.json lists no runs", args.profile.display());
    };
    let opencl_on = configs.iter().any(|c| c.opencl.is_some());
    let load_runs = |config: &str, level: u64, opencl: Option<&str>, n: usize| {
        (0..n)
            .map(|rep| {
                let dir = work.join(config).join(format!("run-{rep}"));
                let trace = ctx.engine.load_recording(&dir)?;
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
        let sample = match c.sample.as_deref() {
            None => None,
            Some(name) => Some(Sampling::from_name(name).with_context(|| {
                format!(
                    "{}: unknown sampling configuration {name:?} in calibration.json",
                    args.profile.display()
                )
            })?),
        };
        let mut m = Measured {
            level: c.level,
            opencl,
            os: c.os,
            sample,
            runs: Vec::new(),
        };
        m.runs = load_runs(&m.dir_name(), c.level, opencl, c.times_s.len())?;
        measured.push(m);
    }
    let held_out = load_runs("recorded", held_entry.level, None, held_entry.times_s.len())?;
    let mut file = fit_runs(
        &ctx.engine,
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
