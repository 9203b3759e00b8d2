//! nsys graph kernels mapped to the ops that captured them (`docs/analyses/graphs.md`).
//!
//! The fixture is the real CloverLeaf export (`nsys/pipit_cloverleaf_cuda.sqlite`, schema
//! 3.13.2) with a stream capture, its instantiation and two replays inserted on a real thread
//! and stream, written to nsys's schema (`CUDA_GRAPH_NODE_EVENTS` and `NVTX_EVENTS` as nsys
//! creates them; CloverLeaf has neither table, newer exports leave out empty tables):
//!
//! - capture: `cudaStreamBeginCapture`; NVTX range `layer_a` around captured launch L1 (node
//!   100 created inside it); `layer_b` around L2 (node 101); L3 (node 102) outside any range;
//!   `cudaStreamEndCapture`. Captured launches have no kernel rows (they do not run);
//! - `cudaGraphInstantiate`: nodes 200, 201, 202 cloned from 100, 101, 102;
//! - inside NVTX range `serve`: graph launch G1 replays nodes 200, 201, 202 and a kernel of node
//!   999 (no node event: not linked), graph launch G2 replays 200, 201, 202.
//!
//! So by construction: node 200 -> L1 under `layer_a`, 201 -> L2 under `layer_b`, 202 -> L3;
//! 7 graph kernels, 6 mapped; G1 3 of 4, G2 3 of 3 (exact). Without the node events the order
//! fallback pairs G2 (3 ops, node order) with the capture of 3 launches; G1 (4 ops) has no
//! capture of as many launches and stays unmapped.

#![allow(clippy::unwrap_used)] // test helpers panic on broken fixtures by design

mod common;
use common::data;
use common::nsys::{CloverLeafCopy, NVTX_EVENTS};

use strato_analysis::analyzed::Analyzed;
use strato_analysis::cross_stack::graphs::{
    attribute_graph_nodes, has_capture_links, is_graph_capture_track, METHOD_GRAPH_NODE,
    METHOD_NODE_ORDER,
};
use strato_analysis::cross_stack::hierarchy::report;
use strato_io::{import_paths, ImportOptions};
use strato_trace::Trace;

const NODE_EVENTS: &str = "CREATE TABLE CUDA_GRAPH_NODE_EVENTS (
    start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL,
    globalTid INTEGER, nameId INTEGER NOT NULL, graphNodeId INTEGER NOT NULL,
    originalGraphNodeId INTEGER);";

/// The replayed kernels: (graph launch, node id, start offset).
const REPLAYS: [(usize, i64, i64); 7] = [
    (0, 200, 50_000),
    (0, 201, 60_000),
    (0, 202, 70_000),
    (0, 999, 80_000),
    (1, 200, 110_000),
    (1, 201, 120_000),
    (1, 202, 130_000),
];

struct Fixture {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    /// Correlation ids of the two graph launches.
    graph_launches: [i64; 2],
}

fn fixture(with_node_events: bool) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let mut copy = CloverLeafCopy::new(dir.path(), "graph_nodes.sqlite");
    copy.db.execute_batch(NVTX_EVENTS).unwrap();
    if with_node_events {
        copy.db.execute_batch(NODE_EVENTS).unwrap();
    }
    let begin = copy.string("cudaStreamBeginCapture_v10000");
    let launch = copy.string("cudaLaunchKernel_v7000");
    let end = copy.string("cudaStreamEndCapture_v10000");
    let instantiate = copy.string("cudaGraphInstantiate_v12000");
    let graph_launch = copy.string("cudaGraphLaunch_v10000");
    let node_event = copy.string("CUDA graph node");
    let mut correlation = copy.free_correlation;
    let CloverLeafCopy {
        path,
        db,
        tid,
        activity_end,
        ..
    } = copy;
    // After every real call of the thread (an OS call around an inserted launch would be
    // copied as one of its enclosing spans).
    let last_os_end: i64 = db
        .query_row("SELECT MAX(end) FROM OSRT_API", [], |r| r.get(0))
        .unwrap();
    let t0 = activity_end.max(last_os_end) + 1_000;
    let mut runtime = |start: i64, stop: i64, name: i64| -> i64 {
        correlation += 1;
        db.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, \
             correlationId, nameId, returnValue) \
             SELECT ?1, ?2, eventClass, ?3, ?4, ?5, 0 FROM CUPTI_ACTIVITY_KIND_RUNTIME LIMIT 1",
            [t0 + start, t0 + stop, tid, correlation, name],
        )
        .unwrap();
        correlation
    };
    let nvtx = |start: i64, stop: i64, text: &str| {
        db.execute(
            "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) \
             VALUES (?1, ?2, 59, ?3, ?4)",
            rusqlite::params![t0 + start, t0 + stop, text, tid],
        )
        .unwrap();
    };
    let node = |at: i64, node: i64, original: Option<i64>| {
        if with_node_events {
            db.execute(
                "INSERT INTO CUDA_GRAPH_NODE_EVENTS (start, end, eventClass, globalTid, nameId, \
                 graphNodeId, originalGraphNodeId) VALUES (?1, ?1, 0, ?2, ?3, ?4, ?5)",
                rusqlite::params![t0 + at, tid, node_event, node, original],
            )
            .unwrap();
        }
    };
    // The capture.
    runtime(0, 1_000, begin);
    nvtx(2_000, 10_000, "layer_a");
    runtime(3_000, 4_000, launch);
    node(3_500, 100, None);
    nvtx(11_000, 20_000, "layer_b");
    runtime(12_000, 13_000, launch);
    node(12_500, 101, None);
    runtime(21_000, 22_000, launch);
    node(21_500, 102, None);
    runtime(23_000, 24_000, end);
    // Instantiation clones the nodes.
    runtime(25_000, 30_000, instantiate);
    for (k, (clone, original)) in [(200, 100), (201, 101), (202, 102)].into_iter().enumerate() {
        node(26_000 + 100 * k as i64, clone, Some(original));
    }
    // Two replays inside `serve`.
    nvtx(39_000, 200_000, "serve");
    let graph_launches = [
        runtime(40_000, 45_000, graph_launch),
        runtime(100_000, 105_000, graph_launch),
    ];
    for (g, node, start) in REPLAYS {
        db.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, \
             streamId, correlationId, globalPid, demangledName, shortName, registersPerThread, \
             gridX, gridY, gridZ, blockX, blockY, blockZ, staticSharedMemory, \
             dynamicSharedMemory, localMemoryPerThread, localMemoryTotal, gridId, graphNodeId) \
             SELECT ?1, ?2, deviceId, contextId, streamId, ?3, globalPid, demangledName, \
             shortName, registersPerThread, gridX, gridY, gridZ, blockX, blockY, blockZ, \
             staticSharedMemory, dynamicSharedMemory, localMemoryPerThread, localMemoryTotal, \
             gridId, ?4 FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY end DESC LIMIT 1",
            [t0 + start, t0 + start + 5_000, graph_launches[g], node],
        )
        .unwrap();
    }
    drop(db);
    Fixture {
        _dir: dir,
        path,
        graph_launches,
    }
}

fn import(path: &std::path::Path, keep_args: bool) -> Trace {
    let options = ImportOptions {
        keep_args,
        ..ImportOptions::default()
    };
    import_paths(&[path.to_path_buf()], &options).unwrap()
}

/// Names of the chain of parents of the kernel replayed at `start` (the kernel excluded).
fn chain_of(trace: &Trace, t0: i64, start: i64) -> Vec<String> {
    let a = Analyzed::new(trace);
    let h = a.hierarchy();
    let i = trace
        .spans
        .iter()
        .position(|s| trace.track(s.track).is_device() && s.start == t0 + start)
        .unwrap() as u32;
    h.chain(i)
        .into_iter()
        .skip(1)
        .map(|p| trace.str(trace.spans[p as usize].name).to_owned())
        .collect()
}

/// The first graph launch's start: the fixture's time origin plus 40 µs.
fn origin(trace: &Trace, correlation: i64) -> i64 {
    let launch = trace
        .spans
        .iter()
        .find(|s| {
            s.correlation == Some(correlation as u64) && trace.str(s.name) == "cudaGraphLaunch"
        })
        .unwrap();
    launch.start - 40_000
}

fn check_mapping(keep_args: bool) {
    let f = fixture(true);
    let plain = import(&data("nsys/pipit_cloverleaf_cuda.sqlite"), keep_args);
    let raw = import(&f.path, keep_args);
    assert!(has_capture_links(&raw));
    assert!(!has_capture_links(&plain));
    let t0 = origin(&raw, f.graph_launches[0]);
    let before = report(&Analyzed::new(&raw));
    assert_eq!(
        (
            before.total.graph_kernels,
            before.total.graph_kernels_mapped
        ),
        (7, 0)
    );
    let (trace, coverage) = attribute_graph_nodes(raw.clone());
    let coverage = coverage.unwrap();
    trace.validate().unwrap();
    assert_eq!(coverage.graph_launches, 2);
    assert_eq!(
        (coverage.graph_kernels, coverage.graph_kernels_mapped),
        (7, 6)
    );
    assert_eq!(coverage.mapped_by_node_order, 0);
    assert_eq!(coverage.captured_graphs, 1);
    assert_eq!(coverage.exact_launches, 1);
    let per_launch: Vec<(usize, usize, usize, f64, &str)> = coverage
        .launches
        .iter()
        .map(|l| {
            (
                l.graph_kernels,
                l.mapped,
                l.captured_launches,
                l.confidence,
                l.method,
            )
        })
        .collect();
    assert_eq!(
        per_launch,
        vec![
            (4, 3, 3, 0.75, METHOD_GRAPH_NODE),
            (3, 3, 3, 1.0, METHOD_GRAPH_NODE)
        ]
    );
    // Copies per replay: layer_a, L1, layer_b, L2, L3 (BeginCapture/EndCapture enclose none).
    assert_eq!(coverage.spans_added, 10);
    let after = report(&Analyzed::new(&trace));
    assert_eq!(
        (after.total.graph_kernels, after.total.graph_kernels_mapped),
        (7, 6)
    );
    let plain_ops = report(&Analyzed::new(&plain)).total.device_ops;
    assert_eq!(after.total.device_ops, plain_ops + 7);
    assert_eq!(before.total.device_ops, after.total.device_ops);
    // Each replay of a node reaches the range that enclosed its captured launch.
    for offset in [0, 60_000] {
        assert_eq!(
            chain_of(&trace, t0, 50_000 + offset)[..2],
            ["cudaLaunchKernel", "layer_a"]
        );
        assert_eq!(
            chain_of(&trace, t0, 60_000 + offset)[..2],
            ["cudaLaunchKernel", "layer_b"]
        );
        assert_eq!(chain_of(&trace, t0, 70_000 + offset), ["cudaLaunchKernel"]);
    }
    // The unlinked node stays under its graph launch, inside `serve`.
    assert_eq!(chain_of(&trace, t0, 80_000), ["cudaGraphLaunch", "serve"]);
    // The copies carry no CPU time: the threads of every process are those of the import.
    let threads = |t: &Trace| -> Vec<usize> {
        Analyzed::new(t)
            .scopes()
            .processes
            .iter()
            .map(|p| p.threads.len())
            .collect()
    };
    assert_eq!(threads(&trace), threads(&raw));
    assert!(trace.tracks.iter().any(is_graph_capture_track));
    // Attribution is done once: the result has no import links left.
    assert!(!has_capture_links(&trace));
    let (again, second) = attribute_graph_nodes(trace.clone());
    assert!(second.is_none());
    assert_eq!(again.spans.len(), trace.spans.len());
}

#[test]
fn nsys_graph_kernels_map_to_the_ranges_around_their_captured_launches() {
    check_mapping(true);
}

#[test]
fn the_mapping_needs_no_kept_args() {
    check_mapping(false);
}

#[test]
fn without_node_events_the_node_order_pairs_a_replay_with_a_capture_of_as_many_launches() {
    let f = fixture(false);
    let raw = import(&f.path, true);
    let t0 = origin(&raw, f.graph_launches[0]);
    let notes = &raw.ranks[0].notes;
    let count = |key: &str| notes.counts.get(key).copied().unwrap_or(0);
    assert_eq!(count("graph_ops_linked_by_node_order"), 3);
    assert_eq!(count("graph_ops_without_capture_link"), 4);
    let (trace, coverage) = attribute_graph_nodes(raw);
    let coverage = coverage.unwrap();
    assert_eq!(
        (coverage.graph_kernels, coverage.graph_kernels_mapped),
        (7, 3)
    );
    assert_eq!(coverage.mapped_by_node_order, 3);
    assert_eq!(coverage.launches[1].method, METHOD_NODE_ORDER);
    assert_eq!(
        (coverage.launches[1].mapped, coverage.launches[0].mapped),
        (3, 0)
    );
    assert_eq!(
        chain_of(&trace, t0, 110_000)[..2],
        ["cudaLaunchKernel", "layer_a"]
    );
    assert_eq!(
        chain_of(&trace, t0, 120_000)[..2],
        ["cudaLaunchKernel", "layer_b"]
    );
    assert_eq!(chain_of(&trace, t0, 50_000), ["cudaGraphLaunch", "serve"]);
}
