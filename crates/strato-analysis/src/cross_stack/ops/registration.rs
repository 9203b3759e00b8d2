//! `ops` as a registered analysis ([`crate::registry`]): its options (a device spec file
//! among them), table and text. The per-op table itself is the parent module's.

use std::io::{self, Write};

use serde::{Deserialize, Serialize};

use super::{ops, OpRow, OpsReport, OpsStream};
use crate::analyzed::Analyzed;
use crate::models::devices::DeviceSpec;
use crate::registry::{
    streamed, Analysis, AnalysisError, Events, InReport, OptionKind, OptionSpec, Reads, Stream,
    TableSpec,
};
use crate::text::table::{Table, TableFormat};
use crate::text::units::{fit, ms_num, opt, us_num};

/// The per-op performance table.
#[derive(Debug)]
pub struct Ops;

/// The options of [`Ops`] as the front ends give them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OpsSettings {
    /// A device spec (JSON text, read by the engine from the file given) overriding the
    /// detected device.
    pub device_spec: Option<String>,
    /// Rows shown in the text table.
    pub top: usize,
}

impl Default for OpsSettings {
    fn default() -> Self {
        OpsSettings {
            device_spec: None,
            top: 20,
        }
    }
}

/// Whether a device spec file's text is one ([`DeviceSpec::from_json`]).
fn check_device_spec(text: &str) -> Result<(), String> {
    DeviceSpec::from_json(text)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

impl Analysis for Ops {
    const NAME: &'static str = "ops";
    const SUMMARY: &'static str = "Per-op performance models: ops grouped by (op, input shapes, \
dtypes) with count, device time, TFLOP/s, TB/s, % of the device's peak for the dtype and \
roofline bound; ops without a model say why";
    const WINDOW: &'static str = "every framework op with device work, and every collective, \
of each rank";
    const DOC: &'static str = "docs/analyses/ops.md";
    const EXAMPLES: &'static [&'static str] = &[
        "strato ops trace.json.gz",
        "strato ops trace.json.gz --json",
        "strato ops trace.json.gz --device-spec my_gpu.json",
    ];
    const OPTIONS: &'static [OptionSpec] = &[
        OptionSpec {
            name: "device_spec",
            help: "a JSON device spec overriding the detected device (fields of \
docs/analyses/ops.md)",
            kind: OptionKind::File {
                what: "the device spec",
                check: check_device_spec,
            },
            default: "",
        },
        OptionSpec {
            name: "top",
            help: "rows shown in the text table (CSV and JSON hold all)",
            kind: OptionKind::Count { min: 0 },
            default: "20",
        },
    ];
    const TABLES: &'static [TableSpec] = &[
        TableSpec {
            name: "ops",
            about: "one row per (op, input shapes, dtypes), collectives by (kind, size, dtype): \
count, device time, FLOPs, bytes, % of peak, bound",
            path: &["ops"],
            inherit: &[],
            options: &[],
        },
        TableSpec {
            name: "ops_devices",
            about: "one row per device: its name and the device table entry the peaks come from",
            path: &["devices"],
            inherit: &[],
            options: &[],
        },
    ];
    /// Spans with every attribute (framework ops' shapes and dtypes, collectives' sizes).
    const READS: Reads = Reads {
        events: Events::Spans,
        args: Some(strato_trace::projection::ArgsScope::All),
    };
    /// Alone, one file streams (1.4 GB generated trace, test build, 2026-11-30: 26.2 s and
    /// 208 MB, 0.15x the file); the report holds the whole trace, and the op table's working
    /// set and time would come on top of its other sections (issue 28).
    const IN_REPORT: InReport = InReport::Left(
        "the report holds the whole trace and runs every section on it: the op table's \
working set and time would come on top (issue 28); run `strato ops`, which streams one file",
    );
    type Options = OpsSettings;
    type Output = OpsReport;

    fn run(analyzed: &Analyzed<'_>, settings: &OpsSettings) -> Result<OpsReport, AnalysisError> {
        // The engine has checked the spec's text (`check_device_spec`).
        let spec = (settings.device_spec.as_deref()).and_then(|t| DeviceSpec::from_json(t).ok());
        Ok(ops(analyzed, spec.as_ref()))
    }

    /// One file or stored profile streams ([`OpsStream`]): memory holds a few words per CPU
    /// span and device op, not the spans and their args.
    fn stream(settings: &OpsSettings) -> Option<Box<dyn Stream<OpsReport>>> {
        let spec = (settings.device_spec.as_deref()).and_then(|t| DeviceSpec::from_json(t).ok());
        Some(streamed(
            OpsStream::new(spec),
            OpsStream::add,
            OpsStream::finish,
        ))
    }

    fn render_text(report: &OpsReport, settings: &OpsSettings) -> String {
        render(report, settings.top, TableFormat::Text)
    }

    fn render_csv(report: &OpsReport, settings: &OpsSettings, raw: bool) -> Option<String> {
        Some(render(report, settings.top, TableFormat::Csv { raw }))
    }
}

fn render(report: &OpsReport, top: usize, format: TableFormat) -> String {
    crate::text::written(|out| write_tables(out, report, top, format))
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

fn write_tables(
    out: &mut Vec<u8>,
    r: &OpsReport,
    top: usize,
    format: TableFormat,
) -> io::Result<()> {
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
fn collectives_table(out: &mut Vec<u8>, r: &OpsReport) -> io::Result<()> {
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
