//! `strato hierarchy` and `strato tree`: the span hierarchy (XSP) and the chain annotation ->
//! op -> API call -> kernel at a time or for kernels by name. Rules:
//! `strato_analysis::cross_stack::hierarchy`, docs/analyses/hierarchy.md.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Result};
use serde_json::json;
use strato_analysis::analyzed::Analyzed;
use strato_analysis::cross_stack::hierarchy::{self, ChainLink, HierarchyReport};
use strato_trace::{Ns, Trace};

use crate::render::units::{fit, ms, pct, us_num};
use crate::render::write_json;
use crate::table::Table;

// Arguments of `strato hierarchy` (its help text is on the variant in `app.rs`).
#[derive(clap::Args, Debug)]
pub struct HierarchyArgs {
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    #[arg(long)]
    json: bool,
}

/// Runs `strato hierarchy`.
pub fn run_hierarchy(
    args: HierarchyArgs,
    ctx: &crate::ctx::Ctx,
    out: &mut impl Write,
) -> Result<()> {
    let HierarchyArgs { inputs, json } = args;
    let trace = ctx.engine.load(&inputs, &ctx.import_options(false)?)?;
    let report = hierarchy::report(&Analyzed::new(&trace));
    if json {
        write_json(out, &report)?;
    } else {
        hierarchy_text(out, &report)?;
    }
    Ok(())
}

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

fn hierarchy_text(out: &mut impl Write, r: &HierarchyReport) -> Result<()> {
    let share = |n: usize, of: usize| pct(n as f64, of as f64);
    let t = &r.total;
    writeln!(
        out,
        "spans {}  with a parent {} ({})  deepest chain {}",
        r.spans,
        r.spans_with_parent,
        share(r.spans_with_parent, r.spans),
        r.max_depth + 1
    )?;
    let mut table = Table::with_left(
        &[
            "rank",
            "device ops",
            "with launch",
            "with op",
            "with annotation",
            "kernels",
            "kernels w/ launch",
            "launched before trace",
            "source",
        ],
        &[8],
    );
    let mut add = |rank: String, a: &hierarchy::Attribution, source: &str| {
        table.row(vec![
            rank,
            a.device_ops.to_string(),
            format!("{} ({})", a.with_launch, share(a.with_launch, a.device_ops)),
            format!("{} ({})", a.with_op, share(a.with_op, a.device_ops)),
            format!(
                "{} ({})",
                a.with_annotation,
                share(a.with_annotation, a.device_ops)
            ),
            a.kernels.to_string(),
            format!(
                "{} ({})",
                a.kernels_with_launch,
                share(a.kernels_with_launch, a.kernels)
            ),
            a.launched_before_trace.to_string(),
            source.to_owned(),
        ]);
    };
    for rank in &r.ranks {
        add(rank.rank.to_string(), &rank.counts, &rank.source);
    }
    if r.ranks.len() > 1 {
        add("all".into(), t, "");
    }
    table.print(out, "")?;
    writeln!(
        out,
        "\nwith annotation: {} by containment, {} by time on the annotated thread",
        t.with_annotation_by_containment, t.with_annotation_by_time
    )?;
    if t.graph_kernels > 0 {
        writeln!(
            out,
            "graph kernels (replayed by a graph launch): {}, mapped to captured launches {} ({}){}",
            t.graph_kernels,
            t.graph_kernels_mapped,
            share(t.graph_kernels_mapped, t.graph_kernels),
            if t.graph_kernels_mapped == 0 {
                "; give --graph-capture FILE to attribute them"
            } else {
                ""
            }
        )?;
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
