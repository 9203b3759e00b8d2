//! Issue 28: `strato ops` on one Chrome/Kineto file gathers its table while the file streams
//! ([`OpsStream`]), never holding the spans or their args. Over every Chrome-trace JSON file
//! in `../shared/data` (up to 2 MB on disk, for a debug CI), imported as `ops` imports (spans
//! with every attribute) and handed over in batches of several sizes (one event, odd sizes,
//! the default: a launch and its op, a collective kernel and its CPU op, land in different
//! batches), the table equals [`ops`] of the whole trace: every row, device and figure.
#![allow(clippy::unwrap_used)]

mod common;

use strato_analysis::analyzed::Analyzed;
use strato_analysis::cross_stack::ops::{ops, OpsStream};
use strato_io::{ArgsScope, ImportOptions, Projection};
use strato_trace::Trace;

#[test]
fn streamed_op_tables_equal_those_of_the_whole_trace() {
    let options = ImportOptions {
        args_scope: ArgsScope::All,
        projection: Projection::SPANS,
        ..ImportOptions::default()
    };
    let files = common::chrome_files();
    assert!(files.len() >= 5, "expected the shared data's JSON traces");
    let (mut device_ops, mut modelled_rows, mut collective_rows) = (0usize, 0usize, 0usize);
    for path in &files {
        let what = path.display().to_string();
        let whole = strato_io::import_file(path, &options).unwrap();
        let expected = ops(&Analyzed::new(&whole), None);
        device_ops += expected.device_ops;
        modelled_rows += expected.ops.iter().filter(|r| r.model.is_some()).count();
        collective_rows += (expected.ops.iter())
            .filter(|r| r.collective.is_some())
            .count();
        let expected = serde_json::to_string(&expected).unwrap();
        // Batches of one event on the small files only (a debug build is slow).
        let small = std::fs::metadata(path).unwrap().len() <= 256 << 10;
        let batches: &[usize] = if small {
            &[1, 97, 4093, strato_io::chrome::SINK_EVENTS]
        } else {
            &[4093, strato_io::chrome::SINK_EVENTS]
        };
        for &batch in batches {
            let mut stream = OpsStream::new(None);
            let mut sink = |t: &mut Trace| {
                stream.add(t);
                t.clear_events();
                Ok(())
            };
            let Some(rest) =
                strato_io::import_file_streaming(path, &options, batch, &mut sink).unwrap()
            else {
                continue; // not streamed (a TensorFlow trace viewer file)
            };
            let got = serde_json::to_string(&stream.finish(&rest)).unwrap();
            assert!(got == expected, "{what}: batches of {batch} differ");
        }
    }
    // The files must hold device ops, modelled ops and collectives, or this compares little.
    assert!(device_ops > 1000, "only {device_ops} device ops");
    assert!(modelled_rows > 10, "only {modelled_rows} modelled rows");
    assert!(collective_rows > 0, "no collective row");
}
