//! The replay's result ([`ReplayReport`]): per window and rank, the measured, simulated and
//! predicted times, their paths and what became the bottleneck.

use std::collections::BTreeMap;

use serde::Serialize;
use strato_trace::Ns;

use super::changes::Scale;

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
    pub(super) fn push(&mut self, replayed: ReplayedWindow, predicted_ns: Ns, path: WindowPath) {
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
    pub(super) fn empty(changes: &[Scale]) -> ReplayReport {
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
