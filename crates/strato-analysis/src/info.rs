//! `info`: what a trace holds — formats, time span, events by level and by source category,
//! processes and threads, devices and streams. Counts only; conserves events (the per-level
//! counts add up to the totals).

mod registration;

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use strato_trace::metadata::RecordedFile;
use strato_trace::{ImportNotes, Ns, SourceFormat, Trace, TrackKind};

pub use registration::{shared_rank_claims, Info, InfoReport};

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
    /// What the OS level (`strato record --os`) counted in this process's threads; absent
    /// without OS data for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub os: Option<ProcessOs>,
    /// Native CPU samples taken in this process (`strato record --sample`); absent without.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_samples: Option<u64>,
}

/// One process's OS-level counts, from its OS file's `strato.os` metadata.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ProcessOs {
    /// Context switches out of its threads, wakeups of them, and migrations between CPUs.
    pub switches: u64,
    pub wakeups: u64,
    pub migrations: u64,
    /// System calls its threads entered; how many of them were timed (their exit matched
    /// their entry), and the summed time of those (ns).
    pub syscalls: u64,
    pub syscalls_timed: u64,
    pub syscall_time_ns: u64,
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

/// What [`info`] counts of a trace's events (spans, instants, counter samples, flows), gathered
/// batch by batch: a streaming import hands each batch to [`EventCounts::add`] and drops it
/// (flows too, when the import only counts them: `strato_io::Projection::COUNTS`; the flows
/// left in the trace at the end go to [`EventCounts::add_flows`]), and [`info_with`] gives the
/// same summary as [`info`] of the whole trace.
#[derive(Debug, Clone, Default)]
pub struct EventCounts {
    time_span: Option<(Ns, Ns)>,
    spans: usize,
    instants: usize,
    counter_samples: usize,
    flows: usize,
    flows_complete: usize,
    by_level: BTreeMap<String, usize>,
    by_category: BTreeMap<String, usize>,
    spans_per_track: Vec<usize>,
}

impl EventCounts {
    /// Counts the events `trace` holds now (its strings and tracks are those of the whole
    /// trace so far).
    pub fn add(&mut self, trace: &Trace) {
        if let Some((lo, hi)) = trace.time_span() {
            self.time_span = Some(match self.time_span {
                None => (lo, hi),
                Some((a, b)) => (a.min(lo), b.max(hi)),
            });
        }
        self.spans += trace.spans.len();
        self.instants += trace.instants.len();
        self.counter_samples += trace.counters.len();
        self.add_flows(&trace.flows);
        if self.spans_per_track.len() < trace.tracks.len() {
            self.spans_per_track.resize(trace.tracks.len(), 0);
        }
        for span in &trace.spans {
            *self
                .by_level
                .entry(span.level.as_str().to_owned())
                .or_insert(0) += 1;
            *self
                .by_category
                .entry(trace.str(span.category).to_owned())
                .or_insert(0) += 1;
            self.spans_per_track[span.track.0 as usize] += 1;
        }
        for instant in &trace.instants {
            *self
                .by_category
                .entry(trace.str(instant.category).to_owned())
                .or_insert(0) += 1;
        }
    }
}

impl EventCounts {
    /// Adds the counts of another part of the same job: `other` counted the events of a trace
    /// whose tracks were appended after the first `track_base` tracks of the whole trace
    /// ([`Trace::append`] keeps their order), as a rank-by-rank import gathers its files.
    pub fn append(&mut self, other: EventCounts, track_base: usize) {
        if let Some((lo, hi)) = other.time_span {
            self.time_span = Some(match self.time_span {
                None => (lo, hi),
                Some((a, b)) => (a.min(lo), b.max(hi)),
            });
        }
        self.spans += other.spans;
        self.instants += other.instants;
        self.counter_samples += other.counter_samples;
        self.flows += other.flows;
        self.flows_complete += other.flows_complete;
        for (k, v) in other.by_level {
            *self.by_level.entry(k).or_insert(0) += v;
        }
        for (k, v) in other.by_category {
            *self.by_category.entry(k).or_insert(0) += v;
        }
        let needed = track_base + other.spans_per_track.len();
        if self.spans_per_track.len() < needed {
            self.spans_per_track.resize(needed, 0);
        }
        for (i, n) in other.spans_per_track.into_iter().enumerate() {
            self.spans_per_track[track_base + i] += n;
        }
    }

    /// Counts `flows` (all of them, and those with both ends).
    pub fn add_flows(&mut self, flows: &[strato_trace::Flow]) {
        self.flows += flows.len();
        self.flows_complete += flows
            .iter()
            .filter(|f| f.from.is_some() && f.to.is_some())
            .count();
    }
}

/// Summarises `trace`.
pub fn info(trace: &Trace) -> TraceInfo {
    let mut counts = EventCounts::default();
    counts.add(trace);
    info_with(trace, counts)
}

/// Summarises `trace` whose events were counted in `counts` (all of them: those `trace` still
/// holds are not counted again).
pub fn info_with(trace: &Trace, counts: EventCounts) -> TraceInfo {
    let (start, end) = counts
        .time_span
        .map_or((None, None), |(s, e)| (Some(s), Some(e)));
    let by_level = counts.by_level;
    let by_category = counts.by_category;
    let mut spans_per_track = counts.spans_per_track;
    spans_per_track.resize(trace.tracks.len().max(spans_per_track.len()), 0);
    let source_of = |rank: strato_trace::RankId| trace.ranks[rank.0 as usize].source.clone();
    // Each rank's metadata is parsed once, not once per process.
    let mut entries_of = recording_entries(trace);
    let mut processes: Vec<ProcessInfo> = trace
        .processes
        .iter()
        .map(|p| {
            let entries = entries_of.remove(&(p.rank.0, p.pid)).unwrap_or_default();
            ProcessInfo {
                source: source_of(p.rank),
                pid: p.pid,
                name: p.name.clone(),
                threads: 0,
                spans: 0,
                notes: entries.iter().filter_map(|e| e.note.clone()).collect(),
                os: process_os(&entries),
                cpu_samples: entries
                    .iter()
                    .filter_map(|e| e.metadata.samples()?.samples)
                    .reduce(|a, b| a + b),
            }
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
        spans: counts.spans,
        instants: counts.instants,
        counter_samples: counts.counter_samples,
        flows: counts.flows,
        flows_complete: counts.flows_complete,
        tracks: trace.tracks.len(),
        spans_by_level: by_level,
        events_by_category: by_category,
        processes,
        devices,
    }
}

/// The recorded files of every process of every `strato` rank, by (rank, pid): one per file
/// of the process (e.g. its OpenCL layer's and its OS file), each with its note and collector
/// figures.
fn recording_entries(trace: &Trace) -> HashMap<(u32, i64), Vec<&RecordedFile>> {
    let mut by_process: HashMap<(u32, i64), Vec<&RecordedFile>> = HashMap::new();
    for (rank, r) in trace.ranks.iter().enumerate() {
        let Some(meta) = r
            .metadata
            .recording()
            .filter(|_| r.format == SourceFormat::Strato)
        else {
            continue;
        };
        for e in &meta.processes {
            by_process.entry((rank as u32, e.pid)).or_default().push(e);
        }
    }
    by_process
}

/// The OS-level counts of a process's files (`strato.os` metadata); None when none has it.
fn process_os(entries: &[&RecordedFile]) -> Option<ProcessOs> {
    let mut found = None;
    for os in entries.iter().filter_map(|e| e.metadata.os()) {
        let total: &mut ProcessOs = found.get_or_insert_with(ProcessOs::default);
        total.switches += os.switches;
        total.wakeups += os.wakeups;
        total.migrations += os.migrations;
        for call in &os.syscalls {
            total.syscalls += call.count;
            // Recordings before `timed` existed counted only matched calls: all were timed.
            total.syscalls_timed += call.timed.unwrap_or(call.count);
            total.syscall_time_ns += call.time_ns;
        }
    }
    found
}
