//! `modules` as a registered analysis ([`crate::registry`]): the nn.Module tree's table and
//! text (also `strato layers --by module`). The tree itself is the parent module's.

use std::io::{self, Write};

use super::{merged, modules, ModulesReport, ModulesStream};
use crate::analyzed::Analyzed;
use crate::registry::{
    streamed, Analysis, AnalysisError, InReport, NoOptions, OptionSpec, RankPart, Reads, Stream,
    TableSpec,
};
use crate::text::table::{Table, TableFormat};
use crate::text::units::{fit, ms_num, us_num};

/// The nn.Module tree: classes with their instances folded, recomputed forward passes.
#[derive(Debug)]
pub struct Modules;

impl Analysis for Modules {
    const NAME: &'static str = "modules";
    const SUMMARY: &'static str = "The nn.Module tree: per module class its calls, CPU time \
(inclusive, exclusive), device time and the spread over its instances; forward passes \
recomputed under backward";
    const WINDOW: &'static str = "every `nn.Module: ...` span of the trace";
    const DOC: &'static str = "docs/analyses/modules.md";
    const EXAMPLES: &'static [&'static str] = &[
        "strato modules trace.json.gz",
        "strato modules trace.json.gz --json",
    ];
    const OPTIONS: &'static [OptionSpec] = &[];
    const TABLES: &'static [TableSpec] = &[TableSpec {
        name: "modules",
        about: "one row per nn.Module class: instances, calls, CPU and device time, spread",
        path: &["modules"],
        inherit: &[],
        options: &[],
    }];
    const READS: Reads = Reads::EVERYTHING;
    /// The report's modules section.
    const IN_REPORT: InReport = InReport::OwnSection;
    /// A module call's parent and the device ops it owns are on its own rank: several rank
    /// files are read one at a time, their calls merged ([`merged`]).
    const RANK_BY_RANK: bool = true;
    type Options = NoOptions;
    type Output = ModulesReport;

    fn run(analyzed: &Analyzed<'_>, _: &NoOptions) -> Result<ModulesReport, AnalysisError> {
        Ok(modules(analyzed))
    }

    /// The files' calls in input order, made into one tree as the whole job's, its window on
    /// the job's clock ([`merged`]).
    fn merge(parts: Vec<RankPart<ModulesReport>>, _: &NoOptions) -> Option<ModulesReport> {
        Some(merged(parts))
    }

    /// One file or stored profile streams ([`ModulesStream`]): memory holds a few words per
    /// CPU-thread span and device op, and the module calls, not the spans and their args.
    fn stream(_: &NoOptions) -> Option<Box<dyn Stream<ModulesReport>>> {
        Some(streamed(
            ModulesStream::new(),
            ModulesStream::add,
            ModulesStream::finish,
        ))
    }

    fn render_text(report: &ModulesReport, _: &NoOptions) -> String {
        crate::text::written(|out| modules_table(out, report, usize::MAX, TableFormat::Text))
    }

    fn render_csv(report: &ModulesReport, _: &NoOptions, raw: bool) -> Option<String> {
        Some(crate::text::written(|out| {
            modules_table(out, report, usize::MAX, TableFormat::Csv { raw })
        }))
    }
}

/// `--by module`: the classes (instances folded, with their spread), then the recompute line.
pub(crate) fn modules_table(
    out: &mut Vec<u8>,
    r: &ModulesReport,
    top: usize,
    format: TableFormat,
) -> io::Result<()> {
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
