//! The memory budget of the whole `strato` process (issue 28): every heap byte the command
//! allocates — the trace model, each analysis's working set, DataFusion's operators and
//! results, the report's HTML — counted by [`BudgetedAllocator`], the binary's global
//! allocator, against `STRATO_MEMORY_BUDGET` (default: half the physical memory).
//!
//! Why here and not in each analysis: the import's own accounting
//! ([`strato_trace::MemoryTracker`]) stops an import early with an error naming the file, and
//! `strato sql` refuses a query over its pool or result share; but an analysis's working set
//! (per-span vectors, graphs, the report's sections) had no bound, and the kernel's OOM killer
//! then ends the command with no word (or the machine swaps). Counting at the allocator bounds
//! them all, whatever code allocates.
//!
//! The rules:
//! - Unarmed (the limit is `usize::MAX`) until [`arm`] is called once the command line is
//!   parsed, so `--help` and argument errors never stop on it. [`arm`] does nothing when this
//!   allocator is not the process's (the library linked elsewhere).
//! - Passing the limit ends the process at once: one line on standard error (prepared at
//!   [`arm`], so stopping allocates nothing), the temporary file of the output being written
//!   (if any, [`OutputInProgress`]) removed, exit status 2. Nothing is unwound: a panic or an
//!   error return from inside the allocator is not allowed, and a command half-way through an
//!   analysis has nothing sound to return. Files are never left looking complete: outputs are
//!   renamed into place only once written (`output.rs`), and a profile directory's staging
//!   sibling (`DIR.tmp-PID`) is removed by a later write (`strato-store`).
//! - The count is of bytes asked for (`Layout::size`), not of pages: the peak RSS runs a few
//!   percent above it (the allocator's own overhead and fragmentation, the binary's text, thread
//!   stacks), and memory-mapped files are not counted.
//! - Cost: one relaxed atomic add and one load per allocation (measured in docs/benchmarks.md,
//!   "The whole process within the memory budget").

use std::alloc::{GlobalAlloc, Layout, System};
use std::ffi::CString;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Bytes allocated and not yet freed through [`BudgetedAllocator`].
static LIVE: AtomicUsize = AtomicUsize::new(0);
/// The budget in bytes; `usize::MAX` until [`arm`].
static LIMIT: AtomicUsize = AtomicUsize::new(usize::MAX);
/// Set by the first allocation through [`BudgetedAllocator`]: it is the process's allocator.
static INSTALLED: AtomicBool = AtomicBool::new(false);
/// The line printed when the budget is passed (prepared by [`arm`]).
static MESSAGE: OnceLock<Box<[u8]>> = OnceLock::new();
/// The temporary file of the output being written, removed when the budget is passed.
static PENDING_OUTPUT: AtomicPtr<libc::c_char> = AtomicPtr::new(std::ptr::null_mut());
/// Set by the first thread to pass the budget; others wait for it to end the process.
static STOPPING: AtomicBool = AtomicBool::new(false);

/// The `strato` binary's global allocator: the system allocator, with every byte counted
/// against the budget once [`arm`]ed (see the module docs).
#[derive(Debug)]
pub struct BudgetedAllocator;

impl BudgetedAllocator {
    #[inline]
    fn grew(bytes: usize) {
        let live = LIVE.fetch_add(bytes, Ordering::Relaxed).wrapping_add(bytes);
        if live > LIMIT.load(Ordering::Relaxed) {
            over_budget();
        }
    }

    #[inline]
    fn shrank(bytes: usize) {
        LIVE.fetch_sub(bytes, Ordering::Relaxed);
    }
}

// SAFETY: every call is forwarded to `System` with the same arguments; the counting around it
// touches only atomics, and `over_budget` ends the process without unwinding.
unsafe impl GlobalAlloc for BudgetedAllocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !INSTALLED.load(Ordering::Relaxed) {
            INSTALLED.store(true, Ordering::Relaxed);
        }
        Self::grew(layout.size());
        // SAFETY: forwarded as received.
        let p = unsafe { System.alloc(layout) };
        if p.is_null() {
            Self::shrank(layout.size());
        }
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        Self::grew(layout.size());
        // SAFETY: forwarded as received.
        let p = unsafe { System.alloc_zeroed(layout) };
        if p.is_null() {
            Self::shrank(layout.size());
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as received.
        unsafe { System.dealloc(ptr, layout) };
        Self::shrank(layout.size());
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = layout.size();
        if new_size > old {
            Self::grew(new_size - old);
        }
        // SAFETY: forwarded as received.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if p.is_null() {
            if new_size > old {
                Self::shrank(new_size - old);
            }
        } else if new_size < old {
            Self::shrank(old - new_size);
        }
        p
    }
}

/// Ends the process: the prepared line, the pending output's temporary file removed, exit 2.
#[cold]
fn over_budget() {
    if STOPPING.swap(true, Ordering::SeqCst) {
        // Another thread is ending the process; let this allocation go through meanwhile.
        return;
    }
    if let Some(message) = MESSAGE.get() {
        // SAFETY: writes bytes that live as long as the process to file descriptor 2.
        unsafe { libc::write(2, message.as_ptr().cast(), message.len()) };
    }
    let pending = PENDING_OUTPUT.load(Ordering::SeqCst);
    if !pending.is_null() {
        // SAFETY: `pending` is a NUL-terminated path that is never freed (`OutputInProgress`).
        unsafe { libc::unlink(pending) };
    }
    // SAFETY: ends the process without running destructors or unwinding (which an allocator
    // must not do).
    unsafe { libc::_exit(2) }
}

/// Counts every allocation from now on against `limit_bytes`; `what` names the command in the
/// line printed when the budget is passed. Does nothing when [`BudgetedAllocator`] is not the
/// process's allocator. Called once; later calls keep the first budget.
pub fn arm(limit_bytes: u64, what: &str) {
    if !INSTALLED.load(Ordering::Relaxed) {
        return;
    }
    return_large_blocks();
    let line = format!(
        "strato: {what}: stopped: the process would need more than the memory budget of {} MiB \
         (set STRATO_MEMORY_BUDGET, e.g. 16G, to change it); no output file was written\n",
        limit_bytes >> 20
    );
    if MESSAGE.set(line.into_bytes().into_boxed_slice()).is_ok() {
        LIMIT.store(
            usize::try_from(limit_bytes).unwrap_or(usize::MAX),
            Ordering::SeqCst,
        );
    }
}

/// Has glibc's `malloc` give every block of 128 KiB or more back to the kernel when it is
/// freed. By default glibc raises that threshold to the largest block freed so far (up to
/// 32 MiB): after the import frees its first large buffers, the chunks a streamed analysis
/// keeps and frees come from the heap, and what they leave there is never returned, so the
/// peak RSS of a command ran well above what it held (`layers` on the 1.4 GB trace: 259 MiB
/// held as 200 MiB with the fixed threshold; docs/benchmarks.md, "The allocator's threshold").
/// Setting the threshold fixes it (glibc's `mallopt(3)`); other C libraries are left as they
/// are.
fn return_large_blocks() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` only sets a parameter of glibc's allocator; it is called once, before
    // the command's work, and takes no pointer.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 << 10);
    }
}

/// The temporary file of an output being written: removed by [`over_budget`] if the budget is
/// passed while this lives. One output is written at a time; a second one replaces the first
/// for the time it lives. The path's copy is leaked (a few bytes per output written), so a
/// thread ending the process never reads freed memory.
pub(crate) struct OutputInProgress {
    path: *mut libc::c_char,
}

impl OutputInProgress {
    pub(crate) fn new(tmp: &std::path::Path) -> OutputInProgress {
        use std::os::unix::ffi::OsStrExt;
        let path = CString::new(tmp.as_os_str().as_bytes())
            .map(CString::into_raw)
            .unwrap_or(std::ptr::null_mut());
        PENDING_OUTPUT.store(path, Ordering::SeqCst);
        OutputInProgress { path }
    }
}

impl Drop for OutputInProgress {
    fn drop(&mut self) {
        let _ = PENDING_OUTPUT.compare_exchange(
            self.path,
            std::ptr::null_mut(),
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
    }
}
