//! `strato roofline`: the roofline per kernel, layer and model (XSP) against the device's ridge
//! point. Rules: `strato_analysis::cross_stack::layers`, docs/analyses/layers-roofline.md.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use serde_json::{json, Map, Value};
use strato_analysis::analyzed::Analyzed;
use strato_analysis::cross_stack::layers::{self, LayersReport, Roofline};
use strato_trace::Ns;

use crate::args::LayerBy;
use crate::render::layers::{device_line, notes};
use crate::render::units::{fit, ms_num, opt};
use crate::render::write_json;
use crate::table::{Table, TableFormat};

// Arguments of `strato roofline` (its help text is on the variant in `app.rs`).
#[derive(clap::Args, Debug)]
pub struct RooflineArgs {
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    #[arg(long, value_enum, default_value_t = LayerBy::Op)]
    by: LayerBy,
    #[arg(long, default_value_t = 15)]
    top: usize,
    #[arg(long)]
    json: bool,
    #[arg(long, conflicts_with = "json")]
    csv: bool,
}

/// Runs `strato roofline`.
pub fn run(args: RooflineArgs, ctx: &crate::ctx::Ctx, out: &mut impl Write) -> Result<()> {
    let RooflineArgs {
        inputs,
        by,
        top,
        json,
        csv,
    } = args;
    let Some(options) = by.options(0.1, None) else {
        anyhow::bail!("roofline: --by module has no roofline; see `strato layers --by module`");
    };
    let trace = ctx.engine.load(&inputs, &ctx.import_options(true)?)?;
    let report = layers::layers(&Analyzed::new(&trace), &options);
    let rows = roofline_rows(&report);
    if json {
        write_json(
            out,
            &json!({"device": report.device, "rows": rows, "notes": report.notes}),
        )?;
    } else {
        roofline_table(out, &report, &rows, top, ctx.table_format(csv))?;
    }
    Ok(())
}

fn roofline_rows(report: &LayersReport) -> Vec<Value> {
    let mut rows = Vec::new();
    let mut add = |kind: &str, name: &str, count: usize, time_ns: Ns, r: &Roofline| {
        let mut m = Map::new();
        m.insert("kind".into(), json!(kind));
        m.insert("name".into(), json!(name));
        m.insert("count".into(), json!(count));
        m.insert("device_time_ns".into(), json!(time_ns));
        if let Ok(Value::Object(r)) = serde_json::to_value(r) {
            m.extend(r);
        }
        rows.push(Value::Object(m));
    };
    for m in &report.models {
        add(
            "model",
            &format!("rank {} pid {}", m.rank, m.pid),
            m.steps,
            m.gpu_busy_ns,
            &m.roofline,
        );
    }
    for l in &report.layers {
        add(
            "layer",
            &l.name,
            l.occurrences,
            l.kernel_time_ns,
            &l.roofline,
        );
    }
    for k in &report.kernels {
        add(
            "kernel",
            &k.name,
            k.duration.count,
            k.duration.total_ns,
            &k.roofline,
        );
    }
    rows
}

fn roofline_table(
    out: &mut impl Write,
    report: &LayersReport,
    rows: &[Value],
    top: usize,
    format: TableFormat,
) -> Result<()> {
    let mut t = Table::with_left(
        &[
            "kind",
            "name",
            "count",
            "device ms",
            "precision",
            "GFLOP",
            "MB",
            "FLOP/B",
            "TFLOP/s",
            "ridge",
            "bound",
            "% of roof",
        ],
        &[0, 1, 4],
    );
    let f = |v: &Value, k: &str| v.get(k).and_then(Value::as_f64);
    let known: Vec<&Value> = rows
        .iter()
        .filter(|r| f(r, "flops").is_some() || f(r, "bytes").is_some())
        .collect();
    let limit = if format.is_csv() { usize::MAX } else { top };
    for r in known.iter().take(limit) {
        let name = r.get("name").and_then(Value::as_str).unwrap_or("");
        t.row(vec![
            r.get("kind")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            if format.is_csv() {
                name.to_owned()
            } else {
                fit(name, 50)
            },
            r.get("count")
                .and_then(Value::as_u64)
                .unwrap_or(0)
                .to_string(),
            ms_num(f(r, "device_time_ns").unwrap_or(0.0)),
            r.get("precision")
                .and_then(Value::as_str)
                .unwrap_or("unknown")
                .to_owned(),
            opt(f(r, "flops"), |v| format!("{:.3}", v / 1e9)),
            opt(f(r, "bytes"), |v| format!("{:.2}", v / 1e6)),
            opt(f(r, "arithmetic_intensity"), |v| format!("{v:.2}")),
            opt(f(r, "attained_flops_per_s"), |v| format!("{:.3}", v / 1e12)),
            opt(f(r, "ridge"), |v| format!("{v:.1}")),
            r.get("bound")
                .and_then(Value::as_str)
                .unwrap_or("unknown")
                .to_owned(),
            opt(f(r, "roof_pct"), |v| format!("{v:.1}")),
        ]);
    }
    if format.is_csv() {
        t.write(out, format)?;
        return Ok(());
    }
    device_line(out, report)?;
    writeln!(
        out,
        "{} of {} models/layers/kernels have known FLOPs or bytes\n",
        known.len(),
        rows.len()
    )?;
    if known.is_empty() {
        writeln!(out, "roofline: unknown (no FLOPs or bytes in this trace)")?;
    } else {
        t.print(out, "")?;
    }
    writeln!(out)?;
    notes(out, report)?;
    Ok(())
}
