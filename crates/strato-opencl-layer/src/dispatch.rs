//! The ICD dispatch tables: the next layer's table (the loader's `target_dispatch`, copied at
//! `clInitLayer`) and this layer's own, which the loader calls instead.
//!
//! A table is an array of `N_ENTRIES` function pointers in the order of `struct
//! _cl_icd_dispatch` (`<CL/cl_icd.h>`; `generated.rs` lists it and a test re-checks it against
//! the installed header). Entries the layer does not wrap are copied from the next table, so
//! the loader calls the next layer directly for them.

use std::ffi::c_void;
use std::sync::OnceLock;

use crate::generated::{custom_entries, generic_entries, N_ENTRIES};

/// A table of raw function pointers (sent between threads: they are immutable code addresses).
#[derive(Debug)]
pub struct Table(pub Box<[*const c_void]>);

// SAFETY: the table only holds code addresses, written once before it is shared and never
// mutated afterwards.
unsafe impl Send for Table {}
// SAFETY: as above; shared reads of immutable pointers.
unsafe impl Sync for Table {}

static NEXT: OnceLock<Table> = OnceLock::new();
static OURS: OnceLock<Table> = OnceLock::new();

/// Copies the next layer's table (`num_entries` entries at `target`; the rest stay null).
///
/// # Safety
/// `target` must point to at least `num_entries` readable pointers.
pub unsafe fn set_next(target: *const *const c_void, num_entries: usize) -> &'static Table {
    NEXT.get_or_init(|| {
        let mut t = vec![std::ptr::null(); N_ENTRIES];
        for (i, slot) in t.iter_mut().enumerate().take(num_entries.min(N_ENTRIES)) {
            // SAFETY: the caller vouches for `num_entries` readable entries.
            *slot = unsafe { *target.add(i) };
        }
        Table(t.into_boxed_slice())
    })
}

/// Builds this layer's table once: the next table with the wrapped entries replaced (only where
/// the next layer has the entry). `wrap` false: the next table unchanged (level `off`).
pub fn build_ours(wrap: bool) -> &'static Table {
    OURS.get_or_init(|| {
        let next = NEXT.get().map(|t| t.0.to_vec()).unwrap_or_default();
        let mut t = next.clone();
        t.resize(N_ENTRIES, std::ptr::null());
        if wrap {
            for (i, f) in generic_entries().into_iter().chain(custom_entries()) {
                if next.get(i).is_some_and(|p| !p.is_null()) {
                    t[i] = f;
                }
            }
        }
        Table(t.into_boxed_slice())
    })
}

/// The next layer's entry `i` as a function of type `F` (a `pfn::*` type).
///
/// # Safety
/// `F` must be the entry's function-pointer type and the entry must be non-null (hooks are
/// installed only over non-null entries; [`next_or_null`] checks).
#[inline]
pub unsafe fn next<F: Copy>(i: usize) -> F {
    debug_assert_eq!(
        std::mem::size_of::<F>(),
        std::mem::size_of::<*const c_void>()
    );
    let p: *const c_void = NEXT.get().map_or(std::ptr::null(), |t| t.0[i]);
    // SAFETY: `F` is a function-pointer type of pointer size and `p` is that function (caller).
    unsafe { std::mem::transmute_copy::<*const c_void, F>(&p) }
}

/// True when the next layer has entry `i`.
pub fn has_next(i: usize) -> bool {
    NEXT.get()
        .is_some_and(|t| t.0.get(i).is_some_and(|p| !p.is_null()))
}

#[cfg(test)]
mod tests {
    use crate::generated::NAMES;

    /// The generated entry order equals `struct _cl_icd_dispatch` in the installed header.
    #[test]
    fn dispatch_order_matches_installed_header() {
        let Ok(text) = std::fs::read_to_string("/usr/include/CL/cl_icd.h") else {
            eprintln!("no /usr/include/CL/cl_icd.h (opencl-headers): skipped");
            return;
        };
        let start = text
            .find("typedef struct _cl_icd_dispatch {")
            .expect("dispatch struct");
        let end = text[start..].find("} cl_icd_dispatch;").expect("end") + start;
        let fields: Vec<String> = text[start..end]
            .lines()
            .skip(1)
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("/*") && !l.starts_with('#'))
            .collect::<Vec<_>>()
            .join(" ")
            .split(';')
            .filter_map(|f| f.split_whitespace().last().map(str::to_owned))
            .collect();
        assert_eq!(fields, NAMES.to_vec());
    }
}
