//! The comparison the paper makes (its section 5), as a benchmark: the conventional serial
//! harness (fresh process per candidate, CPU timestamps) against the engine free to choose its
//! parallelism, and, to tell what warm workers buy from what parallelism buys, the engine
//! pinned to parallelism 1.
//!
//! Quality is measured against the truth, not against another noisy pick: after the three
//! methods have chosen, every candidate that any of them ranked within `truth_window` (20%) of
//! its own best is re-measured alone, interleaved (one warm worker, device timing,
//! `verify_repeats` runs per measurement, median), pass after pass until each one's 95%
//! interval is within `truth_ci` (1%) of its mean or it is clearly slower than the leader
//! (bounded by `verify_passes`). The fastest of those is the true best; each method's gap is
//! its pick's re-measured time against it. [`run_many`] repeats the whole comparison and
//! reports each run, the medians and the worst.

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
    /// Most interleaved passes when measuring the truth.
    pub verify_passes: usize,
    /// Timed runs per measurement of the truth.
    pub verify_repeats: u32,
    /// Candidates a method ranked within this fraction of its own best are measured for the
    /// truth.
    pub truth_window: f64,
    /// A truth measurement is done when its 95% interval is within this fraction of its mean.
    pub truth_ci: f64,
    /// Most candidates measured for the truth (the closest to their method's best first).
    pub truth_max: usize,
}

impl CompareConfig {
    pub fn new(engine: EngineConfig) -> Self {
        Self {
            engine,
            serial_timeout_s: 3.0,
            pinned: true,
            verify_passes: 20,
            verify_repeats: 30,
            truth_window: 0.2,
            truth_ci: 0.01,
            truth_max: 40,
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
    /// Its latency re-measured alone for the truth (ns).
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
    /// What rank selection did, and its decisions (window, passes, selection): with the
    /// truth, they show why a pick missed the true best.
    #[serde(default)]
    pub rank: Option<crate::engine::RankSummary>,
    #[serde(default)]
    pub rank_log: Vec<crate::log::Record>,
}

/// One candidate measured for the truth.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TruthEntry {
    pub name: String,
    /// Median of its isolated samples (ns); each sample is the median of `verify_repeats`
    /// timed runs, each run the time per launch of launches filling the time budget.
    pub median_ns: f64,
    /// The larger side of that median's distribution-free 95% interval (ns).
    pub ci95_ns: f64,
    pub samples: usize,
    /// Which methods ranked it within the window (`serial`, `pinned`, `parallel`).
    pub ranked_by: Vec<String>,
    /// What each method reported for it (ns), by method.
    #[serde(default)]
    pub reported_ns: BTreeMap<String, f64>,
}

/// One run of the comparison, summarised.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunSummary {
    /// `100 (serial - engine) / serial` of tuning time.
    pub time_reduction_pct: f64,
    /// The engine's pick against the true best (%).
    pub best_gap_pct: Option<f64>,
    pub pinned_best_gap_pct: Option<f64>,
    pub serial_best_gap_pct: Option<f64>,
    pub serial_time_s: f64,
    pub pinned_time_s: Option<f64>,
    pub parallel_time_s: f64,
    pub true_best: Option<String>,
    pub parallel_best: Option<String>,
    pub pinned_best: Option<String>,
    pub serial_best: Option<String>,
    /// `/proc/loadavg` (1, 5, 15 min) when the run started: how idle the machine was.
    pub load_average: Option<[f64; 3]>,
    /// `/proc/loadavg` when the run ended (the 1-min figure then covers its last minute).
    #[serde(default)]
    pub load_average_end: Option<[f64; 3]>,
    /// Time measuring the truth (s).
    #[serde(default)]
    pub truth_time_s: f64,
    /// The whole comparison run: serial, pinned, engine and truth (s).
    #[serde(default)]
    pub run_time_s: f64,
}

/// The comparison's result. With several runs (`runs` longer than one), `time_s` of each
/// side, `time_reduction_pct` and the `*_gap_pct` are medians over the runs; the details
/// (rounds, truth, verification) are the last run's.
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
    /// The engine's pick against the true best: `100 (pick - true best) / true best`, both
    /// re-measured alone (0 = it found the true best).
    pub best_gap_pct: Option<f64>,
    /// Serial -> engine at dp 1: what warm workers buy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warm_workers_reduction_pct: Option<f64>,
    /// Engine at dp 1 -> engine free: what parallelism buys.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallelism_reduction_pct: Option<f64>,
    /// The pinned engine's pick against the true best.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pinned_best_gap_pct: Option<f64>,
    /// The serial harness's pick against the true best.
    pub serial_best_gap_pct: Option<f64>,
    /// The fastest candidate re-measured for the truth.
    pub true_best: Option<TruthEntry>,
    /// Every candidate measured for the truth, fastest first.
    pub truth: Vec<TruthEntry>,
    pub parallel_detail: EngineDetail,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pinned_detail: Option<EngineDetail>,
    /// Every truth measurement (ns), by candidate.
    pub verification_ns: BTreeMap<String, Vec<f64>>,
    /// Each run (one entry per `--runs`).
    pub runs: Vec<RunSummary>,
    /// Median over the runs of `time_reduction_pct`.
    pub median_time_reduction_pct: f64,
    /// The engine's worst gap to the true best over the runs.
    pub worst_gap_pct: Option<f64>,
    pub worst_pinned_gap_pct: Option<f64>,
    pub worst_serial_gap_pct: Option<f64>,
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
        rank: r.rank.clone(),
        rank_log: r
            .log
            .iter()
            .filter(|x| {
                matches!(
                    x.decision,
                    crate::log::Decision::RankWindow { .. }
                        | crate::log::Decision::RankPass { .. }
                        | crate::log::Decision::RankSelection { .. }
                )
            })
            .cloned()
            .collect(),
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
        min_run_ns: cfg.engine.params.min_run_ms * 1e6,
    };
    let load_at_start = load_average();
    let run_start = std::time::Instant::now();
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

    // Every candidate any method ranked within the window of its own best.
    let mut ranked: Vec<(String, f64, &'static str)> = Vec::new();
    let mut reported: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
    let mut add_method = |label: &'static str, values: Vec<(String, f64)>, pick: Option<&str>| {
        for (name, v) in &values {
            reported
                .entry(name.clone())
                .or_default()
                .insert(label.to_string(), *v);
        }
        let best = values
            .iter()
            .map(|v| v.1)
            .filter(|v| v.is_finite() && *v > 0.0)
            .fold(f64::INFINITY, f64::min);
        for (name, v) in values {
            let is_pick = pick == Some(name.as_str());
            if is_pick || (v.is_finite() && v <= best * (1.0 + cfg.truth_window)) {
                // Picks first (ratio 0), then by closeness to the method's best.
                let ratio = if is_pick { 0.0 } else { v / best - 1.0 };
                ranked.push((name, ratio, label));
            }
        }
    };
    add_method(
        "serial",
        serial_report
            .results
            .iter()
            .filter_map(|r| {
                r.outcome
                    .measurement()
                    .map(|m| (r.name.clone(), m.latency_ns))
            })
            .collect(),
        serial.best.as_deref(),
    );
    let engine_values = |r: &RunReport| -> Vec<(String, f64)> {
        r.results
            .iter()
            .filter_map(|c| {
                c.isolated_latency_ns
                    .or(c.reported_latency_ns)
                    .map(|v| (c.name.clone(), v))
            })
            .collect()
    };
    if let (Some(r), Some(side)) = (&pinned_report, &pinned) {
        add_method("pinned", engine_values(r), side.best.as_deref());
    }
    add_method(
        "parallel",
        engine_values(&parallel_report),
        parallel.best.as_deref(),
    );
    ranked.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut names: Vec<String> = Vec::new();
    let mut ranked_by: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, _, label) in &ranked {
        let by = ranked_by.entry(name.clone()).or_default();
        if !by.iter().any(|l| l == label) {
            by.push((*label).to_string());
        }
        if !names.contains(name) && names.len() < cfg.truth_max.max(3) {
            names.push(name.clone());
        }
    }
    progress(&format!(
        "truth: re-measuring {} candidate(s) alone, interleaved",
        names.len()
    ));
    let truth_start = std::time::Instant::now();
    let (mut truth, verification) = measure_truth(cfg, candidates, &names, &ranked_by)?;
    for t in &mut truth {
        t.reported_ns = reported.remove(&t.name).unwrap_or_default();
    }
    let truth_time_s = truth_start.elapsed().as_secs_f64();
    progress(&format!("truth: {truth_time_s:.1} s"));
    let truth_of = |name: &Option<String>| -> Option<f64> {
        name.as_ref()
            .and_then(|n| truth.iter().find(|t| &t.name == n))
            .map(|t| t.median_ns)
    };
    serial.best_latency_ns = truth_of(&serial.best);
    parallel.best_latency_ns = truth_of(&parallel.best);
    if let Some(p) = pinned.as_mut() {
        p.best_latency_ns = truth_of(&p.best);
    }
    let true_best = truth.first().cloned();
    let gap = |side: &Side| match (side.best_latency_ns, &true_best) {
        (Some(p), Some(t)) if t.median_ns > 0.0 => Some(100.0 * (p - t.median_ns) / t.median_ns),
        _ => None,
    };
    let time_reduction_pct = pct(serial.time_s, parallel.time_s);
    let summary = RunSummary {
        time_reduction_pct,
        best_gap_pct: gap(&parallel),
        pinned_best_gap_pct: pinned.as_ref().and_then(gap),
        serial_best_gap_pct: gap(&serial),
        serial_time_s: serial.time_s,
        pinned_time_s: pinned.as_ref().map(|p| p.time_s),
        parallel_time_s: parallel.time_s,
        true_best: true_best.as_ref().map(|t| t.name.clone()),
        parallel_best: parallel.best.clone(),
        pinned_best: pinned.as_ref().and_then(|p| p.best.clone()),
        serial_best: serial.best.clone(),
        load_average: load_at_start,
        load_average_end: load_average(),
        truth_time_s,
        run_time_s: run_start.elapsed().as_secs_f64(),
    };
    Ok(CompareReport {
        device: parallel_report.device.clone(),
        candidates: candidates.len(),
        repeats: cfg.engine.repeats,
        time_reduction_pct,
        best_gap_pct: summary.best_gap_pct,
        warm_workers_reduction_pct: pinned.as_ref().map(|p| pct(serial.time_s, p.time_s)),
        parallelism_reduction_pct: pinned.as_ref().map(|p| pct(p.time_s, parallel.time_s)),
        pinned_best_gap_pct: summary.pinned_best_gap_pct,
        serial_best_gap_pct: summary.serial_best_gap_pct,
        true_best,
        truth,
        parallel_detail: detail(&parallel_report),
        pinned_detail: pinned_report.as_ref().map(detail),
        serial,
        parallel,
        pinned_dp1: pinned,
        verification_ns: verification,
        median_time_reduction_pct: time_reduction_pct,
        worst_gap_pct: summary.best_gap_pct,
        worst_pinned_gap_pct: summary.pinned_best_gap_pct,
        worst_serial_gap_pct: summary.serial_best_gap_pct,
        runs: vec![summary],
    })
}

/// `/proc/loadavg`'s three averages.
pub fn load_average() -> Option<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let v: Vec<f64> = text
        .split_whitespace()
        .take(3)
        .filter_map(|x| x.parse().ok())
        .collect();
    (v.len() == 3).then(|| [v[0], v[1], v[2]])
}

/// The truth: its entries fastest first, and every measurement by candidate.
type Truth = (Vec<TruthEntry>, BTreeMap<String, Vec<f64>>);

/// Measures `names` alone, interleaved, every one in every pass, until the distribution-free
/// 95% interval of each one's median sample is within `truth_ci` of that median; at least 3
/// and at most `verify_passes` passes. Returns the entries fastest first and every
/// measurement.
fn measure_truth(
    cfg: &CompareConfig,
    candidates: &[Candidate],
    names: &[String],
    ranked_by: &BTreeMap<String, Vec<String>>,
) -> Result<Truth> {
    let by_name: BTreeMap<&str, &Candidate> =
        candidates.iter().map(|c| (c.name.as_str(), c)).collect();
    let chosen: Vec<&Candidate> = names
        .iter()
        .filter_map(|n| by_name.get(n.as_str()).copied())
        .collect();
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); chosen.len()];
    let mut active: Vec<usize> = (0..chosen.len()).collect();
    if !chosen.is_empty() {
        let mut c = cfg.engine.clone();
        c.parallelism = Parallelism::Fixed(1);
        let mut verifier = Engine::new(c);
        for pass in 0..cfg.verify_passes.max(3) {
            if active.is_empty() {
                break;
            }
            let mut order = active.clone();
            let k = pass % order.len();
            order.rotate_left(k);
            let cands: Vec<&Candidate> = order.iter().map(|&i| chosen[i]).collect();
            let prefer = vec![Some(0); cands.len()];
            let got = verifier.measure_isolated(&cands, &prefer, cfg.verify_repeats)?;
            for (&i, r) in order.iter().zip(got) {
                if let Some(m) = r.outcome.measurement() {
                    samples[i].push(cfg.engine.statistic.of(m));
                }
            }
            if pass + 1 < 3 {
                continue;
            }
            let stats: Vec<Option<calibrate::MedianCi>> =
                samples.iter().map(|v| calibrate::median_ci95(v)).collect();
            // Every candidate stays in every pass until all are precise: one that left early
            // would miss a later change of the machine's load that the others then carry
            // (under a rising load, a candidate dropped as clearly slower came out fastest).
            let all_precise = (0..chosen.len()).all(|i| {
                samples[i].is_empty()
                    || stats[i].is_some_and(|c| c.half() <= cfg.truth_ci * c.median)
            });
            if all_precise {
                break;
            }
            active.retain(|&i| !samples[i].is_empty());
        }
        verifier.shutdown();
    }
    let mut truth: Vec<TruthEntry> = chosen
        .iter()
        .zip(&samples)
        .filter(|(_, v)| !v.is_empty())
        .filter_map(|(c, v)| {
            let ci = calibrate::median_ci95(v)?;
            Some(TruthEntry {
                name: c.name.clone(),
                median_ns: ci.median,
                ci95_ns: ci.half(),
                samples: v.len(),
                ranked_by: ranked_by.get(&c.name).cloned().unwrap_or_default(),
                reported_ns: BTreeMap::new(),
            })
        })
        .collect();
    truth.sort_by(|a, b| a.median_ns.total_cmp(&b.median_ns));
    let verification = chosen
        .iter()
        .zip(samples)
        .map(|(c, v)| (c.name.clone(), v))
        .collect();
    Ok((truth, verification))
}

/// Runs the comparison `runs` times in a row; the report is the last run's with the medians
/// over all runs in its headline fields, every run in `runs`, and the worst gaps.
pub fn run_many(
    cfg: &CompareConfig,
    candidates: &[Candidate],
    runs: usize,
    progress: &mut dyn FnMut(&str),
) -> Result<CompareReport> {
    let runs = runs.max(1);
    let mut all: Vec<RunSummary> = Vec::new();
    let mut last: Option<CompareReport> = None;
    for k in 0..runs {
        progress(&format!("run {}/{runs}", k + 1));
        let r = run(cfg, candidates, progress)?;
        all.extend(r.runs.iter().cloned());
        if let Some(s) = r.runs.first() {
            progress(&format!(
                "run {}: time reduction {:.1}%, gaps to the true best: engine {}, dp-1 {}, serial {}",
                k + 1,
                s.time_reduction_pct,
                fmt_gap(s.best_gap_pct),
                fmt_gap(s.pinned_best_gap_pct),
                fmt_gap(s.serial_best_gap_pct)
            ));
        }
        last = Some(r);
    }
    let Some(mut report) = last else {
        return Err(crate::error::MeasureError::Protocol(
            "no comparison run".into(),
        ));
    };
    let med = |f: &dyn Fn(&RunSummary) -> Option<f64>| -> Option<f64> {
        let v: Vec<f64> = all.iter().filter_map(f).collect();
        (!v.is_empty()).then(|| calibrate::median(&v))
    };
    let worst = |f: &dyn Fn(&RunSummary) -> Option<f64>| -> Option<f64> {
        all.iter().filter_map(f).reduce(f64::max)
    };
    report.median_time_reduction_pct = med(&|s| Some(s.time_reduction_pct)).unwrap_or(0.0);
    report.time_reduction_pct = report.median_time_reduction_pct;
    report.best_gap_pct = med(&|s| s.best_gap_pct);
    report.pinned_best_gap_pct = med(&|s| s.pinned_best_gap_pct);
    report.serial_best_gap_pct = med(&|s| s.serial_best_gap_pct);
    report.worst_gap_pct = worst(&|s| s.best_gap_pct);
    report.worst_pinned_gap_pct = worst(&|s| s.pinned_best_gap_pct);
    report.worst_serial_gap_pct = worst(&|s| s.serial_best_gap_pct);
    report.serial.time_s = med(&|s| Some(s.serial_time_s)).unwrap_or(report.serial.time_s);
    report.parallel.time_s = med(&|s| Some(s.parallel_time_s)).unwrap_or(report.parallel.time_s);
    if let Some(p) = report.pinned_dp1.as_mut() {
        p.time_s = med(&|s| s.pinned_time_s).unwrap_or(p.time_s);
    }
    if let Some(p) = report.pinned_dp1.as_ref() {
        report.warm_workers_reduction_pct = Some(pct(report.serial.time_s, p.time_s));
        report.parallelism_reduction_pct = Some(pct(p.time_s, report.parallel.time_s));
    }
    report.runs = all;
    Ok(report)
}

fn fmt_gap(g: Option<f64>) -> String {
    g.map_or("-".into(), |g| format!("{g:+.2}%"))
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
