//! The result of the registered `critical-path` as every front end presents it: the JSON of
//! `strato critical-path --json` (whole trace, and `--step`), Python's tables and the SQL views
//! are this one serde shape ([`super::registration`]).

use std::sync::Arc;

use rustc_hash::FxHashSet;
use serde::{Serialize, Serializer};
use strato_trace::Ns;

use super::shapes::{CriticalPathReport, PathKind, RankCriticalPath};
use super::steps::StepCriticalPath;
use super::window::WindowComposition;

#[derive(Debug, Serialize)]
pub struct StepsJson {
    pub window: &'static str,
    pub collectives: Option<CollectivesJson>,
    pub steps: Vec<StepJson>,
}

#[derive(Debug, Serialize)]
pub struct StepJson {
    pub step: String,
    pub number: u64,
    pub ranks: Vec<StepRankJson>,
    pub graph: super::shapes::GraphStats,
}

#[derive(Debug, Serialize)]
pub struct StepRankJson {
    #[serde(flatten)]
    pub path: RankJson,
    /// The path inside the rank's step window.
    pub window: WindowJson,
}

#[derive(Debug, Serialize)]
pub struct WindowJson {
    pub start_ns: Ns,
    pub end_ns: Ns,
    pub window_ns: Ns,
    pub before_path_ns: Ns,
    pub after_path_ns: Ns,
    pub by_kind: serde_json::Map<String, serde_json::Value>,
    /// `by_kind.kernel` split: communication (NCCL/RCCL) kernels and the rest.
    pub compute_ns: Ns,
    pub communication_ns: Ns,
    pub top_ops: Vec<TopOpJson>,
}

#[derive(Debug, Serialize)]
pub struct TopOpJson {
    #[serde(serialize_with = "shared_str")]
    pub name: Arc<str>,
    pub kind: &'static str,
    pub rank: i64,
    pub ns: Ns,
}

#[derive(Debug, Serialize)]
pub struct ReportJson {
    pub window: &'static str,
    /// How collectives were matched across ranks (`null` with one rank).
    pub collectives: Option<CollectivesJson>,
    pub ranks: Vec<RankJson>,
    pub graph: super::shapes::GraphStats,
}

#[derive(Debug, Serialize)]
pub struct CollectivesJson {
    pub method: &'static str,
    pub instances: usize,
}

#[derive(Debug, Serialize)]
pub struct RankJson {
    pub rank: i64,
    pub source: String,
    pub length_ns: Ns,
    pub start_ns: Option<Ns>,
    pub end_ns: Option<Ns>,
    pub work_ns: Ns,
    pub by_kind: serde_json::Map<String, serde_json::Value>,
    pub events: Vec<EventJson>,
    pub backward_edges: usize,
    /// Collectives on the path where the rank waited for a later peer.
    pub late_peers: Vec<super::shapes::LatePeer>,
    pub note: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct EventJson {
    #[serde(serialize_with = "shared_str")]
    pub name: Arc<str>,
    pub start_ns: Ns,
    pub end_ns: Ns,
    /// Serialized as [`PathKind::as_str`] names it. A kind, not its name, so that an event
    /// is the size of a [`super::shapes::PathEvent`] and a path's events are converted in
    /// place ([`rank_json`]).
    pub kind: PathKind,
    pub rank: i64,
}

/// The names of a result's events and operations, each held once however many steps and
/// ranks name it (a per-step result of a long job names the same kernels thousands of times).
#[derive(Debug, Default)]
pub struct Names(FxHashSet<Arc<str>>);

impl Names {
    /// `name`, shared with every earlier equal one.
    pub fn get(&mut self, name: &str) -> Arc<str> {
        if let Some(shared) = self.0.get(name) {
            return Arc::clone(shared);
        }
        let shared: Arc<str> = Arc::from(name);
        self.0.insert(Arc::clone(&shared));
        shared
    }
}

fn shared_str<S: Serializer>(name: &Arc<str>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(name)
}

/// How collectives were matched across ranks, for a job of `ranks` ranks with `instances`
/// matched collective instances (`None` with one rank).
pub fn collectives_json(ranks: usize, instances: usize) -> Option<CollectivesJson> {
    (ranks > 1).then_some(CollectivesJson {
        method: "collectives matcher (group and sequence number, else group, kind and order, else kind and order)",
        instances,
    })
}

/// The whole trace's result; takes the report's paths (their names move, their segments
/// are dropped as each rank is converted, so the two shapes are not held side by side).
pub fn report_json(report: CriticalPathReport, collectives: Option<CollectivesJson>) -> ReportJson {
    ReportJson {
        window: "whole trace",
        collectives,
        graph: report.graph,
        ranks: {
            let mut names = Names::default();
            (report.ranks.into_iter())
                .map(|r| rank_json(r, &mut names))
                .collect()
        },
    }
}

/// One rank's path (consumed: see [`report_json`]), its event names shared through `names`.
pub fn rank_json(r: RankCriticalPath, names: &mut Names) -> RankJson {
    RankJson {
        rank: r.rank,
        length_ns: r.length_ns,
        start_ns: r.start_ns,
        end_ns: r.end_ns,
        work_ns: r.work_ns,
        by_kind: kinds_json(&r.by_kind),
        events: r
            .events
            .into_iter()
            .map(|e| EventJson {
                kind: e.kind,
                start_ns: e.start_ns,
                end_ns: e.end_ns,
                rank: e.rank,
                name: names.get(&e.name),
            })
            .collect(),
        backward_edges: r.backward_edges,
        late_peers: r.late_peers,
        source: r.source,
        note: r.note,
    }
}

fn kinds_json(
    by_kind: &std::collections::BTreeMap<PathKind, Ns>,
) -> serde_json::Map<String, serde_json::Value> {
    by_kind
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), (*v).into()))
        .collect()
}

/// A path inside its window, the names of its operations shared through `names`.
pub fn window_json(w: &WindowComposition, names: &mut Names) -> WindowJson {
    let kernel = w.by_kind.get(&PathKind::Kernel).copied().unwrap_or(0);
    WindowJson {
        start_ns: w.start_ns,
        end_ns: w.end_ns,
        window_ns: w.window_ns,
        before_path_ns: w.before_path_ns,
        after_path_ns: w.after_path_ns,
        by_kind: kinds_json(&w.by_kind),
        compute_ns: kernel - w.communication_ns,
        communication_ns: w.communication_ns,
        top_ops: w
            .top_ops
            .iter()
            .map(|o| TopOpJson {
                name: names.get(&o.name),
                kind: o.kind.as_str(),
                rank: o.rank,
                ns: o.ns,
            })
            .collect(),
    }
}

/// The per-step result; takes the steps' paths (see [`report_json`]).
pub fn steps_json(steps: Vec<StepCriticalPath>, collectives: Option<CollectivesJson>) -> StepsJson {
    let mut result = StepsJson {
        window: "per ProfilerStep#N: the step annotation's start to the latest end of its CPU ops and of the device ops they launched",
        collectives,
        steps: Vec::new(),
    };
    let mut names = Names::default();
    result.steps = steps
        .into_iter()
        .map(|s| step_json(s, &mut names))
        .collect();
    result
}

/// One step of the per-step result (see [`steps_json`]), its names shared through `names`.
pub fn step_json(s: StepCriticalPath, names: &mut Names) -> StepJson {
    StepJson {
        step: s.step,
        number: s.number,
        graph: s.graph,
        ranks: (s.ranks.into_iter())
            .map(|r| StepRankJson {
                window: window_json(&r.window, names),
                path: rank_json(r.path, names),
            })
            .collect(),
    }
}

// A path's events become the JSON's in place: same size and alignment.
const _: () = assert!(
    std::mem::size_of::<EventJson>() == std::mem::size_of::<super::shapes::PathEvent>()
        && std::mem::align_of::<EventJson>() == std::mem::align_of::<super::shapes::PathEvent>()
);
