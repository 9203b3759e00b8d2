//! Errors of the measurement engine. Failures of a *candidate* (build error, crash, timeout,
//! out of memory) are not errors: they are outcomes ([`crate::protocol::Outcome`]). These are
//! failures of the engine itself.

use thiserror::Error;

/// Result alias for the crate.
pub type Result<T, E = MeasureError> = std::result::Result<T, E>;

/// What can go wrong in the engine.
#[derive(Debug, Error)]
pub enum MeasureError {
    /// I/O with a worker or a file.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// A malformed frame or message.
    #[error("protocol: {0}")]
    Protocol(String),
    /// A worker could not be started or never became ready.
    #[error("worker start: {0}")]
    WorkerStart(String),
    /// The OpenCL platform/device could not be set up.
    #[error("opencl: {0}")]
    OpenCl(String),
    /// A malformed candidate list.
    #[error("candidate list: {0}")]
    CandidateList(String),
    /// An invalid configuration.
    #[error("config: {0}")]
    Config(String),
}
