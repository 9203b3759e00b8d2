//! CPU samples with stacks, per operation (issue 19, item 3): the flame graphs' data.
//!
//! Input: the native CPU samples `strato record --sample` writes (instants of category
//! `cpu_sample`, named by the folded native stack, outermost first) and the Python stacks the
//! program's recorder samples (instants of category `python_stack`), on the threads' own
//! tracks, both on the recorder's clock (`CLOCK_MONOTONIC`).
//!
//! Rules:
//! - A sample belongs to the innermost `Operation`-level span of its own thread that covers its
//!   time, else to [`NO_OPERATION`] (e.g. a BLAS worker thread, which runs no operation itself).
//! - Its Python part is the `python_stack` instant of the same thread nearest in time that lies
//!   inside the same operation instance (so no stack crosses an operation boundary) and at most
//!   [`SampleOptions::max_python_gap_ns`] away; else the frame [`PYTHON_NOT_SAMPLED`]. The full
//!   stack is `python frames ; native frames` (the native part starts at the interpreter frame).
//! - Window: from the first to the last sample. Conservation: every sample is counted in exactly
//!   one operation and one stack, so operations' counts add up to [`CpuSamples::samples`] and
//!   each operation's stacks add up to its count (tests check both).

use std::collections::HashMap;

use serde::Serialize;
use strato_trace::{Level, Ns, Trace, TrackId};

pub use strato_trace::names::{CPU_SAMPLE_CATEGORY, PYTHON_STACK_CATEGORY};
/// The operation name of samples outside every operation of their thread.
pub const NO_OPERATION: &str = "(no operation)";
/// The Python part of a sample no Python stack could be joined with.
pub const PYTHON_NOT_SAMPLED: &str = "[python stack not sampled]";

/// Options of [`cpu_samples`].
#[derive(Debug, Clone)]
pub struct SampleOptions {
    /// How far (either way) a Python stack may be from a native sample to be joined with it.
    pub max_python_gap_ns: Ns,
}

impl Default for SampleOptions {
    /// 50 ms: ten GIL switch intervals; the Python sampler runs at up to 200 Hz.
    fn default() -> Self {
        SampleOptions {
            max_python_gap_ns: 50_000_000,
        }
    }
}

/// The samples of one operation (by name, over all its instances and threads).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OperationSamples {
    pub operation: String,
    pub samples: u64,
    /// Samples whose Python part was joined (the rest carry [`PYTHON_NOT_SAMPLED`]).
    pub python_joined: u64,
    /// Folded stacks (outermost first, `;`-separated) and their counts, most samples first.
    pub stacks: Vec<(String, u64)>,
}

/// Every CPU sample of a trace, by operation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CpuSamples {
    /// First and last sample time (ns); None without samples.
    pub window: Option<(Ns, Ns)>,
    pub samples: u64,
    pub python_joined: u64,
    /// Most samples first; [`NO_OPERATION`] among them when it has any.
    pub operations: Vec<OperationSamples>,
}

impl CpuSamples {
    /// Folded-stack lines (`op:NAME;frame;...;leaf COUNT`), the input format of `flamegraph.pl`,
    /// inferno and speedscope: the operation is the root frame.
    pub fn folded(&self) -> impl Iterator<Item = String> + '_ {
        self.operations.iter().flat_map(|op| {
            op.stacks
                .iter()
                .map(move |(stack, n)| format!("op:{};{stack} {n}", op.operation))
        })
    }

    /// The operation named `name`.
    pub fn operation(&self, name: &str) -> Option<&OperationSamples> {
        self.operations.iter().find(|o| o.operation == name)
    }
}

#[derive(Default)]
struct ThreadData {
    /// `(start, end, name)` of operation spans, by start.
    ops: Vec<(Ns, Ns, String)>,
    /// `(ts, stack)` of Python stacks, by time.
    python: Vec<(Ns, String)>,
    /// `(ts, stack)` of native samples.
    native: Vec<(Ns, String)>,
}

/// One native sample joined with its operation and Python stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinedSample {
    pub track: TrackId,
    pub ts: Ns,
    /// The innermost operation's name, or [`NO_OPERATION`].
    pub operation: String,
    /// Whether a Python stack was joined (else the stack starts with [`PYTHON_NOT_SAMPLED`]).
    pub python_joined: bool,
    /// `python frames;native frames`, outermost first.
    pub stack: String,
}

/// Every native sample of `trace`, joined by the module's rules, by track then time.
pub fn joined_samples(trace: &Trace, options: &SampleOptions) -> Vec<JoinedSample> {
    let (Some(cpu_cat), python_cat) = (
        trace.strings.lookup(CPU_SAMPLE_CATEGORY),
        trace.strings.lookup(PYTHON_STACK_CATEGORY),
    ) else {
        return Vec::new();
    };
    let mut threads: HashMap<TrackId, ThreadData> = HashMap::new();
    for i in &trace.instants {
        if i.category == cpu_cat {
            threads
                .entry(i.track)
                .or_default()
                .native
                .push((i.ts, trace.str(i.name).to_owned()));
        } else if Some(i.category) == python_cat {
            threads
                .entry(i.track)
                .or_default()
                .python
                .push((i.ts, trace.str(i.name).to_owned()));
        }
    }
    for s in &trace.spans {
        if s.level == Level::Operation {
            if let Some(t) = threads.get_mut(&s.track) {
                t.ops.push((s.start, s.end, trace.str(s.name).to_owned()));
            }
        }
    }
    let mut tracks: Vec<(TrackId, ThreadData)> = threads.into_iter().collect();
    tracks.sort_by_key(|t| t.0);
    let mut out = Vec::new();
    for (track, mut t) in tracks {
        t.ops.sort_by_key(|o| (o.0, std::cmp::Reverse(o.1)));
        t.python.sort_by_key(|p| p.0);
        t.native.sort_by_key(|n| n.0);
        for (ts, native) in &t.native {
            let op = innermost(&t.ops, *ts);
            let (lo, hi) = match op {
                Some(o) => (o.0, o.1),
                None => (Ns::MIN, Ns::MAX),
            };
            let python = nearest(&t.python, *ts, lo, hi, options.max_python_gap_ns);
            out.push(JoinedSample {
                track,
                ts: *ts,
                operation: op.map_or(NO_OPERATION, |o| o.2.as_str()).to_owned(),
                python_joined: python.is_some(),
                stack: format!("{};{native}", python.unwrap_or(PYTHON_NOT_SAMPLED)),
            });
        }
    }
    out
}

/// Groups every CPU sample of `trace` by operation, joined with its Python stack.
pub fn cpu_samples(trace: &Trace, options: &SampleOptions) -> CpuSamples {
    // operation -> (samples, joined, stack -> count)
    type Acc = (u64, u64, HashMap<String, u64>);
    let mut by_op: HashMap<String, Acc> = HashMap::new();
    let mut out = CpuSamples::default();
    for s in joined_samples(trace, options) {
        let acc = by_op.entry(s.operation).or_default();
        acc.0 += 1;
        acc.1 += u64::from(s.python_joined);
        *acc.2.entry(s.stack).or_default() += 1;
        out.samples += 1;
        out.window = Some(match out.window {
            None => (s.ts, s.ts),
            Some((a, b)) => (a.min(s.ts), b.max(s.ts)),
        });
    }
    for (operation, (samples, joined, stacks)) in by_op {
        let mut stacks: Vec<(String, u64)> = stacks.into_iter().collect();
        stacks.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        out.python_joined += joined;
        out.operations.push(OperationSamples {
            operation,
            samples,
            python_joined: joined,
            stacks,
        });
    }
    out.operations.sort_by(|a, b| {
        b.samples
            .cmp(&a.samples)
            .then_with(|| a.operation.cmp(&b.operation))
    });
    out
}

/// The innermost operation covering `ts` (the latest-starting one of those covering it).
fn innermost(ops: &[(Ns, Ns, String)], ts: Ns) -> Option<&(Ns, Ns, String)> {
    let upto = ops.partition_point(|o| o.0 <= ts);
    ops[..upto]
        .iter()
        .rev()
        .filter(|o| ts < o.1)
        .max_by_key(|o| o.0)
}

/// The stack in `[lo, hi)` nearest to `ts`, at most `gap` away.
fn nearest(python: &[(Ns, String)], ts: Ns, lo: Ns, hi: Ns, gap: Ns) -> Option<&str> {
    let i = python.partition_point(|p| p.0 < ts);
    let after = python.get(i).filter(|p| p.0 < hi);
    let before = i
        .checked_sub(1)
        .and_then(|j| python.get(j))
        .filter(|p| p.0 >= lo);
    let best = match (before, after) {
        (Some(b), Some(a)) => Some(if ts - b.0 <= a.0 - ts { b } else { a }),
        (b, a) => b.or(a),
    }?;
    (best.0.abs_diff(ts) <= gap.unsigned_abs()).then_some(best.1.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use strato_trace::testing::TraceBuilder;

    /// Two operations on one thread, each with known samples; a worker thread without any.
    fn synthetic() -> Trace {
        let mut b = TraceBuilder::new();
        let main = b.thread(1, 1);
        let worker = b.thread(1, 2);
        b.span(main, Level::Operation, "py", 0, 1_000_000_000);
        b.span(main, Level::Operation, "np", 1_000_000_000, 2_000_000_000);
        for k in 0..10 {
            let ts = k * 100_000_000 + 5_000_000;
            b.instant(main, Level::Python, PYTHON_STACK_CATEGORY, "main;spin", ts);
            b.instant(
                main,
                Level::Os,
                CPU_SAMPLE_CATEGORY,
                "eval [python3.11]",
                ts + 1_000_000,
            );
            let ts = ts + 1_000_000_000;
            b.instant(
                main,
                Level::Python,
                PYTHON_STACK_CATEGORY,
                "main;matmul",
                ts,
            );
            b.instant(
                main,
                Level::Os,
                CPU_SAMPLE_CATEGORY,
                "gemm [libblas.so]",
                ts + 1_000_000,
            );
            b.instant(
                worker,
                Level::Os,
                CPU_SAMPLE_CATEGORY,
                "gemm [libblas.so]",
                ts,
            );
        }
        // A native sample right after "py" starts, nearest Python stack belongs to nothing
        // before it: the next one (inside py) is 4 ms later.
        b.instant(
            main,
            Level::Os,
            CPU_SAMPLE_CATEGORY,
            "eval [python3.11]",
            1_000_000,
        );
        b.build()
    }

    #[test]
    fn samples_go_to_their_operation_and_add_up() {
        let s = cpu_samples(&synthetic(), &SampleOptions::default());
        assert_eq!(s.samples, 31);
        let total: u64 = s.operations.iter().map(|o| o.samples).sum();
        assert_eq!(total, s.samples);
        for op in &s.operations {
            assert_eq!(op.stacks.iter().map(|x| x.1).sum::<u64>(), op.samples);
        }
        let py = s.operation("py").unwrap();
        assert_eq!(py.samples, 11);
        assert_eq!(py.python_joined, 11);
        assert_eq!(
            py.stacks,
            vec![("main;spin;eval [python3.11]".to_owned(), 11)]
        );
        let np = s.operation("np").unwrap();
        assert_eq!(
            np.stacks,
            vec![("main;matmul;gemm [libblas.so]".to_owned(), 10)]
        );
        let none = s.operation(NO_OPERATION).unwrap();
        assert_eq!(none.samples, 10);
        assert_eq!(none.python_joined, 0);
        assert!(none.stacks[0].0.starts_with(PYTHON_NOT_SAMPLED));
        assert_eq!(s.window, Some((1_000_000, 1_906_000_000)));
        let folded: Vec<String> = s.folded().collect();
        assert_eq!(folded.len(), 3);
        assert!(folded.contains(&"op:np;main;matmul;gemm [libblas.so] 10".to_owned()));
    }

    #[test]
    fn python_stacks_never_cross_an_operation_boundary() {
        let mut b = TraceBuilder::new();
        let main = b.thread(1, 1);
        b.span(main, Level::Operation, "a", 0, 100);
        b.span(main, Level::Operation, "b", 100, 200);
        b.instant(main, Level::Python, PYTHON_STACK_CATEGORY, "in_a", 99);
        b.instant(main, Level::Os, CPU_SAMPLE_CATEGORY, "leaf", 101);
        let s = cpu_samples(&b.build(), &SampleOptions::default());
        let op = s.operation("b").unwrap();
        assert_eq!(op.python_joined, 0);
        assert_eq!(op.stacks[0].0, format!("{PYTHON_NOT_SAMPLED};leaf"));
    }

    #[test]
    fn no_samples_no_rows() {
        let mut b = TraceBuilder::new();
        let main = b.thread(1, 1);
        b.span(main, Level::Operation, "a", 0, 100);
        assert_eq!(
            cpu_samples(&b.build(), &SampleOptions::default()),
            CpuSamples::default()
        );
    }
}
