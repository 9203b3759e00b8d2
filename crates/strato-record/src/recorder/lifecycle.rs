//! Starting and stopping a session, flushing it, and the fork handlers that give a forked
//! child its own file.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use super::clock::{gettid, now_ns, read_clock};
use super::records::{Ev, Meta, TrackRec};
use super::session::{
    intern, lock, Session, ThreadBuf, ATFORK, ENABLED, FORK_GUARDS, GENERATION, INTERNER, STATE,
    STOPPING,
};
use super::{Config, RecordError};
use strato_trace::metadata::ProcessCpu;

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
        // this module's locks (in the order `recorder`'s header documents) and allocate.
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

/// Metadata key of the CPU times a session writes when it stops
/// ([`strato_trace::metadata::ProcessCpu`]). Importers keep it per process.
pub use strato_trace::metadata::CPU_METADATA_KEY;

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
    let cpu = ProcessCpu {
        start_tid: Some(start_tid),
        stop_tid: Some(stop_tid),
        thread_cpu_ns: (start_tid == stop_tid).then(|| thread_cpu - start_thread_cpu),
        process_cpu_ns: Some(process_cpu - start_process_cpu),
        writer_cpu_ns: Some(session.writer_cpu_ns.load(Ordering::Acquire)),
    };
    let cpu = serde_json::to_string(&cpu).unwrap_or_default();
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
