//! One rank's collectives ([`rank_summaries`]): every collective kernel with what its args and
//! CPU side say (kind, process group, seq, sizes, dtype), the small record the cross-rank work
//! reads instead of the rank's events.

use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;
use serde_json::Value;
use strato_trace::args_of::is_collective_cpu_op;
use strato_trace::OptionalId;
use strato_trace::{Level, Ns, RankId, SpanId, Trace, TrackKind};

use super::kinds::{dtype_size, is_collective_kernel, CollectiveKind};

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

impl CollectiveCall {
    /// The call with its span ids moved by `delta` (between a rank file's own trace and the
    /// whole job's).
    pub fn moved(&self, delta: i64) -> CollectiveCall {
        let moved = |s: SpanId| SpanId((i64::from(s.0) + delta) as u32);
        CollectiveCall {
            kernel: moved(self.kernel),
            launch: self.launch.map(moved),
            cpu_op: self.cpu_op.map(moved),
            ..self.clone()
        }
    }
}

impl RankCollectives {
    /// A rank file's summary as the whole job numbers it, for an analysis that reads the job's
    /// rank files one at a time: its rank after the `first_rank` ranks of the files before it,
    /// numbered `job_rank` in the job (its position when the source does not say), its span
    /// ids after the `first_span` spans of the files before it.
    pub fn in_job(&self, first_rank: u32, job_rank: Option<i64>, first_span: u32) -> Self {
        let rank = first_rank + self.rank.0;
        RankCollectives {
            rank: RankId(rank),
            job_rank: job_rank.unwrap_or(i64::from(rank)),
            world_size: self.world_size,
            calls: (self.calls.iter())
                .map(|c| c.moved(i64::from(first_span)))
                .collect(),
        }
    }
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

/// Every args key [`CallArgs::fill`] reads: what a copy of a collective's span keeps of its
/// args ([`super::CollectiveCopies`]).
pub(super) const CALL_ARGS_KEYS: &[&str] = &[
    "Collective name",
    "Process Group Name",
    "Process Group Ranks",
    "Group size",
    "Seq",
    "seq",
    "Collective seq",
    "dtype",
    "In msg nelems",
    "Out msg nelems",
    "Input Dims",
    "Input type",
];

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
        if let Some(c) = span.correlation.get() {
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
        if let Some(c) = span.correlation.get() {
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
            (
                sp.start,
                std::cmp::Reverse(sp.end),
                sp.same_extent_order(),
                s.0,
            )
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
                .get()
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
            args.fill(trace.args_text(span.args).as_deref(), false);
            for s in &around {
                let sp = &trace.spans[s.0 as usize];
                let annotation = trace.str(sp.name).starts_with("nccl:");
                args.fill(trace.args_text(sp.args).as_deref(), annotation);
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

/// [`rank_summaries`] of a trace that streams and is never held whole: fed every batch in
/// trace order ([`CollectiveSurvey::add`]), it keeps the spans [`rank_summaries`] reads
/// (collective kernels and collective CPU ops, with their args) and, for every CPU-side span
/// with a launch correlation, 32 bytes (which launch is a collective's is known only once its
/// kernel shows, often after it). [`CollectiveSurvey::finish`] gives what [`rank_summaries`]
/// gives on the whole trace, span ids included (the whole trace's: a span's place in trace
/// order). A rank whose collective kernels run on two devices or more is split by the whole
/// trace's analysis ([`super::split_multi_device_ranks`]): [`CollectiveSurvey::splits_ranks`]
/// says so, and the caller reads the trace whole instead.
#[derive(Debug, Default)]
pub struct CollectiveSurvey {
    /// Spans seen so far (the next span's id).
    seen: u32,
    /// Collective kernels and collective CPU ops: id, span, args text.
    kept: Vec<(u32, strato_trace::Span, Option<String>)>,
    /// CPU-side spans with a correlation.
    launches: Vec<LaunchRecord>,
    /// Per rank, the devices running its collective kernels.
    devices: Vec<Vec<i64>>,
}

/// A CPU-side span with a launch correlation, as [`CollectiveSurvey`] keeps it.
#[derive(Debug, Clone, Copy)]
struct LaunchRecord {
    correlation: u64,
    id: u32,
    track: strato_trace::TrackId,
    start: Ns,
    end: Ns,
}

const _: () = assert!(std::mem::size_of::<LaunchRecord>() == 32);

impl CollectiveSurvey {
    /// Adds the spans of `batch` (whose tables name their tracks and names), in trace order.
    pub fn add(&mut self, batch: &Trace) {
        for span in &batch.spans {
            let id = self.seen;
            self.seen += 1;
            let track = batch.track(span.track);
            let name = batch.str(span.name);
            if track.is_device() {
                if span.level != Level::DeviceKernel || !is_collective_kernel(name) {
                    continue;
                }
                if let TrackKind::DeviceQueue { device, .. } = track.kind {
                    let at = track.rank.0 as usize;
                    if self.devices.len() <= at {
                        self.devices.resize_with(at + 1, Vec::new);
                    }
                    if !self.devices[at].contains(&device) {
                        self.devices[at].push(device);
                    }
                }
                self.keep(batch, id, span);
                continue;
            }
            if let Some(correlation) = span.correlation.get() {
                self.launches.push(LaunchRecord {
                    correlation,
                    id,
                    track: span.track,
                    start: span.start,
                    end: span.end,
                });
            }
            if is_collective_cpu_op(name) {
                self.keep(batch, id, span);
            }
        }
    }

    fn keep(&mut self, batch: &Trace, id: u32, span: &strato_trace::Span) {
        let args = batch.args_text(span.args).map(|t| String::from(&*t));
        self.kept.push((id, span.clone(), args));
    }

    /// Whether a rank runs collective kernels on two devices or more (see the type's docs).
    pub fn splits_ranks(&self) -> bool {
        self.devices.iter().any(|d| d.len() >= 2)
    }

    /// [`rank_summaries`] of the whole trace, whose tables (every one but the events) are
    /// `tables`.
    pub fn finish(self, tables: &Trace) -> Vec<RankCollectives> {
        let CollectiveSurvey {
            kept, mut launches, ..
        } = self;
        // The first launch (in trace order) of each collective kernel's correlation, as
        // `rank_summaries` takes it.
        let wanted: FxHashSet<(u32, u64)> = (kept.iter())
            .filter(|(_, span, _)| tables.track(span.track).is_device())
            .filter_map(|(_, span, _)| {
                span.correlation
                    .get()
                    .map(|c| (tables.track(span.track).rank.0, c))
            })
            .collect();
        let rank_of = |l: &LaunchRecord| tables.track(l.track).rank.0;
        launches.retain(|l| wanted.contains(&(rank_of(l), l.correlation)));
        launches.sort_unstable_by_key(|l| (rank_of(l), l.correlation, l.id));
        launches.dedup_by_key(|l| (rank_of(l), l.correlation));
        // The spans `rank_summaries` reads, in trace order, as a trace of their own (a launch
        // is read for its place: its name is not).
        let mut mini = tables.tables();
        mini.args = strato_trace::ArgsTable::uncompressed();
        let unnamed = mini.strings.intern("");
        let mut spans: Vec<(u32, strato_trace::Span, Option<String>)> = kept;
        let held: FxHashSet<u32> = spans.iter().map(|(id, _, _)| *id).collect();
        for l in launches.into_iter().filter(|l| !held.contains(&l.id)) {
            let span = strato_trace::Span {
                track: l.track,
                start: l.start,
                end: l.end,
                name: unnamed,
                category: unnamed,
                level: Level::AcceleratorApi,
                correlation: Some(l.correlation).into(),
                external_id: OptionalId::NONE,
                args: None,
            };
            spans.push((l.id, span, None));
        }
        spans.sort_unstable_by_key(|(id, _, _)| *id);
        let mut ids = Vec::with_capacity(spans.len());
        for (id, mut span, args) in spans {
            span.args = args.as_deref().map(|text| mini.args.push(text));
            mini.spans.push(span);
            ids.push(id);
        }
        let global = |s: SpanId| SpanId(ids[s.0 as usize]);
        let mut summaries = rank_summaries(&mini);
        for summary in &mut summaries {
            for call in &mut summary.calls {
                call.kernel = global(call.kernel);
                call.launch = call.launch.map(global);
                call.cpu_op = call.cpu_op.map(global);
            }
        }
        summaries
    }
}
