//! `--graph-capture`, `strato diff --by-op` and `strato iterations`' `lines_up_with` through the
//! built binary on the real traces (the analyses' own numbers are tested in strato-analysis).

use serde_json::Value;

use crate::common::{data, run};

const REPLAY: &str = "kineto/tracelens/vllm_decode_full_graph_execution.json.gz";
const CAPTURE: &str = "kineto/tracelens/vllm_decode_full_graph_capture_rank_0.pt.trace.json.gz";

fn path(rel: &str) -> String {
    data(rel).display().to_string()
}

#[test]
fn graph_capture_maps_the_vllm_replay_and_bad_captures_exit_2() {
    let (code, out, err) = run(&["hierarchy", &path(REPLAY), "--json"]);
    assert_eq!(code, 0, "{err}");
    let before: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(before["graph_kernels"], 421);
    assert_eq!(before["graph_kernels_mapped"], 0);

    let (code, out, err) = run(&[
        "hierarchy",
        &path(REPLAY),
        "--json",
        "--graph-capture",
        &path(CAPTURE),
    ]);
    assert_eq!(code, 0, "{err}");
    let after: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(after["graph_kernels"], 421);
    assert_eq!(after["graph_kernels_mapped"], 421);
    assert_eq!(after["with_op"], after["device_ops"]);
    assert!(
        err.contains("421 of 421 graph-replayed device ops mapped"),
        "{err}"
    );

    // A capture with nothing captured (the replay itself), and a missing file: exit 2, named.
    let (code, _, err) = run(&["hierarchy", &path(REPLAY), "--graph-capture", &path(REPLAY)]);
    assert_eq!(code, 2);
    assert!(
        err.contains("vllm_decode_full_graph_execution")
            && err.contains("no captured kernel launches"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    let (code, _, err) = run(&[
        "hierarchy",
        &path(REPLAY),
        "--graph-capture",
        "/nonexistent/capture.json",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("/nonexistent/capture.json"), "{err}");
}

#[test]
fn diff_by_op_of_the_h100_mi300x_pair() {
    let h = path("kineto/tracelens/h100_Falconsai_nsfw_image_detection.json.gz");
    let m = path("kineto/tracelens/mi300_Falconsai_nsfw_image_detection.json.gz");
    let (code, out, err) = run(&["diff", &h, &m, "--by-op", "--json"]);
    assert_eq!(code, 0, "{err}");
    let r: Value = serde_json::from_str(&out).unwrap();
    let ops = r["ops"].as_array().unwrap();
    let sum = |k: &str| ops.iter().map(|o| o[k].as_i64().unwrap()).sum::<i64>();
    assert_eq!(sum("a_ns"), r["a"]["device_ns"].as_i64().unwrap());
    assert_eq!(sum("b_ns"), r["b"]["device_ns"].as_i64().unwrap());
    assert_eq!(sum("delta_ns"), r["delta_ns"].as_i64().unwrap());
    assert!(!r["ops_explaining"].as_array().unwrap().is_empty());
    let (code, out, _) = run(&["diff", &h, &m, "--by-op"]);
    assert_eq!(code, 0);
    assert!(out.contains("account for 80% of the difference"), "{out}");
}

#[test]
fn iterations_json_says_what_the_loop_lines_up_with() {
    let (code, out, err) = run(&[
        "iterations",
        &path("kineto/tracelens/h100_Falconsai_nsfw_image_detection.json.gz"),
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let r: Value = serde_json::from_str(&out).unwrap();
    let s = &r["sequences"][0];
    assert_eq!(s["lines_up_with"], "ViTLayer");
    assert!(s["diagnosis"][0]
        .as_str()
        .unwrap()
        .starts_with("layers, not training iterations"));
    assert!(s.get("inside_loop").is_some());
}
