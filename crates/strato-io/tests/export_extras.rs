//! `export::perfetto::write_with`: what the analyses add to a Perfetto export (per-stratum
//! child tracks of each thread, analysis counters and span tracks under their device), read
//! back and checked for balance, ownership and counts known by construction.

use prost::Message;
use strato_io::export::perfetto::{
    self, proto, ExtraCounter, ExtraSpan, ExtraTrack, Extras, Owner,
};
use strato_trace::testing::{rank, TraceBuilder};
use strato_trace::{Level, RankId, Trace};

fn trace() -> Trace {
    let mut b = TraceBuilder::new();
    b.rank(rank(Some(0), "s"));
    let cpu = b.thread(10, 11);
    let gpu = b.queue(0, 7);
    // op > aten > launch; a second op with an overlapping, non-nesting Backend span.
    for (track, start, end, name, level) in [
        (cpu, 0, 100, "step", Level::Operation),
        (cpu, 10, 60, "aten::mm", Level::Backend),
        (cpu, 20, 30, "cudaLaunchKernel", Level::AcceleratorApi),
        (cpu, 50, 80, "aten::add", Level::Backend),
        (gpu, 35, 70, "gemm", Level::DeviceKernel),
    ] {
        b.span(track, level, name, start, end).category(name);
    }
    b.build()
}

fn extras() -> Extras {
    Extras {
        strata_tracks: true,
        counters: vec![ExtraCounter {
            rank: RankId(0),
            owner: Owner::Device(0),
            name: "device busy %".into(),
            unit: "%".into(),
            points: vec![(0, 0.0), (10, 50.0), (20, 100.0), (30, 0.0)],
        }],
        tracks: vec![ExtraTrack {
            rank: RankId(0),
            owner: Owner::Device(0),
            name: "iterations".into(),
            spans: vec![
                ExtraSpan {
                    start: 0,
                    end: 40,
                    name: "iteration 1".into(),
                    args: vec![("ops".into(), "3".into())],
                },
                // Overlaps the first: clipped to start at 40.
                ExtraSpan {
                    start: 30,
                    end: 90,
                    name: "iteration 2".into(),
                    args: Vec::new(),
                },
            ],
        }],
    }
}

#[test]
fn strata_tracks_counters_and_analysis_spans() {
    let t = trace();
    let mut plain = Vec::new();
    perfetto::write(&t, &mut plain).expect("write");
    let mut rich = Vec::new();
    perfetto::write_with(&t, &extras(), &mut rich).expect("write");
    let a = perfetto::summarize(&plain).expect("decode");
    let b = perfetto::summarize(&rich).expect("decode");
    for s in [&a, &b] {
        assert_eq!(s.unbalanced_tracks, 0);
        assert_eq!(s.events_on_unknown_tracks, 0);
        assert_eq!(s.incremental_state_errors, 0);
    }
    assert_eq!(a.slice_begins, 5);
    assert_eq!(b.slice_begins, 5 + 2);
    assert_eq!(b.slice_ends, b.slice_begins);
    assert_eq!(b.counter_events, a.counter_events + 4);

    // Track layout: the thread's children are one track per level, in stack order; the
    // overlapping Backend span got an overflow lane under "Backend"; the counter and the
    // iterations hang under the device.
    let decoded = proto::Trace::decode(&rich[..]).expect("decode");
    let descriptors: Vec<&proto::TrackDescriptor> = decoded
        .packet
        .iter()
        .filter_map(|p| p.track_descriptor.as_ref())
        .collect();
    let by_name = |n: &str| {
        descriptors
            .iter()
            .find(|d| d.name.as_deref() == Some(n))
            .copied()
    };
    let thread = descriptors
        .iter()
        .find(|d| d.thread.is_some())
        .expect("thread track");
    let device = by_name("GPU 0").expect("device track");
    for (level, rank) in [("Operation", 1), ("Backend", 3), ("AcceleratorApi", 6)] {
        let d = by_name(level).unwrap_or_else(|| panic!("{level} track"));
        assert_eq!(d.parent_uuid, thread.uuid, "{level}");
        assert_eq!(d.sibling_order_rank, Some(rank), "{level}");
    }
    let overlap = by_name("Backend (overlap 1)").expect("overflow lane");
    assert_eq!(overlap.parent_uuid, by_name("Backend").and_then(|d| d.uuid));
    let counter = by_name("device busy %").expect("counter");
    assert_eq!(counter.parent_uuid, device.uuid);
    assert!(counter.counter.is_some());
    assert_eq!(
        by_name("iterations").and_then(|d| d.parent_uuid),
        device.uuid
    );

    // The plain export is unchanged by the new code path: spans stay on the thread track.
    let plain_decoded = proto::Trace::decode(&plain[..]).expect("decode");
    assert!(!plain_decoded
        .packet
        .iter()
        .filter_map(|p| p.track_descriptor.as_ref())
        .any(|d| d.name.as_deref() == Some("Backend")));
}
