//! Each edge's duration as the trace shows it ([`traced_durations`], by its [`Role`]) and the
//! simulation of a graph with them ([`simulate`], [`simulate_evened`]), over a graph prepared
//! once ([`Prepared`]: its topological order and adjacency).

use rustc_hash::FxHashMap;
use strato_trace::{Ns, RankId, SpanId, Trace, TrackId};

use super::super::graph::{Edge, Graph};
use super::super::search::{topological_order, Adjacency};
use super::super::shapes::{CriticalPathError, PathKind};

/// How the replay treats an edge (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    Work,
    Untraced,
    Latency,
}

pub(super) fn role(trace: &Trace, graph: &Graph, e: &Edge) -> Role {
    if e.replay_only() || e.waited() {
        return Role::Latency;
    }
    if !e.dependency() {
        // Inside a blocking runtime call the CPU waited ([`super::super::is_blocking_call`]).
        return if e.kind == PathKind::SyncWait {
            Role::Latency
        } else {
            Role::Work
        };
    }
    let on_thread = |n: u32| {
        !trace
            .track(graph.nodes[n as usize].track(trace))
            .is_device()
    };
    if e.kind == PathKind::Idle && on_thread(e.from) && on_thread(e.to) {
        Role::Untraced
    } else {
        Role::Latency
    }
}

/// The traced durations of every edge (see the module docs), and the typical (median
/// binding) latency of each kind.
pub(super) fn traced_durations(
    graph: &Graph,
    roles: &[Role],
    in_edges: &Adjacency,
) -> (Vec<Ns>, FxHashMap<PathKind, Ns>) {
    let ts = |n: u32| graph.nodes[n as usize].ts;
    let gap = |e: &Edge| (ts(e.to) - ts(e.from)).max(0);
    let mut d: Vec<Ns> = graph.edges.iter().map(gap).collect();
    let mut binding = vec![false; graph.edges.len()];
    let mut samples: FxHashMap<PathKind, Vec<Ns>> = FxHashMap::default();
    for v in 0..graph.nodes.len() as u32 {
        let mut work_ready: Option<Ns> = None;
        let mut latest: Option<u32> = None;
        for &e in in_edges.of(v) {
            let edge = &graph.edges[e as usize];
            if roles[e as usize] == Role::Latency {
                if latest.is_none_or(|l| ts(edge.from) > ts(graph.edges[l as usize].from)) {
                    latest = Some(e);
                }
            } else {
                let ready = ts(edge.from) + gap(edge);
                work_ready = Some(work_ready.map_or(ready, |w| w.max(ready)));
            }
        }
        let Some(b) = latest else { continue };
        if work_ready.is_some_and(|w| w >= ts(v)) {
            continue;
        }
        binding[b as usize] = true;
        let edge = &graph.edges[b as usize];
        samples.entry(edge.kind).or_default().push(d[b as usize]);
    }
    let typical: FxHashMap<PathKind, Ns> = samples
        .into_iter()
        .map(|(kind, mut values)| {
            let mid = values.len() / 2;
            let (_, median, _) = values.select_nth_unstable(mid);
            (kind, *median)
        })
        .collect();
    for (i, edge) in graph.edges.iter().enumerate() {
        if roles[i] == Role::Latency && !binding[i] {
            d[i] = d[i].min(typical.get(&edge.kind).copied().unwrap_or(0));
        }
    }
    (d, typical)
}

/// The duration of an edge a change removed: far enough below any time that it never binds.
pub(super) const REMOVED: Ns = Ns::MIN / 4;

/// The simulated time of each node and the edge that set it (`u32::MAX`: none, a source).
pub(super) fn simulate(
    graph: &Graph,
    topo: &[u32],
    in_edges: &Adjacency,
    durations: &[Ns],
) -> (Vec<Ns>, Vec<u32>) {
    simulate_evened(graph, &graph.edges, topo, in_edges, durations, None)
}

/// [`simulate`] over `edges` (the graph's, or a copy some rewired: `in_edges` and `topo` hold
/// for both, [`comm_off_compute`]), with rank `evened`'s arrival at each collective ("all
/// arrived" point) no later than the median member's ([`Selector::Straggler`]).
pub(super) fn simulate_evened(
    graph: &Graph,
    edges: &[Edge],
    topo: &[u32],
    in_edges: &Adjacency,
    durations: &[Ns],
    evened: Option<RankId>,
) -> (Vec<Ns>, Vec<u32>) {
    let n = graph.nodes.len();
    let mut t = vec![0; n];
    let mut via = vec![u32::MAX; n];
    let mut arrivals: Vec<Ns> = Vec::new();
    for &v in topo {
        let arrival = |e: u32, t: &[Ns]| {
            let d = durations[e as usize];
            (d != REMOVED).then(|| t[edges[e as usize].from as usize] + d)
        };
        // The straggler's cap at a collective: the median member's arrival.
        let cap = match evened {
            Some(rank) if graph.nodes[v as usize].span().is_none() => {
                arrivals.clear();
                arrivals.extend(in_edges.of(v).iter().filter_map(|&e| arrival(e, &t)));
                arrivals.sort_unstable();
                (arrivals.len() >= 2).then(|| (rank, arrivals[(arrivals.len() - 1) / 2]))
            }
            _ => None,
        };
        let mut best: Option<(Ns, u32)> = None;
        for &e in in_edges.of(v) {
            let Some(mut at) = arrival(e, &t) else {
                continue;
            };
            let edge = &edges[e as usize];
            if let Some((rank, median)) = cap {
                if graph.nodes[edge.from as usize].rank == rank {
                    at = at.min(median);
                }
            }
            if best.is_none_or(|(b, _)| at > b) {
                best = Some((at, e));
            }
        }
        match best {
            Some((at, e)) => {
                t[v as usize] = at;
                via[v as usize] = e;
            }
            None => t[v as usize] = graph.nodes[v as usize].ts,
        }
    }
    (t, via)
}

/// A graph ready to be simulated: the edges into each point, a topological order, and each
/// edge's role and traced duration.
pub(super) struct Prepared<'g> {
    pub(super) graph: &'g Graph,
    pub(super) in_edges: Adjacency,
    pub(super) topo: Vec<u32>,
    pub(super) roles: Vec<Role>,
    pub(super) traced: Vec<Ns>,
    /// The typical (median binding) latency of each kind.
    pub(super) typical: FxHashMap<PathKind, Ns>,
    /// The graph's spans in the order [`selected`] walks them, made at its first call and
    /// kept for the other sets of changes replayed on the same graph.
    pub(super) order: std::sync::OnceLock<SpanOrder>,
}

/// A graph's spans as [`selected`] walks them: CPU spans per thread in call order (start,
/// then the longer first), and the device ops.
#[derive(Debug, Default)]
pub(super) struct SpanOrder {
    pub(super) threads: Vec<(TrackId, Vec<SpanId>)>,
    pub(super) device: Vec<SpanId>,
}

impl SpanOrder {
    pub(super) fn new(trace: &Trace, graph: &Graph) -> SpanOrder {
        let mut threads: FxHashMap<TrackId, Vec<SpanId>> = FxHashMap::default();
        let mut device: Vec<SpanId> = Vec::new();
        for &id in graph.span_nodes.keys() {
            let span = &trace.spans[id.0 as usize];
            if trace.track(span.track).is_device() {
                device.push(id);
            } else {
                threads.entry(span.track).or_default().push(id);
            }
        }
        let threads = threads
            .into_iter()
            .map(|(track, mut spans)| {
                spans.sort_by_key(|id| {
                    let s = &trace.spans[id.0 as usize];
                    (
                        s.start,
                        std::cmp::Reverse(s.end),
                        s.same_extent_order(),
                        id.0,
                    )
                });
                (track, spans)
            })
            .collect();
        SpanOrder { threads, device }
    }
}

impl<'g> Prepared<'g> {
    /// `Err` when the graph has a cycle.
    pub(super) fn new(trace: &Trace, graph: &'g Graph) -> Result<Prepared<'g>, CriticalPathError> {
        let in_edges = Adjacency::new(graph.nodes.len(), &graph.edges, |e| e.to);
        let topo = topological_order(graph, &in_edges)?;
        let roles: Vec<Role> = graph.edges.iter().map(|e| role(trace, graph, e)).collect();
        let (traced, typical) = traced_durations(graph, &roles, &in_edges);
        Ok(Prepared {
            graph,
            in_edges,
            topo,
            roles,
            traced,
            typical,
            order: std::sync::OnceLock::new(),
        })
    }

    /// The graph's spans in [`selected`]'s order.
    pub(super) fn order(&self, trace: &Trace) -> &SpanOrder {
        self.order.get_or_init(|| SpanOrder::new(trace, self.graph))
    }

    /// The simulation with the traced durations: each point's time and the edge it came by.
    pub(super) fn simulate(&self) -> (Vec<Ns>, Vec<u32>) {
        simulate(self.graph, &self.topo, &self.in_edges, &self.traced)
    }
}
