//! `info`: what a trace holds — formats, time span, events by level and by source category,
//! processes and threads, devices and streams. Counts only; conserves events (the per-level
//! counts add up to the totals).

use std::collections::BTreeMap;

use serde::Serialize;
use strato_trace::{ImportNotes, Ns, SourceFormat, Trace, TrackKind};

/// One rank's source.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SourceInfo {
    pub source: String,
    /// The source format's name ([`SourceFormat::as_str`]).
    pub format: String,
    pub rank: Option<i64>,
    pub world_size: Option<i64>,
    pub host: Option<String>,
    /// What the importer dropped, clamped, guessed or lost for this source.
    pub import_notes: ImportNotes,
    /// The notes that pass the warning rule ([`ImportNotes::warnings`]).
    pub warnings: Vec<String>,
}

/// A device and its queues.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceInfo {
    pub source: String,
    pub index: i64,
    pub name: Option<String>,
    pub streams: Vec<i64>,
    pub device_ops: usize,
}

/// A process and its threads.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessInfo {
    pub source: String,
    pub pid: i64,
    pub name: Option<String>,
    pub threads: usize,
    pub spans: usize,
    /// What the importer noted about this process's recording (e.g. it ended without
    /// flushing: events after its last record may be missing).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// Everything `strato info` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceInfo {
    pub sources: Vec<SourceInfo>,
    pub start_ns: Option<Ns>,
    pub end_ns: Option<Ns>,
    pub duration_ns: Ns,
    pub spans: usize,
    pub instants: usize,
    pub counter_samples: usize,
    pub flows: usize,
    pub flows_complete: usize,
    pub tracks: usize,
    pub spans_by_level: BTreeMap<String, usize>,
    pub events_by_category: BTreeMap<String, usize>,
    pub processes: Vec<ProcessInfo>,
    pub devices: Vec<DeviceInfo>,
}

/// Summarises `trace`.
pub fn info(trace: &Trace) -> TraceInfo {
    let (start, end) = trace
        .time_span()
        .map_or((None, None), |(s, e)| (Some(s), Some(e)));
    let mut by_level = BTreeMap::new();
    let mut by_category = BTreeMap::new();
    let mut spans_per_track = vec![0usize; trace.tracks.len()];
    for span in &trace.spans {
        *by_level.entry(span.level.as_str().to_owned()).or_insert(0) += 1;
        *by_category
            .entry(trace.str(span.category).to_owned())
            .or_insert(0) += 1;
        spans_per_track[span.track.0 as usize] += 1;
    }
    for instant in &trace.instants {
        *by_category
            .entry(trace.str(instant.category).to_owned())
            .or_insert(0) += 1;
    }
    let source_of = |rank: strato_trace::RankId| trace.ranks[rank.0 as usize].source.clone();
    let mut processes: Vec<ProcessInfo> = trace
        .processes
        .iter()
        .map(|p| ProcessInfo {
            source: source_of(p.rank),
            pid: p.pid,
            name: p.name.clone(),
            threads: 0,
            spans: 0,
            notes: recording_notes(trace, p.rank, p.pid),
        })
        .collect();
    let mut devices: Vec<DeviceInfo> = trace
        .devices
        .iter()
        .map(|d| DeviceInfo {
            source: d.rank.map(source_of).unwrap_or_default(),
            index: d.index,
            name: d.name.clone(),
            streams: Vec::new(),
            device_ops: 0,
        })
        .collect();
    for (i, track) in trace.tracks.iter().enumerate() {
        let source = source_of(track.rank);
        match track.kind {
            TrackKind::Thread { pid, .. } => {
                if let Some(p) = processes
                    .iter_mut()
                    .find(|p| p.pid == pid && p.source == source)
                {
                    p.threads += 1;
                    p.spans += spans_per_track[i];
                }
            }
            TrackKind::DeviceQueue { device, queue } => {
                if let Some(d) = devices
                    .iter_mut()
                    .find(|d| d.index == device && d.source == source)
                {
                    d.streams.push(queue);
                    d.device_ops += spans_per_track[i];
                }
            }
            _ => {}
        }
    }
    for d in &mut devices {
        d.streams.sort_unstable();
    }
    TraceInfo {
        sources: trace
            .ranks
            .iter()
            .map(|r| SourceInfo {
                source: r.source.clone(),
                format: r.format.as_str().to_owned(),
                rank: r.rank,
                world_size: r.world_size,
                host: r.host.clone(),
                import_notes: r.notes.clone(),
                warnings: r.notes.warnings(),
            })
            .collect(),
        start_ns: start,
        end_ns: end,
        // Both ends are in the valid time range, so this cannot overflow (saturates anyway).
        duration_ns: end.unwrap_or(0).saturating_sub(start.unwrap_or(0)),
        spans: trace.spans.len(),
        instants: trace.instants.len(),
        counter_samples: trace.counters.len(),
        flows: trace.flows.len(),
        flows_complete: trace
            .flows
            .iter()
            .filter(|f| f.from.is_some() && f.to.is_some())
            .count(),
        tracks: trace.tracks.len(),
        spans_by_level: by_level,
        events_by_category: by_category,
        processes,
        devices,
    }
}

/// Notes the `strato` importer left on process `pid` of `rank` (its rank metadata's
/// `processes[].note`; one per file of the process, e.g. its OpenCL layer's).
fn recording_notes(trace: &Trace, rank: strato_trace::RankId, pid: i64) -> Vec<String> {
    let Some(meta) = trace.ranks[rank.0 as usize]
        .metadata_json
        .as_deref()
        .filter(|_| trace.ranks[rank.0 as usize].format == SourceFormat::Strato)
        .and_then(|m| serde_json::from_str::<serde_json::Value>(m).ok())
    else {
        return Vec::new();
    };
    meta["processes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["pid"].as_i64() == Some(pid))
        .filter_map(|p| p["note"].as_str().map(str::to_owned))
        .collect()
}
