//! The cross-rank matching ([`match_collectives`]): the calls of every rank grouped into
//! instances by (process group, seq), else by order, with incomplete instances kept and
//! labelled; and the per-instance measures on the aligned clock ([`measure`]: arrival, wait,
//! transfer, bandwidth), after the clock alignment of [`crate::distributed::clock_align`].

use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;
use strato_trace::{Ns, RankId, SpanId};

use super::calls::{CollectiveCall, RankCollectives};
use super::kinds::{bandwidths, CollectiveKind};
use crate::distributed::clock_align::{self, ClockAlignment, EndSample};

/// How an instance's members were matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum MatchBy {
    /// Process group and sequence number (args of recent PyTorch).
    GroupSeq,
    /// Process group, kind and order on the rank.
    GroupKindOrder,
    /// Kind (from the kernel name) and order on the rank: old traces without args.
    KindOrder,
}

impl MatchBy {
    /// Stable name in output.
    pub fn as_str(self) -> &'static str {
        match self {
            MatchBy::GroupSeq => "group_seq",
            MatchBy::GroupKindOrder => "group_kind_order",
            MatchBy::KindOrder => "kind_order",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum MatchKey {
    GroupSeq(String, i64),
    GroupKind(String, CollectiveKind, usize),
    Kind(CollectiveKind, usize),
}

/// One rank's part of an instance.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Member {
    pub rank: RankId,
    pub job_rank: i64,
    /// Index of the call in its rank's [`RankCollectives::calls`].
    pub call: usize,
    /// The collective kernel: the device span (critical path: the cross-rank edge's end).
    pub kernel: SpanId,
    pub launch: Option<SpanId>,
    pub device: i64,
    /// Kernel times on the rank's own clock.
    pub local_start: Ns,
    pub local_end: Ns,
    /// Kernel times on the reference clock (local + the rank's shift, see
    /// [`crate::distributed::clock_align`]); equal to the local times before [`measure`].
    pub start: Ns,
    pub end: Ns,
    /// Time from own arrival to the last member's, at most the kernel's duration; `None` for
    /// an incomplete instance.
    pub wait_ns: Option<Ns>,
}

/// One collective matched across ranks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CollectiveInstance {
    pub kind: CollectiveKind,
    /// The kind the CPU side names when it differs (`all_to_all` on a send/recv kernel).
    pub cpu_kind: Option<CollectiveKind>,
    pub cpu_name: Option<String>,
    pub group: Option<String>,
    pub seq: Option<i64>,
    /// Order of this instance among its key's on each member rank (0-based).
    pub ordinal: usize,
    pub matched_by: MatchBy,
    /// The message size the first member that says gives (the bandwidths use it).
    pub bytes: Option<u64>,
    /// The smallest and largest message size the members report, when they differ (ranks that
    /// disagree on one collective: a mismatched call, or calls matched by order that are not
    /// one collective); `None` when they agree or say nothing.
    pub bytes_disagree: Option<(u64, u64)>,
    /// Expected members: the group's size, else the job's world size, else the ranks with
    /// collectives in the input.
    pub group_size: usize,
    /// All expected members are in the input.
    pub complete: bool,
    /// One per rank that has the call, in the order the ranks were given (not arrival order).
    pub members: Vec<Member>,
    pub last_rank: Option<RankId>,
    pub last_arrival: Option<Ns>,
    pub transfer_ns: Option<Ns>,
    pub algbw_gbps: Option<f64>,
    pub busbw_gbps: Option<f64>,
    /// Waits clamped to the member's kernel duration (the member ended before the last
    /// arrival: a clock error beyond the alignment's estimate).
    pub clamped_waits: usize,
}

/// Matches the ranks' calls into instances (see the module docs for the keys). Times are left
/// local and measures empty: [`measure`] fills them once clocks are aligned. Instances are in
/// order of their earliest member start.
pub fn match_collectives(ranks: &[RankCollectives]) -> Vec<CollectiveInstance> {
    let with_calls = ranks.iter().filter(|r| !r.calls.is_empty()).count();
    let world = ranks.iter().filter_map(|r| r.world_size).max();
    let mut by_key: FxHashMap<MatchKey, usize> = FxHashMap::default();
    let mut instances: Vec<CollectiveInstance> = Vec::new();
    for rc in ranks {
        let mut ordinals: FxHashMap<(Option<String>, CollectiveKind), usize> = FxHashMap::default();
        for (ci, call) in rc.calls.iter().enumerate() {
            let slot = ordinals.entry((call.group.clone(), call.kind)).or_insert(0);
            let ordinal = *slot;
            *slot += 1;
            let (key, matched_by) = match (&call.group, call.seq) {
                (Some(g), Some(s)) => (MatchKey::GroupSeq(g.clone(), s), MatchBy::GroupSeq),
                (Some(g), None) => (
                    MatchKey::GroupKind(g.clone(), call.kind, ordinal),
                    MatchBy::GroupKindOrder,
                ),
                (None, _) => (MatchKey::Kind(call.kind, ordinal), MatchBy::KindOrder),
            };
            let index = *by_key.entry(key).or_insert_with(|| {
                instances.push(CollectiveInstance {
                    kind: call.kind,
                    cpu_kind: call.cpu_kind,
                    cpu_name: call.cpu_name.clone(),
                    group: call.group.clone(),
                    seq: call.seq,
                    ordinal,
                    matched_by,
                    bytes: call.bytes,
                    bytes_disagree: None,
                    group_size: 0,
                    complete: false,
                    members: Vec::new(),
                    last_rank: None,
                    last_arrival: None,
                    transfer_ns: None,
                    algbw_gbps: None,
                    busbw_gbps: None,
                    clamped_waits: 0,
                });
                instances.len() - 1
            });
            let inst = &mut instances[index];
            if inst.bytes.is_none() {
                inst.bytes = call.bytes;
            }
            if let (Some(first), Some(here)) = (inst.bytes, call.bytes) {
                if first != here || inst.bytes_disagree.is_some() {
                    let (low, high) = inst.bytes_disagree.unwrap_or((first, first));
                    inst.bytes_disagree = Some((low.min(here), high.max(here)));
                }
            }
            if inst.cpu_name.is_none() {
                inst.cpu_name = call.cpu_name.clone();
            }
            inst.members.push(Member {
                rank: rc.rank,
                job_rank: rc.job_rank,
                call: ci,
                kernel: call.kernel,
                launch: call.launch,
                device: call.device,
                local_start: call.start,
                local_end: call.end,
                start: call.start,
                end: call.end,
                wait_ns: None,
            });
        }
    }
    // Expected members and completeness, from the first member's call that says.
    let rank_index: FxHashMap<RankId, usize> =
        ranks.iter().enumerate().map(|(i, r)| (r.rank, i)).collect();
    for inst in &mut instances {
        let calls: Vec<&CollectiveCall> = inst
            .members
            .iter()
            .map(|m| &ranks[rank_index[&m.rank]].calls[m.call])
            .collect();
        let present: FxHashSet<i64> = inst.members.iter().map(|m| m.job_rank).collect();
        let distinct = present.len() == inst.members.len();
        if let Some(list) = calls.iter().find_map(|c| c.group_ranks.as_ref()) {
            inst.group_size = list.len();
            inst.complete = distinct && list.iter().all(|r| present.contains(r));
        } else {
            let n = calls
                .iter()
                .find_map(|c| c.group_size)
                .or(world.and_then(|w| usize::try_from(w).ok()))
                .unwrap_or(with_calls);
            inst.group_size = n;
            inst.complete = distinct && inst.members.len() == n;
        }
    }
    instances.sort_by_key(|i| i.members.iter().map(|m| m.start).min().unwrap_or(0));
    instances
}

/// Earliest member start of an instance (aligned once [`measure`] ran).
fn first_start(inst: &CollectiveInstance) -> Ns {
    inst.members.iter().map(|m| m.start).min().unwrap_or(0)
}

/// The shift of each of the `ranks` ranks of a trace onto the job's clock: the collectives of
/// `summaries` matched and measured as `strato collectives` does ([`match_collectives`],
/// [`measure`]), for an analysis that states a window over several ranks.
pub fn job_clock_shifts(summaries: &[RankCollectives], ranks: usize) -> Vec<Ns> {
    let mut instances = match_collectives(summaries);
    measure(summaries, &mut instances).shifts(ranks)
}

/// Aligns clocks from the symmetric instances (see [`crate::distributed::clock_align`]), fills
/// every instance's aligned times, waits, last arrival, transfer and bandwidths, and orders the
/// instances by their first (aligned) arrival.
pub fn measure(ranks: &[RankCollectives], instances: &mut [CollectiveInstance]) -> ClockAlignment {
    let samples: Vec<EndSample> = instances
        .iter()
        .enumerate()
        .filter(|(_, i)| i.kind.is_symmetric() && i.members.len() >= 2)
        .flat_map(|(index, i)| {
            i.members.iter().map(move |m| EndSample {
                instance: index,
                rank: m.rank,
                end: m.local_end,
            })
        })
        .collect();
    let order: Vec<RankId> = ranks.iter().map(|r| r.rank).collect();
    let alignment = clock_align::estimate(&order, &samples);
    for inst in instances.iter_mut() {
        for m in &mut inst.members {
            let shift = alignment.shift_of(m.rank);
            m.start = m.local_start + shift;
            m.end = m.local_end + shift;
        }
        if !inst.complete {
            continue;
        }
        let Some(last) = inst.members.iter().max_by_key(|m| (m.start, m.rank)) else {
            continue;
        };
        let (last_rank, last_arrival, last_end) = (last.rank, last.start, last.end);
        let mut clamped = 0;
        for m in &mut inst.members {
            let wait = last_arrival - m.start;
            let duration = m.end - m.start;
            if wait > duration {
                clamped += 1;
            }
            m.wait_ns = Some(wait.min(duration).max(0));
        }
        inst.clamped_waits = clamped;
        inst.last_rank = Some(last_rank);
        inst.last_arrival = Some(last_arrival);
        let transfer = last_end - last_arrival;
        inst.transfer_ns = Some(transfer);
        if let Some((algbw, busbw)) = inst
            .bytes
            .and_then(|b| bandwidths(inst.kind, b as f64, transfer, Some(inst.group_size)))
        {
            inst.algbw_gbps = Some(algbw);
            inst.busbw_gbps = busbw;
        }
    }
    // Stable: instances that start together keep their matching order.
    instances.sort_by_key(first_start);
    alignment
}
