//! The hand-written hooks: calls whose arguments matter (queues, memory objects, kernels,
//! enqueues, sync points). Every hook calls the next layer with the application's arguments —
//! except that queues are created with `CL_QUEUE_PROFILING_ENABLE` added and enqueues get an
//! event pointer when the application passed none — and records around the call. All other
//! entries are the generated generic wrappers (`generated.rs`). Enqueues share `enqueue`;
//! entries that take the same arguments (read/write buffer, read/write rect, marker/barrier)
//! are each defined by one small macro.
//!
//! Safety, for every hook: the loader calls it through the dispatch table with the argument
//! types of `pfn::<name>` (the generated types follow `<CL/cl_icd.h>`), and it forwards to the
//! next layer's entry of the same type, which is non-null (hooks are installed only over
//! non-null entries). Pointers read here (work sizes, regions, property lists, kernel names,
//! returned handles) are the application's arguments as the OpenCL specification defines them;
//! each is checked for null first.
#![allow(non_snake_case, clippy::too_many_arguments, clippy::missing_safety_doc)]

use std::ffi::{c_char, CStr};
use std::fmt::Write as _;

use strato_record as rec;

use crate::cl::{self, CL_SUCCESS};
use crate::dispatch::{has_next, next};
use crate::generated::{idx, pfn, P};
use crate::trace::{api_begin, api_end, layer, Dir, Kind, Layer};

/// Reads `n` size_t values (work sizes, origins, regions).
///
/// # Safety
/// `p` is null or points to `n` readable `size_t`s.
unsafe fn sizes(p: P, n: usize) -> Option<Vec<u64>> {
    if p.is_null() || n == 0 || n > 3 {
        return None;
    }
    // SAFETY: the caller vouches for `n` readable values.
    Some(unsafe { std::slice::from_raw_parts(p as *const u64, n) }.to_vec())
}

fn list(v: &Option<Vec<u64>>) -> String {
    match v {
        None => "null".into(),
        Some(v) => format!(
            "[{}]",
            v.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
        ),
    }
}

fn json_str(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

/// Appends `"key":value` to a JSON object text.
fn with_field(mut json: String, key: &str, value: &str) -> String {
    if json.ends_with('}') {
        json.pop();
        if json.len() > 1 {
            json.push(',');
        }
    } else {
        json = String::from("{");
    }
    let _ = write!(json, "\"{key}\":{value}}}");
    json
}

/// What an enqueue does, for its spans.
struct Cmd {
    kind: Kind,
    name: rec::StrRef,
    args: String,
    bytes: u64,
}

fn copy_cmd(name: &str, dir: Dir, bytes: u64, blocking: bool) -> Cmd {
    Cmd {
        kind: Kind::Copy(dir),
        name: rec::intern(&format!("{name} {}", dir.label())),
        args: format!(
            "{{\"bytes\":{bytes},\"direction\":\"{}\",\"blocking\":{blocking}}}",
            dir.label()
        ),
        bytes,
    }
}

fn fill_cmd(name: &str, bytes: u64, pattern_bytes: u64) -> Cmd {
    Cmd {
        kind: Kind::Fill,
        name: rec::intern(name),
        args: format!("{{\"bytes\":{bytes},\"pattern_bytes\":{pattern_bytes}}}"),
        bytes,
    }
}

fn sync_cmd(name: &str, n: u32) -> Cmd {
    Cmd {
        kind: Kind::Sync,
        name: rec::intern(name),
        args: format!("{{\"wait_events\":{n}}}"),
        bytes: 0,
    }
}

/// The next layer's entry `name` as a function of type `pfn::name`, to be called.
macro_rules! next_entry {
    ($name:ident) => {
        next::<pfn::$name>(idx::$name)
    };
}

/// Whether an enqueue's return value says it succeeded.
trait Succeeded {
    fn succeeded(&self) -> bool;
}

/// A status: `CL_SUCCESS`.
impl Succeeded for i32 {
    fn succeeded(&self) -> bool {
        *self == CL_SUCCESS
    }
}

/// A returned pointer (`clEnqueueMapBuffer`): non-null.
impl Succeeded for P {
    fn succeeded(&self) -> bool {
        !self.is_null()
    }
}

/// The common part of every enqueue: times the call, gives it an event when device activity is
/// collected, records the API span and queues the command for draining. `call` gets the event
/// pointer to pass on.
///
/// # Safety
/// `event` is the application's `cl_event*` argument (null or writable).
unsafe fn enqueue<R: Succeeded>(
    entry: usize,
    queue: P,
    event: P,
    blocking: bool,
    describe: impl FnOnce(&Layer) -> Cmd,
    call: impl FnOnce(P) -> R,
) -> R {
    let Some(l) = layer() else {
        return call(event);
    };
    let event = event.cast::<P>();
    let device = l.level.device();
    let mut own: P = std::ptr::null_mut();
    let evp: *mut P = if device && event.is_null() {
        &mut own
    } else {
        event
    };
    let t0 = rec::now_ns();
    let r = call(evp.cast());
    let t1 = rec::now_ns();
    let success = r.succeeded();
    let cmd = describe(l);
    let corr = l.next_corr();
    let qid = l.queue_id(queue);
    if l.level.api() {
        let args = with_field(cmd.args.clone(), "queue", &qid.to_string());
        let args = if success {
            args
        } else {
            with_field(args, "failed", "true")
        };
        l.api_span(entry, t0, t1, Some(corr), Some(&args));
    }
    if device && success && !evp.is_null() {
        // SAFETY: `evp` is the application's event pointer or `own`; the runtime wrote it.
        let ev = unsafe { *evp };
        let layer_owned = event.is_null();
        if !ev.is_null() && (layer_owned || cl::retain_event(ev)) {
            l.add_pending(
                queue,
                ev,
                layer_owned,
                corr,
                cmd.kind,
                cmd.name,
                cmd.args,
                cmd.bytes,
                t0,
                t1,
            );
        }
    }
    if device && blocking && success {
        l.drain(queue, false);
    }
    r
}

// ---- queues ----------------------------------------------------------------------------------

/// Records a queue creation: the queue (when created) with the properties the application asked
/// for, and the API span.
fn queue_created(
    l: Option<&Layer>,
    entry: usize,
    t0: i64,
    q: P,
    dev: P,
    app_props: u64,
    profiling_added: bool,
) {
    let Some(l) = l else {
        return;
    };
    if !q.is_null() {
        l.add_queue(q, dev, app_props);
    }
    if l.level.api() {
        let args = format!("{{\"properties\":{app_props},\"profiling_added\":{profiling_added}}}");
        l.api_span(entry, t0, rec::now_ns(), None, Some(&args));
    }
}

pub unsafe extern "C" fn clCreateCommandQueue(ctx: P, dev: P, props: u64, err: P) -> P {
    let l = layer();
    let t0 = api_begin();
    let forced = l.is_some_and(|l| l.level.device());
    let props2 = if forced {
        props | cl::CL_QUEUE_PROFILING_ENABLE
    } else {
        props
    };
    // SAFETY: see the module header.
    let q = unsafe { next_entry!(clCreateCommandQueue)(ctx, dev, props2, err) };
    queue_created(
        l,
        idx::clCreateCommandQueue,
        t0,
        q,
        dev,
        props,
        props2 != props,
    );
    q
}

const CL_QUEUE_PROPERTIES_KEY: u64 = cl::CL_QUEUE_PROPERTIES as u64;

pub unsafe extern "C" fn clCreateCommandQueueWithProperties(ctx: P, dev: P, props: P, err: P) -> P {
    let l = layer();
    let t0 = api_begin();
    // The application's list: (key, value) pairs of cl_queue_properties (u64), 0-terminated.
    let mut list: Vec<u64> = Vec::new();
    if !props.is_null() {
        let p = props as *const u64;
        let mut i = 0;
        // SAFETY: a 0-terminated list of (key, value) pairs per the specification.
        while unsafe { *p.add(i) } != 0 && i < 64 {
            list.push(unsafe { *p.add(i) });
            list.push(unsafe { *p.add(i + 1) });
            i += 2;
        }
    }
    let app_props = list
        .chunks(2)
        .find(|kv| kv[0] == CL_QUEUE_PROPERTIES_KEY)
        .map_or(0, |kv| kv[1]);
    let forced =
        l.is_some_and(|l| l.level.device()) && app_props & cl::CL_QUEUE_PROFILING_ENABLE == 0;
    let mut mine = list.clone();
    if forced {
        match mine
            .chunks_mut(2)
            .find(|kv| kv[0] == CL_QUEUE_PROPERTIES_KEY)
        {
            Some(kv) => kv[1] |= cl::CL_QUEUE_PROFILING_ENABLE,
            None => mine.extend([CL_QUEUE_PROPERTIES_KEY, cl::CL_QUEUE_PROFILING_ENABLE]),
        }
    }
    mine.push(0);
    let arg: P = if forced {
        mine.as_mut_ptr().cast()
    } else {
        props
    };
    // SAFETY: see the module header; `mine` outlives the call.
    let q = unsafe { next_entry!(clCreateCommandQueueWithProperties)(ctx, dev, arg, err) };
    queue_created(
        l,
        idx::clCreateCommandQueueWithProperties,
        t0,
        q,
        dev,
        app_props,
        forced,
    );
    q
}

pub unsafe extern "C" fn clGetCommandQueueInfo(
    q: P,
    name: u32,
    size: u64,
    value: P,
    ret: P,
) -> i32 {
    let t0 = api_begin();
    // SAFETY: see the module header.
    let r = unsafe { next_entry!(clGetCommandQueueInfo)(q, name, size, value, ret) };
    // Hide the profiling flag the layer added: the application sees the queue it asked for.
    if r == CL_SUCCESS && name == cl::CL_QUEUE_PROPERTIES && !value.is_null() && size >= 8 {
        if let Some(false) = layer().and_then(|l| l.app_profiling(q)) {
            // SAFETY: the runtime just wrote a cl_command_queue_properties (u64) there.
            unsafe { *(value as *mut u64) &= !cl::CL_QUEUE_PROFILING_ENABLE };
        }
    }
    api_end(idx::clGetCommandQueueInfo, t0);
    r
}

pub unsafe extern "C" fn clReleaseCommandQueue(q: P) -> i32 {
    let t0 = api_begin();
    if let Some(l) = layer() {
        if l.level.device() {
            l.queue_releasing(q);
        }
    }
    // SAFETY: see the module header.
    let r = unsafe { next_entry!(clReleaseCommandQueue)(q) };
    api_end(idx::clReleaseCommandQueue, t0);
    r
}

/// Records a host wait that has just returned: drains the finished commands (`drain`) when
/// device activity is collected, then the API span.
fn waited(entry: usize, t0: i64, drain: impl FnOnce(&Layer), args: Option<&str>) {
    let t1 = rec::now_ns();
    if let Some(l) = layer() {
        if l.level.device() {
            drain(l);
        }
        if l.level.api() {
            l.api_span(entry, t0, t1, None, args);
        }
    }
}

pub unsafe extern "C" fn clFinish(q: P) -> i32 {
    let t0 = api_begin();
    // SAFETY: see the module header.
    let r = unsafe { next_entry!(clFinish)(q) };
    waited(idx::clFinish, t0, |l| l.drain(q, false), None);
    r
}

pub unsafe extern "C" fn clWaitForEvents(n: u32, events: P) -> i32 {
    let t0 = api_begin();
    // SAFETY: see the module header.
    let r = unsafe { next_entry!(clWaitForEvents)(n, events) };
    let args = format!("{{\"events\":{n}}}");
    waited(
        idx::clWaitForEvents,
        t0,
        |l| l.drain_all(false),
        Some(&args),
    );
    r
}

// ---- memory objects --------------------------------------------------------------------------

/// Records a buffer creation (API level): the allocation and the API span.
fn buffer_created(entry: usize, ctx: P, mem: P, t0: i64, flags: u64, size: u64) {
    let Some(l) = layer().filter(|l| l.level.api()) else {
        return;
    };
    let t1 = rec::now_ns();
    let created = l.mem_created(ctx, mem, t1);
    let destructors = has_next(idx::clSetMemObjectDestructorCallback);
    if let Some((_, _, id)) = created.filter(|_| destructors) {
        // Told when the implementation really frees the object (see `Layer::mem_destroyed`).
        // SAFETY: `mem` is the valid memory object just created; the entry is non-null
        // (checked); the callback has the specification's signature and `user_data` is a
        // plain number, never dereferenced.
        unsafe {
            next_entry!(clSetMemObjectDestructorCallback)(
                mem,
                mem_destroyed as *const () as P,
                id as usize as P,
            )
        };
    }
    let mut args = format!("{{\"bytes\":{size},\"flags\":{flags}");
    if let Some((_, dev, _)) = created {
        let _ = write!(args, ",\"device\":{dev}");
    }
    args.push('}');
    l.api_span(entry, t0, t1, None, Some(&args));
}

pub unsafe extern "C" fn clCreateBuffer(ctx: P, flags: u64, size: u64, host: P, err: P) -> P {
    let t0 = api_begin();
    // SAFETY: see the module header.
    let m = unsafe { next_entry!(clCreateBuffer)(ctx, flags, size, host, err) };
    buffer_created(idx::clCreateBuffer, ctx, m, t0, flags, size);
    m
}

pub unsafe extern "C" fn clCreateBufferWithProperties(
    ctx: P,
    props: P,
    flags: u64,
    size: u64,
    host: P,
    err: P,
) -> P {
    let t0 = api_begin();
    // SAFETY: see the module header.
    let m =
        unsafe { next_entry!(clCreateBufferWithProperties)(ctx, props, flags, size, host, err) };
    buffer_created(idx::clCreateBufferWithProperties, ctx, m, t0, flags, size);
    m
}

/// The destructor callback of every memory object the layer counts (`user_data`: the
/// layer's id for it).
extern "C" fn mem_destroyed(mem: P, user_data: P) {
    if let Some(l) = layer() {
        l.mem_destroyed(mem, user_data as usize as u64, rec::now_ns());
    }
}

pub unsafe extern "C" fn clReleaseMemObject(mem: P) -> i32 {
    let t0 = api_begin();
    let freed = layer()
        .filter(|l| l.level.api())
        .and_then(|l| l.mem_released(mem, t0));
    // SAFETY: see the module header.
    let r = unsafe { next_entry!(clReleaseMemObject)(mem) };
    if let Some(l) = layer() {
        if l.level.api() {
            let args = freed.map(|b| format!("{{\"freed_bytes\":{b}}}"));
            l.api_span(
                idx::clReleaseMemObject,
                t0,
                rec::now_ns(),
                None,
                args.as_deref(),
            );
        }
    }
    r
}

// ---- kernels ---------------------------------------------------------------------------------

pub unsafe extern "C" fn clCreateKernel(program: P, name: P, err: P) -> P {
    let t0 = api_begin();
    // SAFETY: see the module header.
    let k = unsafe { next_entry!(clCreateKernel)(program, name, err) };
    if let Some(l) = layer() {
        let text = if name.is_null() {
            String::new()
        } else {
            // SAFETY: `kernel_name` is a NUL-terminated string per the specification.
            unsafe { CStr::from_ptr(name as *const c_char) }
                .to_string_lossy()
                .into_owned()
        };
        l.kernel_created(k, &text);
        if l.level.api() {
            let args = format!("{{\"kernel\":{}}}", json_str(&text));
            l.api_span(idx::clCreateKernel, t0, rec::now_ns(), None, Some(&args));
        }
    }
    k
}

pub unsafe extern "C" fn clCreateKernelsInProgram(program: P, n: u32, kernels: P, n_ret: P) -> i32 {
    let t0 = api_begin();
    // SAFETY: see the module header.
    let r = unsafe { next_entry!(clCreateKernelsInProgram)(program, n, kernels, n_ret) };
    if let Some(l) = layer() {
        if r == CL_SUCCESS && !kernels.is_null() {
            let count = if n_ret.is_null() {
                n
            } else {
                // SAFETY: the runtime wrote the number of kernels there.
                n.min(unsafe { *(n_ret as *const u32) })
            };
            for i in 0..count as usize {
                // SAFETY: the runtime wrote `count` kernel handles into `kernels`.
                let k = unsafe { *(kernels as *const P).add(i) };
                let name = cl::kernel_name(k).unwrap_or_default();
                l.kernel_created(k, &name);
            }
        }
        api_end(idx::clCreateKernelsInProgram, t0);
    }
    r
}

pub unsafe extern "C" fn clCloneKernel(src: P, err: P) -> P {
    let t0 = api_begin();
    // SAFETY: see the module header.
    let k = unsafe { next_entry!(clCloneKernel)(src, err) };
    if let Some(l) = layer() {
        if let Some(text) = cl::kernel_name(src) {
            l.kernel_created(k, &text);
        }
        api_end(idx::clCloneKernel, t0);
    }
    k
}

pub unsafe extern "C" fn clReleaseKernel(k: P) -> i32 {
    let t0 = api_begin();
    if let Some(l) = layer() {
        l.kernel_released(k);
    }
    // SAFETY: see the module header.
    let r = unsafe { next_entry!(clReleaseKernel)(k) };
    api_end(idx::clReleaseKernel, t0);
    r
}

// ---- enqueues --------------------------------------------------------------------------------

fn kernel_cmd(
    l: &Layer,
    kernel: P,
    dim: u32,
    gws: &Option<Vec<u64>>,
    lws: &Option<Vec<u64>>,
) -> Cmd {
    let name = l.kernel_name(kernel);
    let items: u64 = gws.as_ref().map_or(1, |g| g.iter().product());
    Cmd {
        kind: Kind::Kernel,
        name,
        args: format!(
            "{{\"work_dim\":{dim},\"gws\":{},\"lws\":{},\"work_items\":{items}}}",
            list(gws),
            list(lws)
        ),
        bytes: 0,
    }
}

pub unsafe extern "C" fn clEnqueueNDRangeKernel(
    q: P,
    k: P,
    dim: u32,
    offset: P,
    gws: P,
    lws: P,
    n: u32,
    wl: P,
    ev: P,
) -> i32 {
    // SAFETY: see the module header; work sizes are `dim` size_t values (or null for lws).
    unsafe {
        enqueue(
            idx::clEnqueueNDRangeKernel,
            q,
            ev,
            false,
            |l| {
                let (g, lo) = (sizes(gws, dim as usize), sizes(lws, dim as usize));
                kernel_cmd(l, k, dim, &g, &lo)
            },
            |e| next_entry!(clEnqueueNDRangeKernel)(q, k, dim, offset, gws, lws, n, wl, e),
        )
    }
}

pub unsafe extern "C" fn clEnqueueTask(q: P, k: P, n: u32, wl: P, ev: P) -> i32 {
    // SAFETY: see the module header.
    unsafe {
        enqueue(
            idx::clEnqueueTask,
            q,
            ev,
            false,
            |l| kernel_cmd(l, k, 1, &Some(vec![1]), &Some(vec![1])),
            |e| next_entry!(clEnqueueTask)(q, k, n, wl, e),
        )
    }
}

/// Defines `clEnqueueReadBuffer` or `clEnqueueWriteBuffer` (the same arguments): a copy of
/// `size` bytes in direction `$dir`, named `$label`.
macro_rules! buffer_copy_hook {
    ($entry:ident, $label:literal, $dir:expr) => {
        pub unsafe extern "C" fn $entry(
            q: P,
            buf: P,
            blocking: u32,
            offset: u64,
            size: u64,
            ptr: P,
            n: u32,
            wl: P,
            ev: P,
        ) -> i32 {
            let b = blocking != 0;
            // SAFETY: see the module header.
            unsafe {
                enqueue(
                    idx::$entry,
                    q,
                    ev,
                    b,
                    |_| copy_cmd($label, $dir, size, b),
                    |e| next_entry!($entry)(q, buf, blocking, offset, size, ptr, n, wl, e),
                )
            }
        }
    };
}

buffer_copy_hook!(clEnqueueReadBuffer, "ReadBuffer", Dir::DtoH);
buffer_copy_hook!(clEnqueueWriteBuffer, "WriteBuffer", Dir::HtoD);

pub unsafe extern "C" fn clEnqueueCopyBuffer(
    q: P,
    src: P,
    dst: P,
    so: u64,
    dof: u64,
    size: u64,
    n: u32,
    wl: P,
    ev: P,
) -> i32 {
    // SAFETY: see the module header.
    unsafe {
        enqueue(
            idx::clEnqueueCopyBuffer,
            q,
            ev,
            false,
            |_| copy_cmd("CopyBuffer", Dir::DtoD, size, false),
            |e| next_entry!(clEnqueueCopyBuffer)(q, src, dst, so, dof, size, n, wl, e),
        )
    }
}

/// Bytes of a rect region (`size_t[3]`).
///
/// # Safety
/// `region` is null or points to 3 size_t values.
unsafe fn region_bytes(region: P) -> u64 {
    // SAFETY: forwarded.
    unsafe { sizes(region, 3) }.map_or(0, |r| r.iter().product())
}

/// Defines `clEnqueueReadBufferRect` or `clEnqueueWriteBufferRect` (the same arguments): a copy
/// of the `region`'s bytes in direction `$dir`, named `$label`.
macro_rules! buffer_rect_copy_hook {
    ($entry:ident, $label:literal, $dir:expr) => {
        pub unsafe extern "C" fn $entry(
            q: P,
            buf: P,
            blocking: u32,
            bo: P,
            ho: P,
            region: P,
            brp: u64,
            bsp: u64,
            hrp: u64,
            hsp: u64,
            ptr: P,
            n: u32,
            wl: P,
            ev: P,
        ) -> i32 {
            let b = blocking != 0;
            // SAFETY: see the module header; `region` is size_t[3].
            unsafe {
                let bytes = region_bytes(region);
                enqueue(
                    idx::$entry,
                    q,
                    ev,
                    b,
                    |_| copy_cmd($label, $dir, bytes, b),
                    |e| {
                        next_entry!($entry)(
                            q, buf, blocking, bo, ho, region, brp, bsp, hrp, hsp, ptr, n, wl, e,
                        )
                    },
                )
            }
        }
    };
}

buffer_rect_copy_hook!(clEnqueueReadBufferRect, "ReadBufferRect", Dir::DtoH);
buffer_rect_copy_hook!(clEnqueueWriteBufferRect, "WriteBufferRect", Dir::HtoD);

pub unsafe extern "C" fn clEnqueueCopyBufferRect(
    q: P,
    src: P,
    dst: P,
    so: P,
    dof: P,
    region: P,
    srp: u64,
    ssp: u64,
    drp: u64,
    dsp: u64,
    n: u32,
    wl: P,
    ev: P,
) -> i32 {
    // SAFETY: see the module header; `region` is size_t[3].
    unsafe {
        let bytes = region_bytes(region);
        enqueue(
            idx::clEnqueueCopyBufferRect,
            q,
            ev,
            false,
            |_| copy_cmd("CopyBufferRect", Dir::DtoD, bytes, false),
            |e| {
                next_entry!(clEnqueueCopyBufferRect)(
                    q, src, dst, so, dof, region, srp, ssp, drp, dsp, n, wl, e,
                )
            },
        )
    }
}

pub unsafe extern "C" fn clEnqueueFillBuffer(
    q: P,
    buf: P,
    pattern: P,
    psize: u64,
    offset: u64,
    size: u64,
    n: u32,
    wl: P,
    ev: P,
) -> i32 {
    // SAFETY: see the module header.
    unsafe {
        enqueue(
            idx::clEnqueueFillBuffer,
            q,
            ev,
            false,
            |_| fill_cmd("FillBuffer", size, psize),
            |e| next_entry!(clEnqueueFillBuffer)(q, buf, pattern, psize, offset, size, n, wl, e),
        )
    }
}

pub unsafe extern "C" fn clEnqueueMapBuffer(
    q: P,
    buf: P,
    blocking: u32,
    flags: u64,
    offset: u64,
    size: u64,
    n: u32,
    wl: P,
    ev: P,
    err: P,
) -> P {
    let b = blocking != 0;
    let dir = if flags & cl::CL_MAP_READ != 0 {
        Dir::DtoH
    } else {
        Dir::HtoD
    };
    // SAFETY: see the module header.
    unsafe {
        enqueue(
            idx::clEnqueueMapBuffer,
            q,
            ev,
            b,
            |_| copy_cmd("MapBuffer", dir, size, b),
            |e| {
                next_entry!(clEnqueueMapBuffer)(
                    q, buf, blocking, flags, offset, size, n, wl, e, err,
                )
            },
        )
    }
}

pub unsafe extern "C" fn clEnqueueUnmapMemObject(
    q: P,
    mem: P,
    ptr: P,
    n: u32,
    wl: P,
    ev: P,
) -> i32 {
    // SAFETY: see the module header.
    unsafe {
        enqueue(
            idx::clEnqueueUnmapMemObject,
            q,
            ev,
            false,
            |_| Cmd {
                kind: Kind::Sync,
                name: rec::intern("UnmapMemObject"),
                args: "{}".into(),
                bytes: 0,
            },
            |e| next_entry!(clEnqueueUnmapMemObject)(q, mem, ptr, n, wl, e),
        )
    }
}

/// Defines `clEnqueueMarkerWithWaitList` or `clEnqueueBarrierWithWaitList` (the same
/// arguments): a sync command named `$label`.
macro_rules! wait_list_hook {
    ($entry:ident, $label:literal) => {
        pub unsafe extern "C" fn $entry(q: P, n: u32, wl: P, ev: P) -> i32 {
            // SAFETY: see the module header.
            unsafe {
                enqueue(
                    idx::$entry,
                    q,
                    ev,
                    false,
                    |_| sync_cmd($label, n),
                    |e| next_entry!($entry)(q, n, wl, e),
                )
            }
        }
    };
}

wait_list_hook!(clEnqueueMarkerWithWaitList, "Marker");
wait_list_hook!(clEnqueueBarrierWithWaitList, "Barrier");

pub unsafe extern "C" fn clEnqueueMigrateMemObjects(
    q: P,
    nmem: u32,
    mems: P,
    flags: u64,
    n: u32,
    wl: P,
    ev: P,
) -> i32 {
    let dir = if flags & cl::CL_MIGRATE_MEM_OBJECT_HOST != 0 {
        Dir::DtoH
    } else {
        Dir::HtoD
    };
    // SAFETY: see the module header; `mems` holds `nmem` handles.
    unsafe {
        enqueue(
            idx::clEnqueueMigrateMemObjects,
            q,
            ev,
            false,
            |l| {
                let mut bytes = 0;
                if !mems.is_null() {
                    for i in 0..nmem as usize {
                        bytes += l.mem_bytes(*(mems as *const P).add(i));
                    }
                }
                copy_cmd("MigrateMemObjects", dir, bytes, false)
            },
            |e| next_entry!(clEnqueueMigrateMemObjects)(q, nmem, mems, flags, n, wl, e),
        )
    }
}

pub unsafe extern "C" fn clEnqueueSVMMemcpy(
    q: P,
    blocking: u32,
    dst: P,
    src: P,
    size: u64,
    n: u32,
    wl: P,
    ev: P,
) -> i32 {
    let b = blocking != 0;
    // SAFETY: see the module header.
    unsafe {
        enqueue(
            idx::clEnqueueSVMMemcpy,
            q,
            ev,
            b,
            |_| copy_cmd("SVMMemcpy", Dir::Unknown, size, b),
            |e| next_entry!(clEnqueueSVMMemcpy)(q, blocking, dst, src, size, n, wl, e),
        )
    }
}

pub unsafe extern "C" fn clEnqueueSVMMemFill(
    q: P,
    ptr: P,
    pattern: P,
    psize: u64,
    size: u64,
    n: u32,
    wl: P,
    ev: P,
) -> i32 {
    // SAFETY: see the module header.
    unsafe {
        enqueue(
            idx::clEnqueueSVMMemFill,
            q,
            ev,
            false,
            |_| fill_cmd("SVMMemFill", size, psize),
            |e| next_entry!(clEnqueueSVMMemFill)(q, ptr, pattern, psize, size, n, wl, e),
        )
    }
}
