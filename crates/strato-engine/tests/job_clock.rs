//! The window an analysis states over a job's ranks is on the job's clock (each rank's times
//! shifted as `strato collectives` aligns the ranks' clocks), whatever path the engine reads the
//! job by (its rank files one by one, or its profile as one stream): a rank whose clock runs 1000 s
//! ahead of the others' does not stretch it. Every registered analysis that states one window
//! (`window_start_ns` and `window_end_ns`, or `window_ns` as `[start, end]`) is held to it, on the
//! eight DLRM rank files.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};

use common::{data, document, engine};
use strato_engine::registry::ANALYSES;

/// 1000 s, in the files' microseconds.
const AHEAD_US: f64 = 1e9;

/// The DLRM rank files written to `dir`, the file of rank 3 with every time `AHEAD_US` later
/// when `skew`.
fn write_job(dir: &Path, skew: bool) {
    for entry in std::fs::read_dir(data("kineto/param_dlrm8")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        let mut doc = document(&format!("kineto/param_dlrm8/{name}"));
        if skew && name.starts_with("worker3_") {
            for event in doc["traceEvents"].as_array_mut().unwrap() {
                if let Some(ts) = event.get("ts").and_then(serde_json::Value::as_f64) {
                    event["ts"] = serde_json::json!(ts + AHEAD_US);
                }
            }
        }
        let target = dir.join(name.trim_end_matches(".gz"));
        std::fs::write(target, serde_json::to_vec(&doc).unwrap()).unwrap();
    }
}

/// Each registered analysis's stated window on `inputs`, for those that state one.
fn windows(inputs: &[PathBuf]) -> Vec<(&'static str, (i64, i64))> {
    let engine = engine();
    ANALYSES
        .iter()
        .filter_map(|analysis| {
            let outcome = analysis.run(&engine, inputs, &[]).unwrap();
            let json: serde_json::Value = serde_json::from_str(&outcome.json()).unwrap();
            let window = match json.get("window_ns") {
                // `collectives`: the instances' window, `[start, end]`.
                Some(serde_json::Value::Array(ends)) => (ends[0].as_i64()?, ends[1].as_i64()?),
                _ => (
                    json.get("window_start_ns")?.as_i64()?,
                    json.get("window_end_ns")?.as_i64()?,
                ),
            };
            Some((analysis.name, window))
        })
        .collect()
}

#[test]
fn every_window_over_the_dlrm_job_is_on_the_jobs_clock() {
    if !data("kineto/param_dlrm8").is_dir() {
        eprintln!("skipping: the DLRM job is not present");
        return;
    }
    let (shipped, skewed) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_job(shipped.path(), false);
    write_job(skewed.path(), true);
    // Rank by rank (a directory of rank files) and as one stream (the job's profile).
    let profiles = tempfile::tempdir().unwrap();
    let store = |dir: &Path| {
        let engine = engine();
        let inputs = vec![dir.to_owned()];
        let trace = (engine.load(&inputs, &engine.import_options(true).unwrap())).unwrap();
        let profile = profiles.path().join(dir.file_name().unwrap());
        strato_store::write(&trace, &profile).unwrap();
        profile
    };
    let (shipped_store, skewed_store) = (store(shipped.path()), store(skewed.path()));
    for (a, b, what) in [
        (
            shipped.path().to_owned(),
            skewed.path().to_owned(),
            "rank files",
        ),
        (shipped_store, skewed_store, "profile"),
    ] {
        same_windows(&windows(&[a]), &windows(&[b]), what);
    }
}

/// Asserts that the windows `a` of the job as shipped and `b` of the skewed job agree.
fn same_windows(a: &[(&'static str, (i64, i64))], b: &[(&'static str, (i64, i64))], what: &str) {
    let names: Vec<&str> = a.iter().map(|(name, _)| *name).collect();
    for must in ["ops", "modules", "advise", "collectives"] {
        assert!(
            names.contains(&must),
            "{what}: {must} states no window: {names:?}"
        );
    }
    assert_eq!(a.len(), b.len());
    for ((name, a), (_, b)) in a.iter().zip(b) {
        // The job as recorded spans about 20 ms; the clocks' alignment is estimated to within
        // microseconds (the collectives' kernel ends), so the windows may differ by that much.
        assert!(a.1 - a.0 < 60_000_000, "{what}: {name}: {a:?}");
        assert!(
            (a.0 - b.0).abs() <= 50_000,
            "{what}: {name} start: {a:?} vs {b:?}"
        );
        assert!(
            (a.1 - b.1).abs() <= 50_000,
            "{what}: {name} end: {a:?} vs {b:?}"
        );
    }
}
