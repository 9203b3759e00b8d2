//! Issue 18 item 4(a): rank files import in parallel ([`strato_io::ranks`]) and the trace does
//! not depend on how many at once: the 8 DLRM ranks (and the 2 sampled ranks of a 128-rank
//! job, with a single-rank file between them) imported with 1, 2, 3 and 8 jobs are the same
//! trace, equal to the ranks imported one by one and appended in order.
#![allow(clippy::unwrap_used)] // test helpers panic on broken fixtures by design

use std::path::{Path, PathBuf};

use strato_io::{import_file, import_paths, ImportOptions};
use strato_trace::Trace;

fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(rel)
}

#[test]
fn the_trace_does_not_depend_on_the_number_of_jobs() {
    if !data("").exists() {
        return;
    }
    let inputs = [
        vec![data("kineto/param_dlrm8")],
        vec![
            data("kineto/hta_trace_filter/sampled_rank-0.json.gz"),
            data("kineto/hta_alexnet_trace.json.gz"),
            data("kineto/hta_trace_filter/sampled_rank-1.json.gz"),
        ],
    ];
    for paths in inputs {
        let options = |jobs| ImportOptions {
            jobs,
            ..ImportOptions::default()
        };
        // One by one, appended in order: what the import did before it ran in parallel.
        let files = strato_io::ranks::expand_inputs(&paths).unwrap().files;
        let mut sequential = Trace::default();
        for f in &files {
            sequential.append(import_file(f, &options(1)).unwrap());
        }
        for jobs in [1, 3] {
            let trace = import_paths(&paths, &options(jobs)).unwrap();
            assert!(trace == sequential, "{paths:?} with {jobs} jobs");
        }
    }
}
