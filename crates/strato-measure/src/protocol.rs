//! The worker protocol: frames on the worker's stdin/stdout, each a little-endian u32 length
//! followed by that many bytes of JSON. The engine sends [`Request`]s, the worker answers with
//! [`Reply`]s: one `Ready` after start-up, then one `Result` per `Measure`. Anything that is
//! not a frame (a crash, a hang) is detected by the engine from the pipe closing or a timeout.
//!
//! Any program speaking this protocol can be a worker (the Python TVM worker does).

use std::io::{Read, Write};

use serde::{Deserialize, Serialize};

use crate::candidate::Candidate;
use crate::error::{MeasureError, Result};

/// Largest frame accepted (64 MiB).
pub const MAX_FRAME: u32 = 64 << 20;

/// Most kernel launches in one timed run under a time budget (a kernel of a few microseconds
/// would otherwise need thousands per run).
pub const MAX_LAUNCHES_PER_RUN: u32 = 1000;

/// How latency is timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Timing {
    /// Device profiling events: `CL_PROFILING_COMMAND_END - START` of each run (the engine).
    #[default]
    Device,
    /// CPU timestamps around the runs, as the conventional serial harness does.
    Cpu,
}

/// Engine -> worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Request {
    /// Measure one candidate.
    Measure {
        id: u64,
        candidate: Box<Candidate>,
        /// Timed runs.
        repeats: u32,
        /// Untimed runs before the timed ones (PoCL compiles the work-group function at the
        /// first launch).
        warmup: u32,
        timing: Timing,
        /// Timed runs disturbed by other activity on the host (CPU pressure stall above
        /// `stall_limit` of their duration) are repeated up to this many times, without
        /// rebuilding; the least disturbed attempt is kept.
        #[serde(default)]
        disturbed_retries: u32,
        #[serde(default)]
        stall_limit: f64,
        /// Time budget of one timed run (ns): each of the `repeats` runs launches the kernel
        /// `k` times back to back, `k` the smallest count whose launches take at least this
        /// long (sized by one probe launch, at most [`MAX_LAUNCHES_PER_RUN`]), and reports the
        /// time per launch. 0 (the default) = one launch per run.
        #[serde(default)]
        min_run_ns: f64,
    },
    /// Exit cleanly.
    Shutdown,
}

/// A successful measurement. Missing fields default to 0 (workers written in other languages
/// need only send `latency_ns` and `runs_ns`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct Measurement {
    /// Mean latency of one launch over the timed runs (ns): device time, or CPU time for
    /// [`Timing::Cpu`].
    pub latency_ns: f64,
    /// Smallest per-launch latency of a run (ns).
    pub min_ns: f64,
    /// Per-run latencies (ns): each run's time per launch (its device time over its
    /// `launches_per_run` launches).
    pub runs_ns: Vec<f64>,
    /// Kernel launches in each timed run (1 without a time budget; 0 = not reported).
    pub launches_per_run: u32,
    /// CPU-side duration of the timed runs, enqueue of the first to completion of the last (ns).
    pub duration_ns: f64,
    /// Program build time (ns); 0 when the worker had it cached.
    pub build_ns: f64,
    /// Time of the untimed warm-up runs (ns).
    pub warmup_ns: f64,
    /// CPU-side duration of the whole request inside the worker (ns).
    pub total_ns: f64,
    /// Whether the built program came from the worker's cache.
    pub cached: bool,
    /// The worker's activity on one clock (`CLOCK_MONOTONIC` ns, comparable across the
    /// workers of a host; 0 = not reported): active from `active_from_ns` (lock taken) to
    /// `prep_to_ns` (build, upload, warm-up done), then waiting for the exclusive lock, then
    /// timed runs `timed_from_ns..timed_to_ns` and teardown until `active_to_ns`. The engine
    /// checks that no other worker was active during a timed window.
    pub active_from_ns: u64,
    pub prep_to_ns: u64,
    pub timed_from_ns: u64,
    pub timed_to_ns: u64,
    pub active_to_ns: u64,
    /// CPU pressure stall during the timed runs (ns): growth of `/proc/pressure/cpu` "some"
    /// total, i.e. time during which some runnable task on the host waited for a core.
    /// `None` where the kernel does not expose pressure information.
    pub cpu_stall_ns: Option<f64>,
    /// Attempts at the timed runs (more than 1 when disturbed ones were repeated).
    pub attempts: u32,
}

/// What happened to one candidate.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    Ok(Measurement),
    /// The program did not build (compiler log attached).
    BuildFailed {
        log: String,
    },
    /// The candidate asked for more memory than the device has.
    OutOfMemory {
        error: String,
    },
    /// Launch or run failed (e.g. invalid work-group size).
    RunFailed {
        error: String,
    },
    /// The candidate spec is unusable (missing source, bad sizes).
    Invalid {
        error: String,
    },
    /// The worker died while measuring it.
    Crashed {
        detail: String,
    },
    /// No answer within the timeout; the worker was killed and replaced.
    Timeout {
        after_s: f64,
    },
}

impl Outcome {
    /// The measurement, if successful.
    pub fn measurement(&self) -> Option<&Measurement> {
        match self {
            Outcome::Ok(m) => Some(m),
            _ => None,
        }
    }
    /// Short status name.
    pub fn status(&self) -> &'static str {
        match self {
            Outcome::Ok(_) => "ok",
            Outcome::BuildFailed { .. } => "build_failed",
            Outcome::OutOfMemory { .. } => "out_of_memory",
            Outcome::RunFailed { .. } => "run_failed",
            Outcome::Invalid { .. } => "invalid",
            Outcome::Crashed { .. } => "crashed",
            Outcome::Timeout { .. } => "timeout",
        }
    }
    /// Failures that depend on the candidate alone and are not retried in isolation.
    pub fn is_deterministic_failure(&self) -> bool {
        matches!(
            self,
            Outcome::BuildFailed { .. } | Outcome::Invalid { .. } | Outcome::RunFailed { .. }
        )
    }
}

/// Worker -> engine.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Reply {
    /// Sent once the device context is up and the compiler warmed.
    Ready {
        pid: u32,
        device: String,
        /// Time to initialise (ns).
        init_ns: f64,
        /// Start-up window, `CLOCK_MONOTONIC` ns (0 = not reported).
        #[serde(default)]
        active_from_ns: u64,
        #[serde(default)]
        active_to_ns: u64,
    },
    /// The outcome of request `id`.
    Result { id: u64, outcome: Outcome },
    /// The worker could not start (no device, ...).
    Fatal { error: String },
}

/// Writes one frame.
pub fn write_frame<W: Write, T: Serialize>(w: &mut W, msg: &T) -> Result<()> {
    let bytes = serde_json::to_vec(msg).map_err(|e| MeasureError::Protocol(e.to_string()))?;
    let len = u32::try_from(bytes.len())
        .ok()
        .filter(|&l| l <= MAX_FRAME)
        .ok_or_else(|| MeasureError::Protocol(format!("frame too large: {}", bytes.len())))?;
    w.write_all(&len.to_le_bytes())?;
    w.write_all(&bytes)?;
    w.flush()?;
    Ok(())
}

/// Reads one frame; `Ok(None)` on a clean end of stream before a frame starts.
pub fn read_frame<R: Read, T: for<'de> Deserialize<'de>>(r: &mut R) -> Result<Option<T>> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        let n = r.read(&mut len[got..])?;
        if n == 0 {
            if got == 0 {
                return Ok(None);
            }
            return Err(MeasureError::Protocol("truncated frame header".into()));
        }
        got += n;
    }
    let len = u32::from_le_bytes(len);
    if len > MAX_FRAME {
        return Err(MeasureError::Protocol(format!("frame too large: {len}")));
    }
    let mut buf = vec![0u8; len as usize];
    r.read_exact(&mut buf)?;
    serde_json::from_slice(&buf)
        .map(Some)
        .map_err(|e| MeasureError::Protocol(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip() {
        let mut buf = Vec::new();
        let r = Reply::Result {
            id: 7,
            outcome: Outcome::Timeout { after_s: 4.0 },
        };
        write_frame(&mut buf, &r).unwrap();
        write_frame(&mut buf, &Request::Shutdown).unwrap();
        let mut cur = std::io::Cursor::new(buf);
        let a: Reply = read_frame(&mut cur).unwrap().unwrap();
        assert!(matches!(a, Reply::Result { id: 7, .. }));
        let b: Request = read_frame(&mut cur).unwrap().unwrap();
        assert!(matches!(b, Request::Shutdown));
        let c: Option<Request> = read_frame(&mut cur).unwrap();
        assert!(c.is_none());
    }
}
