//! [`EngineError`]: why inputs could not be opened. One enum for every front end: the CLI
//! prints it as one line (exit 2), the Python API maps each variant to a named exception.

use std::path::PathBuf;

/// Why inputs could not be opened. Every message names the file concerned.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A path that does not exist.
    #[error("{}: no such file or directory", .0.display())]
    NotFound(PathBuf),
    /// An input (or an option's file) that cannot be imported.
    #[error(transparent)]
    Import(#[from] strato_io::Error),
    /// A profile directory or store that cannot be read.
    #[error(transparent)]
    Store(#[from] strato_store::StoreError),
    /// Inputs given in a way that cannot be opened (standard input twice, a profile directory
    /// with other inputs).
    #[error("{0}")]
    Usage(String),
    /// An input that changed between two reads of it (a rank file read again for the
    /// stragglers' causes is no longer what it was).
    #[error("{}: changed while it was read", .0.display())]
    InputChanged(PathBuf),
    /// A bad option or setting (a level map, the memory budget variable, a graph capture trace
    /// that cannot be used).
    #[error("{0}")]
    InvalidOption(String),
    /// A temporary file (events spilled to disk while an input streams) that could not be
    /// written or read back.
    #[error("temporary file in {}: {source}", .dir.display())]
    Spill {
        dir: PathBuf,
        source: std::io::Error,
    },
    /// A registered analysis that cannot run on these inputs (a step they lack, a dependency
    /// cycle); the message names the input when the engine opened it.
    #[error("{0}")]
    Analysis(String),
}

impl EngineError {
    pub(crate) fn option(path: &std::path::Path, what: impl std::fmt::Display) -> EngineError {
        EngineError::InvalidOption(format!("{}: {what}", path.display()))
    }
}
