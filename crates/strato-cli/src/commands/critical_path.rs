//! `strato critical-path`: the longest dependency chain of each rank (CPU ops, launches,
//! kernels, stream order, synchronisations and, across ranks, collectives), its length and
//! what it is made of; `--overlay` writes the trace as Chrome JSON with the path laid over it
//! (critical events marked `args.critical = 1`, dependency arrows), as HTA's overlay does.
//! `--step N|all` computes the path per `ProfilerStep#N` window instead of the whole trace,
//! with each rank's path composed inside its step window (parts + time off the path = window).
use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use strato_analysis::paths::critical_path::{
    critical_path, critical_path_steps, step_numbers, CriticalPathOptions, CriticalPathReport,
    PathKind, StepCriticalPath, TOP_PATH_OPS,
};
use strato_io::export::chrome::{Overlay, OverlayArrow};
use strato_trace::Ns;

use strato_engine::shapes::critical_path::{
    collectives_json, report_json, steps_json, CollectivesJson,
};

use crate::ctx::Ctx;
use strato_analysis::text::units::ms;

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
    /// One window per `ProfilerStep#N` instead of the whole trace: `N` for that step, `all`
    /// for every step. Each rank's path is composed inside its step window.
    #[arg(long, value_name = "N|all", value_parser = parse_step)]
    step: Option<StepSelection>,
    #[arg(long)]
    json: bool,
}

/// Which steps `--step` asks for.
#[derive(Debug, Clone, Copy)]
enum StepSelection {
    All,
    One(u64),
}

fn parse_step(text: &str) -> Result<StepSelection, String> {
    if text == "all" {
        return Ok(StepSelection::All);
    }
    text.parse::<u64>()
        .map(StepSelection::One)
        .map_err(|_| format!("expected a step number (N of ProfilerStep#N) or `all`, got `{text}`"))
}

/// Runs `strato critical-path`.
pub fn run(args: CriticalPathArgs, ctx: &Ctx, out: &mut impl Write) -> Result<()> {
    let CriticalPathArgs {
        inputs,
        overlay,
        top,
        step,
        json,
    } = args;
    if let Some(path) = &overlay {
        crate::output::refuse_inputs(path, &ctx.read_paths(&inputs))?;
    }
    // The path reads the args of device ops, API calls and collectives' CPU side only; the
    // overlay writes every event back with its args.
    let mut import = ctx.import_options(true)?;
    if overlay.is_none() {
        import.args_scope = strato_io::ArgsScope::Dependencies;
    }
    let loaded = ctx.engine.load(&inputs, &import)?;
    // A process driving several GPUs: one rank per device, as NCCL numbers them, so that its
    // collectives link the devices (see docs/analyses/collectives.md).
    let split = strato_analysis::distributed::collectives::split_multi_device_ranks(&loaded);
    let trace = split.unwrap_or(loaded);
    // The same matching as `strato collectives` (group + sequence number, else group + kind +
    // order, else kind + order on each rank).
    // and the same clock alignment: every cross-rank analysis sees one job.
    let options = CriticalPathOptions::matched(&trace);
    let instances = options.collectives.as_ref().map_or(0, Vec::len);
    let collectives_json = || collectives_json(trace.ranks.len(), instances);
    if let Some(selection) = step {
        if overlay.is_some() {
            anyhow::bail!("--overlay draws the whole trace's path: use it without --step");
        }
        let numbers = step_numbers(&trace);
        let only = match selection {
            StepSelection::All => None,
            StepSelection::One(n) => Some(n),
        };
        if numbers.is_empty() {
            anyhow::bail!(
                "{}: no ProfilerStep#N annotation in the trace: no step window (run without --step for the whole trace)",
                inputs[0].display()
            );
        }
        if let Some(n) = only.filter(|n| !numbers.contains(n)) {
            anyhow::bail!(
                "{}: no ProfilerStep#{n} in the trace (steps: {})",
                inputs[0].display(),
                numbers
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let steps = critical_path_steps(&trace, &options, only)
            .map_err(|e| anyhow::anyhow!("{}: {e}", inputs[0].display()))?;
        if json {
            serde_json::to_writer_pretty(&mut *out, &steps_json(&steps, collectives_json()))?;
            writeln!(out)?;
        } else {
            render_steps(out, &steps, collectives_json().as_ref(), top)?;
        }
        return Ok(());
    }
    let report = critical_path(&trace, &options)
        .map_err(|e| anyhow::anyhow!("{}: {e}", inputs[0].display()))?;
    if let Some(path) = &overlay {
        let overlay = overlay_of(&trace, &report);
        crate::output::write_output(path, &ctx.read_paths(&inputs), |w| {
            strato_io::export::chrome::write_overlaid(&trace, &overlay, w)
        })?;
    }
    let collectives = collectives_json();
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

fn render_steps(
    out: &mut impl Write,
    steps: &[StepCriticalPath],
    collectives: Option<&CollectivesJson>,
    top: usize,
) -> std::io::Result<()> {
    writeln!(
        out,
        "critical path per step and rank: window = the step annotation's start to the latest end \
         of its CPU ops and the device ops they launched; the path's time by kind plus the time \
         before and after the path adds up to the window"
    )?;
    if let Some(c) = collectives {
        writeln!(
            out,
            "collectives matched across ranks: {} instances ({})",
            c.instances, c.method
        )?;
    }
    for s in steps {
        writeln!(out, "\n{}", s.step)?;
        for r in &s.ranks {
            let w = &r.window;
            writeln!(
                out,
                "  rank {}  window {} .. {} ({}), path {} ({} events)",
                r.path.rank,
                w.start_ns,
                w.end_ns,
                ms(w.window_ns),
                ms(r.path.length_ns),
                r.path.events.len()
            )?;
            if let Some(note) = &r.path.note {
                writeln!(out, "    note: {note}")?;
            }
            let pct = |ns: Ns| {
                if w.window_ns > 0 {
                    100.0 * ns as f64 / w.window_ns as f64
                } else {
                    0.0
                }
            };
            let kernel = w.by_kind.get(&PathKind::Kernel).copied().unwrap_or(0);
            let mut rows: Vec<(String, Ns)> = Vec::new();
            for kind in PathKind::ALL {
                let ns = w.by_kind.get(&kind).copied().unwrap_or(0);
                if kind == PathKind::Kernel {
                    rows.push(("kernel (compute)".into(), kernel - w.communication_ns));
                    rows.push(("kernel (communication)".into(), w.communication_ns));
                } else {
                    rows.push((kind.as_str().into(), ns));
                }
            }
            rows.push(("before the path".into(), w.before_path_ns));
            rows.push(("after the path".into(), w.after_path_ns));
            for (label, ns) in rows {
                writeln!(out, "    {label:<24} {:>14}  {:>6.2} %", ms(ns), pct(ns))?;
            }
            if top > 0 && !w.top_ops.is_empty() {
                writeln!(out, "    most path time:")?;
                for o in w.top_ops.iter().take(top.min(TOP_PATH_OPS)) {
                    writeln!(
                        out,
                        "      {:>14}  {:<15} rank {:<3} {}",
                        ms(o.ns),
                        o.kind.as_str(),
                        o.rank,
                        strato_analysis::text::units::fit(&o.name, 80)
                    )?;
                }
            }
        }
    }
    Ok(())
}

/// The overlay: every path event marked critical, an arrow for every dependency edge of the
/// path (launch, synchronisation, stream order, collective) that joins two tracks.
fn overlay_of(trace: &strato_trace::Trace, report: &CriticalPathReport) -> Overlay {
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
            // The overlay is the file's own timeline: each end back on its rank's clock.
            let own = |track: strato_trace::TrackId, ns: Ns| {
                let rank = trace.track(track).rank;
                ns - report
                    .clock_shift
                    .get(rank.0 as usize)
                    .copied()
                    .unwrap_or(0)
            };
            overlay.arrows.push(OverlayArrow {
                from: (from, own(from, s.from_ns)),
                to: (to, own(to, s.to_ns)),
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
                    strato_analysis::text::units::fit(&e.name, 80)
                )?;
            }
        }
    }
    Ok(())
}
