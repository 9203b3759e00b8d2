//! The `strato` binary. Commands, their arguments and dispatch live in `app.rs` (the library
//! target); this file only calls it.

/// Every heap byte counted against `STRATO_MEMORY_BUDGET` (armed once the command line is
/// parsed): see `strato_cli::process_budget`.
#[global_allocator]
static ALLOCATOR: strato_cli::process_budget::BudgetedAllocator =
    strato_cli::process_budget::BudgetedAllocator;

fn main() -> std::process::ExitCode {
    strato_cli::main()
}
