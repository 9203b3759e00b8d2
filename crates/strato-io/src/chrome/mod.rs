//! Chrome-trace JSON importer: PyTorch profiler / Kineto traces (current and 2021 schema), the
//! TensorFlow trace viewer JSON (refined afterwards by [`crate::tf`]) and generic Chrome traces.
//!
//! Streaming: a reader thread decompresses the file in chunks (1 MiB; `ImportOptions::read_size`)
//! while this thread splits the `traceEvents` array into single events ([`crate::json_split`])
//! and parses each one alone with serde (borrowing from the chunk). Neither the JSON text nor a
//! DOM of it is ever held whole; memory is bounded by the events kept (and the largest event).
//! Results never depend on where chunks end (see [`crate::json_split`]).
//!
//! Limits (see `docs/import.md`): names and categories longer than [`MAX_STRING_BYTES`] are cut
//! there and an args object longer than [`MAX_ARGS_BYTES`] is replaced by
//! `{"strato_truncated_args_bytes": N}` (the fields the importer reads from it are still read
//! from the full text); both are counted in the rank's import notes (`truncated_strings`,
//! `truncated_args`, shown by `strato info`). With `ImportOptions::salvage`, a document damaged
//! part-way (truncated, corrupt gzip, trailing data, a bad event) keeps the events read before
//! the damage and says so in a `salvaged: ...` note; without it, such a document is an error.
//!
//! Placement rules (see `docs/formats/kineto.md`):
//! - device categories (kernels, copies, sets, syncs, `gpu_user_annotation`) go to
//!   `DeviceQueue{device: args.device or pid, queue: args.stream or tid}` — decided by `cat`,
//!   never by pid, because some files put Python events on pid 0 / tid 0 too;
//! - other events with integer-like pid and tid go to `Thread{pid, tid}` (`"stream 7"` and
//!   `"1890023232"` strings are read as integers); anything else to `Custom{group: pid, name: tid}`;
//! - `ts`/`dur` are microseconds, converted to ns from their decimal text exactly; an event
//!   without `ts`, or whose `ts` or `ts + dur` is outside the valid time range
//!   ([`strato_trace::TIME_LIMIT_NS`]), is an error naming it; negative durations are clamped
//!   to 0 (as libkineto does) and a missing `dur` read as 0, both counted in the rank's
//!   [`strato_trace::ImportNotes`] (shown by `info`), as are unmatched `E` events;
//! - what is kept is accounted against the memory budget
//!   ([`crate::ImportOptions::memory_budget_bytes`]); passing it is an error, never an abort;
//! - flows (`s`/`t`/`f`) bind to the innermost span containing their timestamp on their track;
//!   unpaired flow ends are kept with the other end missing;
//! - `[memory]` instants also feed a per-device "memory allocated" counter (bytes).
//!
//! Layout: this module owns the entry points and the import state ([`Builder`]: what one file's
//! import holds, from the first event to [`Builder::finish`]). Each concern of the import is a
//! child module adding to it: [`schema`] (the event as written, lenient values, Kineto and
//! TensorFlow field quirks), [`reader`] (the streaming reader: parse, cap, dispatch by phase,
//! hand batches to a sink), [`placement`] (tracks, categories, merged-file ranks, metadata
//! events), [`spans`] (spans, instants, counters) and [`flows`] (flow events and binding them
//! to spans). Children use the parent and [`schema`]; none uses a sibling that uses it back.

mod flows;
mod placement;
mod reader;
mod schema;
mod spans;

use std::path::Path;
use strato_trace::metadata::{JsonObject, SourceMetadata};

use rustc_hash::{FxHashMap, FxHashSet};
use serde_json::value::RawValue;
use strato_trace::{
    ClockInfo, Device, Flow, ImportNotes, MemoryTracker, Ns, Process, Rank, RankId, SourceFormat,
    StrId, Trace, TrackId, TrackIndexHandle, TrackKind,
};

use crate::input::Input;
use crate::json_lenient::{Fields, LooseStr};
use crate::json_split::{Splitter, TopLevel};
use crate::{Error, ErrorKind, ImportOptions, Result};
use flows::{bind_flows, HandedSpans, HeldSpans, PendingFlowEnd, FLOW_START};
use placement::CategoryInfo;
pub use placement::MERGED_RANK_CONTRADICTED;
use reader::ParseCounts;
use schema::Loose;

/// Top-level keys that only Kineto writes.
const KINETO_KEYS: &[&str] = &[
    "schemaVersion",
    "deviceProperties",
    "distributedInfo",
    "traceName",
    "baseTimeNanoseconds",
];

/// Longest name or category kept (bytes); longer ones are cut at a character boundary here
/// and counted. Real kernel names (templated C++) stay far below it.
pub const MAX_STRING_BYTES: usize = 64 << 10;

/// Longest `args` object text kept (bytes); a longer one is replaced by
/// `{"strato_truncated_args_bytes": N}` and counted.
pub const MAX_ARGS_BYTES: usize = 1 << 20;

/// The ranks stratoscope's Chrome export lists in `otherData` (`{"exporter": "stratoscope
/// ...", "ranks": [{"rank", "format", ...}]}`): each one's number and source format; none when
/// another tool wrote the object.
fn exported_ranks(text: &str) -> Vec<(Option<i64>, String)> {
    let Ok(other) = serde_json::from_str::<serde_json::Value>(text) else {
        return Vec::new();
    };
    let ours = other
        .get("exporter")
        .and_then(|e| e.as_str())
        .is_some_and(|e| e.starts_with("stratoscope"));
    if !ours {
        return Vec::new();
    }
    let ranks = other.get("ranks").and_then(|r| r.as_array());
    ranks
        .into_iter()
        .flatten()
        .filter_map(|r| {
            let format = r.get("format")?.as_str()?.to_owned();
            Some((r.get("rank").and_then(|n| n.as_i64()), format))
        })
        .collect()
}

/// Imports a Chrome-trace JSON document (object with `traceEvents`, or a bare array).
pub fn import(path: &Path, input: Input, options: &ImportOptions) -> Result<Trace> {
    import_into(path, input, options, None)
}

/// Where a streaming import puts its events as it reads them: called with the trace being
/// built whenever it holds a batch of events (and once at the end), it takes the
/// spans, instants, counter samples and args out of it (leaving those vectors empty), as
/// `strato_store::ProfileWriter::write_events` does. The args ids of the events handed over
/// index the args handed over with them; spans are handed over in order, so a span's id is its
/// index among all spans handed over. An error stops the import (the message is the import's
/// error).
pub type EventSink<'s> = dyn FnMut(&mut Trace) -> std::result::Result<(), String> + 's;

/// Events held before they are handed to an [`EventSink`], by default: as many as the store
/// writes per chunk (16 Ki rows), small beside any trace worth streaming (a batch with its
/// args is a few MB).
pub const SINK_EVENTS: usize = 16 * 1024;

/// [`import`], handing the events to `sink` as they are read, in batches of `batch_events`
/// (spans, instants and counter samples together; at least 1): the trace returned holds every
/// table but the events (ranks, tracks, strings, processes, devices, and the flows, bound to
/// spans by their ids among all spans handed over). Memory is what the flows and the string
/// table need plus 16 bytes per span (its track and times, kept to bind flows), whatever the
/// file's size.
pub fn import_streaming(
    path: &Path,
    input: Input,
    options: &ImportOptions,
    batch_events: usize,
    sink: &mut EventSink<'_>,
) -> Result<Trace> {
    import_into(path, input, options, Some((sink, batch_events.max(1))))
}

fn import_into(
    path: &Path,
    input: Input,
    options: &ImportOptions,
    sink: Option<(&mut EventSink<'_>, usize)>,
) -> Result<Trace> {
    let mut builder = Builder::new(path, options);
    // Each arm coerces the sink to the builder's (shorter) lifetime.
    builder.sink = match sink {
        Some((sink, batch)) => {
            builder.batch_events = batch;
            // Each batch's args are read once and dropped: not worth compressing.
            builder.trace.args = strato_trace::ArgsTable::uncompressed();
            Some(sink)
        }
        None => None,
    };
    let mut splitter = Splitter::with_chunk_size(input.reader, options.read_size);
    let outcome = splitter.run(|item| match item {
        TopLevel::Key(key, raw) => builder.top_level(key, raw).map(|()| Some(0)),
        TopLevel::Event {
            bytes,
            offset,
            complete,
        } => builder.event(bytes, offset, complete),
    });
    // A semantic error about an event (times, memory budget) is kept whole, not as JSON text.
    if let Some(e) = builder.fatal.take() {
        return Err(e);
    }
    let consumed = splitter.consumed();
    let splitter_replaced = splitter.replaced_surrogates();
    drop(splitter);
    let error = match outcome {
        Ok(true) => None,
        Ok(false) => {
            return Err(Error::new(
                path,
                ErrorKind::NotATrace("JSON has no \"traceEvents\" array".into()),
            ))
        }
        Err(crate::json_split::SplitError::Io(e)) => Some(crate::input::classify(path, e)),
        Err(crate::json_split::SplitError::Syntax { offset, message })
        | Err(crate::json_split::SplitError::Event { offset, message }) => {
            Some(Error::new(path, ErrorKind::Json { offset, message }))
        }
    };
    let salvaged = match error {
        None => None,
        Some(e) if !options.salvage || builder.parse.events == 0 => return Err(e),
        Some(e) => Some(e.kind.to_string()),
    };
    let counts = std::mem::take(&mut builder.parse);
    let rank = builder.rank;
    if builder.sink.is_some() {
        builder.hand_over()?;
    }
    let mut trace = builder.finish()?;
    let notes = &mut trace.ranks[rank.0 as usize].notes;
    notes.count("truncated_strings", counts.truncated_strings);
    notes.count("truncated_string_bytes", counts.truncated_string_bytes);
    notes.count("truncated_args", counts.truncated_args);
    notes.count(
        "lone_surrogates_replaced",
        counts.replaced_surrogates + splitter_replaced,
    );
    if let Some(reason) = salvaged {
        notes.note(format!(
            "salvaged: {} events ({} bytes) read before the damage, the rest is lost: {reason}",
            counts.events, consumed
        ));
    }
    Ok(trace)
}

/// A `B` event waiting for its `E`: start, name, category and args text.
type OpenBegin = (Ns, StrId, CategoryInfo, Option<String>);

struct Builder<'p, 's> {
    path: &'p Path,
    options: &'p ImportOptions,
    /// Set for a streaming import ([`import_streaming`]): events go there in batches.
    sink: Option<&'s mut EventSink<'s>>,
    /// Events held before they go to the sink.
    batch_events: usize,
    /// The track and times of every span handed to the sink (only when flows are kept): what
    /// binding flows needs of them.
    handed_spans: HandedSpans,
    trace: Trace,
    rank: RankId,
    tracks: TrackIndexHandle,
    thread_cache: FxHashMap<(i64, i64), TrackId>,
    /// Device-queue tracks by (rank, device, queue).
    device_cache: FxHashMap<(RankId, i64, i64), TrackId>,
    categories: FxHashMap<String, CategoryInfo>,
    metadata: Vec<(String, String)>,
    kineto: bool,
    process_names: FxHashMap<i64, (Option<String>, Option<String>)>,
    thread_names: Vec<(i64, i64, Option<String>, Option<i64>)>,
    open_begins: FxHashMap<TrackId, Vec<OpenBegin>>,
    /// Flows with an end still open, by (category, id text): a flow whose two ends are both
    /// read leaves the map (a later event with its id starts a new flow either way), so the
    /// map holds the open flows only, not every flow of the file.
    flows: FxHashMap<(StrId, String), usize>,
    /// The open flows themselves when flow ends are not placed
    /// ([`crate::Projection::flow_ends`] off): a flow leaves for `Trace::flows` once complete.
    open_flows: FxHashMap<(StrId, String), Flow>,
    flow_ends: Vec<PendingFlowEnd>,
    /// Where flow ends are (pid, tid as written), in the order first seen: each integer place
    /// once (`flow_place_ids`), any other once per end. Resolved to tracks at the end, in this
    /// order (resolving may create a track; the tracks must be those of a full import, whether
    /// flows are kept or not).
    flow_places: Vec<(Option<Loose>, Option<Loose>)>,
    flow_place_ids: FxHashMap<(i64, i64), u32>,
    memory_tracks: FxHashMap<(i64, i64), TrackId>,
    memory: MemoryTracker,
    /// The error that stopped the import when it is not a JSON syntax error (an event's times,
    /// the memory budget): the splitter only carries text, so it is kept here whole.
    fatal: Option<Error>,
    /// Counted by the parsing entry (`event` and below).
    parse: ParseCounts,
    /// Ranks of a TraceFuse-merged file by job rank (see [`Builder::fused_rank`]); empty for
    /// a single-rank file.
    fused_ranks: FxHashMap<i64, RankId>,
    /// What stratoscope's Chrome export says of each rank it wrote (`otherData.ranks`: its
    /// number and source format), when the file is one.
    exported_ranks: Vec<(Option<i64>, String)>,
}

impl<'p, 's> Builder<'p, 's> {
    fn new(path: &'p Path, options: &'p ImportOptions) -> Self {
        let mut trace = Trace::default();
        let rank = trace.add_rank(Rank {
            rank: None,
            world_size: None,
            source: path.display().to_string(),
            format: SourceFormat::Chrome,
            host: None,
            metadata: SourceMetadata::None,
            notes: Default::default(),
        });
        Builder {
            path,
            options,
            sink: None,
            batch_events: SINK_EVENTS,
            handed_spans: HandedSpans::default(),
            trace,
            rank,
            tracks: TrackIndexHandle::default(),
            thread_cache: FxHashMap::default(),
            device_cache: FxHashMap::default(),
            categories: FxHashMap::default(),
            metadata: Vec::new(),
            kineto: false,
            process_names: FxHashMap::default(),
            thread_names: Vec::new(),
            open_begins: FxHashMap::default(),
            flows: FxHashMap::default(),
            open_flows: FxHashMap::default(),
            flow_ends: Vec::new(),
            flow_places: Vec::new(),
            flow_place_ids: FxHashMap::default(),
            memory_tracks: FxHashMap::default(),
            memory: MemoryTracker::new(options.memory_budget_bytes),
            fatal: None,
            parse: ParseCounts::default(),
            fused_ranks: FxHashMap::default(),
            exported_ranks: Vec::new(),
        }
    }

    fn err(&self, offset: u64, message: impl Into<String>) -> Error {
        Error::new(
            self.path,
            ErrorKind::Json {
                offset,
                message: message.into(),
            },
        )
    }

    /// A top-level key other than `traceEvents`, with its raw JSON value.
    fn top_level(&mut self, key: &str, raw: &[u8]) -> std::result::Result<(), String> {
        if KINETO_KEYS.contains(&key) {
            self.kineto = true;
        }
        let text = String::from_utf8_lossy(raw).into_owned();
        match key {
            "distributedInfo" => {
                // The file's own (first) rank, wherever the key stands: in a merged file the
                // events before it may have switched `self.rank` to another rank.
                if let Some(d) = Fields::parse(&text) {
                    let int = |key| d.get(key).and_then(|v| Loose::from_raw(v).as_i64());
                    let rank = &mut self.trace.ranks[0];
                    rank.rank = int("rank");
                    rank.world_size = int("world_size");
                    let world = rank.world_size;
                    for &id in self.fused_ranks.values() {
                        let fused = &mut self.trace.ranks[id.0 as usize];
                        fused.world_size = fused.world_size.or(world);
                    }
                }
            }
            "deviceProperties" => {
                if let Ok(list) = serde_json::from_str::<Vec<&RawValue>>(&text) {
                    for raw in list {
                        self.device_properties(raw.get());
                    }
                }
            }
            "otherData" => self.exported_ranks = exported_ranks(&text),
            "host_name" | "hostname" => {
                let host = LooseStr::from_raw(&text);
                self.parse.replaced_surrogates += u64::from(host.replaced);
                if host.was_string {
                    self.trace.ranks[0].host = Some(host.text.into_owned());
                }
            }
            _ => {}
        }
        self.metadata.push((key.to_owned(), text));
        Ok(())
    }

    /// A rank stratoscope's Chrome export wrote from a recording of its own recorder (format
    /// `strato`) is read as that recording again: the analyses read a recording's operations
    /// as the program's own work (the critical path, `whatif`), not as annotations. The
    /// export's ranks are matched to the file's by rank number, or one to one when each has a
    /// single rank. Other formats keep what the file reads as (their events' levels come back
    /// through `args.level` either way).
    fn restore_recordings(&mut self) {
        let exported = std::mem::take(&mut self.exported_ranks);
        let ranks = &mut self.trace.ranks;
        for (number, format) in &exported {
            if format != SourceFormat::Strato.as_str() {
                continue;
            }
            let rank = match (exported.len(), ranks.len(), number) {
                (1, 1, _) => ranks.first_mut(),
                (_, _, Some(n)) => ranks.iter_mut().find(|r| r.rank == Some(*n)),
                _ => None,
            };
            if let Some(rank) = rank {
                rank.format = SourceFormat::Strato;
            }
        }
    }

    /// The import notes of this file's rank.
    fn notes(&mut self) -> &mut ImportNotes {
        &mut self.trace.ranks[self.rank.0 as usize].notes
    }

    fn finish(mut self) -> Result<Trace> {
        // The file's metadata belongs to its first rank (a merged file's may end on another).
        self.fused_rank(None, None);
        let rank = self.rank;
        if self.kineto {
            self.trace.ranks[rank.0 as usize].format = SourceFormat::Kineto;
        }
        self.restore_recordings();
        if !self.metadata.is_empty() {
            // Each value is the text of one JSON value the parser read: kept as written.
            match JsonObject::from_raw_entries(std::mem::take(&mut self.metadata)) {
                Ok(object) => {
                    self.trace.ranks[rank.0 as usize].metadata = SourceMetadata::Source(object)
                }
                Err(e) => self
                    .notes()
                    .note(format!("the file's metadata was not kept: {e}")),
            }
        }
        // Thread names, keeping the last name given and any sort index. Names of tracks that
        // carry no events (Kineto names every GPU stream also as a thread) go to the device
        // queue of the same numbers, or are dropped.
        for (pid, tid, name, sort) in std::mem::take(&mut self.thread_names) {
            let track = match (
                self.thread_cache.get(&(pid, tid)).copied(),
                self.known_device_track(pid, tid),
            ) {
                (Some(t), _) | (None, Some(t)) => t,
                (None, None) => continue,
            };
            let t = &mut self.trace.tracks[track.0 as usize];
            if name.is_some() {
                t.name = name;
            }
            if sort.is_some() {
                t.sort_index = sort;
            }
        }
        // Device queues that show up only as tracks get a device entry, in the queue's rank (a
        // merged file's ranks each have their own devices).
        let mut device_ids: Vec<(RankId, i64)> = self
            .trace
            .tracks
            .iter()
            .filter_map(|t| match t.kind {
                TrackKind::DeviceQueue { device, .. } => Some((t.rank, device)),
                _ => None,
            })
            .collect();
        device_ids.sort_unstable();
        device_ids.dedup();
        for (device_rank, index) in device_ids {
            if !self
                .trace
                .devices
                .iter()
                .any(|d| d.index == index && d.rank.unwrap_or(rank) == device_rank)
            {
                self.trace.devices.push(Device {
                    rank: Some(device_rank),
                    index,
                    ..Device::default()
                });
            }
        }
        // Processes: every pid with a thread, named where the file names it, in the rank the
        // pid belongs to (a merged file's ranks: see `pid_rank`). A named pid without a thread
        // that is one of its rank's devices (Kineto names every GPU as a process: pid = device,
        // `process_labels` "GPU N") is that device, not a process.
        let with_threads: FxHashSet<i64> =
            self.trace.tracks.iter().filter_map(|t| t.pid()).collect();
        let mut pids: Vec<i64> = with_threads.iter().copied().collect();
        pids.extend(self.process_names.keys().copied());
        pids.sort_unstable();
        pids.dedup();
        for pid in pids {
            let (name, labels) = self.process_names.remove(&pid).unwrap_or_default();
            let (pid_rank, raw_pid) = self.pid_rank(pid);
            let is_device = !with_threads.contains(&pid)
                && (labels.as_deref().is_some_and(|l| l.starts_with("GPU"))
                    || self.trace.tracks.iter().any(|t| {
                        t.rank == pid_rank
                            && matches!(t.kind, TrackKind::DeviceQueue { device, .. } if device == raw_pid)
                    }));
            if is_device {
                continue;
            }
            self.trace.processes.push(Process {
                rank: pid_rank,
                pid,
                name,
                labels,
            });
        }
        // The flow-id map is no longer needed: free it before binding allocates.
        drop(std::mem::take(&mut self.flows));
        let open_flows = std::mem::take(&mut self.open_flows);
        self.trace.flows.extend(open_flows.into_values());
        let places = std::mem::take(&mut self.flow_places);
        drop(std::mem::take(&mut self.flow_place_ids));
        let place_tracks: Vec<TrackId> = places
            .iter()
            .map(|(pid, tid)| self.existing_track(pid.as_ref(), tid.as_ref()))
            .collect();
        drop(places);
        // Each end's place becomes its track, in place (no second list of ends).
        let mut ends = std::mem::take(&mut self.flow_ends);
        for end in &mut ends {
            let track = place_tracks[end.place() as usize];
            let flow = &mut self.trace.flows[end.flow as usize];
            let slot = if end.is_start() {
                &mut flow.from
            } else {
                &mut flow.to
            };
            if let Some(e) = slot {
                if e.ts == end.ts {
                    e.track = track;
                }
            }
            end.place = (end.place & FLOW_START) | track.0;
        }
        drop(place_tracks);
        if ends.is_empty() {
            // Nothing to bind.
        } else if self.sink.is_some() {
            let mut handed = std::mem::take(&mut self.handed_spans);
            handed.sort();
            bind_flows(&mut self.trace, &handed, &ends);
        } else {
            let spans = std::mem::take(&mut self.trace.spans);
            let index = HeldSpans::new(&spans, self.trace.tracks.len());
            bind_flows(&mut self.trace, &index, &ends);
            drop(index);
            self.trace.spans = spans;
        }
        self.trace.clock = ClockInfo::default();
        let open_begins: usize = self.open_begins.values().map(Vec::len).sum();
        self.notes()
            .count("unmatched_begin_events", open_begins as u64);
        Ok(self.trace)
    }
}

#[cfg(test)]
mod tests;
