//! The whole-trace analysis ([`iterations`]): each device's main stream read from the trace,
//! its ops mined for loops, and each loop measured and diagnosed ([`IterationsReport`]).

use rustc_hash::FxHashMap;
use serde::Serialize;
use strato_trace::{Level, Ns, RankId, Trace, TrackKind};

use super::diagnosis::{diagnose, Diagnosis};
use super::measure::{measure, summarize, Iteration, Op, Summary};
use super::mine::{mine, IterationOptions};
use crate::device_time::gpu_time::merge;
use crate::device_time::memory::{arg_i64, copy_direction, CopyDirection};

/// Options for the whole-trace analysis.
pub type Options = IterationOptions;

/// One loop of one device's main stream.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoopReport {
    /// Index of the rank in the trace (not the job rank).
    pub rank_index: u32,
    pub rank: i64,
    pub source: String,
    pub pid: Option<i64>,
    pub device: i64,
    pub stream: i64,
    /// Why this stream.
    pub stream_choice: String,
    /// 0 = the first pattern found (the longest loop); 1, 2 = further loops.
    #[serde(rename = "loop")]
    pub loop_index: usize,
    pub ops: usize,
    pub kernels: usize,
    pub pattern_len: usize,
    pub pattern_first_op: String,
    pub i: usize,
    pub i_estimated: bool,
    pub epsilon: usize,
    pub k0: usize,
    pub exact_occurrences: usize,
    pub iterations: Vec<Iteration>,
    pub summary: Summary,
    /// Findings, worded by [`Diagnosis::message`] (JSON: the messages).
    pub diagnosis: Vec<Diagnosis>,
    /// The annotation (`ProfilerStep#*`, digits as `*`) or module class (`ViTLayer`) whose
    /// instances the iterations coincide with, one instance per iteration; `None` when none
    /// does or before [`attach_lines_up`](super::attach_lines_up) ran. See
    /// [`attach_lines_up`](super::attach_lines_up).
    pub lines_up_with: Option<String>,
    /// `"annotation"` or `"module"` when `lines_up_with` is set.
    pub lines_up_kind: Option<&'static str>,
    /// When only some iterations line up with `lines_up_with` (a partial match: 24 decoder
    /// layers among 34 iterations, the rest a tail), how many do; `None` when every iteration
    /// does, or nothing lines up. See [`attach_lines_up`](super::attach_lines_up).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lines_up_iterations: Option<usize>,
    /// The loop (its `loop` index, same device and stream) whose iterations contain these:
    /// layers inside steps. Set by the miner for the nested loops it mines
    /// ([`MinedLoop::inside`](super::MinedLoop::inside)) and by
    /// [`attach_lines_up`](super::attach_lines_up) for loops found apart that nest.
    pub inside_loop: Option<usize>,
}

/// Devices whose main stream had too few ops or no repetition.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NoLoop {
    pub rank: i64,
    /// Index of the rank in the trace (not shown: what a merge of rank files renumbers).
    #[serde(skip)]
    pub rank_index: u32,
    pub device: i64,
    pub stream: i64,
    pub ops: usize,
    pub reason: String,
}

/// The report: one entry per (device main stream, loop).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IterationsReport {
    pub sequences: Vec<LoopReport>,
    pub not_found: Vec<NoLoop>,
}

/// The main stream of each (rank, device), from the device ops counted per (rank index,
/// device, queue) (`kernels`: each queue other than -1 with a device op, with its kernels):
/// by rank and device. The stream with the most kernels wins, then the lower queue.
pub(super) fn main_streams(kernels: &FxHashMap<(u32, i64, i64), usize>) -> Vec<StreamAt> {
    let mut best: FxHashMap<(u32, i64), (i64, usize, usize)> = FxHashMap::default();
    for (&(rank, device, queue), &count) in kernels {
        let e = best.entry((rank, device)).or_insert((queue, count, 0));
        e.2 += 1;
        if count > e.1 || (count == e.1 && queue < e.0) {
            e.0 = queue;
            e.1 = count;
        }
    }
    let mut out: Vec<StreamAt> = best
        .into_iter()
        .map(|((rank, device), (stream, kernels, streams))| StreamAt {
            rank: RankId(rank),
            device,
            stream,
            kernels,
            streams,
        })
        .collect();
    out.sort_by_key(|at| (at.rank, at.device));
    out
}

/// A device's main stream: where it is, its kernels and the device's streams (why it was
/// chosen).
#[derive(Debug, Clone, Copy)]
pub(super) struct StreamAt {
    pub(super) rank: RankId,
    pub(super) device: i64,
    pub(super) stream: i64,
    pub(super) kernels: usize,
    pub(super) streams: usize,
}

impl StreamAt {
    /// (rank index, device, stream).
    pub(super) fn id(&self) -> (u32, i64, i64) {
        (self.rank.0, self.device, self.stream)
    }
}

/// One device's main stream as the miner reads it: where it is, its ops sorted by (start,
/// end), the device's host-to-device copies (any stream) sorted by start, and the process
/// that owns it.
pub(super) struct MainStream {
    pub(super) at: StreamAt,
    pub(super) ops: Vec<Op>,
    pub(super) h2d: Vec<(Ns, Ns, Option<i64>)>,
    pub(super) pid: Option<i64>,
}

/// The owning pid of a stream's ops (`correlations`: theirs): the majority of their launching
/// runtime calls' pids (`launch_pid` of a correlation), else the rank's busiest process (`spans_per_pid`: thread
/// spans per (rank index, pid)); ties to the lower pid.
pub(super) fn owning_pid(
    rank: RankId,
    correlations: impl Iterator<Item = u64>,
    launch_pid: impl Fn(u64) -> Option<i64>,
    spans_per_pid: &FxHashMap<(u32, i64), usize>,
) -> Option<i64> {
    let mut votes: FxHashMap<i64, usize> = FxHashMap::default();
    for c in correlations {
        if let Some(pid) = launch_pid(c) {
            *votes.entry(pid).or_insert(0) += 1;
        }
    }
    votes
        .into_iter()
        .max_by_key(|&(pid, n)| (n, -pid))
        .map(|(pid, _)| pid)
        .or_else(|| {
            spans_per_pid
                .iter()
                .filter(|((r, _), _)| *r == rank.0)
                .max_by_key(|(&(_, pid), &n)| (n, -pid))
                .map(|(&(_, pid), _)| pid)
        })
}

/// Finds and measures the iterations of every device's main stream.
pub fn iterations(trace: &Trace, options: &IterationOptions) -> IterationsReport {
    let mut report = IterationsReport {
        sequences: Vec::new(),
        not_found: Vec::new(),
    };
    // Launching pid by correlation (runtime calls on CPU threads).
    let mut launch_pid: FxHashMap<(u32, u64), i64> = FxHashMap::default();
    let mut spans_per_pid: FxHashMap<(u32, i64), usize> = FxHashMap::default();
    let mut kernels: FxHashMap<(u32, i64, i64), usize> = FxHashMap::default();
    for span in &trace.spans {
        let track = trace.track(span.track);
        match track.kind {
            TrackKind::Thread { pid, .. } => {
                *spans_per_pid.entry((track.rank.0, pid)).or_insert(0) += 1;
                if span.level == Level::AcceleratorApi {
                    if let Some(c) = span.correlation.get() {
                        launch_pid.insert((track.rank.0, c), pid);
                    }
                }
            }
            TrackKind::DeviceQueue { device, queue } => {
                if queue == -1 || !span.level.is_device_op() {
                    continue;
                }
                let e = kernels.entry((track.rank.0, device, queue)).or_insert(0);
                if span.level == Level::DeviceKernel {
                    *e += 1;
                }
            }
            _ => {}
        }
    }
    let streams = main_streams(&kernels);
    // The device ops of each main stream's device, in trace order, gathered in one pass (not
    // one pass per stream: a job has a main stream per rank).
    let mut on_device: FxHashMap<(RankId, i64), Vec<u32>> = streams
        .iter()
        .map(|at| ((at.rank, at.device), Vec::new()))
        .collect();
    for (i, span) in trace.spans.iter().enumerate() {
        if !span.level.is_device_op() {
            continue;
        }
        let track = trace.track(span.track);
        if let TrackKind::DeviceQueue { device, .. } = track.kind {
            if let Some(list) = on_device.get_mut(&(track.rank, device)) {
                list.push(i as u32);
            }
        }
    }
    for at in streams {
        let StreamAt {
            rank,
            device,
            stream,
            ..
        } = at;
        let mut ops: Vec<Op> = Vec::new();
        let mut h2d: Vec<(Ns, Ns, Option<i64>)> = Vec::new();
        let spans = on_device.remove(&(rank, device)).unwrap_or_default();
        for span in spans.into_iter().map(|i| &trace.spans[i as usize]) {
            let TrackKind::DeviceQueue { queue, .. } = trace.track(span.track).kind else {
                continue;
            };
            if span.level == Level::DeviceCopy
                && copy_direction(trace.str(span.name)) == CopyDirection::HostToDevice
            {
                let bytes = arg_i64(trace.args_text(span.args).as_deref(), &["bytes", "Bytes"]);
                h2d.push((span.start, span.end, bytes));
            }
            if queue != stream || span.level == Level::DeviceSync {
                continue;
            }
            ops.push(Op {
                start: span.start,
                end: span.end,
                name: span.name.0,
                correlation: span.correlation.get(),
                kernel: span.level == Level::DeviceKernel,
            });
        }
        ops.sort_by_key(|o| (o.start, o.end));
        h2d.sort_by_key(|c| c.0);
        let pid = owning_pid(
            rank,
            ops.iter().filter_map(|o| o.correlation),
            |c| launch_pid.get(&(rank.0, c)).copied(),
            &spans_per_pid,
        );
        let main = MainStream { at, ops, h2d, pid };
        mine_stream(trace, main, options, &mut report);
    }
    report
}

/// Mines one main stream's loops, measures and diagnoses each, and adds them to `report` (or
/// says why it has none). `trace` gives the rank's number and source and the ops' names.
pub(super) fn mine_stream(
    trace: &Trace,
    main: MainStream,
    options: &IterationOptions,
    report: &mut IterationsReport,
) {
    let MainStream { at, ops, h2d, pid } = main;
    let StreamAt {
        rank,
        device,
        stream,
        kernels,
        streams,
    } = at;
    let info = &trace.ranks[rank.0 as usize];
    let rank_number = info.rank.unwrap_or(i64::from(rank.0));
    let mut dict: FxHashMap<u32, u32> = FxHashMap::default();
    let symbols: Vec<u32> = ops
        .iter()
        .map(|o| {
            let next = dict.len() as u32;
            *dict.entry(o.name).or_insert(next)
        })
        .collect();
    let mut gap_before: Vec<Ns> = Vec::with_capacity(ops.len());
    let mut last_end = Ns::MIN;
    for o in &ops {
        gap_before.push(if last_end == Ns::MIN {
            0
        } else {
            (o.start - last_end).max(0)
        });
        last_end = last_end.max(o.end);
    }
    let loops = mine(&symbols, Some(&gap_before), options);
    if loops.is_empty() {
        report.not_found.push(NoLoop {
            rank: rank_number,
            rank_index: rank.0,
            device,
            stream,
            ops: ops.len(),
            reason: if ops.len() < 4 {
                "too few device ops on the main stream".into()
            } else {
                "no substring repeats often enough to be a loop".into()
            },
        });
        return;
    }
    let stream_choice = format!(
        "stream {stream}: most kernels of the device's {streams} stream(s) ({kernels} kernels)"
    );
    let h2d_merged = merge(h2d.iter().map(|c| (c.0, c.1)));
    let mut gap_prefix: Vec<Ns> = Vec::with_capacity(gap_before.len() + 1);
    gap_prefix.push(0);
    for g in &gap_before {
        gap_prefix.push(gap_prefix[gap_prefix.len() - 1] + g);
    }
    for (loop_index, found) in loops.iter().enumerate() {
        let iterations = measure(&ops, &found.matches, &gap_prefix, &h2d, &h2d_merged);
        let summary = summarize(&iterations, ops.len());
        let diagnosis = diagnose(&summary, &iterations, found);
        report.sequences.push(LoopReport {
            rank_index: rank.0,
            rank: rank_number,
            source: info.source.clone(),
            pid,
            device,
            stream,
            stream_choice: stream_choice.clone(),
            loop_index,
            ops: ops.len(),
            kernels: ops.iter().filter(|o| o.kernel).count(),
            pattern_len: found.pattern_len,
            pattern_first_op: trace
                .strings
                .get(strato_trace::StrId(ops[found.pattern_start].name))
                .to_string(),
            i: found.i,
            i_estimated: found.i_estimated,
            epsilon: found.epsilon,
            k0: found.k0,
            exact_occurrences: found.exact_occurrences,
            iterations,
            summary,
            diagnosis,
            lines_up_with: None,
            lines_up_kind: None,
            lines_up_iterations: None,
            inside_loop: found.inside,
        });
    }
}
