//! One module per `strato` subcommand (or family of subcommands): its arguments, handling and
//! rendering. Commands are dispatched from [`crate::app`].

pub(crate) mod advise;
pub(crate) mod breakdown;
pub(crate) mod collectives;
pub(crate) mod completions;
pub(crate) mod critical_path;
pub(crate) mod diff;
pub(crate) mod export;
pub(crate) mod export_samples;
pub(crate) mod gpu_time;
pub(crate) mod hierarchy;
pub(crate) mod import;
pub(crate) mod info;
pub(crate) mod iterations;
pub(crate) mod kernels;
pub(crate) mod layers;
pub(crate) mod measure;
pub(crate) mod memory;
pub(crate) mod ops;
pub mod overhead;
pub mod record;
pub(crate) mod record_sample;
pub(crate) mod registered;
pub(crate) mod report;
pub(crate) mod roofline;
#[cfg(feature = "sql")]
pub(crate) mod sql;
pub(crate) mod util;
pub(crate) mod validate;
