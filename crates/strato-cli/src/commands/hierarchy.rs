//! `strato tree`: the chain annotation -> op -> API call -> kernel at a time or for kernels by
//! name, over the span hierarchy (XSP; `strato hierarchy` is a registered analysis). Rules:
//! `strato_analysis::cross_stack::hierarchy`, docs/analyses/hierarchy.md.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Result};
use serde_json::json;
use strato_analysis::analyzed::Analyzed;
use strato_analysis::cross_stack::hierarchy::{self, ChainLink};
use strato_trace::{Ns, Trace};

use crate::render::write_json;
use strato_analysis::text::units::{fit, ms, us_num};

// Arguments of `strato tree` (its help text is on the variant in `app.rs`).
#[derive(clap::Args, Debug)]
pub struct TreeArgs {
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    #[arg(long, value_name = "TIME")]
    at: Option<String>,
    /// Show the chains of the first kernels whose name contains this text.
    #[arg(long, value_name = "TEXT", conflicts_with = "at")]
    kernel: Option<String>,
    #[arg(long, default_value_t = 8)]
    limit: usize,
    #[arg(long)]
    json: bool,
}

/// Runs `strato tree`.
pub fn run_tree(args: TreeArgs, ctx: &crate::ctx::Ctx, out: &mut impl Write) -> Result<()> {
    let TreeArgs {
        inputs,
        at,
        kernel,
        limit,
        json,
    } = args;
    let trace = ctx.engine.load(&inputs, &ctx.import_options(false)?)?;
    let analyzed = Analyzed::new(&trace);
    let origin = trace.time_span().map_or(0, |s| s.0);
    let (title, chains) = if let Some(needle) = kernel {
        let chains = hierarchy::chains_of_kernels(&analyzed, &needle, limit);
        (format!("kernels containing {needle:?}"), chains)
    } else {
        let t = match at {
            Some(text) => parse_time(&text, origin)?,
            None => longest_kernel_middle(&trace).ok_or_else(|| {
                anyhow::anyhow!("tree: the trace has no device kernels; give --at TIME")
            })?,
        };
        let chains = hierarchy::chains_at(&analyzed, t, limit);
        (
            format!("at {t} ns ({} from the trace start)", ms(t - origin)),
            chains,
        )
    };
    if json {
        write_json(out, &json!({"what": title, "chains": chains}))?;
    } else {
        tree_text(out, &title, &chains, origin)?;
    }
    Ok(())
}

fn parse_time(text: &str, origin: Ns) -> Result<Ns> {
    let t = text.trim();
    if let Ok(abs) = t.parse::<i64>() {
        return Ok(abs);
    }
    let units = [("ns", 1.0), ("us", 1e3), ("ms", 1e6), ("s", 1e9)];
    for (suffix, scale) in units {
        if let Some(num) = t.strip_prefix('+').unwrap_or(t).strip_suffix(suffix) {
            if let Ok(v) = num.trim().parse::<f64>() {
                return Ok(origin + (v * scale).round() as i64);
            }
        }
    }
    bail!("tree: --at {text:?}: expected absolute ns or an offset like 250ms, 1.5s, 300us")
}

fn longest_kernel_middle(trace: &Trace) -> Option<Ns> {
    trace
        .spans
        .iter()
        .filter(|s| s.level == strato_trace::Level::DeviceKernel)
        .max_by_key(|s| s.duration())
        .map(|s| s.start + s.duration() / 2)
}

fn tree_text(
    out: &mut impl Write,
    title: &str,
    chains: &[Vec<ChainLink>],
    origin: Ns,
) -> Result<()> {
    writeln!(out, "{title}: {} chains (root first)", chains.len())?;
    for chain in chains {
        writeln!(out)?;
        for (depth, link) in chain.iter().rev().enumerate() {
            writeln!(
                out,
                "{}{} {:<14} {}  [{} +{}]  {}",
                "  ".repeat(depth),
                if depth == 0 { "*" } else { "└" },
                link.level.as_str(),
                fit(&link.name, 90),
                ms(link.start_ns - origin),
                us_num((link.end_ns - link.start_ns) as f64) + " us",
                link.track
            )?;
        }
    }
    Ok(())
}
