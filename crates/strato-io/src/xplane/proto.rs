//! The messages of `xplane.proto` (package `tensorflow.profiler`), written by hand because
//! there is no `protoc` at build time. Field numbers follow the upstream file exactly.

use std::collections::HashMap;

/// A container of parallel planes from one or more profiling sources.
#[derive(Clone, PartialEq, prost::Message)]
pub struct XSpace {
    #[prost(message, repeated, tag = "1")]
    pub planes: Vec<XPlane>,
    #[prost(string, repeated, tag = "2")]
    pub errors: Vec<String>,
    #[prost(string, repeated, tag = "3")]
    pub warnings: Vec<String>,
    #[prost(string, repeated, tag = "4")]
    pub hostnames: Vec<String>,
}

/// [`XSpace`] with its planes left encoded (zero-copy slices of the input buffer), so the
/// importer can decode and drop one plane at a time. Same wire format as [`XSpace`].
#[derive(Clone, PartialEq, prost::Message)]
pub struct XSpaceIndex {
    #[prost(bytes = "bytes", repeated, tag = "1")]
    pub planes: Vec<prost::bytes::Bytes>,
    #[prost(string, repeated, tag = "2")]
    pub errors: Vec<String>,
    #[prost(string, repeated, tag = "3")]
    pub warnings: Vec<String>,
    #[prost(string, repeated, tag = "4")]
    pub hostnames: Vec<String>,
}

/// A set of parallel timelines (lines) of one source: a device, the host.
#[derive(Clone, PartialEq, prost::Message)]
pub struct XPlane {
    #[prost(int64, tag = "1")]
    pub id: i64,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(message, repeated, tag = "3")]
    pub lines: Vec<XLine>,
    #[prost(map = "int64, message", tag = "4")]
    pub event_metadata: HashMap<i64, XEventMetadata>,
    #[prost(map = "int64, message", tag = "5")]
    pub stat_metadata: HashMap<i64, XStatMetadata>,
    #[prost(message, repeated, tag = "6")]
    pub stats: Vec<XStat>,
}

/// A timeline: a thread, a stream, or a line derived by post-processing.
#[derive(Clone, PartialEq, prost::Message)]
pub struct XLine {
    #[prost(int64, tag = "1")]
    pub id: i64,
    #[prost(int64, tag = "10")]
    pub display_id: i64,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(string, tag = "11")]
    pub display_name: String,
    /// Start of the line; event offsets are relative to it.
    #[prost(int64, tag = "3")]
    pub timestamp_ns: i64,
    #[prost(int64, tag = "9")]
    pub duration_ps: i64,
    #[prost(message, repeated, tag = "4")]
    pub events: Vec<XEvent>,
}

/// One event of a line.
#[derive(Clone, PartialEq, prost::Message)]
pub struct XEvent {
    #[prost(int64, tag = "1")]
    pub metadata_id: i64,
    #[prost(oneof = "x_event::Data", tags = "2, 5")]
    pub data: Option<x_event::Data>,
    #[prost(int64, tag = "3")]
    pub duration_ps: i64,
    #[prost(message, repeated, tag = "4")]
    pub stats: Vec<XStat>,
}

/// The `data` oneof of [`XEvent`].
pub mod x_event {
    /// Either a start offset or, for aggregated events, a count.
    #[derive(Clone, Copy, PartialEq, prost::Oneof)]
    pub enum Data {
        /// Start in ps after the line's `timestamp_ns`.
        #[prost(int64, tag = "2")]
        OffsetPs(i64),
        /// Number of occurrences of an aggregated event (no time).
        #[prost(int64, tag = "5")]
        NumOccurrences(i64),
    }
}

/// A named value attached to an event, an event metadata or a plane.
#[derive(Clone, PartialEq, prost::Message)]
pub struct XStat {
    #[prost(int64, tag = "1")]
    pub metadata_id: i64,
    #[prost(oneof = "x_stat::Value", tags = "2, 3, 4, 5, 6, 7, 8")]
    pub value: Option<x_stat::Value>,
}

/// The `value` oneof of [`XStat`].
pub mod x_stat {
    /// A stat's value.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Value {
        #[prost(double, tag = "2")]
        DoubleValue(f64),
        #[prost(uint64, tag = "3")]
        Uint64Value(u64),
        #[prost(int64, tag = "4")]
        Int64Value(i64),
        #[prost(string, tag = "5")]
        StrValue(String),
        #[prost(bytes = "vec", tag = "6")]
        BytesValue(Vec<u8>),
        /// A string stored as the name of the stat metadata with this id.
        #[prost(uint64, tag = "7")]
        RefValue(u64),
        /// A gzip-compressed string.
        #[prost(bytes = "vec", tag = "8")]
        CompressedStrValue(Vec<u8>),
    }
}

/// What events with the same `metadata_id` share: name, display name, constant stats.
#[derive(Clone, PartialEq, prost::Message)]
pub struct XEventMetadata {
    #[prost(int64, tag = "1")]
    pub id: i64,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(string, tag = "4")]
    pub display_name: String,
    #[prost(bytes = "vec", tag = "3")]
    pub metadata: Vec<u8>,
    #[prost(message, repeated, tag = "5")]
    pub stats: Vec<XStat>,
    #[prost(int64, repeated, tag = "6")]
    pub child_id: Vec<i64>,
}

/// The name of a stat id.
#[derive(Clone, PartialEq, prost::Message)]
pub struct XStatMetadata {
    #[prost(int64, tag = "1")]
    pub id: i64,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(string, tag = "3")]
    pub description: String,
}
