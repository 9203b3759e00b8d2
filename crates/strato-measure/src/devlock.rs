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
//! On a device that shares the host's cores, the lock covers *all* of a worker's activity, not
//! only its device work: start-up (context creation, compiler warm-up), every request from
//! build to buffer release are under the shared lock, so a timed phase (exclusive) is a
//! host-wide exclusive phase among the workers. Workers report their windows on one clock
//! ([`monotonic_ns`]) and the host's CPU pressure stall ([`cpu_pressure_some_ns`]) so that the
//! engine can check this and see disturbance from outside the pool.
//!
//! `flock(2)` and `clock_gettime(2)` are called through `libc`; each call is a plain syscall
//! on a descriptor or struct this module owns.

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

/// `CLOCK_MONOTONIC` now, in ns: one clock for every process of the host, so that the engine
/// can compare the activity windows its workers report.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the struct we pass and owns nothing else.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// The host's cumulative CPU pressure stall, `some` line of `/proc/pressure/cpu` (ns): time
/// during which at least one runnable task waited for a core. `None` without PSI.
pub fn cpu_pressure_some_ns() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/pressure/cpu").ok()?;
    parse_pressure_some_total_us(&text).map(|us| us * 1e3)
}

/// The `total=` of the `some` line of a PSI file, in microseconds.
pub fn parse_pressure_some_total_us(text: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.starts_with("some "))?;
    line.split_whitespace()
        .find_map(|f| f.strip_prefix("total="))
        .and_then(|v| v.parse::<f64>().ok())
}

#[cfg(test)]
mod tests {
    #[test]
    fn pressure_total_parsed_from_the_some_line() {
        let text = "some avg10=94.95 avg60=50.14 avg300=17.75 total=106547550\n\
                    full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(
            super::parse_pressure_some_total_us(text),
            Some(106_547_550.0)
        );
        assert_eq!(super::parse_pressure_some_total_us("full total=3\n"), None);
    }

    #[test]
    fn monotonic_clock_advances() {
        let a = super::monotonic_ns();
        let b = super::monotonic_ns();
        assert!(a > 0 && b >= a);
    }
}
