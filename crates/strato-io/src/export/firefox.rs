//! Firefox Profiler exporter: CPU samples in the profiler's processed format (written with the
//! `fxprof-processed-profile` crate), every sample kept with its time, thread and process,
//! times relative to the first sample. Each sample's stack is its operation (`op:NAME`, the
//! "Operation" category) then its frames outermost first, Python frames (`func (file.py)`) in
//! the "Python" category and native ones (`symbol [module]`) in "Native".
//!
//! Which operation and Python stack a native sample belongs to is the analyses' business
//! (`strato_analysis::cross_stack::samples::joined_samples`): the caller passes the joined [`Sample`]s in,
//! as the Perfetto exporter takes what the analyses add.

use std::collections::HashMap;
use std::io::{self, Write};

use fxprof_processed_profile::{
    CategoryColor, CpuDelta, Frame, FrameFlags, FrameInfo, Profile, ReferenceTimestamp,
    SamplingInterval, Timestamp,
};
use strato_trace::{Ns, Trace, TrackId, TrackKind};

/// One CPU sample joined with its operation and stack.
#[derive(Debug, Clone, Copy)]
pub struct Sample<'a> {
    /// The sampled thread's track.
    pub track: TrackId,
    pub ts: Ns,
    /// The innermost operation's name.
    pub operation: &'a str,
    /// `python frames;native frames`, outermost first.
    pub stack: &'a str,
}

/// Writes `samples` (threads and processes named from `trace`'s tracks) as one Firefox
/// Profiler JSON document to `out`. With no sample it writes an empty profile.
pub fn write<W: Write>(trace: &Trace, samples: &[Sample<'_>], mut out: W) -> io::Result<()> {
    let t0 = samples.iter().map(|s| s.ts).min().unwrap_or(0);
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
    for s in samples {
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
        frames.push((format!("op:{}", s.operation), op_cat));
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
    serde_json::to_writer(&mut out, &profile).map_err(io::Error::other)
}

#[cfg(test)]
mod tests {
    use super::*;
    use strato_trace::testing::{rank, TraceBuilder};

    #[test]
    fn every_sample_is_kept_on_its_thread_in_its_process() {
        let mut b = TraceBuilder::new();
        b.rank(rank(Some(0), "r0"));
        let main = b.thread(10, 10);
        let worker = b.thread(10, 11);
        let trace = b.build();
        let samples = [
            Sample {
                track: main,
                ts: 1_000,
                operation: "forward",
                stack: "step (train.py);gemm [libblas.so]",
            },
            Sample {
                track: main,
                ts: 2_000,
                operation: "forward",
                stack: "step (train.py);gemm [libblas.so]",
            },
            Sample {
                track: worker,
                ts: 1_500,
                operation: "(no operation)",
                stack: "[python stack not sampled];read [libc.so.6]",
            },
        ];
        let mut out = Vec::new();
        write(&trace, &samples, &mut out).unwrap_or_else(|e| panic!("{e}"));
        let doc: serde_json::Value = serde_json::from_slice(&out).unwrap_or_else(|e| panic!("{e}"));
        let threads = doc["threads"].as_array().cloned().unwrap_or_default();
        assert_eq!(threads.len(), 2);
        let counts: Vec<u64> = threads
            .iter()
            .map(|t| t["samples"]["length"].as_u64().unwrap_or(0))
            .collect();
        assert_eq!(counts, [2, 1]);
        let text = String::from_utf8_lossy(&out);
        for name in [
            "op:forward",
            "gemm [libblas.so]",
            "step (train.py)",
            "Native",
            "Python",
        ] {
            assert!(text.contains(name), "{name} missing");
        }
    }
}
