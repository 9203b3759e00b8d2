//! Distributed: the collectives of a multi-rank job
//! ([`strato_analysis::distributed::collectives`]): per rank its collective kernel time split into
//! waiting for the last peer and transfer; a ranks x collectives heat map of lateness (arrival
//! after the first peer); busbw against message size; the worst late arrivals with what the late
//! rank was doing; clock alignment.
//!
//! Size at job scale: one bar per rank (at most [`crate::TABLE_ROWS`]), the heat map keeps at
//! most [`HEAT_CELLS`] cells (the collectives with the most waiting, in time order), the
//! scatter one point per (kind, size) group.

use std::fmt::Write as _;

use crate::html::Html;
use crate::svg::bars::{self, Axis, Bar, Chart, Segment};
use crate::svg::{color, fmt_bytes, fmt_ns, Svg, WIDTH};
use crate::{ReportInput, TABLE_ROWS};
use strato_analysis::distributed::collectives::{
    CollectivesReport, CollectivesResult, StragglerCause, StragglerVerdict,
};
use strato_trace::Ns;

use super::{analysis_or_close, cell_rows, close, close_empty, name, open};

/// Most cells of the lateness heat map (ranks x collectives).
pub const HEAT_CELLS: usize = 4096;

const WAIT_COLOR: &str = strato_analysis::palette::PEER_WAIT;
const TRANSFER_COLOR: &str = strato_analysis::palette::TRANSFER;

/// `colour` (`#RRGGBB`) mixed with white: `t` 0 gives white, 1 the colour.
fn blend_from_white(colour: &str, t: f64) -> String {
    let channel = |i: usize| {
        let c = u8::from_str_radix(&colour[1 + 2 * i..3 + 2 * i], 16).unwrap_or(0);
        (255.0 - t * (255.0 - f64::from(c))).round() as u8
    };
    format!("#{:02x}{:02x}{:02x}", channel(0), channel(1), channel(2))
}

/// One sentence of what a late rank was doing.
fn cause_text(c: &StragglerCause) -> String {
    let mut parts = Vec::new();
    match c.verdict {
        StragglerVerdict::LateLaunch => parts.push(format!(
            "launched {} after the first peer arrived",
            fmt_ns(c.launch_delay_ns.unwrap_or(0) as f64)
        )),
        StragglerVerdict::DeviceBusy => parts.push("launched in time; device busy".to_string()),
        StragglerVerdict::Other => parts.push("no late launch, device not busy".to_string()),
    }
    if let Some(op) = &c.cpu_op {
        parts.push(format!(
            "CPU in {} [{}] for {}",
            name(op),
            c.cpu_level.map_or("?", |l| l.as_str()),
            fmt_ns(c.cpu_op_ns.unwrap_or(0) as f64)
        ));
    }
    let window = (c.window_end - c.window_start).max(0);
    match &c.device_op {
        Some(op) => parts.push(format!(
            "device busy {} of {}, most in {}",
            fmt_ns(c.device_busy_ns as f64),
            fmt_ns(window as f64),
            name(op)
        )),
        None => parts.push(format!("device idle for {}", fmt_ns(window as f64))),
    }
    parts.join("; ")
}

/// Ranks x collectives: cell colour = arrival after the instance's first arrival, relative to
/// the largest such lateness shown. Incomplete instances are hatched grey.
fn heat_map(report: &CollectivesReport, columns: &[usize]) -> String {
    let rows = report.ranks.len();
    let left = 70.0;
    let top = 10.0;
    let plot_w = WIDTH - left - 20.0;
    let cell_w = (plot_w / columns.len().max(1) as f64).min(40.0);
    let cell_h = (600.0 / rows.max(1) as f64).clamp(3.0, 18.0);
    let height = top + cell_h * rows as f64 + 30.0;
    let mut svg = Svg::new(height, "lateness of each rank in each collective");
    let row_of: std::collections::HashMap<_, _> = report
        .ranks
        .iter()
        .enumerate()
        .map(|(i, r)| (r.rank, i))
        .collect();
    let max_late = columns
        .iter()
        .flat_map(|&k| {
            let inst = &report.instances[k];
            let first = inst.members.iter().map(|m| m.start).min().unwrap_or(0);
            inst.members.iter().map(move |m| m.start - first)
        })
        .max()
        .unwrap_or(0)
        .max(1);
    let label_every = (rows / 16).max(1);
    for (i, r) in report.ranks.iter().enumerate() {
        if i % label_every == 0 {
            svg.text(
                left - 6.0,
                top + cell_h * (i as f64 + 0.8),
                "end",
                "tick",
                &format!("rank {}", r.job_rank),
                None,
            );
        }
    }
    for (c, &k) in columns.iter().enumerate() {
        let inst = &report.instances[k];
        let first = inst.members.iter().map(|m| m.start).min().unwrap_or(0);
        for m in &inst.members {
            let Some(&row) = row_of.get(&m.rank) else {
                continue;
            };
            let late = m.start - first;
            let fill = if inst.complete {
                // White (on time) to the colour of waiting for peers (the latest shown).
                let t = (late as f64 / max_late as f64).clamp(0.0, 1.0);
                blend_from_white(WAIT_COLOR, t)
            } else {
                strato_analysis::palette::NEUTRAL.to_string()
            };
            let tip = (late > 0 || Some(m.rank) == inst.last_rank).then(|| {
                format!(
                    "rank {} · #{k} {} · {} after the first arrival{}",
                    m.job_rank,
                    inst.kind.as_str(),
                    fmt_ns(late as f64),
                    if Some(m.rank) == inst.last_rank {
                        " (last)"
                    } else {
                        ""
                    }
                )
            });
            svg.rect(
                left + cell_w * c as f64,
                top + cell_h * row as f64,
                (cell_w - 0.5).max(0.5),
                (cell_h - 0.5).max(0.5),
                &fill,
                tip.as_deref(),
            );
        }
    }
    svg.text(left, height - 8.0, "start", "tick", &format!(
            "{} collectives in time order (of {}); white: arrived first, red: {} later; grey: incomplete",
            columns.len(),
            report.instances.len(),
            fmt_ns(max_late as f64)
        ), None);
    svg.finish()
}

/// busbw (GB/s, linear) against message size (bytes, log2 axis), one point per (kind, size
/// bucket) group, with the link bandwidth as a line where known.
fn busbw_scatter(report: &CollectivesReport) -> Option<String> {
    let groups: Vec<_> = report
        .by_size
        .iter()
        .filter_map(|g| Some((g, g.bucket_bytes?, g.busbw_gbps_median?)))
        .collect();
    if groups.is_empty() {
        return None;
    }
    let left = 70.0;
    let top = 14.0;
    let plot_h = 240.0;
    let bottom = top + plot_h;
    let plot_w = WIDTH - left - 160.0;
    let xmin = groups.iter().map(|g| g.1).min().unwrap_or(1).max(1) as f64;
    let xmax = (groups.iter().map(|g| g.1).max().unwrap_or(1) as f64 * 2.0).max(xmin * 4.0);
    let link = groups
        .iter()
        .filter_map(|g| g.0.link_gbps)
        .fold(0.0, f64::max);
    let ymax = groups.iter().map(|g| g.2).fold(link, f64::max).max(1e-3) * 1.1;
    let lx = |v: f64| left + plot_w * (v.log2() - xmin.log2()) / (xmax.log2() - xmin.log2());
    let ly = |v: f64| bottom - plot_h * v / ymax;
    let mut svg = Svg::new(bottom + 40.0, "bus bandwidth against message size");
    svg.line(left, bottom, left + plot_w, bottom, "axis");
    svg.line(left, top, left, bottom, "axis");
    for i in 0..=4 {
        let v = ymax * i as f64 / 4.0;
        svg.line(left, ly(v), left + plot_w, ly(v), "grid");
        svg.text(
            left - 6.0,
            ly(v) + 4.0,
            "end",
            "tick",
            &format!("{v:.1}"),
            None,
        );
    }
    let mut b = xmin;
    while b <= xmax {
        svg.text(lx(b), bottom + 16.0, "middle", "tick", &fmt_bytes(b), None);
        b *= 16.0;
    }
    svg.text(
        left,
        bottom + 34.0,
        "start",
        "tick",
        "message size (bytes, log) · busbw GB/s",
        None,
    );
    if link > 0.0 {
        svg.line(left, ly(link), left + plot_w, ly(link), "roof");
        svg.text(
            left + plot_w + 6.0,
            ly(link) + 4.0,
            "start",
            "tick",
            &format!("link {link:.0} GB/s"),
            None,
        );
    }
    let mut kinds: Vec<&str> = groups.iter().map(|g| g.0.kind.as_str()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    for (g, bucket, busbw) in &groups {
        let series = kinds
            .iter()
            .position(|k| *k == g.kind.as_str())
            .unwrap_or(0);
        svg.circle(
            lx(*bucket as f64 * 1.41),
            ly(*busbw),
            4.0 + (g.complete as f64).sqrt().min(6.0),
            color(series),
            &format!(
                "{} · {} .. {} · {} instances · median busbw {busbw:.2} GB/s",
                g.kind.as_str(),
                fmt_bytes(*bucket as f64),
                fmt_bytes(*bucket as f64 * 2.0),
                g.complete
            ),
        );
    }
    let items: Vec<(String, String)> = kinds
        .iter()
        .enumerate()
        .map(|(i, k)| ((*k).to_owned(), color(i).to_owned()))
        .collect();
    svg.legend(left + plot_w + 6.0, top + 10.0, &items);
    Some(svg.finish())
}

pub(super) fn distributed(h: &mut Html, input: &ReportInput) -> bool {
    open(
        h,
        "distributed",
        "Distributed",
        "Collectives matched across ranks: per rank its collective kernel time split into \
         waiting for the last peer and transfer (wait + transfer = kernel time); who arrives \
         late, by how much and why; bus bandwidth by message size (NCCL's busbw).",
    );
    let Some(CollectivesResult(report)) = analysis_or_close(h, &input.collectives) else {
        return false;
    };
    if report.instances.is_empty() {
        return close_empty(h, "No collective (NCCL/RCCL) kernel in this profile.");
    }
    let complete = report.instances.iter().filter(|i| i.complete).count();
    let mut lead = format!(
        "{} collectives on {} ranks ({} complete, {} incomplete: peers not in the input)",
        report.instances.len(),
        report.ranks.len(),
        complete,
        report.instances.len() - complete
    );
    if let Some((a, b)) = report.window {
        let _ = write!(
            lead,
            "; window: first arrival to last collective end, {}",
            fmt_ns((b - a) as f64)
        );
    }
    let _ = write!(
        lead,
        ". Clock: {}{}.",
        report.clock.note,
        report
            .clock
            .max_error_ns
            .map(|e| format!(" (alignment error up to {})", fmt_ns(e as f64)))
            .unwrap_or_default()
    );
    h.elem("p", &lead);
    if let Some(viewer) = &input.viewer {
        let href = match report.window {
            Some((a, b)) => viewer.range(a, b, None, "collectives"),
            None => viewer.at("collectives"),
        };
        h.markup("<p>")
            .view_link(&href, "Open the collectives in the viewer")
            .markup(" (members linked across ranks, the wait for the last one shaded).</p>");
    }
    if let Some(w) = report.worst_rank {
        let r = &report.ranks[w];
        h.elem(
            "p",
            &format!(
                "Straggler: rank {} arrives last in {} of {} collectives and makes the others \
                 wait {} in all.",
                r.job_rank,
                r.last_arrivals,
                r.complete,
                fmt_ns(r.imposed_wait_ns.unwrap_or(0) as f64)
            ),
        );
    }
    // Per rank: wait vs transfer.
    if complete > 0 {
        h.elem("h3", "Per rank: waiting for the last peer vs transfer");
        let bars_of: Vec<Bar> = report
            .ranks
            .iter()
            .take(TABLE_ROWS)
            .map(|r| {
                let wait = r.wait_ns.unwrap_or(0);
                let transfer = r.transfer_part_ns.unwrap_or(0);
                Bar {
                    label: format!("rank {}", r.job_rank),
                    segments: vec![
                        Segment {
                            value: wait as f64,
                            fill: WAIT_COLOR.into(),
                            tip: format!("rank {}: waiting {}", r.job_rank, fmt_ns(wait as f64)),
                        },
                        Segment {
                            value: transfer as f64,
                            fill: TRANSFER_COLOR.into(),
                            tip: format!(
                                "rank {}: transfer {}",
                                r.job_rank,
                                fmt_ns(transfer as f64)
                            ),
                        },
                    ],
                    note: format!("last in {}", r.last_arrivals),
                }
            })
            .collect();
        h.fragment(&bars::stacked(&Chart {
            aria: "collective time per rank, wait vs transfer".into(),
            axis: Axis::Duration,
            axis_title: "collective kernel time".into(),
            bars: bars_of,
            legend: vec![
                ("waiting for the last peer".into(), WAIT_COLOR.into()),
                (
                    "transfer (after the last arrival)".into(),
                    TRANSFER_COLOR.into(),
                ),
            ],
            defs: String::new(),
        }));
    }
    // Heat map: the collectives with the most waiting, in time order.
    let per_column = report.ranks.len().max(1);
    let max_columns = (HEAT_CELLS / per_column).max(1);
    let mut columns: Vec<usize> = (0..report.instances.len()).collect();
    if columns.len() > max_columns {
        let wait = |k: usize| -> Ns {
            report.instances[k]
                .members
                .iter()
                .filter_map(|m| m.wait_ns)
                .sum()
        };
        columns.sort_by_key(|&k| (std::cmp::Reverse(wait(k)), k));
        columns.truncate(max_columns);
        columns.sort_unstable();
    }
    h.elem("h3", "Lateness: ranks x collectives");
    h.fragment(&heat_map(report, &columns));
    if let Some(svg) = busbw_scatter(report) {
        h.elem("h3", "Bus bandwidth by message size");
        h.fragment(&svg);
    }
    let size_rows: Vec<Vec<String>> = report
        .by_size
        .iter()
        .map(|g| {
            vec![
                g.kind.as_str().to_owned(),
                g.bucket_bytes
                    .map_or("unknown".into(), |b| format!(">= {}", fmt_bytes(b as f64))),
                g.count.to_string(),
                g.complete.to_string(),
                g.transfer_ns_total.map_or("-".into(), |t| fmt_ns(t as f64)),
                g.busbw_gbps_median
                    .map_or("-".into(), |b| format!("{b:.2}")),
                g.link_gbps.map_or("-".into(), |b| format!("{b:.0}")),
            ]
        })
        .collect();
    h.table(
        &[
            "kind",
            "size",
            "count",
            "complete",
            "transfer",
            "busbw GB/s (median)",
            "link GB/s",
        ],
        &[2, 3, 4, 5, 6],
        &cell_rows(size_rows),
    );
    if !report.stragglers.is_empty() {
        h.elem("h3", "Worst late arrivals and their cause");
        let rows: Vec<Vec<String>> = report
            .stragglers
            .iter()
            .map(|s| {
                let inst = &report.instances[s.instance];
                vec![
                    format!("#{} {}", s.instance, inst.kind.as_str()),
                    s.job_rank.to_string(),
                    fmt_ns(s.lateness_ns as f64),
                    fmt_ns(s.imposed_wait_ns as f64),
                    s.cause.verdict.as_str().to_owned(),
                    cause_text(&s.cause),
                ]
            })
            .collect();
        h.table(
            &[
                "collective",
                "late rank",
                "late by",
                "others waited",
                "verdict",
                "what it was doing",
            ],
            &[1, 2, 3],
            &rows,
        );
    }
    let rank_rows: Vec<Vec<String>> = report
        .ranks
        .iter()
        .map(|r| {
            vec![
                r.job_rank.to_string(),
                r.collectives.to_string(),
                r.complete.to_string(),
                r.last_arrivals.to_string(),
                r.wait_ns.map_or("-".into(), |w| fmt_ns(w as f64)),
                r.imposed_wait_ns.map_or("-".into(), |w| fmt_ns(w as f64)),
                fmt_ns(r.shift_ns as f64),
            ]
        })
        .collect();
    h.details_table(
        "Per rank",
        &[
            "rank",
            "collectives",
            "complete",
            "last",
            "wait",
            "imposed wait",
            "clock shift",
        ],
        &[0, 1, 2, 3, 4, 5, 6],
        &cell_rows(rank_rows),
    );
    close(h);
    true
}
