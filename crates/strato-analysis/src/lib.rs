//! Analyses: pure functions from a [`strato_trace::Trace`] (plus options) to result tables.
//! Analyses that share the trace's scopes and hierarchy take an [`analyzed::Analyzed`], which
//! builds them once; the others take the trace.
//! Nothing here reads or writes files; every analysis states its window and conserves time
//! (its parts add up to the whole), which the tests check.

pub mod advise;
pub mod analyzed;
pub mod breakdown;
pub mod busy;
pub mod calibration;
pub mod clock_align;
pub mod collectives;
pub mod critical_path;
pub mod devices;
pub mod diff;
pub mod gpu_time;
pub mod graphs;
pub mod hierarchy;
pub mod info;
pub mod iterations;
pub mod kernel_stats;
pub mod layers;
pub mod memory;
pub mod modules;
pub mod op_diff;
pub mod op_models;
pub mod ops;
pub mod overhead;
pub mod queue_length;
pub mod registry;
pub mod samples;
pub mod scope;
pub mod suffix;
pub mod util;
