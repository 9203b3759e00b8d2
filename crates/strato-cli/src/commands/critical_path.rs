//! `strato critical-path --overlay OUT`: what the terminal front end adds to the registered
//! `critical-path` (`strato_analysis::paths::critical_path::registration`): the trace written
//! back as Chrome JSON with the whole trace's path laid over it (critical events marked
//! `args.critical = 1`, dependency arrows), as HTA's overlay does. The analysis, its options,
//! JSON, tables and text are the registry's; this module only draws the overlay.

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::{Arg, ArgMatches, Command};
use strato_analysis::paths::critical_path::registration::{job_of, whole_trace};
use strato_analysis::paths::critical_path::{CriticalPath, CriticalPathReport};
use strato_engine::registry::{typed_options, OptionValues, Outcome};
use strato_io::export::chrome::{Overlay, OverlayArrow};
use strato_trace::Ns;

use crate::ctx::Ctx;

/// The registered command of `critical-path` with `--overlay OUT`.
pub(crate) fn with_overlay(command: Command) -> Command {
    command.arg(
        Arg::new("overlay")
            .long("overlay")
            .value_name("OUT")
            .value_parser(clap::value_parser!(PathBuf))
            .help(
                "Write the trace as Chrome JSON with the whole trace's critical path laid over it.",
            ),
    )
}

/// The overlay's path when `matches` (of `critical-path`'s command) ask for one.
pub(crate) fn overlay_asked(matches: &ArgMatches) -> Option<PathBuf> {
    matches
        .try_get_one::<PathBuf>("overlay")
        .ok()
        .flatten()
        .cloned()
}

/// Runs the registered `critical-path` over `inputs` and writes the overlay to `path`: the
/// trace is read once with every event's args (the overlay writes them back), the path
/// computed once for both.
pub(crate) fn run_with_overlay(
    path: &Path,
    inputs: &[PathBuf],
    values: &OptionValues,
    ctx: &Ctx,
) -> Result<Outcome> {
    let read = ctx.read_paths(inputs);
    crate::output::refuse_inputs(path, &read)?;
    let settings = typed_options::<CriticalPath>(values)?;
    if !settings.step.is_empty() {
        anyhow::bail!("--overlay draws the whole trace's path: use it without --step");
    }
    let loaded = ctx.engine.load(inputs, &ctx.import_options(true)?)?;
    let job = job_of(&loaded);
    let (overlay, result) = whole_trace(&job, |report| overlay_of(&job, report)).map_err(|e| {
        anyhow::anyhow!(
            "{}: {e}",
            inputs
                .first()
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        )
    })?;
    crate::output::write_output(path, &read, |w| {
        strato_io::export::chrome::write_overlaid(&job, &overlay, w)
    })?;
    Ok(Outcome::of::<CriticalPath>(result, settings))
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
