//! Integration tests on the real OpenCL device (PoCL here): device timing of a valid kernel,
//! a candidate that fails to build, one that crashes its worker, one that hangs (timeout,
//! worker replaced, the run goes on), out of memory, and the serial harness. Sizes are tiny.
//! Skipped (with a message) when no OpenCL device is present.

use strato_measure::calibrate::Params;
use strato_measure::compare;
use strato_measure::engine::{Engine, EngineConfig, Parallelism};
use strato_measure::log::Decision;
use strato_measure::serial::{self, SerialConfig};
use strato_measure::{Arg, BufferInit, Candidate, Fault, Outcome, WorkerSpec};

const WORKER: &str = env!("CARGO_BIN_EXE_strato-measure-worker");

const SAXPY: &str =
    "__kernel void saxpy(__global float* y, __global const float* x, float a, int n) {
    int i = get_global_id(0); if (i < n) y[i] = a * x[i] + y[i]; }";

const HANG: &str = "__kernel void spin(volatile __global int* flag) {
    while (flag[0] == 0) { } }";

const SEGV: &str = "__kernel void wild(__global int* a) {
    __global int* p = (__global int*)(size_t)16; p[get_global_id(0)] = a[0]; }";

fn have_device() -> bool {
    let ok = std::process::Command::new("clinfo")
        .arg("-l")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("Device"))
        .unwrap_or(false);
    if !ok {
        eprintln!("skipping: no OpenCL device (clinfo -l shows none)");
    }
    ok
}

fn saxpy(name: &str, n: usize) -> Candidate {
    Candidate {
        name: name.into(),
        source: Some(SAXPY.into()),
        kernel: Some("saxpy".into()),
        global: vec![n],
        local: Some(vec![16]),
        args: vec![
            Arg::Buffer {
                bytes: (n * 4) as u64,
                init: BufferInit::Ones,
            },
            Arg::Buffer {
                bytes: (n * 4) as u64,
                init: BufferInit::Random,
            },
            Arg::Float(2.0),
            Arg::Int(n as i32),
        ],
        ..Candidate::default()
    }
}

fn config(parallelism: Parallelism) -> EngineConfig {
    let mut cfg = EngineConfig::new(WorkerSpec::new(vec![WORKER.into()]));
    cfg.repeats = 3;
    cfg.parallelism = parallelism;
    cfg.params = Params {
        eta_s: 3.0,
        max_dp: 2,
        min_round: 4,
        ..Params::default()
    };
    cfg
}

#[test]
fn valid_kernel_is_timed_on_the_device() {
    if !have_device() {
        return;
    }
    let report = Engine::new(config(Parallelism::Fixed(1)))
        .measure(&[saxpy("a", 4096), saxpy("b", 1024)])
        .unwrap();
    assert_eq!(report.counts.get("ok"), Some(&2), "{:?}", report.results);
    for r in &report.results {
        let m = r.outcome.measurement().unwrap();
        assert_eq!(m.runs_ns.len(), 3);
        assert!(m.latency_ns > 0.0);
        assert!(m.launches_per_run >= 1);
        // Device time of every launch is inside the CPU-side duration of all runs.
        let launches = 3.0 * f64::from(m.launches_per_run);
        assert!(m.latency_ns * launches <= m.duration_ns * 1.05, "{m:?}");
        assert!(r.reported_latency_ns.is_some());
    }
    assert!(report.best.is_some());
    assert!(report
        .log
        .iter()
        .any(|r| matches!(r.decision, Decision::RankSelection { .. })));
}

#[test]
fn short_kernels_are_timed_over_a_time_budget_per_run() {
    if !have_device() {
        return;
    }
    // A 1024-element saxpy takes microseconds: with a 20 ms budget per run each run holds
    // many launches (unless its probe alone took 10 ms); without a budget, one launch.
    let mut with = config(Parallelism::Fixed(1));
    with.params.min_run_ms = 20.0;
    let mut without = config(Parallelism::Fixed(1));
    without.params.min_run_ms = 0.0;
    let list = [saxpy("tiny", 1024)];
    let a = Engine::new(with).measure(&list).unwrap();
    let b = Engine::new(without).measure(&list).unwrap();
    let ma = a.results[0].outcome.measurement().unwrap();
    let mb = b.results[0].outcome.measurement().unwrap();
    assert!(ma.launches_per_run >= 2, "{ma:?}");
    assert!(ma.launches_per_run <= strato_measure::protocol::MAX_LAUNCHES_PER_RUN);
    assert_eq!(mb.launches_per_run, 1, "{mb:?}");
    // Runs report the time per launch, not per run: the per-launch latencies agree within
    // an order of magnitude (a run of k launches is not k times one launch).
    let ratio = ma.latency_ns / mb.latency_ns;
    assert!((0.1..10.0).contains(&ratio), "{ratio} {ma:?} {mb:?}");
    // Every launch ran inside the timed window.
    let launches = 3.0 * f64::from(ma.launches_per_run);
    assert!(ma.latency_ns * launches <= ma.duration_ns * 1.05, "{ma:?}");
    // The serial harness sizes its launches the same way, CPU-timed.
    let cfg = SerialConfig {
        worker: WorkerSpec::new(vec![WORKER.into()]),
        repeats: 3,
        warmup: 1,
        timeout_s: 10.0,
        min_run_ns: 20e6,
    };
    let s = serial::run(&cfg, &list).unwrap();
    let m = s.results[0].outcome.measurement().unwrap();
    assert!(m.launches_per_run >= 2, "{m:?}");
    assert!(m.latency_ns * 3.0 * f64::from(m.launches_per_run) <= m.duration_ns * 1.001);
}

#[test]
fn build_failure_crash_hang_and_oom_are_reported_and_the_run_continues() {
    if !have_device() {
        return;
    }
    let broken = Candidate {
        name: "broken".into(),
        source: Some("__kernel void f(__global float* a) { a[0] = undefined_thing; }".into()),
        kernel: Some("f".into()),
        global: vec![16],
        args: vec![Arg::Buffer {
            bytes: 64,
            init: BufferInit::Zero,
        }],
        ..Candidate::default()
    };
    let abort = Candidate {
        name: "abort".into(),
        fault: Some(Fault::Abort),
        ..saxpy("x", 64)
    };
    let hang = Candidate {
        name: "hang".into(),
        source: Some(HANG.into()),
        kernel: Some("spin".into()),
        global: vec![1],
        local: None,
        args: vec![Arg::Buffer {
            bytes: 4,
            init: BufferInit::Zero,
        }],
        ..Candidate::default()
    };
    let oom = Candidate {
        name: "oom".into(),
        args: vec![
            Arg::Buffer {
                bytes: 1 << 50,
                init: BufferInit::Zero,
            },
            Arg::Buffer {
                bytes: 256,
                init: BufferInit::Zero,
            },
            Arg::Float(1.0),
            Arg::Int(64),
        ],
        ..saxpy("x", 64)
    };
    let list = vec![
        saxpy("ok1", 1024),
        broken,
        abort,
        saxpy("ok2", 2048),
        hang,
        oom,
        saxpy("ok3", 512),
    ];
    let report = Engine::new(config(Parallelism::Fixed(1)))
        .measure(&list)
        .unwrap();
    let status = |name: &str| {
        report
            .results
            .iter()
            .find(|r| r.name == name)
            .map(|r| r.status.clone())
            .unwrap()
    };
    assert_eq!(status("ok1"), "ok");
    assert_eq!(status("broken"), "build_failed");
    assert_eq!(status("abort"), "crashed");
    assert_eq!(status("hang"), "timeout");
    assert_eq!(status("oom"), "out_of_memory");
    assert_eq!(status("ok2"), "ok");
    assert_eq!(status("ok3"), "ok");
    let broken = report.results.iter().find(|r| r.name == "broken").unwrap();
    match &broken.outcome {
        Outcome::BuildFailed { log } => assert!(log.contains("undefined_thing"), "{log}"),
        o => panic!("{o:?}"),
    }
    let crash = report.results.iter().find(|r| r.name == "abort").unwrap();
    match &crash.outcome {
        Outcome::Crashed { detail } => assert!(detail.contains("SIGABRT"), "{detail}"),
        o => panic!("{o:?}"),
    }
    // Two workers replaced (crash, hang), each logged.
    assert_eq!(report.workers_replaced, 2);
    let reasons: Vec<String> = report
        .log
        .iter()
        .filter_map(|r| match &r.decision {
            Decision::WorkerReplaced { reason, .. } => Some(reason.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(reasons, vec!["crashed".to_string(), "timeout".to_string()]);
}

#[test]
fn kernel_segfault_crashes_only_its_worker() {
    if !have_device() {
        return;
    }
    let wild = Candidate {
        name: "wild".into(),
        source: Some(SEGV.into()),
        kernel: Some("wild".into()),
        global: vec![64],
        local: None,
        args: vec![Arg::Buffer {
            bytes: 256,
            init: BufferInit::Zero,
        }],
        ..Candidate::default()
    };
    let report = Engine::new(config(Parallelism::Fixed(2)))
        .measure(&[saxpy("a", 1024), wild, saxpy("b", 1024), saxpy("c", 1024)])
        .unwrap();
    let wild = report.results.iter().find(|r| r.name == "wild").unwrap();
    assert_eq!(wild.status, "crashed", "{:?}", wild.outcome);
    // Crashed in parallel, re-run alone (and crashed again): logged as a retry.
    assert!(wild.retried_alone);
    assert_eq!(report.counts.get("ok"), Some(&3));
    assert!(report.workers_replaced >= 2);
}

#[test]
fn parallel_round_calibrates_and_logs_each_decision() {
    if !have_device() {
        return;
    }
    let list: Vec<Candidate> = (0..8)
        .map(|i| saxpy(&format!("c{i}"), 1024 << (i % 3)))
        .collect();
    let report = Engine::new(config(Parallelism::Adaptive))
        .measure(&list)
        .unwrap();
    assert_eq!(report.counts.get("ok"), Some(&8));
    let has = |f: fn(&Decision) -> bool| report.log.iter().any(|r| f(&r.decision));
    assert!(has(|d| matches!(d, Decision::Round { dp: 2, .. })));
    assert!(has(|d| matches!(d, Decision::Outliers { .. })));
    assert!(has(|d| matches!(d, Decision::Sample { .. })));
    assert!(has(|d| matches!(d, Decision::Remeasured { .. })));
    assert!(has(|d| matches!(d, Decision::Delta { .. })));
    assert!(has(|d| matches!(d, Decision::React { .. })));
    // Q = max(#outliers, ceil(0.2 * 4)) >= 1 re-measured per parallel round of 4.
    for round in report.rounds.iter().filter(|r| r.dp > 1) {
        assert!(round.remeasured >= 1, "{round:?}");
        assert!(round.delta_mean.is_some());
    }
    assert!(!report.delta_by_dp.is_empty());
}

#[test]
fn serial_harness_uses_a_fresh_process_and_cpu_time() {
    if !have_device() {
        return;
    }
    let cfg = SerialConfig {
        worker: WorkerSpec::new(vec![WORKER.into()]),
        repeats: 3,
        warmup: 1,
        // Generous: a fresh process pays LLVM's start-up, seconds when the tests run in
        // parallel on a busy machine; the timeout itself is tested elsewhere.
        timeout_s: 20.0,
        min_run_ns: 0.0,
    };
    let report = serial::run(&cfg, &[saxpy("a", 1024), saxpy("b", 4096)]).unwrap();
    assert_eq!(report.counts.get("ok"), Some(&2));
    assert!(report.best.is_some());
    let m = report.results[0].outcome.measurement().unwrap();
    // CPU timing: every run gets the mean of the CPU-timed span.
    assert!((m.runs_ns[0] - m.latency_ns).abs() < 1e-6);
    assert!(m.build_ns > 0.0);
}

#[test]
fn device_lock_keeps_every_other_worker_out_of_timed_runs() {
    if !have_device() {
        return;
    }
    // dp 2 from the first round: the second worker starts (context, compiler warm-up) while
    // the first measures, then both build while the other times. With the lock, no timed
    // window may overlap another worker's start-up or request.
    let list: Vec<Candidate> = (0..6)
        .map(|i| saxpy(&format!("c{i}"), 4096 << (i % 3)))
        .collect();
    let report = Engine::new(config(Parallelism::Fixed(2)))
        .measure(&list)
        .unwrap();
    assert_eq!(report.counts.get("ok"), Some(&6));
    for r in &report.results {
        let m = r.outcome.measurement().unwrap();
        assert!(
            m.timed_from_ns > 0 && m.timed_to_ns >= m.timed_from_ns,
            "{m:?}"
        );
        assert!(m.active_from_ns <= m.timed_from_ns && m.timed_to_ns <= m.active_to_ns);
        assert_eq!(r.foreign_overlap_ns, 0.0, "{}: {m:?}", r.name);
    }
    assert_eq!(report.overlapped_measurements, 0);
    // Rank selection re-measured a window, at least once each, and logged its passes.
    let rank = report.rank.as_ref().unwrap();
    assert!(
        rank.window >= 1 && rank.measurements >= rank.window,
        "{rank:?}"
    );
    assert!(report.best.as_ref().unwrap().samples >= 1);
}

#[test]
fn compare_runs_judge_every_pick_against_the_true_best() {
    if !have_device() {
        return;
    }
    let mut engine = config(Parallelism::Adaptive);
    engine.repeats = 3;
    let mut cfg = compare::CompareConfig::new(engine);
    cfg.verify_passes = 4;
    cfg.verify_repeats = 5;
    // Every pick must exist: no serial-harness timeouts when the machine is busy.
    cfg.serial_timeout_s = 20.0;
    let list = vec![saxpy("s1", 1024), saxpy("s2", 8192), saxpy("s3", 65536)];
    let report = compare::run_many(&cfg, &list, 2, &mut |_| {}).unwrap();
    assert_eq!(report.runs.len(), 2);
    let truth_best = report.true_best.as_ref().unwrap();
    // The truth is sorted and its best is the fastest measured.
    assert_eq!(report.truth[0].name, truth_best.name);
    assert!(report
        .truth
        .windows(2)
        .all(|w| w[0].median_ns <= w[1].median_ns));
    // Every pick was measured for the truth, so every gap exists and is >= 0 by construction.
    for s in &report.runs {
        for g in [s.best_gap_pct, s.pinned_best_gap_pct, s.serial_best_gap_pct] {
            let g = g.unwrap();
            assert!(g >= 0.0, "{s:?}");
        }
        assert!(s.serial_time_s > 0.0 && s.parallel_time_s > 0.0);
    }
    let worst = report
        .runs
        .iter()
        .filter_map(|s| s.best_gap_pct)
        .fold(f64::NEG_INFINITY, f64::max);
    assert_eq!(report.worst_gap_pct, Some(worst));
    let mut red: Vec<f64> = report.runs.iter().map(|s| s.time_reduction_pct).collect();
    red.sort_by(f64::total_cmp);
    assert!((report.median_time_reduction_pct - (red[0] + red[1]) / 2.0).abs() < 1e-9);
    assert_eq!(report.time_reduction_pct, report.median_time_reduction_pct);
    let json = serde_json::to_value(&report).unwrap();
    for key in [
        "time_reduction_pct",
        "best_gap_pct",
        "worst_gap_pct",
        "median_time_reduction_pct",
        "runs",
    ] {
        assert!(json.get(key).is_some(), "{key}");
    }
    assert!(json["serial"]["time_s"].is_number() && json["parallel"]["time_s"].is_number());
    for key in [
        "time_reduction_pct",
        "best_gap_pct",
        "pinned_best_gap_pct",
        "serial_best_gap_pct",
    ] {
        assert!(json["runs"][0].get(key).is_some(), "runs[0].{key}");
    }
}
