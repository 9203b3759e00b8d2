//! Issue 11 item 4: `strato kernels` on one Chrome/Kineto file gathers its statistics while
//! the file streams ([`KernelStatsStream`]), never holding the spans. Over every Chrome-trace
//! JSON file in `../shared/data` (up to 2 MB on disk, for a debug CI), imported as `kernels`
//! imports (device ops' args, spans only) and handed over in batches of several sizes (one
//! event, odd sizes, the default), the report equals [`kernel_stats`] of the whole trace:
//! every row, latency and fold, with and without `--top`.
#![allow(clippy::unwrap_used)]

mod common;

use strato_analysis::device_time::kernel_stats::{kernel_stats, KernelStatsStream};
use strato_io::{ArgsScope, ImportOptions, Projection};
use strato_trace::Trace;

#[test]
fn streamed_kernel_statistics_equal_those_of_the_whole_trace() {
    let options = ImportOptions {
        args_scope: ArgsScope::DeviceOps,
        projection: Projection::SPANS,
        ..ImportOptions::default()
    };
    let files = common::chrome_files();
    assert!(files.len() >= 5, "expected the shared data's JSON traces");
    let mut device_ops = 0u64;
    for path in &files {
        let what = path.display().to_string();
        let whole = strato_io::import_file(path, &options).unwrap();
        for top in [0, 3] {
            let expected = kernel_stats(&whole, top);
            if top == 0 {
                device_ops += expected.ranks.iter().map(|r| r.device_ops).sum::<u64>();
            }
            // Batches of one event on the small files only (a debug build is slow).
            let small = std::fs::metadata(path).unwrap().len() <= 256 << 10;
            let batches: &[usize] = if top == 0 && small {
                &[1, 4093, strato_io::chrome::SINK_EVENTS]
            } else if top == 0 {
                &[4093, strato_io::chrome::SINK_EVENTS]
            } else {
                &[strato_io::chrome::SINK_EVENTS]
            };
            for &batch in batches {
                let mut stream = KernelStatsStream::default();
                let mut sink = |t: &mut Trace| {
                    stream.add(t);
                    t.spans.clear();
                    t.instants.clear();
                    t.counters.clear();
                    t.args = Default::default();
                    Ok(())
                };
                let Some(rest) =
                    strato_io::import_file_streaming(path, &options, batch, &mut sink).unwrap()
                else {
                    continue; // not streamed (a TensorFlow trace viewer file)
                };
                assert_eq!(
                    stream.finish(&rest, top),
                    expected,
                    "{what}: batches of {batch}, top {top}"
                );
            }
        }
    }
    // The files must hold device ops, or this test compares empty reports.
    assert!(device_ops > 1000, "only {device_ops} device ops");
}
