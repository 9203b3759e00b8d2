//! stratoscope's OpenCL layer: a `cdylib` the ocl-icd loader loads through `OPENCL_LAYERS`
//! (`OPENCL_LAYERS=/path/libstrato_opencl_layer.so`), so it sees every OpenCL call of programs
//! that link or `dlopen` libOpenCL (pyopencl, the `opencl3` crate) without recompiling them.
//!
//! The loader calls [`clGetLayerInfo`] and [`clInitLayer`]; the layer copies the next table
//! (`dispatch.rs`), returns its own, and records into `$STRATOSCOPE_OUT/<pid>-opencl.strato`
//! through `strato-record` (component `opencl`): an API span per call on the calling thread's
//! track (same tids as the Python recorder, so spans nest under its operations), device
//! commands on queue tracks with the enqueue's correlation id, device memory in use and copy
//! bandwidth as counters, and the host/device clock estimate (`clock.rs`). See
//! `docs/opencl.md`. The collection level comes from `STRATOSCOPE_OPENCL`
//! (`off|api|device|full`, `trace.rs`).
//!
//! The rlib exposes the pure parts (clock fitting, level parsing, recording summaries) to tests
//! and tools.

pub mod cl;
pub mod clock;
pub mod dispatch;
pub mod generated;
pub mod hooks;
pub mod summary;
pub mod trace;

use std::ffi::c_void;
use std::sync::Once;

use trace::CollectLevel;

const CL_INVALID_VALUE: i32 = -30;
const CL_LAYER_API_VERSION: u32 = 0x4240;
const CL_LAYER_NAME: u32 = 0x4241;
const CL_LAYER_API_VERSION_100: u32 = 100;
const LAYER_NAME: &[u8] = b"stratoscope OpenCL layer\0";

/// Writes `bytes` to an info query's output (`clGet*Info` convention).
///
/// # Safety
/// `value` is null or writable for `size` bytes; `size_ret` is null or writable.
unsafe fn info_out(bytes: &[u8], size: usize, value: *mut c_void, size_ret: *mut usize) -> i32 {
    if !size_ret.is_null() {
        // SAFETY: the caller vouches for `size_ret`.
        unsafe { *size_ret = bytes.len() };
    }
    if !value.is_null() {
        if size < bytes.len() {
            return CL_INVALID_VALUE;
        }
        // SAFETY: `value` holds at least `bytes.len()` writable bytes (checked above).
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), value.cast::<u8>(), bytes.len()) };
    }
    0
}

/// The loader asks which layer API this library implements, and its name.
///
/// # Safety
/// Called by the ICD loader with `clGetLayerInfo`'s contract: `param_value` is null or writable
/// for `param_value_size` bytes, `param_value_size_ret` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn clGetLayerInfo(
    param_name: u32,
    param_value_size: usize,
    param_value: *mut c_void,
    param_value_size_ret: *mut usize,
) -> i32 {
    let version = CL_LAYER_API_VERSION_100.to_ne_bytes();
    let bytes: &[u8] = match param_name {
        CL_LAYER_API_VERSION => &version,
        CL_LAYER_NAME => LAYER_NAME,
        _ => return CL_INVALID_VALUE,
    };
    // SAFETY: forwarded from the caller.
    unsafe { info_out(bytes, param_value_size, param_value, param_value_size_ret) }
}

static AT_EXIT: Once = Once::new();

extern "C" fn at_exit() {
    if let Some(l) = trace::layer() {
        l.finish();
    }
}

/// The loader hands over the next dispatch table and takes this layer's.
///
/// # Safety
/// Called by the ICD loader with `clInitLayer`'s contract: `target_dispatch` points to
/// `num_entries` function pointers in `cl_icd_dispatch` order that stay valid for the life of
/// the process; the two out-pointers are writable.
#[no_mangle]
pub unsafe extern "C" fn clInitLayer(
    num_entries: u32,
    target_dispatch: *const c_void,
    num_entries_ret: *mut u32,
    layer_dispatch_ret: *mut *const c_void,
) -> i32 {
    if target_dispatch.is_null() || num_entries_ret.is_null() || layer_dispatch_ret.is_null() {
        return CL_INVALID_VALUE;
    }
    // SAFETY: the loader's table has `num_entries` entries (contract above).
    unsafe { dispatch::set_next(target_dispatch.cast(), num_entries as usize) };
    let mut level = CollectLevel::from_env();
    if let Err(e) = trace::init(level) {
        eprintln!("stratoscope OpenCL layer: not recording: {e}");
        level = CollectLevel::Off;
    }
    let table = dispatch::build_ours(level != CollectLevel::Off);
    if level != CollectLevel::Off {
        AT_EXIT.call_once(|| {
            // SAFETY: registers a plain `extern "C" fn()` with static lifetime.
            unsafe { libc::atexit(at_exit) };
        });
    }
    // SAFETY: both out-pointers are writable (checked non-null; contract above). The table is
    // a `'static` allocation the loader may read for the life of the process.
    unsafe {
        *num_entries_ret = table.0.len() as u32;
        *layer_dispatch_ret = table.0.as_ptr().cast();
    }
    0
}
