//! Device detection per importer, on the real files: each importer's device record (Kineto
//! `deviceProperties`, nsys `TARGET_INFO_GPU`, rocprofv3 agents, the JAX XPlane's device plane)
//! leads to the right device-table row ([`strato_analysis::models::devices::detect`]); variants of
//! the same files with the name removed fall back to SM/CU count + memory; a device the table lacks
//! is unknown and the layers roofline says "not in the device table". The variants are written
//! with serde_json / rusqlite from the real files (only the fields named are changed).

#![allow(clippy::unwrap_used)] // test helpers panic on broken fixtures by design

mod common;
use common::data;

use std::io::{Read, Write};
use std::path::Path;

use serde_json::Value;
use strato_analysis::analyzed::Analyzed;
use strato_analysis::cross_stack::layers::{layers, LayersOptions};
use strato_analysis::models::devices::{detect, DetectedBy};
use strato_io::{import_paths, ImportOptions};
use strato_trace::Trace;

fn import(path: &Path) -> Trace {
    import_paths(&[path.to_path_buf()], &ImportOptions::default()).unwrap()
}

/// A device's reported name, and its detected row with how it was found.
type Found = (Option<String>, Option<(String, DetectedBy)>);

/// Every device of the trace with its detected row and how it was found.
fn detected(trace: &Trace) -> Vec<Found> {
    trace
        .devices
        .iter()
        .map(|d| {
            (
                d.name.clone(),
                detect(d, None).map(|x| (x.spec.name.to_string(), x.by)),
            )
        })
        .collect()
}

/// Every device the importer has a record for (a name or an SM/CU count) is found as `want`;
/// a device known only from its events (the MI300X Falconsai trace runs on device 2 but
/// describes device 0 only) has nothing to detect and stays unknown.
fn assert_all(trace: &Trace, what: &str, want: Option<(&str, DetectedBy)>) {
    let got = detected(trace);
    let mut recorded = 0;
    for (d, (name, row)) in trace.devices.iter().zip(&got) {
        let row = row.as_ref().map(|(r, by)| (r.as_str(), *by));
        if name.is_none() && d.sm_count.is_none() {
            assert_eq!(row, None, "{what}: device {} has no record", d.index);
            continue;
        }
        recorded += 1;
        assert_eq!(row, want, "{what}: device {} {name:?}", d.index);
    }
    assert!(recorded > 0, "{what}: no device record");
}

fn read_gz_json(path: &Path) -> Value {
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

fn write_gz_json(path: &Path, v: &Value) {
    let mut w = flate2::write::GzEncoder::new(
        std::fs::File::create(path).unwrap(),
        flate2::Compression::fast(),
    );
    w.write_all(serde_json::to_string(v).unwrap().as_bytes())
        .unwrap();
    w.finish().unwrap();
}

/// The trace's `deviceProperties` edited by `edit`, written as a new gzipped trace.
fn kineto_variant(rel: &str, dir: &Path, tag: &str, edit: impl Fn(&mut Value)) -> Trace {
    let mut v = read_gz_json(&data(rel));
    for d in v["deviceProperties"].as_array_mut().unwrap() {
        edit(d);
    }
    let path = dir.join(format!("{tag}.json.gz"));
    write_gz_json(&path, &v);
    import(&path)
}

fn roofline_note(trace: &Trace) -> Option<String> {
    let report = layers(&Analyzed::new(trace), &LayersOptions::default());
    report
        .notes
        .into_iter()
        .find(|n| n.contains("not in the device table"))
}

#[test]
fn kineto_device_properties() {
    let dir = tempfile::tempdir().unwrap();
    // (file, reported name in its deviceProperties, table row)
    for (rel, reported, row) in [
        (
            "kineto/tracelens/h100_Falconsai_nsfw_image_detection.json.gz",
            "NVIDIA H100 80GB HBM3",
            "H100 SXM5",
        ),
        (
            "kineto/tracelens/mi300_Falconsai_nsfw_image_detection.json.gz",
            "AMD Instinct MI300X VF",
            "MI300X",
        ),
        (
            "kineto/tracelens/b200_eager_trace.json.gz",
            "NVIDIA B200",
            "B200",
        ),
    ] {
        let raw = read_gz_json(&data(rel));
        let names: Vec<&str> = raw["deviceProperties"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["name"].as_str().unwrap())
            .collect();
        assert!(names.iter().all(|n| *n == reported), "{rel}: {names:?}");
        let trace = import(&data(rel));
        assert_all(&trace, rel, Some((row, DetectedBy::Name)));
        // The MI300X run's kernels are on device 2 while its deviceProperties describe
        // device 0 only: the roofline device has no record (left: the importer could take the
        // single described board for the single device used).
        let note = roofline_note(&trace);
        if row == "MI300X" {
            assert!(note
                .as_deref()
                .is_some_and(|n| n.starts_with("device 2 (unnamed)")));
        } else {
            assert_eq!(note, None, "{rel}");
        }
        // Name removed: SM count + memory (+ compute major) find the same row.
        let unnamed = kineto_variant(rel, dir.path(), "unnamed", |d| {
            d["name"] = Value::from("");
        });
        assert_all(
            &unnamed,
            &format!("{rel} unnamed"),
            Some((row, DetectedBy::SmCountAndMemory)),
        );
        let absent = kineto_variant(rel, dir.path(), "absent", |d| {
            d.as_object_mut().unwrap().remove("name");
        });
        assert_all(
            &absent,
            &format!("{rel} no name"),
            Some((row, DetectedBy::SmCountAndMemory)),
        );
    }
    // The vLLM piecewise run records an empty name: found by its 304 CUs and 192 GiB.
    let rel = "kineto/tracelens/vllm_prefilldecode_piecewise_graph_execution.json.gz";
    let raw = read_gz_json(&data(rel));
    assert_eq!(raw["deviceProperties"][0]["name"], "");
    assert_all(
        &import(&data(rel)),
        rel,
        Some(("MI300X", DetectedBy::SmCountAndMemory)),
    );
    // An unknown board: a product name the table lacks, and counts no row has.
    let rel = "kineto/tracelens/h100_Falconsai_nsfw_image_detection.json.gz";
    let unknown = kineto_variant(rel, dir.path(), "unknown", |d| {
        d["name"] = Value::from("Example Accelerator X1");
    });
    assert_all(&unknown, "unknown name", None);
    let note = roofline_note(&unknown).expect("a 'not in the device table' note");
    assert!(note.contains("Example Accelerator X1"), "{note}");
    let odd = kineto_variant(rel, dir.path(), "odd", |d| {
        d["name"] = Value::from("");
        d["numSms"] = Value::from(7);
    });
    assert_all(&odd, "unnamed, 7 SMs", None);
    assert!(roofline_note(&odd).unwrap().contains("unnamed"));
}

#[test]
fn nsys_target_info_gpu() {
    let rel = "nsys/pipit_cloverleaf_cuda.sqlite";
    let trace = import(&data(rel));
    assert_eq!(trace.devices.len(), 4);
    assert_all(&trace, rel, Some(("A100 SXM4 80GB", DetectedBy::Name)));
    let dir = tempfile::tempdir().unwrap();
    let variant = |tag: &str, sql: &str| -> Trace {
        let path = dir.path().join(format!("{tag}.sqlite"));
        std::fs::copy(data(rel), &path).unwrap();
        let db = rusqlite::Connection::open(&path).unwrap();
        db.execute_batch(sql).unwrap();
        drop(db);
        import(&path)
    };
    let unnamed = variant("unnamed", "UPDATE TARGET_INFO_GPU SET name = '';");
    assert!(unnamed.devices.iter().all(|d| d.name.is_none()));
    assert_all(
        &unnamed,
        "nsys unnamed",
        Some(("A100 SXM4 80GB", DetectedBy::SmCountAndMemory)),
    );
    // Half the memory: the 40 GB board.
    let small = variant(
        "small",
        "UPDATE TARGET_INFO_GPU SET name = '', totalMemory = totalMemory / 2;",
    );
    assert_all(
        &small,
        "nsys unnamed 40GB",
        Some(("A100 SXM4 40GB", DetectedBy::SmCountAndMemory)),
    );
    let unknown = variant(
        "unknown",
        "UPDATE TARGET_INFO_GPU SET name = 'NVIDIA Example GPU';",
    );
    assert_all(&unknown, "nsys unknown", None);
    assert!(roofline_note(&unknown)
        .unwrap()
        .contains("NVIDIA Example GPU"));
}

#[test]
fn rocprof_agents() {
    let rel = "rocprof/tracelens_908_results.json.gz";
    let raw = read_gz_json(&data(rel));
    let gpus: Vec<&Value> = raw["rocprofiler-sdk-tool"][0]["agents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["type"] == 2)
        .collect();
    assert_eq!(gpus.len(), 8);
    assert!(gpus
        .iter()
        .all(|a| a["product_name"] == "AMD Instinct MI350X" && a["cu_count"] == 256));
    // MI350X is not in the table. Its CU count and memory are the MI355X's, but a product name
    // the table lacks is never matched by counts: unknown, not a wrong MI355X.
    let trace = import(&data(rel));
    assert_eq!(trace.devices.len(), 8);
    assert_all(&trace, rel, None);
    assert!(roofline_note(&trace).unwrap().contains("MI350X"));
    let dir = tempfile::tempdir().unwrap();
    // Variants keep the first 500 dispatches: detection reads the agents only.
    let mut small = raw.clone();
    small["rocprofiler-sdk-tool"][0]["buffer_records"]["kernel_dispatch"]
        .as_array_mut()
        .unwrap()
        .truncate(500);
    let variant = |tag: &str, edit: &dyn Fn(&mut Value)| -> Trace {
        let mut v = small.clone();
        for a in v["rocprofiler-sdk-tool"][0]["agents"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .filter(|a| a["type"] == 2)
        {
            edit(a);
        }
        let path = dir.path().join(format!("{tag}.json.gz"));
        write_gz_json(&path, &v);
        import(&path)
    };
    let renamed = variant("mi355x", &|a| {
        a["product_name"] = Value::from("AMD Instinct MI355X");
    });
    assert_all(&renamed, "renamed", Some(("MI355X", DetectedBy::Name)));
    // Product and model names removed: the importer falls back to the gfx id, which names no
    // product, so counts decide; at the MI350X's 2200 MHz the MI355X row does not apply.
    let gfx_only = |a: &mut Value| {
        a["product_name"] = Value::from("");
        a["model_name"] = Value::from("");
    };
    let unnamed = variant("gfx", &gfx_only);
    assert!(unnamed
        .devices
        .iter()
        .all(|d| d.name.as_deref() == Some("gfx950")));
    assert_all(&unnamed, "gfx950 at 2200 MHz", None);
    let fast = variant("gfx2400", &|a| {
        gfx_only(a);
        a["max_engine_clk_fcompute"] = Value::from(2400);
    });
    assert_all(
        &fast,
        "gfx950 at 2400 MHz",
        Some(("MI355X", DetectedBy::SmCountAndMemory)),
    );
}

#[test]
fn xplane_device_plane() {
    // The JAX 0.8 run's device plane names no product (an empty name, 304 CUs, 192 GiB).
    let rel = "xplane_jax/mi300_jax_conv_minimal_08.xplane.pb";
    let trace = import(&data(rel));
    let gpus: Vec<_> = trace
        .devices
        .iter()
        .filter(|d| d.sm_count.is_some())
        .collect();
    assert!(!gpus.is_empty());
    for d in gpus {
        assert!(
            d.name.as_deref().is_none_or(|n| n.trim().is_empty()),
            "{d:?}"
        );
        assert_eq!(d.sm_count, Some(304));
        let got = detect(d, None).unwrap();
        assert_eq!(
            (got.spec.name.as_ref(), got.by),
            ("MI300X", DetectedBy::SmCountAndMemory)
        );
    }
}
