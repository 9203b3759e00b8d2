//! `whatif` on every Chrome trace of `../shared/data` and on both rank directories (issue 29):
//! the replay with the traced durations gives back each step within issue 29's target (median
//! <= 1 %, worst <= 3 % per window); and properties any what-if must keep, whatever the trace:
//! a factor of 1 changes nothing; shortening ops or removing host synchronisations never makes a
//! window longer and lengthening ops never makes it shorter (the simulation is monotone in its
//! durations); each predicted window's path by kind plus the time before it adds up to the
//! predicted time.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::PathBuf;

use strato_analysis::analyzed::Analyzed;
use strato_analysis::paths::whatif::{WhatIf, WhatIfResult, WhatIfSettings};
use strato_analysis::registry::Analysis;
use strato_io::{import_paths, ImportOptions};
use strato_trace::{Ns, Trace};

fn inputs() -> Vec<Vec<PathBuf>> {
    let mut out: Vec<Vec<PathBuf>> = common::chrome_files()
        .into_iter()
        .filter(|p| !p.to_string_lossy().contains("param_dlrm8"))
        .filter(|p| !p.to_string_lossy().contains("hta_trace_filter"))
        .map(|p| vec![p])
        .collect();
    for dir in ["kineto/param_dlrm8", "kineto/hta_trace_filter"] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(common::data(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        out.push(files);
    }
    out
}

fn import(files: &[PathBuf]) -> Trace {
    let options = ImportOptions {
        keep_args: true,
        ..ImportOptions::default()
    };
    import_paths(files, &options).unwrap()
}

fn run(trace: &Trace, scale: &[&str]) -> WhatIfResult {
    run_with(trace, scale, "")
}

fn run_with(trace: &Trace, scale: &[&str], no_sync: &str) -> WhatIfResult {
    let settings = WhatIfSettings {
        scale: scale.iter().map(|s| (*s).to_owned()).collect(),
        no_sync: no_sync.to_owned(),
        ..WhatIfSettings::default()
    };
    WhatIf::run(&Analyzed::new(trace), &settings).unwrap()
}

#[test]
fn the_replay_gives_back_every_step_and_changes_keep_their_properties() {
    if !common::data("").is_dir() {
        eprintln!("skipping: shared data not found");
        return;
    }
    let mut windows = 0;
    for files in inputs() {
        let name = files[0].display().to_string();
        let trace = import(&files);
        let replay = run(&trace, &[]);
        windows += replay.replay.steps.len();
        // Without changes the prediction is the replay.
        assert_eq!(
            replay.whatif.steps.len(),
            replay.replay.steps.len(),
            "{name}"
        );
        assert!(replay.whatif.steps.iter().all(|w| w.gain_ns == 0), "{name}");
        assert!(
            replay.replay.median_error_pct <= 1.0 && replay.replay.worst_error_pct <= 3.0,
            "{name}: replay error median {} %, worst {} %",
            replay.replay.median_error_pct,
            replay.replay.worst_error_pct
        );
        let same = run(&trace, &["category:device=1", "cpu:ProfilerStep#1=1"]);
        let faster = run(&trace, &["category:device=0.5"]);
        let slower = run(&trace, &["category:kernel=2", "category:copy=1.5"]);
        let no_sync = run_with(&trace, &[], "all");
        for (result, label) in [
            (&same, "x1"),
            (&faster, "x0.5"),
            (&slower, "x2"),
            (&no_sync, "no-sync"),
        ] {
            assert_eq!(
                result.whatif.steps.len(),
                replay.replay.steps.len(),
                "{name} {label}"
            );
            for (w, r) in result.whatif.steps.iter().zip(&replay.replay.steps) {
                assert_eq!((w.rank, w.number), (r.rank, r.number), "{name} {label}");
                assert_eq!(w.baseline_ns, r.simulated_ns, "{name} {label}");
                let kinds: Ns = w.path.by_kind.values().sum();
                assert_eq!(
                    kinds + w.path.before_path_ns,
                    w.predicted_ns,
                    "{name} {label}: {w:?}"
                );
                match label {
                    "x1" => assert_eq!(w.gain_ns, 0, "{name}: {w:?}"),
                    "x0.5" | "no-sync" => assert!(w.gain_ns >= 0, "{name} {label}: {w:?}"),
                    _ => assert!(w.gain_ns <= 0, "{name}: {w:?}"),
                }
            }
        }
    }
    assert!(windows >= 30, "{windows} windows replayed");
}
