//! The store's error type: every failure names the file (or directory) it concerns and says
//! what is wrong with it in one line (`out/spans.parquet: column 'start_ns' missing`).

use std::path::{Path, PathBuf};

/// What went wrong with a profile directory or one of its files.
#[derive(Debug, thiserror::Error)]
pub enum StoreErrorKind {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("not a stratoscope profile: {0}")]
    NotAProfile(String),
    #[error("refusing to replace it: {0}")]
    Refused(String),
    #[error("invalid metadata: {0}")]
    Metadata(String),
    #[error("schema_version {found} is newer than this reader supports ({supported}); upgrade stratoscope to read it")]
    NewerSchema { found: u64, supported: u64 },
    #[error("invalid Parquet: {0}")]
    Parquet(String),
    #[error("column '{0}' missing")]
    MissingColumn(String),
    #[error("column '{column}' has type {found}, expected {expected}")]
    ColumnType {
        column: String,
        found: String,
        expected: String,
    },
    #[error("column '{column}' is null at row {row}")]
    Null { column: String, row: usize },
    #[error("column '{column}' row {row}: {message}")]
    BadValue {
        column: String,
        row: usize,
        message: String,
    },
    #[error("has {found} rows but metadata.json says {expected}")]
    RowCount { expected: u64, found: u64 },
    #[error("invalid trace: {0}")]
    InvalidTrace(String),
}

/// An error tied to the path it concerns. Displays as `PATH: what is wrong`.
#[derive(Debug, thiserror::Error)]
#[error("{}: {kind}", path.display())]
pub struct StoreError {
    pub path: PathBuf,
    #[source]
    pub kind: StoreErrorKind,
}

impl StoreError {
    /// An error about `path`.
    pub fn new(path: impl AsRef<Path>, kind: impl Into<StoreErrorKind>) -> Self {
        StoreError {
            path: path.as_ref().to_path_buf(),
            kind: kind.into(),
        }
    }
}

/// Result with [`StoreError`].
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
