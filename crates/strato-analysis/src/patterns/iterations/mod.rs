//! Iterations (DeepProf, `papers/` seed 004, section IV): finds the training/inference
//! iterations of each device from its device activity alone, and measures them.
//!
//! - **Sequence**: per (rank, device), the *main stream* is the queue with the most kernels
//!   (DeepProf's main stream holds the framework's compute kernels; copy and assist streams
//!   hold few or none). Its device ops (kernels, copies, sets; not device-side syncs) in start
//!   order, each mapped to an integer symbol by name, form the string S.
//! - **Pattern**: a suffix array + LCP (SA-IS, Kasai; [`crate::patterns::suffix`]) of S, walked as
//!   suffix tree nodes. Given `i` iterations, the pattern is the longest substring that repeats c
//!   times with `i - eps < c <= i` (eps starts at i/2), is at most `|S| / i` long, and whose c
//!   occurrences do not overlap; when none qualifies eps doubles (DeepProf).
//!   Ties (same length and count: rotations of the loop when the trace starts or ends mid-way
//!   through an iteration) go to the candidate whose occurrences follow the largest device idle
//!   gap (median), then the earliest. When `i` is not given it is estimated: the longest
//!   disjoint-repeat whose occurrences cover at least half of S (then a quarter, ... 1/64),
//!   and `i` = its count.
//! - **Matches**: DeepProf's Algorithm 1 (greedy, at most k0 inserted ops per occurrence), run
//!   with longest-common-extension jumps, so a start costs O(k0) and the scan O(|S| k0).
//! - **Loops**: after a pattern's matches are taken out, the uncovered rest of S (segments
//!   joined by unique separators) is mined again, for a second loop (evaluation) and more.
//!
//! Window: the main stream's ops from first to last. An iteration is one match: from its first
//! op's start to its last op's end; the interval to the next is the time to the next match's
//! start. Conservation: per loop, sum of iteration durations + sum of intervals = last end -
//! first start (tested).
//!
//! Layout (each file reads only those listed before it): `mine.rs` (loops in a symbol
//! sequence), `measure.rs` (one loop's iterations and their averages), `diagnosis.rs` (what
//! the measures say), `report.rs` (the whole-trace analysis: main streams, mined, measured,
//! diagnosed), `steps.rs` (the check against step annotations), `lines_up.rs` (naming loops
//! after the annotations and modules they line up with).

mod diagnosis;
mod lines_up;
mod measure;
mod mine;
mod registration;
mod report;
mod steps;
mod stream;

pub use diagnosis::Diagnosis;
pub use lines_up::{attach_lines_up, LINES_UP_SHARE};
pub use measure::{Iteration, Summary};
pub use mine::{
    mine, synthetic, IterationOptions, Match, MinedLoop, NESTED_COVER, NESTED_MAX_I,
    NESTED_MAX_LEN, NESTED_MIN_LEN,
};
pub use registration::{Iterations, IterationsResult, IterationsSettings};
pub use report::{iterations, IterationsReport, LoopReport, NoLoop, Options};
pub use steps::{check_against_steps, step_windows, StepCheck, StepWindow};
pub use stream::IterationsStream;

#[cfg(test)]
mod tests;
