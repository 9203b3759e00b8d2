//! One rank's nodes and edges: the call-order chain of each CPU thread, and the launch,
//! stream-order and synchronisation edges of its device work (stream, device/context and
//! event syncs, stream wait events). The rules are in the parent module's docs.

use rustc_hash::FxHashMap;
use strato_trace::{Level, Ns, RankId, SpanId, Trace, TrackId, TrackKind};

use super::graph::{
    arg_i64, event_kind, is_blocking_call, is_cpu_level, step_annotation, Graph, TraceIndex,
};
use super::shapes::PathKind;

/// Adds the nodes and edges of one rank from `spans`, the rank's spans that take part (a step
/// window's; every one of the rank for the whole trace), each category in trace order. Its
/// work is linear in `spans` (plus the rank's launches when it has stream-wait events).
pub(super) fn build_rank(
    trace: &Trace,
    index: &TraceIndex,
    rank: RankId,
    spans: &[SpanId],
    graph: &mut Graph,
) {
    let mut threads: FxHashMap<TrackId, Vec<SpanId>> = FxHashMap::default();
    let mut device: Vec<SpanId> = Vec::new();
    let mut syncs: Vec<SpanId> = Vec::new();
    let operation_level = index.operation_level(trace, rank);
    // The thread that annotates the rank's steps (operation level: the main thread).
    let mut step_thread: Option<TrackId> = None;
    for &id in spans {
        let span = &trace.spans[id.0 as usize];
        let track = trace.track(span.track);
        debug_assert_eq!(track.rank, rank);
        match track.kind {
            TrackKind::Thread { .. } if is_cpu_level(span.level) && span.end > span.start => {
                threads.entry(span.track).or_default().push(id);
            }
            TrackKind::Thread { .. }
                if operation_level
                    && matches!(span.level, Level::Operation | Level::Python)
                    && span.end > span.start =>
            {
                if step_annotation(trace, span).is_some() {
                    step_thread.get_or_insert(span.track);
                } else {
                    threads.entry(span.track).or_default().push(id);
                }
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
    let chains_from = graph.edges.len();
    for &t in &thread_ids {
        cpu_chain(trace, &threads[&t], graph);
    }
    let handoffs = if operation_level {
        Handoffs::Workers { step_thread }
    } else {
        Handoffs::Autograd
    };
    thread_handoffs(trace, handoffs, &thread_ids, &threads, chains_from, graph);
    // The rank's runtime calls in the graph, by correlation (the first in trace order when
    // two share one).
    let mut call_by_corr: FxHashMap<u64, SpanId> = FxHashMap::default();
    for &t in &thread_ids {
        for &id in &threads[&t] {
            let s = &trace.spans[id.0 as usize];
            if s.level == Level::AcceleratorApi {
                if let Some(c) = s.correlation.get() {
                    call_by_corr
                        .entry(c)
                        .and_modify(|first| *first = SpanId(first.0.min(id.0)))
                        .or_insert(id);
                }
            }
        }
    }
    let first_edge = graph.edges.len();
    device_edges(trace, index, rank, &device, &syncs, &call_by_corr, graph);
    if graph.replay {
        inferred_waits(trace, &thread_ids, &threads, &device, first_edge, graph);
    }
}

/// For the replay: a blocking runtime call the trace gives no synchronisation for (no
/// `cuda_sync` event, as in older traces) waited for the device op of the rank that ended last
/// while it ran; that op's end -> the call's end, a replay-only edge (without it the call's
/// wait would be CPU time no device change could shorten).
fn inferred_waits(
    trace: &Trace,
    thread_ids: &[TrackId],
    threads: &FxHashMap<TrackId, Vec<SpanId>>,
    device: &[SpanId],
    first_edge: usize,
    graph: &mut Graph,
) {
    let synced: rustc_hash::FxHashSet<u32> = graph.edges[first_edge..]
        .iter()
        .filter(|e| e.dependency() && e.kind == PathKind::SyncWait)
        .map(|e| e.to)
        .collect();
    let mut ends: Vec<(Ns, u32)> = device
        .iter()
        .map(|id| (trace.spans[id.0 as usize].end, graph.span_nodes[id].1))
        .collect();
    ends.sort_unstable();
    for t in thread_ids {
        for id in &threads[t] {
            let span = &trace.spans[id.0 as usize];
            if span.level != Level::AcceleratorApi || !is_blocking_call(trace, *id) {
                continue;
            }
            let call_end = graph.span_nodes[id].1;
            if synced.contains(&call_end) {
                continue;
            }
            let before = ends.partition_point(|&(end, _)| end <= span.end);
            if let Some(&(end, node)) = before.checked_sub(1).and_then(|i| ends.get(i)) {
                if end > span.start {
                    graph.replay_edge(node, call_end, PathKind::SyncWait);
                }
            }
        }
    }
}

/// The name of the ops an autograd worker thread runs, one per backward function.
const AUTOGRAD_FUNCTION: &str = "autograd::engine::evaluate_function";

/// The top-level spans of one thread (those no other span of the thread encloses), by start.
fn top_level(trace: &Trace, spans: &[SpanId]) -> Vec<SpanId> {
    let mut order: Vec<SpanId> = spans.to_vec();
    order.sort_by_key(|id| {
        let s = &trace.spans[id.0 as usize];
        (
            s.start,
            std::cmp::Reverse(s.end),
            s.same_extent_order(),
            id.0,
        )
    });
    let mut tops: Vec<SpanId> = Vec::new();
    let mut open_until = Ns::MIN;
    for id in order {
        let s = &trace.spans[id.0 as usize];
        if s.start >= open_until {
            tops.push(id);
            open_until = s.end;
        }
    }
    tops
}

/// Which threads of a rank hand work to which ([`thread_handoffs`]).
#[derive(Debug, Clone, Copy)]
enum Handoffs {
    /// A framework's threads: the main thread calls `backward()` and an autograd thread runs
    /// the backward functions. The main thread is the one with the most top-level ops that
    /// are not backward functions; the workers, the threads that run backward functions.
    Autograd,
    /// A rank read at the operation level ([`TraceIndex::operation_level`]) whose threads run
    /// no backward function, as a recorded Python program with a pool of worker threads: the
    /// main thread is the one that
    /// annotates the steps (without step annotations: the one with the most top-level ops);
    /// every other thread is a worker, whose untraced gap into a run is its wait for the
    /// hand-off (marked as waiting, as the main thread's wait for the return).
    Workers { step_thread: Option<TrackId> },
}

/// The edges between a rank's main thread and its worker threads ([`Handoffs`]). The main
/// thread hands work over and waits while a worker runs it: each run of a worker's top-level
/// ops that starts in a gap between two top-level ops `a`, `b` of the main thread gets `a`'s
/// end -> the run's first start (the hand-off) and, when the run ends before `b` starts, the
/// run's last end -> `b`'s start (the return); both are synchronisation edges (0 weight). The
/// main thread's untraced gap into `b` is then marked [`super::graph::Edge::waited`].
///
/// A run that starts while the main thread is inside an op: at the operation level
/// ([`Handoffs::Workers`]), when the main thread is in the op's own time (between its children,
/// or in a leaf op: `with operation("rollout"): pool.map(...)`), the same two edges go from the
/// start of that stretch of own time to the run and from the run to the stretch's end, and the
/// stretch becomes waiting ([`super::graph::Edge::set_waiting`]: latency, no weight) when the
/// run ends within it: the main thread waited inside its op. The rank's other threads and a
/// framework's (autograd) keep the op's time as the main thread's own.
fn thread_handoffs(
    trace: &Trace,
    handoffs: Handoffs,
    thread_ids: &[TrackId],
    threads: &FxHashMap<TrackId, Vec<SpanId>>,
    chains_from: usize,
    graph: &mut Graph,
) {
    let is_autograd = |id: &SpanId| {
        trace
            .str(trace.spans[id.0 as usize].name)
            .starts_with(AUTOGRAD_FUNCTION)
    };
    if thread_ids.len() < 2 {
        return;
    }
    let autograd = thread_ids
        .iter()
        .any(|t| threads[t].iter().any(is_autograd));
    // A recording of a framework's training (its backward on an autograd thread) hands off
    // as the framework does; most ranks of most traces have no autograd thread and no
    // workers: no thread is sorted for them.
    let handoffs = match (autograd, handoffs) {
        (true, _) => Handoffs::Autograd,
        (false, Handoffs::Autograd) => return,
        (false, workers) => workers,
    };
    let tops: Vec<(TrackId, Vec<SpanId>)> = thread_ids
        .iter()
        .map(|&t| (t, top_level(trace, &threads[&t])))
        .collect();
    let most_tops = || {
        tops.iter()
            .max_by_key(|(t, tops)| (tops.iter().filter(|id| !is_autograd(id)).count(), *t))
    };
    let main = match handoffs {
        Handoffs::Workers {
            step_thread: Some(step),
        } => tops.iter().find(|(t, _)| *t == step).or_else(most_tops),
        _ => most_tops(),
    };
    let Some((main, main_tops)) = main else {
        return;
    };
    let is_worker = |worker_tops: &[SpanId]| match handoffs {
        Handoffs::Autograd => worker_tops.iter().any(is_autograd),
        Handoffs::Workers { .. } => true,
    };
    let span = |id: SpanId| &trace.spans[id.0 as usize];
    let mut returns: rustc_hash::FxHashSet<u32> = rustc_hash::FxHashSet::default();
    // Operation level: the first starts of the workers' runs (their gaps into them wait).
    let mut handed: rustc_hash::FxHashSet<u32> = rustc_hash::FxHashSet::default();
    // Operation level: the main thread's own time inside its ops (edges of its chain owned by
    // an operation or a Python call), by start.
    let own_time: Vec<usize> = match handoffs {
        Handoffs::Workers { .. } => own_time_edges(trace, graph, chains_from, *main),
        Handoffs::Autograd => Vec::new(),
    };
    // Runs that start inside the main thread's own time: (that edge, first op, last end, last
    // op), one per edge and worker.
    let mut inside: Vec<(usize, SpanId, Ns, SpanId)> = Vec::new();
    for (t, worker_tops) in &tops {
        if t == main || !is_worker(worker_tops) {
            continue;
        }
        // Runs of the worker's top-level ops, by the main thread's gap they start in.
        let mut runs: Vec<(usize, Ns, SpanId, Ns, SpanId)> = Vec::new();
        let inside_from = inside.len();
        for &op in worker_tops {
            let start = span(op).start;
            let after = main_tops.partition_point(|&m| span(m).start <= start);
            let in_gap = after
                .checked_sub(1)
                .is_none_or(|a| span(main_tops[a]).end <= start);
            if !in_gap {
                if let Some(e) = covering_edge(graph, &own_time, start) {
                    match inside[inside_from..].last_mut() {
                        Some(run) if run.0 == e => {
                            if span(op).end > run.2 {
                                (run.2, run.3) = (span(op).end, op);
                            }
                        }
                        _ => inside.push((e, op, span(op).end, op)),
                    }
                }
                continue;
            }
            match runs.last_mut() {
                Some(run) if run.0 == after => {
                    if span(op).end > run.3 {
                        (run.3, run.4) = (span(op).end, op);
                    }
                }
                _ => runs.push((after, start, op, span(op).end, op)),
            }
        }
        for (after, _, first, last_end, last) in runs {
            let first_start = graph.span_nodes[&first].0;
            if let Some(a) = after.checked_sub(1) {
                let a_end = graph.span_nodes[&main_tops[a]].1;
                graph.edge(a_end, first_start, PathKind::SyncWait, false, true);
                if matches!(handoffs, Handoffs::Workers { .. }) {
                    handed.insert(first_start);
                }
            }
            if let Some(&b) = main_tops.get(after) {
                if last_end <= span(b).start {
                    let b_start = graph.span_nodes[&b].0;
                    let last_end_node = graph.span_nodes[&last].1;
                    graph.edge(last_end_node, b_start, PathKind::SyncWait, false, true);
                    returns.insert(b_start);
                }
            }
        }
    }
    let mut waiting: Vec<usize> = Vec::new();
    for (e, first, last_end, last) in inside {
        let (from, to) = (graph.edges[e].from, graph.edges[e].to);
        let first_start = graph.span_nodes[&first].0;
        graph.edge(from, first_start, PathKind::SyncWait, false, true);
        handed.insert(first_start);
        if last_end <= graph.nodes[to as usize].ts {
            let last_end_node = graph.span_nodes[&last].1;
            graph.edge(last_end_node, to, PathKind::SyncWait, false, true);
            waiting.push(e);
        }
    }
    for e in waiting {
        graph.edges[e].set_waiting();
    }
    if returns.is_empty() && handed.is_empty() {
        return;
    }
    // The main thread's untraced gaps into the ops a return reaches, and (operation level)
    // the workers' gaps into the ops a hand-off reaches (their chains' edges).
    let main_thread = *main;
    for e in &mut graph.edges[chains_from..] {
        if e.kind != PathKind::Idle || !e.dependency() {
            continue;
        }
        let into_return =
            returns.contains(&e.to) && graph.nodes[e.from as usize].track(trace) == main_thread;
        let into_handoff = handed.contains(&e.to)
            && graph.nodes[e.from as usize].track(trace) == graph.nodes[e.to as usize].track(trace);
        if into_return || into_handoff {
            e.set_waited();
        }
    }
}

/// The edges of `thread`'s chain (from `chains_from` on) that are the thread's own time inside
/// an operation or a Python call (the op's start to its first child, a child's end to the
/// next, the last child's end to the op's end; a leaf op's start to its end), sorted by their
/// start: they do not overlap.
fn own_time_edges(trace: &Trace, graph: &Graph, chains_from: usize, thread: TrackId) -> Vec<usize> {
    let mut own: Vec<usize> = (chains_from..graph.edges.len())
        .filter(|&i| {
            let e = &graph.edges[i];
            !e.dependency()
                && e.owner().is_some_and(|o| {
                    let s = &trace.spans[o.0 as usize];
                    s.track == thread && matches!(s.level, Level::Operation | Level::Python)
                })
        })
        .collect();
    own.sort_by_key(|&i| graph.nodes[graph.edges[i].from as usize].ts);
    own
}

/// The edge of `own` (sorted by start, [`own_time_edges`]) whose time holds `t` (from its
/// start, inclusive, to its end, exclusive).
fn covering_edge(graph: &Graph, own: &[usize], t: Ns) -> Option<usize> {
    let at = own.partition_point(|&i| graph.nodes[graph.edges[i].from as usize].ts <= t);
    let &e = own.get(at.checked_sub(1)?)?;
    (t < graph.nodes[graph.edges[e].to as usize].ts).then_some(e)
}

/// The call-order chain of one thread (see the module docs).
fn cpu_chain(trace: &Trace, spans: &[SpanId], graph: &mut Graph) {
    let mut order: Vec<SpanId> = spans.to_vec();
    order.sort_by_key(|id| {
        let s = &trace.spans[id.0 as usize];
        (
            s.start,
            std::cmp::Reverse(s.end),
            s.same_extent_order(),
            id.0,
        )
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
            let blocking = is_blocking_call(trace, id);
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
        if let Some(c) = span(id).correlation.get() {
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
                .get()
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
        let launch = span(id)
            .correlation
            .get()
            .and_then(|c| call_by_corr.get(&c));
        let ts = |n: u32| graph.nodes[n as usize].ts;
        let launched_on_empty = launch.is_some_and(|&call| {
            let call_start = span(call).start;
            previous.is_none_or(|p| ts(p) < call_start)
                && waits_on.is_none_or(|w| ts(w) < call_start)
        });
        let call_start = launch.map(|call| graph.span_nodes[call].0);
        let mut launch_edge = false;
        let mut stream_edge = false;
        if launched_on_empty {
            let call_start = call_start.expect("checked above");
            graph.edge(call_start, start, PathKind::Launch, true, true);
            launch_edge = true;
        } else if let Some(p) = previous {
            if waits_on.is_none_or(|w| ts(w) < ts(p)) {
                graph.edge(p, start, PathKind::Idle, true, true);
                stream_edge = true;
            }
        }
        // The replay keeps the constraints the path left out: under a change, another one can
        // bind.
        if let (false, Some(call_start)) = (launch_edge, call_start) {
            graph.replay_edge(call_start, start, PathKind::Launch);
        }
        if let (false, Some(p)) = (stream_edge, previous) {
            graph.replay_edge(p, start, PathKind::Idle);
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
    let call = *call_by_corr.get(&span(sync).correlation.get()?)?;
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
