//! `advise` rules: a positive and a negative real-data case per rule (the files of
//! `../shared/data`; docs/advise.md's table lists the same expectations), engine invariants on
//! every file (total at stake = union of the findings, within the window; step breakdowns
//! conserve time), and synthetic traces whose answer is known by construction.

mod common;

use std::path::PathBuf;

use strato_analysis::advise::{self, AdviseConfig, AdviseReport, Finding};
use strato_analysis::analyzed::Analyzed;
use strato_analysis::device_time::gpu_time::{length, merge};
use strato_io::{import_paths, ImportOptions};
use strato_trace::testing::TraceBuilder;
use strato_trace::{Level, Trace};

fn load(rel: &str) -> Option<Trace> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(rel);
    if !path.exists() {
        eprintln!("skipping {rel}: not present");
        return None;
    }
    let options = ImportOptions {
        keep_args: true,
        ..ImportOptions::default()
    };
    Some(import_paths(&[path], &options).expect("import"))
}

/// Every finding, none hidden by the floor, with the cross-rank evidence as `strato advise`
/// computes it (exposure on any trace, stragglers with two or more ranks).
fn all(trace: &Trace) -> AdviseReport {
    let config = AdviseConfig {
        all: true,
        ..AdviseConfig::default()
    };
    with(trace, &config)
}

fn with(trace: &Trace, config: &AdviseConfig) -> AdviseReport {
    let evidence = advise::CrossRankEvidence::from_trace(trace);
    advise::advise(&Analyzed::new(trace), config, Some(&evidence))
}

fn of<'r>(r: &'r AdviseReport, rule: &str) -> Vec<&'r Finding> {
    r.findings.iter().filter(|f| f.rule == rule).collect()
}

fn evaluated(r: &AdviseReport, rule: &str) -> bool {
    r.rules.iter().any(|s| s.rule == rule && s.evaluated)
}

const EVENT_SYNC: &str = "kineto/hta_cuda_event_sync_trace.json.gz";
const RESNET: &str = "kineto/kineto2021_resnet50_worker0.pt.trace.json.gz";
const CLOVERLEAF: &str = "nsys/pipit_cloverleaf_cuda.sqlite";
const TRITON: &str = "kineto/hta_triton_example.json.gz";
const NCCL: &str = "kineto/hta_nccl_data.json.gz";
const CPU_ONLY: &str = "kineto/hta_cpu_only_rank-34.pt.trace.json.gz";
const ALEXNET: &str = "kineto/hta_alexnet_trace.json.gz";

const ALL: &[&str] = &[
    EVENT_SYNC,
    RESNET,
    CLOVERLEAF,
    TRITON,
    NCCL,
    CPU_ONLY,
    ALEXNET,
    "kineto/hta_trace_filter",
    TF_WORKERS,
];

#[test]
fn engine_invariants_on_every_file() {
    for rel in ALL {
        let Some(trace) = load(rel) else { continue };
        let r = all(&trace);
        assert_eq!(r.window_ns, r.window_end_ns - r.window_start_ns, "{rel}");
        let union = length(&merge(
            r.findings.iter().flat_map(|f| f.intervals.iter().copied()),
        ));
        let sum: i64 = r.findings.iter().map(|f| f.time_ns).sum();
        let max = r.findings.iter().map(|f| f.time_ns).max().unwrap_or(0);
        assert_eq!(r.total_at_stake_ns, union, "{rel}: total is the union");
        assert!(r.total_at_stake_ns <= r.window_ns, "{rel}");
        assert!(
            max <= r.total_at_stake_ns && r.total_at_stake_ns <= sum,
            "{rel}"
        );
        for f in &r.findings {
            assert_eq!(f.time_ns, length(&f.intervals), "{rel} {}", f.rule);
            assert!(f
                .intervals
                .iter()
                .all(|&(a, b)| a >= r.window_start_ns && b <= r.window_end_ns && a < b));
            assert!(!f.evidence.is_empty(), "{rel} {}: evidence", f.rule);
            assert_eq!(f.docs, format!("docs/advise.md#{}", f.rule));
        }
        for s in &r.steps {
            let parts: i64 = s.parts.iter().map(|p| p.1).sum();
            assert_eq!(
                parts,
                s.end_ns - s.start_ns,
                "{rel} {}: step conserves",
                s.name
            );
        }
        // The floor only hides: the default report is the `all` one minus the small ones.
        let floored = with(&trace, &AdviseConfig::default());
        assert_eq!(
            floored.findings.len() + floored.hidden_below_floor,
            r.findings.len(),
            "{rel}"
        );
        assert!(floored.findings.iter().all(|f| f.share_pct >= 1.0));
        // Exposure needs no peer: evaluated everywhere; stragglers only with two or more ranks.
        assert!(evaluated(&r, "exposed-communication"), "{rel}");
        assert_eq!(
            evaluated(&r, "stragglers"),
            trace.ranks.len() >= 2,
            "{rel}: stragglers"
        );
    }
}

#[test]
fn host_sync_finds_every_sync_kind_of_the_event_sync_trace() {
    let Some(trace) = load(EVENT_SYNC) else {
        return;
    };
    let r = all(&trace);
    let f = of(&r, "host-sync");
    assert_eq!(f.len(), 1);
    for kind in [
        "event sync",
        "stream sync",
        "device sync",
        "aten::_local_scalar_dense",
        "pageable host",
    ] {
        assert!(f[0].message.contains(kind), "{kind}: {}", f[0].message);
    }
    // The longest sync (the .item()) waited for the pageable DtoH copy queued before it.
    assert_eq!(f[0].evidence[0].kind, "sync");
    assert_eq!(f[0].evidence[1].kind, "waited_for");
    assert!(f[0].evidence[1].name.contains("Memcpy DtoH"));
    // cudaEventSynchronize waited for the spin kernel.
    let i = f[0]
        .evidence
        .iter()
        .position(|e| e.name.contains("cudaEventSynchronize"))
        .expect("event sync evidence");
    assert!(f[0].evidence[i + 1].name.contains("spin_kernel"));
}

#[test]
fn host_sync_positive_on_cloverleaf_negative_without_a_device() {
    if let Some(trace) = load(CLOVERLEAF) {
        let r = all(&trace);
        let f = of(&r, "host-sync");
        assert!(
            f[0].message.contains("1312 x device sync"),
            "{}",
            f[0].message
        );
        assert!(f[0].share_pct > 10.0);
    }
    if let Some(trace) = load(CPU_ONLY) {
        assert!(of(&all(&trace), "host-sync").is_empty());
    }
}

#[test]
fn sync_copy_finds_the_twelve_pageable_copies_of_resnet50() {
    let Some(trace) = load(RESNET) else { return };
    let r = all(&trace);
    let f = of(&r, "sync-copy");
    assert_eq!(f.len(), 1);
    assert!(
        f[0].message.starts_with("12 device copies") && f[0].message.contains("12 x pageable copy"),
        "{}",
        f[0].message
    );
    assert_eq!(f[0].evidence.len(), 12);
}

#[test]
fn sync_copy_finds_pageable_synchronous_copies_of_cloverleaf() {
    let Some(trace) = load(CLOVERLEAF) else {
        return;
    };
    let r = all(&trace);
    let f = of(&r, "sync-copy");
    assert_eq!(f.len(), 1);
    assert!(
        f[0].message
            .contains("254 x pageable, synchronous copy `Memcpy HtoD` by cudaMemcpy"),
        "{}",
        f[0].message
    );
    assert!(f[0]
        .message
        .contains("25 x pageable, synchronous copy `Memcpy DtoH`"));
}

#[test]
fn sync_copy_negative_on_traces_without_pageable_or_blocking_copies() {
    for rel in [TRITON, NCCL, CPU_ONLY] {
        let Some(trace) = load(rel) else { continue };
        assert!(of(&all(&trace), "sync-copy").is_empty(), "{rel}");
    }
}

#[test]
fn gpu_idle_names_data_loading_on_resnet50() {
    let Some(trace) = load(RESNET) else { return };
    let r = all(&trace);
    let f = of(&r, "gpu-idle");
    assert_eq!(f.len(), 1);
    assert!(
        f[0].message
            .contains("launching thread was in: data loading"),
        "{}",
        f[0].message
    );
    assert!(f[0].advice.contains("DataLoader"));
    assert!(f[0].share_pct > 10.0);
    // The longest gap ends with the next batch's pageable copy.
    assert!(f[0].evidence[0]
        .name
        .contains("Memcpy HtoD (Pageable -> Device)"));
}

#[test]
fn gpu_idle_negative_when_no_gap_reaches_the_threshold() {
    for rel in [EVENT_SYNC, TRITON] {
        let Some(trace) = load(rel) else { continue };
        assert!(of(&all(&trace), "gpu-idle").is_empty(), "{rel}");
    }
}

#[test]
fn launch_bound_positive_on_resnet50_negative_on_cloverleaf_and_alexnet() {
    if let Some(trace) = load(RESNET) {
        let r = all(&trace);
        let f = of(&r, "launch-bound");
        assert_eq!(f.len(), 1);
        assert!(f[0].evidence.iter().all(|e| e.kind == "stretch"));
    }
    for rel in [CLOVERLEAF, ALEXNET, NCCL] {
        let Some(trace) = load(rel) else { continue };
        assert!(of(&all(&trace), "launch-bound").is_empty(), "{rel}");
    }
}

#[test]
fn low_util_positive_on_resnet50_negative_on_cloverleaf() {
    if let Some(trace) = load(RESNET) {
        assert_eq!(of(&all(&trace), "low-util").len(), 1);
    }
    for rel in [CLOVERLEAF, TRITON] {
        let Some(trace) = load(rel) else { continue };
        assert!(of(&all(&trace), "low-util").is_empty(), "{rel}");
    }
}

#[test]
fn step_breakdown_finds_input_bound_steps_on_resnet50() {
    let Some(trace) = load(RESNET) else { return };
    let r = all(&trace);
    assert_eq!(r.steps.len(), 6);
    let input = of(&r, "step-breakdown")
        .into_iter()
        .find(|f| f.message.contains("input-bound"))
        .expect("input-bound finding");
    assert!(
        input.message.starts_with("5 of 6 steps"),
        "{}",
        input.message
    );
    assert_eq!(
        r.steps.iter().filter(|s| s.bottleneck == "input").count(),
        5
    );
}

#[test]
fn step_breakdown_is_not_evaluated_without_steps_or_device() {
    for rel in [CLOVERLEAF, CPU_ONLY] {
        let Some(trace) = load(rel) else { continue };
        let r = all(&trace);
        assert!(!evaluated(&r, "step-breakdown"), "{rel}");
        assert!(r.steps.is_empty());
    }
}

#[test]
fn copy_overlap_positive_on_resnet50_negative_without_exposed_copies() {
    if let Some(trace) = load(RESNET) {
        let r = all(&trace);
        let f = of(&r, "copy-overlap");
        assert_eq!(f.len(), 1);
        assert!(f[0].message.starts_with("12 host<->device copies"));
    }
    for rel in [TRITON, NCCL] {
        let Some(trace) = load(rel) else { continue };
        assert!(of(&all(&trace), "copy-overlap").is_empty(), "{rel}");
    }
}

const TF_WORKERS: &str = "tf/GPU-multi-worker.trace_viewer.json.gz";

#[test]
fn small_copies_positive_on_the_tf_workers_negative_elsewhere() {
    // The TF trace copies its inputs in ~100 tiny HtoD transfers per device (sizes unknown:
    // the short-duration fallback applies).
    if let Some(trace) = load(TF_WORKERS) {
        let r = all(&trace);
        let f = of(&r, "small-copies");
        assert!(!f.is_empty());
        assert!(f.iter().all(|f| f.message.contains("small HtoD copies")));
        assert!(f
            .iter()
            .any(|f| f.message.contains("ran 101 small HtoD copies")));
    }
    // resnet50: 12 large copies; cloverleaf: 279 copies above 64 KiB. The OpenCL use-case
    // recording is the other positive (python/tests/test_advise_opencl.py).
    for rel in ALL.iter().filter(|r| **r != TF_WORKERS) {
        let Some(trace) = load(rel) else { continue };
        assert!(of(&all(&trace), "small-copies").is_empty(), "{rel}");
    }
}

#[test]
fn disabled_rules_do_not_run() {
    let Some(trace) = load(RESNET) else { return };
    let mut config = AdviseConfig {
        all: true,
        ..AdviseConfig::default()
    };
    for id in advise::RULES {
        assert!(config.disable(id));
    }
    assert!(!config.disable("no-such-rule"));
    let r = advise::advise(&Analyzed::new(&trace), &config, None);
    assert!(r.findings.is_empty());
    assert_eq!(r.total_at_stake_ns, 0);
    assert!(r.rules.iter().all(|s| !s.enabled && !s.evaluated));
}

// ---- synthetic traces: the answer is known by construction ----

/// `(launch name, launch [a,b), op level, op name, op [a,b), op args)`.
type Op<'a> = (
    &'a str,
    (i64, i64),
    Level,
    &'a str,
    (i64, i64),
    Option<&'a str>,
);

/// One thread launching on one queue: `(launch name, launch [a,b), op level, op name, op
/// [a,b), args)`.
fn build(ops: &[Op], extra: impl FnOnce(&mut TraceBuilder, strato_trace::TrackId)) -> Trace {
    let mut b = TraceBuilder::new();
    let thread = b.thread(1, 1);
    let queue = b.queue(0, 7);
    for (k, (launch, (la, lb), level, name, (a, z), args)) in ops.iter().enumerate() {
        let c = k as u64 + 1;
        b.span(thread, Level::AcceleratorApi, launch, *la, *lb)
            .correlation(c);
        let s = b.span(queue, *level, name, *a, *z).correlation(c);
        if let Some(args) = args {
            s.args(args);
        }
    }
    extra(&mut b, thread);
    b.build()
}

#[test]
fn synthetic_sync_gap_and_copies() {
    // Kernel [0,100), a 10 us pageable sync copy at [5000,15000) launched by cudaMemcpy,
    // then cudaStreamSynchronize [20000, 30000) while kernel 3 runs [18000, 29000).
    let trace = build(
        &[
            (
                "cudaLaunchKernel",
                (0, 10),
                Level::DeviceKernel,
                "k1",
                (0, 100),
                None,
            ),
            (
                "cudaMemcpy",
                (4000, 16000),
                Level::DeviceCopy,
                "Memcpy HtoD (Pageable -> Device)",
                (5000, 15000),
                None,
            ),
            (
                "cudaLaunchKernel",
                (17000, 17500),
                Level::DeviceKernel,
                "k3",
                (18000, 29000),
                None,
            ),
        ],
        |b, t| {
            b.span(
                t,
                Level::AcceleratorApi,
                "cudaStreamSynchronize",
                20000,
                30000,
            );
            // The thread's Python work before the copy: [100, 4000).
            b.span(t, Level::Python, "prepare", 100, 4000);
        },
    );
    let r = all(&trace);
    assert_eq!((r.window_start_ns, r.window_end_ns), (0, 30000));
    let sync = of(&r, "host-sync");
    assert_eq!(sync[0].intervals, vec![(20000, 30000)]);
    assert_eq!(sync[0].evidence[1].name, "queued before: k3");
    let copy = of(&r, "sync-copy");
    // Device copy plus its blocking launch call.
    assert_eq!(copy[0].intervals, vec![(4000, 16000)]);
    assert!(copy[0].message.contains("pageable, synchronous copy"));
    // The gap [100, 5000) is 4.9 us: below 1 ms, no gpu-idle finding; at 1 us it is found,
    // and its cause (the launching thread of the copy) adds up to the gap.
    assert!(of(&r, "gpu-idle").is_empty());
    let mut config = AdviseConfig {
        all: true,
        ..AdviseConfig::default()
    };
    config.gpu_idle.min_gap_us = 1.0;
    let r = advise::advise(&Analyzed::new(&trace), &config, None);
    let idle = of(&r, "gpu-idle");
    assert_eq!(idle[0].intervals, vec![(100, 5000), (15000, 18000)]);
    assert!(idle[0].message.contains("Python"), "{}", idle[0].message);
    // Copy not overlapped with compute: the whole copy (no kernel beside it).
    assert_eq!(of(&r, "copy-overlap")[0].intervals, vec![(5000, 15000)]);
}

#[test]
fn synthetic_small_copies_and_launch_bound() {
    // 100 small HtoD copies of 1 KiB, then 30 kernels of 1 us launched by 5 us calls.
    let mut ops = Vec::new();
    let names: Vec<String> = (0..100).map(|_| "WriteBuffer".to_owned()).collect();
    for (k, name) in names.iter().enumerate() {
        let t = k as i64 * 2000;
        ops.push((
            "clEnqueueWriteBuffer",
            (t, t + 500),
            Level::DeviceCopy,
            name.as_str(),
            (t + 600, t + 1600),
            Some(r#"{"bytes": 1024, "direction": "HtoD"}"#),
        ));
    }
    for k in 0..30i64 {
        let t = 300_000 + k * 5000;
        ops.push((
            "cudaLaunchKernel",
            (t, t + 5000),
            Level::DeviceKernel,
            "tiny",
            (t + 5000, t + 6000),
            None,
        ));
    }
    let trace = build(&ops, |_, _| {});
    let r = all(&trace);
    let small = of(&r, "small-copies");
    assert_eq!(small.len(), 1);
    assert!(
        small[0].message.contains("ran 100 small HtoD copies"),
        "{}",
        small[0].message
    );
    // One burst: first copy start (600) to last copy end (99 * 2000 + 1600).
    assert_eq!(small[0].intervals, vec![(600, 199_600)]);
    let lb = of(&r, "launch-bound");
    assert_eq!(lb.len(), 1);
    // 30 kernels of 1 us every 5 us: 29 gaps of 4 us.
    assert_eq!(lb[0].time_ns, 29 * 4000);
    // With 1 KiB as the largest small copy excluded, no finding.
    let mut config = AdviseConfig {
        all: true,
        ..AdviseConfig::default()
    };
    config.small_copies.max_bytes = 512;
    config.launch_bound.min_kernels = 31;
    let r = advise::advise(&Analyzed::new(&trace), &config, None);
    assert!(of(&r, "small-copies").is_empty());
    assert!(of(&r, "launch-bound").is_empty());
}

#[test]
fn synthetic_step_breakdown_conserves_and_names_the_bottleneck() {
    // Step [0, 1000): DataLoader [0, 400) (device idle), launch [400, 450), kernel [450, 900),
    // Python [900, 1000) with the device idle.
    let trace = build(
        &[(
            "cudaLaunchKernel",
            (400, 450),
            Level::DeviceKernel,
            "gemm",
            (450, 900),
            None,
        )],
        |b, t| {
            b.span(t, Level::Operation, "ProfilerStep#1", 0, 1000);
            b.span(t, Level::Python, "enumerate(DataLoader)#_next", 0, 400);
            b.span(t, Level::Python, "loss", 900, 1000);
        },
    );
    let r = all(&trace);
    assert_eq!(r.steps.len(), 1);
    let parts: std::collections::BTreeMap<&str, i64> = r.steps[0].parts.iter().copied().collect();
    assert_eq!(parts["input"], 400);
    assert_eq!(parts["launch"], 50);
    assert_eq!(parts["device compute"], 450);
    assert_eq!(parts["host compute"], 100);
    assert_eq!(parts["idle"], 0);
    assert_eq!(r.steps[0].bottleneck, "input");
    let f = of(&r, "step-breakdown");
    assert_eq!(f[0].intervals, vec![(0, 400)]);
}

/// The multi-rank rules on the 8 real DLRM ranks: the evidence exists, its parts conserve
/// (exposed intervals lie inside their kernels and add up to at most their time; a straggler's
/// excess is within its step), and the straggler the evidence ranks first is the rank that
/// imposes the most wait in `strato collectives` (lateness beyond the median arrival there,
/// waits imposed on every peer here).
#[test]
fn multi_rank_rules_on_the_dlrm_ranks() {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/kineto/param_dlrm8");
    if !dir.exists() {
        eprintln!("skipping param_dlrm8: not present");
        return;
    }
    let options = ImportOptions {
        keep_args: true,
        ..ImportOptions::default()
    };
    let trace = import_paths(&[dir], &options).expect("import");
    assert_eq!(trace.ranks.len(), 8);
    let evidence = advise::CrossRankEvidence::from_trace(&trace);
    use advise::MultiRankEvidence;
    let exposed = evidence.exposed_communication();
    assert!(!exposed.is_empty());
    for c in &exposed {
        let merged = merge(c.intervals.iter().copied());
        assert_eq!(
            length(&merged),
            c.intervals.iter().map(|&(a, b)| b - a).sum::<i64>(),
            "{}",
            c.name
        );
        assert!(length(&merged) <= c.total_ns, "{}", c.name);
    }
    let stragglers = evidence.stragglers();
    assert!(!stragglers.is_empty());
    for s in &stragglers {
        assert!(s.excess_ns > 0 && s.excess_ns <= s.end_ns - s.start_ns);
        assert!(s.median_ns > 0);
    }
    let worst = stragglers.iter().max_by_key(|s| s.excess_ns).unwrap();
    let coll = strato_analysis::distributed::collectives::collectives(&trace, &Default::default());
    let last_most = coll.worst_rank.map(|i| coll.ranks[i].job_rank);
    eprintln!(
        "worst straggler rank {} excess {} ns of median {} ns; collectives' worst rank {:?}",
        worst.rank, worst.excess_ns, worst.median_ns, last_most
    );
    assert_eq!(Some(worst.rank), last_most);
    // Through the rules: both evaluated.
    let config = AdviseConfig {
        all: true,
        ..AdviseConfig::default()
    };
    let report = advise::advise(&Analyzed::new(&trace), &config, Some(&evidence));
    let json = serde_json::to_value(&report).unwrap();
    let text = json.to_string();
    assert!(!text.contains("needs two or more ranks"), "{text:.400}");
}

/// The same trace recorded with another clock origin: every timestamp (spans, instants,
/// counters, flow ends) shifted by an odd constant gives the same findings — same rules,
/// times, shares, messages and evidence, the evidence moved by the shift. Over the real files
/// whose rules fire most.
#[test]
fn findings_do_not_depend_on_the_clock_origin() {
    const SHIFT: i64 = 1_000_000_007;
    for rel in [
        "kineto/kineto2021_resnet50_worker0.pt.trace.json.gz",
        "kineto/hta_cuda_event_sync_trace.json.gz",
        "nsys/pipit_cloverleaf_cuda.sqlite",
    ] {
        let Some(trace) = load(rel) else { continue };
        let mut shifted = trace.clone();
        for s in &mut shifted.spans {
            s.start += SHIFT;
            s.end += SHIFT;
        }
        for i in &mut shifted.instants {
            i.ts += SHIFT;
        }
        for c in &mut shifted.counters {
            c.ts += SHIFT;
        }
        for f in &mut shifted.flows {
            for end in [&mut f.from, &mut f.to].into_iter().flatten() {
                end.ts += SHIFT;
            }
        }
        let (a, b) = (all(&trace), all(&shifted));
        assert!(!a.findings.is_empty(), "{rel}");
        assert_eq!(a.findings.len(), b.findings.len(), "{rel}");
        for (x, y) in a.findings.iter().zip(&b.findings) {
            assert_eq!(
                (x.rule, x.time_ns, x.share_pct.to_bits(), &x.message),
                (y.rule, y.time_ns, y.share_pct.to_bits(), &y.message),
                "{rel}"
            );
            assert_eq!(x.evidence.len(), y.evidence.len(), "{rel} {}", x.rule);
            for (e, f) in x.evidence.iter().zip(&y.evidence) {
                assert_eq!(
                    (e.start_ns + SHIFT, e.end_ns + SHIFT, &e.name, &e.kind),
                    (f.start_ns, f.end_ns, &f.name, &f.kind),
                    "{rel} {}",
                    x.rule
                );
            }
        }
    }
}

/// A rank whose clock runs 1000 s ahead of its peers' (hosts without a common time base):
/// `strato advise` puts every rank on the job's clock (the collectives' alignment, as
/// `collectives` and the critical path do), so the window and the findings are those of the
/// job as recorded; only that rank's evidence moves, by its clock's offset. Before, the
/// window spanned the 1000 s and every finding fell under the floor.
#[test]
fn a_rank_whose_clock_is_ahead_changes_no_finding() {
    const AHEAD: i64 = 1_000_000_000_000;
    const LATE: strato_trace::RankId = strato_trace::RankId(3);
    let Some(trace) = load("kineto/param_dlrm8") else {
        return;
    };
    let ahead = common::with_rank_clock_ahead(&trace, LATE, AHEAD);
    let config = AdviseConfig {
        all: true,
        ..AdviseConfig::default()
    };
    let a = advise::advise_trace(&Analyzed::new(&trace), &config);
    let b = advise::advise_trace(&Analyzed::new(&ahead), &config);
    // The alignment is estimated to within microseconds (the collectives' kernel ends), so
    // the job's clock of the two may differ by that much.
    let close = |x: i64, y: i64, what: &str| {
        let tolerance = (x.abs() / 100).max(50_000);
        assert!((x - y).abs() <= tolerance, "{what}: {x} vs {y}");
    };
    close(a.window_ns, b.window_ns, "window");
    assert!(a.window_ns < 60_000_000_000, "{}", a.window_ns);
    close(a.total_at_stake_ns, b.total_at_stake_ns, "total at stake");
    let rules = |r: &AdviseReport| {
        let mut list: Vec<_> = r
            .findings
            .iter()
            .map(|f| (f.rule, f.message.len()))
            .collect();
        list.sort();
        list
    };
    assert!(!a.findings.is_empty());
    assert_eq!(a.findings.len(), b.findings.len());
    assert_eq!(
        rules(&a).iter().map(|r| r.0).collect::<Vec<_>>(),
        rules(&b).iter().map(|r| r.0).collect::<Vec<_>>()
    );
    for x in &a.findings {
        let y = b
            .findings
            .iter()
            .filter(|y| y.rule == x.rule)
            .min_by_key(|y| (y.time_ns - x.time_ns).abs())
            .expect("the same rule");
        close(x.time_ns, y.time_ns, x.rule);
        assert!((x.share_pct - y.share_pct).abs() < 0.5, "{}", x.rule);
        assert!(
            y.intervals
                .iter()
                .all(|&(s, e)| s >= b.window_start_ns && e <= b.window_end_ns),
            "{}",
            x.rule
        );
    }
    // The late rank's evidence is where its events are in its own file.
    let late = advise::rank_number(&ahead, LATE.0);
    let evidence = b
        .findings
        .iter()
        .flat_map(|f| &f.evidence)
        .filter(|e| e.rank == late)
        .collect::<Vec<_>>();
    assert!(!evidence.is_empty());
    assert!(evidence.iter().all(|e| e.start_ns >= AHEAD), "{evidence:?}");
}

/// A step-breakdown finding's "X of their Y" sums the category's time over the steps it
/// bottlenecks, as it sums their lengths: on a job of 8 ranks whose steps run at the same time
/// the two are of the same steps (before, X was the union over the ranks' clocks, Y the sum,
/// and the share came out about 8 times too small).
#[test]
fn step_breakdown_shares_are_of_the_steps_own_time_on_every_rank() {
    let Some(trace) = load("kineto/param_dlrm8") else {
        return;
    };
    let config = AdviseConfig {
        all: true,
        ..AdviseConfig::default()
    };
    let report = advise::advise_trace(&Analyzed::new(&trace), &config);
    let findings = of(&report, advise::step_breakdown::ID);
    assert!(!findings.is_empty());
    for f in findings {
        let cat = advise::step_breakdown::CATEGORIES
            .iter()
            .find(|c| f.message.contains(&format!("are {c}-bound")))
            .expect("names its category");
        let bound: Vec<_> = report
            .steps
            .iter()
            .filter(|s| s.bottleneck == *cat)
            .collect();
        let part: i64 = bound
            .iter()
            .map(|s| s.parts.iter().find(|p| p.0 == *cat).unwrap().1)
            .sum();
        let total: i64 = bound.iter().map(|s| s.end_ns - s.start_ns).sum();
        let expected = format!(
            ": {} of their {} ({:.0}%)",
            advise::human(part),
            advise::human(total),
            advise::pct(part, total)
        );
        assert!(f.message.contains(&expected), "{} / {expected}", f.message);
    }
}

/// The straggler rule's real negative: `hta_trace_filter` holds 2 ranks of a 128-rank job, so
/// every collective misses peers — nobody can be named late (both rules are evaluated; the
/// exposed communication of its all-reduces is still found).
#[test]
fn no_straggler_is_named_from_incomplete_collectives() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/kineto/hta_trace_filter");
    if !dir.exists() {
        eprintln!("skipping hta_trace_filter: not present");
        return;
    }
    let trace = import_paths(&[dir], &ImportOptions::default()).expect("import");
    assert_eq!(trace.ranks.len(), 2);
    let evidence = advise::CrossRankEvidence::from_trace(&trace);
    use advise::MultiRankEvidence;
    assert!(evidence.stragglers().is_empty());
    let report = advise::advise(
        &Analyzed::new(&trace),
        &AdviseConfig::default(),
        Some(&evidence),
    );
    assert!(of(&report, "stragglers").is_empty());
    assert!(!of(&report, "exposed-communication").is_empty());
}

/// `exposed-communication` needs no peer: on single-rank traces it is evaluated. Positives:
/// `hta_nccl_data` (its all-reduces 84% exposed, above the 1% floor) and TraceLens's MI300
/// activation-checkpointing ResNet (RCCL, 78% exposed). The exposed time it reports equals,
/// computed independently, `gpu-time`'s `exposed_communication_ns` of the rank's devices (the
/// union over the findings with every threshold at 0).
#[test]
fn exposed_communication_on_a_single_rank() {
    use strato_analysis::device_time::gpu_time::{gpu_time, GpuTimeOptions};
    for (rel, kernel) in [
        (NCCL, "ncclKernel_AllReduce_RING_LL_Sum_float"),
        (MI300_RESNET, "ncclDevKernel_Generic"),
    ] {
        let Some(trace) = load(rel) else { continue };
        assert_eq!(trace.ranks.len(), 1, "{rel}");
        let r = with(&trace, &AdviseConfig::default());
        let found = of(&r, "exposed-communication");
        assert!(
            found.iter().any(|f| f.message.contains(kernel)),
            "{rel}: {found:?}"
        );
        assert!(of(&r, "stragglers").is_empty());
        // Against gpu-time's exposure split.
        let mut config = AdviseConfig {
            all: true,
            ..AdviseConfig::default()
        };
        config.exposed_comm.min_exposed_pct = 0.0;
        let every = with(&trace, &config);
        let union = length(&merge(
            of(&every, "exposed-communication")
                .iter()
                .flat_map(|f| f.intervals.iter().copied()),
        ));
        let report = gpu_time(&trace, &GpuTimeOptions::default());
        let exposed: i64 = report
            .ranks
            .iter()
            .flat_map(|r| r.exposure.iter().flatten())
            .map(|d| d.exposure.exposed_communication_ns)
            .sum();
        assert!(exposed > 0, "{rel}");
        assert_eq!(union, exposed, "{rel}: advise vs gpu-time exposure");
    }
}

/// Its negatives on single-rank traces: no communication at all (resnet50, AlexNet, the Triton
/// example, HTA's trace-compare base: silent even with `--all`), and B200 eager, whose one
/// 22 us all-gather is fully exposed but 0.03% of the window: found with `--all`, silent at
/// the default 1% floor. (No shared single-rank trace hides its communication under compute;
/// the hidden case is checked on a constructed trace in `cross_rank.rs`.)
#[test]
fn exposed_communication_silent_without_communication_or_below_the_floor() {
    for rel in [
        RESNET,
        ALEXNET,
        TRITON,
        "kineto/hta_trace_compare/base.json.gz",
    ] {
        let Some(trace) = load(rel) else { continue };
        let r = all(&trace);
        assert!(evaluated(&r, "exposed-communication"), "{rel}");
        assert!(of(&r, "exposed-communication").is_empty(), "{rel}");
    }
    if let Some(trace) = load(B200_EAGER) {
        assert_eq!(of(&all(&trace), "exposed-communication").len(), 1);
        let r = with(&trace, &AdviseConfig::default());
        assert!(of(&r, "exposed-communication").is_empty());
    }
}

const MI300_RESNET: &str = "kineto/tracelens/mi300_resnet_act_checkpoint.json.gz";
const B200_EAGER: &str = "kineto/tracelens/b200_eager_trace.json.gz";

/// Each finding's estimated gain is the what-if of its fix (`strato whatif`'s replay, the same
/// changes), known exactly where a transform models the fix and `None` with the reason
/// elsewhere; a gain never exceeds the time at stake nor goes below 0 (removing a wait cannot
/// lengthen a step); the findings come in the order of what a fix would save.
#[test]
fn estimated_gains_are_the_whatif_of_each_fix_and_order_the_findings() {
    use strato_analysis::paths::critical_path::registration::job_of;
    use strato_analysis::paths::critical_path::replay::{replay, ReplayWindows};
    use strato_analysis::paths::critical_path::CriticalPathOptions;
    let mut modelled = 0;
    let mut unselected = 0;
    let more = [
        "kineto/tracelens/torch_compile_triton.json.gz",
        "kineto/tracelens/mi300_resnet_act_checkpoint.json.gz",
        "kineto/param_dlrm8",
    ];
    for rel in ALL.iter().chain(more.iter()) {
        let Some(trace) = load(rel) else { continue };
        let r = all(&trace);
        let saves = |f: &Finding| f.estimated_gain_ns.unwrap_or(f.time_ns);
        assert!(
            r.findings.windows(2).all(|w| saves(&w[0]) >= saves(&w[1])),
            "{rel}: ordered by what a fix saves"
        );
        for f in &r.findings {
            assert!(!f.gain_note.is_empty(), "{rel} {}", f.rule);
            let Ok((_, changes)) = advise::gain_model(f.rule, &f.evidence) else {
                assert_eq!(f.estimated_gain_ns, None, "{rel} {}", f.rule);
                assert!(f.gain_note.starts_with("not modelled"), "{rel} {}", f.rule);
                continue;
            };
            // The same what-if through `strato whatif`'s replay: per step, the latest rank's
            // end without and with the changes.
            let job = job_of(&trace);
            let options = CriticalPathOptions::matched(&job);
            let mut report =
                replay(&job, &options, ReplayWindows::Steps(None), &changes).expect("replays");
            if report.replay.is_empty() {
                report = replay(&job, &options, ReplayWindows::Whole, &changes).expect("replays");
            }
            // A fix whose what-if selects nothing in the graph is not estimated (not 0).
            let selects = report.changes.iter().any(|c| c.matched_ops > 0);
            let Some(gain) = f.estimated_gain_ns else {
                assert!(!selects, "{rel} {}: selects, so estimated", f.rule);
                assert!(f.gain_note.starts_with("not estimated"), "{rel} {}", f.rule);
                if f.rule == "exposed-communication" {
                    // Why: nothing holds its collectives back on the device.
                    assert!(
                        f.gain_note
                            .contains("no collective waits for compute on the device"),
                        "{rel}: {}",
                        f.gain_note
                    );
                }
                unselected += 1;
                continue;
            };
            assert!(selects, "{rel} {}: estimated, so it selects", f.rule);
            modelled += 1;
            assert!(
                (0..=f.time_ns).contains(&gain),
                "{rel} {}: gain {gain} outside 0..={}",
                f.rule,
                f.time_ns
            );
            let mut ends: std::collections::BTreeMap<u64, (i64, i64)> = Default::default();
            for (w, p) in report.replay.iter().zip(&report.predicted) {
                let e = ends.entry(w.number).or_insert((i64::MIN, i64::MIN));
                e.0 = e.0.max(w.start_ns + p.baseline_ns);
                e.1 = e.1.max(w.start_ns + p.predicted_ns);
            }
            let expected: i64 = ends.values().map(|(b, p)| b - p).sum();
            assert_eq!(gain, expected, "{rel} {}: the whatif's gain", f.rule);
        }
    }
    if crate_data_present() {
        assert!(modelled >= 3, "{modelled} modelled findings");
        eprintln!("{modelled} findings estimated, {unselected} selecting nothing");
    }
}

fn crate_data_present() -> bool {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .exists()
}

/// A job whose answer is known by construction: two ranks meet at one all-reduce, rank 1
/// arrives 300 ns late (its CPU op is 300 ns longer), the transfer takes 290 ns. The straggler
/// finding names rank 1 and rank 0's wait for it, and its estimated gain is evening rank 1
/// (`whatif --even-straggler`): the transfer starts at rank 0's arrival, the job's last point
/// moves from 700 ns (both kernels' end) to 410 ns (rank 1's own kernel start: its own work
/// is unchanged).
#[test]
fn a_straggler_findings_gain_is_evening_it() {
    let mut b = TraceBuilder::new();
    for (r, late) in [(0i64, 0), (1, 300)] {
        b.rank(strato_trace::testing::rank(Some(r), "r"));
        let cpu = b.thread(10 + r, 1);
        let gpu = b.queue(0, 7);
        b.span(cpu, Level::Operation, "ProfilerStep#1", 0, 2000);
        b.span(cpu, Level::Backend, "step", 0, 100 + late);
        b.span(
            cpu,
            Level::AcceleratorApi,
            "cudaLaunchKernel",
            90 + late,
            100 + late,
        )
        .correlation(1);
        b.span(
            gpu,
            Level::DeviceKernel,
            "ncclKernel_AllReduce_RING_LL_Sum_float",
            110 + late,
            700,
        )
        .correlation(1);
    }
    let trace = b.build();
    let r = all(&trace);
    let stragglers = of(&r, "stragglers");
    assert_eq!(stragglers.len(), 1, "{:?}", r.findings);
    let f = stragglers[0];
    assert!(
        f.message.starts_with("Rank 1 was a straggler"),
        "{}",
        f.message
    );
    assert!(
        f.evidence
            .iter()
            .any(|e| e.kind == "waited_for" && e.rank == 0),
        "{:?}",
        f.evidence
    );
    assert_eq!(f.gain_note, "whatif --even-straggler, rank 1");
    assert_eq!(f.estimated_gain_ns, Some(700 - 410));
}

/// The report's one pass over the critical path's graphs (`paths_and_gains`: each window's
/// graph built for the replay, replayed, stripped of its replay-only edges, then searched)
/// gives what the two passes it replaces give: the critical path of every window
/// (`critical_path_by_step_or_whole`) and the gains of every set of changes
/// (`estimated_gains`), on the shared traces, both rank directories and the DLRM job, with
/// no set (no replay) and with three; and with the replay asked for too
/// (`paths_gains_and_replay`), the replay `strato whatif` gives without a change.
#[test]
fn the_reports_one_pass_gives_the_paths_and_gains_of_two() {
    use strato_analysis::paths::critical_path::registration::job_of;
    use strato_analysis::paths::critical_path::replay::{
        estimated_gains, paths_and_gains, paths_gains_and_replay, replay, ReplayWindows, Scale,
    };
    use strato_analysis::paths::critical_path::{
        critical_path_by_step_or_whole, step_numbers, CriticalPathOptions,
    };
    let sets = [
        vec![Scale::no_sync("")],
        vec![Scale::even_straggler(None)],
        vec![Scale::overlap_comm()],
        vec![
            Scale::parse("category:kernel=0.5").unwrap(),
            Scale::no_sync(""),
        ],
    ];
    let more = [
        "kineto/tracelens/torch_compile_triton.json.gz",
        "kineto/param_dlrm8",
    ];
    let (mut compared, mut windows_replayed) = (0, 0);
    for rel in ALL.iter().chain(more.iter()) {
        let Some(trace) = load(rel) else { continue };
        let job = job_of(&trace);
        let options = CriticalPathOptions::matched(&job);
        let paths = critical_path_by_step_or_whole(&job, &options);
        // The replay `strato whatif` gives without a change, over the same windows.
        let windows = if step_numbers(&job).is_empty() {
            ReplayWindows::Whole
        } else {
            ReplayWindows::Steps(None)
        };
        let replayed = replay(&job, &options, windows, &[]);
        for sets in [&sets[..0], &sets[..]] {
            let (one_paths, one_gains) = paths_and_gains(&job, &options, sets);
            assert_eq!(one_paths, paths, "{rel}: the paths, {} sets", sets.len());
            assert_eq!(
                one_gains,
                estimated_gains(&job, &options, sets),
                "{rel}: the gains"
            );
            let (three_paths, three_gains, baseline) =
                paths_gains_and_replay(&job, &options, sets, true);
            assert_eq!(three_paths, paths, "{rel}: the paths with the replay");
            assert_eq!(three_gains, one_gains, "{rel}: the gains with the replay");
            assert_eq!(baseline, Some(replayed.clone()), "{rel}: the replay");
        }
        windows_replayed += replayed.map_or(0, |r| r.replay.len());
        compared += 1;
    }
    if crate_data_present() {
        assert!(compared >= 8, "{compared} inputs compared");
        assert!(
            windows_replayed >= 20,
            "{windows_replayed} windows replayed"
        );
    }
}
