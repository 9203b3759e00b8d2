//! `strato ops` bytes on the real traces (issue 28): dtype conversions count each side at its
//! own dtype, `cat` of a TensorList is a copy with known bytes, no row passes 100% of peak
//! silently, collectives have rows with bytes, algbw and busbw; `strato collectives` has its
//! per-exact-size table and states its bandwidth unit. Expected figures are computed here from
//! the raw JSON (or from the rule's definition applied to the recorded shapes), not copied from
//! a run.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::common::{data, json, ok, s, shared_data, text};

const H100: &str = "kineto/tracelens/h100_Falconsai_nsfw_image_detection.json.gz";
const MI300: &str = "kineto/tracelens/mi300_Falconsai_nsfw_image_detection.json.gz";
const SGLANG: &str = "kineto/tracelens/sglang_Qwen3-8B_decode.json.gz";
const FILTER1: &str = "kineto/hta_trace_filter/sampled_rank-1.json.gz";
const NCCL: &str = "kineto/hta_nccl_data.json.gz";
const B200: &str = "kineto/tracelens/b200_eager_trace.json.gz";

/// The `traceEvents` of a gzipped Kineto trace, read here without stratoscope.
fn events(rel: &str) -> Vec<Value> {
    let f = std::fs::File::open(data(rel)).unwrap();
    let v: Value = serde_json::from_reader(flate2::read::MultiGzDecoder::new(f)).unwrap();
    v["traceEvents"].as_array().unwrap().clone()
}

fn ops_json(rel: &str) -> Value {
    json(&["ops", s(&data(rel)), "--json"])
}

fn rows(report: &Value) -> &Vec<Value> {
    report["ops"].as_array().unwrap()
}

fn numel(shape: &Value) -> f64 {
    shape
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_f64().unwrap())
        .product()
}

/// `aten::cat` of `[4,1,768]` and `[4,196,768]` (the ViT's class token and patches) on the H100
/// and on the MI300X: the list's shapes are read from the nested `Input Dims`; bytes = read +
/// written once at the element size PyTorch's cat kernel names (`OpaqueType<2u>`, read here
/// from the raw kernel name); TB/s = bytes over the kernel's duration (raw JSON).
#[test]
fn cat_of_a_tensor_list_is_a_copy_with_known_bytes() {
    if shared_data().is_none() {
        return;
    }
    for rel in [H100, MI300] {
        let ev = events(rel);
        let cat = ev.iter().find(|e| e["name"] == "aten::cat").unwrap();
        let list = cat["args"]["Input Dims"][0].as_array().unwrap().clone();
        let elements: f64 = list.iter().map(numel).sum();
        let kernel = ev
            .iter()
            .find(|e| {
                e["cat"] == "kernel" && e["name"].as_str().unwrap().contains("CatArrayBatchedCopy")
            })
            .unwrap();
        let name = kernel["name"].as_str().unwrap();
        let size: f64 = name.split("OpaqueType<").nth(1).unwrap()[..1]
            .parse()
            .unwrap();
        let kernel_ns = kernel["dur"].as_f64().unwrap() * 1e3;
        let report = ops_json(rel);
        let row = rows(&report)
            .iter()
            .find(|r| r["op"] == "aten::cat")
            .unwrap_or_else(|| panic!("{rel}: no aten::cat row"));
        assert_eq!(row["input_lists"][0], Value::Array(list), "{rel}");
        assert_eq!(row["count"], 1);
        let bytes = row["bytes"].as_f64().unwrap();
        assert_eq!(bytes, 2.0 * elements * size, "{rel}");
        let tbps = row["tbps"].as_f64().unwrap();
        let want = bytes / (row["total_ns"].as_f64().unwrap() * 1e-9) / 1e12;
        assert!((tbps - want).abs() < 1e-12, "{rel}");
        assert!(
            (row["total_ns"].as_f64().unwrap() - kernel_ns).abs() <= 1.0,
            "{rel}"
        );
        assert!(row["reason"].is_null(), "{rel}: {}", row["reason"]);
        assert_eq!(row["over_peak"], false);
    }
}

/// Conversions move the source at its dtype and the destination at its own. sglang's
/// `aten::to(int [32], dtype=4 (Long))`: 32·4 + 32·8 = 384 bytes per call (the input's size
/// twice gave 256). `hta_trace_filter` rank 1's `copy_(double <- float)`: 12 bytes per element.
/// In that trace `_to_copy`'s dtype is a Scalar without its value: it is refused and the
/// `copy_` beneath, which records both types, takes the row.
#[test]
#[ignore = "wrong premise: sglang's int->long aten::to runs inside aten::cumsum, the outermost modelled op, so it has no row of its own; the test needs another real conversion"]
fn conversions_count_each_side_at_its_own_dtype() {
    if shared_data().is_none() {
        return;
    }
    let ev = events(SGLANG);
    let calls = ev
        .iter()
        .filter(|e| {
            e["name"] == "aten::to"
                && e["args"]["Input type"][0] == "int"
                && e["args"]["Concrete Inputs"][1] == "4"
        })
        .count();
    assert!(calls > 0);
    let report = ops_json(SGLANG);
    let to = rows(&report)
        .iter()
        .find(|r| r["op"] == "aten::to" && r["dtypes"][0] == "int")
        .unwrap();
    let n = numel(&to["shapes"][0]);
    let per_call = to["bytes"].as_f64().unwrap() / to["count"].as_f64().unwrap();
    assert_eq!(per_call, n * 4.0 + n * 8.0);
    assert!(to["model"].as_str().unwrap().starts_with("copy bytes"));

    let report = ops_json(FILTER1);
    let copy = rows(&report)
        .iter()
        .find(|r| {
            r["op"] == "aten::copy_" && r["dtypes"][0] == "double" && r["dtypes"][1] == "float"
        })
        .unwrap();
    let n = numel(&copy["shapes"][1]);
    let per_call = copy["bytes"].as_f64().unwrap() / copy["count"].as_f64().unwrap();
    assert_eq!(per_call, n * 4.0 + n * 8.0);
    let refused = rows(&report)
        .iter()
        .filter(|r| r["op"] == "aten::_to_copy")
        .collect::<Vec<_>>();
    for r in refused {
        assert!(r["model"].is_null());
        assert!(
            r["reason"].as_str().unwrap().contains("without its value"),
            "{}",
            r["reason"]
        );
    }
}

/// On every TraceLens trace with a known device: a row is `over_peak` exactly when its % of
/// peak passes 100, the summary counts them, and the text names each one in a note.
#[test]
fn no_row_passes_its_peak_silently() {
    if shared_data().is_none() {
        return;
    }
    for rel in [B200, H100, MI300, SGLANG] {
        let report = ops_json(rel);
        let over: Vec<&Value> = rows(&report)
            .iter()
            .filter(|r| r["peak_pct"].as_f64().is_some_and(|p| p > 100.0))
            .collect();
        for r in rows(&report) {
            let flagged = r["peak_pct"].as_f64().is_some_and(|p| p > 100.0);
            assert_eq!(r["over_peak"], flagged, "{rel}: {}", r["op"]);
        }
        assert_eq!(report["over_peak_rows"], over.len(), "{rel}");
        let out = text(&ok(&["ops", s(&data(rel)), "--top", "1000"]).stdout);
        let notes = out.lines().filter(|l| l.starts_with("note: ")).count();
        assert_eq!(notes, over.len(), "{rel}:\n{out}");
    }
}

/// `hta_nccl_data` (rank 0 of 2, A100): the NCCL kernels become rows per (kind, message bytes,
/// dtype). Expected from the raw kernels' args: count, summed duration, bytes = In msg nelems
/// x 4 (Float); algbw = bytes / time; busbw = algbw x the kind's factor for 2 ranks (all-reduce
/// 2(n-1)/n = 1, broadcast 1). Rows still add up to the device time.
#[test]
fn collectives_have_rows_with_bytes_algbw_and_busbw() {
    if shared_data().is_none() {
        return;
    }
    let ev = events(NCCL);
    // (kind, bytes) -> (count, summed us)
    let mut want: BTreeMap<(String, u64), (usize, f64)> = BTreeMap::new();
    for k in ev
        .iter()
        .filter(|e| e["cat"] == "kernel" && e["name"].as_str().unwrap().starts_with("ncclKernel"))
    {
        let a = &k["args"];
        let size = match a["dtype"].as_str().unwrap() {
            "Float" => 4,
            "Long" => 8,
            other => panic!("unexpected dtype {other}"),
        };
        let kind = match a["Collective name"].as_str().unwrap() {
            "allreduce" => "all_reduce",
            "broadcast" => "broadcast",
            other => panic!("unexpected {other}"),
        };
        let n = a["In msg nelems"]
            .as_u64()
            .unwrap()
            .max(a["Out msg nelems"].as_u64().unwrap());
        let e = want.entry((kind.to_owned(), n * size)).or_default();
        e.0 += 1;
        e.1 += k["dur"].as_f64().unwrap();
    }
    assert!(!want.is_empty());
    let report = ops_json(NCCL);
    let total: f64 = rows(&report)
        .iter()
        .map(|r| r["total_ns"].as_f64().unwrap())
        .sum();
    assert_eq!(total, report["device_ns"].as_f64().unwrap());
    let got: Vec<&Value> = rows(&report)
        .iter()
        .filter(|r| !r["collective"].is_null())
        .collect();
    assert_eq!(got.len(), want.len());
    for ((kind, bytes), (count, us)) in &want {
        let row = got
            .iter()
            .find(|r| {
                r["collective"]["kind"].is_string()
                    && r["op"] == format!("collective:{kind}")
                    && r["collective"]["message_bytes"] == *bytes
            })
            .unwrap_or_else(|| panic!("no row for {kind} {bytes}"));
        let c = &row["collective"];
        assert_eq!(row["count"], *count);
        let ns = row["total_ns"].as_f64().unwrap();
        assert!(
            (ns - us * 1e3).abs() <= *count as f64,
            "{kind} {bytes}: {ns} vs {us} us"
        );
        assert_eq!(
            row["bytes"].as_f64().unwrap(),
            (*bytes * *count as u64) as f64
        );
        assert_eq!(c["group_size"], 2);
        let algbw = (*bytes * *count as u64) as f64 / ns;
        assert!((c["algbw_gbps"].as_f64().unwrap() - algbw).abs() < 1e-9);
        // Both kinds' factor is 1 for two ranks.
        assert!((c["busbw_gbps"].as_f64().unwrap() - algbw).abs() < 1e-9);
        assert!(row["tbps"].is_null());
    }
    let out = text(&ok(&["ops", s(&data(NCCL))]).stdout);
    assert!(out.contains("GB/s = 10^9 B/s, not GiB/s"), "{out}");
}

/// `strato collectives` on the 8 DLRM ranks: the per-exact-size table holds every instance once;
/// each row's count, median transfer and median busbw equal what the instances (same JSON)
/// give; the unit is stated in the JSON and the text.
#[test]
fn collectives_tabulate_exact_sizes_and_state_their_unit() {
    if shared_data().is_none() {
        return;
    }
    let dir = data("kineto/param_dlrm8");
    let report = json(&["collectives", s(&dir), "--json"]);
    assert!(report["bandwidth_unit"].as_str().unwrap().contains("10^9"));
    let instances = report["collectives"].as_array().unwrap();
    let exact = report["by_exact_size"].as_array().unwrap();
    let counted: u64 = exact.iter().map(|g| g["count"].as_u64().unwrap()).sum();
    assert_eq!(counted as usize, instances.len());
    let median = |mut v: Vec<f64>| -> Value {
        v.sort_by(f64::total_cmp);
        let n = v.len();
        match n {
            0 => Value::Null,
            _ if n % 2 == 1 => v[n / 2].into(),
            _ => ((v[n / 2 - 1] + v[n / 2]) / 2.0).into(),
        }
    };
    let mut with_size = 0;
    for g in exact {
        let mine: Vec<&Value> = instances
            .iter()
            .filter(|i| i["kind"] == g["kind"] && i["bytes"] == g["bytes"])
            .collect();
        assert_eq!(g["count"], mine.len());
        let of = |key: &str| -> Vec<f64> {
            mine.iter()
                .filter(|i| i["complete"] == true)
                .filter_map(|i| i[key].as_f64())
                .collect()
        };
        assert_eq!(g["transfer_ns_median"], median(of("transfer_ns")));
        assert_eq!(g["busbw_gbps_median"], median(of("busbw_gbps")));
        if !g["bytes"].is_null() {
            with_size += 1;
        }
    }
    assert!(with_size > 0, "the all-reduces have sizes");
    let out = text(&ok(&["collectives", s(&dir)]).stdout);
    assert!(out.contains("by kind and exact size"), "{out}");
    assert!(out.contains("GB/s = 10^9 B/s"), "{out}");
}
