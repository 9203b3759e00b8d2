//! Analyses: pure functions from a [`strato_trace::Trace`] (plus options) to result tables.
//! Analyses that share the trace's scopes and hierarchy take an [`analyzed::Analyzed`], which
//! builds them once; the others take the trace.
//! Nothing here reads or writes files; every analysis states its window and conserves time
//! (its parts add up to the whole), which the tests check.
//!
//! Layout: one folder per family, each with a `mod.rs` saying what it owns, and a shared core
//! at the root.
//! - [`device_time`]: where each device's time went (GPU time, busy fraction, utilization
//!   figures, kernel statistics, device memory and copies, launch-queue lengths);
//! - [`cross_stack`]: device work attributed to the CPU stack above it (breakdown, span
//!   hierarchy, layers and roofline, module tree, per-op table, CPU samples, CUDA graphs);
//! - [`distributed`]: several ranks at once (collectives matched across ranks, clock
//!   alignment);
//! - [`paths`]: the critical path through CPU, runtime, device and cross-rank dependencies;
//! - [`patterns`]: iterations mined from the kernel stream (with its suffix structures);
//! - [`models`]: performance models (the device table, per-op FLOPs and bytes);
//! - [`recording`]: stratoscope's own recordings (overhead correction and its calibration);
//! - [`compare`]: two profiles side by side (run to run, cross-hardware);
//! - [`advise`]: the expert rules that read the other families' facts.
//!
//! Shared core at the root, read across families rather than owned by one:
//! - [`scope`] classifies spans (device work, CPU strata, step markers) and indexes a trace's
//!   processes, annotated threads and launches; every family but `recording`, `models` and
//!   `distributed` reads it;
//! - [`analyzed`] is the context that builds the scopes and the span hierarchy's index once
//!   for all the analyses that take it;
//! - [`info`] is the inventory every command starts from (formats, levels, processes,
//!   devices): counts, no analysis of any family;
//! - [`registry`] is the contract an analysis implements to be registered once for every
//!   front end (`strato_engine::registry` holds the list); it reads no module;
//! - [`text`] writes results as aligned tables and CSV, for every analysis's text and the
//!   command line's own output; it reads no module;
//! - [`palette`] holds the colours of every front end's plots and timeline, so that a
//!   category keeps its colour everywhere; it reads no module.
//!
//! Dependencies between modules point one way (`scripts/module-cycles.py` checks there is no
//! circle). Between families: `distributed` and `recording` read no other module; `models`
//! reads only the dtype sizes of `distributed`; `device_time` reads only `scope`'s
//! classification (`busy`, `util`), and `scope` reads only the interval helpers of
//! [`device_time::gpu_time`], which reads nothing back; [`analyzed`] builds
//! [`cross_stack::hierarchy`]'s index, which reads only `scope`; `cross_stack` reads
//! `device_time`'s interval helpers, `models` (roofline, per-op costs) and `distributed`
//! (collective sizes and bandwidths in the per-op table); `patterns`, `paths`, `compare` and
//! `advise` read what they need of the others, and nothing reads them.

pub mod advise;
pub mod analyzed;
mod chunked;
pub mod compare;
pub mod cross_stack;
pub mod device_time;
pub mod distributed;
pub mod info;
pub mod models;
pub mod palette;
pub mod paths;
pub mod patterns;
pub mod recording;
pub mod registry;
pub mod scope;
pub mod text;
