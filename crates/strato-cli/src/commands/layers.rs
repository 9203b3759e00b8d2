//! `strato layers` and `strato roofline`: layer, kernel and step tables (XSP A1-A15) and the
//! roofline per kernel, layer and model. Rules: `strato_analysis::cross_stack::layers`,
//! docs/analyses/layers-roofline.md.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Result};
use strato_analysis::analyzed::Analyzed;
use strato_analysis::cross_stack::layers::{self, LayerSource, LayersReport};
use strato_analysis::cross_stack::modules::{self, ModulesReport};
use strato_trace::Ns;

use crate::args::LayerBy;
use crate::render::layers::{device_line, notes, roof_cells};
use crate::render::units::{fit, ms_num, opt, us_num};
use crate::render::write_json;
use crate::table::{Table, TableFormat};

// Arguments of `strato layers` (its help text is on the variant in `app.rs`).
#[derive(clap::Args, Debug)]
pub struct LayersArgs {
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// What a layer is: top-level framework ops, or annotations.
    #[arg(long, value_enum, default_value_t = LayerBy::Op)]
    by: LayerBy,
    /// Show the per-kernel table instead of the layer table.
    #[arg(long)]
    kernels: bool,
    /// Show the per-step (model) table instead of the layer table.
    #[arg(long, conflicts_with = "kernels")]
    steps: bool,
    /// Fraction trimmed from each end for trimmed means.
    #[arg(long, default_value_t = 0.1)]
    trim: f64,
    /// Samples per step (turns steps/s into samples/s).
    #[arg(long)]
    batch_size: Option<u64>,
    #[arg(long, default_value_t = 15)]
    top: usize,
    #[arg(long)]
    json: bool,
    #[arg(long, conflicts_with = "json")]
    csv: bool,
}

/// Runs `strato layers`.
pub fn run_layers(args: LayersArgs, ctx: &crate::ctx::Ctx, out: &mut impl Write) -> Result<()> {
    let LayersArgs {
        inputs,
        by,
        kernels,
        steps,
        trim,
        batch_size,
        top,
        json,
        csv,
    } = args;
    if !(0.0..0.5).contains(&trim) {
        bail!("layers: --trim must be in [0, 0.5)");
    }
    let trace = ctx.engine.load(&inputs, &ctx.import_options(true)?)?;
    let Some(options) = by.options(trim, batch_size) else {
        if kernels || steps {
            bail!("layers: --kernels and --steps do not apply to --by module");
        }
        let report = modules::modules(&Analyzed::new(&trace));
        if json {
            write_json(out, &report)?;
        } else {
            modules_table(out, &report, top, ctx.table_format(csv))?;
        }
        return Ok(());
    };
    let report = layers::layers(&Analyzed::new(&trace), &options);
    if json {
        write_json(out, &report)?;
    } else if kernels {
        kernels_table(out, &report, top, ctx.table_format(csv))?;
    } else if steps {
        steps_table(out, &report, top, ctx.table_format(csv))?;
    } else {
        layers_table(out, &report, top, ctx.table_format(csv))?;
    }
    Ok(())
}

fn layers_table(
    out: &mut impl Write,
    report: &LayersReport,
    top: usize,
    format: TableFormat,
) -> Result<()> {
    let mut t = Table::with_left(
        &[
            "layer",
            "count",
            "count %",
            "CPU ms",
            "CPU %",
            "CPU mean us",
            "CPU trim us",
            "GPU mean us",
            "GPU trim us",
            "kernels",
            "kernel ms",
            "alloc MB",
            "GFLOP",
            "FLOP/B",
            "TFLOP/s",
            "bound",
        ],
        &[0],
    );
    let limit = if format.is_csv() { usize::MAX } else { top };
    for l in report.layers.iter().take(limit) {
        let mut row = vec![
            if format.is_csv() {
                l.name.clone()
            } else {
                fit(&l.name, 44)
            },
            l.occurrences.to_string(),
            format!("{:.1}", l.share_of_occurrences_pct),
            ms_num(l.cpu.total_ns as f64),
            format!("{:.1}", l.share_of_cpu_time_pct),
            us_num(l.cpu.mean_ns),
            us_num(l.cpu.trimmed_mean_ns),
            us_num(l.gpu.mean_ns),
            us_num(l.gpu.trimmed_mean_ns),
            l.kernels.to_string(),
            ms_num(l.kernel_time_ns as f64),
            l.allocated_bytes
                .map_or("unknown".into(), |b| format!("{:.1}", b as f64 / 1e6)),
        ];
        row.extend(roof_cells(&l.roofline));
        t.row(row);
    }
    if format.is_csv() {
        t.write(out, format)?;
        return Ok(());
    }
    device_line(out, report)?;
    writeln!(
        out,
        "layers ({}): {} instances of {} names; trimmed means drop {:.0}% at each end\n",
        match report.source {
            LayerSource::Op => "top-level framework ops",
            LayerSource::Annotation => "annotations",
        },
        report.layer_instances,
        report.layers.len(),
        report.trim * 100.0
    )?;
    if report.layers.len() > top {
        let rest: Ns = report.layers.iter().skip(top).map(|l| l.cpu.total_ns).sum();
        let mut row = vec![String::new(); 16];
        row[0] = format!("({} more)", report.layers.len() - top);
        row[3] = ms_num(rest as f64);
        t.row(row);
    }
    t.print(out, "")?;
    if let Some(l) = report.layers.first() {
        if !l.top_kernels.is_empty() {
            writeln!(out, "\nkernels of {}", fit(&l.name, 60))?;
            for k in &l.top_kernels {
                writeln!(
                    out,
                    "  {:>8} x  {:>10} ms  {}",
                    k.count,
                    ms_num(k.total_ns as f64),
                    fit(&k.name, 100)
                )?;
            }
        }
    }
    writeln!(out)?;
    notes(out, report)?;
    Ok(())
}

fn kernels_table(
    out: &mut impl Write,
    report: &LayersReport,
    top: usize,
    format: TableFormat,
) -> Result<()> {
    let mut t = Table::with_left(
        &[
            "kernel",
            "count",
            "total ms",
            "mean us",
            "std us",
            "min us",
            "median us",
            "max us",
            "trim us",
            "grid",
            "block",
            "occ %",
            "GFLOP",
            "FLOP/B",
            "TFLOP/s",
            "bound",
        ],
        &[0, 9, 10],
    );
    let limit = if format.is_csv() { usize::MAX } else { top };
    let dims = |v: &Option<Vec<i64>>| {
        v.as_ref().map_or("-".into(), |v| {
            v.iter().map(i64::to_string).collect::<Vec<_>>().join("x")
        })
    };
    for k in report.kernels.iter().take(limit) {
        let d = &k.duration;
        let mut row = vec![
            if format.is_csv() {
                k.name.clone()
            } else {
                fit(&k.name, 60)
            },
            d.count.to_string(),
            ms_num(d.total_ns as f64),
            us_num(d.mean_ns),
            us_num(d.std_ns),
            us_num(d.min_ns as f64),
            us_num(d.median_ns),
            us_num(d.max_ns as f64),
            us_num(d.trimmed_mean_ns),
            dims(&k.grid),
            dims(&k.block),
            k.occupancy_pct.map_or("-".into(), |o| format!("{o:.0}")),
        ];
        row.extend(roof_cells(&k.roofline));
        t.row(row);
    }
    if format.is_csv() {
        t.write(out, format)?;
        return Ok(());
    }
    device_line(out, report)?;
    writeln!(
        out,
        "kernels: {} launches of {} names\n",
        report.kernel_count,
        report.kernels.len()
    )?;
    if report.kernels.len() > top {
        let rest: Vec<&layers::KernelRow> = report.kernels.iter().skip(top).collect();
        let mut row = vec![String::new(); 16];
        row[0] = format!("({} more)", rest.len());
        row[1] = rest
            .iter()
            .map(|k| k.duration.count)
            .sum::<usize>()
            .to_string();
        row[2] = ms_num(rest.iter().map(|k| k.duration.total_ns).sum::<Ns>() as f64);
        t.row(row);
    }
    t.print(out, "")?;
    writeln!(out)?;
    notes(out, report)?;
    Ok(())
}

fn steps_table(
    out: &mut impl Write,
    report: &LayersReport,
    top: usize,
    format: TableFormat,
) -> Result<()> {
    let mut t = Table::with_left(
        &[
            "rank",
            "pid",
            "step",
            "CPU ms",
            "end-to-end ms",
            "GPU busy ms",
            "device ops",
            "GFLOP",
        ],
        &[2],
    );
    let limit = if format.is_csv() { usize::MAX } else { top };
    for s in report.steps.iter().take(limit) {
        t.row(vec![
            s.rank.to_string(),
            s.pid.to_string(),
            s.name.clone(),
            ms_num(s.cpu_ns as f64),
            ms_num(s.end_to_end_ns as f64),
            ms_num(s.gpu_busy_ns as f64),
            s.device_ops.to_string(),
            opt(s.flops, |f| format!("{:.3}", f / 1e9)),
        ]);
    }
    if format.is_csv() {
        t.write(out, format)?;
        return Ok(());
    }
    device_line(out, report)?;
    t.print(out, "")?;
    let mut m = Table::with_left(
        &[
            "rank",
            "pid",
            "steps",
            "mean ms",
            "trim ms",
            "min ms",
            "max ms",
            "e2e mean ms",
            "steps/s",
            "samples/s",
            "GPU busy ms",
            "GFLOP",
            "FLOP/B",
            "TFLOP/s",
            "bound",
        ],
        &[],
    );
    for r in &report.models {
        let mut row = vec![
            r.rank.to_string(),
            r.pid.to_string(),
            r.steps.to_string(),
            ms_num(r.latency.mean_ns),
            ms_num(r.latency.trimmed_mean_ns),
            ms_num(r.latency.min_ns as f64),
            ms_num(r.latency.max_ns as f64),
            ms_num(r.end_to_end.mean_ns),
            format!("{:.2}", r.steps_per_s),
            r.samples_per_s.map_or("-".into(), |s| format!("{s:.1}")),
            ms_num(r.gpu_busy_ns as f64),
        ];
        row.extend(roof_cells(&r.roofline));
        m.row(row);
    }
    writeln!(out, "\nmodel")?;
    m.print(out, "")?;
    writeln!(out)?;
    notes(out, report)?;
    Ok(())
}

/// `--by module`: the classes (instances folded, with their spread), then the recompute line.
fn modules_table(
    out: &mut impl Write,
    r: &ModulesReport,
    top: usize,
    format: TableFormat,
) -> Result<()> {
    if !format.is_csv() {
        writeln!(
            out,
            "{} module calls; device time {} ms, {} ms of it under modules, {} ms outside\n",
            r.module_calls,
            ms_num(r.device_ns as f64),
            ms_num(r.device_ns_in_modules as f64),
            ms_num(r.device_ns_outside_modules as f64),
        )?;
    }
    let mut t = Table::with_left(
        &[
            "class",
            "instances",
            "calls",
            "CPU incl ms",
            "CPU excl ms",
            "device ms",
            "device excl ms",
            "inst CPU min us",
            "inst CPU max us",
            "inst device min us",
            "inst device max us",
            "recomputed",
        ],
        &[0],
    );
    let limit = if format.is_csv() { usize::MAX } else { top };
    for m in r.modules.iter().take(limit) {
        t.row(vec![
            if format.is_csv() {
                m.class.clone()
            } else {
                fit(&m.class, 40)
            },
            m.instances.to_string(),
            m.calls.to_string(),
            ms_num(m.cpu_inclusive_ns as f64),
            ms_num(m.cpu_exclusive_ns as f64),
            ms_num(m.device_ns as f64),
            ms_num(m.device_exclusive_ns as f64),
            us_num(m.cpu_spread.min_ns as f64),
            us_num(m.cpu_spread.max_ns as f64),
            us_num(m.device_spread.min_ns as f64),
            us_num(m.device_spread.max_ns as f64),
            m.recomputed_calls.to_string(),
        ]);
    }
    t.write(out, format)?;
    if !format.is_csv() {
        if r.modules.is_empty() {
            writeln!(
                out,
                "no `nn.Module: ...` spans: record with the PyTorch profiler's with_stack=True"
            )?;
        }
        let rc = &r.recompute;
        if rc.calls > 0 {
            writeln!(
                out,
                "\nrecomputed forward under backward (activation checkpointing): {} calls ({} \
                 outermost: {}), CPU {} ms, device {} ms",
                rc.calls,
                rc.root_calls,
                rc.classes.join(", "),
                ms_num(rc.cpu_ns as f64),
                ms_num(rc.device_ns as f64),
            )?;
        }
    }
    Ok(())
}
