//! The stratoscope trace model.
//!
//! This crate owns the in-memory representation every importer produces and every analysis
//! reads: a [`Trace`] of [`Track`]s (CPU threads, device queues, counters) carrying [`Span`]s,
//! [`Instant`]s, [`CounterSample`]s and [`Flow`]s, each span tagged with the [`Level`] (stratum)
//! of the stack it belongs to, plus [`Device`]s, [`Process`]es, [`Rank`]s and [`ClockInfo`].
//!
//! Rules that hold for every `Trace` (checked by [`Trace::validate`]):
//! - time is `i64` nanoseconds on the trace's reference clock, in the valid range
//!   `-TIME_LIMIT_NS..=TIME_LIMIT_NS` (about +-126 years; [`TIME_LIMIT_NS`]), so the difference
//!   of any two times fits in an `i64`;
//! - a span's `end >= start`;
//! - every id (track, string, args, span) refers to an existing entry.
//!
//! It never does I/O: importers (in `strato-io`) build a `Trace`, analyses read one.

mod args;
pub mod args_of;
mod budget;
mod level;
pub mod message;
pub mod metadata;
mod model;
pub mod names;
mod notes;
pub mod projection;
pub mod secrets;
mod source_format;
mod strings;
#[cfg(any(test, feature = "test-support"))]
pub mod testing;
mod time;

pub use args::{ArgsTable, ArgsText};
pub use budget::{MemoryBudgetExceeded, MemoryTracker};
pub use level::{Level, LevelMap, LevelMapError, LevelRule, MAX_LEVEL_RULES};
pub use model::{
    ArgsId, ClockDomain, ClockInfo, ClockSource, CounterSample, Device, Flow, FlowEnd, Instant,
    OptionalId, Process, Rank, RankId, Span, SpanId, Trace, TraceError, Track, TrackId,
    TrackIndexHandle, TrackKind,
};
pub use notes::{
    unclassified_device_count_name, ImportNotes, UNCLASSIFIED_DEVICE_PREFIX, WARN_FRACTION,
};
pub use source_format::SourceFormat;
pub use strings::{StrId, StringTable};
pub use time::{
    checked_end, checked_time, parse_decimal_to_ns, time_in_range, Ns, TimeOutOfRange,
    TimeParseError, TIME_LIMIT_NS,
};
