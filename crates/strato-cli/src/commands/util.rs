//! `strato util`: nvidia-smi's sampled utilization beside true device-busy time (RL-Scope
//! F.11). Rules: `strato_analysis::device_time::util`, docs/analyses/util.md.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Result};
use serde_json::{json, Map, Value};
use strato_analysis::device_time::util::{self, UtilReport, DEFAULT_PERIODS_S};

use crate::render::units::ms_num;
use crate::render::write_json;
use crate::table::Table;

// Arguments of `strato util` (its help text is on the variant in `app.rs`).
#[derive(clap::Args, Debug)]
pub struct UtilArgs {
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Sampling period in seconds (repeatable). Default: 1/6 s and 1 s.
    #[arg(long, value_name = "SECONDS")]
    period: Vec<f64>,
    #[arg(long)]
    json: bool,
}

/// Runs `strato util`.
pub fn run(args: UtilArgs, ctx: &crate::ctx::Ctx, out: &mut impl Write) -> Result<()> {
    let UtilArgs {
        inputs,
        period,
        json,
    } = args;
    let periods = if period.is_empty() {
        DEFAULT_PERIODS_S.to_vec()
    } else {
        period
    };
    if periods.iter().any(|p| !(*p > 0.0 && p.is_finite())) {
        bail!("util: --period must be a positive number of seconds");
    }
    let trace = ctx.engine.load(&inputs, &ctx.import_options(false)?)?;
    let report = util::util(&trace, &periods);
    if json {
        write_json(out, &util_json(&report))?;
    } else {
        util_text(out, &report)?;
    }
    Ok(())
}

fn period_key(p: f64) -> String {
    let s = format!("{p:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_owned()
}

fn util_json(report: &UtilReport) -> Value {
    let devices: Vec<Value> = report
        .devices
        .iter()
        .map(|d| {
            let mut v = serde_json::to_value(d).unwrap_or(Value::Null);
            let sampled: Map<String, Value> = d
                .sampled
                .iter()
                .map(|s| (period_key(s.period_s), json!(s.sampled_pct)))
                .collect();
            if let Value::Object(m) = &mut v {
                m.insert("sampled_pct".into(), Value::Object(sampled));
            }
            v
        })
        .collect();
    json!({ "devices": devices })
}

fn util_text(out: &mut impl Write, report: &UtilReport) -> Result<()> {
    if report.devices.is_empty() {
        writeln!(out, "no device work in the trace")?;
        return Ok(());
    }
    let periods: Vec<String> = report.devices[0]
        .sampled
        .iter()
        .map(|s| format!("nvidia-smi @{} s", period_key(s.period_s)))
        .collect();
    let mut header = vec![
        "rank",
        "device",
        "name",
        "ops",
        "window ms",
        "busy ms",
        "true busy",
    ];
    header.extend(periods.iter().map(String::as_str));
    let mut t = Table::with_left(&header, &[2]);
    for d in &report.devices {
        let mut row = vec![
            d.rank.to_string(),
            d.device.to_string(),
            d.name.clone().unwrap_or_else(|| "-".into()),
            d.device_ops.to_string(),
            ms_num(d.window_ns as f64),
            ms_num(d.busy_ns as f64),
            format!("{:.1}%", d.true_busy_pct),
        ];
        row.extend(
            d.sampled
                .iter()
                .map(|s| format!("{:.1}% ({}/{})", s.sampled_pct, s.active_periods, s.periods)),
        );
        t.row(row);
    }
    t.print(out, "")?;
    writeln!(
        out,
        "\nnvidia-smi counts a sampling period as busy when any kernel ran in it; true busy is \
         the union of device work over the window (docs/analyses/util.md)."
    )?;
    Ok(())
}
