//! The engine: DOPpler's Calibrator (Algorithm 2) driving the worker pool. Candidates are taken
//! in rounds of `max(dp * G, min_round)`; each round is measured with at most `dp` in flight
//! under the adaptive timeout (eq. 2); failures are re-run alone (those that then succeed are
//! N_err.dp); outliers of the latency/duration ratios plus a random sample, Q of them (eq. 3),
//! are re-measured alone; delta_mean (eq. 4) scales the round's reported latencies (eq. 5) and
//! drives REACT (eq. 6-7). At the end the top K% are re-measured serially (rank selection).

use std::collections::BTreeMap;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::calibrate::{self, Params, React, Rng};
use crate::candidate::Candidate;
use crate::error::Result;
use crate::log::{Decision, Log, Record};
use crate::pool::{Job, JobResult, Pool, RunParams, WorkerSpec};
use crate::protocol::{Outcome, Timing};

/// Parallelism: chosen by REACT, or pinned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Parallelism {
    /// REACT chooses between 1 and `max_dp`.
    Adaptive,
    /// Always this many in flight.
    Fixed(usize),
}

/// Which statistic of a measurement's timed runs stands for its latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Statistic {
    /// Mean of the runs (the paper's).
    Mean,
    /// Median of the runs: on a CPU device, OS preemption by other processes inflates single
    /// runs, and the median ignores those spikes (the default).
    #[default]
    Median,
    /// Fastest run.
    Min,
}

impl Statistic {
    /// The latency of `m` under this statistic (ns).
    pub fn of(self, m: &crate::protocol::Measurement) -> f64 {
        match self {
            Statistic::Mean => m.latency_ns,
            Statistic::Median if !m.runs_ns.is_empty() => calibrate::median(&m.runs_ns),
            Statistic::Median => m.latency_ns,
            Statistic::Min => m.min_ns,
        }
    }
}

/// Engine configuration.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    pub worker: WorkerSpec,
    /// Timed runs per measurement.
    pub repeats: u32,
    /// Untimed runs before them.
    pub warmup: u32,
    pub params: Params,
    pub parallelism: Parallelism,
    /// Number of target devices, G (one here).
    pub devices: usize,
    /// Serialise timed runs across workers, as a GPU serialises kernels of different
    /// processes (see [`crate::devlock`]); off = naive parallel measurement.
    pub device_lock: bool,
    /// The statistic of the timed runs used as latency.
    pub statistic: Statistic,
}

impl EngineConfig {
    /// Defaults: 10 repeats, 1 warm-up, the paper's parameters, adaptive parallelism.
    pub fn new(worker: WorkerSpec) -> Self {
        Self {
            worker,
            repeats: 10,
            warmup: 1,
            params: Params::default(),
            parallelism: Parallelism::Adaptive,
            devices: 1,
            device_lock: true,
            statistic: Statistic::default(),
        }
    }
}

/// One candidate's result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CandidateResult {
    pub index: usize,
    pub name: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, serde_json::Value>,
    pub status: String,
    #[serde(flatten)]
    pub outcome: Outcome,
    /// Calibration round and its parallelism.
    pub round: usize,
    pub dp: usize,
    /// Latency as measured in the round (ns).
    pub parallel_latency_ns: Option<f64>,
    /// Latency re-measured alone (ns), when it was.
    pub isolated_latency_ns: Option<f64>,
    /// What the tuner is told (ns): the isolated latency when there is one, else eq. 5.
    pub reported_latency_ns: Option<f64>,
    pub outlier: bool,
    /// The first attempt failed in parallel and this result is from a run alone.
    pub retried_alone: bool,
    /// Worker slot that measured it.
    pub slot: usize,
    /// Engine-side wall time of its measurement (ns).
    pub wall_ns: f64,
    /// Time (ns) during which another worker of the pool was active (start-up or a request
    /// holding the device lock) while this one's timed runs ran. 0 when the device lock holds;
    /// with `--no-device-lock` it shows how much the workers overlapped.
    #[serde(default)]
    pub foreign_overlap_ns: f64,
    /// The timed runs stayed disturbed by other activity on the host (CPU pressure stall
    /// above `stall_limit`) after the worker's retries.
    #[serde(default)]
    pub disturbed: bool,
}

/// One calibration round.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RoundSummary {
    pub round: usize,
    pub dp: usize,
    pub timeout_s: f64,
    pub start_s: f64,
    pub end_s: f64,
    pub candidates: usize,
    pub successes: usize,
    pub failures: usize,
    pub n_err_dp: usize,
    pub outliers: usize,
    pub remeasured: usize,
    pub delta_mean: Option<f64>,
}

/// The best candidate after rank selection.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Best {
    pub index: usize,
    pub name: String,
    /// Latency re-measured alone in rank selection (ns): the median over its passes.
    pub latency_ns: f64,
    /// The larger side of that median's distribution-free 95% interval (ns; none after a
    /// single pass).
    #[serde(default)]
    pub ci95_ns: Option<f64>,
    /// Isolated measurements behind it.
    #[serde(default)]
    pub samples: usize,
}

/// What rank selection did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RankSummary {
    /// Relative uncertainty per parallelism level (0 = measured alone).
    pub uncertainty_by_dp: BTreeMap<usize, f64>,
    /// Candidates in the window (re-measured at least once).
    pub window: usize,
    /// Interleaved passes run.
    pub passes: usize,
    /// Candidates left in the race at the end.
    pub finalists: usize,
    /// Isolated measurements taken.
    pub measurements: usize,
}

/// Inaccuracy observed at one parallelism level.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeltaAtDp {
    pub dp: usize,
    pub rounds: usize,
    pub samples: usize,
    pub delta_mean: f64,
    pub delta_max: f64,
}

/// Parallelism at a point in time.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DpPoint {
    pub t_s: f64,
    pub round: usize,
    pub dp: usize,
}

/// A whole run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunReport {
    pub device: Option<String>,
    pub parallelism: Parallelism,
    pub device_lock: bool,
    pub statistic: Statistic,
    pub total_s: f64,
    pub candidates: usize,
    pub counts: BTreeMap<String, usize>,
    pub best: Option<Best>,
    pub rounds: Vec<RoundSummary>,
    pub dp_timeline: Vec<DpPoint>,
    pub delta_by_dp: Vec<DeltaAtDp>,
    pub workers_started: usize,
    pub workers_replaced: usize,
    /// Timed windows that overlapped another worker's activity (see
    /// [`CandidateResult::foreign_overlap_ns`]).
    pub overlapped_measurements: usize,
    /// Measurements still disturbed by outside activity after the workers' retries.
    pub disturbed_measurements: usize,
    pub rank: Option<RankSummary>,
    pub results: Vec<CandidateResult>,
    pub log: Vec<Record>,
}

/// The measurement engine. Holds the pool, REACT state and the log across tuner batches.
#[derive(Debug)]
pub struct Engine {
    cfg: EngineConfig,
    pool: Pool,
    log: Log,
    react: React,
    rng: Rng,
    epoch: Instant,
    round: usize,
    rounds: Vec<RoundSummary>,
    timeline: Vec<DpPoint>,
    deltas: BTreeMap<usize, Vec<(f64, usize)>>,
    /// Per parallelism level, every re-measured pair's relative change
    /// `(l_iso - l_par) / l_par` (signed).
    changes: BTreeMap<usize, Vec<f64>>,
    rank: Option<RankSummary>,
    measured: usize,
    lock_path: Option<std::path::PathBuf>,
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.pool.shutdown();
        if let Some(p) = &self.lock_path {
            let _ = std::fs::remove_file(p);
            let mut t = p.as_os_str().to_owned();
            t.push(".turnstile");
            let _ = std::fs::remove_file(std::path::Path::new(&t));
        }
    }
}

static ENGINES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Engine {
    /// An engine; workers start when first needed.
    pub fn new(mut cfg: EngineConfig) -> Self {
        let epoch = Instant::now();
        let react = React::new(&cfg.params);
        let lock_path = cfg.device_lock.then(|| {
            let n = ENGINES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            std::env::temp_dir().join(format!("strato-measure-{}-{n}.lock", std::process::id()))
        });
        if let Some(p) = &lock_path {
            cfg.worker.env.push((
                "STRATO_DEVICE_LOCK".into(),
                p.to_string_lossy().into_owned(),
            ));
        }
        Self {
            lock_path,
            pool: Pool::new(cfg.worker.clone(), epoch),
            log: Log::new(epoch),
            rng: Rng::new(cfg.params.seed),
            react,
            cfg,
            epoch,
            round: 0,
            rounds: Vec::new(),
            timeline: Vec::new(),
            deltas: BTreeMap::new(),
            changes: BTreeMap::new(),
            rank: None,
            measured: 0,
        }
    }

    /// Streams every decision as a JSON line to `sink` as well.
    pub fn with_log_sink(mut self, sink: Box<dyn std::io::Write + Send>) -> Self {
        self.log = Log::new(self.epoch).with_sink(sink);
        self
    }

    /// Starts the workers of the first round and waits for them to be warm.
    pub fn warm_up(&mut self) -> Result<()> {
        self.pool.grow(self.dp())?;
        self.pool.wait_ready(&mut self.log)
    }

    /// Current parallelism.
    pub fn dp(&self) -> usize {
        match self.cfg.parallelism {
            Parallelism::Fixed(n) => n.max(1),
            Parallelism::Adaptive => self.react.dp,
        }
    }

    fn run_params(&self) -> RunParams {
        RunParams {
            repeats: self.cfg.repeats,
            warmup: self.cfg.warmup,
            timing: Timing::Device,
            disturbed_retries: self.cfg.params.disturbed_retries,
            stall_limit: self.cfg.params.stall_limit,
            min_run_ns: self.cfg.params.min_run_ms * 1e6,
        }
    }

    /// Measures candidates one at a time on idle workers (no calibration).
    pub fn measure_isolated(
        &mut self,
        candidates: &[&Candidate],
        prefer: &[Option<usize>],
        repeats: u32,
    ) -> Result<Vec<JobResult>> {
        let jobs: Vec<Job<'_>> = candidates
            .iter()
            .enumerate()
            .map(|(i, c)| Job {
                candidate: c,
                prefer: prefer.get(i).copied().flatten(),
            })
            .collect();
        let params = RunParams {
            repeats,
            ..self.run_params()
        };
        let t = calibrate::timeout_s(&self.cfg.params, 1, self.cfg.devices);
        self.pool.run(&jobs, 1, t, params, &mut self.log)
    }

    /// Measures one tuner batch through calibration rounds; REACT state carries over to the
    /// next batch. Indices in the results continue across batches.
    pub fn measure_batch(&mut self, candidates: &[Candidate]) -> Result<Vec<CandidateResult>> {
        let mut out = Vec::with_capacity(candidates.len());
        let mut i = 0;
        while i < candidates.len() {
            let dp = self.dp();
            let size = (dp * self.cfg.devices)
                .max(self.cfg.params.min_round)
                .min(candidates.len() - i);
            let chunk = &candidates[i..i + size];
            let mut results = self.round(chunk, dp)?;
            out.append(&mut results);
            i += size;
        }
        Ok(out)
    }

    fn round(&mut self, chunk: &[Candidate], dp: usize) -> Result<Vec<CandidateResult>> {
        self.round += 1;
        let round = self.round;
        let p = self.cfg.params.clone();
        let g = self.cfg.devices;
        let timeout_s = calibrate::timeout_s(&p, dp, g);
        let start_s = self.epoch.elapsed().as_secs_f64();
        self.timeline.push(DpPoint {
            t_s: start_s,
            round,
            dp,
        });
        self.log.push(Decision::Round {
            round,
            dp,
            timeout_s,
            candidates: chunk.len(),
        });
        let jobs: Vec<Job<'_>> = chunk
            .iter()
            .map(|c| Job {
                candidate: c,
                prefer: None,
            })
            .collect();
        let params = self.run_params();
        let measured = self.pool.run(&jobs, dp, timeout_s, params, &mut self.log)?;
        let stat = self.cfg.statistic;
        let mut results: Vec<CandidateResult> = chunk
            .iter()
            .zip(measured)
            .enumerate()
            .map(|(i, (c, r))| {
                let latency = r.outcome.measurement().map(|m| stat.of(m));
                CandidateResult {
                    index: self.measured + i,
                    name: c.name.clone(),
                    params: c.params.clone(),
                    status: r.outcome.status().into(),
                    outcome: r.outcome,
                    round,
                    dp,
                    parallel_latency_ns: latency,
                    isolated_latency_ns: if dp == 1 { latency } else { None },
                    reported_latency_ns: None,
                    outlier: false,
                    retried_alone: false,
                    slot: r.slot,
                    wall_ns: r.wall_ns,
                    foreign_overlap_ns: 0.0,
                    disturbed: false,
                }
            })
            .collect();
        self.measured += chunk.len();
        self.check_overlaps(&mut results);

        // Failures in a parallel round are re-run alone (Algorithm 2, RemeasureFailed).
        let mut n_err_dp = 0;
        if dp > 1 {
            let failed: Vec<usize> = (0..results.len())
                .filter(|&i| {
                    results[i].outcome.measurement().is_none()
                        && !results[i].outcome.is_deterministic_failure()
                })
                .collect();
            for i in failed {
                let again = self.measure_isolated(
                    &[&chunk[i]],
                    &[Some(results[i].slot)],
                    self.cfg.repeats,
                )?;
                let Some(again) = again.into_iter().next() else {
                    continue;
                };
                self.log.push(Decision::RetryFailed {
                    round,
                    candidate: chunk[i].name.clone(),
                    first: results[i].outcome.status().into(),
                    alone: again.outcome.status().into(),
                });
                let r = &mut results[i];
                if let Some(m) = again.outcome.measurement() {
                    n_err_dp += 1;
                    r.parallel_latency_ns = None;
                    r.isolated_latency_ns = Some(stat.of(m));
                }
                r.status = again.outcome.status().into();
                r.outcome = again.outcome;
                r.retried_alone = true;
                r.slot = again.slot;
                r.wall_ns += again.wall_ns;
            }
        }

        // Outliers and isolated re-measurement (eq. 3, 4).
        let ok: Vec<usize> = (0..results.len())
            .filter(|&i| !results[i].retried_alone && results[i].outcome.measurement().is_some())
            .collect();
        let mut delta: Option<f64> = None;
        let mut n_outliers = 0;
        let mut n_remeasured = 0;
        if !ok.is_empty() && (dp > 1 || p.remeasure_at_dp1) {
            let ratios: Vec<f64> = ok
                .iter()
                .filter_map(|&i| results[i].outcome.measurement())
                .map(|m| {
                    if m.duration_ns > 0.0 {
                        m.latency_ns / m.duration_ns
                    } else {
                        0.0
                    }
                })
                .collect();
            let z = calibrate::modified_z_scores(&ratios);
            let out_pos: Vec<usize> = (0..ok.len())
                .filter(|&k| z[k].abs() > p.z_threshold)
                .collect();
            // Timed runs that stayed disturbed by outside activity are treated as outliers.
            let mut out_pos = out_pos;
            for (k, &i) in ok.iter().enumerate() {
                if results[i].disturbed && !out_pos.contains(&k) {
                    out_pos.push(k);
                }
            }
            n_outliers = out_pos.len();
            for &k in &out_pos {
                results[ok[k]].outlier = true;
            }
            self.log.push(Decision::Outliers {
                round,
                median_ratio: calibrate::median(&ratios),
                outliers: out_pos
                    .iter()
                    .map(|&k| results[ok[k]].name.clone())
                    .collect(),
                z: out_pos.iter().map(|&k| z[k]).collect(),
            });
            let q = calibrate::remeasure_count(out_pos.len(), ok.len(), p.zeta);
            let mut sample: Vec<usize> = out_pos.iter().map(|&k| ok[k]).take(q).collect();
            let mut rest: Vec<usize> = ok.iter().copied().filter(|i| !sample.contains(i)).collect();
            while sample.len() < q && !rest.is_empty() {
                let pick = self.rng.below(rest.len());
                sample.push(rest.swap_remove(pick));
            }
            self.log.push(Decision::Sample {
                round,
                q,
                outliers: out_pos.len().min(q),
                random: q.saturating_sub(out_pos.len()),
                candidates: sample.iter().map(|&i| results[i].name.clone()).collect(),
            });
            let cands: Vec<&Candidate> = sample.iter().map(|&i| &chunk[i]).collect();
            let prefer: Vec<Option<usize>> =
                sample.iter().map(|&i| Some(results[i].slot)).collect();
            let again = self.measure_isolated(&cands, &prefer, self.cfg.repeats)?;
            let mut pairs = Vec::new();
            for (&i, r) in sample.iter().zip(again) {
                let (Some(par), Some(m)) =
                    (results[i].parallel_latency_ns, r.outcome.measurement())
                else {
                    continue;
                };
                let iso = stat.of(m);
                pairs.push((par, iso));
                results[i].isolated_latency_ns = Some(iso);
                self.log.push(Decision::Remeasured {
                    round,
                    candidate: results[i].name.clone(),
                    parallel_ns: par,
                    isolated_ns: iso,
                });
            }
            n_remeasured = pairs.len();
            let d = calibrate::delta_mean(&pairs);
            delta = Some(d);
            self.deltas.entry(dp).or_default().push((d, pairs.len()));
            self.changes
                .entry(dp)
                .or_default()
                .extend(pairs.iter().filter(|p| p.0 > 0.0).map(|(p, i)| (i - p) / p));
        }
        let d = delta.unwrap_or(0.0);
        // The correction of the round's other latencies: eq. 5 scales by 1 - delta_mean; the
        // signed correction by 1 + the median relative change of every pair re-measured at
        // this parallelism so far (robust, and it keeps the direction).
        let scale = if p.signed_correction {
            match self.changes.get(&dp) {
                Some(c) if !c.is_empty() && delta.is_some() => 1.0 + calibrate::median(c),
                _ => 1.0,
            }
        } else {
            1.0 - d
        };
        for r in &mut results {
            let Some(m) = r.outcome.measurement() else {
                continue;
            };
            r.reported_latency_ns = Some(match r.isolated_latency_ns {
                Some(iso) => iso,
                // Eq. 5 with the ratio of the chosen statistic to the duration.
                None if !p.signed_correction => {
                    calibrate::scaled_latency(stat.of(m), m.duration_ns, d)
                }
                None => stat.of(m) * scale,
            });
        }
        self.log.push(Decision::Delta {
            round,
            dp,
            delta_mean: d,
            samples: n_remeasured,
            scale,
        });
        match self.cfg.parallelism {
            Parallelism::Adaptive => {
                let step = self.react.update(d, n_err_dp);
                self.log.push(Decision::React { round, step });
            }
            Parallelism::Fixed(n) => self.log.push(Decision::Pinned { round, dp: n }),
        }
        let successes = results
            .iter()
            .filter(|r| r.outcome.measurement().is_some())
            .count();
        self.rounds.push(RoundSummary {
            round,
            dp,
            timeout_s,
            start_s,
            end_s: self.epoch.elapsed().as_secs_f64(),
            candidates: chunk.len(),
            successes,
            failures: chunk.len() - successes,
            n_err_dp,
            outliers: n_outliers,
            remeasured: n_remeasured,
            delta_mean: delta,
        });
        Ok(results)
    }

    /// Marks each result's overlap with other workers' activity (their requests in this round
    /// and their start-ups) during its timed runs, and whether its timed runs stayed disturbed
    /// by outside activity (CPU pressure stall above `stall_limit`).
    fn check_overlaps(&self, results: &mut [CandidateResult]) {
        let mut windows: Vec<crate::pool::ActiveWindow> = self.pool.startups.clone();
        for r in results.iter() {
            if let Some(m) = r.outcome.measurement() {
                // Preparation, then timed runs and teardown (not the wait in between).
                if m.prep_to_ns > 0 {
                    windows.push(crate::pool::ActiveWindow {
                        slot: r.slot,
                        from_ns: m.active_from_ns,
                        to_ns: m.prep_to_ns,
                    });
                }
                if m.active_to_ns > 0 {
                    windows.push(crate::pool::ActiveWindow {
                        slot: r.slot,
                        from_ns: m.timed_from_ns,
                        to_ns: m.active_to_ns,
                    });
                }
            }
        }
        let limit = self.cfg.params.stall_limit;
        for r in results.iter_mut() {
            let Some(m) = r.outcome.measurement() else {
                continue;
            };
            if m.timed_to_ns > 0 {
                r.foreign_overlap_ns = windows
                    .iter()
                    .filter(|w| w.slot != r.slot)
                    .map(|w| {
                        let from = w.from_ns.max(m.timed_from_ns);
                        let to = w.to_ns.min(m.timed_to_ns);
                        to.saturating_sub(from) as f64
                    })
                    .sum();
            }
            r.disturbed = match m.cpu_stall_ns {
                Some(s) if m.duration_ns > 0.0 => s / m.duration_ns > limit,
                _ => false,
            };
        }
    }

    /// Relative uncertainty of a latency measured at parallelism `dp` (> 1) and corrected:
    /// the `rank_quantile` of the distortions `|l_iso - l_par| / l_par` measured at that level
    /// in this run (at any level when none at this one), never below `rank_noise`.
    fn uncertainty_at(&self, dp: usize) -> f64 {
        let p = &self.cfg.params;
        let abs = |v: &Vec<f64>| v.iter().map(|x| x.abs()).collect::<Vec<f64>>();
        let measured = match self.changes.get(&dp) {
            Some(v) if !v.is_empty() => calibrate::quantile(&abs(v), p.rank_quantile),
            _ => {
                let all: Vec<f64> = self.changes.values().flat_map(abs).collect();
                if all.is_empty() {
                    // Measured in parallel with nothing re-measured: no evidence either way.
                    2.0 * p.rank_noise
                } else {
                    calibrate::quantile(&all, p.rank_quantile)
                }
            }
        };
        measured.max(p.rank_noise)
    }

    /// Rank selection. The window: every candidate that could be the fastest given the
    /// uncertainty of its reported latency (its parallelism level's measured distortion, or
    /// `rank_noise` when measured alone; [`calibrate::rank_window`]), at least `ceil(K n)`, at
    /// most `rank_max`. Then interleaved passes re-measure the window alone; after each pass
    /// candidates whose 95% interval lies above the leader's are dropped, until one is left,
    /// every remaining interval is within `rank_ci` (after 3 passes), or `rank_passes`.
    /// Each candidate stands for the median of its isolated samples, with that median's
    /// distribution-free 95% interval ([`calibrate::median_ci95`]); for dropping a candidate
    /// intervals are never taken narrower than `rank_noise / sqrt(n)`.
    /// The best is the lowest median isolated latency.
    pub fn rank_select(
        &mut self,
        candidates: &[Candidate],
        results: &mut [CandidateResult],
    ) -> Result<Option<Best>> {
        let p = self.cfg.params.clone();
        let ok: Vec<usize> = (0..results.len())
            .filter(|&i| results[i].reported_latency_ns.is_some())
            .collect();
        if ok.is_empty() {
            self.log.push(Decision::RankSelection {
                k: 0,
                candidates: vec![],
                isolated_ns: vec![],
                best: None,
            });
            return Ok(None);
        }
        let mut uncertainty_by_dp: BTreeMap<usize, f64> = BTreeMap::new();
        let items: Vec<(f64, f64)> = ok
            .iter()
            .map(|&i| {
                let r = &results[i];
                let (key, u) = if r.isolated_latency_ns.is_some() {
                    (0, p.rank_noise)
                } else {
                    (r.dp, self.uncertainty_at(r.dp))
                };
                uncertainty_by_dp.insert(key, u);
                (r.reported_latency_ns.unwrap_or(f64::INFINITY), u)
            })
            .collect();
        let min_count = calibrate::rank_count(results.len(), p.top_k);
        let window: Vec<usize> = calibrate::rank_window(&items, min_count, p.rank_max)
            .into_iter()
            .map(|k| ok[k])
            .collect();
        self.log.push(Decision::RankWindow {
            uncertainty_by_dp: uncertainty_by_dp.clone(),
            min_count,
            size: window.len(),
            candidates: window.iter().map(|&i| results[i].name.clone()).collect(),
        });
        let mut samples: Vec<Vec<f64>> = vec![Vec::new(); window.len()];
        let mut alive: Vec<usize> = (0..window.len()).collect();
        let mut passes = 0;
        let mut measurements = 0;
        // The median of a candidate's isolated samples and its distribution-free 95%
        // interval, never narrower than the prior noise of an isolated sample over sqrt(n)
        // (two samples that happen to agree do not make a candidate certain on a CPU device,
        // whose latencies jump when a core is taken away). The median, not the mean: a sample
        // taken while another process held a core is 2-3x slower, and one such sample moved
        // a mean of a few samples past its rivals.
        let interval = |v: &Vec<f64>| -> Option<calibrate::MedianCi> {
            calibrate::median_ci95(v).map(|c| c.floored(p.rank_noise))
        };
        for pass in 0..p.rank_passes.max(1) {
            passes = pass + 1;
            // Interleaved: each pass in a rotated order, so that slow drifts hit every
            // candidate alike.
            let mut order = alive.clone();
            if !order.is_empty() {
                let k = pass % order.len();
                order.rotate_left(k);
            }
            let cands: Vec<&Candidate> = order.iter().map(|&w| &candidates[window[w]]).collect();
            let prefer: Vec<Option<usize>> = order
                .iter()
                .map(|&w| Some(results[window[w]].slot))
                .collect();
            let again = self.measure_isolated(&cands, &prefer, self.cfg.repeats)?;
            for (&w, r) in order.iter().zip(again) {
                if let Some(m) = r.outcome.measurement() {
                    samples[w].push(self.cfg.statistic.of(m));
                    measurements += 1;
                }
            }
            alive.retain(|&w| !samples[w].is_empty());
            let ci: BTreeMap<usize, calibrate::MedianCi> = alive
                .iter()
                .filter_map(|&w| interval(&samples[w]).map(|c| (w, c)))
                .collect();
            let Some(&lead) = alive
                .iter()
                .min_by(|&&a, &&b| ci[&a].median.total_cmp(&ci[&b].median))
            else {
                break;
            };
            // A single sample has no interval yet: nothing is dropped after the first pass.
            if pass > 0 {
                let lead_hi = ci[&lead].hi;
                alive.retain(|&w| w == lead || ci[&w].lo <= lead_hi);
            }
            self.log.push(Decision::RankPass {
                pass: passes,
                candidates: alive
                    .iter()
                    .map(|&w| results[window[w]].name.clone())
                    .collect(),
                median_ns: alive.iter().map(|&w| ci[&w].median).collect(),
                half_ns: alive.iter().map(|&w| ci[&w].half()).collect(),
            });
            if alive.len() <= 1 {
                break;
            }
            // Done when every remaining candidate is known to within rank_ci (its own
            // interval, without the floor that only guards elimination).
            if passes >= 3
                && alive.iter().all(|&w| {
                    calibrate::median_ci95(&samples[w])
                        .is_some_and(|c| c.half() <= p.rank_ci * c.median)
                })
            {
                break;
            }
        }
        let mut best: Option<Best> = None;
        let mut iso = Vec::new();
        for (w, &i) in window.iter().enumerate() {
            let Some(c) = calibrate::median_ci95(&samples[w]) else {
                iso.push(f64::NAN);
                continue;
            };
            let m = c.median;
            iso.push(m);
            results[i].isolated_latency_ns = Some(m);
            if alive.contains(&w) && best.as_ref().is_none_or(|b| m < b.latency_ns) {
                best = Some(Best {
                    index: results[i].index,
                    name: results[i].name.clone(),
                    latency_ns: m,
                    ci95_ns: (c.n > 1).then(|| c.half()),
                    samples: samples[w].len(),
                });
            }
        }
        self.log.push(Decision::RankSelection {
            k: window.len(),
            candidates: window.iter().map(|&i| results[i].name.clone()).collect(),
            isolated_ns: iso,
            best: best.as_ref().map(|b| b.name.clone()),
        });
        self.rank = Some(RankSummary {
            uncertainty_by_dp,
            window: window.len(),
            passes,
            finalists: alive.len(),
            measurements,
        });
        Ok(best)
    }

    /// A whole tuning run: all candidates through calibration rounds, then rank selection.
    /// The time counts from the call (worker start-up included) to the workers' shutdown.
    pub fn measure(mut self, candidates: &[Candidate]) -> Result<RunReport> {
        // (the engine's Drop removes the lock file)
        let t0 = Instant::now();
        let mut results = self.measure_batch(candidates)?;
        let best = self.rank_select(candidates, &mut results)?;
        self.pool.shutdown();
        let total_s = t0.elapsed().as_secs_f64();
        Ok(self.report(results, best, total_s))
    }

    /// Builds the report of a run from its results.
    pub fn report(
        &mut self,
        results: Vec<CandidateResult>,
        best: Option<Best>,
        total_s: f64,
    ) -> RunReport {
        let mut counts = BTreeMap::new();
        for r in &results {
            *counts.entry(r.status.clone()).or_insert(0) += 1;
        }
        let delta_by_dp = self
            .deltas
            .iter()
            .map(|(&dp, v)| DeltaAtDp {
                dp,
                rounds: v.len(),
                samples: v.iter().map(|x| x.1).sum(),
                delta_mean: v.iter().map(|x| x.0).sum::<f64>() / v.len().max(1) as f64,
                delta_max: v.iter().map(|x| x.0).fold(0.0, f64::max),
            })
            .collect();
        RunReport {
            device: self.pool.device.clone(),
            parallelism: self.cfg.parallelism,
            device_lock: self.cfg.device_lock,
            statistic: self.cfg.statistic,
            total_s,
            candidates: results.len(),
            counts,
            best,
            rounds: self.rounds.clone(),
            dp_timeline: self.timeline.clone(),
            delta_by_dp,
            workers_started: self.pool.started,
            workers_replaced: self.pool.replaced,
            overlapped_measurements: results
                .iter()
                .filter(|r| r.foreign_overlap_ns > 0.0)
                .count(),
            disturbed_measurements: results.iter().filter(|r| r.disturbed).count(),
            rank: self.rank.clone(),
            results,
            log: std::mem::take(&mut self.log.records),
        }
    }

    /// Stops the workers.
    pub fn shutdown(&mut self) {
        self.pool.shutdown();
    }
}
