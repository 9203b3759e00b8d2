//! `memory` as a registered analysis ([`crate::registry`]): its options, tables, text and
//! CSV. The allocation series and copies are the parent module's.

use std::io::{self, Write};

use serde::{Deserialize, Serialize};

use super::{memory, MemoryOptions, MemoryReport, MemoryStream};
use crate::analyzed::Analyzed;
use crate::registry::{
    streamed, Analysis, AnalysisError, Events, InReport, OptionKind, OptionSpec, RankPart, Reads,
    Stream, TableSpec,
};
use crate::text::table::{Table, TableFormat};

/// Allocated bytes per device over time, top allocating ops, host<->device copies.
#[derive(Debug)]
pub struct Memory;

/// The options of [`Memory`] as the front ends give them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MemorySettings {
    /// Allocating ops kept per device; the rest folded (0: all).
    pub top: usize,
    /// Most points per allocation series in JSON (bucket maxima keep the peak).
    pub max_points: usize,
    /// Time bins of the copy bandwidth series.
    pub bins: usize,
}

impl Default for MemorySettings {
    fn default() -> Self {
        MemorySettings {
            top: 20,
            max_points: 512,
            bins: 50,
        }
    }
}

impl Analysis for Memory {
    const NAME: &'static str = "memory";
    const SUMMARY: &'static str = "Device memory: allocated bytes per device over time (peak and \
when), top allocating ops, host<->device copies by direction (sizes, bandwidth over time)";
    const WINDOW: &'static str = "every allocation event and copy of each device";
    const DOC: &'static str = "docs/analyses/kernels-memory.md";
    const EXAMPLES: &'static [&'static str] = &[
        "strato memory trace.json.gz",
        "strato memory trace.json.gz --json --max-points 2000",
        "strato memory trace.json.gz --csv --table memory_copies",
    ];
    const OPTIONS: &'static [OptionSpec] = &[
        OptionSpec {
            name: "top",
            help: "allocating ops kept per device; the rest folded (0: all)",
            kind: OptionKind::Count { min: 0 },
            default: "20",
        },
        OptionSpec {
            name: "max_points",
            help: "most points per allocation series in JSON (bucket maxima keep the peak)",
            kind: OptionKind::Count { min: 0 },
            default: "512",
        },
        OptionSpec {
            name: "bins",
            help: "time bins of the copy bandwidth series",
            kind: OptionKind::Count { min: 0 },
            default: "50",
        },
    ];
    const TABLES: &'static [TableSpec] = &[
        TableSpec {
            name: "memory",
            about: "one row per device's allocation series: samples, peak and when, capacity",
            path: &["devices"],
            inherit: &[],
            options: &[],
        },
        TableSpec {
            name: "memory_copies",
            about: "copies per rank, device and direction: count, time, bytes, bandwidth",
            path: &["copies"],
            inherit: &[],
            options: &[],
        },
    ];
    /// Spans, instants and counters with their attributes (allocation sizes, copy bytes).
    const READS: Reads = Reads {
        events: Events::NoFlows,
        args: Some(strato_trace::projection::ArgsScope::All),
    };
    /// The report's memory section (its series plots).
    const IN_REPORT: InReport = InReport::OwnSection;
    /// Each device's series and copies are its rank's alone: several rank files are read one
    /// at a time.
    const RANK_BY_RANK: bool = true;
    type Options = MemorySettings;
    type Output = MemoryReport;

    /// The files' devices in input order (the whole job's track order) and their copies, each
    /// rank numbered as the whole job numbers it; the copies sorted and the notes made over
    /// the job, as on the whole trace.
    fn merge(parts: Vec<RankPart<MemoryReport>>, _: &MemorySettings) -> Option<MemoryReport> {
        let (mut devices, mut copies) = (Vec::new(), Vec::new());
        for part in parts {
            let (value, numbering) = part.numbered();
            for mut device in value.devices {
                numbering.renumber(&mut device.rank, &mut device.rank_index);
                devices.push(device);
            }
            for mut copy in value.copies {
                numbering.renumber(&mut copy.rank, &mut copy.rank_index);
                copies.push(copy);
            }
        }
        Some(MemoryReport::of_rows(devices, copies))
    }

    fn run(
        analyzed: &Analyzed<'_>,
        settings: &MemorySettings,
    ) -> Result<MemoryReport, AnalysisError> {
        Ok(memory(analyzed.trace(), &options(settings)))
    }

    /// One file or stored profile streams ([`MemoryStream`]).
    fn stream(settings: &MemorySettings) -> Option<Box<dyn Stream<MemoryReport>>> {
        let options = options(settings);
        Some(streamed(
            MemoryStream::default(),
            MemoryStream::add,
            move |stream, trace| stream.finish(trace, &options),
        ))
    }

    fn render_text(report: &MemoryReport, _: &MemorySettings) -> String {
        render(report, TableFormat::Text)
    }

    /// The device table, each device's allocating ops, then the copies, a blank line apart.
    fn render_csv(report: &MemoryReport, _: &MemorySettings, raw: bool) -> Option<String> {
        Some(render(report, TableFormat::Csv { raw }))
    }
}

fn options(settings: &MemorySettings) -> MemoryOptions {
    MemoryOptions {
        max_points: settings.max_points,
        bandwidth_bins: settings.bins,
        top_ops: settings.top,
    }
}

fn mib(bytes: f64) -> String {
    format!("{:.2}", bytes / (1024.0 * 1024.0))
}

fn render(report: &MemoryReport, format: TableFormat) -> String {
    crate::text::written(|out| write_tables(out, report, format))
}

fn write_tables(out: &mut Vec<u8>, report: &MemoryReport, format: TableFormat) -> io::Result<()> {
    let csv = format.is_csv();
    let mut t = Table::new(&[
        "rank",
        "pid",
        "device",
        "samples",
        "peak MiB",
        "peak at (ns)",
        "min MiB",
        "final MiB",
        "capacity MiB",
    ]);
    for d in &report.devices {
        t.row(vec![
            d.rank.to_string(),
            d.pid.map_or("-".into(), |p| p.to_string()),
            d.device.map_or("-".into(), |p| p.to_string()),
            d.samples.to_string(),
            mib(d.peak_bytes),
            d.peak_ns.map_or("-".into(), |p| p.to_string()),
            mib(d.min_bytes),
            mib(d.final_bytes),
            d.capacity_bytes.map_or("-".into(), |c| mib(c as f64)),
        ]);
    }
    if !csv {
        writeln!(out, "allocated memory per device (allocation events)\n")?;
    }
    t.write(out, format)?;
    for d in &report.devices {
        if d.ops.is_empty() {
            continue;
        }
        writeln!(out)?;
        if !csv {
            writeln!(
                out,
                "top allocating ops, rank {} device {}\n",
                d.rank,
                d.device.map_or("-".into(), |p| p.to_string())
            )?;
        }
        let mut t = Table::new(&[
            "<op",
            "allocs",
            "alloc MiB",
            "largest MiB",
            "frees",
            "freed MiB",
        ]);
        for r in &d.ops {
            t.row(vec![
                r.op.clone(),
                r.allocations.to_string(),
                mib(r.allocated_bytes as f64),
                mib(r.max_bytes as f64),
                r.frees.to_string(),
                mib(r.freed_bytes as f64),
            ]);
        }
        t.write(out, format)?;
    }
    writeln!(out)?;
    if !csv {
        writeln!(out, "copies by direction\n")?;
    }
    let mut t = Table::new(&[
        "rank", "device", "dir", "count", "time us", "MiB", "mean KiB", "max MiB", "GB/s",
        "max GB/s",
    ]);
    for c in &report.copies {
        t.row(vec![
            c.rank.to_string(),
            c.device.to_string(),
            c.direction.label().to_string(),
            c.count.to_string(),
            format!("{:.1}", c.total_ns as f64 / 1e3),
            c.bytes.map_or("-".into(), |b| mib(b as f64)),
            c.mean_bytes
                .map_or("-".into(), |b| format!("{:.1}", b / 1024.0)),
            c.max_bytes.map_or("-".into(), |b| mib(b as f64)),
            c.bandwidth_gb_s.map_or("-".into(), |b| format!("{b:.2}")),
            c.max_bandwidth_gb_s
                .map_or("-".into(), |b| format!("{b:.2}")),
        ]);
    }
    t.write(out, format)?;
    if !csv {
        for n in &report.notes {
            writeln!(out, "note: {n}")?;
        }
    }
    Ok(())
}
