//! The demo's workloads (see `main.rs`). OpenCL objects come from `opencl3` (which `dlopen`s
//! libOpenCL, so the ICD loader — and through `OPENCL_LAYERS` the stratoscope layer — sees every
//! call); one enqueue goes through the raw entry point with a null event pointer to exercise the
//! layer's own events.

use std::ffi::c_void;
use std::ptr;
use std::time::Instant;

use anyhow::{anyhow, Result};
use opencl3::command_queue::{CommandQueue, CL_QUEUE_PROFILING_ENABLE};
use opencl3::context::Context;
use opencl3::device::{get_all_devices, Device, CL_DEVICE_TYPE_ALL};
use opencl3::kernel::{ExecuteKernel, Kernel};
use opencl3::memory::{Buffer, ClMem, CL_MAP_READ, CL_MEM_READ_WRITE};
use opencl3::program::Program;
use opencl3::types::{cl_float, cl_int, cl_uint, CL_BLOCKING, CL_NON_BLOCKING};
use strato_record as rec;

/// Kernels of every workload.
pub const SOURCE: &str = r#"
__kernel void scale(__global float* x, float a) {
    size_t i = get_global_id(0);
    x[i] = x[i] * a;
}
__kernel void square(__global float* x) {
    size_t i = get_global_id(0);
    x[i] = x[i] * x[i];
}
__kernel void reduce_sum(__global const float* x, __global float* partial, uint n) {
    __local float tmp[64];
    size_t lid = get_local_id(0);
    float acc = 0.0f;
    for (size_t i = get_global_id(0); i < n; i += get_global_size(0)) acc += x[i];
    tmp[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = get_local_size(0) / 2; s > 0; s >>= 1) {
        if (lid < s) tmp[lid] += tmp[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) partial[get_group_id(0)] = tmp[0];
}
__kernel void conv3x3(__global const float* in, __constant float* w, __global float* out,
                      int W, int H, int stride) {
    int x = get_global_id(0), y = get_global_id(1);
    int OW = W / stride, OH = H / stride;
    if (x >= OW || y >= OH) return;
    float acc = 0.0f;
    for (int c = 0; c < 8; c++)
      for (int dy = -1; dy <= 1; dy++)
        for (int dx = -1; dx <= 1; dx++) {
            int ix = clamp(x * stride + dx, 0, W - 1), iy = clamp(y * stride + dy, 0, H - 1);
            acc += in[iy * W + ix] * w[c * 9 + (dy + 1) * 3 + (dx + 1)];
        }
    out[y * OW + x] = acc;
}
__kernel void relu(__global float* x) {
    size_t i = get_global_id(0);
    x[i] = fmax(x[i], 0.0f);
}
__kernel void maxpool2x2(__global const float* in, __global float* out, int W, int H) {
    int x = get_global_id(0), y = get_global_id(1);
    int OW = W / 2;
    float a = in[(2 * y) * W + 2 * x], b = in[(2 * y) * W + 2 * x + 1];
    float c = in[(2 * y + 1) * W + 2 * x], d = in[(2 * y + 1) * W + 2 * x + 1];
    out[y * OW + x] = fmax(fmax(a, b), fmax(c, d));
}
__kernel void matmul(__global const float* A, __global const float* B, __global float* C, int N) {
    int r = get_global_id(1), c = get_global_id(0);
    float acc = 0.0f;
    for (int k = 0; k < N; k++) acc += A[r * N + k] * B[k * N + c];
    C[r * N + c] = acc;
}
"#;

/// Starts the demo's own recorder (operations) when `STRATOSCOPE_OUT` is set.
pub fn start_recording() -> bool {
    let Some(dir) = std::env::var_os("STRATOSCOPE_OUT") else {
        return false;
    };
    rec::start(rec::Config {
        dir: dir.into(),
        component: String::new(),
        ..Default::default()
    })
    .is_ok()
}

/// An operation span on the current thread for the guard's lifetime (no-op when not recording).
struct Op;

fn op(name: &str) -> Op {
    rec::begin(
        rec::Level::Operation,
        rec::intern("operation"),
        rec::intern(name),
    );
    Op
}

impl Drop for Op {
    fn drop(&mut self) {
        rec::end();
    }
}

struct Cl {
    queue: CommandQueue,
    program: Program,
    context: Context,
}

fn open(profiling: bool) -> Result<Cl> {
    let ids = get_all_devices(CL_DEVICE_TYPE_ALL).map_err(|e| anyhow!("no OpenCL device: {e}"))?;
    let id = *ids.first().ok_or_else(|| anyhow!("no OpenCL device"))?;
    let device = Device::new(id);
    let context = Context::from_device(&device)?;
    let props = if profiling {
        CL_QUEUE_PROFILING_ENABLE
    } else {
        0
    };
    let queue = CommandQueue::create_default_with_properties(&context, props, 0)?;
    let program = Program::create_and_build_from_source(&context, SOURCE, "")
        .map_err(|log| anyhow!("build failed: {log}"))?;
    Ok(Cl {
        queue,
        program,
        context,
    })
}

fn buffer(cl: &Cl, floats: usize) -> Result<Buffer<cl_float>> {
    // SAFETY: a plain device allocation, no host pointer.
    Ok(unsafe {
        Buffer::<cl_float>::create(&cl.context, CL_MEM_READ_WRITE, floats, ptr::null_mut())?
    })
}

type EnqueueNdRange = unsafe extern "C" fn(
    *mut c_void,
    *mut c_void,
    cl_uint,
    *const usize,
    *const usize,
    *const usize,
    cl_uint,
    *const *mut c_void,
    *mut *mut c_void,
) -> cl_int;

/// `clEnqueueNDRangeKernel` of the libOpenCL `opencl3` loaded, to call with a null event.
fn raw_enqueue_nd_range() -> Result<EnqueueNdRange> {
    // SAFETY: dlopen/dlsym with NUL-terminated names; RTLD_NOLOAD only returns the library
    // opencl3 already loaded. The symbol is the OpenCL entry point with this C signature.
    unsafe {
        let h = libc::dlopen(
            c"libOpenCL.so.1".as_ptr(),
            libc::RTLD_NOW | libc::RTLD_NOLOAD,
        );
        if h.is_null() {
            return Err(anyhow!("libOpenCL.so.1 is not loaded"));
        }
        let f = libc::dlsym(h, c"clEnqueueNDRangeKernel".as_ptr());
        if f.is_null() {
            return Err(anyhow!("no clEnqueueNDRangeKernel"));
        }
        Ok(std::mem::transmute::<*mut c_void, EnqueueNdRange>(f))
    }
}

/// One of each kind of call on a queue created without profiling.
pub fn tour() -> Result<()> {
    let _op = op("tour");
    let cl = open(false)?;
    let props = cl.queue.properties()?;
    let n = 1usize << 16;
    let scale = Kernel::create(&cl.program, "scale")?;
    let mut a = buffer(&cl, n)?;
    let mut b = buffer(&cl, n)?;
    let host: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let bytes = n * 4;
    // SAFETY (each enqueue below): buffer sizes and offsets are within the `n`-float buffers,
    // host slices have `n` floats and outlive the blocking calls / the final finish.
    unsafe {
        cl.queue
            .enqueue_write_buffer(&mut a, CL_BLOCKING, 0, &host, &[])?;
        cl.queue.enqueue_copy_buffer(&a, &mut b, 0, 0, bytes, &[])?;
        cl.queue
            .enqueue_fill_buffer(&mut b, &[1.0f32], 0, bytes, &[])?;
        ExecuteKernel::new(&scale)
            .set_arg(&b)
            .set_arg(&2.0f32)
            .set_global_work_size(n)
            .set_local_work_size(64)
            .enqueue_nd_range(&cl.queue)?;
        // The same kernel through the raw entry point, with no event pointer.
        let raw = raw_enqueue_nd_range()?;
        let gws = [n];
        let lws = [64usize];
        let r = raw(
            cl.queue.get(),
            scale.get(),
            1,
            ptr::null(),
            gws.as_ptr(),
            lws.as_ptr(),
            0,
            ptr::null(),
            ptr::null_mut(),
        );
        if r != 0 {
            return Err(anyhow!("raw clEnqueueNDRangeKernel: {r}"));
        }
        let mut out = vec![0f32; n];
        cl.queue
            .enqueue_read_buffer(&b, CL_BLOCKING, 0, &mut out, &[])?;
        let mut mapped: *mut c_void = ptr::null_mut();
        cl.queue
            .enqueue_map_buffer(&b, CL_BLOCKING, CL_MAP_READ, 0, bytes, &mut mapped, &[])?;
        cl.queue.enqueue_unmap_mem_object(b.get(), mapped, &[])?;
        cl.queue.enqueue_marker_with_wait_list(&[])?;
        cl.queue.finish()?;
        let ok = out.iter().all(|&v| v == 4.0);
        println!(
            "{{\"pid\":{},\"app_sees_profiling\":{},\"copy_bytes\":{bytes},\"result_ok\":{ok}}}",
            std::process::id(),
            props & CL_QUEUE_PROFILING_ENABLE != 0
        );
        if !ok {
            return Err(anyhow!("wrong result: {:?}", &out[..4]));
        }
    }
    Ok(())
}

/// A buffer released while commands that use it are still queued: the implementation keeps
/// it until they are done (and their events released), so the application's release is not
/// where the memory is freed. Prints the buffer's reference count at the release.
pub fn release_pending() -> Result<()> {
    let _op = op("release_pending");
    let cl = open(true)?;
    let scale = Kernel::create(&cl.program, "scale")?;
    let n = 1usize << 20;
    let mut buf = buffer(&cl, n)?;
    let host = vec![1f32; n];
    // SAFETY: `host` has the buffer's `n` floats and outlives the non-blocking write (the queue
    // is finished below, before `host` is dropped); the kernel's arguments are the buffer and
    // a float.
    unsafe {
        cl.queue
            .enqueue_write_buffer(&mut buf, CL_NON_BLOCKING, 0, &host, &[])?;
        ExecuteKernel::new(&scale)
            .set_arg(&buf)
            .set_arg(&2.0f32)
            .set_global_work_size(n)
            .enqueue_nd_range(&cl.queue)?;
    }
    let refs = buf.reference_count()?;
    drop(buf);
    cl.queue.finish()?;
    drop(host);
    println!("{{\"refs_at_release\":{refs}}}");
    Ok(())
}

fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// The event's reference count once the driver's worker threads let go of it: the minimum
/// over up to 300 ms of polling (1 means only the application holds it).
fn settled_reference_count(event: &opencl3::event::Event) -> u32 {
    let deadline = Instant::now() + std::time::Duration::from_millis(300);
    let mut least = u32::MAX;
    while Instant::now() < deadline {
        least = least.min(event.reference_count().unwrap_or(0));
        if least <= 1 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    least
}

/// `n` enqueues: half with no event pointer, half with events the program drops at once.
pub fn leak(n: usize) -> Result<()> {
    let cl = open(true)?;
    let scale = Kernel::create(&cl.program, "scale")?;
    let buf = buffer(&cl, 64)?;
    let raw = raw_enqueue_nd_range()?;
    let gws = [64usize];
    let run_raw = |count: usize| -> Result<()> {
        for _ in 0..count {
            // SAFETY: a 64-item launch of `scale` whose arguments are set below.
            let r = unsafe {
                raw(
                    cl.queue.get(),
                    scale.get(),
                    1,
                    ptr::null(),
                    gws.as_ptr(),
                    ptr::null(),
                    0,
                    ptr::null(),
                    ptr::null_mut(),
                )
            };
            if r != 0 {
                return Err(anyhow!("clEnqueueNDRangeKernel: {r}"));
            }
        }
        Ok(())
    };
    // SAFETY: the kernel's two arguments, a 64-float buffer and a float.
    unsafe {
        scale.set_arg(0, &buf.get())?;
        scale.set_arg(1, &1.0f32)?;
    }
    run_raw(200)?;
    cl.queue.finish()?;
    let rss0 = rss_kb();
    run_raw(n / 2)?;
    let mut probe = None;
    for _ in 0..n / 2 {
        // SAFETY: as above.
        let ev = unsafe {
            ExecuteKernel::new(&scale)
                .set_arg(&buf)
                .set_arg(&1.0f32)
                .set_global_work_size(64)
                .enqueue_nd_range(&cl.queue)?
        };
        probe = Some(ev);
    }
    cl.queue.finish()?;
    let rss1 = rss_kb();
    // PoCL drops its own references to a completed event from its worker threads, shortly
    // after `finish` returns; the settled count is the least seen over a short wait.
    let refcount = probe.as_ref().map_or(0, settled_reference_count);
    println!(
        "{{\"enqueues\":{n},\"probe_refcount\":{refcount},\"rss_before_kb\":{rss0},\"rss_after_kb\":{rss1}}}"
    );
    Ok(())
}

/// Zins 4.5.5: the dataset copied host-to-device as `chunks` small copies vs one large copy,
/// then square + reduce_sum over it, `iters` times each.
pub fn copies(chunks: usize, bytes: usize, iters: usize) -> Result<()> {
    let cl = open(true)?;
    let floats = bytes / 4;
    let chunk = (floats / chunks.max(1)).max(1);
    let host: Vec<f32> = (0..floats).map(|i| (i % 7) as f32).collect();
    let mut data = buffer(&cl, floats)?;
    let groups = 64usize;
    let partial = buffer(&cl, groups)?;
    let square = Kernel::create(&cl.program, "square")?;
    let reduce = Kernel::create(&cl.program, "reduce_sum")?;
    let mut out = vec![0f32; groups];
    let compute = |cl: &Cl, data: &Buffer<f32>, out: &mut Vec<f32>| -> Result<f32> {
        // SAFETY: kernels over the `floats`-float buffer; partial has `groups` floats.
        unsafe {
            ExecuteKernel::new(&square)
                .set_arg(data)
                .set_global_work_size(floats)
                .enqueue_nd_range(&cl.queue)?;
            ExecuteKernel::new(&reduce)
                .set_arg(data)
                .set_arg(&partial)
                .set_arg(&(floats as cl_uint))
                .set_global_work_size(groups * 64)
                .set_local_work_size(64)
                .enqueue_nd_range(&cl.queue)?;
            cl.queue
                .enqueue_read_buffer(&partial, CL_BLOCKING, 0, out, &[])?;
        }
        Ok(out.iter().sum())
    };
    {
        let _op = op("warmup");
        compute(&cl, &data, &mut out)?;
    }
    let mut small_ns = 0u128;
    let mut large_ns = 0u128;
    let mut sums = (0f32, 0f32);
    for _ in 0..iters {
        let t = Instant::now();
        {
            let _op = op("many_small_copies");
            let mut off = 0;
            while off < floats {
                let len = chunk.min(floats - off);
                // SAFETY: `off + len <= floats`; `host` outlives the blocking read that ends
                // the operation (in-order queue).
                unsafe {
                    cl.queue.enqueue_write_buffer(
                        &mut data,
                        CL_NON_BLOCKING,
                        off * 4,
                        &host[off..off + len],
                        &[],
                    )?;
                }
                off += len;
            }
            sums.0 = compute(&cl, &data, &mut out)?;
        }
        small_ns += t.elapsed().as_nanos();
        let t = Instant::now();
        {
            let _op = op("one_large_copy");
            // SAFETY: the whole buffer from a host slice of the same size.
            unsafe {
                cl.queue
                    .enqueue_write_buffer(&mut data, CL_NON_BLOCKING, 0, &host, &[])?;
            }
            sums.1 = compute(&cl, &data, &mut out)?;
        }
        large_ns += t.elapsed().as_nanos();
    }
    cl.queue.finish()?;
    println!(
        "{{\"chunks\":{chunks},\"bytes\":{bytes},\"iters\":{iters},\"many_small_ms\":{:.3},\"one_large_ms\":{:.3},\"sums_equal\":{}}}",
        small_ns as f64 / 1e6,
        large_ns as f64 / 1e6,
        sums.0 == sums.1
    );
    Ok(())
}

/// Zins 4.5.2: a compute-bound CNN-like step, conv3x3 + relu + maxpool2x2 + matmul, against
/// its optimisation (a strided conv3x3 replacing conv + maxpool), `iters` times each.
pub fn ranking(iters: usize) -> Result<()> {
    let cl = open(true)?;
    let (w, h) = (512usize, 512usize);
    let n = 192usize;
    let mut input = buffer(&cl, w * h)?;
    let mut weights = buffer(&cl, 72)?;
    let conv_out = buffer(&cl, w * h)?;
    let pool_out = buffer(&cl, w * h / 4)?;
    let mut a = buffer(&cl, n * n)?;
    let mut b = buffer(&cl, n * n)?;
    let c = buffer(&cl, n * n)?;
    let conv = Kernel::create(&cl.program, "conv3x3")?;
    let relu = Kernel::create(&cl.program, "relu")?;
    let pool = Kernel::create(&cl.program, "maxpool2x2")?;
    let mm = Kernel::create(&cl.program, "matmul")?;
    let mut times = (0u128, 0u128);
    // SAFETY (all launches): every buffer argument is large enough for its kernel's index
    // space (conv out W/stride x H/stride, pool out W/2 x H/2, matmul n x n).
    unsafe {
        for (buf, len) in [
            (&mut input, w * h),
            (&mut weights, 72),
            (&mut a, n * n),
            (&mut b, n * n),
        ] {
            let host = vec![0.5f32; len];
            cl.queue
                .enqueue_write_buffer(buf, CL_BLOCKING, 0, &host, &[])?;
        }
        for it in 0..=iters {
            // Iteration 0 is a warm-up (PoCL compiles each kernel at its first launch).
            let name = |n: &'static str| if it == 0 { "warmup" } else { n };
            let t = Instant::now();
            {
                let _op = op(name("conv_relu_maxpool_matmul"));
                ExecuteKernel::new(&conv)
                    .set_arg(&input)
                    .set_arg(&weights)
                    .set_arg(&conv_out)
                    .set_arg(&(w as cl_int))
                    .set_arg(&(h as cl_int))
                    .set_arg(&1i32)
                    .set_global_work_sizes(&[w, h])
                    .enqueue_nd_range(&cl.queue)?;
                ExecuteKernel::new(&relu)
                    .set_arg(&conv_out)
                    .set_global_work_size(w * h)
                    .enqueue_nd_range(&cl.queue)?;
                ExecuteKernel::new(&pool)
                    .set_arg(&conv_out)
                    .set_arg(&pool_out)
                    .set_arg(&(w as cl_int))
                    .set_arg(&(h as cl_int))
                    .set_global_work_sizes(&[w / 2, h / 2])
                    .enqueue_nd_range(&cl.queue)?;
                ExecuteKernel::new(&mm)
                    .set_arg(&a)
                    .set_arg(&b)
                    .set_arg(&c)
                    .set_arg(&(n as cl_int))
                    .set_global_work_sizes(&[n, n])
                    .enqueue_nd_range(&cl.queue)?;
                cl.queue.finish()?;
            }
            if it > 0 {
                times.0 += t.elapsed().as_nanos();
            }
            let t = Instant::now();
            {
                let _op = op(name("strided_conv_relu_matmul"));
                ExecuteKernel::new(&conv)
                    .set_arg(&input)
                    .set_arg(&weights)
                    .set_arg(&pool_out)
                    .set_arg(&(w as cl_int))
                    .set_arg(&(h as cl_int))
                    .set_arg(&2i32)
                    .set_global_work_sizes(&[w / 2, h / 2])
                    .enqueue_nd_range(&cl.queue)?;
                ExecuteKernel::new(&relu)
                    .set_arg(&pool_out)
                    .set_global_work_size(w * h / 4)
                    .enqueue_nd_range(&cl.queue)?;
                ExecuteKernel::new(&mm)
                    .set_arg(&a)
                    .set_arg(&b)
                    .set_arg(&c)
                    .set_arg(&(n as cl_int))
                    .set_global_work_sizes(&[n, n])
                    .enqueue_nd_range(&cl.queue)?;
                cl.queue.finish()?;
            }
            if it > 0 {
                times.1 += t.elapsed().as_nanos();
            }
        }
    }
    println!(
        "{{\"iters\":{iters},\"conv_maxpool_ms\":{:.3},\"strided_conv_ms\":{:.3}}}",
        times.0 as f64 / 1e6,
        times.1 as f64 / 1e6
    );
    Ok(())
}

/// The fixed workload `strato overhead` times: per step 8 small host-to-device copies, 3
/// kernels and a blocking read. Prints its own wall time (after set-up and kernel build).
pub fn workload(steps: usize) -> Result<()> {
    let cl = open(false)?;
    let floats = 1usize << 14;
    let mut data = buffer(&cl, floats * 8)?;
    let partial = buffer(&cl, 64)?;
    let host: Vec<f32> = (0..floats).map(|i| (i % 5) as f32).collect();
    let square = Kernel::create(&cl.program, "square")?;
    let scale = Kernel::create(&cl.program, "scale")?;
    let reduce = Kernel::create(&cl.program, "reduce_sum")?;
    let mut out = vec![0f32; 64];
    let t = Instant::now();
    for _ in 0..steps {
        let _op = op("step");
        // SAFETY: offsets within the 8 * floats buffer; `host` outlives the blocking read.
        unsafe {
            for k in 0..8 {
                cl.queue.enqueue_write_buffer(
                    &mut data,
                    CL_NON_BLOCKING,
                    k * floats * 4,
                    &host,
                    &[],
                )?;
            }
            ExecuteKernel::new(&square)
                .set_arg(&data)
                .set_global_work_size(floats * 8)
                .enqueue_nd_range(&cl.queue)?;
            ExecuteKernel::new(&scale)
                .set_arg(&data)
                .set_arg(&0.5f32)
                .set_global_work_size(floats * 8)
                .enqueue_nd_range(&cl.queue)?;
            ExecuteKernel::new(&reduce)
                .set_arg(&data)
                .set_arg(&partial)
                .set_arg(&((floats * 8) as cl_uint))
                .set_global_work_size(64 * 64)
                .set_local_work_size(64)
                .enqueue_nd_range(&cl.queue)?;
            cl.queue
                .enqueue_read_buffer(&partial, CL_BLOCKING, 0, &mut out, &[])?;
        }
    }
    cl.queue.finish()?;
    println!(
        "{{\"steps\":{steps},\"workload_ns\":{},\"checksum\":{}}}",
        t.elapsed().as_nanos(),
        out.iter().sum::<f32>()
    );
    Ok(())
}

/// The changes `pair` can make to its base step, each predictable from the base's trace with
/// `strato whatif --scale` (issue 29's A/B validation, `benches/whatif_pairs.py`).
pub const PAIR_VARIANTS: &[&str] = &[
    "base",
    "kernel-half",
    "host-half",
    "copy-half",
    "both-half",
    "sync-mid",
    "post-half",
    "host-double",
    "sync-mid-kernel-half",
    "no-finish",
    "upload-blocking",
    "upload-second-queue",
];

/// How many steps `pair` runs of one variant before the other when they alternate and one of
/// them is `no-finish`: its steps overlap the next, so a block shows its steady pace.
pub const PAIR_BLOCK_OVERLAPPING: usize = 6;

/// Busy host work of `us` microseconds inside a framework-level op `name` (a `Backend` span, as a
/// framework op is, so the dependency graph holds it).
fn host_work(name: &str, us: u64) {
    rec::begin(
        rec::Level::Backend,
        rec::intern("cpu_op"),
        rec::intern(name),
    );
    let until = Instant::now() + std::time::Duration::from_micros(us);
    let mut x = 0u64;
    while Instant::now() < until {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
    rec::end();
}

/// What one step of `pair` does, by variant (see [`pair`]).
struct PairStep {
    half_kernel: bool,
    prepare_us: u64,
    postprocess_us: u64,
    sync_mid: bool,
    half_copy: bool,
    finish: bool,
    upload: Upload,
}

/// The `upload` op of the `upload-*` variants: after `matmul` is enqueued, the next step's
/// input (8 MiB) goes to the device.
#[derive(PartialEq)]
enum Upload {
    /// No upload (every other variant).
    None,
    /// A blocking write on the step's queue: the host waits for `matmul`, queued ahead of it,
    /// and for the copy, before `postprocess`.
    Blocking,
    /// A non-blocking write on a second queue: the host goes on to `postprocess` while the
    /// device works.
    SecondQueue,
}

impl PairStep {
    fn of(variant: &str) -> Result<Self> {
        if !PAIR_VARIANTS.contains(&variant) {
            return Err(anyhow!(
                "no variant {variant:?} (variants: {})",
                PAIR_VARIANTS.join(", ")
            ));
        }
        Ok(Self {
            half_kernel: matches!(
                variant,
                "kernel-half" | "both-half" | "sync-mid-kernel-half"
            ),
            prepare_us: match variant {
                "host-half" | "both-half" => 1500,
                "host-double" => 6000,
                _ => 3000,
            },
            postprocess_us: if variant == "post-half" { 500 } else { 1000 },
            sync_mid: matches!(variant, "sync-mid" | "sync-mid-kernel-half"),
            half_copy: variant == "copy-half",
            finish: variant != "no-finish",
            upload: match variant {
                "upload-blocking" => Upload::Blocking,
                "upload-second-queue" => Upload::SecondQueue,
                _ => Upload::None,
            },
        })
    }
}

/// A step of A/B pairs (`ProfilerStep#N` annotations): `prepare` on the host (3 ms), a
/// non-blocking host-to-device copy (8 MiB), `matmul` (N = 192), `postprocess` on the host
/// (1 ms, overlapping the device), then `clFinish`. `variant` makes exactly one change:
/// `kernel-half` runs `matmul` over half the rows (half the work), `host-half` halves
/// `prepare`, `copy-half` copies half the bytes, `both-half` halves `matmul` and `prepare`,
/// `sync-mid` waits for the device (`clFinish` inside an op `wait_result`) before
/// `postprocess` (the base is `sync-mid` with that synchronisation removed), `post-half`
/// halves `postprocess` (which overlaps the device), `host-double` doubles `prepare`,
/// `sync-mid-kernel-half` is `sync-mid` with `matmul` over half the rows, and `no-finish` ends
/// its steps without `clFinish` (the host runs ahead while the device works; one `clFinish`
/// after the last step, outside the steps). `upload-blocking` adds an op `upload` after
/// `matmul`'s launch: a blocking 8 MiB write of the next step's input on the step's queue (the
/// host waits for `matmul` and the copy before `postprocess`, as a `cudaMemcpy` from pageable
/// memory would); `upload-second-queue` makes that write non-blocking on a second queue (the
/// host runs `postprocess` while the device works; the step's `clFinish` waits for both
/// queues).
///
/// `A/B` (two variants) alternates them, so both meet the same machine (a shared VM's speed
/// changes over seconds, by more than a change between two programs run one after the other
/// can be told from): step by step, or, when a variant is `no-finish` (whose steps overlap the
/// next), by blocks of [`PAIR_BLOCK_OVERLAPPING`] steps, a block of `no-finish` ending with a
/// `clFinish` outside its steps.
/// Prints each step's wall time and variant.
pub fn pair(variant: &str, steps: usize) -> Result<()> {
    let kinds: Vec<PairStep> = variant
        .split('/')
        .map(PairStep::of)
        .collect::<Result<_>>()?;
    let names: Vec<&str> = variant.split('/').collect();
    let block = if kinds.iter().any(|k| !k.finish) {
        PAIR_BLOCK_OVERLAPPING
    } else {
        1
    };
    // The variant of step `step` (1-based; the warm-up step 0 runs the first).
    let which = |step: usize| (step.saturating_sub(1) / block) % kinds.len();
    let cl = open(false)?;
    let n = 192usize;
    let a = buffer(&cl, n * n)?;
    let b = buffer(&cl, n * n)?;
    let c = buffer(&cl, n * n)?;
    let copy_floats = 2usize << 20;
    let mut staging = buffer(&cl, copy_floats)?;
    let host: Vec<f32> = (0..copy_floats).map(|i| (i % 7) as f32).collect();
    let matmul = Kernel::create(&cl.program, "matmul")?;
    let uploads = kinds.iter().any(|k| k.upload != Upload::None);
    let mut next_input = if uploads {
        Some(buffer(&cl, copy_floats)?)
    } else {
        None
    };
    let second_queue = if kinds.iter().any(|k| k.upload == Upload::SecondQueue) {
        Some(CommandQueue::create_default_with_properties(
            &cl.context,
            0,
            0,
        )?)
    } else {
        None
    };
    let mut walls = Vec::with_capacity(steps);
    // One warm-up step (kernel compilation, first-touch of buffers), not annotated.
    for step in 0..=steps {
        let kind = &kinds[which(step)];
        let rows = if kind.half_kernel { n / 2 } else { n };
        let t = Instant::now();
        let _op = (step > 0).then(|| op(&format!("ProfilerStep#{step}")));
        host_work("prepare", kind.prepare_us);
        let bytes = if kind.half_copy {
            copy_floats / 2
        } else {
            copy_floats
        };
        // SAFETY: `host` outlives the copy (a clFinish after it waits for it); sizes are within
        // the buffers; matmul reads and writes n x n floats.
        unsafe {
            cl.queue
                .enqueue_write_buffer(&mut staging, CL_NON_BLOCKING, 0, &host[..bytes], &[])?;
            ExecuteKernel::new(&matmul)
                .set_arg(&a)
                .set_arg(&b)
                .set_arg(&c)
                .set_arg(&(n as cl_int))
                .set_global_work_sizes(&[n, rows])
                .enqueue_nd_range(&cl.queue)?;
        }
        if let (Some(next_input), true) = (next_input.as_mut(), kind.upload != Upload::None) {
            // A framework-level op (as `wait_result` is), so `--no-sync upload` can select it.
            rec::begin(
                rec::Level::Backend,
                rec::intern("cpu_op"),
                rec::intern("upload"),
            );
            let (queue, blocking) = match (&kind.upload, &second_queue) {
                (Upload::SecondQueue, Some(second)) => (second, CL_NON_BLOCKING),
                _ => (&cl.queue, CL_BLOCKING),
            };
            // SAFETY: `host` outlives the copy (the step's clFinish waits for both queues);
            // the size is the buffer's.
            let written =
                unsafe { queue.enqueue_write_buffer(next_input, blocking, 0, &host[..], &[]) };
            let flushed = if kind.upload == Upload::SecondQueue {
                // Submitted now, as a CUDA stream would: PoCL holds a second queue's commands
                // (and the first's) until a flush or a wait otherwise.
                cl.queue.flush().and_then(|()| queue.flush())
            } else {
                Ok(())
            };
            rec::end();
            written?;
            flushed?;
        }
        if kind.sync_mid {
            rec::begin(
                rec::Level::Backend,
                rec::intern("cpu_op"),
                rec::intern("wait_result"),
            );
            let waited = cl.queue.finish();
            rec::end();
            waited?;
        }
        host_work("postprocess", kind.postprocess_us);
        if kind.finish {
            cl.queue.finish()?;
            if let Some(second) = &second_queue {
                second.finish()?;
            }
        }
        drop(_op);
        if step > 0 {
            walls.push(t.elapsed().as_nanos() as u64);
        }
        if !kind.finish && step < steps && which(step + 1) != which(step) {
            // The end of a block of overlapping steps: the next block starts on an idle device.
            cl.queue.finish()?;
        }
    }
    cl.queue.finish()?;
    let walls: Vec<String> = walls.iter().map(u64::to_string).collect();
    let step_variants: Vec<String> = (1..=steps)
        .map(|step| format!("\"{}\"", names[which(step)]))
        .collect();
    println!(
        "{{\"variant\":\"{variant}\",\"steps\":{steps},\"step_ns\":[{}],\"step_variant\":[{}]}}",
        walls.join(","),
        step_variants.join(",")
    );
    Ok(())
}
