//! One module per `strato` subcommand (or family of subcommands): its arguments, handling and
//! rendering. Commands are dispatched from [`crate::app`].

pub(crate) mod completions;
pub(crate) mod crossstack;
pub(crate) mod diff;
pub(crate) mod export;
pub(crate) mod iterations;
pub(crate) mod kernels;
pub(crate) mod measure;
pub(crate) mod memory;
pub mod overhead;
pub mod record;
pub(crate) mod report;
