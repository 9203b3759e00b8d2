//! Linux `perf` traces recorded elsewhere (issue 19, item 4): a `perf.data` file (read through
//! the `linux-perf-data` crate) or the text `perf script` prints, put on the same OS level that
//! `strato record --os` fills, so a trace taken with the tools people already have joins the
//! profile of a recording ([`join`]).
//!
//! This module owns the reading of both forms into one event stream ([`Ev`]) and the thread
//! state machine over it ([`Builder`]), the same rules as the live recorder
//! (`strato_record::os`):
//! - `sched:sched_switch` ends the previous task's state and starts the next one's `running`;
//!   the previous task goes `runnable` when preempted (`prev_state` `R`/`R+`), else blocked with
//!   the cause of the system call it was in ([`blocked_cause`]: futex -> lock, nanosleep ->
//!   sleep, read/write/fsync/... -> io, none or another call -> other); a dead task (`X`/`Z`)
//!   has no state after it;
//! - `sched:sched_wakeup` / `sched_wakeup_new` end a blocked state (the state goes `runnable`);
//! - `PERF_RECORD_SWITCH` (`perf record --switch-events`; in text with
//!   `perf script --show-switch-events`) is a switch-out
//!   (preempted or not) or a switch-in of the task it belongs to;
//! - any event that fires in a task's own context (a sample, a system call, a page fault, the
//!   waker of a wakeup) shows the task running: when its switch-in was not recorded (a per-task
//!   `perf record` sees its tasks switch out but not in), its off-CPU state ends there and the
//!   count `switch_in_not_recorded` says how often (record with `-a` or `--switch-events` for
//!   exact switch-ins);
//! - `raw_syscalls:sys_enter`/`sys_exit` (names from this machine's system-call table) and
//!   `syscalls:sys_enter_NAME`/`sys_exit_NAME`: system calls of at least
//!   [`SLOW_SYSCALL_NS`] become spans (category `syscall`), all are counted in the rank's
//!   metadata;
//! - `sched:sched_migrate_task`: instants (category `sched`, name `migrate`);
//! - page-fault events (`page-faults`, `major-faults`, `minor-faults`,
//!   `exceptions:page_fault_user`/`_kernel`): instants, category `page_fault`;
//! - any other sampled event (`cpu-clock`, `cycles`, ...): CPU samples, instants of category
//!   `cpu_sample` named by the call stack folded outermost first, each frame `symbol [module]`
//!   (the representation `strato record --sample` writes, so the flame graphs and the folded /
//!   Firefox exports read them alike): from the text's call-stack lines, or, in `perf.data`,
//!   the sample's call chain symbolized through the file's mappings ([`Symbolizer`]); perf's
//!   own symbols (leaf first) in args.
//!
//! Thread states are spans of category [`THREAD_STATE_CATEGORY`] on the thread's own track
//! (`Thread { pid, tid }`), Level `Os`; no state before a thread's first event or after its
//! last. Task 0 (the idle task) has none.
//!
//! Clock: `perf` stamps events with its default clock (the kernel's `local_clock`, not
//! `CLOCK_MONOTONIC`) unless recorded with `-k mono` (`--clockid`). The clock is read from the
//! `perf.data` attributes (`use_clockid`/`clockid`), or from the `# clockid:` line of
//! `perf script --header`; a text without it is on an unknown clock. Only a trace on
//! `CLOCK_MONOTONIC` — the recorder's clock — joins a recording's threads ([`join`]), with
//! alignment error 0 by construction (plus the text's resolution: 1 µs, or 1 ns with
//! `perf script --ns`), and [`join`] checks that the joined events fall in the recording's
//! window. Anything else stays its own rank, and a note says why.
//!
//! Bad input (truncated `perf.data`, a record that does not parse, a text line that is not an
//! event line) is one error naming the file and, for text, the line.
//!
//! Layout: this module owns the entry points, the event stream both readers produce ([`Ev`])
//! and joining a recording ([`join`]). [`script`] reads the text, [`data`] reads `perf.data`
//! (with [`symbols`] symbolizing its call chains), and both feed [`state`], the thread state
//! machine; the readers use the state machine, never the other way round.

mod data;
mod script;
mod state;
mod symbols;

use rustc_hash::FxHashMap;
use strato_trace::metadata::PerfJoin;
use strato_trace::{ClockDomain, RankId, SourceFormat, Trace, TrackId, TrackKind};

use crate::error::{Error, ErrorKind, Result};
pub use data::import_data;
pub use script::import_script;
use script::{parse_line, HeaderBlock};

/// The category of thread-state spans (as the live recorder and the nsys importer write them).
pub use strato_trace::names::THREAD_STATE_CATEGORY;
/// System calls at least this long become spans (the live recorder's default too).
pub const SLOW_SYSCALL_NS: i64 = 100_000;
/// Joined events outside the recording's window by more than this are counted as misaligned.
pub const JOIN_SLACK_NS: i64 = 1_000_000_000;

/// Whether `head` starts a `perf.data` file (file or pipe mode, either byte order).
pub fn is_perf_data_head(head: &[u8]) -> bool {
    head.starts_with(b"PERFILE2") || head.starts_with(b"2ELIFREP")
}

/// Whether `head` looks like `perf script` output: its first line that is neither empty nor a
/// `#` comment parses as an event line (`COMM PID[/TID] [CPU] SECONDS: ...`).
pub fn is_perf_script_head(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(head);
    let mut header = HeaderBlock::default();
    for line in text.lines() {
        let trimmed = line.trim();
        if header.skip(line) || trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        return !line.starts_with('\t') && parse_line(line).is_some();
    }
    false
}

/// How the task that switched out left the CPU (`prev_state` of `sched_switch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Left {
    /// Preempted or yielded while runnable (`R`, `R+`).
    Runnable,
    /// Asleep (`S`, `D`, `I`, stopped, ...): blocked, cause from its system call.
    Asleep,
    /// Exiting (`X`, `Z`): no state after it.
    Dead,
}

/// `prev_state` as `perf script` prints it (`R`, `R+`, `S`, `D`, `X`, `Z`, `T`, `t`, `I`,
/// `P`, combinations like `D|K`).
fn left_from_letters(state: &str) -> Left {
    let s = state.trim();
    if s.is_empty() || s.starts_with('R') {
        Left::Runnable
    } else if s.contains('X') || s.contains('Z') {
        Left::Dead
    } else {
        Left::Asleep
    }
}

/// `prev_state` as the kernel writes it: the task-state index as one bit, and
/// `TASK_REPORT_MAX` (0x100 since 4.14) for a preempted task; 0 is runnable.
fn left_from_bits(state: i64) -> Left {
    if state == 0 || state & 0x100 != 0 {
        Left::Runnable
    } else if state & (0x10 | 0x20) != 0 {
        Left::Dead
    } else {
        Left::Asleep
    }
}

/// One event of either form, in the context of the task it fired in.
#[derive(Debug, Clone, PartialEq)]
enum Ev {
    Switch {
        prev: i32,
        left: Left,
        next: i32,
    },
    SwitchOut {
        preempted: bool,
    },
    SwitchIn,
    Wakeup {
        woken: i32,
    },
    Migrate {
        task: i32,
        from: i64,
        to: i64,
    },
    SysEnter {
        name: String,
    },
    SysExit {
        name: Option<String>,
    },
    PageFault {
        event: String,
    },
    Sample {
        event: String,
        /// The call chain, leaf first (just the leaf without one; empty when nothing names it).
        frames: Vec<Frame>,
    },
    Exit,
    /// A task was created (`tid` of process `pid`).
    Fork {
        pid: i32,
        tid: i32,
    },
    /// A record perf adds beside the samples (`COMM`, `MMAP`, ...): says nothing of the state.
    SideBand,
    /// An event this importer does not use (counted in the metadata).
    Other,
}

/// One frame of a sample's call chain.
#[derive(Debug, Clone, PartialEq)]
struct Frame {
    /// The symbol as perf names it (args `stack`).
    symbol: String,
    /// `symbol [module]` ([`strato_record::sample::frame_label`]): the frame in the sample's
    /// folded name.
    label: String,
}

/// Where and when an event fired.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Header {
    ts: i64,
    pid: Option<i32>,
    tid: i32,
}

/// The name of system call `nr` on this machine's architecture (`syscall_NR` when unknown).
fn syscall_name(nr: i64) -> String {
    usize::try_from(nr)
        .ok()
        .and_then(syscalls::Sysno::new)
        .map_or_else(|| format!("syscall_{nr}"), |s| s.name().to_owned())
}

fn is_page_fault(event: &str) -> bool {
    matches!(
        event,
        "page-faults" | "faults" | "major-faults" | "minor-faults"
    ) || event.starts_with("exceptions:page_fault")
}

// ---------------------------------------------------------------------------------------------
// Joining a recording.

/// Adds `perf` (one imported perf trace) to `timeline`. When both are on `CLOCK_MONOTONIC` and
/// `timeline` holds stratoscope recordings, each perf thread whose tid is a thread of a
/// recording has its events moved onto that thread's own track (same rank, same pid), so the
/// breakdown reads its states; other threads stay on the perf rank. The join is checked: at
/// least half of the joined events must fall within the recording's window (±
/// [`JOIN_SLACK_NS`]), else the clocks disagree and it is an error naming the file. A perf
/// trace on another clock is kept as its own rank, with a note saying why it was not joined.
pub fn join(timeline: &mut Trace, perf: Trace) -> Result<()> {
    let source = perf
        .ranks
        .first()
        .map(|r| r.source.clone())
        .unwrap_or_default();
    let recorded: Vec<RankId> = timeline
        .ranks
        .iter()
        .enumerate()
        .filter(|(_, r)| r.format == SourceFormat::Strato)
        .map(|(i, _)| RankId(i as u32))
        .collect();
    let monotonic = perf.clock.reference == ClockDomain::Monotonic;
    let base = timeline.ranks.len();
    let spans_base = timeline.spans.len();
    let instants_base = timeline.instants.len();
    timeline.append(perf);
    if recorded.is_empty() {
        return Ok(());
    }
    let perf_rank = RankId(base as u32);
    if !monotonic {
        timeline.ranks[base].notes.note(
            "not joined to the recording: the perf trace is not on CLOCK_MONOTONIC \
             (record with `perf record -k mono`)",
        );
        return Ok(());
    }
    // The recordings' thread tracks by tid, and their window.
    let mut by_tid: FxHashMap<i64, TrackId> = FxHashMap::default();
    for (i, t) in timeline.tracks.iter().enumerate() {
        if let TrackKind::Thread { tid, .. } = t.kind {
            if recorded.contains(&t.rank) {
                by_tid.entry(tid).or_insert(TrackId(i as u32));
            }
        }
    }
    let (mut lo, mut hi) = (i64::MAX, i64::MIN);
    for s in &timeline.spans[..spans_base] {
        if recorded.contains(&timeline.tracks[s.track.0 as usize].rank) {
            lo = lo.min(s.start);
            hi = hi.max(s.end);
        }
    }
    let mut remap: FxHashMap<TrackId, TrackId> = FxHashMap::default();
    for (i, t) in timeline.tracks.iter().enumerate() {
        if t.rank != perf_rank {
            continue;
        }
        if let TrackKind::Thread { tid, .. } = t.kind {
            if let Some(&target) = by_tid.get(&tid) {
                remap.insert(TrackId(i as u32), target);
            }
        }
    }
    let (mut joined, mut inside) = (0u64, 0u64);
    let within = |t: i64| lo <= hi && t >= lo - JOIN_SLACK_NS && t <= hi + JOIN_SLACK_NS;
    for s in &mut timeline.spans[spans_base..] {
        if let Some(&to) = remap.get(&s.track) {
            s.track = to;
            joined += 1;
            inside += u64::from(within(s.start) && within(s.end));
        }
    }
    for e in &mut timeline.instants[instants_base..] {
        if let Some(&to) = remap.get(&e.track) {
            e.track = to;
            joined += 1;
            inside += u64::from(within(e.ts));
        }
    }
    if joined > 0 && inside * 2 < joined {
        return Err(Error::new(
            source,
            ErrorKind::Perf(format!(
                "clock mismatch: only {inside} of {joined} events of the recording's threads \
                 fall within the recording's window; was it recorded with `perf record -k mono` \
                 on the same machine?"
            )),
        ));
    }
    let rank = &mut timeline.ranks[base];
    rank.notes
        .count("events_outside_recording_window", joined - inside);
    rank.metadata.set_joined(PerfJoin {
        events: joined,
        threads: remap.len() as u64,
    });
    Ok(())
}

#[cfg(test)]
mod tests;
