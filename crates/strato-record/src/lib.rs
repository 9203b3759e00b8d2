//! The in-process recorder and the `*.strato` recording format (`docs/recording-format.md`).
//!
//! This crate owns: the byte format ([`format`]), the decoder ([`decode`], used by the
//! `strato-io` importer), and the recorder ([`start`], [`stop`], [`begin`], [`end`], [`span`],
//! ... ): per-thread buffers, a background writer thread appending self-contained chunks to
//! `DIR/<pid>[-component].strato`, a fresh file for every forked child, and flushing on
//! termination signals before the process ends by them ([`signals`]). It has no Python
//! in it: the `stratoscope` package (crate `strato-python`) and the OpenCL layer call it.
//!
//! Every recording function is a cheap no-op when no session is running.

pub mod decode;
pub mod format;
pub mod os;
mod recorder;
pub mod sample;
mod side_file;
pub use side_file::Throttling;
pub mod signals;

pub use decode::{
    decode, is_recording as is_recording_bytes, ClockRecord, DecodeError, DeviceRecord, Event,
    ProcessInfo, Recording, TrackDef,
};
pub use recorder::{
    add_untraced, begin, begin_with, clock_sync, counter, counter_track, current_dir,
    current_level, device, end, ensure_writer, flush, instant, intern, is_recording, metadata,
    now_ns, queue_track, read_clock, set_process_name, set_thread_name, span, start, stop,
    thread_track, thread_track_of, Config, RecordError, StrRef, TrackRef, CPU_METADATA_KEY,
};
pub use strato_trace::Level;
