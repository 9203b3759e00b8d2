//! The in-process recorder: one global session per process (and component), per-thread event
//! buffers behind uncontended locks, a background writer thread appending self-contained chunks
//! to `DIR/<pid>[-component].strato`, and fork handling (the child starts its own file).
//!
//! Lock order (no cycles): `STOPPING -> INTERNER -> STATE` (fork prepare; [`stop`] holds
//! `STOPPING` throughout); writer: `file -> registry
//! -> buffer`, `file -> INTERNER`, `file -> tracks`, `file -> meta`, each released before the
//! next; recording threads: their own buffer only; registration: `STATE` (released), then
//! `tracks`, then `registry`.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Once};
use std::thread::JoinHandle;
use std::time::Duration;

use strato_trace::Level;

use crate::format::{frame, tag, Enc, FLAG_ARGS, FLAG_CORR, MAGIC};

/// How to record.
#[derive(Debug, Clone)]
pub struct Config {
    /// The profile directory (created if missing).
    pub dir: PathBuf,
    /// `""` for the main (Python) recorder, else a suffix of the file name (`opencl`).
    pub component: String,
    /// The writer appends a chunk at least this often.
    pub flush_interval: Duration,
    /// A thread buffer holding this many events wakes the writer early.
    pub flush_events: usize,
    /// Collection level (see the format doc): written in the START record.
    pub level: u64,
    /// The program's arguments as a JSON array text (`[]` when unknown).
    pub argv_json: String,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            dir: PathBuf::from("strato-profile"),
            component: String::new(),
            flush_interval: Duration::from_millis(50),
            flush_events: 1 << 16,
            level: 4,
            argv_json: "[]".into(),
        }
    }
}

/// Recorder failures.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the recorder is already running")]
    AlreadyRunning,
}

/// A track of the current recording session (valid until the session stops or the process
/// forks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TrackRef(pub(crate) u32);

/// An interned string id (stable for the life of the process, across sessions and forks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct StrRef(pub u32);

#[derive(Debug)]
enum Ev {
    Begin {
        track: u32,
        ts: i64,
        level: u8,
        cat: u32,
        name: u32,
        extra: Option<Box<Extra>>,
    },
    End {
        track: u32,
        ts: i64,
    },
    Span {
        track: u32,
        start: i64,
        end: i64,
        level: u8,
        cat: u32,
        name: u32,
        extra: Option<Box<Extra>>,
    },
    Instant {
        track: u32,
        ts: i64,
        level: u8,
        cat: u32,
        name: u32,
        args: Option<Box<str>>,
    },
    Counter {
        track: u32,
        ts: i64,
        value: f64,
    },
    Untraced {
        track: u32,
        ts: i64,
        count: u64,
    },
    Start {
        ts: i64,
        level: u64,
    },
    Stop {
        ts: i64,
    },
}

#[derive(Debug)]
struct Extra {
    corr: Option<u64>,
    args: Option<Box<str>>,
}

fn extra(corr: Option<u64>, args: Option<&str>) -> Option<Box<Extra>> {
    if corr.is_none() && args.is_none() {
        None
    } else {
        Some(Box::new(Extra {
            corr,
            args: args.map(Into::into),
        }))
    }
}

#[derive(Debug)]
enum TrackRec {
    Thread { tid: i64, name: u32 },
    Queue { device: i64, queue: i64, name: u32 },
    Counter { name: u32, unit: u32, device: i64 },
}

#[derive(Debug)]
enum Meta {
    ProcessName(u32),
    TrackName(u32, u32),
    Metadata(u32, String),
    Clock {
        name: u32,
        domain: u32,
        offset_ns: i64,
        drift_ppb: f64,
        anchor_ns: i64,
        error_ns: i64,
        method: u32,
    },
    Device {
        index: i64,
        name: u32,
        props: String,
    },
}

#[derive(Debug)]
struct ThreadBuf {
    track: u32,
    events: Mutex<Vec<Ev>>,
}

#[derive(Debug)]
struct FileState {
    file: Option<File>,
    strings_written: usize,
    tracks_written: usize,
    enc: Enc,
    out: Vec<u8>,
    first: bool,
    failed: bool,
}

#[derive(Debug, Default)]
struct Wake {
    stop: bool,
    urgent: bool,
}

#[derive(Debug)]
struct Session {
    config: Config,
    pid: i64,
    path: PathBuf,
    start_mono: i64,
    start_wall: i64,
    /// CPU clocks when the session opened: (thread that opened it, its CPU time, the process's).
    start_cpu: (i64, i64, i64),
    /// CPU time of the writer thread, stored by the writer when it exits.
    writer_cpu_ns: AtomicI64,
    file: Mutex<FileState>,
    registry: Mutex<Vec<Arc<ThreadBuf>>>,
    tracks: Mutex<Vec<TrackRec>>,
    queues: Mutex<HashMap<(i64, i64), u32>>,
    counters: Mutex<HashMap<(String, i64), u32>>,
    /// Thread tracks made for threads that record nothing themselves ([`thread_track_of`]).
    foreign_threads: Mutex<HashMap<i64, u32>>,
    meta: Mutex<Vec<Meta>>,
    wake: Mutex<Wake>,
    wake_cv: Condvar,
    writer: Mutex<Option<JoinHandle<()>>>,
    writer_started: AtomicBool,
}

#[derive(Debug)]
struct Interner {
    strings: Vec<Box<str>>,
    map: HashMap<Box<str>, u32>,
}

static INTERNER: Mutex<Option<Interner>> = Mutex::new(None);
static STATE: Mutex<Option<Arc<Session>>> = Mutex::new(None);
/// Bumped on start, stop and fork (in the child): thread caches older than it re-register.
static GENERATION: AtomicU64 = AtomicU64::new(1);
static ENABLED: AtomicBool = AtomicBool::new(false);
static ATFORK: Once = Once::new();
/// Held for the whole of [`stop`].
static STOPPING: Mutex<()> = Mutex::new(());

#[derive(Debug)]
struct Local {
    gen: u64,
    session: Option<Arc<Session>>,
    buf: Option<Arc<ThreadBuf>>,
}

type ForkGuards = (
    MutexGuard<'static, ()>,
    MutexGuard<'static, Option<Interner>>,
    MutexGuard<'static, Option<Arc<Session>>>,
);

thread_local! {
    static LOCAL: RefCell<Local> = const { RefCell::new(Local { gen: 0, session: None, buf: None }) };
    static UNTRACED: Cell<u64> = const { Cell::new(0) };
    static FORK_GUARDS: RefCell<Option<ForkGuards>> = const { RefCell::new(None) };
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Reads clock `id` (`libc::CLOCK_*`) in nanoseconds. Shared with other in-process recorders
/// (the OpenCL layer pairs CLOCK_MONOTONIC with CLOCK_MONOTONIC_RAW through it).
pub fn read_clock(id: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime only writes it.
    unsafe {
        libc::clock_gettime(id, &mut ts);
    }
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// CLOCK_MONOTONIC now, in nanoseconds: the clock of every recorded timestamp.
pub fn now_ns() -> i64 {
    read_clock(libc::CLOCK_MONOTONIC)
}

fn wall_ns() -> i64 {
    read_clock(libc::CLOCK_REALTIME)
}

fn gettid() -> i64 {
    // SAFETY: the gettid syscall takes no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as i64 }
}

fn getpid() -> i64 {
    i64::from(std::process::id())
}

fn getppid() -> i64 {
    // SAFETY: getppid takes no arguments and cannot fail.
    i64::from(unsafe { libc::getppid() })
}

/// Interns `text` (process-wide, stable ids).
pub fn intern(text: &str) -> StrRef {
    let mut guard = lock(&INTERNER);
    let interner = guard.get_or_insert_with(|| Interner {
        strings: vec!["".into()],
        map: HashMap::from([(Box::<str>::from(""), 0)]),
    });
    if let Some(&id) = interner.map.get(text) {
        return StrRef(id);
    }
    let id = interner.strings.len() as u32;
    interner.strings.push(text.into());
    interner.map.insert(text.into(), id);
    StrRef(id)
}

/// True while a session is recording.
pub fn is_recording() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The collection level of the running session (0 when not recording).
pub fn current_level() -> u64 {
    lock(&STATE).as_ref().map_or(0, |s| s.config.level)
}

/// The profile directory of the running session.
pub fn current_dir() -> Option<PathBuf> {
    lock(&STATE).as_ref().map(|s| s.config.dir.clone())
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

impl Session {
    fn open(config: Config) -> Result<Arc<Session>, RecordError> {
        let pid = getpid();
        std::fs::create_dir_all(&config.dir).map_err(|source| RecordError::Io {
            path: config.dir.clone(),
            source,
        })?;
        let file_name = if config.component.is_empty() {
            format!("{pid}.strato")
        } else {
            format!("{pid}-{}.strato", config.component)
        };
        let path = config.dir.join(file_name);
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&path)
            .map_err(|source| RecordError::Io {
                path: path.clone(),
                source,
            })?;
        let start_mono = now_ns();
        let start_wall = wall_ns();
        let start_cpu = (
            gettid(),
            read_clock(libc::CLOCK_THREAD_CPUTIME_ID),
            read_clock(libc::CLOCK_PROCESS_CPUTIME_ID),
        );
        Ok(Arc::new(Session {
            config,
            pid,
            path,
            start_mono,
            start_wall,
            start_cpu,
            writer_cpu_ns: AtomicI64::new(0),
            file: Mutex::new(FileState {
                file: Some(file),
                strings_written: 0,
                tracks_written: 0,
                enc: Enc::default(),
                out: Vec::new(),
                first: true,
                failed: false,
            }),
            registry: Mutex::new(Vec::new()),
            tracks: Mutex::new(Vec::new()),
            queues: Mutex::new(HashMap::new()),
            counters: Mutex::new(HashMap::new()),
            foreign_threads: Mutex::new(HashMap::new()),
            meta: Mutex::new(Vec::new()),
            wake: Mutex::new(Wake::default()),
            wake_cv: Condvar::new(),
            writer: Mutex::new(None),
            writer_started: AtomicBool::new(false),
        }))
    }

    fn add_track(&self, rec: TrackRec) -> u32 {
        let mut tracks = lock(&self.tracks);
        tracks.push(rec);
        (tracks.len() - 1) as u32
    }

    fn ensure_writer(self: &Arc<Self>) {
        if self.writer_started.swap(true, Ordering::AcqRel) {
            return;
        }
        crate::signals::ensure_watcher();
        let session = Arc::clone(self);
        let handle = std::thread::Builder::new()
            .name("strato-writer".into())
            .spawn(move || session.writer_loop());
        if let Ok(handle) = handle {
            *lock(&self.writer) = Some(handle);
        }
    }

    fn writer_loop(&self) {
        loop {
            let stop = {
                let mut wake = lock(&self.wake);
                if !wake.stop && !wake.urgent {
                    wake = self
                        .wake_cv
                        .wait_timeout(wake, self.config.flush_interval)
                        .map(|(g, _)| g)
                        .unwrap_or_else(|e| e.into_inner().0);
                }
                wake.urgent = false;
                wake.stop
            };
            self.write_chunk();
            if stop {
                self.writer_cpu_ns
                    .store(read_clock(libc::CLOCK_THREAD_CPUTIME_ID), Ordering::Release);
                return;
            }
        }
    }

    /// Drains every buffer and appends one chunk (nothing when there is nothing new).
    fn write_chunk(&self) {
        let mut fs = lock(&self.file);
        if fs.failed {
            return;
        }
        let mut batches = Vec::new();
        for buf in lock(&self.registry).iter() {
            let mut events = lock(&buf.events);
            if !events.is_empty() {
                let cap = events.capacity().min(1 << 16);
                batches.push(std::mem::replace(&mut *events, Vec::with_capacity(cap)));
            }
        }
        let FileState {
            enc,
            strings_written,
            tracks_written,
            first,
            ..
        } = &mut *fs;
        enc.reset();
        if *first {
            enc.u8(tag::PROCESS);
            enc.sv(self.pid);
            enc.sv(getppid());
            enc.sv(self.start_mono);
            enc.sv(self.start_wall);
            enc.text(&host_name());
            enc.text(&self.config.component);
            enc.text(&self.config.argv_json);
        }
        {
            let guard = lock(&INTERNER);
            if let Some(interner) = guard.as_ref() {
                for (id, text) in interner.strings.iter().enumerate().skip(*strings_written) {
                    if id > 0 {
                        enc.u8(tag::STRING);
                        enc.uv(id as u64);
                        enc.text(text);
                    }
                }
                *strings_written = interner.strings.len();
            }
        }
        {
            let tracks = lock(&self.tracks);
            for (id, t) in tracks.iter().enumerate().skip(*tracks_written) {
                match t {
                    TrackRec::Thread { tid, name } => {
                        enc.u8(tag::THREAD_TRACK);
                        enc.uv(id as u64);
                        enc.sv(*tid);
                        enc.uv(u64::from(*name));
                    }
                    TrackRec::Queue {
                        device,
                        queue,
                        name,
                    } => {
                        enc.u8(tag::QUEUE_TRACK);
                        enc.uv(id as u64);
                        enc.sv(*device);
                        enc.sv(*queue);
                        enc.uv(u64::from(*name));
                    }
                    TrackRec::Counter { name, unit, device } => {
                        enc.u8(tag::COUNTER_TRACK);
                        enc.uv(id as u64);
                        enc.uv(u64::from(*name));
                        enc.uv(u64::from(*unit));
                        enc.sv(*device);
                    }
                }
            }
            *tracks_written = tracks.len();
        }
        for m in std::mem::take(&mut *lock(&self.meta)) {
            encode_meta(enc, m);
        }
        for batch in &batches {
            for ev in batch {
                encode_event(enc, ev);
            }
        }
        if enc.is_empty() {
            return;
        }
        let mut out = std::mem::take(&mut fs.out);
        out.clear();
        if fs.first {
            out.extend_from_slice(MAGIC);
        }
        frame(&fs.enc.buf, &mut out);
        let ok = fs
            .file
            .as_mut()
            .is_some_and(|file| file.write_all(&out).is_ok());
        fs.first = false;
        if !ok {
            // A full disk or a closed descriptor: stop writing rather than fail the program.
            fs.failed = true;
            eprintln!(
                "stratoscope: cannot write {}; recording stopped",
                self.path.display()
            );
        }
        fs.out = out;
    }

    fn wake_writer(&self, stop: bool) {
        let mut wake = lock(&self.wake);
        if stop {
            wake.stop = true;
        } else {
            wake.urgent = true;
        }
        self.wake_cv.notify_one();
    }
}

fn encode_meta(enc: &mut Enc, m: Meta) {
    match m {
        Meta::ProcessName(name) => {
            enc.u8(tag::PROCESS_NAME);
            enc.uv(u64::from(name));
        }
        Meta::TrackName(track, name) => {
            enc.u8(tag::TRACK_NAME);
            enc.uv(u64::from(track));
            enc.uv(u64::from(name));
        }
        Meta::Metadata(key, json) => {
            enc.u8(tag::METADATA);
            enc.uv(u64::from(key));
            enc.text(&json);
        }
        Meta::Clock {
            name,
            domain,
            offset_ns,
            drift_ppb,
            anchor_ns,
            error_ns,
            method,
        } => {
            enc.u8(tag::CLOCK);
            enc.uv(u64::from(name));
            enc.uv(u64::from(domain));
            enc.sv(offset_ns);
            enc.f64(drift_ppb);
            enc.sv(anchor_ns);
            enc.sv(error_ns);
            enc.uv(u64::from(method));
        }
        Meta::Device { index, name, props } => {
            enc.u8(tag::DEVICE);
            enc.sv(index);
            enc.uv(u64::from(name));
            enc.text(&props);
        }
    }
}

fn encode_flags(enc: &mut Enc, extra: &Option<Box<Extra>>) {
    match extra {
        None => enc.u8(0),
        Some(x) => {
            let mut flags = 0;
            if x.corr.is_some() {
                flags |= FLAG_CORR;
            }
            if x.args.is_some() {
                flags |= FLAG_ARGS;
            }
            enc.u8(flags);
            if let Some(c) = x.corr {
                enc.uv(c);
            }
            if let Some(a) = &x.args {
                enc.text(a);
            }
        }
    }
}

fn encode_event(enc: &mut Enc, ev: &Ev) {
    match ev {
        Ev::Begin {
            track,
            ts,
            level,
            cat,
            name,
            extra,
        } => {
            enc.u8(tag::BEGIN);
            enc.uv(u64::from(*track));
            enc.ts(*ts);
            enc.u8(*level);
            enc.uv(u64::from(*cat));
            enc.uv(u64::from(*name));
            encode_flags(enc, extra);
        }
        Ev::End { track, ts } => {
            enc.u8(tag::END);
            enc.uv(u64::from(*track));
            enc.ts(*ts);
        }
        Ev::Span {
            track,
            start,
            end,
            level,
            cat,
            name,
            extra,
        } => {
            enc.u8(tag::SPAN);
            enc.uv(u64::from(*track));
            enc.ts(*start);
            enc.uv(end.saturating_sub(*start).max(0) as u64);
            enc.u8(*level);
            enc.uv(u64::from(*cat));
            enc.uv(u64::from(*name));
            encode_flags(enc, extra);
        }
        Ev::Instant {
            track,
            ts,
            level,
            cat,
            name,
            args,
        } => {
            enc.u8(tag::INSTANT);
            enc.uv(u64::from(*track));
            enc.ts(*ts);
            enc.u8(*level);
            enc.uv(u64::from(*cat));
            enc.uv(u64::from(*name));
            match args {
                None => enc.u8(0),
                Some(a) => {
                    enc.u8(FLAG_ARGS);
                    enc.text(a);
                }
            }
        }
        Ev::Counter { track, ts, value } => {
            enc.u8(tag::COUNTER);
            enc.uv(u64::from(*track));
            enc.ts(*ts);
            enc.f64(*value);
        }
        Ev::Untraced { track, ts, count } => {
            enc.u8(tag::UNTRACED);
            enc.uv(u64::from(*track));
            enc.ts(*ts);
            enc.uv(*count);
        }
        Ev::Start { ts, level } => {
            enc.u8(tag::START);
            enc.ts(*ts);
            enc.uv(*level);
        }
        Ev::Stop { ts } => {
            enc.u8(tag::STOP);
            enc.ts(*ts);
        }
    }
}

extern "C" fn fork_prepare() {
    // Not half-way through a stop: a child inheriting STOPPING held could never stop.
    let stopping = lock(&STOPPING);
    let interner = lock(&INTERNER);
    let state = lock(&STATE);
    FORK_GUARDS.with(|g| *g.borrow_mut() = Some((stopping, interner, state)));
}

extern "C" fn fork_parent() {
    FORK_GUARDS.with(|g| drop(g.borrow_mut().take()));
}

extern "C" fn fork_child() {
    let Some((stopping, interner, mut state)) = FORK_GUARDS.with(|g| g.borrow_mut().take()) else {
        return;
    };
    if let Some(old) = state.take() {
        // The parent's writer thread does not exist here and its buffers may be locked by
        // threads that do not exist either: start afresh with a new file and leak the old
        // session rather than touch its locks.
        let config = old.config.clone();
        std::mem::forget(old);
        match Session::open(config) {
            Ok(session) => {
                push_start(&session);
                *state = Some(session);
            }
            Err(_) => ENABLED.store(false, Ordering::Relaxed),
        }
    }
    GENERATION.fetch_add(1, Ordering::AcqRel);
    crate::signals::after_fork_child();
    let session = state.clone();
    drop(state);
    drop(interner);
    drop(stopping);
    // Write the new file's header now so the child's recording exists even if it records
    // nothing; the writer thread starts with the child's first event (or `ensure_writer`).
    if let Some(s) = session {
        s.write_chunk();
    }
}

fn push_start(session: &Arc<Session>) {
    // The START record goes through the thread registry like any event so it is ordered with
    // the session's first chunk.
    let tid = gettid();
    let track = session.add_track(TrackRec::Thread { tid, name: 0 });
    let buf = Arc::new(ThreadBuf {
        track,
        events: Mutex::new(vec![Ev::Start {
            ts: session.start_mono,
            level: session.config.level,
        }]),
    });
    lock(&session.registry).push(buf);
}

/// Starts recording into `config.dir`. Writes the file header at once.
pub fn start(config: Config) -> Result<(), RecordError> {
    ATFORK.call_once(|| {
        // SAFETY: the three handlers are `extern "C" fn()` with static lifetime; they only take
        // this module's locks (in the order documented above) and allocate.
        unsafe {
            libc::pthread_atfork(Some(fork_prepare), Some(fork_parent), Some(fork_child));
        }
    });
    intern("");
    let mut state = lock(&STATE);
    if state.is_some() {
        return Err(RecordError::AlreadyRunning);
    }
    let session = Session::open(config)?;
    push_start(&session);
    session.write_chunk();
    session.ensure_writer();
    *state = Some(session);
    GENERATION.fetch_add(1, Ordering::AcqRel);
    ENABLED.store(true, Ordering::Release);
    Ok(())
}

/// Metadata key of the CPU times a session writes when it stops (a JSON object:
/// `start_tid`, `stop_tid`, `thread_cpu_ns` (CPU time of the thread that started the session,
/// from START to STOP; null when another thread stopped it), `process_cpu_ns`,
/// `writer_cpu_ns` (the recorder's writer thread)). Importers keep it per process.
pub const CPU_METADATA_KEY: &str = "strato.cpu";

/// Stops recording: writes a STOP record, the last chunk, and joins the writer thread.
/// Returns the path of the file written (None when not recording).
pub fn stop() -> Option<PathBuf> {
    // A second caller (the signal watcher while the main thread stops at exit) waits until the
    // first has written the last chunk, so the process does not end half-way through it.
    let _stopping = lock(&STOPPING);
    let session = lock(&STATE).take()?;
    ENABLED.store(false, Ordering::Release);
    let ts = now_ns();
    let (thread_cpu, process_cpu) = (
        read_clock(libc::CLOCK_THREAD_CPUTIME_ID),
        read_clock(libc::CLOCK_PROCESS_CPUTIME_ID),
    );
    let stop_tid = gettid();
    if let Some(buf) = lock(&session.registry).first() {
        lock(&buf.events).push(Ev::Stop { ts });
    }
    GENERATION.fetch_add(1, Ordering::AcqRel);
    session.wake_writer(true);
    let handle = lock(&session.writer).take();
    if let Some(h) = handle {
        let _ = h.join();
    }
    let (start_tid, start_thread_cpu, start_process_cpu) = session.start_cpu;
    let cpu = format!(
        "{{\"start_tid\":{start_tid},\"stop_tid\":{stop_tid},\"thread_cpu_ns\":{},\"process_cpu_ns\":{},\"writer_cpu_ns\":{}}}",
        if start_tid == stop_tid {
            (thread_cpu - start_thread_cpu).to_string()
        } else {
            "null".to_owned()
        },
        process_cpu - start_process_cpu,
        session.writer_cpu_ns.load(Ordering::Acquire),
    );
    lock(&session.meta).push(Meta::Metadata(intern(CPU_METADATA_KEY).0, cpu));
    session.write_chunk();
    if let Some(file) = lock(&session.file).file.take() {
        let _ = file.sync_data();
    }
    Some(session.path.clone())
}

/// Writes everything buffered so far as one chunk, now, from the calling thread.
pub fn flush() {
    let session = lock(&STATE).clone();
    if let Some(s) = session {
        s.write_chunk();
    }
}

/// Starts the writer thread if this (forked) process has not yet.
pub fn ensure_writer() {
    let session = lock(&STATE).clone();
    if let Some(s) = session {
        s.ensure_writer();
    }
}

/// Runs `f` with the calling thread's buffer and session, registering the thread on first use.
#[inline]
fn with_buf(f: impl FnOnce(&Session, &ThreadBuf)) {
    if !ENABLED.load(Ordering::Relaxed) {
        return;
    }
    LOCAL.with(|local| {
        let Ok(mut local) = local.try_borrow_mut() else {
            return;
        };
        let gen = GENERATION.load(Ordering::Acquire);
        if local.gen != gen {
            register(&mut local, gen);
        }
        if let (Some(session), Some(buf)) = (&local.session, &local.buf) {
            f(session, buf);
        }
    });
}

#[cold]
fn register(local: &mut Local, gen: u64) {
    local.gen = gen;
    local.buf = None;
    local.session = lock(&STATE).clone();
    let Some(session) = local.session.clone() else {
        return;
    };
    session.ensure_writer();
    let track = session.add_track(TrackRec::Thread {
        tid: gettid(),
        name: 0,
    });
    let buf = Arc::new(ThreadBuf {
        track,
        events: Mutex::new(Vec::with_capacity(1024)),
    });
    lock(&session.registry).push(Arc::clone(&buf));
    local.buf = Some(buf);
}

#[inline]
fn push(session: &Session, buf: &ThreadBuf, ev: Ev, ts: i64) {
    let untraced = UNTRACED.with(|c| c.replace(0));
    let mut events = lock(&buf.events);
    if untraced > 0 {
        events.push(Ev::Untraced {
            track: buf.track,
            ts,
            count: untraced,
        });
    }
    events.push(ev);
    if events.len() == session.config.flush_events {
        drop(events);
        session.wake_writer(false);
    }
}

/// Counts `n` book-keeping invocations on this thread that recorded nothing (profile-hook calls
/// for Python functions and unclassified builtins); written with the thread's next event.
#[inline]
pub fn add_untraced(n: u64) {
    UNTRACED.with(|c| c.set(c.get() + n));
}

/// Opens a span on the calling thread's track at `now_ns()`; returns the timestamp.
#[inline]
pub fn begin(level: Level, category: StrRef, name: StrRef) -> i64 {
    let ts = now_ns();
    with_buf(|s, b| {
        let ev = Ev::Begin {
            track: b.track,
            ts,
            level: level.code(),
            cat: category.0,
            name: name.0,
            extra: None,
        };
        push(s, b, ev, ts);
    });
    ts
}

/// [`begin`] with a correlation id and/or an args JSON object.
pub fn begin_with(
    level: Level,
    category: StrRef,
    name: StrRef,
    correlation: Option<u64>,
    args: Option<&str>,
) -> i64 {
    let ts = now_ns();
    with_buf(|s, b| {
        let ev = Ev::Begin {
            track: b.track,
            ts,
            level: level.code(),
            cat: category.0,
            name: name.0,
            extra: extra(correlation, args),
        };
        push(s, b, ev, ts);
    });
    ts
}

/// Closes the innermost open span of the calling thread's track at `now_ns()`.
#[inline]
pub fn end() -> i64 {
    let ts = now_ns();
    with_buf(|s, b| push(s, b, Ev::End { track: b.track, ts }, ts));
    ts
}

/// The calling thread's track (None when not recording).
pub fn thread_track() -> Option<TrackRef> {
    let mut out = None;
    with_buf(|_, b| out = Some(TrackRef(b.track)));
    out
}

/// The thread track of thread `tid` of this process, for events written on its behalf by
/// another thread (a framework profiler's events merged when it stops): the calling thread's
/// own track when `tid` is the caller, else one track per `tid` per session. A thread that
/// also records events itself gets its own track too; importers key thread tracks by
/// `(pid, tid)`, so both land on one.
pub fn thread_track_of(tid: i64) -> Option<TrackRef> {
    if tid == gettid() {
        return thread_track();
    }
    let s = session()?;
    let mut foreign = lock(&s.foreign_threads);
    if let Some(&id) = foreign.get(&tid) {
        return Some(TrackRef(id));
    }
    let id = s.add_track(TrackRec::Thread { tid, name: 0 });
    foreign.insert(tid, id);
    Some(TrackRef(id))
}

/// A complete span on any track of this session.
#[allow(clippy::too_many_arguments)]
pub fn span(
    track: TrackRef,
    start: i64,
    end: i64,
    level: Level,
    category: StrRef,
    name: StrRef,
    correlation: Option<u64>,
    args: Option<&str>,
) {
    with_buf(|s, b| {
        let ev = Ev::Span {
            track: track.0,
            start,
            end,
            level: level.code(),
            cat: category.0,
            name: name.0,
            extra: extra(correlation, args),
        };
        push(s, b, ev, start);
    });
}

/// A point event on any track of this session.
pub fn instant(
    track: TrackRef,
    ts: i64,
    level: Level,
    category: StrRef,
    name: StrRef,
    args: Option<&str>,
) {
    with_buf(|s, b| {
        let ev = Ev::Instant {
            track: track.0,
            ts,
            level: level.code(),
            cat: category.0,
            name: name.0,
            args: args.map(Into::into),
        };
        push(s, b, ev, ts);
    });
}

/// A counter sample on a counter track.
pub fn counter(track: TrackRef, ts: i64, value: f64) {
    with_buf(|s, b| {
        push(
            s,
            b,
            Ev::Counter {
                track: track.0,
                ts,
                value,
            },
            ts,
        )
    });
}

fn session() -> Option<Arc<Session>> {
    lock(&STATE).clone()
}

/// The track of a device queue (one per `(device, queue)` per session).
pub fn queue_track(device: i64, queue: i64, name: &str) -> Option<TrackRef> {
    let s = session()?;
    let mut queues = lock(&s.queues);
    if let Some(&id) = queues.get(&(device, queue)) {
        return Some(TrackRef(id));
    }
    let name = intern(name).0;
    let id = s.add_track(TrackRec::Queue {
        device,
        queue,
        name,
    });
    queues.insert((device, queue), id);
    Some(TrackRef(id))
}

/// The track of a counter (one per `(name, device)` per session; `device` -1 = the process).
pub fn counter_track(name: &str, unit: &str, device: i64) -> Option<TrackRef> {
    let s = session()?;
    let mut counters = lock(&s.counters);
    if let Some(&id) = counters.get(&(name.to_owned(), device)) {
        return Some(TrackRef(id));
    }
    let (n, u) = (intern(name).0, intern(unit).0);
    let id = s.add_track(TrackRec::Counter {
        name: n,
        unit: u,
        device,
    });
    counters.insert((name.to_owned(), device), id);
    Some(TrackRef(id))
}

fn push_meta(m: Meta) {
    if let Some(s) = session() {
        lock(&s.meta).push(m);
    }
}

/// Names this process in the profile.
pub fn set_process_name(name: &str) {
    push_meta(Meta::ProcessName(intern(name).0));
}

/// Names the calling thread's track.
pub fn set_thread_name(name: &str) {
    if let Some(track) = thread_track() {
        push_meta(Meta::TrackName(track.0, intern(name).0));
    }
}

/// Stores a JSON value under `key` in the rank's metadata.
pub fn metadata(key: &str, json: &str) {
    push_meta(Meta::Metadata(intern(key).0, json.to_owned()));
}

/// Describes a device (`props_json`: a JSON object).
pub fn device(index: i64, name: &str, props_json: &str) {
    push_meta(Meta::Device {
        index,
        name: intern(name).0,
        props: props_json.to_owned(),
    });
}

/// Records how a source clock maps to this file's clock (see the format doc).
pub fn clock_sync(
    name: &str,
    domain: &str,
    offset_ns: i64,
    drift_ppb: f64,
    anchor_ns: i64,
    error_ns: Option<i64>,
    method: &str,
) {
    push_meta(Meta::Clock {
        name: intern(name).0,
        domain: intern(domain).0,
        offset_ns,
        drift_ppb,
        anchor_ns,
        error_ns: error_ns.unwrap_or(-1),
        method: intern(method).0,
    });
}
