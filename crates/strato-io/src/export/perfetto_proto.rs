//! Hand-written `prost` messages for the subset of Perfetto's trace protobuf
//! (`protos/perfetto/trace/...` in google/perfetto) that the Perfetto exporter writes and
//! [`super::perfetto::summarize`] reads back. Field numbers are copied from the real `.proto`
//! files: `trace.proto`, `trace_packet.proto`, `track_event/track_event.proto`,
//! `track_event/track_descriptor.proto`, `track_event/process_descriptor.proto`,
//! `track_event/thread_descriptor.proto`, `track_event/counter_descriptor.proto`,
//! `track_event/debug_annotation.proto`, `interned_data/interned_data.proto`.
//!
//! `oneof` groups are written as separate optional fields: on the wire that is the same thing,
//! as long as the writer sets at most one member. Repeated scalars are `packed = "false"`:
//! Perfetto's protozero decoder only accepts packed encoding for fields declared
//! `[packed = true]`, and the fields used here (`flow_ids`, `category_iids`) are not.

/// `TracePacket.sequence_flags`: the reader must drop interned state before this packet.
pub const SEQ_INCREMENTAL_STATE_CLEARED: u32 = 1;
/// `TracePacket.sequence_flags`: this packet refers to interned state.
pub const SEQ_NEEDS_INCREMENTAL_STATE: u32 = 2;

/// `TrackEvent.Type`.
pub const TYPE_SLICE_BEGIN: i32 = 1;
/// `TrackEvent.Type`.
pub const TYPE_SLICE_END: i32 = 2;
/// `TrackEvent.Type`.
pub const TYPE_INSTANT: i32 = 3;
/// `TrackEvent.Type`.
pub const TYPE_COUNTER: i32 = 4;

/// `ClockSnapshot.Clock.BuiltinClocks.BOOTTIME`: trace_processor's default trace clock.
pub const CLOCK_BOOTTIME: u32 = 6;

/// `TrackDescriptor.ChildTracksOrdering.EXPLICIT`: children sorted by `sibling_order_rank`.
pub const CHILD_ORDERING_EXPLICIT: i32 = 3;

/// `message Trace { repeated TracePacket packet = 1; }`: the whole file. The exporter never
/// builds one (it streams packets); it is here for tests that decode small traces.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Trace {
    #[prost(message, repeated, tag = "1")]
    pub packet: Vec<TracePacket>,
}

/// `TracePacket` (subset).
#[derive(Clone, PartialEq, prost::Message)]
pub struct TracePacket {
    #[prost(uint64, optional, tag = "8")]
    pub timestamp: Option<u64>,
    #[prost(uint32, optional, tag = "58")]
    pub timestamp_clock_id: Option<u32>,
    /// Member of the `data` oneof.
    #[prost(message, optional, tag = "11")]
    pub track_event: Option<TrackEvent>,
    /// Member of the `data` oneof.
    #[prost(message, optional, tag = "60")]
    pub track_descriptor: Option<TrackDescriptor>,
    #[prost(uint32, optional, tag = "10")]
    pub trusted_packet_sequence_id: Option<u32>,
    #[prost(message, optional, tag = "12")]
    pub interned_data: Option<InternedData>,
    #[prost(uint32, optional, tag = "13")]
    pub sequence_flags: Option<u32>,
    #[prost(bool, optional, tag = "87")]
    pub first_packet_on_sequence: Option<bool>,
}

/// `TrackEvent` (subset).
#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackEvent {
    #[prost(uint64, repeated, packed = "false", tag = "3")]
    pub category_iids: Vec<u64>,
    #[prost(string, repeated, tag = "22")]
    pub categories: Vec<String>,
    /// `name_field` oneof: interned name.
    #[prost(uint64, optional, tag = "10")]
    pub name_iid: Option<u64>,
    /// `name_field` oneof: literal name.
    #[prost(string, optional, tag = "23")]
    pub name: Option<String>,
    /// `TrackEvent.Type` (`TYPE_*` constants).
    #[prost(int32, optional, tag = "9")]
    pub r#type: Option<i32>,
    #[prost(uint64, optional, tag = "11")]
    pub track_uuid: Option<u64>,
    /// `counter_value_field` oneof.
    #[prost(int64, optional, tag = "30")]
    pub counter_value: Option<i64>,
    /// `counter_value_field` oneof.
    #[prost(double, optional, tag = "44")]
    pub double_counter_value: Option<f64>,
    #[prost(fixed64, repeated, packed = "false", tag = "47")]
    pub flow_ids: Vec<u64>,
    #[prost(fixed64, repeated, packed = "false", tag = "48")]
    pub terminating_flow_ids: Vec<u64>,
    #[prost(message, repeated, tag = "4")]
    pub debug_annotations: Vec<DebugAnnotation>,
}

/// `DebugAnnotation` (subset: flat values, JSON for nested ones).
#[derive(Clone, PartialEq, prost::Message)]
pub struct DebugAnnotation {
    /// `name_field` oneof: interned (`InternedData.debug_annotation_names`).
    #[prost(uint64, optional, tag = "1")]
    pub name_iid: Option<u64>,
    /// `name_field` oneof: literal.
    #[prost(string, optional, tag = "10")]
    pub name: Option<String>,
    #[prost(bool, optional, tag = "2")]
    pub bool_value: Option<bool>,
    #[prost(uint64, optional, tag = "3")]
    pub uint_value: Option<u64>,
    #[prost(int64, optional, tag = "4")]
    pub int_value: Option<i64>,
    #[prost(double, optional, tag = "5")]
    pub double_value: Option<f64>,
    #[prost(string, optional, tag = "6")]
    pub string_value: Option<String>,
    #[prost(string, optional, tag = "9")]
    pub legacy_json_value: Option<String>,
}

/// `TrackDescriptor` (subset).
#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackDescriptor {
    #[prost(uint64, optional, tag = "1")]
    pub uuid: Option<u64>,
    #[prost(uint64, optional, tag = "5")]
    pub parent_uuid: Option<u64>,
    /// `static_or_dynamic_name` oneof: `name`.
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    #[prost(string, optional, tag = "14")]
    pub description: Option<String>,
    #[prost(message, optional, tag = "3")]
    pub process: Option<ProcessDescriptor>,
    #[prost(message, optional, tag = "4")]
    pub thread: Option<ThreadDescriptor>,
    #[prost(message, optional, tag = "8")]
    pub counter: Option<CounterDescriptor>,
    /// `ChildTracksOrdering`.
    #[prost(int32, optional, tag = "11")]
    pub child_ordering: Option<i32>,
    #[prost(int32, optional, tag = "12")]
    pub sibling_order_rank: Option<i32>,
}

/// `ProcessDescriptor` (subset).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProcessDescriptor {
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    #[prost(string, optional, tag = "6")]
    pub process_name: Option<String>,
    #[prost(string, repeated, tag = "8")]
    pub process_labels: Vec<String>,
}

/// `ThreadDescriptor` (subset).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ThreadDescriptor {
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    #[prost(int32, optional, tag = "2")]
    pub tid: Option<i32>,
    #[prost(string, optional, tag = "5")]
    pub thread_name: Option<String>,
}

/// `CounterDescriptor` (subset).
#[derive(Clone, PartialEq, prost::Message)]
pub struct CounterDescriptor {
    /// `CounterDescriptor.Unit`.
    #[prost(int32, optional, tag = "3")]
    pub unit: Option<i32>,
    #[prost(string, optional, tag = "6")]
    pub unit_name: Option<String>,
}

/// `InternedData` (subset).
#[derive(Clone, PartialEq, prost::Message)]
pub struct InternedData {
    #[prost(message, repeated, tag = "1")]
    pub event_categories: Vec<InternedString>,
    #[prost(message, repeated, tag = "2")]
    pub event_names: Vec<InternedString>,
    #[prost(message, repeated, tag = "3")]
    pub debug_annotation_names: Vec<InternedString>,
}

/// `EventName`, `EventCategory` and `DebugAnnotationName` share this shape.
#[derive(Clone, PartialEq, prost::Message)]
pub struct InternedString {
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
}
