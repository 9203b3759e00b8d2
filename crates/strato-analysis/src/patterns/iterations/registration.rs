//! `iterations` as a registered analysis ([`crate::registry`]): its options, tables, JSON
//! shape, text and CSV. The mining, measures and diagnosis are the parent module's.

use std::io::{self, Write};

use serde::{Deserialize, Serialize};

use super::{
    attach_lines_up, check_against_steps, iterations, IterationOptions, IterationsReport,
    IterationsStream, LoopReport, NoLoop, StepCheck,
};
use crate::analyzed::Analyzed;
use crate::registry::{
    streamed, Analysis, AnalysisError, Events, InReport, OptionKind, OptionSpec, RankPart, Reads,
    Stream, TableSpec,
};
use crate::text::table::{Table, TableFormat};
use crate::text::units::{fit_ascii, ms_num, us};
use strato_trace::projection::ArgsScope;

/// Iterations mined from device activity alone (DeepProf).
#[derive(Debug)]
pub struct Iterations;

/// The options of [`Iterations`] as the front ends give them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IterationsSettings {
    /// Iterations per loop (`100,20`: train, eval); estimated when empty.
    pub iterations: Vec<usize>,
    /// Most ops one iteration may have beyond the pattern.
    pub k0: Option<usize>,
    /// Start value of DeepProf's count tolerance eps.
    pub epsilon: Option<usize>,
    /// Most loops searched when i is estimated.
    pub max_loops: usize,
    /// Compare the mined boundaries with the trace's ProfilerStep#N annotations.
    pub check_steps: bool,
    /// Iterations shown per loop in the text (0: all).
    pub top: usize,
}

impl Default for IterationsSettings {
    fn default() -> Self {
        IterationsSettings {
            iterations: Vec::new(),
            k0: None,
            epsilon: None,
            max_loops: 3,
            check_steps: false,
            top: 20,
        }
    }
}

impl IterationsSettings {
    /// The miner's options.
    pub fn options(&self) -> IterationOptions {
        IterationOptions {
            iterations: self.iterations.clone(),
            epsilon: self.epsilon,
            k0: self.k0,
            max_loops: self.max_loops.max(1),
            ..IterationOptions::default()
        }
    }
}

/// The mined loops, with each first loop's check against the steps when asked; serialises
/// as `{sequences: [loop fields + check], not_found}`.
#[derive(Debug, Clone)]
pub struct IterationsResult {
    pub report: IterationsReport,
    /// Per sequence (in order): its check against `ProfilerStep#N`, when asked and it is the
    /// first loop of its stream.
    pub checks: Vec<Option<StepCheck>>,
}

#[derive(Serialize)]
struct Shape<'a> {
    sequences: Vec<Entry<'a>>,
    not_found: &'a [NoLoop],
}

#[derive(Serialize)]
struct Entry<'a> {
    #[serde(flatten)]
    report: &'a LoopReport,
    #[serde(skip_serializing_if = "Option::is_none")]
    check: &'a Option<StepCheck>,
}

impl Serialize for IterationsResult {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Shape {
            sequences: (self.report.sequences.iter().zip(&self.checks))
                .map(|(report, check)| Entry { report, check })
                .collect(),
            not_found: &self.report.not_found,
        }
        .serialize(serializer)
    }
}

impl Analysis for Iterations {
    const NAME: &'static str = "iterations";
    const SUMMARY: &'static str = "Find training/inference iterations from device activity \
alone (DeepProf pattern mining): per-iteration duration, interval, copy overlap, op gap, bytes \
in; summary and diagnosis";
    const WINDOW: &'static str = "each device's main stream, first to last mined iteration";
    const DOC: &'static str = "docs/analyses/iterations.md";
    const EXAMPLES: &'static [&'static str] = &[
        "strato iterations trace.json.gz",
        "strato iterations trace.json.gz -i 100,20 --k0 8 --json",
        "strato iterations trace.json.gz --check-steps",
    ];
    const OPTIONS: &'static [OptionSpec] = &[
        OptionSpec {
            name: "iterations",
            help: "number of iterations per loop, e.g. `100` or `100,20` (train, eval); \
estimated when not given",
            kind: OptionKind::Counts { min: 2 },
            default: "",
        },
        OptionSpec {
            name: "k0",
            help: "most ops one iteration may have beyond the pattern (default: pattern length \
/ 20, at least 2)",
            kind: OptionKind::Count { min: 0 },
            default: "",
        },
        OptionSpec {
            name: "epsilon",
            help: "start value of DeepProf's count tolerance eps (default i/2; doubled until a \
pattern qualifies)",
            kind: OptionKind::Count { min: 0 },
            default: "",
        },
        OptionSpec {
            name: "max_loops",
            help: "most loops searched when i is estimated",
            kind: OptionKind::Count { min: 0 },
            default: "3",
        },
        OptionSpec {
            name: "check_steps",
            help: "compare the mined boundaries with the trace's ProfilerStep#N annotations",
            kind: OptionKind::Flag,
            default: "false",
        },
        OptionSpec {
            name: "top",
            help: "iterations shown per loop in the text (0: all); the rest are summarised",
            kind: OptionKind::Count { min: 0 },
            default: "20",
        },
    ];
    const SHORT_FLAGS: &'static [(&'static str, char)] = &[("iterations", 'i')];
    const TABLES: &'static [TableSpec] = &[
        TableSpec {
            name: "iterations",
            about: "one row per mined iteration, with its sequence's rank, pid, device, stream \
and loop",
            path: &["sequences", "iterations"],
            inherit: &["rank_index", "rank", "pid", "device", "stream", "loop"],
            options: &[],
        },
        TableSpec {
            name: "iteration_loops",
            about: "one row per mined loop of a stream: pattern, i, eps, k0, summary",
            path: &["sequences"],
            inherit: &[],
            options: &[],
        },
    ];
    /// Spans, and only device ops' args (queue times, copy bytes).
    const READS: Reads = Reads {
        events: Events::All,
        args: Some(ArgsScope::DeviceOps),
    };
    /// The report's iterations section (its plots).
    const IN_REPORT: InReport = InReport::OwnSection;
    type Options = IterationsSettings;
    type Output = IterationsResult;

    /// A device's main stream, its loops and their check read its own rank only: several rank
    /// files are read one at a time.
    const RANK_BY_RANK: bool = true;

    /// The files' loops (with their checks) and streams without one, in input order, each
    /// rank numbered as the whole job numbers it (and indexed by its position in the job).
    fn merge(
        parts: Vec<RankPart<IterationsResult>>,
        _: &IterationsSettings,
    ) -> Option<IterationsResult> {
        let mut merged = IterationsResult {
            report: IterationsReport {
                sequences: Vec::new(),
                not_found: Vec::new(),
            },
            checks: Vec::new(),
        };
        for part in parts {
            let (IterationsResult { report, checks }, numbering) = part.numbered();
            for mut sequence in report.sequences {
                numbering.renumber(&mut sequence.rank, &mut sequence.rank_index);
                merged.report.sequences.push(sequence);
            }
            for mut none in report.not_found {
                numbering.renumber(&mut none.rank, &mut none.rank_index);
                merged.report.not_found.push(none);
            }
            merged.checks.extend(checks);
        }
        Some(merged)
    }

    fn run(
        analyzed: &Analyzed<'_>,
        settings: &IterationsSettings,
    ) -> Result<IterationsResult, AnalysisError> {
        let trace = analyzed.trace();
        let mut report = iterations(trace, &settings.options());
        attach_lines_up(analyzed, &mut report);
        let checks = (report.sequences.iter())
            .map(|s| {
                if !settings.check_steps || s.loop_index != 0 {
                    return None;
                }
                let same: Vec<&LoopReport> = (report.sequences.iter())
                    .filter(|o| {
                        (o.rank_index, o.device, o.stream) == (s.rank_index, s.device, s.stream)
                    })
                    .collect();
                check_against_steps(trace, &same)
            })
            .collect();
        Ok(IterationsResult { report, checks })
    }

    /// One file or stored profile streams ([`IterationsStream`]): memory holds a few words
    /// per span and device op, not the spans, their args, the scopes and the hierarchy.
    fn stream(settings: &IterationsSettings) -> Option<Box<dyn Stream<IterationsResult>>> {
        Some(streamed(
            IterationsStream::new(settings.options(), settings.check_steps),
            IterationsStream::add,
            IterationsStream::finish,
        ))
    }

    fn render_text(result: &IterationsResult, settings: &IterationsSettings) -> String {
        render(result, settings.top, TableFormat::Text)
    }

    /// The per-iteration table.
    fn render_csv(
        result: &IterationsResult,
        settings: &IterationsSettings,
        raw: bool,
    ) -> Option<String> {
        Some(render(result, settings.top, TableFormat::Csv { raw }))
    }
}

fn render(result: &IterationsResult, top: usize, format: TableFormat) -> String {
    crate::text::written(|out| write_tables(out, result, top, format))
}

fn write_tables(
    out: &mut Vec<u8>,
    result: &IterationsResult,
    top: usize,
    format: TableFormat,
) -> io::Result<()> {
    if let TableFormat::Csv { .. } = format {
        let mut t = Table::new(&[
            "rank",
            "pid",
            "device",
            "stream",
            "loop",
            "index",
            "start_ns",
            "end_ns",
            "duration_ns",
            "ops",
            "inserted_ops",
            "interval_ns",
            "h2d_overlap",
            "mean_op_gap_ns",
            "bytes_in",
        ]);
        for s in &result.report.sequences {
            for i in &s.iterations {
                t.row(vec![
                    s.rank.to_string(),
                    s.pid.map_or(String::new(), |p| p.to_string()),
                    s.device.to_string(),
                    s.stream.to_string(),
                    s.loop_index.to_string(),
                    i.index.to_string(),
                    i.start_ns.to_string(),
                    i.end_ns.to_string(),
                    i.duration_ns.to_string(),
                    i.ops.to_string(),
                    i.inserted_ops.to_string(),
                    i.interval_to_next_ns
                        .map_or(String::new(), |v| v.to_string()),
                    i.h2d_overlap.map_or(String::new(), |v| format!("{v:.4}")),
                    format!("{:.1}", i.mean_op_gap_ns),
                    i.bytes_in.map_or(String::new(), |v| v.to_string()),
                ]);
            }
        }
        t.write(out, format)?;
        return Ok(());
    }
    for (s, check) in result.report.sequences.iter().zip(&result.checks) {
        writeln!(
            out,
            "rank {} pid {} device {} {} — loop {}",
            s.rank,
            s.pid.map_or("-".into(), |p| p.to_string()),
            s.device,
            s.stream_choice,
            s.loop_index
        )?;
        writeln!(
            out,
            "  {} ops on the stream; pattern {} ops starting with {:?}; i = {} ({}), eps {}, \
             k0 {}; {} exact occurrences, {} iterations\n",
            s.ops,
            s.pattern_len,
            fit_ascii(&s.pattern_first_op, 60),
            s.i,
            if s.i_estimated { "estimated" } else { "given" },
            s.epsilon,
            s.k0,
            s.exact_occurrences,
            s.iterations.len()
        )?;
        let mut t = Table::new(&[
            "#",
            "start (ns)",
            "duration ms",
            "interval ms",
            "h2d overlap %",
            "op gap us",
            "bytes in",
            "ops",
            "+ops",
        ]);
        let shown = if top == 0 {
            s.iterations.len()
        } else {
            top.min(s.iterations.len())
        };
        for i in &s.iterations[..shown] {
            t.row(vec![
                i.index.to_string(),
                i.start_ns.to_string(),
                ms_num(i.duration_ns as f64),
                i.interval_to_next_ns
                    .map_or("-".into(), |v| ms_num(v as f64)),
                i.h2d_overlap
                    .map_or("-".into(), |v| format!("{:.1}", 100.0 * v)),
                us(i.mean_op_gap_ns),
                i.bytes_in.map_or("-".into(), |v| v.to_string()),
                i.ops.to_string(),
                i.inserted_ops.to_string(),
            ]);
        }
        t.print(out, "")?;
        if shown < s.iterations.len() {
            writeln!(out, "  ... {} more iterations", s.iterations.len() - shown)?;
        }
        let m = &s.summary;
        writeln!(
            out,
            "\n  summary: mean duration {} ms; interval mean {} ms, max {} ms; mean h2d overlap \
             {:.1}%; mean op gap {} us; mean bytes in {}; busy in iterations {:.1}%; coverage \
             {:.1}% of the stream's ops",
            ms_num(m.mean_duration_ns),
            ms_num(m.mean_interval_ns),
            ms_num(m.max_interval_ns as f64),
            100.0 * m.mean_h2d_overlap,
            us(m.mean_op_gap_ns),
            m.mean_bytes_in.map_or("-".into(), |b| format!("{b:.0}")),
            100.0 * m.busy_in_iterations,
            100.0 * m.coverage
        )?;
        for d in &s.diagnosis {
            writeln!(out, "  diagnosis: {d}")?;
        }
        if let Some(c) = check {
            writeln!(
                out,
                "  check vs ProfilerStep: {} steps, {} mined, {} within their step ({} exact): \
                 precision {:.2}, recall {:.2}",
                c.steps, c.mined, c.matched, c.exact, c.precision, c.recall
            )?;
        }
        writeln!(out)?;
    }
    for n in &result.report.not_found {
        writeln!(
            out,
            "rank {} device {} stream {}: no iterations ({} ops): {}",
            n.rank, n.device, n.stream, n.ops, n.reason
        )?;
    }
    Ok(())
}
