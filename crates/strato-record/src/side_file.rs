//! The launcher's side files of a recording: `<pid>-os.strato` ([`crate::os`]) and
//! `<pid>-samples.strato` ([`crate::sample`]), written by collectors that run in the launcher,
//! beside the program's own recording.
//!
//! This module owns what the two have in common: the collecting thread ([`CollectorThread`]), the file, its per-file string and thread-track
//! tables (interned, each definition written once, in the first chunk that uses it), and the
//! framing of a chunk — the PROCESS and START records in the first chunk, metadata and STOP in
//! the last. Each chunk is appended whole ([`frame`]), so a file cut short by a crash of the
//! launcher still decodes up to its last complete chunk. What the events are is the caller's.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::format::{frame, tag, Enc, MAGIC};

/// A track of a side file: a thread's own track, or a counter (name and unit string ids).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum SideTrack {
    Thread(i32),
    Counter { name: u32, unit: u32 },
}

/// One side file of process `pid`: its tables and what of them is already written.
#[derive(Debug)]
pub(crate) struct SideFile {
    pub pid: i32,
    pub ppid: i32,
    pub path: PathBuf,
    /// `None` once writing failed (the file is then reported, never retried).
    pub file: Option<File>,
    first: bool,
    /// The PROCESS record's source name (`os`, `samples`).
    source: &'static str,
    strings: Vec<String>,
    string_ids: HashMap<String, u32>,
    strings_written: usize,
    tracks: Vec<SideTrack>,
    track_ids: HashMap<SideTrack, u32>,
    tracks_written: usize,
    pub start_ts: i64,
    level: u64,
}

impl SideFile {
    /// Creates (truncates) `path`. String id 0 is the empty string, as in every recording.
    pub fn create(
        path: PathBuf,
        pid: i32,
        ppid: i32,
        source: &'static str,
        start_ts: i64,
        level: u64,
    ) -> io::Result<SideFile> {
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&path)?;
        Ok(SideFile {
            pid,
            ppid,
            path,
            file: Some(file),
            first: true,
            source,
            strings: vec![String::new()],
            string_ids: HashMap::new(),
            strings_written: 1,
            tracks: Vec::new(),
            track_ids: HashMap::new(),
            tracks_written: 0,
            start_ts,
            level,
        })
    }

    /// `dir/<pid>-<suffix>.strato`.
    pub fn path_in(dir: &Path, pid: i32, suffix: &str) -> PathBuf {
        dir.join(format!("{pid}-{suffix}.strato"))
    }

    /// The paths of `files`, sorted (a collector's summary lists them so).
    pub fn sorted_paths<'a>(files: impl Iterator<Item = &'a SideFile>) -> Vec<PathBuf> {
        let mut paths: Vec<PathBuf> = files.map(|f| f.path.clone()).collect();
        paths.sort();
        paths
    }

    /// The id of string `s` in this file.
    pub fn string(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.string_ids.get(s) {
            return id;
        }
        let id = self.strings.len() as u32;
        self.strings.push(s.to_owned());
        self.string_ids.insert(s.to_owned(), id);
        id
    }

    /// The id of thread `tid`'s track in this file.
    pub fn track(&mut self, tid: i32) -> u32 {
        self.track_id(SideTrack::Thread(tid))
    }

    /// The id of the counter track `name` (values in `unit`) in this file.
    pub fn counter_track(&mut self, name: &str, unit: &str) -> u32 {
        let name = self.string(name);
        let unit = self.string(unit);
        self.track_id(SideTrack::Counter { name, unit })
    }

    fn track_id(&mut self, track: SideTrack) -> u32 {
        if let Some(&id) = self.track_ids.get(&track) {
            return id;
        }
        let id = self.tracks.len() as u32;
        self.tracks.push(track);
        self.track_ids.insert(track, id);
        id
    }

    /// Starts a chunk: the PROCESS record (first chunk), the definitions of every string and
    /// track interned since the last chunk, and the START record (first chunk). Intern
    /// everything the chunk's events use before calling it.
    pub fn begin_chunk(&mut self) -> Enc {
        let mut enc = Enc::default();
        if self.first {
            enc.u8(tag::PROCESS);
            enc.sv(i64::from(self.pid));
            enc.sv(i64::from(self.ppid));
            enc.sv(self.start_ts);
            enc.sv(self.start_ts + crate::read_clock(libc::CLOCK_REALTIME) - crate::now_ns());
            enc.text(
                &std::fs::read_to_string("/proc/sys/kernel/hostname")
                    .map(|s| s.trim().to_owned())
                    .unwrap_or_default(),
            );
            enc.text(self.source);
            enc.text("[]");
        }
        for (id, text) in self.strings.iter().enumerate().skip(self.strings_written) {
            enc.u8(tag::STRING);
            enc.uv(id as u64);
            enc.text(text);
        }
        self.strings_written = self.strings.len();
        for (id, track) in self.tracks.iter().enumerate().skip(self.tracks_written) {
            match *track {
                SideTrack::Thread(tid) => {
                    enc.u8(tag::THREAD_TRACK);
                    enc.uv(id as u64);
                    enc.sv(i64::from(tid));
                    enc.uv(0);
                }
                SideTrack::Counter { name, unit } => {
                    enc.u8(tag::COUNTER_TRACK);
                    enc.uv(id as u64);
                    enc.uv(u64::from(name));
                    enc.uv(u64::from(unit));
                    enc.sv(-1);
                }
            }
        }
        self.tracks_written = self.tracks.len();
        if self.first {
            enc.u8(tag::START);
            enc.ts(self.start_ts);
            enc.uv(self.level);
        }
        enc
    }

    /// Ends the chunk (`metadata`: key string ids and JSON texts; `stop_ts`: the STOP record)
    /// and appends it to the file; an empty chunk writes nothing.
    pub fn end_chunk(
        &mut self,
        mut enc: Enc,
        metadata: &[(u32, String)],
        stop_ts: Option<i64>,
    ) -> io::Result<()> {
        for (key, json) in metadata {
            enc.u8(tag::METADATA);
            enc.uv(u64::from(*key));
            enc.text(json);
        }
        if let Some(ts) = stop_ts {
            enc.u8(tag::STOP);
            enc.ts(ts);
        }
        if enc.is_empty() {
            return Ok(());
        }
        let mut out = Vec::with_capacity(enc.buf.len() + 32);
        if self.first {
            out.extend_from_slice(MAGIC);
        }
        frame(&enc.buf, &mut out);
        self.first = false;
        match self.file.as_mut() {
            Some(f) => f.write_all(&out),
            None => Ok(()),
        }
    }
}

/// What the kernel throttled of one collector's perf events: it stops an event for the rest
/// of a tick when it fires more than `kernel.perf_event_max_sample_rate` allows, writing a
/// THROTTLE record then and an UNTHROTTLE record when it runs again (both stamped with the
/// event's clock, `CLOCK_MONOTONIC` here). Nothing is recorded in between: those intervals
/// are what the collector missed. Written as [`Throttling::json`] in the collector's metadata.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Throttling {
    /// THROTTLE records (times an event was stopped).
    pub count: u64,
    /// Summed length of the throttled intervals (an interval still open at the end is closed
    /// there), ns.
    pub throttled_ns: i64,
    /// Start of the first and end of the last throttled interval.
    pub first_ns: Option<i64>,
    pub last_ns: Option<i64>,
    /// Open intervals by event id.
    open: HashMap<u64, i64>,
}

impl Throttling {
    /// Event `id` was throttled at `ts`.
    pub fn throttle(&mut self, id: u64, ts: i64) {
        self.count += 1;
        self.first_ns = Some(self.first_ns.map_or(ts, |f| f.min(ts)));
        self.open.entry(id).or_insert(ts);
    }

    /// Event `id` runs again at `ts`.
    pub fn unthrottle(&mut self, id: u64, ts: i64) {
        if let Some(start) = self.open.remove(&id) {
            self.close(start, ts);
        }
    }

    fn close(&mut self, start: i64, end: i64) {
        self.throttled_ns += (end - start).max(0);
        self.last_ns = Some(self.last_ns.map_or(end, |l| l.max(end)));
    }

    /// Closes every interval still open at `now` (the recording's end).
    pub fn finish(&mut self, now: i64) {
        let open: Vec<i64> = self.open.drain().map(|(_, start)| start).collect();
        for start in open {
            self.close(start, now);
        }
    }

    /// `{"count":N,"ns":N,"from_ns":T|null,"to_ns":T|null}` (times CLOCK_MONOTONIC).
    pub fn json(&self) -> String {
        let t = |v: Option<i64>| v.map_or("null".to_owned(), |v| v.to_string());
        format!(
            "{{\"count\":{},\"ns\":{},\"from_ns\":{},\"to_ns\":{}}}",
            self.count,
            self.throttled_ns,
            t(self.first_ns),
            t(self.last_ns)
        )
    }
}

/// The launcher's thread that collects into side files until told to stop; its summary comes
/// back on [`CollectorThread::stop`]. Dropped without `stop`, it is stopped and joined all the
/// same (what it collected is flushed by the thread itself).
#[derive(Debug)]
pub(crate) struct CollectorThread<S> {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<S>>,
}

impl<S: Default + Send + 'static> CollectorThread<S> {
    /// Starts thread `name` running `collect(stop flag)`.
    pub fn spawn(
        name: &str,
        collect: impl FnOnce(&AtomicBool) -> S + Send + 'static,
    ) -> io::Result<CollectorThread<S>> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || collect(&flag))?;
        Ok(CollectorThread {
            stop,
            handle: Some(handle),
        })
    }

    /// Tells the thread to stop, waits for it, returns its summary (the default if it
    /// panicked).
    pub fn stop(mut self) -> S {
        self.stop.store(true, Ordering::Release);
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

impl<S> Drop for CollectorThread<S> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttled_intervals_add_up_per_event() {
        let mut t = Throttling::default();
        assert_eq!(
            t.json(),
            r#"{"count":0,"ns":0,"from_ns":null,"to_ns":null}"#
        );
        // Two events: 1 throttled 100..400, 2 throttled 200..250 and again 900 to the end.
        t.throttle(1, 100);
        t.throttle(2, 200);
        t.unthrottle(2, 250);
        t.unthrottle(1, 400);
        t.unthrottle(7, 500); // never throttled: ignored
        t.throttle(2, 900);
        t.finish(1_000);
        assert_eq!(t.count, 3);
        assert_eq!(t.throttled_ns, 300 + 50 + 100);
        assert_eq!((t.first_ns, t.last_ns), (Some(100), Some(1_000)));
        assert_eq!(
            t.json(),
            r#"{"count":3,"ns":450,"from_ns":100,"to_ns":1000}"#
        );
    }
}
