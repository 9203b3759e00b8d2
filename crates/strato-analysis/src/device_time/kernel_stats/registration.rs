//! `kernels` as a registered analysis ([`crate::registry`]): its options, tables, text and
//! CSV. The statistics themselves are the parent module's; this file says how every front end
//! shows them.

use super::{kernel_stats, KernelStatsReport, KernelStatsStream, Latency, StatRow};
use crate::analyzed::Analyzed;
use crate::registry::{
    merged_ranks, streamed, Analysis, AnalysisError, InReport, OptionKind, OptionSpec, RankPart,
    RankRow, Reads, Stream, TableSpec,
};
use crate::text::table::{Table, TableFormat};
use crate::text::units::{fit_ascii, us};
use serde::{Deserialize, Serialize};

/// Kernel statistics per kernel name and per launching op, with launch and queue latencies.
#[derive(Debug)]
pub struct Kernels;

/// The options of [`Kernels`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KernelsOptions {
    /// Rows kept per table; the rest are folded into one `(other N)` row (0: all).
    pub top: usize,
}

impl Default for KernelsOptions {
    fn default() -> Self {
        KernelsOptions { top: 20 }
    }
}

impl Analysis for Kernels {
    const NAME: &'static str = "kernels";
    const SUMMARY: &'static str = "Kernel statistics per kernel and per launching op (count, \
total, mean, std, min, max, share), launch and queue latencies";
    const WINDOW: &'static str = "every device op of each rank (kernels, copies, sets; \
device-side syncs excluded)";
    const DOC: &'static str = "docs/analyses/kernels-memory.md";
    const EXAMPLES: &'static [&'static str] = &[
        "strato kernels trace.json.gz --top 15",
        "strato kernels trace.json.gz --csv > kernels.csv",
        "strato kernels ranks/ --csv --table kernel_latencies",
    ];
    const OPTIONS: &'static [OptionSpec] = &[OptionSpec {
        name: "top",
        help: "rows kept per table; the rest are folded into one `(other N)` row (0: all)",
        kind: OptionKind::Count { min: 0 },
        default: "20",
    }];
    const TABLES: &'static [TableSpec] = &[
        TableSpec {
            name: "kernel_stats",
            about: "one row per rank and kernel name, ranked by total time",
            path: &["ranks", "kernels"],
            inherit: &["rank"],
            options: &[],
        },
        TableSpec {
            name: "kernel_ops",
            about: "one row per rank and launching op, ranked by the device time it launched",
            path: &["ranks", "ops"],
            inherit: &["rank"],
            options: &[],
        },
        TableSpec {
            name: "kernel_latencies",
            about: "one row per rank: device ops and time, launch / queue / submit latencies",
            path: &["ranks"],
            inherit: &[],
            options: &[],
        },
    ];
    const RANK_BY_RANK: bool = true;
    /// Spans, and only device ops' args (queue times, copy bytes).
    const READS: Reads = Reads {
        events: crate::registry::Events::Spans,
        args: Some(strato_trace::projection::ArgsScope::DeviceOps),
    };
    /// The report's kernel section (per rank, the kernels folded after its own top).
    const IN_REPORT: InReport = InReport::OwnSection;
    type Options = KernelsOptions;
    type Output = KernelStatsReport;

    fn run(
        analyzed: &Analyzed<'_>,
        options: &KernelsOptions,
    ) -> Result<KernelStatsReport, AnalysisError> {
        Ok(kernel_stats(analyzed.trace(), options.top))
    }

    fn merge(
        parts: Vec<RankPart<KernelStatsReport>>,
        _: &KernelsOptions,
    ) -> Option<KernelStatsReport> {
        Some(KernelStatsReport {
            ranks: merged_ranks(parts, |report| report.ranks),
        })
    }

    fn render_text(report: &KernelStatsReport, _: &KernelsOptions) -> String {
        render(report, TableFormat::Text)
    }

    /// Per rank the kernel table then the launching-op table, a blank line after each.
    fn render_csv(report: &KernelStatsReport, _: &KernelsOptions, raw: bool) -> Option<String> {
        Some(render(report, TableFormat::Csv { raw }))
    }

    fn stream(options: &KernelsOptions) -> Option<Box<dyn Stream<KernelStatsReport>>> {
        let top = options.top;
        Some(streamed(
            KernelStatsStream::default(),
            KernelStatsStream::add,
            move |stream, trace| stream.finish(trace, top),
        ))
    }
}

/// A ranked statistics table; names shortened to 60 characters in text, whole in CSV.
fn stat_table(rows: &[StatRow], what: &'static str, csv: bool) -> Table {
    let mut t = Table::new(&[
        "rank#", what, "count", "total us", "mean us", "std us", "min us", "max us", "share %",
    ]);
    for (k, r) in rows.iter().enumerate() {
        t.row(vec![
            (k + 1).to_string(),
            if csv {
                r.name.clone()
            } else {
                fit_ascii(&r.name, 60)
            },
            r.count.to_string(),
            us(r.total_ns as f64),
            us(r.mean_ns),
            us(r.std_ns),
            us(r.min_ns as f64),
            us(r.max_ns as f64),
            format!("{:.2}", 100.0 * r.share),
        ]);
    }
    t
}

fn latency_line(label: &str, l: &Option<Latency>) -> String {
    match l {
        None => format!("{label}: not in this source"),
        Some(l) => format!(
            "{label}: n {} mean {} us  std {} us  min {} us  p50 {} us  p95 {} us  max {} us",
            l.count,
            us(l.mean_ns),
            us(l.std_ns),
            us(l.min_ns as f64),
            us(l.p50_ns as f64),
            us(l.p95_ns as f64),
            us(l.max_ns as f64)
        ),
    }
}

/// The tables (and, in text, each rank's header and latencies) in `format`.
fn render(report: &KernelStatsReport, format: TableFormat) -> String {
    crate::text::written(|out| write_tables(report, format, format.is_csv(), out))
}

fn write_tables(
    report: &KernelStatsReport,
    format: TableFormat,
    csv: bool,
    out: &mut Vec<u8>,
) -> std::io::Result<()> {
    use std::io::Write;
    for r in &report.ranks {
        if !csv {
            writeln!(
                out,
                "rank {} ({}): {} device ops, {} us device time\n",
                r.rank,
                r.source,
                r.device_ops,
                us(r.device_time_ns as f64)
            )?;
        }
        stat_table(&r.kernels, "<kernel", csv).write(out, format)?;
        writeln!(out)?;
        stat_table(&r.ops, "<launching op", csv).write(out, format)?;
        if !csv {
            writeln!(out)?;
            for (label, latency) in [
                (
                    "launch latency (API end -> device start)",
                    &r.launch_latency,
                ),
                ("queue latency (queued -> submit)", &r.queue_latency),
                ("submit latency (submit -> start)", &r.submit_latency),
            ] {
                writeln!(out, "{}", latency_line(label, latency))?;
            }
            writeln!(out)?;
        }
    }
    Ok(())
}

impl RankRow for super::RankKernelStats {
    fn rank(&self) -> i64 {
        self.rank
    }
    fn set_rank(&mut self, rank: i64) {
        self.rank = rank;
    }
}
