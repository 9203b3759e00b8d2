//! Graph-aware attribution on the real vLLM pair (`kineto/tracelens/vllm_decode_full_graph_*`):
//! the expectations are computed here from the raw JSON with serde_json (graph-launched device
//! ops by the graph launch's correlation id, captured launches between begin/end capture, an
//! O(n*m) longest-common-subsequence of kernel names, the innermost `cpu_op` enclosing each
//! captured launch), independently of the importer and of the Myers alignment under test.

#![allow(clippy::unwrap_used)] // test helpers panic on broken fixtures by design

mod common;
use common::{data, raw};

use serde_json::Value;
use strato_analysis::analyzed::Analyzed;
use strato_analysis::cross_stack::breakdown::{breakdown, BreakdownOptions, Resource};
use strato_analysis::cross_stack::graphs::{attribute_graphs, GraphError};
use strato_analysis::cross_stack::hierarchy;
use strato_analysis::cross_stack::layers::{layers, LayersOptions};
use strato_io::{import_paths, ImportOptions};
use strato_trace::{Level, Trace};

const REPLAY: &str = "kineto/tracelens/vllm_decode_full_graph_execution.json.gz";
const CAPTURE: &str = "kineto/tracelens/vllm_decode_full_graph_capture_rank_0.pt.trace.json.gz";

fn import(rel: &str) -> Trace {
    let options = ImportOptions {
        keep_args: true,
        ..ImportOptions::default()
    };
    import_paths(&[data(rel)], &options).unwrap()
}

fn ts(e: &Value) -> f64 {
    e["ts"].as_f64().unwrap()
}

fn end(e: &Value) -> f64 {
    ts(e) + e["dur"].as_f64().unwrap_or(0.0)
}

/// The replayed kernel names (in start order) of the one graph launch of the replay file.
fn replayed_kernels(events: &[Value]) -> Vec<String> {
    let launch = events
        .iter()
        .find(|e| {
            e["name"]
                .as_str()
                .is_some_and(|n| n.contains("GraphLaunch"))
        })
        .unwrap();
    let corr = launch["args"]["correlation"].as_u64().unwrap();
    let mut ops: Vec<&Value> = events
        .iter()
        .filter(|e| {
            e["ph"] == "X"
                && ["kernel", "gpu_memcpy", "gpu_memset"].contains(&e["cat"].as_str().unwrap_or(""))
                && e["args"]["correlation"].as_u64() == Some(corr)
        })
        .collect();
    ops.sort_by(|a, b| ts(a).total_cmp(&ts(b)));
    ops.iter()
        .map(|e| e["name"].as_str().unwrap().to_owned())
        .collect()
}

/// The captured launches (kernel name, innermost enclosing cpu_op) between begin and end
/// capture.
fn captured_launches(events: &[Value]) -> Vec<(String, Option<String>)> {
    let at = |name: &str| {
        events
            .iter()
            .find(|e| e["name"].as_str() == Some(name))
            .map(ts)
            .unwrap()
    };
    let (begin, stop) = (at("hipStreamBeginCapture"), at("hipStreamEndCapture"));
    let mut launches: Vec<&Value> = events
        .iter()
        .filter(|e| {
            e["cat"] == "cuda_runtime"
                && e["args"]["kernel"].is_string()
                && ts(e) >= begin
                && ts(e) <= stop
        })
        .collect();
    launches.sort_by(|a, b| ts(a).total_cmp(&ts(b)));
    let cpu_ops: Vec<&Value> = events
        .iter()
        .filter(|e| e["cat"] == "cpu_op" && e["ph"] == "X")
        .collect();
    launches
        .iter()
        .map(|l| {
            let inner = cpu_ops
                .iter()
                .filter(|o| {
                    o["tid"] == l["tid"] && ts(o) <= ts(l) && end(l) <= end(o) && ts(o) >= begin
                })
                .max_by(|a, b| ts(a).total_cmp(&ts(b)))
                .map(|o| o["name"].as_str().unwrap().to_owned());
            (l["args"]["kernel"].as_str().unwrap().to_owned(), inner)
        })
        .collect()
}

/// Length of the longest common subsequence (textbook dynamic programme).
fn lcs(a: &[String], b: &[String]) -> usize {
    let mut row = vec![0usize; b.len() + 1];
    for x in a {
        let mut diag = 0;
        for (j, y) in b.iter().enumerate() {
            let up = row[j + 1];
            row[j + 1] = if x == y {
                diag + 1
            } else {
                row[j + 1].max(row[j])
            };
            diag = up;
        }
    }
    row[b.len()]
}

#[test]
fn vllm_full_graph_kernels_map_to_the_captured_ops() {
    let replay_raw = raw(REPLAY);
    let capture_raw = raw(CAPTURE);
    let replayed = replayed_kernels(&replay_raw);
    let captured = captured_launches(&capture_raw);
    let captured_names: Vec<String> = captured.iter().map(|c| c.0.clone()).collect();
    let expected_mapped = lcs(&replayed, &captured_names);
    assert!(replayed.len() > 400, "{}", replayed.len());

    let replay = import(REPLAY);
    let capture = import(CAPTURE);
    // Before: every graph kernel hangs off the graph launch, none mapped.
    let before = hierarchy::report(&Analyzed::new(&replay));
    assert_eq!(before.total.graph_kernels, replayed.len());
    assert_eq!(before.total.graph_kernels_mapped, 0);

    let (trace, coverage) = attribute_graphs(replay, &capture, CAPTURE).unwrap();
    trace.validate().unwrap();
    assert_eq!(coverage.graph_launches, 1);
    assert_eq!(coverage.graph_kernels, replayed.len());
    assert_eq!(coverage.graph_kernels_mapped, expected_mapped);
    assert_eq!(coverage.launches[0].captured_launches, captured.len());
    let exact = replayed == captured_names;
    assert_eq!(coverage.exact_launches, usize::from(exact));
    assert_eq!(coverage.launches[0].confidence == 1.0, exact);

    let a = Analyzed::new(&trace);
    let after = hierarchy::report(&a);
    assert_eq!(after.total.graph_kernels, replayed.len());
    assert_eq!(after.total.graph_kernels_mapped, expected_mapped);
    assert_eq!(after.total.device_ops, before.total.device_ops);
    assert!(after.total.with_op > before.total.with_op + expected_mapped / 2);

    // Each mapped kernel's chain reaches the cpu_op that enclosed its captured launch.
    let h = a.hierarchy();
    let mut graph_ops: Vec<u32> = (0..trace.spans.len() as u32)
        .filter(|&i| {
            let s = &trace.spans[i as usize];
            trace.track(s.track).is_device()
                && a.scopes().launch_of(&trace, i).is_some_and(|l| {
                    strato_analysis::cross_stack::graphs::is_graph_capture_track(
                        trace.track(trace.spans[l as usize].track),
                    )
                })
        })
        .collect();
    graph_ops.sort_by_key(|&i| trace.spans[i as usize].start);
    assert_eq!(graph_ops.len(), expected_mapped);
    if exact {
        let mut checked = 0;
        for (k, &i) in graph_ops.iter().enumerate() {
            assert_eq!(trace.str(trace.spans[i as usize].name), captured[k].0);
            let innermost_backend = h
                .chain(i)
                .into_iter()
                .find(|&c| trace.spans[c as usize].level == Level::Backend)
                .map(|c| trace.str(trace.spans[c as usize].name).to_owned());
            assert_eq!(innermost_backend, captured[k].1, "kernel {k}");
            checked += usize::from(captured[k].1.is_some());
        }
        assert!(checked > 300, "{checked} kernels under a captured cpu_op");
    }

    // Breakdown: conserves time, and graph kernels' GPU time moves to captured operations.
    let b = breakdown(&a, &BreakdownOptions::default());
    let b0_trace = import(REPLAY);
    let b0 = breakdown(&Analyzed::new(&b0_trace), &BreakdownOptions::default());
    for (p, p0) in b.processes.iter().zip(&b0.processes) {
        let sum: i64 = p.rows.iter().map(|r| r.time_ns).sum();
        assert_eq!(sum, p.window_ns);
        // Same window and the same CPU-side time: the copies carry no CPU time.
        assert_eq!(p.window_ns, p0.window_ns);
        let cpu = |p: &strato_analysis::cross_stack::breakdown::ProcessBreakdown| -> i64 {
            p.rows
                .iter()
                .filter(|r| matches!(r.resource, Resource::Cpu | Resource::CpuGpu))
                .map(|r| r.time_ns)
                .sum()
        };
        assert_eq!(cpu(p), cpu(p0));
    }
    let gpu_only_under =
        |r: &strato_analysis::cross_stack::breakdown::BreakdownReport, needle: &str| -> i64 {
            r.processes
                .iter()
                .flat_map(|p| &p.rows)
                .filter(|row| row.resource == Resource::Gpu && row.operation.contains(needle))
                .map(|row| row.time_ns)
                .sum()
        };
    assert_eq!(gpu_only_under(&b0, "CompiledFxGraph"), 0);
    assert!(gpu_only_under(&b, "CompiledFxGraph") > 0);

    // Layers: the captured framework ops own the graph kernels.
    let l = layers(&a, &LayersOptions::default());
    let l0 = layers(&Analyzed::new(&b0_trace), &LayersOptions::default());
    let under = |r: &strato_analysis::cross_stack::layers::LayersReport| -> usize {
        r.layers.iter().map(|x| x.kernels).sum()
    };
    assert!(
        under(&l) >= under(&l0) + expected_mapped * 9 / 10,
        "{} vs {}",
        under(&l),
        under(&l0)
    );
}

#[test]
fn a_trace_without_captured_launches_is_refused_and_unrelated_replays_map_nothing() {
    let replay = import(REPLAY);
    // The replay trace has no capture window and its launches all ran: nothing was captured.
    assert_eq!(
        attribute_graphs(import(REPLAY), &replay, REPLAY).unwrap_err(),
        GraphError::NoCapturedLaunches
    );
    // A trace with no graph launch: nothing to map, trace unchanged.
    let capture = import(CAPTURE);
    let other = import("kineto/hta_alexnet_trace.json.gz");
    let (trace, coverage) = attribute_graphs(other.clone(), &capture, CAPTURE).unwrap();
    assert_eq!((coverage.graph_launches, coverage.graph_kernels), (0, 0));
    assert_eq!(trace, other);
}

#[test]
fn piecewise_graph_kernels_are_counted_without_a_capture() {
    let rel = "kineto/tracelens/vllm_prefilldecode_piecewise_graph_execution.json.gz";
    let events = raw(rel);
    let launches: std::collections::HashSet<u64> = events
        .iter()
        .filter(|e| {
            e["cat"] == "cuda_runtime"
                && e["name"]
                    .as_str()
                    .is_some_and(|n| n.contains("GraphLaunch"))
        })
        .filter_map(|e| e["args"]["correlation"].as_u64())
        .collect();
    let expected = events
        .iter()
        .filter(|e| {
            e["ph"] == "X"
                && ["kernel", "gpu_memcpy", "gpu_memset"].contains(&e["cat"].as_str().unwrap_or(""))
                && e["args"]["correlation"]
                    .as_u64()
                    .is_some_and(|c| launches.contains(&c))
        })
        .count();
    assert!(expected > 0);
    let trace = import(rel);
    let r = hierarchy::report(&Analyzed::new(&trace));
    assert_eq!(r.total.graph_kernels, expected);
    assert_eq!(r.total.graph_kernels_mapped, 0);
}
