//! What the engine's tests over the shared data share: where the data is, an engine, every
//! Chrome/Kineto JSON file under a folder, and a shared file's document.

#![allow(dead_code, clippy::unwrap_used)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use strato_engine::{Engine, OpenOptions, Quiet};

/// `rel` under `../shared/data`.
pub fn data(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(rel)
}

/// An engine with the default options that tells nothing.
pub fn engine() -> Engine {
    Engine::new(OpenOptions::default(), Arc::new(Quiet))
}

/// Every Chrome/Kineto JSON file under `dir`, sorted.
pub fn json_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            json_files(&path, out);
        } else {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.ends_with(".json") || name.ends_with(".json.gz") {
                out.push(path);
            }
        }
    }
}

/// Every Chrome/Kineto JSON file of the shared Kineto, rocprof and TensorFlow folders.
pub fn shared_json_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in ["kineto", "rocprof", "tf"] {
        if data(dir).is_dir() {
            json_files(&data(dir), &mut files);
        }
    }
    files
}

/// The document of a shared gzipped JSON file (`traceEvents` and what is around them).
pub fn document(rel: &str) -> serde_json::Value {
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(data(rel)).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The shared gzipped file `rel` rewritten in `dir` as `trace.json` with its events shuffled
/// (`seed`) and about `keep_per_mille` of them kept, besides those `always` keeps.
pub fn shuffled_and_thinned(
    rel: &str,
    seed: u64,
    keep_per_mille: u32,
    always: impl Fn(&serde_json::Value) -> bool,
    dir: &Path,
) -> PathBuf {
    let mut doc = document(rel);
    let events = doc["traceEvents"].as_array_mut().unwrap();
    let mut rng = fastrand::Rng::with_seed(seed);
    rng.shuffle(events);
    events.retain(|e| always(e) || rng.u32(0..1000) < keep_per_mille);
    let path = dir.join("trace.json");
    std::fs::write(&path, serde_json::to_vec(&doc).unwrap()).unwrap();
    path
}
