//! The replay: the critical path's dependency graph simulated, each point of time as late as
//! its dependencies make it, with the traced durations ([`replay`]); and what-if changes to
//! those durations ([`Scale`]), simulated on the same graph (issue 29, first part).
//!
//! Each edge of the graph (built with [`Graph::replay`], so a kernel keeps both its launch and
//! its stream constraint) gets a duration:
//! - **work** (a CPU op's inside, a device op running, a collective's transfer) and the
//!   **untraced** time between a thread's top-level ops: the traced time between its ends;
//! - **latency** (launch delay, stream order, synchronisation, waiting inside a blocking call,
//!   waiting for peers): for the constraint that bound the point (the latest of its latency
//!   edges, when no work edge already reaches the point), the traced time it took; for the
//!   others, the same time capped at the median binding latency of that kind in the graph
//!   (what the constraint costs when it binds).
//!
//! A point with no edge into it (a thread's first op of the window, a device op whose launch
//! is not in it) keeps its traced time. The simulation gives each point the latest of its
//! edges' `from + duration`; with the traced durations it gives back every traced time except
//! where the trace contradicts its own graph (an edge back in time: clock jitter between
//! nested spans, clocks of two ranks), which is the replay's error. A change scales the
//! work edges of what it selects; the rest of the graph decides how much of it reaches the
//! step's end.

use std::collections::BTreeMap;

use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;
use strato_trace::{Level, Ns, RankId, Span, SpanId, StrId, Trace, TrackId, TrackKind};

use super::graph::step_annotation;
use super::graph::{Edge, Graph};
use super::options::CriticalPathOptions;
use super::search::{topological_order, whole_graph, Adjacency};
use super::shapes::{CriticalPathError, PathKind};
use super::steps::{for_each_step_graph, StepGraph};

/// What a change selects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// Device ops (kernels, copies, memsets) whose name contains the text.
    Kernel(String),
    /// Device ops launched from inside a CPU op of exactly this name, at any depth.
    Op(String),
    /// Device ops launched from inside a call of an `nn.Module` of this class (the module's
    /// `nn.Module: CLASS_N` span on the launching thread; `CLASS` as
    /// [`crate::cross_stack::modules::module_of`] reads it), at any depth.
    Module(String),
    /// CPU ops of exactly this name and every CPU op they call on their thread.
    Cpu(String),
    /// Every CPU op of the threads of exactly this name (a faster host thread, a pool's slow
    /// worker made as fast as the others).
    Thread(String),
    /// Device ops of a category.
    Category(DeviceCategory),
    /// The links collectives move their data over: the collective kernels
    /// ([`crate::distributed::collectives::is_collective_kernel`]), whose transfer (from the
    /// last member's arrival to the end, when the job's collectives are matched across ranks;
    /// the whole kernel otherwise) scales by the factor, 1 / the bandwidth's factor.
    Links,
    /// Host synchronisations: the blocking runtime calls ([`super::is_blocking_call`]) under a
    /// CPU op of this name, or every one (`None`). Their factor is 0: the call no longer waits
    /// for the device (it costs what it costs when it does not wait).
    Sync(Option<String>),
    /// Copies made asynchronous (from pinned host memory, with non-blocking calls): the
    /// blocking runtime calls ([`super::is_blocking_call`]) that launched a copy or a memset
    /// (`cudaMemcpy`, `cuMemcpyDtoH`, a pageable `cudaMemcpyAsync`, `hipMemcpy`, an OpenCL read
    /// or write made blocking), under a CPU op of this name or every one (`None`), no longer
    /// wait for the device, as [`Selector::Sync`]'s do. The copy itself still runs when and
    /// as long as it did (pinned memory can make it faster too; that is not modelled). The
    /// factor is 0.
    AsyncCopies(Option<String>),
    /// A straggler's lateness at collectives: at each collective of a window where the rank
    /// (labelled so; `None`: the window's straggler, the rank that arrived last at the most of
    /// its collectives, the lower rank on a tie) came later than the median member, it arrives
    /// with the median member (the lower median: with two members, with the other). Its own
    /// work is unchanged; what waited for it at the collective goes on earlier, and so does
    /// the rank itself after the collective. The factor is unused.
    Straggler(Option<i64>),
    /// Communication overlapped with compute, as bucketing would: collective kernels no
    /// longer wait on the device for compute, nor compute for them on a stream they share
    /// ([`comm_off_compute`]). The factor is unused.
    OverlapComm,
    /// Host<->device copies overlapped with compute, as a copy stream of their own with the
    /// next batch prefetched would ([`copies_off_compute`]): a host-to-device copy no longer
    /// waits on the device for compute, nor compute for it (its data is there in time, as
    /// when it was copied a step ahead); compute no longer waits for a device-to-host copy
    /// (the copy still waits for the compute that made its data). The most overlapping copies
    /// can buy on the device; the host's waits for them are `--async-copies`'. The factor is
    /// unused.
    OverlapCopies,
    /// The launches inside each call of the CPU op of this name (`None`: each top-level CPU op
    /// of a thread) replayed as one graph launch, as CUDA graphs (or torch.compile's
    /// `reduce-overhead`) would: the region's CPU ops cost nothing (factor 0, as `cpu:`), and
    /// each device op launched inside it is launched at the region's start, with the typical
    /// launch delay, instead of by its own call ([`graph_launches`]). Synchronisations inside
    /// the region still wait (a graph cannot hold them).
    GraphLaunch(Option<String>),
}

/// A category of device ops ([`Selector::Category`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceCategory {
    /// Kernels.
    Kernel,
    /// Copies and memsets.
    Copy,
    /// Every device op.
    Device,
}

/// One what-if change: the time of what `selector` picks, scaled by `factor` (0.5: twice as
/// fast; 0: gone).
#[derive(Debug, Clone, PartialEq)]
pub struct Scale {
    /// The change as given (`kernel:gemm=0.5`).
    pub text: String,
    pub selector: Selector,
    pub factor: f64,
}

/// The most changes one replay takes (each is a bit of a mask per op).
pub const MAX_CHANGES: usize = 64;

impl Scale {
    /// The change `--no-sync` (`under` empty: every host synchronisation) or
    /// `--no-sync=NAME` (those under the CPU op NAME) asks for.
    pub fn no_sync(under: &str) -> Scale {
        Scale::of_op("no-sync", under, Selector::Sync)
    }

    /// The change `--async-copies` (`under` empty: every blocking copy call) or
    /// `--async-copies=NAME` (those under the CPU op NAME) asks for.
    pub fn async_copies(under: &str) -> Scale {
        Scale::of_op("async-copies", under, Selector::AsyncCopies)
    }

    /// A change named `flag` (`flag=NAME` with a CPU op's name), with factor 0, whose
    /// selector `selector` makes of the name (`None`: none given).
    fn of_op(flag: &str, name: &str, selector: fn(Option<String>) -> Selector) -> Scale {
        let name = name.trim();
        Scale {
            text: if name.is_empty() {
                flag.to_owned()
            } else {
                format!("{flag}={name}")
            },
            selector: selector((!name.is_empty()).then(|| name.to_owned())),
            factor: 0.0,
        }
    }

    /// The change `--link-bw F` asks for: the links `factor` times as fast (2: twice the
    /// bandwidth, each collective's transfer in half the time); `Err` unless `factor` is a
    /// finite number > 0.
    pub fn link_bandwidth(factor: f64) -> Result<Scale, String> {
        if !(factor.is_finite() && factor > 0.0) {
            return Err(format!(
                "link_bw: {factor} is not a finite number > 0 (2: twice the bandwidth)"
            ));
        }
        Ok(Scale {
            text: format!("link-bw={factor}"),
            selector: Selector::Links,
            factor: 1.0 / factor,
        })
    }

    /// The change `--even-straggler` asks for (`rank` `None`: each window's straggler), or
    /// evening rank `rank` ([`Selector::Straggler`]).
    pub fn even_straggler(rank: Option<i64>) -> Scale {
        Scale {
            text: match rank {
                None => "even-straggler".to_owned(),
                Some(r) => format!("even-straggler={r}"),
            },
            selector: Selector::Straggler(rank),
            factor: 1.0,
        }
    }

    /// The change `--overlap-comm` asks for ([`Selector::OverlapComm`]).
    pub fn overlap_comm() -> Scale {
        Scale {
            text: "overlap-comm".to_owned(),
            selector: Selector::OverlapComm,
            factor: 1.0,
        }
    }

    /// The change `--overlap-copies` asks for ([`Selector::OverlapCopies`]).
    pub fn overlap_copies() -> Scale {
        Scale {
            text: "overlap-copies".to_owned(),
            selector: Selector::OverlapCopies,
            factor: 1.0,
        }
    }

    /// The change `--graph-launch` (`region` empty: each top-level CPU op of a thread) or
    /// `--graph-launch=NAME` (each call of the CPU op NAME) asks for
    /// ([`Selector::GraphLaunch`]).
    pub fn graph_launch(region: &str) -> Scale {
        Scale::of_op("graph-launch", region, Selector::GraphLaunch)
    }

    /// Parses `KIND:NAME=FACTOR`: KIND is `kernel` (device ops whose name contains NAME), `op`
    /// (device ops launched under the CPU op NAME), `module` (device ops launched under a call
    /// of the `nn.Module` class NAME), `cpu` (the CPU op NAME and what it calls), `thread`
    /// (every CPU op of the threads named NAME) or `category` (NAME: `kernel`, `copy` or
    /// `device`); FACTOR a finite number >= 0.
    pub fn parse(text: &str) -> Result<Scale, String> {
        let shape = "KIND:NAME=FACTOR (kind: kernel, op, module, cpu, thread or category)";
        let (selector, factor) = text
            .rsplit_once('=')
            .ok_or_else(|| format!("scale {text:?}: not {shape}"))?;
        let factor = factor
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite() && *f >= 0.0)
            .ok_or_else(|| format!("scale {text:?}: the factor is not a finite number >= 0"))?;
        let (kind, name) = selector
            .split_once(':')
            .ok_or_else(|| format!("scale {text:?}: not {shape}"))?;
        if name.is_empty() {
            return Err(format!("scale {text:?}: no name after {kind}:"));
        }
        let selector = match kind.trim() {
            "kernel" => Selector::Kernel(name.to_owned()),
            "op" => Selector::Op(name.to_owned()),
            "module" => Selector::Module(name.to_owned()),
            "cpu" => Selector::Cpu(name.to_owned()),
            "thread" => Selector::Thread(name.to_owned()),
            "category" => Selector::Category(match name {
                "kernel" => DeviceCategory::Kernel,
                "copy" => DeviceCategory::Copy,
                "device" => DeviceCategory::Device,
                _ => {
                    return Err(format!(
                        "scale {text:?}: no category {name:?} (categories: kernel, copy, device)"
                    ))
                }
            }),
            other => {
                return Err(format!(
                    "scale {text:?}: no selector kind {other:?} (kinds: kernel, op, module, cpu, \
                     thread, category)"
                ))
            }
        };
        Ok(Scale {
            text: text.to_owned(),
            selector,
            factor,
        })
    }
}

/// The windows the replay simulates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayWindows {
    /// The whole trace as one graph; each rank's window is its first to its last point.
    Whole,
    /// Each `ProfilerStep#N` graph (only step N when given), windows as the critical path's.
    Steps(Option<u64>),
    /// Every step (only step N when given) read from one simulation of the whole trace
    /// ([`AcrossSteps::times`]: a step's time runs from the previous step's end to its own),
    /// so that a change's effect carries from a step into the next (a synchronisation that
    /// ends each step removed lets the next step start while the device still works).
    Across(Option<u64>),
}

/// One rank's window replayed with the traced durations.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayedWindow {
    pub rank: i64,
    /// `ProfilerStep#N`, or `whole trace`.
    pub step: String,
    /// N (0 for the whole trace).
    pub number: u64,
    /// The window's start: the step annotation's (the rank's first point for the whole trace).
    pub start_ns: Ns,
    /// From the start to the rank's last point in the trace.
    pub measured_ns: Ns,
    /// From the start to the rank's last point in the simulation.
    pub simulated_ns: Ns,
    /// `|simulated - measured| / measured`, in percent (0 for an empty window).
    pub error_pct: f64,
    /// Edges of the graph that go back in time (the trace contradicts its own order): what the
    /// replay could not model, for the whole graph of the window (every rank of the step).
    pub edges_back_in_time: usize,
    /// What the rank's last point waited on, back along the edges that set each point.
    pub path: WindowPath,
}

/// A window's path in a simulation: from the rank's last point back along the edges that set
/// each point (the constraint that came last), to a point no edge sets or the window's start.
/// `by_kind` plus `before_path_ns` adds up to the simulated window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowPath {
    /// Time by kind (`untraced`: time between a thread's traced ops).
    pub by_kind: BTreeMap<&'static str, Ns>,
    /// Time of the window before the path starts.
    pub before_path_ns: Ns,
    /// The op with the most time on the path.
    pub bottleneck: Option<Bottleneck>,
    /// Collectives on the path where the rank waited for a later peer: the peer (the rank
    /// whose arrival the path goes on through), the collective and how long the rank waited.
    pub peer_waits: Vec<PeerWait>,
}

/// A collective the rank waited at for a later peer ([`WindowPath::peer_waits`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PeerWait {
    pub peer: i64,
    pub collective: String,
    /// From the rank's own arrival to the last peer's (simulated).
    pub waited_ns: Ns,
}

/// One rank's window with the changes applied.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PredictedWindow {
    pub rank: i64,
    pub step: String,
    pub number: u64,
    /// The replay without changes (the simulated time, so the gain is the changes' alone).
    pub baseline_ns: Ns,
    pub predicted_ns: Ns,
    /// `baseline_ns - predicted_ns` (negative: the change made it longer).
    pub gain_ns: Ns,
    /// The predicted window's path: its bottleneck is the new one.
    pub path: WindowPath,
}

/// The op with the most time on a path: its own time there and the time it waited for its
/// dependencies (a kernel's launch delay, a call's wait), under the kind of its largest part.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bottleneck {
    pub name: String,
    pub kind: &'static str,
    pub ns: Ns,
}

/// A change and how many ops it selected, over every window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AppliedChange {
    pub change: String,
    pub factor: f64,
    pub matched_ops: usize,
    /// Why a change that matched nothing could not (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The replay of every window, and the prediction when changes are given.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayReport {
    pub replay: Vec<ReplayedWindow>,
    pub changes: Vec<AppliedChange>,
    /// Each window predicted with the changes (without changes: the replay, gain 0).
    pub predicted: Vec<PredictedWindow>,
}

impl ReplayReport {
    /// Adds a window's replay and its prediction with the changes (`predicted_ns`, `path`).
    fn push(&mut self, replayed: ReplayedWindow, predicted_ns: Ns, path: WindowPath) {
        self.predicted.push(PredictedWindow {
            rank: replayed.rank,
            step: replayed.step.clone(),
            number: replayed.number,
            baseline_ns: replayed.simulated_ns,
            predicted_ns,
            gain_ns: replayed.simulated_ns - predicted_ns,
            path,
        });
        self.replay.push(replayed);
    }

    /// No window yet; each of `changes` listed with no op matched.
    fn empty(changes: &[Scale]) -> ReplayReport {
        ReplayReport {
            replay: Vec::new(),
            changes: changes
                .iter()
                .map(|c| AppliedChange {
                    change: c.text.clone(),
                    factor: c.factor,
                    matched_ops: 0,
                    note: None,
                })
                .collect(),
            predicted: Vec::new(),
        }
    }
}

/// Replays `trace` over `windows`, and predicts it with `changes` ([`MAX_CHANGES`] at most;
/// more are refused by the caller). One graph at a time: a step's graph is dropped before the
/// next is built.
pub fn replay(
    trace: &Trace,
    options: &CriticalPathOptions,
    windows: ReplayWindows,
    changes: &[Scale],
) -> Result<ReplayReport, CriticalPathError> {
    let changes = &changes[..changes.len().min(MAX_CHANGES)];
    let modules = ModuleCalls::new(trace, changes);
    let mut report = ReplayReport::empty(changes);
    match windows {
        ReplayWindows::Steps(only) => {
            for_each_step_graph(trace, options, only, true, |step| {
                let window = step_window(&step);
                replay_graph(trace, &step.graph, &window, changes, &modules, &mut report)
            })?;
        }
        ReplayWindows::Whole => {
            let (graph, _) = whole_graph(trace, options, true);
            let window = whole_window(trace, &graph);
            replay_graph(trace, &graph, &window, changes, &modules, &mut report)?;
        }
        ReplayWindows::Across(only) => {
            let (graph, _) = whole_graph(trace, options, true);
            replay_across(trace, &graph, only, changes, &modules, &mut report)?;
        }
    }
    note_unmatched_overlap(&mut report, changes, || {
        trace
            .spans
            .iter()
            .any(|s| is_collective_kernel_span(trace, s))
    });
    Ok(report)
}

/// The whole trace as the replay's one window: every rank with a traced op in `graph`, from
/// its first point.
fn whole_window(trace: &Trace, graph: &Graph) -> Window {
    let mut starts: Vec<Option<Ns>> = vec![None; trace.ranks.len()];
    for node in graph.nodes.iter().filter(|n| n.span().is_some()) {
        let slot = &mut starts[node.rank.0 as usize];
        *slot = Some(slot.map_or(node.ts, |s: Ns| s.min(node.ts)));
    }
    Window {
        step: "whole trace".into(),
        number: 0,
        ranks: (0..trace.ranks.len() as u32)
            .map(RankId)
            .filter(|r| starts[r.0 as usize].is_some())
            .collect(),
        starts,
    }
}

/// A step's window as the replay reports it: the step, its ranks and each rank's start.
fn step_window(step: &StepGraph) -> Window {
    Window {
        step: format!("ProfilerStep#{}", step.number),
        number: step.number,
        ranks: step.ranks.clone(),
        starts: step.windows.iter().map(|w| w.map(|w| w.0)).collect(),
    }
}

/// Whether `span` of `trace` is a collective kernel (NCCL/RCCL).
fn is_collective_kernel_span(trace: &Trace, span: &Span) -> bool {
    span.level == Level::DeviceKernel
        && crate::distributed::collectives::is_collective_kernel(trace.str(span.name))
}

/// Why an `--overlap-comm` change matched nothing, on the change (`has_collective`: whether
/// the trace has a collective kernel at all, asked only then).
fn note_unmatched_overlap(
    report: &mut ReplayReport,
    changes: &[Scale],
    has_collective: impl FnOnce() -> bool,
) {
    let mut has_collective = Some(has_collective);
    for (applied, change) in report.changes.iter_mut().zip(changes) {
        if change.selector == Selector::OverlapCopies && applied.matched_ops == 0 {
            applied.note = Some(
                "no host-to-device copy waits for compute on the device in this trace's graph, \
                 nor compute for a device-to-host copy (copies on streams of their own, or no \
                 copy whose direction is known)"
                    .to_owned(),
            );
        }
        if change.selector == Selector::OverlapComm && applied.matched_ops == 0 {
            let collectives = has_collective.take().is_some_and(|f| f());
            applied.note = Some(if collectives {
                "no collective waits for compute on the device in this trace's graph: its \
                 collectives have streams of their own and the trace records no stream wait \
                 event (Kineto's cuda_sync events) ordering them behind compute"
                    .to_owned()
            } else {
                "the trace has no collective kernel (NCCL/RCCL)".to_owned()
            });
        }
    }
}

/// [`replay`] over the steps of a trace read in parts ([`super::windowed`]), each part holding
/// the spans of a few steps: the same windows, changes and notes as [`replay`] gives with
/// [`ReplayWindows::Steps`] on the whole trace. Fed every span of the trace first, in trace
/// order, as the step survey is ([`PartsReplay::add_span`]: the module calls `module:`
/// changes select, and whether the trace has a collective kernel); then each part in step
/// order ([`PartsReplay::add_part`]); then [`PartsReplay::finish`]. Memory beyond the part:
/// the selected module calls (40 bytes each) and the windows' results.
#[derive(Debug, Clone)]
pub struct PartsReplay {
    changes: Vec<Scale>,
    modules: ModuleCalls,
    /// `Some(whether a collective kernel was seen)` when a change needs to know.
    collective_kernel: Option<bool>,
    report: ReplayReport,
}

impl PartsReplay {
    /// No span seen yet; `changes` as [`replay`] takes them ([`MAX_CHANGES`] at most: more
    /// are refused by the caller).
    pub fn new(changes: &[Scale]) -> PartsReplay {
        let changes = changes[..changes.len().min(MAX_CHANGES)].to_vec();
        let overlap = changes.iter().any(|c| c.selector == Selector::OverlapComm);
        PartsReplay {
            modules: ModuleCalls::for_changes(&changes),
            collective_kernel: overlap.then_some(false),
            report: ReplayReport::empty(&changes),
            changes,
        }
    }

    /// Notes one span of the trace (`trace` holds its tables).
    pub fn add_span(&mut self, trace: &Trace, span: &Span) {
        self.modules.add(trace, span, &self.changes);
        if let Some(seen) = &mut self.collective_kernel {
            *seen = *seen || is_collective_kernel_span(trace, span);
        }
    }

    /// Adds what another file of the job noted ([`PartsReplay::add_span`] with that file's
    /// ids), whose tracks come after the `track_base` tracks of the files before it.
    pub fn append(&mut self, other: PartsReplay, track_base: u32) {
        self.modules.append(other.modules, track_base);
        if let (Some(seen), Some(other)) = (&mut self.collective_kernel, other.collective_kernel) {
            *seen = *seen || other;
        }
    }

    /// Replays the steps `range` of `plan` from `part` (as [`super::windowed::StepPlan`]
    /// reads a part), with the job's cross-rank inputs `options` given the part's span ids.
    pub fn add_part(
        &mut self,
        plan: &super::windowed::StepPlan,
        part: &Trace,
        range: std::ops::Range<usize>,
        options: &CriticalPathOptions,
    ) -> Result<(), CriticalPathError> {
        self.modules.link();
        let PartsReplay {
            changes,
            modules,
            report,
            ..
        } = self;
        plan.graphs(part, range, options, true, |step| {
            let window = step_window(&step);
            replay_graph(part, &step.graph, &window, changes, modules, report)
        })
    }

    /// The report once every part is replayed.
    pub fn finish(mut self) -> ReplayReport {
        let seen = self.collective_kernel.unwrap_or(false);
        note_unmatched_overlap(&mut self.report, &self.changes, || seen);
        self.report
    }
}

/// What each set of changes in `sets` would save over the trace's `ProfilerStep#N` windows (the
/// whole trace as one window when it has none): per window, the latest rank's end replayed
/// with the traced durations minus the same with the set's changes, summed over the windows
/// (negative: the set makes the job longer); `None` for a set none of whose changes selected
/// anything in any window (the graph has nothing the change is about: no estimate, rather
/// than a gain of 0). Each window's graph is built and replayed once, then predicted once per
/// set; sets of more than [`MAX_CHANGES`] changes use the first ones. This is what `strato
/// advise` estimates a finding's fix to gain with.
pub fn estimated_gains(
    trace: &Trace,
    options: &CriticalPathOptions,
    sets: &[Vec<Scale>],
) -> Result<Vec<Option<Ns>>, CriticalPathError> {
    let mut gains = Gains::new(sets.len());
    if sets.is_empty() {
        return Ok(gains.finish());
    }
    let modules = ModuleCalls::of_sets(trace, sets);
    let mut windows = 0usize;
    for_each_step_graph(trace, options, None, true, |step| {
        windows += 1;
        let replay = Simulations::replay(trace, &step.graph)?;
        graph_gains(trace, &replay, &step.ranks, sets, &modules, &mut gains);
        Ok(())
    })?;
    if windows == 0 {
        let (graph, _) = whole_graph(trace, options, true);
        let ranks: Vec<RankId> = (0..trace.ranks.len() as u32).map(RankId).collect();
        let replay = Simulations::replay(trace, &graph)?;
        graph_gains(trace, &replay, &ranks, sets, &modules, &mut gains);
    }
    Ok(gains.finish())
}

/// Each set's gain summed over the windows, and whether any of its changes selected anything.
struct Gains {
    sums: Vec<Ns>,
    selected: Vec<bool>,
}

impl Gains {
    fn new(sets: usize) -> Gains {
        Gains {
            sums: vec![0; sets],
            selected: vec![false; sets],
        }
    }

    fn finish(self) -> Vec<Option<Ns>> {
        self.sums
            .into_iter()
            .zip(self.selected)
            .map(|(sum, selected)| selected.then_some(sum))
            .collect()
    }
}

/// What [`paths_and_gains`] gives: the critical path of every window, and each set's gain
/// ([`estimated_gains`]).
pub type PathsAndGains = (
    Result<Vec<super::StepCriticalPath>, CriticalPathError>,
    Result<Vec<Option<Ns>>, CriticalPathError>,
);

/// The critical path of every `ProfilerStep#N` window (the whole trace as one window without
/// steps) as [`super::critical_path_by_step_or_whole`] gives it, and what each set of changes
/// in `sets` would save over those windows as [`estimated_gains`] gives it, from one graph per
/// window: built for the replay, replayed with each set, then stripped of its replay-only
/// edges ([`Graph::strip_replay_edges`]) and searched. See [`paths_gains_and_replay`], which
/// gives the replay too.
pub fn paths_and_gains(
    trace: &Trace,
    options: &CriticalPathOptions,
    sets: &[Vec<Scale>],
) -> PathsAndGains {
    let (paths, gains, _) = paths_gains_and_replay(trace, options, sets, false);
    (paths, gains)
}

/// The replay ([`replay`] without changes: each window's measured and simulated time), when
/// [`paths_gains_and_replay`] is asked for it.
pub type BaselineReplay = Option<Result<ReplayReport, CriticalPathError>>;

/// What [`paths_gains_and_replay`] gives: the critical path of every window, each set's gain,
/// and the replay when asked.
pub type PathsGainsAndReplay = (
    Result<Vec<super::StepCriticalPath>, CriticalPathError>,
    Result<Vec<Option<Ns>>, CriticalPathError>,
    BaselineReplay,
);

/// [`paths_and_gains`], and with `baseline` the replay of every window without changes as
/// [`replay`] gives it (`strato whatif`'s `replay`), from the same graphs. This is the report's
/// one pass for its critical path and replay sections and its findings' gains.
///
/// The gains and the replay fail with the graph that failed them (a dependency cycle), and
/// with the paths when those fail (a window left out would make the sums partial); the paths
/// do not fail for them: a cycle through a replay-only edge leaves the search's graph whole.
pub fn paths_gains_and_replay(
    trace: &Trace,
    options: &CriticalPathOptions,
    sets: &[Vec<Scale>],
    baseline: bool,
) -> PathsGainsAndReplay {
    let replay = !sets.is_empty() || baseline;
    let modules = ModuleCalls::of_sets(trace, sets);
    let mut gains: Result<Gains, CriticalPathError> = Ok(Gains::new(sets.len()));
    let mut replayed: Result<ReplayReport, CriticalPathError> = Ok(ReplayReport::empty(&[]));
    let mut add_replays =
        |graph: &mut Graph, ranks: &[RankId], window: &dyn Fn(&Graph) -> Window| {
            if !replay {
                return;
            }
            // One replay of the graph for the gains and the baseline replay.
            match Simulations::replay(trace, graph) {
                Ok(replay) => {
                    if let (false, Ok(sums)) = (sets.is_empty(), gains.as_mut()) {
                        graph_gains(trace, &replay, ranks, sets, &modules, sums);
                    }
                    if let (true, Ok(report)) = (baseline, replayed.as_mut()) {
                        report_window(trace, &replay, &window(graph), report);
                    }
                }
                Err(e) => {
                    if !sets.is_empty() && gains.is_ok() {
                        gains = Err(e.clone());
                    }
                    if baseline && replayed.is_ok() {
                        replayed = Err(e);
                    }
                }
            }
            graph.strip_replay_edges();
        };
    let paths = if super::step_numbers(trace).is_empty() {
        let (mut graph, collectives) = whole_graph(trace, options, replay);
        let ranks: Vec<RankId> = (0..trace.ranks.len() as u32).map(RankId).collect();
        add_replays(&mut graph, &ranks, &|graph| whole_window(trace, graph));
        super::search::report_of_graph(trace, &graph, collectives, options)
            .map(|report| vec![super::steps::whole_as_step(trace, report)])
    } else {
        let mut paths = Vec::new();
        for_each_step_graph(trace, options, None, replay, |mut step| {
            let (window, ranks) = (step_window(&step), step.ranks.clone());
            add_replays(&mut step.graph, &ranks, &|_| window.clone());
            paths.push(super::steps::step_paths(
                trace,
                &step,
                super::steps::PathDetail::Summary,
            )?);
            Ok(())
        })
        .map(|()| paths)
    };
    if let Err(e) = &paths {
        gains = Err(e.clone());
        replayed = Err(e.clone());
    }
    (
        paths,
        gains.map(Gains::finish),
        baseline.then_some(replayed),
    )
}

/// [`estimated_gains`] of one graph, from its replay: adds each set's gain on the latest end
/// of `ranks`.
fn graph_gains(
    trace: &Trace,
    replay: &Simulations,
    ranks: &[RankId],
    sets: &[Vec<Scale>],
    modules: &[ModuleCalls],
    gains: &mut Gains,
) {
    let prepared = &replay.prepared;
    let mut in_window = vec![false; trace.ranks.len()];
    for r in ranks {
        in_window[r.0 as usize] = true;
    }
    // The window's ranks' traced ops, whose latest end in a simulation is the window's end.
    let members: Vec<usize> = (prepared.graph.nodes.iter().enumerate())
        .filter(|(_, n)| n.span().is_some() && in_window[n.rank.0 as usize])
        .map(|(v, _)| v)
        .collect();
    let latest = |times: &[Ns]| members.iter().map(|&v| times[v]).max();
    let Some(baseline) = latest(&replay.t0) else {
        return;
    };
    for (i, (set, modules)) in sets.iter().zip(modules).enumerate() {
        let changes = &set[..set.len().min(MAX_CHANGES)];
        let mut counts = ReplayReport::empty(changes);
        let predicted = predict(prepared, trace, changes, modules, &mut counts);
        if let Some(predicted) = latest(&predicted.t) {
            gains.sums[i] += baseline - predicted;
        }
        gains.selected[i] |= counts.changes.iter().any(|c| c.matched_ops > 0);
    }
}

/// One graph's windows: the ranks with a window and each one's start.
#[derive(Clone)]
struct Window {
    step: String,
    number: u64,
    ranks: Vec<RankId>,
    starts: Vec<Option<Ns>>,
}

/// How the replay treats an edge (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Work,
    Untraced,
    Latency,
}

fn role(trace: &Trace, graph: &Graph, e: &Edge) -> Role {
    if e.replay_only() || e.waited() {
        return Role::Latency;
    }
    if !e.dependency() {
        // Inside a blocking runtime call the CPU waited ([`super::is_blocking_call`]).
        return if e.kind == PathKind::SyncWait {
            Role::Latency
        } else {
            Role::Work
        };
    }
    let on_thread = |n: u32| {
        !trace
            .track(graph.nodes[n as usize].track(trace))
            .is_device()
    };
    if e.kind == PathKind::Idle && on_thread(e.from) && on_thread(e.to) {
        Role::Untraced
    } else {
        Role::Latency
    }
}

/// The traced durations of every edge (see the module docs), and the typical (median
/// binding) latency of each kind.
fn traced_durations(
    graph: &Graph,
    roles: &[Role],
    in_edges: &Adjacency,
) -> (Vec<Ns>, FxHashMap<PathKind, Ns>) {
    let ts = |n: u32| graph.nodes[n as usize].ts;
    let gap = |e: &Edge| (ts(e.to) - ts(e.from)).max(0);
    let mut d: Vec<Ns> = graph.edges.iter().map(gap).collect();
    let mut binding = vec![false; graph.edges.len()];
    let mut samples: FxHashMap<PathKind, Vec<Ns>> = FxHashMap::default();
    for v in 0..graph.nodes.len() as u32 {
        let mut work_ready: Option<Ns> = None;
        let mut latest: Option<u32> = None;
        for &e in in_edges.of(v) {
            let edge = &graph.edges[e as usize];
            if roles[e as usize] == Role::Latency {
                if latest.is_none_or(|l| ts(edge.from) > ts(graph.edges[l as usize].from)) {
                    latest = Some(e);
                }
            } else {
                let ready = ts(edge.from) + gap(edge);
                work_ready = Some(work_ready.map_or(ready, |w| w.max(ready)));
            }
        }
        let Some(b) = latest else { continue };
        if work_ready.is_some_and(|w| w >= ts(v)) {
            continue;
        }
        binding[b as usize] = true;
        let edge = &graph.edges[b as usize];
        samples.entry(edge.kind).or_default().push(d[b as usize]);
    }
    let typical: FxHashMap<PathKind, Ns> = samples
        .into_iter()
        .map(|(kind, mut values)| {
            let mid = values.len() / 2;
            let (_, median, _) = values.select_nth_unstable(mid);
            (kind, *median)
        })
        .collect();
    for (i, edge) in graph.edges.iter().enumerate() {
        if roles[i] == Role::Latency && !binding[i] {
            d[i] = d[i].min(typical.get(&edge.kind).copied().unwrap_or(0));
        }
    }
    (d, typical)
}

/// The duration of an edge a change removed: far enough below any time that it never binds.
const REMOVED: Ns = Ns::MIN / 4;

/// The simulated time of each node and the edge that set it (`u32::MAX`: none, a source).
fn simulate(
    graph: &Graph,
    topo: &[u32],
    in_edges: &Adjacency,
    durations: &[Ns],
) -> (Vec<Ns>, Vec<u32>) {
    simulate_evened(graph, &graph.edges, topo, in_edges, durations, None)
}

/// [`simulate`] over `edges` (the graph's, or a copy some rewired: `in_edges` and `topo` hold
/// for both, [`comm_off_compute`]), with rank `evened`'s arrival at each collective ("all
/// arrived" point) no later than the median member's ([`Selector::Straggler`]).
fn simulate_evened(
    graph: &Graph,
    edges: &[Edge],
    topo: &[u32],
    in_edges: &Adjacency,
    durations: &[Ns],
    evened: Option<RankId>,
) -> (Vec<Ns>, Vec<u32>) {
    let n = graph.nodes.len();
    let mut t = vec![0; n];
    let mut via = vec![u32::MAX; n];
    let mut arrivals: Vec<Ns> = Vec::new();
    for &v in topo {
        let arrival = |e: u32, t: &[Ns]| {
            let d = durations[e as usize];
            (d != REMOVED).then(|| t[edges[e as usize].from as usize] + d)
        };
        // The straggler's cap at a collective: the median member's arrival.
        let cap = match evened {
            Some(rank) if graph.nodes[v as usize].span().is_none() => {
                arrivals.clear();
                arrivals.extend(in_edges.of(v).iter().filter_map(|&e| arrival(e, &t)));
                arrivals.sort_unstable();
                (arrivals.len() >= 2).then(|| (rank, arrivals[(arrivals.len() - 1) / 2]))
            }
            _ => None,
        };
        let mut best: Option<(Ns, u32)> = None;
        for &e in in_edges.of(v) {
            let Some(mut at) = arrival(e, &t) else {
                continue;
            };
            let edge = &edges[e as usize];
            if let Some((rank, median)) = cap {
                if graph.nodes[edge.from as usize].rank == rank {
                    at = at.min(median);
                }
            }
            if best.is_none_or(|(b, _)| at > b) {
                best = Some((at, e));
            }
        }
        match best {
            Some((at, e)) => {
                t[v as usize] = at;
                via[v as usize] = e;
            }
            None => t[v as usize] = graph.nodes[v as usize].ts,
        }
    }
    (t, via)
}

/// The bit mask of the changes whose selector `pick` accepts (bit `i`: `changes[i]`).
fn change_bits(changes: &[Scale], pick: &dyn Fn(&Selector) -> bool) -> u64 {
    changes
        .iter()
        .enumerate()
        .filter(|(_, c)| pick(&c.selector))
        .fold(0, |m, (i, _)| m | (1u64 << i))
}

/// What the changes select in a graph ([`selected`]).
#[derive(Default)]
struct Selection {
    /// The changes each span falls under, as a bit mask (bit `i`: `changes[i]`).
    masks: FxHashMap<SpanId, u64>,
    /// Each launch call inside a [`Selector::GraphLaunch`] region: the region (its outermost
    /// call).
    regions: FxHashMap<SpanId, SpanId>,
}

/// The changes each span of the graph falls under, as a bit mask per span: device ops by
/// their own name and category and by the CPU ops (`op:`) and module calls (`module:`) above
/// their launch, CPU ops by their own name and their callers' (`cpu:`, `graph-launch`); and
/// the graph-launch region of each launch call inside one.
fn selected<'o>(
    trace: &Trace,
    order: impl FnOnce() -> &'o SpanOrder,
    changes: &[Scale],
    modules: &ModuleCalls,
) -> Selection {
    let mut selection = Selection::default();
    // A straggler's lateness and overlapped communication select no span: without another
    // change there is nothing to walk (an advice's straggler is replayed once per window).
    let by_spans = change_bits(changes, &|s| {
        !matches!(
            s,
            Selector::Straggler(_) | Selector::OverlapComm | Selector::OverlapCopies
        )
    });
    if by_spans == 0 {
        return selection;
    }
    let SpanOrder { threads, device } = order();
    let masks = &mut selection.masks;
    let bits = |pick: &dyn Fn(&Selector) -> bool| change_bits(changes, pick);
    // What selects device ops by what is above their launch on its thread.
    let op_bits = bits(&|s| matches!(s, Selector::Op(_) | Selector::Module(_)));
    let sync_bits = bits(&|s| matches!(s, Selector::Sync(_)));
    let every_sync = bits(&|s| matches!(s, Selector::Sync(None)));
    // Copies made asynchronous select the blocking calls that launched a copy: known once
    // the device ops are read (below).
    let async_bits = bits(&|s| matches!(s, Selector::AsyncCopies(_)));
    let every_async = bits(&|s| matches!(s, Selector::AsyncCopies(None)));
    let every_top_level = bits(&|s| matches!(s, Selector::GraphLaunch(None)));
    let graph_bits = bits(&|s| matches!(s, Selector::GraphLaunch(_)));
    // CPU spans per thread, walked in call order with their callers' masks ("under" a name).
    let mut under: FxHashMap<SpanId, u64> = FxHashMap::default();
    let mut calls: FxHashMap<(RankId, u64), SpanId> = FxHashMap::default();
    for &(track, ref spans) in threads {
        let rank = trace.track(track).rank;
        let thread_name = trace.track(track).name.as_deref();
        // What selects every CPU op of this thread (by its name).
        let thread_bits =
            bits(&|s| matches!(s, Selector::Thread(n) if Some(n.as_str()) == thread_name));
        // Each open span, its mask, and the graph-launch region it is in.
        let mut stack: Vec<(SpanId, u64, Option<SpanId>)> = Vec::new();
        for &id in spans {
            let span = &trace.spans[id.0 as usize];
            while stack
                .last()
                .is_some_and(|(top, _, _)| trace.spans[top.0 as usize].end <= span.start)
            {
                stack.pop();
            }
            let name = trace.str(span.name);
            let mut own = bits(&|s| match s {
                Selector::Op(n)
                | Selector::Cpu(n)
                | Selector::Sync(Some(n))
                | Selector::AsyncCopies(Some(n))
                | Selector::GraphLaunch(Some(n)) => n == name,
                _ => false,
            });
            if stack.is_empty() {
                own |= every_top_level | thread_bits;
            }
            let mask = own | stack.last().map_or(0, |&(_, m, _)| m);
            let region = stack
                .last()
                .and_then(|&(_, _, r)| r)
                .or_else(|| (own & graph_bits != 0).then_some(id));
            // A synchronisation change selects blocking calls only.
            let blocking =
                span.level == Level::AcceleratorApi && super::graph::is_blocking_call(trace, id);
            let syncs = if blocking {
                (mask | every_sync) & sync_bits
            } else {
                0
            };
            let mut launched_under = mask;
            if span.level == Level::AcceleratorApi {
                if let Some(c) = span.correlation.get() {
                    calls.entry((rank, c)).or_insert(id);
                    launched_under |= modules.around(track, span.start);
                    if let Some(region) = region.filter(|&r| r != id) {
                        selection.regions.insert(id, region);
                    }
                }
            }
            let cpu = (mask & !op_bits & !sync_bits & !async_bits) | syncs;
            if cpu != 0 {
                masks.insert(id, cpu);
            }
            under.insert(id, launched_under);
            stack.push((id, mask, region));
        }
    }
    // What a device op's own name and level select, worked out once per name and level: the
    // name tests (`kernel:` substrings, collective kernels) are the cost here, and a step's
    // device ops repeat a few names.
    let mut by_name: FxHashMap<(StrId, Level), u64> = FxHashMap::default();
    for &id in device {
        let span = &trace.spans[id.0 as usize];
        let (name, level) = (trace.str(span.name), span.level);
        let mut mask = *by_name.entry((span.name, level)).or_insert_with(|| {
            bits(&|s| match s {
                Selector::Kernel(text) => name.contains(text.as_str()),
                Selector::Category(DeviceCategory::Kernel) => level == Level::DeviceKernel,
                Selector::Category(DeviceCategory::Copy) => {
                    matches!(level, Level::DeviceCopy | Level::DeviceSet)
                }
                Selector::Category(DeviceCategory::Device) => true,
                Selector::Links => {
                    level == Level::DeviceKernel
                        && crate::distributed::collectives::is_collective_kernel(name)
                }
                _ => false,
            })
        });
        let rank = trace.track(span.track).rank;
        if let Some(&call) = span.correlation.get().and_then(|c| calls.get(&(rank, c))) {
            let above = under.get(&call).copied().unwrap_or(0);
            mask |= above & op_bits;
            // A copy or memset whose call blocked: the call, made asynchronous.
            if async_bits != 0
                && matches!(level, Level::DeviceCopy | Level::DeviceSet)
                && super::graph::is_blocking_call(trace, call)
            {
                let made_async = (above | every_async) & async_bits;
                if made_async != 0 {
                    *masks.entry(call).or_insert(0) |= made_async;
                }
            }
        }
        if mask != 0 {
            masks.insert(id, mask);
        }
    }
    selection
}

/// The module calls `module:` changes select (`nn.Module: CLASS_N` spans of thread tracks), per
/// thread in call order, each with the changes it falls under (its own and those of the
/// selected calls around it). Read once per replay, then per window by time: a window's graph
/// holds only the trace's ops, and a module call is not one.
#[derive(Debug, Default, Clone)]
struct ModuleCalls {
    per_track: FxHashMap<TrackId, Vec<ModuleCall>>,
    /// Whether any change selects module calls (else none is kept).
    wanted: bool,
    /// Whether every call kept is linked ([`ModuleCalls::link`]).
    linked: bool,
}

#[derive(Debug, Clone, Copy)]
struct ModuleCall {
    start: Ns,
    end: Ns,
    /// The selected call around it (an index in its thread's list), or `u32::MAX`.
    parent: u32,
    /// The changes it falls under.
    bits: u64,
    /// The changes that select it (its class's).
    own: u64,
}

impl ModuleCalls {
    /// The calls `changes` select (none without a `module:` change: nothing is read).
    fn new(trace: &Trace, changes: &[Scale]) -> ModuleCalls {
        let mut calls = ModuleCalls::for_changes(changes);
        if calls.wanted {
            for span in &trace.spans {
                calls.add(trace, span, changes);
            }
        }
        calls.link();
        calls
    }

    /// No call yet; calls are kept ([`ModuleCalls::add`]) when `changes` has a `module:`
    /// change.
    fn for_changes(changes: &[Scale]) -> ModuleCalls {
        ModuleCalls {
            wanted: change_bits(changes, &|s| matches!(s, Selector::Module(_))) != 0,
            ..ModuleCalls::default()
        }
    }

    /// Keeps `span` of `trace` when it is a call of a module class `changes` select.
    fn add(&mut self, trace: &Trace, span: &Span, changes: &[Scale]) {
        if !self.wanted
            || span.end <= span.start
            || !matches!(trace.track(span.track).kind, TrackKind::Thread { .. })
        {
            return;
        }
        let Some((class, _)) = crate::cross_stack::modules::module_of(trace.str(span.name)) else {
            return;
        };
        let own = change_bits(
            changes,
            &|s| matches!(s, Selector::Module(c) if c.as_str() == class),
        );
        if own != 0 {
            self.linked = false;
            self.per_track
                .entry(span.track)
                .or_default()
                .push(ModuleCall {
                    start: span.start,
                    end: span.end,
                    parent: u32::MAX,
                    bits: own,
                    own,
                });
        }
    }

    /// Adds the calls of another file's tracks, which come after the `track_base` tracks of
    /// the files before it.
    fn append(&mut self, other: ModuleCalls, track_base: u32) {
        for (track, calls) in other.per_track {
            self.linked = false;
            self.per_track
                .entry(TrackId(track.0 + track_base))
                .or_default()
                .extend(calls);
        }
    }

    /// Each thread's calls in call order, each linked to the selected call around it (once
    /// every call is added; again after more are).
    fn link(&mut self) {
        if self.linked {
            return;
        }
        self.linked = true;
        for list in self.per_track.values_mut() {
            list.sort_by_key(|c| (c.start, std::cmp::Reverse(c.end)));
            let mut open: Vec<u32> = Vec::new();
            for k in 0..list.len() {
                list[k].parent = u32::MAX;
                list[k].bits = list[k].own;
                while open
                    .last()
                    .is_some_and(|&top| list[top as usize].end <= list[k].start)
                {
                    open.pop();
                }
                if let Some(&parent) = open.last() {
                    list[k].parent = parent;
                    list[k].bits |= list[parent as usize].bits;
                }
                open.push(k as u32);
            }
        }
    }

    /// [`ModuleCalls::new`] for each set of changes.
    fn of_sets(trace: &Trace, sets: &[Vec<Scale>]) -> Vec<ModuleCalls> {
        sets.iter()
            .map(|set| ModuleCalls::new(trace, &set[..set.len().min(MAX_CHANGES)]))
            .collect()
    }

    /// The changes of the selected calls open on `track` at `ts` (0 outside any).
    fn around(&self, track: TrackId, ts: Ns) -> u64 {
        let Some(list) = self.per_track.get(&track) else {
            return 0;
        };
        // The innermost open call is the last one started by `ts` or one of the calls around
        // it: calls nest.
        let mut at = list.partition_point(|c| c.start <= ts).checked_sub(1);
        while let Some(k) = at {
            let call = list[k];
            if ts < call.end {
                return call.bits;
            }
            at = (call.parent != u32::MAX).then_some(call.parent as usize);
        }
        0
    }
}

/// Replays one graph and, with changes, predicts it; appends each rank's window to `report`.
fn replay_graph(
    trace: &Trace,
    graph: &Graph,
    window: &Window,
    changes: &[Scale],
    modules: &ModuleCalls,
    report: &mut ReplayReport,
) -> Result<(), CriticalPathError> {
    let sims = Simulations::new(trace, graph, changes, modules, report)?;
    report_window(trace, &sims, window, report);
    Ok(())
}

/// Appends each rank's window of a graph's simulations to `report`.
fn report_window(trace: &Trace, sims: &Simulations, window: &Window, report: &mut ReplayReport) {
    let graph = sims.prepared.graph;
    let (t0, via0, predicted) = (&sims.t0, &sims.via0, &sims.predicted);
    let (walk, predicted_walk) = (sims.walk(trace), sims.predicted_walk(trace));
    let rank_label = |r: RankId| trace.ranks[r.0 as usize].rank.unwrap_or(i64::from(r.0));
    // Each rank's last point, traced and simulated.
    let last_of = |times: &[Ns]| {
        let mut last: Vec<Option<(Ns, u32)>> = vec![None; trace.ranks.len()];
        for (v, node) in graph.nodes.iter().enumerate() {
            if node.span().is_none() {
                continue;
            }
            let slot = &mut last[node.rank.0 as usize];
            if slot.is_none_or(|(at, _)| times[v] > at) {
                *slot = Some((times[v], v as u32));
            }
        }
        last
    };
    let traced_times: Vec<Ns> = graph.nodes.iter().map(|n| n.ts).collect();
    let measured_last = last_of(&traced_times);
    drop(traced_times);
    let simulated_last = last_of(t0);
    let predicted_last = predicted.as_ref().map(|p| last_of(&p.t));
    for &r in &window.ranks {
        let (Some(start), Some((measured, _)), Some((simulated, end))) = (
            window.starts[r.0 as usize],
            measured_last[r.0 as usize],
            simulated_last[r.0 as usize],
        ) else {
            continue;
        };
        let measured_ns = (measured - start).max(0);
        let simulated_ns = (simulated - start).max(0);
        let path = walk.path(t0, via0, end, start, r);
        let (predicted_ns, predicted_path) = match (&predicted, &predicted_last) {
            (Some(p), Some(last)) => {
                let Some((at, end)) = last[r.0 as usize] else {
                    continue;
                };
                (
                    (at - start).max(0),
                    predicted_walk.path(&p.t, &p.via, end, start, r),
                )
            }
            _ => (simulated_ns, path.clone()),
        };
        let replayed = ReplayedWindow {
            rank: rank_label(r),
            step: window.step.clone(),
            number: window.number,
            start_ns: start,
            measured_ns,
            simulated_ns,
            error_pct: error_pct(simulated_ns, measured_ns),
            edges_back_in_time: graph.negative,
            path,
        };
        report.push(replayed, predicted_ns, predicted_path);
    }
}

/// One step of one rank read from the whole trace's simulation ([`ReplayWindows::Across`]).
#[derive(Debug, Clone, Copy)]
struct AcrossStep {
    rank: RankId,
    number: u64,
    /// The step annotation's start, on the reference clock.
    start: Ns,
    /// The first point at or after `start` on the thread that annotates the rank's steps (the
    /// thread of its first annotation), with which the step's start moves in a simulation:
    /// the untraced time from the annotation to that point is kept.
    anchor: Option<u32>,
}

/// The steps of every rank and the step each point of the graph belongs to: a CPU span's
/// points to the step whose annotation holds its start, a device op's to its launching call's
/// step (by correlation on the rank; by its own start when the call is not in a step).
struct AcrossSteps {
    /// In rank, then step order.
    steps: Vec<AcrossStep>,
    /// Per point of the graph, the index of its step in `steps` ([`NO_STEP`]: none).
    member: Vec<u32>,
}

const NO_STEP: u32 = u32::MAX;

impl AcrossSteps {
    fn new(trace: &Trace, graph: &Graph) -> AcrossSteps {
        let ranks = trace.ranks.len();
        // Per rank: each step's annotation (start, end), and the thread of its first one.
        let mut annotated: Vec<BTreeMap<u64, (Ns, Ns)>> = vec![BTreeMap::new(); ranks];
        let mut thread: Vec<Option<(Ns, TrackId)>> = vec![None; ranks];
        for span in &trace.spans {
            let Some(number) = step_annotation(trace, span) else {
                continue;
            };
            let track = trace.track(span.track);
            let r = track.rank.0 as usize;
            let shift = graph.shift_of(track.rank);
            let (start, end) = (
                span.start.saturating_add(shift),
                span.end.saturating_add(shift),
            );
            let slot = annotated[r].entry(number).or_insert((start, end));
            if start < slot.0 {
                *slot = (start, end);
            }
            if thread[r].is_none_or(|(at, _)| start < at) {
                thread[r] = Some((start, span.track));
            }
        }
        let mut steps = Vec::new();
        // Per rank: its steps' (start, end, index in `steps`), in start order.
        let mut windows: Vec<Vec<(Ns, Ns, u32)>> = vec![Vec::new(); ranks];
        for (r, numbered) in annotated.iter().enumerate() {
            for (&number, &(start, end)) in numbered {
                windows[r].push((start, end, steps.len() as u32));
                steps.push(AcrossStep {
                    rank: RankId(r as u32),
                    number,
                    start,
                    anchor: None,
                });
            }
            windows[r].sort_unstable();
        }
        let step_at = |r: usize, at: Ns| {
            let w = &windows[r];
            let i = w.partition_point(|&(start, _, _)| start <= at);
            (i > 0 && at < w[i - 1].1).then(|| w[i - 1].2)
        };
        // The launching calls' steps, by (rank, correlation).
        let mut call_step: FxHashMap<(u32, u64), u32> = FxHashMap::default();
        for span in &trace.spans {
            let track = trace.track(span.track);
            if track.is_device() || span.level != Level::AcceleratorApi {
                continue;
            }
            let (Some(c), Some(step)) = (
                span.correlation.get(),
                step_at(
                    track.rank.0 as usize,
                    span.start.saturating_add(graph.shift_of(track.rank)),
                ),
            ) else {
                continue;
            };
            call_step.entry((track.rank.0, c)).or_insert(step);
        }
        let mut member = vec![NO_STEP; graph.nodes.len()];
        let mut thread_points: Vec<Vec<(Ns, u32)>> = vec![Vec::new(); ranks];
        for (v, node) in graph.nodes.iter().enumerate() {
            let Some(id) = node.span() else { continue };
            let span = &trace.spans[id.0 as usize];
            let r = node.rank.0 as usize;
            let own = || step_at(r, span.start.saturating_add(graph.shift_of(node.rank)));
            let step = if trace.track(span.track).is_device() {
                span.correlation
                    .get()
                    .and_then(|c| call_step.get(&(node.rank.0, c)).copied())
                    .or_else(own)
            } else {
                own()
            };
            member[v] = step.unwrap_or(NO_STEP);
            if thread[r].is_some_and(|(_, t)| node.track(trace) == t) {
                thread_points[r].push((node.ts, v as u32));
            }
        }
        for (r, points) in thread_points.iter_mut().enumerate() {
            points.sort_unstable();
            for &(start, _, i) in &windows[r] {
                let at = points.partition_point(|&(ts, _)| ts < start);
                steps[i as usize].anchor = points.get(at).map(|&(_, v)| v);
            }
        }
        AcrossSteps { steps, member }
    }

    /// Each step's last point in simulation `t` (`None`: no point of the graph is the step's).
    fn ends(&self, t: &[Ns]) -> Vec<Option<u32>> {
        let mut ends: Vec<Option<u32>> = vec![None; self.steps.len()];
        for (v, &step) in self.member.iter().enumerate() {
            if step == NO_STEP {
                continue;
            }
            let slot = &mut ends[step as usize];
            if slot.is_none_or(|e| t[v] > t[e as usize]) {
                *slot = Some(v as u32);
            }
        }
        ends
    }

    /// Each step's time in simulation `t` (the traced times for `traced`), with the point it
    /// ends at and where its time starts: from the previous step's end on the rank (its
    /// start, for a rank's first step) to its own end, so that a rank's steps add up to its
    /// first step's start to its last step's end. A step's start in a simulation is its
    /// anchor's time less the anchor's traced offset from the annotation. `None` for a step
    /// with no point, which is left out.
    fn times(&self, graph: &Graph, t: &[Ns]) -> Vec<Option<(Ns, u32, Ns)>> {
        let ends = self.ends(t);
        let mut out = vec![None; self.steps.len()];
        let mut previous: Option<(RankId, Ns)> = None;
        for (i, step) in self.steps.iter().enumerate() {
            let Some(end) = ends[i] else { continue };
            let from = match previous {
                Some((rank, at)) if rank == step.rank => at,
                _ => step.anchor.map_or(step.start, |a| {
                    t[a as usize] - (graph.nodes[a as usize].ts - step.start)
                }),
            };
            let end_at = t[end as usize];
            out[i] = Some(((end_at - from).max(0), end, from));
            previous = Some((step.rank, end_at));
        }
        out
    }
}

/// [`replay_graph`] over the steps of the whole trace ([`ReplayWindows::Across`]): the whole
/// trace's graph simulated once with the traced durations and once with the changes, each
/// step's time read from both ([`AcrossSteps::times`]); `only`: that step's rows alone.
fn replay_across(
    trace: &Trace,
    graph: &Graph,
    only: Option<u64>,
    changes: &[Scale],
    modules: &ModuleCalls,
    report: &mut ReplayReport,
) -> Result<(), CriticalPathError> {
    let sims = Simulations::new(trace, graph, changes, modules, report)?;
    let (t0, via0, predicted) = (&sims.t0, &sims.via0, &sims.predicted);
    let (walk, predicted_walk) = (sims.walk(trace), sims.predicted_walk(trace));
    let across = AcrossSteps::new(trace, graph);
    let traced: Vec<Ns> = graph.nodes.iter().map(|n| n.ts).collect();
    let measured = across.times(graph, &traced);
    drop(traced);
    let simulated = across.times(graph, t0);
    let predicted_times = predicted.as_ref().map(|p| across.times(graph, &p.t));
    let rank_label = |r: RankId| trace.ranks[r.0 as usize].rank.unwrap_or(i64::from(r.0));
    // In step, then rank order, as the other windows.
    let mut order: Vec<usize> = (0..across.steps.len()).collect();
    order.sort_by_key(|&i| (across.steps[i].number, across.steps[i].rank.0));
    for i in order {
        let step = &across.steps[i];
        if only.is_some_and(|n| n != step.number) {
            continue;
        }
        let (Some((measured_ns, _, _)), Some((simulated_ns, end, from))) =
            (measured[i], simulated[i])
        else {
            continue;
        };
        let path = walk.path(t0, via0, end, from, step.rank);
        let (predicted_ns, predicted_path) = match (&predicted, &predicted_times) {
            (Some(p), Some(times)) => {
                let Some((ns, end, from)) = times[i] else {
                    continue;
                };
                (ns, predicted_walk.path(&p.t, &p.via, end, from, step.rank))
            }
            _ => (simulated_ns, path.clone()),
        };
        let replayed = ReplayedWindow {
            rank: rank_label(step.rank),
            step: format!("ProfilerStep#{}", step.number),
            number: step.number,
            start_ns: step.start,
            measured_ns,
            simulated_ns,
            error_pct: error_pct(simulated_ns, measured_ns),
            edges_back_in_time: graph.negative,
            path,
        };
        report.push(replayed, predicted_ns, predicted_path);
    }
    Ok(())
}

/// A graph simulated twice: with the traced durations (the replay) and, with changes, with
/// them applied (`predicted`; `None` without changes: the prediction is the replay, gain 0,
/// the same path).
struct Simulations<'g> {
    prepared: Prepared<'g>,
    t0: Vec<Ns>,
    via0: Vec<u32>,
    predicted: Option<Predicted>,
}

impl<'g> Simulations<'g> {
    /// Counts each change's ops in `report` ([`predict`]); `Err` when the graph has a cycle.
    fn new(
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
    fn replay(trace: &Trace, graph: &'g Graph) -> Result<Simulations<'g>, CriticalPathError> {
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
    fn walk<'a>(&'a self, trace: &'a Trace) -> PathWalk<'a> {
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
    fn predicted_walk<'a>(&'a self, trace: &'a Trace) -> PathWalk<'a> {
        let rewired = self.predicted.as_ref().and_then(|p| p.rewired.as_deref());
        PathWalk {
            edges: rewired.unwrap_or(&self.prepared.graph.edges),
            ..self.walk(trace)
        }
    }
}

/// A graph ready to be simulated: the edges into each point, a topological order, and each
/// edge's role and traced duration.
struct Prepared<'g> {
    graph: &'g Graph,
    in_edges: Adjacency,
    topo: Vec<u32>,
    roles: Vec<Role>,
    traced: Vec<Ns>,
    /// The typical (median binding) latency of each kind.
    typical: FxHashMap<PathKind, Ns>,
    /// The graph's spans in the order [`selected`] walks them, made at its first call and
    /// kept for the other sets of changes replayed on the same graph.
    order: std::sync::OnceLock<SpanOrder>,
}

/// A graph's spans as [`selected`] walks them: CPU spans per thread in call order (start,
/// then the longer first), and the device ops.
#[derive(Debug, Default)]
struct SpanOrder {
    threads: Vec<(TrackId, Vec<SpanId>)>,
    device: Vec<SpanId>,
}

impl SpanOrder {
    fn new(trace: &Trace, graph: &Graph) -> SpanOrder {
        let mut threads: FxHashMap<TrackId, Vec<SpanId>> = FxHashMap::default();
        let mut device: Vec<SpanId> = Vec::new();
        for &id in graph.span_nodes.keys() {
            let span = &trace.spans[id.0 as usize];
            if trace.track(span.track).is_device() {
                device.push(id);
            } else {
                threads.entry(span.track).or_default().push(id);
            }
        }
        let threads = threads
            .into_iter()
            .map(|(track, mut spans)| {
                spans.sort_by_key(|id| {
                    let s = &trace.spans[id.0 as usize];
                    (
                        s.start,
                        std::cmp::Reverse(s.end),
                        s.same_extent_order(),
                        id.0,
                    )
                });
                (track, spans)
            })
            .collect();
        SpanOrder { threads, device }
    }
}

impl<'g> Prepared<'g> {
    /// `Err` when the graph has a cycle.
    fn new(trace: &Trace, graph: &'g Graph) -> Result<Prepared<'g>, CriticalPathError> {
        let in_edges = Adjacency::new(graph.nodes.len(), &graph.edges, |e| e.to);
        let topo = topological_order(graph, &in_edges)?;
        let roles: Vec<Role> = graph.edges.iter().map(|e| role(trace, graph, e)).collect();
        let (traced, typical) = traced_durations(graph, &roles, &in_edges);
        Ok(Prepared {
            graph,
            in_edges,
            topo,
            roles,
            traced,
            typical,
            order: std::sync::OnceLock::new(),
        })
    }

    /// The graph's spans in [`selected`]'s order.
    fn order(&self, trace: &Trace) -> &SpanOrder {
        self.order.get_or_init(|| SpanOrder::new(trace, self.graph))
    }

    /// The simulation with the traced durations: each point's time and the edge it came by.
    fn simulate(&self) -> (Vec<Ns>, Vec<u32>) {
        simulate(self.graph, &self.topo, &self.in_edges, &self.traced)
    }
}

/// A simulation with changes: each point's time, the edge it came by, and the edges when a
/// change rewired some ([`comm_off_compute`]; `None`: the graph's).
struct Predicted {
    t: Vec<Ns>,
    via: Vec<u32>,
    rewired: Option<Vec<Edge>>,
}

/// The simulation of `prepared` with `changes` (and the module calls they select) applied to
/// the traced durations; counts each change's ops in `report`.
fn predict(
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
fn graph_launches(
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
fn comm_off_compute(
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
fn copies_off_compute(
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
enum OffCompute {
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
fn off_compute(
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
fn straggler(trace: &Trace, graph: &Graph, label: Option<i64>) -> Option<RankId> {
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

fn error_pct(simulated: Ns, measured: Ns) -> f64 {
    if measured <= 0 {
        return 0.0;
    }
    100.0 * (simulated - measured).abs() as f64 / measured as f64
}

/// The path's name for an edge's time.
fn kind_name(role: Role, kind: PathKind) -> &'static str {
    match role {
        Role::Untraced => "untraced",
        _ => kind.as_str(),
    }
}

/// What walking a simulation's path back reads of one graph.
#[derive(Clone, Copy)]
struct PathWalk<'a> {
    trace: &'a Trace,
    graph: &'a Graph,
    /// The edges simulated: the graph's, or a copy a change rewired.
    edges: &'a [Edge],
    roles: &'a [Role],
    in_edges: &'a Adjacency,
}

impl PathWalk<'_> {
    /// The path of rank `rank`'s window ending at node `end` of a simulation (`t`, `via`),
    /// inside `[start, t[end]]` ([`WindowPath`]).
    fn path(&self, t: &[Ns], via: &[u32], end: u32, start: Ns, rank: RankId) -> WindowPath {
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
    fn peer_wait(
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

#[cfg(test)]
mod tests {
    use super::*;
    use strato_trace::testing::TraceBuilder;
    use strato_trace::OptionalId;

    /// One step whose answer is known by construction: `fwd` launches `gemm` (launch-bound,
    /// 40 ns after its call) and `relu` (bound by its stream, 5 ns after `gemm`), the thread
    /// then waits in `cudaStreamSynchronize` for `relu` (returning 45 ns after it) and runs
    /// `opt` after a 10 ns untraced gap.
    fn step() -> Trace {
        let mut b = TraceBuilder::new();
        let cpu = b.thread(1, 1);
        let gpu = b.queue(0, 7);
        b.span(cpu, Level::Operation, "ProfilerStep#1", 0, 1000);
        b.span(cpu, Level::Backend, "fwd", 0, 100);
        b.span(cpu, Level::AcceleratorApi, "cudaLaunchKernel", 10, 20)
            .correlation(1);
        b.span(cpu, Level::AcceleratorApi, "cudaLaunchKernel", 30, 40)
            .correlation(2);
        b.span(gpu, Level::DeviceKernel, "gemm", 50, 350)
            .correlation(1);
        b.span(gpu, Level::DeviceKernel, "relu", 355, 655)
            .correlation(2);
        b.span(
            cpu,
            Level::AcceleratorApi,
            "cudaStreamSynchronize",
            100,
            700,
        )
        .correlation(3);
        b.span(gpu, Level::DeviceSync, "Stream Sync", 600, 655)
            .correlation(3);
        b.span(cpu, Level::Backend, "opt", 710, 800);
        b.build()
    }

    fn run(trace: &Trace, changes: &[&str]) -> ReplayReport {
        let changes: Vec<Scale> = changes.iter().map(|c| Scale::parse(c).unwrap()).collect();
        run_changes(trace, &changes)
    }

    /// Every step of `trace` replayed and predicted with `changes`.
    fn run_changes(trace: &Trace, changes: &[Scale]) -> ReplayReport {
        replay(
            trace,
            &CriticalPathOptions::default(),
            ReplayWindows::Steps(None),
            changes,
        )
        .unwrap()
    }

    /// `trace` replayed without a change (asserting the `simulated` time it gives back), then
    /// predicted with `change` (asserting the `matched` ops it selects).
    fn replayed_then(trace: &Trace, simulated: Ns, change: Scale, matched: usize) -> ReplayReport {
        assert_eq!(run(trace, &[]).replay[0].simulated_ns, simulated);
        let report = run_changes(trace, &[change]);
        assert_eq!(report.changes[0].matched_ops, matched);
        report
    }

    fn conserves(w: &PredictedWindow) {
        let kinds: Ns = w.path.by_kind.values().sum();
        assert_eq!(kinds + w.path.before_path_ns, w.predicted_ns, "{w:?}");
    }

    #[test]
    fn the_traced_durations_give_back_the_trace() {
        let report = run(&step(), &[]);
        assert_eq!(report.replay.len(), 1);
        let w = &report.replay[0];
        assert_eq!((w.start_ns, w.measured_ns, w.simulated_ns), (0, 800, 800));
        assert_eq!(w.error_pct, 0.0);
        // Without changes the prediction is the replay.
        assert_eq!(report.predicted.len(), 1);
        assert_eq!(
            (
                report.predicted[0].predicted_ns,
                report.predicted[0].gain_ns
            ),
            (800, 0)
        );
        assert_eq!(report.predicted[0].path, w.path);
    }

    #[test]
    fn a_faster_kernel_moves_what_waits_for_it() {
        // gemm 300 -> 150 ns: relu follows it 5 ns later (its launch, 40 ns after its call,
        // no longer binds), the sync returns 45 ns after relu, opt 10 ns later.
        let report = run(&step(), &["kernel:gemm=0.5"]);
        assert_eq!(report.changes[0].matched_ops, 1);
        let w = &report.predicted[0];
        assert_eq!((w.baseline_ns, w.predicted_ns, w.gain_ns), (800, 650, 150));
        conserves(w);
        assert_eq!(w.path.before_path_ns, 0);
        let by = |k: &str| w.path.by_kind[k];
        assert_eq!(
            (by("cpu_op"), by("launch"), by("kernel"), by("idle")),
            (100, 40, 450, 5)
        );
        assert_eq!((by("sync_wait"), by("untraced")), (45, 10));
        // relu's time on the path: it ran 300 ns after waiting 5 ns for its stream.
        let bottleneck = w.path.bottleneck.as_ref().unwrap();
        assert_eq!(
            (bottleneck.name.as_str(), bottleneck.kind, bottleneck.ns),
            ("relu", "kernel", 305)
        );
    }

    #[test]
    fn ops_select_the_kernels_they_launch_and_cpu_ops_their_own_time() {
        let under_fwd = run(&step(), &["op:fwd=0.5"]);
        assert_eq!(under_fwd.changes[0].matched_ops, 2);
        assert_eq!(under_fwd.predicted[0].predicted_ns, 500);
        let opt = run(&step(), &["cpu:opt=0.5"]);
        assert_eq!(opt.changes[0].matched_ops, 1);
        assert_eq!(opt.predicted[0].predicted_ns, 755);
        // Changes compose: gemm gone and opt halved.
        let both = run(&step(), &["kernel:gemm=0", "cpu:opt=0.5"]);
        let w = &both.predicted[0];
        conserves(w);
        // relu starts at max(call 30 + 40, gemm's end 50 + 5) = 70, ends 370; the sync
        // returns at 415, opt runs 425..470.
        assert_eq!(w.predicted_ns, 470);
        // A change that selects nothing changes nothing.
        let none = run(&step(), &["kernel:conv=0.1"]);
        assert_eq!(none.changes[0].matched_ops, 0);
        assert_eq!(none.predicted[0].gain_ns, 0);
    }

    /// Twice the link bandwidth: the all-reduce's transfer (410..700 on both ranks, after rank
    /// 1 arrives) takes 145 ns instead of 290, both ranks end at 555; the wait is unchanged.
    #[test]
    fn faster_links_shorten_the_collectives_transfer_not_the_wait() {
        let (trace, options) = late_peer();
        let change = Scale::link_bandwidth(2.0).unwrap();
        assert_eq!(change.text, "link-bw=2");
        let r = replay(&trace, &options, ReplayWindows::Steps(None), &[change]).unwrap();
        assert_eq!(r.changes[0].matched_ops, 2);
        let got: Vec<(i64, Ns, Ns)> = (r.predicted.iter())
            .map(|w| (w.rank, w.baseline_ns, w.predicted_ns))
            .collect();
        assert_eq!(got, [(0, 700, 555), (1, 700, 555)]);
        r.predicted.iter().for_each(conserves);
        // Rank 0 still waits 300 ns for rank 1.
        let waited: Ns = (r.predicted[0].path.peer_waits.iter())
            .map(|p| p.waited_ns)
            .sum();
        assert_eq!(waited, 300);
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(Scale::link_bandwidth(bad).is_err(), "{bad}");
        }
    }

    /// One stream shared by compute and communication, every launch early: gemm1 (300 ns),
    /// an all-reduce (200), gemm2 (300), a second all-reduce (500), back to back (1300 ns).
    fn shared_stream() -> Trace {
        one_stream(&[
            (Level::DeviceKernel, "gemm1", 50, 350),
            (Level::DeviceKernel, "ncclKernel_AllReduce", 350, 550),
            (Level::DeviceKernel, "gemm2", 550, 850),
            (Level::DeviceKernel, "ncclKernel_AllReduce", 850, 1350),
        ])
    }

    /// One step (0..1500) whose device ops `ops` run on one stream, the i-th launched at
    /// 10 x i (`cudaLaunchKernel`, or `cudaMemcpyAsync` for a copy; 10 ns each).
    fn one_stream(ops: &[(Level, &str, Ns, Ns)]) -> Trace {
        let mut b = TraceBuilder::new();
        let cpu = b.thread(1, 1);
        let gpu = b.queue(0, 7);
        b.span(cpu, Level::Operation, "ProfilerStep#1", 0, 1500);
        for (i, &(level, name, start, end)) in ops.iter().enumerate() {
            let (c, at) = (i as u64 + 1, 10 * (i as Ns + 1));
            let call = if level == Level::DeviceCopy {
                "cudaMemcpyAsync"
            } else {
                "cudaLaunchKernel"
            };
            b.span(cpu, Level::AcceleratorApi, call, at, at + 10)
                .correlation(c);
            b.span(gpu, level, name, start, end).correlation(c);
        }
        b.build()
    }

    #[test]
    fn overlapped_communication_leaves_compute_and_keeps_its_own_order() {
        let report = replayed_then(&shared_stream(), 1350, Scale::overlap_comm(), 2);
        // gemm1 and gemm2 back to back (50..650); the first all-reduce starts at its launch
        // (with the typical 40 ns delay: 20 + 40 = 60, 60..260), the second behind it
        // (260..760, not at its own launch, 80), which ends the step.
        let w = &report.predicted[0];
        assert_eq!((w.baseline_ns, w.predicted_ns, w.gain_ns), (1350, 760, 590));
        conserves(w);
        let by = |k: &str| w.path.by_kind[k];
        assert_eq!((by("kernel"), by("idle")), (700, 0));
        assert_eq!(
            w.path.bottleneck.as_ref().map(|b| (b.name.as_str(), b.ns)),
            Some(("ncclKernel_AllReduce", 500))
        );
        // Compute alone changes nothing.
        let report = run(&shared_stream(), &["kernel:gemm=1"]);
        assert_eq!(report.predicted[0].predicted_ns, 1350);
    }

    /// One stream shared by compute and copies, every launch early: gemm1 (300 ns), a
    /// host-to-device copy (200), gemm2 (300), a device-to-host copy (500), gemm3 (100), back
    /// to back (50..1450).
    fn copies_on_the_compute_stream() -> Trace {
        one_stream(&[
            (Level::DeviceKernel, "gemm1", 50, 350),
            (
                Level::DeviceCopy,
                "Memcpy HtoD (Pinned -> Device)",
                350,
                550,
            ),
            (Level::DeviceKernel, "gemm2", 550, 850),
            (
                Level::DeviceCopy,
                "Memcpy DtoH (Device -> Pinned)",
                850,
                1350,
            ),
            (Level::DeviceKernel, "gemm3", 1350, 1450),
        ])
    }

    #[test]
    fn overlapped_copies_leave_compute_and_keep_their_data() {
        let report = replayed_then(
            &copies_on_the_compute_stream(),
            1450,
            Scale::overlap_copies(),
            2,
        );
        // The host-to-device copy starts at its launch (20, with the typical 40 ns delay:
        // 60..260) and gemm2 no longer waits for it: it follows gemm1 (350..650). The
        // device-to-host copy still waits for gemm2, whose result it copies (650..1150), and
        // gemm3 no longer waits for it (650..750): the copy ends the step.
        let w = &report.predicted[0];
        assert_eq!(
            (w.baseline_ns, w.predicted_ns, w.gain_ns),
            (1450, 1150, 300)
        );
        conserves(w);
        assert_eq!(
            w.path.bottleneck.as_ref().map(|b| (b.name.as_str(), b.ns)),
            Some(("Memcpy DtoH (Device -> Pinned)", 500))
        );
        // A trace without such copies: nothing matched, and the change says why.
        let report = run_changes(&shared_stream(), &[Scale::overlap_copies()]);
        assert_eq!(report.changes[0].matched_ops, 0);
        assert!(report.changes[0]
            .note
            .as_deref()
            .is_some_and(|n| n.contains("no host-to-device copy")));
        assert_eq!(report.predicted[0].gain_ns, 0);
    }

    #[test]
    fn overlapped_communication_stops_waiting_for_compute_across_streams() {
        // The all-reduce's stream waits for an event recorded after k1 on the compute
        // stream; the thread then waits for the device.
        let trace = super::super::tests::event_wait_trace(
            (Level::Operation, "ProfilerStep#1", 1000),
            "ncclKernel_AllReduce",
        );
        let report = run_changes(&trace, &[Scale::overlap_comm()]);
        assert_eq!(report.changes[0].matched_ops, 1);
        // The all-reduce runs at its launch (26 + 20: k1's launch delay, the typical one),
        // 46..136, beside k1; the synchronisation now returns after k1 (500), with the
        // typical synchronisation delay (50 ns, the all-reduce's end to the call's end).
        let w = &report.predicted[0];
        assert_eq!((w.baseline_ns, w.predicted_ns, w.gain_ns), (650, 550, 100));
        conserves(w);
        assert_eq!(w.path.bottleneck.as_ref().unwrap().name, "k1");
    }

    /// A forward whose three short kernels (10 ns each) wait for the host: each launched
    /// 400 ns after the one before (framework work between launches), 50 ns after its call,
    /// the last 250 ns after (a launch queue that filled). The step ends with the last kernel,
    /// at 1160 ns.
    fn host_bound() -> Trace {
        let mut b = TraceBuilder::new();
        let cpu = b.thread(1, 1);
        let gpu = b.queue(0, 7);
        b.span(cpu, Level::Operation, "ProfilerStep#1", 0, 2000);
        b.span(cpu, Level::Backend, "fwd", 0, 1000);
        for (i, (at, delay)) in [(100, 50), (500, 50), (900, 250)].into_iter().enumerate() {
            let c = i as u64 + 1;
            b.span(cpu, Level::AcceleratorApi, "cudaLaunchKernel", at, at + 10)
                .correlation(c);
            b.span(gpu, Level::DeviceKernel, "k", at + delay, at + delay + 10)
                .correlation(c);
        }
        b.build()
    }

    #[test]
    fn a_graph_launch_takes_the_regions_host_work_off_its_kernels() {
        let run_with = |change: Scale| run_changes(&host_bound(), &[change]);
        for change in [Scale::graph_launch("fwd"), Scale::graph_launch("")] {
            let report = run_with(change.clone());
            assert_eq!(report.changes[0].matched_ops, 3, "{change:?}");
            // fwd costs nothing, and its kernels are submitted at its start: each after the
            // typical launch delay (50 ns, not the last one's 250), back to back, 50..80.
            let w = &report.predicted[0];
            assert_eq!((w.baseline_ns, w.predicted_ns, w.gain_ns), (1160, 80, 1080));
            conserves(w);
            let by = |k: &str| w.path.by_kind[k];
            assert_eq!((by("kernel"), by("launch"), by("cpu_op")), (30, 50, 0));
            assert_eq!(w.path.before_path_ns, 0);
        }
        // A region the trace does not have changes nothing.
        let report = run_with(Scale::graph_launch("bwd"));
        assert_eq!(report.changes[0].matched_ops, 0);
        assert_eq!(report.predicted[0].predicted_ns, 1160);
    }

    /// `step()` with two module calls on the CPU thread (Python-level spans, not graph ops):
    /// `Attn` around gemm's launch only, `Block` around both launches.
    fn step_with_modules() -> Trace {
        let mut t = step();
        let cpu = t.spans[1].track;
        for (name, start, end) in [("nn.Module: Block_0", 2, 95), ("nn.Module: Attn_0", 5, 25)] {
            let name = t.strings.intern(name);
            let category = t.strings.intern("python_function");
            t.spans.push(strato_trace::Span {
                track: cpu,
                start,
                end,
                name,
                category,
                level: Level::Python,
                correlation: OptionalId::NONE,
                external_id: OptionalId::NONE,
                args: None,
            });
        }
        t
    }

    #[test]
    fn modules_select_the_kernels_launched_inside_their_calls() {
        let t = step_with_modules();
        // Attn launched gemm only: as gemm's own change (800 -> 650).
        let attn = run(&t, &["module:Attn=0.5"]);
        assert_eq!(attn.changes[0].matched_ops, 1);
        let by_kernel = run(&t, &["kernel:gemm=0.5"]);
        assert_eq!(attn.predicted[0].predicted_ns, 650);
        assert_eq!(attn.predicted[0].path, by_kernel.predicted[0].path);
        conserves(&attn.predicted[0]);
        // Block launched both, as fwd did (the enclosing call's change reaches the inner one's
        // launches too).
        let block = run(&t, &["module:Block=0.5"]);
        assert_eq!(block.changes[0].matched_ops, 2);
        assert_eq!(block.predicted[0].predicted_ns, 500);
        // Nested selected calls: each launch is counted once per change.
        let both = run(&t, &["module:Block=1", "module:Attn=0.5"]);
        assert_eq!(
            (both.changes[0].matched_ops, both.changes[1].matched_ops),
            (2, 1)
        );
        assert_eq!(both.predicted[0].predicted_ns, 650);
        // A class with no call, and the instance's full name, select nothing.
        for change in ["module:Mlp=0.5", "module:Attn_0=0.5"] {
            let none = run(&t, &[change]);
            assert_eq!(none.changes[0].matched_ops, 0, "{change}");
            assert_eq!(none.predicted[0].gain_ns, 0, "{change}");
        }
        // Without a module change nothing of them is read, and the CPU ops are unchanged.
        assert_eq!(run(&t, &["cpu:opt=0.5"]).predicted[0].predicted_ns, 755);
    }

    #[test]
    fn a_removed_synchronisation_lets_the_host_run_ahead() {
        // Without its wait the sync costs its 45 ns return (the median binding sync latency),
        // opt runs 155..245, and the step ends when relu does (655).
        let trace = step();
        let changes = [Scale::no_sync("")];
        let report = replay(
            &trace,
            &CriticalPathOptions::default(),
            ReplayWindows::Steps(None),
            &changes,
        )
        .unwrap();
        assert_eq!(report.changes[0].matched_ops, 1);
        let w = &report.predicted[0];
        conserves(w);
        assert_eq!((w.predicted_ns, w.gain_ns), (655, 145));
        // Only the synchronisations under an op: none is under fwd.
        let under_fwd = replay(
            &trace,
            &CriticalPathOptions::default(),
            ReplayWindows::Steps(None),
            &[Scale::no_sync("fwd")],
        )
        .unwrap();
        assert_eq!(under_fwd.changes[0].matched_ops, 0);
        assert_eq!(under_fwd.predicted[0].gain_ns, 0);
    }

    /// Three steps known by construction, each `prepare` (100 ns), a launch whose kernel runs
    /// 300 ns from 40 ns after the call's start, and a `cudaStreamSynchronize` that returns
    /// 10 ns after the kernel; the next step starts 10 ns (untraced) after that.
    fn synced_steps() -> Trace {
        let mut b = TraceBuilder::new();
        let cpu = b.thread(1, 1);
        let gpu = b.queue(0, 7);
        for k in 0..3i64 {
            let at = 460 * k;
            let (launch, sync) = (2 * k as u64 + 1, 2 * k as u64 + 2);
            b.span(
                cpu,
                Level::Operation,
                &format!("ProfilerStep#{}", k + 1),
                at,
                at + 460,
            );
            b.span(cpu, Level::Backend, "prepare", at, at + 100);
            b.span(
                cpu,
                Level::AcceleratorApi,
                "cudaLaunchKernel",
                at + 100,
                at + 110,
            )
            .correlation(launch);
            b.span(gpu, Level::DeviceKernel, "gemm", at + 140, at + 440)
                .correlation(launch);
            b.span(
                cpu,
                Level::AcceleratorApi,
                "cudaStreamSynchronize",
                at + 110,
                at + 450,
            )
            .correlation(sync);
            b.span(gpu, Level::DeviceSync, "Stream Sync", at + 430, at + 440)
                .correlation(sync);
        }
        b.build()
    }

    fn across(trace: &Trace, only: Option<u64>, changes: &[Scale]) -> ReplayReport {
        replay(
            trace,
            &CriticalPathOptions::default(),
            ReplayWindows::Across(only),
            changes,
        )
        .unwrap()
    }

    #[test]
    fn steps_read_across_the_whole_trace_give_it_back_and_add_up() {
        let report = across(&synced_steps(), None, &[]);
        let got: Vec<(String, Ns, Ns)> = (report.replay.iter())
            .map(|w| (w.step.clone(), w.measured_ns, w.simulated_ns))
            .collect();
        // Step 1 from its start to its sync's return (450); each next one from the previous
        // end to its own (460): they add up to the first start to the last end (1370).
        assert_eq!(
            got,
            [
                ("ProfilerStep#1".to_owned(), 450, 450),
                ("ProfilerStep#2".to_owned(), 460, 460),
                ("ProfilerStep#3".to_owned(), 460, 460),
            ]
        );
        assert!(report.replay.iter().all(|w| w.error_pct == 0.0));
        for w in &report.predicted {
            conserves(w);
        }
        // One step asked: its row alone, the same figures.
        let only = across(&synced_steps(), Some(2), &[]);
        assert_eq!(only.replay.len(), 1);
        assert_eq!(
            (only.replay[0].number, only.replay[0].measured_ns),
            (2, 460)
        );
    }

    #[test]
    fn a_removed_step_end_sync_carries_into_the_next_steps() {
        // Without their waits the syncs cost their 10 ns return: the host runs a step every
        // 130 ns (prepare, launch, sync, the untraced 10 ns) while each kernel waits for the
        // previous one (a stream gap that never bound costs nothing). Kernels: 140..440,
        // 440..740, 740..1040. Steps, end to end: 440, 300, 300 (the device's pace).
        let trace = synced_steps();
        let report = across(&trace, None, &[Scale::no_sync("")]);
        assert_eq!(report.changes[0].matched_ops, 3);
        let got: Vec<(Ns, Ns)> = (report.predicted.iter())
            .map(|w| (w.baseline_ns, w.predicted_ns))
            .collect();
        assert_eq!(got, [(450, 440), (460, 300), (460, 300)]);
        for w in &report.predicted {
            conserves(w);
        }
        // What the later steps waited on: the kernels, back to back.
        assert_eq!(report.predicted[2].path.by_kind["kernel"], 300);
        // Step by step, each graph alone, the host's head start is lost at each step's end:
        // every step ends with its kernel, 10 ns earlier.
        let alone = run_changes(&trace, &[Scale::no_sync("")]);
        let got: Vec<Ns> = alone.predicted.iter().map(|w| w.predicted_ns).collect();
        assert_eq!(got, [440, 440, 440]);
    }

    #[test]
    fn changes_are_parsed_with_their_errors_named() {
        let scale = Scale::parse("op:aten::mm=0.5").unwrap();
        assert_eq!(scale.selector, Selector::Op("aten::mm".into()));
        assert_eq!(scale.factor, 0.5);
        let module = Scale::parse("module:Qwen2Attention=0.67").unwrap();
        assert_eq!(module.selector, Selector::Module("Qwen2Attention".into()));
        for (bad, says) in [
            ("gemm=0.5", "not KIND:NAME=FACTOR"),
            ("kernel:gemm", "not KIND:NAME=FACTOR"),
            ("kernel:gemm=-1", "finite number >= 0"),
            ("kernel:gemm=inf", "finite number >= 0"),
            ("layer:Attention=0.5", "no selector kind \"layer\""),
            ("category:tensor=0.5", "no category \"tensor\""),
            ("kernel:=0.5", "no name after kernel:"),
        ] {
            let err = Scale::parse(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    /// The names of the events on the critical path of the first step's first rank.
    fn first_step_path(trace: &Trace) -> Vec<String> {
        let steps = super::super::critical_path_steps(trace, &CriticalPathOptions::default(), None)
            .unwrap();
        (steps[0].ranks[0].path.events.iter())
            .map(|e| e.name.to_string())
            .collect()
    }

    /// A training step on two threads, known by construction: the main thread's forward
    /// (`fwd`, 0..100) hands off to the autograd thread's backward (150..400), whose end
    /// releases the main thread's optimizer (`opt`, 450..500); the main thread's 100..450 is an
    /// untraced gap.
    fn two_threads() -> Trace {
        let mut b = TraceBuilder::new();
        let main = b.thread(1, 1);
        let autograd = b.thread(1, 2);
        b.span(main, Level::Operation, "ProfilerStep#1", 0, 500);
        b.span(main, Level::Backend, "fwd", 0, 100);
        b.span(
            autograd,
            Level::Backend,
            "autograd::engine::evaluate_function: MulBackward0",
            150,
            400,
        );
        b.span(main, Level::Backend, "opt", 450, 500);
        b.build()
    }

    #[test]
    fn the_backward_thread_is_linked_to_the_main_thread() {
        let trace = two_threads();
        // The critical path runs through both threads.
        let names = first_step_path(&trace);
        assert_eq!(
            names,
            [
                "fwd",
                "autograd::engine::evaluate_function: MulBackward0",
                "opt"
            ]
        );
        // A backward twice as fast moves the optimizer 125 ns earlier: the hand-off and the
        // return keep their 50 ns, the main thread's gap was waiting, not work.
        let report = run(
            &trace,
            &["cpu:autograd::engine::evaluate_function: MulBackward0=0.5"],
        );
        let w = &report.predicted[0];
        conserves(w);
        assert_eq!((w.baseline_ns, w.predicted_ns, w.gain_ns), (500, 375, 125));
        assert_eq!(w.path.by_kind["sync_wait"], 100);
        assert_eq!(w.path.by_kind["cpu_op"], 100 + 125 + 50);
        // A faster forward moves everything after it.
        let fwd = run(&trace, &["cpu:fwd=0.5"]);
        assert_eq!(fwd.predicted[0].predicted_ns, 450);
    }

    /// A step of a recorded Python program (operations only, no framework op), known by
    /// construction: the main thread's `act` (0..100) hands one `env_step` to each of two
    /// worker threads (`env-0` 110..410, `env-1` 115..715: the slow one) and waits in an
    /// untraced gap; `learn` (720..820) runs when both are back.
    fn worker_pool(with_backend_op: bool) -> Trace {
        worker_pool_and(with_backend_op, |_, _| {})
    }

    /// [`worker_pool`] with what `more` adds (given the builder and the main thread).
    fn worker_pool_and(
        with_backend_op: bool,
        more: impl FnOnce(&mut TraceBuilder, strato_trace::TrackId),
    ) -> Trace {
        let mut b = TraceBuilder::new();
        let main = b.thread(1, 1);
        let env0 = b.thread(1, 2);
        let env1 = b.thread(1, 3);
        b.trace_mut().tracks[env0.0 as usize].name = Some("env-0".into());
        b.trace_mut().tracks[env1.0 as usize].name = Some("env-1".into());
        b.span(main, Level::Operation, "ProfilerStep#1", 0, 820);
        b.span(main, Level::Operation, "act", 0, 100);
        b.span(env0, Level::Operation, "env_step", 110, 410);
        b.span(env1, Level::Operation, "env_step", 115, 715);
        b.span(main, Level::Operation, "learn", 720, 820);
        if with_backend_op {
            // A framework op anywhere on the rank: its CPU work is read at the framework's
            // levels, as in a Kineto trace (operations are annotations there).
            b.span(main, Level::Backend, "aten::add", 900, 910);
        }
        more(&mut b, main);
        b.build()
    }

    #[test]
    fn a_recorded_python_program_replays_its_operations_across_its_threads() {
        let trace = worker_pool(false);
        let report = run(&trace, &[]);
        assert_eq!(report.replay.len(), 1);
        let w = &report.replay[0];
        assert_eq!((w.measured_ns, w.simulated_ns), (820, 820));
        // The critical path runs act -> the slow worker's env_step -> learn.
        let names = first_step_path(&trace);
        assert_eq!(names, ["act", "env_step", "learn"]);
        // The slow worker as fast as the other (`thread:env-1=0.5`): its env_step takes 300
        // ns and ends at 415; learn starts when both workers are back: env-1's return keeps
        // its 5 ns, env-0's the typical hand-off latency (the median of the binding ones:
        // 10, 15 and 5 ns): 420. The main thread's gap was waiting, not work.
        let even = run(&trace, &["thread:env-1=0.5"]);
        assert_eq!(even.changes[0].matched_ops, 1);
        let p = &even.predicted[0];
        conserves(p);
        assert_eq!((p.baseline_ns, p.predicted_ns, p.gain_ns), (820, 520, 300));
        // An operation made faster: act at half its time moves everything after it.
        let act = run(&trace, &["cpu:act=0.5"]);
        assert_eq!(act.predicted[0].predicted_ns, 770);
        // The fast worker made faster buys nothing: the slow one binds.
        let fast = run(&trace, &["thread:env-0=0.5"]);
        assert_eq!(fast.predicted[0].gain_ns, 0);
        // A thread name nobody has selects nothing.
        assert_eq!(run(&trace, &["thread:env-9=0.5"]).changes[0].matched_ops, 0);
        // With a framework op on the rank, operations are annotations: not in the graph ...
        let mut trace = worker_pool(true);
        let framework = run(&trace, &["cpu:act=0.5"]);
        assert_eq!(framework.changes[0].matched_ops, 0);
        // ... unless the rank is a stratoscope recording, whose operations are the program's
        // own work (a native call inside one is one of its CPU ops): the same answers.
        trace.ranks[0].format = strato_trace::SourceFormat::Strato;
        let recorded = run(&trace, &["thread:env-1=0.5"]);
        assert_eq!(recorded.predicted[0].gain_ns, 300);
        assert_eq!(run(&trace, &["cpu:act=0.5"]).changes[0].matched_ops, 1);
    }

    /// [`worker_pool`] with the main thread's hand-off and wait inside an operation of its own
    /// (`with operation("rollout"): pool.map(env_step, envs)`): `rollout` 100..720 holds no
    /// child, or (`with_child`) a `prepare` at 100..105 before the hand-off.
    fn worker_pool_inside_an_op(with_child: bool) -> Trace {
        worker_pool_and(false, |b, main| {
            b.span(main, Level::Operation, "rollout", 100, 720);
            if with_child {
                b.span(main, Level::Operation, "prepare", 100, 105);
            }
        })
    }

    #[test]
    fn a_main_thread_that_waits_inside_its_op_hands_off_to_its_workers() {
        for with_child in [false, true] {
            let trace = worker_pool_inside_an_op(with_child);
            let report = run(&trace, &[]);
            let w = &report.replay[0];
            assert_eq!((w.measured_ns, w.simulated_ns), (820, 820));
            // The path runs from the main thread's op into the slow worker and back: the op's
            // own time while the workers ran was waiting, not the main thread's work.
            let names = first_step_path(&trace);
            let expected: &[&str] = if with_child {
                &["act", "rollout", "prepare", "env_step", "learn"]
            } else {
                &["act", "rollout", "env_step", "learn"]
            };
            assert_eq!(names, expected, "with a child: {with_child}");
            // The slow worker as fast as the other: the step gains its 300 ns, as when the
            // main thread waited between its ops.
            let even = run(&trace, &["thread:env-1=0.5"]);
            let p = &even.predicted[0];
            conserves(p);
            assert_eq!(p.gain_ns, 300, "with a child: {with_child}");
        }
    }

    /// Two ranks meet at one collective; rank 1 launches it 300 ns later than rank 0.
    fn late_peer() -> (Trace, CriticalPathOptions) {
        let mut b = TraceBuilder::new();
        let mut kernels = Vec::new();
        for (r, late) in [(0i64, 0), (1, 300)] {
            b.rank(strato_trace::testing::rank(Some(r), "r"));
            let cpu = b.thread(10 + r, 1);
            let gpu = b.queue(0, 7);
            b.span(cpu, Level::Operation, "ProfilerStep#1", 0, 2000);
            b.span(cpu, Level::Backend, "step", 0, 100 + late);
            b.span(
                cpu,
                Level::AcceleratorApi,
                "cudaLaunchKernel",
                90 + late,
                100 + late,
            )
            .correlation(1);
            kernels.push(
                b.span(
                    gpu,
                    Level::DeviceKernel,
                    "ncclKernel_AllReduce",
                    110 + late,
                    700,
                )
                .correlation(1)
                .id(),
            );
        }
        let options = CriticalPathOptions {
            collectives: Some(vec![super::super::CollectiveInstance {
                members: (0..2)
                    .map(|r| super::super::CollectiveMember {
                        rank: RankId(r),
                        span: kernels[r as usize],
                    })
                    .collect(),
            }]),
            ..Default::default()
        };
        (b.build(), options)
    }

    #[test]
    fn a_rank_waiting_for_a_late_peer_names_it() {
        let (trace, options) = late_peer();
        let report = replay(&trace, &options, ReplayWindows::Steps(None), &[]).unwrap();
        let rank0 = &report.replay[0];
        assert_eq!((rank0.rank, rank0.error_pct), (0, 0.0));
        assert_eq!(
            rank0.path.peer_waits,
            [PeerWait {
                peer: 1,
                collective: "ncclKernel_AllReduce".into(),
                waited_ns: 300
            }]
        );
        assert!(report.replay[1].path.peer_waits.is_empty());
        // Evening the late rank's CPU (its `step` as fast as rank 0's) removes the wait.
        let even = replay(
            &trace,
            &options,
            ReplayWindows::Steps(None),
            &[Scale::parse("cpu:step=0.25").unwrap()],
        )
        .unwrap();
        assert!(even.predicted[0]
            .path
            .peer_waits
            .iter()
            .all(|p| p.waited_ns < 300));
    }

    /// Evening the straggler: rank 1 (last at the one collective) arrives with the median
    /// member (the lower median of two: rank 0, at 110 ns), so the all-reduce's transfer
    /// (290 ns) starts at 110 instead of 410 and ends at 400 on both ranks; rank 1's own work
    /// before it is unchanged (its window ends at its kernel's start, 410). Evening rank 0,
    /// which was not late, or a rank the job does not have changes nothing.
    #[test]
    fn an_evened_straggler_arrives_with_the_median_member() {
        let (trace, options) = late_peer();
        let run = |change: Scale| {
            replay(&trace, &options, ReplayWindows::Steps(None), &[change]).unwrap()
        };
        let even = run(Scale::even_straggler(None));
        assert_eq!(even.changes[0].change, "even-straggler");
        assert_eq!(even.changes[0].matched_ops, 1);
        let got: Vec<(i64, Ns, Ns, Ns)> = even
            .predicted
            .iter()
            .map(|w| (w.rank, w.baseline_ns, w.predicted_ns, w.gain_ns))
            .collect();
        assert_eq!(got, [(0, 700, 400, 300), (1, 700, 410, 290)]);
        for w in &even.predicted {
            conserves(w);
            assert!(w.path.peer_waits.iter().all(|p| p.waited_ns == 0), "{w:?}");
        }
        assert_eq!(
            run(Scale::even_straggler(Some(1))).predicted,
            even.predicted
        );
        for label in [0, 5] {
            let none = run(Scale::even_straggler(Some(label)));
            assert!(
                none.predicted.iter().all(|w| w.gain_ns == 0),
                "rank {label}"
            );
            assert_eq!(none.changes[0].matched_ops, usize::from(label == 0));
        }
    }
}
