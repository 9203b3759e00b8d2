//! The JSON shape of `strato collectives --json` and of `Profile.collectives()` in Python
//! (one definition: both serialise it). It keeps the shape issue 15 names (fields the trace
//! cannot fill are `null`, never 0) and adds fields beside it. Bandwidths are decimal GB/s
//! (10^9 B/s), as `bandwidth_unit` states.

use serde::Serialize;
use strato_analysis::distributed::clock_align::RankClock;
use strato_analysis::distributed::collectives::{
    CollectiveInstance, CollectivesReport, ExactSizeGroup, SizeGroup, StragglerCause,
};
use strato_trace::{Level, Ns};

#[derive(Debug, Serialize)]
pub struct JsonMember {
    pub rank: i64,
    pub start_ns: Ns,
    pub end_ns: Ns,
    pub wait_ns: Option<Ns>,
    pub device: i64,
    /// Index of the kernel span in the imported trace.
    pub kernel_span: u32,
}

#[derive(Debug, Serialize)]
pub struct JsonCollective {
    pub kind: &'static str,
    pub group: Option<String>,
    pub seq: Option<i64>,
    pub bytes: Option<u64>,
    /// The smallest and largest size the members report, only when they differ.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_disagree: Option<[u64; 2]>,
    pub complete: bool,
    pub ranks: Vec<JsonMember>,
    pub last_rank: Option<i64>,
    pub transfer_ns: Option<Ns>,
    pub algbw_gbps: Option<f64>,
    pub busbw_gbps: Option<f64>,
    pub cpu_kind: Option<&'static str>,
    pub cpu_name: Option<String>,
    pub group_size: usize,
    pub matched_by: &'static str,
    pub ordinal: usize,
}

#[derive(Debug, Serialize)]
pub struct JsonRank {
    pub rank: i64,
    pub collectives: usize,
    pub last_arrivals: usize,
    pub wait_ns: Option<Ns>,
    pub imposed_wait_ns: Option<Ns>,
    pub complete: usize,
    pub transfer_part_ns: Option<Ns>,
    pub kernel_ns: Ns,
    pub clock_shift_ns: Ns,
}

#[derive(Debug, Serialize)]
pub struct JsonClockRank {
    pub rank: i64,
    pub offset_ns: Option<Ns>,
    pub error_ns: Option<Ns>,
    pub samples: usize,
    pub outliers: usize,
    pub shifted: bool,
}

#[derive(Debug, Serialize)]
pub struct JsonClock {
    pub aligned: bool,
    pub max_error_ns: Option<Ns>,
    pub reference_rank: Option<i64>,
    pub note: String,
    pub ranks: Vec<JsonClockRank>,
}

#[derive(Debug, Serialize)]
pub struct JsonStraggler {
    /// Index in `collectives`.
    pub collective: usize,
    pub rank: i64,
    pub imposed_wait_ns: Ns,
    pub lateness_ns: Ns,
    pub cause: JsonCause,
}

#[derive(Debug, Serialize)]
pub struct JsonCause {
    pub verdict: &'static str,
    pub window_ns: Ns,
    pub launch_delay_ns: Option<Ns>,
    pub cpu_op: Option<String>,
    pub cpu_stratum: Option<&'static str>,
    pub cpu_op_ns: Option<Ns>,
    pub cpu_context: Option<String>,
    pub device_busy_ns: Ns,
    pub device_op: Option<String>,
    pub device_op_ns: Option<Ns>,
}

#[derive(Debug, Serialize)]
pub struct JsonSizeGroup {
    pub kind: &'static str,
    pub bucket_bytes: Option<u64>,
    pub count: usize,
    pub complete: usize,
    pub bytes_total: Option<u64>,
    pub transfer_ns_total: Option<Ns>,
    pub busbw_gbps_median: Option<f64>,
    pub link_gbps: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct JsonExactSize {
    pub kind: &'static str,
    pub bytes: Option<u64>,
    pub count: usize,
    pub complete: usize,
    pub transfer_ns_mean: Option<f64>,
    pub transfer_ns_median: Option<f64>,
    pub algbw_gbps_median: Option<f64>,
    pub busbw_gbps_median: Option<f64>,
}

/// The unit of every `*_gbps` field.
const BANDWIDTH_UNIT: &str = "GB/s = 10^9 bytes/s (decimal, as NCCL-tests; not GiB/s)";

#[derive(Debug, Serialize)]
pub struct JsonReport {
    pub collectives: Vec<JsonCollective>,
    pub ranks: Vec<JsonRank>,
    pub clock: JsonClock,
    pub window_ns: Option<(Ns, Ns)>,
    pub stragglers: Vec<JsonStraggler>,
    pub by_size: Vec<JsonSizeGroup>,
    pub worst_rank: Option<i64>,
    /// Per (kind, exact message bytes).
    pub by_exact_size: Vec<JsonExactSize>,
    pub bandwidth_unit: &'static str,
}

pub fn job_rank_of(report: &CollectivesReport, rank: strato_trace::RankId) -> i64 {
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
pub fn to_json(report: &CollectivesReport) -> JsonReport {
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
