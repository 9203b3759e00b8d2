//! `layers` as a registered analysis ([`crate::registry`]): the layer, kernel and step tables
//! (XSP A1-A15) and, with `by = module`, the nn.Module tree ([`crate::cross_stack::modules`]).
//! The tables themselves are the parent module's.

use std::io::{self, Write};

use serde::{Deserialize, Serialize};
use strato_trace::Ns;

use super::text::{device_line, notes, roof_cells};
use super::{layers, KernelRow, LayerSource, LayersOptions, LayersReport, LayersStream};
use crate::analyzed::Analyzed;
use crate::cross_stack::modules::{modules, modules_table, ModulesReport, ModulesStream};
use crate::registry::{
    streamed, Analysis, AnalysisError, InReport, OptionKind, OptionSpec, Reads, Stream, TableSpec,
};
use crate::text::table::{Table, TableFormat};
use crate::text::units::{fit, ms_num, opt, us_num};

/// Layer, kernel and model tables, or the module tree.
#[derive(Debug)]
pub struct Layers;

/// What a layer is ([`LayersSettings::by`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LayerBy {
    /// Top-level framework ops.
    #[default]
    Op,
    /// Annotations.
    Annotation,
    /// The nn.Module tree (its own tables: `strato modules`).
    Module,
}

/// The options of [`Layers`] as the front ends give them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LayersSettings {
    pub by: LayerBy,
    /// The text shows the per-kernel table instead of the layer table.
    pub kernels: bool,
    /// The text shows the per-step (model) table instead of the layer table.
    pub steps: bool,
    /// Fraction trimmed from each end for trimmed means, in [0, 0.5).
    pub trim: f64,
    /// Samples per step (turns steps/s into samples/s).
    pub batch_size: Option<u64>,
    /// Rows shown per table in the text (CSV and JSON hold all).
    pub top: usize,
}

impl LayersSettings {
    /// The options of the layer tables; `None` with `by = module` (the module tree).
    fn layers_options(&self) -> Option<LayersOptions> {
        let source = match self.by {
            LayerBy::Op => LayerSource::Op,
            LayerBy::Annotation => LayerSource::Annotation,
            LayerBy::Module => return None,
        };
        Some(LayersOptions {
            source,
            trim: self.trim,
            batch_size: self.batch_size,
        })
    }
}

impl Default for LayersSettings {
    fn default() -> Self {
        LayersSettings {
            by: LayerBy::Op,
            kernels: false,
            steps: false,
            trim: 0.1,
            batch_size: None,
            top: 15,
        }
    }
}

/// The layer tables, or the module tree with `by = module`; serialises as either report.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum LayersResult {
    Layers(Box<LayersReport>),
    Modules(ModulesReport),
}

impl Analysis for Layers {
    const NAME: &'static str = "layers";
    const SUMMARY: &'static str = "Layer, kernel and model tables (XSP A1-A15): latency, \
occurrences, allocated memory, kernels, GPU vs CPU latency, throughput, roofline where FLOPs and \
bytes are known";
    const WINDOW: &'static str = "every layer instance (top-level op or annotation), kernel and \
step of the trace";
    const DOC: &'static str = "docs/analyses/layers-roofline.md";
    const EXAMPLES: &'static [&'static str] = &[
        "strato layers trace.json.gz",
        "strato layers trace.json.gz --kernels --csv",
        "strato layers trace.json.gz --by annotation --json",
    ];
    const OPTIONS: &'static [OptionSpec] = &[
        OptionSpec {
            name: "by",
            help: "what a layer is: top-level framework ops, annotations, or nn.Modules (the \
module tree)",
            kind: OptionKind::Choice(&["op", "annotation", "module"]),
            default: "op",
        },
        OptionSpec {
            name: "kernels",
            help: "show the per-kernel table instead of the layer table",
            kind: OptionKind::Flag,
            default: "false",
        },
        OptionSpec {
            name: "steps",
            help: "show the per-step (model) table instead of the layer table",
            kind: OptionKind::Flag,
            default: "false",
        },
        OptionSpec {
            name: "trim",
            help: "fraction trimmed from each end for trimmed means, in [0, 0.5)",
            kind: OptionKind::Number,
            default: "0.1",
        },
        OptionSpec {
            name: "batch_size",
            help: "samples per step (turns steps/s into samples/s)",
            kind: OptionKind::Count { min: 1 },
            default: "",
        },
        OptionSpec {
            name: "top",
            help: "rows shown per table in the text (CSV and JSON hold all)",
            kind: OptionKind::Count { min: 0 },
            default: "15",
        },
    ];
    const TABLES: &'static [TableSpec] = &[
        TableSpec {
            name: "layers",
            about: "one row per layer name: occurrences, CPU and GPU latency, kernels, roofline",
            path: &["layers"],
            inherit: &[],
            options: &[],
        },
        TableSpec {
            name: "layer_kernels",
            about: "one row per kernel name: durations, launch dimensions, roofline",
            path: &["kernels"],
            inherit: &[],
            options: &[],
        },
        TableSpec {
            name: "layer_steps",
            about: "one row per step of each process: CPU, end-to-end and GPU busy time",
            path: &["steps"],
            inherit: &[],
            options: &[],
        },
    ];
    const READS: Reads = Reads::EVERYTHING;
    /// The report's layers and modules sections.
    const IN_REPORT: InReport = InReport::OwnSection;
    type Options = LayersSettings;
    type Output = LayersResult;

    fn check_options(settings: &LayersSettings) -> Result<(), String> {
        if !(0.0..0.5).contains(&settings.trim) {
            return Err("--trim must be in [0, 0.5)".into());
        }
        if settings.kernels && settings.steps {
            return Err("--kernels and --steps are two views: ask for one".into());
        }
        if settings.by == LayerBy::Module && (settings.kernels || settings.steps) {
            return Err("--kernels and --steps do not apply to --by module".into());
        }
        Ok(())
    }

    fn run(
        analyzed: &Analyzed<'_>,
        settings: &LayersSettings,
    ) -> Result<LayersResult, AnalysisError> {
        Ok(match settings.layers_options() {
            None => LayersResult::Modules(modules(analyzed)),
            Some(options) => LayersResult::Layers(Box::new(layers(analyzed, &options))),
        })
    }

    /// One file or stored profile streams ([`LayersStream`], or [`ModulesStream`] with `by =
    /// module`): memory holds a few words per CPU-thread span and device op, not the spans
    /// and their args.
    fn stream(settings: &LayersSettings) -> Option<Box<dyn Stream<LayersResult>>> {
        Some(match settings.layers_options() {
            None => streamed(ModulesStream::new(), ModulesStream::add, |s, trace| {
                LayersResult::Modules(s.finish(trace))
            }),
            Some(options) => streamed(LayersStream::new(options), LayersStream::add, |s, trace| {
                LayersResult::Layers(Box::new(s.finish(trace)))
            }),
        })
    }

    fn render_text(result: &LayersResult, settings: &LayersSettings) -> String {
        render(result, settings, TableFormat::Text)
    }

    /// The table the text would show, every row.
    fn render_csv(result: &LayersResult, settings: &LayersSettings, raw: bool) -> Option<String> {
        Some(render(result, settings, TableFormat::Csv { raw }))
    }
}

fn render(result: &LayersResult, settings: &LayersSettings, format: TableFormat) -> String {
    let top = settings.top;
    crate::text::written(|out| match result {
        LayersResult::Modules(report) => modules_table(out, report, top, format),
        LayersResult::Layers(report) if settings.kernels => kernels_table(out, report, top, format),
        LayersResult::Layers(report) if settings.steps => steps_table(out, report, top, format),
        LayersResult::Layers(report) => layers_table(out, report, top, format),
    })
}

fn layers_table(
    out: &mut Vec<u8>,
    report: &LayersReport,
    top: usize,
    format: TableFormat,
) -> io::Result<()> {
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
    out: &mut Vec<u8>,
    report: &LayersReport,
    top: usize,
    format: TableFormat,
) -> io::Result<()> {
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
        let rest: Vec<&KernelRow> = report.kernels.iter().skip(top).collect();
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
    out: &mut Vec<u8>,
    report: &LayersReport,
    top: usize,
    format: TableFormat,
) -> io::Result<()> {
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
