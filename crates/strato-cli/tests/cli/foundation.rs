//! End-to-end tests of the foundation commands (`import`, `info`, `gpu-time`, `export`) on the
//! real traces in `../shared/data`, run through the built `strato` binary as a user would.

#![allow(clippy::type_complexity)]

use std::path::Path;

use crate::common::{data, json, strato, strato_command};

use serde_json::Value;

/// Counts of a Chrome-trace JSON file made with a plain DOM parse: an oracle independent of
/// the streaming importer.
struct Oracle {
    complete: usize,
    instants: usize,
    by_cat: std::collections::BTreeMap<String, usize>,
}

fn oracle(path: &Path) -> Oracle {
    let bytes = std::fs::read(path).unwrap();
    let mut text = Vec::new();
    if bytes.starts_with(&[0x1f, 0x8b]) {
        use std::io::Read;
        flate2::read::MultiGzDecoder::new(&bytes[..])
            .read_to_end(&mut text)
            .unwrap();
    } else {
        text = bytes;
    }
    let doc: Value = serde_json::from_slice(&text).unwrap();
    let events = doc.get("traceEvents").and_then(Value::as_array).unwrap();
    let mut o = Oracle {
        complete: 0,
        instants: 0,
        by_cat: Default::default(),
    };
    for e in events {
        let cat = e
            .get("cat")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        match e.get("ph").and_then(Value::as_str) {
            Some("X") => {
                o.complete += 1;
                *o.by_cat.entry(cat).or_default() += 1;
            }
            Some("i") | Some("I") => {
                o.instants += 1;
                *o.by_cat.entry(cat).or_default() += 1;
            }
            _ => {}
        }
    }
    o
}

#[test]
fn info_counts_match_an_independent_parse_of_every_chrome_file() {
    let files = [
        "kineto/hta_alexnet_trace.json.gz",
        "kineto/hta_cpu_only_rank-34.pt.trace.json.gz",
        "kineto/hta_cuda_event_sync_trace.json.gz",
        "kineto/hta_df_index_resolver.json.gz",
        "kineto/hta_nccl_data.json.gz",
        "kineto/hta_ns_resolution_rank-0.pt.trace.json.gz",
        "kineto/hta_triton_example.json.gz",
        "kineto/kineto2021_resnet50_worker0.pt.trace.json.gz",
        "kineto/hta_trace_compare/base.json.gz",
        "kineto/hta_trace_compare/test.json.gz",
        "kineto/hta_trace_filter/sampled_rank-0.json.gz",
        "kineto/hta_trace_filter/sampled_rank-1.json.gz",
        "tf/GPU-multi-worker.trace_viewer.json.gz",
    ];
    for file in files {
        let path = data(file);
        let expected = oracle(&path);
        let info = json(&["info", path.to_str().unwrap(), "--json"]);
        assert_eq!(
            info["spans"].as_u64().unwrap() as usize,
            expected.complete,
            "{file} spans"
        );
        assert_eq!(
            info["instants"].as_u64().unwrap() as usize,
            expected.instants,
            "{file} instants"
        );
        let by_level: usize = info["spans_by_level"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap() as usize)
            .sum();
        assert_eq!(by_level, expected.complete, "{file}: levels conserve spans");
        if !file.starts_with("tf/") {
            // TF trace viewer events have no category; the post-pass assigns ours.
            for (cat, count) in &expected.by_cat {
                assert_eq!(
                    info["events_by_category"][cat.as_str()]
                        .as_u64()
                        .unwrap_or(0) as usize,
                    *count,
                    "{file} category {cat}"
                );
            }
        }
    }
}

#[test]
fn info_devices_streams_and_levels_of_a_kineto_trace() {
    let info = json(&[
        "info",
        data("kineto/hta_nccl_data.json.gz").to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(info["sources"][0]["format"], "kineto");
    assert_eq!(info["sources"][0]["rank"], 0);
    assert_eq!(info["sources"][0]["world_size"], 2);
    let levels = &info["spans_by_level"];
    assert_eq!(levels["Backend"], 14346);
    assert_eq!(levels["AcceleratorApi"], 8740);
    assert_eq!(levels["DeviceKernel"], 2700);
    assert_eq!(levels["DeviceCopy"], 960);
    assert_eq!(levels["DeviceSet"], 114);
    assert_eq!(levels["Operation"], 72);
    let devices = info["devices"].as_array().unwrap();
    let dev0 = devices.iter().find(|d| d["index"] == 0).unwrap();
    assert_eq!(dev0["name"], "NVIDIA A100-PG509-200");
    assert!(dev0["streams"]
        .as_array()
        .unwrap()
        .contains(&Value::from(7)));
    let main = info["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == 2910249)
        .unwrap();
    assert_eq!(main["name"], "python3.10");
}

/// The reference numbers of `../shared/data/EXPECTED.md`, computed there by HTA 0.5.0.
#[test]
fn gpu_time_hta_window_reproduces_every_reference_number() {
    // (path, rank, idle %, compute %, non-compute %, kernel time us, comm/comp overlap %)
    let expected: [(&str, i64, f64, f64, f64, f64, Option<f64>); 5] = [
        (
            "kineto/hta_trace_filter",
            0,
            53.56,
            17.71,
            28.74,
            600058.0,
            Some(11.81),
        ),
        (
            "kineto/hta_trace_filter",
            1,
            54.72,
            22.57,
            22.72,
            600674.0,
            Some(20.05),
        ),
        (
            "kineto/hta_df_index_resolver.json.gz",
            1,
            46.08,
            35.55,
            18.37,
            1396669.0,
            Some(0.0),
        ),
        (
            "kineto/hta_nccl_data.json.gz",
            0,
            77.78,
            17.26,
            4.97,
            435586.0,
            Some(14.31),
        ),
        (
            "kineto/hta_ns_resolution_rank-0.pt.trace.json.gz",
            0,
            2.63,
            96.75,
            0.62,
            384634.0,
            None,
        ),
    ];
    for (file, rank, idle, compute, non_compute, kernel_us, overlap) in expected {
        let report = json(&[
            "gpu-time",
            data(file).to_str().unwrap(),
            "--window",
            "hta",
            "--json",
        ]);
        let r = report["ranks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["rank"] == rank)
            .unwrap();
        let close = |key: &str, want: f64| {
            let got = r[key].as_f64().unwrap();
            assert!(
                (got - want).abs() <= 0.1,
                "{file} rank {rank} {key}: {got} vs {want}"
            );
        };
        close("idle_pct", idle);
        close("compute_pct", compute);
        close("non_compute_pct", non_compute);
        assert_eq!(
            r["kernel_time_us"].as_f64().unwrap(),
            kernel_us,
            "{file} kernel time"
        );
        match overlap {
            Some(o) => close("comm_comp_overlap_pct", o),
            None => assert!(
                r["comm_comp_overlap_pct"].is_null(),
                "{file}: no communication"
            ),
        }
        let sum = r["idle_pct"].as_f64().unwrap()
            + r["compute_pct"].as_f64().unwrap()
            + r["non_compute_pct"].as_f64().unwrap();
        assert!((sum - 100.0).abs() < 1e-9, "{file}: percentages conserve");
    }
    // Idle time breakdown, hta_trace_filter rank 0, stream 7 (within 1 us).
    let report = json(&[
        "gpu-time",
        data("kineto/hta_trace_filter").to_str().unwrap(),
        "--window",
        "hta",
        "--json",
    ]);
    let rank0 = report["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["rank"] == 0)
        .unwrap();
    let s7 = rank0["streams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stream"] == 7)
        .unwrap();
    for (key, want) in [
        ("host_wait_us", 213825.0),
        ("kernel_wait_us", 1985.0),
        ("other_us", 261740.0),
    ] {
        assert!(
            (s7[key].as_f64().unwrap() - want).abs() <= 1.0,
            "stream 7 {key}"
        );
    }
}

#[test]
fn gpu_time_whole_window_conserves_on_every_file_and_never_crashes() {
    let inputs = [
        "kineto/hta_alexnet_trace.json.gz",
        "kineto/hta_cpu_only_rank-34.pt.trace.json.gz",
        "kineto/hta_cuda_event_sync_trace.json.gz",
        "kineto/hta_nccl_data.json.gz",
        "kineto/hta_triton_example.json.gz",
        "kineto/kineto2021_resnet50_worker0.pt.trace.json.gz",
        "kineto/hta_trace_compare",
        "kineto/hta_trace_filter",
        "nsys/pipit_cloverleaf_cuda.sqlite",
        "tf/GPU-multi-worker.trace_viewer.json.gz",
        "tf/GPU-multi-worker.xplane.pb",
        "ncu/gemm_tiled.csv",
    ];
    for input in inputs {
        for window in ["whole", "hta"] {
            let report = json(&[
                "gpu-time",
                data(input).to_str().unwrap(),
                "--window",
                window,
                "--json",
            ]);
            for r in report["ranks"].as_array().unwrap() {
                let sum = r["idle_pct"].as_f64().unwrap()
                    + r["compute_pct"].as_f64().unwrap()
                    + r["non_compute_pct"].as_f64().unwrap();
                assert!((sum - 100.0).abs() < 1e-6, "{input} {window}: {sum}");
                let parts = r["idle_us"].as_f64().unwrap()
                    + r["compute_us"].as_f64().unwrap()
                    + r["non_compute_us"].as_f64().unwrap();
                assert!(
                    (parts - r["kernel_time_us"].as_f64().unwrap()).abs() < 1e-6,
                    "{input} {window}"
                );
            }
        }
    }
    // The CPU-only rank has no device events: all idle, with a note, where HTA crashes.
    let report = json(&[
        "gpu-time",
        data("kineto/hta_cpu_only_rank-34.pt.trace.json.gz")
            .to_str()
            .unwrap(),
        "--json",
    ]);
    assert_eq!(report["ranks"][0]["device_events"], 0);
    assert!(report["ranks"][0]["note"].is_string());
}

fn expect_clean_failure(args: &[&str], needle: &str) {
    let out = strato(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.contains(needle),
        "{args:?}: {stderr:?} should contain {needle:?}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing on stdout for a failure");
}

#[test]
fn bad_inputs_fail_with_one_line_naming_the_file_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, bytes: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p.to_str().unwrap().to_owned()
    };
    let gz = |bytes: &[u8]| {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    };
    let empty = write("empty.json", b"");
    expect_clean_failure(&["info", &empty], "empty.json: file is empty");
    let full = gz(
        &std::fs::read(data("kineto/hta_cuda_event_sync_trace.json.gz"))
            .map(|b| {
                let mut t = Vec::new();
                use std::io::Read;
                flate2::read::MultiGzDecoder::new(&b[..])
                    .read_to_end(&mut t)
                    .unwrap();
                t
            })
            .unwrap(),
    );
    let truncated = write("cut.json.gz", &full[..full.len() / 2]);
    expect_clean_failure(
        &["info", &truncated],
        "cut.json.gz: gzip stream is corrupt or truncated",
    );
    let invalid = write(
        "invalid.json",
        b"{\"traceEvents\": [{\"ph\": \"X\", \"ts\": 1,, }]}",
    );
    expect_clean_failure(
        &["gpu-time", &invalid],
        "invalid.json: invalid JSON at byte",
    );
    let cut_json = write(
        "cut.json",
        b"{\"traceEvents\": [{\"ph\": \"X\", \"ts\": 1, \"dur\": 2}, {\"ph\"",
    );
    expect_clean_failure(&["info", &cut_json], "cut.json: invalid JSON");
    let not_trace = write("config.json", b"{\"model\": \"resnet\", \"lr\": 0.1}");
    expect_clean_failure(&["info", &not_trace], "config.json: not a trace");
    let sqlite_path = dir.path().join("other.sqlite");
    {
        let conn = rusqlite::Connection::open(&sqlite_path).unwrap();
        conn.execute_batch(
            "CREATE TABLE users(id INTEGER, name TEXT); INSERT INTO users VALUES (1, 'a');",
        )
        .unwrap();
    }
    expect_clean_failure(
        &["info", sqlite_path.to_str().unwrap()],
        "other.sqlite: not a trace",
    );
    let unknown = write("blob.bin", &[0u8, 159, 146, 150, 1, 2, 3]);
    expect_clean_failure(&["info", &unknown], "blob.bin: unknown format");
    expect_clean_failure(
        &["info", dir.path().join("missing.json").to_str().unwrap()],
        "missing.json: no such file",
    );
    // A gzip that expands without bound is stopped by the limit.
    let bomb = write("bomb.json.gz", &gz(&vec![b' '; 8 << 20]));
    let out = strato_command()
        .args(["info", &bomb])
        .env("STRATO_MAX_DECOMPRESSED_BYTES", "1048576")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr.contains("bomb.json.gz: decompressed size exceeds the limit of 1048576 bytes"),
        "{stderr}"
    );
    // Usage errors also exit 2.
    assert_eq!(strato(&["gpu-time"]).status.code(), Some(2));
}

#[test]
fn import_then_every_command_reads_the_profile_directory_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("prof");
    let source = data("kineto/hta_trace_filter");
    let out = strato(&[
        "import",
        source.to_str().unwrap(),
        "-o",
        profile.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(profile.join("metadata.json").is_file());
    let from_raw = json(&[
        "gpu-time",
        source.to_str().unwrap(),
        "--window",
        "hta",
        "--json",
    ]);
    let from_store = json(&[
        "gpu-time",
        profile.to_str().unwrap(),
        "--window",
        "hta",
        "--json",
    ]);
    assert_eq!(from_raw["ranks"].as_array().unwrap().len(), 2);
    for (a, b) in from_raw["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .zip(from_store["ranks"].as_array().unwrap())
    {
        for key in [
            "rank",
            "idle_pct",
            "compute_pct",
            "kernel_time_us",
            "comm_comp_overlap_pct",
            "streams",
        ] {
            assert_eq!(a[key], b[key], "{key}");
        }
    }
    let info_raw = json(&["info", source.to_str().unwrap(), "--json"]);
    let info_store = json(&["info", profile.to_str().unwrap(), "--json"]);
    for key in [
        "spans",
        "instants",
        "flows",
        "spans_by_level",
        "events_by_category",
        "devices",
    ] {
        assert_eq!(info_raw[key], info_store[key], "{key}");
    }
}

#[test]
fn export_perfetto_and_chrome_carry_every_span_and_flow() {
    let dir = tempfile::tempdir().unwrap();
    let source = data("kineto/hta_nccl_data.json.gz");
    let pf = dir.path().join("t.pftrace");
    let cj = dir.path().join("t.json");
    let out = strato(&[
        "export",
        source.to_str().unwrap(),
        "--perfetto",
        pf.to_str().unwrap(),
        "--chrome",
        cj.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let trace = strato_io::import_paths(&[source], &strato_io::ImportOptions::default()).unwrap();
    let summary = strato_io::export::perfetto::summarize(&std::fs::read(&pf).unwrap()).unwrap();
    assert_eq!(summary.slice_begins, trace.spans.len());
    assert_eq!(summary.slice_ends, trace.spans.len());
    let bound = trace
        .flows
        .iter()
        .filter(|f| {
            f.from.as_ref().is_some_and(|e| e.span.is_some())
                && f.to.as_ref().is_some_and(|e| e.span.is_some())
        })
        .count();
    assert_eq!(summary.flow_ids, bound);
    let chrome: Value = serde_json::from_slice(&std::fs::read(&cj).unwrap()).unwrap();
    let xs = chrome["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .count();
    assert_eq!(xs, trace.spans.len());
    // No temporary files left beside the outputs.
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty());
}
