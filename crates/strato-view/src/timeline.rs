//! The timeline index: every track of a trace as a lane of rows, and the level-of-detail
//! answer to "what is visible in `[t0, t1)` at `px` pixels".
//!
//! This module owns the layout (which row an event sits on) and the level of detail; it reads
//! the trace and never writes it. The server ([`crate::server`]) turns its answers into JSON.
//!
//! **Rows.** The spans of a lane are placed on rows, greedily: in order of start (longer first
//! at equal starts, then [`strato_trace::Span::same_extent_order`]), each span takes the lowest row whose last span has ended. Properly nested
//! spans (a thread's call stack) land on their depth; overlapping device work is spread over
//! as many rows as it needs. Within one row spans never overlap, so their starts and their
//! ends are both sorted, and a window's spans are found by two binary searches. A lane has at
//! most [`MAX_ROWS`] rows; the last one takes every span left over (pathological overlap) and
//! is answered by a scan with an explicit overlap test.
//!
//! **Level of detail.** A window of `px` pixels has buckets of `w = ceil((t1 - t0) / px)` ns.
//! In a row, a span lasting at least `w` is sent as it is (a row holds at most `px + 1` such
//! spans in a window, since they do not overlap); the shorter ones are summed into the
//! bucket where they start (clamped into the window): how many, and their summed duration.
//! A segment tree of durations per row finds the long spans without visiting the short ones,
//! and prefix sums give each bucket's count and time with two binary searches, so an answer
//! costs `O(px log n)` per row however many events are under it.
//!
//! **Conservation.** In every row, exact spans plus bucket counts are the spans that overlap
//! the window, and their durations (unclipped) add up to those spans' durations. Tested
//! against a brute-force count on generated and real traces.

use strato_trace::{Ns, SpanId, Trace, TrackKind};

/// Most rows a lane is laid out on; the last one holds what does not fit.
pub const MAX_ROWS: usize = 256;

/// The most pixels a window may be asked at.
pub const MAX_PX: u32 = 16_384;

/// A lane: one track of the trace.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Lane {
    /// The lane's id (the track's index in the trace).
    pub id: u32,
    /// The trace's rank index (`Trace::ranks`).
    pub rank_index: u32,
    /// The job rank the source gives, when it gives one.
    pub rank: Option<i64>,
    /// `thread`, `device`, `counter` or `custom`.
    pub kind: &'static str,
    /// The group the lane is shown under: a process (`pid 12 python`) or a device (`device 0`).
    pub group: String,
    /// The lane's own name (a thread name and id, `stream 7`, a counter name and unit).
    pub name: String,
    /// How many rows its spans take.
    pub rows: u32,
    /// How many spans, instants and counter samples it holds.
    pub events: u64,
    /// How far its times were moved to put its rank on the job's one clock (omitted when 0:
    /// the times are as recorded).
    #[serde(skip_serializing_if = "is_zero")]
    pub clock_shift_ns: Ns,
}

fn is_zero(ns: &Ns) -> bool {
    *ns == 0
}

/// One row of a lane: spans that never overlap, in order of start.
#[derive(Debug, Default)]
struct Row {
    starts: Vec<Ns>,
    ends: Vec<Ns>,
    spans: Vec<u32>,
    /// `busy[i]` = summed durations of the row's first `i` spans (rows of disjoint spans:
    /// at most the row's extent, so it fits; the overflow row is scanned and has none).
    busy: Vec<Ns>,
    longest: MaxTree,
    /// True for the overflow row, whose spans may overlap.
    overlapping: bool,
}

/// A segment tree of maxima over a row's durations.
#[derive(Debug, Default)]
struct MaxTree {
    leaves: usize,
    nodes: Vec<Ns>,
}

impl MaxTree {
    fn new(durations: impl ExactSizeIterator<Item = Ns>) -> MaxTree {
        let leaves = durations.len().next_power_of_two().max(1);
        let mut nodes = vec![Ns::MIN; 2 * leaves];
        for (i, d) in durations.enumerate() {
            nodes[leaves + i] = d;
        }
        for i in (1..leaves).rev() {
            nodes[i] = nodes[2 * i].max(nodes[2 * i + 1]);
        }
        MaxTree { leaves, nodes }
    }

    /// Pushes, in order, the indices in `lo..hi` whose value is at least `min`.
    fn at_least(&self, lo: usize, hi: usize, min: Ns, out: &mut Vec<usize>) {
        if lo < hi {
            self.descend(1, 0, self.leaves, lo, hi, min, out);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn descend(
        &self,
        node: usize,
        from: usize,
        to: usize,
        lo: usize,
        hi: usize,
        min: Ns,
        out: &mut Vec<usize>,
    ) {
        if to <= lo || from >= hi || self.nodes[node] < min {
            return;
        }
        if to - from == 1 {
            out.push(from);
            return;
        }
        let mid = from + (to - from) / 2;
        self.descend(2 * node, from, mid, lo, hi, min, out);
        self.descend(2 * node + 1, mid, to, lo, hi, min, out);
    }
}

/// Counter samples of a counter lane, in time order.
#[derive(Debug, Default)]
struct Samples {
    ts: Vec<Ns>,
    values: Vec<f64>,
}

/// Instants of a lane, in time order.
#[derive(Debug, Default)]
struct Instants {
    ts: Vec<Ns>,
    index: Vec<u32>,
}

/// The index of a whole trace: its lanes, rows and the lookups event details need.
#[derive(Debug)]
pub struct Timeline {
    lanes: Vec<Lane>,
    rows: Vec<Vec<Row>>,
    samples: Vec<Samples>,
    instants: Vec<Instants>,
    /// For each span: its row in its lane.
    row_of: Vec<u16>,
    /// Every span, in order of start (ties by id): the order searches walk.
    by_start: Vec<u32>,
    start_ns: Ns,
    end_ns: Ns,
}

/// An exact span in an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExactSpan {
    pub span: SpanId,
    pub start: Ns,
    pub end: Ns,
}

/// Short spans summed into one bucket of a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    /// The bucket's index, `0..px`.
    pub index: u32,
    pub count: u64,
    /// Summed durations of the spans (not clipped to the bucket).
    pub busy_ns: i128,
}

/// What one row shows in a window.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RowView {
    pub row: u32,
    pub exact: Vec<ExactSpan>,
    pub buckets: Vec<Bucket>,
}

/// Counter samples in a window: the samples themselves when there are at most `px` of them
/// (with the sample in force at `t0`), else per bucket min, max and last value.
#[derive(Debug, Clone, PartialEq)]
pub enum CounterView {
    Exact(Vec<(Ns, f64)>),
    Buckets(Vec<(u32, f64, f64, f64)>),
}

/// Instants in a window: exact when at most `px`, else counts per bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InstantView {
    Exact(Vec<(Ns, u32)>),
    Buckets(Vec<(u32, u64)>),
}

/// What a lane shows in a window.
#[derive(Debug, Clone, PartialEq)]
pub struct LaneView {
    pub lane: u32,
    pub rows: Vec<RowView>,
    pub counters: Option<CounterView>,
    pub instants: Option<InstantView>,
}

/// A window asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub t0: Ns,
    pub t1: Ns,
    pub px: u32,
}

impl Window {
    /// The bucket width: at least 1 ns.
    pub fn bucket_ns(&self) -> Ns {
        let span = (self.t1 - self.t0).max(1);
        let px = Ns::from(self.px.max(1));
        (span + px - 1) / px
    }

    fn bucket_of(&self, t: Ns) -> u32 {
        let at = (t.max(self.t0) - self.t0) / self.bucket_ns();
        (at.min(Ns::from(self.px.max(1)) - 1)) as u32
    }
}

impl Timeline {
    /// Indexes `trace`: lanes in display order (rank, then processes and their threads, then
    /// devices and their queues, counters, the rest).
    pub fn new(trace: &Trace) -> Timeline {
        let tracks = trace.tracks.len();
        let mut spans_of: Vec<Vec<u32>> = vec![Vec::new(); tracks];
        for (i, s) in trace.spans.iter().enumerate() {
            spans_of[s.track.0 as usize].push(i as u32);
        }
        let mut row_of = vec![0u16; trace.spans.len()];
        let mut rows = Vec::with_capacity(tracks);
        for ids in &mut spans_of {
            rows.push(lay_out(trace, ids, &mut row_of));
        }
        let mut samples: Vec<Samples> = (0..tracks).map(|_| Samples::default()).collect();
        for c in &trace.counters {
            let s = &mut samples[c.track.0 as usize];
            s.ts.push(c.ts);
            s.values.push(c.value);
        }
        for s in &mut samples {
            if !s.ts.windows(2).all(|w| w[0] <= w[1]) {
                let mut pairs: Vec<(Ns, f64)> =
                    s.ts.iter().copied().zip(s.values.iter().copied()).collect();
                pairs.sort_by_key(|p| p.0);
                (s.ts, s.values) = pairs.into_iter().unzip();
            }
        }
        let mut instants: Vec<Instants> = (0..tracks).map(|_| Instants::default()).collect();
        let mut order: Vec<u32> = (0..trace.instants.len() as u32).collect();
        order.sort_by_key(|&i| trace.instants[i as usize].ts);
        for i in order {
            let inst = &trace.instants[i as usize];
            let lane = &mut instants[inst.track.0 as usize];
            lane.ts.push(inst.ts);
            lane.index.push(i);
        }
        let mut by_start: Vec<u32> = (0..trace.spans.len() as u32).collect();
        by_start.sort_by_key(|&i| (trace.spans[i as usize].start, i));

        let (mut start_ns, mut end_ns) = (Ns::MAX, Ns::MIN);
        let times = trace.spans.iter().map(|s| (s.start, s.end));
        let points = (trace.instants.iter().map(|i| i.ts))
            .chain(trace.counters.iter().map(|c| c.ts))
            .map(|t| (t, t));
        for (a, b) in times.chain(points) {
            start_ns = start_ns.min(a);
            end_ns = end_ns.max(b);
        }
        if start_ns > end_ns {
            (start_ns, end_ns) = (0, 0);
        }

        let mut lanes: Vec<Lane> = (0..tracks)
            .map(|t| {
                describe(
                    trace,
                    t,
                    rows[t].len(),
                    spans_of[t].len() + samples[t].ts.len() + instants[t].ts.len(),
                )
            })
            .collect();
        let mut order: Vec<usize> = (0..tracks).collect();
        order.sort_by_key(|&t| display_key(trace, t));
        lanes = order.iter().map(|&t| lanes[t].clone()).collect();
        Timeline {
            lanes,
            rows,
            samples,
            instants,
            row_of,
            by_start,
            start_ns,
            end_ns,
        }
    }

    /// Puts a baseline's lanes (the trace's ranks from index `first_baseline_rank` on, as
    /// [`crate::Api::with_baseline`] joins them) under the run's lanes of the same rank: rank
    /// by rank, the run's then the baseline's, each in [`Timeline::new`]'s order.
    pub fn stack_baseline(&mut self, trace: &Trace, first_baseline_rank: u32) {
        self.lanes.sort_by_key(|lane| {
            let (rank, class, a, sort, b, t) = display_key(trace, lane.id as usize);
            let side = u32::from(rank >= first_baseline_rank);
            let in_side = if side == 1 {
                rank - first_baseline_rank
            } else {
                rank
            };
            (in_side, side, class, a, sort, b, t)
        });
    }

    /// Records each lane's move onto the job's clock (`shifts` indexed by track, as
    /// [`crate::overlays::job_clock_shifts`] gives them; nothing when empty).
    pub fn set_clock_shifts(&mut self, shifts: &[Ns]) {
        for lane in &mut self.lanes {
            lane.clock_shift_ns = shifts.get(lane.id as usize).copied().unwrap_or(0);
        }
    }

    /// The lanes, in display order.
    pub fn lanes(&self) -> &[Lane] {
        &self.lanes
    }

    /// The first and last time of any event.
    pub fn extent(&self) -> (Ns, Ns) {
        (self.start_ns, self.end_ns)
    }

    /// How many tracks (lane ids run `0..lane_count()`).
    pub fn lane_count(&self) -> usize {
        self.rows.len()
    }

    /// The row a span is drawn on.
    pub fn row_of(&self, span: SpanId) -> u32 {
        u32::from(self.row_of[span.0 as usize])
    }

    /// Every span in order of start.
    pub fn spans_by_start(&self) -> &[u32] {
        &self.by_start
    }

    /// What lane `lane` shows in `window`.
    pub fn view(&self, lane: u32, window: Window) -> LaneView {
        let t = lane as usize;
        let mut rows = Vec::new();
        for (r, row) in self.rows[t].iter().enumerate() {
            let v = view_row(row, r as u32, window);
            if !v.exact.is_empty() || !v.buckets.is_empty() {
                rows.push(v);
            }
        }
        let counters = (!self.samples[t].ts.is_empty())
            .then(|| view_samples(&self.samples[t], window))
            .filter(|v| !matches!(v, CounterView::Exact(e) if e.is_empty()));
        let instants = (!self.instants[t].ts.is_empty())
            .then(|| view_instants(&self.instants[t], window))
            .filter(|v| match v {
                InstantView::Exact(e) => !e.is_empty(),
                InstantView::Buckets(b) => !b.is_empty(),
            });
        LaneView {
            lane,
            rows,
            counters,
            instants,
        }
    }

    /// The spans of lane `lane` that overlap `[t0, t1)`, row by row (for aggregates).
    pub fn overlapping(&self, lane: u32, t0: Ns, t1: Ns, mut each: impl FnMut(u32, Ns, Ns)) {
        for row in &self.rows[lane as usize] {
            let (lo, hi) = candidates(row, t0, t1);
            for i in lo..hi {
                if overlaps(row.starts[i], row.ends[i], t0, t1) {
                    each(row.spans[i], row.starts[i], row.ends[i]);
                }
            }
        }
    }

    /// The spans on the rows above `span`'s in its lane that enclose it, outermost first: the
    /// call chain it belongs to.
    pub fn enclosing(&self, trace: &Trace, span: SpanId) -> Vec<u32> {
        let s = &trace.spans[span.0 as usize];
        let row = self.row_of(span) as usize;
        let mut chain = Vec::new();
        for r in &self.rows[s.track.0 as usize][..row] {
            if r.overlapping {
                continue;
            }
            let i = r.starts.partition_point(|&st| st <= s.start);
            if i > 0 && r.ends[i - 1] >= s.end {
                chain.push(r.spans[i - 1]);
            }
        }
        chain
    }
}

/// Places the spans `ids` of one track on rows (see the module docs).
fn lay_out(trace: &Trace, ids: &mut [u32], row_of: &mut [u16]) -> Vec<Row> {
    ids.sort_by_key(|&i| {
        let s = &trace.spans[i as usize];
        (s.start, std::cmp::Reverse(s.end), s.same_extent_order(), i)
    });
    let mut last_end: Vec<Ns> = Vec::new();
    let mut members: Vec<Vec<u32>> = Vec::new();
    for &i in ids.iter() {
        let s = &trace.spans[i as usize];
        let free = last_end
            .iter()
            .take(MAX_ROWS - 1)
            .position(|&e| e <= s.start);
        let r = match free {
            Some(r) => r,
            None if last_end.len() < MAX_ROWS => {
                last_end.push(Ns::MIN);
                members.push(Vec::new());
                last_end.len() - 1
            }
            None => MAX_ROWS - 1,
        };
        last_end[r] = last_end[r].max(s.end);
        members[r].push(i);
        row_of[i as usize] = r as u16;
    }
    let overflow = members.len() == MAX_ROWS;
    members
        .into_iter()
        .enumerate()
        .map(|(r, spans)| {
            let starts: Vec<Ns> = spans
                .iter()
                .map(|&i| trace.spans[i as usize].start)
                .collect();
            let ends: Vec<Ns> = spans.iter().map(|&i| trace.spans[i as usize].end).collect();
            let overlapping = overflow && r == MAX_ROWS - 1;
            let mut busy = Vec::new();
            if !overlapping {
                busy.reserve(spans.len() + 1);
                let mut sum: Ns = 0;
                busy.push(0);
                for (s, e) in starts.iter().zip(&ends) {
                    sum = sum.saturating_add(e - s);
                    busy.push(sum);
                }
            }
            let longest = MaxTree::new(starts.iter().zip(&ends).map(|(s, e)| e - s));
            Row {
                starts,
                ends,
                spans,
                busy,
                longest,
                overlapping,
            }
        })
        .collect()
}

/// The index range of a row's spans that may overlap `[t0, t1)`: start before `t1`, and (in a
/// row of disjoint spans) end after `t0`. Zero-length spans at `t0` count as inside.
fn candidates(row: &Row, t0: Ns, t1: Ns) -> (usize, usize) {
    let hi = row.starts.partition_point(|&s| s < t1);
    if row.overlapping {
        return (0, hi);
    }
    // Ends are sorted in a row of disjoint spans. Of the spans ending at t0, only one can have
    // begun before it (it comes first); zero-length spans at t0 are inside.
    let mut lo = row.ends.partition_point(|&e| e < t0);
    if lo < hi && row.ends[lo] == t0 && row.starts[lo] < t0 {
        lo += 1;
    }
    (lo.min(hi), hi)
}

fn overlaps(start: Ns, end: Ns, t0: Ns, t1: Ns) -> bool {
    start < t1 && (end > t0 || (start == end && start >= t0))
}

fn view_row(row: &Row, r: u32, window: Window) -> RowView {
    let Window { t0, t1, px } = window;
    let w = window.bucket_ns();
    let (lo, hi) = candidates(row, t0, t1);
    let mut view = RowView {
        row: r,
        ..RowView::default()
    };
    if lo >= hi {
        return view;
    }
    if row.overlapping {
        // The overflow row: a scan with the overlap test.
        let mut buckets: std::collections::BTreeMap<u32, (u64, i128)> = Default::default();
        for i in lo..hi {
            let (s, e) = (row.starts[i], row.ends[i]);
            if !overlaps(s, e, t0, t1) {
                continue;
            }
            if e - s >= w {
                view.exact.push(ExactSpan {
                    span: SpanId(row.spans[i]),
                    start: s,
                    end: e,
                });
            } else {
                let b = buckets.entry(window.bucket_of(s)).or_default();
                b.0 += 1;
                b.1 += i128::from(e - s);
            }
        }
        view.buckets = buckets
            .into_iter()
            .map(|(index, (count, busy_ns))| Bucket {
                index,
                count,
                busy_ns,
            })
            .collect();
        return view;
    }
    // In a row of disjoint spans every candidate overlaps the window, except a zero-length
    // span ending exactly at t0 that began before it (impossible: it would start at t0).
    let mut long = Vec::new();
    row.longest.at_least(lo, hi, w.max(1), &mut long);
    for &i in &long {
        view.exact.push(ExactSpan {
            span: SpanId(row.spans[i]),
            start: row.starts[i],
            end: row.ends[i],
        });
    }
    // Bucket boundaries as index positions: bucket k holds candidates starting in
    // [t0 + k w, t0 + (k + 1) w), bucket 0 also those starting before t0, the last also those
    // up to t1.
    // Bucket by bucket, jumping over empty ones: O(min(px, n) log n).
    let mut long_at = long.iter().peekable();
    let mut from = lo;
    let px = px.max(1);
    while from < hi {
        let k = window.bucket_of(row.starts[from]);
        let to = if k + 1 >= px {
            hi
        } else {
            let boundary = t0.saturating_add(w.saturating_mul(Ns::from(k + 1)));
            row.starts[from..hi].partition_point(|&s| s < boundary) + from
        };
        let mut count = (to - from) as u64;
        let mut busy = i128::from(row.busy[to] - row.busy[from]);
        while let Some(&&i) = long_at.peek() {
            if i >= to {
                break;
            }
            count -= 1;
            busy -= i128::from(row.ends[i] - row.starts[i]);
            long_at.next();
        }
        if count > 0 {
            view.buckets.push(Bucket {
                index: k,
                count,
                busy_ns: busy,
            });
        }
        from = to.max(from + 1);
    }
    view
}

fn view_samples(s: &Samples, window: Window) -> CounterView {
    let Window { t0, t1, px } = window;
    let lo = s.ts.partition_point(|&t| t < t0);
    let hi = s.ts.partition_point(|&t| t < t1);
    if hi - lo <= px as usize {
        let mut out = Vec::with_capacity(hi - lo + 1);
        if lo > 0 {
            // The value in force at t0.
            out.push((t0, s.values[lo - 1]));
        }
        out.extend((lo..hi).map(|i| (s.ts[i], s.values[i])));
        return CounterView::Exact(out);
    }
    let mut out: Vec<(u32, f64, f64, f64)> = Vec::new();
    for i in lo..hi {
        let b = window.bucket_of(s.ts[i]);
        let v = s.values[i];
        match out.last_mut() {
            Some(last) if last.0 == b => {
                last.1 = last.1.min(v);
                last.2 = last.2.max(v);
                last.3 = v;
            }
            _ => out.push((b, v, v, v)),
        }
    }
    CounterView::Buckets(out)
}

fn view_instants(s: &Instants, window: Window) -> InstantView {
    let Window { t0, t1, px } = window;
    let lo = s.ts.partition_point(|&t| t < t0);
    let hi = s.ts.partition_point(|&t| t < t1);
    if hi - lo <= px as usize {
        return InstantView::Exact((lo..hi).map(|i| (s.ts[i], s.index[i])).collect());
    }
    let mut out: Vec<(u32, u64)> = Vec::new();
    for i in lo..hi {
        let b = window.bucket_of(s.ts[i]);
        match out.last_mut() {
            Some(last) if last.0 == b => last.1 += 1,
            _ => out.push((b, 1)),
        }
    }
    InstantView::Buckets(out)
}

/// The sort key of a track in the lane list.
fn display_key(trace: &Trace, t: usize) -> (u32, u8, i64, i64, i64, usize) {
    let track = &trace.tracks[t];
    let sort = track.sort_index.unwrap_or(i64::MAX);
    let (class, a, b) = match &track.kind {
        // The copies of a graph's captured ops: after the process's own threads, under the
        // thread whose launch replays them.
        TrackKind::Thread { pid, .. } if strato_trace::names::is_graph_capture_track(track) => {
            return (track.rank.0, 0, *pid, i64::MAX, i64::MAX, t)
        }
        TrackKind::Thread { pid, tid } => (0, *pid, *tid),
        TrackKind::DeviceQueue { device, queue } => (1, *device, *queue),
        TrackKind::Counter { pid, device, .. } => {
            (2, pid.or(*device).unwrap_or(i64::MAX), i64::MAX)
        }
        TrackKind::Custom { .. } => (3, 0, 0),
    };
    (track.rank.0, class, a, sort, b, t)
}

/// The lane of track `t`.
fn describe(trace: &Trace, t: usize, rows: usize, events: usize) -> Lane {
    let track = &trace.tracks[t];
    let rank = trace.ranks.get(track.rank.0 as usize).and_then(|r| r.rank);
    let process_name = |pid: i64| {
        trace
            .processes
            .iter()
            .find(|p| p.rank == track.rank && p.pid == pid)
            .and_then(|p| p.name.clone())
    };
    let (kind, group, name) = match &track.kind {
        TrackKind::Thread { pid, tid } => {
            let group = match process_name(*pid) {
                Some(n) => format!("pid {pid} {n}"),
                None => format!("pid {pid}"),
            };
            let name = match &track.name {
                Some(n) if n.contains(&tid.to_string()) => n.clone(),
                Some(n) => format!("{n} ({tid})"),
                None => format!("thread {tid}"),
            };
            ("thread", group, name)
        }
        TrackKind::DeviceQueue { device, queue } => {
            let name = track
                .name
                .clone()
                .unwrap_or_else(|| format!("stream {queue}"));
            ("device", format!("device {device}"), name)
        }
        TrackKind::Counter {
            pid,
            device,
            name,
            unit,
        } => {
            let group = match (pid, device) {
                (_, Some(d)) => format!("device {d}"),
                (Some(p), None) => format!("pid {p}"),
                (None, None) => "counters".to_string(),
            };
            let label = if unit.is_empty() {
                name.clone()
            } else {
                format!("{name} ({unit})")
            };
            ("counter", group, label)
        }
        TrackKind::Custom { group, name } => {
            let group = if group.is_empty() {
                "other tracks".to_string()
            } else {
                group.clone()
            };
            let name = if name.is_empty() {
                "(unnamed)".to_string()
            } else {
                name.clone()
            };
            ("custom", group, name)
        }
    };
    Lane {
        id: t as u32,
        rank_index: track.rank.0,
        rank,
        kind,
        group,
        name,
        rows: rows as u32,
        events: events as u64,
        clock_shift_ns: 0,
    }
}

#[cfg(test)]
mod tests;
