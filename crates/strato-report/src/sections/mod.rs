//! The report's sections, in page order: findings (`strato advise`), overview, time breakdown (RL-Scope figure 4 top),
//! transitions (figure 4 bottom), processes side by side (figure 8), utilization reality check
//! (F.11), kernel ranking, roofline (XSP), the nn.Module tree (icicle), iterations (DeepProf),
//! memory, distributed (collectives across ranks), critical path (per step), CPU samples (a flame graph per operation),
//! and the diff with another profile. Each
//! section draws its plot, puts the table behind it under the plot, and
//! when the profile has no data for it says why instead.
//!
//! One module per section (its writer: `fn(&mut Html, &ReportInput) -> bool`, true when the
//! profile has data for it); this module assembles the page, holds the helpers the sections
//! share and the page's style sheet (`report.css`); [`palette`] holds the breakdown's colours
//! and patterns.

mod breakdown;
mod critical_path;
mod diff;
mod distributed;
mod findings;
mod flame;
mod iterations;
mod kernels;
mod memory;
mod modules;
mod overview;
mod palette;
mod processes;
mod replay;
mod roofline;
mod transitions;
mod utilization;

#[cfg(test)]
mod tests;

use strato_trace::Ns;

use crate::html::{esc_capped, shorten, Html};
use crate::{Part, ReportInput, NAME_CHARS, TABLE_ROWS};

/// The page's style sheet.
pub const CSS: &str = include_str!("report.css");

// ---------------------------------------------------------------------------------------------
// Helpers.

fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

fn share(part: Ns, whole: Ns) -> f64 {
    if whole > 0 {
        part as f64 / whole as f64
    } else {
        0.0
    }
}

fn name(text: &str) -> String {
    shorten(text, NAME_CHARS)
}

fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn cell_rows(mut rows: Vec<Vec<String>>) -> Vec<Vec<String>> {
    if rows.len() > TABLE_ROWS {
        let more = rows.len() - TABLE_ROWS;
        rows.truncate(TABLE_ROWS);
        rows.push(vec![format!("({more} more rows not shown)")]);
    }
    rows
}

/// Which of `n` items sorted slowest first get their details in a job-sized report: all of
/// them when at most three, else the slowest, the median and the fastest (the rest are folded,
/// shown side by side only). Each with its label (`None` when all are shown).
fn representatives(n: usize) -> Vec<(usize, Option<&'static str>)> {
    if n <= 3 {
        return (0..n).map(|i| (i, None)).collect();
    }
    vec![
        (0, Some("slowest")),
        (n / 2, Some("median")),
        (n - 1, Some("fastest")),
    ]
}

/// One section: its id, its title in the navigation, and whether it has data.
struct Toc<'a> {
    entries: Vec<(&'a str, &'a str, bool)>,
}

/// The section of a registered analysis: its summary, window and doc page, then its main table
/// (the first [`crate::REGISTERED_ROWS`] rows).
fn registered(h: &mut Html, section: &crate::RegisteredSection) -> bool {
    h.markup("<section>").heading(&section.id, &section.id);
    h.elem_class(
        "p",
        "lead",
        &format!(
            "{}. Window: {}. See {} (strato {} --csv: every row).",
            section.summary, section.window, section.doc, section.id
        ),
    );
    let table = match &section.table {
        Ok(table) => table,
        Err(why) => return close_empty(h, &format!("The analysis failed: {why}")),
    };
    if table.total_rows == 0 {
        return close_empty(h, "No rows: the profile has nothing this analysis counts.");
    }
    let header: Vec<&str> = table.columns.iter().map(String::as_str).collect();
    let numeric: Vec<usize> = (0..table.columns.len())
        .filter(|&i| {
            table.rows.iter().all(|r| {
                r.get(i)
                    .is_none_or(|c| c.is_empty() || c.parse::<f64>().is_ok())
            })
        })
        .collect();
    h.table(&header, &numeric, &table.rows);
    if table.total_rows > table.rows.len() {
        h.elem(
            "p",
            &format!("first {} of {} rows", table.rows.len(), table.total_rows),
        );
    }
    close(h);
    true
}

/// A section's writer: writes it and says whether the profile has data for it.
type WriteSection = fn(&mut Html, &ReportInput) -> bool;

/// The sections between the overview and the diff, in page order: id, title in the
/// navigation, writer.
const SECTIONS: [(&str, &str, WriteSection); 13] = [
    ("breakdown", "Breakdown", breakdown::breakdown),
    ("transitions", "Transitions", transitions::transitions),
    ("processes", "Processes", processes::processes),
    ("utilization", "Utilization", utilization::utilization),
    ("kernels", "Kernels", kernels::kernels),
    ("roofline", "Roofline", roofline::roofline),
    ("modules", "Modules", modules::modules),
    ("iterations", "Iterations", iterations::iterations),
    ("memory", "Memory", memory::memory),
    ("distributed", "Distributed", distributed::distributed),
    (
        "critical-path",
        "Critical path",
        critical_path::critical_path,
    ),
    ("replay", "Replay", replay::replay),
    ("flame", "CPU samples", flame::flame),
];

// ---------------------------------------------------------------------------------------------
// The document.

/// The whole page.
pub fn document(input: &ReportInput) -> String {
    let mut body = Html::new();
    let mut toc = Toc {
        entries: Vec::new(),
    };
    let has = findings::findings(&mut body, input);
    toc.entries.push(("findings", "Findings", has));
    overview::overview(&mut body, input);
    toc.entries.push(("overview", "Overview", true));
    for (id, title, write) in SECTIONS {
        let has = write(&mut body, input);
        toc.entries.push((id, title, has));
    }
    for section in &input.registered {
        let has = registered(&mut body, section);
        toc.entries
            .push((section.id.as_str(), section.id.as_str(), has));
    }
    if let Some(d) = &input.diff {
        diff::diff_section(&mut body, d);
        toc.entries.push(("diff", "Diff", true));
    }

    let mut page = Html::new();
    page.markup("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">")
        .markup("<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">")
        .markup("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">")
        .elem("title", &format!("stratoscope report: {}", input.title))
        .markup("<style>\n")
        .markup(CSS)
        .markup("</style></head><body>");
    page.fragment(&palette::pattern_defs());
    page.markup("<header><h1>")
        .text(&input.title)
        .markup("</h1><div class=\"sub\">stratoscope report · ")
        .text(&sources_line(input))
        .markup("</div></header><nav>");
    for (id, title, has) in &toc.entries {
        page.fragment(&format!(
            "<a href=\"#{id}\"{}>{}</a>",
            if *has { "" } else { " class=\"off\"" },
            esc_capped(title)
        ));
    }
    page.markup("</nav><main>");
    page.fragment(&body.finish());
    page.markup("</main><footer>Generated by ")
        .text(&input.generator)
        .markup(". Self-contained: no script, no network. Hover a bar or point for its numbers; each plot's table is under it.</footer></body></html>\n");
    page.finish()
}

fn sources_line(input: &ReportInput) -> String {
    let s = &input.info.info.sources;
    match s.len() {
        0 => "no sources".into(),
        1 => format!("{} ({})", s[0].source, s[0].format),
        n => format!("{n} sources ({}, ...)", base_name(&s[0].source)),
    }
}

fn open(h: &mut Html, id: &str, title: &str, lead: &str) {
    h.markup("<section>").heading(id, title);
    if !lead.is_empty() {
        h.elem_class("p", "lead", lead);
    }
}

fn close(h: &mut Html) {
    h.markup("</section>");
}

/// Says why the profile has no data for a section and closes it: `false`, the section's "has
/// data" flag.
fn close_empty(h: &mut Html, why: &str) -> bool {
    h.absent(why);
    close(h);
    false
}

/// A section's analysis, or `None` after saying why it failed and closing the section.
fn analysis_or_close<'a, T>(h: &mut Html, part: &'a Part<T>) -> Option<&'a T> {
    match part {
        Ok(report) => Some(report),
        Err(why) => {
            close_empty(h, &why.to_string());
            None
        }
    }
}

fn card(h: &mut Html, value: &str, label: &str) {
    h.markup("<div class=\"card\"><b>")
        .text(value)
        .markup("</b><span>")
        .text(label)
        .markup("</span></div>");
}
