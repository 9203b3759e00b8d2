//! The one error type every importer and exporter returns: it names the file and says what is
//! wrong with it in one line, so the CLI can print it and exit with code 2.

use std::path::{Path, PathBuf};

/// What went wrong with an input or output file.
#[derive(Debug, thiserror::Error)]
pub enum ErrorKind {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("file is empty")]
    Empty,
    #[error("gzip stream is corrupt or truncated: {0}")]
    Gzip(String),
    #[error("decompressed size exceeds the limit of {limit} bytes (set STRATO_MAX_DECOMPRESSED_BYTES to raise it)")]
    DecompressedTooLarge { limit: u64 },
    #[error("invalid JSON at byte {offset}: {message}")]
    Json { offset: u64, message: String },
    #[error("not a trace: {0}")]
    NotATrace(String),
    #[error("unknown format: {0}")]
    UnknownFormat(String),
    #[error("SQLite: {0}")]
    Sqlite(String),
    #[error("CSV: {0}")]
    Csv(String),
    #[error("protobuf: {0}")]
    Protobuf(String),
    /// A `perf.data` file or `perf script` output that cannot be read.
    #[error("perf: {0}")]
    Perf(String),
    #[error("invalid trace: {0}")]
    Invalid(String),
    #[error("stopped: the trace would need more than the memory budget of {} MiB (set STRATO_MEMORY_BUDGET, e.g. 16G, to change it)", limit_bytes >> 20)]
    MemoryBudget { limit_bytes: u64 },
    /// Writing what a streaming import read failed (the message names the output).
    #[error("{0}")]
    Output(String),
    /// A setting (environment variable or option) is invalid.
    #[error("{0}")]
    Config(String),
}

/// An error tied to the file it concerns. Displays as `PATH: what is wrong`.
#[derive(Debug, thiserror::Error)]
#[error("{}: {kind}", path.display())]
pub struct Error {
    pub path: PathBuf,
    #[source]
    pub kind: ErrorKind,
}

impl Error {
    /// An error about `path`.
    pub fn new(path: impl AsRef<Path>, kind: impl Into<ErrorKind>) -> Self {
        Error {
            path: path.as_ref().to_path_buf(),
            kind: kind.into(),
        }
    }
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
