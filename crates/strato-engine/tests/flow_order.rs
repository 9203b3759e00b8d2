//! The span a flow end is bound to does not depend on the order a file lists its events in:
//! of the spans of the same extent on the end's track, which times cannot nest, the innermost
//! is chosen by [`strato_trace::Span::same_extent_order`] (level, then the source's numbering),
//! not by file order. A real file as shipped and the same file with its events reversed or
//! shuffled give the same flows, each end bound to the same span (compared by content: track,
//! name, extent, level). Of zero-length spans at the same time, an end binds to the one whose
//! launch correlation is the flow's id (Kineto's `ac2g` ids are correlations).
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashMap;
use std::path::Path;

use common::{data, document};
use strato_io::{import_paths, ImportOptions};
use strato_trace::{FlowEnd, Trace};

/// The shared gzipped file `rel` written to `path`, its events reversed (`None`) or shuffled
/// with a seed.
fn write_reordered(rel: &str, path: &Path, shuffle: Option<u64>) {
    let mut doc = document(rel);
    let events = doc["traceEvents"].as_array_mut().unwrap();
    match shuffle {
        None => events.reverse(),
        Some(seed) => fastrand::Rng::with_seed(seed).shuffle(events),
    }
    std::fs::write(path, serde_json::to_vec(&doc).unwrap()).unwrap();
}

/// One flow end by content: its track, time and the span it is bound to.
fn end_text(trace: &Trace, end: &Option<FlowEnd>) -> String {
    let Some(end) = end else {
        return "-".to_owned();
    };
    let track = trace.track(end.track);
    let span = end.span.map(|id| {
        let s = &trace.spans[id.0 as usize];
        format!("{} {}..{} {:?}", trace.str(s.name), s.start, s.end, s.level)
    });
    format!("{:?} {:?} @{} -> {span:?}", track.kind, track.name, end.ts)
}

/// Flow ends bound to a zero-length span without the flow's id as its correlation while a
/// zero-length span of the same track and time has it; and the ends bound to one with it.
fn ends_beside_their_call(trace: &Trace) -> (usize, usize) {
    let mut instants: HashMap<(u32, i64), Vec<u64>> = HashMap::new();
    for s in trace.spans.iter().filter(|s| s.start == s.end) {
        let calls = instants.entry((s.track.0, s.start)).or_default();
        calls.extend(s.correlation.get());
    }
    let (mut beside, mut on) = (0, 0);
    for flow in &trace.flows {
        for end in [&flow.from, &flow.to].into_iter().flatten() {
            let Some(span) = end.span.map(|id| &trace.spans[id.0 as usize]) else {
                continue;
            };
            if span.start != span.end {
                continue;
            }
            if span.correlation.get() == Some(flow.id) {
                on += 1;
            } else if instants[&(span.track.0, span.start)].contains(&flow.id) {
                beside += 1;
            }
        }
    }
    (beside, on)
}

/// Every flow by content, sorted.
fn flows(trace: &Trace) -> Vec<String> {
    let mut out: Vec<String> = (trace.flows.iter())
        .map(|f| {
            format!(
                "{} {}: {} => {}",
                trace.str(f.category),
                f.id,
                end_text(trace, &f.from),
                end_text(trace, &f.to)
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn flow_ends_are_bound_to_the_same_spans_in_any_event_order() {
    let files = [
        "kineto/param_dlrm8/worker3_step_12.1694128201557.pt.trace.json.gz",
        "kineto/hta_df_index_resolver.json.gz",
        "kineto/hta_alexnet_trace.json.gz",
    ];
    let dir = tempfile::tempdir().unwrap();
    let options = ImportOptions::default();
    let mut compared = 0;
    for rel in files {
        if !data(rel).exists() {
            eprintln!("skipping {rel}: not present");
            continue;
        }
        let shipped = import_paths(&[data(rel)], &options).unwrap();
        let expected = flows(&shipped);
        assert!(
            (shipped.flows.iter()).any(|f| f.from.as_ref().is_some_and(|e| e.span.is_some())),
            "{rel}: no bound flow"
        );
        let (beside, on) = ends_beside_their_call(&shipped);
        assert_eq!(
            beside, 0,
            "{rel}: {beside} ends beside their call ({on} on it)"
        );
        for shuffle in [None, Some(7), Some(11)] {
            let path = dir.path().join("reordered.json");
            write_reordered(rel, &path, shuffle);
            let reordered = import_paths(&[path], &options).unwrap();
            let got = flows(&reordered);
            assert_eq!(got.len(), expected.len(), "{rel} {shuffle:?}");
            for (a, b) in expected.iter().zip(&got) {
                assert_eq!(a, b, "{rel} {shuffle:?}");
            }
            compared += 1;
        }
    }
    assert!(compared > 0);
}
