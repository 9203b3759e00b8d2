//! A graph simulated with changes ([`predict`]): work scaled, host synchronisations and
//! blocking copies made free, launches replayed as a graph's, communication or copies moved off
//! the compute stream, a straggler evened.

use std::collections::BTreeMap;

use rustc_hash::{FxHashMap, FxHashSet};
use strato_trace::{Level, Ns, RankId, SpanId, Trace, TrackId};

use super::super::graph::{Edge, Graph};
use super::super::search::Adjacency;
use super::super::shapes::PathKind;
use super::changes::{change_bits, selected, ModuleCalls, Scale, Selection, Selector};
use super::durations::{simulate_evened, Prepared, Role, REMOVED};
use super::is_collective_kernel_span;
use super::report::ReplayReport;

/// A simulation with changes: each point's time, the edge it came by, and the edges when a
/// change rewired some ([`comm_off_compute`]; `None`: the graph's).
pub(super) struct Predicted {
    pub(super) t: Vec<Ns>,
    pub(super) via: Vec<u32>,
    pub(super) rewired: Option<Vec<Edge>>,
}

/// The simulation of `prepared` with `changes` (and the module calls they select) applied to
/// the traced durations; counts each change's ops in `report`.
pub(super) fn predict(
    prepared: &Prepared,
    trace: &Trace,
    changes: &[Scale],
    modules: &ModuleCalls,
    report: &mut ReplayReport,
) -> Predicted {
    let Prepared {
        graph,
        in_edges,
        topo,
        roles,
        traced,
        typical,
        order: _,
    } = prepared;
    let Selection { masks, regions } = selected(trace, || prepared.order(trace), changes, modules);
    // A graph launch counts the launches it takes over (below), not the CPU ops it selects.
    let graph_bits = change_bits(changes, &|s| matches!(s, Selector::GraphLaunch(_)));
    for (i, change) in report.changes.iter_mut().enumerate() {
        let bit = 1u64 << i;
        if graph_bits & bit == 0 {
            change.matched_ops += masks.values().filter(|m| *m & bit != 0).count();
        }
    }
    // A synchronisation removed, or a copy's call made asynchronous: the call's wait is gone.
    let sync_bits = change_bits(changes, &|s| {
        matches!(s, Selector::Sync(_) | Selector::AsyncCopies(_))
    });
    let on_device = |n: u32| {
        trace
            .track(graph.nodes[n as usize].track(trace))
            .is_device()
    };
    let mut changed: Vec<Ns> = graph
        .edges
        .iter()
        .enumerate()
        .map(|(i, e)| {
            // A synchronisation removed: the call's wait for the device is gone.
            if sync_bits != 0
                && roles[i] == Role::Latency
                && e.kind == PathKind::SyncWait
                && on_device(e.from)
                && !on_device(e.to)
            {
                let call = graph.nodes[e.to as usize].span();
                if call.is_some_and(|c| masks.get(&c).is_some_and(|m| m & sync_bits != 0)) {
                    return REMOVED;
                }
            }
            let mask = match (roles[i], e.owner()) {
                (Role::Work, Some(owner)) => masks.get(&owner).copied().unwrap_or(0) & !sync_bits,
                _ => 0,
            };
            if mask == 0 {
                return traced[i];
            }
            let factor: f64 = changes
                .iter()
                .enumerate()
                .filter(|(c, _)| mask & (1u64 << c) != 0)
                .map(|(_, c)| c.factor)
                .product();
            (traced[i] as f64 * factor).round() as Ns
        })
        .collect();
    drop(masks);
    let evened = changes
        .iter()
        .enumerate()
        .find_map(|(i, c)| match c.selector {
            Selector::Straggler(label) => Some((i, label)),
            _ => None,
        });
    let evened = evened.and_then(|(i, label)| {
        let rank = straggler(trace, graph, label)?;
        // The collectives the rank is a member of.
        report.changes[i].matched_ops += graph
            .nodes
            .iter()
            .enumerate()
            .filter(|(v, n)| {
                n.span().is_none()
                    && in_edges
                        .of(*v as u32)
                        .iter()
                        .any(|&e| graph.nodes[graph.edges[e as usize].from as usize].rank == rank)
            })
            .count();
        Some(rank)
    });
    let overlap = changes
        .iter()
        .position(|c| c.selector == Selector::OverlapComm);
    let mut rewired: Option<Vec<Edge>> = None;
    if let Some(i) = overlap {
        let edges = rewired.get_or_insert_with(|| graph.edges.clone());
        report.changes[i].matched_ops +=
            comm_off_compute(trace, graph, in_edges, edges, &mut changed);
    }
    let copies = changes
        .iter()
        .position(|c| c.selector == Selector::OverlapCopies);
    if let Some(i) = copies {
        let edges = rewired.get_or_insert_with(|| graph.edges.clone());
        report.changes[i].matched_ops +=
            copies_off_compute(trace, graph, in_edges, edges, &mut changed);
    }
    if !regions.is_empty() {
        let edges = rewired.get_or_insert_with(|| graph.edges.clone());
        let launch = typical.get(&PathKind::Launch).copied().unwrap_or(0);
        let launches = graph_launches(trace, graph, &regions, launch, edges, &mut changed);
        // Every region's launches, to each graph-launch change (one region set for all).
        for (i, change) in report.changes.iter_mut().enumerate() {
            if graph_bits & (1u64 << i) != 0 {
                change.matched_ops += launches;
            }
        }
    }
    let edges = rewired.as_deref().unwrap_or(&graph.edges);
    let (t, via) = simulate_evened(graph, edges, topo, in_edges, &changed, evened);
    Predicted { t, via, rewired }
}

/// [`Selector::GraphLaunch`] on `edges` (a copy of the graph's) and `durations` (theirs): each
/// device op launched by a call inside a region (`regions`: call -> region) is launched at
/// the region's start instead, `launch` (the typical launch delay) later. Returns how many
/// launches it moved. The region encloses the call on its thread, so the thread's order leads
/// from the region's start to the call's: the topological order holds.
pub(super) fn graph_launches(
    trace: &Trace,
    graph: &Graph,
    regions: &FxHashMap<SpanId, SpanId>,
    launch: Ns,
    edges: &mut [Edge],
    durations: &mut [Ns],
) -> usize {
    let mut moved = 0;
    for (i, edge) in edges.iter_mut().enumerate() {
        // A launch delay: from a call's start to a device op's (not the call's own time).
        let to_device = trace
            .track(graph.nodes[edge.to as usize].track(trace))
            .is_device();
        if edge.kind != PathKind::Launch || edge.owner().is_some() || !to_device {
            continue;
        }
        let Some(call) = graph.nodes[edge.from as usize].span() else {
            continue;
        };
        let Some(region) = regions.get(&call) else {
            continue;
        };
        // The call's start node launches (its end is the call's return).
        if graph.span_nodes.get(&call).map(|n| n.0) != Some(edge.from) {
            continue;
        }
        edge.from = graph.span_nodes[region].0;
        durations[i] = launch;
        moved += 1;
    }
    moved
}

/// [`Selector::OverlapComm`] on `edges` (a copy of the graph's) and `durations` (theirs): each
/// collective kernel taken off the compute it was ordered behind on the device, as bucketing
/// (collectives on their own stream, started as their gradients are ready) would. Returns how
/// many collectives it moved.
/// - An edge into a collective's start from a device op that is not a collective (the order
///   of a stream it shares with compute, or a stream wait event on compute) is dropped. On a
///   shared stream the collective is ordered behind the stream's previous collective instead
///   (the edge rewired, with no delay), so collectives keep their order among themselves.
///   What is left to hold the collective back: its launch, its peers, the collectives before
///   it. Without any wait for the gradients it reduces, the prediction is the most
///   overlapping can buy.
/// - An edge from a collective's end into the start of the next op of its stream that is not
///   a collective is rewired from the stream's previous op that is not a collective (dropped
///   when there is none): compute on that stream no longer waits for the collective. Waits
///   for a collective across streams (a stream wait event: the optimizer reads what it
///   reduced) and host synchronisations stay.
///
/// `in_edges` and the topological order hold for the rewired edges: each one's new source
/// comes before its old one on the same stream, so the stream's order already leads from it
/// to the edge's end.
pub(super) fn comm_off_compute(
    trace: &Trace,
    graph: &Graph,
    in_edges: &Adjacency,
    edges: &mut [Edge],
    durations: &mut [Ns],
) -> usize {
    off_compute(trace, graph, in_edges, edges, durations, &|id| {
        is_collective_kernel_span(trace, &trace.spans[id.0 as usize]).then_some(OffCompute::Both)
    })
}

/// [`Selector::OverlapCopies`] on `edges` (a copy of the graph's) and `durations` (theirs):
/// host<->device copies ([`crate::device_time::memory::span_copy_direction`]) taken off the
/// compute around them on the device, as a copy stream of their own would. Returns how many
/// copies it moved.
/// - A host-to-device copy as a collective under `--overlap-comm` ([`OffCompute::Both`]): it
///   no longer waits for compute (the order of a stream it shares with it, a stream wait
///   event), and compute after it on its stream no longer waits for it. A prefetched copy
///   (the next batch copied while this one computes) is done before its reader starts: the
///   most overlapping can buy.
/// - A device-to-host copy still waits for the compute before it (that made its data), and
///   compute after it on its stream no longer waits for it ([`OffCompute::After`]).
///
/// Nothing else changes: the copies' launches, the host's waits for them (`--async-copies`,
/// `--no-sync`) and their durations (pinned memory's faster transfer is not modelled).
pub(super) fn copies_off_compute(
    trace: &Trace,
    graph: &Graph,
    in_edges: &Adjacency,
    edges: &mut [Edge],
    durations: &mut [Ns],
) -> usize {
    use crate::device_time::memory::{span_copy_direction, CopyDirection};
    off_compute(trace, graph, in_edges, edges, durations, &|id| {
        let span = &trace.spans[id.0 as usize];
        if span.level != Level::DeviceCopy {
            return None;
        }
        match span_copy_direction(trace, span) {
            CopyDirection::HostToDevice => Some(OffCompute::Both),
            CopyDirection::DeviceToHost => Some(OffCompute::After),
            _ => None,
        }
    })
}

/// Which of its orderings against compute a device op [`off_compute`] moves gives up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OffCompute {
    /// Both: it no longer waits for compute, nor compute after it for it (collectives,
    /// host-to-device copies).
    Both,
    /// Only compute after it no longer waits for it (device-to-host copies).
    After,
}

/// Takes the device ops `moved` picks off the compute (every other device op) around them, on
/// `edges` and `durations`; returns how many of them it changed an edge of.
/// - An edge into a moved op's start from a compute op, where the op gives up what came
///   before ([`OffCompute::Both`]): the order of a stream they share is rewired from the
///   stream's previous moved op (with no delay), so moved ops keep their order among
///   themselves; any other such edge (a stream wait event on compute) is dropped.
/// - An edge into a compute op's start from a moved op on the same stream, where the moved op
///   gives up what comes after it (either kind): rewired from the stream's previous
///   compute op (dropped when there is none). Waits across streams (a stream wait event: the
///   compute reads what the op produced) and host synchronisations stay.
///
/// `in_edges` and the topological order hold for the rewired edges: each one's new source
/// comes before its old one on the same stream, so the stream's order already leads from it
/// to the edge's end.
pub(super) fn off_compute(
    trace: &Trace,
    graph: &Graph,
    in_edges: &Adjacency,
    edges: &mut [Edge],
    durations: &mut [Ns],
    moved: &dyn Fn(SpanId) -> Option<OffCompute>,
) -> usize {
    // The device ops of the graph per stream, in stream order.
    let mut streams: FxHashMap<TrackId, Vec<(Ns, SpanId)>> = FxHashMap::default();
    for &id in graph.span_nodes.keys() {
        let span = &trace.spans[id.0 as usize];
        if trace.track(span.track).is_device() {
            streams
                .entry(span.track)
                .or_default()
                .push((span.start, id));
        }
    }
    let device_op = |n: u32| {
        let node = &graph.nodes[n as usize];
        node.span()
            .filter(|_| trace.track(node.track(trace)).is_device())
    };
    let mut changed: FxHashSet<SpanId> = FxHashSet::default();
    for (track, mut ops) in streams {
        ops.sort_unstable_by_key(|&(start, id)| (start, id.0));
        let mut last_moved: Option<u32> = None;
        let mut last_compute: Option<u32> = None;
        for (_, id) in ops {
            let (start, end) = graph.span_nodes[&id];
            let this = moved(id);
            for &e in in_edges.of(start) {
                let edge = &mut edges[e as usize];
                let Some(source) = device_op(edge.from) else {
                    continue;
                };
                let from = moved(source);
                if this.is_some() == from.is_some() {
                    continue;
                }
                let same_stream = graph.nodes[edge.from as usize].track(trace) == track;
                let order = same_stream && edge.kind == PathKind::Idle;
                let instead = match (this, from) {
                    (Some(OffCompute::Both), _) => {
                        changed.insert(id);
                        if order {
                            last_moved
                        } else {
                            None
                        }
                    }
                    (None, Some(kind)) if order => {
                        // A collective counts when it is taken off what came before it.
                        if kind == OffCompute::After {
                            changed.insert(source);
                        }
                        last_compute
                    }
                    // What the op waits for stays: the data it reads.
                    _ => continue,
                };
                match instead {
                    Some(from) => {
                        edge.from = from;
                        durations[e as usize] = 0;
                    }
                    None => durations[e as usize] = REMOVED,
                }
            }
            if this.is_some() {
                last_moved = Some(end);
            } else {
                last_compute = Some(end);
            }
        }
    }
    changed.len()
}

/// The rank [`Selector::Straggler`] evens in `graph`: the rank labelled `label`, or (`None`)
/// the one that arrived last at the most collectives (the lower rank on a tie); `None` when
/// the graph has no collective across ranks.
pub(super) fn straggler(trace: &Trace, graph: &Graph, label: Option<i64>) -> Option<RankId> {
    if let Some(label) = label {
        return (0..trace.ranks.len() as u32)
            .map(RankId)
            .find(|r| trace.ranks[r.0 as usize].rank.unwrap_or(i64::from(r.0)) == label);
    }
    // An "all arrived" point is drawn on its last member's rank.
    let mut last: BTreeMap<RankId, usize> = BTreeMap::new();
    for node in graph.nodes.iter().filter(|n| n.span().is_none()) {
        *last.entry(node.rank).or_default() += 1;
    }
    last.into_iter()
        .max_by_key(|&(rank, count)| (count, std::cmp::Reverse(rank)))
        .map(|(rank, _)| rank)
}
