//! Graph-aware attribution: device ops replayed by a CUDA/HIP graph launch (`cudaGraphLaunch`,
//! `hipGraphLaunch`, `cuGraphLaunch`) mapped back to the ops and modules that issued them while
//! the graph was captured.
//!
//! A replay trace shows each graph's kernels behind one launch call, so without this step every
//! analysis attributes them to whatever wrapped that call. The capture trace (the same program
//! profiled while it captured its graphs) records every captured launch with its kernel name
//! (and grid/block) under the Python frames, modules, annotations and framework ops that issued
//! it. This module owns the step between import and analysis that joins the two:
//! [`attribute_graphs`] takes the replay trace and the capture trace and returns the replay
//! trace with graph kernels re-parented, plus a [`GraphCoverage`] summary. Every analysis then
//! sees the captured ops through the ordinary rules of [`crate::scope`] and
//! [`crate::cross_stack::hierarchy`], with no change of its own.
//!
//! Rules (see `docs/analyses/graphs.md`):
//! - a *graph launch* is a CPU span whose name contains `GraphLaunch`; the device work with its
//!   (rank, correlation id) are the *graph kernels* it replayed, in start order;
//! - a *captured graph* is the kernel launches (CPU spans with a `kernel` arg) between a
//!   `*StreamBeginCapture*` and the next `*StreamEndCapture*` on the same thread of the capture
//!   trace; a capture trace without capture markers gives one graph: its launches whose
//!   correlation id has no device op (captured launches do not run);
//! - a graph launch is aligned with every captured graph by kernel name (Myers diff, the
//!   `similar` crate); the captured graph with the most matched kernels wins (ties: the earlier
//!   one). Matched pairs whose grid and block are both known and differ are not mapped;
//! - for a mapped graph launch, the captured launches and their enclosing spans on the capture
//!   thread that lie within the capture window are copied onto a *graph-capture track* of the
//!   launching process (less the Python frames nested inside a framework op, such as the Triton
//!   launcher's: they would hide the op from the kernel's chain of parents) (a thread track named
//!   `graph capture: ...`, see [`is_graph_capture_track`]). Their times keep their order but are
//!   laid out inside the graph launch call (the captured ops did not run on the CPU during the
//!   replay, so they carry no CPU time: analyses ignore those tracks for CPU time, see
//!   [`crate::scope`]). Each mapped kernel gets the correlation id of its copied launch, and a flow
//!   of category `graph_node` from that launch to the kernel;
//! - graph kernels left unmapped keep their graph launch as parent.
//!
//! No window of its own: the coverage counts conserve (`mapped + unmapped = graph_kernels`,
//! per launch and in total).

use rustc_hash::FxHashMap;
use serde::Serialize;
use similar::{capture_diff_slices, Algorithm, DiffOp};
use strato_trace::OptionalId;
use strato_trace::{Flow, FlowEnd, Level, Ns, Span, Trace, Track, TrackId, TrackKind};

use crate::scope::is_device_work;

// The shared names: the tracks [`attribute_graphs`] adds (copies of captured ops, no CPU time),
// the flows it and the nsys importer write, the launch calls that replay a graph.
pub use strato_trace::names::{
    is_graph_capture_track, is_graph_launch_name, GRAPH_CAPTURE_TRACK_PREFIX, GRAPH_NODE_FLOW,
    GRAPH_NODE_ORDER_FLOW,
};

/// Why the capture trace cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GraphError {
    #[error("the capture trace has no captured kernel launches (no kernel launch calls with a `kernel` arg between stream begin/end capture, nor launches without a device op)")]
    NoCapturedLaunches,
}

/// How one graph launch of the replay was mapped.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GraphLaunchCoverage {
    /// The graph launch call's span index in the returned trace.
    pub launch_span: u32,
    pub name: String,
    pub start_ns: Ns,
    /// Device ops it replayed.
    pub graph_kernels: usize,
    /// Of those, mapped to a captured launch.
    pub mapped: usize,
    /// Index of the captured graph aligned with it (in capture order), when any matched.
    pub captured_graph: Option<usize>,
    /// Launches in that captured graph.
    pub captured_launches: usize,
    /// `mapped / max(graph_kernels, captured_launches)`: 1.0 when the replayed sequence is the
    /// captured one, kernel for kernel.
    pub confidence: f64,
    /// How replayed ops were paired with captured launches: [`METHOD_NAME_ALIGNMENT`],
    /// [`METHOD_GRAPH_NODE`] (exact: the export links each node to its creation) or
    /// [`METHOD_NODE_ORDER`] (node order against a stream capture of as many launches; right
    /// only if node ids follow capture order).
    pub method: &'static str,
}

/// What [`attribute_graphs`] mapped.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GraphCoverage {
    /// Where the capture trace came from.
    pub capture_source: String,
    /// Captured graphs found in the capture trace.
    pub captured_graphs: usize,
    pub graph_launches: usize,
    /// Device ops replayed by a graph launch.
    pub graph_kernels: usize,
    /// Of those, mapped to a captured launch.
    pub graph_kernels_mapped: usize,
    /// Of those, paired by node order ([`METHOD_NODE_ORDER`]).
    pub mapped_by_node_order: usize,
    /// Graph launches whose replayed sequence equals the captured one (confidence 1.0).
    pub exact_launches: usize,
    /// Mapped pairs whose grid and block were known on both sides / agreed.
    pub config_checked: usize,
    pub config_agreed: usize,
    /// Pairs matched by name but with a different grid or block (left unmapped).
    pub config_rejected: usize,
    /// Captured spans copied into the trace (launches and their enclosing spans).
    pub spans_added: usize,
    pub launches: Vec<GraphLaunchCoverage>,
}

/// One captured kernel launch.
#[derive(Debug, Clone)]
struct Captured {
    span: u32,
    kernel: String,
    config: Option<(Vec<i64>, Vec<i64>)>,
}

/// One captured graph: its launches in order and the time window of the capture.
#[derive(Debug, Clone)]
struct CapturedGraph {
    track: TrackId,
    window: (Ns, Ns),
    launches: Vec<Captured>,
}

fn parse_args(trace: &Trace, span: &Span) -> Option<serde_json::Map<String, serde_json::Value>> {
    let text = trace.args_text(span.args)?;
    match serde_json::from_str::<serde_json::Value>(&text).ok()? {
        serde_json::Value::Object(m) => Some(m),
        _ => None,
    }
}

fn int_list(v: Option<&serde_json::Value>) -> Option<Vec<i64>> {
    v?.as_array()?.iter().map(|x| x.as_i64()).collect()
}

fn config_of(args: &serde_json::Map<String, serde_json::Value>) -> Option<(Vec<i64>, Vec<i64>)> {
    Some((int_list(args.get("grid"))?, int_list(args.get("block"))?))
}

/// The captured graphs of a capture trace (see the module rules).
fn captured_graphs(capture: &Trace) -> Vec<CapturedGraph> {
    let mut by_track: FxHashMap<TrackId, Vec<u32>> = FxHashMap::default();
    for (i, s) in capture.spans.iter().enumerate() {
        if matches!(capture.track(s.track).kind, TrackKind::Thread { .. }) {
            by_track.entry(s.track).or_default().push(i as u32);
        }
    }
    let mut device_correlations: rustc_hash::FxHashSet<(u32, u64)> = Default::default();
    for s in &capture.spans {
        let t = capture.track(s.track);
        if t.is_device() && is_device_work(s.level) {
            if let Some(c) = s.correlation.get() {
                device_correlations.insert((t.rank.0, c));
            }
        }
    }
    let mut tracks: Vec<TrackId> = by_track.keys().copied().collect();
    tracks.sort();
    let mut graphs = Vec::new();
    let mut fallback: Vec<CapturedGraph> = Vec::new();
    for t in tracks {
        let spans = by_track.get_mut(&t).expect("key");
        spans.sort_by_key(|&i| {
            let s = &capture.spans[i as usize];
            (s.start, std::cmp::Reverse(s.end), s.same_extent_order(), i)
        });
        let mut open: Option<Ns> = None;
        let mut current: Vec<Captured> = Vec::new();
        let mut loose: Vec<Captured> = Vec::new();
        for &i in spans.iter() {
            let s = &capture.spans[i as usize];
            let name = capture.str(s.name);
            if name.contains("StreamBeginCapture") {
                open = Some(s.start);
                current.clear();
                continue;
            }
            if name.contains("StreamEndCapture") {
                if let Some(start) = open.take() {
                    if !current.is_empty() {
                        graphs.push(CapturedGraph {
                            track: t,
                            window: (start, s.end),
                            launches: std::mem::take(&mut current),
                        });
                    }
                }
                continue;
            }
            if s.level != Level::AcceleratorApi {
                continue;
            }
            let Some(args) = parse_args(capture, s) else {
                continue;
            };
            let Some(kernel) = args.get("kernel").and_then(|k| k.as_str()) else {
                continue;
            };
            let launch = Captured {
                span: i,
                kernel: kernel.to_owned(),
                config: config_of(&args),
            };
            if open.is_some() {
                current.push(launch);
            } else {
                let rank = capture.track(s.track).rank.0;
                let ran = s
                    .correlation
                    .get()
                    .is_some_and(|c| device_correlations.contains(&(rank, c)));
                if !ran {
                    loose.push(launch);
                }
            }
        }
        if !loose.is_empty() {
            let first = &capture.spans[loose[0].span as usize];
            let last = &capture.spans[loose[loose.len() - 1].span as usize];
            fallback.push(CapturedGraph {
                track: t,
                window: (first.start, last.end),
                launches: loose,
            });
        }
    }
    if graphs.is_empty() {
        fallback
    } else {
        graphs
    }
}

/// The alignment of one replayed sequence with one captured graph: (replayed index, captured
/// index) pairs matched by name.
fn align(replayed: &[u32], captured: &[u32]) -> Vec<(usize, usize)> {
    let mut pairs = Vec::new();
    for op in capture_diff_slices(Algorithm::Myers, captured, replayed) {
        if let DiffOp::Equal {
            old_index,
            new_index,
            len,
        } = op
        {
            pairs.extend((0..len).map(|k| (new_index + k, old_index + k)));
        }
    }
    pairs
}

/// The spans of the capture thread that enclose a captured launch of `graph` and lie within
/// its window, and the launches themselves, in (start, longest first) order. Thread states
/// (an nsys export's `running` spans) are not ops and are left out.
fn spans_to_copy(capture: &Trace, graph: &CapturedGraph, thread_spans: &[u32]) -> Vec<u32> {
    let (w0, w1) = graph.window;
    let launches: rustc_hash::FxHashSet<u32> = graph.launches.iter().map(|l| l.span).collect();
    let mut keep: rustc_hash::FxHashSet<u32> = Default::default();
    let mut stack: Vec<u32> = Vec::new();
    for &i in thread_spans {
        let s = &capture.spans[i as usize];
        if s.start < w0
            || s.end > w1
            || s.level == Level::Other
            || capture.str(s.category) == strato_trace::names::THREAD_STATE_CATEGORY
        {
            continue;
        }
        while let Some(&top) = stack.last() {
            let ts = &capture.spans[top as usize];
            if ts.end < s.end || (ts.end <= s.start && ts.end > ts.start) {
                stack.pop();
            } else {
                break;
            }
        }
        if launches.contains(&i) {
            keep.insert(i);
            // Python frames inside a framework op (the Triton launcher's, a custom op's
            // wrapper) are left out: a Python frame never has a framework op as parent in
            // [`crate::cross_stack::hierarchy`], so they would hide the op from the launch's chain.
            let mut under_backend = false;
            for &a in &stack {
                let level = capture.spans[a as usize].level;
                if !(under_backend && level == Level::Python) {
                    keep.insert(a);
                }
                under_backend |= level == Level::Backend;
            }
        }
        stack.push(i);
    }
    let mut out: Vec<u32> = keep.into_iter().collect();
    out.sort_by_key(|&i| {
        let s = &capture.spans[i as usize];
        (s.start, std::cmp::Reverse(s.end), i)
    });
    out
}

/// Lays `times` (sorted, distinct) out inside `[g0, g1]`, keeping their order and keeping
/// distinct times distinct (1 ns apart at least, so nesting survives; the layout may then
/// run past `g1`).
fn layout(times: &[Ns], g0: Ns, g1: Ns) -> FxHashMap<Ns, Ns> {
    let n = times.len().max(1) as i128;
    let room = i128::from((g1 - g0).max(0));
    times
        .iter()
        .enumerate()
        .map(|(k, &t)| {
            let k = k as i128;
            let offset = if room >= n { k * room / n } else { k };
            (t, g0 + offset as Ns)
        })
        .collect()
}

/// The graph-capture track of (rank, pid, capture thread), added on first use.
fn capture_track_of(
    trace: &mut Trace,
    tracks: &mut FxHashMap<(u32, i64, TrackId), TrackId>,
    capture: &Trace,
    key: (u32, i64, TrackId),
    capture_source: &str,
) -> TrackId {
    let (rank, pid, capture_thread) = key;
    *tracks.entry(key).or_insert_with(|| {
        let tid = match capture.track(capture_thread).kind {
            TrackKind::Thread { tid, .. } => tid,
            _ => 0,
        };
        let synthetic_tid = -0x6772_0000_i64 - trace.tracks.len() as i64;
        trace.add_track(Track {
            rank: strato_trace::RankId(rank),
            kind: TrackKind::Thread {
                pid,
                tid: synthetic_tid,
            },
            name: Some(format!(
                "{GRAPH_CAPTURE_TRACK_PREFIX}{capture_source} (tid {tid})"
            )),
            sort_index: None,
        })
    })
}

/// Copies the `capture` spans `to_copy` onto `capture_track` of `trace`, their times laid out
/// inside `[g0, g1]` (the graph launch call) in their order; returns capture span -> copy.
fn copy_spans(
    trace: &mut Trace,
    capture: &Trace,
    capture_track: TrackId,
    to_copy: &[u32],
    (g0, g1): (Ns, Ns),
) -> FxHashMap<u32, u32> {
    let mut times: Vec<Ns> = to_copy
        .iter()
        .flat_map(|&i| {
            let s = &capture.spans[i as usize];
            [s.start, s.end]
        })
        .collect();
    times.sort_unstable();
    times.dedup();
    let at = layout(&times, g0, g1);
    let mut copy_of: FxHashMap<u32, u32> = FxHashMap::default();
    for &i in to_copy {
        let s = &capture.spans[i as usize];
        let args = capture.args_text(s.args).map(|text| trace.add_args(&text));
        let span = Span {
            track: capture_track,
            start: at[&s.start],
            end: at[&s.end],
            name: trace.intern(capture.str(s.name)),
            category: trace.intern(capture.str(s.category)),
            level: s.level,
            correlation: OptionalId::NONE,
            external_id: s.external_id,
            args,
        };
        trace.spans.push(span);
        copy_of.insert(i, (trace.spans.len() - 1) as u32);
    }
    copy_of
}

/// Re-parents device op `op` to the copied launch `copied`: a fresh correlation id on both and
/// a flow of `category` from the copy to the op. `(correlation, flow)` are the next free ids.
fn link(
    trace: &mut Trace,
    copied: u32,
    op: u32,
    category: strato_trace::StrId,
    (next_correlation, next_flow): (&mut u64, &mut u64),
) {
    let correlation = *next_correlation;
    *next_correlation = next_correlation.saturating_add(1);
    trace.spans[copied as usize].correlation = Some(correlation).into();
    trace.spans[op as usize].correlation = Some(correlation).into();
    let (from, to) = (&trace.spans[copied as usize], &trace.spans[op as usize]);
    let flow = Flow {
        id: *next_flow,
        category,
        from: Some(FlowEnd {
            track: from.track,
            ts: from.start,
            span: Some(strato_trace::SpanId(copied)),
        }),
        to: Some(FlowEnd {
            track: to.track,
            ts: to.start,
            span: Some(strato_trace::SpanId(op)),
        }),
    };
    *next_flow = next_flow.saturating_add(1);
    trace.flows.push(flow);
}

/// Maps the graph kernels of `replay` to the captured launches of `capture` (see the module
/// rules) and returns the replay trace with the captured ops copied in and the mapped kernels
/// re-parented, and the coverage. `capture_source` names the capture trace in track names and
/// the summary.
pub fn attribute_graphs(
    replay: Trace,
    capture: &Trace,
    capture_source: &str,
) -> Result<(Trace, GraphCoverage), GraphError> {
    let graphs = captured_graphs(capture);
    if graphs.is_empty() {
        return Err(GraphError::NoCapturedLaunches);
    }
    let mut trace = replay;
    // Kernel names as small integers shared by both sides.
    let mut names: FxHashMap<String, u32> = FxHashMap::default();
    let mut key = |n: &str| -> u32 {
        let next = names.len() as u32;
        *names.entry(n.to_owned()).or_insert(next)
    };
    let captured_keys: Vec<Vec<u32>> = graphs
        .iter()
        .map(|g| g.launches.iter().map(|l| key(&l.kernel)).collect())
        .collect();
    // Graph launches and their replayed device ops.
    let mut replayed: FxHashMap<(u32, u64), Vec<u32>> = FxHashMap::default();
    for (i, s) in trace.spans.iter().enumerate() {
        let t = trace.track(s.track);
        if t.is_device() && is_device_work(s.level) {
            if let Some(c) = s.correlation.get() {
                replayed.entry((t.rank.0, c)).or_default().push(i as u32);
            }
        }
    }
    let mut launches: Vec<u32> = trace
        .spans
        .iter()
        .enumerate()
        .filter(|(_, s)| {
            s.correlation.is_some()
                && matches!(trace.track(s.track).kind, TrackKind::Thread { .. })
                && is_graph_launch_name(trace.str(s.name))
        })
        .map(|(i, _)| i as u32)
        .collect();
    launches.sort_by_key(|&i| (trace.spans[i as usize].start, i));
    let mut next_correlation = trace
        .spans
        .iter()
        .filter_map(|s| s.correlation.get())
        .max()
        .unwrap_or(0)
        .saturating_add(1);
    let mut next_flow = trace
        .flows
        .iter()
        .map(|f| f.id)
        .max()
        .unwrap_or(0)
        .saturating_add(1);
    // Capture thread spans, sorted, per captured graph's track.
    let mut thread_spans: FxHashMap<TrackId, Vec<u32>> = FxHashMap::default();
    for g in &graphs {
        thread_spans.entry(g.track).or_insert_with(|| {
            let mut v: Vec<u32> = (0..capture.spans.len() as u32)
                .filter(|&i| capture.spans[i as usize].track == g.track)
                .collect();
            v.sort_by_key(|&i| {
                let s = &capture.spans[i as usize];
                (s.start, std::cmp::Reverse(s.end), s.same_extent_order(), i)
            });
            v
        });
    }
    let mut copies_of: Vec<Option<Vec<u32>>> = vec![None; graphs.len()];
    let mut capture_tracks: FxHashMap<(u32, i64, TrackId), TrackId> = FxHashMap::default();
    let mut coverage = GraphCoverage {
        capture_source: capture_source.to_owned(),
        captured_graphs: graphs.len(),
        graph_launches: launches.len(),
        graph_kernels: 0,
        graph_kernels_mapped: 0,
        mapped_by_node_order: 0,
        exact_launches: 0,
        config_checked: 0,
        config_agreed: 0,
        config_rejected: 0,
        spans_added: 0,
        launches: Vec::new(),
    };
    for &launch in &launches {
        let ls = trace.spans[launch as usize].clone();
        let rank = trace.track(ls.track).rank.0;
        let pid = trace.track(ls.track).pid().unwrap_or(0);
        let mut ops = replayed
            .get(&(rank, ls.correlation.get().expect("filtered")))
            .cloned()
            .unwrap_or_default();
        ops.sort_by_key(|&i| (trace.spans[i as usize].start, i));
        let replayed_keys: Vec<u32> = ops
            .iter()
            .map(|&i| {
                let s = &trace.spans[i as usize];
                if s.level == Level::DeviceKernel {
                    key(trace.str(s.name))
                } else {
                    u32::MAX // copies and sets are not captured kernel launches
                }
            })
            .collect();
        let mut best: Option<(usize, Vec<(usize, usize)>)> = None;
        for (g, keys) in captured_keys.iter().enumerate() {
            let pairs = align(&replayed_keys, keys);
            if !pairs.is_empty() && best.as_ref().is_none_or(|b| pairs.len() > b.1.len()) {
                best = Some((g, pairs));
            }
        }
        coverage.graph_kernels += ops.len();
        let mut entry = GraphLaunchCoverage {
            launch_span: launch,
            name: trace.str(ls.name).to_owned(),
            start_ns: ls.start,
            graph_kernels: ops.len(),
            mapped: 0,
            captured_graph: None,
            captured_launches: 0,
            confidence: 0.0,
            method: METHOD_NAME_ALIGNMENT,
        };
        let Some((g, pairs)) = best else {
            coverage.launches.push(entry);
            continue;
        };
        let graph = &graphs[g];
        entry.captured_graph = Some(g);
        entry.captured_launches = graph.launches.len();
        let to_copy = copies_of[g]
            .get_or_insert_with(|| spans_to_copy(capture, graph, &thread_spans[&graph.track]))
            .clone();
        let capture_track = capture_track_of(
            &mut trace,
            &mut capture_tracks,
            capture,
            (rank, pid, graph.track),
            capture_source,
        );
        let copy_of = copy_spans(
            &mut trace,
            capture,
            capture_track,
            &to_copy,
            (ls.start, ls.end),
        );
        coverage.spans_added += to_copy.len();
        let category = trace.intern(GRAPH_NODE_FLOW);
        for (r, c) in pairs {
            let captured = &graph.launches[c];
            let op = ops[r];
            let replayed_config = parse_args(&trace, &trace.spans[op as usize])
                .as_ref()
                .and_then(config_of);
            if let (Some(a), Some(b)) = (&replayed_config, &captured.config) {
                coverage.config_checked += 1;
                if a != b {
                    coverage.config_rejected += 1;
                    continue;
                }
                coverage.config_agreed += 1;
            }
            link(
                &mut trace,
                copy_of[&captured.span],
                op,
                category,
                (&mut next_correlation, &mut next_flow),
            );
            entry.mapped += 1;
        }
        let denominator = entry.graph_kernels.max(entry.captured_launches).max(1);
        entry.confidence = entry.mapped as f64 / denominator as f64;
        coverage.exact_launches += usize::from(
            entry.mapped == entry.graph_kernels && entry.mapped == entry.captured_launches,
        );
        coverage.graph_kernels_mapped += entry.mapped;
        coverage.launches.push(entry);
    }
    Ok((trace, coverage))
}

/// How [`attribute_graph_nodes`] pairs a replayed op with its captured launch.
pub const METHOD_GRAPH_NODE: &str = "graph node";
/// The same, from node order (see [`GRAPH_NODE_ORDER_FLOW`]).
pub const METHOD_NODE_ORDER: &str = "node order";
/// How [`attribute_graphs`] pairs them: kernel names aligned.
pub const METHOD_NAME_ALIGNMENT: &str = "kernel name alignment";

/// The capture links a trace carries itself: device op -> (captured launch, by node order),
/// from flows of category [`GRAPH_NODE_FLOW`] or [`GRAPH_NODE_ORDER_FLOW`] whose source is a CPU
/// span outside the graph-capture tracks (so a trace already attributed has none left).
fn capture_links(trace: &Trace) -> FxHashMap<u32, (u32, bool)> {
    let mut links = FxHashMap::default();
    for f in &trace.flows {
        let by_order = match trace.str(f.category) {
            GRAPH_NODE_FLOW => false,
            GRAPH_NODE_ORDER_FLOW => true,
            _ => continue,
        };
        let (Some(from), Some(to)) = (
            f.from.as_ref().and_then(|e| e.span),
            f.to.as_ref().and_then(|e| e.span),
        ) else {
            continue;
        };
        let (Some(from_span), Some(to_span)) = (
            trace.spans.get(from.0 as usize),
            trace.spans.get(to.0 as usize),
        ) else {
            continue;
        };
        let from_track = trace.track(from_span.track);
        if matches!(from_track.kind, TrackKind::Thread { .. })
            && !is_graph_capture_track(from_track)
            && trace.track(to_span.track).is_device()
            && is_device_work(to_span.level)
        {
            links.insert(to.0, (from.0, by_order));
        }
    }
    links
}

/// True when `trace` links replayed graph ops to their captured launches itself (an nsys
/// export with `graphNodeId`, see [`attribute_graph_nodes`]).
pub fn has_capture_links(trace: &Trace) -> bool {
    !capture_links(trace).is_empty()
}

/// The `*StreamBeginCapture*` .. `*StreamEndCapture*` window on `thread_spans` (sorted) that
/// holds `[t0, t1]`; the whole time line when there is none (graphs built node by node).
fn capture_window(trace: &Trace, thread_spans: &[u32], (t0, t1): (Ns, Ns)) -> (Ns, Ns) {
    let mut begin: Option<Ns> = None;
    for &i in thread_spans {
        let s = &trace.spans[i as usize];
        let name = trace.str(s.name);
        if name.contains("StreamBeginCapture") && s.start <= t0 {
            begin = Some(s.start);
        } else if name.contains("StreamEndCapture") && s.end >= t1 {
            if let Some(b) = begin {
                return (b, s.end);
            }
        }
    }
    (Ns::MIN, Ns::MAX)
}

/// Graph-aware attribution within one trace: the nsys importer links each device op replayed
/// from a CUDA graph node to the runtime call that created the node (flows of category
/// [`GRAPH_NODE_FLOW`], exact, or [`GRAPH_NODE_ORDER_FLOW`], from node order; see
/// `strato_io::nsys` and `docs/analyses/graphs.md`). For every graph launch, the linked
/// captured launches and the spans enclosing them on their thread (within the enclosing stream
/// capture, when there is one) are copied onto a graph-capture track laid out inside the graph
/// launch call, and each linked op is re-parented to its copied launch, as [`attribute_graphs`]
/// does with a separate capture trace. The importer's link flows of mapped ops are replaced by
/// flows from the copies. `None` when the trace has no such links (returned unchanged).
/// Linked ops whose correlation id is not a graph launch's are left as they are (counted in
/// no launch).
pub fn attribute_graph_nodes(trace: Trace) -> (Trace, Option<GraphCoverage>) {
    let links = capture_links(&trace);
    if links.is_empty() {
        return (trace, None);
    }
    let capture = trace.clone();
    let source = trace
        .ranks
        .first()
        .map(|r| r.source.clone())
        .unwrap_or_default();
    let mut trace = trace;
    let mut replayed: FxHashMap<(u32, u64), Vec<u32>> = FxHashMap::default();
    for (i, s) in trace.spans.iter().enumerate() {
        let t = trace.track(s.track);
        if t.is_device() && is_device_work(s.level) {
            if let Some(c) = s.correlation.get() {
                replayed.entry((t.rank.0, c)).or_default().push(i as u32);
            }
        }
    }
    let mut launches: Vec<u32> = (0..trace.spans.len() as u32)
        .filter(|&i| {
            let s = &trace.spans[i as usize];
            s.correlation.is_some()
                && matches!(trace.track(s.track).kind, TrackKind::Thread { .. })
                && is_graph_launch_name(trace.str(s.name))
        })
        .collect();
    launches.sort_by_key(|&i| (trace.spans[i as usize].start, i));
    let mut next_correlation = trace
        .spans
        .iter()
        .filter_map(|s| s.correlation.get())
        .max()
        .unwrap_or(0)
        .saturating_add(1);
    let mut next_flow = trace
        .flows
        .iter()
        .map(|f| f.id)
        .max()
        .unwrap_or(0)
        .saturating_add(1);
    let mut thread_spans: FxHashMap<TrackId, Vec<u32>> = FxHashMap::default();
    for &(captured, _) in links.values() {
        let track = capture.spans[captured as usize].track;
        thread_spans.entry(track).or_insert_with(|| {
            let mut v: Vec<u32> = (0..capture.spans.len() as u32)
                .filter(|&i| capture.spans[i as usize].track == track)
                .collect();
            v.sort_by_key(|&i| {
                let s = &capture.spans[i as usize];
                (s.start, std::cmp::Reverse(s.end), s.same_extent_order(), i)
            });
            v
        });
    }
    let mut capture_tracks: FxHashMap<(u32, i64, TrackId), TrackId> = FxHashMap::default();
    let mut captured_graphs: rustc_hash::FxHashSet<(TrackId, Ns, Ns)> = Default::default();
    let mut coverage = GraphCoverage {
        capture_source: source.clone(),
        captured_graphs: 0,
        graph_launches: launches.len(),
        graph_kernels: 0,
        graph_kernels_mapped: 0,
        mapped_by_node_order: 0,
        exact_launches: 0,
        config_checked: 0,
        config_agreed: 0,
        config_rejected: 0,
        spans_added: 0,
        launches: Vec::new(),
    };
    let category = trace.intern(GRAPH_NODE_FLOW);
    let mut mapped_ops: rustc_hash::FxHashSet<u32> = Default::default();
    for &launch in &launches {
        let ls = trace.spans[launch as usize].clone();
        let rank = trace.track(ls.track).rank.0;
        let pid = trace.track(ls.track).pid().unwrap_or(0);
        let mut ops = replayed
            .get(&(rank, ls.correlation.get().expect("filtered")))
            .cloned()
            .unwrap_or_default();
        ops.sort_by_key(|&i| (trace.spans[i as usize].start, i));
        coverage.graph_kernels += ops.len();
        let linked: Vec<(u32, u32, bool)> = ops
            .iter()
            .filter_map(|&op| links.get(&op).map(|&(c, by_order)| (op, c, by_order)))
            .collect();
        let by_order = linked.iter().any(|l| l.2);
        let mut entry = GraphLaunchCoverage {
            launch_span: launch,
            name: trace.str(ls.name).to_owned(),
            start_ns: ls.start,
            graph_kernels: ops.len(),
            mapped: 0,
            captured_graph: None,
            captured_launches: 0,
            confidence: 0.0,
            method: if by_order {
                METHOD_NODE_ORDER
            } else {
                METHOD_GRAPH_NODE
            },
        };
        // The captured launches per capture thread, in capture order.
        let mut per_thread: std::collections::BTreeMap<TrackId, Vec<u32>> = Default::default();
        for &(_, c, _) in &linked {
            per_thread
                .entry(capture.spans[c as usize].track)
                .or_default()
                .push(c);
        }
        for (track, mut captured) in per_thread {
            captured.sort_by_key(|&c| (capture.spans[c as usize].start, c));
            captured.dedup();
            entry.captured_launches += captured.len();
            let first = &capture.spans[captured[0] as usize];
            let last = &capture.spans[captured[captured.len() - 1] as usize];
            let window = capture_window(&capture, &thread_spans[&track], (first.start, last.end));
            captured_graphs.insert((track, window.0, window.1));
            let graph = CapturedGraph {
                track,
                window,
                launches: captured
                    .iter()
                    .map(|&span| Captured {
                        span,
                        kernel: String::new(),
                        config: None,
                    })
                    .collect(),
            };
            let to_copy = spans_to_copy(&capture, &graph, &thread_spans[&track]);
            let capture_track = capture_track_of(
                &mut trace,
                &mut capture_tracks,
                &capture,
                (rank, pid, track),
                &source,
            );
            let copy_of = copy_spans(
                &mut trace,
                &capture,
                capture_track,
                &to_copy,
                (ls.start, ls.end),
            );
            coverage.spans_added += to_copy.len();
            for &(op, c, order) in &linked {
                if capture.spans[c as usize].track != track {
                    continue;
                }
                link(
                    &mut trace,
                    copy_of[&c],
                    op,
                    category,
                    (&mut next_correlation, &mut next_flow),
                );
                mapped_ops.insert(op);
                entry.mapped += 1;
                coverage.mapped_by_node_order += usize::from(order);
            }
        }
        let denominator = entry.graph_kernels.max(entry.captured_launches).max(1);
        entry.confidence = entry.mapped as f64 / denominator as f64;
        coverage.exact_launches += usize::from(
            entry.mapped == entry.graph_kernels && entry.mapped == entry.captured_launches,
        );
        coverage.graph_kernels_mapped += entry.mapped;
        coverage.launches.push(entry);
    }
    coverage.captured_graphs = captured_graphs.len();
    // The importer's links of mapped ops give way to the flows from the copies.
    let keep: Vec<bool> = trace
        .flows
        .iter()
        .map(|f| {
            let is_import_link = matches!(
                trace.str(f.category),
                GRAPH_NODE_FLOW | GRAPH_NODE_ORDER_FLOW
            ) && f
                .from
                .as_ref()
                .is_some_and(|e| !is_graph_capture_track(trace.track(e.track)));
            let to = f.to.as_ref().and_then(|e| e.span).map(|s| s.0);
            !(is_import_link && to.is_some_and(|op| mapped_ops.contains(&op)))
        })
        .collect();
    let mut k = keep.iter();
    trace.flows.retain(|_| *k.next().expect("one per flow"));
    (trace, Some(coverage))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyzed::Analyzed;
    use strato_trace::testing::TraceBuilder;

    /// Capture: three ops a, b, c each launching one kernel between begin/end capture.
    fn capture() -> Trace {
        let mut b = TraceBuilder::new();
        let t = b.thread(1, 1);
        b.span(t, Level::AcceleratorApi, "cudaStreamBeginCapture", 0, 1);
        for (k, (op, kernel, grid)) in [
            ("aten::a", "k1", 1),
            ("aten::b", "k2", 2),
            ("aten::c", "k3", 0),
        ]
        .into_iter()
        .enumerate()
        {
            let t0 = 10 + 30 * k as Ns;
            b.span(t, Level::Backend, op, t0, t0 + 20);
            let args = if grid > 0 {
                format!(r#"{{"kernel":"{kernel}","grid":[{grid},1,1],"block":[32,1,1]}}"#)
            } else {
                format!(r#"{{"kernel":"{kernel}"}}"#)
            };
            b.span(t, Level::AcceleratorApi, "cudaLaunchKernel", t0 + 2, t0 + 4)
                .correlation(100 + k as u64)
                .args(&args);
        }
        b.span(t, Level::AcceleratorApi, "cudaStreamEndCapture", 100, 101);
        b.build()
    }

    /// Replay: one graph launch replaying k1, an uncaptured kx, k2 with another grid, k3.
    fn replay() -> Trace {
        let mut b = TraceBuilder::new();
        let t = b.thread(1, 1);
        let q = b.queue(0, 7);
        b.span(t, Level::Operation, "serve", 0, 1000);
        b.span(t, Level::AcceleratorApi, "cudaGraphLaunch", 100, 200)
            .correlation(7);
        let kernels = [
            ("k1", r#"{"grid":[1,1,1],"block":[32,1,1]}"#),
            ("kx", "{}"),
            ("k2", r#"{"grid":[4,1,1],"block":[32,1,1]}"#),
            ("k3", "{}"),
        ];
        for (k, (name, args)) in kernels.into_iter().enumerate() {
            let t0 = 300 + 10 * k as Ns;
            b.span(q, Level::DeviceKernel, name, t0, t0 + 10)
                .correlation(7)
                .args(args);
        }
        b.build()
    }

    #[test]
    fn alignment_config_check_and_parents_known_by_construction() {
        let (trace, c) = attribute_graphs(replay(), &capture(), "cap").unwrap();
        trace.validate().unwrap();
        assert_eq!(
            (c.captured_graphs, c.graph_launches, c.graph_kernels),
            (1, 1, 4)
        );
        // k1 and k3 map; kx was never captured; k2's grid differs.
        assert_eq!(c.graph_kernels_mapped, 2);
        assert_eq!(
            (c.config_checked, c.config_agreed, c.config_rejected),
            (2, 1, 1)
        );
        assert_eq!(c.launches[0].confidence, 0.5);
        assert_eq!(c.exact_launches, 0);
        // The copies: three ops and three launches.
        assert_eq!(c.spans_added, 6);
        let a = Analyzed::new(&trace);
        let h = a.hierarchy();
        let parent_op = |kernel: &str| -> Vec<String> {
            let i = trace
                .spans
                .iter()
                .position(|s| trace.str(s.name) == kernel)
                .unwrap() as u32;
            h.chain(i)
                .into_iter()
                .skip(1)
                .map(|p| trace.str(trace.spans[p as usize].name).to_owned())
                .collect()
        };
        assert_eq!(parent_op("k1")[..2], ["cudaLaunchKernel", "aten::a"]);
        assert_eq!(parent_op("k3")[..2], ["cudaLaunchKernel", "aten::c"]);
        assert_eq!(parent_op("kx")[0], "cudaGraphLaunch");
        assert_eq!(parent_op("k2")[0], "cudaGraphLaunch");
        let r = crate::cross_stack::hierarchy::report(&a);
        assert_eq!(
            (r.total.graph_kernels, r.total.graph_kernels_mapped),
            (4, 2)
        );
        // The copies carry no CPU time: the process's threads are the replay's one thread.
        assert_eq!(a.scopes().processes[0].threads.len(), 1);
        // Two flows of category graph_node.
        let flows = trace
            .flows
            .iter()
            .filter(|f| trace.str(f.category) == GRAPH_NODE_FLOW)
            .count();
        assert_eq!(flows, 2);
    }
}
