//! Perfetto protobuf import, tested on files from two writers:
//! - `tests/data/perfetto/rocprofv3_like.pftrace`, written by `scripts/perfetto-fixture.py`
//!   with the message classes of Perfetto's own protos (PyPI `perfetto` package) in rocprofv3's
//!   layout (SDK-style incremental clock, interning, packet defaults); its answer is in
//!   `rocprofv3_like.expected.json`, computed by the writer;
//! - stratoscope's exporter (`export::perfetto`) run on real traces from `../shared/data`
//!   (Kineto from an MI300X and an H100, the real rocprofv3 JSON): the import of the export
//!   must give back the same spans (count, time and correlation per level, per device queue).
//!
//! No real `.pftrace` is in the shared data: the rocprofv3 layout is tested through the first
//! file only.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use serde_json::Value;
use strato_io::{import_file, ErrorKind, Format, ImportOptions};
use strato_trace::{Level, SourceFormat, Trace, TrackKind};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/perfetto")
        .join(name)
}

fn shared(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(rel)
}

fn category_counts(trace: &Trace) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for s in &trace.spans {
        *out.entry(trace.str(s.category).to_owned()).or_default() += 1;
    }
    out
}

#[test]
fn rocprofv3_layout_from_perfettos_own_protos() {
    let path = fixture("rocprofv3_like.pftrace");
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("rocprofv3_like.expected.json")).unwrap(),
    )
    .unwrap();
    let options = ImportOptions::default();
    assert_eq!(
        strato_io::detect_format(&path, &options).unwrap(),
        Format::Perfetto
    );
    let trace = import_file(&path, &options).unwrap();
    assert_eq!(trace.ranks.len(), 1);
    assert_eq!(trace.ranks[0].format, SourceFormat::Perfetto);

    let counts = category_counts(&trace);
    for (category, n) in expected["spans"].as_object().unwrap() {
        assert_eq!(counts.get(category).copied(), n.as_u64(), "{category}");
    }
    let level_spans = |level: Level| -> Vec<&strato_trace::Span> {
        trace.spans.iter().filter(|s| s.level == level).collect()
    };
    let kernels = level_spans(Level::DeviceKernel);
    assert_eq!(
        kernels.len() as u64,
        expected["device_kernels"].as_u64().unwrap()
    );
    let kernel_ns: i64 = kernels.iter().map(|s| s.end - s.start).sum();
    assert_eq!(kernel_ns, expected["kernel_ns"].as_i64().unwrap());
    let copies = level_spans(Level::DeviceCopy);
    assert_eq!(copies.len() as u64, expected["copies"].as_u64().unwrap());
    let copy_ns: i64 = copies.iter().map(|s| s.end - s.start).sum();
    assert_eq!(copy_ns, expected["copy_ns"].as_i64().unwrap());
    assert_eq!(
        level_spans(Level::AcceleratorApi).len() as u64,
        expected["api_calls"].as_u64().unwrap()
    );
    assert_eq!(level_spans(Level::Operation).len(), 1, "the roctx range");

    // Device queues: kernels on agent 1's streams, copies apart on their own queue.
    let mut kernel_queues = BTreeSet::new();
    for s in &kernels {
        match trace.track(s.track).kind {
            TrackKind::DeviceQueue { device: 1, queue } => {
                kernel_queues.insert(queue);
            }
            ref other => panic!("kernel on {other:?}"),
        }
    }
    let want: BTreeSet<i64> = expected["kernel_queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q.as_i64().unwrap())
        .collect();
    assert_eq!(kernel_queues, want);
    for s in &copies {
        assert_eq!(
            trace.track(s.track).kind,
            TrackKind::DeviceQueue {
                device: 1,
                queue: -1
            }
        );
    }
    // API threads: the ThreadDescriptor one and the `THREAD n (tid)` one, under pid 4242.
    let threads: BTreeSet<i64> = trace
        .spans
        .iter()
        .filter(|s| s.level == Level::AcceleratorApi)
        .map(|s| match trace.track(s.track).kind {
            TrackKind::Thread { pid: 4242, tid } => tid,
            ref other => panic!("API call on {other:?}"),
        })
        .collect();
    let want: BTreeSet<i64> = expected["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_i64().unwrap())
        .collect();
    assert_eq!(threads, want);
    assert_eq!(trace.processes.len(), 1);
    assert_eq!(trace.processes[0].name.as_deref(), Some("python"));

    // Correlation: every kernel and copy shares its id with exactly one API call.
    let api_corr: BTreeSet<u64> = level_spans(Level::AcceleratorApi)
        .iter()
        .filter_map(|s| s.correlation.get())
        .collect();
    assert_eq!(
        api_corr.len() as u64,
        expected["api_calls"].as_u64().unwrap()
    );
    for s in kernels.iter().chain(&copies) {
        assert!(api_corr.contains(&s.correlation.get().unwrap()));
    }
    // Flows: one per correlation id, from the API call to the device op.
    assert_eq!(
        trace.flows.len() as u64,
        expected["flows"].as_u64().unwrap()
    );
    for f in &trace.flows {
        let from = &trace.spans[f.from.as_ref().unwrap().span.unwrap().0 as usize];
        let to = &trace.spans[f.to.as_ref().unwrap().span.unwrap().0 as usize];
        assert_eq!(from.level, Level::AcceleratorApi);
        assert!(to.level.is_device_op());
        assert_eq!(from.correlation, to.correlation);
    }
    // The incremental clock, resolved through the snapshot, gives absolute BOOTTIME ns.
    let first = trace.spans.iter().map(|s| s.start).min().unwrap();
    assert_eq!(first, expected["first_ts"].as_i64().unwrap());
    assert_eq!(
        trace.counters.len() as u64,
        expected["counter_samples"].as_u64().unwrap()
    );
    assert_eq!(
        trace.instants.len() as u64,
        expected["instants"].as_u64().unwrap()
    );
    assert!(trace.validate().is_ok());
    assert_eq!(trace.ranks[0].notes.get("slices_never_ended"), 0);
}

/// Per level: span count, total time, sorted correlations; and the device spans' queues.
#[allow(clippy::type_complexity)]
fn fingerprint(
    trace: &Trace,
) -> (
    BTreeMap<Level, (usize, i64, Vec<u64>)>,
    BTreeMap<(i64, i64), usize>,
) {
    let mut levels: BTreeMap<Level, (usize, i64, Vec<u64>)> = BTreeMap::new();
    let mut queues = BTreeMap::new();
    for s in &trace.spans {
        let e = levels.entry(s.level).or_default();
        e.0 += 1;
        e.1 += s.end - s.start;
        e.2.extend(s.correlation.get());
        if let TrackKind::DeviceQueue { device, .. } = trace.track(s.track).kind {
            *queues.entry((device, 0)).or_default() += 1;
        }
    }
    for e in levels.values_mut() {
        e.2.sort_unstable();
    }
    (levels, queues)
}

fn round_trip(rel: &str) {
    let path = shared(rel);
    if !path.exists() {
        eprintln!("skipped: {} is absent", path.display());
        return;
    }
    let options = ImportOptions::default();
    let original = import_file(&path, &options).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("export.pftrace");
    let file = std::fs::File::create(&out).unwrap();
    strato_io::export::perfetto::write(&original, file).unwrap();
    let back = import_file(&out, &options).unwrap();
    assert_eq!(back.ranks[0].format, SourceFormat::Perfetto);
    assert!(!original.spans.is_empty());
    assert_eq!(back.spans.len(), original.spans.len(), "{rel}");
    let (levels_a, devices_a) = fingerprint(&original);
    let (levels_b, devices_b) = fingerprint(&back);
    assert_eq!(
        levels_b, levels_a,
        "{rel}: per-level counts, times, correlations"
    );
    assert_eq!(devices_b, devices_a, "{rel}: device spans per device");
    // Each device queue's spans come back on one queue of the same device.
    let queue_sets = |t: &Trace| -> BTreeSet<(i64, usize)> {
        let mut per: BTreeMap<(i64, i64), usize> = BTreeMap::new();
        for s in &t.spans {
            if let TrackKind::DeviceQueue { device, queue } = t.track(s.track).kind {
                *per.entry((device, queue)).or_default() += 1;
            }
        }
        per.into_iter().map(|((d, _), n)| (d, n)).collect()
    };
    assert_eq!(queue_sets(&back), queue_sets(&original), "{rel}: queues");
    assert_eq!(
        back.instants.len(),
        original.instants.len(),
        "{rel}: instants"
    );
    // Device names the export carried come back on the same device indexes.
    for d in &original.devices {
        let Some(name) = &d.name else { continue };
        let used = original.spans.iter().any(|s| {
            matches!(original.track(s.track).kind,
                TrackKind::DeviceQueue { device, .. } if device == d.index)
        });
        if used {
            assert!(
                back.devices
                    .iter()
                    .any(|b| b.index == d.index && b.name.as_deref() == Some(name.as_str())),
                "{rel}: device {} {name}",
                d.index
            );
        }
    }
}

#[test]
fn stratoscope_export_of_real_traces_imports_back() {
    round_trip("kineto/tracelens/mi300_Falconsai_nsfw_image_detection.json.gz");
    round_trip("kineto/tracelens/h100_Falconsai_nsfw_image_detection.json.gz");
    round_trip("rocprof/tracelens_908_results.json.gz");
}

#[test]
fn bad_files_are_one_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read(fixture("rocprofv3_like.pftrace")).unwrap();
    let options = ImportOptions::default();
    // Cut inside a packet.
    let cut = dir.path().join("cut.pftrace");
    std::fs::write(&cut, &good[..good.len() - 3]).unwrap();
    let err = import_file(&cut, &options).unwrap_err();
    assert!(matches!(err.kind, ErrorKind::Protobuf(_)), "{err}");
    assert!(err.to_string().contains("cut.pftrace"), "{err}");
    // Not protobuf at all.
    let junk = dir.path().join("junk.pftrace");
    std::fs::write(
        &junk,
        b"\x07\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01binary",
    )
    .unwrap();
    let err = import_file(&junk, &options).unwrap_err();
    assert!(err.to_string().contains("junk.pftrace"), "{err}");
    // A packet claiming more bytes than the file holds.
    let long = dir.path().join("long.pftrace");
    std::fs::write(&long, b"\x0a\xff\xff\xff\x0f\x00").unwrap();
    let err = import_file(&long, &options).unwrap_err();
    assert!(matches!(err.kind, ErrorKind::Protobuf(_)), "{err}");
    // An event on an incremental clock no snapshot defines.
    let mut packet = Vec::new();
    // TracePacket { timestamp: 5, timestamp_clock_id: 64, track_event { type: INSTANT } }
    packet.extend_from_slice(&[0x40, 5, 0xd0, 0x03, 64, 0x5a, 2, 0x48, 3]);
    let mut file = vec![0x0a, packet.len() as u8];
    file.extend_from_slice(&packet);
    let clockless = dir.path().join("clockless.pftrace");
    std::fs::write(&clockless, &file).unwrap();
    let err = import_file(&clockless, &options).unwrap_err();
    assert!(err.to_string().contains("clock 64"), "{err}");
}

/// A first packet 123 or 91 bytes long: the file starts `0x0a '{'` / `0x0a '['`, which content
/// sniffing alone would take for JSON; the `.pftrace` name decides.
#[test]
fn first_packet_length_that_looks_like_json() {
    use prost::Message;
    use strato_io::export::perfetto_proto::{TracePacket, TrackEvent};
    let dir = tempfile::tempdir().unwrap();
    for target in [b'{', b'[', b' '] {
        let mut name_len = 1;
        let packet = loop {
            let packet = TracePacket {
                timestamp: Some(1_000),
                track_event: Some(TrackEvent {
                    name: Some("x".repeat(name_len)),
                    r#type: Some(3),
                    ..Default::default()
                }),
                trusted_packet_sequence_id: Some(1),
                ..Default::default()
            };
            if packet.encoded_len() == usize::from(target) {
                break packet;
            }
            name_len += 1;
            assert!(name_len < 200);
        };
        let mut bytes = vec![0x0a];
        packet.encode_length_delimited(&mut bytes).unwrap();
        assert_eq!(bytes[1], target);
        let path = dir.path().join(format!("t{target}.pftrace"));
        std::fs::write(&path, &bytes).unwrap();
        let trace = import_file(&path, &ImportOptions::default()).unwrap();
        assert_eq!(trace.instants.len(), 1);
        assert_eq!(trace.instants[0].ts, 1_000);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// The file cut anywhere: one error or (cut between packets) a valid trace with no more
    /// spans than the whole; never a panic.
    #[test]
    fn cut_anywhere(cut in 0usize..6000, gzip in proptest::bool::ANY) {
        let good = std::fs::read(fixture("rocprofv3_like.pftrace")).unwrap();
        let whole = import_file(&fixture("rocprofv3_like.pftrace"), &ImportOptions::default())
            .unwrap();
        let cut = cut.min(good.len());
        let dir = tempfile::tempdir().unwrap();
        let path = if gzip {
            use std::io::Write;
            let path = dir.path().join("cut.pftrace.gz");
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            enc.write_all(&good[..cut]).unwrap();
            std::fs::write(&path, enc.finish().unwrap()).unwrap();
            path
        } else {
            let path = dir.path().join("cut.pftrace");
            std::fs::write(&path, &good[..cut]).unwrap();
            path
        };
        match import_file(&path, &ImportOptions::default()) {
            Ok(trace) => {
                prop_assert!(trace.validate().is_ok());
                prop_assert!(trace.spans.len() <= whole.spans.len());
            }
            Err(e) => prop_assert!(e.to_string().contains("cut.pftrace")),
        }
    }
}
