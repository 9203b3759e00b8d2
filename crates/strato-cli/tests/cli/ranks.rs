//! Job scale (issue 18 item 4, issue 15 item 10): rank files imported in parallel
//! (`--jobs`, `STRATO_JOBS`) and `gpu-time`, `kernels`, `collectives` run rank by rank
//! (each rank reduced as it is imported; late ranks re-read for the straggler causes). The
//! answers must not depend on the number of jobs, and must be those of the whole trace: a
//! profile directory (`strato import`) is analysed whole, so it is the reference.

use std::path::{Path, PathBuf};

use crate::common::{data, ok, s, shared_data, strato_env, text};

const COMMANDS: [&str; 3] = ["gpu-time", "kernels", "collectives"];

fn stdout_of(args: &[&str], env: &[(&str, &str)]) -> String {
    let out = strato_env(args, env);
    assert!(
        out.status.success(),
        "strato {args:?} {env:?} failed: {}",
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// `strato import inputs -o DIR`: the whole-trace reference.
fn profile_of(inputs: &[&str], dir: &Path) -> PathBuf {
    let prof = dir.join("prof");
    let mut args = vec!["import"];
    args.extend_from_slice(inputs);
    args.extend_from_slice(&["-o", s(&prof)]);
    ok(&args);
    prof
}

#[test]
fn dlrm_answers_do_not_depend_on_the_number_of_jobs_and_equal_the_whole_traces() {
    if shared_data().is_none() {
        return;
    }
    let dir = data("kineto/param_dlrm8");
    let tmp = tempfile::tempdir().unwrap();
    let prof = profile_of(&[s(&dir)], tmp.path());
    // JSON (every number) with 1 and 3 jobs, STRATO_JOBS=2, and the whole trace.
    let mut collectives_json = String::new();
    for command in COMMANDS {
        let args = [command, s(&dir), "--json"];
        let one = stdout_of(&[&["--jobs", "1"], &args[..]].concat(), &[]);
        let three = stdout_of(&[&["--jobs", "3"], &args[..]].concat(), &[]);
        let env = stdout_of(&args, &[("STRATO_JOBS", "2")]);
        assert_eq!(one, three, "{command}: 1 vs 3 jobs");
        assert_eq!(one, env, "{command}: 1 job vs STRATO_JOBS=2");
        // Sources are named the same (the profile keeps them); the answer is the same.
        let whole = stdout_of(&[command, s(&prof), "--json"], &[]);
        assert_eq!(one, whole, "{command}: rank by rank vs whole");
        if command == "collectives" {
            collectives_json = one;
        }
    }
    // The text too (the straggler causes read from the re-read late ranks).
    assert_eq!(
        stdout_of(&["--jobs", "1", "collectives", s(&dir)], &[]),
        stdout_of(&["collectives", s(&prof)], &[]),
    );
    // The straggler causes come from re-reading the late rank: they are there.
    let report: serde_json::Value = serde_json::from_str(&collectives_json).unwrap();
    let stragglers = report["stragglers"].as_array().unwrap();
    assert_eq!(stragglers.len(), 5);
    assert!(stragglers
        .iter()
        .all(|st| st["cause"]["cpu_context"].is_string()));
}

#[test]
fn ranks_known_by_position_are_numbered_as_in_the_whole_trace() {
    if shared_data().is_none() {
        return;
    }
    // A rank file without `distributedInfo` between two that have one, then the 2 sampled
    // ranks of a 128-rank job: ranks by position and by job rank, and several files.
    let tmp = tempfile::tempdir().unwrap();
    let ranks = tmp.path().join("ranks");
    std::fs::create_dir(&ranks).unwrap();
    let files = [
        ("a.json.gz", "kineto/hta_alexnet_trace.json.gz"),
        (
            "b.json.gz",
            "kineto/kineto2021_resnet50_worker0.pt.trace.json.gz",
        ),
        ("c.json.gz", "kineto/hta_nccl_data.json.gz"),
        (
            "d.json.gz",
            "kineto/hta_trace_filter/sampled_rank-0.json.gz",
        ),
    ];
    for (name, rel) in files {
        std::fs::copy(data(rel), ranks.join(name)).unwrap();
    }
    let prof = profile_of(&[s(&ranks)], tmp.path());
    for command in COMMANDS {
        let streamed = stdout_of(&["--jobs", "2", command, s(&ranks), "--json"], &[]);
        let whole = stdout_of(&[command, s(&prof), "--json"], &[]);
        assert_eq!(streamed, whole, "{command}");
    }
    let report: serde_json::Value =
        serde_json::from_str(&stdout_of(&["gpu-time", s(&ranks), "--json"], &[])).unwrap();
    let numbers: Vec<i64> = report["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rank"].as_i64().unwrap())
        .collect();
    // b.json.gz says no rank: it is rank 1 by position.
    assert_eq!(numbers[1], 1, "{numbers:?}");
}

#[test]
fn a_bad_rank_file_is_one_clear_error_whatever_the_jobs() {
    if shared_data().is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ranks = tmp.path().join("ranks");
    std::fs::create_dir(&ranks).unwrap();
    for entry in std::fs::read_dir(data("kineto/param_dlrm8")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, ranks.join(path.file_name().unwrap())).unwrap();
    }
    // Two damaged ranks: the error names the first in order, as a one-by-one import would.
    let mut names: Vec<PathBuf> = std::fs::read_dir(&ranks)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    for bad in [&names[2], &names[6]] {
        let bytes = std::fs::read(bad).unwrap();
        std::fs::write(bad, &bytes[..bytes.len() / 2]).unwrap();
    }
    let first_bad = names[2].file_name().unwrap().to_str().unwrap().to_owned();
    for command in ["gpu-time", "kernels", "collectives", "info"] {
        let mut messages = Vec::new();
        for jobs in ["1", "2", "8"] {
            let out = strato_env(&["--jobs", jobs, command, s(&ranks)], &[]);
            assert_eq!(out.status.code(), Some(2), "{command} --jobs {jobs}");
            let err = text(&out.stderr);
            assert!(err.contains(&first_bad), "{command} --jobs {jobs}: {err}");
            assert!(!err.contains("panicked"), "{err}");
            assert!(
                out.stdout.is_empty(),
                "{command}: nothing printed as if complete"
            );
            messages.push(err);
        }
        assert!(messages.windows(2).all(|w| w[0] == w[1]), "{messages:?}");
    }
}

#[test]
fn a_bad_job_count_is_an_error() {
    let trace =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/kineto/hta_trace_filter");
    for bad in ["0", "many", "-2"] {
        let out = strato_env(&["gpu-time", s(&trace)], &[("STRATO_JOBS", bad)]);
        assert_eq!(out.status.code(), Some(2), "STRATO_JOBS={bad}");
        let err = text(&out.stderr);
        assert!(
            err.contains("STRATO_JOBS") && err.contains("positive integer"),
            "{err}"
        );
    }
    let out = strato_env(&["--jobs", "0", "gpu-time", s(&trace)], &[]);
    assert_eq!(out.status.code(), Some(2));
}
