//! `strato critical-path`: the longest dependency chain of each rank (CPU ops, launches,
//! kernels, stream order, synchronisations and, across ranks, collectives), its length and
//! what it is made of; `--overlay` writes the trace as Chrome JSON with the path laid over it
//! (critical events marked `args.critical = 1`, dependency arrows), as HTA's overlay does.
use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use serde::Serialize;
use strato_analysis::critical_path::{
    critical_path, instances_from_matched, CriticalPathOptions, CriticalPathReport, PathKind,
};
use strato_io::export::chrome::{Overlay, OverlayArrow};
use strato_trace::Ns;

use crate::ctx::Ctx;
use crate::input::load;
use crate::render::units::ms;

// Arguments of `strato critical-path` (its help text is on the variant in `app.rs`).
#[derive(clap::Args, Debug)]
pub struct CriticalPathArgs {
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Write the trace as Chrome JSON with the critical path laid over it.
    #[arg(long, value_name = "OUT")]
    overlay: Option<PathBuf>,
    /// Text: how many of the path's longest events to list per rank.
    #[arg(long, default_value_t = 10)]
    top: usize,
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct ReportJson {
    window: &'static str,
    /// How collectives were matched across ranks (`null` with one rank).
    collectives: Option<CollectivesJson>,
    ranks: Vec<RankJson>,
    graph: strato_analysis::critical_path::GraphStats,
}

#[derive(Serialize)]
struct CollectivesJson {
    method: &'static str,
    instances: usize,
}

#[derive(Serialize)]
struct RankJson {
    rank: i64,
    source: String,
    length_ns: Ns,
    start_ns: Option<Ns>,
    end_ns: Option<Ns>,
    work_ns: Ns,
    by_kind: serde_json::Map<String, serde_json::Value>,
    events: Vec<EventJson>,
    backward_edges: usize,
    note: Option<String>,
}

#[derive(Serialize)]
struct EventJson {
    name: String,
    start_ns: Ns,
    end_ns: Ns,
    kind: &'static str,
    rank: i64,
}

/// Runs `strato critical-path`.
pub fn run(args: CriticalPathArgs, ctx: &Ctx, out: &mut impl Write) -> Result<()> {
    let CriticalPathArgs {
        inputs,
        overlay,
        top,
        json,
    } = args;
    let trace = load(&inputs, &ctx.import_options(true)?)?;
    // The same matching as `strato collectives` (group + sequence number, else group + kind +
    // order, else kind + order on each rank).
    let collectives = (trace.ranks.len() > 1).then(|| {
        let ranks = strato_analysis::collectives::rank_summaries(&trace);
        instances_from_matched(&strato_analysis::collectives::match_collectives(&ranks))
    });
    let instances = collectives.as_ref().map_or(0, Vec::len);
    let options = CriticalPathOptions { collectives };
    let report = critical_path(&trace, &options)
        .map_err(|e| anyhow::anyhow!("{}: {e}", inputs[0].display()))?;
    if let Some(path) = &overlay {
        let overlay = overlay_of(&report);
        crate::output::write_output(path, |w| {
            strato_io::export::chrome::write_overlaid(&trace, &overlay, w)
        })?;
    }
    let collectives = (trace.ranks.len() > 1).then_some(CollectivesJson {
        method: "collectives matcher (group and sequence number, else group, kind and order, else kind and order)",
        instances,
    });
    if json {
        serde_json::to_writer_pretty(&mut *out, &report_json(&report, collectives))?;
        writeln!(out)?;
    } else {
        render(out, &report, collectives.as_ref(), top)?;
    }
    if let Some(path) = overlay {
        if !json {
            writeln!(out, "\nwrote {}", path.display())?;
        }
    }
    Ok(())
}

fn report_json(report: &CriticalPathReport, collectives: Option<CollectivesJson>) -> ReportJson {
    ReportJson {
        window: "whole trace",
        collectives,
        graph: report.graph,
        ranks: report
            .ranks
            .iter()
            .map(|r| RankJson {
                rank: r.rank,
                source: r.source.clone(),
                length_ns: r.length_ns,
                start_ns: r.start_ns,
                end_ns: r.end_ns,
                work_ns: r.work_ns,
                by_kind: r
                    .by_kind
                    .iter()
                    .map(|(k, v)| (k.as_str().to_owned(), (*v).into()))
                    .collect(),
                events: r
                    .events
                    .iter()
                    .map(|e| EventJson {
                        name: e.name.clone(),
                        start_ns: e.start_ns,
                        end_ns: e.end_ns,
                        kind: e.kind.as_str(),
                        rank: e.rank,
                    })
                    .collect(),
                backward_edges: r.backward_edges,
                note: r.note.clone(),
            })
            .collect(),
    }
}

/// The overlay: every path event marked critical, an arrow for every dependency edge of the
/// path (launch, synchronisation, stream order, collective) that joins two tracks.
fn overlay_of(report: &CriticalPathReport) -> Overlay {
    let mut overlay = Overlay {
        mark: "critical".into(),
        ..Overlay::default()
    };
    let mut seen = std::collections::HashSet::new();
    for r in &report.ranks {
        overlay.marked.extend(r.events.iter().map(|e| e.span));
        for s in &r.segments {
            let (Some(from), Some(to)) = (s.from_track, s.to_track) else {
                continue;
            };
            if !s.dependency || from == to || !seen.insert((from, s.from_ns, to, s.to_ns)) {
                continue;
            }
            overlay.arrows.push(OverlayArrow {
                from: (from, s.from_ns),
                to: (to, s.to_ns),
                name: "critical_path".into(),
                category: format!("critical_path_{}", s.kind.as_str()),
                args: vec![
                    ("weight_ns".into(), s.weight_ns),
                    ("covered_ns".into(), (s.to_ns - s.from_ns).max(0)),
                ],
            });
        }
    }
    overlay
}

fn render(
    out: &mut impl Write,
    report: &CriticalPathReport,
    collectives: Option<&CollectivesJson>,
    top: usize,
) -> std::io::Result<()> {
    writeln!(
        out,
        "critical path per rank (whole trace): the longest chain of work ending on the rank; \
         its time by kind adds up to its length"
    )?;
    if let Some(c) = collectives {
        writeln!(
            out,
            "collectives matched across ranks: {} instances ({})",
            c.instances, c.method
        )?;
    }
    for r in &report.ranks {
        writeln!(out, "\nrank {}  {}", r.rank, r.source)?;
        if let Some(note) = &r.note {
            writeln!(out, "  note: {note}")?;
            continue;
        }
        writeln!(
            out,
            "  length {}  (work on it {}), {} events",
            ms(r.length_ns),
            ms(r.work_ns),
            r.events.len()
        )?;
        for kind in PathKind::ALL {
            let ns = r.by_kind.get(&kind).copied().unwrap_or(0);
            let pct = if r.length_ns > 0 {
                100.0 * ns as f64 / r.length_ns as f64
            } else {
                0.0
            };
            writeln!(
                out,
                "  {:<16} {:>14}  {:>6.2} %",
                kind.as_str(),
                ms(ns),
                pct
            )?;
        }
        let mut longest: Vec<_> = r.events.iter().collect();
        longest.sort_by_key(|e| std::cmp::Reverse(e.end_ns - e.start_ns));
        if top > 0 && !longest.is_empty() {
            writeln!(out, "  longest events on the path:")?;
            for e in longest.into_iter().take(top) {
                writeln!(
                    out,
                    "    {:>14}  {:<15} rank {:<3} {}",
                    ms(e.end_ns - e.start_ns),
                    e.kind.as_str(),
                    e.rank,
                    crate::render::units::fit(&e.name, 80)
                )?;
            }
        }
    }
    Ok(())
}
