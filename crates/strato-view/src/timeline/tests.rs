//! The layout and the level of detail against brute force, on constructed traces whose answer
//! is known (nesting depths) and on random ones (conservation at every window and width).

use proptest::prelude::*;
use strato_trace::testing::TraceBuilder;
use strato_trace::{Level, Ns, Trace};

use super::{overlaps, InstantView, Timeline, Window};

/// Spans of the lane that overlap the window, by brute force: (count, summed durations).
fn brute(trace: &Trace, lane: u32, t0: Ns, t1: Ns) -> (u64, i128) {
    let mut count = 0;
    let mut busy = 0;
    for s in &trace.spans {
        if s.track.0 == lane && overlaps(s.start, s.end, t0, t1) {
            count += 1;
            busy += i128::from(s.end - s.start);
        }
    }
    (count, busy)
}

/// What the view shows of the lane: (count, summed durations), exact and summed together.
fn shown(timeline: &Timeline, lane: u32, window: Window) -> (u64, i128) {
    let view = timeline.view(lane, window);
    let mut count = 0;
    let mut busy = 0;
    for row in &view.rows {
        for e in &row.exact {
            count += 1;
            busy += i128::from(e.end - e.start);
        }
        for b in &row.buckets {
            assert!(b.index < window.px, "bucket {} of {}", b.index, window.px);
            assert!(b.count > 0);
            count += b.count;
            busy += b.busy_ns;
        }
        // No span is both exact and summed: exact ones last at least a bucket.
        for e in &row.exact {
            assert!(e.end - e.start >= window.bucket_ns());
        }
    }
    (count, busy)
}

#[test]
fn a_call_stack_lands_on_its_depths_and_its_chain_is_its_callers() {
    let mut b = TraceBuilder::new();
    let t = b.thread(1, 1);
    let outer = b.span(t, Level::Operation, "step", 0, 100).id();
    let mid = b.span(t, Level::Backend, "aten::linear", 10, 60).id();
    let inner = b
        .span(t, Level::AcceleratorApi, "cudaLaunchKernel", 20, 30)
        .id();
    let sibling = b.span(t, Level::Backend, "aten::relu", 60, 90).id();
    let trace = b.build();
    let timeline = Timeline::new(&trace);
    assert_eq!(timeline.row_of(outer), 0);
    assert_eq!(timeline.row_of(mid), 1);
    assert_eq!(timeline.row_of(inner), 2);
    assert_eq!(timeline.row_of(sibling), 1, "a sibling reuses its depth");
    assert_eq!(timeline.enclosing(&trace, inner), vec![outer.0, mid.0]);
    assert_eq!(timeline.enclosing(&trace, sibling), vec![outer.0]);
    assert_eq!(timeline.lanes()[0].rows, 3);
}

#[test]
fn zoomed_out_short_spans_are_summed_where_they_start_and_long_ones_stay_exact() {
    let mut b = TraceBuilder::new();
    let q = b.queue(0, 7);
    // 1,000 kernels of 10 ns every 100 ns, and one of 50,000 ns.
    for i in 0..1000 {
        b.span(q, Level::DeviceKernel, "small", i * 100, i * 100 + 10);
    }
    b.span(q, Level::DeviceKernel, "big", 100_000, 150_000);
    let trace = b.build();
    let timeline = Timeline::new(&trace);
    let window = Window {
        t0: 0,
        t1: 200_000,
        px: 100,
    };
    assert_eq!(window.bucket_ns(), 2000);
    let view = timeline.view(0, window);
    let exact: Vec<_> = view.rows.iter().flat_map(|r| r.exact.iter()).collect();
    assert_eq!(exact.len(), 1);
    assert_eq!((exact[0].start, exact[0].end), (100_000, 150_000));
    let buckets: Vec<_> = view.rows.iter().flat_map(|r| r.buckets.iter()).collect();
    // 20 kernels start in each 2,000 ns bucket, for the first 50 buckets.
    assert_eq!(buckets.len(), 50);
    assert!(buckets.iter().all(|b| b.count == 20 && b.busy_ns == 200));
    // Zoomed in on one kernel: it is exact.
    let close = Window {
        t0: 500,
        t1: 520,
        px: 100,
    };
    let view = timeline.view(0, close);
    let exact: Vec<_> = view.rows.iter().flat_map(|r| r.exact.iter()).collect();
    assert_eq!(exact.len(), 1);
    assert_eq!((exact[0].start, exact[0].end), (500, 510));
}

#[test]
fn counters_and_instants_thin_out_when_zoomed_out() {
    let mut b = TraceBuilder::new();
    let c = b.counter_track(Some(1), None, "memory", "bytes");
    let t = b.thread(1, 1);
    for i in 0..1000 {
        b.counter(c, i * 10, i as f64);
        b.instant(t, Level::Other, "marker", "tick", i * 10);
    }
    let trace = b.build();
    let timeline = Timeline::new(&trace);
    let wide = Window {
        t0: 0,
        t1: 10_000,
        px: 10,
    };
    let view = timeline.view(c.0, wide);
    match view.counters.expect("counter samples") {
        super::CounterView::Buckets(b) => {
            assert_eq!(b.len(), 10);
            // Bucket 3 holds samples 300..=399: min 300, max 399, last 399.
            assert_eq!(b[3], (3, 300.0, 399.0, 399.0));
        }
        other => panic!("expected buckets, got {other:?}"),
    }
    match timeline.view(t.0, wide).instants.expect("instants") {
        InstantView::Buckets(b) => {
            assert_eq!(b.iter().map(|x| x.1).sum::<u64>(), 1000);
        }
        other => panic!("expected buckets, got {other:?}"),
    }
    let close = Window {
        t0: 25,
        t1: 55,
        px: 10,
    };
    match timeline.view(c.0, close).counters.expect("counter samples") {
        super::CounterView::Exact(e) => {
            // The value in force at t0, then the samples at 30, 40, 50.
            assert_eq!(e, vec![(25, 2.0), (30, 3.0), (40, 4.0), (50, 5.0)]);
        }
        other => panic!("expected exact samples, got {other:?}"),
    }
}

#[test]
fn pathological_overlap_fills_the_overflow_row_and_is_still_conserved() {
    let mut b = TraceBuilder::new();
    let q = b.queue(0, 1);
    // 400 spans all overlapping each other: 255 rows, then the overflow row.
    for i in 0..400 {
        b.span(q, Level::DeviceKernel, "k", i, 10_000 + (i % 7) * 3);
    }
    let trace = b.build();
    let timeline = Timeline::new(&trace);
    assert_eq!(timeline.lanes()[0].rows as usize, super::MAX_ROWS);
    for (t0, t1, px) in [
        (0, 20_000, 50),
        (5, 6, 3),
        (9_000, 10_100, 1000),
        (200, 10_030, 1),
    ] {
        let w = Window { t0, t1, px };
        assert_eq!(shown(&timeline, 0, w), brute(&trace, 0, t0, t1), "{w:?}");
    }
}

fn random_trace(spans: &[(u8, i64, i64)], nested: bool) -> Trace {
    let mut b = TraceBuilder::new();
    let lanes = [b.thread(1, 1), b.queue(0, 7), b.thread(1, 2)];
    for &(lane, start, len) in spans {
        let track = lanes[lane as usize % 3];
        let (s, e) = if nested {
            // Nested by construction: a span inside a power-of-two grid cell.
            let cell = 1i64 << (len % 12);
            let s = (start / cell) * cell;
            (s, s + cell / 2)
        } else {
            (start, start + len)
        };
        b.span(track, Level::Backend, "op", s, e);
    }
    b.build()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Exact spans plus bucket counts are every span that overlaps the window, and their
    /// durations add up, at any window and width, with ties, zero lengths and overlaps.
    #[test]
    fn every_window_conserves_the_spans_beneath_it(
        spans in prop::collection::vec((0u8..3, -50i64..5_000, 0i64..800), 0..300),
        nested in any::<bool>(),
        t0 in -100i64..5_000,
        len in 1i64..6_000,
        px in 1u32..300,
    ) {
        let trace = random_trace(&spans, nested);
        let timeline = Timeline::new(&trace);
        let window = Window { t0, t1: t0 + len, px };
        for lane in 0..3u32 {
            prop_assert_eq!(shown(&timeline, lane, window), brute(&trace, lane, t0, t0 + len));
            let mut n = 0u64;
            timeline.overlapping(lane, t0, t0 + len, |_, _, _| n += 1);
            prop_assert_eq!(n, brute(&trace, lane, t0, t0 + len).0);
        }
    }
}
