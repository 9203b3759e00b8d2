//! `strato memory --json` on an Nsight Systems export with CUDA memory events: the importer's
//! `[memory]` instants and "memory allocated" counters feed the memory analysis unchanged.

use std::path::Path;

use crate::common::strato_command;

use rusqlite::Connection;

const GPID: i64 = 16_777_216 * 42;

/// Session start (UTC ns): timestamps in the report are file time + this.
const T0: i64 = 1_700_000_000_000_000_000;

/// Allocations and frees of pid 42 on devices 0 and 1. Bytes in use by construction:
/// device 0: 1000 @100, 4000 @200 (peak), 3000 @350 (free of 0x1000, size from its alloc),
/// 3500 @450; device 1: 4000 @150, 6000 @300 (peak), 2000 @400, 0 @500.
fn build(path: &Path) {
    let conn = Connection::open(path).expect("create");
    conn.execute_batch(&format!(
        "
        CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER);
        INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES ({T0});
        CREATE TABLE TARGET_INFO_GPU (id INTEGER, name TEXT, totalMemory INTEGER);
        INSERT INTO TARGET_INFO_GPU VALUES (0, 'GPU A', 80000), (1, 'GPU B', 40000);
        CREATE TABLE ENUM_CUDA_DEV_MEM_EVENT_OPER (id INTEGER, name TEXT, label TEXT);
        INSERT INTO ENUM_CUDA_DEV_MEM_EVENT_OPER VALUES
            (0, 'CUDA_DEV_MEM_EVENT_OPR_ALLOCATION', 'Allocation'),
            (1, 'CUDA_DEV_MEM_EVENT_OPR_DEALLOCATION', 'Deallocation');
        CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (start INTEGER NOT NULL,
            globalPid INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL,
            address INTEGER NOT NULL, pc INTEGER NOT NULL, bytes INTEGER NOT NULL,
            memKind INTEGER NOT NULL, memoryOperationType INTEGER NOT NULL, name TEXT,
            correlationId INTEGER);
        INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS VALUES
            (100, {GPID}, 0, 1, 4096, 0, 1000, 2, 0, NULL, NULL),
            (150, {GPID}, 1, 2, 36864, 0, 4000, 2, 0, NULL, NULL),
            (200, {GPID}, 0, 1, 8192, 0, 3000, 2, 0, NULL, NULL),
            (300, {GPID}, 1, 2, 40960, 0, 2000, 2, 0, NULL, NULL),
            (350, {GPID}, 0, 1, 4096, 0, 0, 2, 1, NULL, NULL),
            (400, {GPID}, 1, 2, 36864, 0, 4000, 2, 1, NULL, NULL),
            (450, {GPID}, 0, 1, 12288, 0, 500, 2, 0, NULL, NULL),
            (500, {GPID}, 1, 2, 40960, 0, 2000, 2, 1, NULL, NULL);
        ",
    ))
    .expect("fill");
}

#[test]
fn memory_json_on_nsys_cuda_memory_events_gives_peak_and_when() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("mem.sqlite");
    build(&path);
    let out = strato_command()
        .args(["memory", &path.to_string_lossy(), "--json"])
        .output()
        .expect("run strato");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let devices = v["devices"].as_array().expect("devices");
    assert_eq!(devices.len(), 2, "{v}");
    let device = |d: i64| {
        devices
            .iter()
            .find(|x| x["device"] == d)
            .unwrap_or_else(|| panic!("device {d}: {v}"))
    };
    for (d, peak, peak_ns, last, capacity, allocated, freed) in [
        (0, 4000.0, 200, 3500.0, 80000, 4500, 1000),
        (1, 6000.0, 300, 0.0, 40000, 6000, 6000),
    ] {
        let m = device(d);
        assert_eq!(m["pid"], 42);
        assert_eq!(m["samples"], 4);
        assert_eq!(m["peak_bytes"].as_f64(), Some(peak), "device {d}");
        assert_eq!(m["peak_ns"].as_i64(), Some(T0 + peak_ns), "device {d}");
        assert_eq!(m["final_bytes"].as_f64(), Some(last), "device {d}");
        assert_eq!(m["capacity_bytes"], capacity);
        // Per-op attribution from the [memory] instants' Bytes (no framework ops here).
        let ops = m["ops"].as_array().expect("ops");
        assert_eq!(ops.len(), 1);
        assert_eq!(ops[0]["op"], "(no operation)");
        assert_eq!(ops[0]["allocated_bytes"], allocated);
        assert_eq!(ops[0]["freed_bytes"], freed);
        // Conservation: net allocated = final - 0 (nothing in use before the first event).
        assert_eq!((allocated - freed) as f64, last);
    }
    assert_eq!(device(0)["ops"][0]["allocations"], 3);
    assert_eq!(device(0)["ops"][0]["frees"], 1);
    assert_eq!(device(0)["ops"][0]["max_bytes"], 3000);
    assert!(
        v["notes"]
            .as_array()
            .expect("notes")
            .iter()
            .all(|n| !n.as_str().unwrap_or("").contains("no allocation events")),
        "{v}"
    );
}
