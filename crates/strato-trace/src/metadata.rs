//! What a source says of itself besides its events: the rank's metadata and a device's extra
//! properties, as typed values.
//!
//! This module owns the shape of that metadata so that importers, the store, the exporters and
//! the analyses share one definition instead of passing JSON text between crates:
//! - [`SourceMetadata`]: a rank's metadata. A `strato` recording's is typed
//!   ([`RecordingMetadata`]: its recorded files, the collectors' figures, the calibration and
//!   the run stored beside it). Any other format's is kept as the source wrote it
//!   ([`JsonObject`]: keys in the source's order, values as the source's JSON text), since we do
//!   not model what Kineto, Nsight or XProf put there.
//! - [`JsonObject`] also holds a [`crate::Device`]'s properties beyond the typed ones.
//! - The metadata keys of `strato`'s own collectors ([`CPU_METADATA_KEY`], ...), defined once
//!   for the recorder that writes them and the importer and analyses that read them, with the
//!   typed view of each ([`ProcessCpu`], [`OsSummary`], [`CollectorCost`], [`SampleSummary`]).
//!
//! Rules: serialising a value gives the JSON the importers wrote before these types existed
//! (fields in alphabetical order, as a sorted JSON map gave them), so stored profiles and
//! exported files do not change. A recording's metadata that does not have the typed shape (a
//! profile stored by another version) is kept as a [`JsonObject`] rather than refused.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{DeserializeOwned, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::Value;

use crate::SourceFormat;

/// Metadata key of the CPU times a recording session writes when it stops, per process
/// ([`ProcessCpu`]).
pub const CPU_METADATA_KEY: &str = "strato.cpu";
/// Metadata key of the OS level's per-process figures ([`OsSummary`]).
pub const OS_METADATA_KEY: &str = "strato.os";
/// Metadata key of the OS collector's own cost, in the root process's OS file
/// ([`CollectorCost`]).
pub const OS_COLLECTOR_METADATA_KEY: &str = "strato.os.collector";
/// Metadata key of the CPU sampler's per-process figures ([`SampleSummary`]).
pub const SAMPLE_METADATA_KEY: &str = "strato.samples";
/// Metadata key of the CPU sampler's own cost, in the root process's samples file
/// ([`CollectorCost`]).
pub const SAMPLE_COLLECTOR_METADATA_KEY: &str = "strato.samples.collector";

/// A JSON object kept as written: its keys in order, each value as the source's JSON text
/// (numbers keep their digits). Equality compares keys and texts.
#[derive(Debug, Clone, Default)]
pub struct JsonObject(Vec<(String, Box<RawValue>)>);

impl JsonObject {
    /// Parses `text`, which must be one JSON object.
    pub fn parse(text: &str) -> Result<JsonObject, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// An object of `entries`, each a key and its value's JSON text (checked to be JSON).
    pub fn from_raw_entries(
        entries: impl IntoIterator<Item = (String, String)>,
    ) -> Result<JsonObject, serde_json::Error> {
        entries
            .into_iter()
            .map(|(k, v)| Ok((k, RawValue::from_string(v)?)))
            .collect::<Result<_, _>>()
            .map(JsonObject)
    }

    /// An object of a parsed map's entries, in the map's order.
    pub fn from_map(map: serde_json::Map<String, Value>) -> JsonObject {
        JsonObject(
            map.into_iter()
                .filter_map(|(k, v)| Some((k, serde_json::value::to_raw_value(&v).ok()?)))
                .collect(),
        )
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The keys and value texts, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.get()))
    }

    /// The JSON text of `key`'s value.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// `key`'s value read as `T`; None when absent or of another shape.
    pub fn get_as<T: DeserializeOwned>(&self, key: &str) -> Option<T> {
        serde_json::from_str(self.get(key)?).ok()
    }

    /// Sets `key` to `value`: in place when present, else last.
    pub fn insert(&mut self, key: &str, value: &impl Serialize) -> Result<(), serde_json::Error> {
        let raw = serde_json::value::to_raw_value(value)?;
        match self.0.iter_mut().find(|(k, _)| k == key) {
            Some((_, v)) => *v = raw,
            None => self.0.push((key.to_owned(), raw)),
        }
        Ok(())
    }

    /// The object's JSON text, `{"key":value,...}` without spaces between entries.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".into())
    }

    /// The object as a JSON value (keys sorted, as a [`serde_json::Map`] keeps them).
    pub fn to_value(&self) -> Value {
        serde_json::from_str(&self.to_json()).unwrap_or(Value::Null)
    }
}

impl PartialEq for JsonObject {
    fn eq(&self, other: &Self) -> bool {
        self.0.len() == other.0.len() && self.iter().eq(other.iter())
    }
}

impl Eq for JsonObject {}

impl Serialize for JsonObject {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for JsonObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjectVisitor;
        impl<'de> Visitor<'de> for ObjectVisitor {
            type Value = JsonObject;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<JsonObject, A::Error> {
                let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0));
                while let Some((k, v)) = map.next_entry::<String, Box<RawValue>>()? {
                    entries.push((k, v));
                }
                Ok(JsonObject(entries))
            }
        }
        deserializer.deserialize_map(ObjectVisitor)
    }
}

/// A rank's metadata: what its source says of itself besides the events.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum SourceMetadata {
    /// The source says nothing (or the format has no metadata).
    #[default]
    None,
    /// A `strato` recording's own account, typed.
    Recording(Box<RecordingMetadata>),
    /// Any other source's top-level metadata, as written.
    Source(JsonObject),
}

impl SourceMetadata {
    /// Reads metadata stored as JSON text for a rank of `format`: typed for a recording whose
    /// text has the recording's shape, kept as written otherwise. Err when `text` is not a
    /// JSON object.
    pub fn from_json(
        text: &str,
        format: SourceFormat,
    ) -> Result<SourceMetadata, serde_json::Error> {
        // Only an object is metadata (serde would also read a struct from a JSON array).
        if format == SourceFormat::Strato && text.trim_start().starts_with('{') {
            if let Ok(recording) = serde_json::from_str::<RecordingMetadata>(text) {
                return Ok(SourceMetadata::Recording(Box::new(recording)));
            }
        }
        JsonObject::parse(text).map(SourceMetadata::Source)
    }

    /// The metadata an importer built as a JSON value: an object is kept in its key order;
    /// anything else is no metadata.
    pub fn of_value(value: Value) -> SourceMetadata {
        match value {
            Value::Object(map) if !map.is_empty() => {
                SourceMetadata::Source(JsonObject::from_map(map))
            }
            _ => SourceMetadata::None,
        }
    }

    pub fn is_none(&self) -> bool {
        matches!(self, SourceMetadata::None)
    }

    /// The JSON text (None when there is no metadata): what the store keeps and the Chrome
    /// exporter writes.
    pub fn to_json(&self) -> Option<String> {
        match self {
            SourceMetadata::None => None,
            SourceMetadata::Recording(r) => serde_json::to_string(r).ok(),
            SourceMetadata::Source(o) => Some(o.to_json()),
        }
    }

    /// A recording's typed metadata; None for other sources.
    pub fn recording(&self) -> Option<&RecordingMetadata> {
        match self {
            SourceMetadata::Recording(r) => Some(r),
            _ => None,
        }
    }

    /// Records that an OS-level `perf` file was joined into this rank ([`PerfJoin`]).
    pub fn set_joined(&mut self, joined: PerfJoin) {
        match self {
            SourceMetadata::Recording(r) => r.joined = Some(joined),
            SourceMetadata::Source(o) => {
                let _ = o.insert("joined", &joined);
            }
            SourceMetadata::None => {
                let mut o = JsonObject::default();
                let _ = o.insert("joined", &joined);
                *self = SourceMetadata::Source(o);
            }
        }
    }
}

impl Serialize for SourceMetadata {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            SourceMetadata::None => serializer.serialize_none(),
            SourceMetadata::Recording(r) => r.serialize(serializer),
            SourceMetadata::Source(o) => o.serialize(serializer),
        }
    }
}

/// Read back without the rank's format: an object whose `format` is `"strato"` and that has
/// the recording's shape is a recording.
impl<'de> Deserialize<'de> for SourceMetadata {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let Some(object) = Option::<JsonObject>::deserialize(deserializer)? else {
            return Ok(SourceMetadata::None);
        };
        let format = if object.get("format") == Some("\"strato\"") {
            SourceFormat::Strato
        } else {
            SourceFormat::Chrome
        };
        SourceMetadata::from_json(&object.to_json(), format).map_err(serde::de::Error::custom)
    }
}

/// What a `perf` file joined into a rank added (`strato import --join-perf`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PerfJoin {
    pub events: u64,
    pub threads: u64,
}

/// A `strato` recording's metadata: its files, the collectors' figures of its root process and
/// what `strato record` stored beside the files. Fields are in alphabetical order (the order
/// of the JSON text).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordingMetadata {
    /// `calibration.json`, as `strato record --calibrate` wrote it (its type and its maths are
    /// `strato_analysis::recording`'s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<Value>,
    /// Always `"strato"`.
    #[serde(default)]
    pub format: String,
    /// An OS-level `perf` file joined into the recording.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub joined: Option<PerfJoin>,
    /// The root process's collector figures and the metadata the program itself recorded.
    #[serde(default, skip_serializing_if = "CollectorMetadata::is_empty")]
    pub metadata: CollectorMetadata,
    /// One entry per recorded file (a process, or a component such as the OpenCL layer).
    #[serde(default)]
    pub processes: Vec<RecordedFile>,
    /// `run.json`: how `strato record` ran the program.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<Value>,
}

impl RecordingMetadata {
    /// The files of processes, not of components.
    pub fn process_files(&self) -> impl Iterator<Item = &RecordedFile> {
        self.processes.iter().filter(|p| p.component.is_empty())
    }
}

/// One recorded file: the process (or component) that wrote it and what its reading found.
/// Fields are in alphabetical order (the order of the JSON text).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedFile {
    /// The command line, when the file says.
    #[serde(default)]
    pub argv: Option<Vec<String>>,
    /// Chunks read.
    #[serde(default)]
    pub chunks: u64,
    /// Non-empty for a component's file (e.g. `"opencl"`), empty for a process's.
    #[serde(default, deserialize_with = "null_as_default")]
    pub component: String,
    /// The recording thread's CPU times (None when the session did not stop).
    #[serde(default)]
    pub cpu: Option<ProcessCpu>,
    /// The file's name.
    #[serde(default)]
    pub file: Option<String>,
    /// The last record's time (CLOCK_MONOTONIC ns).
    #[serde(default)]
    pub last_ns: i64,
    /// The collection level the session started at.
    #[serde(default)]
    pub level: u64,
    /// The collectors' figures of this file ([`OS_METADATA_KEY`], [`SAMPLE_METADATA_KEY`]).
    #[serde(default, skip_serializing_if = "CollectorMetadata::is_empty")]
    pub metadata: CollectorMetadata,
    /// What the reading found (a file not closed, a process preempted by the collectors).
    #[serde(default)]
    pub note: Option<String>,
    #[serde(default)]
    pub pid: i64,
    #[serde(default)]
    pub ppid: i64,
    /// The START record's time.
    #[serde(default)]
    pub start_ns: i64,
    /// The STOP record's time; None when the process never stopped cleanly.
    #[serde(default)]
    pub stop_ns: Option<i64>,
    /// Bytes of a torn last chunk that were dropped.
    #[serde(default)]
    pub torn_bytes: u64,
    /// Spans still open at the end, closed at the last record.
    #[serde(default)]
    pub truncated_spans: u64,
    /// Wall clock minus CLOCK_MONOTONIC when the process started recording.
    #[serde(default)]
    pub wall_minus_mono_ns: i64,
}

impl RecordedFile {
    /// The thread that started recording, when known.
    pub fn cpu_tid(&self) -> Option<i64> {
        self.cpu.and_then(|c| c.start_tid)
    }

    /// That thread's CPU time from START to STOP, when known.
    pub fn thread_cpu_ns(&self) -> Option<i64> {
        self.cpu.and_then(|c| c.thread_cpu_ns)
    }
}

fn null_as_default<'de, D: Deserializer<'de>, T: Default + Deserialize<'de>>(
    d: D,
) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// The CPU times a recording session writes when it stops ([`CPU_METADATA_KEY`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessCpu {
    /// The process's CPU time from START to STOP.
    #[serde(default)]
    pub process_cpu_ns: Option<i64>,
    #[serde(default)]
    pub start_tid: Option<i64>,
    #[serde(default)]
    pub stop_tid: Option<i64>,
    /// The CPU time of the thread that started the session, from START to STOP; None when
    /// another thread stopped it.
    #[serde(default)]
    pub thread_cpu_ns: Option<i64>,
    /// The recorder's writer thread's CPU time.
    #[serde(default)]
    pub writer_cpu_ns: Option<i64>,
}

/// Collector figures and program metadata, by key. The collectors' own keys have typed views
/// ([`CollectorMetadata::os`], ...); what the program recorded (`stratoscope.metadata(...)`)
/// is kept as it wrote it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CollectorMetadata(pub BTreeMap<String, Value>);

impl CollectorMetadata {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn typed<T: DeserializeOwned>(&self, key: &str) -> Option<T> {
        T::deserialize(self.0.get(key)?).ok()
    }

    /// The OS level's figures ([`OS_METADATA_KEY`]).
    pub fn os(&self) -> Option<OsSummary> {
        self.typed(OS_METADATA_KEY)
    }

    /// The OS collector's own cost ([`OS_COLLECTOR_METADATA_KEY`]).
    pub fn os_collector(&self) -> Option<CollectorCost> {
        self.typed(OS_COLLECTOR_METADATA_KEY)
    }

    /// The sampler's figures ([`SAMPLE_METADATA_KEY`]).
    pub fn samples(&self) -> Option<SampleSummary> {
        self.typed(SAMPLE_METADATA_KEY)
    }

    /// The sampler's own cost ([`SAMPLE_COLLECTOR_METADATA_KEY`]).
    pub fn sample_collector(&self) -> Option<CollectorCost> {
        self.typed(SAMPLE_COLLECTOR_METADATA_KEY)
    }
}

/// The OS level's figures of one process (the part the analyses read; the collector writes
/// more, kept in [`CollectorMetadata`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct OsSummary {
    pub switches: u64,
    pub wakeups: u64,
    pub migrations: u64,
    pub syscalls: Vec<SyscallFigures>,
    /// Time the process's threads were runnable while the collectors held their CPU.
    pub runnable_behind_collector_ns: i64,
}

/// One system call's figures in [`OsSummary`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct SyscallFigures {
    pub count: u64,
    /// Calls whose entry and exit were both seen; None in recordings made before it was
    /// counted, where every call was timed.
    pub timed: Option<u64>,
    pub time_ns: u64,
}

/// A collector's own cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct CollectorCost {
    /// The collector thread's CPU time.
    pub cpu_ns: Option<f64>,
    /// The time the program's threads were runnable behind the collector (OS level only).
    pub program_wait_ns: Option<f64>,
}

/// The CPU sampler's figures of one process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct SampleSummary {
    pub samples: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_object_keeps_its_order_and_digits() {
        let text = r#"{"z":1.50,"a":{"b":[1,2]},"m":"x"}"#;
        let meta = SourceMetadata::from_json(text, SourceFormat::Kineto).unwrap();
        assert_eq!(meta.to_json().as_deref(), Some(text));
        let SourceMetadata::Source(o) = &meta else {
            panic!("{meta:?}")
        };
        assert_eq!(o.get("z"), Some("1.50"));
        assert_eq!(o.get_as::<Vec<i64>>("a"), None);
    }

    #[test]
    fn a_recording_is_typed_and_written_back_the_same() {
        let text = r#"{"calibration":{"costs_ns":{}},"format":"strato","metadata":{"strato.os.collector":{"cpu_ns":1250,"records":9}},"processes":[{"argv":["python","x.py"],"chunks":2,"component":"","cpu":{"process_cpu_ns":9,"start_tid":7,"stop_tid":7,"thread_cpu_ns":5,"writer_cpu_ns":1},"file":"a.strato","last_ns":30,"level":4,"metadata":{"strato.os":{"switches":3,"syscalls":[{"count":2,"time_ns":40}]}},"note":null,"pid":7,"ppid":1,"start_ns":10,"stop_ns":null,"torn_bytes":0,"truncated_spans":0,"wall_minus_mono_ns":100}]}"#;
        let meta = SourceMetadata::from_json(text, SourceFormat::Strato).unwrap();
        let r = meta.recording().expect("typed");
        assert_eq!(r.processes[0].thread_cpu_ns(), Some(5));
        let os = r.processes[0].metadata.os().unwrap();
        assert_eq!((os.switches, os.syscalls[0].timed), (3, None));
        assert_eq!(r.metadata.os_collector().unwrap().cpu_ns, Some(1250.0));
        assert_eq!(meta.to_json().as_deref(), Some(text));
        // The same text from another format is not a recording.
        let other = SourceMetadata::from_json(text, SourceFormat::Kineto).unwrap();
        assert!(other.recording().is_none());
    }

    #[test]
    fn a_recording_of_another_shape_is_kept_as_written() {
        let text = r#"{"format":"strato","processes":"many"}"#;
        let meta = SourceMetadata::from_json(text, SourceFormat::Strato).unwrap();
        assert!(meta.recording().is_none());
        assert_eq!(meta.to_json().as_deref(), Some(text));
        assert!(SourceMetadata::from_json("[1]", SourceFormat::Strato).is_err());
    }

    #[test]
    fn joining_perf_sets_one_key() {
        let mut meta = SourceMetadata::None;
        meta.set_joined(PerfJoin {
            events: 4,
            threads: 2,
        });
        meta.set_joined(PerfJoin {
            events: 5,
            threads: 2,
        });
        assert_eq!(
            meta.to_json().as_deref(),
            Some(r#"{"joined":{"events":5,"threads":2}}"#)
        );
    }
}
