//! The device lock: the CPU-device analogue of a GPU driver's time-slicing. On a GPU, kernels
//! from different processes are serialised by the device scheduler, and DOPpler's parallelism
//! overlaps only the host-side work (process set-up, compilation, data preparation). A CPU
//! OpenCL device (PoCL) has no such serialisation: two workers' kernels would share the cores
//! and inflate each other's device time. So workers hold a shared `flock` on a lock file while
//! they build and warm up, and an exclusive one for the timed runs: builds overlap each other,
//! timed runs overlap nothing. The kernel drops the lock when a worker dies, so a crashed or
//! killed worker cannot wedge the others. Disabled with `EngineConfig::device_lock = false`
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
}

impl DeviceLock {
    /// Opens (creating) the lock file at `path`.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(path)?;
        Ok(Self { file })
    }

    fn flock(&self, op: libc::c_int) -> std::io::Result<()> {
        loop {
            // SAFETY: flock on a descriptor owned by `self.file`, open for the call's duration.
            let rc = unsafe { libc::flock(self.file.as_raw_fd(), op) };
            if rc == 0 {
                return Ok(());
            }
            let err = std::io::Error::last_os_error();
            if err.kind() != std::io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
    }

    /// Shared: building and warming up.
    pub fn shared(&self) -> std::io::Result<()> {
        self.flock(libc::LOCK_SH)
    }

    /// Exclusive: the timed runs.
    pub fn exclusive(&self) -> std::io::Result<()> {
        self.flock(libc::LOCK_EX)
    }

    /// Released.
    pub fn release(&self) -> std::io::Result<()> {
        self.flock(libc::LOCK_UN)
    }
}
