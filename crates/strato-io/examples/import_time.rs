//! Imports each file given on the command line and prints counts and the time taken.
use std::path::PathBuf;
fn main() {
    for arg in std::env::args().skip(1) {
        let started = std::time::Instant::now();
        let keep_args = std::env::var("KEEP_ARGS").is_ok();
        let options = strato_io::ImportOptions {
            keep_args,
            ..Default::default()
        };
        match strato_io::import_paths(&[PathBuf::from(&arg)], &options) {
            Ok(t) => println!(
                "{arg}: {} spans, {} instants, {} flows, {} tracks in {:?}",
                t.spans.len(),
                t.instants.len(),
                t.flows.len(),
                t.tracks.len(),
                started.elapsed()
            ),
            Err(e) => println!("{e}"),
        }
    }
}
