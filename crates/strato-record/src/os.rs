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

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use perf_event::data::Record as PerfRecord;
use perf_event::events::{Software, Tracepoint};
use perf_event::{Builder, Clock, Counter, ReadFormat, SampleFlag, Sampler};
use strato_trace::Level;

use crate::format::{tag, Enc, FLAG_ARGS};
use crate::side_file::{CollectorThread, SideFile};

pub use strato_trace::names::{SYSCALL_CATEGORY, THREAD_STATE_CATEGORY};
/// The metadata key of each process's OS summary.
pub const OS_METADATA_KEY: &str = "strato.os";
/// The metadata key of the collector's own cost, `{"cpu_ns":N,"records":N,"program_wait_ns":N}`
/// (root file only; `program_wait_ns`: the tree's threads runnable behind the launcher's
/// collectors, [`OsSummary::collector_wait_ns`]).
pub const OS_COLLECTOR_METADATA_KEY: &str = "strato.os.collector";
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

/// A tracepoint's id and the offsets of its fields in the raw sample.
struct Format {
    id: u64,
    fields: HashMap<String, (usize, usize)>,
}

impl Format {
    fn field(&self, raw: &[u8], name: &str) -> Option<i64> {
        let &(offset, size) = self.fields.get(name)?;
        let bytes = raw.get(offset..offset + size)?;
        Some(match size {
            8 => i64::from_ne_bytes(bytes.try_into().ok()?),
            4 => i64::from(i32::from_ne_bytes(bytes.try_into().ok()?)),
            2 => i64::from(i16::from_ne_bytes(bytes.try_into().ok()?)),
            _ => return None,
        })
    }
}

const TRACEFS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

fn tracefs_root() -> Option<&'static str> {
    let found = || {
        TRACEFS
            .into_iter()
            .find(|r| Path::new(r).join("events").is_dir())
    };
    if let Some(r) = found() {
        return Some(r);
    }
    // Not mounted (perf mounts it on demand too): mount it, as root may.
    let target = c"/sys/kernel/tracing";
    let fstype = c"tracefs";
    // SAFETY: plain mount(2) with NUL-terminated constant strings and no data.
    let _ = unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    found()
}

fn tracepoint_format(name: &str) -> Result<Format, OsError> {
    let err = |detail: String| OsError::Tracepoint {
        name: name.to_owned(),
        detail,
    };
    let Some(root) = tracefs_root() else {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 && TRACEFS.iter().any(|r| Path::new(r).exists()) {
            // There but not ours to read: a permission matter, not a missing mount.
            return Err(not_permitted(io::Error::from(
                io::ErrorKind::PermissionDenied,
            )));
        }
        return Err(err("no tracefs found".into()));
    };
    let dir = Path::new(root).join("events").join(name);
    let id = std::fs::read_to_string(dir.join("id"))
        .map_err(|e| match e.kind() {
            io::ErrorKind::PermissionDenied => not_permitted(e),
            _ => err(format!("{}: {e}", dir.join("id").display())),
        })?
        .trim()
        .parse()
        .map_err(|e| err(format!("{}: {e}", dir.join("id").display())))?;
    let text = std::fs::read_to_string(dir.join("format"))
        .map_err(|e| err(format!("{}: {e}", dir.join("format").display())))?;
    let mut fields = HashMap::new();
    for line in text.lines() {
        // `field:pid_t prev_pid;	offset:24;	size:4;	signed:1;`
        let mut name = None;
        let (mut offset, mut size) = (None, None);
        for part in line.trim().split(';') {
            let part = part.trim();
            if let Some(decl) = part.strip_prefix("field:") {
                let last = decl.split_whitespace().last().unwrap_or("");
                name = Some(last.split('[').next().unwrap_or(last).to_owned());
            } else if let Some(v) = part.strip_prefix("offset:") {
                offset = v.parse().ok();
            } else if let Some(v) = part.strip_prefix("size:") {
                size = v.parse().ok();
            }
        }
        if let (Some(n), Some(o), Some(s)) = (name, offset, size) {
            fields.insert(n, (o, s));
        }
    }
    Ok(Format { id, fields })
}

/// Builds a sampled event that also keeps the kernel's own count of the records it dropped
/// (PERF_FORMAT_LOST, Linux 6.0+; an older kernel builds it without). A ring buffer's LOST
/// record is written only when the kernel next writes to that buffer, so a drop near the end
/// of a run has none; [`kernel_lost`] reads the count instead. Shared with the CPU sampler.
pub(crate) fn build_counting_lost(b: &mut Builder<'_>) -> io::Result<Counter> {
    b.read_format(ReadFormat::LOST);
    match b.build() {
        Ok(c) => Ok(c),
        Err(_) => {
            b.read_format(ReadFormat::empty());
            b.build()
        }
    }
}

/// The records the kernel dropped in all of `samplers`, by its own count (0 where it keeps
/// none: [`build_counting_lost`]).
pub(crate) fn kernel_lost<'a>(samplers: impl Iterator<Item = &'a mut Sampler>) -> u64 {
    samplers.filter_map(|s| s.read_full().ok()?.lost()).sum()
}

pub(crate) fn online_cpus() -> Vec<usize> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let mut ends = part.split('-').filter_map(|x| x.parse::<usize>().ok());
        if let Some(a) = ends.next() {
            let b = ends.next().unwrap_or(a);
            cpus.extend(a..=b);
        }
    }
    if cpus.is_empty() {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        cpus.extend(0..n);
    }
    cpus
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Switch,
    Wakeup,
    Migrate,
    NewTask,
    SysEnter,
    SysExit,
}

/// Every open event.
struct Sources {
    samplers: Vec<(Kind, Sampler)>,
    formats: HashMap<u8, Format>,
    faults: Option<Counter>,
    major_faults: Option<Counter>,
}

fn kind_code(k: Kind) -> u8 {
    k as u8
}

impl Sources {
    fn open(root: i32) -> Result<Sources, OsError> {
        let cpus = online_cpus();
        let mut samplers = Vec::new();
        let mut formats = HashMap::new();
        let system_wide = [
            (Kind::Switch, "sched/sched_switch", 4 << 20),
            (Kind::Wakeup, "sched/sched_wakeup", 1 << 20),
            (Kind::Wakeup, "sched/sched_wakeup_new", 256 << 10),
            (Kind::Migrate, "sched/sched_migrate_task", 512 << 10),
            (Kind::NewTask, "task/task_newtask", 256 << 10),
        ];
        let per_task = [
            (Kind::SysEnter, "raw_syscalls/sys_enter", 4 << 20),
            (Kind::SysExit, "raw_syscalls/sys_exit", 4 << 20),
        ];
        for (tree, list) in [(false, &system_wide[..]), (true, &per_task[..])] {
            for &(kind, name, map_len) in list {
                let format = tracepoint_format(name)?;
                let id = format.id;
                // sched_wakeup and sched_wakeup_new share one layout.
                formats.entry(kind_code(kind)).or_insert(format);
                for &cpu in &cpus {
                    let mut b = Builder::new(Tracepoint::with_id(id));
                    if tree {
                        b.observe_pid(root).inherit(true);
                    } else {
                        b.any_pid();
                    }
                    b.one_cpu(cpu)
                        .include_kernel()
                        .sample_period(1)
                        .sample(
                            SampleFlag::TID | SampleFlag::TIME | SampleFlag::CPU | SampleFlag::RAW,
                        )
                        .clockid(Clock::MONOTONIC)
                        .wakeup_events(1 << 12);
                    let counter = build_counting_lost(&mut b).map_err(|e| open_error(e, name))?;
                    let sampler = counter.sampled(map_len).map_err(|e| open_error(e, name))?;
                    samplers.push((kind, sampler));
                }
            }
        }
        let fault_counter = |event: Software| {
            let mut b = Builder::new(event);
            b.observe_pid(root).any_cpu().inherit(true).include_kernel();
            b.build().ok()
        };
        let faults = fault_counter(Software::PAGE_FAULTS);
        let major_faults = fault_counter(Software::PAGE_FAULTS_MAJ);
        for (_, s) in &mut samplers {
            s.enable().map_err(|e| open_error(e, "enable"))?;
        }
        let mut sources = Sources {
            samplers,
            formats,
            faults,
            major_faults,
        };
        for c in [&mut sources.faults, &mut sources.major_faults]
            .into_iter()
            .flatten()
        {
            let _ = c.enable();
        }
        Ok(sources)
    }
}

fn not_permitted(source: io::Error) -> OsError {
    OsError::NotPermitted {
        paranoid: std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
            .map(|s| s.trim().to_owned())
            .unwrap_or_else(|_| "unknown".into()),
        source,
    }
}

fn open_error(e: io::Error, what: &str) -> OsError {
    match e.raw_os_error() {
        Some(libc::EACCES | libc::EPERM) => not_permitted(e),
        _ => OsError::Open {
            what: what.to_owned(),
            source: e,
        },
    }
}

/// One decoded kernel event.
#[derive(Debug, Clone, Copy)]
struct KEvent {
    ts: i64,
    /// Order of arrival, to keep equal timestamps stable.
    seq: u64,
    /// The task the event fired in (`current`).
    tid: i32,
    pid: i32,
    /// The CPU the event fired on.
    cpu: u32,
    body: Body,
}

#[derive(Debug, Clone, Copy)]
enum Body {
    Switch {
        prev: i32,
        prev_state: i64,
        next: i32,
    },
    Wakeup {
        woken: i32,
        /// The CPU whose run queue the woken task joins.
        target_cpu: i64,
    },
    Migrate {
        task: i32,
        from: i64,
        to: i64,
    },
    NewTask {
        child: i32,
        thread: bool,
    },
    SysEnter {
        id: i64,
    },
    SysExit {
        id: i64,
    },
    /// The kernel dropped system-call records (a ring buffer was full) just before this point:
    /// an entry still open may have lost its exit, and the next exit its entry, so no entry
    /// open here is matched with a later exit (the pair's time would span the gap).
    SyscallsLost,
}

/// `__trace_sched_switch_state` bits (include/trace/events/sched.h): the task-state index as
/// one bit, and TASK_REPORT_MAX (0x100 since 4.14) for a preempted task.
const STATE_EXITING: i64 = 0x10 | 0x20;
const STATE_PREEMPTED: i64 = 0x100;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Now {
    /// Not seen yet in a state we can name.
    Unknown,
    On(i64),
    Off {
        since: i64,
        state: ThreadState,
        syscall: Option<&'static str>,
    },
}

#[derive(Debug)]
struct Thread {
    tgid: i32,
    now: Now,
    syscall: Option<(i64, i64)>,
    /// OS book-keeping events in this thread so far, and what its counter last showed (count,
    /// time).
    os_events: u64,
    sampled: (u64, i64),
}

#[derive(Debug, Clone)]
enum OsEv {
    Span {
        tid: i32,
        start: i64,
        end: i64,
        cat: u32,
        name: u32,
        args: Option<String>,
    },
    Instant {
        tid: i32,
        ts: i64,
        cat: u32,
        name: u32,
        args: Option<String>,
    },
    /// A sample of one of the thread's cumulative counters (`<prefix><tid>`):
    /// [`OS_EVENTS_COUNTER_PREFIX`] or [`COLLECTOR_WAIT_COUNTER_PREFIX`].
    Counter {
        prefix: &'static str,
        unit: &'static str,
        tid: i32,
        ts: i64,
        value: f64,
    },
}

/// One system call's counts in a process ([`OsFile::syscalls`]).
#[derive(Debug, Default, Clone, Copy)]
struct SyscallCount {
    /// Calls entered (`sys_enter`): every call, whether or not its exit was matched.
    count: u64,
    /// Calls whose `sys_exit` was matched with their `sys_enter` (same thread, same call), and
    /// their summed time.
    timed: u64,
    time_ns: i64,
}

/// One `<pid>-os.strato` file: the side file and the OS events and counts not yet written.
#[derive(Debug)]
struct OsFile {
    side: SideFile,
    events: Vec<OsEv>,
    /// Per system call name: calls entered, calls timed (their exit matched their entry) and
    /// the summed time of the timed ones, ns.
    syscalls: HashMap<&'static str, SyscallCount>,
    switches: u64,
    wakeups: u64,
    migrations: u64,
    last_ts: i64,
}

impl OsFile {
    fn open(dir: &Path, pid: i32, ppid: i32, start_ts: i64, level: u64) -> Result<OsFile, OsError> {
        let path = SideFile::path_in(dir, pid, "os");
        let side = SideFile::create(path.clone(), pid, ppid, "os", start_ts, level)
            .map_err(|source| OsError::Io { path, source })?;
        Ok(OsFile {
            side,
            events: Vec::new(),
            syscalls: HashMap::new(),
            switches: 0,
            wakeups: 0,
            migrations: 0,
            last_ts: start_ts,
        })
    }

    /// Appends one chunk with everything new (`stop`: also the summary and the STOP record).
    fn flush(&mut self, stop: Option<(i64, &[(&str, String)])>) -> io::Result<()> {
        let events = std::mem::take(&mut self.events);
        // Register every track used before the chunk writes the definitions.
        let tracks: Vec<u32> = events
            .iter()
            .map(|e| match e {
                OsEv::Span { tid, .. } | OsEv::Instant { tid, .. } => self.side.track(*tid),
                OsEv::Counter {
                    prefix, unit, tid, ..
                } => self.side.counter_track(&format!("{prefix}{tid}"), unit),
            })
            .collect();
        let meta: Vec<(u32, String)> = stop
            .map(|(_, json)| json)
            .into_iter()
            .flatten()
            .map(|(key, json)| (self.side.string(key), json.clone()))
            .collect();
        let mut enc = self.side.begin_chunk();
        for (ev, track) in events.iter().zip(tracks) {
            match ev {
                OsEv::Span {
                    start,
                    end,
                    cat,
                    name,
                    args,
                    ..
                } => {
                    enc.u8(tag::SPAN);
                    enc.uv(u64::from(track));
                    enc.ts(*start);
                    enc.uv(end.saturating_sub(*start).max(0) as u64);
                    enc.u8(Level::Os.code());
                    enc.uv(u64::from(*cat));
                    enc.uv(u64::from(*name));
                    write_args(&mut enc, args);
                }
                OsEv::Instant {
                    ts,
                    cat,
                    name,
                    args,
                    ..
                } => {
                    enc.u8(tag::INSTANT);
                    enc.uv(u64::from(track));
                    enc.ts(*ts);
                    enc.u8(Level::Os.code());
                    enc.uv(u64::from(*cat));
                    enc.uv(u64::from(*name));
                    write_args(&mut enc, args);
                }
                OsEv::Counter { ts, value, .. } => {
                    enc.u8(tag::COUNTER);
                    enc.uv(u64::from(track));
                    enc.ts(*ts);
                    enc.f64(*value);
                }
            }
        }
        self.side.end_chunk(enc, &meta, stop.map(|(ts, _)| ts))
    }
}

fn write_args(enc: &mut Enc, args: &Option<String>) {
    match args {
        None => enc.u8(0),
        Some(a) => {
            enc.u8(FLAG_ARGS);
            enc.text(a);
        }
    }
}

pub(crate) fn ppid_of(pid: i32) -> i32 {
    // `/proc/PID/stat`: `pid (comm) state ppid ...`; comm may hold spaces or parentheses.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let rest = &s[s.rfind(')')? + 1..];
            rest.split_whitespace().nth(1)?.parse().ok()
        })
        .unwrap_or(0)
}

/// The time the program's threads wait for a CPU that a thread of the launcher (this
/// collector, the sample collector) holds: per CPU, since when a launcher thread runs there;
/// per runnable program thread, the CPU whose run queue it is on (the CPU it was preempted
/// on, a wakeup's `target_cpu`, a migration's `dest_cpu`). The wait is the overlap of the two,
/// settled at every change of either.
#[derive(Debug, Default)]
struct CollectorWait {
    launcher: std::collections::HashSet<i32>,
    on_cpu: HashMap<u32, i64>,
    /// Runnable program thread -> (its CPU, time settled up to).
    queued: HashMap<i32, (u32, i64)>,
    /// Program thread -> ns waited so far.
    waited: HashMap<i32, i64>,
}

impl CollectorWait {
    /// Re-reads the launcher's threads (`/proc/self/task`).
    fn refresh_launcher(&mut self) {
        if let Ok(dir) = std::fs::read_dir("/proc/self/task") {
            self.launcher = dir
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect();
        }
    }

    fn is_launcher(&self, tid: i32) -> bool {
        self.launcher.contains(&tid)
    }

    /// Adds `tid`'s wait up to `ts`; returns its new total when it grew.
    fn settle(&mut self, tid: i32, ts: i64) -> Option<(i32, i64)> {
        let (cpu, at) = self.queued.get_mut(&tid)?;
        let from = self.on_cpu.get(cpu).map(|&l| l.max(*at));
        *at = ts;
        let add = from.map_or(0, |f| ts - f);
        if add <= 0 {
            return None;
        }
        let total = self.waited.entry(tid).or_insert(0);
        *total += add;
        Some((tid, *total))
    }

    /// Settles every thread queued on `cpu` (a launcher thread comes or goes there).
    fn settle_cpu(&mut self, cpu: u32, ts: i64) -> Vec<(i32, i64)> {
        let tids: Vec<i32> = self
            .queued
            .iter()
            .filter(|(_, q)| q.0 == cpu)
            .map(|(&t, _)| t)
            .collect();
        tids.into_iter()
            .filter_map(|t| self.settle(t, ts))
            .collect()
    }

    fn launcher_in(&mut self, cpu: u32, ts: i64) -> Vec<(i32, i64)> {
        let grown = self.settle_cpu(cpu, ts);
        self.on_cpu.insert(cpu, ts);
        grown
    }

    fn launcher_out(&mut self, cpu: u32, ts: i64) -> Vec<(i32, i64)> {
        let grown = self.settle_cpu(cpu, ts);
        self.on_cpu.remove(&cpu);
        grown
    }

    /// `tid` is runnable on `cpu` from `ts` (or moves there).
    fn queue(&mut self, tid: i32, cpu: u32, ts: i64) -> Option<(i32, i64)> {
        let grown = self.settle(tid, ts);
        self.queued.insert(tid, (cpu, ts));
        grown
    }

    /// `tid` stops being runnable at `ts` (it runs, or blocks).
    fn dequeue(&mut self, tid: i32, ts: i64) -> Option<(i32, i64)> {
        let grown = self.settle(tid, ts);
        self.queued.remove(&tid);
        grown
    }
}

/// The collecting thread's state.
struct Collector {
    options: OsOptions,
    sources: Sources,
    /// The system-call buffers (indices into `sources.samplers`) whose last record read was a
    /// LOST record: [`Body::SyscallsLost`] goes before their next record.
    lost_gap: std::collections::HashSet<usize>,
    threads: HashMap<i32, Thread>,
    files: HashMap<i32, OsFile>,
    failed: Vec<PathBuf>,
    pending: Vec<KEvent>,
    seq: u64,
    summary: OsSummary,
    throttling: crate::Throttling,
    wait: CollectorWait,
    start_ts: i64,
    cat_state: HashMap<i32, [u32; 3]>,
}

/// Events younger than this, counted from the start of the drain that read them, stay pending
/// (another CPU's buffer may still hold older ones: the kernel stamps a record before it
/// writes it).
const HOLDBACK_NS: i64 = 30_000_000;

impl Collector {
    fn new(options: OsOptions, sources: Sources) -> Collector {
        let start_ts = crate::now_ns();
        let mut c = Collector {
            lost_gap: Default::default(),
            options,
            sources,
            threads: HashMap::new(),
            files: HashMap::new(),
            failed: Vec::new(),
            pending: Vec::new(),
            seq: 0,
            summary: OsSummary::default(),
            throttling: crate::Throttling::default(),
            wait: CollectorWait::default(),
            start_ts,
            cat_state: HashMap::new(),
        };
        let root = c.options.root_pid;
        c.add_thread(root, root, ppid_of(root));
        c.wait.refresh_launcher();
        c
    }

    /// Writes the grown collector-wait totals (`(tid, total ns)`) at `ts` as counter samples.
    fn note_wait(&mut self, grown: impl IntoIterator<Item = (i32, i64)>, ts: i64) {
        for (tid, total) in grown {
            let Some(tgid) = self.threads.get(&tid).map(|t| t.tgid) else {
                continue;
            };
            if let Some(f) = self.files.get_mut(&tgid) {
                f.events.push(OsEv::Counter {
                    prefix: COLLECTOR_WAIT_COUNTER_PREFIX,
                    unit: "ns",
                    tid,
                    ts,
                    value: total as f64,
                });
                f.last_ts = f.last_ts.max(ts);
            }
        }
    }

    fn add_thread(&mut self, tid: i32, tgid: i32, ppid: i32) {
        self.threads.insert(
            tid,
            Thread {
                tgid,
                now: Now::Unknown,
                syscall: None,
                os_events: 0,
                sampled: (0, i64::MIN),
            },
        );
        if !self.files.contains_key(&tgid) {
            match OsFile::open(
                &self.options.dir,
                tgid,
                ppid,
                self.start_ts,
                self.options.level,
            ) {
                Ok(f) => {
                    self.files.insert(tgid, f);
                }
                Err(OsError::Io { path, .. }) => self.failed.push(path),
                Err(_) => {}
            }
        }
    }

    fn run(&mut self, stop: &AtomicBool) -> OsSummary {
        let mut last_flush = crate::now_ns();
        loop {
            let stopping = stop.load(Ordering::Acquire);
            // The horizon counts from the drain's start, not its end: an event stamped after
            // the drain began may still sit in a buffer read earlier in the drain, and a slow
            // drain (a loaded machine, many records) must not let it be handled out of order
            // (a system call's exit before its entry loses the call).
            let drain_started = crate::now_ns();
            self.drain();
            let horizon = if stopping {
                i64::MAX
            } else {
                drain_started - HOLDBACK_NS
            };
            self.process(horizon);
            let now = crate::now_ns();
            if stopping {
                self.finish(now);
                break;
            }
            if now - last_flush >= self.options.flush_interval.as_nanos() as i64 {
                self.flush_all(None, None);
                self.wait.refresh_launcher();
                last_flush = now;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut summary = std::mem::take(&mut self.summary);
        summary.processes = self.files.len();
        summary.threads = self.threads.len();
        summary.files = SideFile::sorted_paths(self.files.values().map(|f| &f.side));
        summary.collector_cpu_ns = crate::read_clock(libc::CLOCK_THREAD_CPUTIME_ID);
        summary
    }

    fn drain(&mut self) {
        let Collector {
            sources,
            pending,
            seq,
            summary,
            throttling,
            lost_gap,
            ..
        } = self;
        for (index, (kind, sampler)) in sources.samplers.iter_mut().enumerate() {
            let format = &sources.formats[&kind_code(*kind)];
            while let Some(record) = sampler.next_record() {
                let Ok(parsed) = record.parse_record() else {
                    continue;
                };
                match parsed {
                    PerfRecord::Sample(sample) => {
                        summary.records_read += 1;
                        let (Some(raw), Some(ts), Some(tid), Some(pid)) =
                            (sample.raw(), sample.time(), sample.tid(), sample.pid())
                        else {
                            continue;
                        };
                        // A LOST record (which has no time here) of this buffer is placed
                        // right before the first record after it, where the gap ended.
                        if lost_gap.remove(&index) {
                            *seq += 1;
                            pending.push(KEvent {
                                ts: ts as i64 - 1,
                                seq: *seq,
                                tid: -1,
                                pid: -1,
                                cpu: u32::MAX,
                                body: Body::SyscallsLost,
                            });
                        }
                        let f = |name: &str| format.field(raw, name);
                        let body = match kind {
                            Kind::Switch => Body::Switch {
                                prev: f("prev_pid").unwrap_or(-1) as i32,
                                prev_state: f("prev_state").unwrap_or(0),
                                next: f("next_pid").unwrap_or(-1) as i32,
                            },
                            Kind::Wakeup => Body::Wakeup {
                                woken: f("pid").unwrap_or(-1) as i32,
                                target_cpu: f("target_cpu").unwrap_or(-1),
                            },
                            Kind::Migrate => Body::Migrate {
                                task: f("pid").unwrap_or(-1) as i32,
                                from: f("orig_cpu").unwrap_or(-1),
                                to: f("dest_cpu").unwrap_or(-1),
                            },
                            Kind::NewTask => Body::NewTask {
                                child: f("pid").unwrap_or(-1) as i32,
                                thread: f("clone_flags").unwrap_or(0)
                                    & i64::from(libc::CLONE_THREAD)
                                    != 0,
                            },
                            Kind::SysEnter => Body::SysEnter {
                                id: f("id").unwrap_or(-1),
                            },
                            Kind::SysExit => Body::SysExit {
                                id: f("id").unwrap_or(-1),
                            },
                        };
                        *seq += 1;
                        pending.push(KEvent {
                            ts: ts as i64,
                            seq: *seq,
                            tid: tid as i32,
                            pid: pid as i32,
                            cpu: sample.cpu().unwrap_or(u32::MAX),
                            body,
                        });
                    }
                    PerfRecord::Lost(lost) => {
                        summary.lost += lost.lost;
                        if matches!(kind, Kind::SysEnter | Kind::SysExit) {
                            lost_gap.insert(index);
                        }
                    }
                    PerfRecord::Throttle(t) => {
                        summary.throttled += 1;
                        throttling.throttle(t.id, t.time as i64);
                    }
                    PerfRecord::Unthrottle(t) => throttling.unthrottle(t.id, t.time as i64),
                    _ => {}
                }
            }
        }
    }

    fn process(&mut self, horizon: i64) {
        let mut pending = std::mem::take(&mut self.pending);
        pending.sort_unstable_by_key(|e| (e.ts, e.seq));
        let cut = pending.partition_point(|e| e.ts < horizon);
        let rest = pending.split_off(cut);
        for e in pending {
            self.handle(e);
        }
        self.pending = rest;
    }

    fn strings(&mut self, tgid: i32) -> Option<[u32; 3]> {
        if let Some(s) = self.cat_state.get(&tgid) {
            return Some(*s);
        }
        let f = self.files.get_mut(&tgid)?;
        let s = [
            f.side.string(THREAD_STATE_CATEGORY),
            f.side.string(SYSCALL_CATEGORY),
            f.side.string("sched"),
        ];
        self.cat_state.insert(tgid, s);
        Some(s)
    }

    fn state_span(
        &mut self,
        tid: i32,
        start: i64,
        end: i64,
        state: ThreadState,
        args: Option<String>,
    ) {
        let Some(tgid) = self.threads.get(&tid).map(|t| t.tgid) else {
            return;
        };
        let Some([cat, _, _]) = self.strings(tgid) else {
            return;
        };
        if end <= start {
            return;
        }
        if let Some(f) = self.files.get_mut(&tgid) {
            let name = f.side.string(state.as_str());
            f.events.push(OsEv::Span {
                tid,
                start,
                end,
                cat,
                name,
                args,
            });
            f.last_ts = f.last_ts.max(end);
            self.summary.state_spans += 1;
        }
    }

    /// Counts one OS book-keeping event in `tid` (a system call, a switch out).
    fn count_os_event(&mut self, tid: i32) {
        if let Some(t) = self.threads.get_mut(&tid) {
            t.os_events += 1;
            self.summary.os_events += 1;
        }
    }

    /// Writes `tid`'s OS-event counter at `ts` when it grew since its last sample (always when
    /// `force`, else only [`OS_EVENTS_SAMPLE_NS`] after that sample).
    fn sample_os_events(&mut self, tid: i32, ts: i64, force: bool) {
        let Some(t) = self.threads.get_mut(&tid) else {
            return;
        };
        if t.os_events == t.sampled.0
            || (!force && ts.saturating_sub(t.sampled.1) < OS_EVENTS_SAMPLE_NS)
        {
            return;
        }
        t.sampled = (t.os_events, ts);
        let (count, tgid) = (t.os_events, t.tgid);
        if let Some(f) = self.files.get_mut(&tgid) {
            f.events.push(OsEv::Counter {
                prefix: OS_EVENTS_COUNTER_PREFIX,
                unit: "count",
                tid,
                ts,
                value: count as f64,
            });
            f.last_ts = f.last_ts.max(ts);
        }
    }

    /// Ends `tid`'s current state at `ts` (a span when it is known).
    fn close_state(&mut self, tid: i32, ts: i64, woken_by: Option<i32>) {
        let Some(now) = self.threads.get(&tid).map(|t| t.now) else {
            return;
        };
        match now {
            Now::Unknown => {}
            Now::On(since) => self.state_span(tid, since, ts, ThreadState::Running, None),
            Now::Off {
                since,
                state,
                syscall,
            } => {
                let mut args = serde_args(syscall, woken_by);
                if state == ThreadState::Runnable {
                    args = None;
                }
                self.state_span(tid, since, ts, state, args);
            }
        }
    }

    fn handle(&mut self, e: KEvent) {
        // A task of a known process we had not met (created before the recorder attached).
        if !self.threads.contains_key(&e.tid) && e.tid > 0 {
            if let Some(tgid) = self
                .threads
                .values()
                .find(|t| t.tgid == e.pid)
                .map(|t| t.tgid)
            {
                self.add_thread(e.tid, tgid, 0);
            }
        }
        match e.body {
            Body::Switch {
                prev,
                prev_state,
                next,
            } => {
                // A launcher thread leaving or taking this CPU settles the program threads
                // waiting on it.
                if self.wait.is_launcher(prev) {
                    let grown = self.wait.launcher_out(e.cpu, e.ts);
                    self.note_wait(grown, e.ts);
                }
                if self.wait.is_launcher(next) {
                    let grown = self.wait.launcher_in(e.cpu, e.ts);
                    self.note_wait(grown, e.ts);
                }
                if self.threads.contains_key(&prev) {
                    self.close_state(prev, e.ts, None);
                    self.count_os_event(prev);
                    self.sample_os_events(prev, e.ts, true);
                    if let Some(tgid) = self.threads.get(&prev).map(|t| t.tgid) {
                        if let Some(f) = self.files.get_mut(&tgid) {
                            f.switches += 1;
                        }
                    }
                    self.summary.switches += 1;
                    if prev_state & STATE_EXITING != 0 {
                        if let Some(t) = self.threads.get_mut(&prev) {
                            t.now = Now::Unknown;
                        }
                    } else {
                        let syscall = self
                            .threads
                            .get(&prev)
                            .and_then(|t| t.syscall)
                            .and_then(|(id, _)| syscall_name(id));
                        // Asleep in a file call (disk, pipe or socket wait) is I/O; asleep
                        // outside any call (a page fault) is `other`.
                        let state = if prev_state == 0 || prev_state & STATE_PREEMPTED != 0 {
                            ThreadState::Runnable
                        } else {
                            blocked_cause(syscall)
                        };
                        let grown = if state == ThreadState::Runnable {
                            self.wait.queue(prev, e.cpu, e.ts)
                        } else {
                            self.wait.dequeue(prev, e.ts)
                        };
                        self.note_wait(grown, e.ts);
                        if let Some(t) = self.threads.get_mut(&prev) {
                            t.now = Now::Off {
                                since: e.ts,
                                state,
                                syscall,
                            };
                        }
                    }
                }
                if self.threads.contains_key(&next) {
                    let grown = self.wait.dequeue(next, e.ts);
                    self.note_wait(grown, e.ts);
                    self.close_state(next, e.ts, None);
                    if let Some(t) = self.threads.get_mut(&next) {
                        t.now = Now::On(e.ts);
                    }
                }
            }
            Body::Wakeup { woken, target_cpu } => {
                let Some(now) = self.threads.get(&woken).map(|t| t.now) else {
                    return;
                };
                if !matches!(now, Now::On(_)) {
                    if let Ok(cpu) = u32::try_from(target_cpu) {
                        let grown = self.wait.queue(woken, cpu, e.ts);
                        self.note_wait(grown, e.ts);
                    }
                }
                self.summary.wakeups += 1;
                if let Some(tgid) = self.threads.get(&woken).map(|t| t.tgid) {
                    if let Some(f) = self.files.get_mut(&tgid) {
                        f.wakeups += 1;
                    }
                }
                match now {
                    Now::On(_) => {}
                    Now::Off {
                        state: ThreadState::Runnable,
                        ..
                    } => {}
                    _ => {
                        self.close_state(woken, e.ts, Some(e.tid));
                        if let Some(t) = self.threads.get_mut(&woken) {
                            t.now = Now::Off {
                                since: e.ts,
                                state: ThreadState::Runnable,
                                syscall: None,
                            };
                        }
                    }
                }
            }
            Body::Migrate { task, from, to } => {
                let Some(tgid) = self.threads.get(&task).map(|t| t.tgid) else {
                    return;
                };
                if self.wait.queued.contains_key(&task) {
                    if let Ok(cpu) = u32::try_from(to) {
                        let grown = self.wait.queue(task, cpu, e.ts);
                        self.note_wait(grown, e.ts);
                    }
                }
                let Some([_, _, sched]) = self.strings(tgid) else {
                    return;
                };
                self.summary.migrations += 1;
                if let Some(f) = self.files.get_mut(&tgid) {
                    let name = f.side.string("migrate");
                    f.events.push(OsEv::Instant {
                        tid: task,
                        ts: e.ts,
                        cat: sched,
                        name,
                        args: Some(format!("{{\"from\":{from},\"to\":{to}}}")),
                    });
                    f.migrations += 1;
                }
            }
            Body::NewTask { child, thread } => {
                let Some(parent_tgid) = self.threads.get(&e.tid).map(|t| t.tgid) else {
                    return;
                };
                let (tgid, ppid) = if thread {
                    (parent_tgid, 0)
                } else {
                    (child, parent_tgid)
                };
                self.add_thread(child, tgid, ppid);
                let grown = self.wait.queue(child, e.cpu, e.ts);
                self.note_wait(grown, e.ts);
                if let Some(t) = self.threads.get_mut(&child) {
                    t.now = Now::Off {
                        since: e.ts,
                        state: ThreadState::Runnable,
                        syscall: None,
                    };
                }
            }
            Body::SyscallsLost => {
                for t in self.threads.values_mut() {
                    t.syscall = None;
                }
            }
            Body::SysEnter { id } => {
                // Counted at entry: every call is, even one whose exit is read out of order or
                // never (the thread ended in it); its time needs the matched exit (below).
                if let Some(t) = self.threads.get_mut(&e.tid) {
                    t.syscall = Some((id, e.ts));
                    let tgid = t.tgid;
                    self.summary.syscalls += 1;
                    if let Some(f) = self.files.get_mut(&tgid) {
                        let name = syscall_name(id).unwrap_or("unknown");
                        f.syscalls.entry(name).or_default().count += 1;
                    }
                }
                self.count_os_event(e.tid);
            }
            Body::SysExit { id } => {
                self.sample_os_events(e.tid, e.ts, false);
                let Some(t) = self.threads.get_mut(&e.tid) else {
                    return;
                };
                let Some((entered, start)) = t.syscall.take() else {
                    return;
                };
                if entered != id {
                    return;
                }
                let tgid = t.tgid;
                let name = syscall_name(id).unwrap_or("unknown");
                let dur = e.ts - start;
                let slow = dur >= self.options.slow_syscall_ns;
                let Some([_, cat, _]) = self.strings(tgid) else {
                    return;
                };
                if let Some(f) = self.files.get_mut(&tgid) {
                    let entry = f.syscalls.entry(name).or_default();
                    entry.timed += 1;
                    entry.time_ns += dur;
                    if slow {
                        let name_id = f.side.string(name);
                        f.events.push(OsEv::Span {
                            tid: e.tid,
                            start,
                            end: e.ts,
                            cat,
                            name: name_id,
                            args: None,
                        });
                        self.summary.slow_syscalls += 1;
                    }
                }
            }
        }
    }

    fn flush_all(&mut self, stop_ts: Option<i64>, collector: Option<String>) {
        let (faults, major) = (
            self.sources.faults.as_mut().and_then(|c| c.read().ok()),
            self.sources
                .major_faults
                .as_mut()
                .and_then(|c| c.read().ok()),
        );
        let root = self.options.root_pid;
        let lost = self.summary.lost;
        let throttled = self.throttling.json();
        let mut waited_by_process: HashMap<i32, i64> = HashMap::new();
        for (tid, ns) in &self.wait.waited {
            if let Some(t) = self.threads.get(tid) {
                *waited_by_process.entry(t.tgid).or_insert(0) += ns;
            }
        }
        for f in self.files.values_mut() {
            let meta = stop_ts.map(|ts| {
                let mut meta = Vec::new();
                let mut calls: Vec<_> = f.syscalls.iter().collect();
                calls.sort_by(|a, b| b.1.time_ns.cmp(&a.1.time_ns).then(a.0.cmp(b.0)));
                let calls: Vec<String> = calls
                    .iter()
                    .map(|(n, c)| {
                        format!(
                            "{{\"name\":\"{n}\",\"count\":{},\"timed\":{},\"time_ns\":{}}}",
                            c.count, c.timed, c.time_ns
                        )
                    })
                    .collect();
                let faults = if f.side.pid == root {
                    format!(
                        ",\"page_faults_tree\":{},\"major_page_faults_tree\":{}",
                        faults.map_or("null".into(), |v| v.to_string()),
                        major.map_or("null".into(), |v| v.to_string())
                    )
                } else {
                    String::new()
                };
                meta.push((
                    OS_METADATA_KEY,
                    format!(
                        "{{\"switches\":{},\"wakeups\":{},\"migrations\":{},\"runnable_behind_collector_ns\":{},\"lost_records_all_processes\":{lost},\"throttled_all_processes\":{throttled},\"syscalls\":[{}]{faults}}}",
                        f.switches,
                        f.wakeups,
                        f.migrations,
                        waited_by_process.get(&f.side.pid).copied().unwrap_or(0),
                        calls.join(",")
                    ),
                ));
                if let Some(c) = collector.as_ref().filter(|_| f.side.pid == root) {
                    meta.push((OS_COLLECTOR_METADATA_KEY, c.clone()));
                }
                (ts, meta)
            });
            if f.flush(meta.as_ref().map(|(ts, m)| (*ts, &m[..]))).is_err() {
                self.failed.push(f.side.path.clone());
                f.side.file = None;
            }
        }
    }

    fn finish(&mut self, now: i64) {
        // Records dropped with no LOST record read for them (the kernel writes one only when
        // it next writes to that buffer, so a drop near the end goes unreported otherwise):
        // the kernel's count per event, where it keeps one, is the figure.
        let kernel_lost = kernel_lost(self.sources.samplers.iter_mut().map(|(_, s)| s));
        self.summary.lost = self.summary.lost.max(kernel_lost);
        self.throttling.finish(now);
        self.summary.throttled_ns = self.throttling.throttled_ns;
        // Settle every wait still open, then close every open state at the end.
        let queued: Vec<i32> = self.wait.queued.keys().copied().collect();
        for tid in queued {
            let grown = self.wait.dequeue(tid, now);
            self.note_wait(grown, now);
        }
        self.summary.collector_wait_ns = self.wait.waited.values().sum();
        let tids: Vec<i32> = self.threads.keys().copied().collect();
        for tid in tids {
            self.close_state(tid, now, None);
            self.sample_os_events(tid, now, true);
            if let Some(t) = self.threads.get_mut(&tid) {
                t.now = Now::Unknown;
            }
        }
        // The collector's own cost so far (what is left to write is a small part of it).
        let collector = format!(
            "{{\"cpu_ns\":{},\"records\":{},\"program_wait_ns\":{}}}",
            crate::read_clock(libc::CLOCK_THREAD_CPUTIME_ID),
            self.summary.records_read,
            self.summary.collector_wait_ns
        );
        self.flush_all(Some(now), Some(collector));
        for p in std::mem::take(&mut self.failed) {
            eprintln!(
                "strato record --os: cannot write {}; OS events lost",
                p.display()
            );
        }
    }
}

fn serde_args(syscall: Option<&str>, woken_by: Option<i32>) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(s) = syscall {
        parts.push(format!("\"syscall\":\"{s}\""));
    }
    if let Some(w) = woken_by {
        parts.push(format!("\"woken_by\":{w}"));
    }
    (!parts.is_empty()).then(|| format!("{{{}}}", parts.join(",")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_follow_the_system_call() {
        assert_eq!(blocked_cause(Some("futex")), ThreadState::BlockedLock);
        assert_eq!(
            blocked_cause(Some("clock_nanosleep")),
            ThreadState::BlockedSleep
        );
        assert_eq!(blocked_cause(Some("fsync")), ThreadState::BlockedIo);
        assert_eq!(blocked_cause(Some("wait4")), ThreadState::BlockedOther);
        assert_eq!(blocked_cause(None), ThreadState::BlockedOther);
        for s in ThreadState::ALL {
            assert_eq!(ThreadState::from_name(s.as_str()), Some(s));
        }
    }

    #[test]
    fn collector_wait_is_the_overlap_of_queued_and_launcher_on_the_same_cpu() {
        let mut w = CollectorWait::default();
        w.launcher.insert(99);
        // Thread 5 preempted on CPU 0 at 100; the launcher runs there 150..250; 5 runs at 300.
        assert_eq!(w.queue(5, 0, 100), None);
        assert_eq!(w.launcher_in(0, 150), vec![]);
        assert_eq!(w.launcher_out(0, 250), vec![(5, 100)]);
        assert_eq!(w.dequeue(5, 300), None);
        // Thread 6 woken onto CPU 1 at 400, where the launcher runs since 350; it migrates to
        // CPU 0 (no launcher) at 450 and runs at 500: 50 ns behind the launcher.
        assert_eq!(w.launcher_in(1, 350), vec![]);
        assert_eq!(w.queue(6, 1, 400), None);
        assert_eq!(w.queue(6, 0, 450), Some((6, 50)));
        assert_eq!(w.dequeue(6, 500), None);
        // Thread 5 queued on CPU 1 from 600 (the launcher still there) until it runs at 700.
        assert_eq!(w.queue(5, 1, 600), None);
        assert_eq!(w.dequeue(5, 700), Some((5, 200)));
        assert_eq!(w.waited.values().sum::<i64>(), 250);
        assert!(w.queued.is_empty());
        assert!(w.is_launcher(99) && !w.is_launcher(5));
    }

    #[test]
    fn syscall_names_come_from_the_table() {
        #[cfg(target_arch = "x86_64")]
        {
            assert_eq!(syscall_name(202), Some("futex"));
            assert_eq!(syscall_name(74), Some("fsync"));
        }
        assert_eq!(syscall_name(-1), None);
    }
}
