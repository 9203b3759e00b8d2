//! `hierarchy` as a registered analysis ([`crate::registry`]): its tables and text. The
//! hierarchy and its attribution counts are the parent module's.

use std::io::{self, Write};

use super::{report, Attribution, HierarchyReport, HierarchyStream};
use crate::analyzed::Analyzed;
use crate::registry::{
    merged_ranks, streamed, Analysis, AnalysisError, Events, NoOptions, OptionSpec, RankPart,
    RankRow, Reads, Stream, TableSpec,
};
use crate::text::table::Table;
use crate::text::units::pct;

/// The span hierarchy (XSP): how many device ops reach a launching call, a framework op and
/// an annotation.
#[derive(Debug)]
pub struct SpanHierarchy;

impl Analysis for SpanHierarchy {
    const NAME: &'static str = "hierarchy";
    const SUMMARY: &'static str = "Span hierarchy (XSP): how many device ops reach a launching \
call, a framework op and an annotation";
    const WINDOW: &'static str = "every span of each rank";
    const DOC: &'static str = "docs/analyses/hierarchy.md";
    const EXAMPLES: &'static [&'static str] = &[
        "strato hierarchy trace.json.gz",
        "strato hierarchy trace.json.gz --json",
    ];
    const OPTIONS: &'static [OptionSpec] = &[];
    const TABLES: &'static [TableSpec] = &[TableSpec {
        name: "hierarchy",
        about: "one row per rank: device ops and kernels reaching a launch, an op, an annotation",
        path: &["ranks"],
        inherit: &[],
        options: &[],
    }];
    /// Every event (graph node links are flows), no attributes.
    const READS: Reads = Reads {
        events: Events::All,
        args: None,
    };
    /// A span's parent and a device op's launch are on its own rank: several rank files are
    /// read one at a time.
    const RANK_BY_RANK: bool = true;
    type Options = NoOptions;
    type Output = HierarchyReport;

    fn run(analyzed: &Analyzed<'_>, _: &NoOptions) -> Result<HierarchyReport, AnalysisError> {
        Ok(report(analyzed))
    }

    /// The files' ranks in input order, each numbered as the whole job numbers it; the totals
    /// and span counts added up, the depth the deepest file's.
    fn merge(parts: Vec<RankPart<HierarchyReport>>, _: &NoOptions) -> Option<HierarchyReport> {
        let mut total = Attribution::default();
        let (mut spans, mut spans_with_parent, mut max_depth) = (0, 0, 0);
        for part in &parts {
            total.add(&part.value.total);
            spans += part.value.spans;
            spans_with_parent += part.value.spans_with_parent;
            max_depth = max_depth.max(part.value.max_depth);
        }
        Some(HierarchyReport {
            total,
            spans,
            spans_with_parent,
            max_depth,
            ranks: merged_ranks(parts, |report| report.ranks),
        })
    }

    /// One file or stored profile streams ([`HierarchyStream`]): memory holds a few words per
    /// span, not the spans, their scopes and parent links.
    fn stream(_: &NoOptions) -> Option<Box<dyn Stream<HierarchyReport>>> {
        Some(streamed(
            HierarchyStream::new(),
            HierarchyStream::add,
            HierarchyStream::finish,
        ))
    }

    fn render_text(report: &HierarchyReport, _: &NoOptions) -> String {
        crate::text::written(|out| write_text(out, report))
    }
}

fn write_text(out: &mut Vec<u8>, r: &HierarchyReport) -> io::Result<()> {
    let share = |n: usize, of: usize| pct(n as f64, of as f64);
    let t = &r.total;
    writeln!(
        out,
        "spans {}  with a parent {} ({})  deepest chain {}",
        r.spans,
        r.spans_with_parent,
        share(r.spans_with_parent, r.spans),
        r.max_depth + 1
    )?;
    let mut table = Table::with_left(
        &[
            "rank",
            "device ops",
            "with launch",
            "with op",
            "with annotation",
            "kernels",
            "kernels w/ launch",
            "launched before trace",
            "source",
        ],
        &[8],
    );
    let mut add = |rank: String, a: &Attribution, source: &str| {
        table.row(vec![
            rank,
            a.device_ops.to_string(),
            format!("{} ({})", a.with_launch, share(a.with_launch, a.device_ops)),
            format!("{} ({})", a.with_op, share(a.with_op, a.device_ops)),
            format!(
                "{} ({})",
                a.with_annotation,
                share(a.with_annotation, a.device_ops)
            ),
            a.kernels.to_string(),
            format!(
                "{} ({})",
                a.kernels_with_launch,
                share(a.kernels_with_launch, a.kernels)
            ),
            a.launched_before_trace.to_string(),
            source.to_owned(),
        ]);
    };
    for rank in &r.ranks {
        add(rank.rank.to_string(), &rank.counts, &rank.source);
    }
    if r.ranks.len() > 1 {
        add("all".into(), t, "");
    }
    table.print(out, "")?;
    writeln!(
        out,
        "\nwith annotation: {} by containment, {} by time on the annotated thread",
        t.with_annotation_by_containment, t.with_annotation_by_time
    )?;
    if t.graph_kernels > 0 {
        writeln!(
            out,
            "graph kernels (replayed by a graph launch): {}, mapped to captured launches {} ({}){}",
            t.graph_kernels,
            t.graph_kernels_mapped,
            share(t.graph_kernels_mapped, t.graph_kernels),
            if t.graph_kernels_mapped == 0 {
                "; give --graph-capture FILE to attribute them"
            } else {
                ""
            }
        )?;
    }
    Ok(())
}

impl RankRow for super::RankAttribution {
    fn rank(&self) -> i64 {
        self.rank
    }
    fn set_rank(&mut self, rank: i64) {
        self.rank = rank;
    }
}
