//! Issue 11, deliverable 1: the Chrome/Kineto import gives the same trace for every split of
//! every valid document. Every Chrome-trace JSON file found under `../shared/data` (discovered
//! by walking the directory, so new files are covered) is imported compact at the default read
//! size as the reference, then re-read with other read sizes, shifted by leading whitespace and
//! re-laid-out (newline + indentation of 1 or 4 after every `,` `{` `[` outside strings, LF or
//! CRLF line ends); every variant must give the same [`Summary`].
//!
//! Scheme (CI runs in debug on 2 cores, so not every combination on every byte of 220 MB):
//! - every file up to 4 MB, whole: read size 4093 shifted by a few bytes, and a re-laid-out copy
//!   (indent 1, CRLF) at read size 64;
//! - every file, an excerpt (the header, the first and last ~8 KB of events, and the original
//!   closing with its top-level keys): every read size 1, 2, 3, 7, 64, 4093 and the default
//!   with shifts 0..=3 (read sizes 1 to 3 end a window at every byte of it), and re-laid-out
//!   copies (indent 1 LF, indent 4 CRLF) at a spread of read sizes;
//! - `every_variant_of_every_file_whole` (`#[ignore]`, run in release by
//!   `scripts/split-matrix.sh`): every read size x layouts x shifts on every whole file.
//!
//! Plus a property test: generated documents with numbers (signs, fractions, exponents),
//! strings with escapes, literals and whitespace, split at random read sizes, must give what
//! was generated.
#![allow(clippy::unwrap_used)] // test helpers panic on broken fixtures by design

use std::collections::BTreeMap;
use std::io::{Cursor, Read};
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use strato_io::{chrome, input::Input, ErrorKind, ImportOptions};
use strato_trace::Trace;

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data")
}

/// Every `*.json` / `*.json.gz` file under the data directory, with its (decompressed) text.
fn json_files() -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut dirs = vec![data_dir()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            // .pb/.sqlite/.csv are other formats with their own readers.
            if !(name.ends_with(".json") || name.ends_with(".json.gz")) {
                continue;
            }
            let raw = std::fs::read(&path).unwrap();
            let text = if raw.starts_with(&[0x1f, 0x8b]) {
                let mut out = Vec::new();
                flate2::read::MultiGzDecoder::new(&raw[..])
                    .read_to_end(&mut out)
                    .unwrap();
                out
            } else {
                raw
            };
            files.push((path, text));
        }
    }
    files.sort();
    assert!(
        files.len() >= 30,
        "expected the shared traces, found {}",
        files.len()
    );
    files
}

/// What the import gave, as `strato info --json` counts it (spans, instants, counters and
/// flows per category) plus checksums over every span's start/end/name/args, instant,
/// counter sample and flow.
#[derive(Debug, PartialEq, Eq)]
struct Summary {
    counts: BTreeMap<(&'static str, String), u64>,
    tracks: usize,
    processes: usize,
    checksum: u64,
}

fn fnv(hash: &mut u64, bytes: &[u8]) {
    for &b in bytes {
        *hash ^= b as u64;
        *hash = hash.wrapping_mul(0x100_0000_01b3);
    }
}

/// Args text without whitespace outside strings (layouts differ only there).
fn squeeze(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let (mut in_string, mut escape) = (false, false);
    for &b in text.as_bytes() {
        if in_string {
            if escape {
                escape = false;
            } else if b == b'\\' {
                escape = true;
            } else if b == b'"' {
                in_string = false;
            }
            out.push(b);
        } else if !b.is_ascii_whitespace() {
            in_string = b == b'"';
            out.push(b);
        }
    }
    out
}

fn summary(trace: &Trace) -> Summary {
    let mut counts = BTreeMap::new();
    let mut checksum = 0xcbf2_9ce4_8422_2325u64;
    for span in &trace.spans {
        *counts
            .entry(("span", trace.str(span.category).to_owned()))
            .or_insert(0) += 1;
        fnv(&mut checksum, &span.start.to_le_bytes());
        fnv(&mut checksum, &span.end.to_le_bytes());
        fnv(&mut checksum, trace.str(span.name).as_bytes());
        if let Some(args) = trace.args_text(span.args) {
            fnv(&mut checksum, &squeeze(&args));
        }
    }
    for instant in &trace.instants {
        *counts
            .entry(("instant", trace.str(instant.category).to_owned()))
            .or_insert(0) += 1;
        fnv(&mut checksum, &instant.ts.to_le_bytes());
        fnv(&mut checksum, trace.str(instant.name).as_bytes());
    }
    for counter in &trace.counters {
        *counts.entry(("counter", String::new())).or_insert(0) += 1;
        fnv(&mut checksum, &counter.ts.to_le_bytes());
        fnv(&mut checksum, &counter.value.to_bits().to_le_bytes());
    }
    for flow in &trace.flows {
        *counts
            .entry(("flow", trace.str(flow.category).to_owned()))
            .or_insert(0) += 1;
        fnv(&mut checksum, &flow.id.to_le_bytes());
        for end in [&flow.from, &flow.to].into_iter().flatten() {
            fnv(&mut checksum, &end.ts.to_le_bytes());
        }
    }
    Summary {
        counts,
        tracks: trace.tracks.len(),
        processes: trace.processes.len(),
        checksum,
    }
}

fn import(text: &[u8], read_size: usize) -> Result<Trace, strato_io::Error> {
    let options = ImportOptions {
        read_size,
        ..ImportOptions::default()
    };
    let input = Input::from_reader(Box::new(Cursor::new(text.to_vec())));
    chrome::import(Path::new("variant.json"), input, &options)
}

/// Leading whitespace of `n` bytes (a mix of the four JSON whitespace bytes).
fn shifted(text: &[u8], n: usize) -> Vec<u8> {
    let mut out: Vec<u8> = (0..n).map(|i| b" \n\t\r"[i % 4]).collect();
    out.extend_from_slice(text);
    out
}

/// The text with a line end and `indent` spaces per depth after every `,` `{` `[` outside
/// strings (numbers and strings untouched).
fn relaid(text: &[u8], indent: usize, crlf: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() * 2);
    let (mut in_string, mut escape, mut depth) = (false, false, 0usize);
    for &b in text {
        out.push(b);
        if in_string {
            if escape {
                escape = false;
            } else if b == b'\\' {
                escape = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if matches!(b, b',' | b'{' | b'[') {
            if crlf {
                out.push(b'\r');
            }
            out.push(b'\n');
            out.extend(std::iter::repeat_n(b' ', indent * depth));
        }
    }
    out
}

/// Byte ranges of the document: where the event array's first element may start, each
/// event's `[start, end)`, and where the array's closing `]` is.
struct Layout {
    events: Vec<(usize, usize)>,
    array_open: usize,
    array_close: usize,
}

fn layout(text: &[u8]) -> Layout {
    let (mut in_string, mut escape, mut depth) = (false, false, 0usize);
    let mut string_start = 0;
    let mut last_key = Vec::new();
    let mut array_depth = None;
    let mut array_open = 0;
    let mut events = Vec::new();
    let mut event_start = 0;
    for (i, &b) in text.iter().enumerate() {
        if in_string {
            if escape {
                escape = false;
            } else if b == b'\\' {
                escape = true;
            } else if b == b'"' {
                in_string = false;
                if depth == 1 {
                    last_key = text[string_start..i].to_vec();
                }
            }
            continue;
        }
        match b {
            b'"' => {
                in_string = true;
                string_start = i + 1;
            }
            b'{' | b'[' => {
                depth += 1;
                let is_array = b == b'['
                    && array_depth.is_none()
                    && (depth == 1 || (depth == 2 && last_key == b"traceEvents"));
                if is_array {
                    array_depth = Some(depth);
                    array_open = i + 1;
                } else if array_depth == Some(depth - 1) {
                    event_start = i;
                }
            }
            b'}' | b']' => {
                if array_depth == Some(depth) {
                    return Layout {
                        events,
                        array_open,
                        array_close: i,
                    };
                }
                depth -= 1;
                if array_depth == Some(depth) {
                    events.push((event_start, i + 1));
                }
            }
            _ => {}
        }
    }
    panic!("no event array found");
}

/// The header, about `keep` bytes of the first and of the last events, and the original
/// closing (with the top-level keys after the array).
fn excerpt(text: &[u8], keep: usize) -> Vec<u8> {
    let l = layout(text);
    let mut out = text[..l.array_open].to_vec();
    let first_end = l
        .events
        .iter()
        .position(|&(_, end)| end > keep)
        .unwrap_or(l.events.len());
    let total = l.events.len();
    let last_start = l
        .events
        .iter()
        .rposition(|&(start, _)| l.array_close - start > keep)
        .map_or(0, |i| i + 1)
        .max(first_end.min(total));
    let chosen: Vec<_> = l.events[..first_end]
        .iter()
        .chain(&l.events[last_start..])
        .collect();
    for (i, &&(start, end)) in chosen.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&text[start..end]);
    }
    out.extend_from_slice(&text[l.array_close..]);
    out
}

/// Whether the text is a Chrome trace: a bare event array, or an object with `traceEvents`.
/// Other JSON (rocprofiler-sdk's `rocprof/*.json.gz`) is a format of its own, read whole by
/// `rocprof.rs` without the splitter (tested in tests/rocprof.rs).
fn is_chrome_trace(text: &[u8]) -> bool {
    let text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
    match text.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'[') => true,
        Some(b'{') => text.windows(13).any(|w| w == b"\"traceEvents\""),
        _ => false,
    }
}

/// The Chrome-trace files, with their reference imports when `with_reference`.
fn chrome_files(max_size: usize) -> Vec<(PathBuf, Vec<u8>, Option<Summary>)> {
    let mut out = Vec::new();
    for (path, text) in json_files() {
        if !is_chrome_trace(&text) {
            eprintln!(
                "skipped (not a Chrome trace: no splitter): {}",
                path.display()
            );
            continue;
        }
        let reference = (text.len() <= max_size).then(|| {
            let trace = import(&text, strato_io::json_split::DEFAULT_CHUNK_SIZE)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            summary(&trace)
        });
        out.push((path, text, reference));
    }
    assert!(out.len() >= 30, "expected the shared Chrome traces");
    out
}

/// CI imports whole files up to this size in every variant it checks; bigger ones through
/// their excerpt (and whole in `every_variant_of_every_file_whole`).
const CI_WHOLE_FILE_BYTES: usize = 4 << 20;

fn check(name: &str, what: &str, text: &[u8], read_size: usize, expected: &Summary) {
    match import(text, read_size) {
        Ok(trace) => assert!(
            summary(&trace) == *expected,
            "{name}: {what}, read size {read_size}: a different trace"
        ),
        Err(e) => panic!("{name}: {what}, read size {read_size}: {e}"),
    }
}

const READ_SIZES: [usize; 7] = [
    1,
    2,
    3,
    7,
    64,
    4093,
    strato_io::json_split::DEFAULT_CHUNK_SIZE,
];

#[test]
fn every_chrome_file_at_odd_read_sizes_shifts_and_layouts() {
    for (i, (path, text, expected)) in chrome_files(CI_WHOLE_FILE_BYTES).iter().enumerate() {
        let name = path.file_name().unwrap().to_string_lossy();
        let started = std::time::Instant::now();
        if let Some(expected) = expected {
            check(
                &name,
                "whole, shifted",
                &shifted(text, 1 + i % 7),
                4093,
                expected,
            );
            check(
                &name,
                "whole, indent 1 CRLF",
                &relaid(text, 1, true),
                64,
                expected,
            );
        }
        let part = excerpt(text, 8 << 10);
        let part_expected = summary(&import(&part, READ_SIZES[6]).unwrap());
        // The original layout at every read size, with shifts 0..R-1 (up to 3): a window ends
        // at every position for R <= 3. The re-laid-out copies at a spread of read sizes.
        let layouts: [(&str, Vec<u8>, &[usize], usize); 3] = [
            ("original", part.clone(), &READ_SIZES, 4),
            (
                "indent 1",
                relaid(&part, 1, false),
                &[1, 7, 4093, READ_SIZES[6]],
                2,
            ),
            ("indent 4 CRLF", relaid(&part, 4, true), &[2, 3, 64], 1),
        ];
        for (what, text, read_sizes, shifts) in layouts {
            for &read_size in read_sizes {
                for shift in 0..read_size.min(shifts) {
                    let text = shifted(&text, shift);
                    check(&name, what, &text, read_size, &part_expected);
                }
            }
        }
        eprintln!(
            "{name}: {} bytes, excerpt {} bytes: {:?}",
            text.len(),
            part.len(),
            started.elapsed()
        );
    }
}

/// The full matrix on every whole file; slow in debug: `scripts/split-matrix.sh` runs it in
/// release. `STRATO_SPLIT_SHIFTS` (default 3) sets the largest shift.
#[test]
#[ignore]
fn every_variant_of_every_file_whole() {
    let shifts: usize = std::env::var("STRATO_SPLIT_SHIFTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    for (path, text, expected) in chrome_files(usize::MAX) {
        let expected = expected.unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let started = std::time::Instant::now();
        let layouts = [
            ("compact", text.clone()),
            ("indent 1", relaid(&text, 1, false)),
            ("indent 4", relaid(&text, 4, false)),
            ("indent 1 CRLF", relaid(&text, 1, true)),
            ("indent 4 CRLF", relaid(&text, 4, true)),
        ];
        let mut runs = 0;
        for (what, text) in &layouts {
            for shift in 0..=shifts {
                let text = shifted(text, shift);
                for read_size in READ_SIZES {
                    check(
                        &name,
                        &format!("{what}, shift {shift}"),
                        &text,
                        read_size,
                        &expected,
                    );
                    runs += 1;
                }
            }
        }
        eprintln!("{name}: {runs} variants in {:?}", started.elapsed());
    }
}

#[test]
fn damaged_documents_are_errors_and_salvage_keeps_what_was_read() {
    let path = data_dir().join("kineto/hta_alexnet_trace.json.gz");
    let mut text = Vec::new();
    flate2::read::MultiGzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_end(&mut text)
        .unwrap();
    let expected = summary(&import(&text, 4093).unwrap());
    let total: u64 = expected.counts.values().sum();
    let cut = &text[..text.len() * 2 / 3];
    let mut trailing = text.clone();
    trailing.extend_from_slice(b"\n{}");
    for (what, bad) in [("truncated", cut.to_vec()), ("trailing data", trailing)] {
        let err = import(&bad, 4093).unwrap_err();
        assert!(matches!(err.kind, ErrorKind::Json { .. }), "{what}: {err}");
        let options = ImportOptions {
            salvage: true,
            read_size: 4093,
            ..ImportOptions::default()
        };
        let input = Input::from_reader(Box::new(Cursor::new(bad)));
        let trace = chrome::import(Path::new("bad.json"), input, &options).unwrap();
        let kept: u64 = summary(&trace).counts.values().sum();
        assert!(kept > 0 && kept <= total, "{what}: kept {kept} of {total}");
        let notes = &trace.ranks[0].notes.notes;
        let salvaged = notes
            .iter()
            .find(|n| n.starts_with("salvaged: "))
            .unwrap_or_else(|| panic!("{what}: no salvage note in {notes:?}"));
        assert!(
            !salvaged.starts_with("salvaged: 0 events"),
            "{what}: {salvaged}"
        );
        assert!(salvaged.contains("byte"), "{what}: {salvaged}");
    }
}

#[test]
fn huge_names_are_cut_and_counted_in_linear_time() {
    let long = "n".repeat(8 << 20);
    let args = format!("{{\"blob\":\"{}\"}}", "a".repeat(3 << 20));
    let doc = format!(
        "{{\"traceEvents\":[{{\"ph\":\"X\",\"name\":\"{long}\",\"cat\":\"c\",\"pid\":1,\"tid\":1,\
         \"ts\":1,\"dur\":2,\"args\":{args}}},{{\"ph\":\"X\",\"name\":\"x\",\"pid\":1,\"tid\":1,\
         \"ts\":1.5,\"dur\":0.5}}]}}"
    );
    let started = std::time::Instant::now();
    // 4093-byte reads: 2,800 windows end inside the big event; quadratic work would take
    // minutes here.
    let trace = import(doc.as_bytes(), 4093).unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
    assert_eq!(trace.spans.len(), 2);
    assert_eq!(
        trace.str(trace.spans[0].name).len(),
        chrome::MAX_STRING_BYTES
    );
    let args = trace.args_text(trace.spans[0].args).unwrap();
    assert_eq!(
        args,
        format!("{{\"strato_truncated_args_bytes\":{}}}", (3 << 20) + 11)
    );
    let notes = &trace.ranks[0].notes;
    assert_eq!(notes.get("truncated_strings"), 1);
    assert_eq!(
        notes.get("truncated_string_bytes"),
        (8u64 << 20) - chrome::MAX_STRING_BYTES as u64
    );
    assert_eq!(notes.get("truncated_args"), 1);
}

/// A JSON number as a trace could write it (sign, fraction, exponent), with its value in ns
/// when read as microseconds, for the ones the generator uses as timestamps.
fn number() -> impl Strategy<Value = String> {
    (
        any::<bool>(),
        0u64..10_000_000,
        proptest::option::of(0u32..1_000),
        proptest::option::of((
            prop_oneof![Just("e"), Just("E")],
            prop_oneof![Just(""), Just("+"), Just("-")],
            0u32..3,
        )),
    )
        .prop_map(|(neg, int, frac, exp)| {
            let mut s = String::new();
            if neg {
                s.push('-');
            }
            s.push_str(&int.to_string());
            if let Some(f) = frac {
                s.push_str(&format!(".{f:03}"));
            }
            if let Some((e, sign, x)) = exp {
                s.push_str(&format!("{e}{sign}{x}"));
            }
            s
        })
}

/// A JSON string body with escapes (`\"`, `\\`, `\n`, `\u00e9`, surrogate pairs) and UTF-8.
fn string_body() -> impl Strategy<Value = (String, String)> {
    proptest::collection::vec(
        prop_oneof![
            Just(("a".to_owned(), "a".to_owned())),
            Just(("\\\"".to_owned(), "\"".to_owned())),
            Just(("\\\\".to_owned(), "\\".to_owned())),
            Just(("\\n".to_owned(), "\n".to_owned())),
            Just(("\\u00e9".to_owned(), "\u{e9}".to_owned())),
            Just(("\\ud83d\\ude00".to_owned(), "\u{1f600}".to_owned())),
            Just(("é".to_owned(), "é".to_owned())),
            Just(("}]".to_owned(), "}]".to_owned())),
        ],
        0..6,
    )
    .prop_map(|parts| {
        let json = parts.iter().map(|(j, _)| j.as_str()).collect::<String>();
        let text = parts.iter().map(|(_, t)| t.as_str()).collect::<String>();
        (json, text)
    })
}

fn whitespace() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![Just(" "), Just("\n"), Just("\r\n"), Just("\t")],
        0..3,
    )
    .prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn generated_documents_split_anywhere(
        events in proptest::collection::vec(
            (0u64..1_000_000, 0u32..1000, string_body(), number(), whitespace(),
             prop_oneof![Just("true"), Just("false"), Just("null")]),
            1..12,
        ),
        read_size in 1usize..80,
        lead in whitespace(),
    ) {
        let mut doc = format!("{lead}{{\"meta\": {} ,\"traceEvents\":[", events[0].3);
        for (i, (ts, frac, (name_json, _), value, ws, literal)) in events.iter().enumerate() {
            if i > 0 {
                doc.push_str(&format!("{ws},{ws}"));
            }
            doc.push_str(&format!(
                "{{{ws}\"ph\"{ws}:{ws}\"X\",\"name\":\"{name_json}\",\"pid\":1,\"tid\":2,\
                 \"ts\":{ts}.{frac:03},{ws}\"dur\":{frac}e-3,\"args\":{{\"v\":{value},\
                 \"l\":{literal},\"s\":[\"{name_json}\",{value}]}}{ws}}}"
            ));
        }
        doc.push_str(&format!("]{lead}, \"tail\": [{}]}}{lead}", events[0].3));
        let trace = import(doc.as_bytes(), read_size).unwrap();
        let reference = import(doc.as_bytes(), 1 << 20).unwrap();
        prop_assert_eq!(summary(&trace), summary(&reference));
        prop_assert_eq!(trace.spans.len(), events.len());
        for (span, (ts, frac, (_, name), _, _, _)) in trace.spans.iter().zip(&events) {
            prop_assert_eq!(span.start, (*ts as i64) * 1000 + *frac as i64);
            prop_assert_eq!(span.end - span.start, *frac as i64);
            prop_assert_eq!(trace.str(span.name), name.as_str());
        }
    }
}
