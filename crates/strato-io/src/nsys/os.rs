//! The OS level: thread states from the scheduling events (`SCHED_EVENTS`, switch-in /
//! switch-out, as the live recorder's OS level writes them), with the cause of a switch-out
//! the export does not name told by the OS runtime call (`OSRT_API`) covering it.

use rustc_hash::FxHashMap;
use serde_json::{Map, Value};
use strato_trace::{Level, StrId};

use super::schema::{for_each_row, int, put_int, quote};
use super::{Importer, FORMAT, SCHED, THREAD_STATE_CATEGORY};

impl Importer<'_> {
    /// `SCHED_EVENTS` -> thread-state spans on each thread's own track (see
    /// [`off_cpu_state`] and `docs/formats/nsys.md`): `running` from a sched-in to the next
    /// sched-out of the thread, the off-CPU state from a sched-out to the next sched-in; no state
    /// before a thread's first event, after its last, or after a switch-out that ended the
    /// thread. Rows are read sorted by (thread, time, file order) by SQLite, so one thread's
    /// state is kept at a time. A sched-in followed by another sched-in
    /// (`sched_in_without_sched_out`) and a sched-out while the thread is already off CPU
    /// (`sched_out_without_sched_in`) are dropped and counted; so are rows without a thread
    /// (`sched_events_without_thread`) or a direction (`sched_events_without_direction`).
    pub(super) fn sched_events(&mut self) -> rusqlite::Result<()> {
        let Some(mut q) = self.schema.select(SCHED) else {
            return Ok(());
        };
        let start = q.col("start");
        let cpu = q.col("cpu");
        let is_in = q.col("isSchedIn");
        let gtid = q.col("globalTid");
        let state = q.col("threadState");
        let block = q.col("threadBlock");
        let mut order: Vec<String> = ["globalTid", "start"]
            .iter()
            .filter(|c| self.schema.has_col(SCHED, c))
            .map(|c| format!("t.{}", quote(c)))
            .collect();
        order.push("t.rowid".into());
        q.tail = format!(" ORDER BY {}", order.join(", "));
        let sql = q.sql();
        let level = self
            .options
            .level_map
            .level(FORMAT.as_str(), SCHED)
            .unwrap_or(Level::Os);
        let category = self.trace.intern(THREAD_STATE_CATEGORY);
        let mut names: FxHashMap<&'static str, StrId> = FxHashMap::default();
        let osrt_calls = std::mem::take(&mut self.osrt_calls);
        let osrt_calls: FxHashMap<i64, OsrtCalls> = osrt_calls
            .into_iter()
            .map(|(g, calls)| (g, calls.indexed()))
            .collect();
        // The thread being read and its current state.
        let mut current: Option<(i64, OnCpu)> = None;
        for_each_row(self.conn, &sql, |row| {
            if !self.row_read() {
                return;
            }
            let Some(g) = int(row, gtid) else {
                self.notes().count("sched_events_without_thread", 1);
                return;
            };
            let Some(incoming) = int(row, is_in).map(|v| v != 0) else {
                self.notes().count("sched_events_without_direction", 1);
                return;
            };
            let Some(ts) = self.instant_time(int(row, start)) else {
                return;
            };
            let now = match current.take() {
                Some((thread, now)) if thread == g => now,
                _ => OnCpu::Unknown,
            };
            let track = self.thread_track(g);
            let mut emit = |me: &mut Self, from: i64, state: &'static str, args| {
                let name = *names.entry(state).or_insert_with(|| me.trace.intern(state));
                me.span(track, (from, ts), name, category, level, None, args);
            };
            let next = if incoming {
                match now {
                    OnCpu::On { .. } => self.notes().count("sched_in_without_sched_out", 1),
                    OnCpu::Off { since, state, args } => emit(self, since, state, args),
                    OnCpu::Unknown | OnCpu::Ended => {}
                }
                let args = self.options.keep_args.then(|| {
                    let mut a = Map::new();
                    put_int(&mut a, "cpu", row, cpu);
                    a
                });
                OnCpu::On { since: ts, args }
            } else {
                let (thread_state, thread_block) = (int(row, state), int(row, block));
                let state_name = thread_state.and_then(|s| self.thread_states.name(s));
                let block_name = thread_block.and_then(|b| self.thread_blocks.name(b));
                let mut off = off_cpu_state(state_name, block_name);
                // Cause not told by the export: the OS runtime call the thread was in.
                let inferred = (off == OffCpu::State("blocked:other")
                    && block_name.is_none_or(|b| b == "Unknown"))
                .then(|| osrt_calls.get(&g).and_then(|c| c.covering(ts)))
                .flatten();
                if let Some(call) = inferred {
                    off = OffCpu::State(call.cause);
                }
                let call_name = inferred.map(|c| c.name);
                let args = self.options.keep_args.then(|| {
                    let mut a = Map::new();
                    if let Some(n) = call_name {
                        a.insert(
                            "osrtCall".into(),
                            Value::String(self.trace.str(n).to_owned()),
                        );
                    }
                    if let Some(s) = thread_state {
                        a.insert("threadState".into(), self.thread_states.label_value(s));
                    }
                    if let Some(b) = thread_block {
                        a.insert("threadBlock".into(), self.thread_blocks.label_value(b));
                    }
                    a
                });
                match now {
                    // After running, or the thread's first event: its off-CPU state starts here.
                    OnCpu::On { .. } | OnCpu::Unknown => {
                        if let OnCpu::On { since, args: on } = now {
                            emit(self, since, "running", on);
                        }
                        match off {
                            OffCpu::Ended => OnCpu::Ended,
                            OffCpu::State(state) => OnCpu::Off {
                                since: ts,
                                state,
                                args,
                            },
                        }
                    }
                    off @ (OnCpu::Off { .. } | OnCpu::Ended) => {
                        self.notes().count("sched_out_without_sched_in", 1);
                        off
                    }
                }
            };
            current = Some((g, next));
        })
    }
}

/// A thread's state while its `SCHED_EVENTS` are read.
#[derive(Debug, Clone)]
pub(super) enum OnCpu {
    /// Before the thread's first event.
    Unknown,
    /// Switched in at `since`.
    On {
        since: i64,
        args: Option<Map<String, Value>>,
    },
    /// Switched out at `since`, in `state`.
    Off {
        since: i64,
        state: &'static str,
        args: Option<Map<String, Value>>,
    },
    /// Switched out for the last time (the thread ended).
    Ended,
}

/// One `OSRT_API` call whose name tells a blocking cause ([`osrt_cause`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct OsrtCall {
    pub(super) start: i64,
    pub(super) end: i64,
    pub(super) name: StrId,
    pub(super) cause: &'static str,
}

/// One thread's `OSRT_API` calls: gathered in file order, then [`OsrtCalls::indexed`] (sorted
/// by start, with the running maximum of ends) for [`OsrtCalls::covering`].
#[derive(Debug, Default)]
pub(super) struct OsrtCalls {
    pub(super) calls: Vec<OsrtCall>,
    pub(super) max_end: Vec<i64>,
}

impl OsrtCalls {
    pub(super) fn indexed(mut self) -> OsrtCalls {
        self.calls
            .sort_by_key(|c| (c.start, std::cmp::Reverse(c.end)));
        let mut max = i64::MIN;
        self.max_end = self
            .calls
            .iter()
            .map(|c| {
                max = max.max(c.end);
                max
            })
            .collect();
        self
    }

    /// The innermost call (the latest to start) with `start <= ts < end`.
    pub(super) fn covering(&self, ts: i64) -> Option<&OsrtCall> {
        let mut i = self.calls.partition_point(|c| c.start <= ts);
        while i > 0 {
            i -= 1;
            if self.max_end[i] <= ts {
                return None;
            }
            if self.calls[i].end > ts {
                return Some(&self.calls[i]);
            }
        }
        None
    }
}

/// The blocking cause an OS runtime call (`OSRT_API` name, a libc function) stands for, when it
/// names one: lock and condition waits, semaphores and joins are `blocked:lock`; sleeps
/// `blocked:sleep`; file, pipe, socket and device calls (`read`, `write`, `poll`, `fopen`,
/// `ioctl`, ...) `blocked:io`. Anything else (`mmap`, `pipe2`, `pthread_create`, ...) names no
/// cause (`None`: the state stays `blocked:other`). A `64` suffix (`fopen64`, `open64`) and
/// glibc's `__` prefix are ignored.
pub(super) fn osrt_cause(name: &str) -> Option<&'static str> {
    let base = name.trim_start_matches("__");
    let base = base.strip_suffix("64").unwrap_or(base);
    match base {
        "pthread_mutex_lock"
        | "pthread_mutex_timedlock"
        | "pthread_cond_wait"
        | "pthread_cond_timedwait"
        | "pthread_cond_clockwait"
        | "pthread_rwlock_rdlock"
        | "pthread_rwlock_wrlock"
        | "pthread_rwlock_timedrdlock"
        | "pthread_rwlock_timedwrlock"
        | "pthread_spin_lock"
        | "pthread_barrier_wait"
        | "pthread_join"
        | "pthread_timedjoin_np"
        | "sem_wait"
        | "sem_timedwait"
        | "sem_clockwait"
        | "semop"
        | "semtimedop"
        | "futex"
        | "flock"
        | "lockf" => Some("blocked:lock"),
        "sleep" | "usleep" | "nanosleep" | "clock_nanosleep" | "pause" => Some("blocked:sleep"),
        "read" | "write" | "pread" | "pwrite" | "readv" | "writev" | "preadv" | "pwritev"
        | "fread" | "fwrite" | "fgets" | "fputs" | "fflush" | "fopen" | "fdopen" | "freopen"
        | "fclose" | "open" | "openat" | "creat" | "close" | "fsync" | "fdatasync" | "sync"
        | "msync" | "poll" | "ppoll" | "select" | "pselect" | "epoll_wait" | "epoll_pwait"
        | "recv" | "recvfrom" | "recvmsg" | "send" | "sendto" | "sendmsg" | "accept"
        | "accept4" | "connect" | "ioctl" | "getline" | "getc" | "fgetc" | "fputc" | "fprintf"
        | "fscanf" | "sendfile" | "splice" | "aio_suspend" | "io_getevents" => Some("blocked:io"),
        _ => None,
    }
}

/// What a switch-out says about the time until the next switch-in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OffCpu {
    /// A thread-state name.
    State(&'static str),
    /// The thread ended: no state after it.
    Ended,
}

/// The off-CPU state after a switch-out, from the `ENUM_SAMPLING_THREAD_STATE` name of its
/// `threadState` and the `ENUM_SCHEDULING_THREAD_BLOCK` name of its `threadBlock` (the names,
/// not the ids, so it holds when an export renumbers them). A block reason that names a cause
/// wins; else the state: `Running` (switched out while runnable: preempted) is `runnable`,
/// `Terminated` ends the thread, anything else (`Interruptible`, `Uninterruptible`, `Waiting`,
/// `Unknown`, missing: off CPU, cause not told) is `blocked:other`. Block reasons:
/// - `runnable`: `NonBlocked`, `Preempted`, `QuantumEnd`, `DispatchInt`, `YieldExecution`,
///   `DeferredPreempt`, `ReadyToRun`;
/// - `blocked:sleep`: `Nanosleep`, `DelayExecution`;
/// - `blocked:lock`: `Mutex`, `CondVar`, `Sem`, `Join`, `WaitThread`, `PushLock`,
///   `WindowsMutex`, `FastMutex`, `GuardedMutex`, `KeyedEvent`, `EventPair`, `Rendezvous`,
///   `AlertByThreadId`;
/// - `blocked:io`: `PageIn`, `PageOut`, `NetSend`, `NetReply`;
/// - `blocked:other`: every other reason (`Unknown`, signals, stops, message passing, paging
///   and memory waits other than page in/out, ...).
pub(super) fn off_cpu_state(thread_state: Option<&str>, thread_block: Option<&str>) -> OffCpu {
    let by_block = match thread_block {
        Some(
            "NonBlocked" | "Preempted" | "QuantumEnd" | "DispatchInt" | "YieldExecution"
            | "DeferredPreempt" | "ReadyToRun",
        ) => Some("runnable"),
        Some("Nanosleep" | "DelayExecution") => Some("blocked:sleep"),
        Some(
            "Mutex" | "CondVar" | "Sem" | "Join" | "WaitThread" | "PushLock" | "WindowsMutex"
            | "FastMutex" | "GuardedMutex" | "KeyedEvent" | "EventPair" | "Rendezvous"
            | "AlertByThreadId",
        ) => Some("blocked:lock"),
        Some("PageIn" | "PageOut" | "NetSend" | "NetReply") => Some("blocked:io"),
        Some("Unknown") | None => None,
        Some(_) => Some("blocked:other"),
    };
    match (thread_state, by_block) {
        (Some("Terminated"), _) => OffCpu::Ended,
        (_, Some(state)) => OffCpu::State(state),
        (Some("Running"), None) => OffCpu::State("runnable"),
        _ => OffCpu::State("blocked:other"),
    }
}
