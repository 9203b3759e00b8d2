//! Findings (`strato advise`): the page opens with what the rules found, largest time at stake
//! first, each finding linking to the sections that hold its evidence (copies to Memory, idle
//! gaps and low-utilisation windows to Utilization, launch-bound stretches to Kernels, steps to
//! Iterations, host stalls to Breakdown) with its evidence ranges in a folded table.
//!
//! Served by `strato view` ([`crate::ViewerLinks`]), each finding and each evidence range links
//! to the viewer, zoomed to it on its rank with the findings listed.
//!
//! Size at job scale: a job of many ranks can have hundreds of findings (a rule fires per rank),
//! so the first [`DETAILED_FINDINGS`] are shown in full and the rest as one row each in a folded
//! table (at most [`crate::TABLE_ROWS`] rows); `strato advise --json` has every one with its
//! evidence.

use strato_analysis::advise::Finding;

use crate::html::{esc, Html};
use crate::svg::fmt_ns;
use crate::ReportInput;

use super::{analysis_or_close, cell_rows, close, close_empty, open};

/// Findings shown in full (message, advice, links, evidence); the rest get one row each.
pub const DETAILED_FINDINGS: usize = 40;

/// The report section that shows evidence of this kind: (section id, title).
pub(super) fn evidence_section(kind: &str) -> (&'static str, &'static str) {
    match kind {
        "copy" => ("memory", "Memory"),
        "gap" | "window" => ("utilization", "Utilization"),
        "stretch" | "communication" => ("kernels", "Kernels"),
        "step" => ("iterations", "Iterations"),
        _ => ("breakdown", "Breakdown"),
    }
}

fn links(finding: &Finding) -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&'static str, &'static str)> = Vec::new();
    for e in &finding.evidence {
        let s = evidence_section(&e.kind);
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

pub(super) fn findings(h: &mut Html, input: &ReportInput) -> bool {
    open(
        h,
        "findings",
        "Findings",
        "What the advice rules (strato advise, docs/advise.md) found, largest time at stake \
         first; findings below 1% of the window are not shown. Findings overlap in time: the \
         total at stake is the union of their intervals, not their sum.",
    );
    let Some(report) = analysis_or_close(h, &input.advice) else {
        return false;
    };
    if report.findings.is_empty() {
        return close_empty(
            h,
            &format!(
                "No findings at or above {}% of the window ({} below it).",
                report.floor_pct, report.hidden_below_floor
            ),
        );
    }
    h.elem(
        "p",
        &format!(
            "{} findings; total at stake {} = {:.1}% of the {} window (union of the findings' \
             time).",
            report.findings.len(),
            fmt_ns(report.total_at_stake_ns as f64),
            report.total_at_stake_pct,
            fmt_ns(report.window_ns as f64)
        ),
    );
    for f in report.findings.iter().take(DETAILED_FINDINGS) {
        h.markup("<div class=\"finding\"><h3>")
            .text(&format!(
                "[{}] {}: {} ({:.1}% of the window)",
                f.severity.as_str(),
                f.rule,
                fmt_ns(f.time_ns as f64),
                f.share_pct
            ))
            .markup("</h3>");
        h.elem("p", &f.message);
        h.elem_class("p", "lead", &format!("Advice: {}", f.advice));
        h.elem(
            "p",
            &match f.estimated_gain_ns {
                Some(gain) => format!(
                    "Estimated gain: {} ({}, over the steps).",
                    fmt_ns(gain as f64),
                    f.gain_note
                ),
                None => format!("Estimated gain: {}.", f.gain_note),
            },
        );
        h.markup("<p>Evidence in: ");
        for (k, (id, title)) in links(f).into_iter().enumerate() {
            if k > 0 {
                h.markup(", ");
            }
            h.fragment(&format!("<a href=\"#{id}\">{}</a>", esc(title)));
        }
        h.markup(" · rule docs: ").text(&f.docs);
        if let (Some(viewer), Some(first)) = (&input.viewer, f.evidence.first()) {
            let start = f.evidence.iter().map(|e| e.start_ns).min().unwrap_or(0);
            let end = f.evidence.iter().map(|e| e.end_ns).max().unwrap_or(0);
            h.markup(" · ").view_link(
                &viewer.range(start, end, Some(first.rank), "findings"),
                "open in the viewer",
            );
        }
        h.markup("</p>");
        let links: Vec<Option<String>> = match &input.viewer {
            Some(viewer) => f
                .evidence
                .iter()
                .map(|e| Some(viewer.range(e.start_ns, e.end_ns, Some(e.rank), "findings")))
                .collect(),
            None => Vec::new(),
        };
        let rows: Vec<Vec<String>> = f
            .evidence
            .iter()
            .map(|e| {
                vec![
                    e.kind.clone(),
                    e.rank.to_string(),
                    e.start_ns.to_string(),
                    fmt_ns((e.end_ns - e.start_ns) as f64),
                    e.name.clone(),
                ]
            })
            .collect();
        h.details_table_linked(
            &format!("{} evidence ranges", rows.len()),
            &["kind", "rank", "start (ns)", "duration", "what"],
            &[1, 2, 3],
            &rows,
            &links,
        );
        h.markup("</div>");
    }
    let rest = report.findings.get(DETAILED_FINDINGS..).unwrap_or_default();
    if !rest.is_empty() {
        let rows: Vec<Vec<String>> = rest
            .iter()
            .map(|f| {
                vec![
                    f.severity.as_str().to_owned(),
                    f.rule.to_string(),
                    fmt_ns(f.time_ns as f64),
                    format!("{:.1}%", f.share_pct),
                    f.estimated_gain_ns
                        .map_or_else(|| "-".to_owned(), |g| fmt_ns(g as f64)),
                    f.evidence.len().to_string(),
                    f.message.clone(),
                ]
            })
            .collect();
        h.details_table(
            &format!(
                "{} more findings, one row each (all with their evidence: strato advise --json)",
                rest.len()
            ),
            &[
                "severity",
                "rule",
                "time",
                "share",
                "estimated gain",
                "evidence",
                "finding",
            ],
            &[2, 3, 4, 5],
            &cell_rows(rows),
        );
    }
    close(h);
    true
}
