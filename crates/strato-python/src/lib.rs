//! `stratoscope._native`: the native half of the `stratoscope` Python package. It owns the
//! Python-facing recording API (operations, phases, wrappers), the C-level profile hook that
//! records Python -> native transitions without code changes, and the module-prefix level
//! table. Events go to `strato-record`. It is loaded into every recorded process, so it links
//! only the recorder: the `strato` command is its own binary (`stratoscope/_bin/strato` in the
//! wheel), which `stratoscope.cli` executes.

mod hook;

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple};
use strato_record::{self as rec, Level, StrRef};

/// Annotations are recorded (collection level >= 1).
static ANNOTATE: AtomicBool = AtomicBool::new(false);
/// Wrappers (`wrap_module`, `wrap_env`) record (level >= 4).
static WRAPPERS: AtomicBool = AtomicBool::new(false);
/// The collection level of the running session.
static LEVEL: AtomicU64 = AtomicU64::new(0);

struct Phase {
    track: rec::TrackRef,
    start: i64,
    name: StrRef,
}

static PHASE: Mutex<Option<Phase>> = Mutex::new(None);

fn cat(name: &str) -> StrRef {
    rec::intern(name)
}

fn level_from_str(text: &str) -> PyResult<Level> {
    let wanted = text.to_ascii_lowercase();
    Level::ALL
        .into_iter()
        .find(|l| l.as_str().to_ascii_lowercase() == wanted)
        .ok_or_else(|| PyValueError::new_err(format!("unknown level {text:?}")))
}

/// The category written for spans of `level`.
pub(crate) fn category_of(level: Level) -> &'static str {
    match level {
        Level::Phase => "phase",
        Level::Operation => "operation",
        Level::Python => "python",
        Level::Backend => "backend",
        Level::Simulator => "simulator",
        Level::Library => "library",
        Level::AcceleratorApi => "accelerator_api",
        Level::Overhead => "overhead",
        _ => "other",
    }
}

/// Starts recording into `dir` at collection `level` (0 timing only, 1 annotations, 2 hook
/// without recording (calibration), 3 interception, 4 full). Installs the profile hook on the
/// calling thread when `level >= 2` (the Python side installs it on new threads).
#[pyfunction]
#[pyo3(signature = (dir, level=4, flush_interval_ms=50, argv_json=String::from("[]")))]
fn start(dir: PathBuf, level: u64, flush_interval_ms: u64, argv_json: String) -> PyResult<()> {
    rec::start(rec::Config {
        dir,
        component: String::new(),
        flush_interval: Duration::from_millis(flush_interval_ms.max(1)),
        flush_events: 1 << 16,
        level,
        argv_json,
    })
    .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    LEVEL.store(level, Ordering::Relaxed);
    ANNOTATE.store(level >= 1, Ordering::Relaxed);
    WRAPPERS.store(level >= 4, Ordering::Relaxed);
    hook::configure(level);
    if level >= 2 {
        hook::install_current_thread();
    }
    Ok(())
}

/// Stops recording (closing the current phase) and returns the file written, if any.
#[pyfunction]
fn stop() -> Option<PathBuf> {
    hook::uninstall_current_thread();
    hook::configure(0);
    end_phase(rec::now_ns());
    ANNOTATE.store(false, Ordering::Relaxed);
    WRAPPERS.store(false, Ordering::Relaxed);
    LEVEL.store(0, Ordering::Relaxed);
    rec::stop()
}

/// Writes buffered events now.
#[pyfunction]
fn flush() {
    rec::flush();
}

/// Starts the writer thread in a forked child (called from `os.register_at_fork`).
#[pyfunction]
fn after_fork_child() {
    rec::ensure_writer();
}

/// Hands the termination of signal `signum` (SIGTERM, SIGHUP, SIGINT) to the recorder: its
/// handler flushes (STOP record, last chunk) and the process then ends by the signal. Call it
/// only for a signal whose disposition is the default. False when it could not be installed.
#[pyfunction]
fn catch_termination_signal(signum: i32) -> bool {
    rec::signals::catch_termination(signum)
}

/// True while recording.
#[pyfunction]
fn is_recording() -> bool {
    rec::is_recording()
}

/// The collection level of the running session (0 when stopped).
#[pyfunction]
fn level() -> u64 {
    LEVEL.load(Ordering::Relaxed)
}

/// CLOCK_MONOTONIC in nanoseconds (the recorder's clock).
#[pyfunction]
fn now_ns() -> i64 {
    rec::now_ns()
}

fn end_phase(now: i64) {
    let previous = PHASE.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(p) = previous {
        rec::span(
            p.track,
            p.start,
            now,
            Level::Phase,
            cat("phase"),
            p.name,
            None,
            None,
        );
    }
}

/// Enters phase `name` for the whole process (ends the previous phase).
#[pyfunction]
fn set_phase(name: &str) {
    if !ANNOTATE.load(Ordering::Relaxed) {
        return;
    }
    let now = rec::now_ns();
    end_phase(now);
    if let Some(track) = rec::thread_track() {
        *PHASE.lock().unwrap_or_else(|e| e.into_inner()) = Some(Phase {
            track,
            start: now,
            name: rec::intern(name),
        });
    }
}

/// Names this process in the profile.
#[pyfunction]
fn set_process_name(name: &str) {
    rec::set_process_name(name);
}

/// Names the calling thread in the profile.
#[pyfunction]
fn set_thread_name(name: &str) {
    rec::set_thread_name(name);
}

/// Stores a JSON value under `key` in the profile's metadata.
#[pyfunction]
fn metadata(key: &str, json: &str) {
    rec::metadata(key, json);
}

/// Records a complete span on the calling thread, or on thread `tid` of this process (used
/// by merged framework profilers, whose events may come from threads of their own).
#[pyfunction]
#[pyo3(signature = (start_ns, end_ns, level, category, name, args=None, tid=None))]
fn record_span(
    start_ns: i64,
    end_ns: i64,
    level: &str,
    category: &str,
    name: &str,
    args: Option<&str>,
    tid: Option<i64>,
) -> PyResult<()> {
    let level = level_from_str(level)?;
    let track = match tid {
        Some(tid) => rec::thread_track_of(tid),
        None => rec::thread_track(),
    };
    if let Some(track) = track {
        rec::span(
            track,
            start_ns,
            end_ns,
            level,
            rec::intern(category),
            rec::intern(name),
            None,
            args,
        );
    }
    Ok(())
}

/// Records the Python stack seen on thread `tid` at `ts_ns` (folded, outermost frame first,
/// `;`-separated): an instant of category `python_stack` (Level Python) on that thread's track.
/// Written by `stratoscope`'s stack sampler under `strato record --sample`; the analysis joins
/// it with the launcher's native CPU samples of the same thread (docs/recording.md).
#[pyfunction]
fn record_python_stack(tid: i64, ts_ns: i64, stack: &str) {
    if let Some(track) = rec::thread_track_of(tid) {
        rec::instant(
            track,
            ts_ns,
            Level::Python,
            rec::intern(strato_record::sample::PYTHON_STACK_CATEGORY),
            rec::intern(stack),
            None,
        );
    }
}

/// Records a complete span on a named track of this process (`queue` numbers the track):
/// used for framework-profiler device activity.
#[pyfunction]
#[pyo3(signature = (device, queue, track_name, start_ns, end_ns, level, category, name, correlation=None, args=None))]
#[allow(clippy::too_many_arguments)]
fn record_device_span(
    device: i64,
    queue: i64,
    track_name: &str,
    start_ns: i64,
    end_ns: i64,
    level: &str,
    category: &str,
    name: &str,
    correlation: Option<u64>,
    args: Option<&str>,
) -> PyResult<()> {
    let level = level_from_str(level)?;
    if let Some(track) = rec::queue_track(device, queue, track_name) {
        rec::span(
            track,
            start_ns,
            end_ns,
            level,
            rec::intern(category),
            rec::intern(name),
            correlation,
            args,
        );
    }
    Ok(())
}

/// Records a clock alignment estimate (see docs/recording-format.md, CLOCK):
/// `mono = local + offset_ns + drift_ppb * (local - anchor_ns) / 1e9`.
#[pyfunction]
#[pyo3(signature = (name, domain, offset_ns, error_ns=None, method=String::from("paired observations"), drift_ppb=0.0, anchor_ns=0))]
fn clock_sync(
    name: &str,
    domain: &str,
    offset_ns: i64,
    error_ns: Option<i64>,
    method: String,
    drift_ppb: f64,
    anchor_ns: i64,
) {
    rec::clock_sync(
        name, domain, offset_ns, drift_ppb, anchor_ns, error_ns, &method,
    );
}

/// The names annotations use, interned once per thread: `operation(name)` built on every
/// iteration then costs a hash lookup in the calling thread's own table instead of the
/// process-wide interner's lock. Bounded: a program that makes a new name on every call (an
/// f-string with a counter) clears the table when it reaches [`NAME_CACHE_LIMIT`] entries.
const NAME_CACHE_LIMIT: usize = 4096;

thread_local! {
    static NAME_CACHE: RefCell<HashMap<Box<str>, StrRef>> = RefCell::new(HashMap::default());
}

/// `rec::intern(name)` through the calling thread's cache (ids are process-wide and stable,
/// so a cached id stays right across sessions and forks).
fn intern_cached(name: &str) -> StrRef {
    NAME_CACHE.with(|cache| {
        let Ok(mut cache) = cache.try_borrow_mut() else {
            return rec::intern(name);
        };
        if let Some(&id) = cache.get(name) {
            return id;
        }
        if cache.len() >= NAME_CACHE_LIMIT {
            cache.clear();
        }
        let id = rec::intern(name);
        cache.insert(name.into(), id);
        id
    })
}

/// The category of annotations that name none.
static OPERATION_CATEGORY: OnceLock<StrRef> = OnceLock::new();

/// The Python function that turns an operation into a decorator (`stratoscope` registers it
/// at import through `_set_decorator`: `functools.wraps` is Python's).
static DECORATOR: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// An algorithmic operation: `with operation("inference"): ...`, or a decorator
/// (`@operation("backpropagation")`). Nesting is allowed. `stratoscope.operation` is this class
/// itself (not a Python subclass): built on each use, as people write it, it costs one native
/// allocation (from a free list) and a per-thread name lookup.
#[pyclass(module = "stratoscope._native", subclass, frozen, freelist = 64)]
struct Operation {
    name: StrRef,
    category: StrRef,
}

#[pymethods]
impl Operation {
    #[new]
    #[pyo3(signature = (name, category=None))]
    fn new(name: &str, category: Option<&str>) -> Self {
        Operation {
            name: intern_cached(name),
            category: match category {
                None => *OPERATION_CATEGORY.get_or_init(|| rec::intern("operation")),
                Some(c) => intern_cached(c),
            },
        }
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        if ANNOTATE.load(Ordering::Relaxed) {
            let op = slf.get();
            rec::begin(Level::Operation, op.category, op.name);
        }
        slf
    }

    /// Python always passes the three exception values; taking them as three positional
    /// arguments (no `*args` tuple) keeps leaving cheap.
    #[pyo3(signature = (_exc_type=None, _exc_value=None, _traceback=None))]
    fn __exit__(
        &self,
        _exc_type: Option<&Bound<'_, PyAny>>,
        _exc_value: Option<&Bound<'_, PyAny>>,
        _traceback: Option<&Bound<'_, PyAny>>,
    ) -> bool {
        if ANNOTATE.load(Ordering::Relaxed) {
            rec::end();
        }
        false
    }

    /// Decorator use: `func` wrapped so that each call runs inside this operation.
    fn __call__(slf: Bound<'_, Self>, func: Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let Some(decorate) = DECORATOR.get(py) else {
            return Err(PyRuntimeError::new_err(
                "stratoscope is not imported: no decorator registered",
            ));
        };
        decorate.bind(py).call1((slf, func)).map(Bound::unbind)
    }
}

/// Registers the Python function `decorate(operation, func)` that `Operation.__call__` uses.
#[pyfunction]
fn _set_decorator(py: Python<'_>, decorate: Py<PyAny>) {
    let _ = DECORATOR.set(py, decorate);
}

// A callable wrapped so that each call is recorded as a span of `level` (see `wrap_module`).
// Calls made through it are invisible to the profile hook (it is not a builtin function), so
// nothing is counted twice. No `///` doc here on purpose: a class docstring would shadow the
// `__doc__` getter that forwards the wrapped callable's docstring.
#[pyclass(module = "stratoscope._native", frozen)]
struct Wrapped {
    func: Py<PyAny>,
    level: Level,
    category: StrRef,
    name: StrRef,
}

#[pymethods]
impl Wrapped {
    #[new]
    #[pyo3(text_signature = None)]
    fn new(func: Py<PyAny>, level: &str, name: &str) -> PyResult<Self> {
        let level = level_from_str(level)?;
        Ok(Wrapped {
            func,
            level,
            category: rec::intern(&format!("{}_wrap", category_of(level))),
            name: rec::intern(name),
        })
    }

    #[pyo3(signature = (*args, **kwargs))]
    fn __call__(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        if !WRAPPERS.load(Ordering::Relaxed) {
            return self.func.bind(py).call(args, kwargs).map(Bound::unbind);
        }
        hook::enter_wrapped(self.level);
        rec::begin(self.level, self.category, self.name);
        let result = self.func.bind(py).call(args, kwargs);
        rec::end();
        hook::exit_wrapped();
        result.map(Bound::unbind)
    }

    fn __getattr__(&self, py: Python<'_>, name: &str) -> PyResult<Py<PyAny>> {
        self.func.bind(py).getattr(name).map(Bound::unbind)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let inner = self
            .func
            .bind(py)
            .repr()
            .map(|r| r.to_string())
            .unwrap_or_default();
        format!("<stratoscope wrapped {inner}>")
    }

    /// The wrapped callable.
    #[getter]
    fn __wrapped__(&self, py: Python<'_>) -> Py<PyAny> {
        self.func.clone_ref(py)
    }

    /// The wrapped callable's docstring (libraries edit each other's docstrings at import:
    /// numpy.ma reads `np.arange.__doc__`).
    #[getter]
    fn __doc__(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.func.bind(py).getattr("__doc__").map(Bound::unbind)
    }
}

#[pymodule]
#[pyo3(name = "_native")]
fn native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(start, m)?)?;
    m.add_function(wrap_pyfunction!(stop, m)?)?;
    m.add_function(wrap_pyfunction!(flush, m)?)?;
    m.add_function(wrap_pyfunction!(after_fork_child, m)?)?;
    m.add_function(wrap_pyfunction!(catch_termination_signal, m)?)?;
    m.add_function(wrap_pyfunction!(is_recording, m)?)?;
    m.add_function(wrap_pyfunction!(level, m)?)?;
    m.add_function(wrap_pyfunction!(now_ns, m)?)?;
    m.add_function(wrap_pyfunction!(set_phase, m)?)?;
    m.add_function(wrap_pyfunction!(set_process_name, m)?)?;
    m.add_function(wrap_pyfunction!(set_thread_name, m)?)?;
    m.add_function(wrap_pyfunction!(metadata, m)?)?;
    m.add_function(wrap_pyfunction!(record_span, m)?)?;
    m.add_function(wrap_pyfunction!(record_device_span, m)?)?;
    m.add_function(wrap_pyfunction!(record_python_stack, m)?)?;
    m.add_function(wrap_pyfunction!(clock_sync, m)?)?;
    m.add_function(wrap_pyfunction!(_set_decorator, m)?)?;
    m.add_class::<Operation>()?;
    m.add_class::<Wrapped>()?;
    hook::register(m)?;
    Ok(())
}
