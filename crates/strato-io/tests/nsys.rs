//! Nsight Systems SQLite importer: the real export in `shared/data/nsys` and small databases
//! built here. Expected figures come from `sqlite3` queries on the file, not from the importer.

// Tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use rusqlite::Connection;
use strato_io::{nsys, ErrorKind, ImportOptions};
use strato_trace::{ClockDomain, Level, LevelMap, LevelRule, Trace, TrackKind};

fn real_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/nsys/pipit_cloverleaf_cuda.sqlite")
}

fn spans_of<'t>(trace: &'t Trace, category: &str) -> Vec<&'t strato_trace::Span> {
    trace
        .spans
        .iter()
        .filter(|s| trace.str(s.category) == category)
        .collect()
}

/// `TARGET_INFO_SESSION_START_TIME.utcEpochNs` of the real file.
const SESSION_START_UTC_NS: i64 = 1_696_392_839_587_175_550;

#[test]
fn nsys_real_file_counts_levels_and_links() {
    let path = real_file();
    let trace = strato_io::import_file(&path, &ImportOptions::default()).unwrap();
    trace.validate().unwrap();

    let kernels = spans_of(&trace, "CUPTI_ACTIVITY_KIND_KERNEL");
    let memcpys = spans_of(&trace, "CUPTI_ACTIVITY_KIND_MEMCPY");
    let runtime = spans_of(&trace, "CUPTI_ACTIVITY_KIND_RUNTIME");
    let osrt = spans_of(&trace, "OSRT_API");
    let syncs = spans_of(&trace, "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION");
    let overhead = spans_of(&trace, "PROFILER_OVERHEAD");
    assert_eq!(kernels.len(), 1312);
    assert_eq!(memcpys.len(), 279);
    assert_eq!(runtime.len(), 3048);
    assert_eq!(osrt.len(), 1831);
    assert_eq!(syncs.len(), 1312);
    assert_eq!(overhead.len(), 47);
    assert_eq!(spans_of(&trace, "CUPTI_ACTIVITY_KIND_MEMSET").len(), 0);
    assert_eq!(spans_of(&trace, "NVTX_EVENTS").len(), 0);
    // SCHED_EVENTS: 627 sched-ins each followed by a sched-out (running) and 619 sched-outs
    // followed by a sched-in (off CPU); see tests/nsys_sched.rs.
    let states = spans_of(&trace, nsys::THREAD_STATE_CATEGORY);
    assert_eq!(states.len(), 627 + 619);
    assert_eq!(
        trace.spans.len(),
        1312 + 279 + 3048 + 1831 + 1312 + 47 + 627 + 619
    );
    // One instant per CPU sample (COMPOSITE_EVENTS rows).
    assert_eq!(trace.instants.len(), 1531);

    assert!(kernels.iter().all(|s| s.level == Level::DeviceKernel));
    assert!(memcpys.iter().all(|s| s.level == Level::DeviceCopy));
    assert!(runtime.iter().all(|s| s.level == Level::AcceleratorApi));
    assert!(syncs.iter().all(|s| s.level == Level::AcceleratorApi));
    assert!(osrt.iter().all(|s| s.level == Level::Os));
    assert!(overhead.iter().all(|s| s.level == Level::Overhead));
    assert!(trace.instants.iter().all(|i| i.level == Level::Os));

    // Names: demangled kernels, runtime calls without the ABI suffix, memcpy directions.
    let count = |name: &str, spans: &[&strato_trace::Span]| {
        spans.iter().filter(|s| trace.str(s.name) == name).count()
    };
    assert_eq!(count("cudaLaunchKernel", &runtime), 1312);
    assert_eq!(count("cudaDeviceSynchronize", &runtime), 1312);
    assert_eq!(count("cudaMemcpy", &runtime), 279);
    assert_eq!(count("Memcpy HtoD", &memcpys), 254);
    assert_eq!(count("Memcpy DtoH", &memcpys), 25);
    assert_eq!(count("ioctl", &osrt), 1253);
    assert_eq!(count("Event sync", &syncs), 1312);
    let first = kernels.iter().min_by_key(|s| s.start).unwrap();
    assert_eq!(
        trace.str(first.name),
        "void clover::par_ranged2d_kernel<build_field(global_variables &)::\
         [lambda(int, int) (instance 1)]>(clover::Range2d, T1)"
    );
    assert_eq!(first.start, 533_338_240 + SESSION_START_UTC_NS);
    assert_eq!(first.end, 534_705_884 + SESSION_START_UTC_NS);
    assert_eq!(first.correlation, Some(452));
    let args: serde_json::Value =
        serde_json::from_str(&trace.args_text(first.args).unwrap()).unwrap();
    assert_eq!(args["grid"], serde_json::json!([115426, 1, 1]));
    assert_eq!(args["block"], serde_json::json!([256, 1, 1]));
    assert_eq!(args["registersPerThread"], 32);
    assert_eq!(args["shortName"], "par_ranged2d_kernel");
    assert!(args["mangledName"]
        .as_str()
        .unwrap()
        .starts_with("_ZN6clover"));

    // Every kernel and memcpy has a runtime call with its correlation id (sqlite: 1312, 279),
    // and a flow from that call.
    let runtime_corr: std::collections::HashSet<u64> =
        runtime.iter().filter_map(|s| s.correlation.get()).collect();
    assert_eq!(runtime_corr.len(), 3048);
    let linked = |spans: &[&strato_trace::Span]| {
        spans
            .iter()
            .filter(|s| {
                s.correlation
                    .get()
                    .is_some_and(|c| runtime_corr.contains(&c))
            })
            .count()
    };
    assert_eq!(linked(&kernels), 1312);
    assert_eq!(linked(&memcpys), 279);
    assert_eq!(trace.flows.len(), 1312 + 279);
    for flow in &trace.flows {
        assert_eq!(trace.str(flow.category), "ac2g");
        let from = &trace.spans[flow.from.as_ref().unwrap().span.unwrap().0 as usize];
        let to = &trace.spans[flow.to.as_ref().unwrap().span.unwrap().0 as usize];
        assert_eq!(from.level, Level::AcceleratorApi);
        assert!(to.level.is_device_op());
        assert_eq!(from.correlation, to.correlation);
        assert_eq!(Some(flow.id), to.correlation.get());
    }

    // Tracks: one stream (device 0, stream 7), 7 threads of pid 1701896, named from
    // ThreadNames where it names them.
    let queues: Vec<_> = trace.tracks.iter().filter(|t| t.is_device()).collect();
    assert_eq!(queues.len(), 1);
    assert_eq!(
        queues[0].kind,
        TrackKind::DeviceQueue {
            device: 0,
            queue: 7
        }
    );
    let threads: Vec<_> = trace
        .tracks
        .iter()
        .filter(|t| matches!(t.kind, TrackKind::Thread { .. }))
        .collect();
    // 7 threads with calls or samples, 2 more that only switch in and out (SCHED_EVENTS).
    assert_eq!(threads.len(), 9);
    assert!(threads.iter().all(|t| t.pid() == Some(1701896)));
    let main = threads
        .iter()
        .find(|t| {
            t.kind
                == TrackKind::Thread {
                    pid: 1701896,
                    tid: 1701896,
                }
        })
        .unwrap();
    assert_eq!(main.name.as_deref(), Some("cuda-cloverleaf"));
    // Syncs sit on the thread of their cudaDeviceSynchronize call.
    let main_id = trace
        .tracks
        .iter()
        .position(|t| std::ptr::eq(t, *main))
        .unwrap();
    assert!(syncs.iter().all(|s| s.track.0 as usize == main_id));

    // Processes: only the profiled one (PROCESSES lists 1770 processes of the node).
    assert_eq!(trace.processes.len(), 1);
    assert_eq!(trace.processes[0].pid, 1701896);
    assert_eq!(trace.processes[0].name.as_deref(), Some("cuda-cloverleaf"));

    // Devices: 4 A100s from TARGET_INFO_GPU.
    assert_eq!(trace.devices.len(), 4);
    let mut indexes: Vec<i64> = trace.devices.iter().map(|d| d.index).collect();
    indexes.sort();
    assert_eq!(indexes, [0, 1, 2, 3]);
    for d in &trace.devices {
        assert_eq!(d.name.as_deref(), Some("NVIDIA A100-SXM4-80GB"));
        assert_eq!(d.sm_count, Some(108));
        assert_eq!(d.clock_rate_khz, Some(1_410_000));
        assert_eq!(d.memory_bandwidth_bytes_per_s, Some(2_039_040_000_000.0));
        assert_eq!(d.total_memory_bytes, Some(84_990_623_744));
        assert_eq!((d.compute_major, d.compute_minor), (Some(8), Some(0)));
        assert!(d.extra.to_json().contains("\"chipName\":\"GA100\""));
    }

    // Rank, metadata, clock.
    assert_eq!(trace.ranks.len(), 1);
    let rank = &trace.ranks[0];
    assert_eq!(rank.format.as_str(), "nsys");
    assert_eq!(rank.source, path.display().to_string());
    assert_eq!(rank.host.as_deref(), Some("nid008553"));
    let meta: serde_json::Value = serde_json::from_str(&rank.metadata.to_json().unwrap()).unwrap();
    assert_eq!(meta.as_object().unwrap().len(), 29);
    assert_eq!(meta["EXPORT_SCHEMA_VERSION"], "3.13.2");
    assert_eq!(meta["EXPORT_PRODUCT_VERSION"], "2024.5.1.113");
    assert_eq!(trace.clock.reference, ClockDomain::Realtime);
    assert_eq!(trace.clock.sources.len(), 1);
    assert_eq!(trace.clock.sources[0].offset_ns, SESSION_START_UTC_NS);

    // CPU samples: the raw stack in args (sample 1 has 7 frames).
    let sample = trace.instants.iter().min_by_key(|i| i.ts).unwrap();
    assert_eq!(sample.ts, 18_318_190 + SESSION_START_UTC_NS);
    // Named by its whole chain folded outermost first (tests/nsys_samples.rs checks them all).
    let name = trace.str(sample.name);
    assert_eq!(name.split(';').count(), 7);
    assert!(name.ends_with(";do_lookup_x [ld-2.31.so]"), "{name}");
    let args: serde_json::Value =
        serde_json::from_str(&trace.args_text(sample.args).unwrap()).unwrap();
    assert_eq!(args["stack"].as_array().unwrap().len(), 7);
    assert_eq!(args["cpu"], 39);
}

#[test]
fn nsys_real_file_without_args() {
    let options = ImportOptions {
        keep_args: false,
        ..ImportOptions::default()
    };
    let trace = nsys::import(&real_file(), &options).unwrap();
    trace.validate().unwrap();
    assert!(trace.args.is_empty());
    assert!(trace.spans.iter().all(|s| s.args.is_none()));
    assert!(trace.instants.iter().all(|i| i.args.is_none()));
    assert_eq!(spans_of(&trace, "CUPTI_ACTIVITY_KIND_KERNEL").len(), 1312);
    assert_eq!(trace.instants.len(), 1531);
    assert_eq!(trace.flows.len(), 1312 + 279);
}

#[test]
fn nsys_level_map_overrides_apply() {
    let options = ImportOptions {
        level_map: LevelMap::with_overrides(vec![LevelRule {
            format: "nsys".into(),
            category: "OSRT_API".into(),
            level: Level::Library,
        }])
        .unwrap(),
        ..ImportOptions::default()
    };
    let trace = nsys::import(&real_file(), &options).unwrap();
    let osrt = spans_of(&trace, "OSRT_API");
    assert_eq!(osrt.len(), 1831);
    assert!(osrt.iter().all(|s| s.level == Level::Library));
}

#[test]
fn nsys_sqlite_without_nsys_tables_is_not_a_trace() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.sqlite");
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(
        "CREATE TABLE users (id INTEGER, name TEXT); INSERT INTO users VALUES (1, 'a');",
    )
    .unwrap();
    drop(conn);
    let err = nsys::import(&path, &ImportOptions::default()).unwrap_err();
    assert!(
        matches!(&err.kind, ErrorKind::NotATrace(m) if m.starts_with("SQLite database has none of the Nsight Systems tables (")),
        "{err}"
    );
    assert!(err.to_string().contains("other.sqlite"));
}

#[test]
fn nsys_truncated_or_corrupt_sqlite_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let data = std::fs::read(real_file()).unwrap();
    for (name, bytes) in [
        ("half.sqlite", data[..data.len() / 2].to_vec()),
        ("page.sqlite", data[..4096].to_vec()),
        ("garbage.sqlite", {
            let mut b = b"SQLite format 3\0".to_vec();
            b.extend(std::iter::repeat_n(0xA5u8, 8192));
            b
        }),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, &bytes).unwrap();
        let err = nsys::import(&path, &ImportOptions::default()).unwrap_err();
        assert!(matches!(err.kind, ErrorKind::Sqlite(_)), "{name}: {err}");
        assert!(err.to_string().contains(name), "{err}");
        // Through the entry point too (format sniffing says SQLite).
        let err = strato_io::import_file(&path, &ImportOptions::default()).unwrap_err();
        assert!(matches!(err.kind, ErrorKind::Sqlite(_)), "{name}: {err}");
    }
}

/// A 2023-style export: `EXPORT_META_DATA`, no session start, no GPUs, no OS runtime, no
/// samples, and tables missing optional columns.
fn build_minimal(path: &Path) {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(
        "
        CREATE TABLE EXPORT_META_DATA (name TEXT, value TEXT);
        INSERT INTO EXPORT_META_DATA VALUES ('EXPORT_SCHEMA_VERSION', '3.0.0');
        INSERT INTO EXPORT_META_DATA VALUES ('EXPORT_PRODUCT_VERSION', '2023.1.1');
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO StringIds VALUES (1, 'cudaLaunchKernel_v7000'), (2, 'gemm'),
            (3, 'void gemm<float>(float*)'), (4, 'cudaMemcpyAsync_v3020'), (5, 'main'),
            (6, 'train step'), (7, 'my domain');
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER, end INTEGER,
            globalTid INTEGER, correlationId INTEGER, nameId INTEGER);
        INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES
            (100, 110, 16777216 * 42 + 43, 1, 1),
            (120, 130, 16777216 * 42 + 43, 2, 4),
            (140, 150, 16777216 * 42 + 43, 3, 1);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, deviceId INTEGER,
            streamId INTEGER, correlationId INTEGER, globalPid INTEGER, shortName INTEGER,
            demangledName INTEGER, gridX INTEGER);
        INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES
            (200, 300, 0, 7, 1, 16777216 * 42, 2, 3, 64),
            (310, 320, 0, 7, 99, 16777216 * 42, 2, NULL, NULL),
            (400, 390, 0, 7, 3, 16777216 * 42, 2, 3, 1);
        CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER, end INTEGER, deviceId INTEGER,
            streamId INTEGER, correlationId INTEGER, globalPid INTEGER, bytes INTEGER,
            copyKind INTEGER);
        INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (150, 160, 1, 9, 2, 16777216 * 42, 4096, 2);
        CREATE TABLE ThreadNames (nameId INTEGER, priority INTEGER, globalTid INTEGER);
        INSERT INTO ThreadNames VALUES (5, 10, 16777216 * 42 + 43);
        CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER,
            text TEXT, globalTid INTEGER, textId INTEGER, domainId INTEGER);
        INSERT INTO NVTX_EVENTS VALUES
            (-1, NULL, 75, 'my domain', 16777216 * 42 + 43, NULL, 5),
            (90, 500, 59, NULL, 16777216 * 42 + 43, 6, 5),
            (95, 98, 60, 'load', 16777216 * 42 + 44, NULL, 0),
            (97, NULL, 34, 'checkpoint', 16777216 * 42 + 43, NULL, 0),
            (99, NULL, 59, 'never closed', 16777216 * 42 + 43, NULL, 0),
            (99, NULL, 33, 'category row', 16777216 * 42 + 43, NULL, 0);
        ",
    )
    .unwrap();
}

#[test]
fn nsys_minimal_2023_export_imports_what_exists() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mini.sqlite");
    build_minimal(&path);
    let before = std::fs::read(&path).unwrap();
    let trace = strato_io::import_file(&path, &ImportOptions::default()).unwrap();
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "the file was modified"
    );
    trace.validate().unwrap();

    // Metadata from the <=2023 table name; no session start -> unknown clock, times as is.
    let meta: serde_json::Value =
        serde_json::from_str(&trace.ranks[0].metadata.to_json().unwrap()).unwrap();
    assert_eq!(meta["EXPORT_SCHEMA_VERSION"], "3.0.0");
    assert_eq!(trace.clock.reference, ClockDomain::Unknown);
    assert_eq!(trace.ranks[0].host, None);
    assert!(trace.devices.is_empty());

    let runtime = spans_of(&trace, "CUPTI_ACTIVITY_KIND_RUNTIME");
    assert_eq!(runtime.len(), 3);
    assert_eq!(trace.str(runtime[0].name), "cudaLaunchKernel");
    assert_eq!(trace.str(runtime[1].name), "cudaMemcpyAsync");
    assert_eq!(runtime[0].start, 100);
    assert_eq!(
        trace.track(runtime[0].track).kind,
        TrackKind::Thread { pid: 42, tid: 43 }
    );
    assert_eq!(trace.track(runtime[0].track).name.as_deref(), Some("main"));

    // The kernel with end < start is skipped; the one without a demangled name uses shortName.
    let kernels = spans_of(&trace, "CUPTI_ACTIVITY_KIND_KERNEL");
    assert_eq!(kernels.len(), 2);
    assert_eq!(trace.str(kernels[0].name), "void gemm<float>(float*)");
    assert_eq!(trace.str(kernels[1].name), "gemm");
    assert_eq!(
        trace.args_text(kernels[0].args).as_deref(),
        Some("{\"grid\":[64,null,null],\"shortName\":\"gemm\"}")
    );
    let memcpys = spans_of(&trace, "CUPTI_ACTIVITY_KIND_MEMCPY");
    assert_eq!(memcpys.len(), 1);
    // No ENUM_CUDA_MEMCPY_OPER table: the built-in CUPTI numbering names it.
    assert_eq!(trace.str(memcpys[0].name), "Memcpy DtoH");
    assert_eq!(
        trace.track(memcpys[0].track).kind,
        TrackKind::DeviceQueue {
            device: 1,
            queue: 9
        }
    );

    // Flows: kernel corr 1 and memcpy corr 2 have launches; kernel corr 99 has none.
    assert_eq!(trace.flows.len(), 2);
    let mut ids: Vec<u64> = trace.flows.iter().map(|f| f.id).collect();
    ids.sort();
    assert_eq!(ids, [1, 2]);

    // NVTX: push/pop with textId, start/end with inline text; the domain-create row, the
    // unclosed range and the category row are skipped; the mark is an instant.
    let nvtx = spans_of(&trace, "NVTX_EVENTS");
    assert_eq!(nvtx.len(), 2);
    assert!(nvtx.iter().all(|s| s.level == Level::Operation));
    assert_eq!(trace.str(nvtx[0].name), "train step");
    assert_eq!((nvtx[0].start, nvtx[0].end), (90, 500));
    let args: serde_json::Value =
        serde_json::from_str(&trace.args_text(nvtx[0].args).unwrap()).unwrap();
    assert_eq!(args["domain"], "my domain");
    assert_eq!(trace.str(nvtx[1].name), "load");
    assert_eq!(
        trace.track(nvtx[1].track).kind,
        TrackKind::Thread { pid: 42, tid: 44 }
    );
    assert_eq!(trace.instants.len(), 1);
    assert_eq!(trace.str(trace.instants[0].name), "checkpoint");
    assert_eq!(trace.instants[0].ts, 97);
    assert_eq!(trace.instants[0].level, Level::Operation);

    assert_eq!(trace.processes.len(), 1);
    assert_eq!(trace.processes[0].pid, 42);
    assert_eq!(trace.processes[0].name, None);
}

#[test]
fn nsys_metadata_only_export_is_an_empty_trace() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("meta.sqlite");
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(
        "CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT);
         INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '3.13.2');
         CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT,
             localTime TEXT);
         INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1000, '', '');",
    )
    .unwrap();
    drop(conn);
    let trace = nsys::import(&path, &ImportOptions::default()).unwrap();
    trace.validate().unwrap();
    assert!(trace.spans.is_empty() && trace.tracks.is_empty());
    assert_eq!(trace.ranks.len(), 1);
    assert_eq!(trace.clock.reference, ClockDomain::Realtime);
    assert_eq!(trace.clock.sources[0].offset_ns, 1000);
}

#[test]
fn nsys_real_file_has_no_memory_table() {
    // The sample export has no CUDA_GPU_MEMORY_USAGE_EVENTS: nothing memory-related appears and
    // the rest is as above (1531 instants are the CPU samples).
    let trace = nsys::import(&real_file(), &ImportOptions::default()).unwrap();
    assert!(trace.counters.is_empty());
    assert!(!trace
        .tracks
        .iter()
        .any(|t| matches!(t.kind, TrackKind::Counter { .. })));
    assert!(trace
        .instants
        .iter()
        .all(|i| trace.str(i.category) == "cpu_sample"));
    assert_eq!(trace.instants.len(), 1531);
}

const GPID: i64 = 16_777_216 * 42;

/// CUDA memory events of pid 42 on devices 0 and 1 (plus one pinned host buffer), with rows
/// out of time order, a free without a size, an unknown operation and a row without a process.
/// Bytes in use by construction:
///
/// | ts  | event                           | dev 0 | dev 1 | host (-1) |
/// |-----|---------------------------------|-------|-------|-----------|
/// | 100 | alloc 0x1000 1000 B on 0        | 1000  |       |           |
/// | 150 | alloc 0x9000 4000 B on 1        |       | 4000  |           |
/// | 200 | alloc 0x2000 3000 B on 0        | 4000* |       |           |
/// | 250 | alloc 0x5000 512 B pinned       |       |       | 512       |
/// | 300 | alloc 0xA000 2000 B on 1        |       | 6000* |           |
/// | 350 | free 0x1000 (bytes 0 -> 1000)   | 3000  |       |           |
/// | 400 | free 0x9000 4000 B              |       | 2000  |           |
/// | 450 | alloc 0x3000 500 B on 0         | 3500  |       |           |
/// | 500 | free 0xA000 2000 B              |       | 0     |           |
fn build_memory(path: &Path) {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(&format!(
        "
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO StringIds VALUES (1, 'cudaMalloc_v3020'), (2, 'cudaFree_v3020');
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER, end INTEGER,
            globalTid INTEGER, correlationId INTEGER, nameId INTEGER);
        INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES
            (90, 110, {GPID} + 43, 1, 1),
            (390, 410, {GPID} + 43, 7, 2);
        CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER PRIMARY KEY, name TEXT, label TEXT);
        INSERT INTO ENUM_CUDA_MEM_KIND VALUES
            (1, 'CUDA_MEMOPR_MEMORY_KIND_PINNED', 'Pinned'),
            (2, 'CUDA_MEMOPR_MEMORY_KIND_DEVICE', 'Device');
        CREATE TABLE ENUM_CUDA_DEV_MEM_EVENT_OPER (id INTEGER PRIMARY KEY, name TEXT,
            label TEXT);
        INSERT INTO ENUM_CUDA_DEV_MEM_EVENT_OPER VALUES
            (0, 'CUDA_DEV_MEM_EVENT_OPR_ALLOCATION', 'Allocation'),
            (1, 'CUDA_DEV_MEM_EVENT_OPR_DEALLOCATION', 'Deallocation');
        CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (start INTEGER NOT NULL,
            globalPid INTEGER, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL,
            address INTEGER NOT NULL, pc INTEGER NOT NULL, bytes INTEGER NOT NULL,
            memKind INTEGER NOT NULL, memoryOperationType INTEGER NOT NULL, name TEXT,
            correlationId INTEGER, localMemoryPoolAddress INTEGER,
            localMemoryPoolReleaseThreshold INTEGER, localMemoryPoolSize INTEGER,
            localMemoryPoolUtilizedSize INTEGER, importedMemoryPoolAddress INTEGER,
            importedMemoryPoolProcessId INTEGER);
        INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS
            (start, globalPid, deviceId, contextId, address, pc, bytes, memKind,
             memoryOperationType, name, correlationId) VALUES
            (100, {GPID}, 0, 1, 4096, 77, 1000, 2, 0, 'weights', 1),
            (150, {GPID}, 1, 2, 36864, 0, 4000, 2, 0, NULL, NULL),
            (450, {GPID}, 0, 1, 12288, 0, 500, 2, 0, NULL, NULL),
            (200, {GPID}, 0, 1, 8192, 0, 3000, 2, 0, NULL, NULL),
            (250, {GPID}, 0, 1, 20480, 0, 512, 1, 0, NULL, NULL),
            (300, {GPID}, 1, 2, 40960, 0, 2000, 2, 0, NULL, NULL),
            (350, {GPID}, 0, 1, 4096, 0, 0, 2, 1, NULL, NULL),
            (400, {GPID}, 1, 2, 36864, 0, 4000, 2, 1, NULL, 7),
            (500, {GPID}, 1, 2, 40960, 0, 2000, 2, 1, NULL, NULL),
            (420, {GPID}, 0, 1, 999, 0, 64, 2, 5, NULL, NULL),
            (430, NULL, 0, 1, 998, 0, 64, 2, 0, NULL, NULL);
        ",
    ))
    .unwrap();
}

/// `(ts, bytes)` of the "memory allocated" counter of (pid, device).
fn memory_series(trace: &Trace, pid: i64, device: i64) -> Vec<(i64, f64)> {
    let track = trace
        .tracks
        .iter()
        .position(|t| {
            t.kind
                == TrackKind::Counter {
                    pid: Some(pid),
                    device: Some(device),
                    name: "memory allocated".into(),
                    unit: "bytes".into(),
                }
        })
        .unwrap_or_else(|| panic!("no memory counter for ({pid}, {device})"));
    trace
        .counters
        .iter()
        .filter(|c| c.track.0 as usize == track)
        .map(|c| (c.ts, c.value))
        .collect()
}

#[test]
fn nsys_cuda_memory_events_become_kineto_style_memory_events_and_counters() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.sqlite");
    build_memory(&path);
    let trace = nsys::import(&path, &ImportOptions::default()).unwrap();
    trace.validate().unwrap();

    assert_eq!(
        memory_series(&trace, 42, 0),
        [(100, 1000.0), (200, 4000.0), (350, 3000.0), (450, 3500.0)]
    );
    assert_eq!(
        memory_series(&trace, 42, 1),
        [(150, 4000.0), (300, 6000.0), (400, 2000.0), (500, 0.0)]
    );
    assert_eq!(memory_series(&trace, 42, -1), [(250, 512.0)]);
    assert_eq!(trace.counters.len(), 9);

    // One [memory] instant per known event; the unknown operation and the row without a
    // process are skipped.
    let mem: Vec<_> = trace
        .instants
        .iter()
        .filter(|i| trace.str(i.name) == "[memory]")
        .collect();
    assert_eq!(mem.len(), 9);
    assert_eq!(trace.instants.len(), 9);
    assert!(mem
        .iter()
        .all(|i| trace.str(i.category) == "CUDA_GPU_MEMORY_USAGE_EVENTS"
            && i.level == Level::AcceleratorApi));
    let ts: Vec<i64> = mem.iter().map(|i| i.ts).collect();
    assert_eq!(ts, [100, 150, 200, 250, 300, 350, 400, 450, 500]);
    // Correlated events sit on their runtime call's thread, the others on the main thread.
    let thread = |i: &strato_trace::Instant| trace.track(i.track).kind.clone();
    assert_eq!(thread(mem[0]), TrackKind::Thread { pid: 42, tid: 43 });
    assert_eq!(thread(mem[6]), TrackKind::Thread { pid: 42, tid: 43 });
    assert_eq!(thread(mem[1]), TrackKind::Thread { pid: 42, tid: 42 });

    let args = |i: usize| -> serde_json::Value {
        serde_json::from_str(&trace.args_text(mem[i].args).unwrap()).unwrap()
    };
    let first = args(0);
    assert_eq!(first["Bytes"], 1000);
    assert_eq!(first["Addr"], 4096);
    assert_eq!(first["Device Id"], 0);
    assert_eq!(first["Total Allocated"], 1000);
    assert_eq!(first["memoryOperationType"], "Allocation");
    assert_eq!(first["memKind"], "Device");
    assert_eq!(first["name"], "weights");
    assert_eq!(first["correlationId"], 1);
    assert_eq!(first["pc"], 77);
    // The pinned buffer counts as host memory (device -1, as in Kineto).
    let pinned = args(3);
    assert_eq!(pinned["Device Id"], -1);
    assert_eq!(pinned["deviceId"], 0);
    assert_eq!(pinned["memKind"], "Pinned");
    // The free without a size takes its allocation's.
    let free = args(5);
    assert_eq!(free["Bytes"], -1000);
    assert_eq!(free["Addr"], 4096);
    assert_eq!(free["Total Allocated"], 3000);
    assert_eq!(free["memoryOperationType"], "Deallocation");

    // The process is known through its memory events and runtime calls.
    assert_eq!(trace.processes.len(), 1);
    assert_eq!(trace.processes[0].pid, 42);

    // Without attributes: the same counters, instants without args.
    let options = ImportOptions {
        keep_args: false,
        ..ImportOptions::default()
    };
    let bare = nsys::import(&path, &options).unwrap();
    bare.validate().unwrap();
    assert_eq!(bare.counters, trace.counters);
    assert_eq!(bare.instants.len(), 9);
    assert!(bare.instants.iter().all(|i| i.args.is_none()));
}

#[test]
fn nsys_memory_table_without_optional_columns_or_enums() {
    // An older / trimmed export: no enums, no address, no correlation. Builtin numbering
    // (0 alloc, 1 free) and the row sizes still give the running total.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory-min.sqlite");
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(&format!(
        "CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (start INTEGER, globalPid INTEGER,
             deviceId INTEGER, bytes INTEGER, memoryOperationType INTEGER);
         INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS VALUES
             (10, {GPID}, 3, 100, 0), (20, {GPID}, 3, 50, 0), (30, {GPID}, 3, 100, 1),
             (40, {GPID}, 3, NULL, 1);"
    ))
    .unwrap();
    drop(conn);
    let trace = nsys::import(&path, &ImportOptions::default()).unwrap();
    trace.validate().unwrap();
    // The last free has neither a size nor an address: it changes nothing.
    assert_eq!(
        memory_series(&trace, 42, 3),
        [(10, 100.0), (20, 150.0), (30, 50.0), (40, 50.0)]
    );
    let last: serde_json::Value =
        serde_json::from_str(&trace.args_text(trace.instants[3].args).unwrap()).unwrap();
    assert!(last.get("Bytes").is_none());
    assert_eq!(last["memoryOperationType"], 1);
    assert_eq!(
        trace.track(trace.instants[0].track).kind,
        TrackKind::Thread { pid: 42, tid: 42 }
    );
}
