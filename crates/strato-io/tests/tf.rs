//! TensorFlow inputs: the XPlane importer and the trace viewer JSON post-pass, on the real
//! `GPU-multi-worker` profile (`/work/shared/data/tf`, see its MANIFEST) and on small inputs
//! built here.
//!
//! The figures asserted for the real `.xplane.pb` were obtained independently of this crate:
//! a pure-Python walk of the protobuf wire format (no protobuf library; only the field numbers
//! of upstream `xplane.proto`) counted planes, lines, events per line, zero-duration events and
//! `correlation_id` stats. The same counts are also re-derived in this file by
//! [`raw_line_counts`], a second raw wire-format walk that shares no code with the importer.
//! The trace viewer JSON figures were counted with Python's `json` module (events per pid/tid,
//! `args.correlation_id` present).

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use prost::Message;
use strato_io::xplane::proto::{
    x_event, x_stat, XEvent, XEventMetadata, XLine, XPlane, XSpace, XStat, XStatMetadata,
};
use strato_io::{import_file, ErrorKind, ImportOptions};
use strato_trace::testing::{self, TraceBuilder};
use strato_trace::{Level, Process, Rank, RankId, SourceFormat, Span, Trace, TrackId, TrackKind};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/tf")
        .join(name)
}

const XPLANE: &str = "GPU-multi-worker.xplane.pb";
const TRACE_VIEWER: &str = "GPU-multi-worker.trace_viewer.json.gz";

// ---------------------------------------------------------------------------------------------
// An independent raw protobuf walk (wire format only), used to cross-check the importer.

fn varint(b: &[u8], i: &mut usize) -> u64 {
    let (mut value, mut shift) = (0u64, 0);
    loop {
        let byte = b[*i];
        *i += 1;
        value |= u64::from(byte & 0x7f) << shift;
        shift += 7;
        if byte < 0x80 {
            return value;
        }
    }
}

/// `(field number, payload)` of the length-delimited fields of a message; other wire types are
/// skipped. Varint fields are returned with their value in `.2`.
fn fields(b: &[u8]) -> Vec<(u64, &[u8], u64)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let key = varint(b, &mut i);
        match key & 7 {
            0 => {
                let v = varint(b, &mut i);
                out.push((key >> 3, &b[0..0], v));
            }
            1 => i += 8,
            2 => {
                let len = varint(b, &mut i) as usize;
                out.push((key >> 3, &b[i..i + len], 0));
                i += len;
            }
            5 => i += 4,
            w => panic!("wire type {w}"),
        }
    }
    out
}

/// Events per (plane name, line name), counted from the raw bytes.
fn raw_line_counts(file: &[u8]) -> BTreeMap<(String, String), usize> {
    let mut counts = BTreeMap::new();
    for (_, plane, _) in fields(file).into_iter().filter(|f| f.0 == 1) {
        let plane_fields = fields(plane);
        let name = plane_fields
            .iter()
            .find(|f| f.0 == 2)
            .map(|f| String::from_utf8_lossy(f.1).into_owned())
            .unwrap_or_default();
        for (_, line, _) in plane_fields.iter().filter(|f| f.0 == 3) {
            let line_fields = fields(line);
            let line_name = line_fields
                .iter()
                .find(|f| f.0 == 2)
                .map(|f| String::from_utf8_lossy(f.1).into_owned())
                .unwrap_or_default();
            let events = line_fields.iter().filter(|f| f.0 == 4).count();
            *counts.entry((name.clone(), line_name)).or_insert(0) += events;
        }
    }
    counts
}

// ---------------------------------------------------------------------------------------------
// Helpers over an imported trace.

/// Spans + instants per (group, track name): group is the plane (device planes by index).
fn events_per_track(trace: &Trace) -> BTreeMap<(String, String), usize> {
    let process_name = |pid: i64| {
        trace
            .processes
            .iter()
            .find(|p| p.pid == pid)
            .and_then(|p| p.name.clone())
            .unwrap_or_default()
    };
    let key = |track: TrackId| {
        let t = trace.track(track);
        let group = match &t.kind {
            TrackKind::Thread { pid, .. } => process_name(*pid),
            TrackKind::DeviceQueue { device, .. } => format!("/device:GPU:{device}"),
            TrackKind::Custom { group, .. } => group.clone(),
            TrackKind::Counter { .. } => "counter".into(),
        };
        (group, t.name.clone().unwrap_or_default())
    };
    let mut counts = BTreeMap::new();
    for s in &trace.spans {
        *counts.entry(key(s.track)).or_insert(0) += 1;
    }
    for e in &trace.instants {
        *counts.entry(key(e.track)).or_insert(0) += 1;
    }
    counts
}

/// Spans of `level` per device index.
fn device_spans(trace: &Trace, level: Level) -> BTreeMap<i64, usize> {
    let mut counts = BTreeMap::new();
    for s in trace.spans.iter().filter(|s| s.level == level) {
        if let TrackKind::DeviceQueue { device, .. } = trace.track(s.track).kind {
            *counts.entry(device).or_insert(0) += 1;
        }
    }
    counts
}

/// Correlation ids of device kernels and copies.
fn device_correlations(trace: &Trace) -> BTreeSet<u64> {
    trace
        .spans
        .iter()
        .filter(|s| trace.track(s.track).is_device())
        .filter_map(|s| s.correlation.get())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// XPlane, real file.

#[test]
fn xplane_real_file_figures() {
    let path = data(XPLANE);
    let trace = import_file(&path, &ImportOptions::default()).unwrap();
    trace.validate().unwrap();

    assert_eq!(trace.ranks.len(), 1);
    assert_eq!(trace.ranks[0].format.as_str(), "xplane");
    assert_eq!(trace.ranks[0].host.as_deref(), Some("34.83.195.179:6003"));

    // 9 planes: /host:CPU and /device:GPU:0..7 (GPUs 0, 2, 3, 5, 7 have no lines).
    let indices: Vec<i64> = trace.devices.iter().map(|d| d.index).collect();
    assert_eq!(indices, (0..8).collect::<Vec<_>>());
    for d in &trace.devices {
        assert_eq!(d.sm_count, Some(80));
        assert_eq!((d.compute_major, d.compute_minor), (Some(7), Some(0)));
        assert_eq!(d.total_memory_bytes, Some(16_945_512_448));
        assert_eq!(d.clock_rate_khz, Some(1_530_000));
        assert_eq!(d.memory_bandwidth_bytes_per_s, Some(898_048_000_000.0));
    }
    assert_eq!(trace.processes.len(), 1);
    assert_eq!(trace.processes[0].name.as_deref(), Some("/host:CPU"));

    // Lines: 22 host threads, 1 + 4 + 4 streams (GPU 1, 4, 6), 3 + 3 derived lines.
    let count = |f: fn(&TrackKind) -> bool| trace.tracks.iter().filter(|t| f(&t.kind)).count();
    assert_eq!(count(|k| matches!(k, TrackKind::Thread { .. })), 22);
    assert_eq!(count(|k| matches!(k, TrackKind::DeviceQueue { .. })), 9);
    assert_eq!(count(|k| matches!(k, TrackKind::Custom { .. })), 6);

    // 23,128 events: 2,493 have a zero duration (all MemoryAllocation / MemoryDeallocation on
    // the host) and are instants.
    assert_eq!(trace.spans.len() + trace.instants.len(), 23_128);
    assert_eq!(trace.instants.len(), 2_493);
    assert!(trace.instants.iter().all(|e| {
        let name = trace.str(e.name);
        name == "MemoryAllocation" || name == "MemoryDeallocation"
    }));

    // Events per plane.
    let per_track = events_per_track(&trace);
    let mut per_plane: BTreeMap<&str, usize> = BTreeMap::new();
    for ((group, _), n) in &per_track {
        *per_plane.entry(group.as_str()).or_insert(0) += n;
    }
    let expected: BTreeMap<&str, usize> = [
        ("/host:CPU", 15_354),
        ("/device:GPU:1", 19),
        ("/device:GPU:4", 3_875),
        ("/device:GPU:6", 3_880),
    ]
    .into();
    assert_eq!(per_plane, expected);

    // Events per line, a selection from the Python walk ...
    for (group, line, n) in [
        ("/device:GPU:1", "Stream #123(MemcpyH2D)", 19),
        ("/device:GPU:4", "Stream #134(Compute)", 665),
        ("/device:GPU:4", "Stream #135(MemcpyH2D)", 80),
        ("/device:GPU:4", "Stream #136(MemcpyD2H)", 12),
        ("/device:GPU:4", "Stream #63(MemcpyH2D)", 2),
        ("/device:GPU:4", "TensorFlow Ops", 665),
        ("/device:GPU:4", "TensorFlow Name Scope", 2_450),
        ("/device:GPU:4", "Steps", 1),
        ("/device:GPU:6", "Stream #142(Compute)", 665),
        ("/device:GPU:6", "Stream #143(MemcpyH2D)", 99),
        ("/device:GPU:6", "Stream #144(MemcpyD2H)", 12),
        ("/device:GPU:6", "Stream #91(MemcpyH2D)", 2),
        ("/device:GPU:6", "TensorFlow Ops", 665),
        ("/device:GPU:6", "TensorFlow Name Scope", 2_436),
        ("/device:GPU:6", "Steps", 1),
        ("/host:CPU", "python3", 2_393),
        ("/host:CPU", "tf_gpu_private_4/-1927060610", 6_072),
        ("/host:CPU", "tf_gpu_private_6/1085868292", 6_072),
        ("/host:CPU", "tf_gpu_private_6/-1693819547", 361),
        ("/host:CPU", "collective_ops/1737528048", 2),
    ] {
        assert_eq!(per_track[&(group.into(), line.into())], n, "{group} {line}");
    }
    // ... and every line against the raw walk in this file.
    let raw = raw_line_counts(&std::fs::read(&path).unwrap());
    assert_eq!(raw.len(), 37);
    assert_eq!(raw.values().sum::<usize>(), 23_128);
    assert_eq!(per_track, raw);

    // Kernels and copies per GPU, all with a correlation id.
    let kernels = device_spans(&trace, Level::DeviceKernel);
    assert_eq!(kernels, [(4, 665), (6, 665)].into());
    let copies = device_spans(&trace, Level::DeviceCopy);
    assert_eq!(copies, [(1, 19), (4, 94), (6, 113)].into());
    let device_ops: Vec<&Span> = trace
        .spans
        .iter()
        .filter(|s| trace.track(s.track).is_device())
        .collect();
    assert_eq!(device_ops.len(), 1_556);
    assert!(device_ops.iter().all(|s| s.correlation.is_some()));
    assert!(device_ops.iter().all(|s| s.level.is_device_op()));

    // Launch side: 1,556 host API calls, one per device op, same correlation ids.
    let launches: BTreeSet<u64> = trace
        .spans
        .iter()
        .filter(|s| s.level == Level::AcceleratorApi)
        .filter_map(|s| s.correlation.get())
        .collect();
    assert_eq!(
        trace
            .spans
            .iter()
            .filter(|s| s.level == Level::AcceleratorApi)
            .count(),
        1_556
    );
    assert_eq!(launches, device_correlations(&trace));

    // Derived lines are custom tracks, never device time.
    for s in &trace.spans {
        let track = trace.track(s.track);
        if let TrackKind::Custom { name, .. } = &track.kind {
            let expected = match name.as_str() {
                "TensorFlow Ops" => Level::Backend,
                "TensorFlow Name Scope" | "Steps" => Level::Operation,
                other => panic!("unexpected derived line {other}"),
            };
            assert_eq!(s.level, expected);
        }
    }

    // Stats become args; kernel_details (a ref value) stays a string.
    let kernel = device_ops
        .iter()
        .find(|s| s.level == Level::DeviceKernel)
        .unwrap();
    let args: serde_json::Value =
        serde_json::from_str(&trace.args_text(kernel.args).unwrap()).unwrap();
    assert!(args["kernel_details"]
        .as_str()
        .unwrap()
        .starts_with("regs:"));
    assert!(args.get("correlation_id").is_none());
    assert_eq!(trace.str(kernel.category), "device_kernel");
}

#[test]
fn xplane_without_args_keeps_correlations() {
    let options = ImportOptions {
        keep_args: false,
        ..ImportOptions::default()
    };
    let trace = import_file(&data(XPLANE), &options).unwrap();
    assert!(trace.args.is_empty());
    assert!(trace.spans.iter().all(|s| s.args.is_none()));
    assert_eq!(device_correlations(&trace).len(), 1_556);
}

// ---------------------------------------------------------------------------------------------
// XPlane, built here.

fn stat(id: i64, value: x_stat::Value) -> XStat {
    XStat {
        metadata_id: id,
        value: Some(value),
    }
}

fn event(metadata_id: i64, offset_ps: i64, duration_ps: i64, stats: Vec<XStat>) -> XEvent {
    XEvent {
        metadata_id,
        data: Some(x_event::Data::OffsetPs(offset_ps)),
        duration_ps,
        stats,
    }
}

fn write_space(space: &XSpace) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.xplane.pb");
    std::fs::write(&path, space.encode_to_vec()).unwrap();
    (dir, path)
}

fn tiny_space() -> XSpace {
    let emeta = |id: i64, name: &str| {
        (
            id,
            XEventMetadata {
                id,
                name: name.into(),
                ..Default::default()
            },
        )
    };
    let smeta = |id: i64, name: &str| {
        (
            id,
            XStatMetadata {
                id,
                name: name.into(),
                ..Default::default()
            },
        )
    };
    let gpu = XPlane {
        id: 1,
        name: "/device:GPU:3".into(),
        lines: vec![
            XLine {
                id: 14,
                name: "Stream #14(Compute)".into(),
                timestamp_ns: 1_000,
                events: vec![
                    // 1000 ns + 1.499 ns -> 1001; end at 1001.5 ns -> 1002.
                    event(
                        1,
                        1_499,
                        1,
                        vec![
                            stat(1, x_stat::Value::Uint64Value(42)),
                            stat(2, x_stat::Value::RefValue(3)),
                            stat(4, x_stat::Value::DoubleValue(0.5)),
                        ],
                    ),
                    event(
                        2,
                        10_000,
                        2_000,
                        vec![stat(1, x_stat::Value::Int64Value(43))],
                    ),
                    XEvent {
                        metadata_id: 1,
                        data: Some(x_event::Data::NumOccurrences(7)),
                        duration_ps: 5,
                        stats: vec![],
                    },
                ],
                ..Default::default()
            },
            XLine {
                id: -559038734,
                name: "XLA Ops".into(),
                timestamp_ns: 1_000,
                events: vec![event(3, 0, 20_000, vec![])],
                ..Default::default()
            },
        ],
        event_metadata: [
            emeta(1, "gemm_kernel"),
            emeta(2, "MemcpyD2D"),
            emeta(3, "fusion.1"),
        ]
        .into(),
        stat_metadata: [
            smeta(1, "correlation_id"),
            smeta(2, "kernel_details"),
            smeta(3, "regs:32 grid:1,1,1"),
            smeta(4, "occupancy"),
            smeta(5, "core_count"),
        ]
        .into(),
        stats: vec![stat(5, x_stat::Value::Int64Value(108))],
    };
    let tpu = XPlane {
        id: 2,
        name: "/device:TPU:0".into(),
        lines: vec![XLine {
            id: 5,
            name: "XLA Ops".into(),
            timestamp_ns: 0,
            events: vec![event(1, 0, 3_000, vec![])],
            ..Default::default()
        }],
        event_metadata: [emeta(1, "fusion.2")].into(),
        ..Default::default()
    };
    let host = XPlane {
        id: 3,
        name: "/host:CPU".into(),
        lines: vec![XLine {
            id: 77,
            name: "python3".into(),
            timestamp_ns: 500,
            events: vec![
                event(
                    1,
                    0,
                    400_000,
                    vec![stat(1, x_stat::Value::StrValue("42".into()))],
                ),
                event(2, 0, 900_000, vec![]),
                event(3, 1_000, 100_000, vec![]),
                event(4, 2_000, 0, vec![]),
                event(5, 3_000, 5_000, vec![]),
            ],
            ..Default::default()
        }],
        event_metadata: [
            emeta(1, "cuLaunchKernel"),
            emeta(2, "$train.py:10 step"),
            emeta(3, "dense/MatMul:MatMul"),
            emeta(4, "MemoryAllocation"),
            emeta(5, "ExecutorState::Process"),
        ]
        .into(),
        stat_metadata: [smeta(1, "correlation_id")].into(),
        ..Default::default()
    };
    XSpace {
        planes: vec![gpu, tpu, host],
        errors: vec![],
        warnings: vec!["a warning".into()],
        hostnames: vec!["node-1".into()],
    }
}

#[test]
fn xplane_mapping_on_a_built_space() {
    let (_dir, path) = write_space(&tiny_space());
    let trace = import_file(&path, &ImportOptions::default()).unwrap();
    trace.validate().unwrap();
    assert_eq!(trace.ranks[0].host.as_deref(), Some("node-1"));
    let meta: serde_json::Value =
        serde_json::from_str(&trace.ranks[0].metadata.to_json().unwrap()).unwrap();
    assert_eq!(meta["warnings"][0], "a warning");
    assert_eq!(meta["aggregated_events_skipped"], 1);

    let find = |name: &str| {
        trace
            .spans
            .iter()
            .find(|s| trace.str(s.name) == name)
            .unwrap_or_else(|| panic!("no span {name}"))
    };
    let kernel = find("gemm_kernel");
    assert_eq!((kernel.start, kernel.end), (1_001, 1_002));
    assert_eq!(kernel.level, Level::DeviceKernel);
    assert_eq!(kernel.correlation, Some(42));
    assert_eq!(
        trace.track(kernel.track).kind,
        TrackKind::DeviceQueue {
            device: 3,
            queue: 14
        }
    );
    let args: serde_json::Value =
        serde_json::from_str(&trace.args_text(kernel.args).unwrap()).unwrap();
    assert_eq!(
        args,
        serde_json::json!({"kernel_details": "regs:32 grid:1,1,1", "occupancy": 0.5})
    );
    let copy = find("MemcpyD2D");
    assert_eq!(
        (copy.start, copy.end, copy.level),
        (1_010, 1_012, Level::DeviceCopy)
    );
    assert_eq!(copy.correlation, Some(43));

    // GPU "XLA Ops" beside streams is derived; a TPU's "XLA Ops" is its device queue.
    let gpu_op = find("fusion.1");
    assert_eq!(gpu_op.level, Level::Backend);
    assert!(matches!(
        trace.track(gpu_op.track).kind,
        TrackKind::Custom { .. }
    ));
    let tpu_op = find("fusion.2");
    assert_eq!(tpu_op.level, Level::DeviceKernel);
    assert_eq!(
        trace.track(tpu_op.track).kind,
        TrackKind::DeviceQueue {
            device: 0,
            queue: 5
        }
    );
    assert_eq!(trace.devices.len(), 2);
    assert_eq!(trace.devices[0].sm_count, Some(108));

    // Host: API call (correlation), Python function ($), TF op, runtime, allocation instant.
    let launch = find("cuLaunchKernel");
    assert_eq!(
        (launch.level, launch.correlation.get()),
        (Level::AcceleratorApi, Some(42))
    );
    assert_eq!(
        trace.track(launch.track).kind,
        TrackKind::Thread { pid: 0, tid: 77 }
    );
    assert_eq!(find("$train.py:10 step").level, Level::Python);
    assert_eq!(find("dense/MatMul:MatMul").level, Level::Backend);
    assert_eq!(find("ExecutorState::Process").level, Level::Library);
    assert_eq!(trace.instants.len(), 1);
    assert_eq!(trace.instants[0].ts, 502);
    assert_eq!(trace.spans.len(), 8);
}

#[test]
fn xplane_malformed_inputs_are_protobuf_errors() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, bytes: &[u8]| {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    };
    let options = ImportOptions::default();

    // Pseudo-random bytes (xorshift, fixed seed).
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let random: Vec<u8> = (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let err = import_file(&write("random.xplane.pb", &random), &options).unwrap_err();
    assert!(matches!(err.kind, ErrorKind::Protobuf(_)), "{err}");

    // The real file cut in half.
    let real = std::fs::read(data(XPLANE)).unwrap();
    let err = import_file(&write("cut.xplane.pb", &real[..real.len() / 2]), &options).unwrap_err();
    assert!(matches!(err.kind, ErrorKind::Protobuf(_)), "{err}");
    assert!(err.to_string().contains("cut.xplane.pb"));

    // A plane that claims more bytes than there are.
    let err = import_file(&write("short.pb", b"\x0a\x05ab"), &options).unwrap_err();
    assert!(matches!(err.kind, ErrorKind::Protobuf(_)), "{err}");

    // A valid XSpace without planes.
    let empty = XSpace {
        hostnames: vec!["h".into()],
        ..Default::default()
    };
    let err = import_file(&write("empty.xplane.pb", &empty.encode_to_vec()), &options).unwrap_err();
    assert!(matches!(err.kind, ErrorKind::NotATrace(_)), "{err}");

    // Many truncations and byte flips of a real prefix: errors or valid traces, never a panic.
    let head = &real[..real.len().min(1 << 16)];
    for i in 0..200usize {
        let mut bytes = head[..(i * 331) % head.len() + 1].to_vec();
        let at = (i * 7919) % bytes.len();
        bytes[at] ^= (i as u8) | 1;
        match import_file(&write("fuzz.pb", &bytes), &options) {
            Ok(trace) => trace.validate().unwrap(),
            Err(e) => assert!(
                matches!(e.kind, ErrorKind::Protobuf(_) | ErrorKind::NotATrace(_)),
                "{e}"
            ),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Trace viewer JSON post-pass.

/// A trace as the Chrome importer leaves a trace viewer file: Thread tracks, empty categories,
/// `Level::Other`, args text.
fn chrome_like_tf_trace() -> Trace {
    let mut b = TraceBuilder::new();
    let rank = b.rank(Rank {
        format: SourceFormat::Chrome,
        ..testing::rank(None, "t.json")
    });
    for (pid, name) in [(1, "/device:GPU:0"), (701, "/host:CPU")] {
        b.trace_mut().processes.push(Process {
            rank,
            pid,
            name: Some(name.into()),
            labels: None,
        });
    }
    let track = |b: &mut TraceBuilder, pid, tid, name: &str| {
        let id = b.thread(pid, tid);
        b.trace_mut().tracks[id.0 as usize].name = Some(name.into());
        id
    };
    let compute = track(&mut b, 1, 7, "Stream #7(Compute)");
    let h2d = track(&mut b, 1, 8, "Stream #8(MemcpyH2D)");
    let ops = track(&mut b, 1, 3_735_928_562, "TensorFlow Ops");
    let host = track(&mut b, 701, 99, "tf_gpu_private_0/99");
    for (track, name, args) in [
        (
            compute,
            "gemm",
            Some(r#"{"correlation_id":"5","kernel_details":"regs:8"}"#),
        ),
        (
            h2d,
            "MemcpyH2D",
            Some(r#"{"correlation_id":6,"memcpy_details":"size:4"}"#),
        ),
        (ops, "dense/MatMul:MatMul", None),
        (host, "gemm", Some(r#"{"correlation_id":"5"}"#)),
        (host, "dense/MatMul:MatMul", Some(r#"{"is_eager":"0"}"#)),
        (host, "ExecutorState::Process", None),
    ] {
        let span = b.span(track, Level::Other, name, 0, 10).category("");
        if let Some(args) = args {
            span.args(args);
        }
    }
    b.build()
}

#[test]
fn trace_viewer_post_pass_on_a_built_trace() {
    let trace = strato_io::tf::post_process(chrome_like_tf_trace(), &ImportOptions::default());
    trace.validate().unwrap();
    assert_eq!(trace.ranks[0].format.as_str(), "tf-trace-viewer");
    assert_eq!(trace.tracks.len(), 4);
    assert_eq!(
        trace.tracks[0].kind,
        TrackKind::DeviceQueue {
            device: 0,
            queue: 7
        }
    );
    assert_eq!(trace.tracks[0].name.as_deref(), Some("Stream #7(Compute)"));
    assert_eq!(
        trace.tracks[2].kind,
        TrackKind::Custom {
            group: "/device:GPU:0".into(),
            name: "TensorFlow Ops".into()
        }
    );
    assert_eq!(
        trace.tracks[3].kind,
        TrackKind::Thread { pid: 701, tid: 99 }
    );
    let got: Vec<(Level, &str, Option<u64>)> = trace
        .spans
        .iter()
        .map(|s| (s.level, trace.str(s.category), s.correlation.get()))
        .collect();
    assert_eq!(
        got,
        vec![
            (Level::DeviceKernel, "device_kernel", Some(5)),
            (Level::DeviceCopy, "device_copy", Some(6)),
            (Level::Backend, "tf_op", None),
            (Level::AcceleratorApi, "host_api", Some(5)),
            (Level::Backend, "tf_op", None),
            (Level::Library, "host", None),
        ]
    );
    assert_eq!(trace.devices.len(), 1);
    assert_eq!(trace.devices[0].rank, Some(RankId(0)));
}

#[test]
fn other_traces_pass_through_unchanged() {
    let options = ImportOptions::default();
    // Same shape, but a Kineto rank: untouched.
    let mut kineto = chrome_like_tf_trace();
    kineto.ranks[0].format = "kineto".into();
    assert_eq!(
        strato_io::tf::post_process(kineto.clone(), &options),
        kineto
    );
    // A chrome rank without TF process names: untouched.
    let mut generic = chrome_like_tf_trace();
    for p in &mut generic.processes {
        p.name = Some("python3".into());
    }
    assert_eq!(
        strato_io::tf::post_process(generic.clone(), &options),
        generic
    );
    // Empty trace.
    assert_eq!(
        strato_io::tf::post_process(Trace::default(), &options),
        Trace::default()
    );
}

#[test]
fn other_json_files_pass_through_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("generic.json");
    std::fs::write(
        &path,
        r#"{"traceEvents":[
            {"ph":"M","name":"process_name","pid":1,"args":{"name":"renderer"}},
            {"ph":"M","name":"thread_name","pid":1,"tid":2,"args":{"name":"Stream #1(Compute)"}},
            {"ph":"X","name":"work","pid":1,"tid":2,"ts":1,"dur":2,"args":{"correlation_id":3}}
        ]}"#,
    )
    .unwrap();
    let options = ImportOptions::default();
    let input = strato_io::input::open(&path, options.decompression_limit(&path).unwrap()).unwrap();
    let plain = strato_io::chrome::import(&path, input, &options).unwrap();
    assert_eq!(strato_io::tf::post_process(plain.clone(), &options), plain);
    assert_eq!(import_file(&path, &options).unwrap(), plain);
}

#[test]
fn trace_viewer_json_real_file() {
    let trace = import_file(&data(TRACE_VIEWER), &ImportOptions::default()).unwrap();
    trace.validate().unwrap();
    assert_eq!(trace.ranks[0].format.as_str(), "tf-trace-viewer");
    // 20,631 complete events (the 92 metadata events and one empty object aside).
    assert_eq!(trace.spans.len(), 20_631);
    assert_eq!(trace.devices.len(), 8);
    assert_eq!(
        device_spans(&trace, Level::DeviceKernel),
        [(4, 665), (6, 665)].into()
    );
    assert_eq!(
        device_spans(&trace, Level::DeviceCopy),
        [(1, 19), (4, 94), (6, 113)].into()
    );
    let custom = trace
        .tracks
        .iter()
        .filter(|t| matches!(t.kind, TrackKind::Custom { .. }))
        .count();
    assert_eq!(custom, 6);
    assert_eq!(device_correlations(&trace).len(), 1_556);
    let launches = trace
        .spans
        .iter()
        .filter(|s| s.level == Level::AcceleratorApi && s.correlation.is_some())
        .count();
    assert_eq!(launches, 1_556);
}

#[test]
fn trace_viewer_and_xplane_agree() {
    let options = ImportOptions::default();
    let json = import_file(&data(TRACE_VIEWER), &options).unwrap();
    let pb = import_file(&data(XPLANE), &options).unwrap();
    for level in [Level::DeviceKernel, Level::DeviceCopy] {
        assert_eq!(
            device_spans(&json, level),
            device_spans(&pb, level),
            "{level}"
        );
    }
    assert_eq!(device_correlations(&json), device_correlations(&pb));
    // Device and derived lines carry the same events; the host loses in the JSON what xprof
    // drops: the 2,493 zero-duration allocator events and 4 tf.data Prefetch{Produce,Consume}
    // markers.
    assert_eq!(
        json.spans.len() + 2_493 + 4,
        pb.spans.len() + pb.instants.len()
    );
}

#[test]
fn trace_viewer_json_without_args_keeps_correlations() {
    let options = ImportOptions {
        keep_args: false,
        ..ImportOptions::default()
    };
    let trace = import_file(&data(TRACE_VIEWER), &options).unwrap();
    assert_eq!(
        device_spans(&trace, Level::DeviceKernel),
        [(4, 665), (6, 665)].into()
    );
    assert_eq!(device_correlations(&trace).len(), 1_556);
}

#[test]
fn trace_viewer_json_without_args_keeps_levels() {
    let options = ImportOptions {
        keep_args: false,
        ..ImportOptions::default()
    };
    let trace = import_file(&data(TRACE_VIEWER), &options).unwrap();
    assert_eq!(trace.ranks[0].format.as_str(), "tf-trace-viewer");
    assert_eq!(
        device_spans(&trace, Level::DeviceKernel),
        [(4, 665), (6, 665)].into()
    );
    assert_eq!(
        device_spans(&trace, Level::DeviceCopy),
        [(1, 19), (4, 94), (6, 113)].into()
    );
}

/// An import that drops args classifies every span as one that keeps them: the trace viewer
/// classification reads `is_eager` from args (4,779 eager ops of this file were host code
/// before, so `breakdown` on the JSON disagreed with `breakdown` on its stored profile).
#[test]
fn trace_viewer_json_classifies_the_same_with_or_without_args() {
    let classes = |options: &ImportOptions| -> Vec<(String, Level)> {
        let trace = import_file(&data(TRACE_VIEWER), options).unwrap();
        trace
            .spans
            .iter()
            .map(|s| (trace.str(s.category).to_owned(), s.level))
            .collect()
    };
    let with_args = classes(&ImportOptions::default());
    let tf_ops = with_args.iter().filter(|(c, _)| c == "tf_op").count();
    assert!(tf_ops > 6_000, "{tf_ops} tf_op spans with args");
    for options in [
        ImportOptions {
            keep_args: false,
            ..ImportOptions::default()
        },
        ImportOptions {
            args_scope: strato_io::ArgsScope::DeviceOps,
            ..ImportOptions::default()
        },
    ] {
        assert_eq!(classes(&options), with_args);
    }
}
