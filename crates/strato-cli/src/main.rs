//! The `strato` binary. Commands, their arguments and dispatch live in `app.rs` (the library
//! target); this file only calls it.

fn main() -> std::process::ExitCode {
    strato_cli::main()
}
