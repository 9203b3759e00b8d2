//! The longest-path search over the graph and each rank's path read back from it
//! ([`critical_path`]: the whole trace as one window).

use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};
use strato_trace::{Ns, RankId, SpanId, StrId, Trace};

use super::collective_edges::{add_collectives, MemberIndex};
use super::graph::{event_kind, spans_by_rank, Graph, TraceIndex};
use super::options::CriticalPathOptions;
use super::rank_edges::build_rank;
use super::shapes::{
    CriticalPathError, CriticalPathReport, GraphStats, LatePeer, PathEvent, PathKind, PathSegment,
    PeerEdge, RankCriticalPath,
};

/// Computes the critical path of every rank of `trace`.
pub fn critical_path(
    trace: &Trace,
    options: &CriticalPathOptions,
) -> Result<CriticalPathReport, CriticalPathError> {
    let (mut graph, collectives) = whole_graph(trace, options, false);
    graph.keep_what_the_search_reads();
    report_of_graph(trace, &graph, collectives, options)
}

/// [`critical_path`] without each path's segments (`segments` left empty; every figure, the
/// events and the late peers as [`critical_path`] gives them): for a front end that shows no
/// segment, the whole trace's path holds a large share of the trace's events, and their
/// segments beside the graph were a fifth of the peak.
pub(super) fn critical_path_without_segments(
    trace: &Trace,
    options: &CriticalPathOptions,
) -> Result<CriticalPathReport, CriticalPathError> {
    let (mut graph, collectives) = whole_graph(trace, options, false);
    graph.keep_what_the_search_reads();
    let (report, spans) = walk_paths(trace, &graph, collectives, options, false)?;
    // The events are made once the graph is gone: the whole trace's path holds millions.
    drop(graph);
    Ok(with_events(trace, report, spans))
}

/// The critical path of every rank over `graph`, the whole trace's graph as the search reads
/// it (not built for the replay, or stripped: [`Graph::strip_replay_edges`]), which links
/// `collectives` collective instances.
pub(super) fn report_of_graph(
    trace: &Trace,
    graph: &Graph,
    collectives: usize,
    options: &CriticalPathOptions,
) -> Result<CriticalPathReport, CriticalPathError> {
    let (report, spans) = walk_paths(trace, graph, collectives, options, true)?;
    Ok(with_events(trace, report, spans))
}

/// Each rank's path over `graph` ([`walk_rank_path`]: no event yet, its segments kept when
/// `segments`) and, beside it, the spans of its nodes for [`with_events`].
fn walk_paths(
    trace: &Trace,
    graph: &Graph,
    collectives: usize,
    options: &CriticalPathOptions,
    segments: bool,
) -> Result<(CriticalPathReport, Vec<PathSpans>), CriticalPathError> {
    let stats = GraphStats {
        nodes: graph.nodes.len(),
        edges: graph.edges.len(),
        negative_edges: graph.negative,
        collectives,
    };
    let search = longest_paths(graph)?;
    let ends = path_ends(trace, graph, &search);
    let (ranks, spans) = (0..trace.ranks.len())
        .map(|r| walk_rank_path(trace, RankId(r as u32), graph, &search, ends[r], segments))
        .unzip();
    let report = CriticalPathReport {
        ranks,
        graph: stats,
        clock_shift: options.clock_shift.clone(),
    };
    Ok((report, spans))
}

/// The paths of `report` ([`walk_paths`]) with their events, from `spans`, one list per rank.
fn with_events(
    trace: &Trace,
    mut report: CriticalPathReport,
    spans: Vec<PathSpans>,
) -> CriticalPathReport {
    for (path, spans) in report.ranks.iter_mut().zip(spans) {
        add_events(trace, &report.clock_shift, path, spans);
    }
    report
}

/// The graph of the whole trace (every included span of every rank), built for the replay
/// when `replay` ([`Graph::replay`]), and the number of collective instances it links.
pub(super) fn whole_graph(
    trace: &Trace,
    options: &CriticalPathOptions,
    replay: bool,
) -> (Graph, usize) {
    let mut graph = Graph::new(options);
    graph.replay = replay;
    let index = TraceIndex::new(trace);
    let by_rank = spans_by_rank(trace);
    for (r, spans) in by_rank.iter().enumerate() {
        build_rank(trace, &index, RankId(r as u32), spans, &mut graph);
    }
    drop(by_rank);
    let members = MemberIndex::new(options);
    let collectives = add_collectives(options, &members, &mut graph);
    (graph, collectives)
}

/// Longest-path search result: per node its best distance and the edge it came by.
pub(super) struct Search {
    dist: Vec<Ns>,
    /// The edge each node's best distance came by ([`NO_EDGE`]: none, a source).
    via: Vec<u32>,
    /// Topological position of each node.
    order: Vec<u32>,
}

/// [`Search::via`] of a node no edge reaches.
const NO_EDGE: u32 = u32::MAX;

impl Search {
    fn via(&self, node: usize) -> Option<u32> {
        Some(self.via[node]).filter(|&e| e != NO_EDGE)
    }
}

/// Each node's edges, in edge order, as one list cut by node (compressed rows: 4 bytes per
/// node and per edge, where a list per node would cost a vector each).
pub(super) struct Adjacency {
    /// Node `v`'s edges are `edges[starts[v]..starts[v + 1]]`.
    starts: Vec<u32>,
    edges: Vec<u32>,
}

impl Adjacency {
    /// The edges of each node by `end` (an edge's `from` or `to`), each node's in edge order.
    pub(super) fn new(
        nodes: usize,
        edges: &[super::graph::Edge],
        end: fn(&super::graph::Edge) -> u32,
    ) -> Adjacency {
        let mut starts = vec![0u32; nodes + 1];
        for e in edges {
            starts[end(e) as usize + 1] += 1;
        }
        for v in 0..nodes {
            starts[v + 1] += starts[v];
        }
        let mut next: Vec<u32> = starts[..nodes].to_vec();
        let mut list = vec![0u32; edges.len()];
        for (i, e) in edges.iter().enumerate() {
            let slot = &mut next[end(e) as usize];
            list[*slot as usize] = i as u32;
            *slot += 1;
        }
        Adjacency {
            starts,
            edges: list,
        }
    }

    pub(super) fn of(&self, node: u32) -> &[u32] {
        let v = node as usize;
        &self.edges[self.starts[v] as usize..self.starts[v + 1] as usize]
    }
}

/// Longest paths over the DAG (generational Kahn order, nodes numbered by time).
pub(super) fn longest_paths(graph: &Graph) -> Result<Search, CriticalPathError> {
    debug_assert!(
        !graph.replay,
        "the path is searched on the graph built for it"
    );
    let n = graph.nodes.len();
    let in_edges = Adjacency::new(n, &graph.edges, |e| e.to);
    let topo = topological_order(graph, &in_edges)?;
    let mut dist = vec![0; n];
    let mut via = vec![NO_EDGE; n];
    let mut order = vec![0u32; n];
    for (pos, &v) in topo.iter().enumerate() {
        order[v as usize] = pos as u32;
        let mut best: Option<(Ns, u32)> = None;
        for &e in in_edges.of(v) {
            let edge = &graph.edges[e as usize];
            let d = dist[edge.from as usize] + graph.weight(edge);
            if best.is_none_or(|(b, _)| d > b) {
                best = Some((d, e));
            }
        }
        if let Some((d, e)) = best {
            dist[v as usize] = d;
            via[v as usize] = e;
        }
    }
    Ok(Search { dist, via, order })
}

/// The nodes of `graph` in a topological order of its edges (`in_edges`: each node's edges
/// by `to`): generational Kahn order from the nodes numbered by time, so that ties between
/// paths fall as HTA's search lets them fall.
pub(super) fn topological_order(
    graph: &Graph,
    in_edges: &Adjacency,
) -> Result<Vec<u32>, CriticalPathError> {
    let n = graph.nodes.len();
    // Node numbering by time (stable on creation order), as the search's base order.
    let mut by_time: Vec<u32> = (0..n as u32).collect();
    by_time.sort_by_key(|&i| (graph.nodes[i as usize].ts, i));
    let out_edges = Adjacency::new(n, &graph.edges, |e| e.from);
    let mut indegree: Vec<u32> = (0..n as u32).map(|v| in_edges.of(v).len() as u32).collect();
    let mut generation: Vec<u32> = by_time
        .iter()
        .copied()
        .filter(|&v| indegree[v as usize] == 0)
        .collect();
    drop(by_time);
    let mut topo: Vec<u32> = Vec::with_capacity(n);
    while !generation.is_empty() {
        let mut next = Vec::new();
        for &v in &generation {
            topo.push(v);
            for &e in out_edges.of(v) {
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
    Ok(topo)
}

/// Per rank, the rank's span node where its path ends: the largest distance (ties: the first
/// in topological order). One pass over the nodes.
pub(super) fn path_ends(trace: &Trace, graph: &Graph, search: &Search) -> Vec<Option<usize>> {
    let mut ends: Vec<Option<usize>> = vec![None; trace.ranks.len()];
    for (v, node) in graph.nodes.iter().enumerate() {
        if node.span().is_none() {
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

/// The collectives on a path (its `edges`, in order) where `rank` waited for a later peer: an
/// edge from the peer's kernel start into an "all arrived" point, followed by the edge from
/// that point to `rank`'s own kernel end (whose start is the node before its end).
fn late_peers(trace: &Trace, rank: RankId, graph: &Graph, edges: &[u32]) -> Vec<LatePeer> {
    let mut found = Vec::new();
    for pair in edges.windows(2) {
        let (into, out) = (
            &graph.edges[pair[0] as usize],
            &graph.edges[pair[1] as usize],
        );
        let arrived = graph.nodes[into.to as usize];
        let (peer, own_end) = (
            graph.nodes[into.from as usize],
            graph.nodes[out.to as usize],
        );
        if arrived.span().is_some() || peer.rank == rank || own_end.rank != rank {
            continue;
        }
        let Some(member) = own_end.span() else {
            continue;
        };
        let own_start = graph.nodes[out.to as usize - 1];
        let waited = if own_start.span() == Some(member) {
            (arrived.ts - own_start.ts).max(0)
        } else {
            0
        };
        found.push(LatePeer {
            peer: trace.ranks[peer.rank.0 as usize]
                .rank
                .unwrap_or(i64::from(peer.rank.0)),
            collective: trace.str(trace.spans[member.0 as usize].name).to_owned(),
            waited_ns: waited,
            edge: PeerEdge {
                peer_kernel: peer.span(),
                own_kernel: Some(member),
                arrived_ns: arrived.ts,
            },
        });
    }
    found
}

/// The path ending at `end` (the rank's node of largest distance: [`path_ends`]), with its
/// composition.
pub(super) fn rank_path(
    trace: &Trace,
    rank: RankId,
    graph: &Graph,
    search: &Search,
    end: Option<usize>,
) -> RankCriticalPath {
    let (mut path, spans) = walk_rank_path(trace, rank, graph, search, end, true);
    add_events(trace, graph.clock_shifts(), &mut path, spans);
    path
}

/// The spans with a node on a path, each once, in path order, with the rank of the node.
type PathSpans = Vec<(SpanId, RankId)>;

/// [`rank_path`] without its events: the spans they are made of beside it ([`add_events`]).
/// Its segments are kept when `segments`.
fn walk_rank_path(
    trace: &Trace,
    rank: RankId,
    graph: &Graph,
    search: &Search,
    end: Option<usize>,
    segments: bool,
) -> (RankCriticalPath, PathSpans) {
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
        late_peers: Vec::new(),
        note: None,
    };
    let Some(mut v) = end else {
        result.note = Some("no CPU operation, runtime call or device op in the trace".into());
        return (result, Vec::new());
    };
    result.work_ns = search.dist[v];
    let mut nodes = vec![v as u32];
    let mut edges = Vec::new();
    while let Some(e) = search.via(v) {
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
        if !segments {
            continue;
        }
        result.segments.push(PathSegment {
            kind: edge.kind,
            from_ns: from.ts,
            to_ns: to.ts,
            weight_ns: graph.weight(edge),
            from_track: Some(from.track(trace)),
            to_track: Some(to.track(trace)),
            dependency: edge.dependency(),
            span: edge.owner(),
        });
    }
    result.late_peers = late_peers(trace, rank, graph, &edges);
    drop(edges);
    // Each span once (a path holds both nodes of most of its spans), in path order.
    let mut seen: FxHashSet<SpanId> = FxHashSet::default();
    let spans = nodes
        .into_iter()
        .filter_map(|n| {
            let node = graph.nodes[n as usize];
            let id = node.span()?;
            seen.insert(id).then_some((id, node.rank))
        })
        .collect();
    (result, spans)
}

/// The events of `path` from `spans` ([`walk_rank_path`]), on the reference clock
/// (`clock_shift`: per rank, [`CriticalPathOptions::clock_shift`]), sorted by start (then
/// longer first, then [`strato_trace::Span::same_extent_order`]); each name held once.
fn add_events(trace: &Trace, clock_shift: &[Ns], path: &mut RankCriticalPath, spans: PathSpans) {
    let mut names: FxHashMap<StrId, Arc<str>> = FxHashMap::default();
    path.events.reserve_exact(spans.len());
    for (id, rank) in spans {
        let span = &trace.spans[id.0 as usize];
        let r = &trace.ranks[rank.0 as usize];
        let shift = clock_shift.get(rank.0 as usize).copied().unwrap_or(0);
        path.events.push(PathEvent {
            span: id,
            rank: r.rank.unwrap_or(i64::from(rank.0)),
            name: Arc::clone(
                names
                    .entry(span.name)
                    .or_insert_with(|| Arc::from(trace.str(span.name))),
            ),
            start_ns: span.start.saturating_add(shift),
            end_ns: span.end.saturating_add(shift),
            kind: event_kind(trace, id),
        });
    }
    path.events.sort_by_key(|e| {
        let order = trace.spans[e.span.0 as usize].same_extent_order();
        (e.start_ns, std::cmp::Reverse(e.end_ns), order, e.span.0)
    });
}
