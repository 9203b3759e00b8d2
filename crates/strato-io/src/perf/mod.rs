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

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use linux_perf_data::linux_perf_event_reader::{
    ClockId, CommonData, ContextSwitchRecord, EventRecord, PerfClock, PerfEventType,
    RawEventRecord, ReadFormat, RecordType, SampleFormat, TaskWasPreempted,
};
use linux_perf_data::{Feature, PerfFileReader, PerfFileRecord};
use rustc_hash::FxHashMap;
use strato_record::os::{blocked_cause, ThreadState};
use strato_record::sample::{
    fold_leaf_first, frame_label, Module, FRAME_SEPARATOR, UNKNOWN_STACK, UNKNOWN_SYMBOL,
};
use strato_trace::{
    ClockDomain, ClockInfo, ClockSource, Instant, Level, MemoryTracker, Process, Rank, RankId,
    SourceFormat, Span, StrId, Trace, Track, TrackId, TrackKind,
};

use crate::error::{Error, ErrorKind, Result};
use crate::input::{classify, Input};
use crate::ImportOptions;

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

/// The `# ========` block `perf script --header` prints first: every line inside it is skipped
/// (its `# cmdline` may span lines that do not start with `#`, when the recorded command had
/// newlines in an argument).
#[derive(Debug, Default)]
struct HeaderBlock {
    seen_start: bool,
    done: bool,
}

impl HeaderBlock {
    /// Whether `line` belongs to the header block (the delimiters included).
    fn skip(&mut self, line: &str) -> bool {
        if self.done {
            return false;
        }
        let delimiter = line.trim_end() == "# ========";
        if !self.seen_start {
            if delimiter {
                self.seen_start = true;
                return true;
            }
            if !line.trim().is_empty() {
                // No header block: the text starts with events or plain comments.
                self.done = true;
            }
            return false;
        }
        if delimiter {
            self.done = true;
        }
        true
    }
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
// The thread state machine.

#[derive(Debug, Clone, Copy, PartialEq)]
enum Now {
    Unknown,
    On(i64),
    Off { since: i64, state: ThreadState },
}

#[derive(Debug)]
struct ThreadSt {
    pid: Option<i32>,
    comm: Option<String>,
    now: Now,
    /// The system call the thread is in: (name, entry time).
    syscall: Option<(String, i64)>,
    /// The call it was in when it switched out (for the span's args).
    blocked_in: Option<String>,
}

/// An event of the output, before its track is known.
#[derive(Debug)]
struct Pending {
    tid: i32,
    start: i64,
    end: Option<i64>,
    name: StrId,
    category: StrId,
    args: Option<String>,
}

/// Builds the trace of one perf input from its events (see the module docs).
struct Builder<'o> {
    options: &'o ImportOptions,
    trace: Trace,
    rank: RankId,
    cat_state: StrId,
    cat_syscall: StrId,
    cat_sched: StrId,
    cat_fault: StrId,
    cat_sample: StrId,
    states: [StrId; 6],
    threads: FxHashMap<i32, ThreadSt>,
    pending: Vec<Pending>,
    syscalls: BTreeMap<String, (u64, i64)>,
    counts: BTreeMap<&'static str, u64>,
    memory: MemoryTracker,
    /// Estimated heap bytes of `pending`.
    pending_bytes: usize,
    over_budget: Option<u64>,
}

impl<'o> Builder<'o> {
    fn new(path: &Path, options: &'o ImportOptions) -> Builder<'o> {
        let mut trace = Trace::default();
        let rank = trace.add_rank(Rank {
            rank: None,
            world_size: None,
            source: path.display().to_string(),
            format: SourceFormat::Perf,
            host: None,
            metadata_json: None,
            notes: Default::default(),
        });
        let states = ThreadState::ALL.map(|s| trace.intern(s.as_str()));
        Builder {
            options,
            cat_state: trace.intern(THREAD_STATE_CATEGORY),
            cat_syscall: trace.intern(strato_record::os::SYSCALL_CATEGORY),
            cat_sched: trace.intern("sched"),
            cat_fault: trace.intern("page_fault"),
            cat_sample: trace.intern("cpu_sample"),
            states,
            trace,
            rank,
            threads: FxHashMap::default(),
            pending: Vec::new(),
            syscalls: BTreeMap::new(),
            counts: BTreeMap::new(),
            memory: MemoryTracker::new(options.memory_budget_bytes),
            pending_bytes: 0,
            over_budget: None,
        }
    }

    fn count(&mut self, what: &'static str) {
        *self.counts.entry(what).or_default() += 1;
    }

    fn thread(&mut self, tid: i32) -> &mut ThreadSt {
        self.threads.entry(tid).or_insert(ThreadSt {
            pid: None,
            comm: None,
            now: Now::Unknown,
            syscall: None,
            blocked_in: None,
        })
    }

    fn state_id(&self, state: ThreadState) -> StrId {
        let i = ThreadState::ALL
            .iter()
            .position(|s| *s == state)
            .unwrap_or(ThreadState::ALL.len() - 1);
        self.states[i]
    }

    /// Keeps an output event. What is kept (the events waiting for their tracks, their args,
    /// and the trace's strings) counts against the memory budget: once over it, the import
    /// stops reading and fails ([`ErrorKind::MemoryBudget`]).
    fn push(&mut self, p: Pending) {
        self.pending_bytes +=
            std::mem::size_of::<Pending>() + p.args.as_ref().map_or(0, String::len);
        if self.pending.len().is_multiple_of(256) {
            self.check_budget();
        }
        self.pending.push(p);
    }

    /// Whether what is kept is over the memory budget (then the import fails at its end).
    /// Checked every 256 kept events while reading, and once at the end, so an import of
    /// fewer events is held to the budget too.
    fn check_budget(&mut self) {
        let over = self.memory.check(&self.trace).is_err()
            || (self.pending_bytes as u64).saturating_add(self.trace.strings.len() as u64 * 32)
                > self.options.memory_budget_bytes;
        if over {
            self.over_budget = Some(self.options.memory_budget_bytes);
        }
    }

    /// Ends `tid`'s current state at `ts` (a span when it is known).
    fn close(&mut self, tid: i32, ts: i64, woken_by: Option<i32>) {
        let Some(t) = self.threads.get_mut(&tid) else {
            return;
        };
        let (since, state) = match t.now {
            Now::Unknown => return,
            Now::On(since) => (since, ThreadState::Running),
            Now::Off { since, state } => (since, state),
        };
        let blocked_in = t.blocked_in.take();
        if ts <= since {
            return;
        }
        let args = if self.options.keep_args
            && !matches!(state, ThreadState::Running | ThreadState::Runnable)
        {
            let mut a = serde_json::Map::new();
            if let Some(call) = blocked_in {
                a.insert("syscall".into(), call.into());
            }
            if let Some(w) = woken_by {
                a.insert("woken_by".into(), w.into());
            }
            (!a.is_empty()).then(|| serde_json::Value::Object(a).to_string())
        } else {
            None
        };
        let name = self.state_id(state);
        let category = self.cat_state;
        self.push(Pending {
            tid,
            start: since,
            end: Some(ts),
            name,
            category,
            args,
        });
    }

    fn switch_out(&mut self, tid: i32, ts: i64, left: Left) {
        if tid == 0 {
            return;
        }
        self.close(tid, ts, None);
        self.count("switches");
        let t = self.thread(tid);
        match left {
            Left::Dead => {
                t.now = Now::Unknown;
            }
            Left::Runnable => {
                t.now = Now::Off {
                    since: ts,
                    state: ThreadState::Runnable,
                };
            }
            Left::Asleep => {
                let call = t.syscall.as_ref().map(|(n, _)| n.clone());
                t.now = Now::Off {
                    since: ts,
                    state: blocked_cause(call.as_deref()),
                };
                t.blocked_in = call;
            }
        }
    }

    fn switch_in(&mut self, tid: i32, ts: i64) {
        if tid == 0 || matches!(self.thread(tid).now, Now::On(_)) {
            return;
        }
        self.close(tid, ts, None);
        self.thread(tid).now = Now::On(ts);
    }

    fn handle(&mut self, h: Header, ev: Ev) {
        self.trace.ranks[self.rank.0 as usize].notes.events_read += 1;
        if self.over_budget.is_some() {
            return;
        }
        let tid = h.tid;
        if tid != 0 {
            let t = self.thread(tid);
            if let Some(pid) = h.pid {
                t.pid = Some(pid);
            }
            // The task the event fired in is running (see the module docs).
            let own = !matches!(ev, Ev::SwitchIn | Ev::Exit | Ev::Fork { .. } | Ev::SideBand);
            match t.now {
                Now::Unknown if own => t.now = Now::On(h.ts),
                Now::Off { .. } if own => {
                    self.close(tid, h.ts, None);
                    self.thread(tid).now = Now::On(h.ts);
                    self.count("switch_in_not_recorded");
                }
                _ => {}
            }
        }
        match ev {
            Ev::Switch { prev, left, next } => {
                self.switch_out(prev, h.ts, left);
                self.switch_in(next, h.ts);
            }
            Ev::SwitchOut { preempted } => {
                let left = if preempted {
                    Left::Runnable
                } else {
                    Left::Asleep
                };
                self.switch_out(tid, h.ts, left);
            }
            Ev::SwitchIn => self.switch_in(tid, h.ts),
            Ev::Wakeup { woken } => {
                if woken == 0 {
                    return;
                }
                self.count("wakeups");
                let now = self.thread(woken).now;
                match now {
                    Now::On(_) => {}
                    Now::Off {
                        state: ThreadState::Runnable,
                        ..
                    } => {}
                    Now::Unknown | Now::Off { .. } => {
                        self.close(woken, h.ts, Some(tid));
                        self.thread(woken).now = Now::Off {
                            since: h.ts,
                            state: ThreadState::Runnable,
                        };
                    }
                }
            }
            Ev::Migrate { task, from, to } => {
                self.count("migrations");
                let args = self
                    .options
                    .keep_args
                    .then(|| format!("{{\"from\":{from},\"to\":{to}}}"));
                let (name, category) = (self.trace.intern("migrate"), self.cat_sched);
                self.push(Pending {
                    tid: task,
                    start: h.ts,
                    end: None,
                    name,
                    category,
                    args,
                });
            }
            Ev::SysEnter { name } => {
                self.thread(tid).syscall = Some((name, h.ts));
            }
            Ev::SysExit { name } => {
                let Some((entered, start)) = self.thread(tid).syscall.take() else {
                    return;
                };
                if name.as_ref().is_some_and(|n| *n != entered) {
                    return;
                }
                let dur = h.ts - start;
                // Totals saturate: a damaged text can hold calls of centuries on many threads.
                let slot = self.syscalls.entry(entered.clone()).or_insert((0, 0));
                slot.0 += 1;
                slot.1 = slot.1.saturating_add(dur.max(0));
                if dur >= SLOW_SYSCALL_NS {
                    let (name, category) = (self.trace.intern(&entered), self.cat_syscall);
                    self.push(Pending {
                        tid,
                        start,
                        end: Some(h.ts),
                        name,
                        category,
                        args: None,
                    });
                }
            }
            Ev::PageFault { event } => {
                self.count("page_faults");
                let (name, category) = (self.trace.intern(&event), self.cat_fault);
                self.push(Pending {
                    tid,
                    start: h.ts,
                    end: None,
                    name,
                    category,
                    args: None,
                });
            }
            Ev::Sample { event, frames } => {
                if tid == 0 {
                    return;
                }
                self.count("cpu_samples");
                let labels: Vec<&str> = frames.iter().map(|f| f.label.as_str()).collect();
                let name = self.trace.intern(&fold_leaf_first(&labels));
                let args = (self.options.keep_args).then(|| {
                    let stack: Vec<&str> = frames.iter().map(|f| f.symbol.as_str()).collect();
                    serde_json::json!({"event": event, "stack": stack}).to_string()
                });
                let category = self.cat_sample;
                self.push(Pending {
                    tid,
                    start: h.ts,
                    end: None,
                    name,
                    category,
                    args,
                });
            }
            Ev::Exit => {
                self.close(tid, h.ts, None);
                self.thread(tid).now = Now::Unknown;
            }
            Ev::Fork { pid, tid } => self.thread(tid).pid = Some(pid),
            Ev::Other => self.count("other_events"),
            Ev::SideBand => {}
        }
    }

    /// The trace: tracks per thread (pid from the events, else the tid), processes, metadata.
    fn finish(
        mut self,
        path: &Path,
        clock: ClockInfo,
        meta: serde_json::Map<String, serde_json::Value>,
    ) -> Result<Trace> {
        self.check_budget();
        if let Some(limit) = self.over_budget {
            return Err(Error::new(
                path,
                ErrorKind::MemoryBudget { limit_bytes: limit },
            ));
        }
        let mut tracks: FxHashMap<i32, TrackId> = FxHashMap::default();
        let mut pids: BTreeMap<i32, Option<String>> = BTreeMap::new();
        let pending = std::mem::take(&mut self.pending);
        for p in pending {
            let track = match tracks.get(&p.tid) {
                Some(&t) => t,
                None => {
                    let (pid, comm) = self
                        .threads
                        .get(&p.tid)
                        .map_or((p.tid, None), |t| (t.pid.unwrap_or(p.tid), t.comm.clone()));
                    if pid == p.tid || !pids.contains_key(&pid) {
                        let name = if pid == p.tid { comm.clone() } else { None };
                        let slot = pids.entry(pid).or_default();
                        if slot.is_none() {
                            *slot = name;
                        }
                    }
                    let id = self.trace.add_track(Track {
                        rank: self.rank,
                        kind: TrackKind::Thread {
                            pid: i64::from(pid),
                            tid: i64::from(p.tid),
                        },
                        name: comm,
                        sort_index: None,
                    });
                    tracks.insert(p.tid, id);
                    id
                }
            };
            let args = p.args.map(|a| self.trace.add_args(&a));
            match p.end {
                Some(end) => self.trace.spans.push(Span {
                    track,
                    start: p.start,
                    end,
                    name: p.name,
                    category: p.category,
                    level: Level::Os,
                    correlation: None,
                    external_id: None,
                    args,
                }),
                None => self.trace.instants.push(Instant {
                    track,
                    ts: p.start,
                    name: p.name,
                    category: p.category,
                    level: Level::Os,
                    args,
                }),
            }
        }
        for (pid, name) in pids {
            self.trace.processes.push(Process {
                rank: self.rank,
                pid: i64::from(pid),
                name,
                labels: None,
            });
        }
        let mut meta = meta;
        let calls: Vec<serde_json::Value> = self
            .syscalls
            .iter()
            .map(|(n, (c, t))| serde_json::json!({"name": n, "count": c, "time_ns": t}))
            .collect();
        meta.insert("syscalls".into(), calls.into());
        for (k, v) in &self.counts {
            if *k != "switch_in_not_recorded" {
                meta.insert((*k).into(), (*v).into());
            }
        }
        let notes = &mut self.trace.ranks[self.rank.0 as usize].notes;
        notes.count(
            "switch_in_not_recorded",
            self.counts
                .get("switch_in_not_recorded")
                .copied()
                .unwrap_or(0),
        );
        self.trace.ranks[self.rank.0 as usize].metadata_json =
            Some(serde_json::Value::Object(meta).to_string());
        self.trace.clock = clock;
        Ok(self.trace)
    }
}

/// The clock of a perf trace: `clockid` (None: perf's default clock) and the timestamps'
/// resolution in ns.
fn clock_info(clockid: Option<ClockId>, resolution_ns: i64, how: &str) -> ClockInfo {
    let (reference, domain) = match clockid {
        Some(ClockId::Monotonic) => (ClockDomain::Monotonic, ClockDomain::Monotonic),
        Some(ClockId::MonotonicRaw) => (ClockDomain::MonotonicRaw, ClockDomain::MonotonicRaw),
        Some(ClockId::Realtime) => (ClockDomain::Realtime, ClockDomain::Realtime),
        Some(other) => (
            ClockDomain::Unknown,
            ClockDomain::Device(format!("{other:?}").to_lowercase()),
        ),
        None => (
            ClockDomain::Unknown,
            ClockDomain::Device("perf_clock".into()),
        ),
    };
    let method = match clockid {
        Some(c) => format!("perf clockid {c:?} ({how})"),
        None => format!(
            "perf's default clock (kernel local_clock), not CLOCK_MONOTONIC ({how}); \
             record with `perf record -k mono` to join a recording"
        ),
    };
    ClockInfo {
        reference,
        sources: vec![ClockSource {
            name: "perf".into(),
            domain,
            offset_ns: 0,
            drift_ppb: 0.0,
            anchor_ns: 0,
            error_ns: Some(resolution_ns),
            method,
        }],
    }
}

// ---------------------------------------------------------------------------------------------
// `perf script` text.

/// One parsed event line: header, event name, the rest (tracepoint fields or the sample's ip
/// and symbol).
#[derive(Debug, PartialEq)]
struct Line<'a> {
    comm: &'a str,
    header: Header,
    /// Digits after the decimal point of the time (6: µs, 9: ns).
    digits: u32,
    event: &'a str,
    rest: &'a str,
}

/// Parses `COMM PID[/TID] [CPU] SECONDS.FRACTION: [PERIOD] EVENT: REST`.
fn parse_line(line: &str) -> Option<Line<'_>> {
    // The time is the first token that is `digits.digits:`.
    let mut offset = 0;
    let mut tokens: Vec<(usize, &str)> = Vec::new();
    for tok in line.split_whitespace() {
        let at = offset + line[offset..].find(tok)?;
        offset = at + tok.len();
        tokens.push((at, tok));
        if tokens.len() > 64 {
            return None;
        }
    }
    let time_i = tokens.iter().position(|(_, t)| {
        t.strip_suffix(':').is_some_and(|t| {
            let mut parts = t.splitn(2, '.');
            let (a, b) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            !a.is_empty()
                && !b.is_empty()
                && a.bytes().all(|c| c.is_ascii_digit())
                && b.bytes().all(|c| c.is_ascii_digit())
        })
    })?;
    let mut i = time_i;
    // Optional [cpu].
    if i > 0 && tokens[i - 1].1.starts_with('[') && tokens[i - 1].1.ends_with(']') {
        i -= 1;
    }
    if i == 0 {
        return None;
    }
    let id = tokens[i - 1].1;
    let (pid, tid) = match id.split_once('/') {
        Some((p, t)) => (Some(p.parse::<i32>().ok()?), t.parse::<i32>().ok()?),
        None => (None, id.parse::<i32>().ok()?),
    };
    let comm_end = tokens[i - 1].0;
    let comm = line[..comm_end].trim();
    let time = tokens[time_i].1.trim_end_matches(':');
    let (secs, frac) = time.split_once('.')?;
    let digits = u32::try_from(frac.len()).ok().filter(|d| *d <= 9)?;
    let secs: i64 = secs.parse().ok()?;
    let frac: i64 = frac.parse().ok()?;
    let ts = secs
        .checked_mul(1_000_000_000)?
        .checked_add(frac * 10_i64.pow(9 - digits))?;
    // Then an optional period and the event name (`name:`).
    let mut j = time_i + 1;
    if tokens
        .get(j)
        .is_some_and(|(_, t)| t.bytes().all(|c| c.is_ascii_digit()))
    {
        j += 1;
    }
    let (at, ev) = *tokens.get(j)?;
    // Side-band records printed with `--show-switch-events` / `--show-task-events` carry no
    // colon (`PERF_RECORD_SWITCH OUT preempt`).
    let event = match ev.strip_suffix(':') {
        Some(e) => e,
        None if ev.starts_with("PERF_RECORD_") => {
            let end = ev
                .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
                .unwrap_or(ev.len());
            &ev[..end]
        }
        None => return None,
    };
    if event.is_empty() {
        return None;
    }
    let rest = line[at + event.len()..]
        .trim()
        .trim_start_matches(':')
        .trim();
    Some(Line {
        comm,
        header: Header { ts, pid, tid },
        digits,
        event,
        rest,
    })
}

/// The value of `key=` in tracepoint fields (up to the next space).
fn field<'a>(rest: &'a str, key: &str) -> Option<&'a str> {
    let mut from = 0;
    while let Some(at) = rest[from..].find(key) {
        let at = from + at;
        let before_ok = at == 0 || rest.as_bytes()[at - 1] == b' ';
        let after = at + key.len();
        if before_ok && rest[after..].starts_with('=') {
            let v = &rest[after + 1..];
            return Some(v.split_whitespace().next().unwrap_or(""));
        }
        from = after;
    }
    None
}

fn int_field(rest: &str, key: &str) -> Option<i64> {
    field(rest, key).and_then(|v| v.parse().ok())
}

/// The event of a text line (`None`: a known event whose fields do not parse).
fn text_event(line: &Line<'_>, stack: Vec<Frame>) -> Option<Ev> {
    let e = line.event;
    let r = line.rest;
    Some(if e.starts_with("PERF_RECORD_SWITCH") {
        match r.split_whitespace().next() {
            Some("OUT") => Ev::SwitchOut {
                preempted: r.contains("preempt"),
            },
            Some("IN") => Ev::SwitchIn,
            _ => return None,
        }
    } else if e == "PERF_RECORD_EXIT" {
        Ev::Exit
    } else if e == "PERF_RECORD_FORK" {
        // `(PID:TID):(PPID:PTID)`: the new task and its process.
        let (pid, tid) = r.strip_prefix('(')?.split_once(')')?.0.split_once(':')?;
        Ev::Fork {
            pid: pid.parse().ok()?,
            tid: tid.parse().ok()?,
        }
    } else if e.starts_with("PERF_RECORD_") {
        Ev::SideBand
    } else if e.ends_with("sched_switch") {
        // Only `==>` separates the two tasks; the fields are looked up by name.
        let (before, after) = r.split_once("==>")?;
        Ev::Switch {
            prev: i32::try_from(int_field(before, "prev_pid")?).ok()?,
            left: left_from_letters(field(before, "prev_state")?),
            next: i32::try_from(int_field(after, "next_pid")?).ok()?,
        }
    } else if e.ends_with("sched_wakeup") || e.ends_with("sched_wakeup_new") {
        Ev::Wakeup {
            woken: i32::try_from(int_field(r, "pid")?).ok()?,
        }
    } else if e.ends_with("sched_migrate_task") {
        Ev::Migrate {
            task: i32::try_from(int_field(r, "pid")?).ok()?,
            from: int_field(r, "orig_cpu")?,
            to: int_field(r, "dest_cpu")?,
        }
    } else if e == "raw_syscalls:sys_enter" {
        let nr = r
            .strip_prefix("NR ")?
            .split_whitespace()
            .next()?
            .parse()
            .ok()?;
        Ev::SysEnter {
            name: syscall_name(nr),
        }
    } else if e == "raw_syscalls:sys_exit" {
        let nr = r
            .strip_prefix("NR ")?
            .split_whitespace()
            .next()?
            .parse()
            .ok()?;
        Ev::SysExit {
            name: Some(syscall_name(nr)),
        }
    } else if let Some(name) = e.strip_prefix("syscalls:sys_enter_") {
        Ev::SysEnter {
            name: name.to_owned(),
        }
    } else if let Some(name) = e.strip_prefix("syscalls:sys_exit_") {
        Ev::SysExit {
            name: Some(name.to_owned()),
        }
    } else if is_page_fault(e.split(':').next().unwrap_or(e)) || is_page_fault(e) {
        Ev::PageFault {
            event: e.to_owned(),
        }
    } else if e
        .split_once(':')
        .is_some_and(|(_, m)| !m.chars().all(|c| "ukhGHpPSDIeW".contains(c)))
    {
        // A tracepoint this importer does not use (`cpu-clock:ppp` is a sampled event with
        // modifiers; `sched:sched_stat_runtime` a tracepoint).
        Ev::Other
    } else {
        // A sampled hardware or software event (`cycles`, `cpu-clock:ppp`, ...): its leaf
        // is the symbol on the line itself when no call stack follows.
        let mut frames = stack;
        if frames.is_empty() {
            if let Some(frame) = sample_frame(r) {
                frames.push(frame);
            }
        }
        Ev::Sample {
            event: e.to_owned(),
            frames,
        }
    })
}

/// The frame of a sample line or a call-stack line: `ADDR SYMBOL+0xOFF (DSO)` -> symbol
/// `SYMBOL`, label `SYMBOL [DSO file name]` (perf's `[unknown]` symbol is
/// [`UNKNOWN_SYMBOL`] in the label, as a live recording names it; no DSO, the symbol alone).
fn sample_frame(text: &str) -> Option<Frame> {
    let symbol = sample_symbol(text)?;
    let t = text.trim_end();
    let dso = t
        .strip_suffix(')')
        .and_then(|t| t.rfind(" (").map(|i| &t[i + 2..]))
        .filter(|d| !d.is_empty());
    let shown = if symbol == "[unknown]" {
        UNKNOWN_SYMBOL
    } else {
        symbol.as_str()
    };
    let label = match dso {
        // Outside every mapping, as a live recording names it.
        Some("[unknown]") => UNKNOWN_STACK.to_owned(),
        Some(dso) => frame_label(shown, dso),
        None => shown.replace(FRAME_SEPARATOR, ":"),
    };
    Some(Frame { symbol, label })
}

/// The symbol of a sample line or a call-stack line: `ADDR SYMBOL+0xOFF (DSO)` -> `SYMBOL`
/// (`[unknown]` kept; an address alone is `None`).
fn sample_symbol(text: &str) -> Option<String> {
    let mut it = text.split_whitespace();
    let first = it.next()?;
    let rest: Vec<&str> = it.collect();
    let body = if first.bytes().all(|c| c.is_ascii_hexdigit()) {
        rest.join(" ")
    } else {
        text.to_owned()
    };
    let body = match body.rfind(" (") {
        Some(i) if body.ends_with(')') => body[..i].to_owned(),
        _ => body,
    };
    let sym = match body.rfind("+0x") {
        Some(i) => &body[..i],
        None => body.as_str(),
    };
    let sym = sym.trim();
    (!sym.is_empty()).then(|| sym.to_owned())
}

/// Imports `perf script` text output (see the module docs); `input` is the opened file.
pub fn import_script(path: &Path, input: Input, options: &ImportOptions) -> Result<Trace> {
    let mut reader = BufReader::new(input.reader);
    let mut builder = Builder::new(path, options);
    let mut clockid: Option<ClockId> = None;
    let mut meta = serde_json::Map::new();
    let mut digits = 9;
    let mut line = String::new();
    let mut number = 0u64;
    let mut header_block = HeaderBlock::default();
    // The event line waiting for its call stack (the indented lines after it).
    let mut held: Option<(String, u64)> = None;
    let mut stack: Vec<Frame> = Vec::new();
    let mut chain_ended = false;
    let bad = |n: u64, what: &str| {
        Error::new(
            path,
            ErrorKind::Perf(format!("line {n}: {what} (expected `perf script` output)")),
        )
    };
    let flush = |builder: &mut Builder<'_>,
                 held: &mut Option<(String, u64)>,
                 stack: &mut Vec<Frame>,
                 digits: &mut u32|
     -> Result<()> {
        if let Some((text, n)) = held.take() {
            let parsed = parse_line(&text).ok_or_else(|| bad(n, "not an event line"))?;
            *digits = (*digits).min(parsed.digits);
            let ev = text_event(&parsed, std::mem::take(stack))
                .ok_or_else(|| bad(n, &format!("the fields of {} do not parse", parsed.event)))?;
            let comm = parsed.comm.to_owned();
            let h = parsed.header;
            if h.tid != 0 {
                let t = builder.thread(h.tid);
                if t.comm.is_none() && !comm.is_empty() {
                    t.comm = Some(comm);
                }
            }
            builder.handle(h, ev);
        }
        stack.clear();
        Ok(())
    };
    loop {
        line.clear();
        let n = reader.read_line(&mut line).map_err(|e| classify(path, e))?;
        if n == 0 {
            break;
        }
        number += 1;
        let text = line.trim_end_matches(['\n', '\r']);
        let in_header = header_block.skip(text);
        if in_header && !text.starts_with('#') {
            continue;
        }
        if text.trim().is_empty() {
            flush(&mut builder, &mut held, &mut stack, &mut digits)?;
            continue;
        }
        if let Some(comment) = text.strip_prefix('#') {
            let comment = comment.trim();
            if let Some(v) = comment.strip_prefix("clockid:") {
                clockid = match v.split_whitespace().next() {
                    Some("monotonic") => Some(ClockId::Monotonic),
                    Some("monotonic_raw") => Some(ClockId::MonotonicRaw),
                    Some("realtime") => Some(ClockId::Realtime),
                    Some("boottime") => Some(ClockId::Boottime),
                    _ => None,
                };
            } else if let Some((k, v)) = comment.split_once(" : ") {
                let k = k.trim();
                if ["hostname", "os release", "perf version", "arch", "cmdline"].contains(&k) {
                    meta.insert(k.replace(' ', "_"), v.trim().into());
                }
            }
            continue;
        }
        if text.starts_with('\t')
            || (text.starts_with(' ') && held.is_some() && parse_line(text).is_none())
        {
            if held.is_none() {
                return Err(bad(number, "a call-stack line without its event line"));
            }
            // As in a live recording, the chain ends at the first return address outside
            // every mapping (perf prints the frame-pointer walk's garbage beyond it).
            if let Some(frame) = sample_frame(text).filter(|_| !chain_ended) {
                if !stack.is_empty() && frame.label == UNKNOWN_STACK {
                    chain_ended = true;
                } else {
                    stack.push(frame);
                }
            }
            continue;
        }
        flush(&mut builder, &mut held, &mut stack, &mut digits)?;
        if parse_line(text).is_none() {
            return Err(bad(number, "not an event line"));
        }
        held = Some((text.to_owned(), number));
        chain_ended = false;
    }
    flush(&mut builder, &mut held, &mut stack, &mut digits)?;
    if builder.trace.ranks[0].notes.events_read == 0 {
        return Err(Error::new(
            path,
            ErrorKind::Perf("no events (expected `perf script` output)".into()),
        ));
    }
    if let Some(host) = meta.get("hostname").and_then(|v| v.as_str()) {
        builder.trace.ranks[0].host = Some(host.to_owned());
    }
    let resolution = 10_i64.pow(9 - digits.min(9));
    let clock = clock_info(clockid, resolution, "`perf script` text");
    builder.finish(path, clock, meta)
}

// ---------------------------------------------------------------------------------------------
// `perf.data`.

/// One tracepoint's field layout, from the format text in the file's tracing data.
#[derive(Debug, Default, Clone)]
struct Format {
    fields: FxHashMap<String, (usize, usize, bool)>,
}

impl Format {
    fn int(&self, raw: &[u8], name: &str, little: bool) -> Option<i64> {
        let &(off, size, signed) = self.fields.get(name)?;
        let b = raw.get(off..off.checked_add(size)?)?;
        let mut v: u64 = 0;
        for i in 0..size {
            let byte = if little { b[size - 1 - i] } else { b[i] };
            v = (v << 8) | u64::from(byte);
        }
        Some(match (size, signed) {
            (1, true) => i64::from(v as u8 as i8),
            (2, true) => i64::from(v as u16 as i16),
            (4, true) => i64::from(v as u32 as i32),
            _ => v as i64,
        })
    }
}

/// Parses the format text of event `id` from the tracing data (`ID: N` then `field:` lines).
fn tracepoint_format(tracing: &[u8], id: u64) -> Option<Format> {
    let needle = format!("\nID: {id}\n");
    let at = memchr::memmem::find(tracing, needle.as_bytes())?;
    let end = memchr::memmem::find(&tracing[at..], b"print fmt:").map_or(tracing.len(), |e| at + e);
    let text = String::from_utf8_lossy(&tracing[at..end]);
    let mut f = Format::default();
    for line in text.lines() {
        let line = line.trim();
        let Some(decl) = line.strip_prefix("field:") else {
            continue;
        };
        let mut parts = decl.split(';').map(str::trim);
        let decl = parts.next()?;
        let name = decl
            .split_whitespace()
            .last()?
            .split('[')
            .next()?
            .to_owned();
        let mut off = None;
        let mut size = None;
        let mut signed = false;
        for p in parts {
            if let Some(v) = p.strip_prefix("offset:") {
                off = v.parse().ok();
            } else if let Some(v) = p.strip_prefix("size:") {
                size = v.parse().ok();
            } else if let Some(v) = p.strip_prefix("signed:") {
                signed = v == "1";
            }
        }
        if let (Some(o), Some(s)) = (off, size) {
            f.fields.insert(name, (o, s, signed));
        }
    }
    Some(f)
}

/// Call-chain entries at or above this are context markers (`PERF_CONTEXT_KERNEL`, `_USER`,
/// ...), not addresses.
const PERF_CONTEXT_MAX: u64 = -4095i64 as u64;
/// `PROT_EXEC` in an `MMAP2` record's protection.
const PROT_EXEC: u32 = 4;

/// The code mappings of a `perf.data` file (`PERF_RECORD_MMAP`/`MMAP2`, executable ones) and
/// the modules they map: how a sample's addresses become frames, the way `strato record
/// --sample` symbolizes them (a return address looked up one byte back, the module's ELF
/// symbol table through [`Module`], `??` where no symbol covers an address). Modules are read
/// from this machine at their recorded path, so a `perf.data` moved from another machine gets
/// `?? [module]` frames where the files differ or are missing. Kernel code (pid -1 mappings,
/// `[kernel.kallsyms]`) is `?? [kernel.kallsyms]`: its symbols are not in the file.
#[derive(Default)]
struct Symbolizer {
    /// pid (-1: the kernel) -> start -> (end, file offset at start, module index).
    maps: FxHashMap<i32, BTreeMap<u64, (u64, u64, usize)>>,
    /// `(path, symbols)`; no symbols for a pseudo-module (`[vdso]`, the kernel).
    modules: Vec<(String, Option<Module>)>,
    by_path: FxHashMap<String, usize>,
    labels: FxHashMap<(usize, u64), Frame>,
}

impl Symbolizer {
    /// An executable mapping of `pid`.
    fn map(&mut self, pid: i32, start: u64, len: u64, page_offset: u64, path: &[u8]) {
        let mut path = String::from_utf8_lossy(path).into_owned();
        if path.starts_with('[') {
            // `[kernel.kallsyms]_text` -> `[kernel.kallsyms]`.
            if let Some(end) = path.find(']') {
                path.truncate(end + 1);
            }
        }
        let module = match self.by_path.get(&path) {
            Some(&m) => m,
            None => {
                let loadable = pid != -1 && path.starts_with('/') && is_module_file(&path);
                let symbols = loadable.then(|| Module::load(&path));
                self.modules.push((path.clone(), symbols));
                self.by_path.insert(path, self.modules.len() - 1);
                self.modules.len() - 1
            }
        };
        let end = start.saturating_add(len);
        self.maps
            .entry(pid)
            .or_default()
            .insert(start, (end, page_offset, module));
    }

    /// A new process `child` starts with a copy of `parent`'s mappings.
    fn fork(&mut self, parent: i32, child: i32) {
        if let Some(maps) = self.maps.get(&parent).cloned() {
            self.maps.insert(child, maps);
        }
    }

    /// `pid` ran `execve`: its old mappings are gone (the new image's follow).
    fn exec(&mut self, pid: i32) {
        self.maps.remove(&pid);
    }

    /// The frame at `addr` in `pid`, or None when no mapping holds it.
    fn frame(&mut self, pid: i32, addr: u64) -> Option<Frame> {
        let hit = [pid, -1].into_iter().find_map(|p| {
            let (&start, &(end, page_offset, module)) =
                self.maps.get(&p)?.range(..=addr).next_back()?;
            // A damaged mapping's offset can overflow: then it holds nothing.
            let offset = (addr < end).then(|| page_offset.checked_add(addr - start))??;
            Some((module, offset))
        })?;
        let frame = self.labels.entry(hit).or_insert_with(|| {
            let (path, symbols) = &self.modules[hit.0];
            let symbol = symbols
                .as_ref()
                .map_or_else(|| UNKNOWN_SYMBOL.to_owned(), |m| m.symbol(hit.1));
            Frame {
                label: frame_label(&symbol, path),
                symbol,
            }
        });
        Some(frame.clone())
    }

    /// A sample's frames, leaf first: its call chain (context markers left out; the first
    /// address of each context — kernel, user — is exact, the rest are return addresses),
    /// else its ip. As in a live recording, an unmapped exact address is [`UNKNOWN_STACK`] and
    /// the chain ends at the first unmapped return address (a frame-pointer walk through code
    /// without frame pointers ends there or earlier).
    fn frames(&mut self, pid: i32, ip: Option<u64>, chain: Option<Vec<u64>>) -> Vec<Frame> {
        let chain = chain.unwrap_or_else(|| ip.into_iter().collect());
        let mut out = Vec::new();
        let mut exact = true;
        for addr in chain {
            if addr >= PERF_CONTEXT_MAX {
                exact = true;
                continue;
            }
            let at = if exact { addr } else { addr.saturating_sub(1) };
            let leaf = std::mem::replace(&mut exact, false);
            match self.frame(pid, at) {
                Some(f) => out.push(f),
                None if leaf => out.push(Frame {
                    symbol: UNKNOWN_STACK.to_owned(),
                    label: UNKNOWN_STACK.to_owned(),
                }),
                None => break,
            }
        }
        out
    }
}

/// Module files larger than this are not read for symbols (their frames are `?? [module]`).
const MAX_MODULE_BYTES: u64 = 4 << 30;

/// Whether the mapped file at `path` (a path recorded in the `perf.data`, so anything) may be
/// read for its symbols: a regular file of a real size, not in a pseudo-filesystem. A device
/// (`/dev/zero`), a FIFO or `/proc/self/pagemap` (size 0, endless to read) would make the
/// import read forever or block.
fn is_module_file(path: &str) -> bool {
    let Ok(real) = std::fs::canonicalize(path) else {
        return false;
    };
    if real.starts_with("/proc") || real.starts_with("/sys") || real.starts_with("/dev") {
        return false;
    }
    std::fs::metadata(&real).is_ok_and(|m| m.is_file() && (1..=MAX_MODULE_BYTES).contains(&m.len()))
}

/// What an attribute (event) of a `perf.data` file is to this importer.
#[derive(Debug, Clone)]
enum AttrKind {
    Switch(Format),
    Wakeup(Format),
    Migrate(Format),
    SysEnterRaw(Format),
    SysExitRaw(Format),
    SysEnter(String),
    SysExit(String),
    PageFault(String),
    Sample(String),
    Other,
}

/// The `perf.data` file header (`struct perf_file_header`): magic, its size, the size of one
/// attribute entry, the attribute, data and event-type sections, the feature bits.
const PERF_HEADER_BYTES: u64 = 8 + 8 + 8 + 3 * 16 + 32;
/// `perf_event_attr` sizes perf writes range from 64 (`PERF_ATTR_SIZE_VER0`) to ~140 bytes;
/// an attribute entry of the file adds a 16-byte id section.
const ATTR_SIZES: std::ops::RangeInclusive<u64> = 64..=4096;
/// `HEADER_EVENT_DESC` and `HEADER_SIMPLEPERF_META_INFO`: the feature sections the attributes
/// are read from.
const FEATURE_EVENT_DESC: u32 = 12;
const FEATURE_SIMPLEPERF_META_INFO: u32 = 129;

/// Checks, before `linux-perf-data` reads the file, every count and size in it that the crate
/// allocates from or adds up unchecked: the header's sections and the feature sections lie
/// within the file, the attribute size is one perf writes, the event description's counts and
/// the event-id sections fit in what is there. A damaged or hostile header would otherwise
/// make the reader allocate terabytes (an abort), overflow or divide by zero.
fn check_layout(file: &mut std::fs::File) -> std::result::Result<(), String> {
    let len = file.metadata().map_err(|e| e.to_string())?.len();
    let head = read_at(file, len, 0, PERF_HEADER_BYTES).map_err(|e| format!("header: {e}"))?;
    let little = match &head[..8] {
        b"PERFILE2" => true,
        b"2ELIFREP" => false,
        _ => return Err("not a perf.data file (magic)".into()),
    };
    let u64_at = |b: &[u8], at: usize| -> u64 {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[at..at + 8]);
        if little {
            u64::from_le_bytes(w)
        } else {
            u64::from_be_bytes(w)
        }
    };
    let u32_at = |b: &[u8], at: usize| -> Option<u32> {
        let w: [u8; 4] = b.get(at..at.checked_add(4)?)?.try_into().ok()?;
        Some(if little {
            u32::from_le_bytes(w)
        } else {
            u32::from_be_bytes(w)
        })
    };
    let within = |what: &str, offset: u64, size: u64| -> std::result::Result<(), String> {
        match offset.checked_add(size) {
            Some(end) if end <= len => Ok(()),
            _ => Err(format!(
                "the {what} ({size} bytes at {offset}) lies beyond the end of the file ({len} bytes)"
            )),
        }
    };
    let header_size = u64_at(&head, 8);
    if !(PERF_HEADER_BYTES..=len).contains(&header_size) {
        return Err(format!(
            "header size {header_size} is not a perf.data header's"
        ));
    }
    let attr_size = u64_at(&head, 16);
    if !ATTR_SIZES.contains(&attr_size) {
        return Err(format!("attribute size {attr_size} is not one perf writes"));
    }
    let section = |at: usize| (u64_at(&head, at), u64_at(&head, at + 8));
    let (attrs, data, event_types) = (section(24), section(40), section(56));
    within("attribute section", attrs.0, attrs.1)?;
    within("data section", data.0, data.1)?;
    within("event-type section", event_types.0, event_types.1)?;
    // The feature sections' table follows the data; one entry per feature bit.
    let features: Vec<u32> = (0..256u32)
        .filter(|bit| u64_at(&head, 72 + (bit / 64) as usize * 8) >> (bit % 64) & 1 == 1)
        .collect();
    let table_at = data.0 + data.1;
    let table_len = features.len() as u64 * 16;
    within("feature table", table_at, table_len)?;
    let table = read_at(file, len, table_at, table_len).map_err(|e| e.to_string())?;
    let mut sections = FxHashMap::default();
    let mut total = 0u64;
    for (i, feature) in features.iter().enumerate() {
        let (offset, size) = (u64_at(&table, i * 16), u64_at(&table, i * 16 + 8));
        within(&format!("feature section {feature}"), offset, size)?;
        total = total.saturating_add(size);
        sections.insert(*feature, (offset, size));
    }
    if total > len {
        return Err(format!(
            "the feature sections add up to {total} bytes, more than the file ({len} bytes)"
        ));
    }
    // The attributes come from the first of these the reader finds.
    if let Some(&(offset, size)) = sections.get(&FEATURE_EVENT_DESC) {
        // nr, attr_size, then per event: attr, nr_ids, name (u32 length + bytes), ids.
        let desc = read_at(file, len, offset, size).map_err(|e| e.to_string())?;
        let short = || "the event description is cut short".to_string();
        let nr = u32_at(&desc, 0).ok_or_else(short)?;
        let desc_attr = u64::from(u32_at(&desc, 4).ok_or_else(short)?);
        if !ATTR_SIZES.contains(&desc_attr) {
            return Err(format!(
                "attribute size {desc_attr} in the event description is not one perf writes"
            ));
        }
        let mut at = 8u64;
        for _ in 0..nr {
            at = at.saturating_add(desc_attr);
            let nr_ids =
                u32_at(&desc, usize::try_from(at).unwrap_or(usize::MAX)).ok_or_else(short)?;
            let name_len =
                u32_at(&desc, usize::try_from(at + 4).unwrap_or(usize::MAX)).ok_or_else(short)?;
            at = at
                .saturating_add(8)
                .saturating_add(u64::from(name_len))
                .saturating_add(u64::from(nr_ids) * 8);
            if at > size {
                return Err(short());
            }
        }
    } else if event_types.1 != 0 || sections.contains_key(&FEATURE_SIMPLEPERF_META_INFO) {
        // Entries of an attribute and the (offset, size) of its event ids: in the event-type
        // section (old perf), or in the attribute section (simpleperf, whose attr_size counts
        // the id section).
        let (table, entry, ids_at) = if event_types.1 != 0 {
            (event_types, attr_size + 16, attr_size)
        } else {
            (attrs, attr_size, attr_size - 16)
        };
        let entries = read_at(file, len, table.0, table.1).map_err(|e| e.to_string())?;
        for start in (0..table.1 / entry).map(|i| i * entry + ids_at) {
            let start = start as usize;
            within(
                "event-id section",
                u64_at(&entries, start),
                u64_at(&entries, start + 8),
            )?;
        }
    }
    Ok(())
}

/// `len` bytes at `offset` of `file` (whose length is `file_len`; the range is checked first).
fn read_at(
    file: &mut std::fs::File,
    file_len: u64,
    offset: u64,
    len: u64,
) -> std::result::Result<Vec<u8>, String> {
    if offset.checked_add(len).is_none_or(|end| end > file_len) {
        return Err(format!(
            "the file ends before byte {}",
            offset.saturating_add(len)
        ));
    }
    let mut buf = vec![0; usize::try_from(len).map_err(|e| e.to_string())?];
    file.seek(SeekFrom::Start(offset))
        .and_then(|_| file.read_exact(&mut buf))
        .map_err(|e| e.to_string())?;
    Ok(buf)
}

/// Whether a SAMPLE record's call chain (if it has one) fits in the record. The reader
/// multiplies the recorded length by 8 unchecked (an overflow for a damaged length): this walks
/// to the length the way `linux_perf_event_reader::SampleRecord::parse` does. A record that
/// ends before the length is left to the reader (its own error).
fn callchain_fits(record: &RawEventRecord<'_>) -> bool {
    let info = &record.parse_info;
    let format = info.sample_format;
    if !format.contains(SampleFormat::CALLCHAIN) {
        return true;
    }
    let data = record.data.as_slice();
    let little = matches!(info.endian, linux_perf_data::Endianness::LittleEndian);
    let word = |at: usize| -> Option<u64> {
        let w: [u8; 8] = data.get(at..at.checked_add(8)?)?.try_into().ok()?;
        Some(if little {
            u64::from_le_bytes(w)
        } else {
            u64::from_be_bytes(w)
        })
    };
    let fixed = [
        SampleFormat::IDENTIFIER,
        SampleFormat::IP,
        SampleFormat::TID,
        SampleFormat::TIME,
        SampleFormat::ADDR,
        SampleFormat::ID,
        SampleFormat::STREAM_ID,
        SampleFormat::CPU,
        SampleFormat::PERIOD,
    ];
    let mut at = 8 * fixed.iter().filter(|f| format.contains(**f)).count();
    if format.contains(SampleFormat::READ) {
        let read = info.read_format;
        let times = [
            ReadFormat::TOTAL_TIME_ENABLED,
            ReadFormat::TOTAL_TIME_RUNNING,
        ]
        .iter()
        .filter(|f| read.contains(**f))
        .count();
        // As the reader walks it: a value, times, an id; or a count, times and the values.
        if read.contains(ReadFormat::GROUP) {
            at += 8 * (1 + times + usize::from(read.contains(ReadFormat::ID)));
        } else {
            let Some(nr) = word(at) else { return true };
            let each = if read.contains(ReadFormat::ID) { 16 } else { 8 };
            let values = usize::try_from(nr)
                .ok()
                .and_then(|nr| nr.checked_mul(each))
                .unwrap_or(usize::MAX);
            at = at.saturating_add(8 * (1 + times)).saturating_add(values);
        }
    }
    let Some(len) = word(at) else { return true };
    len <= (data.len().saturating_sub(at + 8) / 8) as u64
}

/// `PERF_RECORD_MISC_MMAP_BUILD_ID`: an `MMAP2` record carries a build id, not an inode.
const MISC_MMAP_BUILD_ID: u16 = 1 << 14;

/// Whether an `MMAP2` record's build id (if it has one) is at most the 20 bytes the kernel
/// writes: the reader asserts it (a panic on a damaged length). Its length byte follows pid,
/// tid, address, length and page offset.
fn build_id_fits(record: &RawEventRecord<'_>) -> bool {
    record.misc & MISC_MMAP_BUILD_ID == 0
        || record
            .data
            .get(32..33)
            .is_none_or(|len| len.as_slice().first().is_none_or(|&len| len <= 20))
}

/// Imports a `perf.data` file (file mode; see the module docs).
pub fn import_data(path: &Path, options: &ImportOptions) -> Result<Trace> {
    let perr = |what: String| Error::new(path, ErrorKind::Perf(what));
    let mut file = std::fs::File::open(path).map_err(|e| Error::new(path, e))?;
    check_layout(&mut file).map_err(|e| perr(format!("not a readable perf.data file: {e}")))?;
    file.seek(SeekFrom::Start(0))
        .map_err(|e| Error::new(path, e))?;
    let reader = BufReader::with_capacity(1 << 20, file);
    let PerfFileReader {
        mut perf_file,
        mut record_iter,
    } = PerfFileReader::parse_file(reader)
        .map_err(|e| perr(format!("not a readable perf.data file: {e}")))?;
    let little = matches!(
        perf_file.endian(),
        linux_perf_data::Endianness::LittleEndian
    );
    let tracing = perf_file
        .feature_section_data(Feature::TRACING_DATA)
        .map(<[u8]>::to_vec)
        .unwrap_or_default();
    let mut clockid: Option<ClockId> = None;
    let mut kinds = Vec::new();
    for attr in perf_file.event_attributes() {
        let name = attr.name().unwrap_or("").to_owned();
        let a = attr.attributes();
        if let PerfClock::ClockId(c) = a.clock {
            clockid = Some(c);
        }
        let tp = |what: &str| -> Result<Format> {
            match a.type_ {
                PerfEventType::Tracepoint(id) => tracepoint_format(&tracing, id).ok_or_else(|| {
                    perr(format!(
                        "event {name}: its format (tracepoint id {id}) is not in the file's \
                         tracing data; {what} cannot be read"
                    ))
                }),
                _ => Err(perr(format!("event {name} is not a tracepoint"))),
            }
        };
        let kind = if name.ends_with("sched_switch") {
            AttrKind::Switch(tp("switches")?)
        } else if name.ends_with("sched_wakeup") || name.ends_with("sched_wakeup_new") {
            AttrKind::Wakeup(tp("wakeups")?)
        } else if name.ends_with("sched_migrate_task") {
            AttrKind::Migrate(tp("migrations")?)
        } else if name == "raw_syscalls:sys_enter" {
            AttrKind::SysEnterRaw(tp("system calls")?)
        } else if name == "raw_syscalls:sys_exit" {
            AttrKind::SysExitRaw(tp("system calls")?)
        } else if let Some(n) = name.strip_prefix("syscalls:sys_enter_") {
            AttrKind::SysEnter(n.to_owned())
        } else if let Some(n) = name.strip_prefix("syscalls:sys_exit_") {
            AttrKind::SysExit(n.to_owned())
        } else if is_page_fault(&name) {
            AttrKind::PageFault(name.clone())
        } else if matches!(a.type_, PerfEventType::Tracepoint(_)) {
            AttrKind::Other
        } else {
            AttrKind::Sample(if name.is_empty() {
                "sample".into()
            } else {
                name.clone()
            })
        };
        kinds.push(kind);
    }
    let mut meta = serde_json::Map::new();
    for (key, value) in [
        ("hostname", perf_file.hostname().ok().flatten()),
        ("os_release", perf_file.os_release().ok().flatten()),
        ("perf_version", perf_file.perf_version().ok().flatten()),
        ("arch", perf_file.arch().ok().flatten()),
    ] {
        if let Some(v) = value {
            meta.insert(key.into(), v.into());
        }
    }
    let host = perf_file.hostname().ok().flatten().map(str::to_owned);
    if let Ok(Some(cd)) = perf_file.clock_data() {
        meta.insert(
            "clock_data".into(),
            serde_json::json!({"clockid": cd.clockid, "wall_clock_ns": cd.wall_clock_ns,
                "clockid_time_ns": cd.clockid_time_ns}),
        );
    }
    let mut builder = Builder::new(path, options);
    builder.trace.ranks[0].host = host;
    let mut comms: FxHashMap<i32, String> = FxHashMap::default();
    let mut symbolizer = Symbolizer::default();
    loop {
        let record = record_iter.next_record(&mut perf_file).map_err(|e| {
            perr(format!(
                "a record cannot be read (truncated or corrupt?): {e}"
            ))
        })?;
        let Some(record) = record else { break };
        let PerfFileRecord::EventRecord { attr_index, record } = record else {
            continue;
        };
        let record_type = record.record_type;
        let common: CommonData = match record.common_data() {
            Ok(c) => c,
            Err(_) => continue,
        };
        if record_type == RecordType::SAMPLE && !callchain_fits(&record) {
            return Err(perr(
                "a SAMPLE record does not parse: its call chain is longer than the record".into(),
            ));
        }
        if record_type == RecordType::MMAP2 && !build_id_fits(&record) {
            return Err(perr(
                "a MMAP2 record does not parse: its build id is longer than 20 bytes".into(),
            ));
        }
        let parsed = record
            .parse()
            .map_err(|e| perr(format!("a {record_type:?} record does not parse: {e}")))?;
        // The code mappings, with or without a time: a process's maps as perf keeps them
        // (inherited at fork, replaced at exec).
        let code = match &parsed {
            EventRecord::Mmap(m) if m.is_executable => {
                Some((m.pid, m.address, m.length, m.page_offset, &m.path))
            }
            EventRecord::Mmap2(m) if m.protection & PROT_EXEC != 0 => {
                Some((m.pid, m.address, m.length, m.page_offset, &m.path))
            }
            EventRecord::Fork(f) if f.pid != f.ppid => {
                symbolizer.fork(f.ppid, f.pid);
                None
            }
            EventRecord::Comm(c) if c.is_execve => {
                symbolizer.exec(c.pid);
                None
            }
            _ => None,
        };
        if let Some((pid, start, length, page_offset, path)) = code {
            symbolizer.map(pid, start, length, page_offset, &path.as_slice());
        }
        let Some(ts) = common.timestamp.and_then(|t| i64::try_from(t).ok()) else {
            if record_type == RecordType::SAMPLE {
                builder.count("records_without_time");
            }
            continue;
        };
        let header = |tid: Option<i32>| Header {
            ts,
            pid: common.pid,
            tid: tid.or(common.tid).unwrap_or(-1),
        };
        let ev = match parsed {
            EventRecord::Sample(s) => {
                let raw: Vec<u8> = s.raw.map(|r| r.as_slice().into_owned()).unwrap_or_default();
                let kind = kinds.get(attr_index).cloned().unwrap_or(AttrKind::Other);
                let int = |f: &Format, name: &str| f.int(&raw, name, little);
                let missing = |what: &str| perr(format!("a {what} sample lacks its fields"));
                match kind {
                    AttrKind::Switch(f) => Ev::Switch {
                        prev: int(&f, "prev_pid").ok_or_else(|| missing("sched_switch"))? as i32,
                        left: left_from_bits(
                            int(&f, "prev_state").ok_or_else(|| missing("sched_switch"))?,
                        ),
                        next: int(&f, "next_pid").ok_or_else(|| missing("sched_switch"))? as i32,
                    },
                    AttrKind::Wakeup(f) => Ev::Wakeup {
                        woken: int(&f, "pid").ok_or_else(|| missing("sched_wakeup"))? as i32,
                    },
                    AttrKind::Migrate(f) => Ev::Migrate {
                        task: int(&f, "pid").ok_or_else(|| missing("sched_migrate_task"))? as i32,
                        from: int(&f, "orig_cpu").unwrap_or(-1),
                        to: int(&f, "dest_cpu").unwrap_or(-1),
                    },
                    AttrKind::SysEnterRaw(f) => Ev::SysEnter {
                        name: syscall_name(int(&f, "id").ok_or_else(|| missing("sys_enter"))?),
                    },
                    AttrKind::SysExitRaw(f) => Ev::SysExit {
                        name: Some(syscall_name(
                            int(&f, "id").ok_or_else(|| missing("sys_exit"))?,
                        )),
                    },
                    AttrKind::SysEnter(n) => Ev::SysEnter { name: n },
                    AttrKind::SysExit(n) => Ev::SysExit { name: Some(n) },
                    AttrKind::PageFault(n) => Ev::PageFault { event: n },
                    AttrKind::Sample(n) => Ev::Sample {
                        event: n,
                        frames: symbolizer.frames(
                            s.pid.or(common.pid).unwrap_or(-1),
                            s.ip,
                            s.callchain
                                .map(|c| (0..c.len()).filter_map(|i| c.get(i)).collect()),
                        ),
                    },
                    AttrKind::Other => Ev::Other,
                }
            }
            EventRecord::ContextSwitch(cs) => match cs {
                ContextSwitchRecord::Out { preempted, .. } => Ev::SwitchOut {
                    preempted: preempted == TaskWasPreempted::Yes,
                },
                ContextSwitchRecord::In { .. } => Ev::SwitchIn,
            },
            EventRecord::Comm(c) => {
                let name = String::from_utf8_lossy(&c.name.as_slice()).into_owned();
                comms.insert(c.tid, name);
                let t = builder.thread(c.tid);
                t.pid = Some(c.pid);
                continue;
            }
            EventRecord::Fork(f) => {
                builder.handle(
                    header(None),
                    Ev::Fork {
                        pid: f.pid,
                        tid: f.tid,
                    },
                );
                continue;
            }
            EventRecord::Exit(f) => {
                builder.handle(header(Some(f.tid)), Ev::Exit);
                continue;
            }
            EventRecord::Lost(l) => {
                builder.trace.ranks[0].notes.count("lost_records", l.count);
                continue;
            }
            _ => continue,
        };
        builder.handle(header(None), ev);
    }
    for (tid, name) in comms {
        if let Some(t) = builder.threads.get_mut(&tid) {
            t.comm = Some(name);
        }
    }
    if builder.trace.ranks[0].notes.events_read == 0 {
        return Err(perr(
            "no sample records (an empty or unfinished recording?)".into(),
        ));
    }
    let clock = clock_info(clockid, 1, "perf.data attributes");
    builder.finish(path, clock, meta)
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
    let mut meta: serde_json::Map<String, serde_json::Value> = rank
        .metadata_json
        .as_deref()
        .and_then(|m| serde_json::from_str(m).ok())
        .unwrap_or_default();
    meta.insert(
        "joined".into(),
        serde_json::json!({"threads": remap.len(), "events": joined}),
    );
    rank.metadata_json = Some(serde_json::Value::Object(meta).to_string());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_lines_parse_with_and_without_cpu_pid_and_period() {
        let l = parse_line("  lto cgu.07 25554 [001] 49049.128030:     sched:sched_switch: prev_comm=x prev_pid=1 prev_prio=120 prev_state=S ==> next_comm=y next_pid=2 next_prio=120").unwrap();
        assert_eq!(l.comm, "lto cgu.07");
        assert_eq!(
            l.header,
            Header {
                ts: 49_049_128_030_000,
                pid: None,
                tid: 25554
            }
        );
        assert_eq!(l.event, "sched:sched_switch");
        assert_eq!(l.digits, 6);
        let l = parse_line("python3 10/11 49049.124111123:          1            page-faults:  ffffffff81775b9a elf_load+0x28a ([kernel.kallsyms])").unwrap();
        assert_eq!(
            l.header,
            Header {
                ts: 49_049_124_111_123,
                pid: Some(10),
                tid: 11
            }
        );
        assert_eq!(l.event, "page-faults");
        assert_eq!(l.digits, 9);
        assert!(parse_line("hello world").is_none());
        assert!(
            parse_line("\tffffffff815fa26d unmap_page_range+0x51d ([kernel.kallsyms])").is_none()
        );
    }

    #[test]
    fn switch_fields_and_states_parse() {
        let l = parse_line("bash 7 [000] 1.000001: sched:sched_switch: prev_comm=a b prev_pid=7 prev_prio=120 prev_state=R+ ==> next_comm=c next_pid=9 next_prio=120").unwrap();
        assert_eq!(
            text_event(&l, vec![]),
            Some(Ev::Switch {
                prev: 7,
                left: Left::Runnable,
                next: 9
            })
        );
        assert_eq!(left_from_letters("S"), Left::Asleep);
        assert_eq!(left_from_letters("D|K"), Left::Asleep);
        assert_eq!(left_from_letters("X"), Left::Dead);
        assert_eq!(left_from_bits(0), Left::Runnable);
        assert_eq!(left_from_bits(0x100), Left::Runnable);
        assert_eq!(left_from_bits(1), Left::Asleep);
        assert_eq!(left_from_bits(0x20), Left::Dead);
    }

    #[test]
    fn symbols_come_off_stack_lines() {
        assert_eq!(
            sample_symbol("\tffffffff815fa26d unmap_page_range+0x51d ([kernel.kallsyms])")
                .as_deref(),
            Some("unmap_page_range")
        );
        assert_eq!(
            sample_symbol("  7f00 [unknown] (/usr/bin/python3)").as_deref(),
            Some("[unknown]")
        );
        assert_eq!(sample_symbol("   42776").as_deref(), None);
    }

    #[test]
    fn only_regular_files_are_read_for_symbols() {
        // A perf.data names any path: reading a device, a FIFO or a pseudo-file would not end.
        for path in [
            "/dev/zero",
            "/dev/stdin",
            "/proc/self/pagemap",
            "/proc/kcore",
            "/",
            "/x/y",
        ] {
            assert!(!is_module_file(path), "{path}");
        }
        let exe = std::env::current_exe().unwrap();
        assert!(is_module_file(exe.to_str().unwrap()));
    }

    #[test]
    fn a_mapping_whose_offset_overflows_holds_nothing() {
        let mut s = Symbolizer::default();
        s.map(7, 0x1000, 0x1000, u64::MAX - 4, b"[vdso]");
        assert_eq!(s.frame(7, 0x1800), None);
        s.map(7, 0x1000, 0x1000, 0, b"[vdso]");
        assert!(s.frame(7, 0x1800).is_some());
    }

    #[test]
    fn tracepoint_formats_parse() {
        let text = b"name: sched_switch\nID: 372\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\nprint fmt: \"x\"\n";
        let mut blob = b"junk\n".to_vec();
        blob.extend_from_slice(text);
        let f = tracepoint_format(&blob, 372).unwrap();
        assert_eq!(f.fields["prev_pid"], (24, 4, true));
        assert_eq!(f.fields["prev_comm"], (8, 16, false));
        let mut raw = vec![0u8; 28];
        raw[24..28].copy_from_slice(&(-5i32).to_le_bytes());
        assert_eq!(f.int(&raw, "prev_pid", true), Some(-5));
        // A damaged format text: the field ends past usize::MAX.
        let mut f = f;
        f.fields.insert("far".into(), (usize::MAX - 1, 4, false));
        assert_eq!(f.int(&raw, "far", true), None);
        assert!(tracepoint_format(&blob, 373).is_none());
    }
}
