//! The comparison the paper makes (its section 5), as a benchmark: the conventional serial
//! harness (fresh process per candidate, CPU timestamps) against the engine free to choose its
//! parallelism, and, to tell what warm workers buy from what parallelism buys, the engine
//! pinned to parallelism 1. Each run's chosen best is then re-measured in isolation the same
//! way (one fresh warm worker, device timing, the bests interleaved over several passes, the
//! median kept), so that the gap between bests is not an artefact of how each was timed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::calibrate;
use crate::candidate::Candidate;
use crate::engine::{
    DeltaAtDp, DpPoint, Engine, EngineConfig, Parallelism, RoundSummary, RunReport,
};
use crate::error::Result;
use crate::serial::{self, SerialConfig, SerialReport};

/// Comparison settings.
#[derive(Debug, Clone)]
pub struct CompareConfig {
    pub engine: EngineConfig,
    /// Static per-candidate timeout of the serial harness (s).
    pub serial_timeout_s: f64,
    /// Also run the engine pinned to parallelism 1.
    pub pinned: bool,
    /// Interleaved passes when re-measuring the bests.
    pub verify_passes: usize,
    /// Timed runs per re-measurement of a best.
    pub verify_repeats: u32,
}

impl CompareConfig {
    pub fn new(engine: EngineConfig) -> Self {
        Self {
            engine,
            serial_timeout_s: 3.0,
            pinned: true,
            verify_passes: 7,
            verify_repeats: 30,
        }
    }
}

/// One side of the comparison.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Side {
    /// Total tuning time (s), worker start-up included.
    pub time_s: f64,
    /// The chosen best candidate.
    pub best: Option<String>,
    /// Its latency re-measured in isolation (ns).
    pub best_latency_ns: Option<f64>,
    /// Its latency as the run itself reported it (ns).
    pub best_reported_ns: Option<f64>,
    pub counts: BTreeMap<String, usize>,
}

/// The engine side's extra figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EngineDetail {
    pub dp_timeline: Vec<DpPoint>,
    pub delta_by_dp: Vec<DeltaAtDp>,
    pub rounds: Vec<RoundSummary>,
    pub workers_started: usize,
    pub workers_replaced: usize,
    /// Time per parallelism level (s).
    pub time_at_dp: BTreeMap<usize, f64>,
}

/// The comparison's result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CompareReport {
    pub device: Option<String>,
    pub candidates: usize,
    pub repeats: u32,
    pub serial: Side,
    pub parallel: Side,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pinned_dp1: Option<Side>,
    /// `100 (serial - parallel) / serial` of total tuning time.
    pub time_reduction_pct: f64,
    /// `100 (parallel best - serial best) / serial best`, both re-measured in isolation.
    pub best_gap_pct: Option<f64>,
    /// Serial -> engine at dp 1: what warm workers buy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warm_workers_reduction_pct: Option<f64>,
    /// Engine at dp 1 -> engine free: what parallelism buys.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallelism_reduction_pct: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pinned_best_gap_pct: Option<f64>,
    pub parallel_detail: EngineDetail,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pinned_detail: Option<EngineDetail>,
    /// Every re-measurement of the bests (ns), by candidate.
    pub verification_ns: BTreeMap<String, Vec<f64>>,
}

fn detail(r: &RunReport) -> EngineDetail {
    let mut time_at_dp: BTreeMap<usize, f64> = BTreeMap::new();
    for round in &r.rounds {
        *time_at_dp.entry(round.dp).or_insert(0.0) += round.end_s - round.start_s;
    }
    EngineDetail {
        dp_timeline: r.dp_timeline.clone(),
        delta_by_dp: r.delta_by_dp.clone(),
        rounds: r.rounds.clone(),
        workers_started: r.workers_started,
        workers_replaced: r.workers_replaced,
        time_at_dp,
    }
}

fn engine_side(r: &RunReport) -> Side {
    let reported = r.best.as_ref().and_then(|b| {
        r.results
            .get(b.index)
            .and_then(|c| c.isolated_latency_ns.or(c.reported_latency_ns))
    });
    Side {
        time_s: r.total_s,
        best: r.best.as_ref().map(|b| b.name.clone()),
        best_latency_ns: None,
        best_reported_ns: reported,
        counts: r.counts.clone(),
    }
}

fn serial_side(r: &SerialReport) -> Side {
    Side {
        time_s: r.total_s,
        best: r.best.as_ref().map(|b| b.1.clone()),
        best_latency_ns: None,
        best_reported_ns: r.best.as_ref().map(|b| b.2),
        counts: r.counts.clone(),
    }
}

fn pct(a: f64, b: f64) -> f64 {
    100.0 * (a - b) / a
}

/// Runs the comparison. `progress` receives one line per phase.
pub fn run(
    cfg: &CompareConfig,
    candidates: &[Candidate],
    progress: &mut dyn FnMut(&str),
) -> Result<CompareReport> {
    let serial_cfg = SerialConfig {
        worker: cfg.engine.worker.clone(),
        repeats: cfg.engine.repeats,
        warmup: cfg.engine.warmup,
        timeout_s: cfg.serial_timeout_s,
    };
    progress(&format!("serial harness: {} candidates", candidates.len()));
    let serial_report = serial::run(&serial_cfg, candidates)?;
    progress(&format!("serial: {:.1} s", serial_report.total_s));

    let pinned_report = if cfg.pinned {
        let mut c = cfg.engine.clone();
        c.parallelism = Parallelism::Fixed(1);
        progress("engine pinned to parallelism 1");
        let r = Engine::new(c).measure(candidates)?;
        progress(&format!("engine dp=1: {:.1} s", r.total_s));
        Some(r)
    } else {
        None
    };

    progress("engine, parallelism chosen by REACT");
    let parallel_report = Engine::new(cfg.engine.clone()).measure(candidates)?;
    progress(&format!("engine: {:.1} s", parallel_report.total_s));

    let mut serial = serial_side(&serial_report);
    let mut parallel = engine_side(&parallel_report);
    let mut pinned = pinned_report.as_ref().map(engine_side);

    // Re-measure each distinct best in isolation, interleaved.
    let mut names: Vec<String> = Vec::new();
    for n in [&serial.best, &parallel.best]
        .into_iter()
        .chain(pinned.as_ref().map(|p| &p.best))
        .flatten()
    {
        if !names.contains(n) {
            names.push(n.clone());
        }
    }
    let by_name: BTreeMap<&str, &Candidate> =
        candidates.iter().map(|c| (c.name.as_str(), c)).collect();
    let chosen: Vec<&Candidate> = names
        .iter()
        .filter_map(|n| by_name.get(n.as_str()).copied())
        .collect();
    let mut verification: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    if !chosen.is_empty() {
        progress(&format!(
            "re-measuring {} best candidate(s) in isolation",
            chosen.len()
        ));
        let mut c = cfg.engine.clone();
        c.parallelism = Parallelism::Fixed(1);
        let mut verifier = Engine::new(c);
        let prefer = vec![Some(0); chosen.len()];
        for _ in 0..cfg.verify_passes.max(1) {
            for r in verifier
                .measure_isolated(&chosen, &prefer, cfg.verify_repeats)?
                .into_iter()
                .zip(&chosen)
            {
                if let Some(m) = r.0.outcome.measurement() {
                    verification
                        .entry(r.1.name.clone())
                        .or_default()
                        .push(cfg.engine.statistic.of(m));
                }
            }
        }
        verifier.shutdown();
    }
    let iso = |side: &mut Side| {
        side.best_latency_ns = side
            .best
            .as_ref()
            .and_then(|b| verification.get(b))
            .map(|v| calibrate::median(v));
    };
    iso(&mut serial);
    iso(&mut parallel);
    if let Some(p) = pinned.as_mut() {
        iso(p);
    }
    let gap = |side: &Side| match (side.best_latency_ns, serial.best_latency_ns) {
        (Some(p), Some(s)) if s > 0.0 => Some(100.0 * (p - s) / s),
        _ => None,
    };
    Ok(CompareReport {
        device: parallel_report.device.clone(),
        candidates: candidates.len(),
        repeats: cfg.engine.repeats,
        time_reduction_pct: pct(serial.time_s, parallel.time_s),
        best_gap_pct: gap(&parallel),
        warm_workers_reduction_pct: pinned.as_ref().map(|p| pct(serial.time_s, p.time_s)),
        parallelism_reduction_pct: pinned.as_ref().map(|p| pct(p.time_s, parallel.time_s)),
        pinned_best_gap_pct: pinned.as_ref().and_then(gap),
        parallel_detail: detail(&parallel_report),
        pinned_detail: pinned_report.as_ref().map(detail),
        serial,
        parallel,
        pinned_dp1: pinned,
        verification_ns: verification,
    })
}

/// The engine pinned to each of `levels` in turn (time and inaccuracy per parallelism level).
pub fn sweep(
    cfg: &EngineConfig,
    candidates: &[Candidate],
    levels: &[usize],
) -> Result<Vec<(usize, RunReport)>> {
    let mut out = Vec::new();
    for &dp in levels {
        let mut c = cfg.clone();
        c.parallelism = Parallelism::Fixed(dp);
        out.push((dp, Engine::new(c).measure(candidates)?));
    }
    Ok(out)
}
