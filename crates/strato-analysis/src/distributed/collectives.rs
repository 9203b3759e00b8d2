//! Collectives of a multi-rank job: every NCCL/RCCL collective kernel of every rank, matched
//! across ranks into instances, with arrival, wait, transfer and bandwidth per instance, the
//! ranks that arrive last (stragglers) and what each was doing just before (the cause).
//!
//! Owns: the per-rank collective summaries ([`rank_summaries`]), the cross-rank matching
//! ([`match_collectives`], public for the critical path, which needs the cross-rank edges), the
//! per-instance measures and the straggler analysis ([`collectives`]). Clock alignment lives in
//! [`crate::distributed::clock_align`] and is applied here, between matching and measuring.
//!
//! Definitions (docs/analyses/collectives.md says more):
//! - A **call** is one collective kernel on one rank (device side), with the CPU side attached
//!   when the kernel's launch (same correlation) sits inside a `record_param_comms`, `nccl:*`
//!   or `c10d::*` op. Attributes (kind, process group, seq, sizes, dtype) come from the kernel's
//!   args first, then the CPU ops', innermost first; what none of them says stays `None`.
//! - **Matching**: by (process group, seq) when both are known; else by (process group, kind,
//!   order of that group's calls of that kind on the rank); else (old traces without args) by
//!   (kind from the kernel name, order on the rank). An instance whose expected members (the
//!   group's ranks, else its size, else the job's world size, else the ranks in the input) are
//!   not all in the input is **incomplete**: kept and labelled, and what depends on the
//!   missing peers (last arrival, waits, transfer, bandwidth) is `None`.
//! - **Arrival** = device start of the rank's kernel (aligned clock); **wait** = last arrival -
//!   own arrival, at most the kernel's duration (the rest of the kernel is its transfer part,
//!   so wait + transfer part = kernel time, per member: tested); **transfer** = end of the last
//!   arriving rank's kernel - last arrival; **algbw** = bytes / transfer; **busbw** = algbw x
//!   NCCL's factor for the kind and group size n (all-reduce 2(n-1)/n; all-gather,
//!   reduce-scatter, all-to-all (n-1)/n; broadcast, reduce, send/recv 1). **Units**: decimal
//!   GB/s (10^9 B/s, NCCL-tests' unit; bytes per ns); TraceLens prints GiB/s (2^30 B/s), 7.4%
//!   less for the same rate. One definition: [`bandwidths`] (also used by `strato ops`).
//! - **Bytes** = max(in, out) elements x dtype size (NCCL-tests' "size"); for old traces the
//!   `nccl:*` annotation's single input tensor is used only for all-reduce, broadcast and
//!   reduce, where it is the message; send/recv kernels (the DLRM all-to-alls) have no size.
//! - Window: the instances' span, from the first arrival to the last kernel end (aligned).
//! - Tables: by (kind, power-of-two size bucket) ([`SizeGroup`]) and by (kind, exact message
//!   bytes) ([`ExactSizeGroup`]); every instance is in one row of each.
//!
//! Memory: the cross-rank work reads [`RankCollectives`] (one small record per collective
//! kernel per rank), never every event of every rank; the straggler cause reads the late rank's
//! spans for the few worst instances only.

use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;
use serde_json::Value;
use strato_trace::{Level, Ns, RankId, SpanId, Trace, TrackKind};

use crate::distributed::clock_align::{self, ClockAlignment, EndSample};

mod per_device;
pub use per_device::split_multi_device_ranks;

/// What a collective does, from its name (`Collective name` arg, CPU op or kernel name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum CollectiveKind {
    AllReduce,
    AllGather,
    ReduceScatter,
    AllToAll,
    Broadcast,
    Reduce,
    /// NCCL's point-to-point kernel (`ncclKernel_SendRecv`): all-to-alls and send/recv pairs
    /// both run as this, so the kernel alone does not say which.
    SendRecv,
    Send,
    Recv,
    /// A collective kernel whose kind its name does not say (`ncclDevKernel_Generic`).
    Other,
}

impl CollectiveKind {
    /// Stable name in output (`"all_reduce"`, `"send/recv"`).
    pub fn as_str(self) -> &'static str {
        match self {
            CollectiveKind::AllReduce => "all_reduce",
            CollectiveKind::AllGather => "all_gather",
            CollectiveKind::ReduceScatter => "reduce_scatter",
            CollectiveKind::AllToAll => "all_to_all",
            CollectiveKind::Broadcast => "broadcast",
            CollectiveKind::Reduce => "reduce",
            CollectiveKind::SendRecv => "send/recv",
            CollectiveKind::Send => "send",
            CollectiveKind::Recv => "recv",
            CollectiveKind::Other => "other",
        }
    }

    /// The kind a name says: `allreduce`, `all_reduce`, `_allgather_base`,
    /// `ncclKernel_AllReduce_RING_LL_Sum_float`, `nccl:all_to_all`, ... (case and `_`
    /// ignored). `None` when it names no collective.
    pub fn from_name(name: &str) -> Option<CollectiveKind> {
        let n: String = name
            .split('(')
            .next()
            .unwrap_or("")
            .chars()
            .filter(|c| *c != '_')
            .flat_map(char::to_lowercase)
            .collect();
        let kind = if n.contains("allreduce") {
            CollectiveKind::AllReduce
        } else if n.contains("allgather") {
            CollectiveKind::AllGather
        } else if n.contains("reducescatter") {
            CollectiveKind::ReduceScatter
        } else if n.contains("alltoall") {
            CollectiveKind::AllToAll
        } else if n.contains("broadcast") || n.contains("bcast") {
            CollectiveKind::Broadcast
        } else if n.contains("sendrecv") {
            CollectiveKind::SendRecv
        } else if n.contains("reduce") {
            CollectiveKind::Reduce
        } else if n.contains("send") {
            CollectiveKind::Send
        } else if n.contains("recv") {
            CollectiveKind::Recv
        } else {
            return None;
        };
        Some(kind)
    }

    /// Whether the kernels of one instance end together on every member (used to align
    /// clocks): all-reduce, all-gather, reduce-scatter.
    pub fn is_symmetric(self) -> bool {
        matches!(
            self,
            CollectiveKind::AllReduce | CollectiveKind::AllGather | CollectiveKind::ReduceScatter
        )
    }

    /// NCCL's bus-bandwidth factor for `n` ranks (nccl-tests' PERFORMANCE.md); `None` for
    /// [`CollectiveKind::Other`] or `n == 0`.
    pub fn busbw_factor(self, n: usize) -> Option<f64> {
        if n == 0 {
            return None;
        }
        let n = n as f64;
        match self {
            CollectiveKind::AllReduce => Some(2.0 * (n - 1.0) / n),
            CollectiveKind::AllGather
            | CollectiveKind::ReduceScatter
            | CollectiveKind::AllToAll => Some((n - 1.0) / n),
            CollectiveKind::Broadcast
            | CollectiveKind::Reduce
            | CollectiveKind::SendRecv
            | CollectiveKind::Send
            | CollectiveKind::Recv => Some(1.0),
            CollectiveKind::Other => None,
        }
    }
}

/// The bandwidths of collectives of `kind` moving `bytes` (NCCL-tests' size, summed over the
/// calls) in `ns`: (algbw, busbw) in decimal GB/s (10^9 B/s = bytes per ns; not GiB/s).
/// algbw = bytes / time; busbw = algbw x [`CollectiveKind::busbw_factor`] for `ranks`
/// (`None` when the group size or the factor is unknown). `None` when `ns` is not positive.
/// The one definition `collectives` (over the transfer time) and `ops` (over the kernels'
/// device time) use.
pub fn bandwidths(
    kind: CollectiveKind,
    bytes: f64,
    ns: Ns,
    ranks: Option<usize>,
) -> Option<(f64, Option<f64>)> {
    if ns <= 0 {
        return None;
    }
    let algbw = bytes / ns as f64;
    let busbw = ranks.and_then(|n| kind.busbw_factor(n)).map(|f| algbw * f);
    Some((algbw, busbw))
}

/// Whether a device op's name is a collective-communication kernel (NCCL, RCCL; HTA's
/// communication rule `^nccl|ncclKernel` plus `rccl`).
pub fn is_collective_kernel(name: &str) -> bool {
    let lower = name.get(..5).unwrap_or(name).to_ascii_lowercase();
    lower.starts_with("nccl") || lower.starts_with("rccl") || name.contains("ncclKernel")
}

use strato_trace::args_of::is_collective_cpu_op;

/// Size in bytes of one element of a PyTorch dtype as traces write it (`Float`, `float`,
/// `c10::BFloat16`, `long int`, `unsigned char`).
pub fn dtype_size(dtype: &str) -> Option<u64> {
    let d = dtype
        .trim()
        .trim_start_matches("c10::")
        .to_ascii_lowercase();
    Some(match d.as_str() {
        "float" | "float32" | "int" | "int32" | "unsigned int" | "uint32" | "complexhalf" => 4,
        "double" | "float64" | "long" | "long int" | "int64" | "long long" | "uint64"
        | "complexfloat" | "unsigned long" => 8,
        "half" | "float16" | "bfloat16" | "short" | "short int" | "int16" | "uint16" => 2,
        "byte" | "char" | "signed char" | "unsigned char" | "int8" | "uint8" | "bool"
        | "float8_e4m3fn" | "float8_e5m2" | "float8_e4m3fnuz" | "float8_e5m2fnuz" => 1,
        "complexdouble" => 16,
        _ => return None,
    })
}

/// One collective kernel on one rank, with what its args and CPU side say.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CollectiveCall {
    /// The kernel (device span).
    pub kernel: SpanId,
    /// Its launch (host span with the same correlation), when in the input.
    pub launch: Option<SpanId>,
    /// The innermost collective CPU op around the launch, when any.
    pub cpu_op: Option<SpanId>,
    /// Name of the CPU side to show (`nccl:all_reduce`, else `c10d::...`), when any.
    pub cpu_name: Option<String>,
    pub kind: CollectiveKind,
    /// The kind the CPU side names, when it differs from the kernel's (`all_to_all` run as a
    /// send/recv kernel). Not used for matching.
    pub cpu_kind: Option<CollectiveKind>,
    pub group: Option<String>,
    /// The group's members (job ranks), when the args list them.
    pub group_ranks: Option<Vec<i64>>,
    pub group_size: Option<usize>,
    pub seq: Option<i64>,
    pub bytes: Option<u64>,
    /// The message's dtype as the args name it, lower case without `c10::` (`float`,
    /// `bfloat16`), when they name it.
    pub dtype: Option<String>,
    /// Device index and times of the kernel, on the rank's own clock.
    pub device: i64,
    pub start: Ns,
    pub end: Ns,
}

/// The collective calls of one rank, in device start order: the per-rank summary the
/// cross-rank analyses read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankCollectives {
    pub rank: RankId,
    /// Rank in the job (`distributedInfo.rank`), else the input index.
    pub job_rank: i64,
    pub world_size: Option<i64>,
    pub calls: Vec<CollectiveCall>,
}

/// The keys of a call's attributes in Kineto args (PyTorch's `record_param_comms` and the
/// NCCL kernel args of PyTorch >= 2.1).
#[derive(Default)]
struct CallArgs {
    kind: Option<CollectiveKind>,
    group: Option<String>,
    group_ranks: Option<Vec<i64>>,
    group_size: Option<usize>,
    seq: Option<i64>,
    bytes: Option<u64>,
    dtype: Option<String>,
    /// Single-tensor size of an old-form `nccl:*` annotation (`Input Dims` x `Input type`).
    annotation_bytes: Option<u64>,
}

/// A dtype as the args write it (`Float`, `c10::BFloat16`, `float`) in one spelling.
fn dtype_name(text: &str) -> Option<String> {
    let t = text.trim().trim_start_matches("c10::").to_ascii_lowercase();
    (!t.is_empty()).then_some(t)
}

fn as_i64(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

impl CallArgs {
    /// Fills what is still missing from one args blob.
    fn fill(&mut self, text: Option<&str>, annotation: bool) {
        let Some(text) = text else { return };
        let Ok(Value::Object(map)) = serde_json::from_str::<Value>(text) else {
            return;
        };
        if self.kind.is_none() {
            self.kind = map
                .get("Collective name")
                .and_then(Value::as_str)
                .and_then(CollectiveKind::from_name);
        }
        if self.group.is_none() {
            self.group = map.get("Process Group Name").and_then(|v| match v {
                Value::String(s) => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            });
        }
        if self.group_ranks.is_none() {
            self.group_ranks = map.get("Process Group Ranks").and_then(|v| match v {
                Value::String(s) => serde_json::from_str::<Vec<i64>>(s).ok(),
                Value::Array(a) => a.iter().map(as_i64).collect(),
                _ => None,
            });
        }
        if self.group_size.is_none() {
            self.group_size = map
                .get("Group size")
                .and_then(as_i64)
                .and_then(|n| usize::try_from(n).ok())
                .filter(|n| *n > 0);
        }
        if self.seq.is_none() {
            self.seq = ["Seq", "seq", "Collective seq"]
                .iter()
                .find_map(|k| map.get(*k).and_then(as_i64));
        }
        if self.bytes.is_none() {
            let size = map
                .get("dtype")
                .and_then(Value::as_str)
                .and_then(dtype_size);
            let nelems = ["In msg nelems", "Out msg nelems"]
                .iter()
                .filter_map(|k| map.get(*k).and_then(as_i64))
                .filter_map(|n| u64::try_from(n).ok())
                .max();
            if let (Some(size), Some(n)) = (size, nelems) {
                self.bytes = n.checked_mul(size);
            }
        }
        if self.dtype.is_none() {
            self.dtype = map
                .get("dtype")
                .and_then(Value::as_str)
                .and_then(dtype_name);
            if annotation && self.dtype.is_none() {
                self.dtype = map
                    .get("Input type")
                    .and_then(Value::as_array)
                    .filter(|t| t.len() == 1)
                    .and_then(|t| t[0].as_str())
                    .filter(|t| dtype_size(t).is_some())
                    .and_then(dtype_name);
            }
        }
        if annotation && self.annotation_bytes.is_none() {
            // Old form: `"Input Dims": [[394241]], "Input type": ["float"]`: one tensor.
            let dims = map.get("Input Dims").and_then(Value::as_array);
            let types = map.get("Input type").and_then(Value::as_array);
            if let (Some(dims), Some(types)) = (dims, types) {
                if dims.len() == 1 && types.len() == 1 {
                    let shape: Option<Vec<u64>> = dims[0]
                        .as_array()
                        .map(|d| d.iter().filter_map(Value::as_u64).collect());
                    let size = types[0].as_str().and_then(dtype_size);
                    if let (Some(shape), Some(size)) = (shape, size) {
                        if !shape.is_empty() {
                            self.annotation_bytes = shape
                                .iter()
                                .try_fold(1u64, |acc, d| acc.checked_mul(*d))
                                .and_then(|n| n.checked_mul(size));
                        }
                    }
                }
            }
        }
    }
}

/// Extracts every rank's collective calls in one pass over the trace's spans (two, counting
/// the pass that finds the launches of the collective kernels found in the first).
pub fn rank_summaries(trace: &Trace) -> Vec<RankCollectives> {
    let mut kernels: Vec<Vec<SpanId>> = vec![Vec::new(); trace.ranks.len()];
    let mut wanted: FxHashSet<(RankId, u64)> = FxHashSet::default();
    for (i, span) in trace.spans.iter().enumerate() {
        let track = trace.track(span.track);
        // Kernels only: `gpu_user_annotation` spans named `nccl:*` share the device track.
        if !track.is_device()
            || span.level != Level::DeviceKernel
            || !is_collective_kernel(trace.str(span.name))
        {
            continue;
        }
        kernels[track.rank.0 as usize].push(SpanId(i as u32));
        if let Some(c) = span.correlation {
            wanted.insert((track.rank, c));
        }
    }
    // Launches of those kernels, and the collective CPU ops of every thread.
    let mut launches: FxHashMap<(RankId, u64), SpanId> = FxHashMap::default();
    let mut cpu_ops: FxHashMap<u32, Vec<SpanId>> = FxHashMap::default();
    for (i, span) in trace.spans.iter().enumerate() {
        let track = trace.track(span.track);
        if track.is_device() {
            continue;
        }
        if let Some(c) = span.correlation {
            if wanted.contains(&(track.rank, c)) {
                launches.entry((track.rank, c)).or_insert(SpanId(i as u32));
            }
        }
        if is_collective_cpu_op(trace.str(span.name)) {
            cpu_ops
                .entry(span.track.0)
                .or_default()
                .push(SpanId(i as u32));
        }
    }
    for list in cpu_ops.values_mut() {
        list.sort_unstable_by_key(|s| {
            let sp = &trace.spans[s.0 as usize];
            (sp.start, std::cmp::Reverse(sp.end))
        });
    }
    let mut out = Vec::with_capacity(trace.ranks.len());
    for (r, rank) in trace.ranks.iter().enumerate() {
        let rank_id = RankId(r as u32);
        let mut calls = Vec::with_capacity(kernels[r].len());
        for &k in &kernels[r] {
            let span = &trace.spans[k.0 as usize];
            let device = match trace.track(span.track).kind {
                TrackKind::DeviceQueue { device, .. } => device,
                _ => 0,
            };
            let launch = span
                .correlation
                .and_then(|c| launches.get(&(rank_id, c)).copied());
            // The collective CPU ops around the launch, innermost first.
            let mut around: Vec<SpanId> = Vec::new();
            if let Some(l) = launch {
                let ls = &trace.spans[l.0 as usize];
                if let Some(list) = cpu_ops.get(&ls.track.0) {
                    let upto =
                        list.partition_point(|s| trace.spans[s.0 as usize].start <= ls.start);
                    around = list[..upto]
                        .iter()
                        .copied()
                        .filter(|s| trace.spans[s.0 as usize].end >= ls.end)
                        .collect();
                    around.reverse();
                }
            }
            let mut args = CallArgs::default();
            args.fill(trace.args_text(span.args), false);
            for s in &around {
                let sp = &trace.spans[s.0 as usize];
                let annotation = trace.str(sp.name).starts_with("nccl:");
                args.fill(trace.args_text(sp.args), annotation);
            }
            let kernel_name = trace.str(span.name);
            let kernel_kind = CollectiveKind::from_name(kernel_name);
            let cpu_name = around
                .iter()
                .map(|s| trace.str(trace.spans[s.0 as usize].name))
                .find(|n| n.starts_with("nccl:"))
                .or_else(|| {
                    around
                        .iter()
                        .rev()
                        .map(|s| trace.str(trace.spans[s.0 as usize].name))
                        .find(|n| n.starts_with("c10d::"))
                })
                .map(str::to_owned);
            let named_kind = args
                .kind
                .or_else(|| cpu_name.as_deref().and_then(CollectiveKind::from_name));
            // The kernel says what ran; the args say what was asked for. Use the args' kind
            // when the kernel's is the generic send/recv or unknown.
            let kind = match (kernel_kind, args.kind) {
                (Some(CollectiveKind::SendRecv) | None, Some(k)) => k,
                (Some(k), _) => k,
                (None, None) => CollectiveKind::Other,
            };
            let cpu_kind = named_kind.filter(|k| *k != kind);
            let bytes = args.bytes.or_else(|| {
                matches!(
                    kind,
                    CollectiveKind::AllReduce | CollectiveKind::Broadcast | CollectiveKind::Reduce
                )
                .then_some(args.annotation_bytes)
                .flatten()
            });
            calls.push(CollectiveCall {
                kernel: k,
                launch,
                cpu_op: around.first().copied(),
                cpu_name,
                kind,
                cpu_kind,
                group: args.group,
                group_ranks: args.group_ranks,
                group_size: args.group_size,
                seq: args.seq,
                bytes,
                dtype: args.dtype,
                device,
                start: span.start,
                end: span.end,
            });
        }
        calls.sort_by_key(|c| (c.start, c.end, c.kernel));
        out.push(RankCollectives {
            rank: rank_id,
            job_rank: rank.rank.unwrap_or(r as i64),
            world_size: rank.world_size,
            calls,
        });
    }
    out
}

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

/// Options of [`collectives`].
#[derive(Debug, Clone)]
pub struct CollectivesOptions {
    /// How many of the worst late arrivals get a cause.
    pub stragglers: usize,
}

impl Default for CollectivesOptions {
    fn default() -> Self {
        CollectivesOptions { stragglers: 5 }
    }
}

/// One rank's totals over the instances.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankSummary {
    pub rank: RankId,
    pub job_rank: i64,
    /// Collective kernels of the rank.
    pub collectives: usize,
    /// Of them, in complete instances.
    pub complete: usize,
    /// Complete instances where it arrived last (ties: the later input rank is last).
    pub last_arrivals: usize,
    /// Its waits summed over complete instances; `None` when it has none.
    pub wait_ns: Option<Ns>,
    /// Its kernels' time after the last arrival, over complete instances: with `wait_ns`, the
    /// whole kernel time of those instances.
    pub transfer_part_ns: Option<Ns>,
    /// The others' waits in the instances where it arrived last; `None` when it has no
    /// complete instance.
    pub imposed_wait_ns: Option<Ns>,
    /// Kernel time of all its collective kernels.
    pub kernel_ns: Ns,
    /// The clock shift applied to it.
    pub shift_ns: Ns,
}

/// Why a rank was late to a collective. Written (JSON, tables) as its snake_case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StragglerVerdict {
    /// Its CPU launched the collective after the first peer had arrived.
    LateLaunch,
    /// Launched in time; the device was busy with other work (more than half of the window).
    DeviceBusy,
    /// Neither (e.g. a wait on an event, or the launch is not in the input).
    Other,
}

impl StragglerVerdict {
    /// The name written in outputs: `late_launch`, `device_busy`, `other`.
    pub fn as_str(self) -> &'static str {
        match self {
            StragglerVerdict::LateLaunch => "late_launch",
            StragglerVerdict::DeviceBusy => "device_busy",
            StragglerVerdict::Other => "other",
        }
    }
}

/// What the late rank was doing while the others waited.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StragglerCause {
    /// Why it was late.
    pub verdict: StragglerVerdict,
    /// The window on the late rank's own clock: from the first peer's arrival to its own.
    pub window_start: Ns,
    pub window_end: Ns,
    /// Launch start minus window start (positive: launched after the first peer arrived).
    pub launch_delay_ns: Option<Ns>,
    /// The CPU op on the launching thread that took most of the window before the launch
    /// (not one enclosing the launch, unless no other op ran).
    pub cpu_op: Option<String>,
    pub cpu_level: Option<Level>,
    pub cpu_op_ns: Option<Ns>,
    /// The outermost op around `cpu_op` on that thread (the phase or step it belongs to).
    pub cpu_context: Option<String>,
    /// Device: time busy (union of its device ops on the kernel's device) in the window, and
    /// the device op that took most of it.
    pub device_busy_ns: Ns,
    pub device_op: Option<String>,
    pub device_op_ns: Option<Ns>,
}

/// One of the worst late arrivals and its cause.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Straggler {
    /// Index in [`CollectivesReport::instances`].
    pub instance: usize,
    pub rank: RankId,
    pub job_rank: i64,
    /// The others' waits summed.
    pub imposed_wait_ns: Ns,
    /// Last arrival minus the second-to-last.
    pub lateness_ns: Ns,
    pub cause: StragglerCause,
}

/// Instances of one kind and size bucket.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizeGroup {
    pub kind: CollectiveKind,
    /// Lower bound of the power-of-two size bucket; `None`: sizes unknown.
    pub bucket_bytes: Option<u64>,
    pub count: usize,
    pub complete: usize,
    pub bytes_total: Option<u64>,
    pub transfer_ns_total: Option<Ns>,
    /// Median busbw over the complete instances that have one.
    pub busbw_gbps_median: Option<f64>,
    /// The devices' per-direction link (NVLink) bandwidth, when the device model is known.
    pub link_gbps: Option<f64>,
}

/// Instances of one kind and one exact message size (what TraceLens and NCCL-tests tabulate).
/// Times and bandwidths over the complete instances that have a transfer; bandwidths in
/// decimal GB/s (10^9 B/s).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExactSizeGroup {
    pub kind: CollectiveKind,
    /// Message bytes of each instance; `None`: sizes unknown.
    pub bytes: Option<u64>,
    pub count: usize,
    pub complete: usize,
    /// Mean and median transfer time (last arrival to the last member's end).
    pub transfer_ns_mean: Option<f64>,
    pub transfer_ns_median: Option<f64>,
    pub algbw_gbps_median: Option<f64>,
    pub busbw_gbps_median: Option<f64>,
}

/// The analysis: instances, per-rank totals, clock alignment, stragglers, size groups.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CollectivesReport {
    /// From the first arrival to the last kernel end (aligned clock); `None` without
    /// collectives.
    pub window: Option<(Ns, Ns)>,
    pub instances: Vec<CollectiveInstance>,
    pub ranks: Vec<RankSummary>,
    pub clock: ClockAlignment,
    pub stragglers: Vec<Straggler>,
    pub by_size: Vec<SizeGroup>,
    /// By (kind, exact message bytes), in that order.
    pub by_exact_size: Vec<ExactSizeGroup>,
    /// Index in `ranks` of the rank imposing the most wait, when any waited.
    pub worst_rank: Option<usize>,
}

/// Per-direction NVLink bandwidth per GPU (GB/s) of known device models: V100 SXM2 6 links x
/// 25 GB/s, A100 SXM 12 x 25, H100 SXM 18 x 25 (NVIDIA datasheets). PCIe boards: `None` (the
/// link depends on the system).
pub fn link_bandwidth_gbps(device_name: &str) -> Option<f64> {
    let n = device_name.to_ascii_uppercase();
    if n.contains("PCIE") {
        return None;
    }
    if n.contains("V100") {
        Some(150.0)
    } else if n.contains("A100") {
        Some(300.0)
    } else if n.contains("H100") || n.contains("H200") {
        Some(450.0)
    } else {
        None
    }
}

/// The device of a rank and its link bandwidth: what the size groups read of a trace's
/// devices (kept per rank when ranks are summarised one by one).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceLink {
    pub rank: RankId,
    pub device: i64,
    /// [`link_bandwidth_gbps`] of the device's name; `None` when unnamed or unknown.
    pub link_gbps: Option<f64>,
}

/// The devices of `trace` in its order, with their link bandwidths.
pub fn device_links(trace: &Trace) -> Vec<DeviceLink> {
    trace
        .devices
        .iter()
        .filter_map(|d| {
            Some(DeviceLink {
                rank: d.rank?,
                device: d.index,
                link_gbps: d.name.as_deref().and_then(link_bandwidth_gbps),
            })
        })
        .collect()
}

/// What the straggler analysis asks of the late rank's events: what it was doing in
/// `[window_start, window_end)` (its own clock) before `call` ([`straggler_cause`]).
#[derive(Debug, Clone, PartialEq)]
pub struct CauseRequest<'a> {
    pub rank: RankId,
    pub call: &'a CollectiveCall,
    pub window_start: Ns,
    pub window_end: Ns,
}

/// Runs the whole analysis (see the module docs) on a trace held whole.
pub fn collectives(trace: &Trace, options: &CollectivesOptions) -> CollectivesReport {
    collectives_of_summaries(
        rank_summaries(trace),
        &device_links(trace),
        options,
        |requests| {
            requests
                .iter()
                .map(|r| straggler_cause(trace, r.rank, r.call, r.window_start, r.window_end))
                .collect()
        },
    )
}

/// The analysis from per-rank summaries alone ([`rank_summaries`], [`device_links`]): what the
/// rank-by-rank import keeps. The causes of the worst late arrivals are asked of `causes`
/// once, for all of them together (one [`StragglerCause`] per request, in order), so a caller
/// that dropped the ranks' events re-reads only the late ranks.
pub fn collectives_of_summaries(
    ranks: Vec<RankCollectives>,
    links: &[DeviceLink],
    options: &CollectivesOptions,
    causes: impl FnOnce(&[CauseRequest<'_>]) -> Vec<StragglerCause>,
) -> CollectivesReport {
    let mut instances = match_collectives(&ranks);
    let clock = measure(&ranks, &mut instances);
    let window =
        instances
            .iter()
            .flat_map(|i| i.members.iter())
            .fold(None, |acc: Option<(Ns, Ns)>, m| match acc {
                None => Some((m.start, m.end)),
                Some((a, b)) => Some((a.min(m.start), b.max(m.end))),
            });
    let mut summaries: Vec<RankSummary> = ranks
        .iter()
        .map(|r| RankSummary {
            rank: r.rank,
            job_rank: r.job_rank,
            collectives: r.calls.len(),
            complete: 0,
            last_arrivals: 0,
            wait_ns: None,
            transfer_part_ns: None,
            imposed_wait_ns: None,
            kernel_ns: r.calls.iter().map(|c| c.end - c.start).sum(),
            shift_ns: clock.shift_of(r.rank),
        })
        .collect();
    let index_of: FxHashMap<RankId, usize> = summaries
        .iter()
        .enumerate()
        .map(|(i, s)| (s.rank, i))
        .collect();
    for inst in instances.iter().filter(|i| i.complete) {
        let imposed: Ns = inst.members.iter().filter_map(|m| m.wait_ns).sum();
        for m in &inst.members {
            let s = &mut summaries[index_of[&m.rank]];
            s.complete += 1;
            let wait = m.wait_ns.unwrap_or(0);
            *s.wait_ns.get_or_insert(0) += wait;
            *s.transfer_part_ns.get_or_insert(0) += (m.end - m.start) - wait;
            s.imposed_wait_ns.get_or_insert(0);
            if Some(m.rank) == inst.last_rank {
                s.last_arrivals += 1;
                *s.imposed_wait_ns.get_or_insert(0) += imposed;
            }
        }
    }
    let worst_rank = summaries
        .iter()
        .enumerate()
        .filter(|(_, s)| s.imposed_wait_ns.unwrap_or(0) > 0)
        .max_by_key(|(i, s)| (s.imposed_wait_ns, std::cmp::Reverse(*i)))
        .map(|(i, _)| i);
    // The worst late arrivals.
    let mut candidates: Vec<(usize, Ns)> = instances
        .iter()
        .enumerate()
        .filter(|(_, i)| i.complete && i.members.len() >= 2)
        .map(|(k, i)| (k, i.members.iter().filter_map(|m| m.wait_ns).sum()))
        .filter(|(_, w)| *w > 0)
        .collect();
    candidates.sort_by_key(|(k, w)| (std::cmp::Reverse(*w), *k));
    let late: Vec<(Straggler, CauseRequest<'_>)> = candidates
        .into_iter()
        .take(options.stragglers)
        .filter_map(|(k, imposed)| straggler(&ranks, &instances, k, imposed, &clock))
        .collect();
    let requests: Vec<CauseRequest<'_>> = late.iter().map(|(_, r)| r.clone()).collect();
    let found = causes(&requests);
    assert_eq!(
        found.len(),
        requests.len(),
        "one straggler cause per request"
    );
    let stragglers = late
        .into_iter()
        .zip(found)
        .map(|((s, _), cause)| Straggler { cause, ..s })
        .collect();
    let by_size = size_groups(links, &instances);
    let by_exact_size = exact_size_groups(&instances);
    CollectivesReport {
        window,
        instances,
        ranks: summaries,
        clock,
        stragglers,
        by_size,
        by_exact_size,
        worst_rank,
    }
}

/// The straggler of instance `index` without its cause, and the request for the cause.
fn straggler<'a>(
    ranks: &'a [RankCollectives],
    instances: &[CollectiveInstance],
    index: usize,
    imposed: Ns,
    clock: &ClockAlignment,
) -> Option<(Straggler, CauseRequest<'a>)> {
    let inst = &instances[index];
    let last = inst
        .members
        .iter()
        .find(|m| Some(m.rank) == inst.last_rank)?;
    let mut others: Vec<Ns> = inst
        .members
        .iter()
        .filter(|m| m.rank != last.rank)
        .map(|m| m.start)
        .collect();
    others.sort_unstable();
    let first_other = *others.first()?;
    let second_last = *others.last()?;
    let shift = clock.shift_of(last.rank);
    let window_start = first_other - shift;
    let window_end = last.local_start;
    let call = ranks
        .iter()
        .find(|r| r.rank == last.rank)
        .map(|r| &r.calls[last.call])?;
    let request = CauseRequest {
        rank: last.rank,
        call,
        window_start,
        window_end,
    };
    let straggler = Straggler {
        instance: index,
        rank: last.rank,
        job_rank: last.job_rank,
        imposed_wait_ns: imposed,
        lateness_ns: last.start - second_last,
        cause: StragglerCause::unknown(window_start, window_end),
    };
    Some((straggler, request))
}

impl StragglerCause {
    /// Nothing known yet about the window (filled by [`straggler_cause`]).
    pub fn unknown(window_start: Ns, window_end: Ns) -> StragglerCause {
        StragglerCause {
            verdict: StragglerVerdict::Other,
            window_start,
            window_end,
            launch_delay_ns: None,
            cpu_op: None,
            cpu_level: None,
            cpu_op_ns: None,
            cpu_context: None,
            device_busy_ns: 0,
            device_op: None,
            device_op_ns: None,
        }
    }
}

/// What rank `rank` did in `[window_start, window_end)` (its own clock) before `call`: its
/// device ops on the call's device in the window, and the CPU ops of the launching thread
/// before the launch. `call`'s span ids are `trace`'s.
pub fn straggler_cause(
    trace: &Trace,
    rank: RankId,
    call: &CollectiveCall,
    window_start: Ns,
    window_end: Ns,
) -> StragglerCause {
    let overlap = |s: Ns, e: Ns, a: Ns, b: Ns| (e.min(b) - s.max(a)).max(0);
    // Device: union of the device ops on the kernel's device in the window.
    let mut device_spans: Vec<(Ns, Ns)> = Vec::new();
    let mut by_name: FxHashMap<strato_trace::StrId, Ns> = FxHashMap::default();
    for (i, s) in trace.spans.iter().enumerate() {
        if SpanId(i as u32) == call.kernel {
            continue;
        }
        let t = trace.track(s.track);
        if t.rank != rank {
            continue;
        }
        if let TrackKind::DeviceQueue { device, .. } = t.kind {
            if device != call.device || !s.level.is_device_op() {
                continue;
            }
            let o = overlap(s.start, s.end, window_start, window_end);
            if o > 0 {
                device_spans.push((s.start.max(window_start), s.end.min(window_end)));
                *by_name.entry(s.name).or_insert(0) += o;
            }
        }
    }
    device_spans.sort_unstable();
    let mut device_busy_ns = 0;
    let mut cur: Option<(Ns, Ns)> = None;
    for (s, e) in device_spans {
        match cur {
            Some((cs, ce)) if s <= ce => cur = Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                device_busy_ns += ce - cs;
                cur = Some((s, e));
            }
            None => cur = Some((s, e)),
        }
    }
    if let Some((cs, ce)) = cur {
        device_busy_ns += ce - cs;
    }
    let top_device = by_name
        .into_iter()
        .max_by_key(|(name, ns)| (*ns, std::cmp::Reverse(*name)));
    // CPU: the launching thread before the launch.
    let mut cpu_op = None;
    let mut cpu_level = None;
    let mut cpu_op_ns = None;
    let mut cpu_context = None;
    let mut launch_delay_ns = None;
    if let Some(l) = call.launch {
        let launch = &trace.spans[l.0 as usize];
        launch_delay_ns = Some(launch.start - window_start);
        let cpu_end = launch.start.min(window_end);
        if cpu_end > window_start {
            let encloses = |s: &strato_trace::Span| s.start <= launch.start && s.end >= launch.end;
            let mut best: Option<(Ns, Ns, usize)> = None; // (overlap, start, index)
            let mut best_enclosing: Option<(Ns, usize)> = None; // (start, index)
            let mut outermost: Option<(Ns, Ns, usize)> = None;
            for (i, s) in trace.spans.iter().enumerate() {
                if s.track != launch.track || i == l.0 as usize {
                    continue;
                }
                let o = overlap(s.start, s.end, window_start, cpu_end);
                if o == 0 {
                    continue;
                }
                if encloses(s) {
                    if best_enclosing.is_none_or(|(st, _)| s.start > st) {
                        best_enclosing = Some((s.start, i));
                    }
                } else if best.is_none_or(|(bo, bs, _)| (o, s.start) > (bo, bs)) {
                    best = Some((o, s.start, i));
                }
                let len = s.end - s.start;
                if outermost.is_none_or(|(ol, os, _)| {
                    (len, std::cmp::Reverse(s.start)) > (ol, std::cmp::Reverse(os))
                }) {
                    outermost = Some((len, s.start, i));
                }
            }
            let chosen = best
                .map(|(o, _, i)| (i, o))
                .or(best_enclosing.map(|(_, i)| {
                    let s = &trace.spans[i];
                    (i, overlap(s.start, s.end, window_start, cpu_end))
                }));
            if let Some((i, o)) = chosen {
                let s = &trace.spans[i];
                cpu_op = Some(trace.str(s.name).to_owned());
                cpu_level = Some(s.level);
                cpu_op_ns = Some(o);
            }
            if let Some((_, _, i)) = outermost {
                cpu_context = Some(trace.str(trace.spans[i].name).to_owned());
            }
        }
    }
    let window = (window_end - window_start).max(0);
    let verdict = match launch_delay_ns {
        Some(d) if d > 0 => StragglerVerdict::LateLaunch,
        _ if window > 0 && device_busy_ns * 2 > window => StragglerVerdict::DeviceBusy,
        _ => StragglerVerdict::Other,
    };
    StragglerCause {
        verdict,
        window_start,
        window_end,
        launch_delay_ns,
        cpu_op,
        cpu_level,
        cpu_op_ns,
        cpu_context,
        device_busy_ns,
        device_op: top_device.as_ref().map(|(n, _)| trace.str(*n).to_owned()),
        device_op_ns: top_device.map(|(_, ns)| ns),
    }
}

/// Median of `values` (sorted here); `None` when empty.
fn median(values: &mut [f64]) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

fn exact_size_groups(instances: &[CollectiveInstance]) -> Vec<ExactSizeGroup> {
    // (count, complete, transfers, algbws, busbws) per (kind, bytes).
    type Acc = (usize, usize, Vec<f64>, Vec<f64>, Vec<f64>);
    let mut groups: std::collections::BTreeMap<(CollectiveKind, Option<u64>), Acc> =
        Default::default();
    for inst in instances {
        let (count, complete, transfers, algbw, busbw) =
            groups.entry((inst.kind, inst.bytes)).or_default();
        *count += 1;
        if inst.complete {
            *complete += 1;
            if let Some(t) = inst.transfer_ns {
                transfers.push(t as f64);
            }
        }
        algbw.extend(inst.algbw_gbps);
        busbw.extend(inst.busbw_gbps);
    }
    groups
        .into_iter()
        .map(
            |((kind, bytes), (count, complete, mut transfers, mut algbw, mut busbw))| {
                ExactSizeGroup {
                    kind,
                    bytes,
                    count,
                    complete,
                    transfer_ns_mean: (!transfers.is_empty())
                        .then(|| transfers.iter().sum::<f64>() / transfers.len() as f64),
                    transfer_ns_median: median(&mut transfers),
                    algbw_gbps_median: median(&mut algbw),
                    busbw_gbps_median: median(&mut busbw),
                }
            },
        )
        .collect()
}

fn size_groups(links: &[DeviceLink], instances: &[CollectiveInstance]) -> Vec<SizeGroup> {
    let link = |inst: &CollectiveInstance| {
        inst.members.iter().find_map(|m| {
            links
                .iter()
                .find(|d| d.rank == m.rank && d.device == m.device)
                .and_then(|d| d.link_gbps)
        })
    };
    let mut groups: std::collections::BTreeMap<
        (CollectiveKind, Option<u64>),
        (SizeGroup, Vec<f64>),
    > = Default::default();
    for inst in instances {
        let bucket = inst
            .bytes
            .filter(|b| *b > 0)
            .map(|b| 1u64 << (63 - b.leading_zeros()));
        let entry = groups.entry((inst.kind, bucket)).or_insert_with(|| {
            (
                SizeGroup {
                    kind: inst.kind,
                    bucket_bytes: bucket,
                    count: 0,
                    complete: 0,
                    bytes_total: None,
                    transfer_ns_total: None,
                    busbw_gbps_median: None,
                    link_gbps: None,
                },
                Vec::new(),
            )
        });
        let (g, busbw) = entry;
        g.count += 1;
        if let Some(b) = inst.bytes {
            *g.bytes_total.get_or_insert(0) += b;
        }
        if inst.complete {
            g.complete += 1;
        }
        if let Some(t) = inst.transfer_ns {
            *g.transfer_ns_total.get_or_insert(0) += t;
        }
        if let Some(b) = inst.busbw_gbps {
            busbw.push(b);
        }
        if g.link_gbps.is_none() {
            g.link_gbps = link(inst);
        }
    }
    groups
        .into_values()
        .map(|(mut g, mut busbw)| {
            busbw.sort_by(f64::total_cmp);
            if !busbw.is_empty() {
                let n = busbw.len();
                g.busbw_gbps_median = Some(if n % 2 == 1 {
                    busbw[n / 2]
                } else {
                    (busbw[n / 2 - 1] + busbw[n / 2]) / 2.0
                });
            }
            g
        })
        .collect()
}

#[cfg(test)]
mod tests;
