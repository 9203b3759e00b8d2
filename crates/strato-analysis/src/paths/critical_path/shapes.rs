//! What the critical path analysis reports: the kinds of path time ([`PathKind`]), the
//! events and segments of one rank's path ([`RankCriticalPath`]), the graph's size and the
//! error when the graph has a cycle. Presenters read these only.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use strato_trace::{Ns, SpanId, TrackId};

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

/// An event (span) with a node on the critical path.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PathEvent {
    #[serde(skip)]
    pub span: SpanId,
    /// The rank of the event (a path can cross ranks through collectives).
    pub rank: i64,
    /// Shared by the path's events of one name (a long path names the same kernels and calls
    /// millions of times).
    #[serde(serialize_with = "shared_str")]
    pub name: Arc<str>,
    pub start_ns: Ns,
    pub end_ns: Ns,
    pub kind: PathKind,
}

fn shared_str<S: serde::Serializer>(name: &Arc<str>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(name)
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
    /// The collectives on the path where this rank waited for a later peer: the path comes
    /// into the collective's "all arrived" point from the peer's arrival and goes on through
    /// this rank's own transfer.
    pub late_peers: Vec<LatePeer>,
    pub note: Option<String>,
}

/// A collective on a rank's path where the rank waited for a later peer
/// ([`RankCriticalPath::late_peers`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LatePeer {
    /// The peer that arrived last (its job rank), whose work the path runs through.
    pub peer: i64,
    /// The collective (kernel) name.
    pub collective: String,
    /// From this rank's arrival (its kernel's start) to the peer's.
    pub waited_ns: Ns,
    /// The cross-rank edge itself, for a front end that draws it (the viewer): the late
    /// peer's kernel (whose start is its arrival), this rank's kernel and the time every
    /// member had arrived (on the job's clock, as the path's times).
    #[serde(skip)]
    pub edge: PeerEdge,
}

/// The edge of a [`LatePeer`]: from the late peer's kernel to this rank's, at the time the
/// last member arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PeerEdge {
    /// The peer's member kernel, when the graph names it.
    pub peer_kernel: Option<SpanId>,
    pub own_kernel: Option<SpanId>,
    pub arrived_ns: Ns,
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
    /// ([`CriticalPathOptions::clock_shift`](super::CriticalPathOptions::clock_shift)): subtract it
    /// to find an event in its file.
    #[serde(skip)]
    pub clock_shift: Vec<Ns>,
}

/// Why no critical path could be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CriticalPathError {
    #[error("the dependency graph has a cycle through {nodes} nodes (a synchronisation or collective edge contradicts the timeline)")]
    Cycle { nodes: usize },
}
