//! The names every crate shares: the categories, flow kinds and track names that a recorder or
//! importer writes and the analyses recognise. One definition each, here in the model crate
//! that every other crate depends on, so a writer and its readers cannot drift apart.

use crate::{Trace, Track, TrackKind};

/// Category of the OS level's thread-state spans (running, runnable, sleeping, ...; the span's
/// name is the state). Written by the OS recorder and the perf and nsys importers; states are
/// not calls: the hierarchy gives them no parent, the breakdown keys rows by them.
pub const THREAD_STATE_CATEGORY: &str = "thread_state";

/// Category of the OS level's slow system-call spans (the OS recorder, `perf` importer).
pub const SYSCALL_CATEGORY: &str = "syscall";

/// Category of CPU sample instants (the sampler, the perf and nsys importers), named by their
/// folded call chain.
pub const CPU_SAMPLE_CATEGORY: &str = "cpu_sample";

/// Category of Python-stack instants (the program's stack sampler), joined with the native
/// samples at analysis time.
pub const PYTHON_STACK_CATEGORY: &str = "python_stack";

/// Flow category of the link from a captured launch (the runtime call that created a graph
/// node: an nsys export's node events, or a copy made by graph attribution) to a device op
/// replayed from that node.
pub const GRAPH_NODE_FLOW: &str = "graph_node";

/// Flow category of the same link when an nsys export has no node events: the replayed ops of
/// one graph launch paired with the captured launches in node order.
pub const GRAPH_NODE_ORDER_FLOW: &str = "graph_node_order";

/// Whether `trace` links replayed device ops to their captured launches by graph node
/// ([`GRAPH_NODE_FLOW`], [`GRAPH_NODE_ORDER_FLOW`]): opening it then attributes them, which
/// needs the whole trace.
pub fn has_graph_node_links(trace: &Trace) -> bool {
    [GRAPH_NODE_FLOW, GRAPH_NODE_ORDER_FLOW]
        .iter()
        .any(|category| trace.strings.lookup(category).is_some())
}

/// Name prefix of the thread tracks that hold copies of the ops that captured a CUDA/HIP graph
/// (graph attribution): `graph capture: <thread name>`.
pub const GRAPH_CAPTURE_TRACK_PREFIX: &str = "graph capture: ";

/// True for a graph-capture track ([`GRAPH_CAPTURE_TRACK_PREFIX`]).
pub fn is_graph_capture_track(track: &Track) -> bool {
    matches!(track.kind, TrackKind::Thread { .. })
        && track
            .name
            .as_deref()
            .is_some_and(|n| n.starts_with(GRAPH_CAPTURE_TRACK_PREFIX))
}

/// True for the API calls that replay a graph (`cudaGraphLaunch`, `hipGraphLaunch`,
/// `cuGraphLaunch`, their `_v10000`/`_spt` variants).
pub fn is_graph_launch_name(name: &str) -> bool {
    name.contains("GraphLaunch")
}
