//! `strato advise`: runs the advice rules ([`strato_analysis::advise`]) on a trace and prints
//! the findings (rule, severity, time at stake, evidence, advice, docs link).
//!
//! Thresholds come from `--rules FILE`, a TOML file: TOML because people edit it by hand and
//! it allows comments next to each threshold (JSON does not); `--print-rules` writes the
//! defaults in that format as a starting point. "No findings" is a success (exit 0).
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};
use strato_analysis::advise::{self, AdviseConfig, AdviseReport, RULES};
use strato_analysis::analyzed::Analyzed;

use crate::ctx::Ctx;

// Arguments of `strato advise` (its help text is on the variant in `app.rs`).
#[derive(clap::Args, Debug)]
pub struct AdviseArgs {
    #[arg(required_unless_present = "print_rules")]
    inputs: Vec<PathBuf>,
    /// Thresholds file (TOML; see `--print-rules` and docs/advise.md).
    #[arg(long, value_name = "FILE")]
    rules: Option<PathBuf>,
    /// Disable a rule (repeatable): host-sync, sync-copy, gpu-idle, launch-bound, low-util,
    /// step-breakdown, small-copies, copy-overlap, stragglers, exposed-communication.
    #[arg(long, value_name = "RULE")]
    disable: Vec<String>,
    /// Hide findings below this share of the window (percent; default 1, or the rules file's).
    #[arg(long, value_name = "PCT")]
    floor: Option<f64>,
    /// Report every finding, even below the floor.
    #[arg(long)]
    all: bool,
    /// Print the default rules file (TOML) and exit.
    #[arg(long)]
    print_rules: bool,
    #[arg(long)]
    json: bool,
}

/// Reads a `--rules` file: bounded like every configuration file ([`strato_io::config`]),
/// parsed and checked by [`AdviseConfig::from_toml`]; the error names the file.
pub fn read_rules(path: &Path) -> Result<AdviseConfig> {
    let text = strato_io::config::read_config_text(path, "the rules file")?;
    AdviseConfig::from_toml(&text).map_err(|e| anyhow!("{}: {e}", path.display()))
}

/// Runs `strato advise`.
pub fn run(args: AdviseArgs, ctx: &Ctx, out: &mut impl Write) -> Result<()> {
    let mut config = match &args.rules {
        Some(path) => read_rules(path)?,
        None => AdviseConfig::default(),
    };
    if args.print_rules {
        write!(out, "{}", toml::to_string(&config)?)?;
        return Ok(());
    }
    for id in &args.disable {
        if !config.disable(id) {
            return Err(anyhow!(
                "--disable {id}: no such rule (rules: {})",
                RULES.join(", ")
            ));
        }
    }
    if let Some(floor) = args.floor {
        config.floor_pct = floor;
    }
    config.all |= args.all;
    config.validate().map_err(|e| anyhow!("--floor: {e}"))?;
    // The rules read spans and their attributes (copy sizes, nsys memory kinds) only.
    let import = strato_io::ImportOptions {
        projection: strato_io::Projection::SPANS,
        ..ctx.import_options(true)?
    };
    let trace = ctx.engine.load(&args.inputs, &import)?;
    let cross_rank = advise::CrossRankEvidence::from_trace(&trace);
    let report = advise::advise(
        &Analyzed::new(&trace),
        &config,
        Some(&cross_rank as &dyn advise::MultiRankEvidence),
    );
    if args.json {
        crate::render::write_json(out, &report)?;
    } else {
        text(out, &report)?;
    }
    Ok(())
}

fn ms(ns: i64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

/// The text rendering.
fn text(out: &mut impl Write, r: &AdviseReport) -> Result<()> {
    writeln!(
        out,
        "Window: {} ({} .. {} ns)",
        ms(r.window_ns),
        r.window_start_ns,
        r.window_end_ns
    )?;
    if r.findings.is_empty() {
        writeln!(
            out,
            "No findings at or above the floor ({}% of the window).",
            r.floor_pct
        )?;
    } else {
        writeln!(
            out,
            "{} findings; total at stake {} ({:.1}% of the window) = the union of the \
             findings' time (they overlap, so it is less than their sum).",
            r.findings.len(),
            ms(r.total_at_stake_ns),
            r.total_at_stake_pct
        )?;
    }
    if r.hidden_below_floor > 0 {
        writeln!(
            out,
            "{} findings below the floor of {}% hidden (--all shows them).",
            r.hidden_below_floor, r.floor_pct
        )?;
    }
    for (k, f) in r.findings.iter().enumerate() {
        writeln!(out)?;
        writeln!(
            out,
            "{}. [{}] {}: {} ({:.1}% of the window)",
            k + 1,
            f.severity.as_str(),
            f.rule,
            ms(f.time_ns),
            f.share_pct
        )?;
        writeln!(out, "   {}", f.message)?;
        writeln!(out, "   Advice: {}", f.advice)?;
        writeln!(out, "   Docs: {}", f.docs)?;
        for e in &f.evidence {
            writeln!(
                out,
                "   - {} rank {} {}..{} ns ({}): {}",
                e.kind,
                e.rank,
                e.start_ns,
                e.end_ns,
                ms(e.end_ns - e.start_ns),
                e.name
            )?;
        }
    }
    if !r.steps.is_empty() {
        writeln!(out)?;
        writeln!(out, "Steps (time in ms per category; bottleneck):")?;
        let header: Vec<&str> = advise::step_breakdown::CATEGORIES.to_vec();
        writeln!(
            out,
            "  rank  step                  {}  bottleneck",
            header.join(" | ")
        )?;
        for s in &r.steps {
            let parts: Vec<String> = s
                .parts
                .iter()
                .map(|(c, t)| format!("{:>w$.3}", *t as f64 / 1e6, w = c.len()))
                .collect();
            writeln!(
                out,
                "  {:>4}  {:<20}  {}  {}",
                s.rank,
                s.name,
                parts.join(" | "),
                s.bottleneck
            )?;
        }
    }
    writeln!(out)?;
    writeln!(out, "Rules:")?;
    for s in &r.rules {
        let state = if !s.enabled {
            "disabled".to_owned()
        } else if !s.evaluated {
            format!("not evaluated: {}", s.note.as_deref().unwrap_or(""))
        } else {
            format!("{} findings", s.findings)
        };
        writeln!(out, "  {:<22} {state}", s.rule)?;
    }
    Ok(())
}
