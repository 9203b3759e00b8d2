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

pub mod nsys;
