//! The trace itself. See the crate docs for the invariants.

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::metadata::{JsonObject, RecordingMetadata, SourceMetadata};
use crate::{
    time_in_range, ArgsTable, ImportNotes, Level, Ns, SourceFormat, StrId, StringTable,
    TIME_LIMIT_NS,
};

/// Index of a [`Rank`] in [`Trace::ranks`]: one imported source (a file, a rank of a job, a
/// recorded process group).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RankId(pub u32);

/// Index of a [`Track`] in [`Trace::tracks`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TrackId(pub u32);

/// Index of a [`Span`] in [`Trace::spans`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SpanId(pub u32);

/// Index of an attribute blob in [`Trace::args`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ArgsId(pub u32);

/// An optional 64-bit id of a span ([`Span::correlation`], [`Span::external_id`]) in 8 bytes,
/// where `Option<u64>` takes 16: a trace holds millions of spans, each with two such ids.
/// `u64::MAX` stands for none, so an id of `u64::MAX` itself reads back as none (ids count up
/// from small numbers; no source we know comes near it). Compares with `Option<u64>`, reads as
/// one ([`OptionalId::get`]) and is serialized as one.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "Option<u64>", into = "Option<u64>")]
pub struct OptionalId(u64);

impl OptionalId {
    /// No id.
    pub const NONE: OptionalId = OptionalId(u64::MAX);

    /// `id` kept (`u64::MAX`: none, see the type's docs).
    pub const fn new(id: Option<u64>) -> OptionalId {
        match id {
            Some(id) => OptionalId(id),
            None => OptionalId::NONE,
        }
    }

    /// The id, if any.
    pub const fn get(self) -> Option<u64> {
        if self.0 == u64::MAX {
            None
        } else {
            Some(self.0)
        }
    }

    pub const fn is_some(self) -> bool {
        self.0 != u64::MAX
    }

    pub const fn is_none(self) -> bool {
        self.0 == u64::MAX
    }
}

impl Default for OptionalId {
    fn default() -> OptionalId {
        OptionalId::NONE
    }
}

impl From<Option<u64>> for OptionalId {
    fn from(id: Option<u64>) -> OptionalId {
        OptionalId::new(id)
    }
}

impl From<OptionalId> for Option<u64> {
    fn from(id: OptionalId) -> Option<u64> {
        id.get()
    }
}

impl PartialEq<Option<u64>> for OptionalId {
    fn eq(&self, other: &Option<u64>) -> bool {
        self.get() == *other
    }
}

// A span in 56 bytes: the two ids in 8 each (72 with `Option<u64>`).
const _: () = assert!(std::mem::size_of::<Span>() == 56);

impl std::fmt::Debug for OptionalId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.get().fmt(f)
    }
}

/// One imported source: a trace file (a rank of a distributed job) or a recording.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rank {
    /// Rank in the distributed job when the source says (`distributedInfo.rank`), else `None`.
    pub rank: Option<i64>,
    /// World size of the job when known.
    pub world_size: Option<i64>,
    /// Where it came from (a path as given by the user).
    pub source: String,
    /// The format it was imported from (stored and shown by its name, see [`SourceFormat`]).
    pub format: SourceFormat,
    /// Host name when known.
    pub host: Option<String>,
    /// The source's own top-level metadata (everything but the events): typed for a
    /// recording, as written for other formats.
    pub metadata: SourceMetadata,
    /// What the importer dropped, clamped, guessed or lost (shown by `info`).
    pub notes: ImportNotes,
}

/// A process of a rank, with its name and labels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Process {
    pub rank: RankId,
    pub pid: i64,
    pub name: Option<String>,
    pub labels: Option<String>,
}

/// Where events happen.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TrackKind {
    /// A CPU thread of a process.
    Thread { pid: i64, tid: i64 },
    /// A device queue: a CUDA stream, an OpenCL command queue, a TF device line.
    DeviceQueue { device: i64, queue: i64 },
    /// A counter time series (memory in use, utilization); `unit` as written by the source.
    Counter {
        pid: Option<i64>,
        device: Option<i64>,
        name: String,
        unit: String,
    },
    /// Anything else, named by the source (`"Spans/PyTorch Profiler"`).
    Custom { group: String, name: String },
}

/// A track of a rank.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Track {
    pub rank: RankId,
    pub kind: TrackKind,
    /// Display name (thread name, stream name) when the source gives one.
    pub name: Option<String>,
    /// Source-given display order.
    pub sort_index: Option<i64>,
}

impl Track {
    /// The pid owning this track, when it is a thread or a counter of a process.
    pub fn pid(&self) -> Option<i64> {
        match self.kind {
            TrackKind::Thread { pid, .. } => Some(pid),
            TrackKind::Counter { pid, .. } => pid,
            _ => None,
        }
    }

    /// True for device queues.
    pub fn is_device(&self) -> bool {
        matches!(self.kind, TrackKind::DeviceQueue { .. })
    }
}

/// A `[start, end)` interval on a track.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    pub track: TrackId,
    pub start: Ns,
    pub end: Ns,
    pub name: StrId,
    /// The source's own category (`cpu_op`, `kernel`, a table name, ...).
    pub category: StrId,
    pub level: Level,
    /// Launch correlation id: an API call and the device op it launched share it.
    pub correlation: OptionalId,
    /// The source's link from a framework op to the API calls it made (Kineto `External id`).
    pub external_id: OptionalId,
    /// Attributes as a JSON object text in [`Trace::args`].
    pub args: Option<ArgsId>,
}

/// [`Span::same_extent_order`] keeps a level's code in 4 bits.
const _: () = assert!(Level::ALL.len() <= 16);

impl Span {
    /// `end - start`. Cannot overflow for spans of a valid trace (both ends in the valid time
    /// range); saturates for others.
    pub fn duration(&self) -> Ns {
        self.end.saturating_sub(self.start)
    }

    /// Orders the spans of one track that start and end together, which their times cannot
    /// nest (traces in microseconds hold many: `aten::to` and the `aten::_to_copy` it calls).
    /// Lower first, meaning outer: by level first (a Python function before the framework op
    /// it calls, an op before the API calls it makes), then by the source's own numbering.
    /// Kineto numbers each op as it starts (`External id`: a caller before the ops it calls)
    /// and each API call as it is made (its correlation). Spans the source does not number
    /// come after those it numbers; callers end their keys with the span's index, so those
    /// keep trace order among themselves. With it, the order a file lists its events in does
    /// not change which span encloses which. 32 bits, so that the analyses that keep a few
    /// words per span keep it in their padding: the level in 4, the id in 28 (ids from
    /// 2^28 - 1 up compare equal, and keep trace order among themselves).
    pub fn same_extent_order(&self) -> u32 {
        const ID_BITS: u32 = 28;
        let id = (self.correlation.get())
            .or(self.external_id.get())
            .unwrap_or(u64::MAX)
            .min((1 << ID_BITS) - 1);
        (u32::from(self.level.code()) << ID_BITS) | id as u32
    }
}

/// A point event on a track.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Instant {
    pub track: TrackId,
    pub ts: Ns,
    pub name: StrId,
    pub category: StrId,
    pub level: Level,
    pub args: Option<ArgsId>,
}

/// A sample of a counter track.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CounterSample {
    pub track: TrackId,
    pub ts: Ns,
    pub value: f64,
}

/// One end of a flow: where the source put it, and the span it binds to when one was found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowEnd {
    pub track: TrackId,
    pub ts: Ns,
    pub span: Option<SpanId>,
}

/// A causal link (CPU launch -> device op, forward op -> backward op). Real files carry
/// unbalanced flows, so either end may be missing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flow {
    pub id: u64,
    pub category: StrId,
    pub from: Option<FlowEnd>,
    pub to: Option<FlowEnd>,
}

/// A device and its properties, as far as the source (or the device table) knows them.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Device {
    pub rank: Option<RankId>,
    /// Device index as the source numbers it.
    pub index: i64,
    pub name: Option<String>,
    pub sm_count: Option<i64>,
    pub total_memory_bytes: Option<i64>,
    pub compute_major: Option<i64>,
    pub compute_minor: Option<i64>,
    pub clock_rate_khz: Option<i64>,
    pub memory_bandwidth_bytes_per_s: Option<f64>,
    /// Everything else the source said, as written.
    pub extra: JsonObject,
}

/// A clock a source read.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ClockDomain {
    /// `CLOCK_MONOTONIC`.
    Monotonic,
    /// `CLOCK_MONOTONIC_RAW`.
    MonotonicRaw,
    /// Wall clock (`CLOCK_REALTIME`, `time.time_ns()`).
    Realtime,
    /// A device's own clock, named.
    Device(String),
    /// The source does not say.
    Unknown,
}

/// How one source's clock was aligned to the reference: `reference = local + offset_ns +
/// drift_ppb * (local - anchor_ns) / 1e9`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClockSource {
    pub name: String,
    pub domain: ClockDomain,
    pub offset_ns: i64,
    pub drift_ppb: f64,
    pub anchor_ns: i64,
    /// Bound on the alignment error, when estimated.
    pub error_ns: Option<i64>,
    /// How the estimate was made (`"identity"`, `"paired observations"`, ...).
    pub method: String,
}

/// The reference clock and the alignment of every source to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClockInfo {
    pub reference: ClockDomain,
    pub sources: Vec<ClockSource>,
}

impl Default for ClockInfo {
    fn default() -> Self {
        ClockInfo {
            reference: ClockDomain::Unknown,
            sources: Vec::new(),
        }
    }
}

/// A broken invariant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    #[error("{what} {index} refers to missing {target} {id}")]
    DanglingId {
        what: &'static str,
        index: usize,
        target: &'static str,
        id: u32,
    },
    #[error("span {index} ends before it starts ({start} > {end})")]
    NegativeSpan { index: usize, start: Ns, end: Ns },
    #[error("{what} {index} has time {time} ns, outside the valid range (+-{TIME_LIMIT_NS} ns)")]
    TimeOutOfRange {
        what: &'static str,
        index: usize,
        time: Ns,
    },
}

/// A whole trace: see the crate docs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trace {
    pub strings: StringTable,
    pub ranks: Vec<Rank>,
    pub processes: Vec<Process>,
    pub tracks: Vec<Track>,
    pub spans: Vec<Span>,
    pub instants: Vec<Instant>,
    pub counters: Vec<CounterSample>,
    pub flows: Vec<Flow>,
    pub devices: Vec<Device>,
    /// Attribute blobs (JSON object texts, minified) referred to by [`ArgsId`].
    pub args: ArgsTable,
    pub clock: ClockInfo,
}

/// Looks tracks up by (rank, kind) while a trace is being built.
#[derive(Debug, Default)]
pub struct TrackIndex {
    map: FxHashMap<(RankId, TrackKind), TrackId>,
}

impl Trace {
    /// Moves every time of the trace (spans, instants, counter samples, flow ends) by its
    /// track's shift (`shifts`, indexed by track; tracks beyond it stay), saturating: a rank's
    /// events put on another clock (the job's, or a clock set ahead on purpose).
    pub fn shift_tracks(&mut self, shifts: &[Ns]) {
        if shifts.iter().all(|&s| s == 0) {
            return;
        }
        let of = |track: TrackId| shifts.get(track.0 as usize).copied().unwrap_or(0);
        for s in &mut self.spans {
            let shift = of(s.track);
            s.start = s.start.saturating_add(shift);
            s.end = s.end.saturating_add(shift);
        }
        for i in &mut self.instants {
            i.ts = i.ts.saturating_add(of(i.track));
        }
        for c in &mut self.counters {
            c.ts = c.ts.saturating_add(of(c.track));
        }
        for f in &mut self.flows {
            for end in [&mut f.from, &mut f.to].into_iter().flatten() {
                end.ts = end.ts.saturating_add(of(end.track));
            }
        }
    }

    /// A copy of the tables without the events (no spans, instants, counters, flows or args):
    /// what an analysis that counted the events as they came still needs to present them
    /// (ranks, processes, tracks, devices, strings, clock). [`Trace::append`] of such copies
    /// gathers the tables of a job read rank by rank.
    pub fn tables(&self) -> Trace {
        Trace {
            strings: self.strings.clone(),
            ranks: self.ranks.clone(),
            processes: self.processes.clone(),
            tracks: self.tracks.clone(),
            devices: self.devices.clone(),
            clock: self.clock.clone(),
            ..Trace::default()
        }
    }

    /// Drops the events of a streamed batch once they are consumed (spans, instants, counter
    /// samples and their args; flows and the other tables stay), so memory holds only what
    /// the consumer keeps. The args table left is an uncompressed one, as a streamed batch's.
    pub fn clear_events(&mut self) {
        self.spans.clear();
        self.instants.clear();
        self.counters.clear();
        self.args = ArgsTable::uncompressed();
    }

    /// The typed metadata of the trace's `strato` recordings (ranks of another format, or
    /// whose metadata does not have the recording's shape, give none).
    pub fn recordings(&self) -> impl Iterator<Item = &RecordingMetadata> {
        self.ranks
            .iter()
            .filter(|r| r.format == SourceFormat::Strato)
            .filter_map(|r| r.metadata.recording())
    }

    /// Interns a string.
    pub fn intern(&mut self, text: &str) -> StrId {
        self.strings.intern(text)
    }

    /// The text of a string id.
    pub fn str(&self, id: StrId) -> &str {
        self.strings.get(id)
    }

    /// Adds a rank and returns its id.
    pub fn add_rank(&mut self, rank: Rank) -> RankId {
        self.ranks.push(rank);
        RankId((self.ranks.len() - 1) as u32)
    }

    /// Adds a track unconditionally.
    pub fn add_track(&mut self, track: Track) -> TrackId {
        self.tracks.push(track);
        TrackId((self.tracks.len() - 1) as u32)
    }

    /// The track of `(rank, kind)`, created on first use with `index` remembering it.
    pub fn track_for(
        &mut self,
        index: &mut TrackIndexHandle,
        rank: RankId,
        kind: TrackKind,
    ) -> TrackId {
        if let Some(&id) = index.0.map.get(&(rank, kind.clone())) {
            return id;
        }
        let id = self.add_track(Track {
            rank,
            kind: kind.clone(),
            name: None,
            sort_index: None,
        });
        index.0.map.insert((rank, kind), id);
        id
    }

    /// Stores an attribute blob (minified, see [`ArgsTable::push`]) and returns its id.
    pub fn add_args(&mut self, json_object: &str) -> ArgsId {
        self.args.push(json_object)
    }

    /// The attribute blob of a span or instant.
    pub fn args_text(&self, id: Option<ArgsId>) -> Option<crate::ArgsText<'_>> {
        id.and_then(|id| self.args.get(id.0 as usize))
    }

    /// The track a span is on.
    pub fn track(&self, id: TrackId) -> &Track {
        &self.tracks[id.0 as usize]
    }

    /// Earliest start and latest end over spans, instants and counter samples.
    pub fn time_span(&self) -> Option<(Ns, Ns)> {
        let points = self
            .spans
            .iter()
            .map(|s| (s.start, s.end))
            .chain(self.instants.iter().map(|i| (i.ts, i.ts)))
            .chain(self.counters.iter().map(|c| (c.ts, c.ts)));
        points.fold(None, |acc, (lo, hi)| match acc {
            None => Some((lo, hi)),
            Some((a, b)) => Some((a.min(lo), b.max(hi))),
        })
    }

    /// Checks the invariants in the crate docs.
    pub fn validate(&self) -> Result<(), TraceError> {
        let tracks = self.tracks.len();
        let strings = self.strings.len();
        let args = self.args.len();
        let ranks = self.ranks.len();
        let dangling = |what, index, target, id: u32, len: usize| {
            if (id as usize) < len {
                Ok(())
            } else {
                Err(TraceError::DanglingId {
                    what,
                    index,
                    target,
                    id,
                })
            }
        };
        for (i, t) in self.tracks.iter().enumerate() {
            dangling("track", i, "rank", t.rank.0, ranks)?;
        }
        for (i, p) in self.processes.iter().enumerate() {
            dangling("process", i, "rank", p.rank.0, ranks)?;
        }
        let in_range = |what, index, time: Ns| {
            if time_in_range(time) {
                Ok(())
            } else {
                Err(TraceError::TimeOutOfRange { what, index, time })
            }
        };
        for (i, s) in self.spans.iter().enumerate() {
            dangling("span", i, "track", s.track.0, tracks)?;
            in_range("span", i, s.start)?;
            in_range("span", i, s.end)?;
            dangling("span", i, "string", s.name.0, strings)?;
            dangling("span", i, "string", s.category.0, strings)?;
            if let Some(a) = s.args {
                dangling("span", i, "args", a.0, args)?;
            }
            if s.end < s.start {
                return Err(TraceError::NegativeSpan {
                    index: i,
                    start: s.start,
                    end: s.end,
                });
            }
        }
        for (i, e) in self.instants.iter().enumerate() {
            dangling("instant", i, "track", e.track.0, tracks)?;
            in_range("instant", i, e.ts)?;
            dangling("instant", i, "string", e.name.0, strings)?;
            dangling("instant", i, "string", e.category.0, strings)?;
            if let Some(a) = e.args {
                dangling("instant", i, "args", a.0, args)?;
            }
        }
        for (i, c) in self.counters.iter().enumerate() {
            dangling("counter sample", i, "track", c.track.0, tracks)?;
            in_range("counter sample", i, c.ts)?;
        }
        for (i, f) in self.flows.iter().enumerate() {
            dangling("flow", i, "string", f.category.0, strings)?;
            for end in [&f.from, &f.to].into_iter().flatten() {
                dangling("flow", i, "track", end.track.0, tracks)?;
                in_range("flow", i, end.ts)?;
                if let Some(s) = end.span {
                    dangling("flow", i, "span", s.0, self.spans.len())?;
                }
            }
        }
        for (i, d) in self.devices.iter().enumerate() {
            if let Some(r) = d.rank {
                dangling("device", i, "rank", r.0, ranks)?;
            }
        }
        Ok(())
    }

    /// Appends `other` to `self`, renumbering its ranks, tracks, strings, args and spans.
    /// Used to combine the ranks of a job, or a timeline with kernel metrics.
    pub fn append(&mut self, mut other: Trace) {
        let rank_base = self.ranks.len() as u32;
        let track_base = self.tracks.len() as u32;
        let span_base = self.spans.len() as u32;
        let args_base = self.args.len() as u32;
        let string_map: Vec<StrId> = other
            .strings
            .iter()
            .map(|(_, text)| self.strings.intern(text))
            .collect();
        // Appending to an empty trace (every import gathers its file into a fresh trace)
        // renumbers nothing: the events are then moved, not copied, so the peak does not hold
        // every span twice.
        let unchanged_ids = rank_base == 0
            && track_base == 0
            && args_base == 0
            && string_map
                .iter()
                .enumerate()
                .all(|(i, id)| id.0 as usize == i);
        if unchanged_ids {
            if self.spans.is_empty() {
                self.spans = other.spans;
                other.spans = Vec::new();
            }
            if self.instants.is_empty() {
                self.instants = other.instants;
                other.instants = Vec::new();
            }
            if self.counters.is_empty() {
                self.counters = other.counters;
                other.counters = Vec::new();
            }
            if self.flows.is_empty() && span_base == 0 {
                self.flows = other.flows;
                other.flows = Vec::new();
            }
        }
        let s = |id: StrId| string_map[id.0 as usize];
        let r = |id: RankId| RankId(id.0 + rank_base);
        let t = |id: TrackId| TrackId(id.0 + track_base);
        let a = |id: Option<ArgsId>| id.map(|x| ArgsId(x.0 + args_base));
        self.ranks.extend(other.ranks);
        self.processes
            .extend(other.processes.into_iter().map(|p| Process {
                rank: r(p.rank),
                ..p
            }));
        self.tracks.extend(other.tracks.into_iter().map(|tr| Track {
            rank: r(tr.rank),
            ..tr
        }));
        self.spans.extend(other.spans.into_iter().map(|sp| Span {
            track: t(sp.track),
            name: s(sp.name),
            category: s(sp.category),
            args: a(sp.args),
            ..sp
        }));
        self.instants
            .extend(other.instants.into_iter().map(|e| Instant {
                track: t(e.track),
                name: s(e.name),
                category: s(e.category),
                args: a(e.args),
                ..e
            }));
        self.counters
            .extend(other.counters.into_iter().map(|c| CounterSample {
                track: t(c.track),
                ..c
            }));
        let end = |e: Option<FlowEnd>| {
            e.map(|e| FlowEnd {
                track: t(e.track),
                ts: e.ts,
                span: e.span.map(|x| SpanId(x.0 + span_base)),
            })
        };
        self.flows.extend(other.flows.into_iter().map(|f| Flow {
            id: f.id,
            category: s(f.category),
            from: end(f.from),
            to: end(f.to),
        }));
        self.devices
            .extend(other.devices.into_iter().map(|d| Device {
                rank: d.rank.map(r),
                ..d
            }));
        self.args.append(other.args);
        if self.clock.sources.is_empty() {
            self.clock.reference = other.clock.reference;
        }
        self.clock.sources.extend(other.clock.sources);
    }

    /// Ranks' tracks: the ids of the tracks that belong to `rank`.
    pub fn tracks_of(&self, rank: RankId) -> impl Iterator<Item = TrackId> + '_ {
        self.tracks
            .iter()
            .enumerate()
            .filter(move |(_, t)| t.rank == rank)
            .map(|(i, _)| TrackId(i as u32))
    }
}

/// A [`TrackIndex`] owned by an importer while it builds a trace.
#[derive(Debug, Default)]
pub struct TrackIndexHandle(TrackIndex);

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny(source: &str) -> Trace {
        let mut trace = Trace::default();
        let rank = trace.add_rank(Rank {
            rank: Some(0),
            world_size: None,
            source: source.into(),
            format: SourceFormat::Other("test".into()),
            host: None,
            metadata: SourceMetadata::None,
            notes: ImportNotes::default(),
        });
        let mut index = TrackIndexHandle::default();
        let cpu = trace.track_for(&mut index, rank, TrackKind::Thread { pid: 1, tid: 1 });
        let gpu = trace.track_for(
            &mut index,
            rank,
            TrackKind::DeviceQueue {
                device: 0,
                queue: 7,
            },
        );
        assert_eq!(
            trace.track_for(&mut index, rank, TrackKind::Thread { pid: 1, tid: 1 }),
            cpu
        );
        let launch = trace.intern("cudaLaunchKernel");
        let api = trace.intern("cuda_runtime");
        let kernel = trace.intern("gemm");
        let kcat = trace.intern("kernel");
        let args = trace.add_args("{\"grid\":[1,1,1]}");
        trace.spans.push(Span {
            track: cpu,
            start: 0,
            end: 10,
            name: launch,
            category: api,
            level: Level::AcceleratorApi,
            correlation: Some(5).into(),
            external_id: OptionalId::NONE,
            args: None,
        });
        trace.spans.push(Span {
            track: gpu,
            start: 12,
            end: 30,
            name: kernel,
            category: kcat,
            level: Level::DeviceKernel,
            correlation: Some(5).into(),
            external_id: OptionalId::NONE,
            args: Some(args),
        });
        trace.flows.push(Flow {
            id: 5,
            category: api,
            from: Some(FlowEnd {
                track: cpu,
                ts: 0,
                span: Some(SpanId(0)),
            }),
            to: Some(FlowEnd {
                track: gpu,
                ts: 12,
                span: Some(SpanId(1)),
            }),
        });
        trace
    }

    #[test]
    fn append_renumbers_everything() {
        let mut a = tiny("a");
        let b = tiny("b");
        a.append(b);
        a.validate().unwrap();
        assert_eq!(a.ranks.len(), 2);
        assert_eq!(a.tracks.len(), 4);
        assert_eq!(a.tracks[2].rank, RankId(1));
        assert_eq!(a.spans[3].track, TrackId(3));
        assert_eq!(a.str(a.spans[3].name), "gemm");
        assert_eq!(
            a.args_text(a.spans[3].args).as_deref(),
            Some("{\"grid\":[1,1,1]}")
        );
        assert_eq!(a.flows[1].to.as_ref().unwrap().span, Some(SpanId(3)));
        assert_eq!(a.time_span(), Some((0, 30)));
    }

    #[test]
    fn append_to_an_empty_trace_keeps_everything_as_it_was() {
        // Every import gathers its file into a fresh trace: its events are moved (no copy at
        // the peak), and the result is the file's trace unchanged.
        let mut whole = Trace::default();
        whole.append(tiny("a"));
        assert_eq!(whole, tiny("a"));
        // The moved events are renumbered as usual by a later append.
        whole.append(tiny("b"));
        let mut expected = tiny("a");
        expected.append(tiny("b"));
        assert_eq!(whole, expected);
        assert_eq!(whole.spans[3].track, TrackId(3));
        // A trace whose strings are not renumbered identically is not moved: its ids follow
        // the receiving trace's strings.
        let mut other = Trace::default();
        other.intern("gemm");
        other.append(tiny("c"));
        other.validate().unwrap();
        assert_eq!(other.str(other.spans[1].name), "gemm");
        assert_eq!(other.spans[1].name, StrId(1));
    }

    #[test]
    fn validate_catches_dangling_and_negative() {
        let mut t = tiny("a");
        t.spans[0].end = -1;
        assert!(matches!(t.validate(), Err(TraceError::NegativeSpan { .. })));
        let mut t = tiny("a");
        t.spans[1].end = TIME_LIMIT_NS + 1;
        assert!(matches!(
            t.validate(),
            Err(TraceError::TimeOutOfRange { index: 1, .. })
        ));
        let mut t = tiny("a");
        t.counters.push(CounterSample {
            track: TrackId(0),
            ts: i64::MIN,
            value: 0.0,
        });
        assert!(matches!(
            t.validate(),
            Err(TraceError::TimeOutOfRange { .. })
        ));
        let mut t = tiny("a");
        t.spans[0].track = TrackId(9);
        assert!(matches!(t.validate(), Err(TraceError::DanglingId { .. })));
    }

    #[test]
    fn an_optional_id_reads_and_serializes_as_an_option() {
        for id in [None, Some(0), Some(1), Some(u64::MAX - 1)] {
            let kept = OptionalId::new(id);
            assert_eq!(kept.get(), id);
            assert_eq!(kept, id);
            assert_eq!(kept.is_some(), id.is_some());
            assert_eq!(format!("{kept:?}"), format!("{id:?}"));
            let json = serde_json::to_string(&kept).unwrap();
            assert_eq!(json, serde_json::to_string(&id).unwrap());
            assert_eq!(serde_json::from_str::<OptionalId>(&json).unwrap(), kept);
        }
        // The one id it cannot hold reads back as none (see the type's docs).
        assert_eq!(OptionalId::new(Some(u64::MAX)).get(), None);
        assert_eq!(OptionalId::default(), None);
    }
}
