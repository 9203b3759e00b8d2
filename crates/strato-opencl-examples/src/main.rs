//! `strato-opencl-demo`: OpenCL workloads for the stratoscope OpenCL layer, run on the first
//! OpenCL device (PoCL here). Run it under the layer:
//!
//! ```text
//! STRATOSCOPE_OUT=prof OPENCL_LAYERS=target/debug/libstrato_opencl_layer.so \
//!     target/debug/strato-opencl-demo copies
//! ```
//!
//! Modes: `tour` (one of each kind of call, on a queue created *without* profiling, plus an
//! enqueue with no event pointer), `release` (a buffer released while commands that use it are
//! still queued), `leak N` (N enqueues with and without events; prints the
//! reference count of an application event after the layer drained it and the RSS growth),
//! `copies` (Zins 4.5.5: a dataset copied host-to-device as many small copies vs one large
//! copy, then the same square + reduce_sum kernels), `ranking` (Zins 4.5.2: a compute-bound
//! CNN-like step — conv, relu, maxpool, matmul — repeated; rank kernels by device time), and
//! `workload` (the fixed workload `strato overhead` times) and `pair VARIANT[/VARIANT] [STEPS]` (a
//! step and its variants with one change each, for checking `strato whatif`'s predictions; two
//! variants alternate step by step). With `STRATOSCOPE_OUT` set, the
//! demo also records its own operations (`strato-record`, component "") into
//! `<pid>.strato`, like the Python recorder does, so device work can be matched to them.

mod workloads;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = args.first().map(String::as_str).unwrap_or("help");
    let num = |i: usize, default: usize| -> usize {
        args.get(i).and_then(|s| s.parse().ok()).unwrap_or(default)
    };
    if mode == "summary" || mode == "dump" {
        return summarize(mode, args.get(1).map(String::as_str).unwrap_or(""));
    }
    let recording = workloads::start_recording();
    let result = match mode {
        "tour" => workloads::tour(),
        "release" => workloads::release_pending(),
        "leak" => workloads::leak(num(1, 10_000)),
        "copies" => workloads::copies(num(1, 1024), num(2, 16 << 20), num(3, 5)),
        "ranking" => workloads::ranking(num(1, 10)),
        "workload" => workloads::workload(num(1, 50)),
        "pair" => workloads::pair(args.get(1).map_or("base", String::as_str), num(2, 20)),
        _ => {
            eprintln!(
                "usage: strato-opencl-demo tour | release | leak [N] | copies [CHUNKS] [BYTES] [ITERS] | ranking [ITERS] | workload [STEPS] | pair VARIANT[/VARIANT] [STEPS] | summary FILE.strato | dump FILE.strato"
            );
            return ExitCode::from(2);
        }
    };
    if recording {
        strato_record::stop();
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("strato-opencl-demo: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Prints the summary (or every record) of a `*-opencl.strato` file.
fn summarize(mode: &str, path: &str) -> ExitCode {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("{path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let rec = match strato_record::decode(&bytes) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    if mode == "dump" {
        for (i, t) in rec.tracks.iter().enumerate() {
            println!("track {i}: {t:?}");
        }
        for e in &rec.events {
            println!("{e:?}");
        }
        for (k, v) in &rec.metadata {
            println!("metadata {} = {v}", rec.str(*k));
        }
        for c in &rec.clocks {
            println!("{c:?}");
        }
        for d in &rec.devices {
            println!("device {} {} {}", d.index, rec.str(d.name), d.props_json);
        }
        for (i, s) in rec.strings.iter().enumerate() {
            println!("string {i} = {s}");
        }
    } else {
        print!("{}", strato_opencl_layer::summary::summarize(&rec).render());
    }
    ExitCode::SUCCESS
}
