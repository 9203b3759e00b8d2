//! Critical path: the longest chain of dependencies through CPU operations, runtime calls
//! (launches, synchronisations), device kernels and copies, stream order, synchronisation
//! edges and, across ranks, collectives — what the end of each rank's work waited on, and
//! what that chain is made of.
//!
//! This module owns the dependency graph and the longest-path search; presenters only read
//! [`CriticalPathReport`]. The method follows Holistic Trace Analysis (HTA 0.5)'s critical
//! path analysis, written anew (see `docs/analyses/critical-path.md`):
//!
//! - every included span gives two nodes, its start and its end (times in ns);
//! - **CPU**: on each thread, the spans of the framework and runtime levels (`Backend`,
//!   `Simulator`, `Library`, `AcceleratorApi`; zero-length ones left out) are walked in call
//!   order: an edge from the last node to the next start or end, weighted by the time
//!   between them (the CPU was running that op), except the inside of a blocking runtime call
//!   ([`BLOCKING_CALLS`]), which weighs 0 (the CPU waited). Consecutive top-level ops are linked
//!   by a 0-weight edge (the thread did something untraced in between);
//! - **device**: each kernel/copy/set is an edge start -> end weighted by its duration.
//!   Kernels of a stream are linked in stream order: from the launching call's start to the
//!   kernel's start (launch delay, weighted) when the stream was empty when it was launched,
//!   else from the previous kernel's end (weighted by the gap);
//! - **synchronisation** (0-weight edges, the wait is not work): a stream sync from the last
//!   kernel of that stream to the end of the runtime call, a device/context sync from the last
//!   kernel of every stream of the device, an event sync from the kernel launched before the
//!   recorded event (`wait_on_cuda_event_record_corr_id`) to the end of the runtime call, and a
//!   stream wait event from that kernel to the next kernel launched on the waiting stream;
//! - **collectives across ranks** (optional [`CollectiveInstance`]s): a collective kernel can
//!   only finish after every rank's kernel has started. Each instance gets an "all arrived"
//!   node at the last start; each member kernel is `start -> all arrived` (0 weight: waiting
//!   for peers) and `all arrived -> end` (weighted: transfer).
//!
//! The critical path of a rank is the path of largest total weight ending on one of the
//! rank's nodes (ties: the first edge added, the first node in topological order, as HTA's
//! networkx search does). Weights count work, so the path prefers chains that worked over
//! chains that waited; its **length** is the time it covers: every edge of the path covers
//! `[from, to]`, and [`RankCriticalPath::by_kind`] splits that time by [`PathKind`], adding up
//! to [`RankCriticalPath::length_ns`] exactly (edges that go back in time, from clock jitter
//! between nested spans, cover nothing and are counted in `backward_edges`).
//!
//! Windows: [`critical_path`] takes the whole trace (every included span of the rank);
//! [`critical_path_steps`] one `ProfilerStep#N` at a time (the step's CPU spans and the device
//! ops they launched, on every rank with that step), and [`compose`] splits a path inside a
//! window so that its kinds plus the time before and after the path add up to the window.

use std::collections::BTreeMap;

use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;
use strato_trace::{Level, Ns, RankId, SpanId, Trace, TrackId, TrackKind};

/// Runtime calls during which the CPU waits for the device (their inside weighs 0).
pub const BLOCKING_CALLS: &[&str] = &[
    "cudaDeviceSynchronize",
    "cudaStreamSynchronize",
    "cudaEventQuery",
    "cudaEventSynchronize",
    "cudaMemcpy",
    "cudaMemcpyAsync",
    "hipDeviceSynchronize",
    "hipStreamSynchronize",
    "hipEventSynchronize",
    "hipMemcpy",
    "hipMemcpyAsync",
];

/// What a stretch of the critical path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PathKind {
    /// CPU time in a framework (or other library) operation.
    CpuOp,
    /// CPU time in a runtime call, and the delay from a launch call to its kernel's start.
    Launch,
    /// A device kernel running (for a collective: its transfer, after the last peer arrived).
    Kernel,
    /// A device copy or memset running.
    Copy,
    /// Waiting for the device: inside a blocking runtime call, or from a kernel's end to the
    /// end of the call that waited for it.
    SyncWait,
    /// A collective kernel waiting for its last peer to arrive.
    CollectiveWait,
    /// Nothing traced: between top-level CPU ops, or between kernels on a stream.
    Idle,
}

impl PathKind {
    /// Every kind, in output order.
    pub const ALL: [PathKind; 7] = [
        PathKind::CpuOp,
        PathKind::Launch,
        PathKind::Kernel,
        PathKind::Copy,
        PathKind::SyncWait,
        PathKind::CollectiveWait,
        PathKind::Idle,
    ];

    /// The JSON name (`"cpu_op"`).
    pub fn as_str(self) -> &'static str {
        match self {
            PathKind::CpuOp => "cpu_op",
            PathKind::Launch => "launch",
            PathKind::Kernel => "kernel",
            PathKind::Copy => "copy",
            PathKind::SyncWait => "sync_wait",
            PathKind::CollectiveWait => "collective_wait",
            PathKind::Idle => "idle",
        }
    }
}

/// One rank's kernel of a collective instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CollectiveMember {
    pub rank: RankId,
    /// The device span of the rank's collective kernel.
    pub span: SpanId,
}

/// One collective instance matched across ranks: the kernel of each rank that took part.
/// Instances with fewer than two members in the trace add no edge.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CollectiveInstance {
    pub members: Vec<CollectiveMember>,
}

/// Options of [`critical_path`].
#[derive(Debug, Clone, Default)]
pub struct CriticalPathOptions {
    /// Collectives matched across ranks (cross-rank edges); `None`: ranks are independent.
    pub collectives: Option<Vec<CollectiveInstance>>,
    /// Per rank (indexed by [`RankId`]), what is added to its times to put them on the job's
    /// reference clock: the clock alignment of [`crate::distributed::collectives`] (ranks beyond
    /// the list: 0). Every cross-rank edge compares aligned times, and every time the result gives
    /// (path, events, segments, windows) is on that clock.
    pub clock_shift: Vec<Ns>,
}

impl CriticalPathOptions {
    /// The cross-rank inputs exactly as `strato collectives` computes them: its matched
    /// instances (with two or more ranks) and its clock alignment, so that every cross-rank
    /// analysis sees the same job.
    pub fn from_collectives(
        trace: &Trace,
        report: &crate::distributed::collectives::CollectivesReport,
    ) -> CriticalPathOptions {
        if trace.ranks.len() < 2 {
            return CriticalPathOptions::default();
        }
        CriticalPathOptions {
            collectives: Some(instances_from_matched(&report.instances)),
            clock_shift: (0..trace.ranks.len() as u32)
                .map(|r| report.clock.shift_of(RankId(r)))
                .collect(),
        }
    }

    /// Matches the collectives of `trace` and aligns its clocks as `strato collectives` does
    /// (without its straggler and size analyses): [`CriticalPathOptions::from_collectives`]'s
    /// inputs, for a caller that has no collectives report.
    pub fn matched(trace: &Trace) -> CriticalPathOptions {
        if trace.ranks.len() < 2 {
            return CriticalPathOptions::default();
        }
        let ranks = crate::distributed::collectives::rank_summaries(trace);
        let mut instances = crate::distributed::collectives::match_collectives(&ranks);
        let clock = crate::distributed::collectives::measure(&ranks, &mut instances);
        CriticalPathOptions {
            collectives: Some(instances_from_matched(&instances)),
            clock_shift: (0..trace.ranks.len() as u32)
                .map(|r| clock.shift_of(RankId(r)))
                .collect(),
        }
    }

    /// The shift of `rank` onto the reference clock.
    pub fn shift_of(&self, rank: RankId) -> Ns {
        self.clock_shift.get(rank.0 as usize).copied().unwrap_or(0)
    }
}

/// An event (span) with a node on the critical path.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PathEvent {
    #[serde(skip)]
    pub span: SpanId,
    /// The rank of the event (a path can cross ranks through collectives).
    pub rank: i64,
    pub name: String,
    pub start_ns: Ns,
    pub end_ns: Ns,
    pub kind: PathKind,
}

/// One edge of the critical path, in path order: `[from_ns, to_ns]` on the given tracks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PathSegment {
    pub kind: PathKind,
    pub from_ns: Ns,
    pub to_ns: Ns,
    /// Weight in the search (work; 0 for waits and dependencies).
    pub weight_ns: Ns,
    #[serde(skip)]
    pub from_track: Option<TrackId>,
    #[serde(skip)]
    pub to_track: Option<TrackId>,
    /// True for edges between events (launch, sync, stream order, collective), false for the
    /// time inside one event or call stack.
    pub dependency: bool,
    /// The event whose time this is (an op's inside, a kernel running or waiting for its
    /// peers); `None` for launch delays, synchronisation waits, stream gaps and idle time.
    #[serde(skip)]
    pub span: Option<SpanId>,
}

/// The critical path ending on one rank.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankCriticalPath {
    /// The job rank when the source says, else the rank's position in the input.
    pub rank: i64,
    pub source: String,
    /// First and last node of the path (`None` when the rank has no included span).
    pub start_ns: Option<Ns>,
    pub end_ns: Option<Ns>,
    /// Time covered by the path's edges = the sum of `by_kind`.
    pub length_ns: Ns,
    /// The path's weight: the work on it (the quantity the search maximises).
    pub work_ns: Ns,
    /// Time per kind; every kind present (0 when absent), summing to `length_ns`.
    pub by_kind: BTreeMap<PathKind, Ns>,
    /// Events with a node on the path, by start.
    pub events: Vec<PathEvent>,
    pub segments: Vec<PathSegment>,
    /// Path edges whose end is before their start (clock jitter): they cover no time.
    pub backward_edges: usize,
    pub note: Option<String>,
}

/// Size of the dependency graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
pub struct GraphStats {
    pub nodes: usize,
    pub edges: usize,
    /// Edges whose time difference was negative (weight set to 0).
    pub negative_edges: usize,
    /// Collective instances that added cross-rank edges.
    pub collectives: usize,
}

/// The critical path of every rank.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CriticalPathReport {
    pub ranks: Vec<RankCriticalPath>,
    pub graph: GraphStats,
    /// Per rank, the shift that put its times on the reference clock
    /// ([`CriticalPathOptions::clock_shift`]): subtract it to find an event in its file.
    #[serde(skip)]
    pub clock_shift: Vec<Ns>,
}

/// Why no critical path could be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CriticalPathError {
    #[error("the dependency graph has a cycle through {nodes} nodes (a synchronisation or collective edge contradicts the timeline)")]
    Cycle { nodes: usize },
}

/// A point in time of one span (its start or end) or a collective's "all arrived" point.
#[derive(Debug, Clone, Copy)]
struct Node {
    ts: Ns,
    span: Option<SpanId>,
    rank: RankId,
    track: Option<TrackId>,
}

#[derive(Debug, Clone, Copy)]
struct Edge {
    from: u32,
    to: u32,
    weight: Ns,
    kind: PathKind,
    dependency: bool,
    /// The event whose time the edge is (an op's inside, a kernel's transfer or wait); `None`
    /// for the dependencies between events (launch delay, sync, stream gap, idle).
    owner: Option<SpanId>,
}

/// The graph under construction: nodes in creation order, renumbered by time before the
/// search.
#[derive(Default)]
struct Graph {
    nodes: Vec<Node>,
    edges: Vec<Edge>,
    /// Span -> (start node, end node).
    span_nodes: FxHashMap<SpanId, (u32, u32)>,
    negative: usize,
    /// Per rank, the shift onto the reference clock ([`CriticalPathOptions::clock_shift`]).
    clock_shift: Vec<Ns>,
}

impl Graph {
    fn new(options: &CriticalPathOptions) -> Graph {
        Graph {
            clock_shift: options.clock_shift.clone(),
            ..Graph::default()
        }
    }

    fn shift_of(&self, rank: RankId) -> Ns {
        self.clock_shift.get(rank.0 as usize).copied().unwrap_or(0)
    }

    fn add_span(&mut self, trace: &Trace, id: SpanId, rank: RankId) -> (u32, u32) {
        let span = &trace.spans[id.0 as usize];
        let start = self.nodes.len() as u32;
        let shift = self.shift_of(rank);
        for ts in [span.start, span.end] {
            self.nodes.push(Node {
                ts: ts.saturating_add(shift),
                span: Some(id),
                rank,
                track: Some(span.track),
            });
        }
        self.span_nodes.insert(id, (start, start + 1));
        (start, start + 1)
    }

    /// Adds an edge; `weighted` edges weigh the time between their nodes (never below 0).
    fn edge(&mut self, from: u32, to: u32, kind: PathKind, weighted: bool, dependency: bool) {
        self.owned_edge(from, to, kind, weighted, dependency, None);
    }

    /// [`Graph::edge`] whose time belongs to the event `owner`.
    fn owned_edge(
        &mut self,
        from: u32,
        to: u32,
        kind: PathKind,
        weighted: bool,
        dependency: bool,
        owner: Option<SpanId>,
    ) {
        if from == to {
            return;
        }
        let dt = self.nodes[to as usize].ts - self.nodes[from as usize].ts;
        if dt < 0 {
            self.negative += 1;
        }
        self.edges.push(Edge {
            from,
            to,
            weight: if weighted { dt.max(0) } else { 0 },
            kind,
            dependency,
            owner,
        });
    }
}

/// The included CPU levels.
fn is_cpu_level(level: Level) -> bool {
    matches!(
        level,
        Level::Backend | Level::Simulator | Level::Library | Level::AcceleratorApi
    )
}

fn event_kind(trace: &Trace, id: SpanId) -> PathKind {
    let span = &trace.spans[id.0 as usize];
    match span.level {
        Level::DeviceKernel => PathKind::Kernel,
        Level::DeviceCopy | Level::DeviceSet => PathKind::Copy,
        Level::DeviceSync => PathKind::SyncWait,
        Level::AcceleratorApi => {
            if BLOCKING_CALLS.contains(&trace.str(span.name)) {
                PathKind::SyncWait
            } else {
                PathKind::Launch
            }
        }
        _ => PathKind::CpuOp,
    }
}

/// Reads an integer field of a span's args (`None` when absent or not an integer).
fn arg_i64(trace: &Trace, id: SpanId, key: &str) -> Option<i64> {
    let text = trace.args_text(trace.spans[id.0 as usize].args)?;
    if !text.contains(key) {
        return None;
    }
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    value.get(key)?.as_i64()
}

/// Computes the critical path of every rank of `trace`.
pub fn critical_path(
    trace: &Trace,
    options: &CriticalPathOptions,
) -> Result<CriticalPathReport, CriticalPathError> {
    let mut graph = Graph::new(options);
    let index = TraceIndex::new(trace);
    let by_rank = spans_by_rank(trace);
    for (r, spans) in by_rank.iter().enumerate() {
        build_rank(trace, &index, RankId(r as u32), spans, &mut graph);
    }
    drop(by_rank);
    let members = MemberIndex::new(options);
    let collectives = add_collectives(options, &members, &mut graph);
    let stats = GraphStats {
        nodes: graph.nodes.len(),
        edges: graph.edges.len(),
        negative_edges: graph.negative,
        collectives,
    };
    let search = longest_paths(&graph)?;
    let ends = path_ends(trace, &graph, &search);
    let ranks = (0..trace.ranks.len())
        .map(|r| rank_path(trace, RankId(r as u32), &graph, &search, ends[r]))
        .collect();
    Ok(CriticalPathReport {
        ranks,
        graph: stats,
        clock_shift: options.clock_shift.clone(),
    })
}

/// Adds the nodes and edges of one rank from `spans`, the rank's spans that take part (a step
/// window's; every one of the rank for the whole trace), each category in trace order. Its
/// work is linear in `spans` (plus the rank's launches when it has stream-wait events).
fn build_rank(
    trace: &Trace,
    index: &TraceIndex,
    rank: RankId,
    spans: &[SpanId],
    graph: &mut Graph,
) {
    let mut threads: FxHashMap<TrackId, Vec<SpanId>> = FxHashMap::default();
    let mut device: Vec<SpanId> = Vec::new();
    let mut syncs: Vec<SpanId> = Vec::new();
    for &id in spans {
        let span = &trace.spans[id.0 as usize];
        let track = trace.track(span.track);
        debug_assert_eq!(track.rank, rank);
        match track.kind {
            TrackKind::Thread { .. } if is_cpu_level(span.level) && span.end > span.start => {
                threads.entry(span.track).or_default().push(id);
            }
            TrackKind::DeviceQueue { queue, .. } => match span.level {
                Level::DeviceSync => syncs.push(id),
                Level::DeviceKernel | Level::DeviceCopy | Level::DeviceSet if queue != -1 => {
                    device.push(id)
                }
                _ => {}
            },
            _ => {}
        }
    }
    // Nodes: every CPU span, every device op.
    let mut thread_ids: Vec<TrackId> = threads.keys().copied().collect();
    thread_ids.sort_unstable();
    for &t in &thread_ids {
        for &id in &threads[&t] {
            graph.add_span(trace, id, rank);
        }
    }
    for &id in &device {
        graph.add_span(trace, id, rank);
    }
    for &t in &thread_ids {
        cpu_chain(trace, &threads[&t], graph);
    }
    // The rank's runtime calls in the graph, by correlation (the first in trace order when
    // two share one).
    let mut call_by_corr: FxHashMap<u64, SpanId> = FxHashMap::default();
    for &t in &thread_ids {
        for &id in &threads[&t] {
            let s = &trace.spans[id.0 as usize];
            if s.level == Level::AcceleratorApi {
                if let Some(c) = s.correlation {
                    call_by_corr
                        .entry(c)
                        .and_modify(|first| *first = SpanId(first.0.min(id.0)))
                        .or_insert(id);
                }
            }
        }
    }
    device_edges(trace, index, rank, &device, &syncs, &call_by_corr, graph);
}

/// The call-order chain of one thread (see the module docs).
fn cpu_chain(trace: &Trace, spans: &[SpanId], graph: &mut Graph) {
    let mut order: Vec<SpanId> = spans.to_vec();
    order.sort_by_key(|id| {
        let s = &trace.spans[id.0 as usize];
        (s.start, std::cmp::Reverse(s.end), id.0)
    });
    struct Walk {
        last: Option<u32>,
        last_top: Option<u32>,
        stack: Vec<SpanId>,
    }
    let mut walk = Walk {
        last: None,
        last_top: None,
        stack: Vec::new(),
    };
    // Kind of the time between `last` and the next node: the event the edge lies in.
    let inside_kind = |trace: &Trace, id: SpanId, zero: bool| -> PathKind {
        if zero {
            PathKind::SyncWait
        } else {
            match event_kind(trace, id) {
                PathKind::SyncWait => PathKind::Launch,
                k => k,
            }
        }
    };
    let exit = |walk: &mut Walk, graph: &mut Graph, id: SpanId| {
        let (_, end) = graph.span_nodes[&id];
        walk.stack.pop();
        if let Some(last) = walk.last {
            let blocking = BLOCKING_CALLS.contains(&trace.str(trace.spans[id.0 as usize].name));
            // Start -> end of one event, or end of a child -> end of its parent: the event
            // the edge ends in.
            graph.owned_edge(
                last,
                end,
                inside_kind(trace, id, blocking),
                !blocking,
                false,
                Some(id),
            );
        }
        if walk.stack.is_empty() {
            walk.last = None;
            walk.last_top = Some(end);
        } else {
            walk.last = Some(end);
        }
    };
    for &id in &order {
        let span = &trace.spans[id.0 as usize];
        while let Some(&top) = walk.stack.last() {
            let parent = &trace.spans[top.0 as usize];
            if span.start < parent.end && span.end <= parent.end {
                break;
            }
            exit(&mut walk, graph, top);
        }
        let (start, _) = graph.span_nodes[&id];
        if walk.stack.is_empty() {
            if let Some(prev) = walk.last_top {
                graph.edge(prev, start, PathKind::Idle, false, true);
            }
        }
        if let Some(last) = walk.last {
            // From a start (the parent's start) into a child, or from a sibling's end to the
            // next sibling's start: time in the parent.
            let parent = *walk
                .stack
                .last()
                .expect("a last node implies an open parent");
            graph.owned_edge(
                last,
                start,
                inside_kind(trace, parent, false),
                true,
                false,
                Some(parent),
            );
        }
        walk.last = Some(start);
        walk.stack.push(id);
    }
    while let Some(&top) = walk.stack.last() {
        exit(&mut walk, graph, top);
    }
}

/// Launch, stream-order and synchronisation edges of one rank's device work.
fn device_edges(
    trace: &Trace,
    index: &TraceIndex,
    rank: RankId,
    device: &[SpanId],
    syncs: &[SpanId],
    call_by_corr: &FxHashMap<u64, SpanId>,
    graph: &mut Graph,
) {
    let span = |id: SpanId| &trace.spans[id.0 as usize];
    let queue_of = |id: SpanId| match trace.track(span(id).track).kind {
        TrackKind::DeviceQueue { device, queue } => (device, queue),
        _ => (-1, -1),
    };
    // Kernel by correlation, and each launch's stream (for event synchronisation).
    let mut kernel_by_corr: FxHashMap<u64, SpanId> = FxHashMap::default();
    for &id in device {
        if let Some(c) = span(id).correlation {
            kernel_by_corr.entry(c).or_insert(id);
        }
    }
    let event_syncs = event_sync_sources(
        trace,
        &index.event_records[rank.0 as usize],
        syncs,
        &kernel_by_corr,
        call_by_corr,
    );
    // Pending GPU -> GPU dependencies: destination kernel -> source kernel.
    let mut kernel_wait: FxHashMap<SpanId, SpanId> = FxHashMap::default();
    let mut launches: Option<LaunchesByStreamAndThread> = None;
    for (sync, source) in &event_syncs {
        if let Some(dest) =
            stream_wait_destination(trace, *sync, &kernel_by_corr, call_by_corr, &mut launches)
        {
            kernel_wait.insert(dest, *source);
        }
    }
    let event_source: FxHashMap<SpanId, SpanId> = event_syncs.into_iter().collect();

    let mut items: Vec<(Ns, bool, SpanId)> = device
        .iter()
        .map(|&id| (span(id).start, false, id))
        .chain(syncs.iter().map(|&id| (span(id).end, true, id)))
        .collect();
    items.sort_by_key(|&(key, _, id)| (key, id.0));
    let mut last: FxHashMap<(i64, i64), u32> = FxHashMap::default();
    for (_, is_sync, id) in items {
        let (dev, queue) = queue_of(id);
        if is_sync {
            let name = trace.str(span(id).name);
            let call_end = span(id)
                .correlation
                .and_then(|c| call_by_corr.get(&c))
                .map(|call| graph.span_nodes[call].1);
            match name {
                "Context Sync" | "Device Sync" => {
                    if let Some(call_end) = call_end {
                        let mut ends: Vec<((i64, i64), u32)> = last
                            .iter()
                            .filter(|((d, _), _)| *d == dev)
                            .map(|(k, v)| (*k, *v))
                            .collect();
                        ends.sort_unstable();
                        for (_, end) in ends {
                            graph.edge(end, call_end, PathKind::SyncWait, false, true);
                        }
                    }
                }
                "Stream Sync" => {
                    if let (Some(call_end), Some(&end)) = (call_end, last.get(&(dev, queue))) {
                        graph.edge(end, call_end, PathKind::SyncWait, false, true);
                    }
                }
                "Event Sync" => {
                    if let (Some(call_end), Some(source)) = (call_end, event_source.get(&id)) {
                        if let Some(&(_, end)) = graph.span_nodes.get(source) {
                            graph.edge(end, call_end, PathKind::SyncWait, false, true);
                        }
                    }
                }
                _ => {}
            }
            continue;
        }
        let (start, end) = graph.span_nodes[&id];
        let kind = event_kind(trace, id);
        // The op's own edge is added by `add_collectives` for collective members; here for all
        // (collectives replace it later).
        graph.owned_edge(start, end, kind, true, false, Some(id));
        let mut waits_on: Option<u32> = None;
        if let Some(source) = kernel_wait.get(&id) {
            if let Some(&(_, source_end)) = graph.span_nodes.get(source) {
                graph.edge(source_end, start, PathKind::SyncWait, false, true);
                waits_on = Some(source_end);
            }
        }
        let previous = last.get(&(dev, queue)).copied();
        let launch = span(id).correlation.and_then(|c| call_by_corr.get(&c));
        let ts = |n: u32| graph.nodes[n as usize].ts;
        let launched_on_empty = launch.is_some_and(|&call| {
            let call_start = span(call).start;
            previous.is_none_or(|p| ts(p) < call_start)
                && waits_on.is_none_or(|w| ts(w) < call_start)
        });
        if launched_on_empty {
            let call_start = graph.span_nodes[launch.expect("checked above")].0;
            graph.edge(call_start, start, PathKind::Launch, true, true);
        } else if let Some(p) = previous {
            if waits_on.is_none_or(|w| ts(w) < ts(p)) {
                graph.edge(p, start, PathKind::Idle, true, true);
            }
        }
        last.insert((dev, queue), end);
    }
}

/// For each event sync / stream wait event with `wait_on_cuda_event_record_corr_id`: the
/// kernel launched last on the recorded stream before the event was recorded.
fn event_sync_sources(
    trace: &Trace,
    records: &FxHashMap<u64, Ns>,
    syncs: &[SpanId],
    kernel_by_corr: &FxHashMap<u64, SpanId>,
    call_by_corr: &FxHashMap<u64, SpanId>,
) -> Vec<(SpanId, SpanId)> {
    let span = |id: SpanId| &trace.spans[id.0 as usize];
    let wanted: Vec<(SpanId, i64, i64, u64)> = syncs
        .iter()
        .filter_map(|&id| {
            let record = arg_i64(trace, id, "wait_on_cuda_event_record_corr_id")?;
            let stream = arg_i64(trace, id, "wait_on_stream")?;
            if record < 0 || stream < 0 {
                return None;
            }
            let device = match trace.track(span(id).track).kind {
                TrackKind::DeviceQueue { device, .. } => device,
                _ => return None,
            };
            Some((id, device, stream, record as u64))
        })
        .collect();
    if wanted.is_empty() {
        return Vec::new();
    }
    // Launches per (device, stream), by the call's start.
    let mut launches: FxHashMap<(i64, i64), Vec<(Ns, SpanId)>> = FxHashMap::default();
    for (&c, &kernel) in kernel_by_corr {
        let Some(&call) = call_by_corr.get(&c) else {
            continue;
        };
        if let TrackKind::DeviceQueue { device, queue } = trace.track(span(kernel).track).kind {
            launches
                .entry((device, queue))
                .or_default()
                .push((span(call).start, kernel));
        }
    }
    for list in launches.values_mut() {
        list.sort_unstable_by_key(|&(ts, k)| (ts, k.0));
    }
    wanted
        .into_iter()
        .filter_map(|(id, device, stream, record)| {
            let recorded_at = *records.get(&record)?;
            let list = launches.get(&(device, stream))?;
            let before = list.partition_point(|&(ts, _)| ts <= recorded_at);
            let (_, kernel) = *list.get(before.checked_sub(1)?)?;
            Some((id, kernel))
        })
        .collect()
}

/// The launches of one rank's graph whose kernel ran on a stream, per (device, stream of the
/// kernel, thread of the launch call), sorted by the call's start: built once per rank graph,
/// when a stream wait event asks.
type LaunchesByStreamAndThread = FxHashMap<(i64, i64, TrackId), Vec<(Ns, SpanId)>>;

/// For a stream wait event: the next kernel launched on the waiting stream from the thread
/// that called `cudaStreamWaitEvent`, after that call.
fn stream_wait_destination(
    trace: &Trace,
    sync: SpanId,
    kernel_by_corr: &FxHashMap<u64, SpanId>,
    call_by_corr: &FxHashMap<u64, SpanId>,
    launches: &mut Option<LaunchesByStreamAndThread>,
) -> Option<SpanId> {
    let span = |id: SpanId| &trace.spans[id.0 as usize];
    if trace.str(span(sync).name) != "Stream Wait Event" {
        return None;
    }
    let TrackKind::DeviceQueue { device, queue } = trace.track(span(sync).track).kind else {
        return None;
    };
    let call = *call_by_corr.get(&span(sync).correlation?)?;
    let thread = span(call).track;
    let after = span(call).start;
    let launches = launches.get_or_insert_with(|| {
        let mut by: LaunchesByStreamAndThread = FxHashMap::default();
        for (c, &k) in kernel_by_corr {
            let Some(&launch) = call_by_corr.get(c) else {
                continue;
            };
            if let TrackKind::DeviceQueue { device, queue } = trace.track(span(k).track).kind {
                by.entry((device, queue, span(launch).track))
                    .or_default()
                    .push((span(launch).start, k));
            }
        }
        for list in by.values_mut() {
            list.sort_unstable_by_key(|&(ts, k)| (ts, k.0));
        }
        by
    });
    let list = launches.get(&(device, queue, thread))?;
    let first_after = list.partition_point(|&(ts, _)| ts <= after);
    list.get(first_after).map(|&(_, k)| k)
}

/// Which collective instances each member kernel belongs to (indices into
/// [`CriticalPathOptions::collectives`]): built once, so that each step's graph visits only the
/// instances with a member in it.
#[derive(Default)]
struct MemberIndex {
    instances_of: FxHashMap<SpanId, Vec<u32>>,
}

impl MemberIndex {
    fn new(options: &CriticalPathOptions) -> MemberIndex {
        let mut index = MemberIndex::default();
        for (i, instance) in options.collectives.iter().flatten().enumerate() {
            for m in &instance.members {
                let list = index.instances_of.entry(m.span).or_default();
                if list.last() != Some(&(i as u32)) {
                    list.push(i as u32);
                }
            }
        }
        index
    }

    /// The instances with a member among the graph's spans, in input order.
    fn in_graph(&self, graph: &Graph) -> Vec<u32> {
        let mut found: Vec<u32> = graph
            .span_nodes
            .keys()
            .filter_map(|id| self.instances_of.get(id))
            .flatten()
            .copied()
            .collect();
        found.sort_unstable();
        found.dedup();
        found
    }
}

/// Replaces the own edge of every collective member by `start -> all arrived -> end`.
fn add_collectives(
    options: &CriticalPathOptions,
    members: &MemberIndex,
    graph: &mut Graph,
) -> usize {
    let Some(instances) = &options.collectives else {
        return 0;
    };
    let mut used = 0;
    let mut replaced: FxHashSet<u32> = FxHashSet::default();
    for i in members.in_graph(graph) {
        let instance = &instances[i as usize];
        let members: Vec<(RankId, u32, u32)> = instance
            .members
            .iter()
            .filter_map(|m| {
                let &(s, e) = graph.span_nodes.get(&m.span)?;
                Some((m.rank, s, e))
            })
            .collect();
        if members.len() < 2 {
            continue;
        }
        let (last_rank, last_start) = members
            .iter()
            .map(|&(r, s, _)| (r, graph.nodes[s as usize].ts))
            .max_by_key(|&(r, ts)| (ts, std::cmp::Reverse(r)))
            .expect("two members");
        let late_track = members
            .iter()
            .find(|&&(r, s, _)| r == last_rank && graph.nodes[s as usize].ts == last_start)
            .and_then(|&(_, s, _)| graph.nodes[s as usize].track);
        let arrived = graph.nodes.len() as u32;
        graph.nodes.push(Node {
            ts: last_start,
            span: None,
            rank: last_rank,
            track: late_track,
        });
        for &(_, s, e) in &members {
            replaced.insert(s);
            let member = graph.nodes[s as usize].span;
            graph.owned_edge(s, arrived, PathKind::CollectiveWait, false, true, member);
            graph.owned_edge(arrived, e, PathKind::Kernel, true, false, member);
        }
        used += 1;
    }
    // The member kernels' own start -> end edges would let a path skip the wait.
    graph
        .edges
        .retain(|e| !(replaced.contains(&e.from) && e.to == e.from + 1 && !e.dependency));
    used
}

/// Longest-path search result: per node its best distance and the edge it came by.
struct Search {
    dist: Vec<Ns>,
    via: Vec<Option<u32>>,
    /// Topological position of each node.
    order: Vec<u32>,
}

/// Longest paths over the DAG (generational Kahn order, nodes numbered by time).
fn longest_paths(graph: &Graph) -> Result<Search, CriticalPathError> {
    let n = graph.nodes.len();
    // Node numbering by time (stable on creation order), as the search's base order.
    let mut by_time: Vec<u32> = (0..n as u32).collect();
    by_time.sort_by_key(|&i| (graph.nodes[i as usize].ts, i));
    let mut out_edges: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut in_edges: Vec<Vec<u32>> = vec![Vec::new(); n];
    for (i, e) in graph.edges.iter().enumerate() {
        out_edges[e.from as usize].push(i as u32);
        in_edges[e.to as usize].push(i as u32);
    }
    let mut indegree: Vec<usize> = in_edges.iter().map(Vec::len).collect();
    let mut generation: Vec<u32> = by_time
        .iter()
        .copied()
        .filter(|&v| indegree[v as usize] == 0)
        .collect();
    let mut topo: Vec<u32> = Vec::with_capacity(n);
    while !generation.is_empty() {
        let mut next = Vec::new();
        for &v in &generation {
            topo.push(v);
            for &e in &out_edges[v as usize] {
                let to = graph.edges[e as usize].to;
                indegree[to as usize] -= 1;
                if indegree[to as usize] == 0 {
                    next.push(to);
                }
            }
        }
        generation = next;
    }
    if topo.len() != n {
        return Err(CriticalPathError::Cycle {
            nodes: n - topo.len(),
        });
    }
    let mut dist = vec![0; n];
    let mut via = vec![None; n];
    let mut order = vec![0u32; n];
    for (pos, &v) in topo.iter().enumerate() {
        order[v as usize] = pos as u32;
        let mut best: Option<(Ns, u32)> = None;
        for &e in &in_edges[v as usize] {
            let edge = &graph.edges[e as usize];
            let d = dist[edge.from as usize] + edge.weight;
            if best.is_none_or(|(b, _)| d > b) {
                best = Some((d, e));
            }
        }
        if let Some((d, e)) = best {
            dist[v as usize] = d;
            via[v as usize] = Some(e);
        }
    }
    Ok(Search { dist, via, order })
}

/// Per rank, the rank's span node where its path ends: the largest distance (ties: the first
/// in topological order). One pass over the nodes.
fn path_ends(trace: &Trace, graph: &Graph, search: &Search) -> Vec<Option<usize>> {
    let mut ends: Vec<Option<usize>> = vec![None; trace.ranks.len()];
    for (v, node) in graph.nodes.iter().enumerate() {
        if node.span.is_none() {
            continue;
        }
        let key = |v: usize| (search.dist[v], std::cmp::Reverse(search.order[v]));
        let slot = &mut ends[node.rank.0 as usize];
        if slot.is_none_or(|best| key(v) >= key(best)) {
            *slot = Some(v);
        }
    }
    ends
}

/// The path ending at `end` (the rank's node of largest distance: [`path_ends`]), with its
/// composition.
fn rank_path(
    trace: &Trace,
    rank: RankId,
    graph: &Graph,
    search: &Search,
    end: Option<usize>,
) -> RankCriticalPath {
    let info = &trace.ranks[rank.0 as usize];
    let mut result = RankCriticalPath {
        rank: info.rank.unwrap_or(i64::from(rank.0)),
        source: info.source.clone(),
        start_ns: None,
        end_ns: None,
        length_ns: 0,
        work_ns: 0,
        by_kind: PathKind::ALL.iter().map(|&k| (k, 0)).collect(),
        events: Vec::new(),
        segments: Vec::new(),
        backward_edges: 0,
        note: None,
    };
    let Some(mut v) = end else {
        result.note = Some("no CPU operation, runtime call or device op in the trace".into());
        return result;
    };
    result.work_ns = search.dist[v];
    let mut nodes = vec![v as u32];
    let mut edges = Vec::new();
    while let Some(e) = search.via[v] {
        edges.push(e);
        v = graph.edges[e as usize].from as usize;
        nodes.push(v as u32);
    }
    nodes.reverse();
    edges.reverse();
    result.start_ns = nodes.first().map(|&n| graph.nodes[n as usize].ts);
    result.end_ns = nodes.last().map(|&n| graph.nodes[n as usize].ts);
    for &e in &edges {
        let edge = &graph.edges[e as usize];
        let (from, to) = (
            graph.nodes[edge.from as usize],
            graph.nodes[edge.to as usize],
        );
        let covered = to.ts - from.ts;
        if covered < 0 {
            result.backward_edges += 1;
        }
        let covered = covered.max(0);
        result.length_ns += covered;
        *result.by_kind.entry(edge.kind).or_insert(0) += covered;
        result.segments.push(PathSegment {
            kind: edge.kind,
            from_ns: from.ts,
            to_ns: to.ts,
            weight_ns: edge.weight,
            from_track: from.track,
            to_track: to.track,
            dependency: edge.dependency,
            span: edge.owner,
        });
    }
    let mut seen: FxHashSet<SpanId> = FxHashSet::default();
    for &n in &nodes {
        let node = graph.nodes[n as usize];
        let Some(id) = node.span else { continue };
        if !seen.insert(id) {
            continue;
        }
        let span = &trace.spans[id.0 as usize];
        let r = &trace.ranks[node.rank.0 as usize];
        let shift = graph.shift_of(node.rank);
        result.events.push(PathEvent {
            span: id,
            rank: r.rank.unwrap_or(i64::from(node.rank.0)),
            name: trace.str(span.name).to_owned(),
            start_ns: span.start.saturating_add(shift),
            end_ns: span.end.saturating_add(shift),
            kind: event_kind(trace, id),
        });
    }
    result
        .events
        .sort_by_key(|e| (e.start_ns, std::cmp::Reverse(e.end_ns), e.span.0));
    result
}

// ---------------------------------------------------------------------------------------------
// Step windows.

/// One operation's time on the critical path inside a window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PathOp {
    /// The event's name, or for time between events a description in parentheses
    /// (`(launch delay)`, `(waiting for the device)`, `(untraced gap)`).
    pub name: String,
    pub kind: PathKind,
    /// The rank the time was spent on (another rank's, through a collective).
    pub rank: i64,
    /// Path time inside the window.
    pub ns: Ns,
}

/// What the critical path is made of inside one window `[start_ns, end_ns]`.
///
/// Identity (tested): `sum(by_kind) + before_path_ns + after_path_ns = window_ns`. Each
/// instant of the window is counted once: by the kind of the path edge covering it, or as
/// before/after the path when the path does not reach it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowComposition {
    pub start_ns: Ns,
    pub end_ns: Ns,
    pub window_ns: Ns,
    /// Time of the window before the path's first node (the path starts later).
    pub before_path_ns: Ns,
    /// Time of the window after the path's last node.
    pub after_path_ns: Ns,
    /// Path time inside the window per kind (every kind present).
    pub by_kind: BTreeMap<PathKind, Ns>,
    /// The part of `by_kind[kernel]` spent in communication (NCCL/RCCL) kernels; the rest is
    /// compute.
    pub communication_ns: Ns,
    /// The operations with the most path time inside the window, longest first.
    pub top_ops: Vec<PathOp>,
}

/// How many [`PathOp`]s [`compose`] keeps.
pub const TOP_PATH_OPS: usize = 10;

/// Splits `path` inside `[start, end]` (see [`WindowComposition`]); keeps the `top` operations
/// with the most path time.
pub fn compose(
    trace: &Trace,
    path: &RankCriticalPath,
    start: Ns,
    end: Ns,
    top: usize,
) -> WindowComposition {
    let end = end.max(start);
    let mut by_kind: BTreeMap<PathKind, Ns> = PathKind::ALL.iter().map(|&k| (k, 0)).collect();
    let mut communication_ns = 0;
    let mut ops: FxHashMap<(Option<SpanId>, PathKind, i64), Ns> = FxHashMap::default();
    let mut cursor = start;
    let mut first_covered: Option<Ns> = None;
    for seg in &path.segments {
        let lo = seg.from_ns.max(cursor);
        let hi = seg.to_ns.min(end);
        if hi <= lo {
            continue;
        }
        first_covered.get_or_insert(lo);
        cursor = hi;
        let ns = hi - lo;
        *by_kind.entry(seg.kind).or_insert(0) += ns;
        let rank = seg.span.map_or(path.rank, |id| {
            let r = trace.track(trace.spans[id.0 as usize].track).rank;
            trace.ranks[r.0 as usize].rank.unwrap_or(i64::from(r.0))
        });
        if seg.kind == PathKind::Kernel {
            if let Some(id) = seg.span {
                if crate::distributed::collectives::is_collective_kernel(
                    trace.str(trace.spans[id.0 as usize].name),
                ) {
                    communication_ns += ns;
                }
            }
        }
        *ops.entry((seg.span, seg.kind, rank)).or_insert(0) += ns;
    }
    // Ops by name (one op can own several edges: a call's inside around its children).
    let mut by_name: FxHashMap<(String, PathKind, i64), Ns> = FxHashMap::default();
    for ((span, kind, rank), ns) in ops {
        let name = match span {
            Some(id) => trace.str(trace.spans[id.0 as usize].name).to_owned(),
            None => match kind {
                PathKind::Launch => "(launch delay)".to_owned(),
                PathKind::SyncWait => "(waiting for the device)".to_owned(),
                PathKind::CollectiveWait => "(waiting for peers)".to_owned(),
                _ => "(untraced gap)".to_owned(),
            },
        };
        *by_name.entry((name, kind, rank)).or_insert(0) += ns;
    }
    let mut top_ops: Vec<PathOp> = by_name
        .into_iter()
        .map(|((name, kind, rank), ns)| PathOp {
            name,
            kind,
            rank,
            ns,
        })
        .collect();
    top_ops.sort_by(|a, b| {
        b.ns.cmp(&a.ns)
            .then_with(|| a.name.cmp(&b.name))
            .then_with(|| a.kind.cmp(&b.kind))
            .then_with(|| a.rank.cmp(&b.rank))
    });
    top_ops.truncate(top);
    let (before_path_ns, after_path_ns) = match first_covered {
        Some(first) => (first - start, end - cursor),
        None => (end - start, 0),
    };
    WindowComposition {
        start_ns: start,
        end_ns: end,
        window_ns: end - start,
        before_path_ns,
        after_path_ns,
        by_kind,
        communication_ns,
        top_ops,
    }
}

/// One rank's critical path in one step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankStepPath {
    /// The path searched in the step's graph (its `start_ns`/`end_ns` can leave the window
    /// only through another rank's collective).
    pub path: RankCriticalPath,
    /// The path inside the rank's step window.
    pub window: WindowComposition,
}

/// The critical paths of one `ProfilerStep#N`, on every rank that has it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepCriticalPath {
    /// The annotation (`ProfilerStep#12`).
    pub step: String,
    pub number: u64,
    pub ranks: Vec<RankStepPath>,
    pub graph: GraphStats,
}

/// The `ProfilerStep#N` annotations of each rank: number -> (start, end); for a number
/// annotated twice on a rank (several threads), the earliest.
fn rank_steps(trace: &Trace) -> Vec<BTreeMap<u64, (Ns, Ns)>> {
    let mut steps = vec![BTreeMap::new(); trace.ranks.len()];
    for span in &trace.spans {
        let track = trace.track(span.track);
        if track.is_device() {
            continue;
        }
        let name = trace.str(span.name);
        if !crate::scope::is_step_name(name) {
            continue;
        }
        let Ok(number) = name["ProfilerStep#".len()..].parse::<u64>() else {
            continue;
        };
        let slot = steps[track.rank.0 as usize]
            .entry(number)
            .or_insert((span.start, span.end));
        if span.start < slot.0 {
            *slot = (span.start, span.end);
        }
    }
    steps
}

/// The step numbers of `trace` (any rank), in order.
pub fn step_numbers(trace: &Trace) -> Vec<u64> {
    let mut all: Vec<u64> = rank_steps(trace)
        .into_iter()
        .flat_map(|m| m.into_keys())
        .collect();
    all.sort_unstable();
    all.dedup();
    all
}

/// The critical path of every rank in each `ProfilerStep#N` (only step `only` when given).
///
/// **Window** of a step on a rank: from the step annotation's start to the latest end of what
/// the step includes: the CPU spans of the rank that start inside the annotation, and the
/// device ops (kernels, copies, memsets, syncs) launched by a runtime call among them (device
/// ops whose launch is not in the trace: those starting inside the annotation). The device
/// work of a step can thus run past the next step's start: step windows of one rank may
/// overlap, each holds its own work. The graph of step N holds the step-N spans of every rank
/// with a step N, and the collectives whose members are among them, so a path can cross
/// ranks within the step. Each rank's path is composed inside its window ([`compose`]).
pub fn critical_path_steps(
    trace: &Trace,
    options: &CriticalPathOptions,
    only: Option<u64>,
) -> Result<Vec<StepCriticalPath>, CriticalPathError> {
    let steps = rank_steps(trace);
    let numbers: Vec<u64> = step_numbers(trace)
        .into_iter()
        .filter(|n| only.is_none_or(|o| o == *n))
        .collect();
    let index = TraceIndex::new(trace);
    let members = MemberIndex::new(options);
    let mut buckets = step_buckets(trace, &steps, &numbers);
    let mut out = Vec::with_capacity(numbers.len());
    for (step, &number) in numbers.iter().enumerate() {
        // Windows on the reference clock, as the graph's times.
        let window_of = |rank: RankId| {
            let shift = options.shift_of(rank);
            steps[rank.0 as usize]
                .get(&number)
                .map(|&(s, e)| (s.saturating_add(shift), e.saturating_add(shift)))
        };
        let mut window_end: Vec<Ns> = (0..steps.len() as u32)
            .map(|r| window_of(RankId(r)).map_or(0, |w| w.1))
            .collect();
        let mut graph = Graph::new(options);
        let ranks: Vec<RankId> = (0..trace.ranks.len() as u32)
            .map(RankId)
            .filter(|&r| window_of(r).is_some())
            .collect();
        // Each step's spans are dropped once its graph holds them.
        let step_spans = std::mem::take(&mut buckets[step]);
        for &r in &ranks {
            build_rank(trace, &index, r, &step_spans[r.0 as usize], &mut graph);
        }
        drop(step_spans);
        // The window ends at the latest end of the rank's nodes.
        for node in &graph.nodes {
            if let Some(id) = node.span {
                let end = trace.spans[id.0 as usize]
                    .end
                    .saturating_add(options.shift_of(node.rank));
                let slot = &mut window_end[node.rank.0 as usize];
                *slot = (*slot).max(end);
            }
        }
        let collectives = add_collectives(options, &members, &mut graph);
        let stats = GraphStats {
            nodes: graph.nodes.len(),
            edges: graph.edges.len(),
            negative_edges: graph.negative,
            collectives,
        };
        let search = longest_paths(&graph)?;
        let ends = path_ends(trace, &graph, &search);
        let rank_paths = ranks
            .iter()
            .map(|&r| {
                let path = rank_path(trace, r, &graph, &search, ends[r.0 as usize]);
                let (start, _) = window_of(r).expect("ranks with the step");
                let window = compose(trace, &path, start, window_end[r.0 as usize], TOP_PATH_OPS);
                RankStepPath { path, window }
            })
            .collect();
        out.push(StepCriticalPath {
            step: format!("ProfilerStep#{number}"),
            number,
            ranks: rank_paths,
            graph: stats,
        });
    }
    Ok(out)
}

/// What the graphs read of the whole trace, gathered in one pass: per rank, the event-record
/// runtime calls by correlation (an event sync names the record it waits for, which can lie
/// outside the sync's step).
struct TraceIndex {
    event_records: Vec<FxHashMap<u64, Ns>>,
}

impl TraceIndex {
    fn new(trace: &Trace) -> TraceIndex {
        let mut event_records = vec![FxHashMap::default(); trace.ranks.len()];
        for s in &trace.spans {
            if s.level != Level::AcceleratorApi {
                continue;
            }
            let Some(c) = s.correlation else { continue };
            if trace.str(s.name).ends_with("EventRecord") {
                let rank = trace.track(s.track).rank;
                event_records[rank.0 as usize].insert(c, s.start);
            }
        }
        TraceIndex { event_records }
    }
}

/// The spans of each rank, in trace order (one pass).
fn spans_by_rank(trace: &Trace) -> Vec<Vec<SpanId>> {
    let mut by_rank: Vec<Vec<SpanId>> = vec![Vec::new(); trace.ranks.len()];
    for (i, span) in trace.spans.iter().enumerate() {
        let rank = trace.track(span.track).rank;
        by_rank[rank.0 as usize].push(SpanId(i as u32));
    }
    by_rank
}

/// One rank's step windows, for finding every window that holds an instant.
struct RankWindows {
    /// `(start, end, step index)`, by start.
    windows: Vec<(Ns, Ns, u32)>,
    /// Largest end among `windows[..=i]`.
    max_end: Vec<Ns>,
}

impl RankWindows {
    fn new(steps: &BTreeMap<u64, (Ns, Ns)>, numbers: &[u64]) -> RankWindows {
        let mut windows: Vec<(Ns, Ns, u32)> = numbers
            .iter()
            .enumerate()
            .filter_map(|(i, n)| steps.get(n).map(|&(s, e)| (s, e, i as u32)))
            .collect();
        windows.sort_unstable();
        let mut max_end = Vec::with_capacity(windows.len());
        let mut m = Ns::MIN;
        for w in &windows {
            m = m.max(w.1);
            max_end.push(m);
        }
        RankWindows { windows, max_end }
    }

    /// Calls `found` with the step index of every window `[start, end)` holding `t`. Visits
    /// only the windows that start at or before `t` and could still be open: one for
    /// steps that do not overlap.
    fn containing(&self, t: Ns, mut found: impl FnMut(u32)) {
        let mut i = self.windows.partition_point(|w| w.0 <= t);
        while i > 0 && self.max_end[i - 1] > t {
            i -= 1;
            let (s, e, step) = self.windows[i];
            if t >= s && t < e {
                found(step);
            }
        }
    }
}

/// The spans of each step's graph, per rank, in trace order: `[step index][rank]`. A rank's
/// CPU span belongs to a step when it starts inside the rank's step annotation; a device op
/// to the step of its launching runtime call when the rank has that call, else to the step
/// it starts in. Two passes over the trace, whatever the number of steps.
fn step_buckets(
    trace: &Trace,
    steps: &[BTreeMap<u64, (Ns, Ns)>],
    numbers: &[u64],
) -> Vec<Vec<Vec<SpanId>>> {
    let ranks = trace.ranks.len();
    let windows: Vec<RankWindows> = steps.iter().map(|m| RankWindows::new(m, numbers)).collect();
    let mut buckets: Vec<Vec<Vec<SpanId>>> = vec![vec![Vec::new(); ranks]; numbers.len()];
    // Each runtime call of a rank: the first step holding it (`u32::MAX`: none), further ones
    // apart (only where step annotations overlap).
    const NONE: u32 = u32::MAX;
    let mut call_step: FxHashMap<(u32, u64), u32> = FxHashMap::default();
    let mut call_more: FxHashMap<(u32, u64), Vec<u32>> = FxHashMap::default();
    for (i, span) in trace.spans.iter().enumerate() {
        let track = trace.track(span.track);
        if track.is_device() {
            continue;
        }
        let rank = track.rank.0;
        let call = match (span.level, span.correlation) {
            (Level::AcceleratorApi, Some(c)) => Some((rank, c)),
            _ => None,
        };
        if let Some(key) = call {
            call_step.entry(key).or_insert(NONE);
        }
        windows[rank as usize].containing(span.start, |step| {
            buckets[step as usize][rank as usize].push(SpanId(i as u32));
            if let Some(key) = call {
                let first = call_step.get_mut(&key).expect("inserted above");
                if *first == NONE {
                    *first = step;
                } else if *first != step {
                    call_more.entry(key).or_default().push(step);
                }
            }
        });
    }
    for (i, span) in trace.spans.iter().enumerate() {
        let track = trace.track(span.track);
        if !track.is_device() {
            continue;
        }
        let rank = track.rank.0;
        let id = SpanId(i as u32);
        let launched = span.correlation.and_then(|c| {
            call_step
                .get(&(rank, c))
                .map(|&first| (first, call_more.get(&(rank, c))))
        });
        match launched {
            Some((first, more)) => {
                let mut seen: Vec<u32> = Vec::new();
                for step in std::iter::once(first).chain(more.into_iter().flatten().copied()) {
                    if step != NONE && !seen.contains(&step) {
                        seen.push(step);
                        buckets[step as usize][rank as usize].push(id);
                    }
                }
            }
            None => windows[rank as usize].containing(span.start, |step| {
                buckets[step as usize][rank as usize].push(id);
            }),
        }
    }
    buckets
}

/// Per step when the trace has `ProfilerStep#N` annotations ([`critical_path_steps`]), else
/// the whole trace as one window per rank (the path's own extent, so nothing is before or
/// after it), named `whole trace` with number 0: what the report shows.
pub fn critical_path_by_step_or_whole(
    trace: &Trace,
    options: &CriticalPathOptions,
) -> Result<Vec<StepCriticalPath>, CriticalPathError> {
    if !step_numbers(trace).is_empty() {
        return critical_path_steps(trace, options, None);
    }
    let report = critical_path(trace, options)?;
    let ranks = report
        .ranks
        .into_iter()
        .map(|path| {
            let (start, end) = (path.start_ns.unwrap_or(0), path.end_ns.unwrap_or(0));
            let window = compose(trace, &path, start, end, TOP_PATH_OPS);
            RankStepPath { path, window }
        })
        .collect();
    Ok(vec![StepCriticalPath {
        step: "whole trace".into(),
        number: 0,
        ranks,
        graph: report.graph,
    }])
}

/// The cross-rank instances of [`crate::distributed::collectives::match_collectives`] as
/// critical-path input: each matched collective's member kernels (incomplete instances keep the
/// members the input has; fewer than two add no edge).
pub fn instances_from_matched(
    matched: &[crate::distributed::collectives::CollectiveInstance],
) -> Vec<CollectiveInstance> {
    matched
        .iter()
        .map(|instance| CollectiveInstance {
            members: instance
                .members
                .iter()
                .map(|m| CollectiveMember {
                    rank: m.rank,
                    span: m.kernel,
                })
                .collect(),
        })
        .collect()
}

/// Fallback collective matching for inputs without a matcher: on each rank, the device spans
/// whose name contains `ncclKernel` or `ncclDevKernel` (or starts with `rccl`), in start order;
/// the i-th kernel of a given name on every rank form one instance. Ranks with a different
/// count of a name are matched up to the shortest list.
pub fn match_collectives_by_name_order(trace: &Trace) -> Vec<CollectiveInstance> {
    /// One rank's kernels of one name, in start order.
    type RankKernels = (u32, Vec<(Ns, SpanId)>);
    let mut per_rank: BTreeMap<(String, u32), Vec<(Ns, SpanId)>> = BTreeMap::new();
    for (i, span) in trace.spans.iter().enumerate() {
        if span.level != Level::DeviceKernel {
            continue;
        }
        let track = trace.track(span.track);
        if !track.is_device() {
            continue;
        }
        let name = trace.str(span.name);
        if !(name.contains("ncclKernel")
            || name.contains("ncclDevKernel")
            || name.starts_with("rccl"))
        {
            continue;
        }
        per_rank
            .entry((name.to_owned(), track.rank.0))
            .or_default()
            .push((span.start, SpanId(i as u32)));
    }
    let mut by_name: BTreeMap<String, Vec<RankKernels>> = BTreeMap::new();
    for ((name, rank), mut list) in per_rank {
        list.sort_unstable_by_key(|&(ts, id)| (ts, id.0));
        by_name.entry(name).or_default().push((rank, list));
    }
    let mut out = Vec::new();
    for (_, ranks) in by_name {
        if ranks.len() < 2 {
            continue;
        }
        let count = ranks.iter().map(|(_, l)| l.len()).min().unwrap_or(0);
        for i in 0..count {
            out.push(CollectiveInstance {
                members: ranks
                    .iter()
                    .map(|(r, l)| CollectiveMember {
                        rank: RankId(*r),
                        span: l[i].1,
                    })
                    .collect(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn data(rel: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/data")
            .join(rel)
    }

    /// HTA's critical events: the `X` events with `args.critical == 1` (name, ts in ns).
    fn hta_expected() -> Vec<(String, Ns)> {
        let trace = strato_io::import_file(
            &data("kineto/hta_critical_path/simple_add_expected_overlaid_critical_path.json.gz"),
            &strato_io::ImportOptions::default(),
        )
        .unwrap();
        trace
            .spans
            .iter()
            .filter(|s| {
                trace
                    .args_text(s.args)
                    .is_some_and(|a| a.contains("\"critical\":1"))
            })
            .map(|s| (trace.str(s.name).to_owned(), s.start))
            .collect()
    }

    use strato_trace::testing::{rank, TraceBuilder};

    /// A rank's all-reduce: its launch and its stream sync on `cpu` (correlations 1 and 2), the
    /// NCCL kernel and the sync's device side on `gpu`.
    fn launched_all_reduce(
        b: &mut TraceBuilder,
        cpu: TrackId,
        gpu: TrackId,
        launch: (Ns, Ns),
        kernel: (Ns, Ns),
        sync: (Ns, Ns),
    ) {
        let api = Level::AcceleratorApi;
        b.span(cpu, api, "cudaLaunchKernel", launch.0, launch.1)
            .correlation(1);
        b.span(cpu, api, "cudaStreamSynchronize", sync.0, sync.1)
            .correlation(2);
        let nccl = "ncclKernel_AllReduce_RING_LL_Sum_float";
        b.span(gpu, Level::DeviceKernel, nccl, kernel.0, kernel.1)
            .correlation(1);
        b.span(
            gpu,
            Level::DeviceSync,
            "Stream Sync",
            kernel.1 - 5,
            kernel.1,
        )
        .correlation(2);
    }

    fn kinds(r: &RankCriticalPath) -> Vec<(PathKind, Ns)> {
        r.by_kind
            .iter()
            .filter(|(_, &v)| v > 0)
            .map(|(&k, &v)| (k, v))
            .collect()
    }

    fn names(r: &RankCriticalPath) -> Vec<&str> {
        r.events.iter().map(|e| e.name.as_str()).collect()
    }

    fn conserves(report: &CriticalPathReport) {
        for r in &report.ranks {
            assert_eq!(
                r.by_kind.values().sum::<Ns>(),
                r.length_ns,
                "rank {}",
                r.rank
            );
            if let (Some(s), Some(e)) = (r.start_ns, r.end_ns) {
                assert_eq!(e - s, r.length_ns, "no backward edge here");
            }
        }
    }

    /// A step that launches one long kernel and waits for it: the path runs through the
    /// kernel, and the wait is sync wait.
    #[test]
    fn gpu_bound_step_goes_through_the_kernel() {
        let mut b = TraceBuilder::new();
        let cpu = b.thread(1, 1);
        let gpu = b.queue(0, 7);
        b.span(cpu, Level::Backend, "step", 0, 1000);
        b.span(cpu, Level::AcceleratorApi, "cudaLaunchKernel", 10, 20)
            .correlation(1);
        b.span(cpu, Level::AcceleratorApi, "cudaStreamSynchronize", 30, 990)
            .correlation(2);
        b.span(gpu, Level::DeviceKernel, "gemm", 50, 950)
            .correlation(1);
        b.span(gpu, Level::DeviceSync, "Stream Sync", 940, 950)
            .correlation(2);
        let report = critical_path(&b.build(), &CriticalPathOptions::default()).unwrap();
        conserves(&report);
        let r = &report.ranks[0];
        assert_eq!(
            (r.start_ns, r.end_ns, r.length_ns),
            (Some(0), Some(1000), 1000)
        );
        assert_eq!(r.work_ns, 10 + 40 + 900 + 10);
        assert_eq!(
            kinds(r),
            vec![
                (PathKind::CpuOp, 20),
                (PathKind::Launch, 40),
                (PathKind::Kernel, 900),
                (PathKind::SyncWait, 40)
            ]
        );
        assert_eq!(
            names(r),
            vec!["step", "cudaLaunchKernel", "cudaStreamSynchronize", "gemm"]
        );
    }

    /// The CPU keeps working after a short kernel: the path stays on the CPU.
    #[test]
    fn cpu_bound_step_stays_on_the_cpu() {
        let mut b = TraceBuilder::new();
        let cpu = b.thread(1, 1);
        let gpu = b.queue(0, 7);
        b.span(cpu, Level::Backend, "step", 0, 1000);
        b.span(cpu, Level::AcceleratorApi, "cudaLaunchKernel", 10, 20)
            .correlation(1);
        b.span(gpu, Level::DeviceKernel, "tiny", 25, 28)
            .correlation(1);
        let report = critical_path(&b.build(), &CriticalPathOptions::default()).unwrap();
        conserves(&report);
        let r = &report.ranks[0];
        assert_eq!(names(r), vec!["step", "cudaLaunchKernel"]);
        assert_eq!(
            kinds(r),
            vec![(PathKind::CpuOp, 990), (PathKind::Launch, 10)]
        );
    }

    /// Two kernels queued back to back, then a device synchronisation: stream order links
    /// them, the context sync links the last one to the CPU.
    #[test]
    fn stream_order_and_device_sync() {
        let mut b = TraceBuilder::new();
        let cpu = b.thread(1, 1);
        let gpu = b.queue(0, 7);
        b.span(cpu, Level::Backend, "step", 0, 1000);
        b.span(cpu, Level::AcceleratorApi, "cudaLaunchKernel", 10, 20)
            .correlation(1);
        b.span(cpu, Level::AcceleratorApi, "cudaLaunchKernel", 40, 50)
            .correlation(2);
        b.span(cpu, Level::AcceleratorApi, "cudaDeviceSynchronize", 60, 950)
            .correlation(3);
        b.span(gpu, Level::DeviceKernel, "k1", 30, 500)
            .correlation(1);
        b.span(gpu, Level::DeviceKernel, "k2", 520, 900)
            .correlation(2);
        let ctx = b.queue(0, -1);
        b.span(ctx, Level::DeviceSync, "Context Sync", 900, 910)
            .correlation(3);
        let report = critical_path(&b.build(), &CriticalPathOptions::default()).unwrap();
        conserves(&report);
        let r = &report.ranks[0];
        assert_eq!(
            kinds(r),
            vec![
                (PathKind::CpuOp, 60),
                (PathKind::Launch, 20),
                (PathKind::Kernel, 850),
                (PathKind::SyncWait, 50),
                (PathKind::Idle, 20)
            ]
        );
        assert!(names(r).contains(&"k1") && names(r).contains(&"k2"));
        // The second launch is not on the path (its kernel waited for k1, not for it).
        assert_eq!(
            r.events
                .iter()
                .filter(|e| e.name == "cudaLaunchKernel")
                .count(),
            1
        );
    }

    /// A stream waits on an event recorded after k1 on another stream: k1 -> k2 is a sync
    /// dependency, and the path crosses streams.
    #[test]
    fn stream_wait_event_links_streams() {
        let mut b = TraceBuilder::new();
        let cpu = b.thread(1, 1);
        let s7 = b.queue(0, 7);
        let s8 = b.queue(0, 8);
        b.span(cpu, Level::Backend, "step", 0, 700);
        b.span(cpu, Level::AcceleratorApi, "cudaLaunchKernel", 10, 20)
            .correlation(1);
        b.span(cpu, Level::AcceleratorApi, "cudaEventRecord", 21, 22)
            .correlation(2);
        b.span(cpu, Level::AcceleratorApi, "cudaStreamWaitEvent", 23, 24)
            .correlation(3);
        b.span(cpu, Level::AcceleratorApi, "cudaLaunchKernel", 26, 27)
            .correlation(4);
        b.span(cpu, Level::AcceleratorApi, "cudaDeviceSynchronize", 28, 650)
            .correlation(5);
        b.span(s7, Level::DeviceKernel, "k1", 30, 500)
            .correlation(1);
        b.span(s8, Level::DeviceSync, "Stream Wait Event", 24, 25)
            .correlation(3)
            .args(r#"{"wait_on_stream":7,"wait_on_cuda_event_record_corr_id":2}"#);
        b.span(s8, Level::DeviceKernel, "k2", 510, 600)
            .correlation(4);
        b.span(s8, Level::DeviceSync, "Context Sync", 600, 610)
            .correlation(5);
        let report = critical_path(&b.build(), &CriticalPathOptions::default()).unwrap();
        conserves(&report);
        let r = &report.ranks[0];
        assert_eq!(
            kinds(r),
            vec![
                (PathKind::CpuOp, 60),
                (PathKind::Launch, 20),
                (PathKind::Kernel, 560),
                (PathKind::SyncWait, 60)
            ]
        );
        let on_path = names(r);
        assert!(
            on_path.contains(&"k1") && on_path.contains(&"k2"),
            "{on_path:?}"
        );
    }

    /// Two ranks, one all-reduce; rank 1 arrives late because of a slow CPU op. With the
    /// collective matched, rank 0's path runs through rank 1's slow op.
    #[test]
    fn collective_makes_the_late_rank_critical_for_the_early_one() {
        let mut b = TraceBuilder::new();
        for (r, slow_end, launch, kernel, sync) in [
            (0, None, (10, 20), (30, 900), (25, 950)),
            (1, Some(600), (600, 610), (620, 905), (615, 960)),
        ] {
            b.rank(rank(Some(r), &format!("rank{r}")));
            let cpu = b.thread(1, 1);
            let gpu = b.queue(0, 7);
            b.span(cpu, Level::Backend, "step", 0, 1000);
            if let Some(end) = slow_end {
                b.span(cpu, Level::Backend, "slow", 5, end);
            }
            launched_all_reduce(&mut b, cpu, gpu, launch, kernel, sync);
        }
        let trace = b.build();
        let alone = critical_path(&trace, &CriticalPathOptions::default()).unwrap();
        assert!(!alone.ranks[0].events.iter().any(|e| e.rank == 1));
        let collectives = match_collectives_by_name_order(&trace);
        assert_eq!(collectives.len(), 1);
        assert_eq!(collectives[0].members.len(), 2);
        let options = CriticalPathOptions {
            collectives: Some(collectives),
            ..Default::default()
        };
        let report = critical_path(&trace, &options).unwrap();
        conserves(&report);
        assert_eq!(report.graph.collectives, 1);
        let r0 = &report.ranks[0];
        assert!(
            r0.events.iter().any(|e| e.rank == 1 && e.name == "slow"),
            "{:?}",
            r0.events
        );
        // 0 -> 5 -> 600 on rank 1 (CPU), 600 -> 620 launch, 620 -> 900 rank 0's transfer,
        // 900 -> 950 sync wait, 950 -> 1000 rank 0's step.
        assert_eq!(
            kinds(r0),
            vec![
                (PathKind::CpuOp, 650),
                (PathKind::Launch, 20),
                (PathKind::Kernel, 280),
                (PathKind::SyncWait, 50)
            ]
        );
    }

    /// Collectives matched in contradicting orders make a cycle: an error, not a panic.
    #[test]
    fn contradicting_collective_matches_are_an_error() {
        let mut b = TraceBuilder::new();
        let mut ids = Vec::new();
        for r in 0..2 {
            b.rank(rank(Some(r), "r"));
            let gpu = b.queue(0, 7);
            ids.push(b.span(gpu, Level::DeviceKernel, "ncclKernel_A", 0, 10).id());
            ids.push(
                b.span(gpu, Level::DeviceKernel, "ncclKernel_A", 20, 30)
                    .id(),
            );
        }
        let member = |r: u32, i: usize| CollectiveMember {
            rank: RankId(r),
            span: ids[i],
        };
        let options = CriticalPathOptions {
            collectives: Some(vec![
                CollectiveInstance {
                    members: vec![member(0, 0), member(1, 3)],
                },
                CollectiveInstance {
                    members: vec![member(0, 1), member(1, 2)],
                },
            ]),
            ..Default::default()
        };
        let err = critical_path(&b.build(), &options).unwrap_err();
        assert!(matches!(err, CriticalPathError::Cycle { .. }));
    }

    #[test]
    fn empty_rank_has_a_note() {
        let mut b = TraceBuilder::new();
        b.rank(rank(Some(0), "empty"));
        let report = critical_path(&b.build(), &CriticalPathOptions::default()).unwrap();
        assert!(report.ranks[0].note.is_some());
        assert_eq!(report.ranks[0].length_ns, 0);
    }

    fn window_conserves(w: &WindowComposition) {
        assert_eq!(
            w.by_kind.values().sum::<Ns>() + w.before_path_ns + w.after_path_ns,
            w.window_ns,
            "{w:?}"
        );
        assert_eq!(w.end_ns - w.start_ns, w.window_ns);
        assert!(w.communication_ns <= w.by_kind[&PathKind::Kernel]);
    }

    /// Two steps: the first launches a collective kernel that runs past the step's end (its
    /// window stretches to the kernel's end), the second only works on the CPU. Each step's
    /// path holds its own work only, and the parts add up to its window.
    #[test]
    fn step_windows_hold_their_own_work() {
        let mut b = TraceBuilder::new();
        let cpu = b.thread(1, 1);
        let gpu = b.queue(0, 7);
        b.span(cpu, Level::Operation, "ProfilerStep#1", 0, 1000);
        b.span(cpu, Level::Operation, "ProfilerStep#2", 1000, 2000);
        b.span(cpu, Level::Backend, "op1", 5, 25);
        b.span(cpu, Level::AcceleratorApi, "cudaLaunchKernel", 10, 20)
            .correlation(1);
        b.span(
            gpu,
            Level::DeviceKernel,
            "ncclKernel_AllReduce_RING_LL_Sum_float",
            50,
            1200,
        )
        .correlation(1);
        b.span(cpu, Level::Backend, "op2", 1010, 1900);
        let trace = b.build();
        assert_eq!(step_numbers(&trace), vec![1, 2]);
        let steps = critical_path_steps(&trace, &CriticalPathOptions::default(), None).unwrap();
        assert_eq!(steps.len(), 2);
        let one = &steps[0].ranks[0].window;
        window_conserves(one);
        assert_eq!((one.start_ns, one.end_ns), (0, 1200));
        assert_eq!((one.before_path_ns, one.after_path_ns), (5, 0));
        assert_eq!(one.by_kind[&PathKind::CpuOp], 5);
        assert_eq!(one.by_kind[&PathKind::Launch], 40);
        assert_eq!(one.by_kind[&PathKind::Kernel], 1150);
        assert_eq!(one.communication_ns, 1150);
        assert_eq!(
            one.top_ops[0],
            PathOp {
                name: "ncclKernel_AllReduce_RING_LL_Sum_float".into(),
                kind: PathKind::Kernel,
                rank: 0,
                ns: 1150
            }
        );
        assert_eq!(one.top_ops[1].name, "(launch delay)");
        let two = &steps[1].ranks[0].window;
        window_conserves(two);
        // The annotation ends at 2000; the path's last node is op2's end.
        assert_eq!((two.start_ns, two.end_ns), (1000, 2000));
        assert_eq!((two.before_path_ns, two.after_path_ns), (10, 100));
        assert_eq!(two.by_kind[&PathKind::CpuOp], 890);
        assert_eq!(names(&steps[1].ranks[0].path), vec!["op2"]);
        // Only step 2 asked for.
        let only = critical_path_steps(&trace, &CriticalPathOptions::default(), Some(2)).unwrap();
        assert_eq!(only.len(), 1);
        assert_eq!(only[0].ranks[0].window, *two);
        assert!(
            critical_path_steps(&trace, &CriticalPathOptions::default(), Some(3))
                .unwrap()
                .is_empty()
        );
    }

    /// A window the path leaves early: the time after the path's end is counted apart, and a
    /// path through another rank is clipped to this rank's window.
    #[test]
    fn step_path_crosses_ranks_through_a_collective_and_is_clipped() {
        let mut b = TraceBuilder::new();
        for (r, step_start, slow_end, launch, kernel, sync) in [
            (0, 100, None, (110, 120), (130, 900), (125, 950)),
            (1, 0, Some(600), (600, 610), (620, 905), (615, 960)),
        ] {
            b.rank(rank(Some(r), &format!("rank{r}")));
            let cpu = b.thread(1, 1);
            let gpu = b.queue(0, 7);
            b.span(cpu, Level::Operation, "ProfilerStep#4", step_start, 1000);
            b.span(cpu, Level::Backend, "step", step_start, 990);
            if let Some(end) = slow_end {
                b.span(cpu, Level::Backend, "slow", 5, end);
            }
            launched_all_reduce(&mut b, cpu, gpu, launch, kernel, sync);
        }
        let trace = b.build();
        let options = CriticalPathOptions {
            collectives: Some(match_collectives_by_name_order(&trace)),
            ..Default::default()
        };
        let steps = critical_path_steps(&trace, &options, None).unwrap();
        assert_eq!(steps.len(), 1);
        assert_eq!(steps[0].graph.collectives, 1);
        let r0 = &steps[0].ranks[0];
        window_conserves(&r0.window);
        assert!(r0
            .path
            .events
            .iter()
            .any(|e| e.rank == 1 && e.name == "slow"));
        // Rank 0's window starts at 100; the path starts on rank 1 at 0 and is clipped.
        assert_eq!((r0.window.start_ns, r0.window.end_ns), (100, 1000));
        assert_eq!(r0.path.start_ns, Some(0));
        assert_eq!(r0.window.before_path_ns, 0);
        // 100..600 rank 1's slow op, 600..620 launch, 620..900 transfer, 900..950 sync
        // wait, 950..990 rank 0's step op, then 10 after the path (the step op ended at 990).
        assert_eq!(r0.window.by_kind[&PathKind::CpuOp], 500 + 40);
        assert_eq!(r0.window.by_kind[&PathKind::Launch], 20);
        assert_eq!(r0.window.by_kind[&PathKind::Kernel], 280);
        assert_eq!(r0.window.communication_ns, 280);
        assert_eq!(r0.window.by_kind[&PathKind::SyncWait], 50);
        assert_eq!(r0.window.after_path_ns, 10);
        assert_eq!(
            (
                r0.window.top_ops[0].name.as_str(),
                r0.window.top_ops[0].rank
            ),
            ("slow", 1)
        );
        for r in &steps[0].ranks {
            window_conserves(&r.window);
        }
    }

    /// Every step of every rank of the real multi-rank files: the parts add up to the window,
    /// the window starts at the step annotation, and every CPU event of the rank's own on the
    /// path started inside the annotation.
    #[test]
    fn step_paths_conserve_on_real_multi_rank_files() {
        for (input, steps_expected) in [
            ("kineto/param_dlrm8", vec![10]),
            ("kineto/hta_trace_filter", vec![551, 552]),
        ] {
            let trace =
                strato_io::import_paths(&[data(input)], &strato_io::ImportOptions::default())
                    .unwrap();
            let options = CriticalPathOptions::matched(&trace);
            let steps = critical_path_steps(&trace, &options, None).unwrap();
            assert_eq!(
                steps.iter().map(|s| s.number).collect::<Vec<_>>(),
                steps_expected,
                "{input}"
            );
            let annotations = rank_steps(&trace);
            for step in &steps {
                assert_eq!(step.ranks.len(), trace.ranks.len(), "{input}");
                for (r, rs) in step.ranks.iter().enumerate() {
                    window_conserves(&rs.window);
                    // Windows and events are on the aligned clock.
                    let shift = options.shift_of(RankId(r as u32));
                    let (s, e) = annotations[r][&step.number];
                    let (s, e) = (s + shift, e + shift);
                    assert_eq!(rs.window.start_ns, s, "{input} rank {r}");
                    assert!(rs.window.end_ns >= e);
                    assert!(rs.path.length_ns > 0, "{input} rank {r}");
                    assert_eq!(rs.path.by_kind.values().sum::<Ns>(), rs.path.length_ns);
                    for ev in &rs.path.events {
                        if ev.rank == rs.path.rank && matches!(ev.kind, PathKind::CpuOp) {
                            assert!(ev.start_ns >= s && ev.start_ns < e, "{input} {ev:?}");
                        }
                    }
                    eprintln!(
                        "{input} step {} rank {}: window {} path {} by_kind {:?} comm {} before {} after {}",
                        step.number,
                        rs.path.rank,
                        rs.window.window_ns,
                        rs.path.length_ns,
                        rs.window.by_kind,
                        rs.window.communication_ns,
                        rs.window.before_path_ns,
                        rs.window.after_path_ns
                    );
                }
            }
        }
    }

    /// The one-pass step buckets hold exactly what the definition of a step's spans says
    /// (checked span by span against a direct reading of it, on real multi-step files and on
    /// overlapping annotations).
    #[test]
    fn step_buckets_follow_the_definition() {
        fn by_definition(trace: &Trace, number: u64) -> Vec<Vec<SpanId>> {
            let steps = rank_steps(trace);
            let window = |r: RankId| steps[r.0 as usize].get(&number).copied();
            let mut calls: FxHashSet<(RankId, u64)> = FxHashSet::default();
            let mut step_calls: FxHashSet<(RankId, u64)> = FxHashSet::default();
            let mut out = vec![Vec::new(); trace.ranks.len()];
            for span in &trace.spans {
                let track = trace.track(span.track);
                if track.is_device() || span.level != Level::AcceleratorApi {
                    continue;
                }
                if let Some(c) = span.correlation {
                    calls.insert((track.rank, c));
                    if window(track.rank).is_some_and(|(s, e)| span.start >= s && span.start < e) {
                        step_calls.insert((track.rank, c));
                    }
                }
            }
            for (i, span) in trace.spans.iter().enumerate() {
                let track = trace.track(span.track);
                let Some((s, e)) = window(track.rank) else {
                    continue;
                };
                let keep = if track.is_device() {
                    match span.correlation {
                        Some(c) if calls.contains(&(track.rank, c)) => {
                            step_calls.contains(&(track.rank, c))
                        }
                        _ => span.start >= s && span.start < e,
                    }
                } else {
                    span.start >= s && span.start < e
                };
                if keep {
                    out[track.rank.0 as usize].push(SpanId(i as u32));
                }
            }
            out
        }
        let mut traces: Vec<Trace> = ["kineto/param_dlrm8", "kineto/hta_trace_filter"]
            .iter()
            .map(|p| {
                strato_io::import_paths(&[data(p)], &strato_io::ImportOptions::default()).unwrap()
            })
            .collect();
        // Overlapping annotations: every rank's second step also covers the first.
        let mut overlapped = traces[1].clone();
        let names: Vec<u64> = step_numbers(&overlapped);
        assert!(names.len() >= 2);
        let earliest = overlapped.spans.iter().map(|s| s.start).min().unwrap();
        let second = format!("ProfilerStep#{}", names[1]);
        let widen: Vec<usize> = (0..overlapped.spans.len())
            .filter(|&i| overlapped.str(overlapped.spans[i].name) == second)
            .collect();
        for i in widen {
            overlapped.spans[i].start = earliest;
        }
        traces.push(overlapped);
        for trace in &traces {
            let numbers = step_numbers(trace);
            let buckets = step_buckets(trace, &rank_steps(trace), &numbers);
            for (i, &n) in numbers.iter().enumerate() {
                let mut got = buckets[i].clone();
                for rank in &mut got {
                    rank.sort_unstable();
                }
                assert_eq!(got, by_definition(trace, n), "step {n}");
                assert!(got.iter().any(|r| !r.is_empty()));
            }
        }
    }

    /// A rank whose clock is 1000 s ahead: the path is the same job's (the collectives'
    /// alignment puts every rank on the reference clock), not 1000 s of waiting for peers.
    #[test]
    fn a_rank_clock_offset_does_not_change_the_paths() {
        let mut trace = strato_io::import_paths(
            &[data("kineto/param_dlrm8")],
            &strato_io::ImportOptions::default(),
        )
        .unwrap();
        assert!(trace.ranks.len() >= 2);
        let before = critical_path(&trace, &CriticalPathOptions::matched(&trace)).unwrap();
        const OFFSET: Ns = 1_000_000_000_000;
        for i in 0..trace.spans.len() {
            if trace.track(trace.spans[i].track).rank == RankId(1) {
                trace.spans[i].start += OFFSET;
                trace.spans[i].end += OFFSET;
            }
        }
        // Without the alignment the path waits 1000 s for the peer: the case this guards.
        let unaligned = critical_path(
            &trace,
            &CriticalPathOptions {
                clock_shift: Vec::new(),
                ..CriticalPathOptions::matched(&trace)
            },
        )
        .unwrap();
        assert!(unaligned.ranks.iter().any(|r| r.length_ns > OFFSET / 2));
        let options = CriticalPathOptions::matched(&trace);
        assert!(
            options.shift_of(RankId(1)) < -OFFSET / 2,
            "{:?}",
            options.clock_shift
        );
        let after = critical_path(&trace, &options).unwrap();
        for (a, b) in before.ranks.iter().zip(&after.ranks) {
            // The same path up to the alignment's own error (a few microseconds per crossing).
            let tolerance = a.length_ns / 100 + 100_000;
            assert!(
                (a.length_ns - b.length_ns).abs() <= tolerance,
                "rank {}: {} vs {}",
                a.rank,
                a.length_ns,
                b.length_ns
            );
            assert!(
                b.by_kind[&PathKind::CollectiveWait]
                    <= a.by_kind[&PathKind::CollectiveWait] + tolerance
            );
            assert_eq!(b.by_kind.values().sum::<Ns>(), b.length_ns);
        }
        // Step windows too: each rank's window is its own step on the reference clock.
        let steps = critical_path_steps(&trace, &options, None).unwrap();
        for step in &steps {
            for rs in &step.ranks {
                window_conserves(&rs.window);
                assert!(rs.window.by_kind[&PathKind::CollectiveWait] < OFFSET / 2);
            }
        }
    }

    #[test]
    fn agrees_with_hta_on_its_test_trace() {
        let trace = strato_io::import_file(
            &data("kineto/hta_critical_path/simple_add_input.json.gz"),
            &strato_io::ImportOptions::default(),
        )
        .unwrap();
        let report = critical_path(&trace, &CriticalPathOptions::default()).unwrap();
        let ours: Vec<(String, Ns)> = report.ranks[0]
            .events
            .iter()
            .map(|e| (e.name.clone(), e.start_ns))
            .collect();
        let expected = hta_expected();
        let matched = |a: &[(String, Ns)], b: &[(String, Ns)]| {
            a.iter()
                .filter(|(n, t)| b.iter().any(|(m, u)| m == n && (t - u).abs() <= 1000))
                .count()
        };
        let precision = matched(&ours, &expected) as f64 / ours.len() as f64;
        let recall = matched(&expected, &ours) as f64 / expected.len() as f64;
        eprintln!(
            "ours {} expected {} precision {precision:.4} recall {recall:.4}",
            ours.len(),
            expected.len()
        );
        for (n, t) in &ours {
            if !expected
                .iter()
                .any(|(m, u)| m == n && (t - u).abs() <= 1000)
            {
                eprintln!("only ours: {t} {}", &n[..n.len().min(60)]);
            }
        }
        for (n, t) in &expected {
            if !ours.iter().any(|(m, u)| m == n && (t - u).abs() <= 1000) {
                eprintln!("only HTA: {t} {}", &n[..n.len().min(60)]);
            }
        }
        assert!(precision >= 0.95 && recall >= 0.95);
        let r = &report.ranks[0];
        assert_eq!(r.by_kind.values().sum::<Ns>(), r.length_ns);
    }
}
