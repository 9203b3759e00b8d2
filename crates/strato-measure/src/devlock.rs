//! The device lock: the CPU-device analogue of a GPU driver's time-slicing. On a GPU, kernels
//! from different processes are serialised by the device scheduler, and DOPpler's parallelism
//! overlaps only the host-side work (process set-up, compilation, data preparation). A CPU
//! OpenCL device (PoCL) has no such serialisation: two workers' kernels would share the cores
//! and inflate each other's device time. So workers hold a shared `flock` on a lock file while
//! they build and warm up, and an exclusive one for the timed runs: builds overlap each other,
//! timed runs overlap nothing. A second file is a turnstile giving waiting writers priority:
//! without it, a worker wanting its timed runs waits for the others' *next* builds too, and the
//! pool degenerates into serial measurement. The kernel drops both locks when a worker dies, so
//! a crashed or killed worker cannot wedge the others. Disabled with `EngineConfig::device_lock = false`
//! (naive parallel measurement, the paper's NPM).
//!
//! `flock(2)` is called through `libc`; each call is a plain syscall on a descriptor this
//! module owns.

use std::fs::File;
use std::os::unix::io::AsRawFd;
use std::path::Path;

/// An open lock file.
#[derive(Debug)]
pub struct DeviceLock {
    file: File,
    turnstile: File,
}

impl DeviceLock {
    /// Opens (creating) the lock file at `path`.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let open = |p: &Path| {
            std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .read(true)
                .write(true)
                .open(p)
        };
        let mut t = path.as_os_str().to_owned();
        t.push(".turnstile");
        Ok(Self {
            file: open(path)?,
            turnstile: open(Path::new(&t))?,
        })
    }

    fn flock(file: &File, op: libc::c_int) -> std::io::Result<()> {
        loop {
            // SAFETY: flock on a descriptor owned by `file`, open for the call's duration.
            let rc = unsafe { libc::flock(file.as_raw_fd(), op) };
            if rc == 0 {
                return Ok(());
            }
            let err = std::io::Error::last_os_error();
            if err.kind() != std::io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
    }

    /// Shared: building and warming up. Passes the turnstile first, so it queues behind a
    /// waiting writer.
    pub fn shared(&self) -> std::io::Result<()> {
        Self::flock(&self.turnstile, libc::LOCK_EX)?;
        let r = Self::flock(&self.file, libc::LOCK_SH);
        Self::flock(&self.turnstile, libc::LOCK_UN)?;
        r
    }

    /// Exclusive: the timed runs. Drops this worker's shared hold first (a writer never holds
    /// the device while waiting for the turnstile, so the two locks cannot deadlock), then holds
    /// the turnstile while waiting, which keeps new readers out.
    pub fn exclusive(&self) -> std::io::Result<()> {
        Self::flock(&self.file, libc::LOCK_UN)?;
        Self::flock(&self.turnstile, libc::LOCK_EX)?;
        let r = Self::flock(&self.file, libc::LOCK_EX);
        Self::flock(&self.turnstile, libc::LOCK_UN)?;
        r
    }

    /// Released.
    pub fn release(&self) -> std::io::Result<()> {
        Self::flock(&self.file, libc::LOCK_UN)
    }
}
