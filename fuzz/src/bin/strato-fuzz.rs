//! Tools around the fuzz targets, without AFL++:
//!
//! - `strato-fuzz replay TARGET FILE...`: runs each file through the target (bounded time) and
//!   prints the outcome; exit 1 when a file breaks a rule. Triage for AFL++'s `crashes/`.
//! - `strato-fuzz generate TARGET SECONDS SEED`: a seeded (not coverage-guided) mutation loop
//!   over the target's corpus; failing inputs are written to `fuzz/findings/TARGET/`.
//! - `strato-fuzz seed-recording OUT`: records a small real run with the recorder and writes the
//!   `*.strato` file to OUT (a seed for `recording`).
//! - `strato-fuzz seed-store TRACE OUT`: imports TRACE, writes it as a profile and packs the
//!   directory into OUT (a seed for `store`).

use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use strato_fuzz::{Failure, Target, TARGETS};

/// A run that takes longer than this is a hang (debug or release build alike).
const LIMIT: Duration = Duration::from_secs(20);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("replay") if args.len() >= 3 => replay(target(&args[1]), &args[2..]),
        Some("generate") if args.len() == 4 => generate(
            target(&args[1]),
            args[2].parse().expect("SECONDS is a number"),
            args[3].parse().expect("SEED is a number"),
        ),
        Some("seed-recording") if args.len() == 2 => seed_recording(Path::new(&args[1])),
        #[cfg(feature = "store")]
        Some("seed-store") if args.len() == 3 => {
            seed_store(Path::new(&args[1]), Path::new(&args[2]))
        }
        _ => {
            let names: Vec<_> = TARGETS.iter().map(|t| t.name()).collect();
            eprintln!(
                "usage: strato-fuzz replay TARGET FILE... | generate TARGET SECONDS SEED | \
                 seed-recording OUT | seed-store TRACE OUT\n  targets: {}",
                names.join(", ")
            );
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("strato-fuzz: {e}");
            ExitCode::from(2)
        }
    }
}

fn target(name: &str) -> Target {
    Target::from_name(name).unwrap_or_else(|| {
        eprintln!("strato-fuzz: unknown target {name:?}");
        std::process::exit(2)
    })
}

fn replay(target: Target, files: &[String]) -> std::io::Result<bool> {
    let mut ok = true;
    for file in files {
        let data = std::fs::read(file)?;
        let started = Instant::now();
        let result = strato_fuzz::run_bounded(target, &data, LIMIT);
        let took = started.elapsed();
        match result {
            Ok(outcome) => println!("{file}: ok in {took:.2?}: {outcome:?}"),
            Err(failure) => {
                ok = false;
                println!("{file}: FAILED in {took:.2?}: {failure}");
                if matches!(failure, Failure::Timeout(_)) {
                    return Ok(false); // the hung thread keeps running: stop here
                }
            }
        }
    }
    Ok(ok)
}

fn generate(target: Target, seconds: u64, seed: u64) -> std::io::Result<bool> {
    let corpus_dir = strato_fuzz::fuzz_dir()
        .join("corpus")
        .join(target.corpus_name());
    let corpus: Vec<Vec<u8>> = strato_fuzz::files_in(&corpus_dir)
        .iter()
        .map(std::fs::read)
        .collect::<Result<_, _>>()?;
    if corpus.is_empty() {
        return Err(std::io::Error::other(format!(
            "no corpus in {}",
            corpus_dir.display()
        )));
    }
    let findings = strato_fuzz::fuzz_dir().join("findings").join(target.name());
    let mut rng = fastrand::Rng::with_seed(seed);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let (mut runs, mut failures) = (0u64, 0u64);
    while Instant::now() < deadline {
        let data = &corpus[rng.usize(..corpus.len())];
        let donor = &corpus[rng.usize(..corpus.len())];
        let input = strato_fuzz::mutate(&mut rng, data, donor);
        runs += 1;
        if let Err(failure) = strato_fuzz::run_bounded(target, &input, LIMIT) {
            failures += 1;
            std::fs::create_dir_all(&findings)?;
            let path = findings.join(format!("seed{seed}-run{runs}"));
            std::fs::write(&path, &input)?;
            println!("{}: {failure}", path.display());
            if matches!(failure, Failure::Timeout(_)) {
                break;
            }
        }
    }
    println!(
        "{}: {runs} runs, {failures} failures (seed {seed})",
        target.name()
    );
    Ok(failures == 0)
}

fn seed_recording(out: &Path) -> std::io::Result<bool> {
    use strato_record as rec;
    use strato_record::Level;
    let dir = tempfile::tempdir()?;
    rec::start(rec::Config {
        dir: dir.path().to_path_buf(),
        flush_interval: Duration::from_millis(5),
        ..rec::Config::default()
    })
    .map_err(std::io::Error::other)?;
    rec::set_process_name("fuzz-seed");
    rec::metadata("run", "{\"seed\":1}");
    rec::device(0, "cpu", "{\"kind\":\"cpu\"}");
    let op = rec::intern("operation");
    let lib = rec::intern("library");
    let kernel = rec::intern("opencl_kernel");
    let queue = rec::queue_track(0, 1, "queue 1");
    let bytes = rec::counter_track("bytes", "B", 0);
    for step in 0..3 {
        let name = rec::intern(&format!("step {step}"));
        let start = rec::begin(Level::Operation, op, name);
        rec::add_untraced(2);
        // Real work between the calls, so the recorded times are real.
        let sum: u64 = (0..20_000u64).map(|i| i * i % 7).sum();
        let dot = rec::intern(if sum.is_multiple_of(2) {
            "numpy.dot"
        } else {
            "numpy.add"
        });
        rec::begin_with(Level::Library, lib, dot, Some(step), Some("{\"n\":3}"));
        rec::end();
        if let Some(q) = queue {
            rec::span(
                q,
                start + 10,
                start + 90,
                Level::DeviceKernel,
                kernel,
                rec::intern("gemm"),
                Some(step),
                Some("{\"gws\":[64]}"),
            );
        }
        let end = rec::end();
        if let Some(track) = rec::thread_track() {
            rec::instant(track, end, Level::Library, lib, rec::intern("marker"), None);
        }
        if let Some(c) = bytes {
            rec::counter(c, end, 1024.0 * (step + 1) as f64);
        }
    }
    rec::clock_sync("device:0", "device", 12, 0.5, 100, Some(3), "paired");
    let path = rec::stop().ok_or_else(|| std::io::Error::other("recorder wrote no file"))?;
    std::fs::copy(path, out)?;
    Ok(true)
}

#[cfg(feature = "store")]
fn seed_store(trace: &Path, out: &Path) -> std::io::Result<bool> {
    let trace = strato_io::import_file(trace, &strato_io::ImportOptions::default())
        .map_err(std::io::Error::other)?;
    let dir = tempfile::tempdir()?;
    let profile = dir.path().join("profile");
    strato_store::write(&trace, &profile).map_err(std::io::Error::other)?;
    std::fs::write(out, strato_fuzz::pack_store(&profile)?)?;
    Ok(true)
}
