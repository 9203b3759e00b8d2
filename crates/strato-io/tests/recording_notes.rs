//! A recording whose file ends without its STOP record (the process was SIGKILLed or crashed
//! between two flushes) imports with a note on that process saying so and from when events
//! may be missing; a recording that stopped cleanly has none. The recorder is process-global:
//! this is the only test in this binary that records.

#![allow(clippy::unwrap_used)]
use std::time::Duration;

use serde_json::Value;
use strato_record::{self as rec, Level};

fn process_meta(dir: &std::path::Path) -> Value {
    let trace =
        strato_io::recording::import_dir(dir, &strato_io::ImportOptions::default()).unwrap();
    let meta: Value = serde_json::from_str(&trace.ranks[0].metadata.to_json().unwrap()).unwrap();
    let procs = meta["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 1);
    procs[0].clone()
}

#[test]
fn unflushed_end_is_noted_and_a_clean_stop_is_not() {
    let dir = tempfile::tempdir().unwrap();
    rec::start(rec::Config {
        dir: dir.path().to_path_buf(),
        flush_interval: Duration::from_secs(600),
        ..rec::Config::default()
    })
    .unwrap();
    let op = rec::intern("operation");
    let step = rec::intern("step");
    rec::begin(Level::Operation, op, step);
    let last = rec::end();
    // What a process killed right after its last flush leaves: chunks, no STOP record.
    rec::flush();
    let p = process_meta(dir.path());
    assert!(p["stop_ns"].is_null());
    assert_eq!(p["last_ns"].as_i64(), Some(last));
    let note = p["note"].as_str().unwrap();
    let pid = std::process::id();
    assert!(
        note.starts_with(&format!(
            "process {pid} ended without flushing; events after "
        )),
        "{note}"
    );
    assert!(
        note.contains(&format!("CLOCK_MONOTONIC {last} ns")),
        "{note}"
    );
    assert!(note.ends_with("may be missing"), "{note}");

    rec::stop().unwrap();
    let p = process_meta(dir.path());
    assert!(p["stop_ns"].is_i64());
    assert!(p["note"].is_null());
}
