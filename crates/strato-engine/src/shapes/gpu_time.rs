//! The JSON shape of `strato gpu-time --json` and of `Profile.gpu_time()` in Python (one
//! definition: both serialise it). Stable keys; times in microseconds.

use serde::Serialize;
use strato_analysis::device_time::gpu_time::{DeviceExposure, GpuTimeReport, Window};

/// The JSON shape of `strato gpu-time --json` (stable keys; times in microseconds).
#[derive(Debug, Serialize)]
pub struct GpuTimeJson {
    pub window: Window,
    pub ranks: Vec<RankJson>,
}

#[derive(Debug, Serialize)]
pub struct RankJson {
    pub rank: i64,
    pub source: String,
    pub device_events: usize,
    pub idle_pct: f64,
    pub compute_pct: f64,
    pub non_compute_pct: f64,
    pub kernel_time_us: f64,
    pub idle_us: f64,
    pub compute_us: f64,
    pub non_compute_us: f64,
    pub comm_comp_overlap_pct: Option<f64>,
    pub window_start_ns: Option<i64>,
    pub window_end_ns: Option<i64>,
    pub streams: Vec<StreamJson>,
    /// Exposed communication per device that ran work (whole window only: absent with
    /// `--window hta`, whose output stays HTA's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exposure: Option<Vec<DeviceExposure>>,
    pub note: Option<String>,
    /// Events that looked like device work under a category no level rule names, per category.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub unclassified_device_like_events: std::collections::BTreeMap<String, u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct StreamJson {
    pub device: i64,
    pub stream: i64,
    pub events: usize,
    pub host_wait_us: f64,
    pub kernel_wait_us: f64,
    pub other_us: f64,
    /// Events that started before earlier events on the stream had ended.
    pub overlapping_events: usize,
}

fn us(ns: i64) -> f64 {
    ns as f64 / 1000.0
}

/// Converts the report to its JSON shape.
pub fn gpu_time_json(report: &GpuTimeReport) -> GpuTimeJson {
    GpuTimeJson {
        window: report.window,
        ranks: report
            .ranks
            .iter()
            .map(|r| RankJson {
                rank: r.rank,
                source: r.source.clone(),
                device_events: r.device_events,
                idle_pct: r.idle_pct,
                compute_pct: r.compute_pct,
                non_compute_pct: r.non_compute_pct,
                kernel_time_us: us(r.kernel_time_ns),
                idle_us: us(r.idle_ns),
                compute_us: us(r.compute_ns),
                non_compute_us: us(r.non_compute_ns),
                comm_comp_overlap_pct: r.comm_comp_overlap_pct,
                window_start_ns: r.window_start_ns,
                window_end_ns: r.window_end_ns,
                streams: r
                    .streams
                    .iter()
                    .map(|s| StreamJson {
                        device: s.device,
                        stream: s.stream,
                        events: s.events,
                        host_wait_us: us(s.host_wait_ns),
                        kernel_wait_us: us(s.kernel_wait_ns),
                        other_us: us(s.other_ns),
                        overlapping_events: s.overlapping_events,
                    })
                    .collect(),
                exposure: r.exposure.clone(),
                note: r.note.clone(),
                unclassified_device_like_events: r.unclassified_device_like_events.clone(),
                warning: r.unclassified_warning(),
            })
            .collect(),
    }
}
