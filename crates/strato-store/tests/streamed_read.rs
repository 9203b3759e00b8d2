//! Streamed reads of a stored profile ([`strato_store::stream_with`],
//! [`strato_store::partitioned::stream_store`]) hand over, batch by batch, exactly the events
//! the whole read ([`strato_store::read_with`] / `read_store`) holds, with the same tables;
//! and the streaming counters `strato info` and `strato kernels` feed with them
//! ([`EventCounts`], [`KernelStatsStream`]) give the same summary as the analyses of the
//! whole read (what those commands printed before they streamed). Over every Chrome-trace
//! JSON file in `../shared/data`, as a profile directory, and all of them as the leaves of one
//! partitioned store (so string and track ids are renumbered across leaves).
#![allow(clippy::unwrap_used)]

mod common;
use common::{chrome_files, import_redacted, span_text};

use strato_analysis::device_time::kernel_stats::{kernel_stats, KernelStatsStream};
use strato_analysis::info::{info, info_with, EventCounts};
use strato_store::{ArgsScope, ReadOptions, SpanProjection};
use strato_trace::Trace;

/// The reads of `strato info` (no args, every table) and `strato kernels` (spans, device ops'
/// args), as `strato-cli`'s `store_read_options` maps their import options; plus every table
/// with every blob, and the device-time selection with flows (spans left out, flow ends
/// renumbered in the whole read).
fn reads() -> Vec<(&'static str, ReadOptions)> {
    let spans_only = ReadOptions {
        instants: false,
        counters: false,
        flows: false,
        ..ReadOptions::default()
    };
    vec![
        (
            "info",
            ReadOptions {
                args: false,
                ..ReadOptions::default()
            },
        ),
        (
            "kernels",
            ReadOptions {
                args_scope: ArgsScope::DeviceOps,
                ..spans_only
            },
        ),
        ("everything", ReadOptions::default()),
        (
            "device time with flows",
            ReadOptions {
                args: false,
                spans: SpanProjection::DeviceAndLaunches,
                ..ReadOptions::default()
            },
        ),
    ]
}

/// Every event of a stream, as text, and the batches' sizes; also the summaries of `info` and
/// `kernels` gathered from the batches.
#[derive(Default)]
struct Gathered {
    spans: Vec<String>,
    instants: Vec<String>,
    counters: usize,
    flows: Vec<String>,
    largest_batch: usize,
    batches: usize,
    counts: EventCounts,
    /// One stream per `--top` checked (0: every row; 20: the default, folded).
    kernels: [KernelStatsStream; 2],
}

impl Gathered {
    fn add(&mut self, t: &Trace) {
        let events = t.spans.len() + t.instants.len() + t.counters.len() + t.flows.len();
        // One kind of event per batch.
        let kinds = [
            t.spans.len(),
            t.instants.len(),
            t.counters.len(),
            t.flows.len(),
        ];
        assert!(kinds.iter().filter(|&&n| n > 0).count() <= 1, "mixed batch");
        self.largest_batch = self.largest_batch.max(events);
        self.batches += 1;
        self.spans.extend(t.spans.iter().map(|s| span_text(t, s)));
        self.instants
            .extend(t.instants.iter().map(|e| instant_text(t, e)));
        self.counters += t.counters.len();
        self.flows.extend(t.flows.iter().map(|f| flow_text(t, f)));
        self.counts.add(t);
        self.kernels.iter_mut().for_each(|k| k.add(t));
    }
}

fn instant_text(t: &Trace, e: &strato_trace::Instant) -> String {
    format!(
        "{:?} {} {:?} {:?} {:?} {:?}",
        e.track,
        e.ts,
        t.str(e.name),
        t.str(e.category),
        e.level,
        t.args_text(e.args)
    )
}

/// A flow as text, its ends without span (a streamed flow's ends carry none).
fn flow_text(t: &Trace, f: &strato_trace::Flow) -> String {
    let end = |e: &Option<strato_trace::FlowEnd>| e.as_ref().map(|e| (e.track, e.ts));
    format!(
        "{} {:?} {:?} {:?}",
        f.id,
        t.str(f.category),
        end(&f.from),
        end(&f.to)
    )
}

/// Compares the stream (`tables` returned, `got` gathered) with the whole read `whole`.
fn check(what: &str, whole: &Trace, tables: &Trace, got: Gathered) {
    assert_eq!(tables.tracks, whole.tracks, "{what}: tracks");
    assert_eq!(tables.ranks, whole.ranks, "{what}: ranks");
    assert_eq!(tables.processes, whole.processes, "{what}: processes");
    assert_eq!(tables.devices, whole.devices, "{what}: devices");
    assert_eq!(tables.clock, whole.clock, "{what}: clock");
    assert_eq!(tables.strings, whole.strings, "{what}: strings");
    assert!(tables.spans.is_empty() && tables.args.is_empty(), "{what}");
    assert!(
        got.largest_batch <= 65_536,
        "{what}: batch of {}",
        got.largest_batch
    );
    let spans: Vec<String> = whole.spans.iter().map(|s| span_text(whole, s)).collect();
    assert_eq!(got.spans.len(), spans.len(), "{what}: span count");
    assert!(got.spans == spans, "{what}: spans differ");
    let instants: Vec<String> = whole
        .instants
        .iter()
        .map(|e| instant_text(whole, e))
        .collect();
    assert!(got.instants == instants, "{what}: instants differ");
    assert_eq!(got.counters, whole.counters.len(), "{what}: counters");
    let flows: Vec<String> = whole.flows.iter().map(|f| flow_text(whole, f)).collect();
    assert!(got.flows == flows, "{what}: flows differ");
    // What `strato info` and `strato kernels` print, streamed and whole.
    let streamed_info = serde_json::to_value(info_with(tables, got.counts)).unwrap();
    let whole_info = serde_json::to_value(info(whole)).unwrap();
    assert_eq!(streamed_info, whole_info, "{what}: info");
    for (stream, top) in got.kernels.into_iter().zip([0, 20]) {
        let streamed = serde_json::to_value(stream.finish(tables, top)).unwrap();
        let expected = serde_json::to_value(kernel_stats(whole, top)).unwrap();
        assert_eq!(streamed, expected, "{what}: kernels --top {top}");
    }
}

#[test]
fn streamed_reads_hand_over_the_whole_read_and_give_the_same_info_and_kernels() {
    let files = chrome_files();
    if files.is_empty() {
        eprintln!("skipping: no ../shared/data");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let (mut profiles, mut leaves, mut batched) = (0, 0i64, 0);
    for (k, path) in files.iter().enumerate() {
        let Some(trace) = import_redacted(path) else {
            continue; // not a trace this test is about (the import tests cover errors)
        };
        let dir = tmp.path().join(format!("profile-{k}"));
        strato_store::write(&trace, &dir).unwrap();
        if trace.ranks.len() == 1 {
            strato_store::partitioned::write_partition(&store, "job", leaves, &trace).unwrap();
            leaves += 1;
        }
        drop(trace);
        for (name, read) in reads() {
            let what = format!("{} ({name})", path.display());
            let whole = strato_store::read_with(&dir, &read).unwrap();
            let mut got = Gathered::default();
            let tables = strato_store::stream_with(&dir, &read, &mut |t| got.add(t)).unwrap();
            if got.batches > 1 {
                batched += 1;
            }
            check(&what, &whole, &tables, got);
        }
        profiles += 1;
        std::fs::remove_dir_all(&dir).unwrap();
    }
    assert!(
        profiles >= 5,
        "only {profiles} shared Chrome traces imported"
    );
    assert!(
        batched > 0,
        "no profile was streamed in more than one batch"
    );
    assert!(leaves >= 3, "only {leaves} one-rank traces for the store");
    for (name, read) in reads() {
        let what = format!("store of {leaves} leaves ({name})");
        let whole = strato_store::partitioned::read_store(&store, &read).unwrap();
        let mut got = Gathered::default();
        let tables =
            strato_store::partitioned::stream_store(&store, &read, &mut |t| got.add(t)).unwrap();
        check(&what, &whole, &tables, got);
    }
}

/// A damaged table is one error naming its file, also when it is found mid-stream.
#[test]
fn a_damaged_stored_table_is_an_error_naming_the_file() {
    let mut b = strato_trace::testing::TraceBuilder::new();
    let track = b.thread(1, 1);
    for i in 0..10 {
        b.span(
            track,
            strato_trace::Level::Backend,
            "op",
            i * 10,
            i * 10 + 5,
        );
    }
    let trace = b.build();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("profile");
    strato_store::write(&trace, &dir).unwrap();
    let spans = dir.join("spans.parquet");
    let bytes = std::fs::read(&spans).unwrap();
    std::fs::write(&spans, &bytes[..bytes.len() / 2]).unwrap();
    let err = strato_store::stream_with(&dir, &ReadOptions::default(), &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("spans.parquet"), "{err}");
}
