//! One graph's replay and its predictions under the changes ([`Simulations`]), and the paths
//! read back from them ([`PathWalk`]).

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use strato_trace::{Ns, RankId, SpanId, Trace};

use super::super::graph::{Edge, Graph};
use super::super::search::Adjacency;
use super::super::shapes::{CriticalPathError, PathKind};
use super::changes::{ModuleCalls, Scale};
use super::durations::{Prepared, Role};
use super::predict::{predict, Predicted};
use super::report::{Bottleneck, PeerWait, ReplayReport, WindowPath};

/// A graph simulated twice: with the traced durations (the replay) and, with changes, with
/// them applied (`predicted`; `None` without changes: the prediction is the replay, gain 0,
/// the same path).
pub(super) struct Simulations<'g> {
    pub(super) prepared: Prepared<'g>,
    pub(super) t0: Vec<Ns>,
    pub(super) via0: Vec<u32>,
    pub(super) predicted: Option<Predicted>,
}

impl<'g> Simulations<'g> {
    /// Counts each change's ops in `report` ([`predict`]); `Err` when the graph has a cycle.
    pub(super) fn new(
        trace: &Trace,
        graph: &'g Graph,
        changes: &[Scale],
        modules: &ModuleCalls,
        report: &mut ReplayReport,
    ) -> Result<Simulations<'g>, CriticalPathError> {
        let mut sims = Simulations::replay(trace, graph)?;
        sims.predicted =
            (!changes.is_empty()).then(|| predict(&sims.prepared, trace, changes, modules, report));
        Ok(sims)
    }

    /// The replay alone (no prediction); `Err` when the graph has a cycle.
    pub(super) fn replay(
        trace: &Trace,
        graph: &'g Graph,
    ) -> Result<Simulations<'g>, CriticalPathError> {
        let prepared = Prepared::new(trace, graph)?;
        let (t0, via0) = prepared.simulate();
        Ok(Simulations {
            prepared,
            t0,
            via0,
            predicted: None,
        })
    }

    /// Reads paths from the replay.
    pub(super) fn walk<'a>(&'a self, trace: &'a Trace) -> PathWalk<'a> {
        let graph = self.prepared.graph;
        PathWalk {
            trace,
            graph,
            edges: &graph.edges,
            roles: &self.prepared.roles,
            in_edges: &self.prepared.in_edges,
        }
    }

    /// Reads paths from the prediction: along the edges it simulated (a change may have
    /// rewired them).
    pub(super) fn predicted_walk<'a>(&'a self, trace: &'a Trace) -> PathWalk<'a> {
        let rewired = self.predicted.as_ref().and_then(|p| p.rewired.as_deref());
        PathWalk {
            edges: rewired.unwrap_or(&self.prepared.graph.edges),
            ..self.walk(trace)
        }
    }
}

/// The path's name for an edge's time.
pub(super) fn kind_name(role: Role, kind: PathKind) -> &'static str {
    match role {
        Role::Untraced => "untraced",
        _ => kind.as_str(),
    }
}

/// What walking a simulation's path back reads of one graph.
#[derive(Clone, Copy)]
pub(super) struct PathWalk<'a> {
    pub(super) trace: &'a Trace,
    pub(super) graph: &'a Graph,
    /// The edges simulated: the graph's, or a copy a change rewired.
    pub(super) edges: &'a [Edge],
    pub(super) roles: &'a [Role],
    pub(super) in_edges: &'a Adjacency,
}

impl PathWalk<'_> {
    /// The path of rank `rank`'s window ending at node `end` of a simulation (`t`, `via`),
    /// inside `[start, t[end]]` ([`WindowPath`]).
    pub(super) fn path(
        &self,
        t: &[Ns],
        via: &[u32],
        end: u32,
        start: Ns,
        rank: RankId,
    ) -> WindowPath {
        let (trace, graph) = (self.trace, self.graph);
        let mut by_kind: BTreeMap<&'static str, Ns> = PathKind::ALL
            .iter()
            .map(|k| (k.as_str(), 0))
            .chain(std::iter::once(("untraced", 0)))
            .collect();
        // Per op: its time on the path, and the kind and time of its largest part.
        let mut by_owner: FxHashMap<SpanId, (Ns, &'static str, Ns)> = FxHashMap::default();
        let mut peers: BTreeMap<(i64, String), Ns> = BTreeMap::new();
        let mut v = end as usize;
        let mut first = t[v].max(start);
        while via[v] != u32::MAX && t[v] > start {
            let e = via[v] as usize;
            let edge = &self.edges[e];
            let from = edge.from as usize;
            let covered = t[v] - t[from].max(start);
            let name = kind_name(self.roles[e], edge.kind);
            *by_kind.entry(name).or_insert(0) += covered;
            // A dependency's time goes to the op that waited for it (a kernel's launch delay
            // to the kernel).
            if let Some(owner) = edge.owner().or_else(|| graph.nodes[v].span()) {
                let slot = by_owner.entry(owner).or_insert((0, name, 0));
                slot.0 += covered;
                if covered > slot.2 {
                    (slot.1, slot.2) = (name, covered);
                }
            }
            if edge.kind == PathKind::CollectiveWait && graph.nodes[from].rank != rank {
                self.peer_wait(t, edge, rank, &mut peers);
            }
            v = from;
            first = t[v].max(start);
        }
        let bottleneck = by_owner
            .into_iter()
            .max_by_key(|&(id, (ns, _, _))| (ns, std::cmp::Reverse(id.0)))
            .filter(|(_, (ns, _, _))| *ns > 0)
            .map(|(id, (ns, kind, _))| Bottleneck {
                name: trace.str(trace.spans[id.0 as usize].name).to_owned(),
                kind,
                ns,
            });
        WindowPath {
            by_kind,
            before_path_ns: first - start,
            bottleneck,
            peer_waits: peers
                .into_iter()
                .map(|((peer, collective), waited_ns)| PeerWait {
                    peer,
                    collective,
                    waited_ns,
                })
                .collect(),
        }
    }

    /// Adds the wait of `rank` at the collective whose "all arrived" point `wait` (a later
    /// peer's arrival) reaches: from the rank's own member's start, when the rank is a member.
    pub(super) fn peer_wait(
        &self,
        t: &[Ns],
        wait: &Edge,
        rank: RankId,
        peers: &mut BTreeMap<(i64, String), Ns>,
    ) {
        let (trace, graph) = (self.trace, self.graph);
        let arrived = wait.to;
        let own = self.in_edges.of(arrived).iter().find_map(|&e| {
            let from = self.edges[e as usize].from;
            (graph.nodes[from as usize].rank == rank).then_some(from)
        });
        let Some(own) = own else { return };
        let peer = graph.nodes[wait.from as usize].rank;
        let label = trace.ranks[peer.0 as usize]
            .rank
            .unwrap_or(i64::from(peer.0));
        let collective = wait
            .owner()
            .map(|id| trace.str(trace.spans[id.0 as usize].name).to_owned())
            .unwrap_or_default();
        let waited = (t[arrived as usize] - t[own as usize]).max(0);
        *peers.entry((label, collective)).or_insert(0) += waited;
    }
}
