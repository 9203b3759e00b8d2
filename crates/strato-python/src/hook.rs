//! The C-level profile hook (`PyEval_SetProfile`) that records Python -> native transitions
//! without code changes, and the module-prefix table that classifies callees into levels.
//!
//! For every `c_call` (a builtin function or method) and every Python `call`, the callee's
//! module is looked up in the prefix table (longest prefix at a dot boundary wins; see
//! `docs/recording.md` for the defaults and `stratoscope.set_level_table` to override). A callee
//! with a level is recorded as a span (`begin` at the call, `end` at its return) when its level
//! differs from the innermost recorded level on the thread — i.e. only *transitions* are
//! recorded, not every nested function inside numpy or gymnasium. Every other hook invocation
//! is counted as untraced book-keeping (`strato_record::add_untraced`) for overhead correction.
//! Classifications are cached per thread: C functions by their `PyMethodDef` address (static
//! per C function), Python functions by their code object's address.
//!
//! Modes: 0 off; 2 = classify but record nothing (calibration of the hook's own cost); 3 and
//! up = record.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::os::raw::c_int;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyModule as PyModuleType};
use strato_record::{self as rec, Level, StrRef};

static MODE: AtomicU8 = AtomicU8::new(0);
static TABLE_GEN: AtomicU64 = AtomicU64::new(1);
static TABLE: Mutex<Option<Vec<(String, Level)>>> = Mutex::new(None);

/// The default module-prefix table (documented in docs/recording.md).
pub const DEFAULT_TABLE: &[(&str, Level)] = &[
    ("torch", Level::Backend),
    ("tensorflow", Level::Backend),
    ("tf_keras", Level::Backend),
    ("keras", Level::Backend),
    ("jax", Level::Backend),
    ("jaxlib", Level::Backend),
    ("flax", Level::Backend),
    ("gymnasium", Level::Simulator),
    ("gym", Level::Simulator),
    ("mujoco", Level::Simulator),
    ("ale_py", Level::Simulator),
    ("pybullet", Level::Simulator),
    ("Box2D", Level::Simulator),
    ("box2d", Level::Simulator),
    ("numpy", Level::Library),
    ("scipy", Level::Library),
    ("sklearn", Level::Library),
    ("pandas", Level::Library),
    ("cv2", Level::Library),
    ("PIL", Level::Library),
    ("numba", Level::Library),
];

#[derive(Clone, Copy)]
struct Class {
    level: Level,
    category: StrRef,
    name: StrRef,
}

/// Hashes pointer-sized keys with one multiply (they are addresses: already well spread).
#[derive(Default)]
struct AddrHasher(u64);
impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(29);
    }
}
type AddrMap<V> = HashMap<usize, V, BuildHasherDefault<AddrHasher>>;

#[derive(Default)]
struct HookState {
    gen: u64,
    table: Vec<(String, Level)>,
    c_cache: AddrMap<Option<Class>>,
    /// Keyed by code object address; each entry holds a reference to its code object, so the
    /// address cannot be freed and reused by another code object while the entry exists (a
    /// module's `<module>` code is freed after import and its address was reused by functions
    /// defined later, which then inherited the stale classification).
    py_cache: AddrMap<(Option<Class>, Py<PyAny>)>,
    /// One entry per open call seen by the hook: true when it opened a span.
    markers: Vec<bool>,
    /// Levels of the open recorded spans (hook and wrappers), innermost last.
    levels: Vec<Level>,
}

thread_local! {
    static STATE: RefCell<HookState> = RefCell::new(HookState::default());
}

fn current_table() -> Vec<(String, Level)> {
    let mut guard = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    guard
        .get_or_insert_with(|| {
            DEFAULT_TABLE
                .iter()
                .map(|(p, l)| ((*p).to_owned(), *l))
                .collect()
        })
        .clone()
}

fn lookup(table: &[(String, Level)], module: &str) -> Option<Level> {
    table
        .iter()
        .filter(|(prefix, _)| {
            module == prefix
                || (module.starts_with(prefix.as_str())
                    && module.as_bytes().get(prefix.len()) == Some(&b'.'))
        })
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, level)| *level)
}

pub(crate) fn configure(level: u64) {
    let mode = match level {
        0 | 1 => 0,
        2 => 2,
        _ => 3,
    };
    MODE.store(mode, Ordering::Relaxed);
}

/// Installs the C profile function on the calling thread.
pub(crate) fn install_current_thread() {
    // SAFETY: called with the GIL held (from a #[pyfunction]); `profile` has the Py_tracefunc
    // signature and static lifetime; a NULL object argument is allowed.
    unsafe { ffi::PyEval_SetProfile(Some(profile), std::ptr::null_mut()) };
    STATE.with(|s| {
        if let Ok(mut s) = s.try_borrow_mut() {
            s.markers.clear();
            s.levels.clear();
        }
    });
}

/// Removes the profile function from the calling thread.
pub(crate) fn uninstall_current_thread() {
    // SAFETY: called with the GIL held; None clears the thread's profile function.
    unsafe { ffi::PyEval_SetProfile(None, std::ptr::null_mut()) };
}

pub(crate) fn enter_wrapped(level: Level) {
    STATE.with(|s| {
        if let Ok(mut s) = s.try_borrow_mut() {
            s.levels.push(level);
        }
    });
}

pub(crate) fn exit_wrapped() {
    STATE.with(|s| {
        if let Ok(mut s) = s.try_borrow_mut() {
            s.levels.pop();
        }
    });
}

fn refresh(state: &mut HookState) {
    let gen = TABLE_GEN.load(Ordering::Relaxed);
    if state.gen != gen {
        state.gen = gen;
        state.table = current_table();
        state.c_cache.clear();
        state.py_cache.clear();
    }
}

fn class_for(state: &HookState, module: &str, name: String) -> Option<Class> {
    let level = lookup(&state.table, module)?;
    Some(Class {
        level,
        category: rec::intern(crate::category_of(level)),
        name: rec::intern(&name),
    })
}

/// Classifies a builtin function or method object (cache miss path; uses the Python API).
fn classify_c(py: Python<'_>, state: &HookState, func: &Bound<'_, PyAny>) -> Option<Class> {
    let fname: String = func
        .getattr("__name__")
        .and_then(|n| n.extract())
        .unwrap_or_default();
    let module: Option<String> = func
        .getattr("__module__")
        .ok()
        .and_then(|m| m.extract().ok());
    let this = func.getattr("__self__").ok().filter(|s| !s.is_none());
    let (module, qual) = match (module, this) {
        (Some(m), _) if !m.is_empty() => (m.clone(), format!("{m}.{fname}")),
        (_, Some(this)) => {
            if let Ok(m) = this.cast::<PyModuleType>() {
                let name = m.name().map(|n| n.to_string()).unwrap_or_default();
                (name.clone(), format!("{name}.{fname}"))
            } else {
                // A method: its module is its type's (or, for a class method, the class's).
                let ty = if this.is_instance_of::<pyo3::types::PyType>() {
                    this.clone()
                } else {
                    this.get_type().into_any()
                };
                let m: String = ty
                    .getattr("__module__")
                    .and_then(|m| m.extract())
                    .unwrap_or_default();
                let q: String = ty
                    .getattr("__qualname__")
                    .and_then(|m| m.extract())
                    .unwrap_or_default();
                (m.clone(), format!("{m}.{q}.{fname}"))
            }
        }
        _ => return None,
    };
    let _ = py;
    class_for(state, &module, qual)
}

/// Classifies a Python function by its frame's module (`__name__` of its globals).
fn classify_py(py: Python<'_>, state: &HookState, frame: *mut ffi::PyFrameObject) -> Option<Class> {
    // SAFETY: `frame` is the live frame the profile hook was called for (GIL held);
    // PyFrame_GetGlobals returns a new reference, owned by the Bound.
    let globals = unsafe { Bound::from_owned_ptr_or_opt(py, ffi::PyFrame_GetGlobals(frame)) }?;
    let module: String = globals.get_item("__name__").ok()?.extract().ok()?;
    // SAFETY: as above; PyFrame_GetCode returns a new reference (never NULL for a live frame).
    let code = unsafe { Bound::from_owned_ptr_or_opt(py, ffi::PyFrame_GetCode(frame).cast()) }?;
    let qual: String = code
        .getattr("co_qualname")
        .and_then(|q| q.extract())
        .unwrap_or_default();
    class_for(state, &module, format!("{module}.{qual}"))
}

fn open(state: &mut HookState, class: Option<Class>, mode: u8) {
    match class {
        Some(c) if mode >= 3 && state.levels.last() != Some(&c.level) => {
            rec::begin(c.level, c.category, c.name);
            state.markers.push(true);
            state.levels.push(c.level);
        }
        _ => {
            rec::add_untraced(1);
            state.markers.push(false);
        }
    }
}

fn close(state: &mut HookState) {
    if state.markers.pop() == Some(true) {
        rec::end();
        state.levels.pop();
    } else {
        rec::add_untraced(1);
    }
}

unsafe extern "C" fn profile(
    _obj: *mut ffi::PyObject,
    frame: *mut ffi::PyFrameObject,
    what: c_int,
    arg: *mut ffi::PyObject,
) -> c_int {
    let mode = MODE.load(Ordering::Relaxed);
    if mode == 0 {
        return 0;
    }
    // SAFETY: the interpreter calls profile functions with the GIL held.
    let py = unsafe { Python::assume_attached() };
    STATE.with(|cell| {
        let Ok(mut state) = cell.try_borrow_mut() else {
            return;
        };
        refresh(&mut state);
        match what {
            ffi::PyTrace_CALL => {
                // SAFETY: `frame` is live for the duration of the call; PyFrame_GetCode returns
                // a new reference that the frame also holds, so dropping ours right away keeps
                // the address valid while the function runs; a cache entry keeps its own
                // reference (below), so a cached address always names the same code object.
                let code = unsafe {
                    let code = ffi::PyFrame_GetCode(frame);
                    ffi::Py_DECREF(code.cast());
                    code
                };
                let key = code as usize;
                let class = match state.py_cache.get(&key) {
                    Some((c, _)) => *c,
                    None => {
                        let c = classify_py(py, &state, frame);
                        // SAFETY: `code` is a live code object (see above); this takes a new
                        // strong reference owned by the cache entry.
                        let owned = unsafe { Bound::from_borrowed_ptr(py, code.cast()) }.unbind();
                        state.py_cache.insert(key, (c, owned));
                        c
                    }
                };
                open(&mut state, class, mode);
            }
            ffi::PyTrace_C_CALL => {
                // SAFETY: `arg` is the callable being called (borrowed, alive during the call);
                // PyCFunction_Check only reads its type, and for a PyCFunction the struct
                // layout is PyCFunctionObject, whose `m_ml` points at a static PyMethodDef.
                let key = unsafe {
                    if ffi::PyCFunction_Check(arg) != 0 {
                        Some((*arg.cast::<ffi::PyCFunctionObject>()).m_ml as usize)
                    } else {
                        None
                    }
                };
                let class = match key {
                    Some(key) => match state.c_cache.get(&key) {
                        Some(c) => *c,
                        None => {
                            // SAFETY: `arg` is a valid borrowed object (see above).
                            let func = unsafe { Bound::from_borrowed_ptr(py, arg) };
                            let c = classify_c(py, &state, &func);
                            state.c_cache.insert(key, c);
                            c
                        }
                    },
                    None => None,
                };
                open(&mut state, class, mode);
            }
            ffi::PyTrace_RETURN | ffi::PyTrace_C_RETURN | ffi::PyTrace_C_EXCEPTION => {
                close(&mut state);
            }
            _ => {}
        }
    });
    0
}

/// Installs the profile hook on the calling thread (called by `stratoscope` for each new
/// thread through `threading.setprofile`).
#[pyfunction]
fn install_hook() {
    if MODE.load(Ordering::Relaxed) != 0 {
        install_current_thread();
    }
}

/// Removes the hook from the calling thread.
#[pyfunction]
fn uninstall_hook() {
    uninstall_current_thread();
}

/// Replaces the module-prefix table: a list of `(prefix, level)` pairs, level one of
/// `"Backend"`, `"Simulator"`, `"Library"`, ... (case-insensitive).
#[pyfunction]
fn set_level_table(entries: Vec<(String, String)>) -> PyResult<()> {
    let mut table = Vec::with_capacity(entries.len());
    for (prefix, level) in entries {
        table.push((prefix, crate::level_from_str(&level)?));
    }
    *TABLE.lock().unwrap_or_else(|e| e.into_inner()) = Some(table);
    TABLE_GEN.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// The module-prefix table in force, as `(prefix, level)` pairs.
#[pyfunction]
fn level_table<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
    let items: Vec<(String, &str)> = current_table()
        .into_iter()
        .map(|(p, l)| (p, l.as_str()))
        .collect();
    PyList::new(py, items)
}

/// The level the hook gives a module name (None when the table does not name it).
#[pyfunction]
fn level_of_module(module: &str) -> Option<&'static str> {
    lookup(&current_table(), module).map(Level::as_str)
}

pub(crate) fn register(m: &Bound<'_, PyModuleType>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(install_hook, m)?)?;
    m.add_function(wrap_pyfunction!(uninstall_hook, m)?)?;
    m.add_function(wrap_pyfunction!(set_level_table, m)?)?;
    m.add_function(wrap_pyfunction!(level_table, m)?)?;
    m.add_function(wrap_pyfunction!(level_of_module, m)?)?;
    Ok(())
}
