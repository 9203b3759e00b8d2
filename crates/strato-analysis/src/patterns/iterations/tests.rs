//! Tests of the iterations: the diagnoses' wording, and mining on sequences whose loops are
//! known by construction.

use strato_trace::Ns;

use super::*;

#[test]
fn diagnosis_messages_word_their_numbers() {
    let cases = [
        (
            Diagnosis::CopyBound {
                h2d_overlap: 0.75,
                mean_interval_ns: 2_500_000.0,
                between_share: 0.25,
            },
            "copy-bound: host-to-device copies fill the gaps between iterations (they cover \
             75% of the mean 2.500 ms interval, 25% of each cycle)",
        ),
        (
            Diagnosis::CpuBound {
                mean_interval_ns: 1_000_000.0,
                between_share: 0.5,
                h2d_overlap: 0.1,
            },
            "CPU-bound: the device waits on the host between iterations (mean interval \
             1.000 ms, 50% of each cycle; copies cover only 10% of it)",
        ),
        (
            Diagnosis::LaunchBound {
                busy_in_iterations: 0.6,
                mean_op_gap_ns: 1_500.0,
            },
            "launch/host-bound inside iterations: the main stream is idle 40% of each \
             iteration (mean gap between ops 1.5 us)",
        ),
        (
            Diagnosis::DeviceBound {
                busy_in_iterations: 0.95,
                between_share: 0.05,
            },
            "device-bound: the main stream is busy 95% of each iteration and waits 5% of \
             each cycle between iterations",
        ),
        (
            Diagnosis::Irregular {
                after_iteration: 3,
                max_interval_ns: 9_000_000,
                median_interval_ns: 1_000_000.0,
            },
            "irregular: after iteration 3 the device waits 9.000 ms against a median of \
             1.000 ms (a stall: data loading, checkpointing, garbage collection?)",
        ),
        (
            Diagnosis::ExtraOps {
                iterations_with_extra: 1,
                iterations: 5,
                most_extra_ops: 2,
                pattern_len: 37,
            },
            "1 of 5 iterations run extra ops (up to 2 beyond the 37-op pattern): periodic \
             extra work such as logging or statistics",
        ),
        (
            Diagnosis::WeakPattern { coverage: 0.3 },
            "weak pattern: iterations hold only 30% of the main stream's ops",
        ),
    ];
    for (d, text) in cases {
        assert_eq!(d.message(), text);
        assert_eq!(d.to_string(), text);
        assert_eq!(serde_json::to_value(&d).ok(), Some(serde_json::json!(text)));
    }
}

/// Device idle gaps: long before each iteration, short elsewhere.
fn gaps(n: usize, starts: &[usize]) -> Vec<Ns> {
    let mut g = vec![100; n];
    for &k in starts {
        g[k] = 50_000;
    }
    g
}

fn opts(i: &[usize]) -> IterationOptions {
    IterationOptions {
        iterations: i.to_vec(),
        ..Default::default()
    }
}

#[test]
fn exact_periodic_sequence() {
    let (s, starts) = synthetic(1, 50, 20, 0, 0.0, 0, 20);
    for o in [opts(&[20]), opts(&[])] {
        let loops = mine(&s, None, &o);
        assert_eq!(loops.len(), 1, "{o:?}");
        let l = &loops[0];
        assert_eq!(l.pattern_len, 50);
        assert_eq!(l.i, 20);
        let got: Vec<usize> = l.matches.iter().map(|m| m.start).collect();
        assert_eq!(got, starts);
    }
}

#[test]
fn noise_insertions_within_k0_are_matched() {
    // 40 iterations of 100 ops, 30% get 1..=3 inserted ops, 37 ops of warm-up.
    let (s, starts) = synthetic(5, 100, 40, 37, 0.3, 3, 30);
    let o = IterationOptions {
        iterations: vec![40],
        k0: Some(3),
        ..Default::default()
    };
    let g = gaps(s.len(), &starts);
    let loops = mine(&s, Some(&g), &o);
    let l = &loops[0];
    assert_eq!(l.matches.len(), 40);
    let got: Vec<usize> = l.matches.iter().map(|m| m.start).collect();
    assert_eq!(got, starts);
    assert!(l.matches.iter().any(|m| m.inserted > 0));
    assert!(l.matches.iter().all(|m| m.inserted <= 3));
    // Estimated i finds the same loop.
    let est = mine(
        &s,
        Some(&g),
        &IterationOptions {
            k0: Some(3),
            ..Default::default()
        },
    );
    assert_eq!(est[0].matches.len(), 40);
    assert!(est[0].i_estimated);
    // Without timing the phase is a guess, but the loop is still found.
    let blind = mine(&s, None, &o);
    assert!(blind[0].matches.len() >= 38, "{}", blind[0].matches.len());
    assert_eq!(blind[0].pattern_len, 100);
}

#[test]
fn too_many_insertions_are_not_an_iteration() {
    let (mut s, _) = synthetic(9, 60, 10, 0, 0.0, 0, 25);
    // 6 foreign ops inside iteration 4.
    for k in 0..6 {
        s.insert(4 * 60 + 10 + k * 5, 999);
    }
    let o = IterationOptions {
        iterations: vec![10],
        k0: Some(5),
        ..Default::default()
    };
    let l = &mine(&s, None, &o)[0];
    assert_eq!(l.matches.len(), 9);
    let o = IterationOptions {
        iterations: vec![10],
        k0: Some(6),
        ..Default::default()
    };
    assert_eq!(mine(&s, None, &o)[0].matches.len(), 10);
}

#[test]
fn two_loops_train_then_eval() {
    let (train, _) = synthetic(11, 80, 30, 0, 0.0, 0, 40);
    let (eval, _) = synthetic(12, 30, 20, 0, 0.0, 0, 40);
    // eval symbols distinct from train's.
    let mut s = train.clone();
    s.extend(eval.iter().map(|x| x + 1000));
    for o in [opts(&[30, 20]), opts(&[])] {
        let loops = mine(&s, None, &o);
        assert_eq!(loops.len(), 2, "{o:?}");
        assert_eq!((loops[0].pattern_len, loops[0].matches.len()), (80, 30));
        assert_eq!((loops[1].pattern_len, loops[1].matches.len()), (30, 20));
        assert_eq!(loops[1].matches[0].start, 2400);
    }
}

#[test]
fn layers_inside_steps_are_a_nested_loop() {
    // 5 steps of: 10 prologue ops, 6 layers of 10 ops, 8 epilogue ops (all distinct
    // symbols apart from the layers' repeats): the steps, then 30 layers inside them.
    let layer: Vec<u32> = (200..210).collect();
    let mut step: Vec<u32> = (100..110).collect();
    for _ in 0..6 {
        step.extend_from_slice(&layer);
    }
    step.extend(300..308);
    let s: Vec<u32> = step.iter().copied().cycle().take(5 * step.len()).collect();
    let loops = mine(&s, None, &opts(&[]));
    assert_eq!(loops.len(), 2, "{loops:?}");
    assert_eq!((loops[0].pattern_len, loops[0].matches.len()), (78, 5));
    assert_eq!(loops[0].inside, None);
    let inner = &loops[1];
    assert_eq!(inner.inside, Some(0));
    assert_eq!((inner.pattern_len, inner.matches.len()), (10, 30));
    let want: Vec<usize> = (0..5)
        .flat_map(|k| (0..6).map(move |j| k * 78 + 10 + 10 * j))
        .collect();
    let got: Vec<usize> = inner.matches.iter().map(|m| m.start).collect();
    assert_eq!(got, want);
    // Off: no nested loop; a loop too short to hold layers gets none either.
    let off = IterationOptions {
        nested: false,
        ..Default::default()
    };
    assert_eq!(mine(&s, None, &off).len(), 1);
    let short: Vec<u32> = layer.iter().copied().cycle().take(200).collect();
    let loops = mine(&short, None, &opts(&[]));
    assert!(loops.iter().all(|l| l.inside.is_none()), "{loops:?}");
}

#[test]
fn rotation_tie_goes_to_the_largest_gap() {
    // Trace starts 7 ops into an iteration: S = tail(P) P^5. Gaps before each iteration
    // start are large.
    let (full, _) = synthetic(3, 40, 6, 0, 0.0, 0, 15);
    let s = full[33..].to_vec();
    let mut gaps = vec![10; s.len()];
    for k in (7..s.len()).step_by(40) {
        gaps[k] = 5000;
    }
    let l = &mine(&s, Some(&gaps), &opts(&[5]))[0];
    let got: Vec<usize> = l.matches.iter().map(|m| m.start).collect();
    assert_eq!(got, vec![7, 47, 87, 127, 167]);
}

/// A trace whose loop and names are known by construction, read whole and streamed one event
/// at a time: four steps of three kernels on the main stream, each of the first three steps'
/// launches inside an `nn.Module: Block_N` frame on the main thread, the fourth step's from a
/// backward thread outside any frame (its step is found through the operation on the
/// annotated thread at the launch; a span of another process met first carries the same
/// correlations), a kernel without launch, copies in on another stream, a thread-state span
/// over everything.
#[test]
fn streamed_equals_whole_by_construction() {
    use crate::analyzed::Analyzed;
    use crate::registry::{fed_span_by_span, streamed, Analysis};
    use strato_trace::testing::TraceBuilder;
    use strato_trace::Level;
    let mut b = TraceBuilder::new();
    let main = b.thread(1, 1);
    let backward = b.thread(1, 2);
    let other = b.thread(2, 3);
    let q = b.queue(0, 7);
    let copies = b.queue(0, 8);
    let api = Level::AcceleratorApi;
    b.span(main, Level::Os, "running", 0, 1_000_000)
        .category(strato_trace::names::THREAD_STATE_CATEGORY);
    let mut c = 0;
    for step in 0..4i64 {
        let t0 = step * 100_000;
        b.span(
            main,
            Level::Operation,
            &format!("ProfilerStep#{step}"),
            t0,
            t0 + 90_000,
        );
        let launcher = if step < 3 {
            b.span(
                main,
                Level::Python,
                &format!("nn.Module: Block_{step}"),
                t0 + 10,
                t0 + 5_000,
            );
            main
        } else {
            backward
        };
        for (k, name) in ["gemm", "relu", "softmax"].iter().enumerate() {
            c += 1;
            let at = t0 + 100 + 1_000 * k as i64;
            if step == 3 {
                // Met first, same correlation, another process: not the launch (the runtime
                // call is), or the fourth step's ops would belong to no operation.
                b.span(other, Level::Backend, "aten::decoy", at - 50, at - 40)
                    .correlation(c);
            }
            b.span(launcher, api, "cudaLaunchKernel", at, at + 10)
                .correlation(c);
            let start = t0 + 50_000 + 2_000 * k as i64;
            b.span(q, Level::DeviceKernel, name, start, start + 1_500)
                .correlation(c);
        }
        b.span(
            copies,
            Level::DeviceCopy,
            "Memcpy HtoD (Pageable -> Device)",
            t0 + 40_000,
            t0 + 45_000,
        )
        .args(r#"{"bytes": 4096}"#);
    }
    // Launched before the trace: no launch, the rank's only process.
    b.span(q, Level::DeviceKernel, "late", 500_000, 500_100);
    let trace = b.build();
    for check_steps in [false, true] {
        let settings = IterationsSettings {
            check_steps,
            ..IterationsSettings::default()
        };
        let whole = Iterations::run(&Analyzed::new(&trace), &settings).unwrap();
        let stream = streamed(
            IterationsStream::new(settings.options(), check_steps),
            IterationsStream::add,
            IterationsStream::finish,
        );
        let got = fed_span_by_span(&trace, stream);
        let json = |r: &IterationsResult| serde_json::to_string(r).unwrap();
        assert_eq!(json(&got), json(&whole), "check_steps {check_steps}");
        let first = &got.report.sequences[0];
        assert_eq!((first.stream, first.iterations.len()), (7, 4));
        assert_eq!(first.pid, Some(1));
        // Every step lines up (the fourth through its operation); the module frames hold
        // three of the four.
        assert_eq!(first.lines_up_with.as_deref(), Some("ProfilerStep#*"));
        assert_eq!(first.lines_up_kind, Some("annotation"));
        assert_eq!(first.lines_up_iterations, None);
        let bytes: i64 = first.iterations.iter().filter_map(|i| i.bytes_in).sum();
        assert_eq!(bytes, 3 * 4096);
        let check = got.checks[0].as_ref();
        assert_eq!(
            check.map(|c| (c.steps, c.matched)),
            check_steps.then_some((4, 4))
        );
    }
}
