//! `strato record --sample[=HZ]`: starting and stopping the launcher's CPU sampler
//! (`strato_record::sample`) around the program, and the environment variable that turns on
//! the program's own Python-stack sampler (`stratoscope`, docs/recording.md). Kept apart from
//! `record.rs` so the sampling side has one home.

use std::path::Path;

use strato_record::sample::{SampleOptions, SampleRecorder};

/// The environment variable carrying the rate to the program's Python-stack sampler.
pub(crate) const ENV_SAMPLE_HZ: &str = "STRATOSCOPE_SAMPLE_HZ";

/// Starts sampling `pid`'s tree at `hz`; when perf events cannot be opened, says why once and
/// returns None (the recording goes on without samples).
pub(crate) fn start(dir: &Path, pid: u32, hz: u64, level: u64) -> Option<SampleRecorder> {
    let mut options = SampleOptions::new(dir.to_owned(), pid as i32);
    options.frequency_hz = hz;
    options.level = level;
    match SampleRecorder::start(options) {
        Ok(r) => Some(r),
        Err(e) => {
            eprintln!("strato record --sample: {e}; recording goes on without CPU samples");
            None
        }
    }
}

/// Stops the sampler and, with `print`, prints its one-line summary (with its own cost; the
/// calibration runs stay quiet).
pub(crate) fn stop(sampler: SampleRecorder, print: bool) {
    let s = sampler.stop();
    if !print {
        return;
    }
    eprintln!(
        "strato record --sample: {} samples from {} threads in {} processes ({} leaf frames unresolved); collector CPU {:.1} ms{}",
        s.samples,
        s.threads,
        s.processes,
        s.unresolved,
        s.collector_cpu_ns as f64 / 1e6,
        if s.lost > 0 {
            format!("; {} kernel records LOST (ring buffers full)", s.lost)
        } else {
            String::new()
        }
    );
    if s.throttled > 0 {
        eprintln!(
            "strato record --sample: the kernel throttled sampling {} times, {:.1} ms in all (more than kernel.perf_event_max_sample_rate a second): no samples then (strato info lists it)",
            s.throttled,
            s.throttled_ns as f64 / 1e6
        );
    }
}
