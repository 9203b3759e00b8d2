//! Analyses: pure functions from a [`strato_trace::Trace`] (plus options) to result tables.
//! Nothing here reads or writes files; every analysis states its window and conserves time
//! (its parts add up to the whole), which the tests check.

pub mod breakdown;
pub mod busy;
pub mod calibration;
pub mod devices;
pub mod diff;
pub mod gpu_time;
pub mod hierarchy;
pub mod info;
pub mod iterations;
pub mod kernel_stats;
pub mod layers;
pub mod memory;
pub mod overhead;
pub mod scope;
pub mod suffix;
pub mod util;
