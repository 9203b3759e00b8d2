#![cfg(feature = "store")]
//! CI's part of fuzzing, deterministic so a new random find never turns CI red: per target,
//! every file of `fuzz/corpus/<corpus>/` and `fuzz/regressions/<target>/` is run through the
//! target (the rules of `strato_fuzz::run`, bounded in time), then a fixed-seed batch of
//! mutations of the corpus (`STRATO_FUZZ_MUTATIONS` per target, default 200).

use std::path::Path;
use std::time::Duration;

use strato_fuzz::{Target, TARGETS};

/// A run longer than this (debug build, shared machine) is a hang.
const LIMIT: Duration = Duration::from_secs(60);

/// Mutations per target in CI.
const DEFAULT_MUTATIONS: usize = 200;

fn replay_dir(target: Target, dir: &Path, failures: &mut Vec<String>) -> usize {
    let files = strato_fuzz::files_in(dir);
    for file in &files {
        let data = std::fs::read(file).expect("reading a fuzz input");
        if let Err(failure) = strato_fuzz::run_bounded(target, &data, LIMIT) {
            failures.push(format!("{}: {failure}", file.display()));
        }
    }
    files.len()
}

fn mutations(target: Target, corpus: &[Vec<u8>], failures: &mut Vec<String>) -> usize {
    let count = std::env::var("STRATO_FUZZ_MUTATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_MUTATIONS);
    let seed = 0x5eed_0000 + TARGETS.iter().position(|t| *t == target).unwrap_or(0) as u64;
    let mut rng = fastrand::Rng::with_seed(seed);
    for run in 0..count {
        let data = &corpus[rng.usize(..corpus.len())];
        let donor = &corpus[rng.usize(..corpus.len())];
        let input = strato_fuzz::mutate(&mut rng, data, donor);
        if let Err(failure) = strato_fuzz::run_bounded(target, &input, LIMIT) {
            let name = format!("{}-seed{seed:x}-run{run}", target.name());
            let kept = std::env::temp_dir().join(&name);
            let _ = std::fs::write(&kept, &input);
            failures.push(format!(
                "mutation {run} (seed {seed:#x}, input kept in {}): {failure}",
                kept.display()
            ));
        }
    }
    count
}

fn check(target: Target) {
    let fuzz = strato_fuzz::fuzz_dir();
    let corpus_dir = fuzz.join("corpus").join(target.corpus_name());
    let mut failures = Vec::new();
    let seeds = replay_dir(target, &corpus_dir, &mut failures);
    assert!(seeds > 0, "no corpus in {}", corpus_dir.display());
    let regressions = replay_dir(
        target,
        &fuzz.join("regressions").join(target.name()),
        &mut failures,
    );
    let corpus: Vec<Vec<u8>> = strato_fuzz::files_in(&corpus_dir)
        .iter()
        .map(|f| std::fs::read(f).expect("reading the corpus"))
        .collect();
    let mutated = mutations(target, &corpus, &mut failures);
    assert!(
        failures.is_empty(),
        "{}: {} of {} corpus files, {} regressions and {} mutations broke a rule:\n{}",
        target.name(),
        failures.len(),
        seeds,
        regressions,
        mutated,
        failures.join("\n")
    );
}

#[test]
fn chrome() {
    check(Target::Chrome);
}

#[test]
fn chrome_chunked() {
    check(Target::ChromeChunked);
}

#[test]
fn tf() {
    check(Target::Tf);
}

#[test]
fn xplane() {
    check(Target::Xplane);
}

#[test]
fn nsys() {
    check(Target::Nsys);
}

#[test]
fn ncu() {
    check(Target::Ncu);
}

#[test]
fn recording() {
    check(Target::Recording);
}

#[test]
fn store() {
    check(Target::Store);
}

/// The store container round-trips a real profile and accepts any bytes.
#[test]
fn store_container() {
    let fuzz = strato_fuzz::fuzz_dir();
    let seed = strato_fuzz::files_in(&fuzz.join("corpus/store"))
        .into_iter()
        .next()
        .expect("a store seed");
    let data = std::fs::read(seed).expect("reading the store seed");
    let dir = tempfile::tempdir().expect("temporary directory");
    strato_fuzz::unpack_store(&data, &dir.path().join("p")).expect("unpacking");
    assert_eq!(
        strato_fuzz::pack_store(&dir.path().join("p")).expect("packing"),
        data
    );
    for junk in [&b""[..], b"\x07", b"\xff\xff\xff\xff\xff\xffabc"] {
        let out = dir.path().join(format!("j{}", junk.len()));
        strato_fuzz::unpack_store(junk, &out).expect("any bytes make a directory");
    }
}

#[test]
fn rocprof() {
    check(Target::Rocprof);
}

#[test]
fn perfetto() {
    check(Target::Perfetto);
}

#[test]
fn perf_data() {
    check(Target::PerfData);
}

#[test]
fn perf_script() {
    check(Target::PerfScript);
}

#[test]
fn rules() {
    check(Target::Rules);
}

#[test]
fn device_spec() {
    check(Target::DeviceSpec);
}

#[test]
fn level_map() {
    check(Target::LevelMap);
}

#[test]
fn sql() {
    check(Target::Sql);
    // The shipped analyses too (the views are planned by every run's session); kept in
    // `strato-sql` rather than copied into the corpus.
    for (name, text) in strato_sql::ANALYSES {
        match strato_fuzz::run_bounded(Target::Sql, text.as_bytes(), LIMIT) {
            Ok(strato_fuzz::Outcome::Answered { .. }) => {}
            other => panic!("analysis {name}: {other:?}"),
        }
    }
}
