//! `breakdown` as a registered analysis ([`crate::registry`]): its options, tables, text and
//! CSV ([`super::text`]). The breakdown itself is the parent module's.

use serde::{Deserialize, Serialize};

use super::{breakdown, BreakdownOptions, BreakdownReport, BreakdownStream};
use crate::analyzed::Analyzed;
use crate::registry::{
    streamed, Analysis, AnalysisError, InReport, OptionKind, OptionSpec, RankPart, Reads, Stream,
    TableSpec,
};

/// The operation-scoped CPU/GPU breakdown per process and its language transitions.
#[derive(Debug)]
pub struct Breakdown;

/// The options of [`Breakdown`] as the front ends give them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BreakdownSettings {
    /// Keep `ProfilerStep#N` apart instead of folding them into `ProfilerStep#*`.
    pub per_step: bool,
    /// Rows shown per table in the text (the rest folded into one line); the JSON and the
    /// tables hold every row.
    pub top: usize,
}

impl Default for BreakdownSettings {
    fn default() -> Self {
        BreakdownSettings {
            per_step: false,
            top: 12,
        }
    }
}

impl Analysis for Breakdown {
    const NAME: &'static str = "breakdown";
    const SUMMARY: &'static str = "Operation-scoped CPU/GPU breakdown per process (RL-Scope): \
time by (phase, operation, resource, CPU level), and language transitions per operation";
    const WINDOW: &'static str = "per process: first start to last end of its CPU spans and \
the device work attributed to it; rows sum to it exactly";
    const DOC: &'static str = "docs/analyses/breakdown.md";
    const EXAMPLES: &'static [&'static str] = &[
        "strato breakdown trace.json.gz",
        "strato breakdown ranks/ --json",
        "strato breakdown trace.json.gz --csv > rows.csv",
        "strato breakdown trace.json.gz --csv --table operations",
    ];
    const OPTIONS: &'static [OptionSpec] = &[
        OptionSpec {
            name: "per_step",
            help: "keep ProfilerStep#N apart instead of folding them into ProfilerStep#*",
            kind: OptionKind::Flag,
            default: "false",
        },
        OptionSpec {
            name: "top",
            help: "rows shown per table in text output (the rest are folded into one line)",
            kind: OptionKind::Count { min: 0 },
            default: "12",
        },
    ];
    const TABLES: &'static [TableSpec] = &[
        TableSpec {
            name: "breakdown",
            about: "one row per process and (phase, operation, resource, CPU level); they sum \
to the process's window",
            path: &["processes", "rows"],
            inherit: &["rank", "pid"],
            options: &[],
        },
        TableSpec {
            name: "breakdown_processes",
            about: "one row per process: its window and attribution counts",
            path: &["processes"],
            inherit: &[],
            options: &[],
        },
        TableSpec {
            name: "operations",
            about: "one row per process and operation: CPU / CPU+GPU / GPU / idle time",
            path: &["processes", "operations"],
            inherit: &["rank", "pid"],
            options: &[],
        },
        TableSpec {
            name: "transitions",
            about: "one row per process, operation and language transition, with its count",
            path: &["processes", "transitions"],
            inherit: &["rank", "pid"],
            options: &[],
        },
    ];
    const READS: Reads = Reads::SPANS;
    /// The report's breakdown section (its plots and folded tables).
    const IN_REPORT: InReport = InReport::OwnSection;
    /// A process's breakdown reads its own rank only: several rank files are read one at a
    /// time.
    const RANK_BY_RANK: bool = true;
    type Options = BreakdownSettings;
    type Output = BreakdownReport;

    /// The files' processes in input order, each rank numbered as the whole job numbers it;
    /// the unattributed device ops added up and the cross-process summary made over the job.
    fn merge(
        parts: Vec<RankPart<BreakdownReport>>,
        _: &BreakdownSettings,
    ) -> Option<BreakdownReport> {
        let mut processes = Vec::new();
        let mut unattributed_device_ops = 0;
        for part in parts {
            let (value, numbering) = part.numbered();
            unattributed_device_ops += value.unattributed_device_ops;
            for mut process in value.processes {
                numbering.renumber(&mut process.rank, &mut process.rank_index);
                processes.push(process);
            }
        }
        Some(BreakdownReport {
            summary: super::summary(&processes),
            processes,
            unattributed_device_ops,
        })
    }

    fn run(
        analyzed: &Analyzed<'_>,
        settings: &BreakdownSettings,
    ) -> Result<BreakdownReport, AnalysisError> {
        Ok(breakdown(
            analyzed,
            &BreakdownOptions {
                per_step: settings.per_step,
            },
        ))
    }

    /// One file or stored profile streams ([`BreakdownStream`]): memory holds a few words per
    /// CPU-thread span and device op, not the spans, their scopes and parent links.
    fn stream(settings: &BreakdownSettings) -> Option<Box<dyn Stream<BreakdownReport>>> {
        let options = BreakdownOptions {
            per_step: settings.per_step,
        };
        Some(streamed(
            BreakdownStream::new(options),
            BreakdownStream::add,
            BreakdownStream::finish,
        ))
    }

    fn render_text(report: &BreakdownReport, settings: &BreakdownSettings) -> String {
        crate::text::written(|out| super::text::write_text(out, report, settings.top))
    }

    /// One line per (rank, pid, phase, operation, resource, CPU level).
    fn render_csv(report: &BreakdownReport, _: &BreakdownSettings, raw: bool) -> Option<String> {
        Some(crate::text::written(|out| {
            super::text::write_csv(out, report, raw)
        }))
    }
}
