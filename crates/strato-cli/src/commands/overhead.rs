//! `strato overhead` (issue 6, Zins tables 4.3-4.8): runs a workload N times per OpenCL
//! collection level — `baseline` (no layer), `api` (API calls), `device` (device events),
//! `full` (both, plus memory counters) — interleaved round-robin so slow drifts of the machine
//! hit every level alike, and reports mean ± std of the process wall time (and of the
//! workload's own time when it prints a JSON line with `workload_ns`) with the overhead
//! against the baseline. The level reaches the layer through `STRATOSCOPE_OPENCL`; the layer
//! library is found by [`opencl_layer_path`] (also used by `strato record --opencl`).

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::launch::opencl_layer_path;
use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use strato_analysis::recording::overhead::mean_and_sample_std as mean_std;

/// `strato overhead`.
#[derive(clap::Args, Debug)]
pub struct OverheadArgs {
    /// Runs per level.
    #[arg(long, default_value_t = 10)]
    pub runs: usize,
    /// Untimed runs per level first (PoCL's kernel cache, page cache, CPU frequency).
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,
    /// Levels to measure, comma-separated: baseline, api, device, full.
    #[arg(long, default_value = "baseline,api,device,full")]
    pub levels: String,
    /// The layer library (default: `STRATOSCOPE_OPENCL_LAYER`, else next to `strato`).
    #[arg(long)]
    pub layer: Option<PathBuf>,
    /// Keep the recordings here (default: a temporary directory, removed afterwards).
    #[arg(long)]
    pub keep: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// The workload (after `--`), e.g. `strato-opencl-demo workload 50`.
    #[arg(required = true, last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Debug, Default, Clone)]
struct Samples {
    wall: Vec<f64>,
    workload: Vec<f64>,
    bytes: Vec<f64>,
}

fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|it| {
            it.flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// Runs the measurement and prints the table.
pub fn run(args: OverheadArgs, _ctx: &crate::ctx::Ctx, out: &mut impl Write) -> Result<()> {
    let levels: Vec<String> = args
        .levels
        .split(',')
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .collect();
    for l in &levels {
        if !["baseline", "off", "api", "device", "full"].contains(&l.as_str()) {
            bail!("overhead: unknown level {l:?} (baseline, off, api, device, full)");
        }
    }
    let layer = match &args.layer {
        Some(p) => p.clone(),
        None => opencl_layer_path()?,
    };
    let base = match &args.keep {
        Some(p) => p.clone(),
        None => std::env::temp_dir().join(format!("strato-overhead-{}", std::process::id())),
    };
    let mut samples: Vec<Samples> = vec![Samples::default(); levels.len()];
    let runs = args.runs.max(1);
    // Progress on stderr, only on a TTY (term::Steps), one step per round of levels.
    let mut steps = crate::term::Steps::labelled("strato overhead", runs + args.warmup);
    for r in 0..runs + args.warmup {
        let warm = r < args.warmup;
        for (i, level) in levels.iter().enumerate() {
            let dir = base.join(format!("{level}-{r}"));
            std::fs::create_dir_all(&dir)?;
            let mut cmd = Command::new(&args.command[0]);
            cmd.args(&args.command[1..])
                .env("STRATOSCOPE_OUT", &dir)
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit());
            if level == "baseline" {
                cmd.env_remove("OPENCL_LAYERS");
            } else {
                cmd.env("OPENCL_LAYERS", &layer)
                    .env("STRATOSCOPE_OPENCL", level);
            }
            let t = Instant::now();
            let output = cmd
                .output()
                .with_context(|| format!("overhead: cannot run {:?}", args.command[0]))?;
            let wall = t.elapsed().as_secs_f64();
            if !output.status.success() {
                bail!(
                    "overhead: the workload failed at level {level} ({})",
                    output.status
                );
            }
            if warm {
                let _ = std::fs::remove_dir_all(&dir);
                continue;
            }
            let s = &mut samples[i];
            s.wall.push(wall);
            let text = String::from_utf8_lossy(&output.stdout);
            if let Some(ns) = text
                .lines()
                .rev()
                .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
                .find_map(|v| v.get("workload_ns").and_then(Value::as_f64))
            {
                s.workload.push(ns / 1e9);
            }
            s.bytes.push(dir_bytes(&dir) as f64);
            if args.keep.is_none() {
                let _ = std::fs::remove_dir_all(&dir);
            }
        }
        steps.step(&if warm {
            format!("warm-up {}/{}", r + 1, args.warmup)
        } else {
            format!("run {}/{runs}", r + 1 - args.warmup)
        });
    }
    steps.finish();
    if args.keep.is_none() {
        let _ = std::fs::remove_dir_all(&base);
    }
    let base_idx = levels.iter().position(|l| l == "baseline");
    let base_wall = base_idx.map(|i| mean_std(&samples[i].wall).0);
    let base_work = base_idx.map(|i| mean_std(&samples[i].workload).0);
    let rows: Vec<Value> = levels
        .iter()
        .zip(&samples)
        .map(|(level, s)| {
            let (wm, ws) = mean_std(&s.wall);
            let (km, ks) = mean_std(&s.workload);
            let pct = |m: f64, b: Option<f64>| {
                b.filter(|b| b.is_finite() && *b > 0.0 && m.is_finite())
                    .map(|b| (m - b) / b * 100.0)
            };
            json!({
                "level": level,
                "runs": s.wall.len(),
                "wall_mean_s": wm,
                "wall_std_s": ws,
                "wall_overhead_pct": pct(wm, base_wall),
                "workload_mean_s": (!s.workload.is_empty()).then_some(km),
                "workload_std_s": (!s.workload.is_empty()).then_some(ks),
                "workload_overhead_pct": if s.workload.is_empty() { None } else { pct(km, base_work) },
                "recording_bytes_mean": mean_std(&s.bytes).0,
            })
        })
        .collect();
    if args.json {
        serde_json::to_writer_pretty(
            &mut *out,
            &json!({"command": args.command, "layer": layer, "levels": rows}),
        )?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(
        out,
        "OpenCL collection overhead: {} runs per level of {:?}",
        runs,
        args.command.join(" ")
    )?;
    writeln!(
        out,
        "{:<10} {:>12} {:>10} {:>10} {:>14} {:>12} {:>10} {:>12}",
        "level",
        "wall mean s",
        "std s",
        "overhead",
        "workload mean s",
        "std s",
        "overhead",
        "recording"
    )?;
    let f = |v: &Value, k: &str| v[k].as_f64();
    for r in &rows {
        let pct = |k: &str| f(r, k).map_or("-".into(), |p| format!("{p:+.2}%"));
        let num = |k: &str, d: usize| f(r, k).map_or("-".into(), |x| format!("{x:.d$}"));
        writeln!(
            out,
            "{:<10} {:>12} {:>10} {:>10} {:>14} {:>12} {:>10} {:>10.1} kB",
            r["level"].as_str().unwrap_or(""),
            num("wall_mean_s", 4),
            num("wall_std_s", 4),
            pct("wall_overhead_pct"),
            num("workload_mean_s", 4),
            num("workload_std_s", 4),
            pct("workload_overhead_pct"),
            f(r, "recording_bytes_mean").unwrap_or(0.0) / 1024.0
        )?;
    }
    Ok(())
}
