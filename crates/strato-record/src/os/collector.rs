//! The collecting thread ([`Collector`]): drains every ring buffer into decoded kernel events
//! ([`KEvent`]), hands them over in time order, and writes each process's file and summary
//! (per chunk, and at the end).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use perf_event::data::Record as PerfRecord;

use super::file::{OsEv, OsFile};
use super::kernel::{kernel_lost, kind_code, ppid_of, Kind, Sources};
use super::wait::CollectorWait;
use super::{
    OsError, OsOptions, OsSummary, ThreadState, COLLECTOR_WAIT_COUNTER_PREFIX,
    OS_COLLECTOR_METADATA_KEY, OS_METADATA_KEY,
};
use crate::side_file::SideFile;

/// One decoded kernel event.
#[derive(Debug, Clone, Copy)]
pub(super) struct KEvent {
    pub(super) ts: i64,
    /// Order of arrival, to keep equal timestamps stable.
    seq: u64,
    /// The task the event fired in (`current`).
    pub(super) tid: i32,
    pub(super) pid: i32,
    /// The CPU the event fired on.
    pub(super) cpu: u32,
    pub(super) body: Body,
}

#[derive(Debug, Clone, Copy)]
pub(super) enum Body {
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

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Now {
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
pub(super) struct Thread {
    pub(super) tgid: i32,
    pub(super) now: Now,
    pub(super) syscall: Option<(i64, i64)>,
    /// OS book-keeping events in this thread so far, and what its counter last showed (count,
    /// time).
    pub(super) os_events: u64,
    pub(super) sampled: (u64, i64),
}

/// The collecting thread's state.
pub(super) struct Collector {
    pub(super) options: OsOptions,
    sources: Sources,
    /// The system-call buffers (indices into `sources.samplers`) whose last record read was a
    /// LOST record: [`Body::SyscallsLost`] goes before their next record.
    lost_gap: std::collections::HashSet<usize>,
    pub(super) threads: HashMap<i32, Thread>,
    pub(super) files: HashMap<i32, OsFile>,
    failed: Vec<PathBuf>,
    pending: Vec<KEvent>,
    seq: u64,
    pub(super) summary: OsSummary,
    throttling: crate::Throttling,
    pub(super) wait: CollectorWait,
    start_ts: i64,
    pub(super) cat_state: HashMap<i32, [u32; 3]>,
}

/// Events younger than this, counted from the start of the drain that read them, stay pending
/// (another CPU's buffer may still hold older ones: the kernel stamps a record before it
/// writes it).
const HOLDBACK_NS: i64 = 30_000_000;

impl Collector {
    pub(super) fn new(options: OsOptions, sources: Sources) -> Collector {
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
    pub(super) fn note_wait(&mut self, grown: impl IntoIterator<Item = (i32, i64)>, ts: i64) {
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

    pub(super) fn add_thread(&mut self, tid: i32, tgid: i32, ppid: i32) {
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

    pub(super) fn run(&mut self, stop: &AtomicBool) -> OsSummary {
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
