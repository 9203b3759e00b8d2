//! Iteration mining on the real Kineto traces in `../shared/data`, checked against their
//! `ProfilerStep#N` annotations (ground truth the miner never reads; see
//! `docs/analyses/iterations.md` for the boundary criterion).

use std::path::PathBuf;

use strato_analysis::patterns::iterations::{check_against_steps, iterations, IterationOptions};
use strato_io::ImportOptions;

fn data(rel: &str) -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/kineto")
        .join(rel);
    p.exists().then_some(p)
}

/// (file, steps, main stream, kernels on it)
const FILES: &[(&str, usize, i64, usize)] = &[
    ("hta_df_index_resolver.json.gz", 5, 7, 17_350),
    ("hta_ns_resolution_rank-0.pt.trace.json.gz", 5, 7, 4_350),
    ("hta_nccl_data.json.gz", 3, 7, 2_679),
    ("kineto2021_resnet50_worker0.pt.trace.json.gz", 6, 7, 9_564),
    ("hta_trace_filter/sampled_rank-0.json.gz", 2, 7, 1_036),
];

fn run(file: &str, steps: usize, stream: i64, kernels: usize, given: bool) {
    let Some(path) = data(file) else {
        eprintln!("skipping {file}: shared data not found");
        return;
    };
    let options = ImportOptions {
        keep_args: true,
        ..ImportOptions::default()
    };
    let trace = strato_io::import_paths(&[path], &options).expect("import");
    let opts = IterationOptions {
        iterations: if given { vec![steps] } else { Vec::new() },
        ..IterationOptions::default()
    };
    let report = iterations(&trace, &opts);
    let main: Vec<_> = report
        .sequences
        .iter()
        .filter(|s| s.stream == stream)
        .collect();
    assert!(
        !main.is_empty(),
        "{file}: no loop found: {:?}",
        report.not_found
    );
    assert_eq!(main[0].kernels, kernels, "{file}");
    let check = check_against_steps(&trace, &main[..1]).expect("steps");
    eprintln!(
        "{file} (i {}): pattern {} ops, i used {}, mined {} vs steps {}: matched {}, exact {}, \
         precision {:.2} recall {:.2}; {:?}",
        if given { "given" } else { "estimated" },
        main[0].pattern_len,
        main[0].i,
        check.mined,
        check.steps,
        check.matched,
        check.exact,
        check.precision,
        check.recall,
        main[0]
            .diagnosis
            .iter()
            .map(|d| d.message())
            .collect::<Vec<_>>()
    );
    assert_eq!(check.steps, steps, "{file}");
    assert_eq!(check.mined, steps, "{file}: iteration count");
    assert_eq!(check.matched, steps, "{file}: boundaries within steps");
    // Conservation: durations + intervals = first start .. last end.
    let it = &main[0].iterations;
    let total: i64 = it
        .iter()
        .map(|i| i.duration_ns + i.interval_to_next_ns.unwrap_or(0))
        .sum();
    assert_eq!(total, it[it.len() - 1].end_ns - it[0].start_ns);
}

#[test]
fn df_index_resolver() {
    let (f, s, st, k) = FILES[0];
    run(f, s, st, k, false);
    run(f, s, st, k, true);
}

#[test]
fn ns_resolution() {
    let (f, s, st, k) = FILES[1];
    run(f, s, st, k, false);
    run(f, s, st, k, true);
}

#[test]
fn nccl_data() {
    let (f, s, st, k) = FILES[2];
    run(f, s, st, k, false);
    run(f, s, st, k, true);
}

#[test]
fn resnet50_2021_schema() {
    let (f, s, st, k) = FILES[3];
    run(f, s, st, k, false);
    run(f, s, st, k, true);
}

#[test]
fn trace_filter_sampled() {
    let (f, s, st, k) = FILES[4];
    run(f, s, st, k, true);
}
