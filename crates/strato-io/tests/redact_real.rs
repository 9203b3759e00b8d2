//! Redaction over the real traces of `../shared/data`: their secrets were replaced by
//! `REDACTED` before they were published, so the rules (docs/profile-format.md, "Secrets")
//! must find nothing in any of them (no configuration, kernel argument or device name taken
//! for a secret), and a secret written into one real event's attributes is found there and
//! nowhere else.
#![allow(clippy::unwrap_used)] // test helpers panic on broken fixtures by design

use std::path::{Path, PathBuf};

use strato_io::redact::{redact_args, redact_trace, Redacted, MARKER};
use strato_io::{import_file, ImportOptions};

fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(rel)
}

/// Every file under `dir`, recursively, sorted.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_none_or(|e| e != "md") {
            out.push(path);
        }
    }
    out.sort();
}

#[test]
fn real_traces_hold_nothing_the_rules_take_for_a_secret() {
    let mut all = Vec::new();
    files(&data(""), &mut all);
    if all.is_empty() {
        eprintln!("no shared data: skipped");
        return;
    }
    let mut imported = 0;
    let mut blobs = 0;
    for path in &all {
        let Ok(mut trace) = import_file(path, &ImportOptions::default()) else {
            continue;
        };
        imported += 1;
        blobs += trace.args.len();
        let before = trace.clone();
        let found = redact_trace(&mut trace);
        assert_eq!(found, Redacted::default(), "{}", path.display());
        assert!(trace == before, "{} changed", path.display());
    }
    assert!(imported >= 20, "only {imported} shared files imported");
    assert!(blobs > 100_000, "only {blobs} args blobs scanned");
}

#[test]
fn a_secret_in_one_real_event_is_redacted_there_only() {
    let path = data("kineto/hta_nccl_data.json.gz");
    if !path.exists() {
        eprintln!("no shared data: skipped");
        return;
    }
    let mut trace = import_file(&path, &ImportOptions::default()).unwrap();
    let n = trace.args.len();
    assert!(n > 10);
    let original: Vec<String> = trace.args.iter().map(|b| b.to_string()).collect();
    // A blob in the middle with at least one entry (the secret goes in before it).
    let target = (n / 2..n).find(|&i| original[i].len() > 2).unwrap();
    let mut args = strato_trace::ArgsTable::default();
    for (i, blob) in original.iter().enumerate() {
        if i == target {
            let with = blob.replacen('{', "{\"cmd\":\"torchrun --hf-token tok_0123456789\",", 1);
            args.push(&with);
        } else {
            args.push(blob);
        }
    }
    trace.args = args;
    assert_eq!(redact_args(&mut trace.args), 1);
    for (i, blob) in trace.args.iter().enumerate() {
        if i == target {
            assert!(
                !blob.contains("tok_0123456789") && blob.contains(MARKER),
                "{blob}"
            );
            // The rest of the blob is the same object.
            let mut got: serde_json::Value = serde_json::from_str(&blob).unwrap();
            let want: serde_json::Value = serde_json::from_str(&original[i]).unwrap();
            got.as_object_mut().unwrap().remove("cmd");
            assert_eq!(got, want);
        } else {
            assert_eq!(blob, original[i], "blob {i} changed");
        }
    }
}
