//! `collectives` as a registered analysis ([`crate::registry`]): its options, tables, JSON
//! shape and text. The JSON keeps the shape issue 15 names (fields the trace cannot fill are
//! `null`, never 0) and adds fields beside it; bandwidths are decimal GB/s (10^9 B/s), as
//! `bandwidth_unit` states, sizes in the text in binary units (KiB, MiB). The matching itself
//! is the parent module's; several rank files are read rank by rank by the engine
//! (`strato_engine::Engine::collectives_rank_by_rank`).

use std::io::{self, Write};

use serde::{Deserialize, Serialize};
use strato_trace::projection::ArgsScope;
use strato_trace::{Level, Ns};

use super::{
    collectives, CollectiveInstance, CollectivesOptions, CollectivesReport, ExactSizeGroup,
    SizeGroup, StragglerCause, StragglerVerdict,
};
use crate::analyzed::Analyzed;
use crate::distributed::clock_align::RankClock;
use crate::registry::{
    Analysis, AnalysisError, Events, InReport, OptionKind, OptionSpec, Reads, TableSpec,
};
use crate::text::table::Table;
use crate::text::units::{fit_ascii, us};

/// The collectives of a multi-rank job matched across ranks.
#[derive(Debug)]
pub struct Collectives;

/// The options of [`Collectives`] as the front ends give them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CollectivesSettings {
    /// How many of the worst late arrivals get a cause.
    pub stragglers: usize,
}

impl Default for CollectivesSettings {
    fn default() -> Self {
        CollectivesSettings { stragglers: 5 }
    }
}

impl CollectivesSettings {
    /// The analysis' options.
    pub fn options(&self) -> CollectivesOptions {
        CollectivesOptions {
            stragglers: self.stragglers,
        }
    }
}

/// The matched collectives; serialises as the command's JSON.
#[derive(Debug, Clone)]
pub struct CollectivesResult(pub CollectivesReport);

impl Serialize for CollectivesResult {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        to_json(&self.0).serialize(serializer)
    }
}

impl Analysis for Collectives {
    const NAME: &'static str = "collectives";
    const SUMMARY: &'static str = "Collectives of a multi-rank job matched across ranks: per \
collective arrival, wait, transfer, algbw/busbw; stragglers and what the late rank was doing; \
clock alignment";
    const WINDOW: &'static str = "first arrival to the last collective kernel's end, over every \
rank";
    const DOC: &'static str = "docs/analyses/collectives.md";
    const EXAMPLES: &'static [&'static str] = &[
        "strato collectives ranks_dir/",
        "strato collectives rank0.json.gz rank1.json.gz --json",
        "strato collectives ranks_dir/ --csv --table stragglers",
    ];
    const OPTIONS: &'static [OptionSpec] = &[OptionSpec {
        name: "stragglers",
        help: "how many of the worst late arrivals get a cause",
        kind: OptionKind::Count { min: 0 },
        default: "5",
    }];
    const TABLES: &'static [TableSpec] = &[
        TableSpec {
            name: "collectives",
            about: "one row per collective instance: kind, size, arrival spread, wait, \
transfer, bandwidths",
            path: &["collectives"],
            inherit: &[],
            options: &[],
        },
        TableSpec {
            name: "collectives_ranks",
            about: "one row per rank: arrivals, times last, waits, imposed waits",
            path: &["ranks"],
            inherit: &[],
            options: &[],
        },
        TableSpec {
            name: "stragglers",
            about: "the worst late arrivals with what the late rank was doing (cause.*)",
            path: &["stragglers"],
            inherit: &[],
            options: &[],
        },
    ];
    /// Spans, with the args of kernels, API calls and collectives' CPU ops (where collective
    /// attributes sit).
    const READS: Reads = Reads {
        events: Events::Spans,
        args: Some(ArgsScope::Dependencies),
    };
    /// The report's distributed section (heat map, per-rank waits, stragglers).
    const IN_REPORT: InReport = InReport::OwnSection;
    type Options = CollectivesSettings;
    type Output = CollectivesResult;

    fn run(
        analyzed: &Analyzed<'_>,
        settings: &CollectivesSettings,
    ) -> Result<CollectivesResult, AnalysisError> {
        // A process driving several GPUs: one rank per device, as NCCL numbers them.
        Ok(CollectivesResult(collectives(
            analyzed.job(),
            &settings.options(),
        )))
    }

    fn render_text(result: &CollectivesResult, _: &CollectivesSettings) -> String {
        crate::text::written(|out| print_text(&result.0, out))
    }
}

#[derive(Debug, Serialize)]
struct JsonMember {
    rank: i64,
    start_ns: Ns,
    end_ns: Ns,
    wait_ns: Option<Ns>,
    device: i64,
    /// Index of the kernel span in the imported trace.
    kernel_span: u32,
}

#[derive(Debug, Serialize)]
struct JsonCollective {
    kind: &'static str,
    group: Option<String>,
    seq: Option<i64>,
    bytes: Option<u64>,
    /// The smallest and largest size the members report, only when they differ.
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes_disagree: Option<[u64; 2]>,
    complete: bool,
    ranks: Vec<JsonMember>,
    last_rank: Option<i64>,
    transfer_ns: Option<Ns>,
    algbw_gbps: Option<f64>,
    busbw_gbps: Option<f64>,
    cpu_kind: Option<&'static str>,
    cpu_name: Option<String>,
    group_size: usize,
    matched_by: &'static str,
    ordinal: usize,
}

#[derive(Debug, Serialize)]
struct JsonRank {
    rank: i64,
    collectives: usize,
    last_arrivals: usize,
    wait_ns: Option<Ns>,
    imposed_wait_ns: Option<Ns>,
    complete: usize,
    transfer_part_ns: Option<Ns>,
    kernel_ns: Ns,
    clock_shift_ns: Ns,
}

#[derive(Debug, Serialize)]
struct JsonClockRank {
    rank: i64,
    offset_ns: Option<Ns>,
    error_ns: Option<Ns>,
    samples: usize,
    outliers: usize,
    shifted: bool,
}

#[derive(Debug, Serialize)]
struct JsonClock {
    aligned: bool,
    max_error_ns: Option<Ns>,
    reference_rank: Option<i64>,
    note: String,
    ranks: Vec<JsonClockRank>,
}

#[derive(Debug, Serialize)]
struct JsonStraggler {
    /// Index in `collectives`.
    collective: usize,
    rank: i64,
    imposed_wait_ns: Ns,
    lateness_ns: Ns,
    cause: JsonCause,
}

#[derive(Debug, Serialize)]
struct JsonCause {
    verdict: &'static str,
    window_ns: Ns,
    launch_delay_ns: Option<Ns>,
    cpu_op: Option<String>,
    cpu_stratum: Option<&'static str>,
    cpu_op_ns: Option<Ns>,
    cpu_context: Option<String>,
    device_busy_ns: Ns,
    device_op: Option<String>,
    device_op_ns: Option<Ns>,
}

#[derive(Debug, Serialize)]
struct JsonSizeGroup {
    kind: &'static str,
    bucket_bytes: Option<u64>,
    count: usize,
    complete: usize,
    bytes_total: Option<u64>,
    transfer_ns_total: Option<Ns>,
    busbw_gbps_median: Option<f64>,
    link_gbps: Option<f64>,
}

#[derive(Debug, Serialize)]
struct JsonExactSize {
    kind: &'static str,
    bytes: Option<u64>,
    count: usize,
    complete: usize,
    transfer_ns_mean: Option<f64>,
    transfer_ns_median: Option<f64>,
    algbw_gbps_median: Option<f64>,
    busbw_gbps_median: Option<f64>,
}

/// The unit of every `*_gbps` field.
const BANDWIDTH_UNIT: &str = "GB/s = 10^9 bytes/s (decimal, as NCCL-tests; not GiB/s)";

#[derive(Debug, Serialize)]
struct JsonReport {
    collectives: Vec<JsonCollective>,
    ranks: Vec<JsonRank>,
    clock: JsonClock,
    window_ns: Option<(Ns, Ns)>,
    stragglers: Vec<JsonStraggler>,
    by_size: Vec<JsonSizeGroup>,
    worst_rank: Option<i64>,
    /// Per (kind, exact message bytes).
    by_exact_size: Vec<JsonExactSize>,
    bandwidth_unit: &'static str,
}

fn job_rank_of(report: &CollectivesReport, rank: strato_trace::RankId) -> i64 {
    report
        .ranks
        .iter()
        .find(|r| r.rank == rank)
        .map_or(rank.0 as i64, |r| r.job_rank)
}

fn json_collective(report: &CollectivesReport, i: &CollectiveInstance) -> JsonCollective {
    JsonCollective {
        kind: i.kind.as_str(),
        group: i.group.clone(),
        seq: i.seq,
        bytes: i.bytes,
        bytes_disagree: i.bytes_disagree.map(|(low, high)| [low, high]),
        complete: i.complete,
        ranks: i
            .members
            .iter()
            .map(|m| JsonMember {
                rank: m.job_rank,
                start_ns: m.start,
                end_ns: m.end,
                wait_ns: m.wait_ns,
                device: m.device,
                kernel_span: m.kernel.0,
            })
            .collect(),
        last_rank: i.last_rank.map(|r| job_rank_of(report, r)),
        transfer_ns: i.transfer_ns,
        algbw_gbps: i.algbw_gbps,
        busbw_gbps: i.busbw_gbps,
        cpu_kind: i.cpu_kind.map(|k| k.as_str()),
        cpu_name: i.cpu_name.clone(),
        group_size: i.group_size,
        matched_by: i.matched_by.as_str(),
        ordinal: i.ordinal,
    }
}

fn json_cause(c: &StragglerCause) -> JsonCause {
    JsonCause {
        verdict: c.verdict.as_str(),
        window_ns: (c.window_end - c.window_start).max(0),
        launch_delay_ns: c.launch_delay_ns,
        cpu_op: c.cpu_op.clone(),
        cpu_stratum: c.cpu_level.map(Level::as_str),
        cpu_op_ns: c.cpu_op_ns,
        cpu_context: c.cpu_context.clone(),
        device_busy_ns: c.device_busy_ns,
        device_op: c.device_op.clone(),
        device_op_ns: c.device_op_ns,
    }
}

fn json_size(g: &SizeGroup) -> JsonSizeGroup {
    JsonSizeGroup {
        kind: g.kind.as_str(),
        bucket_bytes: g.bucket_bytes,
        count: g.count,
        complete: g.complete,
        bytes_total: g.bytes_total,
        transfer_ns_total: g.transfer_ns_total,
        busbw_gbps_median: g.busbw_gbps_median,
        link_gbps: g.link_gbps,
    }
}

fn json_exact_size(g: &ExactSizeGroup) -> JsonExactSize {
    JsonExactSize {
        kind: g.kind.as_str(),
        bytes: g.bytes,
        count: g.count,
        complete: g.complete,
        transfer_ns_mean: g.transfer_ns_mean,
        transfer_ns_median: g.transfer_ns_median,
        algbw_gbps_median: g.algbw_gbps_median,
        busbw_gbps_median: g.busbw_gbps_median,
    }
}

fn json_clock(report: &CollectivesReport) -> JsonClock {
    let c = &report.clock;
    JsonClock {
        aligned: c.aligned,
        max_error_ns: c.max_error_ns,
        reference_rank: c.reference.map(|r| job_rank_of(report, r)),
        note: c.note.clone(),
        ranks: c
            .ranks
            .iter()
            .map(|r: &RankClock| JsonClockRank {
                rank: job_rank_of(report, r.rank),
                offset_ns: r.offset_ns,
                error_ns: r.error_ns,
                samples: r.samples,
                outliers: r.outliers,
                shifted: r.shifted,
            })
            .collect(),
    }
}

/// The report in its JSON shape.
fn to_json(report: &CollectivesReport) -> JsonReport {
    JsonReport {
        collectives: report
            .instances
            .iter()
            .map(|i| json_collective(report, i))
            .collect(),
        ranks: report
            .ranks
            .iter()
            .map(|r| JsonRank {
                rank: r.job_rank,
                collectives: r.collectives,
                last_arrivals: r.last_arrivals,
                wait_ns: r.wait_ns,
                imposed_wait_ns: r.imposed_wait_ns,
                complete: r.complete,
                transfer_part_ns: r.transfer_part_ns,
                kernel_ns: r.kernel_ns,
                clock_shift_ns: r.shift_ns,
            })
            .collect(),
        clock: json_clock(report),
        window_ns: report.window,
        stragglers: report
            .stragglers
            .iter()
            .map(|s| JsonStraggler {
                collective: s.instance,
                rank: s.job_rank,
                imposed_wait_ns: s.imposed_wait_ns,
                lateness_ns: s.lateness_ns,
                cause: json_cause(&s.cause),
            })
            .collect(),
        by_size: report.by_size.iter().map(json_size).collect(),
        worst_rank: report.worst_rank.map(|i| report.ranks[i].job_rank),
        by_exact_size: report.by_exact_size.iter().map(json_exact_size).collect(),
        bandwidth_unit: BANDWIDTH_UNIT,
    }
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
fn cause_text(c: &StragglerCause) -> String {
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

fn print_text(report: &CollectivesReport, out: &mut Vec<u8>) -> io::Result<()> {
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
