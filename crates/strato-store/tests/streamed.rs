//! A profile written while the trace streams in ([`strato_store::ProfileWriter`] as the sink
//! of [`strato_io::import_file_streaming`], what `strato import -o` does) is the profile the
//! in-memory path writes ([`strato_store::write`] of the whole imported trace): same files,
//! byte for byte (but `metadata.json`'s creation time), and the same trace read back. Over
//! every Chrome-trace JSON file in `../shared/data`, with event batches of several sizes (one
//! event, odd sizes that cut the store's 64 Ki-row chunks anywhere, the default).
#![allow(clippy::unwrap_used)]

mod common;
use common::{chrome_files, import_redacted};

use std::path::Path;

use strato_io::ImportOptions;
use strato_trace::Trace;

/// The profile's files, `metadata.json` without its creation time.
fn files_of(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let mut bytes = std::fs::read(&path).unwrap();
            if name == "metadata.json" {
                let text = String::from_utf8(bytes).unwrap();
                let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();
                let object = value.as_object_mut().unwrap();
                object.remove("created_utc");
                object.remove("created_unix_ns");
                bytes = value.to_string().into_bytes();
            }
            (name, bytes)
        })
        .collect();
    files.sort();
    files
}

/// Streams `path` into a profile at `dir` with batches of `batch` events; `None` when the file
/// does not stream (a TensorFlow trace viewer file, or not a Chrome trace).
fn stream(path: &Path, dir: &Path, batch: usize) -> Option<u64> {
    let options = ImportOptions::default();
    let mut writer = strato_store::ProfileWriter::create(dir).unwrap();
    let mut batches = 0u64;
    let mut sink = |trace: &mut Trace| {
        batches += 1;
        writer.write_events(trace).map_err(|e| e.to_string())
    };
    let mut trace = strato_io::import_file_streaming(path, &options, batch, &mut sink).ok()??;
    strato_io::redact::redact_trace(&mut trace);
    assert!(trace.spans.is_empty() && trace.instants.is_empty() && trace.counters.is_empty());
    writer.finish(&mut trace).unwrap();
    Some(batches)
}

#[test]
fn a_streamed_profile_is_the_in_memory_one() {
    let files = chrome_files();
    if files.is_empty() {
        eprintln!("skipping: no ../shared/data");
        return;
    }
    let mut streamed = 0;
    for path in &files {
        let Some(whole) = import_redacted(path) else {
            continue;
        };
        let tmp = tempfile::tempdir().unwrap();
        let expected = tmp.path().join("whole");
        strato_store::write(&whole, &expected).unwrap();
        let events = whole.spans.len() + whole.instants.len() + whole.counters.len();
        // Large files only at the default size and one odd size (debug builds are slow).
        let batches: &[usize] = if events > 200_000 {
            &[4093, strato_io::chrome::SINK_EVENTS]
        } else if events > 20_000 {
            &[1009, 4093, strato_io::chrome::SINK_EVENTS]
        } else {
            &[1, 7, 4093, strato_io::chrome::SINK_EVENTS]
        };
        for &batch in batches {
            let dir = tmp.path().join(format!("streamed-{batch}"));
            let Some(handed) = stream(path, &dir, batch) else {
                assert!(!dir.exists(), "{}: left a profile behind", path.display());
                break;
            };
            // Handed over part by part when the file holds several batches.
            let least = if events > 4 * batch { 2 } else { 1 };
            assert!(handed >= least, "{}: {handed} batches", path.display());
            assert_eq!(
                files_of(&dir),
                files_of(&expected),
                "{} with batches of {batch}",
                path.display()
            );
            let (a, b) = (
                strato_store::read(&dir).unwrap(),
                strato_store::read(&expected).unwrap(),
            );
            assert_eq!(a.spans, b.spans);
            assert_eq!(a.flows, b.flows);
            assert_eq!(a.tracks, b.tracks);
            assert_eq!(a.ranks, b.ranks);
            streamed += 1;
        }
    }
    assert!(streamed > 20, "only {streamed} streamed imports compared");
}
