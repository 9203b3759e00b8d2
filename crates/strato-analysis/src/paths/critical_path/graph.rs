//! The dependency graph under construction: its nodes (a span's start or end, a collective's
//! "all arrived" point) and weighted edges, the classification of events into path kinds
//! ([`BLOCKING_CALLS`]), and what every graph reads of the whole trace (event records, each
//! rank's spans).

use rustc_hash::FxHashMap;
use strato_trace::{Level, Ns, RankId, SpanId, Trace, TrackId};

use super::options::CriticalPathOptions;
use super::shapes::PathKind;

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
    "clFinish",
    "clWaitForEvents",
];

/// Whether the accelerator API call `id` blocks the CPU until the device is done: one of
/// [`BLOCKING_CALLS`]; a synchronous copy call of the CUDA runtime or driver or of HIP (a
/// name that starts with `cu` or `hip`, holds `Memcpy` and not `Async`: `cudaMemcpy2D`,
/// `cudaMemcpyToSymbol`, `cuMemcpyDtoH`, `hipMemcpyWithStream`, ...: they return when the
/// copy is done; a framework's own names, as TensorFlow's `MemcpyH2D`, do not say whether
/// the call waited, and are not taken as blocking); or an OpenCL enqueue the
/// application made blocking (`clEnqueueReadBuffer`, `clEnqueueWriteBuffer`,
/// `clEnqueueMapBuffer`, `clEnqueueSVMMemcpy`, ... with `"blocking": true` in its attributes,
/// as the OpenCL layer records them; without it an OpenCL enqueue does not block).
pub fn is_blocking_call(trace: &Trace, id: SpanId) -> bool {
    let span = &trace.spans[id.0 as usize];
    let name = trace.str(span.name);
    if BLOCKING_CALLS.contains(&name) {
        return true;
    }
    if name.starts_with("clEnqueue") {
        return trace.args_text(span.args).is_some_and(|text| {
            text.contains("blocking")
                && crate::device_time::memory::object_keys(&text, &["blocking"])
                    .and_then(|attrs| attrs.get("blocking")?.as_bool())
                    == Some(true)
        });
    }
    span.level == Level::AcceleratorApi
        && (name.starts_with("cu") || name.starts_with("hip"))
        && name.contains("Memcpy")
        && !name.contains("Async")
}

/// The value of a compact optional id ([`Node`], [`Edge`]) that holds none: ids are the
/// positions of spans and tracks, far below it.
const NONE: u32 = u32::MAX;

fn compact(id: Option<u32>) -> u32 {
    id.unwrap_or(NONE)
}

fn expand(id: u32) -> Option<u32> {
    (id != NONE).then_some(id)
}

/// The bit of [`Node`]'s span that marks a collective's "all arrived" point (span ids are
/// positions in the trace's span list, far below it).
const ARRIVED: u32 = 1 << 31;

/// A point in time of one span (its start or end) or a collective's "all arrived" point
/// (16 bytes: a graph holds two points per event). An "all arrived" point keeps its late
/// member's span, flagged [`ARRIVED`], for the track it is drawn on; its track, like a span
/// point's, is read from the trace ([`Node::track`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct Node {
    pub(super) ts: Ns,
    span: u32,
    pub(super) rank: RankId,
}

impl Node {
    /// The point `ts` of span `span`.
    pub(super) fn new(ts: Ns, span: SpanId, rank: RankId) -> Node {
        debug_assert!(span.0 & ARRIVED == 0, "span ids stay below 2^31");
        Node {
            ts,
            span: span.0,
            rank,
        }
    }

    /// A collective's "all arrived" point at `ts`, its last member being span `late` of `rank`.
    pub(super) fn arrived(ts: Ns, late: SpanId, rank: RankId) -> Node {
        Node {
            ts,
            span: late.0 | ARRIVED,
            rank,
        }
    }

    /// The span the node is a point of; `None` for a collective's "all arrived" point.
    pub(super) fn span(&self) -> Option<SpanId> {
        (self.span & ARRIVED == 0).then_some(SpanId(self.span))
    }

    /// The track of the node's span in `trace` (a collective's point: its late member's).
    pub(super) fn track(&self, trace: &Trace) -> TrackId {
        trace.spans[(self.span & !ARRIVED) as usize].track
    }
}

/// What an edge is besides its kind ([`Edge`]'s flags).
const WEIGHTED: u8 = 1;
const DEPENDENCY: u8 = 2;
const REPLAY_ONLY: u8 = 4;
const WAITED: u8 = 8;

/// An edge (16 bytes: the owner kept as a `u32` with [`NONE`], the weight read from its
/// points' times, [`Graph::weight`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct Edge {
    pub(super) from: u32,
    pub(super) to: u32,
    owner: u32,
    pub(super) kind: PathKind,
    flags: u8,
}

impl Edge {
    /// The event whose time the edge is (an op's inside, a kernel's transfer or wait); `None`
    /// for the dependencies between events (launch delay, sync, stream gap, idle).
    pub(super) fn owner(&self) -> Option<SpanId> {
        expand(self.owner).map(SpanId)
    }

    /// An edge between events (launch, sync, stream order, collective), not the time inside
    /// one event or call stack.
    pub(super) fn dependency(&self) -> bool {
        self.flags & DEPENDENCY != 0
    }

    /// Read by the replay only ([`Graph::replay`]): a constraint the critical path's search
    /// leaves out because another one bound the node (a kernel's launch when it waited for its
    /// stream, or its stream when it waited for its launch).
    pub(super) fn replay_only(&self) -> bool {
        self.flags & REPLAY_ONLY != 0
    }

    /// Time the thread spent waiting for another thread (an untraced gap ended by a thread
    /// hand-off: [`super::rank_edges`]): the replay treats it as latency, not as work.
    pub(super) fn waited(&self) -> bool {
        self.flags & WAITED != 0
    }

    /// Marks the edge [`Edge::waited`].
    pub(super) fn set_waited(&mut self) {
        self.flags |= WAITED;
    }

    /// Makes an op's own time a wait for another thread ([`super::rank_edges`]'s hand-offs
    /// inside an op): [`Edge::waited`], and no longer weighed in the search (work counts,
    /// waiting does not).
    pub(super) fn set_waiting(&mut self) {
        self.flags = (self.flags | WAITED) & !WEIGHTED;
    }
}

const _: () = assert!(std::mem::size_of::<Node>() == 16 && std::mem::size_of::<Edge>() == 16);

/// The graph under construction: nodes in creation order, renumbered by time before the
/// search.
#[derive(Default)]
pub(super) struct Graph {
    pub(super) nodes: Vec<Node>,
    pub(super) edges: Vec<Edge>,
    /// Span -> (start node, end node).
    pub(super) span_nodes: FxHashMap<SpanId, (u32, u32)>,
    pub(super) negative: usize,
    /// Per rank, the shift onto the reference clock ([`CriticalPathOptions::clock_shift`]).
    clock_shift: Vec<Ns>,
    /// Built for the replay: every constraint of a device op is kept, the ones the critical
    /// path leaves out marked [`Edge::replay_only`].
    pub(super) replay: bool,
}

impl Graph {
    pub(super) fn new(options: &CriticalPathOptions) -> Graph {
        Graph {
            clock_shift: options.clock_shift.clone(),
            ..Graph::default()
        }
    }

    /// Per rank, the shift onto the reference clock (ranks past the list: none).
    pub(super) fn clock_shifts(&self) -> &[Ns] {
        &self.clock_shift
    }

    pub(super) fn shift_of(&self, rank: RankId) -> Ns {
        self.clock_shift.get(rank.0 as usize).copied().unwrap_or(0)
    }

    pub(super) fn add_span(&mut self, trace: &Trace, id: SpanId, rank: RankId) -> (u32, u32) {
        let span = &trace.spans[id.0 as usize];
        let start = self.nodes.len() as u32;
        let shift = self.shift_of(rank);
        for ts in [span.start, span.end] {
            self.nodes
                .push(Node::new(ts.saturating_add(shift), id, rank));
        }
        self.span_nodes.insert(id, (start, start + 1));
        (start, start + 1)
    }

    /// Drops what only the graph's construction and the replay read (the nodes of each span),
    /// for a graph that is only searched: the whole trace's holds two entries a span.
    pub(super) fn keep_what_the_search_reads(&mut self) {
        self.span_nodes = FxHashMap::default();
    }

    /// Adds an edge; `weighted` edges weigh the time between their nodes (never below 0).
    pub(super) fn edge(
        &mut self,
        from: u32,
        to: u32,
        kind: PathKind,
        weighted: bool,
        dependency: bool,
    ) {
        self.owned_edge(from, to, kind, weighted, dependency, None);
    }

    /// [`Graph::edge`] whose time belongs to the event `owner`.
    pub(super) fn owned_edge(
        &mut self,
        from: u32,
        to: u32,
        kind: PathKind,
        weighted: bool,
        dependency: bool,
        owner: Option<SpanId>,
    ) {
        self.push_edge(from, to, kind, weighted, dependency, owner, false);
    }

    /// Leaves a graph built for the replay as the critical path's search reads it: the
    /// replay-only edges dropped (the others keep their order) and not counted as negative,
    /// the very graph a build without [`Graph::replay`] gives.
    pub(super) fn strip_replay_edges(&mut self) {
        let nodes = &self.nodes;
        let negative_replay_only = self
            .edges
            .iter()
            .filter(|e| e.replay_only() && nodes[e.to as usize].ts < nodes[e.from as usize].ts)
            .count();
        self.negative -= negative_replay_only;
        self.edges.retain(|e| !e.replay_only());
        self.replay = false;
    }

    /// A dependency edge only the replay reads ([`Edge::replay_only`]); none unless the graph
    /// is built for the replay.
    pub(super) fn replay_edge(&mut self, from: u32, to: u32, kind: PathKind) {
        if self.replay {
            self.push_edge(from, to, kind, true, true, None, true);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn push_edge(
        &mut self,
        from: u32,
        to: u32,
        kind: PathKind,
        weighted: bool,
        dependency: bool,
        owner: Option<SpanId>,
        replay_only: bool,
    ) {
        if from == to {
            return;
        }
        let dt = self.nodes[to as usize].ts - self.nodes[from as usize].ts;
        if dt < 0 {
            self.negative += 1;
        }
        let flag = |on: bool, bit: u8| if on { bit } else { 0 };
        self.edges.push(Edge {
            from,
            to,
            owner: compact(owner.map(|s| s.0)),
            kind,
            flags: flag(weighted, WEIGHTED)
                | flag(dependency, DEPENDENCY)
                | flag(replay_only, REPLAY_ONLY),
        });
    }

    /// The weight of `edge` in the search: for a weighted edge the time between its points
    /// (never below 0), else 0 (work counts, waiting does not).
    pub(super) fn weight(&self, edge: &Edge) -> Ns {
        if edge.flags & WEIGHTED == 0 {
            return 0;
        }
        (self.nodes[edge.to as usize].ts - self.nodes[edge.from as usize].ts).max(0)
    }
}

/// N when `span` (of `trace`) is a `ProfilerStep#N` annotation of a CPU track.
pub(super) fn step_annotation(trace: &Trace, span: &strato_trace::Span) -> Option<u64> {
    if trace.track(span.track).is_device() {
        return None;
    }
    let name = trace.str(span.name);
    if !crate::scope::is_step_name(name) {
        return None;
    }
    name["ProfilerStep#".len()..].parse::<u64>().ok()
}

/// The included CPU levels.
pub(super) fn is_cpu_level(level: Level) -> bool {
    matches!(
        level,
        Level::Backend | Level::Simulator | Level::Library | Level::AcceleratorApi
    )
}

pub(super) fn event_kind(trace: &Trace, id: SpanId) -> PathKind {
    let span = &trace.spans[id.0 as usize];
    match span.level {
        Level::DeviceKernel => PathKind::Kernel,
        Level::DeviceCopy | Level::DeviceSet => PathKind::Copy,
        Level::DeviceSync => PathKind::SyncWait,
        Level::AcceleratorApi => {
            if is_blocking_call(trace, id) {
                PathKind::SyncWait
            } else {
                PathKind::Launch
            }
        }
        _ => PathKind::CpuOp,
    }
}

/// Reads an integer field of a span's args (`None` when absent or not an integer).
pub(super) fn arg_i64(trace: &Trace, id: SpanId, key: &str) -> Option<i64> {
    let text = trace.args_text(trace.spans[id.0 as usize].args)?;
    if !text.contains(key) {
        return None;
    }
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    value.get(key)?.as_i64()
}

/// What the graphs read of the whole trace, gathered in one pass: per rank, the event-record
/// runtime calls by correlation (an event sync names the record it waits for, which can lie
/// outside the sync's step), and whether the rank has CPU work at the graph's levels
/// ([`is_cpu_level`]) anywhere in the trace (a rank without is read at the operation level:
/// [`TraceIndex::operation_level`]).
#[derive(Debug, Default)]
pub(super) struct TraceIndex {
    pub(super) event_records: Vec<FxHashMap<u64, Ns>>,
    cpu_ops: Vec<bool>,
}

impl TraceIndex {
    pub(super) fn new(trace: &Trace) -> TraceIndex {
        let mut index = TraceIndex {
            event_records: vec![FxHashMap::default(); trace.ranks.len()],
            cpu_ops: vec![false; trace.ranks.len()],
        };
        for s in &trace.spans {
            index.note(trace, s);
        }
        index
    }

    /// Whether `rank` (of `trace`)'s CPU work is read at the operation level: the rank is a
    /// stratoscope recording (format `strato`: its operations, `stratoscope.operation`, are
    /// the program's own work, not annotations over framework ops), or it has no span of a
    /// thread at the graph's CPU levels ([`is_cpu_level`]) anywhere in the trace (a program
    /// whose only spans are its operations and Python calls, whatever wrote it). Its threads'
    /// [`Level::Operation`] and [`Level::Python`] spans (not the step annotations) are then
    /// CPU ops beside the framework's and native ones, and its threads hand work to each
    /// other ([`super::rank_edges`]). Decided over the whole trace so that every window of the
    /// rank reads it the same way. Other formats' annotations (Kineto's `user_annotation`,
    /// NVTX ranges) stay out of the graph, as in HTA.
    pub(super) fn operation_level(&self, trace: &Trace, rank: RankId) -> bool {
        let recorded = trace
            .ranks
            .get(rank.0 as usize)
            .is_some_and(|r| r.format == strato_trace::SourceFormat::Strato);
        recorded || !self.cpu_ops.get(rank.0 as usize).copied().unwrap_or(false)
    }

    /// Adds what `span` (of `trace`: its tables name the span's track and name) gives.
    pub(super) fn note(&mut self, trace: &Trace, s: &strato_trace::Span) {
        if is_cpu_level(s.level) {
            let track = trace.track(s.track);
            if matches!(track.kind, strato_trace::TrackKind::Thread { .. }) {
                let rank = track.rank.0 as usize;
                if self.cpu_ops.len() <= rank {
                    self.cpu_ops.resize(rank + 1, false);
                }
                self.cpu_ops[rank] = true;
            }
        }
        if s.level != Level::AcceleratorApi {
            return;
        }
        let Some(c) = s.correlation.get() else { return };
        if trace.str(s.name).ends_with("EventRecord") {
            let rank = trace.track(s.track).rank.0 as usize;
            if self.event_records.len() <= rank {
                self.event_records.resize_with(rank + 1, FxHashMap::default);
            }
            self.event_records[rank].insert(c, s.start);
        }
    }

    /// Adds the index of the next file of a job, whose ranks come after the `first_rank`
    /// ranks of the files before it.
    pub(super) fn append(&mut self, other: TraceIndex, first_rank: usize) {
        self.event_records
            .resize_with(first_rank, FxHashMap::default);
        self.event_records.extend(other.event_records);
        self.cpu_ops.resize(first_rank, false);
        self.cpu_ops.extend(other.cpu_ops);
    }

    /// Holds one (possibly empty) map per rank of a trace of `ranks` ranks.
    pub(super) fn cover(&mut self, ranks: usize) {
        if self.event_records.len() < ranks {
            self.event_records.resize_with(ranks, FxHashMap::default);
        }
        if self.cpu_ops.len() < ranks {
            self.cpu_ops.resize(ranks, false);
        }
    }
}

/// The spans of each rank, in trace order (one pass).
pub(super) fn spans_by_rank(trace: &Trace) -> Vec<Vec<SpanId>> {
    let mut by_rank: Vec<Vec<SpanId>> = vec![Vec::new(); trace.ranks.len()];
    for (i, span) in trace.spans.iter().enumerate() {
        let rank = trace.track(span.track).rank;
        by_rank[rank.0 as usize].push(SpanId(i as u32));
    }
    by_rank
}
