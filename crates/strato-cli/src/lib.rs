//! The `strato` command as a library (the binary is `main.rs`; the Python package ships that
//! binary). The command enum and dispatch are in [`app`]; each subcommand's handling lives in
//! its own `commands/<name>.rs`; inputs are opened through the context's engine
//! (`strato-engine`, the one way in for every front end); shared pieces are `output` (writing
//! without destroying), `launch`, `args`, `table` and `render` (units and shared text).

pub mod app;
mod calibration_runs;
pub mod commands;
mod ctx;
// pipe(2), fcntl(2), read(2) through `libc` to hold a recorded program before its exec,
// confined to this module.
#[allow(unsafe_code)]
mod gate;
mod launch;
mod output;
// The binary's counting global allocator, its exit through `libc` (`_exit`, `write`,
// `unlink`: nothing that allocates or unwinds) and glibc's `mallopt`, confined to this module.
#[allow(unsafe_code)]
pub mod process_budget;
mod profile_write;
mod render;
// signal(2) through `libc` around a recorded program's run, confined to this module.
#[allow(unsafe_code)]
mod shell_signals;
pub mod term;

pub use app::{main, main_with_args};
