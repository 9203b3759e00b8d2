//! The cross-stack subcommands (issue 3): `breakdown`, `hierarchy`, `tree`, `layers`,
//! `roofline`, `util`. Argument parsing, wiring to `strato-analysis`, and text / JSON / CSV
//! rendering of their results. The analyses' windows and conservation rules are in their
//! modules and in `docs/analyses/`.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::table::Table;
use anyhow::{bail, Result};
use clap::{Subcommand, ValueEnum};
use serde_json::{json, Map, Value};
use strato_analysis::analyzed::Analyzed;
use strato_analysis::breakdown::{self, BreakdownOptions, BreakdownReport, Resource};
use strato_analysis::hierarchy::{self, ChainLink, HierarchyReport};
use strato_analysis::layers::{self, LayerSource, LayersOptions, LayersReport, Roofline};
use strato_analysis::util::{self, UtilReport, DEFAULT_PERIODS_S};
use strato_trace::{Ns, Trace};

use crate::input::{import_options, load};

/// The cross-stack subcommands, flattened into the top-level command list.
#[derive(Subcommand, Debug)]
pub enum CrossStackCommand {
    /// Operation-scoped CPU/GPU breakdown per process (RL-Scope): time by (phase, operation,
    /// resource, CPU level), and language transitions per operation.
    #[command(
        after_help = "Rows sum to each process's window exactly. Resource is CPU, GPU, \
CPU+GPU or idle; the CPU level is the stratum the CPU was in (Python, Backend, AcceleratorApi, ...).\n\
See docs/analyses/breakdown.md.\n\nExamples:\n  strato breakdown trace.json.gz\n  \
strato breakdown ranks/ --json\n  strato breakdown trace.json.gz --csv > rows.csv"
    )]
    Breakdown {
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        /// Keep ProfilerStep#N apart instead of folding them into ProfilerStep#*.
        #[arg(long)]
        per_step: bool,
        /// Rows shown per table in text output (the rest are folded into one line).
        #[arg(long, default_value_t = 12)]
        top: usize,
        #[arg(long)]
        json: bool,
        /// Print the rows as CSV.
        #[arg(long, conflicts_with = "json")]
        csv: bool,
    },
    /// Span hierarchy (XSP): how many device ops reach a launching call, a framework op and an
    /// annotation.
    #[command(
        after_help = "See docs/analyses/hierarchy.md.\n\nExample:\n  strato hierarchy trace.json.gz --json"
    )]
    Hierarchy {
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// The chain annotation -> op -> API call -> kernel of what runs at a time, or of kernels by
    /// name.
    #[command(
        after_help = "TIME is absolute ns (1669783687730492000) or an offset from the \
trace start with a unit (250ms, 1.5s, 300us).\nWithout --at or --kernel: the middle of the \
longest kernel.\n\nExamples:\n  strato tree trace.json.gz --at 250ms\n  strato tree trace.json.gz --kernel gemm --limit 2"
    )]
    Tree {
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
    },
    /// Layer, kernel and model tables (XSP A1-A15): latency, occurrences, allocated memory,
    /// kernels, GPU vs CPU latency, throughput, roofline where FLOPs and bytes are known.
    #[command(after_help = "See docs/analyses/layers-roofline.md.\n\nExamples:\n  \
strato layers trace.json.gz\n  strato layers trace.json.gz --kernels --csv\n  \
strato layers trace.json.gz --by annotation --json")]
    Layers {
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        /// What a layer is: top-level framework ops, or annotations.
        #[arg(long, value_enum, default_value_t = LayerBy::Op)]
        by: LayerBy,
        /// Show the per-kernel table instead of the layer table.
        #[arg(long)]
        kernels: bool,
        /// Show the per-step (model) table instead of the layer table.
        #[arg(long, conflicts_with = "kernels")]
        steps: bool,
        /// Fraction trimmed from each end for trimmed means.
        #[arg(long, default_value_t = 0.1)]
        trim: f64,
        /// Samples per step (turns steps/s into samples/s).
        #[arg(long)]
        batch_size: Option<u64>,
        #[arg(long, default_value_t = 15)]
        top: usize,
        #[arg(long)]
        json: bool,
        #[arg(long, conflicts_with = "json")]
        csv: bool,
    },
    /// Roofline per kernel, layer and model: arithmetic intensity, attained FLOP/s, memory- or
    /// compute-bound against the device's ridge point ("unknown" where inputs are missing).
    #[command(
        after_help = "See docs/analyses/layers-roofline.md for the device table and FLOP \
formulas.\n\nExample:\n  strato roofline trace.json.gz metrics.csv"
    )]
    Roofline {
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        #[arg(long, value_enum, default_value_t = LayerBy::Op)]
        by: LayerBy,
        #[arg(long, default_value_t = 15)]
        top: usize,
        #[arg(long)]
        json: bool,
        #[arg(long, conflicts_with = "json")]
        csv: bool,
    },
    /// Utilization reality check (RL-Scope F.11): nvidia-smi's sampled figure beside true
    /// device-busy time, per device.
    #[command(
        after_help = "See docs/analyses/util.md.\n\nExample:\n  strato util trace.json.gz --period 0.1 --period 1"
    )]
    Util {
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        /// Sampling period in seconds (repeatable). Default: 1/6 s and 1 s.
        #[arg(long, value_name = "SECONDS")]
        period: Vec<f64>,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LayerBy {
    Op,
    Annotation,
}

impl LayerBy {
    fn source(self) -> LayerSource {
        match self {
            LayerBy::Op => LayerSource::Op,
            LayerBy::Annotation => LayerSource::Annotation,
        }
    }
}

/// Runs one cross-stack subcommand.
pub fn run(
    command: CrossStackCommand,
    level_map: Option<&Path>,
    out: &mut impl Write,
) -> Result<()> {
    match command {
        CrossStackCommand::Breakdown {
            inputs,
            per_step,
            top,
            json,
            csv,
        } => {
            // The breakdown reads spans only: instants, counters and flows are not kept.
            let import = strato_io::ImportOptions {
                projection: strato_io::Projection::SPANS,
                ..import_options(level_map, false)?
            };
            let trace = load(&inputs, &import)?;
            let report =
                breakdown::breakdown(&Analyzed::new(&trace), &BreakdownOptions { per_step });
            if json {
                write_json(out, &report)?;
            } else if csv {
                breakdown_csv(out, &report)?;
            } else {
                breakdown_text(out, &report, top)?;
            }
        }
        CrossStackCommand::Hierarchy { inputs, json } => {
            let trace = load(&inputs, &import_options(level_map, false)?)?;
            let report = hierarchy::report(&Analyzed::new(&trace));
            if json {
                write_json(out, &report)?;
            } else {
                hierarchy_text(out, &report)?;
            }
        }
        CrossStackCommand::Tree {
            inputs,
            at,
            kernel,
            limit,
            json,
        } => {
            let trace = load(&inputs, &import_options(level_map, false)?)?;
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
        }
        CrossStackCommand::Layers {
            inputs,
            by,
            kernels,
            steps,
            trim,
            batch_size,
            top,
            json,
            csv,
        } => {
            if !(0.0..0.5).contains(&trim) {
                bail!("layers: --trim must be in [0, 0.5)");
            }
            let trace = load(&inputs, &import_options(level_map, true)?)?;
            let report = layers_report(&trace, by, trim, batch_size);
            if json {
                write_json(out, &report)?;
            } else if kernels {
                kernels_table(out, &report, top, csv)?;
            } else if steps {
                steps_table(out, &report, top, csv)?;
            } else {
                layers_table(out, &report, top, csv)?;
            }
        }
        CrossStackCommand::Roofline {
            inputs,
            by,
            top,
            json,
            csv,
        } => {
            let trace = load(&inputs, &import_options(level_map, true)?)?;
            let report = layers_report(&trace, by, 0.1, None);
            let rows = roofline_rows(&report);
            if json {
                write_json(
                    out,
                    &json!({"device": report.device, "rows": rows, "notes": report.notes}),
                )?;
            } else {
                roofline_table(out, &report, &rows, top, csv)?;
            }
        }
        CrossStackCommand::Util {
            inputs,
            period,
            json,
        } => {
            let periods = if period.is_empty() {
                DEFAULT_PERIODS_S.to_vec()
            } else {
                period
            };
            if periods.iter().any(|p| !(*p > 0.0 && p.is_finite())) {
                bail!("util: --period must be a positive number of seconds");
            }
            let trace = load(&inputs, &import_options(level_map, false)?)?;
            let report = util::util(&trace, &periods);
            if json {
                write_json(out, &util_json(&report))?;
            } else {
                util_text(out, &report)?;
            }
        }
    }
    Ok(())
}

fn layers_report(trace: &Trace, by: LayerBy, trim: f64, batch_size: Option<u64>) -> LayersReport {
    layers::layers(
        &Analyzed::new(trace),
        &LayersOptions {
            source: by.source(),
            trim,
            batch_size,
        },
    )
}

fn write_json(out: &mut impl Write, value: &impl serde::Serialize) -> Result<()> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    writeln!(out)?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Formatting helpers.

fn ms(ns: Ns) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

fn ms_num(ns: f64) -> String {
    format!("{:.3}", ns / 1e6)
}

fn us_num(ns: f64) -> String {
    format!("{:.1}", ns / 1e3)
}

fn pct(part: f64, whole: f64) -> String {
    if whole > 0.0 {
        format!("{:.1}%", 100.0 * part / whole)
    } else {
        "-".into()
    }
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or_else(|| "unknown".to_owned(), f)
}

fn short(name: &str, width: usize) -> String {
    if name.chars().count() <= width {
        name.to_owned()
    } else {
        let cut: String = name.chars().take(width.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

// ---------------------------------------------------------------------------------------------
// breakdown

fn breakdown_csv(out: &mut impl Write, report: &BreakdownReport) -> Result<()> {
    let mut t = Table::with_left(
        &[
            "rank",
            "pid",
            "phase",
            "operation",
            "resource",
            "cpu_level",
            "time_ns",
            "window_ns",
        ],
        &[],
    );
    for p in &report.processes {
        for r in &p.rows {
            t.row(vec![
                p.rank.to_string(),
                p.pid.to_string(),
                r.phase.clone(),
                r.operation.clone(),
                r.resource.as_str().to_owned(),
                r.cpu_level.map_or(String::new(), |l| l.as_str().to_owned()),
                r.time_ns.to_string(),
                p.window_ns.to_string(),
            ]);
        }
    }
    t.csv(out)?;
    Ok(())
}

fn breakdown_text(out: &mut impl Write, report: &BreakdownReport, top: usize) -> Result<()> {
    if report.processes.is_empty() {
        writeln!(out, "no CPU processes in the trace: nothing to break down")?;
    }
    for p in &report.processes {
        let w = p.window_ns as f64;
        writeln!(
            out,
            "rank {} pid {} ({})  annotated thread {}  window {}  [{} .. {})",
            p.rank,
            p.pid,
            p.name.as_deref().unwrap_or("-"),
            p.annotated_tid.map_or("-".into(), |t| t.to_string()),
            ms(p.window_ns),
            p.window_start_ns,
            p.window_end_ns
        )?;
        writeln!(
            out,
            "  source {}; {} device ops attributed ({} without launch correlation)",
            p.source, p.device_ops, p.device_ops_without_launch
        )?;
        // Resource totals.
        let mut by_resource = [0i64; 4];
        for r in &p.rows {
            by_resource[r.resource as usize] += r.time_ns;
        }
        writeln!(
            out,
            "  CPU only {} ({}), CPU+GPU {} ({}), GPU only {} ({}), idle {} ({})\n",
            ms(by_resource[Resource::Cpu as usize]),
            pct(by_resource[Resource::Cpu as usize] as f64, w),
            ms(by_resource[Resource::CpuGpu as usize]),
            pct(by_resource[Resource::CpuGpu as usize] as f64, w),
            ms(by_resource[Resource::Gpu as usize]),
            pct(by_resource[Resource::Gpu as usize] as f64, w),
            ms(by_resource[Resource::Idle as usize]),
            pct(by_resource[Resource::Idle as usize] as f64, w),
        )?;
        let mut t = Table::with_left(
            &[
                "operation",
                "total ms",
                "share",
                "CPU ms",
                "CPU+GPU ms",
                "GPU ms",
                "idle ms",
                "launched GPU ms",
                "device ops",
            ],
            &[0],
        );
        for o in p.operations.iter().take(top) {
            t.row(vec![
                short(&o.operation, 48),
                ms_num(o.total_ns as f64),
                pct(o.total_ns as f64, w),
                ms_num(o.cpu_only_ns as f64),
                ms_num(o.cpu_gpu_ns as f64),
                ms_num(o.gpu_only_ns as f64),
                ms_num(o.idle_ns as f64),
                ms_num(o.gpu_launched_ns as f64),
                o.device_ops_launched.to_string(),
            ]);
        }
        fold(
            &mut t,
            p.operations.iter().skip(top).map(|o| o.total_ns),
            w,
            9,
        );
        writeln!(out, "  by operation")?;
        t.print(out, "  ")?;
        let mut t = Table::with_left(
            &["phase", "operation", "resource", "CPU level", "ms", "share"],
            &[0, 1, 2, 3],
        );
        for r in p.rows.iter().take(top) {
            t.row(vec![
                short(&r.phase, 20),
                short(&r.operation, 40),
                r.resource.as_str().to_owned(),
                r.cpu_level
                    .map_or("-".to_owned(), |l| l.as_str().to_owned()),
                ms_num(r.time_ns as f64),
                pct(r.time_ns as f64, w),
            ]);
        }
        fold(&mut t, p.rows.iter().skip(top).map(|r| r.time_ns), w, 6);
        writeln!(
            out,
            "\n  rows ({} in all; they sum to the window)",
            p.rows.len()
        )?;
        t.print(out, "  ")?;
        if !p.transitions.is_empty() {
            let mut t = Table::with_left(&["operation", "transition", "count"], &[0, 1]);
            for tr in p.transitions.iter().take(top) {
                t.row(vec![
                    short(&tr.operation, 40),
                    format!("{} -> {}", tr.from, tr.to),
                    tr.count.to_string(),
                ]);
            }
            let rest: u64 = p.transitions.iter().skip(top).map(|t| t.count).sum();
            if p.transitions.len() > top {
                t.row(vec![
                    format!("({} more)", p.transitions.len() - top),
                    String::new(),
                    rest.to_string(),
                ]);
            }
            writeln!(out, "\n  transitions")?;
            t.print(out, "  ")?;
        }
        writeln!(out)?;
    }
    if report.unattributed_device_ops > 0 {
        writeln!(
            out,
            "{} device ops could not be attributed to a process (no launch correlation, several processes in their rank)",
            report.unattributed_device_ops
        )?;
    }
    if let Some(s) = &report.summary {
        writeln!(
            out,
            "across {} processes: slowest rank {} pid {} ({}), fastest {}, spread {:.1}% of the mean; GPU active {:.1}%..{:.1}% of the window",
            s.processes,
            s.slowest_rank,
            s.slowest_pid,
            ms(s.slowest_window_ns),
            ms(s.fastest_window_ns),
            s.window_spread_pct,
            s.gpu_active_min_pct,
            s.gpu_active_max_pct
        )?;
    }
    Ok(())
}

/// Adds a "(N more)" row with the folded total in the second column and its share in the third.
fn fold(t: &mut Table, rest: impl Iterator<Item = Ns>, whole: f64, columns: usize) {
    let rest: Vec<Ns> = rest.collect();
    if rest.is_empty() {
        return;
    }
    let total: Ns = rest.iter().sum();
    let mut row = vec![String::new(); columns];
    row[0] = format!("({} more)", rest.len());
    let time_col = if columns == 6 { 4 } else { 1 };
    row[time_col] = ms_num(total as f64);
    row[time_col + 1] = pct(total as f64, whole);
    t.row(row);
}

// ---------------------------------------------------------------------------------------------
// hierarchy and tree

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
                short(&link.name, 90),
                ms(link.start_ns - origin),
                us_num((link.end_ns - link.start_ns) as f64) + " us",
                link.track
            )?;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// layers, kernels, steps, roofline

fn device_line(out: &mut impl Write, report: &LayersReport) -> Result<()> {
    match &report.device {
        Some(d) => {
            let spec = d
                .spec
                .as_ref()
                .map_or("not in the device table".to_owned(), |s| {
                    format!(
                        "{}: fp32 {} TFLOP/s, {} GB/s, fp32 ridge {}",
                        s.name,
                        s.fp32_tflops.map_or("unknown".into(), |v| v.to_string()),
                        s.memory_bandwidth_gbs,
                        opt(
                            s.ridge(strato_analysis::devices::Precision::Fp32),
                            |r| format!("{r:.1} FLOP/B")
                        )
                    )
                });
            writeln!(
                out,
                "device: rank {} device {} ({}) — {}",
                d.rank,
                d.device,
                d.name.as_deref().unwrap_or("unnamed"),
                spec
            )?;
        }
        None => writeln!(out, "device: none")?,
    }
    Ok(())
}

fn notes(out: &mut impl Write, report: &LayersReport) -> Result<()> {
    for n in &report.notes {
        writeln!(out, "note: {n}")?;
    }
    Ok(())
}

fn roof_cells(r: &Roofline) -> Vec<String> {
    vec![
        opt(r.flops, |f| format!("{:.3}", f / 1e9)),
        opt(r.arithmetic_intensity, |a| format!("{a:.2}")),
        opt(r.attained_flops_per_s, |f| format!("{:.3}", f / 1e12)),
        r.bound
            .map_or("unknown".into(), |b| format!("{b:?}").to_lowercase()),
    ]
}

fn layers_table(out: &mut impl Write, report: &LayersReport, top: usize, csv: bool) -> Result<()> {
    let mut t = Table::with_left(
        &[
            "layer",
            "count",
            "count %",
            "CPU ms",
            "CPU %",
            "CPU mean us",
            "CPU trim us",
            "GPU mean us",
            "GPU trim us",
            "kernels",
            "kernel ms",
            "alloc MB",
            "GFLOP",
            "FLOP/B",
            "TFLOP/s",
            "bound",
        ],
        &[0],
    );
    let limit = if csv { usize::MAX } else { top };
    for l in report.layers.iter().take(limit) {
        let mut row = vec![
            if csv {
                l.name.clone()
            } else {
                short(&l.name, 44)
            },
            l.occurrences.to_string(),
            format!("{:.1}", l.share_of_occurrences_pct),
            ms_num(l.cpu.total_ns as f64),
            format!("{:.1}", l.share_of_cpu_time_pct),
            us_num(l.cpu.mean_ns),
            us_num(l.cpu.trimmed_mean_ns),
            us_num(l.gpu.mean_ns),
            us_num(l.gpu.trimmed_mean_ns),
            l.kernels.to_string(),
            ms_num(l.kernel_time_ns as f64),
            l.allocated_bytes
                .map_or("unknown".into(), |b| format!("{:.1}", b as f64 / 1e6)),
        ];
        row.extend(roof_cells(&l.roofline));
        t.row(row);
    }
    if csv {
        t.csv(out)?;
        return Ok(());
    }
    device_line(out, report)?;
    writeln!(
        out,
        "layers ({}): {} instances of {} names; trimmed means drop {:.0}% at each end\n",
        match report.source {
            LayerSource::Op => "top-level framework ops",
            LayerSource::Annotation => "annotations",
        },
        report.layer_instances,
        report.layers.len(),
        report.trim * 100.0
    )?;
    if report.layers.len() > top {
        let rest: Ns = report.layers.iter().skip(top).map(|l| l.cpu.total_ns).sum();
        let mut row = vec![String::new(); 16];
        row[0] = format!("({} more)", report.layers.len() - top);
        row[3] = ms_num(rest as f64);
        t.row(row);
    }
    t.print(out, "")?;
    if let Some(l) = report.layers.first() {
        if !l.top_kernels.is_empty() {
            writeln!(out, "\nkernels of {}", short(&l.name, 60))?;
            for k in &l.top_kernels {
                writeln!(
                    out,
                    "  {:>8} x  {:>10} ms  {}",
                    k.count,
                    ms_num(k.total_ns as f64),
                    short(&k.name, 100)
                )?;
            }
        }
    }
    writeln!(out)?;
    notes(out, report)?;
    Ok(())
}

fn kernels_table(out: &mut impl Write, report: &LayersReport, top: usize, csv: bool) -> Result<()> {
    let mut t = Table::with_left(
        &[
            "kernel",
            "count",
            "total ms",
            "mean us",
            "std us",
            "min us",
            "median us",
            "max us",
            "trim us",
            "grid",
            "block",
            "occ %",
            "GFLOP",
            "FLOP/B",
            "TFLOP/s",
            "bound",
        ],
        &[0, 9, 10],
    );
    let limit = if csv { usize::MAX } else { top };
    let dims = |v: &Option<Vec<i64>>| {
        v.as_ref().map_or("-".into(), |v| {
            v.iter().map(i64::to_string).collect::<Vec<_>>().join("x")
        })
    };
    for k in report.kernels.iter().take(limit) {
        let d = &k.duration;
        let mut row = vec![
            if csv {
                k.name.clone()
            } else {
                short(&k.name, 60)
            },
            d.count.to_string(),
            ms_num(d.total_ns as f64),
            us_num(d.mean_ns),
            us_num(d.std_ns),
            us_num(d.min_ns as f64),
            us_num(d.median_ns),
            us_num(d.max_ns as f64),
            us_num(d.trimmed_mean_ns),
            dims(&k.grid),
            dims(&k.block),
            k.occupancy_pct.map_or("-".into(), |o| format!("{o:.0}")),
        ];
        row.extend(roof_cells(&k.roofline));
        t.row(row);
    }
    if csv {
        t.csv(out)?;
        return Ok(());
    }
    device_line(out, report)?;
    writeln!(
        out,
        "kernels: {} launches of {} names\n",
        report.kernel_count,
        report.kernels.len()
    )?;
    if report.kernels.len() > top {
        let rest: Vec<&layers::KernelRow> = report.kernels.iter().skip(top).collect();
        let mut row = vec![String::new(); 16];
        row[0] = format!("({} more)", rest.len());
        row[1] = rest
            .iter()
            .map(|k| k.duration.count)
            .sum::<usize>()
            .to_string();
        row[2] = ms_num(rest.iter().map(|k| k.duration.total_ns).sum::<Ns>() as f64);
        t.row(row);
    }
    t.print(out, "")?;
    writeln!(out)?;
    notes(out, report)?;
    Ok(())
}

fn steps_table(out: &mut impl Write, report: &LayersReport, top: usize, csv: bool) -> Result<()> {
    let mut t = Table::with_left(
        &[
            "rank",
            "pid",
            "step",
            "CPU ms",
            "end-to-end ms",
            "GPU busy ms",
            "device ops",
            "GFLOP",
        ],
        &[2],
    );
    let limit = if csv { usize::MAX } else { top };
    for s in report.steps.iter().take(limit) {
        t.row(vec![
            s.rank.to_string(),
            s.pid.to_string(),
            s.name.clone(),
            ms_num(s.cpu_ns as f64),
            ms_num(s.end_to_end_ns as f64),
            ms_num(s.gpu_busy_ns as f64),
            s.device_ops.to_string(),
            opt(s.flops, |f| format!("{:.3}", f / 1e9)),
        ]);
    }
    if csv {
        t.csv(out)?;
        return Ok(());
    }
    device_line(out, report)?;
    t.print(out, "")?;
    let mut m = Table::with_left(
        &[
            "rank",
            "pid",
            "steps",
            "mean ms",
            "trim ms",
            "min ms",
            "max ms",
            "e2e mean ms",
            "steps/s",
            "samples/s",
            "GPU busy ms",
            "GFLOP",
            "FLOP/B",
            "TFLOP/s",
            "bound",
        ],
        &[],
    );
    for r in &report.models {
        let mut row = vec![
            r.rank.to_string(),
            r.pid.to_string(),
            r.steps.to_string(),
            ms_num(r.latency.mean_ns),
            ms_num(r.latency.trimmed_mean_ns),
            ms_num(r.latency.min_ns as f64),
            ms_num(r.latency.max_ns as f64),
            ms_num(r.end_to_end.mean_ns),
            format!("{:.2}", r.steps_per_s),
            r.samples_per_s.map_or("-".into(), |s| format!("{s:.1}")),
            ms_num(r.gpu_busy_ns as f64),
        ];
        row.extend(roof_cells(&r.roofline));
        m.row(row);
    }
    writeln!(out, "\nmodel")?;
    m.print(out, "")?;
    writeln!(out)?;
    notes(out, report)?;
    Ok(())
}

fn roofline_rows(report: &LayersReport) -> Vec<Value> {
    let mut rows = Vec::new();
    let mut add = |kind: &str, name: &str, count: usize, time_ns: Ns, r: &Roofline| {
        let mut m = Map::new();
        m.insert("kind".into(), json!(kind));
        m.insert("name".into(), json!(name));
        m.insert("count".into(), json!(count));
        m.insert("device_time_ns".into(), json!(time_ns));
        if let Ok(Value::Object(r)) = serde_json::to_value(r) {
            m.extend(r);
        }
        rows.push(Value::Object(m));
    };
    for m in &report.models {
        add(
            "model",
            &format!("rank {} pid {}", m.rank, m.pid),
            m.steps,
            m.gpu_busy_ns,
            &m.roofline,
        );
    }
    for l in &report.layers {
        add(
            "layer",
            &l.name,
            l.occurrences,
            l.kernel_time_ns,
            &l.roofline,
        );
    }
    for k in &report.kernels {
        add(
            "kernel",
            &k.name,
            k.duration.count,
            k.duration.total_ns,
            &k.roofline,
        );
    }
    rows
}

fn roofline_table(
    out: &mut impl Write,
    report: &LayersReport,
    rows: &[Value],
    top: usize,
    csv: bool,
) -> Result<()> {
    let mut t = Table::with_left(
        &[
            "kind",
            "name",
            "count",
            "device ms",
            "precision",
            "GFLOP",
            "MB",
            "FLOP/B",
            "TFLOP/s",
            "ridge",
            "bound",
            "% of roof",
        ],
        &[0, 1, 4],
    );
    let f = |v: &Value, k: &str| v.get(k).and_then(Value::as_f64);
    let known: Vec<&Value> = rows
        .iter()
        .filter(|r| f(r, "flops").is_some() || f(r, "bytes").is_some())
        .collect();
    let limit = if csv { usize::MAX } else { top };
    for r in known.iter().take(limit) {
        let name = r.get("name").and_then(Value::as_str).unwrap_or("");
        t.row(vec![
            r.get("kind")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            if csv {
                name.to_owned()
            } else {
                short(name, 50)
            },
            r.get("count")
                .and_then(Value::as_u64)
                .unwrap_or(0)
                .to_string(),
            ms_num(f(r, "device_time_ns").unwrap_or(0.0)),
            r.get("precision")
                .and_then(Value::as_str)
                .unwrap_or("unknown")
                .to_owned(),
            opt(f(r, "flops"), |v| format!("{:.3}", v / 1e9)),
            opt(f(r, "bytes"), |v| format!("{:.2}", v / 1e6)),
            opt(f(r, "arithmetic_intensity"), |v| format!("{v:.2}")),
            opt(f(r, "attained_flops_per_s"), |v| format!("{:.3}", v / 1e12)),
            opt(f(r, "ridge"), |v| format!("{v:.1}")),
            r.get("bound")
                .and_then(Value::as_str)
                .unwrap_or("unknown")
                .to_owned(),
            opt(f(r, "roof_pct"), |v| format!("{v:.1}")),
        ]);
    }
    if csv {
        t.csv(out)?;
        return Ok(());
    }
    device_line(out, report)?;
    writeln!(
        out,
        "{} of {} models/layers/kernels have known FLOPs or bytes\n",
        known.len(),
        rows.len()
    )?;
    if known.is_empty() {
        writeln!(out, "roofline: unknown (no FLOPs or bytes in this trace)")?;
    } else {
        t.print(out, "")?;
    }
    writeln!(out)?;
    notes(out, report)?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// util

/// `"0.167"` for 1/6 s, `"1"` for 1 s.
fn period_key(p: f64) -> String {
    let s = format!("{p:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_owned()
}

fn util_json(report: &UtilReport) -> Value {
    let devices: Vec<Value> = report
        .devices
        .iter()
        .map(|d| {
            let mut v = serde_json::to_value(d).unwrap_or(Value::Null);
            let sampled: Map<String, Value> = d
                .sampled
                .iter()
                .map(|s| (period_key(s.period_s), json!(s.sampled_pct)))
                .collect();
            if let Value::Object(m) = &mut v {
                m.insert("sampled_pct".into(), Value::Object(sampled));
            }
            v
        })
        .collect();
    json!({ "devices": devices })
}

fn util_text(out: &mut impl Write, report: &UtilReport) -> Result<()> {
    if report.devices.is_empty() {
        writeln!(out, "no device work in the trace")?;
        return Ok(());
    }
    let periods: Vec<String> = report.devices[0]
        .sampled
        .iter()
        .map(|s| format!("nvidia-smi @{} s", period_key(s.period_s)))
        .collect();
    let mut header = vec![
        "rank",
        "device",
        "name",
        "ops",
        "window ms",
        "busy ms",
        "true busy",
    ];
    header.extend(periods.iter().map(String::as_str));
    let mut t = Table::with_left(&header, &[2]);
    for d in &report.devices {
        let mut row = vec![
            d.rank.to_string(),
            d.device.to_string(),
            d.name.clone().unwrap_or_else(|| "-".into()),
            d.device_ops.to_string(),
            ms_num(d.window_ns as f64),
            ms_num(d.busy_ns as f64),
            format!("{:.1}%", d.true_busy_pct),
        ];
        row.extend(
            d.sampled
                .iter()
                .map(|s| format!("{:.1}% ({}/{})", s.sampled_pct, s.active_periods, s.periods)),
        );
        t.row(row);
    }
    t.print(out, "")?;
    writeln!(
        out,
        "\nnvidia-smi counts a sampling period as busy when any kernel ran in it; true busy is \
         the union of device work over the window (docs/analyses/util.md)."
    )?;
    Ok(())
}
