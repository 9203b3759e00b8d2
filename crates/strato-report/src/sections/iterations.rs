//! Iterations (DeepProf): the training loops mined on each device's main stream, their
//! per-iteration metrics, summary and diagnosis.

use crate::html::Html;
use crate::svg::timeline::{self, Item, Timeline};
use crate::svg::{color, fmt_bytes, fmt_ns};
use crate::ReportInput;
use strato_analysis::patterns::iterations::IterationsResult;

use super::{analysis_or_close, cell_rows, close, close_empty, open, pct};

pub(super) fn iterations(h: &mut Html, input: &ReportInput) -> bool {
    open(
        h,
        "iterations",
        "Iterations",
        "Training/inference iterations found from device activity alone (the repeating pattern \
         of kernels on each device's main stream, DeepProf), on the trace's time axis: gaps \
         between them are time the device waited for the host.",
    );
    let Some(IterationsResult { report, .. }) = analysis_or_close(h, &input.iterations) else {
        return false;
    };
    if report.sequences.is_empty() {
        let mut why = String::from("No repeating pattern of device ops was found");
        if report.not_found.is_empty() {
            why.push_str(": the profile has no device ops.");
        } else {
            why.push_str(": ");
            let reasons: Vec<String> = report
                .not_found
                .iter()
                .take(4)
                .map(|n| {
                    format!(
                        "rank {} device {} stream {} ({} ops): {}",
                        n.rank, n.device, n.stream, n.ops, n.reason
                    )
                })
                .collect();
            why.push_str(&reasons.join("; "));
        }
        return close_empty(h, &why);
    }
    let origin = input.info.info.start_ns.unwrap_or(0);
    let end = input.info.info.end_ns.unwrap_or(origin + 1);
    let rows: Vec<timeline::Row> = report
        .sequences
        .iter()
        .take(24)
        .map(|l| {
            let label = format!(
                "rank {} · dev {} · stream {} · loop {}",
                l.rank,
                l.device,
                l.stream,
                l.loop_index + 1
            );
            timeline::Row {
                items: l
                    .iterations
                    .iter()
                    .map(|it| Item {
                        start_ns: it.start_ns,
                        end_ns: it.end_ns,
                        fill: if it.index % 2 == 0 {
                            color(0)
                        } else {
                            color(4)
                        },
                        tip: format!(
                            "iteration {} of loop {}: {}, {} ops{}",
                            it.index + 1,
                            l.loop_index + 1,
                            fmt_ns(it.duration_ns as f64),
                            it.ops,
                            it.interval_to_next_ns
                                .map(|g| format!(", next starts {} later", fmt_ns(g as f64)))
                                .unwrap_or_default()
                        ),
                    })
                    .collect(),
                label,
            }
        })
        .collect();
    h.fragment(&timeline::draw(&Timeline {
        aria: "iteration timeline".into(),
        origin_ns: origin,
        end_ns: end,
        rows,
    }));
    let summary: Vec<Vec<String>> = report
        .sequences
        .iter()
        .map(|l| {
            let s = &l.summary;
            vec![
                format!(
                    "rank {} dev {} stream {} loop {}",
                    l.rank,
                    l.device,
                    l.stream,
                    l.loop_index + 1
                ),
                s.iterations.to_string(),
                l.pattern_len.to_string(),
                fmt_ns(s.mean_duration_ns),
                fmt_ns(s.mean_interval_ns),
                fmt_ns(s.mean_op_gap_ns),
                pct(s.mean_h2d_overlap),
                pct(s.between_share),
                pct(s.coverage),
            ]
        })
        .collect();
    h.table(
        &[
            "loop",
            "iterations",
            "ops/iter",
            "mean duration",
            "mean interval",
            "mean op gap",
            "H2D overlap",
            "between iterations",
            "coverage",
        ],
        &[1, 2, 3, 4, 5, 6, 7, 8],
        &cell_rows(summary),
    );
    for l in report.sequences.iter().take(8) {
        if !l.diagnosis.is_empty() {
            h.elem(
                "h3",
                &format!(
                    "Diagnosis: rank {} device {} loop {}",
                    l.rank,
                    l.device,
                    l.loop_index + 1
                ),
            );
            h.markup("<ul class=\"diag\">");
            for d in &l.diagnosis {
                h.elem("li", &d.message());
            }
            h.markup("</ul>");
        }
    }
    let its: Vec<Vec<String>> = report
        .sequences
        .iter()
        .flat_map(|l| {
            l.iterations.iter().map(move |it| {
                vec![
                    format!("{}/{}/{}", l.rank, l.device, l.loop_index + 1),
                    (it.index + 1).to_string(),
                    fmt_ns((it.start_ns - origin) as f64),
                    fmt_ns(it.duration_ns as f64),
                    it.interval_to_next_ns
                        .map_or("-".into(), |g| fmt_ns(g as f64)),
                    it.ops.to_string(),
                    it.h2d_overlap.map_or("-".into(), pct),
                    it.bytes_in.map_or("-".into(), |b| fmt_bytes(b as f64)),
                ]
            })
        })
        .collect();
    let links: Vec<Option<String>> = match &input.viewer {
        Some(viewer) => report
            .sequences
            .iter()
            .flat_map(|l| {
                l.iterations.iter().map(move |it| {
                    Some(viewer.range(
                        it.start_ns,
                        it.start_ns.saturating_add(it.duration_ns),
                        Some(l.rank),
                        "",
                    ))
                })
            })
            .collect(),
        None => Vec::new(),
    };
    h.details_table_linked(
        "Table: iterations",
        &[
            "rank/device/loop",
            "#",
            "start",
            "duration",
            "to next",
            "ops",
            "H2D overlap",
            "bytes in",
        ],
        &[1, 2, 3, 4, 5, 6, 7],
        &cell_rows(its),
        &links,
    );
    close(h);
    true
}
