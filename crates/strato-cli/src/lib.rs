//! The `strato` command as a library, so the binary and the Python package's `strato` entry
//! point run the same code. The command enum and dispatch are in [`app`]; each subcommand's
//! handling and rendering are in their own modules.

pub mod app;
pub mod commands;
mod input;
mod launch;
mod output;
mod present;
mod render;
// signal(2) through `libc` around a recorded program's run, confined to this module.
#[allow(unsafe_code)]
mod shell_signals;
mod table;
pub mod term;

pub use app::{main, main_with_args};
