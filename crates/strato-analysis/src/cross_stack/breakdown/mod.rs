//! Operation-scoped CPU/GPU breakdown (RL-Scope, seed 000, section 3.3) and language
//! transitions (figure 4c/d), per process.
//!
//! Window: per process, `[first start, last end)` over its CPU thread spans (all levels but
//! `Other`) and the device work attributed to it ([`crate::scope`]). The window is cut at every
//! boundary; each piece gets exactly one row key (phase, operation, resource, CPU level):
//! - CPU level = level of the innermost active CPU span on the annotated thread; when that
//!   thread shows nothing below an operation, the lowest stratum active on any other thread of
//!   the process (e.g. PyTorch's autograd thread while the main thread waits in `backward`);
//!   else `Python` inside an operation; else the CPU is not active;
//! - operation = innermost operation on the annotated thread while the CPU is active; while only
//!   the GPU is active, the operation that launched the earliest-started active device op (so
//!   GPU-only time after a launch returns belongs to the launching operation); `(none)` outside;
//! - phase = innermost `Phase` span of any thread of the process;
//! - resource = `CPU`, `GPU`, `CPU+GPU`, or `idle` (neither active);
//! - thread state (only in processes with OS data: `strato record --os`) = the state of the
//!   annotated thread from its OS-level spans of category [`THREAD_STATE_CATEGORY`]
//!   (`running`, `runnable`, `blocked:io`, `blocked:lock`, `blocked:sleep`, `blocked:other`),
//!   or null where no such span covers the piece. Thread-state spans are not CPU spans: they
//!   neither set the CPU level nor widen the window. A process with no other spans than
//!   OS-level spans (a child that records nothing itself) has no breakdown; slow system calls
//!   (category [`SYSCALL_CATEGORY`]) count as CPU level `Os` on the annotated thread only.
//!
//! Conservation: rows are integer nanoseconds and sum to `window_ns` exactly.
//!
//! Transitions: for every CPU span with a parent (the [`crate::cross_stack::hierarchy`] containment
//! parent on the same thread) whose stratum differs from its parent's, one transition parent level
//! -> child level, where an operation or phase parent reads as `Python`; it is counted under the
//! operation innermost on the annotated thread at the child's start.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

use rustc_hash::FxHashMap;
use serde::Serialize;
use strato_trace::{Level, Ns, Trace};

use crate::analyzed::Analyzed;

mod registration;
mod stream;
mod text;
use crate::cross_stack::hierarchy::Hierarchy;
use crate::scope::{
    effective_level, is_cpu_level, is_thread_state, operation_label, AttributedBy, Scopes,
};
pub use registration::{Breakdown, BreakdownSettings};
pub use stream::BreakdownStream;
pub use text::{write_csv, write_text};

/// The label used outside any operation or phase.
pub const NONE: &str = "(none)";

pub use strato_trace::names::{SYSCALL_CATEGORY, THREAD_STATE_CATEGORY};

/// A row's thread-state key: absent (the process has no OS data: the field is not written, so
/// outputs without OS data stay as they were), null (OS data exists but does not cover the
/// piece), or the state's name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum ThreadStateKey {
    #[default]
    Absent,
    Uncovered,
    State(String),
}

impl ThreadStateKey {
    pub fn is_absent(&self) -> bool {
        matches!(self, ThreadStateKey::Absent)
    }
    /// The state's name, None when absent or uncovered.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            ThreadStateKey::State(s) => Some(s),
            _ => None,
        }
    }
}

impl Serialize for ThreadStateKey {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            ThreadStateKey::State(s) => serializer.serialize_str(s),
            _ => serializer.serialize_none(),
        }
    }
}

/// Options of [`breakdown`].
#[derive(Debug, Clone, Copy, Default)]
pub struct BreakdownOptions {
    /// Keep `ProfilerStep#N` apart instead of folding them into `ProfilerStep#*`.
    pub per_step: bool,
}

/// Which resources are busy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Resource {
    #[serde(rename = "CPU")]
    Cpu,
    #[serde(rename = "GPU")]
    Gpu,
    #[serde(rename = "CPU+GPU")]
    CpuGpu,
    #[serde(rename = "idle")]
    Idle,
}

impl Resource {
    pub fn as_str(self) -> &'static str {
        match self {
            Resource::Cpu => "CPU",
            Resource::Gpu => "GPU",
            Resource::CpuGpu => "CPU+GPU",
            Resource::Idle => "idle",
        }
    }
}

/// One row: time with this (phase, operation, resource, CPU level).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub phase: String,
    pub operation: String,
    pub resource: Resource,
    /// `None` when the CPU is not active (resource `GPU` or `idle`).
    pub cpu_level: Option<Level>,
    /// The annotated thread's OS state (see the module doc); not written when the process has
    /// no OS data.
    #[serde(skip_serializing_if = "ThreadStateKey::is_absent")]
    pub thread_state: ThreadStateKey,
    pub time_ns: Ns,
}

/// Transitions from one level to another within an operation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Transition {
    pub operation: String,
    pub from: Level,
    pub to: Level,
    pub count: u64,
}

/// Per operation totals (sums of its rows, plus device time by launch).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OperationTotals {
    pub operation: String,
    pub total_ns: Ns,
    pub cpu_only_ns: Ns,
    pub gpu_only_ns: Ns,
    pub cpu_gpu_ns: Ns,
    pub idle_ns: Ns,
    /// Length of the union of the device work this operation launched (not part of the
    /// conservation: it may overlap other operations' rows).
    pub gpu_launched_ns: Ns,
    pub device_ops_launched: usize,
}

/// The breakdown of one process.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessBreakdown {
    pub rank: i64,
    /// The process's rank by position in the trace it was computed on (not shown: what a
    /// merge of rank files renumbers).
    #[serde(skip)]
    pub rank_index: u32,
    pub source: String,
    pub pid: i64,
    pub name: Option<String>,
    /// tid of the annotated thread.
    pub annotated_tid: Option<i64>,
    pub window_start_ns: Ns,
    pub window_end_ns: Ns,
    pub window_ns: Ns,
    pub rows: Vec<Row>,
    pub operations: Vec<OperationTotals>,
    pub transitions: Vec<Transition>,
    pub device_ops: usize,
    /// Device ops given to this process because its rank has no other (no correlation).
    pub device_ops_without_launch: usize,
}

/// Cross-process summary (several processes or ranks).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CrossSummary {
    pub processes: usize,
    pub slowest_rank: i64,
    pub slowest_pid: i64,
    pub slowest_window_ns: Ns,
    pub fastest_window_ns: Ns,
    pub mean_window_ns: f64,
    /// (max - min) / mean of the windows, in percent.
    pub window_spread_pct: f64,
    /// GPU-active share of each window (GPU + CPU+GPU rows), min and max, in percent.
    pub gpu_active_min_pct: f64,
    pub gpu_active_max_pct: f64,
}

/// The breakdown of every process.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BreakdownReport {
    pub processes: Vec<ProcessBreakdown>,
    /// Device work that no process could be given (no launch, several processes in its rank).
    pub unattributed_device_ops: usize,
    pub summary: Option<CrossSummary>,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    AnnotCpu,
    Op,
    Phase,
    OtherCpu,
    Device,
    ThreadState,
}

/// The breakdown of every process (the context's scopes and hierarchy, built once).
pub fn breakdown(analyzed: &Analyzed, options: &BreakdownOptions) -> BreakdownReport {
    let (trace, scopes, h) = (analyzed.trace(), analyzed.scopes(), analyzed.hierarchy());
    let mut labels = Labels::default();
    let mut per_process: Vec<Vec<usize>> = vec![Vec::new(); scopes.processes.len()];
    for (i, o) in scopes.device_owners.iter().enumerate() {
        per_process[o.process].push(i);
    }
    let mut processes = Vec::new();
    for (p, scope) in scopes.processes.iter().enumerate() {
        if os_only(trace, scopes, scope) && per_process[p].is_empty() {
            continue;
        }
        let owners: Vec<_> = per_process[p]
            .iter()
            .map(|&i| scopes.device_owners[i])
            .collect();
        processes.push(process_breakdown(
            trace,
            scopes,
            h,
            p,
            scope,
            &owners,
            options,
            &mut labels,
        ));
    }
    let summary = summary(&processes);
    BreakdownReport {
        processes,
        unattributed_device_ops: scopes.unattributed.len(),
        summary,
    }
}

/// True when a slow system call recorded by the OS level.
fn is_os_syscall(trace: &Trace, s: &strato_trace::Span) -> bool {
    s.level == Level::Os && trace.str(s.category) == SYSCALL_CATEGORY
}

/// True when every span of the process comes from the OS level (and there is one): a process
/// of the tree that records nothing itself.
fn os_only(trace: &Trace, scopes: &Scopes, scope: &crate::scope::ProcessScope) -> bool {
    let mut any = false;
    for &t in &scope.threads {
        for &i in &scopes.by_track[t.0 as usize] {
            let s = &trace.spans[i as usize];
            if !is_thread_state(trace, s) && !is_os_syscall(trace, s) {
                return false;
            }
            any = true;
        }
    }
    any
}

/// Interned display labels.
#[derive(Default)]
struct Labels {
    names: Vec<String>,
    index: FxHashMap<String, u32>,
    by_span_name: FxHashMap<(u32, bool), u32>,
}

const NO_LABEL: u32 = u32::MAX;

impl Labels {
    fn of(
        &mut self,
        trace: &Trace,
        spans: &impl SpanFacts,
        span: Option<u32>,
        per_step: bool,
    ) -> u32 {
        let Some(span) = span else { return NO_LABEL };
        let name = spans.name(span);
        if let Some(&l) = self.by_span_name.get(&(name.0, per_step)) {
            return l;
        }
        let text = operation_label(trace.str(name), per_step);
        let next = self.names.len() as u32;
        let l = *self.index.entry(text.clone()).or_insert_with(|| {
            self.names.push(text);
            next
        });
        self.by_span_name.insert((name.0, per_step), l);
        l
    }
    /// The label of a plain text (a thread state's name).
    fn intern(&mut self, text: &str) -> u32 {
        let next = self.names.len() as u32;
        *self.index.entry(text.to_owned()).or_insert_with(|| {
            self.names.push(text.to_owned());
            next
        })
    }
    fn text(&self, l: u32) -> &str {
        if l == NO_LABEL {
            NONE
        } else {
            &self.names[l as usize]
        }
    }
}

/// What the breakdown's sweep reads of a span by its id: the whole trace's spans, or the
/// copies [`stream::BreakdownStream`] keeps. Ids are in trace order either way (the sweep
/// breaks ties by id).
pub(super) trait SpanFacts {
    /// Start and end.
    fn extent(&self, i: u32) -> (Ns, Ns);
    /// Its own level.
    fn level(&self, i: u32) -> Level;
    /// Its [`strato_trace::Span::same_extent_order`].
    fn order(&self, i: u32) -> u32;
    fn name(&self, i: u32) -> strato_trace::StrId;
}

impl SpanFacts for Trace {
    fn extent(&self, i: u32) -> (Ns, Ns) {
        let s = &self.spans[i as usize];
        (s.start, s.end)
    }
    fn level(&self, i: u32) -> Level {
        self.spans[i as usize].level
    }
    fn order(&self, i: u32) -> u32 {
        self.spans[i as usize].same_extent_order()
    }
    fn name(&self, i: u32) -> strato_trace::StrId {
        self.spans[i as usize].name
    }
}

/// What one process gives the sweep ([`sweep`]): the starts of its spans by kind, its
/// annotated thread's states, the extent of its window, and its device ops with the label of
/// the operation that launched each.
#[derive(Default)]
struct Gathered {
    /// (start, kind, span) of every span the sweep opens and closes.
    events: Vec<(Ns, Kind, u32)>,
    /// The annotated thread's thread-state spans (clipped to the window by the sweep).
    states: Vec<u32>,
    lo: Ns,
    hi: Ns,
    /// Per device op: its operation's label.
    device_label: FxHashMap<u32, u32>,
    /// The device ops, in trace order.
    device_ops: Vec<u32>,
    without_launch: usize,
}

impl Gathered {
    fn new() -> Gathered {
        Gathered {
            lo: Ns::MAX,
            hi: Ns::MIN,
            ..Gathered::default()
        }
    }

    /// A span of the process: it widens the window, and with a `kind` the sweep opens it.
    fn push(&mut self, spans: &impl SpanFacts, kind: Option<Kind>, i: u32) {
        let (start, end) = spans.extent(i);
        self.lo = self.lo.min(start);
        self.hi = self.hi.max(end);
        if let Some(kind) = kind {
            if end > start {
                self.events.push((start, kind, i));
            }
        }
    }

    /// What a CPU-thread span that is neither a thread state nor skipped is to the sweep,
    /// given its effective level (`annotated`: it is on the annotated thread): `Some(kind)`
    /// the sweep opens it, `Some(None)` it only widens the window, `None` it is ignored.
    fn kind_of(level: Level, annotated: bool) -> Option<Option<Kind>> {
        Some(match level {
            Level::Operation if annotated => Some(Kind::Op),
            Level::Phase => Some(Kind::Phase),
            l if is_cpu_level(l) && annotated => Some(Kind::AnnotCpu),
            l if is_cpu_level(l) => Some(Kind::OtherCpu),
            Level::Other => return None,
            // Operations on other threads, stray device-level spans: window only.
            _ => None,
        })
    }
}

#[allow(clippy::too_many_arguments)]
fn process_breakdown(
    trace: &Trace,
    scopes: &Scopes,
    h: &Hierarchy,
    p: usize,
    scope: &crate::scope::ProcessScope,
    owners: &[crate::scope::DeviceOwner],
    options: &BreakdownOptions,
    labels: &mut Labels,
) -> ProcessBreakdown {
    let per_step = options.per_step;
    // The spans' starts: (time, kind, span). Their ends are met in the sweep below as the
    // spans start (a heap of the open spans), not held for every span.
    let mut g = Gathered::new();
    for &t in &scope.threads {
        let annotated = scope.annotated == Some(t);
        for &i in &scopes.by_track[t.0 as usize] {
            let s = &trace.spans[i as usize];
            if is_thread_state(trace, s) {
                if annotated && s.end > s.start {
                    g.states.push(i);
                }
                continue;
            }
            // Another thread waiting in a system call is not work below the annotated
            // thread's operation (the recorder's own threads wait in `read` all along).
            if !annotated && is_os_syscall(trace, s) {
                continue;
            }
            if let Some(kind) = Gathered::kind_of(effective_level(trace, s), annotated) {
                g.push(trace, kind, i);
            }
        }
    }
    for o in owners {
        g.push(trace, Some(Kind::Device), o.span);
        let label = labels.of(trace, trace, o.operation, per_step);
        g.device_label.insert(o.span, label);
        g.device_ops.push(o.span);
        g.without_launch += usize::from(o.by == AttributedBy::OnlyProcess);
    }
    let swept = sweep(trace, trace, g, per_step, labels);
    let transitions = transitions(trace, scopes, h, p, scope, labels, per_step);
    let annotated_tid = scope.annotated.and_then(|t| match trace.track(t).kind {
        strato_trace::TrackKind::Thread { tid, .. } => Some(tid),
        _ => None,
    });
    assemble(trace, scope.key, annotated_tid, swept, transitions)
}

/// What the sweep of one process gives.
struct Swept {
    window_start: Ns,
    window_end: Ns,
    rows: Vec<Row>,
    operations: Vec<OperationTotals>,
    device_ops: usize,
    without_launch: usize,
}

/// The process's breakdown from its sweep and transitions.
fn assemble(
    trace: &Trace,
    key: crate::scope::ProcessKey,
    annotated_tid: Option<i64>,
    swept: Swept,
    transitions: Vec<Transition>,
) -> ProcessBreakdown {
    let info = &trace.ranks[key.rank.0 as usize];
    let pid = key.pid;
    let name = (trace.processes.iter())
        .find(|pr| pr.rank == key.rank && pr.pid == pid)
        .and_then(|pr| pr.name.clone());
    ProcessBreakdown {
        rank: info.rank.unwrap_or(i64::from(key.rank.0)),
        rank_index: key.rank.0,
        source: info.source.clone(),
        pid,
        name,
        annotated_tid,
        window_start_ns: swept.window_start,
        window_end_ns: swept.window_end,
        window_ns: swept.window_end - swept.window_start,
        rows: swept.rows,
        operations: swept.operations,
        transitions,
        device_ops: swept.device_ops,
        device_ops_without_launch: swept.without_launch,
    }
}

/// The sweep of one process's spans (`g`, their facts read from `spans`): its window cut at
/// every boundary into rows (see the module docs), and the operations' totals.
fn sweep(
    trace: &Trace,
    spans: &impl SpanFacts,
    g: Gathered,
    per_step: bool,
    labels: &mut Labels,
) -> Swept {
    let Gathered {
        mut events,
        states: state_events,
        lo,
        hi,
        device_label,
        device_ops,
        without_launch,
    } = g;
    // Thread states inside the window only (they do not widen it).
    let has_states = !state_events.is_empty();
    let (w_lo, w_hi) = if lo <= hi { (lo, hi) } else { (0, 0) };
    for i in state_events {
        let (start, end) = spans.extent(i);
        let (from, to) = (start.max(w_lo), end.min(w_hi));
        if to > from {
            events.push((from, Kind::ThreadState, i));
        }
    }
    events.sort_unstable();
    // Where a span started in `events` ends: a thread state at the window's end.
    let end_of = |kind: Kind, i: u32| {
        let end = spans.extent(i).1;
        if kind == Kind::ThreadState {
            end.min(w_hi)
        } else {
            end
        }
    };
    // Boundaries in the order (time, ends before starts, kind, span).
    let mut ends: BinaryHeap<Reverse<(Ns, Kind, u32)>> = BinaryHeap::new();
    let mut next_start = 0;
    // The state label of each open thread-state span: the latest started wins.
    let mut states: Vec<(u32, u32)> = Vec::new();
    let mut state_label: FxHashMap<u32, u32> = FxHashMap::default();

    let mut cpu = crate::scope::Innermost::default();
    let mut ops = crate::scope::Innermost::default();
    let mut phases = crate::scope::Innermost::default();
    let mut other_levels = [0u32; Level::ALL.len()];
    let mut devices: BTreeSet<(Ns, u32)> = BTreeSet::new();
    let mut rows: FxHashMap<(u32, u32, Resource, Option<Level>, u32), Ns> = FxHashMap::default();
    let (window_start, window_end) = if lo <= hi { (lo, hi) } else { (0, 0) };
    let mut cursor = window_start;
    let emit = |rows: &mut FxHashMap<_, Ns>, key, from: Ns, to: Ns| {
        if to > from {
            *rows.entry(key).or_insert(0) += to - from;
        }
    };
    let mut current_key = (NO_LABEL, NO_LABEL, Resource::Idle, None, NO_LABEL);
    loop {
        let t = match (ends.peek(), events.get(next_start)) {
            (None, None) => break,
            (Some(Reverse(end)), None) => end.0,
            (None, Some(start)) => start.0,
            (Some(Reverse(end)), Some(start)) => end.0.min(start.0),
        };
        emit(&mut rows, current_key, cursor, t);
        cursor = t;
        loop {
            let (start, kind, i) = match ends.peek() {
                Some(&Reverse((end, kind, i))) if end == t => {
                    ends.pop();
                    (false, kind, i)
                }
                _ => match events.get(next_start) {
                    Some(&(at, kind, i)) if at == t => {
                        next_start += 1;
                        ends.push(Reverse((end_of(kind, i), kind, i)));
                        (true, kind, i)
                    }
                    _ => break,
                },
            };
            let extent = spans.extent(i);
            match kind {
                Kind::AnnotCpu => {
                    if start {
                        cpu.insert_extent(extent, spans.level(i), spans.order(i), i)
                    } else {
                        cpu.remove_extent(extent, spans.level(i), spans.order(i), i)
                    }
                }
                Kind::Op => {
                    if start {
                        ops.insert_extent(extent, Level::Operation, spans.order(i), i)
                    } else {
                        ops.remove_extent(extent, Level::Operation, spans.order(i), i)
                    }
                }
                Kind::Phase => {
                    if start {
                        phases.insert_extent(extent, Level::Phase, spans.order(i), i)
                    } else {
                        phases.remove_extent(extent, Level::Phase, spans.order(i), i)
                    }
                }
                Kind::OtherCpu => {
                    let slot = &mut other_levels[spans.level(i).code() as usize];
                    if start {
                        *slot += 1;
                    } else {
                        *slot = slot.saturating_sub(1);
                    }
                }
                Kind::Device => {
                    if start {
                        devices.insert((extent.0, i));
                    } else {
                        devices.remove(&(extent.0, i));
                    }
                }
                Kind::ThreadState => {
                    if start {
                        let name = spans.name(i);
                        let l = *state_label
                            .entry(name.0)
                            .or_insert_with(|| labels.intern(trace.str(name)));
                        states.push((i, l));
                    } else if let Some(at) = states.iter().rposition(|&(j, _)| j == i) {
                        states.remove(at);
                    }
                }
            }
        }
        // State for [t, next boundary).
        let op = ops.get().map(|(i, _)| i);
        let level = cpu
            .get()
            .and_then(|(_, code)| Level::from_code(code))
            .or_else(|| {
                other_levels
                    .iter()
                    .rposition(|&c| c > 0)
                    .and_then(|code| Level::from_code(code as u8))
            })
            .or(op.map(|_| Level::Python));
        let gpu = !devices.is_empty();
        let phase = labels.of(trace, spans, phases.get().map(|(i, _)| i), true);
        let (resource, op_label) = match (level.is_some(), gpu) {
            (true, true) => (Resource::CpuGpu, labels.of(trace, spans, op, per_step)),
            (true, false) => (Resource::Cpu, labels.of(trace, spans, op, per_step)),
            (false, true) => {
                let first = devices.first().map(|d| d.1);
                let l = first
                    .and_then(|d| device_label.get(&d).copied())
                    .unwrap_or(NO_LABEL);
                (Resource::Gpu, l)
            }
            (false, false) => (Resource::Idle, NO_LABEL),
        };
        let state = states.last().map_or(NO_LABEL, |&(_, l)| l);
        current_key = (phase, op_label, resource, level, state);
    }
    emit(&mut rows, current_key, cursor, window_end);
    drop(events);

    // Rows, sorted by time.
    let mut out_rows: Vec<Row> = rows
        .into_iter()
        .map(|((ph, op, resource, level, state), time_ns)| Row {
            phase: labels.text(ph).to_owned(),
            operation: labels.text(op).to_owned(),
            resource,
            cpu_level: level,
            thread_state: match (has_states, state) {
                (false, _) => ThreadStateKey::Absent,
                (true, NO_LABEL) => ThreadStateKey::Uncovered,
                (true, l) => ThreadStateKey::State(labels.text(l).to_owned()),
            },
            time_ns,
        })
        .collect();
    out_rows.sort_by(|a, b| {
        b.time_ns
            .cmp(&a.time_ns)
            .then_with(|| a.operation.cmp(&b.operation))
            .then_with(|| a.resource.cmp(&b.resource))
            .then_with(|| a.cpu_level.cmp(&b.cpu_level))
            .then_with(|| a.phase.cmp(&b.phase))
            .then_with(|| a.thread_state.cmp(&b.thread_state))
    });

    // Operation totals.
    let mut totals: FxHashMap<String, OperationTotals> = FxHashMap::default();
    let total_of = |totals: &mut FxHashMap<String, OperationTotals>, name: &str| {
        if !totals.contains_key(name) {
            totals.insert(
                name.to_owned(),
                OperationTotals {
                    operation: name.to_owned(),
                    total_ns: 0,
                    cpu_only_ns: 0,
                    gpu_only_ns: 0,
                    cpu_gpu_ns: 0,
                    idle_ns: 0,
                    gpu_launched_ns: 0,
                    device_ops_launched: 0,
                },
            );
        }
    };
    for r in &out_rows {
        total_of(&mut totals, &r.operation);
        if let Some(t) = totals.get_mut(&r.operation) {
            t.total_ns += r.time_ns;
            match r.resource {
                Resource::Cpu => t.cpu_only_ns += r.time_ns,
                Resource::Gpu => t.gpu_only_ns += r.time_ns,
                Resource::CpuGpu => t.cpu_gpu_ns += r.time_ns,
                Resource::Idle => t.idle_ns += r.time_ns,
            }
        }
    }
    let mut launched: FxHashMap<u32, Vec<(Ns, Ns)>> = FxHashMap::default();
    for &i in &device_ops {
        launched
            .entry(device_label[&i])
            .or_default()
            .push(spans.extent(i));
    }
    for (l, intervals) in launched {
        let name = labels.text(l).to_owned();
        total_of(&mut totals, &name);
        if let Some(t) = totals.get_mut(&name) {
            t.device_ops_launched = intervals.len();
            t.gpu_launched_ns = crate::device_time::gpu_time::length(
                &crate::device_time::gpu_time::merge(intervals.into_iter()),
            );
        }
    }
    let mut operations: Vec<OperationTotals> = totals.into_values().collect();
    operations.sort_by(|a, b| {
        b.total_ns
            .cmp(&a.total_ns)
            .then_with(|| a.operation.cmp(&b.operation))
    });

    Swept {
        window_start,
        window_end,
        rows: out_rows,
        operations,
        device_ops: device_ops.len(),
        without_launch,
    }
}

fn transitions(
    trace: &Trace,
    scopes: &Scopes,
    h: &Hierarchy,
    _p: usize,
    scope: &crate::scope::ProcessScope,
    labels: &mut Labels,
    per_step: bool,
) -> Vec<Transition> {
    let mut counts: FxHashMap<(u32, Level, Level), u64> = FxHashMap::default();
    for &t in &scope.threads {
        for &i in &scopes.by_track[t.0 as usize] {
            let s = &trace.spans[i as usize];
            let Some(parent) = h.parent[i as usize] else {
                continue;
            };
            let parent = effective_level(trace, &trace.spans[parent as usize]);
            let Some(from) = transition_from(s.level, effective_level(trace, s), parent) else {
                continue;
            };
            let op = labels.of(trace, trace, scope.operation_at(s.start), per_step);
            *counts.entry((op, from, s.level)).or_insert(0) += 1;
        }
    }
    sorted_transitions(counts, labels)
}

/// The level a transition into a CPU span (own level `level`, effective `effective`) comes
/// from, given its parent's effective level: `None` when there is none (the span is no CPU
/// span at its own level, or its parent is at the same level or no CPU stratum). An operation
/// or phase parent reads as `Python`.
fn transition_from(level: Level, effective: Level, parent: Level) -> Option<Level> {
    if !is_cpu_level(level) || effective != level {
        return None;
    }
    let from = match parent {
        Level::Operation | Level::Phase => Level::Python,
        l => l,
    };
    (from != level && is_cpu_level(from)).then_some(from)
}

/// The transitions counted per (operation label, from, to), most frequent first.
fn sorted_transitions(
    counts: FxHashMap<(u32, Level, Level), u64>,
    labels: &Labels,
) -> Vec<Transition> {
    let mut out: Vec<Transition> = counts
        .into_iter()
        .map(|((op, from, to), count)| Transition {
            operation: labels.text(op).to_owned(),
            from,
            to,
            count,
        })
        .collect();
    out.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then_with(|| a.operation.cmp(&b.operation))
            .then_with(|| (a.from, a.to).cmp(&(b.from, b.to)))
    });
    out
}

fn summary(processes: &[ProcessBreakdown]) -> Option<CrossSummary> {
    if processes.len() < 2 {
        return None;
    }
    let slowest = processes.iter().max_by_key(|p| p.window_ns)?;
    let fastest = processes.iter().map(|p| p.window_ns).min()?;
    let mean = processes.iter().map(|p| p.window_ns as f64).sum::<f64>() / processes.len() as f64;
    let gpu_pct = |p: &ProcessBreakdown| {
        let gpu: Ns = p
            .rows
            .iter()
            .filter(|r| matches!(r.resource, Resource::Gpu | Resource::CpuGpu))
            .map(|r| r.time_ns)
            .sum();
        if p.window_ns > 0 {
            100.0 * gpu as f64 / p.window_ns as f64
        } else {
            0.0
        }
    };
    let pcts: Vec<f64> = processes.iter().map(gpu_pct).collect();
    Some(CrossSummary {
        processes: processes.len(),
        slowest_rank: slowest.rank,
        slowest_pid: slowest.pid,
        slowest_window_ns: slowest.window_ns,
        fastest_window_ns: fastest,
        mean_window_ns: mean,
        window_spread_pct: if mean > 0.0 {
            100.0 * (slowest.window_ns - fastest) as f64 / mean
        } else {
            0.0
        },
        gpu_active_min_pct: pcts.iter().copied().fold(f64::INFINITY, f64::min),
        gpu_active_max_pct: pcts.iter().copied().fold(0.0, f64::max),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use strato_trace::testing::{rank, TraceBuilder};

    /// Spans on thread (pid 1, tid) or device queue (0, 7) tracks of the last rank added.
    pub(crate) struct Synth {
        pub b: TraceBuilder,
    }

    impl Synth {
        pub(crate) fn new() -> Synth {
            let mut s = Synth {
                b: TraceBuilder::new(),
            };
            s.rank();
            s
        }
        pub(crate) fn rank(&mut self) {
            let n = self.b.trace().ranks.len() as i64;
            self.b.rank(rank(Some(n), &format!("synthetic-{n}")));
        }
        pub(crate) fn trace(&self) -> &Trace {
            self.b.trace()
        }
        pub(crate) fn cpu(&mut self, tid: i64, name: &str, level: Level, se: (Ns, Ns)) {
            let track = self.b.thread(1, tid);
            self.b.span(track, level, name, se.0, se.1);
        }
        pub(crate) fn launch(&mut self, tid: i64, se: (Ns, Ns), corr: u64) {
            let track = self.b.thread(1, tid);
            self.b
                .span(track, Level::AcceleratorApi, "cudaLaunchKernel", se.0, se.1)
                .correlation(corr);
        }
        pub(crate) fn kernel(&mut self, name: &str, se: (Ns, Ns), corr: u64) {
            let track = self.b.queue(0, 7);
            self.b
                .span(track, Level::DeviceKernel, name, se.0, se.1)
                .correlation(corr);
        }
    }

    /// The breakdown of `trace`, checked to be what [`BreakdownStream`] gives when the spans
    /// come one batch at a time.
    fn checked(trace: &Trace, options: BreakdownOptions) -> BreakdownReport {
        let report = breakdown(&Analyzed::new(trace), &options);
        let settings = BreakdownSettings {
            per_step: options.per_step,
            ..BreakdownSettings::default()
        };
        let stream = <Breakdown as crate::registry::Analysis>::stream(&settings);
        let streamed = crate::registry::fed_span_by_span(trace, stream.expect("streams"));
        assert_eq!(
            serde_json::to_string(&streamed).ok(),
            serde_json::to_string(&report).ok(),
            "streamed"
        );
        report
    }

    fn rows(report: &BreakdownReport) -> Vec<(String, Resource, Option<Level>, Ns)> {
        let mut v: Vec<_> = report.processes[0]
            .rows
            .iter()
            .map(|r| (r.operation.clone(), r.resource, r.cpu_level, r.time_ns))
            .collect();
        v.sort_by(|a, b| (&a.0, a.1, a.2).cmp(&(&b.0, b.1, b.2)));
        v
    }

    #[test]
    fn rows_known_by_construction_sum_to_the_window() {
        let mut s = Synth::new();
        s.cpu(1, "train", Level::Operation, (0, 100));
        s.cpu(1, "aten::mm", Level::Backend, (10, 40));
        s.launch(1, (20, 25), 1);
        s.kernel("gemm", (30, 60), 1);
        s.cpu(1, "eval", Level::Operation, (120, 150));
        let report = checked(s.trace(), BreakdownOptions::default());
        let p = &report.processes[0];
        assert_eq!(
            (p.window_start_ns, p.window_end_ns, p.window_ns),
            (0, 150, 150)
        );
        use Level::*;
        use Resource::*;
        let o = |s: &str| s.to_owned();
        assert_eq!(
            rows(&report),
            vec![
                (o(NONE), Idle, None, 20),
                (o("eval"), Cpu, Some(Python), 30),
                (o("train"), Cpu, Some(Python), 50),
                (o("train"), Cpu, Some(Backend), 15),
                (o("train"), Cpu, Some(AcceleratorApi), 5),
                (o("train"), CpuGpu, Some(Python), 20),
                (o("train"), CpuGpu, Some(Backend), 10),
            ]
        );
        assert_eq!(p.rows.iter().map(|r| r.time_ns).sum::<Ns>(), 150);
        let mut tr: Vec<_> = p
            .transitions
            .iter()
            .map(|t| (t.operation.as_str(), t.from, t.to, t.count))
            .collect();
        tr.sort();
        assert_eq!(
            tr,
            vec![
                ("train", Python, Backend, 1),
                ("train", Backend, AcceleratorApi, 1)
            ]
        );
        let train = p
            .operations
            .iter()
            .find(|t| t.operation == "train")
            .unwrap();
        assert_eq!((train.gpu_launched_ns, train.device_ops_launched), (30, 1));
        assert_eq!(p.device_ops, 1);
    }

    #[test]
    fn gpu_only_time_after_the_launch_returns_belongs_to_the_launching_operation() {
        let mut s = Synth::new();
        s.cpu(1, "infer", Level::Operation, (0, 10));
        s.launch(1, (2, 4), 7);
        s.kernel("conv", (5, 30), 7);
        let report = checked(s.trace(), BreakdownOptions::default());
        use Level::*;
        use Resource::*;
        assert_eq!(
            rows(&report),
            vec![
                ("infer".into(), Cpu, Some(Python), 3),
                ("infer".into(), Cpu, Some(AcceleratorApi), 2),
                ("infer".into(), Gpu, None, 20),
                ("infer".into(), CpuGpu, Some(Python), 5),
            ]
        );
    }

    #[test]
    fn other_threads_fill_in_below_an_idle_annotated_thread_and_steps_fold() {
        let mut s = Synth::new();
        s.cpu(1, "ProfilerStep#3", Level::Backend, (0, 50));
        s.cpu(1, "ProfilerStep#4", Level::Backend, (50, 100));
        s.cpu(2, "autograd", Level::Backend, (20, 50));
        s.launch(2, (30, 35), 9);
        let report = checked(s.trace(), BreakdownOptions::default());
        let p = &report.processes[0];
        assert_eq!(p.annotated_tid, Some(1));
        use Level::*;
        use Resource::*;
        assert_eq!(
            rows(&report),
            vec![
                ("ProfilerStep#*".into(), Cpu, Some(Python), 70),
                ("ProfilerStep#*".into(), Cpu, Some(Backend), 25),
                ("ProfilerStep#*".into(), Cpu, Some(AcceleratorApi), 5),
            ]
        );
        let per_step = checked(s.trace(), BreakdownOptions { per_step: true });
        assert_eq!(per_step.processes[0].operations.len(), 2);
        // The launch on thread 2 under a Backend span: Backend -> AcceleratorApi.
        assert_eq!(p.transitions.len(), 1);
        assert_eq!(
            (p.transitions[0].from, p.transitions[0].to),
            (Backend, AcceleratorApi)
        );
    }

    #[test]
    fn several_ranks_are_side_by_side_with_a_summary() {
        let mut s = Synth::new();
        s.cpu(1, "step", Level::Operation, (0, 100));
        s.rank();
        s.cpu(1, "step", Level::Operation, (0, 300));
        s.launch(1, (0, 1), 1);
        s.kernel("k", (10, 20), 1);
        let report = checked(s.trace(), BreakdownOptions::default());
        assert_eq!(report.processes.len(), 2);
        let sum = report.summary.unwrap();
        assert_eq!(
            (
                sum.slowest_rank,
                sum.slowest_window_ns,
                sum.fastest_window_ns
            ),
            (1, 300, 100)
        );
        assert!((sum.window_spread_pct - 100.0).abs() < 1e-9);
        // The correlation id 1 of rank 1 does not leak into rank 0.
        assert_eq!(report.processes[0].device_ops, 0);
        assert_eq!(report.processes[1].device_ops, 1);
    }

    fn state(s: &mut Synth, tid: i64, name: &str, se: (Ns, Ns)) {
        let track = s.b.thread(1, tid);
        s.b.span(track, Level::Os, name, se.0, se.1)
            .category(THREAD_STATE_CATEGORY);
    }

    #[test]
    fn thread_states_split_rows_known_by_construction() {
        let mut s = Synth::new();
        s.cpu(1, "load", Level::Operation, (0, 100));
        s.cpu(1, "step", Level::Operation, (100, 200));
        // The annotated thread: covered from 10 on (null before), states known by
        // construction; one state runs past the window's end (clipped).
        state(&mut s, 1, "running", (10, 30));
        state(&mut s, 1, "blocked:io", (30, 90));
        state(&mut s, 1, "runnable", (90, 120));
        state(&mut s, 1, "running", (120, 250));
        // Another thread's states are not the annotated thread's.
        state(&mut s, 2, "blocked:lock", (0, 200));
        // Another thread of the process waiting in a system call is not work (and does not
        // widen the window).
        let track = s.b.thread(1, 2);
        s.b.span(track, Level::Os, "read", 150, 400)
            .category(SYSCALL_CATEGORY);
        // A slow syscall on the annotated thread is CPU level Os there.
        let track = s.b.thread(1, 1);
        s.b.span(track, Level::Os, "fsync", 40, 80)
            .category(SYSCALL_CATEGORY);
        let report = checked(s.trace(), BreakdownOptions::default());
        let p = &report.processes[0];
        assert_eq!((p.window_start_ns, p.window_end_ns), (0, 200));
        let mut got: Vec<(String, Option<Level>, Option<String>, Ns)> = p
            .rows
            .iter()
            .map(|r| {
                (
                    r.operation.clone(),
                    r.cpu_level,
                    r.thread_state.as_str().map(str::to_owned),
                    r.time_ns,
                )
            })
            .collect();
        got.sort();
        let st = |x: &str| Some(x.to_owned());
        let py = Some(Level::Python);
        let os = Some(Level::Os);
        let mut want = vec![
            ("load".into(), os, st("blocked:io"), 40),
            ("load".into(), py, None, 10),
            ("load".into(), py, st("blocked:io"), 20),
            ("load".into(), py, st("runnable"), 10),
            ("load".into(), py, st("running"), 20),
            ("step".into(), py, st("runnable"), 20),
            ("step".into(), py, st("running"), 80),
        ];
        want.sort();
        assert_eq!(got, want);
        assert_eq!(p.rows.iter().map(|r| r.time_ns).sum::<Ns>(), p.window_ns);
        let json = serde_json::to_value(&p.rows).unwrap_or_default();
        assert!(json
            .as_array()
            .is_some_and(|rows| rows.iter().all(|r| r.get("thread_state").is_some())));
        assert!(json
            .as_array()
            .is_some_and(|rows| rows.iter().any(|r| r["thread_state"].is_null())));
    }

    #[test]
    fn without_os_data_rows_have_no_thread_state_field() {
        let mut s = Synth::new();
        s.cpu(1, "train", Level::Operation, (0, 100));
        s.cpu(1, "aten::mm", Level::Backend, (10, 40));
        let report = checked(s.trace(), BreakdownOptions::default());
        let json = serde_json::to_value(&report.processes[0].rows).unwrap_or_default();
        assert!(json.as_array().is_some_and(
            |rows| !rows.is_empty() && rows.iter().all(|r| r.get("thread_state").is_none())
        ));
    }

    #[test]
    fn a_process_with_only_os_spans_has_no_breakdown() {
        let mut s = Synth::new();
        s.cpu(1, "train", Level::Operation, (0, 100));
        let track = s.b.thread(2, 5);
        s.b.span(track, Level::Os, "running", 0, 50)
            .category(THREAD_STATE_CATEGORY);
        let track = s.b.thread(2, 5);
        s.b.span(track, Level::Os, "execve", 0, 5)
            .category(SYSCALL_CATEGORY);
        let report = checked(s.trace(), BreakdownOptions::default());
        assert_eq!(report.processes.len(), 1);
        assert_eq!(report.processes[0].pid, 1);
    }
}
