//! The JSON shapes that `strato gpu-time`, `strato collectives` and `strato critical-path`
//! build in the CLI (`strato-cli`'s `render::present::gpu_time_json`, `commands::collectives::
//! to_json`, `commands::critical_path::report_json`), rebuilt field for field from the same
//! analysis reports, so the tables' columns and units are the commands'. (The other commands
//! print their report's own serde shape, used as is.) python/tests/test_analysis_api.py
//! compares each table with the command's JSON: a field changed on one side fails there.

use strato_analysis::collectives::{CollectiveInstance, CollectivesReport};
use strato_analysis::critical_path::CriticalPathReport;
use strato_analysis::gpu_time::GpuTimeReport;
use strato_trace::{Level, RankId};

use crate::rows::Ordered;

fn o<T: serde::Serialize>(value: T) -> Ordered {
    Ordered::of(&value)
}

fn object(fields: Vec<(&str, Ordered)>) -> Ordered {
    Ordered::Object(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

fn us(ns: i64) -> f64 {
    ns as f64 / 1000.0
}

/// `strato gpu-time --json`.
pub fn gpu_time(report: &GpuTimeReport) -> Ordered {
    let ranks = report
        .ranks
        .iter()
        .map(|r| {
            let mut fields = vec![
                ("rank", o(r.rank)),
                ("source", o(&r.source)),
                ("device_events", o(r.device_events)),
                ("idle_pct", o(r.idle_pct)),
                ("compute_pct", o(r.compute_pct)),
                ("non_compute_pct", o(r.non_compute_pct)),
                ("kernel_time_us", o(us(r.kernel_time_ns))),
                ("idle_us", o(us(r.idle_ns))),
                ("compute_us", o(us(r.compute_ns))),
                ("non_compute_us", o(us(r.non_compute_ns))),
                ("comm_comp_overlap_pct", o(r.comm_comp_overlap_pct)),
                ("window_start_ns", o(r.window_start_ns)),
                ("window_end_ns", o(r.window_end_ns)),
                (
                    "streams",
                    Ordered::List(
                        r.streams
                            .iter()
                            .map(|s| {
                                object(vec![
                                    ("device", o(s.device)),
                                    ("stream", o(s.stream)),
                                    ("events", o(s.events)),
                                    ("host_wait_us", o(us(s.host_wait_ns))),
                                    ("kernel_wait_us", o(us(s.kernel_wait_ns))),
                                    ("other_us", o(us(s.other_ns))),
                                    ("overlapping_events", o(s.overlapping_events)),
                                ])
                            })
                            .collect(),
                    ),
                ),
            ];
            if let Some(exposure) = &r.exposure {
                fields.push(("exposure", o(exposure)));
            }
            fields.push(("note", o(&r.note)));
            object(fields)
        })
        .collect();
    object(vec![
        ("window", o(report.window)),
        ("ranks", Ordered::List(ranks)),
    ])
}

fn job_rank_of(report: &CollectivesReport, rank: RankId) -> i64 {
    report
        .ranks
        .iter()
        .find(|r| r.rank == rank)
        .map_or(rank.0 as i64, |r| r.job_rank)
}

fn collective(report: &CollectivesReport, i: &CollectiveInstance) -> Ordered {
    let members = i
        .members
        .iter()
        .map(|m| {
            object(vec![
                ("rank", o(m.job_rank)),
                ("start_ns", o(m.start)),
                ("end_ns", o(m.end)),
                ("wait_ns", o(m.wait_ns)),
                ("device", o(m.device)),
                ("kernel_span", o(m.kernel.0)),
            ])
        })
        .collect();
    let mut fields = vec![
        ("kind", o(i.kind.as_str())),
        ("group", o(&i.group)),
        ("seq", o(i.seq)),
        ("bytes", o(i.bytes)),
    ];
    // Only when the members disagree, as the CLI writes it.
    if let Some((low, high)) = i.bytes_disagree {
        fields.push(("bytes_disagree", o([low, high])));
    }
    fields.extend([
        ("complete", o(i.complete)),
        ("ranks", Ordered::List(members)),
        ("last_rank", o(i.last_rank.map(|r| job_rank_of(report, r)))),
        ("transfer_ns", o(i.transfer_ns)),
        ("algbw_gbps", o(i.algbw_gbps)),
        ("busbw_gbps", o(i.busbw_gbps)),
        ("cpu_kind", o(i.cpu_kind.map(|k| k.as_str()))),
        ("cpu_name", o(&i.cpu_name)),
        ("group_size", o(i.group_size)),
        ("matched_by", o(i.matched_by.as_str())),
        ("ordinal", o(i.ordinal)),
    ]);
    object(fields)
}

/// `strato collectives --json`.
pub fn collectives(report: &CollectivesReport) -> Ordered {
    let ranks = report
        .ranks
        .iter()
        .map(|r| {
            object(vec![
                ("rank", o(r.job_rank)),
                ("collectives", o(r.collectives)),
                ("last_arrivals", o(r.last_arrivals)),
                ("wait_ns", o(r.wait_ns)),
                ("imposed_wait_ns", o(r.imposed_wait_ns)),
                ("complete", o(r.complete)),
                ("transfer_part_ns", o(r.transfer_part_ns)),
                ("kernel_ns", o(r.kernel_ns)),
                ("clock_shift_ns", o(r.shift_ns)),
            ])
        })
        .collect();
    let c = &report.clock;
    let clock = object(vec![
        ("aligned", o(c.aligned)),
        ("max_error_ns", o(c.max_error_ns)),
        (
            "reference_rank",
            o(c.reference.map(|r| job_rank_of(report, r))),
        ),
        ("note", o(&c.note)),
        (
            "ranks",
            Ordered::List(
                c.ranks
                    .iter()
                    .map(|r| {
                        object(vec![
                            ("rank", o(job_rank_of(report, r.rank))),
                            ("offset_ns", o(r.offset_ns)),
                            ("error_ns", o(r.error_ns)),
                            ("samples", o(r.samples)),
                            ("outliers", o(r.outliers)),
                            ("shifted", o(r.shifted)),
                        ])
                    })
                    .collect(),
            ),
        ),
    ]);
    let stragglers = report
        .stragglers
        .iter()
        .map(|s| {
            let cause = &s.cause;
            object(vec![
                ("collective", o(s.instance)),
                ("rank", o(s.job_rank)),
                ("imposed_wait_ns", o(s.imposed_wait_ns)),
                ("lateness_ns", o(s.lateness_ns)),
                (
                    "cause",
                    object(vec![
                        ("verdict", o(cause.verdict.as_str())),
                        (
                            "window_ns",
                            o((cause.window_end - cause.window_start).max(0)),
                        ),
                        ("launch_delay_ns", o(cause.launch_delay_ns)),
                        ("cpu_op", o(&cause.cpu_op)),
                        ("cpu_stratum", o(cause.cpu_level.map(Level::as_str))),
                        ("cpu_op_ns", o(cause.cpu_op_ns)),
                        ("cpu_context", o(&cause.cpu_context)),
                        ("device_busy_ns", o(cause.device_busy_ns)),
                        ("device_op", o(&cause.device_op)),
                        ("device_op_ns", o(cause.device_op_ns)),
                    ]),
                ),
            ])
        })
        .collect();
    let by_size = report
        .by_size
        .iter()
        .map(|g| {
            object(vec![
                ("kind", o(g.kind.as_str())),
                ("bucket_bytes", o(g.bucket_bytes)),
                ("count", o(g.count)),
                ("complete", o(g.complete)),
                ("bytes_total", o(g.bytes_total)),
                ("transfer_ns_total", o(g.transfer_ns_total)),
                ("busbw_gbps_median", o(g.busbw_gbps_median)),
                ("link_gbps", o(g.link_gbps)),
            ])
        })
        .collect();
    object(vec![
        (
            "collectives",
            Ordered::List(
                report
                    .instances
                    .iter()
                    .map(|i| collective(report, i))
                    .collect(),
            ),
        ),
        ("ranks", Ordered::List(ranks)),
        ("clock", clock),
        ("window_ns", o(report.window)),
        ("stragglers", Ordered::List(stragglers)),
        ("by_size", Ordered::List(by_size)),
        (
            "worst_rank",
            o(report.worst_rank.map(|i| report.ranks[i].job_rank)),
        ),
    ])
}

/// `strato critical-path --json` (its `ranks`; the matching method is the CLI's text).
pub fn critical_path(report: &CriticalPathReport) -> Ordered {
    let ranks = report
        .ranks
        .iter()
        .map(|r| {
            let by_kind = r
                .by_kind
                .iter()
                .map(|(k, v)| (k.as_str().to_owned(), o(*v)))
                .collect();
            let events = r
                .events
                .iter()
                .map(|e| {
                    object(vec![
                        ("name", o(&e.name)),
                        ("start_ns", o(e.start_ns)),
                        ("end_ns", o(e.end_ns)),
                        ("kind", o(e.kind.as_str())),
                        ("rank", o(e.rank)),
                    ])
                })
                .collect();
            object(vec![
                ("rank", o(r.rank)),
                ("source", o(&r.source)),
                ("length_ns", o(r.length_ns)),
                ("start_ns", o(r.start_ns)),
                ("end_ns", o(r.end_ns)),
                ("work_ns", o(r.work_ns)),
                ("by_kind", Ordered::Object(by_kind)),
                ("events", Ordered::List(events)),
                ("backward_edges", o(r.backward_edges)),
                ("note", o(&r.note)),
            ])
        })
        .collect();
    object(vec![
        ("window", o("whole trace")),
        ("ranks", Ordered::List(ranks)),
        ("graph", o(report.graph)),
    ])
}
