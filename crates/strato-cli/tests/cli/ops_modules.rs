//! `strato ops` (per-op performance models) and `strato layers --by module` (the module tree)
//! on the TraceLens traces, against figures computed here independently from the raw JSON.

use serde_json::Value;

use crate::common::{data, fails, json, s, shared_data};

const B200: &str = "kineto/tracelens/b200_eager_trace.json.gz";
const H100: &str = "kineto/tracelens/h100_Falconsai_nsfw_image_detection.json.gz";
const VLLM: &str = "kineto/tracelens/vllm_prefilldecode_piecewise_graph_execution.json.gz";
const CKPT: &str = "kineto/tracelens/mi300_resnet_act_checkpoint.json.gz";

/// The `traceEvents` of a gzipped Kineto trace, read here without stratoscope.
pub fn events(rel: &str) -> Vec<Value> {
    let f = std::fs::File::open(data(rel)).unwrap();
    let v: Value = serde_json::from_reader(flate2::read::MultiGzDecoder::new(f)).unwrap();
    v["traceEvents"].as_array().unwrap().clone()
}

fn ts_ns(e: &Value) -> (f64, f64) {
    let ts = e["ts"].as_f64().unwrap() * 1e3;
    (ts, ts + e["dur"].as_f64().unwrap_or(0.0) * 1e3)
}

/// Independently: the calls of `op` with exactly `dims`, and the summed duration (ns) of the
/// kernels launched (by correlation) from a runtime call inside one of them on its thread.
fn op_calls_and_kernel_ns(ev: &[Value], op: &str, dims: &Value) -> (usize, f64) {
    let calls: Vec<&Value> = ev
        .iter()
        .filter(|e| e["cat"] == "cpu_op" && e["name"] == op && e["args"]["Input Dims"] == *dims)
        .collect();
    let mut correlations = std::collections::HashSet::new();
    for rt in ev
        .iter()
        .filter(|e| e["cat"] == "cuda_runtime" || e["cat"] == "cuda_driver")
    {
        let (a, b) = ts_ns(rt);
        if calls.iter().any(|c| {
            let (s0, s1) = ts_ns(c);
            c["tid"] == rt["tid"] && c["pid"] == rt["pid"] && s0 <= a && b <= s1
        }) {
            if let Some(id) = rt["args"]["correlation"].as_u64() {
                correlations.insert(id);
            }
        }
    }
    let kernel_ns = ev
        .iter()
        .filter(|e| e["cat"] == "kernel")
        .filter(|e| {
            e["args"]["correlation"]
                .as_u64()
                .is_some_and(|c| correlations.contains(&c))
        })
        .map(|e| e["dur"].as_f64().unwrap() * 1e3)
        .sum();
    (calls.len(), kernel_ns)
}

fn row<'a>(report: &'a Value, op: &str, shapes: &Value) -> &'a Value {
    report["ops"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["op"] == op && r["shapes"] == *shapes)
        .unwrap_or_else(|| panic!("no row {op} {shapes}"))
}

fn conserves(report: &Value) {
    let rows = report["ops"].as_array().unwrap();
    let total: u64 = rows.iter().map(|r| r["total_ns"].as_u64().unwrap()).sum();
    assert_eq!(total, report["device_ns"].as_u64().unwrap());
    let ops: u64 = rows.iter().map(|r| r["device_ops"].as_u64().unwrap()).sum();
    assert_eq!(ops, report["device_ops"].as_u64().unwrap());
}

#[test]
fn b200_gemms_get_tflops_and_peak_by_hand() {
    if shared_data().is_none() {
        return;
    }
    let r = json(&["ops", s(&data(B200)), "--json"]);
    conserves(&r);
    assert_eq!(r["devices"][0]["spec"]["name"], "B200");
    let ev = events(B200);
    // Every aten::linear shape of the trace: (M rows, K, N) read from its Input Dims here.
    let mut checked = 0;
    for (m, k, n) in [(888, 2880, 640), (888, 2880, 128), (888, 512, 2880)] {
        let dims: Value = serde_json::json!([[m, k], [n, k], [n]]);
        let (calls, kernel_ns) = op_calls_and_kernel_ns(&ev, "aten::linear", &dims);
        assert!(calls > 0);
        let o = row(&r, "aten::linear", &dims);
        let flops = 2.0 * (m * k * n) as f64 * calls as f64;
        assert_eq!(o["count"].as_u64().unwrap() as usize, calls);
        assert_eq!(o["flops"].as_f64().unwrap(), flops);
        let total = o["total_ns"].as_f64().unwrap();
        // Microsecond floats -> integer ns: at most 1 ns per kernel apart.
        assert!(
            (total - kernel_ns).abs() <= calls as f64 + 1.0,
            "{total} vs {kernel_ns}"
        );
        let tflops = flops / total / 1e3;
        assert!((o["tflops"].as_f64().unwrap() - tflops).abs() < 1e-9 * tflops);
        // B200 dense BF16 peak 2250 TFLOP/s.
        let pct = 100.0 * tflops / 2250.0;
        assert!((o["peak_pct"].as_f64().unwrap() - pct).abs() < 1e-9 * pct);
        assert_eq!(o["model"], "gemm 2MNK");
        assert_eq!(o["dtypes"][0], "c10::BFloat16");
        assert!(o["bound"] == "compute" || o["bound"] == "memory");
        checked += 1;
    }
    assert_eq!(checked, 3);
}

#[test]
fn h100_attention_is_modelled_from_its_input_dims() {
    if shared_data().is_none() {
        return;
    }
    let r = json(&["ops", s(&data(H100)), "--json"]);
    conserves(&r);
    let ev = events(H100);
    let sdpa: Vec<&Value> = ev
        .iter()
        .filter(|e| e["cat"] == "cpu_op" && e["name"] == "aten::scaled_dot_product_attention")
        .collect();
    let dims = sdpa[0]["args"]["Input Dims"].clone();
    let q: Vec<f64> = dims[0]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    let k_len = dims[1][2].as_f64().unwrap();
    // is_causal (Concrete Inputs[5]) is False in this trace: 4·B·H·L·S·E.
    assert_eq!(sdpa[0]["args"]["Concrete Inputs"][5], "False");
    let per_call = 4.0 * q[0] * q[1] * q[2] * k_len * q[3];
    let o = row(&r, "aten::scaled_dot_product_attention", &dims);
    assert_eq!(o["count"].as_u64().unwrap() as usize, sdpa.len());
    assert_eq!(o["flops"].as_f64().unwrap(), per_call * sdpa.len() as f64);
    assert!(o["tflops"].as_f64().unwrap() > 0.0);
    assert!(o["peak_pct"].as_f64().unwrap() > 0.0);
    assert_eq!(r["devices"][0]["spec"]["name"], "H100 SXM5");
}

#[test]
fn vllm_paged_attention_is_unmodelled_with_the_reason() {
    if shared_data().is_none() {
        return;
    }
    let r = json(&["ops", s(&data(VLLM)), "--json"]);
    conserves(&r);
    let rows: Vec<&Value> = r["ops"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["op"] == "vllm::unified_attention_with_output")
        .collect();
    assert!(!rows.is_empty());
    for o in rows {
        assert!(o["model"].is_null() && o["tflops"].is_null());
        assert!(o["reason"].as_str().unwrap().contains("context length"));
    }
    // Devices with an empty name are found by CU count and memory (MI300X) or not at all.
    let d = &r["devices"][0];
    assert!(d["spec"].is_null() || d["detected_by"] == "sm_count_and_memory");
}

#[test]
fn bad_device_spec_is_one_clear_error() {
    if shared_data().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("gpu.json");
    std::fs::write(&bad, r#"{"name":"x","memory_bandwidth_gbs":-3}"#).unwrap();
    let err = fails(&["ops", s(&data(H100)), "--device-spec", s(&bad)]);
    assert!(
        err.contains("gpu.json") && err.contains("memory_bandwidth_gbs"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let good = dir.path().join("lab.json");
    std::fs::write(
        &good,
        r#"{"name":"lab","memory_bandwidth_gbs":1000,"bf16_tensor_tflops":100}"#,
    )
    .unwrap();
    let r = json(&["ops", s(&data(H100)), "--device-spec", s(&good), "--json"]);
    assert_eq!(r["devices"][0]["spec"]["name"], "lab");
    assert_eq!(r["devices"][0]["detected_by"], "user_spec");
}

/// Independently from the raw JSON: module spans per class, their distinct instances, and the
/// module spans that run inside an autograd `evaluate_function` span on their thread.
fn module_census(ev: &[Value]) -> (std::collections::BTreeMap<String, (usize, usize)>, usize) {
    let mods: Vec<&Value> = ev
        .iter()
        .filter(|e| {
            e["ph"] == "X"
                && e["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("nn.Module: "))
        })
        .collect();
    let mut per_class: std::collections::BTreeMap<
        String,
        (std::collections::BTreeSet<String>, usize),
    > = Default::default();
    for m in &mods {
        let inst = m["name"].as_str().unwrap()["nn.Module: ".len()..].to_owned();
        let class = match inst.rsplit_once('_') {
            Some((c, n)) if n.chars().all(|c| c.is_ascii_digit()) && !n.is_empty() => c.to_owned(),
            _ => inst.clone(),
        };
        let e = per_class.entry(class).or_default();
        e.0.insert(inst);
        e.1 += 1;
    }
    let backward: Vec<&Value> = ev
        .iter()
        .filter(|e| {
            e["ph"] == "X"
                && e["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("autograd::engine::evaluate_function"))
        })
        .collect();
    let recomputed = mods
        .iter()
        .filter(|m| {
            let (a, b) = ts_ns(m);
            backward.iter().any(|w| {
                let (s0, s1) = ts_ns(w);
                w["tid"] == m["tid"] && w["pid"] == m["pid"] && s0 <= a && b <= s1
            })
        })
        .count();
    (
        per_class
            .into_iter()
            .map(|(k, (inst, calls))| (k, (inst.len(), calls)))
            .collect(),
        recomputed,
    )
}

#[test]
fn module_tree_counts_classes_and_instances_like_the_raw_trace() {
    if shared_data().is_none() {
        return;
    }
    for rel in [B200, H100, CKPT] {
        let r = json(&["layers", "--by", "module", s(&data(rel)), "--json"]);
        let (census, recomputed) = module_census(&events(rel));
        let got: std::collections::BTreeMap<String, (usize, usize)> = r["modules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["class"].as_str().unwrap().to_owned(),
                    (
                        m["instances"].as_u64().unwrap() as usize,
                        m["calls"].as_u64().unwrap() as usize,
                    ),
                )
            })
            .collect();
        assert_eq!(got, census, "{rel}");
        assert_eq!(
            r["recompute"]["calls"].as_u64().unwrap() as usize,
            recomputed,
            "{rel}"
        );
        // Conservation: device time inside + outside modules = all device time; the tree's
        // roots add up to the part inside.
        let dev = r["device_ns"].as_u64().unwrap();
        let inside = r["device_ns_in_modules"].as_u64().unwrap();
        assert_eq!(
            inside + r["device_ns_outside_modules"].as_u64().unwrap(),
            dev
        );
        let roots: u64 = r["tree"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["parent"].is_null())
            .map(|n| n["device_ns"].as_u64().unwrap())
            .sum();
        assert_eq!(roots, inside, "{rel}");
    }
    // Activation checkpointing: the ResNet trace recomputes forward work under backward.
    let r = json(&["layers", "--by", "module", s(&data(CKPT)), "--json"]);
    assert!(r["recompute"]["calls"].as_u64().unwrap() > 0);
    assert!(r["recompute"]["device_ns"].as_u64().unwrap() > 0);
    // The B200 trace (inference) recomputes nothing.
    let r = json(&["layers", "--by", "module", s(&data(B200)), "--json"]);
    assert_eq!(r["recompute"]["calls"], 0);
}
