//! Collectives of a multi-rank job: every NCCL/RCCL collective kernel of every rank, matched
//! across ranks into instances, with arrival, wait, transfer and bandwidth per instance, the
//! ranks that arrive last (stragglers) and what each was doing just before (the cause).
//!
//! Owns: the per-rank collective summaries ([`rank_summaries`]), the cross-rank matching
//! ([`match_collectives`], public for the critical path, which needs the cross-rank edges), the
//! per-instance measures and the straggler analysis ([`collectives`]). Clock alignment lives in
//! [`crate::distributed::clock_align`] and is applied here, between matching and measuring.
//!
//! Definitions (docs/analyses/collectives.md says more):
//! - A **call** is one collective kernel on one rank (device side), with the CPU side attached
//!   when the kernel's launch (same correlation) sits inside a `record_param_comms`, `nccl:*`
//!   or `c10d::*` op. Attributes (kind, process group, seq, sizes, dtype) come from the kernel's
//!   args first, then the CPU ops', innermost first; what none of them says stays `None`.
//! - **Matching**: by (process group, seq) when both are known; else by (process group, kind,
//!   order of that group's calls of that kind on the rank); else (old traces without args) by
//!   (kind from the kernel name, order on the rank). An instance whose expected members (the
//!   group's ranks, else its size, else the job's world size, else the ranks in the input) are
//!   not all in the input is **incomplete**: kept and labelled, and what depends on the
//!   missing peers (last arrival, waits, transfer, bandwidth) is `None`.
//! - **Arrival** = device start of the rank's kernel (aligned clock); **wait** = last arrival -
//!   own arrival, at most the kernel's duration (the rest of the kernel is its transfer part,
//!   so wait + transfer part = kernel time, per member: tested); **transfer** = end of the last
//!   arriving rank's kernel - last arrival; **algbw** = bytes / transfer; **busbw** = algbw x
//!   NCCL's factor for the kind and group size n (all-reduce 2(n-1)/n; all-gather,
//!   reduce-scatter, all-to-all (n-1)/n; broadcast, reduce, send/recv 1). **Units**: decimal
//!   GB/s (10^9 B/s, NCCL-tests' unit; bytes per ns); TraceLens prints GiB/s (2^30 B/s), 7.4%
//!   less for the same rate. One definition: [`bandwidths`] (also used by `strato ops`).
//! - **Bytes** = max(in, out) elements x dtype size (NCCL-tests' "size"); for old traces the
//!   `nccl:*` annotation's single input tensor is used only for all-reduce, broadcast and
//!   reduce, where it is the message; send/recv kernels (the DLRM all-to-alls) have no size.
//! - Window: the instances' span, from the first arrival to the last kernel end (aligned).
//! - Tables: by (kind, power-of-two size bucket) ([`SizeGroup`]) and by (kind, exact message
//!   bytes) ([`ExactSizeGroup`]); every instance is in one row of each.
//!
//! Memory: the cross-rank work reads [`RankCollectives`] (one small record per collective
//! kernel per rank), never every event of every rank; the straggler cause reads the late rank's
//! spans for the few worst instances only.
//!
//! Layout (each file reads only those listed before it): `kinds.rs` (kinds, bandwidth
//! definitions, dtype sizes), `calls.rs` (one rank's collective calls), `copies.rs` (what
//! `calls.rs` reads, gathered batch by batch by the streamed analyses), `matching.rs`
//! (instances across ranks and their measures), `stragglers.rs` (who was late and why),
//! `report.rs` (the analysis and its tables); `per_device.rs` splits a process driving several
//! GPUs into one rank per device.

mod calls;
mod copies;
mod kinds;
mod matching;
mod per_device;
mod registration;
mod report;
mod stragglers;

pub use calls::{rank_summaries, CollectiveCall, CollectiveSurvey, RankCollectives};
pub use copies::{CollectiveCopies, HostSpan};
pub use kinds::{bandwidths, dtype_size, is_collective_kernel, CollectiveKind};
pub use matching::{
    job_clock_shifts, match_collectives, measure, CollectiveInstance, MatchBy, Member,
};
pub use per_device::split_multi_device_ranks;
pub use registration::{Collectives, CollectivesResult, CollectivesSettings};
pub use report::{
    collectives, collectives_of_summaries, device_links, link_bandwidth_gbps, CollectivesOptions,
    CollectivesReport, DeviceLink, ExactSizeGroup, RankSummary, SizeGroup,
};
pub use stragglers::{straggler_cause, CauseRequest, Straggler, StragglerCause, StragglerVerdict};

#[cfg(test)]
mod tests;
