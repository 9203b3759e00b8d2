//! `strato iterations`, `strato kernels`, `strato memory`: JSON shapes the checks read, and
//! the iteration counts against the ground truth of `../shared/data/EXPECTED.md`.

use std::path::PathBuf;

use crate::common::{data, json, strato_command};

/// `rel` under the shared data's `kineto/`, when it is there.
fn kineto(rel: &str) -> Option<PathBuf> {
    let p = data("kineto").join(rel);
    p.exists().then_some(p)
}

#[test]
fn iterations_json_shape_and_ground_truth() {
    for (file, steps) in [
        ("kineto2021_resnet50_worker0.pt.trace.json.gz", 6usize),
        ("hta_nccl_data.json.gz", 3),
    ] {
        let Some(path) = kineto(file) else { return };
        let path = path.to_string_lossy().into_owned();
        let v = json(&["iterations", &path, "--json", "--check-steps"]);
        let seqs = v["sequences"].as_array().expect("sequences");
        let s = seqs
            .iter()
            .find(|s| s["stream"] == 7 && s["loop"] == 0)
            .expect("stream 7");
        assert!(s["pid"].is_i64(), "{file}: pid");
        assert!(s["device"].is_i64());
        assert!(s["pattern_len"].as_u64().unwrap_or(0) > 0);
        let it = s["iterations"].as_array().expect("iterations");
        assert_eq!(it.len(), steps, "{file}");
        for i in it {
            let (a, b) = (i["start_ns"].as_i64(), i["end_ns"].as_i64());
            assert!(a.is_some() && b.is_some() && a <= b);
        }
        assert_eq!(s["check"]["recall"], 1.0, "{file}");
        assert_eq!(s["check"]["precision"], 1.0, "{file}");
        assert!(!s["diagnosis"].as_array().expect("diagnosis").is_empty());
    }
}

#[test]
fn iterations_given_i_and_csv() {
    let Some(path) = kineto("hta_ns_resolution_rank-0.pt.trace.json.gz") else {
        return;
    };
    let path = path.to_string_lossy().into_owned();
    let v = json(&["iterations", &path, "-i", "5", "--json"]);
    let s = &v["sequences"][0];
    assert_eq!(s["i"], 5);
    assert_eq!(s["i_estimated"], false);
    assert_eq!(s["iterations"].as_array().map(Vec::len), Some(5));
    let out = strato_command()
        .args(["iterations", &path, "--csv"])
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("rank,pid,device,stream,loop,index,start_ns"));
    assert_eq!(text.lines().count(), 6);
    let bad = strato_command()
        .args(["iterations", &path, "-i", "1"])
        .output()
        .expect("run");
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn kernels_json_conserves_device_time() {
    let Some(path) = kineto("hta_nccl_data.json.gz") else {
        return;
    };
    let path = path.to_string_lossy().into_owned();
    let v = json(&["kernels", &path, "--json", "--top", "10"]);
    let r = &v["ranks"][0];
    let kernels = r["kernels"].as_array().expect("kernels");
    assert_eq!(kernels.len(), 11);
    assert!(kernels[10]["name"]
        .as_str()
        .unwrap_or("")
        .starts_with("(other"));
    let total: i64 = kernels.iter().filter_map(|k| k["total_ns"].as_i64()).sum();
    assert_eq!(Some(total), r["device_time_ns"].as_i64());
    let ranked: Vec<i64> = kernels[..10]
        .iter()
        .filter_map(|k| k["total_ns"].as_i64())
        .collect();
    assert!(ranked.windows(2).all(|w| w[0] >= w[1]));
    assert!(r["launch_latency"]["count"].as_u64().unwrap_or(0) > 0);
    let ops = r["ops"].as_array().expect("ops");
    let total: i64 = ops.iter().filter_map(|k| k["total_ns"].as_i64()).sum();
    assert_eq!(Some(total), r["device_time_ns"].as_i64());
}

#[test]
fn memory_json_peak_and_copies() {
    let Some(path) = kineto("hta_df_index_resolver.json.gz") else {
        return;
    };
    let path = path.to_string_lossy().into_owned();
    let v = json(&["memory", &path, "--json"]);
    let devices = v["devices"].as_array().expect("devices");
    let gpu = devices
        .iter()
        .find(|d| d["device"] == 1)
        .expect("device 1 allocations");
    let peak = gpu["peak_bytes"].as_f64().unwrap_or(0.0);
    assert!(peak > 0.0);
    let series_max = gpu["series"]
        .as_array()
        .expect("series")
        .iter()
        .filter_map(|p| p[1].as_f64())
        .fold(0.0, f64::max);
    assert_eq!(series_max, peak, "downsampling keeps the peak");
    assert!(!gpu["ops"].as_array().expect("ops").is_empty());
    let copies = v["copies"].as_array().expect("copies");
    assert!(copies.iter().any(|c| c["direction"] == "DeviceToDevice"
        && c["bytes"].as_i64().unwrap_or(0) > 0
        && c["bandwidth_gb_s"].as_f64().unwrap_or(0.0) > 0.0));
}
