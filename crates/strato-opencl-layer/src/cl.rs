//! OpenCL constants and small wrappers that query objects through the **next** layer's table
//! (never through the loader: that would re-enter this layer). Every wrapper takes a handle the
//! application (or the runtime) gave the layer and returns `None` on any error.

// Handles are opaque: the layer never dereferences them, it passes them to the runtime, which
// validates them (an invalid handle is an error code, not undefined behaviour, in PoCL/ICDs).
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use std::ffi::c_void;

use crate::dispatch::{has_next, next};
use crate::generated::{idx, pfn, P};

pub const CL_SUCCESS: i32 = 0;
pub const CL_COMPLETE: i32 = 0;
pub const CL_TRUE: u32 = 1;

pub const CL_QUEUE_PROFILING_ENABLE: u64 = 1 << 1;
pub const CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE: u64 = 1 << 0;
pub const CL_QUEUE_PROPERTIES: u32 = 0x1093;
pub const CL_QUEUE_DEVICE: u32 = 0x1091;
pub const CL_QUEUE_REFERENCE_COUNT: u32 = 0x1092;

pub const CL_EVENT_REFERENCE_COUNT: u32 = 0x11D2;
pub const CL_EVENT_COMMAND_EXECUTION_STATUS: u32 = 0x11D3;
pub const CL_PROFILING_COMMAND_QUEUED: u32 = 0x1280;
pub const CL_PROFILING_COMMAND_SUBMIT: u32 = 0x1281;
pub const CL_PROFILING_COMMAND_START: u32 = 0x1282;
pub const CL_PROFILING_COMMAND_END: u32 = 0x1283;

pub const CL_MEM_SIZE: u32 = 0x1102;
pub const CL_MEM_REFERENCE_COUNT: u32 = 0x1105;
pub const CL_MEM_ASSOCIATED_MEMOBJECT: u32 = 0x1107;
pub const CL_MIGRATE_MEM_OBJECT_HOST: u64 = 1 << 0;
pub const CL_MAP_READ: u64 = 1 << 0;

pub const CL_KERNEL_FUNCTION_NAME: u32 = 0x1190;
pub const CL_KERNEL_REFERENCE_COUNT: u32 = 0x1192;
pub const CL_CONTEXT_DEVICES: u32 = 0x1081;

pub const CL_DEVICE_MAX_COMPUTE_UNITS: u32 = 0x1002;
pub const CL_DEVICE_MAX_CLOCK_FREQUENCY: u32 = 0x100C;
pub const CL_DEVICE_GLOBAL_MEM_SIZE: u32 = 0x101F;
pub const CL_DEVICE_PROFILING_TIMER_RESOLUTION: u32 = 0x1025;
pub const CL_DEVICE_NAME: u32 = 0x102B;
pub const CL_DEVICE_VENDOR: u32 = 0x102C;
pub const CL_DEVICE_VERSION: u32 = 0x102F;
pub const CL_DEVICE_PLATFORM: u32 = 0x1031;
pub const CL_PLATFORM_NAME: u32 = 0x0902;

/// A fixed-size info query (`clGet*Info` shape: handle, name, size, value, size_ret).
fn info_fixed<T: Copy + Default>(entry: usize, handle: P, name: u32) -> Option<T> {
    if handle.is_null() || !has_next(entry) {
        return None;
    }
    let mut v = T::default();
    // SAFETY: every `clGet*Info` entry used here has the `pfn::clGetMemObjectInfo` shape
    // (handle, u32, size_t, void*, size_t*); `v` is writable for `size_of::<T>()` bytes and the
    // runtime writes at most that many.
    let r = unsafe {
        next::<pfn::clGetMemObjectInfo>(entry)(
            handle,
            name,
            std::mem::size_of::<T>() as u64,
            (&mut v as *mut T).cast::<c_void>(),
            std::ptr::null_mut(),
        )
    };
    (r == CL_SUCCESS).then_some(v)
}

/// A string info query.
fn info_string(entry: usize, handle: P, name: u32) -> Option<String> {
    if handle.is_null() || !has_next(entry) {
        return None;
    }
    let mut size: u64 = 0;
    // SAFETY: size query: null value pointer, `size` is writable.
    let r = unsafe {
        next::<pfn::clGetMemObjectInfo>(entry)(
            handle,
            name,
            0,
            std::ptr::null_mut(),
            &mut size as *mut u64 as P,
        )
    };
    if r != CL_SUCCESS || size == 0 || size > 1 << 20 {
        return None;
    }
    let mut buf = vec![0u8; size as usize];
    // SAFETY: `buf` holds `size` writable bytes.
    let r = unsafe {
        next::<pfn::clGetMemObjectInfo>(entry)(
            handle,
            name,
            size,
            buf.as_mut_ptr().cast::<c_void>(),
            std::ptr::null_mut(),
        )
    };
    if r != CL_SUCCESS {
        return None;
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Some(String::from_utf8_lossy(&buf[..end]).into_owned())
}

/// Execution status of an event (`CL_COMPLETE` = 0, negative = error).
pub fn event_status(ev: P) -> Option<i32> {
    info_fixed::<i32>(idx::clGetEventInfo, ev, CL_EVENT_COMMAND_EXECUTION_STATUS)
}

/// Reference count of an event.
pub fn event_refcount(ev: P) -> Option<u32> {
    info_fixed::<u32>(idx::clGetEventInfo, ev, CL_EVENT_REFERENCE_COUNT)
}

/// QUEUED, SUBMIT, START, END of a completed command (device clock, ns).
pub fn profiling(ev: P) -> Option<[u64; 4]> {
    if ev.is_null() || !has_next(idx::clGetEventProfilingInfo) {
        return None;
    }
    let mut out = [0u64; 4];
    let names = [
        CL_PROFILING_COMMAND_QUEUED,
        CL_PROFILING_COMMAND_SUBMIT,
        CL_PROFILING_COMMAND_START,
        CL_PROFILING_COMMAND_END,
    ];
    for (slot, name) in out.iter_mut().zip(names) {
        // SAFETY: `slot` is a writable u64, the size passed.
        let r = unsafe {
            next::<pfn::clGetEventProfilingInfo>(idx::clGetEventProfilingInfo)(
                ev,
                name,
                8,
                (slot as *mut u64).cast::<c_void>(),
                std::ptr::null_mut(),
            )
        };
        if r != CL_SUCCESS {
            return None;
        }
    }
    Some(out)
}

/// Retains an event (the layer's own reference).
pub fn retain_event(ev: P) -> bool {
    // SAFETY: `ev` is a valid event handle the runtime returned.
    !ev.is_null() && unsafe { next::<pfn::clRetainEvent>(idx::clRetainEvent)(ev) } == CL_SUCCESS
}

/// Releases the layer's reference to an event.
pub fn release_event(ev: P) {
    if !ev.is_null() {
        // SAFETY: the layer holds one reference to `ev` (retained or created for it).
        unsafe { next::<pfn::clReleaseEvent>(idx::clReleaseEvent)(ev) };
    }
}

/// Blocks until an event completes.
pub fn wait_event(ev: P) {
    if !ev.is_null() {
        let list = [ev];
        // SAFETY: a one-element list of a valid event the layer holds a reference to.
        unsafe { next::<pfn::clWaitForEvents>(idx::clWaitForEvents)(1, list.as_ptr() as P) };
    }
}

pub fn mem_size(mem: P) -> Option<u64> {
    info_fixed::<u64>(idx::clGetMemObjectInfo, mem, CL_MEM_SIZE)
}

pub fn mem_refcount(mem: P) -> Option<u32> {
    info_fixed::<u32>(idx::clGetMemObjectInfo, mem, CL_MEM_REFERENCE_COUNT)
}

/// The buffer a sub-buffer was made from (null for a buffer of its own).
pub fn mem_parent(mem: P) -> Option<usize> {
    info_fixed::<usize>(idx::clGetMemObjectInfo, mem, CL_MEM_ASSOCIATED_MEMOBJECT)
}

pub fn kernel_name(kernel: P) -> Option<String> {
    info_string(idx::clGetKernelInfo, kernel, CL_KERNEL_FUNCTION_NAME)
}

pub fn kernel_refcount(kernel: P) -> Option<u32> {
    info_fixed::<u32>(idx::clGetKernelInfo, kernel, CL_KERNEL_REFERENCE_COUNT)
}

pub fn queue_refcount(queue: P) -> Option<u32> {
    info_fixed::<u32>(idx::clGetCommandQueueInfo, queue, CL_QUEUE_REFERENCE_COUNT)
}

pub fn queue_device(queue: P) -> Option<usize> {
    info_fixed::<usize>(idx::clGetCommandQueueInfo, queue, CL_QUEUE_DEVICE)
}

pub fn queue_properties(queue: P) -> Option<u64> {
    info_fixed::<u64>(idx::clGetCommandQueueInfo, queue, CL_QUEUE_PROPERTIES)
}

/// The first device of a context.
pub fn context_first_device(ctx: P) -> Option<usize> {
    info_fixed::<usize>(idx::clGetContextInfo, ctx, CL_CONTEXT_DEVICES)
}

pub fn device_string(dev: P, name: u32) -> Option<String> {
    info_string(idx::clGetDeviceInfo, dev, name)
}

pub fn device_u32(dev: P, name: u32) -> Option<u32> {
    info_fixed::<u32>(idx::clGetDeviceInfo, dev, name)
}

pub fn device_u64(dev: P, name: u32) -> Option<u64> {
    info_fixed::<u64>(idx::clGetDeviceInfo, dev, name)
}

pub fn device_platform_name(dev: P) -> Option<String> {
    let platform = info_fixed::<usize>(idx::clGetDeviceInfo, dev, CL_DEVICE_PLATFORM)?;
    info_string(idx::clGetPlatformInfo, platform as P, CL_PLATFORM_NAME)
}
