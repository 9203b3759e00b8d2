//! The in-process recorder: one global session per process (and component), per-thread event
//! buffers behind uncontended locks, a background writer thread appending self-contained chunks
//! to `DIR/<pid>[-component].strato`, and fork handling (the child starts its own file).
//!
//! Lock order (no cycles): `STOPPING -> INTERNER -> STATE` (fork prepare; [`stop`] holds
//! `STOPPING` throughout); writer: `file -> registry
//! -> buffer`, `file -> INTERNER`, `file -> tracks`, `file -> meta`, each released before the
//! next; recording threads: their own buffer only; registration: `STATE` (released), then
//! `tracks`, then `registry`.
//!
//! Layout (each file reads only this one and those listed before it): `clock.rs` (clocks
//! and ids from the kernel), `records.rs` (the buffered records and their encoding),
//! `session.rs` (the session, the global state and the writer thread), `lifecycle.rs`
//! (start, stop, flush, fork), `events.rs` (the recording functions the program calls).

mod clock;
mod events;
mod lifecycle;
mod records;
mod session;

use std::path::PathBuf;
use std::time::Duration;

pub use clock::{now_ns, read_clock};
pub use events::{
    add_untraced, begin, begin_with, clock_sync, counter, counter_track, device, end, instant,
    metadata, queue_track, set_process_name, set_thread_name, span, thread_track, thread_track_of,
};
pub use lifecycle::{ensure_writer, flush, start, stop, CPU_METADATA_KEY};
pub use session::{current_dir, current_level, intern, is_recording};

/// How to record.
#[derive(Debug, Clone)]
pub struct Config {
    /// The profile directory (created if missing).
    pub dir: PathBuf,
    /// `""` for the main (Python) recorder, else a suffix of the file name (`opencl`).
    pub component: String,
    /// The writer appends a chunk at least this often.
    pub flush_interval: Duration,
    /// A thread buffer holding this many events wakes the writer early.
    pub flush_events: usize,
    /// Collection level (see the format doc): written in the START record.
    pub level: u64,
    /// The program's arguments as a JSON array text (`[]` when unknown).
    pub argv_json: String,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            dir: PathBuf::from("strato-profile"),
            component: String::new(),
            flush_interval: Duration::from_millis(50),
            flush_events: 1 << 16,
            level: 4,
            argv_json: "[]".into(),
        }
    }
}

/// Recorder failures.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the recorder is already running")]
    AlreadyRunning,
}

/// A track of the current recording session (valid until the session stops or the process
/// forks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TrackRef(pub(crate) u32);

/// An interned string id (stable for the life of the process, across sessions and forks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct StrRef(pub u32);
