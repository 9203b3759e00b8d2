//! `util` as a registered analysis ([`crate::registry`]): its options, table, JSON shape and
//! text. The check itself is the parent module's.

use std::io::{self, Write};

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::{util, UtilReport, UtilStream, DEFAULT_PERIODS_S};
use crate::analyzed::Analyzed;
use crate::registry::{
    streamed, Analysis, AnalysisError, InReport, OptionKind, OptionSpec, RankPart, Reads, Stream,
    TableSpec,
};
use crate::text::table::Table;
use crate::text::units::ms_num;

/// nvidia-smi's sampled utilization beside true device-busy time, per device.
#[derive(Debug)]
pub struct Util;

/// The options of [`Util`] as the front ends give them.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UtilSettings {
    /// Sampling periods in seconds; empty: [`DEFAULT_PERIODS_S`].
    pub period: Vec<f64>,
}

/// The check's result; serialises as the command's JSON (per device its fields, with
/// `sampled_pct` keyed by period).
#[derive(Debug, Clone, PartialEq)]
pub struct UtilResult(pub UtilReport);

impl Serialize for UtilResult {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        util_json(&self.0).serialize(serializer)
    }
}

impl Analysis for Util {
    const NAME: &'static str = "util";
    const SUMMARY: &'static str = "Utilization reality check (RL-Scope F.11): nvidia-smi's \
sampled figure beside true device-busy time, per device";
    const WINDOW: &'static str = "per device: its rank's first span start to last span end";
    const DOC: &'static str = "docs/analyses/util.md";
    const EXAMPLES: &'static [&'static str] = &[
        "strato util trace.json.gz",
        "strato util trace.json.gz --period 0.1 --period 1",
    ];
    const OPTIONS: &'static [OptionSpec] = &[OptionSpec {
        name: "period",
        help: "sampling period in seconds (repeatable; none: 1/6 s and 1 s)",
        kind: OptionKind::Positives,
        default: "",
    }];
    const TABLES: &'static [TableSpec] = &[TableSpec {
        name: "util",
        about: "one row per device: window, busy time, true busy %, sampled % per period",
        path: &["devices"],
        inherit: &[],
        options: &[],
    }];
    /// Spans (the window spans the rank's spans), no attributes.
    const READS: Reads = Reads::SPANS;
    /// The report's utilization section (its busy-over-time plot).
    const IN_REPORT: InReport = InReport::OwnSection;
    /// Each device's figures are its rank's alone: several rank files are read one at a time.
    const RANK_BY_RANK: bool = true;
    type Options = UtilSettings;
    type Output = UtilResult;

    fn run(analyzed: &Analyzed<'_>, settings: &UtilSettings) -> Result<UtilResult, AnalysisError> {
        Ok(UtilResult(util(analyzed.trace(), &periods(settings))))
    }

    /// The files' devices in input order (the whole job's order: by rank, then device), each
    /// rank numbered as the whole job numbers it.
    fn merge(parts: Vec<RankPart<UtilResult>>, _: &UtilSettings) -> Option<UtilResult> {
        let mut devices = Vec::new();
        for part in parts {
            let (value, numbering) = part.numbered();
            for mut device in value.0.devices {
                numbering.renumber(&mut device.rank, &mut device.rank_index);
                devices.push(device);
            }
        }
        Some(UtilResult(UtilReport { devices }))
    }

    /// One file or stored profile streams ([`UtilStream`]): 16 bytes per device op.
    fn stream(settings: &UtilSettings) -> Option<Box<dyn Stream<UtilResult>>> {
        let periods = periods(settings);
        Some(streamed(
            UtilStream::default(),
            UtilStream::add,
            move |stream, trace| UtilResult(stream.finish(trace, &periods)),
        ))
    }

    fn render_text(result: &UtilResult, _: &UtilSettings) -> String {
        crate::text::written(|out| write_text(out, &result.0))
    }
}

/// The sampling periods asked for, or the defaults.
fn periods(settings: &UtilSettings) -> Vec<f64> {
    if settings.period.is_empty() {
        DEFAULT_PERIODS_S.to_vec()
    } else {
        settings.period.clone()
    }
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

fn write_text(out: &mut Vec<u8>, report: &UtilReport) -> io::Result<()> {
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
