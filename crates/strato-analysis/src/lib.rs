//! Analyses: pure functions from a [`strato_trace::Trace`] (plus options) to result tables.
//! Nothing here reads or writes files; every analysis states its window and conserves time
//! (its parts add up to the whole), which the tests check.

pub mod gpu_time;
pub mod info;
