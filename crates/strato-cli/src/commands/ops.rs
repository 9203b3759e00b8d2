//! `strato ops`: the per-op performance table — framework ops grouped by (op, input shapes,
//! dtypes) with count, device time, TFLOP/s, TB/s, % of the device's peak and roofline bound,
//! from the documented op models. Rules: `strato_analysis::ops`, `strato_analysis::op_models`,
//! docs/analyses/ops.md.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use strato_analysis::analyzed::Analyzed;
use strato_analysis::devices::DeviceSpec;
use strato_analysis::ops::{self, OpsReport};

use crate::input::load;
use crate::render::units::{fit, ms_num, opt, us_num};
use crate::render::write_json;
use crate::table::Table;

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
pub(crate) fn read_device_spec(path: &PathBuf) -> Result<DeviceSpec> {
    let text = strato_io::config::read_config_text(path, "the device spec")?;
    DeviceSpec::from_json(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// Runs `strato ops`.
pub fn run(args: OpsArgs, ctx: &crate::ctx::Ctx, out: &mut impl Write) -> Result<()> {
    let spec = args
        .device_spec
        .as_ref()
        .map(read_device_spec)
        .transpose()?;
    let trace = load(&args.inputs, &ctx.import_options(true)?)?;
    let report = ops::ops(&Analyzed::new(&trace), spec.as_ref());
    if args.json {
        write_json(out, &report)?;
    } else {
        table(out, &report, args.top, args.csv)?;
    }
    Ok(())
}

fn shapes_text(shapes: &[Vec<i64>]) -> String {
    let parts: Vec<String> = shapes
        .iter()
        .filter(|s| !s.is_empty())
        .map(|s| {
            let d: Vec<String> = s.iter().map(i64::to_string).collect();
            format!("[{}]", d.join(","))
        })
        .collect();
    parts.join(" ")
}

fn table(out: &mut impl Write, r: &OpsReport, top: usize, csv: bool) -> Result<()> {
    if !csv {
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
            "device time {} ms in {} device ops; {:.1}% of it in modelled ops\n",
            ms_num(r.device_ns as f64),
            r.device_ops,
            if r.device_ns > 0 {
                100.0 * r.modelled_ns as f64 / r.device_ns as f64
            } else {
                0.0
            }
        )?;
    }
    let mut t = Table::with_left(
        &[
            "op", "shapes", "dtype", "count", "total ms", "mean us", "TFLOP/s", "TB/s", "% peak",
            "bound", "model",
        ],
        &[0, 1, 2, 9, 10],
    );
    let limit = if csv { usize::MAX } else { top };
    for o in r.ops.iter().take(limit) {
        let shapes = shapes_text(&o.shapes);
        t.row(vec![
            if csv { o.op.clone() } else { fit(&o.op, 40) },
            if csv { shapes } else { fit(&shapes, 36) },
            o.precision.map_or("-".into(), |p| p.as_str().to_owned()),
            o.count.to_string(),
            ms_num(o.total_ns as f64),
            us_num(o.mean_ns),
            opt(o.tflops, |v| format!("{v:.1}")),
            opt(o.tbps, |v| format!("{v:.2}")),
            opt(o.peak_pct, |v| format!("{v:.1}")),
            o.bound
                .map_or("-".into(), |b| format!("{b:?}").to_lowercase()),
            match (o.model, &o.reason) {
                (Some(m), _) => m.to_owned(),
                (None, Some(r)) => format!("unmodelled: {r}"),
                (None, None) => "unmodelled".into(),
            },
        ]);
    }
    t.write(out, csv)?;
    if !csv && r.ops.len() > limit {
        writeln!(
            out,
            "({} more groups; --top N or --csv)",
            r.ops.len() - limit
        )?;
    }
    Ok(())
}
