//! The clocks every record is stamped with and the ids of this process and thread, read
//! from the kernel (no state).

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

pub(super) fn wall_ns() -> i64 {
    read_clock(libc::CLOCK_REALTIME)
}

pub(super) fn gettid() -> i64 {
    // SAFETY: the gettid syscall takes no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as i64 }
}

pub(super) fn getpid() -> i64 {
    i64::from(std::process::id())
}

pub(super) fn getppid() -> i64 {
    // SAFETY: getppid takes no arguments and cannot fail.
    i64::from(unsafe { libc::getppid() })
}

pub(super) fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}
