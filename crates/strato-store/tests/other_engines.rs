//! Another engine reads a profile: runs `tests/read_with_duckdb.py` (DuckDB + pyarrow). Skips,
//! with a message, when python3 lacks them (`pip install duckdb pyarrow`).
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use strato_trace::Trace;

fn python_has_duckdb() -> bool {
    Command::new("python3")
        .args(["-c", "import duckdb, pyarrow"])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn check_with_duckdb(trace: &Trace, dir: &Path) {
    strato_store::write(trace, dir).unwrap();
    let mut levels = BTreeMap::<&str, usize>::new();
    for span in &trace.spans {
        *levels.entry(span.level.as_str()).or_default() += 1;
    }
    let expected = serde_json::json!({
        "levels": levels,
        "args_refs": trace.spans.iter().filter(|s| s.args.is_some()).count(),
    });
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/read_with_duckdb.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(dir)
        .arg(expected.to_string())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    eprint!("{stdout}");
}

#[test]
fn duckdb_and_pyarrow_read_a_profile() {
    if !python_has_duckdb() {
        eprintln!(
            "skipping: python3 with duckdb and pyarrow not found (pip install duckdb pyarrow)"
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    check_with_duckdb(&common::full_trace(), &tmp.path().join("full"));
    check_with_duckdb(&Trace::default(), &tmp.path().join("empty"));

    let nccl = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/kineto/hta_nccl_data.json.gz");
    if nccl.exists() {
        let trace = strato_io::import_paths(&[nccl], &strato_io::ImportOptions::default()).unwrap();
        check_with_duckdb(&trace, &tmp.path().join("nccl"));
    }
}
