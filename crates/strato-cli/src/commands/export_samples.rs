//! `strato export --folded OUT` and `--firefox OUT`: a profile's CPU samples (`strato record
//! --sample`), each joined with its operation and Python stack by `strato_analysis::samples`,
//! for the viewers people already use. Folded stacks (`op:NAME;frame;...;leaf COUNT`, one line
//! per distinct stack) feed `flamegraph.pl`, inferno and speedscope; the Firefox Profiler's
//! processed format (written with the `fxprof-processed-profile` crate) keeps every sample with
//! its time, thread and process, times relative to the first sample.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use fxprof_processed_profile::{
    CategoryColor, CpuDelta, Frame, FrameFlags, FrameInfo, Profile, ReferenceTimestamp,
    SamplingInterval, Timestamp,
};
use strato_analysis::samples::{cpu_samples, joined_samples, SampleOptions};
use strato_trace::{Trace, TrackKind};

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

/// Writes `trace`'s samples in the Firefox Profiler's processed format to `path`; returns the
/// number of samples.
pub(crate) fn write_firefox(trace: &Trace, path: &Path, inputs: &[PathBuf]) -> Result<usize> {
    let samples = joined_samples(trace, &SampleOptions::default());
    let Some(t0) = samples.iter().map(|s| s.ts).min() else {
        bail!("export --firefox: {NO_SAMPLES}");
    };
    let mut profile = Profile::new(
        "stratoscope",
        ReferenceTimestamp::from_millis_since_unix_epoch(0.0),
        SamplingInterval::from_millis(10),
    );
    let op_cat = profile.add_category("Operation", CategoryColor::Green);
    let py_cat = profile.add_category("Python", CategoryColor::Yellow);
    let native_cat = profile.add_category("Native", CategoryColor::Blue);
    let mut processes = HashMap::new();
    let mut threads = HashMap::new();
    for s in &samples {
        let track = trace.track(s.track);
        let (pid, tid) = match track.kind {
            TrackKind::Thread { pid, tid } => (pid, tid),
            _ => (0, 0),
        };
        let process = *processes.entry(pid).or_insert_with(|| {
            profile.add_process(
                &format!("pid {pid}"),
                pid as u32,
                Timestamp::from_nanos_since_reference(0),
            )
        });
        let thread = *threads.entry(s.track).or_insert_with(|| {
            let t = profile.add_thread(
                process,
                tid as u32,
                Timestamp::from_nanos_since_reference(0),
                pid == tid,
            );
            let name = track.name.clone().unwrap_or_else(|| format!("tid {tid}"));
            profile.set_thread_name(t, &name);
            t
        });
        let mut frames = Vec::new();
        let op = format!("op:{}", s.operation);
        frames.push((op, op_cat));
        for f in s.stack.split(';') {
            // Python frames are `func (file.py)`; native ones `symbol [module]`.
            let cat = if f.ends_with(']') { native_cat } else { py_cat };
            frames.push((f.to_owned(), cat));
        }
        let infos: Vec<FrameInfo> = frames
            .into_iter()
            .map(|(text, cat)| FrameInfo {
                frame: Frame::Label(profile.intern_string(&text)),
                category_pair: cat.into(),
                flags: FrameFlags::empty(),
            })
            .collect();
        let stack = profile.intern_stack_frames(thread, infos.into_iter());
        let ts = Timestamp::from_nanos_since_reference((s.ts - t0).max(0) as u64);
        profile.add_sample(thread, ts, stack, CpuDelta::ZERO, 1);
    }
    crate::output::write_output(path, inputs, |w| {
        serde_json::to_writer(&mut *w, &profile).map_err(std::io::Error::other)
    })?;
    Ok(samples.len())
}
