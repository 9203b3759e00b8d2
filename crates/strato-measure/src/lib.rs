//! `strato-measure`: parallel, accurate measurement of auto-tuning candidates, after DOPpler
//! (`papers/` seed 002).
//!
//! - [`pool`]: warm worker processes (each with its own OpenCL context and profiling queue)
//!   behind a framed pipe protocol ([`protocol`]); crashed or hung workers are replaced.
//! - [`calibrate`]: the calibrator's arithmetic (modified z-scores with the double MAD, eq. 2-7,
//!   rank-selection size), pure and unit-tested.
//! - [`engine`]: the calibrator driving the pool round by round, with every decision logged
//!   ([`log`]).
//! - [`serial`]: the conventional serial harness (fresh process, CPU timestamps) it is compared
//!   with; [`compare`]: that comparison; [`examples`]: the OpenCL matmul tuning workload.
//! - [`worker`]: the worker process itself (`strato-measure-worker`, `strato measure --worker`).

pub mod calibrate;
pub mod candidate;
// `opencl3`'s enqueue, argument and buffer calls are `unsafe`; they are confined to this
// module, each with a safety comment.
#[allow(unsafe_code)]
mod cl;
pub mod compare;
// `flock(2)` through `libc`, confined to this module.
#[allow(unsafe_code)]
pub mod devlock;
pub mod engine;
pub mod error;
pub mod examples;
pub mod log;
pub mod pool;
pub mod protocol;
pub mod serial;
pub mod serve;
pub mod worker;

pub use candidate::{Arg, BufferInit, Candidate, Fault};
pub use engine::{Engine, EngineConfig, Parallelism, RunReport, Statistic};
pub use error::{MeasureError, Result};
pub use pool::WorkerSpec;
pub use protocol::{Measurement, Outcome, Timing};
