//! Issue 28: the registered analyses that stream one file ([`Analysis::stream`]: `ops`,
//! `util`, `queue-length`, `memory`, `hierarchy`, `breakdown`, `modules`, `layers`, `roofline`,
//! `iterations`, and `kernels` and `gpu-time` beside their own tests) give
//! what they give on the whole trace. Over every Chrome-trace JSON file in `../shared/data` (up
//! to 2 MB on disk, for a debug CI), imported with spans, instants, counters and every
//! attribute and handed over in batches of several sizes (one event, odd sizes, the
//! importer's own: a launch and its op, a collective kernel and its CPU op, an allocation and
//! the op around it land in different batches), the streamed result serialises exactly as
//! [`Analysis::run`] on the whole trace, at the analysis's default options.
#![allow(clippy::unwrap_used)]

mod common;

use strato_analysis::analyzed::Analyzed;
use strato_analysis::cross_stack::breakdown::{Breakdown, BreakdownSettings};
use strato_analysis::cross_stack::hierarchy::SpanHierarchy;
use strato_analysis::cross_stack::layers::{
    LayerBy, LayerSource, Layers, LayersResult, LayersSettings, RooflineAnalysis, RooflineSettings,
};
use strato_analysis::cross_stack::modules::Modules;
use strato_analysis::cross_stack::ops::Ops;
use strato_analysis::device_time::memory::Memory;
use strato_analysis::device_time::queue_length::QueueLength;
use strato_analysis::device_time::util::Util;
use strato_analysis::patterns::iterations::{Iterations, IterationsSettings};
use strato_analysis::registry::Analysis;
use strato_io::{ArgsScope, ImportOptions, Projection};
use strato_trace::Trace;

/// Checks `A` streamed against the whole trace on every file; sums `measure` of the whole
/// results (what the test asserts was there to compare).
fn streamed_equals_whole<A: Analysis>(measure: impl Fn(&A::Output) -> usize) -> usize {
    streamed_equals_whole_with::<A>(&A::Options::default(), measure)
}

/// [`streamed_equals_whole`] with `settings`.
fn streamed_equals_whole_with<A: Analysis>(
    settings: &A::Options,
    measure: impl Fn(&A::Output) -> usize,
) -> usize {
    let options = ImportOptions {
        args_scope: ArgsScope::All,
        projection: Projection::NO_FLOWS,
        ..ImportOptions::default()
    };
    let files = common::chrome_files();
    assert!(files.len() >= 5, "expected the shared data's JSON traces");
    let mut measured = 0;
    for path in &files {
        let what = path.display().to_string();
        let whole = strato_io::import_file(path, &options).unwrap();
        let expected = A::run(&Analyzed::new(&whole), settings).unwrap();
        measured += measure(&expected);
        let expected = serde_json::to_string(&expected).unwrap();
        // Batches of one event on the small files only (a debug build is slow).
        let small = std::fs::metadata(path).unwrap().len() <= 256 << 10;
        let batches: &[usize] = if small {
            &[1, 97, 4093, strato_io::chrome::SINK_EVENTS]
        } else {
            &[4093, strato_io::chrome::SINK_EVENTS]
        };
        for &batch in batches {
            let mut stream = A::stream(settings).expect("the analysis streams");
            let mut sink = |t: &mut Trace| {
                stream.add(t);
                t.clear_events();
                Ok(())
            };
            let Some(rest) =
                strato_io::import_file_streaming(path, &options, batch, &mut sink).unwrap()
            else {
                continue; // not streamed (a TensorFlow trace viewer file)
            };
            let got = serde_json::to_string(&stream.finish(&rest)).unwrap();
            assert!(
                got == expected,
                "{}, {what}: batches of {batch} differ",
                A::NAME
            );
        }
    }
    measured
}

#[test]
fn ops_streamed_equals_the_whole_trace() {
    let collectives = std::cell::Cell::new(0);
    let modelled = streamed_equals_whole::<Ops>(|r| {
        assert_eq!(r.ops.iter().map(|o| o.total_ns).sum::<i64>(), r.device_ns);
        let c = r.ops.iter().filter(|o| o.collective.is_some()).count();
        collectives.set(collectives.get() + c);
        r.ops.iter().filter(|o| o.model.is_some()).count()
    });
    // The files must hold modelled ops and collectives, or this compares little.
    assert!(modelled > 10, "only {modelled} modelled rows");
    assert!(collectives.get() > 0, "no collective row");
}

#[test]
fn util_streamed_equals_the_whole_trace() {
    let devices = streamed_equals_whole::<Util>(|r| {
        for d in &r.0.devices {
            assert!(d.busy_ns <= d.window_ns, "busy within the window");
        }
        r.0.devices.len()
    });
    assert!(devices >= 10, "only {devices} devices");
}

#[test]
fn queue_length_streamed_equals_the_whole_trace() {
    let streams = streamed_equals_whole::<QueueLength>(|r| {
        r.ranks.iter().map(|k| k.streams.len()).sum::<usize>()
    });
    assert!(streams >= 10, "only {streams} streams");
}

#[test]
fn memory_streamed_equals_the_whole_trace() {
    let samples = streamed_equals_whole::<Memory>(|r| {
        let attributed: u64 = (r.devices.iter())
            .flat_map(|d| &d.ops)
            .map(|o| o.allocations + o.frees)
            .sum();
        assert!(attributed > 0 || r.devices.is_empty());
        r.devices.iter().map(|d| d.samples).sum::<usize>()
    });
    assert!(samples > 1000, "only {samples} allocation samples");
}

#[test]
fn hierarchy_streamed_equals_the_whole_trace() {
    // What the files must hold for the comparison to reach every rule: launches under ops,
    // annotations found by containment and by time, device ops launched before the trace.
    let seen = std::cell::Cell::new([0usize; 4]);
    let launched = streamed_equals_whole::<SpanHierarchy>(|r| {
        let t = &r.total;
        assert_eq!(
            t.with_annotation,
            t.with_annotation_by_containment + t.with_annotation_by_time
        );
        assert!(t.with_launch <= t.device_ops && r.spans_with_parent <= r.spans);
        let mut s = seen.get();
        for (k, n) in [
            t.with_op,
            t.with_annotation_by_containment,
            t.with_annotation_by_time,
            t.launched_before_trace,
        ]
        .into_iter()
        .enumerate()
        {
            s[k] += n;
        }
        seen.set(s);
        t.with_launch
    });
    assert!(
        launched > 10_000,
        "only {launched} device ops with a launch"
    );
    assert!(seen.get().iter().all(|&n| n > 0), "{:?}", seen.get());
}

#[test]
fn breakdown_streamed_equals_the_whole_trace() {
    // Rows that conserve each window, and what the comparison must reach: device ops given
    // by launch and by the only process, transitions, and operations.
    let seen = std::cell::Cell::new([0usize; 3]);
    let processes = streamed_equals_whole::<Breakdown>(|r| {
        let mut s = seen.get();
        for p in &r.processes {
            assert_eq!(
                p.rows.iter().map(|row| row.time_ns).sum::<i64>(),
                p.window_ns
            );
            s[0] += p.device_ops - p.device_ops_without_launch;
            s[1] += p.transitions.len();
            s[2] += p.operations.len();
        }
        seen.set(s);
        r.processes.len()
    });
    assert!(processes >= 10, "only {processes} processes");
    assert!(seen.get().iter().all(|&n| n > 0), "{:?}", seen.get());
    // Steps kept apart.
    let per_step = BreakdownSettings {
        per_step: true,
        ..BreakdownSettings::default()
    };
    let steps = streamed_equals_whole_with::<Breakdown>(&per_step, |r| {
        (r.processes.iter().flat_map(|p| &p.operations))
            .filter(|o| o.operation.starts_with("ProfilerStep#") && !o.operation.ends_with('*'))
            .count()
    });
    assert!(steps >= 10, "only {steps} steps kept apart");
}

/// `breakdown` and `hierarchy` streamed over a trace with OS data (an Nsight Systems export with
/// `SCHED_EVENTS`: thread states and slow system calls on several threads), as a stored
/// profile of it streams: its spans handed over in batches of several sizes.
#[test]
fn streams_with_os_data_equal_the_whole_trace() {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/nsys/pipit_cloverleaf_cuda.sqlite");
    let whole = strato_io::import_paths(&[path], &ImportOptions::default()).unwrap();
    let states = (whole.spans.iter())
        .filter(|s| {
            whole.str(s.category) == strato_analysis::cross_stack::breakdown::THREAD_STATE_CATEGORY
        })
        .count();
    assert!(states > 100, "only {states} thread states");
    fn check<A: Analysis>(whole: &Trace) {
        let settings = A::Options::default();
        let expected = A::run(&Analyzed::new(whole), &settings).unwrap();
        let expected = serde_json::to_string(&expected).unwrap();
        for batch in [1_000, 65_536, whole.spans.len().max(1)] {
            let mut stream = A::stream(&settings).expect("the analysis streams");
            for (k, spans) in whole.spans.chunks(batch).enumerate() {
                // Each batch with its events' args, as an import hands them over; the
                // instants with the first spans.
                let mut part = whole.tables();
                let mut args = |id| (whole.args_text(id)).map(|text| part.args.push(&text));
                let spans: Vec<_> = (spans.iter())
                    .map(|s| strato_trace::Span {
                        args: args(s.args),
                        ..s.clone()
                    })
                    .collect();
                let instants: Vec<_> = (whole.instants.iter().filter(|_| k == 0))
                    .map(|i| strato_trace::Instant {
                        args: args(i.args),
                        ..i.clone()
                    })
                    .collect();
                part.spans = spans;
                part.instants = instants;
                stream.add(&part);
            }
            let got = serde_json::to_string(&stream.finish(&whole.tables())).unwrap();
            assert!(got == expected, "{}: batches of {batch} differ", A::NAME);
        }
    }
    check::<Breakdown>(&whole);
    check::<SpanHierarchy>(&whole);
    check::<Modules>(&whole);
    check::<Layers>(&whole);
}

#[test]
fn modules_streamed_equals_the_whole_trace() {
    // The files must hold module calls with device time under them, nested calls, and
    // recomputed ones for the comparison to reach every rule.
    let seen = std::cell::Cell::new([0usize; 2]);
    let calls = streamed_equals_whole::<Modules>(|r| {
        assert_eq!(
            r.device_ns_in_modules + r.device_ns_outside_modules,
            r.device_ns
        );
        let mut s = seen.get();
        s[0] += usize::from(r.device_ns_in_modules > 0);
        s[1] += r.tree.iter().filter(|n| n.parent.is_some()).count();
        seen.set(s);
        r.module_calls
    });
    assert!(calls > 100, "only {calls} module calls");
    assert!(seen.get().iter().all(|&n| n > 0), "{:?}", seen.get());
}

#[test]
fn layers_streamed_equals_the_whole_trace() {
    // The files must hold layers with kernels, known FLOPs, allocations and steps for the
    // comparison to reach every rule.
    let seen = std::cell::Cell::new([0usize; 4]);
    let mut instances = 0;
    for by in [LayerBy::Op, LayerBy::Annotation] {
        let settings = LayersSettings {
            by,
            ..LayersSettings::default()
        };
        instances += streamed_equals_whole_with::<Layers>(&settings, |r| {
            let LayersResult::Layers(r) = r else {
                panic!("layer tables expected")
            };
            // Conservation: occurrences add up to the instances, kernel counts to the kernels.
            let occurrences: usize = r.layers.iter().map(|l| l.occurrences).sum();
            assert_eq!(occurrences, r.layer_instances);
            let kernels: usize = r.kernels.iter().map(|k| k.duration.count).sum();
            assert_eq!(kernels, r.kernel_count);
            let mut s = seen.get();
            s[0] += r.layers.iter().map(|l| l.kernels).sum::<usize>();
            s[1] += r.layers.iter().map(|l| l.flops_known).sum::<usize>();
            s[2] += r.layers.iter().map(|l| l.allocations).sum::<usize>();
            s[3] += r.steps.len();
            seen.set(s);
            r.layer_instances
        });
    }
    assert!(instances > 1000, "only {instances} layer instances");
    assert!(seen.get().iter().all(|&n| n > 0), "{:?}", seen.get());
    // The roofline's rows come from the same tables, by annotation too.
    let settings = RooflineSettings {
        by: LayerSource::Annotation,
        ..RooflineSettings::default()
    };
    streamed_equals_whole_with::<RooflineAnalysis>(&settings, |r| r.0.layers.len());
    streamed_equals_whole::<RooflineAnalysis>(|r| r.0.kernels.len());
}

#[test]
fn iterations_streamed_equals_the_whole_trace() {
    // The files must hold loops named after annotations and modules, partial matches, nested
    // loops, step checks and loops without a name for the comparison to reach every rule.
    let seen = std::cell::Cell::new([0usize; 5]);
    let settings = IterationsSettings {
        check_steps: true,
        ..IterationsSettings::default()
    };
    let mut loops = 0;
    for settings in [IterationsSettings::default(), settings] {
        loops += streamed_equals_whole_with::<Iterations>(&settings, |r| {
            let mut s = seen.get();
            let kind = |k: &str| {
                (r.report.sequences.iter())
                    .filter(|l| l.lines_up_kind == Some(k))
                    .count()
            };
            s[0] += kind("annotation");
            s[1] += kind("module");
            s[2] += (r.report.sequences.iter())
                .filter(|l| l.lines_up_iterations.is_some() || l.inside_loop.is_some())
                .count();
            s[3] += r.checks.iter().flatten().count();
            s[4] += (r.report.sequences.iter())
                .filter(|l| l.lines_up_with.is_none())
                .count();
            seen.set(s);
            r.report.sequences.len()
        });
    }
    assert!(loops > 20, "only {loops} loops");
    assert!(seen.get().iter().all(|&n| n > 0), "{:?}", seen.get());
}
