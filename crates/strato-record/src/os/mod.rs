//! The OS level of a live recording (issue 19): what the kernel says about the recorded
//! process tree, written as `DIR/<pid>-os.strato` files (one per process of the tree) beside
//! the recorder's own, so the importer puts every event on the thread's own track.
//!
//! This module owns the perf_event side (through the `perf-event2` crate): it is run by the
//! launcher (`strato record --os`), not inside the recorded program, so a crash of the program
//! loses nothing here, and every chunk written (every [`OsOptions::flush_interval`]) stays.
//!
//! What is opened, per online CPU:
//! - system-wide tracepoints `sched:sched_switch`, `sched:sched_wakeup`,
//!   `sched:sched_wakeup_new`, `sched:sched_migrate_task` and `task:task_newtask`, filtered
//!   here to the threads of the tree (the tree is the root pid plus every task created by one of
//!   its tasks, `task_newtask`, whose `clone_flags` say thread or process);
//! - `raw_syscalls:sys_enter` / `sys_exit` on the root process, inherited by every task it
//!   creates after the recorder attached (`strato record` holds the program before its exec
//!   until the collectors are attached, so that is from its first instruction);
//! - page-fault counters (all, and major) on the root process, inherited.
//!
//! What is written, per thread (Level `Os`):
//! - thread-state spans, category [`THREAD_STATE_CATEGORY`], named by [`ThreadState::as_str`]:
//!   `running` (switched in to switched out), `runnable` (preempted or woken, until switched
//!   in), `blocked:io` / `blocked:lock` / `blocked:sleep` / `blocked:other` (switched out
//!   asleep, until woken; the cause from the system call the thread was in: see
//!   [`blocked_cause`]; args name the syscall and the waker's tid);
//! - slow system calls (at least [`OsOptions::slow_syscall_ns`]) as spans of category
//!   `syscall` named by the call;
//! - CPU migrations as instants (category `sched`, args `from`/`to`);
//! - per process, metadata `strato.os`: per system call name, the calls entered (`count`,
//!   counted at `sys_enter`: every call), those whose exit was matched (`timed`) and their
//!   summed time (`time_ns`); page faults,
//!   switch / wakeup / migration counts, lost records, and what the kernel throttled
//!   (`throttled_all_processes`, [`crate::Throttling::json`]: count, summed time, first and
//!   last instant; the importer makes it an import note);
//! - per thread, the OS level's own book-keeping in the thread: a cumulative counter
//!   [`OS_EVENTS_COUNTER_PREFIX`]`<tid>` of the records the kernel wrote in that thread's
//!   context (one per system call, for its `sys_enter` + `sys_exit` pair, and one per switch
//!   out), sampled at each switch out, at least every [`OS_EVENTS_SAMPLE_NS`] of the thread's
//!   system calls, and at the end. Overhead calibration fits a cost per such event and the
//!   correction removes it where the counter grew (`strato_analysis::recording::overhead`);
//! - per thread, a cumulative counter [`COLLECTOR_WAIT_COUNTER_PREFIX`]`<tid>` (ns): the time
//!   the thread was runnable on a CPU while a thread of the launcher (this collector, the
//!   sample collector) ran on that CPU, from the same `sched_switch` records (the launcher's
//!   threads are read from `/proc/self/task`): what the collectors' CPU time cost the program
//!   on a machine without a spare core. Sampled when it grows, at the end of each such wait;
//!   the correction of a calibrated profile removes it there
//!   (`strato_analysis::recording::overhead`);
//! - in the root process's file, metadata [`OS_COLLECTOR_METADATA_KEY`]: the collector
//!   thread's CPU time, the records it read and the tree's total collector wait (its cost runs
//!   in the launcher, outside the program's threads).
//!
//! Clock: every event is opened with `clockid = CLOCK_MONOTONIC`, the recorder's clock
//! ([`crate::now_ns`]), so both are one clock; alignment error 0 by construction (the kernel
//! stamps a tracepoint when it fires: a span boundary is off by the tracepoint's own cost,
//! well under a microsecond). Time before the recorder attached, or of a thread it first sees
//! switching out, has no state (no span).
//!
//! Layout (each file reads only this one and those listed before it): `kernel.rs` (the
//! events opened: tracefs formats, samplers, fault counters), `file.rs` (one
//! `<pid>-os.strato` file and its chunks), `wait.rs` (the collectors' preemption of the
//! program), `collector.rs` (the collecting thread: reading the buffers, ordering, writing),
//! `states.rs` (what each kernel event does to the threads' states and counts).

mod collector;
mod file;
mod kernel;
mod states;
mod wait;

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use crate::side_file::CollectorThread;
use collector::Collector;
use kernel::Sources;

pub(crate) use kernel::{build_counting_lost, kernel_lost, online_cpus, ppid_of};

/// The metadata key of each process's OS summary (`OS_METADATA_KEY`) and of the collector's
/// own cost, `{"cpu_ns":N,"records":N,"program_wait_ns":N}` (`OS_COLLECTOR_METADATA_KEY`,
/// root file only; `program_wait_ns`: the tree's threads runnable behind the launcher's
/// collectors, [`OsSummary::collector_wait_ns`]). The model crate defines them, with the
/// typed views the importer and analyses read.
pub use strato_trace::metadata::{OS_COLLECTOR_METADATA_KEY, OS_METADATA_KEY};
pub use strato_trace::names::{SYSCALL_CATEGORY, THREAD_STATE_CATEGORY};
/// Name prefix of the per-thread counters of OS book-keeping events (`os_events/<tid>`).
pub const OS_EVENTS_COUNTER_PREFIX: &str = "os_events/";
/// Name prefix of the per-thread counters of the time the thread waited for a CPU the
/// launcher's collectors held (`collector_wait_ns/<tid>`, cumulative ns).
pub const COLLECTOR_WAIT_COUNTER_PREFIX: &str = "collector_wait_ns/";
/// A thread's OS-event counter is sampled at least this often while it makes system calls.
pub const OS_EVENTS_SAMPLE_NS: i64 = 1_000_000;

/// What a thread was doing, as the kernel reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ThreadState {
    Running,
    /// Ready to run and waiting for a core (preempted, or woken and not yet switched in).
    Runnable,
    BlockedIo,
    BlockedLock,
    BlockedSleep,
    BlockedOther,
}

impl ThreadState {
    /// Every state, in display order.
    pub const ALL: [ThreadState; 6] = [
        ThreadState::Running,
        ThreadState::Runnable,
        ThreadState::BlockedIo,
        ThreadState::BlockedLock,
        ThreadState::BlockedSleep,
        ThreadState::BlockedOther,
    ];

    /// The span name and the breakdown's `thread_state` value.
    pub fn as_str(self) -> &'static str {
        match self {
            ThreadState::Running => "running",
            ThreadState::Runnable => "runnable",
            ThreadState::BlockedIo => "blocked:io",
            ThreadState::BlockedLock => "blocked:lock",
            ThreadState::BlockedSleep => "blocked:sleep",
            ThreadState::BlockedOther => "blocked:other",
        }
    }

    /// The state a span name stands for.
    pub fn from_name(name: &str) -> Option<ThreadState> {
        ThreadState::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

/// The cause of a voluntary switch-out, from the system call the thread was in (by name, so
/// it holds on every architecture the `syscalls` crate knows): futex-like waits are `lock`,
/// timed sleeps `sleep`, file and socket transfers and syncs `io`; anything else, or no system
/// call (e.g. a page fault), is `other`.
pub fn blocked_cause(syscall: Option<&str>) -> ThreadState {
    match syscall {
        Some("futex" | "futex_waitv" | "futex_wait" | "flock" | "semop" | "semtimedop") => {
            ThreadState::BlockedLock
        }
        Some("nanosleep" | "clock_nanosleep" | "pause") => ThreadState::BlockedSleep,
        Some(
            "read" | "write" | "pread64" | "pwrite64" | "readv" | "writev" | "preadv" | "pwritev"
            | "preadv2" | "pwritev2" | "fsync" | "fdatasync" | "sync" | "syncfs"
            | "sync_file_range" | "open" | "openat" | "openat2" | "close" | "io_getevents"
            | "io_pgetevents" | "io_uring_enter" | "sendfile" | "copy_file_range" | "splice"
            | "recvfrom" | "recvmsg" | "recvmmsg" | "sendto" | "sendmsg" | "sendmmsg" | "msync"
            | "fallocate" | "ftruncate" | "truncate" | "unlink" | "unlinkat" | "rename"
            | "renameat" | "renameat2" | "getdents64" | "statx" | "newfstatat" | "mkdir"
            | "mkdirat",
        ) => ThreadState::BlockedIo,
        _ => ThreadState::BlockedOther,
    }
}

/// The name of system call `id` on this machine's architecture.
fn syscall_name(id: i64) -> Option<&'static str> {
    usize::try_from(id)
        .ok()
        .and_then(|n| syscalls::Sysno::new(n).map(|s| s.name()))
}

/// How to record the OS level.
#[derive(Debug, Clone)]
pub struct OsOptions {
    /// The profile directory (the program's recorder writes there too).
    pub dir: PathBuf,
    /// The recorded program's pid (the root of the tree).
    pub root_pid: i32,
    /// System calls at least this long become spans (all are counted).
    pub slow_syscall_ns: i64,
    /// A chunk per process file at least this often.
    pub flush_interval: Duration,
    /// The collection level written in each file's START record.
    pub level: u64,
}

impl OsOptions {
    /// Defaults: slow syscalls from 100 µs, a chunk every 100 ms, level 4.
    pub fn new(dir: PathBuf, root_pid: i32) -> OsOptions {
        OsOptions {
            dir,
            root_pid,
            slow_syscall_ns: 100_000,
            flush_interval: Duration::from_millis(100),
            level: 4,
        }
    }
}

/// Why the OS level cannot be recorded.
#[derive(Debug, thiserror::Error)]
pub enum OsError {
    #[error(
        "perf events are not permitted here ({source}); kernel.perf_event_paranoid is {paranoid}: system-wide scheduler tracepoints need root, or CAP_PERFMON with a readable tracefs (/sys/kernel/tracing), or `sysctl kernel.perf_event_paranoid=-1` (in a container, the runtime must allow perf_event_open too)"
    )]
    NotPermitted { paranoid: String, source: io::Error },
    #[error(
        "kernel tracepoint {name} is not available: {detail} (tracefs must be mounted: `mount -t tracefs nodev /sys/kernel/tracing`)"
    )]
    Tracepoint { name: String, detail: String },
    #[error("perf_event_open for {what} failed: {source}")]
    Open { what: String, source: io::Error },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

/// Counts of what an OS recording saw (for the launcher's one-line summary).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OsSummary {
    pub processes: usize,
    pub threads: usize,
    pub switches: u64,
    pub wakeups: u64,
    pub migrations: u64,
    /// System calls entered (counted at `sys_enter`).
    pub syscalls: u64,
    pub slow_syscalls: u64,
    pub state_spans: u64,
    /// Records the kernel dropped because a ring buffer was full (then some states are
    /// missing; the files say so in `strato.os`): the larger of the LOST records read and the
    /// kernel's own count (PERF_FORMAT_LOST, where the kernel has it: Linux 6.0+; for the
    /// system-call events, of the root process's threads, not of inherited children).
    pub lost: u64,
    /// CPU time of the collecting thread (reading the ring buffers, writing the files): the
    /// OS level's own cost outside the kernel.
    pub collector_cpu_ns: i64,
    /// Kernel records the collector read (every CPU's, before filtering to the tree).
    pub records_read: u64,
    /// Times the kernel throttled an event (more samples a tick than
    /// `kernel.perf_event_max_sample_rate` allows): its records until unthrottled are missing
    /// (system-call-dense programs: more than about 100,000 calls a second).
    pub throttled: u64,
    /// Summed length of the throttled intervals (per event; an interval still open at the end
    /// is closed there), ns.
    pub throttled_ns: i64,
    /// OS book-keeping events in the tree's threads (a system call, a switch out).
    pub os_events: u64,
    /// Time the tree's threads were runnable on a CPU while a thread of the launcher (the
    /// collectors) ran on it, ns: the collectors' preemption of the program.
    pub collector_wait_ns: i64,
    pub files: Vec<PathBuf>,
}

/// A running OS recording; [`OsRecorder::stop`] ends it.
#[derive(Debug)]
pub struct OsRecorder {
    collector: CollectorThread<OsSummary>,
}

impl OsRecorder {
    /// Opens every event (errors come back here, before anything is written) and starts the
    /// collecting thread.
    pub fn start(options: OsOptions) -> Result<OsRecorder, OsError> {
        let sources = Sources::open(options.root_pid)?;
        std::fs::create_dir_all(&options.dir).map_err(|source| OsError::Io {
            path: options.dir.clone(),
            source,
        })?;
        let mut collector = Collector::new(options, sources);
        let collector = CollectorThread::spawn("strato-os", move |stop| collector.run(stop))
            .map_err(|source| OsError::Io {
                path: PathBuf::from("(thread)"),
                source,
            })?;
        Ok(OsRecorder { collector })
    }

    /// Stops collecting, writes what is left and the STOP records; returns the counts.
    pub fn stop(self) -> OsSummary {
        self.collector.stop()
    }
}

#[cfg(test)]
mod tests;
