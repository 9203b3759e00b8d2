//! The cross-rank edges: each collective instance with members in the graph gets an "all
//! arrived" node, and its member kernels wait for it before their transfer.

use rustc_hash::{FxHashMap, FxHashSet};
use strato_trace::{RankId, SpanId};

use super::graph::{Graph, Node};
use super::options::CriticalPathOptions;
use super::shapes::PathKind;

/// Which collective instances each member kernel belongs to (indices into
/// [`CriticalPathOptions::collectives`]): built once, so that each step's graph visits only the
/// instances with a member in it.
#[derive(Default)]
pub(super) struct MemberIndex {
    instances_of: FxHashMap<SpanId, Vec<u32>>,
}

impl MemberIndex {
    pub(super) fn new(options: &CriticalPathOptions) -> MemberIndex {
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
pub(super) fn add_collectives(
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
        let late = members
            .iter()
            .find(|&&(r, s, _)| r == last_rank && graph.nodes[s as usize].ts == last_start)
            .and_then(|&(_, s, _)| graph.nodes[s as usize].span())
            .expect("the late member is one of the members");
        let arrived = graph.nodes.len() as u32;
        graph.nodes.push(Node::arrived(last_start, late, last_rank));
        for &(_, s, e) in &members {
            replaced.insert(s);
            let member = graph.nodes[s as usize].span();
            graph.owned_edge(s, arrived, PathKind::CollectiveWait, false, true, member);
            graph.owned_edge(arrived, e, PathKind::Kernel, true, false, member);
        }
        used += 1;
    }
    // The member kernels' own start -> end edges would let a path skip the wait.
    graph
        .edges
        .retain(|e| !(replaced.contains(&e.from) && e.to == e.from + 1 && !e.dependency()));
    used
}
