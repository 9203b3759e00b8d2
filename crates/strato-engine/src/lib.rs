//! The engine under every front end: how the `strato` command and the Python API get from
//! what the user named (trace files, directories of ranks, merged multi-rank files, profile
//! directories, partitioned stores, recordings, standard input) to the [`Trace`] an analysis
//! reads.
//!
//! Owns, once for every front end:
//! - the options every input takes ([`OpenOptions`]: `--level-map`, `--salvage`,
//!   `--keep-secrets`, `--graph-capture`, `--jobs`, the memory budget), as one typed value
//!   passed down; there is no process-wide state, so one process may run many commands with
//!   different options (the Python package does);
//! - the order of the steps: read or import, overhead correction of calibrated recordings,
//!   graph attribution, redaction ([`Engine::open`]);
//! - the three ways of reading: whole ([`Engine::open`]), event batches streamed to a sink
//!   ([`Engine::stream_file`], [`Engine::stream_stored`]) and rank by rank
//!   ([`Engine::map_ranks`], and on it the collectives of a job,
//!   [`Engine::collectives_rank_by_rank`]), each with the projection the analysis declares in
//!   its [`ImportOptions`]; and the per-step critical path of a trace read in parts of a few
//!   steps each from a spill of its spans ([`Engine::critical_path_steps_in_parts`]);
//! - what the user is told while inputs are read (progress, import warnings, notes), through
//!   the front end's [`Listener`].
//!
//! - the JSON -> table flattening every front end shares ([`rows`]);
//! - the registry of analyses ([`registry`]): each registered once, run by name from every
//!   front end (command, Python, SQL views, report), with the openings of analyses that read
//!   their inputs their own way ([`opening`]), and of comparisons of two profiles
//!   ([`comparisons`]).
//!
//! It never prints and never exits: errors are [`EngineError`], lines for the user go to the
//! listener. Analyses (`strato-analysis`) never open files; front ends never open inputs but
//! through here.

mod collectives;
pub mod comparisons;
mod error;
mod info;
mod open;
pub mod opening;
mod options;
mod ranks;
pub mod registry;
pub mod rows;
pub mod steps;
mod stream;

pub use error::EngineError;
pub use open::{import_warnings, store_read_options, Profile};
pub use options::{Engine, Listener, OpenOptions, Quiet};
pub use ranks::{FilePart, Streamed};
pub use strato_analysis::info::shared_rank_claims;
pub use stream::drop_batch_events;

pub use strato_io::ImportOptions;
pub use strato_trace::Trace;

/// A result of the engine.
pub type Result<T, E = EngineError> = std::result::Result<T, E>;
