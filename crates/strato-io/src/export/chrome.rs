//! Chrome Trace Event JSON exporter: writes a [`Trace`] as `{"traceEvents":[...], ...}` that
//! chrome://tracing, ui.perfetto.dev and Kineto-aware tools (and our own Chrome importer)
//! open.
//!
//! Layout (see `docs/export.md`): every (rank, pid) process and every (rank, device) is a
//! Chrome process (devices are pseudo-processes like Kineto's, with `pid` = device index when
//! free and the queue as `tid`); counters without an owner and custom-track groups are
//! pseudo-processes too. Pids that would collide (two ranks, or a CPU pid equal to a device
//! index) are renumbered above the largest one. Events are streamed one by one: `M` names,
//! `X` spans, `i` instants, `C` counters, `s`/`f` flows (`bp:"e"`). `ts`/`dur` are
//! microseconds written exactly from the nanoseconds as decimal text with 3 decimals.

use std::collections::BTreeSet;
use std::io::{self, BufWriter, Write};

use rustc_hash::{FxHashMap, FxHashSet};
use serde::de::IgnoredAny;
use strato_trace::{ArgsId, Level, Ns, RankId, SpanId, Trace, TrackId, TrackKind};

/// Writes `trace` as Chrome Trace Event JSON to `out`.
pub fn write<W: Write>(trace: &Trace, out: W) -> io::Result<()> {
    write_overlaid(trace, &Overlay::default(), out)
}

/// What an analysis lays over a Chrome export (like HTA's critical-path overlay): spans
/// marked with `args.<mark> = 1`, and arrows (flow events) between points of tracks.
#[derive(Debug, Clone, Default)]
pub struct Overlay {
    /// The args key set to 1 on marked spans (`"critical"`).
    pub mark: String,
    /// The marked spans.
    pub marked: FxHashSet<SpanId>,
    pub arrows: Vec<OverlayArrow>,
}

/// A flow arrow `from` -> `to` (track, time); viewers bind each end to the slice enclosing
/// it on its track.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverlayArrow {
    pub from: (TrackId, Ns),
    pub to: (TrackId, Ns),
    /// Flow name and category (`"critical_path"`, `"critical_path_launch"`).
    pub name: String,
    pub category: String,
    /// Integer args written on both ends (`weight_ns`).
    pub args: Vec<(String, i64)>,
}

/// Writes `trace` as Chrome Trace Event JSON with `overlay` laid over it: marked spans carry
/// `args.<mark> = 1`, arrows follow the trace's own flows with fresh ids.
pub fn write_overlaid<W: Write>(trace: &Trace, overlay: &Overlay, out: W) -> io::Result<()> {
    let mut out = BufWriter::with_capacity(1 << 16, out);
    let layout = Layout::new(trace);
    header(trace, &mut out)?;
    let mut events = Events {
        out: &mut out,
        first: true,
    };
    write_events(&mut events, &layout, trace, trace, overlay)?;
    write_flows_and_names(&mut events, &layout, trace, &trace.flows, overlay)?;
    out.write_all(b"\n]}\n")?;
    out.flush()
}

/// A Chrome export written while a streamed import hands over its events (`strato export
/// --chrome` of one JSON file: the trace is never held). It is given the trace's tables first
/// (every track, process, rank, device and string, redacted, and the flows: what a first
/// streamed pass returns), which fix every pid and tid; then each batch of events of a second
/// pass; then [`ChromeStream::finish`] writes the flows and names.
///
/// The file holds the same events as [`write`] of the whole trace, in batch order (spans,
/// instants and counters of each batch in turn) instead of all spans first. Names come from
/// the tables (so they are redacted as the whole import redacts them), attributes from each
/// batch. A batch naming a track or string the tables do not hold means the input changed
/// between the passes: an error, never a file with wrong names.
pub struct ChromeStream<'t, W: Write> {
    out: BufWriter<W>,
    layout: Layout,
    tables: &'t Trace,
    first: bool,
    /// Flows the batches held (taken out of them).
    flows_seen: usize,
}

impl<'t, W: Write> ChromeStream<'t, W> {
    /// Writes the header (ranks, devices) of the trace whose tables are `tables`.
    pub fn start(tables: &'t Trace, out: W) -> io::Result<Self> {
        let mut out = BufWriter::with_capacity(1 << 16, out);
        header(tables, &mut out)?;
        Ok(ChromeStream {
            out,
            layout: Layout::new(tables),
            tables,
            first: true,
            flows_seen: 0,
        })
    }

    /// Writes the spans, instants and counter samples of `batch` (a streamed import's batch:
    /// its args index its own args table), then takes them, their args and the batch's flows
    /// out of it (the flows are written from the tables at [`ChromeStream::finish`]), so the
    /// second pass holds one batch.
    pub fn batch(&mut self, batch: &mut Trace) -> io::Result<()> {
        let written = self.write_batch(batch);
        batch.clear_events();
        self.flows_seen += batch.flows.len();
        batch.flows.clear();
        written
    }

    fn write_batch(&mut self, batch: &Trace) -> io::Result<()> {
        if batch.tracks.len() > self.tables.tracks.len()
            || batch.strings.len() > self.tables.strings.len()
        {
            return Err(changed_between_passes());
        }
        let mut events = Events {
            out: &mut self.out,
            first: self.first,
        };
        let written = write_events(
            &mut events,
            &self.layout,
            self.tables,
            batch,
            &Overlay::default(),
        );
        self.first = events.first;
        written
    }

    /// Writes the flows and the names, and closes the document. `last` is what the second
    /// pass's import returned: it must hold the tracks and names the first pass gave (and its
    /// flows, if it read them).
    pub fn finish(mut self, last: &Trace) -> io::Result<W> {
        let flows = self.flows_seen + last.flows.len();
        if last.tracks.len() != self.tables.tracks.len()
            || last.strings.len() != self.tables.strings.len()
            || (flows != 0 && flows != self.tables.flows.len())
        {
            return Err(changed_between_passes());
        }
        let mut events = Events {
            out: &mut self.out,
            first: self.first,
        };
        write_flows_and_names(
            &mut events,
            &self.layout,
            self.tables,
            &self.tables.flows,
            &Overlay::default(),
        )?;
        self.out.write_all(b"\n]}\n")?;
        self.out.into_inner().map_err(|e| e.into_error())
    }
}

impl<W: Write> std::fmt::Debug for ChromeStream<'_, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChromeStream")
            .field("tracks", &self.tables.tracks.len())
            .finish_non_exhaustive()
    }
}

fn changed_between_passes() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        "the input changed while it was read (its second reading holds other tracks or names \
         than its first)",
    )
}

/// Writes the spans, instants and counter samples of `events` (their args from `events`),
/// their names from `names`' strings (the same trace, or the tables of a streamed import).
fn write_events<W: Write>(
    out: &mut Events<'_, W>,
    layout: &Layout,
    names: &Trace,
    events: &Trace,
    overlay: &Overlay,
) -> io::Result<()> {
    for (index, span) in events.spans.iter().enumerate() {
        let (pid, tid) = layout.place(span.track.0);
        let mark = (!overlay.marked.is_empty() && overlay.marked.contains(&SpanId(index as u32)))
            .then_some(overlay.mark.as_str());
        let w = out.next()?;
        w.write_all(b"{\"ph\":\"X\",\"cat\":")?;
        json_str(w, names.str(span.category))?;
        w.write_all(b",\"name\":")?;
        json_str(w, names.str(span.name))?;
        write!(w, ",\"pid\":{pid},\"tid\":{tid},\"ts\":")?;
        write_us(w, span.start)?;
        w.write_all(b",\"dur\":")?;
        write_us(w, span.duration())?;
        w.write_all(b",\"args\":")?;
        write_args(
            w,
            events,
            span.args,
            span.level,
            (span.correlation.get(), span.external_id.get()),
            mark,
        )?;
        w.write_all(b"}")?;
    }
    for instant in &events.instants {
        let (pid, tid) = layout.place(instant.track.0);
        let w = out.next()?;
        w.write_all(b"{\"ph\":\"i\",\"s\":\"t\",\"cat\":")?;
        json_str(w, names.str(instant.category))?;
        w.write_all(b",\"name\":")?;
        json_str(w, names.str(instant.name))?;
        write!(w, ",\"pid\":{pid},\"tid\":{tid},\"ts\":")?;
        write_us(w, instant.ts)?;
        w.write_all(b",\"args\":")?;
        write_args(w, events, instant.args, instant.level, (None, None), None)?;
        w.write_all(b"}")?;
    }
    for sample in &events.counters {
        let (pid, _) = layout.place(sample.track.0);
        let w = out.next()?;
        w.write_all(b"{\"ph\":\"C\",\"name\":")?;
        json_str(w, &layout.counter_name[sample.track.0 as usize])?;
        write!(w, ",\"pid\":{pid},\"ts\":")?;
        write_us(w, sample.ts)?;
        w.write_all(b",\"args\":{\"value\":")?;
        serde_json::to_writer(&mut *w, &sample.value)?;
        w.write_all(b"}}")?;
    }
    Ok(())
}

/// Writes `flows` (names from `names`' strings), the overlay's arrows, then the `M` names.
fn write_flows_and_names<W: Write>(
    events: &mut Events<'_, W>,
    layout: &Layout,
    names: &Trace,
    flows: &[strato_trace::Flow],
    overlay: &Overlay,
) -> io::Result<()> {
    // Flow ids are kept when they identify flows uniquely (one file, one rank); otherwise
    // (ranks reuse correlation ids) every flow is numbered afresh.
    let mut seen = FxHashSet::default();
    let unique = flows.iter().all(|f| seen.insert((f.category, f.id)));
    for (i, flow) in flows.iter().enumerate() {
        let id = if unique { flow.id } else { i as u64 + 1 };
        for (phase, end) in [("s", &flow.from), ("f", &flow.to)] {
            let Some(end) = end else { continue };
            let (pid, tid) = layout.place(end.track.0);
            let w = events.next()?;
            write!(
                w,
                "{{\"ph\":\"{phase}\",\"id\":{id},\"pid\":{pid},\"tid\":{tid},\"ts\":"
            )?;
            write_us(w, end.ts)?;
            w.write_all(b",\"cat\":")?;
            json_str(w, names.str(flow.category))?;
            w.write_all(b",\"name\":")?;
            json_str(w, names.str(flow.category))?;
            if phase == "f" {
                w.write_all(b",\"bp\":\"e\"")?;
            }
            w.write_all(b"}")?;
        }
    }
    let first_id = if unique {
        flows.iter().map(|f| f.id).max().unwrap_or(0) + 1
    } else {
        flows.len() as u64 + 1
    };
    for (next_id, arrow) in (first_id..).zip(&overlay.arrows) {
        for (phase, (track, ts)) in [("s", arrow.from), ("f", arrow.to)] {
            let (pid, tid) = layout.place(track.0);
            let w = events.next()?;
            write!(
                w,
                "{{\"ph\":\"{phase}\",\"id\":{next_id},\"pid\":{pid},\"tid\":{tid},\"ts\":"
            )?;
            write_us(w, ts)?;
            w.write_all(b",\"cat\":")?;
            json_str(w, &arrow.category)?;
            w.write_all(b",\"name\":")?;
            json_str(w, &arrow.name)?;
            if phase == "f" {
                w.write_all(b",\"bp\":\"e\"")?;
            }
            w.write_all(b",\"args\":{")?;
            for (i, (key, value)) in arrow.args.iter().enumerate() {
                if i > 0 {
                    w.write_all(b",")?;
                }
                json_str(w, key)?;
                write!(w, ":{value}")?;
            }
            w.write_all(b"}}")?;
        }
    }
    // Names last, as Kineto writes them.
    layout.metadata(names, events)
}

/// Top-level keys before `traceEvents` (streaming readers see them first).
fn header(trace: &Trace, w: &mut impl Write) -> io::Result<()> {
    w.write_all(b"{\"schemaVersion\":1,\"displayTimeUnit\":\"ns\",\"otherData\":{")?;
    write!(
        w,
        "\"exporter\":\"stratoscope {}\",\"ranks\":[",
        env!("CARGO_PKG_VERSION")
    )?;
    for (i, rank) in trace.ranks.iter().enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        w.write_all(b"{\"rank\":")?;
        serde_json::to_writer(&mut *w, &rank.rank)?;
        w.write_all(b",\"world_size\":")?;
        serde_json::to_writer(&mut *w, &rank.world_size)?;
        w.write_all(b",\"source\":")?;
        json_str(w, &rank.source)?;
        w.write_all(b",\"format\":")?;
        json_str(w, rank.format.as_str())?;
        if let Some(host) = &rank.host {
            w.write_all(b",\"host\":")?;
            json_str(w, host)?;
        }
        if !rank.metadata.is_none() {
            w.write_all(b",\"metadata\":")?;
            serde_json::to_writer(&mut *w, &rank.metadata)?;
        }
        w.write_all(b"}")?;
    }
    w.write_all(b"]}")?;
    if let [rank] = trace.ranks.as_slice() {
        if let Some(r) = rank.rank {
            write!(w, ",\"distributedInfo\":{{\"rank\":{r}")?;
            if let Some(ws) = rank.world_size {
                write!(w, ",\"world_size\":{ws}")?;
            }
            w.write_all(b"}")?;
        }
        if !trace.devices.is_empty() {
            w.write_all(b",\"deviceProperties\":[")?;
            for (i, d) in trace.devices.iter().enumerate() {
                if i > 0 {
                    w.write_all(b",")?;
                }
                write!(w, "{{\"id\":{}", d.index)?;
                if let Some(name) = &d.name {
                    w.write_all(b",\"name\":")?;
                    json_str(w, name)?;
                }
                for (key, value) in [
                    ("totalGlobalMem", d.total_memory_bytes),
                    ("computeMajor", d.compute_major),
                    ("computeMinor", d.compute_minor),
                    ("numSms", d.sm_count),
                    ("clockRate", d.clock_rate_khz),
                ] {
                    if let Some(v) = value {
                        write!(w, ",\"{key}\":{v}")?;
                    }
                }
                w.write_all(b"}")?;
            }
            w.write_all(b"]")?;
        }
    }
    w.write_all(b",\"traceEvents\":[\n")
}

/// Writes the comma between events.
struct Events<'a, W: Write> {
    out: &'a mut W,
    first: bool,
}

impl<W: Write> Events<'_, W> {
    fn next(&mut self) -> io::Result<&mut W> {
        if self.first {
            self.first = false;
        } else {
            self.out.write_all(b",\n")?;
        }
        Ok(&mut *self.out)
    }
}

/// A Chrome process: what it stands for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum ProcessKey {
    Device(RankId, i64),
    Cpu(RankId, i64),
    Counters(RankId),
    Custom(RankId, String),
}

/// Pid/tid of every model track, and the names to declare.
struct Layout {
    /// Per model track: (pid, tid).
    place: Vec<(i64, i64)>,
    /// Per model track: counter name (`C` events), empty for other kinds.
    counter_name: Vec<String>,
    /// Processes in pid order: (pid, key).
    processes: Vec<(i64, ProcessKey)>,
}

impl Layout {
    fn new(trace: &Trace) -> Self {
        let key_of = |rank: RankId, kind: &TrackKind| match kind {
            TrackKind::Thread { pid, .. } => ProcessKey::Cpu(rank, *pid),
            TrackKind::DeviceQueue { device, .. } => ProcessKey::Device(rank, *device),
            TrackKind::Counter { pid: Some(pid), .. } => ProcessKey::Cpu(rank, *pid),
            TrackKind::Counter {
                device: Some(device),
                ..
            } => ProcessKey::Device(rank, *device),
            TrackKind::Counter { .. } => ProcessKey::Counters(rank),
            TrackKind::Custom { group, .. } => ProcessKey::Custom(rank, group.clone()),
        };
        // Every process, devices first so they keep `pid = device index` like Kineto.
        let mut keys: Vec<ProcessKey> = Vec::new();
        let mut known: FxHashSet<ProcessKey> = FxHashSet::default();
        let cpu = trace
            .processes
            .iter()
            .map(|p| ProcessKey::Cpu(p.rank, p.pid));
        for key in trace
            .tracks
            .iter()
            .map(|t| key_of(t.rank, &t.kind))
            .chain(cpu)
        {
            if known.insert(key.clone()) {
                keys.push(key);
            }
        }
        keys.sort_by_key(|k| match k {
            ProcessKey::Device(..) => 0,
            ProcessKey::Cpu(..) => 1,
            _ => 2,
        });
        let preferred = |k: &ProcessKey| match k {
            ProcessKey::Device(_, d) => Some(*d),
            ProcessKey::Cpu(_, p) => Some(*p),
            _ => None,
        };
        let mut next_free = keys.iter().filter_map(preferred).max().unwrap_or(0).max(0) + 1;
        let mut taken: FxHashSet<i64> = FxHashSet::default();
        let mut pid_of: FxHashMap<ProcessKey, i64> = FxHashMap::default();
        for key in &keys {
            let pid = match preferred(key) {
                Some(p) if !taken.contains(&p) => p,
                _ => {
                    while taken.contains(&next_free) {
                        next_free += 1;
                    }
                    next_free
                }
            };
            taken.insert(pid);
            pid_of.insert(key.clone(), pid);
        }
        let mut custom_tids: FxHashMap<ProcessKey, i64> = FxHashMap::default();
        let mut place = Vec::with_capacity(trace.tracks.len());
        let mut counter_name = Vec::with_capacity(trace.tracks.len());
        for t in &trace.tracks {
            let key = key_of(t.rank, &t.kind);
            let pid = pid_of.get(&key).copied().unwrap_or(0);
            let tid = match &t.kind {
                TrackKind::Thread { tid, .. } => *tid,
                TrackKind::DeviceQueue { queue, .. } => *queue,
                TrackKind::Counter { .. } => 0,
                TrackKind::Custom { .. } => {
                    let n = custom_tids.entry(key).or_insert(0);
                    *n += 1;
                    *n
                }
            };
            place.push((pid, tid));
            counter_name.push(match &t.kind {
                TrackKind::Counter { name, .. } => t.name.clone().unwrap_or_else(|| name.clone()),
                _ => String::new(),
            });
        }
        let mut processes: Vec<(i64, ProcessKey)> =
            pid_of.into_iter().map(|(k, pid)| (pid, k)).collect();
        processes.sort_by_key(|(pid, _)| *pid);
        Layout {
            place,
            counter_name,
            processes,
        }
    }

    fn place(&self, track: u32) -> (i64, i64) {
        self.place.get(track as usize).copied().unwrap_or((0, 0))
    }

    /// `M` events: process names/labels, thread names and sort indices.
    fn metadata<W: Write>(&self, trace: &Trace, events: &mut Events<'_, W>) -> io::Result<()> {
        let multi_rank = trace.ranks.len() > 1;
        let suffix = |rank: &RankId| -> String {
            if multi_rank {
                let number = trace
                    .ranks
                    .get(rank.0 as usize)
                    .and_then(|r| r.rank)
                    .unwrap_or(i64::from(rank.0));
                format!(" [rank {number}]")
            } else {
                String::new()
            }
        };
        for (pid, key) in &self.processes {
            let mut labels = None;
            let name = match key {
                ProcessKey::Device(rank, d) => {
                    format!("{}{}", super::device_label(trace, *rank, *d), suffix(rank))
                }
                ProcessKey::Cpu(rank, p) => {
                    let process = trace
                        .processes
                        .iter()
                        .find(|x| x.rank == *rank && x.pid == *p);
                    labels = process.and_then(|x| x.labels.clone());
                    let given = process.and_then(|x| x.name.clone());
                    match given {
                        Some(n) if *pid == *p => format!("{n}{}", suffix(rank)),
                        Some(n) => format!("{n} (pid {p}){}", suffix(rank)),
                        None => format!("process {p}{}", suffix(rank)),
                    }
                }
                ProcessKey::Counters(rank) => format!("counters{}", suffix(rank)),
                ProcessKey::Custom(rank, group) => format!("{group}{}", suffix(rank)),
            };
            let w = events.next()?;
            write!(
                w,
                "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{pid},\"tid\":0,\"args\":{{\"name\":"
            )?;
            json_str(w, &name)?;
            w.write_all(b"}}")?;
            if let Some(labels) = labels {
                let w = events.next()?;
                write!(
                    w,
                    "{{\"ph\":\"M\",\"name\":\"process_labels\",\"pid\":{pid},\"tid\":0,\"args\":{{\"labels\":"
                )?;
                json_str(w, &labels)?;
                w.write_all(b"}}")?;
            }
        }
        let mut named: BTreeSet<(i64, i64)> = BTreeSet::new();
        for (i, t) in trace.tracks.iter().enumerate() {
            let (pid, tid) = self.place[i];
            let name = match (&t.kind, &t.name) {
                (TrackKind::Counter { .. }, _) => continue,
                (_, Some(name)) => name.clone(),
                (TrackKind::DeviceQueue { queue, .. }, None) => format!("stream {queue}"),
                (TrackKind::Custom { name, .. }, None) => name.clone(),
                (TrackKind::Thread { .. }, None) => continue,
            };
            if !named.insert((pid, tid)) {
                continue;
            }
            let w = events.next()?;
            write!(
                w,
                "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"name\":"
            )?;
            json_str(w, &name)?;
            w.write_all(b"}}")?;
            if let Some(sort) = t.sort_index {
                let w = events.next()?;
                write!(
                    w,
                    "{{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"sort_index\":{sort}}}}}"
                )?;
            }
        }
        Ok(())
    }
}

fn json_str(w: &mut impl Write, text: &str) -> io::Result<()> {
    serde_json::to_writer(w, text).map_err(io::Error::from)
}

/// Writes `ns` nanoseconds as microseconds with exactly 3 decimals, without going through
/// floating point: `12345678901234567` -> `12345678901234.567`, `-1` -> `-0.001`.
pub fn write_us(w: &mut impl Write, ns: Ns) -> io::Result<()> {
    let sign = if ns < 0 { "-" } else { "" };
    let abs = ns.unsigned_abs();
    write!(w, "{sign}{}.{:03}", abs / 1000, abs % 1000)
}

/// The span's args object with `correlation`, `External id` and `level` added where the
/// object does not already have them, and `<mark>: 1` when marked by an overlay.
fn write_args(
    w: &mut impl Write,
    trace: &Trace,
    args: Option<ArgsId>,
    level: Level,
    (correlation, external_id): (Option<u64>, Option<u64>),
    mark: Option<&str>,
) -> io::Result<()> {
    let blob = trace.args_text(args);
    let text = blob.as_deref().map(str::trim);
    let keys = text.map(serde_json::from_str::<FxHashMap<String, IgnoredAny>>);
    let mut empty = true;
    let present: FxHashMap<String, IgnoredAny> = match (text, keys) {
        (Some(text), Some(Ok(keys))) if text.ends_with('}') => {
            w.write_all(&text.as_bytes()[..text.len() - 1])?;
            empty = keys.is_empty();
            keys
        }
        (Some(text), _) => {
            // Not a JSON object: keep it as a string.
            w.write_all(b"{\"args_text\":")?;
            json_str(w, text)?;
            empty = false;
            FxHashMap::default()
        }
        (None, _) => {
            w.write_all(b"{")?;
            FxHashMap::default()
        }
    };
    let mut comma = |w: &mut dyn Write| -> io::Result<()> {
        if !std::mem::replace(&mut empty, false) {
            w.write_all(b",")?;
        }
        Ok(())
    };
    if let Some(c) = correlation {
        if !present.contains_key("correlation") {
            comma(w)?;
            write!(w, "\"correlation\":{c}")?;
        }
    }
    if let Some(e) = external_id {
        if !present.contains_key("External id") {
            comma(w)?;
            write!(w, "\"External id\":{e}")?;
        }
    }
    if !present.contains_key("level") {
        comma(w)?;
        write!(w, "\"level\":\"{}\"", level.as_str())?;
    }
    if let Some(mark) = mark {
        if !present.contains_key(mark) {
            comma(w)?;
            json_str(w, mark)?;
            w.write_all(b":1")?;
        }
    }
    w.write_all(b"}")
}

#[cfg(test)]
mod overlay_tests {
    use super::*;
    use strato_trace::testing::TraceBuilder;

    #[test]
    fn overlay_marks_spans_and_adds_arrows_that_import_back() {
        let mut b = TraceBuilder::new();
        let cpu = b.thread(1, 1);
        let gpu = b.queue(0, 7);
        let launch = b
            .span(cpu, Level::AcceleratorApi, "cudaLaunchKernel", 10, 20)
            .args(r#"{"correlation":1}"#)
            .id();
        let kernel = b.span(gpu, Level::DeviceKernel, "gemm", 30, 90).id();
        b.span(cpu, Level::Backend, "aten::add", 0, 100);
        let trace = b.build();
        let overlay = Overlay {
            mark: "critical".into(),
            marked: [launch, kernel].into_iter().collect(),
            arrows: vec![OverlayArrow {
                from: (cpu, 10),
                to: (gpu, 30),
                name: "critical_path".into(),
                category: "critical_path_launch".into(),
                args: vec![("weight_ns".into(), 20)],
            }],
        };
        let mut bytes = Vec::new();
        write_overlaid(&trace, &overlay, &mut bytes).unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        let events = doc["traceEvents"].as_array().unwrap();
        let critical: Vec<&str> = events
            .iter()
            .filter(|e| e["ph"] == "X" && e["args"]["critical"] == 1)
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        assert_eq!(critical, vec!["cudaLaunchKernel", "gemm"]);
        let flows: Vec<&serde_json::Value> = events
            .iter()
            .filter(|e| e["cat"] == "critical_path_launch")
            .collect();
        assert_eq!(flows.len(), 2);
        assert_eq!(flows[0]["ph"], "s");
        assert_eq!(flows[1]["ph"], "f");
        assert_eq!(flows[0]["id"], flows[1]["id"]);
        assert_eq!(flows[1]["args"]["weight_ns"], 20);
        // Without an overlay nothing is marked.
        let mut plain = Vec::new();
        write(&trace, &mut plain).unwrap();
        assert!(!String::from_utf8(plain).unwrap().contains("critical"));
    }
}
