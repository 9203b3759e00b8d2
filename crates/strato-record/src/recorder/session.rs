//! The recording session ([`Session`]): its file, thread buffers, tracks and metadata, the
//! process-wide state (interner, running session, generation) and the writer thread that
//! drains the buffers into chunks.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Once};
use std::thread::JoinHandle;

use super::clock::{getpid, getppid, gettid, host_name, now_ns, read_clock, wall_ns};
use super::records::{encode_event, encode_meta, Ev, Meta, TrackRec};
use super::{Config, RecordError, StrRef};
use crate::format::{frame, tag, Enc, MAGIC};

#[derive(Debug)]
pub(super) struct ThreadBuf {
    pub(super) track: u32,
    pub(super) events: Mutex<Vec<Ev>>,
}

#[derive(Debug)]
pub(super) struct FileState {
    pub(super) file: Option<File>,
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
pub(super) struct Session {
    pub(super) config: Config,
    pid: i64,
    pub(super) path: PathBuf,
    pub(super) start_mono: i64,
    start_wall: i64,
    /// CPU clocks when the session opened: (thread that opened it, its CPU time, the process's).
    pub(super) start_cpu: (i64, i64, i64),
    /// CPU time of the writer thread, stored by the writer when it exits.
    pub(super) writer_cpu_ns: AtomicI64,
    pub(super) file: Mutex<FileState>,
    pub(super) registry: Mutex<Vec<Arc<ThreadBuf>>>,
    tracks: Mutex<Vec<TrackRec>>,
    pub(super) queues: Mutex<HashMap<(i64, i64), u32>>,
    pub(super) counters: Mutex<HashMap<(String, i64), u32>>,
    /// Thread tracks made for threads that record nothing themselves ([`thread_track_of`]).
    ///
    /// [`thread_track_of`]: super::thread_track_of
    pub(super) foreign_threads: Mutex<HashMap<i64, u32>>,
    pub(super) meta: Mutex<Vec<Meta>>,
    wake: Mutex<Wake>,
    wake_cv: Condvar,
    pub(super) writer: Mutex<Option<JoinHandle<()>>>,
    writer_started: AtomicBool,
}

#[derive(Debug)]
pub(super) struct Interner {
    strings: Vec<Box<str>>,
    map: HashMap<Box<str>, u32>,
}

pub(super) static INTERNER: Mutex<Option<Interner>> = Mutex::new(None);
pub(super) static STATE: Mutex<Option<Arc<Session>>> = Mutex::new(None);
/// Bumped on start, stop and fork (in the child): thread caches older than it re-register.
pub(super) static GENERATION: AtomicU64 = AtomicU64::new(1);
pub(super) static ENABLED: AtomicBool = AtomicBool::new(false);
pub(super) static ATFORK: Once = Once::new();
/// Held for the whole of [`stop`].
///
/// [`stop`]: super::stop
pub(super) static STOPPING: Mutex<()> = Mutex::new(());

#[derive(Debug)]
pub(super) struct Local {
    pub(super) gen: u64,
    pub(super) session: Option<Arc<Session>>,
    pub(super) buf: Option<Arc<ThreadBuf>>,
}

pub(super) type ForkGuards = (
    MutexGuard<'static, ()>,
    MutexGuard<'static, Option<Interner>>,
    MutexGuard<'static, Option<Arc<Session>>>,
);

thread_local! {
    pub(super) static LOCAL: RefCell<Local> = const { RefCell::new(Local { gen: 0, session: None, buf: None }) };
    pub(super) static UNTRACED: Cell<u64> = const { Cell::new(0) };
    pub(super) static FORK_GUARDS: RefCell<Option<ForkGuards>> = const { RefCell::new(None) };
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
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

impl Session {
    pub(super) fn open(config: Config) -> Result<Arc<Session>, RecordError> {
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

    pub(super) fn add_track(&self, rec: TrackRec) -> u32 {
        let mut tracks = lock(&self.tracks);
        tracks.push(rec);
        (tracks.len() - 1) as u32
    }

    pub(super) fn ensure_writer(self: &Arc<Self>) {
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
    pub(super) fn write_chunk(&self) {
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

    pub(super) fn wake_writer(&self, stop: bool) {
        let mut wake = lock(&self.wake);
        if stop {
            wake.stop = true;
        } else {
            wake.urgent = true;
        }
        self.wake_cv.notify_one();
    }
}
