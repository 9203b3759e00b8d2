//! `strato collectives` on the real multi-rank files (issue 15): every collective kernel of
//! the 8 DLRM ranks matched, checked by an independent Python script that reads the raw files
//! (tests/cli/scripts/check_collectives.py); the straggler named with what it was doing; the
//! 2-rank sample of a 128-rank job labelled incomplete; a TraceFuse-merged file (built here
//! from the 8 ranks by TraceLens's convention) giving the same answer as the directory.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common::{data, json, ok, s, shared_data, text};

fn dlrm() -> Option<PathBuf> {
    shared_data().map(|_| data("kineto/param_dlrm8"))
}

fn rank_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".json.gz"))
        .collect();
    files.sort();
    files
}

/// Runs the independent checker on `report` against `traces`; its summary line.
fn python_check(report: &Value, traces: &[PathBuf]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report.json");
    std::fs::write(&path, serde_json::to_vec(report).unwrap()).unwrap();
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/scripts/check_collectives.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(&path)
        .args(traces)
        .output()
        .expect("python3 runs");
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "independent check failed:\n{stdout}{}",
        text(&out.stderr)
    );
    stdout
}

#[test]
fn every_collective_kernel_of_the_8_dlrm_ranks_is_matched_and_checked_independently() {
    let Some(dir) = dlrm() else { return };
    let report = json(&["collectives", s(&dir), "--json"]);
    let summary = python_check(&report, &rank_files(&dir));
    // 5 all-to-alls (as send/recv kernels) and 3 all-reduces per rank (MANIFEST.md).
    assert!(
        summary.starts_with("ok: 64 kernels on 8 ranks, 8 collectives"),
        "{summary}"
    );
    let collectives = report["collectives"].as_array().unwrap();
    assert!(collectives
        .iter()
        .all(|c| c["complete"] == true && c["ranks"].as_array().unwrap().len() == 8));
    let kinds: Vec<&str> = collectives
        .iter()
        .map(|c| c["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.iter().filter(|k| **k == "send/recv").count(), 5);
    assert_eq!(kinds.iter().filter(|k| **k == "all_reduce").count(), 3);
    for c in collectives {
        // Fields the trace cannot fill are null, never 0: send/recv kernels have no size.
        if c["kind"] == "send/recv" {
            assert!(c["bytes"].is_null() && c["algbw_gbps"].is_null() && c["busbw_gbps"].is_null());
        } else {
            assert!(c["bytes"].as_u64().unwrap() > 0);
            assert!(c["busbw_gbps"].as_f64().unwrap() > 0.0);
        }
        // The last rank waits 0; everyone's wait is within its kernel.
        let last = c["last_rank"].as_i64().unwrap();
        for m in c["ranks"].as_array().unwrap() {
            let (start, end) = (
                m["start_ns"].as_i64().unwrap(),
                m["end_ns"].as_i64().unwrap(),
            );
            let wait = m["wait_ns"].as_i64().unwrap();
            assert!((0..=end - start).contains(&wait));
            if m["rank"].as_i64() == Some(last) {
                assert_eq!(wait, 0);
            }
        }
        assert!(c["transfer_ns"].as_i64().unwrap() > 0);
    }
    // Per rank: waits and last arrivals add up to the instances'.
    let ranks = report["ranks"].as_array().unwrap();
    let lasts: u64 = ranks
        .iter()
        .map(|r| r["last_arrivals"].as_u64().unwrap())
        .sum();
    assert_eq!(lasts, 8);
    let waits: i64 = ranks.iter().map(|r| r["wait_ns"].as_i64().unwrap()).sum();
    let imposed: i64 = ranks
        .iter()
        .map(|r| r["imposed_wait_ns"].as_i64().unwrap())
        .sum();
    assert_eq!(waits, imposed);
    // The clock: the ranks share a host clock; whatever was shifted stays within the error.
    assert!(report["clock"]["max_error_ns"].as_i64().is_some());
}

#[test]
fn the_dlrm_straggler_is_named_with_what_it_was_doing() {
    let Some(dir) = dlrm() else { return };
    let out = text(&ok(&["collectives", s(&dir)]).stdout);
    let report = json(&["collectives", s(&dir), "--json"]);
    let worst = report["worst_rank"].as_i64().expect("a straggler");
    // The straggler imposes the most wait, recomputed from the per-rank rows.
    let max = report["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .max_by_key(|r| r["imposed_wait_ns"].as_i64().unwrap())
        .unwrap();
    assert_eq!(max["rank"].as_i64(), Some(worst));
    assert!(
        out.contains(&format!("straggler: rank {worst} arrives last")),
        "{out}"
    );
    let first = &report["stragglers"][0];
    assert_eq!(first["rank"].as_i64(), Some(worst));
    let cause = &first["cause"];
    assert!(cause["cpu_op"].is_string(), "{cause}");
    assert!(cause["cpu_stratum"].is_string());
    assert!(["late_launch", "device_busy", "other"].contains(&cause["verdict"].as_str().unwrap()));
    assert!(out.contains("CPU: "), "{out}");
}

#[test]
fn the_two_ranks_of_a_128_rank_job_are_labelled_incomplete() {
    let Some(data_dir) = shared_data() else {
        return;
    };
    let dir = data_dir.join("kineto/hta_trace_filter");
    let report = json(&["collectives", s(&dir), "--json"]);
    let summary = python_check(&report, &rank_files(&dir));
    assert!(
        summary.starts_with("ok: 20 kernels on 2 ranks"),
        "{summary}"
    );
    let collectives = report["collectives"].as_array().unwrap();
    assert!(!collectives.is_empty());
    for c in collectives {
        assert_eq!(c["complete"], false);
        assert!(c["last_rank"].is_null() && c["transfer_ns"].is_null());
        assert!(c["ranks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["wait_ns"].is_null()));
    }
    assert!(report["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["wait_ns"].is_null() && r["imposed_wait_ns"].is_null()));
    let out = text(&ok(&["collectives", s(&dir)]).stdout);
    assert!(
        out.contains("10 incomplete: peers not in the input"),
        "{out}"
    );
}

/// Merges per-rank Kineto files into one as TraceLens's TraceFuse does (../shared/FORMATS.md):
/// pid = raw pid + rank x 1e8, `args.rank`, `args.pid_raw`; correlations + rank x 1e8 with
/// `args.correlation_raw`. The first file's other top-level keys are kept (written first).
fn fuse(files: &[PathBuf], out: &Path) {
    let mut doc = serde_json::Map::new();
    let mut events = Vec::new();
    for (rank, path) in files.iter().enumerate() {
        let gz = flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap());
        let mut v: Value = serde_json::from_reader(gz).unwrap();
        let stride = rank as i64 * 100_000_000;
        for mut e in std::mem::take(v["traceEvents"].as_array_mut().unwrap()) {
            let raw_pid = e["pid"].as_i64();
            if let Some(p) = raw_pid {
                e["pid"] = (p + stride).into();
            }
            if !e["args"].is_object() {
                e["args"] = Value::Object(Default::default());
            }
            let args = e["args"].as_object_mut().unwrap();
            args.insert("rank".into(), rank.into());
            if let Some(p) = raw_pid {
                args.insert("pid_raw".into(), p.into());
            }
            if let Some(c) = args.get("correlation").and_then(Value::as_i64) {
                args.insert("correlation_raw".into(), c.into());
                args.insert("correlation".into(), (c + stride).into());
            }
            events.push(e);
        }
        if rank == 0 {
            for (k, val) in v.as_object().unwrap() {
                if k != "traceEvents" {
                    doc.insert(k.clone(), val.clone());
                }
            }
        }
    }
    doc.insert("traceEvents".into(), Value::Array(events));
    let mut f = std::fs::File::create(out).unwrap();
    serde_json::to_writer(&mut f, &doc).unwrap();
    f.flush().unwrap();
}

/// Per member: rank, start, end, wait.
type MemberTimes = (i64, i64, i64, Option<i64>);

/// What must not depend on the input layout: per instance, kind and per-rank times and waits.
fn essence(report: &Value) -> Vec<(String, Option<i64>, Vec<MemberTimes>)> {
    report["collectives"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let mut members: Vec<_> = c["ranks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| {
                    (
                        m["rank"].as_i64().unwrap(),
                        m["start_ns"].as_i64().unwrap(),
                        m["end_ns"].as_i64().unwrap(),
                        m["wait_ns"].as_i64(),
                    )
                })
                .collect();
            members.sort();
            (
                c["kind"].as_str().unwrap().to_owned(),
                c["last_rank"].as_i64(),
                members,
            )
        })
        .collect()
}

#[test]
fn a_tracefuse_merged_file_gives_the_same_answer_as_the_rank_directory() {
    let Some(dir) = dlrm() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let merged = tmp.path().join("merged.json");
    fuse(&rank_files(&dir), &merged);
    let from_dir = json(&["collectives", s(&dir), "--json"]);
    let from_merged = json(&["collectives", s(&merged), "--json"]);
    assert_eq!(from_merged["ranks"].as_array().unwrap().len(), 8);
    assert_eq!(essence(&from_merged), essence(&from_dir));
    assert_eq!(from_merged["worst_rank"], from_dir["worst_rank"]);
    assert_eq!(
        from_merged["clock"]["max_error_ns"],
        from_dir["clock"]["max_error_ns"]
    );
    // `info` sees 8 ranks in the one file.
    let info = json(&["info", s(&merged), "--json"]);
    let ranks = info["sources"].as_array().map_or(0, Vec::len);
    assert_eq!(ranks, 8, "{info}");
}

#[test]
fn a_file_that_is_not_a_trace_is_one_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("bad.json");
    std::fs::write(&bad, "{\"traceEvents\": [ {\"ph\": \"X\", \"ts\": ").unwrap();
    let err = crate::common::fails(&["collectives", s(&bad)]);
    assert!(err.contains("bad.json"), "{err}");
}

/// Writes a 128-rank job: the 8 DLRM ranks repeated 16 times, rank r a copy of DLRM rank
/// r mod 8 with `distributedInfo` rank r of 128.
fn job_of_128(dlrm_dir: &Path, out: &Path) {
    let docs: Vec<Value> = rank_files(dlrm_dir)
        .iter()
        .map(|p| {
            let gz = flate2::read::GzDecoder::new(std::fs::File::open(p).unwrap());
            serde_json::from_reader(gz).unwrap()
        })
        .collect();
    for r in 0..128 {
        let mut doc = docs[r % docs.len()].clone();
        doc["distributedInfo"]["rank"] = r.into();
        doc["distributedInfo"]["world_size"] = 128.into();
        let f = std::fs::File::create(out.join(format!("rank{r:03}.json"))).unwrap();
        serde_json::to_writer(std::io::BufWriter::new(f), &doc).unwrap();
    }
}

#[test]
fn a_128_rank_report_stays_under_its_size_bound_and_counts_devices_that_ran_work() {
    let Some(dir) = dlrm() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let job = tmp.path().join("job");
    std::fs::create_dir(&job).unwrap();
    job_of_128(&dir, &job);
    let html_path = tmp.path().join("job.html");
    ok(&["report", s(&job), "-o", s(&html_path)]);
    let html = std::fs::read_to_string(&html_path).unwrap();
    // The documented bound (strato_report::SIZE_BOUND_BYTES, docs/report.md).
    assert!(html.len() < 2 * 1024 * 1024, "{} bytes", html.len());
    // 128 GPUs ran work although every rank lists all 8 GPUs of its node (1024 listed).
    assert!(
        html.contains("<b>128</b><span>devices that ran work"),
        "device card"
    );
    assert!(
        html.contains("<b>128</b><span>processes with spans"),
        "process card"
    );
    // Ranks side by side, details for three of them, the rest folded.
    assert!(html.contains("128 processes side by side"));
    for which in ["slowest: rank", "median: rank", "fastest: rank"] {
        assert!(html.contains(which), "{which}");
    }
    assert!(html.contains("id=\"distributed\""));
    assert!(html.contains("collectives on 128 ranks (8 complete, 0 incomplete"));
    // The collectives: 8 instances of 128 members each (16 copies of each DLRM rank).
    let report = json(&["collectives", s(&job), "--json"]);
    let collectives = report["collectives"].as_array().unwrap();
    assert_eq!(collectives.len(), 8);
    assert!(collectives
        .iter()
        .all(|c| c["complete"] == true && c["ranks"].as_array().unwrap().len() == 128));
}
