//! Holding a recorded program before its first instruction until the launcher's collectors
//! (`strato record --os`, `--sample`) are attached to it, so they see the whole program, as
//! `perf record` does with its own children.
//!
//! The collectors attach to a process id, which exists only once the process is spawned, and
//! `std::process::Command::spawn` returns only after the child has exec'd its program (so a
//! child held before exec would never let it return). So the program is spawned through a gate:
//! `strato` itself, run as `strato __strato-exec-when-ready FD -- PROGRAM ARGS...`, waits until
//! the pipe `FD` is closed by the launcher ([`Gate::open`]) and then execs the program in the
//! same process (same pid, same stdio and environment; perf events attached to the process stay
//! attached across exec). Without the gate, a short program ran its first tens of milliseconds
//! (its imports, or all of a 50 ms run) before the collectors were attached, by a margin that
//! varied from run to run: missed system calls and samples, and noise in the calibration of
//! the OS level's cost.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// The hidden first argument that runs `strato` as the gate ([`exec_when_ready`]).
pub const GATE_ARG: &str = "__strato-exec-when-ready";

/// The launcher's end of a gate: the program runs once it is opened (or dropped).
pub struct Gate {
    write: OwnedFd,
    /// The child's end, closed here once the child holds it ([`Gate::spawned`]).
    read: Option<OwnedFd>,
}

impl Gate {
    /// A command that runs `program` (resolved like `execvp` does) once the gate opens; the
    /// caller sets its environment and stdio as for the program itself. A program that cannot
    /// be found is an error here, as spawning it directly would be.
    pub fn command(program: &[String]) -> Result<(Command, Gate)> {
        let Some(name) = program.first() else {
            bail!("record: no program to run");
        };
        if resolve(name).is_none() {
            bail!("record: cannot run {name:?}: no such executable file (in PATH)");
        }
        let mut fds = [0 as RawFd; 2];
        // SAFETY: pipe2 writes two new descriptors into `fds`; both are owned below. Both ends
        // are close-on-exec; the read end is made inheritable right before it is passed on.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error()).context("record: cannot create a pipe");
        }
        // SAFETY: the descriptors were just created and nothing else owns them.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let exe = std::env::current_exe().context("record: cannot locate the strato executable")?;
        let mut cmd = Command::new(exe);
        cmd.arg(GATE_ARG)
            .arg(read.as_raw_fd().to_string())
            .arg("--")
            .args(program);
        let read_fd = read.as_raw_fd();
        // SAFETY: runs in the forked child before exec; fcntl(2) is async-signal-safe. It
        // clears close-on-exec on the gate's read end only, so the gate process inherits it.
        unsafe {
            cmd.pre_exec(move || {
                if libc::fcntl(read_fd, libc::F_SETFD, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        Ok((
            cmd,
            Gate {
                write,
                read: Some(read),
            },
        ))
    }

    /// Closes the launcher's copy of the child's end once the child is spawned (so the child's
    /// read sees the end of the pipe when the gate opens).
    pub fn spawned(&mut self) {
        self.read = None;
    }

    /// Lets the program run.
    pub fn open(self) {
        drop(self.write);
    }
}

/// Where `name` is run from: itself when it holds a `/`, else the first executable file of
/// that name in `PATH` (as `execvp` searches).
fn resolve(name: &str) -> Option<PathBuf> {
    let executable = |p: &Path| {
        use std::os::unix::fs::PermissionsExt;
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if name.contains('/') {
        return Some(PathBuf::from(name)).filter(|p| executable(p));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| executable(p))
}

/// The gate's side (`strato __strato-exec-when-ready FD -- PROGRAM ARGS...`): waits until `FD`
/// is closed or written to, then execs the program in this process. Returns only when that
/// fails: exit status 127 (not found) or 126 (not runnable), as a shell reports it.
pub fn exec_when_ready(args: &[OsString]) -> u8 {
    let fd: Option<RawFd> = args.first().and_then(|a| a.to_str()?.parse().ok());
    let (Some(fd), Some(program)) = (fd, args.get(2).filter(|_| args[1] == "--")) else {
        eprintln!("strato: {GATE_ARG} FD -- PROGRAM [ARGS...] (used by strato record)");
        return 2;
    };
    let mut byte = [0u8; 1];
    loop {
        // SAFETY: reads at most one byte into a live buffer from the inherited descriptor.
        let n = unsafe { libc::read(fd, byte.as_mut_ptr().cast(), 1) };
        if n >= 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            break;
        }
    }
    // SAFETY: the descriptor was inherited for this wait only and is not used again.
    unsafe {
        libc::close(fd);
    }
    let error = Command::new(program).args(&args[3..]).exec();
    eprintln!(
        "strato record: cannot run {}: {error}",
        program.to_string_lossy()
    );
    if error.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    }
}
