//! Device temporal breakdown ("where did the GPU time go"), per rank: idle, compute and
//! non-compute time within the rank's kernel window, communication/computation overlap, and
//! the per-stream breakdown of idle gaps into host wait, kernel wait and other.
//!
//! Definitions (see `docs/analyses/gpu-time.md`):
//! - device events = spans of a device level (kernel, copy, set, device-side sync) on a device
//!   queue whose queue id is not -1;
//! - `kernel_time` = end of the last device event - start of the first; `idle` = kernel_time -
//!   length of the union of all device events; `compute` = length of the union of computation
//!   kernels; `non_compute` = kernel_time - compute - idle. So idle + compute + non_compute =
//!   kernel_time exactly, and the percentages are computed so that they sum to 100;
//! - kernel classes by name, as Holistic Trace Analysis (HTA) 0.5 does: communication, memory,
//!   computation (neither, and not a sync/launch-like name);
//! - comm/comp overlap = time covered by both merged communication and merged computation
//!   intervals / merged communication time (`None` when there is no communication);
//! - an idle gap on a stream (kernel start - previous end on that stream) is host wait when the
//!   launching API call started after the previous event ended, else kernel wait when shorter
//!   than the threshold (30 us), else other. Events on one stream can overlap (real traces
//!   have them, and so does a trace with every event duplicated): in [`Window::Whole`] the
//!   "previous end" is the latest end so far on the stream, an event starting before it is an
//!   overlap (counted in [`StreamIdle::overlapping_events`], no gap), so no part is ever
//!   negative and host + kernel wait + other = the stream's window - the union of its events.
//!   [`Window::Hta`] keeps HTA's own arithmetic (previous event's end, negative gaps included)
//!   and still counts the overlaps.
//!
//! - exposure (per device that ran work, [`Window::Whole`] only): each instant of the device's
//!   window (its first event's start to its last event's end) is compute when a computation
//!   kernel runs (split into with / without a communication kernel beside it), else exposed
//!   communication when a communication kernel runs, else exposed copy when a copy or memset
//!   runs, else idle (device-side sync markers count as idle). The five parts add up to the
//!   window exactly. Where the rank's CPU has `ProfilerStep#N` spans, the same split is made per
//!   step: a step's device window runs from the first device event launched inside the step to
//!   the first device event of the next step (the last step: to the end of its last event), so
//!   the steps' windows tile the device's stepped time without gaps or overlaps.
//!
//! Windows: [`Window::Whole`] (ours) takes every device event at full ns resolution.
//! [`Window::Hta`] reproduces HTA: with two or more `ProfilerStep#N` annotations only CPU events
//! starting before the last step's start are kept, device events only when their correlation
//! matches a kept CPU event, and times are whole microseconds (start rounded up, end down).

use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;
use strato_trace::{Level, Ns, RankId, StrId, Trace, TrackKind};

mod registration;
pub use registration::{GpuTime, GpuTimeSettings};

/// Which events and resolution the breakdown uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Window {
    /// Every device event, exact nanoseconds.
    Whole,
    /// Holistic Trace Analysis's window and rounding.
    Hta,
}

/// Options of [`gpu_time`].
#[derive(Debug, Clone, Copy)]
pub struct GpuTimeOptions {
    pub window: Window,
    /// Gaps shorter than this (when not host wait) are kernel wait. Default 30 us.
    pub kernel_wait_threshold_ns: Ns,
}

impl Default for GpuTimeOptions {
    fn default() -> Self {
        GpuTimeOptions {
            window: Window::Whole,
            kernel_wait_threshold_ns: 30_000,
        }
    }
}

/// Idle gaps of one stream.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamIdle {
    pub device: i64,
    pub stream: i64,
    pub events: usize,
    pub host_wait_ns: Ns,
    pub kernel_wait_ns: Ns,
    pub other_ns: Ns,
    /// Events that started before the previous events on the stream had ended.
    pub overlapping_events: usize,
}

/// The breakdown of one rank.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankGpuTime {
    /// The job rank when the source says, else the rank's position in the input.
    pub rank: i64,
    pub source: String,
    pub device_events: usize,
    pub window_start_ns: Option<Ns>,
    pub window_end_ns: Option<Ns>,
    pub kernel_time_ns: Ns,
    pub idle_ns: Ns,
    pub compute_ns: Ns,
    pub non_compute_ns: Ns,
    pub idle_pct: f64,
    pub compute_pct: f64,
    pub non_compute_pct: f64,
    pub communication_ns: Ns,
    pub comm_comp_overlap_pct: Option<f64>,
    pub streams: Vec<StreamIdle>,
    /// Exposed communication per device that ran work ([`Window::Whole`] only; `None` in
    /// [`Window::Hta`], whose output stays HTA's).
    pub exposure: Option<Vec<DeviceExposure>>,
    /// Set when the rank had no device events in the window.
    pub note: Option<String>,
    /// Events of the rank that looked like device work but whose category no level rule
    /// names, per category (from the import notes): left out of every figure above, so the
    /// device may have been busier than shown. Empty when there were none.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub unclassified_device_like_events: std::collections::BTreeMap<String, u64>,
}

impl RankGpuTime {
    /// The warning owed when [`RankGpuTime::unclassified_device_like_events`] is not empty
    /// (one line), else `None`.
    pub fn unclassified_warning(&self) -> Option<String> {
        if self.unclassified_device_like_events.is_empty() {
            return None;
        }
        let total: u64 = self.unclassified_device_like_events.values().sum();
        let list: Vec<String> = self
            .unclassified_device_like_events
            .iter()
            .map(|(cat, n)| format!("{cat} {n}"))
            .collect();
        Some(format!(
            "{total} events that look like device work were left unclassified ({}) and are not \
             in these figures: name their category with --level-map",
            list.join(", ")
        ))
    }
}

/// What ran on a device, instant by instant, over a window. `compute_alone_ns +
/// compute_with_communication_ns + exposed_communication_ns + exposed_copy_ns + idle_ns =
/// window_end_ns - window_start_ns` exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Exposure {
    pub window_start_ns: Ns,
    pub window_end_ns: Ns,
    /// A computation kernel runs and no communication kernel does.
    pub compute_alone_ns: Ns,
    /// A computation kernel and a communication kernel run together (communication hidden).
    pub compute_with_communication_ns: Ns,
    /// Communication runs with no computation beside it.
    pub exposed_communication_ns: Ns,
    /// A copy or memset runs with neither computation nor communication beside it.
    pub exposed_copy_ns: Ns,
    /// Nothing of the above runs.
    pub idle_ns: Ns,
}

/// One step's exposure on a device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StepExposure {
    /// The step annotation's name (`ProfilerStep#12`).
    pub step: String,
    #[serde(flatten)]
    pub exposure: Exposure,
}

/// The exposure of one device that ran work, whole and per step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceExposure {
    pub device: i64,
    #[serde(flatten)]
    pub exposure: Exposure,
    /// Per `ProfilerStep#N` of the rank's CPU (empty when the trace has no steps or none of
    /// its device events was launched inside one).
    pub steps: Vec<StepExposure>,
}

/// The breakdown of every rank (it serialises as the command's JSON shape:
/// [`registration`]).
#[derive(Debug, Clone, PartialEq)]
pub struct GpuTimeReport {
    pub window: Window,
    pub ranks: Vec<RankGpuTime>,
}

/// HTA's kernel classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelClass {
    Communication,
    Memory,
    Computation,
    Other,
}

/// [`kernel_class`] of a trace's names, each worked out once: the name tests are what a pass
/// over the device ops costs, and a trace's kernels repeat a few names. Holds one entry per
/// distinct name asked for; names are [`StrId`]s of one string table.
#[derive(Debug, Default, Clone)]
pub struct KernelClasses(FxHashMap<StrId, KernelClass>);

impl KernelClasses {
    /// The class of `trace`'s name `name` (a trace's, or a batch's of the same table).
    pub fn of(&mut self, trace: &Trace, name: StrId) -> KernelClass {
        *self
            .0
            .entry(name)
            .or_insert_with(|| kernel_class(trace.str(name)))
    }
}

/// Classifies a device event by name as HTA 0.5 does.
pub fn kernel_class(name: &str) -> KernelClass {
    let communication = name.starts_with("nccl")
        || name.starts_with("hip")
        || name.starts_with("hccl")
        || name.contains("ncclKernel");
    if communication {
        return KernelClass::Communication;
    }
    let memory = ["Memcpy", "Memset", "hipMemcpy", "hipMemset", "dma"]
        .iter()
        .any(|p| name.starts_with(p));
    if memory {
        return KernelClass::Memory;
    }
    let non_compute = name.contains("Memcpy")
        || name.contains("Memset")
        || name.contains("dma")
        || name.contains("Sync")
        || name.starts_with("Stream Wait Event")
        || (name.starts_with("cuda") && name.contains("LaunchKernel"))
        || name.starts_with("runFunction");
    if non_compute {
        KernelClass::Other
    } else {
        KernelClass::Computation
    }
}

/// One device event as the breakdown sees it (32 bytes: one is kept per device event while
/// the trace streams).
#[derive(Debug, Clone, Copy)]
struct DeviceEvent {
    start: Ns,
    end: Ns,
    /// The launch correlation when `has_correlation` (else [`NO_CORRELATION`]).
    correlation: u64,
    /// Index of the event's (device, queue) in its rank's [`RankStream::queues`].
    queue: u32,
    class: KernelClass,
    activity: Activity,
    has_correlation: bool,
}

/// [`DeviceEvent::correlation`] of an event without one.
const NO_CORRELATION: u64 = 0;

impl DeviceEvent {
    fn correlation(&self) -> Option<u64> {
        self.has_correlation.then_some(self.correlation)
    }
}

/// What a device event counts as in the exposure split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Activity {
    Compute,
    Communication,
    Copy,
    /// Device-side sync markers and other non-work: idle for the exposure split.
    Nothing,
}

fn activity(level: Level, class: KernelClass, name: &str) -> Activity {
    match class {
        KernelClass::Communication => Activity::Communication,
        KernelClass::Memory => Activity::Copy,
        _ if matches!(level, Level::DeviceCopy | Level::DeviceSet) => Activity::Copy,
        KernelClass::Other if name.contains("Memcpy") || name.contains("Memset") => Activity::Copy,
        KernelClass::Computation if level == Level::DeviceSync => Activity::Nothing,
        KernelClass::Computation => Activity::Compute,
        _ => Activity::Nothing,
    }
}

/// Computes the breakdown for every rank of `trace` (the whole trace read as one batch of
/// [`GpuTimeStream`], so the streamed and the whole-trace answers are one implementation).
pub fn gpu_time(trace: &Trace, options: &GpuTimeOptions) -> GpuTimeReport {
    let mut stream = GpuTimeStream::new(*options);
    stream.add(trace);
    stream.finish(trace)
}

/// [`gpu_time`] gathered batch by batch, so that a streaming import never holds the trace's
/// spans: [`GpuTimeStream::add`] reads one batch of events (the trace as it is then: its
/// tracks and strings are those of the whole trace so far, its spans the batch's, in the
/// trace's order) and keeps only what the breakdown reads: per device event its times, class,
/// queue and correlation (40 bytes), per launching API call its start by correlation, the
/// `ProfilerStep#N` spans, and with [`Window::Hta`] every correlated CPU span's start and
/// correlation (HTA's cut-off, the last step's start, is known only at the end).
/// [`GpuTimeStream::finish`] gives what [`gpu_time`] gives for the whole trace.
#[derive(Debug)]
pub struct GpuTimeStream {
    options: GpuTimeOptions,
    class_cache: KernelClasses,
    ranks: Vec<RankStream>,
    /// [`Window::Hta`]: the distinct names containing `ProfilerStep` over the whole job (HTA
    /// cuts only when its job-wide symbol table holds two or more).
    hta_step_names: FxHashSet<StrId>,
}

/// What one rank's breakdown keeps while the trace streams.
#[derive(Debug, Default)]
struct RankStream {
    /// Device events in the window's resolution, in trace order.
    events: Vec<DeviceEvent>,
    /// The distinct (device, queue) pairs; [`DeviceEvent::queue`] indexes them.
    queues: Vec<(i64, i64)>,
    queue_index: FxHashMap<(i64, i64), u32>,
    /// [`Window::Whole`]: the start of the first API call of each correlation.
    launch_start: FxHashMap<u64, Ns>,
    /// [`Window::Whole`]: the `ProfilerStep#N` spans of the rank's CPU (start, end, name).
    steps: Vec<(Ns, Ns, StrId)>,
    /// [`Window::Hta`]: the latest start among the rank's spans named like a step, device-side
    /// annotation copies included (HTA's cut-off).
    last_step_start: Option<Ns>,
    /// [`Window::Hta`]: each CPU span with a correlation (start, correlation, is an API call),
    /// in trace order, cut at HTA's cut-off at the end.
    cpu_correlated: Vec<(Ns, u64, bool)>,
}

impl GpuTimeStream {
    /// An empty breakdown for `options`.
    pub fn new(options: GpuTimeOptions) -> Self {
        GpuTimeStream {
            options,
            class_cache: KernelClasses::default(),
            ranks: Vec::new(),
            hta_step_names: FxHashSet::default(),
        }
    }

    /// Reads the spans `trace` holds now (see [`GpuTimeStream`]).
    pub fn add(&mut self, trace: &Trace) {
        let hta = self.options.window == Window::Hta;
        if self.ranks.len() < trace.ranks.len() {
            self.ranks
                .resize_with(trace.ranks.len(), RankStream::default);
        }
        for span in &trace.spans {
            let track = trace.track(span.track);
            match track.kind {
                TrackKind::DeviceQueue { device, queue } => {
                    if !span.level.is_device_op() || queue == -1 {
                        // The device-side copy of a step annotation (`gpu_user_annotation`
                        // `ProfilerStep#N`, which ROCm traces carry): HTA holds it among its
                        // CPU events (it has no stream arg), so its cut-off takes it too.
                        if hta {
                            self.note_hta_step(trace, track.rank, span.name, span.start);
                        }
                        continue;
                    }
                    let rank = &mut self.ranks[track.rank.0 as usize];
                    let class = self.class_cache.of(trace, span.name);
                    let (start, end) = if hta {
                        hta_round(span.start, span.end)
                    } else {
                        (span.start, span.end)
                    };
                    let queue = rank.queue_of(device, queue);
                    rank.events.push(DeviceEvent {
                        start,
                        end,
                        class,
                        activity: activity(span.level, class, trace.str(span.name)),
                        queue,
                        correlation: span.correlation.get().unwrap_or(NO_CORRELATION),
                        has_correlation: span.correlation.is_some(),
                    });
                }
                _ => {
                    if hta {
                        self.note_hta_step(trace, track.rank, span.name, span.start);
                    }
                    let rank = &mut self.ranks[track.rank.0 as usize];
                    if !hta && trace.str(span.name).starts_with("ProfilerStep#") {
                        rank.steps.push((span.start, span.end, span.name));
                    }
                    if let Some(c) = span.correlation.get() {
                        let api = span.level == Level::AcceleratorApi;
                        if hta {
                            rank.cpu_correlated.push((span.start, c, api));
                        } else if api {
                            rank.launch_start.entry(c).or_insert(span.start);
                        }
                    }
                }
            }
        }
    }

    /// [`Window::Hta`]: notes a span named like a step, as HTA does: every event (of the
    /// rank's CPU or a device-side annotation) whose name contains `ProfilerStep` counts
    /// towards the job's distinct step names and the rank's latest step start.
    fn note_hta_step(&mut self, trace: &Trace, rank: RankId, name: StrId, start: Ns) {
        if !trace.str(name).contains("ProfilerStep") {
            return;
        }
        self.hta_step_names.insert(name);
        let rank = &mut self.ranks[rank.0 as usize];
        rank.last_step_start = Some(rank.last_step_start.map_or(start, |l: Ns| l.max(start)));
    }

    /// The breakdown of every rank of `trace` (the trace the streaming import returned: its
    /// ranks, tracks and strings) from what [`GpuTimeStream::add`] kept.
    pub fn finish(mut self, trace: &Trace) -> GpuTimeReport {
        let ranks = (0..trace.ranks.len())
            .map(|r| {
                let kept = self
                    .ranks
                    .get_mut(r)
                    .map(std::mem::take)
                    .unwrap_or_default();
                rank_gpu_time(
                    trace,
                    RankId(r as u32),
                    kept,
                    self.hta_step_names.len(),
                    &self.options,
                )
            })
            .collect();
        GpuTimeReport {
            window: self.options.window,
            ranks,
        }
    }
}

impl RankStream {
    /// The index of `(device, queue)` in [`RankStream::queues`].
    fn queue_of(&mut self, device: i64, queue: i64) -> u32 {
        let next = self.queues.len() as u32;
        let index = *self.queue_index.entry((device, queue)).or_insert(next);
        if index == next {
            self.queues.push((device, queue));
        }
        index
    }
}

fn rank_gpu_time(
    trace: &Trace,
    rank: RankId,
    kept: RankStream,
    step_names: usize,
    options: &GpuTimeOptions,
) -> RankGpuTime {
    let hta = options.window == Window::Hta;
    let RankStream {
        mut events,
        queues,
        mut launch_start,
        steps,
        last_step_start,
        cpu_correlated,
        ..
    } = kept;
    if hta {
        // HTA's cut-off: when the job has two or more distinct step names, the latest start
        // among the rank's step spans (a device-side copy, later than its CPU span, included);
        // CPU events starting at or after it are dropped, and with a cut-off device events
        // are kept only when a kept CPU event has their correlation. Starts are compared as
        // HTA holds them: whole microseconds, rounded up.
        let cutoff = if step_names >= 2 {
            last_step_start.map(|t| hta_round(t, t).0)
        } else {
            None
        };
        let mut kept_correlations: FxHashSet<u64> = FxHashSet::default();
        for (start, c, api) in cpu_correlated {
            if cutoff.is_some_and(|cutoff| hta_round(start, start).0 >= cutoff) {
                continue;
            }
            if api || cutoff.is_some() {
                kept_correlations.insert(c);
            }
            if api {
                launch_start.entry(c).or_insert(hta_round(start, start).0);
            }
        }
        if cutoff.is_some() {
            events.retain(|e| {
                e.correlation()
                    .is_some_and(|c| kept_correlations.contains(&c))
            });
        }
    }
    let info = &trace.ranks[rank.0 as usize];
    let rank_number = info.rank.unwrap_or(i64::from(rank.0));
    let mut result = RankGpuTime {
        rank: rank_number,
        source: info.source.clone(),
        device_events: events.len(),
        window_start_ns: None,
        window_end_ns: None,
        kernel_time_ns: 0,
        idle_ns: 0,
        compute_ns: 0,
        non_compute_ns: 0,
        idle_pct: 100.0,
        compute_pct: 0.0,
        non_compute_pct: 0.0,
        communication_ns: 0,
        comm_comp_overlap_pct: None,
        streams: Vec::new(),
        exposure: (!hta).then(Vec::new),
        note: None,
        unclassified_device_like_events: info
            .notes
            .unclassified_device_like()
            .into_iter()
            .map(|(cat, n)| (cat.to_owned(), n))
            .collect(),
    };
    if events.is_empty() {
        // Never "idle" while events that look like device work went unclassified.
        result.note = Some(if result.unclassified_device_like_events.is_empty() {
            "no device events in the window: the device was idle throughout".into()
        } else {
            "no classified device events in the window: what the device did is unknown, not \
             idle (see the warning)"
                .into()
        });
        return result;
    }
    let all = merge(events.iter().map(|e| (e.start, e.end)));
    let compute = merge(
        events
            .iter()
            .filter(|e| e.class == KernelClass::Computation)
            .map(|e| (e.start, e.end)),
    );
    let communication = merge(
        events
            .iter()
            .filter(|e| e.class == KernelClass::Communication)
            .map(|e| (e.start, e.end)),
    );
    let first = all.first().map_or(0, |i| i.0);
    let last = all.last().map_or(0, |i| i.1);
    let kernel_time = last - first;
    let busy = length(&all);
    let compute_ns = if hta {
        hta_merged_length(
            events
                .iter()
                .filter(|e| e.class == KernelClass::Computation)
                .map(|e| (e.start, e.end)),
        )
    } else {
        length(&compute)
    };
    result.window_start_ns = Some(first);
    result.window_end_ns = Some(last);
    result.kernel_time_ns = kernel_time;
    result.idle_ns = kernel_time - busy;
    result.compute_ns = compute_ns;
    result.non_compute_ns = kernel_time - compute_ns - result.idle_ns;
    if kernel_time > 0 {
        result.idle_pct = 100.0 * result.idle_ns as f64 / kernel_time as f64;
        result.compute_pct = 100.0 * compute_ns as f64 / kernel_time as f64;
        result.non_compute_pct = 100.0 - result.idle_pct - result.compute_pct;
    } else {
        result.note = Some("device events have zero total length".into());
    }
    let comm_ns = length(&communication);
    result.communication_ns = comm_ns;
    if comm_ns > 0 {
        let overlap = intersection_length(&communication, &compute);
        result.comm_comp_overlap_pct = Some(100.0 * overlap as f64 / comm_ns as f64);
    }
    result.streams = stream_idle(
        &events,
        &queues,
        &launch_start,
        options.kernel_wait_threshold_ns,
        hta,
    );
    if !hta {
        result.exposure = Some(device_exposure(
            trace,
            &events,
            &queues,
            &steps,
            &launch_start,
        ));
    }
    result
}

/// The exposure split of `events` clipped to `[from, to)` (see [`Exposure`]).
fn exposure_in(events: &[&DeviceEvent], from: Ns, to: Ns) -> Exposure {
    let of = |wanted: Activity| {
        merge(
            events
                .iter()
                .filter(|e| e.activity == wanted)
                .map(|e| (e.start.max(from), e.end.min(to)))
                .filter(|(s, e)| e > s),
        )
    };
    let compute = of(Activity::Compute);
    let communication = of(Activity::Communication);
    let copy = of(Activity::Copy);
    let compute_or_comm = merge(compute.iter().chain(&communication).copied());
    let hidden = intersection_length(&compute, &communication);
    let copy_beside = intersection_length(&copy, &compute_or_comm);
    let compute_alone_ns = length(&compute) - hidden;
    let exposed_communication_ns = length(&communication) - hidden;
    let exposed_copy_ns = length(&copy) - copy_beside;
    let window = (to - from).max(0);
    Exposure {
        window_start_ns: from,
        window_end_ns: from + window,
        compute_alone_ns,
        compute_with_communication_ns: hidden,
        exposed_communication_ns,
        exposed_copy_ns,
        idle_ns: window - compute_alone_ns - hidden - exposed_communication_ns - exposed_copy_ns,
    }
}

/// Exposure per device that ran work, whole and per step (see the module docs).
fn device_exposure(
    trace: &Trace,
    events: &[DeviceEvent],
    queues: &[(i64, i64)],
    steps: &[(Ns, Ns, StrId)],
    launch_start: &FxHashMap<u64, Ns>,
) -> Vec<DeviceExposure> {
    let mut by_device: std::collections::BTreeMap<i64, Vec<&DeviceEvent>> = Default::default();
    for e in events {
        by_device
            .entry(queues[e.queue as usize].0)
            .or_default()
            .push(e);
    }
    let mut steps = steps.to_vec();
    steps.sort_unstable();
    // The latest end among steps[..=i]: the backward search below stops where no earlier step
    // can still hold `ts`, so a launch outside every step costs O(log n), not a scan of all
    // earlier steps (which made the analysis quadratic in the steps).
    let ends_so_far = running_max_end(steps.iter().map(|s| s.1));
    // The step whose CPU span holds `ts` (the latest-starting one when steps nest or overlap).
    let step_of = |ts: Ns| -> Option<usize> {
        let after = steps.partition_point(|s| s.0 <= ts);
        (0..after)
            .rev()
            .take_while(|&i| ends_so_far[i] > ts)
            .find(|&i| steps[i].1 > ts)
    };
    by_device
        .into_iter()
        .filter(|(_, list)| list.iter().any(|e| e.activity != Activity::Nothing))
        .map(|(device, mut list)| {
            // Sorted by start, with the running latest end, so that each step's window reads
            // only the events that can reach it (`overlapping`), not every event of the device.
            list.sort_by_key(|e| e.start);
            let list_ends = running_max_end(list.iter().map(|e| e.end));
            let from = list.iter().map(|e| e.start).min().unwrap_or(0);
            let to = list.iter().map(|e| e.end).max().unwrap_or(from);
            // Per step: the first start and last end of the device events launched in it.
            let mut spans: FxHashMap<usize, (Ns, Ns)> = FxHashMap::default();
            for e in &list {
                let step = e
                    .correlation()
                    .and_then(|c| launch_start.get(&c))
                    .and_then(|&ts| step_of(ts));
                if let Some(step) = step {
                    let span = spans.entry(step).or_insert((e.start, e.end));
                    span.0 = span.0.min(e.start);
                    span.1 = span.1.max(e.end);
                }
            }
            let mut firsts: Vec<(Ns, usize, Ns)> =
                spans.into_iter().map(|(i, (s, e))| (s, i, e)).collect();
            firsts.sort_unstable();
            let step_exposure = firsts
                .iter()
                .enumerate()
                .map(|(k, &(start, step, last_end))| {
                    let end = firsts.get(k + 1).map_or(last_end, |next| next.0);
                    StepExposure {
                        step: trace.str(steps[step].2).to_owned(),
                        exposure: exposure_in(
                            overlapping(&list, &list_ends, start, end),
                            start,
                            end,
                        ),
                    }
                })
                .collect();
            DeviceExposure {
                device,
                exposure: exposure_in(&list, from, to),
                steps: step_exposure,
            }
        })
        .collect()
}

/// The running maximum of `ends`: element `i` is the latest end among the first `i + 1`.
fn running_max_end(ends: impl Iterator<Item = Ns>) -> Vec<Ns> {
    ends.scan(Ns::MIN, |latest, end| {
        *latest = (*latest).max(end);
        Some(*latest)
    })
    .collect()
}

/// The slice of `events` (sorted by start; `ends` = [`running_max_end`] of their ends) that
/// holds every event overlapping `[from, to)`: from the first event whose running latest end
/// passes `from` to the last one starting before `to`. Events in it that do not overlap are
/// clipped away by the caller ([`exposure_in`] drops empty intervals), so the result is the
/// same as with every event, at the cost of the window's events only.
fn overlapping<'e, 'd>(
    events: &'e [&'d DeviceEvent],
    ends: &[Ns],
    from: Ns,
    to: Ns,
) -> &'e [&'d DeviceEvent] {
    let lo = ends.partition_point(|&end| end <= from);
    let hi = events.partition_point(|e| e.start < to);
    &events[lo..hi.max(lo)]
}

/// A microsecond time as HTA holds it: the decimal text parsed into an `f64` (at epoch
/// magnitudes the spacing of `f64` is 0.25 us, so this is not the exact value).
fn hta_us(ns: Ns) -> f64 {
    ns.div_euclid(1000) as f64 + ns.rem_euclid(1000) as f64 / 1000.0
}

/// HTA's rounding of an event to whole microseconds: start = ceil(ts), end = floor(ts + dur),
/// with `ts` and `dur` as `f64` microseconds. Returned in ns (multiples of 1000).
pub fn hta_round(start: Ns, end: Ns) -> (Ns, Ns) {
    let ts = hta_us(start);
    let dur = (end - start) as f64 / 1000.0;
    (
        (ts.ceil() as i64) * 1000,
        ((ts + dur).floor() as i64) * 1000,
    )
}

/// Idle gaps per stream (see the module docs for overlaps; `hta` keeps HTA's arithmetic).
fn stream_idle(
    events: &[DeviceEvent],
    queues: &[(i64, i64)],
    launch_start: &FxHashMap<u64, Ns>,
    threshold: Ns,
    hta: bool,
) -> Vec<StreamIdle> {
    let mut by_stream: FxHashMap<(i64, i64), Vec<&DeviceEvent>> = FxHashMap::default();
    for e in events {
        by_stream
            .entry(queues[e.queue as usize])
            .or_default()
            .push(e);
    }
    let mut out: Vec<StreamIdle> = by_stream
        .into_iter()
        .map(|((device, stream), mut list)| {
            list.sort_by_key(|e| e.start);
            let mut idle = StreamIdle {
                device,
                stream,
                events: list.len(),
                host_wait_ns: 0,
                kernel_wait_ns: 0,
                other_ns: 0,
                overlapping_events: 0,
            };
            let mut busy_until = list.first().map_or(0, |e| e.end);
            for pair in list.windows(2) {
                let (prev, cur) = (pair[0], pair[1]);
                if cur.start < busy_until {
                    idle.overlapping_events += 1;
                }
                // HTA: the previous event's end, whatever it overlaps; ours: the latest end.
                let prev_end = if hta { prev.end } else { busy_until };
                busy_until = busy_until.max(cur.end);
                let gap = cur.start - prev_end;
                if !hta && gap <= 0 {
                    continue;
                }
                let launched = cur
                    .correlation()
                    .and_then(|c| launch_start.get(&c))
                    .copied();
                if launched.is_some_and(|l| l > prev_end) {
                    idle.host_wait_ns = idle.host_wait_ns.saturating_add(gap);
                } else if gap < threshold {
                    idle.kernel_wait_ns = idle.kernel_wait_ns.saturating_add(gap);
                } else {
                    idle.other_ns = idle.other_ns.saturating_add(gap);
                }
            }
            idle
        })
        .collect();
    out.sort_by_key(|s| (s.device, s.stream));
    out
}

/// HTA's merged length of kernel intervals (`merge_kernel_intervals`, then the sum of end -
/// start): sorted by start, a kernel joins the group before it unless it starts after every
/// earlier kernel's end; a group's length is its latest end - its earliest start. Unlike
/// [`merge`], a kernel that HTA's rounding left with its end before its start (a sub-us
/// kernel: start rounded up, end down) is kept as it is, so a group of it alone counts
/// negative, as in HTA.
fn hta_merged_length(intervals: impl Iterator<Item = (Ns, Ns)>) -> Ns {
    let mut list: Vec<(Ns, Ns)> = intervals.collect();
    list.sort_by_key(|i| i.0);
    let mut total: Ns = 0;
    let mut group: Option<(Ns, Ns)> = None;
    let mut latest_end = Ns::MIN;
    for (start, end) in list {
        match group.as_mut() {
            Some(g) if start <= latest_end => g.1 = g.1.max(end),
            _ => {
                if let Some((s, e)) = group {
                    total = total.saturating_add(e - s);
                }
                group = Some((start, end));
            }
        }
        latest_end = latest_end.max(end);
    }
    if let Some((s, e)) = group {
        total = total.saturating_add(e - s);
    }
    total
}

/// Sorted, disjoint union of intervals (touching intervals are joined).
pub fn merge(intervals: impl Iterator<Item = (Ns, Ns)>) -> Vec<(Ns, Ns)> {
    let mut list: Vec<(Ns, Ns)> = intervals.collect();
    list.sort_unstable();
    let mut out: Vec<(Ns, Ns)> = Vec::with_capacity(list.len());
    for (start, end) in list {
        match out.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => out.push((start, end.max(start))),
        }
    }
    out
}

/// Total length of disjoint intervals.
pub fn length(intervals: &[(Ns, Ns)]) -> Ns {
    intervals.iter().map(|(s, e)| e - s).sum()
}

/// Length of the intersection of two sorted disjoint interval lists. Each list is entered
/// where the other begins (binary search), so one interval against a long list costs what it
/// overlaps.
pub fn intersection_length(a: &[(Ns, Ns)], b: &[(Ns, Ns)]) -> Ns {
    let (Some(&(a0, _)), Some(&(b0, _))) = (a.first(), b.first()) else {
        return 0;
    };
    let mut i = a.partition_point(|x| x.1 <= b0);
    let mut j = b.partition_point(|x| x.1 <= a0);
    let mut total = 0;
    while i < a.len() && j < b.len() {
        let lo = a[i].0.max(b[j].0);
        let hi = a[i].1.min(b[j].1);
        if hi > lo {
            total += hi - lo;
        }
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use strato_trace::testing::{rank, TraceBuilder};

    fn trace_with(events: &[(&str, i64, Ns, Ns, Option<u64>)], launches: &[(u64, Ns)]) -> Trace {
        let mut b = TraceBuilder::new();
        b.rank(rank(Some(0), "synthetic"));
        let cpu = b.thread(1, 1);
        for &(c, start) in launches {
            b.span(
                cpu,
                Level::AcceleratorApi,
                "cudaLaunchKernel",
                start,
                start + 1,
            )
            .correlation(c);
        }
        for &(name, stream, start, end, corr) in events {
            let queue = b.queue(0, stream);
            let span = b.span(queue, Level::DeviceKernel, name, start, end);
            if let Some(c) = corr {
                span.correlation(c);
            }
        }
        b.build()
    }

    /// HTA's cut-off takes the device-side copy of the last step (later than its CPU span),
    /// and needs two distinct step names, not two step spans.
    #[test]
    fn hta_cut_off_is_the_later_of_a_steps_cpu_span_and_its_device_copy() {
        const US: Ns = 1_000;
        let build = |names: [&str; 2]| {
            let mut b = TraceBuilder::new();
            b.rank(rank(Some(0), "rocm"));
            let cpu = b.thread(1, 1);
            let gpu = b.queue(0, 0);
            b.span(cpu, Level::Operation, names[0], 0, 100 * US);
            b.span(cpu, Level::Operation, names[1], 100 * US, 200 * US);
            // The device copies of the steps, on the GPU timeline (`gpu_user_annotation`).
            b.span(gpu, Level::Operation, names[0], 20 * US, 120 * US);
            b.span(gpu, Level::Operation, names[1], 150 * US, 250 * US);
            // Launches at 10, 110 (after the CPU step's start, before its copy's) and 160 us.
            for (c, at) in [(1u64, 10 * US), (2, 110 * US), (3, 160 * US)] {
                b.span(cpu, Level::AcceleratorApi, "hipLaunchKernel", at, at + US)
                    .correlation(c);
                b.span(gpu, Level::DeviceKernel, "gemm", at + 40 * US, at + 50 * US)
                    .correlation(c);
            }
            b.build()
        };
        let hta = GpuTimeOptions {
            window: Window::Hta,
            ..Default::default()
        };
        // Cut-off 150 us (the copy of step #2): kernels 1 and 2 are kept, not 3.
        let r = &gpu_time(&build(["ProfilerStep#1", "ProfilerStep#2"]), &hta).ranks[0];
        assert_eq!(r.device_events, 2);
        assert_eq!(r.kernel_time_ns, 110 * US, "[50, 60) to [150, 160)");
        // One step name (two spans of it): no cut-off, every kernel.
        let r = &gpu_time(&build(["ProfilerStep#1", "ProfilerStep#1"]), &hta).ranks[0];
        assert_eq!(r.device_events, 3);
    }

    #[test]
    fn breakdown_known_by_construction() {
        // Stream 7: gemm [0,100), Memcpy [150,200), gemm [300,400).
        // Stream 8: ncclKernel [50,350) overlapping compute [50,100) and [300,350).
        let t = trace_with(
            &[
                ("gemm", 7, 0, 100, Some(1)),
                ("Memcpy HtoD (Pageable -> Device)", 7, 150, 200, Some(2)),
                ("gemm", 7, 300, 400, Some(3)),
                ("ncclKernel_AllReduce", 8, 50, 350, Some(4)),
            ],
            &[(1, 0), (2, 10), (3, 250)],
        );
        let report = gpu_time(&t, &GpuTimeOptions::default());
        let r = &report.ranks[0];
        assert_eq!(r.kernel_time_ns, 400);
        assert_eq!(r.idle_ns, 0);
        assert_eq!(r.compute_ns, 200);
        assert_eq!(r.non_compute_ns, 200);
        assert_eq!(
            r.idle_ns + r.compute_ns + r.non_compute_ns,
            r.kernel_time_ns
        );
        assert!((r.idle_pct + r.compute_pct + r.non_compute_pct - 100.0).abs() < 1e-9);
        assert_eq!(r.communication_ns, 300);
        assert!((r.comm_comp_overlap_pct.unwrap() - 100.0 / 3.0).abs() < 1e-9);
        let s7 = &r.streams[0];
        assert_eq!((s7.stream, s7.events), (7, 3));
        // Gap 100->150: launch of corr 2 at 10 < 100: kernel wait (50 ns < 30 us).
        // Gap 200->300: launch of corr 3 at 250 > 200: host wait.
        assert_eq!(
            (s7.host_wait_ns, s7.kernel_wait_ns, s7.other_ns),
            (100, 50, 0)
        );
    }

    #[test]
    fn overlapping_kernels_never_give_a_negative_wait() {
        // One stream, in whole microseconds (HTA rounds to them): a [0,1000) us, b [100,200)
        // us inside it, c [1500,1600) us, and c again (duplicated event). Union 1100 us of a
        // window of 1600 us: 500 us of gaps.
        const US: Ns = 1000;
        let events = [
            ("a", 7, 0, 1000 * US, None),
            ("b", 7, 100 * US, 200 * US, None),
            ("c", 7, 1500 * US, 1600 * US, None),
            ("c", 7, 1500 * US, 1600 * US, None),
        ];
        let t = trace_with(&events, &[]);
        let r = &gpu_time(&t, &GpuTimeOptions::default()).ranks[0];
        let s = &r.streams[0];
        assert_eq!(s.overlapping_events, 2);
        assert!(s.host_wait_ns >= 0 && s.kernel_wait_ns >= 0 && s.other_ns >= 0);
        // Parts add up to the stream's window minus its busy union.
        assert_eq!(s.host_wait_ns + s.kernel_wait_ns + s.other_ns, 500 * US);
        assert_eq!(s.other_ns, 500 * US);
        // HTA's arithmetic: previous event's end, negative gaps included (b after a:
        // 100 - 1000 = -900; c after b: 1500 - 200 = 1300; c after c: 1500 - 1600 = -100).
        let hta = &gpu_time(
            &t,
            &GpuTimeOptions {
                window: Window::Hta,
                ..Default::default()
            },
        )
        .ranks[0];
        let h = &hta.streams[0];
        assert_eq!(h.overlapping_events, 2);
        assert_eq!(
            h.kernel_wait_ns + h.other_ns + h.host_wait_ns,
            (-900 + 1300 - 100) * US
        );
    }

    #[test]
    fn no_device_events_is_all_idle_not_a_crash() {
        let t = trace_with(&[], &[(1, 0)]);
        let r = &gpu_time(
            &t,
            &GpuTimeOptions {
                window: Window::Hta,
                ..Default::default()
            },
        )
        .ranks[0];
        assert_eq!(r.device_events, 0);
        assert_eq!(r.idle_pct + r.compute_pct + r.non_compute_pct, 100.0);
        assert!(r.note.is_some());
    }

    #[test]
    fn hta_rounding_and_classes() {
        let t = trace_with(
            &[("k", 7, 1_500, 3_700, None), ("k", 7, 4_000, 4_999, None)],
            &[],
        );
        let r = &gpu_time(
            &t,
            &GpuTimeOptions {
                window: Window::Hta,
                ..Default::default()
            },
        )
        .ranks[0];
        // [2000, 3000) and [4000, 4000): window 2000..4000, busy 1000.
        assert_eq!(
            hta_round(1_712_195_495_505_543_100, 1_712_195_495_505_545_000).0,
            1_712_195_495_505_543_000
        );
        assert_eq!(r.kernel_time_ns, 2_000);
        assert_eq!(r.idle_ns, 1_000);
        assert_eq!(
            kernel_class("ncclKernel_AllGather_RING"),
            KernelClass::Communication
        );
        assert_eq!(kernel_class("Memset (Device)"), KernelClass::Memory);
        assert_eq!(
            kernel_class("void at::native::reduce_kernel"),
            KernelClass::Computation
        );
        assert_eq!(kernel_class("Event Sync"), KernelClass::Other);
    }

    #[test]
    fn exposure_known_by_construction_whole_and_per_step() {
        // Device 0: gemm [0,100) and [300,400) on stream 7; nccl [50,350) on stream 8;
        // Memcpy [380,450) and [500,520); a sync marker [600,700) (idle); window 0..700.
        // Compute alone: [0,50) + [350,400) = 100; compute + comm: [50,100) + [300,350) = 100;
        // exposed comm: [100,300) = 200; exposed copy: [400,450) + [500,520) = 70; idle: 230.
        let mut b = TraceBuilder::new();
        b.rank(rank(Some(0), "synthetic"));
        let cpu = b.thread(1, 1);
        b.span(cpu, Level::Operation, "ProfilerStep#1", 0, 200);
        b.span(cpu, Level::Operation, "ProfilerStep#2", 200, 400);
        for (c, start) in [(1, 0), (2, 10), (3, 20), (4, 250), (5, 260), (6, 270)] {
            b.span(
                cpu,
                Level::AcceleratorApi,
                "cudaLaunchKernel",
                start,
                start + 1,
            )
            .correlation(c);
        }
        let s7 = b.queue(0, 7);
        let s8 = b.queue(0, 8);
        b.span(s7, Level::DeviceKernel, "gemm", 0, 100)
            .correlation(1);
        b.span(s8, Level::DeviceKernel, "ncclKernel_AllReduce", 50, 350)
            .correlation(2);
        b.span(s7, Level::DeviceKernel, "gemm", 300, 400)
            .correlation(4);
        b.span(
            s7,
            Level::DeviceCopy,
            "Memcpy DtoH (Device -> Pinned)",
            380,
            450,
        )
        .correlation(5);
        b.span(
            s7,
            Level::DeviceCopy,
            "Memcpy DtoH (Device -> Pinned)",
            500,
            520,
        )
        .correlation(6);
        b.span(s7, Level::DeviceSync, "Event Sync", 600, 700)
            .correlation(3);
        // Device 1 only lists a sync marker: it ran no work and is not a device here.
        let other = b.queue(1, 7);
        b.span(other, Level::DeviceSync, "Event Sync", 0, 10);
        let r = &gpu_time(&b.build(), &GpuTimeOptions::default()).ranks[0];
        let devices = r.exposure.as_ref().unwrap();
        assert_eq!(devices.len(), 1);
        let d = &devices[0];
        let want = Exposure {
            window_start_ns: 0,
            window_end_ns: 700,
            compute_alone_ns: 100,
            compute_with_communication_ns: 100,
            exposed_communication_ns: 200,
            exposed_copy_ns: 70,
            idle_ns: 230,
        };
        assert_eq!(d.exposure, want);
        // Step 1 launched gemm@0, nccl@50 and the sync@600 -> first device start 0; step 2
        // launched gemm@300, copies@380,500 -> first start 300, last end 520. Step 1's window
        // is [0,300), step 2's [300,520).
        let steps: Vec<(&str, Exposure)> = d
            .steps
            .iter()
            .map(|s| (s.step.as_str(), s.exposure))
            .collect();
        assert_eq!(
            steps,
            vec![
                (
                    "ProfilerStep#1",
                    Exposure {
                        window_start_ns: 0,
                        window_end_ns: 300,
                        compute_alone_ns: 50,
                        compute_with_communication_ns: 50,
                        exposed_communication_ns: 200,
                        exposed_copy_ns: 0,
                        idle_ns: 0,
                    }
                ),
                (
                    "ProfilerStep#2",
                    Exposure {
                        window_start_ns: 300,
                        window_end_ns: 520,
                        compute_alone_ns: 50,
                        compute_with_communication_ns: 50,
                        exposed_communication_ns: 0,
                        exposed_copy_ns: 70,
                        idle_ns: 50,
                    }
                ),
            ]
        );
        // The HTA window keeps HTA's output: no exposure.
        let t = trace_with(&[("gemm", 7, 0, 10, None)], &[]);
        let hta = GpuTimeOptions {
            window: Window::Hta,
            ..Default::default()
        };
        assert!(gpu_time(&t, &hta).ranks[0].exposure.is_none());
    }

    #[test]
    fn interval_helpers() {
        let m = merge([(5, 10), (0, 3), (3, 4), (8, 12)].into_iter());
        assert_eq!(m, vec![(0, 4), (5, 12)]);
        assert_eq!(length(&m), 11);
        assert_eq!(intersection_length(&m, &[(2, 6), (11, 20)]), 4);
    }
}
