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

use std::borrow::Cow;
use std::path::Path;

use rustc_hash::{FxHashMap, FxHashSet};
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use strato_trace::{
    checked_end, checked_time, parse_decimal_to_ns, ClockInfo, CounterSample, Device, Flow,
    FlowEnd, ImportNotes, Instant, Level, MemoryTracker, Ns, Process, Rank, RankId, SourceFormat,
    Span, SpanId, StrId, TimeParseError, Trace, TrackId, TrackIndexHandle, TrackKind,
};

use crate::input::Input;
use crate::json_lenient::{self, Fields, Key, LooseStr};
use crate::json_split::{Splitter, TopLevel};
use crate::{Error, ErrorKind, ImportOptions, Result};

/// Categories that belong on a device queue whatever their pid says.
const DEVICE_CATEGORIES: &[&str] = &[
    "kernel",
    "gpu_memcpy",
    "gpu_memset",
    "gpu_user_annotation",
    "cuda_sync",
    "Kernel",
    "Memcpy",
    "Memset",
];

use strato_trace::projection::KINETO_HOST_CATEGORIES;

/// An event's launch correlation (`args.correlation`, or TensorFlow's `correlation_id`).
fn correlation_of(known: &KnownArgs<'_>) -> Option<u64> {
    known
        .correlation
        .as_ref()
        .or(known.correlation_id.as_ref())
        .and_then(Loose::as_i64)
        .map(|c| c as u64)
}

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

/// What the parsing entry counted: events, cut strings, salvage.
#[derive(Default)]
struct ParseCounts {
    /// Elements of `traceEvents` parsed.
    events: u64,
    /// Names/categories cut to [`MAX_STRING_BYTES`], and the bytes cut from them.
    truncated_strings: u64,
    truncated_string_bytes: u64,
    /// `args` objects replaced for passing [`MAX_ARGS_BYTES`].
    truncated_args: u64,
    /// Lone surrogates replaced by U+FFFD in decoded strings ([`crate::json_lenient`]).
    replaced_surrogates: u64,
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

/// Cuts `text` to [`MAX_STRING_BYTES`] at a character boundary, counting what was cut.
fn cap_string(text: &mut Option<Cow<'_, str>>, counts: &mut ParseCounts) {
    let Some(t) = text else { return };
    if t.len() <= MAX_STRING_BYTES {
        return;
    }
    let mut cut = MAX_STRING_BYTES;
    while !t.is_char_boundary(cut) {
        cut -= 1;
    }
    counts.truncated_strings += 1;
    counts.truncated_string_bytes += (t.len() - cut) as u64;
    match t {
        Cow::Borrowed(b) => *b = &b[..cut],
        Cow::Owned(o) => {
            o.truncate(cut);
            o.shrink_to_fit();
        }
    }
}

/// One event as written; strings borrow from the chunk unless they contain escapes. `A` is
/// how `args` is read: as raw text when attributes are kept, else straight into [`KnownArgs`]
/// so the args are scanned once.
///
/// Read by hand ([`EventVisitor`]), not derived: any grammatical value is accepted in any field
/// (see [`crate::json_lenient`]), and a duplicate key keeps its last value, as Python's `json`
/// does.
struct RawEvent<'a, A> {
    ph: Option<Cow<'a, str>>,
    name: Option<Cow<'a, str>>,
    cat: Option<Cow<'a, str>>,
    pid: Option<Loose>,
    tid: Option<Loose>,
    ts: Option<&'a RawValue>,
    dur: Option<&'a RawValue>,
    /// `id`, or the Chrome format's `id2` (`{"local": ..}` / `{"global": ..}`) by its text.
    id: Option<Loose>,
    args: Option<A>,
    /// Lone surrogates replaced in the strings decoded (see [`crate::json_lenient`]).
    replaced_surrogates: u32,
}

impl<A> Default for RawEvent<'_, A> {
    fn default() -> Self {
        RawEvent {
            ph: None,
            name: None,
            cat: None,
            pid: None,
            tid: None,
            ts: None,
            dur: None,
            id: None,
            args: None,
            replaced_surrogates: 0,
        }
    }
}

/// Takes a string field's text, counting the surrogates its decoding replaced.
fn text_of<'a>(value: Option<LooseStr<'a>>, replaced: &mut u32) -> Option<Cow<'a, str>> {
    value.map(|v| {
        *replaced += v.replaced;
        v.text
    })
}

impl<'de, A: Deserialize<'de>> Deserialize<'de> for RawEvent<'de, A> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        deserializer.deserialize_map(EventVisitor(std::marker::PhantomData))
    }
}

struct EventVisitor<A>(std::marker::PhantomData<A>);

impl<'de, A: Deserialize<'de>> Visitor<'de> for EventVisitor<A> {
    type Value = RawEvent<'de, A>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an event object")
    }

    fn visit_map<M: MapAccess<'de>>(
        self,
        mut map: M,
    ) -> std::result::Result<Self::Value, M::Error> {
        let mut ev = RawEvent::default();
        let mut id2 = None;
        let r = &mut ev.replaced_surrogates;
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match &*key.0 {
                b"ph" => ev.ph = text_of(map.next_value()?, r),
                b"name" => ev.name = text_of(map.next_value()?, r),
                b"cat" => ev.cat = text_of(map.next_value()?, r),
                b"pid" => ev.pid = map.next_value()?,
                b"tid" => ev.tid = map.next_value()?,
                b"ts" => ev.ts = map.next_value()?,
                b"dur" => ev.dur = map.next_value()?,
                b"id" => ev.id = map.next_value()?,
                b"id2" => id2 = map.next_value()?,
                b"args" => ev.args = map.next_value()?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        ev.id = ev.id.or(id2);
        Ok(ev)
    }
}

/// An event's fields as the handlers read them, whichever way `args` was parsed.
struct EventView<'e> {
    name: Option<&'e str>,
    cat: Option<&'e str>,
    pid: Option<&'e Loose>,
    tid: Option<&'e Loose>,
    ts: Option<&'e RawValue>,
    dur: Option<&'e RawValue>,
    id: Option<&'e Loose>,
    /// The args object's text, when attributes are kept.
    args: Option<&'e str>,
}

/// The `args` fields the importer itself needs; everything else stays in the JSON text. Read
/// by hand like [`RawEvent`]; `args` that is not an object has none of them.
#[derive(Default, Clone)]
struct KnownArgs<'a> {
    correlation: Option<Loose>,
    /// TensorFlow trace viewer's name for the launch correlation.
    correlation_id: Option<Loose>,
    /// `External id` (2021: `external id`).
    external_id: Option<Loose>,
    external_id_2021: Option<Loose>,
    device: Option<Loose>,
    stream: Option<Loose>,
    name: Option<Cow<'a, str>>,
    sort_index: Option<Loose>,
    labels: Option<Cow<'a, str>>,
    /// `Device Id` of a `[memory]` instant.
    memory_device: Option<Loose>,
    /// `Total Allocated` of a `[memory]` instant.
    total_allocated: Option<Loose>,
    /// TraceFuse's rank of an event of a merged multi-rank file (see [`Builder::fused_rank`]).
    rank: Option<Loose>,
    /// TensorFlow trace viewer's mark of an eager op: the trace viewer classification
    /// ([`crate::tf`]) reads it, so it survives args that are not kept ([`TF_EAGER_ARGS`]).
    is_eager: bool,
    /// Lone surrogates replaced in the strings decoded.
    replaced_surrogates: u32,
}

impl<'de> Deserialize<'de> for KnownArgs<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        deserializer.deserialize_any(KnownArgsVisitor)
    }
}

struct KnownArgsVisitor;

impl<'de> Visitor<'de> for KnownArgsVisitor {
    type Value = KnownArgs<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an args object")
    }

    fn visit_map<M: MapAccess<'de>>(
        self,
        mut map: M,
    ) -> std::result::Result<Self::Value, M::Error> {
        let mut a = KnownArgs::default();
        let r = &mut a.replaced_surrogates;
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match &*key.0 {
                b"correlation" => a.correlation = map.next_value()?,
                b"correlation_id" => a.correlation_id = map.next_value()?,
                b"External id" => a.external_id = map.next_value()?,
                b"external id" => a.external_id_2021 = map.next_value()?,
                b"device" => a.device = map.next_value()?,
                b"stream" => a.stream = map.next_value()?,
                b"name" => a.name = text_of(map.next_value()?, r),
                b"sort_index" => a.sort_index = map.next_value()?,
                b"labels" => a.labels = text_of(map.next_value()?, r),
                b"Device Id" => a.memory_device = map.next_value()?,
                b"Total Allocated" => a.total_allocated = map.next_value()?,
                b"rank" => a.rank = map.next_value()?,
                b"is_eager" => {
                    map.next_value::<IgnoredAny>()?;
                    a.is_eager = true;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(a)
    }

    // `args` that is not an object (an array, a string, a number, a literal) carries none of
    // the fields read here; its text is still kept verbatim when args are kept.
    fn visit_seq<S: de::SeqAccess<'de>>(
        self,
        mut seq: S,
    ) -> std::result::Result<Self::Value, S::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(KnownArgs::default())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> std::result::Result<Self::Value, E> {
        Ok(KnownArgs::default())
    }
    fn visit_bytes<E: de::Error>(self, _: &[u8]) -> std::result::Result<Self::Value, E> {
        Ok(KnownArgs::default())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> std::result::Result<Self::Value, E> {
        Ok(KnownArgs::default())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> std::result::Result<Self::Value, E> {
        Ok(KnownArgs::default())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> std::result::Result<Self::Value, E> {
        Ok(KnownArgs::default())
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> std::result::Result<Self::Value, E> {
        Ok(KnownArgs::default())
    }
    fn visit_unit<E: de::Error>(self) -> std::result::Result<Self::Value, E> {
        Ok(KnownArgs::default())
    }
}

/// The args an event marked `is_eager` keeps when its own args are not kept: the one field the
/// trace viewer classification reads from args (the others it reads are kept as correlations).
/// Without it an import with args off classified eager TensorFlow ops as host code, so
/// `breakdown`/`kernels` on the JSON disagreed with the same commands on its stored profile.
const TF_EAGER_ARGS: &str = r#"{"is_eager":true}"#;

/// A JSON value read leniently where a number or a name is expected: integers, floats (of any
/// size: `1e400` is infinite, never an error), or text: a string's value (`"stream 7"` gives 7
/// as an integer), or the text of any other value as written (an array or object `id`).
#[derive(Debug, Clone, PartialEq)]
enum Loose {
    Int(i64),
    Float(f64),
    Text(String),
}

impl Loose {
    fn as_i64(&self) -> Option<i64> {
        match self {
            Loose::Int(v) => Some(*v),
            Loose::Float(v) if v.fract() == 0.0 && v.abs() < 9.0e18 => Some(*v as i64),
            Loose::Float(_) => None,
            Loose::Text(t) => parse_int_text(t),
        }
    }

    /// A device or stream index: an integer, or text ending in one after a name and a `:`,
    /// space or `#` (`"cuda:0"`, `"GPU 1"`, `"hip:2"`, `"stream 7"`, `"stream#7"`).
    fn as_index(&self) -> Option<i64> {
        self.as_i64().or_else(|| match self {
            Loose::Text(t) => {
                let t = t.trim();
                let cut = t.rfind([':', ' ', '#'])?;
                let (name, number) = (&t[..cut], &t[cut + 1..]);
                let named = name
                    .chars()
                    .all(|c| c.is_ascii_alphabetic() || "/_: ".contains(c));
                if named && !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()) {
                    number.parse().ok()
                } else {
                    None
                }
            }
            _ => None,
        })
    }

    fn as_f64(&self) -> Option<f64> {
        match self {
            Loose::Int(v) => Some(*v as f64),
            Loose::Float(v) => Some(*v),
            Loose::Text(t) => t.trim().parse().ok(),
        }
    }

    fn text(&self) -> String {
        match self {
            Loose::Int(v) => v.to_string(),
            Loose::Float(v) => v.to_string(),
            Loose::Text(t) => t.clone(),
        }
    }

    /// Reads one JSON value's raw text (grammatical).
    fn from_raw(raw: &str) -> Loose {
        match json_lenient::trim_json(raw) {
            "true" => Loose::Int(1),
            "false" => Loose::Int(0),
            "null" => Loose::Text(String::new()),
            t => match json_lenient::number(t) {
                Some(Ok(v)) => Loose::Int(v),
                Some(Err(v)) => Loose::Float(v),
                None => {
                    let text = LooseStr::from_raw(t);
                    json_lenient::note_replaced(text.replaced);
                    Loose::Text(text.text.into_owned())
                }
            },
        }
    }
}

fn parse_int_text(text: &str) -> Option<i64> {
    let t = text.trim();
    t.parse::<i64>().ok().or_else(|| {
        t.strip_prefix("stream ")
            .and_then(|n| n.trim().parse().ok())
    })
}

impl<'de> Deserialize<'de> for Loose {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        if json_lenient::is_lenient() {
            // Through the raw text: no number is out of range, no value of the wrong type.
            let raw = <&'de RawValue>::deserialize(deserializer)?;
            return Ok(Loose::from_raw(raw.get()));
        }
        // Fast: scalars serde can hold (an array, an object or a number beyond f64 fails the
        // event, which is then read again leniently, see `json_lenient`).
        struct LooseVisitor;
        impl<'de> Visitor<'de> for LooseVisitor {
            type Value = Loose;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a number or a string")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<Loose, E> {
                Ok(Loose::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<Loose, E> {
                Ok(i64::try_from(v).map_or(Loose::Float(v as f64), Loose::Int))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<Loose, E> {
                Ok(Loose::Float(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Loose, E> {
                Ok(Loose::Text(v.to_owned()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> std::result::Result<Loose, E> {
                Ok(Loose::Int(i64::from(v)))
            }
            fn visit_unit<E: de::Error>(self) -> std::result::Result<Loose, E> {
                Ok(Loose::Text(String::new()))
            }
        }
        deserializer.deserialize_any(LooseVisitor)
    }
}

/// A `B` event waiting for its `E`: start, name, category and args text.
type OpenBegin = (Ns, StrId, CategoryInfo, Option<String>);

/// A flow end seen in the file, bound to a span after all spans are read (16 bytes: one is
/// kept per flow event until the end of the import, so it is kept compact).
struct PendingFlowEnd {
    /// Index in `Trace::flows`.
    flow: u32,
    /// [`FLOW_START`] for an `s` end, or-ed with where the end is: its index in
    /// `Builder::flow_places` while the file is read, its track once every span is read.
    place: u32,
    ts: Ns,
}

/// The bit of `PendingFlowEnd::place` that marks an `s` (start) end; places and track ids
/// stay below it (an import refuses more than 2^31 tracks long before).
const FLOW_START: u32 = 1 << 31;
/// Import-note count: events of a merged multi-rank file whose `args.rank` names another rank
/// than their pid (see `Builder::fused_rank`).
pub const MERGED_RANK_CONTRADICTED: &str = "merged_file_args_rank_contradicts_pid";

/// TraceFuse adds rank x this to every pid of a merged file (see `Builder::fused_rank`).
const FUSED_PID_STRIDE: i64 = 100_000_000;

impl PendingFlowEnd {
    fn is_start(&self) -> bool {
        self.place & FLOW_START != 0
    }
    fn place(&self) -> u32 {
        self.place & !FLOW_START
    }
}

/// Per-category facts, computed once per distinct category.
#[derive(Clone, Copy)]
struct CategoryInfo {
    id: StrId,
    level: Level,
    on_device: bool,
    /// No level rule names the category (and it is not a device category): its events are
    /// [`Level::Other`], and those that look like device work are counted
    /// ([`strato_trace::UNCLASSIFIED_DEVICE_PREFIX`]).
    unrecognised: bool,
}

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
            metadata_json: None,
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

    fn device_properties(&mut self, text: &str) {
        let Some(p) = Fields::parse(text) else {
            return;
        };
        let int = |key| p.get(key).and_then(|v| Loose::from_raw(v).as_i64());
        let Some(index) = int("id") else {
            return;
        };
        let name = p.get("name").map(|raw| {
            let name = LooseStr::from_raw(raw);
            self.parse.replaced_surrogates += u64::from(name.replaced);
            name.text.into_owned()
        });
        self.trace.devices.push(Device {
            rank: Some(self.rank),
            index,
            name,
            sm_count: int("numSms"),
            total_memory_bytes: int("totalGlobalMem"),
            compute_major: int("computeMajor"),
            compute_minor: int("computeMinor"),
            clock_rate_khz: None,
            memory_bandwidth_bytes_per_s: None,
            extra_json: Some(text.to_owned()),
        });
    }

    fn category(&mut self, cat: &str) -> CategoryInfo {
        if let Some(info) = self.categories.get(cat) {
            return *info;
        }
        let map = &self.options.level_map;
        let ruled = map
            .level(SourceFormat::Kineto.as_str(), cat)
            .or_else(|| map.level(SourceFormat::Chrome.as_str(), cat));
        let level = ruled.unwrap_or(Level::Other);
        let on_device = DEVICE_CATEGORIES.contains(&cat) || level.is_device_op();
        if [
            "cpu_op",
            "cuda_runtime",
            "kernel",
            "Operator",
            "Runtime",
            "Kernel",
        ]
        .contains(&cat)
        {
            self.kineto = true;
        }
        let info = CategoryInfo {
            id: self.trace.intern(cat),
            level,
            on_device,
            unrecognised: ruled.is_none() && !on_device && !cat.is_empty(),
        };
        self.categories.insert(cat.to_owned(), info);
        info
    }

    fn thread_track(&mut self, pid: i64, tid: i64) -> TrackId {
        if let Some(&id) = self.thread_cache.get(&(pid, tid)) {
            return id;
        }
        let id = self
            .trace
            .track_for(&mut self.tracks, self.rank, TrackKind::Thread { pid, tid });
        self.thread_cache.insert((pid, tid), id);
        id
    }

    /// The track for an event's pid/tid (not a device category).
    fn host_track(&mut self, pid: Option<&Loose>, tid: Option<&Loose>) -> TrackId {
        let p = pid.and_then(Loose::as_i64);
        let t = tid.and_then(Loose::as_i64);
        match (p, t) {
            (Some(p), Some(t)) => self.thread_track(p, t),
            (Some(p), None) if tid.is_none() => self.thread_track(p, 0),
            _ => {
                let group = pid.map(Loose::text).unwrap_or_default();
                let name = tid.map(Loose::text).unwrap_or_default();
                self.trace.track_for(
                    &mut self.tracks,
                    self.rank,
                    TrackKind::Custom { group, name },
                )
            }
        }
    }

    /// Several ranks in one file (TraceLens's TraceFuse): an event's pid is its raw pid +
    /// rank x 1e8 and its args carry `rank`. Makes `self.rank` the rank of an event with `pid`:
    /// pid >= 1e8 whose quotient is the event's `args.rank` (or a rank already seen) -> that
    /// rank, created on first sight (job rank = the quotient, world size and format as the
    /// file's); any other pid -> the file's first rank (rank 0 keeps its raw pids). Linux pids
    /// stay below 2^22, so single-rank files never switch. Pids are kept as written (unique per
    /// rank).
    fn fused_rank(&mut self, pid: Option<&Loose>, args_rank: Option<&Loose>) {
        const STRIDE: i64 = FUSED_PID_STRIDE;
        let quotient = pid.and_then(Loose::as_i64).map_or(0, |p| p / STRIDE);
        let target = if quotient >= 1 {
            match self.fused_ranks.get(&quotient) {
                Some(&r) => r,
                None if args_rank.and_then(Loose::as_i64) == Some(quotient) => {
                    let base = &self.trace.ranks[0];
                    let rank = Rank {
                        rank: Some(quotient),
                        world_size: base.world_size,
                        source: format!("{} (rank {quotient})", self.path.display()),
                        format: if self.kineto {
                            SourceFormat::Kineto
                        } else {
                            SourceFormat::Chrome
                        },
                        host: None,
                        metadata_json: None,
                        notes: Default::default(),
                    };
                    self.trace.ranks[0].rank.get_or_insert(0);
                    let id = self.trace.add_rank(rank);
                    self.fused_ranks.insert(quotient, id);
                    id
                }
                None => RankId(0),
            }
        } else {
            RankId(0)
        };
        // In a merged file, an event whose `args.rank` names another rank than its pid does is
        // kept on its pid's rank and counted there (the file contradicts itself).
        let claimed = args_rank.and_then(Loose::as_i64);
        if let Some(claimed) = claimed {
            let merged = quotient >= 1 || !self.fused_ranks.is_empty();
            let rank = &mut self.trace.ranks[target.0 as usize];
            if merged && rank.rank.unwrap_or(0) != claimed {
                rank.notes.count(MERGED_RANK_CONTRADICTED, 1);
            }
        }
        self.rank = target;
    }

    /// The rank a pid as written belongs to and the pid the rank's own trace had: a merged
    /// file's pid >= 1e8 of a rank seen -> (that rank, pid - rank x 1e8); else (the file's
    /// first rank, pid).
    fn pid_rank(&self, pid: i64) -> (RankId, i64) {
        match self.fused_ranks.get(&(pid / FUSED_PID_STRIDE)) {
            Some(&rank) if pid >= FUSED_PID_STRIDE => (rank, pid % FUSED_PID_STRIDE),
            _ => (RankId(0), pid),
        }
    }

    /// The device-queue track a (pid, tid) as written names (Kineto writes a GPU's stream
    /// events at pid = device, tid = stream; a merged file's pid has the rank x 1e8 added).
    fn known_device_track(&self, pid: i64, tid: i64) -> Option<TrackId> {
        let (rank, device) = self.pid_rank(pid);
        self.device_cache.get(&(rank, device, tid)).copied()
    }

    fn device_track(&mut self, device: i64, queue: i64) -> TrackId {
        if let Some(&id) = self.device_cache.get(&(self.rank, device, queue)) {
            return id;
        }
        let kind = TrackKind::DeviceQueue { device, queue };
        let id = self.trace.track_for(&mut self.tracks, self.rank, kind);
        self.device_cache.insert((self.rank, device, queue), id);
        id
    }

    /// The track an event at (pid, tid) refers to once every event is read: an existing thread
    /// track, else the device queue (pid = device, tid = stream) when one exists, else a new
    /// thread track. Used for flow ends and `thread_name` metadata, which Kineto also writes for
    /// GPU streams.
    fn existing_track(&mut self, pid: Option<&Loose>, tid: Option<&Loose>) -> TrackId {
        let p = pid.and_then(Loose::as_i64);
        let t = tid.and_then(Loose::as_i64);
        if let (Some(p), Some(t)) = (p, t) {
            if let Some(&id) = self.thread_cache.get(&(p, t)) {
                return id;
            }
            if let Some(id) = self.known_device_track(p, t) {
                return id;
            }
        }
        self.host_track(pid, tid)
    }

    /// The import notes of this file's rank.
    fn notes(&mut self) -> &mut ImportNotes {
        &mut self.trace.ranks[self.rank.0 as usize].notes
    }

    /// An error about one event (named, with its byte offset), for times that cannot be used.
    fn event_err(
        &mut self,
        ev: &EventView<'_>,
        offset: u64,
        what: impl std::fmt::Display,
    ) -> Error {
        let kind = ErrorKind::Invalid(format!(
            "event {:?} at byte {offset}: {what}",
            ev.name.unwrap_or("")
        ));
        self.fatal(kind)
    }

    /// Keeps `kind` as the error that stops the import (see `fatal`) and returns it too.
    fn fatal(&mut self, kind: ErrorKind) -> Error {
        let text = kind.to_string();
        self.fatal = Some(Error::new(self.path, kind));
        Error::new(self.path, ErrorKind::Invalid(text))
    }

    /// The event's `ts`: required, and in the valid time range.
    fn event_ts(&mut self, ev: &EventView<'_>, offset: u64) -> Result<Ns> {
        self.notes().events_read += 1;
        let ts = match self.time(ev.ts) {
            Ok(Some(ts)) => ts,
            Ok(None) => return Err(self.event_err(ev, offset, "no \"ts\"")),
            Err(e) => return Err(self.event_err(ev, offset, format!("bad timestamp: {e}"))),
        };
        checked_time(i128::from(ts)).map_err(|e| self.event_err(ev, offset, e))
    }

    /// Stops the import when what it keeps would pass the memory budget.
    fn check_memory(&mut self) -> Result<()> {
        match self.memory.check(&self.trace) {
            Ok(()) => Ok(()),
            Err(e) => Err(self.fatal(ErrorKind::MemoryBudget {
                limit_bytes: e.limit_bytes,
            })),
        }
    }

    /// A `ts` or `dur` field in ns: `None` when absent or `null`.
    fn time(&self, raw: Option<&RawValue>) -> std::result::Result<Option<Ns>, TimeParseError> {
        let Some(raw) = raw else { return Ok(None) };
        let text = raw.get();
        let text = text
            .strip_prefix('"')
            .and_then(|t| t.strip_suffix('"'))
            .unwrap_or(text);
        if text == "null" {
            return Ok(None);
        }
        parse_decimal_to_ns(text, 1000).map(Some)
    }

    /// Parses one event: from the front of the window read so far when `!complete` (`None`
    /// when it cannot, for whatever reason: the splitter then finds the event's end and calls
    /// again), or exactly `bytes` when `complete` (an error is then the event's own).
    fn event(
        &mut self,
        bytes: &[u8],
        offset: u64,
        complete: bool,
    ) -> std::result::Result<Option<usize>, String> {
        let read = |b: &mut Self| {
            if b.options.keep_args {
                b.event_with_raw_args(bytes, offset, complete)
            } else {
                b.event_lean(bytes, offset, complete)
            }
        };
        // A parse error (not a semantic one, which is `fatal`) comes before any effect of the
        // event: the fast reading refused a value, or the window cut the event. Read the whole
        // event again leniently (see `json_lenient`); only then is an error the event's own.
        let parsed = match read(self) {
            Err(_) if self.fatal.is_none() && !complete => Ok(None),
            Err(_) if self.fatal.is_none() => {
                let lenient = json_lenient::lenient();
                let read = read(self);
                // Surrogates replaced in pid / tid / id, which `Loose` cannot count itself.
                self.parse.replaced_surrogates += u64::from(lenient.take_replaced());
                read
            }
            other => other,
        };
        let parsed = match parsed {
            Ok(Some(used)) => {
                self.parse.events += 1;
                self.hand_over_when_full().map(|()| Some(used))
            }
            other => other,
        };
        parsed.map_err(|e| match e.kind {
            ErrorKind::Json { message, .. } => message,
            other => other.to_string(),
        })
    }

    /// Hands the events to the sink (streaming import) once a batch is held.
    fn hand_over_when_full(&mut self) -> Result<()> {
        let held = self.trace.spans.len() + self.trace.instants.len() + self.trace.counters.len();
        if self.sink.is_some() && held >= self.batch_events {
            self.hand_over()?;
        }
        Ok(())
    }

    /// Hands every event held to the sink, keeping what binding flows needs of the spans.
    fn hand_over(&mut self) -> Result<()> {
        let Some(sink) = self.sink.as_mut() else {
            return Ok(());
        };
        let places_flows = self.options.projection.flows && self.options.projection.flow_ends;
        if places_flows {
            self.handed_spans.keep(&self.trace.spans);
        }
        // Placed flows are still being filled in (by index): the sink does not see them.
        let held_flows = if places_flows {
            std::mem::take(&mut self.trace.flows)
        } else {
            Vec::new()
        };
        let outcome = sink(&mut self.trace);
        if places_flows {
            self.trace.flows = held_flows;
        }
        if let Err(message) = outcome {
            return Err(self.fatal(ErrorKind::Output(message)));
        }
        Ok(())
    }

    /// Parses one event of type `E`: all of `bytes` when `complete` (else an error), or from
    /// the front of `bytes` when not (`Ok(None)` on any failure: the event may be cut off).
    fn parse_front<'a, E: Deserialize<'a>>(
        &self,
        bytes: &'a [u8],
        offset: u64,
        complete: bool,
    ) -> Result<Option<(E, usize)>> {
        if complete {
            return serde_json::from_slice::<E>(bytes)
                .map(|ev| Some((ev, bytes.len())))
                .map_err(|e| self.err(offset, format!("bad event: {e}")));
        }
        let mut stream = serde_json::Deserializer::from_slice(bytes).into_iter::<E>();
        match stream.next() {
            Some(Ok(ev)) => Ok(Some((ev, stream.byte_offset()))),
            _ => Ok(None),
        }
    }

    fn event_with_raw_args(
        &mut self,
        bytes: &[u8],
        offset: u64,
        complete: bool,
    ) -> Result<Option<usize>> {
        let Some((mut ev, used)) =
            self.parse_front::<RawEvent<'_, &RawValue>>(bytes, offset, complete)?
        else {
            return Ok(None);
        };
        // Args that are not an object carry no field the importer reads (and a bare number
        // in them may be one serde cannot hold).
        let mut known: KnownArgs<'_> = match ev.args {
            Some(raw) if raw.get().starts_with('{') => serde_json::from_str(raw.get())
                .map_err(|e| self.err(offset, format!("bad args: {e}")))?,
            _ => KnownArgs::default(),
        };
        self.parse.replaced_surrogates +=
            u64::from(ev.replaced_surrogates + known.replaced_surrogates);
        cap_string(&mut ev.name, &mut self.parse);
        cap_string(&mut ev.cat, &mut self.parse);
        cap_string(&mut known.name, &mut self.parse);
        let replaced;
        let raw_args = match ev.args.map(RawValue::get) {
            Some(text) if text.len() > MAX_ARGS_BYTES => {
                self.parse.truncated_args += 1;
                replaced = format!("{{\"strato_truncated_args_bytes\":{}}}", text.len());
                Some(replaced.as_str())
            }
            other => other,
        };
        self.event_inner(&ev, raw_args, &known, offset)?;
        Ok(Some(used))
    }

    fn event_lean(&mut self, bytes: &[u8], offset: u64, complete: bool) -> Result<Option<usize>> {
        let parsed = match self.parse_front::<RawEvent<'_, KnownArgs<'_>>>(bytes, offset, complete)
        {
            // The one grammatical event the lenient reading refuses here: `args` a bare number
            // serde cannot hold (`1e400`). The raw-args reading never refuses one.
            Err(_) if complete && json_lenient::is_lenient() => {
                return self.event_with_raw_args(bytes, offset, true)
            }
            other => other?,
        };
        let Some((mut ev, used)) = parsed else {
            return Ok(None);
        };
        if ev.ph.as_deref() == Some("C") {
            // Counter values are arbitrary keys of args: read this event again with its text.
            return self
                .event_with_raw_args(&bytes[..used], offset, true)
                .map(|_| Some(used));
        }
        self.parse.replaced_surrogates += u64::from(ev.replaced_surrogates);
        cap_string(&mut ev.name, &mut self.parse);
        cap_string(&mut ev.cat, &mut self.parse);
        if let Some(args) = ev.args.as_mut() {
            self.parse.replaced_surrogates += u64::from(args.replaced_surrogates);
            cap_string(&mut args.name, &mut self.parse);
        }
        let default = KnownArgs::default();
        let known = ev.args.as_ref().unwrap_or(&default);
        self.event_inner(&ev, None, known, offset)?;
        Ok(Some(used))
    }

    fn event_inner<A>(
        &mut self,
        raw: &RawEvent<'_, A>,
        raw_args: Option<&str>,
        known: &KnownArgs<'_>,
        offset: u64,
    ) -> Result<()> {
        let Some(ph) = raw.ph.as_deref() else {
            return Ok(());
        };
        self.fused_rank(raw.pid.as_ref(), known.rank.as_ref());
        let ev = EventView {
            name: raw.name.as_deref(),
            cat: raw.cat.as_deref(),
            pid: raw.pid.as_ref(),
            tid: raw.tid.as_ref(),
            ts: raw.ts,
            dur: raw.dur,
            id: raw.id.as_ref(),
            args: raw_args,
        };
        match ph {
            "X" | "B" | "E" => self.span_event(ph, &ev, known, offset),
            "i" | "I" | "n" => self.instant_event(&ev, known, offset),
            "C" => self.counter_event(&ev, offset),
            "s" | "f" => self.flow_event(ph, &ev, offset),
            // A step is where one leg of a flow arrives and the next leaves: `s` -> `t` -> `f`
            // under one id is kept as its legs, `s` -> `t` and `t` -> `f`, each complete.
            "t" => {
                self.flow_event("f", &ev, offset)?;
                self.flow_event("s", &ev, offset)
            }
            "M" => {
                self.metadata_event(&ev, known);
                Ok(())
            }
            // Async (b/e), object (N/O/D), sample (P) and other phases are not modelled yet.
            _ => Ok(()),
        }
    }

    /// Stores the event's args when the options keep them: all, or with
    /// [`crate::ArgsScope::DeviceOps`] only those of device categories, with
    /// [`crate::ArgsScope::Dependencies`] those the dependency analyses read (the event's category
    /// was registered by [`Builder::category`] before this is called). An event whose args are
    /// not kept but mark it `is_eager` keeps [`TF_EAGER_ARGS`].
    fn args_id(
        &mut self,
        ev: &EventView<'_>,
        known: &KnownArgs<'_>,
    ) -> Option<strato_trace::ArgsId> {
        let category = || self.categories.get(ev.cat.unwrap_or(""));
        let on_device = || category().is_some_and(|c| c.on_device);
        let kept = self.options.keep_args
            && match self.options.args_scope {
                crate::ArgsScope::All => true,
                crate::ArgsScope::DeviceOps => on_device(),
                crate::ArgsScope::Dependencies => category().is_some_and(|c| {
                    strato_trace::args_of::dependency_args(
                        c.level,
                        c.on_device,
                        ev.name.unwrap_or(""),
                    )
                }),
            };
        match ev.args {
            Some(raw) if kept => Some(self.trace.add_args(raw)),
            _ if known.is_eager => Some(self.trace.add_args(TF_EAGER_ARGS)),
            _ => None,
        }
    }

    fn span_event(
        &mut self,
        ph: &str,
        ev: &EventView<'_>,
        known: &KnownArgs<'_>,
        offset: u64,
    ) -> Result<()> {
        let cat = self.category(ev.cat.unwrap_or(""));
        let track = if cat.on_device {
            // `args.device`/`args.stream` when they hold an index (`0`, `"0"`, `"cuda:0"`,
            // `"stream 7"`), else pid/tid: an unreadable arg never moves a kernel off its queue.
            let index = |arg: Option<&Loose>, fallback: Option<&Loose>| {
                arg.and_then(Loose::as_index)
                    .or_else(|| fallback.and_then(Loose::as_i64))
            };
            let device = index(known.device.as_ref(), ev.pid);
            let queue = index(known.stream.as_ref(), ev.tid);
            match (device, queue) {
                (Some(d), Some(q)) => self.device_track(d, q),
                _ => self.host_track(ev.pid, ev.tid),
            }
        } else if let Some((device, queue)) = self.device_like(ev, cat, known) {
            // Device work under a category no rule names (another accelerator's, a newer
            // profiler's): kept on its device queue as `Other`, and counted by category so
            // that no analysis reports the device idle without saying so.
            let name = strato_trace::unclassified_device_count_name(ev.cat.unwrap_or_default());
            self.notes().count(&name, 1);
            self.device_track(device, queue)
        } else {
            self.host_track(ev.pid, ev.tid)
        };
        let ts = self.event_ts(ev, offset)?;
        self.check_memory()?;
        let projected = self.options.projection.spans != crate::SpanProjection::All;
        if ph == "X" && projected {
            // Decided before the name is interned: a span left out costs nothing. Its times
            // are still checked below.
            let correlation = correlation_of(known);
            if !self.keeps_span(ev, cat, correlation) {
                return self.checked_span_times(ev, ts, offset).map(|_| ());
            }
        }
        let name = self.trace.intern(ev.name.unwrap_or(""));
        match ph {
            "B" => {
                let args = ev.args.map(str::to_owned);
                self.open_begins
                    .entry(track)
                    .or_default()
                    .push((ts, name, cat, args));
                return Ok(());
            }
            "E" => {
                let Some((start, name, cat, args)) =
                    self.open_begins.get_mut(&track).and_then(Vec::pop)
                else {
                    self.notes().count("unmatched_end_events", 1);
                    return Ok(());
                };
                let args = if self.options.keep_args {
                    args.map(|a| self.trace.add_args(&a))
                } else {
                    None
                };
                if ts < start {
                    self.notes().count("clamped_negative_durations", 1);
                }
                if projected && !self.keeps_span_named(self.trace.str(name), cat, None) {
                    return Ok(());
                }
                self.trace.spans.push(Span {
                    track,
                    start,
                    end: ts.max(start),
                    name,
                    category: cat.id,
                    level: cat.level,
                    correlation: None,
                    external_id: None,
                    args,
                });
                return Ok(());
            }
            _ => {}
        }
        let end = self.checked_span_times(ev, ts, offset)?;
        let correlation = correlation_of(known);
        let external_id = known
            .external_id
            .as_ref()
            .or(known.external_id_2021.as_ref())
            .and_then(Loose::as_i64)
            .map(|c| c as u64);
        let args = self.args_id(ev, known);
        self.trace.spans.push(Span {
            track,
            start: ts,
            end,
            name,
            category: cat.id,
            level: cat.level,
            correlation,
            external_id,
            args,
        });
        Ok(())
    }

    /// Where an event of an unrecognised category that looks like device work belongs:
    /// `(device, queue)` when its args name a `stream` (Kineto writes one only on device-side
    /// activity; the device is `args.device`, else the pid) or its pid/tid is already a device
    /// queue of this file (Kineto writes a device's events at pid = device, tid = stream).
    /// `None` for a recognised category or an event that does not look like device work.
    fn device_like(
        &self,
        ev: &EventView<'_>,
        cat: CategoryInfo,
        known: &KnownArgs<'_>,
    ) -> Option<(i64, i64)> {
        if !cat.unrecognised {
            return None;
        }
        let pid = ev.pid.and_then(Loose::as_i64);
        let tid = ev.tid.and_then(Loose::as_i64);
        if let Some(queue) = known.stream.as_ref().and_then(Loose::as_index) {
            let device = known.device.as_ref().and_then(Loose::as_index).or(pid)?;
            return Some((device, queue));
        }
        let (pid, tid) = (pid?, tid?);
        self.known_device_track(pid, tid)?;
        Some((self.pid_rank(pid).1, tid))
    }

    /// The end of an `X` event (`ts + dur`), checked, with a missing `dur` read as 0 and a
    /// negative one clamped to 0 (both counted).
    fn checked_span_times(&mut self, ev: &EventView<'_>, ts: Ns, offset: u64) -> Result<Ns> {
        let mut dur = match self.time(ev.dur) {
            Ok(Some(dur)) => dur,
            Err(e) => return Err(self.event_err(ev, offset, format!("bad dur: {e}"))),
            Ok(None) => {
                self.notes().count("missing_durations_read_as_0", 1);
                0
            }
        };
        if dur < 0 {
            dur = 0;
            self.notes().count("clamped_negative_durations", 1);
        }
        checked_end(ts, dur).map_err(|e| self.event_err(ev, offset, format!("end (ts + dur): {e}")))
    }

    /// Whether [`crate::ImportOptions::projection`] keeps this span.
    fn keeps_span(&self, ev: &EventView<'_>, cat: CategoryInfo, correlation: Option<u64>) -> bool {
        self.keeps_span_named(ev.name.unwrap_or(""), cat, correlation)
    }

    fn keeps_span_named(&self, name: &str, cat: CategoryInfo, correlation: Option<u64>) -> bool {
        match self.options.projection.spans {
            crate::SpanProjection::All => true,
            crate::SpanProjection::DeviceAndLaunches => {
                cat.on_device
                    || correlation.is_some()
                    || name.starts_with("ProfilerStep#")
                    || !KINETO_HOST_CATEGORIES.contains(&self.trace.str(cat.id))
            }
        }
    }

    fn instant_event(
        &mut self,
        ev: &EventView<'_>,
        known: &KnownArgs<'_>,
        offset: u64,
    ) -> Result<()> {
        let cat = self.category(ev.cat.unwrap_or(""));
        let track = self.host_track(ev.pid, ev.tid);
        let ts = self.event_ts(ev, offset)?;
        self.check_memory()?;
        let name_text = ev.name.unwrap_or("");
        if name_text == "[memory]" {
            if let (Some(device), Some(total)) = (
                known.memory_device.as_ref().and_then(Loose::as_i64),
                known.total_allocated.as_ref().and_then(Loose::as_f64),
            ) {
                let pid = ev.pid.and_then(Loose::as_i64).unwrap_or(0);
                let counter = self.memory_counter(pid, device);
                if self.options.projection.counters {
                    self.trace.counters.push(CounterSample {
                        track: counter,
                        ts,
                        value: total,
                    });
                }
            }
        }
        if !self.options.projection.instants {
            return Ok(());
        }
        let name = self.trace.intern(name_text);
        let args = self.args_id(ev, known);
        self.trace.instants.push(Instant {
            track,
            ts,
            name,
            category: cat.id,
            level: cat.level,
            args,
        });
        Ok(())
    }

    fn memory_counter(&mut self, pid: i64, device: i64) -> TrackId {
        if let Some(&id) = self.memory_tracks.get(&(pid, device)) {
            return id;
        }
        let kind = TrackKind::Counter {
            pid: Some(pid),
            device: Some(device),
            name: "memory allocated".into(),
            unit: "bytes".into(),
        };
        let id = self.trace.track_for(&mut self.tracks, self.rank, kind);
        self.memory_tracks.insert((pid, device), id);
        id
    }

    fn counter_event(&mut self, ev: &EventView<'_>, offset: u64) -> Result<()> {
        let ts = self.event_ts(ev, offset)?;
        self.check_memory()?;
        let Some(raw) = ev.args else { return Ok(()) };
        // One series per numeric key, in key order (a duplicate key's last value); args that
        // are not an object hold none. A number beyond f64 (`1e400`, which Python reads as
        // infinity) is no sample: dropped and counted.
        let (fields, replaced) = Fields::parse(raw)
            .map(Fields::into_sorted)
            .unwrap_or_default();
        self.parse.replaced_surrogates += u64::from(replaced);
        let values: Vec<(String, f64)> = fields
            .into_iter()
            .filter_map(|(key, value)| {
                json_lenient::number(value).map(|n| (key, n.map_or_else(|f| f, |i| i as f64)))
            })
            .collect();
        let base = ev.name.unwrap_or("counter").to_owned();
        let pid = ev.pid.and_then(Loose::as_i64);
        let single = values.len() == 1;
        for (key, value) in values {
            let name = if single {
                base.clone()
            } else {
                format!("{base}.{key}")
            };
            let kind = TrackKind::Counter {
                pid,
                device: None,
                name,
                unit: String::new(),
            };
            let track = self.trace.track_for(&mut self.tracks, self.rank, kind);
            if !value.is_finite() {
                self.notes().count("counter_values_out_of_range", 1);
                continue;
            }
            if !self.options.projection.counters {
                continue;
            }
            self.trace.counters.push(CounterSample { track, ts, value });
        }
        Ok(())
    }

    fn flow_event(&mut self, ph: &str, ev: &EventView<'_>, offset: u64) -> Result<()> {
        let cat = self.category(ev.cat.unwrap_or(""));
        let Some(id) = ev.id else {
            return Ok(());
        };
        let ts = self.event_ts(ev, offset)?;
        self.check_memory()?;
        let is_start = ph == "s";
        let place = match (
            ev.pid.and_then(Loose::as_i64),
            ev.tid.and_then(Loose::as_i64),
        ) {
            (Some(pid), Some(tid)) => match self.flow_place_ids.get(&(pid, tid)) {
                Some(&place) => place,
                None => {
                    let place = self.flow_places.len() as u32;
                    self.flow_place_ids.insert((pid, tid), place);
                    self.flow_places
                        .push((Some(Loose::Int(pid)), Some(Loose::Int(tid))));
                    place
                }
            },
            _ => {
                self.flow_places.push((ev.pid.cloned(), ev.tid.cloned()));
                (self.flow_places.len() - 1) as u32
            }
        };
        let projection = self.options.projection;
        if !projection.flows || !projection.flow_ends {
            if projection.flows {
                self.count_flow(cat.id, id, is_start, ts);
            }
            return Ok(());
        }
        let key_text = id.text();
        let numeric = id
            .as_i64()
            .map(|v| v as u64)
            .unwrap_or_else(|| hash_text(&key_text));
        let key = (cat.id, key_text);
        let existing = self.flows.get(&key).copied().filter(|&i| {
            let flow = &self.trace.flows[i];
            if is_start {
                flow.from.is_none()
            } else {
                flow.to.is_none()
            }
        });
        let index = match existing {
            Some(i) => i,
            None => {
                self.trace.flows.push(Flow {
                    id: numeric,
                    category: cat.id,
                    from: None,
                    to: None,
                });
                self.trace.flows.len() - 1
            }
        };
        // The track is resolved in `finish`, once every span's track exists.
        let end = Some(FlowEnd {
            track: TrackId(0),
            ts,
            span: None,
        });
        let flow = &mut self.trace.flows[index];
        if is_start {
            flow.from = end;
        } else {
            flow.to = end;
        }
        if flow.from.is_some() && flow.to.is_some() {
            // Complete: no later event can join it (see `Builder::flows`).
            if existing.is_some() {
                self.flows.remove(&key);
            }
        } else if existing.is_none() {
            self.flows.insert(key, index);
        }
        self.flow_ends.push(PendingFlowEnd {
            flow: index as u32,
            place: if is_start { place | FLOW_START } else { place },
            ts,
        });
        Ok(())
    }

    /// A flow event when flow ends are not placed ([`crate::Projection::flow_ends`] off): the
    /// same flows as [`Builder::flow_event`] makes (an end joins the open flow of its key when
    /// that end is still missing, else starts a new flow), held in `open_flows` until complete
    /// and then added to `Trace::flows`; a flow whose key a new flow takes can no longer
    /// complete and is added then.
    fn count_flow(&mut self, category: StrId, id: &Loose, is_start: bool, ts: Ns) {
        let key_text = id.text();
        let numeric = id
            .as_i64()
            .map(|v| v as u64)
            .unwrap_or_else(|| hash_text(&key_text));
        let end = Some(FlowEnd {
            track: TrackId(0),
            ts,
            span: None,
        });
        let key = (category, key_text);
        let joins = self.open_flows.get(&key).is_some_and(|flow| {
            if is_start {
                flow.from.is_none()
            } else {
                flow.to.is_none()
            }
        });
        if joins {
            let mut flow = self.open_flows.remove(&key).expect("checked above");
            if is_start {
                flow.from = end;
            } else {
                flow.to = end;
            }
            // Both ends now: a flow in `open_flows` had exactly one.
            self.trace.flows.push(flow);
            return;
        }
        let flow = Flow {
            id: numeric,
            category,
            from: if is_start { end.clone() } else { None },
            to: if is_start { None } else { end },
        };
        if let Some(stale) = self.open_flows.insert(key, flow) {
            self.trace.flows.push(stale);
        }
    }

    fn metadata_event(&mut self, ev: &EventView<'_>, known: &KnownArgs<'_>) {
        let pid = ev.pid.and_then(Loose::as_i64);
        match ev.name {
            Some("process_name") => {
                if let Some(pid) = pid {
                    self.process_names.entry(pid).or_default().0 =
                        known.name.as_deref().map(str::to_owned);
                }
            }
            Some("process_labels") => {
                if let Some(pid) = pid {
                    self.process_names.entry(pid).or_default().1 =
                        known.labels.as_deref().map(str::to_owned);
                }
            }
            Some("thread_name") | Some("thread_sort_index") => {
                let tid = ev.tid.and_then(Loose::as_i64);
                if let (Some(pid), Some(tid)) = (pid, tid) {
                    let name = known.name.as_deref().map(str::to_owned);
                    let sort = known.sort_index.as_ref().and_then(Loose::as_i64);
                    self.thread_names.push((pid, tid, name, sort));
                }
            }
            _ => {}
        }
    }

    fn finish(mut self) -> Result<Trace> {
        // The file's metadata belongs to its first rank (a merged file's may end on another).
        self.fused_rank(None, None);
        let rank = self.rank;
        if self.kineto {
            self.trace.ranks[rank.0 as usize].format = SourceFormat::Kineto;
        }
        if !self.metadata.is_empty() {
            let mut text = String::from("{");
            for (i, (key, value)) in self.metadata.iter().enumerate() {
                if i > 0 {
                    text.push(',');
                }
                text.push_str(&serde_json::to_string(key).unwrap_or_default());
                text.push(':');
                text.push_str(value);
            }
            text.push('}');
            self.trace.ranks[rank.0 as usize].metadata_json = Some(text);
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

fn hash_text(text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    text.hash(&mut h);
    h.finish()
}

/// Where binding flows looks a flow end up.
trait SpanIndex {
    /// The innermost span of `track` containing `ts`: of the spans sorted by start, then
    /// longer first, the last one starting at or before `ts` that has not ended before it,
    /// among the last 256 starting at or before `ts`. Equal spans are in the order an
    /// unstable sort of their indexes (in id order) leaves them: both indexes below sort the
    /// same `u32` lists by the same keys, so they agree with each other and with earlier
    /// versions.
    fn find(&self, track: TrackId, ts: Ns) -> Option<SpanId>;
}

/// [`SpanIndex::find`] over one track's sorted list.
fn find_in<T>(
    list: &[T],
    ts: Ns,
    start: impl Fn(&T) -> Ns,
    end_id: impl Fn(&T) -> (Ns, u32),
) -> Option<SpanId> {
    let after = list.partition_point(|x| start(x) <= ts);
    list[..after]
        .iter()
        .rev()
        .take(256)
        .map(&end_id)
        .find(|&(end, _)| end >= ts)
        .map(|(_, id)| SpanId(id))
}

/// The index of a trace's own spans (an import that keeps them): span ids by track.
struct HeldSpans<'a> {
    spans: &'a [Span],
    by_track: Vec<Vec<u32>>,
}

impl<'a> HeldSpans<'a> {
    fn new(spans: &'a [Span], tracks: usize) -> Self {
        let mut by_track: Vec<Vec<u32>> = vec![Vec::new(); tracks];
        for (i, span) in spans.iter().enumerate() {
            by_track[span.track.0 as usize].push(i as u32);
        }
        for list in &mut by_track {
            list.sort_unstable_by_key(|&i| {
                let s = &spans[i as usize];
                (s.start, std::cmp::Reverse(s.end))
            });
        }
        HeldSpans { spans, by_track }
    }
}

impl SpanIndex for HeldSpans<'_> {
    fn find(&self, track: TrackId, ts: Ns) -> Option<SpanId> {
        let spans = self.spans;
        find_in(
            &self.by_track[track.0 as usize],
            ts,
            |&i| spans[i as usize].start,
            |&i| (spans[i as usize].end, i),
        )
    }
}

/// The places of the spans a streaming import handed over, by track (16 bytes per span: the
/// spans themselves are gone).
#[derive(Default)]
struct HandedSpans {
    by_track: Vec<Vec<HandedSpan>>,
    count: u32,
    /// The ends of spans longer than `u32::MAX` ns, by span id.
    long_ends: FxHashMap<u32, Ns>,
}

#[derive(Clone, Copy)]
struct HandedSpan {
    start: Ns,
    id: u32,
    /// The duration, or `u32::MAX` when the end is in `HandedSpans::long_ends`.
    dur: u32,
}

impl HandedSpans {
    fn keep(&mut self, spans: &[Span]) {
        for span in spans {
            let id = self.count;
            self.count += 1;
            let dur = match u32::try_from(span.end.saturating_sub(span.start)) {
                Ok(d) if d < u32::MAX => d,
                _ => {
                    self.long_ends.insert(id, span.end);
                    u32::MAX
                }
            };
            let track = span.track.0 as usize;
            if self.by_track.len() <= track {
                self.by_track.resize_with(track + 1, Vec::new);
            }
            self.by_track[track].push(HandedSpan {
                start: span.start,
                id,
                dur,
            });
        }
    }

    fn end(&self, s: &HandedSpan) -> Ns {
        if s.dur == u32::MAX {
            self.long_ends[&s.id]
        } else {
            s.start + Ns::from(s.dur)
        }
    }

    /// Sorts each track's spans as [`HeldSpans`] does.
    fn sort(&mut self) {
        let mut by_track = std::mem::take(&mut self.by_track);
        for list in &mut by_track {
            // The permutation [`HeldSpans`] makes of this track's span ids (in id order, as
            // `list` is), applied in place: 4 bytes per span of one track at a time.
            let mut order: Vec<u32> = (0..list.len() as u32).collect();
            order.sort_unstable_by_key(|&i| {
                let s = &list[i as usize];
                (s.start, std::cmp::Reverse(self.end(s)))
            });
            permute(list, &mut order);
        }
        self.by_track = by_track;
    }
}

/// Rearranges `list` so that `list[k]` becomes the old `list[order[k]]` (`order` is a
/// permutation; it is used up).
fn permute<T: Copy>(list: &mut [T], order: &mut [u32]) {
    const DONE: u32 = u32::MAX;
    for start in 0..list.len() {
        if order[start] == DONE {
            continue;
        }
        let first = list[start];
        let mut at = start;
        loop {
            let from = order[at] as usize;
            order[at] = DONE;
            if from == start {
                list[at] = first;
                break;
            }
            list[at] = list[from];
            at = from;
        }
    }
}

impl SpanIndex for HandedSpans {
    fn find(&self, track: TrackId, ts: Ns) -> Option<SpanId> {
        let list = self.by_track.get(track.0 as usize)?;
        find_in(list, ts, |s| s.start, |s| (self.end(s), s.id))
    }
}

/// Binds each flow end to the innermost span containing its timestamp on its track
/// ([`SpanIndex::find`]). `ends` hold their tracks (see [`PendingFlowEnd::place`]).
fn bind_flows(trace: &mut Trace, spans: &impl SpanIndex, ends: &[PendingFlowEnd]) {
    for end in ends {
        let track = TrackId(end.place());
        let found = spans.find(track, end.ts);
        let flow = &mut trace.flows[end.flow as usize];
        let slot = if end.is_start() {
            &mut flow.from
        } else {
            &mut flow.to
        };
        if let Some(e) = slot {
            if e.ts == end.ts && e.track == track {
                e.span = found;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn import_text(text: &str) -> Result<Trace> {
        let input = Input::from_reader(Box::new(Cursor::new(text.as_bytes().to_vec())));
        import(Path::new("test.json"), input, &ImportOptions::default())
    }

    #[test]
    fn a_merged_file_whose_args_rank_contradicts_the_pid_is_counted() {
        // The third event's pid says rank 1, its args.rank says 0; the fourth's pid says rank
        // 0 (raw), its args.rank 1. Both stay on their pid's rank, counted there.
        let trace = import_text(
            r#"{"schemaVersion":1,"distributedInfo":{"rank":0,"world_size":2},"traceEvents":[
            {"ph":"X","cat":"cpu_op","name":"a","pid":10,"tid":11,"ts":100,"dur":10,"args":{"rank":0}},
            {"ph":"X","cat":"cpu_op","name":"b","pid":100000010,"tid":11,"ts":100,"dur":10,"args":{"rank":1}},
            {"ph":"X","cat":"cpu_op","name":"c","pid":100000010,"tid":11,"ts":120,"dur":10,"args":{"rank":0}},
            {"ph":"X","cat":"cpu_op","name":"d","pid":10,"tid":11,"ts":140,"dur":10,"args":{"rank":1}}
            ]}"#,
        )
        .unwrap();
        assert_eq!(trace.ranks.len(), 2);
        let counted: Vec<u64> = trace
            .ranks
            .iter()
            .map(|r| r.notes.get(MERGED_RANK_CONTRADICTED))
            .collect();
        assert_eq!(counted, vec![1, 1]);
        // A single-rank file whose events carry its own rank: nothing to count.
        let single = import_text(
            r#"{"schemaVersion":1,"distributedInfo":{"rank":3,"world_size":8},"traceEvents":[
            {"ph":"X","cat":"cpu_op","name":"a","pid":10,"tid":11,"ts":100,"dur":10,"args":{"rank":5}}
            ]}"#,
        )
        .unwrap();
        assert_eq!(single.ranks[0].notes.get(MERGED_RANK_CONTRADICTED), 0);
    }

    #[test]
    fn a_tracefuse_merged_file_is_split_into_its_ranks() {
        // Rank 0 keeps its raw pids; rank 1's are + 1e8 with args.rank. Both use GPU 0 stream 7.
        let trace = import_text(
            r#"{"schemaVersion":1,"distributedInfo":{"rank":0,"world_size":2},"traceEvents":[
            {"ph":"X","cat":"cpu_op","name":"a","pid":10,"tid":11,"ts":100,"dur":10,"args":{"rank":0,"pid_raw":10}},
            {"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":106,"dur":2,"args":{"device":0,"stream":7,"rank":0,"pid_raw":0}},
            {"ph":"X","cat":"cpu_op","name":"b","pid":100000010,"tid":11,"ts":100,"dur":10,"args":{"rank":1,"pid_raw":10}},
            {"ph":"X","cat":"kernel","name":"k","pid":100000000,"tid":7,"ts":107,"dur":2,"args":{"device":0,"stream":7,"rank":1,"pid_raw":0}},
            {"ph":"X","cat":"kernel","name":"k2","pid":0,"tid":7,"ts":120,"dur":2,"args":{"device":0,"stream":7,"rank":0}}
            ]}"#,
        )
        .unwrap();
        trace.validate().unwrap();
        assert_eq!(trace.ranks.len(), 2);
        assert_eq!(
            (trace.ranks[0].rank, trace.ranks[1].rank),
            (Some(0), Some(1))
        );
        assert_eq!(trace.ranks[1].world_size, Some(2));
        let kernels_of = |r: u32| {
            trace
                .spans
                .iter()
                .filter(|s| {
                    let t = trace.track(s.track);
                    t.is_device() && t.rank == RankId(r)
                })
                .count()
        };
        assert_eq!((kernels_of(0), kernels_of(1)), (2, 1));
    }

    /// A merged file's processes belong to their ranks, and its device pids (Kineto names every
    /// GPU as a process "GPU N"; TraceFuse adds rank x 1e8) are devices, not processes; a flow
    /// end and a stream name at a fused device pid land on that rank's device queue (no empty
    /// thread track is made for them).
    #[test]
    fn a_merged_files_device_pids_are_not_processes() {
        let trace = import_text(
            r#"{"schemaVersion":1,"traceEvents":[
            {"ph":"M","name":"process_name","pid":10,"tid":0,"args":{"name":"python3","rank":0,"pid_raw":10}},
            {"ph":"M","name":"process_name","pid":0,"tid":0,"args":{"name":"python3","rank":0,"pid_raw":0}},
            {"ph":"M","name":"process_labels","pid":0,"tid":0,"args":{"labels":"GPU 0","rank":0,"pid_raw":0}},
            {"ph":"M","name":"process_name","pid":1,"tid":0,"args":{"name":"python3","rank":0,"pid_raw":1}},
            {"ph":"M","name":"process_labels","pid":1,"tid":0,"args":{"labels":"GPU 1","rank":0,"pid_raw":1}},
            {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":10,"tid":11,"ts":100,"dur":5,"args":{"rank":0,"pid_raw":10,"correlation":1}},
            {"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":106,"dur":2,"args":{"device":0,"stream":7,"rank":0,"pid_raw":0,"correlation":1}},
            {"ph":"M","name":"process_name","pid":100000010,"tid":0,"args":{"name":"python3","rank":1,"pid_raw":10}},
            {"ph":"M","name":"process_name","pid":100000001,"tid":0,"args":{"name":"python3","rank":1,"pid_raw":1}},
            {"ph":"M","name":"process_labels","pid":100000001,"tid":0,"args":{"labels":"GPU 1","rank":1,"pid_raw":1}},
            {"ph":"M","name":"thread_name","pid":100000001,"tid":7,"args":{"name":"stream 7","rank":1,"pid_raw":1}},
            {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":100000010,"tid":11,"ts":100,"dur":5,"args":{"rank":1,"pid_raw":10,"correlation":100000001}},
            {"ph":"s","id":100000001,"pid":100000010,"tid":11,"ts":100,"cat":"ac2g","name":"ac2g","args":{"rank":1}},
            {"ph":"X","cat":"kernel","name":"k","pid":100000001,"tid":7,"ts":107,"dur":2,"args":{"device":1,"stream":7,"rank":1,"pid_raw":1,"correlation":100000001}},
            {"ph":"f","id":100000001,"pid":100000001,"tid":7,"ts":107,"cat":"ac2g","name":"ac2g","bp":"e","args":{"rank":1}}
            ]}"#,
        )
        .unwrap();
        trace.validate().unwrap();
        assert_eq!(trace.ranks.len(), 2);
        let processes: Vec<(RankId, i64)> =
            trace.processes.iter().map(|p| (p.rank, p.pid)).collect();
        assert_eq!(processes, vec![(RankId(0), 10), (RankId(1), 100_000_010)]);
        // Only the two CPU threads and the two device queues: no track for a fused device pid.
        assert_eq!(trace.tracks.len(), 4, "{:?}", trace.tracks);
        let queue = trace
            .tracks
            .iter()
            .find(|t| t.rank == RankId(1) && t.is_device())
            .unwrap();
        assert_eq!(queue.name.as_deref(), Some("stream 7"));
        let flow = trace.flows.last().unwrap();
        let to = flow.to.as_ref().unwrap();
        assert!(trace.track(to.track).is_device());
        assert_eq!(trace.track(to.track).rank, RankId(1));
        let devices: Vec<(Option<RankId>, i64)> =
            trace.devices.iter().map(|d| (d.rank, d.index)).collect();
        assert!(devices.contains(&(Some(RankId(1)), 1)), "{devices:?}");
        assert!(!devices.contains(&(Some(RankId(0)), 1)), "{devices:?}");
    }

    #[test]
    fn a_merged_files_distributed_info_after_its_events_is_the_first_ranks() {
        // The last event is rank 1's; `distributedInfo` and `hostname` follow the events.
        let trace = import_text(
            r#"{"schemaVersion":1,"traceEvents":[
            {"ph":"X","cat":"cpu_op","name":"a","pid":10,"tid":11,"ts":100,"dur":10,"args":{"rank":0,"pid_raw":10}},
            {"ph":"X","cat":"cpu_op","name":"b","pid":100000010,"tid":11,"ts":100,"dur":10,"args":{"rank":1,"pid_raw":10}}
            ],"distributedInfo":{"rank":0,"world_size":2},"hostname":"node0"}"#,
        )
        .unwrap();
        trace.validate().unwrap();
        assert_eq!(trace.ranks.len(), 2);
        assert_eq!(
            (trace.ranks[0].rank, trace.ranks[1].rank),
            (Some(0), Some(1))
        );
        assert_eq!(
            (trace.ranks[0].world_size, trace.ranks[1].world_size),
            (Some(2), Some(2))
        );
        assert_eq!(trace.ranks[0].host.as_deref(), Some("node0"));
        assert_eq!(trace.ranks[1].host, None);
    }

    #[test]
    fn large_pids_without_a_matching_rank_arg_stay_one_rank() {
        let trace = import_text(
            r#"{"traceEvents":[
            {"ph":"X","cat":"cpu_op","name":"a","pid":300000001,"tid":1,"ts":100,"dur":10},
            {"ph":"X","cat":"cpu_op","name":"b","pid":100000001,"tid":1,"ts":100,"dur":10,"args":{"rank":7}}
            ]}"#,
        )
        .unwrap();
        assert_eq!(trace.ranks.len(), 1);
    }

    #[test]
    fn other_accelerators_device_events_are_classified_or_counted() {
        // MTIA's device events are kernels on their queue; an unknown category with a stream
        // arg, or at a known device queue's pid/tid, goes to that queue as `Other` and is
        // counted per category; host events of unknown categories and `python_function` on
        // pid 0 / tid 0 are neither.
        let trace = import_text(
            r#"{"schemaVersion":1,"traceEvents":[
            {"ph":"X","cat":"mtia_runtime","name":"runFunction","pid":10,"tid":11,"ts":1,"dur":1,"args":{"correlation":1}},
            {"ph":"X","cat":"mtia_ccp_events","name":"fc","pid":1,"tid":5,"ts":3,"dur":2,"args":{"device":1,"stream":5,"correlation":1}},
            {"ph":"X","cat":"npu_task","name":"n1","pid":1,"tid":5,"ts":6,"dur":2,"args":{"device":1,"stream":6}},
            {"ph":"X","cat":"npu_task","name":"n2","pid":1,"tid":5,"ts":9,"dur":2},
            {"ph":"X","cat":"my_host_thing","name":"h","pid":10,"tid":11,"ts":9,"dur":2},
            {"ph":"X","cat":"python_function","name":"forward","pid":0,"tid":0,"ts":0,"dur":30}
            ]}"#,
        )
        .unwrap();
        trace.validate().unwrap();
        let kind = |i: usize| trace.track(trace.spans[i].track).kind.clone();
        let queue = |device, queue| TrackKind::DeviceQueue { device, queue };
        assert_eq!(trace.spans[0].level, Level::AcceleratorApi);
        assert_eq!(trace.spans[1].level, Level::DeviceKernel);
        assert_eq!(kind(1), queue(1, 5));
        assert_eq!((trace.spans[2].level, kind(2)), (Level::Other, queue(1, 6)));
        assert_eq!((trace.spans[3].level, kind(3)), (Level::Other, queue(1, 5)));
        assert_eq!(kind(4), TrackKind::Thread { pid: 10, tid: 11 });
        assert_eq!(kind(5), TrackKind::Thread { pid: 0, tid: 0 });
        let notes = &trace.ranks[0].notes;
        assert_eq!(notes.unclassified_device_like(), vec![("npu_task", 2)]);
    }

    #[test]
    fn kineto_events_land_on_the_right_tracks() {
        let trace = import_text(
            r#"{"schemaVersion":1,"distributedInfo":{"rank":3,"world_size":8},"traceEvents":[
            {"ph":"X","cat":"cpu_op","name":"aten::mm","pid":10,"tid":11,"ts":100.5,"dur":10,"args":{"External id":4}},
            {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":10,"tid":11,"ts":102,"dur":3,"args":{"correlation":77,"External id":4}},
            {"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":106,"dur":20.001,"args":{"device":0,"stream":7,"correlation":77}},
            {"ph":"X","cat":"python_function","name":"forward","pid":0,"tid":0,"ts":99,"dur":30},
            {"ph":"s","id":77,"pid":10,"tid":11,"ts":102,"cat":"ac2g","name":"ac2g"},
            {"ph":"f","id":77,"pid":0,"tid":7,"ts":106,"cat":"ac2g","name":"ac2g","bp":"e"},
            {"ph":"f","id":99,"pid":10,"tid":11,"ts":103,"cat":"ac2g","name":"ac2g","bp":"e"},
            {"ph":"M","name":"thread_name","pid":10,"tid":11,"args":{"name":"main"}},
            {"ph":"M","name":"process_name","pid":10,"args":{"name":"python3"}},
            {"ph":"i","cat":"cpu_instant_event","name":"[memory]","pid":10,"tid":11,"ts":101,"args":{"Device Id":0,"Total Allocated":4096,"Bytes":512}}
            ]}"#,
        )
        .unwrap();
        trace.validate().unwrap();
        assert_eq!(trace.ranks[0].format, SourceFormat::Kineto);
        assert_eq!(trace.ranks[0].rank, Some(3));
        assert_eq!(trace.ranks[0].world_size, Some(8));
        assert_eq!(trace.spans.len(), 4);
        let kernel = &trace.spans[2];
        assert_eq!(
            trace.track(kernel.track).kind,
            TrackKind::DeviceQueue {
                device: 0,
                queue: 7
            }
        );
        assert_eq!((kernel.start, kernel.end), (106_000, 126_001));
        assert_eq!(kernel.level, Level::DeviceKernel);
        assert_eq!(kernel.correlation, Some(77));
        let python = &trace.spans[3];
        assert_eq!(
            trace.track(python.track).kind,
            TrackKind::Thread { pid: 0, tid: 0 }
        );
        assert_eq!(trace.spans[0].start, 100_500);
        assert_eq!(trace.spans[0].external_id, Some(4));
        assert_eq!(trace.flows.len(), 2);
        assert_eq!(trace.flows[0].from.as_ref().unwrap().span, Some(SpanId(1)));
        assert_eq!(trace.flows[0].to.as_ref().unwrap().span, Some(SpanId(2)));
        assert!(trace.flows[1].from.is_none());
        let main = trace
            .tracks
            .iter()
            .find(|t| t.name.as_deref() == Some("main"))
            .unwrap();
        assert_eq!(main.kind, TrackKind::Thread { pid: 10, tid: 11 });
        assert!(trace
            .processes
            .iter()
            .any(|p| p.pid == 10 && p.name.as_deref() == Some("python3")));
        assert_eq!(trace.counters.len(), 1);
        assert_eq!(trace.counters[0].value, 4096.0);
        assert_eq!(trace.instants.len(), 1);
    }

    #[test]
    fn schema_2021_string_tids_and_begin_end() {
        let trace = import_text(
            r#"[{"ph":"X","cat":"Kernel","name":"k","pid":0,"tid":"stream 7","ts":5,"dur":1,"args":{"correlation":1,"external id":2}},
                {"ph":"X","cat":"Operator","name":"op","pid":1,"tid":"1890023232","ts":1,"dur":9},
                {"ph":"B","name":"outer","pid":1,"tid":2,"ts":1},
                {"ph":"E","pid":1,"tid":2,"ts":4},
                {"ph":"E","pid":1,"tid":2,"ts":5},
                {"ph":"X","cat":"Trace","name":"PyTorch Profiler (0)","pid":"Spans","tid":"PyTorch Profiler","ts":0,"dur":-3}]"#,
        )
        .unwrap();
        assert_eq!(trace.spans.len(), 4);
        assert_eq!(
            trace.track(trace.spans[0].track).kind,
            TrackKind::DeviceQueue {
                device: 0,
                queue: 7
            }
        );
        assert_eq!(trace.spans[0].external_id, Some(2));
        assert_eq!(
            trace.track(trace.spans[1].track).kind,
            TrackKind::Thread {
                pid: 1,
                tid: 1_890_023_232
            }
        );
        assert_eq!((trace.spans[2].start, trace.spans[2].end), (1000, 4000));
        assert_eq!(
            trace.track(trace.spans[3].track).kind,
            TrackKind::Custom {
                group: "Spans".into(),
                name: "PyTorch Profiler".into()
            }
        );
        assert_eq!(trace.spans[3].duration(), 0);
        assert_eq!(trace.ranks[0].notes.get("unmatched_end_events"), 1);
    }

    #[test]
    fn missing_or_out_of_range_times_are_errors_naming_the_event() {
        let err = import_text(
            r#"{"traceEvents":[{"ph":"X","name":"gemm","cat":"kernel","pid":0,"tid":7,"dur":1}]}"#,
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("\"gemm\"") && text.contains("no \"ts\""),
            "{text}"
        );
        // 9.3e18 ns: beyond i64; 5e18 ns: an i64 but outside the valid range.
        for ts in ["9300000000000000", "5000000000000000"] {
            let doc = format!(r#"{{"traceEvents":[{{"ph":"i","name":"mark","ts":{ts}}}]}}"#);
            let text = import_text(&doc).unwrap_err().to_string();
            assert!(text.contains("mark"), "{text}");
        }
        // Each in range, but ts + dur is not.
        let doc = r#"{"traceEvents":[{"ph":"X","name":"long","ts":3999999999999999,"dur":3999999999999999}]}"#;
        let text = import_text(doc).unwrap_err().to_string();
        assert!(
            text.contains("\"long\"") && text.contains("valid range"),
            "{text}"
        );
        // Negative durations clamp and a missing dur reads as 0, both counted.
        let doc = r#"{"traceEvents":[{"ph":"X","name":"a","ts":1,"dur":-5},{"ph":"X","name":"b","ts":2}]}"#;
        let trace = import_text(doc).unwrap();
        let notes = &trace.ranks[0].notes;
        assert_eq!(notes.events_read, 2);
        assert_eq!(notes.get("clamped_negative_durations"), 1);
        assert_eq!(notes.get("missing_durations_read_as_0"), 1);
    }

    #[test]
    fn the_memory_budget_stops_the_import_with_an_error() {
        let mut doc = String::from(r#"{"traceEvents":["#);
        for i in 0..20_000 {
            if i > 0 {
                doc.push(',');
            }
            doc.push_str(&format!(r#"{{"ph":"X","name":"k{i}","ts":{i},"dur":1}}"#));
        }
        doc.push_str("]}");
        let run = |budget: u64| {
            let input = Input::from_reader(Box::new(Cursor::new(doc.clone().into_bytes())));
            let options = ImportOptions {
                memory_budget_bytes: budget,
                ..ImportOptions::default()
            };
            import(Path::new("t.json"), input, &options)
        };
        let err = run(1 << 20).unwrap_err();
        assert!(matches!(err.kind, ErrorKind::MemoryBudget { .. }), "{err}");
        assert_eq!(run(1 << 30).unwrap().spans.len(), 20_000);
    }

    #[test]
    fn errors_name_the_problem() {
        let err = import_text(r#"{"traceEvents":[{"ph":"X","ts":1,"dur":1},{"ph":"X","ts":"#)
            .unwrap_err();
        assert!(matches!(err.kind, ErrorKind::Json { .. }), "{err}");
        let err = import_text(r#"{"foo": 1}"#).unwrap_err();
        assert!(matches!(err.kind, ErrorKind::NotATrace(_)), "{err}");
        let err = import_text(r#"{"traceEvents":[{"ph":"X","ts":"abc"}]}"#).unwrap_err();
        assert!(err.to_string().contains("bad timestamp"), "{err}");
        let err = import_text(r#"{"traceEvents":[1,2]}"#).unwrap_err();
        assert!(matches!(err.kind, ErrorKind::Json { .. }), "{err}");
    }

    #[test]
    fn keep_args_off_keeps_correlations_but_no_blobs() {
        let input = Input::from_reader(Box::new(Cursor::new(
            br#"{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":1,"args":{"correlation":5,"stream":7,"device":0}}]}"#.to_vec(),
        )));
        let options = ImportOptions {
            keep_args: false,
            ..ImportOptions::default()
        };
        let trace = import(Path::new("t.json"), input, &options).unwrap();
        assert!(trace.args.is_empty());
        assert_eq!(trace.spans[0].correlation, Some(5));
    }
}
