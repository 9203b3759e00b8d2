//! Importer for stratoscope's own recordings (`*.strato`, format name `strato`; see
//! `docs/recording-format.md`). The bytes are decoded by `strato_record::decode`; this module
//! turns decoded files into a [`Trace`]: a profile directory of `*.strato` files from one run is
//! one rank with one process per pid; a single file is a rank of its own.
//!
//! Mapping: BEGIN/END pairs and SPANs become spans (level from the `strato` level rules for
//! their category, else the recorded level); spans left open by a killed process are closed at
//! the file's last timestamp with `{"truncated":true}`; UNTRACED records become a cumulative
//! counter `untraced_hook_calls/<tid>` per thread; correlation ids (per file) are made unique per
//! rank (`file index << 40 | id`) and a CPU span and the device span sharing one are linked by a
//! flow. `calibration.json` and `run.json` beside the files, and the recorder's own process
//! records (with each process's `strato.cpu` times), go into the rank's typed metadata (`strato_trace::metadata::RecordingMetadata`)
//! (`{"format":"strato","processes":[...],"calibration":{...},"run":{...}}`), which the
//! overhead correction reads. A process whose file has no STOP record gets a `note` there
//! ("process N ended without flushing; events after T may be missing"), which `info` shows.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use strato_trace::metadata::{
    CollectorMetadata, JsonObject, ProcessCpu, RecordedFile, RecordingMetadata, SourceMetadata,
};
use strato_trace::OptionalId;

use serde_json::Value;
use strato_record::{Event, Recording, TrackDef};
use strato_trace::{
    ClockDomain, ClockSource, Device, Flow, FlowEnd, Instant, Level, Process, Rank, RankId,
    SourceFormat, Span, SpanId, Trace, TrackIndexHandle, TrackKind,
};

use crate::{Error, ErrorKind, ImportOptions, Result};

/// True when `path` is a file that starts with the recording magic.
pub fn is_recording_file(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 8];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok()
        && strato_record::is_recording_bytes(&head)
}

/// The `*.strato` files of a directory, sorted by name.
pub fn recording_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "strato"))
        .collect();
    files.sort();
    files
}

/// True when `dir` holds recordings.
pub fn is_recording_dir(dir: &Path) -> bool {
    dir.is_dir() && !recording_files(dir).is_empty()
}

/// Metadata keys a collector writes once per recorded process, with that process's own figures
/// (and the tree-wide ones repeated): each file's values stay with its entry in the rank
/// metadata's `processes[]` (`metadata`), and the rank-level `metadata` holds the root
/// process's ([`root_process_metadata`]).
const PER_PROCESS_METADATA_KEYS: [&str; 2] = [
    strato_record::os::OS_METADATA_KEY,
    strato_record::sample::SAMPLE_METADATA_KEY,
];

/// Puts in `user_meta` (the rank-level `metadata`) each per-process collector key's value of
/// the tree's root: the earliest-started process whose parent was not recorded (the first
/// process with the key when none is such).
fn root_process_metadata(
    processes_meta: &[RecordedFile],
    user_meta: &mut serde_json::Map<String, Value>,
) {
    let pids: Vec<i64> = processes_meta.iter().map(|p| p.pid).collect();
    for key in PER_PROCESS_METADATA_KEYS {
        let with_key = || {
            processes_meta
                .iter()
                .filter(|p| p.metadata.0.get(key).is_some_and(|v| !v.is_null()))
        };
        let root = with_key()
            .filter(|p| !pids.contains(&p.ppid))
            .min_by_key(|p| p.start_ns)
            .or_else(|| with_key().next());
        if let Some(value) = root.and_then(|p| p.metadata.0.get(key)) {
            user_meta.insert(key.to_owned(), value.clone());
        }
    }
}

/// Imports one `*.strato` file as a rank.
pub fn import_file(path: &Path, options: &ImportOptions) -> Result<Trace> {
    import(path, &[path.to_path_buf()], options)
}

/// What the launcher's collectors (`strato record --os`, `--sample`) say they missed, as import
/// notes of the rank: records the kernel dropped (ring buffer full) and the intervals it
/// throttled an event (`throttled_all_processes`: count, summed time, first and last instant,
/// CLOCK_MONOTONIC), counted (`os_lost_records`, `os_throttled`, `samples_lost`,
/// `samples_throttled`) and noted with the interval relative to `origin` (the recording's
/// first START). The figures are the collector's, over the whole tree, so each is read once.
fn collector_notes(
    user_meta: &serde_json::Map<String, Value>,
    origin: i64,
    notes: &mut strato_trace::ImportNotes,
) {
    for (key, what, lost_key, prefix, missing) in [
        (
            strato_record::os::OS_METADATA_KEY,
            "OS level",
            "lost_records_all_processes",
            "os",
            "system calls and thread states there are missing",
        ),
        (
            strato_record::sample::SAMPLE_METADATA_KEY,
            "CPU sampling",
            "lost_all_processes",
            "samples",
            "no samples were taken there",
        ),
    ] {
        let Some(m) = user_meta.get(key) else {
            continue;
        };
        let lost = m[lost_key].as_u64().unwrap_or(0);
        if lost > 0 {
            let name = if prefix == "os" {
                "os_lost_records"
            } else {
                "samples_lost"
            };
            notes.count(name, lost);
            notes.note(format!(
                "{what}: the kernel dropped {lost} records (ring buffers full): some events are missing"
            ));
        }
        let t = &m["throttled_all_processes"];
        let count = t["count"].as_u64().unwrap_or(0);
        if count > 0 {
            notes.count(&format!("{prefix}_throttled"), count);
            let at = |k: &str| {
                t[k].as_i64().map_or("?".to_owned(), |v| {
                    format!("{:.3} s", (v - origin) as f64 / 1e9)
                })
            };
            notes.note(format!(
                "{what}: the kernel throttled its events {count} times, {:.3} ms in all, between {} and {} of the recording (more than kernel.perf_event_max_sample_rate a second): {missing}",
                t["ns"].as_i64().unwrap_or(0) as f64 / 1e6,
                at("from_ns"),
                at("to_ns")
            ));
        }
    }
}

/// Imports a profile directory of `*.strato` files as one rank.
pub fn import_dir(dir: &Path, options: &ImportOptions) -> Result<Trace> {
    let files = recording_files(dir);
    if files.is_empty() {
        return Err(Error::new(
            dir,
            ErrorKind::NotATrace("directory holds no *.strato recordings".into()),
        ));
    }
    import(dir, &files, options)
}

struct Open {
    start: i64,
    level: u8,
    category: u32,
    name: u32,
    correlation: Option<u64>,
    args: Option<String>,
}

fn import(source: &Path, files: &[PathBuf], options: &ImportOptions) -> Result<Trace> {
    let mut trace = Trace::default();
    let rank = trace.add_rank(Rank {
        rank: None,
        world_size: None,
        source: source.display().to_string(),
        format: SourceFormat::Strato,
        host: None,
        metadata: SourceMetadata::None,
        notes: Default::default(),
    });
    let mut index = TrackIndexHandle::default();
    let mut processes_meta = Vec::new();
    let mut user_meta = serde_json::Map::new();
    let mut host = None;
    let mut names: HashMap<i64, String> = HashMap::new();
    let mut pids = Vec::new();
    for (file_index, path) in files.iter().enumerate() {
        let bytes = std::fs::read(path).map_err(|e| Error::new(path, e))?;
        if bytes.is_empty() {
            continue; // created by a process killed before its first chunk
        }
        let rec = strato_record::decode(&bytes)
            .map_err(|e| Error::new(path, ErrorKind::Invalid(e.to_string())))?;
        let Some(process) = rec.process.clone() else {
            continue;
        };
        host.get_or_insert_with(|| process.host.clone());
        if !pids.contains(&process.pid) {
            pids.push(process.pid);
        }
        if let Some(n) = rec.process_name {
            names.insert(process.pid, rec.str(n).to_owned());
        } else if process.component.is_empty() {
            names
                .entry(process.pid)
                .or_insert_with(|| default_name(&process.argv_json));
        }
        let mut cpu = None;
        let mut collector_wait_ns = 0;
        // The collectors' per-process figures (each process's OS and samples files have their
        // own), kept with the file's process entry.
        let mut file_meta = std::collections::BTreeMap::new();
        for (k, v) in &rec.metadata {
            let value = serde_json::from_str::<Value>(v).unwrap_or(Value::String(v.clone()));
            let key = rec.str(*k);
            if key == strato_record::CPU_METADATA_KEY {
                cpu = serde_json::from_value::<ProcessCpu>(value).ok(); // per process, below
            } else if PER_PROCESS_METADATA_KEYS.contains(&key) {
                if key == strato_record::os::OS_METADATA_KEY {
                    collector_wait_ns = value["runnable_behind_collector_ns"].as_i64().unwrap_or(0);
                }
                file_meta.insert(key.to_owned(), value);
            } else {
                user_meta.insert(key.to_owned(), value);
            }
        }
        let summary = add_file(
            &mut trace,
            &mut index,
            rank,
            &rec,
            process.pid,
            (file_index as u64) << 40,
            options,
        );
        let (start, level) = rec
            .events
            .iter()
            .find_map(|e| match e {
                Event::Start { ts, level } => Some((*ts, *level)),
                _ => None,
            })
            .unwrap_or((process.mono_ns, 4));
        let stop = rec.events.iter().rev().find_map(|e| match e {
            Event::Stop { ts } => Some(*ts),
            _ => None,
        });
        // A file without its STOP record was not closed by the recorder: the process ended
        // in a way nothing could catch (SIGKILL, a crash) or before its recorder stopped, so
        // events after its last flushed record may be missing.
        let note = stop.is_none().then(|| {
            let component = if process.component.is_empty() {
                String::new()
            } else {
                format!(" ({})", process.component)
            };
            format!(
                "process {}{component} ended without flushing; events after {:.3} s (its last record, CLOCK_MONOTONIC {} ns) may be missing",
                process.pid,
                (summary.last_ts.max(start) - start) as f64 / 1e9,
                summary.last_ts
            )
        });
        if let Some(note) = &note {
            // Also an import note of the rank: every command warns about it on stderr.
            trace.ranks[rank.0 as usize].notes.note(note.clone());
        }
        // The OS level's preemption of this process (`strato info` shows it per process; not
        // a warning: nothing is missing).
        let wait_note = (collector_wait_ns > 0).then(|| {
            format!(
                "its threads were runnable {:.1} ms while strato's collectors held their CPU (the OS level's own cost; a calibrated profile has it removed)",
                collector_wait_ns as f64 / 1e6
            )
        });
        let note = match (note, wait_note) {
            (Some(a), Some(b)) => Some(format!("{a}; {b}")),
            (a, b) => a.or(b),
        };
        processes_meta.push(RecordedFile {
            note,
            file: path.file_name().map(|n| n.to_string_lossy().into_owned()),
            pid: process.pid,
            ppid: process.ppid,
            component: process.component.clone(),
            argv: serde_json::from_str(&process.argv_json).ok(),
            level,
            start_ns: start,
            stop_ns: stop,
            last_ns: summary.last_ts,
            wall_minus_mono_ns: process.wall_ns - process.mono_ns,
            chunks: rec.chunks as u64,
            torn_bytes: rec.torn_bytes as u64,
            truncated_spans: summary.truncated as u64,
            cpu,
            metadata: CollectorMetadata(file_meta),
        });
        trace.clock.sources.push(ClockSource {
            name: format!("strato:{}", path.display()),
            domain: ClockDomain::Monotonic,
            offset_ns: 0,
            drift_ppb: 0.0,
            anchor_ns: 0,
            error_ns: Some(0),
            method: "identity".into(),
        });
        for c in &rec.clocks {
            trace.clock.sources.push(ClockSource {
                name: rec.str(c.name).to_owned(),
                domain: match rec.str(c.domain) {
                    "realtime" => ClockDomain::Realtime,
                    "monotonic" => ClockDomain::Monotonic,
                    "monotonic_raw" => ClockDomain::MonotonicRaw,
                    other => ClockDomain::Device(other.to_owned()),
                },
                offset_ns: c.offset_ns,
                drift_ppb: c.drift_ppb,
                anchor_ns: c.anchor_ns,
                error_ns: c.error_ns,
                method: rec.str(c.method).to_owned(),
            });
        }
        for d in &rec.devices {
            let props = Some(d.props_json.trim()).filter(|t| !t.is_empty());
            let extra = props.map_or(Ok(JsonObject::default()), JsonObject::parse);
            let extra = extra.unwrap_or_else(|e| {
                trace.ranks[rank.0 as usize].notes.note(format!(
                    "{}: the properties of device {} are not a JSON object ({e}); not kept",
                    path.display(),
                    d.index
                ));
                JsonObject::default()
            });
            trace.devices.push(Device {
                rank: Some(rank),
                index: d.index,
                name: Some(rec.str(d.name).to_owned()).filter(|n| !n.is_empty()),
                extra,
                ..Device::default()
            });
        }
    }
    trace.clock.reference = ClockDomain::Monotonic;
    for pid in pids {
        trace.processes.push(Process {
            rank,
            pid,
            name: names.remove(&pid),
            labels: None,
        });
    }
    let origin = processes_meta.iter().map(|p| p.start_ns).min().unwrap_or(0);
    root_process_metadata(&processes_meta, &mut user_meta);
    collector_notes(&user_meta, origin, &mut trace.ranks[rank.0 as usize].notes);
    let mut meta = RecordingMetadata {
        format: SourceFormat::Strato.as_str().to_owned(),
        processes: processes_meta,
        metadata: CollectorMetadata(user_meta.into_iter().collect()),
        ..RecordingMetadata::default()
    };
    if source.is_dir() {
        for (slot, file) in [
            (&mut meta.calibration, "calibration.json"),
            (&mut meta.run, "run.json"),
        ] {
            if let Ok(text) = std::fs::read_to_string(source.join(file)) {
                let value: Value = serde_json::from_str(&text).map_err(|e| {
                    Error::new(
                        source.join(file),
                        ErrorKind::Json {
                            offset: 0,
                            message: e.to_string(),
                        },
                    )
                })?;
                *slot = Some(value);
            }
        }
    }
    trace.ranks[rank.0 as usize].host = host.filter(|h| !h.is_empty());
    trace.ranks[rank.0 as usize].metadata = SourceMetadata::Recording(Box::new(meta));
    // Times outside the valid range (a corrupt or hostile file) are refused here, naming the
    // event, before any analysis subtracts them.
    trace
        .validate()
        .map_err(|e| Error::new(source, ErrorKind::Invalid(e.to_string())))?;
    Ok(trace)
}

fn default_name(argv_json: &str) -> String {
    let argv: Vec<String> = serde_json::from_str(argv_json).unwrap_or_default();
    argv.iter()
        .find(|a| a.ends_with(".py"))
        .or_else(|| argv.first())
        .map(|a| {
            Path::new(a)
                .file_name()
                .map_or(a.clone(), |n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "python".into())
}

struct FileSummary {
    last_ts: i64,
    truncated: usize,
}

fn add_file(
    trace: &mut Trace,
    index: &mut TrackIndexHandle,
    rank: RankId,
    rec: &Recording,
    pid: i64,
    corr_base: u64,
    options: &ImportOptions,
) -> FileSummary {
    // Strings of this file -> trace ids.
    let strings: Vec<_> = rec.strings.iter().map(|s| trace.intern(s)).collect();
    let sid = |id: u32| strings.get(id as usize).copied().unwrap_or_default();
    // Level of each (category, recorded level).
    let mut level_cache: HashMap<(u32, u8), Level> = HashMap::new();
    let mut level_of = |category: u32, code: u8| {
        *level_cache.entry((category, code)).or_insert_with(|| {
            options
                .level_map
                .level(SourceFormat::Strato.as_str(), rec.str(category))
                .or_else(|| Level::from_code(code))
                .unwrap_or(Level::Other)
        })
    };
    // Tracks.
    let mut tracks = Vec::with_capacity(rec.tracks.len());
    let mut untraced_tracks = HashMap::new();
    let mut is_device = Vec::with_capacity(rec.tracks.len());
    for def in &rec.tracks {
        let (kind, name) = match def {
            Some(TrackDef::Thread { tid, name }) => {
                (Some(TrackKind::Thread { pid, tid: *tid }), *name)
            }
            Some(TrackDef::Queue {
                device,
                queue,
                name,
            }) => (
                Some(TrackKind::DeviceQueue {
                    device: *device,
                    queue: *queue,
                }),
                *name,
            ),
            Some(TrackDef::Counter { name, unit, device }) => (
                Some(TrackKind::Counter {
                    pid: (*device < 0).then_some(pid),
                    device: (*device >= 0).then_some(*device),
                    name: rec.str(*name).to_owned(),
                    unit: rec.str(*unit).to_owned(),
                }),
                0,
            ),
            None => (None, 0),
        };
        is_device.push(matches!(kind, Some(TrackKind::DeviceQueue { .. })));
        let id = kind.map(|k| {
            let id = trace.track_for(index, rank, k);
            if name != 0 {
                trace.tracks[id.0 as usize].name = Some(rec.str(name).to_owned());
            }
            id
        });
        tracks.push(id);
    }
    let track = |t: u32| tracks.get(t as usize).copied().flatten();
    let mut last_ts = i64::MIN;
    let mut open: HashMap<u32, Vec<Open>> = HashMap::new();
    let mut untraced_total: HashMap<u32, u64> = HashMap::new();
    // correlation -> (cpu span, device span)
    let mut correlated: HashMap<u64, (Option<SpanId>, Option<SpanId>)> = HashMap::new();
    let mut push_span = |trace: &mut Trace,
                         t: u32,
                         start: i64,
                         end: i64,
                         level: Level,
                         category: u32,
                         name: u32,
                         correlation: Option<u64>,
                         args: Option<&str>| {
        let Some(tid) = track(t) else { return };
        let args = if options.keep_args {
            args.map(|a| trace.add_args(a))
        } else {
            None
        };
        let correlation = correlation.map(|c| corr_base | c);
        let notes = &mut trace.ranks[rank.0 as usize].notes;
        notes.events_read += 1;
        if end < start {
            notes.count("clamped_negative_durations", 1);
        }
        trace.spans.push(Span {
            track: tid,
            start,
            end: end.max(start),
            name: sid(name),
            category: sid(category),
            level,
            correlation: correlation.into(),
            external_id: OptionalId::NONE,
            args,
        });
        if let Some(c) = correlation {
            let id = SpanId((trace.spans.len() - 1) as u32);
            let entry = correlated.entry(c).or_default();
            if is_device.get(t as usize).copied().unwrap_or(false) {
                entry.1.get_or_insert(id);
            } else {
                entry.0.get_or_insert(id);
            }
        }
    };
    for ev in &rec.events {
        match ev {
            Event::Begin {
                track: t,
                ts,
                level,
                category,
                name,
                correlation,
                args,
            } => {
                last_ts = last_ts.max(*ts);
                open.entry(*t).or_default().push(Open {
                    start: *ts,
                    level: *level,
                    category: *category,
                    name: *name,
                    correlation: *correlation,
                    args: args.clone(),
                });
            }
            Event::End { track: t, ts } => {
                last_ts = last_ts.max(*ts);
                if let Some(o) = open.get_mut(t).and_then(|stack| stack.pop()) {
                    let level = level_of(o.category, o.level);
                    push_span(
                        trace,
                        *t,
                        o.start,
                        *ts,
                        level,
                        o.category,
                        o.name,
                        o.correlation,
                        o.args.as_deref(),
                    );
                }
            }
            Event::Span {
                track: t,
                start,
                end,
                level,
                category,
                name,
                correlation,
                args,
            } => {
                last_ts = last_ts.max(*end);
                let level = level_of(*category, *level);
                push_span(
                    trace,
                    *t,
                    *start,
                    *end,
                    level,
                    *category,
                    *name,
                    *correlation,
                    args.as_deref(),
                );
            }
            Event::Instant {
                track: t,
                ts,
                level,
                category,
                name,
                args,
            } => {
                last_ts = last_ts.max(*ts);
                if let Some(tid) = track(*t) {
                    let level = level_of(*category, *level);
                    let args = if options.keep_args {
                        args.as_deref().map(|a| trace.add_args(a))
                    } else {
                        None
                    };
                    trace.instants.push(Instant {
                        track: tid,
                        ts: *ts,
                        name: sid(*name),
                        category: sid(*category),
                        level,
                        args,
                    });
                }
            }
            Event::Counter {
                track: t,
                ts,
                value,
            } => {
                last_ts = last_ts.max(*ts);
                if let Some(tid) = track(*t) {
                    trace.counters.push(strato_trace::CounterSample {
                        track: tid,
                        ts: *ts,
                        value: *value,
                    });
                }
            }
            Event::Untraced {
                track: t,
                ts,
                count,
            } => {
                last_ts = last_ts.max(*ts);
                let tid = match rec.tracks.get(*t as usize) {
                    Some(Some(TrackDef::Thread { tid, .. })) => *tid,
                    _ => continue,
                };
                let counter = *untraced_tracks.entry(*t).or_insert_with(|| {
                    trace.track_for(
                        index,
                        rank,
                        TrackKind::Counter {
                            pid: Some(pid),
                            device: None,
                            name: format!("untraced_hook_calls/{tid}"),
                            unit: "count".into(),
                        },
                    )
                });
                let total = untraced_total.entry(*t).or_insert(0);
                *total += count;
                trace.counters.push(strato_trace::CounterSample {
                    track: counter,
                    ts: *ts,
                    value: *total as f64,
                });
            }
            Event::Start { ts, .. } | Event::Stop { ts } => last_ts = last_ts.max(*ts),
            Event::TrackName { track: t, name } => {
                if let Some(tid) = track(*t) {
                    trace.tracks[tid.0 as usize].name = Some(rec.str(*name).to_owned());
                }
            }
        }
    }
    // Close what a killed process left open, innermost first, at the last time seen.
    let mut truncated = 0;
    let mut open: Vec<_> = open.into_iter().collect();
    open.sort_by_key(|(t, _)| *t);
    for (t, mut stack) in open {
        while let Some(o) = stack.pop() {
            truncated += 1;
            let level = level_of(o.category, o.level);
            let args = match o.args.as_deref().map(serde_json::from_str::<Value>) {
                Some(Ok(Value::Object(mut m))) => {
                    m.insert("truncated".into(), Value::Bool(true));
                    Value::Object(m).to_string()
                }
                _ => "{\"truncated\":true}".to_owned(),
            };
            push_span(
                trace,
                t,
                o.start,
                last_ts.max(o.start),
                level,
                o.category,
                o.name,
                o.correlation,
                Some(&args),
            );
        }
    }
    let category = trace.intern("correlation");
    let mut flows: Vec<_> = correlated
        .into_iter()
        .filter_map(|(id, (cpu, dev))| Some((id, cpu?, dev?)))
        .collect();
    flows.sort_unstable();
    for (id, cpu, dev) in flows {
        let (from, to) = (&trace.spans[cpu.0 as usize], &trace.spans[dev.0 as usize]);
        let flow = Flow {
            id,
            category,
            from: Some(FlowEnd {
                track: from.track,
                ts: from.start,
                span: Some(cpu),
            }),
            to: Some(FlowEnd {
                track: to.track,
                ts: to.start,
                span: Some(dev),
            }),
        };
        trace.flows.push(flow);
    }
    FileSummary { last_ts, truncated }
}

#[cfg(test)]
mod tests;
