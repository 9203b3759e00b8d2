//! Times each analysis step of `strato report` (the steps `strato_report::ReportInput::
//! from_analyzed` announces) and the HTML rendering, on the inputs given, so the cost of one
//! step (e.g. the advice rules) is read as a share of the whole report in the same run.
//!
//! `cargo run --release -p strato-cli --example report_step_times -- TRACE_OR_DIR...`
//! (one input per report; prints one line per step: seconds and % of the report's total).

use std::path::PathBuf;
use std::time::Instant;

use strato_analysis::analyzed::Analyzed;
use strato_io::{import_paths, ImportOptions};
use strato_report::{Progress, ReportInput, ReportOptions};

/// Records when each step starts.
struct Timer {
    marks: Vec<(String, Instant)>,
}

impl Progress for Timer {
    fn step(&mut self, what: &str) {
        self.marks.push((what.to_owned(), Instant::now()));
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let inputs: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    if inputs.is_empty() {
        return Err("usage: report_step_times TRACE_OR_DIR...".into());
    }
    for input in inputs {
        let t0 = Instant::now();
        let trace = import_paths(std::slice::from_ref(&input), &ImportOptions::default())?;
        let imported = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        let analyzed = Analyzed::new(&trace);
        let mut timer = Timer {
            marks: vec![("index (Analyzed::new)".into(), t1)],
        };
        let options = ReportOptions {
            title: input.display().to_string(),
            generator: "report_step_times".into(),
            // One thread: each step's own time.
            parallel: false,
        };
        let report = ReportInput::from_analyzed(&analyzed, &options, &mut timer);
        let analysed = Instant::now();
        let html = strato_report::render(&report);
        let end = Instant::now();
        timer.marks.push(("render HTML".into(), analysed));
        let total = imported + (end - t1).as_secs_f64();
        println!(
            "{} ({} spans): report {:.3} s in all",
            input.display(),
            trace.spans.len(),
            total
        );
        let mut rows = vec![("import".to_owned(), imported)];
        for (i, (what, at)) in timer.marks.iter().enumerate() {
            let next = timer.marks.get(i + 1).map_or(end, |m| m.1);
            rows.push((what.clone(), (next - *at).as_secs_f64()));
        }
        for (what, s) in rows {
            println!("  {what:<24} {s:>8.3} s {:>5.1}%", 100.0 * s / total);
        }
        drop(html);
    }
    Ok(())
}
