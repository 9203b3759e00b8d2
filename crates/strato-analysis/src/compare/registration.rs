//! `diff` as a registered comparison ([`crate::registry::Comparison`]): its options, its two
//! kinds of side and result (run to run by operation, stratum and kernel, [`super::diff`]; or
//! by framework op and module, [`super::op_diff`], with `by_op`), its tables and its text
//! ([`super::diff_text`]).

use serde::{Deserialize, Serialize};

use super::diff::{diff, DiffReport, DiffSide};
use super::op_diff::{op_diff, OpDiffReport, OpDiffSide};
use crate::analyzed::Analyzed;
use crate::registry::{
    AnalysisError, Comparison, Events, InReport, OptionKind, OptionSpec, Reads, TableSpec,
};
use crate::text::terminal::Terminal;

/// Two profiles compared (`strato diff A B`).
#[derive(Debug)]
pub struct Diff;

/// The options of [`Diff`] as the front ends give them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DiffSettings {
    /// Rows the text shows per table (the largest changes).
    pub top: u64,
    /// Keep `ProfilerStep#N` apart instead of folding them into `ProfilerStep#*`.
    pub per_step: bool,
    /// Compare by framework op and module ([`super::op_diff`]) instead.
    pub by_op: bool,
}

impl Default for DiffSettings {
    fn default() -> Self {
        DiffSettings {
            top: 15,
            per_step: false,
            by_op: false,
        }
    }
}

/// One profile's side: what [`diff`] or [`op_diff`] compares.
#[derive(Debug)]
pub enum DiffSides {
    Runs(DiffSide),
    ByOp(OpDiffSide),
}

/// The comparison; serialises as the report it holds.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum DiffOutput {
    Runs(DiffReport),
    ByOp(OpDiffReport),
}

impl Comparison for Diff {
    const NAME: &'static str = "diff";
    const SUMMARY: &'static str = "Compare two profiles (before/after a fix, two frameworks) per \
operation, stratum and kernel, or per framework op and module (--by-op)";
    const WINDOW: &'static str = "each side's whole trace: its breakdown windows (summed over \
processes) and device time (summed over ranks); with --by-op, each side's device-op time";
    const DOC: &'static str = "docs/analyses/diff.md";
    const EXAMPLES: &'static [&'static str] = &[
        "strato diff base.json.gz test.json.gz",
        "strato diff before/ after/ --top 30",
        "strato diff a.json.gz b.json.gz --json > diff.json",
        "strato diff h100.json mi300x.json --by-op",
        "strato diff a.json.gz b.json.gz --csv --table diff_kernels",
    ];
    const OPTIONS: &'static [OptionSpec] = &[
        OptionSpec {
            name: "top",
            help: "Rows shown per table (the largest changes)",
            kind: OptionKind::Count { min: 0 },
            default: "15",
        },
        OptionSpec {
            name: "per_step",
            help: "Keep ProfilerStep#N apart instead of folding them into ProfilerStep#*",
            kind: OptionKind::Flag,
            default: "false",
        },
        OptionSpec {
            name: "by_op",
            help: "Compare by framework op and module instead of operation and kernel name: the \
same model on two devices (per op/module time on each, ratio, and the ops that account for 80 % \
of the difference; see docs/analyses/diff.md)",
            kind: OptionKind::Flag,
            default: "false",
        },
    ];
    const TABLES: &'static [TableSpec] = &[
        TableSpec {
            name: "diff",
            about: "one row per operation: its time and share in A and B and the change",
            path: &["operations"],
            inherit: &[],
            options: &[("by_op", "false")],
        },
        TableSpec {
            name: "diff_strata",
            about: "one row per (operation, stratum): its time and share in A and B and the change",
            path: &["strata"],
            inherit: &[],
            options: &[("by_op", "false")],
        },
        TableSpec {
            name: "diff_kernels",
            about: "one row per kernel name: calls and time in A and B and the change",
            path: &["kernels"],
            inherit: &[],
            options: &[("by_op", "false")],
        },
        TableSpec {
            name: "diff_ops",
            about: "one row per framework op (--by-op): device time in A and B, ratio, whether \
it is in the set explaining 80 % of the difference",
            path: &["ops"],
            inherit: &[],
            options: &[("by_op", "true")],
        },
        TableSpec {
            name: "diff_modules",
            about: "one row per module path (--by-op), as diff_ops",
            path: &["modules"],
            inherit: &[],
            options: &[("by_op", "true")],
        },
    ];
    /// Every event, no attributes.
    const READS: Reads = Reads {
        events: Events::All,
        args: None,
    };
    const IN_REPORT: InReport = InReport::OwnSection;
    type Options = DiffSettings;
    type Side = DiffSides;
    type Output = DiffOutput;

    fn side(analyzed: &Analyzed<'_>, options: &DiffSettings) -> Result<DiffSides, AnalysisError> {
        Ok(if options.by_op {
            DiffSides::ByOp(OpDiffSide::of(analyzed))
        } else {
            DiffSides::Runs(DiffSide::of(analyzed, options.per_step))
        })
    }

    fn compare(
        a_label: &str,
        a: &DiffSides,
        b_label: &str,
        b: &DiffSides,
        _options: &DiffSettings,
    ) -> Result<DiffOutput, AnalysisError> {
        match (a, b) {
            (DiffSides::ByOp(a), DiffSides::ByOp(b)) => {
                Ok(DiffOutput::ByOp(op_diff(a_label, a, b_label, b)))
            }
            (DiffSides::Runs(a), DiffSides::Runs(b)) => Ok(DiffOutput::Runs(diff(
                a_label,
                a.parts(),
                b_label,
                b.parts(),
            ))),
            _ => Err(AnalysisError(
                "diff: one side was computed --by-op and the other not".into(),
            )),
        }
    }

    fn render_text(output: &DiffOutput, options: &DiffSettings, terminal: &Terminal) -> String {
        let top = usize::try_from(options.top).unwrap_or(usize::MAX);
        let mut out = String::new();
        // Writing to a string cannot fail.
        let _ = match output {
            DiffOutput::Runs(report) => super::diff_text::text(&mut out, report, top, terminal),
            DiffOutput::ByOp(report) => super::diff_text::op_text(&mut out, report, top),
        };
        out
    }
}
