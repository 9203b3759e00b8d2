//! What the layer records and the state it keeps: collection level, API spans, queues and their
//! pending commands, devices, kernels' names, device memory in use, the clock pairs, and the
//! end-of-run summary.
//!
//! Device activity: every enqueue on a queue gets an event (the application's, retained, or one
//! the layer asks for and owns). The events wait in their queue's pending list, in enqueue
//! order, and are **drained** at sync points: after `clFinish`, `clWaitForEvents` and blocking
//! enqueues (completed prefix), every [`POLL_EVERY`] enqueues on a queue (completed prefix, no
//! blocking), at the last `clReleaseCommandQueue` of a queue and at process exit (waiting). A
//! drained command's QUEUED/SUBMIT/START/END are read, the layer's reference is released, the
//! device stamps are converted to CLOCK_MONOTONIC by interpolating between the clock pairs
//! around them (`clock.rs`), and a span goes onto the queue's track with the correlation id of
//! the enqueue's API span.

use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use strato_record::{self as rec, Level, StrRef, TrackRef};

use crate::cl;
use crate::clock::{self, BracketBounds, Pair};
use crate::generated::{NAMES, N_ENTRIES, P};

/// Drain a queue's completed prefix every this many enqueues on it.
pub const POLL_EVERY: usize = 64;

/// What the layer collects (`STRATOSCOPE_OPENCL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CollectLevel {
    /// Pass-through: the layer installs nothing (the loader calls the runtime directly).
    Off,
    /// API calls (spans with arguments), device memory in use.
    Api,
    /// Device commands only (profiling enabled, events drained), no API spans.
    Device,
    /// Everything.
    Full,
}

impl CollectLevel {
    /// Parses `off|api|device|full` (also `0..3`).
    pub fn parse(text: &str) -> Option<CollectLevel> {
        match text.trim().to_ascii_lowercase().as_str() {
            "off" | "0" | "none" => Some(CollectLevel::Off),
            "api" | "1" => Some(CollectLevel::Api),
            "device" | "2" => Some(CollectLevel::Device),
            "full" | "3" | "" => Some(CollectLevel::Full),
            _ => None,
        }
    }

    /// From the environment: `STRATOSCOPE_OPENCL` (default `full`); `STRATOSCOPE_LEVEL=0` (the
    /// uninstrumented baseline of the Python recorder) turns the layer off too.
    pub fn from_env() -> CollectLevel {
        if std::env::var("STRATOSCOPE_LEVEL").is_ok_and(|v| v.trim() == "0") {
            return CollectLevel::Off;
        }
        std::env::var("STRATOSCOPE_OPENCL")
            .ok()
            .and_then(|v| CollectLevel::parse(&v))
            .unwrap_or(CollectLevel::Full)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            CollectLevel::Off => "off",
            CollectLevel::Api => "api",
            CollectLevel::Device => "device",
            CollectLevel::Full => "full",
        }
    }

    pub fn api(self) -> bool {
        matches!(self, CollectLevel::Api | CollectLevel::Full)
    }

    pub fn device(self) -> bool {
        matches!(self, CollectLevel::Device | CollectLevel::Full)
    }
}

/// Direction of a copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    HtoD,
    DtoH,
    DtoD,
    Unknown,
}

impl Dir {
    pub fn label(self) -> &'static str {
        match self {
            Dir::HtoD => "HtoD",
            Dir::DtoH => "DtoH",
            Dir::DtoD => "DtoD",
            Dir::Unknown => "?",
        }
    }
}

/// What a device command is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Kernel,
    Copy(Dir),
    Fill,
    Sync,
}

/// A command waiting for its device timestamps.
#[derive(Debug)]
struct Pending {
    event: usize,
    corr: u64,
    kind: Kind,
    name: StrRef,
    args: String,
    bytes: u64,
    api_begin: i64,
    api_end: i64,
}

#[derive(Debug)]
struct QueueState {
    id: i64,
    device: i64,
    track: Option<TrackRef>,
    out_of_order: bool,
    /// The application asked for CL_QUEUE_PROFILING_ENABLE itself.
    app_profiling: bool,
    pending: VecDeque<Pending>,
    enqueued: usize,
    /// (start, end) of the previous drained command (in-order check).
    last: Option<(i64, i64)>,
}

#[derive(Debug, Default)]
struct Stats {
    device_commands: u64,
    no_profile: u64,
    causality_violations: u64,
    order_violations: u64,
    queued_outside_call: u64,
    min_start_minus_api_begin: Option<i64>,
    max_queued_residual: i64,
    bounds: BracketBounds,
    layer_events_created: u64,
    layer_events_released: u64,
}

#[derive(Debug, Default)]
struct State {
    queues: HashMap<usize, QueueState>,
    next_queue: i64,
    devices: HashMap<usize, i64>,
    contexts: HashMap<usize, i64>,
    kernels: HashMap<usize, StrRef>,
    /// Memory objects the layer counts: handle -> (bytes, device, the layer's id for it).
    mems: HashMap<usize, (i64, i64, u64)>,
    /// The id the next memory object gets (a handle can be reused once its object is gone).
    next_mem: u64,
    in_use: HashMap<i64, i64>,
    pairs: Vec<Pair>,
    stats: Stats,
}

/// The layer's global state.
#[derive(Debug)]
pub struct Layer {
    pub level: CollectLevel,
    names: Vec<StrRef>,
    pub cat_api: StrRef,
    cat_kernel: StrRef,
    cat_copy: StrRef,
    cat_fill: StrRef,
    cat_sync: StrRef,
    corr: AtomicU64,
    state: Mutex<State>,
    finished: AtomicBool,
}

static LAYER: OnceLock<Layer> = OnceLock::new();

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The running layer (None before `clInitLayer`, at level `off`, or when recording failed).
#[inline]
pub fn layer() -> Option<&'static Layer> {
    LAYER.get().filter(|l| !l.finished.load(Ordering::Relaxed))
}

fn json_str(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

/// Starts recording into `$STRATOSCOPE_OUT` (default `strato-profile`) as component `opencl`.
pub fn init(level: CollectLevel) -> Result<(), rec::RecordError> {
    if level == CollectLevel::Off || LAYER.get().is_some() {
        return Ok(());
    }
    let dir = std::env::var_os("STRATOSCOPE_OUT")
        .map(Into::into)
        .unwrap_or_else(|| "strato-profile".into());
    let argv: Vec<String> = std::env::args().collect();
    let argv_json = serde_json::to_string(&argv).unwrap_or_else(|_| "[]".into());
    rec::start(rec::Config {
        dir,
        component: "opencl".into(),
        argv_json,
        ..Default::default()
    })?;
    let mut state = State::default();
    state.pairs.push(clock::sample_round());
    let layer = Layer {
        level,
        names: NAMES.iter().map(|n| rec::intern(n)).collect(),
        cat_api: rec::intern("opencl"),
        cat_kernel: rec::intern("opencl_kernel"),
        cat_copy: rec::intern("opencl_copy"),
        cat_fill: rec::intern("opencl_fill"),
        cat_sync: rec::intern("opencl_sync"),
        corr: AtomicU64::new(1),
        state: Mutex::new(state),
        finished: AtomicBool::new(false),
    };
    rec::metadata(
        "opencl_layer",
        &format!(
            "{{\"level\":{},\"version\":{}}}",
            json_str(level.as_str()),
            json_str(env!("CARGO_PKG_VERSION"))
        ),
    );
    let _ = LAYER.set(layer);
    Ok(())
}

/// Start of an API call (0 when API spans are off).
#[inline]
pub fn api_begin() -> i64 {
    match layer() {
        Some(l) if l.level.api() => rec::now_ns(),
        _ => 0,
    }
}

/// End of an API call: a span on the calling thread's track.
#[inline]
pub fn api_end(entry: usize, t0: i64) {
    if let Some(l) = layer() {
        if l.level.api() {
            l.api_span(entry, t0, rec::now_ns(), None, None);
        }
    }
}

impl Layer {
    /// The name of dispatch entry `entry`.
    pub fn name(&self, entry: usize) -> StrRef {
        self.names.get(entry).copied().unwrap_or_default()
    }

    /// An API span `[t0, t1)` on the calling thread.
    pub fn api_span(&self, entry: usize, t0: i64, t1: i64, corr: Option<u64>, args: Option<&str>) {
        if let Some(track) = rec::thread_track() {
            rec::span(
                track,
                t0,
                t1,
                Level::AcceleratorApi,
                self.cat_api,
                self.name(entry),
                corr,
                args,
            );
        }
    }

    pub fn next_corr(&self) -> u64 {
        self.corr.fetch_add(1, Ordering::Relaxed)
    }

    /// Index of a device (registering it and its properties on first sight).
    fn device_index(st: &mut State, dev: usize) -> i64 {
        if let Some(&i) = st.devices.get(&dev) {
            return i;
        }
        let i = st.devices.len() as i64;
        st.devices.insert(dev, i);
        let d = dev as P;
        let name =
            cl::device_string(d, cl::CL_DEVICE_NAME).unwrap_or_else(|| "OpenCL device".into());
        let mut props = String::from("{");
        let _ = write!(
            props,
            "\"vendor\":{},\"platform\":{},\"version\":{},\"compute_units\":{},\"max_clock_mhz\":{},\"global_mem_bytes\":{},\"total_memory_bytes\":{},\"profiling_timer_resolution_ns\":{},\"timestamp_clock\":\"CLOCK_MONOTONIC_RAW\"}}",
            json_str(&cl::device_string(d, cl::CL_DEVICE_VENDOR).unwrap_or_default()),
            json_str(&cl::device_platform_name(d).unwrap_or_default()),
            json_str(&cl::device_string(d, cl::CL_DEVICE_VERSION).unwrap_or_default()),
            cl::device_u32(d, cl::CL_DEVICE_MAX_COMPUTE_UNITS).unwrap_or(0),
            cl::device_u32(d, cl::CL_DEVICE_MAX_CLOCK_FREQUENCY).unwrap_or(0),
            cl::device_u64(d, cl::CL_DEVICE_GLOBAL_MEM_SIZE).unwrap_or(0),
            cl::device_u64(d, cl::CL_DEVICE_GLOBAL_MEM_SIZE).unwrap_or(0),
            cl::device_u64(d, cl::CL_DEVICE_PROFILING_TIMER_RESOLUTION).unwrap_or(0),
        );
        rec::device(i, &name, &props);
        i
    }

    /// A queue the application created (`app_props`: the properties it asked for).
    pub fn add_queue(&self, queue: P, device: P, app_props: u64) {
        let mut st = lock(&self.state);
        let dev = Self::device_index(&mut st, device as usize);
        let id = st.next_queue;
        st.next_queue += 1;
        let out_of_order = app_props & cl::CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE != 0;
        let track = if self.level.device() {
            rec::queue_track(dev, id, &format!("OpenCL queue {id}"))
        } else {
            None
        };
        st.queues.insert(
            queue as usize,
            QueueState {
                id,
                device: dev,
                track,
                out_of_order,
                app_profiling: app_props & cl::CL_QUEUE_PROFILING_ENABLE != 0,
                pending: VecDeque::new(),
                enqueued: 0,
                last: None,
            },
        );
    }

    /// The queue's id (registering a queue the layer did not see created: `-1` if unknown).
    pub fn queue_id(&self, queue: P) -> i64 {
        let known = lock(&self.state)
            .queues
            .get(&(queue as usize))
            .map(|q| q.id);
        match known {
            Some(id) => id,
            None => {
                let dev = cl::queue_device(queue).unwrap_or(0);
                let props = cl::queue_properties(queue).unwrap_or(0);
                self.add_queue(queue, dev as P, props);
                lock(&self.state)
                    .queues
                    .get(&(queue as usize))
                    .map_or(-1, |q| q.id)
            }
        }
    }

    /// Whether the application asked for profiling on `queue` (None: unknown queue).
    pub fn app_profiling(&self, queue: P) -> Option<bool> {
        lock(&self.state)
            .queues
            .get(&(queue as usize))
            .map(|q| q.app_profiling)
    }

    /// Device index of a context's (first) device.
    fn context_device(&self, ctx: P) -> i64 {
        let mut st = lock(&self.state);
        if let Some(&d) = st.contexts.get(&(ctx as usize)) {
            return d;
        }
        let d = match cl::context_first_device(ctx) {
            Some(dev) => Self::device_index(&mut st, dev),
            None => 0,
        };
        st.contexts.insert(ctx as usize, d);
        d
    }

    /// A buffer (or other memory object) was created: device memory in use goes up. Returns
    /// (bytes, device, the layer's id for the object: [`Layer::mem_destroyed`] takes it).
    pub fn mem_created(&self, ctx: P, mem: P, ts: i64) -> Option<(i64, i64, u64)> {
        if mem.is_null() || cl::mem_parent(mem).is_some_and(|p| p != 0) {
            return None; // sub-buffers allocate nothing
        }
        let bytes = cl::mem_size(mem).unwrap_or(0) as i64;
        let dev = self.context_device(ctx);
        let (total, id) = {
            let mut st = lock(&self.state);
            let id = st.next_mem;
            st.next_mem += 1;
            st.mems.insert(mem as usize, (bytes, dev, id));
            let t = st.in_use.entry(dev).or_insert(0);
            *t += bytes;
            (*t, id)
        };
        if let Some(track) = rec::counter_track("memory allocated", "bytes", dev) {
            rec::counter(track, ts, total as f64);
        }
        Some((bytes, dev, id))
    }

    /// The implementation destroyed memory object `mem` (its destructor callback, registered
    /// at creation with the layer's `id`): counted as freed now unless its release was.
    /// An application's last `clReleaseMemObject` is not always the last reference: the
    /// implementation may still hold one for a command it has not cleaned up yet, and then
    /// frees the object later.
    pub fn mem_destroyed(&self, mem: P, id: u64, ts: i64) {
        let (total, dev) = {
            let mut st = lock(&self.state);
            // The handle may name a newer object by now: only the object registered goes.
            if st.mems.get(&(mem as usize)).is_none_or(|m| m.2 != id) {
                return;
            }
            let Some((bytes, dev, _)) = st.mems.remove(&(mem as usize)) else {
                return;
            };
            let t = st.in_use.entry(dev).or_insert(0);
            *t -= bytes;
            (*t, dev)
        };
        if let Some(track) = rec::counter_track("memory allocated", "bytes", dev) {
            rec::counter(track, ts, total as f64);
        }
    }

    /// A memory object is about to get its last release: device memory in use goes down.
    pub fn mem_released(&self, mem: P, ts: i64) -> Option<i64> {
        if cl::mem_refcount(mem) != Some(1) {
            return None;
        }
        let (bytes, total, dev) = {
            let mut st = lock(&self.state);
            let (bytes, dev, _) = st.mems.remove(&(mem as usize))?;
            let t = st.in_use.entry(dev).or_insert(0);
            *t -= bytes;
            (bytes, *t, dev)
        };
        if let Some(track) = rec::counter_track("memory allocated", "bytes", dev) {
            rec::counter(track, ts, total as f64);
        }
        Some(bytes)
    }

    /// Size of a memory object the layer knows.
    pub fn mem_bytes(&self, mem: P) -> u64 {
        let known = lock(&self.state).mems.get(&(mem as usize)).map(|m| m.0);
        known.map_or_else(|| cl::mem_size(mem).unwrap_or(0), |b| b as u64)
    }

    pub fn kernel_created(&self, kernel: P, name: &str) {
        if !kernel.is_null() {
            let n = rec::intern(name);
            lock(&self.state).kernels.insert(kernel as usize, n);
        }
    }

    /// (interned name, text) of a kernel.
    pub fn kernel_name(&self, kernel: P) -> StrRef {
        let known = lock(&self.state).kernels.get(&(kernel as usize)).copied();
        known.unwrap_or_else(|| {
            let name = cl::kernel_name(kernel).unwrap_or_else(|| "kernel".into());
            self.kernel_created(kernel, &name);
            rec::intern(&name)
        })
    }

    pub fn kernel_released(&self, kernel: P) {
        if cl::kernel_refcount(kernel) == Some(1) {
            lock(&self.state).kernels.remove(&(kernel as usize));
        }
    }

    /// Queues a command for draining; `app_owned` events were retained by the caller.
    #[allow(clippy::too_many_arguments)]
    pub fn add_pending(
        &self,
        queue: P,
        event: P,
        layer_owned: bool,
        corr: u64,
        kind: Kind,
        name: StrRef,
        args: String,
        bytes: u64,
        api_begin: i64,
        api_end: i64,
    ) {
        let poll = {
            let mut st = lock(&self.state);
            if layer_owned {
                st.stats.layer_events_created += 1;
            }
            let Some(q) = st.queues.get_mut(&(queue as usize)) else {
                drop(st);
                cl::release_event(event);
                return;
            };
            q.pending.push_back(Pending {
                event: event as usize,
                corr,
                kind,
                name,
                args,
                bytes,
                api_begin,
                api_end,
            });
            q.enqueued += 1;
            q.enqueued % POLL_EVERY == 0
        };
        if poll {
            self.drain(queue, false);
        }
    }

    /// Drains the completed commands of `queue` (all of them, waiting, when `wait`).
    pub fn drain(&self, queue: P, wait: bool) {
        let key = queue as usize;
        let (mut pending, out_of_order) = {
            let mut st = lock(&self.state);
            let Some(q) = st.queues.get_mut(&key) else {
                return;
            };
            (std::mem::take(&mut q.pending), q.out_of_order)
        };
        if pending.is_empty() {
            return;
        }
        // Outside the lock: status queries, profiling reads and releases.
        let mut done: Vec<(Pending, Option<[u64; 4]>)> = Vec::new();
        let mut keep: VecDeque<Pending> = VecDeque::new();
        while let Some(p) = pending.pop_front() {
            let ev = p.event as P;
            if wait {
                cl::wait_event(ev);
            }
            let status = cl::event_status(ev).unwrap_or(-1);
            if status == cl::CL_COMPLETE || status < 0 {
                let prof = if status == cl::CL_COMPLETE {
                    cl::profiling(ev)
                } else {
                    None
                };
                cl::release_event(ev);
                done.push((p, prof));
            } else if out_of_order {
                keep.push_back(p);
            } else {
                keep.push_back(p);
                keep.extend(pending.drain(..));
            }
        }
        let mut st = lock(&self.state);
        let now_raw = clock::raw_now();
        if st
            .pairs
            .last()
            .is_none_or(|p| now_raw - p.raw > clock::ROUND_INTERVAL_NS)
        {
            st.pairs.push(clock::sample_round());
        }
        let st = &mut *st;
        st.stats.layer_events_released += done.len() as u64;
        let Some(q) = st.queues.get_mut(&key) else {
            return;
        };
        // Commands enqueued meanwhile go after the ones kept.
        keep.extend(q.pending.drain(..));
        q.pending = keep;
        for (p, prof) in done {
            let Some([queued, submit, start, end]) = prof else {
                st.stats.no_profile += 1;
                continue;
            };
            let conv = |raw: u64| to_mono(&st.pairs, raw as i64);
            let (queued_m, submit_m, start_m, end_m) =
                (conv(queued), conv(submit), conv(start), conv(end));
            let stats = &mut st.stats;
            stats.device_commands += 1;
            if start_m < p.api_begin {
                stats.causality_violations += 1;
            }
            if queued_m < p.api_begin || queued_m > p.api_end {
                stats.queued_outside_call += 1;
                let r = (p.api_begin - queued_m).max(queued_m - p.api_end);
                stats.max_queued_residual = stats.max_queued_residual.max(r);
            }
            let launch = start_m - p.api_begin;
            stats.min_start_minus_api_begin = Some(
                stats
                    .min_start_minus_api_begin
                    .map_or(launch, |m| m.min(launch)),
            );
            // Residual offset bounds: how far the conversion could move and still put every
            // QUEUED inside its enqueue call.
            stats.bounds.add(p.api_begin, p.api_end, queued_m, 0.0, 0);
            if !q.out_of_order {
                if let Some((_, prev_end)) = q.last {
                    if start_m < prev_end {
                        stats.order_violations += 1;
                    }
                }
            }
            q.last = Some((start_m, end_m));
            let Some(track) = q.track else {
                continue;
            };
            let (level, cat) = match p.kind {
                Kind::Kernel => (Level::DeviceKernel, self.cat_kernel),
                Kind::Copy(_) => (Level::DeviceCopy, self.cat_copy),
                Kind::Fill => (Level::DeviceSet, self.cat_fill),
                Kind::Sync => (Level::DeviceSync, self.cat_sync),
            };
            let mut args = p.args;
            if args.ends_with('}') {
                args.pop();
                if args.len() > 1 {
                    args.push(',');
                }
            } else {
                args = String::from("{");
            }
            let _ = write!(
                args,
                "\"queued\":{queued_m},\"submitted\":{submit_m},\"api_begin_ns\":{},\"queue\":{}}}",
                p.api_begin, q.id
            );
            rec::span(
                track,
                start_m,
                end_m,
                level,
                cat,
                p.name,
                Some(p.corr),
                Some(&args),
            );
            if let Kind::Copy(_) = p.kind {
                if p.bytes > 0 && end_m > start_m {
                    let name = format!("copy bandwidth/queue {}", q.id);
                    if let Some(c) = rec::counter_track(&name, "B/s", q.device) {
                        let bw = p.bytes as f64 * 1e9 / (end_m - start_m) as f64;
                        rec::counter(c, start_m, bw);
                        rec::counter(c, end_m, 0.0);
                    }
                }
            }
        }
    }

    /// Drains every queue (completed prefixes; all, waiting, when `wait`).
    pub fn drain_all(&self, wait: bool) {
        let queues: Vec<usize> = lock(&self.state).queues.keys().copied().collect();
        for q in queues {
            self.drain(q as P, wait);
        }
    }

    /// A queue's last release is coming: drain it (waiting) and forget it.
    pub fn queue_releasing(&self, queue: P) {
        if cl::queue_refcount(queue) == Some(1) {
            self.drain(queue, true);
            lock(&self.state).queues.remove(&(queue as usize));
        }
    }

    /// End of the run: drain everything, write the clock estimate and the summary, stop.
    pub fn finish(&self) {
        if self.finished.load(Ordering::Acquire) {
            return;
        }
        self.drain_all(true);
        self.finished.store(true, Ordering::Release);
        let st = lock(&self.state);
        let mut pairs = st.pairs.clone();
        pairs.push(clock::sample_round());
        if let Some(f) = clock::fit(&pairs) {
            rec::clock_sync(
                "device:0",
                "CLOCK_MONOTONIC_RAW",
                f.offset_ns,
                f.drift_ppb,
                f.anchor_ns,
                Some(f.error_ns),
                "paired observations: min-width bracketed CLOCK_MONOTONIC/CLOCK_MONOTONIC_RAW reads, least-squares offset+drift; device stamps interpolated between pairs",
            );
            let s = &st.stats;
            let in_use: i64 = st.in_use.values().sum();
            let bounds = if s.bounds.commands > 0 {
                format!("[{},{}]", s.bounds.lo, s.bounds.hi)
            } else {
                "null".into()
            };
            rec::metadata(
                "opencl_clock",
                &format!(
                    "{{\"offset_ns\":{},\"drift_ppb\":{},\"anchor_ns\":{},\"error_ns\":{},\"max_residual_ns\":{:.1},\"max_half_bracket_ns\":{},\"pairs\":{},\"span_ns\":{},\"queued_bracket_residual_bounds_ns\":{},\"commands\":{},\"causality_violations\":{},\"queued_outside_call\":{},\"max_queued_residual_ns\":{},\"order_violations\":{},\"min_start_minus_api_begin_ns\":{},\"no_profile\":{},\"layer_events_created\":{},\"layer_events_released\":{},\"memory_in_use_at_end\":{}}}",
                    f.offset_ns,
                    f.drift_ppb,
                    f.anchor_ns,
                    f.error_ns,
                    f.max_residual_ns,
                    f.max_half_width_ns,
                    f.pairs,
                    f.span_ns,
                    bounds,
                    s.device_commands,
                    s.causality_violations,
                    s.queued_outside_call,
                    s.max_queued_residual,
                    s.order_violations,
                    s.min_start_minus_api_begin.map_or("null".into(), |v| v.to_string()),
                    s.no_profile,
                    s.layer_events_created,
                    s.layer_events_released,
                    in_use,
                ),
            );
        }
        drop(st);
        rec::stop();
    }
}

/// Converts a device (RAW) stamp to MONOTONIC: linear interpolation between the clock pairs
/// around it, the nearest pair's offset outside them.
pub fn to_mono(pairs: &[Pair], raw: i64) -> i64 {
    let Some(last) = pairs.last() else {
        return raw;
    };
    let k = pairs.partition_point(|p| p.raw <= raw);
    if k == 0 {
        return raw + pairs[0].offset();
    }
    if k >= pairs.len() {
        return raw + last.offset();
    }
    let (a, b) = (pairs[k - 1], pairs[k]);
    let span = (b.raw - a.raw).max(1) as f64;
    let w = (raw - a.raw) as f64 / span;
    raw + (a.offset() as f64 + w * (b.offset() - a.offset()) as f64).round() as i64
}

/// Number of dispatch entries (for tests).
pub fn entries() -> usize {
    N_ENTRIES
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_parse() {
        assert_eq!(CollectLevel::parse("API"), Some(CollectLevel::Api));
        assert_eq!(CollectLevel::parse("device"), Some(CollectLevel::Device));
        assert_eq!(CollectLevel::parse(""), Some(CollectLevel::Full));
        assert_eq!(CollectLevel::parse("nope"), None);
        assert!(CollectLevel::Full.api() && CollectLevel::Full.device());
        assert!(!CollectLevel::Api.device() && !CollectLevel::Device.api());
    }

    #[test]
    fn interpolation_between_pairs() {
        let pairs = [
            Pair {
                raw: 1000,
                mono: 1100,
                width: 10,
            },
            Pair {
                raw: 2000,
                mono: 2120,
                width: 10,
            },
        ];
        assert_eq!(to_mono(&pairs, 500), 600);
        assert_eq!(to_mono(&pairs, 1500), 1610);
        assert_eq!(to_mono(&pairs, 3000), 3120);
    }
}
