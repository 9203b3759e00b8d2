//! Issues 11 and 17: the per-step analyses stay linear in the trace. At 2 GB of Kineto JSON
//! (18k steps, 4.5M spans) `strato gpu-time`'s per-step exposure and `strato advise`'s
//! `step-breakdown` rule read every device event of the device for each step (quadratic:
//! 492 s and more than 12 minutes, `docs/benchmarks.md`). This guard times each on a
//! generated trace of N steps and of 16N steps (same shape per step) in the same process and
//! requires the larger to cost less than 40 times the smaller: linear work costs ~16 times
//! (20-26 measured: sorting, caches), quadratic work ~256 times (the per-step work that does
//! not depend on the trace's size dilutes it at these sizes: 60x and more measured). The measure is
//! the thread's CPU time (`/proc/thread-self/schedstat`; wall time where that is missing), the
//! least of three runs, so that other processes on the machine do not decide the result; each
//! measure repeats the work for 200 ms, since the thread's CPU time may advance only by whole
//! scheduler ticks. The test was checked to fail with the quadratic versions (ratios in
//! `docs/benchmarks.md`).
//!
//! The generated trace (exact by construction): per step a `ProfilerStep#i` span on the main
//! thread, a DataLoader span, then launches (`cudaLaunchKernel`) of computation kernels on
//! stream 7 and of one NCCL kernel on stream 20, each kernel correlated with its launch.
//! Checked alongside: every step is broken down, and its parts add up to the step.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use strato_analysis::advise::{self, step_breakdown};
use strato_analysis::analyzed::Analyzed;
use strato_analysis::device_time::gpu_time::{gpu_time, GpuTimeOptions};
use strato_trace::testing::TraceBuilder;
use strato_trace::{Level, Ns, Trace};

/// Kernels launched per step (one of them NCCL).
const KERNELS_PER_STEP: usize = 8;
/// Length of a step (ns): a 100 us data loading, then the launches, 10 us apart.
const STEP_NS: Ns = 200_000;

/// A trace of `steps` steps of the shape in the module docs.
fn trace_with_steps(steps: usize) -> Trace {
    let mut b = TraceBuilder::new();
    let thread = b.thread(1, 1);
    let compute_stream = b.queue(0, 7);
    let nccl_stream = b.queue(0, 20);
    let mut correlation = 0u64;
    for step in 0..steps {
        let t0 = step as Ns * STEP_NS;
        b.span(
            thread,
            Level::Operation,
            &format!("ProfilerStep#{step}"),
            t0,
            t0 + STEP_NS,
        );
        b.span(
            thread,
            Level::Python,
            "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
            t0,
            t0 + 100_000,
        );
        for k in 0..KERNELS_PER_STEP {
            correlation += 1;
            let launch = t0 + 100_000 + k as Ns * 10_000;
            b.span(
                thread,
                Level::AcceleratorApi,
                "cudaLaunchKernel",
                launch,
                launch + 4_000,
            )
            .correlation(correlation);
            let (queue, name) = if k == KERNELS_PER_STEP - 1 {
                (nccl_stream, "ncclKernel_AllReduce_RING_LL_Sum_float")
            } else {
                (compute_stream, "volta_sgemm_128x64_nn")
            };
            b.span(
                queue,
                Level::DeviceKernel,
                name,
                launch + 6_000,
                launch + 14_000,
            )
            .correlation(correlation);
        }
    }
    b.build()
}

/// CPU time of this thread so far (ns), or `None` where the kernel does not say.
fn thread_cpu_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// The least of three measures of `work`'s cost (thread CPU ns per run, else wall ns per run).
/// Each measure repeats `work` for at least [`MEASURE`]: on some kernels the thread's CPU time
/// advances by whole scheduler ticks (4 ms here, seen in CI), so one run of a few milliseconds
/// would read as 0 or 4 ms and decide the ratio by rounding.
fn cost(mut work: impl FnMut()) -> u64 {
    (0..3)
        .map(|_| {
            let (cpu, wall) = (thread_cpu_ns(), Instant::now());
            let mut runs = 0u64;
            while runs == 0 || wall.elapsed() < MEASURE {
                work();
                runs += 1;
            }
            let spent = match (cpu, thread_cpu_ns()) {
                (Some(a), Some(b)) => b - a,
                _ => wall.elapsed().as_nanos() as u64,
            };
            spent / runs
        })
        .min()
        .unwrap()
        .max(1)
}

/// How long one measure of [`cost`] repeats its work: 50 scheduler ticks of 4 ms.
const MEASURE: Duration = Duration::from_millis(200);

/// Steps of the smaller trace; the larger has `GROWTH` times as many.
const STEPS: usize = 500;
const GROWTH: usize = 16;
/// Linear work grows ~GROWTH times (a little more: sorting, caches), quadratic ~GROWTH^2.
const MAX_RATIO: f64 = 2.5 * GROWTH as f64;

#[test]
fn gpu_time_per_step_exposure_is_linear_in_steps() {
    let small = trace_with_steps(STEPS);
    let large = trace_with_steps(STEPS * GROWTH);
    let options = GpuTimeOptions::default();
    for (trace, steps) in [(&small, STEPS), (&large, STEPS * GROWTH)] {
        let report = gpu_time(trace, &options);
        let exposure = report.ranks[0].exposure.as_ref().unwrap();
        assert_eq!(exposure.len(), 1, "one device");
        assert_eq!(
            exposure[0].steps.len(),
            steps,
            "every step has its exposure"
        );
        // The steps' windows tile the device's stepped time: their parts add up to each one.
        for step in &exposure[0].steps {
            let e = &step.exposure;
            assert_eq!(
                e.compute_alone_ns
                    + e.compute_with_communication_ns
                    + e.exposed_communication_ns
                    + e.exposed_copy_ns
                    + e.idle_ns,
                e.window_end_ns - e.window_start_ns
            );
            assert_eq!(e.exposed_communication_ns, 8_000, "{}", step.step);
        }
    }
    let small_cost = cost(|| drop(gpu_time(&small, &options)));
    let large_cost = cost(|| drop(gpu_time(&large, &options)));
    let ratio = large_cost as f64 / small_cost as f64;
    eprintln!("gpu_time: {STEPS} steps {small_cost} ns, x{GROWTH} steps {large_cost} ns: ratio {ratio:.1}");
    assert!(
        ratio < MAX_RATIO,
        "gpu_time grew {ratio:.1}x for {GROWTH}x the steps (linear: ~{GROWTH}x)"
    );
}

#[test]
fn step_breakdown_is_linear_in_steps() {
    let small = trace_with_steps(STEPS);
    let large = trace_with_steps(STEPS * GROWTH);
    let config = step_breakdown::Config::default();
    let mut costs = Vec::new();
    for (trace, steps) in [(&small, STEPS), (&large, STEPS * GROWTH)] {
        let analyzed = Analyzed::new(trace);
        let facts = advise::Facts::build(&analyzed);
        let (breakdown, _) = step_breakdown::run(&analyzed, &facts, &config).unwrap();
        assert_eq!(breakdown.len(), steps, "every step is broken down");
        for step in &breakdown {
            let sum: Ns = step.parts.iter().map(|(_, t)| t).sum();
            assert_eq!(sum, step.end_ns - step.start_ns, "{}", step.name);
            let input = step.parts.iter().find(|(c, _)| *c == "input").unwrap().1;
            assert_eq!(input, 100_000, "the DataLoader span, device idle");
        }
        costs.push(cost(|| {
            drop(step_breakdown::run(&analyzed, &facts, &config).unwrap());
        }));
    }
    let ratio = costs[1] as f64 / costs[0] as f64;
    eprintln!(
        "step_breakdown: {STEPS} steps {} ns, x{GROWTH} steps {} ns: ratio {ratio:.1}",
        costs[0], costs[1]
    );
    assert!(
        ratio < MAX_RATIO,
        "step-breakdown grew {ratio:.1}x for {GROWTH}x the steps (linear: ~{GROWTH}x)"
    );
}

/// Issue 28: `critical-path --step all` (and the report's critical-path section) built each
/// step's graph by reading every span of the trace three times (steps x spans: 81 s at 1M
/// events). Each step now reads its own spans, bucketed in two passes.
#[test]
fn critical_path_steps_is_linear_in_steps() {
    use strato_analysis::paths::critical_path::{critical_path_steps, CriticalPathOptions};
    let small = trace_with_steps(STEPS);
    let large = trace_with_steps(STEPS * GROWTH);
    let options = CriticalPathOptions::default();
    let mut costs = Vec::new();
    for (trace, steps) in [(&small, STEPS), (&large, STEPS * GROWTH)] {
        let paths = critical_path_steps(trace, &options, None).unwrap();
        assert_eq!(paths.len(), steps, "every step has its path");
        for step in &paths {
            let w = &step.ranks[0].window;
            assert_eq!(
                w.by_kind.values().sum::<Ns>() + w.before_path_ns + w.after_path_ns,
                w.window_ns,
                "{}",
                step.step
            );
            // The step's own work only: its 8 launches and kernels, nothing of other steps.
            assert!(
                step.graph.nodes >= 2 * 2 * KERNELS_PER_STEP,
                "{}",
                step.step
            );
            assert!(
                step.graph.nodes <= 2 * (2 * KERNELS_PER_STEP + 2),
                "{}",
                step.step
            );
        }
        costs.push(cost(|| {
            drop(critical_path_steps(trace, &options, None).unwrap());
        }));
    }
    let ratio = costs[1] as f64 / costs[0] as f64;
    eprintln!(
        "critical_path_steps: {STEPS} steps {} ns, x{GROWTH} steps {} ns: ratio {ratio:.1}",
        costs[0], costs[1]
    );
    assert!(
        ratio < MAX_RATIO,
        "critical_path_steps grew {ratio:.1}x for {GROWTH}x the steps (linear: ~{GROWTH}x)"
    );
}
