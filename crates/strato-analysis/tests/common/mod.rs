//! Helpers shared by the real-data tests: paths into `../shared/data` and the raw Chrome
//! events of a gzipped trace, read with serde_json alone (the independent side of checks
//! against the importer).
#![allow(dead_code, clippy::unwrap_used)]

use std::io::Read;
use std::path::PathBuf;

use serde_json::Value;

/// `rel` inside the shared data folder.
pub fn data(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(rel)
}

/// The `traceEvents` of a gzipped Chrome/Kineto trace, as JSON values.
pub fn raw(rel: &str) -> Vec<Value> {
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(data(rel)).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    v["traceEvents"].as_array().unwrap().clone()
}

/// The Chrome-trace JSON files of the shared data folder (`.json`, `.json.gz`; rocprofv3's
/// JSON, its own format, left out) up to 2 MB on disk, for a debug CI: the inputs of the
/// streamed-analysis tests. Sorted.
pub fn chrome_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![data("")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if name != "rocprof" {
                    dirs.push(path);
                }
            } else if (name.ends_with(".json") || name.ends_with(".json.gz"))
                && std::fs::metadata(&path).unwrap().len() <= 2 << 20
            {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

pub mod nsys;

/// `trace` with every event of rank `rank` (spans, instants, counters, flow ends) moved `by` ns
/// later: a rank whose clock runs ahead of its peers' (hosts without a common time base).
pub fn with_rank_clock_ahead(
    trace: &strato_trace::Trace,
    rank: strato_trace::RankId,
    by: strato_trace::Ns,
) -> strato_trace::Trace {
    let mut ahead = trace.clone();
    let shifts: Vec<strato_trace::Ns> = (trace.tracks.iter())
        .map(|t| if t.rank == rank { by } else { 0 })
        .collect();
    ahead.shift_tracks(&shifts);
    ahead
}
