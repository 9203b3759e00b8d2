//! Exporter tests: synthetic traces with counts known by construction, written with
//! `export::perfetto` / `export::chrome` and read back (`perfetto::summarize`, serde_json, our
//! Chrome importer), plus a real Kineto trace from `/work/shared/data`.

use std::path::PathBuf;
use strato_trace::OptionalId;

use prost::Message;
use strato_io::export::{chrome, perfetto};
use strato_io::ImportOptions;
use strato_trace::metadata::SourceMetadata;
use strato_trace::testing::{rank, TraceBuilder};
use strato_trace::{Device, Level, Ns, Process, Rank, Span, SpanId, Trace, TrackId, TrackKind};

/// A builder with one rank (0 of 1, "synthetic").
fn builder() -> TraceBuilder {
    let mut b = TraceBuilder::new();
    b.rank(Rank {
        world_size: Some(1),
        metadata: SourceMetadata::from_json("{\"traceName\":\"synthetic\"}", "kineto".into())
            .expect("an object"),
        ..rank(Some(0), "synthetic")
    });
    b
}

/// A span in category `kernel` (device ops) or `cpu_op` (the rest).
fn span(
    b: &mut TraceBuilder,
    track: TrackId,
    start: Ns,
    end: Ns,
    name: &str,
    level: Level,
) -> SpanId {
    let category = if level.is_device_op() {
        "kernel"
    } else {
        "cpu_op"
    };
    b.span(track, level, name, start, end)
        .category(category)
        .id()
}

/// A flow between two spans, its ends at their starts.
fn flow(
    b: &mut TraceBuilder,
    id: u64,
    from: Option<(TrackId, SpanId)>,
    to: Option<(TrackId, SpanId)>,
) {
    let end = |b: &TraceBuilder, e: Option<(TrackId, SpanId)>| {
        e.map(|(track, s)| (track, b.trace().spans[s.0 as usize].start, Some(s)))
    };
    let (from, to) = (end(b, from), end(b, to));
    b.flow(id, "ac2g", from, to);
}

/// Counts of the synthetic trace, by construction.
const SPANS: usize = 13;
const FLOWS_WITH_BOTH_ENDS: usize = 2;
const INSTANTS: usize = 2;
const COUNTER_SAMPLES: usize = 4;

/// One rank: a Python process with one thread, a GPU with one stream, a memory counter of
/// the process, a utilization counter of the device, a custom track.
fn synthetic() -> Trace {
    let mut b = builder();
    let rank = strato_trace::RankId(0);
    b.trace_mut().processes.push(Process {
        rank,
        pid: 4242,
        name: Some("python".into()),
        labels: Some("train.py".into()),
    });
    b.trace_mut().devices.push(Device {
        rank: Some(rank),
        index: 0,
        name: Some("NVIDIA A100-SXM4-80GB".into()),
        ..Default::default()
    });
    let cpu = b.thread(4242, 4243);
    b.trace_mut().tracks[cpu.0 as usize].name = Some("MainThread".into());
    let gpu = b.queue(0, 7);
    let mem = b.counter_track(Some(4242), None, "Memory allocated", "bytes");
    let util = b.counter_track(None, Some(0), "SM utilization", "%");
    let custom = b.track(TrackKind::Custom {
        group: "Spans".into(),
        name: "PyTorch Profiler".into(),
    });

    // Nested: step > forward > linear, step > backward; depth 3.
    span(&mut b, cpu, 0, 100, "ProfilerStep#1", Level::Operation);
    span(&mut b, cpu, 10, 50, "forward", Level::Backend);
    span(&mut b, cpu, 20, 30, "aten::linear", Level::Backend);
    span(&mut b, cpu, 60, 90, "backward", Level::Backend);
    // Overlaps `backward` and the step without nesting in either: overflow track.
    span(&mut b, cpu, 80, 120, "overlapping \"op\"\n", Level::Backend);
    // Zero-length at the step's end, and an exact duplicate of `forward`.
    span(&mut b, cpu, 100, 100, "marker", Level::Other);
    span(&mut b, cpu, 10, 50, "forward", Level::Backend);
    // Launches (inside the overflow span's time, on lane 0 once the step has ended).
    let l1 = span(
        &mut b,
        cpu,
        105,
        110,
        "cudaLaunchKernel",
        Level::AcceleratorApi,
    );
    let l2 = span(
        &mut b,
        cpu,
        130,
        135,
        "cudaLaunchKernel",
        Level::AcceleratorApi,
    );
    // Kernels with the same name (interned once), touching each other.
    let k1 = span(&mut b, gpu, 200, 300, "gemm_kernel", Level::DeviceKernel);
    let k2 = span(&mut b, gpu, 300, 400, "gemm_kernel", Level::DeviceKernel);
    let k3 = span(&mut b, gpu, 400, 401, "memset", Level::DeviceSet);
    span(&mut b, custom, 0, 500, "PyTorch Profiler (0)", Level::Other);

    let args = b
        .trace_mut()
        .add_args("{\"correlation\":5,\"grid\":[1,2,3],\"name\":\"x\\\"y\",\"ok\":true}");
    for (span, c) in [(l1, 5), (k1, 5), (l2, 6), (k2, 6)] {
        b.trace_mut().spans[span.0 as usize].correlation = Some(c).into();
    }
    b.trace_mut().spans[k1.0 as usize].args = Some(args);
    b.trace_mut().spans[l1.0 as usize].external_id = Some(77).into();
    flow(&mut b, 5, Some((cpu, l1)), Some((gpu, k1)));
    flow(&mut b, 6, Some((cpu, l2)), Some((gpu, k2)));
    // Orphans: only one end, or an end that found no span.
    flow(&mut b, 9, None, Some((gpu, k3)));
    b.flow(
        10,
        "ac2g",
        Some((cpu, 140, None)),
        Some((gpu, 400, Some(k3))),
    );

    for ts in [15, 25] {
        b.instant(cpu, Level::Other, "cpu_instant_event", "[memory]", ts);
    }
    for (track, ts, value) in [
        (mem, 0, 1024.0),
        (mem, 50, 4096.5),
        (mem, 100, 0.0),
        (util, 200, 87.5),
    ] {
        b.counter(track, ts, value);
    }
    let trace = b.build();
    trace.validate().expect("synthetic trace is valid");
    assert_eq!(trace.spans.len(), SPANS);
    assert_eq!(trace.instants.len(), INSTANTS);
    assert_eq!(trace.counters.len(), COUNTER_SAMPLES);
    trace
}

fn perfetto_bytes(trace: &Trace) -> Vec<u8> {
    let mut out = Vec::new();
    perfetto::write(trace, &mut out).expect("write perfetto");
    out
}

fn chrome_text(trace: &Trace) -> String {
    let mut out = Vec::new();
    chrome::write(trace, &mut out).expect("write chrome");
    String::from_utf8(out).expect("utf-8")
}

/// Flows whose both ends are bound to (distinct) spans.
fn bound_flows(trace: &Trace) -> usize {
    trace
        .flows
        .iter()
        .filter(|f| {
            let a = f.from.as_ref().and_then(|e| e.span);
            let b = f.to.as_ref().and_then(|e| e.span);
            matches!((a, b), (Some(a), Some(b)) if a != b)
        })
        .count()
}

#[test]
fn perfetto_synthetic_counts_match_the_source() {
    let trace = synthetic();
    let bytes = perfetto_bytes(&trace);
    let s = perfetto::summarize(&bytes).expect("decodes");
    println!("{s}");
    assert_eq!(s.slice_begins, SPANS);
    assert_eq!(s.slice_ends, SPANS);
    assert_eq!(s.instants, INSTANTS);
    assert_eq!(s.counter_events, COUNTER_SAMPLES);
    assert_eq!(s.flow_ids, FLOWS_WITH_BOTH_ENDS);
    assert_eq!(bound_flows(&trace), FLOWS_WITH_BOTH_ENDS);
    assert_eq!(s.unbalanced_tracks, 0);
    assert_eq!(s.events_on_unknown_tracks, 0);
    assert_eq!(s.incremental_state_errors, 0);
    // step > forward > its exact duplicate > linear.
    assert_eq!(s.max_depth, 4);
    // Tracks: 5 model tracks + process + device + custom group + 1 overflow lane.
    assert_eq!(s.tracks, 9);
    assert_eq!(s.process_tracks, 1);
    assert_eq!(s.thread_tracks, 1);
    assert_eq!(s.counter_tracks, 2);
    // Names interned once each: 10 distinct span names + the instant's.
    assert_eq!(s.interned_names, s.distinct_interned_names);
    assert_eq!(s.interned_names, 11);
}

#[test]
fn perfetto_overlap_goes_to_an_overflow_track_and_flows_bind_both_ends() {
    let trace = synthetic();
    let bytes = perfetto_bytes(&trace);
    let decoded = perfetto::proto::Trace::decode(bytes.as_slice()).expect("decodes");
    let packets = &decoded.packet;
    // Sequence flags: cleared + needs on the first packet, needs on the rest.
    assert_eq!(packets[0].sequence_flags, Some(3));
    assert!(packets[1..].iter().all(|p| p.sequence_flags == Some(2)));
    assert!(packets
        .iter()
        .all(|p| p.trusted_packet_sequence_id == Some(1)));

    let descriptors: Vec<_> = packets
        .iter()
        .filter_map(|p| p.track_descriptor.as_ref())
        .collect();
    let overflow = descriptors
        .iter()
        .find(|d| d.name.as_deref() == Some("MainThread (overlap 1)"))
        .expect("overflow track");
    let thread = descriptors
        .iter()
        .find(|d| d.thread.is_some())
        .expect("thread track");
    assert_eq!(overflow.parent_uuid, thread.uuid);
    let thread_desc = thread.thread.as_ref().expect("thread descriptor");
    assert_eq!((thread_desc.pid, thread_desc.tid), (Some(4242), Some(4243)));
    let process = descriptors
        .iter()
        .find(|d| d.process.is_some())
        .expect("process track");
    assert_eq!(thread.parent_uuid, process.uuid);
    let device = descriptors
        .iter()
        .find(|d| d.name.as_deref() == Some("NVIDIA A100-SXM4-80GB (device 0)"))
        .expect("device track");
    let stream = descriptors
        .iter()
        .find(|d| d.name.as_deref() == Some("stream 7"))
        .expect("stream track");
    assert_eq!(stream.parent_uuid, device.uuid);

    // Interned names: iid -> text.
    let mut names = std::collections::HashMap::new();
    for p in packets {
        for n in p.interned_data.iter().flat_map(|i| &i.event_names) {
            assert!(names
                .insert(n.iid.unwrap_or(0), n.name.clone().unwrap_or_default())
                .is_none());
        }
    }
    let begins: Vec<_> = packets
        .iter()
        .filter_map(|p| p.track_event.as_ref().map(|e| (p.timestamp, e)))
        .filter(|(_, e)| e.r#type == Some(perfetto::proto::TYPE_SLICE_BEGIN))
        .collect();
    let name_of = |e: &perfetto::proto::TrackEvent| names[&e.name_iid.unwrap_or(0)].clone();
    let overlapping = begins
        .iter()
        .find(|(_, e)| name_of(e) == "overlapping \"op\"\n")
        .expect("overlapping span");
    assert_eq!(overlapping.1.track_uuid, overflow.uuid);
    assert_eq!(overlapping.0, Some(80));
    // Each bound flow's id sits on both its ends' begin events.
    let launches: Vec<_> = begins
        .iter()
        .filter(|(_, e)| name_of(e) == "cudaLaunchKernel")
        .collect();
    let kernels: Vec<_> = begins
        .iter()
        .filter(|(_, e)| name_of(e) == "gemm_kernel")
        .collect();
    assert_eq!((launches.len(), kernels.len()), (2, 2));
    for (launch, kernel) in launches.iter().zip(&kernels) {
        assert_eq!(launch.1.flow_ids.len(), 1);
        assert_eq!(launch.1.flow_ids, kernel.1.flow_ids);
        assert_eq!(kernel.1.track_uuid, stream.uuid);
    }
    assert_ne!(launches[0].1.flow_ids, launches[1].1.flow_ids);
    // Level and args as debug annotations on the first kernel; correlation not repeated.
    let kernel = kernels[0].1;
    assert_eq!(
        kernel.debug_annotations.len(),
        5,
        "level, correlation, grid, name, ok"
    );
    assert!(kernel
        .debug_annotations
        .iter()
        .any(|a| a.string_value.as_deref() == Some("DeviceKernel")));
    assert!(kernel
        .debug_annotations
        .iter()
        .any(|a| a.legacy_json_value.as_deref() == Some("[1,2,3]")));
    assert_eq!(kernel.category_iids.len(), 1);
}

#[test]
fn perfetto_shifts_negative_times_and_handles_empty_traces() {
    let empty = perfetto_bytes(&Trace::default());
    assert_eq!(
        perfetto::summarize(&empty).expect("decodes"),
        perfetto::PerfettoSummary::default()
    );

    let mut b = builder();
    let t = b.thread(1, 1);
    span(&mut b, t, -50, 10, "early", Level::Other);
    span(&mut b, t, -40, -30, "inner", Level::Other);
    let bytes = perfetto_bytes(b.trace());
    let decoded = perfetto::proto::Trace::decode(bytes.as_slice()).expect("decodes");
    let times: Vec<u64> = decoded
        .packet
        .iter()
        .filter(|p| p.track_event.is_some())
        .filter_map(|p| p.timestamp)
        .collect();
    assert_eq!(times, vec![0, 10, 20, 60]);
    let s = perfetto::summarize(&bytes).expect("decodes");
    assert_eq!(
        (s.slice_begins, s.slice_ends, s.unbalanced_tracks),
        (2, 2, 0)
    );
}

#[test]
fn perfetto_many_overlaps_stay_balanced() {
    // A staircase of spans that each overlap the previous one: every one needs a new lane
    // until earlier ones end.
    let mut b = builder();
    let t = b.thread(1, 1);
    for i in 0..50 {
        span(&mut b, t, i * 10, i * 10 + 35, "stair", Level::Other);
    }
    let s = perfetto::summarize(&perfetto_bytes(b.trace())).expect("decodes");
    assert_eq!((s.slice_begins, s.slice_ends), (50, 50));
    assert_eq!(s.unbalanced_tracks, 0);
    assert_eq!(s.max_depth, 1);
    // Four lanes: the thread and three overflow tracks, plus the process track.
    assert_eq!(s.tracks, 1 + 1 + 3);
    assert_eq!(s.interned_names, 1);
}

fn chrome_events(text: &str) -> Vec<serde_json::Value> {
    let doc: serde_json::Value = serde_json::from_str(text).expect("valid JSON");
    assert_eq!(doc["displayTimeUnit"], "ns");
    doc["traceEvents"].as_array().expect("traceEvents").clone()
}

fn count_ph(events: &[serde_json::Value], ph: &str) -> usize {
    events.iter().filter(|e| e["ph"] == ph).count()
}

#[test]
fn chrome_synthetic_counts_and_exact_times() {
    let mut trace = synthetic();
    // An epoch-sized time that f64 microseconds cannot hold exactly.
    let t = trace.spans[0].track;
    let name = trace.intern("late");
    let category = trace.intern("cpu_op");
    trace.spans.push(Span {
        track: t,
        start: 12_345_678_901_234_567,
        end: 12_345_678_901_234_567 + 1_001,
        name,
        category,
        level: Level::Backend,
        correlation: OptionalId::NONE,
        external_id: OptionalId::NONE,
        args: None,
    });
    let text = chrome_text(&trace);
    assert!(text.contains("\"ts\":12345678901234.567,\"dur\":1.001"));
    let events = chrome_events(&text);
    assert_eq!(count_ph(&events, "X"), trace.spans.len());
    assert_eq!(count_ph(&events, "i"), INSTANTS);
    assert_eq!(count_ph(&events, "C"), COUNTER_SAMPLES);
    // Every present flow end: 2 full flows, 1 with only `to`, 1 with both ends (one unbound).
    assert_eq!(count_ph(&events, "s"), 3);
    assert_eq!(count_ph(&events, "f"), 4);
    assert!(events
        .iter()
        .filter(|e| e["ph"] == "f")
        .all(|e| e["bp"] == "e"));
    // Names escaped and round-tripped.
    assert!(events.iter().any(|e| e["name"] == "overlapping \"op\"\n"));
    // Device queue: its own process named after the device, stream as thread.
    let process_names: Vec<_> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
        .map(|e| {
            (
                e["pid"].as_i64(),
                e["args"]["name"].as_str().map(String::from),
            )
        })
        .collect();
    assert!(process_names.contains(&(Some(0), Some("NVIDIA A100-SXM4-80GB (device 0)".into()))));
    assert!(process_names.contains(&(Some(4242), Some("python".into()))));
    let kernel = events
        .iter()
        .find(|e| e["name"] == "gemm_kernel" && e["args"]["grid"].is_array())
        .expect("kernel");
    assert_eq!(
        (kernel["pid"].as_i64(), kernel["tid"].as_i64()),
        (Some(0), Some(7))
    );
    assert_eq!(kernel["args"]["correlation"], 5);
    assert_eq!(kernel["args"]["level"], "DeviceKernel");
    assert_eq!(kernel["args"]["name"], "x\"y");
    // The args object already had `correlation`: not written twice.
    let line = text
        .lines()
        .find(|l| l.contains("\"grid\""))
        .expect("kernel line");
    assert_eq!(line.matches("\"correlation\"").count(), 1);
    let launch = events
        .iter()
        .find(|e| e["name"] == "cudaLaunchKernel")
        .expect("launch");
    assert_eq!(launch["args"]["External id"], 77);
    assert_eq!(launch["args"]["correlation"], 5);
}

#[test]
fn chrome_writes_negative_and_small_times_exactly() {
    let mut out = Vec::new();
    for ns in [0, 1, 999, 1000, -1, -1001, i64::MAX, i64::MIN] {
        chrome::write_us(&mut out, ns).expect("write");
        out.push(b' ');
    }
    assert_eq!(
        String::from_utf8(out).expect("utf-8"),
        "0.000 0.001 0.999 1.000 -0.001 -1.001 9223372036854775.807 -9223372036854775.808 "
    );
}

#[test]
fn chrome_empty_trace_is_valid_json() {
    let events = chrome_events(&chrome_text(&Trace::default()));
    assert!(events.is_empty());
}

fn reimport(text: &str) -> strato_io::Result<Trace> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("export.json");
    std::fs::write(&path, text).expect("write temp file");
    strato_io::import_paths(&[path], &ImportOptions::default())
}

#[test]
fn chrome_synthetic_reimports_with_the_same_spans() {
    let trace = synthetic();
    let back = reimport(&chrome_text(&trace)).expect("re-import");
    assert_eq!(back.spans.len(), trace.spans.len());
    assert_eq!(back.instants.len(), trace.instants.len());
    let mut a: Vec<_> = trace.spans.iter().map(|s| (s.start, s.end)).collect();
    let mut b: Vec<_> = back.spans.iter().map(|s| (s.start, s.end)).collect();
    a.sort_unstable();
    b.sort_unstable();
    assert_eq!(a, b);
}

/// A recording's own categories (OpenCL, Python, the recorder's operations) have level rules
/// for the `strato` format only: exported to Chrome and read back as Kineto, each span keeps its
/// level and its queue through the `args.level` the exporter writes.
#[test]
fn chrome_export_of_a_recording_reads_back_with_its_levels() {
    let mut b = builder();
    let thread = b.thread(7, 7);
    let queue = b.queue(0, 1);
    let spans = [
        (thread, Level::Operation, "operation", "step", 0, 100),
        (thread, Level::Python, "python", "train.py:step", 1, 99),
        (
            thread,
            Level::AcceleratorApi,
            "opencl",
            "clEnqueueNDRangeKernel",
            10,
            12,
        ),
        (thread, Level::AcceleratorApi, "opencl", "clFinish", 20, 60),
        (queue, Level::DeviceKernel, "opencl_kernel", "saxpy", 15, 50),
        (
            queue,
            Level::DeviceCopy,
            "opencl_copy",
            "clEnqueueReadBuffer",
            50,
            55,
        ),
        (
            queue,
            Level::DeviceSet,
            "opencl_fill",
            "clEnqueueFillBuffer",
            56,
            58,
        ),
    ];
    for (track, level, category, name, start, end) in spans {
        b.span(track, level, name, start * 1_000, end * 1_000)
            .category(category);
    }
    let mut trace = b.build();
    trace.ranks[0].format = strato_trace::SourceFormat::Strato;
    let back = reimport(&chrome_text(&trace)).expect("re-import");
    // Read as the recording it was: the analyses read its operations as the program's work.
    assert_eq!(back.ranks[0].format, strato_trace::SourceFormat::Strato);
    let mut kineto = trace.clone();
    kineto.ranks[0].format = strato_trace::SourceFormat::Kineto;
    let again = reimport(&chrome_text(&kineto)).expect("re-import");
    assert_eq!(again.ranks[0].format, strato_trace::SourceFormat::Kineto);
    let levels = |t: &Trace| {
        let mut list: Vec<_> = t
            .spans
            .iter()
            .map(|s| {
                let on_queue = matches!(t.track(s.track).kind, TrackKind::DeviceQueue { .. });
                (s.start, t.str(s.name).to_owned(), s.level, on_queue)
            })
            .collect();
        list.sort();
        list
    };
    assert_eq!(levels(&back), levels(&trace));
    assert!(back.ranks[0].notes.unclassified_device_like().is_empty());
}

fn shared_data(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(relative)
}

#[test]
fn real_kineto_nccl_trace_exports_both_formats() {
    let path = shared_data("kineto/hta_nccl_data.json.gz");
    let trace = strato_io::import_paths(&[path], &ImportOptions::default()).expect("import");
    assert!(!trace.spans.is_empty());

    let clock = std::time::Instant::now();
    let bytes = perfetto_bytes(&trace);
    let took = clock.elapsed();
    let s = perfetto::summarize(&bytes).expect("decodes");
    println!("perfetto: {} bytes in {took:?}, {s}", bytes.len());
    assert_eq!(s.slice_begins, trace.spans.len());
    assert_eq!(s.slice_ends, trace.spans.len());
    assert_eq!(s.instants, trace.instants.len());
    assert_eq!(s.counter_events, trace.counters.len());
    assert_eq!(s.flow_ids, bound_flows(&trace));
    assert_eq!(s.unbalanced_tracks, 0);
    assert_eq!(s.events_on_unknown_tracks, 0);
    assert_eq!(s.incremental_state_errors, 0);
    assert_eq!(s.interned_names, s.distinct_interned_names);

    let clock = std::time::Instant::now();
    let text = chrome_text(&trace);
    let took = clock.elapsed();
    let events = chrome_events(&text);
    println!(
        "chrome: {} bytes in {took:?}, {} events, {} spans, {} flows ({} bound)",
        text.len(),
        events.len(),
        trace.spans.len(),
        trace.flows.len(),
        bound_flows(&trace)
    );
    assert_eq!(count_ph(&events, "X"), trace.spans.len());
    assert_eq!(count_ph(&events, "i"), trace.instants.len());
    let flow_ends: usize = trace
        .flows
        .iter()
        .map(|f| usize::from(f.from.is_some()) + usize::from(f.to.is_some()))
        .sum();
    assert_eq!(count_ph(&events, "s") + count_ph(&events, "f"), flow_ends);

    let back = reimport(&text).expect("re-import");
    assert_eq!(back.spans.len(), trace.spans.len());
    assert_eq!(back.flows.len(), trace.flows.len());
    assert_eq!(bound_flows(&back), bound_flows(&trace));
}

/// Lines of a Chrome export, sorted after the header (the streamed writer orders events by
/// batch, the whole one by kind).
fn sorted_lines(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text
        .lines()
        .map(|l| l.trim_end_matches(',').to_owned())
        .collect();
    lines[1..].sort_unstable();
    lines
}

/// [`chrome::ChromeStream`] given the tables, then the events in batches of every size, writes
/// the events [`chrome::write`] writes; a batch naming a track the tables lack (the input
/// changed between the two passes) is an error, never a file with wrong names.
#[test]
fn chrome_stream_writes_the_whole_traces_events_in_any_batches() {
    let trace = synthetic();
    let whole = sorted_lines(&chrome_text(&trace));
    let mut tables = trace.clone();
    tables.spans.clear();
    tables.instants.clear();
    tables.counters.clear();
    for batch_spans in [1, 2, 3, trace.spans.len()] {
        let mut out = Vec::new();
        let mut stream = chrome::ChromeStream::start(&tables, &mut out).unwrap();
        let mut batch = trace.clone();
        batch.flows.clear();
        batch.instants.clear();
        batch.counters.clear();
        for chunk in trace.spans.chunks(batch_spans) {
            batch.spans = chunk.to_vec();
            batch.args = trace.args.clone();
            stream.batch(&mut batch).unwrap();
            assert!(batch.spans.is_empty(), "the batch's events are taken");
        }
        batch.instants = trace.instants.clone();
        batch.counters = trace.counters.clone();
        batch.args = trace.args.clone();
        stream.batch(&mut batch).unwrap();
        stream.finish(&batch).unwrap();
        let streamed = sorted_lines(&String::from_utf8(out).unwrap());
        assert_eq!(streamed, whole, "batches of {batch_spans} spans");
    }
    // A batch with a track the tables do not hold.
    let mut grown = trace.clone();
    grown.tracks.push(grown.tracks[0].clone());
    let mut out = Vec::new();
    let mut stream = chrome::ChromeStream::start(&tables, &mut out).unwrap();
    let e = stream.batch(&mut grown).unwrap_err();
    assert!(e.to_string().contains("changed while it was read"), "{e}");
}

/// [`perfetto::PerfettoStream`] given the trace's events in batches of every size, spilling
/// runs of every size (one slice a run up to none spilled), with and without strata tracks and
/// extra counters, writes the bytes [`perfetto::write_with`] writes of the whole trace; a
/// flow naming a span it was not given is an error, never a file with wrong arrows.
#[test]
fn perfetto_stream_writes_the_whole_traces_bytes_in_any_batches_and_runs() {
    let mut trace = synthetic();
    // Negative times: the writer shifts them, from the earliest time of any event.
    trace.instants[0].ts = -40;
    let extras = |strata: bool| perfetto::Extras {
        strata_tracks: strata,
        counters: vec![perfetto::ExtraCounter {
            rank: strato_trace::RankId(0),
            owner: perfetto::Owner::Device(0),
            name: "busy".into(),
            unit: "%".into(),
            points: vec![(0, 1.0), (10, 0.5)],
        }],
        tracks: Vec::new(),
    };
    let spill = tempfile::tempdir().unwrap();
    for strata in [false, true] {
        let mut whole = Vec::new();
        perfetto::write_with(&trace, &extras(strata), &mut whole).unwrap();
        for batch_spans in [1, 2, 5, trace.spans.len()] {
            for run_bytes in [1, 300, usize::MAX] {
                let mut stream =
                    perfetto::PerfettoStream::with_run_bytes(spill.path(), strata, run_bytes)
                        .unwrap();
                let mut batch = trace.clone();
                batch.flows.clear();
                for (i, chunk) in trace.spans.chunks(batch_spans).enumerate() {
                    batch.spans = chunk.to_vec();
                    batch.args = trace.args.clone();
                    if i == 0 {
                        batch.instants = trace.instants.clone();
                        batch.counters = trace.counters.clone();
                    }
                    stream.batch(&mut batch).unwrap();
                    assert!(batch.spans.is_empty() && batch.instants.is_empty());
                }
                let mut out = Vec::new();
                stream.finish(&trace, &extras(strata), &mut out).unwrap();
                assert!(
                    out == whole,
                    "strata {strata}, batches of {batch_spans} spans, runs of {run_bytes} bytes"
                );
            }
        }
    }
    // Nothing is left in the spill directory (the runs have no name).
    assert_eq!(std::fs::read_dir(spill.path()).unwrap().count(), 0);
    // The trace's flows name spans the stream never saw.
    let mut stream = perfetto::PerfettoStream::new(spill.path(), false).unwrap();
    let mut batch = trace.clone();
    batch.spans.truncate(3);
    stream.batch(&mut batch).unwrap();
    let e = stream
        .finish(&trace, &perfetto::Extras::default(), Vec::new())
        .unwrap_err();
    assert!(e.to_string().contains("not given"), "{e}");
}
