//! CUDA graphs: links from the runtime call that created a graph node (the captured launch) to
//! the device ops replayed from it, through `CUDA_GRAPH_NODE_EVENTS` when the export has them,
//! else by `graphNodeId` order against the one stream capture with as many launches
//! ([`super::GRAPH_NODE_FLOW`], [`super::GRAPH_NODE_ORDER_FLOW`]).

use rustc_hash::FxHashMap;
use strato_trace::{Flow, FlowEnd, SpanId, TrackId, TrackKind};

use super::schema::{for_each_row, int, split_global_tid};
use super::{Importer, GRAPH_NODES, GRAPH_NODE_FLOW, GRAPH_NODE_ORDER_FLOW};

impl Importer<'_> {
    /// Links the device ops replayed from a CUDA graph node (`graphNodeId` set) to the runtime
    /// call that created the node, as flows `strato_analysis::cross_stack::graphs` reads
    /// (`docs/analyses/graphs.md`):
    /// - with `CUDA_GRAPH_NODE_EVENTS` (`--cuda-graph-trace=node`): the op's node is followed
    ///   through `originalGraphNodeId` (instantiation and `cudaGraphClone` clone nodes) to the
    ///   node the application created; the runtime call on the creating thread (`globalTid`)
    ///   whose span holds that creation's `start` created it (during stream capture: the
    ///   captured `cudaLaunchKernel`; else `cudaGraphAddKernelNode` and kin). The schema has no
    ///   id for that last step: containment in time on the thread is the link. Flow category
    ///   [`GRAPH_NODE_FLOW`];
    /// - ops still without a link (no node events, or a node whose creation is not in the
    ///   export): the ops of one graph launch (process, correlation id), in `graphNodeId` order,
    ///   are paired one to one with the kernel launches of a stream capture of that process
    ///   (kernel launch calls between `*StreamBeginCapture*` and `*StreamEndCapture*` on one
    ///   thread whose correlation id has no device op) with exactly as many launches, ended
    ///   before the graph launch (the latest such one). Node ids are handed out in creation
    ///   order in the exports seen, but nothing in the schema says so: these flows have category
    ///   [`GRAPH_NODE_ORDER_FLOW`], counted in the notes as `graph_ops_linked_by_node_order`;
    ///   ops left without a link are counted as `graph_ops_without_capture_link`.
    pub(super) fn graph_node_links(&mut self) -> rusqlite::Result<()> {
        if self.graph_ops.is_empty() {
            return Ok(());
        }
        let ops = std::mem::take(&mut self.graph_ops);
        // Runtime calls per thread track, in start order, with their process and correlation.
        let mut calls: FxHashMap<TrackId, Vec<(SpanId, i64, i64)>> = FxHashMap::default();
        for (&(process, corr), &id) in &self.launches {
            calls
                .entry(self.trace.spans[id.0 as usize].track)
                .or_default()
                .push((id, process, corr));
        }
        let spans = &self.trace.spans;
        for v in calls.values_mut() {
            v.sort_by_key(|(id, ..)| (spans[id.0 as usize].start, id.0));
        }
        // Node lineage and creations.
        let mut original: FxHashMap<i64, i64> = FxHashMap::default();
        let mut created: FxHashMap<i64, (i64, i64)> = FxHashMap::default();
        if let Some(mut q) = self.schema.select(GRAPH_NODES) {
            let (s, g) = (q.col("start"), q.col("globalTid"));
            let (n, o) = (q.col("graphNodeId"), q.col("originalGraphNodeId"));
            let sql = q.sql();
            for_each_row(self.conn, &sql, |row| {
                let Some(node) = int(row, n) else {
                    return;
                };
                match int(row, o) {
                    Some(from) if from != node => {
                        original.entry(node).or_insert(from);
                    }
                    _ => {
                        if let (Some(g), Some(t)) = (int(row, g), int(row, s)) {
                            created.entry(node).or_insert((g, t));
                        }
                    }
                }
            })?;
        }
        let root = |mut node: i64| -> i64 {
            for _ in 0..64 {
                match original.get(&node) {
                    Some(&from) => node = from,
                    None => break,
                }
            }
            node
        };
        let mut flows: Vec<(SpanId, SpanId, &'static str)> = Vec::new();
        let mut unlinked: FxHashMap<(i64, u64), Vec<(i64, SpanId)>> = FxHashMap::default();
        for &(op, process, node) in &ops {
            let creator = created.get(&root(node)).and_then(|&(g, t)| {
                let (pid, tid) = split_global_tid(g);
                let track = self.tracks.get(&TrackKind::Thread { pid, tid })?;
                let t = self.at(t)?;
                let on_thread = calls.get(track)?;
                let before = on_thread.partition_point(|(id, ..)| spans[id.0 as usize].start <= t);
                on_thread[..before]
                    .iter()
                    .rev()
                    .take(64)
                    .find(|(id, ..)| spans[id.0 as usize].end >= t)
                    .map(|&(id, ..)| id)
            });
            match (creator, spans[op.0 as usize].correlation.get()) {
                (Some(from), _) => flows.push((from, op, GRAPH_NODE_FLOW)),
                (None, Some(corr)) => unlinked
                    .entry((process, corr))
                    .or_default()
                    .push((node, op)),
                (None, None) => {}
            }
        }
        // The order fallback: stream captures per process, (end, launches).
        let mut captures: FxHashMap<i64, Vec<(i64, Vec<SpanId>)>> = FxHashMap::default();
        if !unlinked.is_empty() {
            for on_thread in calls.values() {
                let mut open: Option<Vec<SpanId>> = None;
                for &(id, process, corr) in on_thread {
                    let name = self.trace.str(spans[id.0 as usize].name);
                    if name.contains("StreamBeginCapture") {
                        open = Some(Vec::new());
                    } else if name.contains("StreamEndCapture") {
                        if let Some(launches) = open.take().filter(|l| !l.is_empty()) {
                            captures
                                .entry(process)
                                .or_default()
                                .push((spans[id.0 as usize].end, launches));
                        }
                    } else if let Some(launches) = open.as_mut() {
                        if name.contains("Launch")
                            && !name.contains("GraphLaunch")
                            && !self.ran.contains(&(process, corr))
                        {
                            launches.push(id);
                        }
                    }
                }
            }
        }
        let mut by_order = 0u64;
        let mut without = 0u64;
        let mut groups: Vec<_> = unlinked.into_iter().collect();
        groups.sort_unstable_by_key(|(key, _)| *key);
        for ((process, corr), mut group) in groups {
            group.sort_unstable_by_key(|&(node, op)| (node, op.0));
            let launch_start = i64::try_from(corr)
                .ok()
                .and_then(|c| self.launches.get(&(process, c)))
                .map(|id| spans[id.0 as usize].start);
            let capture = launch_start.and_then(|start| {
                captures
                    .get(&process)?
                    .iter()
                    .filter(|(end, l)| *end <= start && l.len() == group.len())
                    .max_by_key(|(end, _)| *end)
            });
            match capture {
                Some((_, launches)) => {
                    by_order += group.len() as u64;
                    for (&from, &(_, op)) in launches.iter().zip(&group) {
                        flows.push((from, op, GRAPH_NODE_ORDER_FLOW));
                    }
                }
                None => without += group.len() as u64,
            }
        }
        for (from, to, category) in flows {
            let category = self.trace.intern(category);
            let (f, t) = (
                &self.trace.spans[from.0 as usize],
                &self.trace.spans[to.0 as usize],
            );
            let flow = Flow {
                id: u64::from(to.0),
                category,
                from: Some(FlowEnd {
                    track: f.track,
                    ts: f.start,
                    span: Some(from),
                }),
                to: Some(FlowEnd {
                    track: t.track,
                    ts: t.start,
                    span: Some(to),
                }),
            };
            self.trace.flows.push(flow);
        }
        if by_order > 0 {
            self.notes()
                .count("graph_ops_linked_by_node_order", by_order);
        }
        if without > 0 {
            self.notes()
                .count("graph_ops_without_capture_link", without);
        }
        Ok(())
    }
}
