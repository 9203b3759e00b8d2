//! The `strato` command-line tests, in one test binary (one link instead of one per file):
//! each module tests a group of commands through the built binary as a user would, with the
//! runner and fixture helpers of [`common`].

#![allow(clippy::unwrap_used)] // test helpers panic on broken fixtures by design

mod advise;
mod answers;
mod collectives;
mod common;
mod crossstack;
mod foundation;
mod graphs;
mod hostile_inputs;
mod input_integrity;
mod iterations_kernels_memory;
mod multirank;
mod nsys_memory;
mod ops_bytes;
mod ops_modules;
mod outputs;
mod process_budget;
mod ranks;
mod report_diff;
mod samples;
mod secrets;
mod snapshots;
mod sql;
mod sql_limits;
mod time_arith;
mod view;
