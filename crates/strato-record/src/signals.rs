//! Flushing on termination signals. A signal whose default action ends the process (SIGTERM
//! from `kill` or `Pool.terminate()`, SIGHUP, and SIGINT when the program asked for the
//! default) would otherwise end it without the last chunk and the STOP record. Once
//! [`catch_termination`] is called for a signal, its handler only writes the signal number to
//! a pipe (async-signal-safe); a watcher thread reads it, stops the recording session (STOP
//! record, last chunk, as [`crate::stop`]), restores the default action and sends the signal
//! again, so the process still ends by that signal (a shell sees 128 + N) after flushing.
//!
//! Only signals whose disposition is the default should be handed over (the Python package
//! checks that); a handler the program installs later replaces this one, and the program's own
//! way out (exit, `os._exit`) flushes instead. A forked child gets its own pipe at fork and its
//! own watcher with its writer ([`after_fork_child`], [`ensure_watcher`]); until that watcher
//! runs, the handler restores the default action and re-sends the signal at once (no flush,
//! never a process that cannot be terminated). If stopping takes longer than
//! [`STOP_DEADLINE_S`], `alarm(2)` ends the process anyway.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, Ordering};
use std::sync::Mutex;

/// Seconds the watcher may take to stop the session before SIGALRM ends the process.
pub const STOP_DEADLINE_S: u32 = 5;

/// Write and read ends of this process's signal pipe (-1: none).
static PIPE_WRITE: AtomicI32 = AtomicI32::new(-1);
static PIPE_READ: AtomicI32 = AtomicI32::new(-1);
/// The process whose watcher thread is reading the pipe (0: none).
static WATCHER_PID: AtomicI64 = AtomicI64::new(0);
/// A watcher is wanted in this process (set by [`catch_termination`], kept across fork).
static WANTED: AtomicBool = AtomicBool::new(false);
static SETUP: Mutex<()> = Mutex::new(());

fn pid() -> i64 {
    // SAFETY: getpid takes no arguments and cannot fail (async-signal-safe).
    i64::from(unsafe { libc::getpid() })
}

/// Restores the default action of `signal` and sends it to this process again.
fn die_by(signal: libc::c_int) {
    // SAFETY: signal, getpid and kill are async-signal-safe and take plain integers.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        libc::kill(libc::getpid(), signal);
    }
}

extern "C" fn on_signal(signal: libc::c_int) {
    let fd = PIPE_WRITE.load(Ordering::Acquire);
    if fd < 0 || WATCHER_PID.load(Ordering::Acquire) != pid() {
        die_by(signal);
        return;
    }
    let byte = signal as u8;
    // SAFETY: write(2) is async-signal-safe; `byte` outlives the call. A full pipe (signals
    // arriving faster than the watcher reads) drops the byte: one is enough.
    let written = unsafe { libc::write(fd, std::ptr::from_ref(&byte).cast(), 1) };
    if written != 1 {
        die_by(signal);
    }
}

fn open_pipe() -> bool {
    let mut fds = [-1; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return false;
    }
    PIPE_READ.store(fds[0], Ordering::Release);
    PIPE_WRITE.store(fds[1], Ordering::Release);
    true
}

/// Hands the termination of `signal` (SIGTERM, SIGHUP, SIGINT) to the recorder: flush, then
/// end by the signal. Returns false when the handler could not be installed.
pub fn catch_termination(signal: libc::c_int) -> bool {
    let _guard = SETUP.lock().unwrap_or_else(|e| e.into_inner());
    if PIPE_WRITE.load(Ordering::Acquire) < 0 && !open_pipe() {
        return false;
    }
    WANTED.store(true, Ordering::Release);
    ensure_watcher();
    // SAFETY: a zeroed sigaction is valid; `on_signal` is an `extern "C" fn(c_int)` with
    // static lifetime that only calls async-signal-safe functions.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(signal, &action, std::ptr::null_mut()) == 0
    }
}

/// Starts this process's watcher thread if one is wanted and not running.
pub fn ensure_watcher() {
    if !WANTED.load(Ordering::Acquire) {
        return;
    }
    let me = pid();
    if WATCHER_PID.swap(me, Ordering::AcqRel) == me {
        return;
    }
    let fd = PIPE_READ.load(Ordering::Acquire);
    let started = std::thread::Builder::new()
        .name("strato-signals".into())
        .spawn(move || watch(fd));
    if started.is_err() {
        WATCHER_PID.store(0, Ordering::Release);
    }
}

fn watch(fd: libc::c_int) {
    loop {
        let mut byte = 0u8;
        // SAFETY: reads at most one byte into `byte`.
        let n = unsafe { libc::read(fd, std::ptr::from_mut(&mut byte).cast(), 1) };
        if n == 1 {
            // SAFETY: alarm takes a plain integer.
            unsafe {
                libc::alarm(STOP_DEADLINE_S);
            }
            crate::stop();
            die_by(libc::c_int::from(byte));
            return;
        }
        if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        return;
    }
}

/// In a forked child (from the recorder's atfork handler): a pipe of its own (the parent's
/// watcher reads the inherited one), no watcher until [`ensure_watcher`].
pub(crate) fn after_fork_child() {
    WATCHER_PID.store(0, Ordering::Release);
    if !WANTED.load(Ordering::Acquire) {
        return;
    }
    let (r, w) = (
        PIPE_READ.swap(-1, Ordering::AcqRel),
        PIPE_WRITE.swap(-1, Ordering::AcqRel),
    );
    // SAFETY: closes this child's copies of the parent's pipe; close is async-signal-safe.
    unsafe {
        libc::close(r);
        libc::close(w);
    }
    if !open_pipe() {
        WANTED.store(false, Ordering::Release);
    }
}
