//! Every grammatical JSON trace imports, and says what the file says.
//!
//! The oracle for "valid" is RFC 8259 as Python's `json` reads it. Real Kineto files from
//! `../shared/data` are rewritten in ways that change nothing a reader may see (a duplicate of
//! every key before the real one — the last value wins, as in Python; values of any type and
//! size in unknown args; device and stream indices written as `"cuda:0"` / `"stream 7"`; gzip
//! split into several members with headers, empty members and zero padding; tabs and a BOM),
//! and must import to the same trace; the number of spans is also checked against an
//! independent count from a `serde_json::Value` of the file. Small synthetic documents cover
//! what serde's typed parsing refused before (lone surrogates, numbers beyond f64, values of
//! unexpected types), each with its answer known by construction.
#![allow(clippy::unwrap_used)] // test helpers panic on broken fixtures by design

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde_json::Value;
use strato_io::{import_file, ImportOptions};
use strato_trace::{Trace, TrackKind};

fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(rel)
}

fn gunzip(path: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_end(&mut out)
        .unwrap();
    out
}

fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

/// Imports `bytes` written to a file named `name`, with and without args kept.
fn import_bytes(name: &str, bytes: &[u8]) -> (Trace, Trace) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    let full =
        import_file(&path, &ImportOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
    let lean_options = ImportOptions {
        keep_args: false,
        ..ImportOptions::default()
    };
    let lean = import_file(&path, &lean_options).unwrap_or_else(|e| panic!("{name} (lean): {e}"));
    (full, lean)
}

/// What a reader sees of a trace, args aside: every span, instant, counter sample and flow end
/// with its track, rank facts, devices and process names.
fn seen(trace: &Trace) -> Vec<String> {
    let track = |id: strato_trace::TrackId| format!("{:?}", trace.track(id).kind);
    let mut out: Vec<String> = trace
        .spans
        .iter()
        .map(|s| {
            format!(
                "span {} {} {} {} {} {:?} {:?}",
                track(s.track),
                s.start,
                s.end,
                trace.str(s.name),
                trace.str(s.category),
                s.correlation,
                s.external_id
            )
        })
        .collect();
    out.extend(
        trace
            .instants
            .iter()
            .map(|i| format!("instant {} {} {}", track(i.track), i.ts, trace.str(i.name))),
    );
    out.extend(
        trace
            .counters
            .iter()
            .map(|c| format!("counter {} {} {}", track(c.track), c.ts, c.value)),
    );
    out.extend(trace.flows.iter().map(|f| {
        let end = |e: &Option<strato_trace::FlowEnd>| {
            e.as_ref()
                .map(|e| format!("{}@{}:{:?}", track(e.track), e.ts, e.span))
        };
        format!("flow {} {:?} {:?}", f.id, end(&f.from), end(&f.to))
    }));
    out.extend(trace.ranks.iter().map(|r| {
        format!(
            "rank {:?} {:?} {:?} {}",
            r.rank, r.world_size, r.format, r.notes.events_read
        )
    }));
    out.extend(trace.devices.iter().map(|d| {
        format!(
            "device {} {:?} {:?} {:?}",
            d.index, d.name, d.sm_count, d.total_memory_bytes
        )
    }));
    out.extend(
        trace
            .processes
            .iter()
            .map(|p| format!("process {} {:?}", p.pid, p.name)),
    );
    out
}

/// Rewrites every event of a document (a `Value`) and lays it out again, compact.
fn rewrite(
    doc: &Value,
    mut event: impl FnMut(&serde_json::Map<String, Value>) -> String,
) -> String {
    let obj = doc.as_object().unwrap();
    let mut out = String::from("{");
    for (i, (key, value)) in obj.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&serde_json::to_string(key).unwrap());
        out.push(':');
        if key == "traceEvents" {
            let events: Vec<String> = value
                .as_array()
                .unwrap()
                .iter()
                .map(|e| event(e.as_object().unwrap()))
                .collect();
            out.push('[');
            out.push_str(&events.join(","));
            out.push(']');
        } else {
            out.push_str(&serde_json::to_string(value).unwrap());
        }
    }
    out.push('}');
    out
}

fn object_text(fields: &[(String, String)]) -> String {
    let parts: Vec<String> = fields.iter().map(|(k, v)| format!("{k}:{v}")).collect();
    format!("{{{}}}", parts.join(","))
}

/// The fields of an event as (key text, value text).
fn fields(e: &serde_json::Map<String, Value>) -> Vec<(String, String)> {
    e.iter()
        .map(|(k, v)| {
            (
                serde_json::to_string(k).unwrap(),
                serde_json::to_string(v).unwrap(),
            )
        })
        .collect()
}

/// Values of every JSON type and of sizes serde's typed parsing refuses.
const JUNK: [&str; 6] = [
    "1e400",
    "[1,{\"a\":[null,true]}]",
    "{\"x\":18446744073709551616}",
    "\"\\ud800\"",
    "-0",
    "null",
];

const REAL: [&str; 3] = [
    "kineto/hta_cuda_event_sync_trace.json.gz",
    "kineto/hta_triton_example.json.gz",
    "kineto/kineto2021_resnet50_worker0.pt.trace.json.gz",
];

#[test]
fn rewritten_real_files_import_to_the_same_trace() {
    for rel in REAL {
        let text = gunzip(&data(rel));
        let doc: Value = serde_json::from_slice(&text).unwrap();
        let (base, base_lean) = import_bytes("base.json", &text);
        let expected = seen(&base);
        assert_eq!(seen(&base_lean), expected, "{rel}: lean import");
        // An independent count: every `X` event is one span.
        let x_events = doc["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "X")
            .count();
        assert_eq!(base.spans.len(), x_events, "{rel}");

        let mut variants: Vec<(&str, Vec<u8>)> = Vec::new();
        // Every key twice: a junk value first, the real one last (the last wins).
        let mut n = 0;
        let dup = rewrite(&doc, |e| {
            let mut out = Vec::new();
            for (k, v) in fields(e) {
                n += 1;
                out.push((k.clone(), JUNK[n % JUNK.len()].to_owned()));
                out.push((k, v));
            }
            object_text(&out)
        });
        variants.push(("duplicate keys.json", dup.into_bytes()));
        // Unknown fields of every type in the event; device and stream as named strings.
        let named = rewrite(&doc, |e| {
            let mut out = fields(e);
            for (i, junk) in JUNK.iter().enumerate() {
                out.insert(
                    i.min(out.len()),
                    (format!("\"unknown{i}\""), (*junk).to_owned()),
                );
            }
            if let Some(args) = e.get("args").and_then(Value::as_object) {
                let mut a = fields(args);
                for (k, v) in &mut a {
                    match k.as_str() {
                        "\"device\"" if v.parse::<i64>().is_ok() => *v = format!("\"cuda:{v}\""),
                        "\"stream\"" if v.parse::<i64>().is_ok() => *v = format!("\"stream {v}\""),
                        _ => {}
                    }
                }
                let slot = out.iter_mut().find(|(k, _)| k == "\"args\"").unwrap();
                slot.1 = object_text(&a);
            }
            object_text(&out)
        });
        variants.push(("named indices.json", named.into_bytes()));
        // Gzip: three members (one empty), headers with a name, extra field and comment, then
        // zero padding; split inside events.
        let (a, b) = (text.len() / 3, 2 * text.len() / 3);
        let mut header = flate2::GzBuilder::new()
            .filename("trace.json")
            .comment("from a test")
            .extra(vec![b'S', b'T', 1, 0, 7])
            .write(Vec::new(), flate2::Compression::fast());
        header.write_all(&text[..a]).unwrap();
        let gz_variant = [
            header.finish().unwrap(),
            gz(b""),
            gz(&text[a..b]),
            gz(&text[b..]),
            vec![0; 1000],
        ]
        .concat();
        variants.push(("members.JSON", gz_variant));
        // A UTF-8 BOM, tabs and CRLF line ends.
        let pretty = serde_json::to_string_pretty(&doc)
            .unwrap()
            .replace("  ", "\t")
            .replace('\n', "\r\n");
        let mut bom = b"\xEF\xBB\xBF".to_vec();
        bom.extend_from_slice(pretty.as_bytes());
        bom.extend_from_slice(b"\r\n\t \n");
        variants.push(("bom tabs crlf", bom));

        for (name, bytes) in variants {
            let (full, lean) = import_bytes(name, &bytes);
            let mut got = seen(&full);
            let replaced = full.ranks[0].notes.get("lone_surrogates_replaced");
            if name == "duplicate keys.json" {
                // The junk `"\ud800"` values of decoded fields were decoded, then replaced.
                assert!(replaced > 0, "{rel}: {name}");
            }
            assert_eq!(seen(&lean), got, "{rel}: {name}: lean import");
            got.retain(|_| true);
            assert_eq!(got.len(), expected.len(), "{rel}: {name}");
            for (g, e) in got.iter().zip(&expected) {
                assert_eq!(g, e, "{rel}: {name}");
            }
        }
    }
}

fn one(name: &str, text: &str) -> (Trace, Trace) {
    import_bytes(name, text.as_bytes())
}

fn doc(events: &[&str]) -> String {
    format!("{{\"traceEvents\":[{}]}}", events.join(","))
}

#[test]
fn a_flow_with_steps_is_kept_as_its_legs() {
    // s -> t -> t -> f under one id, each end inside a span of its own thread: three legs,
    // each complete and bound to the span it sits in; a second flow without steps beside it.
    let text = doc(&[
        r#"{"ph":"X","cat":"op","name":"a","pid":1,"tid":1,"ts":10,"dur":10}"#,
        r#"{"ph":"X","cat":"op","name":"b","pid":1,"tid":2,"ts":30,"dur":10}"#,
        r#"{"ph":"X","cat":"op","name":"c","pid":1,"tid":3,"ts":50,"dur":10}"#,
        r#"{"ph":"X","cat":"op","name":"d","pid":1,"tid":4,"ts":70,"dur":10}"#,
        r#"{"ph":"s","cat":"q","name":"m","id":7,"pid":1,"tid":1,"ts":12}"#,
        r#"{"ph":"t","cat":"q","name":"m","id":7,"pid":1,"tid":2,"ts":32}"#,
        r#"{"ph":"t","cat":"q","name":"m","id":7,"pid":1,"tid":3,"ts":52}"#,
        r#"{"ph":"f","cat":"q","name":"m","id":7,"pid":1,"tid":4,"ts":72,"bp":"e"}"#,
        r#"{"ph":"s","cat":"q","name":"n","id":8,"pid":1,"tid":1,"ts":14}"#,
        r#"{"ph":"f","cat":"q","name":"n","id":8,"pid":1,"tid":4,"ts":74,"bp":"e"}"#,
    ]);
    for trace in [one("t.json", &text).0, one("t.json", &text).1] {
        let span_name = |end: Option<&strato_trace::FlowEnd>| {
            let span = end.and_then(|e| e.span).expect("a bound end");
            trace.str(trace.spans[span.0 as usize].name).to_string()
        };
        let mut legs: Vec<(u64, String, String)> = trace
            .flows
            .iter()
            .map(|f| (f.id, span_name(f.from.as_ref()), span_name(f.to.as_ref())))
            .collect();
        legs.sort();
        let want = [(7, "a", "b"), (7, "b", "c"), (7, "c", "d"), (8, "a", "d")];
        let want: Vec<(u64, String, String)> = want
            .iter()
            .map(|&(id, from, to)| (id, from.to_string(), to.to_string()))
            .collect();
        assert_eq!(legs, want);
    }
}

#[test]
fn lone_surrogates_become_replacement_characters_and_are_counted() {
    let text = doc(&[
        r#"{"ph":"X","cat":"cpu_op","name":"a\ud800b","pid":1,"tid":1,"ts":1,"dur":2,"args":{"Input Dims":"\udc00"}}"#,
        r#"{"ph":"X","cat":"c\udfff","name":"\ud83d\ude00 \\ud800","pid":1,"tid":1,"ts":1,"dur":2}"#,
        r#"{"ph":"M","name":"thread_name","pid":1,"tid":1,"args":{"name":"main \ud800"}}"#,
        // Surrogates in a string pid and tid (a thread of its own), counted too.
        r#"{"ph":"X","cat":"cpu_op","name":"p","pid":"w\udc01","tid":"t\ud801","ts":1,"dur":2}"#,
    ]);
    let text = format!("{{\"\\udbff key\":1,{}", &text[1..]);
    for trace in [one("s.json", &text).0, one("s.json", &text).1] {
        let names: Vec<&str> = trace.spans.iter().map(|s| trace.str(s.name)).collect();
        assert_eq!(names, ["a\u{FFFD}b", "\u{1F600} \\ud800", "p"]);
        assert_eq!(trace.str(trace.spans[1].category), "c\u{FFFD}");
        assert_eq!(trace.tracks[0].name.as_deref(), Some("main \u{FFFD}"));
        // Names, the category, the thread name, the top-level key, the string pid and tid;
        // args text is kept as written (still valid JSON) and not counted.
        let notes = &trace.ranks[0].notes;
        assert_eq!(notes.get("lone_surrogates_replaced"), 6);
    }
    let (full, _) = one("s.json", &text);
    assert_eq!(
        full.args_text(full.spans[0].args).as_deref(),
        Some(r#"{"Input Dims":"\udc00"}"#)
    );
}

#[test]
fn values_of_unexpected_types_and_sizes_are_read_not_refused() {
    let text = doc(&[
        // A number for a name, an array for a category, args that are not objects.
        r#"{"ph":"X","cat":["a"],"name":123,"pid":1,"tid":1,"ts":1,"dur":2,"args":[1,2]}"#,
        r#"{"ph":"X","cat":"cpu_op","name":"s","pid":1,"tid":1,"ts":1,"dur":2,"args":"hello"}"#,
        r#"{"ph":"X","cat":"cpu_op","name":"n","pid":1,"tid":1,"ts":1,"dur":2,"args":1e400}"#,
        // Numbers beyond i64 and f64 in args the importer reads, ids of any shape.
        r#"{"ph":"X","cat":"cpu_op","name":"big","pid":1,"tid":1,"ts":1,"dur":2,"args":{"External id":18446744073709551616,"correlation":1e400,"name":{"x":1},"rank":[0]}}"#,
        r#"{"ph":"s","cat":"c","name":"f","id2":{"local":"0x1"},"pid":1,"tid":1,"ts":1}"#,
        r#"{"ph":"f","cat":"c","name":"f","id2":{"local":"0x1"},"pid":1,"tid":1,"ts":2,"bp":"e"}"#,
        // A kernel whose device is named: on device 3's queue 7, not on a thread.
        r#"{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":"stream 7","ts":1,"dur":2,"args":{"device":"cuda:3","stream":"stream 7"}}"#,
        // An unreadable device falls back to pid.
        r#"{"ph":"X","cat":"kernel","name":"k2","pid":2,"tid":5,"ts":1,"dur":2,"args":{"device":"somewhere","stream":null}}"#,
        // A counter with a value beyond f64: dropped and counted, the other kept.
        r#"{"ph":"C","name":"mem","pid":1,"ts":3,"args":{"used":1e400,"free":5,"free":6}}"#,
    ]);
    for (i, trace) in [one("t.json", &text).0, one("t.json", &text).1]
        .into_iter()
        .enumerate()
    {
        let names: Vec<&str> = trace.spans.iter().map(|s| trace.str(s.name)).collect();
        assert_eq!(names, ["123", "s", "n", "big", "k", "k2"], "{i}");
        assert_eq!(trace.str(trace.spans[0].category), r#"["a"]"#);
        assert_eq!(trace.spans[3].external_id, None, "beyond u64");
        assert_eq!(trace.spans[3].correlation, None, "infinite");
        let kind = |s: usize| trace.track(trace.spans[s].track).kind.clone();
        assert_eq!(
            kind(4),
            TrackKind::DeviceQueue {
                device: 3,
                queue: 7
            }
        );
        assert_eq!(
            kind(5),
            TrackKind::DeviceQueue {
                device: 2,
                queue: 5
            }
        );
        assert_eq!(trace.flows.len(), 1, "id2 pairs the two ends");
        assert!(trace.flows[0].from.is_some() && trace.flows[0].to.is_some());
        let notes = &trace.ranks[0].notes;
        assert_eq!(notes.get("counter_values_out_of_range"), 1);
    }
    let (full, _) = one("t.json", &text);
    assert_eq!(full.counters.len(), 1);
    assert_eq!(full.counters[0].value, 6.0, "the last of duplicate keys");
    assert_eq!(full.args_text(full.spans[0].args).as_deref(), Some("[1,2]"));
    assert_eq!(full.args_text(full.spans[2].args).as_deref(), Some("1e400"));
}

#[test]
fn deep_nesting_in_args_is_read() {
    // Python's json reads ~990 levels; serde's typed parsing stops at 128.
    for depth in [127, 129, 900, 20_000] {
        let deep = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let text = doc(&[&format!(
            r#"{{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1,"dur":2,"args":{{"d":{deep}}}}}"#
        )]);
        let text = format!("{{\"other\":{deep},{}", &text[1..]);
        let (full, lean) = one("deep.json", &text);
        assert_eq!(full.spans.len(), 1, "{depth}");
        assert_eq!(lean.spans.len(), 1, "{depth}");
    }
}

/// A TensorBoard profile run directory: the traces are read, the profiler's tool data
/// (`*.pb` other than `*.xplane.pb`, `*.memory_profile.json.gz`), hidden files and the trace
/// viewer JSON of a host whose XPlane file is there (the same events) are not. A log
/// directory above it names it in its error.
#[test]
fn a_tensorboard_profile_run_directory_reads_its_traces_only() {
    let log = tempfile::tempdir().unwrap();
    let run = log.path().join("plugins/profile/2024_01_01_00_00_00");
    std::fs::create_dir_all(&run).unwrap();
    let copy = |from: &str, to: &str| std::fs::copy(data(from), run.join(to)).unwrap();
    copy(
        "kineto/hta_triton_example.json.gz",
        "worker0.1700000000000.pt.trace.json.gz",
    );
    copy("tf/GPU-multi-worker.xplane.pb", "host0.xplane.pb");
    copy(
        "tf/GPU-multi-worker.trace_viewer.json.gz",
        "host0.trace.json.gz",
    );
    std::fs::write(run.join("host0.overview_page.pb"), b"\x0a\x03abc").unwrap();
    std::fs::write(run.join("host0.kernel_stats.pb"), b"\x0a\x03abc").unwrap();
    std::fs::write(
        run.join("host0.memory_profile.json.gz"),
        gz(b"{\"memoryProfile\":{}}"),
    )
    .unwrap();
    std::fs::write(run.join(".hidden.json"), b"{}").unwrap();
    std::fs::write(run.join("events.out.tfevents.1700000000.host0"), b"\0").unwrap();
    let names: Vec<String> = strato_io::rank_files(&run)
        .unwrap()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        ["host0.xplane.pb", "worker0.1700000000000.pt.trace.json.gz"]
    );
    let trace =
        strato_io::import_paths(std::slice::from_ref(&run), &ImportOptions::default()).unwrap();
    assert_eq!(trace.ranks.len(), 2);
    let err = strato_io::rank_files(log.path()).unwrap_err().to_string();
    assert!(
        err.contains("1 directories below it do") && err.contains("2024_01_01_00_00_00"),
        "{err}"
    );
}
