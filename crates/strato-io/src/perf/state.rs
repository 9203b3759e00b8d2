//! The thread state machine both readers feed ([`Builder`]): per task, what it is doing now
//! (running, runnable, blocked with a cause, in a system call), turned into thread-state spans,
//! slow system calls, scheduling and page-fault instants and CPU samples, with the rules of the
//! live recorder (`strato_record::os`; see the parent module's docs); and the clock a perf trace
//! is on ([`clock_info`]).

use std::collections::BTreeMap;
use std::path::Path;
use strato_trace::metadata::SourceMetadata;
use strato_trace::OptionalId;

use linux_perf_data::linux_perf_event_reader::ClockId;
use rustc_hash::FxHashMap;
use strato_record::os::{blocked_cause, ThreadState};
use strato_record::sample::fold_leaf_first;
use strato_trace::{
    ClockDomain, ClockInfo, ClockSource, Instant, Level, MemoryTracker, Process, Rank, RankId,
    SourceFormat, Span, StrId, Trace, Track, TrackId, TrackKind,
};

use super::{Ev, Header, Left, SLOW_SYSCALL_NS, THREAD_STATE_CATEGORY};
use crate::error::{Error, ErrorKind, Result};
use crate::ImportOptions;

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Now {
    Unknown,
    On(i64),
    Off { since: i64, state: ThreadState },
}

#[derive(Debug)]
pub(super) struct ThreadSt {
    pub(super) pid: Option<i32>,
    pub(super) comm: Option<String>,
    pub(super) now: Now,
    /// The system call the thread is in: (name, entry time).
    pub(super) syscall: Option<(String, i64)>,
    /// The call it was in when it switched out (for the span's args).
    pub(super) blocked_in: Option<String>,
}

/// An event of the output, before its track is known.
#[derive(Debug)]
pub(super) struct Pending {
    pub(super) tid: i32,
    pub(super) start: i64,
    pub(super) end: Option<i64>,
    pub(super) name: StrId,
    pub(super) category: StrId,
    pub(super) args: Option<String>,
}

/// Builds the trace of one perf input from its events (see the module docs).
pub(super) struct Builder<'o> {
    pub(super) options: &'o ImportOptions,
    pub(super) trace: Trace,
    pub(super) rank: RankId,
    pub(super) cat_state: StrId,
    pub(super) cat_syscall: StrId,
    pub(super) cat_sched: StrId,
    pub(super) cat_fault: StrId,
    pub(super) cat_sample: StrId,
    pub(super) states: [StrId; 6],
    pub(super) threads: FxHashMap<i32, ThreadSt>,
    pub(super) pending: Vec<Pending>,
    pub(super) syscalls: BTreeMap<String, (u64, i64)>,
    pub(super) counts: BTreeMap<&'static str, u64>,
    pub(super) memory: MemoryTracker,
    /// Estimated heap bytes of `pending`.
    pub(super) pending_bytes: usize,
    pub(super) over_budget: Option<u64>,
}

impl<'o> Builder<'o> {
    pub(super) fn new(path: &Path, options: &'o ImportOptions) -> Builder<'o> {
        let mut trace = Trace::default();
        let rank = trace.add_rank(Rank {
            rank: None,
            world_size: None,
            source: path.display().to_string(),
            format: SourceFormat::Perf,
            host: None,
            metadata: SourceMetadata::None,
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

    pub(super) fn count(&mut self, what: &'static str) {
        *self.counts.entry(what).or_default() += 1;
    }

    pub(super) fn thread(&mut self, tid: i32) -> &mut ThreadSt {
        self.threads.entry(tid).or_insert(ThreadSt {
            pid: None,
            comm: None,
            now: Now::Unknown,
            syscall: None,
            blocked_in: None,
        })
    }

    pub(super) fn state_id(&self, state: ThreadState) -> StrId {
        let i = ThreadState::ALL
            .iter()
            .position(|s| *s == state)
            .unwrap_or(ThreadState::ALL.len() - 1);
        self.states[i]
    }

    /// Keeps an output event. What is kept (the events waiting for their tracks, their args,
    /// and the trace's strings) counts against the memory budget: once over it, the import
    /// stops reading and fails ([`ErrorKind::MemoryBudget`]).
    pub(super) fn push(&mut self, p: Pending) {
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
    pub(super) fn check_budget(&mut self) {
        let over = self.memory.check(&self.trace).is_err()
            || (self.pending_bytes as u64).saturating_add(self.trace.strings.len() as u64 * 32)
                > self.options.memory_budget_bytes;
        if over {
            self.over_budget = Some(self.options.memory_budget_bytes);
        }
    }

    /// Ends `tid`'s current state at `ts` (a span when it is known).
    pub(super) fn close(&mut self, tid: i32, ts: i64, woken_by: Option<i32>) {
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

    pub(super) fn switch_out(&mut self, tid: i32, ts: i64, left: Left) {
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

    pub(super) fn switch_in(&mut self, tid: i32, ts: i64) {
        if tid == 0 || matches!(self.thread(tid).now, Now::On(_)) {
            return;
        }
        self.close(tid, ts, None);
        self.thread(tid).now = Now::On(ts);
    }

    pub(super) fn handle(&mut self, h: Header, ev: Ev) {
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
    pub(super) fn finish(
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
                    correlation: OptionalId::NONE,
                    external_id: OptionalId::NONE,
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
        self.trace.ranks[self.rank.0 as usize].metadata =
            SourceMetadata::of_value(serde_json::Value::Object(meta));
        self.trace.clock = clock;
        Ok(self.trace)
    }
}

/// The clock of a perf trace: `clockid` (None: perf's default clock) and the timestamps'
/// resolution in ns.
pub(super) fn clock_info(clockid: Option<ClockId>, resolution_ns: i64, how: &str) -> ClockInfo {
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
