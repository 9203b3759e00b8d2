//! What a loop's measures say ([`Diagnosis`]): copy-, CPU-, launch- or device-bound,
//! irregular, extra ops, weak pattern, layers in one step; the rules and their wording.

use serde::Serialize;
use strato_trace::Ns;

use super::measure::{Iteration, Summary};
use super::mine::MinedLoop;

fn ms(ns: f64) -> String {
    format!("{:.3} ms", ns / 1e6)
}

/// One finding about a loop, with the numbers behind it. [`Diagnosis::message`] words it;
/// JSON carries the message (`"diagnosis": ["copy-bound: ...", ...]`).
///
/// Rules (thresholds of [`diagnose`]): *copy-bound* or *CPU-bound* when the device waits
/// between iterations for at least 20% of each cycle (copy-bound when host-to-device copies
/// cover at least half of the mean interval); *launch/host-bound* when the main stream is busy
/// less than 70% of each iteration; *device-bound* when neither applies; *irregular* when the
/// longest interval is over 3x the median; *extra ops* when some iterations run ops beyond the
/// pattern; *weak pattern* when iterations hold less than half of the stream's ops.
#[derive(Debug, Clone, PartialEq)]
pub enum Diagnosis {
    /// Host-to-device copies fill the gaps between iterations.
    CopyBound {
        /// Share of the mean interval the copies cover (0..1).
        h2d_overlap: f64,
        mean_interval_ns: f64,
        /// Share of each cycle spent between iterations (0..1).
        between_share: f64,
    },
    /// The device waits on the host between iterations.
    CpuBound {
        mean_interval_ns: f64,
        between_share: f64,
        h2d_overlap: f64,
    },
    /// The main stream idles inside iterations.
    LaunchBound {
        /// Share of each iteration the main stream is busy (0..1).
        busy_in_iterations: f64,
        mean_op_gap_ns: f64,
    },
    /// The main stream is busy and iterations follow each other closely.
    DeviceBound {
        busy_in_iterations: f64,
        between_share: f64,
    },
    /// One interval is far longer than the median (a stall).
    Irregular {
        /// The iteration after which the longest wait comes (its `index`).
        after_iteration: usize,
        max_interval_ns: Ns,
        median_interval_ns: f64,
    },
    /// Some iterations run ops beyond the pattern.
    ExtraOps {
        iterations_with_extra: usize,
        iterations: usize,
        most_extra_ops: usize,
        pattern_len: usize,
    },
    /// The loop is a module's repeated layers inside one step of a trace with at most one
    /// step (inference): not training iterations, and the gaps between them are no stalls.
    LayersInOneStep {
        /// The module class, when the iterations line up with one.
        module: Option<String>,
        iterations: usize,
        /// How many iterations line up with `module`'s instances (`iterations` when all do).
        lined_up: usize,
    },
    /// Iterations hold few of the main stream's ops.
    WeakPattern {
        /// Share of the main stream's ops inside iterations (0..1).
        coverage: f64,
    },
}

impl Diagnosis {
    /// The finding in words, with its numbers.
    pub fn message(&self) -> String {
        match *self {
            Diagnosis::CopyBound {
                h2d_overlap,
                mean_interval_ns,
                between_share,
            } => format!(
                "copy-bound: host-to-device copies fill the gaps between iterations \
                 (they cover {:.0}% of the mean {} interval, {:.0}% of each cycle)",
                100.0 * h2d_overlap,
                ms(mean_interval_ns),
                100.0 * between_share
            ),
            Diagnosis::CpuBound {
                mean_interval_ns,
                between_share,
                h2d_overlap,
            } => format!(
                "CPU-bound: the device waits on the host between iterations (mean interval {}, \
                 {:.0}% of each cycle; copies cover only {:.0}% of it)",
                ms(mean_interval_ns),
                100.0 * between_share,
                100.0 * h2d_overlap
            ),
            Diagnosis::LaunchBound {
                busy_in_iterations,
                mean_op_gap_ns,
            } => format!(
                "launch/host-bound inside iterations: the main stream is idle {:.0}% of each \
                 iteration (mean gap between ops {:.1} us)",
                100.0 * (1.0 - busy_in_iterations),
                mean_op_gap_ns / 1e3
            ),
            Diagnosis::DeviceBound {
                busy_in_iterations,
                between_share,
            } => format!(
                "device-bound: the main stream is busy {:.0}% of each iteration and waits {:.0}% of \
                 each cycle between iterations",
                100.0 * busy_in_iterations,
                100.0 * between_share
            ),
            Diagnosis::Irregular {
                after_iteration,
                max_interval_ns,
                median_interval_ns,
            } => format!(
                "irregular: after iteration {} the device waits {} against a median of {} \
                 (a stall: data loading, checkpointing, garbage collection?)",
                after_iteration,
                ms(max_interval_ns as f64),
                ms(median_interval_ns)
            ),
            Diagnosis::ExtraOps {
                iterations_with_extra,
                iterations,
                most_extra_ops,
                pattern_len,
            } => format!(
                "{iterations_with_extra} of {iterations} iterations run extra ops (up to \
                 {most_extra_ops} beyond the {pattern_len}-op pattern): periodic extra work \
                 such as logging or statistics"
            ),
            Diagnosis::LayersInOneStep {
                ref module,
                iterations,
                lined_up,
            } => match module {
                Some(module) if lined_up < iterations => format!(
                    "layers, not training iterations: {lined_up} of the {iterations} \
                     iterations are the {module} modules of one step, the rest repeat beside \
                     them (gaps between them are the layers' own, not stalls)"
                ),
                Some(module) => format!(
                    "layers, not training iterations: the {iterations} iterations are the \
                     {module} modules of one step (gaps between them are the layers' own, not \
                     stalls)"
                ),
                None => format!(
                    "layers, not training iterations: the {iterations} iterations repeat inside \
                     one step (gaps between them are the blocks' own, not stalls)"
                ),
            },
            Diagnosis::WeakPattern { coverage } => format!(
                "weak pattern: iterations hold only {:.0}% of the main stream's ops",
                100.0 * coverage
            ),
        }
    }
}

impl std::fmt::Display for Diagnosis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message())
    }
}

impl Serialize for Diagnosis {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.message())
    }
}

/// Diagnoses of a loop (rules at [`Diagnosis`]).
pub(super) fn diagnose(s: &Summary, iterations: &[Iteration], found: &MinedLoop) -> Vec<Diagnosis> {
    let mut out = Vec::new();
    let between = s.between_share;
    if between >= 0.2 {
        if s.mean_h2d_overlap >= 0.5 {
            out.push(Diagnosis::CopyBound {
                h2d_overlap: s.mean_h2d_overlap,
                mean_interval_ns: s.mean_interval_ns,
                between_share: between,
            });
        } else {
            out.push(Diagnosis::CpuBound {
                mean_interval_ns: s.mean_interval_ns,
                between_share: between,
                h2d_overlap: s.mean_h2d_overlap,
            });
        }
    }
    if s.busy_in_iterations < 0.7 {
        out.push(Diagnosis::LaunchBound {
            busy_in_iterations: s.busy_in_iterations,
            mean_op_gap_ns: s.mean_op_gap_ns,
        });
    }
    if out.is_empty() {
        out.push(Diagnosis::DeviceBound {
            busy_in_iterations: s.busy_in_iterations,
            between_share: between,
        });
    }
    if s.median_interval_ns > 0.0 && s.max_interval_ns as f64 > 3.0 * s.median_interval_ns {
        if let Some(worst) = iterations
            .iter()
            .max_by_key(|i| i.interval_to_next_ns.unwrap_or(0))
        {
            out.push(Diagnosis::Irregular {
                after_iteration: worst.index,
                max_interval_ns: s.max_interval_ns,
                median_interval_ns: s.median_interval_ns,
            });
        }
    }
    let noisy = iterations.iter().filter(|i| i.inserted_ops > 0).count();
    if noisy > 0 {
        out.push(Diagnosis::ExtraOps {
            iterations_with_extra: noisy,
            iterations: iterations.len(),
            most_extra_ops: iterations.iter().map(|i| i.inserted_ops).max().unwrap_or(0),
            pattern_len: found.pattern_len,
        });
    }
    if s.coverage < 0.5 {
        out.push(Diagnosis::WeakPattern {
            coverage: s.coverage,
        });
    }
    out
}
