//! `strato ops`: the per-op performance table — framework ops grouped by (op, input shapes,
//! dtypes) with count, device time, TFLOP/s, TB/s, % of the device's peak and roofline bound,
//! from the documented op models, plus the collectives' rows (bytes, algbw, busbw in decimal
//! GB/s). A row above 100% of its peak is marked (`!`) and named in a note under the table.
//! Rules: `strato_analysis::cross_stack::ops`, `strato_analysis::models::op_models`,
//! docs/analyses/ops.md.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use strato_analysis::analyzed::Analyzed;
use strato_analysis::cross_stack::ops::{self, OpRow, OpsReport};
use strato_analysis::models::devices::DeviceSpec;

use crate::render::units::{fit, ms_num, opt, us_num};
use crate::render::write_json;
use crate::table::{Table, TableFormat};

// Arguments of `strato ops` (its help text is on the variant in `app.rs`).
#[derive(clap::Args, Debug)]
pub struct OpsArgs {
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// A JSON device spec overriding the detected device (fields of docs/analyses/ops.md).
    #[arg(long, value_name = "FILE")]
    device_spec: Option<PathBuf>,
    #[arg(long, default_value_t = 20)]
    top: usize,
    #[arg(long)]
    json: bool,
    #[arg(long, conflicts_with = "json")]
    csv: bool,
}

/// Reads a `--device-spec FILE` (bounded like every configuration file,
/// [`strato_io::config`]; checked by [`DeviceSpec::from_json`]); the error names the file.
pub(crate) fn read_device_spec(path: &std::path::Path) -> Result<DeviceSpec> {
    let text = strato_io::config::read_config_text(path, "the device spec")?;
    DeviceSpec::from_json(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// Runs `strato ops`.
pub fn run(args: OpsArgs, ctx: &crate::ctx::Ctx, out: &mut impl Write) -> Result<()> {
    let spec = args
        .device_spec
        .as_ref()
        .map(|p| read_device_spec(p))
        .transpose()?;
    let trace = ctx.engine.load(&args.inputs, &ctx.import_options(true)?)?;
    let report = ops::ops(&Analyzed::new(&trace), spec.as_ref());
    if args.json {
        write_json(out, &report)?;
    } else {
        table(out, &report, args.top, ctx.table_format(args.csv))?;
    }
    Ok(())
}

fn shape_text(s: &[i64]) -> String {
    let d: Vec<String> = s.iter().map(i64::to_string).collect();
    format!("[{}]", d.join(","))
}

/// The row's tensor shapes; a list input's tensors joined by `+` (`[4,1,768]+[4,196,768]`).
fn shapes_text(o: &OpRow) -> String {
    let parts: Vec<String> = o
        .shapes
        .iter()
        .enumerate()
        .filter_map(
            |(i, s)| match o.input_lists.get(i).filter(|l| !l.is_empty()) {
                Some(list) => Some(
                    list.iter()
                        .map(|t| shape_text(t))
                        .collect::<Vec<_>>()
                        .join("+"),
                ),
                None => (!s.is_empty()).then(|| shape_text(s)),
            },
        )
        .collect();
    parts.join(" ")
}

/// Bytes in binary units, labelled (`1.5 MiB`).
fn bytes_text(b: u64) -> String {
    match b {
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

fn table(out: &mut impl Write, r: &OpsReport, top: usize, format: TableFormat) -> Result<()> {
    if !format.is_csv() {
        for d in &r.devices {
            writeln!(
                out,
                "device {} (rank {}): {} -> {}",
                d.index,
                d.rank,
                d.name
                    .as_deref()
                    .filter(|n| !n.is_empty())
                    .unwrap_or("unnamed"),
                d.spec
                    .as_ref()
                    .map_or("not in the device table: % of peak unknown".into(), |s| {
                        format!("{} ({})", s.name, s.source)
                    }),
            )?;
        }
        writeln!(
            out,
            "device time {} ms in {} device ops; {:.1}% of it in modelled ops",
            ms_num(r.device_ns as f64),
            r.device_ops,
            if r.device_ns > 0 {
                100.0 * r.modelled_ns as f64 / r.device_ns as f64
            } else {
                0.0
            }
        )?;
        if r.over_peak_rows > 0 {
            writeln!(
                out,
                "{} rows above 100% of peak (marked !): impossible, the model or the device row \
                 is wrong (notes below the table)",
                r.over_peak_rows
            )?;
        }
        writeln!(out)?;
    }
    let mut t = Table::with_left(
        &[
            "op", "shapes", "dtype", "count", "total ms", "mean us", "TFLOP/s", "TB/s", "% peak",
            "bound", "model",
        ],
        &[0, 1, 2, 9, 10],
    );
    let limit = if format.is_csv() { usize::MAX } else { top };
    for o in r.ops.iter().take(limit) {
        let shapes = shapes_text(o);
        t.row(vec![
            if format.is_csv() {
                o.op.clone()
            } else {
                fit(&o.op, 40)
            },
            if format.is_csv() {
                shapes
            } else {
                fit(&shapes, 36)
            },
            o.precision.map_or("-".into(), |p| p.as_str().to_owned()),
            o.count.to_string(),
            ms_num(o.total_ns as f64),
            us_num(o.mean_ns),
            opt(o.tflops, |v| format!("{v:.1}")),
            opt(o.tbps, |v| format!("{v:.2}")),
            opt(o.peak_pct, |v| {
                if o.over_peak && !format.is_csv() {
                    format!("{v:.1}!")
                } else {
                    format!("{v:.1}")
                }
            }),
            o.bound
                .map_or("-".into(), |b| format!("{b:?}").to_lowercase()),
            match (o.model, &o.reason) {
                (Some(m), _) => m.to_owned(),
                (None, Some(r)) => format!("unmodelled: {r}"),
                (None, None) => "unmodelled".into(),
            },
        ]);
    }
    t.write(out, format)?;
    if !format.is_csv() && r.ops.len() > limit {
        writeln!(
            out,
            "({} more groups; --top N or --csv)",
            r.ops.len() - limit
        )?;
    }
    if format.is_csv() {
        return Ok(());
    }
    for o in r.ops.iter().filter(|o| o.over_peak) {
        writeln!(
            out,
            "note: {} {} runs at {:.1}% of the {} peak {} ({}): above 100% is impossible, so the \
             op's model or the device row is wrong",
            fit(&o.op, 40),
            shapes_text(o),
            o.peak_pct.unwrap_or(0.0),
            o.device.as_deref().unwrap_or("device's"),
            if o.flops.is_some() {
                "FLOP/s"
            } else {
                "memory bandwidth"
            },
            match (o.tflops, o.tbps) {
                (Some(t), _) => format!("{t:.1} TFLOP/s"),
                (None, Some(b)) => format!("{b:.2} TB/s"),
                _ => "-".into(),
            }
        )?;
    }
    collectives_table(out, r)
}

/// The collective rows again, with their message, dtype and bandwidths.
fn collectives_table(out: &mut impl Write, r: &OpsReport) -> Result<()> {
    let rows: Vec<&OpRow> = r.ops.iter().filter(|o| o.collective.is_some()).collect();
    if rows.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "\ncollectives (NCCL-tests bytes; algbw = bytes / kernel time, which includes waiting \
         for peers; GB/s = 10^9 B/s, not GiB/s):"
    )?;
    let mut t = Table::with_left(
        &[
            "collective",
            "size",
            "dtype",
            "ranks",
            "count",
            "total ms",
            "mean us",
            "algbw GB/s",
            "busbw GB/s",
        ],
        &[0, 2],
    );
    for o in rows {
        let Some(c) = &o.collective else { continue };
        t.row(vec![
            c.kind.as_str().to_owned(),
            c.message_bytes.map_or("?".into(), bytes_text),
            c.dtype.clone().unwrap_or_else(|| "-".into()),
            c.group_size.map_or("-".into(), |n| n.to_string()),
            o.count.to_string(),
            ms_num(o.total_ns as f64),
            us_num(o.mean_ns),
            opt(c.algbw_gbps, |v| format!("{v:.2}")),
            opt(c.busbw_gbps, |v| format!("{v:.2}")),
        ]);
    }
    t.print(out, "")?;
    Ok(())
}
