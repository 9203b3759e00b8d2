//! `strato collectives`: the collectives of a multi-rank job matched across ranks (issue 15):
//! per instance arrival, wait, transfer and bandwidth; per rank how often it arrives last and
//! the wait it imposes; the worst late arrivals with what the late rank was doing; clock
//! alignment. The analysis is [`strato_analysis::distributed::collectives`], run on several rank
//! files rank by rank by the engine ([`strato_engine::Engine::collectives_rank_by_rank`]) and on
//! anything else on the whole trace; the JSON is [`strato_engine::shapes::collectives`]. This
//! module only prints the text: bandwidths in decimal GB/s (10^9 B/s), as the JSON's
//! `bandwidth_unit` states, sizes in binary units (KiB, MiB).

use std::io::Write;
use std::path::PathBuf;

use crate::render::units::{fit_ascii, us};
use crate::table::Table;
use anyhow::Result;
use clap::Args;
use strato_analysis::distributed::collectives::{
    collectives, CollectiveInstance, CollectivesOptions, CollectivesReport, StragglerCause,
    StragglerVerdict,
};
use strato_trace::{Level, Ns};

/// Arguments of `strato collectives`.
#[derive(Args, Debug)]
pub struct CollectivesArgs {
    /// Per-rank trace files, a directory of ranks, a merged multi-rank trace, or a profile
    /// directory.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// How many of the worst late arrivals get a cause.
    #[arg(long, default_value_t = 5)]
    stragglers: usize,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

fn opt_us(v: Option<Ns>) -> String {
    v.map_or_else(|| "-".into(), |n| us(n as f64))
}

fn bytes_text(b: Option<u64>) -> String {
    match b {
        None => "?".into(),
        Some(b) if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        Some(b) if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        Some(b) => format!("{b} B"),
    }
}

/// One sentence of what the late rank was doing.
pub(crate) fn cause_text(c: &StragglerCause) -> String {
    let mut parts = Vec::new();
    match c.verdict {
        StragglerVerdict::LateLaunch => parts.push(format!(
            "its CPU launched the collective {} us after the first peer arrived",
            us(c.launch_delay_ns.unwrap_or(0) as f64)
        )),
        StragglerVerdict::DeviceBusy => {
            parts.push("launched in time, its device was busy".to_string())
        }
        StragglerVerdict::Other => {
            parts.push("neither a late launch nor a busy device".to_string())
        }
    }
    if let Some(op) = &c.cpu_op {
        let level = c.cpu_level.map_or("?", Level::as_str);
        parts.push(format!(
            "CPU: {} [{level}] {} us",
            fit_ascii(op, 60),
            us(c.cpu_op_ns.unwrap_or(0) as f64)
        ));
        if let Some(ctx) = c.cpu_context.as_ref().filter(|x| *x != op) {
            parts.push(format!("in {}", fit_ascii(ctx, 40)));
        }
    }
    let window = (c.window_end - c.window_start).max(0);
    match &c.device_op {
        Some(op) => parts.push(format!(
            "device busy {} of {} us, most in {} ({} us)",
            us(c.device_busy_ns as f64),
            us(window as f64),
            fit_ascii(op, 50),
            us(c.device_op_ns.unwrap_or(0) as f64)
        )),
        None => parts.push(format!("device idle for the {} us", us(window as f64))),
    }
    parts.join("; ")
}

fn print_text(report: &CollectivesReport, out: &mut dyn Write) -> Result<()> {
    let complete = report.instances.iter().filter(|i| i.complete).count();
    let kernels: usize = report.instances.iter().map(|i| i.members.len()).sum();
    writeln!(
        out,
        "{} collectives ({} complete, {} incomplete: peers not in the input) from {} kernels on {} ranks",
        report.instances.len(),
        complete,
        report.instances.len() - complete,
        kernels,
        report.ranks.len()
    )?;
    match report.window {
        Some((a, b)) => writeln!(
            out,
            "window: first arrival to last collective kernel end, {} us",
            us((b - a) as f64)
        )?,
        None => writeln!(out, "window: none (no collective kernel in the input)")?,
    }
    writeln!(
        out,
        "clock: {} (max alignment error {})\n",
        report.clock.note,
        report
            .clock
            .max_error_ns
            .map_or("unknown".into(), |e| format!("{} us", us(e as f64)))
    )?;
    let disagreeing: Vec<&CollectiveInstance> = report
        .instances
        .iter()
        .filter(|i| i.bytes_disagree.is_some())
        .collect();
    if let Some(first) = disagreeing.first() {
        let (low, high) = first.bytes_disagree.unwrap_or_default();
        writeln!(
            out,
            "warning: in {} collectives the ranks report different message sizes (first: {} #{}, {low} to {high} bytes); their bytes and bandwidths are the first rank's\n",
            disagreeing.len(),
            first.kind.as_str(),
            first.seq.map_or(first.ordinal as i64, |s| s),
        )?;
    }
    let mut t = Table::new(&[
        "rank",
        "collectives",
        "complete",
        "last",
        "wait us",
        "imposed us",
        "kernel us",
        "shift us",
    ]);
    for r in &report.ranks {
        t.row(vec![
            r.job_rank.to_string(),
            r.collectives.to_string(),
            r.complete.to_string(),
            r.last_arrivals.to_string(),
            opt_us(r.wait_ns),
            opt_us(r.imposed_wait_ns),
            us(r.kernel_ns as f64),
            us(r.shift_ns as f64),
        ]);
    }
    t.print(out, "")?;
    if let Some(w) = report.worst_rank {
        let r = &report.ranks[w];
        writeln!(
            out,
            "\nstraggler: rank {} arrives last in {} collectives and makes the others wait {} us",
            r.job_rank,
            r.last_arrivals,
            opt_us(r.imposed_wait_ns)
        )?;
    }
    if !report.stragglers.is_empty() {
        writeln!(out, "\nworst late arrivals:")?;
        for s in &report.stragglers {
            let inst = &report.instances[s.instance];
            writeln!(
                out,
                "  #{} {} {}: rank {} late by {} us, others waited {} us\n    {}",
                s.instance,
                inst.kind.as_str(),
                bytes_text(inst.bytes),
                s.job_rank,
                us(s.lateness_ns as f64),
                us(s.imposed_wait_ns as f64),
                cause_text(&s.cause)
            )?;
        }
    }
    writeln!(
        out,
        "\nbandwidths in GB/s = 10^9 B/s (decimal, as NCCL-tests; TraceLens prints GiB/s = 2^30 B/s: \
         divide by 1.074); sizes in KiB/MiB (binary)"
    )?;
    writeln!(out, "\nby kind and size:")?;
    let mut t = Table::new(&[
        "kind",
        "size >=",
        "count",
        "complete",
        "transfer us",
        "busbw GB/s",
        "link GB/s",
    ]);
    for g in &report.by_size {
        t.row(vec![
            g.kind.as_str().to_string(),
            bytes_text(g.bucket_bytes),
            g.count.to_string(),
            g.complete.to_string(),
            opt_us(g.transfer_ns_total),
            g.busbw_gbps_median
                .map_or("-".into(), |b| format!("{b:.2}")),
            g.link_gbps.map_or("-".into(), |b| format!("{b:.0}")),
        ]);
    }
    t.print(out, "")?;
    writeln!(
        out,
        "\nby kind and exact size (times and bandwidths: medians over complete instances):"
    )?;
    let mut t = Table::new(&[
        "kind",
        "bytes",
        "count",
        "complete",
        "mean us",
        "median us",
        "algbw GB/s",
        "busbw GB/s",
    ]);
    let num = |v: Option<f64>, f: fn(f64) -> String| v.map_or("-".into(), f);
    for g in &report.by_exact_size {
        t.row(vec![
            g.kind.as_str().to_string(),
            g.bytes.map_or("?".into(), |b| b.to_string()),
            g.count.to_string(),
            g.complete.to_string(),
            num(g.transfer_ns_mean, us),
            num(g.transfer_ns_median, us),
            num(g.algbw_gbps_median, |b| format!("{b:.2}")),
            num(g.busbw_gbps_median, |b| format!("{b:.2}")),
        ]);
    }
    t.print(out, "")?;
    Ok(())
}

/// Runs `strato collectives`.
pub fn run(args: CollectivesArgs, ctx: &crate::ctx::Ctx, out: &mut dyn Write) -> Result<()> {
    // Spans, with the args of kernels, API calls and collectives' CPU ops (where collective
    // attributes sit); nothing else.
    let options = strato_io::ImportOptions {
        projection: strato_io::Projection::SPANS,
        args_scope: strato_io::ArgsScope::Dependencies,
        ..ctx.import_options(true)?
    };
    let analysis = CollectivesOptions {
        stragglers: args.stragglers,
    };
    let report = match ctx
        .engine
        .collectives_rank_by_rank(&args.inputs, &options, &analysis)?
    {
        Some(report) => report,
        None => {
            let trace = ctx.engine.load(&args.inputs, &options)?;
            // A process driving several GPUs: one rank per device, as NCCL numbers them.
            let split = strato_analysis::distributed::collectives::split_multi_device_ranks(&trace);
            collectives(split.as_ref().unwrap_or(&trace), &analysis)
        }
    };
    if args.json {
        serde_json::to_writer_pretty(
            &mut *out,
            &strato_engine::shapes::collectives::to_json(&report),
        )?;
        writeln!(out)?;
        return Ok(());
    }
    print_text(&report, out)
}
