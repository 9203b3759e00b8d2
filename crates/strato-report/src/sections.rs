//! The report's sections, in page order: overview, time breakdown (RL-Scope figure 4 top),
//! transitions (figure 4 bottom), processes side by side (figure 8), utilization reality check
//! (F.11), kernel ranking, roofline (XSP), iterations (DeepProf), memory, and the diff with
//! another profile. Each section draws its plot, puts the table behind it under the plot, and
//! when the profile has no data for it says why instead.

use std::collections::BTreeMap;

use strato_analysis::breakdown::{ProcessBreakdown, Resource};
use strato_analysis::diff::{Change, Delta, DiffReport};
use strato_analysis::layers::Roofline as RooflineFigures;
use strato_trace::{Level, Ns};

use crate::html::{esc_capped, shorten, Html};
use crate::svg::bars::{self, Axis, Bar, Chart, Segment};
use crate::svg::line::{self, LineChart, Series, YAxis};
use crate::svg::scatter::{self, Point, Roof};
use crate::svg::timeline::{self, Item, Timeline};
use crate::svg::{color, fmt_bytes, fmt_ns, fmt_si};
use crate::{Part, ReportInput, KERNEL_TOP, NAME_CHARS, TABLE_ROWS};

const CSS: &str = "
:root{--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;--bg:#fff;--card:#f6f8fa;--accent:#4e79a7}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,'Helvetica Neue',Arial,sans-serif;color:var(--fg);background:var(--bg)}
header{padding:20px 32px 12px;border-bottom:1px solid var(--line);background:linear-gradient(180deg,#f6f8fa,#fff)}
header h1{margin:0 0 4px;font-size:22px}
header .sub{color:var(--muted)}
nav{padding:8px 32px;border-bottom:1px solid var(--line);position:sticky;top:0;background:#fffd;backdrop-filter:blur(4px);z-index:2}
nav a{margin-right:14px;color:var(--accent);text-decoration:none;white-space:nowrap}
nav a.off{color:#9aa4ae}
main{padding:8px 32px 40px;max-width:1200px}
section{margin:26px 0 8px}
h2{font-size:18px;margin:0 0 6px;padding-bottom:4px;border-bottom:2px solid var(--line)}
h3{font-size:15px;margin:18px 0 4px}
p{margin:6px 0}
.lead{color:var(--muted);max-width:900px}
.absent{color:var(--muted);font-style:italic;background:var(--card);border-left:3px solid var(--line);padding:6px 10px}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:10px 0}
.card{background:var(--card);border:1px solid var(--line);border-radius:6px;padding:8px 12px;min-width:140px}
.card b{display:block;font-size:18px}
.card span{color:var(--muted);font-size:12px}
svg.plot{width:100%;max-width:1000px;height:auto;display:block;margin:6px 0;font-family:inherit}
svg.plot .grid{stroke:#e6eaef;stroke-width:1}
svg.plot .axis{stroke:#8c959f;stroke-width:1}
svg.plot .tick{font-size:11px;fill:var(--muted)}
svg.plot .axt{font-size:12px;fill:var(--muted)}
svg.plot .lbl{font-size:11.5px;fill:var(--fg)}
svg.plot .note{font-size:11px;fill:var(--muted)}
svg.plot .lg{font-size:11.5px;fill:var(--fg)}
svg.plot .series{fill:none;stroke-width:1.6}
svg.plot .area{fill-opacity:.15}
svg.plot .roof{stroke:#444;stroke-width:1.5}
svg.plot .ridge{stroke:#999;stroke-dasharray:4 3}
svg.plot .roofl{font-size:11px;fill:#333}
svg.plot rect:hover,svg.plot circle:hover{stroke:#000;stroke-width:1}
svg.plot circle{fill-opacity:.75;stroke:#fff;stroke-width:.5}
.tw{overflow-x:auto}
table{border-collapse:collapse;margin:6px 0 10px;font-size:12.5px}
th,td{padding:3px 8px;border-bottom:1px solid #eaeef2;text-align:left;vertical-align:top}
th{background:var(--card);position:sticky;top:0}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
td{max-width:640px;overflow-wrap:anywhere}
details{margin:4px 0 10px}
summary{cursor:pointer;color:var(--accent)}
.up{color:#b42318}.down{color:#1a7f37}
ul.diag{margin:4px 0 8px 18px;padding:0}
footer{color:var(--muted);padding:16px 32px;border-top:1px solid var(--line);font-size:12px}
";

// ---------------------------------------------------------------------------------------------
// Colours and patterns of the breakdown (RL-Scope figure 4: colour = resource, pattern =
// stratum).

const CPU_COLOR: &str = "#4e79a7";
const GPU_COLOR: &str = "#f28e2b";
const BOTH_COLOR: &str = "#59a14f";
const IDLE_COLOR: &str = "#e3e6ea";
const NEUTRAL: &str = "#8c959f";

/// Strata drawn with their own pattern, in legend order.
const PATTERNED: [Level; 8] = [
    Level::Python,
    Level::Backend,
    Level::Simulator,
    Level::Library,
    Level::AcceleratorApi,
    Level::Os,
    Level::Overhead,
    Level::Other,
];

fn level_label(level: Level) -> &'static str {
    match level {
        Level::AcceleratorApi => "Accelerator API",
        Level::Backend => "ML backend",
        other => other.as_str(),
    }
}

/// The pattern drawn over a resource colour for a stratum (white marks at 55% opacity).
fn pattern_marks(level: Level) -> (&'static str, &'static str) {
    // (patternTransform, marks)
    match level {
        Level::Backend => ("rotate(45)", "<rect width=\"2.2\" height=\"6\" fill=\"#fff\" fill-opacity=\".55\"/>"),
        Level::AcceleratorApi => (
            "rotate(45)",
            "<rect width=\"1.6\" height=\"6\" fill=\"#fff\" fill-opacity=\".6\"/><rect width=\"6\" height=\"1.6\" fill=\"#fff\" fill-opacity=\".6\"/>",
        ),
        Level::Simulator => ("", "<circle cx=\"3\" cy=\"3\" r=\"1.3\" fill=\"#fff\" fill-opacity=\".7\"/>"),
        Level::Library => ("", "<rect width=\"6\" height=\"2\" fill=\"#fff\" fill-opacity=\".55\"/>"),
        Level::Os => ("", "<rect width=\"2\" height=\"6\" fill=\"#fff\" fill-opacity=\".55\"/>"),
        Level::Overhead => ("rotate(-45)", "<rect width=\"3\" height=\"6\" fill=\"#000\" fill-opacity=\".25\"/>"),
        Level::Other => ("", "<rect width=\"3\" height=\"3\" fill=\"#fff\" fill-opacity=\".4\"/>"),
        _ => ("", ""),
    }
}

fn resource_key(r: Resource) -> &'static str {
    match r {
        Resource::Cpu => "c",
        Resource::CpuGpu => "b",
        Resource::Gpu => "g",
        Resource::Idle => "i",
    }
}

/// Fill of a (resource, CPU level) cell.
fn fill_of(resource: Resource, level: Option<Level>) -> String {
    let base = match resource {
        Resource::Cpu => CPU_COLOR,
        Resource::CpuGpu => BOTH_COLOR,
        Resource::Gpu => return GPU_COLOR.to_owned(),
        Resource::Idle => return IDLE_COLOR.to_owned(),
    };
    match level {
        Some(l) if l != Level::Python && PATTERNED.contains(&l) => {
            format!("url(#p{}{})", resource_key(resource), l.code())
        }
        _ => base.to_owned(),
    }
}

/// The `<pattern>` definitions used by breakdown plots, in one hidden SVG at the top of the
/// page (ids are page-wide).
fn pattern_defs() -> String {
    let mut s = String::from(
        "<svg width=\"0\" height=\"0\" style=\"position:absolute\" aria-hidden=\"true\"><defs>",
    );
    for (key, base) in [("c", CPU_COLOR), ("b", BOTH_COLOR), ("n", NEUTRAL)] {
        for level in PATTERNED {
            let (transform, marks) = pattern_marks(level);
            if marks.is_empty() {
                continue;
            }
            let t = if transform.is_empty() {
                String::new()
            } else {
                format!(" patternTransform=\"{transform}\"")
            };
            s.push_str(&format!(
                "<pattern id=\"p{key}{}\" patternUnits=\"userSpaceOnUse\" width=\"6\" height=\"6\"{t}><rect width=\"6\" height=\"6\" fill=\"{base}\"/>{marks}</pattern>",
                level.code()
            ));
        }
    }
    s.push_str("</defs></svg>");
    s
}

fn breakdown_legend(levels: &[Level]) -> Vec<(String, String)> {
    let mut legend = vec![
        ("CPU".to_owned(), CPU_COLOR.to_owned()),
        ("GPU".to_owned(), GPU_COLOR.to_owned()),
        ("CPU+GPU".to_owned(), BOTH_COLOR.to_owned()),
        ("idle".to_owned(), IDLE_COLOR.to_owned()),
    ];
    for &l in PATTERNED.iter().filter(|l| levels.contains(l)) {
        let fill = if l == Level::Python {
            NEUTRAL.to_owned()
        } else {
            format!("url(#pn{})", l.code())
        };
        legend.push((format!("stratum: {}", level_label(l)), fill));
    }
    legend
}

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

/// One section: its id, its title in the navigation, and whether it has data.
struct Toc {
    entries: Vec<(&'static str, &'static str, bool)>,
}

/// A section's writer: writes it and says whether the profile has data for it.
type WriteSection = fn(&mut Html, &ReportInput) -> bool;

/// The sections between the overview and the diff, in page order: id, title in the
/// navigation, writer.
const SECTIONS: [(&str, &str, WriteSection); 8] = [
    ("breakdown", "Breakdown", breakdown),
    ("transitions", "Transitions", transitions),
    ("processes", "Processes", processes),
    ("utilization", "Utilization", utilization),
    ("kernels", "Kernels", kernels),
    ("roofline", "Roofline", roofline),
    ("iterations", "Iterations", iterations),
    ("memory", "Memory", memory),
];

// ---------------------------------------------------------------------------------------------
// The document.

/// The whole page.
pub fn document(input: &ReportInput) -> String {
    let mut body = Html::new();
    let mut toc = Toc {
        entries: Vec::new(),
    };
    overview(&mut body, input);
    toc.entries.push(("overview", "Overview", true));
    for (id, title, write) in SECTIONS {
        let has = write(&mut body, input);
        toc.entries.push((id, title, has));
    }
    if let Some(d) = &input.diff {
        diff_section(&mut body, d);
        toc.entries.push(("diff", "Diff", true));
    }

    let mut page = Html::new();
    page.markup("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">")
        .markup("<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">")
        .markup("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">")
        .elem("title", &format!("stratoscope report: {}", input.title))
        .markup("<style>")
        .markup(CSS)
        .markup("</style></head><body>");
    page.fragment(&pattern_defs());
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
    let s = &input.info.sources;
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
            close_empty(h, why);
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

// ---------------------------------------------------------------------------------------------
// Overview.

fn overview(h: &mut Html, input: &ReportInput) {
    let info = &input.info;
    open(h, "overview", "Overview", "");
    h.markup("<div class=\"cards\">");
    card(h, &fmt_ns(info.duration_ns as f64), "traced time");
    card(h, &info.spans.to_string(), "spans");
    card(h, &info.processes.len().to_string(), "processes");
    card(h, &info.devices.len().to_string(), "devices");
    let device_ops: usize = info.devices.iter().map(|d| d.device_ops).sum();
    card(h, &device_ops.to_string(), "device ops");
    if let Ok(u) = &input.util {
        if let Some(d) = u.devices.iter().max_by_key(|d| d.busy_ns) {
            card(
                h,
                &format!("{:.1}%", d.true_busy_pct),
                "true device busy (busiest)",
            );
        }
    }
    h.markup("</div>");
    let rows: Vec<Vec<String>> = info
        .sources
        .iter()
        .map(|s| {
            vec![
                name(&s.source),
                s.format.clone(),
                s.rank.map_or("-".into(), |r| r.to_string()),
                s.host.clone().unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    h.table(
        &["source", "format", "rank", "host"],
        &[2],
        &cell_rows(rows),
    );
    let levels: Vec<Vec<String>> = info
        .spans_by_level
        .iter()
        .map(|(l, n)| vec![l.clone(), n.to_string()])
        .collect();
    h.details_table("Spans by stratum", &["stratum", "spans"], &[1], &levels);
    let devices: Vec<Vec<String>> = info
        .devices
        .iter()
        .map(|d| {
            vec![
                base_name(&d.source).to_owned(),
                d.index.to_string(),
                d.name.clone().unwrap_or_else(|| "-".into()),
                d.streams.len().to_string(),
                d.device_ops.to_string(),
            ]
        })
        .collect();
    if !devices.is_empty() {
        h.details_table(
            "Devices",
            &["source", "device", "name", "streams", "device ops"],
            &[1, 3, 4],
            &cell_rows(devices),
        );
    }
    close(h);
}

// ---------------------------------------------------------------------------------------------
// Breakdown (RL-Scope figure 4 top).

/// Time per (resource, CPU level) cell.
type Cells = BTreeMap<(Resource, Option<Level>), Ns>;

/// Per operation, time per (resource, level) cell; operations ordered by total.
fn cells_by_operation(p: &ProcessBreakdown) -> Vec<(String, Ns, Cells)> {
    let mut ops: BTreeMap<String, BTreeMap<(Resource, Option<Level>), Ns>> = BTreeMap::new();
    for row in &p.rows {
        *ops.entry(row.operation.clone())
            .or_default()
            .entry((row.resource, row.cpu_level))
            .or_insert(0) += row.time_ns;
    }
    let mut out: Vec<_> = ops
        .into_iter()
        .map(|(op, cells)| {
            let total: Ns = cells.values().sum();
            (op, total, cells)
        })
        .collect();
    out.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

fn segments(
    label: &str,
    cells: &BTreeMap<(Resource, Option<Level>), Ns>,
    window: Ns,
) -> Vec<Segment> {
    // Order: CPU, CPU+GPU, GPU, idle; within a resource by stratum.
    let mut keys: Vec<_> = cells.keys().copied().collect();
    keys.sort_by_key(|(r, l)| {
        let ro = match r {
            Resource::Cpu => 0,
            Resource::CpuGpu => 1,
            Resource::Gpu => 2,
            Resource::Idle => 3,
        };
        (ro, l.map_or(0, |l| l.code()))
    });
    keys.into_iter()
        .map(|(r, l)| {
            let ns = cells[&(r, l)];
            let what = match l {
                Some(l) => format!("{} / {}", r.as_str(), level_label(l)),
                None => r.as_str().to_owned(),
            };
            Segment {
                value: ns as f64,
                fill: fill_of(r, l),
                tip: format!(
                    "{label}\n{what}: {} ({} of the window)",
                    fmt_ns(ns as f64),
                    pct(share(ns, window))
                ),
            }
        })
        .collect()
}

const BREAKDOWN_BARS: usize = 14;
const PROCESS_CHARTS: usize = 8;

fn breakdown(h: &mut Html, input: &ReportInput) -> bool {
    open(
        h,
        "breakdown",
        "Where the time goes",
        "Per operation: the time the CPU only, the GPU only, or both were busy, and the stratum \
         the CPU was in (colour = resource, pattern = stratum; RL-Scope figure 4). Rows sum to \
         the process's window exactly.",
    );
    let Some(report) = analysis_or_close(h, &input.breakdown) else {
        return false;
    };
    if report.processes.is_empty() {
        return close_empty(
            h,
            "No process has CPU spans or attributed device work: nothing to break down.",
        );
    }
    let mut levels: Vec<Level> = report
        .processes
        .iter()
        .flat_map(|p| p.rows.iter().filter_map(|r| r.cpu_level))
        .collect();
    levels.sort();
    levels.dedup();
    let mut processes: Vec<&ProcessBreakdown> = report.processes.iter().collect();
    processes.sort_by_key(|p| std::cmp::Reverse(p.window_ns));
    for p in processes.iter().take(PROCESS_CHARTS) {
        h.elem(
            "h3",
            &format!(
                "rank {} · pid {}{} · window {}",
                p.rank,
                p.pid,
                p.name
                    .as_deref()
                    .map(|n| format!(" ({n})"))
                    .unwrap_or_default(),
                fmt_ns(p.window_ns as f64)
            ),
        );
        let ops = cells_by_operation(p);
        let mut whole: BTreeMap<(Resource, Option<Level>), Ns> = BTreeMap::new();
        for (_, _, cells) in &ops {
            for (k, v) in cells {
                *whole.entry(*k).or_insert(0) += v;
            }
        }
        let mut chart_bars = vec![Bar {
            label: "whole window".into(),
            segments: segments("whole window", &whole, p.window_ns),
            note: fmt_ns(p.window_ns as f64),
        }];
        let mut rest: BTreeMap<(Resource, Option<Level>), Ns> = BTreeMap::new();
        let mut rest_n = 0;
        for (i, (op, total, cells)) in ops.iter().enumerate() {
            if i < BREAKDOWN_BARS {
                chart_bars.push(Bar {
                    label: op.clone(),
                    segments: segments(op, cells, p.window_ns),
                    note: format!(
                        "{} · {}",
                        fmt_ns(*total as f64),
                        pct(share(*total, p.window_ns))
                    ),
                });
            } else {
                rest_n += 1;
                for (k, v) in cells {
                    *rest.entry(*k).or_insert(0) += v;
                }
            }
        }
        if rest_n > 0 {
            let label = format!("({rest_n} more operations)");
            let total: Ns = rest.values().sum();
            chart_bars.push(Bar {
                segments: segments(&label, &rest, p.window_ns),
                label,
                note: format!(
                    "{} · {}",
                    fmt_ns(total as f64),
                    pct(share(total, p.window_ns))
                ),
            });
        }
        h.fragment(&bars::stacked(&Chart {
            aria: format!("time breakdown of pid {}", p.pid),
            axis: Axis::Duration,
            axis_title: "time".into(),
            bars: chart_bars,
            legend: breakdown_legend(&levels),
            defs: String::new(),
        }));
        let mut rows: Vec<_> = p.rows.iter().collect();
        rows.sort_by_key(|r| std::cmp::Reverse(r.time_ns));
        let table: Vec<Vec<String>> = rows
            .iter()
            .map(|r| {
                vec![
                    name(&r.phase),
                    name(&r.operation),
                    r.resource.as_str().to_owned(),
                    r.cpu_level.map_or("-".into(), |l| l.as_str().to_owned()),
                    fmt_ns(r.time_ns as f64),
                    pct(share(r.time_ns, p.window_ns)),
                ]
            })
            .collect();
        h.details_table(
            &format!("Table: {} rows (they sum to the window)", p.rows.len()),
            &[
                "phase",
                "operation",
                "resource",
                "CPU stratum",
                "time",
                "share",
            ],
            &[4, 5],
            &cell_rows(table),
        );
        let ops_table: Vec<Vec<String>> = p
            .operations
            .iter()
            .map(|o| {
                vec![
                    name(&o.operation),
                    fmt_ns(o.total_ns as f64),
                    fmt_ns(o.cpu_only_ns as f64),
                    fmt_ns(o.cpu_gpu_ns as f64),
                    fmt_ns(o.gpu_only_ns as f64),
                    fmt_ns(o.idle_ns as f64),
                    fmt_ns(o.gpu_launched_ns as f64),
                    o.device_ops_launched.to_string(),
                ]
            })
            .collect();
        h.details_table(
            "Table: per operation",
            &[
                "operation",
                "total",
                "CPU only",
                "CPU+GPU",
                "GPU only",
                "idle",
                "GPU launched",
                "device ops",
            ],
            &[1, 2, 3, 4, 5, 6, 7],
            &cell_rows(ops_table),
        );
    }
    if processes.len() > PROCESS_CHARTS {
        h.absent(&format!(
            "{} more processes are not drawn here; see “Processes side by side”.",
            processes.len() - PROCESS_CHARTS
        ));
    }
    close(h);
    true
}

// ---------------------------------------------------------------------------------------------
// Transitions (figure 4 bottom).

fn transitions(h: &mut Html, input: &ReportInput) -> bool {
    open(
        h,
        "transitions",
        "Transitions between strata",
        "Per operation: how often control passed into another stratum (Python → ML backend, \
         ML backend → accelerator API, ...). Many transitions per unit of work is the overhead \
         RL-Scope's figure 4 (bottom) ties to slow operations.",
    );
    let Some(report) = analysis_or_close(h, &input.breakdown) else {
        return false;
    };
    let mut by_op: BTreeMap<String, BTreeMap<(Level, Level), u64>> = BTreeMap::new();
    let mut by_kind: BTreeMap<(Level, Level), u64> = BTreeMap::new();
    for p in &report.processes {
        for t in &p.transitions {
            *by_op
                .entry(t.operation.clone())
                .or_default()
                .entry((t.from, t.to))
                .or_insert(0) += t.count;
            *by_kind.entry((t.from, t.to)).or_insert(0) += t.count;
        }
    }
    if by_op.is_empty() {
        return close_empty(
            h,
            "No transitions: no CPU span has a parent in another stratum (the trace has no \
             nesting between Python, framework ops and runtime calls).",
        );
    }
    let mut kinds: Vec<((Level, Level), u64)> = by_kind.into_iter().collect();
    kinds.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    kinds.truncate(8);
    let kind_label = |k: (Level, Level)| format!("{} → {}", level_label(k.0), level_label(k.1));
    let mut ops: Vec<(String, u64)> = by_op
        .iter()
        .map(|(op, m)| (op.clone(), m.values().sum()))
        .collect();
    ops.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let chart_bars: Vec<Bar> = ops
        .iter()
        .take(12)
        .map(|(op, total)| Bar {
            label: op.clone(),
            segments: kinds
                .iter()
                .enumerate()
                .map(|(i, (k, _))| {
                    let n = by_op[op].get(k).copied().unwrap_or(0);
                    Segment {
                        value: n as f64,
                        fill: color(i).to_owned(),
                        tip: format!("{op}\n{}: {n}", kind_label(*k)),
                    }
                })
                .collect(),
            note: format!("{total} in all"),
        })
        .collect();
    h.fragment(&bars::grouped(&Chart {
        aria: "transitions per operation".into(),
        axis: Axis::Count,
        axis_title: "transitions".into(),
        bars: chart_bars,
        legend: kinds
            .iter()
            .enumerate()
            .map(|(i, (k, _))| (kind_label(*k), color(i).to_owned()))
            .collect(),
        defs: String::new(),
    }));
    let mut rows = Vec::new();
    for (op, m) in &by_op {
        for ((from, to), n) in m {
            rows.push((op.clone(), *from, *to, *n));
        }
    }
    rows.sort_by_key(|r| std::cmp::Reverse(r.3));
    let table: Vec<Vec<String>> = rows
        .into_iter()
        .map(|(op, f, t, n)| {
            vec![
                name(&op),
                f.as_str().into(),
                t.as_str().into(),
                n.to_string(),
            ]
        })
        .collect();
    h.details_table(
        "Table: transitions",
        &["operation", "from", "to", "count"],
        &[3],
        &cell_rows(table),
    );
    close(h);
    true
}

// ---------------------------------------------------------------------------------------------
// Processes side by side (figure 8).

fn processes(h: &mut Html, input: &ReportInput) -> bool {
    open(
        h,
        "processes",
        "Processes side by side",
        "Each process's window split by resource (RL-Scope figure 8, multi-process view): worker \
         pools and ranks that should look alike, and the slowest one.",
    );
    let Some(report) = analysis_or_close(h, &input.breakdown) else {
        return false;
    };
    if report.processes.len() < 2 {
        return close_empty(
            h,
            "Single-process profile: nothing to compare side by side.",
        );
    }
    let mut chart_bars = Vec::new();
    let mut table = Vec::new();
    for p in report.processes.iter().take(48) {
        let mut by: BTreeMap<Resource, Ns> = BTreeMap::new();
        for r in &p.rows {
            *by.entry(r.resource).or_insert(0) += r.time_ns;
        }
        let label = format!(
            "rank {} · pid {}{}",
            p.rank,
            p.pid,
            p.name
                .as_deref()
                .map(|n| format!(" {n}"))
                .unwrap_or_default()
        );
        let order = [
            Resource::Cpu,
            Resource::CpuGpu,
            Resource::Gpu,
            Resource::Idle,
        ];
        chart_bars.push(Bar {
            segments: order
                .iter()
                .map(|r| {
                    let ns = by.get(r).copied().unwrap_or(0);
                    Segment {
                        value: ns as f64,
                        fill: fill_of(*r, None),
                        tip: format!(
                            "{label}\n{}: {} ({})",
                            r.as_str(),
                            fmt_ns(ns as f64),
                            pct(share(ns, p.window_ns))
                        ),
                    }
                })
                .collect(),
            note: fmt_ns(p.window_ns as f64),
            label: label.clone(),
        });
        let get = |r| by.get(&r).copied().unwrap_or(0);
        table.push(vec![
            label,
            fmt_ns(p.window_ns as f64),
            fmt_ns(get(Resource::Cpu) as f64),
            fmt_ns(get(Resource::CpuGpu) as f64),
            fmt_ns(get(Resource::Gpu) as f64),
            fmt_ns(get(Resource::Idle) as f64),
            pct(share(
                get(Resource::Gpu) + get(Resource::CpuGpu),
                p.window_ns,
            )),
        ]);
    }
    h.fragment(&bars::stacked(&Chart {
        aria: "processes side by side".into(),
        axis: Axis::Duration,
        axis_title: "time".into(),
        bars: chart_bars,
        legend: breakdown_legend(&[]),
        defs: String::new(),
    }));
    if let Some(s) = &report.summary {
        h.elem(
            "p",
            &format!(
                "{} processes; slowest: rank {} pid {} ({}); windows spread {:.1}%; GPU active {:.1}%–{:.1}%.",
                s.processes,
                s.slowest_rank,
                s.slowest_pid,
                fmt_ns(s.slowest_window_ns as f64),
                s.window_spread_pct,
                s.gpu_active_min_pct,
                s.gpu_active_max_pct
            ),
        );
    }
    h.details_table(
        "Table: per process",
        &[
            "process",
            "window",
            "CPU",
            "CPU+GPU",
            "GPU",
            "idle",
            "GPU active",
        ],
        &[1, 2, 3, 4, 5, 6],
        &cell_rows(table),
    );
    close(h);
    true
}

// ---------------------------------------------------------------------------------------------
// Utilization reality check (F.11).

fn rank_label(input: &ReportInput, rank: u32) -> String {
    input
        .info
        .sources
        .get(rank as usize)
        .map(|s| match s.rank {
            Some(r) => format!("rank {r}"),
            None => base_name(&s.source).to_owned(),
        })
        .unwrap_or_else(|| format!("rank {rank}"))
}

fn utilization(h: &mut Html, input: &ReportInput) -> bool {
    open(
        h,
        "utilization",
        "Utilization reality check",
        "What nvidia-smi would report (the share of sampling periods with any device op \
         running) beside the true busy time (the union of device work over the window). A high \
         sampled figure with a low true one means the GPU is mostly waiting (RL-Scope F.11).",
    );
    let Some(report) = analysis_or_close(h, &input.util) else {
        return false;
    };
    if report.devices.is_empty() {
        return close_empty(
            h,
            "No device work (kernels, copies, sets) in this profile: it ran on the CPU only.",
        );
    }
    let periods: Vec<f64> = report
        .devices
        .first()
        .map(|d| d.sampled.iter().map(|s| s.period_s).collect())
        .unwrap_or_default();
    let period_label = |p: f64| {
        if p < 1.0 {
            format!("sampled, period {:.0} ms", p * 1000.0)
        } else {
            format!("sampled, period {p} s")
        }
    };
    let chart_bars: Vec<Bar> = report
        .devices
        .iter()
        .take(32)
        .map(|d| {
            let label = format!(
                "{} · device {}{}",
                base_name(&d.source),
                d.device,
                d.name
                    .as_deref()
                    .map(|n| format!(" ({n})"))
                    .unwrap_or_default()
            );
            let mut segs = vec![Segment {
                value: d.true_busy_pct,
                fill: color(0).to_owned(),
                tip: format!(
                    "{label}\ntrue busy: {:.1}% ({} of {})",
                    d.true_busy_pct,
                    fmt_ns(d.busy_ns as f64),
                    fmt_ns(d.window_ns as f64)
                ),
            }];
            for (i, s) in d.sampled.iter().enumerate() {
                segs.push(Segment {
                    value: s.sampled_pct,
                    fill: color(i + 1).to_owned(),
                    tip: format!(
                        "{label}\n{}: {:.1}% ({} of {} periods active)",
                        period_label(s.period_s),
                        s.sampled_pct,
                        s.active_periods,
                        s.periods
                    ),
                });
            }
            Bar {
                label,
                segments: segs,
                note: String::new(),
            }
        })
        .collect();
    let mut legend = vec![("true busy".to_owned(), color(0).to_owned())];
    for (i, p) in periods.iter().enumerate() {
        legend.push((period_label(*p), color(i + 1).to_owned()));
    }
    h.fragment(&bars::grouped(&Chart {
        aria: "utilization reality check".into(),
        axis: Axis::Percent,
        axis_title: "% of the window".into(),
        bars: chart_bars,
        legend,
        defs: String::new(),
    }));
    if !input.busy.is_empty() {
        let origin = input.info.start_ns.unwrap_or(0);
        let bucket = input.busy[0].bucket_ns;
        let series: Vec<Series> = input
            .busy
            .iter()
            .take(8)
            .map(|b| {
                let pts: Vec<(i64, f64)> = b.points().map(|(t, f)| (t, 100.0 * f)).collect();
                Series {
                    label: format!("{} · device {}", rank_label(input, b.rank.0), b.device),
                    points: line::downsample_mean(&pts, line::MAX_POINTS),
                    step: true,
                }
            })
            .collect();
        h.elem(
            "h3",
            &format!(
                "Device busy over time ({} buckets, averaged when zoomed out)",
                fmt_ns(bucket as f64)
            ),
        );
        h.fragment(&line::draw(&LineChart {
            aria: "device busy over time".into(),
            y: YAxis::Percent,
            y_title: "busy %".into(),
            origin_ns: origin,
            series,
            height: 180.0,
        }));
    }
    let table: Vec<Vec<String>> = report
        .devices
        .iter()
        .map(|d| {
            let mut row = vec![
                base_name(&d.source).to_owned(),
                d.device.to_string(),
                d.name.clone().unwrap_or_else(|| "-".into()),
                d.device_ops.to_string(),
                fmt_ns(d.window_ns as f64),
                fmt_ns(d.busy_ns as f64),
                format!("{:.1}%", d.true_busy_pct),
            ];
            row.extend(d.sampled.iter().map(|s| format!("{:.1}%", s.sampled_pct)));
            row
        })
        .collect();
    let mut header: Vec<String> = [
        "source",
        "device",
        "name",
        "ops",
        "window",
        "busy",
        "true busy",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    header.extend(periods.iter().map(|p| period_label(*p)));
    let header_refs: Vec<&str> = header.iter().map(|s| s.as_str()).collect();
    let numeric: Vec<usize> = (3..header.len()).collect();
    h.details_table(
        "Table: per device",
        &header_refs,
        &numeric,
        &cell_rows(table),
    );
    close(h);
    true
}

// ---------------------------------------------------------------------------------------------
// Kernel ranking.

fn kernels(h: &mut Html, input: &ReportInput) -> bool {
    open(
        h,
        "kernels",
        "Kernel ranking",
        "Device ops (kernels, copies, sets) by total time, per rank; the tail is folded into one \
         bar. Concurrent streams count twice, so shares are of device time, not of wall time.",
    );
    let Some(report) = analysis_or_close(h, &input.kernels) else {
        return false;
    };
    let ranks: Vec<_> = report.ranks.iter().filter(|r| r.device_ops > 0).collect();
    if ranks.is_empty() {
        return close_empty(h, "No device ops in this profile: nothing to rank.");
    }
    for r in ranks.iter().take(4) {
        h.elem(
            "h3",
            &format!(
                "rank {} · {} device ops · {} device time",
                r.rank,
                r.device_ops,
                fmt_ns(r.device_time_ns as f64)
            ),
        );
        let chart_bars: Vec<Bar> = r
            .kernels
            .iter()
            .take(KERNEL_TOP + 1)
            .enumerate()
            .map(|(i, k)| Bar {
                label: k.name.clone(),
                segments: vec![Segment {
                    value: k.total_ns as f64,
                    fill: if k.name.starts_with('(') && i == r.kernels.len() - 1 {
                        IDLE_COLOR.to_owned()
                    } else {
                        color(0).to_owned()
                    },
                    tip: format!(
                        "{}\n{} calls, total {}, mean {}, max {}",
                        name(&k.name),
                        k.count,
                        fmt_ns(k.total_ns as f64),
                        fmt_ns(k.mean_ns),
                        fmt_ns(k.max_ns as f64)
                    ),
                }],
                note: format!("{} · {}", fmt_ns(k.total_ns as f64), pct(k.share)),
            })
            .collect();
        h.fragment(&bars::stacked(&Chart {
            aria: format!("kernel ranking of rank {}", r.rank),
            axis: Axis::Duration,
            axis_title: "total time".into(),
            bars: chart_bars,
            legend: Vec::new(),
            defs: String::new(),
        }));
        let table: Vec<Vec<String>> = r
            .kernels
            .iter()
            .enumerate()
            .map(|(i, k)| {
                vec![
                    (i + 1).to_string(),
                    name(&k.name),
                    k.count.to_string(),
                    fmt_ns(k.total_ns as f64),
                    fmt_ns(k.mean_ns),
                    fmt_ns(k.std_ns),
                    fmt_ns(k.min_ns as f64),
                    fmt_ns(k.max_ns as f64),
                    pct(k.share),
                ]
            })
            .collect();
        h.details_table(
            "Table: kernels",
            &[
                "#", "kernel", "count", "total", "mean", "std", "min", "max", "share",
            ],
            &[0, 2, 3, 4, 5, 6, 7, 8],
            &cell_rows(table),
        );
        let ops: Vec<Vec<String>> = r
            .ops
            .iter()
            .map(|k| {
                vec![
                    name(&k.name),
                    k.count.to_string(),
                    fmt_ns(k.total_ns as f64),
                    pct(k.share),
                ]
            })
            .collect();
        h.details_table(
            "Table: by launching operation",
            &["operation", "device ops", "total", "share"],
            &[1, 2, 3],
            &cell_rows(ops),
        );
        let lat: Vec<Vec<String>> = [
            ("launch (API end → device start)", &r.launch_latency),
            ("queued → submitted", &r.queue_latency),
            ("submitted → start", &r.submit_latency),
        ]
        .iter()
        .filter_map(|(what, l)| {
            l.as_ref().map(|l| {
                vec![
                    (*what).to_owned(),
                    l.count.to_string(),
                    fmt_ns(l.mean_ns),
                    fmt_ns(l.p50_ns as f64),
                    fmt_ns(l.p95_ns as f64),
                    fmt_ns(l.max_ns as f64),
                ]
            })
        })
        .collect();
        if !lat.is_empty() {
            h.table(
                &["latency", "count", "mean", "p50", "p95", "max"],
                &[1, 2, 3, 4, 5],
                &lat,
            );
        }
    }
    if ranks.len() > 4 {
        h.absent(&format!(
            "{} more ranks not drawn (`strato kernels` lists them all).",
            ranks.len() - 4
        ));
    }
    close(h);
    true
}

// ---------------------------------------------------------------------------------------------
// Roofline (XSP).

fn roofline(h: &mut Html, input: &ReportInput) -> bool {
    open(
        h,
        "roofline",
        "Roofline",
        "Attained FLOP/s against arithmetic intensity (FLOP per byte of DRAM traffic) for \
         kernels (Nsight Compute metrics) and layers (FLOPs from the op's arguments), against \
         the device's memory and compute roofs (XSP).",
    );
    let Some(report) = analysis_or_close(h, &input.layers) else {
        return false;
    };
    let known = |r: &RooflineFigures| r.arithmetic_intensity.zip(r.attained_flops_per_s);
    let total_kernel: f64 = report
        .kernels
        .iter()
        .map(|k| k.duration.total_ns as f64)
        .sum::<f64>()
        .max(1.0);
    let total_layer: f64 = report
        .layers
        .iter()
        .map(|l| l.kernel_time_ns as f64)
        .sum::<f64>()
        .max(1.0);
    let mut points = Vec::new();
    let mut rows = Vec::new();
    let mut precisions = Vec::new();
    // (what, series, name, figures, share of the series' time): kernels, then layers.
    let kernels = report.kernels.iter().map(|k| {
        let share = k.duration.total_ns as f64 / total_kernel;
        ("kernel", 0, &k.name, &k.roofline, share)
    });
    let layers = report.layers.iter().map(|l| {
        let share = l.kernel_time_ns as f64 / total_layer;
        ("layer", 1, &l.name, &l.roofline, share)
    });
    for (what, series, n, figures, share) in kernels.chain(layers) {
        if let Some((ai, at)) = known(figures) {
            points.push(Point {
                label: format!("{what}: {}", name(n)),
                intensity: ai,
                attained: at,
                series,
                radius: 3.0 + 12.0 * share.sqrt(),
            });
            precisions.extend(figures.precision);
            rows.push(roof_row(what, n, figures));
        }
    }
    if points.is_empty() {
        let mut why = String::from(
            "No kernel or layer has both FLOPs and bytes: kernel figures come from Nsight Compute \
             metrics imported beside the timeline, layer FLOPs from PyTorch's `with_flops` or \
             the op's input shapes (record_shapes).",
        );
        for n in report.notes.iter().take(3) {
            why.push(' ');
            why.push_str(n);
        }
        return close_empty(h, &why);
    }
    precisions.sort_by_key(|p| p.as_str());
    precisions.dedup();
    let spec = report.device.as_ref().and_then(|d| d.spec.as_ref());
    let roofs: Vec<Roof> = spec
        .map(|s| {
            precisions
                .iter()
                .filter_map(|p| {
                    s.peak_flops(*p).map(|f| Roof {
                        label: p.as_str().to_owned(),
                        peak_flops: f,
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    match report.device.as_ref() {
        Some(d) => h.elem(
            "p",
            &format!(
                "Device: {}{}",
                d.name.as_deref().unwrap_or("unnamed"),
                if d.spec.is_some() {
                    ""
                } else {
                    " (not in the device table: no roofs drawn)"
                }
            ),
        ),
        None => h.elem("p", "Device unknown: no roofs drawn."),
    };
    h.fragment(&scatter::draw(&scatter::Roofline {
        aria: "roofline".into(),
        points,
        series_names: vec!["kernels".into(), "layers".into()],
        bandwidth: spec.map(|s| s.bandwidth()),
        roofs,
    }));
    h.details_table(
        "Table: roofline points",
        &[
            "what",
            "name",
            "FLOPs",
            "bytes",
            "FLOP/byte",
            "FLOP/s",
            "bound",
            "% of roof",
        ],
        &[2, 3, 4, 5, 7],
        &cell_rows(rows),
    );
    close(h);
    true
}

fn roof_row(what: &str, n: &str, r: &RooflineFigures) -> Vec<String> {
    let o = |v: Option<f64>| v.map_or("unknown".to_owned(), fmt_si);
    vec![
        what.to_owned(),
        name(n),
        o(r.flops),
        o(r.bytes),
        o(r.arithmetic_intensity),
        o(r.attained_flops_per_s),
        r.bound
            .map_or("unknown".into(), |b| format!("{b:?}").to_lowercase()),
        r.roof_pct.map_or("unknown".into(), |p| format!("{p:.1}%")),
    ]
}

// ---------------------------------------------------------------------------------------------
// Iterations (DeepProf).

fn iterations(h: &mut Html, input: &ReportInput) -> bool {
    open(
        h,
        "iterations",
        "Iterations",
        "Training/inference iterations found from device activity alone (the repeating pattern \
         of kernels on each device's main stream, DeepProf), on the trace's time axis: gaps \
         between them are time the device waited for the host.",
    );
    let Some(report) = analysis_or_close(h, &input.iterations) else {
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
    let origin = input.info.start_ns.unwrap_or(0);
    let end = input.info.end_ns.unwrap_or(origin + 1);
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
                            "#4e79a7"
                        } else {
                            "#a0cbe8"
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
                h.elem("li", d);
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
    h.details_table(
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
    );
    close(h);
    true
}

// ---------------------------------------------------------------------------------------------
// Memory.

fn memory(h: &mut Html, input: &ReportInput) -> bool {
    open(
        h,
        "memory",
        "Memory over time",
        "Device memory allocated over time (bucket maxima, so peaks survive downsampling), the \
         operations that allocated most, and host↔device copies.",
    );
    let Some(report) = analysis_or_close(h, &input.memory) else {
        return false;
    };
    let origin = input.info.start_ns.unwrap_or(0);
    let with_series: Vec<_> = report
        .devices
        .iter()
        .filter(|d| !d.series.is_empty())
        .collect();
    if with_series.is_empty() && report.copies.is_empty() {
        let mut why = String::from(
            "No allocation events or memory counters and no copies: record with \
             profile_memory=True (Kineto [memory] events) to see memory over time.",
        );
        for n in report.notes.iter().take(2) {
            why.push(' ');
            why.push_str(n);
        }
        return close_empty(h, &why);
    }
    if with_series.is_empty() {
        h.absent("No allocation events or memory counters: only copies are shown.");
    } else {
        let series: Vec<Series> = with_series
            .iter()
            .take(8)
            .map(|d| Series {
                label: format!(
                    "rank {}{}{} · peak {}",
                    d.rank,
                    d.device
                        .map(|x| if x < 0 {
                            " host (CPU)".to_owned()
                        } else {
                            format!(" device {x}")
                        })
                        .unwrap_or_default(),
                    d.pid.map(|x| format!(" pid {x}")).unwrap_or_default(),
                    fmt_bytes(d.peak_bytes)
                ),
                points: line::downsample_max(&d.series, line::MAX_POINTS),
                step: true,
            })
            .collect();
        h.fragment(&line::draw(&LineChart {
            aria: "memory allocated over time".into(),
            y: YAxis::Bytes,
            y_title: "allocated".into(),
            origin_ns: origin,
            series,
            height: 240.0,
        }));
        let table: Vec<Vec<String>> = report
            .devices
            .iter()
            .map(|d| {
                vec![
                    d.rank.to_string(),
                    d.device.map_or("-".into(), |x| x.to_string()),
                    d.samples.to_string(),
                    fmt_bytes(d.peak_bytes),
                    d.peak_ns
                        .map_or("-".into(), |t| fmt_ns((t - origin) as f64)),
                    fmt_bytes(d.final_bytes),
                    d.capacity_bytes.map_or("-".into(), |c| fmt_bytes(c as f64)),
                ]
            })
            .collect();
        h.details_table(
            "Table: per device",
            &[
                "rank", "device", "samples", "peak", "peak at", "final", "capacity",
            ],
            &[2, 3, 4, 5, 6],
            &cell_rows(table),
        );
        let ops: Vec<Vec<String>> = report
            .devices
            .iter()
            .flat_map(|d| {
                d.ops.iter().map(move |o| {
                    vec![
                        d.device.map_or("-".into(), |x| x.to_string()),
                        name(&o.op),
                        o.allocations.to_string(),
                        fmt_bytes(o.allocated_bytes as f64),
                        o.frees.to_string(),
                        fmt_bytes(o.freed_bytes as f64),
                        fmt_bytes(o.max_bytes as f64),
                    ]
                })
            })
            .collect();
        if !ops.is_empty() {
            h.details_table(
                "Table: allocating operations",
                &[
                    "device",
                    "operation",
                    "allocations",
                    "allocated",
                    "frees",
                    "freed",
                    "largest",
                ],
                &[2, 3, 4, 5, 6],
                &cell_rows(ops),
            );
        }
    }
    if !report.copies.is_empty() {
        let table: Vec<Vec<String>> = report
            .copies
            .iter()
            .map(|c| {
                vec![
                    c.rank.to_string(),
                    c.device.to_string(),
                    c.direction.label().to_owned(),
                    c.count.to_string(),
                    fmt_ns(c.total_ns as f64),
                    c.bytes.map_or("-".into(), |b| fmt_bytes(b as f64)),
                    c.bandwidth_gb_s
                        .map_or("-".into(), |b| format!("{b:.2} GB/s")),
                ]
            })
            .collect();
        h.elem("h3", "Host↔device copies");
        h.table(
            &[
                "rank",
                "device",
                "direction",
                "count",
                "time",
                "bytes",
                "bandwidth",
            ],
            &[3, 4, 5, 6],
            &cell_rows(table),
        );
    }
    close(h);
    true
}

// ---------------------------------------------------------------------------------------------
// Diff.

fn signed_ns(ns: Ns) -> String {
    if ns > 0 {
        format!("+{}", fmt_ns(ns as f64))
    } else {
        fmt_ns(ns as f64)
    }
}

fn signed_pct(p: Option<f64>) -> String {
    p.map_or("new".into(), |p| format!("{p:+.1}%"))
}

fn diff_section(h: &mut Html, d: &DiffReport) {
    open(
        h,
        "diff",
        "Compared with another profile",
        "Per operation, stratum and kernel: time in A (baseline) and B (this profile), the change, \
         and what was added or removed. Negative changes are time saved.",
    );
    h.markup("<div class=\"cards\">");
    card(
        h,
        &signed_pct(d.window.delta_pct),
        "change of analysed wall time",
    );
    card(
        h,
        &signed_pct(d.device_time.delta_pct),
        "change of device time",
    );
    card(
        h,
        &d.added_operations().count().to_string(),
        "operations added",
    );
    card(
        h,
        &d.removed_operations().count().to_string(),
        "operations removed",
    );
    card(h, &d.added_kernels().count().to_string(), "kernels added");
    card(
        h,
        &d.removed_kernels().count().to_string(),
        "kernels removed",
    );
    h.markup("</div>");
    let time_row = |what: &str, a: Ns, b: Ns, change: &Delta| {
        vec![
            what.to_owned(),
            fmt_ns(a as f64),
            fmt_ns(b as f64),
            format!(
                "{} ({})",
                signed_ns(change.delta_ns),
                signed_pct(change.delta_pct)
            ),
        ]
    };
    let plain_row = |what: &str, a: String, b: String| vec![what.to_owned(), a, b, String::new()];
    h.table(
        &["", "A", "B", "change"],
        &[1, 2, 3],
        &[
            plain_row("source", name(&d.a.label), name(&d.b.label)),
            plain_row(
                "processes",
                d.a.processes.to_string(),
                d.b.processes.to_string(),
            ),
            time_row(
                "wall time (sum of windows)",
                d.a.window_ns,
                d.b.window_ns,
                &d.window,
            ),
            time_row(
                "device time",
                d.a.device_time_ns,
                d.b.device_time_ns,
                &d.device_time,
            ),
            plain_row(
                "device ops",
                d.a.device_ops.to_string(),
                d.b.device_ops.to_string(),
            ),
        ],
    );
    let side = |operation: &str, side: &str, ns: Ns, share: f64, fill: &str| Segment {
        value: ns as f64,
        fill: fill.to_owned(),
        tip: format!(
            "{operation}\n{side}: {} ({})",
            fmt_ns(ns as f64),
            pct(share)
        ),
    };
    let (a_fill, b_fill) = (color(9), color(0));
    let chart_bars: Vec<Bar> = d
        .operations
        .iter()
        .take(15)
        .map(|o| Bar {
            label: o.operation.clone(),
            segments: vec![
                side(&o.operation, "A", o.delta.a_ns, o.delta.a_share, a_fill),
                side(&o.operation, "B", o.delta.b_ns, o.delta.b_share, b_fill),
            ],
            note: format!(
                "{} ({})",
                signed_ns(o.delta.delta_ns),
                o.delta.change.as_str()
            ),
        })
        .collect();
    h.elem("h3", "Operations, A vs B (largest changes first)");
    h.fragment(&bars::grouped(&Chart {
        aria: "operations A vs B".into(),
        axis: Axis::Duration,
        axis_title: "time".into(),
        bars: chart_bars,
        legend: vec![
            ("A (baseline)".into(), a_fill.to_owned()),
            ("B".into(), b_fill.to_owned()),
        ],
        defs: String::new(),
    }));
    let delta_cells = |x: &Delta| {
        vec![
            fmt_ns(x.a_ns as f64),
            pct(x.a_share),
            fmt_ns(x.b_ns as f64),
            pct(x.b_share),
            signed_ns(x.delta_ns),
            signed_pct(x.delta_pct),
            x.change.as_str().to_owned(),
        ]
    };
    let strata: Vec<Vec<String>> = d
        .strata
        .iter()
        .filter(|s| s.delta.change != Change::Same)
        .map(|s| {
            let mut row = vec![name(&s.operation), s.stratum_label()];
            row.extend(delta_cells(&s.delta));
            row
        })
        .collect();
    h.details_table(
        &format!(
            "Table: per operation and stratum ({} changed)",
            strata.len()
        ),
        &[
            "operation",
            "stratum",
            "A",
            "A share",
            "B",
            "B share",
            "change",
            "change %",
            "",
        ],
        &[2, 3, 4, 5, 6, 7],
        &cell_rows(strata),
    );
    let kernels: Vec<Vec<String>> = d
        .kernels
        .iter()
        .filter(|k| k.delta.change != Change::Same)
        .map(|k| {
            let mut row = vec![name(&k.name), k.a_count.to_string(), k.b_count.to_string()];
            row.extend(delta_cells(&k.delta));
            row
        })
        .collect();
    h.details_table(
        &format!(
            "Table: kernels ({} changed, {} added, {} removed)",
            kernels.len(),
            d.added_kernels().count(),
            d.removed_kernels().count()
        ),
        &[
            "kernel", "A calls", "B calls", "A", "A share", "B", "B share", "change", "change %",
            "",
        ],
        &[1, 2, 3, 4, 5, 6, 7, 8],
        &cell_rows(kernels),
    );
    close(h);
}
