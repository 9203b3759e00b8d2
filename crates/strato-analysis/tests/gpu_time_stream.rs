//! Issue 11 item 4: `strato gpu-time` on one Chrome/Kineto file gathers its breakdown while the
//! file streams ([`GpuTimeStream`]), never holding the spans. Over every Chrome-trace JSON file
//! in `../shared/data` (up to 2 MB on disk, for a debug CI), imported as `gpu-time` imports
//! ([`Projection::DEVICE_TIME`]) and handed over in batches of several sizes (one event, odd
//! sizes, the default), the report equals [`gpu_time`] of the whole trace in both windows
//! (HTA's cut-off at the last step is known only at the end of the stream): every rank,
//! stream, exposure and step.
#![allow(clippy::unwrap_used)]

mod common;

use strato_analysis::device_time::gpu_time::{gpu_time, GpuTimeOptions, GpuTimeStream, Window};
use strato_io::{ImportOptions, Projection};
use strato_trace::Trace;

#[test]
fn streamed_gpu_time_equals_that_of_the_whole_trace() {
    let import = ImportOptions {
        projection: Projection::DEVICE_TIME,
        ..ImportOptions::default()
    };
    let files = common::chrome_files();
    assert!(files.len() >= 5, "expected the shared data's JSON traces");
    let (mut device_events, mut stepped, mut cut) = (0usize, 0usize, 0usize);
    let windows = [Window::Whole, Window::Hta].map(|window| GpuTimeOptions {
        window,
        ..GpuTimeOptions::default()
    });
    for path in &files {
        let what = path.display().to_string();
        let whole = strato_io::import_file(path, &import).unwrap();
        let expected = windows.map(|options| gpu_time(&whole, &options));
        let [all, hta] = &expected;
        device_events += all.ranks.iter().map(|r| r.device_events).sum::<usize>();
        stepped += all
            .ranks
            .iter()
            .flat_map(|r| r.exposure.iter().flatten())
            .filter(|d| !d.steps.is_empty())
            .count();
        // HTA's cut-off dropped device events: the deferred cut is exercised.
        cut += hta
            .ranks
            .iter()
            .zip(&all.ranks)
            .filter(|(h, w)| h.device_events < w.device_events)
            .count();
        // Batches of one event on the small files only (a debug build is slow).
        let small = std::fs::metadata(path).unwrap().len() <= 256 << 10;
        let batches: &[usize] = if small {
            &[1, 4093, strato_io::chrome::SINK_EVENTS]
        } else {
            &[4093]
        };
        for &batch in batches {
            // Both windows from one streamed import.
            let mut streams = windows.map(GpuTimeStream::new);
            let mut sink = |t: &mut Trace| {
                streams.iter_mut().for_each(|s| s.add(t));
                t.spans.clear();
                t.instants.clear();
                t.counters.clear();
                t.args = Default::default();
                Ok(())
            };
            let Some(rest) =
                strato_io::import_file_streaming(path, &import, batch, &mut sink).unwrap()
            else {
                continue; // not streamed (a TensorFlow trace viewer file)
            };
            for (stream, expected) in streams.into_iter().zip(&expected) {
                assert_eq!(
                    stream.finish(&rest),
                    *expected,
                    "{what}: {:?}, batches of {batch}",
                    expected.window
                );
            }
        }
    }
    // The files must hold device events, per-step exposures and HTA cut-offs, or this test
    // compares empty reports.
    assert!(device_events > 1000, "only {device_events} device events");
    assert!(
        stepped >= 3,
        "only {stepped} devices with per-step exposure"
    );
    assert!(
        cut >= 1,
        "no rank where HTA's cut-off dropped device events"
    );
}
