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

use std::path::{Path, PathBuf};

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

/// Why a profile could not be opened or analysed.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{}: no such file or directory", .0.display())]
    NotFound(PathBuf),
    #[error(transparent)]
    Import(#[from] strato_io::Error),
    #[error(transparent)]
    Store(#[from] strato_store::StoreError),
    #[error("{0}")]
    Option(String),
    #[error("{0}")]
    Read(String),
    #[error("{0}")]
    Analysis(String),
}

impl OpenError {
    pub fn option(path: &Path, what: impl std::fmt::Display) -> OpenError {
        OpenError::Option(format!("{}: {what}", path.display()))
    }

    pub fn read(path: &Path, what: impl std::fmt::Display) -> OpenError {
        OpenError::Read(format!("{}: {what}", path.display()))
    }
}

impl From<strato_engine::EngineError> for OpenError {
    fn from(e: strato_engine::EngineError) -> OpenError {
        use strato_engine::EngineError as E;
        match e {
            E::NotFound(path) => OpenError::NotFound(path),
            E::Import(e) => OpenError::Import(e),
            E::Store(e) => OpenError::Store(e),
            E::Usage(message) | E::InvalidOption(message) => OpenError::Option(message),
        }
    }
}

impl From<OpenError> for PyErr {
    fn from(e: OpenError) -> PyErr {
        use strato_io::ErrorKind as K;
        let message = e.to_string();
        match &e {
            OpenError::NotFound(_) => InputNotFound::new_err(message),
            OpenError::Import(err) => match &err.kind {
                K::Io(io) if io.kind() == std::io::ErrorKind::NotFound => {
                    InputNotFound::new_err(message)
                }
                K::Io(_) | K::Output(_) => ReadError::new_err(message),
                K::MemoryBudget { .. } => MemoryBudgetError::new_err(message),
                K::Config(_) | K::DecompressedTooLarge { .. } => InvalidOption::new_err(message),
                _ => TraceFormatError::new_err(message),
            },
            OpenError::Store(_) => ProfileStoreError::new_err(message),
            OpenError::Option(_) => InvalidOption::new_err(message),
            OpenError::Read(_) => ReadError::new_err(message),
            OpenError::Analysis(_) => AnalysisError::new_err(message),
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
