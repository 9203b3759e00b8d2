//! `gpu-time` as a registered analysis ([`crate::registry`]): its options, tables, JSON shape
//! and text. The breakdown itself is the parent module's; this file says how every front end
//! shows it. The JSON (and so Python's tables and the SQL views) keeps the command's stable
//! keys: times in microseconds.

use std::io::{self, Write};

use serde::{Deserialize, Serialize};
use strato_trace::Trace;

use super::{gpu_time, DeviceExposure, GpuTimeOptions, GpuTimeReport, GpuTimeStream, Window};
use crate::analyzed::Analyzed;
use crate::registry::{
    merged_ranks, Analysis, AnalysisError, Events, InReport, OptionKind, OptionSpec, RankPart,
    RankRow, Reads, Stream, TableSpec,
};
use crate::text::units::{fit, ms};

/// The device temporal breakdown per rank and the idle breakdown per stream.
#[derive(Debug)]
pub struct GpuTime;

/// The options of [`GpuTime`] as the front ends give them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GpuTimeSettings {
    pub window: Window,
    /// Gaps shorter than this (microseconds) count as kernel wait.
    pub kernel_wait_us: f64,
}

impl Default for GpuTimeSettings {
    fn default() -> Self {
        GpuTimeSettings {
            window: Window::Whole,
            kernel_wait_us: 30.0,
        }
    }
}

impl GpuTimeSettings {
    /// The breakdown's options (the threshold rounded to whole nanoseconds).
    pub fn options(&self) -> GpuTimeOptions {
        GpuTimeOptions {
            window: self.window,
            kernel_wait_threshold_ns: (self.kernel_wait_us * 1000.0).round() as i64,
        }
    }
}

impl Analysis for GpuTime {
    const NAME: &'static str = "gpu-time";
    const SUMMARY: &'static str = "Device temporal breakdown per rank (idle / compute / \
non-compute, comm/comp overlap) and idle time per stream, as HTA defines them; exposed \
communication per device";
    const WINDOW: &'static str = "whole: every device event of a rank, ns; hta: HTA's window \
(events launched before the last ProfilerStep) in whole microseconds";
    const DOC: &'static str = "docs/analyses/gpu-time.md";
    const EXAMPLES: &'static [&'static str] = &[
        "strato gpu-time trace.json.gz",
        "strato gpu-time ranks/ --window hta --json",
        "strato gpu-time ranks/ --csv --table gpu_time_streams",
    ];
    const OPTIONS: &'static [OptionSpec] = &[
        OptionSpec {
            name: "window",
            help: "whole: every device event, exact ns; hta: Holistic Trace Analysis's window \
and rounding",
            kind: OptionKind::Choice(&["whole", "hta"]),
            default: "whole",
        },
        OptionSpec {
            name: "kernel_wait_us",
            help: "gaps shorter than this (us) count as kernel wait",
            kind: OptionKind::Number,
            default: "30",
        },
    ];
    const TABLES: &'static [TableSpec] = &[
        TableSpec {
            name: "gpu_time",
            about: "one row per rank: idle / compute / non-compute time and shares",
            path: &["ranks"],
            inherit: &["window"],
            options: &[],
        },
        TableSpec {
            name: "gpu_time_streams",
            about: "idle time per rank and stream: host wait, kernel wait, other",
            path: &["ranks", "streams"],
            inherit: &["rank"],
            options: &[],
        },
        TableSpec {
            name: "gpu_time_exposure",
            about: "exposed communication per rank and device that ran work (whole window)",
            path: &["ranks", "exposure"],
            inherit: &["rank"],
            options: &[],
        },
    ];
    const RANK_BY_RANK: bool = true;
    /// Device spans, the host spans that carry a launch correlation, and steps; no args.
    const READS: Reads = Reads {
        events: Events::DeviceTime,
        args: None,
    };
    /// The report's device-time section (its plots and per-stream table).
    const IN_REPORT: InReport = InReport::OwnSection;
    type Options = GpuTimeSettings;
    type Output = GpuTimeReport;

    fn run(
        analyzed: &Analyzed<'_>,
        settings: &GpuTimeSettings,
    ) -> Result<GpuTimeReport, AnalysisError> {
        Ok(gpu_time(analyzed.trace(), &settings.options()))
    }

    fn merge(
        parts: Vec<RankPart<GpuTimeReport>>,
        settings: &GpuTimeSettings,
    ) -> Option<GpuTimeReport> {
        Some(GpuTimeReport {
            window: settings.window,
            ranks: merged_ranks(parts, |report| report.ranks),
        })
    }

    fn render_text(report: &GpuTimeReport, _: &GpuTimeSettings) -> String {
        crate::text::written(|out| write_text(out, report))
    }

    fn stream(settings: &GpuTimeSettings) -> Option<Box<dyn Stream<GpuTimeReport>>> {
        Some(Box::new(GpuTimeStream::new(settings.options())))
    }
}

impl Stream<GpuTimeReport> for GpuTimeStream {
    fn add(&mut self, batch: &Trace) {
        GpuTimeStream::add(self, batch);
    }
    fn finish(self: Box<Self>, trace: &Trace) -> GpuTimeReport {
        GpuTimeStream::finish(*self, trace)
    }
}

/// The report serialises as its stable JSON shape (`strato gpu-time --json`).
impl Serialize for GpuTimeReport {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        gpu_time_json(self).serialize(serializer)
    }
}

/// The JSON shape of `strato gpu-time --json` (stable keys; times in microseconds).
#[derive(Debug, Serialize)]
struct GpuTimeJson {
    window: Window,
    ranks: Vec<RankJson>,
}

#[derive(Debug, Serialize)]
struct RankJson {
    rank: i64,
    source: String,
    device_events: usize,
    idle_pct: f64,
    compute_pct: f64,
    non_compute_pct: f64,
    kernel_time_us: f64,
    idle_us: f64,
    compute_us: f64,
    non_compute_us: f64,
    comm_comp_overlap_pct: Option<f64>,
    window_start_ns: Option<i64>,
    window_end_ns: Option<i64>,
    streams: Vec<StreamJson>,
    /// Exposed communication per device that ran work (whole window only: absent with
    /// `--window hta`, whose output stays HTA's).
    #[serde(skip_serializing_if = "Option::is_none")]
    exposure: Option<Vec<DeviceExposure>>,
    note: Option<String>,
    /// Events that looked like device work under a category no level rule names, per category.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    unclassified_device_like_events: std::collections::BTreeMap<String, u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    warning: Option<String>,
}

#[derive(Debug, Serialize)]
struct StreamJson {
    device: i64,
    stream: i64,
    events: usize,
    host_wait_us: f64,
    kernel_wait_us: f64,
    other_us: f64,
    /// Events that started before earlier events on the stream had ended.
    overlapping_events: usize,
}

fn us(ns: i64) -> f64 {
    ns as f64 / 1000.0
}

/// The report in its JSON shape.
fn gpu_time_json(report: &GpuTimeReport) -> GpuTimeJson {
    GpuTimeJson {
        window: report.window,
        ranks: report
            .ranks
            .iter()
            .map(|r| RankJson {
                rank: r.rank,
                source: r.source.clone(),
                device_events: r.device_events,
                idle_pct: r.idle_pct,
                compute_pct: r.compute_pct,
                non_compute_pct: r.non_compute_pct,
                kernel_time_us: us(r.kernel_time_ns),
                idle_us: us(r.idle_ns),
                compute_us: us(r.compute_ns),
                non_compute_us: us(r.non_compute_ns),
                comm_comp_overlap_pct: r.comm_comp_overlap_pct,
                window_start_ns: r.window_start_ns,
                window_end_ns: r.window_end_ns,
                streams: r
                    .streams
                    .iter()
                    .map(|s| StreamJson {
                        device: s.device,
                        stream: s.stream,
                        events: s.events,
                        host_wait_us: us(s.host_wait_ns),
                        kernel_wait_us: us(s.kernel_wait_ns),
                        other_us: us(s.other_ns),
                        overlapping_events: s.overlapping_events,
                    })
                    .collect(),
                exposure: r.exposure.clone(),
                note: r.note.clone(),
                unclassified_device_like_events: r.unclassified_device_like_events.clone(),
                warning: r.unclassified_warning(),
            })
            .collect(),
    }
}

/// `strato gpu-time` as text.
fn write_text(out: &mut Vec<u8>, report: &GpuTimeReport) -> io::Result<()> {
    let window = match report.window {
        Window::Whole => "whole trace, ns resolution",
        Window::Hta => "HTA window and rounding",
    };
    writeln!(
        out,
        "device temporal breakdown ({window}); percentages of kernel time\n"
    )?;
    writeln!(
        out,
        "{:>5}  {:>8}  {:>8}  {:>12}  {:>14}  {:>13}  source",
        "rank", "idle %", "compute %", "non-compute %", "kernel time", "comm/comp ovl"
    )?;
    for r in &report.ranks {
        writeln!(
            out,
            "{:>5}  {:>8.2}  {:>9.2}  {:>13.2}  {:>14}  {:>13}  {}",
            r.rank,
            r.idle_pct,
            r.compute_pct,
            r.non_compute_pct,
            ms(r.kernel_time_ns),
            r.comm_comp_overlap_pct
                .map_or("n/a".into(), |v| format!("{v:.2} %")),
            r.source
        )?;
        if let Some(note) = &r.note {
            writeln!(out, "       note: {note}")?;
        }
        if let Some(warning) = r.unclassified_warning() {
            writeln!(out, "       warning: {warning}")?;
        }
    }
    writeln!(
        out,
        "\nidle time per stream (host wait: launch came late; kernel wait: gap < threshold)\n"
    )?;
    writeln!(
        out,
        "{:>5}  {:>6}  {:>6}  {:>8}  {:>14}  {:>14}  {:>14}  {:>11}",
        "rank", "device", "stream", "events", "host wait", "kernel wait", "other", "overlapping"
    )?;
    let mut overlapping = 0;
    for r in &report.ranks {
        for s in &r.streams {
            overlapping += s.overlapping_events;
            writeln!(
                out,
                "{:>5}  {:>6}  {:>6}  {:>8}  {:>14}  {:>14}  {:>14}  {:>11}",
                r.rank,
                s.device,
                s.stream,
                s.events,
                ms(s.host_wait_ns),
                ms(s.kernel_wait_ns),
                ms(s.other_ns),
                s.overlapping_events
            )?;
        }
    }
    if overlapping > 0 {
        let how = match report.window {
            Window::Whole => "no gap is counted before them",
            Window::Hta => "HTA counts their negative gaps",
        };
        writeln!(
            out,
            "
{overlapping} events started before earlier events on their stream had ended \
             (overlapping); {how}"
        )?;
    }
    gpu_exposure(out, report)
}

/// The exposure table of `strato gpu-time` (whole window only): per device that ran work, and
/// per step, the window split into compute alone / compute with communication beside it /
/// exposed communication / exposed copy / idle.
fn gpu_exposure(out: &mut Vec<u8>, report: &GpuTimeReport) -> io::Result<()> {
    if !report.ranks.iter().any(|r| r.exposure.is_some()) {
        return Ok(());
    }
    writeln!(
        out,
        "\nexposed communication per device that ran work (parts add up to the device's window)\n"
    )?;
    writeln!(
        out,
        "{:>5}  {:>6}  {:<18}  {:>14}  {:>14}  {:>14}  {:>14}  {:>14}  {:>14}",
        "rank",
        "device",
        "step",
        "window",
        "compute alone",
        "compute + comm",
        "exposed comm",
        "exposed copy",
        "idle"
    )?;
    for r in &report.ranks {
        for d in r.exposure.iter().flatten() {
            let rows = std::iter::once(("all", &d.exposure))
                .chain(d.steps.iter().map(|s| (s.step.as_str(), &s.exposure)));
            for (step, e) in rows {
                writeln!(
                    out,
                    "{:>5}  {:>6}  {:<18}  {:>14}  {:>14}  {:>14}  {:>14}  {:>14}  {:>14}",
                    r.rank,
                    d.device,
                    fit(step, 18),
                    ms(e.window_end_ns - e.window_start_ns),
                    ms(e.compute_alone_ns),
                    ms(e.compute_with_communication_ns),
                    ms(e.exposed_communication_ns),
                    ms(e.exposed_copy_ns),
                    ms(e.idle_ns)
                )?;
            }
        }
    }
    Ok(())
}

impl RankRow for super::RankGpuTime {
    fn rank(&self) -> i64 {
        self.rank
    }
    fn set_rank(&mut self, rank: i64) {
        self.rank = rank;
    }
}
