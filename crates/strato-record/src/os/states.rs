//! What each kernel event does, in time order: thread-state spans, slow system calls,
//! migrations, the per-call counts, and the OS-event and collector-wait counters of each
//! thread of the tree.

use super::collector::{Body, Collector, KEvent, Now};
use super::file::OsEv;
use super::{
    blocked_cause, syscall_name, ThreadState, OS_EVENTS_COUNTER_PREFIX, OS_EVENTS_SAMPLE_NS,
    SYSCALL_CATEGORY, THREAD_STATE_CATEGORY,
};

/// `__trace_sched_switch_state` bits (include/trace/events/sched.h): the task-state index as
/// one bit, and TASK_REPORT_MAX (0x100 since 4.14) for a preempted task.
const STATE_EXITING: i64 = 0x10 | 0x20;
const STATE_PREEMPTED: i64 = 0x100;

impl Collector {
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
    pub(super) fn sample_os_events(&mut self, tid: i32, ts: i64, force: bool) {
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
    pub(super) fn close_state(&mut self, tid: i32, ts: i64, woken_by: Option<i32>) {
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

    pub(super) fn handle(&mut self, e: KEvent) {
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
