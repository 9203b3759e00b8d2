//! The OpenCL side of a worker: one context and one in-order profiling queue on the first
//! device (or the one named by `STRATO_CL_DEVICE`, a substring of platform or device name),
//! program building, argument set-up and timed runs.
//!
//! Unsafe code is confined to this module: `clSetKernelArg`, `clCreateBuffer`,
//! `clEnqueueWriteBuffer` and `clEnqueueNDRangeKernel` are unsafe in `opencl3` because the
//! caller vouches for argument types and sizes. Each block says why its use is sound.

use std::time::Instant;

use opencl3::command_queue::{CommandQueue, CL_QUEUE_PROFILING_ENABLE};
use opencl3::context::Context;
use opencl3::device::{Device, CL_DEVICE_TYPE_ALL};
use opencl3::error_codes::{
    ClError, CL_BUILD_PROGRAM_FAILURE, CL_INVALID_BUFFER_SIZE, CL_MEM_OBJECT_ALLOCATION_FAILURE,
    CL_OUT_OF_HOST_MEMORY, CL_OUT_OF_RESOURCES,
};
use opencl3::event::Event;
use opencl3::kernel::Kernel;
use opencl3::memory::{Buffer, ClMem, CL_MEM_READ_WRITE};
use opencl3::platform::get_platforms;
use opencl3::program::Program;
use opencl3::types::{cl_float, cl_int, cl_mem, cl_uint, CL_BLOCKING};

use crate::candidate::{Arg, BufferInit, Candidate};
use crate::protocol::{Measurement, Outcome, Timing};

/// A built program and its kernel, kept by the worker for re-measurement.
#[derive(Debug)]
pub struct Built {
    // Field order: the kernel is released before its program.
    kernel: Kernel,
    _program: Program,
    build_ns: f64,
}

/// How many runs, and how they are timed.
#[derive(Debug, Clone, Copy)]
pub struct RunSpec {
    pub repeats: u32,
    pub warmup: u32,
    pub timing: Timing,
    /// Repeat disturbed timed runs (stall above `stall_limit` of their duration) this often.
    pub disturbed_retries: u32,
    pub stall_limit: f64,
    /// Time budget of one timed run (ns; 0 = one launch per run): see
    /// [`crate::protocol::Request::Measure`].
    pub min_run_ns: f64,
}

/// One device context and profiling queue.
#[derive(Debug)]
pub struct ClDevice {
    // Field order: the queue is released before the context.
    queue: CommandQueue,
    context: Context,
    device: Device,
    /// "platform / device" for reports.
    pub name: String,
    max_alloc: u64,
}

fn cl_err(e: ClError) -> String {
    format!("{e} ({})", e.0)
}

fn is_oom(code: cl_int) -> bool {
    matches!(
        code,
        CL_MEM_OBJECT_ALLOCATION_FAILURE
            | CL_OUT_OF_RESOURCES
            | CL_OUT_OF_HOST_MEMORY
            | CL_INVALID_BUFFER_SIZE
    )
}

/// A candidate-level failure while preparing or running.
fn fail(e: ClError, what: &str) -> Outcome {
    if is_oom(e.0) {
        Outcome::OutOfMemory {
            error: format!("{what}: {}", cl_err(e)),
        }
    } else {
        Outcome::RunFailed {
            error: format!("{what}: {}", cl_err(e)),
        }
    }
}

impl ClDevice {
    /// Opens the device. `STRATO_CL_DEVICE` picks one by substring of "platform device".
    pub fn open() -> Result<Self, String> {
        let want = std::env::var("STRATO_CL_DEVICE").ok();
        let platforms =
            get_platforms().map_err(|e| format!("no OpenCL platform: {}", cl_err(e)))?;
        for platform in platforms {
            let pname = platform.name().unwrap_or_default();
            let Ok(ids) = platform.get_devices(CL_DEVICE_TYPE_ALL) else {
                continue;
            };
            for id in ids {
                let device = Device::new(id);
                let dname = device.name().unwrap_or_default();
                let name = format!("{pname} / {dname}");
                if let Some(w) = &want {
                    if !name.contains(w.as_str()) {
                        continue;
                    }
                }
                let context = Context::from_device(&device).map_err(cl_err)?;
                let queue = CommandQueue::create_default_with_properties(
                    &context,
                    CL_QUEUE_PROFILING_ENABLE,
                    0,
                )
                .map_err(cl_err)?;
                let max_alloc = device.max_mem_alloc_size().unwrap_or(u64::MAX);
                return Ok(Self {
                    queue,
                    context,
                    device,
                    name,
                    max_alloc,
                });
            }
        }
        Err(match want {
            Some(w) => format!("no OpenCL device matches STRATO_CL_DEVICE={w:?}"),
            None => "no OpenCL device".into(),
        })
    }

    /// Builds `candidate`'s program and creates its kernel.
    // The error is the candidate's outcome, sent to the engine as is: boxing it buys nothing.
    #[allow(clippy::result_large_err)]
    pub fn build(&self, candidate: &Candidate) -> Result<Built, Outcome> {
        let (Some(source), Some(kernel_name)) = (&candidate.source, &candidate.kernel) else {
            return Err(Outcome::Invalid {
                error: "an OpenCL candidate needs `source` and `kernel`".into(),
            });
        };
        if candidate.build_options.contains('\0') || kernel_name.contains('\0') {
            return Err(Outcome::Invalid {
                error: "NUL byte in build options or kernel name".into(),
            });
        }
        let t0 = Instant::now();
        let mut program = Program::create_from_source(&self.context, source)
            .map_err(|e| fail(e, "clCreateProgramWithSource"))?;
        if let Err(e) = program.build(self.context.devices(), &candidate.build_options) {
            let log = program.get_build_log(self.device.id()).unwrap_or_default();
            return Err(if e.0 == CL_BUILD_PROGRAM_FAILURE {
                Outcome::BuildFailed { log }
            } else {
                Outcome::BuildFailed {
                    log: format!("{}\n{log}", cl_err(e)),
                }
            });
        }
        let kernel = Kernel::create(&program, kernel_name).map_err(|e| Outcome::BuildFailed {
            log: format!("clCreateKernel({kernel_name}): {}", cl_err(e)),
        })?;
        Ok(Built {
            kernel,
            _program: program,
            build_ns: t0.elapsed().as_nanos() as f64,
        })
    }

    /// Sets arguments, then runs `warmup` untimed and `repeats` timed launches.
    pub fn run(
        &self,
        built: &Built,
        candidate: &Candidate,
        spec: RunSpec,
        cached: bool,
        lock: Option<&crate::devlock::DeviceLock>,
    ) -> Outcome {
        let RunSpec {
            repeats,
            warmup,
            timing,
            ..
        } = spec;
        let dims = candidate.global.len();
        if !(1..=3).contains(&dims) || candidate.global.contains(&0) {
            return Outcome::Invalid {
                error: format!(
                    "global size must have 1 to 3 non-zero dimensions: {:?}",
                    candidate.global
                ),
            };
        }
        if let Some(local) = &candidate.local {
            if local.len() != dims || local.contains(&0) {
                return Outcome::Invalid {
                    error: format!(
                        "local size {local:?} does not match global {:?}",
                        candidate.global
                    ),
                };
            }
        }
        let repeats = repeats.max(1);
        // Buffers live until the end of this function, after the queue has finished with them.
        let mut buffers: Vec<Buffer<u8>> = Vec::new();
        for (i, arg) in candidate.args.iter().enumerate() {
            let index = i as cl_uint;
            let set = match arg {
                Arg::Buffer { bytes, init } => {
                    if *bytes == 0 {
                        return Outcome::Invalid {
                            error: format!("argument {i}: zero-sized buffer"),
                        };
                    }
                    if *bytes > self.max_alloc {
                        return Outcome::OutOfMemory {
                            error: format!(
                                "argument {i}: {bytes} bytes exceeds the device's max allocation {}",
                                self.max_alloc
                            ),
                        };
                    }
                    let Ok(len) = usize::try_from(*bytes) else {
                        return Outcome::OutOfMemory {
                            error: format!("argument {i}: {bytes} bytes"),
                        };
                    };
                    // SAFETY: a plain device allocation with no host pointer; the size is
                    // non-zero and within the device's max allocation.
                    let buffer = match unsafe {
                        Buffer::<u8>::create(
                            &self.context,
                            CL_MEM_READ_WRITE,
                            len,
                            std::ptr::null_mut(),
                        )
                    } {
                        Ok(b) => b,
                        Err(e) => return fail(e, &format!("argument {i}: clCreateBuffer")),
                    };
                    let mut buffer = buffer;
                    let data = init_bytes(len, *init, i as u64);
                    // SAFETY: a blocking write of exactly `len` bytes into a `len`-byte buffer.
                    if let Err(e) = unsafe {
                        self.queue
                            .enqueue_write_buffer(&mut buffer, CL_BLOCKING, 0, &data, &[])
                    } {
                        return fail(e, &format!("argument {i}: write"));
                    }
                    let mem: cl_mem = buffer.get();
                    buffers.push(buffer);
                    // SAFETY: a cl_mem handle for a buffer argument, alive while the kernel runs.
                    unsafe { built.kernel.set_arg(index, &mem) }
                }
                Arg::Local { bytes } => {
                    let Ok(b) = usize::try_from(*bytes) else {
                        return Outcome::OutOfMemory {
                            error: format!("argument {i}: local {bytes} bytes"),
                        };
                    };
                    // SAFETY: __local arguments take a size and no value.
                    unsafe { built.kernel.set_arg_local_buffer(index, b) }
                }
                // SAFETY (three arms): scalar arguments passed by value with their exact C size;
                // a type mismatch with the kernel is reported by clSetKernelArg as an error.
                Arg::Int(v) => unsafe { built.kernel.set_arg(index, v) },
                Arg::Uint(v) => unsafe { built.kernel.set_arg(index, v) },
                Arg::Float(v) => unsafe { built.kernel.set_arg(index, &(*v as cl_float)) },
            };
            if let Err(e) = set {
                return fail(e, &format!("argument {i}: clSetKernelArg"));
            }
        }
        let global = candidate.global.clone();
        let local = candidate.local.clone();
        let launch = || -> Result<Event, ClError> {
            let local_ptr = local.as_ref().map_or(std::ptr::null(), |l| l.as_ptr());
            // SAFETY: every argument was set above (clEnqueueNDRangeKernel reports missing ones
            // as CL_INVALID_KERNEL_ARGS); `global`/`local` have `dims` entries and outlive the
            // call; no wait list.
            unsafe {
                self.queue.enqueue_nd_range_kernel(
                    built.kernel.get(),
                    dims as cl_uint,
                    std::ptr::null(),
                    global.as_ptr(),
                    local_ptr,
                    &[],
                )
            }
        };
        let tw = Instant::now();
        for _ in 0..warmup {
            match launch() {
                Ok(ev) => {
                    if let Err(e) = ev.wait() {
                        return fail(e, "warm-up run");
                    }
                }
                Err(e) => return fail(e, "clEnqueueNDRangeKernel"),
            }
        }
        let warmup_ns = tw.elapsed().as_nanos() as f64;
        let prep_to_ns = crate::devlock::monotonic_ns();
        if let Some(lock) = lock {
            // Timed runs overlap no other worker's device work (see `devlock`).
            if let Err(e) = lock.exclusive() {
                return Outcome::RunFailed {
                    error: format!("device lock: {e}"),
                };
            }
        }
        // The time budget: one probe launch, timed as the runs are (inside the exclusive
        // phase, so that another worker's build does not inflate it), sizes the launches per
        // run. A short kernel timed one launch at a time is at the mercy of thread wake-ups
        // and scheduler ticks of the same order as the kernel itself.
        let per_run = if spec.min_run_ns > 0.0 {
            match self.probe(&launch, timing) {
                Ok(probe_ns) => crate::calibrate::launches_for(spec.min_run_ns, probe_ns),
                Err(o) => return o,
            }
        } else {
            1
        };
        // The timed runs, repeated while disturbed (bounded); the least disturbed is kept.
        let mut kept: Option<Timed> = None;
        let mut attempts = 0;
        let mut spent_ns = 0.0;
        for _ in 0..=spec.disturbed_retries {
            attempts += 1;
            let t = match self.timed_runs(&launch, repeats, per_run, timing) {
                Ok(t) => t,
                Err(o) => return o,
            };
            let frac = t.stall_fraction();
            spent_ns += t.duration_ns;
            if kept.as_ref().is_none_or(|k| frac < k.stall_fraction()) {
                kept = Some(t);
            }
            // Retries are bounded in time too (a slow kernel on a busy host would otherwise
            // triple its measurement).
            if frac <= spec.stall_limit || spent_ns > RETRY_BUDGET_NS {
                break;
            }
        }
        let Some(Timed {
            runs_ns,
            duration_ns,
            timed_from_ns,
            timed_to_ns,
            cpu_stall_ns,
        }) = kept
        else {
            return Outcome::RunFailed {
                error: "no timed runs".into(),
            };
        };
        let latency_ns = runs_ns.iter().sum::<f64>() / runs_ns.len() as f64;
        let min_ns = runs_ns.iter().copied().fold(f64::INFINITY, f64::min);
        Outcome::Ok(Measurement {
            latency_ns,
            min_ns,
            runs_ns,
            duration_ns,
            build_ns: if cached { 0.0 } else { built.build_ns },
            warmup_ns,
            total_ns: 0.0,
            cached,
            timed_from_ns,
            timed_to_ns,
            cpu_stall_ns,
            attempts,
            prep_to_ns,
            launches_per_run: per_run,
            ..Measurement::default()
        })
    }
}

/// Timed runs are not repeated for disturbance once this much time went into them (ns).
const RETRY_BUDGET_NS: f64 = 300e6;

/// One set of timed runs.
struct Timed {
    runs_ns: Vec<f64>,
    duration_ns: f64,
    timed_from_ns: u64,
    timed_to_ns: u64,
    cpu_stall_ns: Option<f64>,
}

impl Timed {
    /// Share of the timed runs' duration during which some task on the host waited for a core
    /// (0 without pressure information).
    fn stall_fraction(&self) -> f64 {
        match self.cpu_stall_ns {
            Some(s) if self.duration_ns > 0.0 => s / self.duration_ns,
            _ => 0.0,
        }
    }
}

impl ClDevice {
    /// One launch timed as `timing` says (device time, or CPU time from enqueue to completion).
    #[allow(clippy::result_large_err)] // as for `build`
    fn probe(
        &self,
        launch: &dyn Fn() -> Result<Event, ClError>,
        timing: Timing,
    ) -> Result<f64, Outcome> {
        let t0 = Instant::now();
        let ev = launch().map_err(|e| fail(e, "clEnqueueNDRangeKernel"))?;
        ev.wait().map_err(|e| fail(e, "probe run"))?;
        let cpu_ns = t0.elapsed().as_nanos() as f64;
        Ok(match timing {
            Timing::Device => match (ev.profiling_command_start(), ev.profiling_command_end()) {
                (Ok(s), Ok(e)) => e.saturating_sub(s) as f64,
                (Err(e), _) | (_, Err(e)) => return Err(fail(e, "profiling info")),
            },
            Timing::Cpu => cpu_ns,
        })
    }

    /// `repeats` runs of `per_run` launches each, all enqueued back to back, then `clFinish`.
    /// Per run: the device time per launch (the sum of its launches'
    /// `CL_PROFILING_COMMAND_END - START` over `per_run`), or for [`Timing::Cpu`] the one
    /// CPU-timed span over all launches divided by their number (the conventional harness);
    /// the window on the host's monotonic clock and the host's CPU pressure stall during it.
    #[allow(clippy::result_large_err)] // as for `build`
    fn timed_runs(
        &self,
        launch: &dyn Fn() -> Result<Event, ClError>,
        repeats: u32,
        per_run: u32,
        timing: Timing,
    ) -> Result<Timed, Outcome> {
        let per_run = per_run.max(1);
        let launches = repeats as usize * per_run as usize;
        let stall_before = crate::devlock::cpu_pressure_some_ns();
        let timed_from_ns = crate::devlock::monotonic_ns();
        let t0 = Instant::now();
        let mut events = Vec::with_capacity(launches);
        for _ in 0..launches {
            match launch() {
                Ok(ev) => events.push(ev),
                Err(e) => return Err(fail(e, "clEnqueueNDRangeKernel")),
            }
        }
        if let Err(e) = self.queue.finish() {
            return Err(fail(e, "clFinish"));
        }
        let duration_ns = t0.elapsed().as_nanos() as f64;
        let timed_to_ns = crate::devlock::monotonic_ns();
        let cpu_stall_ns = match (stall_before, crate::devlock::cpu_pressure_some_ns()) {
            (Some(a), Some(b)) => Some((b - a).max(0.0)),
            _ => None,
        };
        let runs_ns: Vec<f64> = match timing {
            Timing::Device => {
                let mut runs = Vec::with_capacity(repeats as usize);
                for group in events.chunks(per_run as usize) {
                    let mut sum = 0.0;
                    for ev in group {
                        let (s, e) =
                            match (ev.profiling_command_start(), ev.profiling_command_end()) {
                                (Ok(s), Ok(e)) => (s, e),
                                (Err(e), _) | (_, Err(e)) => return Err(fail(e, "profiling info")),
                            };
                        sum += e.saturating_sub(s) as f64;
                    }
                    runs.push(sum / group.len() as f64);
                }
                runs
            }
            // The conventional harness: one CPU-timed span over all launches, averaged.
            Timing::Cpu => vec![duration_ns / launches as f64; repeats as usize],
        };
        Ok(Timed {
            runs_ns,
            duration_ns,
            timed_from_ns,
            timed_to_ns,
            cpu_stall_ns,
        })
    }
}

/// Deterministic buffer contents.
fn init_bytes(len: usize, init: BufferInit, seed: u64) -> Vec<u8> {
    match init {
        BufferInit::Zero => vec![0u8; len],
        BufferInit::Ones => {
            let one = 1.0f32.to_le_bytes();
            (0..len).map(|i| one[i % 4]).collect()
        }
        BufferInit::Random => {
            let mut out = Vec::with_capacity(len);
            let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ seed.wrapping_mul(0xD1B5_4A32_D192_ED03);
            while out.len() < len {
                state = crate::calibrate::splitmix64(state);
                let v = (state >> 40) as f32 / (1u64 << 24) as f32;
                out.extend_from_slice(&v.to_le_bytes());
            }
            out.truncate(len);
            out
        }
    }
}
