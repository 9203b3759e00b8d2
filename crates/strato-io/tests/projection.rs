//! Issue 11 item 4: an import keeps what the command's analysis reads
//! ([`strato_io::Projection`]), and what it keeps is exactly what a full import holds of it.
//! The Chrome-trace JSON files under `../shared/data` (Kineto, 2021 schema, TF trace viewer;
//! up to 2 MB on disk, for a debug CI) are imported whole and with each projection; the projected trace must have the same tracks,
//! processes, devices and notes, the spans the projection's rule selects from the full import
//! (same order, same values, names compared as text), and nothing of the kinds it leaves out.
#![allow(clippy::unwrap_used)] // test helpers panic on broken fixtures by design

use std::path::{Path, PathBuf};

use strato_io::{ImportOptions, Projection, SpanProjection};
use strato_trace::{Span, Trace};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data")
}

fn json_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![data_dir()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                dirs.push(path);
            } else if (name.ends_with(".json") || name.ends_with(".json.gz"))
                // CI runs this in debug: files up to 2 MB on disk (most of them; the large
                // ones are covered by the byte-identical CLI comparison in docs/benchmarks.md).
                && std::fs::metadata(&path).unwrap().len() <= 2 << 20
                // Chrome-trace JSON only: projection is the Chrome importer's; rocprofv3 JSON
                // is its own format, imported whole (tests/rocprof.rs).
                && !path.components().any(|c| c.as_os_str() == "rocprof")
            {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// A span with its strings as text (string ids differ when fewer names are interned).
fn span_text(trace: &Trace, s: &Span) -> String {
    format!(
        "{:?} {} {} {:?} {:?} {:?} {:?} {:?}",
        s.track,
        s.start,
        s.end,
        trace.str(s.name),
        trace.str(s.category),
        s.level,
        s.correlation,
        s.external_id
    )
}

/// The rule of [`SpanProjection::DeviceAndLaunches`], applied to a span of the full import.
fn device_time_keeps(trace: &Trace, s: &Span) -> bool {
    const KINETO_HOST: &[&str] = &[
        "cpu_op",
        "user_annotation",
        "python_function",
        "Trace",
        "Operator",
        "fwdbwd",
    ];
    s.level.is_device_op()
        || trace.track(s.track).is_device()
        || s.correlation.is_some()
        || trace.str(s.name).starts_with("ProfilerStep#")
        || !KINETO_HOST.contains(&trace.str(s.category))
}

fn import(path: &Path, projection: Projection) -> Trace {
    let options = ImportOptions {
        keep_args: false,
        projection,
        ..ImportOptions::default()
    };
    strato_io::import_file(path, &options).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn projections_keep_exactly_what_their_rule_selects() {
    let files = json_files();
    assert!(files.len() >= 5, "expected the shared data's JSON traces");
    let mut left_out = 0usize;
    for path in &files {
        let full = import(path, Projection::ALL);
        for projection in [Projection::SPANS, Projection::DEVICE_TIME] {
            let part = import(path, projection);
            let what = format!("{} with {projection:?}", path.display());
            assert_eq!(part.tracks, full.tracks, "{what}: tracks");
            assert_eq!(part.processes, full.processes, "{what}: processes");
            assert_eq!(part.devices, full.devices, "{what}: devices");
            assert_eq!(part.ranks, full.ranks, "{what}: ranks and notes");
            assert!(part.instants.is_empty(), "{what}: instants");
            assert!(part.counters.is_empty(), "{what}: counters");
            assert!(part.flows.is_empty(), "{what}: flows");
            let expected: Vec<String> = full
                .spans
                .iter()
                .filter(|s| projection.spans == SpanProjection::All || device_time_keeps(&full, s))
                .map(|s| span_text(&full, s))
                .collect();
            let got: Vec<String> = part.spans.iter().map(|s| span_text(&part, s)).collect();
            assert_eq!(got.len(), expected.len(), "{what}: span count");
            assert_eq!(got, expected, "{what}: spans");
            left_out += full.spans.len() - part.spans.len();
        }
    }
    // The rule must leave something out on real Kineto traces, or this test checks nothing.
    assert!(left_out > 0, "no projection left out any span");
}

/// The flows as text, in a canonical order: id, category, each end's time.
fn flow_texts(trace: &Trace) -> Vec<String> {
    let mut flows: Vec<String> = trace
        .flows
        .iter()
        .map(|f| {
            format!(
                "{} {} {:?} {:?}",
                f.id,
                trace.str(f.category),
                f.from.as_ref().map(|e| e.ts),
                f.to.as_ref().map(|e| e.ts)
            )
        })
        .collect();
    flows.sort();
    flows
}

/// `Projection::COUNTS` (what `info` imports with) keeps every event of a full import and the
/// same flows (ids, categories, end times; complete or not), without placing their ends; a
/// streaming import hands each flow to the sink once (as it completes, or at the end).
#[test]
fn counting_flows_keeps_the_flows_of_a_full_import() {
    let files = json_files();
    let mut flows_seen = 0usize;
    for path in &files {
        let full = import(path, Projection::ALL);
        let counted = import(path, Projection::COUNTS);
        let what = path.display().to_string();
        assert_eq!(counted.tracks, full.tracks, "{what}: tracks");
        assert_eq!(counted.processes, full.processes, "{what}: processes");
        assert_eq!(counted.ranks, full.ranks, "{what}: ranks and notes");
        assert_eq!(counted.spans, full.spans, "{what}: spans");
        assert_eq!(counted.instants, full.instants, "{what}: instants");
        assert_eq!(counted.counters, full.counters, "{what}: counters");
        assert_eq!(flow_texts(&counted), flow_texts(&full), "{what}: flows");
        assert!(
            counted
                .flows
                .iter()
                .flat_map(|f| [&f.from, &f.to])
                .flatten()
                .all(|e| e.span.is_none()),
            "{what}: counted flows are not bound"
        );
        flows_seen += full.flows.len();
        // Streaming, in odd batches: the sink takes the flows as they are handed over.
        for batch in [7, 4093] {
            let options = ImportOptions {
                keep_args: false,
                projection: Projection::COUNTS,
                ..ImportOptions::default()
            };
            let mut handed = Trace::default();
            let mut sink = |t: &mut Trace| {
                for f in t.flows.drain(..) {
                    let category = t.strings.get(f.category).to_owned();
                    let category = handed.intern(&category);
                    handed.flows.push(strato_trace::Flow { category, ..f });
                }
                t.spans.clear();
                t.instants.clear();
                t.counters.clear();
                Ok(())
            };
            let Some(rest) = strato_io::import_file_streaming(path, &options, batch, &mut sink)
                .unwrap_or_else(|e| panic!("{what}: {e}"))
            else {
                continue; // not streamed (a TensorFlow trace viewer file)
            };
            for f in &rest.flows {
                let category = handed.intern(rest.str(f.category));
                handed.flows.push(strato_trace::Flow {
                    category,
                    ..f.clone()
                });
            }
            assert_eq!(
                flow_texts(&handed),
                flow_texts(&full),
                "{what}: flows streamed in batches of {batch}"
            );
        }
    }
    assert!(flows_seen > 0, "no flows in the shared data's JSON traces");
}
