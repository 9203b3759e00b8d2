//! One nsys export whose process drives two GPUs: its collectives are matched across the two
//! devices as across two ranks (`collectives::split_multi_device_ranks`).
//!
//! No such export is in the shared data, so the input is built from the real CloverLeaf
//! export (one process, one GPU): a copy gets three all-reduce NCCL kernels on device 0
//! launched by the real thread, and three on a second device (deviceId 1, its own context)
//! launched by a second thread of the same process, with `cudaLaunchKernel` rows and
//! correlation ids. Device 1 arrives 5, 10 and 15 us after device 0 and both end together, so
//! the waits, the last rank and the imposed wait are known by construction.

#![allow(clippy::unwrap_used)] // test helpers panic on broken fixtures by design

mod common;
use common::data;
use common::nsys::CloverLeafCopy;

use strato_analysis::distributed::collectives::{
    collectives, split_multi_device_ranks, CollectiveKind,
};
use strato_io::{import_paths, ImportOptions};

const KERNEL: &str = "ncclKernel_AllReduce_RING_LL_Sum_float";

/// The CloverLeaf copy with the NCCL kernels inserted; returns its path (inside `dir`).
fn two_gpu_export(dir: &std::path::Path) -> std::path::PathBuf {
    let mut copy = CloverLeafCopy::new(dir, "two_gpus.sqlite");
    let kernel_name = copy.string(KERNEL);
    let launch_name = copy.string("cudaLaunchKernel_v7000");
    let t0 = copy.activity_end + 1_000_000;
    let mut correlation = copy.free_correlation;
    let CloverLeafCopy { path, db, tid, .. } = copy;
    for k in 0..3i64 {
        let start = t0 + k * 1_000_000;
        let end = start + 100_000;
        // Device 0 from the real thread, device 1 from a second thread of the process.
        for (device, context, thread, arrival) in [
            (0i64, 1i64, tid, start),
            (1, 2, tid + 1, start + 5_000 * (k + 1)),
        ] {
            let launch = arrival - 20_000;
            db.execute(
                "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, \
                 correlationId, nameId, returnValue) \
                 SELECT ?1, ?2, eventClass, ?3, ?4, ?5, 0 FROM CUPTI_ACTIVITY_KIND_RUNTIME LIMIT 1",
                [launch, launch + 4_000, thread, correlation, launch_name],
            )
            .unwrap();
            db.execute(
                "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, \
                 streamId, correlationId, globalPid, demangledName, shortName, \
                 registersPerThread, gridX, gridY, gridZ, blockX, blockY, blockZ, \
                 staticSharedMemory, dynamicSharedMemory, localMemoryPerThread, \
                 localMemoryTotal, gridId) \
                 SELECT ?1, ?2, ?3, ?4, 20, ?5, globalPid, ?6, ?6, registersPerThread, gridX, \
                 gridY, gridZ, blockX, blockY, blockZ, staticSharedMemory, dynamicSharedMemory, \
                 localMemoryPerThread, localMemoryTotal, gridId \
                 FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY end DESC LIMIT 1",
                [arrival, end, device, context, correlation, kernel_name],
            )
            .unwrap();
            correlation += 1;
        }
    }
    path
}

#[test]
fn collectives_of_one_process_on_two_gpus_are_matched_across_the_devices() {
    let dir = tempfile::tempdir().unwrap();
    let options = ImportOptions::default();
    let real = import_paths(&[data("nsys/pipit_cloverleaf_cuda.sqlite")], &options).unwrap();
    // The real export: one process, one GPU, no collective: nothing to split.
    assert!(split_multi_device_ranks(&real).is_none());

    let trace = import_paths(&[two_gpu_export(dir.path())], &options).unwrap();
    assert_eq!(trace.ranks.len(), 1);
    // As imported, the file is one rank: its six kernels cannot be matched with each other.
    let unsplit = collectives(&trace, &Default::default());
    assert!(unsplit.instances.iter().all(|i| i.members.len() == 1));

    let split = split_multi_device_ranks(&trace).unwrap();
    assert_eq!(split.ranks.len(), 2);
    assert!(split.ranks[0].source.ends_with("(device 0)"));
    assert!(split.ranks[1].source.ends_with("(device 1)"));
    assert_eq!(split.spans.len(), trace.spans.len());
    let report = collectives(&split, &Default::default());
    assert_eq!(report.instances.len(), 3, "{:?}", report.instances);
    for (k, inst) in report.instances.iter().enumerate() {
        assert_eq!(inst.kind, CollectiveKind::AllReduce);
        assert!(inst.complete, "instance {k}");
        assert_eq!(inst.members.len(), 2);
        // Each member on its own device and with its launch found (the second thread moved
        // with device 1).
        let mut devices: Vec<i64> = inst.members.iter().map(|m| m.device).collect();
        devices.sort_unstable();
        assert_eq!(devices, vec![0, 1]);
        assert!(inst.members.iter().all(|m| m.launch.is_some()));
        let late = 5_000 * (k as i64 + 1);
        let member = |d: i64| inst.members.iter().find(|m| m.device == d).unwrap();
        assert_eq!(member(0).wait_ns, Some(late), "instance {k}");
        assert_eq!(member(1).wait_ns, Some(0));
        assert_eq!(inst.last_rank, Some(member(1).rank));
        assert_eq!(inst.transfer_ns, Some(100_000 - late));
    }
    // One clock: nothing shifted.
    assert!(report.ranks.iter().all(|r| r.shift_ns == 0));
    let device1 = report.ranks.iter().find(|r| r.rank.0 == 1).unwrap();
    assert_eq!(device1.last_arrivals, 3);
    assert_eq!(device1.imposed_wait_ns, Some(5_000 + 10_000 + 15_000));
}
