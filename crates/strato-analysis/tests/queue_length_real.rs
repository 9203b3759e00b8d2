//! `strato_analysis::device_time::queue_length` on real traces: the ops counted and the longest queue per
//! stream equal HTA 0.5.0's (`get_queue_length_summary`) where both count the same ops, and on
//! every Chrome trace of ../shared/data the time per length band adds up to each stream's
//! window.
#![allow(clippy::unwrap_used)]

mod common;

use strato_analysis::device_time::queue_length::{queue_length, QueueLengthOptions};
use strato_io::ImportOptions;

fn streams(rel: &str) -> Vec<(i64, u64, u64)> {
    let trace = strato_io::import_file(&common::data(rel), &ImportOptions::default()).unwrap();
    let report = queue_length(&trace, &QueueLengthOptions::default());
    report.ranks[0]
        .streams
        .iter()
        .map(|s| (s.stream, s.ops, s.max))
        .collect()
}

#[test]
fn ops_and_longest_queue_equal_htas() {
    // HTA 0.5.0 on the same files: (stream, launches, max queue_length).
    assert_eq!(
        streams("kineto/hta_alexnet_trace.json.gz"),
        vec![(7, 91, 18), (20, 7, 2)]
    );
    assert_eq!(
        streams("kineto/hta_cuda_event_sync_trace.json.gz"),
        vec![(7, 5, 1)]
    );
}

#[test]
fn bands_add_up_to_every_streams_window_on_every_trace() {
    let mut streams_seen = 0;
    for path in common::chrome_files() {
        let trace = strato_io::import_file(&path, &ImportOptions::default()).unwrap();
        let report = queue_length(&trace, &QueueLengthOptions { limit: 4 });
        for rank in &report.ranks {
            for s in &rank.streams {
                let bands: i64 = s.levels.iter().map(|l| l.time_ns).sum();
                assert_eq!(
                    bands,
                    s.window_ns,
                    "{}: stream {}",
                    path.display(),
                    s.stream
                );
                let at_limit: i64 = (s.levels.iter())
                    .filter(|l| l.min_length >= 4)
                    .map(|l| l.time_ns)
                    .sum();
                assert_eq!(at_limit, s.at_limit_ns, "{}", path.display());
                assert!(s.p50 <= s.p95 && s.p95 <= s.max, "{}", path.display());
                assert!(s.mean <= s.max as f64 + 1e-9, "{}", path.display());
                streams_seen += 1;
            }
        }
    }
    assert!(
        streams_seen > 10,
        "only {streams_seen} streams: the check proved little"
    );
}
