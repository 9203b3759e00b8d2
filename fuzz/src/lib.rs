//! Fuzz targets for every parser of stratoscope, shared by the three ways they run:
//!
//! - the AFL++ driver `strato-fuzz-afl TARGET` (coverage-guided, built with `cargo afl build
//!   --features afl`; `scripts/fuzz.sh` runs a campaign),
//! - CI's deterministic replay (`fuzz/tests/replay.rs`): every file of `fuzz/corpus/<target>/`
//!   and `fuzz/regressions/<target>/`, then a fixed-seed batch of mutations of the corpus
//!   ([`mutate`]),
//! - `strato-fuzz` (replay one file, run a seeded generation loop, build seeds).
//!
//! A target takes bytes and calls the importer the way the CLI does: the bytes become a file in
//! a fresh temporary directory, named as the format's files are named, and go through
//! [`strato_io::import_file`] (sniffing, gzip, dispatch, `Trace::validate`); the profile store
//! gets a directory rebuilt from a small container ([`unpack_store`]). Its rules (the oracle),
//! checked by [`run`], which panics when one breaks so AFL++ records the input as a crash:
//!
//! - no panic and no abort (an unbounded allocation aborts the process);
//! - no hang: AFL++ bounds each run (`-t`), the replay bounds it with [`run_bounded`];
//! - an error is the library's error type, one line, naming the file it concerns;
//! - a trace that comes out satisfies [`strato_trace::Trace::validate`];
//! - `chrome_chunked` only: reading the same JSON through a tiny, odd read window gives the same
//!   result as the CLI's read (the splitter must not depend on where reads end).
//!
//! The configuration files (`rules`, `device_spec`, `level_map`) go the way the CLI reads them
//! too: the bounded read of [`strato_io::config::read_config_text`], then the parser and its
//! checks ([`strato_analysis::advise::AdviseConfig::from_toml`],
//! [`strato_analysis::models::devices::DeviceSpec::from_json`],
//! [`strato_trace::LevelMap::from_json`]); same rules, and a file that is accepted must hold values
//! inside the documented ranges.

use std::io::{BufReader, Cursor};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use strato_io::{ImportOptions, Result as IoResult};
use strato_trace::Trace;

/// Decompression bound while fuzzing: far above any corpus file, low enough that a gzip bomb
/// stops with the library's error in milliseconds.
pub const FUZZ_MAX_DECOMPRESSED_BYTES: u64 = 64 << 20;

/// One parser under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Chrome/Kineto JSON (splitter, event parser, TF post-pass) through `import_file`.
    Chrome,
    /// The same JSON read both by the CLI's path and through a tiny odd read window; both
    /// must agree.
    ChromeChunked,
    /// TensorFlow trace viewer JSON (seeds from TF; same entry point as `chrome`).
    Tf,
    /// XSpace protobuf (`*.xplane.pb`).
    Xplane,
    /// Nsight Systems SQLite export.
    Nsys,
    /// Nsight Compute CSV.
    Ncu,
    /// stratoscope's own recordings (`*.strato`: `strato_record::decode` and the importer).
    Recording,
    /// The profile store reader (a profile directory packed by [`pack_store`]).
    Store,
    /// rocprofv3 JSON (`rocprof.rs`; sniffed from its first key).
    Rocprof,
    /// Perfetto protobuf (`perfetto.rs`; recognised by its `.pftrace` name).
    Perfetto,
    /// Linux `perf.data` (`perf.rs` through the `linux-perf-data` crate; sniffed from its
    /// `PERFILE2` magic).
    PerfData,
    /// `perf script` text output (`perf.rs`; sniffed from its first event line).
    PerfScript,
    /// An advice rules file (`strato advise --rules`, TOML).
    Rules,
    /// A device spec (`strato ops --device-spec`, JSON).
    DeviceSpec,
    /// A level map (`strato --level-map`, JSON).
    LevelMap,
    /// A `strato sql` query (the bytes as text) over a small fixed profile, under tight
    /// limits: parsing, planning and running in DataFusion, the query guard, the bounded text
    /// functions, the Parquet-backed tables.
    Sql,
}

/// Every target, in the order the docs and scripts list them.
pub const TARGETS: [Target; 16] = [
    Target::Chrome,
    Target::ChromeChunked,
    Target::Tf,
    Target::Xplane,
    Target::Nsys,
    Target::Ncu,
    Target::Recording,
    Target::Store,
    Target::Rocprof,
    Target::Perfetto,
    Target::PerfData,
    Target::PerfScript,
    Target::Rules,
    Target::DeviceSpec,
    Target::LevelMap,
    Target::Sql,
];

impl Target {
    /// The target's name on the command line and in `fuzz/` paths.
    pub fn name(self) -> &'static str {
        match self {
            Target::Chrome => "chrome",
            Target::ChromeChunked => "chrome_chunked",
            Target::Tf => "tf",
            Target::Xplane => "xplane",
            Target::Nsys => "nsys",
            Target::Ncu => "ncu",
            Target::Recording => "recording",
            Target::Store => "store",
            Target::Rocprof => "rocprof",
            Target::Perfetto => "perfetto",
            Target::PerfData => "perf_data",
            Target::PerfScript => "perf_script",
            Target::Rules => "rules",
            Target::DeviceSpec => "device_spec",
            Target::LevelMap => "level_map",
            Target::Sql => "sql",
        }
    }

    /// The target named `name`.
    pub fn from_name(name: &str) -> Option<Target> {
        TARGETS.into_iter().find(|t| t.name() == name)
    }

    /// The corpus the target starts from: `chrome_chunked` shares `chrome`'s.
    pub fn corpus_name(self) -> &'static str {
        match self {
            Target::ChromeChunked => "chrome",
            other => other.name(),
        }
    }

    /// The file name the bytes are written under (the CLI sniffs content, but XPlane is
    /// recognised by its `.pb` name, Perfetto by `.pftrace` and recordings by `.strato`;
    /// `perf.data` and `perf script` text by content alone).
    fn file_name(self) -> &'static str {
        match self {
            Target::Chrome | Target::ChromeChunked | Target::Tf => "trace.json",
            Target::Xplane => "trace.xplane.pb",
            Target::Nsys => "trace.sqlite",
            Target::Ncu => "metrics.csv",
            Target::Recording => "main.strato",
            Target::Store => "profile",
            Target::Rocprof => "run_results.json",
            Target::Perfetto => "trace.pftrace",
            Target::PerfData => "perf.data",
            // No suffix the CLI reads by name (`.pb`, `.pftrace`, `.strato`, `.gz` are
            // content-sniffed anyway): the text is recognised from its first event line.
            Target::PerfScript => "perf-script.txt",
            Target::Rules => "rules.toml",
            Target::DeviceSpec => "device.json",
            Target::LevelMap => "levels.json",
            Target::Sql => "query.sql",
        }
    }
}

/// What a run gave (when it kept the rules).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A valid trace came out.
    Imported {
        spans: usize,
        instants: usize,
        counters: usize,
    },
    /// The input was refused with one clear error (the error's text).
    Refused(String),
    /// A configuration file was accepted.
    Configured,
    /// A query ran (the number of result rows).
    Answered { rows: usize },
}

/// The options the CLI imports with, but with the fuzzing decompression bound.
pub fn options() -> ImportOptions {
    ImportOptions {
        max_decompressed_bytes: Some(FUZZ_MAX_DECOMPRESSED_BYTES),
        ..ImportOptions::default()
    }
}

/// Runs `target` on `data` and checks the rules (module docs). Panics when one breaks.
pub fn run(target: Target, data: &[u8]) -> Outcome {
    let dir = tempfile::tempdir().expect("temporary directory for the fuzz input");
    let path = dir.path().join(target.file_name());
    match target {
        Target::Store => run_store(data, &path),
        Target::Sql => run_sql(data),
        Target::Rules | Target::DeviceSpec | Target::LevelMap => {
            std::fs::write(&path, data).expect("writing the fuzz input");
            run_config(target, &path)
        }
        _ => {
            std::fs::write(&path, data).expect("writing the fuzz input");
            let outcome = check_import(&path, strato_io::import_file(&path, &options()));
            if target == Target::ChromeChunked {
                compare_chunked(&path, data, &outcome);
            }
            outcome
        }
    }
}

/// A configuration target: read and parsed as the CLI does; the error is `PATH: message`.
fn run_config(target: Target, path: &Path) -> Outcome {
    let what = match target {
        Target::Rules => "the rules file",
        Target::DeviceSpec => "the device spec",
        _ => "the level map",
    };
    let text = match strato_io::config::read_config_text(path, what) {
        Ok(text) => text,
        Err(e) => return refused(path, &e.to_string()),
    };
    let parsed = match target {
        Target::Rules => strato_analysis::advise::AdviseConfig::from_toml(&text)
            .map(|config| {
                // Accepted means inside the documented ranges.
                assert_eq!(config.validate(), Ok(()), "accepted rules fail validate");
                assert!(config.low_util.chunks <= strato_analysis::advise::MAX_CHUNKS);
            })
            .map_err(|e| e.to_string()),
        Target::DeviceSpec => strato_analysis::models::devices::DeviceSpec::from_json(&text)
            .map(|spec| {
                let (lo, hi) = strato_analysis::models::devices::BANDWIDTH_GBS_RANGE;
                assert!((lo..=hi).contains(&spec.memory_bandwidth_gbs));
                for p in [
                    strato_analysis::models::devices::Precision::Fp64,
                    strato_analysis::models::devices::Precision::Fp32,
                    strato_analysis::models::devices::Precision::Tf32,
                    strato_analysis::models::devices::Precision::Fp16,
                    strato_analysis::models::devices::Precision::Bf16,
                    strato_analysis::models::devices::Precision::Fp8,
                    strato_analysis::models::devices::Precision::Fp4,
                ] {
                    if let Some(ridge) = spec.ridge(p) {
                        assert!(ridge.is_finite() && ridge > 0.0, "ridge {ridge} for {p:?}");
                    }
                }
            })
            .map_err(|e| e.to_string()),
        _ => strato_trace::LevelMap::from_json(&text)
            .map(|map| {
                let defaults = strato_trace::LevelMap::default().rules().len();
                assert!(map.rules().len() <= defaults + strato_trace::MAX_LEVEL_RULES);
            })
            .map_err(|e| e.to_string()),
    };
    match parsed {
        Ok(()) => Outcome::Configured,
        Err(message) => refused(path, &format!("{}: {message}", path.display())),
    }
}

#[cfg(feature = "store")]
fn run_store(data: &[u8], path: &Path) -> Outcome {
    unpack_store(data, path).expect("writing the profile directory");
    match strato_store::read(path) {
        Ok(trace) => imported(&trace),
        Err(e) => refused(path, &e.to_string()),
    }
}

#[cfg(not(feature = "store"))]
fn run_store(_: &[u8], _: &Path) -> Outcome {
    panic!("strato-fuzz was built without the `store` feature");
}

/// True when the `store` target is built in.
pub const HAS_STORE: bool = cfg!(feature = "store");

/// True when the `sql` target is built in.
pub const HAS_SQL: bool = cfg!(feature = "sql");

/// The `sql` target's limits: tight enough that a run ends within AFL++'s 5 s bound.
#[cfg(feature = "sql")]
pub fn sql_limits() -> strato_sql::Limits {
    strato_sql::Limits {
        timeout: Some(Duration::from_secs(2)),
        ..strato_sql::Limits::with_budget(256 << 20)
    }
}

/// The profile every `sql` run queries: a small Kineto trace (a step, CPU ops, launches,
/// kernels, a copy, flows, memory counters, two streams) imported and written once per process.
#[cfg(feature = "sql")]
fn sql_profile() -> &'static Path {
    static PROFILE: std::sync::OnceLock<(tempfile::TempDir, PathBuf)> = std::sync::OnceLock::new();
    let (_dir, profile) = PROFILE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("the sql target's profile directory");
        let source = dir.path().join("trace.json");
        std::fs::write(&source, SQL_TRACE).expect("writing the sql target's trace");
        let trace = strato_io::import_file(&source, &options()).expect("the sql trace imports");
        let profile = dir.path().join("profile");
        strato_store::write(&trace, &profile).expect("the sql trace is written as a profile");
        (dir, profile)
    });
    profile
}

/// The trace of [`sql_profile`].
#[cfg(feature = "sql")]
const SQL_TRACE: &str = r#"{"schemaVersion":1,"distributedInfo":{"rank":0,"world_size":1},
"deviceProperties":[{"id":0,"name":"NVIDIA H100 80GB HBM3","totalGlobalMem":85000000000,"numSms":132}],
"traceEvents":[
{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":1000},
{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":10,"dur":100,"args":{"External id":1,"Input Dims":[[64,64],[64,64]],"Input type":["float","float"]}},
{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":20,"dur":10,"args":{"correlation":1,"External id":1}},
{"ph":"X","cat":"kernel","name":"gemm_kernel","pid":0,"tid":7,"ts":50,"dur":500,"args":{"correlation":1,"device":0,"stream":7,"External id":1}},
{"ph":"X","cat":"cpu_op","name":"aten::copy_","pid":1,"tid":1,"ts":200,"dur":50,"args":{"External id":2}},
{"ph":"X","cat":"cuda_runtime","name":"cudaMemcpyAsync","pid":1,"tid":1,"ts":210,"dur":10,"args":{"correlation":2,"External id":2}},
{"ph":"X","cat":"gpu_memcpy","name":"Memcpy HtoD (Pageable -> Device)","pid":0,"tid":8,"ts":560,"dur":40,"args":{"correlation":2,"device":0,"stream":8,"bytes":65536}},
{"ph":"X","cat":"kernel","name":"relu_kernel","pid":0,"tid":7,"ts":600,"dur":30,"args":{"correlation":3,"device":0,"stream":7}},
{"ph":"s","id":1,"pid":1,"tid":1,"ts":20,"cat":"ac2g","name":"ac2g"},
{"ph":"f","id":1,"pid":0,"tid":7,"ts":50,"cat":"ac2g","name":"ac2g","bp":"e"},
{"ph":"i","cat":"cpu_instant_event","name":"[memory]","pid":1,"tid":1,"ts":15,"s":"t","args":{"Total Allocated":1048576,"Bytes":4096,"Device Id":0}},
{"ph":"M","name":"thread_name","pid":1,"tid":1,"args":{"name":"MainThread"}}
]}"#;

#[cfg(feature = "sql")]
fn run_sql(data: &[u8]) -> Outcome {
    let query = String::from_utf8_lossy(data);
    let session = strato_sql::Session::over_profile(sql_profile(), 2, sql_limits())
        .expect("a session over the fixed profile");
    match session.query(&query) {
        Ok(result) => Outcome::Answered {
            rows: result.num_rows(),
        },
        Err(
            e @ (strato_sql::SqlError::Query(_)
            | strato_sql::SqlError::ResultTooLarge { .. }
            | strato_sql::SqlError::Timeout { .. }),
        ) => {
            let message = e.to_string();
            assert!(
                !message.contains('\n'),
                "error is not one line: {message:?}"
            );
            assert!(
                message.starts_with("query: "),
                "not a query error: {message:?}"
            );
            Outcome::Refused(message)
        }
        Err(e) => panic!("a query broke the session: {e}"),
    }
}

#[cfg(not(feature = "sql"))]
fn run_sql(_: &[u8]) -> Outcome {
    panic!("strato-fuzz was built without the `sql` feature");
}

fn check_import(path: &Path, result: IoResult<Trace>) -> Outcome {
    match result {
        Ok(trace) => imported(&trace),
        Err(e) => refused(path, &e.to_string()),
    }
}

fn imported(trace: &Trace) -> Outcome {
    if let Err(e) = trace.validate() {
        panic!("the importer returned a trace that fails Trace::validate: {e}");
    }
    Outcome::Imported {
        spans: trace.spans.len(),
        instants: trace.instants.len(),
        counters: trace.counters.len(),
    }
}

fn refused(path: &Path, message: &str) -> Outcome {
    // The file itself, or (for a profile directory) a file inside it.
    let path = path.display().to_string();
    assert!(
        message.starts_with(&format!("{path}: ")) || message.starts_with(&format!("{path}/")),
        "error does not name the file: {message:?}"
    );
    assert!(
        !message.contains('\n'),
        "error is not one line: {message:?}"
    );
    Outcome::Refused(message.to_owned())
}

/// The read window `chrome_chunked` uses for `data`: tiny and odd sizes (a function of the
/// input so a run is reproducible from its bytes alone).
pub fn chunk_size(data: &[u8]) -> usize {
    const SIZES: [usize; 6] = [1, 2, 3, 7, 64, 4093];
    SIZES[data.len() % SIZES.len()]
}

/// Imports plain JSON through a read window of [`chunk_size`] and compares with the CLI's
/// outcome.
fn compare_chunked(path: &Path, data: &[u8], cli: &Outcome) {
    let options = ImportOptions {
        read_size: chunk_size(data),
        ..options()
    };
    let plain_json = !data.starts_with(&[0x1f, 0x8b])
        && matches!(
            strato_io::detect_format(path, &options),
            Ok(strato_io::Format::ChromeJson)
        );
    if !plain_json || strato_io::recording::is_recording_file(path) {
        return;
    }
    let input = strato_io::input::Input::from_reader(Box::new(BufReader::with_capacity(
        chunk_size(data),
        Cursor::new(data.to_vec()),
    )));
    let result = strato_io::chrome::import(path, input, &options)
        .map(|trace| strato_io::tf::post_process(trace, &options))
        .and_then(|trace| {
            trace.validate().map_err(|e| {
                strato_io::Error::new(path, strato_io::ErrorKind::Invalid(e.to_string()))
            })?;
            Ok(trace)
        });
    let chunked = check_import(path, result);
    match (cli, &chunked) {
        (Outcome::Imported { .. }, Outcome::Imported { .. }) => assert_eq!(
            cli,
            &chunked,
            "read window {} changes the result",
            chunk_size(data)
        ),
        (Outcome::Refused(_), Outcome::Refused(_)) => {}
        _ => panic!(
            "read window {} changes the result: the CLI's read gives {cli:?}, the window {chunked:?}",
            chunk_size(data)
        ),
    }
}

/// Why a bounded run failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// A rule broke or the importer panicked (the panic message).
    Panic(String),
    /// The run did not finish within the bound.
    Timeout(Duration),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Panic(message) => write!(f, "panic: {message}"),
            Failure::Timeout(limit) => write!(f, "no result within {limit:?} (hang)"),
        }
    }
}

/// Runs [`run`] on a thread and waits at most `limit`. A hung run's thread is left behind
/// (it cannot be stopped); the caller reports the failure and the process ends with it.
pub fn run_bounded(target: Target, data: &[u8], limit: Duration) -> Result<Outcome, Failure> {
    let (send, receive) = mpsc::channel();
    let data = data.to_vec();
    std::thread::Builder::new()
        .name(format!("fuzz-{}", target.name()))
        .spawn(move || {
            let result = std::panic::catch_unwind(|| run(target, &data));
            let _ = send.send(result.map_err(|payload| {
                payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_else(|| "non-text panic payload".into())
            }));
        })
        .expect("spawning the fuzz thread");
    match receive.recv_timeout(limit) {
        Ok(Ok(outcome)) => Ok(outcome),
        Ok(Err(message)) => Err(Failure::Panic(message)),
        Err(_) => Err(Failure::Timeout(limit)),
    }
}

/// The files of a profile directory, by the index the store container uses.
#[cfg(feature = "store")]
pub fn store_files() -> Vec<String> {
    let mut names = vec![strato_store::METADATA_FILE.to_owned()];
    names.extend(strato_store::table_names().map(|t| format!("{t}.parquet")));
    names
}

/// Packs the profile directory `dir` into the store target's input: for each file, one byte
/// (its index in [`store_files`]), its length (u32, little-endian) and its bytes.
#[cfg(feature = "store")]
pub fn pack_store(dir: &Path) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    for (index, name) in store_files().iter().enumerate() {
        let path = dir.join(name);
        if !path.exists() {
            continue;
        }
        let bytes = std::fs::read(&path)?;
        let len = u32::try_from(bytes.len()).map_err(std::io::Error::other)?;
        out.push(u8::try_from(index).map_err(std::io::Error::other)?);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&bytes);
    }
    Ok(out)
}

/// Writes the profile directory a store input describes (see [`pack_store`]). Any bytes make a
/// directory: the index is taken modulo the number of files, a length past the end takes what
/// is left, a later entry for the same file replaces it.
#[cfg(feature = "store")]
pub fn unpack_store(data: &[u8], dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let names = store_files();
    let mut rest = data;
    while let Some((&index, tail)) = rest.split_first() {
        let (len, tail) = match tail.split_first_chunk::<4>() {
            Some((len, tail)) => (u32::from_le_bytes(*len) as usize, tail),
            None => (tail.len(), &tail[tail.len()..]),
        };
        let len = len.min(tail.len());
        let name = &names[usize::from(index) % names.len()];
        std::fs::write(dir.join(name), &tail[..len])?;
        rest = &tail[len..];
    }
    Ok(())
}

/// Bytes a mutation writes where formats keep structure, numbers and lengths.
const INTERESTING_BYTES: &[u8] = b"\x00\x01\x7f\x80\xff-+.eE09\"\\{}[],: \n\r";

/// Numbers a mutation writes over a run of digits in text formats.
const INTERESTING_NUMBERS: [&str; 12] = [
    "-1",
    "0",
    "1e308",
    "-1e308",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551616",
    "1.5e-7",
    "NaN",
    "-0",
    "4294967296",
    "",
];

/// Integers a mutation writes (little-endian) into binary formats.
const INTERESTING_INTS: [i64; 9] = [
    0,
    -1,
    1,
    i64::MIN,
    i64::MAX,
    i32::MAX as i64,
    u32::MAX as i64,
    1 << 40,
    0x7f,
];

/// One deterministic mutation of `data`: 1-4 stacked edits (bit flips, interesting bytes,
/// numbers and integers, deletions, duplications, insertions, truncation, a splice from
/// `donor`). The same generator state gives the same result.
pub fn mutate(rng: &mut fastrand::Rng, data: &[u8], donor: &[u8]) -> Vec<u8> {
    let mut out = data.to_vec();
    for _ in 0..rng.usize(1..=4) {
        if out.is_empty() {
            out.push(rng.u8(..));
            continue;
        }
        let len = out.len();
        let at = rng.usize(..len);
        let span = rng.usize(1..=(len - at).min(64));
        match rng.u8(..10) {
            0 => out[at] ^= 1 << rng.u8(..8),
            1 => out[at] = INTERESTING_BYTES[rng.usize(..INTERESTING_BYTES.len())],
            2 => {
                out.drain(at..at + span);
            }
            3 => {
                let copy = out[at..at + span].to_vec();
                let to = rng.usize(..=len);
                out.splice(to..to, copy);
            }
            4 => {
                let bytes: Vec<u8> = (0..rng.usize(1..=8)).map(|_| rng.u8(..)).collect();
                out.splice(at..at, bytes);
            }
            5 => out.truncate(at),
            6 => {
                let value = INTERESTING_INTS[rng.usize(..INTERESTING_INTS.len())];
                let width = [1, 2, 4, 8][rng.usize(..4)].min(len - at);
                out[at..at + width].copy_from_slice(&value.to_le_bytes()[..width]);
            }
            7 if !donor.is_empty() => {
                let from = rng.usize(..donor.len());
                let take = rng.usize(1..=(donor.len() - from).min(256));
                out.splice(at..at + span, donor[from..from + take].iter().copied());
            }
            _ => {
                // A run of digits (text formats) becomes an interesting number.
                let Some(start) = (at..len).find(|&i| out[i].is_ascii_digit()) else {
                    continue;
                };
                let end = (start..len)
                    .find(|&i| !(out[i].is_ascii_digit() || out[i] == b'.'))
                    .unwrap_or(len);
                let number = INTERESTING_NUMBERS[rng.usize(..INTERESTING_NUMBERS.len())];
                out.splice(start..end, number.bytes());
            }
        }
    }
    out
}

/// The files of a corpus or regression directory, sorted (none when it does not exist).
pub fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.file_name().is_none_or(|n| n != "README.md"))
        .collect();
    files.sort();
    files
}

/// The `fuzz/` directory of this checkout.
pub fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}
