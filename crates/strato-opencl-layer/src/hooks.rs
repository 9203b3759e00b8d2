//! The hand-written hooks: calls whose arguments matter (queues, memory objects, kernels,
//! enqueues, sync points). Every hook calls the next layer with the application's arguments —
//! except that queues are created with `CL_QUEUE_PROFILING_ENABLE` added and enqueues get an
//! event pointer when the application passed none — and records around the call. All other
//! entries are the generated generic wrappers (`generated.rs`).
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
use crate::dispatch::next;
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

/// The common part of every enqueue: times the call, gives it an event when device activity is
/// collected, records the API span and queues the command for draining.
///
/// # Safety
/// `event` is the application's `cl_event*` argument (null or writable).
unsafe fn enqueue<R>(
    entry: usize,
    queue: P,
    event: *mut P,
    blocking: bool,
    describe: impl FnOnce(&Layer) -> Cmd,
    call: impl FnOnce(*mut P) -> R,
    ok: impl FnOnce(&R) -> bool,
) -> R {
    let Some(l) = layer() else {
        return call(event);
    };
    let device = l.level.device();
    let mut own: P = std::ptr::null_mut();
    let evp: *mut P = if device && event.is_null() {
        &mut own
    } else {
        event
    };
    let t0 = rec::now_ns();
    let r = call(evp);
    let t1 = rec::now_ns();
    let success = ok(&r);
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
    let q = unsafe {
        next::<pfn::clCreateCommandQueue>(idx::clCreateCommandQueue)(ctx, dev, props2, err)
    };
    if let Some(l) = l {
        if !q.is_null() {
            l.add_queue(q, dev, props);
        }
        if l.level.api() {
            let args = format!(
                "{{\"properties\":{props},\"profiling_added\":{}}}",
                props2 != props
            );
            l.api_span(
                idx::clCreateCommandQueue,
                t0,
                rec::now_ns(),
                None,
                Some(&args),
            );
        }
    }
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
    let q = unsafe {
        next::<pfn::clCreateCommandQueueWithProperties>(idx::clCreateCommandQueueWithProperties)(
            ctx, dev, arg, err,
        )
    };
    if let Some(l) = l {
        if !q.is_null() {
            l.add_queue(q, dev, app_props);
        }
        if l.level.api() {
            let args = format!("{{\"properties\":{app_props},\"profiling_added\":{forced}}}");
            l.api_span(
                idx::clCreateCommandQueueWithProperties,
                t0,
                rec::now_ns(),
                None,
                Some(&args),
            );
        }
    }
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
    let r = unsafe {
        next::<pfn::clGetCommandQueueInfo>(idx::clGetCommandQueueInfo)(q, name, size, value, ret)
    };
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
    let r = unsafe { next::<pfn::clReleaseCommandQueue>(idx::clReleaseCommandQueue)(q) };
    api_end(idx::clReleaseCommandQueue, t0);
    r
}

pub unsafe extern "C" fn clFinish(q: P) -> i32 {
    let t0 = api_begin();
    // SAFETY: see the module header.
    let r = unsafe { next::<pfn::clFinish>(idx::clFinish)(q) };
    let t1 = rec::now_ns();
    if let Some(l) = layer() {
        if l.level.device() {
            l.drain(q, false);
        }
        if l.level.api() {
            l.api_span(idx::clFinish, t0, t1, None, None);
        }
    }
    r
}

pub unsafe extern "C" fn clWaitForEvents(n: u32, events: P) -> i32 {
    let t0 = api_begin();
    // SAFETY: see the module header.
    let r = unsafe { next::<pfn::clWaitForEvents>(idx::clWaitForEvents)(n, events) };
    let t1 = rec::now_ns();
    if let Some(l) = layer() {
        if l.level.device() {
            l.drain_all(false);
        }
        if l.level.api() {
            l.api_span(
                idx::clWaitForEvents,
                t0,
                t1,
                None,
                Some(&format!("{{\"events\":{n}}}")),
            );
        }
    }
    r
}

// ---- memory objects --------------------------------------------------------------------------

fn mem_api(l: &Layer, entry: usize, ctx: P, mem: P, t0: i64, flags: u64, size: u64) {
    if !l.level.api() {
        return;
    }
    let t1 = rec::now_ns();
    let created = l.mem_created(ctx, mem, t1);
    let mut args = format!("{{\"bytes\":{size},\"flags\":{flags}");
    if let Some((_, dev)) = created {
        let _ = write!(args, ",\"device\":{dev}");
    }
    args.push('}');
    l.api_span(entry, t0, t1, None, Some(&args));
}

pub unsafe extern "C" fn clCreateBuffer(ctx: P, flags: u64, size: u64, host: P, err: P) -> P {
    let t0 = api_begin();
    // SAFETY: see the module header.
    let m =
        unsafe { next::<pfn::clCreateBuffer>(idx::clCreateBuffer)(ctx, flags, size, host, err) };
    if let Some(l) = layer() {
        mem_api(l, idx::clCreateBuffer, ctx, m, t0, flags, size);
    }
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
    let m = unsafe {
        next::<pfn::clCreateBufferWithProperties>(idx::clCreateBufferWithProperties)(
            ctx, props, flags, size, host, err,
        )
    };
    if let Some(l) = layer() {
        mem_api(
            l,
            idx::clCreateBufferWithProperties,
            ctx,
            m,
            t0,
            flags,
            size,
        );
    }
    m
}

pub unsafe extern "C" fn clReleaseMemObject(mem: P) -> i32 {
    let t0 = api_begin();
    let freed = layer()
        .filter(|l| l.level.api())
        .and_then(|l| l.mem_released(mem, t0));
    // SAFETY: see the module header.
    let r = unsafe { next::<pfn::clReleaseMemObject>(idx::clReleaseMemObject)(mem) };
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
    let k = unsafe { next::<pfn::clCreateKernel>(idx::clCreateKernel)(program, name, err) };
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
    let r = unsafe {
        next::<pfn::clCreateKernelsInProgram>(idx::clCreateKernelsInProgram)(
            program, n, kernels, n_ret,
        )
    };
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
    let k = unsafe { next::<pfn::clCloneKernel>(idx::clCloneKernel)(src, err) };
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
    let r = unsafe { next::<pfn::clReleaseKernel>(idx::clReleaseKernel)(k) };
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
    let f = || {
        // SAFETY: work sizes are `dim` size_t values (or null for lws).
        let (g, lo) = unsafe { (sizes(gws, dim as usize), sizes(lws, dim as usize)) };
        (g, lo)
    };
    // SAFETY: see the module header.
    unsafe {
        enqueue(
            idx::clEnqueueNDRangeKernel,
            q,
            ev as *mut P,
            false,
            |l| {
                let (g, lo) = f();
                kernel_cmd(l, k, dim, &g, &lo)
            },
            |e| {
                next::<pfn::clEnqueueNDRangeKernel>(idx::clEnqueueNDRangeKernel)(
                    q, k, dim, offset, gws, lws, n, wl, e as P,
                )
            },
            |r| *r == CL_SUCCESS,
        )
    }
}

pub unsafe extern "C" fn clEnqueueTask(q: P, k: P, n: u32, wl: P, ev: P) -> i32 {
    // SAFETY: see the module header.
    unsafe {
        enqueue(
            idx::clEnqueueTask,
            q,
            ev as *mut P,
            false,
            |l| kernel_cmd(l, k, 1, &Some(vec![1]), &Some(vec![1])),
            |e| next::<pfn::clEnqueueTask>(idx::clEnqueueTask)(q, k, n, wl, e as P),
            |r| *r == CL_SUCCESS,
        )
    }
}

pub unsafe extern "C" fn clEnqueueReadBuffer(
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
            idx::clEnqueueReadBuffer,
            q,
            ev as *mut P,
            b,
            |_| copy_cmd("ReadBuffer", Dir::DtoH, size, b),
            |e| {
                next::<pfn::clEnqueueReadBuffer>(idx::clEnqueueReadBuffer)(
                    q, buf, blocking, offset, size, ptr, n, wl, e as P,
                )
            },
            |r| *r == CL_SUCCESS,
        )
    }
}

pub unsafe extern "C" fn clEnqueueWriteBuffer(
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
            idx::clEnqueueWriteBuffer,
            q,
            ev as *mut P,
            b,
            |_| copy_cmd("WriteBuffer", Dir::HtoD, size, b),
            |e| {
                next::<pfn::clEnqueueWriteBuffer>(idx::clEnqueueWriteBuffer)(
                    q, buf, blocking, offset, size, ptr, n, wl, e as P,
                )
            },
            |r| *r == CL_SUCCESS,
        )
    }
}

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
            ev as *mut P,
            false,
            |_| copy_cmd("CopyBuffer", Dir::DtoD, size, false),
            |e| {
                next::<pfn::clEnqueueCopyBuffer>(idx::clEnqueueCopyBuffer)(
                    q, src, dst, so, dof, size, n, wl, e as P,
                )
            },
            |r| *r == CL_SUCCESS,
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

pub unsafe extern "C" fn clEnqueueReadBufferRect(
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
            idx::clEnqueueReadBufferRect,
            q,
            ev as *mut P,
            b,
            |_| copy_cmd("ReadBufferRect", Dir::DtoH, bytes, b),
            |e| {
                next::<pfn::clEnqueueReadBufferRect>(idx::clEnqueueReadBufferRect)(
                    q, buf, blocking, bo, ho, region, brp, bsp, hrp, hsp, ptr, n, wl, e as P,
                )
            },
            |r| *r == CL_SUCCESS,
        )
    }
}

pub unsafe extern "C" fn clEnqueueWriteBufferRect(
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
            idx::clEnqueueWriteBufferRect,
            q,
            ev as *mut P,
            b,
            |_| copy_cmd("WriteBufferRect", Dir::HtoD, bytes, b),
            |e| {
                next::<pfn::clEnqueueWriteBufferRect>(idx::clEnqueueWriteBufferRect)(
                    q, buf, blocking, bo, ho, region, brp, bsp, hrp, hsp, ptr, n, wl, e as P,
                )
            },
            |r| *r == CL_SUCCESS,
        )
    }
}

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
            ev as *mut P,
            false,
            |_| copy_cmd("CopyBufferRect", Dir::DtoD, bytes, false),
            |e| {
                next::<pfn::clEnqueueCopyBufferRect>(idx::clEnqueueCopyBufferRect)(
                    q, src, dst, so, dof, region, srp, ssp, drp, dsp, n, wl, e as P,
                )
            },
            |r| *r == CL_SUCCESS,
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
            ev as *mut P,
            false,
            |_| Cmd {
                kind: Kind::Fill,
                name: rec::intern("FillBuffer"),
                args: format!("{{\"bytes\":{size},\"pattern_bytes\":{psize}}}"),
                bytes: size,
            },
            |e| {
                next::<pfn::clEnqueueFillBuffer>(idx::clEnqueueFillBuffer)(
                    q, buf, pattern, psize, offset, size, n, wl, e as P,
                )
            },
            |r| *r == CL_SUCCESS,
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
            ev as *mut P,
            b,
            |_| copy_cmd("MapBuffer", dir, size, b),
            |e| {
                next::<pfn::clEnqueueMapBuffer>(idx::clEnqueueMapBuffer)(
                    q, buf, blocking, flags, offset, size, n, wl, e as P, err,
                )
            },
            |r| !r.is_null(),
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
            ev as *mut P,
            false,
            |_| Cmd {
                kind: Kind::Sync,
                name: rec::intern("UnmapMemObject"),
                args: "{}".into(),
                bytes: 0,
            },
            |e| {
                next::<pfn::clEnqueueUnmapMemObject>(idx::clEnqueueUnmapMemObject)(
                    q, mem, ptr, n, wl, e as P,
                )
            },
            |r| *r == CL_SUCCESS,
        )
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

pub unsafe extern "C" fn clEnqueueMarkerWithWaitList(q: P, n: u32, wl: P, ev: P) -> i32 {
    // SAFETY: see the module header.
    unsafe {
        enqueue(
            idx::clEnqueueMarkerWithWaitList,
            q,
            ev as *mut P,
            false,
            |_| sync_cmd("Marker", n),
            |e| {
                next::<pfn::clEnqueueMarkerWithWaitList>(idx::clEnqueueMarkerWithWaitList)(
                    q, n, wl, e as P,
                )
            },
            |r| *r == CL_SUCCESS,
        )
    }
}

pub unsafe extern "C" fn clEnqueueBarrierWithWaitList(q: P, n: u32, wl: P, ev: P) -> i32 {
    // SAFETY: see the module header.
    unsafe {
        enqueue(
            idx::clEnqueueBarrierWithWaitList,
            q,
            ev as *mut P,
            false,
            |_| sync_cmd("Barrier", n),
            |e| {
                next::<pfn::clEnqueueBarrierWithWaitList>(idx::clEnqueueBarrierWithWaitList)(
                    q, n, wl, e as P,
                )
            },
            |r| *r == CL_SUCCESS,
        )
    }
}

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
            ev as *mut P,
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
            |e| {
                next::<pfn::clEnqueueMigrateMemObjects>(idx::clEnqueueMigrateMemObjects)(
                    q, nmem, mems, flags, n, wl, e as P,
                )
            },
            |r| *r == CL_SUCCESS,
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
            ev as *mut P,
            b,
            |_| copy_cmd("SVMMemcpy", Dir::Unknown, size, b),
            |e| {
                next::<pfn::clEnqueueSVMMemcpy>(idx::clEnqueueSVMMemcpy)(
                    q, blocking, dst, src, size, n, wl, e as P,
                )
            },
            |r| *r == CL_SUCCESS,
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
            ev as *mut P,
            false,
            |_| Cmd {
                kind: Kind::Fill,
                name: rec::intern("SVMMemFill"),
                args: format!("{{\"bytes\":{size},\"pattern_bytes\":{psize}}}"),
                bytes: size,
            },
            |e| {
                next::<pfn::clEnqueueSVMMemFill>(idx::clEnqueueSVMMemFill)(
                    q, ptr, pattern, psize, size, n, wl, e as P,
                )
            },
            |r| *r == CL_SUCCESS,
        )
    }
}
