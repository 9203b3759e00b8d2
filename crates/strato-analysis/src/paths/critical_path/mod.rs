//! Critical path: the longest chain of dependencies through CPU operations, runtime calls
//! (launches, synchronisations), device kernels and copies, stream order, synchronisation
//! edges and, across ranks, collectives — what the end of each rank's work waited on, and
//! what that chain is made of.
//!
//! This module owns the dependency graph and the longest-path search; presenters only read
//! [`CriticalPathReport`]. The method follows Holistic Trace Analysis (HTA 0.5)'s critical
//! path analysis, written anew (see `docs/analyses/critical-path.md`):
//!
//! - every included span gives two nodes, its start and its end (times in ns);
//! - **CPU**: on each thread, the spans of the framework and runtime levels (`Backend`,
//!   `Simulator`, `Library`, `AcceleratorApi`; zero-length ones left out) are walked in call
//!   order: an edge from the last node to the next start or end, weighted by the time
//!   between them (the CPU was running that op), except the inside of a blocking runtime call
//!   ([`is_blocking_call`]: [`BLOCKING_CALLS`] and OpenCL enqueues made blocking), which
//!   weighs 0 (the CPU waited). Consecutive top-level ops are linked
//!   by a 0-weight edge (the thread did something untraced in between);
//! - **device**: each kernel/copy/set is an edge start -> end weighted by its duration.
//!   Kernels of a stream are linked in stream order: from the launching call's start to the
//!   kernel's start (launch delay, weighted) when the stream was empty when it was launched,
//!   else from the previous kernel's end (weighted by the gap);
//! - **synchronisation** (0-weight edges, the wait is not work): a stream sync from the last
//!   kernel of that stream to the end of the runtime call, a device/context sync from the last
//!   kernel of every stream of the device, an event sync from the kernel launched before the
//!   recorded event (`wait_on_cuda_event_record_corr_id`) to the end of the runtime call, and a
//!   stream wait event from that kernel to the next kernel launched on the waiting stream;
//! - **collectives across ranks** (optional [`CollectiveInstance`]s): a collective kernel can
//!   only finish after every rank's kernel has started. Each instance gets an "all arrived"
//!   node at the last start; each member kernel is `start -> all arrived` (0 weight: waiting
//!   for peers) and `all arrived -> end` (weighted: transfer).
//!
//! The critical path of a rank is the path of largest total weight ending on one of the
//! rank's nodes (ties: the first edge added, the first node in topological order, as HTA's
//! networkx search does). Weights count work, so the path prefers chains that worked over
//! chains that waited; its **length** is the time it covers: every edge of the path covers
//! `[from, to]`, and [`RankCriticalPath::by_kind`] splits that time by [`PathKind`], adding up
//! to [`RankCriticalPath::length_ns`] exactly (edges that go back in time, from clock jitter
//! between nested spans, cover nothing and are counted in `backward_edges`).
//!
//! Windows: [`critical_path`] takes the whole trace (every included span of the rank);
//! [`critical_path_steps`] one `ProfilerStep#N` at a time (the step's CPU spans and the device
//! ops they launched, on every rank with that step), and [`compose`] splits a path inside a
//! window so that its kinds plus the time before and after the path add up to the window.
//!
//! Layout (each file reads only those listed before it): `shapes.rs` (what the analysis
//! reports), `options.rs` (its cross-rank input), `graph.rs` (nodes, edges, event kinds),
//! `rank_edges.rs` (one rank's CPU, launch, stream and synchronisation edges),
//! `collective_edges.rs` (edges across ranks), `search.rs` (the longest path; the whole
//! trace), `window.rs` (a path inside a window), `steps.rs` (per-step windows), `json.rs`
//! (the result as the front ends present it), `registration.rs` (the registered analysis:
//! options, tables, text), `windowed.rs` (the per-step paths from parts of a trace never held
//! whole) and `replay.rs` (the same graph simulated, with what-if changes).

mod collective_edges;
mod graph;
pub mod json;
mod options;
mod rank_edges;
pub mod registration;
pub mod replay;
mod search;
mod shapes;
mod steps;
mod window;
pub mod windowed;

pub use graph::{is_blocking_call, BLOCKING_CALLS};
pub use options::{
    instances_from_matched, match_collectives_by_name_order, CollectiveInstance, CollectiveMember,
    CriticalPathOptions,
};
pub use registration::{CriticalPath, CriticalPathResult, CriticalPathSettings};
pub use search::critical_path;
pub use shapes::{
    CriticalPathError, CriticalPathReport, GraphStats, LatePeer, PathEvent, PathKind, PathSegment,
    PeerEdge, RankCriticalPath,
};
pub use steps::{
    critical_path_by_step_or_whole, critical_path_steps, rank_steps, step_numbers, RankStepPath,
    StepCriticalPath,
};
pub use window::{compose, PathOp, WindowComposition, TOP_PATH_OPS};

#[cfg(test)]
mod tests;
