//! Multi-rank analyses through the binary: `gpu-time`'s exposed communication and
//! `critical-path` (its JSON shape, its conservation, its overlay against HTA's own answer) on
//! the real multi-rank inputs of ../shared/data.

use std::io::Read;
use std::path::Path;

use serde_json::Value;

use crate::common::{data, json, s, strato, strato_env};

/// Every input of the shared data with more than one rank, plus single files whose devices or
/// steps exercise the split (several GPUs in one process; several steps; collectives).
const EXPOSURE_INPUTS: &[&str] = &[
    "kineto/param_dlrm8",
    "kineto/hta_trace_filter",
    "kineto/hta_trace_compare",
    "kineto/hta_nccl_data.json.gz",
    "tf/GPU-multi-worker.trace_viewer.json.gz",
    "nsys/pipit_cloverleaf_cuda.sqlite",
];

const PARTS: [&str; 5] = [
    "compute_alone_ns",
    "compute_with_communication_ns",
    "exposed_communication_ns",
    "exposed_copy_ns",
    "idle_ns",
];

fn int(v: &Value, key: &str) -> i64 {
    v[key]
        .as_i64()
        .unwrap_or_else(|| panic!("{key} is not an integer in {v}"))
}

/// Parts add up to the window exactly, none negative.
fn assert_conserves(e: &Value, what: &str) {
    let window = int(e, "window_end_ns") - int(e, "window_start_ns");
    let parts: i64 = PARTS.iter().map(|k| int(e, k)).sum();
    assert_eq!(parts, window, "{what}: parts {parts} != window {window}");
    for k in PARTS {
        assert!(int(e, k) >= 0, "{what}: {k} < 0");
    }
}

#[test]
fn gpu_time_exposure_conserves_on_every_multi_rank_input() {
    let mut devices_seen = 0;
    let mut steps_seen = 0;
    for input in EXPOSURE_INPUTS {
        let path = data(input);
        let report = json(&["gpu-time", s(&path), "--json"]);
        for r in report["ranks"].as_array().unwrap() {
            let exposure = r["exposure"].as_array().expect("whole window has exposure");
            for d in exposure {
                devices_seen += 1;
                let what = format!("{input} rank {} device {}", r["rank"], d["device"]);
                assert_conserves(d, &what);
                // The device's window lies within the rank's kernel window.
                assert!(
                    int(d, "window_start_ns") >= int(r, "window_start_ns"),
                    "{what}"
                );
                assert!(int(d, "window_end_ns") <= int(r, "window_end_ns"), "{what}");
                // Steps tile: each starts where the previous ended, inside the device window.
                let steps = d["steps"].as_array().unwrap();
                for (k, step) in steps.iter().enumerate() {
                    steps_seen += 1;
                    assert_conserves(step, &format!("{what} {}", step["step"]));
                    assert!(int(step, "window_start_ns") >= int(d, "window_start_ns"));
                    assert!(int(step, "window_end_ns") <= int(d, "window_end_ns"));
                    if k > 0 {
                        assert_eq!(
                            int(step, "window_start_ns"),
                            int(&steps[k - 1], "window_end_ns"),
                            "{what}: steps tile"
                        );
                    }
                }
            }
        }
        // The HTA window's output is HTA's: no exposure field at all.
        let hta = json(&["gpu-time", s(&path), "--window", "hta", "--json"]);
        for r in hta["ranks"].as_array().unwrap() {
            assert!(r.get("exposure").is_none(), "{input}: hta window unchanged");
        }
    }
    assert!(devices_seen >= 15, "{devices_seen} devices");
    assert!(steps_seen >= 10, "{steps_seen} steps");
}

#[test]
fn gpu_time_exposure_counts_only_devices_that_ran_work() {
    // Each DLRM rank's trace lists all 8 GPUs of its node, but ran work on its own one only.
    let report = json(&["gpu-time", s(&data("kineto/param_dlrm8")), "--json"]);
    let ranks = report["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 8);
    for r in ranks {
        let devices: Vec<i64> = r["exposure"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| int(d, "device"))
            .collect();
        assert_eq!(devices, vec![int(r, "rank")], "rank {}", r["rank"]);
        let d = &r["exposure"][0];
        // The DLRM step waits on all-to-alls: communication is exposed on every rank.
        assert!(int(d, "exposed_communication_ns") > 0);
        assert!(int(d, "compute_alone_ns") > 0);
    }
}

const KINDS: [&str; 7] = [
    "cpu_op",
    "launch",
    "kernel",
    "copy",
    "sync_wait",
    "collective_wait",
    "idle",
];

/// The shape: `{"ranks":[{"rank","length_ns","events":[{"name","start_ns","end_ns",
/// "kind"}],"by_kind":{"KIND":ns}}]}`, by_kind adding up to length_ns.
fn assert_critical_path_shape(report: &Value, input: &str) {
    let ranks = report["ranks"].as_array().unwrap();
    assert!(!ranks.is_empty(), "{input}");
    for r in ranks {
        let what = format!("{input} rank {}", r["rank"]);
        assert!(r["rank"].is_i64(), "{what}");
        let length = int(r, "length_ns");
        let by_kind = r["by_kind"].as_object().unwrap();
        let keys: std::collections::BTreeSet<&str> = by_kind.keys().map(String::as_str).collect();
        assert_eq!(keys, KINDS.into_iter().collect(), "{what}");
        let sum: i64 = by_kind.values().map(|v| v.as_i64().unwrap()).sum();
        assert_eq!(sum, length, "{what}: by_kind adds up to the length");
        assert!(by_kind.values().all(|v| v.as_i64().unwrap() >= 0), "{what}");
        let events = r["events"].as_array().unwrap();
        assert!(!events.is_empty(), "{what}");
        for e in events {
            assert!(e["name"].is_string());
            assert!(int(e, "end_ns") >= int(e, "start_ns"));
            assert!(KINDS.contains(&e["kind"].as_str().unwrap()), "{e}");
        }
        // The path spans its own start to end.
        assert_eq!(int(r, "end_ns") - int(r, "start_ns"), length, "{what}");
    }
}

#[test]
fn critical_path_json_shape_and_conservation_on_real_inputs() {
    for input in [
        "kineto/hta_critical_path/simple_add_input.json.gz",
        "kineto/hta_critical_path/cuda_event_sync_multi_stream.json.gz",
        "kineto/param_dlrm8",
        "kineto/hta_trace_filter",
        "kineto/hta_nccl_data.json.gz",
    ] {
        let report = json(&["critical-path", s(&data(input)), "--json"]);
        assert_critical_path_shape(&report, input);
    }
    // Across the 8 DLRM ranks collectives are matched; the main thread's forward and the
    // autograd thread's backward are linked (issue 29), so a rank's path runs through both of
    // its threads, where it used to be one thread's (or another rank's backward, reached
    // through a collective it barely waited for).
    let report = json(&["critical-path", s(&data("kineto/param_dlrm8")), "--json"]);
    assert!(report["collectives"]["instances"].as_u64().unwrap() > 0);
    let ranks = report["ranks"].as_array().unwrap();
    let both_threads = ranks
        .iter()
        .filter(|r| {
            let events = r["events"].as_array().unwrap();
            let backward = |e: &&Value| {
                e["name"]
                    .as_str()
                    .unwrap()
                    .starts_with("autograd::engine::evaluate_function")
            };
            events.iter().filter(backward).count() > 10
                && events.iter().any(|e| e["name"] == "aten::linear")
        })
        .count();
    assert!(
        both_threads * 2 > ranks.len(),
        "{both_threads} of {} ranks' paths run through forward and backward",
        ranks.len()
    );
}

/// The `X` events with `args.critical == 1` of a Chrome JSON file: (name, ts in us).
fn critical_events(path: &Path) -> Vec<(String, f64)> {
    let bytes = std::fs::read(path).unwrap();
    let mut text = Vec::new();
    if bytes.starts_with(&[0x1f, 0x8b]) {
        flate2::read::MultiGzDecoder::new(&bytes[..])
            .read_to_end(&mut text)
            .unwrap();
    } else {
        text = bytes;
    }
    let doc: Value = serde_json::from_slice(&text).unwrap();
    doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X" && e["args"]["critical"] == 1)
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_owned(),
                e["ts"].as_f64().unwrap(),
            )
        })
        .collect()
}

/// How many of `ours` have a partner in `theirs` (same name, start within 1 us), each partner
/// used once.
fn matched(ours: &[(String, f64)], theirs: &[(String, f64)]) -> usize {
    let mut used = vec![false; theirs.len()];
    let mut count = 0;
    for (name, ts) in ours {
        let partner = theirs
            .iter()
            .enumerate()
            .find(|(i, (n, t))| !used[*i] && n == name && (t - ts).abs() <= 1.0);
        if let Some((i, _)) = partner {
            used[i] = true;
            count += 1;
        }
    }
    count
}

#[test]
fn critical_path_overlay_agrees_with_htas_overlay() {
    let dir = tempfile::tempdir().unwrap();
    let overlay = dir.path().join("critical.json");
    let input = data("kineto/hta_critical_path/simple_add_input.json.gz");
    let out = strato(&["critical-path", s(&input), "--overlay", s(&overlay)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ours = critical_events(&overlay);
    let theirs = critical_events(&data(
        "kineto/hta_critical_path/simple_add_expected_overlaid_critical_path.json.gz",
    ));
    let hits = matched(&ours, &theirs);
    let precision = hits as f64 / ours.len() as f64;
    let recall = hits as f64 / theirs.len() as f64;
    assert!(
        precision >= 0.95 && recall >= 0.95,
        "precision {precision:.3}, recall {recall:.3} ({hits} of ours {}, theirs {})",
        ours.len(),
        theirs.len()
    );
    // The overlay is a trace strato reads back, with the path's arrows as flows.
    let back = json(&["info", s(&overlay), "--json"]);
    assert!(back.is_object());
    let text = std::fs::read_to_string(&overlay).unwrap();
    assert!(
        text.contains("\"cat\":\"critical_path_"),
        "dependency arrows"
    );
}

#[test]
fn critical_path_bad_input_is_one_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("broken.json");
    std::fs::write(&bad, b"{\"traceEvents\": [").unwrap();
    let out = strato(&["critical-path", s(&bad), "--json"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("broken.json"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(out.stdout.is_empty());
}

/// The path's answer, less what a layout change may change: (length, by_kind, events as
/// (name, start - path start, end - path start, kind)).
/// An event relative to its path's start: (name, start, end, kind).
type RelativeEvent = (String, i64, i64, String);

fn path_digest(report: &Value) -> Vec<(i64, Value, Vec<RelativeEvent>)> {
    report["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let origin = int(r, "start_ns");
            let mut events: Vec<RelativeEvent> = r["events"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| {
                    (
                        e["name"].as_str().unwrap().to_owned(),
                        int(e, "start_ns") - origin,
                        int(e, "end_ns") - origin,
                        e["kind"].as_str().unwrap().to_owned(),
                    )
                })
                .collect();
            events.sort();
            (int(r, "length_ns"), r["by_kind"].clone(), events)
        })
        .collect()
}

#[test]
fn critical_path_is_unchanged_by_event_order_and_a_clock_shift() {
    // What a real file may vary without changing its meaning: the order of its events, its
    // clock's origin, compression. HTA's test trace rewritten each way gives the same path.
    let input = data("kineto/hta_critical_path/simple_add_input.json.gz");
    let mut text = Vec::new();
    flate2::read::MultiGzDecoder::new(std::fs::File::open(&input).unwrap())
        .read_to_end(&mut text)
        .unwrap();
    let original: Value = serde_json::from_slice(&text).unwrap();
    let baseline = path_digest(&json(&["critical-path", s(&input), "--json"]));
    let dir = tempfile::tempdir().unwrap();
    for (variant, shift_us, reverse) in [
        ("reversed.json", 0, true),
        ("shifted.json", 1_000_000, false),
        ("both.json", 7_000_000, true),
    ] {
        let mut doc = original.clone();
        let events = doc["traceEvents"].as_array_mut().unwrap();
        if reverse {
            events.reverse();
        }
        for e in events.iter_mut() {
            if let Some(ts) = e.get("ts").and_then(Value::as_i64) {
                e["ts"] = Value::from(ts + shift_us);
            }
        }
        let path = dir.path().join(variant);
        std::fs::write(&path, serde_json::to_vec(&doc).unwrap()).unwrap();
        let report = json(&["critical-path", s(&path), "--json"]);
        assert_eq!(path_digest(&report), baseline, "{variant}");
    }
}

/// `--step`: per `ProfilerStep#N` window and rank, the path's time by kind plus the time
/// before and after it adds up to the window; kernel = compute + communication; the steps are
/// the ones the files annotate.
#[test]
fn critical_path_per_step_conserves_on_real_multi_rank_inputs() {
    for (input, step, numbers, ranks) in [
        ("kineto/param_dlrm8", "10", vec![10], 8),
        ("kineto/hta_trace_filter", "all", vec![551, 552], 2),
    ] {
        let report = json(&["critical-path", s(&data(input)), "--step", step, "--json"]);
        assert!(report["window"].as_str().unwrap().contains("ProfilerStep"));
        let steps = report["steps"].as_array().unwrap();
        let got: Vec<i64> = steps.iter().map(|st| int(st, "number")).collect();
        assert_eq!(got, numbers, "{input}");
        for st in steps {
            let list = st["ranks"].as_array().unwrap();
            assert_eq!(list.len(), ranks, "{input}");
            for r in list {
                let what = format!("{input} {} rank {}", st["step"], r["rank"]);
                let w = &r["window"];
                let by_kind = w["by_kind"].as_object().unwrap();
                let keys: std::collections::BTreeSet<&str> =
                    by_kind.keys().map(String::as_str).collect();
                assert_eq!(keys, KINDS.into_iter().collect(), "{what}");
                let parts: i64 = by_kind.values().map(|v| v.as_i64().unwrap()).sum::<i64>()
                    + int(w, "before_path_ns")
                    + int(w, "after_path_ns");
                assert_eq!(parts, int(w, "window_ns"), "{what}");
                assert_eq!(
                    int(w, "end_ns") - int(w, "start_ns"),
                    int(w, "window_ns"),
                    "{what}"
                );
                assert_eq!(
                    int(w, "compute_ns") + int(w, "communication_ns"),
                    by_kind["kernel"].as_i64().unwrap(),
                    "{what}"
                );
                assert!(int(r, "length_ns") > 0, "{what}");
                let ops = w["top_ops"].as_array().unwrap();
                assert!(!ops.is_empty(), "{what}");
                let op_sum: i64 = ops.iter().map(|o| int(o, "ns")).sum();
                assert!(op_sum <= parts, "{what}");
            }
        }
    }
    // Text names the window and the parts.
    let out = strato(&[
        "critical-path",
        s(&data("kineto/hta_trace_filter")),
        "--step",
        "552",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("ProfilerStep#552") && !text.contains("ProfilerStep#551"));
    assert!(text.contains("after the path") && text.contains("kernel (communication)"));
}

#[test]
fn critical_path_step_errors_are_clear() {
    let dlrm = data("kineto/param_dlrm8");
    let out = strato(&["critical-path", s(&dlrm), "--step", "99"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("ProfilerStep#99") && stderr.contains("steps: 10"),
        "{stderr}"
    );
    let simple = data("kineto/hta_critical_path/simple_add_input.json.gz");
    let out = strato(&["critical-path", s(&simple), "--step", "all"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no ProfilerStep#N"), "{stderr}");
    let out = strato(&["critical-path", s(&simple), "--step", "x"]);
    assert_eq!(out.status.code(), Some(2));
    let dir = tempfile::tempdir().unwrap();
    let overlay = dir.path().join("overlay.json");
    let out = strato(&[
        "critical-path",
        s(&dlrm),
        "--step",
        "10",
        "--overlay",
        s(&overlay),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!overlay.exists());
}

/// `--step` reads a trace in parts through a spill in `$TMPDIR`: a spill that cannot be
/// written is one line naming the directory (exit 2), nothing printed as a result; the input
/// is the same with a writable one.
#[test]
fn critical_path_steps_with_no_room_to_spill_fail_clearly() {
    let resnet = data("kineto/kineto2021_resnet50_worker0.pt.trace.json.gz");
    let dlrm = data("kineto/param_dlrm8");
    for input in [&resnet, &dlrm] {
        let out = strato_env(
            &["critical-path", s(input), "--step", "all"],
            &[("TMPDIR", "/nonexistent/strato-spill")],
        );
        assert_eq!(out.status.code(), Some(2), "{}", input.display());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains("temporary file in /nonexistent/strato-spill"),
            "{stderr}"
        );
        assert!(out.stdout.is_empty());
        let ok = strato(&["critical-path", s(input), "--step", "all"]);
        assert_eq!(ok.status.code(), Some(0), "{}", input.display());
    }
}
