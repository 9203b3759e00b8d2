//! Tests of the critical path: small graphs whose path is known by construction, and HTA's
//! expected critical events on its sample trace.

use rustc_hash::FxHashSet;
use strato_trace::{Level, Ns, RankId, SpanId, Trace};

use super::steps::{rank_steps, step_buckets};
use super::*;
use std::path::Path;

fn data(rel: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(rel)
}

/// HTA's critical events: the `X` events with `args.critical == 1` (name, ts in ns).
fn hta_expected() -> Vec<(String, Ns)> {
    let trace = strato_io::import_file(
        &data("kineto/hta_critical_path/simple_add_expected_overlaid_critical_path.json.gz"),
        &strato_io::ImportOptions::default(),
    )
    .unwrap();
    trace
        .spans
        .iter()
        .filter(|s| {
            trace
                .args_text(s.args)
                .is_some_and(|a| a.contains("\"critical\":1"))
        })
        .map(|s| (trace.str(s.name).to_owned(), s.start))
        .collect()
}

use strato_trace::testing::{rank, TraceBuilder};

fn kinds(r: &RankCriticalPath) -> Vec<(PathKind, Ns)> {
    r.by_kind
        .iter()
        .filter(|(_, &v)| v > 0)
        .map(|(&k, &v)| (k, v))
        .collect()
}

fn names(r: &RankCriticalPath) -> Vec<&str> {
    r.events.iter().map(|e| &*e.name).collect()
}

fn conserves(report: &CriticalPathReport) {
    for r in &report.ranks {
        assert_eq!(
            r.by_kind.values().sum::<Ns>(),
            r.length_ns,
            "rank {}",
            r.rank
        );
        if let (Some(s), Some(e)) = (r.start_ns, r.end_ns) {
            assert_eq!(e - s, r.length_ns, "no backward edge here");
        }
    }
}

/// A step that launches one long kernel and waits for it: the path runs through the
/// kernel, and the wait is sync wait.
#[test]
fn gpu_bound_step_goes_through_the_kernel() {
    let mut b = TraceBuilder::new();
    let cpu = b.thread(1, 1);
    let gpu = b.queue(0, 7);
    b.span(cpu, Level::Backend, "step", 0, 1000);
    b.span(cpu, Level::AcceleratorApi, "cudaLaunchKernel", 10, 20)
        .correlation(1);
    b.span(cpu, Level::AcceleratorApi, "cudaStreamSynchronize", 30, 990)
        .correlation(2);
    b.span(gpu, Level::DeviceKernel, "gemm", 50, 950)
        .correlation(1);
    b.span(gpu, Level::DeviceSync, "Stream Sync", 940, 950)
        .correlation(2);
    let report = critical_path(&b.build(), &CriticalPathOptions::default()).unwrap();
    conserves(&report);
    let r = &report.ranks[0];
    assert_eq!(
        (r.start_ns, r.end_ns, r.length_ns),
        (Some(0), Some(1000), 1000)
    );
    assert_eq!(r.work_ns, 10 + 40 + 900 + 10);
    assert_eq!(
        kinds(r),
        vec![
            (PathKind::CpuOp, 20),
            (PathKind::Launch, 40),
            (PathKind::Kernel, 900),
            (PathKind::SyncWait, 40)
        ]
    );
    assert_eq!(
        names(r),
        vec!["step", "cudaLaunchKernel", "cudaStreamSynchronize", "gemm"]
    );
}

/// The CPU keeps working after a short kernel: the path stays on the CPU.
#[test]
fn cpu_bound_step_stays_on_the_cpu() {
    let mut b = TraceBuilder::new();
    let cpu = b.thread(1, 1);
    let gpu = b.queue(0, 7);
    b.span(cpu, Level::Backend, "step", 0, 1000);
    b.span(cpu, Level::AcceleratorApi, "cudaLaunchKernel", 10, 20)
        .correlation(1);
    b.span(gpu, Level::DeviceKernel, "tiny", 25, 28)
        .correlation(1);
    let report = critical_path(&b.build(), &CriticalPathOptions::default()).unwrap();
    conserves(&report);
    let r = &report.ranks[0];
    assert_eq!(names(r), vec!["step", "cudaLaunchKernel"]);
    assert_eq!(
        kinds(r),
        vec![(PathKind::CpuOp, 990), (PathKind::Launch, 10)]
    );
}

/// Two kernels queued back to back, then a device synchronisation: stream order links
/// them, the context sync links the last one to the CPU.
#[test]
fn stream_order_and_device_sync() {
    let mut b = TraceBuilder::new();
    let cpu = b.thread(1, 1);
    let gpu = b.queue(0, 7);
    b.span(cpu, Level::Backend, "step", 0, 1000);
    b.span(cpu, Level::AcceleratorApi, "cudaLaunchKernel", 10, 20)
        .correlation(1);
    b.span(cpu, Level::AcceleratorApi, "cudaLaunchKernel", 40, 50)
        .correlation(2);
    b.span(cpu, Level::AcceleratorApi, "cudaDeviceSynchronize", 60, 950)
        .correlation(3);
    b.span(gpu, Level::DeviceKernel, "k1", 30, 500)
        .correlation(1);
    b.span(gpu, Level::DeviceKernel, "k2", 520, 900)
        .correlation(2);
    let ctx = b.queue(0, -1);
    b.span(ctx, Level::DeviceSync, "Context Sync", 900, 910)
        .correlation(3);
    let report = critical_path(&b.build(), &CriticalPathOptions::default()).unwrap();
    conserves(&report);
    let r = &report.ranks[0];
    assert_eq!(
        kinds(r),
        vec![
            (PathKind::CpuOp, 60),
            (PathKind::Launch, 20),
            (PathKind::Kernel, 850),
            (PathKind::SyncWait, 50),
            (PathKind::Idle, 20)
        ]
    );
    assert!(names(r).contains(&"k1") && names(r).contains(&"k2"));
    // The second launch is not on the path (its kernel waited for k1, not for it).
    assert_eq!(
        r.events
            .iter()
            .filter(|e| &*e.name == "cudaLaunchKernel")
            .count(),
        1
    );
}

/// A stream waits on an event recorded after k1 on another stream (k1 on stream 7, 30..500;
/// `second` on stream 8, 510..600), the thread then waits for the device (28..650); inside
/// `outer` (level, name, end) from 0.
pub(super) fn event_wait_trace(outer: (Level, &str, Ns), second: &str) -> Trace {
    let mut b = TraceBuilder::new();
    let cpu = b.thread(1, 1);
    let s7 = b.queue(0, 7);
    let s8 = b.queue(0, 8);
    b.span(cpu, outer.0, outer.1, 0, outer.2);
    b.span(cpu, Level::AcceleratorApi, "cudaLaunchKernel", 10, 20)
        .correlation(1);
    b.span(cpu, Level::AcceleratorApi, "cudaEventRecord", 21, 22)
        .correlation(2);
    b.span(cpu, Level::AcceleratorApi, "cudaStreamWaitEvent", 23, 24)
        .correlation(3);
    b.span(cpu, Level::AcceleratorApi, "cudaLaunchKernel", 26, 27)
        .correlation(4);
    b.span(cpu, Level::AcceleratorApi, "cudaDeviceSynchronize", 28, 650)
        .correlation(5);
    b.span(s7, Level::DeviceKernel, "k1", 30, 500)
        .correlation(1);
    b.span(s8, Level::DeviceSync, "Stream Wait Event", 24, 25)
        .correlation(3)
        .args(r#"{"wait_on_stream":7,"wait_on_cuda_event_record_corr_id":2}"#);
    b.span(s8, Level::DeviceKernel, second, 510, 600)
        .correlation(4);
    b.span(s8, Level::DeviceSync, "Context Sync", 600, 610)
        .correlation(5);
    b.build()
}

/// A stream waits on an event recorded after k1 on another stream: k1 -> k2 is a sync
/// dependency, and the path crosses streams.
#[test]
fn stream_wait_event_links_streams() {
    let trace = event_wait_trace((Level::Backend, "step", 700), "k2");
    let report = critical_path(&trace, &CriticalPathOptions::default()).unwrap();
    conserves(&report);
    let r = &report.ranks[0];
    assert_eq!(
        kinds(r),
        vec![
            (PathKind::CpuOp, 60),
            (PathKind::Launch, 20),
            (PathKind::Kernel, 560),
            (PathKind::SyncWait, 60)
        ]
    );
    let on_path = names(r);
    assert!(
        on_path.contains(&"k1") && on_path.contains(&"k2"),
        "{on_path:?}"
    );
}

/// Two ranks, one all-reduce; rank 1 arrives late because of a slow CPU op. With the
/// collective matched, rank 0's path runs through rank 1's slow op.
#[test]
fn collective_makes_the_late_rank_critical_for_the_early_one() {
    let (trace, kernels) = strato_trace::testing::late_rank_at_an_all_reduce();
    let alone = critical_path(&trace, &CriticalPathOptions::default()).unwrap();
    assert!(!alone.ranks[0].events.iter().any(|e| e.rank == 1));
    let collectives = match_collectives_by_name_order(&trace);
    assert_eq!(collectives.len(), 1);
    assert_eq!(collectives[0].members.len(), 2);
    let options = CriticalPathOptions {
        collectives: Some(collectives),
        ..Default::default()
    };
    let report = critical_path(&trace, &options).unwrap();
    conserves(&report);
    assert_eq!(report.graph.collectives, 1);
    let r0 = &report.ranks[0];
    assert!(
        r0.events.iter().any(|e| e.rank == 1 && &*e.name == "slow"),
        "{:?}",
        r0.events
    );
    // 0 -> 5 -> 600 on rank 1 (CPU), 600 -> 620 launch, 620 -> 900 rank 0's transfer,
    // 900 -> 950 sync wait, 950 -> 1000 rank 0's step.
    assert_eq!(
        kinds(r0),
        vec![
            (PathKind::CpuOp, 650),
            (PathKind::Launch, 20),
            (PathKind::Kernel, 280),
            (PathKind::SyncWait, 50)
        ]
    );
    // Rank 0's path names the late peer: it arrived at 30, rank 1 at 620; the edge runs from
    // rank 1's kernel to rank 0's at 620.
    assert_eq!(
        r0.late_peers,
        [LatePeer {
            peer: 1,
            collective: "ncclKernel_AllReduce_RING_LL_Sum_float".into(),
            waited_ns: 590,
            edge: PeerEdge {
                peer_kernel: Some(kernels[1]),
                own_kernel: Some(kernels[0]),
                arrived_ns: 620,
            },
        }]
    );
    assert!(report.ranks[1].late_peers.is_empty());
    assert!(alone.ranks.iter().all(|r| r.late_peers.is_empty()));
}

/// Collectives matched in contradicting orders make a cycle: an error, not a panic.
#[test]
fn contradicting_collective_matches_are_an_error() {
    let mut b = TraceBuilder::new();
    let mut ids = Vec::new();
    for r in 0..2 {
        b.rank(rank(Some(r), "r"));
        let gpu = b.queue(0, 7);
        ids.push(b.span(gpu, Level::DeviceKernel, "ncclKernel_A", 0, 10).id());
        ids.push(
            b.span(gpu, Level::DeviceKernel, "ncclKernel_A", 20, 30)
                .id(),
        );
    }
    let member = |r: u32, i: usize| CollectiveMember {
        rank: RankId(r),
        span: ids[i],
    };
    let options = CriticalPathOptions {
        collectives: Some(vec![
            CollectiveInstance {
                members: vec![member(0, 0), member(1, 3)],
            },
            CollectiveInstance {
                members: vec![member(0, 1), member(1, 2)],
            },
        ]),
        ..Default::default()
    };
    let err = critical_path(&b.build(), &options).unwrap_err();
    assert!(matches!(err, CriticalPathError::Cycle { .. }));
}

#[test]
fn empty_rank_has_a_note() {
    let mut b = TraceBuilder::new();
    b.rank(rank(Some(0), "empty"));
    let report = critical_path(&b.build(), &CriticalPathOptions::default()).unwrap();
    assert!(report.ranks[0].note.is_some());
    assert_eq!(report.ranks[0].length_ns, 0);
}

fn window_conserves(w: &WindowComposition) {
    assert_eq!(
        w.by_kind.values().sum::<Ns>() + w.before_path_ns + w.after_path_ns,
        w.window_ns,
        "{w:?}"
    );
    assert_eq!(w.end_ns - w.start_ns, w.window_ns);
    assert!(w.communication_ns <= w.by_kind[&PathKind::Kernel]);
}

/// One rank, two steps: `op1` in step 1 launches `kernel`, which runs from 50 to 1200 ns, past
/// the step's end at 1000; step 2 (1000-2000) only runs `op2` on the CPU.
pub(super) fn two_steps(kernel: &str) -> Trace {
    let mut b = TraceBuilder::new();
    let cpu = b.thread(1, 1);
    let gpu = b.queue(0, 7);
    b.span(cpu, Level::Operation, "ProfilerStep#1", 0, 1000);
    b.span(cpu, Level::Operation, "ProfilerStep#2", 1000, 2000);
    b.span(cpu, Level::Backend, "op1", 5, 25);
    b.span(cpu, Level::AcceleratorApi, "cudaLaunchKernel", 10, 20)
        .correlation(1);
    b.span(gpu, Level::DeviceKernel, kernel, 50, 1200)
        .correlation(1);
    b.span(cpu, Level::Backend, "op2", 1010, 1900);
    b.build()
}

/// Two steps: the first launches a collective kernel that runs past the step's end (its
/// window stretches to the kernel's end), the second only works on the CPU. Each step's
/// path holds its own work only, and the parts add up to its window.
#[test]
fn step_windows_hold_their_own_work() {
    let trace = two_steps("ncclKernel_AllReduce_RING_LL_Sum_float");
    assert_eq!(step_numbers(&trace), vec![1, 2]);
    let steps = critical_path_steps(&trace, &CriticalPathOptions::default(), None).unwrap();
    assert_eq!(steps.len(), 2);
    let one = &steps[0].ranks[0].window;
    window_conserves(one);
    assert_eq!((one.start_ns, one.end_ns), (0, 1200));
    assert_eq!((one.before_path_ns, one.after_path_ns), (5, 0));
    assert_eq!(one.by_kind[&PathKind::CpuOp], 5);
    assert_eq!(one.by_kind[&PathKind::Launch], 40);
    assert_eq!(one.by_kind[&PathKind::Kernel], 1150);
    assert_eq!(one.communication_ns, 1150);
    assert_eq!(
        one.top_ops[0],
        PathOp {
            name: "ncclKernel_AllReduce_RING_LL_Sum_float".into(),
            kind: PathKind::Kernel,
            rank: 0,
            ns: 1150
        }
    );
    assert_eq!(one.top_ops[1].name, "(launch delay)");
    let two = &steps[1].ranks[0].window;
    window_conserves(two);
    // The annotation ends at 2000; the path's last node is op2's end.
    assert_eq!((two.start_ns, two.end_ns), (1000, 2000));
    assert_eq!((two.before_path_ns, two.after_path_ns), (10, 100));
    assert_eq!(two.by_kind[&PathKind::CpuOp], 890);
    assert_eq!(names(&steps[1].ranks[0].path), vec!["op2"]);
    // The report's summary: the same figures and windows, without events or segments.
    let summary = critical_path_by_step_or_whole(&trace, &CriticalPathOptions::default()).unwrap();
    assert_eq!(summary.len(), steps.len());
    for (s, full) in summary.iter().zip(&steps) {
        assert_eq!((&s.step, s.ranks.len()), (&full.step, full.ranks.len()));
        for (r, f) in s.ranks.iter().zip(&full.ranks) {
            assert_eq!(r.window, f.window);
            assert_eq!(
                (
                    r.path.length_ns,
                    r.path.work_ns,
                    &r.path.by_kind,
                    &r.path.note
                ),
                (
                    f.path.length_ns,
                    f.path.work_ns,
                    &f.path.by_kind,
                    &f.path.note
                )
            );
            assert!(r.path.events.is_empty() && r.path.segments.is_empty());
            assert!(!f.path.events.is_empty() && !f.path.segments.is_empty());
        }
    }
    // Only step 2 asked for.
    let only = critical_path_steps(&trace, &CriticalPathOptions::default(), Some(2)).unwrap();
    assert_eq!(only.len(), 1);
    assert_eq!(only[0].ranks[0].window, *two);
    assert!(
        critical_path_steps(&trace, &CriticalPathOptions::default(), Some(3))
            .unwrap()
            .is_empty()
    );
}

/// A window the path leaves early: the time after the path's end is counted apart, and a
/// path through another rank is clipped to this rank's window.
#[test]
fn step_path_crosses_ranks_through_a_collective_and_is_clipped() {
    let mut b = TraceBuilder::new();
    for (r, step_start, slow_end, launch, kernel, sync) in [
        (0, 100, None, (110, 120), (130, 900), (125, 950)),
        (1, 0, Some(600), (600, 610), (620, 905), (615, 960)),
    ] {
        b.rank(rank(Some(r), &format!("rank{r}")));
        let cpu = b.thread(1, 1);
        let gpu = b.queue(0, 7);
        b.span(cpu, Level::Operation, "ProfilerStep#4", step_start, 1000);
        b.span(cpu, Level::Backend, "step", step_start, 990);
        if let Some(end) = slow_end {
            b.span(cpu, Level::Backend, "slow", 5, end);
        }
        b.launched_all_reduce(cpu, gpu, launch, kernel, sync);
    }
    let trace = b.build();
    let options = CriticalPathOptions {
        collectives: Some(match_collectives_by_name_order(&trace)),
        ..Default::default()
    };
    let steps = critical_path_steps(&trace, &options, None).unwrap();
    assert_eq!(steps.len(), 1);
    assert_eq!(steps[0].graph.collectives, 1);
    let r0 = &steps[0].ranks[0];
    window_conserves(&r0.window);
    assert!(r0
        .path
        .events
        .iter()
        .any(|e| e.rank == 1 && &*e.name == "slow"));
    // Rank 0's window starts at 100; the path starts on rank 1 at 0 and is clipped.
    assert_eq!((r0.window.start_ns, r0.window.end_ns), (100, 1000));
    assert_eq!(r0.path.start_ns, Some(0));
    assert_eq!(r0.window.before_path_ns, 0);
    // 100..600 rank 1's slow op, 600..620 launch, 620..900 transfer, 900..950 sync
    // wait, 950..990 rank 0's step op, then 10 after the path (the step op ended at 990).
    assert_eq!(r0.window.by_kind[&PathKind::CpuOp], 500 + 40);
    assert_eq!(r0.window.by_kind[&PathKind::Launch], 20);
    assert_eq!(r0.window.by_kind[&PathKind::Kernel], 280);
    assert_eq!(r0.window.communication_ns, 280);
    assert_eq!(r0.window.by_kind[&PathKind::SyncWait], 50);
    assert_eq!(r0.window.after_path_ns, 10);
    assert_eq!(
        (
            r0.window.top_ops[0].name.as_str(),
            r0.window.top_ops[0].rank
        ),
        ("slow", 1)
    );
    for r in &steps[0].ranks {
        window_conserves(&r.window);
    }
}

/// Every step of every rank of the real multi-rank files: the parts add up to the window,
/// the window starts at the step annotation, and every CPU event of the rank's own on the
/// path started inside the annotation.
#[test]
fn step_paths_conserve_on_real_multi_rank_files() {
    for (input, steps_expected) in [
        ("kineto/param_dlrm8", vec![10]),
        ("kineto/hta_trace_filter", vec![551, 552]),
    ] {
        let trace =
            strato_io::import_paths(&[data(input)], &strato_io::ImportOptions::default()).unwrap();
        let options = CriticalPathOptions::matched(&trace);
        let steps = critical_path_steps(&trace, &options, None).unwrap();
        assert_eq!(
            steps.iter().map(|s| s.number).collect::<Vec<_>>(),
            steps_expected,
            "{input}"
        );
        let annotations = rank_steps(&trace);
        for step in &steps {
            assert_eq!(step.ranks.len(), trace.ranks.len(), "{input}");
            for (r, rs) in step.ranks.iter().enumerate() {
                window_conserves(&rs.window);
                // Windows and events are on the aligned clock.
                let shift = options.shift_of(RankId(r as u32));
                let (s, e) = annotations[r][&step.number];
                let (s, e) = (s + shift, e + shift);
                assert_eq!(rs.window.start_ns, s, "{input} rank {r}");
                assert!(rs.window.end_ns >= e);
                assert!(rs.path.length_ns > 0, "{input} rank {r}");
                assert_eq!(rs.path.by_kind.values().sum::<Ns>(), rs.path.length_ns);
                for ev in &rs.path.events {
                    if ev.rank == rs.path.rank && matches!(ev.kind, PathKind::CpuOp) {
                        assert!(ev.start_ns >= s && ev.start_ns < e, "{input} {ev:?}");
                    }
                }
                eprintln!(
                    "{input} step {} rank {}: window {} path {} by_kind {:?} comm {} before {} after {}",
                    step.number,
                    rs.path.rank,
                    rs.window.window_ns,
                    rs.path.length_ns,
                    rs.window.by_kind,
                    rs.window.communication_ns,
                    rs.window.before_path_ns,
                    rs.window.after_path_ns
                );
            }
        }
    }
}

/// The one-pass step buckets hold exactly what the definition of a step's spans says
/// (checked span by span against a direct reading of it, on real multi-step files and on
/// overlapping annotations).
#[test]
fn step_buckets_follow_the_definition() {
    fn by_definition(trace: &Trace, number: u64) -> Vec<Vec<SpanId>> {
        let steps = rank_steps(trace);
        let window = |r: RankId| steps[r.0 as usize].get(&number).copied();
        let mut calls: FxHashSet<(RankId, u64)> = FxHashSet::default();
        let mut step_calls: FxHashSet<(RankId, u64)> = FxHashSet::default();
        let mut out = vec![Vec::new(); trace.ranks.len()];
        for span in &trace.spans {
            let track = trace.track(span.track);
            if track.is_device() || span.level != Level::AcceleratorApi {
                continue;
            }
            if let Some(c) = span.correlation.get() {
                calls.insert((track.rank, c));
                if window(track.rank).is_some_and(|(s, e)| span.start >= s && span.start < e) {
                    step_calls.insert((track.rank, c));
                }
            }
        }
        for (i, span) in trace.spans.iter().enumerate() {
            let track = trace.track(span.track);
            let Some((s, e)) = window(track.rank) else {
                continue;
            };
            let keep = if track.is_device() {
                match span.correlation.get() {
                    Some(c) if calls.contains(&(track.rank, c)) => {
                        step_calls.contains(&(track.rank, c))
                    }
                    _ => span.start >= s && span.start < e,
                }
            } else {
                span.start >= s && span.start < e
            };
            if keep {
                out[track.rank.0 as usize].push(SpanId(i as u32));
            }
        }
        out
    }
    let mut traces: Vec<Trace> = ["kineto/param_dlrm8", "kineto/hta_trace_filter"]
        .iter()
        .map(|p| strato_io::import_paths(&[data(p)], &strato_io::ImportOptions::default()).unwrap())
        .collect();
    // Overlapping annotations: every rank's second step also covers the first.
    let mut overlapped = traces[1].clone();
    let names: Vec<u64> = step_numbers(&overlapped);
    assert!(names.len() >= 2);
    let earliest = overlapped.spans.iter().map(|s| s.start).min().unwrap();
    let second = format!("ProfilerStep#{}", names[1]);
    let widen: Vec<usize> = (0..overlapped.spans.len())
        .filter(|&i| overlapped.str(overlapped.spans[i].name) == second)
        .collect();
    for i in widen {
        overlapped.spans[i].start = earliest;
    }
    traces.push(overlapped);
    for trace in &traces {
        let numbers = step_numbers(trace);
        let buckets = step_buckets(trace, &rank_steps(trace), &numbers);
        for (i, &n) in numbers.iter().enumerate() {
            let mut got = buckets[i].clone();
            for rank in &mut got {
                rank.sort_unstable();
            }
            assert_eq!(got, by_definition(trace, n), "step {n}");
            assert!(got.iter().any(|r| !r.is_empty()));
        }
    }
}

/// A rank whose clock is 1000 s ahead: the path is the same job's (the collectives'
/// alignment puts every rank on the reference clock), not 1000 s of waiting for peers.
#[test]
fn a_rank_clock_offset_does_not_change_the_paths() {
    let mut trace = strato_io::import_paths(
        &[data("kineto/param_dlrm8")],
        &strato_io::ImportOptions::default(),
    )
    .unwrap();
    assert!(trace.ranks.len() >= 2);
    let before = critical_path(&trace, &CriticalPathOptions::matched(&trace)).unwrap();
    const OFFSET: Ns = 1_000_000_000_000;
    for i in 0..trace.spans.len() {
        if trace.track(trace.spans[i].track).rank == RankId(1) {
            trace.spans[i].start += OFFSET;
            trace.spans[i].end += OFFSET;
        }
    }
    // Without the alignment the path waits 1000 s for the peer: the case this guards.
    let unaligned = critical_path(
        &trace,
        &CriticalPathOptions {
            clock_shift: Vec::new(),
            ..CriticalPathOptions::matched(&trace)
        },
    )
    .unwrap();
    assert!(unaligned.ranks.iter().any(|r| r.length_ns > OFFSET / 2));
    let options = CriticalPathOptions::matched(&trace);
    assert!(
        options.shift_of(RankId(1)) < -OFFSET / 2,
        "{:?}",
        options.clock_shift
    );
    let after = critical_path(&trace, &options).unwrap();
    for (a, b) in before.ranks.iter().zip(&after.ranks) {
        // The same path up to the alignment's own error (a few microseconds per crossing).
        let tolerance = a.length_ns / 100 + 100_000;
        assert!(
            (a.length_ns - b.length_ns).abs() <= tolerance,
            "rank {}: {} vs {}",
            a.rank,
            a.length_ns,
            b.length_ns
        );
        assert!(
            b.by_kind[&PathKind::CollectiveWait]
                <= a.by_kind[&PathKind::CollectiveWait] + tolerance
        );
        assert_eq!(b.by_kind.values().sum::<Ns>(), b.length_ns);
    }
    // Step windows too: each rank's window is its own step on the reference clock.
    let steps = critical_path_steps(&trace, &options, None).unwrap();
    for step in &steps {
        for rs in &step.ranks {
            window_conserves(&rs.window);
            assert!(rs.window.by_kind[&PathKind::CollectiveWait] < OFFSET / 2);
        }
    }
}

/// `whatif --across-steps` on inputs shaped otherwise than the file: the same job with its
/// spans in reverse order (the graph's points numbered otherwise), and with one rank's clock
/// 1000 s off (aligned back as the collectives are), gives the same step times, measured,
/// replayed and predicted without the host syncs.
#[test]
fn steps_across_the_trace_hold_under_reordering_and_a_rank_clock_offset() {
    use super::replay::{replay, ReplayReport, ReplayWindows, Scale};
    let trace = strato_io::import_paths(
        &[data("kineto/param_dlrm8")],
        &strato_io::ImportOptions::default(),
    )
    .unwrap();
    let changes = [Scale::no_sync("")];
    let run = |t: &Trace| {
        replay(
            t,
            &CriticalPathOptions::matched(t),
            ReplayWindows::Across(None),
            &changes,
        )
        .unwrap()
    };
    type Row = (u64, i64, Ns, Ns, Ns);
    let rows = |r: &ReplayReport| -> Vec<Row> {
        (r.replay.iter().zip(&r.predicted))
            .map(|(w, p)| {
                (
                    w.number,
                    w.rank,
                    w.measured_ns,
                    w.simulated_ns,
                    p.predicted_ns,
                )
            })
            .collect()
    };
    let base = rows(&run(&trace));
    assert_eq!(base.len(), trace.ranks.len(), "one step per rank");
    assert!(base.iter().all(|&(_, _, m, s, _)| m > 0 && m == s));
    assert!(
        base.iter().any(|&(_, _, _, s, p)| p < s),
        "no sync removed: {base:?}"
    );
    let mut reversed = trace.clone();
    reversed.spans.reverse();
    assert_eq!(rows(&run(&reversed)), base);
    const OFFSET: Ns = 1_000_000_000_000;
    let mut shifted = trace.clone();
    for i in 0..shifted.spans.len() {
        if shifted.track(shifted.spans[i].track).rank == RankId(1) {
            shifted.spans[i].start += OFFSET;
            shifted.spans[i].end += OFFSET;
        }
    }
    for (a, b) in base.iter().zip(rows(&run(&shifted))) {
        // Up to the alignment's own error (a few microseconds per crossing).
        let close = |x: Ns, y: Ns| (x - y).abs() <= x / 100 + 100_000;
        assert!(
            a.0 == b.0 && a.1 == b.1 && close(a.2, b.2) && close(a.3, b.3) && close(a.4, b.4),
            "{a:?} vs {b:?}"
        );
    }
}

#[test]
fn agrees_with_hta_on_its_test_trace() {
    let trace = strato_io::import_file(
        &data("kineto/hta_critical_path/simple_add_input.json.gz"),
        &strato_io::ImportOptions::default(),
    )
    .unwrap();
    let report = critical_path(&trace, &CriticalPathOptions::default()).unwrap();
    let ours: Vec<(String, Ns)> = report.ranks[0]
        .events
        .iter()
        .map(|e| (e.name.to_string(), e.start_ns))
        .collect();
    let expected = hta_expected();
    let matched = |a: &[(String, Ns)], b: &[(String, Ns)]| {
        a.iter()
            .filter(|(n, t)| b.iter().any(|(m, u)| m == n && (t - u).abs() <= 1000))
            .count()
    };
    let precision = matched(&ours, &expected) as f64 / ours.len() as f64;
    let recall = matched(&expected, &ours) as f64 / expected.len() as f64;
    eprintln!(
        "ours {} expected {} precision {precision:.4} recall {recall:.4}",
        ours.len(),
        expected.len()
    );
    for (n, t) in &ours {
        if !expected
            .iter()
            .any(|(m, u)| m == n && (t - u).abs() <= 1000)
        {
            eprintln!("only ours: {t} {}", &n[..n.len().min(60)]);
        }
    }
    for (n, t) in &expected {
        if !ours.iter().any(|(m, u)| m == n && (t - u).abs() <= 1000) {
            eprintln!("only HTA: {t} {}", &n[..n.len().min(60)]);
        }
    }
    assert!(precision >= 0.95 && recall >= 0.95);
    let r = &report.ranks[0];
    assert_eq!(r.by_kind.values().sum::<Ns>(), r.length_ns);
}

/// The whole trace's path without segments is the path with them, segments dropped: every
/// figure, event and late peer, on one-rank files and a job of 8 ranks with collectives.
#[test]
fn paths_without_segments_equal_paths_with_them() {
    for input in [
        "kineto/hta_alexnet_trace.json.gz",
        "kineto/kineto2021_resnet50_worker0.pt.trace.json.gz",
        "kineto/param_dlrm8",
    ] {
        let trace =
            strato_io::import_paths(&[data(input)], &strato_io::ImportOptions::default()).unwrap();
        let options = CriticalPathOptions::matched(&trace);
        let mut with = critical_path(&trace, &options).unwrap();
        let without = super::search::critical_path_without_segments(&trace, &options).unwrap();
        assert!(with.ranks.iter().any(|r| !r.segments.is_empty()), "{input}");
        for r in &mut with.ranks {
            r.segments.clear();
        }
        assert_eq!(format!("{with:?}"), format!("{without:?}"), "{input}");
    }
}

/// An OpenCL write the application made blocking (`"blocking": true` in its attributes, as the
/// OpenCL layer records it) waits for the device as `clFinish` does: its inside is a sync
/// wait, and removing host synchronisations lets the op after it run while the device works.
/// The same write non-blocking is the CPU's own time, and nothing is removed. The thread:
/// a kernel's launch (10..20), the write (30..600), `postprocess` (600..900); the device:
/// the kernel (25..500), then the write's copy (500..590).
#[test]
fn an_opencl_enqueue_made_blocking_is_a_sync() {
    use super::replay::{replay, ReplayWindows, Scale};
    let trace_with = |attributes: &str| {
        let mut b = TraceBuilder::new();
        let cpu = b.thread(1, 1);
        let queue = b.queue(0, 7);
        b.span(cpu, Level::AcceleratorApi, "clEnqueueNDRangeKernel", 10, 20)
            .correlation(1);
        b.span(cpu, Level::AcceleratorApi, "clEnqueueWriteBuffer", 30, 600)
            .correlation(2)
            .args(attributes);
        b.span(cpu, Level::Backend, "postprocess", 600, 900);
        b.span(queue, Level::DeviceKernel, "matmul", 25, 500)
            .correlation(1);
        b.span(queue, Level::DeviceCopy, "WriteBuffer HtoD", 500, 590)
            .correlation(2);
        b.build()
    };
    let blocking = trace_with(r#"{"bytes":8388608,"direction":"HtoD","blocking":true}"#);
    // An escaped key is the same key; a repeated one counts as its last value.
    let escaped = trace_with(r#"{"blocking":false,"bl\u006fcking":true}"#);
    let not_blocking = trace_with(r#"{"bytes":8388608,"direction":"HtoD","blocking":false}"#);
    let unsaid = trace_with(r#"{"bytes":8388608}"#);
    let path = |trace: &Trace| {
        let report = critical_path(trace, &CriticalPathOptions::default()).unwrap();
        conserves(&report);
        kinds(&report.ranks[0])
    };
    for trace in [&blocking, &escaped] {
        let id = SpanId(1);
        assert_eq!(trace.str(trace.spans[1].name), "clEnqueueWriteBuffer");
        assert!(is_blocking_call(trace, id));
        // The write's wait is no CPU work (the critical path links a wait to the device only
        // where the trace has a synchronisation event; the replay below infers it): the
        // device's work is the longest path.
        assert_eq!(
            path(trace),
            vec![
                (PathKind::Launch, 15),
                (PathKind::Kernel, 475),
                (PathKind::Copy, 90),
            ],
        );
    }
    for trace in [&not_blocking, &unsaid] {
        assert!(!is_blocking_call(trace, SpanId(1)));
        // The write's 570 ns are the CPU's: the thread's path is the longest.
        let kinds = path(trace);
        assert!(kinds.contains(&(PathKind::CpuOp, 300)), "{kinds:?}");
        assert!(kinds.iter().all(|&(k, _)| k != PathKind::SyncWait));
    }
    let predicted = |trace: &Trace| {
        let report = replay(
            trace,
            &CriticalPathOptions::matched(trace),
            ReplayWindows::Whole,
            &[Scale::no_sync("")],
        )
        .unwrap();
        (
            report.replay[0].simulated_ns,
            report.predicted[0].predicted_ns,
        )
    };
    // Without the wait, `postprocess` starts when the write is issued (its call costs nothing
    // once it does not wait) and ends before the copy: the window ends with the copy.
    let (simulated, without_wait) = predicted(&blocking);
    assert_eq!(simulated, 890, "the replay gives the trace back");
    assert_eq!(without_wait, 590 - 10, "{without_wait}");
    let (simulated, unchanged) = predicted(&not_blocking);
    assert_eq!((simulated, unchanged), (890, 890));
}

/// Which API calls block: the synchronisations by name, a synchronous copy call of CUDA or HIP
/// (`cu...`/`hip...` with `Memcpy` and without `Async`), an OpenCL enqueue only with its
/// blocking flag; a copy call named `...Async` does not (unless [`BLOCKING_CALLS`] says so),
/// nor a framework's own copy name (TensorFlow's `MemcpyH2D`).
#[test]
fn blocking_calls_by_name_and_flag() {
    let mut b = TraceBuilder::new();
    let cpu = b.thread(1, 1);
    let names = [
        ("cudaDeviceSynchronize", "", true),
        ("cudaMemcpy", "", true),
        ("cudaMemcpy2D", "", true),
        ("cuMemcpyDtoH", "", true),
        ("hipMemcpyWithStream", "", true),
        ("hipMemcpyDtoH", "", true),
        ("MemcpyH2D", "", false),
        ("cudaMemset", "", false),
        ("cudaMemcpy2DAsync", "", false),
        ("cudaMemsetAsync", "", false),
        ("cudaLaunchKernel", "", false),
        ("clEnqueueSVMMemcpy", r#"{"blocking":false}"#, false),
        ("clEnqueueSVMMemcpy", r#"{"blocking":true}"#, true),
        ("clEnqueueReadBuffer", r#"{"bytes":4}"#, false),
        ("clEnqueueReadBuffer", r#"{"blocking":"true"}"#, false),
    ];
    for (i, (name, args, _)) in names.iter().enumerate() {
        let at = 10 * i as Ns;
        let span = b.span(cpu, Level::AcceleratorApi, name, at, at + 5);
        if !args.is_empty() {
            span.args(args);
        }
    }
    // A framework op whose name holds `memcpy` is no runtime call.
    b.span(cpu, Level::Backend, "my_memcpy", 1000, 1005);
    let trace = b.build();
    for (i, (name, args, blocking)) in names.iter().enumerate() {
        assert_eq!(
            is_blocking_call(&trace, SpanId(i as u32)),
            *blocking,
            "{name} {args}"
        );
    }
    assert!(!is_blocking_call(&trace, SpanId(names.len() as u32)));
}

/// `--async-copies`: the blocking calls that launched a copy no longer wait for it; other
/// synchronisations still do. The thread, inside `step`: a synchronous `cudaMemcpy`
/// (10..300) whose copy runs 20..290, `postprocess` (300..500), a kernel's launch (500..510)
/// and `cudaDeviceSynchronize` (510..810) while the kernel runs (520..800).
#[test]
fn async_copies_remove_only_the_copies_waits() {
    use super::replay::{replay, ReplayWindows, Scale};
    let mut b = TraceBuilder::new();
    let cpu = b.thread(1, 1);
    let gpu = b.queue(0, 7);
    b.span(cpu, Level::Backend, "step", 0, 820);
    b.span(cpu, Level::AcceleratorApi, "cudaMemcpy", 10, 300)
        .correlation(1);
    b.span(cpu, Level::Backend, "postprocess", 300, 500);
    b.span(cpu, Level::AcceleratorApi, "cudaLaunchKernel", 500, 510)
        .correlation(2);
    b.span(
        cpu,
        Level::AcceleratorApi,
        "cudaDeviceSynchronize",
        510,
        810,
    )
    .correlation(3);
    b.span(
        gpu,
        Level::DeviceCopy,
        "Memcpy HtoD (Pageable -> Device)",
        20,
        290,
    )
    .correlation(1);
    b.span(gpu, Level::DeviceKernel, "k", 520, 800)
        .correlation(2);
    let trace = b.build();
    let run = |changes: &[Scale]| {
        let r = replay(
            &trace,
            &CriticalPathOptions::matched(&trace),
            ReplayWindows::Whole,
            changes,
        )
        .unwrap();
        let matched: Vec<usize> = r.changes.iter().map(|c| c.matched_ops).collect();
        (
            r.replay[0].simulated_ns,
            r.predicted[0].predicted_ns,
            matched,
        )
    };
    let (simulated, unchanged, _) = run(&[]);
    assert_eq!(
        (simulated, unchanged),
        (820, 820),
        "the replay gives the trace back"
    );
    let (_, made_async, matched) = run(&[Scale::async_copies("")]);
    assert_eq!(matched, vec![1], "the copy's call only");
    // The host no longer waits for the copy: `postprocess` starts earlier by most of the
    // call's 290 ns (the call still costs what a call costs when it does not wait), the
    // kernel too (its launch follows), and the synchronize still waits for the kernel.
    assert!(
        (820 - 290..=820 - 200).contains(&made_async),
        "{made_async}"
    );
    let (_, under_step, matched) = run(&[Scale::async_copies("step")]);
    assert_eq!((under_step, matched), (made_async, vec![1]));
    let (_, under_other, matched) = run(&[Scale::async_copies("postprocess")]);
    assert_eq!((under_other, matched), (820, vec![0]));
    // Every synchronisation removed selects both calls and gains at least as much.
    let (_, no_sync, matched) = run(&[Scale::no_sync("")]);
    assert_eq!(matched, vec![2]);
    assert!(no_sync <= made_async, "{no_sync} > {made_async}");
}
