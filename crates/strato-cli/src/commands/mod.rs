//! One module per `strato` subcommand (or family of subcommands): its arguments, handling and
//! rendering. Commands are dispatched from [`crate::app`].

pub(crate) mod advise;
pub(crate) mod completions;
pub(crate) mod critical_path;
pub(crate) mod export;
pub(crate) mod export_samples;
pub(crate) mod import;
pub(crate) mod measure;
pub mod overhead;
pub mod record;
pub(crate) mod record_sample;
pub(crate) mod registered;
pub(crate) mod report;
#[cfg(feature = "sql")]
pub(crate) mod sql;
pub(crate) mod validate;
pub(crate) mod view;
