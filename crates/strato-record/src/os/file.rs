//! One `<pid>-os.strato` file ([`OsFile`]): the OS events of a process not yet written, its
//! per-call and scheduler counts, and how a chunk of them is encoded.

use std::collections::HashMap;
use std::io;
use std::path::Path;

use strato_trace::Level;

use super::OsError;
use crate::format::{tag, Enc, FLAG_ARGS};
use crate::side_file::SideFile;

#[derive(Debug, Clone)]
pub(super) enum OsEv {
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
    ///
    /// [`OS_EVENTS_COUNTER_PREFIX`]: super::OS_EVENTS_COUNTER_PREFIX
    /// [`COLLECTOR_WAIT_COUNTER_PREFIX`]: super::COLLECTOR_WAIT_COUNTER_PREFIX
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
pub(super) struct SyscallCount {
    /// Calls entered (`sys_enter`): every call, whether or not its exit was matched.
    pub(super) count: u64,
    /// Calls whose `sys_exit` was matched with their `sys_enter` (same thread, same call), and
    /// their summed time.
    pub(super) timed: u64,
    pub(super) time_ns: i64,
}

/// One `<pid>-os.strato` file: the side file and the OS events and counts not yet written.
#[derive(Debug)]
pub(super) struct OsFile {
    pub(super) side: SideFile,
    pub(super) events: Vec<OsEv>,
    /// Per system call name: calls entered, calls timed (their exit matched their entry) and
    /// the summed time of the timed ones, ns.
    pub(super) syscalls: HashMap<&'static str, SyscallCount>,
    pub(super) switches: u64,
    pub(super) wakeups: u64,
    pub(super) migrations: u64,
    pub(super) last_ts: i64,
}

impl OsFile {
    pub(super) fn open(
        dir: &Path,
        pid: i32,
        ppid: i32,
        start_ts: i64,
        level: u64,
    ) -> Result<OsFile, OsError> {
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
    pub(super) fn flush(&mut self, stop: Option<(i64, &[(&str, String)])>) -> io::Result<()> {
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
