//! The one mapping from Rust errors to Python exceptions. Every exception derives from
//! `stratoscope.StratoscopeError` and its message names the file concerned (as the CLI's
//! error lines do):
//! - `InputNotFound`: a path that does not exist;
//! - `TraceFormatError`: an input that is not a readable trace (invalid JSON, corrupt gzip,
//!   unknown format, an invalid trace, SQLite / CSV / protobuf errors);
//! - `ProfileStoreError`: a profile directory that cannot be read (damaged, newer schema);
//! - `MemoryBudgetError`: the import would pass the memory budget (`STRATO_MEMORY_BUDGET`);
//! - `InvalidOption`: a bad option or setting (a level map, the memory budget variable, a
//!   graph capture trace that has no captured launches, an analysis option out of range);
//! - `AnalysisError`: an analysis that cannot run on this profile (e.g. a dependency cycle in
//!   the critical path);
//! - `ReadError`: reading an input failed (an I/O error other than a missing path).

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    stratoscope._analysis,
    StratoscopeError,
    PyException,
    "Base class of stratoscope's analysis errors."
);
create_exception!(
    stratoscope._analysis,
    InputNotFound,
    StratoscopeError,
    "An input path does not exist."
);
create_exception!(
    stratoscope._analysis,
    TraceFormatError,
    StratoscopeError,
    "An input is not a readable trace."
);
create_exception!(
    stratoscope._analysis,
    ProfileStoreError,
    StratoscopeError,
    "A profile directory cannot be read."
);
create_exception!(
    stratoscope._analysis,
    MemoryBudgetError,
    StratoscopeError,
    "The import would pass the memory budget."
);
create_exception!(
    stratoscope._analysis,
    InvalidOption,
    StratoscopeError,
    "An option or setting is invalid."
);
create_exception!(
    stratoscope._analysis,
    AnalysisError,
    StratoscopeError,
    "An analysis cannot run on this profile."
);
create_exception!(
    stratoscope._analysis,
    ReadError,
    StratoscopeError,
    "Reading an input failed."
);

/// Why a profile could not be opened or analysed: the engine's error when opening (one
/// definition of what can go wrong there, `strato_engine::EngineError`), or a bad option or
/// an analysis that cannot run.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Engine(#[from] strato_engine::EngineError),
    #[error("{0}")]
    Option(String),
    #[error("{0}")]
    Analysis(String),
}

impl From<OpenError> for PyErr {
    fn from(e: OpenError) -> PyErr {
        use strato_engine::EngineError as E;
        use strato_io::ErrorKind as K;
        let message = e.to_string();
        match &e {
            OpenError::Engine(E::NotFound(_)) => InputNotFound::new_err(message),
            OpenError::Engine(E::Import(err)) => match &err.kind {
                K::Io(io) if io.kind() == std::io::ErrorKind::NotFound => {
                    InputNotFound::new_err(message)
                }
                K::Io(_) | K::Output(_) => ReadError::new_err(message),
                K::MemoryBudget { .. } => MemoryBudgetError::new_err(message),
                K::Config(_) | K::DecompressedTooLarge { .. } => InvalidOption::new_err(message),
                _ => TraceFormatError::new_err(message),
            },
            OpenError::Engine(E::Store(_)) => ProfileStoreError::new_err(message),
            OpenError::Engine(E::InputChanged(_) | E::Spill { .. }) => ReadError::new_err(message),
            OpenError::Engine(E::Usage(_) | E::InvalidOption(_)) | OpenError::Option(_) => {
                InvalidOption::new_err(message)
            }
            OpenError::Analysis(_) | OpenError::Engine(E::Analysis(_)) => {
                AnalysisError::new_err(message)
            }
        }
    }
}

/// Adds the exception classes to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("StratoscopeError", py.get_type::<StratoscopeError>())?;
    m.add("InputNotFound", py.get_type::<InputNotFound>())?;
    m.add("TraceFormatError", py.get_type::<TraceFormatError>())?;
    m.add("ProfileStoreError", py.get_type::<ProfileStoreError>())?;
    m.add("MemoryBudgetError", py.get_type::<MemoryBudgetError>())?;
    m.add("InvalidOption", py.get_type::<InvalidOption>())?;
    m.add("AnalysisError", py.get_type::<AnalysisError>())?;
    m.add("ReadError", py.get_type::<ReadError>())?;
    Ok(())
}
