//! `strato export --folded OUT` and `--firefox OUT`: a profile's CPU samples (`strato record
//! --sample`), each joined with its operation and Python stack by
//! `strato_analysis::cross_stack::samples`, for the viewers people already use. Folded stacks
//! (`op:NAME;frame;...;leaf COUNT`, one line per distinct stack) feed `flamegraph.pl`, inferno and
//! speedscope; the Firefox Profiler's processed format ([`strato_io::export::firefox`]) keeps every
//! sample with its time, thread and process, times relative to the first sample.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use strato_analysis::cross_stack::samples::{cpu_samples, joined_samples, SampleOptions};
use strato_io::export::firefox;
use strato_trace::Trace;

const NO_SAMPLES: &str = "the profile holds no CPU samples (record with `strato record --sample`)";

/// Writes the folded stacks of `trace`'s samples to `path`; returns the number of lines.
pub(crate) fn write_folded(trace: &Trace, path: &Path, inputs: &[PathBuf]) -> Result<usize> {
    let samples = cpu_samples(trace, &SampleOptions::default());
    if samples.samples == 0 {
        bail!("export --folded: {NO_SAMPLES}");
    }
    let mut lines = 0;
    crate::output::write_output(path, inputs, |w| {
        for line in samples.folded() {
            writeln!(w, "{line}")?;
            lines += 1;
        }
        Ok(())
    })?;
    Ok(lines)
}

/// Writes `trace`'s samples in the Firefox Profiler's processed format to `path`
/// ([`strato_io::export::firefox`]); returns the number of samples.
pub(crate) fn write_firefox(trace: &Trace, path: &Path, inputs: &[PathBuf]) -> Result<usize> {
    let joined = joined_samples(trace, &SampleOptions::default());
    if joined.is_empty() {
        bail!("export --firefox: {NO_SAMPLES}");
    }
    let samples: Vec<firefox::Sample<'_>> = joined
        .iter()
        .map(|s| firefox::Sample {
            track: s.track,
            ts: s.ts,
            operation: &s.operation,
            stack: &s.stack,
        })
        .collect();
    crate::output::write_output(path, inputs, |w| firefox::write(trace, &samples, w))?;
    Ok(samples.len())
}
