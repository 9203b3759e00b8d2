//! Round trip of real traces imported by `strato-io`.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::time::Instant;

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/kineto")
        .join(name)
}

fn round_trip_file(name: &str) {
    let path = data(name);
    if !path.exists() {
        eprintln!("skipping: {} not found", path.display());
        return;
    }
    let trace = strato_io::import_paths(&[path], &strato_io::ImportOptions::default()).unwrap();
    assert!(!trace.spans.is_empty());
    let tmp = tempfile::tempdir().unwrap();
    // STRATO_STORE_KEEP=DIR keeps the written profiles (DIR/<file name>) for inspection.
    let dir = match std::env::var_os("STRATO_STORE_KEEP") {
        Some(keep) => PathBuf::from(keep).join(name),
        None => tmp.path().join("profile"),
    };
    let t0 = Instant::now();
    strato_store::write(&trace, &dir).unwrap();
    let t1 = Instant::now();
    let back = strato_store::read(&dir).unwrap();
    let t2 = Instant::now();
    let bytes: u64 = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    eprintln!(
        "{name}: {} spans, {} instants, {} counters, {} flows, {} args; write {:?}, read {:?}, {} bytes",
        trace.spans.len(),
        trace.instants.len(),
        trace.counters.len(),
        trace.flows.len(),
        trace.args.len(),
        t1 - t0,
        t2 - t1,
        bytes
    );
    assert_eq!(back.spans, trace.spans);
    assert_eq!(back.flows, trace.flows);
    // NaN counter values would make the whole-trace comparison fail although the round trip
    // is bit-exact; compare counters by bits.
    let bits = |t: &strato_trace::Trace| {
        t.counters
            .iter()
            .map(|c| (c.track, c.ts, c.value.to_bits()))
            .collect::<Vec<_>>()
    };
    assert_eq!(bits(&back), bits(&trace));
    let (mut a, mut b) = (back, trace);
    a.counters.clear();
    b.counters.clear();
    assert_eq!(a, b);
}

#[test]
fn nccl_trace_round_trips() {
    round_trip_file("hta_nccl_data.json.gz");
}

#[test]
fn other_kineto_traces_round_trip() {
    for name in [
        "hta_alexnet_trace.json.gz",
        "hta_cpu_only_rank-34.pt.trace.json.gz",
        "hta_cuda_event_sync_trace.json.gz",
        "hta_triton_example.json.gz",
        "kineto2021_resnet50_worker0.pt.trace.json.gz",
    ] {
        round_trip_file(name);
    }
}
