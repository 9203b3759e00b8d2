//! nsys graph kernels: kernels replayed by `cudaGraphLaunch` carry the launch's correlation id
//! and, in recent schemas, `graphNodeId` / `graphId` columns on `CUPTI_ACTIVITY_KIND_KERNEL`.
//! The fixture is the real CloverLeaf export (its schema has `graphNodeId`; `graphId` is added
//! as newer nsys versions name it) with one `cudaGraphLaunch` runtime call and three graph
//! kernels inserted on a real thread and stream, so the expected counts are known by
//! construction. The export has no capture of that graph (no node events, no stream capture):
//! they count as graph kernels, none as mapped (the mapping itself: `nsys_graph_nodes.rs`).

#![allow(clippy::unwrap_used)] // test helpers panic on broken fixtures by design

mod common;
use common::data;
use common::nsys::CloverLeafCopy;

use strato_analysis::analyzed::Analyzed;
use strato_analysis::cross_stack::hierarchy::report;
use strato_io::{import_paths, ImportOptions};

#[test]
fn graph_kernels_of_an_nsys_export_are_counted_with_their_node_ids() {
    let dir = tempfile::tempdir().unwrap();
    let mut copy = CloverLeafCopy::new(dir.path(), "graph.sqlite");
    let has_graph_id: bool = copy
        .db
        .prepare(
            "SELECT 1 FROM pragma_table_info('CUPTI_ACTIVITY_KIND_KERNEL') WHERE name = 'graphId'",
        )
        .unwrap()
        .exists([])
        .unwrap();
    if !has_graph_id {
        copy.db
            .execute_batch("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL ADD COLUMN graphId INTEGER;")
            .unwrap();
    }
    // A real launch call and its kernel: the graph launch goes on the same thread right after
    // the last runtime call, its kernels on the same device and stream after the last kernel.
    let correlation = copy.free_correlation;
    let name_id = copy.string("cudaGraphLaunch_v10000");
    let t0 = copy.activity_end + 1_000;
    let CloverLeafCopy { path, db, tid, .. } = copy;
    db.execute(
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, correlationId, nameId, returnValue) \
         SELECT ?1, ?2, eventClass, ?3, ?4, ?5, 0 FROM CUPTI_ACTIVITY_KIND_RUNTIME LIMIT 1",
        [t0, t0 + 5_000, tid, correlation, name_id],
    )
    .unwrap();
    for node in 0..3i64 {
        let start = t0 + 10_000 + node * 20_000;
        db.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, \
             streamId, correlationId, globalPid, demangledName, shortName, registersPerThread, \
             gridX, gridY, gridZ, blockX, blockY, blockZ, staticSharedMemory, \
             dynamicSharedMemory, localMemoryPerThread, localMemoryTotal, gridId, graphNodeId, \
             graphId) \
             SELECT ?1, ?2, deviceId, contextId, streamId, ?3, globalPid, demangledName, \
             shortName, registersPerThread, gridX, gridY, gridZ, blockX, blockY, blockZ, \
             staticSharedMemory, dynamicSharedMemory, localMemoryPerThread, localMemoryTotal, \
             gridId, ?4, 7 FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY end DESC LIMIT 1",
            [start, start + 15_000, correlation, 40 + node],
        )
        .unwrap();
    }
    drop(db);

    let options = ImportOptions {
        keep_args: true,
        ..ImportOptions::default()
    };
    let plain = import_paths(&[data("nsys/pipit_cloverleaf_cuda.sqlite")], &options).unwrap();
    let trace = import_paths(&[path], &options).unwrap();
    let before = report(&Analyzed::new(&plain));
    let after = report(&Analyzed::new(&trace));
    assert_eq!(before.total.graph_kernels, 0);
    assert_eq!(after.total.graph_kernels, 3);
    assert_eq!(after.total.graph_kernels_mapped, 0);
    assert_eq!(after.total.device_ops, before.total.device_ops + 3);
    // The node ids ride along as kernel args.
    let mut nodes: Vec<(i64, i64)> = trace
        .spans
        .iter()
        .filter(|s| s.correlation == Some(correlation as u64) && trace.track(s.track).is_device())
        .map(|s| {
            let v: serde_json::Value =
                serde_json::from_str(&trace.args_text(s.args).unwrap()).unwrap();
            (
                v["graphId"].as_i64().unwrap(),
                v["graphNodeId"].as_i64().unwrap(),
            )
        })
        .collect();
    nodes.sort_unstable();
    assert_eq!(nodes, vec![(7, 40), (7, 41), (7, 42)]);
}
