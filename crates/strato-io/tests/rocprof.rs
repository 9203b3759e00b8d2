//! rocprofv3 JSON: the real `rocprof/tracelens_908_results.json.gz` (kernel dispatches on an
//! MI350X node, no HIP API or copies) and small files written here to the documented schema
//! (`source/docs/rocprofv3-schema.json` of ROCm/rocprofiler-sdk) with HIP API calls, markers and
//! memory copies, whose answer is known by construction.
//!
//! The real file's expected figures are computed in this file from the JSON itself through
//! `serde_json::Value` (no code shared with the importer's typed records).

#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use serde_json::{json, Value};
use strato_io::{import_file, ErrorKind, ImportOptions};
use strato_trace::{Level, SourceFormat, Trace, TrackKind};

fn real_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/rocprof/tracelens_908_results.json.gz")
}

fn read_json(path: &Path) -> Value {
    let file = std::fs::File::open(path).unwrap();
    let reader = std::io::BufReader::new(flate2::read::MultiGzDecoder::new(file));
    serde_json::from_reader(reader).unwrap()
}

fn device_spans(trace: &Trace, level: Level) -> Vec<&strato_trace::Span> {
    trace
        .spans
        .iter()
        .filter(|s| s.level == level && trace.track(s.track).is_device())
        .collect()
}

#[test]
fn real_file_kernel_count_equals_its_kernel_dispatch_records() {
    let path = real_file();
    if !path.exists() {
        eprintln!("skipped: {} is absent", path.display());
        return;
    }
    let json = read_json(&path);
    let processes = json["rocprofiler-sdk-tool"].as_array().unwrap();
    let dispatches: Vec<&Value> = processes
        .iter()
        .flat_map(|p| p["buffer_records"]["kernel_dispatch"].as_array().unwrap())
        .collect();
    let expected_busy: i64 = dispatches
        .iter()
        .map(|d| d["end_timestamp"].as_i64().unwrap() - d["start_timestamp"].as_i64().unwrap())
        .sum();
    let expected_queues: std::collections::BTreeSet<i64> = dispatches
        .iter()
        .map(|d| d["dispatch_info"]["queue_id"]["handle"].as_i64().unwrap())
        .collect();
    let gpu_agents: Vec<&Value> = processes
        .iter()
        .flat_map(|p| p["agents"].as_array().unwrap())
        .filter(|a| a["type"] == 2)
        .collect();

    let trace = import_file(&path, &ImportOptions::default()).unwrap();
    assert_eq!(trace.ranks.len(), processes.len());
    assert_eq!(trace.ranks[0].format, SourceFormat::Rocprof);
    let kernels = device_spans(&trace, Level::DeviceKernel);
    assert!(!dispatches.is_empty());
    assert_eq!(
        kernels.len(),
        dispatches.len(),
        "one kernel per kernel_dispatch record"
    );
    let busy: i64 = kernels.iter().map(|s| s.end - s.start).sum();
    assert_eq!(busy, expected_busy, "kernel time is the records' time");
    let queues: std::collections::BTreeSet<i64> = kernels
        .iter()
        .map(|s| match trace.track(s.track).kind {
            TrackKind::DeviceQueue { queue, .. } => queue,
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(queues, expected_queues);
    // Every kernel is named from its kernel symbol (no fallback names).
    assert!(kernels
        .iter()
        .all(|s| !trace.str(s.name).starts_with("kernel ")));
    // Correlation ids are the records' internal ids.
    let mut corr: Vec<u64> = kernels.iter().filter_map(|s| s.correlation.get()).collect();
    corr.sort_unstable();
    let mut expected_corr: Vec<u64> = dispatches
        .iter()
        .map(|d| d["correlation_id"]["internal"].as_u64().unwrap())
        .collect();
    expected_corr.sort_unstable();
    assert_eq!(corr, expected_corr);

    // Agents: every GPU agent is a device with its name, CU count and memory.
    assert_eq!(trace.devices.len(), gpu_agents.len());
    for agent in &gpu_agents {
        let index = agent["gpu_index"].as_i64().unwrap();
        let device = trace.devices.iter().find(|d| d.index == index).unwrap();
        assert_eq!(
            device.name.as_deref(),
            agent["product_name"].as_str(),
            "device {index}"
        );
        assert_eq!(device.sm_count, agent["cu_count"].as_i64());
        let memory: i64 = agent["mem_banks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["heap_type"] == 1)
            .map(|b| b["size_in_bytes"].as_i64().unwrap())
            .sum();
        assert_eq!(device.total_memory_bytes, Some(memory));
        let extra: Value = device.extra.to_value();
        assert_eq!(extra["gfx"], agent["name"]);
    }
    assert!(trace.validate().is_ok());
}

// ---------------------------------------------------------------------------------------------
// Small files to the schema.

/// `strings.buffer_records` as rocprofv3 writes it: index = kind.
fn kind_strings() -> Value {
    let mut kinds = vec![json!({"kind": "NONE", "operations": []}); 12];
    kinds[1] = json!({"kind": "HSA_CORE_API", "operations": ["hsa_init", "hsa_shut_down"]});
    kinds[5] = json!({"kind": "HIP_RUNTIME_API",
        "operations": ["hipApiName", "hipLaunchKernel", "hipMemcpyAsync"]});
    kinds[7] = json!({"kind": "MARKER_CORE_API", "operations": ["roctxMarkA", "roctxRangePushA"]});
    kinds[10] = json!({"kind": "MEMORY_COPY", "operations": ["MEMORY_COPY_NONE",
        "MEMORY_COPY_HOST_TO_HOST", "MEMORY_COPY_HOST_TO_DEVICE",
        "MEMORY_COPY_DEVICE_TO_HOST", "MEMORY_COPY_DEVICE_TO_DEVICE"]});
    kinds[11] = json!({"kind": "KERNEL_DISPATCH", "operations": ["KERNEL_DISPATCH_NONE",
        "KERNEL_DISPATCH_ENQUEUE", "KERNEL_DISPATCH_COMPLETE"]});
    Value::Array(kinds)
}

fn agents() -> Value {
    json!([
        {"id": {"handle": 100}, "type": 1, "name": "CPU", "product_name": "Some CPU",
         "cu_count": 16, "gpu_index": -1, "logical_node_id": 0, "node_id": 0,
         "mem_banks": [{"heap_type": 0, "size_in_bytes": 1000}]},
        {"id": {"handle": 200}, "type": 2, "name": "gfx942", "product_name": "AMD Instinct MI300X VF",
         "model_name": "", "cu_count": 304, "gpu_index": 0, "logical_node_id": 1, "node_id": 1,
         "max_engine_clk_fcompute": 2100, "wave_front_size": 64, "num_xcc": 8,
         "mem_banks": [{"heap_type": 1, "width": 8192, "mem_clk_max": 1300,
                        "size_in_bytes": 205822885888_i64}]}
    ])
}

fn correlation(internal: u64) -> Value {
    json!({"internal": internal, "external": 0})
}

fn dispatch(corr: u64, start: i64, end: i64, queue: u64, kernel: u64) -> Value {
    json!({"size": 184, "kind": 11, "operation": 2, "thread_id": 7,
        "correlation_id": correlation(corr), "start_timestamp": start, "end_timestamp": end,
        "dispatch_info": {"size": 72, "agent_id": {"handle": 200}, "queue_id": {"handle": queue},
            "kernel_id": kernel, "dispatch_id": corr, "private_segment_size": 0,
            "group_segment_size": 0, "workgroup_size": {"x": 256, "y": 1, "z": 1},
            "grid_size": {"x": 1024, "y": 2, "z": 1}}})
}

fn api(kind: i64, op: i64, corr: u64, start: i64, end: i64, tid: i64) -> Value {
    json!({"size": 64, "kind": kind, "operation": op, "thread_id": tid,
        "correlation_id": correlation(corr), "start_timestamp": start, "end_timestamp": end})
}

fn copy(corr: u64, start: i64, end: i64, op: i64, bytes: u64) -> Value {
    let (src, dst) = if op == 3 { (200, 100) } else { (100, 200) };
    json!({"size": 96, "kind": 10, "operation": op, "thread_id": 7,
        "correlation_id": correlation(corr), "start_timestamp": start, "end_timestamp": end,
        "dst_agent_id": {"handle": dst}, "src_agent_id": {"handle": src}, "bytes": bytes})
}

fn file(records: Value) -> Value {
    json!({"rocprofiler-sdk-tool": [{
        "metadata": {"pid": 4242, "init_time": 0, "fini_time": 10_000_000,
                     "node": {"hostname": "node-a"}, "command": ["python", "train.py"]},
        "agents": agents(),
        "counters": [],
        "strings": {"buffer_records": kind_strings()},
        "code_objects": [],
        "kernel_symbols": [
            {"kernel_id": 1, "kernel_name": "_Z4gemmv.kd", "formatted_kernel_name": "gemm()",
             "demangled_kernel_name": "gemm().kd"},
            {"kernel_id": 2, "kernel_name": "relu.kd", "formatted_kernel_name": "",
             "demangled_kernel_name": "relu"}
        ],
        "callback_records": {},
        "buffer_records": records
    }]})
}

fn write(dir: &Path, name: &str, value: &Value) -> PathBuf {
    let path = dir.join(name);
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(value.to_string().as_bytes()).unwrap();
    path
}

#[test]
fn hip_api_markers_and_copies_map_with_their_correlations() {
    let dir = tempfile::tempdir().unwrap();
    let records = json!({
        "kernel_dispatch": [dispatch(2, 1_000, 1_500, 16, 1), dispatch(4, 2_000, 2_100, 17, 2)],
        "hip_api": [api(5, 1, 2, 900, 950, 7), api(5, 1, 4, 1_900, 1_950, 7),
                    api(5, 2, 3, 960, 990, 8)],
        "hsa_api": [api(1, 0, 10, 10, 20, 7)],
        "marker_api": [api(7, 1, 11, 800, 3_000, 7)],
        "memory_copy": [copy(3, 1_600, 1_800, 2, 4096), copy(5, 2_200, 2_300, 3, 512)],
        "memory_allocation": [{"anything": 1}],
    });
    let path = write(dir.path(), "run_results.json", &file(records));
    let trace = import_file(&path, &ImportOptions::default()).unwrap();
    assert_eq!(trace.ranks[0].format, SourceFormat::Rocprof);
    assert_eq!(trace.ranks[0].host.as_deref(), Some("node-a"));
    assert_eq!(
        trace.ranks[0]
            .notes
            .get("memory_allocation_and_scratch_records_skipped"),
        1
    );

    let kernels = device_spans(&trace, Level::DeviceKernel);
    let names: Vec<&str> = kernels.iter().map(|s| trace.str(s.name)).collect();
    assert_eq!(names, ["gemm()", "relu"]);
    let grid: Value = serde_json::from_str(&trace.args_text(kernels[0].args).unwrap()).unwrap();
    assert_eq!(grid["grid"], json!([1024, 2, 1]));
    assert_eq!(grid["block"], json!([256, 1, 1]));

    let copies = device_spans(&trace, Level::DeviceCopy);
    assert_eq!(copies.len(), 2);
    assert_eq!(trace.str(copies[0].name), "MEMORY_COPY_HOST_TO_DEVICE");
    assert_eq!(trace.str(copies[1].name), "MEMORY_COPY_DEVICE_TO_HOST");
    let bytes: Value = serde_json::from_str(&trace.args_text(copies[0].args).unwrap()).unwrap();
    assert_eq!(bytes["bytes"], 4096);
    // Both copies are on device 0 (the GPU side of each), on the copy queue.
    for c in &copies {
        assert_eq!(
            trace.track(c.track).kind,
            TrackKind::DeviceQueue {
                device: 0,
                queue: strato_io::rocprof::COPY_QUEUE
            }
        );
    }

    // API calls on their threads, named from the file's strings, linked by correlation.
    let api_spans: Vec<_> = trace
        .spans
        .iter()
        .filter(|s| s.level == Level::AcceleratorApi)
        .collect();
    assert_eq!(api_spans.len(), 4);
    for s in &api_spans {
        assert!(matches!(
            trace.track(s.track).kind,
            TrackKind::Thread { pid: 4242, .. }
        ));
    }
    let launch = api_spans.iter().find(|s| s.correlation == Some(2)).unwrap();
    assert_eq!(trace.str(launch.name), "hipLaunchKernel");
    assert_eq!(trace.str(launch.category), "HIP_RUNTIME_API");
    let memcpy = api_spans.iter().find(|s| s.correlation == Some(3)).unwrap();
    assert_eq!(trace.str(memcpy.name), "hipMemcpyAsync");
    assert_eq!(copies[0].correlation, Some(3));
    let hsa = api_spans
        .iter()
        .find(|s| s.correlation == Some(10))
        .unwrap();
    assert_eq!(trace.str(hsa.name), "hsa_init");
    let marker: Vec<_> = trace
        .spans
        .iter()
        .filter(|s| s.level == Level::Operation)
        .collect();
    assert_eq!(marker.len(), 1);
    assert_eq!(trace.str(marker[0].name), "roctxRangePushA");

    // The GPU agent is device 0, the CPU agent is not a device.
    assert_eq!(trace.devices.len(), 1);
    let d = &trace.devices[0];
    assert_eq!(d.name.as_deref(), Some("AMD Instinct MI300X VF"));
    assert_eq!(d.sm_count, Some(304));
    assert_eq!(d.total_memory_bytes, Some(205_822_885_888));
    assert_eq!(d.clock_rate_khz, Some(2_100_000));
}

#[test]
fn bad_files_are_one_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let good = file(json!({"kernel_dispatch": [dispatch(1, 10, 20, 1, 1)]})).to_string();
    // Truncated.
    let cut = dir.path().join("cut.json");
    std::fs::write(&cut, &good[..good.len() / 2]).unwrap();
    let err = import_file(&cut, &ImportOptions::default()).unwrap_err();
    assert!(matches!(err.kind, ErrorKind::Json { .. }), "{err}");
    assert!(err.to_string().contains("cut.json"));
    // End before start.
    let backwards = write(
        dir.path(),
        "backwards.json",
        &file(json!({"kernel_dispatch": [dispatch(1, 30, 20, 1, 1)]})),
    );
    let err = import_file(&backwards, &ImportOptions::default()).unwrap_err();
    assert!(matches!(err.kind, ErrorKind::Invalid(_)), "{err}");
    assert!(
        err.to_string().contains("kernel_dispatch record 0"),
        "{err}"
    );
    // A required field of a record missing.
    let mut missing = dispatch(1, 10, 20, 1, 1);
    missing.as_object_mut().unwrap().remove("start_timestamp");
    let missing = write(
        dir.path(),
        "missing.json",
        &file(json!({"kernel_dispatch": [missing]})),
    );
    let err = import_file(&missing, &ImportOptions::default()).unwrap_err();
    assert!(err.to_string().contains("start_timestamp"), "{err}");
    // No process.
    let empty = write(
        dir.path(),
        "empty.json",
        &json!({"rocprofiler-sdk-tool": []}),
    );
    let err = import_file(&empty, &ImportOptions::default()).unwrap_err();
    assert!(matches!(err.kind, ErrorKind::NotATrace(_)), "{err}");
    // Out-of-range time.
    let huge = write(
        dir.path(),
        "huge.json",
        &file(json!({"kernel_dispatch": [dispatch(1, 0, i64::MAX, 1, 1)]})),
    );
    assert!(import_file(&huge, &ImportOptions::default()).is_err());
}

#[test]
fn optional_sections_may_be_absent_and_kinds_unknown() {
    // An older or newer SDK: no `kernel_symbols`, unknown kinds, records the strings do not
    // name: imported with fallback names, never an error.
    let dir = tempfile::tempdir().unwrap();
    let value = json!({"rocprofiler-sdk-tool": [{
        "metadata": {"pid": 1},
        "agents": agents(),
        "buffer_records": {
            "kernel_dispatch": [dispatch(1, 10, 20, 3, 9)],
            "hip_api": [api(40, 3, 1, 5, 8, 1)],
        }
    }]});
    let path = write(dir.path(), "old.json", &value);
    let trace = import_file(&path, &ImportOptions::default()).unwrap();
    assert_eq!(trace.spans.len(), 2);
    let names: Vec<&str> = trace.spans.iter().map(|s| trace.str(s.name)).collect();
    assert!(names.contains(&"kernel 9"), "{names:?}");
    assert!(names.contains(&"HIP_API operation 3"), "{names:?}");
    assert_eq!(trace.ranks[0].notes.get("dispatches_of_unknown_kernels"), 1);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Any number of dispatches and copies with any times and queues: one span each, the
    /// device time is the records' time, queues are the records' queues.
    #[test]
    fn counts_and_times_are_preserved(
        records in proptest::collection::vec(
            (0i64..1_000_000, 0i64..10_000, 0u64..6, proptest::bool::ANY), 0..60),
        gzip in proptest::bool::ANY,
    ) {
        let mut dispatches = Vec::new();
        let mut copies = Vec::new();
        let mut expected_busy = 0;
        for (i, &(start, len, queue, is_copy)) in records.iter().enumerate() {
            let corr = i as u64 + 1;
            expected_busy += len;
            if is_copy {
                copies.push(copy(corr, start, start + len, 2 + (queue % 3) as i64, queue * 100));
            } else {
                dispatches.push(dispatch(corr, start, start + len, queue, 1 + queue % 2));
            }
        }
        let value = file(json!({"kernel_dispatch": dispatches, "memory_copy": copies}));
        let dir = tempfile::tempdir().unwrap();
        let text = value.to_string();
        let path = if gzip {
            let path = dir.path().join("p.json.gz");
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            enc.write_all(text.as_bytes()).unwrap();
            std::fs::write(&path, enc.finish().unwrap()).unwrap();
            path
        } else {
            write(dir.path(), "p.json", &value)
        };
        let trace = import_file(&path, &ImportOptions::default()).unwrap();
        prop_assert_eq!(trace.spans.len(), records.len());
        let busy: i64 = trace.spans.iter().map(|s| s.end - s.start).sum();
        prop_assert_eq!(busy, expected_busy);
        prop_assert_eq!(
            device_spans(&trace, Level::DeviceKernel).len(),
            records.iter().filter(|r| !r.3).count()
        );
    }
}

/// The real file's first process, parsed once.
fn real_process() -> Option<&'static Value> {
    static PROCESS: std::sync::OnceLock<Option<Value>> = std::sync::OnceLock::new();
    PROCESS
        .get_or_init(|| {
            let path = real_file();
            path.exists()
                .then(|| read_json(&path)["rocprofiler-sdk-tool"][0].clone())
        })
        .as_ref()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    /// The real file varied as other SDK versions and tools could write it: a subset of its
    /// dispatches, optional sections and fields dropped, keys reordered, pretty or compact,
    /// gzip or not. Every dispatch is still one kernel on its queue, with its time.
    #[test]
    fn real_file_variations(
        take in 1usize..400,
        skip in 0usize..40_000,
        drop_symbols in proptest::bool::ANY,
        drop_strings in proptest::bool::ANY,
        drop_gpu_index in proptest::bool::ANY,
        drop_product_name in proptest::bool::ANY,
        reverse_keys in proptest::bool::ANY,
        pretty in proptest::bool::ANY,
        gzip in proptest::bool::ANY,
    ) {
        let Some(process) = real_process() else {
            return Ok(());
        };
        let all = process["buffer_records"]["kernel_dispatch"].as_array().unwrap();
        let skip = skip % all.len();
        let dispatches: Vec<Value> = all.iter().skip(skip).take(take).cloned().collect();
        let mut p = process.as_object().unwrap().clone();
        p.insert("buffer_records".into(), json!({"kernel_dispatch": dispatches}));
        if drop_symbols {
            p.remove("kernel_symbols");
        }
        if drop_strings {
            p.remove("strings");
        }
        let mut agents = p["agents"].as_array().unwrap().clone();
        for a in &mut agents {
            let a = a.as_object_mut().unwrap();
            if drop_gpu_index {
                a.remove("gpu_index");
            }
            if drop_product_name {
                a.remove("product_name");
            }
        }
        p.insert("agents".into(), Value::Array(agents));
        if reverse_keys {
            // serde_json keeps insertion order only with preserve_order; rebuild reversed.
            let reversed: serde_json::Map<String, Value> =
                p.clone().into_iter().rev().collect();
            p = reversed;
        }
        let value = json!({"rocprofiler-sdk-tool": [Value::Object(p)]});
        let text = if pretty {
            serde_json::to_string_pretty(&value).unwrap()
        } else {
            value.to_string()
        };
        let dir = tempfile::tempdir().unwrap();
        let path = if gzip {
            let path = dir.path().join("v_results.json.gz");
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            enc.write_all(text.as_bytes()).unwrap();
            std::fs::write(&path, enc.finish().unwrap()).unwrap();
            path
        } else {
            let path = dir.path().join("v_results.json");
            std::fs::write(&path, &text).unwrap();
            path
        };
        let trace = import_file(&path, &ImportOptions::default()).unwrap();
        let kernels = device_spans(&trace, Level::DeviceKernel);
        prop_assert_eq!(kernels.len(), dispatches_len(&value));
        let busy: i64 = kernels.iter().map(|s| s.end - s.start).sum();
        let expected: i64 = value["rocprofiler-sdk-tool"][0]["buffer_records"]["kernel_dispatch"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["end_timestamp"].as_i64().unwrap() - d["start_timestamp"].as_i64().unwrap())
            .sum();
        prop_assert_eq!(busy, expected);
        if drop_symbols {
            prop_assert!(kernels.iter().all(|s| trace.str(s.name).starts_with("kernel ")));
        }
        prop_assert_eq!(
            trace.devices.len(),
            process["agents"].as_array().unwrap().iter().filter(|a| a["type"] == 2).count()
        );
        prop_assert!(trace.devices.iter().all(|d| d.name.is_some() && d.sm_count.is_some()));
    }
}

fn dispatches_len(value: &Value) -> usize {
    value["rocprofiler-sdk-tool"][0]["buffer_records"]["kernel_dispatch"]
        .as_array()
        .unwrap()
        .len()
}
