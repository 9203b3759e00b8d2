//! Inputs shared by the store's tests: hand-built traces, and the real Chrome-trace files of
//! `../shared/data` imported the way the store keeps them.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use strato_trace::metadata::{JsonObject, SourceMetadata};
use strato_trace::testing::{self, TraceBuilder};
use strato_trace::{
    ClockDomain, ClockInfo, ClockSource, CounterSample, Device, Flow, FlowEnd, Instant, Level,
    Process, Rank, Span, SpanId, StrId, Trace, Track, TrackKind, TIME_LIMIT_NS,
};

/// A trace using every feature of the model: every track kind, every level, `None` and
/// `Some` for every option, flows with missing ends, odd text, extreme times.
pub fn full_trace() -> Trace {
    let mut t = Trace::default();
    let r0 = t.add_rank(Rank {
        rank: Some(0),
        world_size: Some(2),
        source: "/tmp/rank0.json.gz".into(),
        format: "kineto".into(),
        host: Some("host-α".into()),
        metadata: SourceMetadata::from_json(
            r#"{"schemaVersion":1,"note":"quote \" and \\ backslash"}"#,
            "kineto".into(),
        )
        .expect("an object"),
        notes: Default::default(),
    });
    let r1 = t.add_rank(Rank {
        rank: None,
        world_size: None,
        source: String::new(),
        format: "strato".into(),
        host: None,
        metadata: strato_trace::metadata::SourceMetadata::None,
        notes: Default::default(),
    });
    t.processes.push(Process {
        rank: r0,
        pid: 42,
        name: Some("python train.py".into()),
        labels: Some("rank 0".into()),
    });
    t.processes.push(Process {
        rank: r1,
        pid: -1,
        name: None,
        labels: None,
    });
    let thread = t.add_track(Track {
        rank: r0,
        kind: TrackKind::Thread { pid: 42, tid: 43 },
        name: Some("MainThread".into()),
        sort_index: Some(-5),
    });
    let queue = t.add_track(Track {
        rank: r0,
        kind: TrackKind::DeviceQueue {
            device: 0,
            queue: 7,
        },
        name: Some("stream 7".into()),
        sort_index: None,
    });
    let counter = t.add_track(Track {
        rank: r0,
        kind: TrackKind::Counter {
            pid: Some(42),
            device: Some(0),
            name: "Memory in use".into(),
            unit: "bytes".into(),
        },
        name: None,
        sort_index: Some(i64::MAX),
    });
    let counter2 = t.add_track(Track {
        rank: r1,
        kind: TrackKind::Counter {
            pid: None,
            device: None,
            name: String::new(),
            unit: String::new(),
        },
        name: Some("util".into()),
        sort_index: None,
    });
    let custom = t.add_track(Track {
        rank: r1,
        kind: TrackKind::Custom {
            group: "Spans".into(),
            name: "PyTorch Profiler".into(),
        },
        name: None,
        sort_index: Some(i64::MIN),
    });
    let tracks = [thread, queue, counter, counter2, custom];

    // Interning order deliberately differs from first use, and some strings are unused.
    let unused = t.intern("never used by any span");
    let _ = unused;
    let names = [
        t.intern("aten::mm"),
        t.intern("<script>alert(\"x\")</script>"),
        t.intern("名前 — ünïcödé 🚀"),
        t.intern("it's \"quoted\", with, commas\nand newline\ttab"),
        t.intern("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)"),
        StrId::EMPTY,
    ];
    let cats = [t.intern("cpu_op"), t.intern("kernel"), t.intern("")];
    let a0 = t.add_args("{}");
    let a1 = t.add_args(r#"{"grid":[1,2,3],"name":"<b>&amp;</b>"}"#);
    let _dup = t.add_args("{}"); // duplicate text: ids must still round-trip
    let a3 = t.add_args("{\"ünï\": \"🚀\"}");
    let args = [None, Some(a0), Some(a1), Some(a3)];

    let times: [(i64, i64); 6] = [
        (0, 0),
        (-10, 10),
        // The extremes of the valid time range (strato_trace::TIME_LIMIT_NS).
        (-TIME_LIMIT_NS, TIME_LIMIT_NS),
        (TIME_LIMIT_NS, TIME_LIMIT_NS),
        (-TIME_LIMIT_NS, -TIME_LIMIT_NS),
        (1_712_195_495_505_543_200, 1_712_195_495_505_600_001),
    ];
    for (i, level) in Level::ALL.into_iter().enumerate() {
        let (start, end) = times[i % times.len()];
        t.spans.push(Span {
            track: tracks[i % tracks.len()],
            start,
            end,
            name: names[i % names.len()],
            category: cats[i % cats.len()],
            level,
            correlation: (i % 2 == 0).then_some(i as u64 * 1000).into(),
            external_id: (i % 3 == 0).then_some(u64::MAX - i as u64).into(),
            args: args[i % args.len()],
        });
        t.instants.push(Instant {
            track: tracks[(i + 1) % tracks.len()],
            ts: times[i % times.len()].0,
            name: names[(i + 2) % names.len()],
            category: cats[(i + 1) % cats.len()],
            level,
            args: args[(i + 1) % args.len()],
        });
    }
    for (i, value) in [
        0.0,
        -0.0,
        1.5,
        f64::MAX,
        f64::MIN_POSITIVE,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -1e300,
    ]
    .into_iter()
    .enumerate()
    {
        t.counters.push(CounterSample {
            // Samples on counter tracks and, for the odd one, on a thread track.
            track: if i == 7 {
                thread
            } else {
                [counter, counter2][i % 2]
            },
            ts: times[i % times.len()].1,
            value,
        });
    }
    let flow_cat = t.intern("ac2g");
    let end = |track, ts, span| Some(FlowEnd { track, ts, span });
    t.flows.push(Flow {
        id: 5,
        category: flow_cat,
        from: end(thread, 0, Some(SpanId(0))),
        to: end(queue, 12, Some(SpanId(1))),
    });
    t.flows.push(Flow {
        id: u64::MAX,
        category: flow_cat,
        from: end(thread, -TIME_LIMIT_NS, None),
        to: None,
    });
    t.flows.push(Flow {
        id: 0,
        category: names[5],
        from: None,
        to: end(queue, TIME_LIMIT_NS, Some(SpanId(3))),
    });
    t.flows.push(Flow {
        id: 7,
        category: flow_cat,
        from: None,
        to: None,
    });
    t.devices.push(Device {
        rank: Some(r0),
        index: 0,
        name: Some("NVIDIA A100-SXM4-80GB".into()),
        sm_count: Some(108),
        total_memory_bytes: Some(85_899_345_920),
        compute_major: Some(8),
        compute_minor: Some(0),
        clock_rate_khz: Some(1_410_000),
        memory_bandwidth_bytes_per_s: Some(2.039e12),
        extra: JsonObject::parse(r#"{"numRegs":65536}"#).expect("an object"),
    });
    t.devices.push(Device::default());
    t.clock = ClockInfo {
        reference: ClockDomain::Monotonic,
        sources: vec![
            ClockSource {
                name: "rank0".into(),
                domain: ClockDomain::Device("gpu0".into()),
                offset_ns: -123_456_789,
                drift_ppb: 12.5,
                anchor_ns: i64::MAX,
                error_ns: Some(250),
                method: "paired observations".into(),
            },
            ClockSource {
                name: "wall".into(),
                domain: ClockDomain::Realtime,
                offset_ns: 0,
                drift_ppb: 0.0,
                anchor_ns: 0,
                error_ns: None,
                method: "identity".into(),
            },
        ],
    };
    t.validate().unwrap();
    t
}

/// A trace with `n` spans on a few tracks, enough to span several record batches.
pub fn big_trace(n: usize) -> Trace {
    let mut b = TraceBuilder::new();
    b.rank(testing::rank(Some(0), "big"));
    let tracks: Vec<_> = (0..4).map(|q| b.queue(0, q)).collect();
    for i in 0..n {
        let name = format!("kernel_{}", (i * 7) % 1000);
        let span = b
            .span(
                tracks[i % 4],
                Level::DeviceKernel,
                &name,
                i as i64 * 10,
                i as i64 * 10 + 5,
            )
            .category("kernel")
            .correlation(i as u64);
        if i % 10 == 0 {
            span.args(&format!("{{\"i\":{i}}}"));
        }
    }
    b.build()
}

/// Every Chrome-trace JSON file (`.json`, `.json.gz`) under `../shared/data`, sorted; empty
/// when the folder is not there.
pub fn chrome_files() -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data");
    let mut files = Vec::new();
    let mut dirs = vec![root];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                dirs.push(path);
            } else if name.ends_with(".json") || name.ends_with(".json.gz") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// `path` imported with the default options and redacted as the store writes it; None when
/// it does not import (not a trace these tests are about: the import tests cover errors).
pub fn import_redacted(path: &Path) -> Option<Trace> {
    let options = strato_io::ImportOptions::default();
    let mut trace = strato_io::import_paths(&[path.to_path_buf()], &options).ok()?;
    strato_io::redact::redact_trace(&mut trace);
    Some(trace)
}

/// A span as text, with its args blob: comparable across reads whose string and args ids
/// differ (another read, or a streamed read's per-batch args).
pub fn span_text(trace: &Trace, s: &Span) -> String {
    format!(
        "{:?} {} {} {:?} {:?} {:?} {:?} {:?} {:?}",
        s.track,
        s.start,
        s.end,
        trace.str(s.name),
        trace.str(s.category),
        s.level,
        s.correlation,
        s.external_id,
        trace.args_text(s.args),
    )
}
