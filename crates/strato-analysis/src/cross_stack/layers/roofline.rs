//! `roofline` as a registered analysis ([`crate::registry`]): per kernel, layer and model, the
//! arithmetic intensity and attained FLOP/s against the device's ridge point. The rows come
//! from the layers analysis (the parent module).

use std::io::{self, Write};

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use strato_trace::Ns;

use super::text::{device_line, notes};
use super::{layers, LayerSource, LayersOptions, LayersReport, LayersStream, Roofline};
use crate::analyzed::Analyzed;
use crate::registry::{
    streamed, Analysis, AnalysisError, InReport, OptionKind, OptionSpec, Reads, Stream, TableSpec,
};
use crate::text::table::{Table, TableFormat};
use crate::text::units::{fit, ms_num, opt};

/// The roofline per kernel, layer and model.
#[derive(Debug)]
pub struct RooflineAnalysis;

/// The options of [`RooflineAnalysis`] as the front ends give them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RooflineSettings {
    /// What a layer is.
    pub by: LayerSource,
    /// Rows shown in the text (the CSV and JSON hold all).
    pub top: usize,
}

impl RooflineSettings {
    /// The options of the layer tables the rows come from.
    fn layers_options(&self) -> LayersOptions {
        LayersOptions {
            source: self.by,
            trim: 0.1,
            batch_size: None,
        }
    }
}

impl Default for RooflineSettings {
    fn default() -> Self {
        RooflineSettings {
            by: LayerSource::Op,
            top: 15,
        }
    }
}

/// The layers analysis the roofline reads; serialises as the command's JSON (`device`,
/// `rows`, `notes`).
#[derive(Debug, Clone)]
pub struct RooflineResult(pub LayersReport);

impl Serialize for RooflineResult {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let report = &self.0;
        json!({"device": report.device, "rows": roofline_rows(report), "notes": report.notes})
            .serialize(serializer)
    }
}

impl Analysis for RooflineAnalysis {
    const NAME: &'static str = "roofline";
    const SUMMARY: &'static str = "Roofline per kernel, layer and model: arithmetic intensity, \
attained FLOP/s, memory- or compute-bound against the device's ridge point (\"unknown\" where \
inputs are missing)";
    const WINDOW: &'static str = "every layer instance, kernel and step of the trace";
    const DOC: &'static str = "docs/analyses/layers-roofline.md";
    const EXAMPLES: &'static [&'static str] = &[
        "strato roofline trace.json.gz",
        "strato roofline trace.json.gz metrics.csv --json",
        "strato roofline trace.json.gz --by annotation --csv",
    ];
    const OPTIONS: &'static [OptionSpec] = &[
        OptionSpec {
            name: "by",
            help: "what a layer is: top-level framework ops, or annotations (modules have no \
roofline: see `strato layers --by module`)",
            kind: OptionKind::Choice(&["op", "annotation"]),
            default: "op",
        },
        OptionSpec {
            name: "top",
            help: "rows shown in the text table (CSV and JSON hold all)",
            kind: OptionKind::Count { min: 0 },
            default: "15",
        },
    ];
    const TABLES: &'static [TableSpec] = &[TableSpec {
        name: "roofline",
        about: "one row per model, layer and kernel: FLOPs, bytes, intensity, attained FLOP/s, \
bound",
        path: &["rows"],
        inherit: &[],
        options: &[],
    }];
    const READS: Reads = Reads::EVERYTHING;
    /// The report's roofline section (its plot).
    const IN_REPORT: InReport = InReport::OwnSection;
    type Options = RooflineSettings;
    type Output = RooflineResult;

    fn run(
        analyzed: &Analyzed<'_>,
        settings: &RooflineSettings,
    ) -> Result<RooflineResult, AnalysisError> {
        Ok(RooflineResult(layers(analyzed, &settings.layers_options())))
    }

    /// One file or stored profile streams ([`LayersStream`]).
    fn stream(settings: &RooflineSettings) -> Option<Box<dyn Stream<RooflineResult>>> {
        Some(streamed(
            LayersStream::new(settings.layers_options()),
            LayersStream::add,
            |s, trace| RooflineResult(s.finish(trace)),
        ))
    }

    fn render_text(result: &RooflineResult, settings: &RooflineSettings) -> String {
        render(result, settings.top, TableFormat::Text)
    }

    /// Every row with known FLOPs or bytes.
    fn render_csv(
        result: &RooflineResult,
        settings: &RooflineSettings,
        raw: bool,
    ) -> Option<String> {
        Some(render(result, settings.top, TableFormat::Csv { raw }))
    }
}

fn render(result: &RooflineResult, top: usize, format: TableFormat) -> String {
    let rows = roofline_rows(&result.0);
    crate::text::written(|out| roofline_table(out, &result.0, &rows, top, format))
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
    out: &mut Vec<u8>,
    report: &LayersReport,
    rows: &[Value],
    top: usize,
    format: TableFormat,
) -> io::Result<()> {
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
